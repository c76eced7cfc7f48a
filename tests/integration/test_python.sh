#!/usr/bin/env bash
# test_python.sh: the Python client (client/python, issue 18) against real
# picketd processes on one throwaway Redis: a plain one, one with
# --auth-file (tokens made here, only their SHA-256 in the file), one
# signing fences, one on HTTPS (tls_certs.sh), and one whose Redis is missing (503 store_unavailable).
# The unittest suites in client/python/tests make the requests.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
PY=${PICKET_PYTHON:-python3}
h_start_redis

h_start_picketd --max-ttl-ms 600000
export PICKET_TEST_URL=$PICKETD_URL PICKET_TEST_PICKETD_PID=$PICKETD_PID

sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
tok() { printf 'pkt_%s_%s' "$1" "$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"; }
export PICKET_TEST_T_LOCKER=$(tok locker) PICKET_TEST_T_READER=$(tok reader)
export PICKET_TEST_T_ONE=$(tok one) PICKET_TEST_T_FAST=$(tok fast) PICKET_TEST_T_OPS=$(tok ops)
cat > "$H_DIR/auth" <<AUTH
locker sha256:$(sha "$PICKET_TEST_T_LOCKER") py.     lock,read
reader sha256:$(sha "$PICKET_TEST_T_READER") py.     read
one    sha256:$(sha "$PICKET_TEST_T_ONE")    one.    lock max_leases=1
fast   sha256:$(sha "$PICKET_TEST_T_FAST")   fast.   lock acquire_rate=2
ops    sha256:$(sha "$PICKET_TEST_T_OPS")    py.     lock,read,list,admin
AUTH
h_start_picketd --auth-file "$H_DIR/auth"
export PICKET_TEST_AUTH_URL=$PICKETD_URL

printf 'k1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$H_DIR/keys"
chmod 600 "$H_DIR/keys"
h_start_picketd --fence-key-file "$H_DIR/keys"
export PICKET_TEST_SIGNED_URL=$PICKETD_URL

K="$H_DIR/tls"; mkdir -p "$K"
bash "$PICKET_SOURCE_DIR/tests/integration/tls_certs.sh" "$K" || h_fail "openssl could not make the test certificates"
h_start_picketd --tls-cert "$K/srvA.crt" --tls-key "$K/srvA.key"
export PICKET_TEST_TLS_URL="https://127.0.0.1:$PICKETD_PORT" PICKET_TEST_TLS_CA="$K/caA.crt"
export PICKET_TEST_TLS_OTHER_CA="$K/caB.crt"

REDIS_URL="unix://$H_DIR/no-redis.sock" h_start_picketd --redis-timeout-ms 100
export PICKET_TEST_NOREDIS_URL=$PICKETD_URL

export PICKET_TEST_OPENAPI="$PICKET_SOURCE_DIR/proto/openapi.yaml"
export PICKET_TEST_TMP=$H_DIR
cd "$PICKET_SOURCE_DIR/client/python" || h_fail "no client/python"
"$PY" -m unittest discover -s tests -t . -v 2>&1 | tee "$H_DIR/unittest.out"
[ "${PIPESTATUS[0]}" -eq 0 ] || h_fail "python client tests (see above)"
echo "test_python: all passed"
