# tests/contract: proto/openapi.yaml is checked, not just written.
#
#   contract_openapi_lint        an off-the-shelf OpenAPI linter from Debian
#                                (JSON::Validator + the official 3.0 schema),
#                                offline; plus broken copies it must reject
#   contract_openapi_rules       picket's own rules: error codes equal
#                                PICKET_PROTO_ERROR_MAP, limits equal
#                                picket_proto.h, every example valid (and
#                                broken copies that must fail each rule)
#   contract_validator_selftest  validate_responses.py on hand-made logs:
#                                passes a good one, fails each defect
#   contract_examples_probe      every request example of the spec, sent to
#                                a real picketd, is accepted
#   contract_responses           every reply the suite received, from
#                                $PICKET_CONTRACT_LOG, against the spec; the
#                                cleanup of the "contract" fixture, so ctest
#                                runs it after every test that logs
#   contract_exchanges_thirdparty
#                                the same log checked by a third-party
#                                validator (npm openapi-backend, pinned in
#                                npm/package-lock.json): requests too, and a
#                                request the spec allows must not get 400;
#                                also a cleanup of the "contract" fixture
#   contract_exchanges_selftest  npm/validate_exchanges.mjs on hand-made
#                                logs built from the spec's examples: passes
#                                a good one, fails each defect
#   contract_generated_client    a TypeScript client generated from the
#                                served spec, compiled strictly with the
#                                README's bodies, drives every operation and
#                                error code against real picketd processes
#
# Included from tests/CMakeLists.txt, so CMAKE_CURRENT_SOURCE_DIR is tests/.
# Debian's python3 first: python3-jsonschema and python3-yaml are Debian
# packages (scripts/deps), and a python3 from elsewhere may lack them.
find_program(PICKET_PYTHON3 NAMES python3 HINTS /usr/bin REQUIRED)
find_program(PICKET_BASH bash REQUIRED)
set(PICKET_OPENAPI ${PROJECT_SOURCE_DIR}/proto/openapi.yaml)
set(PICKET_PROTO_H ${PROJECT_SOURCE_DIR}/proto/include/picket_proto.h)

add_test(NAME contract_openapi_lint
         COMMAND ${PICKET_BASH} ${CMAKE_CURRENT_LIST_DIR}/lint_openapi.sh --selftest ${PICKET_OPENAPI})
add_test(NAME contract_openapi_rules
         COMMAND ${PICKET_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/check_openapi.py --selftest
                 ${PICKET_OPENAPI} ${PICKET_PROTO_H})
add_test(NAME contract_validator_selftest
         COMMAND ${PICKET_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/selftest.py ${PICKET_OPENAPI})
# About 1 to 3 s each on an idle machine; the timeouts leave room for a busy one.
set_tests_properties(contract_openapi_lint contract_openapi_rules contract_validator_selftest
                     PROPERTIES LABELS contract TIMEOUT 120)

# A picketd test like the others: it requires the "contract" fixture, so
# the replies it receives are checked by contract_responses too.
picket_shell_test(contract_examples_probe ${CMAKE_CURRENT_LIST_DIR}/examples_probe.sh
                  LABELS contract TIMEOUT 60)
set_property(TEST contract_examples_probe APPEND PROPERTY ENVIRONMENT
             "PICKET_PYTHON3=${PICKET_PYTHON3}")

# picket_log_check(NAME INTERPRETER SCRIPT): a check of the whole exchange
# log, run as a cleanup of the "contract" fixture (after every test that
# logs). Exit 77 (skipped) only while picketd is not built; a missing or
# empty log otherwise fails, so a harness that stopped logging cannot pass
# unseen.
function(picket_log_check name interpreter script)
  add_test(NAME ${name}
           COMMAND ${interpreter} ${script} --spec ${PICKET_OPENAPI} --log ${PICKET_CONTRACT_LOG}
                   --require ${CMAKE_BINARY_DIR}/bin/picketd)
  set_tests_properties(${name} PROPERTIES LABELS contract TIMEOUT 120
                       FIXTURES_CLEANUP contract SKIP_RETURN_CODE 77)
endfunction()
picket_log_check(contract_responses ${PICKET_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/validate_responses.py)

# The third-party check of the same log (tests/contract/npm, installed by
# scripts/deps with npm ci). Node from the machine or Debian (scripts/deps);
# the pinned packages support Node 18 and 20.
find_program(PICKET_NODE NAMES node nodejs HINTS /usr/bin REQUIRED)
set(PICKET_NPM_DIR ${CMAKE_CURRENT_LIST_DIR}/npm)
picket_log_check(contract_exchanges_thirdparty ${PICKET_NODE} ${PICKET_NPM_DIR}/validate_exchanges.mjs)
add_test(NAME contract_exchanges_selftest
         COMMAND ${PICKET_NODE} ${PICKET_NPM_DIR}/validate_exchanges_selftest.mjs ${PICKET_OPENAPI})
# About 25 logs through the validator's main() in one process (the spec
# loaded once), and 4 runs of it as a command for its exit statuses: about
# 12 s idle (it was 57 s with a process per log, issue 41).
set_tests_properties(contract_exchanges_selftest PROPERTIES LABELS contract TIMEOUT 300)

# A TypeScript client generated from the served spec (openapi-typescript +
# openapi-fetch, compiled by tsc at its strictest) drives every operation
# and error code against real picketd processes; its exchanges are logged,
# so both validators above check them too.
picket_shell_test(contract_generated_client ${CMAKE_CURRENT_LIST_DIR}/generated_client.sh
                  LABELS contract TIMEOUT 180)
set_property(TEST contract_generated_client APPEND PROPERTY ENVIRONMENT
             "PICKET_PYTHON3=${PICKET_PYTHON3}")
