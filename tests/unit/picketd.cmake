# Unit tests of picketd's configuration and of the shared picket_proto rules.
set(_d ${CMAKE_CURRENT_LIST_DIR})
picket_check_test(unit_config SOURCES ${_d}/test_config.c LIBS picketd_core LABELS unit TIMEOUT 30)
picket_check_test(unit_proto SOURCES ${_d}/test_proto.c LABELS unit TIMEOUT 30)
