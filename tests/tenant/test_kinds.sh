#!/usr/bin/env bash
# test_kinds.sh: a signed fence token says what kind of grant it is
# (issue 39, item 5). Against a real store (redis-server, or one etcd
# member with PICKET_TEST_BACKEND=etcd), a real picketd under --auth-file
# and --fence-key-file, and a real fenced-kv with the same keys:
#  1. a read lease's fence is its write epoch's, the writer's; its token
#     must not be the writer's, and fenced-kv must refuse a write or claim
#     with it under NAME:rw (while the writer's is admitted);
#  2. a tenant whose prefix covers SEM:permit: (but not the semaphore SEM)
#     takes a plain lock named SEM:permit:0; its token must not pass as
#     the permit's: fenced-kv refuses it, the permit holder writes on.
#  3. an election's term is signed as a lock token for the election's
#     name (issue 40): fenced-kv admits it there and under no other name;
#     the side tenant cannot campaign jobs.el (403, no token), and its own
#     elections named like the permit or the writer get tokens refused.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
T_JOBS=$(tok) T_SIDE=$(tok)
cat > "$H_DIR/auth" <<AUTH
jobs sha256:$(sha "$T_JOBS") jobs. lock,read
side sha256:$(sha "$T_SIDE") jobs.sem:,jobs.rw: lock,read
AUTH
printf 'k1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$H_DIR/keys"
chmod 600 "$H_DIR/keys"
h_start_picketd --auth-file "$H_DIR/auth" --fence-key-file "$H_DIR/keys"
"$PICKET_BIN_DIR/fenced-kv" --listen 127.0.0.1:0 --db "$H_DIR/kv.db" --port-file "$H_DIR/kv.port" \
  --fence-key-file "$H_DIR/keys" > "$H_DIR/fenced-kv.log" 2>&1 &
H_PIDS="$H_PIDS $!"
for _ in $(seq 1 250); do [ -s "$H_DIR/kv.port" ] && break; sleep 0.02; done
[ -s "$H_DIR/kv.port" ] || h_fail "fenced-kv did not start: $(cat "$H_DIR/fenced-kv.log")"
KV="http://127.0.0.1:$(cat "$H_DIR/kv.port")"

json() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }
# fields KEY...: the members on one line (one python3 for several)
fields() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(*(d.get(k, "-") for k in sys.argv[1:]))' "$@"; }
# call TOKEN PATH BODY: picketd's reply body
call() { curl -s -X POST "$PICKETD_URL$2" -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -d "$3"; }
# put KEY LOCK FENCE TOKEN: the status of a write to fenced-kv (KEY "" is a claim)
put() {
  local url="$KV/kv/$1" method=PUT
  [ -z "$1" ] && url="$KV/fence/$2/claim" method=POST
  curl -s -o "$H_DIR/kv.body" -w '%{http_code}' -X "$method" "$url" -H "Picket-Lock: $2" \
    -H "Picket-Fence: $3" -H "Picket-Fence-Token: $4" --data-binary v
}

# 1. read and write leases of one read/write lock
w=$(call "$T_JOBS" /v1/rwlocks/jobs.rw/acquire '{"mode":"write","ttl_ms":30000}')
wlock=$(json fence_lock <<<"$w") wfence=$(json fence <<<"$w") wtok=$(json fence_token <<<"$w")
[ "$wlock" = jobs.rw:rw ] && [ -n "$wtok" ] || h_fail "write grant: $w"
[ "$(put doc "$wlock" "$wfence" "$wtok")" = 200 ] || h_fail "the writer's write: $(cat "$H_DIR/kv.body")"
call "$T_JOBS" /v1/rwlocks/jobs.rw/release "{\"lease\":\"$(json lease <<<"$w")\"}" > /dev/null
r=$(call "$T_JOBS" /v1/rwlocks/jobs.rw/acquire '{"mode":"read","ttl_ms":30000}')
rfence=$(json fence <<<"$r") rtok=$(json fence_token <<<"$r")
[ "$rfence" = "$wfence" ] || h_fail "a read lease's fence is its epoch's ($wfence): $r"
[ -n "$rtok" ] && [ "$rtok" != "$wtok" ] || h_fail "the read lease's token is the writer's: $r"
[ "${rtok:0:8}" = v2.read. ] && [ "${wtok:0:9}" = v2.write. ] || h_fail "tokens name no kind: $rtok $wtok"
st=$(put doc "$wlock" "$rfence" "$rtok")
[ "$st" = 403 ] && grep -q fence_invalid "$H_DIR/kv.body" ||
  h_fail "a reader's token wrote under $wlock: $st $(cat "$H_DIR/kv.body")"
[ "$(put "" "$wlock" "$rfence" "$rtok")" = 403 ] || h_fail "a reader's token claimed: $(cat "$H_DIR/kv.body")"
rw2=$(call "$T_SIDE" /v1/locks/jobs.rw:rw/acquire '{"ttl_ms":30000}')
[ "$(put doc "$wlock" "$(json fence <<<"$rw2")" "$(json fence_token <<<"$rw2")")" = 403 ] ||
  h_fail "a plain lock named $wlock wrote as its writer: $(cat "$H_DIR/kv.body")"
curl -s "$KV/kv/doc" | grep -q "\"version\":1" || h_fail "the document changed: $(curl -s "$KV/kv/doc")"
echo "ok: a read lease's token (and a plain lock's named NAME:rw) is refused where the writer's is admitted"

# 2. a semaphore's permit, and a plain lock named like it
p=$(call "$T_JOBS" /v1/semaphores/jobs.sem/acquire '{"limit":2,"ttl_ms":30000}')
plock=$(json fence_lock <<<"$p") pfence=$(json fence <<<"$p") ptok=$(json fence_token <<<"$p")
[ "$plock" = jobs.sem:permit:0 ] && [ "${ptok:0:10}" = v2.permit. ] || h_fail "permit grant: $p"
[ "$(put slot "$plock" "$pfence" "$ptok")" = 200 ] || h_fail "the permit's write: $(cat "$H_DIR/kv.body")"
l=$(call "$T_SIDE" /v1/locks/jobs.sem:permit:0/acquire '{"ttl_ms":30000}')
lfence=$(json fence <<<"$l") ltok=$(json fence_token <<<"$l")
[ -n "$ltok" ] || h_fail "the side tenant's lock: $l"
[ "$lfence" -gt "$pfence" ] || h_fail "the plain lock's fence is not above the permit's: $lfence $pfence"
st=$(put slot "$plock" "$lfence" "$ltok")
[ "$st" = 403 ] && grep -q fence_invalid "$H_DIR/kv.body" ||
  h_fail "a plain lock named $plock wrote as the permit: $st $(cat "$H_DIR/kv.body")"
[ "$(put "" "$plock" "$lfence" "$ltok")" = 403 ] || h_fail "a plain lock claimed the permit's fences"
[ "$(curl -s "$KV/fence/$plock" | json highest)" = "$pfence" ] || h_fail "the permit's highest moved"
[ "$(put slot "$plock" "$pfence" "$ptok")" = 200 ] || h_fail "the permit holder was shut out: $(cat "$H_DIR/kv.body")"
echo "ok: a plain lock named like a permit gets tokens the permit's store refuses; the permit holder writes on"

# 3. an election's term (issue 40): a lock token for the election's name,
# and only for it; no tenant gets one for a name outside its prefixes
e=$(call "$T_JOBS" /v1/elections/jobs.el/campaign '{"ttl_ms":30000,"value":"v"}')
read -r eterm etok elease <<<"$(fields term fence_token lease <<<"$e")"
[ "${etok:0:8}" = v2.lock. ] || h_fail "an election's term has no lock token: $e"
[ "$(put eldoc jobs.el "$eterm" "$etok")" = 200 ] || h_fail "the leader's write: $(cat "$H_DIR/kv.body")"
[ "$(json fence_token <<<"$(call "$T_JOBS" /v1/elections/jobs.el/renew "{\"lease\":\"$elease\"}")")" = "$etok" ] ||
  h_fail "a renewal's token is not the term's"
i=0 # (a key of its own each: no key's binding to a lock refuses the write)
for other in jobs.el2 JOBS.el other.el jobs.el:rw /e/jobs.el; do
  st=$(put "eldoc$((i += 1))" "$other" "$eterm" "$etok")
  [ "$st" != 200 ] && { [ "$other" = /e/jobs.el ] || grep -q fence_invalid "$H_DIR/kv.body"; } ||
    h_fail "the term of jobs.el wrote under $other: $st $(cat "$H_DIR/kv.body")"
  [ "$(put "" "$other" "$eterm" "$etok")" != 200 ] || h_fail "the term of jobs.el claimed $other"
done
for path in jobs.el jobs%2Eel %6Aobs.el jobs.other; do
  out=$(call "$T_SIDE" "/v1/elections/$path/campaign" '{"ttl_ms":30000}')
  grep -q permission_denied <<<"$out" && ! grep -q fence_token <<<"$out" ||
    h_fail "side campaigned $path: $out"
done
for n in jobs.sem:permit:0 jobs.rw:rw; do # side's own names, like the permit's and the writer's
  x=$(call "$T_SIDE" "/v1/elections/$n/campaign" '{"ttl_ms":30000}')
  read -r xterm xtok <<<"$(fields term fence_token <<<"$x")"
  [ "${xtok:0:8}" = v2.lock. ] || h_fail "side's election $n: $x"
  st=$(put slot "$n" "$xterm" "$xtok")
  [ "$st" = 403 ] && grep -q fence_invalid "$H_DIR/kv.body" ||
    h_fail "the term of an election named $n wrote: $st $(cat "$H_DIR/kv.body")"
  [ "$(put "" "$n" "$xterm" "$xtok")" = 403 ] || h_fail "the term of an election named $n claimed"
done
[ "$(curl -s "$KV/fence/$plock" | json highest)" = "$pfence" ] || h_fail "the permit's highest moved"
echo "ok: a term's token is a lock token for its election's name only; none for another's prefix"

kill -TERM "$PICKETD_PID"; wait "$PICKETD_PID"; rc=$?
[ "$rc" -eq 0 ] || h_fail "picketd exited $rc on SIGTERM"
! grep -E 'AddressSanitizer|runtime error|LeakSanitizer' "$H_DIR/picketd.log" "$H_DIR/fenced-kv.log" ||
  h_fail "sanitizer report"
echo "test_kinds: ok (${PICKET_TEST_BACKEND:-redis})"
