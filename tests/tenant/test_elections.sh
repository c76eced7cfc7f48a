#!/usr/bin/env bash
# test_elections.sh: what one tenant can do to elections (issue 40) on a
# shared picketd: other prefixes' elections (403, and the reply says no
# more than for one never held), the verbs (lock to campaign, read to
# GET and observe, admin to break), max_leases counting leaderships,
# max_waiters counting waiting candidates, the value's bound, and a log
# at debug level without values or lease ids. Against a real
# redis-server and a real picketd under --auth-file; test_elections.py
# says what each part checks.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
export T_A=$(tok) T_B=$(tok) T_READ=$(tok) T_LOCK=$(tok) T_QUOTA=$(tok) T_WAIT=$(tok)
cat > "$H_DIR/auth" <<AUTH
tenant-a sha256:$(sha "$T_A") a. lock,read,admin
tenant-b sha256:$(sha "$T_B") b. lock,read,admin
a-read sha256:$(sha "$T_READ") a. read
a-lock sha256:$(sha "$T_LOCK") a. lock,read
a-quota sha256:$(sha "$T_QUOTA") a. lock,read max_leases=2
a-wait sha256:$(sha "$T_WAIT") a. lock,read max_waiters=1
AUTH
h_start_picketd --auth-file "$H_DIR/auth" --log-level debug
python3 "$PICKET_SOURCE_DIR/tests/tenant/test_elections.py" "$PICKETD_PORT" "$H_DIR/picketd.log" ||
  h_fail "test_elections.py"
tenant_stop "$PICKETD_PID"
echo "test_elections: ok"
