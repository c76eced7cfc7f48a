# test_cli.sh: the `picket` command's one-shot commands (acquire, renew,
# release, status; for locks, --semaphore and --read/--write/--rwlock) and
# the operators' ls, show, break and watch against a real picketd and
# redis-server, their output,
# exit codes and PICKET_SERVER; and that bad flags give one line on stderr,
# exit 2, and change nothing. Also `picket run` stopped by a break within
# a second, through the lock's events rather than its next renewal.
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
for w in acquire renew release status run ls show break watch --all --json --yes --count \
         --server --ttl --wait --grace --owner --lease --shell \
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

# Bad flags and values: exit 2, one line on stderr, no request made. No
# key may appear; keys with a TTL may expire meanwhile (a slow run: the
# CI run of 71ac310 under ASan saw DBSIZE fall), so the check is that the
# keys after are among the keys before.
before=$(h_redis --raw keys '*' | sort)
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
bad ls --limit 0
bad ls --limit 1001
bad ls --limit 5x
bad ls 'a b'
bad ls "$(head -c 201 /dev/zero | tr '\0' p)"
bad ls cli-a cli-b
bad ls --yes
bad ls --all=1
bad show
bad show 'bad name'
bad show cli-b --all
bad show cli-b --semaphore
bad break < /dev/null
bad break 'a{b}' --yes
bad break cli-b < /dev/null
bad break cli-b --limit 2 --yes
bad status cli-b --json
bad watch
bad watch 'bad name'
bad watch cli-b --count 0
bad watch cli-b --count 2x
bad watch cli-b --yes
bad watch cli-b extra
bad acquire cli-b --ttl 2h # the server's --max-ttl-ms (1h): its 400 becomes 2
new=$(comm -13 <(echo "$before") <(h_redis --raw keys '*' | sort))
[ -z "$new" ] || h_fail "a refused command changed Redis: new keys $new"

# ls: the held names under a prefix as a table (KIND NAME HOLDERS OWNER
# FENCE TTL AGE RENEWALS WAITERS), in name order; --limit N shows N and
# says more follow; --all follows the cursor over several pages; --json
# prints each page as the API's JSON.
T0=$(( $(h_redis_time_us) / 1000 ))
for i in 1 2 3 4 5; do
  expect 0 "$P" acquire "cli-ls.$i" --ttl 2m --owner "own$i"
  eval "LSF$i=$(json 'd["fence"]') LSL$i=$(json 'd["lease"]')"
done
expect 0 "$P" renew cli-ls.2 --lease "$LSL2" --ttl 2m
expect 0 "$P" acquire cli-ls.sem --semaphore --limit 3 --ttl 2m
expect 0 "$P" acquire cli-lt --ttl 2m # beside the prefix, not in it
T1=$(( $(h_redis_time_us) / 1000 ))
expect 0 "$P" ls cli-ls.
[ "$(head -1 "$H_DIR/out" | tr -s ' ')" = "KIND NAME HOLDERS OWNER FENCE TTL AGE RENEWALS WAITERS" ] ||
  h_fail "ls header: $(cat "$H_DIR/out")"
[ "$(awk 'NR > 1 {print $2}' "$H_DIR/out" | tr '\n' ' ')" = "cli-ls.1 cli-ls.2 cli-ls.3 cli-ls.4 cli-ls.5 cli-ls.sem " ] ||
  h_fail "ls names: $(cat "$H_DIR/out")"
read -r k n h o f t a r w <<<"$(awk '$2 == "cli-ls.3"' "$H_DIR/out")"
[ "$k $n $h $o $f $r $w" = "lock cli-ls.3 1 own3 $LSF3 0 0" ] && [[ $t =~ ^[0-9]m[0-9]{2}s$ ]] &&
  [[ $a =~ ^[0-9.]+(ms|s)$ ]] || h_fail "ls row of cli-ls.3: $(cat "$H_DIR/out")"
read -r k n h o f t a r w <<<"$(awk '$2 == "cli-ls.sem"' "$H_DIR/out")"
[ "$k $n $h $o $f $a $r $w" = "semaphore cli-ls.sem 1/3 - - - - 0" ] ||
  h_fail "ls row of a semaphore: $(cat "$H_DIR/out")"
[ "$(awk '$2 == "cli-ls.2" {print $8}' "$H_DIR/out")" = 1 ] || h_fail "ls renewals: $(cat "$H_DIR/out")"
[ ! -s "$H_DIR/err" ] || h_fail "ls with all names shown: $(cat "$H_DIR/err")"
expect 0 "$P" ls cli-ls. --limit 2
[ "$(awk 'NR > 1 {print $2}' "$H_DIR/out" | tr '\n' ' ')" = "cli-ls.1 cli-ls.2 " ] ||
  h_fail "ls --limit 2: $(cat "$H_DIR/out")"
grep -q -- '--all' "$H_DIR/err" || h_fail "ls --limit 2 does not say more follow: $(cat "$H_DIR/err")"
expect 0 "$P" ls cli-ls. --limit 2 --all
[ "$(grep -c '^KIND' "$H_DIR/out")" = 1 ] &&
  [ "$(awk 'NR > 1 {print $2}' "$H_DIR/out" | tr '\n' ' ')" = "cli-ls.1 cli-ls.2 cli-ls.3 cli-ls.4 cli-ls.5 cli-ls.sem " ] &&
  [ ! -s "$H_DIR/err" ] || h_fail "ls --all over pages of 2: $(cat "$H_DIR/out" "$H_DIR/err")"
expect 0 "$P" ls cli-ls. --limit=2 --all --json
python3 - "$H_DIR/out" "$LSF1" "$T0" "$T1" <<'PY' || h_fail "ls --all --json: $(cat "$H_DIR/out")"
import json, sys
pages = [json.loads(l) for l in open(sys.argv[1])]
assert len(pages) >= 3 and all(p["cursor"] for p in pages[:-1]) and pages[-1]["cursor"] is None
entries = [e for p in pages for e in p["locks"]]  # a page may be short, even empty
assert [e["name"] for e in entries] == ["cli-ls.%d" % i for i in range(1, 6)] + ["cli-ls.sem"], entries
e = entries[0]
assert e["kind"] == "lock" and e["owner"] == "own1" and e["fence"] == int(sys.argv[2]), e
assert int(sys.argv[3]) <= e["acquired_at"] <= int(sys.argv[4]) and e["renewals"] == 0, e
s = entries[-1]
assert s["kind"] == "semaphore" and s["limit"] == 3 and s["fence"] is None, s
PY
expect 0 "$P" ls cli-ls.nothing
[ "$(wc -l < "$H_DIR/out")" = 1 ] || h_fail "ls of no names: $(cat "$H_DIR/out")"

# show: one lock for people: held, owner, fence, TTL, when acquired (age
# and ISO time), renewals, waiters; --json the same as the API's members.
expect 0 "$P" show cli-ls.3
grep -qx 'held: *yes' "$H_DIR/out" && grep -qx 'owner: *own3' "$H_DIR/out" &&
  grep -qx "fence: *$LSF3" "$H_DIR/out" && grep -qx 'renewals: *0' "$H_DIR/out" &&
  grep -qx 'waiters: *0' "$H_DIR/out" && grep -Eqx 'ttl: *[0-9]m[0-9]{2}s' "$H_DIR/out" &&
  grep -Eqx 'acquired: *[0-9.]+(ms|s) ago \(20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z\)' "$H_DIR/out" ||
  h_fail "show: $(cat "$H_DIR/out")"
expect 0 "$P" show cli-ls.3 --json
[ "$(json 'd["owner"], d["fence"], d["renewals"], d["waiters"], d["held"]')" = "('own3', $LSF3, 0, 0, True)" ] &&
  [ "$(json 'd["acquired_at"]')" -ge "$T0" ] && [ "$(json 'd["acquired_at"]')" -le "$T1" ] ||
  h_fail "show --json: $(cat "$H_DIR/out")"
expect 0 "$P" show cli-never
grep -qx 'held: *no' "$H_DIR/out" && grep -qx 'acquired: *-' "$H_DIR/out" &&
  grep -qx 'renewals: *-' "$H_DIR/out" || h_fail "show of a free lock: $(cat "$H_DIR/out")"
expect 0 "$P" show cli-never --json
[ "$(json 'd["held"], d["acquired_at"], d["renewals"]')" = "(False, None, None)" ] ||
  h_fail "show --json of a free lock: $(cat "$H_DIR/out")"

# break: the lease ends now and the fence moves past it; the broken
# holder's renew and release exit 76 saying it was broken. Without --yes,
# a stdin that is no terminal is exit 2 and nothing changes; on a
# terminal it asks, and only y breaks.
expect 0 "$P" acquire cli-brk --ttl 2m --owner victim
BL=$(json 'd["lease"]')
BF=$(json 'd["fence"]')
expect 2 "$P" break cli-brk < /dev/null
grep -q -- '--yes' "$H_DIR/err" || h_fail "break without --yes: $(cat "$H_DIR/err")"
expect 0 "$P" status cli-brk
[ "$(json 'd["held"]')" = True ] || h_fail "a refused break broke: $(cat "$H_DIR/out")"
if command -v script > /dev/null; then
  printf 'n\n' | expect 1 script -qec "'$P' break cli-brk" /dev/null
  grep -q "victim" "$H_DIR/out" || h_fail "break's question does not name the owner: $(cat "$H_DIR/out")"
  expect 0 "$P" status cli-brk
  [ "$(json 'd["held"]')" = True ] || h_fail "break answered n broke: $(cat "$H_DIR/out")"
fi
expect 0 "$P" break cli-brk --yes
grep -q '^broken: lock cli-brk' "$H_DIR/out" && grep -q "owner 'victim'" "$H_DIR/out" ||
  h_fail "break: $(cat "$H_DIR/out")"
NF=$(sed -n 's/.*its fence is now \([0-9]*\)$/\1/p' "$H_DIR/out")
[ -n "$NF" ] && [ "$NF" -gt "$BF" ] || h_fail "break: fence '$NF' not above $BF: $(cat "$H_DIR/out")"
expect 76 "$P" renew cli-brk --lease "$BL"
grep -q 'broken' "$H_DIR/err" || h_fail "renew after a break does not say broken: $(cat "$H_DIR/err")"
expect 76 "$P" release cli-brk --lease "$BL"
expect 0 "$P" break cli-brk --yes --json
[ "$(json 'd["lock"], d["broken"], d["owner"]')" = "('cli-brk', False, None)" ] &&
  [ "$(json 'd["fence"]')" -gt "$NF" ] || h_fail "break --json of a free lock: $(cat "$H_DIR/out")"
NF=$(json 'd["fence"]')
if command -v script > /dev/null; then
  expect 0 "$P" acquire cli-brk --ttl 2m
  printf 'y\n' | expect 0 script -qec "'$P' break cli-brk" /dev/null
  grep -q 'broken: lock cli-brk' "$H_DIR/out" || h_fail "break answered y: $(cat "$H_DIR/out")"
  NF=$(sed -n 's/.*its fence is now \([0-9]*\).*/\1/p' "$H_DIR/out" | tr -d '\r')
fi
expect 0 "$P" acquire cli-brk --ttl 2m
[ "$(json 'd["fence"]')" -gt "$NF" ] || h_fail "the grant after a break: $(cat "$H_DIR/out")"

# watch: one line per event (time, event, members), state first; --count N
# exits 0 after N; --json prints {event, data}; SIGTERM and SIGINT exit 0;
# a server it cannot reach is exit 1 with one line.
# lines FILE N: waits (5 s) until FILE has N lines.
lines() {
  for _ in $(seq 1 250); do [ "$(wc -l < "$1")" -ge "$2" ] && return 0; sleep 0.02; done
  h_fail "$1 has not $2 lines: $(cat "$1")"
}
"$P" watch cli-watch --count 5 > "$H_DIR/watch" 2> "$H_DIR/watch.err" &
WP=$!
H_PIDS="$H_PIDS $WP" # killed by h_cleanup if a check fails first
lines "$H_DIR/watch" 1
expect 0 "$P" acquire cli-watch --ttl 2m --owner "bob o'neil"
WL=$(json 'd["lease"]'); WF=$(json 'd["fence"]')
expect 0 "$P" renew cli-watch --lease "$WL" --ttl 3m
expect 0 "$P" release cli-watch --lease "$WL"
expect 0 "$P" break cli-watch --yes
wait "$WP" || h_fail "watch --count 5 exited $?: $(cat "$H_DIR/watch.err")"
T='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'
W=("^$T state held=false fence=[0-9]+ ttl_ms=0\$"
   "^$T granted fence=$WF owner=\"bob o'neil\" ttl_ms=120000\$"
   "^$T renewed fence=$WF ttl_ms=180000\$"
   "^$T released fence=$WF\$"
   "^$T broken fence=0 next_fence=[0-9]+ by=\"address [^\"]+\"\$")
for i in 0 1 2 3 4; do
  line=$(sed -n "$((i + 1))p" "$H_DIR/watch")
  [[ "$line" =~ ${W[$i]} ]] || h_fail "watch line $((i + 1)): '$line' is not '${W[$i]}'"
done
[ "$(wc -l < "$H_DIR/watch")" = 5 ] && [ ! -s "$H_DIR/watch.err" ] ||
  h_fail "watch --count 5: $(cat "$H_DIR/watch" "$H_DIR/watch.err")"
expect 0 "$P" watch cli-watch --json --count 1
[ "$(json 'd["event"], d["data"]["name"], d["data"]["held"]')" = "('state', 'cli-watch', False)" ] ||
  h_fail "watch --json: $(cat "$H_DIR/out")"
for sig in TERM INT; do
  env --default-signal=INT "$P" watch cli-watch > "$H_DIR/watch" 2> "$H_DIR/watch.err" &
  WP=$!
  H_PIDS="$H_PIDS $WP"
  lines "$H_DIR/watch" 1
  kill -"$sig" "$WP"
  rc=0; wait "$WP" || rc=$?
  [ "$rc" = 0 ] && [ ! -s "$H_DIR/watch.err" ] || h_fail "watch after SIG$sig exited $rc: $(cat "$H_DIR/watch.err")"
done
expect 1 "$P" --server http://127.0.0.1:1 watch cli-watch
[ "$(wc -l < "$H_DIR/err")" = 1 ] && grep -q 'watch cli-watch' "$H_DIR/err" ||
  h_fail "watch without a server: $(cat "$H_DIR/err")"

# run: a break stops the command within a second (SIGTERM at once, exit
# 76), though its next renewal is 10 s away: the keeper hears the break
# in the lock's events.
"$P" run cli-runbrk --ttl 30s --grace 5s -- sleep 60 2> "$H_DIR/run.err" &
RP=$!
H_PIDS="$H_PIDS $RP"
streams() { curl -s "$PICKETD_URL/metrics" | sed -n 's/^picket_event_streams //p'; }
for _ in $(seq 1 250); do
  "$P" status cli-runbrk 2>/dev/null | grep -q '"held":true' && [ "$(streams)" -ge 1 ] && break
  sleep 0.02
done
[ "$(streams)" -ge 1 ] || h_fail "run does not watch its lock: $(cat "$H_DIR/run.err")"
t0=$(h_now_ms)
expect 0 "$P" break cli-runbrk --yes
rc=0; wait "$RP" || rc=$?
took=$(( $(h_now_ms) - t0 ))
[ "$rc" = 76 ] || h_fail "run after a break exited $rc: $(cat "$H_DIR/run.err")"
[ "$took" -lt $(( 1000 * ${PICKET_TIME_SCALE:-1} )) ] || h_fail "run took $took ms to stop after a break"
grep -q 'no longer held' "$H_DIR/run.err" || h_fail "run after a break: $(cat "$H_DIR/run.err")"

# Under --auth-file: ls shows only the token's prefixes and needs the list
# verb; break needs the admin verb (403: exit 1 with the server's message).
expect 0 "$P" token new ops cli-ls.,cli-brk lock,read,list,admin
T_OPS=$(sed -n 1p "$H_DIR/out"); sed -n 2p "$H_DIR/out" > "$H_DIR/auth"
expect 0 "$P" token new reader cli-ls.,cli-brk read
T_READ=$(sed -n 1p "$H_DIR/out"); sed -n 2p "$H_DIR/out" >> "$H_DIR/auth"
PLAIN_URL=$PICKETD_URL
h_start_picketd --auth-file "$H_DIR/auth"
expect 0 env PICKET_TOKEN="$T_OPS" "$P" --server "$PICKETD_URL" ls
[ "$(awk 'NR > 1 {print $2}' "$H_DIR/out" | tr '\n' ' ')" = "cli-brk cli-ls.1 cli-ls.2 cli-ls.3 cli-ls.4 cli-ls.5 cli-ls.sem " ] ||
  h_fail "ls under a token's prefixes: $(cat "$H_DIR/out")"
expect 1 env PICKET_TOKEN="$T_READ" "$P" --server "$PICKETD_URL" ls
[ "$(wc -l < "$H_DIR/err")" = 1 ] && grep -q 'list' "$H_DIR/err" || h_fail "ls without list: $(cat "$H_DIR/err")"
expect 1 env PICKET_TOKEN="$T_READ" "$P" --server "$PICKETD_URL" break cli-brk --yes
[ "$(wc -l < "$H_DIR/err")" = 1 ] || h_fail "break without admin: $(cat "$H_DIR/err")"
grep -q "$T_READ" "$H_DIR/err" && h_fail "an error shows the token"
expect 0 env PICKET_TOKEN="$T_OPS" "$P" --server "$PICKETD_URL" break cli-brk --yes --json
[ "$(json 'd["broken"]')" = True ] || h_fail "break with admin: $(cat "$H_DIR/out")"
# watch sends the token: the read verb and a prefix for the name, or exit 1
expect 0 env PICKET_TOKEN="$T_READ" "$P" --server "$PICKETD_URL" watch cli-brk --count 1
grep -q ' state held=false ' "$H_DIR/out" || h_fail "watch with read: $(cat "$H_DIR/out")"
expect 1 env PICKET_TOKEN="$T_READ" "$P" --server "$PICKETD_URL" watch cli-other --count 1
[ "$(wc -l < "$H_DIR/err")" = 1 ] && grep -q 'watch cli-other' "$H_DIR/err" ||
  h_fail "watch outside the token's prefixes: $(cat "$H_DIR/err")"
grep -q "$T_READ" "$H_DIR/err" && h_fail "an error shows the token"
expect 1 "$P" --server "$PICKETD_URL" watch cli-brk --count 1 # no token
PICKETD_URL=$PLAIN_URL
echo "test_cli: ok"
