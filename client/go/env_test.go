package picket

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"
)

// What tests/integration/test_go.sh passes to the tests.
func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv("PICKET_TEST_" + name)
	if v == "" {
		t.Skipf("PICKET_TEST_%s not set: run tests/integration/test_go.sh", name)
	}
	return v
}

func envPID(t *testing.T) int {
	pid, err := strconv.Atoi(env(t, "PICKETD_PID"))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func uniq(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitDone waits for ctx to end, or fails after d.
func waitDone(t *testing.T, ctx context.Context, d time.Duration, what string) time.Time {
	t.Helper()
	select {
	case <-ctx.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("%s: not signalled within %v", what, d)
	}
	return time.Time{}
}
