#!/usr/bin/env bash
# test_conns.sh: issue 16's connection floods (test_conns.py) against a
# real redis-server and three picketd: one with a cap per address, one
# with a short request deadline and no cap, one with the defaults. Then
# each must stop with exit 0 on SIGTERM, and the log show no crash or
# sanitizer report.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
h_start_redis
# (a): the cap, with a deadline far past the test so only the cap acts.
h_start_picketd --max-connections-per-ip 64 --request-timeout-ms 600000 --log-level warn
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
python3 "$PICKET_SOURCE_DIR/tests/fault/test_conns.py" --auto "$auto" --cap "$cap" \
  --deadline "$deadline" || h_fail "connection floods (see above)"
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
