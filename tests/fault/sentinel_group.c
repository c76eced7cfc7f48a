/* sentinel_group.c: three data nodes and three redis-sentinel processes
 * for the fault tests (see sentinel_group.h). Plain like the harness:
 * fork, exec, a config file in a temp dir, hiredis to ask. */
#include "sentinel_group.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char dir[256];
  char conf[300];
  char log[300];
  int port;
  pid_t pid;
  int paused; /* SIGSTOPped by sg_pause_sentinel */
} sg_sentinel;

struct sg_group {
  sg_opts opts;
  harness_redis *node[SG_NODES];
  int node_paused[SG_NODES]; /* SIGSTOPped by sg_pause_node */
  char addr[SG_NODES][32];
  fault_proxy *proxy[SG_NODES];
  sg_sentinel sentinel[SG_SENTINELS];
  char list[128];
  char why[512]; /* what sg_wait_healthy last found wrong */
};

/* ---- processes and files ------------------------------------------------ */

/* redis-sentinel CONF, its stdout and stderr appended to DIR/stdout.log
 * (Sentinel logs to its own logfile; this catches what it says before it
 * opened that). Dies with the test. */
static pid_t spawn_sentinel(const sg_sentinel *s) {
  char out[320];
  snprintf(out, sizeof out, "%s/stdout.log", s->dir);
  char *argv[] = {"redis-sentinel", (char *)s->conf, NULL};
  return harness_spawn(argv, out);
}

static void stop_pid(pid_t *pid) {
  if (*pid <= 0) return;
  kill(*pid, SIGCONT);
  kill(*pid, SIGKILL);
  while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR) {
  }
  *pid = 0;
}

/* The shipped config: $PICKET_SOURCE_DIR (set by ctest) or this source
 * file's own tree. */
static void shipped_conf(char *out, size_t cap) {
  const char *src = getenv("PICKET_SOURCE_DIR");
  if (src && *src) {
    snprintf(out, cap, "%s/deploy/sentinel/sentinel.conf", src);
    return;
  }
  snprintf(out, cap, "%s", __FILE__); /* .../tests/fault/sentinel_group.c */
  char *at = strstr(out, "tests/fault/sentinel_group.c");
  if (at) snprintf(at, cap - (size_t)(at - out), "deploy/sentinel/sentinel.conf");
}

/* Writes s->conf: the shipped file line by line, with the local values
 * replaced. Each replaced directive must be there exactly once, so a
 * shipped file that loses one fails here rather than testing defaults. */
static void write_conf(const sg_group *g, const sg_sentinel *s, int primary_port) {
  char path[512];
  shipped_conf(path, sizeof path);
  FILE *in = fopen(path, "r");
  ck_assert_msg(in != NULL, "cannot read %s", path);
  FILE *out = fopen(s->conf, "w");
  ck_assert_msg(out != NULL, "cannot write %s", s->conf);
  enum { PORT, BIND, DIR_, LOGFILE, MONITOR, DOWN_AFTER, FAILOVER_TIMEOUT, NKEYS };
  static const char *const name[NKEYS] = {"port", "bind", "dir", "logfile",
                                          "sentinel monitor", "sentinel down-after-milliseconds",
                                          "sentinel failover-timeout"};
  int seen[NKEYS] = {0};
  char line[1024];
  while (fgets(line, sizeof line, in)) {
    char w1[64] = "", w2[64] = "", w3[64] = "", w4[64] = "", w5[64] = "", w6[64] = "";
    int n = sscanf(line, "%63s %63s %63s %63s %63s %63s", w1, w2, w3, w4, w5, w6);
    int key = -1;
    if (n >= 1 && w1[0] != '#') {
      if (strcmp(w1, "port") == 0) key = PORT;
      else if (strcmp(w1, "bind") == 0) key = BIND;
      else if (strcmp(w1, "dir") == 0) key = DIR_;
      else if (strcmp(w1, "logfile") == 0) key = LOGFILE;
      else if (strcmp(w1, "daemonize") == 0)
        ck_assert_msg(n >= 2 && strcmp(w2, "no") == 0, "%s: daemonize must stay no", path);
      else if (strcmp(w1, "sentinel") == 0 && n >= 3 && strcmp(w3, SG_MASTER) == 0) {
        if (strcmp(w2, "monitor") == 0) key = MONITOR;
        else if (strcmp(w2, "down-after-milliseconds") == 0) key = DOWN_AFTER;
        else if (strcmp(w2, "failover-timeout") == 0) key = FAILOVER_TIMEOUT;
      }
    }
    if (key < 0) {
      fputs(line, out);
      continue;
    }
    seen[key]++;
    switch (key) {
    case PORT: fprintf(out, "port %d\n", s->port); break;
    case BIND: fprintf(out, "bind 127.0.0.1\n"); break;
    case DIR_: fprintf(out, "dir %s\n", s->dir); break;
    case LOGFILE: fprintf(out, "logfile %s\n", s->log); break;
    case MONITOR: /* the quorum (w6) stays the shipped one */
      ck_assert_msg(n == 6, "%s: sentinel monitor %s wants host, port and quorum", path, SG_MASTER);
      fprintf(out, "sentinel monitor %s 127.0.0.1 %d %s\n", SG_MASTER, primary_port, w6);
      break;
    case DOWN_AFTER:
      fprintf(out, "sentinel down-after-milliseconds %s %d\n", SG_MASTER, g->opts.down_after_ms);
      break;
    case FAILOVER_TIMEOUT:
      fprintf(out, "sentinel failover-timeout %s %d\n", SG_MASTER, g->opts.failover_timeout_ms);
      break;
    }
  }
  fclose(in);
  fclose(out);
  for (int k = 0; k < NKEYS; k++)
    ck_assert_msg(seen[k] == 1, "%s: '%s' appears %d times, want once", path, name[k], seen[k]);
}

/* ---- asking ------------------------------------------------------------- */

static redisReply *vcmd(int port, const char *fmt, va_list ap) {
  struct timeval tv = {2, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == NULL || c->err) {
    if (c) redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  redisReply *r = redisvCommand(c, fmt, ap);
  redisFree(c);
  return r;
}

redisReply *sg_sentinel_cmd(const sg_group *g, int s, const char *fmt, ...) {
  if (g->sentinel[s].pid <= 0) return NULL;
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = vcmd(g->sentinel[s].port, fmt, ap);
  va_end(ap);
  return r;
}

/* The value of `key` in a flat key/value array reply, or NULL. */
const char *sg_field(const redisReply *kv, const char *key) {
  if (kv == NULL || kv->type != REDIS_REPLY_ARRAY) return NULL;
  for (size_t i = 0; i + 1 < kv->elements; i += 2)
    if (kv->element[i]->type == REDIS_REPLY_STRING && strcmp(kv->element[i]->str, key) == 0 &&
        kv->element[i + 1]->type == REDIS_REPLY_STRING)
      return kv->element[i + 1]->str;
  return NULL;
}

static int node_of_port(const sg_group *g, int port) {
  for (int i = 0; i < SG_NODES; i++)
    if (harness_redis_port(g->node[i]) == port) return i;
  return -1;
}

/* The primary's port Sentinel s names, or -1. */
static int named_port(const sg_group *g, int s) {
  redisReply *r = sg_sentinel_cmd(g, s, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", SG_MASTER);
  int port = -1;
  if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      r->element[1]->type == REDIS_REPLY_STRING)
    port = atoi(r->element[1]->str);
  if (r) freeReplyObject(r);
  return port;
}

/* 1 when node i runs and its ROLE is master. */
static int is_master(const sg_group *g, int i) {
  if (harness_redis_pid(g->node[i]) <= 0) return 0;
  redisReply *r = harness_redis_cmd(g->node[i], "ROLE");
  int m = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
          r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
  if (r) freeReplyObject(r);
  return m;
}

static int running_sentinels(const sg_group *g) {
  int n = 0;
  for (int s = 0; s < SG_SENTINELS; s++) n += g->sentinel[s].pid > 0;
  return n;
}

int sg_primary(sg_group *g) {
  int port = -1;
  for (int s = 0; s < SG_SENTINELS; s++) {
    if (g->sentinel[s].pid <= 0) continue;
    int p = named_port(g, s);
    if (p < 0 || (port >= 0 && p != port)) return -1;
    port = p;
  }
  int i = port >= 0 ? node_of_port(g, port) : -1;
  return i >= 0 && is_master(g, i) ? i : -1;
}

void sg_dump_logs(const sg_group *g) {
  for (int s = 0; s < SG_SENTINELS; s++) {
    fprintf(stderr, "---- sentinel %d (port %d) %s, last lines:\n", s, g->sentinel[s].port,
            g->sentinel[s].pid > 0 ? "running" : "stopped");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "tail -n 25 %s >&2", g->sentinel[s].log);
    if (system(cmd) != 0) { /* nothing more to show */ }
  }
}

int sg_wait_primary(sg_group *g, int old, int64_t timeout_ms, int64_t *ms) {
  int64_t t0 = harness_now_ms();
  int p = -1;
  while ((p = sg_primary(g)) < 0 || p == old) {
    if (harness_now_ms() - t0 > timeout_ms) {
      sg_dump_logs(g);
      ck_abort_msg("the Sentinels named no new primary (other than node %d) in %lld ms", old,
                   (long long)timeout_ms);
    }
    harness_sleep_ms(20);
  }
  if (ms) *ms = harness_now_ms() - t0;
  return p;
}

int64_t sg_failover(sg_group *g, int via) {
  int old = sg_primary(g);
  ck_assert_msg(old >= 0, "no agreed primary before the failover");
  int64_t t0 = harness_now_ms();
  /* A Sentinel refuses while it still sees no good replica (NOGOODSLAVE:
   * its view lags a rejoin by up to its 10 s INFO period) or a failover
   * in progress (INPROG): try again for a while. */
  char last[200] = "no Sentinel answered";
  for (;;) {
    int ok = 0;
    for (int s = 0; s < SG_SENTINELS && !ok; s++) {
      if (via >= 0 && s != via) continue;
      redisReply *r = sg_sentinel_cmd(g, s, "SENTINEL FAILOVER %s", SG_MASTER);
      ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
      if (r && (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS))
        snprintf(last, sizeof last, "%s", r->str);
      if (r) freeReplyObject(r);
    }
    if (ok) break;
    if (harness_now_ms() - t0 > 20000 * harness_time_scale()) {
      sg_dump_logs(g);
      ck_abort_msg("SENTINEL FAILOVER refused: %s", last);
    }
    harness_sleep_ms(200);
  }
  sg_wait_primary(g, old, 30000 * harness_time_scale(), NULL);
  return harness_now_ms() - t0;
}

/* ---- health ------------------------------------------------------------- */

/* 0 when the group is whole (see sg_wait_healthy); else -1 with g->why. */
static int healthy(sg_group *g) {
  int p = sg_primary(g);
  if (p < 0) {
    snprintf(g->why, sizeof g->why, "the Sentinels agree on no running master");
    return -1;
  }
  redisReply *r = harness_redis_cmd(g->node[p], "INFO replication");
  int online = 0;
  for (const char *at = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
       at && (at = strstr(at, "state=online")) != NULL; at++)
    online++;
  if (r) freeReplyObject(r);
  if (online < SG_NODES - 1) {
    snprintf(g->why, sizeof g->why, "primary %s has %d online replicas", g->addr[p], online);
    return -1;
  }
  redisContext *c = harness_redis_connect(g->node[p]);
  long long acked = 0;
  if (c) {
    r = redisCommand(c, "INCR sg:probe");
    if (r) freeReplyObject(r);
    r = redisCommand(c, "WAIT %d 200", SG_NODES - 1);
    acked = r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    if (r) freeReplyObject(r);
    redisFree(c);
  }
  if (acked < SG_NODES - 1) {
    snprintf(g->why, sizeof g->why, "primary %s: %lld replicas acknowledge writes", g->addr[p],
             acked);
    return -1;
  }
  int running = running_sentinels(g);
  for (int s = 0; s < SG_SENTINELS; s++) {
    if (g->sentinel[s].pid <= 0) continue;
    r = sg_sentinel_cmd(g, s, "SENTINEL MASTER %s", SG_MASTER);
    const char *flags = sg_field(r, "flags");
    int master_ok = flags && strcmp(flags, "master") == 0;
    if (r) freeReplyObject(r);
    int good = 0;
    r = sg_sentinel_cmd(g, s, "SENTINEL REPLICAS %s", SG_MASTER);
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
      /* The role the Sentinel last saw in the replica's INFO must be
       * "slave" too. A node that came back as a stale primary and was
       * turned into a replica is still "master" there until that
       * Sentinel's next INFO of it (every 10 s): promote it in a failover
       * before then and this Sentinel, not having heard of the failover
       * yet, sees a replica that has claimed master for long and demotes
       * it again (+convert-to-slave), stalling the failover (seen: 27 s
       * without a primary). Its link status is as old; the primary's INFO
       * and WAIT above are the live account of replication. */
      const char *f = sg_field(r->element[i], "flags");
      const char *role = sg_field(r->element[i], "role-reported");
      good += f && strcmp(f, "slave") == 0 && role && strcmp(role, "slave") == 0;
    }
    if (r) freeReplyObject(r);
    int peers = 0;
    r = sg_sentinel_cmd(g, s, "SENTINEL SENTINELS %s", SG_MASTER);
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
      const char *f = sg_field(r->element[i], "flags");
      peers += f && strcmp(f, "sentinel") == 0;
    }
    if (r) freeReplyObject(r);
    if (!master_ok || good < SG_NODES - 1 || peers < running - 1) {
      snprintf(g->why, sizeof g->why,
               "sentinel %d: master flags %s, %d healthy replicas, %d healthy other sentinels", s,
               master_ok ? "ok" : "not ok", good, peers);
      return -1;
    }
  }
  return 0;
}

/* Sets every running Sentinel's INFO and hello periods (SENTINEL DEBUG). */
static void periods(sg_group *g, int info_ms, int publish_ms) {
  for (int s = 0; s < SG_SENTINELS; s++) {
    if (g->sentinel[s].pid <= 0 || g->sentinel[s].paused) continue;
    redisReply *r = sg_sentinel_cmd(g, s, "SENTINEL DEBUG info-period %d publish-period %d",
                                    info_ms, publish_ms);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "sentinel %d: SENTINEL DEBUG: %s", s,
                  r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
    freeReplyObject(r);
  }
}

/* Most of a heal (17-20 s) was Sentinel's own pace outside a failover: it
 * reads a replica's INFO every 10 s, and turns a node that came back as a
 * primary into a replica only after it has reported that role for 4 hello
 * periods (8 s). SENTINEL DEBUG (Redis 7.0) makes these 1 s and 2 s while
 * this waits; the cases run with the defaults again, so what they test is
 * Sentinel as shipped. */
int64_t sg_wait_healthy(sg_group *g, int64_t timeout_ms) {
  int64_t t0 = harness_now_ms();
  periods(g, 1000, 500);
  char shown[sizeof g->why] = "";
  while (healthy(g) < 0) {
    if (getenv("SG_DEBUG") && strcmp(shown, g->why) != 0) { /* what it waits for, as it changes */
      printf("sentinel group: +%lld ms: %s\n", (long long)(harness_now_ms() - t0), g->why);
      snprintf(shown, sizeof shown, "%s", g->why);
    }
    if (harness_now_ms() - t0 > timeout_ms) {
      sg_dump_logs(g);
      ck_abort_msg("the Sentinel group is not whole after %lld ms: %s", (long long)timeout_ms,
                   g->why);
    }
    harness_sleep_ms(50);
  }
  periods(g, 10000, 2000);
  return harness_now_ms() - t0;
}

/* ---- lifecycle ---------------------------------------------------------- */

static void start_sentinel(sg_group *g, int s) {
  sg_sentinel *x = &g->sentinel[s];
  x->pid = spawn_sentinel(x);
  ck_assert_msg(x->pid > 0, "fork");
  int64_t until = harness_now_ms() + 15000 * harness_time_scale();
  while (named_port(g, s) < 0) {
    int st;
    if (waitpid(x->pid, &st, WNOHANG) == x->pid) {
      x->pid = 0;
      sg_dump_logs(g);
      ck_abort_msg("redis-sentinel %d exited at start (see above, and %s/stdout.log)", s, x->dir);
    }
    if (harness_now_ms() > until) {
      sg_dump_logs(g);
      ck_abort_msg("redis-sentinel %d does not answer", s);
    }
    harness_sleep_ms(10);
  }
}

sg_group *sg_start(const sg_opts *opts) {
  int64_t t0 = harness_now_ms();
  sg_group *g = calloc(1, sizeof *g);
  ck_assert_ptr_nonnull(g);
  if (opts) g->opts = *opts;
  if (g->opts.down_after_ms <= 0) g->opts.down_after_ms = 1500;
  if (g->opts.failover_timeout_ms <= 0) g->opts.failover_timeout_ms = g->opts.proxied ? 60000 : 5000;

  /* Full syncs start at once (Redis 7 waits 5 s for more replicas by
   * default), on every node: any of them may become the primary. */
  harness_redis_opts po = {.tcp = 1, .appendonly = 1, .extra_conf = "repl-diskless-sync-delay 0"};
  g->node[0] = harness_redis_start(&po);
  ck_assert_msg(g->node[0] != NULL, "primary did not start");
  for (int i = 1; i < SG_NODES; i++) {
    int up = harness_redis_port(g->node[0]);
    if (g->opts.proxied) {
      g->proxy[i] = fault_proxy_start(up);
      up = fault_proxy_port(g->proxy[i]);
    }
    char conf[120];
    snprintf(conf, sizeof conf, "repl-diskless-sync-delay 0\nreplicaof 127.0.0.1 %d", up);
    harness_redis_opts ro = {.tcp = 1, .appendonly = 1, .extra_conf = conf};
    g->node[i] = harness_redis_start(&ro);
    ck_assert_msg(g->node[i] != NULL, "replica %d did not start", i);
  }
  for (int i = 0; i < SG_NODES; i++)
    snprintf(g->addr[i], sizeof g->addr[i], "127.0.0.1:%d", harness_redis_port(g->node[i]));

  size_t len = 0;
  for (int s = 0; s < SG_SENTINELS; s++) {
    sg_sentinel *x = &g->sentinel[s];
    char dir[sizeof x->dir];
    ck_assert_int_eq(harness_make_tmpdir(dir, sizeof dir, "sentinel"), 0);
    snprintf(x->dir, sizeof x->dir, "%s", dir);
    snprintf(x->conf, sizeof x->conf, "%s/sentinel.conf", dir);
    snprintf(x->log, sizeof x->log, "%s/sentinel.log", dir);
    x->port = harness_free_port();
    ck_assert_int_gt(x->port, 0);
    write_conf(g, x, harness_redis_port(g->node[0]));
    len += (size_t)snprintf(g->list + len, sizeof g->list - len, "%s127.0.0.1:%d", s ? "," : "",
                            x->port);
  }
  for (int s = 0; s < SG_SENTINELS; s++) start_sentinel(g, s);
  int64_t ms = sg_wait_healthy(g, 30000 * harness_time_scale());
  printf("sentinel group%s up in %lld ms (%lld ms for the Sentinels to see it whole): "
         "nodes %s %s %s, sentinels %s\n",
         g->opts.proxied ? " (replicas behind proxies)" : "", (long long)(harness_now_ms() - t0),
         (long long)ms, g->addr[0], g->addr[1], g->addr[2], g->list);
  return g;
}

void sg_free(sg_group *g) {
  if (g == NULL) return;
  for (int s = 0; s < SG_SENTINELS; s++) {
    stop_pid(&g->sentinel[s].pid);
    if (g->sentinel[s].dir[0] && getenv("HARNESS_KEEP") == NULL) harness_rm_rf(g->sentinel[s].dir);
  }
  for (int i = 0; i < SG_NODES; i++) {
    harness_redis_free(g->node[i]);
    fault_proxy_free(g->proxy[i]);
  }
  free(g);
}

const char *sg_sentinel_list(const sg_group *g) { return g->list; }
int sg_sentinel_port(const sg_group *g, int s) { return g->sentinel[s].port; }
harness_redis *sg_node(const sg_group *g, int i) { return g->node[i]; }
const char *sg_node_addr(const sg_group *g, int i) { return g->addr[i]; }
fault_proxy *sg_proxy(const sg_group *g, int i) { return g->proxy[i]; }

void sg_kill_node(sg_group *g, int i) {
  harness_redis_stop(g->node[i], SIGKILL);
  g->node_paused[i] = 0;
}

void sg_pause_node(sg_group *g, int i, int paused) {
  pid_t pid = harness_redis_pid(g->node[i]);
  ck_assert_msg(pid > 0, "node %d is not running", i);
  kill(pid, paused ? SIGSTOP : SIGCONT);
  g->node_paused[i] = paused;
}

int64_t sg_restart_node(sg_group *g, int i) {
  int64_t t0 = harness_now_ms();
  ck_assert_msg(harness_redis_restart(g->node[i]) == 0, "node %d did not restart", i);
  sg_wait_healthy(g, 60000 * harness_time_scale());
  return harness_now_ms() - t0;
}

int64_t sg_heal(sg_group *g, int64_t timeout_ms) {
  int64_t t0 = harness_now_ms();
  for (int i = 0; i < SG_NODES; i++) {
    if (g->node_paused[i]) sg_pause_node(g, i, 0);
    if (harness_redis_pid(g->node[i]) <= 0) {
      printf("sentinel group: starting node %s again\n", g->addr[i]);
      ck_assert_msg(harness_redis_restart(g->node[i]) == 0, "node %d did not restart", i);
    }
  }
  for (int s = 0; s < SG_SENTINELS; s++) {
    if (g->sentinel[s].paused) sg_pause_sentinel(g, s, 0);
    if (g->sentinel[s].pid <= 0) {
      printf("sentinel group: starting sentinel %d again\n", s);
      start_sentinel(g, s);
    }
  }
  sg_wait_healthy(g, timeout_ms);
  return harness_now_ms() - t0;
}

void sg_partition_replicas(sg_group *g) {
  ck_assert_msg(g->opts.proxied, "sg_partition_replicas needs a proxied group");
  for (int i = 0; i < SG_NODES; i++)
    if (g->proxy[i]) fault_proxy_partition(g->proxy[i]);
}

void sg_kill_sentinel(sg_group *g, int s) {
  stop_pid(&g->sentinel[s].pid);
  g->sentinel[s].paused = 0;
}

void sg_pause_sentinel(sg_group *g, int s, int paused) {
  ck_assert_msg(g->sentinel[s].pid > 0, "sentinel %d is not running", s);
  kill(g->sentinel[s].pid, paused ? SIGSTOP : SIGCONT);
  g->sentinel[s].paused = paused;
}

void sg_restart_sentinel(sg_group *g, int s) {
  ck_assert_msg(g->sentinel[s].pid <= 0, "sentinel %d is running", s);
  start_sentinel(g, s);
}
