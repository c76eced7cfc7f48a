// Package picket is a client of picketd, picket's lock service: leases on
// named locks, counting semaphores and read/write locks, each grant
// carrying a fence that fenced storage checks (proto/openapi.yaml is the
// contract). Standard library only.
//
//	c := picket.New("http://127.0.0.1:7070", picket.WithToken(token))
//	l, err := c.Lock(ctx, "inventory-sync", 30*time.Second)
//	if err != nil { ... }
//	defer l.Release(context.Background())
//	work(l.Context(), l.Fence()) // l.Context() ends the moment the lease is lost
package picket

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const (
	maxBody           = 1 << 20 // bytes of a reply read at most
	maxSemaphoreName  = 180
	maxRWLockName     = 197
	listMax           = 1000
	defaultTTL        = 30 * time.Second
	defaultTimeout    = 10 * time.Second
	defaultRetries    = 3
	defaultPicketdURL = "http://127.0.0.1:7070"
	userAgent         = "picket-go/0.1"
)

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{0,200}$`)
	leaseRE  = regexp.MustCompile(`^[0-9a-f]{32}$`)
	// retry pauses: capped exponential, each with jitter (x0.5..1.5)
	retryDelays = []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 800 * time.Millisecond}
)

// LockName is the picket lock name of a resource: a valid lock name (1..200
// characters of [A-Za-z0-9._:-], not "." or "..") as it is; any other
// string (a path, a type name with "::", UTF-8, "") maps to "h." and the
// first 32 hex digits of the SHA-256 of its bytes, as every picket client
// does, so workers in any language meet on one lock.
func LockName(resource string) string {
	if nameRE.MatchString(resource) && resource != "." && resource != ".." {
		return resource
	}
	sum := sha256.Sum256([]byte(resource))
	return "h." + hex.EncodeToString(sum[:])[:32]
}

// SemaphoreName is LockName(resource), which must come to at most 180
// characters (a mapped name always does).
func SemaphoreName(resource string) (string, error) {
	n := LockName(resource)
	if len(n) > maxSemaphoreName {
		return "", invalid("a semaphore name is at most %d characters, not %d", maxSemaphoreName, len(n))
	}
	return n, nil
}

// RWLockName is LockName(resource), which must come to at most 197
// characters (a mapped name always does).
func RWLockName(resource string) (string, error) {
	n := LockName(resource)
	if len(n) > maxRWLockName {
		return "", invalid("a read/write lock name is at most %d characters, not %d", maxRWLockName, len(n))
	}
	return n, nil
}

// Client talks to one picketd. Safe for concurrent use.
type Client struct {
	base    *url.URL
	token   string
	timeout time.Duration
	retries int
	owner   string
	watch   bool
	hc      *http.Client
	caFile  string
	err     error // a bad URL or option: every call returns it
}

// Option configures New.
type Option func(*Client)

// WithToken sets the bearer token (default: $PICKET_TOKEN). It goes in the
// Authorization header only, never in a URL or a message.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithCAFile trusts the PEM certificates in path instead of the system's
// CAs, for an https:// picketd.
func WithCAFile(path string) Option { return func(c *Client) { c.caFile = path } }

// WithTimeout bounds each request (default 10s); a waiting acquire gets
// its wait on top.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetries sets how often a request is sent again after a transport
// error or a 503 (default 3; 0: never). Acquires are retried with the same
// lease id, so a retry after a lost reply gets the same grant and fence.
// Break and 429s are never retried.
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// WithHTTPClient uses hc for requests (its Transport: proxies, TLS,
// connection pooling). WithCAFile, if given too, is ignored: configure
// hc's TLS yourself. Its Timeout should be 0: the client bounds every
// request by its own.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithOwner sets the owner recorded with every grant that does not give
// its own (shown to operators; default none).
func WithOwner(owner string) Option { return func(c *Client) { c.owner = owner } }

// WithWatch turns the event watch of Lock's keeper on (the default) or off
// (renewals alone then find a loss, at the latest one renewal interval
// after it).
func WithWatch(on bool) Option { return func(c *Client) { c.watch = on } }

// New makes a client of the picketd at rawURL (http://host:port or
// https://host:port; a path prefix is kept; "" is http://127.0.0.1:7070).
// It does not connect. A bad URL or CA file is returned by Err and by
// every call.
func New(rawURL string, opts ...Option) *Client {
	c := &Client{timeout: defaultTimeout, retries: defaultRetries, token: os.Getenv("PICKET_TOKEN"), watch: true}
	for _, o := range opts {
		o(c)
	}
	if rawURL == "" {
		rawURL = defaultPicketdURL
	}
	u, err := url.Parse(rawURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		c.err = invalid("bad picketd url: want http://host[:port] or https://host[:port]")
	case u.User != nil:
		c.err = invalid("the picketd url must not carry user info: use WithToken")
	case u.RawQuery != "" || u.Fragment != "":
		c.err = invalid("the picketd url must not have a query or fragment")
	case c.timeout <= 0:
		c.err = invalid("the timeout must be positive")
	case c.retries < 0:
		c.err = invalid("retries must be 0 or more")
	}
	if c.err != nil {
		return c
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c.base = u
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 8
		tr.Proxy = nil
		if c.caFile != "" {
			if u.Scheme != "https" {
				c.err = invalid("a CA file given for an http:// url")
				return c
			}
			pem, err := os.ReadFile(c.caFile)
			if err != nil {
				c.err = invalid("cannot read the CA file: %v", err)
				return c
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				c.err = invalid("the CA file has no PEM certificate")
				return c
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		c.hc = &http.Client{Transport: tr}
	}
	return c
}

// Err is the error of a bad URL or option given to New (nil when fine).
func (c *Client) Err() error { return c.err }

// URL is picketd's URL as given (without a trailing slash).
func (c *Client) URL() string {
	if c.base == nil {
		return ""
	}
	return c.base.String()
}

// String shows the URL, never the token.
func (c *Client) String() string {
	tok := "no token"
	if c.token != "" {
		tok = "token set"
	}
	return fmt.Sprintf("picket.Client(%s, %s)", c.URL(), tok)
}

// CloseIdleConnections closes the kept-alive connections not in use.
func (c *Client) CloseIdleConnections() {
	if c.hc != nil {
		c.hc.CloseIdleConnections()
	}
}

// ---- requests -------------------------------------------------------------

func (c *Client) newRequest(ctx context.Context, method, path string, body []byte, accept string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// transportErr wraps a net/http error without its URL (which names the
// host only, but keep messages short and uniform) .
func transportErr(op string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &TransportError{Op: op, Err: err}
}

// once sends one request; doc gets the reply's JSON. sent is when it was sent.
func (c *Client) once(ctx context.Context, method, path string, body []byte, timeout time.Duration, doc interface{}) (time.Time, error) {
	op := method + " " + strings.SplitN(path, "?", 2)[0]
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := c.newRequest(rctx, method, path, body, "application/json")
	if err != nil {
		return time.Time{}, transportErr(op, err)
	}
	sent := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return sent, ctx.Err()
		}
		return sent, transportErr(op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return sent, ctx.Err()
		}
		return sent, transportErr(op, err)
	}
	if len(raw) > maxBody {
		return sent, &TransportError{Op: op, Status: resp.StatusCode, Err: fmt.Errorf("a reply over %d bytes", maxBody)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, doc); err != nil {
			return sent, &TransportError{Op: op, Status: resp.StatusCode, Err: errors.New("a reply that is not the API's JSON")}
		}
		return sent, nil
	}
	return sent, replyError(op, resp.StatusCode, raw, resp.Header)
}

type errorBody struct {
	Error *struct {
		Code         string  `json:"code"`
		Message      string  `json:"message"`
		RetryAfterMS *int64  `json:"retry_after_ms"`
		Owner        *string `json:"owner"`
		Limit        int     `json:"limit"`
	} `json:"error"`
}

func replyError(op string, status int, raw []byte, h http.Header) error {
	var eb errorBody
	if json.Unmarshal(raw, &eb) != nil || eb.Error == nil || eb.Error.Code == "" {
		return &TransportError{Op: op, Status: status, Err: errors.New("a reply without an API error body")}
	}
	e := &APIError{Op: op, Status: status, Code: eb.Error.Code, Message: eb.Error.Message, Limit: eb.Error.Limit}
	if eb.Error.RetryAfterMS != nil {
		e.RetryAfter = time.Duration(*eb.Error.RetryAfterMS) * time.Millisecond
	} else if s := h.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	if eb.Error.Owner != nil {
		e.Holder = *eb.Error.Owner
	}
	return e
}

func retryable(err error) bool {
	return errors.Is(err, ErrTransport) || errors.Is(err, ErrUnavailable)
}

// call sends a request, again on a transport error or a 503, with capped
// exponential backoff and jitter, never past deadline (zero: none).
func (c *Client) call(ctx context.Context, method, path string, body interface{}, extra time.Duration, deadline time.Time, doc interface{}) (time.Time, error) {
	if c.err != nil {
		return time.Time{}, c.err
	}
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return time.Time{}, invalid("cannot encode the request: %v", err)
		}
	}
	for attempt := 0; ; attempt++ {
		timeout := c.timeout + extra
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return time.Time{}, &TransportError{Op: method + " " + path, Err: errors.New("the lease's local deadline passed")}
			}
			if left < timeout {
				timeout = left
			}
		}
		sent, err := c.once(ctx, method, path, raw, timeout, doc)
		if err == nil || !retryable(err) || attempt >= c.retries || ctx.Err() != nil {
			return sent, err
		}
		d := retryDelays[len(retryDelays)-1]
		if attempt < len(retryDelays) {
			d = retryDelays[attempt]
		}
		d = time.Duration(float64(d) * (0.5 + mrand.Float64()))
		if !deadline.IsZero() && time.Now().Add(d).After(deadline) {
			return sent, err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return sent, ctx.Err()
		case <-t.C:
		}
	}
}

func lockPath(name, verb string) string {
	p := "/v1/locks/" + url.PathEscape(LockName(name))
	if verb != "" {
		p += "/" + verb
	}
	return p
}

func kindPath(kind Kind, name, verb string) (string, error) {
	var p string
	switch kind {
	case KindPermit:
		n, err := SemaphoreName(name)
		if err != nil {
			return "", err
		}
		p = "/v1/semaphores/" + url.PathEscape(n)
	case KindRWLock:
		n, err := RWLockName(name)
		if err != nil {
			return "", err
		}
		p = "/v1/rwlocks/" + url.PathEscape(n)
	default:
		p = "/v1/locks/" + url.PathEscape(LockName(name))
	}
	if verb != "" {
		p += "/" + verb
	}
	return p, nil
}

// ---- the API ---------------------------------------------------------------

// AcquireOptions of Acquire, AcquirePermit and AcquireRead/AcquireWrite.
// Durations are sent in whole milliseconds.
type AcquireOptions struct {
	TTL       time.Duration // lease time; 0: 30s; under 1ms: ErrInvalidArgument
	Wait      time.Duration // wait this long while it is held (0: answer at once)
	Lease     string        // your own lease id (32 lowercase hex); "": a fresh random one
	Owner     string        // shown to operators; "": the client's WithOwner
	LockDelay time.Duration // after an expiry without a release, nobody gets it for this long
	MaxHold   time.Duration // no renewal carries the lease past grant + MaxHold (0: no cap)
}

// NewLeaseID is a fresh random lease id (32 lowercase hex digits).
func NewLeaseID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("picket: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func ms(d time.Duration) int64 { return int64((d + time.Millisecond/2) / time.Millisecond) }

type grantDoc struct {
	Lock       string  `json:"lock"`
	Semaphore  string  `json:"semaphore"`
	RWLock     string  `json:"rwlock"`
	Mode       string  `json:"mode"`
	Lease      string  `json:"lease"`
	Fence      int64   `json:"fence"`
	TTLMS      int64   `json:"ttl_ms"`
	Owner      *string `json:"owner"`
	FenceToken string  `json:"fence_token"`
	Permit     int     `json:"permit"`
	Limit      int     `json:"limit"`
	FenceLock  string  `json:"fence_lock"`
}

// Acquire takes lock name for o.TTL, waiting up to o.Wait while it is
// held (a cancelled ctx ends the wait). It fails with ErrLockHeld (an
// *APIError with Holder and RetryAfter) if the lock stays held, and
// ErrLockDelay (which matches ErrLockHeld too) while an expired lease's
// lock-delay runs. The Lease is not renewed: see Lock for that.
func (c *Client) Acquire(ctx context.Context, name string, o AcquireOptions) (*Lease, error) {
	return c.grant(ctx, KindLock, name, map[string]interface{}{}, o)
}

// AcquirePermit takes one permit of the counting semaphore name of limit
// permits (1..4096; every holder must give the same limit while permits
// are live). The Lease has Permit (the slot), Limit and FenceLock
// ("NAME:permit:I", the lock name a fenced store checks its fence under).
// ErrSemaphoreFull (matches ErrLockHeld too) when every permit stays held,
// ErrLimitMismatch (APIError.Limit) when the live permits use another limit.
func (c *Client) AcquirePermit(ctx context.Context, name string, limit int, o AcquireOptions) (*Lease, error) {
	if limit < 1 {
		return nil, invalid("a semaphore's limit is 1 or more, not %d", limit)
	}
	return c.grant(ctx, KindPermit, name, map[string]interface{}{"limit": limit}, o)
}

// AcquireRead takes a read lease of the read/write lock name (shared with
// other readers); its fence is the last write's, FenceLock "NAME:rw".
func (c *Client) AcquireRead(ctx context.Context, name string, o AcquireOptions) (*Lease, error) {
	return c.grant(ctx, KindRWLock, name, map[string]interface{}{"mode": "read"}, o)
}

// AcquireWrite takes the write lease of the read/write lock name (alone:
// no reader, no other writer); a waiting writer keeps new readers out.
func (c *Client) AcquireWrite(ctx context.Context, name string, o AcquireOptions) (*Lease, error) {
	return c.grant(ctx, KindRWLock, name, map[string]interface{}{"mode": "write"}, o)
}

func (c *Client) grant(ctx context.Context, kind Kind, name string, body map[string]interface{}, o AcquireOptions) (*Lease, error) {
	if c.err != nil {
		return nil, c.err
	}
	path, err := kindPath(kind, name, "acquire")
	if err != nil {
		return nil, err
	}
	ttl := o.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	switch {
	case ms(ttl) < 1:
		return nil, invalid("the ttl must be 1ms or more, not %v", o.TTL)
	case o.Wait < 0:
		return nil, invalid("the wait must not be negative, not %v", o.Wait)
	case o.LockDelay < 0:
		return nil, invalid("the lock delay must not be negative, not %v", o.LockDelay)
	case o.MaxHold < 0:
		return nil, invalid("max hold must not be negative, not %v", o.MaxHold)
	}
	id, err := leaseIDOf(o.Lease)
	if err != nil {
		return nil, err
	}
	body["ttl_ms"] = ms(ttl)
	body["lease"] = id
	if w := ms(o.Wait); w > 0 {
		body["wait_ms"] = w
	}
	if d := ms(o.LockDelay); d > 0 {
		body["lock_delay_ms"] = d
	}
	if h := ms(o.MaxHold); h > 0 {
		body["max_hold_ms"] = h
	}
	if owner := c.ownerOf(o.Owner); owner != "" {
		body["owner"] = owner
	}
	var doc grantDoc
	sent, err := c.call(ctx, "POST", path, body, o.Wait, time.Time{}, &doc)
	if err != nil {
		return nil, err
	}
	if doc.Lease != id || doc.TTLMS < 1 || doc.Fence < 1 {
		return nil, &TransportError{Op: "POST " + path, Status: 200, Err: errors.New("a grant without its lease, fence or ttl")}
	}
	l := &Lease{Kind: kind, Fence: doc.Fence, Permit: -1}
	switch kind {
	case KindPermit:
		l.Name, l.Permit, l.Limit, l.FenceLock = doc.Semaphore, doc.Permit, doc.Limit, doc.FenceLock
	case KindRWLock:
		l.Name, l.Mode, l.FenceLock = doc.RWLock, doc.Mode, doc.FenceLock
	default:
		l.Name, l.FenceLock = doc.Lock, doc.Lock
	}
	if doc.Owner != nil {
		l.Owner = *doc.Owner
	}
	t := time.Duration(doc.TTLMS) * time.Millisecond
	l.s = newLeaseState(id, sent, t, doc.FenceToken)
	l.s.capped, l.s.maxHold = doc.TTLMS < ms(ttl), o.MaxHold > 0
	// A waited grant was made somewhere between send and reply: when that
	// gap is over a tenth of the TTL, renew now so the deadline counts
	// from a request sent after the grant.
	if o.Wait > 0 && time.Since(sent) > t/10 {
		if _, err := c.Renew(ctx, l, 0); err != nil && !l.Valid() {
			_ = c.Release(context.Background(), l)
			return nil, err
		}
	}
	return l, nil
}

// leaseIDOf is the lease id a grant or campaign asks for: id, checked,
// or a new one when id is "".
func leaseIDOf(id string) (string, error) {
	if id == "" {
		return NewLeaseID(), nil
	}
	if !leaseRE.MatchString(id) {
		return "", invalid("a lease id is 32 lowercase hex digits")
	}
	return id, nil
}

// ownerOf is the owner label a grant or campaign sends: owner, else the
// client's WithOwner ("": none).
func (c *Client) ownerOf(owner string) string {
	if owner == "" {
		return c.owner
	}
	return owner
}

// driftMargin is what a lease's local deadline keeps back from its TTL:
// 1% plus 2ms, as libpicket does; the server's expiry can only be later.
func driftMargin(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

type renewDoc struct {
	Fence      int64  `json:"fence"`
	TTLMS      int64  `json:"ttl_ms"`
	FenceToken string `json:"fence_token"`
}

// Renew extends the lease to ttl from now (0: its TTL) and moves its local
// deadline. ErrLeaseLost if it no longer holds the lock (or if its local
// deadline has passed: nothing is sent then). Never retried past the
// local deadline. Returns the TTL granted (max_hold may cut it; then
// Lease.Capped says so).
func (c *Client) Renew(ctx context.Context, l *Lease, ttl time.Duration) (time.Duration, error) {
	if c.err != nil {
		return 0, c.err
	}
	if l == nil || l.s == nil {
		return 0, invalid("renew of a nil lease")
	}
	if ttl == 0 {
		ttl = l.TTL()
	}
	if ms(ttl) < 1 {
		return 0, invalid("the ttl must be 1ms or more, not %v", ttl)
	}
	path, err := kindPath(l.Kind, l.Name, "renew")
	if err != nil {
		return 0, err
	}
	var doc renewDoc
	sent, err := c.renewal(ctx, path, map[string]interface{}{"lease": l.s.id, "ttl_ms": ms(ttl)}, l.s, l.String, &doc)
	if err != nil {
		return 0, err
	}
	t := time.Duration(doc.TTLMS) * time.Millisecond
	l.s.renewed(sent, t, doc.FenceToken, doc.TTLMS < ms(ttl))
	return t, nil
}

// renewal POSTs a request that renews the lease in s (a renew; an
// election's proclaim): never past its local deadline (then nothing is
// sent and the error is lease_lost, naming what()), which also bounds the
// retries. The caller records the reply with s.renewed.
func (c *Client) renewal(ctx context.Context, path string, body map[string]interface{}, s *leaseState, what func() string, doc interface{}) (time.Time, error) {
	deadline := s.Deadline()
	if !time.Now().Before(deadline) {
		return time.Time{}, &APIError{Code: "lease_lost", Message: what() + " is past its local deadline"}
	}
	return c.call(ctx, "POST", path, body, 0, deadline, doc)
}

// Release gives the lease up (ErrLeaseLost if it had already ended).
func (c *Client) Release(ctx context.Context, l *Lease) error {
	if c.err != nil {
		return c.err
	}
	if l == nil || l.s == nil {
		return invalid("release of a nil lease")
	}
	path, err := kindPath(l.Kind, l.Name, "release")
	if err != nil {
		return err
	}
	var doc map[string]interface{}
	_, err = c.call(ctx, "POST", path, map[string]interface{}{"lease": l.s.id}, 0, time.Time{}, &doc)
	if err == nil {
		l.s.ended()
	}
	return err
}

// LockInfo is Inspect's answer (GET /v1/locks/{name}); never a lease id.
type LockInfo struct {
	Lock       string  `json:"lock"`
	Held       bool    `json:"held"`
	Fence      int64   `json:"fence"` // the last issued (0: never)
	TTLMS      int64   `json:"ttl_ms"`
	Owner      *string `json:"owner"`
	AcquiredAt *int64  `json:"acquired_at"` // ms since the epoch (Redis's clock), nil when not held
	Renewals   *int64  `json:"renewals"`
	Waiters    int     `json:"waiters"`
}

// TTL is TTLMS as a duration.
func (i LockInfo) TTL() time.Duration { return time.Duration(i.TTLMS) * time.Millisecond }

// Inspect tells whether lock name is held, by which owner, for how much
// longer, and its last fence.
func (c *Client) Inspect(ctx context.Context, name string) (*LockInfo, error) {
	var doc LockInfo
	if _, err := c.call(ctx, "GET", lockPath(name, ""), nil, 0, time.Time{}, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// PermitInfo is one live permit of SemaphoreInfo.
type PermitInfo struct {
	Permit    int     `json:"permit"`
	Fence     int64   `json:"fence"`
	Owner     *string `json:"owner"`
	FenceLock string  `json:"fence_lock"`
	TTLMS     int64   `json:"ttl_ms"`
}

// SemaphoreInfo is InspectSemaphore's answer.
type SemaphoreInfo struct {
	Semaphore string       `json:"semaphore"`
	Limit     int          `json:"limit"` // 0 while no permit is live
	Held      int          `json:"held"`
	Permits   []PermitInfo `json:"permits"`
	Waiters   int          `json:"waiters"`
}

// InspectSemaphore tells a semaphore's live permits (never a lease id).
func (c *Client) InspectSemaphore(ctx context.Context, name string) (*SemaphoreInfo, error) {
	path, err := kindPath(KindPermit, name, "")
	if err != nil {
		return nil, err
	}
	var doc SemaphoreInfo
	if _, err := c.call(ctx, "GET", path, nil, 0, time.Time{}, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// RWHolder is a writer or a reader of RWLockInfo.
type RWHolder struct {
	TTLMS int64   `json:"ttl_ms"`
	Owner *string `json:"owner"`
}

// RWLockInfo is InspectRWLock's answer.
type RWLockInfo struct {
	RWLock         string     `json:"rwlock"`
	Fence          int64      `json:"fence"`
	FenceLock      string     `json:"fence_lock"`
	Writer         *RWHolder  `json:"writer"`
	Readers        int        `json:"readers"`
	ReadLeases     []RWHolder `json:"read_leases"`
	WritersWaiting int        `json:"writers_waiting"`
	Waiters        int        `json:"waiters"`
}

// InspectRWLock tells a read/write lock's writer and readers.
func (c *Client) InspectRWLock(ctx context.Context, name string) (*RWLockInfo, error) {
	path, err := kindPath(KindRWLock, name, "")
	if err != nil {
		return nil, err
	}
	var doc RWLockInfo
	if _, err := c.call(ctx, "GET", path, nil, 0, time.Time{}, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// BreakResult is Break's answer.
type BreakResult struct {
	Lock   string  `json:"lock"`
	Broken bool    `json:"broken"` // false when nothing was held (the fence moves on all the same)
	Fence  int64   `json:"fence"`  // the counter after the break
	Owner  *string `json:"owner"`  // the broken lease's
}

// Break ends lock name's lease now (POST /v1/locks/{name}/break, the admin
// verb under --auth-file; loopback callers only without it); the holder's
// renew and release get ErrLeaseLost. Never retried: a repeat could break
// the next holder's grant.
func (c *Client) Break(ctx context.Context, name string) (*BreakResult, error) {
	if c.err != nil {
		return nil, c.err
	}
	var doc BreakResult
	if _, err := c.once(ctx, "POST", lockPath(name, "break"), []byte("{}"), c.timeout, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// WhoAmI is what this client's token may do.
type WhoAmI struct {
	Token    *string  `json:"token"` // its name in --auth-file; nil without one
	Verbs    []string `json:"verbs"`
	Prefixes []string `json:"prefixes"`
}

// WhoAmI asks picketd what this client's token may do (GET /v1/whoami).
func (c *Client) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	var doc WhoAmI
	if _, err := c.call(ctx, "GET", "/v1/whoami", nil, 0, time.Time{}, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// ListEntry is one held name of List.
type ListEntry struct {
	Kind       string  `json:"kind"` // lock, semaphore or rwlock
	Name       string  `json:"name"`
	Holders    int     `json:"holders"`
	Owner      *string `json:"owner"`
	Fence      *int64  `json:"fence"`
	TTLMS      int64   `json:"ttl_ms"`
	AcquiredAt *int64  `json:"acquired_at"`
	Renewals   *int64  `json:"renewals"`
	Waiters    int     `json:"waiters"`
	Limit      int     `json:"limit"`
}

// List is one page of the held names under prefix (GET /v1/locks), at
// most limit (1..1000), from cursor ("" the start). The returned cursor
// is "" at the end. Needs the list verb under --auth-file.
func (c *Client) List(ctx context.Context, prefix string, limit int, cursor string) ([]ListEntry, string, error) {
	if !prefixRE.MatchString(prefix) {
		return nil, "", invalid("a prefix is up to 200 characters of [A-Za-z0-9._:-]")
	}
	if limit < 1 || limit > listMax {
		return nil, "", invalid("limit must be from 1 to %d, not %d", listMax, limit)
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var doc struct {
		Locks  []ListEntry `json:"locks"`
		Cursor *string     `json:"cursor"`
	}
	if _, err := c.call(ctx, "GET", "/v1/locks?"+q.Encode(), nil, 0, time.Time{}, &doc); err != nil {
		return nil, "", err
	}
	if len(doc.Locks) > limit {
		return nil, "", &TransportError{Op: "GET /v1/locks", Status: 200, Err: errors.New("a page over its limit")}
	}
	next := ""
	if doc.Cursor != nil {
		next = *doc.Cursor
	}
	return doc.Locks, next, nil
}
