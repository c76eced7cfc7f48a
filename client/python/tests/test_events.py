"""Lock events (GET /v1/locks/{name}/events, docs/events.md): Client.watch
against a real picketd (each event with its fence, close from another
thread, a token, TLS), against small fake servers (a picketd without
events, a line over 8 KiB, the SSE framing), and the keeper of Client.lock
learning of a break from its watch, long before its next renewal."""
import http.client
import http.server
import json
import re
import statistics
import threading
import time
import unittest
import urllib.parse

from tests.env import SCALE, ClientCase, env, uniq, until
import picket


def open_streams(url):
    """picketd's gauge of open event streams (GET /metrics, no token)."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()
    m = re.search(r"^picket_event_streams (\d+)$", text, re.M)
    return int(m.group(1))


class FakeServer:
    """A loopback HTTP server whose handler is handle(request_handler); it
    replies without Content-Length and closes, as a stream ends."""

    def __init__(self, handle):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                handle(self)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def reply(h, status, body, ctype="application/json", length=True):
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    if length:
        h.send_header("Content-Length", str(len(body)))
    else:
        h.send_header("Connection", "close")
        h.close_connection = True
    h.end_headers()
    h.wfile.write(body)
    h.wfile.flush()


NOT_FOUND = json.dumps({"error": {"code": "not_found", "message": "no such lock action; use "
                                  "acquire, renew or release"}}).encode()


class Watch(ClientCase):
    def test_each_event_with_its_fence(self):
        name = uniq("py.ev.")
        with self.c.watch(name, timeout=10 * SCALE) as w:
            first = next(w)
            # state comes once picketd is subscribed: every event after it is seen
            self.assertEqual((first.type, first.name, first.held, first.fence, first.owner),
                             ("state", name, False, 0, None))
            g1 = self.c.acquire(name, ttl=30, owner="w1")
            self.c.renew(g1, ttl=20)
            self.c.release(g1)
            g2 = self.c.acquire(name, ttl=30, owner="w2")
            br = self.c.break_lock(name)
            g3 = self.c.acquire(name, ttl=0.3)  # left to expire
            got = []
            for ev in w:
                got.append(ev)
                if ev.type == "expired":
                    break
        want = [("granted", g1.fence), ("renewed", g1.fence), ("released", g1.fence),
                ("granted", g2.fence), ("broken", g2.fence), ("granted", g3.fence),
                ("expired", g3.fence)]
        self.assertEqual([(e.type, e.fence) for e in got], want, got)
        self.assertEqual((got[0].owner, got[0].ttl_ms, got[0].ttl), ("w1", 30000, 30.0))
        self.assertEqual(got[1].ttl_ms, 20000)
        self.assertEqual(got[3].owner, "w2")
        self.assertEqual(got[4].next_fence, br["fence"])
        self.assertEqual(got[4].by, "address loopback")
        self.assertIsNone(got[5].owner)
        now = time.time() * 1000
        for e in got:
            self.assertEqual(e.name, name)
            self.assertTrue(now - 60000 < e.time <= now + 5000, e)
        # what a holder of each grant makes of them
        self.assertTrue(got[4].ends(g2.fence))
        self.assertFalse(got[4].ends(g1.fence))
        self.assertTrue(got[3].ends(g1.fence))  # another's grant
        self.assertFalse(got[1].ends(g1.fence))  # its own renewal
        self.assertTrue(got[6].ends(g3.fence))
        self.assertTrue(w.closed)

    def test_state_of_a_held_lock_and_timeout(self):
        name = uniq("py.ev.")
        g = self.c.acquire(name, ttl=30, owner="holder")
        self.addCleanup(self.c.release, g)
        t0 = time.monotonic()
        events = list(self.c.watch(name, timeout=0.5))
        took = time.monotonic() - t0
        self.assertEqual([(e.type, e.held, e.fence, e.owner) for e in events],
                         [("state", True, g.fence, "holder")])
        self.assertTrue(25000 < events[0].ttl_ms <= 30000, events[0])
        self.assertFalse(events[0].ends(g.fence))
        self.assertTrue(0.45 <= took < 0.5 + 1.0 * SCALE, took)

    def test_close_from_another_thread(self):
        url = env("URL")
        before = open_streams(url)
        w = self.c.watch(uniq("py.ev."))
        self.assertEqual(next(w).type, "state")
        self.assertEqual(open_streams(url), before + 1)
        ended = {}

        def read():
            ended["events"] = list(w)  # blocks: nothing happens to the lock
            ended["at"] = time.monotonic()

        t = threading.Thread(target=read)
        t.start()
        time.sleep(0.2)
        t0 = time.monotonic()
        w.close()
        t.join(5)
        self.assertFalse(t.is_alive(), "close() did not wake the reading thread")
        self.assertEqual(ended["events"], [])
        self.assertLess(ended["at"] - t0, 0.5 * SCALE)
        w.close()  # twice is fine
        self.assertTrue(until(lambda: open_streams(url) == before, 5),
                        "picketd still counts the closed stream")

    def test_token_and_tls(self):
        name = uniq("py.ev.")
        reader = picket.Client(env("AUTH_URL"), token=env("T_READER"))
        with reader.watch(name, timeout=5) as w:
            self.assertEqual(next(w).type, "state")
        with self.assertRaises(picket.Unauthenticated):
            picket.Client(env("AUTH_URL"), token="").watch(name)
        with self.assertRaises(picket.PermissionDenied):
            reader.watch("other.x")  # outside the token's prefixes
        tls = picket.Client(env("TLS_URL"), cacert=env("TLS_CA"))
        with tls.watch(name, timeout=5) as w:
            ev = next(w)
            self.assertEqual((ev.type, ev.name, ev.held), ("state", name, False))
        with self.assertRaises(picket.PicketTransportError):
            picket.Client(env("TLS_URL"), cacert=env("TLS_OTHER_CA")).watch(name)


class FakeStreams(unittest.TestCase):
    def serve(self, handle):
        s = FakeServer(handle)
        self.addCleanup(s.close)
        return picket.Client(s.url, retries=0)

    def test_old_picketd(self):
        c = self.serve(lambda h: reply(h, 404, NOT_FOUND))
        with self.assertRaises(picket.EventsUnsupported) as cm:
            c.watch("x")
        self.assertIsInstance(cm.exception, picket.NotFound)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))

    def test_framing(self):
        body = (b": a comment\r\n"
                b"event: granted\r\n"
                b"data: {\"name\":\"x\",\r\n"
                b"data: \"fence\":7}\r\n"
                b"id: 1\r\n"
                b"\r\n"
                b"event: nothing\n\n"          # no data: not an event
                b"data:{\"time\":5}\n\n"       # no space after the colon, no event line
                b"event: heartbeat\ndata: {\"time\":6}\n\n")
        c = self.serve(lambda h: reply(h, 200, body, "text/event-stream", length=False))
        w = c.watch("x", timeout=5)
        events = []
        with self.assertRaises(picket.PicketTransportError) as cm:
            for e in w:
                events.append((e.type, e.name, e.fence, e.time))
        self.assertEqual(events, [("granted", "x", 7, None), ("message", None, None, 5),
                                  ("heartbeat", None, None, 6)])
        self.assertIn("ended the event stream", str(cm.exception))

    def test_line_over_8_kib(self):
        long = b"data: {\"name\":\"" + b"a" * 9000 + b"\"}\n\n"
        c = self.serve(lambda h: reply(h, 200, b"event: state\n" + long, "text/event-stream",
                                       length=False))
        with self.assertRaises(picket.PicketTransportError) as cm:
            next(c.watch("x", timeout=5))
        self.assertIn("over 8192 bytes", str(cm.exception))

    def test_silent_stream(self):
        def handle(h):
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.end_headers()
            h.wfile.flush()
            time.sleep(3)

        c = self.serve(handle)
        t0 = time.monotonic()
        with self.assertRaises(picket.PicketTransportError) as cm:
            next(c.watch("x", idle=0.3))
        self.assertIn("not even a heartbeat", str(cm.exception))
        self.assertLess(time.monotonic() - t0, 2)


class Proxy:
    """Forwards every request to a real picketd but answers the events
    path 404, as a picketd older than events does."""

    def __init__(self, target):
        u = urllib.parse.urlsplit(target)

        def handle(h):
            if h.path.endswith("/events"):
                return reply(h, 404, NOT_FOUND)
            n = int(h.headers.get("Content-Length") or 0)
            body = h.rfile.read(n) if n else None
            up = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            try:
                up.request(h.command, h.path, body=body,
                           headers={k: v for k, v in h.headers.items()
                                    if k.lower() in ("content-type", "authorization")})
                r = up.getresponse()
                reply(h, r.status, r.read())
            finally:
                up.close()

        self.server = FakeServer(handle)
        self.url = self.server.url


class KeeperWatches(ClientCase):
    def test_break_is_known_at_once(self):
        # ttl 30 s: the next renewal is 10 s away, so only the watch can
        # tell the keeper of the break this soon.
        took = []
        for _ in range(10):
            name = uniq("py.kw.")
            calls = []
            held = self.c.lock(name, ttl=30, on_lost=calls.append)
            with self.assertRaises(picket.LeaseLost):
                with held as lease:
                    self.assertTrue(held.watching.wait(5 * SCALE), "the keeper never watched")
                    t0 = time.monotonic()
                    self.c.break_lock(name)
                    self.assertTrue(lease.lost.wait(5 * SCALE), "the break was not noticed")
                    took.append(time.monotonic() - t0)
                    self.assertFalse(lease.valid())
            self.assertEqual(calls, [lease])
        median = statistics.median(took)
        print(f"\n  keeper learned of a break after {median * 1000:.1f} ms (median of "
              f"{len(took)}; max {max(took) * 1000:.1f} ms; ttl 30 s, renewal every 10 s)")
        self.assertLess(max(took), 2.0 * SCALE, took)

    def test_stopping_ends_the_watch(self):
        url = env("URL")
        before = open_streams(url)
        name = uniq("py.kw.")
        held = self.c.lock(name, ttl=30)
        with held:
            self.assertTrue(held.watching.wait(5 * SCALE))
            self.assertEqual(open_streams(url), before + 1)
            t0 = time.monotonic()
        took = time.monotonic() - t0
        self.assertLess(took, 1.0 * SCALE, "exit waited for the watch")
        self.assertFalse(any(t.is_alive() for t in threading.enumerate()
                             if t.name.endswith(":" + name)))
        self.assertFalse(self.c.inspect(name)["held"])
        self.assertTrue(until(lambda: open_streams(url) == before, 5),
                        "picketd still counts the keeper's stream")

    def test_watch_off(self):
        url = env("URL")
        before = open_streams(url)
        held = self.c.lock(uniq("py.kw."), ttl=30, watch=False)
        with held:
            time.sleep(0.3)
            self.assertFalse(held.watching.is_set())
            self.assertEqual(open_streams(url), before)

    def test_renews_only_against_an_old_picketd(self):
        p = Proxy(env("URL"))
        self.addCleanup(p.server.close)
        c = picket.Client(p.url)
        name = uniq("py.kw.")
        held = c.lock(name, ttl=0.6)
        with self.assertRaises(picket.LeaseLost):
            with held as lease:
                self.assertTrue(until(lambda: held.watch_error is not None, 5))
                self.assertIsInstance(held.watch_error, picket.EventsUnsupported)
                time.sleep(1.5)  # past two TTLs: renewals alone keep it
                self.assertTrue(lease.valid())
                self.assertTrue(self.c.inspect(name)["held"])
                self.c.break_lock(name)
                # known at the next renewal (every 0.2 s), not before
                self.assertTrue(lease.lost.wait(2 * SCALE))
        self.assertFalse(held.watching.is_set())

    def test_renews_only_without_the_read_verb(self):
        one = picket.Client(env("AUTH_URL"), token=env("T_ONE"))  # lock, no read
        held = one.lock(uniq("one."), ttl=0.6)
        with held as lease:
            self.assertTrue(until(lambda: held.watch_error is not None, 5))
            self.assertIsInstance(held.watch_error, picket.PermissionDenied)
            time.sleep(1.0)
            self.assertTrue(lease.valid())
        self.assertFalse(lease.lost.is_set())


if __name__ == "__main__":
    unittest.main()
