# The fault suite (issue 6): real redis-server and picketd processes killed,
# paused, restarted, slowed and failed over. Label `fault`; SERIAL because
# they measure recovery times and a loaded 2-core machine would blur them.
set(_d ${CMAKE_CURRENT_LIST_DIR})
picket_check_test(fault_redis SOURCES ${_d}/test_redis_faults.c LABELS fault TIMEOUT 120 SERIAL)
picket_shell_test(fault_no_persistence ${_d}/test_no_persistence.sh LABELS fault TIMEOUT 60 SERIAL)
picket_shell_test(fault_paused_holder ${_d}/test_paused_holder.sh LABELS fault TIMEOUT 60 SERIAL)
picket_check_test(fault_failover SOURCES ${_d}/test_failover.c ${_d}/fault_proxy.c LABELS fault TIMEOUT 60 SERIAL)
picket_check_test(fault_two_picketd SOURCES ${_d}/test_two_picketd.c LABELS fault TIMEOUT 60 SERIAL)
# The reproducers of the picketd defects this suite found (docs/failures.md and CHANGELOG.md,
# "Defects found"), fixed in 9999b3f.
picket_check_test(fault_min_replicas SOURCES ${_d}/test_min_replicas.c LABELS fault TIMEOUT 120 SERIAL)
picket_check_test(fault_silent_drop SOURCES ${_d}/test_silent_drop.c ${_d}/fault_proxy.c LABELS fault TIMEOUT 60 SERIAL)
picket_check_test(fault_client_gone SOURCES ${_d}/test_client_gone.c LABELS fault TIMEOUT 60 SERIAL)
picket_check_test(fault_sentinel SOURCES ${_d}/test_sentinel.c ${_d}/sentinel_group.c ${_d}/fault_proxy.c LABELS fault TIMEOUT 300 SERIAL)
# Leader elections under faults (issue 40), over plain HTTP: a leader
# SIGKILLed or SIGSTOPped past its TTL, resigns handing over under load,
# picketd restarted (test_elections.py, one redis-server, picketd and
# fenced-kv shared by the cases); and through Sentinel failovers, forced
# and a killed primary (test_election_failover.c, on sentinel_group.c).
# SERIAL: handover times are what they measure.
picket_shell_test(fault_elections ${_d}/test_elections.sh LABELS fault TIMEOUT 120 SERIAL)
picket_check_test(fault_election_failover SOURCES ${_d}/test_election_failover.c
                  ${_d}/sentinel_group.c ${_d}/fault_proxy.c LABELS fault TIMEOUT 180 SERIAL)
