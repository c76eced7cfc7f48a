# test_etcd_peer.sh: bench/etcd_peer.py (issue 42, item 4) at smoke size,
# so the hand-written etcd lock that bench/run measures picketd --etcd
# against cannot rot: against a one-member etcd the test starts, it runs
# its cycle for about 2 s (8 clients on 2 names, so acquires are both
# granted and refused), prints picket-bench's JSON line with ops, grants,
# refusals, no errors and every fence checked, releases every key and
# exits 0; a short run as processes does the same; its fence check counts a
# repeated or backward fence; bad arguments exit 2. No timing targets:
# bench/run and docs/performance.md have the figures.
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
P="$PICKET_SOURCE_DIR/bench/etcd_peer.py"
h_start_etcd
"$P" --endpoints "$ETCD_URL" --clients 8 --names 2 --duration 2 --label smoke --prefix smoke/ \
  > "$H_DIR/threads.json" 2> "$H_DIR/threads.err" ||
  h_fail "etcd_peer exited $?: $(cat "$H_DIR/threads.json" "$H_DIR/threads.err")"
"$P" --endpoints "$ETCD_URL" --clients 2 --names 16 --duration 0.3 --warmup 0 --mode processes --prefix smoke/ \
  > "$H_DIR/procs.json" 2> "$H_DIR/procs.err" ||
  h_fail "etcd_peer --mode processes exited $?: $(cat "$H_DIR/procs.json" "$H_DIR/procs.err")"
python3 - "$H_DIR" <<'PY' || h_fail "etcd_peer's JSON: $(cat "$H_DIR/threads.json" "$H_DIR/procs.json")"
import json, sys
t, p = (json.loads(open("%s/%s.json" % (sys.argv[1], n)).read()) for n in ("threads", "procs"))
assert (t["target"], t["label"], t["conns"], t["names"], t["mode"]) == ("peer", "smoke", 8, 2, "threads"), t
assert t["ops"] > 0 and t["errors"] == 0 and t["grants"] > 0 and t["held"] > 0, t
assert t["ops"] >= 2 * t["grants"], t  # a granted cycle is two calls
assert t["fences"] >= t["grants"] and t["fence_violations"] == 0, t
assert 0 < t["p50_ms"] <= t["p99_ms"] <= t["max_ms"], t
assert p["mode"] == "processes" and p["ops"] > 0 and p["errors"] == 0 and p["held"] == 0, p
PY
# Every key was released (the session leases are revoked, too).
[ -z "$(ETCDCTL_API=3 etcdctl --endpoints "$ETCD_URL" get --prefix smoke/ --keys-only)" ] ||
  h_fail "keys left after the runs"
# The fence check: a repeated fence and one that went backwards are counted;
# overlapping calls, or grants of other names, are not ordered.
/usr/bin/python3 - "$P" <<'PY' || h_fail "etcd_peer's fence check"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("etcd_peer", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
v = m.fence_violations
assert v([(0, 5, 0, 10), (0, 7, 20, 30)])[0] == 0
assert v([(0, 5, 0, 10), (0, 5, 20, 30)])[0] == 1
assert v([(0, 9, 0, 10), (0, 7, 20, 30)])[0] == 1
assert v([(0, 9, 0, 30), (0, 7, 20, 40)])[0] == 0
assert v([(0, 9, 0, 10), (1, 7, 20, 30)])[0] == 0
PY
for args in "" "--endpoints x" "--endpoints $ETCD_URL --clients 0" "--endpoints $ETCD_URL --ttl 1" \
            "--endpoints $ETCD_URL --mode fork" "--endpoints https://127.0.0.1:1"; do
  # shellcheck disable=SC2086
  "$P" $args > "$H_DIR/bad.out" 2> "$H_DIR/bad.err"
  rc=$?
  [ "$rc" = 2 ] || h_fail "etcd_peer $args exited $rc, want 2"
  [ ! -s "$H_DIR/bad.out" ] || h_fail "etcd_peer $args printed a report"
done
echo "etcd_peer_smoke: ok"
