#!/usr/bin/env python3
"""leader-scheduler: a scheduler that only the leader runs, with the Python
client (client/python) and a fenced-kv (examples/fenced-kv).

Several candidates (threads here; processes on several hosts in real life)
campaign for the election --election, each waiting its turn. The leader
runs the job --ticks times, every --interval-ms: the job counts its runs in
fenced-kv at --key, each write sent with the leader's term as its fence
(Picket-Lock: ELECTION, Picket-Fence: TERM, + Picket-Fence-Token when
picketd signs). Then it resigns, and the next candidate leads with a higher
term. A leader that lost its leadership stops at once (lead.lost). At the
end the first leader's write is replayed with its old term, as a leader
paused past its TTL would send it: fenced-kv has seen newer terms and
refuses it (409 stale_fence). The last line is
`final runs=N expected=N leaders=L` (exit status 1 when they differ).

    python3 examples/python/leader-scheduler.py --picket http://127.0.0.1:7070 \\
        --kv http://127.0.0.1:$(cat kv.port) --candidates 2 --ticks 3
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python"))
import picket  # noqa: E402


def kv_request(kv, method, key, value=None, headers=None):
    u = urllib.parse.urlsplit(kv)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        c.request(method, "/kv/" + key, body=None if value is None else value.encode(),
                  headers=headers or {})
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def runs(kv, key):
    status, body = kv_request(kv, "GET", key)
    if status == 404:
        return 0
    if status != 200:
        raise RuntimeError(f"GET /kv/{key}: {status} {body}")
    return int(json.loads(body)["value"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--picket", default="http://127.0.0.1:7070")
    ap.add_argument("--kv", required=True)
    ap.add_argument("--election", default="py-example.scheduler")
    ap.add_argument("--key", default="py-example-runs")
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--ticks", type=int, default=3)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument("--ttl-ms", type=int, default=3000)
    a = ap.parse_args()

    mu = threading.Lock()
    first = {}  # the first leader's term and fence headers, for the replay
    leaders = []

    def candidate(i):
        me = f"cand-{i}"
        c = picket.Client(a.picket)
        try:
            with c.campaign(a.election, ttl=a.ttl_ms / 1000, wait=60, owner=me, value=me) as lead:
                with mu:
                    leaders.append(lead.term)
                    first.setdefault("headers", lead.fence_headers())
                    first.setdefault("term", lead.term)
                print(f"{me} leads term {lead.term}", flush=True)
                for tick in range(1, a.ticks + 1):
                    if not lead.valid():
                        print(f"{me} lost the leadership (term {lead.term}): stopping", flush=True)
                        break
                    n = runs(a.kv, a.key) + 1
                    status, body = kv_request(a.kv, "PUT", a.key, str(n), lead.fence_headers())
                    print(f"{me} term {lead.term} tick {tick}: runs={n} ({status})", flush=True)
                    if status != 200:
                        print(f"{me}: write refused: {status} {body}", flush=True)
                        break
                    lead.lost.wait(a.interval_ms / 1000)
                print(f"{me} resigns term {lead.term}", flush=True)
        finally:
            c.close()

    threads = [threading.Thread(target=candidate, args=(i,)) for i in range(a.candidates)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    # a zombie leader: the first term, long resigned
    status, body = kv_request(a.kv, "PUT", a.key, "0", first["headers"])
    if status == 409:
        code = json.loads(body).get("error", {}).get("code")
        print(f"stale write refused: 409 {code} (term {first['term']})", flush=True)
    else:
        print(f"stale write NOT refused: {status} {body}", flush=True)
    got, want = runs(a.kv, a.key), a.candidates * a.ticks
    print(f"final runs={got} expected={want} leaders={len(set(leaders))}", flush=True)
    return 0 if got == want and status == 409 and len(set(leaders)) == a.candidates else 1


if __name__ == "__main__":
    sys.exit(main())
