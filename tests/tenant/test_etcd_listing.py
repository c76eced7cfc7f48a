#!/usr/bin/env python3
"""test_etcd_listing: one tenant's contents cannot break everyone's listing.

On etcd (issue 39, item 4), with picketd --max-readers 3000:
  * read/write lock n.m gets 3000 read leases (the first and the last
    through the API, the rest written into etcd as picketd writes them, to
    keep the test fast) between the locks n.a and n.z, and n.big 10,500
    (contents from before the bound: more than one range of the old
    listing, which stalled on them); 75 semaphores with
    180-byte names hold 100 permits each with 500-byte owners (7,500 keys,
    over 9 MB: more than etcd's 8 MiB reply in one range);
  * unfiltered paging with limit 1 (and 2, 7 and 1000) lists every held name
    exactly once, with n.m's 3000 readers and each semaphore's 100 permits,
    never a 502, and ends within as many pages as names plus a few;
  * the read past --max-readers is 409 too_many_readers with Retry-After and
    changes nothing: not the store's revision, not the readers or fence that
    GET shows; a same-lease retry of a reader still refreshes.
On Redis (--max-readers 40) the same bound, through the API only, and the
listing of what the API made.

Usage: test_etcd_listing.py PORT (env MAX_READERS; ETCD_URL on etcd,
REDIS_SOCK on Redis).
"""
import base64
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

PORT = int(sys.argv[1])
MAX = int(os.environ["MAX_READERS"])
ETCD = os.environ.get("ETCD_URL") if os.environ.get("PICKET_TEST_BACKEND") == "etcd" else None
P = "picket:"  # the default key prefix
T0 = time.time()
conn = None


def call(method, path, body=None):
    global conn
    for attempt in (0, 1):
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
            data = json.dumps(body).encode() if body is not None else None
            hdr = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=hdr)
            r = conn.getresponse()
            raw = r.read().decode()
            break
        except (http.client.HTTPException, OSError):
            conn = None
            if attempt:
                raise
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = raw
    return r.status, doc, dict(r.getheaders())


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def take(kind, name, **extra):
    body = {"ttl_ms": 600000}
    body.update(extra)
    st, doc, _ = call("POST", "/v1/%s/%s/acquire" % (kind, name), body)
    check(st == 200, "acquire %s %s: %s %s" % (kind, name, st, doc))
    return doc


# ---- etcd, as picketd writes it --------------------------------------------

def b64(s):
    return base64.b64encode(s.encode()).decode()


def etcd(path, body):
    req = urllib.request.Request(ETCD + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def etcd_put_many(kvs):
    for i in range(0, len(kvs), 100):  # etcd's --max-txn-ops is 128
        ops = [{"requestPut": {"key": b64(k), "value": b64(v)}} for k, v in kvs[i:i + 100]]
        etcd("/v3/kv/txn", {"success": ops})


def etcd_state():
    """The store's revision and its number of keys: any write moves the first."""
    end = P[:-1] + chr(ord(P[-1]) + 1)
    r = etcd("/v3/kv/range", {"key": b64(P), "range_end": b64(end), "count_only": True})
    return int(r["header"]["revision"]), int(r.get("count", 0))


def grant(lease, owner, **extra):
    now = int(time.time() * 1000)
    g = {"lease": lease, "owner": owner, "ttl_ms": 600000, "at": now, "renewals": 0,
         "exp": now + 600000}
    g.update(extra)
    return json.dumps(g, separators=(",", ":"))


def lease_id(i, tag):
    return ("%s%030x" % (tag, i))[:32]


# ---- the contents -------------------------------------------------------------

take("locks", "n.a")
take("locks", "n.z")
take("semaphores", "n.sem", limit=3)
first = take("rwlocks", "n.m", mode="read")  # the epoch, and a reader the API knows
want = {("lock", "n.a"): 1, ("lock", "n.z"): 1, ("semaphore", "n.sem"): 1}
if ETCD:
    # MAX - 2 more readers, then the last one through the API below
    epoch = first["fence"]
    etcd_put_many([("%sr/n.m/r/%s" % (P, lease_id(i, "a")), grant(lease_id(i, "a"), "r%d" % i, fence=epoch))
                   for i in range(MAX - 2)])
    owner = "o" * 500
    for s in range(75):
        name = ("n.s%02d." % s).ljust(180, "x")
        etcd_put_many([("%ss/%s/%d" % (P, name, i), grant(lease_id(s * 1000 + i, "b"), owner, limit=100))
                       for i in range(100)])
        want[("semaphore", name)] = 100
    take("rwlocks", "n.m", mode="read")  # the MAX-th, through the API
    # contents from before the bound (or from a picketd with a higher one):
    # more read leases than one etcd range gave the old listing
    big = take("rwlocks", "n.big", mode="read")
    etcd_put_many([("%sr/n.big/r/%s" % (P, lease_id(i, "c")), grant(lease_id(i, "c"), "", fence=big["fence"]))
                   for i in range(10499)])
    want[("rwlock", "n.big")] = 10500
else:
    for _ in range(MAX - 1):
        take("rwlocks", "n.m", mode="read")
want[("rwlock", "n.m")] = MAX
print("filled in %.1f s" % (time.time() - T0))

# ---- the reader past --max-readers: refused, nothing changed ------------------

st, before, _ = call("GET", "/v1/rwlocks/n.m")
check(st == 200 and before["readers"] == MAX, "n.m has %s readers, want %d" % (before, MAX))
state = etcd_state() if ETCD else subprocess.run(
    ["redis-cli", "-s", os.environ["REDIS_SOCK"], "DEBUG", "DIGEST"], capture_output=True, text=True).stdout
st, doc, hdr = call("POST", "/v1/rwlocks/n.m/acquire", {"mode": "read", "ttl_ms": 600000})
check(st == 409 and doc["error"]["code"] == "too_many_readers",
      "the reader past --max-readers %d: %s %s" % (MAX, st, doc))
check("Retry-After" in hdr and doc["error"].get("retry_after_ms", 0) > 0, "too_many_readers says when: %s %s" % (hdr, doc))
check("--max-readers" in doc["error"]["message"], "the message names the flag: %s" % doc)
after_state = etcd_state() if ETCD else subprocess.run(
    ["redis-cli", "-s", os.environ["REDIS_SOCK"], "DEBUG", "DIGEST"], capture_output=True, text=True).stdout
check(after_state == state, "the refused reader changed the store: %s -> %s" % (state, after_state))
st, after, _ = call("GET", "/v1/rwlocks/n.m")
check((after["readers"], after["fence"]) == (before["readers"], before["fence"]),
      "the refused reader changed n.m: %s -> %s" % (before, after))
# a reader already in keeps its lease: its retry refreshes it
st, doc, _ = call("POST", "/v1/rwlocks/n.m/acquire", {"mode": "read", "ttl_ms": 600000, "lease": first["lease"]})
check(st == 200 and doc["fence"] == first["fence"], "a reader's retry at the bound: %s %s" % (st, doc))
# a writer is kept out by the readers, as before (not by the bound)
st, doc, _ = call("POST", "/v1/rwlocks/n.m/acquire", {"mode": "write", "ttl_ms": 1000})
check(st == 409 and doc["error"]["code"] == "lock_held", "a writer: %s %s" % (st, doc))


if ETCD:  # a lock with more readers than the bound still answers, without reading them all
    st, doc, _ = call("GET", "/v1/rwlocks/n.big")
    check(st == 200 and doc["readers"] == 10500 and len(doc["read_leases"]) <= 100, "GET n.big: %s %s" % (
        st, str(doc)[:300]))
    st, doc, _ = call("POST", "/v1/rwlocks/n.big/acquire", {"mode": "read", "ttl_ms": 1000})
    check(st == 409 and doc["error"]["code"] == "too_many_readers", "a read of n.big: %s %s" % (st, doc))


# ---- every name once, under any limit -----------------------------------------

def page_all(limit):
    names, cursor, pages = [], None, 0
    budget = len(want) + 8
    while True:
        q = {"limit": str(limit)}
        if cursor is not None:
            q["cursor"] = cursor
        t = time.time()
        st, doc, _ = call("GET", "/v1/locks?" + urllib.parse.urlencode(q))
        check(st == 200, "list %s (page %d): %s %s" % (q, pages, st, str(doc)[:300]))
        check(time.time() - t < 10, "a page took %.1f s" % (time.time() - t))
        names += [((l["kind"], l["name"]), l["holders"]) for l in doc["locks"]]
        pages += 1
        check(doc["cursor"] != cursor or cursor is None, "the cursor did not advance: %r" % cursor)
        cursor = doc["cursor"]
        if cursor is None:
            return names, pages
        check(pages < budget, "limit %d: paging did not end in %d pages (cursor %r)" % (limit, budget, cursor))


for limit in (1, 2, 7, 1000):
    t = time.time()
    names, pages = page_all(limit)
    got = [n for n, _ in names]
    check(len(got) == len(set(got)), "limit %d: a name listed twice: %s" % (
        limit, sorted(n for n in got if got.count(n) > 1)[:5]))
    check(set(got) == set(want), "limit %d: listed %d names, want %d; missing %s, extra %s" % (
        limit, len(got), len(want), sorted(set(want) - set(got))[:5], sorted(set(got) - set(want))[:5]))
    for n, holders in names:
        check(holders == want[n], "limit %d: %s has %d holders, want %d" % (limit, n, holders, want[n]))
    print("limit %d: %d names once each in %d pages, %.1f s" % (limit, len(got), pages, time.time() - t))
print("test_etcd_listing.py: ok (%s, %.1f s)" % ("etcd" if ETCD else "redis", time.time() - T0))
