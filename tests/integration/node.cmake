# The Node/TypeScript client (client/node, issue 30): dist/ rebuilt with the
# pinned tsc and compared with the checked-in one, the client's wire types
# checked against types generated from proto/openapi.yaml, then its
# `node --test` suites against real picketd processes (plain, --auth-file,
# --fence-key-file, TLS, a paused one, one without Redis) and a real
# fenced-kv, and examples/node/inventory-sync.mjs guarding fenced-kv writes.
if(NOT TARGET picketd OR NOT TARGET fenced-kv)
  return()
endif()
picket_shell_test(client_node ${CMAKE_CURRENT_LIST_DIR}/test_node.sh
                  LABELS integration client node TIMEOUT 300)
