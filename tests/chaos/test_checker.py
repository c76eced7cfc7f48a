#!/usr/bin/env python3
"""Tests of tests/chaos/checker.py: each safety rule passes on a correct
history and fails on a crafted bad one; the information rules never fail;
input errors exit 2; output is the same byte for byte on every run.

  python3 tests/chaos/test_checker.py [-v] [unittest arguments]

Histories are built in code: the H builder below for small crafted ones,
and simulate() for long ones from a toy lock service and fenced-kv
(correct by construction, or with one of the bugs the mutants of
tests/chaos/mutants/ stand for). Times are written in milliseconds and
turned into the history's nanoseconds.
"""

import heapq
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checker  # noqa: E402

CHECKER = os.path.join(HERE, "checker.py")
MS = 1_000_000
T0 = 5_000_000_000_000        # a monotonic clock is far from zero


def ns(ms):
    return T0 + int(ms * MS)


class H:
    """A small history: each helper appends an invoke and, unless the
    outcome is None (never completed), its completion. Times in ms."""

    def __init__(self):
        self.events = []

    def ev(self, t, type_, process, f, **fields):
        e = {"time": ns(t), "type": type_, "process": process, "f": f}
        e.update({k: v for k, v in fields.items() if v is not None})
        self.events.append(e)
        return self

    def op(self, p, f, t0, t1, outcome, common, inv=None, done=None):
        self.ev(t0, "invoke", p, f, **common, **(inv or {}))
        if outcome is not None:
            self.ev(t1, outcome, p, f, **common, **(done or {}))
        return self

    def acquire(self, p, lock, lease, fence, t0, t1, ttl=1000, outcome="ok", error="lock_held"):
        done = {"fence": fence, "ttl_ms": ttl} if outcome == "ok" else {"error": error}
        return self.op(p, "acquire", t0, t1, outcome, {"lock": lock, "lease": lease},
                       {"ttl_ms": ttl}, done)

    def renew(self, p, lock, lease, fence, t0, t1, ttl=1000, outcome="ok"):
        done = {"fence": fence, "ttl_ms": ttl} if outcome == "ok" else {"error": "lease_lost"}
        return self.op(p, "renew", t0, t1, outcome, {"lock": lock, "lease": lease},
                       {"ttl_ms": ttl}, done)

    def release(self, p, lock, lease, t0, t1, outcome="ok"):
        error = "lease_lost" if outcome == "fail" else "timeout"
        done = {} if outcome == "ok" else {"error": error}
        return self.op(p, "release", t0, t1, outcome, {"lock": lock, "lease": lease}, None, done)

    def claim(self, p, lock, fence, t0, t1, outcome="ok"):
        done = {} if outcome == "ok" else {"error": "stale_fence"}
        return self.op(p, "claim", t0, t1, outcome, {"lock": lock, "fence": fence}, None, done)

    def write(self, p, lock, key, fence, version, t0, t1, outcome="ok", value=1):
        done = {"version": version} if outcome == "ok" else {"error": "stale_fence"}
        return self.op(p, "write", t0, t1, outcome, {"lock": lock, "key": key, "fence": fence},
                       {"value": value}, done)

    def add(self, p, lock, key, fence, element, version, t0, t1, outcome="ok", error="stale_fence"):
        done = {"version": version} if outcome == "ok" else {"error": error}
        return self.op(p, "add", t0, t1, outcome,
                       {"lock": lock, "key": key, "fence": fence, "element": element}, None, done)

    def final_read(self, lock, key, value, t0, t1, outcome="ok"):
        done = {"value": value, "version": len(value)} if outcome == "ok" else {"error": "timeout"}
        return self.op("final", "final-read", t0, t1, outcome, {"lock": lock, "key": key},
                       None, done)

    # An election's calls (lock: the election's name; fence: the term).
    def campaign(self, p, name, lease, term, t0, t1, ttl=1000, outcome="ok",
                 error="leader_exists"):
        done = {"fence": term, "ttl_ms": ttl} if outcome == "ok" else {"error": error}
        return self.op(p, "campaign", t0, t1, outcome, {"lock": name, "lease": lease},
                       {"ttl_ms": ttl}, done)

    def lead_renew(self, p, name, lease, term, t0, t1, ttl=1000, outcome="ok", f="lead-renew"):
        done = {"fence": term, "ttl_ms": ttl} if outcome == "ok" else {"error": "lease_lost"}
        return self.op(p, f, t0, t1, outcome, {"lock": name, "lease": lease}, {"ttl_ms": ttl},
                       done)

    def proclaim(self, p, name, lease, term, t0, t1, ttl=1000, outcome="ok"):
        return self.lead_renew(p, name, lease, term, t0, t1, ttl, outcome, f="proclaim")

    def resign(self, p, name, lease, t0, t1, outcome="ok"):
        done = {} if outcome == "ok" else {"error": "lease_lost"}
        return self.op(p, "resign", t0, t1, outcome, {"lock": name, "lease": lease}, None, done)

    def lead_write(self, p, name, key, term, version, t0, t1, outcome="ok"):
        done = {"version": version} if outcome == "ok" else {"error": "stale_fence"}
        return self.op(p, "lead-write", t0, t1, outcome, {"lock": name, "key": key, "fence": term},
                       None, done)

    def fault(self, kind, fid, t0, t1=None):
        self.ev(t0, "info", "nemesis", "start", value={"fault": kind, "id": fid})
        if t1 is not None:
            self.ev(t1, "info", "nemesis", "stop", value={"fault": kind, "id": fid})
        return self


def good_history():
    """Two workers take turns on one lock, each claims, writes and adds;
    all correct."""
    h = H()
    h.acquire(1, "a", "L1", 1, 0, 2)
    h.claim(1, "a", 1, 3, 4)
    h.write(1, "a", "a.reg", 1, 1, 5, 6)
    h.add(1, "a", "a.set", 1, "w1-1", 1, 7, 8)
    h.renew(1, "a", "L1", 1, 9, 10)
    h.release(1, "a", "L1", 11, 12)
    h.acquire(2, "a", "L2", 1, 1, 3, outcome="fail")          # lock_held while 1 held it
    h.acquire(2, "a", "L3", 2, 13, 14)
    h.write(2, "a", "a.reg", 2, 2, 15, 16)
    h.add(2, "a", "a.set", 2, "w2-1", 2, 17, 18)
    h.release(2, "a", "L3", 19, 20)
    h.final_read("a", "a.set", ["w1-1", "w2-1"], 30, 31)
    return h.events


def run(events):
    return checker.check(events)


def write_history(events, path):
    with open(path, "w") as f:
        for e in events:
            f.write(json.dumps(e, sort_keys=True) + "\n")


def cli(*args, env=None):
    return subprocess.run([sys.executable, CHECKER, *args], capture_output=True, text=True,
                          env=env)


class Base(unittest.TestCase):
    def assertPasses(self, result, rule):
        r = result["rules"][rule]
        self.assertTrue(r["ok"], "%s failed: %s" % (rule, r["examples"]))
        self.assertEqual(r["violations"], 0)

    def assertFails(self, result, rule, n=None, mention=()):
        r = result["rules"][rule]
        self.assertFalse(r["ok"], "%s passed" % rule)
        if n is not None:
            self.assertEqual(r["violations"], n, r["examples"])
        text = "\n".join(r["examples"])
        for m in mention:
            self.assertIn(m, text)
        return r

    def assertAllPass(self, result):
        for rule in checker.SAFETY_RULES:
            self.assertPasses(result, rule)


class GoodHistory(Base):
    def test_correct_history_passes_every_rule(self):
        self.assertAllPass(run(good_history()))

    def test_empty_history_passes(self):
        self.assertAllPass(run([]))


class FenceRepeated(Base):
    def test_two_leases_with_one_fence_fail(self):
        h = H().acquire(1, "a", "L1", 7, 0, 1).acquire(2, "a", "L2", 7, 0.5, 1.5)
        self.assertFails(run(h.events), "no_fence_repeated", 1, ("L1", "L2", "fence 7"))

    def test_one_fence_on_two_locks_is_fine(self):
        h = H().acquire(1, "a", "L1", 7, 0, 1).acquire(2, "b", "L2", 7, 0.5, 1.5)
        self.assertPasses(run(h.events), "no_fence_repeated")

    def test_idempotent_retry_is_not_a_repeat(self):
        # The first reply was lost (info); the retry with the same lease
        # returns the same grant; later an ok retry while it is live again.
        h = (H().acquire(1, "a", "L1", None, 0, 100, outcome="info")
             .acquire(1, "a", "L1", 3, 101, 102)
             .acquire(1, "a", "L1", 3, 200, 201))
        result = run(h.events)
        self.assertAllPass(result)
        self.assertEqual(result["info"]["history"]["grants"], 1)

    def test_same_lease_new_fence_after_expiry_is_fine(self):
        h = H().acquire(1, "a", "L1", 3, 0, 1).acquire(1, "a", "L1", 4, 2000, 2001)
        self.assertAllPass(run(h.events))


def read_acquire(h, p, lock, lease, fence, t0, t1, ttl=1000):
    return h.op(p, "read-acquire", t0, t1, "ok", {"lock": lock, "lease": lease},
                {"ttl_ms": ttl}, {"fence": fence, "ttl_ms": ttl})


def read_release(h, p, lock, lease, t0, t1):
    return h.op(p, "read-release", t0, t1, "ok", {"lock": lock, "lease": lease}, None, {})


class ReadsFollowWrites(Base):
    """A read/write lock's leases: writes are the lock's grants, reads
    their own (read-acquire ...), all under the lock NAME:rw."""

    def good(self):
        h = H().acquire(1, "p:rw", "W1", 5, 0, 1).release(1, "p:rw", "W1", 10, 11)
        read_acquire(h, 2, "p:rw", "R1", 5, 12, 13)
        read_acquire(h, 3, "p:rw", "R2", 5, 12, 14)       # readers share the epoch
        read_release(h, 2, "p:rw", "R1", 20, 21)
        read_release(h, 3, "p:rw", "R2", 20, 22)
        h.acquire(1, "p:rw", "W2", 6, 30, 31)
        return h

    def test_readers_sharing_the_last_write_fence_pass(self):
        self.assertAllPass(run(self.good().events))

    def test_read_below_an_ended_write_fails(self):
        h = self.good()
        h.release(1, "p:rw", "W2", 40, 41)
        read_acquire(h, 2, "p:rw", "R3", 5, 50, 51)        # reads an epoch older than W2's
        self.assertFails(run(h.events), "reads_follow_writes", 1, ("read lease R3 fence 5",
                                                                   "W2 fence 6"))

    def test_write_not_above_an_ended_read_fails(self):
        h = H()
        read_acquire(h, 2, "p:rw", "R1", 7, 0, 1)
        read_release(h, 2, "p:rw", "R1", 5, 6)
        h.acquire(1, "p:rw", "W1", 7, 10, 11)              # a write at the read's epoch
        self.assertFails(run(h.events), "reads_follow_writes", 1, ("write lease W1 fence 7",))

    def test_reads_are_not_grants_of_the_lock(self):
        # shared fences among readers are no repeated fence
        h = self.good()
        result = run(h.events)
        self.assertPasses(result, "no_fence_repeated")
        self.assertEqual(result["info"]["history"]["grants"], 2)


class FencesFollowRealTime(Base):
    def test_lower_fence_after_release_fails(self):
        h = (H().acquire(1, "a", "L1", 5, 0, 1).release(1, "a", "L1", 10, 11)
             .acquire(2, "a", "L2", 4, 12, 13))
        r = self.assertFails(run(h.events), "fences_follow_real_time", 1,
                             ("L2 fence 4", "L1 fence 5", "released ok"))
        self.assertIn("t=%d" % ns(11), r["examples"][0])

    def test_equal_fence_after_release_fails(self):
        h = (H().acquire(1, "a", "L1", 5, 0, 1).release(1, "a", "L1", 10, 11)
             .acquire(2, "a", "L2", 5, 12, 13))
        result = run(h.events)
        self.assertFails(result, "fences_follow_real_time", 1)
        self.assertFails(result, "no_fence_repeated", 1)

    def test_lower_fence_after_ttl_ran_out_fails(self):
        h = H().acquire(1, "a", "L1", 5, 0, 1, ttl=100).acquire(2, "a", "L2", 4, 102, 103)
        self.assertFails(run(h.events), "fences_follow_real_time", 1, ("ttl ran out",))

    def test_renew_extends_the_lifetime(self):
        # Renewed at 90 for 100 ms: alive until 191, so a grant invoked at
        # 150 is concurrent, not later, whatever its fence.
        h = (H().acquire(1, "a", "L1", 5, 0, 1, ttl=100).renew(1, "a", "L1", 5, 89, 91, ttl=100)
             .acquire(2, "a", "L2", 4, 150, 151))
        self.assertPasses(run(h.events), "fences_follow_real_time")
        h.acquire(3, "a", "L3", 3, 192, 193)
        self.assertFails(run(h.events), "fences_follow_real_time", 1, ("L3 fence 3",))

    def test_concurrent_grants_have_no_order(self):
        # L2 was invoked while L1 may still have been alive: overlapping,
        # so any fence order is consistent with real time.
        h = H().acquire(1, "a", "L1", 5, 0, 1).acquire(2, "a", "L2", 4, 500, 501)
        self.assertPasses(run(h.events), "fences_follow_real_time")

    def test_release_ended_info_does_not_end_it_early(self):
        h = (H().acquire(1, "a", "L1", 5, 0, 1, ttl=1000)
             .release(1, "a", "L1", 10, 11, outcome="info")
             .acquire(2, "a", "L2", 4, 12, 13))
        self.assertPasses(run(h.events), "fences_follow_real_time")

    def test_release_never_completed_does_not_end_it_early(self):
        h = (H().acquire(1, "a", "L1", 5, 0, 1, ttl=1000)
             .release(1, "a", "L1", 10, None, outcome=None)
             .acquire(2, "a", "L2", 4, 12, 13))
        self.assertPasses(run(h.events), "fences_follow_real_time")

    def test_an_indeterminate_try_may_have_created_the_grant(self):
        # L1's first try (invoked at 0) timed out; its retry at 30 returned
        # fence 1. The store may have granted fence 1 at time 0, before L2's
        # grant (fence 2, released at 20): no violation.
        h = (H().acquire(1, "a", "L1", None, 0, 5, outcome="info")
             .acquire(2, "a", "L2", 2, 1, 2).release(2, "a", "L2", 19, 20)
             .acquire(1, "a", "L1", 1, 30, 31))
        self.assertPasses(run(h.events), "fences_follow_real_time")
        # Without that try, the same grants are out of order.
        h2 = (H().acquire(2, "a", "L2", 2, 1, 2).release(2, "a", "L2", 19, 20)
              .acquire(1, "a", "L1", 1, 30, 31))
        self.assertFails(run(h2.events), "fences_follow_real_time", 1)

    def test_one_violation_per_late_grant(self):
        h = (H().acquire(1, "a", "L1", 9, 0, 1).release(1, "a", "L1", 2, 3)
             .acquire(2, "a", "L2", 1, 4, 5).release(2, "a", "L2", 6, 7)
             .acquire(2, "a", "L3", 2, 8, 9).release(2, "a", "L3", 10, 11))
        self.assertFails(run(h.events), "fences_follow_real_time", 2, ("L1 fence 9",))


class ReplacedLeaseStaysLost(Base):
    RULE = "replaced_lease_stays_lost"

    @staticmethod
    def replaced():
        """L1 is granted fence 1 for 100 ms, expires; L2 is granted fence 2
        (ok at 151) and holds the lock until 1151."""
        return (H().acquire(1, "a", "L1", 1, 0, 1, ttl=100)
                .acquire(2, "a", "L2", 2, 150, 151, ttl=1000))

    def test_release_after_a_higher_fence_was_granted_fails(self):
        # The zombie's late release succeeds: release-no-lease-check.
        h = self.replaced().release(1, "a", "L1", 300, 301)
        result = run(h.events)
        r = self.assertFails(result, self.RULE, 1, (
            "lock a: release ok of lease L1 fence 1 (process 1, acquire ok t=%d)" % ns(1),
            "invoked t=%d, ok t=%d" % (ns(300), ns(301)),
            "after lease L2 fence 2 (process 2, acquire ok t=%d) had replaced it" % ns(151)))
        self.assertEqual(len(r["examples"]), 1)
        # None of the other safety rules sees it.
        for rule in checker.SAFETY_RULES:
            if rule != self.RULE:
                self.assertPasses(result, rule)

    def test_renew_after_a_higher_fence_was_granted_fails(self):
        # A renew that brings the old lease back, its reply naming L1's grant.
        h = self.replaced().renew(1, "a", "L1", 1, 300, 301)
        self.assertFails(run(h.events), self.RULE, 1, (
            "renew ok of lease L1 fence 1", "(named by its reply)", "lease L2 fence 2"))

    def test_renew_whose_reply_names_no_grant_of_the_lease_fails(self):
        # A renew that answers the holder's fence (2) for L1: no grant of L1
        # has fence 2, so it is about L1's latest grant, fence 1.
        h = self.replaced().renew(1, "a", "L1", 2, 300, 301)
        r = self.assertFails(run(h.events), self.RULE, 1, ("renew ok of lease L1 fence 1",))
        self.assertNotIn("named by its reply", r["examples"][0])

    def test_a_grant_asked_for_before_the_lease_was_granted_does_not_replace_it(self):
        # M (fence 5) is granted first; after a lost counter L is granted
        # fence 3 (the fence went backwards: fences_follow_real_time's to
        # judge), and L's release is fine by this rule.
        h = (H().acquire(2, "a", "M", 5, 0, 1, ttl=100)
             .acquire(1, "a", "L", 3, 200, 201, ttl=1000)
             .release(1, "a", "L", 300, 301))
        result = run(h.events)
        self.assertPasses(result, self.RULE)
        self.assertFails(result, "fences_follow_real_time", 1, ("lease L fence 3",))

    def test_renew_and_release_before_the_new_grant_completed_pass(self):
        h = (H().acquire(1, "a", "L1", 1, 0, 1, ttl=100)
             .renew(1, "a", "L1", 1, 50, 51, ttl=100)
             .release(1, "a", "L1", 60, 61)
             .acquire(2, "a", "L2", 2, 62, 63))
        self.assertAllPass(run(h.events))

    def test_invoke_time_counts_not_completion(self):
        # L1's renew is invoked at 140, before L2's acquire completed (150),
        # and answered ok at 160, after it: the store may have renewed L1
        # before granting L2 (L2 waited, say), so no violation.
        h = (H().acquire(1, "a", "L1", 1, 0, 1, ttl=100)
             .acquire(2, "a", "L2", 2, 120, 150, ttl=1000)
             .renew(1, "a", "L1", 1, 140, 160, ttl=100))
        self.assertPasses(run(h.events), self.RULE)
        # Invoked exactly at the completion is not after it either.
        h = self.replaced().renew(1, "a", "L1", 1, 151, 152)
        self.assertPasses(run(h.events), self.RULE)
        h = self.replaced().renew(1, "a", "L1", 1, 151.001, 152)
        self.assertFails(run(h.events), self.RULE, 1)

    def test_idempotent_same_lease_retry_passes(self):
        # L1's first reply was lost; its retries return the same grant; its
        # own acquires never replace it, whatever their number.
        h = (H().acquire(1, "a", "L1", None, 0, 100, outcome="info")
             .acquire(1, "a", "L1", 3, 101, 102)
             .acquire(1, "a", "L1", 3, 200, 201)
             .renew(1, "a", "L1", 3, 300, 301)
             .release(1, "a", "L1", 400, 401)
             .acquire(2, "a", "L2", 4, 402, 403))
        result = run(h.events)
        self.assertAllPass(result)
        self.assertEqual(result["info"]["history"]["grants"], 2)

    def test_lease_granted_again_above_the_new_fence_passes(self):
        # L1 is granted again (fence 3) after L2's grant: its renew and
        # release are about that grant.
        h = (self.replaced().acquire(1, "a", "L1", 3, 1200, 1201)
             .renew(1, "a", "L1", 3, 1300, 1301).release(1, "a", "L1", 1400, 1401))
        self.assertAllPass(run(h.events))

    def test_only_a_higher_fence_replaces(self):
        # L2 (fence 1) and L1 (fence 2) overlap in the harness's bounds:
        # fence 2 is the later grant, which replaced L2, not the other way.
        h = (H().acquire(2, "a", "L2", 1, 0, 1, ttl=1000)
             .acquire(1, "a", "L1", 2, 500, 501, ttl=1000)
             .renew(1, "a", "L1", 2, 600, 601, ttl=1000))
        self.assertPasses(run(h.events), self.RULE)
        h.renew(2, "a", "L2", 1, 700, 701)
        self.assertFails(run(h.events), self.RULE, 1, ("renew ok of lease L2 fence 1",
                                                       "lease L1 fence 2"))

    def test_failed_and_indeterminate_calls_do_not_count(self):
        h = (self.replaced().renew(1, "a", "L1", None, 300, 301, outcome="fail")
             .release(1, "a", "L1", 400, 401, outcome="info")
             .release(1, "a", "L1", 500, 501, outcome="fail")
             .release(1, "a", "L1", 600, None, outcome=None))
        self.assertAllPass(run(h.events))

    def test_other_locks_do_not_matter(self):
        h = (H().acquire(1, "a", "L1", 1, 0, 1, ttl=100)
             .acquire(2, "b", "L2", 2, 150, 151).release(1, "a", "L1", 300, 301))
        self.assertPasses(run(h.events), self.RULE)

    def test_an_indeterminate_try_may_have_granted_the_lease_again(self):
        # L1 acquires again (invoked at 200) and times out: the store may
        # have granted L1 fence 3 then, and the release be about that.
        h = (self.replaced().acquire(1, "a", "L1", None, 200, 210, outcome="info")
             .release(1, "a", "L1", 300, 301))
        self.assertPasses(run(h.events), self.RULE)
        # Also when that try is answered ok only after the release.
        h = (self.replaced().acquire(1, "a", "L1", 3, 200, 400)
             .release(3, "a", "L1", 300, 301))
        self.assertPasses(run(h.events), self.RULE)
        # A try invoked only after the release's reply cannot explain it.
        h = (self.replaced().release(1, "a", "L1", 300, 301)
             .acquire(1, "a", "L1", None, 302, 310, outcome="info"))
        self.assertFails(run(h.events), self.RULE, 1)
        # A renew whose reply names L1's fence-1 grant is judged regardless.
        h = (self.replaced().acquire(1, "a", "L1", None, 200, 210, outcome="info")
             .renew(1, "a", "L1", 1, 300, 301))
        self.assertFails(run(h.events), self.RULE, 1, ("(named by its reply)",))

    def test_completion_without_invoke_is_not_judged(self):
        h = self.replaced().ev(301, "ok", 1, "release", lock="a", lease="L1")
        result = run(h.events)
        self.assertPasses(result, self.RULE)
        self.assertEqual(result["info"]["history"]["anomalies"], {"completion_without_invoke": 1})

    def test_one_violation_per_call_named_with_the_highest_fence(self):
        h = (self.replaced().acquire(3, "a", "L3", 7, 160, 161, ttl=10)
             .acquire(4, "a", "L4", 5, 170, 171)
             .renew(1, "a", "L1", 1, 300, 301).release(1, "a", "L1", 400, 401)
             .release(2, "a", "L2", 500, 501))
        r = self.assertFails(run(h.events), self.RULE, 3)
        self.assertEqual([x.split(" ok of ")[0] for x in r["examples"]],
                         ["lock a: renew", "lock a: release", "lock a: release"])
        for x in r["examples"]:
            self.assertIn("after lease L3 fence 7", x)
        self.assertIn("ok of lease L2 fence 2", r["examples"][2])

    def test_the_highest_fence_of_another_lease_is_found(self):
        # L1 is granted again and holds the highest fence so far (5). Its
        # release is about that grant: no other lease has a fence above 5.
        # A renew whose reply names L1's old grant (fence 1) is judged
        # against the highest fence of the other leases: L3's 4, not L1's 5.
        h = (H().acquire(1, "a", "L1", 1, 0, 1, ttl=10)
             .acquire(2, "a", "L2", 2, 20, 21, ttl=10)
             .acquire(3, "a", "L3", 4, 40, 41, ttl=10)
             .acquire(1, "a", "L1", 5, 60, 61, ttl=1000)
             .release(1, "a", "L1", 100, 101))
        self.assertPasses(run(h.events), self.RULE)
        h.renew(1, "a", "L1", 1, 200, 201)
        self.assertFails(run(h.events), self.RULE, 1, ("renew ok of lease L1 fence 1",
                                                       "after lease L3 fence 4"))

    def test_many_grants_are_swept_quickly(self):
        # 8000 grants on 4 locks, each renewed and released in time, one
        # late release at the end (a quadratic sweep would take minutes).
        h = H()
        for i in range(8000):
            t = (i // 4) * 10
            lease = "L%d" % i
            h.acquire(i % 50, "k%d" % (i % 4), lease, i + 1, t, t + 1, ttl=8)
            h.renew(i % 50, "k%d" % (i % 4), lease, i + 1, t + 2, t + 3, ttl=8)
            h.release(i % 50, "k%d" % (i % 4), lease, t + 4, t + 5)
        h.release(0, "k0", "L0", 60000, 60001)
        self.assertFails(run(h.events), self.RULE, 1, ("release ok of lease L0 fence 1",
                                                       "after lease L7996 fence 7997"))


class NoStaleWrite(Base):
    def test_write_with_lower_fence_after_claim_fails(self):
        # The new holder claimed fence 6; the zombie's write with fence 5,
        # invoked after that claim's ok, was admitted.
        h = (H().claim(2, "a", 6, 10, 11)
             .write(1, "a", "a.reg", 5, 3, 12, 13))
        self.assertFails(run(h.events), "no_stale_write", 1, ("(b)", "claim fence 6", "fence 5"))

    def test_zombie_write_before_claim_is_admitted(self):
        # Fencing orders writes; a zombie write that lands before the new
        # holder's first write or claim is allowed.
        h = (H().write(1, "a", "a.reg", 5, 3, 10, 12)
             .claim(2, "a", 6, 11, 13)
             .write(2, "a", "a.reg", 6, 4, 14, 15))
        self.assertAllPass(run(h.events))

    def test_versions_out_of_fence_order_fail(self):
        # Version 2 carries fence 4 after version 1 with fence 5: fenced-kv
        # admitted them in that order. The two writes overlap in time, so
        # only the version order shows it.
        h = (H().write(1, "a", "a.reg", 5, 1, 0, 10)
             .write(2, "a", "a.reg", 4, 2, 1, 11))
        self.assertFails(run(h.events), "no_stale_write", 1,
                         ("(a)", "version 2", "earlier version 1 carries fence 5"))

    def test_other_keys_of_one_lock_share_its_highest_fence(self):
        h = (H().add(2, "a", "a.set", 6, "e1", 1, 0, 1)
             .write(1, "a", "a.reg", 5, 1, 2, 3))
        self.assertFails(run(h.events), "no_stale_write", 1, ("a.reg", "add fence 6"))

    def test_other_locks_do_not_matter(self):
        h = (H().claim(2, "b", 6, 10, 11)
             .write(1, "a", "a.reg", 5, 3, 12, 13))
        self.assertPasses(run(h.events), "no_stale_write")

    def test_refused_writes_do_not_count(self):
        h = (H().claim(2, "a", 6, 10, 11)
             .write(1, "a", "a.reg", 5, None, 12, 13, outcome="fail"))
        self.assertPasses(run(h.events), "no_stale_write")

    def test_a_write_stale_both_ways_counts_once(self):
        h = (H().write(2, "a", "a.reg", 6, 1, 0, 1)
             .write(1, "a", "a.reg", 5, 2, 2, 3))
        r = self.assertFails(run(h.events), "no_stale_write", 1, ("(a)", "(b)"))
        self.assertEqual(len(r["examples"]), 1)

    def test_the_fence_sent_is_judged(self):
        # The ok carries another fence than the invoke sent: the invoke's is
        # what fenced-kv judged.
        h = H().claim(2, "a", 6, 0, 1)
        h.ev(2, "invoke", 1, "write", lock="a", key="a.reg", fence=5)
        h.ev(3, "ok", 1, "write", lock="a", key="a.reg", fence=7, version=1)
        self.assertFails(run(h.events), "no_stale_write", 1, ("fence 5",))


class NoLostElement(Base):
    def test_acknowledged_element_missing_fails(self):
        h = (H().add(1, "a", "a.set", 1, "e1", 1, 0, 1).add(1, "a", "a.set", 1, "e2", 2, 2, 3)
             .final_read("a", "a.set", ["e1"], 10, 11))
        self.assertFails(run(h.events), "no_lost_element", 1, ("e2", "missing"))

    def test_phantom_element_fails(self):
        h = (H().add(1, "a", "a.set", 1, "e1", 1, 0, 1)
             .final_read("a", "a.set", ["e1", "zz"], 10, 11))
        self.assertFails(run(h.events), "no_lost_element", 1, ("zz", "phantom"))

    def test_refused_but_present_fails(self):
        h = (H().add(1, "a", "a.set", 1, "e1", None, 0, 1, outcome="fail", error="version_mismatch")
             .final_read("a", "a.set", ["e1"], 10, 11))
        self.assertFails(run(h.events), "no_lost_element", 1, ("e1", "refused but present",
                                                             "version_mismatch"))

    def test_no_final_read_fails(self):
        h = H().add(1, "a", "a.set", 1, "e1", 1, 0, 1)
        self.assertFails(run(h.events), "no_lost_element", 1, ("a.set", "no final read"))

    def test_final_read_that_ended_info_is_no_final_read(self):
        h = (H().add(1, "a", "a.set", 1, "e1", 1, 0, 1)
             .final_read("a", "a.set", None, 10, 11, outcome="info"))
        self.assertFails(run(h.events), "no_lost_element", 1, ("no final read",))

    def test_the_last_final_read_decides(self):
        h = (H().add(1, "a", "a.set", 1, "e1", 1, 0, 1)
             .final_read("a", "a.set", [], 10, 11)
             .final_read("a", "a.set", ["e1"], 12, 13))
        self.assertPasses(run(h.events), "no_lost_element")

    def test_info_add_may_be_absent_or_present(self):
        for final in ([], ["e1"]):
            h = (H().add(1, "a", "a.set", 1, "e1", None, 0, 1, outcome="info", error="timeout")
                 .final_read("a", "a.set", final, 10, 11))
            self.assertPasses(run(h.events), "no_lost_element")

    def test_add_that_never_completed_counts_as_info(self):
        h = H().add(1, "a", "a.set", 1, "e1", None, 0, None, outcome=None)
        h.final_read("a", "a.set", ["e1"], 10, 11)
        result = run(h.events)
        self.assertPasses(result, "no_lost_element")
        self.assertEqual(result["info"]["history"]["unfinished"], 1)
        self.assertEqual(result["info"]["availability"]["ops"]["add"], {"info": 1})

    def test_failed_add_absent_is_fine(self):
        h = (H().add(1, "a", "a.set", 1, "e1", None, 0, 1, outcome="fail")
             .final_read("a", "a.set", [], 10, 11))
        self.assertPasses(run(h.events), "no_lost_element")


class OverlappingLeases(Base):
    def test_overlaps_are_counted_and_do_not_fail(self):
        # L1 is granted for 1000 ms at 1; L2 at 601 (its holder was paused,
        # say), lower fence: 400 ms of overlap, harmless under fencing.
        h = (H().acquire(1, "a", "L1", 5, 0, 1, ttl=1000)
             .acquire(2, "a", "L2", 6, 600, 601, ttl=1000)
             .acquire(3, "a", "L3", 7, 5000, 5001, ttl=100))
        result = run(h.events)
        self.assertAllPass(result)
        ov = result["info"]["overlapping_leases"]
        self.assertEqual(ov["pairs"], 1)
        self.assertEqual(ov["longest_ms"], 400.0)
        self.assertIn("L1", ov["longest"])
        self.assertIn("L2", ov["longest"])

    def test_lifetimes_are_cut_at_the_history_end(self):
        h = (H().acquire(1, "a", "L1", 5, 0, 1, ttl=1000)
             .acquire(2, "a", "L2", 6, 600, 601, ttl=1000))
        self.assertEqual(run(h.events)["info"]["overlapping_leases"]["pairs"], 0)
        h.final_read("a", "a.set", [], 700, 701)
        self.assertEqual(run(h.events)["info"]["overlapping_leases"]["longest_ms"], 100.0)

    def test_release_ends_the_overlap(self):
        h = (H().acquire(1, "a", "L1", 5, 0, 1).release(1, "a", "L1", 2, 3)
             .acquire(2, "a", "L2", 6, 4, 5))
        self.assertEqual(run(h.events)["info"]["overlapping_leases"]["pairs"], 0)

    def test_longest_overlap_with_many_grants(self):
        h = H()
        for i in range(20):       # each grant overlaps the next by 10 ms ...
            h.acquire(i, "a", "L%d" % i, i + 1, i * 100, i * 100 + 1, ttl=110)
        h.acquire(99, "a", "LX", 50, 1000, 1001, ttl=5000)    # ... and LX the later ones more
        h.final_read("a", "a.set", [], 9000, 9001)    # lifetimes are cut at the history's end
        ov = run(h.events)["info"]["overlapping_leases"]
        # Chain: 19 pairs; LX (1001..6001) overlaps L9..L19, L10 most (1001..1111).
        self.assertEqual(ov["pairs"], 19 + 11)
        self.assertEqual(ov["longest_ms"], 110.0)


class Availability(Base):
    def test_ratios_recovery_and_counts(self):
        h = H()
        h.acquire(1, "a", "L1", 1, 0, 1, ttl=50)
        h.acquire(2, "b", "M1", 1, 0, 1, ttl=50)
        h.fault("pause-redis", 0, 100, 200)
        h.acquire(1, "a", "L2", None, 110, 150, outcome="info", error="timeout")
        h.acquire(2, "b", "M2", 2, 120, 130, ttl=50)
        h.acquire(1, "a", "L3", 2, 210, 230, ttl=50)      # a recovers 30 ms after the stop
        h.acquire(2, "b", "M3", 3, 205, 250, ttl=50)      # b 50 ms after: that decides
        h.fault("pause-redis", 1, 300, 400)
        h.acquire(1, "a", "L4", 3, 410, 420, ttl=50)      # 20 ms; b never recovers
        h.fault("clock-step", 2, 500)                     # no stop: lasts to the end
        h.acquire(1, "a", "L5", 4, 510, 511, ttl=50)
        h.ev(600, "info", "nemesis", "healed", value={"schedule": 0})   # ignored
        result = run(h.events)
        self.assertAllPass(result)
        av = result["info"]["availability"]
        pr = av["faults"]["pause-redis"]
        self.assertEqual(pr["count"], 2)
        self.assertEqual(pr["acquire_during"], {"ok": 1, "total": 2, "ratio": 0.5})
        self.assertEqual(pr["recovery_ms"], {"measured": 2, "never": 1, "median": 50.0,
                                             "max": "never"})
        cs = av["faults"]["clock-step"]
        self.assertEqual(cs["acquire_during"], {"ok": 1, "total": 1, "ratio": 1.0})
        self.assertEqual(cs["recovery_ms"]["measured"], 0)
        self.assertEqual(av["acquire_outside_faults"]["total"], 5)
        self.assertEqual(av["locks_granted"], ["a", "b"])
        self.assertEqual(av["ops"]["acquire"], {"info": 1, "ok": 7})


class Ordering(Base):
    def test_events_out_of_file_order_are_sorted(self):
        events = good_history()
        shuffled = list(events)
        random.Random(4).shuffle(shuffled)
        self.assertNotEqual(shuffled, events)
        self.assertEqual(run(shuffled), run(events))
        self.assertEqual(run(shuffled)["info"]["history"]["anomalies"], {})

    def test_a_late_line_changes_the_verdict_only_by_its_time(self):
        # The claim's ok comes last in the file but first in time: the write
        # invoked after it is stale.
        h = H().write(1, "a", "a.reg", 5, 1, 12, 13).claim(2, "a", 6, 10, 11)
        self.assertFails(run(h.events), "no_stale_write", 1)
        self.assertFails(run(list(reversed(h.events))), "no_stale_write", 1)

    def test_equal_times_keep_file_order(self):
        h = H()
        h.ev(0, "invoke", 1, "acquire", lock="a", lease="L1")
        h.ev(0, "ok", 1, "acquire", lock="a", lease="L1", fence=1, ttl_ms=10)
        result = run(h.events)
        self.assertEqual(result["info"]["history"]["anomalies"], {})
        self.assertEqual(result["info"]["history"]["grants"], 1)


class Anomalies(Base):
    def test_completion_without_invoke_is_used_but_counted(self):
        h = H().ev(5, "ok", 1, "acquire", lock="a", lease="L1", fence=1, ttl_ms=10)
        h.acquire(2, "a", "L2", 1, 6, 7)
        result = run(h.events)
        self.assertFails(result, "no_fence_repeated", 1)
        self.assertEqual(result["info"]["history"]["anomalies"], {"completion_without_invoke": 1})

    def test_bad_event_dict_raises(self):
        with self.assertRaisesRegex(checker.HistoryError, r"events\[1\]: no 'f' field"):
            run([{"time": 1, "type": "invoke", "process": 1, "f": "read"},
                 {"time": 2, "type": "ok", "process": 1}])
        with self.assertRaisesRegex(checker.HistoryError, "'fence' is not an integer"):
            run([{"time": 1, "type": "ok", "process": 1, "f": "claim", "fence": "7"}])


def good_election():
    """Two candidates: 1 leads (term 5), writes, proclaims, resigns; 2 was
    waiting and leads next (term 6) and writes; 3 lost its campaign."""
    h = H()
    h.campaign(1, "lead", "E1", 5, 0, 2)
    h.lead_write(1, "lead", "lead.log", 5, 1, 3, 4)
    h.proclaim(1, "lead", "E1", 5, 5, 6)
    h.lead_renew(1, "lead", "E1", 5, 7, 8)
    h.campaign(2, "lead", "E2", 6, 4, 11)           # waited for 1's resign
    h.campaign(3, "lead", "E3", None, 4.5, 5.5, outcome="fail")
    h.resign(1, "lead", "E1", 9, 10)
    h.lead_write(2, "lead", "lead.log", 6, 2, 12, 13)
    h.resign(2, "lead", "E2", 14, 15)
    return h


class Elections(Base):
    """The election rules: leaderships judged as grants (terms as fences),
    a leader's writes as fenced writes; and apart from the lock rules."""

    def test_correct_election_passes(self):
        result = run(good_election().events)
        self.assertAllPass(result)
        self.assertEqual(result["info"]["history"]["leaderships"], 2)
        self.assertEqual(result["info"]["history"]["grants"], 0)

    def test_elections_and_locks_of_one_name_are_apart(self):
        # Lock "lead" with fence 5 and election "lead" with term 5: no repeat.
        h = good_election().acquire(7, "lead", "L", 5, 20, 21)
        self.assertAllPass(run(h.events))

    def test_terms_rise_fails_on_a_term_gone_back(self):
        h = H().campaign(1, "e", "E1", 5, 0, 1).resign(1, "e", "E1", 2, 3)
        h.campaign(2, "e", "E2", 4, 4, 5)
        self.assertFails(run(h.events), "terms_rise", 1,
                         ("election e:", "lease E2 term 4", "lease E1 term 5", "campaign ok"))
        self.assertPasses(run(h.events), "fences_follow_real_time")

    def test_terms_rise_fails_on_a_term_repeated_after_expiry(self):
        h = H().campaign(1, "e", "E1", 5, 0, 1, ttl=100).campaign(2, "e", "E2", 5, 200, 201)
        r = run(h.events)
        self.assertFails(r, "terms_rise", 1)
        self.assertFails(r, "one_leader_per_term", 1)

    def test_terms_rise_counts_renew_and_proclaim(self):
        # A proclaim extends the leadership: a campaign invoked before its
        # end has no order with it.
        h = H().campaign(1, "e", "E1", 5, 0, 1, ttl=100).proclaim(1, "e", "E1", 5, 50, 60, ttl=500)
        h.campaign(2, "e", "E2", 5, 300, 301)
        r = run(h.events)
        self.assertPasses(r, "terms_rise")
        self.assertFails(r, "one_leader_per_term", 1, ("election e term 5 granted to 2 leases",))

    def test_one_leader_per_term_fails_on_two_leases(self):
        h = H().campaign(1, "e", "E1", 9, 0, 1).campaign(2, "e", "E2", 9, 0.5, 1.5)
        self.assertFails(run(h.events), "one_leader_per_term", 1)
        self.assertPasses(run(h.events), "terms_rise")       # concurrent: no order
        self.assertPasses(run(h.events), "no_fence_repeated")

    def test_one_leader_per_term_allows_a_retry(self):
        h = H().campaign(1, "e", "E1", 9, 0, 1).campaign(1, "e", "E1", 9, 2, 3)
        self.assertPasses(run(h.events), "one_leader_per_term")

    def test_deposed_leader_write_after_successor_wrote_fails(self):
        h = H().campaign(1, "e", "E1", 5, 0, 1, ttl=100).lead_write(1, "e", "e.log", 5, 1, 2, 3)
        h.campaign(2, "e", "E2", 6, 150, 151).lead_write(2, "e", "e.log", 6, 2, 152, 153)
        h.lead_write(1, "e", "e.log", 5, 3, 300, 301)      # the zombie, admitted
        r = run(h.events)
        self.assertFails(r, "deposed_leader_refused", 1, ("election e lead-write e.log fence 5",
                                                          "(a)", "(b)"))
        self.assertPasses(r, "no_stale_write")

    def test_deposed_leader_write_refused_passes(self):
        h = H().campaign(1, "e", "E1", 5, 0, 1, ttl=100).lead_write(1, "e", "e.log", 5, 1, 2, 3)
        h.campaign(2, "e", "E2", 6, 150, 151).lead_write(2, "e", "e.log", 6, 2, 152, 153)
        h.lead_write(1, "e", "e.log", 5, None, 300, 301, outcome="fail")
        self.assertPasses(run(h.events), "deposed_leader_refused")

    def test_deposed_leader_write_before_successor_wrote_is_admitted(self):
        # Fencing orders writes: before the successor's first write the
        # store has not seen the new term.
        h = H().campaign(1, "e", "E1", 5, 0, 1, ttl=100)
        h.campaign(2, "e", "E2", 6, 150, 151)
        h.lead_write(1, "e", "e.log", 5, 1, 160, 161)
        h.lead_write(2, "e", "e.log", 6, 2, 170, 171)
        self.assertPasses(run(h.events), "deposed_leader_refused")

    def test_lock_writes_are_not_barriers_of_an_election(self):
        h = H().write(1, "e", "e.reg", 9, 1, 0, 1).lead_write(2, "e", "e.log", 5, 1, 2, 3)
        self.assertAllPass(run(h.events))

    def test_resign_of_a_deposed_leader_fails(self):
        h = H().campaign(1, "e", "E1", 5, 0, 1, ttl=100).campaign(2, "e", "E2", 6, 150, 151)
        h.resign(1, "e", "E1", 200, 201)                    # ok: it freed E2's leadership
        self.assertFails(run(h.events), "deposed_leader_stays_deposed", 1,
                         ("election e: resign ok of lease E1 term 5",
                          "after lease E2 term 6"))

    def test_renew_and_proclaim_of_a_deposed_leader_fail(self):
        h = H().campaign(1, "e", "E1", 5, 0, 1, ttl=100).campaign(2, "e", "E2", 6, 150, 151)
        h.lead_renew(1, "e", "E1", 5, 200, 201).proclaim(1, "e", "E1", 5, 210, 211)
        self.assertFails(run(h.events), "deposed_leader_stays_deposed", 2)

    def test_deposed_leader_refused_calls_pass(self):
        h = H().campaign(1, "e", "E1", 5, 0, 1, ttl=100).campaign(2, "e", "E2", 6, 150, 151)
        h.resign(1, "e", "E1", 200, 201, outcome="fail").lead_renew(1, "e", "E1", 5, 210, 211,
                                                                     outcome="fail")
        self.assertPasses(run(h.events), "deposed_leader_stays_deposed")

    def test_cli_names_the_election_rules(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "h.jsonl")
            write_history(good_election().events, path)
            p = cli(path)
            self.assertEqual(p.returncode, 0, p.stdout)
            for rule in ("terms_rise", "one_leader_per_term", "deposed_leader_refused",
                         "deposed_leader_stays_deposed"):
                self.assertIn("\n%s: PASS\n" % rule, p.stdout)
            self.assertIn("2 leaderships", p.stdout)


class Simulated(Base):
    """Long histories from simulate(): a correct system passes, each
    mutant fails the rule that should catch it."""

    def test_correct_system_passes(self):
        for seed in (1, 2, 3):
            result = run(simulate(seed, 6000))
            self.assertAllPass(result)
            h = result["info"]["history"]
            self.assertEqual(h["anomalies"], {})
            self.assertGreater(h["grants"], 100)
            self.assertGreater(h["leaderships"], 20)
            ops = result["info"]["availability"]["ops"]
            self.assertGreater(ops["write"].get("fail", 0), 0, "no zombie was refused")
            self.assertGreater(ops["add"].get("info", 0), 0)
            self.assertGreater(ops["lead-write"].get("fail", 0), 0, "no deposed leader refused")

    def test_mutants_are_caught(self):
        for bug, rule in (("reuse-fence", "no_fence_repeated"),
                          ("counter-reset", "fences_follow_real_time"),
                          ("admit-stale", "no_stale_write"),
                          ("release-no-lease-check", "replaced_lease_stays_lost"),
                          ("renew-resurrects", "replaced_lease_stays_lost"),
                          ("lose-element", "no_lost_element"),
                          ("admit-stale", "deposed_leader_refused"),
                          ("campaign-reuses-term", "one_leader_per_term"),
                          ("campaign-reuses-term", "terms_rise"),
                          ("resign-no-lease-check", "deposed_leader_stays_deposed")):
            with self.subTest(bug=bug):
                self.assertFails(run(simulate(1, 6000, bug=bug)), rule)

    def test_election_mutants_break_only_election_rules(self):
        only = {"campaign-reuses-term": ("one_leader_per_term", "terms_rise"),
                "resign-no-lease-check": ("deposed_leader_stays_deposed",)}
        for bug, rules in sorted(only.items()):
            for seed in (1, 2):
                with self.subTest(bug=bug, seed=seed):
                    result = run(simulate(seed, 6000, bug=bug))
                    for rule in checker.SAFETY_RULES:
                        if rule in rules:
                            self.assertFails(result, rule)
                        else:
                            self.assertPasses(result, rule)

    def test_only_the_lease_rule_sees_a_release_without_lease_check(self):
        # Fencing shuts the freed holder out, so the other safety rules pass:
        # replaced_lease_stays_lost is the one that catches this mutant.
        for seed in (1, 2, 3):
            with self.subTest(seed=seed):
                result = run(simulate(seed, 6000, bug="release-no-lease-check"))
                self.assertFails(result, "replaced_lease_stays_lost")
                for rule in checker.SAFETY_RULES:
                    if rule != "replaced_lease_stays_lost":
                        self.assertPasses(result, rule)


class Cli(Base):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_good_history_exits_0(self):
        write_history(good_history(), self.path("h.jsonl"))
        p = cli(self.path("h.jsonl"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[-1], "checker: OK")
        for rule in checker.SAFETY_RULES:
            self.assertIn("%s: PASS" % rule, lines)
        for rule in checker.INFO_RULES:
            self.assertTrue(any(x.startswith(rule + ": INFO") for x in lines))

    def test_failing_history_exits_1_with_examples(self):
        h = H().acquire(1, "a", "L1", 7, 0, 1).acquire(2, "a", "L2", 7, 0.5, 1.5)
        write_history(h.events, self.path("h.jsonl"))
        p = cli(self.path("h.jsonl"))
        self.assertEqual(p.returncode, 1)
        lines = p.stdout.splitlines()
        i = lines.index("no_fence_repeated: FAIL (1 violation)")
        self.assertTrue(lines[i + 1].startswith("    lock a fence 7"))
        self.assertEqual(lines[-1], "checker: 1 safety rule failed")

    def test_two_failed_rules(self):
        h = (H().acquire(1, "a", "L1", 7, 0, 1).acquire(2, "a", "L2", 7, 0.5, 1.5)
             .acquire(3, "c", "N", 2, 20, 21).release(3, "c", "N", 22, 23)
             .acquire(3, "c", "O", 1, 24, 25))
        write_history(h.events, self.path("h.jsonl"))
        p = cli(self.path("h.jsonl"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("\nno_fence_repeated: FAIL (1 violation)\n", p.stdout)
        self.assertIn("\nfences_follow_real_time: FAIL (1 violation)\n", p.stdout)
        self.assertEqual(p.stdout.splitlines()[-1], "checker: 2 safety rules failed")

    def test_one_violation_per_shared_fence(self):
        h = H()
        for i in range(8):
            h.acquire(i, "a", "L%d" % i, 7, i, i + 0.5)
        r = self.assertFails(run(h.events), "no_fence_repeated", 1, ("granted to 8 leases",))
        self.assertEqual(len(r["examples"]), 1)

    def test_examples_are_at_most_five(self):
        h = H()
        for i in range(8):
            h.acquire(2 * i, "k%d" % i, "A%d" % i, 1, i, i + 0.5)
            h.acquire(2 * i + 1, "k%d" % i, "B%d" % i, 1, i, i + 0.5)
        write_history(h.events, self.path("h.jsonl"))
        p = cli(self.path("h.jsonl"), "--json", self.path("out.json"))
        lines = p.stdout.splitlines()
        i = lines.index("no_fence_repeated: FAIL (8 violations)")
        self.assertEqual([x.split()[1] for x in lines[i + 1:i + 6]],
                         ["k0", "k1", "k2", "k3", "k4"])     # the first five, in time order
        self.assertEqual(lines[i + 6], "    ... and 3 more")
        self.assertFalse(lines[i + 7].startswith("    "))
        with open(self.path("out.json")) as f:
            rule = json.load(f)["rules"]["no_fence_repeated"]
        self.assertEqual((rule["ok"], rule["violations"], len(rule["examples"])), (False, 8, 5))

    def test_json_matches_check(self):
        events = simulate(5, 3000)
        write_history(events, self.path("h.jsonl"))
        p = cli(self.path("h.jsonl"), "--json", self.path("out.json"), "--quiet")
        self.assertEqual(p.returncode, 0, p.stdout)
        with open(self.path("out.json")) as f:
            # allow_nan=False: "never" and null stand for what has no number.
            self.assertEqual(json.load(f), json.loads(json.dumps(run(events), allow_nan=False)))

    def test_quiet_prints_verdict_lines_only(self):
        h = H().acquire(1, "a", "L1", 7, 0, 1).acquire(2, "a", "L2", 7, 0.5, 1.5)
        write_history(h.events, self.path("h.jsonl"))
        p = cli(self.path("h.jsonl"), "--quiet")
        self.assertEqual(p.returncode, 1)
        self.assertEqual([x.split(":")[0] for x in p.stdout.splitlines()],
                         list(checker.SAFETY_RULES + checker.INFO_RULES) + ["checker"])

    def test_output_is_byte_identical_across_runs(self):
        for bug, rule in (("reuse-fence", "no_fence_repeated"),
                          ("release-no-lease-check", "replaced_lease_stays_lost")):
            with self.subTest(bug=bug):
                events = simulate(6, 4000, bug=bug)
                random.Random(1).shuffle(events)
                write_history(events, self.path("h.jsonl"))
                outs = []
                for seed in ("0", "1", "12345"):      # set order must not leak into the output
                    env = dict(os.environ, PYTHONHASHSEED=seed)
                    j = self.path("out%s.json" % seed)
                    p = cli(self.path("h.jsonl"), "--json", j, env=env)
                    self.assertEqual(p.returncode, 1)
                    self.assertIn("\n%s: FAIL (" % rule, p.stdout)
                    with open(j, "rb") as f:
                        outs.append((p.stdout, f.read()))
                self.assertEqual(outs[0], outs[1])
                self.assertEqual(outs[0], outs[2])

    def test_bad_json_exits_2_naming_the_line(self):
        with open(self.path("h.jsonl"), "w") as f:
            f.write('{"time": 1, "type": "invoke", "process": 1, "f": "read"}\n')
            f.write("\n")
            f.write('{"time": 2, "type": "ok", "process": 1, "f": "read"\n')
        p = cli(self.path("h.jsonl"))
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stdout, "")
        self.assertEqual(len(p.stderr.splitlines()), 1)
        self.assertIn("line 3: not valid JSON", p.stderr)

    def test_bad_fields_exit_2(self):
        for line, msg in (('{"time": 1, "type": "ok", "process": 1}', "line 1: no 'f' field"),
                          ('[1, 2]', "line 1: not a JSON object"),
                          ('{"time": 1.5, "type": "ok", "process": 1, "f": "read"}',
                           "'time' is not an integer"),
                          ('{"time": 1, "type": "done", "process": 1, "f": "read"}',
                           "'type' is \"done\""),
                          ('{"time": 1, "type": ["ok"], "process": 1, "f": "read"}',
                           "'type' is [\"ok\"]"),
                          ('{"time": 1, "type": "ok", "process": 1, "f": "add", "element": 3}',
                           "'element' is not a string"),
                          ('{"time": 1, "type": "ok", "process": true, "f": "read"}',
                           "'process' is neither")):
            with self.subTest(line=line):
                with open(self.path("h.jsonl"), "w") as f:
                    f.write(line + "\n")
                p = cli(self.path("h.jsonl"))
                self.assertEqual(p.returncode, 2)
                self.assertIn(msg, p.stderr)

    def test_usage_and_missing_file_exit_2(self):
        self.assertEqual(cli().returncode, 2)
        self.assertEqual(cli("--frobnicate", "x").returncode, 2)
        p = cli(self.path("nope.jsonl"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("nope.jsonl", p.stderr)


# ---- a toy system that writes histories ------------------------------------

LOCKS = ("job.a", "job.b", "job.c")
ELECTIONS = ("lead.a", "lead.b")
# An election's calls, as the lock calls they are in the store.
AS_LOCK = {"campaign": "acquire", "lead-renew": "renew", "proclaim": "renew",
           "resign": "release", "lead-write": "write"}
FAULTS = ("pause-holder", "partition-halves", "clock-step", "kill-redis")


class Store:
    """picketd over Redis and fenced-kv, each call atomic at its invoke
    time; bug turns one part wrong the way a mutant would."""

    def __init__(self, rng, bug):
        self.rng, self.bug = rng, bug
        self.counter = {lock: 0 for lock in LOCKS + ELECTIONS}
        self.holder = {}          # lock (or election) -> [lease, fence, expires]
        self.highest = {lock: 0 for lock in LOCKS + ELECTIONS}
        self.kv = {}              # key -> (version, value)
        self.grants = 0
        self.fence_of = {}        # lease -> the fence it was granted

    def call(self, f, a, now):
        """(type, reply fields) of a call that happened."""
        lock = a.get("lock")
        election = f in AS_LOCK
        if election:
            f = AS_LOCK[f]
        if f in ("acquire", "renew", "release"):
            cur = self.holder.get(lock)
            live = cur is not None and cur[2] > now
            mine = live and cur[0] == a["lease"]
            if f == "acquire":
                if live and not mine:
                    return "fail", {"error": "leader_exists" if election else "lock_held"}
                if mine:
                    cur[2] = now + a["ttl_ms"] * MS
                    return "ok", {"fence": cur[1], "ttl_ms": a["ttl_ms"]}
                self.grants += 1
                if self.bug == "counter-reset" and self.grants % 150 == 0:
                    self.counter[lock] = max(0, self.counter[lock] - 3)   # a lossy failover
                reuse = "campaign-reuses-term" if election else "reuse-fence"
                if not (self.bug == reuse and self.counter[lock] and self.rng.random() < 0.05):
                    self.counter[lock] += 1
                self.holder[lock] = [a["lease"], self.counter[lock], now + a["ttl_ms"] * MS]
                self.fence_of[a["lease"]] = self.counter[lock]
                return "ok", {"fence": self.counter[lock], "ttl_ms": a["ttl_ms"]}
            free_any = "resign-no-lease-check" if election else "release-no-lease-check"
            if not mine and f == "release" and live and self.bug == free_any:
                del self.holder[lock]             # whoever holds it: release.lua's `if cur then`
                return "ok", {}
            if not mine and f == "renew" and self.bug == "renew-resurrects" and not election:
                # The old lease is written back over whoever holds the lock.
                fence = self.fence_of[a["lease"]]
                self.holder[lock] = [a["lease"], fence, now + a["ttl_ms"] * MS]
                return "ok", {"fence": fence, "ttl_ms": a["ttl_ms"]}
            if not mine:
                return "fail", {"error": "lease_lost"}
            if f == "renew":
                cur[2] = now + a["ttl_ms"] * MS
                return "ok", {"fence": cur[1], "ttl_ms": a["ttl_ms"]}
            del self.holder[lock]
            return "ok", {}
        if f == "claim":
            if a["fence"] < self.highest[lock]:
                return "fail", {"error": "stale_fence"}
            self.highest[lock] = a["fence"]
            return "ok", {}
        version, value = self.kv.get(a["key"], (0, None))
        if f in ("read", "final-read"):
            return "ok", {"version": version, "value": value}
        if a["fence"] < self.highest[lock] and self.bug != "admit-stale":
            return "fail", {"error": "stale_fence"}
        if a.get("_if_match") is not None and a["_if_match"] != version:
            return "fail", {"error": "version_mismatch"}
        self.highest[lock] = max(self.highest[lock], a["fence"])
        self.kv[a["key"]] = (version + 1, a["_new"])
        return "ok", {"version": version + 1}


def worker(rng, wid, ttl_ms):
    """The loop of tests/chaos/workload.py, as a generator of calls: it
    yields (f, args) and gets back the reply (type plus fields)."""
    n = 0
    while True:
        if rng.random() < 0.2:
            yield from leader(rng, wid, ttl_ms)
            continue
        lock = rng.choice(LOCKS)
        lease = "%016x" % rng.getrandbits(64)
        r = yield "acquire", {"lock": lock, "lease": lease, "ttl_ms": ttl_ms}
        if r["type"] != "ok":
            yield "sleep", rng.randint(5, 50) * MS
            continue
        fence = r["fence"]
        if rng.random() < 0.3:
            yield "claim", {"lock": lock, "fence": fence}
        reg = lock + ".reg"
        r = yield "read", {"lock": lock, "key": reg}
        if r["type"] == "ok":
            if rng.random() < 0.1:     # a zombie: sleeps past its TTL, then writes
                yield "sleep", int(ttl_ms * MS * rng.uniform(1.3, 2.5))
            yield "write", {"lock": lock, "key": reg, "fence": fence,
                            "value": (r["value"] or 0) + 1, "_new": (r["value"] or 0) + 1}
        key = lock + ".set"
        r = yield "read", {"lock": lock, "key": key}
        if r["type"] == "ok":
            n += 1
            elem = "w%d-%d" % (wid, n)
            yield "add", {"lock": lock, "key": key, "fence": fence, "element": elem,
                          "_if_match": r["version"], "_new": (r["value"] or []) + [elem]}
        if rng.random() < 0.3:
            yield "renew", {"lock": lock, "lease": lease, "ttl_ms": ttl_ms}
        if rng.random() < 0.8:
            yield "release", {"lock": lock, "lease": lease}


def leader(rng, wid, ttl_ms):
    """An election round of the workload: campaign, write under the term
    (sometimes after sleeping past the TTL: a deposed leader), sometimes
    proclaim or renew, mostly resign."""
    name = rng.choice(ELECTIONS)
    lease = "%016x" % rng.getrandbits(64)
    r = yield "campaign", {"lock": name, "lease": lease, "ttl_ms": ttl_ms}
    if r["type"] != "ok":
        yield "sleep", rng.randint(5, 50) * MS
        return
    term = r["fence"]
    for i in range(rng.randint(1, 3)):
        if rng.random() < 0.1:
            yield "sleep", int(ttl_ms * MS * rng.uniform(1.3, 2.5))
        yield "lead-write", {"lock": name, "key": name + ".log", "fence": term,
                             "_new": "w%d:%d:%d" % (wid, term, i)}
        if rng.random() < 0.3:
            yield "proclaim", {"lock": name, "lease": lease, "ttl_ms": ttl_ms}
        elif rng.random() < 0.3:
            yield "lead-renew", {"lock": name, "lease": lease, "ttl_ms": ttl_ms}
    if rng.random() < 0.8:
        yield "resign", {"lock": name, "lease": lease}


# The fields a completion repeats from its invoke, as the workload's do.
ECHO = {"acquire": ("lock", "lease"), "renew": ("lock", "lease"), "release": ("lock", "lease"),
        "claim": ("lock", "fence"), "read": ("lock", "key"), "final-read": ("lock", "key"),
        "write": ("lock", "key", "fence"), "add": ("lock", "key", "fence", "element"),
        "campaign": ("lock", "lease"), "lead-renew": ("lock", "lease"),
        "proclaim": ("lock", "lease"), "resign": ("lock", "lease"),
        "lead-write": ("lock", "key", "fence")}


def simulate(seed, n_events, workers=6, ttl_ms=200, bug=None):
    """A history of about n_events events (in no particular order) from
    workers on the toy store, with faults from a nemesis that make replies
    indeterminate, and final reads at the end."""
    rng = random.Random(seed)
    store = Store(rng, bug)
    events = []

    def emit(t, type_, process, f, fields):
        e = {"time": t, "type": type_, "process": process, "f": f}
        e.update((k, v) for k, v in fields.items() if v is not None and not k.startswith("_"))
        events.append(e)

    gens = [worker(random.Random(seed * 1000 + w), w, ttl_ms) for w in range(workers)]
    replies = [None] * workers
    heap = [(T0 + w * 100_000, w) for w in range(workers)] + [(T0 + 50 * MS, -1)]
    fault, next_id = None, 0
    while len(events) < n_events:
        now, w = heapq.heappop(heap)
        if w < 0:                       # the nemesis: a fault starts or stops
            if fault is None:
                fault = (rng.choice(FAULTS), next_id)
                next_id += 1
                emit(now, "info", "nemesis", "start",
                     {"value": {"fault": fault[0], "id": fault[1]}})
                heapq.heappush(heap, (now + rng.randint(100, 600) * MS, -1))
            else:
                emit(now, "info", "nemesis", "stop", {"value": {"fault": fault[0], "id": fault[1]}})
                emit(now + 1, "info", "nemesis", "healed", {"value": {"schedule": fault[1]}})
                fault = None
                heapq.heappush(heap, (now + rng.randint(200, 900) * MS, -1))
            continue
        f, a = gens[w].send(replies[w])
        if f == "sleep":
            replies[w] = None
            heapq.heappush(heap, (now + a, w))
            continue
        emit(now, "invoke", w, f, a)
        latency = rng.randint(100_000, 3 * MS) if rng.random() < 0.95 else rng.randint(20, 80) * MS
        if rng.random() < (0.2 if fault else 0.02):
            # Indeterminate: half the time it happened all the same.
            if rng.random() < 0.5:
                store.call(f, a, now)
            type_, reply = "info", {"error": "timeout"}
        else:
            type_, reply = store.call(f, a, now)
        echo = {k: a[k] for k in ECHO[f] if k in a}
        emit(now + latency, type_, w, f, dict(echo, **{k: v for k, v in reply.items()
                                                        if not (f == "read" and k == "value"
                                                                and isinstance(v, list))}))
        replies[w] = dict(reply, type=type_)
        heapq.heappush(heap, (now + latency + rng.randint(0, 2) * MS, w))
    end = max(e["time"] for e in events) + 10 * MS
    for lock in LOCKS:
        key = lock + ".set"
        if key not in store.kv:
            continue
        emit(end, "invoke", "final", "final-read", {"lock": lock, "key": key})
        _, reply = store.call("final-read", {"lock": lock, "key": key}, end)
        value = list(reply["value"])
        if bug == "lose-element" and value:
            value.pop(rng.randrange(len(value)))
        emit(end + MS, "ok", "final", "final-read", {"lock": lock, "key": key,
                                                     "version": reply["version"], "value": value})
        end += 2 * MS
    return events


if __name__ == "__main__":
    unittest.main()
