#!/usr/bin/env python3
"""test_conns: one token cannot hold every connection, and a token removed
by SIGHUP loses the connections it holds (issue 39, item 2).

picketd runs --auth-file --max-connections 64 --max-connections-per-ip 8
--max-connections-per-token 16. Tokens: reader (a., read only), a-lock
(a., lock and read), other (b., another tenant), ops (*, with metrics).

  cap) from 127.0.0.1, reader opens keep-alive connections one after the
     other, 48 in all, each with one GET of a lock of its own prefix: the
     first 16 are answered 200 and stay open; every later one is answered
     429 too_many_connections with Retry-After and then closed. Eight
     more sockets that send nothing fill the address's group. Another
     tenant's acquire, on a new connection from the same host, is served
     within seconds (it used to wait in the backlog until it timed out).
     The refusals are counted in picket_auth_denied_total under reader's
     name and in picket_connections_refused_total{reason="per_token"}.
     Closing one of reader's connections makes room for another.
  revoke) a-lock parks a waiting acquire and opens an event stream; other
     keeps a keep-alive connection. reader and a-lock leave the auth file,
     SIGHUP: reader's idle connections, a-lock's stream and its waiting
     acquire (answered 401 unauthenticated first) all end within seconds;
     other's connection serves its next request.
  watchers) a-lock opens event streams of locks and observe streams of
     elections (issue 40) on connections of their own, up to
     --max-watchers-per-client 4 in all: the next of either kind is 429
     too_many_watchers with Retry-After, while other (another token, the
     same address) observes at once; when one of a-lock's streams ends,
     another may open.

Usage: test_conns.py PORT [all|cap|revoke|watchers] (env T_READ, T_ALOCK, T_OTHER,
T_OPS: the tokens; REVOKE_CMD: a shell command that removes reader and
a-lock from the auth file and sends picketd SIGHUP).
"""
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contract"))
from contract_log import contract_log  # noqa: E402

PORT = int(sys.argv[1])
ONLY = sys.argv[2] if len(sys.argv) > 2 else "all"
READ, ALOCK, OTHER, OPS = (os.environ[k] for k in ("T_READ", "T_ALOCK", "T_OTHER", "T_OPS"))
CAP = 16
WATCHERS = 4  # --max-watchers-per-client
SCALE = float(os.environ.get("PICKET_TIME_SCALE", "1"))


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def connect(timeout=10):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout * SCALE)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def send(s, method, path, token, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n" % (method, path, token)
    if body is not None:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
    s.sendall(head.encode() + b"\r\n" + data)
    return data


class Reader:
    """Reads HTTP/1.1 responses off one socket."""

    def __init__(self, s):
        self.s, self.buf = s, b""

    def more(self):
        chunk = self.s.recv(65536)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def head(self):
        while b"\r\n\r\n" not in self.buf:
            self.more()
        raw, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for l in lines[1:]:
            k, v = l.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
        return status, hdrs

    def response(self):
        """(status, headers, body text) of the next whole response."""
        status, hdrs = self.head()
        n = int(hdrs.get("content-length", "0"))
        while len(self.buf) < n:
            self.more()
        body, self.buf = self.buf[:n].decode(), self.buf[n:]
        return status, hdrs, body


def call(s, rd, method, path, token, body=None):
    data = send(s, method, path, token, body)
    status, hdrs, raw = rd.response()
    contract_log(method, path, data.decode(), status, hdrs, raw)
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = raw
    return status, doc, hdrs


def code_of(doc):
    return doc.get("error", {}).get("code") if isinstance(doc, dict) else None


def closed_soon(s, rd, within):
    """True when the peer ends the stream within `within` seconds (what
    arrives before the end is read and dropped)."""
    s.settimeout(0.25)
    end = time.monotonic() + within * SCALE
    while time.monotonic() < end:
        try:
            rd.more()
            rd.buf = rd.buf[-4096:]
        except EOFError:
            return True
        except socket.timeout:
            continue
        except OSError:  # a reset is an end too
            return True
    return False


def still_open(s):
    s.settimeout(0.05)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except socket.timeout:
        return True
    except OSError:
        return False


def metric(name, labels=None):
    s = connect()
    send(s, "GET", "/metrics", OPS)
    status, _, text = Reader(s).response()
    s.close()
    check(status == 200, "/metrics: %s" % status)
    want = "%s{%s} " % (name, labels) if labels is not None else name + " "
    for line in text.splitlines():
        if line.startswith(want):
            return int(float(line[len(want):]))
    return None


def other_acquire(name, within):
    """Another tenant's acquire and release on a new connection: seconds taken."""
    t0 = time.monotonic()
    s = connect(timeout=within)
    rd = Reader(s)
    try:
        st, doc, _ = call(s, rd, "POST", "/v1/locks/%s/acquire" % name, OTHER, {"ttl_ms": 10000})
    except (socket.timeout, EOFError, OSError) as e:
        check(False, "another tenant's acquire of %s got no answer within %.0f s (%r)"
              % (name, within * SCALE, e))
    took = time.monotonic() - t0
    check(st == 200, "another tenant's acquire of %s: %s %s" % (name, st, doc))
    st, doc, _ = call(s, rd, "POST", "/v1/locks/%s/release" % name, OTHER, {"lease": doc["lease"]})
    check(st == 200, "its release: %s %s" % (st, doc))
    s.close()
    return took


def part_cap():
    print("(cap) reader opens 48 keep-alive connections from 127.0.0.1 "
          "(--max-connections-per-token %d)" % CAP, flush=True)
    denied = 'picket_auth_denied_total'
    before = metric(denied, 'token="reader",reason="too_many_connections"') or 0
    held, refused = [], 0
    for i in range(48):
        s = connect()
        rd = Reader(s)
        try:
            st, doc, hdrs = call(s, rd, "GET", "/v1/locks/a.x", READ)
        except (socket.timeout, EOFError, OSError) as e:
            check(False, "connection %d of reader: no answer (%r)" % (i + 1, e))
        if i < CAP:
            check(st == 200, "connection %d of reader: %s %s" % (i + 1, st, doc))
            held.append((s, rd))
            continue
        check(st == 429 and code_of(doc) == "too_many_connections",
              "connection %d of reader (past %d): %s %s, want 429 too_many_connections"
              % (i + 1, CAP, st, doc))
        check(hdrs.get("retry-after", "").isdigit(), "429 without Retry-After: %s" % hdrs)
        check("reader" in doc["error"]["message"], "the message: %s" % doc["error"]["message"])
        check(closed_soon(s, rd, 5), "connection %d of reader stayed open after its 429" % (i + 1))
        s.close()
        refused += 1
    print("    %d served and open, %d refused 429 too_many_connections and closed"
          % (len(held), refused), flush=True)
    for k, (s, _) in enumerate(held):
        check(still_open(s), "reader's connection %d was closed" % (k + 1))
    # The address's group without a token: 8 sockets that send nothing.
    idle = [connect() for _ in range(8)]
    took = other_acquire("b.cap", 10)
    print("    another tenant's acquire took %.3f s" % took, flush=True)
    check(took < 5 * SCALE, "another tenant's acquire took %.1f s" % took)
    after = metric(denied, 'token="reader",reason="too_many_connections"')
    check(after is not None and after - before == refused,
          "%s for reader grew by %s, want %d" % (denied, after and after - before, refused))
    n = metric("picket_connections_refused_total", 'reason="per_token"')
    check(n is not None and n >= refused, "picket_connections_refused_total per_token: %s" % n)
    # One of reader's connections closes: another may take its place.
    s, _ = held.pop()
    s.close()
    end = time.monotonic() + 5 * SCALE
    while True:
        s = connect()
        rd = Reader(s)
        st, doc, _ = call(s, rd, "GET", "/v1/locks/a.x", READ)
        if st == 200:
            held.append((s, rd))
            break
        s.close()
        check(time.monotonic() < end, "after one of reader's connections closed: %s %s" % (st, doc))
        time.sleep(0.1)
    print("    a closed connection of reader makes room for another", flush=True)
    for s in idle:
        s.close()
    return held


def part_revoke(held):
    print("(revoke) reader and a-lock leave the auth file; SIGHUP", flush=True)
    if not held:  # run alone: a few of reader's connections to revoke
        for _ in range(4):
            s = connect()
            rd = Reader(s)
            st, doc, _ = call(s, rd, "GET", "/v1/locks/a.x", READ)
            check(st == 200, "reader: %s %s" % (st, doc))
            held.append((s, rd))
    ops = connect()
    ops_rd = Reader(ops)
    st, doc, _ = call(ops, ops_rd, "POST", "/v1/locks/a.w/acquire", OPS, {"ttl_ms": 60000})
    check(st == 200, "ops takes a.w: %s %s" % (st, doc))
    ops_lease = doc["lease"]
    waiter = connect(timeout=30)
    wait_rd = Reader(waiter)
    send(waiter, "POST", "/v1/locks/a.w/acquire", ALOCK, {"ttl_ms": 10000, "wait_ms": 60000})
    stream = connect(timeout=30)
    stream_rd = Reader(stream)
    send(stream, "GET", "/v1/locks/a.x/events", ALOCK)
    st, _ = stream_rd.head()
    check(st == 200, "a-lock's event stream: %s" % st)
    mate = connect()
    mate_rd = Reader(mate)
    st, doc, _ = call(mate, mate_rd, "GET", "/v1/locks/b.x", OTHER)
    check(st == 200, "other's keep-alive connection: %s %s" % (st, doc))
    time.sleep(0.5 * SCALE)  # the waiter parked
    waiter.settimeout(0.2)
    try:
        check(waiter.recv(1, socket.MSG_PEEK) == b"", "a-lock's waiting acquire answered early")
    except socket.timeout:
        pass
    subprocess.run(os.environ["REVOKE_CMD"], shell=True, check=True)
    # The waiting acquire: 401 unauthenticated, then the close.
    waiter.settimeout(10 * SCALE)
    try:
        st, hdrs, raw = wait_rd.response()
        contract_log("POST", "/v1/locks/a.w/acquire", '{"ttl_ms": 10000, "wait_ms": 60000}', st,
                     hdrs, raw)
        code = code_of(json.loads(raw))
        print("    a-lock's waiting acquire: %s %s" % (st, code), flush=True)
        check(st == 401 and code == "unauthenticated",
              "a-lock's waiting acquire after SIGHUP: %s %s" % (st, raw))
    except EOFError:
        print("    a-lock's waiting acquire: closed without a reply", flush=True)
        check(False, "a-lock's waiting acquire was closed without its 401")
    except socket.timeout:
        check(False, "a-lock's waiting acquire still waits 10 s after SIGHUP")
    check(closed_soon(waiter, wait_rd, 5), "a-lock's waiting acquire: its connection stayed open")
    check(closed_soon(stream, stream_rd, 10), "a-lock's event stream still open 10 s after SIGHUP")
    for k, (s, rd) in enumerate(held):
        check(closed_soon(s, rd, 5), "reader's connection %d still open after SIGHUP" % (k + 1))
    print("    reader's %d connections, a-lock's stream and waiter: closed" % len(held), flush=True)
    st, doc, _ = call(mate, mate_rd, "GET", "/v1/locks/b.x", OTHER)
    check(st == 200, "other's keep-alive connection after SIGHUP: %s %s" % (st, doc))
    st, doc, _ = call(ops, ops_rd, "POST", "/v1/locks/a.w/release", OPS, {"lease": ops_lease})
    check(st == 200, "ops's keep-alive connection after SIGHUP: %s %s" % (st, doc))
    s = connect()
    st, doc, _ = call(s, Reader(s), "GET", "/v1/locks/a.x", READ)
    check(st == 401, "reader after SIGHUP: %s %s" % (st, doc))
    print("    other's and ops's connections serve on; reader is 401", flush=True)
    for s in (mate, ops, waiter, stream):
        s.close()


def open_stream(path, token):
    """A stream's GET on a connection of its own: (the open socket, or
    None when refused, the status, the refusal's JSON, the headers)."""
    s = connect(timeout=30)
    rd = Reader(s)
    send(s, "GET", path, token)
    st, hdrs = rd.head()
    if st == 200:
        return s, st, None, hdrs
    n = int(hdrs.get("content-length", "0"))
    while len(rd.buf) < n:
        rd.more()
    s.close()
    return None, st, json.loads(rd.buf[:n].decode()), hdrs


def streams_open(n):
    """Waits until picketd counts n open streams (it sees hang-ups soon)."""
    end = time.monotonic() + 10 * SCALE
    while metric("picket_event_streams") != n:
        check(time.monotonic() < end, "picket_event_streams: %s, want %d"
              % (metric("picket_event_streams"), n))
        time.sleep(0.05)


def part_watchers():
    print("(watchers) a-lock's event and observe streams (--max-watchers-per-client %d)"
          % WATCHERS, flush=True)
    paths = ["/v1/locks/a.s%d/events" % i for i in range(WATCHERS // 2)]
    paths += ["/v1/elections/a.e%d/observe" % i for i in range(WATCHERS - len(paths))]
    mine = []
    for path in paths:
        s, st, _, _ = open_stream(path, ALOCK)
        check(st == 200, "a-lock's stream %s: %s" % (path, st))
        mine.append(s)
    for path in ("/v1/elections/a.e9/observe", "/v1/elections/a.e0/observe", "/v1/locks/a.s9/events"):
        s, st, doc, hdrs = open_stream(path, ALOCK)
        check(st == 429 and code_of(doc) == "too_many_watchers" and hdrs.get("retry-after") == "1",
              "a-lock's stream %s past %d: %s %s %s" % (path, WATCHERS, st, doc, hdrs))
    theirs, st, _, _ = open_stream("/v1/elections/b.e0/observe", OTHER)
    check(st == 200, "other's observe while a-lock is at its cap: %s" % st)
    print("    a-lock's %d streams open, the next of either kind 429; other observes" % WATCHERS,
          flush=True)
    mine.pop().close()
    streams_open(WATCHERS)
    s, st, _, _ = open_stream("/v1/elections/a.e9/observe", ALOCK)
    check(st == 200, "a-lock's observe after one of its streams ended: %s" % st)
    for s in mine + [s, theirs]:
        s.close()
    streams_open(0)
    print("    one of a-lock's streams ends: another opens", flush=True)


held = part_cap() if ONLY in ("all", "cap") else []
if ONLY in ("all", "watchers"):
    part_watchers()
if ONLY in ("all", "revoke"):
    part_revoke(held)
print("test_conns: ok", flush=True)
