# Issue 39, items 1 and 5: a scoped token's listing (pages, cursors,
# errors) names nothing outside its prefixes; listings are paced per
# token; a 503 does not name the store. On Redis and on etcd.
picket_shell_test(tenant_listing ${CMAKE_CURRENT_LIST_DIR}/test_listing.sh
                  LABELS "tenant" TIMEOUT 120)
add_test(NAME tenant_listing_etcd COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_listing.sh)
set_tests_properties(tenant_listing_etcd PROPERTIES TIMEOUT 120 LABELS "tenant;etcd"
                     ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
