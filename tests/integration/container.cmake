# deploy/container and deploy/kubernetes: static checks always; with podman
# an image build (compiles picket inside: about 1-3 minutes) and a run.
# PICKET_TEST_CONTAINER=0 skips the build.
picket_shell_test(container ${CMAKE_CURRENT_LIST_DIR}/test_container.sh LABELS "integration;container" TIMEOUT 900)
