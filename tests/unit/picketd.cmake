# Unit tests of picketd's configuration and of the shared picket_proto rules.
set(_d ${CMAKE_CURRENT_LIST_DIR})
picket_check_test(unit_config SOURCES ${_d}/test_config.c LIBS picketd_core LABELS unit TIMEOUT 30)
picket_check_test(unit_proto SOURCES ${_d}/test_proto.c LABELS unit TIMEOUT 30)
# The backend seam (issues 29 and 41): no HTTP-side file names a backend, a
# backend reaches the HTTP side only through shared leaves, and server/ has no
# include or call circle (calls read from the objects under the build dir).
add_test(NAME unit_seam
         COMMAND python3 ${_d}/seam_check.py ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} --strict)
set_tests_properties(unit_seam PROPERTIES LABELS unit TIMEOUT 30)
# The listing cursor's text (server/store/cursor.c), which both backends
# write and check.
picket_check_test(unit_cursor SOURCES ${_d}/test_cursor.c LIBS picketd_store_cursor LABELS unit
                  TIMEOUT 30)
# The route table (server/routes.c) against proto/openapi.yaml's paths, and
# requests through it on the fuzzer's in-memory store.
picket_check_test(unit_routes SOURCES ${_d}/test_routes.c ${CMAKE_SOURCE_DIR}/tests/fuzz/store_stub.c
                  LIBS picketd_core picketd_store_cursor LABELS unit TIMEOUT 30)
target_include_directories(unit_routes PRIVATE ${CMAKE_SOURCE_DIR}/tests/fuzz)
