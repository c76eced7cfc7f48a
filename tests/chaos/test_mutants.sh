#!/usr/bin/env bash
# ctest chaos_mutants: every safety rule of tests/chaos/checker.py is seen
# to fail. The chaos runner goes against deliberately broken builds
# (tests/chaos/mutants/*.patch, built by mutants/build.sh) and against the
# configurations the docs call unsafe, each with --expect-violation: a case
# passes only if the checker finds the rule it names broken. Each broken
# case that needs it has a control beside it: the same faults and flags
# on the real build, which must stay clean (so the violation is the
# mutant's, not the fault's).
#
# Fixed seeds, so a run reproduces; the schedules are few and targeted
# (the faults each breakage needs), to keep the test to a few minutes.
set -u
src=$PICKET_SOURCE_DIR
run="python3 $src/tests/chaos/run"
mutdir="$PICKET_BIN_DIR/../mutants"
# One source copy and build tree for every mutant (mutants/build.sh): each
# mutant rebuilds only the files its patch and the previous one changed.
export PICKET_MUTANT_TREE="$mutdir/.tree"
mkdir -p "$mutdir"
# XXXXXX is mktemp's template: it picks the name.
out=$(mktemp -d /tmp/picket-chaos-mutants-XXXXXX)
fails=0
passes=0

case_run() { # case_run WHAT BIN ARGS... (the runner's own verdict decides)
  local what=$1 bin=$2
  shift 2
  echo "== $what"
  if $run --bin "$bin" --out "$out" "$@"; then
    passes=$((passes + 1))
  else
    fails=$((fails + 1))
    echo "FAIL: $what"
  fi
}

build() { # build NAME -> prints the mutant's bin dir
  "$src/tests/chaos/mutants/build.sh" "$1" "$mutdir/$1" 2>"$mutdir/$1.log" || {
    cat "$mutdir/$1.log" >&2
    return 1
  }
}

mutant() { # mutant NAME RULE ARGS...
  local name=$1 rule=$2
  shift 2
  local bin
  if ! bin=$(build "$name"); then
    fails=$((fails + 1))
    echo "FAIL: mutant $name does not build"
    return
  fi
  case_run "mutant $name: $rule" "$bin" --expect-violation "$rule" "$@"
}

real=$PICKET_BIN_DIR

# A grant that reuses the previous fence: two leases share one fence, and a
# later grant is not above an earlier one that had ended.
mutant acquire-reuses-fence no_fence_repeated --topology single --seed 11 --schedules 2 \
  --faults pause-holder
mutant acquire-reuses-fence fences_follow_real_time --topology single --seed 12 --schedules 2 \
  --faults pause-holder
# fenced-kv without its fence check: zombies (paused past their TTL) write
# under a fence below one already admitted.
# The same run shows deposed_leader_refused: a deposed leader's write (its
# term below its successor's, already written) is admitted too.
mutant fencedkv-admits-stale no_stale_write+deposed_leader_refused --topology single --seed 13 \
  --schedules 3 --faults pause-holder
# fenced-kv without If-Match: a zombie's admitted add is overwritten by the
# next holder's read-modify-write. The workload is tilted to that path:
# every holder adds first (with a think time) and none claims, and half of
# them sleep past their TTL. Control: the real build under the same tilt.
tilt=(--zombie-p 0.5 --add-first-p 1 --claim-p 0)
mutant fencedkv-ignores-if-match no_lost_element --topology single --seed 14 --schedules 3 \
  --faults pause-holder "${tilt[@]}"
case_run "control: real build, the same tilted workload" "$real" --topology single --seed 14 \
  --schedules 3 --faults pause-holder "${tilt[@]}"
# release without the lease check: a zombie's late release frees the next
# holder's lock, and that holder's renew or release still succeeds.
mutant release-no-lease-check replaced_lease_stays_lost --topology single --seed 15 \
  --schedules 3 --faults pause-holder
case_run "control: real build, single, pause-holder" "$real" --topology single --seed 15 \
  --schedules 3 --faults pause-holder
# Elections (issue 40; the election rules ride along in every run above,
# and the controls hold them too). A campaign that reuses the election's
# last term: two leases share a term, and a later leadership is not above
# one that had ended. Locks keep their fences (no lock rule fails).
mutant campaign-reuses-term one_leader_per_term+terms_rise --topology single --seed 21 \
  --schedules 1 --faults pause-holder
# A resign that does not check the lease: a deposed leader's late resign
# (it slept or was paused past its TTL) ends its successor's leadership.
# The same faults and seed as release-no-lease-check: its control serves.
mutant resign-no-lease-check deposed_leader_stays_deposed --topology single --seed 15 \
  --schedules 3 --faults pause-holder
# WAIT's answer ignored under --min-replicas 1, with --fence-floor none: a
# lossy failover loses grants that were returned, and their fences are
# handed out again. Control: the real build with the same flags and faults.
mutant wait-ignored no_fence_repeated --topology sentinel --seed 16 --schedules 3 \
  --faults lossy-failover --picketd-flag=--fence-floor=none
case_run "control: real build, sentinel, lossy failovers, --fence-floor none" "$real" \
  --topology sentinel --seed 16 --schedules 3 --faults lossy-failover \
  --picketd-flag=--fence-floor=none

# Unsafe configurations of the real build (docs/failures.md's table):
# no persistence and no clock floor - a restart starts the counters again.
case_run "unsafe: single-noaof, kills, --fence-floor none" "$real" --topology single-noaof \
  --seed 17 --schedules 2 --faults kill-redis --picketd-flag=--fence-floor=none \
  --expect-violation no_fence_repeated,fences_follow_real_time
# Control: the same kills with the clock floor (the default) hold.
case_run "control: single-noaof, kills, default flags" "$real" --topology single-noaof \
  --seed 17 --schedules 2 --faults kill-redis

# Eviction allowed (allkeys-random under a small maxmemory, memory filled
# past it): counters are evicted; with --fence-floor none fences repeat,
# with the clock floor (control) they hold.
evict=(--topology single --seed 18 --schedules 4 --faults fill-memory --redis-conf maxmemory=8mb
  --redis-conf maxmemory-policy=allkeys-random --picketd-flag=--allow-eviction)
case_run "unsafe: eviction allowed, --fence-floor none" "$real" "${evict[@]}" \
  --picketd-flag=--fence-floor=none --expect-violation no_fence_repeated,fences_follow_real_time
case_run "control: eviction allowed, the clock floor" "$real" "${evict[@]}"

rmdir "$out" 2>/dev/null || echo "chaos mutants: kept runs under $out"
echo "chaos mutants: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
