"""A child process that holds a lock with Client.lock and reports, one line
every 20 ms, whether its lease is still valid and when it looked (test_lock.PausedHolder)."""
import sys
import time

sys.path.insert(0, sys.argv[1])
import picket  # noqa: E402

url, name, ttl = sys.argv[2], sys.argv[3], float(sys.argv[4])
try:
    with picket.Client(url).lock(name, ttl=ttl, owner="holder") as lease:
        print(f"fence {lease.fence}", flush=True)
        while not lease.lost.wait(0.02):
            t = time.monotonic()  # before the check: a check begun after t
            print(f"valid {int(lease.valid())} {t:.6f}", flush=True)
        print(f"lost valid={int(lease.valid())}", flush=True)
except picket.LeaseLost as e:
    print(f"exit LeaseLost: {e}", flush=True)
    sys.exit(3)
