package picket

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"syscall"
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

// stop sends SIGSTOP to pid and waits until every thread of it is stopped:
// kill returns before the stop takes effect, and a request sent at once
// could still be answered (seen once in a CI run).
func stop(t *testing.T, pid int) {
	t.Helper()
	syscall.Kill(pid, syscall.SIGSTOP)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
			if err != nil || len(f) == 0 || (f[0] != "T" && f[0] != "t") {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
	}
	t.Fatalf("picketd %d did not stop", pid)
}
