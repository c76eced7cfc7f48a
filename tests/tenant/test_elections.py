#!/usr/bin/env python3
"""test_elections: what one tenant can do to elections on a shared picketd
(issue 40 under issue 39's rules).

Tokens (test_elections.sh): tenant-a and tenant-b (a. and b.: lock, read,
admin), a-read (a., read), a-lock (a., lock and read), a-quota (a., lock
and read, max_leases=2), a-wait (a., lock and read, max_waiters=1).
picketd runs --log-level debug.

  prefix) tenant-b leads b.x (an owner, a value); tenant-a, with b.x's
     lease id in hand, calls campaign, renew, proclaim, resign, GET,
     observe and break on b.x, by name and percent-encoded: each is 403
     permission_denied, its reply the same as for b.never (led by nobody,
     never) but for the name, with no owner, value or term of b.x; b.x's
     leader, term and value are unchanged and its lease renews.
  verbs) a-read cannot campaign, renew, proclaim or resign (403, lacks
     'lock'), but may GET and observe; a-read and a-lock cannot break
     (403, lacks 'admin'); the leader is unchanged; tenant-a's break works.
  leases) a-quota holds a lock and leads an election, its max_leases: a
     campaign is 429 too_many_leases at once (with wait_ms too), the
     election keeps no leader and term 0, the leader renews and proclaims
     on; a release gives back one lease exactly (one more leadership, then
     429 again).
  waiters) a-wait's one waiting candidate is its max_waiters: a second
     candidate and a waiting lock acquire are 429 too_many_waiters at
     once; a resign makes the candidate leader; then it may wait again.
  value) a value of 4096 bytes (ASCII, or 2048 two-byte characters) is
     kept; 4097 bytes, 2049 two-byte characters or a control character is
     400 on campaign and proclaim, the message without the value, and
     changes nothing.
  log) picketd's log at debug level, after all of the above, has the
     elections' grants but no value and no lease id (neither a client's
     nor the one stored for it under its token).

Usage: test_elections.py PORT LOG (env T_*: the tokens; LOG: picketd's log).
ELECTION_PARTS=... runs some parts (to see each fail on older code).
"""
import hashlib
import json
import os
import sys
import time

from tenant_http import Pending, Stream, request

PORT, LOG = int(sys.argv[1]), sys.argv[2]
A, B, READ, LOCK, QUOTA, WAIT = (os.environ[k] for k in (
    "T_A", "T_B", "T_READ", "T_LOCK", "T_QUOTA", "T_WAIT"))
NAME_OF = {A: "tenant-a", B: "tenant-b", READ: "a-read", LOCK: "a-lock", QUOTA: "a-quota",
           WAIT: "a-wait"}
MARK = os.urandom(6).hex()
VALUES, LEASES = [], []  # every value set and lease granted: none may be logged


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def code(doc):
    return doc.get("error", {}).get("code") if isinstance(doc, dict) else None


def message(doc):
    return doc.get("error", {}).get("message", "") if isinstance(doc, dict) else ""


def el(name, action=""):
    return "/v1/elections/" + name + ("/" + action if action else "")


def call(method, path, token, body=None):
    return request(PORT, method, path, token, body)[:2]


def value(what):
    """A value no text of picketd's would hold by chance."""
    v = "%s-value-%s-%d" % (what, MARK, len(VALUES))
    VALUES.append(v)
    return v


def campaign(name, token, **body):
    body.setdefault("ttl_ms", 60000)
    st, g = call("POST", el(name, "campaign"), token, body)
    check(st == 200 and g["election"] == name, "%s campaigns %s: %s %s" % (NAME_OF[token], name, st, g))
    LEASES.append((token, g["lease"]))
    return g


def leader(name, token=A):
    st, doc = call("GET", el(name), token)
    check(st == 200, "GET %s: %s %s" % (name, st, doc))
    return doc


def observe(name, token):
    """The status and refusal of an observe of NAME, or its first event."""
    s = Stream(PORT, el(name, "observe"), token)
    first = s.until("leader") if s.status == 200 else None
    s.close()
    return s.status, s.doc if s.status != 200 else first


def attacks(lease):
    """Every call a tenant could make on an election: (what, method, action, body)."""
    return [("campaign", "POST", "campaign", {"ttl_ms": 60000, "wait_ms": 1000, "lease": lease,
                                              "value": "mine"}),
            ("renew", "POST", "renew", {"lease": lease, "ttl_ms": 60000}),
            ("proclaim", "POST", "proclaim", {"lease": lease, "value": "hijacked"}),
            ("resign", "POST", "resign", {"lease": lease}),
            ("GET", "GET", "", None),
            ("observe", "GET", "observe", None),
            ("break", "POST", "break", None)]


def attack(path_name, what, method, action, body, token=A):
    if what == "observe":
        return observe(path_name, token)
    return call(method, el(path_name, action), token, body)


def part_prefix():
    owner = "b-owner-" + MARK
    g = campaign("b.x", B, ttl_ms=120000, owner=owner, value=value("b"))
    before = leader("b.x", B)
    secrets = (owner, g["value"], str(g["term"]))
    for path_name in ("b.x", "b%2Ex", "%62.x", "b.%78"):
        for what, method, action, body in attacks(g["lease"]):
            st, doc = attack(path_name, what, method, action, body)
            text = json.dumps(doc)
            check(st == 403 and code(doc) == "permission_denied",
                  "tenant-a's %s of %s: %s %s" % (what, path_name, st, doc))
            check(not any(s in text for s in secrets), "tenant-a's %s of b.x says: %s" % (what, text))
            st2, doc2 = attack(path_name.replace("x", "never").replace("%78", "never"), what,
                               method, action, body)
            check(st2 == st and json.dumps(doc2).replace("b.never", "b.x") == text,
                  "tenant-a's %s: b.x (led) answers %s, b.never %s" % (what, text, json.dumps(doc2)))
    after = leader("b.x", B)
    for k in ("term", "value", "owner", "since"):
        check(after["leader"][k] == before["leader"][k], "b.x's %s changed: %s -> %s"
              % (k, before["leader"][k], after["leader"][k]))
    check(after["term"] == before["term"], "b.x's term moved: %s" % after)
    st, r = call("POST", el("b.x", "renew"), B, {"lease": g["lease"], "ttl_ms": 120000})
    check(st == 200 and r["term"] == g["term"], "tenant-b's renew of b.x: %s %s" % (st, r))
    st, doc = call("GET", el("b.never"), B)
    check(st == 200 and doc["leader"] is None and doc["term"] == 0,
          "b.never was campaigned for: %s %s" % (st, doc))
    print("prefix: tenant-a's every call on b.x is 403, as for b.never; b.x is unchanged",
          flush=True)


def part_verbs():
    g = campaign("a.v", A, value=value("a"))
    for what, method, action, body in attacks(g["lease"]):
        if what in ("GET", "observe"):
            continue
        verb = "admin" if what == "break" else "lock"
        for token in (LOCK, READ) if what == "break" else (READ,):
            st, doc = attack("a.v", what, method, action, body, token)
            check(st == 403 and code(doc) == "permission_denied"
                  and "lacks the verb '%s'" % verb in message(doc),
                  "%s's %s of a.v: %s %s" % (NAME_OF[token], what, st, doc))
    st, doc = observe("a.v", READ)
    check(st == 200 and doc["leader"]["term"] == g["term"], "a-read observes a.v: %s %s" % (st, doc))
    doc = leader("a.v", READ)
    check(doc["leader"]["term"] == g["term"] and doc["leader"]["value"] == g["value"],
          "a.v after a-read's and a-lock's calls: %s" % doc)
    st, doc = call("POST", el("a.v", "break"), A)
    check(st == 200 and doc["broken"] is True, "tenant-a (admin) breaks a.v: %s %s" % (st, doc))
    check(leader("a.v")["leader"] is None, "a.v still has a leader after the break")
    print("verbs: a read-only token cannot campaign, renew, proclaim or resign; only admin breaks",
          flush=True)


def part_leases():
    st, lk = call("POST", "/v1/locks/a.ql/acquire", QUOTA, {"ttl_ms": 60000})
    check(st == 200, "a-quota's lock: %s %s" % (st, lk))
    LEASES.append((QUOTA, lk["lease"]))
    g = campaign("a.q1", QUOTA, value=value("q"))
    for body in ({"ttl_ms": 60000}, {"ttl_ms": 60000, "wait_ms": 5000, "value": "x"}):
        t0 = time.monotonic()
        st, doc = call("POST", el("a.q2", "campaign"), QUOTA, body)
        check(st == 429 and code(doc) == "too_many_leases" and time.monotonic() - t0 < 2,
              "a-quota's third lease %s: %s %s" % (body, st, doc))
    doc = leader("a.q2")
    check(doc["leader"] is None and doc["term"] == 0 and doc["candidates"] == 0,
          "a.q2 after the 429: %s" % doc)
    st, r = call("POST", el("a.q1", "renew"), QUOTA, {"lease": g["lease"]})
    check(st == 200 and r["term"] == g["term"], "the leader at max_leases renews: %s %s" % (st, r))
    st, r = call("POST", el("a.q1", "proclaim"), QUOTA, {"lease": g["lease"], "value": value("q")})
    check(st == 200, "the leader at max_leases proclaims: %s %s" % (st, r))
    st, r = call("POST", "/v1/locks/a.ql/release", QUOTA, {"lease": lk["lease"]})
    check(st == 200, "a-quota releases its lock: %s %s" % (st, r))
    g2 = campaign("a.q2", QUOTA)
    st, doc = call("POST", el("a.q3", "campaign"), QUOTA, {"ttl_ms": 60000})
    check(st == 429 and code(doc) == "too_many_leases",
          "a-quota leads a.q1 and a.q2, a third: %s %s" % (st, doc))
    for name, lease in (("a.q1", g["lease"]), ("a.q2", g2["lease"])):
        st, r = call("POST", el(name, "resign"), QUOTA, {"lease": lease})
        check(st == 200, "a-quota resigns %s: %s %s" % (name, st, r))
    g3 = campaign("a.q3", QUOTA)
    call("POST", el("a.q3", "resign"), QUOTA, {"lease": g3["lease"]})
    print("leases: past max_leases a campaign is 429 and changes nothing; the count stays exact",
          flush=True)


def wait_candidates(name, n):
    for _ in range(200):
        if leader(name)["candidates"] == n:
            return
        time.sleep(0.05)
    check(False, "%s never had %d candidates" % (name, n))


def part_waiters():
    l1, l2 = campaign("a.w1", A), campaign("a.w2", A)
    st, lk = call("POST", "/v1/locks/a.wl/acquire", A, {"ttl_ms": 60000})
    check(st == 200, "tenant-a's lock a.wl: %s %s" % (st, lk))
    LEASES.append((A, lk["lease"]))
    cand = Pending(PORT, "POST", el("a.w1", "campaign"), WAIT,
                   {"ttl_ms": 60000, "wait_ms": 30000, "value": value("w")})
    wait_candidates("a.w1", 1)
    for path, body in ((el("a.w2", "campaign"), {"ttl_ms": 60000, "wait_ms": 30000}),
                       ("/v1/locks/a.wl/acquire", {"ttl_ms": 60000, "wait_ms": 30000})):
        t0 = time.monotonic()
        st, doc = call("POST", path, WAIT, body)
        check(st == 429 and code(doc) == "too_many_waiters" and time.monotonic() - t0 < 2,
              "a-wait's second wait (%s): %s %s" % (path, st, doc))
    check(leader("a.w2")["candidates"] == 0, "a.w2 has a candidate")
    st, r = call("POST", el("a.w1", "resign"), A, {"lease": l1["lease"]})
    check(st == 200, "tenant-a resigns a.w1: %s %s" % (st, r))
    cand.join(20)
    check(cand.result is not None, "a-wait's candidate got no answer")
    st, won, _ = cand.result
    check(st == 200 and won["term"] > l1["term"], "a-wait's candidate after the resign: %s %s" % (st, won))
    LEASES.append((WAIT, won["lease"]))
    t0 = time.monotonic()
    st, doc = call("POST", el("a.w2", "campaign"), WAIT, {"ttl_ms": 60000, "wait_ms": 1000})
    check(st == 409 and code(doc) == "leader_exists" and time.monotonic() - t0 > 0.8,
          "a-wait waits again once its candidate won: %s %s" % (st, doc))
    call("POST", el("a.w1", "resign"), WAIT, {"lease": won["lease"]})
    call("POST", el("a.w2", "resign"), A, {"lease": l2["lease"]})
    call("POST", "/v1/locks/a.wl/release", A, {"lease": lk["lease"]})
    print("waiters: a waiting candidate counts against max_waiters (429 past it, at once)",
          flush=True)


def part_value():
    big, two = "v" * 4096, "\u00e9" * 2048
    g = campaign("a.val", A, value=big)
    check(g["value"] == big and leader("a.val")["leader"]["value"] == big, "a 4096-byte value")
    st, r = call("POST", el("a.val", "proclaim"), A, {"lease": g["lease"], "value": two})
    check(st == 200 and r["value"] == two, "a value of 2048 two-byte characters: %s" % st)
    for bad in ("v" * 4097, "\u00e9" * 2049, "w" * 8000, "line\nbreak", "del\x7f", "c1\u0085"):
        for path, body in ((el("a.val2", "campaign"), {"ttl_ms": 60000, "value": bad}),
                           (el("a.val", "proclaim"), {"lease": g["lease"], "value": bad})):
            st, doc = call("POST", path, A, body)
            check(st in (400, 413) and code(doc) in ("invalid_argument", "body_too_large"),
                  "value %r... (%d bytes) at %s: %s %s" % (bad[:8], len(bad.encode()), path, st,
                                                           json.dumps(doc)[:200]))
            check(bad[:12] not in json.dumps(doc, ensure_ascii=False),
                  "the refusal quotes the value: %s" % doc)
    doc = leader("a.val")
    check(doc["leader"]["value"] == two and doc["leader"]["term"] == g["term"],
          "a.val after refused proclaims: %s" % doc)
    doc = leader("a.val2")
    check(doc["leader"] is None and doc["term"] == 0, "a.val2 after refused campaigns: %s" % doc)
    call("POST", el("a.val", "resign"), A, {"lease": g["lease"]})
    print("value: at most 4096 bytes of text; past it 400, nothing changed", flush=True)


def part_log():
    # a few more paths that log: a lost lease's renew, a resign, a break
    g = campaign("a.log", A, value=value("log"))
    st, _ = call("POST", el("a.log", "proclaim"), A, {"lease": g["lease"], "value": value("log")})
    check(st == 200, "proclaim a.log")
    call("POST", el("a.log", "break"), A)
    st, doc = call("POST", el("a.log", "renew"), A, {"lease": g["lease"]})
    check(st == 409 and code(doc) == "lease_lost", "renew after the break: %s %s" % (st, doc))
    g = campaign("a.log", A, value=value("log"))
    call("POST", el("a.log", "resign"), A, {"lease": g["lease"]})
    time.sleep(0.3)  # the events thread's reads
    with open(LOG, encoding="utf-8", errors="replace") as f:
        text = f.read()
    check("granted election a.log" in text, "picketd's debug log has no election grants")
    for v in VALUES + ["v" * 64, "\u00e9" * 16]:
        check(v not in text, "picketd's log has the value %r" % v[:40])
    for token, lease in LEASES:
        stored = hashlib.sha256(("lease:%s:%s" % (NAME_OF[token], lease)).encode()).hexdigest()[:32]
        for lid in (lease, stored):
            for i in range(0, 32 - 12 + 1):
                check(lid[i:i + 12] not in text, "picketd's log has 12 digits of lease %s" % lid)
    print("log: %d values and %d leases, none in picketd's debug log" % (len(VALUES), len(LEASES)),
          flush=True)


PARTS = {"prefix": part_prefix, "verbs": part_verbs, "leases": part_leases,
         "waiters": part_waiters, "value": part_value, "log": part_log}
for part in (os.environ.get("ELECTION_PARTS") or " ".join(PARTS)).split():
    PARTS[part]()
print("test_elections.py: ok", flush=True)
