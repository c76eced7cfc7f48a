#!/usr/bin/env bash
# test_etcd_listing.sh: a tenant's contents against everyone's listing
# (issue 39, item 4). Starts the store (one etcd member with
# PICKET_TEST_BACKEND=etcd, else redis-server) and a picketd with
# --max-readers; test_etcd_listing.py fills it and pages.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
. "$PICKET_SOURCE_DIR/tests/tenant/tenant.sh"
h_start_redis
if [ "${PICKET_TEST_BACKEND:-}" = etcd ]; then
  export MAX_READERS=3000 ETCD_URL
else
  export MAX_READERS=40 REDIS_SOCK
fi
h_start_picketd --max-readers "$MAX_READERS"
python3 "$PICKET_SOURCE_DIR/tests/tenant/test_etcd_listing.py" "$PICKETD_PORT" || h_fail "test_etcd_listing.py"
tenant_stop "$PICKETD_PID"
echo "test_etcd_listing: ok (${PICKET_TEST_BACKEND:-redis})"
