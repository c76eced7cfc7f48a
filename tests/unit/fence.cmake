# Unit tests of the fence validator (client/fence.c, picket/fence.h).
# The validator is part of libpicket; link its static library when the
# client's CMakeLists.txt defines it, else compile fence.c in directly, so
# these tests also run while libpicket is being written.
function(picket_fence_use target)
  if(TARGET picket_static)
    target_link_libraries(${target} PRIVATE picket_static)
  else()
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/client/fence.c)
  endif()
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/client/include)
  target_link_libraries(${target} PRIVATE picket_proto Threads::Threads)
endfunction()

picket_check_test(test_fence SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fence.c LABELS unit TIMEOUT 60)
picket_fence_use(test_fence)

# proto/README.md documents the very SQL statements fenced-kv runs.
picket_check_test(test_fence_sql SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fence_sql.c
                  LABELS unit TIMEOUT 30)
target_include_directories(test_fence_sql PRIVATE ${PROJECT_SOURCE_DIR}/examples/fenced-kv)
