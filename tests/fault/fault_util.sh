# fault_util.sh: shell helpers shared by the fault suite's shell tests, on
# top of tests/harness/harness.sh (source that first).
#
#   jget KEY < json             # prints member KEY of a compact JSON reply
#   f_start_fencedkv            # starts fenced-kv; sets KV (its base URL)
#   f_restart_redis             # SIGTERM Redis and start it again, same conf

# jget KEY < json: the first member KEY's value, at any depth, from the
# compact one-line JSON that picketd and fenced-kv reply with: a string
# without its quotes, a number, true/false/null; "null" when absent. Plain
# bash, because starting python3 costs up to a second on a loaded machine.
jget() {
  local s
  s=$(cat)
  if [[ $s =~ \"$1\":\"([^\"]*)\" ]] || [[ $s =~ \"$1\":([^,}\"]*) ]]; then
    echo "${BASH_REMATCH[1]}"
  else
    echo null
  fi
}

f_start_fencedkv() {
  "$PICKET_BIN_DIR/fenced-kv" --listen 127.0.0.1:0 --db "$H_DIR/kv.db" \
    --port-file "$H_DIR/kv.port" >> "$H_DIR/fenced-kv.log" 2>&1 &
  H_PIDS="$H_PIDS $!"
  for _ in $(seq 1 500); do
    if [ -s "$H_DIR/kv.port" ]; then
      KV="http://127.0.0.1:$(cat "$H_DIR/kv.port")"
      return 0
    fi
    sleep 0.02
  done
  h_fail "fenced-kv did not write its port"
}

# A clean shutdown (the kindest case for persistence), then the same
# config, socket and dir again.
f_restart_redis() {
  kill -TERM "$REDIS_PID"
  wait "$REDIS_PID" 2>/dev/null
  redis-server "$H_DIR/redis.conf" >> "$H_DIR/redis.log" 2>&1 &
  REDIS_PID=$!
  H_PIDS="$H_PIDS $REDIS_PID"
  for _ in $(seq 1 500); do
    [ "$(h_redis ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.02
  done
  h_fail "redis-server did not restart"
}
