# test_no_persistence.sh: Redis restarted without persistence (appendonly
# no, no RDB) loses the fence counters, exactly as the README warns: picketd
# says so in its startup log, fences restart at 1 after the restart, and
# fenced storage that has seen the old fences then refuses the new holder
# (409 stale_fence) until the counter catches up. A control run with AOF on
# shows the same restart keeping the counter.
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/fault/fault_util.sh"

# acquire_release NAME: prints the fence of one grant, then releases it.
acquire_release() {
  local out lease
  out=$(curl -sS -X POST "$PICKETD_URL/v1/locks/$1/acquire" -d '{"ttl_ms":10000}') ||
    h_fail "acquire $1: no reply"
  lease=$(jget lease <<< "$out")
  [[ "$lease" =~ ^[0-9a-f]{32}$ ]] || h_fail "acquire $1: $out"
  curl -sS -o /dev/null -X POST "$PICKETD_URL/v1/locks/$1/release" -d "{\"lease\":\"$lease\"}"
  jget fence <<< "$out"
}

# fence_after_restart AOF: fences of lock "orders" 1..5, a Redis restart,
# then the next fence into AFTER (no subshell: the pids must reach cleanup).
fence_after_restart() {
  h_start_redis "$1"
  h_start_picketd
  for i in 1 2 3 4 5; do
    [ "$(acquire_release orders)" = "$i" ] || h_fail "fence $i before the restart"
  done
  f_restart_redis
  AFTER=$(acquire_release orders)
}

# Without persistence: the warning at startup, and fences restart.
fence_after_restart no
after=$AFTER
grep -q 'appendonly is no' "$H_DIR/picketd.log" || h_fail "no appendonly warning at startup"
grep 'appendonly is no' "$H_DIR/picketd.log" | head -1
[ "$after" = 1 ] || h_fail "appendonly no: fence after the restart is $after, not 1"
echo "appendonly no: fences 1..5, Redis restarted, next fence $after"

# ... and fenced storage that saw fence 5 now refuses the new holder.
f_start_fencedkv
put() { # put FENCE VALUE: prints the HTTP status
  curl -sS -o "$H_DIR/put.out" -w '%{http_code}' -X PUT "$KV/kv/total" \
    -H 'Picket-Lock: orders' -H "Picket-Fence: $1" --data-binary "$2"
}
[ "$(put 5 before)" = 200 ] || h_fail "fenced-kv refused fence 5: $(cat "$H_DIR/put.out")"
[ "$(put "$after" after)" = 409 ] || h_fail "fenced-kv admitted fence $after after 5"
[ "$(jget code < "$H_DIR/put.out")" = stale_fence ] || h_fail "$(cat "$H_DIR/put.out")"
echo "fenced-kv after the restart: $(cat "$H_DIR/put.out")"

# Control: with AOF (appendfsync always) the same restart keeps the counter.
kill -KILL $H_PIDS 2>/dev/null
wait 2>/dev/null
rm -rf "${H_DIR:?}"/*
H_PIDS=""
fence_after_restart yes
after=$AFTER
[ "$after" = 6 ] || h_fail "appendonly yes: fence after the restart is $after, not 6"
grep -q 'appendonly is no' "$H_DIR/picketd.log" && h_fail "appendonly warning with AOF on"
echo "appendonly yes: fences 1..5, Redis restarted, next fence $after"
echo PASS
