# The etcd backend (issue 29): its gateway client against a real
# three-member etcd cluster (tests/harness/harness_etcd.c). SERIAL: it
# kills and pauses members, and its timing bounds want a quiet machine.
set(_d ${CMAKE_CURRENT_LIST_DIR})
picket_check_test(etcd_client SOURCES ${_d}/test_etcd_client.c LIBS picketd_store_etcd
                  LABELS etcd integration TIMEOUT 240 SERIAL)
# picketd on an etcd that wants TLS, a client certificate and a password.
picket_shell_test(picketd_etcd_secure ${CMAKE_CURRENT_LIST_DIR}/test_etcd_secure.sh
                  LABELS "integration;etcd" TIMEOUT 120)
# deploy/etcd: its three-member configuration and its README's user, role
# and flags, run on loopback.
picket_shell_test(deploy_etcd ${CMAKE_CURRENT_LIST_DIR}/test_deploy_etcd.sh
                  LABELS "integration;etcd" TIMEOUT 120)
# Many etcd calls in flight per event loop (issue 41): 16 clients on one
# loop, every call answered, picket_etcd_calls_in_flight_max above 1 and
# within --etcd-calls-in-flight.
picket_check_test(picketd_inflight_etcd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_etcd_inflight.c
                  LABELS "integration;etcd" TIMEOUT 240)
add_dependencies(picketd_inflight_etcd picketd)
