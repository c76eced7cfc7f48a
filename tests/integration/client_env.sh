# client_env.sh: the picketd processes the language clients' suites
# (test_python.sh, test_go.sh, test_node.sh) run against, on one throwaway
# Redis, and the PICKET_TEST_* variables that tell the suites where they
# are. Sourced after harness.sh.
#
#   client_picketds PREFIX   starts, and exports the URL of:
#     PICKET_TEST_URL          a plain picketd (--max-ttl-ms 600000), its pid
#                              in PICKET_TEST_PICKETD_PID
#     PICKET_TEST_AUTH_URL     one with --auth-file: tokens made here (only
#                              their SHA-256 in the file), in
#                              PICKET_TEST_T_{LOCKER,READER,NOREAD,ONE,FAST,OPS},
#                              on names under PREFIX (one. and fast. for ONE
#                              and FAST)
#     PICKET_TEST_SIGNED_URL   one signing fences (--fence-key-file), and
#     PICKET_TEST_KV_URL       a fenced-kv verifying them with the same key
#     PICKET_TEST_TLS_URL      one on HTTPS (tls_certs.sh): its CA in
#                              PICKET_TEST_TLS_CA, another in _TLS_OTHER_CA
#     PICKET_TEST_NOREDIS_URL  one whose Redis is missing (503)
#   and PICKET_TEST_OPENAPI, PICKET_TEST_TMP.
#   client_kv NAME [FLAGS]   starts a fenced-kv; its URL in KV.
#   client_example_ok ...    judges an inventory example's run (below).

client_kv() {
  local n=$1
  shift
  "$PICKET_BIN_DIR/fenced-kv" --listen 127.0.0.1:0 --db "$H_DIR/$n.db" --port-file "$H_DIR/$n.port" \
    "$@" > "$H_DIR/$n.log" 2>&1 &
  H_PIDS="$H_PIDS $!"
  for _ in $(seq 1 500); do [ -s "$H_DIR/$n.port" ] && break; sleep 0.02; done
  [ -s "$H_DIR/$n.port" ] || h_fail "fenced-kv $n did not start"
  KV="http://127.0.0.1:$(cat "$H_DIR/$n.port")"
}

client_picketds() {
  local prefix=$1
  h_start_redis

  h_start_picketd --max-ttl-ms 600000
  export PICKET_TEST_URL=$PICKETD_URL PICKET_TEST_PICKETD_PID=$PICKETD_PID

  sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
  tok() { printf 'pkt_%s_%s' "$1" "$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"; }
  export PICKET_TEST_T_LOCKER=$(tok locker) PICKET_TEST_T_READER=$(tok reader)
  export PICKET_TEST_T_NOREAD=$(tok noread) PICKET_TEST_T_ONE=$(tok one)
  export PICKET_TEST_T_FAST=$(tok fast) PICKET_TEST_T_OPS=$(tok ops)
  cat > "$H_DIR/auth" <<AUTH
locker sha256:$(sha "$PICKET_TEST_T_LOCKER") $prefix     lock,read
reader sha256:$(sha "$PICKET_TEST_T_READER") $prefix     read
noread sha256:$(sha "$PICKET_TEST_T_NOREAD") $prefix     lock
one    sha256:$(sha "$PICKET_TEST_T_ONE")    one.    lock max_leases=1
fast   sha256:$(sha "$PICKET_TEST_T_FAST")   fast.   lock acquire_rate=2
ops    sha256:$(sha "$PICKET_TEST_T_OPS")    $prefix     lock,read,list,admin
AUTH
  h_start_picketd --auth-file "$H_DIR/auth"
  export PICKET_TEST_AUTH_URL=$PICKETD_URL

  printf 'k1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$H_DIR/keys"
  chmod 600 "$H_DIR/keys"
  h_start_picketd --fence-key-file "$H_DIR/keys"
  export PICKET_TEST_SIGNED_URL=$PICKETD_URL
  client_kv kv-signed --fence-key-file "$H_DIR/keys"
  export PICKET_TEST_KV_URL=$KV

  local k="$H_DIR/tls"
  mkdir -p "$k"
  bash "$PICKET_SOURCE_DIR/tests/integration/tls_certs.sh" "$k" ||
    h_fail "openssl could not make the test certificates"
  h_start_picketd --tls-cert "$k/srvA.crt" --tls-key "$k/srvA.key"
  export PICKET_TEST_TLS_URL="https://127.0.0.1:$PICKETD_PORT" PICKET_TEST_TLS_CA="$k/caA.crt"
  export PICKET_TEST_TLS_OTHER_CA="$k/caB.crt"

  REDIS_URL="unix://$H_DIR/no-redis.sock" h_start_picketd --redis-timeout-ms 100
  export PICKET_TEST_NOREDIS_URL=$PICKETD_URL

  export PICKET_TEST_OPENAPI="$PICKET_SOURCE_DIR/proto/openapi.yaml" PICKET_TEST_TMP=$H_DIR
  unset PICKET_TOKEN
}

# client_example_ok WHAT OUTPUT STALE_RE KV KEY: an inventory example (3
# workers, 4 rounds, 100 in stock) printed OUTPUT; it must show its stale
# write refused (a line matching STALE_RE), end exact, and have left 88 at
# KEY in the fenced-kv at KV.
client_example_ok() {
  local what=$1 out=$2 stale=$3 kv=$4 key=$5 last stock
  echo "$out"
  grep -q "$stale" <<<"$out" || h_fail "$what: no stale write refused with 409"
  last=$(tail -n 1 <<<"$out")
  [ "$last" = "final stock=88 expected=88 applied=12" ] || h_fail "$what: last line '$last'"
  stock=$(curl -sS "$kv/kv/$key" | sed -n 's/.*"value":"\([0-9]*\)".*/\1/p')
  [ "$stock" = 88 ] || h_fail "$what: fenced-kv holds stock '$stock', want 88"
}

# client_scheduler_ok WHAT OUTPUT KV KEY: a leader-scheduler example (2
# candidates, 3 ticks each) printed OUTPUT; each candidate must have led
# with its own term, the first leader's replayed write been refused, and
# KEY in the fenced-kv at KV hold 6 runs.
client_scheduler_ok() {
  local what=$1 out=$2 kv=$3 key=$4 last n
  echo "$out"
  grep -q '^stale write refused: 409' <<<"$out" || h_fail "$what: no stale term refused with 409"
  last=$(tail -n 1 <<<"$out")
  [ "$last" = "final runs=6 expected=6 leaders=2" ] || h_fail "$what: last line '$last'"
  n=$(grep -c ' leads term [0-9]*$' <<<"$out")
  [ "$n" = 2 ] || h_fail "$what: $n leaderships, want 2"
  n=$(curl -sS "$kv/kv/$key" | sed -n 's/.*"value":"\([0-9]*\)".*/\1/p')
  [ "$n" = 6 ] || h_fail "$what: fenced-kv holds runs '$n', want 6"
}
