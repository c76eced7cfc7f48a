# test_bench.sh: picket-bench against a real picketd and redis-server at low
# load: every workload reports ops and zero errors, the floor runs
# picketd's scripts on the same key layout, the idle workload reads
# picketd's memory, the cycle runs over TLS against an HTTPS picketd, the
# workloads run on semaphores and read/write locks too (--primitive), and
# bad arguments exit 2 without running anything.
# Each run is bounded by --ops as well as --duration, to keep the load low.
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
B="$PICKET_BIN_DIR/picket-bench"
h_start_redis
h_start_picketd --log-level warn

# field FILE LINE KEY: KEY of the LINE-th JSON line of FILE.
field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])])[sys.argv[3]])' "$@"; }

run() { # run NAME ARGS...: picket-bench --format json into $H_DIR/NAME.json
  local name=$1; shift
  "$B" --server "$PICKETD_URL" --pid "$PICKETD_PID" --format json --conns 4 --warmup 0.2 "$@" \
    > "$H_DIR/$name.json" 2> "$H_DIR/$name.err" ||
    h_fail "picket-bench $* exited $?: $(cat "$H_DIR/$name.err")"
}
# expect_clean NAME LINE TARGET: that line is TARGET with ops > 0 and no errors.
expect_clean() {
  local f="$H_DIR/$1.json"
  [ "$(field "$f" "$2" target)" = "$3" ] || h_fail "$1: line $2 is not $3: $(cat "$f")"
  [ "$(field "$f" "$2" ops)" -gt 0 ] || h_fail "$1: $3 made no ops: $(cat "$f")"
  [ "$(field "$f" "$2" errors)" = 0 ] || h_fail "$1: $3 reported errors: $(cat "$f")"
}

# cycle: picketd then the floor, both clean, and a ratio line.
run cycle --redis "$REDIS_URL" --duration 3 --ops 3000 --names 100
expect_clean cycle 0 picketd
expect_clean cycle 1 floor
[ "$(field "$H_DIR/cycle.json" 0 grants)" -gt 0 ] || h_fail "cycle: no grants"
python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[2])["ratio"]; sys.exit(0 if r > 0 else 1)' \
  "$H_DIR/cycle.json" || h_fail "cycle: no ratio line: $(cat "$H_DIR/cycle.json")"
# --pid gave picketd's CPU time and memory.
[ -n "$(field "$H_DIR/cycle.json" 0 picketd_cpu_s)" ] || h_fail "cycle: no picketd CPU"
[ "$(field "$H_DIR/cycle.json" 0 hwm_kib)" -gt 0 ] || h_fail "cycle: no picketd VmHWM"
# Both targets really used the proto key layout: fence counters of bench
# locks exist under picketd's prefix, granted by picketd (p) and the floor (f).
h_redis --scan --pattern 'picket:{bench-*-p-*}:fence' | grep -q . || h_fail "no fence keys from the picketd run"
h_redis --scan --pattern 'picket:{bench-*-f-*}:fence' | grep -q . || h_fail "no fence keys from the floor run"
# Everything was released at the end of the runs.
[ -z "$(h_redis --scan --pattern 'picket:{bench-*}:lease')" ] || h_fail "leases left held after the run"

# The other workloads, shorter.
run contended --redis "$REDIS_URL" --workload contended --duration 1 --ops 1000
expect_clean contended 0 picketd
expect_clean contended 1 floor
run renew --redis "$REDIS_URL" --workload renew --duration 1 --ops 1000 --names 10
expect_clean renew 0 picketd
expect_clean renew 1 floor
run wait --workload wait --duration 1 --ops 500 --names 2 --wait-ms 5000
expect_clean wait 0 picketd
[ "$(field "$H_DIR/wait.json" 0 held)" = 0 ] || h_fail "wait: a blocking acquire got lock_held"
# The other primitives: picketd's /v1/semaphores and /v1/rwlocks, and a
# floor that runs semaphore.lua and rwlock.lua. Four connections on one
# semaphore of the default limit (--conns) and on one rwlock's read leases
# are all granted; every run is clean on both targets (one python3 checks
# them all: the machine is often busy).
prim() { run "$1" --redis "$REDIS_URL" --duration 0.5 --ops 400 --warmup 0 "${@:2}"; }
prim sem --primitive semaphore --names 1
prim rwread --primitive rwlock --mode read --names 1
prim rwwrite --primitive rwlock --names 1
prim semfull --primitive semaphore --limit 1 --names 1
prim semrenew --primitive semaphore --workload renew --names 10
python3 - "$H_DIR" <<'PY' || h_fail "the --primitive runs: $(cat "$H_DIR"/sem*.json "$H_DIR"/rw*.json)"
import json, sys
def lines(n): return [json.loads(l) for l in open("%s/%s.json" % (sys.argv[1], n)).read().splitlines()]
for n in ("sem", "rwread", "rwwrite", "semfull", "semrenew"):
    p, f = lines(n)[:2]
    assert (p["target"], f["target"]) == ("picketd", "floor"), n
    assert all(d["ops"] > 0 and d["errors"] == 0 for d in (p, f)), n
    if n != "semrenew":
        assert p["grants"] > 0 and f["grants"] > 0, n
    if n in ("sem", "rwread"):  # shared: nobody refused
        assert p["held"] == 0 and f["held"] == 0, n
assert lines("sem")[0]["limit"] == 4 and lines("semfull")[1]["limit"] == 1
assert lines("rwread")[1]["mode"] == "read" and lines("rwwrite")[0]["mode"] == "write"
assert lines("sem")[0]["primitive"] == "semaphore" and lines("rwread")[1]["primitive"] == "rwlock"
PY
# Both targets used picketd's key layout for them, and released everything.
for t in p f; do
  h_redis --scan --pattern "picket:{bench-*-$t-*}:sem:0:fence" | grep -q . || h_fail "no semaphore fence keys ($t)"
  h_redis --scan --pattern "picket:{bench-*-$t-*}:rw:fence" | grep -q . || h_fail "no rwlock fence keys ($t)"
done
[ -z "$(h_redis --scan --pattern 'picket:{bench-*}:sem:*:lease')$(h_redis --scan --pattern 'picket:{bench-*}:rw:[wr]*')" ] ||
  h_fail "permits or rwlock leases left held after the runs"
run idle --workload idle --conns 20 --duration 0.5
[ "$(field "$H_DIR/idle.json" 0 answered)" = 20 ] || h_fail "idle: not every connection answered"
[ "$(field "$H_DIR/idle.json" 0 rss_kib)" -gt 0 ] || h_fail "idle: no RSS"

# Over TLS: a second picketd with a throwaway self-signed certificate; the
# same cycle over https:// with --cacert is clean (handshakes verified).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -keyout "$H_DIR/tls.key" \
  -out "$H_DIR/tls.crt" -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null ||
  h_fail "openssl could not make a certificate"
PLAIN_URL=$PICKETD_URL PLAIN_PID=$PICKETD_PID
h_start_picketd --log-level warn --tls-cert "$H_DIR/tls.crt" --tls-key "$H_DIR/tls.key"
PICKETD_URL="https://127.0.0.1:$PICKETD_PORT"
run tls --redis "$REDIS_URL" --duration 2 --ops 2000 --names 100 --cacert "$H_DIR/tls.crt"
expect_clean tls 0 picketd
expect_clean tls 1 floor
# A certificate that does not verify: exit 1 and why, not a run of errors.
echo "not a certificate" > "$H_DIR/garbage.pem"
"$B" --server "$PICKETD_URL" --cacert "$H_DIR/garbage.pem" --duration 0.5 > /dev/null 2> "$H_DIR/tls.err"
[ $? = 1 ] || h_fail "picket-bench with an unreadable --cacert should exit 1: $(cat "$H_DIR/tls.err")"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -keyout "$H_DIR/other.key" \
  -out "$H_DIR/other.crt" -subj /CN=other 2>/dev/null
"$B" --server "$PICKETD_URL" --cacert "$H_DIR/other.crt" --duration 0.5 > /dev/null 2> "$H_DIR/tls.err"
[ $? = 1 ] && grep -q "certificate verification" "$H_DIR/tls.err" ||
  h_fail "picket-bench against an untrusted certificate: $(cat "$H_DIR/tls.err")"
PICKETD_URL=$PLAIN_URL PICKETD_PID=$PLAIN_PID

# Text output carries the same report for people.
"$B" --server "$PICKETD_URL" --redis "$REDIS_URL" --conns 2 --duration 0.5 --warmup 0 > "$H_DIR/text" ||
  h_fail "text run failed"
grep -q '^picketd .* ops/s .*p99.9' "$H_DIR/text" || h_fail "text: no picketd line: $(cat "$H_DIR/text")"
grep -q '^floor ' "$H_DIR/text" || h_fail "text: no floor line"
grep -q '^ratio picketd/floor' "$H_DIR/text" || h_fail "text: no ratio"

# Bad arguments: exit 2, one message, no run.
for args in "--conns 0" "--workload nope --server $PICKETD_URL" "--server http://10.1.2.3:80" \
            "--server $PICKETD_URL --duration x" "--redis redis://example.com:6379" \
            "--server $PICKETD_URL --workload renew --conns 8 --names 2" \
            "--redis $REDIS_URL --workload wait" "--server https://127.0.0.1:1" \
            "--server $PICKETD_URL --cacert $H_DIR/tls.crt" "--server $PICKETD_URL --primitive nope" \
            "--server $PICKETD_URL --limit 3" "--server $PICKETD_URL --mode read" \
            "--server $PICKETD_URL --primitive rwlock --mode both" \
            "--server $PICKETD_URL --primitive semaphore --limit 0" \
            "--server $PICKETD_URL --workload idle --primitive semaphore" ""; do
  # shellcheck disable=SC2086
  "$B" $args > "$H_DIR/bad.out" 2> "$H_DIR/bad.err"
  rc=$?
  [ "$rc" = 2 ] || h_fail "picket-bench $args exited $rc, want 2"
  [ "$(wc -l < "$H_DIR/bad.err")" = 1 ] || h_fail "picket-bench $args: want one line on stderr: $(cat "$H_DIR/bad.err")"
  [ ! -s "$H_DIR/bad.out" ] || h_fail "picket-bench $args printed a report"
done
# A target that is down: exit 1, not a hang.
"$B" --server http://127.0.0.1:1 --duration 0.5 > /dev/null 2>&1
[ $? = 1 ] || h_fail "an unreachable server should exit 1"
# bench/run checks its arguments before it starts anything (the matrix at
# its real durations is too heavy for a test: it is run by hand, see
# docs/performance.md; below it runs at smoke size).
R="$PICKET_SOURCE_DIR/bench/run"
bash "$R" --help | grep -q -- '--floor-unix' || h_fail "bench/run --help does not list its flags"
bash "$R" --help | grep -q -- '--repeat N' || h_fail "bench/run --help does not list --repeat"
for args in "--duration x" "--threads -1" "--nope" "--repeat 0" "--repeat x" "--repeat"; do
  # shellcheck disable=SC2086
  bash "$R" $args > /dev/null 2>&1
  rc=$?
  [ "$rc" = 2 ] || h_fail "bench/run $args exited $rc, want 2"
done
bash "$R" --bin "$H_DIR/nothing-here" > /dev/null 2> "$H_DIR/run.err"
[ $? = 1 ] && grep -q 'build first' "$H_DIR/run.err" || h_fail "bench/run without binaries: $(cat "$H_DIR/run.err")"
# The whole matrix at smoke size, twice per row: bench/run's own Redis and
# picketd, with a picket-bench that stops each target after a few ops
# (later flags win), so its time stays small.
mkdir -p "$H_DIR/rbin"
ln -sf "$PICKET_BIN_DIR/picketd" "$H_DIR/rbin/picketd"
ln -sf "$PICKET_BIN_DIR/picket" "$H_DIR/rbin/picket"
printf '#!/bin/sh\nexec "%s" "$@" --warmup 0 --ops 300\n' "$B" > "$H_DIR/rbin/picket-bench"
chmod +x "$H_DIR/rbin/picket-bench"
# The etcd peer as well: 0.1 s measured, no warmup (later flags win).
printf '#!/bin/sh\nexec "%s" "$@" --duration 0.1 --warmup 0\n' "$PICKET_SOURCE_DIR/bench/etcd_peer.py" > "$H_DIR/rbin/etcd-peer"
chmod +x "$H_DIR/rbin/etcd-peer"
bash "$R" --bin "$H_DIR/rbin" --peer "$H_DIR/rbin/etcd-peer" --quick --duration 0.5 --repeat 2 --picketd-flags "--redis-pipeline off" \
  > "$H_DIR/run.out" 2> "$H_DIR/run.err" || h_fail "bench/run --repeat 2 exited $?: $(cat "$H_DIR/run.err")"
grep -q '^picket-bench .*0.5 s measured' "$H_DIR/run.out" || h_fail "bench/run: no header: $(cat "$H_DIR/run.out")"
grep -q 'picketd (default threads; flags --redis-pipeline off) reaches Redis' "$H_DIR/run.out" ||
  h_fail "bench/run: picketd's flags not in the header: $(cat "$H_DIR/run.out")"
[ "$(grep -c 'run [12] of 2' "$H_DIR/run.err")" = 52 ] || h_fail "bench/run: not 2 runs of each of 26 rows: $(cat "$H_DIR/run.err")"
# The primitive rows run in turns with the target row: cycle, then each of them.
grep -A3 '^bench/run: cycle (run 2 of 2)$' "$H_DIR/run.err" | tr '\n' '|' |
  grep -q 'cycle (run 2 of 2)|bench/run: cycle semaphore (run 2 of 2)|bench/run: cycle rwlock read (run 2 of 2)|bench/run: cycle rwlock write (run 2 of 2)' ||
  h_fail "bench/run: the primitive rows not in turns with the cycle: $(cat "$H_DIR/run.err")"
# The auth rows run in turns with each other.
grep -A1 'cycle auth (run 1 of 2)' "$H_DIR/run.err" | grep -q 'cycle auth quota (run 1 of 2)' ||
  h_fail "bench/run: the auth rows not in turns: $(cat "$H_DIR/run.err")"
# The Redis Cluster rows (a three-primary cluster of bench/run's own), with
# every node's CPU, beside the single Redis, and the lines that compare them.
for c in 16 64; do
  grep -Eq "^\| cycle cluster \| $c \| 1000 \| [0-9]+ .*\| n/a \| n/a \|.*\| [0-9.]+ / n/a \|\$" "$H_DIR/run.out" ||
    h_fail "bench/run: no cluster row at $c connections (with the nodes' CPU): $(cat "$H_DIR/run.out")"
  grep -Eq "^Redis Cluster \(3 primaries, 0 replicas each, this machine\), cycle at $c connections .*: [0-9]+ ops/s against [0-9]+ on one Redis" \
    "$H_DIR/run.out" || h_fail "bench/run: no cluster comparison at $c: $(cat "$H_DIR/run.out")"
done
# The etcd rows (a three-member etcd of bench/run's own), with the members'
# CPU, their comparison with one Redis, and the sidecars timed on that etcd.
for c in 1 16 64; do
  grep -Eq "^\| cycle etcd \| $c \| 1000 \| [0-9]+ .*\| n/a \| n/a \|.*\| [0-9.]+ / n/a \|\$" "$H_DIR/run.out" ||
    h_fail "bench/run: no etcd row at $c connections (with the members' CPU): $(cat "$H_DIR/run.out")"
  grep -Eq "^etcd [0-9.]+ \(3 members, this machine, its defaults\), cycle at $c connections? .*: [0-9]+ ops/s against [0-9]+ on one Redis" \
    "$H_DIR/run.out" || h_fail "bench/run: no etcd comparison at $c: $(cat "$H_DIR/run.out")"
done
# The peer rows (issue 42): picketd --etcd, then the hand-written etcd lock,
# on one member and on three, at 1 and 16 connections over 16 names; each
# pair in the table with the peer as its floor, in the peer table with its
# ratio, and in a target line.
[ "$(grep -Ec 'vs peer, (1 member|3 members) \(the peer, [12] of 2\)' "$H_DIR/run.err")" = 8 ] ||
  h_fail "bench/run: not 2 peer runs for each pair row: $(cat "$H_DIR/run.err")"
for m in "1 member" "3 members"; do
  for c in 1 16; do
    grep -Eq "^\| cycle etcd vs peer, $m \| $c \| 16 \| [0-9]+ \| [0-9]+ \| [0-9.]+ \([0-9.]+–[0-9.]+\) \|" "$H_DIR/run.out" ||
      h_fail "bench/run: no '$m' pair row at $c connections: $(cat "$H_DIR/run.out")"
    grep -Eq "^\| $m \| $c \| [0-9]+ \| [0-9]+ \| [0-9.]+ \([0-9.]+–[0-9.]+\) \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \| [0-9]+ / [0-9]+ \| 0 / 0 \|\$" "$H_DIR/run.out" ||
      h_fail "bench/run: no '$m' row at $c connections in the peer table: $(cat "$H_DIR/run.out")"
    grep -Eq "^- $m, $c connections?: [0-9.]+ x the peer \(target >= (0.8|1.0)\): (met|NOT met); p99 [0-9.]+ ms against [0-9.]+ \(target <= 2 x\): (met|NOT met)\$" \
      "$H_DIR/run.out" || h_fail "bench/run: no issue 42 target line for '$m' at $c: $(cat "$H_DIR/run.out")"
  done
done
grep -Eq '^Sidecars on that etcd, .*: picket run [0-9.]+ ms a cycle .*, etcdctl lock [0-9.]+ ms a cycle\.$' \
  "$H_DIR/run.out" || h_fail "bench/run: no sidecar comparison: $(cat "$H_DIR/run.out")"
# The semaphore and read/write lock rows, with their floor, and the lines
# that compare them with the lock row (every acquire granted in all three).
for r in 'cycle semaphore \| 16 \| 1000' 'cycle rwlock read \| 16 \| 1' 'cycle rwlock write \| 16 \| 1000'; do
  grep -Eq "^\| $r \| [0-9]+ \| [0-9]+ \| [0-9.]+ \([0-9.]+–[0-9.]+\) \|" "$H_DIR/run.out" ||
    h_fail "bench/run: no '$r' row with its floor: $(cat "$H_DIR/run.out")"
done
for w in 'Semaphores \(limit 16, 1,000 names: one live permit each\)' \
         'Read/write locks, read leases \(16 connections on 1 name, shared\)' \
         'Read/write locks, write leases \(1,000 names\)'; do
  grep -Eq "^$w, cycle at 16 connections .*: [0-9]+ ops/s against [0-9]+ for locks \([0-9.]+ x\).* [0-9]+ grants, 0 refused; against its floor [0-9.]+ x\.\$" \
    "$H_DIR/run.out" || h_fail "bench/run: no comparison '$w': $(cat "$H_DIR/run.out")"
done
# The TLS row beside the plain one, and the line that compares them.
grep -Eq '^\| cycle TLS \| 16 \| 1000 \| [0-9]+ \| [0-9]+ \|' "$H_DIR/run.out" ||
  h_fail "bench/run: no TLS row: $(cat "$H_DIR/run.out")"
grep -Eq '^TLS, cycle at 16 connections and 1,000 names \(median runs\): [0-9]+ ops/s against [0-9]+ plain' \
  "$H_DIR/run.out" || h_fail "bench/run: no TLS comparison: $(cat "$H_DIR/run.out")"
# The --auth-file rows: served (no 401 counted as an error), and compared.
for r in "cycle auth" "cycle auth quota"; do
  grep -Eq "^\| $r \| 16 \| 1000 \| [0-9]+ \| [0-9]+ \|" "$H_DIR/run.out" ||
    h_fail "bench/run: no '$r' row: $(cat "$H_DIR/run.out")"
done
grep -Eq '^--auth-file \(1,000 tokens\), cycle at 16 connections and 1,000 names \(median runs\): [0-9]+ ops/s' \
  "$H_DIR/run.out" || h_fail "bench/run: no auth comparison: $(cat "$H_DIR/run.out")"
# The --min-replicas row (a primary with a replica of bench/run's own), its
# comparison with the plain cycle, and issue 28's four target lines.
grep -Eq '^\| cycle min-replicas 1 \| 16 \| 1000 \| [0-9]+ \| [0-9]+ \|' "$H_DIR/run.out" ||
  h_fail "bench/run: no min-replicas row: $(cat "$H_DIR/run.out")"
grep -Eq '^--min-replicas 1 \(a primary with one replica\), cycle at 16 connections .*: [0-9]+ ops/s against [0-9]+ plain' \
  "$H_DIR/run.out" || h_fail "bench/run: no min-replicas comparison: $(cat "$H_DIR/run.out")"
[ "$(grep -Ec '^- .*: [0-9.]+ x \(target >= 0\.[0-9]\): (met|NOT met)$' "$H_DIR/run.out")" -ge 4 ] ||
  h_fail "bench/run: issue 28's target lines missing: $(cat "$H_DIR/run.out")"
# The target row's ratio cell is median (min–max); one line per run under
# the table, one of them the median; the Targets line says so.
grep -Eq '^\| cycle \| 16 \| 1000 \| [0-9]+ \| [0-9]+ \| [0-9.]+ \([0-9.]+–[0-9.]+\) \|' "$H_DIR/run.out" ||
  h_fail "bench/run: no median (min–max) ratio in the target row: $(cat "$H_DIR/run.out")"
[ "$(grep -Ec '^- run [12]: picketd [0-9]+ ops/s, floor [0-9]+ ops/s, ratio [0-9.]+' "$H_DIR/run.out")" = 2 ] ||
  h_fail "bench/run: want a line per run of the target row: $(cat "$H_DIR/run.out")"
[ "$(grep -c '(the median run)$' "$H_DIR/run.out")" = 1 ] || h_fail "bench/run: no single median run marked"
grep -Eq '^- cycle, 16 connections, 1,000 names: [0-9.]+ x the floor, median of 2 runs \(range [0-9.]+–[0-9.]+\)' \
  "$H_DIR/run.out" || h_fail "bench/run: Targets line without median and range: $(cat "$H_DIR/run.out")"
# A flag picketd rejects fails bench/run with picketd's own message.
bash "$R" --bin "$H_DIR/rbin" --quick --picketd-flags "--no-such-flag" > /dev/null 2> "$H_DIR/run.err"
[ $? = 2 ] && grep -q "picketd: unknown flag '--no-such-flag'" "$H_DIR/run.err" ||
  h_fail "bench/run with a flag picketd rejects: $(cat "$H_DIR/run.err")"
echo "bench_smoke: ok"
