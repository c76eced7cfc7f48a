#!/usr/bin/env python3
"""checker: judges the history of a chaos run (tests/chaos/run).

What it owns: the history format (this docstring is its reference; the
workload and the nemesis write it, tests/chaos/workload.py and
tests/chaos/nemesis.py) and the rules that judge it. It is a separate
program, deterministic over a history file: the same file gives the same
output, byte for byte, so a kept history can be judged again anywhere.

  tests/chaos/checker.py HISTORY.jsonl [--json OUT.json] [--quiet]

prints a `history:` line (counts and anomalies), one verdict line per
rule (`RULE: PASS`, `RULE: FAIL (n violations)` with up to 5 indented
examples, or `RULE: INFO (...)` with indented details), then `checker: OK`
or `checker: N safety rule(s) failed`, and exits 0 (every safety rule passed), 1 (one failed) or
2 (bad usage or a history it cannot read). --json also writes the result
below for a runner to aggregate; --quiet prints the verdict lines and
the last line only. From Python: `checker.check(events)` takes a
list of event dicts and returns that result; `checker.render(result)` is
the text the program prints.

  {"rules": {RULE: {"ok": bool, "violations": n, "examples": [str, ...]}},
   "info": {"history": {...}, "overlapping_leases": {...}, "availability": {...}}}

History format
--------------

JSON lines, one event per line; a blank line is skipped. Every event is
an object with:

  time     integer nanoseconds of the harness's CLOCK_MONOTONIC, which all
           harness processes share. Lines may be out of order (the file is
           merged from several writers): events are sorted by (time, file
           order) before anything else.
  type     invoke | ok | fail | info. An invoke starts an operation; the
           same process then has exactly one completion of the same f:
           ok (it happened, and the reply says how), fail (it certainly
           did not happen: 409 lock_held, lease_lost, stale_fence, 412
           version_mismatch) or info (indeterminate: a timeout, a 5xx, a
           broken connection; it may or may not have happened). A process
           has at most one operation open at a time. An invoke with no
           completion by the end of the history counts as info.
  process  an integer worker id or a string (the runner's final reads use
           "final"); the string "nemesis" is the fault injector, whose
           events are never paired.
  f        the operation. Workers: acquire, renew, release, read, write,
           add, claim, final-read, and read-acquire, read-renew,
           read-release (a read/write lock's read leases); and an
           election's campaign, lead-renew, proclaim, resign and
           lead-write (a leader's write to fenced-kv under its term).
           Nemesis: start and stop of a fault
           (type info, no invoke), with value {"fault": KIND, "id": N,
           ...details}; the stop carries the same id. Its other events
           (run, schedule, healed) are ignored.

and, where they apply (absent or null means not given):

  lock     the lock name: of lock operations, and of writes, adds, claims
           and reads (the lock whose fence guards the key); of an
           election's operations, the election's name (which is also the
           Picket-Lock its leaders write under: a name no lock uses).
  lease    opaque string naming a lease (acquire, renew, release).
  fence    integer: on acquire ok the granted fence; on write, add and
           claim (invoke and ok) the fence sent; on campaign, lead-renew
           and proclaim ok the term; on lead-write the term sent.
  ttl_ms   integer, on acquire and renew ok: the TTL as granted (on their
           invoke: as asked).
  key      the fenced-kv key of read, write, add, final-read.
  version  integer, on write and add ok: the version fenced-kv assigned
           (a key's admitted writes count 1, 2, 3..., so versions are
           fenced-kv's own order for that key); on read ok.
  element  string, on add: the unique element added to a set key.
  value    on read and final-read ok: a set key's list of elements (or a
           register's integer); on write invoke: what was written.
  error    on fail and info: the error code.

Unknown fields are ignored. A line that is not JSON, not an object, lacks
time/type/process/f, or has a known field of the wrong type (time, fence,
version, ttl_ms not integers; lock, lease, key, element, error, f not
strings; type not one of the four) is a fatal input error: exit 2 with one
line naming the line number.

An operation is an invoke and its completion, merged: the completion's
fields win (the reply says how it happened), except that the fence of a
write, add, claim or lead-write is the one its invoke sent (that is what
fenced-kv judged). Harness slips are counted under info.history.anomalies, not
fatal: a completion without an open invoke of the same f is still used,
with no invoke time (so no rule below treats it as invoked after
anything); an invoke while its process has one open counts the open one
as info.

A *grant* is (lock, lease, fence) of an ok acquire; several ok acquires
with one lease and fence are idempotent retries of one grant. Its:

  start    the earliest ok completion of its acquires;
  invoked  the earliest invoke that may have created it: that of any of
           its ok acquires, or of an acquire of the same lock and lease
           that ended info (or never completed) and was invoked before the
           start, since an indeterminate try may be the one the store
           carried out;
  end      if a release of its lease completed ok: the earliest such ok
           time; otherwise the maximum of completion + ttl_ms over its
           acquire oks and its renew oks (the store cannot have kept it
           longer; an ok without a ttl_ms leaves the end unbounded). A
           release or renew that ended info or fail changes nothing.
           Which grant an ok renew or release of a lease is about (a lease
           id may be granted again after it expired): a renew's, the one
           its reply's fence names; otherwise the lease's latest grant
           whose start precedes the reply.

Rules
-----

Safety rules (a FAIL makes the exit status 1):

no_stale_write  For each ok write or add (with its lock and fence), per lock:
  (a) per key, the ok writes and adds ordered by version have
      non-decreasing fences: a write is a violation when a strictly lower
      version of its key carries a higher fence;
  (b) a write or add invoked strictly after the ok completion of a write,
      add or claim of the same lock carries a fence no lower than that
      one's fence.
  A write found by (a), (b) or both counts once.

no_fence_repeated  Per lock, no two ok acquires with different leases
  carry the same fence. One violation per (lock, fence) shared by two or
  more leases; the same lease and fence again is an idempotent retry.

fences_follow_real_time  Per lock, for grants g1 and g2: if g1's end is
  strictly before g2's invoked, then g2.fence > g1.fence. One violation per
  g2 (named with the highest-fenced g1 that ended before it); an
  O(n log n) sweep.

replaced_lease_stays_lost  Per lock, an ok renew or ok release R of a lease
  L is a violation when an acquire of a different lease M of the same lock,
  invoked after L's grant was answered, completed ok strictly before R's
  invoke, with a fence above L's fence (a grant asked for before L's, and
  yet fenced above it, is a fence gone backwards: fences_follow_real_time
  judges that).
  L's fence is that of the grant R is about (as under grants: the one a
  renew's reply's fence names, otherwise L's latest grant started before
  R's reply). A correct store's grant of M wrote over L's lease (acquire
  replaces the old grant in one script; a fence above L's means M was
  granted after L), so L can only be lost from then on, or granted again
  with a fence above M's; unless M's grant itself was lost (a failover
  with unreplicated grants, a restart without persistence). It catches a
  release that deletes whatever lease holds the lock (a zombie's late
  release frees the new holder's lock) and a renew that brings an old
  lease back. Not judged: an R with no invoke, or with no grant of L to be
  about; and, unless its reply's fence names a grant of L, an R after an
  acquire of L (same lock) that was invoked before R's reply and did not
  complete ok before it (it ended info, never completed, or completed ok
  later): the store may have granted L again first, with a fence this
  history does not tie to R. One violation per R, named with the
  highest-fenced M; each R scans the grants answered between L's grant
  and R's invoke (few: a lease's lifetime).

reads_follow_writes  Read leases of a read/write lock (read-acquire,
  read-renew, read-release, under the rwlock's lock NAME:rw) are grants
  of their own, built as above; its write leases are the lock's grants.
  Per lock: a read grant invoked after a write grant had ended carries a
  fence no lower than the write's (a read grant's fence is the last
  write's: the epoch it reads), and a write grant invoked after a read
  grant had ended carries a fence above the read's. One violation per
  grant, named with the highest-fenced grant of the other mode that ended
  before it. (Semaphore permits need no rule of their own: each slot is a
  lock, NAME:permit:I, judged by the rules above.)

no_lost_element  Per set key (a key with adds, or whose last ok final-read
  value is a list): every element of an ok add is in the value of the key's
  last ok final-read (by completion time); a key with ok adds and no ok
  final-read is one violation ("no final read"); an element in that value
  that no add invoked is a "phantom", and one that only adds which ended
  fail carried is "refused but present". Elements of info adds may or may
  not be there.

Elections. A *leadership* is a grant as above, built from an election's
operations: campaign for acquire (its fence the term), lead-renew and
proclaim for renew (a proclaim renews too: its reply's term names the
leadership, its ttl_ms extends it), resign for release. The election's
rules are the lock rules' judgements over leaderships and a leader's
writes (an election is a lease with a term, and storage checks the term
as a fence):

terms_rise  Per election, fences_follow_real_time over leaderships: a
  leadership campaigned for after another had ended (resigned ok, or its
  TTL past) has a higher term. Terms never repeat or go back, as the
  store issued them.

one_leader_per_term  Per election, no_fence_repeated over leaderships: no
  two leases were ever given one term (at most one leader per term, as
  the store saw it).

deposed_leader_refused  Per election, no_stale_write over lead-write
  operations alone (they are the writes and the barriers): a deposed
  leader's write invoked after its successor's write was acknowledged is
  refused (fenced-kv orders writes by term), and a key's admitted
  versions carry non-decreasing terms.

deposed_leader_stays_deposed  Per election, replaced_lease_stays_lost over
  leaderships: no lead-renew, proclaim or resign of a leader succeeds
  once a successor with a higher term was elected (it catches a resign
  or renew that does not check the lease).

Information only (never a failure, always printed):

overlapping_leases  Pairs of grants of one lock with different leases whose
  [start, end) intervals overlap (end as above, capped at the history's
  last event), and the longest such overlap in ms. Expected under pauses
  and clock faults; fencing makes them harmless.

availability  Per fault kind (nemesis start/stop, paired by id; a start
  with no stop lasts to the history's end): the number of faults, the
  ok/total ratio of acquires invoked inside one of its windows (ends
  included), and the same ratio for acquires invoked outside every fault
  window. Recovery: for each fault stop, the time until every lock that was
  granted at least once in the history has had an acquire invoked after
  the stop that completed ok (the slowest lock decides); per kind the
  median (the lower middle of an even count) and the maximum, or "never"
  if some lock had no such acquire before the history ended. Also the
  count of operations by f and type.
"""

import argparse
import bisect
import gc
import json
import sys
from collections import Counter, defaultdict
from operator import attrgetter

SAFETY_RULES = ("no_stale_write", "no_fence_repeated", "fences_follow_real_time",
                "replaced_lease_stays_lost", "no_lost_element", "reads_follow_writes",
                "terms_rise", "one_leader_per_term", "deposed_leader_refused",
                "deposed_leader_stays_deposed")
READ_VERBS = ("read-acquire", "read-renew", "read-release")
# An election's leaderships are grants too: a campaign makes one, a renew
# or a proclaim extends it, a resign ends it (the fence is the term).
ELECTION_VERBS = ("campaign", ("lead-renew", "proclaim"), "resign")
INFO_RULES = ("overlapping_leases", "availability")
MAX_EXAMPLES = 5
NEMESIS = "nemesis"
TYPES = frozenset(("invoke", "ok", "fail", "info"))
REQUIRED = ("time", "type", "process", "f")
INT_FIELDS = ("fence", "version", "ttl_ms")
STR_FIELDS = ("lock", "lease", "key", "element", "error")
# Fields an operation takes from its invoke and completion.
OP_FIELDS = INT_FIELDS + STR_FIELDS + ("value",)
FENCED_WRITES = ("write", "add")
FENCED_OPS = ("write", "add", "claim")
LEADER_WRITES = ("lead-write",)
NS_PER_MS = 1_000_000
INF = float("inf")


class HistoryError(ValueError):
    """A history the checker cannot judge; the message names the line."""


# ---- reading ------------------------------------------------------------

class Event:
    """One line of the history. Slots, not dicts: a million events must fit
    and be walked quickly."""
    __slots__ = ("seq", "time", "type", "process", "f") + OP_FIELDS


def parse_event(d):
    """An Event from one decoded line; HistoryError (without the location,
    which the caller adds) when the line breaks the format."""
    if not isinstance(d, dict):
        raise HistoryError("not a JSON object")
    for name in REQUIRED:
        if name not in d:
            raise HistoryError("no %r field" % name)
    ev = Event()
    ev.time, ev.type, ev.process, ev.f = d["time"], d["type"], d["process"], d["f"]
    # type(x) is int, not isinstance: JSON true would otherwise pass as 1.
    if type(ev.time) is not int:
        raise HistoryError("'time' is not an integer")
    if type(ev.type) is not str or ev.type not in TYPES:
        raise HistoryError("'type' is %s, not invoke, ok, fail or info" % json.dumps(ev.type))
    if type(ev.process) not in (int, str):
        raise HistoryError("'process' is neither an integer nor a string")
    if type(ev.f) is not str:
        raise HistoryError("'f' is not a string")
    for name in INT_FIELDS:
        v = d.get(name)
        if v is not None and type(v) is not int:
            raise HistoryError("%r is not an integer" % name)
        setattr(ev, name, v)
    for name in STR_FIELDS:
        v = d.get(name)
        if v is not None and type(v) is not str:
            raise HistoryError("%r is not a string" % name)
        setattr(ev, name, v)
    ev.value = d.get("value")
    return ev


def load(path):
    """The events of a history file, each checked; HistoryError names the
    first bad line."""
    events = []
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except ValueError as e:      # UnicodeDecodeError is one too
                raise HistoryError("line %d: not valid JSON (%s)" % (lineno, e)) from None
            try:
                events.append(parse_event(d))
            except HistoryError as e:
                raise HistoryError("line %d: %s" % (lineno, e)) from None
    return events


# ---- operations ---------------------------------------------------------

class Op:
    """An invoke and its completion. invoked is None for a completion that
    had no invoke; completed is None for an invoke that never completed."""
    __slots__ = ("seq", "f", "type", "process", "invoked", "completed") + OP_FIELDS


def make_op(inv, comp):
    op = Op()
    first = inv if inv is not None else comp
    op.seq, op.f, op.process = first.seq, first.f, first.process
    op.type = comp.type if comp is not None else "info"
    op.invoked = inv.time if inv is not None else None
    op.completed = comp.time if comp is not None else None
    for name in OP_FIELDS:
        v = getattr(comp, name) if comp is not None else None
        if v is None and inv is not None:
            v = getattr(inv, name)
        setattr(op, name, v)
    if inv is not None and inv.fence is not None and op.f in FENCED_OPS + LEADER_WRITES:
        op.fence = inv.fence
    return op


def pair(events, anomalies):
    """(operations in history order, nemesis events, never-completed count)
    from events already sorted."""
    ops, nemesis, open_ = [], [], {}
    for ev in events:
        p = ev.process
        if p == NEMESIS:
            nemesis.append(ev)
            continue
        if ev.type == "invoke":
            prev = open_.get(p)
            if prev is not None:
                # The harness broke "one open operation per process"; the
                # earlier one may or may not have happened.
                anomalies["invoke_while_open"] += 1
                ops.append(make_op(prev, None))
            open_[p] = ev
            continue
        inv = open_.get(p)
        if inv is not None and inv.f == ev.f:
            del open_[p]
            ops.append(make_op(inv, ev))
        else:
            anomalies["completion_without_invoke"] += 1
            ops.append(make_op(None, ev))
    unfinished = len(open_)
    for inv in open_.values():
        ops.append(make_op(inv, None))
    ops.sort(key=attrgetter("seq"))
    return ops, nemesis, unfinished


# ---- grants (no_fence_repeated, fences_follow_real_time,
# replaced_lease_stays_lost, overlapping_leases) ----------------------------

class Grant:
    __slots__ = ("lock", "lease", "lease_key", "fence", "first", "invoked", "ttl_end",
                 "release", "end", "word")

    def __init__(self, lock, lease, lease_key, fence, word="fence"):
        self.lock, self.lease, self.lease_key, self.fence = lock, lease, lease_key, fence
        self.word = word           # "fence", or "term" for an election's leadership
        self.first = None          # the ok acquire that completed first: its start
        self.invoked = INF
        self.ttl_end = -INF
        self.release = None        # the ok release that ended it, if any
        self.end = None

    @property
    def start(self):
        return self.first.completed

    def extend(self, op):
        """An ok acquire or renew of this grant: the store keeps it at most
        ttl_ms past that reply."""
        self.ttl_end = max(self.ttl_end, INF if op.ttl_ms is None
                           else op.completed + op.ttl_ms * NS_PER_MS)


class Use:
    """An ok renew or release with an invoke, and the grant it was about."""
    __slots__ = ("op", "grant", "named", "unsure")

    def __init__(self, op, grant, named, unsure):
        self.op = op
        self.grant = grant        # None: no grant of its lease to be about
        self.named = named        # a renew whose reply's fence names that grant
        # Not named, and an acquire of its lease that had not completed ok
        # by its reply was invoked before: a grant it may be about, unseen.
        self.unsure = unsure


def build_grants(ops, anomalies, verbs=("acquire", "renew", "release")):
    """(grants in the order of their first ok acquire, the Uses of ok renews
    and releases in history order). verbs: the f of the acquires, renews
    and releases that make them (read leases have their own; an
    election's renew is a tuple of two: lead-renew and proclaim)."""
    acquire, renew, release = verbs
    renews = renew if isinstance(renew, tuple) else (renew,)
    word = "term" if acquire == "campaign" else "fence"
    grants = {}
    maybe = {}      # (lock, lease) -> earliest invoke of an acquire that ended info
    for o in ops:
        if o.f != acquire or o.type == "fail":
            continue
        if o.type == "info":
            k = (o.lock, o.lease)
            if o.lease is not None and o.invoked is not None and k not in maybe:
                maybe[k] = o.invoked      # ops are in invoke order: the first is the earliest
            continue
        if o.lock is None or o.fence is None:
            anomalies["ok_missing_field"] += 1
            continue
        # An ok acquire without a lease can be nobody's retry.
        lease_key = o.lease if o.lease is not None else ("no lease", o.seq)
        k = (o.lock, lease_key, o.fence)
        g = grants.get(k)
        if g is None:
            g = grants[k] = Grant(o.lock, o.lease, lease_key, o.fence, word)
        if g.first is None or o.completed < g.first.completed:
            g.first = o
        g.invoked = min(g.invoked, -INF if o.invoked is None else o.invoked)
        g.extend(o)
    glist = sorted(grants.values(), key=lambda g: (g.start, g.first.seq))
    by_lease = defaultdict(lambda: ([], []))    # (lock, lease) -> (starts, grants)
    for g in glist:
        starts, gs = by_lease[(g.lock, g.lease_key)]
        starts.append(g.start)
        gs.append(g)
        early = maybe.get((g.lock, g.lease))
        if early is not None and early < g.start:
            g.invoked = min(g.invoked, early)
    later_invoked = {}    # (lock, lease) -> [i]: earliest invoked of its grants i, i+1, ...

    def unsure(o, i):
        """Whether an acquire of o's lease invoked before o's reply had not
        completed ok by then (grant i of the lease is o's owner): it may
        have granted the lease again, unseen, before o."""
        k = (o.lock, o.lease)
        if maybe.get(k, INF) < o.completed:
            return True
        starts, gs = by_lease.get(k, ((), ()))
        if i + 1 >= len(gs):
            return False
        suffix = later_invoked.get(k)
        if suffix is None:
            suffix = [INF] * (len(gs) + 1)
            for j in range(len(gs) - 1, -1, -1):
                suffix[j] = min(suffix[j + 1], gs[j].invoked)
            later_invoked[k] = suffix
        return suffix[i + 1] < o.completed

    def owner(o):
        """(index, grant) of the grant an ok renew or release of o's lease
        was about: the latest one of that lease started before o's reply
        (an older one had ended, or the store could not have granted the
        newer)."""
        starts, gs = by_lease.get((o.lock, o.lease), ((), ()))
        i = bisect.bisect_right(starts, o.completed) - 1
        return (i, gs[i]) if i >= 0 else (i, None)

    uses = []
    for o in ops:
        if o.type != "ok" or (o.f not in renews and o.f != release) or o.lease is None:
            continue
        g = None
        if o.f in renews and o.fence is not None:
            g = grants.get((o.lock, o.lease, o.fence))
        named = g is not None
        if not named:
            i, g = owner(o)
        if o.f in renews:
            if g is not None:
                g.extend(o)
        elif g is not None and (g.release is None or o.completed < g.release.completed):
            g.release = o
        if o.invoked is not None:
            uses.append(Use(o, g, named, not named and g is not None and unsure(o, i)))
    for g in glist:
        g.end = g.release.completed if g.release is not None else g.ttl_end
        g.end = max(g.end, g.start)    # a negative ttl_ms must not end it before it began
    return glist, uses


def grant_desc(g):
    return "lease %s %s %d (process %s, %s ok t=%d)" % (
        g.lease if g.lease is not None else "(none)", g.word, g.fence, g.first.process,
        "campaign" if g.word == "term" else "acquire", g.start)


def end_desc(g):
    if g.release is not None:
        return "released ok t=%d by process %s" % (g.release.completed, g.release.process)
    if g.end == INF:
        return "no ttl_ms"
    return "ttl ran out by t=%d" % g.end


# ---- the safety rules -----------------------------------------------------

def verdict(findings):
    """findings: (sort key, text) pairs; the first few in history order
    become the examples."""
    findings.sort()
    return {"ok": not findings, "violations": len(findings),
            "examples": [text for _, text in findings[:MAX_EXAMPLES]]}


def rule_no_stale_write(ops, anomalies, writes_f=FENCED_WRITES, barriers_f=FENCED_OPS,
                        noun="lock"):
    """no_stale_write; also deposed_leader_refused, with a leader's writes
    (lead-write) as both the writes and the barriers."""
    writes = []
    for o in ops:
        if o.type == "ok" and o.f in writes_f:
            if o.lock is None or o.fence is None:
                anomalies["ok_missing_field"] += 1
            else:
                writes.append(o)
    reasons = defaultdict(list)       # write -> what makes it stale

    # (a) versions are fenced-kv's own order of a key's writes.
    by_key = defaultdict(list)
    for o in writes:
        if o.key is not None and o.version is not None:
            by_key[(o.lock, o.key)].append(o)
        else:
            anomalies["ok_missing_field"] += 1
    for ws in by_key.values():
        ws.sort(key=lambda o: (o.version, o.seq))
        best = None                  # the highest fence of all strictly lower versions
        i = 0
        while i < len(ws):
            j = i
            while j < len(ws) and ws[j].version == ws[i].version:
                j += 1
            # Writes sharing a version have no order between them.
            for o in ws[i:j]:
                if best is not None and o.fence < best.fence:
                    reasons[o].append("(a) an earlier version %d carries fence %d (process %s, "
                                      "ok t=%d)" % (best.version, best.fence, best.process,
                                                    best.completed))
            for o in ws[i:j]:
                if best is None or o.fence > best.fence:
                    best = o
            i = j

    # (b) once a write, add or claim was acknowledged, fenced-kv's highest
    # fence for its lock is at least that; a write invoked later must not
    # be admitted with less.
    barriers = defaultdict(list)
    for o in ops:
        if o.type == "ok" and o.f in barriers_f and o.lock is not None and o.fence is not None:
            barriers[o.lock].append(o)
    probes = defaultdict(list)
    for o in writes:
        if o.invoked is not None:
            probes[o.lock].append(o)
    for lock, ps in probes.items():
        bs = sorted(barriers[lock], key=lambda o: (o.completed, o.seq))
        ps.sort(key=lambda o: (o.invoked, o.seq))
        best, i = None, 0
        for o in ps:
            while i < len(bs) and bs[i].completed < o.invoked:
                if best is None or bs[i].fence > best.fence:
                    best = bs[i]
                i += 1
            if best is not None and o.fence < best.fence:
                reasons[o].append("(b) invoked after %s fence %d (process %s) completed ok at t=%d"
                                  % (best.f, best.fence, best.process, best.completed))

    findings = []
    for o, why in reasons.items():
        findings.append((o.seq, "%s %s %s %s fence %d version %s by process %s (invoked %s, ok "
                         "t=%d): %s" % (noun, o.lock, o.f, o.key, o.fence, o.version, o.process,
                                        "t=%d" % o.invoked if o.invoked is not None else "?",
                                        o.completed, "; ".join(why))))
    return verdict(findings)


def rule_no_fence_repeated(grants, noun="lock"):
    by_fence = defaultdict(list)
    for g in grants:                   # in start order, so each list is too
        by_fence[(g.lock, g.fence)].append(g)
    findings = []
    for (lock, fence), gs in by_fence.items():
        if len(gs) > 1:
            findings.append((gs[1].first.seq, "%s %s %s %d granted to %d leases: %s" % (
                noun, lock, gs[0].word, fence, len(gs), "; ".join(grant_desc(g) for g in gs))))
    return verdict(findings)


def rule_fences_follow_real_time(grants, noun="lock"):
    by_lock = defaultdict(list)
    for g in grants:
        by_lock[g.lock].append(g)
    findings = []
    for lock, gs in by_lock.items():
        # Sweep g2 in invoke order; every g1 that ended before g2 was
        # invoked has been folded into best, the highest fence among them.
        ended = sorted(gs, key=lambda g: (g.end, g.first.seq))
        later = sorted((g for g in gs if g.invoked != -INF),
                       key=lambda g: (g.invoked, g.first.seq))
        best, i = None, 0
        for g2 in later:
            while i < len(ended) and ended[i].end < g2.invoked:
                if best is None or ended[i].fence > best.fence:
                    best = ended[i]
                i += 1
            if best is not None and g2.fence <= best.fence:
                findings.append((g2.first.seq, "%s %s: %s, invoked t=%d, came after %s had "
                                 "ended (%s)" % (noun, lock, grant_desc(g2), g2.invoked,
                                                 grant_desc(best), end_desc(best))))
    return verdict(findings)


def rule_reads_follow_writes(writes, reads):
    by_lock = defaultdict(lambda: ([], []))
    for g in writes:
        by_lock[g.lock][0].append(g)
    for g in reads:
        by_lock[g.lock][1].append(g)
    findings = []

    def sweep(lock, earlier, later, bad, what):
        """Each g2 of later, in invoke order, against the highest-fenced g1
        of earlier that ended before g2 was invoked."""
        ended = sorted(earlier, key=lambda g: (g.end, g.first.seq))
        best, i = None, 0
        for g2 in sorted((g for g in later if g.invoked != -INF),
                         key=lambda g: (g.invoked, g.first.seq)):
            while i < len(ended) and ended[i].end < g2.invoked:
                if best is None or ended[i].fence > best.fence:
                    best = ended[i]
                i += 1
            if best is not None and bad(g2.fence, best.fence):
                findings.append((g2.first.seq, "lock %s: %s %s, invoked t=%d, came after %s %s "
                                 "had ended (%s)" % (lock, what[0], grant_desc(g2), g2.invoked,
                                                     what[1], grant_desc(best), end_desc(best))))

    for lock, (ws, rs) in by_lock.items():
        if not rs:
            continue
        sweep(lock, ws, rs, lambda f2, f1: f2 < f1, ("read", "write"))
        sweep(lock, rs, ws, lambda f2, f1: f2 <= f1, ("write", "read"))
    return verdict(findings)


def rule_replaced_lease_stays_lost(grants, uses, noun="lock"):
    by_lock = defaultdict(list)
    for g in grants:                   # in start order, so each list is too
        by_lock[g.lock].append(g)
    probes = defaultdict(list)
    for u in uses:
        if u.grant is not None and not u.unsure:
            o = u.op
            probes[o.lock].append((o.invoked, o.seq, u))
    findings = []
    for lock, ps in probes.items():
        # A grant M replaces L only if it was asked for after L's grant was
        # answered: a grant from before (a fence that went backwards after
        # a lost counter) is fences_follow_real_time's to judge. So look at
        # the grants answered between L's grant and the probe's invoke; a
        # lease's lifetime holds few of them, so the scan stays short.
        gs = sorted(by_lock[lock], key=lambda g: g.first.completed)
        done = [g.first.completed for g in gs]
        for invoked, _, u in sorted(ps):
            o, g = u.op, u.grant
            lo = bisect.bisect_right(done, g.first.completed)
            hi = bisect.bisect_left(done, invoked)
            best = None
            for m in gs[lo:hi]:
                if (m.lease_key != o.lease and m.fence > g.fence and
                        (m.first.invoked is None or m.first.invoked > g.first.completed) and
                        (best is None or m.fence > best.fence)):
                    best = m
            if best is not None:
                findings.append((o.seq, "%s %s: %s ok of %s%s by process %s (invoked t=%d, "
                                 "ok t=%d), after %s had replaced it" % (
                                     noun, lock, o.f, grant_desc(g),
                                     " (named by its reply)" if u.named else "", o.process,
                                     o.invoked, o.completed, grant_desc(best))))
    return verdict(findings)


def element_of(x):
    # A set's elements are strings; anything else is compared (and shown)
    # as its JSON text, which never equals an element the workload added.
    return x if isinstance(x, str) else json.dumps(x, sort_keys=True)


def rule_no_lost_element(ops, anomalies):
    adds = defaultdict(dict)        # key -> element -> {type: first op of that outcome}
    finals, attempts = {}, Counter()
    for o in ops:
        if o.f == "add":
            if o.key is None or o.element is None:
                if o.type == "ok":
                    anomalies["ok_missing_field"] += 1
                continue
            adds[o.key].setdefault(o.element, {}).setdefault(o.type, o)
        elif o.f == "final-read" and o.key is not None:
            attempts[o.key] += 1
            last = finals.get(o.key)
            if o.type == "ok" and (last is None or
                                   (o.completed, o.seq) > (last.completed, last.seq)):
                finals[o.key] = o
    keys = set(adds) | {k for k, o in finals.items() if isinstance(o.value, list)}
    findings = []
    for key in sorted(keys):
        elements = adds.get(key, {})
        acked = [(st["ok"], e) for e, st in elements.items() if "ok" in st]
        fr = finals.get(key)
        if fr is None:
            if acked:
                last = max(o.completed for o, _ in acked)
                findings.append((last, "key %s: %d acknowledged element(s) and no final read "
                                 "(%d final-read attempt(s), none ok)" % (key, len(acked),
                                                                        attempts[key])))
            continue
        value = fr.value if isinstance(fr.value, list) else []
        present = {element_of(x) for x in value}
        for o, e in acked:
            if e not in present:
                findings.append((o.completed, "key %s: element %s acknowledged (process %s, add "
                                 "ok t=%d, fence %s) is missing from the final read (t=%d)" % (
                                     key, e, o.process, o.completed, o.fence, fr.completed)))
        seen = set()
        for x in value:
            e = element_of(x)
            if e in seen:
                continue
            seen.add(e)
            st = elements.get(e)
            if st is None:
                findings.append((fr.completed, "key %s: element %s in the final read (t=%d) was "
                                 "never added (phantom)" % (key, e, fr.completed)))
            elif set(st) == {"fail"}:
                o = st["fail"]
                findings.append((fr.completed, "key %s: element %s in the final read (t=%d) was "
                                 "refused but present (process %s, add failed t=%d: %s)" % (
                                     key, e, fr.completed, o.process, o.completed, o.error)))
    return verdict(findings)


# ---- information ------------------------------------------------------------

def count_overlaps(intervals):
    """Pairs among [start, end) intervals that overlap; touching is not."""
    points = []
    for s, e in intervals:
        points.append((s, 1))
        points.append((e, 0))          # at one instant, ends go before starts
    points.sort()
    active = pairs = 0
    for _, is_start in points:
        if is_start:
            pairs += active
            active += 1
        else:
            active -= 1
    return pairs


def info_overlapping_leases(grants, last_time):
    by_lock = defaultdict(list)
    for g in grants:
        end = min(g.end, last_time)
        if end > g.start:
            by_lock[g.lock].append((g, end))
    per_lock, longest, longest_pair = {}, 0, None
    for lock, items in sorted(by_lock.items()):
        pairs = count_overlaps([(g.start, end) for g, end in items])
        by_lease = defaultdict(list)
        for g, end in items:
            by_lease[g.lease_key].append((g.start, end))
        # Two grants of one lease never overlap in the store; our bounds on
        # their ends may, and those pairs are not two holders.
        pairs -= sum(count_overlaps(iv) for iv in by_lease.values() if len(iv) > 1)
        if pairs:
            per_lock[lock] = pairs
        # Among the grants started before g, the one overlapping g longest
        # is the one that ends last with another lease. Keep two: first,
        # the latest end of all; second, the latest end among leases other
        # than first's.
        first = second = None          # (end, grant)
        for g, end in items:
            partner = first if first and first[1].lease_key != g.lease_key else second
            if partner is not None:
                overlap = min(partner[0], end) - g.start
                if overlap > longest:
                    longest, longest_pair = overlap, (partner[1], g, g.start + overlap)
            if first is None or end > first[0]:
                if first is not None and first[1].lease_key != g.lease_key:
                    second = first     # else the old second already has another lease than g
                first = (end, g)
            elif g.lease_key != first[1].lease_key and (second is None or end > second[0]):
                second = (end, g)
    out = {"pairs": sum(per_lock.values()), "per_lock": per_lock,
           "longest_ms": round(longest / NS_PER_MS, 3) if longest_pair else None,
           "longest": None}
    if longest_pair:
        g1, g2, until = longest_pair
        out["longest"] = "lock %s: %s and %s overlapped from t=%d to t=%d" % (
            g1.lock, grant_desc(g1), grant_desc(g2), g2.start, until)
    return out


class Fault:
    __slots__ = ("kind", "start", "stop", "error")

    def __init__(self, kind, start, stop, error):
        self.kind, self.start, self.stop, self.error = kind, start, stop, error


def faults_of(nemesis, anomalies):
    faults, open_ = [], defaultdict(list)
    for ev in nemesis:
        if ev.f not in ("start", "stop"):
            continue
        v = ev.value
        if not isinstance(v, dict) or "id" not in v or not isinstance(v.get("fault"), str):
            anomalies["fault_event_malformed"] += 1
            continue
        fid = json.dumps(v["id"], sort_keys=True)     # any JSON, made hashable
        if ev.f == "start":
            flt = Fault(v["fault"], ev.time, None, v.get("error"))
            faults.append(flt)
            open_[fid].append(flt)
        elif open_[fid]:
            open_[fid].pop(0).stop = ev.time
        else:
            anomalies["fault_stop_without_start"] += 1
            faults.append(Fault(v["fault"], None, ev.time, None))
    return faults


def merged(windows):
    """Sorted, disjoint [start, end] windows: (starts, ends)."""
    starts, ends = [], []
    for s, e in sorted(windows):
        if ends and s <= ends[-1]:
            ends[-1] = max(ends[-1], e)
        else:
            starts.append(s)
            ends.append(e)
    return starts, ends


def inside(t, win):
    i = bisect.bisect_right(win[0], t) - 1
    return i >= 0 and t <= win[1][i]


def ratio(ok, total):
    return {"ok": ok, "total": total, "ratio": round(ok / total, 4) if total else None}


def info_availability(ops, nemesis, last_time, anomalies):
    faults = faults_of(nemesis, anomalies)
    acquires = [o for o in ops if o.f == "acquire" and o.invoked is not None]
    kinds = sorted({f.kind for f in faults})
    windows = {k: merged([(f.start, f.stop if f.stop is not None else last_time)
                          for f in faults if f.kind == k and f.start is not None]) for k in kinds}
    anywhere = merged([(f.start, f.stop if f.stop is not None else last_time)
                       for f in faults if f.start is not None])

    # Recovery: per lock, its ok acquires by invoke time and, from each on,
    # the earliest completion among it and all later-invoked ones.
    granted = defaultdict(list)
    for o in ops:
        if o.f == "acquire" and o.type == "ok" and o.lock is not None:
            granted[o.lock].append(o)
    recov = {}
    for lock, os_ in granted.items():
        os_ = sorted((o for o in os_ if o.invoked is not None), key=lambda o: (o.invoked, o.seq))
        suffix = [0] * len(os_)
        low = INF
        for i in range(len(os_) - 1, -1, -1):
            low = min(low, os_[i].completed)
            suffix[i] = low
        recov[lock] = ([o.invoked for o in os_], suffix)

    def recovery(stop):
        worst = 0
        for invs, suffix in recov.values():
            i = bisect.bisect_right(invs, stop)      # invoked strictly after the stop
            if i == len(invs):
                return INF
            worst = max(worst, suffix[i] - stop)
        return worst

    def ms(x):
        return "never" if x == INF else round(x / NS_PER_MS, 3)

    per_kind = {}
    for k in kinds:
        mine = [f for f in faults if f.kind == k]
        during = [o for o in acquires if inside(o.invoked, windows[k])]
        times = sorted(recovery(f.stop) for f in mine if f.stop is not None)
        per_kind[k] = {
            "count": len(mine),
            "setup_errors": sum(1 for f in mine if f.error is not None),
            "acquire_during": ratio(sum(1 for o in during if o.type == "ok"), len(during)),
            "recovery_ms": {
                "measured": len(times),
                "never": sum(1 for t in times if t == INF),
                "median": ms(times[(len(times) - 1) // 2]) if times else None,
                "max": ms(times[-1]) if times else None,
            },
        }
    outside = [o for o in acquires if not inside(o.invoked, anywhere)]
    counts = defaultdict(Counter)
    for o in ops:
        counts[o.f][o.type] += 1
    return {
        "faults": per_kind,
        "acquire_outside_faults": ratio(sum(1 for o in outside if o.type == "ok"), len(outside)),
        "locks_granted": sorted(granted),
        "ops": {f: dict(sorted(c.items())) for f, c in sorted(counts.items())},
    }


# ---- judging --------------------------------------------------------------

def judge(events):
    """The result for parsed events (in any order)."""
    # Stable: events of one time keep their file order.
    events = sorted(events, key=attrgetter("time"))
    for i, ev in enumerate(events):
        ev.seq = i
    anomalies = Counter()
    ops, nemesis, unfinished = pair(events, anomalies)
    grants, uses = build_grants(ops, anomalies)
    reads, _ = build_grants(ops, anomalies, READ_VERBS)
    leaders, leader_uses = build_grants(ops, anomalies, ELECTION_VERBS)
    last_time = events[-1].time if events else 0
    rules = {
        "no_stale_write": rule_no_stale_write(ops, anomalies),
        "no_fence_repeated": rule_no_fence_repeated(grants),
        "fences_follow_real_time": rule_fences_follow_real_time(grants),
        "replaced_lease_stays_lost": rule_replaced_lease_stays_lost(grants, uses),
        "no_lost_element": rule_no_lost_element(ops, anomalies),
        "reads_follow_writes": rule_reads_follow_writes(grants, reads),
        # Elections: the same judgements over leaderships and terms.
        "terms_rise": rule_fences_follow_real_time(leaders, "election"),
        "one_leader_per_term": rule_no_fence_repeated(leaders, "election"),
        "deposed_leader_refused": rule_no_stale_write(ops, anomalies, LEADER_WRITES,
                                                      LEADER_WRITES, "election"),
        "deposed_leader_stays_deposed": rule_replaced_lease_stays_lost(leaders, leader_uses,
                                                                       "election"),
    }
    overlapping = info_overlapping_leases(grants, last_time)
    availability = info_availability(ops, nemesis, last_time, anomalies)
    # Last: every step above may have counted anomalies.
    history = {"events": len(events), "operations": len(ops), "unfinished": unfinished,
               "grants": len(grants), "leaderships": len(leaders),
               "anomalies": dict(sorted(anomalies.items()))}
    return {"rules": rules,
            "info": {"history": history, "overlapping_leases": overlapping,
                     "availability": availability}}


def check(events):
    """The result for a list of event dicts (any order); HistoryError names
    the first bad one by its index."""
    parsed = []
    for i, d in enumerate(events):
        try:
            parsed.append(parse_event(d))
        except HistoryError as e:
            raise HistoryError("events[%d]: %s" % (i, e)) from None
    return judge(parsed)


def failed(result):
    return [r for r in SAFETY_RULES if not result["rules"][r]["ok"]]


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def fmt_ratio(r):
    if not r["total"]:
        return "0/0 ok"
    return "%d/%d ok (%.4f)" % (r["ok"], r["total"], r["ratio"])


def fmt_ms(x):
    return x if isinstance(x, str) else "%.3f ms" % x


def render(result, quiet=False):
    """The text the program prints for a result."""
    out = []

    def detail(line):
        if not quiet:
            out.append("    " + line)

    h = result["info"]["history"]
    if not quiet:
        anomalies = ", ".join("%s=%d" % kv for kv in sorted(h["anomalies"].items()))
        out.append("history: %s, %s (%d never completed: counted as info), %s, %s; anomalies: %s"
                   % (plural(h["events"], "event"), plural(h["operations"], "operation"),
                      h["unfinished"], plural(h["grants"], "grant"),
                      plural(h.get("leaderships", 0), "leadership"), anomalies or "none"))
    for name in SAFETY_RULES:
        r = result["rules"][name]
        if r["ok"]:
            out.append("%s: PASS" % name)
            continue
        out.append("%s: FAIL (%s)" % (name, plural(r["violations"], "violation")))
        for ex in r["examples"]:
            detail(ex)
        if r["violations"] > len(r["examples"]):
            detail("... and %d more" % (r["violations"] - len(r["examples"])))

    ov = result["info"]["overlapping_leases"]
    out.append("overlapping_leases: INFO (%s%s)" % (
        plural(ov["pairs"], "pair"),
        ", longest %.3f ms" % ov["longest_ms"] if ov["longest_ms"] is not None else ""))
    for lock, n in sorted(ov["per_lock"].items()):
        detail("%s: %s" % (lock, plural(n, "pair")))
    if ov["longest"]:
        detail("longest: " + ov["longest"])

    av = result["info"]["availability"]
    out.append("availability: INFO (%s of %s)" % (
        plural(sum(k["count"] for k in av["faults"].values()), "fault"),
        plural(len(av["faults"]), "kind")))
    for kind, k in sorted(av["faults"].items()):
        rec = k["recovery_ms"]
        detail("%s: %s%s; acquires invoked during: %s; recovery: %s" % (
            kind, plural(k["count"], "fault"),
            " (%d failed to set up)" % k["setup_errors"] if k["setup_errors"] else "",
            fmt_ratio(k["acquire_during"]),
            "median %s, max %s (%d measured)" % (fmt_ms(rec["median"]), fmt_ms(rec["max"]),
                                                 rec["measured"])
            if rec["measured"] else "no stop"))
    detail("outside any fault: acquires %s" % fmt_ratio(av["acquire_outside_faults"]))
    for f, c in sorted(av["ops"].items()):
        detail("ops %s: %s" % (f, " ".join("%s=%d" % kv for kv in sorted(c.items()))))

    bad = failed(result)
    out.append("checker: OK" if not bad else
               "checker: %d safety rule%s failed" % (len(bad), "" if len(bad) == 1 else "s"))
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="checker.py", description="Judge a chaos history (the module docstring "
        "describes the format and the rules). Exit 0: every safety rule passed; 1: one "
        "failed; 2: bad usage or input.")
    ap.add_argument("history", metavar="HISTORY.jsonl")
    ap.add_argument("--json", metavar="OUT.json", help="also write the result as JSON")
    ap.add_argument("--quiet", action="store_true",
                    help="verdict lines only: no examples, no details")
    a = ap.parse_args(argv)
    # A million events are a million objects and none is part of a cycle:
    # the cyclic collector would only walk them again and again (a third
    # of the run time).
    gc.disable()
    try:
        events = load(a.history)
    except OSError as e:
        print("checker: %s: %s" % (a.history, e.strerror or e), file=sys.stderr)
        return 2
    except HistoryError as e:
        print("checker: %s: %s" % (a.history, e), file=sys.stderr)
        return 2
    result = judge(events)
    sys.stdout.write(render(result, quiet=a.quiet))
    if a.json:
        try:
            with open(a.json, "w") as f:
                f.write(json.dumps(result, sort_keys=True, indent=1) + "\n")
        except OSError as e:
            print("checker: %s: %s" % (a.json, e.strerror or e), file=sys.stderr)
            return 2
    return 1 if failed(result) else 0


if __name__ == "__main__":
    sys.exit(main())
