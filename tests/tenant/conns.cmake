# Issue 39, item 2: a token's connections are bounded
# (--max-connections-per-token: 429 too_many_connections, then the close)
# and end when SIGHUP removes the token. Redis only: connections do not
# depend on the store.
picket_shell_test(tenant_conns ${CMAKE_CURRENT_LIST_DIR}/test_conns.sh
                  LABELS "tenant" TIMEOUT 120)
