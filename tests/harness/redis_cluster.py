#!/usr/bin/env python3
"""redis_cluster: a throwaway, real Redis Cluster on loopback for picket's
tests and benchmarks (picketd --redis-cluster).

What it owns: one temp dir /tmp/picket-<tag>-XXXXXX holding a dir, a
redis.conf, a log and the data (AOF, nodes.conf) of every node, and the
redis-server processes it started there. Nothing else: stop() kills only
the pids it started, and other redis-servers on the machine (other tests')
are never touched.

Why a real cluster and not a mock: what picketd has to get right is how
real nodes behave - MOVED and ASK redirections, CLUSTERDOWN while a shard
fails over, a slot migration that leaves a lock's keys half on each side,
an old primary coming back as a replica. So the fixture builds the cluster
the way an operator would (redis-cli --cluster create) and gives tests the
faults as steps they can interleave with lock calls: kill(), restart(),
wait_failover(), and migrate_slot() with a callback between key batches.

As a module:

    from redis_cluster import Cluster
    with Cluster(primaries=3, replicas=1) as c:
        seeds = c.seeds()                        # for --redis-cluster
        slot = c.keyslot("picket:{job.1}:lease")
        old = c.owner_of_slot(slot)
        c.kill(old)
        new, secs = c.wait_failover(old, 20)

As a command (for tests in C or shell):

    redis_cluster.py serve --primaries 3 --replicas 1 --seeds-file F [--info-file J]
                           [--password-file P]
        writes "127.0.0.1:P1,..." to F once the cluster is up, runs until
        SIGTERM/SIGINT or until its parent dies, then removes everything.
    redis_cluster.py selftest [--password]
        builds a 3+3 cluster and exercises the fixture (exit 0 on success);
        --password does it all on a cluster with a random password.

Password (Cluster(password=PW), serve --password-file P whose first line
is PW): every node gets "requirepass PW" and "masterauth PW" (replicas
authenticate to their primary to sync), and everything the fixture does
authenticates: call() sends AUTH first, redis-cli (cli(), the --cluster
create) gets it in REDISCLI_AUTH, migrate_slot() passes it to MIGRATE for
the target. The password never goes on a command line (ps shows argv to
every user of the machine) and is masked ("<password>") in every
ClusterError; it is written only to the nodes' redis.conf, in the temp dir
(mode 0700), which HARNESS_KEEP=1 keeps like the rest.

Every child is started with PR_SET_PDEATHSIG=SIGKILL, so a test that
crashes takes its nodes with it. The signal is tied to the *thread* that
started the child: start the cluster from a thread that outlives it (the
main thread, normally).

Env: HARNESS_KEEP=1 keeps the temp dir (logs) after stop();
PICKET_TIME_SCALE=N multiplies every wait's bound (slow builds, valgrind);
REDIS_SERVER / REDIS_CLI name the binaries (default: from PATH).

Python 3.11, stdlib only.
"""

import argparse
import atexit
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REDIS_SERVER = os.environ.get("REDIS_SERVER", "redis-server")
REDIS_CLI = os.environ.get("REDIS_CLI", "redis-cli")
HOST = "127.0.0.1"
NSLOTS = 16384


def _time_scale():
    try:
        return max(1, int(os.environ.get("PICKET_TIME_SCALE", "1")))
    except ValueError:
        return 1


# The passwords of the Clusters of this process, masked in every ClusterError.
# A message is built in many places from a command's args, redis-cli's output
# or a node's log; masking where every message passes (the constructor) cannot
# miss one. Never emptied: an error can still be raised after stop().
_SECRETS = set()
_MASK = "<password>"


def _redact(text):
    for pw in _SECRETS:
        text = text.replace(pw, _MASK)
    return text


class ClusterError(Exception):
    """The cluster did not do what was asked in time (the message says what).
    Any password of a Cluster of this process is masked in the message."""

    def __init__(self, msg=""):
        super().__init__(_redact(str(msg)))


class RedisError(Exception):
    """An error reply (-ERR, -MOVED ..., -ASK ..., -CLUSTERDOWN ...)."""


# --- CRC16 / key slots --------------------------------------------------------

def _crc16_table():
    # CRC16/XMODEM: polynomial 0x1021, initial value 0, no reflection. This is
    # the variant Redis Cluster uses (src/crc16.c).
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ b) & 0xFF]
    return crc


def keyslot(key) -> int:
    """The slot of `key` (str or bytes), as CLUSTER KEYSLOT computes it.

    Hash tag: if the key has a '{' and a '}' somewhere after it with at
    least one byte between them, only the bytes between the first '{' and
    the first '}' after it are hashed ("picket:{job.1}:lease" hashes
    "job.1"; "{}x" and "x{" hash the whole key)."""
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogateescape")
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end != -1 and end != start + 1:
            key = key[start + 1:end]
    return crc16(key) % NSLOTS


# --- a minimal RESP2 client ------------------------------------------------------
# For the fixture's own polling and for call(). redis-cli (used by cli()) is
# what a human would run, but it flattens nested replies (CLUSTER SLOTS) and
# exits 0 on error replies, so it cannot tell "ERR x" from the string "ERR x".

def _encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a).encode()
        elif isinstance(a, str):
            a = a.encode("utf-8", "surrogateescape")
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def _read_reply(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("connection closed in the middle of a reply")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode("utf-8", "surrogateescape")
    if kind == b"-":
        # Returned, not raised, so that an error inside an array does not
        # leave the rest of the reply unread; call() raises it.
        return RedisError(rest.decode("utf-8", "surrogateescape"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        if len(data) != n + 2:
            raise ConnectionError("connection closed in the middle of a bulk string")
        return data[:-2].decode("utf-8", "surrogateescape")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise ConnectionError("not a RESP2 reply: %r" % line[:40])


def call(port, *args, timeout=2.0, readonly=False, password=None, host=HOST):
    """One command to host:port (default 127.0.0.1) on a new connection; the parsed reply
    (str, int, None or lists of those). An error reply raises RedisError,
    no server raises OSError. Redirections are not followed. readonly=True
    sends READONLY first on the same connection, so that a replica answers
    reads of its primary's slots instead of MOVED. password sends AUTH
    first (without it, a node with requirepass answers NOAUTH)."""
    # All in one write: AUTH, READONLY, the command. If AUTH fails the others
    # get NOAUTH, unread: the AUTH error is the one raised.
    pre = [["AUTH", password]] if password is not None else []
    pre += [["READONLY"]] if readonly else []
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"".join(_encode(p) for p in pre) + _encode(args))
        with s.makefile("rb") as f:
            for _ in pre:
                ok = _read_reply(f)
                if isinstance(ok, RedisError):
                    raise ok
            reply = _read_reply(f)
    if isinstance(reply, RedisError):
        raise reply
    return reply


def _parse_info(text):
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


def _free_ports(n):
    """n distinct free loopback ports. All sockets are held open until every
    port is read, so the kernel cannot hand out the same port twice; another
    process can still take one before redis-server binds it (start() retries)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid):
    """preexec_fn: SIGKILL this child when the thread that forked it dies."""
    def fn():
        if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(126)
        # The parent may have died before prctl took effect: then nobody
        # would ever send the signal.
        if os.getppid() != parent_pid:
            os._exit(126)
    return fn


def _tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no %s)\n" % path


def _conf_quote(value):
    """value as one redis.conf argument: double-quoted, with the escapes
    redis's config parser (sdssplitargs) reads back, so that a password with
    spaces, quotes or '#' is not split or cut."""
    out = []
    for b in value.encode("utf-8", "surrogateescape"):
        if b in (0x22, 0x5C):           # " and \
            out.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return '"%s"' % "".join(out)


# --- nodes and the cluster ---------------------------------------------------------

class Node:
    """One redis-server of the cluster. `pid` stays the last process's pid
    after a kill; `running` says whether that process is alive."""

    def __init__(self, port, cluster_port, dir):
        self.port = port
        self.cluster_port = cluster_port
        self.dir = dir
        self.conf = os.path.join(dir, "redis.conf")
        self.log = os.path.join(dir, "redis.log")
        self.stdout_log = os.path.join(dir, "stdout.log")
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def __repr__(self):
        return "Node(port=%d, pid=%s, running=%s)" % (self.port, self.pid, self.running)


class Cluster:
    """A Redis Cluster of `primaries` shards with `replicas` replicas each,
    on 127.0.0.1. See the module docstring; start() builds it, stop() (or
    the end of a with block, or interpreter exit) removes it. password (a
    non-empty str) makes every node require it; the fixture's own calls
    then authenticate, and `password` says what clients must send."""

    def __init__(self, primaries=3, replicas=1, node_timeout_ms=1000, extra_conf=(),
                 tag="cluster", password=None):
        if primaries < 3:
            raise ValueError("redis-cli --cluster create needs at least 3 primaries")
        if replicas < 0:
            raise ValueError("replicas must be >= 0")
        if password is not None:
            # "" would make requirepass clear the password: no password at
            # all, silently. NUL cannot go through REDISCLI_AUTH (an
            # environment variable).
            if not isinstance(password, str) or not password or "\0" in password:
                raise ValueError("password must be a non-empty str without NUL")
            _SECRETS.add(password)
        self.password = password
        self.n_primaries = primaries
        self.n_replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.extra_conf = list(extra_conf)
        self.tag = tag
        self.dir = None
        self.nodes = []
        self._ids = {}          # port -> node id (kept in nodes.conf across restarts)
        self._killed = {}       # port -> (monotonic time, slots it owned) at kill()
        self._stopped = False

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- lifecycle --

    def start(self, timeout_s=30):
        """Builds the cluster and returns once it is stable (see wait_stable)."""
        if self.dir is not None:
            raise ClusterError("start(): this Cluster was already started")
        self.dir = tempfile.mkdtemp(prefix="picket-%s-" % self.tag, dir="/tmp")
        atexit.register(self.stop)
        try:
            self._spawn_all(timeout_s)
            self._create(timeout_s)
            self.wait_stable(timeout_s)
            covered = sum(len(self.slots_of(p)) for p in self.primaries())
            if covered != NSLOTS:
                raise ClusterError("after create, the primaries serve %d of %d slots"
                                   % (covered, NSLOTS))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """Kills (SIGKILL) and reaps every node this Cluster started, then
        removes the temp dir unless HARNESS_KEEP is set. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        for n in self.nodes:
            self._kill_proc(n)
        if self.dir and not os.environ.get("HARNESS_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        elif self.dir:
            print("redis_cluster: kept %s (HARNESS_KEEP)" % self.dir, file=sys.stderr)

    def _conf_text(self, n):
        lines = [
            "bind %s" % HOST,
            "port %d" % n.port,
            # An explicit bus port: nothing may rely on port+10000, which
            # could be anyone's port on a shared test machine.
            "cluster-port %d" % n.cluster_port,
            "cluster-enabled yes",
            "cluster-config-file nodes.conf",
            "cluster-node-timeout %d" % self.node_timeout_ms,
            # One shard's outage must not stop the others: with "yes" every
            # node answers CLUSTERDOWN while any slot is uncovered.
            "cluster-require-full-coverage no",
            "appendonly yes",
            "appendfsync everysec",
            'save ""',
            "maxmemory-policy noeviction",
            "protected-mode no",
            "dir %s" % n.dir,
            "logfile %s" % n.log,
            "daemonize no",
            # Not a semantic setting: the 7.0 default waits 5 s for more
            # replicas before a diskless full sync, which would add 5 s to
            # every start and every resync after a failover (deploy/redis.conf
            # sets the same). extra_conf can override it.
            "repl-diskless-sync-delay 0",
        ]
        if self.password is not None:
            # masterauth too: a replica authenticates to its primary with
            # it, for the first sync and for every resync after a failover.
            lines += ["requirepass %s" % _conf_quote(self.password),
                      "masterauth %s" % _conf_quote(self.password)]
        return "\n".join(lines + self.extra_conf) + "\n"

    def _cli_env(self):
        """The environment of every redis-cli the fixture runs: the password
        in REDISCLI_AUTH, which redis-cli reads like -a but which, unlike
        argv, other users cannot see in ps. Without a password it is
        removed, so that one set in the caller's shell does not make
        redis-cli fail its AUTH on our passwordless nodes."""
        env = dict(os.environ)
        env.pop("REDISCLI_AUTH", None)
        if self.password is not None:
            env["REDISCLI_AUTH"] = self.password
        return env

    def _spawn(self, n):
        with open(n.stdout_log, "ab") as out:
            n.proc = subprocess.Popen(
                [REDIS_SERVER, n.conf], cwd=n.dir, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent(os.getpid()))

    def _wait_up(self, n, deadline):
        """True once n answers PING as *our* process (INFO process_id), so
        that another server on a port we thought free is not taken for
        ours; False if n's process exited."""
        while time.monotonic() < deadline:
            if not n.running:
                return False
            try:
                if self.call(n.port, "PING", timeout=0.5) == "PONG":
                    info = _parse_info(self.call(n.port, "INFO", "server", timeout=0.5))
                    if info.get("process_id") == str(n.pid):
                        return True
            except (OSError, RedisError):
                pass        # not listening yet, or LOADING the AOF
            time.sleep(0.02)
        raise ClusterError("redis-server on port %d (pid %s) did not answer PING within the "
                           "bound; its log:\n%s" % (n.port, n.pid, _tail(n.log)))

    def _in_use(self, n):
        return any("Address already in use" in _tail(p, 50) for p in (n.log, n.stdout_log))

    def _spawn_all(self, timeout_s):
        count = self.n_primaries * (1 + self.n_replicas)
        for attempt in range(5):
            ports = _free_ports(2 * count)
            self.nodes = []
            for i in range(count):
                d = os.path.join(self.dir, str(ports[2 * i]))
                os.mkdir(d)
                n = Node(ports[2 * i], ports[2 * i + 1], d)
                with open(n.conf, "w") as f:
                    f.write(self._conf_text(n))
                self.nodes.append(n)
            for n in self.nodes:
                self._spawn(n)
            deadline = time.monotonic() + timeout_s * _time_scale()
            failed = [n for n in self.nodes if not self._wait_up(n, deadline)]
            if not failed:
                return
            # A port taken between _free_ports() and the bind: new ports, again.
            clash = all(self._in_use(n) for n in failed)
            for n in self.nodes:
                self._kill_proc(n)
            if not clash:
                n = failed[0]
                raise ClusterError("redis-server on port %d exited at start; its log:\n%s%s"
                                   % (n.port, _tail(n.log), _tail(n.stdout_log)))
            for n in self.nodes:
                shutil.rmtree(n.dir, ignore_errors=True)
        raise ClusterError("could not find free ports for the cluster in 5 attempts")

    def _create(self, timeout_s):
        # The first n_primaries addresses become the primaries. On one host
        # redis-cli pairs replicas with primaries as it likes (it tries to
        # avoid same-host pairs and cannot), so the real topology is read
        # from CLUSTER NODES afterwards, never assumed.
        args = [REDIS_CLI, "--cluster", "create"]
        args += ["%s:%d" % (HOST, n.port) for n in self.nodes]
        args += ["--cluster-replicas", str(self.n_replicas), "--cluster-yes"]
        try:
            r = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               env=self._cli_env(), timeout=timeout_s * _time_scale())
        except subprocess.TimeoutExpired:
            raise ClusterError("redis-cli --cluster create did not finish in %ds" % timeout_s)
        with open(os.path.join(self.dir, "create.log"), "w") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            raise ClusterError("redis-cli --cluster create failed (exit %d):\n%s%s"
                               % (r.returncode, r.stdout[-2000:], r.stderr[-2000:]))

    def _kill_proc(self, n):
        if n.proc is None or n.proc.returncode is not None:
            return
        try:
            n.proc.kill()       # this pid only: our own child
        except ProcessLookupError:
            pass
        try:
            n.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise ClusterError("redis-server pid %d did not die of SIGKILL in 10 s" % n.pid)

    # -- waiting for a steady state --

    def _not_stable(self):
        """Why the cluster is not stable yet, or None when it is."""
        live = [n for n in self.nodes if n.running]
        if not live:
            return "no node is running"
        views, roles, own = {}, {}, {}
        for n in live:
            info = _parse_info(self.call(n.port, "CLUSTER", "INFO"))
            if info.get("cluster_state") != "ok":
                return "node %d: cluster_state:%s" % (n.port, info.get("cluster_state"))
            table = self._parse_nodes(self.call(n.port, "CLUSTER", "NODES"))
            if len(table) != len(self.nodes):
                return "node %d knows %d of %d nodes" % (n.port, len(table), len(self.nodes))
            pending = [e["port"] for e in table if e["flags"] & {"handshake", "noaddr"}]
            if pending:
                return "node %d: nodes %s still in handshake" % (n.port, pending)
            # A node that is running again must no longer be flagged failed
            # (the dead ones may stay flagged: that is their steady state).
            running = {m.port for m in live}
            flagged = [e["port"] for e in table
                       if e["port"] in running and e["flags"] & {"fail", "fail?"}]
            if flagged:
                return "node %d still flags %s as failed" % (n.port, flagged)
            views[n.port] = self._slot_view(n.port)
            roles[n.port] = {e["port"]: "master" if "master" in e["flags"] else "slave"
                             for e in table if e["port"] in running}
            repl = _parse_info(self.call(n.port, "INFO", "replication"))
            own[n.port] = repl.get("role")
            if repl.get("role") == "slave" and repl.get("master_link_status") != "up":
                return "replica %d: master_link_status:%s" % (n.port,
                                                              repl.get("master_link_status"))
        # Right after --cluster create (or a failover) a node may already be
        # a replica by its own account while others still list it as a
        # primary: stable only once every node agrees with every node's own.
        for port, r in roles.items():
            for m, role in r.items():
                if own.get(m) is not None and own[m] != role:
                    return "node %d sees %d as %s, which says it is a %s" % (port, m, role, own[m])
        first = next(iter(views.values()))
        for port, v in views.items():
            if v != first:
                return "nodes %d and %d disagree on CLUSTER SLOTS" % (live[0].port, port)
        return None

    def wait_stable(self, timeout_s=30):
        """Waits until every running node says cluster_state:ok, knows every
        node (none in handshake), agrees with the others on CLUSTER SLOTS
        (primaries and replicas), and every running replica has
        master_link_status:up. Then records the node ids."""
        deadline = time.monotonic() + timeout_s * _time_scale()
        why = "not checked"
        while time.monotonic() < deadline:
            try:
                why = self._not_stable()
            except (OSError, RedisError) as e:
                why = "%s: %s" % (type(e).__name__, e)
            if why is None:
                for n in self.nodes:
                    if n.running:
                        self._ids[n.port] = self.call(n.port, "CLUSTER", "MYID")
                return
            time.sleep(0.05)
        raise ClusterError("the cluster was not stable within %ds: %s (logs under %s)"
                           % (timeout_s, why, self.dir))

    # -- introspection --

    def _node(self, port):
        for n in self.nodes:
            if n.port == port:
                return n
        raise ValueError("no node of this cluster has port %r" % (port,))

    def _live_ports(self, exclude=()):
        return [n.port for n in self.nodes if n.running and n.port not in exclude]

    def _ask_live(self, *args, exclude=()):
        """args on the first live node that answers (the nodes' views agree
        once the cluster is stable; during a fault they are one node's view)."""
        last = None
        for port in self._live_ports(exclude):
            try:
                return self.call(port, *args)
            except (OSError, RedisError) as e:
                last = e
        raise ClusterError("no live node answered %s: %s" % (" ".join(map(str, args)), last))

    @staticmethod
    def _parse_nodes(text):
        """CLUSTER NODES as a list of dicts: id, port, cluster_port, flags
        (a set), master (id or None), slots (list of (first, last))."""
        out = []
        for line in text.splitlines():
            f = line.split()
            if len(f) < 8:
                continue
            addr = f[1].split(",")[0]          # ip:port@cport[,hostname]
            hostport, _, cport = addr.partition("@")
            slots = []
            for s in f[8:]:
                if s.startswith("["):          # [slot->-id] / [slot-<-id]: migration marks
                    continue
                a, _, b = s.partition("-")
                slots.append((int(a), int(b or a)))
            out.append({
                "id": f[0],
                "port": int(hostport.rpartition(":")[2]),
                "cluster_port": int(cport) if cport else None,
                "flags": set(f[2].split(",")),
                "master": None if f[3] == "-" else f[3],
                "slots": slots,
            })
        return out

    def _slot_view(self, port):
        """One node's CLUSTER SLOTS, normalised: sorted (first, last,
        primary port, sorted replica ports)."""
        view = []
        for r in self.call(port, "CLUSTER", "SLOTS"):
            first, last, primary = r[0], r[1], r[2]
            view.append((first, last, primary[1], tuple(sorted(x[1] for x in r[3:]))))
        return sorted(view)

    def _topology(self):
        return self._parse_nodes(self._ask_live("CLUSTER", "NODES"))

    _FAILED = {"fail", "fail?", "noaddr", "handshake"}

    def _up(self, e):
        # Failed or suspected in the cluster's view, or killed by us and not
        # yet noticed (the flags take node_timeout_ms to appear).
        return not e["flags"] & self._FAILED and e["port"] in self._live_ports()

    def primaries(self):
        """Ports of the nodes that are primaries now (CLUSTER NODES of a live
        node; failed, suspected and killed nodes left out), sorted."""
        return sorted(e["port"] for e in self._topology()
                      if "master" in e["flags"] and self._up(e))

    def replicas_of(self, port):
        """Ports of the live replicas of the node on `port`, sorted."""
        nid = self.node_id(port)
        return sorted(e["port"] for e in self._topology()
                      if "slave" in e["flags"] and e["master"] == nid and self._up(e))

    def node_id(self, port):
        """The node's cluster id (known even while it is down)."""
        self._node(port)
        if port not in self._ids:
            if self._node(port).running:
                self._ids[port] = self.call(port, "CLUSTER", "MYID")
            else:
                for e in self._topology():
                    self._ids[e["port"]] = e["id"]
        return self._ids[port]

    def seeds(self):
        """"127.0.0.1:P1,127.0.0.1:P2,..." of the primaries (for --redis-cluster)."""
        return ",".join("%s:%d" % (HOST, p) for p in self.primaries())

    def keyslot(self, key):
        return keyslot(key)

    def owner_of_slot(self, slot, via=None):
        """Port of the primary serving `slot` per CLUSTER SLOTS (of `via`, or
        of the first live node), or None if no node serves it."""
        slots = self.call(via, "CLUSTER", "SLOTS") if via else self._ask_live("CLUSTER", "SLOTS")
        for r in slots:
            if r[0] <= slot <= r[1]:
                return r[2][1]
        return None

    def slots_of(self, port, via=None):
        """Sorted list of the slots `port` serves per CLUSTER SLOTS."""
        slots = self.call(via, "CLUSTER", "SLOTS") if via else self._ask_live("CLUSTER", "SLOTS")
        out = []
        for r in slots:
            if r[2][1] == port:
                out.extend(range(r[0], r[1] + 1))
        return sorted(out)

    def info(self, port, section=None):
        """INFO [section] of a node as a dict."""
        return _parse_info(self.call(port, "INFO", *([section] if section else [])))

    def cli(self, port, *args, timeout=10):
        """stdout of `redis-cli -p port args...` (no shell; args as given;
        authenticated through REDISCLI_AUTH when the cluster has a password,
        so keep the password itself out of args: they are argv, seen by ps).
        Raises ClusterError when redis-cli exits non-zero (e.g. cannot
        connect). Note: redis-cli 7.0 exits 0 on an error reply and prints
        it ("ERR ...", "MOVED 12182 127.0.0.1:P") like any string: use
        call() to tell errors from values."""
        argv = [REDIS_CLI, "-h", HOST, "-p", str(port)] + [str(a) for a in args]
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, errors="surrogateescape", env=self._cli_env(),
                               timeout=timeout * _time_scale())
        except subprocess.TimeoutExpired:
            raise ClusterError("redis-cli -p %d %s: no answer in %ds" % (port, args, timeout))
        if r.returncode != 0:
            raise ClusterError("redis-cli -p %d %s: exit %d: %s"
                               % (port, " ".join(map(str, args)), r.returncode,
                                  (r.stderr or r.stdout).strip()))
        return r.stdout

    def cmd(self, port, *args, timeout=10):
        """cli()'s output as lines (redis-cli prints one line per element of
        an array reply, nested arrays flattened; an empty array is [""])."""
        out = self.cli(port, *args, timeout=timeout)
        if out.endswith("\n"):
            out = out[:-1]
        return out.split("\n")

    def call(self, port, *args, timeout=2.0, readonly=False):
        """Like cli() but over a socket: the parsed reply, RedisError on an
        error reply (see the module-level call()). Sends AUTH first when the
        cluster has a password (the module-level call() without password=
        is the way to talk to a node unauthenticated)."""
        return call(port, *args, timeout=timeout, readonly=readonly, password=self.password)

    # -- faults --

    def kill(self, port):
        """SIGKILL the node on `port` and reap it. Remembers which slots it
        served, for wait_failover()."""
        n = self._node(port)
        if not n.running:
            raise ClusterError("kill(%d): the node is not running" % port)
        self.node_id(port)      # so it can still be named once it is down
        try:
            owned = self.slots_of(port, via=port)
        except (OSError, RedisError):
            owned = self.slots_of(port)         # it was not answering: others' view
        self._kill_proc(n)
        self._killed[port] = (time.monotonic(), owned)

    def restart(self, port, timeout_s=30):
        """Starts the node again on its dir, port and bus port; it rejoins
        from its nodes.conf (an old primary whose slots were failed over
        comes back as a replica). Returns once it answers PING; use
        wait_stable() to wait until the cluster has taken it back."""
        n = self._node(port)
        if n.running:
            raise ClusterError("restart(%d): the node is still running" % port)
        self._spawn(n)
        if not self._wait_up(n, time.monotonic() + timeout_s * _time_scale()):
            raise ClusterError("restart(%d): redis-server exited%s; its log:\n%s"
                               % (port, " (port taken by another process)"
                                  if self._in_use(n) else "", _tail(n.log)))

    def wait_failover(self, dead_port, timeout_s=30):
        """Waits until one live node other than dead_port serves every slot
        dead_port served when it was killed, in the view of every live
        primary, and every live primary says cluster_state:ok. Returns
        (new primary's port, seconds waited in this call)."""
        if dead_port not in self._killed:
            raise ClusterError("wait_failover(%d): kill() it first" % dead_port)
        _, owned = self._killed[dead_port]
        if not owned:
            raise ClusterError("wait_failover(%d): it served no slots (a replica?)" % dead_port)
        t0 = time.monotonic()
        deadline = t0 + timeout_s * _time_scale()
        why = "not checked"
        while time.monotonic() < deadline:
            try:
                why, new = self._failover_state(dead_port, owned)
            except (OSError, RedisError, ClusterError) as e:
                why, new = "%s: %s" % (type(e).__name__, e), None
            if why is None:
                return new, time.monotonic() - t0
            time.sleep(0.05)
        raise ClusterError("no failover of %d within %ds: %s (logs under %s)"
                           % (dead_port, timeout_s, why, self.dir))

    def _failover_state(self, dead_port, owned):
        owners = set()
        for port in self._live_ports(exclude=(dead_port,)):
            me = [e for e in self._parse_nodes(self.call(port, "CLUSTER", "NODES"))
                  if "myself" in e["flags"]][0]
            if "master" not in me["flags"]:
                continue
            state = _parse_info(self.call(port, "CLUSTER", "INFO")).get("cluster_state")
            if state != "ok":
                return "primary %d: cluster_state:%s" % (port, state), None
            owner = {}
            for r in self.call(port, "CLUSTER", "SLOTS"):
                for s in range(r[0], r[1] + 1):
                    owner[s] = r[2][1]
            seen = {owner.get(s) for s in owned}
            if len(seen) != 1 or None in seen or dead_port in seen:
                return "primary %d sees %d's slots served by %s" % (port, dead_port,
                                                                   sorted(map(str, seen))), None
            owners |= seen
        if len(owners) != 1:
            return "the live primaries disagree on the new owner: %s" % sorted(owners), None
        new = owners.pop()
        if not self._node(new).running:
            return "the new owner %d is not running" % new, None
        return None, new

    # -- slot migration --

    def _ok(self, port, *args):
        """A command through redis-cli that must answer OK (redis-cli exits 0
        on error replies, so the reply text is checked)."""
        out = self.cli(port, *args).strip()
        if out != "OK":
            raise ClusterError("redis-cli -p %d %s: %s" % (port, " ".join(map(str, args)), out))

    def migrate_slot(self, slot, dst_port, between=None, batch=10, timeout_s=10):
        """Moves `slot` to the primary on dst_port as redis-cli --cluster
        reshard does, one slot, in steps: IMPORTING on dst, MIGRATING on
        src, MIGRATE of `batch` keys at a time (between() is called after
        each batch, while the slot is in its ASK window), then SETSLOT NODE
        on dst, src and every other primary. Returns the number of keys
        moved, once every live node's CLUSTER SLOTS names dst as the owner.
        Note Redis 7.0 turns src into a replica of dst if this was its last
        slot (cluster-allow-replica-migration)."""
        src = self.owner_of_slot(slot)
        if src is None:
            raise ClusterError("migrate_slot(%d): no node serves it" % slot)
        if src == dst_port:
            return 0
        if dst_port not in self.primaries():
            raise ClusterError("migrate_slot(%d): %d is not a primary" % (slot, dst_port))
        src_id, dst_id = self.node_id(src), self.node_id(dst_port)
        # The order matters: dst must accept ASKING before src starts
        # sending clients there.
        self._ok(dst_port, "CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        self._ok(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        moved = 0
        # COUNTKEYSINSLOT ends the loop rather than an empty GETKEYSINSLOT:
        # redis-cli prints an empty array and the one key "" alike.
        while int(self.cli(src, "CLUSTER", "COUNTKEYSINSLOT", slot)) > 0:
            keys = self.cmd(src, "CLUSTER", "GETKEYSINSLOT", slot, batch)
            # src opens its own connection to dst, which needs the password
            # as much as we do: MIGRATE's AUTH option. Sent over the socket
            # client, not redis-cli, where it would be argv (seen by ps).
            auth = ["AUTH", self.password] if self.password is not None else []
            try:
                out = self.call(src, "MIGRATE", HOST, dst_port, "", 0, 5000, *auth,
                                "KEYS", *keys, timeout=10 * _time_scale())
            except RedisError as e:
                out = str(e)
            except OSError as e:        # a ClusterError, as when it went through redis-cli
                out = "%s: %s" % (type(e).__name__, e)
            if out not in ("OK", "NOKEY"):     # NOKEY: they expired meanwhile
                raise ClusterError("MIGRATE of slot %d from %d to %d: %s"
                                   % (slot, src, dst_port, out))
            moved += len(keys)
            if between:
                between()
        # dst first: once src hands the slot over, clients it redirects must
        # find dst already owning it (not just importing).
        self._ok(dst_port, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        self._ok(src, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        for p in self.primaries():
            if p not in (src, dst_port) and self._node(p).running:
                self._ok(p, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        self._wait_slot_owner(slot, dst_port, timeout_s)
        return moved

    def _wait_slot_owner(self, slot, port, timeout_s):
        # Replicas learn the new owner by gossip; wait so that
        # owner_of_slot() answers the same whichever node it asks.
        deadline = time.monotonic() + timeout_s * _time_scale()
        while time.monotonic() < deadline:
            try:
                if all(self.owner_of_slot(slot, via=p) == port for p in self._live_ports()):
                    return
            except (OSError, RedisError):
                pass
            time.sleep(0.05)
        raise ClusterError("slot %d: not every node names %d its owner within %ds"
                           % (slot, port, timeout_s))

    def describe(self):
        """A JSON-able description (what serve --info-file writes)."""
        topo = {e["port"]: e for e in self._topology()}
        ids = {e["id"]: e["port"] for e in topo.values()}
        nodes = []
        for n in self.nodes:
            e = topo.get(n.port, {})
            flags = e.get("flags", set())
            nodes.append({"port": n.port, "cluster_port": n.cluster_port, "pid": n.pid,
                          "dir": n.dir, "log": n.log,
                          "role": "primary" if "master" in flags else "replica",
                          "primary": ids.get(e.get("master"))})
        return {"dir": self.dir, "seeds": self.seeds(), "primaries": self.primaries(),
                "harness_pid": os.getpid(), "nodes": nodes}


# --- command line --------------------------------------------------------------------

def _write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_password_file(path):
    """The first line of path, without its line end (the rest of the file
    is ignored). The password itself is never in a message."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
            pw = f.readline().rstrip("\r\n")
    except OSError as e:
        raise ClusterError("--password-file %s: %s" % (path, e.strerror))
    if not pw or "\0" in pw:
        raise ClusterError("--password-file %s: the first line is empty or has a NUL" % path)
    return pw


def cmd_serve(a):
    password = _read_password_file(a.password_file) if a.password_file else None
    parent = os.getppid()
    state = {"stop": False, "serving": False}

    def on_signal(signum, frame):
        state["stop"] = True
        if not state["serving"]:
            raise SystemExit(128 + signum)     # abort start(); its cleanup runs
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)

    c = Cluster(a.primaries, a.replicas, a.node_timeout_ms, a.extra_conf or (), a.tag,
                password=password)
    try:
        c.start()
        # The info file first: whoever waits for the seeds file may read it.
        if a.info_file:
            _write_atomic(a.info_file, json.dumps(c.describe(), indent=2) + "\n")
        _write_atomic(a.seeds_file, c.seeds() + "\n")
        state["serving"] = True
        while not state["stop"] and os.getppid() == parent:
            time.sleep(0.2)
    finally:
        c.stop()
    return 0


def cmd_selftest(a):
    t_start = time.monotonic()

    def step(msg):
        print("[%5.1fs] %s" % (time.monotonic() - t_start, msg), flush=True)

    def check(cond, msg):
        if not cond:
            raise ClusterError("selftest: " + msg)

    # Known answers first: CRC16/XMODEM("123456789") is 0x31C3.
    check(crc16(b"123456789") == 0x31C3, "crc16 check value")
    check(keyslot("{user1000}.following") == keyslot("{user1000}.followers"), "hash tag")

    # Random, so that nothing can pass by knowing it; never printed.
    password = secrets.token_hex(16) if a.password else None
    c = Cluster(primaries=3, replicas=1, tag=a.tag, password=password)
    dir_ = None
    pids = []
    try:
        c.start()
        dir_ = c.dir
        pids = [n.pid for n in c.nodes]
        prims = c.primaries()
        check(len(prims) == 3, "3 primaries, got %s" % prims)
        for p in prims:
            check(len(c.replicas_of(p)) == 1, "one replica of %d, got %s" % (p, c.replicas_of(p)))
        step("cluster up: seeds %s%s" % (c.seeds(), " (password set)" if password else ""))

        if password:
            # Every node, replicas too: each enforces its own requirepass.
            for n in c.nodes:
                try:
                    call(n.port, "PING")
                    check(False, "node %d answered PING without the password" % n.port)
                except RedisError as e:
                    check(str(e).startswith("NOAUTH"), "node %d, no password: %s" % (n.port, e))
            try:
                call(prims[0], "PING", password=password + "x")
                check(False, "node %d accepted a wrong password" % prims[0])
            except RedisError as e:
                check(str(e).startswith("WRONGPASS"), "wrong password: %s" % e)
            check(call(prims[0], "PING", password=password) == "PONG", "PING with the password")
            # redis-cli: authenticated by cli() (REDISCLI_AUTH), NOAUTH without it.
            check(c.cli(prims[0], "PING").strip() == "PONG", "redis-cli PING with REDISCLI_AUTH")
            env = {k: v for k, v in os.environ.items() if k != "REDISCLI_AUTH"}
            r = subprocess.run([REDIS_CLI, "-h", HOST, "-p", str(prims[0]), "PING"], env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=10 * _time_scale())
            check(r.stdout.startswith("NOAUTH"), "redis-cli without the password: %r"
                  % (r.stdout + r.stderr))
            check(password not in str(ClusterError("x %s y" % password)),
                  "ClusterError does not mask the password")
            step("password: NOAUTH without it, WRONGPASS with a wrong one, "
                 "socket and redis-cli calls authenticated")

        keys = ["picket:{job.1}:lease", "picket:{job.1}:fence", "123456789", "", "{", "}",
                "{}", "{}x", "x{}", "a{b}c", "{a}{b}", "}{a}", "{{a}}", "a{{b}}", "{a{b}}",
                "foo{}{bar}", "foo{bar}{zap}", "a:b:{c:d}:e", "with space", "dash-key",
                "caf\u00e9", "{\u00e9t\u00e9}x"]
        keys += ["picket:{job.%d}:lease" % i for i in range(14)]
        keys += ["k%d" % i for i in range(14)]
        for k in keys:
            want = int(c.cli(prims[0], "CLUSTER", "KEYSLOT", k))
            check(keyslot(k) == want, "keyslot(%r) = %d, CLUSTER KEYSLOT says %d"
                  % (k, keyslot(k), want))
        step("keyslot agrees with CLUSTER KEYSLOT on %d keys" % len(keys))

        key = "picket:{job.1}:lease"
        slot = c.keyslot(key)
        src = c.owner_of_slot(slot)
        dst = [p for p in prims if p != src][0]
        slot_keys = [key, "picket:{job.1}:fence", "picket:{job.1}:x"]
        for k in slot_keys:
            check(c.call(src, "SET", k, "v-" + k) == "OK", "SET %s" % k)
        asks = []

        def between():
            # Mid-migration: keys already on dst get ASK from src.
            for k in slot_keys:
                try:
                    c.call(src, "GET", k)
                except RedisError as e:
                    asks.append(str(e))
        moved = c.migrate_slot(slot, dst, between=between, batch=1)
        check(moved == 3, "moved %d keys, expected 3" % moved)
        check(any(s.startswith("ASK %d " % slot) for s in asks), "no ASK mid-migration: %s" % asks)
        check(c.owner_of_slot(slot) == dst, "slot %d not on %d after migration" % (slot, dst))
        check(c.call(dst, "GET", key) == "v-" + key, "key not on the new owner")
        try:
            c.call(src, "GET", key)
            check(False, "the old owner still answers for slot %d" % slot)
        except RedisError as e:
            check(str(e).startswith("MOVED %d 127.0.0.1:%d" % (slot, dst)), "not MOVED: %s" % e)
        # So that the failover below cannot lose the migrated keys.
        check(c.call(dst, "WAIT", 1, 5000) >= 1, "dst's replica did not ack the migrated keys")
        step("slot %d migrated %d -> %d (%d keys, %d ASK replies seen)"
             % (slot, src, dst, moved, len(asks)))

        replica = c.replicas_of(dst)[0]
        c.kill(dst)
        new, secs = c.wait_failover(dst, 20)
        check(new == replica, "failover to %d, expected its replica %d" % (new, replica))
        check(c.call(new, "GET", key) == "v-" + key, "key lost in the failover")
        check(dst not in c.primaries(), "the dead node is still listed as a primary")
        step("killed primary %d: replica %d took over in %.2f s" % (dst, new, secs))
        print("failover_seconds=%.2f" % secs, flush=True)

        c.restart(dst)
        c.wait_stable(30)
        check(dst in c.replicas_of(new), "restarted %d is not a replica of %d (replicas: %s)"
              % (dst, new, c.replicas_of(new)))
        check(c.info(dst, "replication").get("role") == "slave", "restarted node not a replica")
        check(c.call(dst, "GET", key, readonly=True) == "v-" + key,
              "the restarted node has not synced the key")
        step("restarted %d: back as a replica of %d" % (dst, new))

        if password:
            # Nowhere but in the redis.conf files: not in a node's argv, not
            # in the logs, create.log, nodes.conf or the AOF.
            leaks = []
            for n in c.nodes:
                if n.running:
                    with open("/proc/%d/cmdline" % n.pid, "rb") as f:
                        if password.encode() in f.read():
                            leaks.append("argv of pid %d" % n.pid)
            for root, _, files in os.walk(c.dir):
                for name in files:
                    path = os.path.join(root, name)
                    if name != "redis.conf":
                        with open(path, "rb") as f:
                            if password.encode() in f.read():
                                leaks.append(path)
            check(not leaks, "the password is in %s" % leaks)
            step("password: in no argv, log or data file")
    finally:
        c.stop()

    for pid in pids:
        try:
            os.kill(pid, 0)
            check(False, "pid %d still exists after stop()" % pid)
        except ProcessLookupError:
            pass
    if not os.environ.get("HARNESS_KEEP"):
        check(dir_ is None or not os.path.exists(dir_), "%s still exists after stop()" % dir_)
    step("stopped; no process%s left. selftest OK"
         % ("" if os.environ.get("HARNESS_KEEP") else " or dir"))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run a cluster until SIGTERM/SIGINT or the parent dies")
    s.add_argument("--primaries", type=int, default=3)
    s.add_argument("--replicas", type=int, default=1)
    s.add_argument("--node-timeout-ms", type=int, default=1000)
    s.add_argument("--extra-conf", action="append", metavar="LINE",
                   help="a redis.conf line for every node (repeatable)")
    s.add_argument("--tag", default="cluster", help="temp dir is /tmp/picket-TAG-XXXXXX")
    s.add_argument("--seeds-file", required=True,
                   help="written (atomically) with the primaries' host:port list")
    s.add_argument("--info-file", help="written (atomically) with a JSON description")
    s.add_argument("--password-file", metavar="PATH",
                   help="every node requires the password on its first line (a file, "
                        "not an argument: argv is visible to every user in ps)")
    t = sub.add_parser("selftest", help="build a 3+3 cluster and exercise the fixture")
    t.add_argument("--tag", default="cluster")
    t.add_argument("--password", action="store_true",
                   help="the same, on a cluster with a random password (and check that "
                        "a call without it gets NOAUTH)")
    a = ap.parse_args(argv)
    try:
        return cmd_serve(a) if a.cmd == "serve" else cmd_selftest(a)
    except ClusterError as e:
        print("redis_cluster: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
