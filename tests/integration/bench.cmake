# picket-bench (issue 7): a short, low-load run against a harness-started
# redis-server and picketd that must report ops and no errors. No timing
# targets here: those live in bench/run, not in tests.
picket_shell_test(bench_smoke ${CMAKE_CURRENT_LIST_DIR}/test_bench.sh LABELS bench integration
                  TIMEOUT 90)
