"""netns: the fault primitives of the chaos suite -- real network partitions
and steppable wall clocks for real processes.

What it owns
------------
* Net: one Linux bridge in the root namespace (name "pkc<pid>", address .1
  of a private 10.213.X.0/24 picked per run, X from the pid, skipping any X
  whose /24 overlaps an address or route already on this machine) and one
  network namespace per Host ("pkc<pid>-<name>"), joined to the bridge by a
  veth pair ("pkc<pid>v<i>" on the bridge, "eth0" inside, the next address),
  an nft table in each namespace and, only while a host is isolated, one
  netdev nft table in the root namespace bound to our own veths.
  The test's clients live in the root namespace and reach every host through
  the bridge address.  No default route exists inside a host: a program
  there can only reach this /24 (the workplace rule: traffic only to
  addresses we created), anything else fails with ENETUNREACH.
* The processes it spawns are the caller's to kill; Net never kills.
* Clock: one libfaketime timestamp file; every program spawned with it sees
  CLOCK_REALTIME = real time + offset, changed at run time by set_offset().

Why
---
A lock service is only as safe as its behaviour when packets vanish and
clocks jump.  Simulating either inside the client library proves nothing
about picketd or Redis; so the faults are real: packets really dropped by
the kernel between real processes, and the real process's gettimeofday()/
clock_gettime(CLOCK_REALTIME) really answering with a stepped time.

How partitions are made (and why not another way)
-------------------------------------------------
Every drop happens where a packet is *received*, never where it is sent:
the sender's stack transmits normally, so nobody sees an error, an RST or
an ICMP, and TCP behaves exactly as on a lossy wire (retransmissions with
RTO backoff; established connections stall, new connects hang; on heal the
next retransmission gets through and the connection carries on).
* Each host namespace has one nft table, `table netdev chaos`: a set
  cut_in and an ingress chain bound to its eth0, `ip saddr @cut_in drop`.
  partition(A, B) puts B in A's cut_in and A in B's cut_in.
* isolate(h) also puts every host and the bridge address in h's cut_in
  (root->h dies on arrival in h), and h in everyone's.  The h->root
  direction can only be dropped on arrival in the root namespace: a
  `table netdev <net id>` there (e.g. "pkc1234") with one ingress chain
  bound to h's bridge-side veth -- our own device, so no other traffic can
  match -- dropping every IPv4 packet h sends.  That table exists only
  while some host is isolated; heal()/close()/cleanup_stale() delete it.
Measured on this machine (kernel 6.18, nft 1.0.6), the alternatives:
  - `table inet` output-hook drop in the sender's namespace: UDP sendto()
    fails with EPERM, a local error no real partition gives.
  - netdev *egress* drop in the sender's namespace (the first version of
    this module, for h->root): UDP is silent and connect() hangs, but the
    kernel reports a local drop, so TCP never counts a transmission: it
    zero-window-probes every ~500 ms without backoff, exhausts
    tcp_retries2 and ABORTS the connection with ETIMEDOUT after ~8 s of
    isolation (a real partition keeps it ~15 min).  With the drop on
    receipt instead, the same connection survived a 12 s isolation
    (rto 6.5 s, backoff 5) and delivered its data 2.5 s after heal.
  - `ip route add blackhole`: the sender gets EINVAL at once on connect()
    and sendto() -- not a partition at all.  So there is no blackhole
    fallback: nft works in a netns here; Net.host() fails loudly if not.
  - tc netem (loss that looks like success) is not available: this
    kernel has no sch_prio/sch_netem.
ARP is never dropped (the L2 neighbour stays resolvable, as across a real
routed partition), so no "No route to host" appears after a few seconds.
IPv6 is disabled in every host namespace so nothing can bypass the IPv4
rules over link-local addresses.  The bridge (root namespace, br_netfilter
loaded) relies on the root FORWARD policy being ACCEPT (it is here).

How clocks are stepped
----------------------
Clock.env() gives LD_PRELOAD=libc_malloc_debug.so.0:libfaketime.so.1 (the
glibc malloc-debug library first: Debian's redis-server, linked with
jemalloc, hangs at startup under libfaketime alone), FAKETIME_TIMESTAMP_FILE,
FAKETIME_NO_CACHE=1 (re-read the file on every time call, so a step is seen
by the very next call) and FAKETIME_DONT_FAKE_MONOTONIC=1 (only the wall
clock moves, like an NTP step; Redis's timers run on CLOCK_MONOTONIC).
The file holds one relative offset in seconds, sign first, decimal point,
no unit: "+60.000000", "-120.250000", "+0.000000" (libfaketime's
"+N"/"-N" relative syntax; N is parsed with atof, so fractions work --
measured: "+60.5" gives +60.500 s, "-120.25" gives -120.250 s; a letter
m/h/d/y anywhere would be a multiplier, and atof is locale-dependent, so
env() also sets LC_NUMERIC=C).  set_offset() writes a temp file and
rename()s it, so a reader never sees a half-written file.

Measured (tests/chaos/test_netns.py, 2 cores, three runs, ~27 s each):
  - redis-server 7.0.15 under a Clock starts (PING answers) in 15-40 ms.
    With libfaketime alone (no malloc-debug library first) it never starts:
    "libfaketime: Returning -1 on clock_gettime() to break recursion", hung.
  - `TIME` shows the new offset on the first request after set_offset()
    (+60, -120, back to 0): 0.3-1.4 ms after the rename, i.e. one round
    trip; the reported time is within 0.1 ms of real time + offset.
    Sub-second offsets (+2.5) work.
  - SET k v PX 100000, then set_offset(+200): the next GET returns nil (the
    key expired by the stepped clock).  A step of -120 s makes PTTL grow to
    219999-220000 ms: expiry times are absolute wall-clock times.
  - redis-server --sentinel follows the clock too (INFO server_time_usec,
    < 1 ms), and a step makes it enter TILT mode (INFO sentinel_tilt:1,
    "+tilt" in its log) 50-110 ms later (its 100 ms timer): Sentinel's
    failure-detection timers run on the wall clock.
  - partition([A],[B]) with repl-timeout 2 (repl-ping-replica-period 1):
    the replica's master_link_status goes down 3.0-3.1 s later (checked
    once a second, as "more than 2 whole seconds"); writes on A do not
    reach B; after heal() the write is on B 0.5 s later.  New connects
    across the partition (both ways, from inside the namespaces) time out.
    A root-namespace client keeps reaching A and B throughout; isolate(A)
    makes a new connect() to A time out (1 s: it hangs, no RST) and a PING
    on an established connection time out, while B stays reachable.  A
    connection A opened to the root namespace, with data queued 1.5 s into
    a 10.5 s isolation, survives it.  After heal a new connect works at
    once (heal() itself ~50 ms); the stalled PING is answered ~4 s later
    and A's queued data arrives ~4.3 s later, when TCP next retransmits
    (RTO backoff; ~1.3 s after a 3 s isolation).
  - partition() of two hosts takes ~10 ms (one nft transaction per ns,
    in parallel); close() of a 2-host net 85-145 ms.
  - SIGSTOP/SIGCONT/SIGKILL of Popen.pid reach redis-server itself
    (/proc/<pid>/exe is redis-check-rdb, /proc/<pid>/ns/net the host's),
    also when the spawning thread has exited.  Note: redis-server
    overwrites its /proc/<pid>/environ (process title); check the preload
    in /proc/<pid>/maps instead.
  - close() leaves no namespace, veth, bridge or nft table of the run
    (`ip netns list`, `ip link`, `nft list tables`); a run killed with
    SIGKILL takes its spawned programs along (PR_SET_PDEATHSIG) and
    cleanup_stale() removes its namespaces, bridge, veths, root-ns table
    and faketime shm files.
  - cost of FAKETIME_NO_CACHE (the file re-read on every time call):
    redis-benchmark GET ~47k/s under a Clock vs ~62k/s without; idle CPU
    unchanged.

How spawning works
------------------
spawn() runs  setpriv --pdeathsig KILL -- nsenter --net=/run/netns/NS --
env -- [clock vars] argv...  : each stage exec()s the next, so Popen.pid IS
the program's pid (SIGSTOP/SIGKILL reach it) and there is no Python code
between fork and exec.  PR_SET_PDEATHSIG fires when the *thread* that forked
exits, not the process; the nemesis restarts processes from short-lived
threads, so every spawn is done by one long-lived spawner thread of this
module -- a program dies with the test process, not with the thread that
asked for it.  libfaketime is only preloaded into the final program (env
sets it), not into setpriv/nsenter.

How cleanup works
-----------------
* close(): delete the root-side veths (which deletes their eth0 peers at
  once; deleting a namespace alone tears its devices down asynchronously,
  and they linger for a moment), the namespaces (their nft tables go with
  them), the bridge and the root-ns isolate table, then wait until
  `ip link`/`ip netns`/`nft list tables` show none of them.
  Idempotent, registered with atexit, never raises for a missing object.
  A process still alive inside a deleted namespace keeps running in it,
  cut off -- callers kill their processes first.
* libfaketime (0.9.10) leaves /dev/shm/faketime_shm_<pid> and
  sem.faketime_sem_<pid> behind whenever a program dies without a clean
  exit (SIGKILL: every nemesis kill).  Measured: a stale *pair* is harmless
  (the next program with that pid finds the semaphore, skips the shm), but
  a lone faketime_shm_<pid> (semaphore removed first, by hand or a careless
  sweep) makes the next clocked program with that pid exit at startup with
  "shm_open failed: File exists" (pid_max is 32768 here: pids come round).
  close(), cleanup_stale() and every clocked spawn remove the pairs of
  pids that are no longer alive, shm before semaphore (only dead pids:
  the files are then garbage whoever made them).
* cleanup_stale(): names encode the creating pid ("pkc<pid>..."); any
  namespace, link or root netdev table of ours whose pid is dead (or a
  zombie) is a crashed run's leftover and is deleted.  Net() calls it
  first, so a crash is repaired by the next run.  (A pid reused by an
  unrelated live process keeps its leftovers until that process is gone.)
"""

import atexit
import concurrent.futures
import fcntl
import ipaddress
import os
import re
import subprocess
import threading
import time

PREFIX = "pkc"
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
MALLOC_DEBUG = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
# The /24s we pick from: 10.213.X.0/24.  One per Net; X from the pid.
_NET_BASE = (10, 213)
# Serializes subnet choice + bridge creation between concurrent runs.
_LOCK_FILE = "/run/lock/picket-chaos-netns.lock"
_CLOCK_VARS = ("LD_PRELOAD", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_NO_CACHE",
               "FAKETIME_DONT_FAKE_MONOTONIC", "LC_NUMERIC")

_counter_lock = threading.Lock()
_net_counter = 0          # Nets created by this process (names must differ)
_spawner = None           # the long-lived thread that forks every program


def _run(argv, *, input=None, check=True, timeout=10):
    """Run a short admin command (ip, nft); its stderr in the error."""
    r = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv), r.returncode,
                                                   (r.stderr or r.stdout).strip()))
    return r


def _in_ns(ns, argv):
    return ["nsenter", "--net=/run/netns/" + ns, "--"] + list(argv)


def _pid_alive(pid):
    """True if pid runs (a zombie counts as dead: it holds nothing)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return True
    # state is the first field after the ")" closing the command name
    return stat[stat.rfind(")") + 2:][:1] not in ("Z", "X")


def _sweep_faketime_shm(pids=None):
    """Remove libfaketime's per-pid shm/semaphore files of dead pids (all
    of them, or only those in pids).  Returns the paths removed."""
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return []
    found = set()
    for n in names:
        m = re.fullmatch(r"(?:faketime_shm_|sem\.faketime_sem_)(\d+)", n)
        if m:
            found.add(int(m.group(1)))
    removed = []
    for pid in sorted(found):
        if (pids is not None and pid not in pids) or _pid_alive(pid):
            continue
        # shm first, semaphore second: a stale pair is harmless (libfaketime
        # sees the semaphore exists and quietly goes without), a lone shm
        # file makes the next program with that pid exit at startup.
        for n in ("faketime_shm_%d" % pid, "sem.faketime_sem_%d" % pid):
            try:
                os.unlink(os.path.join("/dev/shm", n))
                removed.append("/dev/shm/" + n)
            except FileNotFoundError:
                pass
    return removed


def _list_netns():
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def _list_links():
    r = _run(["ip", "-o", "link", "show"], check=False)
    names = []
    for line in r.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def _list_root_tables():
    """Names of the root namespace's netdev tables (ours are "<prefix><pid>...")."""
    r = _run(["nft", "list", "tables", "netdev"], check=False)
    return [l.split()[2] for l in r.stdout.splitlines() if len(l.split()) == 3]


def _owner_pid(name, prefix):
    m = re.match(re.escape(prefix) + r"(\d+)(?!\d)", name)
    return int(m.group(1)) if m else None


def cleanup_stale(prefix=PREFIX):
    """Delete the namespaces, veths and bridges named <prefix><pid>... whose
    pid is no longer alive (leftovers of a crashed run), and libfaketime's
    shm files of dead pids.  Returns the list of what it removed."""
    removed = []
    links = [n for n in _list_links() if _owner_pid(n, prefix) is not None]
    dead_links = [n for n in links if not _pid_alive(_owner_pid(n, prefix))]
    # veths first (deleting one end deletes both, synchronously), bridges last
    dead_links.sort(key=lambda n: 0 if re.search(r"v\d+$", n) else 1)
    for n in dead_links:
        if _run(["ip", "link", "del", n], check=False).returncode == 0:
            removed.append("link " + n)
    for ns in _list_netns():
        pid = _owner_pid(ns, prefix)
        if pid is not None and not _pid_alive(pid):
            if _run(["ip", "netns", "del", ns], check=False).returncode == 0:
                removed.append("netns " + ns)
    for t in _list_root_tables():
        pid = _owner_pid(t, prefix)
        if pid is not None and not _pid_alive(pid):
            if _run(["nft", "delete", "table", "netdev", t], check=False).returncode == 0:
                removed.append("nft netdev " + t)
    removed += _sweep_faketime_shm()
    return removed


def _spawn_executor():
    # One thread forks every program: PR_SET_PDEATHSIG is tied to the
    # forking thread, and this one lives as long as the process does.
    global _spawner
    with _counter_lock:
        if _spawner is None:
            _spawner = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="netns-spawner")
        return _spawner


class Host:
    """One network namespace on the Net: .name, .ns (namespace name),
    .ip (its address on eth0), .veth (the bridge-side end)."""

    def __init__(self, net, name, ns, ip, veth):
        self.net, self.name, self.ns, self.ip, self.veth = net, name, ns, ip, veth

    def __repr__(self):
        return "Host(%s, %s)" % (self.name, self.ip)


class Net:
    """A bridge and its hosts; see the module docstring."""

    def __init__(self, tag: str, *, prefix: str = PREFIX):
        global _net_counter
        if os.geteuid() != 0:
            raise PermissionError("netns.Net needs root (network namespaces, nft)")
        self.tag = tag
        self._lock = threading.RLock()
        self._closed = False
        self.hosts = {}              # name -> Host
        self._cuts = set()           # frozenset({ip, ip}) pairs that must not talk
        self._isolated = set()       # host names cut from everyone and the root ns
        self._clocked_pids = set()   # for libfaketime shm cleanup
        self._root_table = False     # the root-ns netdev table of isolate() exists
        with _counter_lock:
            k = _net_counter
            _net_counter += 1
        if not re.fullmatch(r"[a-z]{1,4}", prefix):
            raise ValueError("prefix: 1-4 lowercase letters (names hold <= 15 chars)")
        self.id = "%s%d" % (prefix, os.getpid()) + ("n%d" % k if k else "")
        self.bridge = self.id
        cleanup_stale(prefix)
        os.makedirs(os.path.dirname(_LOCK_FILE), exist_ok=True)
        with open(_LOCK_FILE, "a") as lk:
            # Held while choosing the /24 and creating the bridge that then
            # shows it, so two runs starting together never pick the same.
            fcntl.flock(lk, fcntl.LOCK_EX)
            x = self._pick_subnet()
            self.subnet = "%d.%d.%d.0/24" % (_NET_BASE + (x,))
            self._prefix3 = "%d.%d.%d." % (_NET_BASE + (x,))
            self.ip = self._prefix3 + "1"
            atexit.register(self.close)
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            # Keep the root firewall out of our bridge: with br_netfilter
            # loaded, bridged packets go through the root FORWARD chain,
            # whose policy a container runtime (podman, docker) may have
            # set to DROP. Per bridge, so nothing else on the host changes.
            _run(["ip", "link", "set", self.bridge, "type", "bridge", "nf_call_iptables", "0",
                  "nf_call_ip6tables", "0", "nf_call_arptables", "0"], check=False)
            _run(["ip", "link", "set", "dev", self.bridge, "alias",
                  "picket chaos net tag=%s pid=%d" % (tag, os.getpid())], check=False)
            self._no_ipv6(self.bridge)
            _run(["ip", "addr", "add", self.ip + "/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])

    # ---- building -------------------------------------------------------

    def _pick_subnet(self):
        used = []
        for cmd in (["ip", "-4", "-o", "addr", "show"], ["ip", "-4", "route", "show", "table", "all"]):
            for tok in _run(cmd, check=False).stdout.split():
                try:
                    n = ipaddress.ip_network(tok, strict=False)
                except ValueError:
                    continue
                if n.version == 4 and n.prefixlen >= 16:   # not default, not 10/8-wide
                    used.append(n)
        start = os.getpid() % 254
        for i in range(254):
            x = (start + i) % 254 + 1
            cand = ipaddress.ip_network("%d.%d.%d.0/24" % (_NET_BASE + (x,)))
            if not any(cand.overlaps(u) for u in used):
                return x
        raise RuntimeError("no free /24 in %d.%d.0.0/16" % _NET_BASE)

    @staticmethod
    def _no_ipv6(dev):
        try:
            with open("/proc/sys/net/ipv6/conf/%s/disable_ipv6" % dev, "w") as f:
                f.write("1")
        except OSError:
            pass

    def host(self, name: str) -> Host:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError("bad host name %r" % name)
        with self._lock:
            self._check_open()
            if name in self.hosts:
                raise ValueError("host %r exists" % name)
            idx = len(self.hosts) + 1
            if idx > 253:
                raise RuntimeError("a /24 holds 253 hosts")
            ns = "%s-%s" % (self.id, name)
            veth = "%sv%d" % (self.id, idx)
            if len(veth) > 15:
                raise RuntimeError("interface name %r too long" % veth)
            h = Host(self, name, ns, self._prefix3 + str(idx + 1), veth)
            self.hosts[name] = h     # before creating: close() cleans half-built hosts
            _run(["ip", "netns", "add", ns])
            _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
            self._no_ipv6(veth)
            _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
            _run(_in_ns(ns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                             "net.ipv6.conf.default.disable_ipv6=1",
                             "net.ipv6.conf.eth0.disable_ipv6=1"]), check=False)
            _run(["ip", "-n", ns, "-batch", "-"], input="addr add %s/24 dev eth0\n"
                 "link set eth0 up\nlink set lo up\n" % h.ip)
            # Drop on receipt only (ingress, before anything else sees the
            # packet): the sender's stack transmitted normally, as on a wire.
            _run(_in_ns(ns, ["nft", "-f", "-"]), input="""
table netdev chaos {
    set cut_in { type ipv4_addr; }
    chain ingress {
        type filter hook ingress device "eth0" priority -500; policy accept;
        ip saddr @cut_in drop
    }
}
""")
            # a host created while another is isolated is cut from it too
            if self._isolated:
                self._apply([h] + [self.hosts[n] for n in self._isolated])
            return h

    # ---- processes --------------------------------------------------------

    def spawn(self, host, argv, *, log_path, env=None, cwd=None, clock=None) -> subprocess.Popen:
        """Start argv in host's namespace (host=None: the root namespace),
        stdout+stderr appended to log_path, killed if this process dies.
        Popen.pid is the program's own pid.  The caller kills it."""
        argv = [str(a) for a in argv]
        with self._lock:
            self._check_open()
            if host is not None and self.hosts.get(host.name) is not host:
                raise ValueError("%r is not a host of this Net" % (host,))
        base = dict(os.environ if env is None else env)
        cmd = ["setpriv", "--pdeathsig", "KILL", "--"]
        if host is not None:
            cmd += ["nsenter", "--net=/run/netns/" + host.ns, "--"]
        if clock is not None:
            for k in _CLOCK_VARS:
                base.pop(k, None)
            cmd += ["env", "--"] + ["%s=%s" % kv for kv in sorted(clock.env().items())]
            _sweep_faketime_shm()      # a stale file for the pid we get would kill us
        cmd += argv

        def fork():
            with open(log_path, "ab") as log:
                p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, env=base, cwd=cwd,
                                     close_fds=True)
            p.argv = argv
            return p

        p = _spawn_executor().submit(fork).result()
        if clock is not None:
            with self._lock:
                self._clocked_pids.add(p.pid)
        return p

    def run(self, host, argv, **kw):
        """Run a short command in host's namespace; a CompletedProcess."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 30)
        return subprocess.run(_in_ns(host.ns, argv), **kw)

    # ---- faults -------------------------------------------------------------

    def partition(self, a, b):
        """Drop every packet between each host in a and each in b, both
        ways, silently.  Adds to partitions already in force."""
        with self._lock:
            self._check_open()
            for h in list(a) + list(b):
                if self.hosts.get(h.name) is not h:
                    raise ValueError("%r is not a host of this Net" % (h,))
            touched = {}
            for x in a:
                for y in b:
                    if x is not y:
                        self._cuts.add(frozenset((x.ip, y.ip)))
                        touched[x.name], touched[y.name] = x, y
            self._apply(list(touched.values()))

    def isolate(self, h):
        """Cut h from every other host and from the root namespace."""
        with self._lock:
            self._check_open()
            if self.hosts.get(h.name) is not h:
                raise ValueError("%r is not a host of this Net" % (h,))
            self._isolated.add(h.name)
            self._apply(list(self.hosts.values()))

    def heal(self):
        """Remove every partition and isolation."""
        with self._lock:
            if self._closed:
                return
            self._cuts.clear()
            self._isolated.clear()
            self._apply(list(self.hosts.values()))

    def _cut_in(self, h):
        cut = set()
        for pair in self._cuts:
            if h.ip in pair:
                cut |= pair - {h.ip}
        for name in self._isolated:
            iso = self.hosts[name]
            if iso is h:
                cut |= {o.ip for o in self.hosts.values() if o is not h} | {self.ip}
            else:
                cut.add(iso.ip)
        return cut

    def _root_script(self):
        # The root-namespace half of isolate(): a netdev table named after
        # this Net, one ingress chain per isolated host, bound to that
        # host's bridge-side veth (our own device: nothing else passes
        # there).  It drops every IPv4 packet the host sends, on receipt,
        # so the host's stack sees a normal transmission and real loss.
        t = "netdev " + self.id
        script = "table %s {}\ndelete table %s\n" % (t, t)   # idempotent reset
        if self._isolated:
            script += "table %s {\n" % t
            for name in sorted(self._isolated):
                h = self.hosts[name]
                script += ('    chain iso_%s {\n        type filter hook ingress device "%s" '
                           'priority -500; policy accept;\n        meta protocol ip drop\n    }\n'
                           % (h.veth, h.veth))
            script += "}\n"
        return script

    def _apply(self, hosts):
        # One atomic nft transaction per namespace (and one for the root
        # table), all at once: a partition of many hosts lands everywhere
        # within a few ms.
        jobs = []
        for h in hosts:
            cut = self._cut_in(h)
            script = "flush set netdev chaos cut_in\n"
            if cut:
                script += "add element netdev chaos cut_in { %s }\n" % ", ".join(sorted(cut))
            jobs.append((h.name, _in_ns(h.ns, ["nft", "-f", "-"]), script))
        if self._isolated or self._root_table:
            jobs.append(("root", ["nft", "-f", "-"], self._root_script()))
            self._root_table = bool(self._isolated)
        procs = [(name, subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True), script)
                 for name, cmd, script in jobs]
        errors = []
        for name, p, script in procs:
            out, _ = p.communicate(script, timeout=10)
            if p.returncode != 0:
                errors.append("%s: %s" % (name, out.strip()))
        if errors:
            raise RuntimeError("nft failed: " + "; ".join(errors))

    def rules(self, h=None):
        """The nft table of h (None: this Net's root-ns table), as text."""
        if h is None:
            return _run(["nft", "list", "table", "netdev", self.id], check=False).stdout
        return self.run(h, ["nft", "list", "table", "netdev", "chaos"]).stdout

    # ---- teardown ---------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise RuntimeError("Net %s is closed" % self.id)

    def close(self):
        """Delete namespaces, veths and bridge.  Kills nothing; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                atexit.unregister(self.close)
            except Exception:
                pass
            mine = [h.veth for h in self.hosts.values()]
            batch = "".join("link del %s\n" % v for v in mine)
            batch += "".join("netns del %s\n" % h.ns for h in self.hosts.values())
            batch += "link del %s\n" % self.bridge
            # -force: go on past objects that never got made or are gone
            _run(["ip", "-force", "-batch", "-"], input=batch, check=False)
            _run(["nft", "delete", "table", "netdev", self.id], check=False)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                left = self.leftovers()
                if not left:
                    break
                for n in left:
                    kind, name = n.split(" ", 1)
                    if kind == "netns":
                        _run(["ip", "netns", "del", name], check=False)
                    elif kind == "nft":
                        _run(["nft", "delete", "table", "netdev", name], check=False)
                    else:
                        _run(["ip", "link", "del", name], check=False)
                time.sleep(0.05)
            _sweep_faketime_shm(self._clocked_pids)

    def leftovers(self):
        """Namespaces and links of this Net that still exist."""
        names = {h.ns for h in self.hosts.values()}
        links = {h.veth for h in self.hosts.values()} | {self.bridge}
        return (["netns " + n for n in _list_netns() if n in names] +
                ["link " + n for n in _list_links() if n in links] +
                ["nft " + n for n in _list_root_tables() if n == self.id])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Clock:
    """A libfaketime timestamp file: programs spawned with it see the wall
    clock at real time + offset; set_offset() steps them all at run time."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self._lock = threading.Lock()
        self._offset = 0.0
        self.set_offset(0)

    def env(self) -> dict:
        return {
            # malloc-debug first: redis-server (jemalloc) hangs under libfaketime alone
            "LD_PRELOAD": MALLOC_DEBUG + ":" + LIBFAKETIME,
            "FAKETIME_TIMESTAMP_FILE": self.path,
            "FAKETIME_NO_CACHE": "1",             # a step is seen by the next call
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # only the wall clock steps (like NTP)
            "LC_NUMERIC": "C",                    # libfaketime parses the offset with atof
        }

    def set_offset(self, seconds: float):
        seconds = float(seconds)
        text = "+0.000000\n" if seconds == 0 else "%+.6f\n" % seconds
        with self._lock:
            tmp = "%s.tmp.%d.%d" % (self.path, os.getpid(), threading.get_ident())
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, self.path)   # atomic: readers see old or new, never half
            self._offset = seconds

    @property
    def offset(self) -> float:
        return self._offset

    def now(self) -> float:
        """The wall time programs under this clock see."""
        return time.time() + self._offset
