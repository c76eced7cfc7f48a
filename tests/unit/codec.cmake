# Unit test of the Redis reply codec (server/store/redis/codec.c) on
# replies built from RESP bytes, no server. The codec is compiled in with
# only what it stands on (the lease count and the node table), not the
# store library: were it to reach for a connection again, this would no
# longer link.
set(_redis ${PROJECT_SOURCE_DIR}/server/store/redis)
picket_check_test(unit_codec SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_codec.c ${_redis}/codec.c
                  ${_redis}/lease_count.c ${_redis}/node.c ${_redis}/stats.c LIBS picketd_core LABELS unit
                  TIMEOUT 30)
target_include_directories(unit_codec PRIVATE ${_redis} ${_redis}/..)
