package picket

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func kvPut(t *testing.T, kv, key, value string, set func(*http.Request)) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", kv+"/kv/"+key, strings.NewReader(value))
	set(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

// Signed fences: the fence_token goes to fenced-kv (same --fence-key-file)
// through SetFenceHeaders; a forged or stale fence is refused.
func TestSignedFenceThroughFencedKV(t *testing.T) {
	ctx := bg(t)
	kv := env(t, "KV_URL")
	c := New(env(t, "SIGNED_URL"))
	name := uniq("go.")
	key := uniq("k")
	l, err := c.Lock(ctx, name, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.FenceToken(), "v2.lock.") {
		t.Fatalf("fence token %q", l.FenceToken())
	}
	if st, body := kvPut(t, kv, key, "one", l.SetFenceHeaders); st != 200 {
		t.Fatalf("fenced write: %d %s", st, body)
	}
	// a fence made up without its signature: 403
	st, _ := kvPut(t, kv, key, "forged", func(r *http.Request) {
		r.Header.Set("Picket-Lock", name)
		r.Header.Set("Picket-Fence", strconv.FormatInt(l.Fence()+1000, 10))
	})
	if st != 403 {
		t.Fatalf("forged fence: %d", st)
	}
	old := l.Lease()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := c.Lock(ctx, name, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if st, body := kvPut(t, kv, key, "two", l2.SetFenceHeaders); st != 200 {
		t.Fatalf("new holder's write: %d %s", st, body)
	}
	st, body := kvPut(t, kv, key, "stale", old.SetFenceHeaders)
	if st != 409 {
		t.Fatalf("stale fence: %d %s", st, body)
	}
	resp, err := http.Get(kv + "/kv/" + key)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Value string `json:"value"`
		Fence int64  `json:"fence"`
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if doc.Value != "two" || doc.Fence != l2.Fence() {
		t.Fatalf("stored %+v", doc)
	}
	// the token is renewed with the lease
	if _, err := c.Renew(ctx, l2.Lease(), 0); err != nil || l2.FenceToken() == "" {
		t.Fatalf("renew: %v", err)
	}
}

func TestUnsignedHasNoToken(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	l, err := c.Acquire(ctx, uniq("go."), AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx, l)
	req, _ := http.NewRequest("PUT", "http://x/kv/k", nil)
	req.Header.Set("Picket-Fence-Token", "left over")
	l.SetFenceHeaders(req)
	if l.FenceToken() != "" || req.Header.Get("Picket-Fence-Token") != "" ||
		req.Header.Get("Picket-Fence") != strconv.FormatInt(l.Fence, 10) || req.Header.Get("Picket-Lock") != l.Name {
		t.Fatalf("headers %v", req.Header)
	}
}

func TestWatchEvents(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	w, err := c.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ev, err := w.Next()
	if err != nil || ev.Type != "state" || ev.Held {
		t.Fatalf("first event %+v %v", ev, err)
	}
	l, err := c.Acquire(ctx, name, AcquireOptions{TTL: 5 * time.Second, Owner: "w"})
	if err != nil {
		t.Fatal(err)
	}
	c.Renew(ctx, l, 0)
	c.Release(ctx, l)
	var types []string
	for len(types) < 3 {
		ev, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "heartbeat" {
			continue
		}
		types = append(types, ev.Type)
		if ev.Fence != l.Fence || ev.Name != name {
			t.Fatalf("event %+v", ev)
		}
		if ev.Type == "granted" && (ev.Owner != "w" || ev.Ends(l.Fence) || !ev.Ends(l.Fence-1) || ev.Ends(l.Fence+1)) {
			t.Fatalf("granted %+v", ev)
		}
	}
	if strings.Join(types, ",") != "granted,renewed,released" {
		t.Fatalf("events %v", types)
	}
	// Close from another goroutine ends a blocked Next at once
	go func() { time.Sleep(100 * time.Millisecond); w.Close() }()
	t0 := time.Now()
	if _, err := w.Next(); err != io.EOF || time.Since(t0) > 2*time.Second {
		t.Fatalf("after Close: %v after %v", err, time.Since(t0))
	}
	// a ctx that ends ends the stream
	cctx, cancel := context.WithCancel(ctx)
	w2, err := c.Watch(cctx, name)
	if err != nil {
		t.Fatal(err)
	}
	w2.Next()
	cancel()
	if _, err := w2.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	// refusals
	if _, err := New(env(t, "URL")+"/nothing").Watch(ctx, name); !errors.Is(err, ErrEventsUnsupported) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("404: %v", err)
	}
	if _, err := New(env(t, "AUTH_URL"), WithToken(env(t, "T_NOREAD"))).Watch(ctx, "go.x"); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("no read verb: %v", err)
	}
}
