#!/usr/bin/env python3
"""test_cli_elect_topologies: the `picket elect` fleet scenario of
client_elect (tests/integration/test_cli_elect.sh) on Redis Sentinel and
on Redis Cluster (issue 40: "the same holds on one Redis, Sentinel,
Cluster and etcd"; one Redis is client_elect, etcd client_elect_etcd).

Each topology gets one picketd with its defaults (so --min-replicas 1:
every grant waits for a replica) and a fresh fenced-kv, and
test_cli_elect.sh runs against them (PICKET_ELECT_SERVER, PICKET_ELECT_KV,
PICKET_ELECT_PICKETD_LOG): three `picket elect` candidates keep exactly
one job running, a resign (SIGTERM) hands over within 1 s, a SIGKILL
within the TTL + 1.5 s, fenced-kv refuses the deposed term, and the rest
of its sections (picket resign, a waiting candidate stopped).

  sentinel  a primary, one replica and three sentinels (quorum 2) on
            loopback, picketd --sentinel (down-after 10 s: this is no
            failover test, and a loaded machine must not cause one)
  cluster   three primaries with a replica each (tests/harness/
            redis_cluster.py), picketd --redis-cluster with one seed

Both are started before either scenario runs (the sentinel group settles
while the cluster is built), the scenarios run one after the other (their
hand-over bounds are timings), and every process started here is killed
by its pid at the end, or by PR_SET_PDEATHSIG if this script dies.
Prints each topology's measured hand-over figures and a summary.

Env: PICKET_BIN_DIR, PICKET_SOURCE_DIR, PICKET_TIME_SCALE; HARNESS_KEEP
keeps the temp dirs; PICKET_ELECT_TOPOLOGIES (default "sentinel cluster")
picks the topologies; PICKET_ELECT_PICKETD names another picketd binary to
put in front (a mutant of tests/chaos/mutants, to see the test fail).
"""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SRC = os.environ["PICKET_SOURCE_DIR"]
BIN = os.environ["PICKET_BIN_DIR"]
SCALE = max(1, int(os.environ.get("PICKET_TIME_SCALE", "1") or 1))
sys.path.insert(0, os.path.join(SRC, "tests", "harness"))
from redis_cluster import Cluster, RedisError, call  # noqa: E402

SCENARIO = os.path.join(SRC, "tests", "integration", "test_cli_elect.sh")
MASTER = "picket-elect"
PICKETD = os.environ.get("PICKET_ELECT_PICKETD") or os.path.join(BIN, "picketd")
_libc = ctypes.CDLL(None, use_errno=True)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tail(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no %s)\n" % path


class Procs:
    """The processes this script started, killed by their pids only."""

    def __init__(self):
        self.procs = []

    def spawn(self, argv, log, cwd=None):
        parent = os.getpid()

        def pre():
            _libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # PR_SET_PDEATHSIG
            if os.getppid() != parent:
                os._exit(126)
        with open(log, "ab") as out:
            p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, preexec_fn=pre)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print("pid %d did not die of SIGKILL" % p.pid, flush=True)


def wait_for(what, fn, timeout_s):
    deadline = time.monotonic() + timeout_s * SCALE
    why = None
    while time.monotonic() < deadline:
        try:
            why = fn()
        except (OSError, RedisError) as e:
            why = "%s: %s" % (type(e).__name__, e)
        if why is None:
            return
        time.sleep(0.05)
    raise RuntimeError("%s not ready in %d s: %s" % (what, timeout_s * SCALE, why))


def port_file(path, proc, what, timeout_s=20):
    def ready():
        if proc.poll() is not None:
            raise RuntimeError("%s exited at start (%d)" % (what, proc.returncode))
        try:
            with open(path) as f:
                int(f.read().strip())
            return None
        except (OSError, ValueError):
            return "no port file yet"
    wait_for(what, ready, timeout_s)
    with open(path) as f:
        return int(f.read().strip())


class Topology:
    """One store with a picketd and a fenced-kv in front, in its own dir."""

    def __init__(self, name, procs):
        self.name, self.procs = name, procs
        self.dir = tempfile.mkdtemp(prefix="picket-elect-%s-" % name, dir="/tmp")
        self.picketd = self.picketd_port = self.kv_port = None
        self.logs = []

    def start_front(self, store_flags):
        log = os.path.join(self.dir, "picketd.log")
        pf = os.path.join(self.dir, "picketd.port")
        self.picketd = self.procs.spawn([PICKETD, "--listen", "127.0.0.1:0",
                                         "--port-file", pf] + store_flags, log)
        self.picketd_log = log
        self.logs.append(log)
        kvlog = os.path.join(self.dir, "fenced-kv.log")
        kpf = os.path.join(self.dir, "fenced-kv.port")
        kv = self.procs.spawn([os.path.join(BIN, "fenced-kv"), "--listen", "127.0.0.1:0",
                               "--db", os.path.join(self.dir, "kv.db"), "--port-file", kpf], kvlog)
        self.logs.append(kvlog)
        self.picketd_port = port_file(pf, self.picketd, "%s picketd" % self.name)
        self.kv_port = port_file(kpf, kv, "%s fenced-kv" % self.name)

    def readyz(self):
        url = "http://127.0.0.1:%d/readyz" % self.picketd_port
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                return None if r.status == 200 else "readyz %d" % r.status
        except urllib.error.HTTPError as e:
            return "readyz %d %s" % (e.code, e.read(300).decode("utf-8", "replace"))

    def wait_ready(self):
        if self.picketd.poll() is not None:
            raise RuntimeError("%s picketd exited (%d)" % (self.name, self.picketd.returncode))
        wait_for("%s picketd" % self.name, self.readyz, 30)

    def remove(self):
        if os.environ.get("HARNESS_KEEP"):
            print("kept %s (HARNESS_KEEP)" % self.dir, flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


class SentinelGroup(Topology):
    """A primary, a replica and three sentinels (quorum 2) on loopback."""

    def spawn(self):
        ports = free_ports(5)
        self.redis_ports, self.sentinel_ports = ports[:2], ports[2:]
        for i, port in enumerate(self.redis_ports):
            d = os.path.join(self.dir, "r%d" % port)
            os.mkdir(d)
            conf = os.path.join(d, "redis.conf")
            lines = ["port %d" % port, "bind 127.0.0.1", "dir %s" % d, 'save ""',
                     "appendonly no", "maxmemory-policy noeviction",
                     "repl-diskless-sync-delay 0", "logfile %s" % os.path.join(d, "redis.log")]
            if i:
                lines.append("replicaof 127.0.0.1 %d" % self.redis_ports[0])
            with open(conf, "w") as f:
                f.write("\n".join(lines) + "\n")
            self.procs.spawn(["redis-server", conf], os.path.join(d, "stdout.log"), cwd=d)
            self.logs.append(os.path.join(d, "redis.log"))
        for port in self.sentinel_ports:
            d = os.path.join(self.dir, "s%d" % port)
            os.mkdir(d)
            conf = os.path.join(d, "sentinel.conf")
            with open(conf, "w") as f:
                f.write("\n".join([
                    "port %d" % port, "bind 127.0.0.1", "dir %s" % d,
                    "logfile %s" % os.path.join(d, "sentinel.log"),
                    "sentinel monitor %s 127.0.0.1 %d 2" % (MASTER, self.redis_ports[0]),
                    "sentinel down-after-milliseconds %s 10000" % MASTER,
                ]) + "\n")
            self.procs.spawn(["redis-server", conf, "--sentinel"],
                             os.path.join(d, "stdout.log"), cwd=d)
            self.logs.append(os.path.join(d, "sentinel.log"))

    def start_picketd(self):
        wait_for("sentinel", lambda: None if all(self._names_primary(p)
                                                 for p in self.sentinel_ports)
                 else "a sentinel does not name the primary", 20)
        self.start_front(["--sentinel", ",".join("127.0.0.1:%d" % p for p in self.sentinel_ports),
                          "--sentinel-master", MASTER])

    def _names_primary(self, port):
        a = call(port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER, timeout=0.5)
        return bool(a) and int(a[1]) == self.redis_ports[0]

    def unready(self):
        i = call(self.redis_ports[1], "INFO", "replication", timeout=0.5)
        if "master_link_status:up" not in i:
            return "the replica's link is not up"
        return self.readyz()

    def wait_ready(self):
        wait_for("sentinel group", self.unready, 30)


class ClusterTopo(Topology):
    def spawn(self):
        self.cluster = Cluster(primaries=3, replicas=1, tag="elect-cluster")

    def start_picketd(self):
        self.cluster.start()          # blocks until stable (every replica linked)
        self.logs += [n.log for n in self.cluster.nodes]
        self.start_front(["--redis-cluster", self.cluster.seeds().split(",")[0]])

    cluster = None

    def stop(self):
        if self.cluster is not None:
            self.cluster.stop()


def run_scenario(t):
    env = dict(os.environ, PICKET_ELECT_SERVER="http://127.0.0.1:%d" % t.picketd_port,
               PICKET_ELECT_KV="http://127.0.0.1:%d" % t.kv_port,
               PICKET_ELECT_PICKETD_LOG=t.picketd_log, PICKET_ELECT_TAG="%s: " % t.name)
    env.pop("PICKET_SERVER", None)
    t0 = time.monotonic()
    # SIGTERM if this script dies: the scenario's EXIT trap then ends its candidates and jobs.
    p = subprocess.Popen(["bash", SCENARIO], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: _libc.prctl(1, signal.SIGTERM, 0, 0, 0))
    figures = []
    for line in p.stdout:
        print(line, end="", flush=True)
        if re.match(r"%s: (resign|SIGKILL|fenced-kv)" % t.name, line):
            figures.append(line.strip())
    rc = p.wait()
    return rc, time.monotonic() - t0, figures


def main():
    names = os.environ.get("PICKET_ELECT_TOPOLOGIES", "sentinel cluster").split()
    kinds = {"sentinel": SentinelGroup, "cluster": ClusterTopo}
    procs = Procs()
    topos = [kinds[n](n, procs) for n in names]
    failed, summary = [], []
    t_start = time.monotonic()
    try:
        for t in topos:       # the sentinel group's processes settle while the cluster is built
            t.spawn()
        for t in topos:
            t.start_picketd()
        for t in topos:
            t.wait_ready()
        print("topologies ready in %.1f s" % (time.monotonic() - t_start), flush=True)
        for t in topos:
            rc, took, figures = run_scenario(t)
            summary.append("%s: %s in %.1f s; %s" % (t.name, "ok" if rc == 0 else "FAIL (exit %d)" % rc,
                                                     took, "; ".join(figures) or "no figures"))
            if rc != 0:
                failed.append(t.name)
                for log in t.logs:
                    print("--- %s\n%s" % (log, tail(log)), end="", flush=True)
        for t in topos:
            if t.picketd.poll() is not None:
                failed.append(t.name)
                summary.append("%s: picketd exited (%d)" % (t.name, t.picketd.returncode))
            text = open(t.picketd_log, errors="replace").read()
            if "AddressSanitizer" in text or "runtime error" in text:
                failed.append(t.name)
                summary.append("%s: a sanitizer report in picketd's log" % t.name)
    finally:
        procs.stop()
        for t in topos:
            if isinstance(t, ClusterTopo):
                t.stop()
            t.remove()
    print("\n".join(["summary (%.1f s in all):" % (time.monotonic() - t_start)] + summary),
          flush=True)
    if failed:
        print("FAIL: the fleet scenario failed on %s" % ", ".join(sorted(set(failed))), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
