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
"$PY" -m unittest discover -s tests -t . -v 2>&1 | tee "$H_DIR/unittest.out"
[ "${PIPESTATUS[0]}" -eq 0 ] || h_fail "python client tests (see above)"
echo "test_python: all passed"
