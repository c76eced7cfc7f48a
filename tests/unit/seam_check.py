#!/usr/bin/env python3
"""The backend seam of picketd (issues 29 and 41), checked on the tree.

Usage: seam_check.py SOURCE_DIR [BUILD_DIR] [--strict] [--edges]
(--edges also prints every file -> file edge, to hold against farm-studio.)

1. The HTTP side names no backend. The HTTP side is every file under
   server/ but the backends' folders (server/store/<backend>/), the switch
   that picks one (server/store/store.c) and its table (server/store/
   backend.h); so server/store.h and server/store/cursor.* are on it. The
   list comes from the tree, so a new file is checked the day it appears.
2. A backend includes nothing of the HTTP side but the shared leaves in
   SHARED, and calls nothing of it but what those leaves define.
3. server/ has no circle, per file: x.c and x.h are separate nodes; an
   edge is an #include, or "x.c uses a function or variable that y.c
   defines". Call edges come from the compiled objects under BUILD_DIR
   (nm), or, when those are missing or older than their sources, from the
   sources (a coarser parse: it says so). Because calls are edges of their
   own, a header shared by several files cannot hide a circle of calls.
   This is what farm-studio calls a circle. The same graph is checked once
   more with x.c and x.h as one room (as the old check did): an include
   that closes a circle there runs back up, and fails too.

--strict (what unit_seam passes): every finding fails; nothing is
excused. Issue 41 moved the last backend names of the HTTP side behind the
backends and deleted the table of known ones that the check once excused,
so this is the only behaviour left; the switch stays so that the test's
command line says it.

Exit 0 when all holds; else 1, naming each offending line, edge or cycle.
Needs python3 and binutils' nm only."""
import os
import re
import subprocess
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
ROOT = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(args[1]) if len(args) > 1 else os.path.join(ROOT, "build")
SERVER = os.path.join(ROOT, "server")

# Words that name a backend or one of its own mechanisms. Bare "cluster"
# and "publish" are not in it: the HTTP side has clusters of members and
# publishes events of its own; a Redis Cluster is caught by "Redis".
WORDS = re.compile(r"redis|hiredis|sentinel|etcd|raft|\blua\b|\.lua\b|"
                   r"cluster[ _-]?slots?|hash[ _-]?slots?", re.IGNORECASE)

# What may name a backend on the HTTP side, each for a reason:
# - config.c and config.h are the one table of every flag (DESIGN.md,
#   Conventions: "Config is one declarative table"), the backends' flags
#   and the parsing of their values included; the backends read them there.
# - A line that cites Redis as the model of one of our conventions names a
#   project we learnt from, not the store (DESIGN.md, Conventions).
ALLOWED_FILES = {"server/config.c", "server/config.h"}
ALLOWED_PHRASES = {
    "server/log.h": "Redis serverLog does the same",
    "server/config.c": "in the manner of Redis's config.c",
    "server/main.c": "(Redis does the same in",
}
# What a backend may include or call from the top of server/: leaves that
# depend on nothing of the HTTP side themselves.
SHARED = {"store.h", "config.h", "config.c", "log.h", "log.c", "metrics.h", "metrics.c",
          "clock.h"}

failures = []


def rel(path):
    return os.path.relpath(path, ROOT)


def side(r):
    """'backend' for what may name a backend, 'http' for the rest."""
    parts = r.split("/")
    if r in ("server/store/store.c", "server/store/backend.h") or (
            len(parts) > 3 and parts[1] == "store"):
        return "backend"
    return "http"


files = sorted(rel(os.path.join(d, f)) for d, _, fs in os.walk(SERVER) for f in fs)
sources = [r for r in files if r.endswith((".c", ".h"))]

# 1. Backend names on the HTTP side. Build files are left out: they wire
# the backends' libraries in, which names them.
for r in files:
    if side(r) != "http" or r in ALLOWED_FILES or r.endswith("CMakeLists.txt"):
        continue
    try:
        with open(os.path.join(ROOT, r), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError:
        continue
    hits = []
    for n, line in enumerate(lines, 1):
        m = WORDS.search(line)
        if m and not (r in ALLOWED_PHRASES and ALLOWED_PHRASES[r] in line):
            hits.append((n, m.group(0), line.strip()))
    if not hits:
        continue
    failures.append(f"{r}: {len(hits)} line(s) name a backend:")
    failures += [f"  {r}:{n}: {w!r}: {text}" for n, w, text in hits]

# The include edges, per file. A quoted include is looked for beside the
# file first, then in the folders CMake adds (server/, server/store/).
includes = {}
for r in sources:
    with open(os.path.join(ROOT, r), encoding="utf-8") as f:
        names = re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.MULTILINE)
    for name in names:
        for d in (os.path.dirname(r), "server", "server/store"):
            target = os.path.normpath(os.path.join(d, name))
            if target in sources:
                includes.setdefault(r, set()).add(target)
                break


def from_objects():
    """{source: (defined, used)} from the objects of server/ under BUILD,
    or None when they are missing or older than their sources."""
    objs = []
    for d, _, fs in os.walk(os.path.join(BUILD, "server")):
        objs += [os.path.join(d, f) for f in fs if f.endswith(".o")]
    src_of = {}
    for o in objs:
        try:
            with open(o + ".d", encoding="utf-8") as f:
                first = f.read(4096).split(":", 1)[1].replace("\\\n", " ").split()
        except (OSError, IndexError):
            return None
        src = os.path.relpath(first[0], ROOT) if first else ""
        if src.startswith("server/") and os.path.getmtime(o) < os.path.getmtime(first[0]):
            return None
        src_of[o] = src
    built = set(src_of.values())
    if not objs or any(r.endswith(".c") and r not in built for r in sources):
        return None
    try:
        out = subprocess.run(["nm", "-A", "-g"] + sorted(objs), capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    syms = {}
    for line in out.stdout.splitlines():
        obj, _, rest = line.partition(".o:")
        fields = rest.split()
        if len(fields) < 2:
            continue
        kind, name = fields[-2], fields[-1]
        d, u = syms.setdefault(src_of[obj + ".o"], (set(), set()))
        # U and w are names the object needs from elsewhere; every other
        # kind nm lists under -g (T, D, B, R, C, W, ...) it defines.
        (u if kind in ("U", "w") else d).add(name)
    return syms


def from_sources():
    """{source: (defined, used)} by a parse of the sources: what a .c
    defines at file scope and not static, and every identifier it names
    (but a member after . or ->) as a use. Coarser than nm: a local of a
    global's name is a use, a name a macro makes is not seen."""
    syms = {}
    for r in sources:
        if not r.endswith(".c"):
            continue
        with open(os.path.join(ROOT, r), encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"/\*.*?\*/|//[^\n]*|\"(\\.|[^\"\\\n])*\"|'(\\.|[^'\\\n])*'", " ", text,
                      flags=re.DOTALL)
        text = re.sub(r"^[ \t]*#(.*\\\n)*.*$", " ", text, flags=re.MULTILINE)
        # File scope alone: every outermost body becomes "{}", and a
        # function's body an "@" that ends its statement.
        top, depth = [], 0
        for c in text:
            if c == "{":
                depth += 1
                if depth == 1:
                    top.append("{")
            elif c == "}":
                depth -= 1
                if depth == 0:
                    top.append("}")
            elif depth == 0:
                top.append(c)
        top = re.sub(r"\)\s*\{\}", ")@;", "".join(top))
        defined = set()
        for stmt in top.split(";"):
            if re.search(r"\b(static|typedef|extern)\b", stmt):
                continue
            fn = re.search(r"(\w+)\s*\((?:[^()]|\([^()]*\))*\)@$", stmt.strip())
            decl = stmt.split("=")[0].replace("{}", " ")
            var = re.search(r"(\w+)\s*(\[[^\]]*\]\s*)*$", decl)
            if fn:
                defined.add(fn.group(1))
            elif var and "(" not in decl and not re.match(r"\s*(struct|union|enum)\s*\w*\s*$", decl):
                defined.add(var.group(1))
        used = set(re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"(\.|->)\s*\w+", " ", text)))
        syms[r] = (defined, used - defined)
    return syms


syms = from_objects()
how = f"objects under {rel(BUILD) if BUILD.startswith(ROOT) else BUILD} (nm)"
if syms is None:
    syms, how = from_sources(), "a parse of the sources (no current objects)"

owner = {}
for src, (defined, _) in syms.items():
    for s in defined:
        owner.setdefault(s, set()).add(src)
calls = {}
for src, (_, used) in syms.items():
    for s in used:
        for o in owner.get(s, ()):
            if o != src and o.startswith("server/"):
                calls.setdefault(src, {}).setdefault(o, set()).add(s)

# 2. A backend depends on the HTTP side only through the shared leaves.
for r in sources:
    if side(r) != "backend":
        continue
    for t in sorted(includes.get(r, ())):
        if side(t) == "http" and t.count("/") == 1 and os.path.basename(t) not in SHARED:
            failures.append(f"{r}: includes {t}, a file of the HTTP side")
    for t, used in sorted(calls.get(r, {}).items()):
        if side(t) == "http" and t.count("/") == 1 and os.path.basename(t) not in SHARED:
            failures.append(f"{r}: calls {t}, a file of the HTTP side: " + ", ".join(sorted(used)))


def cycles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def why(a, b):
    """What ties file a to file b: the names a uses of b, or the include."""
    used = calls.get(a, {}).get(b)
    if used:
        names = sorted(used)
        return ", ".join(names[:6]) + (f" (+{len(names) - 6} more)" if len(names) > 6 else "")
    return "#include"


def loop_in(comp, succ):
    """One shortest way round a strongly connected comp, from its first
    node back to it, as a list of nodes."""
    start, back = comp[0], {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(succ.get(v, ())):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(back[path[-1]])
                return path[::-1] + [start]
            if w in comp and w not in back:
                back[w] = v
                todo.append(w)
    return [start]


# 3. Circles, per file: x.c and x.h are nodes of their own, an edge is an
# include or a use. This is what farm-studio calls a circle.
edges = {r: set(includes.get(r, ())) | set(calls.get(r, {})) for r in sources}
file_comps = cycles(sources, edges)
for comp in file_comps:
    path = loop_in(comp, edges)
    failures.append(f"server/: a circle of {len(comp)} files ({', '.join(comp)}); one way "
                    "round (file -> file: what the first uses of the second):")
    failures += [f"  {a} -> {b}: {why(a, b)}" for a, b in zip(path, path[1:])]

# The same graph with x.c and x.h as one room. A circle of rooms that no
# circle of files explains is an include that runs back up (x.c includes
# y.h while y.c uses x.c): the old check's rule that keeps wait.c and
# events.c off api.h, which farm-studio shows as "arrows that run back up".
room = {r: r[:-2] + (".c" if r[:-2] + ".c" in sources else r[-2:]) for r in sources}
room_edges = {}
for a in sources:
    for b in edges[a]:
        if room[a] != room[b]:
            room_edges.setdefault(room[a], set()).add(room[b])
seen = [sorted({room[f] for f in comp}) for comp in file_comps]
for comp in cycles(set(room.values()), room_edges):
    if comp in seen:
        continue
    path = loop_in(comp, room_edges)
    failures.append(f"server/: an include runs back up among {len(comp)} rooms (x.c with x.h: "
                    f"{', '.join(comp)}); one way round (file -> file: what ties them):")
    for ra, rb in zip(path, path[1:]):
        failures += [f"  {a} -> {b}: {why(a, b)}" for a in sources if room[a] == ra
                     for b in sorted(edges[a]) if room[b] == rb]


if "--edges" in sys.argv[1:]:
    for a in sources:
        for b in sorted(edges[a]):
            print(f"edge: {a} -> {b}: {why(a, b)}")
for f in failures:
    print("FAIL:", f)
n_calls = sum(len(v) for v in calls.values())
n_http = sum(1 for r in files if side(r) == "http" and not r.endswith("CMakeLists.txt"))
print(f"{'FAILED' if failures else 'ok'}: {n_http} HTTP-side files checked for backend names; "
      f"{len(sources)} files, "
      f"{sum(len(v) for v in includes.values())} includes and {n_calls} call edges from {how}; "
      f"{len(set(room.values()))} rooms")
sys.exit(1 if failures else 0)
