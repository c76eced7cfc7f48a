#!/usr/bin/env bash
# job.sh: one inventory sync, run by a worker under `picket run
# inventory-sync -- job.sh`, so it holds the lock and has PICKET_LOCK,
# PICKET_FENCE and PICKET_DEADLINE_MS (Unix ms) in its environment.
#
# The job: (fence mode: claim the fence first), read the stock from
# fenced-kv, work a little, check the lease's deadline, write stock - 1.
# That read-modify-write is what the article's workers did, and what a
# second holder turns into a lost update.
#
# One job of the run pauses "like a GC pause" right after its deadline check
# and before its write: it leaves a marker and stops itself (SIGSTOP); the
# run script stops its `picket run` too, so nothing renews the lease, lets
# the lease expire and another worker take the lock and write, and only then
# resumes this job (SIGCONT). The check passed before the pause, so the job
# writes anyway, as a resumed process does: only the store can refuse it.
#
# Environment from the worker: INV_DIR (run dir), INV_KV (fenced-kv URL),
# INV_MODE (fence|no-fence), INV_WORKER, INV_WORK_MS, INV_RESULT (file to
# write the outcome to: applied|stale|expired|error|skipped), INV_PAUSE (1:
# this job may be the one that pauses), INV_PLANNED (writes to apply in
# all), INV_T0 (run start, Unix ms).
set -u
LOCK=$PICKET_LOCK
FENCE=$PICKET_FENCE
BODY="$INV_DIR/body.$$"

now_ms() { date +%s%3N; }
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); } # ms -> "s.mmm"
say() { printf '%7ss  worker %s  fence %-3s %s\n' "$(secs $(($(now_ms) - INV_T0)))" \
  "$INV_WORKER" "$FENCE" "$*"; }
finish() { # finish RESULT MESSAGE
  printf '%s\n' "$1" >"$INV_RESULT"
  say "$2"
  rm -f "$BODY"
  exit 0
}
http() { # http METHOD PATH [curl args...]: prints the status, body in $BODY
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 10 -o "$BODY" -w '%{http_code}' -X "$m" "$INV_KV$p" "$@" 2>/dev/null || echo 000
}
highest() { sed -n 's/.*"highest":\([0-9]*\).*/\1/p' "$BODY"; }

# Under the lock, the count of applied writes is exact: stop when the
# planned ones are done (and the pause is over, so a new holder always
# comes along while the paused job is stopped).
if [ -e "$INV_DIR/pause-over" ] &&
  [ "$(cat "$INV_DIR"/results/* 2>/dev/null | grep -c '^applied$')" -ge "$INV_PLANNED" ]; then
  echo skipped >"$INV_RESULT"
  exit 0
fi

fence_headers=()
if [ "$INV_MODE" = fence ]; then
  fence_headers=(-H "Picket-Lock: $LOCK" -H "Picket-Fence: $FENCE")
  # Claim first: from here on, no holder older than us can write.
  st=$(http POST "/fence/$LOCK/claim" -H "Picket-Fence: $FENCE")
  [ "$st" = 409 ] && finish stale "claim refused: stale_fence (highest $(highest))"
  [ "$st" = 200 ] || finish error "claim failed: HTTP $st"
fi

st=$(http GET /kv/stock)
[ "$st" = 200 ] || finish error "read failed: HTTP $st"
stock=$(sed -n 's/.*"value":"\([0-9]*\)".*/\1/p' "$BODY")
version=$(sed -n 's/.*"version":\([0-9]*\).*/\1/p' "$BODY")
[ -n "$stock" ] && [ -n "$version" ] || finish error "read: unexpected reply $(cat "$BODY")"

sleep "$(secs "$INV_WORK_MS")" # the sync's own work

# A careful job stops touching storage at its deadline (with a margin)...
[ "$(now_ms)" -lt $((PICKET_DEADLINE_MS - 100)) ] || finish expired "deadline passed before the write; not writing"

# ...but a pause can come right after the check.
if [ "${INV_PAUSE:-0}" = 1 ] && mkdir "$INV_DIR/pause" 2>/dev/null; then
  say "read stock=$stock (v$version); now PAUSED (SIGSTOP, as a GC pause) past its ${INV_TTL_S}s TTL"
  echo "$$ $PPID $version $FENCE $INV_WORKER" >"$INV_DIR/pause/marker.tmp"
  mv "$INV_DIR/pause/marker.tmp" "$INV_DIR/pause/marker"
  kill -STOP $$
  say "RESUMED (SIGCONT); still believes it holds the lock, writes stock=$((stock - 1))"
fi

new=$((stock - 1))
st=$(http PUT /kv/stock "${fence_headers[@]}" --data-binary "$new")
case $st in
200) finish applied "read stock=$stock (v$version) -> wrote $new: applied (v$(sed -n 's/.*"version":\([0-9]*\).*/\1/p' "$BODY"))" ;;
409) finish stale "read stock=$stock (v$version) -> wrote $new: REJECTED 409 stale_fence (highest $(highest))" ;;
*) finish error "write failed: HTTP $st $(cat "$BODY")" ;;
esac
