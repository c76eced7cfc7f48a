package picket

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every code of the ErrorCode enum in proto/openapi.yaml has its sentinel.
func TestEveryCodeHasASentinel(t *testing.T) {
	raw, err := os.ReadFile(env(t, "OPENAPI"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(raw, []byte("\n    ErrorCode:\n"))
	if i < 0 {
		t.Fatal("no ErrorCode in openapi.yaml")
	}
	block := raw[i:]
	block = block[bytes.Index(block, []byte("enum:\n")):]
	re := regexp.MustCompile(`^\s+- ([a-z_]+)$`)
	var got []string
	for _, line := range strings.Split(string(block), "\n")[1:] {
		m := re.FindStringSubmatch(line)
		if m == nil {
			break
		}
		got = append(got, m[1])
	}
	if len(got) < 20 {
		t.Fatalf("parsed only %v", got)
	}
	for _, code := range got {
		s := CodeError(code)
		if s == nil {
			t.Errorf("no sentinel for %s", code)
			continue
		}
		e := &APIError{Status: 400, Code: code}
		if !errors.Is(e, s) {
			t.Errorf("%s does not match its sentinel", code)
		}
	}
	if len(Codes()) != len(got) {
		t.Errorf("sentinels %d, codes %d", len(Codes()), len(got))
	}
	unknown := &APIError{Status: 418, Code: "teapot"}
	if errors.Is(unknown, ErrLockHeld) || errors.Is(unknown, ErrTransport) {
		t.Fatal("an unknown code matched")
	}
	if !errors.Is(&APIError{Code: "semaphore_full"}, ErrLockHeld) || errors.Is(&APIError{Code: "lease_lost"}, ErrLockHeld) {
		t.Fatal("classes")
	}
}

func TestUnauthenticatedAndForbidden(t *testing.T) {
	ctx := bg(t)
	url := env(t, "AUTH_URL")
	for _, tok := range []string{"", "pkt_nobody_0000"} {
		_, err := New(url, WithToken(tok)).Acquire(ctx, "go.x", AcquireOptions{TTL: time.Second})
		var ae *APIError
		if !errors.Is(err, ErrUnauthorized) || !errors.Is(err, ErrUnauthenticated) || !errors.As(err, &ae) || ae.Status != 401 {
			t.Fatalf("token %q: want 401, got %v", tok, err)
		}
	}
	c := New(url, WithToken(env(t, "T_LOCKER")))
	_, err := c.Acquire(ctx, "other.x", AcquireOptions{TTL: time.Second}) // outside its prefix
	var ae *APIError
	if !errors.Is(err, ErrForbidden) || !errors.As(err, &ae) || ae.Status != 403 {
		t.Fatalf("want 403, got %v", err)
	}
	if _, err := c.Break(ctx, "go.x"); !errors.Is(err, ErrPermissionDenied) { // no admin verb
		t.Fatalf("break without admin: %v", err)
	}
	r := New(url, WithToken(env(t, "T_READER")))
	if _, err := r.Inspect(ctx, "go.x"); err != nil {
		t.Fatalf("reader inspect: %v", err)
	}
	if _, err := r.Acquire(ctx, "go.x", AcquireOptions{}); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("reader acquire: %v", err)
	}
	w, err := New(url, WithToken(env(t, "T_OPS"))).WhoAmI(ctx)
	if err != nil || w.Token == nil || *w.Token != "ops" {
		t.Fatalf("whoami %+v %v", w, err)
	}
}

func TestTooManyLeases(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "AUTH_URL"), WithToken(env(t, "T_ONE")))
	l, err := c.Acquire(ctx, uniq("one."), AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx, l)
	t0 := time.Now()
	_, err = c.Acquire(ctx, uniq("one."), AcquireOptions{TTL: 5 * time.Second})
	var ae *APIError
	if !errors.Is(err, ErrTooManyLeases) || !errors.Is(err, ErrQuotaExceeded) || !errors.As(err, &ae) || ae.Status != 429 {
		t.Fatalf("want 429 too_many_leases, got %v", err)
	}
	if time.Since(t0) > 300*time.Millisecond {
		t.Fatal("a 429 was retried")
	}
}

func TestRateLimited(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "AUTH_URL"), WithToken(env(t, "T_FAST")))
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		_, err = c.Acquire(ctx, uniq("fast."), AcquireOptions{TTL: time.Second})
	}
	var ae *APIError
	if !errors.Is(err, ErrRateLimited) || !errors.As(err, &ae) || ae.Status != 429 || ae.RetryAfter <= 0 || ae.RetryAfter > time.Second {
		t.Fatalf("want 429 rate_limited with RetryAfter, got %v (%+v)", err, ae)
	}
}

func TestCAFile(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "TLS_URL"), WithCAFile(env(t, "TLS_CA")))
	l, err := c.Acquire(ctx, uniq("go."), AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, cc := range []*Client{
		New(env(t, "TLS_URL"), WithCAFile(env(t, "TLS_OTHER_CA")), WithRetries(0)),
		New(env(t, "TLS_URL"), WithRetries(0)), // the system's CAs
		New(strings.Replace(env(t, "TLS_URL"), "https:", "http:", 1), WithRetries(0), WithTimeout(2*time.Second)),
	} {
		_, err := cc.Inspect(ctx, "go.x")
		var te *TransportError
		if !errors.Is(err, ErrTransport) || !errors.As(err, &te) {
			t.Fatalf("%v: want a transport error, got %v", cc, err)
		}
		t.Logf("untrusted: %v", err)
	}
	if New(env(t, "TLS_URL"), WithCAFile("/nonexistent")).Err() == nil ||
		New(env(t, "URL"), WithCAFile(env(t, "TLS_CA"))).Err() == nil {
		t.Fatal("bad CA options accepted")
	}
	hc := &http.Client{}
	if _, err := New(env(t, "TLS_URL"), WithHTTPClient(hc), WithRetries(0)).Inspect(ctx, "go.x"); !errors.Is(err, ErrTransport) {
		t.Fatalf("own http client, system CAs: %v", err)
	}
}

func TestTokenFromEnvironment(t *testing.T) {
	t.Setenv("PICKET_TOKEN", env(t, "T_LOCKER"))
	ctx := bg(t)
	l, err := New(env(t, "AUTH_URL")).Acquire(ctx, uniq("go."), AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	New(env(t, "AUTH_URL")).Release(ctx, l)
	if _, err := New(env(t, "AUTH_URL"), WithToken("")).Inspect(ctx, "go.x"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("WithToken(\"\") must override the environment: %v", err)
	}
}
