"""Client.lock(): the keeper renews past several TTLs, a lease lost at the
server or by a pause sets lease.lost, release on exit and on exceptions."""
import os
import select
import signal
import subprocess
import sys
import time
import unittest

from tests.env import HERE, SCALE, ClientCase, check_lost_at_the_deadline, env, uniq, until
import picket


class Keeper(ClientCase):
    def test_renews_past_several_ttls(self):
        name = uniq()
        with self.c.lock(name, ttl=0.6, owner="keeper") as lease:
            first_deadline = lease.deadline
            fence = lease.fence
            end = time.monotonic() + 3.0  # five TTLs
            while time.monotonic() < end:
                self.assertTrue(lease.valid(), "lease lapsed while the keeper ran")
                time.sleep(0.05)
            self.assertFalse(lease.lost.is_set())
            self.assertGreater(lease.deadline, first_deadline + 2.0)
            info = self.c.inspect(name)
            self.assertEqual((info["held"], info["fence"]), (True, fence))
            self.assertEqual(lease.fence, fence)  # renewals keep the fence
        self.assertFalse(self.c.inspect(name)["held"], "released on exit")

    def test_max_hold_stops_the_keeper_at_the_cap(self):
        name = uniq()
        t0 = time.monotonic()
        with self.assertRaises(picket.LeaseLost):
            # ttl 1.5 s: a 0.6 s lease lost a renewal on a busy CI machine
            # and ended at its deadline before the cap (capped False)
            with self.c.lock(name, ttl=1.5, max_hold=4.0, lock_delay=6.0) as lease:
                lease.lost.wait(10.0 * SCALE)
                lost_after = time.monotonic() - t0
                self.assertTrue(lease.capped)
                # the local deadline comes a little before the server's cap:
                # a release then would still skip the delay; wait past it
                time.sleep(0.3)
        self.assertGreaterEqual(lost_after, 3.5)
        self.assertLess(lost_after, 4.0 + 1.0 * SCALE)
        # it expired at the cap, without a release: its lock-delay runs
        with self.assertRaises(picket.LockDelay) as cm:
            self.c.acquire(name, ttl=1)
        self.assertIsInstance(cm.exception, picket.LockHeld)
        self.assertGreater(cm.exception.retry_after, 0)

    def test_three_lines(self):
        written = []
        with picket.Client(env("URL")).lock("py.inventory-sync", ttl=30) as lease:
            written.append(lease.fence)
        self.assertEqual(written, [self.c.inspect("py.inventory-sync")["fence"]])

    def test_released_on_exception(self):
        name = uniq()
        with self.assertRaises(ZeroDivisionError):
            with self.c.lock(name, ttl=30):
                1 / 0
        self.assertFalse(self.c.inspect(name)["held"])

    def test_held_by_another(self):
        name = uniq()
        with self.c.lock(name, ttl=30, owner="a"):
            with self.assertRaises(picket.LockHeld) as cm:
                with self.c.lock(name, ttl=30):
                    self.fail("entered a held lock")
            self.assertEqual(cm.exception.owner, "a")

    def test_waits_for_the_lock(self):
        name = uniq()
        g = self.c.acquire(name, ttl=0.5)
        with self.c.lock(name, ttl=2, wait=10 * SCALE) as lease:
            self.assertGreater(lease.fence, g.fence)
            self.assertTrue(lease.valid())

    def test_lost_at_the_server(self):
        name = uniq()
        seen = []
        with self.assertRaises(picket.LeaseLost):
            with self.c.lock(name, ttl=0.9, on_lost=seen.append) as lease:
                # whoever has the lease id may release it: the lease ends at
                # the server, and the next renewal (ttl/3) finds out.
                other = picket.Client(env("URL"))
                other.release(lease)
                other.close()
                self.assertTrue(lease.lost.wait(2 * SCALE), "lost not set after a renewal")
                self.assertFalse(lease.valid())
                self.assertEqual(seen, [lease])

    def test_lost_when_renewals_fail_until_the_deadline(self):
        # picketd stopped: renewals time out; the deadline passes, lost is set
        # at it (not a client timeout later).
        c = picket.Client(env("URL"), timeout=5)
        held = c.lock(uniq(), ttl=1.0)
        check_lost_at_the_deadline(self, held.__enter__())
        with self.assertRaises(picket.LeaseLost):
            held.__exit__(None, None, None)
        c.close()


class PausedHolder(unittest.TestCase):
    """The lesson of the inventory incident: a holder paused past its TTL
    (SIGSTOP: a GC pause, a VM migration) wakes up believing it holds the
    lock. Its lease.lost must be set and valid() false at once, and the
    lock's new holder must have a higher fence that storage can prefer."""

    def test_sigstop_past_ttl(self):
        url, name, ttl = env("URL"), uniq(), 1.0
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "holder.py"),
                              os.path.dirname(HERE), url, name, str(ttl)],
                             stdout=subprocess.PIPE, text=True, bufsize=1)
        self.addCleanup(lambda: (p.poll() is None and (os.kill(p.pid, signal.SIGCONT),
                                                        p.kill()), p.wait(5)))

        def line(timeout):
            r, _, _ = select.select([p.stdout], [], [], timeout * SCALE)
            self.assertTrue(r, "holder said nothing in time")
            return p.stdout.readline().strip()

        first = line(10)
        self.assertTrue(first.startswith("fence "), first)
        fence = int(first.split()[1])
        self.assertTrue(line(5).startswith("valid 1 "))
        os.kill(p.pid, signal.SIGSTOP)
        # the new holder: granted once the paused one's TTL ran out
        c = picket.Client(url)
        g = c.acquire(name, ttl=30, wait=10 * SCALE)
        self.assertGreater(g.fence, fence)
        resumed = time.monotonic()
        os.kill(p.pid, signal.SIGCONT)
        rest = []
        while not rest or rest[-1].startswith("valid "):
            rest.append(line(5))
        # every check begun after the pause says 0; lost is set; exit says so
        after = [ln for ln in rest if ln.startswith("valid ") and float(ln.split()[2]) > resumed]
        self.assertNotIn("1", [ln.split()[1] for ln in after], after)
        self.assertEqual(rest[-1], "lost valid=0", rest[-3:])
        self.assertTrue(line(5).startswith("exit LeaseLost"))
        p.wait(10 * SCALE)
        self.assertEqual(p.returncode, 3)
        self.assertEqual(c.inspect(name)["fence"], g.fence, "the new holder still holds it")
        c.release(g)
        c.close()


if __name__ == "__main__":
    unittest.main()
