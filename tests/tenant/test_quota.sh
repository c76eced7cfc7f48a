#!/usr/bin/env bash
# test_quota.sh: a token's max_leases where it meets other answers (issue
# 42, item 5): a token at its quota asking for a held lock is told the lock
# is held, and a busy token's acquires of free names are never refused as
# held because its own count moved. Against a real store (redis-server, or
# one etcd member with PICKET_TEST_BACKEND=etcd) and a real picketd under
# --auth-file; test_quota.py says what each part checks.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
export T_FULL=$(tok) T_OTHER=$(tok) T_BUSY=$(tok) T_WAIT=$(tok) T_HOLD=$(tok)
cat > "$H_DIR/auth" <<AUTH
quota-full sha256:$(sha "$T_FULL") qf. lock,read max_leases=1
quota-other sha256:$(sha "$T_OTHER") qf. lock,read
quota-busy sha256:$(sha "$T_BUSY") qb. lock,read max_leases=64
quota-wait sha256:$(sha "$T_WAIT") qw. lock,read max_waiters=1
quota-hold sha256:$(sha "$T_HOLD") qw. lock,read
AUTH
h_start_picketd --auth-file "$H_DIR/auth"
python3 "$PICKET_SOURCE_DIR/tests/tenant/test_quota.py" "$PICKETD_PORT" || h_fail "test_quota.py"
tenant_stop "$PICKETD_PID"
echo "test_quota: ok (${PICKET_TEST_BACKEND:-redis})"
