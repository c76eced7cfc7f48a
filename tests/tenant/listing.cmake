# Issue 39, items 1 and 5: a scoped token's listing (pages, cursors,
# errors) names nothing outside its prefixes; listings are paced per
# token; a 503 does not name the store. On Redis and on etcd.
picket_shell_test(tenant_listing ${CMAKE_CURRENT_LIST_DIR}/test_listing.sh
                  LABELS "tenant" TIMEOUT 120)
add_test(NAME tenant_listing_etcd COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_listing.sh)
set_tests_properties(tenant_listing_etcd PROPERTIES TIMEOUT 120 LABELS "tenant;etcd"
                     ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
# Issue 40: a token prefix of 198-200 bytes got an elections' twin cut to
# 200 bytes, which held the 197-byte election its first 197 bytes name: a
# limit-1 page's cursor named that election while it was held (Redis; on
# etcd the range's cursor named it), and a cursor crafted to name it was
# accepted. Such a range now gets no twin. test_listing.py, long_prefix().
foreach(backend redis etcd)
  set(t tenant_listing_long_prefix)
  if(backend STREQUAL etcd)
    set(t tenant_listing_long_prefix_etcd)
  endif()
  add_test(NAME ${t} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_listing.sh)
  set_tests_properties(${t} PROPERTIES TIMEOUT 120 LABELS "tenant"
                       ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=${backend};LISTING_LONG_PREFIX=1")
endforeach()
