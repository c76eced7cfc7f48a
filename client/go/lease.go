package picket

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Kind is what a Lease is a lease of.
type Kind int

const (
	KindLock   Kind = iota // a lock's lease
	KindPermit             // a permit of a counting semaphore
	KindRWLock             // a read or write lease of a read/write lock
)

// Lease is a grant. Its lease id is a secret (whoever has it may renew
// and release): String and %v never show it, ID does.
type Lease struct {
	Kind      Kind
	Name      string // the lock's, semaphore's or rwlock's name (mapped by LockName)
	Fence     int64  // send it with every write to fenced storage
	FenceLock string // the lock name a fenced store checks Fence under: Name, "NAME:permit:I" or "NAME:rw"
	Owner     string
	Permit    int    // KindPermit: the slot, 0..Limit-1 (-1 otherwise)
	Limit     int    // KindPermit: the semaphore's limit
	Mode      string // KindRWLock: "read" or "write"

	s *leaseState // behind a pointer: a copy or a %v of a Lease shows no id
}

// leaseState is the mutable half of a held lease, a Lock's or a
// Leadership's: what its renewals move. Its methods are what the keeper
// (keeper.go) and the grant's own accessors read.
type leaseState struct {
	mu       sync.Mutex
	id       string
	ttl      time.Duration
	token    string
	deadline time.Time
	// deadlineSent is when the grant or renewal that last set deadline was
	// sent (far in the future once ended): see renewed.
	deadlineSent time.Time
	capped       bool
	maxHold      bool
	value        *string // a Leadership's proclaimed value (nil: none)
}

func newLeaseState(id string, sent time.Time, ttl time.Duration, token string) *leaseState {
	return &leaseState{id: id, ttl: ttl, token: token, deadline: sent.Add(ttl - driftMargin(ttl)), deadlineSent: sent}
}

// Deadline is the local deadline: the newest-sent grant's or renewal's
// send time + its TTL - a drift margin (see renewed).
func (s *leaseState) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// TTL is the lease time last granted.
func (s *leaseState) TTL() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttl
}

// Token is the signed fence or term last granted ("" unsigned).
func (s *leaseState) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// Capped: see Lease.Capped.
func (s *leaseState) Capped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capped
}

// Remaining is the time left before the local deadline (0 past it).
func (s *leaseState) Remaining() time.Duration {
	if d := time.Until(s.Deadline()); d > 0 {
		return d
	}
	return 0
}

// Valid: the local deadline has not passed.
func (s *leaseState) Valid() bool { return time.Now().Before(s.Deadline()) }

// renewed records a renewal sent at sent that granted ttl; a token
// replaces the last only when there is one.
//
// The deadline follows the NEWEST-SENT successful renewal, not the largest
// deadline: a renewal that asked for a shorter TTL than before moves it
// back (picketd expires the lease sooner now), so a reply to a renewal sent
// after the one that last set the deadline sets it to its own value,
// earlier or later. A late reply to an older renewal (the keeper's and the
// caller's may cross) may only lower it, never raise it: picketd may have
// applied that one after the newer. Both ways are conservative.
func (s *leaseState) renewed(sent time.Time, ttl time.Duration, token string, capped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if capped {
		s.capped = true
	}
	s.ttl = ttl
	if d := sent.Add(ttl - driftMargin(ttl)); sent.After(s.deadlineSent) {
		s.deadlineSent, s.deadline = sent, d
	} else if d.Before(s.deadline) {
		s.deadline = d
	}
	if token != "" {
		s.token = token
	}
}

// ended records a release or resignation: the lease is gone from now on,
// and no renewal's late reply moves its deadline on again.
func (s *leaseState) ended() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); s.deadline.After(now) {
		s.deadline = now
	}
	s.deadlineSent = endOfTime
}

// endOfTime is the deadlineSent of an ended lease: no renewal is sent after it.
var endOfTime = time.Unix(1<<62, 0)

// ID is the lease id: keep it secret; renew and release need it.
func (l *Lease) ID() string { return l.s.id }

// FenceToken is the signed fence (picketd with --fence-key-file; "" otherwise).
func (l *Lease) FenceToken() string { return l.s.Token() }

// TTL is the lease time last granted.
func (l *Lease) TTL() time.Duration { return l.s.TTL() }

// Deadline is when this client must assume the lease gone: the newest-sent
// grant's or renewal's send time + its TTL - a drift margin (1% + 2ms). A
// renewal with a shorter TTL moves it back; a late reply to an older
// renewal only ever lowers it.
func (l *Lease) Deadline() time.Time { return l.s.Deadline() }

// Capped says a grant or renewal was cut short by MaxHold: no renewal can
// carry the lease past its deadline.
func (l *Lease) Capped() bool { return l.s.Capped() }

// Remaining is the time left before the local deadline (0 past it).
func (l *Lease) Remaining() time.Duration { return l.s.Remaining() }

// Valid: the local deadline has not passed (by this process's monotonic
// clock). Check it before a write, and send the fence with it all the same.
func (l *Lease) Valid() bool { return l.s.Valid() }

func (l *Lease) describe() string {
	switch l.Kind {
	case KindPermit:
		return fmt.Sprintf("permit %d of semaphore %q", l.Permit, l.Name)
	case KindRWLock:
		return fmt.Sprintf("%s lease of rwlock %q", l.Mode, l.Name)
	}
	return fmt.Sprintf("lease of %q", l.Name)
}

// String describes the lease without its id.
func (l Lease) String() string {
	if l.s == nil {
		return "picket.Lease(empty)"
	}
	return fmt.Sprintf("picket.Lease(%s, fence %d, ttl %v, remaining %v)", l.describe(), l.Fence,
		l.TTL(), l.Remaining().Round(time.Millisecond))
}

// GoString is String, so %#v shows no id either.
func (l Lease) GoString() string { return l.String() }

// SetFenceHeaders sets the headers a fenced store (examples/fenced-kv)
// checks on a write: Picket-Lock (FenceLock), Picket-Fence and, when
// signed, Picket-Fence-Token.
func (l *Lease) SetFenceHeaders(req *http.Request) {
	setFenceHeaders(req, l.FenceLock, l.Fence, l.FenceToken())
}

// setFenceHeaders is SetFenceHeaders of a Lease and of a Leadership (whose
// lock is the election and whose fence is the term).
func setFenceHeaders(req *http.Request, lock string, fence int64, token string) {
	req.Header.Set("Picket-Lock", lock)
	req.Header.Set("Picket-Fence", strconv.FormatInt(fence, 10))
	if token != "" {
		req.Header.Set("Picket-Fence-Token", token)
	} else {
		req.Header.Del("Picket-Fence-Token")
	}
}
