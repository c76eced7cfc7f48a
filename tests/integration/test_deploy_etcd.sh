#!/usr/bin/env bash
# deploy/etcd (issue 29): the three-member configuration and the commands
# of its README, run on loopback. Each member gets deploy/etcd/etcd.conf.yml
# with its own name, ports, data dir and certificates put in (TLS for
# clients and peers, certificates with serverAuth and clientAuth from a CA
# made here); the README's root user, picket role and picket user are
# created and auth is enabled; picketd logs in as picket with the flags of
# the README and serves locks (a waiter woken by a release included). A
# user without the role is refused (store_error, nothing granted). The
# password appears in no log and no argv.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
K="$H_DIR/pki"
mkdir -p "$K"
(cd "$K" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -keyout ca.key \
    -out ca.crt -subj "/CN=picket deploy test CA" -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout member.key -out member.csr \
    -subj "/CN=picket deploy test member" 2>/dev/null &&
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' > member.ext &&
  openssl x509 -req -in member.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
    -extfile member.ext -out member.crt 2>/dev/null) || h_fail "openssl could not make the certificates"

ports=$(python3 -c 'import socket
ss = [socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
read -r -a P <<< "$ports"
for i in 1 2 3; do
  python3 - "$PICKET_SOURCE_DIR/deploy/etcd/etcd.conf.yml" "$H_DIR/e$i.yml" "$i" "$H_DIR" "$K" "${P[@]}" <<'PY'
import re, sys
src, dst, i, d, k, ports = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6:]
text = open(src).read()
# member i's own addresses (the file is e1's), then loopback and this run's ports
text = "\n".join(l.replace("10.0.0.1:", "10.0.0.%d:" % i)
                 if l.startswith(("listen-", "advertise-", "initial-advertise-")) else l
                 for l in text.splitlines()) + "\n"
text = re.sub(r"10\.0\.0\.(\d):2379", lambda m: "127.0.0.1:" + ports[2 * (int(m.group(1)) - 1)], text)
text = re.sub(r"10\.0\.0\.(\d):2380", lambda m: "127.0.0.1:" + ports[2 * (int(m.group(1)) - 1) + 1], text)
text = text.replace("name: e1", "name: e%d" % i)
text = text.replace("/var/lib/etcd/picket", "%s/data-e%d" % (d, i))
text = text.replace("/etc/etcd/tls/", k + "/")
settings = [l for l in text.splitlines() if l and not l.lstrip().startswith("#")]
assert not any("10.0.0." in l or "/etc/etcd/tls" in l or "/var/lib" in l for l in settings)
open(dst, "w").write(text)
PY
  etcd --config-file "$H_DIR/e$i.yml" > "$H_DIR/etcd-e$i.log" 2>&1 &
  H_PIDS="$H_PIDS $!"
done
EP="https://127.0.0.1:${P[0]},https://127.0.0.1:${P[2]},https://127.0.0.1:${P[4]}"
e() {
  ETCDCTL_API=3 timeout 20 etcdctl --endpoints "$EP" --cacert "$K/ca.crt" --dial-timeout 2s \
    --command-timeout 5s "$@" < /dev/null
}
for _ in $(seq 1 150); do e endpoint health > /dev/null 2>&1 && break; sleep 0.1; done
e endpoint health > /dev/null 2>&1 || h_fail "the three members are not healthy: $(e endpoint health 2>&1)"

# The README's commands (passwords from stdin instead of a prompt).
ROOT_PASS="root-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"
PASS="pk-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"
e user add "root:$ROOT_PASS" --interactive=false > /dev/null || h_fail "user add root"
e user grant-role root root > /dev/null || h_fail "grant-role root"
e role add picket > /dev/null || h_fail "role add picket"
e role grant-permission picket --prefix=true readwrite 'picket:' > /dev/null || h_fail "grant-permission"
e user add "picket:$PASS" --interactive=false > /dev/null || h_fail "user add picket"
e user grant-role picket picket > /dev/null || h_fail "grant-role picket"
e user add "nobody:$PASS" --interactive=false > /dev/null || h_fail "user add nobody"
e auth enable > /dev/null || h_fail "auth enable"
printf '%s\n' "$PASS" > "$H_DIR/etcd.password"

start() { # start N USER: picketd N as USER with the README's flags; sets URL_N
  local n=$1 pf="$H_DIR/p$1.port"
  PICKET_ETCD="$EP" PICKET_ETCD_CA_FILE="$K/ca.crt" PICKET_ETCD_USER="$2" \
    PICKET_ETCD_PASSWORD_FILE="$H_DIR/etcd.password" \
    "$PICKET_BIN_DIR/picketd" --listen 127.0.0.1:0 --port-file "$pf" >> "$H_DIR/picketd-$n.log" 2>&1 &
  local pid=$!
  H_PIDS="$H_PIDS $pid"
  eval "PID_$n=$pid"
  for _ in $(seq 1 500); do [ -s "$pf" ] && break; kill -0 "$pid" 2>/dev/null || h_fail "picketd $n exited"; sleep 0.02; done
  [ -s "$pf" ] || h_fail "picketd $n did not start"
  eval "URL_$n=http://127.0.0.1:$(cat "$pf")"
}
call() { # call URL METHOD PATH [BODY]: the status; the body in $H_DIR/body
  curl -s -o "$H_DIR/body" -w '%{http_code}' --max-time 20 -X "$2" "$1$3" ${4:+-H "Content-Type: application/json" -d "$4"}
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$H_DIR/body" "$1"; }

start 1 picket
[ "$(call "$URL_1" GET /readyz)" = 200 ] || h_fail "/readyz: $(cat "$H_DIR/body")"
[ "$(call "$URL_1" POST /v1/locks/nightly/acquire '{"ttl_ms":10000,"owner":"a"}')" = 200 ] ||
  h_fail "acquire: $(cat "$H_DIR/body")"
L1=$(field lease) F1=$(field fence)
# a waiter, woken by the release (the release feed's watch needs the role's read)
curl -s -o "$H_DIR/waiter" -w '%{http_code}' --max-time 20 -X POST "$URL_1/v1/locks/nightly/acquire" \
  -H 'Content-Type: application/json' -d '{"ttl_ms":10000,"wait_ms":8000}' > "$H_DIR/waiter.code" &
wpid=$!
sleep 0.5
t0=$(h_now_ms)
[ "$(call "$URL_1" POST /v1/locks/nightly/renew "{\"lease\":\"$L1\",\"ttl_ms\":10000}")" = 200 ] ||
  h_fail "renew: $(cat "$H_DIR/body")"
[ "$(call "$URL_1" POST /v1/locks/nightly/release "{\"lease\":\"$L1\"}")" = 200 ] ||
  h_fail "release: $(cat "$H_DIR/body")"
wait "$wpid"
[ "$(cat "$H_DIR/waiter.code")" = 200 ] || h_fail "the waiter: $(cat "$H_DIR/waiter")"
waited=$(($(h_now_ms) - t0))
[ "$waited" -lt 5000 ] || h_fail "the waiter was woken after ${waited} ms, not by the release"
F2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fence"])' "$H_DIR/waiter")
[ "$F2" -gt "$F1" ] || h_fail "fence $F2 after $F1"
[ "$(call "$URL_1" GET /v1/locks/nightly)" = 200 ] && [ "$(field fence)" = "$F2" ] ||
  h_fail "GET: $(cat "$H_DIR/body")"
echo "ok: picketd as the picket user: acquire, renew, release, a waiter woken, GET"

start 2 nobody
c=$(call "$URL_2" POST /v1/locks/nightly2/acquire '{"ttl_ms":10000}')
[ "$c" = 502 ] && grep -q '"store_error"' "$H_DIR/body" && grep -qi "permission denied" "$H_DIR/body" ||
  h_fail "a user without the role: HTTP $c: $(cat "$H_DIR/body")"
[ "$(e --user "root:$ROOT_PASS" get --prefix 'picket:l/nightly2' --keys-only | wc -l)" = 0 ] ||
  h_fail "a refused acquire left a key"
echo "ok: a user without the role: 502 store_error (permission denied), nothing written"

for f in "$H_DIR"/picketd-*.log; do ! grep -qF "$PASS" "$f" || h_fail "the password is in $f"; done
for p in $PID_1 $PID_2; do
  ! tr '\0' ' ' < "/proc/$p/cmdline" | grep -qF "$PASS" || h_fail "the password is in argv"
done
echo "ok: the password in no log and no argv"
echo "deploy_etcd: ok"
