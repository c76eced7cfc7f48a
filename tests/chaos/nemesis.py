"""nemesis: the faults of a chaos run, alone and in random combinations.

What it owns: the catalogue of faults each topology can suffer, the
random schedule drawn from a seed, and carrying a schedule out against a
live topology (tests/chaos/topology.py), writing a `start` and a `stop`
event per fault into the history so the checker can put availability
next to each fault.

A schedule is 1 to 3 faults drawn from the topology's catalogue, each
with its own start offset and duration; they run at once (each on its
own thread), so two faults overlap as often as not. After the last one
stops, restore() heals everything (network, clocks, paused and killed
processes) and the nemesis waits until the topology is whole again
before the next schedule: each schedule starts from a healthy system,
so a violation can be traced to the schedule that caused it.

Reproducing: the seed fixes the schedules (which faults, on which
targets, when, for how long, with which offsets). Real processes on a
real kernel decide the interleaving, so a rerun reproduces the attack,
not the exact history.
"""

import os
import random
import signal
import sys
import threading
import time

import resp
from topology import REDIS_PORT, SENTINEL_PORT, MASTER

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from redis_cluster import keyslot  # noqa: E402  (the fixture's CRC16, checked against Redis)

# Which faults each shape can suffer, with a weight each (how often it is
# drawn). Every fault of issue 25's list is here for the shapes it applies to.
COMMON = {
    "partition-picketd-redis": 3,   # one picketd loses a primary
    "partition-halves": 2,          # every process on one side or the other
    "isolate": 2,                   # one process cut off from all, clients too
    "clock-step": 3,                # a Redis node's wall clock jumps, then back
    "clock-strobe": 2,              # ... jumps back and forth, fast
    "pause-redis": 2,               # SIGSTOP a primary
    "pause-picketd": 2,
    "pause-holder": 3,              # SIGSTOP a worker that holds a lease, past its TTL
    "kill-redis": 2,                # SIGKILL a primary, restart it at the fault's end
    "kill-picketd": 2,
    # Drawn only when named (--faults): it matters only with a maxmemory
    # and an evicting policy (--redis-conf), a configuration the docs call
    # unsafe; under the default noeviction it would only fill memory.
    "fill-memory": 0,
}
CATALOGUE = {
    "single": dict(COMMON),
    "single-noaof": dict(COMMON),
    "sentinel": dict(COMMON, **{
        "partition-primary-replicas": 2,
        "partition-primary-minority": 2,   # primary (and one picketd) vs the rest
        "failover": 2,                     # SENTINEL FAILOVER
        "lossy-failover": 3,               # replication held back, then the primary dies
    }),
    # etcd: the same attacks on the members (the "redis" faults hit the
    # leader), plus the leader and one picketd cut off from the majority.
    # No clock faults: etcd is a Go program, which libfaketime cannot step,
    # and its fences read no clock.
    "etcd": dict({k: v for k, v in COMMON.items()
                  if not k.startswith("clock-") and k != "fill-memory"}, **{
        "partition-primary-minority": 3,
    }),
    "cluster": dict(COMMON, **{
        "partition-primary-replicas": 2,
        "failover": 2,                     # CLUSTER FAILOVER [FORCE] on a replica
        "lossy-failover": 3,
        "migrate-slot": 3,                 # a chaos lock's slot moves to another primary
    }),
}


def kinds(shape):
    return sorted(CATALOGUE[shape])


def draw_schedule(rng, shape, only=None):
    """A list of (kind, start_s, duration_s, sub-seed) for one schedule."""
    cat = CATALOGUE[shape]
    names = sorted(k for k in cat if only is None or k in only)
    if not names:
        raise ValueError("no fault of %s applies to %s" % (sorted(only), shape))
    weights = [cat[k] if only is None else max(cat[k], 1) for k in names]
    n = min(rng.choice((1, 1, 2, 2, 3)), len(names))
    out, drawn = [], set()
    while len(out) < n:
        kind = rng.choices(names, weights)[0]
        if kind in drawn:       # one of each kind: two kills of one primary are one kill
            continue
        drawn.add(kind)
        out.append((kind, round(rng.uniform(0, 1.5), 3), round(rng.uniform(0.5, 3.0), 3),
                    rng.randrange(1 << 30)))
    return out


class Nemesis:
    def __init__(self, topo, history, *, holders, worker_pids, locks, ttl_ms):
        self.topo, self.h = topo, history
        self.holders, self.worker_pids = holders, worker_pids
        self.locks, self.ttl_ms = locks, ttl_ms
        self.next_id = 0
        self.lock = threading.Lock()    # topology changes, one at a time

    # ---- targets -------------------------------------------------------

    def primary(self, rng):
        """A primary to attack: the single node, the primary the sentinels
        name, or a random shard's primary."""
        t = self.topo
        if t.shape in ("single", "single-noaof"):
            return t.nodes[0]
        if t.shape == "etcd":
            return t.etcd_leader() or rng.choice(t.nodes)
        if t.shape == "sentinel":
            return t.sentinel_primary() or rng.choice(t.nodes)
        ps = t.primaries()
        return rng.choice(ps) if ps else rng.choice(t.nodes)

    def lock_owner(self, lock):
        """Under Cluster: the node serving lock's slot, from CLUSTER SLOTS."""
        slot = keyslot("picket:{%s}:lease" % lock)
        for n in self.topo.nodes:
            try:
                for lo, hi, master, *_ in n.call("CLUSTER", "SLOTS", timeout=0.5):
                    if int(lo) <= slot <= int(hi):
                        return self.topo.node_by_ip(master[0]), slot
            except (OSError, resp.RedisError, ValueError, TypeError):
                continue
        return None, slot

    # ---- one schedule --------------------------------------------------

    def run_schedule(self, index, schedule):
        threads = []
        t0 = time.monotonic()
        for kind, start_s, dur_s, sub in schedule:
            th = threading.Thread(target=self._fault, daemon=True,
                                  args=(kind, t0 + start_s, dur_s, random.Random(sub), index))
            th.start()
            threads.append(th)
        for th in threads:
            th.join(timeout=60)
        with self.lock:
            self.topo.restore()
        t_heal = time.monotonic()
        why = self.topo.wait_ready(45)
        self.h.event("info", "healed", value={"schedule": index, "healthy": why is None,
                                              "why": why,
                                              "ms": int((time.monotonic() - t_heal) * 1000)})
        return why

    def _fault(self, kind, at, dur_s, rng, index):
        time.sleep(max(0.0, at - time.monotonic()))
        with self.lock:
            fid = self.next_id
            self.next_id += 1
        fn = getattr(self, "f_" + kind.replace("-", "_"))
        detail = {}
        # The window opens before the fault is set up (a lossy failover
        # holds replication back for a while before its kill); what the
        # fault did goes into its stop event.
        self.h.event("info", "start", value={"fault": kind, "id": fid, "schedule": index})
        try:
            stop = fn(rng, dur_s, detail)
        except Exception as e:            # a fault that could not be set up is recorded
            detail["error"] = "%s: %s" % (type(e).__name__, e)
            stop = None
        if stop is not None:
            time.sleep(detail.get("hold_s", dur_s))
            try:
                with self.lock:
                    stop()
            except Exception as e:
                detail["stop_error"] = "%s: %s" % (type(e).__name__, e)
        self.h.event("info", "stop", value=dict(detail, fault=kind, id=fid, schedule=index))

    # ---- the faults: each sets up, returns its undo (or None) ----------

    def _partition(self, a, b, detail):
        detail["a"] = [h.name for h in a]
        detail["b"] = [h.name for h in b]
        with self.lock:
            self.topo.net.partition(a, b)
        return self.topo.net.heal

    def f_partition_picketd_redis(self, rng, dur, d):
        p = rng.choice(self.topo.picketds)
        return self._partition([p.host], [self.primary(rng).host], d)

    def f_partition_halves(self, rng, dur, d):
        hosts = self.topo.all_hosts()
        rng.shuffle(hosts)
        k = rng.randrange(1, len(hosts))
        return self._partition(hosts[:k], hosts[k:], d)

    def f_isolate(self, rng, dur, d):
        t = self.topo
        target = rng.choice(t.nodes + t.sentinels + t.picketds)
        d["target"] = target.name
        with self.lock:
            t.net.isolate(target.host)
        return t.net.heal

    def f_partition_primary_replicas(self, rng, dur, d):
        p = self.primary(rng)
        reps = self.topo.replicas_of(p)
        if not reps:
            d["skipped"] = "no replica"
            return None
        return self._partition([p.host], [r.host for r in reps], d)

    def f_partition_primary_minority(self, rng, dur, d):
        t = self.topo
        p = self.primary(rng)
        side = [p.host, rng.choice(t.picketds).host]
        rest = [h for h in t.all_hosts() if h not in side]
        return self._partition(side, rest, d)

    def _clock_target(self, rng):
        t = self.topo
        return self.primary(rng) if rng.random() < 0.6 else rng.choice(t.nodes)

    def f_clock_step(self, rng, dur, d):
        n = self._clock_target(rng)
        off = rng.choice((-1, 1)) * rng.choice((2, 5, 15, 30, 60, 120))
        d.update(target=n.name, offset_s=off)
        n.clock.set_offset(off)
        return lambda: n.clock.set_offset(0)

    def f_clock_strobe(self, rng, dur, d):
        n = self._clock_target(rng)
        amp = rng.choice((1, 5, 20, 60))
        period = rng.uniform(0.02, 0.2)
        d.update(target=n.name, amplitude_s=amp, period_ms=int(period * 1000))
        done = threading.Event()

        def strobe():
            up = False
            while not done.wait(period):
                up = not up
                n.clock.set_offset(amp if up else -amp)
            n.clock.set_offset(0)
        th = threading.Thread(target=strobe, daemon=True)
        th.start()

        def stop():
            done.set()
            th.join(5)
        return stop

    def f_pause_redis(self, rng, dur, d):
        n = self.primary(rng)
        d["target"] = n.name
        n.pause()
        return n.resume

    def f_pause_picketd(self, rng, dur, d):
        p = rng.choice(self.topo.picketds)
        d["target"] = p.name
        p.pause()
        return p.resume

    def f_pause_holder(self, rng, dur, d):
        # A holder, for longer than its TTL whatever the drawn duration.
        held = [i for i in range(len(self.holders)) if self.holders[i]]
        if not held:
            d["skipped"] = "no holder"
            return None
        w = rng.choice(held)
        pid = self.worker_pids[w]
        pause = self.ttl_ms / 1000 * rng.uniform(1.5, 3.0)
        d.update(target="w%d" % w, hold_s=round(pause, 3))
        os.kill(pid, signal.SIGSTOP)
        return lambda: os.kill(pid, signal.SIGCONT)

    def f_kill_redis(self, rng, dur, d):
        n = self.primary(rng)
        d["target"] = n.name
        n.kill()
        return n.start

    def f_fill_memory(self, rng, dur, d):
        """Filler keys on the primary, past its maxmemory: an evicting
        policy then evicts what it likes, fence counters included."""
        n = self.primary(rng)
        size = 64 * 1024
        count = rng.randrange(192, 320)    # 12-20 MiB: at least 1.5x the test's 8 MiB maxmemory
        d.update(target=n.name, mb=count * size // (1 << 20))
        blob = "x" * size
        for i in range(count):
            try:
                n.call("SET", "filler:%d" % i, blob, timeout=2)
            except (OSError, resp.RedisError):
                break

        def stop():
            for i in range(count):
                try:
                    n.call("DEL", "filler:%d" % i, timeout=2)
                except (OSError, resp.RedisError):
                    break
        return stop

    def f_kill_picketd(self, rng, dur, d):
        p = rng.choice(self.topo.picketds)
        d["target"] = p.name
        p.kill()
        return p.start

    def f_failover(self, rng, dur, d):
        t = self.topo
        if t.shape == "sentinel":
            s = rng.choice([s for s in t.sentinels if s.running and not s.stopped] or t.sentinels)
            d["via"] = s.name
            r = resp.call(s.host.ip, SENTINEL_PORT, "SENTINEL", "FAILOVER", MASTER, timeout=1)
            d["reply"] = r
            return None
        p = self.primary(rng)
        reps = t.replicas_of(p)
        if not reps:
            d["skipped"] = "no replica"
            return None
        r = rng.choice(reps)
        mode = rng.choice(("", "FORCE"))
        d.update(primary=p.name, replica=r.name, mode=mode or "plain")
        r.call("CLUSTER", "FAILOVER", *([mode] if mode else []), timeout=1)
        return None

    def f_lossy_failover(self, rng, dur, d):
        """Replication to the replicas is held back (a partition between the
        primary and its replicas only: clients and sentinels still reach
        everything), the primary goes on acknowledging what it is sent,
        then dies: whatever it acknowledged in that window is lost when a
        replica takes over. The old primary restarts once a replica has
        taken over, and rejoins as a replica (dropping what the others
        never got). Without --min-replicas every grant of the window is
        lost; with it, none was returned (WAIT timed out: 503)."""
        t = self.topo
        p = self.primary(rng)
        reps = t.replicas_of(p)
        if not p.running or not reps:
            d["skipped"] = "no live primary with a replica"
            return None
        hold = rng.uniform(0.5, 1.5)
        d.update(target=p.name, held_back_ms=int(hold * 1000))
        with self.lock:
            t.net.partition([p.host], [r.host for r in reps])
        time.sleep(hold)
        with self.lock:
            p.kill()

        def stop():
            # The partition stays until a replica has taken over (bounded):
            # the dead primary's kernel still holds the unacknowledged
            # replication stream and would deliver it on a heal. And the old
            # primary stays dead until then: back too soon, it would still
            # be the primary, with its AOF, and nothing would be lost.
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not self._replaced(p, reps):
                time.sleep(0.1)
            t.net.heal()
            p.start()
        return stop

    def _replaced(self, old, reps):
        """Whether one of old's replicas is a primary now (and, under
        Sentinel, the one the sentinels name)."""
        if self.topo.shape == "sentinel":
            new = self.topo.sentinel_primary()
            return new is not None and new is not old and new.role() == "master"
        return any(r.role() == "master" for r in reps)

    def f_migrate_slot(self, rng, dur, d):
        t = self.topo
        lock = rng.choice(self.locks)
        src, slot = self.lock_owner(lock)
        dsts = [n for n in t.primaries() if n is not src]
        if src is None or not dsts:
            d["skipped"] = "no owner or no other primary"
            return None
        dst = rng.choice(dsts)
        d.update(lock=lock, slot=slot, src=src.name, dst=dst.name)
        src_id, dst_id = src.call("CLUSTER", "MYID"), dst.call("CLUSTER", "MYID")
        dst.call("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.call("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        moved = 0
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                keys = src.call("CLUSTER", "GETKEYSINSLOT", slot, 2)
                if not keys:
                    break
                src.call("MIGRATE", dst.host.ip, REDIS_PORT, "", 0, 5000, "KEYS", *keys,
                         timeout=6)
                moved += len(keys)
                time.sleep(rng.uniform(0.0, 0.1))
        finally:
            # Finish the migration whatever broke a MIGRATE (a partition, a
            # paused node): move what is left, then SETSLOT NODE on dst
            # first, as redis-cli --cluster does, so no node is left with
            # the slot half open for the next schedule.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    keys = src.call("CLUSTER", "GETKEYSINSLOT", slot, 10)
                    if not keys:
                        break
                    src.call("MIGRATE", dst.host.ip, REDIS_PORT, "", 0, 5000, "KEYS", *keys,
                             timeout=6)
                    moved += len(keys)
                except (OSError, resp.RedisError):
                    time.sleep(0.2)
            for n in [dst] + [n for n in t.nodes if n is not dst]:
                try:
                    n.call("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
                except (OSError, resp.RedisError):
                    pass
        d["moved"] = moved
        return None
