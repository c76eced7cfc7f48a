# man/: the pages against --help and the headers, their rendering and install.
picket_shell_test(man ${CMAKE_CURRENT_LIST_DIR}/test_man.sh LABELS "integration;unit" TIMEOUT 60)
