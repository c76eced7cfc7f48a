#!/usr/bin/env bash
# ctest fault_elections: see test_elections.py.
exec python3 "$PICKET_SOURCE_DIR/tests/fault/test_elections.py"
