#!/usr/bin/env bash
# test_console.sh: the web console (server/ui/, served at /ui/) in a real
# headless browser (issue 27): Debian's chromium driven by puppeteer-core
# (pinned in tests/browser/package-lock.json, installed by scripts/deps).
# This script starts a real redis-server, a real picketd with an
# --auth-file (an admin token and a read-only one) and a real fenced-kv, in
# one temp dir that the harness removes on any exit; console.mjs drives the
# browser and the API. Tokens reach node through the environment, never
# argv. PICKET_SCREENSHOT=1 also saves docs/console.png.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
here="$PICKET_SOURCE_DIR/tests/browser"

CHROMIUM=${PICKET_CHROMIUM:-$(command -v chromium || true)}
[ -x "$CHROMIUM" ] || h_fail "no chromium (Debian package chromium): run scripts/deps as root"
[ -d "$here/node_modules/puppeteer-core" ] ||
  h_fail "no tests/browser/node_modules: run scripts/deps (npm ci in tests/browser)"
export CHROMIUM

h_start_redis
# The tokens: their SHA-256 goes into the file, never the tokens.
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
export T_ADMIN=pkt_admin_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export T_READER=pkt_reader_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
cat > "$H_DIR/auth" <<AUTH
# picket auth file of test_console.sh
admin   sha256:$(sha "$T_ADMIN")  *  lock,read,list,admin
reader  sha256:$(sha "$T_READER") *  read,list
AUTH
h_start_picketd --auth-file "$H_DIR/auth"
export PICKETD_URL PICKETD_PID

"$PICKET_BIN_DIR/fenced-kv" --listen 127.0.0.1:0 --db "$H_DIR/kv.db" --port-file "$H_DIR/kv.port" \
  > "$H_DIR/fenced-kv.log" 2>&1 &
H_PIDS="$H_PIDS $!"
for _ in $(seq 1 500); do [ -s "$H_DIR/kv.port" ] && break; sleep 0.02; done
[ -s "$H_DIR/kv.port" ] || h_fail "fenced-kv did not start"
export FKV_URL="http://127.0.0.1:$(cat "$H_DIR/kv.port")"

# Chromium's profile and crash dumps stay in the temp dir too.
export BROWSER_DIR="$H_DIR/browser" HOME="$H_DIR"
mkdir -p "$BROWSER_DIR"
node "$here/console.mjs" || h_fail "console checks (see above)"
kill -0 "$PICKETD_PID" 2>/dev/null || h_fail "picketd died"
for t in "$T_ADMIN" "$T_READER"; do
  grep -qF "$t" "$H_DIR/picketd.log" && h_fail "a token reached picketd's log"
done
echo "PASS: the web console in chromium"
