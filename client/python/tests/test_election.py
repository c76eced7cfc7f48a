"""Leader elections (POST /v1/elections/{name}/campaign, ...) against a real
picketd: Client.campaign (term, value, leader_exists, the waited handover
on resign), proclaim, Client.leader, Client.observe, the keeper's loss
signal (a break, a paused picketd), terms strictly increasing, and a term
checked by a real fenced-kv as a fence."""
import http.client
import threading
import time
import unittest
import urllib.parse

from tests.env import SCALE, ClientCase, check_lost_at_the_deadline, env, uniq, until
import picket


def kv_put(kv, key, value, headers):
    """PUT value at key in the fenced-kv at kv with headers: (status, body)."""
    u = urllib.parse.urlsplit(kv)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    try:
        c.request("PUT", "/kv/" + key, body=value.encode(), headers=headers)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


class Campaign(ClientCase):
    def test_campaign_term_value(self):
        name = uniq()
        with self.c.campaign(name, ttl=10, owner="py-a", value="host-a:8080") as lead:
            self.assertIsInstance(lead, picket.Leadership)
            self.assertEqual(lead.election, name)
            self.assertGreaterEqual(lead.term, 1)
            self.assertEqual(lead.value, "host-a:8080")
            self.assertEqual(lead.owner, "py-a")
            self.assertAlmostEqual(lead.ttl, 10.0)
            self.assertTrue(lead.valid())
            self.assertGreater(lead.remaining(), 9.0)
            self.assertLessEqual(lead.remaining(), 10.0 - picket.drift_margin(10.0))
            self.assertIsNone(lead.token, "no token from a picketd that does not sign")
            self.assertEqual(lead.fence_headers(),
                             {"Picket-Lock": name, "Picket-Fence": str(lead.term)})
            self.assertNotIn(lead.lease, repr(lead), "the lease id is a secret")
            info = self.c.leader(name)
            self.assertEqual(info["election"], name)
            self.assertEqual(info["term"], lead.term)
            self.assertEqual(info["leader"]["term"], lead.term)
            self.assertEqual(info["leader"]["value"], "host-a:8080")
            self.assertEqual(info["leader"]["owner"], "py-a")
            self.assertGreater(info["leader"]["ttl"], 5.0)
            self.assertNotIn(lead.lease, str(info))
        info = self.c.leader(name)
        self.assertIsNone(info["leader"], "resigned on exit")
        self.assertEqual(info["term"], lead.term)
        self.assertFalse(lead.valid())

    def test_never_campaigned(self):
        info = self.c.leader(uniq())
        self.assertIsNone(info["leader"])
        self.assertEqual(info["term"], 0)

    def test_second_campaign_gets_leader_exists(self):
        name = uniq()
        with self.c.campaign(name, ttl=10, owner="first"):
            t0 = time.monotonic()
            with self.assertRaises(picket.LeaderExists) as cm:
                self.c.campaign(name, ttl=10, owner="second")
            self.assertLess(time.monotonic() - t0, 1.0, "wait 0 answers at once")
            e = cm.exception
            self.assertEqual((e.code, e.status, e.owner), ("leader_exists", 409, "first"))
            self.assertIsNotNone(e.retry_after)
            self.assertGreater(e.retry_after, 0)
            self.assertNotIsInstance(e, picket.LockHeld)
            # a lock of the same name is another namespace
            g = self.c.acquire(name, ttl=5)
            self.c.release(g)

    def test_same_lease_id_is_the_same_term(self):
        name, lease = uniq(), "ab" * 16
        a = self.c.campaign(name, ttl=10, lease=lease, keep=False)
        b = self.c.campaign(name, ttl=10, lease=lease, keep=False)
        self.assertEqual(a.term, b.term, "a retry with the same lease id is idempotent")
        self.assertTrue(b.resign())
        self.assertFalse(a.resign(), "the same leadership resigned already")

    def test_waiting_candidate_takes_over_on_resign(self):
        name = uniq()
        first = self.c.campaign(name, ttl=30, value="a")
        got = {}

        def candidate():
            c2 = picket.Client(env("URL"))
            try:
                got["lead"] = c2.campaign(name, ttl=30, wait=10 * SCALE, value="b", keep=False)
                got["at"] = time.monotonic()
            except Exception as e:  # noqa: BLE001 (reported below)
                got["error"] = e
            finally:
                c2.close()

        t = threading.Thread(target=candidate)
        t.start()
        # the candidate is waiting on this picketd before the resign
        self.assertTrue(until(lambda: self.c.leader(name)["candidates"] >= 1, 5),
                        "the second campaign never showed as a candidate")
        resigned = time.monotonic()
        self.assertTrue(first.resign())
        t.join(15 * SCALE)
        self.assertNotIn("error", got, got.get("error"))
        lead = got["lead"]
        handover = got["at"] - resigned
        print(f"MEASURED election handover after resign: {handover * 1000:.0f} ms")
        self.assertLess(handover, 1.0, "the waiting candidate was not woken by the resign")
        self.assertGreater(lead.term, first.term)
        self.assertEqual(lead.value, "b")
        self.assertEqual(self.c.leader(name)["leader"]["term"], lead.term)
        self.assertTrue(lead.resign())

    def test_proclaim_changes_value_keeps_term(self):
        name = uniq()
        with self.c.campaign(name, ttl=5, value="v1") as lead:
            term, before = lead.term, lead.deadline
            time.sleep(0.05)
            lead.proclaim("v2")
            self.assertEqual((lead.term, lead.value), (term, "v2"))
            self.assertGreater(lead.deadline, before, "a proclaim renews")
            info = self.c.leader(name)
            self.assertEqual((info["leader"]["term"], info["leader"]["value"]), (term, "v2"))
            lead.proclaim(None)
            self.assertIsNone(lead.value)
            self.assertIsNone(self.c.leader(name)["leader"]["value"])
            with self.assertRaises(picket.InvalidArgument):
                lead.proclaim("bad\nvalue")
            with self.assertRaises(picket.InvalidArgument):
                lead.proclaim("x" * 4097)

    def test_shorter_renewal_or_proclaim_moves_the_deadline_back(self):
        name = uniq()
        lead = self.c.campaign(name, ttl=10, keep=False)
        self.assertGreater(lead.remaining(), 9.0)
        t0 = time.monotonic()
        lead.renew(ttl=1.0)
        t1 = time.monotonic()
        self.assertAlmostEqual(lead.ttl, 1.0)
        self.assertGreaterEqual(lead.deadline, t0 + 1.0 - picket.drift_margin(1.0) - 1e-6)
        self.assertLessEqual(lead.deadline, t1 + 1.0 - picket.drift_margin(1.0) + 1e-6)
        lead.renew(ttl=10.0)
        self.assertGreater(lead.remaining(), 9.0)
        lead.proclaim("shorter", ttl=1.0)
        self.assertLessEqual(lead.remaining(), 1.0)
        self.assertTrue(lead.resign())

    def test_terms_strictly_increase(self):
        name = uniq()
        terms = []
        for _ in range(3):
            lead = self.c.campaign(name, ttl=10, keep=False)
            terms.append(lead.term)
            lead.resign()
        lead = self.c.campaign(name, ttl=10, keep=False)
        terms.append(lead.term)
        br = self.c.break_election(name)
        self.assertTrue(br["broken"])
        self.assertGreaterEqual(br["term"], lead.term)
        lead = self.c.campaign(name, ttl=10, keep=False)
        terms.append(lead.term)
        lead.resign()
        self.assertEqual(terms, sorted(set(terms)), f"terms not strictly increasing: {terms}")
        self.assertGreaterEqual(terms[-1], br["term"], "the next term is at or past the floor")

    def test_bad_names_and_values_are_refused_locally(self):
        with self.assertRaises(picket.InvalidArgument):
            self.c.campaign("x" * 199)
        with self.assertRaises(picket.InvalidArgument):
            self.c.campaign(uniq(), value=7)
        with self.assertRaises(picket.InvalidArgument):
            self.c.campaign(uniq(), lease="nope")
        # a name that is not a picket name maps as lock names do
        self.assertEqual(picket.election_name("a b"), picket.lock_name("a b"))


class Observe(ClientCase):
    def test_current_state_first_then_changes(self):
        name = uniq()
        lead = self.c.campaign(name, ttl=10, owner="obs", value="one", keep=False)
        events = self.c.observe(name, timeout=10 * SCALE)
        first = next(events)
        self.assertEqual(first.type, "leader")
        self.assertEqual((first.election, first.leader_term, first.value, first.owner),
                         (name, lead.term, "one", "obs"))
        self.assertEqual(first.term, lead.term)
        lead.proclaim("two")
        ev = next(events)
        self.assertEqual((ev.leader_term, ev.value), (lead.term, "two"), "a proclaim: same term")
        lead.resign()
        ev = next(events)
        self.assertIsNone(ev.leader, "leader null after the resign")
        self.assertIsNone(ev.leader_term)
        self.assertEqual(ev.term, lead.term)
        nxt = self.c.campaign(name, ttl=10, value="three", keep=False)
        ev = next(events)
        self.assertEqual((ev.leader_term, ev.value), (nxt.term, "three"))
        self.assertGreater(nxt.term, lead.term)
        events.close()
        nxt.resign()

    def test_nobody_leads(self):
        name = uniq()
        events = self.c.observe(name, timeout=5 * SCALE)
        first = next(events)
        self.assertIsNone(first.leader)
        self.assertEqual((first.election, first.term), (name, 0))
        events.close()

    def test_ends_at_timeout(self):
        t0 = time.monotonic()
        self.assertEqual(len(list(self.c.observe(uniq(), timeout=0.5))), 1, "just the state")
        self.assertLess(time.monotonic() - t0, 3.0)


class Keeper(ClientCase):
    def test_renews_past_several_ttls(self):
        name = uniq()
        with self.c.campaign(name, ttl=0.6) as lead:
            end = time.monotonic() + 2.0
            while time.monotonic() < end:
                self.assertTrue(lead.valid(), "leadership lapsed while the keeper ran")
                time.sleep(0.05)
            self.assertEqual(self.c.leader(name)["leader"]["term"], lead.term)

    def test_lost_after_a_break(self):
        name = uniq()
        seen = []
        with self.assertRaises(picket.LeaseLost):
            with self.c.campaign(name, ttl=1.0, on_lost=seen.append) as lead:
                self.c.break_election(name)  # loopback may break without --auth-file
                t0 = time.monotonic()
                self.assertTrue(lead.lost.wait(2 * SCALE), "lost not set after a break")
                self.assertLess(time.monotonic() - t0, 1.0, "found at the next renewal (ttl/3)")
                self.assertFalse(lead.valid())
                self.assertTrue(until(lambda: seen, 1), "on_lost not called")  # called after lost is set
                self.assertEqual(seen, [lead])
        self.assertIsNone(self.c.leader(name)["leader"])

    def test_lost_at_the_deadline_when_renewals_fail(self):
        # picketd stopped: renewals time out; the deadline passes, lost is
        # set at it (not a client timeout later).
        c = picket.Client(env("URL"), timeout=5)
        self.addCleanup(c.close)
        lead = c.campaign(uniq(), ttl=1.0)
        check_lost_at_the_deadline(self, lead)
        with self.assertRaises(picket.LeaseLost):
            lead.renew()

    def test_not_kept_expires(self):
        name = uniq()
        lead = self.c.campaign(name, ttl=0.3, keep=False)
        self.assertTrue(until(lambda: self.c.leader(name)["leader"] is None, 3),
                        "an unrenewed leadership did not expire")
        self.assertFalse(lead.valid())
        with self.assertRaises(picket.LeaseLost):
            lead.renew()
        self.assertTrue(lead.lost.is_set())


class Fenced(unittest.TestCase):
    """The term is the fence of resource NAME for fenced storage: a signing
    picketd's token verifies at a fenced-kv on the same key, and a deposed
    leader's term is refused once a newer one was seen."""

    def test_term_guards_fenced_kv(self):
        c = picket.Client(env("SIGNED_URL"))
        self.addCleanup(c.close)
        kv, name = env("KV_URL"), uniq()
        key = name + "-job"
        old = c.campaign(name, ttl=10, keep=False)
        self.assertTrue(old.token, "a signing picketd sends a token")
        self.assertIn("Picket-Fence-Token", old.fence_headers())
        status, body = kv_put(kv, key, "run-1", old.fence_headers())
        self.assertEqual(status, 200, body)
        old.resign()
        new = c.campaign(name, ttl=10, keep=False)
        self.assertGreater(new.term, old.term)
        status, body = kv_put(kv, key, "run-2", new.fence_headers())
        self.assertEqual(status, 200, body)
        status, body = kv_put(kv, key, "zombie", old.fence_headers())
        self.assertEqual(status, 409, body)
        self.assertIn("stale_fence", body)
        new.resign()


if __name__ == "__main__":
    unittest.main()
