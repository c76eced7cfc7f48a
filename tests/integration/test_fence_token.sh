#!/usr/bin/env bash
# test_fence_token.sh: signed fences on picketd's side (issue 17):
# --fence-key-file makes every grant and renewal carry fence_token, which
# an independent HMAC-SHA256 (python3's hmac, per proto/README.md) verifies;
# the picket command prints it (--shell, JSON) and `picket run` exports
# PICKET_FENCE_TOKEN; SIGHUP rotates the signing key, a broken file keeps
# the old one; a bad file stops picketd at start; no key in any output.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
h_start_redis

K1=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
K2=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
printf '# test keys\nk1 %s\n' "$K1" > "$H_DIR/keys"
chmod 600 "$H_DIR/keys"
# verify TOKEN LOCK FENCE [PREFIX [KIND]]: exit 0 when the token is right
# (a v2 token of KIND, default lock)
verify() {
  python3 - "$1" "$2" "$3" "${4:-picket:}" "${5:-lock}" "$H_DIR/keys.all" <<'PY'
import hmac, hashlib, sys
tok, lock, fence, prefix, want_kind, keys = sys.argv[1:]
keys = dict(l.split() for l in open(keys) if l.strip() and not l.startswith("#"))
v, kind, kid, mac = tok.split(".")
msg = b"\0".join([b"picket-fence-v2", kind.encode(), kid.encode(), prefix.encode(), lock.encode(),
                  fence.encode()])
want = hmac.new(bytes.fromhex(keys[kid]), msg, hashlib.sha256).hexdigest()
sys.exit(0 if v == "v2" and kind == want_kind and hmac.compare_digest(want, mac) else 1)
PY
}
printf 'k1 %s\nk2 %s\n' "$K1" "$K2" > "$H_DIR/keys.all"
json() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }

# A bad file: exit 2, the line named, no key material.
printf 'k1 %s\nk1 %s\n' "$K1" "$K2" > "$H_DIR/bad"
out=$("$PICKET_BIN_DIR/picketd" --listen 127.0.0.1:0 --redis "$REDIS_URL" --fence-key-file "$H_DIR/bad" 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "line 2: key id 'k1' given twice" <<<"$out" || h_fail "a bad key file: rc $rc: $out"
grep -q "${K1:0:16}\|${K2:0:16}" <<<"$out" && h_fail "key material in the error"

h_start_picketd --fence-key-file "$H_DIR/keys"
g=$(curl -s -X POST "$PICKETD_URL/v1/locks/inventory-sync/acquire" -H 'Content-Type: application/json' -d '{"ttl_ms":60000}')
tok=$(json fence_token <<<"$g"); fence=$(json fence <<<"$g"); lease=$(json lease <<<"$g")
[ -n "$tok" ] && verify "$tok" inventory-sync "$fence" || h_fail "grant's fence_token: $g"
verify "$tok" inventory-syn "$fence" && h_fail "a token that verifies for another lock"
verify "$tok" inventory-sync $((fence + 1)) && h_fail "a token that verifies for another fence"
verify "$tok" inventory-sync "$fence" other: && h_fail "a token that verifies for another prefix"
r=$(curl -s -X POST "$PICKETD_URL/v1/locks/inventory-sync/renew" -H 'Content-Type: application/json' -d "{\"lease\":\"$lease\"}")
[ "$(json fence_token <<<"$r")" = "$tok" ] || h_fail "renewal's fence_token: $r"
curl -s -X POST "$PICKETD_URL/v1/locks/inventory-sync/release" -H 'Content-Type: application/json' -d "{\"lease\":\"$lease\"}" >/dev/null
echo "ok: grants and renewals carry a fence_token an independent HMAC verifies, for that lock, fence and prefix only"

export PICKET_SERVER=$PICKETD_URL
sh=$("$PICKET_BIN_DIR/picket" acquire cli.lock --shell) || h_fail "picket acquire --shell: $sh"
eval "$sh"
verify "$PICKET_FENCE_TOKEN" cli.lock "$PICKET_FENCE" || h_fail "--shell PICKET_FENCE_TOKEN: $sh"
"$PICKET_BIN_DIR/picket" release cli.lock --lease "$PICKET_LEASE" >/dev/null
j=$("$PICKET_BIN_DIR/picket" acquire cli.json) || h_fail "picket acquire: $j"
verify "$(json fence_token <<<"$j")" cli.json "$(json fence <<<"$j")" || h_fail "picket acquire JSON: $j"
"$PICKET_BIN_DIR/picket" release cli.json --lease "$(json lease <<<"$j")" >/dev/null
out=$(PICKET_FENCE_TOKEN=stale "$PICKET_BIN_DIR/picket" run cli.run -- sh -c 'echo "$PICKET_FENCE $PICKET_FENCE_TOKEN"') ||
  h_fail "picket run: $out"
verify "${out#* }" cli.run "${out%% *}" || h_fail "picket run's PICKET_FENCE_TOKEN: $out"
echo "ok: picket prints fence_token (--shell, JSON) and picket run exports PICKET_FENCE_TOKEN"

# Rotation: the new key first; SIGHUP; grants are signed with it.
printf 'k2 %s\nk1 %s\n' "$K2" "$K1" > "$H_DIR/keys"
kill -HUP "$PICKETD_PID"
for _ in $(seq 1 250); do grep -q "signed with key 'k2'" "$H_DIR/picketd.log" && break; sleep 0.02; done
g=$(curl -s -X POST "$PICKETD_URL/v1/locks/rot/acquire" -H 'Content-Type: application/json' -d '{}')
tok=$(json fence_token <<<"$g")
[ "${tok:0:11}" = "v2.lock.k2." ] && verify "$tok" rot "$(json fence <<<"$g")" || h_fail "after the rotation: $g"
# A broken file on SIGHUP: the key loaded before stays, the log says why.
printf 'k3 1234\n' > "$H_DIR/keys"
kill -HUP "$PICKETD_PID"
for _ in $(seq 1 250); do grep -q "keeping the fence key loaded before" "$H_DIR/picketd.log" && break; sleep 0.02; done
grep -q "line 1: a key is 32 to 64 bytes.*keeping the fence key loaded before" "$H_DIR/picketd.log" ||
  h_fail "no log line for the broken key file: $(tail -3 "$H_DIR/picketd.log")"
g=$(curl -s -X POST "$PICKETD_URL/v1/locks/rot2/acquire" -H 'Content-Type: application/json' -d '{}')
tok=$(json fence_token <<<"$g")
[ "${tok:0:11}" = "v2.lock.k2." ] && verify "$tok" rot2 "$(json fence <<<"$g")" || h_fail "after a broken reload: $g"
grep -q "${K1:0:16}\|${K2:0:16}" "$H_DIR/picketd.log" && h_fail "key material in the log"
echo "ok: SIGHUP rotates the signing key; a broken file keeps the old; no key in the log"
# End to end: fenced-kv with the same keys admits the grant's token and
# nothing forged (a made-up 2^63-1 would otherwise lock honest writers out).
"$PICKET_BIN_DIR/fenced-kv" --listen 127.0.0.1:0 --db "$H_DIR/kv.db" --port-file "$H_DIR/kv.port" \
  --fence-key-file "$H_DIR/keys.all" > "$H_DIR/fenced-kv.log" 2>&1 &
H_PIDS="$H_PIDS $!"
for _ in $(seq 1 250); do [ -s "$H_DIR/kv.port" ] && break; sleep 0.02; done
KV="http://127.0.0.1:$(cat "$H_DIR/kv.port")"
put() { # put LOCK FENCE TOKEN: the status of PUT /kv/stock
  curl -s -o "$H_DIR/kv.body" -w '%{http_code}' -X PUT "$KV/kv/stock" -H "Picket-Lock: $1" \
    -H "Picket-Fence: $2" ${3:+-H "Picket-Fence-Token: $3"} --data-binary 'v'
}
g=$(curl -s -X POST "$PICKETD_URL/v1/locks/inventory-sync/acquire" -H 'Content-Type: application/json' -d '{}')
[ "$(put inventory-sync "$(json fence <<<"$g")" "$(json fence_token <<<"$g")")" = 200 ] ||
  h_fail "fenced-kv refused picketd's own token: $(cat "$H_DIR/kv.body")"
[ "$(put inventory-sync 9223372036854775807)" = 403 ] && grep -q fence_invalid "$H_DIR/kv.body" ||
  h_fail "fenced-kv admitted an unsigned 2^63-1: $(cat "$H_DIR/kv.body")"
[ "$(put inventory-sync 9223372036854775807 "$(json fence_token <<<"$g")")" = 403 ] ||
  h_fail "fenced-kv admitted a token for another fence: $(cat "$H_DIR/kv.body")"
curl -s -X POST "$PICKETD_URL/v1/locks/inventory-sync/release" -H 'Content-Type: application/json' -d "{\"lease\":\"$(json lease <<<"$g")\"}" >/dev/null
out=$("$PICKET_BIN_DIR/picket" run inventory-sync -- sh -c \
  "curl -s -o /dev/null -w '%{http_code}' -X PUT '$KV/kv/stock' -H \"Picket-Lock: \$PICKET_LOCK\" \
   -H \"Picket-Fence: \$PICKET_FENCE\" -H \"Picket-Fence-Token: \$PICKET_FENCE_TOKEN\" --data-binary w")
[ "$out" = 200 ] || h_fail "picket run's write through fenced-kv: $out"
echo "ok: fenced-kv with the same keys admits picketd's tokens (picket run's too), refuses a forged 2^63-1"
echo "PASS: signed fences"
