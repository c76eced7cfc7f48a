#!/usr/bin/env python3
"""test_listing: a scoped token's listing names nothing outside its prefixes.

tenant-a may list a. and c.x.; tenant-ac a., a.b. (inside a.), c. and c:.
Locks are held under a., b., c., c.x. and names with ':' by the ops token.

  * item 1: paging `GET /v1/locks?limit=1&prefix=b.` as tenant-a is 403
    (no prefix of its own covers b.), and unfiltered paging with limit 1
    returns every name of a. and c.x. exactly once, and no cursor ever
    contains a name (or a part of one) outside them; a cursor that names
    another tenant's lock is 400, before the store is asked;
  * item 5: prefix and cursor are percent-decoded (the console's
    URLSearchParams sends ':' as %3A); --list-rate answers 429 with
    Retry-After past its rate; a lock call's 503 with the store gone does
    not name the store's address, socket or words to a token without the
    metrics verb (and does to one with it).

Usage: test_listing.py PORT (env T_A, T_AC, T_OPS, T_MET: the tokens;
STORE_PID, STORE_WHERE: the store's pid and address or socket path).
"""
import json
import os
import signal
import sys
import time
import urllib.parse

from tenant_http import request

PORT = int(sys.argv[1])
SLOW_PORT = int(sys.argv[2])  # its --list-rate is 5
A, AC, OPS, MET = (os.environ[k] for k in ("T_A", "T_AC", "T_OPS", "T_MET"))
BACKEND = os.environ.get("PICKET_TEST_BACKEND") or "redis"


def call(method, path, token, body=None, port=None):
    return request(port or PORT, method, path, token, body)


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def hold(kind, name, **extra):
    path = {"lock": "/v1/locks/", "semaphore": "/v1/semaphores/", "rwlock": "/v1/rwlocks/"}[kind]
    body = {"ttl_ms": 120000}
    body.update(extra)
    st, doc, _ = call("POST", path + urllib.parse.quote(name, safe="") + "/acquire", OPS, body)
    check(st == 200, "acquire %s %s: %s %s" % (kind, name, st, doc))


def page_all(token, prefix=None, limit=1, budget=400):
    """Every page of a listing: the names listed and every cursor seen."""
    names, cursors, cursor = [], [], None
    for _ in range(budget):
        q = {"limit": str(limit)}
        if prefix is not None:
            q["prefix"] = prefix
        if cursor is not None:
            q["cursor"] = cursor
        st, doc, _ = call("GET", "/v1/locks?" + urllib.parse.urlencode(q), token)
        check(st == 200, "list %s: %s %s" % (q, st, doc))
        names += [(l["kind"], l["name"]) for l in doc["locks"]]
        cursor = doc["cursor"]
        if cursor is None:
            return names, cursors
        cursors.append(cursor)
    check(False, "paging did not end within %d pages: %s limit %d prefix %r, last cursor %r" % (budget, "token", limit, prefix, cursor))


# other tenants' locks, and a's own, of each kind
others = ["b.alpha", "b.beta", "b.gamma", "b:colon", "c.y1", "c.zz", "ab.near"]
mine_a = ["a.one", "a.two", "a.b.three", "c.x.four", "c.x.five"]
for n in others + mine_a:
    hold("lock", n)
hold("semaphore", "b.sem", limit=3)
hold("rwlock", "b.rw", mode="write")
hold("semaphore", "a.sem", limit=2)
hold("rwlock", "c.x.rw", mode="read")
hold("lock", "c:colon.one")


def cursor_visible(c, prefixes):
    """Whether every name a cursor carries starts with one of prefixes:
    "SLOT", "SLOT-K-NAME" or "SLOT~RANGE" (api_admin.c)."""
    rest = c.lstrip("0123456789")
    if rest == "":
        return True
    if rest.startswith("~"):
        return rest[1:] in prefixes
    return rest[:1] == "-" and rest[3:].startswith(prefixes)


# item 1: a prefix no token prefix covers is 403, and names nothing
for pre in ("b.", "b", "ab.", "c.y", "c:"):
    st, doc, _ = call("GET", "/v1/locks?limit=1&prefix=" + urllib.parse.quote(pre, safe=""), A)
    check(st == 403 and doc["error"]["code"] == "permission_denied",
          "prefix %r as tenant-a: %s %s" % (pre, st, doc))
    check(not any(s in json.dumps(doc) for s in ("alpha", "beta", "gamma", "zz", "near")),
          "403 names a lock: %s" % doc)

# every visible name once, with limits 1, 2 and 100; no cursor names another's
want_a = sorted([("lock", n) for n in mine_a] + [("semaphore", "a.sem"), ("rwlock", "c.x.rw")])
for limit in (1, 2, 100):
    for pre in (None, "", "c", "c.", "a."):
        names, cursors = page_all(A, pre, limit)
        expect = [e for e in want_a if e[1].startswith(pre or "")]
        check(sorted(names) == expect and len(set(names)) == len(names),
              "tenant-a limit %d prefix %r: %s, want %s" % (limit, pre, names, expect))
        for c in cursors:
            check(cursor_visible(c, ("a.", "c.x.")), "cursor %r names another tenant's lock" % c)
            check(len(c) <= 220, "cursor %r longer than PICKET_LIST_CURSOR_MAX" % c)

# overlapping token prefixes (a. and a.b.) list a.b.three once
names, _ = page_all(AC, None, 1)
check(names.count(("lock", "a.b.three")) == 1, "a.b.three listed %d times" % names.count(("lock", "a.b.three")))
check(sorted(n for _, n in names) == sorted(["a.one", "a.two", "a.b.three", "a.sem", "c.x.four", "c.x.five",
                                              "c.x.rw", "c.y1", "c.zz", "c:colon.one"]),
      "tenant-ac lists %s" % names)

# a crafted cursor that names another tenant's lock is refused (400)
for cur in ("0-l-b.alpha", "0-l-b.beta", "0~b.", "0-l-c.y1"):
    st, doc, _ = call("GET", "/v1/locks?limit=1&cursor=" + urllib.parse.quote(cur, safe=""), A)
    check(st == 400 and doc["error"]["code"] == "invalid_argument", "cursor %r: %s %s" % (cur, st, doc))

# the operator's token still sees everything, and percent-encoded ':' decodes
names, _ = page_all(OPS, "b:", 1)
check(names == [("lock", "b:colon")], "ops prefix b: lists %s" % names)
st, doc, _ = call("GET", "/v1/locks?limit=1&prefix=c%3A", AC)
check(st == 200 and [l["name"] for l in doc["locks"]] == ["c:colon.one"], "prefix c%%3A: %s %s" % (st, doc))
names, _ = page_all(OPS, None, 3)
check(len(names) == len(set(names)) == len(others) + len(mine_a) + 5, "ops lists %d: %s" % (len(names), names))
st, doc, _ = call("GET", "/v1/locks?prefix=%ZZ", OPS)
check(st == 400, "a bad escape is 400: %s %s" % (st, doc))

# --list-rate 5: past a second's worth, 429 with Retry-After; per token
codes = [call("GET", "/v1/locks?limit=1&prefix=a.", A, port=SLOW_PORT)[0] for _ in range(12)]
check(codes.count(200) >= 5 and 429 in codes, "12 quick listings at --list-rate 5: %s" % codes)
st, doc, hdr = call("GET", "/v1/locks?limit=1&prefix=a.", A, port=SLOW_PORT)
check(st == 429 and doc["error"]["code"] == "rate_limited" and "Retry-After" in hdr,
      "429: %s %s %s" % (st, doc, hdr))
check(call("GET", "/v1/locks?limit=1&prefix=a.", AC, port=SLOW_PORT)[0] == 200,
      "another token is not paced by tenant-a's")
time.sleep(1.2)
check(call("GET", "/v1/locks?limit=1&prefix=a.", A, port=SLOW_PORT)[0] == 200, "the bucket refills")

# item 5: with the store gone, a lock call's 503 says nothing of where it is
os.kill(int(os.environ["STORE_PID"]), signal.SIGSTOP if BACKEND == "etcd" else signal.SIGKILL)
try:
    where = os.environ["STORE_WHERE"]
    deadline = time.time() + 30
    while True:
        st, doc, _ = call("POST", "/v1/locks/a.down/acquire", A, {"ttl_ms": 5000})
        if st >= 500 or time.time() > deadline:
            break
        time.sleep(0.2)
    check(st == 503, "acquire with the store gone: %s %s" % (st, doc))
    text = json.dumps(doc)
    check(where not in text and "redis.sock" not in text and "127.0.0.1" not in text,
          "a 503 to tenant-a names the store: %s" % text)
    st, doc, _ = call("GET", "/v1/locks?prefix=a.", A)
    check(st >= 500 and where not in json.dumps(doc), "a listing's failure names the store: %s %s" % (st, doc))
    st, doc, _ = call("POST", "/v1/locks/b.down/acquire", MET, {"ttl_ms": 5000})
    check(st >= 500, "acquire as the metrics token: %s %s" % (st, doc))
    check(doc["error"]["message"] != "", "the metrics token's 503 has a message")
finally:
    if BACKEND == "etcd":
        os.kill(int(os.environ["STORE_PID"]), signal.SIGCONT)
print("test_listing.py: ok (%s)" % BACKEND)
