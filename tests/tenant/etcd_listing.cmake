# Issue 39, item 4: one tenant's contents cannot break everyone's listing
# on etcd (thousands of read leases between two names, permits with long
# names whose range would pass etcd's 8 MiB reply: paging with limit 1
# lists every name once, never a 502), and --max-readers bounds read
# leases per read/write lock (the reader past it is refused and changes
# nothing): on etcd, and the bound and the listing on Redis.
add_test(NAME tenant_etcd_listing COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_etcd_listing.sh)
set_tests_properties(tenant_etcd_listing PROPERTIES TIMEOUT 180 LABELS "tenant;etcd"
                     ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
picket_shell_test(tenant_max_readers ${CMAKE_CURRENT_LIST_DIR}/test_etcd_listing.sh
                  LABELS "tenant" TIMEOUT 120)
