#!/usr/bin/env bash
# Sentinel mode with passwords: a data node with requirepass and a sentinel
# with its own requirepass (and auth-pass to monitor the node). picketd
# finds the primary only with both --sentinel-password-file and
# --redis-password-file, says why when one is missing or wrong, and never
# writes either password to its log. (The failover behaviour is
# tests/fault/test_sentinel.c; this is the credentials' path.)
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DATA_PW=data-Secret-4711
SENT_PW=sentinel-Secret-0815
printf '%s\n' "$DATA_PW" > "$H_DIR/data.pw"
printf '%s\n' "$SENT_PW" > "$H_DIR/sentinel.pw"
printf '%s\n' "wrong-password" > "$H_DIR/wrong.pw"

RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --dir "$H_DIR" --save '' --requirepass "$DATA_PW" \
  > "$H_DIR/redis.log" 2>&1 &
H_PIDS="$H_PIDS $!"
for _ in $(seq 1 250); do
  [ "$(redis-cli -p "$RP" --no-auth-warning -a "$DATA_PW" ping 2>/dev/null)" = PONG ] && break
  sleep 0.02
done

SP=$(free_port)
mkdir -p "$H_DIR/sentinel"
cat > "$H_DIR/sentinel/sentinel.conf" <<CONF
port $SP
bind 127.0.0.1
dir $H_DIR/sentinel
requirepass $SENT_PW
sentinel monitor picket 127.0.0.1 $RP 1
sentinel auth-pass picket $DATA_PW
CONF
redis-sentinel "$H_DIR/sentinel/sentinel.conf" > "$H_DIR/sentinel.log" 2>&1 &
H_PIDS="$H_PIDS $!"
for _ in $(seq 1 250); do
  out=$(redis-cli -p "$SP" --no-auth-warning -a "$SENT_PW" sentinel get-master-addr-by-name picket 2>/dev/null | tail -1)
  [ "$out" = "$RP" ] && break
  sleep 0.02
done
[ "$out" = "$RP" ] || h_fail "sentinel does not name the primary"

# start_picketd NAME FLAGS...: picketd in Sentinel mode, log in $H_DIR/NAME.log
start_picketd() {
  local name=$1 pf="$H_DIR/$1.port"
  shift
  "$PICKET_BIN_DIR/picketd" --listen 127.0.0.1:0 --port-file "$pf" --redis-timeout-ms 300 \
    --sentinel "127.0.0.1:$SP" --sentinel-master picket --min-replicas 0 "$@" \
    >> "$H_DIR/$name.log" 2>&1 &
  H_PIDS="$H_PIDS $!"
  for _ in $(seq 1 500); do
    [ -s "$pf" ] && { URL="http://127.0.0.1:$(cat "$pf")"; return 0; }
    sleep 0.02
  done
  h_fail "picketd $name did not start"
}
passed=0

start_picketd good --sentinel-password-file "$H_DIR/sentinel.pw" --redis-password-file "$H_DIR/data.pw"
ready=$(curl -s "$URL/readyz")
grep -q "\"primary\":\"127.0.0.1:$RP\"" <<<"$ready" || h_fail "with both passwords: /readyz $ready"
grep -q '"reachable":true' <<<"$ready" || h_fail "with both passwords: /readyz $ready"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/locks/auth/acquire" -H 'Content-Type: application/json' -d '{}')
[ "$code" = 200 ] || h_fail "acquire with both passwords: $code"
echo "ok: both passwords: primary found, lock granted"
passed=$((passed + 1))

start_picketd nosentinelpw --redis-password-file "$H_DIR/data.pw"
ready=$(curl -s -w ' %{http_code}' "$URL/readyz")
grep -q ' 503$' <<<"$ready" || h_fail "without the sentinel password: /readyz $ready"
grep -q "no Redis primary known" <<<"$ready" || h_fail "without the sentinel password: $ready"
grep -qi "auth" "$H_DIR/nosentinelpw.log" || h_fail "the log does not say the sentinel wants AUTH"
echo "ok: no sentinel password: 503, and the log says why"
passed=$((passed + 1))

start_picketd wrongdatapw --sentinel-password-file "$H_DIR/sentinel.pw" --redis-password-file "$H_DIR/wrong.pw"
ready=$(curl -s -w ' %{http_code}' "$URL/readyz")
grep -q ' 503$' <<<"$ready" || h_fail "with a wrong data password: /readyz $ready"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/locks/auth2/acquire" -H 'Content-Type: application/json' -d '{}')
[ "$code" = 503 ] || h_fail "acquire with a wrong data password: $code"
echo "ok: wrong data password: 503"
passed=$((passed + 1))

for f in "$H_DIR"/good.log "$H_DIR"/nosentinelpw.log "$H_DIR"/wrongdatapw.log; do
  grep -q -e "$DATA_PW" -e "$SENT_PW" -e wrong-password "$f" && h_fail "a password is in $f"
done
metrics=$(curl -s "$URL/metrics")
grep -q -e "$DATA_PW" -e "$SENT_PW" <<<"$metrics" && h_fail "a password is in /metrics"
echo "ok: no password in any log or in /metrics"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
