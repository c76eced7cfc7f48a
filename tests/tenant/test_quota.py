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
  c. quota-wait (max_waiters=1) waits for qw.rN while quota-hold holds it;
     quota-hold releases; the waiter's grant arrives, and quota-wait at
     once waits again (for qw.held, held throughout): that wait times out
     409 lock_held, never 429 too_many_waiters. A waiter's place used to
     be given back only once libmicrohttpd had sent the reply, so a
     client quick enough met its own old place (seen once in a CI run
     under ASan; here it shows when on_completed is slowed by 20 ms).

Usage: test_quota.py PORT (env T_*: the tokens).
"""
import http.client
import json
import os
import sys
import threading
import time

from tenant_http import Pending, code, request

PORT = int(sys.argv[1])
FULL, OTHER, BUSY, WAIT, HOLD = (os.environ[k] for k in
                                 ("T_FULL", "T_OTHER", "T_BUSY", "T_WAIT", "T_HOLD"))
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


def waiters(name):
    st, doc, _ = request(PORT, "GET", "/v1/locks/%s" % name, HOLD)
    return doc.get("waiters", 0) if st == 200 else -1


def part_c(rounds=20):
    st, held, _ = request(PORT, "POST", "/v1/locks/qw.held/acquire", HOLD, {"ttl_ms": 60000})
    check(st == 200, "quota-hold takes qw.held: %s %s" % (st, held))
    for n in range(rounds):
        name = "qw.r%d" % n
        st, g, _ = request(PORT, "POST", "/v1/locks/%s/acquire" % name, HOLD, {"ttl_ms": 60000})
        check(st == 200, "quota-hold takes %s: %s %s" % (name, st, g))
        pend = Pending(PORT, "POST", "/v1/locks/%s/acquire" % name, WAIT,
                       {"ttl_ms": 60000, "wait_ms": 30000})
        for _ in range(400):
            if waiters(name) == 1:
                break
            time.sleep(0.01)
        check(waiters(name) == 1, "quota-wait never waited for %s" % name)
        st, r, _ = request(PORT, "POST", "/v1/locks/%s/release" % name, HOLD, {"lease": g["lease"]})
        check(st == 200, "quota-hold releases %s: %s %s" % (name, st, r))
        pend.join(30)
        check(pend.result is not None and pend.result[0] == 200,
              "quota-wait's wait for %s: %s" % (name, pend.result))
        st, doc, _ = request(PORT, "POST", "/v1/locks/qw.held/acquire", WAIT,
                             {"ttl_ms": 60000, "wait_ms": 200})
        check(st == 409 and code(doc) == "lock_held",
              "round %d: quota-wait waits again right after its grant: want 409 lock_held, "
              "got %s %s" % (n, st, doc))
        request(PORT, "POST", "/v1/locks/%s/release" % name, WAIT,
                {"lease": pend.result[1]["lease"]})
    request(PORT, "POST", "/v1/locks/qw.held/release", HOLD, {"lease": held["lease"]})


part_a()
part_b()
part_c()
print("test_quota: all parts passed (%s)" % BACKEND)
