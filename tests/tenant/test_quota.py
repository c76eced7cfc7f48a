#!/usr/bin/env python3
"""test_quota: a token's max_leases where it meets other answers (issue 42,
item 5), the same on Redis and on etcd.

Tokens (test_quota.sh): quota-full (qf., max_leases=1), quota-other (qf.,
no quota), quota-busy (qb., max_leases=64). PORT is a picketd.

  a. quota-full holds qf.mine (its one lease); quota-other holds qf.taken.
     quota-full asking for qf.taken is 409 lock_held (the lock is held,
     whatever the asker's count: Redis's acquire.lua looks at the holder
     first), not 429 too_many_leases; asking for a free qf.free is 429.
  b. quota-busy, 16 clients (one keep-alive connection each), each cycling
     acquire and release on names of its own, free every time: thousands
     of cycles and not one lock_held. On etcd each grant's txn compares
     that the token's count did not move since it was read, and the other
     15 clients move it all the time; a refused txn used to be read as
     "held" about once in 400 cycles. A grant that loses every race is 503
     store_unavailable (etcd, about 2 in 100 cycles here), never lock_held.

Usage: test_quota.py PORT (env T_*: the tokens).
"""
import http.client
import json
import os
import sys
import threading

from tenant_http import code, request

PORT = int(sys.argv[1])
FULL, OTHER, BUSY = (os.environ[k] for k in ("T_FULL", "T_OTHER", "T_BUSY"))
BACKEND = os.environ.get("PICKET_TEST_BACKEND") or "redis"
CLIENTS, CYCLES = 16, 30  # 480 cycles: main gave 46 % lock_held on etcd, so a few hundred show it


def check(cond, what):
    if not cond:
        print("FAIL [%s]:" % BACKEND, what)
        sys.exit(1)


def part_a():
    st, g, _ = request(PORT, "POST", "/v1/locks/qf.mine/acquire", FULL, {"ttl_ms": 60000})
    check(st == 200, "quota-full takes qf.mine: %s %s" % (st, g))
    st, g, _ = request(PORT, "POST", "/v1/locks/qf.taken/acquire", OTHER, {"ttl_ms": 60000})
    check(st == 200, "quota-other takes qf.taken: %s %s" % (st, g))
    st, doc, _ = request(PORT, "POST", "/v1/locks/qf.taken/acquire", FULL, {"ttl_ms": 60000})
    check(st == 409 and code(doc) == "lock_held",
          "quota-full at its quota asks for a held lock: want 409 lock_held, got %s %s"
          % (st, doc))
    st, doc, _ = request(PORT, "POST", "/v1/locks/qf.free/acquire", FULL, {"ttl_ms": 60000})
    check(st == 429 and code(doc) == "too_many_leases",
          "quota-full at its quota asks for a free lock: want 429, got %s %s" % (st, doc))


def cycler(i, tally, lock):
    """CYCLES acquires and releases of qb.cI-N (a new free name each
    time), on one keep-alive connection; counts each refusal by code."""
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    hdr = {"Authorization": "Bearer " + BUSY, "Content-Type": "application/json"}
    mine = {}
    for n in range(CYCLES):
        name = "qb.c%d-%d" % (i, n)
        conn.request("POST", "/v1/locks/%s/acquire" % name, json.dumps({"ttl_ms": 10000}), hdr)
        r = conn.getresponse()
        doc = json.loads(r.read().decode())
        if r.status != 200:
            mine[code(doc)] = mine.get(code(doc), 0) + 1
            continue
        body = json.dumps({"lease": doc["lease"]})
        conn.request("POST", "/v1/locks/%s/release" % name, body, hdr)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            mine["release %d" % r.status] = mine.get("release %d" % r.status, 0) + 1
    conn.close()
    with lock:
        for k, v in mine.items():
            tally[k] = tally.get(k, 0) + v


def part_b():
    tally, lock = {}, threading.Lock()
    threads = [threading.Thread(target=cycler, args=(i, tally, lock)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("measure [%s]: %d cycles by one token on %d clients, refusals: %s"
          % (BACKEND, CLIENTS * CYCLES, CLIENTS, tally or "none"))
    check("lock_held" not in tally, "free names refused as held: %s" % tally)
    # a grant that lost every count race is a 503 (try again), never a
    # false "held"; it stays rare
    check(sum(tally.values()) <= CLIENTS * CYCLES // 10, "free names refused: %s" % tally)


part_a()
part_b()
print("test_quota: all parts passed (%s)" % BACKEND)
