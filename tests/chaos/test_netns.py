"""Tests of tests/chaos/netns.py with real processes: Redis under a stepped
libfaketime clock, Sentinel under one, a replica cut from its primary by a
real partition, a host isolated from the root namespace, signals reaching
the real program, and cleanup (after close() and after a SIGKILLed run).

Run:  python3 tests/chaos/test_netns.py      (root; ~25 s)
Exits non-zero on failure; skips (exit 0) only when not root or when
`ip netns` does not work.  Every process it starts is its own, killed by
its pid; every namespace/bridge it makes is removed (checked).  Traffic goes
only to loopback and to the private /24 that netns.Net made for the run.
"""

import faulthandler
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns  # noqa: E402

REDIS_PORT = 6379
SENTINEL_PORT = 26379
MEASURED = {}          # what the run measured, printed at the end


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, nft)"
    if not shutil.which("ip"):
        return "`ip` (iproute2) not installed"
    probe = "%s%dprobe" % (netns.PREFIX, os.getpid())
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return "`ip netns` unavailable: " + r.stderr.strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


SKIP = skip_reason()


class Redis:
    """A minimal RESP client on a raw socket: after a timeout the same
    connection can still be read (a stalled reply may arrive later)."""

    def __init__(self, ip, port, timeout=1.0):
        self.s = socket.create_connection((ip, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.s.close()

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def call(self, *args):
        self.send(*args)
        return self.read()

    def info(self, section):
        return dict(l.split(":", 1) for l in self.call("INFO", section).splitlines()
                    if ":" in l and not l.startswith("#"))


def ping(ip, port):
    c = Redis(ip, port)
    try:
        return c.call("PING") == "PONG"
    finally:
        c.close()


def wait_until(what, fn, timeout, interval=0.01):
    """Poll fn until truthy; the seconds it took.  AssertionError on timeout."""
    t0 = time.monotonic()
    last = None
    while True:
        try:
            v = fn()
            if v:
                return time.monotonic() - t0
            last = v
        except (OSError, RuntimeError, ConnectionError) as e:
            last = e
        if time.monotonic() - t0 > timeout:
            raise AssertionError("%s: not within %.1fs (last: %r)" % (what, timeout, last))
        time.sleep(interval)


def connect_outcome(ip, port, timeout=1.0):
    """'connected', 'timeout' (the SYN vanished) or 'refused' (an RST)."""
    try:
        socket.create_connection((ip, port), timeout=timeout).close()
        return "connected"
    except socket.timeout:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"


# Runs in an isolated host: connects to the root ns, sends once isolated,
# waits for the answer.  A real partition must not break its connection.
TALKER = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
print("connected", flush=True)
time.sleep(float(sys.argv[3]))
s.sendall(b"hello from the isolated host")
t = time.monotonic()
try:
    s.settimeout(40)
    print("answer %r after %.1fs" % (s.recv(100), time.monotonic() - t), flush=True)
except OSError as e:
    print("error %r after %.1fs" % (e, time.monotonic() - t), flush=True)
"""

PROBE = r"""
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
    print("connected")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error", e)
"""


@unittest.skipIf(SKIP, SKIP)
class NetnsTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="picket-netns-test-")
        self.net = netns.Net("test")
        self.procs = []

    def tearDown(self):
        for p in self.procs:          # our own children, by their Popen
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
            p.wait(timeout=10)
        self.net.close()
        self.assertEqual(self.net.leftovers(), [])
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- helpers --------------------------------------------------------

    def start_redis(self, host, name, *extra, clock=None):
        d = os.path.join(self.dir, name)
        os.makedirs(d, exist_ok=True)
        argv = ["redis-server", "--port", REDIS_PORT, "--bind", host.ip, "--save", "",
                "--appendonly", "no", "--dir", d, "--protected-mode", "no"] + list(extra)
        t0 = time.monotonic()
        p = self.net.spawn(host, argv, log_path=os.path.join(self.dir, name + ".log"),
                           cwd=d, clock=clock)
        self.procs.append(p)
        wait_until("%s answers PING" % name,
                   lambda: p.poll() is None and ping(host.ip, REDIS_PORT),
                   timeout=5)
        return p, time.monotonic() - t0

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
            return f.read()

    # ---- clocks ---------------------------------------------------------

    def test_redis_follows_stepped_clock(self):
        h = self.net.host("r")
        clock = netns.Clock(os.path.join(self.dir, "r.clock"))
        p, startup = self.start_redis(h, "r", clock=clock)
        MEASURED["redis startup under faketime (s)"] = round(startup, 3)
        self.assertLess(startup, 3, "redis-server under libfaketime must not hang")
        # (not /proc/pid/environ: redis-server overwrites it with its title)
        with open("/proc/%d/maps" % p.pid) as f:
            maps = f.read()
        self.assertIn("libfaketime.so.1", maps)
        self.assertIn("libc_malloc_debug.so.0", maps)
        c = Redis(h.ip, REDIS_PORT)

        def skew():
            t0 = time.time()
            sec, usec = c.call("TIME")
            t1 = time.time()
            return int(sec) + int(usec) / 1e6 - (t0 + t1) / 2

        wait_until("TIME at offset 0", lambda: abs(skew()) < 0.05, timeout=2)
        for off in (60, -120, 0):
            t_set = time.monotonic()
            clock.set_offset(off)
            self.assertEqual(clock.offset, off)
            # FAKETIME_NO_CACHE: the very first request after the rename sees it
            self.assertLess(abs(skew() - off), 0.05, "first TIME after set_offset(%+d)" % off)
            seen = time.monotonic() - t_set
            MEASURED["TIME follows set_offset(%+d) after (ms)" % off] = round(seen * 1000, 1)
            self.assertLess(seen, 0.1)
            MEASURED["TIME - (real+offset) at %+d (ms)" % off] = round((skew() - off) * 1000, 1)
        # sub-second offsets
        clock.set_offset(2.5)
        wait_until("TIME at offset +2.5", lambda: abs(skew() - 2.5) < 0.05, timeout=1)
        clock.set_offset(0)

        # expiry follows the stepped wall clock
        self.assertEqual(c.call("SET", "k", "v", "PX", 100000), "OK")
        self.assertGreater(c.call("PTTL", "k"), 99000)
        clock.set_offset(-120)
        pttl = c.call("PTTL", "k")
        MEASURED["PTTL of a PX 100000 key after a -120 s step (ms)"] = pttl
        self.assertGreater(pttl, 215000)
        clock.set_offset(200)
        self.assertIsNone(c.call("GET", "k"), "key must expire after a +200 s step")
        self.assertEqual(c.call("EXISTS", "k"), 0)
        clock.set_offset(0)
        self.assertIsNone(c.call("GET", "k"))
        c.close()

    def test_sentinel_follows_stepped_clock(self):
        h = self.net.host("s")
        conf = os.path.join(self.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write("port %d\nbind %s\nprotected-mode no\ndir %s\n"
                    % (SENTINEL_PORT, h.ip, self.dir))
        clock = netns.Clock(os.path.join(self.dir, "s.clock"))
        t0 = time.monotonic()
        p = self.net.spawn(h, ["redis-server", conf, "--sentinel"],
                           log_path=os.path.join(self.dir, "s.log"), clock=clock)
        self.procs.append(p)
        wait_until("sentinel answers PING",
                   lambda: ping(h.ip, SENTINEL_PORT), timeout=5)
        MEASURED["sentinel startup under faketime (s)"] = round(time.monotonic() - t0, 3)
        c = Redis(h.ip, SENTINEL_PORT)

        def skew():
            return int(c.info("server")["server_time_usec"]) / 1e6 - time.time()

        wait_until("sentinel time at 0", lambda: abs(skew()) < 0.05, timeout=2)
        self.assertEqual(c.info("sentinel")["sentinel_tilt"], "0")
        t_set = time.monotonic()
        clock.set_offset(60)
        wait_until("sentinel time at +60", lambda: abs(skew() - 60) < 0.05, timeout=1,
                   interval=0.002)
        MEASURED["sentinel time follows +60 after (ms)"] = round((time.monotonic() - t_set) * 1000, 1)
        wait_until("sentinel enters TILT", lambda: c.info("sentinel")["sentinel_tilt"] == "1",
                   timeout=3)
        MEASURED["sentinel TILT after a +60 s step (ms)"] = round((time.monotonic() - t_set) * 1000)
        self.assertIn("+tilt", self.log("s"))
        clock.set_offset(-30)
        wait_until("sentinel time at -30", lambda: abs(skew() + 30) < 0.05, timeout=1)
        clock.set_offset(0)
        wait_until("sentinel time back at 0", lambda: abs(skew()) < 0.05, timeout=1)
        c.close()

    # ---- network faults ---------------------------------------------------

    def probe(self, src, dst, port=REDIS_PORT, timeout=1.0):
        """Start a connect() probe from inside host src to dst."""
        return subprocess.Popen(["nsenter", "--net=/run/netns/" + src.ns, "--",
                                 sys.executable, "-c", PROBE, dst.ip, str(port), str(timeout)],
                                stdout=subprocess.PIPE, text=True)

    def test_partition_and_isolate(self):
        A, B = self.net.host("a"), self.net.host("b")
        fast = ["--repl-timeout", "2", "--repl-ping-replica-period", "1"]
        self.start_redis(A, "a", *fast)
        self.start_redis(B, "b", *fast, "--replicaof", A.ip, REDIS_PORT)
        ca, cb = Redis(A.ip, REDIS_PORT), Redis(B.ip, REDIS_PORT)
        wait_until("replica link up", lambda: cb.info("replication")["master_link_status"] == "up",
                   timeout=10)
        ca.call("SET", "k1", "v1")
        wait_until("k1 replicated", lambda: cb.call("GET", "k1") == "v1", timeout=3)

        # -- partition A | B: replication stalls, the root ns still reaches both
        t_part = time.monotonic()
        self.net.partition([A], [B])
        MEASURED["partition() call (ms)"] = round((time.monotonic() - t_part) * 1000, 1)
        probes = [self.probe(B, A), self.probe(A, B)]
        ca.call("SET", "k2", "v2")
        self.assertEqual(ca.call("PING"), "PONG")
        self.assertEqual(connect_outcome(A.ip, REDIS_PORT), "connected")
        self.assertEqual(connect_outcome(B.ip, REDIS_PORT), "connected")
        outs = [p.communicate(timeout=10)[0].strip() for p in probes]
        self.assertEqual(outs, ["timeout", "timeout"], "new connects across the partition must hang")
        wait_until("replica link down",
                   lambda: cb.info("replication")["master_link_status"] == "down",
                   timeout=10, interval=0.05)
        # from the partition, not from the wait's start: the probes above
        # already took up to a second of it
        down = time.monotonic() - t_part
        MEASURED["replica master_link_status down after partition, repl-timeout 2 (s)"] = \
            round(down, 2)
        self.assertGreater(down, 1.0, "the link must survive until repl-timeout, not break at once")
        self.assertIsNone(cb.call("GET", "k2"), "a write on A must not reach B")
        time.sleep(0.5)
        self.assertIsNone(cb.call("GET", "k2"))

        # -- heal: the replica catches up
        t_heal = time.monotonic()
        self.net.heal()
        wait_until("k2 replicated after heal", lambda: cb.call("GET", "k2") == "v2",
                   timeout=15, interval=0.05)
        MEASURED["write reaches replica after heal (s)"] = round(time.monotonic() - t_heal, 2)
        self.assertEqual(cb.info("replication")["master_link_status"], "up")

        # -- isolate A: the root ns loses it (connect hangs, established stalls)
        lsn = socket.socket()
        lsn.bind((self.net.ip, 0))       # the bridge address: the root ns
        lsn.listen(1)
        lsn.settimeout(5)
        talker_log = os.path.join(self.dir, "talker.log")
        talker = self.net.spawn(A, [sys.executable, "-c", TALKER, self.net.ip,
                                    lsn.getsockname()[1], 1.5], log_path=talker_log)
        self.procs.append(talker)
        peer, _ = lsn.accept()
        t_iso = time.monotonic()
        self.net.isolate(A)
        self.assertIn("iso_" + A.veth, self.net.rules())
        self.assertEqual(connect_outcome(A.ip, REDIS_PORT), "timeout",
                         "connect to an isolated host must hang, not be refused")
        ca.send("PING")
        with self.assertRaises(socket.timeout):
            ca.read()
        self.assertEqual(cb.call("PING"), "PONG", "isolate(A) must not cut the root ns from B")
        p = self.probe(B, A)
        self.assertEqual(p.communicate(timeout=10)[0].strip(), "timeout")
        # A's own connection to the root ns, with data queued since 1.5 s
        # into the isolation, must survive a long one: a drop A's stack
        # notices as local aborts it ~8 s after that send (tcp_retries2
        # probes), a real partition does not.
        peer.settimeout(0.2)
        with self.assertRaises(socket.timeout):
            peer.recv(100)
        time.sleep(max(0.0, 10.5 - (time.monotonic() - t_iso)))
        MEASURED["isolation lasted (s)"] = round(time.monotonic() - t_iso, 2)
        t_heal = time.monotonic()
        self.net.heal()
        self.assertEqual(self.net.rules().strip(), "", "heal removes the root-ns table")
        self.assertEqual(connect_outcome(A.ip, REDIS_PORT), "connected")
        MEASURED["new connect after heal of isolate (ms)"] = round((time.monotonic() - t_heal) * 1000, 1)
        ca.s.settimeout(15)
        self.assertEqual(ca.read(), "PONG", "the stalled request completes after heal")
        MEASURED["stalled PING answered after heal (s)"] = round(time.monotonic() - t_heal, 2)
        peer.settimeout(15)
        self.assertEqual(peer.recv(100), b"hello from the isolated host")
        MEASURED["isolated host's queued data arrives after heal (s)"] = \
            round(time.monotonic() - t_heal, 2)
        peer.sendall(b"ok")
        talker.wait(timeout=10)
        with open(talker_log) as f:
            out = f.read()
        self.assertIn("answer b'ok'", out, out)
        peer.close()
        lsn.close()
        ca.close()
        cb.close()

    # ---- processes ----------------------------------------------------------

    def test_signals_reach_the_program(self):
        h = self.net.host("p")
        clock = netns.Clock(os.path.join(self.dir, "p.clock"))
        got = []
        # spawn from a thread that then ends: PR_SET_PDEATHSIG must not fire
        th = threading.Thread(target=lambda: got.append(self.start_redis(h, "p", clock=clock)[0]))
        th.start()
        th.join(10)
        self.assertEqual(len(got), 1)
        p = got[0]
        time.sleep(0.3)
        self.assertIsNone(p.poll(), "must survive the exit of the thread that spawned it")
        self.assertEqual(os.path.realpath("/proc/%d/exe" % p.pid),
                         os.path.realpath(shutil.which("redis-server")))
        self.assertEqual(os.stat("/proc/%d/ns/net" % p.pid).st_ino,
                         os.stat("/run/netns/" + h.ns).st_ino)

        def state():
            with open("/proc/%d/stat" % p.pid) as f:
                s = f.read()
            return s[s.rfind(")") + 2]

        c = Redis(h.ip, REDIS_PORT)
        os.kill(p.pid, signal.SIGSTOP)
        wait_until("stopped", lambda: state() == "T", timeout=2)
        c.send("PING")
        with self.assertRaises(socket.timeout):
            c.read()
        os.kill(p.pid, signal.SIGCONT)
        c.s.settimeout(2)
        self.assertEqual(c.read(), "PONG")
        self.assertEqual(c.call("PING"), "PONG")
        os.kill(p.pid, signal.SIGKILL)
        self.assertEqual(p.wait(timeout=5), -signal.SIGKILL)
        self.assertEqual(connect_outcome(h.ip, REDIS_PORT), "refused")
        c.close()
        # SIGKILL leaves libfaketime's per-pid shm behind; close() removes it
        self.net.close()
        self.assertFalse(os.path.exists("/dev/shm/faketime_shm_%d" % p.pid))
        self.assertFalse(os.path.exists("/dev/shm/sem.faketime_sem_%d" % p.pid))

    # ---- cleanup ------------------------------------------------------------

    def names_of(self, net_id):
        own = re.compile(re.escape(net_id) + r"(?!\d)")
        ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        tables = subprocess.run(["nft", "list", "tables", "netdev"], capture_output=True,
                                text=True).stdout
        return ([l.split()[0] for l in ns.splitlines() if own.match(l)] +
                [l.split(":")[1].strip().split("@")[0] for l in links.splitlines()
                 if own.match(l.split(":")[1].strip())] +
                ["nft:" + l.split()[2] for l in tables.splitlines()
                 if len(l.split()) == 3 and own.match(l.split()[2])])

    def test_cleanup_after_close(self):
        net = netns.Net("close")
        a, b = net.host("a"), net.host("b")
        net.partition([a], [b])
        net.isolate(a)
        self.assertIn("nft:" + net.id, self.names_of(net.id))
        t0 = time.monotonic()
        net.close()
        MEASURED["close() of a 2-host net (ms)"] = round((time.monotonic() - t0) * 1000, 1)
        self.assertEqual(self.names_of(net.id), [])
        self.assertNotIn(net.ip, subprocess.run(["ip", "-4", "addr"], capture_output=True,
                                                text=True).stdout)
        net.close()                  # idempotent
        net.heal()                   # harmless after close

    def test_cleanup_stale_after_sigkill(self):
        # The crashing run uses its own prefix "pkd": every Net() of a
        # concurrent run (other engineers' suites) sweeps dead "pkc" runs,
        # and could tidy this one up before we look at what it left.
        child = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import netns
n = netns.Net("crash", prefix="pkd")
a, b = n.host("a"), n.host("b")
n.partition([a], [b])
n.isolate(b)
c = netns.Clock(os.path.join(sys.argv[2], "crash.clock"))
p = n.spawn(a, ["sleep", "300"], log_path=os.path.join(sys.argv[2], "crash.log"), clock=c)
print(json.dumps({"id": n.id, "pid": p.pid}), flush=True)
time.sleep(300)
"""
        runner = subprocess.Popen([sys.executable, "-c", child, HERE, self.dir],
                                  stdout=subprocess.PIPE, text=True)
        self.procs.append(runner)
        r, _, _ = select.select([runner.stdout], [], [], 15)
        self.assertTrue(r, "the crashing runner did not start")
        info = json.loads(runner.stdout.readline())
        sleeper = info["pid"]
        # the spawned program is the real one, under libfaketime
        wait_until("sleep exec'd", lambda: os.path.realpath("/proc/%d/exe" % sleeper).endswith("/sleep"),
                   timeout=3)
        wait_until("faketime shm", lambda: os.path.exists("/dev/shm/faketime_shm_%d" % sleeper),
                   timeout=3)
        runner.kill()                # SIGKILL: no atexit, no close()
        runner.wait(timeout=5)
        runner.stdout.close()
        wait_until("spawned program dies with its runner (PDEATHSIG)",
                   lambda: not netns._pid_alive(sleeper), timeout=3)
        left = self.names_of(info["id"])
        self.assertTrue(any(n.endswith("-a") for n in left) and info["id"] in left
                        and "nft:" + info["id"] in left, left)
        removed = netns.cleanup_stale("pkd")
        self.assertEqual(self.names_of(info["id"]), [], removed)
        self.assertFalse(os.path.exists("/dev/shm/faketime_shm_%d" % sleeper))
        # our own live net is untouched by cleanup_stale
        self.assertTrue(self.names_of(self.net.id))


def main():
    if SKIP:
        print("SKIP tests/chaos/test_netns.py: " + SKIP)
        return 0
    # A hung kernel call or process must not hang CI: dump and exit (pdeathsig
    # then kills our programs; the next run's cleanup_stale removes the rest).
    faulthandler.dump_traceback_later(150, exit=True)
    t0 = time.monotonic()
    prog = unittest.main(exit=False, verbosity=2)
    print("\nmeasured:")
    for k, v in MEASURED.items():
        print("  %-66s %s" % (k, v))
    print("  %-66s %.1f" % ("whole test (s)", time.monotonic() - t0))
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
