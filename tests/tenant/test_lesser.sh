#!/usr/bin/env bash
# test_lesser.sh: the lesser leaks of a shared picketd (issue 39, item 5):
# who broke a lock, what /metrics shows a metrics token of one prefix,
# and a read/write lock's writer that was refused keeping readers out.
# Against a real store (redis-server, or one etcd member with
# PICKET_TEST_BACKEND=etcd) and two real picketd under --auth-file;
# test_lesser.py says what each part checks.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
export T_ALPHA=$(tok) T_ADMIN=$(tok) T_MET_B=$(tok) T_MET_ALL=$(tok) T_HOG=$(tok) T_WRITER=$(tok) \
  T_READER=$(tok)
# token names no text of picketd's would contain by chance
cat > "$H_DIR/auth" <<AUTH
tenant-alpha sha256:$(sha "$T_ALPHA") a. lock,read
ops-zulu sha256:$(sha "$T_ADMIN") * lock,read,admin
met-bravo sha256:$(sha "$T_MET_B") b. lock,metrics
met-every sha256:$(sha "$T_MET_ALL") * metrics
rw-hog sha256:$(sha "$T_HOG") rw. lock max_waiters=1
rw-writer sha256:$(sha "$T_WRITER") rw. lock
rw-reader sha256:$(sha "$T_READER") rw. lock
AUTH
# the second picketd parks one waiting acquire at most (the 503 of part c)
h_start_picketd --auth-file "$H_DIR/auth" --max-waiters 1
ONE_PORT=$PICKETD_PORT ONE_PID=$PICKETD_PID
h_start_picketd --auth-file "$H_DIR/auth"
python3 "$PICKET_SOURCE_DIR/tests/tenant/test_lesser.py" "$PICKETD_PORT" "$ONE_PORT" || h_fail "test_lesser.py"
tenant_stop "$PICKETD_PID" "$ONE_PID"
echo "test_lesser: ok (${PICKET_TEST_BACKEND:-redis})"
