package picket

import (
	"context"
	"errors"
	"sync"
	"time"
)

// keeper is what a Lock and a Leadership share: the holder's Context, the
// keeper goroutine that renews the lease every ttl/3 (a failed renewal
// retried until the local deadline), the loss (once: Err, Lost, the
// OnLost callback) and the once-only end (Release, Resign). A Lock adds
// its event watch on top; the lease's kind only shows in renew and what.
type keeper struct {
	s          *leaseState
	what       string                          // the lease as a LostError names it
	renew      func(ctx context.Context) error // one renewal of s
	renewEvery time.Duration                   // 0: ttl/3
	onLost     func(error)

	ctx    context.Context
	cancel context.CancelFunc
	kctx   context.Context // the keeper's requests: ended by the end or a loss
	kstop  context.CancelFunc
	lostCh chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	err    error
	endMu  sync.Mutex
	ended  bool
	endErr error
}

// init makes the contexts: ctx (the holder's) is a child of parent; the
// keeper's requests have their own, ended by the end or a loss.
func (k *keeper) init(parent context.Context, cfg lockConfig) {
	k.renewEvery, k.onLost = cfg.renewEvery, cfg.onLost
	k.lostCh = make(chan struct{})
	k.ctx, k.cancel = context.WithCancel(parent)
	k.kctx, k.kstop = context.WithCancel(context.Background())
}

// start runs the renewing goroutine.
func (k *keeper) start() {
	k.wg.Add(1)
	go k.keep()
}

// Err: see Lock.Err and Leadership.Err.
func (k *keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	return k.ctx.Err()
}

// Valid: neither lost nor ended, and before the local deadline.
func (k *keeper) Valid() bool {
	k.mu.Lock()
	e := k.err
	k.mu.Unlock()
	return e == nil && k.s.Valid()
}

func (k *keeper) lose(reason string, cause error) { k.loseBy(reason, cause, nil) }

// loseBy ends the holding as lost (the first loss only): a lease cut by
// max_hold is lost to max_hold whatever ended it.
func (k *keeper) loseBy(reason string, cause error, ev *Event) {
	if k.s.Capped() && (reason == "deadline" || reason == "expired" || reason == "lease_lost") {
		reason = "max_hold"
	}
	k.mu.Lock()
	if k.err != nil {
		k.mu.Unlock()
		return
	}
	k.err = &LostError{What: k.what, Reason: reason, Err: cause, Event: ev}
	err := k.err
	k.mu.Unlock()
	close(k.lostCh)
	k.cancel()
	k.kstop()
	if k.onLost != nil {
		go k.onLost(err) // its own goroutine: it may call Release or Resign, which wait for the keeper
	}
}

func (k *keeper) every() time.Duration {
	if k.renewEvery != 0 {
		return k.renewEvery
	}
	return k.s.TTL() / 3
}

func (k *keeper) keep() {
	defer k.wg.Done()
	s := k.s
	next := time.Now().Add(k.every())
	var last error
	for {
		deadline := s.Deadline()
		now := time.Now()
		if !now.Before(deadline) {
			k.lose("deadline", last)
			return
		}
		wake := next
		if deadline.Before(wake) {
			wake = deadline
		}
		t := time.NewTimer(wake.Sub(now))
		select {
		case <-k.kctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		now = time.Now()
		if !now.Before(s.Deadline()) {
			k.lose("deadline", last)
			return
		}
		if now.Before(next) {
			continue
		}
		if s.Capped() {
			// max_hold cut the last grant or renewal: no renewal can carry
			// the lease further; it ends at its deadline.
			next = s.Deadline()
			continue
		}
		err := k.renew(k.kctx)
		if k.kctx.Err() != nil {
			return
		}
		if err == nil {
			last = nil
			next = time.Now().Add(k.every())
			continue
		}
		last = err
		if !s.Valid() {
			k.lose("deadline", err)
			return
		}
		if errors.Is(err, ErrLeaseLost) {
			k.lose("lease_lost", err)
			return
		}
		// transport, 503 (already retried), a quota: again soon, until the
		// deadline says the lease is gone.
		pause := s.Remaining() / 4
		if pause > 250*time.Millisecond {
			pause = 250 * time.Millisecond
		}
		if pause < 10*time.Millisecond {
			pause = 10 * time.Millisecond
		}
		next = time.Now().Add(pause)
	}
}

// end is Release and Resign: once only (a second call returns the first's
// result), it stops the keeper, cancels Context (Err: endErr unless lost
// before) and gives the lease up with giveUp. A loss while held is its
// result: the work ran for a while without the lease.
func (k *keeper) end(ctx context.Context, endErr error, giveUp func(ctx context.Context) error) error {
	k.endMu.Lock()
	defer k.endMu.Unlock()
	if k.ended {
		return k.endErr
	}
	k.ended = true
	k.mu.Lock()
	lost := k.err
	if lost == nil {
		k.err = endErr
	}
	k.mu.Unlock()
	k.kstop()
	k.wg.Wait()
	k.cancel()
	err := giveUp(ctx)
	switch {
	case lost != nil:
		k.endErr = lost
	case err != nil && !k.s.Valid() && errors.Is(err, ErrLeaseLost):
		k.endErr = &LostError{What: k.what, Reason: "deadline", Err: err}
	default:
		k.endErr = err
	}
	return k.endErr
}
