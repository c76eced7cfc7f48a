# picketd's integration suites (issue 2 and 5): real redis-server + picketd.
set(_d ${CMAKE_CURRENT_LIST_DIR})
picket_check_test(picketd_api SOURCES ${_d}/test_api.c LABELS integration TIMEOUT 120)
picket_check_test(picketd_redis SOURCES ${_d}/test_redis.c LABELS integration TIMEOUT 180)
picket_check_test(picketd_wait SOURCES ${_d}/test_wait.c LABELS integration TIMEOUT 240 SERIAL)
picket_check_test(picketd_pipeline SOURCES ${_d}/test_pipeline.c LABELS integration TIMEOUT 120)
# Ambiguous request framing refused (issue 17).
picket_shell_test(picketd_framing ${_d}/test_framing.sh LABELS integration TIMEOUT 60)
# Sentinel mode's credentials (issue 12); its failovers are fault_sentinel.
picket_shell_test(picketd_sentinel_auth ${_d}/test_sentinel_auth.sh LABELS integration TIMEOUT 60)
# The fence itself (issue 13): exact up to 2^63-1, the clock floor, counters
# destroyed between grants, --fence-idle-ttl-ms.
picket_check_test(picketd_fence SOURCES ${_d}/test_fence.c LABELS integration TIMEOUT 120)
# Lock-delay and the hold cap (issue 26).
picket_check_test(picketd_hold SOURCES ${_d}/test_hold.c LABELS integration TIMEOUT 120)
# Semaphores with a fence per permit (issue 26); fenced-kv refuses a paused
# permit holder's write.
picket_check_test(picketd_semaphore SOURCES ${_d}/test_semaphore.c LABELS integration TIMEOUT 120)
add_dependencies(picketd_semaphore fenced-kv)
# Read/write locks (issue 26): readers share, writers exclude and are not
# starved; fenced-kv refuses a paused writer's write.
picket_check_test(picketd_rwlock SOURCES ${_d}/test_rwlock.c LABELS integration TIMEOUT 120)
picket_check_test(picketd_elections SOURCES ${_d}/test_elections.c LABELS integration TIMEOUT 120)
add_dependencies(picketd_elections fenced-kv)
add_dependencies(picketd_rwlock fenced-kv)
# The operators' endpoints (issue 27): listing, the richer GET, break (with
# a real fenced-kv refusing the broken holder), whoami.
picket_check_test(picketd_admin SOURCES ${_d}/test_admin.c LABELS integration TIMEOUT 120)
add_dependencies(picketd_admin fenced-kv)

# The suites that check fence values run twice: once with picketd's default
# floor (clock: fences rise and are at least Redis TIME) and once with
# PICKET_FENCE_FLOOR=none, which picketd reads as --fence-floor and the
# harness as the rule to check (fences 1, 2, 3...).
foreach(t picketd_api picketd_redis picketd_pipeline picketd_fence)
  add_test(NAME ${t}_floor_none COMMAND ${t})
  set_tests_properties(${t}_floor_none PROPERTIES TIMEOUT 180 LABELS integration
                       FIXTURES_REQUIRED contract
                       ENVIRONMENT "${PICKET_TEST_ENV};PICKET_FENCE_FLOOR=none")
endforeach()
# Who may lock what (issue 16): tokens, prefixes, verbs, lease binding,
# quotas, per-address limits and SIGHUP reloads.
picket_shell_test(picketd_auth ${_d}/test_auth.sh LABELS integration TIMEOUT 120)
# TLS (issue 16): --tls-cert/--tls-key/--tls-client-ca, SIGHUP reloads under
# load, mutual TLS; certificates made by openssl at test time.
picket_shell_test(picketd_tls ${_d}/test_tls.sh LABELS integration TIMEOUT 120)
# Signed fences on picketd's side (issue 17): --fence-key-file, fence_token
# in grants and renewals, the picket command, rotation on SIGHUP.
picket_shell_test(picketd_fence_token ${_d}/test_fence_token.sh LABELS integration TIMEOUT 60)
# Lock event streams (issue 27): state, granted, renewed, released,
# expired, broken; across two picketd; bounds, heartbeats, hang-ups.
picket_check_test(picketd_events SOURCES ${_d}/test_events.c LABELS integration TIMEOUT 120)
