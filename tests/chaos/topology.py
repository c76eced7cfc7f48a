"""topology: the real processes a chaos run attacks, and the handles the
nemesis needs to attack them.

What it owns: one Net (tests/chaos/netns.py: a bridge and one network
namespace per process, so that a partition between any two processes is
a real loss of packets), one temp dir with every process's config, data
and log, and the processes it started there: redis-server nodes (each
under its own libfaketime clock, so the nemesis can step it), sentinels,
two picketd and one fenced-kv. stop() kills only those pids.

The shapes (issue 25):
  single        one Redis (AOF on, appendfsync always, as deploy/redis.conf)
  single-noaof  one Redis with no persistence at all (a restart loses every
                key: the fence counters are then the clock floor's to cover)
  sentinel      a primary, two replicas, three sentinels (quorum 2)
  cluster       Redis Cluster: three primaries with a replica each
  etcd          three etcd members (picketd --etcd, issue 29); no clock:
                etcd is a Go program, which reads time from the vDSO and
                not through libc, so libfaketime cannot step it, and its
                fences (revisions) read no clock anyway
Every shape has two picketd in front (workers use both) and one fenced-kv,
the guarded resource, in the root namespace beside the workers (it is not
attacked: it is the judge's witness, and its own durability is tested
elsewhere).

picketd runs with its defaults (the point of the suite) plus the flags a
run adds (--picketd-flag, for the unsafe configurations and mutants).
The only non-default settings are the Redis-side timeouts that make
failovers take seconds rather than minutes on a test budget: sentinel
down-after-milliseconds 1000, cluster-node-timeout 1000, repl-timeout 3.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import netns
import resp

REDIS_PORT = 6379
SENTINEL_PORT = 26379
PICKETD_PORT = 7070
MASTER = "chaos"
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
SHAPES = ("single", "single-noaof", "sentinel", "cluster", "etcd")


def _die_with_parent():
    """preexec_fn: SIGKILL this child when the runner dies, so a crashed
    run leaves no process behind."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Proc:
    """One process of the topology: how to start it, and its signals.
    start() may be called again after kill(): the same argv, config and
    data dir, so a restarted Redis reads its own AOF."""

    def __init__(self, topo, name, host, argv, *, clock=None, kind):
        self.topo, self.name, self.host, self.argv = topo, name, host, argv
        self.clock, self.kind = clock, kind
        self.log = os.path.join(topo.dir, name + ".log")
        self.proc = None
        self.stopped = False          # SIGSTOPped by the nemesis

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        if self.running:
            return      # two faults may both restart it (a kill and a lossy failover)
        self.proc = self.topo.net.spawn(self.host, self.argv, log_path=self.log,
                                        cwd=self.topo.dir, clock=self.clock)
        self.stopped = False

    def signal(self, sig):
        if self.running:
            try:
                os.kill(self.proc.pid, sig)   # our own child, by its pid
            except ProcessLookupError:
                pass

    def pause(self):
        self.signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.stopped = False

    def kill(self):
        if self.running:
            self.signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.stopped = False

    def tail(self, n=20):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


class RedisNode(Proc):
    def __init__(self, topo, name, *, aof, cluster=False, replicaof=None):
        host = topo.net.host(name)
        d = os.path.join(topo.dir, name)
        os.makedirs(d)
        clock = netns.Clock(os.path.join(topo.dir, name + ".clock"))
        conf = os.path.join(d, "redis.conf")
        lines = [
            "port %d" % REDIS_PORT, "bind %s" % host.ip, "protected-mode no",
            "dir %s" % d, 'save ""', "maxmemory-policy noeviction",
            "appendonly %s" % ("yes" if aof else "no"), "appendfsync always",
            "repl-timeout 3", "repl-diskless-sync-delay 0",
            "busy-reply-threshold 1000",
            "logfile %s" % os.path.join(topo.dir, name + ".log"),
        ]
        if cluster:
            lines += ["cluster-enabled yes", "cluster-config-file nodes.conf",
                      "cluster-node-timeout 1000", "cluster-allow-replica-migration no",
                      "cluster-require-full-coverage no"]
        if replicaof:
            lines.append("replicaof %s %d" % (replicaof.host.ip, REDIS_PORT))
        lines += topo.redis_conf
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        super().__init__(topo, name, host, ["redis-server", conf], clock=clock, kind="redis")
        self.addr = "%s:%d" % (host.ip, REDIS_PORT)

    def call(self, *args, timeout=1.0):
        return resp.call(self.host.ip, REDIS_PORT, *args, timeout=timeout)

    def role(self):
        """'master', 'slave' or None when it does not answer."""
        try:
            return resp.info(self.host.ip, REDIS_PORT, "replication", timeout=0.5).get("role")
        except (OSError, resp.RedisError):
            return None

    def wait_up(self, timeout_s=15):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError("%s exited at start:\n%s" % (self.name, self.tail()))
            try:
                if self.call("PING", timeout=0.5) == "PONG":
                    return
            except (OSError, resp.RedisError):
                pass          # not listening yet, or LOADING its AOF
            time.sleep(0.05)
        raise RuntimeError("%s does not answer PING:\n%s" % (self.name, self.tail()))


class EtcdNode(Proc):
    """One etcd member. The test timings (50 ms heartbeats, 500 ms
    elections: the harness's, tests/harness/harness_etcd.c) make a leader
    change take about a second and etcd's minimum lease 1 s."""

    def __init__(self, topo, name, host, cluster):
        d = os.path.join(topo.dir, name)
        os.makedirs(d)
        argv = ["etcd", "--name", name, "--data-dir", d,
                "--listen-client-urls", "http://%s:%d" % (host.ip, ETCD_CLIENT_PORT),
                "--advertise-client-urls", "http://%s:%d" % (host.ip, ETCD_CLIENT_PORT),
                "--listen-peer-urls", "http://%s:%d" % (host.ip, ETCD_PEER_PORT),
                "--initial-advertise-peer-urls", "http://%s:%d" % (host.ip, ETCD_PEER_PORT),
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", "chaos", "--heartbeat-interval", "50",
                "--election-timeout", "500", "--log-level", "warn"]
        super().__init__(topo, name, host, argv, kind="etcd")
        self.addr = "%s:%d" % (host.ip, ETCD_CLIENT_PORT)
        self.url = "http://" + self.addr

    def status(self, timeout=0.5):
        """(member id, leader id) as this member sees them, or None."""
        try:
            req = urllib.request.Request(self.url + "/v3/maintenance/status", data=b"{}",
                                         method="POST")
            with urllib.request.urlopen(req, timeout=timeout) as r:
                j = json.loads(r.read())
            return j["header"]["member_id"], j.get("leader", "0")
        except Exception:
            return None

    def wait_up(self, timeout_s=15):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError("%s exited at start:\n%s" % (self.name, self.tail()))
            if self.status() is not None:
                return
            time.sleep(0.05)
        raise RuntimeError("%s does not answer:\n%s" % (self.name, self.tail()))


class Topology:
    def __init__(self, shape, *, bin_dir, picketd_flags=(), redis_conf=(), fencedkv_bin=None,
                 tag="chaos"):
        if shape not in SHAPES:
            raise ValueError("unknown topology %r (one of %s)" % (shape, ", ".join(SHAPES)))
        self.shape = shape
        self.bin_dir = bin_dir
        self.picketd_flags = list(picketd_flags)
        self.redis_conf = list(redis_conf)     # extra "key value" lines for every node
        self.fencedkv_bin = fencedkv_bin or os.path.join(bin_dir, "fenced-kv")
        self.dir = tempfile.mkdtemp(prefix="picket-%s-%s-" % (tag, shape))
        self.net = netns.Net(tag)
        self.nodes, self.sentinels, self.picketds = [], [], []
        self.fencedkv = None
        self.fencedkv_port = None

    # ---- start and stop ------------------------------------------------

    def start(self):
        try:
            self._start_redis()
            self._start_picketd()
            self._start_fencedkv()
            why = self.wait_ready(30)
            if why:
                raise RuntimeError("the %s topology is not ready after 30 s: %s" % (self.shape, why))
        except BaseException:
            self.stop()
            raise
        return self

    def _start_redis(self):
        if self.shape == "etcd":
            hosts = [self.net.host("e%d" % i) for i in range(1, 4)]
            cluster = ",".join("%s=http://%s:%d" % (h.name, h.ip, ETCD_PEER_PORT) for h in hosts)
            self.nodes = [EtcdNode(self, h.name, h, cluster) for h in hosts]
        elif self.shape in ("single", "single-noaof"):
            self.nodes.append(RedisNode(self, "r1", aof=self.shape == "single"))
        elif self.shape == "sentinel":
            p = RedisNode(self, "r1", aof=True)
            self.nodes = [p, RedisNode(self, "r2", aof=True, replicaof=p),
                          RedisNode(self, "r3", aof=True, replicaof=p)]
        else:
            self.nodes = [RedisNode(self, "c%d" % i, aof=True, cluster=True) for i in range(1, 7)]
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            n.wait_up()
        if self.shape == "sentinel":
            self._start_sentinels()
        if self.shape == "cluster":
            self._create_cluster()

    def _start_sentinels(self):
        primary = self.nodes[0]
        for i in range(1, 4):
            name = "s%d" % i
            host = self.net.host(name)
            d = os.path.join(self.dir, name)
            os.makedirs(d)
            conf = os.path.join(d, "sentinel.conf")
            with open(conf, "w") as f:
                f.write("\n".join([
                    "port %d" % SENTINEL_PORT, "bind %s" % host.ip, "protected-mode no",
                    "dir %s" % d, "logfile %s" % os.path.join(self.dir, name + ".log"),
                    "sentinel monitor %s %s %d 2" % (MASTER, primary.host.ip, REDIS_PORT),
                    "sentinel down-after-milliseconds %s 1000" % MASTER,
                    "sentinel failover-timeout %s 4000" % MASTER,
                    "sentinel parallel-syncs %s 2" % MASTER,
                ]) + "\n")
            s = Proc(self, name, host, ["redis-server", conf, "--sentinel"],
                     clock=netns.Clock(os.path.join(self.dir, name + ".clock")), kind="sentinel")
            s.start()
            self.sentinels.append(s)
        # Wait until every sentinel knows both replicas and its two peers:
        # a failover before then can stall on a sentinel that has not heard
        # of the replica it should promote.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(self._sentinel_sees_all(s) for s in self.sentinels):
                return
            time.sleep(0.2)
        raise RuntimeError("the sentinels did not discover the group in 30 s")

    def _sentinel_sees_all(self, s):
        try:
            reps = resp.call(s.host.ip, SENTINEL_PORT, "SENTINEL", "REPLICAS", MASTER, timeout=0.5)
            peers = resp.call(s.host.ip, SENTINEL_PORT, "SENTINEL", "SENTINELS", MASTER, timeout=0.5)
        except (OSError, resp.RedisError):
            return False
        return len(reps) == 2 and len(peers) == 2

    def _create_cluster(self):
        args = ["redis-cli", "--cluster", "create"] + [n.addr for n in self.nodes]
        args += ["--cluster-replicas", "1", "--cluster-yes"]
        r = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        with open(os.path.join(self.dir, "cluster-create.log"), "w") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            raise RuntimeError("redis-cli --cluster create failed:\n" + r.stdout[-1500:])
        self.wait_cluster_ok(30)

    def _start_picketd(self):
        if self.shape == "etcd":
            store = ["--etcd", ",".join(n.url for n in self.nodes)]
        elif self.shape in ("single", "single-noaof"):
            store = ["--redis", "redis://%s" % self.nodes[0].addr]
        elif self.shape == "sentinel":
            store = ["--sentinel", ",".join("%s:%d" % (s.host.ip, SENTINEL_PORT)
                                             for s in self.sentinels),
                     "--sentinel-master", MASTER]
        else:
            store = ["--redis-cluster", ",".join(n.addr for n in self.nodes[:3])]
        for name in ("pa", "pb"):
            host = self.net.host(name)
            argv = [os.path.join(self.bin_dir, "picketd"), "--listen",
                    "%s:%d" % (host.ip, PICKETD_PORT)] + store + self.picketd_flags
            p = Proc(self, name, host, argv, kind="picketd")
            p.start()
            self.picketds.append(p)

    def _start_fencedkv(self):
        pf = os.path.join(self.dir, "fenced-kv.port")
        argv = [self.fencedkv_bin, "--listen", "127.0.0.1:0", "--db",
                os.path.join(self.dir, "fenced-kv.db"), "--port-file", pf]
        log = open(os.path.join(self.dir, "fenced-kv.log"), "ab")
        self.fencedkv = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open(pf) as f:
                    self.fencedkv_port = int(f.read().strip())
                    return
            except (OSError, ValueError):
                time.sleep(0.05)
        raise RuntimeError("fenced-kv wrote no port file")

    def stop(self):
        for p in self.picketds + self.sentinels + self.nodes:
            try:
                p.kill()
            except Exception:
                pass
        if self.fencedkv and self.fencedkv.poll() is None:
            self.fencedkv.kill()
            self.fencedkv.wait(timeout=10)
        self.net.close()

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- what workers and the nemesis ask ------------------------------

    def picketd_addrs(self):
        return [(p.host.ip, PICKETD_PORT) for p in self.picketds]

    def all_hosts(self):
        return [p.host for p in self.nodes + self.sentinels + self.picketds]

    def primaries(self):
        if self.shape == "etcd":
            leader = self.etcd_leader()
            return [leader] if leader else []
        return [n for n in self.nodes if n.running and not n.stopped and n.role() == "master"]

    def etcd_leader(self):
        """The member that most running members name as leader, or None."""
        ids, votes = {}, {}
        for n in self.nodes:
            if not n.running or n.stopped:
                continue
            st = n.status()
            if st is None:
                continue
            ids[st[0]] = n
            if st[1] != "0":
                votes[st[1]] = votes.get(st[1], 0) + 1
        if not votes:
            return None
        lid, k = max(votes.items(), key=lambda kv: kv[1])
        return ids.get(lid) if k >= 2 else None

    def replicas_of(self, primary):
        out = []
        for n in self.nodes:
            if n is primary or not n.running or n.stopped:
                continue
            try:
                i = resp.info(n.host.ip, REDIS_PORT, "replication", timeout=0.5)
            except (OSError, resp.RedisError):
                continue
            if i.get("role") == "slave" and i.get("master_host") == primary.host.ip:
                out.append(n)
        return out

    def node_by_ip(self, ip):
        for n in self.nodes:
            if n.host.ip == ip:
                return n
        return None

    def sentinel_primary(self):
        """The primary most sentinels name, or None."""
        votes = {}
        for s in self.sentinels:
            if not s.running or s.stopped:
                continue
            try:
                a = resp.call(s.host.ip, SENTINEL_PORT, "SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                              MASTER, timeout=0.5)
            except (OSError, resp.RedisError):
                continue
            if a:
                votes[a[0]] = votes.get(a[0], 0) + 1
        if not votes:
            return None
        ip, n = max(votes.items(), key=lambda kv: kv[1])
        return self.node_by_ip(ip) if n >= 2 else None

    def cluster_ok(self):
        """Every node answers cluster_state:ok and every slot is covered."""
        for n in self.nodes:
            try:
                i = resp.call(n.host.ip, REDIS_PORT, "CLUSTER", "INFO", timeout=0.5)
            except (OSError, resp.RedisError):
                return False
            if "cluster_state:ok" not in i or "cluster_slots_ok:16384" not in i:
                return False
        return True

    def wait_cluster_ok(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.cluster_ok():
                return True
            time.sleep(0.2)
        return False

    def readyz(self, p, timeout=1.0):
        """None when picketd p's /readyz is 200, else what it said."""
        ip, port = p.host.ip, PICKETD_PORT
        try:
            with urllib.request.urlopen("http://%s:%d/readyz" % (ip, port), timeout=timeout) as r:
                return None if r.status == 200 else "%d" % r.status
        except urllib.error.HTTPError as e:
            return "%d %s" % (e.code, e.read(300).decode("utf-8", "replace"))
        except Exception as e:
            return str(e)

    def unhealthy(self):
        """None when the topology is whole again (every process running,
        one primary with all its replicas, the sentinels agreeing on it,
        the cluster ok, both picketd ready), else what is still wrong."""
        for p in self.nodes + self.sentinels + self.picketds:
            if not p.running or p.stopped:
                return "%s is not running" % p.name
        if self.shape == "sentinel":
            p = self.sentinel_primary()
            if p is None:
                return "the sentinels do not agree on a primary"
            if p.role() != "master":
                return "the sentinels name %s, which is not a primary" % p.name
            reps = self.replicas_of(p)
            if len(reps) != 2:
                return "%s has %d replicas online" % (p.name, len(reps))
        if self.shape == "etcd" and self.etcd_leader() is None:
            return "the etcd members do not agree on a leader"
        if self.shape == "cluster":
            if not self.cluster_ok():
                return "a cluster node is not ok or a slot is uncovered"
            ps = self.primaries()
            if len(ps) != 3:
                return "%d primaries" % len(ps)
            for p in ps:
                if len(self.replicas_of(p)) != 1:
                    return "%s has no replica online" % p.name
        for p in self.picketds:
            why = self.readyz(p)
            if why:
                return "%s is not ready: %s" % (p.name, why)
        return None

    def wait_ready(self, timeout_s):
        """None once healthy, else the last reason it was not."""
        deadline = time.monotonic() + timeout_s
        while True:
            why = self.unhealthy()
            if why is None or time.monotonic() >= deadline:
                return why
            time.sleep(0.1)

    def restore(self):
        """Undo every fault: heal the network, clocks back to true time,
        everything paused resumed, everything killed started again (a
        killed Redis from its own AOF, if it has one)."""
        self.net.heal()
        for p in self.nodes + self.sentinels:
            if p.clock is not None and p.clock.offset != 0:
                p.clock.set_offset(0)
        for p in self.nodes + self.sentinels + self.picketds:
            if p.stopped:
                p.resume()
        for p in self.nodes + self.sentinels + self.picketds:
            if not p.running:
                p.start()

    def describe(self):
        return json.dumps({
            "shape": self.shape, "dir": self.dir,
            "nodes": {n.name: n.addr for n in self.nodes},
            "sentinels": {s.name: s.host.ip for s in self.sentinels},
            "picketd": {p.name: "%s:%d" % (p.host.ip, PICKETD_PORT) for p in self.picketds},
            "fenced-kv": "127.0.0.1:%s" % self.fencedkv_port,
            "picketd_flags": self.picketd_flags, "redis_conf": self.redis_conf,
        }, sort_keys=True)
