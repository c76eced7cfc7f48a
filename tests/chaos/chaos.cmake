# The fault-injection suite (issue 25): tests/chaos/README.md.
# chaos_checker and chaos_netns test the suite's own parts (the checker
# on crafted histories, the partitions and clocks on real processes);
# chaos_quick is the quick mode of tests/chaos/run (fixed seeds on each
# topology plus one random seed, printed); chaos_mutants runs it against
# deliberately broken builds and unsafe flags and passes only if the
# checker finds each breakage. chaos_netns is SERIAL: it measures the
# partitions and clock steps it makes. chaos_quick and chaos_mutants are not
# (issue 41): their verdicts are the checker's safety rules, which hold or
# break whatever the timing, and the runs mostly wait (TTLs, pauses,
# failovers), so they take one of ctest's two slots while the other suites
# run beside them instead of holding the whole machine for eight minutes.
# They never run together (one topology of redis-servers, sentinels and
# two picketd at a time: RESOURCE_LOCK chaos).
picket_shell_test(chaos_checker ${CMAKE_CURRENT_LIST_DIR}/test_checker.sh LABELS chaos TIMEOUT 120)
picket_shell_test(chaos_netns ${CMAKE_CURRENT_LIST_DIR}/test_netns.sh LABELS chaos TIMEOUT 180 SERIAL)
picket_shell_test(chaos_quick ${CMAKE_CURRENT_LIST_DIR}/test_quick.sh LABELS chaos TIMEOUT 900)
picket_shell_test(chaos_mutants ${CMAKE_CURRENT_LIST_DIR}/test_mutants.sh LABELS "chaos;mutants"
                  TIMEOUT 900)
set_tests_properties(chaos_quick chaos_mutants PROPERTIES RESOURCE_LOCK chaos)
