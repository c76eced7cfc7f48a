"""Counting semaphores (/v1/semaphores) against a real picketd: N permits
with a slot and fence each, full, waiting, idempotent retries, limit
mismatch, renew/release routed by the lease, and Client.semaphore()'s
keeper: past several TTLs, and a permit lost at the server."""
import threading
import time
import unittest

from tests.env import SCALE, ClientCase, env, uniq
import picket


class Permits(ClientCase):
    def test_n_permits_then_full(self):
        name = uniq()
        ps = [self.c.acquire_permit(name, 3, ttl=30, owner=f"w{i}") for i in range(3)]
        self.assertEqual(sorted(p.permit for p in ps), [0, 1, 2])
        for p in ps:
            self.assertTrue(p.is_permit)
            self.assertEqual((p.name, p.limit, p.ttl), (name, 3, 30.0))
            self.assertEqual(p.fence_lock, f"{name}:permit:{p.permit}")
            self.assertIsInstance(p.fence, int)
            self.assertTrue(p.valid())
        self.assertEqual(len({p.id for p in ps}), 3)
        info = self.c.inspect_semaphore(name)
        self.assertEqual((info["semaphore"], info["limit"], info["held"]), (name, 3, 3))
        self.assertEqual([q["permit"] for q in info["permits"]], [0, 1, 2])
        self.assertEqual({q["fence"] for q in info["permits"]}, {p.fence for p in ps})
        self.assertTrue(all(25 < q["ttl"] <= 30 for q in info["permits"]), info)
        self.assertFalse(any("lease" in q for q in info["permits"]))
        # a semaphore is not a lock of the same name
        self.assertFalse(self.c.inspect(name)["held"])

        with self.assertRaises(picket.SemaphoreFull) as cm:
            self.c.acquire_permit(name, 3, ttl=30)
        e = cm.exception
        self.assertIsInstance(e, picket.LockHeld)  # `except LockHeld` catches it
        self.assertEqual((e.status, e.code), (409, "semaphore_full"))
        self.assertTrue(0 < e.retry_after <= 30, e.retry_after)

        # a retry with the same lease id is the same permit, fence and slot
        again = self.c.acquire_permit(name, 3, ttl=30, lease=ps[1].id)
        self.assertEqual((again.permit, again.fence), (ps[1].permit, ps[1].fence))

        # release() routes a permit to the semaphore: its slot frees, and the
        # next holder of that slot gets a higher fence
        freed = ps[1]
        self.assertTrue(self.c.release(freed))
        self.assertFalse(freed.valid())
        self.assertEqual(self.c.inspect_semaphore(name)["held"], 2)
        with self.assertRaises(picket.LeaseLost):
            self.c.release(freed)
        nxt = self.c.acquire_permit(name, 3, ttl=30)
        self.assertEqual(nxt.permit, freed.permit)
        self.assertGreater(nxt.fence, freed.fence)
        for p in (ps[0], ps[2], nxt):
            self.c.release(p)
        self.assertEqual(self.c.inspect_semaphore(name)["held"], 0)

    def test_renew_routes_to_the_semaphore(self):
        name = uniq()
        p = self.c.acquire_permit(name, 2, ttl=2)
        before = p.deadline
        self.c.renew(p, ttl=20)
        self.assertEqual(p.ttl, 20.0)
        self.assertGreater(p.deadline, before + 10)
        self.assertGreater(self.c.inspect_semaphore(name)["permits"][0]["ttl"], 10)
        self.c.release(p)
        with self.assertRaises(picket.LeaseLost):
            self.c.renew(p)
        self.assertTrue(p.lost.is_set())

    def test_waits_for_a_permit(self):
        name = uniq()
        held = self.c.acquire_permit(name, 1, ttl=30)
        got = {}

        def waiter():
            c2 = picket.Client(env("URL"))
            try:
                got["p"] = c2.acquire_permit(name, 1, ttl=5, wait=10 * SCALE)
            except picket.PicketError as e:
                got["e"] = e
            finally:
                c2.close()

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)
        self.assertEqual(self.c.inspect_semaphore(name)["waiters"], 1)
        self.c.release(held)
        t.join(10 * SCALE)
        self.assertNotIn("e", got)
        self.assertEqual(got["p"].permit, 0)
        self.assertGreater(got["p"].fence, held.fence)
        self.c.release(got["p"])

    def test_limit_mismatch(self):
        name = uniq()
        p = self.c.acquire_permit(name, 2, ttl=30)
        with self.assertRaises(picket.LimitMismatch) as cm:
            self.c.acquire_permit(name, 3, ttl=30)
        e = cm.exception
        self.assertNotIsInstance(e, picket.LockHeld)
        self.assertEqual((e.status, e.code, e.limit), (409, "limit_mismatch", 2))
        self.c.release(p)
        # once every permit is gone the next acquire sets the limit anew
        q = self.c.acquire_permit(name, 3, ttl=30)
        self.assertEqual(q.limit, 3)
        self.c.release(q)

    def test_names(self):
        mapped = self.c.acquire_permit("App\\Jobs\\Report", 1, ttl=5)
        self.assertEqual(mapped.name, picket.lock_name("App\\Jobs\\Report"))
        self.assertEqual(mapped.fence_lock, mapped.name + ":permit:0")
        self.c.release(mapped)
        with self.assertRaises(picket.InvalidArgument):
            self.c.acquire_permit("py." + "x" * 190, 1)  # a lock name, too long here
        with self.assertRaises(picket.InvalidArgument):
            self.c.acquire_permit(uniq(), "2")
        with self.assertRaises(picket.InvalidArgument) as cm:
            self.c.acquire_permit(uniq(), 0)
        self.assertEqual(cm.exception.status, 400)


class Keeper(ClientCase):
    def test_keeps_a_permit_past_several_ttls(self):
        name = uniq()
        other = self.c.acquire_permit(name, 2, ttl=30)
        with self.c.semaphore(name, 2, ttl=0.6, owner="keeper") as p:
            self.assertTrue(p.is_permit)
            self.assertEqual(p.permit, 1)
            first_deadline, fence = p.deadline, p.fence
            end = time.monotonic() + 3.0  # five TTLs
            while time.monotonic() < end:
                self.assertTrue(p.valid(), "permit lapsed while the keeper ran")
                time.sleep(0.05)
            self.assertFalse(p.lost.is_set())
            self.assertGreater(p.deadline, first_deadline + 2.0)
            info = self.c.inspect_semaphore(name)
            self.assertEqual(info["held"], 2)
            mine = [q for q in info["permits"] if q["permit"] == 1][0]
            self.assertEqual((mine["fence"], mine["owner"]), (fence, "keeper"))
            with self.assertRaises(picket.SemaphoreFull):
                with self.c.semaphore(name, 2, ttl=30):
                    self.fail("entered a full semaphore")
        info = self.c.inspect_semaphore(name)
        self.assertEqual([q["permit"] for q in info["permits"]], [0], "released on exit")
        self.c.release(other)

    def test_released_on_exception(self):
        name = uniq()
        with self.assertRaises(ZeroDivisionError):
            with self.c.semaphore(name, 1, ttl=30):
                1 / 0
        self.assertEqual(self.c.inspect_semaphore(name)["held"], 0)

    def test_lost_permit(self):
        name = uniq()
        seen = []
        with self.assertRaises(picket.LeaseLost) as cm:
            with self.c.semaphore(name, 2, ttl=0.9, on_lost=seen.append) as p:
                # whoever has the lease id may release it: the permit ends
                # at the server, and the next renewal (ttl/3) finds out.
                other = picket.Client(env("URL"))
                other.release(p)
                other.close()
                self.assertTrue(p.lost.wait(2 * SCALE), "lost not set after a renewal")
                self.assertFalse(p.valid())
                self.assertEqual(seen, [p])
        self.assertIn("permit 0 of semaphore", str(cm.exception))
        self.assertEqual(self.c.inspect_semaphore(name)["held"], 0)

    def test_limit_mismatch_on_enter(self):
        name = uniq()
        with self.c.semaphore(name, 2, ttl=30):
            with self.assertRaises(picket.LimitMismatch) as cm:
                with self.c.semaphore(name, 4, ttl=30):
                    self.fail("entered under another limit")
            self.assertEqual(cm.exception.limit, 2)


if __name__ == "__main__":
    unittest.main()
