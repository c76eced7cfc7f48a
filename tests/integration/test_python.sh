#!/usr/bin/env bash
# test_python.sh: the Python client (client/python, issue 18) against real
# picketd processes on one throwaway Redis: a plain one, one with
# --auth-file (tokens made here, only their SHA-256 in the file), one
# signing fences, one on HTTPS (tls_certs.sh), and one whose Redis is missing (503 store_unavailable).
# The unittest suites in client/python/tests make the requests.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
PY=${PICKET_PYTHON:-python3}
. "$PICKET_SOURCE_DIR/tests/integration/client_env.sh"
client_picketds py.

cd "$PICKET_SOURCE_DIR/client/python" || h_fail "no client/python"
# PICKET_PY_TESTS: test names (tests.test_election ...) to run some of them.
if [ -n "${PICKET_PY_TESTS:-}" ]; then
  # shellcheck disable=SC2086
  "$PY" -m unittest -v $PICKET_PY_TESTS 2>&1
else
  "$PY" -m unittest discover -s tests -t . -v 2>&1
fi | tee "$H_DIR/unittest.out"
[ "${PIPESTATUS[0]}" -eq 0 ] || h_fail "python client tests (see above)"

# The example: a scheduler only the leader runs, on the signing picketd,
# its runs counted in the verifying fenced-kv with the leader's term.
out=$("$PY" "$PICKET_SOURCE_DIR/examples/python/leader-scheduler.py" --picket "$PICKET_TEST_SIGNED_URL" \
  --kv "$PICKET_TEST_KV_URL" --election py-example.scheduler --key py-example-runs \
  --candidates 2 --ticks 3 --interval-ms 50 2>&1) || h_fail "leader-scheduler.py: $out"
client_scheduler_ok leader-scheduler.py "$out" "$PICKET_TEST_KV_URL" py-example-runs
echo "test_python: all passed"
