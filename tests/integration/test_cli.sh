# test_cli.sh: the `picket` command's one-shot commands (acquire, renew,
# release, status; for locks, --semaphore and --read/--write/--rwlock)
# against a real picketd and
# redis-server, their output,
# exit codes and PICKET_SERVER; and that bad flags give one line on stderr,
# exit 2, and change nothing.
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
P="$PICKET_BIN_DIR/picket"
h_start_redis
h_start_picketd
export PICKET_SERVER="$PICKETD_URL"

# expect CODE CMD...: runs CMD, stdout to $H_DIR/out, stderr to $H_DIR/err.
expect() {
  local want=$1; shift
  "$@" > "$H_DIR/out" 2> "$H_DIR/err"
  local got=$?
  [ "$got" = "$want" ] || h_fail "'$*' exited $got, want $want; stderr: $(cat "$H_DIR/err")"
}
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$H_DIR/out" "$1"; }

# --help lists every command, flag and exit code.
expect 0 "$P" --help
for w in acquire renew release status run --server --ttl --wait --grace --owner --lease --shell \
         PICKET_SERVER 250ms " 75 " " 76 " " 125 " " 126 " " 127 "; do
  grep -q -- "$w" "$H_DIR/out" || h_fail "--help does not mention '$w'"
done
expect 0 "$P" --version
grep -q '^picket [0-9]' "$H_DIR/out" || h_fail "--version: $(cat "$H_DIR/out")"

# acquire prints the grant as JSON.
# (TTLs here are minutes: a loaded CI machine may take seconds between steps)
T0=$(h_redis_time_us)
expect 0 "$P" acquire cli-a --ttl 2m --owner alice
pttl=$(h_redis pttl 'picket:{cli-a}:lease')
[ "$pttl" -gt 0 ] && [ "$pttl" -le 120000 ] || h_fail "PTTL after acquire --ttl 2m: $pttl"
[ "$(json 'd["lock"]')" = cli-a ] || h_fail "acquire lock: $(cat "$H_DIR/out")"
[ "$(json 'd["owner"]')" = alice ] || h_fail "acquire owner: $(cat "$H_DIR/out")"
[ "$(json 'd["ttl_ms"]')" = 120000 ] || h_fail "acquire ttl_ms: $(cat "$H_DIR/out")"
F1=$(json 'd["fence"]')
h_fence_follows 0 "$F1" "$T0" || h_fail "acquire fence: $(cat "$H_DIR/out")"
LEASE=$(json 'd["lease"]')
[[ "$LEASE" =~ ^[0-9a-f]{32}$ ]] || h_fail "acquire lease: $LEASE"

# Held: exit 75, one line naming the owner, nothing changed.
expect 75 "$P" acquire cli-a --ttl 2m
[ "$(wc -l < "$H_DIR/err")" = 1 ] || h_fail "lock held: not one line: $(cat "$H_DIR/err")"
grep -q alice "$H_DIR/err" || h_fail "lock held: owner not shown: $(cat "$H_DIR/err")"
[ "$(h_redis get 'picket:{cli-a}:fence')" = "$F1" ] || h_fail "a refused acquire moved the fence"

# status: held, owner, fence; never the lease id.
expect 0 "$P" status cli-a
[ "$(json 'd["held"]')" = True ] || h_fail "status held: $(cat "$H_DIR/out")"
[ "$(json 'd["fence"]')" = "$F1" ] || h_fail "status fence: $(cat "$H_DIR/out")"
[ "$(json 'd["owner"]')" = alice ] || h_fail "status owner: $(cat "$H_DIR/out")"
grep -q "$LEASE" "$H_DIR/out" && h_fail "status shows the lease id"

# renew: new TTL; with the server's default when --ttl is absent.
expect 0 "$P" renew cli-a --lease "$LEASE" --ttl=5m
[ "$(h_redis pttl 'picket:{cli-a}:lease')" -gt 120000 ] || h_fail "renew did not extend the TTL"
[ "$(json 'd["ttl_ms"]')" = 300000 ] || h_fail "renew ttl_ms: $(cat "$H_DIR/out")"
[ "$(json 'd["fence"]')" = "$F1" ] || h_fail "renew fence: $(cat "$H_DIR/out")"
expect 0 "$P" renew cli-a --lease "$LEASE"
[ "$(json 'd["ttl_ms"]')" = 30000 ] || h_fail "renew default ttl_ms: $(cat "$H_DIR/out")"

# Someone else's lease id: lost (76), nothing changed.
OTHER=0123456789abcdef0123456789abcdef
expect 76 "$P" renew cli-a --lease "$OTHER" --ttl 1s
expect 76 "$P" release cli-a --lease "$OTHER"
[ "$(h_redis pttl 'picket:{cli-a}:lease')" -gt 2000 ] || h_fail "a foreign renew/release changed the lease"

# release, then the lock is free and the next grant has the next fence.
expect 0 "$P" release cli-a --lease "$LEASE"
[ "$(json 'd["released"]')" = True ] || h_fail "release: $(cat "$H_DIR/out")"
expect 76 "$P" release cli-a --lease "$LEASE"
expect 0 "$P" status cli-a
[ "$(json 'd["held"]')" = False ] || h_fail "status after release: $(cat "$H_DIR/out")"

# --shell prints assignments a shell can eval; a chosen --lease is used.
expect 0 "$P" acquire cli-a --shell --lease "$OTHER" --ttl 250ms
eval "$(cat "$H_DIR/out")"
[ "$PICKET_LOCK" = cli-a ] && h_fence_follows "$F1" "$PICKET_FENCE" 0 && [ "$PICKET_LEASE" = "$OTHER" ] ||
  h_fail "--shell: $(cat "$H_DIR/out")"
sleep 0.4
expect 76 "$P" renew cli-a --lease "$OTHER" # expired

# --server beats PICKET_SERVER; nothing listening: exit 1.
expect 0 env PICKET_SERVER=http://127.0.0.1:1 "$P" --server "$PICKETD_URL" status cli-a
expect 1 env PICKET_SERVER=http://127.0.0.1:1 "$P" status cli-a
expect 0 env -u PICKET_SERVER "$P" status cli-a --server="$PICKETD_URL"

# A server that is not picketd (200 with a body that is not JSON): exit 1.
mkdir -p "$H_DIR/www/v1/locks"
echo 'not json' > "$H_DIR/www/v1/locks/cli-p"
python3 -u -m http.server --bind 127.0.0.1 --directory "$H_DIR/www" 0 > "$H_DIR/www.log" 2>&1 &
H_PIDS="$H_PIDS $!"
for _ in $(seq 1 250); do grep -q 'port [0-9]' "$H_DIR/www.log" && break; sleep 0.02; done
www=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$H_DIR/www.log" | head -1)
[ -n "$www" ] || h_fail "python http.server did not start: $(cat "$H_DIR/www.log")"
expect 1 "$P" --server "http://127.0.0.1:$www" status cli-p
grep -q 'unexpected reply' "$H_DIR/err" || h_fail "not-picketd reply: $(cat "$H_DIR/err")"

# --wait: a lock freed during the wait is granted; one still held when the
# wait ends gives 75. (Needs picketd's blocking acquire.)
t0=$(h_now_ms)
expect 0 "$P" acquire cli-w --ttl 700ms
expect 0 "$P" acquire cli-w --ttl 30s --wait 10s
t=$(( $(h_now_ms) - t0 ))
[ "$t" -ge 650 ] || h_fail "acquire --wait returned $t ms after the holder's 700 ms grant"
t0=$(h_now_ms)
expect 75 "$P" acquire cli-w --wait 500ms
t=$(( $(h_now_ms) - t0 ))
[ "$t" -ge 400 ] || h_fail "acquire --wait 500ms gave up after $t ms"

# --semaphore: acquire takes one of --limit N permits (JSON with the slot
# and its fence lock; --shell with PICKET_PERMIT and PICKET_SEMAPHORE); a
# full semaphore is 75 naming semaphore_full, another limit 2; renew,
# release and status work on the semaphore's paths.
expect 0 "$P" acquire cli-s --semaphore --limit 2 --ttl 2m --owner sam
[ "$(json 'd["semaphore"]')" = cli-s ] && [ "$(json 'd["permit"]')" = 0 ] &&
  [ "$(json 'd["limit"]')" = 2 ] && [ "$(json 'd["fence_lock"]')" = cli-s:permit:0 ] &&
  [ "$(json 'd["owner"]')" = sam ] && [ "$(json 'd["ttl_ms"]')" = 120000 ] ||
  h_fail "acquire --semaphore: $(cat "$H_DIR/out")"
SL0=$(json 'd["lease"]')
SF0=$(json 'd["fence"]')
expect 0 "$P" acquire cli-s --semaphore --limit 2 --ttl 2m --shell
eval "$(cat "$H_DIR/out")"
[ "$PICKET_LOCK" = cli-s:permit:1 ] && [ "$PICKET_PERMIT" = 1 ] && [ "$PICKET_SEMAPHORE" = cli-s ] &&
  [[ "$PICKET_LEASE" =~ ^[0-9a-f]{32}$ ]] && [ "$PICKET_FENCE" -ge 1 ] ||
  h_fail "acquire --semaphore --shell: $(cat "$H_DIR/out")"
SL1=$PICKET_LEASE
expect 75 "$P" acquire cli-s --semaphore --limit 2
grep -q semaphore "$H_DIR/err" && [ "$(wc -l < "$H_DIR/err")" = 1 ] || h_fail "full: $(cat "$H_DIR/err")"
expect 2 "$P" acquire cli-s --semaphore --limit 3
grep -q 'limit 2' "$H_DIR/err" || h_fail "limit mismatch: $(cat "$H_DIR/err")"
expect 0 "$P" status cli-s --semaphore
[ "$(json 'd["limit"]')" = 2 ] && [ "$(json 'd["held"]')" = 2 ] &&
  [ "$(json '[p["fence_lock"] for p in d["permits"]]')" = "['cli-s:permit:0', 'cli-s:permit:1']" ] &&
  [ "$(json 'd["permits"][0]["fence"]')" = "$SF0" ] ||
  h_fail "status --semaphore: $(cat "$H_DIR/out")"
grep -q "$SL0" "$H_DIR/out" && h_fail "status --semaphore shows a lease id"
expect 0 "$P" status cli-s # the lock of that name is apart
[ "$(json 'd["held"]')" = False ] || h_fail "a semaphore's permits hold the lock: $(cat "$H_DIR/out")"
expect 0 "$P" renew cli-s --semaphore --lease "$SL0" --ttl 5m
[ "$(json 'd["semaphore"]')" = cli-s ] && [ "$(json 'd["permit"]')" = 0 ] &&
  [ "$(json 'd["fence"]')" = "$SF0" ] && [ "$(json 'd["ttl_ms"]')" = 300000 ] &&
  [ "$(json 'd["fence_lock"]')" = cli-s:permit:0 ] || h_fail "renew --semaphore: $(cat "$H_DIR/out")"
expect 76 "$P" renew cli-s --lease "$SL0" # not a lock's lease
expect 0 env PICKET_LEASE="$SL1" "$P" release cli-s --semaphore
[ "$(json 'd["released"]')" = True ] && [ "$(json 'd["semaphore"]')" = cli-s ] ||
  h_fail "release --semaphore: $(cat "$H_DIR/out")"
expect 76 "$P" release cli-s --semaphore --lease "$SL1"
expect 0 "$P" release cli-s --semaphore --lease "$SL0"
expect 0 "$P" status cli-s --semaphore
[ "$(json 'd["held"]')" = 0 ] && [ "$(json 'd["permits"]')" = "[]" ] || h_fail "after release: $(cat "$H_DIR/out")"

# --read/--write: acquire takes a read or write lease of an rwlock (JSON
# with rwlock, mode and fence_lock NAME:rw; --shell with PICKET_MODE and
# PICKET_RWLOCK); a write while a read is held is 75; renew, release and
# status --rwlock work on the rwlock's paths.
expect 0 "$P" acquire cli-rw --write --ttl 2m --owner wes
[ "$(json 'd["rwlock"]')" = cli-rw ] && [ "$(json 'd["mode"]')" = write ] &&
  [ "$(json 'd["fence_lock"]')" = cli-rw:rw ] && [ "$(json 'd["owner"]')" = wes ] ||
  h_fail "acquire --write: $(cat "$H_DIR/out")"
WL=$(json 'd["lease"]')
WF=$(json 'd["fence"]')
expect 75 "$P" acquire cli-rw --read
expect 0 "$P" release cli-rw --rwlock --lease "$WL"
[ "$(json 'd["released"]')" = True ] && [ "$(json 'd["rwlock"]')" = cli-rw ] ||
  h_fail "release --rwlock: $(cat "$H_DIR/out")"
expect 0 "$P" acquire --read cli-rw --ttl 2m --shell
eval "$(cat "$H_DIR/out")"
[ "$PICKET_LOCK" = cli-rw:rw ] && [ "$PICKET_MODE" = read ] && [ "$PICKET_RWLOCK" = cli-rw ] &&
  [ "$PICKET_FENCE" = "$WF" ] && [[ "$PICKET_LEASE" =~ ^[0-9a-f]{32}$ ]] ||
  h_fail "acquire --read --shell: $(cat "$H_DIR/out")"
RL=$PICKET_LEASE
expect 0 "$P" acquire cli-rw --read
expect 75 "$P" acquire cli-rw --write
expect 0 "$P" status cli-rw --rwlock
[ "$(json 'd["readers"]')" = 2 ] && [ "$(json 'd["writer"]')" = None ] &&
  [ "$(json 'd["fence"]')" = "$WF" ] && [ "$(json 'd["fence_lock"]')" = cli-rw:rw ] ||
  h_fail "status --rwlock: $(cat "$H_DIR/out")"
grep -q "$RL" "$H_DIR/out" && h_fail "status --rwlock shows a lease id"
expect 0 "$P" renew cli-rw --rwlock --lease "$RL" --ttl 5m
[ "$(json 'd["mode"]')" = read ] && [ "$(json 'd["fence"]')" = "$WF" ] &&
  [ "$(json 'd["ttl_ms"]')" = 300000 ] || h_fail "renew --rwlock: $(cat "$H_DIR/out")"
expect 76 "$P" renew cli-rw --lease "$RL" # not a lock's lease
expect 0 env PICKET_LEASE="$RL" "$P" release cli-rw --rwlock
expect 76 "$P" release cli-rw --rwlock --lease "$RL"

# Bad flags and values: exit 2, one line on stderr, no request made.
before=$(h_redis dbsize)
bad() {
  expect 2 "$P" "$@"
  [ "$(wc -l < "$H_DIR/err")" = 1 ] || h_fail "'$*': stderr is not one line: $(cat "$H_DIR/err")"
  [ -s "$H_DIR/out" ] && h_fail "'$*' printed to stdout: $(cat "$H_DIR/out")"
  return 0
}
bad
bad frobnicate x
bad acquire
bad acquire cli-b --ttl 30
bad acquire cli-b --ttl 30x
bad acquire cli-b --ttl -5s
bad acquire cli-b --ttl 0s
bad acquire cli-b --ttl
bad acquire cli-b --wait soon
bad acquire cli-b --grace 1s
bad acquire cli-b --frob
bad acquire cli-b -x
bad acquire 'bad name'
bad acquire 'a{b}'
bad acquire cli-b extra
bad acquire cli-b --lease XYZ
bad acquire cli-b --shell=yes
bad acquire cli-b --owner "$(head -c 200 /dev/zero | tr '\0' o)"
bad renew cli-b
bad release cli-b
bad release cli-b --lease "$OTHER" --ttl 1s
bad status cli-b --owner x
bad status cli-b -- ls
bad run cli-b
bad run cli-b --
bad run cli-b --grace 5 -- true
bad --server ftp://example status cli-b
PICKET_SERVER=nonsense bad status cli-b
grep -q PICKET_SERVER "$H_DIR/err" || h_fail "a bad PICKET_SERVER is not named: $(cat "$H_DIR/err")"
expect 0 env PICKET_SERVER= "$P" --server "$PICKETD_URL" status cli-b
bad acquire cli-b --semaphore
bad acquire cli-b --limit 2
bad acquire cli-b --semaphore --limit 0
bad acquire cli-b --semaphore --limit 2x
bad acquire cli-b --semaphore --limit=-1
bad acquire cli-b --semaphore=1 --limit 2
bad acquire "$(head -c 181 /dev/zero | tr '\0' s)" --semaphore --limit 2
bad status cli-b --semaphore --limit 2
bad renew cli-b --semaphore --limit 2 --lease "$OTHER"
bad acquire cli-b --read --write
bad acquire cli-b --rwlock
bad acquire cli-b --read --semaphore --limit 2
bad acquire cli-b --write=1
bad acquire "$(head -c 198 /dev/zero | tr '\0' r)" --read
bad status cli-b --read
bad renew cli-b --write --lease "$OTHER"
bad release cli-b --rwlock --semaphore --lease "$OTHER"
bad run cli-b --semaphore -- true
bad acquire cli-b --ttl 2h # the server's --max-ttl-ms (1h): its 400 becomes 2
[ "$(h_redis dbsize)" = "$before" ] || h_fail "a refused command changed Redis"
echo "test_cli: ok"
