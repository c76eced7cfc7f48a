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

# Exit 77 (skipped) only while picketd is not built; a missing or empty log
# otherwise fails, so a harness that stopped logging cannot pass unseen.
add_test(NAME contract_responses
         COMMAND ${PICKET_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/validate_responses.py
                 --spec ${PICKET_OPENAPI} --log ${PICKET_CONTRACT_LOG}
                 --require ${CMAKE_BINARY_DIR}/bin/picketd)
set_tests_properties(contract_responses PROPERTIES LABELS contract TIMEOUT 120
                     FIXTURES_CLEANUP contract SKIP_RETURN_CODE 77)
