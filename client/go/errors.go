package picket

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, one per error code of picketd's API (the ErrorCode enum
// of proto/openapi.yaml). An error this package returns matches them with
// errors.Is:
//
//	if errors.Is(err, picket.ErrLockHeld) { ... }
//
// and errors.As gives the *APIError (Status, Code, Message, RetryAfter,
// Holder, Limit) or the *TransportError. A code this client does not know
// yet is an *APIError that matches no sentinel but the class ones below.
var (
	ErrInvalidArgument      = newCode("invalid_argument")       // 400: a bad name, body, lease id or value (or refused locally, Status 0)
	ErrNotFound             = newCode("not_found")              // 404: no such path
	ErrMethodNotAllowed     = newCode("method_not_allowed")     // 405
	ErrLockHeld             = newCode("lock_held")              // 409: another lease holds the lock (Holder, RetryAfter)
	ErrLockDelay            = newCode("lock_delay")             // 409: an expired lease's lock-delay runs (also matches ErrLockHeld)
	ErrSemaphoreFull        = newCode("semaphore_full")         // 409: every permit is held (also matches ErrLockHeld)
	ErrTooManyReaders       = newCode("too_many_readers")       // 409: the rwlock has --max-readers read leases (also matches ErrLockHeld)
	ErrLimitMismatch        = newCode("limit_mismatch")         // 409: the live permits use another limit (Limit)
	ErrLeaseLost            = newCode("lease_lost")             // 409: this lease no longer holds the lock (or leadership)
	ErrLeaderExists         = newCode("leader_exists")          // 409: another candidate leads the election (Holder, RetryAfter)
	ErrUnauthenticated      = newCode("unauthenticated")        // 401: no token, or an unknown one
	ErrPermissionDenied     = newCode("permission_denied")      // 403: the token may not do this to this name
	ErrBodyTooLarge         = newCode("body_too_large")         // 413
	ErrLengthRequired       = newCode("length_required")        // 411
	ErrUnsupportedMediaType = newCode("unsupported_media_type") // 415: a body not sent as application/json
	ErrForbiddenOrigin      = newCode("forbidden_origin")       // 403: a call from a web page on another origin
	ErrMisdirectedRequest   = newCode("misdirected_request")    // 421: a Host picketd does not answer as
	ErrTooManyLeases        = newCode("too_many_leases")        // 429: the token holds its max_leases
	ErrRateLimited          = newCode("rate_limited")           // 429: too many acquires a second (RetryAfter)
	ErrInternal             = newCode("internal_error")         // 500
	ErrStoreError           = newCode("store_error")            // 502: Redis answered with an error
	ErrStoreUnavailable     = newCode("store_unavailable")      // 503: Redis unreachable or timed out
	ErrStoreMisconfigured   = newCode("store_misconfigured")    // 503: Redis's policy makes fences unsafe
	ErrStoreFull            = newCode("store_full")             // 503: Redis at maxmemory
	ErrNotReplicated        = newCode("not_replicated")         // 503: the grant did not reach the replicas asked for
	ErrStoreTampered        = newCode("store_tampered")         // 503: another writer changed this lock's fence state
	ErrTooManyWaiters       = newCode("too_many_waiters")       // 429/503: too many waiting acquires
	ErrTooManyWatchers      = newCode("too_many_watchers")      // 429/503: too many event streams
	ErrTooManyConnections   = newCode("too_many_connections")   // 429: the token holds its --max-connections-per-token
	ErrShuttingDown         = newCode("shutting_down")          // 503: picketd is stopping
)

// Other names for two of the codes, as HTTP calls them.
var (
	ErrUnauthorized = ErrUnauthenticated  // 401
	ErrForbidden    = ErrPermissionDenied // 403
)

// Classes of errors, matched with errors.Is as well.
var (
	// ErrUnavailable: picketd or its store cannot serve now (the 503
	// codes but too_many_waiters/too_many_watchers). Retried a few times
	// before it is returned.
	ErrUnavailable = errors.New("picket: unavailable")
	// ErrQuotaExceeded: a quota of the caller (too_many_leases,
	// rate_limited, too_many_waiters, too_many_watchers,
	// too_many_connections); never retried.
	ErrQuotaExceeded = errors.New("picket: quota exceeded")
	// ErrTransport: no usable reply (connect, TLS, timeout, a dropped
	// connection, a reply that is not the API's JSON): infrastructure, not
	// contention. Every *TransportError matches it.
	ErrTransport = errors.New("picket: transport error")
	// ErrMaxHold: a Lock's Err when its lease ended at its hold cap
	// (MaxHold); it matches ErrLeaseLost too.
	ErrMaxHold = errors.New("picket: the lease reached its hold cap (max_hold)")
	// ErrReleased: a Lock's Err after Release.
	ErrReleased = errors.New("picket: the lock was released")
	// ErrResigned: a Leadership's Err after Resign.
	ErrResigned = errors.New("picket: the leadership was resigned")
	// ErrEventsUnsupported: GET .../events answered 404 (a picketd without
	// lock events); it matches ErrNotFound too.
	ErrEventsUnsupported = errors.New("picket: this picketd has no lock events")
)

type codeError struct{ code string }

func (e *codeError) Error() string { return "picket: " + e.code }

var codes = map[string]*codeError{}

func newCode(code string) error {
	e := &codeError{code}
	codes[code] = e
	return e
}

// Codes is every API error code this client has a sentinel for.
func Codes() []string {
	out := make([]string, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	return out
}

// CodeError is the sentinel of an API error code (nil when unknown).
func CodeError(code string) error {
	if e, ok := codes[code]; ok {
		return e
	}
	return nil
}

// APIError is an error answered by picketd (Status is the HTTP status), or
// bad input found by the client before any request (Status 0, Code
// invalid_argument). It never holds a token or a lease id.
type APIError struct {
	Status     int           // HTTP status; 0: found locally, nothing was sent
	Code       string        // the API's error code, "lock_held"
	Message    string        // the server's message, for people
	RetryAfter time.Duration // lock_held, leader_exists, lock_delay, semaphore_full, rate_limited: when to try again (0: not said)
	Holder     string        // lock_held: the holder's owner, leader_exists: the leader's ("" when none)
	Limit      int           // limit_mismatch: the live permits' limit
	Op         string        // the request, "POST /v1/locks/x/acquire" ("" when local)
}

func (e *APIError) Error() string {
	s := "picket: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	if e.Status != 0 {
		s += fmt.Sprintf("%d ", e.Status)
	}
	s += e.Code
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Holder != "" {
		s += fmt.Sprintf(" (held by %q)", e.Holder)
	}
	return s
}

// Is matches the sentinel of e's code, and the sentinels of its classes.
func (e *APIError) Is(target error) bool {
	if s, ok := codes[e.Code]; ok && s == target {
		return true
	}
	switch target {
	case ErrLockHeld:
		return e.Code == "lock_delay" || e.Code == "semaphore_full" || e.Code == "too_many_readers"
	case ErrUnavailable:
		return unavailable(e.Code)
	case ErrQuotaExceeded:
		switch e.Code {
		case "too_many_leases", "rate_limited", "too_many_waiters", "too_many_watchers",
			"too_many_connections":
			return true
		}
	}
	return false
}

func unavailable(code string) bool {
	switch code {
	case "store_unavailable", "store_misconfigured", "store_full", "not_replicated",
		"store_tampered", "shutting_down":
		return true
	}
	return false
}

func invalid(format string, args ...interface{}) error {
	return &APIError{Code: "invalid_argument", Message: fmt.Sprintf(format, args...)}
}

// TransportError: no usable reply from picketd. Status is the HTTP status
// when a reply came without an API error body (0 otherwise); Err the cause.
type TransportError struct {
	Op     string // "POST /v1/locks/x/renew"
	Status int
	Err    error
}

func (e *TransportError) Error() string {
	s := "picket: " + e.Op + ": "
	if e.Status != 0 {
		s += fmt.Sprintf("HTTP %d: ", e.Status)
	}
	if e.Err != nil {
		s += e.Err.Error()
	} else {
		s += "no usable reply"
	}
	return s
}

func (e *TransportError) Unwrap() error { return e.Err }

func (e *TransportError) Is(target error) bool { return target == ErrTransport }

// LostError is a Lock's Err once its lease is gone: Reason says how
// ("lease_lost": a renewal was refused; "deadline": no renewal succeeded
// before the local deadline; "max_hold": the hold cap; "broken",
// "expired", "released", "granted": an event of the lock said so). It
// matches ErrLeaseLost, and ErrMaxHold when Reason is "max_hold"; Err is
// the last renewal's error, if any.
type LostError struct {
	What   string // "lease of \"x\" (fence 7)"
	Reason string
	Err    error
	Event  *Event // the event that said so (nil when none did)
}

func (e *LostError) Error() string {
	s := "picket: " + e.What + " lost: " + e.Reason
	if e.Event != nil {
		s += fmt.Sprintf(" (event fence %d)", e.Event.Fence)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *LostError) Unwrap() error { return e.Err }

func (e *LostError) Is(target error) bool {
	return target == ErrLeaseLost || (target == ErrMaxHold && e.Reason == "max_hold")
}
