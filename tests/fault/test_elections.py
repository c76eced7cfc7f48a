#!/usr/bin/env python3
"""test_elections: leader elections under faults (issue 40), over plain
HTTP against a real redis-server (AOF on), picketd and fenced-kv.

An election is a lease with a term (the term is the leader's fence), so
a leader must be replaced within its TTL when it dies, and a deposed
leader's writes must be refused by storage once its successor has
written. Every candidate here is a process of its own (this script with
--candidate), so it can be SIGKILLed or SIGSTOPped as a real leader
would be: it campaigns with a blocking wait_ms, writes once to fenced-kv
under its term when elected (Picket-Lock: the election's name,
Picket-Fence: the term), renews at a third of its TTL and obeys
"write" and "resign" on its stdin, reporting each step as a JSON line with
CLOCK_MONOTONIC times (shared by every process of the machine, so the
test can time a handover from one process's resign to another's
election).

Cases, on one redis-server, picketd and fenced-kv (each case its own
election):
  leader_killed    the leader SIGKILLed: the waiting candidate leads
                   within the TTL (plus a margin), with a higher term;
  leader_paused    the leader SIGSTOPped past its TTL: the candidate leads
                   and writes; the old leader resumed: its write is 409
                   stale_fence (highest = the successor's term), its
                   resign 409 lease_lost, the successor still leads;
  resign_handover  eight candidates waiting, with lock traffic beside
                   them: each resign hands over to the next in well under
                   a second, terms rising, every leader's write admitted;
  picketd_restart  picketd stopped (SIGTERM) and started again on the same
                   port while a leader renews and two candidates wait:
                   they recover (campaigns retried), the leader keeps its
                   leadership, and the terms after the restart are above
                   those before.
The store failover case (Sentinel) is tests/fault/test_election_failover.c,
on the suite's Sentinel group harness.

Prints the measured figures (`elections: <case> ...`). Bounds are wide
(a loaded 2-core machine) and scale with PICKET_TIME_SCALE.
Env: PICKET_BIN_DIR, PICKET_SOURCE_DIR, PICKET_TIME_SCALE; HARNESS_KEEP
keeps the temp dir.
"""

import ctypes
import http.client
import json
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.environ.get("PICKET_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("PICKET_BIN_DIR", os.path.join(SRC, "build", "bin"))
SCALE = float(os.environ.get("PICKET_TIME_SCALE", "1") or 1)
failures = 0


def now_ms():
    return time.monotonic() * 1000.0


def check(ok, what):
    global failures
    print("%s: %s" % ("ok" if ok else "FAIL", what), flush=True)
    if not ok:
        failures += 1
    return ok


def pdeathsig():
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Http:
    """One keep-alive connection; any error closes it (the next call
    reconnects). call() returns (status, doc); status 0: no reply."""

    def __init__(self, port):
        self.port, self.conn = port, None

    def call(self, method, path, body=None, headers=None, timeout=5.0):
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            self.conn.timeout = timeout
            if self.conn.sock is not None:
                self.conn.sock.settimeout(timeout)
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body)
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            self.conn.request(method, path, body=data, headers=h)
            r = self.conn.getresponse()
            raw = r.read()
        except (OSError, http.client.HTTPException):
            self.close()
            return 0, None
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def code_of(doc):
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        return doc["error"].get("code")
    return None


# ---- a candidate (a process of its own) ------------------------------------

def candidate_main(argv):
    """--candidate PICKETD_PORT KV_PORT NAME TTL_MS WAIT_MS ID"""
    port, kv_port, name, ttl, wait, cid = argv
    port, kv_port, ttl, wait = int(port), int(kv_port), int(ttl), int(wait)
    out_lock = threading.Lock()

    def say(ev, **kw):
        kw.update(ev=ev, id=cid, t=now_ms())
        with out_lock:
            sys.stdout.write(json.dumps(kw) + "\n")
            sys.stdout.flush()

    p, kv = Http(port), Http(kv_port)
    lease = os.urandom(16).hex()
    state = {"term": None, "done": False, "resigning": False}
    path = "/v1/elections/%s/" % name

    kv_lock = threading.Lock()

    def write(tag):
        term = state["term"]
        with kv_lock:
            st, doc = kv.call("PUT", "/kv/%s.log" % name, ("%s:%s" % (cid, tag)).encode(),
                              {"Picket-Lock": name, "Picket-Fence": str(term)})
        say("write", term=term, status=st, code=code_of(doc),
            highest=(doc.get("error") or {}).get("highest") if st == 409 and doc else None)

    def commands():
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "write":
                write("cmd")
            elif cmd == "resign":
                state["resigning"] = True
                t0 = now_ms()
                st, doc = Http(port).call("POST", path + "resign", {"lease": lease})
                say("resign", status=st, code=code_of(doc), sent=t0)
                state["done"] = True
            elif cmd == "exit":
                break
        state["done"] = True

    threading.Thread(target=commands, daemon=True).start()
    # Campaign until elected: 409 leader_exists, 503 (picketd stopping, no
    # store) and no reply (picketd down) are tried again.
    while not state["done"]:
        sent = now_ms()
        st, doc = p.call("POST", path + "campaign",
                         {"ttl_ms": ttl, "wait_ms": wait, "lease": lease, "owner": cid,
                          "value": cid}, timeout=wait / 1000 + 10)
        if st == 200:
            state["term"] = doc["term"]
            say("elected", term=doc["term"], sent=sent)
            break
        say("campaign", status=st, code=code_of(doc))
        time.sleep(0.05 if st in (409, 503) else 0.1)
    if state["term"] is None:
        return 0
    write("elected")
    # The keeper: renew at a third of the TTL; a renew with no answer is
    # tried again until the local deadline (sent + TTL) passes.
    deadline = sent + ttl
    next_renew = now_ms() + ttl / 3
    while not state["done"]:
        time.sleep(0.02)
        if state["resigning"] or now_ms() < next_renew:
            continue
        t0 = now_ms()
        st, doc = p.call("POST", path + "renew", {"lease": lease, "ttl_ms": ttl}, timeout=2)
        if state["resigning"]:
            continue
        if st == 200:
            deadline = t0 + ttl
            next_renew = t0 + ttl / 3
            continue
        say("renew", status=st, code=code_of(doc))
        if st == 409 or now_ms() > deadline:
            say("lost", status=st, code=code_of(doc))
            next_renew = float("inf")       # the test decides what comes next
        else:
            next_renew = now_ms() + 100
    return 0


# ---- the test side ------------------------------------------------------------

class Candidate:
    """A candidate process and the events it reported (read by a thread)."""

    def __init__(self, world, name, cid, ttl, wait=30000):
        self.cid = cid
        self.events = []
        self.cv = threading.Condition()
        argv = [sys.executable, os.path.abspath(__file__), "--candidate", str(world.port),
                str(world.kv_port), name, str(ttl), str(wait), cid]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(os.path.join(world.dir, cid + ".log"), "ab"),
                                     text=True, preexec_fn=pdeathsig)
        world.procs.append(self.proc)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.cv:
                self.events.append(ev)
                self.cv.notify_all()

    def wait_for(self, ev, timeout_s, after=0):
        """The first event `ev` (from index `after`), or None after timeout_s."""
        end = time.monotonic() + timeout_s * SCALE
        with self.cv:
            while True:
                for e in self.events[after:]:
                    if e["ev"] == ev:
                        return e
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)

    def send(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def mark(self):
        with self.cv:
            return len(self.events)


class World:
    """redis-server, picketd and fenced-kv in one temp dir; every process
    this test starts, killed by pid at the end."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="picket-elect-")
        self.procs = []
        self.sock = os.path.join(self.dir, "redis.sock")
        self.spawn(["redis-server", "--port", "0", "--unixsocket", self.sock, "--dir", self.dir,
                    "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                    "--maxmemory-policy", "noeviction"], "redis")
        self.wait(lambda: os.path.exists(self.sock), "redis-server")
        self.port = free_port()
        self.start_picketd()
        pf = os.path.join(self.dir, "kv.port")
        self.spawn([os.path.join(BIN, "fenced-kv"), "--listen", "127.0.0.1:0", "--db",
                    os.path.join(self.dir, "kv.db"), "--port-file", pf], "fenced-kv")
        self.wait(lambda: os.path.exists(pf) and os.path.getsize(pf) > 0, "fenced-kv")
        self.kv_port = int(open(pf).read())
        self.http = Http(self.port)

    def spawn(self, argv, name):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=pdeathsig)
        log.close()
        self.procs.append(p)
        return p

    def wait(self, ok, what, timeout_s=10):
        end = time.monotonic() + timeout_s * SCALE
        while time.monotonic() < end:
            try:
                if ok():
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("%s did not start (logs in %s)" % (what, self.dir))

    def start_picketd(self):
        self.picketd = self.spawn([os.path.join(BIN, "picketd"), "--listen",
                                   "127.0.0.1:%d" % self.port, "--redis", "unix://" + self.sock],
                                  "picketd")
        self.wait(lambda: Http(self.port).call("GET", "/readyz", timeout=1)[0] == 200, "picketd")

    def election(self, name):
        st, doc = Http(self.port).call("GET", "/v1/elections/" + name)
        return doc if st == 200 else None

    def wait_candidates(self, name, n, timeout_s=10):
        """Until GET says n campaigns wait on picketd; the doc, or None."""
        end = time.monotonic() + timeout_s * SCALE
        while time.monotonic() < end:
            doc = self.election(name)
            if doc and doc.get("candidates", 0) >= n:
                return doc
            time.sleep(0.02)
        return None

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                except OSError:
                    pass
                p.kill()
                p.wait()
        if os.environ.get("HARNESS_KEEP"):
            print("kept %s" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def stopped(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    return s[s.rindex(")") + 2] == "T"


TTL = 1000


def leader_and_candidate(w, name, ttl=TTL):
    """A leader elected and a candidate waiting behind it."""
    a = Candidate(w, name, name + "-A", ttl)
    ea = a.wait_for("elected", 10)
    if not check(ea is not None, "%s: A is elected" % name):
        return None
    check(a.wait_for("write", 5)["status"] == 200, "%s: A's write under term %d is admitted"
          % (name, ea["term"]))
    b = Candidate(w, name, name + "-B", ttl)
    check(w.wait_candidates(name, 1) is not None, "%s: B waits (GET shows 1 candidate)" % name)
    return a, ea, b


def case_leader_killed(w):
    name = "el-killed"
    got = leader_and_candidate(w, name)
    if got is None:
        return
    a, ea, b = got
    t_kill = now_ms()
    a.proc.kill()
    eb = b.wait_for("elected", 10)
    if not check(eb is not None, "leader_killed: B is elected after A's SIGKILL"):
        return
    ms = eb["t"] - t_kill
    print("elections: leader_killed handover_ms=%.0f ttl_ms=%d" % (ms, TTL), flush=True)
    check(ms <= TTL + 1500 * SCALE, "leader_killed: B leads %.0f ms after the kill (TTL %d ms, "
          "bound TTL + %d)" % (ms, TTL, 1500 * SCALE))
    check(eb["term"] > ea["term"], "leader_killed: B's term %d is above A's %d"
          % (eb["term"], ea["term"]))
    check(b.wait_for("write", 5)["status"] == 200, "leader_killed: B's write is admitted")
    b.send("resign")
    check((b.wait_for("resign", 5) or {}).get("status") == 200, "leader_killed: B resigns")


def case_leader_paused(w):
    name = "el-paused"
    got = leader_and_candidate(w, name)
    if got is None:
        return
    a, ea, b = got
    t_stop = now_ms()
    a.proc.send_signal(signal.SIGSTOP)
    for _ in range(250):
        if stopped(a.proc.pid):
            break
        time.sleep(0.02)
    check(stopped(a.proc.pid), "leader_paused: A is stopped")
    eb = b.wait_for("elected", 10)
    if not check(eb is not None, "leader_paused: B is elected while A is stopped"):
        return
    wb = b.wait_for("write", 5)
    check(wb is not None and wb["status"] == 200, "leader_paused: B's write under term %d is "
          "admitted" % eb["term"])
    time.sleep(0.2)
    mark = a.mark()
    a.proc.send_signal(signal.SIGCONT)
    print("elections: leader_paused handover_ms=%.0f stopped_ms=%.0f ttl_ms=%d"
          % (eb["t"] - t_stop, now_ms() - t_stop, TTL), flush=True)
    a.send("write")
    wa = a.wait_for("write", 5, after=mark)
    check(wa is not None and wa["status"] == 409 and wa["code"] == "stale_fence" and
          wa["highest"] == eb["term"],
          "leader_paused: A's write under its old term %d is refused: %s" % (ea["term"], wa))
    a.send("resign")
    ra = a.wait_for("resign", 5)
    check(ra is not None and ra["status"] == 409 and ra["code"] == "lease_lost",
          "leader_paused: A's resign is 409 lease_lost: %s" % ra)
    doc = w.election(name) or {}
    leader = doc.get("leader") or {}
    check(leader.get("term") == eb["term"] and leader.get("owner") == b.cid,
          "leader_paused: B still leads with term %d: %s" % (eb["term"], doc))
    st, kvdoc = Http(w.kv_port).call("GET", "/fence/" + name)
    check(st == 200 and kvdoc.get("highest") == eb["term"],
          "leader_paused: fenced-kv's highest for %s is B's term: %s" % (name, kvdoc))
    b.send("resign")
    check((b.wait_for("resign", 5) or {}).get("status") == 200, "leader_paused: B resigns")


def lock_traffic(port, stop):
    """Acquire and release a lock in a loop (the load beside a case)."""
    h, n = Http(port), 0
    while not stop.is_set():
        st, doc = h.call("POST", "/v1/locks/el-load/acquire", {"ttl_ms": 2000})
        if st == 200:
            h.call("POST", "/v1/locks/el-load/release", {"lease": doc["lease"]})
            n += 1
    return n


def next_leader(cands, terms, timeout_s=5):
    """(candidate, elected event) of a leader whose term is not in terms,
    or None after timeout_s."""
    end = time.monotonic() + timeout_s * SCALE
    while time.monotonic() < end:
        for c in cands:
            x = c.wait_for("elected", 0)
            if x is not None and x["term"] not in terms:
                return c, x
        time.sleep(0.005)
    return None


def case_resign_handover(w):
    name, n = "el-resign", 8
    stop = threading.Event()
    load = [threading.Thread(target=lock_traffic, args=(w.port, stop)) for _ in range(2)]
    for t in load:
        t.start()
    cands = [Candidate(w, name, "%s-%d" % (name, i), 5000) for i in range(n)]
    try:
        check(w.wait_candidates(name, n - 1, timeout_s=20) is not None,
              "resign_handover: one leader and %d candidates waiting" % (n - 1))
        leaders, handovers = [], []
        cur = next_leader(cands, ())
        if not check(cur is not None, "resign_handover: a leader"):
            return
        while cur is not None:
            c, e = cur
            leaders.append(e)
            wr = c.wait_for("write", 5)
            check(wr is not None and wr["status"] == 200, "resign_handover: %s's write under term "
                  "%d is admitted" % (c.cid, e["term"]))
            c.send("resign")
            r = c.wait_for("resign", 5)
            check(r is not None and r["status"] == 200, "resign_handover: %s resigns" % c.cid)
            nxt = next_leader(cands, [e["term"] for e in leaders]) if len(leaders) < n else None
            if nxt is not None and r is not None:
                handovers.append(nxt[1]["t"] - r["sent"])
            cur = nxt
        terms = [e["term"] for e in leaders]
        check(len(leaders) == n, "resign_handover: all %d candidates led in turn (%d did)"
              % (n, len(leaders)))
        check(all(x < y for x, y in zip(terms, terms[1:])), "resign_handover: terms rise %s"
              % terms)
        if handovers:
            print("elections: resign_handover n=%d median_ms=%.1f max_ms=%.1f all_ms=%s"
                  % (len(handovers), statistics.median(handovers), max(handovers),
                     [round(x, 1) for x in handovers]), flush=True)
            check(max(handovers) < 1000 * SCALE, "resign_handover: every resign hands over in "
                  "under %d ms (max %.1f)" % (1000 * SCALE, max(handovers)))
    finally:
        stop.set()
        for t in load:
            t.join()


def case_picketd_restart(w):
    name = "el-restart"
    a = Candidate(w, name, name + "-A", 3000)
    ea = a.wait_for("elected", 10)
    if not check(ea is not None, "picketd_restart: A is elected"):
        return
    bs = [Candidate(w, name, "%s-B%d" % (name, i), 3000) for i in range(2)]
    check(w.wait_candidates(name, 2) is not None, "picketd_restart: two candidates wait")
    marks = [b.mark() for b in bs]
    t0 = now_ms()
    w.picketd.send_signal(signal.SIGTERM)
    try:
        w.picketd.wait(10 * SCALE)
    except subprocess.TimeoutExpired:
        check(False, "picketd_restart: picketd exits on SIGTERM")
        w.picketd.kill()
    # The waiting campaigns are answered (503 on SIGTERM) or cut off.
    for b, m in zip(bs, marks):
        e = b.wait_for("campaign", 5, after=m)
        check(e is not None and e["status"] in (503, 0),
              "picketd_restart: %s's waiting campaign ended with picketd (503 or no reply): %s"
              % (b.cid, e))
    time.sleep(0.3)
    w.start_picketd()
    print("elections: picketd_restart down_ms=%.0f" % (now_ms() - t0), flush=True)
    check(w.wait_candidates(name, 2) is not None,
          "picketd_restart: both candidates campaign again")
    time.sleep(3000 / 1000 * 0.5)       # A renews through the new picketd
    check(a.wait_for("lost", 0) is None, "picketd_restart: A kept its leadership")
    doc = w.election(name) or {}
    check((doc.get("leader") or {}).get("term") == ea["term"],
          "picketd_restart: A still leads with term %d: %s" % (ea["term"], doc))
    terms, cur = [ea["term"]], (a, ea)
    for _ in range(2):
        c, _ = cur
        c.send("resign")
        r = c.wait_for("resign", 5)
        check(r is not None and r["status"] == 200, "picketd_restart: %s resigns" % c.cid)
        nxt = next_leader(bs, terms)
        if not check(nxt is not None, "picketd_restart: a candidate leads after the resign"):
            return
        terms.append(nxt[1]["term"])
        cur = nxt
    check(all(x < y for x, y in zip(terms, terms[1:])),
          "picketd_restart: terms keep rising across the restart %s" % terms)
    cur[0].send("resign")
    doc = w.election(name) or {}
    check(doc.get("term", 0) >= terms[-1], "picketd_restart: GET's term %s is the last issued %d"
          % (doc.get("term"), terms[-1]))


CASES = [case_leader_killed, case_leader_paused, case_resign_handover, case_picketd_restart]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--candidate":
        return candidate_main(sys.argv[2:])
    only = sys.argv[1:]
    w = World()
    try:
        for case in CASES:
            cname = case.__name__[5:]
            if only and cname not in only:
                continue
            t0 = time.monotonic()
            try:
                case(w)
            except Exception as e:     # one case's crash must not hide the others
                check(False, "%s raised %s: %s" % (cname, type(e).__name__, e))
            print("elections: %s took %.1f s" % (cname, time.monotonic() - t0), flush=True)
    finally:
        w.close()
    print("elections: %s" % ("PASS" if failures == 0 else "%d check(s) failed" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
