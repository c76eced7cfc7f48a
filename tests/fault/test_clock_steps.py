#!/usr/bin/env python3
"""test_clock_steps: a Redis clock that steps must not keep a lock taken
for the length of the step (issue 25, found by the chaos suite).

Redis keeps a key's expiry as an absolute time on its own wall clock, and
replicates it as one. So:
  - a primary whose clock steps back by S after a grant keeps that lease
    S longer than its TTL;
  - a replica whose clock is S behind its primary's, once promoted, keeps
    every lease written by the old primary S longer.
Before the fix a lock stayed taken (409 lock_held, retry_after_ms ~ S) for
the whole step, here 60 s. acquire.lua now cuts a live grant's remaining
time back to the TTL it was granted or renewed with (kept in the hash as
`ttl`), which is still at least as long as its holder may believe in it.

Cases, each on fresh redis-servers under libfaketime (tests/chaos/netns.py's
Clock: glibc's malloc-debug library ahead of libfaketime, the wall clock
stepped at run time through a timestamp file) and a real picketd:
  step_back        the primary's clock steps back 60 s while A holds a 2 s
                   lease: B's 409 says at most 2 s, B's blocking acquire is
                   granted within a few seconds, with a higher fence;
  renewed_ttl      A renews to 10 s first: B's 409 says more than 2 s and at
                   most 10 s (the cut never goes below the holder's TTL);
  replica_behind   the primary's clock is 60 s ahead; A is granted there, the
                   replica (true clock) is promoted: B, through a picketd on
                   it, is granted within a few seconds, with a higher fence.
Env: PICKET_BIN_DIR (picketd), PICKET_SOURCE_DIR, PICKET_TIME_SCALE.
"""

import ctypes
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("PICKET_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "chaos"))
from netns import Clock  # noqa: E402

BIN = os.environ.get("PICKET_BIN_DIR", os.path.join(SRC, "build", "bin"))
SCALE = float(os.environ.get("PICKET_TIME_SCALE", "1") or 1)
failures = 0


def check(ok, what):
    global failures
    print("%s: %s" % ("ok" if ok else "FAIL", what), flush=True)
    if not ok:
        failures += 1


def pdeathsig():
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class World:
    """Temp dir, and every process this test starts (killed by pid)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="picket-clock-")
        self.procs = []

    def spawn(self, argv, name, env=None):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             env=dict(os.environ, **(env or {})), preexec_fn=pdeathsig)
        log.close()
        self.procs.append(p)
        return p

    def redis(self, name, replicaof=None):
        port = free_port()
        d = os.path.join(self.dir, name)
        os.mkdir(d)
        clock = Clock(os.path.join(self.dir, name + ".clock"))
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"]
        if replicaof:
            argv += ["--replicaof", "127.0.0.1", str(replicaof)]
        self.spawn(argv, name, clock.env())
        deadline = time.monotonic() + 10 * SCALE
        while time.monotonic() < deadline:
            try:
                if redis(port, "PING") == "+PONG":
                    return port, clock
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("%s does not answer" % name)

    def picketd(self, name, redis_port):
        pf = os.path.join(self.dir, name + ".port")
        self.spawn([os.path.join(BIN, "picketd"), "--listen", "127.0.0.1:0", "--port-file", pf,
                    "--redis", "redis://127.0.0.1:%d" % redis_port], name)
        deadline = time.monotonic() + 10 * SCALE
        while time.monotonic() < deadline:
            try:
                port = int(open(pf).read())
                if get(port, "/readyz")[0] == 200:
                    return port
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError("%s is not ready" % name)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def redis(port, *args):
    """One inline command, its first reply line (enough for PING, SET, REPLICAOF)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall((" ".join(args) + "\r\n").encode())
        return s.makefile("rb").readline().decode().strip()


def info(port):
    r = subprocess.run(["redis-cli", "-p", str(port), "INFO", "replication"],
                       capture_output=True, text=True, timeout=5)
    return r.stdout


def post(port, path, body, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    doc = json.loads(r.read() or b"null")
    c.close()
    return r.status, doc


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, None


def acquire(port, name, ttl_ms, wait_ms=0):
    return post(port, "/v1/locks/%s/acquire" % name, {"ttl_ms": ttl_ms, "wait_ms": wait_ms},
                timeout=wait_ms / 1000 + 10)


def blocked_then_granted(port, name, a, bound_ms, what):
    """B's 409 names at most bound_ms; B's blocking acquire is granted
    within a few times that, with a fence above A's."""
    st, doc = acquire(port, name, 2000)
    retry = doc["error"].get("retry_after_ms") if st == 409 else None
    check(st == 409 and retry is not None and retry <= bound_ms,
          "%s: B is refused with retry_after_ms %s (at most %d)" % (what, retry, bound_ms))
    t0 = time.monotonic()
    st, b = acquire(port, name, 2000, wait_ms=int(3 * bound_ms * SCALE) + 2000)
    took = (time.monotonic() - t0) * 1000
    check(st == 200 and b["fence"] > a["fence"],
          "%s: B is granted after %.0f ms with fence %s > %s" % (
              what, took, b.get("fence") if st == 200 else b, a["fence"]))
    return retry


def case_step_back(w):
    port, clock = w.redis("r-step")
    p = w.picketd("p-step", port)
    st, a = acquire(p, "clk", 2000)
    check(st == 200, "step_back: A granted")
    clock.set_offset(-60)
    blocked_then_granted(p, "clk", a, 2000, "step_back")


def case_renewed_ttl(w):
    port, clock = w.redis("r-renew")
    p = w.picketd("p-renew", port)
    st, a = acquire(p, "clk", 2000)
    st2, _ = post(p, "/v1/locks/clk/renew", {"lease": a["lease"], "ttl_ms": 10000})
    check(st == 200 and st2 == 200, "renewed_ttl: A granted and renewed to 10 s")
    clock.set_offset(-60)
    st, doc = acquire(p, "clk", 2000)
    retry = doc["error"].get("retry_after_ms") if st == 409 else None
    check(st == 409 and retry is not None and 2000 < retry <= 10000,
          "renewed_ttl: B's retry_after_ms %s is A's renewed TTL, not its first one" % retry)


def case_replica_behind(w):
    rp, rclock = w.redis("r-ahead")
    rclock.set_offset(60)
    rr, _ = w.redis("r-behind", replicaof=rp)
    deadline = time.monotonic() + 10 * SCALE
    while time.monotonic() < deadline and "master_link_status:up" not in info(rr):
        time.sleep(0.05)
    check("master_link_status:up" in info(rr), "replica_behind: the replica is in sync")
    p = w.picketd("p-ahead", rp)
    st, a = acquire(p, "clk", 2000)
    check(st == 200, "replica_behind: A granted on the primary (clock 60 s ahead)")
    deadline = time.monotonic() + 10 * SCALE
    while time.monotonic() < deadline and redis(rr, "EXISTS", "picket:{clk}:lease") != ":1":
        time.sleep(0.05)
    pttl = redis(rr, "PTTL", "picket:{clk}:lease")
    check(pttl.startswith(":") and int(pttl[1:]) > 50000,
          "replica_behind: on the replica A's lease has %s ms left (its clock is behind)" % pttl)
    check(redis(rr, "REPLICAOF", "NO", "ONE") == "+OK", "replica_behind: the replica is promoted")
    q = w.picketd("p-behind", rr)
    blocked_then_granted(q, "clk", a, 2000, "replica_behind")


def main():
    for b in ("redis-server",):
        if shutil.which(b) is None:
            print("FAIL: no %s" % b)
            return 1
    for case in (case_step_back, case_renewed_ttl, case_replica_behind):
        w = World()
        try:
            case(w)
        except Exception as e:
            check(False, "%s raised %s: %s" % (case.__name__, type(e).__name__, e))
        finally:
            w.close()
    print("test_clock_steps: %d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
