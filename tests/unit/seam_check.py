#!/usr/bin/env python3
"""The backend seam of picketd (issue 29), checked on the sources.

1. The HTTP side names no backend: api.c, wait.c, http.c and loop.c (and
   their headers) hold no word of Redis or etcd. They reach the store only
   through server/store.h.
2. A backend includes nothing of the HTTP side but the shared leaves
   listed in SHARED.
3. server/ has no circle: no two modules (x.c with x.h) include each other,
   directly or through others. The node table does not include its
   watchers, which include it; the handlers' helpers and what carries a
   call (wait.c, events.c) share api_types.h, not api.h.

Exit 0 when both hold; else 1, naming each offending line or cycle."""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
SERVER = os.path.join(ROOT, "server")
HTTP_SIDE = ["api.c", "api.h", "wait.c", "wait.h", "http.c", "http.h", "loop.c", "loop.h"]
WORDS = re.compile(r"redis|sentinel|cluster|hiredis|etcd|raft|\blua\b|\.lua|pub/?sub|publish",
                   re.IGNORECASE)
# What a backend may include from server/: leaves that include nothing of
# the HTTP side themselves.
SHARED = {"store", "config", "log", "metrics", "clock", "picket_proto"}

failures = []
for name in HTTP_SIDE:
    path = os.path.join(SERVER, name)
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = WORDS.search(line)
            if m:
                failures.append(f"server/{name}:{n}: names a backend ({m.group(0)!r}): {line.strip()}")

# The include graph of server/, by module (x.c and x.h are module x).
graph, where = {}, {}
for d, _, files in os.walk(SERVER):
    for f in files:
        if not f.endswith((".c", ".h")):
            continue
        mod = f.rsplit(".", 1)[0]
        rel = os.path.relpath(os.path.join(d, f), SERVER)
        where.setdefault(mod, set()).add(os.path.dirname(rel))
        with open(os.path.join(d, f), encoding="utf-8") as fh:
            for inc in re.findall(r'#include "([^"]+)\.h"', fh.read()):
                inc = os.path.basename(inc)
                if inc != mod:
                    graph.setdefault(mod, set()).add(inc)

# A header with no .c of its own (a table of types, like store/backend.h)
# is not a module that could call anybody: its includers include what it
# includes instead.
has_c = {f.rsplit(".", 1)[0] for d, _, fs in os.walk(SERVER) for f in fs if f.endswith(".c")}
for _ in range(len(graph)):
    for m in graph:
        for h in [x for x in graph[m] if x not in has_c and x in graph]:
            graph[m] = (graph[m] - {h}) | (graph[h] - {m})

store_mods = {m for m, dirs in where.items() if any(x.startswith("store") for x in dirs)} & has_c
http_mods = {m for m, dirs in where.items() if "" in dirs} - SHARED
for m in sorted(store_mods):
    for inc in sorted(graph.get(m, ())):
        if inc in http_mods:
            failures.append(f"server/store: {m} includes {inc}.h, a module of the HTTP side")

# Cycles among all of server/'s modules (Tarjan's strongly connected
# components).
index, low, stack, on, comps = {}, {}, [], set(), []
def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in graph.get(v, ()):
        if w not in has_c:
            continue
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            comps.append(sorted(comp))
for v in sorted(has_c):
    if v not in index:
        visit(v)
for comp in comps:
    failures.append("server/: an include cycle: " + " <-> ".join(comp))

for f in failures:
    print("FAIL:", f)
if not failures:
    print(f"ok: {len(HTTP_SIDE)} HTTP-side files name no backend; {len(store_mods)} store "
          f"modules include nothing of the HTTP side; {len(has_c)} modules, no cycle")
sys.exit(1 if failures else 0)
