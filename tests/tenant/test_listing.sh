#!/usr/bin/env bash
# test_listing.sh: what one tenant's listing shows of another's (issue 39,
# items 1 and 5): against a real store (redis-server, or one etcd member
# with PICKET_TEST_BACKEND=etcd) and a real picketd under --auth-file,
# test_listing.py pages as a scoped token and checks that no cursor, page
# or error names what the token may not see; then, with the store gone, a
# lock call's 503 must not name where the store is.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
export T_A=$(tok) T_AC=$(tok) T_OPS=$(tok) T_MET=$(tok) T_LONG=$(tok)
cat > "$H_DIR/auth" <<AUTH
tenant-a sha256:$(sha "$T_A") a.,c.x. lock,read,list
tenant-ac sha256:$(sha "$T_AC") a.,a.b.,c.,c: lock,read,list
ops sha256:$(sha "$T_OPS") * lock,read,list,admin
watch sha256:$(sha "$T_MET") b. lock,metrics
long-b sha256:$(sha "$T_LONG") b.$(printf 'q%.0s' $(seq 195))r,a. lock,read,list
AUTH
# a second picketd on the same store paces listings tightly (item 5)
h_start_picketd --auth-file "$H_DIR/auth" --list-rate 5
SLOW_PORT=$PICKETD_PORT SLOW_PID=$PICKETD_PID
h_start_picketd --auth-file "$H_DIR/auth" --list-rate 100000
export STORE_PID=$REDIS_PID STORE_WHERE=$REDIS_SOCK
if [ "${PICKET_TEST_BACKEND:-}" = etcd ]; then
  STORE_PID=$(pgrep -f -- "--data-dir $H_DIR/etcd" | head -1) STORE_WHERE=${ETCD_URL#http://}
fi
python3 "$PICKET_SOURCE_DIR/tests/tenant/test_listing.py" "$PICKETD_PORT" "$SLOW_PORT" || h_fail "test_listing.py"
tenant_stop "$PICKETD_PID" "$SLOW_PID"
echo "test_listing: ok (${PICKET_TEST_BACKEND:-redis})"
