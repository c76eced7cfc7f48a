# The Python client (client/python, issue 18): its unittest suites against
# real picketd processes (plain, --auth-file, --fence-key-file, and one
# without Redis), including `pip install` of the package into a temp dir.
if(NOT TARGET picketd)
  return()
endif()
picket_shell_test(client_python ${CMAKE_CURRENT_LIST_DIR}/test_python.sh
                  LABELS integration client python TIMEOUT 240)
