"""What test_python.sh passes to the suites, and shared helpers."""
import os
import secrets
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SCALE = float(os.environ.get("PICKET_TIME_SCALE", "1") or 1)


def env(name):
    v = os.environ.get("PICKET_TEST_" + name)
    if not v:
        raise unittest.SkipTest(f"PICKET_TEST_{name} not set: run tests/integration/test_python.sh")
    return v


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
