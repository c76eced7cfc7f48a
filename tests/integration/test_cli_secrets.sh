#!/usr/bin/env bash
# test_cli_secrets.sh: how the `picket` command takes what must not sit in
# argv, and its TLS flags: --cacert and PICKET_CACERT against a real HTTPS
# picketd (certificates from tls_certs.sh); --lease-file and PICKET_LEASE
# for renew and release (and their precedence under --lease);
# --token-file and PICKET_TOKEN sent as "Authorization: Bearer", checked
# against a small python server that plays picketd and records the header
# of every request, also for `picket run`'s acquire, renewals and release,
# whose child gets no PICKET_TOKEN it did not already have; bad token and
# lease files exit 2 without printing them; `picket token new` makes a
# token whose SHA-256 is on its auth-file line and refuses bad input.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
P="$PICKET_BIN_DIR/picket"
K="$H_DIR/pki"
mkdir -p "$K"
bash "$PICKET_SOURCE_DIR/tests/integration/tls_certs.sh" "$K" || h_fail "openssl could not make the test certificates"
h_start_redis
h_start_picketd --tls-cert "$K/srvA.crt" --tls-key "$K/srvA.key"
URL="https://127.0.0.1:$PICKETD_PORT"
unset PICKET_SERVER PICKET_CACERT PICKET_TOKEN PICKET_LEASE
passed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
# expect CODE CMD...: runs CMD, stdout to $H_DIR/out, stderr to $H_DIR/err.
expect() {
  local want=$1 got=0
  shift
  "$@" > "$H_DIR/out" 2> "$H_DIR/err" || got=$?
  [ "$got" = "$want" ] || h_fail "'$*' exited $got, want $want; stderr: $(cat "$H_DIR/err")"
}
# one_line_without SECRET: stderr is one line and does not contain SECRET.
one_line_without() {
  [ "$(wc -l < "$H_DIR/err")" = 1 ] || h_fail "stderr is not one line: $(cat "$H_DIR/err")"
  grep -qF -- "$1" "$H_DIR/err" && h_fail "a secret was printed: $(cat "$H_DIR/err")"
  [ -s "$H_DIR/out" ] && h_fail "printed to stdout: $(cat "$H_DIR/out")"
  return 0
}
lease_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lease"])' "$H_DIR/out"; }

# The picket command: --cacert, PICKET_CACERT; the system's CAs do not do.
"$P" --server "$URL" --cacert "$K/caA.crt" acquire tls-cli --ttl 1m > "$H_DIR/out" 2> "$H_DIR/err" ||
  h_fail "picket --cacert acquire: $(cat "$H_DIR/err")"
CLI_LEASE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lease"])' "$H_DIR/out")
PICKET_CACERT="$K/caA.crt" "$P" --server "$URL" renew tls-cli --lease "$CLI_LEASE" > /dev/null 2> "$H_DIR/err" ||
  h_fail "PICKET_CACERT renew: $(cat "$H_DIR/err")"
rc=0; env -u PICKET_CACERT "$P" --server "$URL" status tls-cli > /dev/null 2> "$H_DIR/err" || rc=$?
[ "$rc" = 1 ] || h_fail "picket without --cacert: exit $rc, want 1: $(cat "$H_DIR/err")"
rc=0; "$P" --server "$URL" --cacert "$K/missing.crt" status tls-cli > /dev/null 2> "$H_DIR/err" || rc=$?
[ "$rc" = 2 ] && grep -q "missing.crt" "$H_DIR/err" || h_fail "picket --cacert MISSING: exit $rc: $(cat "$H_DIR/err")"
PICKET_CACERT="$K/caA.crt" "$P" --server "$URL" release tls-cli --lease "$CLI_LEASE" > /dev/null 2> "$H_DIR/err" ||
  h_fail "PICKET_CACERT release: $(cat "$H_DIR/err")"
ok "picket --cacert and PICKET_CACERT; without them, exit 1"
# ---- --lease-file and PICKET_LEASE --------------------------------------
export PICKET_SERVER="$URL" PICKET_CACERT="$K/caA.crt"
expect 0 "$P" acquire cli-lf --ttl 1m
LEASE=$(lease_of)
OTHER=0123456789abcdef0123456789abcdef
printf '%s  \r\n' "$LEASE" > "$H_DIR/lease" # trailing whitespace is stripped
printf '%s\n' "$OTHER" > "$H_DIR/other-lease"
expect 0 "$P" renew cli-lf --lease-file "$H_DIR/lease" --ttl 2m
[ "$(h_redis pttl 'picket:{cli-lf}:lease')" -gt 60000 ] || h_fail "renew --lease-file did not renew"
expect 0 env PICKET_LEASE="$LEASE" "$P" renew cli-lf --ttl 3m
[ "$(h_redis pttl 'picket:{cli-lf}:lease')" -gt 120000 ] || h_fail "renew with PICKET_LEASE did not renew"
# Precedence: --lease, then --lease-file, then PICKET_LEASE.
expect 76 env PICKET_LEASE="$LEASE" "$P" renew cli-lf --lease "$OTHER" --lease-file "$H_DIR/lease"
expect 76 env PICKET_LEASE="$LEASE" "$P" renew cli-lf --lease-file "$H_DIR/other-lease"
expect 0 env PICKET_LEASE="$OTHER" "$P" renew cli-lf --lease "$LEASE" --lease-file "$H_DIR/other-lease" --ttl 3m
# Bad files and values: exit 2, one line, the content never shown.
printf 'not-a-lease-%s\n' "$LEASE" > "$H_DIR/bad-lease"
: > "$H_DIR/empty"
expect 2 "$P" renew cli-lf --lease-file "$H_DIR/bad-lease"
one_line_without "$LEASE"
grep -q "bad-lease: not a lease id" "$H_DIR/err" || h_fail "bad lease file: $(cat "$H_DIR/err")"
expect 2 "$P" release cli-lf --lease-file "$H_DIR/empty"
one_line_without "$LEASE"
expect 2 "$P" release cli-lf --lease-file "$H_DIR/missing"
grep -q "No such file" "$H_DIR/err" || h_fail "missing lease file: $(cat "$H_DIR/err")"
expect 2 env PICKET_LEASE="x$LEASE" "$P" release cli-lf
one_line_without "$LEASE"
expect 2 "$P" acquire cli-lf --lease-file "$H_DIR/lease" # renew and release only
[ "$(h_redis pttl 'picket:{cli-lf}:lease')" -gt 120000 ] || h_fail "a refused command changed the lease"
expect 0 env PICKET_LEASE="$LEASE" "$P" release cli-lf
expect 0 "$P" status cli-lf
grep -q '"held":false' "$H_DIR/out" || h_fail "release with PICKET_LEASE: $(cat "$H_DIR/out")"
unset PICKET_SERVER PICKET_CACERT
ok "--lease-file and PICKET_LEASE for renew and release; --lease, then --lease-file, then PICKET_LEASE"

# ---- tokens: a python server that plays picketd and logs Authorization --
cat > "$H_DIR/fake.py" <<'PY'
import http.server, json, os, re, sys
log, portfile = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def reply(self, status, obj):
        b = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}") if n else {}
        auth = self.headers.get("Authorization", "-")
        with open(log, "a") as f:
            f.write("%s %s %s\n" % (self.command, self.path, auth))
        if auth == "Bearer deny-me":
            return self.reply(401, {"error": {"code": "unauthenticated", "message": "unknown token"}})
        m = re.match(r"^/v1/locks/([^/]+)(?:/(\w+))?$", self.path)
        name, verb = m.group(1), m.group(2)
        if verb == "acquire":
            return self.reply(200, {"lock": name, "lease": body.get("lease", "0" * 32), "fence": 7,
                                    "ttl_ms": body.get("ttl_ms", 30000), "owner": None})
        if verb == "renew":
            return self.reply(200, {"lock": name, "fence": 7, "ttl_ms": body.get("ttl_ms", 30000)})
        if verb == "release":
            return self.reply(200, {"lock": name, "released": True})
        return self.reply(200, {"lock": name, "held": False, "fence": 0, "ttl_ms": 0, "owner": None})
    do_GET = do_POST = handle_any
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
PY
python3 "$H_DIR/fake.py" "$H_DIR/auth.log" "$H_DIR/fake.port" > "$H_DIR/fake.log" 2>&1 &
H_PIDS="$H_PIDS $!"
for _ in $(seq 1 500); do [ -s "$H_DIR/fake.port" ] && break; sleep 0.02; done
[ -s "$H_DIR/fake.port" ] || h_fail "the fake picketd did not start: $(cat "$H_DIR/fake.log")"
FAKE="http://127.0.0.1:$(cat "$H_DIR/fake.port")"
# sent WANT: the last request the fake server saw carried WANT ("-": none).
sent() {
  local got
  got=$(tail -1 "$H_DIR/auth.log" | cut -d' ' -f3-)
  [ "$got" = "$1" ] || h_fail "Authorization sent: '$got', want '$1'"
}
printf 'tok-file-1 \t\r\n# a second line is not read\n' > "$H_DIR/token"
expect 0 "$P" --server "$FAKE" status t1 --token-file "$H_DIR/token"
sent "Bearer tok-file-1"
expect 0 env PICKET_TOKEN=tok-env-2 "$P" --server "$FAKE" status t1
sent "Bearer tok-env-2"
expect 0 env PICKET_TOKEN=tok-env-2 "$P" --token-file "$H_DIR/token" --server "$FAKE" status t1
sent "Bearer tok-file-1"
expect 0 env PICKET_TOKEN= "$P" --server "$FAKE" status t1
sent "-"
ok "--token-file and PICKET_TOKEN send Authorization: Bearer; the file wins; empty is none"

# Bad tokens: exit 2, one line, never the token; no request made.
before=$(wc -l < "$H_DIR/auth.log")
printf 'tok\tsecret-3\n' > "$H_DIR/token-ctl"
printf '\nsecret-4\n' > "$H_DIR/token-blank"
printf 'tok-\033[31msecret-5\n' > "$H_DIR/token-esc"
expect 2 "$P" --server "$FAKE" status t1 --token-file "$H_DIR/token-ctl"
one_line_without "secret-3"
expect 2 "$P" --server "$FAKE" status t1 --token-file "$H_DIR/token-blank"
one_line_without "secret-4"
expect 2 "$P" --server "$FAKE" status t1 --token-file "$H_DIR/token-esc"
one_line_without "secret-5"
expect 2 "$P" --server "$FAKE" status t1 --token-file "$H_DIR/empty"
expect 2 "$P" --server "$FAKE" status t1 --token-file "$H_DIR/missing"
grep -q "No such file" "$H_DIR/err" || h_fail "missing token file: $(cat "$H_DIR/err")"
expect 2 env "PICKET_TOKEN=tok secret-6" "$P" --server "$FAKE" status t1
one_line_without "secret-6"
expect 2 "$P" --server "$FAKE" status t1 --token=secret-7
one_line_without "secret-7"
expect 2 "$P" --server "$FAKE" --token secret-8 status t1
one_line_without "secret-8"
[ "$(wc -l < "$H_DIR/auth.log")" = "$before" ] || h_fail "a refused token still made a request"
# A token the server refuses: exit 1, and the token is not in the message.
printf 'deny-me\n' > "$H_DIR/token-deny"
expect 1 "$P" --server "$FAKE" status t1 --token-file "$H_DIR/token-deny"
grep -q "refused the credentials" "$H_DIR/err" || h_fail "401: $(cat "$H_DIR/err")"
grep -q "deny-me" "$H_DIR/err" && h_fail "401: the token was printed: $(cat "$H_DIR/err")"
ok "bad token files and values: exit 2, one line, never the token; no --token flag; 401 is exit 1"

# picket run: acquire, the keeper's renewals and the release all carry the
# token; the child gets PICKET_LOCK and friends but no PICKET_TOKEN.
: > "$H_DIR/auth.log"
printf 'tok-run-9\n' > "$H_DIR/token-run"
expect 0 env -u PICKET_TOKEN "$P" --server "$FAKE" --token-file "$H_DIR/token-run" run t-run --ttl 300ms \
  -- sh -c 'env > "$0"; sleep 0.5' "$H_DIR/child.env"
grep -q '^PICKET_LOCK=t-run$' "$H_DIR/child.env" || h_fail "run: no PICKET_LOCK in the child"
grep -q '^PICKET_TOKEN=' "$H_DIR/child.env" && h_fail "run exported PICKET_TOKEN to the child"
grep -q "tok-run-9" "$H_DIR/child.env" && h_fail "the token reached the child's environment"
grep -q '^POST /v1/locks/t-run/acquire Bearer tok-run-9$' "$H_DIR/auth.log" || h_fail "run acquire: $(cat "$H_DIR/auth.log")"
grep -q '^POST /v1/locks/t-run/renew Bearer tok-run-9$' "$H_DIR/auth.log" || h_fail "run renew: $(cat "$H_DIR/auth.log")"
grep -q '^POST /v1/locks/t-run/release Bearer tok-run-9$' "$H_DIR/auth.log" || h_fail "run release: $(cat "$H_DIR/auth.log")"
grep -v -q 'Bearer tok-run-9$' "$H_DIR/auth.log" && h_fail "run: a request without the token: $(cat "$H_DIR/auth.log")"
ok "run sends the token on acquire, renewals and release, and does not export it to the child"

# ---- picket token new ----------------------------------------------------
expect 0 "$P" token new ci-bot 'ci:,deploy.eu-' lock,read max_waiters=4 max_leases=10
[ "$(wc -l < "$H_DIR/out")" = 2 ] || h_fail "token new: not two lines: $(cat "$H_DIR/out")"
TOKEN=$(sed -n 1p "$H_DIR/out")
LINE=$(sed -n 2p "$H_DIR/out")
[[ $TOKEN =~ ^pkt_[0-9a-f]{64}$ ]] || h_fail "token new: the token is '$TOKEN'"
want="ci-bot sha256:$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1) ci:,deploy.eu- lock,read max_leases=10 max_waiters=4"
[ "$LINE" = "$want" ] || h_fail "token new: line '$LINE', want '$want'"
expect 0 "$P" token new ops '*' metrics acquire_rate=100
[ "$(sed -n 1p "$H_DIR/out")" != "$TOKEN" ] || h_fail "token new: the same token twice"
sed -n 2p "$H_DIR/out" | grep -Eq '^ops sha256:[0-9a-f]{64} \* metrics acquire_rate=100$' ||
  h_fail "token new: $(cat "$H_DIR/out")"
for bad in "bad name|*|lock" "$(head -c 65 /dev/zero | tr '\0' a)|*|lock" "n|*,ci|lock" "n||lock" \
           "n|a,,b|lock" "n|a{b}|lock" "n|*|" "n|*|write" "n|*|lock,lock" "n|*|lock|max_leases=0" \
           "n|*|lock|max_leases=-1" "n|*|lock|max_leases=01" "n|*|lock|max_leases=1x" \
           "n|*|lock|max_leases=1|max_leases=2" "n|*|lock|burst=3" "n|*|lock|max_leases=99999999999"; do
  IFS='|' read -r -a args <<<"$bad"
  expect 2 "$P" token new "${args[@]}"
  [ "$(wc -l < "$H_DIR/err")" = 1 ] && [ ! -s "$H_DIR/out" ] || h_fail "token new $bad: $(cat "$H_DIR/err" "$H_DIR/out")"
done
expect 2 "$P" token new a '*'
expect 2 "$P" token
expect 2 "$P" token old a '*' lock
ok "picket token new: pkt_ and 64 hex, its SHA-256 on the auth-file line; bad input exits 2"
# The docs teach the rule the help states: no example passes a lease id or
# a token in argv, and a Redis password in a URL only through $PICKET_REDIS.
S=$PICKET_SOURCE_DIR
bad=$(grep -nE -- '--lease[ =]"?\$|--token[ =]"?\$|redis://[^ /@]*:[^ /@]*@' "$S/README.md" \
        "$S"/docs/*.md "$S"/man/* "$S"/client/*/*.md 2>/dev/null | grep -v 'PICKET_REDIS)' || true)
[ -z "$bad" ] || h_fail "a doc puts a secret in argv: $bad"
"$PICKET_BIN_DIR/picketd" --help 2>&1 | grep -E 'redis://[^ /@]*:[^ /@]*@' | grep -qv 'PICKET_REDIS)' &&
  h_fail "picketd --help offers a password in the --redis URL"
ok "no doc or help passes a lease id, a token or a Redis password in argv"
echo "$passed passed, 0 failed"
