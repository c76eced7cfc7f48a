# picketd's integration suites (issue 2 and 5): real redis-server + picketd.
set(_d ${CMAKE_CURRENT_LIST_DIR})
picket_check_test(picketd_api SOURCES ${_d}/test_api.c LABELS integration TIMEOUT 120)
picket_check_test(picketd_redis SOURCES ${_d}/test_redis.c LABELS integration TIMEOUT 180)
picket_check_test(picketd_wait SOURCES ${_d}/test_wait.c LABELS integration TIMEOUT 240 SERIAL)
picket_check_test(picketd_pipeline SOURCES ${_d}/test_pipeline.c LABELS integration TIMEOUT 120)
