# deploy/: the systemd unit and redis.conf are checked by real tools.
picket_shell_test(deploy ${CMAKE_CURRENT_LIST_DIR}/test_deploy.sh LABELS integration TIMEOUT 60)
