#!/usr/bin/env bash
# ctest fault_clock_steps: see test_clock_steps.py.
exec python3 "$PICKET_SOURCE_DIR/tests/fault/test_clock_steps.py"
