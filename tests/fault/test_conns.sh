#!/usr/bin/env bash
# test_conns.sh: issue 16's and issue 28's connection floods
# (test_conns.py) against a real redis-server and real picketd: a cap per
# address group, a short request deadline and no cap, the defaults, 16
# loopback addresses, the slots kept for tokens under --auth-file, and
# IPv6 addresses of one /64. Then
# each must stop with exit 0 on SIGTERM, and the log show no crash or
# sanitizer report.
set -u
# Issue 28's groups need client addresses that are not this host's usual
# ones: other IPv4 hosts and addresses inside one IPv6 /64. Where a private
# network namespace can be made (root, or unprivileged user namespaces),
# the whole test runs in one, its loopback given 10.213.254.1 (a host that
# is not loopback), fd00:6::1-16 (one /64) and fd00:7::1 (another). Redis
# is on a unix socket, which no namespace hides. Elsewhere those parts
# are skipped, and say so.
if [ -z "${PICKET_CONNS_NETNS:-}" ] && unshare -n true 2>/dev/null; then
  PICKET_CONNS_NETNS=1 exec unshare -n bash "$0" "$@"
fi
other="" v6=""
if [ -n "${PICKET_CONNS_NETNS:-}" ]; then
  ip link set lo up || exit 1
  ip addr add 10.213.254.1/32 dev lo || exit 1
  for i in $(seq 1 16); do ip -6 addr add "fd00:6::$i/128" dev lo nodad || exit 1; done
  ip -6 addr add fd00:7::1/128 dev lo nodad || exit 1
  other=10.213.254.1 v6=1
fi
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
h_start_redis

# The new flags' bad values exit 2 with one line.
for bad in "--ipv6-prefix-len 0" "--ipv6-prefix-len 129" "--reserved-auth-connections 8" \
           "--reserved-auth-connections -1"; do
  out=$("$PICKET_BIN_DIR/picketd" --redis "$REDIS_URL" $bad 2>&1); rc=$?
  [ "$rc" -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] || h_fail "picketd $bad: exit $rc: $out"
done
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
export T_CONNS=pkt_conns_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
printf 'conns sha256:%s * lock,read,metrics\n' "$(sha "$T_CONNS")" > "$H_DIR/auth"
out=$("$PICKET_BIN_DIR/picketd" --redis "$REDIS_URL" --auth-file "$H_DIR/auth" \
      --max-connections 64 --reserved-auth-connections 64 2>&1); rc=$?
[ "$rc" -eq 2 ] || h_fail "a reserve of all --max-connections: exit $rc: $out"
# (a): the cap, with a deadline far past the test so only the cap acts;
# on every address, for an honest client that is not loopback.
h_start_picketd --listen 0.0.0.0:0 --max-connections-per-ip 64 --request-timeout-ms 600000 \
  --log-level warn
cap=$PICKETD_PORT pids=$PICKETD_PID
# (b), (c): no cap, a 2 s deadline, exactly as many slots as the attack
# has sockets, and an idle timeout well past the deadline.
h_start_picketd --max-connections-per-ip 0 --request-timeout-ms 2000 --max-connections 4096 \
  --connection-timeout-s 30 --log-level warn
deadline=$PICKETD_PORT pids="$pids $PICKETD_PID"
# auto: the defaults, on every address of the host (so that one other than
# loopback can be tried).
h_start_picketd --listen 0.0.0.0:0 --log-level warn
auto=$PICKETD_PORT pids="$pids $PICKETD_PID"
# loop16: the defaults but 1,024 slots (loopback's cap: 512), on every address.
h_start_picketd --listen 0.0.0.0:0 --max-connections 1024 --log-level warn
loop16=$PICKETD_PORT pids="$pids $PICKETD_PID"
# reserve: --auth-file, 256 slots (32 kept for tokens), no cap per group,
# so that only the reserve acts.
h_start_picketd --auth-file "$H_DIR/auth" --max-connections 256 --max-connections-per-ip 0 \
  --log-level warn
reserve=$PICKETD_PORT pids="$pids $PICKETD_PID"
# authgroup: --auth-file and a cap of 64 per group.
h_start_picketd --auth-file "$H_DIR/auth" --max-connections-per-ip 64 --log-level warn
authgroup=$PICKETD_PORT pids="$pids $PICKETD_PID"
v6args=""
if [ -n "$v6" ]; then
  # ipv6: a cap of 64 per /64 (the default prefix), and per whole address.
  h_start_picketd --listen '[::]:0' --max-connections-per-ip 64 --max-waiters-per-ip 1 \
    --log-level warn
  v6args="--ipv6 $PICKETD_PORT" pids="$pids $PICKETD_PID"
  h_start_picketd --listen '[::]:0' --max-connections-per-ip 64 --ipv6-prefix-len 128 \
    --max-waiters-per-ip 1 --log-level warn
  v6args="$v6args --ipv6-whole $PICKETD_PORT" pids="$pids $PICKETD_PID"
fi
python3 "$PICKET_SOURCE_DIR/tests/fault/test_conns.py" --auto "$auto" --cap "$cap" \
  --deadline "$deadline" --loop16 "$loop16" --reserve "$reserve" --authgroup "$authgroup" \
  ${other:+--other "$other"} $v6args || h_fail "connection floods (see above)"
for pid in $pids; do
  kill -0 "$pid" 2>/dev/null || h_fail "picketd $pid died"
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 0 ] || h_fail "picketd $pid exited $rc on SIGTERM after the floods"
done
if grep -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|Segmentation|Assertion' \
    "$H_DIR/picketd.log"; then
  h_fail "picketd logged a crash or sanitizer report"
fi
echo "PASS: picketd kept serving through the connection floods"
