package picket

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// After a watch fails (picketd restarting, a quota of streams), the next
// try waits this long, doubling up to the cap; renewals go on meanwhile.
const (
	watchRetry    = 100 * time.Millisecond
	watchRetryMax = 10 * time.Second
)

// LockOption configures Lock, Semaphore, ReadLock and WriteLock.
type LockOption func(*lockConfig)

type lockConfig struct {
	o          AcquireOptions
	renewEvery time.Duration
	events     bool
	value      *string // Campaign's WithValue
	onLost     func(error)
}

// WithAcquireOptions: the grant's options (Wait, Owner, Lease, LockDelay,
// MaxHold); their TTL is the ttl given to Lock.
func WithAcquireOptions(o AcquireOptions) LockOption {
	return func(c *lockConfig) { ttl := c.o.TTL; c.o = o; c.o.TTL = ttl }
}

// WithWait waits up to d while it is held (a cancelled ctx ends the wait).
func WithWait(d time.Duration) LockOption { return func(c *lockConfig) { c.o.Wait = d } }

// WithMaxHold caps the holding: no renewal carries the lease past grant +
// d; at the cap Context is cancelled and Err matches ErrMaxHold.
func WithMaxHold(d time.Duration) LockOption { return func(c *lockConfig) { c.o.MaxHold = d } }

// WithLockDelay: if the lease expires without a release, nobody gets the
// lock for d after the expiry.
func WithLockDelay(d time.Duration) LockOption { return func(c *lockConfig) { c.o.LockDelay = d } }

// WithRenewEvery renews every d instead of every ttl/3.
func WithRenewEvery(d time.Duration) LockOption { return func(c *lockConfig) { c.renewEvery = d } }

// WithEvents turns the keeper's event watch on or off for this lock
// (default: the client's WithWatch, on). Only locks have events.
func WithEvents(on bool) LockOption { return func(c *lockConfig) { c.events = on } }

// WithOnLost calls fn(err) once, in a goroutine of its own, when the
// lease is lost (err as Lock.Err). Not called on Release.
func WithOnLost(fn func(error)) LockOption { return func(c *lockConfig) { c.onLost = fn } }

// Lock is a held lease kept renewed by a keeper goroutine (every ttl/3; a
// failed renewal is retried until the lease's local deadline), and, for a
// lock, watched through its events so that a break, an expiry or another's
// grant ends it at once. Context is cancelled the moment the lease is
// lost, its hold cap reached, or it is released; Err says which.
type Lock struct {
	c     *Client
	lease *Lease
	k     keeper

	mu       sync.Mutex // the watch's state
	watching bool
	watchErr error
}

// Lock takes lock name for ttl and keeps it: the three lines are
//
//	l, err := c.Lock(ctx, "inventory-sync", 30*time.Second)
//	defer l.Release(context.Background())
//	work(l.Context())
//
// Fails as Acquire does (ErrLockHeld, ...). Context() is a child of ctx:
// cancelling ctx cancels it too, but does not release the lock.
func (c *Client) Lock(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.hold(ctx, KindLock, name, ttl, opts, func(o AcquireOptions) (*Lease, error) {
		return c.Acquire(ctx, name, o)
	})
}

// Semaphore takes one permit of the counting semaphore name (limit
// permits) and keeps it as Lock does (without events: semaphores have
// none). The Lease's FenceLock is the permit's "NAME:permit:I".
func (c *Client) Semaphore(ctx context.Context, name string, limit int, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.hold(ctx, KindPermit, name, ttl, opts, func(o AcquireOptions) (*Lease, error) {
		return c.AcquirePermit(ctx, name, limit, o)
	})
}

// ReadLock takes a read lease of the read/write lock name and keeps it.
func (c *Client) ReadLock(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.hold(ctx, KindRWLock, name, ttl, opts, func(o AcquireOptions) (*Lease, error) {
		return c.AcquireRead(ctx, name, o)
	})
}

// WriteLock takes the write lease of the read/write lock name and keeps it.
func (c *Client) WriteLock(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.hold(ctx, KindRWLock, name, ttl, opts, func(o AcquireOptions) (*Lease, error) {
		return c.AcquireWrite(ctx, name, o)
	})
}

func (c *Client) hold(ctx context.Context, kind Kind, name string, ttl time.Duration, opts []LockOption, acquire func(AcquireOptions) (*Lease, error)) (*Lock, error) {
	if c.err != nil {
		return nil, c.err
	}
	if ttl <= 0 || ms(ttl) < 1 {
		return nil, invalid("the ttl must be 1ms or more, not %v", ttl)
	}
	cfg := lockConfig{events: c.watch}
	cfg.o.TTL = ttl
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.renewEvery < 0 {
		return nil, invalid("renew every must not be negative, not %v", cfg.renewEvery)
	}
	lease, err := acquire(cfg.o)
	if err != nil {
		return nil, err
	}
	l := &Lock{c: c, lease: lease}
	l.k.s = lease.s
	l.k.what = fmt.Sprintf("%s (fence %d)", lease.describe(), lease.Fence)
	l.k.renew = func(ctx context.Context) error {
		_, err := c.Renew(ctx, lease, ttl)
		return err
	}
	l.k.init(ctx, cfg)
	l.k.start()
	if kind == KindLock && cfg.events {
		l.k.wg.Add(1)
		go l.watch()
	}
	return l, nil
}

// Lease is the grant (its fence, its deadline, ...).
func (l *Lock) Lease() *Lease { return l.lease }

// Fence is the fencing token to send with every write to fenced storage.
func (l *Lock) Fence() int64 { return l.lease.Fence }

// FenceToken is the signed fence ("" unless picketd signs fences).
func (l *Lock) FenceToken() string { return l.lease.FenceToken() }

// FenceLock is the lock name a fenced store checks the fence under.
func (l *Lock) FenceLock() string { return l.lease.FenceLock }

// SetFenceHeaders sets Picket-Lock, Picket-Fence (and Picket-Fence-Token
// when signed) on req, for a fenced store.
func (l *Lock) SetFenceHeaders(req *http.Request) { l.lease.SetFenceHeaders(req) }

// Context is cancelled the moment the lease is lost (a renewal refused, no
// renewal before the local deadline, an event saying it ended), the hold
// cap is reached, the lock is released, or the ctx given to Lock ends.
func (l *Lock) Context() context.Context { return l.k.ctx }

// Lost is closed when the lease is lost (not on Release).
func (l *Lock) Lost() <-chan struct{} { return l.k.lostCh }

// Err is nil while the lock is held; then why Context was cancelled: a
// *LostError (matches ErrLeaseLost; ErrMaxHold at the hold cap),
// ErrReleased, or the error of the ctx given to Lock.
func (l *Lock) Err() error { return l.k.Err() }

// Valid: not lost, not released, and before the local deadline.
func (l *Lock) Valid() bool { return l.k.Valid() }

// Watching says an event stream has told where the lock stands (the
// keeper hears of a loss at once); WatchErr is the refusal after which
// the keeper renews only (a picketd without events, a token without the
// read verb), else nil.
func (l *Lock) Watching() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watching
}

// WatchErr: see Watching.
func (l *Lock) WatchErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watchErr
}

// String describes the lock without its lease id.
func (l *Lock) String() string { return "picket.Lock(" + l.lease.String() + ")" }

func (l *Lock) watch() {
	defer l.k.wg.Done()
	fence := l.lease.Fence
	retry := watchRetry
	for l.k.kctx.Err() == nil {
		w, err := l.c.Watch(l.k.kctx, l.lease.Name)
		if err != nil {
			if l.k.kctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnauthenticated) ||
				errors.Is(err, ErrPermissionDenied) || errors.Is(err, ErrInvalidArgument) {
				l.mu.Lock()
				l.watchErr = err
				l.mu.Unlock()
				return
			}
		} else {
			for {
				ev, err := w.Next()
				if err != nil {
					break // the stream broke: open another
				}
				if ev.Type == "state" {
					l.mu.Lock()
					l.watching = true
					l.mu.Unlock()
					retry = watchRetry
				}
				if ev.Ends(fence) {
					w.Close()
					l.k.loseBy(ev.Type, nil, &ev)
					return
				}
			}
			w.Close()
			l.mu.Lock()
			l.watching = false
			l.mu.Unlock()
		}
		t := time.NewTimer(retry)
		select {
		case <-l.k.kctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if retry *= 2; retry > watchRetryMax {
			retry = watchRetryMax
		}
	}
}

// Release stops the keeper and gives the lease up; Context is cancelled
// (Err: ErrReleased). If the lease had been lost while held, it returns
// that *LostError (matches ErrLeaseLost): the work ran for a while without
// the lock. A second Release returns the first's result.
func (l *Lock) Release(ctx context.Context) error {
	return l.k.end(ctx, ErrReleased, func(ctx context.Context) error { return l.c.Release(ctx, l.lease) })
}
