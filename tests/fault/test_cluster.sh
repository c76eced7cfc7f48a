#!/usr/bin/env bash
# test_cluster.sh: runs test_cluster.py (it starts and stops its own
# cluster and picketd processes). The fixture's selftest first, so a broken
# fixture fails here with its own message, not as a picketd failure.
set -u
python3 "$PICKET_SOURCE_DIR/tests/harness/redis_cluster.py" selftest --tag cluster-selftest >/dev/null \
  || { echo "FAIL: the Redis Cluster fixture's selftest"; exit 1; }
exec python3 "$PICKET_SOURCE_DIR/tests/fault/test_cluster.py"
