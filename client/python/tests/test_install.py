"""pip install client/python into a temp dir (offline, Debian's python3 and
setuptools when there), then import it from there in a fresh interpreter
and take a lock."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.env import HERE, env, uniq


def debian_python():
    for p in (os.environ.get("PICKET_PIP_PYTHON"), "/usr/bin/python3", sys.executable):
        if p and shutil.which(p) and subprocess.run([p, "-m", "pip", "--version"],
                                                    capture_output=True).returncode == 0:
            return p
    raise unittest.SkipTest("no python3 with pip")


class Install(unittest.TestCase):
    def test_pip_install_target(self):
        py = debian_python()
        src = os.path.dirname(HERE)
        with tempfile.TemporaryDirectory(dir=os.environ.get("PICKET_TEST_TMP")) as d:
            work = os.path.join(d, "src")  # pip builds in the tree: copy it
            shutil.copytree(src, work, ignore=shutil.ignore_patterns(
                "__pycache__", "*.egg-info", "build"))
            target = os.path.join(d, "site")
            r = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                                "--no-deps", "--disable-pip-version-check", "--quiet",
                                "--target", target, work],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertTrue(os.path.isfile(os.path.join(target, "picket", "__init__.py")))
            code = ("import sys, picket; assert picket.__file__.startswith(sys.argv[1]), picket.__file__\n"
                    "with picket.Client(sys.argv[2]).lock(sys.argv[3], ttl=5) as lease:\n"
                    "    print(lease.fence)\n")
            r = subprocess.run([py, "-I", "-c", f"import sys; sys.path.insert(0, {target!r})\n" + code,
                                target, env("URL"), uniq()],
                               capture_output=True, text=True, timeout=60, cwd=d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertGreater(int(r.stdout), 0)


if __name__ == "__main__":
    unittest.main()
