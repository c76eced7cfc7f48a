# test_elections_bench.sh: bench/elections (issue 40, item 5) at smoke size,
# so it cannot rot: its own redis-server, etcd (when installed), picketd and
# fenced-kv; a few handovers by resign and by death, a short campaigns/s run
# and 50 observers. It must exit 0 (every phase clean), print every row of
# its table with figures, keep FIFO order in every round, see the stale
# term refused, and leave none of its processes or temp dirs behind. No
# timing targets: docs/performance.md has the full run's figures. Bad
# arguments exit 2.
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
B="$PICKET_SOURCE_DIR/bench/elections"
backend=both
command -v etcd > /dev/null || backend=redis
before=$(ls -d /tmp/picket-elections-* 2>/dev/null | wc -l)
python3 "$B" --bin "$PICKET_BIN_DIR" --backend "$backend" --rounds 5 --death-rounds 1 --death-ttl-ms 300 \
  --duration 0.5 --ops 4000 --clients 4 --observers 50 --changes 2 --max-seconds 90 \
  --json "$H_DIR/out.json" > "$H_DIR/out" 2> "$H_DIR/err" ||
  h_fail "bench/elections exited $?: $(cat "$H_DIR/out" "$H_DIR/err")"
cat "$H_DIR/out"
python3 - "$H_DIR/out.json" "$backend" <<'PY' || h_fail "bench/elections' results: $(cat "$H_DIR/out")"
import json, sys
j = json.load(open(sys.argv[1]))
want = ["redis", "etcd"] if sys.argv[2] == "both" else ["redis"]
assert not j["failed"], j
assert [r["backend"] for r in j["results"]] == want, j
for r in j["results"]:
    rs, d, c, o = r["resign"], r["death"], r["campaigns"], r["observe"]
    assert rs["rounds"] == 5 and rs["fifo_ok"] == 5 and rs["stale_refused"], rs
    assert 0 < rs["grant_p50"] <= rs["total_p50"], rs
    assert d["rounds"] == 1 and d["total_p50"] >= 300, d  # bounded below by the TTL
    assert c["cycles"] > 0 and c["bench_errors"] == 0, c
    assert o["live"] == 50 and o["changes"] == 2 and o["all_max"] > 0, o
PY
for row in 'handover by resign' 'handover by death' 'campaigns/s' 'observe fan-out'; do
  grep -Eq "^\| $row.* \| [0-9]" "$H_DIR/out" || h_fail "no '$row' row with figures: $(cat "$H_DIR/out")"
done
if grep -q '| failed' "$H_DIR/out"; then h_fail "a failed cell: $(cat "$H_DIR/out")"; fi
# It stopped what it started and removed its temp dir.
[ "$(ls -d /tmp/picket-elections-* 2>/dev/null | wc -l)" -le "$before" ] || h_fail "a temp dir left behind"
for a in "--backend nope" "--rounds 0" "--observers -1" "--duration x" "--nope"; do
  # shellcheck disable=SC2086
  python3 "$B" $a > /dev/null 2>&1
  rc=$?
  [ "$rc" = 2 ] || h_fail "bench/elections $a exited $rc, want 2"
done
# picket-bench --primitive election has no floor to run.
"$PICKET_BIN_DIR/picket-bench" --server http://127.0.0.1:1 --redis redis://127.0.0.1:1 --primitive election \
  > /dev/null 2> "$H_DIR/pb.err"
rc=$?
[ "$rc" = 2 ] && grep -q 'election has no floor' "$H_DIR/pb.err" ||
  h_fail "picket-bench --primitive election --redis exited $rc: $(cat "$H_DIR/pb.err")"
echo "elections_bench_smoke: ok"
