#!/usr/bin/env bash
# ctest chaos_netns: partitions (nft in network namespaces) and stepped
# clocks (libfaketime) on real redis-server and redis-sentinel processes.
exec python3 "$PICKET_SOURCE_DIR/tests/chaos/test_netns.py"
