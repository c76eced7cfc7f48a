# picket-bench (issue 7): a short, low-load run against a harness-started
# redis-server and picketd that must report ops and no errors. No timing
# targets here: those live in bench/run, not in tests.
picket_shell_test(bench_smoke ${CMAKE_CURRENT_LIST_DIR}/test_bench.sh LABELS bench integration
                  TIMEOUT 90)
# bench/fence_memory (issue 13), small: 300 names, a 300 ms idle TTL. It must
# run and show every counter gone once idle; docs/fences.md's figures come from
# the full run (100,000 names).
picket_shell_test(fence_memory_smoke ${CMAKE_CURRENT_LIST_DIR}/test_fence_memory.sh
                  LABELS bench integration TIMEOUT 180)
