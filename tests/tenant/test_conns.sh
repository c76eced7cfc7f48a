#!/usr/bin/env bash
# test_conns.sh: a token's connections are bounded and die with the token
# (issue 39, item 2). Against a real redis-server and a real picketd under
# --auth-file with --max-connections 64 --max-connections-per-ip 8
# --max-connections-per-token 16, test_conns.py opens keep-alive
# connections from one address with a read-only token of prefix a.: past
# 16 they are refused 429 too_many_connections and closed, and another
# tenant's acquire is served at once. Then the token (and a lock token of
# a.) leave the auth file, SIGHUP, and every connection of theirs ends: the
# idle ones, a waiting acquire (401 first) and an event stream; the other
# tenant's keep-alive connection serves on. Between the two, a-lock's
# event streams and election observe streams stop at
# --max-watchers-per-client 4 (429 too_many_watchers) while the other
# tenant's open.
# TEST_CONNS_ONLY=cap|revoke|watchers runs one part (to see each fail on old code).
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
export T_READ=$(tok) T_ALOCK=$(tok) T_OTHER=$(tok) T_OPS=$(tok)
stay="other sha256:$(sha "$T_OTHER") b. lock,read
ops sha256:$(sha "$T_OPS") * lock,read,metrics"
cat > "$H_DIR/auth" <<AUTH
reader sha256:$(sha "$T_READ") a. read
a-lock sha256:$(sha "$T_ALOCK") a. lock,read
$stay
AUTH
# The flag's bad value exits 2 with one line; without --auth-file it has nothing to count.
for bad in "--max-connections-per-token -1" "--max-connections-per-token 4"; do
  out=$("$PICKET_BIN_DIR/picketd" --redis "$REDIS_URL" $bad 2>&1); rc=$?
  [ "$rc" -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] || h_fail "picketd $bad: exit $rc: $out"
done
h_start_picketd --auth-file "$H_DIR/auth" --max-connections 64 --max-connections-per-ip 8 \
  --max-connections-per-token 16 --events-heartbeat-ms 1000 --max-watchers-per-client 4
# test_conns.py calls this to drop reader and a-lock from the file and reload it.
export REVOKE_CMD="printf '%s\n' '$stay' > '$H_DIR/auth.new' && mv '$H_DIR/auth.new' '$H_DIR/auth' && kill -HUP $PICKETD_PID"
python3 "$PICKET_SOURCE_DIR/tests/tenant/test_conns.py" "$PICKETD_PORT" "${TEST_CONNS_ONLY:-all}" ||
  h_fail "test_conns.py"
tenant_stop "$PICKETD_PID"
echo "test_conns: ok"
