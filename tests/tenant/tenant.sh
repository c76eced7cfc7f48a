# tenant.sh: what the hostile-tenant suite's shell tests share. Source it
# after tests/harness/harness.sh.
#
#   sha TEXT          the SHA-256 of TEXT, as an --auth-file line holds it
#   tok               a new random token (128 bits, hex)
#   tenant_stop PID.. SIGTERM each picketd: each must exit 0, and no
#                     sanitizer may have reported in picketd.log

sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
tok() { od -An -tx1 -N16 /dev/urandom | tr -d ' \n'; }

tenant_stop() {
  local pid rc
  for pid in "$@"; do
    kill -TERM "$pid"; wait "$pid"; rc=$?
    [ "$rc" -eq 0 ] || h_fail "picketd exited $rc on SIGTERM"
  done
  ! grep -E 'AddressSanitizer|runtime error|LeakSanitizer' "$H_DIR/picketd.log" ||
    h_fail "sanitizer report"
}
