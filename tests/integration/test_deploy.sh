#!/usr/bin/env bash
# deploy/ is tested, not just written: the systemd unit passes
# `systemd-analyze verify` (where systemd is present), deploy/redis.conf
# loads in a real redis-server that picketd then accepts without a warning,
# and the unit's environment file names only real settings.
# (deploy/sentinel/sentinel.conf is loaded by tests/fault/test_sentinel.c.)
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
# deploy/prometheus/picket-alerts.yml names only metrics picketd exports
# (a family is in /metrics from the start, samples or not).
metrics=$(curl -s "$PICKETD_URL/metrics")
for m in $(grep -oE 'picket_[a-z_]+' "$src/deploy/prometheus/picket-alerts.yml" | sort -u); do
  printf '%s\n' "$metrics" | grep -q "^# TYPE $m " || h_fail "picket-alerts.yml names $m, which picketd does not export"
done
echo "ok: every metric of deploy/prometheus/picket-alerts.yml is picketd's"
# deploy/systemd/picketd.env names only settings picketd has, and its
# Sentinel example (uncommented) is accepted by picketd's flag rules.
help=$("$PICKET_BIN_DIR/picketd" --help)
vars=$(grep -oE '^#?PICKET_[A-Z_]+=' "$src/deploy/systemd/picketd.env" | tr -d '#=' | sort -u)
[ -n "$vars" ] || h_fail "picketd.env names no PICKET_ variable"
for v in $vars; do
  grep -q "\[$v;" <<<"$help" || h_fail "deploy/systemd/picketd.env: $v is not a picketd setting"
done
env_file=$(grep -E '^#?PICKET_(SENTINEL|SENTINEL_MASTER|REDIS_DB|MIN_REPLICAS)=' \
  "$src/deploy/systemd/picketd.env" | tr -d '#')
env -i $env_file "$PICKET_BIN_DIR/picketd" --redis-timeout-ms 50 --listen 127.0.0.1:0 \
  --port-file "$H_DIR/sentinel.port" > "$H_DIR/sentinel.log" 2>&1 &
pid=$!
H_PIDS="$H_PIDS $pid"
for _ in $(seq 1 500); do [ -s "$H_DIR/sentinel.port" ] && break; sleep 0.02; done
kill "$pid" 2>/dev/null
wait "$pid"
grep -q "Sentinel master 'picket'" "$H_DIR/sentinel.log" ||
  h_fail "the env file's Sentinel example: $(cat "$H_DIR/sentinel.log")"
both=$(env -i $env_file PICKET_REDIS=unix:///x "$PICKET_BIN_DIR/picketd" 2>&1; echo "rc=$?")
grep -q "exclusive" <<<"$both" && grep -q "rc=2" <<<"$both" || h_fail "PICKET_REDIS with PICKET_SENTINEL: $both"
echo "ok: deploy/systemd/picketd.env names real settings; its Sentinel example starts picketd"
# deploy/auth/picketd.auth parses: picketd starts with it and counts its
# tokens, and a lock call without a token is refused.
h_start_picketd --auth-file "$src/deploy/auth/picketd.auth"
grep -q "picketd.auth: 4 tokens" "$H_DIR/picketd.log" || h_fail "deploy/auth/picketd.auth: $(tail -3 "$H_DIR/picketd.log")"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$PICKETD_URL/v1/locks/billing.x/acquire")
[ "$code" = 401 ] || h_fail "acquire without a token under deploy/auth/picketd.auth: $code"
echo "ok: deploy/auth/picketd.auth loads; a lock call without a token is 401"
echo "4 passed, 0 failed"
