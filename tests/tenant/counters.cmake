# Issue 39, item 6: fence counters expire by default (clock floor), so
# names used once leave no keys; a reused name's fence still grows. Redis.
picket_shell_test(tenant_counters ${CMAKE_CURRENT_LIST_DIR}/test_counters.sh LABELS "tenant" TIMEOUT 180)
