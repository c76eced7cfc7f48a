package picket

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// LineMax bounds one line of an event stream (its end not counted),
	// and the data of one event: a broken or hostile server cannot make
	// this process buffer without limit.
	LineMax      = 8192
	errorBodyMax = 65536
	readerSize   = LineMax + 2
	// DefaultWatchIdle: a stream silent this long is dead (picketd sends a
	// heartbeat after 15s of quiet by default).
	DefaultWatchIdle = 60 * time.Second
)

// Event is one event of a lock's stream (docs/events.md). Type: "state",
// "granted", "renewed", "released", "expired", "broken" or "heartbeat".
// Fields an event does not carry are zero; Data is the whole JSON object.
type Event struct {
	Type      string          `json:"-"`
	Name      string          `json:"name"`
	Held      bool            `json:"held"`       // state
	Fence     int64           `json:"fence"`      //
	NextFence int64           `json:"next_fence"` // broken
	Owner     string          `json:"owner"`      // state, granted
	TTLMS     int64           `json:"ttl_ms"`     // state, granted, renewed
	By        string          `json:"by"`         // broken
	Time      int64           `json:"time"`       // ms since the Unix epoch
	Data      json.RawMessage `json:"-"`
}

// Ends says this event means the lease granted with fence is gone: an
// expired, broken or released event with that fence, a granted or state
// event with a later (higher) fence, or a state with nothing held. Only
// for events that come after that grant. A grant after ours always has a
// higher fence, so a granted event with a lower one is an earlier grant's
// that reached the stream late (picketd shares one subscription per lock
// name, and a stream opened just after a grant can be handed events still
// in flight): not a loss.
func (e Event) Ends(fence int64) bool {
	switch e.Type {
	case "expired", "broken", "released":
		return e.Fence == fence
	case "granted":
		return e.Fence > fence
	case "state":
		return !e.Held || e.Fence > fence
	}
	return false
}

type eventsUnsupportedError struct{ *APIError }

func (e *eventsUnsupportedError) Is(t error) bool {
	return t == ErrEventsUnsupported || e.APIError.Is(t)
}
func (e *eventsUnsupportedError) Unwrap() error { return e.APIError }

// Watch is a stream of a lock's events: Client.Watch.
type Watch struct {
	op      string
	parent  context.Context
	cancel  context.CancelFunc
	body    io.ReadCloser
	r       *bufio.Reader
	idle    time.Duration
	timer   *time.Timer
	idled   int32
	mu      sync.Mutex
	closed  bool
	dataMax int
}

// Watch follows lock name's events (GET /v1/locks/{name}/events): the
// first is a "state" (where the lock stands), then "granted", "renewed",
// "released", "expired", "broken" as they happen, and "heartbeat" after a
// quiet spell. The request is made here, so a refusal is returned here:
// ErrEventsUnsupported (matches ErrNotFound: a picketd without events),
// ErrUnauthenticated, ErrPermissionDenied (the read verb),
// ErrTooManyWatchers, or a *TransportError. The stream holds a connection
// of its own until Close or ctx ends.
func (c *Client) Watch(ctx context.Context, name string) (*Watch, error) {
	if c.err != nil {
		return nil, c.err
	}
	return c.stream(ctx, lockPath(name, "events"), true)
}

// stream opens an event stream (GET path); lockEvents: a 404 is
// ErrEventsUnsupported (a picketd without lock events).
func (c *Client) stream(ctx context.Context, path string, lockEvents bool) (*Watch, error) {
	op := "GET " + path
	wctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(wctx, "GET", path, nil, "text/event-stream")
	if err != nil {
		cancel()
		return nil, transportErr(op, err)
	}
	var timedOut int32
	t := time.AfterFunc(c.timeout, func() { atomic.StoreInt32(&timedOut, 1); cancel() })
	resp, err := c.hc.Do(req)
	t.Stop()
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, transportErr(op, err)
	}
	if atomic.LoadInt32(&timedOut) == 1 {
		resp.Body.Close()
		cancel()
		return nil, &TransportError{Op: op, Err: errors.New("no reply in time")}
	}
	ctype := resp.Header.Get("Content-Type")
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(ctype, "text/event-stream") {
		w := &Watch{op: op, parent: ctx, cancel: cancel, body: resp.Body, idle: DefaultWatchIdle,
			r: bufio.NewReaderSize(resp.Body, readerSize), dataMax: LineMax}
		w.timer = time.AfterFunc(w.idle, func() { atomic.StoreInt32(&w.idled, 1); cancel() })
		return w, nil
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyMax))
	resp.Body.Close()
	cancel()
	if resp.StatusCode == http.StatusOK {
		return nil, &TransportError{Op: op, Status: 200, Err: errors.New("a reply that is not an event stream")}
	}
	err = replyError(op, resp.StatusCode, raw, resp.Header)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == "not_found" && lockEvents {
		return nil, &eventsUnsupportedError{ae}
	}
	return nil, err
}

// Close ends the watch; a Next blocked in another goroutine returns io.EOF.
func (w *Watch) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.timer.Stop()
	w.cancel()
	return w.body.Close()
}

func (w *Watch) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

func (w *Watch) fail(format string, args ...interface{}) error {
	w.Close()
	return &TransportError{Op: w.op, Err: fmt.Errorf(format, args...)}
}

func (w *Watch) line() ([]byte, error) {
	raw, err := w.r.ReadSlice('\n')
	if err != nil {
		switch {
		case w.isClosed():
			return nil, io.EOF
		case w.parent.Err() != nil:
			w.Close()
			return nil, w.parent.Err()
		case atomic.LoadInt32(&w.idled) == 1:
			return nil, w.fail("nothing (not even a heartbeat) for %v", w.idle)
		case err == bufio.ErrBufferFull:
			return nil, w.fail("a line over %d bytes", LineMax)
		case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, w.fail("picketd ended the event stream")
		}
		return nil, w.fail("%v", err)
	}
	w.timer.Reset(w.idle)
	raw = bytes.TrimSuffix(raw[:len(raw)-1], []byte("\r"))
	if len(raw) > LineMax {
		return nil, w.fail("a line over %d bytes", LineMax)
	}
	return raw, nil
}

// Next is the next event. io.EOF after Close; the ctx's error once the
// ctx given to Watch ends; a *TransportError when the stream breaks,
// picketd ends it (it stops, or this client fell behind: watch again and
// a fresh state event tells where the lock stands), stays silent past
// the idle time, or sends a line over LineMax.
func (w *Watch) Next() (Event, error) {
	kind, joined, err := w.next()
	if err != nil {
		return Event{}, err
	}
	ev := Event{Type: kind}
	if err := json.Unmarshal(joined, &ev); err != nil {
		return Event{}, w.fail("a %s event whose data is not a JSON object", kind)
	}
	ev.Type = kind
	ev.Data = json.RawMessage(joined)
	return ev, nil
}

// next is the next event's type and data (a JSON object, not yet decoded).
func (w *Watch) next() (string, []byte, error) {
	kind := "message"
	var data [][]byte
	size := 0
	for {
		line, err := w.line()
		if err != nil {
			return "", nil, err
		}
		if len(line) == 0 {
			if len(data) == 0 {
				kind = "message"
				continue
			}
			joined := bytes.Join(data, []byte("\n"))
			if !bytes.HasPrefix(bytes.TrimSpace(joined), []byte("{")) || !json.Valid(joined) {
				return "", nil, w.fail("a %s event whose data is not a JSON object", kind)
			}
			return kind, joined, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			kind = string(value)
		case "data":
			size += len(value) + 1
			if size > w.dataMax {
				return "", nil, w.fail("an event over %d bytes", LineMax)
			}
			data = append(data, append([]byte(nil), value...))
		}
	}
}
