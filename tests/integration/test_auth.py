#!/usr/bin/env python3
"""test_auth.py: who may lock what (issue 16), driven by test_auth.sh.

Two picketd (P1, P2) share one Redis and one --auth-file; P3 runs without
it, with explicit per-address limits. Checks every 401, 403 and 429 path,
that a token limited to billing. cannot touch payroll.x, that a lease made
with one token is worthless with another, the quotas (max_leases across
both picketd, max_waiters leaving the global --max-waiters to others,
acquire_rate), per-token metrics, a SIGHUP reload under load with zero
failed requests, a reload of a broken file, and that no token ever reaches
a log or /metrics.

Env (from test_auth.sh): P1_PORT P1_PID P2_PORT P3_PORT AUTH_FILE NEW_LINE
PICKETD_LOG and the tokens T_*.
"""
import http.client
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contract"))
from contract_log import contract_log  # noqa: E402

E = os.environ
P1, P2, P3 = int(E["P1_PORT"]), int(E["P2_PORT"]), int(E["P3_PORT"])
TOKENS = {k: E[k] for k in E if k.startswith("T_")}
SCALE = float(E.get("PICKET_TIME_SCALE", "1") or 1)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def call(port, method, path, body=None, token=None, auth=None, conn=None):
    """One request; returns (status, headers dict (lowercase), JSON or text)."""
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30 * SCALE)
    headers = {}
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    if auth is not None:
        headers["Authorization"] = auth
    data = None if body is None else json.dumps(body)
    if data is not None:
        headers["Content-Type"] = "application/json"
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    raw = r.read().decode()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    if conn is None:
        c.close()
    contract_log(method, path, data, r.status, hdrs, raw)
    try:
        return r.status, hdrs, json.loads(raw)
    except ValueError:
        return r.status, hdrs, raw


def code(reply):
    b = reply[2]
    return b.get("error", {}).get("code") if isinstance(b, dict) else None


def acquire(port, name, token=None, **body):
    return call(port, "POST", "/v1/locks/%s/acquire" % name, body, token=token)


def renew(port, name, lease, token=None):
    return call(port, "POST", "/v1/locks/%s/renew" % name, {"lease": lease}, token=token)


def release(port, name, lease, token=None):
    return call(port, "POST", "/v1/locks/%s/release" % name, {"lease": lease}, token=token)


B, OPS, READER, LOCKER = TOKENS["T_BILLING"], TOKENS["T_OPS"], TOKENS["T_READER"], TOKENS["T_LOCKER"]
HOG, FAST, NEW = TOKENS["T_HOG"], TOKENS["T_FAST"], TOKENS["T_NEW"]
ADMIN, LISTER = TOKENS["T_ADMIN"], TOKENS["T_LISTER"]


def unauthenticated():
    lease = "0" * 32
    for what, kw, want_www in [
        ("no header", {}, 'Bearer realm="picket"'),
        ("Basic", {"auth": "Basic dXNlcjpwYXNz"}, 'Bearer realm="picket", error="invalid_token"'),
        ("Bearer and nothing", {"auth": "Bearer "}, 'Bearer realm="picket", error="invalid_token"'),
        ("unknown token", {"token": "pkt_not_a_token"},
         'Bearer realm="picket", error="invalid_token"'),
        ("a token's hash as the token", {"token": "sha256:" + "ab" * 32},
         'Bearer realm="picket", error="invalid_token"'),
    ]:
        for method, path, body in [("POST", "/v1/locks/billing.x/acquire", {}),
                                   ("POST", "/v1/locks/billing.x/renew", {"lease": lease}),
                                   ("POST", "/v1/locks/billing.x/release", {"lease": lease}),
                                   ("GET", "/v1/locks/billing.x", None),
                                   ("GET", "/metrics", None),
                                   # auth comes before the checks of names and bodies
                                   ("POST", "/v1/locks/bad%20name/acquire", {"nope": 1})]:
            r = call(P1, method, path, body, **kw)
            check(r[0] == 401 and code(r) == "unauthenticated",
                  "%s: %s %s -> %s %s" % (what, method, path, r[0], r[2]))
            check(r[1].get("www-authenticate") == want_www,
                  "%s: WWW-Authenticate %r" % (what, r[1].get("www-authenticate")))
    for path in ["/healthz", "/readyz", "/v1/openapi.yaml"]:
        r = call(P1, "GET", path)
        check(r[0] == 200, "%s needs no token: %s" % (path, r[0]))


def permissions():
    # billing. only: payroll.x is out of reach for every verb.
    for method, path, body in [("POST", "/v1/locks/payroll.x/acquire", {}),
                               ("POST", "/v1/locks/payroll.x/renew", {"lease": "1" * 32}),
                               ("POST", "/v1/locks/payroll.x/release", {"lease": "1" * 32}),
                               ("GET", "/v1/locks/payroll.x", None),
                               ("GET", "/v1/locks/payroll%2Ex", None),
                               ("POST", "/v1/locks/billing/acquire", {})]:  # "billing" lacks the dot
        r = call(P1, method, path, body, token=B)
        check(r[0] == 403 and code(r) == "permission_denied",
              "billing token: %s %s -> %s %s" % (method, path, r[0], r[2]))
    # ...and a grant on payroll.x by another token is untouched by it.
    g = acquire(P1, "payroll.x", token=OPS)
    check(g[0] == 200, "ops acquires payroll.x: %s" % (g,))
    r = release(P1, "payroll.x", g[2].get("lease", ""), token=B)
    check(r[0] == 403, "billing releases ops's payroll.x: %s" % (r,))
    r = call(P1, "GET", "/v1/locks/payroll.x", token=OPS)
    check(r[0] == 200 and r[2].get("held") is True, "payroll.x still held: %s" % (r,))
    release(P1, "payroll.x", g[2]["lease"], token=OPS)
    # verbs
    r = acquire(P1, "billing.r", token=READER)
    check(r[0] == 403 and "lock" in r[2]["error"]["message"], "reader acquires: %s" % (r,))
    r = call(P1, "GET", "/v1/locks/billing.r", token=READER)
    check(r[0] == 200, "reader reads billing.r: %s" % (r,))
    r = call(P1, "GET", "/v1/locks/billing.r", token=LOCKER)
    check(r[0] == 403, "locker (no read) reads: %s" % (r,))
    r = call(P1, "GET", "/metrics", token=B)
    check(r[0] == 403 and code(r) == "permission_denied", "billing reads /metrics: %s" % (r[0],))
    r = call(P1, "GET", "/metrics", token=OPS)
    check(r[0] == 200 and "picket_auth_denied_total" in r[2], "ops reads /metrics: %s" % (r[0],))


def lease_binding():
    # A grant made with billing's token is invisible to ops's token.
    g = acquire(P1, "billing.bound", token=B)
    check(g[0] == 200, "billing acquires billing.bound: %s" % (g,))
    lease = g[2]["lease"]
    r = renew(P1, "billing.bound", lease, token=OPS)
    check(r[0] == 409 and code(r) == "lease_lost", "ops renews billing's lease: %s" % (r,))
    r = release(P2, "billing.bound", lease, token=OPS)
    check(r[0] == 409 and code(r) == "lease_lost", "ops releases billing's lease: %s" % (r,))
    r = acquire(P1, "billing.bound", token=OPS, lease=lease)
    check(r[0] == 409 and code(r) == "lock_held", "ops acquires with billing's lease: %s" % (r,))
    r = renew(P2, "billing.bound", lease, token=B)
    check(r[0] == 200 and r[2]["fence"] == g[2]["fence"], "billing renews its lease: %s" % (r,))
    check(release(P1, "billing.bound", lease, token=B)[0] == 200, "billing releases")
    # The all-zero lease of the report: chosen by one token, useless to another.
    zero = "0" * 32
    g = acquire(P1, "billing.zero", token=B, lease=zero)
    check(g[0] == 200 and g[2]["lease"] == zero, "billing takes billing.zero with 000...: %s" % (g,))
    r = acquire(P1, "billing.zero", token=OPS, lease=zero)
    check(r[0] == 409 and code(r) == "lock_held", "a stranger's 000... is not the grant: %s" % (r,))
    r = release(P1, "billing.zero", zero, token=OPS)
    check(r[0] == 409, "a stranger's 000... does not release it: %s" % (r,))
    r = acquire(P1, "billing.zero", token=B, lease=zero)
    check(r[0] == 200 and r[2]["fence"] == g[2]["fence"], "the owner's retry is idempotent: %s" % (r,))
    release(P1, "billing.zero", zero, token=B)


def max_leases():
    # billing has max_leases=3, counted in Redis: P1 and P2 share it.
    leases = []
    for i, port in enumerate([P1, P2, P1]):
        g = acquire(port, "billing.q%d" % i, token=B, ttl_ms=60000)
        check(g[0] == 200, "billing lease %d: %s" % (i, g))
        leases.append(g[2].get("lease"))
    for port in (P1, P2):
        r = acquire(port, "billing.q3", token=B)
        check(r[0] == 429 and code(r) == "too_many_leases",
              "a 4th lease on port %d: %s" % (port, r))
    # a same-lease retry of a lease it holds is no new lease
    r = acquire(P2, "billing.q0", token=B, lease=leases[0])
    check(r[0] == 200, "retry of a held lease at the limit: %s" % (r,))
    # a 4th on a lock someone else holds: lock_held or the quota, never a grant
    check(release(P2, "billing.q1", leases[1], token=B)[0] == 200, "release q1")
    g = acquire(P1, "billing.q3", token=B, ttl_ms=300)
    check(g[0] == 200, "after a release, a new lease: %s" % (g,))
    r = acquire(P1, "billing.q4", token=B)
    check(r[0] == 429, "at the limit again: %s" % (r,))
    # billing.q3 expires, unreleased: it no longer counts (on etcd its lease
    # lasts a whole second and ends at the leader's next sweep)
    deadline = time.time() + 5
    while True:
        g = acquire(P2, "billing.q4", token=B, ttl_ms=60000)
        if g[0] == 200 or time.time() > deadline:
            break
        time.sleep(0.1)
    check(g[0] == 200, "an expired lease stops counting: %s" % (g,))
    # A refused acquire (lock_held) does not use up a place.
    o = acquire(P1, "billing.other", token=OPS)
    r = acquire(P1, "billing.other", token=B)
    check(r[0] == 429 or code(r) == "lock_held", "held lock at limit: %s" % (r,))
    for name, lease in [("billing.q0", leases[0]), ("billing.q2", leases[2]), ("billing.q4", g[2]["lease"])]:
        check(release(P1, name, lease, token=B)[0] == 200, "release " + name)
    r = acquire(P1, "billing.other", token=B)
    check(code(r) == "lock_held", "a lock held by another token: lock_held: %s" % (r,))
    g2 = [acquire(P1, "billing.f%d" % i, token=B) for i in range(3)]
    check(all(x[0] == 200 for x in g2), "the refused acquire took no place: %s" % ([x[0] for x in g2],))
    for i, x in enumerate(g2):
        release(P1, "billing.f%d" % i, x[2]["lease"], token=B)
    release(P1, "billing.other", o[2]["lease"], token=OPS)


def waiters():
    # hog: max_waiters=4; the picketd's --max-waiters is 10. Ten blocking
    # acquires on its own held lock: 4 park, 6 get 429, and another token
    # can still wait (and be woken) on another lock.
    h = acquire(P1, "hog.own", token=HOG, ttl_ms=30000)
    check(h[0] == 200, "hog takes hog.own")
    results = []

    def wait_on(name, token, out):
        out.append(acquire(P1, name, token=token, wait_ms=int(4000 * SCALE)))

    ts = [threading.Thread(target=wait_on, args=("hog.own", HOG, results)) for _ in range(10)]
    for t in ts:
        t.start()
    deadline = time.time() + 10 * SCALE
    while time.time() < deadline and sum(1 for r in results if r[0] == 429) < 6:
        time.sleep(0.02)
    refused = [r for r in results if r[0] == 429]
    check(len(refused) == 6 and all(code(r) == "too_many_waiters" for r in refused),
          "hog's waiters past 4: %s" % ([(r[0], code(r)) for r in results],))
    # the others still wait: an honest waiter parks and is woken by a release
    g = acquire(P1, "payroll.w", token=OPS, ttl_ms=30000)
    mine = []
    t = threading.Thread(target=wait_on, args=("payroll.w", LOCKER, mine))
    t.start()
    time.sleep(0.3)
    check(not mine, "the honest waiter waits: %s" % (mine,))
    t0 = time.time()
    release(P1, "payroll.w", g[2]["lease"], token=OPS)
    t.join(10 * SCALE)
    check(mine and mine[0][0] == 200, "honest waiter granted on release: %s" % (mine,))
    print("honest waiter woken %.0f ms after the release, beside 4 parked hog waiters"
          % ((time.time() - t0) * 1000))
    if mine and mine[0][0] == 200:
        release(P1, "payroll.w", mine[0][2]["lease"], token=LOCKER)
    release(P1, "hog.own", h[2]["lease"], token=HOG)
    for t in ts:
        t.join(10 * SCALE)
    granted = [r for r in results if r[0] == 200]
    check(len(granted) >= 1, "a parked hog waiter got the lock after the release")
    for r in granted:
        release(P1, "hog.own", r[2]["lease"], token=HOG)


def rate():
    # fast: acquire_rate=5 (a burst of 5, then 5 per second).
    statuses = []
    for i in range(12):
        r = acquire(P1, "fast.r%d" % i, token=FAST, ttl_ms=1000)
        statuses.append(r)
    limited = [r for r in statuses if r[0] == 429]
    check(5 <= 12 - len(limited) <= 7, "fast's 12 quick acquires: %s granted" % (12 - len(limited),))
    check(limited and all(code(r) == "rate_limited" and r[1].get("retry-after") == "1"
                          and 0 < r[2]["error"]["retry_after_ms"] <= 1000 for r in limited),
          "rate_limited replies: %s" % ([(r[0], r[1].get("retry-after"), r[2]) for r in limited[:2]],))
    time.sleep(1.1)
    r = acquire(P1, "fast.later", token=FAST, ttl_ms=1000)
    check(r[0] == 200, "after a second, fast may acquire again: %s" % (r,))
    # another token is not slowed by fast's limit
    r = acquire(P1, "billing.notfast", token=B, ttl_ms=1000)
    check(r[0] == 200, "billing is not rate limited by fast: %s" % (r,))
    release(P1, "billing.notfast", r[2]["lease"], token=B)


def per_address():
    # P3: no --auth-file, --max-waiters-per-ip 2, --acquire-rate-per-ip 5.
    g = acquire(P3, "addr.own")
    check(g[0] == 200, "P3 takes addr.own (no token needed): %s" % (g,))
    time.sleep(1.1)  # let the bucket refill
    results = []

    def wait_on(out):
        out.append(acquire(P3, "addr.own", wait_ms=int(3000 * SCALE)))

    ts = [threading.Thread(target=wait_on, args=(results,)) for _ in range(4)]
    for t in ts:
        t.start()
    deadline = time.time() + 10 * SCALE
    while time.time() < deadline and sum(1 for r in results if r[0] == 429) < 2:
        time.sleep(0.02)
    check(sum(1 for r in results if code(r) == "too_many_waiters" and r[0] == 429) == 2,
          "per-address waiters past 2: %s" % ([(r[0], code(r)) for r in results],))
    release(P3, "addr.own", g[2]["lease"])
    for t in ts:
        t.join(10 * SCALE)
    for r in results:
        if r[0] == 200:
            release(P3, "addr.own", r[2]["lease"])
    time.sleep(1.1)
    st = [acquire(P3, "addr.r%d" % i, ttl_ms=1000)[0] for i in range(10)]
    check(st.count(429) >= 3 and st.count(200) >= 5, "per-address rate: %s" % (st,))


def reload_under_load():
    """SIGHUP while clients keep working: no request may fail."""
    stop = threading.Event()
    errors, done = [], [0]

    def worker(idx, keepalive):
        conn = http.client.HTTPConnection("127.0.0.1", P1, timeout=30 * SCALE) if keepalive else None
        name = "billing.load%d" % idx
        while not stop.is_set():
            try:
                g = call(P1, "POST", "/v1/locks/%s/acquire" % name, {"ttl_ms": 5000}, token=B, conn=conn)
                r = call(P1, "POST", "/v1/locks/%s/release" % name, {"lease": g[2].get("lease", "")},
                         token=B, conn=conn) if g[0] == 200 else g
                if g[0] != 200 or r[0] != 200:
                    errors.append((g[0], g[2], r[0]))
                done[0] += 1
            except Exception as e:  # a dropped connection is a failure too
                errors.append(repr(e))
                conn = http.client.HTTPConnection("127.0.0.1", P1, timeout=30 * SCALE) if keepalive else None

    ts = [threading.Thread(target=worker, args=(i, i % 2 == 0)) for i in range(3)]
    for t in ts:
        t.start()
    original = open(E["AUTH_FILE"]).read()
    r = acquire(P1, "new.x", token=NEW)
    check(r[0] == 401, "the new token before the reload: %s" % (r[0],))
    with open(E["AUTH_FILE"] + ".tmp", "w") as f:
        f.write(original + E["NEW_LINE"] + "\n")
    os.rename(E["AUTH_FILE"] + ".tmp", E["AUTH_FILE"])
    pid = int(E["P1_PID"])
    for _ in range(20):
        os.kill(pid, signal.SIGHUP)
        time.sleep(0.05)
    time.sleep(0.2)
    r = acquire(P1, "new.x", token=NEW)
    check(r[0] == 200, "the new token after the reload: %s" % (r,))
    if r[0] == 200:
        release(P1, "new.x", r[2]["lease"], token=NEW)
    # a file that does not parse: the old table stays, the log says why
    with open(E["AUTH_FILE"], "w") as f:
        f.write(original + "broken sha256:12 * lock\n")
    os.kill(pid, signal.SIGHUP)
    time.sleep(0.3)
    r = acquire(P1, "new.y", token=NEW)
    check(r[0] == 200, "a broken file keeps the tokens loaded before: %s" % (r,))
    if r[0] == 200:
        release(P1, "new.y", r[2]["lease"], token=NEW)
    log = open(E["PICKETD_LOG"]).read()
    bad_line = "line %d:" % (len(original.splitlines()) + 1)
    check("keeping the tokens loaded before" in log and bad_line in log,
          "the log says which line of the broken file: %s" % (log[-600:],))
    # taking the token out takes it away
    with open(E["AUTH_FILE"], "w") as f:
        f.write(original)
    os.kill(pid, signal.SIGHUP)
    time.sleep(0.3)
    r = acquire(P1, "new.z", token=NEW)
    check(r[0] == 401, "a removed token: %s" % (r[0],))
    stop.set()
    for t in ts:
        t.join(30 * SCALE)
    check(not errors, "requests failed across the reloads: %s" % (errors[:5],))
    check(done[0] > 50, "the load ran: %d cycles" % done[0])
    print("SIGHUP x22 under load: %d acquire+release cycles, %d failed" % (done[0], len(errors)))


def metrics_and_secrets():
    r = call(P1, "GET", "/metrics", token=OPS)
    text = r[2]
    for want in ['picket_auth_denied_total{token="billing",reason="prefix"}',
                 'picket_auth_denied_total{token="billing",reason="too_many_leases"}',
                 'picket_auth_denied_total{token="hog",reason="too_many_waiters"}',
                 'picket_auth_denied_total{token="fast",reason="rate_limited"}',
                 'picket_auth_denied_total{token="",reason="unknown_token"}',
                 'picket_grants_by_token_total{token="billing"}']:
        line = [l for l in text.splitlines() if l.startswith(want)]
        check(line and int(line[0].split()[-1]) > 0, "metric %s: %s" % (want, line))
    log = open(E["PICKETD_LOG"]).read()
    for name, tok in TOKENS.items():
        check(tok not in text, "%s appears in /metrics" % name)
        check(tok not in log, "%s appears in the log" % name)


def readyz_detail():
    """/readyz stays open under --auth-file, but where Redis is (the socket
    path here) and why it is not ready are for a token with the metrics
    verb; without --auth-file everyone sees them."""
    sock = E["REDIS_SOCK"]
    for who, kw in [("no token", {}), ("a bad token", {"token": "pkt_nobody"}),
                    ("a token without metrics", {"token": READER})]:
        r = call(P1, "GET", "/readyz", **kw)
        check(r[0] == 200 and sorted(r[2]) == ["replicas", "status"] and sock not in json.dumps(r[2]),
              "/readyz with %s: %s %s" % (who, r[0], r[2]))
    for port, kw in [(P1, {"token": OPS}), (P3, {})]:
        r = call(port, "GET", "/readyz", **kw)
        check(r[0] == 200 and r[2].get("primary") == sock,
              "/readyz (port %d) with %s: %s %s" % (port, kw or "no --auth-file", r[0], r[2]))
    # Redis paused past --redis-timeout-ms: 503 with the reason, to operators only
    os.kill(int(E["REDIS_PID"]), signal.SIGSTOP)
    try:
        stranger = call(P1, "GET", "/readyz")
        ops = call(P1, "GET", "/readyz", token=OPS)
    finally:
        os.kill(int(E["REDIS_PID"]), signal.SIGCONT)
    check(stranger[0] == 503 and code(stranger) == "store_unavailable" and
          sock not in json.dumps(stranger[2]) and "metrics verb" in json.dumps(stranger[2]),
          "/readyz, Redis paused, no token: %s %s" % (stranger[0], stranger[2]))
    check(ops[0] == 503 and code(ops) == "store_unavailable" and
          "metrics verb" not in json.dumps(ops[2]),
          "/readyz, Redis paused, ops token: %s %s" % (ops[0], ops[2]))


def redis(*args):
    import subprocess
    return subprocess.run(["redis-cli", "-s", E["REDIS_SOCK"]] + list(args), check=True,
                          capture_output=True, text=True).stdout.strip()


def evalsha_calls():
    for line in redis("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def quota_in_the_lock_call():
    """Issue 28: the token's count is kept by the lock call's own script:
    one EVALSHA per HTTP call, the count's entry moving with the lease; and
    concurrent acquires on the pipelined path never overshoot."""
    key = "picket:{/token/billing}:leases"
    before = evalsha_calls()
    g = acquire(P1, "billing.one", token=B, ttl_ms=60000)
    check(g[0] == 200, "billing.one: %s" % (g,))
    lease = g[2].get("lease")
    s1 = redis("ZSCORE", key, "billing.one")
    time.sleep(0.05)
    check(call(P1, "POST", "/v1/locks/billing.one/renew", {"lease": lease, "ttl_ms": 90000},
               token=B)[0] == 200, "renew billing.one")
    s2 = redis("ZSCORE", key, "billing.one")
    check(s1 and s2 and float(s2) > float(s1) + 20000,
          "a renewal moves the count's expiry: %r then %r" % (s1, s2))
    check(release(P1, "billing.one", lease, token=B)[0] == 200, "release billing.one")
    check(redis("ZSCORE", key, "billing.one") == "", "a release drops the count's entry")
    n = evalsha_calls() - before
    check(n == 3, "acquire, renew, release under max_leases: %d EVALSHA, want 3" % n)

    # 12 connections at once, max_leases 3: exactly 3 grants.
    barrier = threading.Barrier(12)
    out = [None] * 12
    conns = [http.client.HTTPConnection("127.0.0.1", P1, timeout=30 * SCALE) for _ in range(12)]
    for c in conns:
        c.connect()

    def one(i):
        barrier.wait()
        out[i] = call(P1, "POST", "/v1/locks/billing.c%d/acquire" % i, {"ttl_ms": 60000},
                      token=B, conn=conns[i])

    ts = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    granted = [(i, r[2]["lease"]) for i, r in enumerate(out) if r and r[0] == 200]
    refused = [r for r in out if r and r[0] == 429 and code(r) == "too_many_leases"]
    check(len(granted) == 3 and len(refused) == 9,
          "12 concurrent acquires at max_leases 3: %d granted, %d refused" %
          (len(granted), len(refused)))
    check(int(redis("ZCARD", key) or 0) == len(granted), "the count holds the grants")
    for i, lease in granted:
        call(P1, "POST", "/v1/locks/billing.c%d/release" % i, {"lease": lease}, token=B,
             conn=conns[i])
    for c in conns:
        c.close()
    check(int(redis("ZCARD", key) or 0) == 0, "all released: the count is empty")


def semaphores():
    # Prefixes and verbs apply to a semaphore's name; each permit counts
    # toward max_leases (billing: 3), with locks, on both picketd.
    sem = "/v1/semaphores/%s/%s"
    r = call(P1, "POST", sem % ("payroll.s", "acquire"), {"limit": 5}, token=B)
    check(r[0] == 403 and code(r) == "permission_denied", "semaphore outside prefixes: %s" % (r,))
    r = call(P1, "POST", sem % ("billing.s", "acquire"), {"limit": 5}, token=READER)
    check(r[0] == 403, "semaphore acquire with read only: %s" % (r,))
    lk = acquire(P1, "billing.sl", token=B, ttl_ms=60000)
    check(lk[0] == 200, "a lock beside the permits: %s" % (lk,))
    permits = []
    for port in (P1, P2):
        g = call(port, "POST", sem % ("billing.s", "acquire"), {"limit": 5, "ttl_ms": 60000},
                 token=B)
        check(g[0] == 200, "permit on port %d: %s" % (port, g))
        permits.append(g[2].get("lease"))
    r = call(P1, "POST", sem % ("billing.s", "acquire"), {"limit": 5}, token=B)
    check(r[0] == 429 and code(r) == "too_many_leases", "a 4th lease as a permit: %s" % (r,))
    # another token's release of a permit is lost: lease ids are bound to tokens
    r = call(P2, "POST", sem % ("billing.s", "release"), {"lease": permits[0]}, token=OPS)
    check(r[0] == 409 and code(r) == "lease_lost", "another token's release: %s" % (r,))
    g = call(P1, "GET", "/v1/semaphores/billing.s", token=READER)
    check(g[0] == 200 and g[2].get("held") == 2, "GET with read: %s" % (g,))
    for lease in permits:
        r = call(P2, "POST", sem % ("billing.s", "release"), {"lease": lease}, token=B)
        check(r[0] == 200, "release a permit: %s" % (r,))
    check(release(P1, "billing.sl", lk[2]["lease"], token=B)[0] == 200, "release billing.sl")
    # read/write locks the same way: prefixes, and each lease counts
    rw = "/v1/rwlocks/%s/%s"
    r = call(P1, "POST", rw % ("payroll.rw", "acquire"), {"mode": "read"}, token=B)
    check(r[0] == 403, "rwlock outside prefixes: %s" % (r,))
    got = []
    for port in (P1, P2, P1):
        g = call(port, "POST", rw % ("billing.rw", "acquire"), {"mode": "read", "ttl_ms": 60000},
                 token=B)
        check(g[0] == 200, "read lease on port %d: %s" % (port, g))
        got.append(g[2].get("lease"))
    r = call(P2, "POST", rw % ("billing.rw", "acquire"), {"mode": "read"}, token=B)
    check(r[0] == 429 and code(r) == "too_many_leases", "a 4th read lease: %s" % (r,))
    for lease in got:
        r = call(P1, "POST", rw % ("billing.rw", "release"), {"lease": lease}, token=B)
        check(r[0] == 200, "release a read lease: %s" % (r,))


def operators():
    # list: the verb, and only names under the token's prefixes
    g1 = acquire(P1, "billing.op1", token=B, ttl_ms=30000)
    g2 = acquire(P1, "payroll.op1", token=OPS, ttl_ms=30000)
    check(g1[0] == 200 and g2[0] == 200, "operators: acquires: %s %s" % (g1, g2))
    r = call(P1, "GET", "/v1/locks?limit=1000", token=LISTER)
    names = [e["name"] for e in r[2].get("locks", [])] if r[0] == 200 else []
    check(r[0] == 200 and "billing.op1" in names and "payroll.op1" not in names,
          "lister sees billing.* only: %s %s" % (r[0], names))
    r = call(P1, "GET", "/v1/locks?prefix=payroll.", token=LISTER)
    # a prefix outside the token's is refused outright (issue 39): an empty
    # page would still carry a cursor, and a cursor must never name what
    # the token may not see
    check(r[0] == 403 and r[2]["error"]["code"] == "permission_denied",
          "lister asks for payroll.: %s" % (r,))
    r = call(P1, "GET", "/v1/locks", token=B)
    check(r[0] == 403 and "'list'" in r[2]["error"]["message"], "billing lists: %s" % (r,))
    r = call(P1, "GET", "/v1/locks")
    check(r[0] == 401, "a stranger lists: %s" % (r[0],))
    # break: the admin verb, and the name under its prefixes
    r = call(P1, "POST", "/v1/locks/billing.op1/break", {}, token=B)
    check(r[0] == 403 and "'admin'" in r[2]["error"]["message"], "billing breaks: %s" % (r,))
    r = call(P1, "POST", "/v1/locks/payroll.op1/break", {}, token=ADMIN)
    check(r[0] == 403, "admin breaks outside its prefixes: %s" % (r,))
    r = call(P2, "POST", "/v1/locks/billing.op1/break", {}, token=ADMIN)
    check(r[0] == 200 and r[2]["broken"] is True and r[2]["fence"] > g1[2]["fence"],
          "admin breaks billing.op1 on the other picketd: %s" % (r,))
    r = renew(P1, "billing.op1", g1[2]["lease"], token=B)
    # (billing has no admin verb: it is told that an operator broke it,
    # not which token did; docs/security.md)
    check(r[0] == 409 and "broken by an operator at " in r[2]["error"]["message"]
          and "admin" not in r[2]["error"]["message"], "the broken holder renews: %s" % (r,))
    release(P1, "payroll.op1", g2[2]["lease"], token=OPS)
    # whoami
    r = call(P1, "GET", "/v1/whoami", token=B)
    check(r[0] == 200 and r[2] == {"token": "billing", "verbs": ["lock", "read"],
                                   "prefixes": ["billing."]}, "billing's whoami: %s" % (r,))
    r = call(P1, "GET", "/v1/whoami")
    check(r[0] == 401, "a stranger's whoami: %s" % (r[0],))
    # without --auth-file a loopback caller may break
    g = acquire(P3, "p3.op1")
    r = call(P3, "POST", "/v1/locks/p3.op1/break")
    check(r[0] == 200 and r[2]["broken"] is True, "a local break without auth: %s %s" % (g, r))


def main():
    for f in [unauthenticated, permissions, operators, lease_binding, max_leases, semaphores,
              quota_in_the_lock_call,
              waiters, rate, per_address,
              reload_under_load, metrics_and_secrets, readyz_detail]:
        t0 = time.time()
        f()
        print("%-20s %.1f s" % (f.__name__, time.time() - t0), flush=True)
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("all auth checks passed")


main()
