#!/usr/bin/env bash
# deploy/ is tested, not just written: the systemd unit passes
# `systemd-analyze verify` (where systemd is present), and deploy/redis.conf
# loads in a real redis-server that picketd then accepts without a warning.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
src=$PICKET_SOURCE_DIR

if command -v systemd-analyze >/dev/null 2>&1; then
  sed "s|/usr/local/bin/picketd|$PICKET_BIN_DIR/picketd|" "$src/deploy/systemd/picketd.service" \
    > "$H_DIR/picketd.service"
  out=$(systemd-analyze verify "$H_DIR/picketd.service" 2>&1) || h_fail "systemd-analyze verify: $out"
  [ -z "$out" ] || h_fail "systemd-analyze verify printed: $out"
  echo "ok: systemd-analyze verify deploy/systemd/picketd.service"
else
  echo "skip: no systemd-analyze here; the unit is not verified"
fi

# deploy/redis.conf, with only the socket, port and dir made private
cat > "$H_DIR/redis.conf" <<CONF
include $src/deploy/redis.conf
port 0
unixsocket $H_DIR/redis.sock
dir $H_DIR
CONF
redis-server "$H_DIR/redis.conf" > "$H_DIR/redis.log" 2>&1 &
H_PIDS="$H_PIDS $!"
REDIS_SOCK=$H_DIR/redis.sock
REDIS_URL=unix://$REDIS_SOCK
for _ in $(seq 1 250); do [ "$(h_redis ping 2>/dev/null)" = PONG ] && break; sleep 0.02; done
[ "$(h_redis config get maxmemory-policy | tail -1)" = noeviction ] || h_fail "policy not noeviction"
[ "$(h_redis config get appendonly | tail -1)" = yes ] || h_fail "appendonly not yes"
[ "$(h_redis config get appendfsync | tail -1)" = always ] || h_fail "appendfsync not always"

h_start_picketd
grep -q ' warn ' "$H_DIR/picketd.log" && h_fail "picketd warned against deploy/redis.conf"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$PICKETD_URL/v1/locks/deploy/acquire")
[ "$code" = 200 ] || h_fail "acquire against deploy/redis.conf: $code"
echo "ok: deploy/redis.conf loads and picketd accepts it without warnings"
echo "2 passed, 0 failed"
