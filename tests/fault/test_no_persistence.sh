# test_no_persistence.sh: Redis loses every fence counter, with fenced-kv
# guarding a key, as real processes.
#
# 1. --fence-floor none (the plain counter), Redis restarted without
#    persistence (appendonly no, no RDB): picketd warns at startup, fences
#    restart at 1, and fenced-kv, which has seen the old fences, refuses the
#    new holder (409 stale_fence) until the counter catches up.
# 2. --fence-floor clock (the default), the same restart, then FLUSHALL: the
#    startup log says what the floor covers (and no appendonly warning), the
#    next fence is above every fence before, fenced-kv admits the new
#    holder's write and refuses the old holder's.
# 3. Control: --fence-floor none with AOF on: the restart keeps the counter.
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/fault/fault_util.sh"

# acquire_release NAME: prints the fence of one grant, then releases it.
acquire_release() {
  local out lease
  out=$(curl -sS -X POST "$PICKETD_URL/v1/locks/$1/acquire" -H 'Content-Type: application/json' -d '{"ttl_ms":10000}') ||
    h_fail "acquire $1: no reply"
  lease=$(jget lease <<< "$out")
  [[ "$lease" =~ ^[0-9a-f]{32}$ ]] || h_fail "acquire $1: $out"
  curl -sS -o /dev/null -X POST "$PICKETD_URL/v1/locks/$1/release" -H 'Content-Type: application/json' -d "{\"lease\":\"$lease\"}"
  jget fence <<< "$out"
}

# five_grants: five grants of lock "orders", each fence following the last
# under the floor in use ($PICKET_FENCE_FLOOR); the last one into LAST.
five_grants() {
  LAST=0
  local f
  for i in 1 2 3 4 5; do
    f=$(acquire_release orders)
    h_fence_follows "$LAST" "$f" 0 || h_fail "grant $i: fence $f after $LAST"
    LAST=$f
  done
}

put() { # put FENCE VALUE: prints the HTTP status
  curl -sS -o "$H_DIR/put.out" -w '%{http_code}' -X PUT "$KV/kv/total" \
    -H 'Picket-Lock: orders' -H "Picket-Fence: $1" --data-binary "$2"
}

reset() { # stops every process of this test and empties the dir
  kill -KILL $H_PIDS 2>/dev/null
  wait 2>/dev/null
  rm -rf "${H_DIR:?}"/*
  H_PIDS=""
}

# 1. The plain counter, without persistence: the warning, and fences restart.
export PICKET_FENCE_FLOOR=none
h_start_redis no
h_start_picketd
f_start_fencedkv
five_grants
[ "$(put "$LAST" before)" = 200 ] || h_fail "fenced-kv refused fence $LAST: $(cat "$H_DIR/put.out")"
f_restart_redis
after=$(acquire_release orders)
grep -q 'appendonly is no' "$H_DIR/picketd.log" || h_fail "no appendonly warning at startup"
grep 'appendonly is no' "$H_DIR/picketd.log" | head -1
[ "$after" = 1 ] || h_fail "none, appendonly no: fence after the restart is $after, not 1"
echo "none, appendonly no: fences 1..5, Redis restarted, next fence $after"
[ "$(put "$after" after)" = 409 ] || h_fail "fenced-kv admitted fence $after after 5"
[ "$(jget code < "$H_DIR/put.out")" = stale_fence ] || h_fail "$(cat "$H_DIR/put.out")"
echo "fenced-kv refuses the new holder: $(cat "$H_DIR/put.out")"
reset

# 2. The clock floor: the same restart, then FLUSHALL. Each time the old
#    holder (the last fence before) wrote first; the new holder's fence is
#    above it, its write is admitted, and the old holder's next write is not.
export PICKET_FENCE_FLOOR=clock
h_start_redis no
h_start_picketd
f_start_fencedkv
grep -q "floored by Redis's clock" "$H_DIR/picketd.log" || h_fail "no clock-floor line at startup"
grep -q 'appendonly is no' "$H_DIR/picketd.log" && h_fail "appendonly warning with the clock floor"
grep "floored by Redis's clock" "$H_DIR/picketd.log" | head -1
for loss in restart flushall; do
  five_grants
  old=$LAST
  [ "$(put "$old" "old-$loss")" = 200 ] || h_fail "$loss: fenced-kv refused $old: $(cat "$H_DIR/put.out")"
  if [ $loss = restart ]; then f_restart_redis; else h_redis flushall > /dev/null; fi
  [ "$(h_redis exists 'picket:{orders}:fence')" = 0 ] || h_fail "$loss: the counter survived"
  new=$(acquire_release orders)
  [ "$new" -gt "$old" ] || h_fail "clock, $loss: fence $new after $old"
  [ "$(put "$new" "new-$loss")" = 200 ] || h_fail "$loss: fenced-kv refused the new holder $new: $(cat "$H_DIR/put.out")"
  [ "$(put "$old" "zombie-$loss")" = 409 ] || h_fail "$loss: fenced-kv admitted the old holder $old"
  [ "$(jget code < "$H_DIR/put.out")" = stale_fence ] || h_fail "$(cat "$H_DIR/put.out")"
  echo "clock, $loss: last fence before $old, next fence $new; fenced-kv admits it and refuses $old"
done
reset

# 3. Control: with AOF (appendfsync always) the same restart keeps the counter.
export PICKET_FENCE_FLOOR=none
h_start_redis yes
h_start_picketd
five_grants
f_restart_redis
after=$(acquire_release orders)
[ "$after" = 6 ] || h_fail "none, appendonly yes: fence after the restart is $after, not 6"
grep -q 'appendonly is no' "$H_DIR/picketd.log" && h_fail "appendonly warning with AOF on"
echo "none, appendonly yes: fences 1..5, Redis restarted, next fence $after"
echo PASS
