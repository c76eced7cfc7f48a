# Redis Cluster (issue 14): picketd against a real three-shard cluster
# (3 primaries with 2 replicas each, tests/harness/redis_cluster.py), one
# cluster shared by every case: locks spread over the shards, the API and
# the spec's examples in cluster mode, waiters on each shard, a slot
# migration and a primary's SIGKILL under load. See tests/fault/test_cluster.py.
# SERIAL: nine redis-servers and a load on a 2-core machine.
picket_shell_test(fault_cluster ${CMAKE_CURRENT_LIST_DIR}/test_cluster.sh
                  LABELS fault TIMEOUT 300 SERIAL)
