"""workload: the lock holders of a chaos run, and the history they write.

What it owns: the worker processes' loop and the history format on the
writing side (tests/chaos/checker.py's docstring is the reference for the
format and the rules that judge it).

Each worker is its own process (forked by the runner), so the nemesis
can SIGSTOP a real lock holder past its TTL, as a GC pause or a stopped
VM would. It loops:

  1. acquire one of a few locks through either picketd (short TTL, a
     blocking wait_ms, a lease id the worker chose, so it knows which
     lease an indeterminate reply was about);
  2. sometimes claim the grant's fence in fenced-kv first (the new
     holder shuts out a zombie before it reads);
  3. read-modify-write a register (LOCK.reg, an integer) with the fence;
  4. add a unique element to a set (LOCK.set.EPOCH, a JSON list) with
     the fence and If-Match on the version it read; sometimes (add_first_p)
     the set comes before the register, with a think time between its
     read and its write;
  5. sometimes sleep past the TTL between the first read and its write (a
     zombie by its own choice, beside the nemesis's SIGSTOPs);
  6. sometimes renew; then release, or walk away and let the lease expire.

Some rounds (sem_p, rw_p) use a semaphore's permit or a read/write lock
instead of a lock: a permit and a write lease go through the same steps,
under the lock their fences are checked under (the grant's fence_lock:
NAME:permit:I, NAME:rw); a read lease only reads the rwlock's register,
and its calls are recorded as read-acquire, read-renew, read-release.

Some rounds (elect_p) are an election's instead: campaign for one of a
few elections (names no lock has) with a blocking wait_ms, and while
leader write to fenced-kv under the term (Picket-Lock: the election's
name, Picket-Fence: the term; NAME.log, no If-Match), one to three times,
sometimes after sleeping past the TTL (a deposed leader by its own
choice; the nemesis's pause-holder stops leaders too); sometimes proclaim
a value or renew between writes; then resign, or walk away. The calls
are recorded as campaign, proclaim, lead-renew, resign and lead-write,
with the term as their fence.

Every request is an invoke and one completion in the history: ok (it
happened, with what the reply said), fail (it certainly did not happen:
409 lock_held, lease_lost, stale_fence, 412 version_mismatch) or info
(anything else: a timeout, a 5xx, a broken connection - it may or may
not have happened). Times are CLOCK_MONOTONIC nanoseconds, which every
process of the machine shares, so the files of all workers and the
nemesis merge into one history.

Lease ids are secrets even here: the history holds the first 16 hex of
their SHA-256, which identifies a lease and reveals nothing.
"""

import ctypes
import hashlib
import http.client
import json
import os
import random
import secrets
import signal
import time


class History:
    """One writer's JSON-lines file; every event gets the monotonic time."""

    def __init__(self, path, process):
        self.f = open(path, "a", buffering=1)
        self.process = process

    def event(self, type_, f, **fields):
        ev = {"time": time.monotonic_ns(), "type": type_, "process": self.process, "f": f}
        ev.update({k: v for k, v in fields.items() if v is not None})
        self.f.write(json.dumps(ev, sort_keys=True) + "\n")
        return ev

    def close(self):
        self.f.close()


def lease_tag(lease):
    return hashlib.sha256(lease.encode()).hexdigest()[:16]


class Http:
    """A keep-alive connection to one server; any error closes it, and the
    next request reconnects."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.conn = None

    def request(self, method, path, body=None, headers=None, timeout=3.0):
        """(status, decoded JSON or None). Raises OSError/HTTPException on
        a network failure or timeout."""
        try:
            if self.conn is None or self.conn.sock is None:
                # (http.client drops the socket after a "Connection: close" reply)
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
                self.conn.connect()
            self.conn.sock.settimeout(timeout)
            data = body if isinstance(body, (bytes, type(None))) else body.encode()
            self.conn.request(method, path, body=data, headers=headers or {})
            r = self.conn.getresponse()
            raw = r.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        return r.status, doc

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def error_code(doc):
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        return doc["error"].get("code")
    return None


# Replies that say for certain the call did not happen.
PICKETD_FAIL = {"lock_held", "lease_lost", "semaphore_full", "lock_delay", "leader_exists"}
FENCEDKV_FAIL = {"stale_fence", "version_mismatch"}


class Worker:
    def __init__(self, wid, cfg, hist_path, stop, holding, epoch):
        self.wid, self.cfg = wid, cfg
        self.h = History(hist_path, wid)
        self.stop, self.holding, self.epoch = stop, holding, epoch
        self.rng = random.Random(cfg["seed"] * 1000 + wid)
        self.picketd = [Http(ip, port) for ip, port in cfg["picketd"]]
        self.kv = Http("127.0.0.1", cfg["fencedkv_port"])
        self.n = 0

    # ---- picketd -------------------------------------------------------

    def lock_call(self, p, verb, lock, lease, body, timeout, res=None):
        """One call of a lock, or of res = (kind, name, f) for a semaphore
        or rwlock: kind its path ("semaphores", "rwlocks"), name its name,
        f the history's operation (a read lease's calls are read-acquire,
        read-renew, read-release). The history's lock is the one the
        fences are checked under (a permit's or rwlock's fence_lock; for
        an acquire that is not ok yet, the resource's name)."""
        tag = lease_tag(lease)
        kind, name, f = res if res is not None else ("locks", lock, verb)
        self.h.event("invoke", f, lock=lock, lease=tag, ttl_ms=body.get("ttl_ms"))
        try:
            status, doc = p.request("POST", "/v1/%s/%s/%s" % (kind, name, verb),
                                    json.dumps(body), {"Content-Type": "application/json"},
                                    timeout=timeout)
        except (OSError, http.client.HTTPException) as e:
            self.h.event("info", f, lock=lock, lease=tag, error=type(e).__name__)
            return None
        if status == 200:
            self.h.event("ok", f, lock=doc.get("fence_lock", lock), lease=tag,
                         fence=doc.get("fence"), ttl_ms=doc.get("ttl_ms"))
            return doc
        code = error_code(doc) or "http_%d" % status
        self.h.event("fail" if code in PICKETD_FAIL else "info", f, lock=lock, lease=tag,
                     error=code)
        return None

    def elect_call(self, p, verb, name, lease, body, timeout, f=None):
        """One call of election `name` (POST /v1/elections/NAME/VERB); the
        history's f is f or verb, its fence the reply's term."""
        tag = lease_tag(lease)
        f = f or verb
        self.h.event("invoke", f, lock=name, lease=tag, ttl_ms=body.get("ttl_ms"))
        try:
            status, doc = p.request("POST", "/v1/elections/%s/%s" % (name, verb),
                                    json.dumps(body), {"Content-Type": "application/json"},
                                    timeout=timeout)
        except (OSError, http.client.HTTPException) as e:
            self.h.event("info", f, lock=name, lease=tag, error=type(e).__name__)
            return None
        if status == 200 and isinstance(doc, dict):
            term = doc.get("term")
            self.h.event("ok", f, lock=name, lease=tag,
                         fence=term if type(term) is int else None, ttl_ms=doc.get("ttl_ms"))
            return doc
        code = error_code(doc) or "http_%d" % status
        self.h.event("fail" if code in PICKETD_FAIL else "info", f, lock=name, lease=tag,
                     error=code)
        return None

    # ---- fenced-kv -----------------------------------------------------

    def kv_read(self, lock, key):
        self.h.event("invoke", "read", lock=lock, key=key)
        try:
            status, doc = self.kv.request("GET", "/kv/" + key, timeout=3)
        except (OSError, http.client.HTTPException) as e:
            self.h.event("info", "read", lock=lock, key=key, error=type(e).__name__)
            return None
        if status == 404:
            self.h.event("ok", "read", lock=lock, key=key, version=0)
            return 0, None
        if status != 200:
            self.h.event("info", "read", lock=lock, key=key, error="http_%d" % status)
            return None
        self.h.event("ok", "read", lock=lock, key=key, version=doc["version"])
        return doc["version"], doc["value"]

    def kv_put(self, f, lock, key, fence, value, if_match=None, element=None):
        headers = {"Picket-Lock": lock, "Picket-Fence": str(fence)}
        if if_match is not None:
            headers["If-Match"] = str(if_match)
        self.h.event("invoke", f, lock=lock, key=key, fence=fence, element=element,
                     value=value if element is None else None)
        try:
            status, doc = self.kv.request("PUT", "/kv/" + key, value, headers, timeout=3)
        except (OSError, http.client.HTTPException) as e:
            self.h.event("info", f, lock=lock, key=key, fence=fence, element=element,
                         error=type(e).__name__)
            return False
        if status == 200:
            self.h.event("ok", f, lock=lock, key=key, fence=doc["fence"], version=doc["version"],
                         element=element)
            return True
        code = error_code(doc) or "http_%d" % status
        self.h.event("fail" if code in FENCEDKV_FAIL else "info", f, lock=lock, key=key,
                     fence=fence, element=element, error=code)
        return False

    def kv_claim(self, lock, fence):
        self.h.event("invoke", "claim", lock=lock, fence=fence)
        try:
            status, doc = self.kv.request("POST", "/fence/%s/claim" % lock, b"",
                                          {"Picket-Fence": str(fence)}, timeout=3)
        except (OSError, http.client.HTTPException) as e:
            self.h.event("info", "claim", lock=lock, fence=fence, error=type(e).__name__)
            return False
        if status == 200:
            self.h.event("ok", "claim", lock=lock, fence=fence)
            return True
        code = error_code(doc) or "http_%d" % status
        self.h.event("fail" if code in FENCEDKV_FAIL else "info", "claim", lock=lock,
                     fence=fence, error=code)
        return False

    # ---- the loop ------------------------------------------------------

    def await_successor(self, p, name, term):
        """Waits, up to a TTL, until election `name` has a leader with a
        term above `term` (GET /v1/elections/NAME, not recorded: it reads
        nothing the checker judges)."""
        until = time.monotonic() + self.cfg["ttl_ms"] / 1000
        while time.monotonic() < until and not self.stop.is_set():
            try:
                status, doc = p.request("GET", "/v1/elections/%s" % name, timeout=3)
            except (OSError, http.client.HTTPException):
                return
            if status == 200 and isinstance(doc, dict) and doc.get("leader") and \
                    type(doc.get("term")) is int and doc["term"] > term:
                return
            time.sleep(0.02)

    def sleep_past_ttl(self):
        time.sleep(self.cfg["ttl_ms"] / 1000 * self.rng.uniform(1.1, 2.0))

    def register(self, lock, fence, zombie):
        """Read-modify-write of LOCK.reg with the fence (no If-Match: the
        fence alone orders it)."""
        got = self.kv_read(lock, lock + ".reg")
        if got is None:
            return
        if zombie:
            self.sleep_past_ttl()
        try:
            n = int(got[1]) if got[1] is not None else 0
        except ValueError:
            n = 0
        self.kv_put("write", lock, lock + ".reg", fence, str(n + 1))

    def add(self, lock, fence, zombie, think=0.0):
        """A unique element into LOCK.set.EPOCH: read, then write the list
        plus the element with the fence and If-Match on the version read."""
        key = "%s.set.%d" % (lock, self.epoch.value)
        got = self.kv_read(lock, key)
        if got is None:
            return
        version, value = got
        try:
            items = json.loads(value) if value else []
        except ValueError:
            items = []
        if zombie:
            self.sleep_past_ttl()
        elif think:
            time.sleep(think)
        self.n += 1
        elem = "w%d-%d" % (self.wid, self.n)
        self.kv_put("add", lock, key, fence, json.dumps(items + [elem]), if_match=version,
                    element=elem)

    def read_lease(self, p, name, lease, ttl):
        """A read lease of rwlock `name`: acquire, read the register its
        writers write, sometimes renew, release (or walk away)."""
        cfg, rng = self.cfg, self.rng
        lock = name + ":rw"
        body = {"mode": "read", "ttl_ms": ttl, "wait_ms": cfg["wait_ms"],
                "owner": "w%d" % self.wid, "lease": lease}
        res = ("rwlocks", name, "read-acquire")
        if self.lock_call(p, "acquire", lock, lease, body, cfg["wait_ms"] / 1000 + 3, res) is None:
            time.sleep(rng.uniform(0.005, 0.05))
            return
        self.holding[self.wid] = 1
        try:
            self.kv_read(lock, lock + ".reg")
            if rng.random() < cfg["renew_p"]:
                self.lock_call(p, "renew", lock, lease, {"lease": lease, "ttl_ms": ttl}, 3,
                               ("rwlocks", name, "read-renew"))
            if rng.random() < cfg["release_p"]:
                self.lock_call(rng.choice(self.picketd), "release", lock, lease,
                               {"lease": lease}, 3, ("rwlocks", name, "read-release"))
        finally:
            self.holding[self.wid] = 0

    def lead(self):
        """An election round: campaign (waiting), write under the term
        while leader, sometimes proclaim or renew, resign or walk away."""
        cfg, rng = self.cfg, self.rng
        name = rng.choice(cfg["elections"])
        p = rng.choice(self.picketd)
        lease = secrets.token_hex(16)
        ttl = cfg["ttl_ms"]
        body = {"ttl_ms": ttl, "wait_ms": cfg["wait_ms"], "owner": "w%d" % self.wid,
                "lease": lease, "value": "w%d" % self.wid}
        grant = self.elect_call(p, "campaign", name, lease, body,
                                timeout=cfg["wait_ms"] / 1000 + 3)
        if grant is None or type(grant.get("term")) is not int:
            time.sleep(rng.uniform(0.005, 0.05))
            return
        term = grant["term"]
        self.holding[self.wid] = 1
        zombie = False
        try:
            for i in range(rng.randint(1, 3)):
                if rng.random() < cfg["zombie_p"]:
                    self.sleep_past_ttl()
                    zombie = True
                self.kv_put("lead-write", name, name + ".log", term,
                            "w%d:%d:%d" % (self.wid, term, i))
                x = rng.random()
                if x < 0.25:
                    self.elect_call(p, "proclaim", name, lease,
                                    {"lease": lease, "value": "w%d:%d" % (self.wid, i)}, 3)
                elif x < 0.25 + cfg["renew_p"] / 2:
                    self.elect_call(p, "renew", name, lease, {"lease": lease, "ttl_ms": ttl}, 3,
                                    f="lead-renew")
            # A leader that slept past its TTL always resigns late: the
            # act a resign that skips the lease check gets wrong (it ends
            # the successor's leadership). Left to release_p, a loaded
            # machine's few leaderships once gave no such resign in a run
            # (chaos_mutants). It resigns once a successor leads (or a TTL
            # has passed), so that a successor is there to be wronged. The
            # draw is made either way, so a seed's schedules stay the same.
            resign = rng.random() < cfg["release_p"]
            if zombie:
                self.await_successor(p, name, term)
            if resign or zombie:
                self.elect_call(rng.choice(self.picketd), "resign", name, lease,
                                {"lease": lease}, 3)
        finally:
            self.holding[self.wid] = 0

    def once(self):
        cfg, rng = self.cfg, self.rng
        if rng.random() < cfg.get("elect_p", 0):
            self.lead()
            return
        lock = rng.choice(cfg["locks"])
        p = rng.choice(self.picketd)
        lease = secrets.token_hex(16)
        ttl = cfg["ttl_ms"]
        body = {"ttl_ms": ttl, "wait_ms": cfg["wait_ms"], "owner": "w%d" % self.wid,
                "lease": lease}
        # Which primitive: a lock, a semaphore's permit (its slot is the
        # lock the checker judges, named by the grant), or a rwlock's write
        # lease (judged as a lock: NAME:rw) or read lease (judged apart).
        res, kind = None, rng.random()
        if kind < cfg.get("sem_p", 0):
            res = ("semaphores", lock, "acquire")
            body["limit"] = cfg.get("sem_limit", 2)
        elif kind < cfg.get("sem_p", 0) + cfg.get("rw_p", 0):
            if rng.random() < 0.5:
                self.read_lease(p, lock, lease, ttl)
                return
            res = ("rwlocks", lock, "acquire")
            body["mode"] = "write"
            lock += ":rw"
        grant = self.lock_call(p, "acquire", lock, lease, body,
                               timeout=cfg["wait_ms"] / 1000 + 3, res=res)
        if grant is None:
            time.sleep(rng.uniform(0.005, 0.05))
            return
        if res is not None:
            # renew and release go to the resource; the history names the
            # lock its fences are checked under
            res = (res[0], res[1], None)
            lock = grant["fence_lock"]
        self.holding[self.wid] = 1
        try:
            fence = grant["fence"]
            if rng.random() < cfg["claim_p"]:
                self.kv_claim(lock, fence)
            # Sometimes the set comes first, with a think time between its
            # read and its write: then a zombie's write can land between a
            # new holder's read and write before any fence of the new holder
            # has reached fenced-kv, and only If-Match keeps the zombie's
            # element (what the fencedkv-ignores-if-match mutant breaks).
            zombie = rng.random() < cfg["zombie_p"]
            if rng.random() < cfg["add_first_p"]:
                self.add(lock, fence, zombie, think=rng.uniform(0, 0.6) * ttl / 1000)
                self.register(lock, fence, False)
            else:
                self.register(lock, fence, zombie)
                self.add(lock, fence, False)
            if rng.random() < cfg["renew_p"]:
                self.lock_call(p, "renew", lock, lease, {"lease": lease, "ttl_ms": ttl}, timeout=3,
                               res=res and (res[0], res[1], "renew"))
            if rng.random() < cfg["release_p"]:
                self.lock_call(rng.choice(self.picketd), "release", lock, lease,
                               {"lease": lease}, timeout=3,
                               res=res and (res[0], res[1], "release"))
        finally:
            self.holding[self.wid] = 0

    def run(self):
        while not self.stop.is_set():
            self.once()
        self.h.close()


def worker_main(wid, cfg, hist_path, stop, holding, epoch):
    """Entry point of a forked worker process."""
    os.setpgid(0, 0)   # its own group: the runner's ^C does not stop it mid-write
    # ... and it dies with the runner, whatever kills the runner.
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    Worker(wid, cfg, hist_path, stop, holding, epoch).run()


def final_reads(h, kv_port, keys):
    """The runner's last step, once the faults are healed and the workers
    stopped: read every set key, so the checker can see which acknowledged
    elements survived."""
    kv = Http("127.0.0.1", kv_port)
    for lock, key in sorted(keys):
        h.event("invoke", "final-read", lock=lock, key=key)
        try:
            status, doc = kv.request("GET", "/kv/" + key, timeout=5)
        except (OSError, http.client.HTTPException) as e:
            h.event("info", "final-read", lock=lock, key=key, error=type(e).__name__)
            continue
        if status == 200:
            h.event("ok", "final-read", lock=lock, key=key, version=doc["version"],
                    value=json.loads(doc["value"]))
        elif status == 404:
            h.event("ok", "final-read", lock=lock, key=key, version=0, value=[])
        else:
            h.event("info", "final-read", lock=lock, key=key, error="http_%d" % status)
    kv.close()
