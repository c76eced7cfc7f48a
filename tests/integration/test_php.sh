#!/usr/bin/env bash
# test_php.sh: client/php (the symfony/lock store, issue 18, and the
# symfony/semaphore store, issue 26, with symfony's own store test cases in
# client/php/tests/upstream) against real redis-server and picketd
# processes: phpunit runs client/php/tests with
# PICKET_URL (a plain picketd), PICKET_AUTH_URL + PICKET_TEST_TOKEN (one
# with --auth-file and --fence-key-file) and PICKET_KV_URL (a fenced-kv, for
# the leader elections of issue 40). Then examples/php/inventory-sync.php
# runs against a third picketd and that fenced-kv, and the final stock
# must be exact; then examples/php/leader-scheduler.php. A missing php,
# phpunit, symfony/lock or symfony/semaphore fails the test (scripts/deps
# installs them); it never skips.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
PHPDIR="$PICKET_SOURCE_DIR/client/php"
command -v php >/dev/null || h_fail "php not found (scripts/deps installs php-cli)"
command -v phpunit >/dev/null || h_fail "phpunit not found (scripts/deps installs phpunit)"
php -r 'exit(function_exists("curl_init") ? 0 : 1);' || h_fail "php has no curl (php-curl)"
[ -f /usr/share/php/Symfony/Component/Lock/autoload.php ] || h_fail "symfony/lock not found (php-symfony-lock)"
[ -f /usr/share/php/Symfony/Component/Semaphore/autoload.php ] || h_fail "symfony/semaphore not found (php-symfony-semaphore)"

h_start_redis
h_start_picketd
export PICKET_URL=$PICKETD_URL
# One fenced-kv for the election tests (terms as fences) and the examples.
h_start_fenced_kv
export PICKET_KV_URL=$KV_URL

# A token whose SHA-256 is in the auth file (never the token), for the names
# the tests use and the mapped ones; and a fence key, so grants are signed.
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
export PICKET_TEST_TOKEN=pkt_php_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
printf 'php sha256:%s php-test.,h. lock,read\n' "$(sha "$PICKET_TEST_TOKEN")" > "$H_DIR/auth"
printf 'k1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$H_DIR/keys"
h_start_picketd --auth-file "$H_DIR/auth" --fence-key-file "$H_DIR/keys"
export PICKET_AUTH_URL=$PICKETD_URL

unset PICKET_TOKEN
(cd "$PHPDIR" && phpunit --configuration phpunit.xml.dist) || h_fail "phpunit (see above)"

# The examples: their own picketd on this Redis, the fenced-kv above.
h_start_picketd
KV=$KV_URL
out=$(php "$PICKET_SOURCE_DIR/examples/php/inventory-sync.php" --picket "$PICKETD_URL" --kv "$KV" \
  --workers 3 --rounds 4 --initial 100 2>&1) || h_fail "inventory-sync.php: $out"
echo "$out"
last=$(tail -n 1 <<<"$out")
[ "$last" = "final stock=88 expected=88 applied=12" ] || h_fail "inventory-sync.php: last line '$last'"
stock=$(curl -sS "$KV/kv/stock" | sed -n 's/.*"value":"\([0-9]*\)".*/\1/p')
[ "$stock" = 88 ] || h_fail "fenced-kv holds stock '$stock', want 88"
# Leader elections (issue 40): two candidate processes, each leading in
# turn and counting its runs in fenced-kv under its term; the first
# leader's write replayed at the end is refused.
out=$(php "$PICKET_SOURCE_DIR/examples/php/leader-scheduler.php" --picket "$PICKETD_URL" --kv "$KV" \
  --candidates 2 --ticks 3 2>&1) || h_fail "leader-scheduler.php: $out"
echo "$out"
grep -q '^stale write refused: 409 stale_fence' <<<"$out" || h_fail "leader-scheduler.php: the stale write was not refused"
last=$(tail -n 1 <<<"$out")
[ "$last" = "final runs=6 expected=6 leaders=2" ] || h_fail "leader-scheduler.php: last line '$last'"
echo "PASS: php"
