# Issue 42, item 5: a token at max_leases asking for a held lock is told
# lock_held (the holder first, as Redis answers), and one token's 16
# clients cycling on free names are never refused as held while its count
# moves under their acquires. On Redis and on etcd.
picket_shell_test(tenant_quota ${CMAKE_CURRENT_LIST_DIR}/test_quota.sh LABELS "tenant" TIMEOUT 240)
add_test(NAME tenant_quota_etcd COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_quota.sh)
set_tests_properties(tenant_quota_etcd PROPERTIES TIMEOUT 240 LABELS "tenant;etcd"
                     ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
