"""Leader elections (POST /v1/elections/{name}/campaign, ...): Client.campaign()
gives a Leadership, kept renewed by a keeper thread; Client.leader() and
Client.observe() say who leads. An election is a lease with a term: the
term is that grant's fence, checked by fenced storage exactly like a lock's
fence with the election's name as the lock (Picket-Lock: NAME,
Picket-Fence: TERM)."""

import math
import secrets
import threading
import time
import urllib.parse

from .errors import InvalidArgument, LeaseLost, PicketError
from .keeper import keep_renewed

_MAX_ELECTION_NAME = 198
_VALUE_MAX = 4096  # bytes of UTF-8


def election_name(resource):
    """The picket name of an election: lock_name(resource) (a valid name as
    it is, any other string "h." + 32 hex digits of its SHA-256), which
    must come to at most 198 characters (a mapped name always does);
    InvalidArgument otherwise."""
    from .client import lock_name
    name = lock_name(resource)
    if len(name) > _MAX_ELECTION_NAME:
        raise InvalidArgument(f"an election name is at most {_MAX_ELECTION_NAME} characters, "
                              f"not {len(name)}", code="invalid_argument")
    return name


def _path(name, verb=None):
    p = "/v1/elections/" + urllib.parse.quote(election_name(name), safe="")
    return p + "/" + verb if verb else p


def _token(doc):
    """The signed term of a reply: "token" (the contract), or "fence_token"
    (as a lock's grant names it; the picketd of the first elections commit
    sends that)."""
    return doc.get("token") or doc.get("fence_token")


def _check_value(value):
    """A campaign's or proclaim's value: None (no value) or a string of at
    most 4096 bytes of UTF-8 without control characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"a leader's value is a string or None, not {type(value).__name__}",
                              code="invalid_argument")
    if len(value.encode("utf-8", "surrogatepass")) > _VALUE_MAX:
        raise InvalidArgument(f"a leader's value is at most {_VALUE_MAX} bytes of UTF-8",
                              code="invalid_argument")
    if any(ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f for ch in value):
        raise InvalidArgument("a leader's value has no control characters", code="invalid_argument")
    return value


class LeaderEvent:
    """One event of an election's stream (Client.observe): type "leader"
    (heartbeats are not yielded). election: the name; leader: None when
    nobody leads (resigned, expired, broken), else a dict {term, value,
    owner, since (unix ms of the grant), ttl_ms}; term: the last term
    issued; time: unix ms; data: the whole JSON object. A leader event with
    the previous one's term and another value is a proclaim."""

    __slots__ = ("type", "data", "election", "leader", "term", "time")

    def __init__(self, type, data):
        self.type = type
        self.data = data
        self.election = data.get("election")
        leader = data.get("leader")
        self.leader = leader if isinstance(leader, dict) else None
        self.term = data.get("term")
        self.time = data.get("time")

    @property
    def leader_term(self):
        """The leader's term (None when nobody leads)."""
        return None if self.leader is None else self.leader.get("term")

    @property
    def value(self):
        """The leader's value (None when nobody leads, or it has none)."""
        return None if self.leader is None else self.leader.get("value")

    @property
    def owner(self):
        """The leader's owner (None when nobody leads, or it has none)."""
        return None if self.leader is None else self.leader.get("owner")

    def __repr__(self):
        if self.leader is None:
            return f"LeaderEvent({self.election!r}, leader=None, term={self.term})"
        return (f"LeaderEvent({self.election!r}, term={self.leader_term}, value={self.value!r}, "
                f"owner={self.owner!r})")


class Leadership:
    """A won campaign (Client.campaign). election: the name; term: the
    fence to send with every write (strictly increasing per election);
    value: the value last proclaimed (None: none); owner; ttl (seconds);
    token: the signed fence (None unless picketd signs fences); deadline:
    time.monotonic() at which this client must assume the leadership gone
    (request sent + ttl - drift margin); lost: an Event set once the
    leadership is known lost (by the keeper, or by renew/proclaim).

    The keeper thread (started by campaign() unless keep=False) renews every
    ttl/3, retries a failed renewal until the local deadline, and sets lost
    the moment picketd says lease_lost or the deadline passes without a
    successful renewal, then calls on_lost(leadership) if given.

    A context manager: `with client.campaign("scheduler", ttl=10) as lead:`
    resigns on exit (also when the body raised); if the body finished
    normally but the leadership was lost on the way, exit raises LeaseLost:
    the block ran for a while without it."""

    capped = False  # for keep_renewed: max_hold is a lock's, never an election's

    def __init__(self, client, election, lease_id, term, ttl, owner, value, token, deadline,
                 renew_every=None, on_lost=None):
        self.client = client
        self.election = election
        self._id = lease_id
        self.term = term
        self.ttl = ttl
        self.owner = owner
        self.value = value
        self.token = token
        self.deadline = deadline
        self._deadline_sent = -math.inf  # campaign() sets it to the grant's send
        self.lost = threading.Event()
        self.renew_every = renew_every
        self.on_lost = on_lost
        self._mu = threading.Lock()
        self._done = threading.Event()
        self._thread = None
        self._resigned = False
        self._reported = False  # on_lost called

    # -- the grant -------------------------------------------------------------
    @property
    def lease(self):
        """The lease id: the leadership's secret (renew, proclaim, resign)."""
        return self._id

    @property
    def fence(self):
        """The term, under the name a lock's lease calls its fence."""
        return self.term

    @property
    def fence_lock(self):
        """The lock name a fenced store checks the term under: the election's name."""
        return self.election

    def fence_headers(self):
        """The headers a fenced store (examples/fenced-kv) checks on a write:
        Picket-Lock (the election), Picket-Fence (the term) and, when
        signed, Picket-Fence-Token."""
        h = {"Picket-Lock": self.election, "Picket-Fence": str(self.term)}
        if self.token:
            h["Picket-Fence-Token"] = self.token
        return h

    def remaining(self):
        """Seconds left before the local deadline (0 when past it)."""
        return max(0.0, self.deadline - time.monotonic())

    def valid(self):
        """True while not known lost nor resigned and before the local
        deadline, by this process's monotonic clock alone. Check it before
        each write, and send the term with the write all the same."""
        return not self.lost.is_set() and not self._resigned and time.monotonic() < self.deadline

    def describe(self):
        return f"leadership of {self.election!r} (term {self.term})"

    # -- the calls ---------------------------------------------------------------
    def _post(self, verb, body):
        if time.monotonic() >= self.deadline:
            self.lost.set()
            raise LeaseLost(f"{self.describe()} is past its local deadline", code="lease_lost")
        stamp = {}
        try:
            doc = self.client._call("POST", _path(self.election, verb), body,
                                    deadline=self.deadline, stamp=stamp)
        except LeaseLost:
            self.lost.set()
            raise
        t = doc["ttl_ms"] / 1000.0
        from .client import _follow_renewal, drift_margin
        with self._mu:
            self.ttl = t
            _follow_renewal(self, stamp["sent"], stamp["sent"] + t - drift_margin(t))
            if _token(doc):
                self.token = _token(doc)
        return doc

    def renew(self, ttl=None):
        """Extend the leadership to ttl seconds from now (default: its ttl)
        and move its deadline. Raises LeaseLost (and sets lost) when it is
        no longer the leader. Never retried past the local deadline."""
        from .client import _ms
        self._post("renew", {"lease": self._id, "ttl_ms": _ms(self.ttl if ttl is None else ttl,
                                                               "ttl")})
        return self

    def proclaim(self, value, ttl=None):
        """Publish a new value (a string, or None for none) without losing
        the term; observers see a leader event with the same term. Renews
        too (to ttl seconds, default the lease's current TTL). Raises
        LeaseLost (and sets lost) when it is no longer the leader."""
        from .client import _ms
        body = {"lease": self._id, "value": _check_value(value)}
        if ttl is not None:
            body["ttl_ms"] = _ms(ttl, "ttl")
        doc = self._post("proclaim", body)
        self.value = doc.get("value", value)
        return self

    def resign(self):
        """Stop the keeper and step down: the next waiting candidate leads
        within milliseconds. Returns True when resigned, False when the
        leadership had already ended (lease_lost). Safe to call twice."""
        self.stop()
        with self._mu:
            if self._resigned:
                return False
            self._resigned = True
        try:
            self.client._call("POST", _path(self.election, "resign"), {"lease": self._id})
        except LeaseLost:
            self.lost.set()
            return False
        finally:
            from .client import _deadline_ended
            _deadline_ended(self)
        return True

    # -- the keeper --------------------------------------------------------------
    def keep(self):
        """Start the keeper thread (campaign() does, unless keep=False)."""
        with self._mu:
            if self._thread is not None or self._done.is_set():
                return self
            self._thread = threading.Thread(target=self._keep, name=f"picket-leader:{self.election}",
                                            daemon=True)
        self._thread.start()
        return self

    def _lose(self):
        # renew() sets lost itself on lease_lost: report once, by a flag of our own
        with self._mu:
            first, self._reported = not self._reported, True
            self.lost.set()
        self._done.set()
        if first and self.on_lost:
            try:
                self.on_lost(self)
            except Exception:  # a callback's error must not kill the keeper
                pass

    def _keep(self):
        keep_renewed(self, self._done, self.renew_every, self.renew, self._lose,
                     lost_by_renewal=lambda: self._done.is_set() or self._lose())

    def stop(self):
        """Stop renewing (waits for a renewal in flight, bounded by the
        client's timeout). The leadership then ends at its TTL, unless
        resigned."""
        self._done.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(self.client.timeout + 1.0)

    def __enter__(self):
        return self

    def __exit__(self, etype, exc, tb):
        lost = self.lost.is_set() or time.monotonic() >= self.deadline
        try:
            self.resign()
        except PicketError:
            if etype is None and not lost:
                raise
        if etype is None and lost:
            self.lost.set()
            raise LeaseLost(f"{self.describe()} was lost while held", code="lease_lost")
        return False

    def __repr__(self):
        return (f"Leadership(election={self.election!r}, term={self.term}, value={self.value!r}, "
                f"ttl={self.ttl}, remaining={self.remaining():.3f}, lost={self.lost.is_set()})")


def campaign(client, name, ttl=30.0, wait=0.0, owner=None, value=None, lease=None,
             renew_every=None, on_lost=None, keep=True):
    """Client.campaign: see there."""
    from .client import _LEASE, _ms, drift_margin
    body = {"ttl_ms": _ms(ttl, "ttl")}
    wait_ms = _ms(wait, "wait")
    if wait_ms:
        body["wait_ms"] = wait_ms
    if owner is not None:
        body["owner"] = owner
    if value is not None:
        body["value"] = _check_value(value)
    lease_id = secrets.token_hex(16) if lease is None else lease
    if not isinstance(lease_id, str) or not _LEASE.match(lease_id):
        raise InvalidArgument("lease must be 32 lowercase hex digits", code="invalid_argument")
    body["lease"] = lease_id
    stamp = {}
    doc = client._call("POST", _path(name, "campaign"), body, extra_timeout=wait_ms / 1000.0,
                       stamp=stamp)
    sent = stamp["sent"]
    ttl_s = doc["ttl_ms"] / 1000.0
    lead = Leadership(client, doc["election"], doc["lease"], doc["term"], ttl_s, doc.get("owner"),
                      doc.get("value"), _token(doc), sent + ttl_s - drift_margin(ttl_s),
                      renew_every=renew_every, on_lost=on_lost)
    lead._deadline_sent = sent
    # A waited grant was made at some moment between send and reply: when
    # that gap is over a tenth of the TTL, renew now so the deadline counts
    # from a request sent after the grant.
    if wait_ms and time.monotonic() - sent > ttl_s / 10:
        try:
            lead.renew()
        except PicketError:
            if not lead.valid():
                try:
                    lead.resign()
                except PicketError:
                    pass
                raise
    if keep:
        lead.keep()
    return lead


def observe(client, name, timeout=None, idle=60.0):
    """Client.observe: see there."""
    from .events import Watch
    w = Watch(client, _path(name, "observe"), timeout=timeout, idle=idle, event=LeaderEvent,
              what="elections")

    def events():
        try:
            for ev in w:
                if ev.type == "leader":
                    yield ev
        finally:
            w.close()

    return events()
