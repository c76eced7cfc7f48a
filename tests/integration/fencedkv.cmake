# fenced-kv end to end (examples/fenced-kv): every status path, flags, the
# --no-fence plain store, a busy database, restart with the highest fences
# intact, and issue 17: signed fences, keys bound to their lock, --max-locks,
# dribbling sockets (the per-address cap and the request deadline).
picket_check_test(test_fencedkv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fencedkv.c LIBS PkgConfig::SQLITE
                  LABELS integration TIMEOUT 120)
add_dependencies(test_fencedkv fenced-kv)

# The PostgreSQL statements of proto/README.md, run verbatim against a
# throwaway PostgreSQL server (package postgresql).
picket_shell_test(test_fencedkv_pgsql ${CMAKE_CURRENT_LIST_DIR}/test_fencedkv_pgsql.sh
                  LABELS integration TIMEOUT 60)

# The inventory incident (examples/inventory-sync), both modes, fixed seed.
# It needs the `picket` command (client/), so it exists only with it.
if(TARGET picket_cli)
  picket_shell_test(test_inventory ${CMAKE_CURRENT_LIST_DIR}/test_inventory.sh
                    LABELS integration TIMEOUT 120)
endif()
