# The fault-injection suite (issue 25): tests/chaos/README.md.
# chaos_checker and chaos_netns test the suite's own parts (the checker
# on crafted histories, the partitions and clocks on real processes);
# chaos_quick is the quick mode of tests/chaos/run (fixed seeds on each
# topology plus one random seed, printed); chaos_mutants runs it against
# deliberately broken builds and unsafe flags and passes only if the
# checker finds each breakage. SERIAL: each run is a whole topology of
# redis-servers, sentinels and two picketd on a 2-core machine, and its
# timings (TTLs, failovers) should not compete with other suites.
picket_shell_test(chaos_checker ${CMAKE_CURRENT_LIST_DIR}/test_checker.sh LABELS chaos TIMEOUT 120)
picket_shell_test(chaos_netns ${CMAKE_CURRENT_LIST_DIR}/test_netns.sh LABELS chaos TIMEOUT 180 SERIAL)
picket_shell_test(chaos_quick ${CMAKE_CURRENT_LIST_DIR}/test_quick.sh LABELS chaos TIMEOUT 900 SERIAL)
picket_shell_test(chaos_mutants ${CMAKE_CURRENT_LIST_DIR}/test_mutants.sh LABELS "chaos;mutants"
                  TIMEOUT 900 SERIAL)
