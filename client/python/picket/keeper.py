"""Client.lock(), Client.semaphore() and Client.rwlock()'s read()/write(): a
lease (a lock's, a permit of a semaphore, or a rwlock's read or write
lease) kept renewed by a background thread."""

import threading
import time

from .errors import LeaseLost, PicketError


class Held:
    """The context manager of Client.lock(), Client.semaphore() (whose
    acquire is Client.acquire_permit) and RWLock.read()/write() (whose
    acquire is Client.acquire_rwlock): the rest is the same, as renew and
    release route by the lease. On enter: acquire and start the
    keeper thread. The keeper renews every ttl/3 (renew_every), retries a
    failed renewal until the lease's local deadline, and sets lease.lost the
    moment the server says lease_lost or the deadline passes without a
    successful renewal (then calls on_lost(lease) if given). On exit: stop
    the keeper, release the lock (also when the body raised). If the body
    finished normally but the lease was lost on the way, exit raises
    LeaseLost: the block ran for a while without the lock. With max_hold, a
    renewal the cap cut short is the last: the lease is lost at its
    deadline, at the cap."""

    def __init__(self, client, name, ttl, wait, owner, renew_every, on_lost, extra=None,
                 acquire=None):
        self.client = client
        self.acquire = acquire or client.acquire
        self.args = (name, ttl, wait, owner)
        self.extra = extra or {}  # acquire's lock_delay, max_hold (a permit's limit, a rwlock's mode)
        self.renew_every = renew_every
        self.on_lost = on_lost
        self.lease = None
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        name, ttl, wait, owner = self.args
        self.lease = self.acquire(name, ttl=ttl, wait=wait, owner=owner, **self.extra)
        self._thread = threading.Thread(target=self._keep, name=f"picket-keeper:{name}",
                                        daemon=True)
        self._thread.start()
        return self.lease

    def _lose(self):
        if not self.lease.lost.is_set():
            self.lease.lost.set()
            if self.on_lost:
                try:
                    self.on_lost(self.lease)
                except Exception:  # a callback's error must not kill the keeper
                    pass

    def _keep(self):
        lease = self.lease
        every = self.renew_every or lease.ttl / 3.0
        next_at = time.monotonic() + every
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= lease.deadline:
                self._lose()
                return
            if self._stop.wait(max(0.0, min(next_at, lease.deadline) - now)):
                return
            now = time.monotonic()
            if now >= lease.deadline:
                self._lose()
                return
            if now < next_at:
                continue
            if lease.capped:
                # max_hold cut the last renewal: no renewal can carry the
                # lease further; it ends at its deadline.
                next_at = lease.deadline
                continue
            try:
                self.client.renew(lease)
                every = self.renew_every or lease.ttl / 3.0
                next_at = time.monotonic() + every
            except LeaseLost:
                self._lose()
                return
            except PicketError:
                # transport, 503 (already retried), a quota: try again soon,
                # until the deadline says the lease is gone.
                next_at = time.monotonic() + min(0.25, max(0.01, lease.remaining() / 4))

    def stop(self):
        """Stop renewing (waits for a renewal in flight, bounded by the
        client's timeout)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.client.timeout + 1.0)

    def __exit__(self, etype, exc, tb):
        self.stop()
        lease = self.lease
        lost = lease.lost.is_set() or time.monotonic() >= lease.deadline
        try:
            self.client.release(lease)
        except PicketError:
            if etype is None and not lost:
                raise
        if etype is None and lost:
            lease.lost.set()
            raise LeaseLost(f"{lease.describe()} (fence {lease.fence}) was lost while held",
                            code="lease_lost")
        return False
