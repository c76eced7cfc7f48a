# test_paused_holder.sh: the zombie of the article, as real processes. A
# holder (a bash process speaking curl) takes the lock with a 1 s TTL and
# writes to fenced-kv; it is frozen with SIGSTOP (a GC pause, swap, a VM
# migration) for well past its TTL; a second holder takes the lock and
# writes. The first is then resumed and carries on as if it still held the
# lock: its write is refused with 409 stale_fence, its renew and release are
# 409 lease_lost, and the second holder's data and grant are untouched.
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/fault/fault_util.sh"
h_start_redis yes
h_start_picketd
f_start_fencedkv
TTL=1000

# holder N TTL_MS: acquire, write "holderN-1", say "ready", wait for "go", write
# "holderN-2", renew, release; each step's status and body into $H_DIR/hN.*
holder() {
  local n=$1 ttl=$2 out lease fence
  out=$(curl -sS -X POST "$PICKETD_URL/v1/locks/stock/acquire" -H 'Content-Type: application/json' -d "{\"ttl_ms\":$ttl}")
  lease=$(jget lease <<< "$out")
  fence=$(jget fence <<< "$out")
  echo "$fence" > "$H_DIR/h$n.fence"
  step() { # step NAME curl-args...: status into hN.NAME, body into hN.NAME.body
    curl -sS -o "$H_DIR/h$n.$1.body" -w '%{http_code}' -H 'Content-Type: application/json' "${@:2}" > "$H_DIR/h$n.$1"
  }
  put() { step "$1" -X PUT "$KV/kv/stock" -H 'Picket-Lock: stock' -H "Picket-Fence: $fence" \
            --data-binary "holder$n-${1#put}"; }
  put put1
  touch "$H_DIR/h$n.ready"
  while [ ! -e "$H_DIR/h$n.go" ]; do sleep 0.05; done
  put put2
  step renew -X POST "$PICKETD_URL/v1/locks/stock/renew" -d "{\"lease\":\"$lease\",\"ttl_ms\":$ttl}"
  step release -X POST "$PICKETD_URL/v1/locks/stock/release" -d "{\"lease\":\"$lease\"}"
  touch "$H_DIR/h$n.done"
}

wait_file() { # wait_file PATH SECONDS
  for _ in $(seq 1 $(($2 * 50))); do [ -e "$1" ] && return 0; sleep 0.02; done
  h_fail "no $1 after $2 s"
}
expect() { # expect FILE VALUE
  [ "$(cat "$H_DIR/$1")" = "$2" ] || h_fail "$1 is '$(cat "$H_DIR/$1")', want '$2'; $(cat "$H_DIR/$1.body" 2>/dev/null)"
}
code() { jget code < "$H_DIR/$1.body"; }
# start_holder N TTL_MS PREV: holder N in the background (pid in HOLDER),
# once it has its grant, with the fence after PREV, and its first write
# admitted.
start_holder() {
  holder "$1" "$2" &
  HOLDER=$!
  H_PIDS="$H_PIDS $HOLDER"
  wait_file "$H_DIR/h$1.ready" 10
  h_fence_follows "$3" "$(cat "$H_DIR/h$1.fence")" 0 ||
    h_fail "holder $1 has fence $(cat "$H_DIR/h$1.fence") after $3"
  expect "h$1.put1" 200
}

start_holder 1 $TTL 0
H1=$HOLDER
F1=$(cat "$H_DIR/h1.fence")

# Freeze it; /proc says so. It is past its TTL long before it thaws.
# (It stops when next scheduled: on a busy machine that takes a moment.)
kill -STOP "$H1"
for _ in $(seq 1 250); do
  state=$(awk '{print $3}' "/proc/$H1/stat")
  [ "$state" = T ] && break
  sleep 0.02
done
[ "$state" = T ] || h_fail "holder 1 is not stopped (state $state)"
touch "$H_DIR/h1.go" # it will see this only when resumed
stopped_at=$(h_now_ms)
sleep $((TTL * 2 / 1000))

# The lock has expired in Redis: holder 2 gets it with a higher fence.
start_holder 2 30000 "$F1" # all the time it needs: it is not the one paused
F2=$(cat "$H_DIR/h2.fence")

# Holder 1 thaws, still believing it holds its fence.
kill -CONT "$H1"
echo "holder 1 was stopped for $(( $(h_now_ms) - stopped_at )) ms (TTL $TTL ms)"
wait_file "$H_DIR/h1.done" 10
expect h1.put2 409
[ "$(code h1.put2)" = stale_fence ] || h_fail "zombie write: $(cat "$H_DIR/h1.put2.body")"
[ "$(jget highest < "$H_DIR/h1.put2.body")" = "$F2" ] ||
  h_fail "zombie write: highest is not $F2: $(cat "$H_DIR/h1.put2.body")"
expect h1.renew 409
[ "$(code h1.renew)" = lease_lost ] || h_fail "zombie renew: $(cat "$H_DIR/h1.renew.body")"
expect h1.release 409
[ "$(code h1.release)" = lease_lost ] || h_fail "zombie release: $(cat "$H_DIR/h1.release.body")"
echo "zombie: write $(cat "$H_DIR/h1.put2.body")"
echo "zombie: renew $(cat "$H_DIR/h1.renew.body")"

# The store holds holder 2's write and the zombie changed nothing.
curl -sS "$KV/kv/stock" > "$H_DIR/get.body"
[ "$(jget value < "$H_DIR/get.body")" = holder2-1 ] || h_fail "store: $(cat "$H_DIR/get.body")"
[ "$(jget version < "$H_DIR/get.body")" = 2 ] || h_fail "store: $(cat "$H_DIR/get.body")"
# Holder 2 still holds the lock (the zombie's release did not free it) and
# finishes normally: its second write, renew and release succeed.
curl -sS "$PICKETD_URL/v1/locks/stock" > "$H_DIR/inspect.body"
[ "$(jget held < "$H_DIR/inspect.body")" = true ] || h_fail "lock: $(cat "$H_DIR/inspect.body")"
[ "$(jget fence < "$H_DIR/inspect.body")" = "$F2" ] || h_fail "lock: $(cat "$H_DIR/inspect.body")"
touch "$H_DIR/h2.go"
wait_file "$H_DIR/h2.done" 10
expect h2.put2 200
expect h2.renew 200
expect h2.release 200
curl -sS "$KV/kv/stock" > "$H_DIR/get.body"
[ "$(jget value < "$H_DIR/get.body")" = holder2-2 ] || h_fail "store: $(cat "$H_DIR/get.body")"
echo PASS
