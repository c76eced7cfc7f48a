# client/php (issue 18): PicketStore, a symfony/lock store, and
# PicketSemaphoreStore, a symfony/semaphore store (issue 26), under phpunit
# against real picketd processes (one with --auth-file and --fence-key-file),
# leader elections (issue 40, Picket\Election), and examples/php/inventory-sync.php
# and leader-scheduler.php through a real fenced-kv.
if(NOT TARGET picketd OR NOT TARGET fenced-kv)
  return()
endif()
picket_shell_test(client_php ${CMAKE_CURRENT_LIST_DIR}/test_php.sh
                  LABELS integration client php TIMEOUT 180)
