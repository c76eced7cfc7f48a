#!/usr/bin/env bash
# deploy/users.acl is the least a picketd needs on a Redis shared with other
# writers (issue 17). A real redis-server loads deploy/redis.conf and that
# file (its placeholder hash replaced); picketd connects as the user
# (unix://picketd@/path, and --redis-user, the password from
# --redis-password-file) and runs the API's basic flow: acquire, a waiter
# woken by the release, renew, release, GET, /readyz, /metrics. Redis's ACL
# LOG then holds no refusal of picketd: it needed nothing more. The user
# itself cannot reach past picket:* (keys, channels, FLUSHALL, CONFIG,
# EVAL of any script). Without INFO, picketd cannot read maxmemory-policy
# and refuses to start (fail closed). The password is never in picketd's log.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
src=$PICKET_SOURCE_DIR

PW=acl-Secret-$RANDOM$RANDOM
printf '%s\n' "$PW" > "$H_DIR/picketd.pw"
hash=$(printf '%s' "$PW" | sha256sum | cut -d' ' -f1)
grep -q 'SHA256-OF-THE-PASSWORD-REPLACE-ME' "$src/deploy/users.acl" ||
  h_fail "deploy/users.acl lost its placeholder"
sed "s/SHA256-OF-THE-PASSWORD-REPLACE-ME/$hash/" "$src/deploy/users.acl" > "$H_DIR/users.acl"

REDIS_SOCK=$H_DIR/redis.sock
start_redis() {
  cat > "$H_DIR/redis.conf" <<CONF
include $src/deploy/redis.conf
port 0
unixsocket $REDIS_SOCK
dir $H_DIR
aclfile $1
CONF
  redis-server "$H_DIR/redis.conf" > "$H_DIR/redis.log" 2>&1 &
  REDIS_PID=$!
  H_PIDS="$H_PIDS $REDIS_PID"
}

# the file as shipped (placeholder, not a hash) is refused by Redis itself
cp "$src/deploy/users.acl" "$H_DIR/shipped.acl"
start_redis "$H_DIR/shipped.acl"
for _ in $(seq 1 250); do kill -0 "$REDIS_PID" 2>/dev/null || break; sleep 0.02; done
kill -0 "$REDIS_PID" 2>/dev/null && h_fail "Redis started with the placeholder password hash"
grep -q 'password hash must be' "$H_DIR/redis.log" || h_fail "no ACL error: $(tail -3 "$H_DIR/redis.log")"
echo "ok: deploy/users.acl as shipped is refused until its hash is filled in"

start_redis "$H_DIR/users.acl"
for _ in $(seq 1 250); do [ "$(h_redis ping 2>/dev/null)" = PONG ] && break; sleep 0.02; done
[ "$(h_redis ping)" = PONG ] || h_fail "redis-server with deploy/users.acl did not start"
h_redis acl log reset > /dev/null
as_picketd() { redis-cli -s "$REDIS_SOCK" --user picketd --pass "$PW" --no-auth-warning "$@" 2>&1; }

REDIS_URL="unix://picketd@$REDIS_SOCK"
h_start_picketd --redis-password-file "$H_DIR/picketd.pw"
url=$PICKETD_URL
post() { curl -s -w '\n%{http_code}' -X POST "$url/v1/locks/$1" -H 'Content-Type: application/json' -d "$2"; }
json() { python3 -c 'import json,sys; print(json.loads(sys.argv[1].split("\n")[0])[sys.argv[2]])' "$1" "$2"; }
code() { tail -n1 <<<"$1"; }

a=$(post shared/acquire '{"ttl_ms":30000}')
[ "$(code "$a")" = 200 ] || h_fail "acquire as the ACL user: $a"
lease_a=$(json "$a" lease)
# a waiter, woken by the release (the holder's TTL is 30 s: only the
# release channel can wake it within the 5 s it waits)
t0=$(h_now_ms)
post shared/acquire '{"ttl_ms":30000,"wait_ms":5000}' > "$H_DIR/waiter.out" &
wpid=$!
sleep 0.3
r=$(post shared/release "{\"lease\":\"$lease_a\"}")
[ "$(code "$r")" = 200 ] || h_fail "release: $r"
wait "$wpid"
w=$(cat "$H_DIR/waiter.out")
waited=$(( $(h_now_ms) - t0 ))
[ "$(code "$w")" = 200 ] || h_fail "the waiter: $w"
[ "$waited" -lt 3000 ] || h_fail "the waiter woke after $waited ms: not by the release channel"
lease_b=$(json "$w" lease)
fence_b=$(json "$w" fence)
[ "$fence_b" -gt "$(json "$a" fence)" ] || h_fail "fence $fence_b after $(json "$a" fence)"
n=$(post shared/renew "{\"lease\":\"$lease_b\",\"ttl_ms\":20000}")
[ "$(code "$n")" = 200 ] && [ "$(json "$n" fence)" = "$fence_b" ] || h_fail "renew: $n"
g=$(curl -s "$url/v1/locks/shared")
[ "$(json "$g" held)" = True ] && [ "$(json "$g" fence)" = "$fence_b" ] || h_fail "GET: $g"
r=$(post shared/release "{\"lease\":\"$lease_b\"}")
[ "$(code "$r")" = 200 ] || h_fail "second release: $r"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")" = 200 ] || h_fail "/readyz not 200"
m=$(curl -s "$url/metrics")
grep -qE '^picket_redis_used_memory_bytes [1-9]' <<<"$m" || h_fail "no used-memory gauge"
grep -qE '^picket_redis_db_keys [0-9]' <<<"$m" || h_fail "no key-count gauge"
echo "ok: as the ACL user (unix://picketd@/path): acquire, wake-up by release, renew, GET, release, /readyz, /metrics"

# a semaphore's permit: its script and its inspect use only what is granted
spost() { curl -s -w '\n%{http_code}' -X POST "$url/v1/semaphores/$1" -H 'Content-Type: application/json' -d "$2"; }
s=$(spost pool/acquire '{"limit":2,"ttl_ms":30000,"lock_delay_ms":1000,"max_hold_ms":60000}')
[ "$(code "$s")" = 200 ] || h_fail "semaphore acquire as the ACL user: $s"
r=$(spost pool/renew "{\"lease\":\"$(json "$s" lease)\"}")
[ "$(code "$r")" = 200 ] || h_fail "semaphore renew: $r"
g=$(curl -s "$url/v1/semaphores/pool")
[ "$(json "$g" held)" = 1 ] || h_fail "semaphore GET: $g"
r=$(spost pool/release "{\"lease\":\"$(json "$s" lease)\"}")
[ "$(code "$r")" = 200 ] || h_fail "semaphore release: $r"
echo "ok: a semaphore's acquire, renew, GET, release as the ACL user"

# a read/write lock: a waiting writer (and its giving up), both modes, GET
rpost() { curl -s -w '\n%{http_code}' -X POST "$url/v1/rwlocks/$1" -H 'Content-Type: application/json' -d "$2"; }
rd=$(rpost doc/acquire '{"mode":"read","ttl_ms":30000}')
[ "$(code "$rd")" = 200 ] || h_fail "rwlock read as the ACL user: $rd"
r=$(rpost doc/acquire '{"mode":"write","wait_ms":200}')
[ "$(code "$r")" = 409 ] || h_fail "rwlock write while read: $r"
g=$(curl -s "$url/v1/rwlocks/doc")
[ "$(json "$g" readers)" = 1 ] && [ "$(json "$g" writers_waiting)" = 0 ] || h_fail "rwlock GET: $g"
r=$(rpost doc/release "{\"lease\":\"$(json "$rd" lease)\"}")
[ "$(code "$r")" = 200 ] || h_fail "rwlock release: $r"
r=$(rpost doc/acquire '{"mode":"write","lock_delay_ms":1000,"max_hold_ms":60000}')
[ "$(code "$r")" = 200 ] || h_fail "rwlock write: $r"
r=$(rpost doc/renew "{\"lease\":\"$(json "$r" lease)\"}")
[ "$(code "$r")" = 200 ] || h_fail "rwlock renew: $r"
echo "ok: a read/write lock's reads, writes, waiting writer, GET as the ACL user"

# --redis-user names the same user with a plain unix URL
REDIS_URL="unix://$REDIS_SOCK"
h_start_picketd --redis-user picketd --redis-password-file "$H_DIR/picketd.pw"
[ "$(code "$(post other/acquire '{}')")" = 200 ] || h_fail "acquire with --redis-user"
echo "ok: --redis-user picketd"

grep -q ' warn \| error ' "$H_DIR/picketd.log" && h_fail "picketd warned: $(grep ' warn \| error ' "$H_DIR/picketd.log")"
grep -qF -- "$PW" "$H_DIR/picketd.log" && h_fail "the password is in picketd's log"
denied=$(h_redis acl log)
[ -z "$denied" ] || h_fail "Redis refused picketd something: $denied"
echo "ok: Redis's ACL LOG has no refusal: picketd used only what deploy/users.acl grants"

# what the user cannot do (no globbing of the commands' stars)
set -f
for cmd in "SET other:x 1" "GET other:x" "DEL other:x" "FLUSHALL" "FLUSHDB" "KEYS *" \
           "CONFIG GET requirepass" "CONFIG SET maxmemory-policy allkeys-lru" "PUBLISH other 1" \
           "EVAL 'return 1' 0" "SCRIPT FLUSH" "SHUTDOWN" "ACL LIST" "SCAN 0"; do
  out=$(eval "as_picketd $cmd")
  grep -q NOPERM <<<"$out" || h_fail "the picketd user may run $cmd: $out"
done
set +f
out=$(as_picketd SUBSCRIBE other-channel | head -1)
grep -q NOPERM <<<"$out" || h_fail "the picketd user may subscribe elsewhere: $out"
[ "$(as_picketd SET 'picket:{acl}:probe' 1)" = OK ] || h_fail "the user cannot write under picket:*"
as_picketd DEL 'picket:{acl}:probe' > /dev/null
echo "ok: the user cannot touch keys, channels or settings outside picket:*"

# without INFO the eviction policy is unreadable: picketd refuses to start
h_redis acl setuser picketd -info > /dev/null
REDIS_URL="unix://picketd@$REDIS_SOCK"
"$PICKET_BIN_DIR/picketd" --listen 127.0.0.1:0 --redis "$REDIS_URL" \
  --redis-password-file "$H_DIR/picketd.pw" > "$H_DIR/noinfo.log" 2>&1
st=$?
[ "$st" = 1 ] || h_fail "picketd without INFO exited $st: $(cat "$H_DIR/noinfo.log")"
grep -q 'cannot read Redis maxmemory-policy' "$H_DIR/noinfo.log" || h_fail "$(cat "$H_DIR/noinfo.log")"
echo "ok: without INFO picketd cannot see the eviction policy and refuses to start"
