# Fuzzing picketd's request path (server/api.c) with the in-memory store of
# tests/fuzz/store_stub.c; see docs/hostile-input.md.
#
# Every build: fuzz_api_replay runs the seed corpus through the target's
# checks (no libFuzzer needed, so gcc builds run it in each ctest), and the
# corpus is checked to be what proto/openapi.yaml's examples give.
#
# -DPICKET_FUZZ=ON (clang; its own build tree, see scripts/test.d/fuzz.sh):
# fuzz_api, the libFuzzer binary, with picketd_core and picket_proto
# instrumented for coverage and built with ASan+UBSan. Build it with
# `cmake --build DIR --target fuzz_api`.
set(_fz ${CMAKE_CURRENT_LIST_DIR})

find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME fuzz_corpus_fresh
           COMMAND ${Python3_EXECUTABLE} ${_fz}/gen_corpus.py --check
                   ${PROJECT_SOURCE_DIR}/proto/openapi.yaml ${_fz}/corpus)
  set_tests_properties(fuzz_corpus_fresh PROPERTIES LABELS fuzz TIMEOUT 30)
endif()

if(NOT PICKET_FUZZ)
  add_executable(fuzz_api_replay ${_fz}/fuzz_api.c ${_fz}/store_stub.c ${_fz}/fuzz_replay.c)
  target_include_directories(fuzz_api_replay PRIVATE ${_fz})
  target_link_libraries(fuzz_api_replay PRIVATE picketd_core picketd_store_cursor)
  add_test(NAME fuzz_corpus_replay COMMAND fuzz_api_replay ${_fz}/corpus)
  set_tests_properties(fuzz_corpus_replay PROPERTIES LABELS fuzz TIMEOUT 60)
  # The --auth-file parser (issue 16), over its own seeds.
  add_executable(fuzz_auth_replay ${_fz}/fuzz_auth.c ${_fz}/fuzz_replay.c)
  target_link_libraries(fuzz_auth_replay PRIVATE picketd_core)
  add_test(NAME fuzz_auth_corpus_replay COMMAND fuzz_auth_replay ${_fz}/auth_corpus)
  set_tests_properties(fuzz_auth_corpus_replay PROPERTIES LABELS fuzz TIMEOUT 60)
else()
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PICKET_FUZZ needs clang (libFuzzer): CC=clang cmake -DPICKET_FUZZ=ON ...")
  endif()
  set(_fz_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # Coverage feedback must reach into the code under test, not only into
  # the harness; whoever links these libraries gets the sanitizer runtime.
  foreach(lib picketd_core picketd_store_cursor picket_proto)
    target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link ${_fz_san})
    target_link_options(${lib} INTERFACE ${_fz_san})
  endforeach()
  add_executable(fuzz_api ${_fz}/fuzz_api.c ${_fz}/store_stub.c)
  target_include_directories(fuzz_api PRIVATE ${_fz})
  target_compile_options(fuzz_api PRIVATE -fsanitize=fuzzer ${_fz_san})
  target_link_options(fuzz_api PRIVATE -fsanitize=fuzzer ${_fz_san})
  target_link_libraries(fuzz_api PRIVATE picketd_core picketd_store_cursor)
  add_executable(fuzz_auth ${_fz}/fuzz_auth.c)
  target_compile_options(fuzz_auth PRIVATE -fsanitize=fuzzer ${_fz_san})
  target_link_options(fuzz_auth PRIVATE -fsanitize=fuzzer ${_fz_san})
  target_link_libraries(fuzz_auth PRIVATE picketd_core)
  # The seed corpus only, no mutation: each file named runs once.
  file(GLOB _fz_seeds CONFIGURE_DEPENDS ${_fz}/corpus/*)
  add_test(NAME fuzz_api_seeds COMMAND fuzz_api -rss_limit_mb=2048 ${_fz_seeds})
  set_tests_properties(fuzz_api_seeds PROPERTIES LABELS fuzz TIMEOUT 120
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1;UBSAN_OPTIONS=print_stacktrace=1")
endif()
