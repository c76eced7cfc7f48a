# test_cli_elect.sh: `picket elect` against a real picketd, redis-server
# and fenced-kv: three `picket elect` processes run one job and keep
# exactly one copy of it running; a resign (SIGTERM to the leader's
# picket) hands over within 1 s; a SIGKILL of the leader's picket and its
# job hands over within the TTL (and not at once: nobody resigned);
# fenced-kv refuses a write with the deposed leader's term once the
# successor wrote. Also: the job's environment, `picket leader`,
# `picket proclaim` and `picket resign` with the exported lease, --wait
# running out (75, the command never started), bad usage (2, one line), and
# a candidate stopped while it waits: it exits 128+signal at once and
# resigns the lease id it campaigned with (a grant that landed as the
# signal came would otherwise lead with no job until its TTL).
# The measured hand-over times are printed.
#
# Servers started by a caller (tests/integration/test_cli_elect_topologies.py
# runs this against Sentinel and Cluster): with PICKET_ELECT_SERVER (a
# picketd's URL) and PICKET_ELECT_KV (a fenced-kv's URL, fresh: its key
# "leader" unwritten) set, nothing is started and those are used; the
# picketd must be the only one its candidates reach and its store fresh
# (elections el-job and el-stop unused). PICKET_ELECT_PICKETD_LOG names that
# picketd's log for section 6's check that the stopped candidate resigned
# (without it, that check is left out); PICKET_ELECT_TAG prefixes the
# printed figures (e.g. "sentinel: ").
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
TAG=${PICKET_ELECT_TAG-${PICKET_TEST_BACKEND:+$PICKET_TEST_BACKEND: }}
if [ -n "${PICKET_ELECT_SERVER:-}" ] && [ -n "${PICKET_ELECT_KV:-}" ]; then
  export PICKET_SERVER=$PICKET_ELECT_SERVER
  KV_URL=$PICKET_ELECT_KV
  PICKETD_LOG=${PICKET_ELECT_PICKETD_LOG:-}
  [ -z "${PICKET_ELECT_PICKETD_LOG+x}" ] || [ -r "$PICKETD_LOG" ] ||
    h_fail "PICKET_ELECT_PICKETD_LOG=$PICKETD_LOG is not readable"
else
  h_start_servers
  h_start_fenced_kv
  PICKETD_LOG="$H_DIR/picketd.log"
fi
P="$PICKET_BIN_DIR/picket" D=$H_DIR KV=$KV_URL
SCALE=${PICKET_TIME_SCALE:-1} TTL_MS=2000

# Jobs outlive a SIGKILLed picket (their own process group): end them too.
LOG="$D/jobs.log"
: > "$LOG"
elect_cleanup() {
  for p in $(awk '$1 == "start" {print $3}' "$LOG" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  h_cleanup
}
trap elect_cleanup EXIT

# The job: says when it starts and stops (with its term and pid), keeps the
# lease id where the test can read it, and writes its term to fenced-kv
# under the election's name every 50 ms, as a `picket run` job would.
cat > "$D/job.sh" <<'JOB'
#!/bin/sh
log=$1 kv=$2 dir=$3
echo "$PICKET_ELECTION $PICKET_TERM $PICKET_FENCE $PICKET_LOCK $PICKET_DEADLINE_MS" > "$dir/env.$$"
echo "$PICKET_LEASE" > "$dir/lease.$$"
trap 'echo "stop $PICKET_TERM $$" >> "$log"; exit 0' TERM
echo "start $PICKET_TERM $$" >> "$log"
while :; do
  curl -s -o /dev/null -X PUT "$kv/kv/leader" -H "Picket-Lock: $PICKET_LOCK" \
    -H "Picket-Fence: $PICKET_FENCE" --data-binary "term $PICKET_TERM pid $$"
  sleep 0.05
done
JOB
chmod +x "$D/job.sh"

starts() { grep -c '^start ' "$LOG"; }
# wait_starts N: until N jobs have started (10 s at most); prints the ms it took.
wait_starts() {
  local t0 n
  t0=$(h_now_ms)
  for _ in $(seq 1 $(( 500 * SCALE ))); do
    n=$(starts)
    [ "$n" -ge "$1" ] && { echo $(( $(h_now_ms) - t0 )); return 0; }
    sleep 0.02
  done
  h_fail "$(starts) jobs started, want $1: $(cat "$LOG")"
}
alive() { # alive PID: running and not a zombie (bash builtins only: it is sampled often)
  local _pid _comm st
  read -r _pid _comm st _ 2>/dev/null < "/proc/$1/stat" || return 1
  [ "$st" != Z ]
}
# running: how many started jobs are alive now (in RUNNING).
running() {
  local what _term pid
  RUNNING=0
  while read -r what _term pid; do
    [ "$what" = start ] && alive "$pid" && RUNNING=$((RUNNING + 1))
  done < "$LOG"
}
# exactly_one MS: exactly one job alive at every sample, for MS milliseconds.
exactly_one() {
  local until=$(( $(h_now_ms) + $1 ))
  while [ "$(h_now_ms)" -lt "$until" ]; do
    running
    [ "$RUNNING" = 1 ] || h_fail "$RUNNING jobs running at once: $(cat "$LOG")"
    sleep 0.05
  done
}
last_job() { awk '$1 == "start" {p = $3} END {print p}' "$LOG"; }
last_term() { awk '$1 == "start" {t = $2} END {print t}' "$LOG"; }
parent_of() { awk '{print $4}' "/proc/$1/stat"; }
kv_fence() { curl -s "$KV/kv/leader" | grep -o '"fence":[0-9]*' | cut -d: -f2; }

# 0. Bad usage: exit 2 and one line, before any request.
for args in "elect" "elect el-job" "elect el-job --" "elect bad/name -- true" \
  "elect el-job --lease 0123456789abcdef0123456789abcdef -- true" "elect el-job --ttl 0s -- true" \
  "leader" "proclaim el-job --lease 0123456789abcdef0123456789abcdef" "resign el-job" \
  "leader $(printf 'e%.0s' $(seq 1 198))"; do
  rc=0
  # shellcheck disable=SC2086
  env -u PICKET_LEASE "$P" $args > "$D/bad.out" 2> "$D/bad.err" || rc=$?
  [ "$rc" = 2 ] || h_fail "picket $args: exit $rc, want 2: $(cat "$D/bad.err")"
  [ "$(wc -l < "$D/bad.err")" = 1 ] || h_fail "picket $args: want one line: $(cat "$D/bad.err")"
  [ -s "$D/bad.out" ] && h_fail "picket $args printed to stdout"
done
rc=0; "$P" elect el-bad --value "$(printf 'a\tb')" -- true 2> "$D/bad.err" || rc=$?
[ "$rc" = 2 ] || h_fail "a value with a tab: exit $rc: $(cat "$D/bad.err")"
"$P" leader el-job > "$D/leader0" || h_fail "leader of a new election: exit $?"
grep -q '"leader":null' "$D/leader0" && grep -q '"term":0' "$D/leader0" ||
  h_fail "leader of a new election: $(cat "$D/leader0")"

# 1. Three candidates, one job: exactly one runs.
PIDS=""
for i in 1 2 3; do
  "$P" elect el-job --ttl 2s --grace 2s --owner "cand-$i" --value "node-$i" -- \
    "$D/job.sh" "$LOG" "$KV" "$D" 2> "$D/elect$i.err" &
  PIDS="$PIDS $!"
  H_PIDS="$H_PIDS $!"
  [ "$i" = 1 ] && wait_starts 1 > /dev/null # the first one leads
done
sleep 0.3
exactly_one 1000
job=$(last_job)
term1=$(last_term)
leader=$(parent_of "$job")
case " $PIDS " in *" $leader "*) ;; *) h_fail "job $job's parent $leader is no picket elect" ;; esac
read -r e_name e_term e_fence e_lock e_deadline < "$D/env.$job"
[ "$e_name $e_term $e_fence $e_lock" = "el-job $term1 $term1 el-job" ] ||
  h_fail "the job's environment: $(cat "$D/env.$job")"
[ "$e_deadline" -gt 1700000000000 ] || h_fail "PICKET_DEADLINE_MS=$e_deadline"
grep -Eq '^[0-9a-f]{32}$' "$D/lease.$job" || h_fail "PICKET_LEASE: $(cat "$D/lease.$job")"
"$P" leader el-job > "$D/leader1" || h_fail "leader: exit $?"
grep -q "\"term\":$term1,\"value\":\"node-1\",\"owner\":\"cand-1\"" "$D/leader1" &&
  grep -q '"candidates":2' "$D/leader1" || h_fail "leader: $(cat "$D/leader1")"
# proclaim with the job's lease id (a file, as a secret is passed)
"$P" proclaim el-job --lease-file "$D/lease.$job" --value moved > "$D/proclaim" ||
  h_fail "proclaim: exit $?"
grep -q "\"term\":$term1" "$D/proclaim" && grep -q '"value":"moved"' "$D/proclaim" ||
  h_fail "proclaim: $(cat "$D/proclaim")"
"$P" leader el-job | grep -q '"value":"moved"' || h_fail "the proclaimed value is not shown"
# a fourth candidate with a short --wait gives up with 75, its command never run
rc=0; "$P" elect el-job --wait 300ms -- touch "$D/never" 2> "$D/held.err" || rc=$?
[ "$rc" = 75 ] || h_fail "elect --wait 300ms: exit $rc, want 75: $(cat "$D/held.err")"
[ -e "$D/never" ] && h_fail "the command ran without leading"
grep -q 'cand-1' "$D/held.err" || h_fail "75 without the leader's owner: $(cat "$D/held.err")"
exactly_one 1000

# 2. Resign: SIGTERM to the leader's picket stops its job, resigns, and the
#    next candidate's job starts within 1 s.
t0=$(h_now_ms)
kill -TERM "$leader"
took=$(wait_starts 2)
rc=0; wait "$leader" || rc=$?
[ "$rc" = 0 ] || h_fail "the resigned leader's picket exited $rc: $(cat "$D"/elect*.err)"
echo "${TAG}resign (SIGTERM) to the next leader's job: $took ms"
[ "$took" -lt $(( 1000 * SCALE )) ] || h_fail "resign handed over after $took ms"
grep -q "^stop $term1 $job" "$LOG" || h_fail "the old job did not get SIGTERM: $(cat "$LOG")"
alive "$job" && h_fail "the old job $job still runs"
PIDS=$(echo "$PIDS" | tr ' ' '\n' | grep -vx "$leader" | tr '\n' ' ')
job=$(last_job)
term2=$(last_term)
[ "$term2" -gt "$term1" ] || h_fail "term $term2 after term $term1"
exactly_one 1000

# 3. SIGKILL of the leader's picket and its job: nobody resigns, so the
#    last candidate leads once the lease expires: within the TTL.
leader=$(parent_of "$job")
for _ in $(seq 1 100); do [ "$(kv_fence)" = "$term2" ] && break; sleep 0.02; done
[ "$(kv_fence)" = "$term2" ] || h_fail "term $term2 never wrote to fenced-kv"
kill -KILL "$leader"
kill -KILL -- "-$job"
took=$(wait_starts 3)
echo "${TAG}SIGKILL of the leader (ttl $TTL_MS ms) to the next leader's job: $took ms"
[ "$took" -lt $(( TTL_MS + 1500 * SCALE )) ] || h_fail "SIGKILL handed over after $took ms"
[ "$took" -ge 300 ] || h_fail "SIGKILL handed over after $took ms: before the lease could expire"
term3=$(last_term)
[ "$term3" -gt "$term2" ] || h_fail "term $term3 after term $term2"
exactly_one 1000

# 4. fenced-kv: once the successor wrote, the deposed leader's term is refused.
for _ in $(seq 1 100); do [ "$(kv_fence)" = "$term3" ] && break; sleep 0.02; done
[ "$(kv_fence)" = "$term3" ] || h_fail "the successor (term $term3) never wrote: $(curl -s "$KV/kv/leader")"
code=$(curl -s -o "$D/stale" -w '%{http_code}' -X PUT "$KV/kv/leader" -H "Picket-Lock: el-job" \
  -H "Picket-Fence: $term2" --data-binary "zombie")
[ "$code" = 409 ] && grep -q stale_fence "$D/stale" ||
  h_fail "a write with the deposed term $term2: $code $(cat "$D/stale")"
curl -s "$KV/kv/leader" | grep -q "term $term3" || h_fail "fenced-kv lost the leader's value"
echo "${TAG}fenced-kv refused the deposed term $term2 after term $term3 wrote"

# 5. `picket resign` with the lease id: the last job is stopped (its picket
#    sees the leadership lost: exit 76) and nobody leads.
job=$(last_job)
leader=$(parent_of "$job")
"$P" resign el-job --lease-file "$D/lease.$job" > "$D/resign" || h_fail "resign: exit $?"
grep -q '"resigned":true' "$D/resign" || h_fail "resign: $(cat "$D/resign")"
rc=0; wait "$leader" || rc=$?
[ "$rc" = 76 ] || h_fail "the leader whose lease was resigned under it: exit $rc, want 76"
alive "$job" && h_fail "its job $job still runs"
rc=0; PICKET_LEASE=$(cat "$D/lease.$job") "$P" resign el-job 2> "$D/resign.err" || rc=$?
[ "$rc" = 76 ] || h_fail "resign twice: exit $rc, want 76"
"$P" leader el-job | grep -q '"leader":null' || h_fail "still a leader after the resign"

# 6. A candidate stopped while it waits resigns its lease id and exits 143.
"$P" elect el-stop --ttl 20s -- sleep 60 2> "$D/stop-leader.err" &
H_PIDS="$H_PIDS $!"
stop_leader=$!
for _ in $(seq 1 100); do "$P" leader el-stop | grep -q '"term"' && break; sleep 0.05; done
"$P" elect el-stop --ttl 20s -- touch "$D/never2" 2> "$D/stop-cand.err" &
cand=$!
for _ in $(seq 1 100); do "$P" leader el-stop | grep -q '"candidates":1' && break; sleep 0.05; done
"$P" leader el-stop | grep -q '"candidates":1' || h_fail "the candidate never waited"
count_released() { # how often picketd logged a release of el-stop by lease (0: no log)
  if [ -n "$PICKETD_LOG" ]; then grep -c 'release of el-stop by lease' "$PICKETD_LOG" || true; else echo 0; fi
}
before=$(count_released)
t0=$(h_now_ms)
kill -TERM "$cand"
rc=0; wait "$cand" || rc=$?
took=$(( $(h_now_ms) - t0 ))
[ "$rc" = 143 ] || h_fail "the stopped candidate: exit $rc, want 143: $(cat "$D/stop-cand.err")"
[ "$took" -lt $(( 3000 * SCALE )) ] || h_fail "the stopped candidate took $took ms to exit"
[ -e "$D/never2" ] && h_fail "the stopped candidate ran its command"
after=$(count_released)
[ -z "$PICKETD_LOG" ] || [ "$after" -gt "$before" ] || h_fail "the stopped candidate resigned nothing"
kill -TERM "$stop_leader"; wait "$stop_leader" || true
echo "${TAG}ok"
