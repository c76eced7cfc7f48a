package picket

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestSemaphorePermits(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	a, err := c.AcquirePermit(ctx, name, 2, AcquireOptions{TTL: 5 * time.Second, Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.AcquirePermit(ctx, name, 2, AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if a.Kind != KindPermit || a.Permit == b.Permit || a.Limit != 2 || a.FenceLock != fmt.Sprintf("%s:permit:%d", name, a.Permit) {
		t.Fatalf("permits %v %v %q", a, b, a.FenceLock)
	}
	_, err = c.AcquirePermit(ctx, name, 2, AcquireOptions{TTL: time.Second})
	var ae *APIError
	if !errors.Is(err, ErrSemaphoreFull) || !errors.Is(err, ErrLockHeld) || !errors.As(err, &ae) || ae.Status != 409 {
		t.Fatalf("full: %v", err)
	}
	_, err = c.AcquirePermit(ctx, name, 3, AcquireOptions{TTL: time.Second})
	if !errors.Is(err, ErrLimitMismatch) || !errors.As(err, &ae) || ae.Limit != 2 {
		t.Fatalf("mismatch: %v", err)
	}
	info, err := c.InspectSemaphore(ctx, name)
	if err != nil || info.Held != 2 || info.Limit != 2 || len(info.Permits) != 2 {
		t.Fatalf("inspect %+v %v", info, err)
	}
	if _, err := c.Renew(ctx, a, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	// the kept form, whose keeper renews a 600ms permit past several TTLs
	s, err := c.Semaphore(ctx, name, 2, 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if !s.Valid() || s.FenceLock() != fmt.Sprintf("%s:permit:%d", name, s.Lease().Permit) {
		t.Fatalf("kept permit: %v %v", s.Err(), s.FenceLock())
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Release(ctx, b)
}

func TestRWLock(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	w, err := c.AcquireWrite(ctx, name, AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if w.Kind != KindRWLock || w.Mode != "write" || w.FenceLock != name+":rw" {
		t.Fatalf("write %v %q", w, w.FenceLock)
	}
	if _, err := c.AcquireRead(ctx, name, AcquireOptions{TTL: time.Second}); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("read under a writer: %v", err)
	}
	c.Release(ctx, w)
	r1, err := c.ReadLock(ctx, name, 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.AcquireRead(ctx, name, AcquireOptions{TTL: 5 * time.Second})
	if err != nil || r2.Fence != w.Fence || r1.Fence() != w.Fence {
		t.Fatalf("readers: %v %v", r2, err)
	}
	info, err := c.InspectRWLock(ctx, name)
	if err != nil || info.Readers != 2 || info.Writer != nil {
		t.Fatalf("inspect %+v %v", info, err)
	}
	time.Sleep(1500 * time.Millisecond)
	if !r1.Valid() {
		t.Fatalf("read lease not kept: %v", r1.Err())
	}
	r1.Release(ctx)
	c.Release(ctx, r2)
	w2, err := c.WriteLock(ctx, name, time.Second, WithWait(5*time.Second))
	if err != nil || w2.Fence() <= w.Fence {
		t.Fatalf("second writer: %v", err)
	}
	w2.Release(ctx)
}
