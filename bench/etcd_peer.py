#!/usr/bin/python3
"""etcd_peer: etcd's own lock pattern, hand-written, as picketd --etcd's yardstick.

Issue 42 asks that picketd on etcd be measured beside the lock a user could
write without it, in the same bench/run, on the same cluster, so that the
ratio is always measured and never quoted. This is that lock, on Debian's
python3-etcd3 (0.12, etcd's gRPC API), and nothing else:

- one session lease per client, granted once and kept alive (a refresh every
  third of the TTL) for the whole run;
- acquire: one Txn, `create_revision(key) == 0` -> put the key on the
  session lease. The Txn's header revision is the fence (it is the key's
  create_revision);
- release: one Txn, `create_revision(key) == fence` -> delete the key, so a
  stale release never deletes a later holder's key.

Two requests and two Raft proposals a cycle: the bar issue 42 sets for
picketd. Every client talks to the first of --endpoints (python-etcd3 0.12
speaks to one member), as picketd --etcd sends its calls to the first
member that answers.

The workload and the figures are picket-bench's cycle (bench/picket_bench.c),
so the two rows of bench/run compare like for like:

- clients are closed-loop: acquire, and if granted release, then the next
  acquire; with --names >= --clients each client walks its own slice of the
  names (client i: i, i + clients, i + 2 * clients, ...) and no two ever
  meet; with fewer names client i always uses name i % names and some
  acquires are refused;
- an op is one call (one Txn), as picket-bench's op is one HTTP request: a
  granted cycle is two ops, a refused acquire (the key exists: picketd's
  409 lock_held) is one op and counts in "held", as picket-bench counts a
  lock_held; ops_per_s is calls per second;
- latency is per call, from just before the gRPC call to its reply
  (p50/p90/p99/p99.9/max in ms), counted when the reply lands inside the
  measured window: --warmup seconds (default 0.5) after every client has its
  lease, then --duration seconds. Held keys are released after the window.

Clients run as threads of one process (default), or as processes
(--mode processes); each has its own gRPC channel either way. On this 2-core
machine, where the peer shares the cores with etcd, threads made more calls/s
at 16 clients (gRPC waits without the interpreter lock, and one interpreter
costs less CPU than sixteen) and as many at 1; docs/performance.md has both.

Every grant's fence is recorded with the times its call went out and came
back. The run fails (exit 1) if a name's fence repeats, or if a grant whose
call went out after another grant of that name had come back carries a fence
that is not larger (a fence that went backwards). Exit codes: 0 ran (call
errors are in the report), 1 could not run or a fence check failed, 2 bad
arguments. One JSON line on stdout, as picket-bench --format json prints.
"""
import argparse
import json
import multiprocessing
import os
import sys
import threading
import time

import etcd3
from etcd3 import etcdrpc

# The measured window and the drain are bounded: a client stops when the
# window ends, and one call is at most CALL_TIMEOUT_S.
CALL_TIMEOUT_S = 5.0
READY_TIMEOUT_S = 30.0


def parse_args(argv):
    p = argparse.ArgumentParser(prog="etcd_peer", description=__doc__.split("\n")[0])
    p.add_argument("--endpoints", required=True, help="etcd client URLs, comma-separated (the first is used)")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--names", type=int, default=16)
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds")
    p.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before that")
    p.add_argument("--ttl", type=int, default=10, help="session lease TTL in seconds")
    p.add_argument("--mode", choices=("threads", "processes"), default="threads")
    p.add_argument("--label", default="cycle")
    p.add_argument("--prefix", default="", help="key prefix (default: bench-peer-PID/)")
    p.add_argument("--store-pid", default="", help="etcd members' pids, comma-separated: their CPU over the window")
    a = p.parse_args(argv)
    bad = None
    if not 1 <= a.clients <= 1000:
        bad = "--clients must be 1..1000"
    elif not 1 <= a.names <= 100000:
        bad = "--names must be 1..100000"
    elif not 0 < a.duration <= 600 or not 0 <= a.warmup <= 60:
        bad = "--duration must be in (0, 600] and --warmup in [0, 60]"
    elif not 2 <= a.ttl <= 3600:
        bad = "--ttl must be 2..3600 seconds"
    if bad is None:
        try:
            a.host, a.port = endpoint(a.endpoints.split(",")[0])
            a.store_pids = [int(x) for x in a.store_pid.split(",") if x]
        except ValueError as e:
            bad = str(e)
    if bad:
        p.error(bad)
    a.prefix = a.prefix or "bench-peer-%d/" % os.getpid()
    return a


def endpoint(url):
    """http://HOST:PORT (or HOST:PORT) -> (host, port); TLS is not needed here."""
    if url.startswith("https://"):
        raise ValueError("https endpoints are not supported by the peer")
    hp = url[len("http://"):] if url.startswith("http://") else url
    host, _, port = hp.rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError("an endpoint must be http://HOST:PORT, not %r" % url)
    return host, int(port)


def pick_name(cfg, idx, k):
    """The name of client idx's k-th acquire: picket-bench's pick_lock."""
    if cfg.names >= cfg.clients:
        mine = (cfg.names - idx + cfg.clients - 1) // cfg.clients
        return idx + (k % mine) * cfg.clients
    return idx % cfg.names


def keep_alive(client, lease_id, ttl, stop):
    """Refreshes the session lease every third of its TTL until stop is set."""
    while not stop.wait(ttl / 3.0):
        try:
            for _ in client.refresh_lease(lease_id):
                pass
        except Exception:  # the next refresh tries again; the TTL has room for two misses
            pass


def run_client(cfg, idx, ready, go):
    """One client: its session lease, then acquire/release cycles.

    ready() is called once the lease is granted; go() returns the monotonic
    time in ns at which the measured window opens (the warmup already
    counted in). Returns the client's tallies as a dict of plain values."""
    client = etcd3.client(host=cfg.host, port=cfg.port, timeout=CALL_TIMEOUT_S)
    lease_id = client.lease(cfg.ttl).id
    stop = threading.Event()
    kt = threading.Thread(target=keep_alive, args=(client, lease_id, cfg.ttl, stop), daemon=True)
    kt.start()
    keys = [(cfg.prefix + "%d" % n).encode() for n in range(cfg.names)]
    value = b"peer-%d" % idx
    # An acquire is the same request every time for a given name: built once.
    acquire = [etcdrpc.TxnRequest(
        compare=[etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.CREATE,
                                 key=key, create_revision=0)],
        success=[etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=key, value=value, lease=lease_id))])
        for key in keys]
    txn = client.kvstub.Txn
    st = {"ops": 0, "grants": 0, "held": 0, "errors": 0, "first_error": "", "lat": [], "fences": []}

    def note(what, e):
        st["errors"] += 1
        if not st["first_error"]:
            st["first_error"] = "%s: %s" % (what, str(e).splitlines()[0][:120] if str(e) else type(e).__name__)

    ready()
    start = go()
    end = start + int(cfg.duration * 1e9)
    k = 0
    while True:
        n = pick_name(cfg, idx, k)
        k += 1
        t0 = time.monotonic_ns()
        if t0 >= end:
            break
        try:
            r = txn(acquire[n], CALL_TIMEOUT_S)
        except Exception as e:
            note("acquire", e)
            continue
        t1 = time.monotonic_ns()
        measuring = start <= t1 < end
        if measuring:
            st["ops"] += 1
            st["lat"].append(t1 - t0)
        if not r.succeeded:
            st["held"] += measuring
            continue
        fence = r.header.revision
        st["grants"] += measuring
        st["fences"].append((n, fence, t0, t1))
        release = etcdrpc.TxnRequest(
            compare=[etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.CREATE,
                                     key=keys[n], create_revision=fence)],
            success=[etcdrpc.RequestOp(request_delete_range=etcdrpc.DeleteRangeRequest(key=keys[n]))])
        t0 = time.monotonic_ns()
        try:
            r = txn(release, CALL_TIMEOUT_S)
        except Exception as e:
            note("release", e)
            continue
        t1 = time.monotonic_ns()
        if start <= t1 < end:
            st["ops"] += 1
            st["lat"].append(t1 - t0)
        if not r.succeeded:
            note("release", "the key was no longer this grant's")
    stop.set()
    try:
        client.revoke_lease(lease_id)
    except Exception as e:
        note("revoke", e)
    client.close()
    return st


# ---- processes or threads ------------------------------------------------

def child_main(cfg, idx, conn):
    """A client process: sends "ready", waits for the window, sends its tallies."""
    try:
        st = run_client(cfg, idx, lambda: conn.send("ready"), conn.recv)
    except Exception as e:
        conn.send({"fatal": "client %d: %s" % (idx, str(e).splitlines()[0] if str(e) else type(e).__name__)})
        return
    conn.send(st)


def run_processes(cfg, opened):
    """Forks the clients (no gRPC channel exists before the fork: importing
    the module starts nothing), waits for
    every lease, opens the window, and gathers their tallies."""
    ctx = multiprocessing.get_context("fork")
    kids = []
    for i in range(cfg.clients):
        mine, theirs = ctx.Pipe()
        pr = ctx.Process(target=child_main, args=(cfg, i, theirs), daemon=True)
        pr.start()
        kids.append((pr, mine))
    try:
        for pr, conn in kids:
            if not conn.poll(READY_TIMEOUT_S):
                raise RuntimeError("a client did not get its lease in %.0f s" % READY_TIMEOUT_S)
            msg = conn.recv()
            if msg != "ready":
                raise RuntimeError(msg["fatal"])
        start = time.monotonic_ns() + int(cfg.warmup * 1e9)
        for _, conn in kids:
            conn.send(start)
        opened(start)
        out = []
        for pr, conn in kids:
            if not conn.poll(cfg.warmup + cfg.duration + 2 * CALL_TIMEOUT_S + READY_TIMEOUT_S):
                raise RuntimeError("a client did not report")
            msg = conn.recv()
            if "fatal" in msg:
                raise RuntimeError(msg["fatal"])
            out.append(msg)
        for pr, _ in kids:
            pr.join(CALL_TIMEOUT_S)
        return out
    finally:
        for pr, _ in kids:
            if pr.is_alive():
                pr.kill()


def run_threads(cfg, opened):
    """The same clients as threads of this process, one gRPC channel each."""
    barrier = threading.Barrier(cfg.clients + 1)
    window = {}
    go_set = threading.Event()
    out, fatal = [None] * cfg.clients, []

    def body(i):
        try:
            out[i] = run_client(cfg, i, barrier.wait, lambda: go_set.wait() and window["start"])
        except threading.BrokenBarrierError:
            pass
        except Exception as e:
            fatal.append("client %d: %s" % (i, str(e).splitlines()[0] if str(e) else type(e).__name__))
            barrier.abort()
    ts = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(cfg.clients)]
    for t in ts:
        t.start()
    try:
        barrier.wait(READY_TIMEOUT_S)
    except threading.BrokenBarrierError:
        raise RuntimeError(fatal[0] if fatal else "a client did not get its lease in %.0f s" % READY_TIMEOUT_S)
    window["start"] = time.monotonic_ns() + int(cfg.warmup * 1e9)
    go_set.set()
    opened(window["start"])
    for t in ts:
        t.join(cfg.warmup + cfg.duration + 2 * CALL_TIMEOUT_S + READY_TIMEOUT_S)
    if fatal or any(o is None for o in out):
        raise RuntimeError(fatal[0] if fatal else "a client did not report")
    return out


# ---- checks and report ---------------------------------------------------

def fence_violations(grants):
    """grants: (name, fence, sent_ns, back_ns) of every grant of the run.
    Returns how many grants repeat a fence of their name or carry a fence no
    larger than that of a grant of the name that came back before they were
    sent (and the first such, for the report)."""
    by_name = {}
    for g in grants:
        by_name.setdefault(g[0], []).append(g)
    bad, first = 0, ""
    for name, gs in by_name.items():
        seen = set()
        back = sorted(gs, key=lambda g: g[3])
        j, top = 0, -1
        for g in sorted(gs, key=lambda g: g[2]):
            while j < len(back) and back[j][3] < g[2]:
                top = max(top, back[j][1])
                j += 1
            if g[1] in seen or g[1] <= top:
                bad += 1
                first = first or "name %d: fence %d after %d" % (name, g[1], top)
            seen.add(g[1])
    return bad, first


def cpu_s(pids):
    """User + system seconds of these processes so far (None if any is gone)."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            return None
        total += int(fields[11]) + int(fields[12])
    return total / tick


def quantile_ms(lat, q):
    if not lat:
        return 0.0
    return lat[min(len(lat) - 1, max(0, int(q * len(lat) + 0.5) - 1))] / 1e6


def main(argv):
    cfg = parse_args(argv)
    store = {}

    def opened(start):
        # The members' CPU over the window, read by this process (it waits).
        if not cfg.store_pids:
            return
        time.sleep(max(0, (start - time.monotonic_ns()) / 1e9))
        store["cpu0"] = cpu_s(cfg.store_pids)
        time.sleep(cfg.duration)
        store["cpu1"] = cpu_s(cfg.store_pids)
    self0 = os.times()
    try:
        sts = (run_threads if cfg.mode == "threads" else run_processes)(cfg, opened)
    except Exception as e:
        print("etcd_peer: %s" % e, file=sys.stderr)
        return 1
    self1 = os.times()
    lat = sorted(x for s in sts for x in s["lat"])
    ops = sum(s["ops"] for s in sts)
    bad, first_bad = fence_violations([g for s in sts for g in s["fences"]])
    d = {"target": "peer", "workload": "cycle", "primitive": "lock", "label": cfg.label,
         "conns": cfg.clients, "threads": 1, "names": cfg.names, "wait_ms": 0, "mode": cfg.mode,
         "seconds": round(cfg.duration, 3), "ops": ops, "ops_per_s": round(ops / cfg.duration, 1),
         "errors": sum(s["errors"] for s in sts), "grants": sum(s["grants"] for s in sts),
         "held": sum(s["held"] for s in sts), "reconnects": 0,
         "p50_ms": quantile_ms(lat, .5), "p90_ms": quantile_ms(lat, .9), "p99_ms": quantile_ms(lat, .99),
         "p999_ms": quantile_ms(lat, .999), "max_ms": lat[-1] / 1e6 if lat else 0.0,
         "bench_cpu_s": round(sum(b - a for a, b in zip(self0[:4], self1[:4])), 3),
         "fences": sum(len(s["fences"]) for s in sts), "fence_violations": bad}
    if store.get("cpu0") is not None and store.get("cpu1") is not None:
        d["redis_cpu_s"] = round(store["cpu1"] - store["cpu0"], 3)  # picket-bench's key for the store's CPU
    errs = [s["first_error"] for s in sts if s["first_error"]]
    if errs:
        d["first_error"] = errs[0]
    if first_bad:
        d["first_fence_violation"] = first_bad
    print(json.dumps(d))
    if bad:
        print("etcd_peer: %d fence(s) repeated or went backwards; first: %s" % (bad, first_bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
