package picket

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Leader elections against a real picketd: Campaign (term, value,
// leader_exists, the waited handover on Resign), Proclaim, Leader,
// Observe, the keeper's loss signal (a break, renewals stopped), terms
// strictly increasing, and a term checked by a real fenced-kv.

func TestCampaignTermValue(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	lead, err := c.Campaign(ctx, name, WithTTL(10*time.Second), WithValue("host-a:8080"), WithLeaseOwner("go-a"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := lead.Value(); lead.Election != name || lead.Term < 1 || lead.Owner != "go-a" || !ok || v != "host-a:8080" ||
		lead.TTL() != 10*time.Second || lead.Token() != "" || len(lead.ID()) != 32 || lead.Fence() != lead.Term || lead.FenceLock() != name {
		t.Fatalf("leadership %v (owner %q, value %q %v, token %q)", lead, lead.Owner, v, ok, lead.Token())
	}
	if r := lead.Remaining(); r <= 9*time.Second || r > 10*time.Second-driftMargin(10*time.Second) {
		t.Fatalf("remaining %v", r)
	}
	if strings.Contains(lead.String(), lead.ID()) {
		t.Fatal("String shows the lease id")
	}
	info, err := c.Leader(ctx, name)
	if err != nil || info.Election != name || info.Term != lead.Term || info.Leader == nil || info.Leader.Term != lead.Term ||
		info.Leader.Value == nil || *info.Leader.Value != "host-a:8080" || info.Leader.Owner == nil || *info.Leader.Owner != "go-a" ||
		info.Leader.TTL() <= 5*time.Second || info.Leader.Since <= 0 {
		t.Fatalf("leader %+v %v", info, err)
	}
	req, _ := http.NewRequest("PUT", "http://kv/kv/x", nil)
	lead.SetFenceHeaders(req)
	if req.Header.Get("Picket-Lock") != name || req.Header.Get("Picket-Fence") != strconv.FormatInt(lead.Term, 10) || req.Header.Get("Picket-Fence-Token") != "" {
		t.Fatalf("headers %v", req.Header)
	}
	if err := lead.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if lead.Context().Err() == nil || !errors.Is(lead.Err(), ErrResigned) || lead.Valid() {
		t.Fatalf("after resign: ctx %v err %v", lead.Context().Err(), lead.Err())
	}
	select {
	case <-lead.Lost():
		t.Fatal("Lost closed by Resign")
	default:
	}
	if info, _ := c.Leader(ctx, name); info.Leader != nil || info.Term != lead.Term {
		t.Fatalf("after resign %+v", info)
	}
	if info, err := c.Leader(ctx, uniq("go.")); err != nil || info.Leader != nil || info.Term != 0 {
		t.Fatalf("never campaigned: %+v %v", info, err)
	}
}

func TestSecondCampaignLeaderExists(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	lead, err := c.Campaign(ctx, name, WithTTL(10*time.Second), WithLeaseOwner("first"))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Resign(ctx)
	t0 := time.Now()
	_, err = c.Campaign(ctx, name, WithTTL(10*time.Second), WithLeaseOwner("second"))
	var ae *APIError
	if !errors.Is(err, ErrLeaderExists) || !errors.As(err, &ae) {
		t.Fatalf("want ErrLeaderExists, got %v", err)
	}
	if ae.Status != 409 || ae.Holder != "first" || ae.RetryAfter <= 0 || ae.RetryAfter > 10*time.Second || time.Since(t0) > time.Second {
		t.Fatalf("leader_exists fields: %+v", ae)
	}
	if errors.Is(err, ErrLockHeld) || errors.Is(err, ErrTransport) || errors.Is(err, ErrLeaseLost) {
		t.Fatalf("leader_exists matched another error: %v", err)
	}
	// a lock of the same name is another namespace
	l, err := c.Acquire(ctx, name, AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatalf("lock %q beside election %q: %v", name, name, err)
	}
	c.Release(ctx, l)
	// a retry with the same lease id is the same leadership
	again, err := c.Campaign(ctx, name, WithTTL(10*time.Second), WithLeaseID(lead.ID()))
	if err != nil || again.Term != lead.Term {
		t.Fatalf("same lease id: %v %v", again, err)
	}
	again.k.kstop()
	again.k.wg.Wait()
}

func TestWaitingCandidateTakesOverOnResign(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	first, err := c.Campaign(ctx, name, WithTTL(30*time.Second), WithValue("a"))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lead *Leadership
		at   time.Time
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l, err := New(env(t, "URL")).Campaign(ctx, name, WithTTL(30*time.Second), WithWait(10*time.Second), WithValue("b"))
		done <- result{l, time.Now(), err}
	}()
	for i := 0; ; i++ {
		info, err := c.Leader(ctx, name)
		if err == nil && info.Candidates >= 1 {
			break
		}
		if i > 500 {
			t.Fatalf("the second campaign never showed as a candidate: %+v %v", info, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resigned := time.Now()
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lead.Resign(ctx)
	handover := r.at.Sub(resigned)
	t.Logf("MEASURED election handover after resign: %v", handover)
	if handover >= time.Second {
		t.Fatalf("handover took %v", handover)
	}
	if v, _ := r.lead.Value(); r.lead.Term <= first.Term || v != "b" {
		t.Fatalf("new leader %v value %q after term %d", r.lead, v, first.Term)
	}
}

func TestProclaimChangesValueKeepsTerm(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	lead, err := c.Campaign(ctx, name, WithTTL(5*time.Second), WithValue("v1"))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Resign(ctx)
	d0 := lead.Deadline()
	time.Sleep(20 * time.Millisecond)
	if err := lead.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if v, ok := lead.Value(); !ok || v != "v2" || !lead.Deadline().After(d0) {
		t.Fatalf("after proclaim: %q %v, deadline moved %v", v, ok, lead.Deadline().Sub(d0))
	}
	info, err := c.Leader(ctx, name)
	if err != nil || info.Leader == nil || info.Leader.Term != lead.Term || info.Leader.Value == nil || *info.Leader.Value != "v2" {
		t.Fatalf("leader %+v %v", info, err)
	}
	if err := lead.ClearValue(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := lead.Value(); ok {
		t.Fatal("a value after ClearValue")
	}
	if info, _ := c.Leader(ctx, name); info.Leader == nil || info.Leader.Value != nil || info.Leader.Term != lead.Term {
		t.Fatalf("leader after ClearValue %+v", info.Leader)
	}
	if err := lead.Proclaim(ctx, "bad\nvalue"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a control character: %v", err)
	}
	if err := lead.Proclaim(ctx, strings.Repeat("x", 4097)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("4097 bytes: %v", err)
	}
}

func TestObserveStateFirstThenChanges(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	lead, err := c.Campaign(ctx, name, WithTTL(10*time.Second), WithValue("one"), WithLeaseOwner("obs"))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Resign(ctx)
	o, err := c.Observe(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	next := func(what string) LeaderEvent {
		t.Helper()
		type r struct {
			ev  LeaderEvent
			err error
		}
		ch := make(chan r, 1)
		go func() { ev, err := o.Next(); ch <- r{ev, err} }()
		select {
		case x := <-ch:
			if x.err != nil {
				t.Fatalf("%s: %v", what, x.err)
			}
			return x.ev
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no event in 5s", what)
		}
		return LeaderEvent{}
	}
	ev := next("the state")
	if ev.Type != "leader" || ev.Election != name || ev.Leader == nil || ev.Leader.Term != lead.Term ||
		ev.Leader.Value == nil || *ev.Leader.Value != "one" || ev.Leader.Owner == nil || *ev.Leader.Owner != "obs" || ev.Term != lead.Term || ev.Time <= 0 {
		t.Fatalf("first event %+v (leader %+v)", ev, ev.Leader)
	}
	if err := lead.Proclaim(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	ev = next("the proclaim")
	if ev.Leader == nil || ev.Leader.Term != lead.Term || ev.Leader.Value == nil || *ev.Leader.Value != "two" {
		t.Fatalf("proclaim event %s", ev.Data)
	}
	if err := lead.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	ev = next("the resign")
	if ev.Leader != nil || ev.Term != lead.Term {
		t.Fatalf("resign event %s", ev.Data)
	}
	nxt, err := c.Campaign(ctx, name, WithTTL(10*time.Second), WithValue("three"))
	if err != nil {
		t.Fatal(err)
	}
	defer nxt.Resign(ctx)
	ev = next("the next leader")
	if ev.Leader == nil || ev.Leader.Term != nxt.Term || nxt.Term <= lead.Term {
		t.Fatalf("next leader event %s (term %d)", ev.Data, nxt.Term)
	}
	o.Close()
	if _, err := o.Next(); err != io.EOF {
		t.Fatalf("after Close: %v", err)
	}
}

func TestLeadershipLostByBreak(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	lost := make(chan error, 1)
	lead, err := c.Campaign(ctx, name, WithTTL(time.Second), WithOnLost(func(err error) { lost <- err }))
	if err != nil {
		t.Fatal(err)
	}
	broke := time.Now()
	br, err := c.BreakElection(ctx, name) // loopback may break without --auth-file
	if err != nil || !br.Broken || br.Term < lead.Term {
		t.Fatalf("break %+v %v", br, err)
	}
	at := waitDone(t, lead.Context(), 2*time.Second, "Context after a break")
	var le *LostError
	if err := lead.Err(); !errors.As(err, &le) || le.Reason != "lease_lost" || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Err %v", lead.Err())
	}
	select {
	case <-lead.Lost():
	default:
		t.Fatal("Lost not closed")
	}
	if err := <-lost; !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("onLost %v", err)
	}
	if lead.Valid() {
		t.Fatal("valid after the loss")
	}
	if err := lead.Resign(ctx); !errors.As(err, &le) {
		t.Fatalf("Resign after a loss: %v", err)
	}
	t.Logf("MEASURED leadership lost %v after the break", at.Sub(broke))
	if at.Sub(broke) > time.Second {
		t.Fatalf("lost %v after the break: not at the next renewal (ttl/3)", at.Sub(broke))
	}
	next, err := c.Campaign(ctx, name, WithTTL(time.Second))
	if err != nil || next.Term <= lead.Term || next.Term < br.Term {
		t.Fatalf("after the break: %v %v (floor %d)", next, err, br.Term)
	}
	next.Resign(ctx)
}

func TestLeadershipLostAtTheDeadlineWithoutRenewals(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	lead, err := c.Campaign(ctx, name, WithTTL(time.Second), WithRenewEvery(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	at := waitDone(t, lead.Context(), 3*time.Second, "Context at the deadline")
	if late := at.Sub(lead.Deadline()); late < 0 || late > 500*time.Millisecond {
		t.Fatalf("cancelled %v from the deadline", late)
	}
	var le *LostError
	if err := lead.Err(); !errors.As(err, &le) || le.Reason != "deadline" {
		t.Fatalf("Err %v", lead.Err())
	}
	// the server's lease ends a little after the local deadline
	for i := 0; ; i++ {
		info, err := c.Leader(ctx, name)
		if err == nil && info.Leader == nil {
			break
		}
		if i > 300 {
			t.Fatalf("still led: %+v %v", info, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := lead.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew after the deadline: %v", err)
	}
}

func TestTermsStrictlyIncrease(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	name := uniq("go.")
	var terms []int64
	for i := 0; i < 4; i++ {
		lead, err := c.Campaign(ctx, name, WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		terms = append(terms, lead.Term)
		if err := lead.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(terms); i++ {
		if terms[i] <= terms[i-1] {
			t.Fatalf("terms %v", terms)
		}
	}
}

func TestBadElectionArguments(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	for _, opts := range [][]LockOption{
		{WithTTL(-time.Second)}, {WithValue("a\x01b")}, {WithLeaseID("nope")}, {WithMaxHold(time.Second)},
	} {
		if _, err := c.Campaign(ctx, uniq("go."), opts...); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%d options: %v", len(opts), err)
		}
	}
	if _, err := c.Campaign(ctx, strings.Repeat("x", 199)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("199 characters: %v", err)
	}
	if n, err := ElectionName("a b"); err != nil || n != LockName("a b") {
		t.Fatalf("ElectionName %q %v", n, err)
	}
}

// The term is the fence of resource NAME: a signing picketd's token
// verifies at the fenced-kv on the same key, and a deposed leader's term
// is refused once a newer one was seen.
func TestTermGuardsFencedKV(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "SIGNED_URL"))
	kv := env(t, "KV_URL")
	name := uniq("go.")
	put := func(l *Leadership, v string) int {
		req, _ := http.NewRequestWithContext(ctx, "PUT", kv+"/kv/"+name+"-job", strings.NewReader(v))
		l.SetFenceHeaders(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	old, err := c.Campaign(ctx, name, WithTTL(10*time.Second))
	if err != nil || old.Token() == "" {
		t.Fatalf("signed campaign %v %v", old, err)
	}
	if s := put(old, "run-1"); s != 200 {
		t.Fatalf("first write %d", s)
	}
	old.Resign(ctx)
	nu, err := c.Campaign(ctx, name, WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nu.Resign(ctx)
	if s := put(nu, "run-2"); s != 200 || nu.Term <= old.Term {
		t.Fatalf("new leader's write %d (terms %d, %d)", s, old.Term, nu.Term)
	}
	if s := put(old, "zombie"); s != 409 {
		t.Fatalf("a deposed leader's write: %d, want 409", s)
	}
}

// A leadership renewed, or proclaimed, with a shorter TTL (ttl_ms; the API
// here renews with its last TTL, so the bodies are sent by hand): the
// local deadline comes down to the new one.
func TestShorterLeadershipRenewalMovesTheDeadlineBack(t *testing.T) {
	ctx := bg(t)
	c := New(env(t, "URL"))
	lead, err := c.Campaign(ctx, uniq("go."), WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Resign(ctx)
	if r := lead.Remaining(); r <= 9*time.Second {
		t.Fatalf("remaining %v", r)
	}
	for _, verb := range []string{"renew", "proclaim"} {
		body := map[string]interface{}{"lease": lead.s.id, "ttl_ms": 1000}
		if verb == "proclaim" {
			body["value"] = "shorter"
		}
		if _, err := lead.post(ctx, verb, body, true); err != nil {
			t.Fatal(err)
		}
		if r := lead.Remaining(); r > time.Second || lead.TTL() != time.Second {
			t.Fatalf("%s with ttl_ms 1000: remaining %v, ttl %v", verb, r, lead.TTL())
		}
		if _, err := lead.post(ctx, "renew", map[string]interface{}{"lease": lead.s.id, "ttl_ms": 10000}, true); err != nil || lead.Remaining() <= 9*time.Second {
			t.Fatalf("renewed to 10 s: %v, remaining %v", err, lead.Remaining())
		}
	}
}
