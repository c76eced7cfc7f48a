#!/usr/bin/env python3
"""test_lesser: three lesser leaks of a shared picketd (issue 39, item 5).

Tokens (test_lesser.sh): tenant-alpha (a., lock and read), ops-zulu (*,
with admin), met-bravo (b., with metrics: a metrics token of one prefix),
met-every (*, metrics), rw-hog (rw., max_waiters=1), rw-writer and
rw-reader (rw.). PORT is a picketd; ONE_PORT another on the same store
with --max-waiters 1.

  a. tenant-alpha's event stream of a.lock gets a `broken` event whose `by`
     is "an operator", and no byte of the stream names ops-zulu, who broke
     it; ops-zulu's own stream (admin) gets "token 'ops-zulu'". The broken
     holder's renew and release (tenant-alpha) are lease_lost saying
     "broken by an operator at <time>", without the admin's name.
  b. /metrics read by met-bravo names no lock (no `lock=` label at all,
     none of a.'s held, renewed or waited-on names) and no token (none of
     the seven names, its own included); read by met-every it has the
     per-token series, and still no lock names.
  c. A read/write lock's writer with wait_ms: while it waits, a reader is
     refused (the mark is real); refused 429 (its token's max_waiters) or
     503 (--max-waiters, picketd's total), it leaves readers grantable at
     once; so does one that timed out, and one whose client hung up.

Usage: test_lesser.py PORT ONE_PORT (env T_*: the tokens).
"""
import json
import os
import socket
import sys
import time

from tenant_http import Stream, request

PORT, ONE_PORT = int(sys.argv[1]), int(sys.argv[2])
ALPHA, ADMIN, MET_B, MET_ALL, HOG, WRITER, READER = (
    os.environ[k] for k in ("T_ALPHA", "T_ADMIN", "T_MET_B", "T_MET_ALL", "T_HOG", "T_WRITER",
                            "T_READER"))
TOKEN_NAMES = ["tenant-alpha", "ops-zulu", "met-bravo", "met-every", "rw-hog", "rw-writer",
               "rw-reader"]
BACKEND = os.environ.get("PICKET_TEST_BACKEND") or "redis"


def call(method, path, token, body=None, port=None):
    return request(port or PORT, method, path, token, body)[:2]


def check(cond, what):
    if not cond:
        print("FAIL [%s]:" % BACKEND, what)
        sys.exit(1)


def code(doc):
    return doc.get("error", {}).get("code") if isinstance(doc, dict) else None


def message(doc):
    return doc.get("error", {}).get("message", "") if isinstance(doc, dict) else ""


# ---- event streams ------------------------------------------------------

def stream(name, token):
    """GET /v1/locks/NAME/events, read an event at a time."""
    s = Stream(PORT, "/v1/locks/%s/events" % name, token)
    check(s.status == 200, "events of %s: %s" % (name, s.status))
    return s


def until(s, want):
    data = s.until(want)
    check(data is not None, "no %s event" % want)
    return data


def part_a():
    st, g = call("POST", "/v1/locks/a.lock/acquire", ALPHA, {"ttl_ms": 60000, "owner": "job-1"})
    check(st == 200, "tenant-alpha acquires a.lock: %s %s" % (st, g))
    plain, admin = stream("a.lock", ALPHA), stream("a.lock", ADMIN)
    for s in (plain, admin):
        state = until(s, "state")
        check(state["held"] and state["fence"] == g["fence"], "state: %s" % (state,))
    st, b = call("POST", "/v1/locks/a.lock/break", ADMIN, {})
    check(st == 200 and b["broken"] is True, "ops-zulu breaks a.lock: %s %s" % (st, b))
    got = until(plain, "broken")
    check(got["by"] == "an operator" and got["next_fence"] == b["fence"],
          "a plain reader's broken event: %s" % (got,))
    check("zulu" not in plain.raw, "the plain reader's stream names the admin: %r" % plain.raw)
    got = until(admin, "broken")
    check(got["by"] == "token 'ops-zulu'", "the admin reader's broken event: %s" % (got,))
    plain.close()
    admin.close()
    for verb in ("renew", "release"):
        st, r = call("POST", "/v1/locks/a.lock/" + verb, ALPHA, {"lease": g["lease"]})
        msg = message(r)
        check(st == 409 and code(r) == "lease_lost" and "broken by an operator at 20" in msg
              and "zulu" not in msg, "the broken holder's %s: %s %s" % (verb, st, r))
    print("a: a broken event and lease_lost name the admin only to admin readers")


# ---- /metrics -------------------------------------------------------------

def raw_acquire(port, path, token, body):
    """Sends an acquire and does not read the reply: a parked waiter whose
    client can hang up (close the socket)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    data = json.dumps(body).encode()
    s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % (path, token, len(data))).encode() + data)
    return s


def metrics(port, token):
    st, text = call("GET", "/metrics", token, port=port)
    check(st == 200, "/metrics: %s" % st)
    return text


def sample(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def wait_waiters(port, n):
    for _ in range(200):
        if sample(metrics(port, MET_ALL), "picket_waiters") == n:
            return
        time.sleep(0.05)
    check(False, "picket_waiters never reached %d" % n)


def part_b():
    # a renewed hold (the oldest-hold table) and a waiter (the waiters
    # table) on tenant-alpha's names, and refusals counted for its token
    st, g = call("POST", "/v1/locks/a.old/acquire", ALPHA, {"ttl_ms": 60000})
    check(st == 200, "acquire a.old: %s %s" % (st, g))
    st, r = call("POST", "/v1/locks/a.old/renew", ALPHA, {"lease": g["lease"], "ttl_ms": 60000})
    check(st == 200, "renew a.old: %s %s" % (st, r))
    st, h = call("POST", "/v1/locks/a.busy/acquire", ALPHA, {"ttl_ms": 60000})
    check(st == 200, "acquire a.busy: %s %s" % (st, h))
    waiter = raw_acquire(PORT, "/v1/locks/a.busy/acquire", ADMIN, {"wait_ms": 30000})
    wait_waiters(PORT, 1)
    st, _ = call("POST", "/v1/locks/b.x/acquire", ALPHA, {})
    check(st == 403, "tenant-alpha outside its prefix: %s" % st)

    text = metrics(PORT, MET_B)
    for name in ("a.old", "a.busy", "a.lock"):
        check(name not in text, "met-bravo's /metrics names lock %s" % name)
    check("lock=" not in text, "met-bravo's /metrics has a lock label")
    for t in TOKEN_NAMES:
        check(t not in text, "met-bravo's /metrics names token %s" % t)
    check(sample(text, "picket_lock_oldest_hold_seconds") is not None
          and sample(text, "picket_lock_oldest_hold_seconds") > 0,
          "the oldest hold, unlabelled: %s" % sample(text, "picket_lock_oldest_hold_seconds"))
    check(sample(text, "picket_lock_waiters_max") == 1,
          "the most waiters on a name: %s" % sample(text, "picket_lock_waiters_max"))

    text = metrics(PORT, MET_ALL)
    check('picket_grants_by_token_total{token="tenant-alpha"}' in text
          and 'picket_auth_denied_total{token="tenant-alpha",reason="prefix"} 1' in text,
          "met-every (*) sees the per-token series")
    check("lock=" not in text and "a.old" not in text and "a.busy" not in text,
          "met-every's /metrics names a lock")
    waiter.close()
    wait_waiters(PORT, 0)
    for name, lease in (("a.old", g["lease"]), ("a.busy", h["lease"])):
        call("POST", "/v1/locks/%s/release" % name, ALPHA, {"lease": lease})
    print("b: /metrics names no lock, and tokens only to a * reader")


# ---- read/write lock writers ------------------------------------------------

RW = "/v1/rwlocks/rw.q/acquire"


def read_now(what):
    """A reader's acquire with no wait must be granted at once."""
    st, r = call("POST", RW, READER, {"mode": "read", "ttl_ms": 60000})
    check(st == 200, "%s: a reader is refused: %s %s" % (what, st, r))
    call("POST", "/v1/rwlocks/rw.q/release", READER, {"lease": r["lease"]})


def part_c():
    # a reader holds rw.q, so a writer with wait_ms waits (and marks)
    st, held = call("POST", RW, READER, {"mode": "read", "ttl_ms": 120000})
    check(st == 200, "the first reader: %s %s" % (st, held))
    read_now("before any writer")

    # the mark is real: while a writer waits, a new reader is refused
    w = raw_acquire(ONE_PORT, RW, WRITER, {"mode": "write", "wait_ms": 60000})
    wait_waiters(ONE_PORT, 1)
    st, r = call("POST", RW, READER, {"mode": "read"})
    check(st == 409 and code(r) == "lock_held", "a reader while a writer waits: %s %s" % (st, r))
    w.close()  # its client hangs up: readers may enter once picketd sees it
    wait_waiters(ONE_PORT, 0)
    read_now("after the waiting writer's client hung up")

    # rw-hog's one waiter (max_waiters=1) fills ONE_PORT's --max-waiters 1
    st, f = call("POST", "/v1/locks/rw.filler/acquire", READER, {"ttl_ms": 120000})
    check(st == 200, "acquire rw.filler: %s %s" % (st, f))
    filler = raw_acquire(ONE_PORT, "/v1/locks/rw.filler/acquire", HOG, {"wait_ms": 60000})
    wait_waiters(ONE_PORT, 1)

    t0 = time.monotonic()
    st, r = call("POST", RW, HOG, {"mode": "write", "wait_ms": 60000}, port=ONE_PORT)
    check(st == 429 and code(r) == "too_many_waiters", "rw-hog's second wait: %s %s" % (st, r))
    check(time.monotonic() - t0 < 20, "the 429 came at once")
    read_now("after a writer refused 429")

    st, r = call("POST", RW, WRITER, {"mode": "write", "wait_ms": 60000}, port=ONE_PORT)
    check(st == 503 and code(r) == "too_many_waiters", "a writer past --max-waiters: %s %s" % (st, r))
    read_now("after a writer refused 503")

    filler.close()
    wait_waiters(ONE_PORT, 0)
    st, r = call("POST", RW, WRITER, {"mode": "write", "wait_ms": 1000}, port=ONE_PORT)
    check(st == 409, "a writer whose wait runs out: %s %s" % (st, r))
    read_now("after a writer's wait ran out")
    call("POST", "/v1/rwlocks/rw.q/release", READER, {"lease": held["lease"]})
    call("POST", "/v1/locks/rw.filler/release", READER, {"lease": f["lease"]})
    print("c: a writer that ends without a grant leaves readers grantable at once")


# LESSER_PARTS=c runs part c alone (to see each part fail on older code)
for part in os.environ.get("LESSER_PARTS") or "abc":
    {"a": part_a, "b": part_b, "c": part_c}[part]()
