#!/usr/bin/env bash
# examples_probe.sh: starts a throwaway redis-server and picketd (through
# tests/harness/harness.sh) and runs examples_probe.py against them: every
# request example of proto/openapi.yaml must be accepted by the real server.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../harness/harness.sh"
: "${PICKET_SOURCE_DIR:?PICKET_SOURCE_DIR must name the source tree}"
h_start_redis
h_start_picketd
"${PICKET_PYTHON3:-python3}" "$here/examples_probe.py" "$PICKET_SOURCE_DIR/proto/openapi.yaml" \
  "$PICKETD_URL" || h_fail "a request example of proto/openapi.yaml was refused"
