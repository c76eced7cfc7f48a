"""Read/write locks (/v1/rwlocks) against a real picketd: readers share,
a writer excludes readers and writers, a waiting writer keeps new readers
out, fences (a write's above every earlier grant's, a read's the last
write's), renew/release routed by the lease, Client.rwlock()'s keeper past
several TTLs, and a bad mode."""
import threading
import time
import unittest

from tests.env import SCALE, ClientCase, env, uniq, until
import picket


class Modes(ClientCase):
    def test_readers_share(self):
        name = uniq()
        w = self.c.acquire_rwlock(name, "write", ttl=30)
        self.c.release(w)
        rs = [self.c.acquire_rwlock(name, "read", ttl=30, owner=f"r{i}") for i in range(3)]
        for r in rs:
            self.assertTrue(r.is_rwlock)
            self.assertFalse(r.is_permit)
            self.assertEqual((r.name, r.mode, r.ttl), (name, "read", 30.0))
            self.assertEqual(r.fence_lock, f"{name}:rw")
            self.assertEqual(r.fence, w.fence, "a read's fence is the last write's")
            self.assertTrue(r.valid())
        self.assertEqual(len({r.id for r in rs}), 3)
        info = self.c.inspect_rwlock(name)
        self.assertEqual((info["rwlock"], info["readers"], info["writer"]), (name, 3, None))
        self.assertEqual((info["fence"], info["fence_lock"]), (w.fence, f"{name}:rw"))
        self.assertEqual(sorted(x["owner"] for x in info["read_leases"]), ["r0", "r1", "r2"])
        self.assertTrue(all(25 < x["ttl"] <= 30 for x in info["read_leases"]), info)
        self.assertFalse(any("lease" in x for x in info["read_leases"]))
        # a rwlock is not a lock of the same name
        self.assertFalse(self.c.inspect(name)["held"])
        # a retry with the same lease id is the same read grant
        again = self.c.acquire_rwlock(name, "read", ttl=30, lease=rs[0].id)
        self.assertEqual((again.fence, again.mode), (rs[0].fence, "read"))
        # renew() and release() route a rwlock lease to /v1/rwlocks
        self.c.renew(rs[1], ttl=20)
        self.assertEqual(rs[1].ttl, 20.0)
        for r in rs:
            self.assertTrue(self.c.release(r))
        self.assertEqual(self.c.inspect_rwlock(name)["readers"], 0)
        with self.assertRaises(picket.LeaseLost):
            self.c.release(rs[0])
        with self.assertRaises(picket.LeaseLost):
            self.c.renew(rs[1])
        self.assertTrue(rs[1].lost.is_set())

    def test_writer_excludes(self):
        name = uniq()
        r = self.c.acquire_rwlock(name, "read", ttl=30, owner="reader")
        with self.assertRaises(picket.LockHeld) as cm:
            self.c.acquire_rwlock(name, "write", ttl=30)
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "lock_held"))
        self.assertTrue(0 < cm.exception.retry_after <= 30, cm.exception.retry_after)
        self.c.release(r)
        w = self.c.acquire_rwlock(name, "write", ttl=30, owner="writer")
        self.assertEqual((w.mode, w.fence_lock), ("write", f"{name}:rw"))
        self.assertGreater(w.fence, r.fence, "a write's fence is above every earlier grant's")
        for mode in ("read", "write"):
            with self.assertRaises(picket.LockHeld) as cm:
                self.c.acquire_rwlock(name, mode, ttl=30)
            self.assertEqual(cm.exception.owner, "writer")
        info = self.c.inspect_rwlock(name)
        self.assertEqual((info["readers"], info["writer"]["owner"]), (0, "writer"))
        self.assertTrue(25 < info["writer"]["ttl"] <= 30, info)
        self.c.release(w)
        w2 = self.c.acquire_rwlock(name, "write", ttl=30)
        self.assertGreater(w2.fence, w.fence)
        self.c.release(w2)
        r2 = self.c.acquire_rwlock(name, "read", ttl=30)
        self.assertEqual(r2.fence, w2.fence)
        self.c.release(r2)

    def test_waiting_writer_keeps_new_readers_out(self):
        name = uniq()
        r1 = self.c.acquire_rwlock(name, "read", ttl=30)
        got = {}

        def writer():
            c2 = picket.Client(env("URL"))
            try:
                got["w"] = c2.acquire_rwlock(name, "write", ttl=10, wait=10 * SCALE)
            except picket.PicketError as e:
                got["e"] = e
            finally:
                c2.close()

        t = threading.Thread(target=writer)
        t.start()
        self.assertTrue(until(lambda: self.c.inspect_rwlock(name)["writers_waiting"] == 1, 5),
                        "the writer is not waiting")
        with self.assertRaises(picket.LockHeld):
            self.c.acquire_rwlock(name, "read", ttl=30)  # would starve the writer
        self.c.release(r1)
        t.join(10 * SCALE)
        self.assertNotIn("e", got)
        self.assertEqual(got["w"].mode, "write")
        self.assertGreater(got["w"].fence, r1.fence)
        self.c.release(got["w"])
        # once the writer is done, readers get in again
        self.c.release(self.c.acquire_rwlock(name, "read", ttl=30))

    def test_bad_mode_and_names(self):
        for mode in ("shared", "READ", None, 1):
            with self.assertRaises(picket.InvalidArgument):
                self.c.acquire_rwlock(uniq(), mode)
        with self.assertRaises(picket.InvalidArgument):
            self.c.acquire_rwlock("py." + "x" * 195, "read")  # a lock name, too long here
        mapped = self.c.acquire_rwlock("App\\Catalog", "write", ttl=5)
        self.assertEqual(mapped.name, picket.lock_name("App\\Catalog"))
        self.assertEqual(mapped.fence_lock, mapped.name + ":rw")
        self.c.release(mapped)
        # what the server says of a mode this client would not send
        with self.assertRaises(picket.InvalidArgument) as cm:
            self.c._call("POST", f"/v1/rwlocks/{uniq()}/acquire", {"mode": "shared"})
        self.assertEqual(cm.exception.status, 400)


class Keeper(ClientCase):
    def test_keeps_a_read_lease_past_several_ttls(self):
        name = uniq()
        rw = self.c.rwlock(name)
        other = self.c.acquire_rwlock(name, "read", ttl=30)
        # a TTL with room for a slow renewal (0.6 s lapsed once in CI under
        # ASan: a renewal took over 0.4 s)
        with rw.read(ttl=1.5, owner="keeper") as lease:
            self.assertEqual((lease.mode, lease.fence_lock), ("read", f"{name}:rw"))
            first_deadline = lease.deadline
            end = time.monotonic() + 4.5  # three TTLs
            while time.monotonic() < end:
                self.assertTrue(lease.valid(), "read lease lapsed while the keeper ran")
                time.sleep(0.05)
            self.assertFalse(lease.lost.is_set())
            self.assertGreater(lease.deadline, first_deadline + 2.0)
            info = rw.inspect()
            self.assertEqual(info["readers"], 2)
            self.assertIn("keeper", [x["owner"] for x in info["read_leases"]])
            with self.assertRaises(picket.LockHeld):
                with rw.write(ttl=30):
                    self.fail("wrote under readers")
        self.assertEqual(self.c.inspect_rwlock(name)["readers"], 1, "released on exit")
        self.c.release(other)
        with rw.write(ttl=30) as w:
            self.assertEqual(w.mode, "write")
            self.assertIsNone(self.c.inspect_rwlock(name)["read_leases"] or None)
        self.assertIsNone(self.c.inspect_rwlock(name)["writer"])

    def test_lost_write_lease(self):
        name = uniq()
        seen = []
        with self.assertRaises(picket.LeaseLost) as cm:
            with self.c.rwlock(name).write(ttl=0.9, on_lost=seen.append) as w:
                other = picket.Client(env("URL"))
                other.release(w)
                other.close()
                self.assertTrue(w.lost.wait(2 * SCALE), "lost not set after a renewal")
                self.assertEqual(seen, [w])
        self.assertIn("write lease of rwlock", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
