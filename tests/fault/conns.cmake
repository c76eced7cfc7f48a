# Connection floods (issue 16): thousands of slow sockets from one address
# against real picketd and redis-server: the cap per client address
# (--max-connections-per-ip) and the whole-request deadline
# (--request-timeout-ms) must keep honest clients served. See
# docs/hostile-input.md.
picket_shell_test(fault_conns ${CMAKE_CURRENT_LIST_DIR}/test_conns.sh
                  LABELS fault TIMEOUT 120 SERIAL)
