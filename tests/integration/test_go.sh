#!/usr/bin/env bash
# test_go.sh: the Go client (client/go, issue 30) against real picketd
# processes on one throwaway Redis: a plain one, one with --auth-file
# (tokens made here, only their SHA-256 in the file), one signing fences
# (with a fenced-kv that verifies them, on the same key file), one on HTTPS
# (tls_certs.sh), and one whose Redis is missing (503 store_unavailable).
# `go vet` and `go test -race` of client/go make the requests; then
# examples/go guards a fenced-kv write with its lock's fence, and a stale
# fence must be refused. No network: GOPROXY=off, the stdlib only.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
command -v go >/dev/null || h_fail "go not found (scripts/deps installs golang-go)"
GODIR="$PICKET_SOURCE_DIR/client/go"
# The build cache lives in the build dir (kept between runs), GOPATH in H_DIR.
GOSTATE="$PICKET_BIN_DIR/../go"
mkdir -p "$GOSTATE/cache" || h_fail "cannot make $GOSTATE"
export GOCACHE="$GOSTATE/cache" GOPATH="$H_DIR/gopath" GOPROXY=off GOFLAGS=-buildvcs=false \
  GOTOOLCHAIN=local GO111MODULE=on GOSUMDB=off GOWORK=off CGO_ENABLED=${CGO_ENABLED:-1}
go version || h_fail "go does not run"

. "$PICKET_SOURCE_DIR/tests/integration/client_env.sh"
client_picketds go.

cd "$GODIR" || h_fail "no client/go"
go vet ./... || h_fail "go vet (see above)"
# PICKET_GO_TEST_RUN: a -run pattern, to run some of the tests.
go test -race -count=1 -v -timeout 170s ${PICKET_GO_TEST_RUN:+-run "$PICKET_GO_TEST_RUN"} ./... 2>&1 |
  tee "$H_DIR/gotest.out"
[ "${PIPESTATUS[0]}" -eq 0 ] || h_fail "go test (see above)"
! grep -q -- '--- SKIP' "$H_DIR/gotest.out" || h_fail "go test skipped a test (an environment variable missing?)"
grep -E '^ +[a-z_]+_test\.go:[0-9]+: MEASURED' "$H_DIR/gotest.out" || true

# The example: its own lock on the signing picketd, writes through the
# verifying fenced-kv; a stale fence must come back 409.
cd "$PICKET_SOURCE_DIR/examples/go" || h_fail "no examples/go"
go vet ./... || h_fail "go vet examples/go"
go build -o "$H_DIR/inventory-go" . || h_fail "go build examples/go"
out=$("$H_DIR/inventory-go" --picket "$PICKET_TEST_SIGNED_URL" --kv "$PICKET_TEST_KV_URL" \
  --key go-example-stock --workers 3 --rounds 4 --initial 100 2>&1) || h_fail "examples/go: $out"
client_example_ok examples/go "$out" '^stale write refused: 409' "$PICKET_TEST_KV_URL" go-example-stock

# The scheduler only the leader runs: two candidates on the signing
# picketd, the job's runs counted in the verifying fenced-kv with the
# leader's term; the first term, replayed, must be refused.
go build -o "$H_DIR/leader-scheduler-go" ./leader-scheduler || h_fail "go build examples/go/leader-scheduler"
out=$("$H_DIR/leader-scheduler-go" --picket "$PICKET_TEST_SIGNED_URL" --kv "$PICKET_TEST_KV_URL" \
  --key go-example-runs --candidates 2 --ticks 3 --interval 50ms 2>&1) || h_fail "examples/go/leader-scheduler: $out"
client_scheduler_ok examples/go/leader-scheduler "$out" "$PICKET_TEST_KV_URL" go-example-runs
echo "PASS: go"
