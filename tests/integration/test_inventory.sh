#!/usr/bin/env bash
# test_inventory.sh: examples/inventory-sync end to end, both modes, fixed
# seed. Without fencing the paused worker's write must be applied over a
# newer one (at least one lost update); with fencing it must be refused
# (at least one rejected stale write) and the stock must come out exact.
# Also: bad flags exit 2 with one line, and the run leaves no process or
# temp dir behind.
set -u
: "${PICKET_BIN_DIR:?PICKET_BIN_DIR must name build/bin}"
: "${PICKET_SOURCE_DIR:?PICKET_SOURCE_DIR must name the source tree}"
RUN="$PICKET_SOURCE_DIR/examples/inventory-sync/run"
OUT=$(mktemp -d /tmp/picket-inv-test-XXXXXX)
trap 'rm -rf "$OUT"' EXIT
# The runs make their temp dirs here, so this test sees only its own.
export TMPDIR="$OUT/tmp"
mkdir "$TMPDIR"
fail() { echo "FAIL: $*" >&2; exit 1; }

field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<" $2"; }

run_mode() { # run_mode MODE: runs it, prints its output, sets LAST
  local mode=$1
  "$RUN" --mode "$mode" --seed 7 --workers 3 --rounds 4 >"$OUT/$mode.out" 2>"$OUT/$mode.err"
  local rc=$?
  cat "$OUT/$mode.out"
  [ $rc -eq 0 ] || { cat "$OUT/$mode.err" >&2; fail "$mode: run exited $rc"; }
  LAST=$(tail -n 1 "$OUT/$mode.out")
  [[ $LAST =~ ^mode=$mode\ applied=[0-9]+\ rejected_stale=[0-9]+\ anomalies=[0-9]+$ ]] ||
    fail "$mode: last line is '$LAST'"
  [ -z "$(ls -A "$TMPDIR")" ] || fail "$mode: left a temp dir behind: $(ls "$TMPDIR")"
  grep -q 'PAUSED (SIGSTOP' "$OUT/$mode.out" || fail "$mode: no job was paused"
  grep -q 'RESUMED (SIGCONT)' "$OUT/$mode.out" || fail "$mode: the paused job was not resumed"
}

run_mode no-fence
[ "$(field anomalies "$LAST")" -ge 1 ] || fail "no-fence: want at least one anomaly: $LAST"
[ "$(field rejected_stale "$LAST")" -eq 0 ] || fail "no-fence: a plain store rejects nothing: $LAST"
echo "ok - no-fence: the paused worker's write was applied over a newer one"

run_mode fence
[ "$(field anomalies "$LAST")" -eq 0 ] || fail "fence: want no anomaly: $LAST"
[ "$(field rejected_stale "$LAST")" -ge 1 ] || fail "fence: want a rejected stale write: $LAST"
[ "$(field applied "$LAST")" -ge 12 ] || fail "fence: want at least 3 x 4 applied writes: $LAST"
grep -q 'REJECTED 409 stale_fence' "$OUT/fence.out" || fail "fence: no 409 in the output"
echo "ok - fence: the paused worker's write was refused, the stock is exact"

# No process of either run survives it (their temp dirs name them).
if pgrep -f "$TMPDIR/inventory-sync-" >/dev/null; then
  fail "processes left behind: $(pgrep -af "$TMPDIR/inventory-sync-")"
fi

for args in "" "--mode" "--mode maybe" "--mode fence --seed x" "--mode fence --workers 1" \
  "--mode fence --workers 9" "--mode fence --rounds 0" "--mode fence --bogus"; do
  # shellcheck disable=SC2086
  "$RUN" $args >"$OUT/bad.out" 2>"$OUT/bad.err"
  rc=$?
  [ $rc -eq 2 ] || fail "'$args': exit $rc, want 2"
  [ "$(wc -l <"$OUT/bad.err")" -eq 1 ] || fail "'$args': want one line on stderr: $(cat "$OUT/bad.err")"
  [ ! -s "$OUT/bad.out" ] || fail "'$args': printed to stdout"
done
echo "ok - bad flags exit 2 with one line"
echo "PASS: inventory-sync"
