"""Client calls against a real picketd: acquire/renew/release/inspect,
conflicts, blocking acquire, idempotent retries, names, errors, fences."""
import http.client
import threading
import time
import unittest

from tests.env import SCALE, env, uniq, until
import picket



def all_stopped(pid):
    """Whether every thread of pid is stopped (state T in /proc)."""
    import os
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        return all(open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0] == "T"
                   for t in tasks)
    except OSError:
        return False

class Calls(unittest.TestCase):
    def setUp(self):
        self.c = picket.Client(env("URL"), token="")
        self.addCleanup(self.c.close)

    def test_acquire_renew_release_inspect(self):
        name = uniq()
        t0 = time.monotonic()
        g = self.c.acquire(name, ttl=5.0, owner="unit")
        t1 = time.monotonic()
        self.assertEqual((g.name, g.ttl, g.owner), (name, 5.0, "unit"))
        self.assertRegex(g.id, r"^[0-9a-f]{32}$")
        self.assertIsInstance(g.fence, int)
        self.assertIsNone(g.fence_token)
        # deadline: send time + ttl - (1% + 2 ms), sent between t0 and t1
        self.assertGreaterEqual(g.deadline, t0 + 5.0 - 0.052 - 1e-6)
        self.assertLessEqual(g.deadline, t1 + 5.0 - 0.052 + 1e-6)
        self.assertTrue(g.valid())
        info = self.c.inspect(name)
        self.assertEqual((info["lock"], info["held"], info["fence"], info["owner"]),
                         (name, True, g.fence, "unit"))
        self.assertNotIn("lease", info)
        self.assertTrue(0 < info["ttl"] <= 5.0)
        before = g.deadline
        self.c.renew(g, ttl=20.0)
        self.assertEqual(g.ttl, 20.0)
        self.assertGreater(g.deadline, before + 10)
        self.assertGreater(self.c.inspect(name)["ttl"], 10)
        self.assertTrue(self.c.release(g))
        self.assertFalse(g.valid())
        info = self.c.inspect(name)
        self.assertEqual((info["held"], info["fence"]), (False, g.fence))
        with self.assertRaises(picket.LeaseLost) as cm:
            self.c.release(g)
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "lease_lost"))
        g2 = self.c.acquire(name, ttl=1)
        self.assertGreater(g2.fence, g.fence)
        self.c.release(g2)

    def test_shorter_renewal_moves_the_deadline_back(self):
        # picketd ends the lease at about the renewal's send + its new TTL:
        # the local deadline must come down with a shorter one.
        name = uniq()
        g = self.c.acquire(name, ttl=10.0)
        self.assertGreater(g.remaining(), 9.0)
        t0 = time.monotonic()
        self.c.renew(g, ttl=1.0)
        t1 = time.monotonic()
        self.assertEqual(g.ttl, 1.0)
        self.assertGreaterEqual(g.deadline, t0 + 1.0 - picket.drift_margin(1.0) - 1e-6)
        self.assertLessEqual(g.deadline, t1 + 1.0 - picket.drift_margin(1.0) + 1e-6)
        self.assertLessEqual(g.remaining(), 1.0)
        self.c.renew(g, ttl=10.0)  # and up again
        self.assertGreater(g.remaining(), 9.0)
        self.c.release(g)

    def test_conflict_lock_held(self):
        name = uniq()
        g = self.c.acquire(name, ttl=30, owner="first")
        with self.assertRaises(picket.LockHeld) as cm:
            self.c.acquire(name, ttl=30, owner="second")
        e = cm.exception
        self.assertEqual((e.status, e.code, e.owner), (409, "lock_held", "first"))
        self.assertTrue(25 < e.retry_after <= 30, e.retry_after)
        self.assertTrue(e.message)
        self.c.release(g)

    def test_blocking_acquire_woken_by_release(self):
        name = uniq()
        g = self.c.acquire(name, ttl=60)
        got = {}

        def waiter():
            c2 = picket.Client(env("URL"))
            try:
                got["lease"] = c2.acquire(name, ttl=5, wait=20 * SCALE)
                got["at"] = time.monotonic()
            except Exception as e:  # reported below
                got["error"] = e
            finally:
                c2.close()

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)  # let it wait; the release wakes it, not its wait bound
        self.assertFalse(got)
        released = time.monotonic()
        self.c.release(g)
        t.join(20 * SCALE)
        self.assertFalse(t.is_alive())
        self.assertNotIn("error", got)
        self.assertGreater(got["lease"].fence, g.fence)
        self.assertLess(got["at"] - released, 5 * SCALE, "woken by the release, not a timeout")
        self.c.release(got["lease"])

    def test_blocking_acquire_times_out(self):
        name = uniq()
        g = self.c.acquire(name, ttl=30)
        t0 = time.monotonic()
        with self.assertRaises(picket.LockHeld):
            self.c.acquire(name, ttl=5, wait=0.3)
        self.assertGreaterEqual(time.monotonic() - t0, 0.29)
        self.c.release(g)

    def test_idempotent_retry_same_lease_id(self):
        name = uniq()
        g = self.c.acquire(name, ttl=10)
        again = self.c.acquire(name, ttl=10, lease=g.id)  # a retry after a lost reply
        self.assertEqual((again.id, again.fence), (g.id, g.fence))
        self.c.release(g)
        # after a release the same id gets a new grant, with a higher fence
        third = self.c.acquire(name, ttl=10, lease=g.id)
        self.assertGreater(third.fence, g.fence)
        self.c.release(third)

    def test_retry_after_a_dropped_reply(self):
        # The first attempt's connection is dropped after the request went
        # out (the grant is made, its reply lost); the retry, with the same
        # lease id, gets the same grant.
        name = uniq()
        real = http.client.HTTPConnection.getresponse
        calls = {"n": 0}

        def flaky(conn):
            calls["n"] += 1
            if calls["n"] == 1:
                real(conn).read()
                conn.close()
                raise ConnectionAbortedError("reply lost (test)")
            return real(conn)

        http.client.HTTPConnection.getresponse = flaky
        try:
            g = self.c.acquire(name, ttl=10)
        finally:
            http.client.HTTPConnection.getresponse = real
        self.assertEqual(calls["n"], 2)
        info = self.c.inspect(name)
        self.assertEqual((info["held"], info["fence"]), (True, g.fence))
        self.c.release(g)

    def test_reconnect_after_server_closed_keepalive(self):
        name = uniq()
        self.c.inspect(name)
        for conn in self.c._idle:  # the server's side went away meanwhile
            conn.sock.shutdown(2)
        self.assertEqual(self.c.inspect(name)["lock"], name)

    def test_names(self):
        for name in ("billing.nightly:eu-west-1", "a", "x" * 200, "A-Z_0.9:"):
            g = self.c.acquire(name, ttl=5)
            self.assertEqual(g.name, name)
            self.assertEqual(self.c.inspect(name)["lock"], name)
            self.c.release(g)
        # Other names map to "h." + 32 hex of their SHA-256, the same as the
        # PHP store (the vector is its NameTest's), and are held under it.
        self.assertEqual(picket.lock_name("App\\Service\\Inventory::sync"),
                         "h.d4f3ecf391088ccd67753144d8dac2ca")
        for foreign in ("", ".", "..", "a/b", "a b", "x" * 201, "caf\u00e9", "App\\Sync::run"):
            mapped = picket.lock_name(foreign)
            self.assertRegex(mapped, r"^h\.[0-9a-f]{32}$")
            g = self.c.acquire(foreign, ttl=5)
            self.assertEqual(g.name, mapped)
            self.assertTrue(self.c.inspect(foreign)["held"])
            self.c.release(g)
        with self.assertRaises(picket.InvalidArgument) as cm:
            self.c.acquire(None)
        self.assertIsNone(cm.exception.status)

    def test_invalid_argument_from_server(self):
        with self.assertRaises(picket.InvalidArgument) as cm:
            self.c.acquire(uniq(), ttl=0.0)  # ttl_ms 0
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(picket.InvalidArgument) as cm:
            self.c.acquire(uniq(), ttl=7200.0)  # over --max-ttl-ms
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(picket.InvalidArgument):
            self.c.acquire(uniq(), lease="not-hex")  # refused locally
        with self.assertRaises(picket.InvalidArgument) as cm:
            self.c.acquire(uniq(), owner="o" * 500)
        self.assertEqual(cm.exception.status, 400)

    def test_not_found_through_prefix(self):
        c = picket.Client(env("URL") + "/nothing-here")
        with self.assertRaises(picket.NotFound) as cm:
            c.inspect("x")
        self.assertEqual(cm.exception.status, 404)
        c.close()

    def test_transport_errors(self):
        c = picket.Client("http://127.0.0.1:1", timeout=1, retries=1)
        t0 = time.monotonic()
        with self.assertRaises(picket.PicketTransportError):
            c.inspect("x")
        self.assertLess(time.monotonic() - t0, 5 * SCALE)
        with self.assertRaises(picket.InvalidArgument):
            picket.Client("ftp://x")

    def test_timeout_on_a_stopped_server(self):
        import os
        import signal
        pid = int(env("PICKETD_PID"))
        c = picket.Client(env("URL"), timeout=0.3, retries=0)
        c.inspect("x")
        os.kill(pid, signal.SIGSTOP)
        try:
            # kill() only queues the stop: a thread busy on the other core
            # could still answer one more request (the flake this test
            # had). Wait until every thread of picketd is stopped.
            deadline = time.monotonic() + 5 * SCALE
            while time.monotonic() < deadline and not all_stopped(pid):
                time.sleep(0.005)
            t0 = time.monotonic()
            with self.assertRaises(picket.PicketTransportError):
                c.inspect("x")
            self.assertLess(time.monotonic() - t0, 3 * SCALE)
        finally:
            os.kill(pid, signal.SIGCONT)
        c.close()

    def test_store_unavailable_retried_then_raised(self):
        c = picket.Client(env("NOREDIS_URL"))
        t0 = time.monotonic()
        with self.assertRaises(picket.StoreUnavailable) as cm:
            c.acquire(uniq(), ttl=5)
        self.assertEqual(cm.exception.status, 503)
        self.assertIsInstance(cm.exception, picket.Unavailable)
        self.assertGreater(time.monotonic() - t0, 0.5, "retried with backoff first")
        c.close()

    def test_token_from_environment(self):
        import os
        old = os.environ.get("PICKET_TOKEN")
        os.environ["PICKET_TOKEN"] = "abc"
        try:
            self.assertEqual(picket.Client(env("URL")).token, "abc")
            self.assertEqual(picket.Client(env("URL"), token="x").token, "x")
        finally:
            if old is None:
                del os.environ["PICKET_TOKEN"]
            else:
                os.environ["PICKET_TOKEN"] = old


class Auth(unittest.TestCase):
    def test_unauthenticated(self):
        for tok in ("", "pkt_wrong_0000"):
            c = picket.Client(env("AUTH_URL"), token=tok)
            with self.assertRaises(picket.Unauthenticated) as cm:
                c.acquire("py.a")
            self.assertEqual(cm.exception.status, 401)
            c.close()

    def test_permission_denied(self):
        c = picket.Client(env("AUTH_URL"), token=env("T_LOCKER"))
        with self.assertRaises(picket.PermissionDenied) as cm:
            c.acquire("other.a")  # outside its prefixes
        self.assertEqual(cm.exception.status, 403)
        g = c.acquire(uniq("py."), ttl=5)
        c.release(g)
        r = picket.Client(env("AUTH_URL"), token=env("T_READER"))
        self.assertFalse(r.inspect(g.name)["held"])
        with self.assertRaises(picket.PermissionDenied):
            r.acquire(g.name)  # read only
        c.close()
        r.close()

    def test_too_many_leases(self):
        c = picket.Client(env("AUTH_URL"), token=env("T_ONE"))
        g = c.acquire(uniq("one."), ttl=30)
        with self.assertRaises(picket.TooManyLeases) as cm:
            c.acquire(uniq("one."), ttl=30)
        self.assertEqual(cm.exception.status, 429)
        self.assertIsInstance(cm.exception, picket.QuotaExceeded)
        c.release(g)
        c.release(c.acquire(uniq("one."), ttl=30))
        c.close()

    def test_rate_limited(self):
        c = picket.Client(env("AUTH_URL"), token=env("T_FAST"))
        with self.assertRaises(picket.RateLimited) as cm:
            for _ in range(20):
                c.acquire(uniq("fast."), ttl=1)
        e = cm.exception
        self.assertEqual(e.status, 429)
        self.assertIsNotNone(e.retry_after)
        self.assertTrue(0 <= e.retry_after <= 1.0, e.retry_after)
        c.close()


class Https(unittest.TestCase):
    def test_cacert(self):
        c = picket.Client(env("TLS_URL"), cacert=env("TLS_CA"))
        with c.lock(uniq(), ttl=2) as lease:
            self.assertTrue(lease.valid())
            self.assertTrue(c.inspect(lease.name)["held"])
        c.close()

    def test_untrusted_server(self):
        for kw in ({"cacert": env("TLS_OTHER_CA")}, {}):  # another CA; the system's
            c = picket.Client(env("TLS_URL"), retries=0, **kw)
            with self.assertRaises(picket.PicketTransportError) as cm:
                c.inspect("x")
            self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))

    def test_http_to_a_tls_port(self):
        c = picket.Client(env("TLS_URL").replace("https:", "http:"), retries=0, timeout=2)
        with self.assertRaises(picket.PicketTransportError):
            c.inspect("x")


class SignedFences(unittest.TestCase):
    def test_fence_token(self):
        c = picket.Client(env("SIGNED_URL"))
        g = c.acquire(uniq(), ttl=5)
        self.assertRegex(g.fence_token, r"^v2\.lock\.k1\.[0-9a-f]{64}$")
        first = g.fence_token
        c.renew(g)
        self.assertEqual(g.fence_token, first)  # same lock, same fence: same token
        with c.lock(uniq(), ttl=5) as lease:
            self.assertRegex(lease.fence_token, r"^v2\.lock\.k1\.")
        c.release(g)
        c.close()


if __name__ == "__main__":
    unittest.main()
