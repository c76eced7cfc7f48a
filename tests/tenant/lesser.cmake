# Issue 39, item 5 (three lesser leaks): a `broken` event and lease_lost
# name the admin token only to admin readers; /metrics names no lock and,
# for a scoped metrics token, no token; a refused rwlock writer does not
# keep readers out. On Redis and on etcd.
picket_shell_test(tenant_lesser ${CMAKE_CURRENT_LIST_DIR}/test_lesser.sh
                  LABELS "tenant" TIMEOUT 180)
add_test(NAME tenant_lesser_etcd COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_lesser.sh)
set_tests_properties(tenant_lesser_etcd PROPERTIES TIMEOUT 180 LABELS "tenant;etcd"
                     ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
