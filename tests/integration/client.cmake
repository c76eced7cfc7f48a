# Integration tests of libpicket and the `picket` command (client/), against
# a real redis-server and a real picketd from tests/harness.
#
#   client_lib      library calls: every success and failure path, local
#                   deadlines against Redis's PTTL, retries, timeouts, 503
#   client_keeper   the renewal thread: pauses of picketd shorter and longer
#                   than the TTL, a lease deleted in Redis, failed renewals
#   client_cli      picket acquire/renew/release/status, ls/show/break (also
#                   under --auth-file) and bad flags
#   client_run      picket run: environment, exit status, signals, lost lease
#   client_install  cmake --install, then client/examples/hello.c built with
#                   pkg-config against the installed library and run
#   client_tls      libpicket against an HTTPS picketd: ca_file, a keeper's
#                   cloned handle, untrusted servers, mutual TLS without a
#                   certificate (issue 16)
#   client_secrets  picket --cacert/PICKET_CACERT, --token-file/PICKET_TOKEN,
#                   --lease-file/PICKET_LEASE, `picket token new`, and run
#   client_events   lock events: picket_watch (every event with its fences,
#                   refusals, bounds, interrupt) and the keeper's watching
#                   thread (a break, another's grant or an expiry reported at
#                   once; stop, fallback to renewing only, reopening); prints
#                   the break-to-on_lost latency
#   client_election libpicket's elections: campaign, term, value,
#                   leader_exists, proclaim, renew, resign (the hand-over
#                   time printed), lost, a keeper of a leadership, observe
#   client_elect    picket elect/leader/proclaim/resign: three `picket elect`
#                   keep exactly one job running; hand-over on resign
#                   (SIGTERM) and on SIGKILL within the TTL; fenced-kv
#                   refuses the deposed leader's term (figures printed)
#   client_elect_etcd the same on a one-member etcd (PICKET_TEST_BACKEND=etcd)
#   client_elect_topologies  the same scenario on Redis Sentinel (a primary,
#                   a replica, three sentinels) and Redis Cluster (three
#                   primaries with a replica each), a picketd with its
#                   defaults in front of each (test_cli_elect_topologies.py);
#                   SERIAL: eleven redis-servers, and hand-over bounds
if(NOT TARGET picket_static OR NOT TARGET picketd)
  return()
endif()

picket_check_test(client_lib SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_client.c
                  LIBS picket_static LABELS integration client TIMEOUT 120)
set_property(TEST client_lib APPEND PROPERTY ENVIRONMENT CK_RUN_SUITE=lib)
add_dependencies(client_lib picketd)

add_test(NAME client_keeper COMMAND client_lib)
set_tests_properties(client_keeper PROPERTIES TIMEOUT 120 LABELS "integration;client"
                     FIXTURES_REQUIRED contract
                     ENVIRONMENT "${PICKET_TEST_ENV};CK_RUN_SUITE=keeper")

picket_check_test(client_events SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_client_events.c
                  LIBS picket_static LABELS integration client TIMEOUT 180)
add_dependencies(client_events picketd)

picket_check_test(client_tls SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_client_tls.c
                  LIBS picket_static LABELS integration client TIMEOUT 120)
add_dependencies(client_tls picketd)
picket_shell_test(client_secrets ${CMAKE_CURRENT_LIST_DIR}/test_cli_secrets.sh
                  LABELS integration client TIMEOUT 120)

picket_shell_test(client_cli ${CMAKE_CURRENT_LIST_DIR}/test_cli.sh
                  LABELS integration client TIMEOUT 180)
picket_shell_test(client_run ${CMAKE_CURRENT_LIST_DIR}/test_cli_run.sh
                  LABELS integration client TIMEOUT 120)
picket_shell_test(client_install ${CMAKE_CURRENT_LIST_DIR}/test_client_install.sh
                  ARGS ${CMAKE_BINARY_DIR} "${PICKET_SANITIZE}" LABELS integration client
                  TIMEOUT 180)
picket_check_test(client_election SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_client_election.c
                  LIBS picket_static LABELS integration client TIMEOUT 120)
add_dependencies(client_election picketd)
if(TARGET fenced-kv)
  picket_shell_test(client_elect ${CMAKE_CURRENT_LIST_DIR}/test_cli_elect.sh
                    LABELS integration client TIMEOUT 120)
  add_test(NAME client_elect_etcd COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_cli_elect.sh)
  set_tests_properties(client_elect_etcd PROPERTIES TIMEOUT 120 LABELS "integration;client;etcd"
                       FIXTURES_REQUIRED contract
                       ENVIRONMENT "${PICKET_TEST_ENV};PICKET_TEST_BACKEND=etcd")
  add_test(NAME client_elect_topologies
           COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/test_cli_elect_topologies.py)
  set_tests_properties(client_elect_topologies PROPERTIES TIMEOUT 180
                       LABELS "integration;client"
                       ENVIRONMENT "${PICKET_TEST_ENV}")
  picket_serial(client_elect_topologies TRUE)
  picket_contract_fixture(client_elect_topologies "integration;client")
endif()
