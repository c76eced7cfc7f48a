"""Client.watch(): a lock's events, GET /v1/locks/{name}/events
(docs/events.md), read as Server-Sent Events over http.client.

The stream is one dedicated connection (never the client's keep-alive
pool: it stays busy for as long as the watch lasts). Lines are read with a
bound (LINE_MAX), so a broken or hostile server cannot make this process
buffer without limit. close() may come from another thread while one is
blocked reading: it shuts the socket down, which wakes that read at once
(closing a socket alone does not wake a thread blocked in recv)."""

import http.client
import json
import socket
import threading
import time

from .errors import EventsUnsupported, NotFound, PicketTransportError

LINE_MAX = 8192  # bytes of one line (its end not counted), and of one event's data
ERROR_BODY_MAX = 65536  # bytes read of an error reply before the stream


class LockEvent:
    """One event of a lock's stream. type: "state", "granted", "renewed",
    "released", "expired", "broken" or "heartbeat"; time: milliseconds since
    the Unix epoch. name, fence, next_fence (broken), owner (state, granted),
    ttl_ms (state, granted, renewed), held (state) and by (broken) are None
    when the event does not carry them; data is the whole JSON object, for
    fields newer than this client."""

    FIELDS = ("name", "held", "fence", "next_fence", "owner", "ttl_ms", "by", "time")
    __slots__ = ("type", "data") + FIELDS

    def __init__(self, type, data):
        self.type = type
        self.data = data
        for f in self.FIELDS:
            setattr(self, f, data.get(f))

    @property
    def ttl(self):
        """ttl_ms in seconds (None when absent)."""
        return None if self.ttl_ms is None else self.ttl_ms / 1000.0

    def ends(self, fence):
        """True when this event says the lease granted with fence is gone:
        an expired, broken or released event carries that fence, or a
        granted or state event shows another fence, or nothing held
        (docs/events.md). Only for events that come after that grant."""
        if self.type in ("expired", "broken", "released"):
            return self.fence == fence
        if self.type == "granted":
            return self.fence != fence
        if self.type == "state":
            return not self.held or self.fence != fence
        return False

    def __repr__(self):
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.FIELDS
                           if getattr(self, f) is not None)
        return f"LockEvent({self.type!r}, {fields})"


class Watch:
    """The iterator of Client.watch(): each next() is the next LockEvent.
    The request is made when the Watch is made, so a refusal raises there:
    EventsUnsupported (404, a picketd without events), Unauthenticated,
    PermissionDenied (the read verb), TooManyWatchers (429/503), or
    PicketTransportError.

    Iteration ends (StopIteration) after close() or once timeout seconds
    have passed since the watch began; it raises PicketTransportError when
    picketd ends the stream (it stops, or this client fell 8 KiB behind:
    watch again and a fresh state event says where the lock stands), when
    nothing arrived for idle seconds (picketd sends a heartbeat every 15 s
    of quiet by default), or on a line over 8 KiB. Usable as a context
    manager; close() is safe from any thread, and twice."""

    def __init__(self, client, path, timeout=None, idle=60.0, event=None, what="lock events"):
        self._path = path
        self._make = event or LockEvent  # (type, data) -> the event object
        self._idle = float(idle)
        self._end = None if timeout is None else time.monotonic() + float(timeout)
        self._mu = threading.Lock()
        self._closed = False
        first = self._idle if self._end is None else min(self._idle, float(timeout))
        self._conn = client._new_conn(max(0.001, min(client.timeout, first)))
        try:
            self._conn.request("GET", client._prefix + path,
                               headers=client._headers("text/event-stream"))
            self._resp = self._conn.getresponse()
            ctype = self._resp.getheader("Content-Type", "")
            if self._resp.status == 200 and ctype.startswith("text/event-stream"):
                return
            raw = self._resp.read(ERROR_BODY_MAX)
        except (OSError, http.client.HTTPException) as e:
            self._conn.close()
            raise PicketTransportError(f"GET {path}: {e!r}") from e
        self._conn.close()
        status = self._resp.status
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if status == 200:
            raise PicketTransportError(f"GET {path}: a reply of type {ctype!r}, not an event "
                                       "stream", status=status)
        e = client._error("GET", path, status, doc)
        if isinstance(e, NotFound):
            raise EventsUnsupported(f"this picketd has no {what} ({e.message})",
                                    code="not_found", status=status) from e
        raise e

    def __iter__(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Ends the watch (an iteration in progress, in any thread, ends too)."""
        with self._mu:
            if self._closed:
                return
            self._closed = True
            sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._conn.close()

    @property
    def closed(self):
        return self._closed

    def _stop(self):
        self.close()
        raise StopIteration

    def _fail(self, message, cause=None):
        self.close()
        raise PicketTransportError(f"GET {self._path}: {message}") from cause

    def _line(self):
        """The next line, without its end (\\n or \\r\\n)."""
        if self._closed:
            raise StopIteration
        wait = self._idle
        if self._end is not None:
            wait = min(wait, self._end - time.monotonic())
            if wait <= 0:
                self._stop()
        try:
            sock = self._conn.sock
            if sock is not None:
                sock.settimeout(wait)
            raw = self._resp.readline(LINE_MAX + 2)
        except Exception as e:  # noqa: BLE001  (after close(), whatever the read ran into)
            if self._closed:
                raise StopIteration
            if isinstance(e, socket.timeout):
                if self._end is not None and time.monotonic() >= self._end:
                    self._stop()
                self._fail(f"nothing (not even a heartbeat) for {self._idle:g} s", e)
            if isinstance(e, (OSError, http.client.HTTPException, ValueError)):
                self._fail(repr(e), e)
            raise
        if self._closed:
            raise StopIteration
        if not raw.endswith(b"\n"):
            if len(raw) >= LINE_MAX + 2:
                self._fail(f"a line over {LINE_MAX} bytes")
            self._fail("picketd ended the event stream")
        line = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
        if len(line) > LINE_MAX:
            self._fail(f"a line over {LINE_MAX} bytes")
        return line

    def __next__(self):
        # Server-Sent Events: field lines up to an empty line, which ends
        # the event; ":" starts a comment; fields other than event and data
        # (id, retry) mean nothing here.
        kind, data = "message", []
        size = 0
        while True:
            line = self._line()
            if not line:
                if not data:
                    kind = "message"
                    continue
                return self._event(kind, b"\n".join(data))
            if line.startswith(b":"):
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"event":
                kind = value.decode("utf-8", "replace")
            elif field == b"data":
                size += len(value) + 1
                if size > LINE_MAX:
                    self._fail(f"an event over {LINE_MAX} bytes")
                data.append(value)

    def _event(self, kind, data):
        try:
            doc = json.loads(data)
        except ValueError as e:
            self._fail(f"a {kind} event whose data is not JSON", e)
        if not isinstance(doc, dict):
            self._fail(f"a {kind} event whose data is not a JSON object")
        return self._make(kind, doc)

    def __repr__(self):
        return f"Watch({self._path!r}, closed={self._closed})"
