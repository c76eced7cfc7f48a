# deploy/: the systemd unit and redis.conf are checked by real tools.
picket_shell_test(deploy ${CMAKE_CURRENT_LIST_DIR}/test_deploy.sh LABELS integration TIMEOUT 60)
# deploy/users.acl: a least-privilege ACL user runs picketd's basic flow and
# nothing more (issue 17).
picket_shell_test(deploy_acl ${CMAKE_CURRENT_LIST_DIR}/test_acl.sh LABELS integration TIMEOUT 60)
