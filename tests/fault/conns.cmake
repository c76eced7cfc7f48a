# Connection floods (issues 16 and 28): thousands of slow sockets from one
# address, or from many (16 loopback addresses, one IPv6 /64), against real
# picketd and redis-server: the cap per client address group
# (--max-connections-per-ip, --ipv6-prefix-len), the slots kept for tokens
# (--reserved-auth-connections) and the whole-request deadline
# (--request-timeout-ms) must keep honest clients served. Runs in a private
# network namespace where it can make one. See docs/hostile-input.md.
picket_shell_test(fault_conns ${CMAKE_CURRENT_LIST_DIR}/test_conns.sh
                  LABELS fault TIMEOUT 120 SERIAL)
