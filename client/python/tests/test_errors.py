"""Every error code of proto/openapi.yaml has its exception class."""
import re
import unittest

from tests.env import env
import picket


def openapi_error_codes(path):
    codes, inside = [], False
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for line in lines:
        if re.match(r"^    ErrorCode:\s*$", line):
            inside = True
        elif inside and re.match(r"^    \S", line):
            break
        elif inside:
            m = re.match(r"^        - ([a-z_]+)\s*$", line)
            if m:
                codes.append(m.group(1))
    return codes


class ErrorCodes(unittest.TestCase):
    def test_every_code_has_a_class(self):
        codes = openapi_error_codes(env("OPENAPI"))
        self.assertGreaterEqual(len(codes), 19, "ErrorCode enum not found or too short")
        for code in codes:
            cls = picket.ERROR_CLASSES.get(code)
            self.assertIsNotNone(cls, f"no exception class for {code}")
            self.assertTrue(issubclass(cls, picket.PicketError))
            self.assertEqual(cls.code, code)
            name = "".join(p.capitalize() for p in code.split("_"))
            self.assertIs(getattr(picket, name), cls, f"picket.{name}")
        self.assertEqual(sorted(picket.ERROR_CLASSES), sorted(codes), "a class for no code")

    def test_error_for(self):
        e = picket.errors.error_for("lock_held", "held", 409, 1.5, "w")
        self.assertIsInstance(e, picket.LockHeld)
        self.assertEqual((e.code, e.status, e.retry_after, e.owner), ("lock_held", 409, 1.5, "w"))
        u = picket.errors.error_for("some_new_code", "?", 500)
        self.assertIs(type(u), picket.PicketError)
        self.assertEqual(u.code, "some_new_code")
        self.assertTrue(issubclass(picket.TooManyLeases, picket.QuotaExceeded))
        self.assertTrue(issubclass(picket.StoreUnavailable, picket.Unavailable))
        self.assertTrue(issubclass(picket.PicketTransportError, picket.PicketError))
        # every permit held is a held lock to a caller that only knows locks
        self.assertTrue(issubclass(picket.SemaphoreFull, picket.LockHeld))
        self.assertFalse(issubclass(picket.LimitMismatch, picket.LockHeld))
        m = picket.errors.error_for("limit_mismatch", "other limit", 409, limit=5)
        self.assertIsInstance(m, picket.LimitMismatch)
        self.assertEqual((m.code, m.limit), ("limit_mismatch", 5))
        f = picket.errors.error_for("semaphore_full", "full", 409, 2.5)
        self.assertIsInstance(f, picket.SemaphoreFull)
        self.assertEqual((f.retry_after, f.limit), (2.5, None))


if __name__ == "__main__":
    unittest.main()
