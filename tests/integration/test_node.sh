#!/usr/bin/env bash
# test_node.sh: the Node/TypeScript client (client/node, issue 30).
#  1. dist/ is rebuilt from src/ with the pinned tsc (client/node's
#     node_modules, from `npm ci`) into a temp dir and must equal the
#     checked-in dist/: source and output cannot drift.
#  2. openapi-typescript (pinned) generates types from proto/openapi.yaml and
#     `tsc --noEmit` checks client/node/check/contract.ts, which asserts the
#     client's wire types and error codes against them: the client and the
#     contract cannot drift.
#  3. `node --test` runs client/node/test against real picketd processes on
#     one throwaway Redis: a plain one, one to pause (SIGSTOP), one with
#     --auth-file, one signing fences (and a fenced-kv with the same key),
#     one on HTTPS (tls_certs.sh), and one whose Redis is missing (503).
#  4. examples/node/inventory-sync.mjs guards fenced-kv writes with the
#     lock's fence; the final stock must be exact and a stale fence refused;
#     examples/node/leader-scheduler.mjs runs a job only as the leader,
#     each write fenced by its term.
# A missing node or client/node/node_modules fails the test; it never skips.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
NODEDIR="$PICKET_SOURCE_DIR/client/node"
command -v node >/dev/null || h_fail "node not found (Node 20 or later)"
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 14) ? 0 : 1)' ||
  h_fail "Node $(node --version) is too old: the client needs 20, its test runner 20.14 (--test-force-exit)"
[ -d "$NODEDIR/node_modules" ] || h_fail "no client/node/node_modules: run npm ci in client/node (scripts/deps does)"
TSC="$NODEDIR/node_modules/typescript/bin/tsc"
OAT="$NODEDIR/node_modules/openapi-typescript/bin/cli.js"
[ -f "$TSC" ] || h_fail "no pinned typescript in client/node/node_modules (npm ci)"
[ -f "$OAT" ] || h_fail "no pinned openapi-typescript in client/node/node_modules (npm ci)"

# 1. dist/ is what tsc makes of src/.
node "$TSC" -p "$NODEDIR/tsconfig.json" --outDir "$H_DIR/dist" || h_fail "tsc could not build client/node/src"
diff -r "$H_DIR/dist" "$NODEDIR/dist" || h_fail "client/node/dist differs from a build of src/ (run npm run build in client/node and commit dist/)"
echo "dist/ matches a fresh build of src/"

# 2. The wire types against the contract.
mkdir -p "$H_DIR/ct/check"
cp -r "$NODEDIR/src" "$H_DIR/ct/src"
cp "$NODEDIR/check/contract.ts" "$H_DIR/ct/check/contract.ts"
node "$OAT" "$PICKET_SOURCE_DIR/proto/openapi.yaml" -o "$H_DIR/ct/check/openapi.ts" > "$H_DIR/oat.out" 2>&1 \
  || { cat "$H_DIR/oat.out"; h_fail "openapi-typescript could not read proto/openapi.yaml"; }
cat > "$H_DIR/ct/tsconfig.json" <<TS
{ "extends": "$NODEDIR/tsconfig.json",
  "compilerOptions": { "noEmit": true, "rootDir": ".", "typeRoots": ["$NODEDIR/node_modules/@types"] },
  "include": ["src/*.ts", "check/*.ts"] }
TS
node "$TSC" -p "$H_DIR/ct/tsconfig.json" || h_fail "client/node's wire types disagree with proto/openapi.yaml (check/contract.ts)"
echo "wire types agree with proto/openapi.yaml"

# 3. The suites.
. "$PICKET_SOURCE_DIR/tests/integration/client_env.sh"
client_picketds js.
h_start_picketd
export PICKET_TEST_PAUSE_URL=$PICKETD_URL PICKET_TEST_PAUSE_PID=$PICKETD_PID
cd "$NODEDIR" || h_fail "no client/node"
# PICKET_NODE_TESTS: test files (test/election.test.mjs ...) to run some of them.
node --test --test-force-exit --test-concurrency=2 ${PICKET_NODE_TESTS:-test/} 2>&1 | tee "$H_DIR/node-test.out"
[ "${PIPESTATUS[0]}" -eq 0 ] || h_fail "node client tests (see above)"
grep 'measured:' "$H_DIR/node-test.out" || true

# 4. The example, with its own picketd and fenced-kv on this Redis.
h_start_picketd
client_kv kv-example
out=$(node "$PICKET_SOURCE_DIR/examples/node/inventory-sync.mjs" --picket "$PICKETD_URL" --kv "$KV" \
  --workers 3 --rounds 4 --initial 100 2>&1) || h_fail "inventory-sync.mjs: $out"
client_example_ok inventory-sync.mjs "$out" '^stale fence [0-9]* refused: HTTP 409 stale_fence$' "$KV" stock

# The scheduler only the leader runs: two candidates on the signing
# picketd, the job's runs counted in the verifying fenced-kv with the
# leader's term; the first term, replayed, must be refused.
out=$(node "$PICKET_SOURCE_DIR/examples/node/leader-scheduler.mjs" --picket "$PICKET_TEST_SIGNED_URL" \
  --kv "$PICKET_TEST_KV_URL" --key js-example-runs --candidates 2 --ticks 3 --interval-ms 50 2>&1) ||
  h_fail "leader-scheduler.mjs: $out"
client_scheduler_ok leader-scheduler.mjs "$out" "$PICKET_TEST_KV_URL" js-example-runs
echo "test_node: all passed"
