#!/usr/bin/env bash
# test_fencedkv_pgsql.sh: the PostgreSQL form of the fence check, exactly as
# proto/README.md documents it, against a throwaway PostgreSQL server (its
# own data dir and unix socket in a temp dir, removed on exit).
#
# Each "-- pg:NAME" block of the README is PREPAREd verbatim and run:
#   - admit: higher and equal fences are admitted, a lower one gets no row
#     and changes nothing;
#   - admit under concurrency: while a transaction that admitted fence 7 is
#     still open, a writer with fence 6 must wait for it and then be refused
#     (a read-then-write without the row lock would admit it);
#   - highest, and the per-row form (row-schema, row-write).
set -euo pipefail
: "${PICKET_SOURCE_DIR:?PICKET_SOURCE_DIR must name the source tree}"
README="$PICKET_SOURCE_DIR/proto/README.md"

fail() { echo "FAIL: $*" >&2; [ -f "${D:-}/pg.log" ] && tail -n 20 "$D/pg.log" >&2; exit 1; }

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ] || fail "PostgreSQL server binaries not found (package postgresql, see scripts/deps)"

D=$(mktemp -d /tmp/picket-pg-XXXXXX)
AS=()
if [ "$(id -u)" -eq 0 ]; then # initdb refuses to run as root
  chown postgres "$D"
  AS=(runuser -u postgres --)
fi
cleanup() {
  "${AS[@]}" "$PGBIN/pg_ctl" -D "$D/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$D"
}
trap cleanup EXIT

"${AS[@]}" "$PGBIN/initdb" -D "$D/data" -A trust -U picket -E UTF8 --no-sync >"$D/initdb.log" 2>&1 ||
  fail "initdb: $(tail -n 3 "$D/initdb.log")"
"${AS[@]}" "$PGBIN/pg_ctl" -D "$D/data" -l "$D/pg.log" -w -t 30 \
  -o "-k $D -c listen_addresses='' -c fsync=off" start >/dev/null || fail "PostgreSQL did not start"

export PGOPTIONS='-c client_min_messages=warning'
psql_run() { psql -h "$D" -U picket -d postgres -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# The README's "-- pg:NAME" block: from that line to the end of its ```sql block.
block() {
  awk -v tag="-- pg:$1" '
    index($0, tag) == 1 && (length($0) == length(tag) || substr($0, length(tag) + 1, 1) == " ") { on = 1 }
    on && /^```/ { exit }
    on { print }' "$README"
}
ADMIT=$(block admit)
HIGHEST=$(block highest)
ROWWRITE=$(block row-write)
for b in schema admit highest row-schema row-write; do
  [ -n "$(block $b)" ] || fail "proto/README.md has no '-- pg:$b' block"
done
PREPARE="PREPARE admit(text, bigint) AS $ADMIT
PREPARE highest(text) AS $HIGHEST"

expect() { # expect WHAT GOT WANT
  [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
  echo "ok - $1"
}

# Schema (twice: IF NOT EXISTS), then single-session rules.
psql_run -c "$(block schema)" -c "$(block schema)"
run() { printf '%s\n%s\n' "$PREPARE" "$1" | psql_run; }
expect "first admit" "$(run "EXECUTE admit('inventory-sync', 5);")" 5
expect "higher admitted" "$(run "EXECUTE admit('inventory-sync', 6);")" 6
expect "equal admitted" "$(run "EXECUTE admit('inventory-sync', 6);")" 6
expect "lower refused (no row)" "$(run "EXECUTE admit('inventory-sync', 5);")" ""
expect "highest unchanged" "$(run "EXECUTE highest('inventory-sync');")" 6
expect "highest of an unknown lock" "$(run "EXECUTE highest('never');")" 0
expect "locks are independent" "$(run "EXECUTE admit('orders', 1);")" 1

# Concurrency: session A admits 7 and keeps its transaction open; session B
# (fence 6) starts once A holds the row, must wait, and then gets no row.
rm -f "$D/a-holds"
printf '%s\n%s\n' "$PREPARE" "BEGIN;
EXECUTE admit('inventory-sync', 7);
\\! touch $D/a-holds
SELECT pg_sleep(3);
COMMIT;" | psql_run >"$D/a.out" 2>&1 &
A=$!
for _ in $(seq 1 500); do [ -e "$D/a-holds" ] && break; sleep 0.02; done
[ -e "$D/a-holds" ] || fail "session A did not admit"
t0=$(date +%s%N)
B=$(run "EXECUTE admit('inventory-sync', 6);")
t1=$(date +%s%N)
wait "$A" || fail "session A: $(cat "$D/a.out")"
expect "session A admitted 7" "$(head -n 1 "$D/a.out")" 7
expect "concurrent lower fence refused after waiting" "$B" ""
expect "highest after both" "$(run "EXECUTE highest('inventory-sync');")" 7
# B waited for A's commit (A sleeps 3 s after taking the row lock).
[ $(( (t1 - t0) / 1000000 )) -ge 500 ] || fail "session B did not wait for A's row lock"
echo "ok - session B waited $(( (t1 - t0) / 1000000 )) ms for A's commit"

# The per-row form.
psql_run -c "$(block row-schema)"
psql_run -c "INSERT INTO kv (key, value, version, fence) VALUES ('stock', '100', 1, 5);"
rw() { printf 'PREPARE roww(text, bigint, text) AS %s\n%s\n' "$ROWWRITE" "$1" | psql_run; }
expect "row: newer fence admitted" "$(rw "EXECUTE roww('stock', 6, '99');")" 2
expect "row: equal fence admitted" "$(rw "EXECUTE roww('stock', 6, '98');")" 3
expect "row: older fence refused" "$(rw "EXECUTE roww('stock', 5, '1');")" ""
expect "row: value unchanged" "$(psql_run -c "SELECT value || ' ' || version || ' ' || fence FROM kv WHERE key = 'stock';")" "98 3 6"
echo "PASS: PostgreSQL fence statements of proto/README.md"
