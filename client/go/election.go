package picket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"
)

// Leader elections (POST /v1/elections/{name}/campaign, ...). An election
// is a lease with a term: the term is that grant's fence, strictly
// increasing per election, and fenced storage checks it exactly as a
// lock's fence, with the election's name as the lock (Picket-Lock: NAME,
// Picket-Fence: TERM).

const (
	maxElectionName = 198
	maxLeaderValue  = 4096 // bytes of UTF-8
)

// ElectionName is the picket name of an election: LockName(resource),
// which must come to at most 198 characters (a mapped name always does).
func ElectionName(resource string) (string, error) {
	n := LockName(resource)
	if len(n) > maxElectionName {
		return "", invalid("an election name is at most %d characters, not %d", maxElectionName, len(n))
	}
	return n, nil
}

func electionPath(name, verb string) (string, error) {
	n, err := ElectionName(name)
	if err != nil {
		return "", err
	}
	p := "/v1/elections/" + url.PathEscape(n)
	if verb != "" {
		p += "/" + verb
	}
	return p, nil
}

func checkValue(v string) error {
	if len(v) > maxLeaderValue {
		return invalid("a leader's value is at most %d bytes, not %d", maxLeaderValue, len(v))
	}
	if !utf8.ValidString(v) {
		return invalid("a leader's value is UTF-8")
	}
	for _, r := range v {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return invalid("a leader's value has no control characters")
		}
	}
	return nil
}

// WithTTL is Campaign's lease time (default 30s). Lock, Semaphore,
// ReadLock and WriteLock take theirs as an argument; WithTTL overrides it.
func WithTTL(d time.Duration) LockOption { return func(c *lockConfig) { c.o.TTL = d } }

// WithValue is the value a campaign proclaims with its leadership (shown
// to observers: an address, a host name; at most 4096 bytes of UTF-8, no
// control characters). Without it the leader has no value.
func WithValue(v string) LockOption { return func(c *lockConfig) { c.value = &v } }

// WithLeaseOwner is the owner label of this grant or campaign ("": the
// client's WithOwner).
func WithLeaseOwner(owner string) LockOption { return func(c *lockConfig) { c.o.Owner = owner } }

// WithLeaseID is your own lease id (32 lowercase hex digits): a retried
// campaign or acquire with it gets the same grant (term, fence).
func WithLeaseID(id string) LockOption { return func(c *lockConfig) { c.o.Lease = id } }

// Leadership is a won campaign, kept renewed by a keeper goroutine (every
// ttl/3; a failed renewal is retried until the local deadline). Context is
// cancelled the moment the leadership is lost (picketd answered
// lease_lost, or the local deadline passed without a successful renewal)
// or resigned; Err says which. Its lease id is a secret: String and %v
// never show it.
type Leadership struct {
	Election string // the election's name (mapped by ElectionName)
	Term     int64  // the fence of fenced storage: send it with every write
	Owner    string

	c *Client
	s *leaseState
	k keeper
}

type campaignDoc struct {
	Election string  `json:"election"`
	Lease    string  `json:"lease"`
	Term     int64   `json:"term"`
	TTLMS    int64   `json:"ttl_ms"`
	Owner    *string `json:"owner"`
	Value    *string `json:"value"`
	Token    string  `json:"token"`
	FToken   string  `json:"fence_token"` // the token as the first elections picketd names it
}

// Campaign runs for leader of election name and keeps the leadership:
//
//	lead, err := c.Campaign(ctx, "scheduler", picket.WithTTL(10*time.Second),
//		picket.WithValue("host-a:8080"), picket.WithWait(time.Minute))
//	if err != nil { ... }
//	defer lead.Resign(context.Background())
//	runScheduler(lead.Context(), lead.Term) // ends the moment leadership is lost
//
// Options: WithTTL (default 30s), WithWait (wait this long, first come
// first served on this picketd, while another leads; a cancelled ctx ends
// the wait), WithValue, WithLeaseOwner, WithLeaseID, WithRenewEvery,
// WithOnLost. It fails with ErrLeaderExists (an *APIError with Holder and
// RetryAfter) while another leads. Context() is a child of ctx: cancelling
// ctx cancels it too, but does not resign.
func (c *Client) Campaign(ctx context.Context, name string, opts ...LockOption) (*Leadership, error) {
	if c.err != nil {
		return nil, c.err
	}
	cfg := lockConfig{}
	cfg.o.TTL = defaultTTL
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.o.TTL <= 0 || ms(cfg.o.TTL) < 1:
		return nil, invalid("the ttl must be 1ms or more, not %v", cfg.o.TTL)
	case cfg.o.Wait < 0:
		return nil, invalid("the wait must not be negative, not %v", cfg.o.Wait)
	case cfg.renewEvery < 0:
		return nil, invalid("renew every must not be negative, not %v", cfg.renewEvery)
	case cfg.o.LockDelay != 0 || cfg.o.MaxHold != 0:
		return nil, invalid("an election takes no lock delay nor max hold")
	}
	path, err := electionPath(name, "campaign")
	if err != nil {
		return nil, err
	}
	id, err := leaseIDOf(cfg.o.Lease)
	if err != nil {
		return nil, err
	}
	body := map[string]interface{}{"ttl_ms": ms(cfg.o.TTL), "lease": id}
	if w := ms(cfg.o.Wait); w > 0 {
		body["wait_ms"] = w
	}
	if owner := c.ownerOf(cfg.o.Owner); owner != "" {
		body["owner"] = owner
	}
	if cfg.value != nil {
		if err := checkValue(*cfg.value); err != nil {
			return nil, err
		}
		body["value"] = *cfg.value
	}
	var doc campaignDoc
	sent, err := c.call(ctx, "POST", path, body, cfg.o.Wait, time.Time{}, &doc)
	if err != nil {
		return nil, err
	}
	if doc.Lease != id || doc.TTLMS < 1 || doc.Term < 1 {
		return nil, &TransportError{Op: "POST " + path, Status: 200, Err: errors.New("a leadership without its lease, term or ttl")}
	}
	t := time.Duration(doc.TTLMS) * time.Millisecond
	l := &Leadership{Election: doc.Election, Term: doc.Term, c: c, s: newLeaseState(id, sent, t, firstOf(doc.Token, doc.FToken))}
	l.s.value = doc.Value
	if doc.Owner != nil {
		l.Owner = *doc.Owner
	}
	l.k.s = l.s
	l.k.what = l.describe()
	l.k.renew = l.Renew
	l.k.init(ctx, cfg)
	// A waited grant was made somewhere between send and reply: when that
	// gap is over a tenth of the TTL, renew now so the deadline counts
	// from a request sent after the grant.
	if cfg.o.Wait > 0 && time.Since(sent) > t/10 {
		if err := l.Renew(ctx); err != nil && !l.s.Valid() {
			l.k.cancel()
			_, _ = l.post(context.Background(), "resign", map[string]interface{}{"lease": id}, false)
			return nil, err
		}
	}
	l.k.start()
	return l, nil
}

// firstOf is the signed term of a reply: "token" (the contract), else
// "fence_token" (as a lock's grant names it).
func firstOf(token, fenceToken string) string {
	if token != "" {
		return token
	}
	return fenceToken
}

// ID is the lease id: keep it secret; renew, proclaim and resign need it.
func (l *Leadership) ID() string { return l.s.id }

// Fence is the term, as a Lock calls its fence.
func (l *Leadership) Fence() int64 { return l.Term }

// FenceLock is the lock name a fenced store checks the term under: the election's name.
func (l *Leadership) FenceLock() string { return l.Election }

// Token is the signed term (picketd with --fence-key-file; "" otherwise):
// a lock token for the election's name.
func (l *Leadership) Token() string { return l.s.Token() }

// TTL is the lease time last granted.
func (l *Leadership) TTL() time.Duration { return l.s.TTL() }

// Value is the value last proclaimed (ok false: none).
func (l *Leadership) Value() (value string, ok bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.value == nil {
		return "", false
	}
	return *l.s.value, true
}

// Deadline is when this client must assume the leadership gone: the
// newest-sent campaign's or renewal's send time + its TTL - a drift margin
// (1% + 2ms); a renewal or proclaim with a shorter TTL moves it back.
func (l *Leadership) Deadline() time.Time { return l.s.Deadline() }

// Remaining is the time left before the local deadline (0 past it).
func (l *Leadership) Remaining() time.Duration { return l.s.Remaining() }

// Valid: not lost, not resigned, and before the local deadline (by this
// process's monotonic clock). Check it before a write, and send the term
// with it all the same.
func (l *Leadership) Valid() bool { return l.k.Valid() }

// Context is cancelled the moment the leadership is lost or resigned, or
// the ctx given to Campaign ends.
func (l *Leadership) Context() context.Context { return l.k.ctx }

// Lost is closed when the leadership is lost (not on Resign).
func (l *Leadership) Lost() <-chan struct{} { return l.k.lostCh }

// Err is nil while leading; then why Context was cancelled: a *LostError
// (matches ErrLeaseLost; Reason "lease_lost" or "deadline"), ErrResigned,
// or the error of the ctx given to Campaign.
func (l *Leadership) Err() error { return l.k.Err() }

// SetFenceHeaders sets the headers a fenced store (examples/fenced-kv)
// checks on a write: Picket-Lock (the election), Picket-Fence (the term)
// and, when signed, Picket-Fence-Token.
func (l *Leadership) SetFenceHeaders(req *http.Request) {
	setFenceHeaders(req, l.Election, l.Term, l.Token())
}

func (l *Leadership) describe() string {
	return fmt.Sprintf("leadership of %q (term %d)", l.Election, l.Term)
}

// String describes the leadership without its lease id.
func (l *Leadership) String() string {
	if l == nil || l.s == nil {
		return "picket.Leadership(empty)"
	}
	return fmt.Sprintf("picket.Leadership(%s, ttl %v, remaining %v)", l.describe(), l.TTL(),
		l.Remaining().Round(time.Millisecond))
}

// GoString is String, so %#v shows no id either.
func (l *Leadership) GoString() string { return l.String() }

type leaderRenewDoc struct {
	Term   int64   `json:"term"`
	TTLMS  int64   `json:"ttl_ms"`
	Value  *string `json:"value"`
	Token  string  `json:"token"`
	FToken string  `json:"fence_token"`
}

// post sends verb; with deadline, never past the local deadline, and
// moves it on success.
func (l *Leadership) post(ctx context.Context, verb string, body map[string]interface{}, deadline bool) (*leaderRenewDoc, error) {
	path, err := electionPath(l.Election, verb)
	if err != nil {
		return nil, err
	}
	var doc leaderRenewDoc
	if !deadline {
		_, err = l.c.call(ctx, "POST", path, body, 0, time.Time{}, &doc)
		return &doc, err
	}
	sent, err := l.c.renewal(ctx, path, body, l.s, l.describe, &doc)
	if err != nil {
		return &doc, err
	}
	if doc.TTLMS < 1 {
		return nil, &TransportError{Op: "POST " + path, Status: 200, Err: errors.New("a reply without its ttl")}
	}
	l.s.renewed(sent, time.Duration(doc.TTLMS)*time.Millisecond, firstOf(doc.Token, doc.FToken), false)
	return &doc, nil
}

// Renew extends the leadership to its TTL from now and moves its local
// deadline (the keeper does this every ttl/3). ErrLeaseLost when it is
// no longer the leader (or past its local deadline: nothing is sent then).
func (l *Leadership) Renew(ctx context.Context) error {
	_, err := l.post(ctx, "renew", map[string]interface{}{"lease": l.s.id, "ttl_ms": ms(l.TTL())}, true)
	return err
}

// Proclaim publishes a new value without losing the term: observers see a
// leader event with the same term. It renews too. ErrLeaseLost when it is
// no longer the leader.
func (l *Leadership) Proclaim(ctx context.Context, value string) error {
	if err := checkValue(value); err != nil {
		return err
	}
	return l.proclaim(ctx, &value)
}

// ClearValue proclaims no value (null), keeping the term.
func (l *Leadership) ClearValue(ctx context.Context) error { return l.proclaim(ctx, nil) }

func (l *Leadership) proclaim(ctx context.Context, value *string) error {
	body := map[string]interface{}{"lease": l.s.id, "value": value} // nil: null
	doc, err := l.post(ctx, "proclaim", body, true)
	if err != nil {
		return err
	}
	l.s.mu.Lock()
	l.s.value = doc.Value
	l.s.mu.Unlock()
	return nil
}

// Resign stops the keeper and steps down: the next waiting candidate
// leads within milliseconds. Context is cancelled (Err: ErrResigned). If
// the leadership had been lost while held, it returns that *LostError
// (matches ErrLeaseLost): the work ran for a while without it. A second
// Resign returns the first's result.
func (l *Leadership) Resign(ctx context.Context) error {
	return l.k.end(ctx, ErrResigned, func(ctx context.Context) error {
		_, err := l.post(ctx, "resign", map[string]interface{}{"lease": l.s.id}, false)
		if err == nil {
			l.s.ended()
		}
		return err
	})
}

// LeaderInfo is the leader of an election (never its lease id).
type LeaderInfo struct {
	Term  int64   `json:"term"`
	Value *string `json:"value"` // nil: none
	Owner *string `json:"owner"`
	Since int64   `json:"since"` // ms since the epoch: when the leadership was granted
	TTLMS int64   `json:"ttl_ms"`
}

// TTL is TTLMS as a Duration.
func (i LeaderInfo) TTL() time.Duration { return time.Duration(i.TTLMS) * time.Millisecond }

// ElectionInfo is Leader's answer (GET /v1/elections/{name}).
type ElectionInfo struct {
	Election   string      `json:"election"`
	Leader     *LeaderInfo `json:"leader"`     // nil: nobody leads
	Term       int64       `json:"term"`       // the last term issued (0: never)
	Candidates int         `json:"candidates"` // campaigns waiting on this picketd
}

// Leader says who leads election name (GET /v1/elections/{name}).
func (c *Client) Leader(ctx context.Context, name string) (*ElectionInfo, error) {
	path, err := electionPath(name, "")
	if err != nil {
		return nil, err
	}
	var doc ElectionInfo
	if _, err := c.call(ctx, "GET", path, nil, 0, time.Time{}, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// ElectionBreak is BreakElection's answer.
type ElectionBreak struct {
	Election string  `json:"election"`
	Broken   bool    `json:"broken"` // false: nobody led (the term moves on all the same)
	Term     int64   `json:"term"`   // the next term's floor
	Owner    *string `json:"owner"`  // the broken leader's
}

// BreakElection ends the leader's lease of election name now and moves
// the term past it (POST /v1/elections/{name}/break; the admin verb under
// --auth-file, loopback only without). Never retried.
func (c *Client) BreakElection(ctx context.Context, name string) (*ElectionBreak, error) {
	if c.err != nil {
		return nil, c.err
	}
	path, err := electionPath(name, "break")
	if err != nil {
		return nil, err
	}
	var doc ElectionBreak
	if _, err := c.once(ctx, "POST", path, []byte("{}"), c.timeout, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// LeaderEvent is one "leader" event of an election's stream: Leader is
// nil when nobody leads now (resigned, expired, broken); Term is the last
// term issued. An event with the previous one's Leader.Term and another
// value is a proclaim. Data is the whole JSON object.
type LeaderEvent struct {
	Type     string          `json:"-"`
	Election string          `json:"election"`
	Leader   *LeaderInfo     `json:"leader"`
	Term     int64           `json:"term"`
	Time     int64           `json:"time"` // ms since the Unix epoch
	Data     json.RawMessage `json:"-"`
}

// Observation is the stream of an election's leader events: Client.Observe.
type Observation struct{ w *Watch }

// Observe follows election name (GET /v1/elections/{name}/observe): Next
// gives first the current state, then one LeaderEvent per change of
// leader or of its value; heartbeats are skipped. The request is made
// here, so a refusal is returned here (ErrPermissionDenied without the
// read verb, ErrTooManyWatchers, a *TransportError). The stream holds a
// connection of its own until Close or ctx ends.
func (c *Client) Observe(ctx context.Context, name string) (*Observation, error) {
	if c.err != nil {
		return nil, c.err
	}
	path, err := electionPath(name, "observe")
	if err != nil {
		return nil, err
	}
	w, err := c.stream(ctx, path, false)
	if err != nil {
		return nil, err
	}
	return &Observation{w: w}, nil
}

// Next is the next leader event. io.EOF after Close; the ctx's error once
// the ctx given to Observe ends; a *TransportError when the stream breaks
// or picketd ends it (observe again: the first event says where the
// election stands).
func (o *Observation) Next() (LeaderEvent, error) {
	for {
		kind, data, err := o.w.next()
		if err != nil {
			return LeaderEvent{}, err
		}
		if kind != "leader" {
			continue
		}
		ev := LeaderEvent{}
		if err := json.Unmarshal(data, &ev); err != nil {
			return LeaderEvent{}, o.w.fail("a leader event that is not the API's JSON")
		}
		ev.Type = kind
		ev.Data = json.RawMessage(data)
		return ev, nil
	}
}

// Close ends the stream; a Next blocked in another goroutine returns io.EOF.
func (o *Observation) Close() error { return o.w.Close() }
