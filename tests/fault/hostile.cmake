# The live abuse test of picketd (issue 6, hostile input): thousands of
# malformed, oversize, slow-loris, idle and half-closed requests against a
# real picketd and redis-server, then it must still serve, with bounded
# memory growth. See docs/hostile-input.md.
picket_shell_test(fault_hostile ${CMAKE_CURRENT_LIST_DIR}/test_hostile.sh
                  LABELS fault TIMEOUT 90 SERIAL)
