/* picket-bench: picketd's load generator and its Redis floor, in one run.
 *
 * The question it answers is what the HTTP hop costs: the same workload is
 * driven at picketd (HTTP/1.1 over keep-alive loopback sockets) and then
 * straight at Redis (hiredis's command formatter and reply reader, running
 * picketd's own scripts from proto/redis by EVALSHA, keys built by
 * picket_proto), with the same number of connections and the same key
 * space. The report gives both and the ratio picketd / floor.
 *
 * Both targets share one engine: each bench thread runs an epoll loop over
 * its share of the connections, and each connection is closed-loop (one
 * request in flight; the next one goes out when the reply is in), so the
 * concurrency is exactly the number of connections. An "op" is one request:
 * one HTTP request, or one EVALSHA. Latency is measured per request from
 * the write to the last byte of the reply.
 *
 * Workloads:
 *   cycle      acquire then release. With --names >= --conns every
 *              connection has its own names (no contention); with fewer,
 *              connections share them and some acquires get lock_held.
 *   contended  every connection on one lock; --wait-ms 0 (default) spins
 *              on lock_held, --wait-ms N blocks in picketd until granted.
 *   renew      each connection holds its own lock and renews it.
 *   wait       connections queue on --names locks (conns/names waiters
 *              each) with a blocking acquire; also reports the handoff
 *              latency: from the holder's release to the next grant.
 *   idle       opens the connections, makes one request on each, keeps them
 *              open and idle, then reports picketd's memory (--pid).
 * Blocking waits exist only in picketd, so contended with --wait-ms and
 * wait have no floor.
 *
 * --primitive runs the same workloads on another of picketd's primitives:
 * lock (default; /v1/locks, acquire.lua, renew.lua, release.lua),
 * semaphore (/v1/semaphores with --limit, semaphore.lua: a connection's
 * acquire takes one permit, and 409 semaphore_full counts as lock_held)
 * or rwlock (/v1/rwlocks with --mode read or write, rwlock.lua: read
 * leases are shared, so connections on one name are all granted). The
 * floor calls the primitive's own script by EVALSHA, with the arguments
 * picketd gives it (store_redis.c). election (/v1/elections: campaign for
 * acquire, resign for release, renew; 409 leader_exists counts as
 * lock_held) has no floor: it runs against picketd only (bench/elections).
 *
 * --server https://... runs the same over TLS (GnuTLS, the library picketd
 * itself uses): each connection's handshake happens when it opens, before
 * the measured window, so the figures are the cost of TLS records on
 * keep-alive connections, not of handshakes.
 *
 * Everything is bounded: --duration (and --ops) end the run, a drain of at
 * most a few seconds releases what is still held, and only loopback or
 * unix-socket targets are accepted. Exit codes: 0 ran (errors are in the
 * report), 1 could not run (connect, script load), 2 bad arguments. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <gnutls/gnutls.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hist.h"
#include "picket_proto.h"

#define MAX_CONNS 20000
#define DRAIN_NS (3 * 1000000000LL) /* releasing what is held after the run */
#define IO_BUF 4096                 /* replies are small; a bigger one is an error */

typedef enum { WL_CYCLE, WL_CONTENDED, WL_RENEW, WL_WAIT, WL_IDLE } workload;
static const char *const wl_names[] = {"cycle", "contended", "renew", "wait", "idle", NULL};

typedef enum { PR_LOCK, PR_SEMAPHORE, PR_RWLOCK, PR_ELECTION } primitive;
static const char *const pr_names[] = {"lock", "semaphore", "rwlock", "election", NULL};

typedef enum { TG_PICKETD, TG_FLOOR } target;
static const char *const tg_names[] = {"picketd", "floor"};

typedef enum { FMT_TEXT, FMT_JSON } out_format;

/* ---- options -------------------------------------------------------- */

static struct {
  workload wl;
  primitive prim;
  int conns, threads, names;
  long limit;  /* semaphore: its limit (-1: not given) */
  int write;   /* rwlock: write leases (else read; -1: not given) */
  double duration_s, warmup_s;
  long max_ops;
  int64_t ttl_ms, wait_ms;
  int wait_ms_set;
  char server[256], redis[256], prefix[PICKET_PROTO_KEY_PREFIX_MAX + 1];
  const char *cacert;
  char auth_header[600];  /* "Authorization: Bearer ...\r\n" from --token-file, or "" */
  /* parsed targets */
  char http_host[64];
  int http_port;
  int https;
  int redis_unix;
  char redis_path[100], redis_host[64]; /* sun_path holds 108 */
  int redis_port;
  pid_t pid, redis_pids[16]; /* redis_pids: 0-terminated */
  out_format fmt;
  const char *label;
} opt;

static void die2(const char *fmt, ...);
/* --token-file: its first line, sent on every picketd request. */
static void read_token(const char *path) {
  FILE *f = fopen(path, "r");
  char tok[520] = "";
  if (f == NULL || fgets(tok, sizeof tok, f) == NULL) die2("--token-file %s: cannot read a line", path);
  fclose(f);
  tok[strcspn(tok, "\r\n")] = '\0';
  if (tok[0] == '\0' || strlen(tok) > 512) die2("--token-file %s: no token of 1 to 512 bytes", path);
  snprintf(opt.auth_header, sizeof opt.auth_header, "Authorization: Bearer %s\r\n", tok);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: picket-bench [options]\n"
          "  --workload W      cycle (default), contended, renew, wait or idle\n"
          "  --primitive P     lock (default), semaphore, rwlock or election (campaign and resign;\n"
          "                    picketd only, no floor): what the workload acquires\n"
          "  --limit N         semaphore: the limit of every acquire (default --conns, at most\n"
          "                    4096, so no acquire finds one full unless N is smaller)\n"
          "  --mode M          rwlock: read (shared) or write leases (default write)\n"
          "  --server URL      picketd to load, http://127.0.0.1:PORT or https://127.0.0.1:PORT\n"
          "                    (loopback only)\n"
          "  --cacert FILE     https: the PEM CA bundle to verify picketd's certificate with\n"
          "  --token-file FILE send the file's first line as Authorization: Bearer (--auth-file)\n"
          "  --redis URL       Redis for the floor: unix:///path.sock or redis://127.0.0.1:PORT\n"
          "                    (with both, picketd runs first, then the floor, and the ratio)\n"
          "  --conns N         connections, i.e. requests in flight (default 16)\n"
          "  --threads N       bench threads sharing the connections (default 1)\n"
          "  --names N         lock names in the key space (default 1000; contended: 1)\n"
          "  --duration S      measured seconds per target (default 5)\n"
          "  --warmup S        unmeasured seconds before that (default 0.5)\n"
          "  --ops N           also stop after N measured ops per target\n"
          "  --ttl-ms N        lease TTL of every acquire and renew (default 10000)\n"
          "  --wait-ms N       wait_ms of acquires (contended default 0, wait default 10000)\n"
          "  --key-prefix P    Redis key prefix of the floor (default \"picket:\", as picketd)\n"
          "  --pid PID         picketd's pid: its CPU time over the run and peak RSS\n"
          "  --redis-pid PID[,PID...]  redis-server's pid (a cluster's: each node's): their CPU\n"
          "                    time over each run, summed\n"
          "  --format F        text (default) or json (one line per target, then the ratio)\n"
          "  --label S         a name for this row in json output (bench/run uses it)\n"
          "  --help\n"
          "Exit: 0 ran (errors are counted in the report), 1 cannot run, 2 bad arguments.\n");
}

static void die2(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "picket-bench: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see --help)\n");
  va_end(ap);
  exit(2);
}

static long parse_long(const char *flag, const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    die2("%s must be an integer from %ld to %ld, not '%s'", flag, lo, hi, s);
  return v;
}

/* --redis-pid PID[,PID...] into opt.redis_pids (at most 15). */
static void parse_pids(const char *s) {
  char list[256];
  snprintf(list, sizeof list, "%s", s);
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (n == 15) die2("--redis-pid: at most 15 pids");
    opt.redis_pids[n++] = (pid_t)parse_long("--redis-pid", t, 1, 1L << 30);
  }
  if (n == 0) die2("--redis-pid: expected PID[,PID...]");
  opt.redis_pids[n] = 0;
}

static double parse_secs(const char *flag, const char *s, double lo, double hi) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi))
    die2("%s must be a number of seconds from %g to %g, not '%s'", flag, lo, hi, s);
  return v;
}

static int is_loopback(const char *host) {
  return strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0;
}

/* "http[s]://127.0.0.1:PORT[/]": the benchmark never leaves the machine. */
static void parse_server(const char *url) {
  char host[64];
  int port, n = 0;
  opt.https = strncmp(url, "https://", 8) == 0;
  const char *rest = url + (opt.https ? 8 : 7);
  if ((!opt.https && strncmp(url, "http://", 7) != 0) ||
      sscanf(rest, "%63[^:/]:%d%n", host, &port, &n) != 2 || port < 1 || port > 65535 ||
      (rest[n] != '\0' && strcmp(rest + n, "/") != 0))
    die2("--server must be http://127.0.0.1:PORT or https://127.0.0.1:PORT, not '%s'", url);
  if (!is_loopback(host)) die2("--server must be a loopback address, not '%s'", host);
  snprintf(opt.http_host, sizeof opt.http_host, "%s", strcmp(host, "localhost") ? host : "127.0.0.1");
  opt.http_port = port;
}

static void parse_redis(const char *url) {
  if (strncmp(url, "unix://", 7) == 0) {
    if (url[7] != '/' || strlen(url + 7) >= sizeof opt.redis_path)
      die2("--redis unix:// needs an absolute socket path of under 100 bytes, not '%s'", url);
    opt.redis_unix = 1;
    snprintf(opt.redis_path, sizeof opt.redis_path, "%s", url + 7);
    return;
  }
  char host[64];
  int port, n = 0;
  if (sscanf(url, "redis://%63[^:/]:%d%n", host, &port, &n) != 2 || port < 1 || port > 65535 ||
      url[n] != '\0')
    die2("--redis must be unix:///path or redis://127.0.0.1:PORT, not '%s'", url);
  if (!is_loopback(host)) die2("--redis must be a loopback address, not '%s'", host);
  snprintf(opt.redis_host, sizeof opt.redis_host, "%s", strcmp(host, "localhost") ? host : "127.0.0.1");
  opt.redis_port = port;
}

static void parse_args(int argc, char **argv) {
  enum { O_WL = 1, O_SERVER, O_REDIS, O_CONNS, O_THREADS, O_NAMES, O_DUR, O_WARM, O_OPS, O_TTL,
         O_WAIT, O_PREFIX, O_PID, O_RPID, O_FMT, O_LABEL, O_CACERT, O_TOKEN, O_PRIM, O_LIMIT,
         O_MODE, O_HELP };
  static const struct option lo[] = {
      {"workload", 1, 0, O_WL},   {"server", 1, 0, O_SERVER},   {"redis", 1, 0, O_REDIS},
      {"conns", 1, 0, O_CONNS},   {"threads", 1, 0, O_THREADS}, {"names", 1, 0, O_NAMES},
      {"duration", 1, 0, O_DUR},  {"warmup", 1, 0, O_WARM},     {"ops", 1, 0, O_OPS},
      {"ttl-ms", 1, 0, O_TTL},    {"wait-ms", 1, 0, O_WAIT},    {"key-prefix", 1, 0, O_PREFIX},
      {"pid", 1, 0, O_PID},       {"redis-pid", 1, 0, O_RPID},  {"format", 1, 0, O_FMT},
      {"label", 1, 0, O_LABEL},   {"cacert", 1, 0, O_CACERT},   {"help", 0, 0, O_HELP},
      {"token-file", 1, 0, O_TOKEN}, {"primitive", 1, 0, O_PRIM},   {"limit", 1, 0, O_LIMIT},
      {"mode", 1, 0, O_MODE},
      {0, 0, 0, 0}};
  opt.wl = WL_CYCLE;
  opt.conns = 16;
  opt.threads = 1;
  opt.names = -1;
  opt.limit = -1;
  opt.write = -1;
  opt.duration_s = 5;
  opt.warmup_s = 0.5;
  opt.ttl_ms = 10000;
  snprintf(opt.prefix, sizeof opt.prefix, "%s", PICKET_PROTO_KEY_PREFIX_DEFAULT);
  int c, i;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (c) {
      case O_WL:
        for (i = 0; wl_names[i] && strcmp(wl_names[i], optarg); i++) {
        }
        if (!wl_names[i]) die2("unknown --workload '%s'", optarg);
        opt.wl = (workload)i;
        break;
      case O_PRIM:
        for (i = 0; pr_names[i] && strcmp(pr_names[i], optarg); i++) {
        }
        if (!pr_names[i]) die2("unknown --primitive '%s'", optarg);
        opt.prim = (primitive)i;
        break;
      case O_LIMIT: opt.limit = parse_long("--limit", optarg, 1, PICKET_PROTO_SEM_LIMIT_MAX); break;
      case O_MODE:
        if (strcmp(optarg, "read") == 0) opt.write = 0;
        else if (strcmp(optarg, "write") == 0) opt.write = 1;
        else die2("--mode must be read or write, not '%s'", optarg);
        break;
      case O_SERVER: snprintf(opt.server, sizeof opt.server, "%s", optarg); parse_server(optarg); break;
      case O_REDIS: snprintf(opt.redis, sizeof opt.redis, "%s", optarg); parse_redis(optarg); break;
      case O_CONNS: opt.conns = (int)parse_long("--conns", optarg, 1, MAX_CONNS); break;
      case O_THREADS: opt.threads = (int)parse_long("--threads", optarg, 1, 64); break;
      case O_NAMES: opt.names = (int)parse_long("--names", optarg, 1, 1000000); break;
      case O_DUR: opt.duration_s = parse_secs("--duration", optarg, 0.1, 3600); break;
      case O_WARM: opt.warmup_s = parse_secs("--warmup", optarg, 0, 600); break;
      case O_OPS: opt.max_ops = parse_long("--ops", optarg, 1, 1000000000L); break;
      case O_TTL: opt.ttl_ms = parse_long("--ttl-ms", optarg, 100, 3600000); break;
      case O_WAIT:
        opt.wait_ms = parse_long("--wait-ms", optarg, 0, 60000);
        opt.wait_ms_set = 1;
        break;
      case O_PREFIX:
        if (!picket_proto_prefix_valid(optarg, strlen(optarg)))
          die2("--key-prefix must be 0..64 bytes of A-Z a-z 0-9 . _ : -");
        snprintf(opt.prefix, sizeof opt.prefix, "%s", optarg);
        break;
      case O_PID: opt.pid = (pid_t)parse_long("--pid", optarg, 1, 1L << 30); break;
      case O_RPID: parse_pids(optarg); break;
      case O_FMT:
        if (strcmp(optarg, "text") == 0) opt.fmt = FMT_TEXT;
        else if (strcmp(optarg, "json") == 0) opt.fmt = FMT_JSON;
        else die2("--format must be text or json, not '%s'", optarg);
        break;
      case O_LABEL:
        /* It goes into JSON unescaped: plain characters only. */
        if (!*optarg || strlen(optarg) > 64 ||
            strspn(optarg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ,._=-") !=
                strlen(optarg))
          die2("--label must be 1..64 of A-Z a-z 0-9 space , . _ = -");
        opt.label = optarg;
        break;
      case O_CACERT: opt.cacert = optarg; break;
      case O_TOKEN: read_token(optarg); break;
      case O_HELP: usage(stdout); exit(0);
      default: die2("unknown or incomplete option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc) die2("unexpected argument '%s'", argv[optind]);
  if (!opt.server[0] && !opt.redis[0]) die2("give --server, --redis or both");
  if (opt.wl == WL_IDLE && !opt.server[0]) die2("--workload idle needs --server");
  if (opt.https != (opt.cacert != NULL)) die2("an https:// --server goes with --cacert FILE, and only it");
  if (opt.limit >= 0 && opt.prim != PR_SEMAPHORE) die2("--limit goes with --primitive semaphore");
  if (opt.write >= 0 && opt.prim != PR_RWLOCK) die2("--mode goes with --primitive rwlock");
  if (opt.wl == WL_IDLE && opt.prim != PR_LOCK) die2("--workload idle acquires nothing: leave out --primitive");
  if (opt.prim == PR_ELECTION && opt.redis[0]) die2("--primitive election has no floor: leave out --redis");
  if (opt.limit < 0) opt.limit = opt.conns < 4096 ? opt.conns : 4096;
  if (opt.write < 0) opt.write = 1;
  if (opt.wl == WL_CONTENDED) {
    if (opt.names > 1) die2("--workload contended uses one lock; leave out --names");
    opt.names = 1;
  }
  if (opt.names < 0) opt.names = opt.wl == WL_WAIT ? 1 : 1000;
  if (opt.wl == WL_WAIT && !opt.wait_ms_set) opt.wait_ms = 10000;
  if (opt.wl == WL_WAIT && opt.wait_ms == 0) die2("--workload wait needs --wait-ms > 0");
  if (opt.wl == WL_RENEW && opt.names < opt.conns)
    die2("--workload renew holds one lock per connection: --names must be >= --conns");
  if (opt.threads > opt.conns) opt.threads = opt.conns;
}

/* ---- time and /proc ------------------------------------------------- */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ns(int64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* utime + stime of a process in seconds (fields 14 and 15 of
 * /proc/PID/stat, after the parenthesised command name); -1 if unreadable. */
static double proc_cpu_s(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  unsigned long long ut, st;
  if (p == NULL ||
      sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The CPU seconds of every --redis-pid, summed; -1 without one, or when
 * one is gone. */
static double redis_cpu_s(void) {
  double sum = 0;
  if (opt.redis_pids[0] == 0) return -1;
  for (int i = 0; opt.redis_pids[i]; i++) {
    double c = proc_cpu_s(opt.redis_pids[i]);
    if (c < 0) return -1;
    sum += c;
  }
  return sum;
}

/* VmRSS and VmHWM (peak) of a process in KiB, from one read of
 * /proc/PID/status; -1 each when unreadable. */
static void proc_mem_kib(pid_t pid, long *rss, long *hwm) {
  char path[64], buf[4096];
  *rss = *hwm = -1;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p;
  if ((p = strstr(buf, "\nVmRSS:"))) *rss = strtol(p + 7, NULL, 10);
  if ((p = strstr(buf, "\nVmHWM:"))) *hwm = strtol(p + 7, NULL, 10);
}

/* Context switches (voluntary and not) of all of a process's threads: a
 * thread that blocks on Redis or on a socket costs two per request, and on
 * a small machine they are much of what a request costs. -1 if unreadable. */
static long proc_ctxt_switches(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (d == NULL) return -1;
  long total = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char sp[sizeof path + 300], line[128];
    snprintf(sp, sizeof sp, "%s/%.255s/status", path, e->d_name);
    FILE *f = fopen(sp, "r");
    if (f == NULL) continue; /* the thread just exited */
    while (fgets(line, sizeof line, f))
      if (strstr(line, "ctxt_switches:")) total += strtol(strchr(line, ':') + 1, NULL, 10);
    fclose(f);
  }
  closedir(d);
  return total;
}

static double self_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

/* ---- the key space -------------------------------------------------- */

/* Lock names of one run. A run uses names no earlier run used (the run id
 * is in them), so a lease left over from an earlier run can never turn
 * into lock_held here. */
typedef struct {
  char name[64];
  char lease_key[128], fence_key[128]; /* a semaphore's or rwlock's: its base key, and "" */
  _Atomic int64_t release_ns; /* when the last release was sent (wait) */
} lock_name;

static lock_name *names;
static char channel[PICKET_PROTO_KEY_PREFIX_MAX + 16];
/* the index of held names (list.lua), as picketd gives it on one Redis */
static char index_key[PICKET_PROTO_KEY_PREFIX_MAX + 16];
static char sha_acquire[41], sha_renew[41], sha_release[41];
static char sha_family[41]; /* semaphore.lua or rwlock.lua: one script, the verb in ARGV[1] */

static int names_make(const char *run_id) {
  free(names);
  names = calloc((size_t)opt.names, sizeof *names);
  if (names == NULL) return -1;
  for (int i = 0; i < opt.names; i++) {
    snprintf(names[i].name, sizeof names[i].name, "bench-%s-%d", run_id, i);
    if (opt.prim == PR_ELECTION) continue; /* picketd only: no keys of the bench's own */
    if (opt.prim != PR_LOCK) {
      if ((opt.prim == PR_SEMAPHORE ? picket_proto_key_sem : picket_proto_key_rw)(
              names[i].lease_key, sizeof names[i].lease_key, opt.prefix, names[i].name) < 0)
        return -1;
      continue;
    }
    if (picket_proto_key_lease(names[i].lease_key, sizeof names[i].lease_key, opt.prefix,
                               names[i].name) < 0 ||
        picket_proto_key_fence(names[i].fence_key, sizeof names[i].fence_key, opt.prefix,
                               names[i].name) < 0)
      return -1;
  }
  return 0;
}

/* ---- connections ---------------------------------------------------- */

typedef enum { REQ_NONE, REQ_ACQUIRE, REQ_RENEW, REQ_RELEASE, REQ_HEALTH } req_kind;

typedef struct bthread bthread;

typedef struct {
  int fd;
  int id;          /* 0..conns-1 */
  bthread *t;
  req_kind req;    /* the request in flight, or REQ_NONE */
  int64_t sent_ns; /* when it was written */
  int holding;     /* a lease is held by this connection */
  int lock;        /* index into names of the lock in use */
  long k;          /* how many names this connection has used (cycle) */
  int done;        /* no more requests from this connection */
  char lease[PICKET_PROTO_LEASE_LEN + 1];
  char out[1024];
  size_t out_len, out_off;
  char in[IO_BUF];
  size_t in_len;
  redisReader *reader; /* floor only */
  gnutls_session_t tls; /* https only */
} bconn;

typedef struct {
  uint64_t ops, errors, grants, held, reconnects;
  hist lat;     /* every measured request */
  hist handoff; /* wait: release sent -> next grant received */
} stats;

struct bthread {
  pthread_t tid;
  target tg;
  int ep;
  bconn *conns;
  int nconns;
  stats st;
  char err[200]; /* the first error seen, for the report */
};

/* The run's phases, set by the main thread and read by the bench threads. */
enum { PH_WARMUP, PH_MEASURE, PH_DRAIN, PH_STOP };
static _Atomic int phase;
static atomic_long measured_ops; /* for --ops */
static atomic_int conns_ready;   /* idle: connections that got their reply */

static void note_error(bthread *t, const char *fmt, ...) {
  if (atomic_load(&phase) == PH_MEASURE) t->st.errors++;
  if (t->err[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->err, sizeof t->err, fmt, ap);
  va_end(ap);
}

static gnutls_certificate_credentials_t tls_cred; /* --cacert */

/* The TLS handshake on a new (still blocking) socket, verifying picketd's
 * certificate against --cacert and its address. 0, or -1 with errno set. */
static int tls_open(bconn *c, int fd) {
  int rc = gnutls_init(&c->tls, GNUTLS_CLIENT);
  if (rc == 0) rc = gnutls_set_default_priority(c->tls);
  if (rc == 0) rc = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, tls_cred);
  if (rc == 0) {
    gnutls_session_set_verify_cert(c->tls, opt.http_host, 0);
    gnutls_transport_set_int(c->tls, fd);
    gnutls_handshake_set_timeout(c->tls, GNUTLS_DEFAULT_HANDSHAKE_TIMEOUT);
    do rc = gnutls_handshake(c->tls);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
  }
  if (rc == 0) return 0;
  note_error(c->t, "connection %d: TLS: %s", c->id, gnutls_strerror(rc));
  gnutls_deinit(c->tls);
  c->tls = NULL;
  errno = EPROTO;
  return -1;
}

/* read(2) and write(2) of a connection, through TLS when it has it, with
 * read's and write's returns (GnuTLS's "again" is EAGAIN: the same call
 * is made again with the same buffer, as GnuTLS asks). */
static ssize_t conn_recv(bconn *c, void *buf, size_t n) {
  if (c->tls == NULL) return read(c->fd, buf, n);
  ssize_t r = gnutls_record_recv(c->tls, buf, n);
  if (r >= 0) return r;
  if (r == GNUTLS_E_PREMATURE_TERMINATION) return 0;
  errno = r == GNUTLS_E_AGAIN ? EAGAIN : r == GNUTLS_E_INTERRUPTED ? EINTR : EPROTO;
  return -1;
}

static ssize_t conn_send(bconn *c, const void *buf, size_t n) {
  if (c->tls == NULL) return write(c->fd, buf, n);
  ssize_t r = gnutls_record_send(c->tls, buf, n);
  if (r >= 0) return r;
  errno = r == GNUTLS_E_AGAIN ? EAGAIN : r == GNUTLS_E_INTERRUPTED ? EINTR : EPROTO;
  return -1;
}

static int conn_open(bconn *c) {
  int fd;
  if (c->t->tg == TG_PICKETD || !opt.redis_unix) {
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int port = c->t->tg == TG_PICKETD ? opt.http_port : opt.redis_port;
    const char *host = c->t->tg == TG_PICKETD ? opt.http_host : opt.redis_host;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return -1;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
      close(fd);
      return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  } else {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", opt.redis_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
      close(fd);
      return -1;
    }
  }
  if (c->t->tg == TG_PICKETD && opt.https && tls_open(c, fd) < 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  if (epoll_ctl(c->t->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
    close(fd);
    return -1;
  }
  c->fd = fd;
  c->in_len = 0;
  c->req = REQ_NONE;
  if (c->t->tg == TG_FLOOR) {
    if (c->reader) redisReaderFree(c->reader);
    c->reader = redisReaderCreate();
    if (c->reader == NULL) return -1;
  }
  return 0;
}

static void conn_close(bconn *c) {
  if (c->tls) gnutls_deinit(c->tls);
  c->tls = NULL;
  if (c->fd >= 0) close(c->fd); /* closing also removes it from epoll */
  c->fd = -1;
  if (c->reader) redisReaderFree(c->reader);
  c->reader = NULL;
}

/* A broken connection: count it, forget any lease it held (it will expire;
 * names are never reused across runs) and reconnect once. */
static void conn_broken(bconn *c, const char *why) {
  note_error(c->t, "connection %d: %s", c->id, why);
  conn_close(c);
  c->holding = 0;
  c->req = REQ_NONE;
  if (atomic_load(&phase) >= PH_DRAIN || conn_open(c) < 0) {
    c->done = 1;
    return;
  }
  c->t->st.reconnects++;
}

/* Writes what is left of c->out; waits for EPOLLOUT when the socket is full. */
static void conn_flush(bconn *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = conn_send(c, c->out + c->out_off, c->out_len - c->out_off);
    if (n > 0) {
      c->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
      epoll_ctl(c->t->ep, EPOLL_CTL_MOD, c->fd, &ev);
      return;
    }
    conn_broken(c, strerror(errno));
    return;
  }
}

/* ---- requests ------------------------------------------------------- */

static void http_request(bconn *c, const char *method, const char *path, const char *body) {
  int n;
  if (body)
    n = snprintf(c->out, sizeof c->out,
                 "%s %s HTTP/1.1\r\nHost: %s:%d\r\n%sContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 method, path, opt.http_host, opt.http_port, opt.auth_header, strlen(body), body);
  else
    n = snprintf(c->out, sizeof c->out, "%s %s HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n", method, path,
                 opt.http_host, opt.http_port, opt.auth_header);
  c->out_len = n > 0 && (size_t)n < sizeof c->out ? (size_t)n : 0;
}

static void redis_request(bconn *c, int argc, const char **argv) {
  char *cmd;
  long long n = redisFormatCommandArgv(&cmd, argc, argv, NULL);
  if (n < 0 || (size_t)n > sizeof c->out) {
    c->out_len = 0;
  } else {
    memcpy(c->out, cmd, (size_t)n);
    c->out_len = (size_t)n;
  }
  if (n >= 0) redisFreeCommand(cmd);
}

/* The lock this connection uses next. cycle with enough names: each
 * connection walks its own slice (names i, i+conns, i+2*conns, ...), so
 * no two connections ever meet; otherwise connections share names. */
static int pick_lock(bconn *c) {
  if (opt.wl == WL_CYCLE && opt.names >= opt.conns) {
    long mine = (opt.names - c->id + opt.conns - 1) / opt.conns;
    return (int)(c->id + (c->k++ % mine) * opt.conns);
  }
  return c->id % opt.names;
}

/* POST /v1/{locks,semaphores,rwlocks,elections}/NAME/VERB: the primitive's
 * path; an election's acquire is its campaign, its release its resign. */
static void primitive_path(char *path, size_t cap, const lock_name *ln, const char *verb) {
  static const char *const coll[] = {"locks", "semaphores", "rwlocks", "elections"};
  if (opt.prim == PR_ELECTION)
    verb = strcmp(verb, "acquire") == 0 ? "campaign" : strcmp(verb, "release") == 0 ? "resign" : verb;
  snprintf(path, cap, "/v1/%s/%s/%s", coll[opt.prim], ln->name, verb);
}

/* The floor's call of semaphore.lua or rwlock.lua, with the arguments
 * picketd's store_redis.c gives it (no owner, the clock fence floor, no
 * counter idle TTL, lock-delay or cap, no token quota; the quota member
 * and release message as picketd makes them). */
static void family_request(bconn *c, const char *verb) {
  lock_name *ln = &names[c->lock];
  char ttl[24], limit[24], member[160], wake[80];
  char tag = opt.prim == PR_SEMAPHORE ? 's' : 'r';
  snprintf(ttl, sizeof ttl, "%lld", (long long)opt.ttl_ms);
  snprintf(limit, sizeof limit, "%ld", opt.limit);
  snprintf(member, sizeof member, "%c/%s/%s", tag, ln->name, c->lease);
  snprintf(wake, sizeof wake, "%c/%s", tag, ln->name);
  /* (verb, lease, ttl, owner, floor, idle, delay, cap, limit or mode, max,
   * member, channel, message[, wait_ms]) */
  const char *argv[] = {"EVALSHA", sha_family, "2", ln->lease_key, index_key, verb, c->lease,
                        ttl, "", "clock", "0", "0", "0",
                        opt.prim == PR_SEMAPHORE ? limit : opt.write ? "write" : "read",
                        "0", member, channel, wake, "0"};
  redis_request(c, opt.prim == PR_RWLOCK ? 19 : 18, argv);
}

static void send_acquire(bconn *c) {
  lock_name *ln = &names[c->lock];
  if (c->t->tg == TG_PICKETD) {
    char path[128], body[128], what[40] = "", wait[40] = "";
    primitive_path(path, sizeof path, ln, "acquire");
    if (opt.prim == PR_SEMAPHORE) snprintf(what, sizeof what, "\"limit\":%ld,", opt.limit);
    if (opt.prim == PR_RWLOCK)
      snprintf(what, sizeof what, "\"mode\":\"%s\",", opt.write ? "write" : "read");
    if (opt.wait_ms > 0) snprintf(wait, sizeof wait, ",\"wait_ms\":%lld", (long long)opt.wait_ms);
    snprintf(body, sizeof body, "{%s\"ttl_ms\":%lld%s}", what, (long long)opt.ttl_ms, wait);
    http_request(c, "POST", path, body);
  } else if (opt.prim != PR_LOCK) {
    picket_proto_lease_new(c->lease);
    family_request(c, "acquire");
  } else {
    /* picketd makes a fresh lease id per grant; so does the floor, with
     * picketd's default fence floor (clock) and no counter idle TTL. */
    char ttl[24];
    picket_proto_lease_new(c->lease);
    snprintf(ttl, sizeof ttl, "%lld", (long long)opt.ttl_ms);
    /* (lease, ttl, owner, floor, idle, lock-delay, hold cap, max, name, token) */
    const char *argv[] = {"EVALSHA", sha_acquire, "3", ln->lease_key, ln->fence_key, index_key,
                          c->lease,  ttl,         "",  "clock",       "0",          "0",
                          "0",       "0",         ln->name, ""};
    redis_request(c, 16, argv);
  }
  c->req = REQ_ACQUIRE;
}

static void send_release(bconn *c) {
  lock_name *ln = &names[c->lock];
  atomic_store(&ln->release_ns, now_ns());
  if (c->t->tg == TG_PICKETD) {
    char path[128], body[64];
    primitive_path(path, sizeof path, ln, "release");
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", c->lease);
    http_request(c, "POST", path, body);
  } else if (opt.prim != PR_LOCK) {
    family_request(c, "release");
  } else {
    const char *argv[] = {"EVALSHA", sha_release, "3", ln->lease_key, ln->fence_key, index_key,
                          c->lease,  channel,     ln->name, "0"};
    redis_request(c, 10, argv);
  }
  c->req = REQ_RELEASE;
}

static void send_renew(bconn *c) {
  lock_name *ln = &names[c->lock];
  char ttl[24];
  snprintf(ttl, sizeof ttl, "%lld", (long long)opt.ttl_ms);
  if (c->t->tg == TG_PICKETD) {
    char path[128], body[96];
    primitive_path(path, sizeof path, ln, "renew");
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":%s}", c->lease, ttl);
    http_request(c, "POST", path, body);
  } else if (opt.prim != PR_LOCK) {
    family_request(c, "renew");
  } else {
    const char *argv[] = {"EVALSHA", sha_renew, "2", ln->lease_key, ln->fence_key,
                          c->lease,  ttl,       "0"};
    redis_request(c, 8, argv);
  }
  c->req = REQ_RENEW;
}

/* Sends this connection's next request, or marks it done. */
static void next_request(bconn *c) {
  int ph = atomic_load(&phase);
  c->out_len = c->out_off = 0;
  c->req = REQ_NONE;
  if (c->done || c->fd < 0) return;
  if (ph >= PH_DRAIN) {
    /* Give back what is held, then stop. */
    if (c->holding) send_release(c);
    else c->done = 1;
  } else if (opt.wl == WL_IDLE) {
    if (c->k++ == 0) http_request(c, "GET", "/healthz", NULL), c->req = REQ_HEALTH;
    else c->done = 1;
  } else if (opt.wl == WL_RENEW) {
    c->lock = c->id; /* names >= conns: one lock of its own */
    if (c->holding) send_renew(c);
    else send_acquire(c);
  } else if (c->holding) {
    send_release(c);
  } else {
    c->lock = pick_lock(c);
    send_acquire(c);
  }
  if (c->req == REQ_NONE) return;
  if (c->out_len == 0) {
    conn_broken(c, "request too long");
    return;
  }
  c->sent_ns = now_ns();
  conn_flush(c);
}

/* ---- replies -------------------------------------------------------- */

/* What one reply said, in the target's own terms made common. */
typedef enum { OUT_OK, OUT_HELD, OUT_LOST, OUT_ERROR } outcome;

/* Books a complete reply and sends the next request. */
static void on_reply(bconn *c, outcome o, const char *detail) {
  bthread *t = c->t;
  int64_t now = now_ns();
  int measuring = atomic_load(&phase) == PH_MEASURE;
  if (measuring) {
    t->st.ops++;
    hist_record(&t->st.lat, (uint64_t)(now - c->sent_ns));
    atomic_fetch_add_explicit(&measured_ops, 1, memory_order_relaxed);
  }
  switch (c->req) {
    case REQ_ACQUIRE:
      if (o == OUT_OK) {
        c->holding = 1;
        if (measuring) t->st.grants++;
        int64_t rel = atomic_load(&names[c->lock].release_ns);
        /* Granted after a release that came while we waited: the handoff. */
        if (measuring && opt.wait_ms > 0 && rel > c->sent_ns)
          hist_record(&t->st.handoff, (uint64_t)(now - rel));
      } else if (o == OUT_HELD) {
        if (measuring) t->st.held++;
      } else {
        note_error(t, "acquire %s: %s", names[c->lock].name, detail);
      }
      break;
    case REQ_RELEASE:
      c->holding = 0; /* released, or lost: either way not ours now */
      if (o != OUT_OK) note_error(t, "release %s: %s", names[c->lock].name, detail);
      break;
    case REQ_RENEW:
      if (o != OUT_OK) {
        c->holding = 0;
        note_error(t, "renew %s: %s", names[c->lock].name, detail);
      }
      break;
    case REQ_HEALTH:
      /* Idle connections answer before the measured window: count here. */
      if (o != OUT_OK) {
        if (!measuring) t->st.errors++;
        note_error(t, "GET /healthz: %s", detail);
      } else {
        atomic_fetch_add(&conns_ready, 1);
      }
      break;
    default: break;
  }
  next_request(c);
}

/* Finds a header's value in an HTTP header block (case-insensitive name). */
static const char *header(const char *hdrs, size_t len, const char *name) {
  size_t nl = strlen(name);
  for (const char *p = hdrs; p && p < hdrs + len; p = memchr(p, '\n', (size_t)(hdrs + len - p))) {
    if (*p == '\n') p++;
    if ((size_t)(hdrs + len - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':')
      return p + nl + 1;
  }
  return NULL;
}

/* Parses what has arrived on an HTTP connection: 1 when a whole reply was
 * booked, 0 when more is needed, -1 when the connection is unusable. */
static int http_parse(bconn *c) {
  char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
  if (end == NULL) return c->in_len == sizeof c->in ? -1 : 0;
  size_t hlen = (size_t)(end - c->in) + 4;
  if (c->in_len < 12 || strncmp(c->in, "HTTP/1.", 7) != 0) return -1;
  int status = atoi(c->in + 9);
  const char *cl = header(c->in, hlen, "Content-Length");
  if (cl == NULL) return -1; /* picketd always sends one */
  size_t blen = strtoul(cl, NULL, 10);
  if (hlen + blen > sizeof c->in) return -1;
  if (c->in_len < hlen + blen) return 0;
  const char *body = c->in + hlen;
  const char *closing = header(c->in, hlen, "Connection");
  int must_close = closing && strncasecmp(closing + strspn(closing, " "), "close", 5) == 0;

  outcome o = OUT_ERROR;
  char detail[96];
  snprintf(detail, sizeof detail, "HTTP %d %.*s", status, (int)(blen < 70 ? blen : 70), body);
  if (status == 200) {
    o = OUT_OK;
    if (c->req == REQ_ACQUIRE) {
      const char *l = memmem(body, blen, "\"lease\":\"", 9);
      if (l && l + 9 + PICKET_PROTO_LEASE_LEN <= body + blen &&
          picket_proto_lease_valid(l + 9, PICKET_PROTO_LEASE_LEN)) {
        memcpy(c->lease, l + 9, PICKET_PROTO_LEASE_LEN);
        c->lease[PICKET_PROTO_LEASE_LEN] = '\0';
      } else {
        o = OUT_ERROR;
        snprintf(detail, sizeof detail, "a grant without a lease id");
      }
    }
  } else if (status == 409 && (memmem(body, blen, "\"lock_held\"", 11) ||
                                memmem(body, blen, "\"semaphore_full\"", 16) ||
                                memmem(body, blen, "\"leader_exists\"", 15))) {
    o = OUT_HELD; /* a full semaphore, an election with a leader: a lock taken */
  } else if (status == 409 && memmem(body, blen, "\"lease_lost\"", 12)) {
    o = OUT_LOST;
  }
  c->in_len -= hlen + blen;
  memmove(c->in, c->in + hlen + blen, c->in_len);
  on_reply(c, o, detail);
  if (must_close && c->fd >= 0) {
    conn_broken(c, "the server closed the connection");
    return 0;
  }
  return 1;
}

/* The same for a Redis connection, with hiredis's reply reader. */
static int redis_parse(bconn *c) {
  if (c->in_len && redisReaderFeed(c->reader, c->in, c->in_len) != REDIS_OK) return -1;
  c->in_len = 0;
  void *reply = NULL;
  if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) return -1;
  if (reply == NULL) return 0;
  redisReply *r = reply;
  outcome o = OUT_ERROR;
  char detail[96] = "unexpected reply";
  if (r->type == REDIS_REPLY_ERROR) {
    snprintf(detail, sizeof detail, "Redis: %.80s", r->str);
  } else if (c->req == REQ_ACQUIRE && r->type == REDIS_REPLY_ARRAY &&
             r->elements == (opt.prim == PR_LOCK ? 5u : 6u) &&
             r->element[0]->type == REDIS_REPLY_INTEGER) {
    /* semaphore.lua and rwlock.lua: {1, ...} granted, {0, ...} full or
     * taken; any other code (lock-delay, quota, limit mismatch) is none of
     * the bench's doing: an error */
    long long k = r->element[0]->integer;
    o = k == 1 ? OUT_OK : k == 0 || opt.prim == PR_LOCK ? OUT_HELD : OUT_ERROR;
    if (o == OUT_ERROR) snprintf(detail, sizeof detail, "acquire refused with code %lld", k);
  } else if (r->type == REDIS_REPLY_ARRAY &&
             ((c->req == REQ_RELEASE && r->elements >= 2 && r->elements <= 4) ||
              (c->req == REQ_RENEW && r->elements == (opt.prim == PR_LOCK ? 5u : 4u)))) {
    /* release {1, tamper[, "", at]} or {0, tamper[, why]}; renew {fence (a
     * decimal string), tamper, ttl, then why and at (a lock's) or its slot
     * or mode}; {0, ...}: lost */
    const redisReply *e = r->element[0];
    o = e->type == REDIS_REPLY_STRING || (e->type == REDIS_REPLY_INTEGER && e->integer > 0)
            ? OUT_OK
            : OUT_LOST;
    if (o == OUT_LOST) snprintf(detail, sizeof detail, "lease lost");
  }
  freeReplyObject(r);
  on_reply(c, o, detail);
  return 1;
}

static void conn_readable(bconn *c) {
  for (;;) {
    ssize_t n = conn_recv(c, c->in + c->in_len, sizeof c->in - c->in_len);
    if (n == 0) {
      conn_broken(c, c->req == REQ_NONE ? "the server closed an idle connection"
                                        : "the server closed the connection mid-request");
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      conn_broken(c, strerror(errno));
      return;
    }
    c->in_len += (size_t)n;
    if (c->req == REQ_NONE) {
      conn_broken(c, "bytes from the server with no request in flight");
      return;
    }
    int rc;
    while (c->fd >= 0 && c->req != REQ_NONE &&
           (rc = c->t->tg == TG_PICKETD ? http_parse(c) : redis_parse(c)) != 0) {
      if (rc < 0) {
        conn_broken(c, "a reply that cannot be parsed");
        return;
      }
    }
    if (c->fd < 0) return;
  }
}

/* ---- the bench thread ----------------------------------------------- */

static void *bench_thread(void *arg) {
  bthread *t = arg;
  struct epoll_event evs[256];
  for (int i = 0; i < t->nconns; i++) next_request(&t->conns[i]);
  int64_t drain_until = 0;
  for (;;) {
    int ph = atomic_load(&phase);
    if (ph == PH_STOP) break;
    if (ph == PH_DRAIN) {
      if (drain_until == 0) {
        drain_until = now_ns() + DRAIN_NS;
        /* Idle connections start their drain here (release, then done). */
        for (int i = 0; i < t->nconns; i++)
          if (t->conns[i].req == REQ_NONE) next_request(&t->conns[i]);
      }
      int busy = 0;
      for (int i = 0; i < t->nconns; i++) busy |= !t->conns[i].done && t->conns[i].fd >= 0;
      if (!busy || now_ns() > drain_until) break;
    }
    int n = epoll_wait(t->ep, evs, 256, 50);
    for (int i = 0; i < n; i++) {
      bconn *c = evs[i].data.ptr;
      if (c->fd < 0) continue;
      if (evs[i].events & EPOLLOUT) {
        conn_flush(c);
        if (c->fd >= 0 && c->out_off == c->out_len) {
          struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
          epoll_ctl(t->ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
      }
      if (c->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) conn_readable(c);
    }
  }
  for (int i = 0; i < t->nconns; i++) conn_close(&t->conns[i]);
  return NULL;
}

/* ---- one run against one target ------------------------------------- */

typedef struct {
  target tg;
  int ran;
  double secs;
  stats st;
  double cpu_s, redis_cpu_s, bench_cpu_s; /* over the measured window; -1 unknown */
  long ctxt;                              /* picketd's context switches in it; -1 unknown */
  long rss0_kib;                          /* picketd's before the connections opened */
  long hwm_kib, rss_kib;                  /* picketd's, at the end */
  char err[200];
} result;

/* SCRIPT LOAD of picketd's own scripts, so the floor runs exactly them. */
static int floor_prepare(char *err, size_t errlen) {
  struct timeval tv = {2, 0};
  redisContext *rc = opt.redis_unix ? redisConnectUnixWithTimeout(opt.redis_path, tv)
                                    : redisConnectWithTimeout(opt.redis_host, opt.redis_port, tv);
  if (rc == NULL || rc->err) {
    snprintf(err, errlen, "cannot connect to Redis %.60s: %.100s", opt.redis, rc ? rc->errstr : "out of memory");
    redisFree(rc);
    return -1;
  }
  const char *src[] = {picket_proto_lua_acquire, picket_proto_lua_renew, picket_proto_lua_release};
  char *sha[] = {sha_acquire, sha_renew, sha_release};
  int nscripts = 3;
  if (opt.prim != PR_LOCK) { /* one script, the verb in ARGV[1] */
    src[0] = opt.prim == PR_SEMAPHORE ? picket_proto_lua_semaphore : picket_proto_lua_rwlock;
    sha[0] = sha_family;
    nscripts = 1;
  }
  for (int i = 0; i < nscripts; i++) {
    redisReply *r = redisCommand(rc, "SCRIPT LOAD %s", src[i]);
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok) memcpy(sha[i], r->str, 41);
    else snprintf(err, errlen, "SCRIPT LOAD failed: %.120s", r && r->type == REDIS_REPLY_ERROR ? r->str : rc->errstr);
    if (r) freeReplyObject(r);
    if (!ok) {
      redisFree(rc);
      return -1;
    }
  }
  redisFree(rc);
  picket_proto_channel(channel, sizeof channel, opt.prefix);
  snprintf(index_key, sizeof index_key, "%sindex", opt.prefix);
  return 0;
}

static int run_target(target tg, result *res) {
  memset(res, 0, sizeof *res);
  res->tg = tg;
  res->cpu_s = res->redis_cpu_s = -1;
  res->ctxt = -1;
  char run_id[32];
  snprintf(run_id, sizeof run_id, "%d-%lld-%c", (int)getpid(), (long long)(now_ns() / 1000000) % 100000000,
           tg == TG_PICKETD ? 'p' : 'f');
  if (names_make(run_id) < 0) {
    snprintf(res->err, sizeof res->err, "out of memory");
    return -1;
  }
  if (tg == TG_FLOOR && floor_prepare(res->err, sizeof res->err) < 0) return -1;
  long ignore;
  if (opt.pid && tg == TG_PICKETD) proc_mem_kib(opt.pid, &res->rss0_kib, &ignore);

  atomic_store(&phase, PH_WARMUP);
  atomic_store(&measured_ops, 0);
  atomic_store(&conns_ready, 0);
  bthread *ts = calloc((size_t)opt.threads, sizeof *ts);
  bconn *cs = calloc((size_t)opt.conns, sizeof *cs);
  if (ts == NULL || cs == NULL) {
    free(ts);
    free(cs);
    snprintf(res->err, sizeof res->err, "out of memory");
    return -1;
  }
  /* Connections are dealt to threads in contiguous blocks. */
  int rc = 0, next = 0;
  for (int i = 0; i < opt.threads && rc == 0; i++) {
    bthread *t = &ts[i];
    t->tg = tg;
    t->ep = epoll_create1(EPOLL_CLOEXEC);
    t->conns = cs + next;
    t->nconns = opt.conns / opt.threads + (i < opt.conns % opt.threads);
    for (int j = 0; j < t->nconns; j++) {
      bconn *c = &t->conns[j];
      c->id = next + j;
      c->t = t;
      c->fd = -1;
      if (conn_open(c) < 0) {
        snprintf(res->err, sizeof res->err, "cannot connect to %.100s: %.78s",
                 tg == TG_PICKETD ? opt.server : opt.redis, t->err[0] ? t->err : strerror(errno));
        rc = -1;
        break;
      }
    }
    next += t->nconns;
  }
  int started = 0;
  for (int i = 0; rc == 0 && i < opt.threads; i++)
    if (pthread_create(&ts[i].tid, NULL, bench_thread, &ts[i]) == 0) started++;

  if (rc == 0) {
    if (opt.wl == WL_IDLE) {
      /* Wait (bounded) until every connection has had its reply. */
      for (int64_t until = now_ns() + 10000000000LL;
           atomic_load(&conns_ready) < opt.conns && now_ns() < until;)
        sleep_ns(10000000);
    } else {
      sleep_ns((int64_t)(opt.warmup_s * 1e9));
    }
    double cpu0 = opt.pid ? proc_cpu_s(opt.pid) : -1;
    long ctxt0 = opt.pid ? proc_ctxt_switches(opt.pid) : -1;
    double rcpu0 = redis_cpu_s();
    double self0 = self_cpu_s();
    int64_t t0 = now_ns();
    atomic_store(&phase, PH_MEASURE);
    int64_t until = t0 + (int64_t)(opt.duration_s * 1e9);
    while (now_ns() < until && (opt.max_ops == 0 || atomic_load(&measured_ops) < opt.max_ops))
      sleep_ns(opt.max_ops ? 1000000 : 10000000);
    atomic_store(&phase, PH_DRAIN);
    res->secs = (double)(now_ns() - t0) / 1e9;
    double cpu1 = opt.pid ? proc_cpu_s(opt.pid) : -1;
    long ctxt1 = opt.pid ? proc_ctxt_switches(opt.pid) : -1;
    res->ctxt = ctxt0 >= 0 && ctxt1 >= 0 ? ctxt1 - ctxt0 : -1;
    double rcpu1 = redis_cpu_s();
    res->bench_cpu_s = self_cpu_s() - self0;
    if (cpu0 >= 0 && cpu1 >= 0) res->cpu_s = cpu1 - cpu0;
    if (rcpu0 >= 0 && rcpu1 >= 0) res->redis_cpu_s = rcpu1 - rcpu0;
    if (opt.pid && tg == TG_PICKETD) {
      /* Read with the connections still open: the idle workload's point. */
      proc_mem_kib(opt.pid, &res->rss_kib, &res->hwm_kib);
    }
  } else {
    atomic_store(&phase, PH_STOP);
  }
  for (int i = 0; i < opt.threads; i++) {
    if (i < started) pthread_join(ts[i].tid, NULL);
    hist_merge(&res->st.lat, &ts[i].st.lat);
    hist_merge(&res->st.handoff, &ts[i].st.handoff);
    res->st.ops += ts[i].st.ops;
    res->st.errors += ts[i].st.errors;
    res->st.grants += ts[i].st.grants;
    res->st.held += ts[i].st.held;
    res->st.reconnects += ts[i].st.reconnects;
    if (!res->err[0] && ts[i].err[0]) snprintf(res->err, sizeof res->err, "%s", ts[i].err);
    if (ts[i].ep >= 0) close(ts[i].ep);
  }
  for (int i = 0; i < opt.conns; i++) conn_close(&cs[i]);
  free(ts);
  free(cs);
  res->ran = rc == 0;
  return rc;
}

/* ---- reporting ------------------------------------------------------ */

static double ops_per_s(const result *r) { return r->secs > 0 ? (double)r->st.ops / r->secs : 0; }
static double q_ms(const hist *h, double q) { return (double)hist_quantile(h, q) / 1e6; }

static const char *label(void) { return opt.label ? opt.label : wl_names[opt.wl]; }

static void print_text(const result *r) {
  if (opt.wl == WL_IDLE) {
    printf("picketd with %d idle keep-alive connections (%d answered, %llu errors): ", opt.conns,
           atomic_load(&conns_ready), (unsigned long long)r->st.errors);
    if (r->rss_kib > 0)
      printf("RSS %.1f MiB (%.1f MiB before they opened), peak %.1f MiB\n", r->rss_kib / 1024.0,
             r->rss0_kib / 1024.0, r->hwm_kib / 1024.0);
    else
      printf("RSS unknown (give --pid)\n");
    if (r->err[0]) printf("         first error: %s\n", r->err);
    return;
  }
  printf("%-8s %9.0f ops/s  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f ms  "
         "(%llu ops in %.2f s, %llu errors",
         tg_names[r->tg], ops_per_s(r), q_ms(&r->st.lat, .5), q_ms(&r->st.lat, .9),
         q_ms(&r->st.lat, .99), q_ms(&r->st.lat, .999), (double)r->st.lat.max_ns / 1e6,
         (unsigned long long)r->st.ops, r->secs, (unsigned long long)r->st.errors);
  if (opt.wl != WL_IDLE && opt.wl != WL_RENEW)
    printf(", %llu grants, %llu %s", (unsigned long long)r->st.grants,
           (unsigned long long)r->st.held, opt.prim == PR_SEMAPHORE   ? "semaphore_full"
           : opt.prim == PR_ELECTION ? "leader_exists"
                                     : "lock_held");
  printf(")\n");
  if (r->st.handoff.count)
    printf("         handoff (release -> next grant): p50 %.3f  p99 %.3f  max %.3f ms over %llu\n",
           q_ms(&r->st.handoff, .5), q_ms(&r->st.handoff, .99),
           (double)r->st.handoff.max_ns / 1e6, (unsigned long long)r->st.handoff.count);
  if (r->tg == TG_PICKETD && r->cpu_s >= 0 && r->st.ops)
    printf("         picketd CPU %.2f s (%.0f %% of a core, %.1f us/op), %.2f context switches/op\n",
           r->cpu_s, 100 * r->cpu_s / r->secs, 1e6 * r->cpu_s / (double)r->st.ops,
           (double)r->ctxt / (double)r->st.ops);
  if (r->redis_cpu_s >= 0 && r->st.ops)
    printf("         redis-server CPU %.2f s (%.0f %% of a core, %.1f us/op)\n", r->redis_cpu_s,
           100 * r->redis_cpu_s / r->secs, 1e6 * r->redis_cpu_s / (double)r->st.ops);
  if (r->st.ops)
    printf("         picket-bench CPU %.2f s (%.1f us/op)\n", r->bench_cpu_s,
           1e6 * r->bench_cpu_s / (double)r->st.ops);
  if (r->rss_kib > 0)
    printf("         picketd RSS %.1f MiB now, %.1f MiB peak (VmHWM)\n", r->rss_kib / 1024.0,
           r->hwm_kib / 1024.0);
  if (r->err[0]) printf("         first error: %s\n", r->err);
}

static void print_json(const result *r) {
  const hist *h = &r->st.lat;
  printf("{\"target\":\"%s\",\"workload\":\"%s\",\"primitive\":\"%s\",\"label\":\"%s\",\"conns\":%d,\"threads\":%d,"
         "\"names\":%d,\"wait_ms\":%lld,\"seconds\":%.3f,\"ops\":%llu,\"ops_per_s\":%.1f,"
         "\"errors\":%llu,\"grants\":%llu,\"held\":%llu,\"reconnects\":%llu,"
         "\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"p999_ms\":%.4f,\"max_ms\":%.4f",
         tg_names[r->tg], wl_names[opt.wl], pr_names[opt.prim], label(), opt.conns, opt.threads, opt.names,
         (long long)opt.wait_ms, r->secs, (unsigned long long)r->st.ops, ops_per_s(r),
         (unsigned long long)r->st.errors, (unsigned long long)r->st.grants,
         (unsigned long long)r->st.held, (unsigned long long)r->st.reconnects, q_ms(h, .5),
         q_ms(h, .9), q_ms(h, .99), q_ms(h, .999), (double)h->max_ns / 1e6);
  if (opt.prim == PR_SEMAPHORE) printf(",\"limit\":%ld", opt.limit);
  if (opt.prim == PR_RWLOCK) printf(",\"mode\":\"%s\"", opt.write ? "write" : "read");
  if (r->st.handoff.count)
    printf(",\"handoff_p50_ms\":%.4f,\"handoff_p99_ms\":%.4f", q_ms(&r->st.handoff, .5),
           q_ms(&r->st.handoff, .99));
  if (r->tg == TG_PICKETD && r->cpu_s >= 0) printf(",\"picketd_cpu_s\":%.3f", r->cpu_s);
  if (r->tg == TG_PICKETD && r->ctxt >= 0) printf(",\"picketd_ctxt_switches\":%ld", r->ctxt);
  if (r->redis_cpu_s >= 0) printf(",\"redis_cpu_s\":%.3f", r->redis_cpu_s);
  printf(",\"bench_cpu_s\":%.3f", r->bench_cpu_s);
  if (r->rss_kib > 0)
    printf(",\"rss_before_kib\":%ld,\"rss_kib\":%ld,\"hwm_kib\":%ld", r->rss0_kib, r->rss_kib,
           r->hwm_kib);
  if (opt.wl == WL_IDLE) printf(",\"answered\":%d", atomic_load(&conns_ready));
  if (r->err[0]) {
    printf(",\"first_error\":\"");
    for (const char *p = r->err; *p; p++)
      if (*p == '"' || *p == '\\') printf("\\%c", *p);
      else if ((unsigned char)*p >= 0x20) putchar(*p);
    putchar('"');
  }
  printf("}\n");
}

/* Lets --conns many sockets be opened (the idle workload asks for 1,000). */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t want = (rlim_t)opt.conns + 64;
  if (rl.rlim_cur >= want) return;
  rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  if (opt.https) {
    if (gnutls_certificate_allocate_credentials(&tls_cred) < 0 ||
        gnutls_certificate_set_x509_trust_file(tls_cred, opt.cacert, GNUTLS_X509_FMT_PEM) <= 0) {
      fprintf(stderr, "picket-bench: --cacert %s: no PEM certificate could be read from it\n",
              opt.cacert);
      return 1;
    }
  }
  raise_fd_limit();
  signal(SIGPIPE, SIG_IGN);
  int floor_possible = opt.redis[0] && opt.wait_ms == 0 && opt.wl != WL_IDLE;
  if (opt.redis[0] && !floor_possible && !opt.server[0])
    die2("blocking waits exist only in picketd: this workload has no floor to run");

  result pr = {0}, fr = {0};
  int failed = 0;
  if (opt.fmt == FMT_TEXT) {
    printf("picket-bench: %s, %d connections, %d threads, %d names", wl_names[opt.wl], opt.conns,
           opt.threads, opt.names);
    if (opt.prim == PR_SEMAPHORE) printf(", semaphores of limit %ld", opt.limit);
    if (opt.prim == PR_RWLOCK) printf(", rwlocks (%s leases)", opt.write ? "write" : "read");
    if (opt.prim == PR_ELECTION) printf(", elections (campaign, resign)");
    if (opt.wait_ms) printf(", wait_ms %lld", (long long)opt.wait_ms);
    if (opt.wl == WL_IDLE) printf(", held open %.1f s\n", opt.duration_s);
    else printf(", %.1f s measured after %.1f s warmup\n", opt.duration_s, opt.warmup_s);
  }
  if (opt.server[0]) {
    if (run_target(TG_PICKETD, &pr) < 0) {
      fprintf(stderr, "picket-bench: picketd: %s\n", pr.err);
      failed = 1;
    } else if (opt.fmt == FMT_TEXT) print_text(&pr);
    else if (opt.fmt == FMT_JSON) print_json(&pr);
  }
  if (floor_possible && !failed) {
    if (run_target(TG_FLOOR, &fr) < 0) {
      fprintf(stderr, "picket-bench: floor: %s\n", fr.err);
      failed = 1;
    } else if (opt.fmt == FMT_TEXT) print_text(&fr);
    else if (opt.fmt == FMT_JSON) print_json(&fr);
  }
  if (failed) return 1;
  if (pr.ran && fr.ran && ops_per_s(&fr) > 0) {
    double ratio = ops_per_s(&pr) / ops_per_s(&fr);
    if (opt.fmt == FMT_TEXT) printf("ratio picketd/floor: %.2f (ops/s)\n", ratio);
    else if (opt.fmt == FMT_JSON) printf("{\"ratio\":%.3f,\"workload\":\"%s\",\"label\":\"%s\"}\n", ratio, wl_names[opt.wl], label());
  }
  fflush(stdout);
  return 0;
}
