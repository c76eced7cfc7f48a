"""What test_python.sh passes to the suites, and shared helpers."""
import os
import secrets
import signal
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import picket  # noqa: E402  (found through the path above)

SCALE = float(os.environ.get("PICKET_TIME_SCALE", "1") or 1)


def env(name):
    v = os.environ.get("PICKET_TEST_" + name)
    if not v:
        raise unittest.SkipTest(f"PICKET_TEST_{name} not set: run tests/integration/test_python.sh")
    return v


class ClientCase(unittest.TestCase):
    """A test case with self.c, a Client of the test picketd (URL), closed
    after each test."""

    def setUp(self):
        self.c = picket.Client(env("URL"))
        self.addCleanup(self.c.close)


def uniq(prefix="py."):
    return f"{prefix}{secrets.token_hex(6)}"


def until(pred, timeout, step=0.01):
    """Poll pred until true or timeout*SCALE seconds; returns its last value."""
    end = time.monotonic() + timeout * SCALE
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(step)


def check_lost_at_the_deadline(test, kept):
    """Stops picketd (SIGSTOP) so that kept's renewals time out, and checks
    that kept.lost is set at its local deadline (not a client timeout
    later) and valid() is false then; picketd goes on (SIGCONT) either
    way. kept: a lock's lease or a Leadership, with a 1 s TTL."""
    pid = int(env("PICKETD_PID"))
    os.kill(pid, signal.SIGSTOP)
    try:
        test.assertTrue(kept.lost.wait(3 * SCALE))
        late = time.monotonic() - kept.deadline
        test.assertGreaterEqual(late, 0)
        test.assertLess(late, 0.5 * SCALE, "lost set long after the deadline")
        test.assertFalse(kept.valid())
    finally:
        os.kill(pid, signal.SIGCONT)
