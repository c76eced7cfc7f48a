#!/usr/bin/env python3
"""test_conns: connection floods against live picketd (issue 16), each
started by test_conns.sh with a real redis-server.

The attack of issue 16: 4,096 sockets from one host, each dribbling a
header byte now and then, so that --connection-timeout-s never fires. The
attacker's sockets come from 127.0.0.2, honest clients from 127.0.0.1 (on
Linux all of 127/8 is loopback) or, where the cap per group would count
them with the attacker (all of loopback is one group, issue 28), from
OTHER: an address of this host that is not loopback (--other, or the
first one found).

  a) --max-connections-per-ip 64: past 64 the attacker's sockets are
     refused at once, the 64 stay open, and honest acquire/release cycles
     from OTHER (a new connection each) are served throughout; their
     latency is printed;
  b) no cap, --request-timeout-ms 2000 and --max-connections 4096: the
     attack takes every slot, yet each dribbler is cut (a bare 408, then
     the close) at its deadline though it keeps sending, and an honest
     client that came after them is served within a few deadlines;
  c) on (b)'s picketd: a slow but honest request (headers and body in
     pieces, done within the deadline) is served; a waiting acquire longer
     than the deadline is granted, not cut; an idle keep-alive connection
     and a new connection silent for longer than the deadline (but under
     --connection-timeout-s) serve their next request; pipelined requests
     are all answered; none of them is counted as cut;
  auto) the default: 300 connections from 127.0.0.2 are all let in
     (loopback's cap is half of --max-connections), and from OTHER (if
     there is one) only 256.

Issue 28: per-address caps stopped one address only.
  loop16) the defaults but --max-connections 1024: 1,024 sockets from 16
     loopback addresses (64 each) hold at most 512 slots (all of loopback
     is one group, capped at half), and an honest client from OTHER is
     served throughout;
  reserve) --auth-file, --max-connections 256 (so 32 slots kept for
     tokens), no cap per group: 400 sockets without a token from 16
     loopback addresses never hold more than 224, and acquire/release
     cycles with a token, on a new connection each, are all served;
  authgroup) --auth-file, --max-connections-per-ip 64: 200 sockets without
     a token from 127.0.0.1 hold 64 slots, and cycles with a token from the
     same 127.0.0.1 are all served (each closes the group's oldest
     connection without a token);
  ipv6) --max-connections-per-ip 64 with the default --ipv6-prefix-len 64:
     256 sockets from 16 addresses of fd00:6::/64 hold 64 slots, and a
     client from fd00:7::1 (another /64) is served; with
     --ipv6-prefix-len 128 (--ipv6-whole) all 256 are let in. Both run
     --max-waiters-per-ip 1, which counts the same groups: with the /64,
     a second address of it gets 429 too_many_waiters while the first
     waits; with 128 it waits too. These need
     the addresses test_conns.sh gives loopback in its own network
     namespace.

Usage: test_conns.py [--cap PORT] [--deadline PORT] [--auto PORT] [--loop16 PORT]
                     [--reserve PORT] [--authgroup PORT] [--ipv6 PORT --ipv6-whole PORT]
                     [--other ADDR]
Each part runs when its picketd is named, so one can be run alone, or
against a picketd that lacks the flags (to see it fail).
Env: PICKET_TIME_SCALE (slow builds, e.g. sanitizers) widens time bounds.
"""

import argparse
import json
import os
import resource
import selectors
import socket
import statistics
import sys
import threading
import time

ATTACKERS = 4096
ATTACK_ADDR = "127.0.0.2"
HONEST_ADDR = "127.0.0.1"
CAP = 64                    # (a): picketd --max-connections-per-ip
DEADLINE_S = 2.0            # (b), (c): picketd --request-timeout-ms 2000
AUTO_CAP = 256              # the default's cap for addresses other than loopback
SCALE = float(os.environ.get("PICKET_TIME_SCALE", "1") or 1)
# A request that never ends: a request line, then header lines forever.
DRIBBLE = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + b"".join(b"X-Slow-%d: y\r\n" % i
                                                            for i in range(2000))


class Failures:
    def __init__(self):
        self.count = 0

    def check(self, ok, what):
        if not ok:
            self.count += 1
            print("FAIL " + what, flush=True)
        return ok


FAIL = Failures()


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))


TOKEN = os.environ.get("T_CONNS", "")  # a token of test_conns.sh's --auth-file
OTHER = None                            # set by main: see the top


def connect(port, src, host="127.0.0.1", timeout=5.0):
    family = socket.AF_INET6 if ":" in src else socket.AF_INET
    if family == socket.AF_INET6 and host == "127.0.0.1":
        host = "::1"
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(timeout)
    s.connect((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_reply(s, timeout):
    """One reply: (status, headers, body), or (None, {}, b"") when the
    connection closed or timed out first."""
    data, end = b"", time.monotonic() + timeout
    while True:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            lines = head.decode("latin-1").split("\r\n")
            hdr = dict((k.strip().lower(), v.strip()) for k, _, v in
                       (ln.partition(":") for ln in lines[1:]))
            n = int(hdr.get("content-length", "0"))
            if len(rest) >= n:
                return int(lines[0].split()[1]), hdr, rest[:n]
        left = end - time.monotonic()
        if left <= 0:
            return None, {}, b""
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except OSError:
            return None, {}, b""
        if not chunk:
            return None, {}, b""
        data += chunk


def request(method, path, body=None, token=None):
    data = b"" if body is None else json.dumps(body).encode()
    auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
    ctype = b"Content-Type: application/json\r\n" if data else b""
    return (b"%s %s HTTP/1.1\r\nHost: localhost\r\n%s%sContent-Length: %d\r\n\r\n"
            % (method.encode(), path.encode(), auth, ctype, len(data)) + data)


def call(s, method, path, body=None, timeout=5.0, token=None):
    """Sends one request on s and reads its reply: (status, JSON or None)."""
    try:
        s.sendall(request(method, path, body, token))
    except OSError:
        return None, None
    st, _, raw = read_reply(s, timeout * SCALE)
    try:
        return st, json.loads(raw) if raw else None
    except ValueError:
        return st, None


def cycle(port, name, timeout, src=HONEST_ADDR, host="127.0.0.1", token=None):
    """An honest client's acquire and release on a new connection from
    src: its duration in seconds, or None if it was not served."""
    t0 = time.monotonic()
    try:
        s = connect(port, src, host, timeout=timeout)
    except OSError:
        return None
    with s:
        st, j = call(s, "POST", "/v1/locks/%s/acquire" % name, {"ttl_ms": 10000}, timeout,
                     token)
        if st != 200 or not j:
            return None
        st, _ = call(s, "POST", "/v1/locks/%s/release" % name, {"lease": j["lease"]}, timeout,
                     token)
        if st != 200:
            return None
    return time.monotonic() - t0


def metric(port, line_start, src=HONEST_ADDR, host="127.0.0.1", token=None):
    """The value of the /metrics sample whose line starts with line_start."""
    with connect(port, src, host) as s:
        s.sendall(request("GET", "/metrics", token=token))
        st, _, raw = read_reply(s, 5 * SCALE)
    for ln in raw.decode().splitlines():
        if ln.startswith(line_start + " "):
            return float(ln.split()[-1])
    return None


def ms(seconds):
    return ("%.1f ms" if seconds < 0.01 else "%.0f ms") % (seconds * 1000)


class Flood:
    """n sockets from src, each sending DRIBBLE a byte at a time, a byte
    every `period` seconds (the first at once), in a thread of its own.
    For each socket it records when its first byte went, when the server
    closed it, and what the server sent before closing."""

    def __init__(self, port, n, src, period, host="127.0.0.1"):
        self.period, self.stop = period, threading.Event()
        self.sel = selectors.DefaultSelector()
        self.first, self.closed, self.got = {}, {}, {}
        for _ in range(n):
            s = connect(port, src, host)
            s.setblocking(False)
            self.got[s] = b""
            self.sel.register(s, selectors.EVENT_READ)
            self.first[s] = time.monotonic()
            self._send(s, DRIBBLE[:1])
        self.connected = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _close(self, s):
        if s not in self.closed:
            self.closed[s] = time.monotonic()
            self.sel.unregister(s)

    def _send(self, s, b):
        try:
            s.send(b)
        except BlockingIOError:
            pass
        except OSError:
            self._close(s)

    def _run(self):
        pos, due = 1, self.connected + self.period
        while not self.stop.is_set():
            if self.sel.get_map():
                for key, _ in self.sel.select(timeout=0.01):
                    s = key.fileobj
                    try:
                        b = s.recv(4096)
                    except BlockingIOError:
                        continue
                    except OSError:
                        b = b""
                    if b:
                        self.got[s] += b
                    else:
                        self._close(s)
            else:
                time.sleep(0.01)
            if time.monotonic() >= due:
                for s in [k.fileobj for k in list(self.sel.get_map().values())]:
                    self._send(s, DRIBBLE[pos % len(DRIBBLE):pos % len(DRIBBLE) + 1])
                pos, due = pos + 1, due + self.period

    def open_count(self):
        return len(self.first) - len(self.closed)  # read from another thread: a snapshot

    def wait_open(self, want, limit):
        """Waits up to `limit` seconds for at most `want` sockets to stay
        open; returns how long that took (or None)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            if self.open_count() <= want:
                return time.monotonic() - t0
            time.sleep(0.01)
        return None

    def end(self):
        self.stop.set()
        self.thread.join()
        for s in self.first:
            s.close()
        self.sel.close()


def part_cap(port):
    """(a) --max-connections-per-ip 64 against the flood."""
    print("(a) %d dribbling sockets from %s, --max-connections-per-ip %d"
          % (ATTACKERS, ATTACK_ADDR, CAP), flush=True)
    if OTHER is None:  # 127.0.0.1 is in the attacker's group: no honest client to try
        print("    SKIP (a): no address but loopback on this host, and all of loopback is one "
              "group", flush=True)
        return
    honest = dict(src=OTHER, host=OTHER)
    base = cycle(port, "conns-a-warm", 5, **honest)
    FAIL.check(base is not None, "(a) an acquire/release before the attack failed")
    t0 = time.monotonic()
    flood = Flood(port, ATTACKERS, ATTACK_ADDR, period=1.0)
    took = flood.wait_open(CAP, 3 * SCALE)
    print("    %d sockets connected in %s; all but %d closed by picketd %s after the last"
          % (ATTACKERS, ms(flood.connected - t0), flood.open_count(),
             ms(took) if took is not None else "(not within %.0f s)" % (3 * SCALE)), flush=True)
    FAIL.check(took is not None, "(a) %d of %d attacking sockets still open, want %d"
               % (flood.open_count(), ATTACKERS, CAP))
    if took is not None:  # refused at accept: closed before picketd sent a byte
        refused = sum(1 for s in flood.closed if not flood.got[s])
        FAIL.check(refused == ATTACKERS - CAP, "(a) %d sockets were closed without a byte, "
                   "want %d" % (refused, ATTACKERS - CAP))
    # Honest clients, a new connection each, every 10 ms for 4 s while the
    # attack runs.
    lat, failed, end = [], 0, time.monotonic() + 4
    while time.monotonic() < end:
        d = cycle(port, "conns-a-%d" % len(lat), 3, **honest)
        if d is None:
            failed += 1
        else:
            lat.append(d)
        time.sleep(0.01)
    if lat:
        print("    honest acquire+release on a new connection from %s under the attack: %d served, "
              "%d failed; median %s, max %s (before the attack: %s)"
              % (OTHER, len(lat), failed, ms(statistics.median(lat)), ms(max(lat)),
                 ms(base or 0)), flush=True)
    FAIL.check(failed == 0 and lat, "(a) %d honest cycles failed, %d served" % (failed, len(lat)))
    FAIL.check(not lat or max(lat) < 1.0 * SCALE,
               "(a) the slowest honest cycle took %s" % ms(max(lat or [0])))
    FAIL.check(flood.open_count() == CAP, "(a) %d attacking sockets open at the end, want %d"
               % (flood.open_count(), CAP))
    n = metric(port, 'picket_connections_refused_total{reason="per_ip"}', **honest)
    FAIL.check(n is not None and n >= ATTACKERS - CAP,
               "(a) picket_connections_refused_total{reason=\"per_ip\"} is %s" % n)
    flood.end()


def part_deadline(port):
    """(b) the flood with no cap and a 2 s request deadline."""
    print("(b) %d dribbling sockets (a byte every 0.5 s) from %s, no per-address cap, "
          "--request-timeout-ms %d, --max-connections %d"
          % (ATTACKERS, ATTACK_ADDR, DEADLINE_S * 1000, ATTACKERS), flush=True)
    before = metric(port, 'picket_connections_cut_total{reason="request_timeout"}') or 0
    t0 = time.monotonic()
    flood = Flood(port, ATTACKERS, ATTACK_ADDR, period=0.5)
    print("    %d sockets connected in %s" % (ATTACKERS, ms(flood.connected - t0)), flush=True)
    # Every slot is taken: the honest client waits in the listen backlog
    # (or is closed unserved, and tries again) until the dribblers are cut.
    h0, served, tries = time.monotonic(), None, 0
    bound = 3 * DEADLINE_S * SCALE
    while served is None and time.monotonic() - h0 < bound:
        tries += 1
        served = cycle(port, "conns-b", max(0.5, bound - (time.monotonic() - h0)))
    waited = time.monotonic() - h0
    print("    an honest acquire+release begun after the attack was served %s later (%d tries)"
          % (ms(waited), tries) if served is not None else
          "    an honest acquire+release was not served within %s" % ms(bound), flush=True)
    FAIL.check(served is not None, "(b) the honest client was not served within %s" % ms(bound))
    took = flood.wait_open(0, DEADLINE_S + 5 * SCALE)
    flood.stop.set()
    flood.thread.join()
    cut = [flood.closed[s] - flood.first[s] for s in flood.closed]
    with408 = sum(1 for s in flood.closed if flood.got[s].startswith(b"HTTP/1.1 408 "))
    if cut:
        print("    %d of %d dribblers cut; from its first byte to its close: min %s, median %s, "
              "max %s; %d got the 408 before the close"
              % (len(cut), ATTACKERS, ms(min(cut)), ms(statistics.median(cut)), ms(max(cut)),
                 with408), flush=True)
    FAIL.check(took is not None, "(b) %d dribblers still open %.1f s after the attack began"
               % (flood.open_count(), DEADLINE_S + 5 * SCALE))
    FAIL.check(not cut or min(cut) >= DEADLINE_S - 0.05,
               "(b) a dribbler was cut %s after its first byte, before its deadline" % ms(min(cut or [0])))
    FAIL.check(not cut or max(cut) <= DEADLINE_S + 2 * SCALE,
               "(b) a dribbler was cut only %s after its first byte" % ms(max(cut or [0])))
    FAIL.check(with408 >= len(cut) // 2, "(b) only %d of %d cut dribblers got a 408"
               % (with408, len(cut)))
    flood.end()
    n = metric(port, 'picket_connections_cut_total{reason="request_timeout"}')
    FAIL.check(n is not None and n - before == ATTACKERS,
               "(b) picket_connections_cut_total{reason=\"request_timeout\"} grew by %s, want %d"
               % (None if n is None else n - before, ATTACKERS))


def part_not_cut(port):
    """(c) what the deadline must leave alone."""
    print("(c) requests the %.0f s deadline must not cut" % DEADLINE_S, flush=True)
    before = metric(port, 'picket_connections_cut_total{reason="request_timeout"}')
    results = {}

    def slow_body():
        body = json.dumps({"ttl_ms": 10000, "owner": "slow but honest"}).encode()
        req = (b"POST /v1/locks/conns-slow/acquire HTTP/1.1\r\nHost: localhost\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        with connect(port, HONEST_ADDR) as s:
            t0 = time.monotonic()
            step = len(req) // 8 + 1
            for i in range(0, len(req), step):  # 8 pieces over about 1 s, half the deadline
                s.sendall(req[i:i + step])
                time.sleep(DEADLINE_S / 16)
            st, _, raw = read_reply(s, 5 * SCALE)
            results["slow body"] = (st == 200, "status %s, %s after its first piece"
                                    % (st, ms(time.monotonic() - t0)))
            if st == 200:
                call(s, "POST", "/v1/locks/conns-slow/release", {"lease": json.loads(raw)["lease"]})

    def waiter():
        with connect(port, HONEST_ADDR) as h, connect(port, HONEST_ADDR) as w:
            st, j = call(h, "POST", "/v1/locks/conns-wait/acquire", {"ttl_ms": 30000})
            if st != 200:
                results["waiting acquire"] = (False, "the holder's acquire: %s" % st)
                return
            w.sendall(request("POST", "/v1/locks/conns-wait/acquire",
                              {"ttl_ms": 10000, "wait_ms": int(DEADLINE_S * 3000)}))
            time.sleep(DEADLINE_S * 1.5)
            call(h, "POST", "/v1/locks/conns-wait/release", {"lease": j["lease"]})
            t0 = time.monotonic()
            st, _, raw = read_reply(w, 5 * SCALE)
            results["waiting acquire"] = (st == 200, "status %s, %s after the release, "
                                          "%.1f s after it was sent" % (st, ms(time.monotonic() - t0),
                                                                       DEADLINE_S * 1.5))

    def idle(fresh):
        with connect(port, HONEST_ADDR) as s:
            if not fresh:
                st, _ = call(s, "GET", "/healthz")
                if st != 200:
                    results["idle keep-alive"] = (False, "first request: %s" % st)
                    return
            time.sleep(DEADLINE_S * 1.5)
            st, _ = call(s, "GET", "/healthz")
            results["idle new connection" if fresh else "idle keep-alive"] = (
                st == 200, "status %s after %.1f s of silence" % (st, DEADLINE_S * 1.5))

    def pipelined():
        with connect(port, HONEST_ADDR) as s:
            s.sendall(request("GET", "/healthz") * 3 + request("GET", "/readyz") +
                      b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data, end = b"", time.monotonic() + 5 * SCALE
            while time.monotonic() < end:  # up to the close the last one asked for
                s.settimeout(max(0.01, end - time.monotonic()))
                try:
                    chunk = s.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
            n = data.count(b"HTTP/1.1 200 ")
            results["pipelined"] = (n == 5, "%d of 5 answered 200" % n)

    threads = [threading.Thread(target=f) for f in
               (slow_body, waiter, lambda: idle(False), lambda: idle(True), pipelined)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for what in ("slow body", "waiting acquire", "idle keep-alive", "idle new connection",
                 "pipelined"):
        ok, how = results.get(what, (False, "no result"))
        print("    %s: %s" % (what, how), flush=True)
        FAIL.check(ok, "(c) %s: %s" % (what, how))
    n = metric(port, 'picket_connections_cut_total{reason="request_timeout"}')
    FAIL.check(n == before, "(c) picket_connections_cut_total went from %s to %s" % (before, n))


def local_address():
    """An IPv4 address of this host that is not loopback, or None."""
    import fcntl
    import struct
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            try:  # SIOCGIFADDR: the interface's IPv4 address
                raw = fcntl.ioctl(u.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
        a = socket.inet_ntoa(raw[20:24])
        if not a.startswith("127."):
            return a
    return None


def part_auto(port):
    """auto) the default cap: loopback half of --max-connections, 256 for other addresses."""
    print("(auto) --max-connections-per-ip auto (the default)", flush=True)
    flood = Flood(port, 300, ATTACK_ADDR, period=1.0)
    time.sleep(0.5 * SCALE)
    print("    300 connections from %s: %d open" % (ATTACK_ADDR, flood.open_count()), flush=True)
    FAIL.check(flood.open_count() == 300, "(auto) loopback: %d of 300 open, want all"
               % flood.open_count())
    flood.end()
    addr = OTHER
    if addr is None:
        print("    no address but loopback on this host: the non-loopback cap is not checked")
        return
    flood = Flood(port, 300, addr, period=1.0, host=addr)
    took = flood.wait_open(AUTO_CAP, 3 * SCALE)
    print("    300 connections from %s: %d open" % (addr, flood.open_count()), flush=True)
    FAIL.check(took is not None and flood.open_count() == AUTO_CAP,
               "(auto) %s: %d of 300 open, want %d" % (addr, flood.open_count(), AUTO_CAP))
    flood.end()


def honest_cycles(part, port, seconds, **how):
    """Acquire/release cycles on a new connection each, every 10 ms for
    `seconds`; checks that all were served, and prints their latency."""
    lat, failed, end = [], 0, time.monotonic() + seconds
    while time.monotonic() < end:
        d = cycle(port, "conns-%s-%d" % (part, len(lat) + failed), 3, **how)
        if d is None:
            failed += 1
        else:
            lat.append(d)
        time.sleep(0.01)
    print("    honest acquire+release from %s%s: %d served, %d failed%s"
          % (how.get("src", HONEST_ADDR), " with a token" if how.get("token") else "",
             len(lat), failed, "; median %s, max %s" % (ms(statistics.median(lat)), ms(max(lat)))
             if lat else ""), flush=True)
    FAIL.check(failed == 0 and lat, "(%s) %d honest cycles failed, %d served"
               % (part, failed, len(lat)))


class Floods:
    """Floods from several source addresses at once: n sockets from each."""

    def __init__(self, port, n, srcs, period=1.0, host="127.0.0.1"):
        self.parts = [Flood(port, n, src, period, host) for src in srcs]

    def open_count(self):
        return sum(f.open_count() for f in self.parts)

    def settle(self, want_at_most, limit):
        """Waits up to `limit` seconds for at most want_at_most to stay open."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit and self.open_count() > want_at_most:
            time.sleep(0.02)
        return self.open_count()

    def end(self):
        for f in self.parts:
            f.end()


LOOPBACK16 = ["127.0.0.%d" % i for i in range(1, 17)]


def part_loop16(port):
    """loop16) 16 loopback addresses cannot take every slot."""
    print("(loop16) 1,024 sockets from 16 loopback addresses (64 each), the default cap, "
          "--max-connections 1024", flush=True)
    if OTHER is None:
        print("    SKIP (loop16): no address but loopback on this host", flush=True)
        return
    flood = Floods(port, 64, LOOPBACK16)
    n = flood.settle(512, 3 * SCALE)
    print("    %d of 1,024 open" % n, flush=True)
    FAIL.check(n == 512, "(loop16) %d loopback sockets open, want 512 (half of "
               "--max-connections: all of loopback is one group)" % n)
    honest_cycles("loop16", port, 2, src=OTHER, host=OTHER)
    flood.end()


def part_reserve(port):
    """reserve) sockets without a token leave --reserved-auth-connections free."""
    print("(reserve) 400 sockets without a token from 16 loopback addresses, --auth-file, "
          "--max-connections 256 (32 kept for tokens), no cap per group", flush=True)
    name = 'picket_connections_cut_total{reason="unauthenticated"}'
    before = metric(port, name, token=TOKEN) or 0
    flood = Floods(port, 25, LOOPBACK16)
    n = flood.settle(224, 3 * SCALE)
    print("    %d of 400 open" % n, flush=True)
    FAIL.check(n <= 224, "(reserve) %d sockets without a token open, want at most 224" % n)
    honest_cycles("reserve", port, 2, token=TOKEN)
    n = flood.open_count()
    FAIL.check(n <= 224, "(reserve) %d sockets without a token open at the end" % n)
    cut = metric(port, name, token=TOKEN)
    grew = None if cut is None else cut - before
    print("    closed to make room: %s" % grew, flush=True)
    FAIL.check(grew is not None and grew >= 400 - 224, "(reserve) %s grew by %s" % (name, grew))
    flood.end()


def part_authgroup(port):
    """authgroup) a token gets in from a group its flood has filled."""
    print("(authgroup) 200 sockets without a token from %s, --auth-file, "
          "--max-connections-per-ip %d" % (HONEST_ADDR, CAP), flush=True)
    flood = Floods(port, 200, [HONEST_ADDR])
    n = flood.settle(CAP, 3 * SCALE)
    print("    %d of 200 open" % n, flush=True)
    FAIL.check(n == CAP, "(authgroup) %d open, want %d" % (n, CAP))
    honest_cycles("authgroup", port, 2, token=TOKEN)
    n = flood.open_count()
    FAIL.check(n <= CAP, "(authgroup) %d sockets without a token open at the end" % n)
    flood.end()


def part_ipv6(port, whole_port):
    """ipv6) one /64 is one group; --ipv6-prefix-len 128 undoes it."""
    srcs = ["fd00:6::%d" % i for i in range(1, 17)]  # as test_conns.sh added them
    print("(ipv6) 256 sockets from 16 addresses of fd00:6::/64, --max-connections-per-ip %d"
          % CAP, flush=True)
    flood = Floods(port, 16, srcs, host="::1")
    n = flood.settle(CAP, 3 * SCALE)
    print("    --ipv6-prefix-len 64 (the default): %d of 256 open" % n, flush=True)
    FAIL.check(n == CAP, "(ipv6) %d sockets of one /64 open, want %d" % (n, CAP))
    honest_cycles("ipv6", port, 1, src="fd00:7::1", host="::1")
    flood.end()
    flood = Floods(whole_port, 16, srcs, host="::1")
    time.sleep(0.5 * SCALE)
    n = flood.open_count()
    print("    --ipv6-prefix-len 128: %d of 256 open" % n, flush=True)
    FAIL.check(n == 256, "(ipv6) --ipv6-prefix-len 128: %d open, want all 256" % n)
    flood.end()
    # --max-waiters-per-ip 1 counts the same groups: a second address of
    # one /64 may not wait while the first waits; each address alone may.
    for p, want, lock in ((port, 429, "v6w64"), (whole_port, None, "v6w128")):
        holder = connect(p, "fd00:7::1", "::1")
        st, j = call(holder, "POST", "/v1/locks/%s/acquire" % lock, {"ttl_ms": 30000})
        FAIL.check(st == 200, "(ipv6) the waiters' lock: %s" % st)
        first = connect(p, "fd00:6::1", "::1")
        first.sendall(request("POST", "/v1/locks/%s/acquire" % lock,
                              {"ttl_ms": 1000, "wait_ms": 20000}))
        time.sleep(0.3 * SCALE)  # parked by now (no reply expected)
        second = connect(p, "fd00:6::2", "::1")
        st2, j2 = call(second, "POST", "/v1/locks/%s/acquire" % lock,
                       {"ttl_ms": 1000, "wait_ms": 20000}, timeout=0.5)
        code = (j2 or {}).get("error", {}).get("code")
        print("    --ipv6-prefix-len %s, --max-waiters-per-ip 1: a second waiter of the /64: %s %s"
              % ("64" if want else "128", st2, code or "(still waiting)"), flush=True)
        if want:
            FAIL.check(st2 == 429 and code == "too_many_waiters",
                       "(ipv6) two waiters of one /64 under --max-waiters-per-ip 1: %s %s" % (st2, code))
        else:
            FAIL.check(st2 is None, "(ipv6) --ipv6-prefix-len 128: the second address could not wait (%s)" % st2)
        call(holder, "POST", "/v1/locks/%s/release" % lock, {"lease": j["lease"]})
        for s in (holder, first, second):
            s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap", type=int, help="picketd --max-connections-per-ip 64")
    ap.add_argument("--deadline", type=int,
                    help="picketd --max-connections-per-ip 0 --request-timeout-ms 2000 "
                    "--max-connections 4096")
    ap.add_argument("--auto", type=int, help="picketd with the defaults, on 0.0.0.0")
    ap.add_argument("--loop16", type=int, help="picketd --max-connections 1024, on 0.0.0.0")
    ap.add_argument("--reserve", type=int, help="picketd --auth-file F --max-connections 256 "
                    "--max-connections-per-ip 0 ($T_CONNS a token of F)")
    ap.add_argument("--authgroup", type=int, help="picketd --auth-file F "
                    "--max-connections-per-ip 64")
    ap.add_argument("--ipv6", type=int, help="picketd --listen [::]:0 --max-connections-per-ip 64")
    ap.add_argument("--ipv6-whole", type=int, help="the same with --ipv6-prefix-len 128")
    ap.add_argument("--other", help="an address of this host that is not loopback")
    args = ap.parse_args()
    raise_fd_limit(ATTACKERS + 1024)
    global OTHER
    OTHER = args.other or local_address()
    start = time.monotonic()
    if args.auto:
        part_auto(args.auto)
    if args.cap:
        part_cap(args.cap)
    if args.deadline:
        part_deadline(args.deadline)
        part_not_cut(args.deadline)
    if args.loop16:
        part_loop16(args.loop16)
    if args.reserve:
        part_reserve(args.reserve)
    if args.authgroup:
        part_authgroup(args.authgroup)
    if args.ipv6 and args.ipv6_whole:
        part_ipv6(args.ipv6, args.ipv6_whole)
    elif args.ipv6 or args.ipv6_whole:
        ap.error("--ipv6 and --ipv6-whole go together")
    print("%.1fs, %d failures" % (time.monotonic() - start, FAIL.count))
    return 1 if FAIL.count else 0


if __name__ == "__main__":
    sys.exit(main())
