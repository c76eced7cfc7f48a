#!/usr/bin/env bash
# test_counters.sh: fence counters are bounded by default (issue 39, item
# 6). A lock used once kept its counter forever unless the operator knew
# --fence-idle-ttl-ms; a tenant making up names filled Redis for good.
#  1. picketd with its defaults (clock floor): a lock's, a permit's and a
#     read/write lock's counter carry an expiry (at most a day), none is
#     kept forever;
#  2. --fence-idle-ttl-ms 2000: a few thousand distinct names used once
#     (locks, semaphores, read/write locks) leave no key behind once the
#     TTL has passed;
#  3. a name reused after its counter expired gets a fence above the one
#     it had (the clock floor).
# Redis only: etcd keeps no counter (docs/security.md says what it keeps).
# picket:index, the one index of held names, is left out of the counts: it
# is one key, and list.lua prunes the names it holds of leases that ended
# without a release (and of read/write locks) as listings pass them.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
json() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }
post() { curl -s -X POST "$PICKETD_URL$1" -H 'Content-Type: application/json' -d "$2"; }
# cycle PATH BODY: acquire then release; prints the fence
cycle() {
  local g; g=$(post "$1/acquire" "$2")
  post "$1/release" "{\"lease\":\"$(json lease <<<"$g")\"}" > /dev/null
  json fence <<<"$g"
}

# 1. the defaults
h_start_picketd
f_lock=$(cycle /v1/locks/once.lock '{"ttl_ms":5000}')
cycle /v1/semaphores/once.sem '{"limit":2,"ttl_ms":5000}' > /dev/null
cycle /v1/rwlocks/once.rw '{"mode":"write","ttl_ms":5000}' > /dev/null
[ -n "$f_lock" ] || h_fail "no grant with the defaults"
for k in 'picket:{once.lock}:fence' 'picket:{once.sem}:sem:0:fence' 'picket:{once.rw}:rw:fence'; do
  t=$(h_redis pttl "$k")
  [ "$t" -gt 0 ] && [ "$t" -le 86400000 ] || h_fail "counter $k kept forever by default (PTTL $t)"
done
h_redis --scan | grep -v '^picket:index$' | while read -r k; do
  t=$(h_redis pttl "$k"); [ "$t" != -1 ] || h_fail "key $k has no expiry"  # -2: gone meanwhile
done || exit 1
echo "ok: with the defaults every key a name used once leaves has an expiry of at most a day"
kill -TERM "$PICKETD_PID"; wait "$PICKETD_PID"

# 2. many names, a small TTL
h_redis flushall > /dev/null
h_start_picketd --fence-idle-ttl-ms 2000
"$PICKET_BIN_DIR/picket-bench" --server "$PICKETD_URL" --workload cycle --names 3000 --ops 6000 \
  --warmup 0 --duration 120 --conns 8 --ttl-ms 2000 --format json > "$H_DIR/bench.json" ||
  h_fail "picket-bench: $(cat "$H_DIR/bench.json")"
keys() { h_redis --scan | grep -vc '^picket:index$'; }
n=$(keys)
[ "$n" -gt 2000 ] || h_fail "only $n keys after the load: $(cat "$H_DIR/bench.json")"
for i in $(seq 1 20); do cycle "/v1/semaphores/s$i" '{"limit":3,"ttl_ms":2000}' > /dev/null; done
for i in $(seq 1 20); do cycle "/v1/rwlocks/r$i" '{"mode":"read","ttl_ms":2000}' > /dev/null; done
reuse=$(cycle /v1/locks/again '{"ttl_ms":2000}')
# The TTL is 2 s; Redis expires keys by sampling: allow a wide margin.
for _ in $(seq 1 120); do [ "$(keys)" -eq 0 ] && break; sleep 0.5; done
left=$(keys)
[ "$left" -eq 0 ] || h_fail "$left of $n keys left after the idle TTL: $(h_redis --scan | head -5)"
echo "ok: $n keys of names used once, none left after the idle TTL" \
  "(picket:index: $(h_redis zcard picket:index) names until a listing prunes them)"

# 3. a name reused after its counter expired
again=$(cycle /v1/locks/again '{"ttl_ms":2000}')
[ -n "$again" ] && [ "$again" -gt "$reuse" ] || h_fail "fence after expiry $again, before $reuse"
echo "ok: a name reused after its counter expired gets a higher fence ($reuse -> $again)"
tenant_stop "$PICKETD_PID"
echo "test_counters: ok"
