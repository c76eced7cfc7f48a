#!/usr/bin/env bash
# test_hostile.sh: the live abuse test of issue 6 (hostile input): a real
# redis-server and picketd with a short --connection-timeout-s, and
# test_hostile.py's storms of malformed, oversize, slow-loris, idle and
# half-closed requests against it. Then picketd must still run, stop with
# exit 0 on SIGTERM, and its log must show no crash or sanitizer report.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
# Under AddressSanitizer (scripts/test.d/asan.sh) freed memory is held in
# a quarantine of up to 256 MB, which would read as growth; a small one
# keeps the RSS comparison about picketd. No effect on other builds.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
h_start_redis
h_start_picketd --connection-timeout-s 2 --max-connections 2000 --log-level warn
python3 "$PICKET_SOURCE_DIR/tests/fault/test_hostile.py" "$PICKETD_PORT" "$PICKETD_PID" \
  || h_fail "hostile input storms (see above)"
kill -0 "$PICKETD_PID" 2>/dev/null || h_fail "picketd died"
# A clean stop: exit 0, and under a sanitizer no report (LeakSanitizer
# reports what is still allocated and unreachable at exit).
kill -TERM "$PICKETD_PID"
wait "$PICKETD_PID"
rc=$?
[ "$rc" -eq 0 ] || h_fail "picketd exited $rc on SIGTERM after the storms"
if grep -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|Segmentation|Assertion' \
    "$H_DIR/picketd.log"; then
  h_fail "picketd logged a crash or sanitizer report"
fi
echo "PASS: picketd survived the hostile input storms"
