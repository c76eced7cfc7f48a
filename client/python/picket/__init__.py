"""picket: a Python client for picketd, a lock service whose grants carry
fencing tokens. Speaks only the HTTP contract (proto/openapi.yaml).

    import picket
    with picket.Client("http://127.0.0.1:7070").lock("inventory-sync", ttl=30) as lease:
        write(fence=lease.fence)
    with picket.Client().semaphore("reports", 5, ttl=30) as permit:  # one of 5
        write(lock=permit.fence_lock, fence=permit.fence)
    with picket.Client().rwlock("catalog").read(ttl=30) as lease:  # many readers, or one writer
        read(lock=lease.fence_lock, epoch=lease.fence)
    with picket.Client().campaign("scheduler", ttl=10, value="host-a") as lead:  # one leader
        write(lock=lead.election, fence=lead.term)
    with picket.Client().watch("inventory-sync") as events:  # who takes it, renews, loses it
        for event in events:
            print(event.type, event.fence)
"""

from .client import (Client, Lease, LockPage, RWLock, check_name, drift_margin, lock_name,
                     rwlock_name, semaphore_name)
from .election import LeaderEvent, Leadership, election_name
from .events import LockEvent, Watch
from .errors import *  # noqa: F401,F403  (PicketError and one class per error code)
from .errors import __all__ as _errors_all

__version__ = "0.1.0"
__all__ = ["Client", "Lease", "LeaderEvent", "Leadership", "LockEvent", "LockPage", "RWLock",
           "Watch", "check_name", "drift_margin", "election_name", "lock_name", "rwlock_name",
           "semaphore_name"] + list(_errors_all)
