package picket

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestAcquireRenewReleaseInspect(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"), WithToken(""))
	name := uniq("go.")
	l, err := c.Acquire(ctx, name, AcquireOptions{TTL: 5 * time.Second, Owner: "gotest"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != name || l.Fence < 1 || l.Owner != "gotest" || len(l.ID()) != 32 || l.FenceLock != name {
		t.Fatalf("grant %v (owner %q)", l, l.Owner)
	}
	if r := l.Remaining(); r <= 4*time.Second || r > 5*time.Second {
		t.Fatalf("remaining %v", r)
	}
	info, err := c.Inspect(ctx, name)
	if err != nil || !info.Held || info.Fence != l.Fence || info.Owner == nil || *info.Owner != "gotest" {
		t.Fatalf("inspect %+v %v", info, err)
	}
	d0 := l.Deadline()
	time.Sleep(20 * time.Millisecond)
	got, err := c.Renew(ctx, l, 8*time.Second)
	if err != nil || got != 8*time.Second || !l.Deadline().After(d0) || l.TTL() != 8*time.Second {
		t.Fatalf("renew %v %v", got, err)
	}
	if err := c.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.Inspect(ctx, name); info.Held {
		t.Fatal("held after release")
	}
	if l.Valid() {
		t.Fatal("valid after release")
	}
	err = c.Release(ctx, &Lease{Kind: KindLock, Name: name, s: &leaseState{id: l.ID(), deadline: time.Now().Add(time.Hour)}})
	var ae *APIError
	if !errors.Is(err, ErrLeaseLost) || !errors.As(err, &ae) || ae.Status != 409 {
		t.Fatalf("second release: %v", err)
	}
	// a new grant has a higher fence
	l2, err := c.Acquire(ctx, name, AcquireOptions{TTL: time.Second})
	if err != nil || l2.Fence <= l.Fence {
		t.Fatalf("regrant %v %v", l2, err)
	}
	c.Release(ctx, l2)
}

func TestConflictLockHeld(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	l, err := c.Acquire(ctx, name, AcquireOptions{TTL: 10 * time.Second, Owner: "holder-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx, l)
	_, err = c.Acquire(ctx, name, AcquireOptions{TTL: time.Second})
	var ae *APIError
	if !errors.Is(err, ErrLockHeld) || !errors.As(err, &ae) {
		t.Fatalf("want ErrLockHeld, got %v", err)
	}
	if ae.Status != 409 || ae.Holder != "holder-a" || ae.RetryAfter <= 0 || ae.RetryAfter > 10*time.Second {
		t.Fatalf("lock_held fields: %+v", ae)
	}
	if errors.Is(err, ErrTransport) || errors.Is(err, ErrLeaseLost) {
		t.Fatal("contention matched an infrastructure error")
	}
	t.Logf("conflict: %v", err)
}

func TestBlockingAcquireWokenByRelease(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	l, err := c.Acquire(ctx, name, AcquireOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		l   *Lease
		err error
		at  time.Time
	}
	ch := make(chan res, 1)
	go func() {
		g, err := New(env(t, "URL")).Acquire(ctx, name, AcquireOptions{TTL: 5 * time.Second, Wait: 20 * time.Second})
		ch <- res{g, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("granted while held: %v %v", r.l, r.err)
	default:
	}
	released := time.Now()
	if err := c.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || r.l.Fence <= l.Fence {
		t.Fatalf("waiter: %v %v", r.l, r.err)
	}
	t.Logf("MEASURED waiter granted %v after the release", r.at.Sub(released).Round(time.Millisecond))
	if r.at.Sub(released) > 2*time.Second {
		t.Fatalf("waiter woken %v after the release", r.at.Sub(released))
	}
	c.Release(ctx, r.l)
}

func TestBlockingAcquireCancelledByContext(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	l, err := c.Acquire(ctx, name, AcquireOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx, l)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(wctx, name, AcquireOptions{TTL: time.Second, Wait: 30 * time.Second})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	t0 := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
		t.Logf("MEASURED cancelled wait returned %v after cancel", time.Since(t0).Round(time.Millisecond))
	case <-time.After(2 * time.Second):
		t.Fatal("a cancelled context did not end the wait")
	}
	// and a wait that runs out is ErrLockHeld
	_, err = c.Acquire(ctx, name, AcquireOptions{TTL: time.Second, Wait: 300 * time.Millisecond})
	if !errors.Is(err, ErrLockHeld) {
		t.Fatalf("timed-out wait: %v", err)
	}
}

func TestIdempotentRetrySameLeaseID(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name, id := uniq("go."), NewLeaseID()
	a, err := c.Acquire(ctx, name, AcquireOptions{TTL: 5 * time.Second, Lease: id})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, name, AcquireOptions{TTL: 5 * time.Second, Lease: id})
	if err != nil || b.Fence != a.Fence {
		t.Fatalf("same id: %v %v", b, err)
	}
	c.Release(ctx, b)
}

func TestNamesAndLocalValidation(t *testing.T) {
	if LockName("inventory-sync") != "inventory-sync" {
		t.Fatal("a valid name changed")
	}
	// the same mapping as the Python client (proto/README.md)
	for in, want := range map[string]string{
		"":                "h.e3b0c44298fc1c149afbf4c8996fb924",
		"App\\Jobs\\Sync": "h.d6b32bb8b57ccf39a4b0cdf904637972",
		"a/b ✓":           "h.6a65ea27a548cd5648d421577043c918",
	} {
		if got := LockName(in); got != want {
			t.Fatalf("LockName(%q) = %q, want %q", in, got, want)
		}
	}
	if LockName(".") == "." || LockName("..") == ".." {
		t.Fatal(". and .. must map")
	}
	ctx := bg(t)
	c := New(env(t, "URL"))
	// a mapped name works at the server
	l, err := c.Acquire(ctx, "go/with/slashes ✓", AcquireOptions{TTL: time.Second})
	if err != nil || l.Name != LockName("go/with/slashes ✓") {
		t.Fatalf("mapped acquire: %v %v", l, err)
	}
	c.Release(ctx, l)
	dead := New("http://127.0.0.1:1", WithRetries(0))
	for what, err := range map[string]error{
		"ttl<0":       func() error { _, e := dead.Acquire(ctx, "x", AcquireOptions{TTL: -time.Second}); return e }(),
		"ttl<1ms":     func() error { _, e := dead.Acquire(ctx, "x", AcquireOptions{TTL: time.Microsecond}); return e }(),
		"lock ttl 0":  func() error { _, e := dead.Lock(ctx, "x", 0); return e }(),
		"wait<0":      func() error { _, e := dead.Acquire(ctx, "x", AcquireOptions{Wait: -1}); return e }(),
		"bad lease":   func() error { _, e := dead.Acquire(ctx, "x", AcquireOptions{Lease: "not-hex"}); return e }(),
		"limit 0":     func() error { _, e := dead.AcquirePermit(ctx, "x", 0, AcquireOptions{}); return e }(),
		"long sem":    func() error { _, e := dead.AcquirePermit(ctx, strings.Repeat("s", 190), 2, AcquireOptions{}); return e }(),
		"long rwlock": func() error { _, e := dead.AcquireRead(ctx, strings.Repeat("r", 199), AcquireOptions{}); return e }(),
		"bad url":     func() error { _, e := New("ftp://x").Inspect(ctx, "x"); return e }(),
		"list limit":  func() error { _, _, e := dead.List(ctx, "", 0, ""); return e }(),
	} {
		var ae *APIError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &ae) || ae.Status != 0 {
			t.Errorf("%s: want a local ErrInvalidArgument, got %v", what, err)
		}
	}
	if New("ftp://x").Err() == nil || New("http://127.0.0.1:1").Err() != nil {
		t.Fatal("Client.Err")
	}
}

func TestInvalidArgumentFromServer(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	_, err := c.Acquire(ctx, uniq("go."), AcquireOptions{TTL: 2 * time.Hour}) // over --max-ttl-ms
	var ae *APIError
	if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("want 400 invalid_argument, got %v", err)
	}
	_, err = c.Acquire(ctx, uniq("go."), AcquireOptions{TTL: time.Second, Owner: strings.Repeat("o", 500)})
	if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("long owner: %v", err)
	}
}

func TestNotFoundThroughPrefix(t *testing.T) {
	c := New(env(t, "URL") + "/nothing-here")
	_, err := c.Inspect(bg(t), "x")
	var ae *APIError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("want 404, got %v", err)
	}
}

func TestTransportErrors(t *testing.T) {
	c := New("http://127.0.0.1:1", WithTimeout(time.Second), WithRetries(1))
	t0 := time.Now()
	_, err := c.Inspect(bg(t), "x")
	var te *TransportError
	if !errors.Is(err, ErrTransport) || !errors.As(err, &te) || errors.Is(err, ErrLockHeld) {
		t.Fatalf("want a transport error, got %v", err)
	}
	if time.Since(t0) > 5*time.Second {
		t.Fatal("slow")
	}
}

func TestTimeoutOnAStoppedServer(t *testing.T) {
	pid := envPID(t)
	c := New(env(t, "URL"), WithTimeout(300*time.Millisecond), WithRetries(0))
	if _, err := c.Inspect(bg(t), "x"); err != nil {
		t.Fatal(err)
	}
	stop(t, pid)
	defer syscall.Kill(pid, syscall.SIGCONT)
	t0 := time.Now()
	_, err := c.Inspect(bg(t), "x")
	syscall.Kill(pid, syscall.SIGCONT)
	if !errors.Is(err, ErrTransport) {
		t.Fatalf("want a transport error, got %v", err)
	}
	if d := time.Since(t0); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("timed out after %v", d)
	}
}

func TestStoreUnavailableRetriedThenReturned(t *testing.T) {
	c := New(env(t, "NOREDIS_URL"))
	t0 := time.Now()
	_, err := c.Acquire(bg(t), uniq("go."), AcquireOptions{TTL: 5 * time.Second})
	var ae *APIError
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, ErrUnavailable) || !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("want 503 store_unavailable, got %v", err)
	}
	if time.Since(t0) < 500*time.Millisecond {
		t.Fatalf("not retried with backoff first (%v)", time.Since(t0))
	}
	c0 := New(env(t, "NOREDIS_URL"), WithRetries(0))
	t0 = time.Now()
	if _, err := c0.Acquire(bg(t), uniq("go."), AcquireOptions{}); !errors.Is(err, ErrStoreUnavailable) || time.Since(t0) > 400*time.Millisecond {
		t.Fatalf("retries 0: %v after %v", err, time.Since(t0))
	}
}

func TestConcurrentUse(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	var wg sync.WaitGroup
	var mu sync.Mutex
	fences := map[int64]bool{}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctx, name, AcquireOptions{TTL: 5 * time.Second, Wait: 20 * time.Second})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			fences[l.Fence] = true
			mu.Unlock()
			if err := c.Release(ctx, l); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(fences) != 8 {
		t.Fatalf("fences %v", fences)
	}
}

// A renewal with a shorter TTL: picketd ends the lease at about its send
// time + the new TTL, so the local deadline comes down with it.
func TestShorterRenewalMovesTheDeadlineBack(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	l, err := c.Acquire(ctx, uniq("go."), AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r := l.Remaining(); r <= 9*time.Second {
		t.Fatalf("remaining %v", r)
	}
	before := time.Now()
	if _, err := c.Renew(ctx, l, time.Second); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if d := l.Deadline(); d.Before(before.Add(time.Second-driftMargin(time.Second))) || d.After(after.Add(time.Second-driftMargin(time.Second))) || l.Remaining() > time.Second {
		t.Fatalf("deadline %v after a 1 s renewal sent in [%v, %v] (remaining %v)", d, before, after, l.Remaining())
	}
	if _, err := c.Renew(ctx, l, 10*time.Second); err != nil || l.Remaining() <= 9*time.Second {
		t.Fatalf("renewed to 10 s: %v, remaining %v", err, l.Remaining())
	}
	if err := c.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
}
