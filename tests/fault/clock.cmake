# Clock steps on Redis (issue 25, found by the chaos suite): a primary's
# clock stepped back, or a failover to a replica whose clock is behind,
# must not keep a lock taken for the length of the step. Real redis-server
# under libfaketime and a real picketd; see tests/fault/test_clock_steps.py.
picket_shell_test(fault_clock_steps ${CMAKE_CURRENT_LIST_DIR}/test_clock_steps.sh
                  LABELS fault TIMEOUT 120)
