# The same suites on etcd (issue 29): each binary runs again with
# PICKET_TEST_BACKEND=etcd, so the harness gives its picketd a one-member
# etcd (--etcd) instead of the Redis it starts (tests/harness/harness.h).
# Their exchanges go to the contract log like every other suite's, so the
# contract check covers both backends. A case that reads or breaks Redis
# directly is registered with REDIS_CASE (picketd_common.h) and left out
# here; one member because these check the API's semantics (the
# three-member faults are etcd_faults).
foreach(t picketd_api picketd_wait picketd_fence picketd_hold picketd_semaphore picketd_rwlock
          picketd_admin picketd_events picketd_elections)
  add_test(NAME ${t}_etcd COMMAND ${t})
  set_tests_properties(${t}_etcd PROPERTIES TIMEOUT 240 LABELS "integration;etcd"
                       FIXTURES_REQUIRED contract
                       ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
endforeach()
# Signed fences on etcd: tests/harness/harness.sh switches the same way.
add_test(NAME picketd_fence_token_etcd
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_fence_token.sh)
set_tests_properties(picketd_fence_token_etcd PROPERTIES TIMEOUT 120 LABELS "integration;etcd"
                     FIXTURES_REQUIRED contract
                     ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
