#!/usr/bin/env bash
# picketd over TLS (--tls-cert, --tls-key, --tls-client-ca), against a real
# redis-server, with certificates made by openssl at test time
# (tls_certs.sh): bad TLS files refused at startup (exit 2, one line naming
# the file, no key material); curl and a plain-HTTP client against the TLS
# port (libpicket and the picket command are client_tls's); the certificate
# swapped by SIGHUP while a keep-alive connection and new connections keep
# making requests (none may fail); a SIGHUP with a broken file keeps the
# old certificate and logs why; mutual TLS: no client certificate, one from
# another CA, a good one, and the client CA swapped by SIGHUP. No key's
# contents may reach the log.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
K="$H_DIR/pki"
mkdir -p "$K"
bash "$PICKET_SOURCE_DIR/tests/integration/tls_certs.sh" "$K" || h_fail "openssl could not make the test certificates"
h_start_redis
passed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }

# ---- startup: bad TLS settings exit 2 with one line naming the file -----
# refused WANT FLAGS...: picketd exits 2, one line on stderr that has WANT.
refused() {
  local want=$1 rc=0
  shift
  timeout 20 "$PICKET_BIN_DIR/picketd" --listen 127.0.0.1:0 --redis "$REDIS_URL" "$@" \
    > "$H_DIR/start.out" 2> "$H_DIR/start.err" || rc=$?
  [ "$rc" = 2 ] || h_fail "picketd $* exited $rc, want 2: $(cat "$H_DIR/start.err")"
  [ "$(wc -l < "$H_DIR/start.err")" = 1 ] || h_fail "picketd $*: not one line: $(cat "$H_DIR/start.err")"
  grep -qF -- "$want" "$H_DIR/start.err" || h_fail "picketd $*: '$want' not in: $(cat "$H_DIR/start.err")"
  cat "$H_DIR/start.err" >> "$H_DIR/start-errors.log"
}
echo "not a certificate" > "$K/garbage.pem"
refused "--tls-cert and --tls-key go together" --tls-cert "$K/srvA.crt"
refused "--tls-cert and --tls-key go together" --tls-key "$K/srvA.key"
refused "--tls-client-ca needs --tls-cert" --tls-client-ca "$K/caC.crt"
refused "--tls-cert $K/missing.crt: No such file" --tls-cert "$K/missing.crt" --tls-key "$K/srvA.key"
refused "--tls-key $K/missing.key: No such file" --tls-cert "$K/srvA.crt" --tls-key "$K/missing.key"
refused "--tls-cert $K/garbage.pem: not a PEM certificate" --tls-cert "$K/garbage.pem" --tls-key "$K/srvA.key"
refused "--tls-key $K/srvA.crt: not an unencrypted PEM private key" --tls-cert "$K/srvA.crt" --tls-key "$K/srvA.crt"
refused "--tls-key $K/srvA.key: this key does not belong to the certificate" --tls-cert "$K/srvB.crt" --tls-key "$K/srvA.key"
refused "--tls-client-ca $K/garbage.pem: no PEM CA certificate" --tls-cert "$K/srvA.crt" --tls-key "$K/srvA.key" --tls-client-ca "$K/garbage.pem"
PICKET_TLS_CERT="$K/srvA.crt" refused "--tls-cert and --tls-key go together"
ok "bad TLS settings and files: exit 2, one line naming the file"

# ---- TLS: the server's certificate files are copies the test replaces ----
cp "$K/srvA.crt" "$H_DIR/server.crt"
cp "$K/srvA.key" "$H_DIR/server.key"
# From the environment, as the systemd unit would pass them.
PICKET_TLS_CERT="$H_DIR/server.crt" PICKET_TLS_KEY="$H_DIR/server.key" h_start_picketd --threads 2
TLS_PID=$PICKETD_PID
URL="https://127.0.0.1:$PICKETD_PORT"
grep -q "TLS on: serving CN=picket test srvA" "$H_DIR/picketd.log" || h_fail "no TLS line in the log"

curl_ok() { # curl_ok WHAT CURL-ARGS...: a 200, else fail
  local code
  code=$(curl -s -o "$H_DIR/body" -w '%{http_code}' --max-time 10 -H 'Content-Type: application/json' "${@:2}") || h_fail "$1: curl exited $?"
  [ "$code" = 200 ] || h_fail "$1: HTTP $code: $(cat "$H_DIR/body")"
}
curl_ok "acquire" --cacert "$K/caA.crt" -X POST "$URL/v1/locks/tls-a/acquire" -H 'Content-Type: application/json' -d '{"ttl_ms":60000}'
LEASE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lease"])' "$H_DIR/body")
curl_ok "renew" --cacert "$K/caA.crt" -X POST "$URL/v1/locks/tls-a/renew" -H 'Content-Type: application/json' -d "{\"lease\":\"$LEASE\"}"
curl_ok "release" --cacert "$K/caA.crt" -X POST "$URL/v1/locks/tls-a/release" -H 'Content-Type: application/json' -d "{\"lease\":\"$LEASE\"}"
curl_ok "TLS 1.2" --cacert "$K/caA.crt" --tlsv1.2 --tls-max 1.2 "$URL/healthz"
curl_ok "TLS 1.3" --cacert "$K/caA.crt" --tlsv1.3 "$URL/healthz"
ok "curl --cacert: acquire, renew, release; TLS 1.2 and 1.3"

rc=0; curl -s -o /dev/null --max-time 10 "$URL/healthz" || rc=$?
[ "$rc" = 60 ] || h_fail "curl without --cacert: exit $rc, want 60 (certificate not trusted)"
rc=0; curl -s -o /dev/null --max-time 10 --cacert "$K/caB.crt" "$URL/healthz" || rc=$?
[ "$rc" = 60 ] || h_fail "curl trusting another CA: exit $rc, want 60"
rc=0; curl -s -o /dev/null --max-time 10 --tls-max 1.1 --cacert "$K/caA.crt" "$URL/healthz" || rc=$?
[ "$rc" != 0 ] || h_fail "TLS 1.1 was accepted"
# Plain HTTP to the TLS port: no HTTP reply, whatever the client.
rc=0; curl -s -o /dev/null --max-time 10 "http://127.0.0.1:$PICKETD_PORT/healthz" || rc=$?
[ "$rc" != 0 ] || h_fail "plain HTTP to the TLS port got an answer"
python3 - "$PICKETD_PORT" <<'PY' || h_fail "plain HTTP to the TLS port"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
try:
    data = s.recv(4096)
except (socket.timeout, ConnectionResetError):
    data = b""
sys.exit(1 if data.startswith(b"HTTP/") else 0)
PY
ok "refused: no --cacert, another CA, TLS 1.1, plain HTTP"


# ---- SIGHUP: the certificate swapped under load, zero failed requests ----
# A client that trusts both CAs makes requests in a loop, each round one
# on a keep-alive connection and one on a new connection (acquire, then
# release), and notes which CA signed each new connection's certificate.
# The test swaps the files for srvB's and sends SIGHUP.
cat > "$H_DIR/loop.py" <<'PY'
import http.client, json, os, ssl, sys, time
port, cafile, dirp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=cafile)
def conn():
    return http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
def call(c, method, path, body=None):
    c.request(method, path, body=body)
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError("%s %s: HTTP %d %r" % (method, path, r.status, data[:200]))
    return json.loads(data)
keep = conn()
keep_first = None
stats = {"requests": 0, "failures": [], "issuers": {}, "keepalive_reconnects": 0}
deadline, rounds_after_b, i = time.time() + 60, 0, 0
while time.time() < deadline and rounds_after_b < 100:
    i += 1
    try:
        call(keep, "GET", "/v1/locks/reload-keep")
        stats["requests"] += 1
        # The same TCP connection all along: a reload must not drop it.
        if keep_first is None:
            keep_first = keep.sock.getsockname()
        elif keep.sock.getsockname() != keep_first:
            stats["keepalive_reconnects"] += 1
            keep_first = keep.sock.getsockname()
    except Exception as e:
        stats["failures"].append("keep-alive: %r" % e)
        keep = conn()
    c = conn()
    try:
        g = call(c, "POST", "/v1/locks/reload-%d/acquire" % (i % 50), b'{"ttl_ms":10000}')
        issuer = dict(x[0] for x in c.sock.getpeercert()["issuer"])["commonName"]
        stats["issuers"][issuer] = stats["issuers"].get(issuer, 0) + 1
        call(c, "POST", "/v1/locks/reload-%d/release" % (i % 50), json.dumps({"lease": g["lease"]}))
        stats["requests"] += 2
        if issuer.endswith("caB"):
            rounds_after_b += 1
            open(os.path.join(dirp, "seen-b"), "a").close()
    except Exception as e:
        stats["failures"].append("new connection: %r" % e)
    finally:
        c.close()
    if i == 20:
        open(os.path.join(dirp, "warm"), "a").close()
json.dump(stats, open(os.path.join(dirp, "loop.json"), "w"))
PY
python3 "$H_DIR/loop.py" "$PICKETD_PORT" "$K/both.crt" "$H_DIR" > "$H_DIR/loop.log" 2>&1 &
LOOP=$!
H_PIDS="$H_PIDS $LOOP"
for _ in $(seq 1 1500); do [ -e "$H_DIR/warm" ] && break; kill -0 "$LOOP" 2>/dev/null || break; sleep 0.02; done
[ -e "$H_DIR/warm" ] || h_fail "the request loop did not get going: $(cat "$H_DIR/loop.log")"
# Replace the files the way an ACME client does: write aside, rename over.
cp "$K/srvB.crt" "$H_DIR/server.crt.new" && mv "$H_DIR/server.crt.new" "$H_DIR/server.crt"
cp "$K/srvB.key" "$H_DIR/server.key.new" && mv "$H_DIR/server.key.new" "$H_DIR/server.key"
kill -HUP "$TLS_PID"
wait "$LOOP" || h_fail "the request loop failed: $(cat "$H_DIR/loop.log")"
kill -0 "$TLS_PID" 2>/dev/null || h_fail "picketd died on SIGHUP"
python3 - "$H_DIR/loop.json" <<'PY' || h_fail "requests across the reload: $(cat "$H_DIR/loop.json")"
import json, sys
s = json.load(open(sys.argv[1]))
print("across the reload: %d requests, %d failed, certificates by issuer %s, keep-alive reconnects %d"
      % (s["requests"], len(s["failures"]), s["issuers"], s["keepalive_reconnects"]))
for f in s["failures"][:5]:
    print("  " + f)
a = s["issuers"].get("picket test caA", 0)
b = s["issuers"].get("picket test caB", 0)
sys.exit(0 if not s["failures"] and a > 0 and b >= 100 and s["keepalive_reconnects"] == 0 else 1)
PY
grep -q "TLS reloaded on SIGHUP: serving CN=picket test srvB" "$H_DIR/picketd.log" || h_fail "no reload line in the log"
curl_ok "after the reload" --cacert "$K/caB.crt" "$URL/healthz"
rc=0; curl -s -o /dev/null --max-time 10 --cacert "$K/caA.crt" "$URL/healthz" || rc=$?
[ "$rc" = 60 ] || h_fail "after the reload the old certificate is still served (curl exit $rc)"
ok "SIGHUP swapped the certificate; no request failed, the keep-alive connection stayed"

# ---- SIGHUP with a broken file: the old certificate stays, the log says why
echo "-----BEGIN CERTIFICATE-----" > "$H_DIR/server.crt"
kill -HUP "$TLS_PID"
for _ in $(seq 1 500); do grep -q "TLS files not reloaded" "$H_DIR/picketd.log" && break; sleep 0.02; done
line=$(grep "TLS files not reloaded" "$H_DIR/picketd.log") || h_fail "a failed reload was not logged"
grep -qF -- "--tls-cert $H_DIR/server.crt: not a PEM certificate chain" <<<"$line" ||
  h_fail "the failed reload does not say which file and why: $line"
[ "$(grep -c "TLS files not reloaded" "$H_DIR/picketd.log")" = 1 ] || h_fail "not one line per failed reload"
curl_ok "after a failed reload" --cacert "$K/caB.crt" "$URL/healthz"
# A key that does not match the certificate is refused the same way.
cp "$K/srvB.crt" "$H_DIR/server.crt"
cp "$K/srvA.key" "$H_DIR/server.key"
kill -HUP "$TLS_PID"
for _ in $(seq 1 500); do [ "$(grep -c "TLS files not reloaded" "$H_DIR/picketd.log")" = 2 ] && break; sleep 0.02; done
grep "TLS files not reloaded" "$H_DIR/picketd.log" | tail -1 | grep -q "does not belong to the certificate" ||
  h_fail "a mismatched key at reload: $(tail -3 "$H_DIR/picketd.log")"
curl_ok "after a mismatched reload" --cacert "$K/caB.crt" "$URL/healthz"
curl -s --cacert "$K/caB.crt" "$URL/metrics" > "$H_DIR/metrics"
grep -q '^picket_tls_reloads_total{outcome="ok"} 1$' "$H_DIR/metrics" &&
  grep -q '^picket_tls_reloads_total{outcome="failed"} 2$' "$H_DIR/metrics" ||
  h_fail "reload metrics: $(grep tls "$H_DIR/metrics")"
ok "SIGHUP with a broken certificate or a mismatched key: old certificate kept, one line why"

# ---- mutual TLS ------------------------------------------------------------
cp "$K/caC.crt" "$H_DIR/client-ca.crt"
h_start_picketd --tls-cert "$K/srvA.crt" --tls-key "$K/srvA.key" --tls-client-ca "$H_DIR/client-ca.crt"
MTLS_PID=$PICKETD_PID
M="https://127.0.0.1:$PICKETD_PORT"
# refused_401 WHAT PATH CURL-ARGS...: 401 unauthenticated and Connection: close
refused_401() {
  local what=$1 path=$2
  shift 2
  curl -s -D "$H_DIR/hdr" -o "$H_DIR/body" --max-time 10 --cacert "$K/caA.crt" -H 'Content-Type: application/json' "$@" "$M$path" ||
    h_fail "$what: curl exited $? (want an HTTP 401)"
  head -1 "$H_DIR/hdr" | grep -q " 401" || h_fail "$what: $(head -1 "$H_DIR/hdr") $(cat "$H_DIR/body")"
  grep -qi '^connection: close' "$H_DIR/hdr" || h_fail "$what: no Connection: close"
  # RFC 9110 11.6.1: a 401 carries a challenge
  grep -qi '^www-authenticate: Mutual-TLS realm="picket"' "$H_DIR/hdr" ||
    h_fail "$what: no WWW-Authenticate: Mutual-TLS challenge: $(cat "$H_DIR/hdr")"
  grep -q '"code":"unauthenticated"' "$H_DIR/body" || h_fail "$what: $(cat "$H_DIR/body")"
  grep -q 'client certificate signed by the configured CA is required' "$H_DIR/body" ||
    h_fail "$what: $(cat "$H_DIR/body")"
}
refused_401 "mTLS, no certificate, /healthz" /healthz
refused_401 "mTLS, no certificate, acquire" /v1/locks/mtls/acquire -X POST -d '{}'
refused_401 "mTLS, a certificate of another CA" /healthz --cert "$K/cliB.crt" --key "$K/cliB.key"
refused_401 "mTLS, a server certificate of another CA" /v1/locks/mtls --cert "$K/srvA.crt" --key "$K/srvA.key"
[ "$(h_redis exists 'picket:{mtls}:fence')" = 0 ] || h_fail "a refused acquire reached Redis"
GOOD=(--cacert "$K/caA.crt" --cert "$K/cliC.crt" --key "$K/cliC.key")
curl_ok "mTLS, good certificate, acquire" "${GOOD[@]}" -X POST "$M/v1/locks/mtls/acquire" -H 'Content-Type: application/json' -d '{}'
LEASE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lease"])' "$H_DIR/body")
curl_ok "mTLS, good certificate, release" "${GOOD[@]}" -X POST "$M/v1/locks/mtls/release" -H 'Content-Type: application/json' -d "{\"lease\":\"$LEASE\"}"
curl -s "${GOOD[@]}" "$M/metrics" > "$H_DIR/metrics"
grep -q '^picket_tls_refused_total{reason="no_certificate"} 2$' "$H_DIR/metrics" &&
  grep -q '^picket_tls_refused_total{reason="untrusted"} 2$' "$H_DIR/metrics" &&
  grep -q '^picket_http_requests_total{endpoint="other",status="401"} 4$' "$H_DIR/metrics" ||
  h_fail "mTLS metrics: $(grep -e tls -e 401 "$H_DIR/metrics")"
ok "mTLS: 401 unauthenticated without a certificate or with another CA's, on every path; a good one passes; counted"

# The picket command through mutual TLS: --cert/--key, or PICKET_CERT and
# PICKET_KEY; without them the server's 401 (exit 1); one without the other
# is a usage error (exit 2).
pk() { "$PICKET_BIN_DIR/picket" --server "$M" --cacert "$K/caA.crt" "$@"; }
out=$(pk --cert "$K/cliC.crt" --key "$K/cliC.key" acquire mtls-cli --ttl 60s) ||
  h_fail "picket --cert --key through mTLS: $out"
lease=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["lease"])' <<<"$out")
PICKET_CERT="$K/cliC.crt" PICKET_KEY="$K/cliC.key" pk release mtls-cli --lease "$lease" >/dev/null ||
  h_fail "picket with PICKET_CERT and PICKET_KEY through mTLS"
out=$(pk status mtls-cli 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "client certificate" <<<"$out" || h_fail "picket without a certificate: rc $rc: $out"
out=$(pk --cert "$K/cliC.crt" status mtls-cli 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "go together" <<<"$out" || h_fail "picket --cert without --key: rc $rc: $out"
ok "mTLS: picket --cert/--key and PICKET_CERT/PICKET_KEY get through; without, the 401; one alone, exit 2"

# TLS and tokens together (issue 16's "done when"): a stranger who can
# reach the port, and trusts the CA, can neither take, read, renew nor
# release a lock; the token's holder can; another token's renew of the
# holder's lease is lease_lost.
TOK=pkt_tls_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
OTHER=pkt_tls_other_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
printf 'holder sha256:%s tls. lock,read\nother sha256:%s * lock,read\n' \
  "$(printf %s "$TOK" | sha256sum | cut -c1-64)" "$(printf %s "$OTHER" | sha256sum | cut -c1-64)" > "$H_DIR/auth"
h_start_picketd --tls-cert "$K/srvA.crt" --tls-key "$K/srvA.key" --auth-file "$H_DIR/auth"
A="https://127.0.0.1:$PICKETD_PORT"
code() { curl -s -o "$H_DIR/body" -w '%{http_code}' --cacert "$K/caA.crt" -H 'Content-Type: application/json' "$@"; }
[ "$(code -H "Authorization: Bearer $TOK" -X POST "$A/v1/locks/tls.x/acquire" -d '{}')" = 200 ] ||
  h_fail "TLS+auth: the holder's acquire: $(cat "$H_DIR/body")"
L=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lease"])' "$H_DIR/body")
for req in "-X POST $A/v1/locks/tls.x/acquire -d {}" "$A/v1/locks/tls.x" \
           "-X POST $A/v1/locks/tls.x/renew -d {\"lease\":\"$L\"}" \
           "-X POST $A/v1/locks/tls.x/release -d {\"lease\":\"$L\"}"; do
  # shellcheck disable=SC2086
  [ "$(code $req)" = 401 ] || h_fail "TLS+auth: a stranger's $req: $(cat "$H_DIR/body")"
done
[ "$(code -H "Authorization: Bearer $OTHER" -X POST "$A/v1/locks/tls.x/renew" -d "{\"lease\":\"$L\"}")" = 409 ] &&
  grep -q lease_lost "$H_DIR/body" || h_fail "TLS+auth: another token renews the lease: $(cat "$H_DIR/body")"
[ "$(code -H "Authorization: Bearer $TOK" -X POST "$A/v1/locks/tls.x/release" -d "{\"lease\":\"$L\"}")" = 200 ] ||
  h_fail "TLS+auth: the holder's release: $(cat "$H_DIR/body")"
ok "TLS with --auth-file: a stranger can neither take, read, renew nor release; the holder can"

# SIGHUP swaps the client CA too, for connections already open as well.
cp "$K/caB.crt" "$H_DIR/client-ca.crt"
kill -HUP "$MTLS_PID"
for _ in $(seq 1 500); do [ "$(grep -c "TLS reloaded on SIGHUP" "$H_DIR/picketd.log")" = 2 ] && break; sleep 0.02; done
curl_ok "mTLS after the CA reload, a certificate of the new CA" --cacert "$K/caA.crt" \
  --cert "$K/cliB.crt" --key "$K/cliB.key" "$M/healthz"
refused_401 "mTLS after the CA reload, a certificate of the old CA" /healthz --cert "$K/cliC.crt" --key "$K/cliC.key"
ok "mTLS: SIGHUP reloads the client CA"

# ---- no key material anywhere in the logs ----------------------------------
for key in srvA srvB cliC cliB caA; do
  grep -v -e '-----' "$K/$key.key" | while read -r l; do
    if grep -qF -- "$l" "$H_DIR/picketd.log" "$H_DIR/start-errors.log"; then echo "$key"; fi
  done
done > "$H_DIR/leaks"
[ -s "$H_DIR/leaks" ] && h_fail "key material in the log: $(sort -u "$H_DIR/leaks")"
grep -q "PRIVATE KEY\|BEGIN CERT" "$H_DIR/picketd.log" "$H_DIR/start-errors.log" && h_fail "PEM text in the log"
ok "no key or certificate contents in any log"
echo "$passed passed, 0 failed"
