# The fault suite (issue 6): real redis-server and picketd processes killed,
# paused, restarted, slowed and failed over. Label `fault`; SERIAL because
# they measure recovery times and a loaded 2-core machine would blur them.
set(_d ${CMAKE_CURRENT_LIST_DIR})
picket_check_test(fault_redis SOURCES ${_d}/test_redis_faults.c LABELS fault TIMEOUT 60 SERIAL)
