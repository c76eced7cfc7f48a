// inventory-go: workers that decrement a stock count held in fenced-kv
// (examples/fenced-kv), each read-modify-write under a picket lock and
// sent with the lock's fence, so a holder that lost its lease cannot
// overwrite a newer holder's write. At the end it replays a write with an
// old lease's fence, which the store refuses (409), and checks the stock.
//
//	go run . --picket http://127.0.0.1:7070 --kv http://127.0.0.1:7071
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

// put writes value under key, guarded by the lock's fence.
func put(ctx context.Context, kv, key, value string, l *picket.Lease) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "PUT", kv+"/kv/"+key, strings.NewReader(value))
	if err != nil {
		return 0, "", err
	}
	l.SetFenceHeaders(req)
	resp, err := kvClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

func get(ctx context.Context, kv, key string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", kv+"/kv/"+key, nil)
	if err != nil {
		return 0, err
	}
	resp, err := kvClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var doc struct {
		Value string `json:"value"`
	}
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("GET %s: HTTP %d", key, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&doc); err != nil {
		return 0, err
	}
	return strconv.Atoi(doc.Value)
}

func main() {
	picketURL := flag.String("picket", "http://127.0.0.1:7070", "picketd URL")
	kv := flag.String("kv", "http://127.0.0.1:7071", "fenced-kv URL")
	key := flag.String("key", "stock", "the fenced-kv key")
	lockName := flag.String("lock", "go-example.inventory", "the picket lock guarding the key")
	workers := flag.Int("workers", 3, "concurrent workers")
	rounds := flag.Int("rounds", 4, "decrements per worker")
	initial := flag.Int("initial", 100, "the starting stock")
	ca := flag.String("ca", "", "CA file for an https picketd")
	flag.Parse()

	opts := []picket.Option{picket.WithOwner("inventory-go")}
	if *ca != "" {
		opts = append(opts, picket.WithCAFile(*ca))
	}
	c := picket.New(*picketURL, opts...) // the token, if any, from $PICKET_TOKEN
	if err := c.Err(); err != nil {
		fail(err)
	}
	ctx := context.Background()

	// The starting stock, written under the lock like every later write.
	first, err := c.Lock(ctx, *lockName, 10*time.Second, picket.WithWait(30*time.Second))
	if err != nil {
		fail(err)
	}
	if st, body, err := put(first.Context(), *kv, *key, strconv.Itoa(*initial), first.Lease()); err != nil || st != 200 {
		fail(fmt.Errorf("initial write: %d %s %v", st, body, err))
	}
	stale := first.Lease() // kept to show what a stale holder's write gets
	if err := first.Release(ctx); err != nil {
		fail(err)
	}

	var mu sync.Mutex
	applied := 0
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < *rounds; r++ {
				if err := decrement(ctx, c, *lockName, *kv, *key, w); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				applied++
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fail(err)
	}

	// A holder whose lease is long gone (paused, say) wakes up and writes
	// with its old fence: the store has seen newer fences and refuses it.
	st, body, err := put(ctx, *kv, *key, "0", stale)
	if err != nil {
		fail(err)
	}
	if st != 409 {
		fail(fmt.Errorf("a stale fence was not refused: %d %s", st, body))
	}
	fmt.Printf("stale write refused: %d %s\n", st, body)

	stock, err := get(ctx, *kv, *key)
	if err != nil {
		fail(err)
	}
	want := *initial - *workers**rounds
	fmt.Printf("final stock=%d expected=%d applied=%d\n", stock, want, applied)
	if stock != want {
		os.Exit(1)
	}
}

// decrement takes the lock, reads, writes stock-1 with the fence, releases.
// Work runs under l.Context(): it is cancelled the moment the lease is lost.
func decrement(ctx context.Context, c *picket.Client, lockName, kv, key string, w int) error {
	l, err := c.Lock(ctx, lockName, 10*time.Second, picket.WithWait(30*time.Second))
	if err != nil {
		return err
	}
	defer l.Release(context.Background())
	work := l.Context()
	n, err := get(work, kv, key)
	if err != nil {
		if l.Err() != nil {
			return fmt.Errorf("worker %d: %v (%v)", w, l.Err(), err)
		}
		return err
	}
	st, body, err := put(work, kv, key, strconv.Itoa(n-1), l.Lease())
	if err != nil {
		if l.Err() != nil { // the lease was lost (or the hold cap reached) mid-write
			return fmt.Errorf("worker %d: %v (%v)", w, l.Err(), err)
		}
		return err
	}
	if st != 200 {
		return fmt.Errorf("worker %d: write refused: %d %s", w, st, body)
	}
	fmt.Printf("worker %d: fence %d: stock %d -> %d\n", w, l.Fence(), n, n-1)
	return l.Release(context.Background())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "inventory-go:", err)
	os.Exit(1)
}
