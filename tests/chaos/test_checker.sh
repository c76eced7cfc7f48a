#!/usr/bin/env bash
# ctest chaos_checker: the checker's own tests (crafted histories, each
# safety rule seen to pass and to fail).
exec python3 "$PICKET_SOURCE_DIR/tests/chaos/test_checker.py"
