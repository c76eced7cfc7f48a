"""The operators' calls against a real picketd: list() and iter_locks()
over several pages, inspect()'s grant fields, break_lock() and the broken
holder's LeaseLost, whoami(); and under --auth-file the list and admin
verbs and the token's prefixes."""
import threading
import time
import unittest

from tests.env import SCALE, env, uniq, until
import picket


class Operators(unittest.TestCase):
    def setUp(self):
        self.c = picket.Client(env("URL"), token="")
        self.addCleanup(self.c.close)

    def test_list_pages_and_iter_locks(self):
        prefix = uniq("py.ls.") + "."
        t0 = time.time() * 1000
        leases = [self.c.acquire(f"{prefix}{i}", ttl=60, owner=f"o{i}") for i in range(5)]
        permit = self.c.acquire_permit(prefix + "sem", 3, ttl=60)
        other = self.c.acquire(prefix[:-1] + "x", ttl=60)  # sorts beside the prefix, not in it
        self.c.renew(leases[1])
        t1 = time.time() * 1000

        locks, cursor = self.c.list(prefix, limit=2)
        self.assertEqual([e["name"] for e in locks], [prefix + "0", prefix + "1"])
        self.assertIsNotNone(cursor)
        pages, cursor, names = 0, None, []
        while True:
            page = self.c.list(prefix, limit=2, cursor=cursor)
            self.assertLessEqual(len(page.locks), 2)
            names += [e["name"] for e in page.locks]
            pages += 1
            if page.cursor is None:
                break
            cursor = page.cursor
        want = [f"{prefix}{i}" for i in range(5)] + [prefix + "sem"]
        self.assertEqual(names, want)
        self.assertGreaterEqual(pages, 3)

        got = list(self.c.iter_locks(prefix, limit=2))
        self.assertEqual([e["name"] for e in got], want)
        e = got[1]
        self.assertEqual((e["kind"], e["holders"], e["owner"], e["fence"], e["renewals"],
                          e["waiters"]), ("lock", 1, "o1", leases[1].fence, 1, 0))
        # Redis's clock on this machine: within a few seconds of ours
        self.assertTrue(t0 - 5000 <= e["acquired_at"] <= t1 + 5000, (t0, e, t1))
        self.assertTrue(50 < e["ttl"] <= 60, e)
        self.assertEqual(got[0]["renewals"], 0)
        s = got[-1]
        self.assertEqual((s["kind"], s["limit"], s["fence"], s["holders"]),
                         ("semaphore", 3, None, 1))
        self.assertNotIn("lease", e)

        for g in leases + [permit, other]:
            self.c.release(g)
        self.assertEqual(self.c.list(prefix), picket.LockPage([], None))
        self.assertEqual(list(self.c.iter_locks(prefix)), [])

    def test_list_bad_arguments(self):
        for kw in ({"prefix": "a b"}, {"prefix": "p" * 201}, {"prefix": None}, {"limit": 0},
                   {"limit": 1001}, {"limit": True}, {"limit": "10"}, {"cursor": ""},
                   {"cursor": 5}):
            with self.assertRaises(picket.InvalidArgument, msg=kw) as cm:
                self.c.list(**kw)
            self.assertIsNone(cm.exception.status, kw)  # refused here, nothing sent
        # a cursor of another prefix: picketd's 400
        with self.assertRaises(picket.InvalidArgument) as cm:
            self.c.list("py.", cursor="0-l-zzz")
        self.assertEqual(cm.exception.status, 400)

    def test_inspect_grant_fields(self):
        name = uniq()
        info = self.c.inspect(name)
        self.assertEqual((info["acquired_at"], info["renewals"], info["waiters"]), (None, None, 0))
        t0 = time.time() * 1000
        g = self.c.acquire(name, ttl=30)
        t1 = time.time() * 1000
        info = self.c.inspect(name)
        self.assertTrue(t0 - 5000 <= info["acquired_at"] <= t1 + 5000, (t0, info, t1))
        self.assertEqual(info["renewals"], 0)
        self.c.renew(g)
        self.c.renew(g)
        self.assertEqual(self.c.inspect(name)["renewals"], 2)

        got = {}

        def waiter():
            c2 = picket.Client(env("URL"))
            try:
                got["lease"] = c2.acquire(name, ttl=5, wait=20)
                c2.release(got["lease"])
            finally:
                c2.close()

        t = threading.Thread(target=waiter)
        t.start()
        self.assertTrue(until(lambda: self.c.inspect(name)["waiters"] == 1, 5))
        self.c.release(g)
        t.join(10 * SCALE)
        self.assertGreater(got["lease"].fence, g.fence)
        self.assertEqual(self.c.inspect(name)["waiters"], 0)

    def test_break_lock(self):
        name = uniq()
        g = self.c.acquire(name, ttl=60, owner="stuck")
        r = self.c.break_lock(name)
        self.assertEqual((r["lock"], r["broken"], r["owner"]), (name, True, "stuck"))
        self.assertGreater(r["fence"], g.fence)
        self.assertFalse(self.c.inspect(name)["held"])
        with self.assertRaises(picket.LeaseLost) as cm:
            self.c.renew(g)
        self.assertIn("broken", cm.exception.message)
        self.assertTrue(g.lost.is_set())
        with self.assertRaises(picket.LeaseLost):
            self.c.release(g)
        # nothing held: not broken, and the fence moves on all the same
        r2 = self.c.break_lock(name)
        self.assertEqual((r2["broken"], r2["owner"]), (False, None))
        self.assertGreater(r2["fence"], r["fence"])
        g2 = self.c.acquire(name, ttl=5)
        self.assertGreater(g2.fence, r2["fence"])
        self.c.release(g2)

    def test_whoami_without_auth_file(self):
        w = self.c.whoami()
        self.assertIsNone(w["token"])
        self.assertEqual(w["verbs"], ["lock", "read", "metrics", "list", "admin"])  # loopback
        self.assertEqual(w["prefixes"], ["*"])


class OperatorsAuth(unittest.TestCase):
    def client(self, token):
        c = picket.Client(env("AUTH_URL"), token=env(token))
        self.addCleanup(c.close)
        return c

    def test_list_and_admin_verbs(self):
        ops, locker, reader = self.client("T_OPS"), self.client("T_LOCKER"), self.client("T_READER")
        self.assertEqual(ops.whoami(), {"token": "ops", "verbs": ["lock", "read", "list", "admin"],
                                        "prefixes": ["py."]})
        self.assertEqual(reader.whoami()["verbs"], ["read"])
        g = locker.acquire(uniq("py."), ttl=30, owner="job")
        names = [e["name"] for e in ops.iter_locks()]
        self.assertIn(g.name, names)
        self.assertTrue(all(n.startswith("py.") for n in names), names)
        for c in (locker, reader):
            with self.assertRaises(picket.PermissionDenied) as cm:
                c.list("py.")
            self.assertEqual(cm.exception.status, 403)
            with self.assertRaises(picket.PermissionDenied):
                c.break_lock(g.name)
        self.assertTrue(locker.inspect(g.name)["held"])
        with self.assertRaises(picket.PermissionDenied):
            ops.break_lock("other.x")  # outside its prefixes
        r = ops.break_lock(g.name)
        self.assertEqual((r["broken"], r["owner"]), (True, "job"))
        with self.assertRaises(picket.LeaseLost):
            locker.renew(g)
