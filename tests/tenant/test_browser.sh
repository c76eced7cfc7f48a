#!/usr/bin/env bash
# test_browser.sh: what a web page in the operator's browser can make
# picketd do (issue 39, item 3). A real redis-server and real picketds,
# started as docs/console.md says (loopback, no --auth-file), one with
# --allowed-hosts picket.example and one with --loopback-trust off;
# test_browser.py replays the attacks as a browser sends them and checks
# that each is refused and changed nothing, and tests/browser/evil_page.mjs
# does it from a page in real chromium. Then the flags' bad values.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
h_start_picketd --allowed-hosts picket.example
NAMED_PORT=$PICKETD_PORT NAMED_PID=$PICKETD_PID
h_start_picketd --loopback-trust off --max-waiters 4
NOTRUST_PORT=$PICKETD_PORT NOTRUST_PID=$PICKETD_PID
h_start_picketd
python3 "$PICKET_SOURCE_DIR/tests/tenant/test_browser.py" "$PICKETD_PORT" "$NAMED_PORT" "$NOTRUST_PORT" ||
  h_fail "test_browser.py"

# The same in real chromium (tests/browser has it): a page on another site
# cannot break a lock, take one, or read the listing.
CHROMIUM=${PICKET_CHROMIUM:-$(command -v chromium || true)}
if [ -x "$CHROMIUM" ] && [ -d "$PICKET_SOURCE_DIR/tests/browser/node_modules/puppeteer-core" ]; then
  export CHROMIUM PICKETD_URL BROWSER_DIR="$H_DIR/browser" HOME="$H_DIR"
  mkdir -p "$BROWSER_DIR"
  node "$PICKET_SOURCE_DIR/tests/browser/evil_page.mjs" || h_fail "evil_page.mjs (see above)"
else
  echo "SKIP: the chromium check (no chromium, or no tests/browser/node_modules: scripts/deps)"
fi

# With --auth-file the Host check is off unless --allowed-hosts names hosts
# (docs/picketd.md): every call that reads or changes locks needs a token.
T=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
echo "ops sha256:$(sha "$T") * lock,read,list,admin" > "$H_DIR/auth"
h_start_picketd --auth-file "$H_DIR/auth"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: picket.internal.example' "$PICKETD_URL/healthz")
[ "$code" = 200 ] || h_fail "--auth-file, --allowed-hosts auto: Host picket.internal.example got $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: rebind.evil.example' "$PICKETD_URL/v1/locks")
[ "$code" = 401 ] || h_fail "--auth-file: a rebound page without the token got $code, not 401"
h_start_picketd --allowed-hosts '*'
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: any.example' "$PICKETD_URL/v1/locks")
[ "$code" = 200 ] || h_fail "--allowed-hosts '*': Host any.example got $code"

for bad in "--allowed-hosts a/b" "--allowed-hosts bad_host!" "--loopback-trust maybe"; do
  # shellcheck disable=SC2086
  "$PICKET_BIN_DIR/picketd" --redis "$REDIS_URL" --listen 127.0.0.1:0 $bad 2> "$H_DIR/bad.err"
  rc=$?
  [ "$rc" -eq 2 ] || h_fail "picketd $bad exited $rc, not 2"
  grep -q -- "${bad%% *}" "$H_DIR/bad.err" || h_fail "picketd $bad: no message naming the flag"
done
for pid in $PICKETD_PID $NAMED_PID $NOTRUST_PID; do kill -0 "$pid" || h_fail "a picketd died"; done
! grep -E 'AddressSanitizer|runtime error|LeakSanitizer' "$H_DIR/picketd.log" || h_fail "sanitizer report"
echo "test_browser: ok"
