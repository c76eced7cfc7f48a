// leader-scheduler: a scheduler that only the leader runs, with the Go
// client (client/go) and a fenced-kv (examples/fenced-kv).
//
// Several candidates (goroutines here; processes on several hosts in real
// life) campaign for one election, each waiting its turn. The leader runs
// the job --ticks times, every --interval: the job counts its runs in
// fenced-kv at --key, each write sent with the leader's term as its fence
// (Picket-Lock: ELECTION, Picket-Fence: TERM, + Picket-Fence-Token when
// picketd signs), and stops the moment its leadership is lost
// (lead.Context()). Then it resigns, and the next candidate leads with a
// higher term. At the end the first leader's write is replayed with its
// old term, as a leader paused past its TTL would send it: fenced-kv has
// seen newer terms and refuses it (409 stale_fence). The last line is
// `final runs=N expected=N leaders=L` (exit status 1 when they differ).
//
//	go run ./leader-scheduler --picket http://127.0.0.1:7070 --kv http://127.0.0.1:7071
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"picket.dev/picket"
)

var kvClient = &http.Client{Timeout: 10 * time.Second}

// put writes value under key, fenced by the leader's term (or by the
// headers of an old one, for the replay).
func put(ctx context.Context, kv, key, value string, fence func(*http.Request)) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "PUT", kv+"/kv/"+key, strings.NewReader(value))
	if err != nil {
		return 0, "", err
	}
	fence(req)
	resp, err := kvClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

// runs is the count at key (0 before the first run).
func runs(ctx context.Context, kv, key string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", kv+"/kv/"+key, nil)
	if err != nil {
		return 0, err
	}
	resp, err := kvClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == 404 {
		return 0, nil
	}
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("GET %s: HTTP %d", key, resp.StatusCode)
	}
	var doc struct {
		Value string `json:"value"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&doc); err != nil {
		return 0, err
	}
	return strconv.Atoi(doc.Value)
}

func main() {
	picketURL := flag.String("picket", "http://127.0.0.1:7070", "picketd URL")
	kv := flag.String("kv", "http://127.0.0.1:7071", "fenced-kv URL")
	election := flag.String("election", "go-example.scheduler", "the election")
	key := flag.String("key", "go-example-runs", "the fenced-kv key counting the job's runs")
	candidates := flag.Int("candidates", 2, "candidates")
	ticks := flag.Int("ticks", 3, "runs of the job per leadership")
	interval := flag.Duration("interval", 100*time.Millisecond, "between two runs")
	ttl := flag.Duration("ttl", 3*time.Second, "the leadership's lease time")
	ca := flag.String("ca", "", "CA file for an https picketd")
	flag.Parse()

	var opts []picket.Option
	if *ca != "" {
		opts = append(opts, picket.WithCAFile(*ca))
	}
	c := picket.New(*picketURL, opts...)
	ctx := context.Background()

	var (
		mu        sync.Mutex
		out       sync.Mutex
		firstHdr  http.Header
		firstTerm int64
		terms     = map[int64]bool{}
		failed    bool
	)
	say := func(format string, args ...interface{}) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}
	var wg sync.WaitGroup
	for i := 0; i < *candidates; i++ {
		wg.Add(1)
		go func(me string) {
			defer wg.Done()
			lead, err := c.Campaign(ctx, *election, picket.WithTTL(*ttl), picket.WithWait(time.Minute),
				picket.WithLeaseOwner(me), picket.WithValue(me))
			if err != nil {
				say("%s: campaign: %v", me, err)
				mu.Lock()
				failed = true
				mu.Unlock()
				return
			}
			defer lead.Resign(context.Background())
			mu.Lock()
			terms[lead.Term] = true
			if firstHdr == nil {
				req, _ := http.NewRequest("PUT", "http://x/", nil)
				lead.SetFenceHeaders(req)
				firstHdr, firstTerm = req.Header, lead.Term
			}
			mu.Unlock()
			say("%s leads term %d", me, lead.Term)
			for tick := 1; tick <= *ticks; tick++ {
				if !lead.Valid() {
					say("%s lost the leadership (term %d): %v", me, lead.Term, lead.Err())
					return
				}
				n, err := runs(lead.Context(), *kv, *key)
				if err != nil {
					say("%s: %v", me, err)
					return
				}
				status, body, err := put(lead.Context(), *kv, *key, strconv.Itoa(n+1), lead.SetFenceHeaders)
				if err != nil || status != 200 {
					say("%s: write refused: %d %s %v", me, status, body, err)
					return
				}
				say("%s term %d tick %d: runs=%d (%d)", me, lead.Term, tick, n+1, status)
				select {
				case <-lead.Context().Done():
				case <-time.After(*interval):
				}
			}
			say("%s resigns term %d", me, lead.Term)
		}(fmt.Sprintf("cand-%d", i))
	}
	wg.Wait()

	// a zombie leader: the first term, long resigned
	status, body, err := put(ctx, *kv, *key, "0", func(r *http.Request) {
		for k, v := range firstHdr {
			r.Header[k] = v
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if status == 409 {
		var doc struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		json.Unmarshal([]byte(body), &doc)
		say("stale write refused: 409 %s (term %d)", doc.Error.Code, firstTerm)
	} else {
		say("stale write NOT refused: %d %s", status, body)
	}
	got, err := runs(ctx, *kv, *key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	want := *candidates * *ticks
	say("final runs=%d expected=%d leaders=%d", got, want, len(terms))
	if got != want || status != 409 || len(terms) != *candidates || failed {
		os.Exit(1)
	}
}
