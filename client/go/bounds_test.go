package picket

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Not picketd: a hostile or broken server, for the client's bounds (reply
// sizes, SSE line lengths, silence, replies that are not the API's).
func hostile(t *testing.T, h http.HandlerFunc) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for _, c := range chunks {
		fmt.Fprint(w, c)
		w.(http.Flusher).Flush()
	}
}

func TestBoundedReplies(t *testing.T) {
	ctx := context.Background()
	url := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/huge"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"lock":"`+strings.Repeat("x", 2<<20)+`"}`)
		case strings.HasSuffix(r.URL.Path, "/html"):
			w.WriteHeader(502)
			fmt.Fprint(w, "<html>bad gateway</html>")
		default:
			w.WriteHeader(200)
			fmt.Fprint(w, "not json")
		}
	})
	c := New(url, WithRetries(0))
	for _, name := range []string{"huge", "html", "other"} {
		_, err := c.Inspect(ctx, name)
		var te *TransportError
		if !errors.As(err, &te) || te.Status == 0 || (name == "huge") != strings.Contains(err.Error(), "over 1048576 bytes") {
			t.Fatalf("%s: want a transport error with the status, got %v", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

func TestEventStreamBounds(t *testing.T) {
	ctx := context.Background()
	url := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "long"):
			sse(w, ": "+strings.Repeat("y", 9000)+"\n", "event: state\ndata: {\"held\":false}\n\n")
		case strings.Contains(r.URL.Path, "big"):
			sse(w, "event: state\ndata: {\"held\":false,\"x\":\""+strings.Repeat("y", 5000)+"\"}\ndata: \""+strings.Repeat("z", 5000)+"\"\n\n")
		case strings.Contains(r.URL.Path, "framing"):
			sse(w, ": a comment\r\nevent: granted\r\ndata: {\"fence\":7,\r\ndata: \"owner\":\"o\"}\r\nid: 3\r\n\r\n",
				"event: broken\ndata: [1]\n\n")
		case strings.Contains(r.URL.Path, "silent"):
			sse(w, "event: state\ndata: {\"held\":false}\n\n")
			<-r.Context().Done()
		default:
			sse(w, "event: state\ndata: {\"held\":false}\n\n") // then ends
		}
	})
	c := New(url)
	w, err := c.Watch(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(); !errors.Is(err, ErrTransport) || !strings.Contains(err.Error(), "over 8192 bytes") {
		t.Fatalf("long line: %v", err)
	}
	w, _ = c.Watch(ctx, "big")
	if _, err := w.Next(); !errors.Is(err, ErrTransport) || !strings.Contains(err.Error(), "an event over 8192 bytes") {
		t.Fatalf("big event: %v", err)
	}
	w, _ = c.Watch(ctx, "framing")
	ev, err := w.Next()
	if err != nil || ev.Type != "granted" || ev.Fence != 7 || ev.Owner != "o" {
		t.Fatalf("framing: %+v %v", ev, err)
	}
	if _, err := w.Next(); !errors.Is(err, ErrTransport) {
		t.Fatalf("data not an object: %v", err)
	}
	w, _ = c.Watch(ctx, "ends")
	w.Next()
	if _, err := w.Next(); !errors.Is(err, ErrTransport) || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("ended: %v", err)
	}
	w, _ = c.Watch(ctx, "silent")
	w.idle = 200 * time.Millisecond
	w.timer.Reset(w.idle)
	w.Next()
	t0 := time.Now()
	done := make(chan error, 1)
	go func() { _, err := w.Next(); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTransport) || !strings.Contains(err.Error(), "heartbeat") {
			t.Fatalf("silent: %v after %v", err, time.Since(t0))
		}
	case <-time.After(3 * time.Second):
		w.Close()
		t.Fatal("a silent stream was not given up")
	}
}
