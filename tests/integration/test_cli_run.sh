# test_cli_run.sh: `picket run` against a real picketd and redis-server:
# the child's environment, its exit status coming back, renewal while it
# runs, release at exit, forwarded signals, a lease lost mid-run (deleted in
# Redis, or the `picket run` process paused past its TTL) stopping the child
# within --grace with exit 76, a held lock with a short --wait giving 75
# without starting the child, the terminal handed to the child,
# --max-hold stopping the child at the cap (--lock-delay after it), and
# --semaphore (a permit's environment, a second run at --limit 1 waiting),
# and --read/--write (two reads at once, a write kept out, the environment).
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
P="$PICKET_BIN_DIR/picket"
h_start_redis
h_start_picketd
export PICKET_SERVER="$PICKETD_URL"
D=$H_DIR
SCALE=${PICKET_TIME_SCALE:-1} # upper time bounds stretch in sanitizer runs

# wait_for FILE [seconds]: until FILE exists.
wait_for() {
  local n=$(( ${2:-10} * 50 ))
  for _ in $(seq 1 "$n"); do [ -e "$1" ] && return 0; sleep 0.02; done
  h_fail "timed out waiting for $1"
}
# gone PID: the process has ended within a second (a zombie waiting for a
# reaper counts as ended: kill -0 would still find it).
gone() {
  local st
  for _ in $(seq 1 50); do
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)
    [ -z "$st" ] || [ "$st" = Z ] && return 0
    sleep 0.02
  done
  return 1
}

# fence_of FILE: the "fence" of the one-line JSON reply in FILE.
fence_of() { grep -o '"fence":[0-9]*' "$1" | head -1 | cut -d: -f2; }

# 1. The child sees the lock, fence, lease and deadline; the lock is held
#    while it runs and released after.
t0=$(date +%s%3N)
T0=$(h_redis_time_us)
"$P" run run-env --ttl 5s -- sh -c \
  'echo "$PICKET_LOCK $PICKET_FENCE $PICKET_LEASE $PICKET_DEADLINE_MS" > "$1"; "$2" status run-env > "$3"' \
  sh "$D/env" "$P" "$D/status" 2> "$D/run.err" || h_fail "run exited $?: $(cat "$D/run.err")"
read -r lock fence lease deadline < "$D/env"
[ "$lock" = run-env ] || h_fail "PICKET_LOCK=$lock"
h_fence_follows 0 "$fence" "$T0" || h_fail "PICKET_FENCE=$fence"
[[ "$lease" =~ ^[0-9a-f]{32}$ ]] || h_fail "PICKET_LEASE=$lease"
[ "$deadline" -gt $(( t0 + 4000 )) ] && [ "$deadline" -le $(( $(date +%s%3N) + 5000 )) ] ||
  h_fail "PICKET_DEADLINE_MS=$deadline, started at $t0 with --ttl 5s"
grep -q '"held":true' "$D/status" || h_fail "lock not held while the child ran: $(cat "$D/status")"
[ "$(h_redis exists 'picket:{run-env}:lease')" = 0 ] || h_fail "lock not released after run"

# 2. Exit status comes back, 128+N for a signal, 127/126 for exec failures.
rc=0; "$P" run run-rc -- sh -c 'exit 7' || rc=$?
[ "$rc" = 7 ] || h_fail "child exit 7 came back as $rc"
rc=0; "$P" run run-rc -- sh -c 'kill -KILL $$' || rc=$?
[ "$rc" = 137 ] || h_fail "child killed by SIGKILL came back as $rc"
rc=0; "$P" run run-rc -- /nonexistent/cmd 2> "$D/err" || rc=$?
[ "$rc" = 127 ] || h_fail "missing command gave $rc"
grep -q 'cannot run' "$D/err" || h_fail "missing command: $(cat "$D/err")"
rc=0; "$P" run run-rc -- "$D/env" 2> /dev/null || rc=$?
[ "$rc" = 126 ] || h_fail "non-executable command gave $rc"
[ "$(h_redis exists 'picket:{run-rc}:lease')" = 0 ] || h_fail "run-rc left held"
# The command may also follow NAME without "--".
rc=0; "$P" run run-rc --ttl 2s sh -c 'exit 3' || rc=$?
[ "$rc" = 3 ] || h_fail "run without -- gave $rc"

# 3. The lease is renewed while a child outlives several TTLs.
"$P" run run-long --ttl 1500ms -- sh -c 'sleep 3.2; "$1" status run-long > "$2"' sh "$P" "$D/long" ||
  h_fail "long run exited $?"
grep -q '"held":true' "$D/long" || h_fail "lease not renewed during the run: $(cat "$D/long")"
[ "$(fence_of "$D/long")" = "$(h_redis get 'picket:{run-long}:fence')" ] || h_fail "renewal changed the fence: $(cat "$D/long")"

# 4. SIGTERM, SIGHUP and SIGINT are forwarded to the child; its status
#    comes back. (A background job of a script ignores SIGINT, and so would
#    picket: dflint starts it with SIGINT at its default.)
dflint() { exec python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"; }
for sig in TERM HUP INT; do
  rm -f "$D/ready" "$D/got"
  dflint "$P" run run-sig -- sh -c 'trap "echo $1 > \"$3\"; exit 3" '"$sig"'; touch "$2"; while :; do sleep 0.05; done' \
    sh "$sig" "$D/ready" "$D/got" &
  pid=$!
  wait_for "$D/ready"
  kill -"$sig" "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 3 ] || h_fail "after SIG$sig picket run exited $rc, want the child's 3"
  [ "$(cat "$D/got" 2>/dev/null)" = "$sig" ] || h_fail "SIG$sig was not forwarded"
  [ "$(h_redis exists 'picket:{run-sig}:lease')" = 0 ] || h_fail "not released after SIG$sig"
done

# 5. Lease deleted in Redis mid-run: the child ignores SIGTERM, so it is
#    SIGKILLed after --grace, with the whole process group (a grandchild
#    too); picket run exits 76.
rm -f "$D/ready"
"$P" run run-del --ttl 1500ms --grace 1s -- sh -c \
  'trap "" TERM; sleep 60 & echo "$$ $!" > "$1.tmp"; mv "$1.tmp" "$1"; while :; do sleep 0.05; done' \
  sh "$D/ready" 2> "$D/del.err" &
pid=$!
wait_for "$D/ready"
read -r child grandchild < "$D/ready"
t0=$(h_now_ms)
h_redis del 'picket:{run-del}:lease' > /dev/null
rc=0; wait "$pid" || rc=$?
t=$(( $(h_now_ms) - t0 ))
[ "$rc" = 76 ] || h_fail "lost lease (DEL): exit $rc, want 76; $(cat "$D/del.err")"
[ "$t" -ge 950 ] || h_fail "child ignoring SIGTERM was killed after $t ms, before --grace 1s"
[ "$t" -lt $(( 4000 * SCALE )) ] || h_fail "lost lease noticed and acted on after $t ms"
gone "$child" || h_fail "child $child survived the lost lease"
gone "$grandchild" || h_fail "grandchild $grandchild survived the lost lease"
grep -q 'lease' "$D/del.err" || h_fail "no message about the lost lease: $(cat "$D/del.err")"

# 6. The `picket run` process paused past its TTL: meanwhile another client
#    takes the lock (the next fence); when it resumes it stops its child at once
#    (SIGTERM, which the child obeys) and exits 76.
rm -f "$D/ready" "$D/term"
"$P" run run-stop --ttl 1s --grace 5s -- sh -c 'trap "touch \"$2\"; exit 0" TERM; echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; while :; do sleep 0.05; done' \
  sh "$D/ready" "$D/term" 2> "$D/stop.err" &
pid=$!
wait_for "$D/ready"
child=$(cat "$D/ready")
kill -STOP "$pid"
first=$(h_redis get 'picket:{run-stop}:fence')
sleep 1.5
"$P" acquire run-stop --ttl 60s > "$D/other" || h_fail "lock not free while the holder was paused"
h_fence_follows "$first" "$(fence_of "$D/other")" 0 ||
  h_fail "new holder's grant: $(cat "$D/other") after fence $first"
t0=$(h_now_ms)
kill -CONT "$pid"
rc=0; wait "$pid" || rc=$?
t=$(( $(h_now_ms) - t0 ))
[ "$rc" = 76 ] || h_fail "paused holder: exit $rc, want 76; $(cat "$D/stop.err")"
[ "$t" -lt $(( 3000 * SCALE )) ] || h_fail "paused holder took $t ms to stop its child"
[ -e "$D/term" ] || h_fail "the child did not get SIGTERM"
gone "$child" || h_fail "child $child survived"
# The new holder's lease is untouched (no release by the old holder).
[ "$(h_redis exists 'picket:{run-stop}:lease')" = 1 ] || h_fail "the zombie released the new lease"

# 7. Held lock, short --wait: exit 75 after the wait, child never started.
"$P" acquire run-held --ttl 20s > /dev/null
t0=$(h_now_ms)
rc=0; "$P" run run-held --wait 300ms -- touch "$D/never" 2> "$D/held.err" || rc=$?
t=$(( $(h_now_ms) - t0 ))
[ "$rc" = 75 ] || h_fail "held lock: exit $rc, want 75: $(cat "$D/held.err")"
[ -e "$D/never" ] && h_fail "the child ran although the lock was held"
[ "$t" -ge 250 ] || h_fail "--wait 300ms gave up after $t ms"
rc=0; "$P" run run-held -- touch "$D/never" 2> /dev/null || rc=$?
[ "$rc" = 75 ] && [ ! -e "$D/never" ] || h_fail "held lock without --wait: exit $rc"

# 7b. A wait longer than the TTL: the waited grant's deadline is renewed at
#     once (else it would be spent by the wait, and the child stopped at
#     once with 76 while the lock stays held).
"$P" acquire run-waitlong --ttl 1500ms > /dev/null
rc=0; "$P" run run-waitlong --ttl 1s --wait 10s -- sh -c 'sleep 0.3; echo ran > "$0"' "$D/waitlong" \
  2> "$D/waitlong.err" || rc=$?
[ "$rc" = 0 ] || h_fail "run --wait past the TTL: exit $rc: $(cat "$D/waitlong.err")"
[ "$(cat "$D/waitlong" 2>/dev/null)" = ran ] || h_fail "run --wait past the TTL: the child did not run"
[ "$(h_redis exists 'picket:{run-waitlong}:lease')" = 0 ] || h_fail "run --wait past the TTL: not released"

# 8. On a terminal, the child's group gets the terminal: an interactive
#    command can read it (else it would stop on SIGTTIN and hang).
printf 'hello\n' | timeout 20 script -qec \
  "$P run run-tty -- sh -c 'read line; echo \"got \$line\"'" /dev/null > "$D/tty" 2>&1 ||
  h_fail "interactive child on a terminal: exit $?: $(cat "$D/tty")"
grep -q 'got hello' "$D/tty" || h_fail "interactive child did not read the terminal: $(cat "$D/tty")"

# 8b. --max-hold: the child runs until the cap however often the lease is
#     renewed, then is stopped (SIGTERM, obeyed) and picket run exits 76,
#     naming the cap. A lease with --lock-delay that is lost that way keeps
#     the lock from the next holder for the delay: exit 75 with lock_delay.
t0=$(h_now_ms)
rc=0; "$P" run run-cap --ttl 600ms --max-hold 1500ms --lock-delay 3s -- sleep 30 \
  2> "$D/cap.err" || rc=$?
t=$(( $(h_now_ms) - t0 ))
[ "$rc" = 76 ] || h_fail "--max-hold: exit $rc, want 76: $(cat "$D/cap.err")"
[ "$t" -ge 1200 ] || h_fail "--max-hold 1500ms: child stopped after $t ms"
[ "$t" -lt $(( 1500 + 4000 * SCALE )) ] || h_fail "--max-hold 1500ms: child stopped after $t ms"
grep -q 'max_hold_ms' "$D/cap.err" || h_fail "no word of the cap: $(cat "$D/cap.err")"
rc=0; "$P" acquire run-cap 2> "$D/delay.err" > /dev/null || rc=$?
[ "$rc" = 75 ] && grep -q 'lock-delay' "$D/delay.err" ||
  h_fail "after the capped lease: exit $rc, want 75 naming the lock-delay: $(cat "$D/delay.err")"
rc=0; "$P" acquire run-cap --max-hold 0s 2> "$D/err" > /dev/null || rc=$?
[ "$rc" = 2 ] || h_fail "--max-hold 0s: exit $rc, want 2"

# 9. Bad flags: exit 2, one line, nothing run.
rc=0; "$P" run run-bad --ttl 5 -- touch "$D/never" 2> "$D/err" || rc=$?
[ "$rc" = 2 ] && [ "$(wc -l < "$D/err")" = 1 ] && [ ! -e "$D/never" ] || h_fail "bad --ttl: exit $rc"
rc=0; "$P" run run-bad --lease 0123456789abcdef0123456789abcdef -- true 2> "$D/err" || rc=$?
[ "$rc" = 2 ] || h_fail "run --lease: exit $rc"
# 10. --semaphore: CMD runs under one of --limit N permits, with
#     PICKET_LOCK its fence lock (NAME:permit:I), PICKET_PERMIT and
#     PICKET_SEMAPHORE. With --limit 1 a second run exits 75 without
#     starting; with --wait it runs once the first one's permit is released.
rm -f "$D/ready" "$D/go" "$D/never"
"$P" run run-sem --semaphore --limit 1 --ttl 5s -- sh -c \
  'echo "$PICKET_LOCK $PICKET_PERMIT $PICKET_SEMAPHORE $PICKET_FENCE $PICKET_LEASE $PICKET_DEADLINE_MS" > "$1"
   touch "$2"; while [ ! -e "$3" ]; do sleep 0.02; done; echo first >> "$4"' \
  sh "$D/semenv" "$D/ready" "$D/go" "$D/order" 2> "$D/sem1.err" &
first=$!
wait_for "$D/ready"
read -r lock permit sem fence lease deadline < "$D/semenv"
[ "$lock" = run-sem:permit:0 ] && [ "$permit" = 0 ] && [ "$sem" = run-sem ] && [ "$fence" -ge 1 ] &&
  [[ "$lease" =~ ^[0-9a-f]{32}$ ]] && [ "$deadline" -gt "$(date +%s%3N)" ] ||
  h_fail "run --semaphore environment: $(cat "$D/semenv")"
rc=0; "$P" run run-sem --semaphore --limit 1 -- touch "$D/never" 2> "$D/full.err" || rc=$?
[ "$rc" = 75 ] && [ ! -e "$D/never" ] || h_fail "full semaphore: exit $rc: $(cat "$D/full.err")"
grep -q semaphore "$D/full.err" || h_fail "full semaphore: $(cat "$D/full.err")"
rc=0; "$P" run run-sem --semaphore --limit 2 -- touch "$D/never" 2> "$D/mis.err" || rc=$?
[ "$rc" = 2 ] && [ ! -e "$D/never" ] || h_fail "limit mismatch: exit $rc: $(cat "$D/mis.err")"
"$P" run run-sem --semaphore --limit 1 --wait 20s -- sh -c 'echo second >> "$0"' "$D/order" \
  2> "$D/sem2.err" &
second=$!
sleep 0.5
[ -e "$D/order" ] && h_fail "the second run started while the only permit was held"
touch "$D/go"
rc=0; wait "$first" || rc=$?
[ "$rc" = 0 ] || h_fail "first run --semaphore: exit $rc: $(cat "$D/sem1.err")"
rc=0; wait "$second" || rc=$?
[ "$rc" = 0 ] || h_fail "second run --semaphore --wait: exit $rc: $(cat "$D/sem2.err")"
[ "$(tr '\n' ' ' < "$D/order")" = "first second " ] || h_fail "runs overlapped: $(cat "$D/order")"
"$P" status run-sem --semaphore > "$D/semst"
grep -q '"held":0' "$D/semst" || h_fail "permits left after the runs: $(cat "$D/semst")"
# A lock's child inherits no stale PICKET_PERMIT.
PICKET_PERMIT=9 PICKET_SEMAPHORE=x "$P" run run-env -- sh -c 'echo "${PICKET_PERMIT-unset}${PICKET_SEMAPHORE-unset}" > "$0"' "$D/noperm" ||
  h_fail "run with a stale PICKET_PERMIT failed"
[ "$(cat "$D/noperm")" = unsetunset ] || h_fail "a lock's child got PICKET_PERMIT: $(cat "$D/noperm")"
# Bad --semaphore usage: exit 2, one line, nothing run.
for args in "--semaphore" "--limit 1" "--semaphore --limit 0" "--semaphore --limit many"; do
  rc=0; "$P" run run-sem $args -- touch "$D/never" 2> "$D/err" || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l < "$D/err")" = 1 ] && [ ! -e "$D/never" ] ||
    h_fail "run $args: exit $rc: $(cat "$D/err")"
done

# 11. --read/--write: two `run --read` at once both start; a `--write`
#     with a short --wait exits 75 without starting while a read runs. The
#     child gets PICKET_LOCK=NAME:rw, PICKET_MODE and PICKET_RWLOCK.
rm -f "$D/r1" "$D/r2" "$D/rgo" "$D/never"
for i in 1 2; do
  "$P" run --read run-rw --ttl 5s -- sh -c \
    'echo "$PICKET_LOCK $PICKET_MODE $PICKET_RWLOCK $PICKET_FENCE $PICKET_LEASE $PICKET_DEADLINE_MS" > "$1.tmp"
     mv "$1.tmp" "$1"; while [ ! -e "$2" ]; do sleep 0.02; done' \
    sh "$D/r$i" "$D/rgo" 2> "$D/r$i.err" &
  eval "reader$i=\$!"
done
wait_for "$D/r1"
wait_for "$D/r2"
for i in 1 2; do
  read -r lock mode rw fence lease deadline < "$D/r$i"
  [ "$lock" = run-rw:rw ] && [ "$mode" = read ] && [ "$rw" = run-rw ] && [ "$fence" -ge 1 ] &&
    [[ "$lease" =~ ^[0-9a-f]{32}$ ]] && [ "$deadline" -gt "$(date +%s%3N)" ] ||
    h_fail "run --read environment: $(cat "$D/r$i")"
done
t0=$(date +%s%3N)
rc=0; "$P" run --write run-rw --wait 300ms -- touch "$D/never" 2> "$D/w.err" || rc=$?
[ "$rc" = 75 ] && [ ! -e "$D/never" ] || h_fail "write while read: exit $rc: $(cat "$D/w.err")"
[ $(( $(date +%s%3N) - t0 )) -ge 250 ] || h_fail "run --write --wait 300ms gave up early"
"$P" status run-rw --rwlock > "$D/rwst"
grep -q '"readers":2' "$D/rwst" || h_fail "status --rwlock while two read: $(cat "$D/rwst")"
touch "$D/rgo"
for pid in "$reader1" "$reader2"; do
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 0 ] || h_fail "run --read: exit $rc: $(cat "$D/r1.err" "$D/r2.err")"
done
"$P" run run-rw --write -- sh -c 'echo "$PICKET_LOCK $PICKET_MODE $PICKET_RWLOCK" > "$0"' "$D/wenv" 2> "$D/w.err" ||
  h_fail "run --write after the reads: $(cat "$D/w.err")"
[ "$(cat "$D/wenv")" = "run-rw:rw write run-rw" ] || h_fail "run --write environment: $(cat "$D/wenv")"
"$P" status run-rw --rwlock > "$D/rwst"
grep -q '"readers":0' "$D/rwst" && grep -q '"writer":null' "$D/rwst" ||
  h_fail "leases left after the rwlock runs: $(cat "$D/rwst")"
# A lock's child inherits no stale PICKET_MODE.
PICKET_MODE=write PICKET_RWLOCK=x "$P" run run-env -- sh -c 'echo "${PICKET_MODE-unset}${PICKET_RWLOCK-unset}" > "$0"' "$D/nomode" ||
  h_fail "run with a stale PICKET_MODE failed"
[ "$(cat "$D/nomode")" = unsetunset ] || h_fail "a lock's child got PICKET_MODE: $(cat "$D/nomode")"
# Bad --read/--write usage: exit 2, one line, nothing run.
long=$(head -c 198 /dev/zero | tr '\0' r)
for args in "run-rw --read --write" "run-rw --write --read" "run-rw --read --semaphore --limit 1" \
  "run-rw --rwlock" "run-rw --read=1" "$long --read"; do
  rc=0; "$P" run $args -- touch "$D/never" 2> "$D/err" || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l < "$D/err")" = 1 ] && [ ! -e "$D/never" ] ||
    h_fail "run $args: exit $rc: $(cat "$D/err")"
done

echo "test_cli_run: ok"
