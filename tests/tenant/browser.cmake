# Issue 39, item 3: a web page in the operator's browser cannot drive
# picketd (cross-site break, text/plain acquire, DNS rebinding), the
# console still works, --allowed-hosts and --loopback-trust do what they
# say. Redis is enough: the checks come before any store call.
picket_shell_test(tenant_browser ${CMAKE_CURRENT_LIST_DIR}/test_browser.sh
                  LABELS "tenant" TIMEOUT 180)
