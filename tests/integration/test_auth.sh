#!/usr/bin/env bash
# test_auth.sh: who may lock what (issue 16), against a real redis-server
# and real picketd processes: two picketd with one --auth-file on one
# Redis (a token's max_leases holds across both), and one without it (the
# per-address limits). test_auth.py makes the requests; this script starts
# the processes, and checks what happens at startup with a bad file.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
h_start_redis

# The tokens: their SHA-256 goes into the file, never the tokens.
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
export T_BILLING=pkt_billing_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_OPS=pkt_ops_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_READER=pkt_reader_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_LOCKER=pkt_locker_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_HOG=pkt_hog_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_FAST=pkt_fast_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_NEW=pkt_new_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_ADMIN=pkt_admin_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_LISTER=pkt_lister_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export AUTH_FILE="$H_DIR/auth"
cat > "$AUTH_FILE" <<AUTH
# picket auth file of test_auth.sh
billing   sha256:$(sha "$T_BILLING") billing. lock,read max_leases=3
ops       sha256:$(sha "$T_OPS")     *        lock,read,metrics
	reader  sha256:$(sha "$T_READER") billing.,payroll. read

locker    sha256:$(sha "$T_LOCKER")  *        lock
hog       sha256:$(sha "$T_HOG")     hog.     lock max_waiters=4
fast      sha256:$(sha "$T_FAST")    fast.    lock acquire_rate=5
admin     sha256:$(sha "$T_ADMIN")   billing.,inventory. list,admin
lister    sha256:$(sha "$T_LISTER")  billing. list
AUTH
# The line test_auth.py adds on a reload.
export NEW_LINE="new sha256:$(sha "$T_NEW") new. lock"

# A file that does not parse: picketd refuses to start, names the line,
# and prints no token hash.
printf 'ok sha256:%s * lock\nbad sha256:%s * lock,write\n' "$(sha a)" "$(sha b)" > "$H_DIR/bad"
out=$("$PICKET_BIN_DIR/picketd" --listen 127.0.0.1:0 --redis "$REDIS_URL" \
      --auth-file "$H_DIR/bad" 2>&1); rc=$?
[ "$rc" -eq 2 ] || h_fail "a bad --auth-file: exit $rc, want 2 ($out)"
echo "$out" | grep -q "line 2: unknown verb 'write'" || h_fail "bad --auth-file message: $out"
echo "$out" | grep -q "$(sha b)" && h_fail "the error quotes a token hash: $out"
out=$("$PICKET_BIN_DIR/picketd" --listen 127.0.0.1:0 --redis "$REDIS_URL" \
      --auth-file "$H_DIR/missing" 2>&1); rc=$?
[ "$rc" -eq 2 ] || h_fail "a missing --auth-file: exit $rc, want 2 ($out)"

# (--index-sweep-ms 0: test_auth.py counts EVALSHA calls, and the
# sweeper's listing would add some)
h_start_picketd --auth-file "$AUTH_FILE" --max-waiters 10 --log-level debug --index-sweep-ms 0
export P1_PORT=$PICKETD_PORT P1_PID=$PICKETD_PID
h_start_picketd --auth-file "$AUTH_FILE" --max-waiters 10 --index-sweep-ms 0
export P2_PORT=$PICKETD_PORT
# Without --auth-file: explicit per-address limits, so that loopback (every
# client of a test is) is limited too.
h_start_picketd --max-waiters-per-ip 2 --acquire-rate-per-ip 5 --index-sweep-ms 0
export P3_PORT=$PICKETD_PORT
export PICKETD_LOG="$H_DIR/picketd.log" REDIS_SOCK REDIS_PID

python3 "$PICKET_SOURCE_DIR/tests/integration/test_auth.py" || h_fail "auth checks (see above)"

# The picket command against the real thing: the token by file or by
# environment, the lease by environment; never in argv, never echoed.
export PICKET_SERVER="http://127.0.0.1:$P1_PORT"
picket() { "$PICKET_BIN_DIR/picket" "$@"; }
out=$(picket acquire billing.cli 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "Bearer" <<<"$out" || h_fail "picket without a token: rc $rc: $out"
printf '%s\n' "$T_BILLING" > "$H_DIR/billing.token"
chmod 600 "$H_DIR/billing.token"
grant=$(picket --token-file "$H_DIR/billing.token" acquire billing.cli --ttl 60s) ||
  h_fail "picket --token-file acquire: $grant"
lease=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["lease"])' <<<"$grant")
out=$(PICKET_TOKEN=$T_OPS PICKET_LEASE=$lease picket release billing.cli 2>&1); rc=$?
[ "$rc" -eq 76 ] || h_fail "another token's release through picket: rc $rc: $out"
out=$(PICKET_TOKEN=$T_BILLING picket acquire payroll.cli 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "outside its prefixes" <<<"$out" || h_fail "payroll.cli: rc $rc: $out"
PICKET_TOKEN=$T_BILLING PICKET_LEASE=$lease picket release billing.cli >/dev/null ||
  h_fail "picket release with PICKET_TOKEN and PICKET_LEASE"
# At max_leases (3): picket says why, exit 1, and never shows a token.
for n in 1 2 3; do picket --token-file "$H_DIR/billing.token" acquire billing.cli$n >/dev/null ||
  h_fail "billing.cli$n"; done
out=$(picket --token-file "$H_DIR/billing.token" acquire billing.cli4 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "quota" <<<"$out" && grep -q "max_leases" <<<"$out" ||
  h_fail "a 4th lease through picket: rc $rc: $out"
for t in "$T_BILLING" "$T_OPS"; do grep -qF "$t" <<<"$out$grant" && h_fail "picket printed a token"; done
echo "ok: picket --token-file, PICKET_TOKEN and PICKET_LEASE against --auth-file"
kill -0 "$P1_PID" 2>/dev/null || h_fail "picketd died"
echo "PASS: tokens, prefixes, verbs, lease binding, quotas and reloads"
