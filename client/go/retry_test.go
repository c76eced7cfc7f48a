package picket

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// An acquire whose reply is lost (the connection drops after picketd
// granted) is retried with the same lease id: the retry gets the same
// grant and fence, and the lock is not held by a lease nobody knows.
// The proxy forwards to the real picketd and drops the first acquire's reply.
func TestRetryAfterADroppedReplyGetsTheSameGrant(t *testing.T) {
	ctx := bg(t)
	target := env(t, "URL")
	var mu sync.Mutex
	acquires := 0
	var firstReply []byte
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer resp.Body.Close()
		reply, _ := io.ReadAll(resp.Body)
		mu.Lock()
		drop := false
		if strings.HasSuffix(r.URL.Path, "/acquire") {
			acquires++
			if acquires == 1 {
				drop, firstReply = true, reply
			}
		}
		mu.Unlock()
		if drop { // picketd granted; the client never hears of it
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		w.Write(reply)
	}))
	defer proxy.Close()
	c := New(proxy.URL)
	name := uniq("go.")
	l, err := c.Acquire(ctx, name, AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Fence int64  `json:"fence"`
		Lease string `json:"lease"`
	}
	mu.Lock()
	defer mu.Unlock()
	json.Unmarshal(firstReply, &first)
	if acquires != 2 || first.Fence != l.Fence || first.Lease != l.ID() {
		t.Fatalf("acquires %d, first grant fence %d, retry's %d", acquires, first.Fence, l.Fence)
	}
	if err := New(target).Release(context.Background(), l); err != nil {
		t.Fatalf("the retried grant does not hold the lock: %v", err)
	}
}
