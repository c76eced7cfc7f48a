# Issue 39, item 5: a signed fence token names its kind (lock, permit,
# read, write): a read lease's token is not its writer's, and a plain lock
# named like a semaphore's permit gets no token its store accepts. On
# Redis and on etcd.
picket_shell_test(tenant_kinds ${CMAKE_CURRENT_LIST_DIR}/test_kinds.sh LABELS "tenant" TIMEOUT 120)
add_test(NAME tenant_kinds_etcd COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_kinds.sh)
set_tests_properties(tenant_kinds_etcd PROPERTIES TIMEOUT 120 LABELS "tenant;etcd"
                     ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
