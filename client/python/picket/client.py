"""picket.Client: picketd's HTTP API v1 (proto/openapi.yaml), stdlib only."""

import collections
import http.client
import hashlib
import json
import math
import os
import random
import re
import secrets
import ssl
import threading
import time
import urllib.parse

from .errors import (InvalidArgument, LeaseLost, PicketError, PicketTransportError,
                     Unavailable, error_for)

_NAME = re.compile(r"[A-Za-z0-9._:-]{1,200}\Z")
_PREFIX = re.compile(r"[A-Za-z0-9._:-]{0,200}\Z")
_LIST_MAX = 1000  # the most entries of one page of GET /v1/locks
_LEASE = re.compile(r"[0-9a-f]{32}\Z")
# A semaphore name is a lock name of at most 180 bytes, so that the lock
# name of its permits' fences, NAME:permit:I, is one too.
_MAX_SEMAPHORE_NAME = 180
# A read/write lock's name is one of at most 197 bytes, so that the lock
# name its fences are checked under, NAME:rw, is one too.
_MAX_RWLOCK_NAME = 197
_RW_MODES = ("read", "write")
# Errors after which a request is safe to send again (every call of this
# client is idempotent: acquire always carries a lease id).
_RETRY_DELAYS = (0.05, 0.2, 0.8)  # capped exponential, each with jitter
_MAX_IDLE = 4


def lock_name(resource):
    """The picket lock name of a resource: a valid lock name (1..200
    characters of [A-Za-z0-9._:-], not '.' or '..') as it is; any other
    string (a class name with '\\' or '::', a path, UTF-8, "") maps to
    "h." and the first 32 hex digits of the SHA-256 of its UTF-8 bytes, as
    every picket client does (proto/README.md, "Names from other
    ecosystems"), so workers in any language meet on one lock. A resource
    that is not a string raises InvalidArgument."""
    if not isinstance(resource, str):
        raise InvalidArgument(f"a lock name is a string, not {resource!r}", code="invalid_argument")
    if _NAME.match(resource) and resource not in (".", ".."):
        return resource
    return "h." + hashlib.sha256(resource.encode("utf-8", "surrogatepass")).hexdigest()[:32]


check_name = lock_name  # the name of 0.1.0's first draft


def semaphore_name(resource):
    """The picket name of a semaphore: lock_name(resource), which must come
    to at most 180 characters (a mapped name always does); InvalidArgument
    otherwise."""
    name = lock_name(resource)
    if len(name) > _MAX_SEMAPHORE_NAME:
        raise InvalidArgument(f"a semaphore name is at most {_MAX_SEMAPHORE_NAME} characters, "
                              f"not {len(name)}", code="invalid_argument")
    return name


def rwlock_name(resource):
    """The picket name of a read/write lock: lock_name(resource), which must
    come to at most 197 characters (a mapped name always does);
    InvalidArgument otherwise."""
    name = lock_name(resource)
    if len(name) > _MAX_RWLOCK_NAME:
        raise InvalidArgument(f"a read/write lock name is at most {_MAX_RWLOCK_NAME} characters, "
                              f"not {len(name)}", code="invalid_argument")
    return name


def _ms(seconds, what):
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds:
        raise InvalidArgument(f"{what} must be a number of seconds, not {seconds!r}",
                              code="invalid_argument")
    return int(round(seconds * 1000))


LockPage = collections.namedtuple("LockPage", ["locks", "cursor"])
LockPage.__doc__ = """A page of Client.list(): locks, a list of dicts (one per held name),
and cursor, to pass back for the next page (None at the end)."""


def drift_margin(ttl):
    """What a lease's local deadline keeps back from its TTL (seconds): 1%
    of it plus 2 ms, as libpicket does; the server's expiry can only be later."""
    return ttl * 0.01 + 0.002


def _follow_renewal(holder, sent, deadline):
    """Move holder.deadline (a Lease's or a Leadership's) for a successful
    renewal sent at `sent` (time.monotonic()) whose grant ends at `deadline`.
    The deadline follows the NEWEST-SENT successful renewal, not the
    largest deadline: a renewal that asked for a shorter TTL than before
    moves it back (picketd expires the lease sooner now), so a reply to a
    renewal sent after the one that last set the deadline sets it to its
    own value, earlier or later. A late reply to an older renewal (the
    keeper's and the caller's may cross) may only lower it, never raise it:
    picketd may have applied that one after the newer. Both ways are
    conservative. Once released (_deadline_sent infinite) nothing raises it."""
    with _DEADLINE_MU:
        if sent > holder._deadline_sent:
            holder._deadline_sent = sent
            holder.deadline = deadline
        else:
            holder.deadline = min(holder.deadline, deadline)


def _deadline_ended(holder):
    """A release or resignation: the deadline is now at the latest, and no
    renewal's late reply moves it on again."""
    with _DEADLINE_MU:
        holder._deadline_sent = math.inf
        holder.deadline = min(holder.deadline, time.monotonic())


# one lock for every holder's (deadline, _deadline_sent): held for a compare
_DEADLINE_MU = threading.Lock()


class Lease:
    """A grant. fence: the fencing token to send with every write; fence_token:
    the signed fence (None unless picketd has --fence-key-file); deadline:
    time.monotonic() at which this client must assume the lease is gone
    (request sent + ttl - drift margin); lost: an Event set once the lease is
    known lost (by the keeper of Client.lock, or by renew()).

    A permit of a semaphore (Client.acquire_permit, Client.semaphore) is a
    Lease too: name is the semaphore's, permit its slot (0..limit-1), limit
    the semaphore's, and fence_lock the lock name its fence is checked under
    by a fenced store ("NAME:permit:I"). For a lock, permit and limit are
    None and fence_lock is the lock's name.

    A read or write lease of a read/write lock (Client.acquire_rwlock,
    Client.rwlock) is a Lease too: name is the rwlock's, mode "read" or
    "write" (None for a lock or permit), fence_lock "NAME:rw"; a read
    lease's fence is the last write's (the epoch it reads). renew() and
    release() take any of them."""

    def __init__(self, name, lease_id, fence, ttl, owner, fence_token, deadline,
                 permit=None, limit=None, fence_lock=None, mode=None):
        self.name = name
        self.id = lease_id
        self.fence = fence
        self.ttl = ttl
        self.owner = owner
        self.fence_token = fence_token
        self.deadline = deadline
        self._deadline_sent = -math.inf  # set with the grant (_follow_renewal)
        self.lost = threading.Event()
        self.capped = False  # a grant or renewal was cut by max_hold
        self.permit = permit
        self.limit = limit
        self.fence_lock = name if fence_lock is None else fence_lock
        self.mode = mode

    @property
    def lease(self):
        return self.id

    @property
    def is_permit(self):
        """True for a semaphore's permit, False for a lock's lease."""
        return self.permit is not None

    @property
    def is_rwlock(self):
        """True for a read or write lease of a read/write lock."""
        return self.mode is not None

    def describe(self):
        """What the lease is, for messages: "lease of 'x'", "permit 1 of
        semaphore 'x'", "read lease of rwlock 'x'"."""
        if self.is_permit:
            return f"permit {self.permit} of semaphore {self.name!r}"
        if self.is_rwlock:
            return f"{self.mode} lease of rwlock {self.name!r}"
        return f"lease of {self.name!r}"

    def remaining(self):
        """Seconds left before the local deadline (0 when past it)."""
        return max(0.0, self.deadline - time.monotonic())

    def valid(self):
        """True while the lease is not known lost and its local deadline has
        not passed, by this process's monotonic clock alone. Check it before
        each write, and send the fence with the write all the same."""
        return not self.lost.is_set() and time.monotonic() < self.deadline

    def __repr__(self):
        if self.is_permit:
            return (f"Lease(semaphore={self.name!r}, permit={self.permit}, fence={self.fence}, "
                    f"ttl={self.ttl}, remaining={self.remaining():.3f}, "
                    f"lost={self.lost.is_set()})")
        if self.is_rwlock:
            return (f"Lease(rwlock={self.name!r}, mode={self.mode!r}, fence={self.fence}, "
                    f"ttl={self.ttl}, remaining={self.remaining():.3f}, "
                    f"lost={self.lost.is_set()})")
        return (f"Lease(name={self.name!r}, fence={self.fence}, ttl={self.ttl}, "
                f"remaining={self.remaining():.3f}, lost={self.lost.is_set()})")


class Client:
    """A picketd client. url: http://host:port or https://host:port (a path
    prefix is kept); token: the bearer token (default $PICKET_TOKEN);
    timeout: seconds for each request (a waiting acquire gets its wait on
    top); cacert: a PEM bundle trusted instead of the system's CAs, for https.

    Safe to use from several threads: each request takes an idle keep-alive
    connection (or opens one) and gives it back."""

    def __init__(self, url="http://127.0.0.1:7070", token=None, timeout=10.0, cacert=None,
                 retries=len(_RETRY_DELAYS)):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise InvalidArgument(f"bad picketd url {url!r}: want http:// or https://host[:port]",
                                  code="invalid_argument")
        self.url = url
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self.token = token if token is not None else (os.environ.get("PICKET_TOKEN") or None)
        self.timeout = float(timeout)
        self.retries = retries
        self._ssl = None
        if self._https:
            self._ssl = ssl.create_default_context(cafile=cacert) if cacert else \
                ssl.create_default_context()
        elif cacert:
            raise InvalidArgument("cacert given for an http:// url", code="invalid_argument")
        self._idle = []
        self._mu = threading.Lock()

    # -- connections -------------------------------------------------------
    def _conn(self):
        with self._mu:
            if self._idle:
                return self._idle.pop(), True
        return self._new_conn(self.timeout), False

    def _new_conn(self, timeout):
        """A new connection with this client's TLS settings (not pooled)."""
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, accept="application/json"):
        """Accept and, with a token, Authorization (the token never goes
        anywhere else: not in a URL, not in a message)."""
        headers = {"Accept": accept}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _put(self, c):
        with self._mu:
            if len(self._idle) < _MAX_IDLE:
                self._idle.append(c)
                return
        c.close()

    def close(self):
        """Close the idle connections (a later call opens a new one)."""
        with self._mu:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- one request ---------------------------------------------------------
    def _once(self, method, path, body, timeout, stamp):
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers()
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            c, reused = self._conn()
            try:
                c.timeout = timeout
                if c.sock is not None:
                    c.sock.settimeout(timeout)
                if stamp is not None:
                    stamp["sent"] = time.monotonic()
                c.request(method, self._prefix + path, body=data, headers=headers)
                r = c.getresponse()
                raw = r.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                c.close()
                if reused and attempt == 0:
                    continue  # a keep-alive connection the server had closed: once more, fresh
                raise PicketTransportError(f"{method} {path}: {e!r}") from e
            except (OSError, http.client.HTTPException) as e:
                c.close()
                raise PicketTransportError(f"{method} {path}: {e!r}") from e
            if r.will_close:
                c.close()
            else:
                self._put(c)
            break
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            doc = None
        if 200 <= r.status < 300 and isinstance(doc, dict):
            return doc
        raise self._error(method, path, r.status, doc)

    @staticmethod
    def _error(method, path, status, doc):
        """The exception for a reply that is not a success: the API error
        of its body (doc: the parsed JSON), else a transport error."""
        err = doc.get("error") if isinstance(doc, dict) else None
        if not isinstance(err, dict) or "code" not in err:
            return PicketTransportError(f"{method} {path}: HTTP {status} without an API error body",
                                        status=status)
        ra = err.get("retry_after_ms")
        return error_for(err["code"], err.get("message", ""), status=status,
                         retry_after=None if ra is None else ra / 1000.0, owner=err.get("owner"),
                         limit=err.get("limit"))

    def _call(self, method, path, body=None, extra_timeout=0.0, deadline=None, stamp=None):
        """A request, retried on transport errors and 503 with capped
        exponential backoff and jitter, never past deadline (monotonic).
        stamp, a dict, gets the monotonic time of the last attempt's send."""
        attempt = 0
        while True:
            timeout = self.timeout + extra_timeout
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0:
                    raise PicketTransportError(f"{method} {path}: the lease's local deadline passed")
            try:
                return self._once(method, path, body, timeout, stamp)
            except (PicketTransportError, Unavailable) as e:
                if attempt >= self.retries:
                    raise
                pause = _RETRY_DELAYS[min(attempt, len(_RETRY_DELAYS) - 1)]
                pause *= 0.5 + random.random()
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise
                attempt += 1
                time.sleep(pause)

    @staticmethod
    def _path(name, verb=None, semaphore=False, rwlock=False):
        if rwlock:
            p = "/v1/rwlocks/" + urllib.parse.quote(rwlock_name(name), safe="")
        elif semaphore:
            p = "/v1/semaphores/" + urllib.parse.quote(semaphore_name(name), safe="")
        else:
            p = "/v1/locks/" + urllib.parse.quote(lock_name(name), safe="")
        return p + "/" + verb if verb else p

    def _lease_path(self, lease, verb):
        return self._path(lease.name, verb, semaphore=lease.is_permit,
                          rwlock=lease.is_rwlock)

    # -- the API -------------------------------------------------------------
    def acquire(self, name, ttl=30.0, wait=0.0, owner=None, lease=None, lock_delay=0.0,
                max_hold=None):
        """Take the lock for ttl seconds, waiting up to wait seconds while it
        is held. Returns a Lease; raises LockHeld (owner, retry_after) if it
        stays held, or LockDelay (a LockHeld) while an expired lease's
        lock-delay runs. lease: your own id (32 lowercase hex), default a
        fresh random one; a retry with the same id gets the same grant.
        lock_delay: if this lease expires without a release, nobody gets the
        lock for that many seconds after. max_hold: no renewal carries the
        lease past grant + max_hold seconds (lease.capped says when one was
        cut short)."""
        return self._grant(self._path(name, "acquire"), {}, ttl, wait, owner, lease,
                           lock_delay, max_hold)

    def acquire_permit(self, name, limit, ttl=30.0, wait=0.0, owner=None, lease=None,
                       lock_delay=0.0, max_hold=None):
        """Take one permit of the counting semaphore name, of limit permits
        (1..4096; every holder must give the same limit while permits are
        live), for ttl seconds, waiting up to wait seconds (in arrival
        order) while all are held. Returns a Lease with .permit (the slot,
        0..limit-1), .limit and .fence_lock (the lock name a fenced store
        checks this permit's fence under: "NAME:permit:I"). Raises
        SemaphoreFull (a LockHeld; retry_after) if every permit stays held,
        LimitMismatch (.limit: the live permits') if they use another limit.
        lease, lock_delay and max_hold as for acquire(), per permit. renew()
        and release() take the permit as they take a lock's lease."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidArgument(f"limit must be an integer, not {limit!r}",
                                  code="invalid_argument")
        return self._grant(self._path(name, "acquire", semaphore=True), {"limit": limit}, ttl,
                           wait, owner, lease, lock_delay, max_hold)

    def acquire_rwlock(self, name, mode, ttl=30.0, wait=0.0, owner=None, lease=None,
                       lock_delay=0.0, max_hold=None):
        """Take a read/write lock in mode "read" (shared with other readers)
        or "write" (alone) for ttl seconds, waiting up to wait seconds (in
        arrival order) while it is taken. A writer that waits keeps new
        readers out until it is granted or stops waiting. Returns a Lease
        with .mode and .fence_lock (the lock name a fenced store checks its
        fence under: "NAME:rw"); a write's fence is above every earlier
        grant's, a read's is the last write's. Raises LockHeld (owner,
        retry_after) if it stays taken. lease, lock_delay and max_hold as
        for acquire(). renew() and release() take the lease as a lock's."""
        if mode not in _RW_MODES:
            raise InvalidArgument(f"mode must be 'read' or 'write', not {mode!r}",
                                  code="invalid_argument")
        return self._grant(self._path(name, "acquire", rwlock=True), {"mode": mode}, ttl, wait,
                           owner, lease, lock_delay, max_hold)

    def _grant(self, path, body, ttl, wait, owner, lease, lock_delay, max_hold):
        """POST an acquire (a lock's, a permit's or a rwlock's) and make its
        Lease."""
        body["ttl_ms"] = _ms(ttl, "ttl")
        wait_ms = _ms(wait, "wait")
        if wait_ms:
            body["wait_ms"] = wait_ms
        if _ms(lock_delay, "lock_delay"):
            body["lock_delay_ms"] = _ms(lock_delay, "lock_delay")
        if max_hold is not None:
            body["max_hold_ms"] = _ms(max_hold, "max_hold")
        if owner is not None:
            body["owner"] = owner
        lease_id = secrets.token_hex(16) if lease is None else lease
        if not isinstance(lease_id, str) or not _LEASE.match(lease_id):
            raise InvalidArgument("lease must be 32 lowercase hex digits", code="invalid_argument")
        body["lease"] = lease_id
        stamp = {}
        doc = self._call("POST", path, body, extra_timeout=wait_ms / 1000.0, stamp=stamp)
        sent = stamp["sent"]
        ttl_s = doc["ttl_ms"] / 1000.0
        deadline = sent + ttl_s - drift_margin(ttl_s)
        if "semaphore" in doc:
            g = Lease(doc["semaphore"], doc["lease"], doc["fence"], ttl_s, doc.get("owner"),
                      doc.get("fence_token"), deadline, permit=doc["permit"],
                      limit=doc["limit"], fence_lock=doc["fence_lock"])
        elif "rwlock" in doc:
            g = Lease(doc["rwlock"], doc["lease"], doc["fence"], ttl_s, doc.get("owner"),
                      doc.get("fence_token"), deadline, fence_lock=doc["fence_lock"],
                      mode=doc["mode"])
        else:
            g = Lease(doc["lock"], doc["lease"], doc["fence"], ttl_s, doc.get("owner"),
                      doc.get("fence_token"), deadline)
        g._deadline_sent = sent
        g.capped = doc["ttl_ms"] < body["ttl_ms"]
        # A waited grant was made at some moment between send and reply: when
        # that gap is over a tenth of the TTL, renew now so the deadline
        # counts from a request sent after the grant.
        if wait_ms and time.monotonic() - sent > ttl_s / 10:
            try:
                self.renew(g)
            except PicketError:
                if not g.valid():
                    try:
                        self.release(g)
                    except PicketError:
                        pass
                    raise
        return g

    def renew(self, lease, ttl=None):
        """Extend the lease (a lock's, or a semaphore's permit) to ttl
        seconds from now (default: its ttl). Updates lease.deadline, .ttl
        and .fence_token; raises LeaseLost (and sets lease.lost) if it no
        longer holds the lock or permit. Never retried past the lease's
        local deadline."""
        ttl_s = lease.ttl if ttl is None else ttl
        if time.monotonic() >= lease.deadline:
            lease.lost.set()
            raise LeaseLost(f"{lease.describe()} is past its local deadline",
                            code="lease_lost")
        body = {"lease": lease.id, "ttl_ms": _ms(ttl_s, "ttl")}
        try:
            stamp = {}
            doc = self._call("POST", self._lease_path(lease, "renew"), body,
                             deadline=lease.deadline, stamp=stamp)
        except LeaseLost:
            lease.lost.set()
            raise
        t = doc["ttl_ms"] / 1000.0
        if doc["ttl_ms"] < body["ttl_ms"]:
            lease.capped = True  # max_hold: no renewal can carry it further
        lease.ttl = t
        _follow_renewal(lease, stamp["sent"], stamp["sent"] + t - drift_margin(t))
        if "fence_token" in doc:
            lease.fence_token = doc["fence_token"]
        return lease

    def release(self, lease):
        """Give the lock (or the permit) up. Raises LeaseLost if the lease had
        already ended."""
        self._call("POST", self._lease_path(lease, "release"), {"lease": lease.id})
        _deadline_ended(lease)
        return True

    def inspect(self, name):
        """{lock, held, fence, ttl (seconds), ttl_ms, owner, acquired_at,
        renewals, waiters} of a lock; fence is the last one issued (0 if
        never), never a lease id. acquired_at: when the live lease was
        granted (Redis's clock, milliseconds since the Unix epoch), renewals:
        how often it was renewed (both None when not held, and absent from
        a picketd older than them); waiters: acquires waiting for it on this
        picketd."""
        doc = self._call("GET", self._path(name))
        doc["ttl"] = doc.get("ttl_ms", 0) / 1000.0
        return doc

    def inspect_semaphore(self, name):
        """{semaphore, limit (0 while no permit is live), held, permits,
        waiters} of a semaphore; each of permits (lowest slot first) has
        permit, fence, owner, fence_lock, ttl_ms and ttl (seconds), never a
        lease id."""
        doc = self._call("GET", self._path(name, semaphore=True))
        for p in doc.get("permits", []):
            p["ttl"] = p.get("ttl_ms", 0) / 1000.0
        return doc

    def inspect_rwlock(self, name):
        """{rwlock, fence (the last issued, 0 if never), fence_lock, writer
        (None, or {ttl_ms, ttl (seconds), owner}), readers (a count),
        read_leases (each with ttl_ms, ttl and owner, never a lease id),
        writers_waiting, waiters} of a read/write lock."""
        doc = self._call("GET", self._path(name, rwlock=True))
        for r in [doc.get("writer")] + list(doc.get("read_leases") or []):
            if isinstance(r, dict):
                r["ttl"] = r.get("ttl_ms", 0) / 1000.0
        return doc

    # -- operators -------------------------------------------------------------
    def list(self, prefix="", limit=100, cursor=None):
        """One page of the held locks, semaphores and read/write locks whose
        names start with prefix (GET /v1/locks), at most limit (1..1000) of
        them, from cursor (None: the start; else the cursor of the previous
        page of the same prefix). Returns a LockPage (locks, cursor): each
        of locks is a dict {kind ("lock", "semaphore" or "rwlock"), name,
        holders, owner, fence (None for a semaphore), ttl_ms, ttl (seconds),
        acquired_at (ms since the epoch, or None), renewals (or None),
        waiters} and, for a semaphore, limit; cursor is None at the end. A
        page may hold fewer than limit entries, even none, while its cursor
        says more follow: iter_locks() follows them. Needs the list verb
        under --auth-file (PermissionDenied otherwise), and shows only the
        names the token's prefixes cover."""
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise InvalidArgument(f"a prefix is up to 200 characters of [A-Za-z0-9._:-], not "
                                  f"{prefix!r}", code="invalid_argument")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _LIST_MAX:
            raise InvalidArgument(f"limit must be an integer from 1 to {_LIST_MAX}, not "
                                  f"{limit!r}", code="invalid_argument")
        if cursor is not None and (not isinstance(cursor, str) or not cursor):
            raise InvalidArgument(f"cursor must be one a page returned, not {cursor!r}",
                                  code="invalid_argument")
        query = {"limit": limit}
        if prefix:
            query["prefix"] = prefix
        if cursor is not None:
            query["cursor"] = cursor
        doc = self._call("GET", "/v1/locks?" + urllib.parse.urlencode(query))
        locks = doc.get("locks")
        if not isinstance(locks, list) or len(locks) > limit:
            raise PicketTransportError(f"GET /v1/locks: a page of {locks!r}")
        for e in locks:
            e["ttl"] = e.get("ttl_ms", 0) / 1000.0
        return LockPage(locks, doc.get("cursor"))

    def iter_locks(self, prefix="", limit=100):
        """Every held name under prefix, as list() gives them, following the
        cursor page by page (limit a page) until the listing ends."""
        cursor = None
        while True:
            page = self.list(prefix, limit, cursor)
            yield from page.locks
            if page.cursor is None:
                return
            cursor = page.cursor

    def break_lock(self, name):
        """Break lock name (POST /v1/locks/{name}/break): its lease ends now,
        its waiters are woken, and its fence moves past the broken holder's,
        so a store that checks fences refuses that holder's writes once it
        has seen a newer one; the holder's renew and release raise LeaseLost
        saying it was broken. Returns {lock, broken (False when nothing was
        held; the fence moves on all the same), fence (the counter after the
        break: the next grant's is above it), owner (the broken lease's)}.
        Needs the admin verb under --auth-file; without --auth-file picketd
        lets only loopback callers break (PermissionDenied otherwise). Never
        retried: a repeat could break the lease the next holder was just
        granted."""
        return self._once("POST", self._path(name, "break"), {}, self.timeout, None)

    def watch(self, name, timeout=None, idle=60.0):
        """Follow lock name's events (GET /v1/locks/{name}/events): an
        iterator of LockEvent, first a "state" (where the lock stands),
        then "granted", "renewed", "released", "expired", "broken" as they
        happen, and a "heartbeat" after each quiet spell. It ends after
        timeout seconds (None: never) or close(); it raises
        PicketTransportError when the stream breaks or stays silent for
        idle seconds. Opens a connection of its own; close() it (or use it
        as a context manager). Raises EventsUnsupported (a NotFound) when
        picketd has no events, PermissionDenied without the read verb under
        --auth-file, TooManyWatchers past picketd's limit of streams."""
        from .events import Watch
        return Watch(self, self._path(name, "events"), timeout=timeout, idle=idle)

    # -- elections ---------------------------------------------------------------
    def campaign(self, name, ttl=30.0, wait=0.0, owner=None, value=None, lease=None,
                 renew_every=None, on_lost=None, keep=True):
        """Run for leader of election name (POST /v1/elections/{name}/campaign)
        with a lease of ttl seconds, waiting up to wait seconds (first come,
        first served on this picketd) while another leads. Returns a
        Leadership (term: the fence for fenced storage, value, deadline,
        lost), kept renewed every ttl/3 by a keeper thread (keep=False: not
        started; call .keep()); as a context manager it resigns on exit:
        `with client.campaign("scheduler", ttl=10, value="host-a") as lead:`.
        value: what observers are told (None or a string of at most 4096
        bytes of UTF-8, no control characters); lease: your own id (32
        lowercase hex), a retry with it gets the same term. Raises
        LeaderExists (owner, retry_after) while another leads."""
        from .election import campaign
        return campaign(self, name, ttl=ttl, wait=wait, owner=owner, value=value, lease=lease,
                        renew_every=renew_every, on_lost=on_lost, keep=keep)

    def leader(self, name):
        """Who leads election name (GET /v1/elections/{name}): {election,
        leader (None, or {term, value, owner, since (unix ms of the grant),
        ttl_ms, ttl (seconds)}), term (the last term issued, 0 if never),
        candidates (campaigns waiting on this picketd)}; never a lease id."""
        from .election import _path
        doc = self._call("GET", _path(name))
        if isinstance(doc.get("leader"), dict):
            doc["leader"]["ttl"] = doc["leader"].get("ttl_ms", 0) / 1000.0
        return doc

    def observe(self, name, timeout=None, idle=60.0):
        """Follow election name (GET /v1/elections/{name}/observe): a
        generator of LeaderEvent, first the current state, then one per
        change of leader (leader None: nobody leads now) or of its value
        (a proclaim: same term). Heartbeats are not yielded. It ends after
        timeout seconds (None: never) or close(); it raises
        PicketTransportError when the stream breaks or stays silent for
        idle seconds. The request is made here, so a refusal raises here
        (PermissionDenied without the read verb, TooManyWatchers)."""
        from .election import observe
        return observe(self, name, timeout=timeout, idle=idle)

    def break_election(self, name):
        """Break election name (POST /v1/elections/{name}/break; the admin
        verb): the leader's lease ends now and the term moves past it.
        Returns {election, broken, term (the next term's floor), owner}.
        Never retried."""
        from .election import _path
        return self._once("POST", _path(name, "break"), {}, self.timeout, None)

    def whoami(self):
        """What this client's token may do (GET /v1/whoami): {token (its name
        in picketd's --auth-file; None without --auth-file), verbs (of lock,
        read, metrics, list, admin), prefixes (["*"]: every name)}."""
        return self._call("GET", "/v1/whoami")

    def rwlock(self, name):
        """A read/write lock: .read(...) and .write(...) are lock()'s context
        managers for a read or a write lease (acquire_rwlock), kept renewed
        by the same keeper: `with client.rwlock("catalog").read(ttl=30) as
        lease:`."""
        return RWLock(self, name)

    def lock(self, name, ttl=30.0, wait=0.0, owner=None, renew_every=None, on_lost=None,
             lock_delay=0.0, max_hold=None, watch=True):
        """A context manager: acquires, keeps the lease renewed from a
        background thread every ttl/3, and releases on exit (also on an
        exception). `with client.lock("x", ttl=30) as lease:` gives the
        Lease; check lease.valid() before each write. With max_hold the
        keeper stops renewing at the cap, and the lease is lost there.
        With watch (the default) a second thread follows the lock's events
        (watch()), so a break, an expiry or another's grant sets lease.lost
        at once rather than at the next renewal; against a picketd without
        events, or a token without the read verb, it renews only."""
        from .keeper import Held
        return Held(self, name, ttl, wait, owner, renew_every, on_lost,
                    {"lock_delay": lock_delay, "max_hold": max_hold}, watch=watch)

    def semaphore(self, name, limit, ttl=30.0, wait=0.0, owner=None, renew_every=None,
                  on_lost=None, lock_delay=0.0, max_hold=None):
        """lock()'s context manager for one permit of a counting semaphore
        (acquire_permit): `with client.semaphore("reports", 5, ttl=30) as
        permit:` gives the permit's Lease (.permit, .fence_lock), kept
        renewed from a background thread and released on exit, as lock()."""
        from .keeper import Held
        return Held(self, name, ttl, wait, owner, renew_every, on_lost,
                    {"limit": limit, "lock_delay": lock_delay, "max_hold": max_hold},
                    acquire=self.acquire_permit)


class RWLock:
    """Client.rwlock(name): read() and write() take the same arguments as
    Client.lock() and give its context manager for a read or a write lease
    of the read/write lock name. inspect() is Client.inspect_rwlock(name)."""

    def __init__(self, client, name):
        self.client = client
        self.name = rwlock_name(name)

    def _held(self, mode, ttl, wait, owner, renew_every, on_lost, lock_delay, max_hold):
        from .keeper import Held
        return Held(self.client, self.name, ttl, wait, owner, renew_every, on_lost,
                    {"mode": mode, "lock_delay": lock_delay, "max_hold": max_hold},
                    acquire=self.client.acquire_rwlock)

    def read(self, ttl=30.0, wait=0.0, owner=None, renew_every=None, on_lost=None,
             lock_delay=0.0, max_hold=None):
        """A read lease (shared with other readers), as lock()."""
        return self._held("read", ttl, wait, owner, renew_every, on_lost, lock_delay, max_hold)

    def write(self, ttl=30.0, wait=0.0, owner=None, renew_every=None, on_lost=None,
              lock_delay=0.0, max_hold=None):
        """A write lease (alone: no reader, no other writer), as lock()."""
        return self._held("write", ttl, wait, owner, renew_every, on_lost, lock_delay, max_hold)

    def inspect(self):
        return self.client.inspect_rwlock(self.name)

    def __repr__(self):
        return f"RWLock({self.name!r})"
