# picket-bench (issue 7): a short, low-load run against a harness-started
# redis-server and picketd that must report ops and no errors. No timing
# targets here: those live in bench/run, not in tests. About 60 s on an idle
# 2-core machine (bench/run's 19 rows twice at smoke size are most of it).
picket_shell_test(bench_smoke ${CMAKE_CURRENT_LIST_DIR}/test_bench.sh LABELS bench integration
                  TIMEOUT 240)
# bench/fence_memory (issue 13), small: 300 names, a 300 ms idle TTL. It must
# run and show every counter gone once idle; docs/fences.md's figures come from
# the full run (100,000 names).
picket_shell_test(fence_memory_smoke ${CMAKE_CURRENT_LIST_DIR}/test_fence_memory.sh
                  LABELS bench integration TIMEOUT 180)
# bench/elections (issue 40, item 5), small: 5 handovers by resign, 1 by
# death, 0.5 s of campaigns and 50 observers, on Redis and on etcd (Redis
# only without etcd installed). About 15 s; docs/performance.md has the
# full run's figures.
picket_shell_test(elections_bench_smoke ${CMAKE_CURRENT_LIST_DIR}/test_elections_bench.sh
                  LABELS bench integration TIMEOUT 150)
# bench/etcd_peer.py (issue 42, item 4): the hand-written etcd lock of
# bench/run's peer rows, about 2 s against a one-member etcd. About 5 s.
picket_shell_test(etcd_peer_smoke ${CMAKE_CURRENT_LIST_DIR}/test_etcd_peer.sh LABELS bench integration
                  TIMEOUT 60)
