#!/usr/bin/env bash
# ctest chaos_quick: the chaos suite's quick mode against this build, in
# picketd's default configuration: fixed seeds on each topology plus one
# random seed (printed, with the command that reruns it). Any safety
# violation fails the test and keeps the run's history (path printed).
set -u
# XXXXXX is mktemp's template: it picks the name.
out=$(mktemp -d /tmp/picket-chaos-quick-XXXXXX)
python3 "$PICKET_SOURCE_DIR/tests/chaos/run" --quick --bin "$PICKET_BIN_DIR" --out "$out"
rc=$?
# Kept runs (a failure) stay for the reader; an all-good out dir is empty.
rmdir "$out" 2>/dev/null || echo "chaos: kept runs under $out"
exit $rc
