"""Client.lock(), Client.semaphore() and Client.rwlock()'s read()/write(): a
lease (a lock's, a permit of a semaphore, or a rwlock's read or write
lease) kept renewed by a background thread; a lock's also watched by a
second thread that follows its events (Client.watch), so a loss is known
when it happens rather than at the next renewal."""

import threading
import time

from .errors import (EventsUnsupported, InvalidArgument, LeaseLost, PermissionDenied,
                     PicketError, Unauthenticated)

# After a watch fails (picketd restarting, a quota of streams), the next
# try waits this long, doubling up to the cap; renewals go on meanwhile.
_WATCH_RETRY = 0.1
_WATCH_RETRY_MAX = 10.0
# Refusals that another try would only repeat: the keeper renews only.
_WATCH_REFUSED = (EventsUnsupported, Unauthenticated, PermissionDenied, InvalidArgument)


def keep_renewed(kept, done, renew_every, renew, lose, lost_by_renewal=None):
    """The keeper thread's loop, of a Held lease and of a Leadership (kept):
    renew() every renew_every seconds (None: kept.ttl / 3), a failed
    renewal again soon until kept.deadline (time.monotonic()), and lose()
    at the deadline, or lost_by_renewal() (default lose) when a renewal
    says LeaseLost. Returns then, or once done is set. A capped kept
    (max_hold) is not renewed: it ends at its deadline."""
    every = renew_every or kept.ttl / 3.0
    next_at = time.monotonic() + every
    while not done.is_set():
        now = time.monotonic()
        if now >= kept.deadline:
            lose()
            return
        if done.wait(max(0.0, min(next_at, kept.deadline) - now)):
            return
        now = time.monotonic()
        if now >= kept.deadline:
            lose()
            return
        if now < next_at:
            continue
        if kept.capped:
            # max_hold cut the last renewal: no renewal can carry the
            # lease further; it ends at its deadline.
            next_at = kept.deadline
            continue
        try:
            renew()
            every = renew_every or kept.ttl / 3.0
            next_at = time.monotonic() + every
        except LeaseLost:
            (lost_by_renewal or lose)()
            return
        except PicketError:
            # transport, 503 (already retried), a quota: try again soon,
            # until the deadline says the lease is gone.
            next_at = time.monotonic() + min(0.25, max(0.01, kept.remaining() / 4))


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
    deadline, at the cap.

    With watch (locks only: semaphores and rwlocks have no events yet), a
    second thread follows the lock's events and loses the lease the moment
    one says it is gone (LockEvent.ends: expired or broken with its fence,
    another's grant, nothing held); a dropped stream is opened again, and
    its fresh state event covers what was missed. watching is set once a
    stream has told where the lock stands; watch_error is the refusal
    (EventsUnsupported from an older picketd, PermissionDenied without the
    read verb) after which the keeper only renews, else None."""

    def __init__(self, client, name, ttl, wait, owner, renew_every, on_lost, extra=None,
                 acquire=None, watch=False):
        self.client = client
        self.acquire = acquire or client.acquire
        self.args = (name, ttl, wait, owner)
        self.extra = extra or {}  # acquire's lock_delay, max_hold (a permit's limit, a rwlock's mode)
        self.renew_every = renew_every
        self.on_lost = on_lost
        self.watch = watch
        self.watching = threading.Event()
        self.watch_error = None
        self.lease = None
        self._mu = threading.Lock()
        self._done = threading.Event()  # stopped, or the lease lost: both threads end
        self._stream = None             # the watch thread's open Watch, for _finish to close
        self._threads = []

    def __enter__(self):
        name, ttl, wait, owner = self.args
        self.lease = self.acquire(name, ttl=ttl, wait=wait, owner=owner, **self.extra)
        jobs = [("picket-keeper", self._keep)]
        if self.watch:
            jobs.append(("picket-watch", self._watch))
        for what, target in jobs:
            t = threading.Thread(target=target, name=f"{what}:{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self.lease

    def _finish(self):
        """Ends both threads: a wait in either returns, and the watch's
        socket is shut down, which wakes a read blocked on it."""
        with self._mu:
            self._done.set()
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def _lose(self):
        # Both threads may find the loss at once: one of them reports it.
        with self._mu:
            first = not self.lease.lost.is_set()
            self.lease.lost.set()
        if first and self.on_lost:
            try:
                self.on_lost(self.lease)
            except Exception:  # a callback's error must not kill the keeper
                pass
        self._finish()

    def _watch(self):
        lease = self.lease
        retry = _WATCH_RETRY
        while not self._done.is_set():
            try:
                stream = self.client.watch(lease.name)
            except _WATCH_REFUSED as e:
                self.watch_error = e
                return
            except PicketError:
                stream = None
            if stream is not None:
                with self._mu:
                    if self._done.is_set():
                        stream.close()
                        return
                    self._stream = stream
                try:
                    for ev in stream:
                        if ev.type == "state":
                            self.watching.set()
                            retry = _WATCH_RETRY
                        if ev.ends(lease.fence):
                            self._lose()
                            return
                except PicketError:
                    pass  # the stream broke: open another
                finally:
                    stream.close()
            if self._done.wait(retry):
                return
            retry = min(retry * 2, _WATCH_RETRY_MAX)

    def _keep(self):
        keep_renewed(self.lease, self._done, self.renew_every,
                     lambda: self.client.renew(self.lease), self._lose)

    def stop(self):
        """Stop renewing and watching (waits for a renewal in flight,
        bounded by the client's timeout; a watch ends at once)."""
        self._finish()
        keeper, *watcher = self._threads or [None]
        if keeper is not None:
            keeper.join(self.client.timeout + 1.0)
        # An open stream was shut down by _finish. A stream being opened
        # (picketd slow to answer) cannot be: the thread closes it when the
        # request returns and ends, with nothing left to report, so exit
        # does not wait for it beyond a moment.
        for t in watcher:
            t.join(0.5)

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
