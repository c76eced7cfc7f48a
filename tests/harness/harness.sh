# harness.sh: the shell side of the test harness (source it from a test).
# Starts a throwaway redis-server on a unix socket and picketd on a free
# loopback port, in one temp dir that h_cleanup removes on any exit.
#
#   . tests/harness/harness.sh        # needs PICKET_BIN_DIR (ctest sets it)
#   h_start_redis [appendonly]        # sets REDIS_SOCK REDIS_URL REDIS_PID
#   h_start_picketd [flags...]        # sets PICKETD_URL PICKETD_PORT PICKETD_PID
#   h_start_servers [flags...]        # both, and PICKET_SERVER for the picket command
#   h_start_fenced_kv                 # fenced-kv on a free port; sets KV_URL
#   h_fail "message"                  # prints and exits 1
#
# With PICKET_TEST_BACKEND=etcd, h_start_redis also starts a one-member
# etcd (ETCD_URL) and h_start_picketd gives picketd --etcd instead of
# --redis, as the C harness does (tests/harness/harness.h).
set -u
: "${PICKET_BIN_DIR:?PICKET_BIN_DIR must name build/bin}"
H_DIR=$(mktemp -d /tmp/picket-sh-XXXXXX)
H_PIDS=""

h_cleanup() {
  for p in $H_PIDS; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${HARNESS_KEEP:-}" ] || rm -rf "$H_DIR"
}
trap h_cleanup EXIT
trap 'exit 130' INT TERM

h_fail() {
  echo "FAIL: $*" >&2
  for f in "$H_DIR"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}

h_now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

h_start_redis() {
  local aof=${1:-no}
  REDIS_SOCK="$H_DIR/redis.sock"
  REDIS_URL="unix://$REDIS_SOCK"
  cat > "$H_DIR/redis.conf" <<CONF
port 0
unixsocket $REDIS_SOCK
unixsocketperm 700
dir $H_DIR
save ""
appendonly $aof
appendfsync always
maxmemory-policy noeviction
enable-debug-command yes
CONF
  redis-server "$H_DIR/redis.conf" > "$H_DIR/redis.log" 2>&1 &
  REDIS_PID=$!
  H_PIDS="$H_PIDS $REDIS_PID"
  for _ in $(seq 1 500); do
    if [ "$(redis-cli -s "$REDIS_SOCK" ping 2>/dev/null)" = PONG ]; then
      [ "${PICKET_TEST_BACKEND:-}" = etcd ] && h_start_etcd
      return 0
    fi
    sleep 0.02
  done
  h_fail "redis-server did not start"
}

h_redis() { redis-cli -s "$REDIS_SOCK" "$@"; }

h_start_etcd() {
  local ports c p
  ports=$(python3 -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
  read -r c p <<< "$ports"
  ETCD_URL="http://127.0.0.1:$c"
  etcd --name h --data-dir "$H_DIR/etcd" --listen-client-urls "$ETCD_URL" \
    --advertise-client-urls "$ETCD_URL" --listen-peer-urls "http://127.0.0.1:$p" \
    --initial-advertise-peer-urls "http://127.0.0.1:$p" --initial-cluster "h=http://127.0.0.1:$p" \
    --heartbeat-interval 50 --election-timeout 500 --log-level error > "$H_DIR/etcd.log" 2>&1 &
  H_PIDS="$H_PIDS $!"
  for _ in $(seq 1 200); do
    curl -sf "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"' && return 0
    sleep 0.05
  done
  h_fail "etcd did not start"
}

h_start_picketd() {
  local pf="$H_DIR/picketd.port"
  rm -f "$pf"
  local store=(--redis "$REDIS_URL")
  [ "${PICKET_TEST_BACKEND:-}" = etcd ] && store=(--etcd "$ETCD_URL")
  "$PICKET_BIN_DIR/picketd" --listen 127.0.0.1:0 --port-file "$pf" "${store[@]}" "$@" \
    >> "$H_DIR/picketd.log" 2>&1 &
  PICKETD_PID=$!
  H_PIDS="$H_PIDS $PICKETD_PID"
  for _ in $(seq 1 500); do
    if [ -s "$pf" ]; then
      PICKETD_PORT=$(cat "$pf")
      PICKETD_URL="http://127.0.0.1:$PICKETD_PORT"
      return 0
    fi
    kill -0 "$PICKETD_PID" 2>/dev/null || h_fail "picketd exited at start"
    sleep 0.02
  done
  h_fail "picketd did not write its port"
}

h_start_servers() {
  h_start_redis
  h_start_picketd "$@"
  export PICKET_SERVER="$PICKETD_URL"
}

h_start_fenced_kv() {
  rm -f "$H_DIR/kv.port"
  "$PICKET_BIN_DIR/fenced-kv" --listen 127.0.0.1:0 --db "$H_DIR/kv.db" --port-file "$H_DIR/kv.port" \
    > "$H_DIR/fenced-kv.log" 2>&1 &
  H_PIDS="$H_PIDS $!"
  for _ in $(seq 1 500); do [ -s "$H_DIR/kv.port" ] && break; sleep 0.02; done
  [ -s "$H_DIR/kv.port" ] || h_fail "fenced-kv did not start"
  KV_URL="http://127.0.0.1:$(cat "$H_DIR/kv.port")"
}

# Fences: picketd's --fence-floor comes from $PICKET_FENCE_FLOOR unless a
# test passes the flag (default clock). h_fence_clock succeeds under clock.
h_fence_clock() { [ "${PICKET_FENCE_FLOOR:-clock}" != none ]; }
# Redis TIME in microseconds.
h_redis_time_us() { h_redis time | { read -r s; read -r u; printf '%d%06d\n' "$s" "$u"; }; }
# h_fence_follows PREV FENCE FLOOR_US: FENCE may follow PREV (0: none) under
# the floor: PREV+1 with none; above PREV and >= FLOOR_US with clock.
h_fence_follows() {
  if h_fence_clock; then [ "$2" -gt "$1" ] && [ "$2" -ge "$3" ]; else [ "$2" -eq $(($1 + 1)) ]; fi
}
