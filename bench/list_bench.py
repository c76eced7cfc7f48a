#!/usr/bin/env python3
"""bench/list_bench.py: GET /v1/locks with many held locks (issue 27).

Starts its own redis-server (unix socket, temp dir, noeviction) and
picketd, fills Redis with N held locks (default 100,000) by running
picketd's own acquire script (proto/redis/counter.lua + leases.lua +
hold.lua + acquire.lua, as picketd embeds it) with EVALSHA, pipelined, so
the keys are exactly what picketd writes; then measures:

  * Redis's used_memory with the locks, the index's own MEMORY USAGE, and
    used_memory again after the index is deleted (what the index costs);
  * the latency of a page of 100 through picketd: the first page, a page
    from a cursor in the middle, a page under a prefix that 1 % of the
    names have (the median and p99 of --repeat requests each);
  * what a listing without the index would cost: one pass of SCAN MATCH
    over the lease keys (all of them must be read to give the first page
    of a sorted listing), and the same after the index is gone.

Prints a Markdown table. Everything it starts is stopped and its temp dir
removed on exit.

  bench/list_bench.py [--locks N] [--repeat R] [--bin DIR]
"""
import argparse
import http.client
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resp_cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Redis:
    """Just enough RESP over a unix socket: pipelined commands, replies
    read back as Python values."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("odd reply %r" % line)

    def cmd(self, *args):
        self.s.sendall(resp_cmd(*args))
        return self.read()

    def pipeline(self, cmds):
        self.s.sendall(b"".join(resp_cmd(*c) for c in cmds))
        return [self.read() for _ in cmds]


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.perf_counter()
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    ms = (time.perf_counter() - t0) * 1000
    c.close()
    if r.status != 200:
        raise RuntimeError("%s: %d %s" % (path, r.status, body[:200]))
    return ms, body


def lat(port, path, repeat):
    import json
    times = []
    body = None
    for _ in range(repeat):
        ms, body = get(port, path)
        times.append(ms)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1], json.loads(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--locks", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "bin"))
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="picket-listbench-")
    procs = []
    try:
        sock = os.path.join(d, "redis.sock")
        procs.append(subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly",
             "no", "--dir", d, "--maxmemory-policy", "noeviction"], stdout=subprocess.DEVNULL))
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        pf = os.path.join(d, "port")
        procs.append(subprocess.Popen(
            [os.path.join(a.bin, "picketd"), "--listen", "127.0.0.1:0", "--port-file", pf,
             "--redis", "unix://" + sock, "--log-level", "warn"], stderr=open(os.path.join(d, "p.log"), "w")))
        for _ in range(400):
            if os.path.exists(pf) and open(pf).read().strip():
                break
            time.sleep(0.02)
        port = int(open(pf).read())
        r = Redis(sock)
        lua = "".join(open(os.path.join(SRC, "proto", "redis", f)).read()
                      for f in ("counter.lua", "leases.lua", "hold.lua", "acquire.lua"))
        sha = r.cmd("SCRIPT", "LOAD", lua)
        info0 = r.cmd("INFO", "memory")
        mem0 = int(info0.split("used_memory:")[1].split("\r\n")[0])
        t0 = time.time()
        batch = []
        for i in range(a.locks):
            # 1 % under "hot.", the rest under "job."
            name = ("hot.%06d" if i % 100 == 0 else "job.%06d") % i
            batch.append(("EVALSHA", sha, 3, "picket:{%s}:lease" % name, "picket:{%s}:fence" % name,
                          "picket:index", "%032x" % i, 3600000, "worker-%d" % (i % 50), "clock", 0,
                          0, 0, 0, name, ""))
            if len(batch) == 2000:
                r.pipeline(batch)
                batch = []
        if batch:
            r.pipeline(batch)
        fill_s = time.time() - t0

        def used():
            info = r.cmd("INFO", "memory")
            return int(info.split("used_memory:")[1].split("\r\n")[0])

        mem_with = used()
        index_bytes = r.cmd("MEMORY", "USAGE", "picket:index", "SAMPLES", "0")
        first = lat(port, "/v1/locks?limit=100", a.repeat)
        # a cursor in the middle of the job.* names
        mid_cursor = "0-l-job.%06d" % (a.locks // 2 + 1)
        middle = lat(port, "/v1/locks?limit=100&cursor=" + mid_cursor, a.repeat)
        hot = lat(port, "/v1/locks?prefix=hot.&limit=100", a.repeat)
        assert len(first[2]["locks"]) == 100 and len(middle[2]["locks"]) == 100
        assert len(hot[2]["locks"]) == 100

        def scan_pass():
            t = time.perf_counter()
            cur, n = "0", 0
            while True:
                cur, keys = r.cmd("SCAN", cur, "MATCH", "picket:{*}:lease", "COUNT", 1000)
                n += len(keys)
                if cur == "0":
                    break
            return (time.perf_counter() - t) * 1000, n

        scan_ms, scanned = scan_pass()
        r.cmd("DEL", "picket:index")
        mem_without = used()
        scan_ms2, _ = scan_pass()
        print(f"{a.locks:,} held locks, filled in {fill_s:.1f} s (one EVALSHA of acquire.lua each)")
        print()
        print("| measure | value |")
        print("| --- | --- |")
        print(f"| Redis used_memory, empty | {mem0 / 1e6:.1f} MB |")
        print(f"| Redis used_memory, {a.locks:,} locks with the index | {mem_with / 1e6:.1f} MB |")
        print(f"| Redis used_memory, the same without the index | {mem_without / 1e6:.1f} MB |")
        print(f"| the index (MEMORY USAGE) | {index_bytes / 1e6:.1f} MB "
              f"({index_bytes / a.locks:.0f} bytes a lock; "
              f"{100.0 * (mem_with - mem_without) / (mem_without - mem0):.0f} % of the locks' own) |")
        for label, m in (("first page of 100", first), ("page of 100 from a cursor in the middle", middle),
                         ("page of 100 under a 1 % prefix", hot)):
            print(f"| GET /v1/locks, {label}: median (p99) | {m[0]:.2f} ms ({m[1]:.2f} ms) |")
        print(f"| without an index: one SCAN pass over the keys ({scanned:,} lease keys) | "
              f"{scan_ms:.0f} ms ({scan_ms2:.0f} ms with the index deleted) |")
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
