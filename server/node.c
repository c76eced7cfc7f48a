/* node.c: the node table (see node.h).
 *
 * One primary, a generation number and a few facts for /readyz, under one
 * mutex that no Redis call is ever made under. Single-node mode (--redis)
 * is the one-node case: the URL's node is the primary from the start and
 * the generation never changes. Under --sentinel the watcher (sentinel.c)
 * calls node_set_primary and node_forget_primary; this file turns those
 * into a generation, the failover metrics and the one log line per switch.
 *
 * Why a generation and not a callback per connection: connections belong
 * to threads that may be blocked in a call when the primary moves. Each
 * compares its generation before its next call (and after a reply), so no
 * thread ever has to reach into another's connection. */
#include "node.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "metrics.h"
#include "sentinel.h"

#define MAX_HOOKS 4

static const config *cfg;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong generation = 1;
static int known;                 /* a primary is named now */
static char host[256];
static int port;
static char last_addr[280];       /* the last primary named, kept while none is */
static char unknown_why[300] = "Sentinel has not named one yet"; /* while none is */
static int sentinel_reachable = 1;
static char sentinel_why[240];
static atomic_llong trouble_since_ms; /* first trouble since the last success, 0 if none */
static void (*hooks[MAX_HOOKS])(void);
static int nhooks;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timeval ms_tv(int64_t ms) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
  return tv;
}

unsigned long node_generation(void) {
  return atomic_load_explicit(&generation, memory_order_relaxed);
}

void node_on_switch(void (*fn)(void)) {
  pthread_mutex_lock(&mu);
  if (nhooks < MAX_HOOKS) hooks[nhooks++] = fn;
  pthread_mutex_unlock(&mu);
}

void node_trouble(void) {
  long long zero = 0;
  atomic_compare_exchange_strong(&trouble_since_ms, &zero, (long long)now_ms());
  if (cfg && cfg->sentinel_count > 0) sentinel_kick();
}

void node_ok(void) {
  if (atomic_load_explicit(&trouble_since_ms, memory_order_relaxed) != 0)
    atomic_store(&trouble_since_ms, 0);
}

/* A command during a connection's setup: 0, or -1 with why in err. */
static int setup(redisContext *c, char *err, size_t errlen, const char *what, redisReply *rep) {
  if (rep == NULL) {
    snprintf(err, errlen, "Redis connection failed: %s", c->errstr);
    return -1;
  }
  int ok = rep->type != REDIS_REPLY_ERROR;
  if (!ok) snprintf(err, errlen, "Redis refused %s: %.150s", what, rep->str);
  freeReplyObject(rep);
  return ok ? 0 : -1;
}

/* Opens an authenticated connection to t, with its database selected. */
static redisContext *open_target(const redis_target *t, int64_t timeout_ms, char *err,
                                 size_t errlen) {
  struct timeval tv = ms_tv(timeout_ms);
  redisContext *c = t->is_unix ? redisConnectUnixWithTimeout(t->path, tv)
                               : redisConnectWithTimeout(t->host, t->port, tv);
  if (c == NULL) {
    snprintf(err, errlen, "Redis connection failed: out of memory");
    return NULL;
  }
  if (c->err) {
    if (t->is_unix) snprintf(err, errlen, "Redis connection failed: %s", c->errstr);
    else snprintf(err, errlen, "Redis at %s:%d: %s", t->host, t->port, c->errstr);
    redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  if (!t->is_unix) redisEnableKeepAlive(c);
  if (t->password[0] &&
      setup(c, err, errlen, "AUTH",
            t->user[0] ? redisCommand(c, "AUTH %s %s", t->user, t->password)
                       : redisCommand(c, "AUTH %s", t->password)) < 0)
    goto fail;
  if (t->db && setup(c, err, errlen, "SELECT", redisCommand(c, "SELECT %d", t->db)) < 0) goto fail;
  return c;
fail:
  redisFree(c);
  return NULL;
}

/* What ROLE says of c's node: 1 primary, 0 anything else, -1 no answer. */
static int role_of(redisContext *c, char *err, size_t errlen) {
  redisReply *rep = redisCommand(c, "ROLE");
  if (rep == NULL) {
    snprintf(err, errlen, "Redis connection failed: %s", c->errstr);
    return -1;
  }
  int role = -1;
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
      rep->element[0]->type == REDIS_REPLY_STRING)
    role = strcmp(rep->element[0]->str, "master") == 0;
  else if (rep->type == REDIS_REPLY_ERROR)
    snprintf(err, errlen, "Redis refused ROLE (Sentinel mode needs it): %.150s", rep->str);
  else
    snprintf(err, errlen, "Redis gave an odd reply to ROLE");
  if (role == 0) snprintf(err, errlen, "is a %s, not the primary", rep->element[0]->str);
  freeReplyObject(rep);
  return role;
}

/* A data node's target: the config's credentials and db, at host:port. */
static void data_target(redis_target *t, const char *h, int p) {
  *t = cfg->redis;
  t->is_unix = 0;
  snprintf(t->host, sizeof t->host, "%s", h);
  t->port = p;
}

int node_probe(const char *h, int p, char *err, size_t errlen) {
  redis_target t;
  data_target(&t, h, p);
  redisContext *c = open_target(&t, cfg->redis_timeout_ms, err, errlen);
  if (c == NULL) return -1;
  int role = role_of(c, err, errlen);
  redisFree(c);
  return role;
}

redisContext *node_connect(int64_t timeout_ms, unsigned long *gen, char *err, size_t errlen) {
  if (cfg->sentinel_count == 0) {
    *gen = node_generation();
    return open_target(&cfg->redis, timeout_ms, err, errlen);
  }
  redis_target t;
  pthread_mutex_lock(&mu);
  int have = known;
  if (have) data_target(&t, host, port);
  else snprintf(err, errlen, "no Redis primary known: %s", unknown_why);
  *gen = node_generation();
  pthread_mutex_unlock(&mu);
  if (!have) {
    node_trouble();
    return NULL;
  }
  redisContext *c = open_target(&t, timeout_ms, err, errlen);
  if (c == NULL) return NULL;
  /* A node Sentinel named once may have been demoted since: a replica
   * would answer READONLY to grants but serve stale reads of leases. */
  char why[200] = "";
  int role = role_of(c, why, sizeof why);
  if (role != 1) {
    snprintf(err, errlen, "Redis at %s:%d %s", t.host, t.port, why);
    redisFree(c);
    if (role == 0) node_forget_primary(err);
    else node_trouble();
    return NULL;
  }
  return c;
}

/* Runs the switch hooks; called with mu not held. */
static void run_hooks(void) {
  pthread_mutex_lock(&mu);
  int n = nhooks;
  void (*fns[MAX_HOOKS])(void);
  memcpy(fns, hooks, sizeof fns);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < n; i++) fns[i]();
}

void node_set_primary(const char *h, int p) {
  char addr[280];
  snprintf(addr, sizeof addr, "%s:%d", h, p);
  pthread_mutex_lock(&mu);
  if (known && strcmp(host, h) == 0 && port == p) {
    pthread_mutex_unlock(&mu);
    return;
  }
  char old[280];
  snprintf(old, sizeof old, "%s", last_addr);
  snprintf(host, sizeof host, "%s", h);
  port = p;
  known = 1;
  snprintf(last_addr, sizeof last_addr, "%s", addr);
  atomic_fetch_add(&generation, 1);
  pthread_mutex_unlock(&mu);
  metrics_set_primary(addr);
  if (old[0] == '\0') {
    LOG(LOG_INFO, "Redis primary is %s (Sentinel master '%s')", addr, cfg->sentinel_master);
  } else if (strcmp(old, addr) == 0) {
    LOG(LOG_INFO, "Redis primary %s confirmed again by Sentinel", addr);
  } else {
    long long since = atomic_exchange(&trouble_since_ms, 0);
    metrics_inc(M_REDIS_FAILOVERS);
    LOG(LOG_WARN, "Redis primary switched from %s to %s (Sentinel master '%s'); lock calls "
                  "had been refused for %lld ms",
        old, addr, cfg->sentinel_master, since ? (long long)(now_ms() - since) : 0LL);
  }
  run_hooks();
}

void node_forget_primary(const char *why) {
  pthread_mutex_lock(&mu);
  int was = known;
  known = 0;
  if (was) atomic_fetch_add(&generation, 1);
  snprintf(unknown_why, sizeof unknown_why, "%s", why);
  pthread_mutex_unlock(&mu);
  if (!was) return;
  node_trouble();
  metrics_set_primary("");
  LOG(LOG_WARN, "%s; refusing lock calls until Sentinel names the primary", why);
  run_hooks();
}

void node_sentinel_state(int reachable, const char *why) {
  pthread_mutex_lock(&mu);
  sentinel_reachable = reachable;
  snprintf(sentinel_why, sizeof sentinel_why, "%s", reachable ? "" : why);
  pthread_mutex_unlock(&mu);
}

void node_describe(node_info *out) {
  memset(out, 0, sizeof *out);
  if (cfg->sentinel_count == 0) {
    out->sentinel = -1;
    const redis_target *t = &cfg->redis;
    if (t->is_unix) snprintf(out->primary, sizeof out->primary, "%s", t->path);
    else snprintf(out->primary, sizeof out->primary, "%s:%d", t->host, t->port);
    return;
  }
  pthread_mutex_lock(&mu);
  if (known) snprintf(out->primary, sizeof out->primary, "%s:%d", host, port);
  out->sentinel = sentinel_reachable;
  snprintf(out->sentinel_msg, sizeof out->sentinel_msg, "%s", sentinel_why);
  pthread_mutex_unlock(&mu);
}

int node_init(const config *c, char *err, size_t errlen) {
  cfg = c;
  if (cfg->sentinel_count == 0) {
    node_info i;
    node_describe(&i);
    metrics_set_primary(i.primary);
    return 0;
  }
  return sentinel_start(cfg, err, errlen);
}

void node_stop(void) {
  if (cfg && cfg->sentinel_count > 0) sentinel_stop();
}
