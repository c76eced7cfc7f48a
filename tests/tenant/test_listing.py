#!/usr/bin/env python3
"""test_listing: a scoped token's listing names nothing outside its prefixes.

tenant-a may list a. and c.x.; tenant-ac a., a.b. (inside a.), c. and c:.
Locks are held under a., b., c., c.x. and names with ':' by the ops token.

  * item 1: paging `GET /v1/locks?limit=1&prefix=b.` as tenant-a is 403
    (no prefix of its own covers b.), and unfiltered paging with limit 1
    returns every name of a. and c.x. exactly once, and no cursor ever
    contains a name (or a part of one) outside them; a cursor that names
    another tenant's lock is 400, before the store is asked; the same for
    elections (issue 40, held as the locks "/e/NAME" and listed with kind
    "election"): b.'s, held throughout, are in no page, cursor or error
    of tenant-a's, and a cursor naming one ("0-l-/e/b.x", "0~/e/b.") is
    400;
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
A, AC, OPS, MET, LONG = (os.environ[k] for k in ("T_A", "T_AC", "T_OPS", "T_MET", "T_LONG"))
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

# elections (kept as the locks "/e/NAME"), held throughout by ops: other
# tenants' (one of 197 bytes, the longest) and a's own
el_others = ["b.x", "b.elect", "b:el", "c.y.el", "ab.el", "b." + "q" * 195]
el_mine = ["a.el", "c.x.el"]
for n in el_others + el_mine:
    st, doc, _ = call("POST", "/v1/elections/%s/campaign" % n, OPS,
                      {"ttl_ms": 120000, "owner": "owner-of-" + n[:40], "value": "value-of-" + n})
    check(st == 200 and doc["term"] > 0, "campaign %s: %s %s" % (n, st, doc))
# what no reply to tenant-a may hold: words of others' names (either kind)
others_words = ("alpha", "beta", "gamma", "zz", "near", "b.x", "elect", "b:el", "c.y", "ab.el",
                "qqqq", "value-of", "owner-of-b")


def cursor_visible(c, prefixes):
    """Whether every name a cursor carries starts with one of prefixes:
    "I~" (the range, when the token lists several: api_admin.c), then the
    store's "SLOT" or "SLOT-K-NAME" (server/store/cursor.c), where an
    election's NAME is "/e/" and its own."""
    rest = c.lstrip("0123456789")
    if rest.startswith("~"):
        rest = rest[1:].lstrip("0123456789")
    if rest == "":
        return True
    el = lambda n: n[3:] if n.startswith("/e/") else n
    return rest[:1] == "-" and el(rest[3:]).startswith(prefixes)




def long_prefix():
    """KNOWN HOLE, run by the disabled ctest tenant_listing_long_prefix
    (LISTING_LONG_PREFIX=1) until picketd is fixed: long-b's prefix P is
    198 bytes ("b." + 195 q + "r"), so it covers no election at all (names
    are at most 197 bytes), yet the elections' twin of P ("/e/" + P, 201
    bytes) is cut to 200 (api_admin.c, list_ranges_twin) and so is the
    range of the election "b." + 195 q, held by ops: on Redis, a page of
    limit 1 hands back the cursor "0-l-/e/b.qqq..." while that election is
    held (whether it is, is what leaks); on etcd the cursor "0~/e/b.qqq..."
    names that range; and the crafted cursor "0-l-/e/b.qqq..." is accepted
    (200, not 400) on both."""
    x = "b." + "q" * 195
    for pre in (None, "b.", "b.q", x + "r"):
        names, cursors = page_all(LONG, pre, 1)
        check(all(n.startswith(("a.", x + "r")) for _, n in names), "long-b lists %s" % names)
        for c in cursors:
            # (its own prefix, "b.qqq...r", may stand in a cursor; an
            # election's range or name may not)
            check("/e/b." not in c, "long-b's cursor (prefix %r) names an election of b.: %r" % (pre, c))
    st, doc, _ = call("GET", "/v1/locks?limit=1&cursor=" + urllib.parse.quote("0-l-/e/" + x), LONG)
    check(st == 400, "long-b's cursor naming the election %s...: %s %s" % (x[:8], st, doc))


if os.environ.get("LISTING_LONG_PREFIX"):
    long_prefix()

# item 1: a prefix no token prefix covers is 403, and names nothing
for pre in ("b.", "b", "ab.", "c.y", "c:", "e", "b.x", "b.q"):
    st, doc, _ = call("GET", "/v1/locks?limit=1&prefix=" + urllib.parse.quote(pre, safe=""), A)
    check(st == 403 and doc["error"]["code"] == "permission_denied",
          "prefix %r as tenant-a: %s %s" % (pre, st, doc))
    check(not any(s in json.dumps(doc).replace("'%s'" % pre, "") for s in others_words),
          "403 names a lock: %s" % doc)
# and "/e/" (as the store keeps elections) is no prefix at all
for pre in ("/e/b.", "/e/", "%2Fe%2Fb."):
    st, doc, _ = call("GET", "/v1/locks?limit=1&prefix=" + pre, A)
    check(st == 400 and not any(s in json.dumps(doc) for s in others_words),
          "prefix %r as tenant-a: %s %s" % (pre, st, doc))

# every visible name once, with limits 1, 2 and 100; no cursor names another's
want_a = sorted([("lock", n) for n in mine_a] + [("semaphore", "a.sem"), ("rwlock", "c.x.rw")]
                + [("election", n) for n in el_mine])
for limit in (1, 2, 100):
    for pre in (None, "", "c", "c.", "a.", "a.e", "c.x.e", "c.x.el"):
        names, cursors = page_all(A, pre, limit)
        expect = [e for e in want_a if e[1].startswith(pre or "")]
        check(sorted(names) == expect and len(set(names)) == len(names),
              "tenant-a limit %d prefix %r: %s, want %s" % (limit, pre, names, expect))
        for c in cursors:
            check(cursor_visible(c, ("a.", "c.x.")) and not any(s in c for s in others_words),
                  "cursor %r names another tenant's lock" % c)
            check(len(c) <= 220, "cursor %r longer than PICKET_LIST_CURSOR_MAX" % c)

# overlapping token prefixes (a. and a.b.) list a.b.three once
names, _ = page_all(AC, None, 1)
check(names.count(("lock", "a.b.three")) == 1, "a.b.three listed %d times" % names.count(("lock", "a.b.three")))
check(sorted(n for _, n in names) == sorted(["a.one", "a.two", "a.b.three", "a.sem", "c.x.four", "c.x.five",
                                              "c.x.rw", "c.y1", "c.zz", "c:colon.one", "a.el",
                                              "c.x.el", "c.y.el"]),
      "tenant-ac lists %s" % names)

# a crafted cursor that names another tenant's lock is refused (400)
# (elections: the store's "/e/NAME", and a range's "/e/" twin)
for cur in ("0-l-b.alpha", "0-l-b.beta", "0~b.", "0-l-c.y1", "0-l-/e/b.x", "0~/e/b.", "0~/e/",
            "0-l-/e/b.elect", "0-l-/e/c.y.el", "0-e-b.x", "0-l-/e/a./e/b.x", "0-s-/e/a.el"):
    for pre in ("", "&prefix=a.", "&prefix=c"):
        st, doc, _ = call("GET", "/v1/locks?limit=1%s&cursor=%s" % (pre, urllib.parse.quote(cur, safe="")), A)
        check(st == 400 and doc["error"]["code"] == "invalid_argument"
              and not any(s in json.dumps(doc) for s in others_words),
              "cursor %r%s: %s %s" % (cur, pre, st, doc))

# the operator's token still sees everything, and percent-encoded ':' decodes
names, _ = page_all(OPS, "b:", 1)
check(sorted(names) == [("election", "b:el"), ("lock", "b:colon")], "ops prefix b: lists %s" % names)
st, doc, _ = call("GET", "/v1/locks?limit=1&prefix=c%3A", AC)
check(st == 200 and [l["name"] for l in doc["locks"]] == ["c:colon.one"], "prefix c%%3A: %s %s" % (st, doc))
names, _ = page_all(OPS, None, 3)
check(len(names) == len(set(names)) == len(others) + len(mine_a) + 5 + len(el_others) + len(el_mine),
      "ops lists %d: %s" % (len(names), names))
names, _ = page_all(OPS, "b.", 1)
check(sorted(n for k, n in names if k == "election") == sorted(n for n in el_others if n.startswith("b.")),
      "ops lists b.'s elections: %s" % names)
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
