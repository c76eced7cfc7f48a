"""resp: the Redis calls the chaos suite needs to drive its topology (set
up replication, ask who is primary, force a failover, move a slot). Not
for lock traffic: workers speak HTTP to picketd, never Redis.

The RESP client is the cluster fixture's (tests/harness/redis_cluster.py),
used with the address of a node in its network namespace. One call is one
short-lived connection with a timeout, so a partitioned or paused node
costs the caller that timeout and nothing else, and no connection
outlives a fault to surprise the next call.

call(host, port, *args, timeout=1.0) -> str | int | list | None
Raises RedisError for an error reply, OSError for the network.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import redis_cluster  # noqa: E402

RedisError = redis_cluster.RedisError


def call(host, port, *args, timeout=1.0):
    return redis_cluster.call(port, *args, timeout=timeout, host=host)


def info(host, port, section="", timeout=1.0):
    """INFO as a dict of its key:value lines (the fixture's parser)."""
    text = call(host, port, "INFO", *([section] if section else []), timeout=timeout)
    return redis_cluster._parse_info(text)
