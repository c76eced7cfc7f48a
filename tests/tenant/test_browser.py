#!/usr/bin/env python3
"""test_browser: a web page in the operator's browser cannot drive picketd.

picketd runs as docs/console.md says: on loopback, without --auth-file.
The requests below are the ones a browser sends for a page on
http://evil.example (Origin, Sec-Fetch-Site, a text/plain or form body, no
body at all) and, after DNS rebinding, for a page whose own name now points
at 127.0.0.1 (Host: rebind.evil.example:PORT, Origin that same name):

  * a body-less cross-site POST .../break is 403 forbidden_origin, and the
    lock is still held by its owner with the same fence;
  * a text/plain (or form, or untyped) POST .../acquire of an hour is 403
    with the browser's headers and 415 unsupported_media_type without them,
    and no lease is taken;
  * with a rebinding Host every path is 421 misdirected_request, the
    listing and the console included, and names no lock or owner; a break
    sent so is refused too, even with a matching Origin;
  * the console's own calls still work: same origin (127.0.0.1 and
    localhost), Sec-Fetch-Site same-origin, JSON bodies; so does curl's
    body-less POST .../break from loopback;
  * --allowed-hosts admits a named Host (PORT_NAMED runs with
    --allowed-hosts picket.example) and no other;
  * --loopback-trust off (PORT_NOTRUST) refuses a tokenless loopback break
    (403 permission_denied, the lock still held) and applies the address's
    waiter quota to loopback.

Usage: test_browser.py PORT PORT_NAMED PORT_NOTRUST
"""
import http.client
import json
import sys
import threading
import time

PORT, PORT_NAMED, PORT_NOTRUST = (int(a) for a in sys.argv[1:4])
EVIL = "http://evil.example"
JSON = {"Content-Type": "application/json"}


def call(method, path, headers=None, body=None, port=PORT):
    """One request on a fresh connection: (status, JSON or text). A Host in
    headers replaces the one http.client would send."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = body.encode() if isinstance(body, str) else body
    conn.request(method, path, body=data, headers=headers or {})
    r = conn.getresponse()
    raw = r.read().decode()
    conn.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def code(doc):
    return doc.get("error", {}).get("code") if isinstance(doc, dict) else None


def refused(st, doc, status, want, what):
    check(st == status and code(doc) == want, "%s: %d %s (got %s %s)" % (what, status, want, st,
                                                                        str(doc)[:160]))


def acquire(name, owner, port=PORT, ttl_ms=600000):
    st, g = call("POST", "/v1/locks/%s/acquire" % name, JSON,
                 json.dumps({"ttl_ms": ttl_ms, "owner": owner}), port)
    check(st == 200, "%s takes %s (curl-style, JSON)" % (owner, name))
    return g


def still_held(name, g, port=PORT):
    st, doc = call("GET", "/v1/locks/" + name, port=port)
    check(st == 200 and doc["held"] and doc["owner"] == g["owner"] and doc["fence"] == g["fence"],
          "%s is still held by %s with fence %d: %s" % (name, g["owner"], g["fence"], doc))


def never_granted(name, port=PORT):
    st, doc = call("GET", "/v1/locks/" + name, port=port)
    check(st == 200 and not doc["held"] and doc["fence"] == 0,
          "%s was never granted: %s" % (name, doc))


# ---- attack 1: a cross-site POST with no body breaks a held lock ---------
victim = acquire("victim", "alice")
for what, hdrs in [("Origin and Sec-Fetch-Site", {"Origin": EVIL, "Sec-Fetch-Site": "cross-site"}),
                   ("Origin only (a browser without Sec-Fetch-*)", {"Origin": EVIL}),
                   ("Sec-Fetch-Site cross-site only", {"Sec-Fetch-Site": "cross-site"}),
                   ("Sec-Fetch-Site same-site (a sibling subdomain)", {"Sec-Fetch-Site": "same-site"}),
                   ("Origin null (a sandboxed frame)", {"Origin": "null"}),
                   ("Origin on another port of this host", {"Origin": "http://127.0.0.1:1"})]:
    st, doc = call("POST", "/v1/locks/victim/break", hdrs)
    refused(st, doc, 403, "forbidden_origin", "body-less cross-site break, " + what)
still_held("victim", victim)

# ---- attack 2: a text/plain POST takes a lock for an hour ----------------
hour = json.dumps({"ttl_ms": 3600000, "owner": "evil"})
st, doc = call("POST", "/v1/locks/grab/acquire",
               {"Origin": EVIL, "Sec-Fetch-Site": "cross-site",
                "Content-Type": "text/plain;charset=UTF-8"}, hour)
refused(st, doc, 403, "forbidden_origin", "text/plain acquire from a page")
for ctype in ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
              "multipart/form-data; boundary=x", "application/jsonx"]:
    st, doc = call("POST", "/v1/locks/grab/acquire", {"Content-Type": ctype}, hour)
    refused(st, doc, 415, "unsupported_media_type",
            "an acquire body sent as %s, no Origin (an old browser)" % ctype)
# a body with no Content-Type from a page (a Blob of no type) carries
# Origin, and is refused for it; from a client, it is JSON as before
st, doc = call("POST", "/v1/locks/grab/acquire", {"Origin": EVIL}, hour)
refused(st, doc, 403, "forbidden_origin", "an acquire body of no type from a page")
st, doc = call("POST", "/v1/locks/victim/break", {"Content-Type": "application/x-www-form-urlencoded"}, "")
refused(st, doc, 415, "unsupported_media_type", "an empty form POSTed to break")
never_granted("grab")
still_held("victim", victim)

# ---- attack 3: DNS rebinding reads the listing with owners ---------------
rebind = "rebind.evil.example:%d" % PORT
for path in ["/v1/locks", "/v1/locks?prefix=v", "/v1/locks/victim", "/v1/locks/victim/events",
             "/ui/", "/ui/app.js", "/metrics", "/readyz", "/healthz", "/v1/whoami"]:
    st, doc = call("GET", path, {"Host": rebind, "Sec-Fetch-Site": "same-origin"})
    refused(st, doc, 421, "misdirected_request", "GET %s with a rebinding Host" % path)
    check("alice" not in json.dumps(doc) and "victim" not in json.dumps(doc),
          "the 421 of %s names no lock or owner" % path)
st, doc = call("HEAD", "/v1/locks", {"Host": rebind})
check(st == 421, "HEAD /v1/locks with a rebinding Host: 421 (got %d)" % st)
st, doc = call("POST", "/v1/locks/victim/break",
               {"Host": rebind, "Origin": "http://" + rebind, "Sec-Fetch-Site": "same-origin"})
refused(st, doc, 421, "misdirected_request", "a rebound page's break (its Origin matches its Host)")
st, doc = call("POST", "/v1/locks/grab/acquire",
               {"Host": rebind, "Origin": "http://" + rebind, "Content-Type": "application/json"}, hour)
refused(st, doc, 421, "misdirected_request", "a rebound page's JSON acquire")
for host in ["rebind.evil.example", "localhost.evil.example", "127.0.0.1.nip.io:%d" % PORT]:
    st, doc = call("GET", "/v1/locks", {"Host": host})
    refused(st, doc, 421, "misdirected_request", "GET /v1/locks with Host " + host)
still_held("victim", victim)
never_granted("grab")

# ---- the console's own calls still work ----------------------------------
for host in ["127.0.0.1:%d" % PORT, "localhost:%d" % PORT, "LOCALHOST.:%d" % PORT]:
    page = {"Host": host, "Sec-Fetch-Site": "same-origin"}
    st, doc = call("GET", "/ui/", page)
    check(st == 200 and "<html" in doc.lower(), "the console's page with Host %s" % host)
    st, doc = call("GET", "/v1/locks", page)
    check(st == 200 and any(e["name"] == "victim" and e["owner"] == "alice" for e in doc["locks"]),
          "the console's listing with Host %s" % host)
own = "http://localhost:%d" % PORT
fetch = {"Host": "localhost:%d" % PORT, "Origin": own, "Sec-Fetch-Site": "same-origin",
         "Content-Type": "application/json"}
st, doc = call("POST", "/v1/locks/victim/break", fetch, "{}")
check(st == 200 and doc.get("broken") is True, "the console's break (same origin, JSON): %s" % doc)
st, g = call("POST", "/v1/locks/mine/acquire", dict(fetch, Origin="https://localhost:%d" % PORT),
             json.dumps({"ttl_ms": 60000, "owner": "console"}))
check(st == 200, "a same-origin JSON acquire behind a TLS proxy (https Origin): %s" % g)
st, doc = call("POST", "/v1/locks/mine/release", {"Content-Type": "application/json; charset=utf-8"},
               json.dumps({"lease": g["lease"]}))
check(st == 200 and doc.get("released"), "a release with JSON; charset=utf-8: %s" % doc)
again = acquire("victim", "bob")
st, doc = call("POST", "/v1/locks/victim/break")
check(st == 200 and doc.get("broken") is True, "curl -X POST .../break (no body, no type) on loopback")
st, doc = call("GET", "/v1/locks", {"Host": "[::1]:%d" % PORT})
check(st == 200, "an IPv6 literal Host is answered")

# ---- --allowed-hosts admits a named host --------------------------------
named = "picket.example:%d" % PORT_NAMED
st, doc = call("GET", "/v1/locks", {"Host": named}, port=PORT_NAMED)
check(st == 200 and "locks" in doc, "--allowed-hosts picket.example: GET /v1/locks answered")
st, g = call("POST", "/v1/locks/named/acquire",
             {"Host": named, "Origin": "http://" + named, "Content-Type": "application/json"},
             json.dumps({"ttl_ms": 60000, "owner": "named"}), port=PORT_NAMED)
check(st == 200, "--allowed-hosts: a same-origin acquire through picket.example: %s" % g)
st, doc = call("POST", "/v1/locks/named/break",
               {"Host": named, "Origin": EVIL, "Sec-Fetch-Site": "cross-site"}, port=PORT_NAMED)
refused(st, doc, 403, "forbidden_origin", "--allowed-hosts: another origin through the named host")
st, doc = call("GET", "/v1/locks", {"Host": "other.example:%d" % PORT_NAMED}, port=PORT_NAMED)
refused(st, doc, 421, "misdirected_request", "--allowed-hosts picket.example: other.example")
still_held("named", g, PORT_NAMED)

# ---- --loopback-trust off: loopback is an ordinary address ---------------
held = acquire("trusted", "carol", port=PORT_NOTRUST)
st, doc = call("POST", "/v1/locks/trusted/break", port=PORT_NOTRUST)
refused(st, doc, 403, "permission_denied", "--loopback-trust off: a tokenless loopback break")
still_held("trusted", held, PORT_NOTRUST)
st, doc = call("GET", "/v1/whoami", port=PORT_NOTRUST)
check(st == 200 and "admin" not in doc["verbs"], "--loopback-trust off: whoami has no admin: %s" % doc)
# --max-waiters 4 there: its auto per-address quota is 1 waiter, now for loopback too
first = {}
waiter = threading.Thread(target=lambda: first.update(r=call(
    "POST", "/v1/locks/trusted/acquire", JSON, json.dumps({"ttl_ms": 1000, "wait_ms": 60000}),
    PORT_NOTRUST)))
waiter.start()


def waiters(port):
    st, text = call("GET", "/metrics", port=port)
    for line in text.splitlines():
        if line.startswith("picket_waiters "):
            return float(line.split()[1])
    return 0


deadline = time.monotonic() + 60
while waiters(PORT_NOTRUST) < 1 and time.monotonic() < deadline and waiter.is_alive():
    time.sleep(0.05)  # the first waiter parks; only then is the second one over the quota
check(waiters(PORT_NOTRUST) == 1, "--loopback-trust off: loopback's first waiter waits")
second = call("POST", "/v1/locks/trusted/acquire", JSON,
              json.dumps({"ttl_ms": 1000, "wait_ms": 1000}), PORT_NOTRUST)
refused(*second, 429, "too_many_waiters", "--loopback-trust off: loopback's second waiter")
st, doc = call("POST", "/v1/locks/trusted/release", JSON, json.dumps({"lease": held["lease"]}),
               PORT_NOTRUST)
check(st == 200, "the holder releases; the first waiter is granted")
waiter.join(90)
check(first.get("r", (0,))[0] == 200, "the first waiter was granted: %s" % (first.get("r"),))
print("test_browser.py: all checks passed")
