# The Go client (client/go, issue 30): `go vet` and `go test -race` of its
# package against real picketd processes (plain, --auth-file,
# --fence-key-file, TLS, and one without Redis) and a real fenced-kv, then
# examples/go guarding a fenced-kv write. A missing `go` fails the test
# (scripts/deps installs golang-go); it never skips.
if(NOT TARGET picketd OR NOT TARGET fenced-kv)
  return()
endif()
picket_shell_test(client_go ${CMAKE_CURRENT_LIST_DIR}/test_go.sh
                  LABELS integration client go TIMEOUT 300)
