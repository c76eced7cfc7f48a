# picketd on a real three-member etcd (issue 29) while members die, pause
# and come back under load: no fence twice, no stale write admitted by a
# real fenced-kv, 503 while the quorum is lost. SERIAL: elections and call
# timeouts are what it measures.
picket_check_test(fault_etcd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_etcd_faults.c
                  LABELS "fault;etcd" TIMEOUT 300 SERIAL)
add_dependencies(fault_etcd fenced-kv picketd)
