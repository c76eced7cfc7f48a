# fenced-kv end to end (examples/fenced-kv): every status path, flags, the
# --no-fence plain store, and restart with the highest fences intact.
picket_check_test(test_fencedkv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fencedkv.c
                  LABELS integration TIMEOUT 120)
add_dependencies(test_fencedkv fenced-kv)

# The PostgreSQL statements of proto/README.md, run verbatim against a
# throwaway PostgreSQL server (package postgresql).
picket_shell_test(test_fencedkv_pgsql ${CMAKE_CURRENT_LIST_DIR}/test_fencedkv_pgsql.sh
                  LABELS integration TIMEOUT 60)
