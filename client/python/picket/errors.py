"""Exceptions of the picket client, one per error code of picketd's API.

ERROR_CLASSES maps every code of the ErrorCode enum in proto/openapi.yaml to
its class (client/python/tests/test_errors.py checks that none is missing);
a code this client does not know yet becomes a plain PicketError.
"""


class PicketError(Exception):
    """An error answered by picketd (or found locally, status None).

    code: the API's error code ("lock_held"), status: the HTTP status,
    message: the server's message, retry_after: seconds (float) when the
    server said (lock_held, leader_exists, semaphore_full, rate_limited),
    else None; owner: the holder (lock_held) or the leader (leader_exists);
    limit: the live permits' limit (limit_mismatch), else None.
    """

    code = None

    def __init__(self, message, code=None, status=None, retry_after=None, owner=None,
                 limit=None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.owner = owner
        self.limit = limit

    def __str__(self):
        where = f"{self.status} " if self.status else ""
        return f"{where}{self.code}: {self.message}"


class PicketTransportError(PicketError):
    """No usable reply: connect, TLS, timeout, a dropped connection, or a
    reply that is not the API's JSON."""

    code = "transport"


class QuotaExceeded(PicketError):
    """A quota of the caller (429, or 503 too_many_waiters): the operator's
    policy; the client does not retry it by itself."""


class Unavailable(PicketError):
    """picketd or its store cannot serve now (503); retried a few times."""


def _cls(code, base=PicketError, doc=""):
    name = "".join(p.capitalize() for p in code.split("_"))
    return type(name, (base,), {"code": code, "__doc__": doc or code, "__module__": __name__})


# code -> (base, doc). The class name is the code in CamelCase.
_CODES = {
    "invalid_argument": (PicketError, "400: a bad name, body, lease id or value; nothing changed."),
    "not_found": (PicketError, "404: no such path."),
    "method_not_allowed": (PicketError, "405: the path does not take this method."),
    "lock_held": (PicketError, "409: another lease holds the lock (owner, retry_after)."),
    "lease_lost": (PicketError, "409: this lease no longer holds the lock (or permit, or "
                                "leadership)."),
    "leader_exists": (PicketError, "409: another candidate leads the election (owner, "
                                   "retry_after)."),
    "limit_mismatch": (PicketError, "409: the semaphore's live permits use another limit (limit)."),
    "unauthenticated": (PicketError, "401: no token, or an unknown one."),
    "permission_denied": (PicketError, "403: the token may not do this to this name."),
    "body_too_large": (PicketError, "413: the request body is over 8 KiB."),
    "length_required": (PicketError, "411: a body sent without Content-Length (chunked)."),
    "unsupported_media_type": (PicketError, "415: a body not sent as application/json."),
    "forbidden_origin": (PicketError, "403: a call from a web page on another origin."),
    "misdirected_request": (PicketError, "421: a Host header picketd does not answer as."),
    "too_many_leases": (QuotaExceeded, "429: the token holds its max_leases."),
    "rate_limited": (QuotaExceeded, "429: too many acquires a second (retry_after)."),
    "internal_error": (PicketError, "500: picketd ran out of memory."),
    "store_error": (PicketError, "502: Redis answered with an error."),
    "store_unavailable": (Unavailable, "503: Redis unreachable or timed out."),
    "store_misconfigured": (Unavailable, "503: Redis's policy makes fences unsafe."),
    "store_full": (Unavailable, "503: Redis at maxmemory refuses new grants."),
    "not_replicated": (Unavailable, "503: the grant did not reach the replicas asked for."),
    "store_tampered": (Unavailable, "503: another writer changed this lock's fence state."),
    "too_many_waiters": (QuotaExceeded, "429/503: too many waiting acquires."),
    "too_many_watchers": (QuotaExceeded, "429/503: too many event streams open (this client's, "
                                         "or picketd's in all)."),
    "too_many_connections": (QuotaExceeded, "429: the token holds its --max-connections-per-token "
                                            "connections; this one is closed."),
    "shutting_down": (Unavailable, "503: picketd is stopping."),
}

ERROR_CLASSES = {code: _cls(code, base, doc) for code, (base, doc) in _CODES.items()}
# Not held, but not to be had either: `except LockHeld` catches it too.
ERROR_CLASSES["lock_delay"] = _cls(
    "lock_delay", ERROR_CLASSES["lock_held"],
    "409: the last lease expired without a release; its lock-delay runs (retry_after).")
# Every permit held: as a held lock to a caller that only knows locks.
ERROR_CLASSES["semaphore_full"] = _cls(
    "semaphore_full", ERROR_CLASSES["lock_held"],
    "409: every permit of the semaphore is held (retry_after: until the first frees).")
# A read/write lock at --max-readers: as a held lock, like a full semaphore.
ERROR_CLASSES["too_many_readers"] = _cls(
    "too_many_readers", ERROR_CLASSES["lock_held"],
    "409: the read/write lock has --max-readers read leases (retry_after: until one ends).")
globals().update({c.__name__: c for c in ERROR_CLASSES.values()})


class EventsUnsupported(ERROR_CLASSES["not_found"]):
    """404 on GET /v1/locks/{name}/events: a picketd older than lock events
    (Client.watch). A NotFound, so `except NotFound` catches it too; the
    keeper of Client.lock() falls back to renewing only."""

    code = "not_found"


def error_for(code, message, status=None, retry_after=None, owner=None, limit=None):
    """The exception for an error body's code (PicketError if unknown)."""
    cls = ERROR_CLASSES.get(code, PicketError)
    return cls(message, code=code, status=status, retry_after=retry_after, owner=owner,
               limit=limit)


__all__ = ["PicketError", "PicketTransportError", "QuotaExceeded", "Unavailable",
           "EventsUnsupported", "ERROR_CLASSES",
           "error_for"] + [c.__name__ for c in ERROR_CLASSES.values()]
