/* node.c: the node table (see node.h).
 *
 * A few dozen nodes (address, generation, trouble clock) and, under
 * --redis-cluster, the owner of each of the 16384 slots, under one mutex
 * that no Redis call is ever made under. Routing reads one byte of the
 * slot map with a relaxed atomic load, so no lock call takes the mutex.
 * Single-node mode (--redis) is the one-node case: node 0 is the URL's
 * node from the start and its generation never changes. Under --sentinel
 * the watcher (sentinel.c) calls node_set_primary and node_forget_primary
 * on node 0; under --redis-cluster the watcher (cluster.c) calls
 * node_set_slots with each map it reads, and each MOVED reply repoints one
 * slot at once (redis-py and Lettuce do the same: the reply is the newest
 * word on that slot, and the full map follows within a few tens of ms).
 *
 * Why a generation and not a callback per connection: connections belong
 * to threads that may be blocked in a call when a primary moves. Each
 * compares its node's generation before its next call (and after a
 * reply), so no thread ever has to reach into another's connection. */
#include "node.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "stats.h"

#define MAX_HOOKS 4
#define SLOT_NONE 0xff /* a slot no primary is known to serve */

typedef struct {
  int used;                     /* the id names a node */
  char host[256];
  int port;
  atomic_ulong gen;             /* bumped when the id comes to mean another node */
  atomic_llong trouble_since_ms; /* first trouble since the last success, 0 if none */
} node_entry;

static const config *cfg;
static int cluster_mode;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static node_entry nodes[NODE_MAX];
static _Atomic unsigned char slot_owner[NODE_SLOTS]; /* cluster: a node id or SLOT_NONE */
static uint16_t crc_table[256];
/* Sentinel mode: node 0 is the primary while `known`. */
static int known;
static char last_addr[280];       /* the last primary named, kept while none is */
static char unknown_why[300] = "Sentinel has not named one yet"; /* while none is */
static int sentinel_reachable = 1;
static char sentinel_why[240];
/* Sentinel mode, --sentinel-lease: the primary lease (node_sentinel_lease).
 * A new lease after a lapse gets a new epoch before its end is stored, so
 * a reader that sees the end and then the epoch it started with knows the
 * lease has not broken in between. */
static atomic_llong lease_until;
static atomic_ulong lease_epoch;
static char lease_why[600] = "no sentinel has confirmed the primary yet";
/* Cluster mode: whether a node answered CLUSTER SLOTS lately. */
static int cluster_reachable = 1;
static char cluster_why[240] = "";
static void (*hooks[MAX_HOOKS])(void);
static int nhooks;
/* The watcher's kick (node_set_kick): the table asks it to look again
 * when a node is in trouble or a slot moved. The table knows the watcher
 * only by this pointer; whoever owns both wires them (store_redis.c). */
static _Atomic(void (*)(void)) kick_fn;

static void kick(void) {
  void (*fn)(void) = atomic_load(&kick_fn);
  if (fn) fn();
}

void node_set_kick(void (*fn)(void)) { atomic_store(&kick_fn, fn); }

static struct timeval ms_tv(int64_t ms) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
  return tv;
}

int node_is_cluster(void) { return cluster_mode; }

/* ---- slots ---------------------------------------------------------- */

/* CRC-16/XMODEM (polynomial 0x1021, initial 0), the checksum of Redis's
 * crc16.c; the table is made once at init. */
static void crc_init(void) {
  for (int i = 0; i < 256; i++) {
    uint16_t c = (uint16_t)(i << 8);
    for (int b = 0; b < 8; b++) c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
    crc_table[i] = c;
  }
}

static uint16_t crc16(const char *s, size_t n) {
  uint16_t c = 0;
  for (size_t i = 0; i < n; i++)
    c = (uint16_t)((c << 8) ^ crc_table[((c >> 8) ^ (unsigned char)s[i]) & 0xff]);
  return c;
}

int node_key_slot(const char *key, size_t len) {
  /* Redis's rule (cluster.c keyHashSlot): the bytes between the first '{'
   * and the first '}' after it, when there are any; else the whole key. */
  const char *open = memchr(key, '{', len);
  if (open) {
    const char *from = open + 1, *close = memchr(from, '}', len - (size_t)(from - key));
    if (close && close > from) return crc16(from, (size_t)(close - from)) & (NODE_SLOTS - 1);
  }
  return crc16(key, len) & (NODE_SLOTS - 1);
}

/* A hash tag of each slot, for the keys picketd keeps per slot (the index
 * of held names, proto/redis/list.lua): "/i/" and 1 to 3 bytes of
 * [0-9A-Za-z], the first found whose CRC16 lands in the slot ('/' is no
 * name byte, so no lock shares a tag). 62^3 candidates leave a slot
 * uncovered with odds of about 1 in 10^2; the 4-byte round covers it. */
static char slot_tags[NODE_SLOTS][8];

static void slot_tags_init(void) {
  static const char abc[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  int left = NODE_SLOTS;
  char t[8] = "/i/";
  for (int len = 1; len <= 4 && left > 0; len++) {
    long total = 1;
    for (int i = 0; i < len; i++) total *= 62;
    for (long v = 0; v < total && left > 0; v++) {
      long x = v;
      for (int i = 0; i < len; i++, x /= 62) t[3 + i] = abc[x % 62];
      t[3 + len] = '\0';
      int slot = crc16(t, (size_t)(3 + len)) & (NODE_SLOTS - 1);
      if (slot_tags[slot][0]) continue;
      memcpy(slot_tags[slot], t, sizeof t);
      left--;
    }
  }
}

const char *node_slot_tag(int slot) { return slot_tags[slot & (NODE_SLOTS - 1)]; }

int node_for_key(const char *key, int *slot, char *err, size_t errlen) {
  if (!cluster_mode) {
    *slot = -1;
    return 0;
  }
  int s = node_key_slot(key, strlen(key));
  *slot = s;
  int id = atomic_load_explicit(&slot_owner[s], memory_order_relaxed);
  if (id != SLOT_NONE) return id;
  pthread_mutex_lock(&mu);
  if (!cluster_reachable)
    snprintf(err, errlen, "Redis Cluster slot %d has no known primary (no cluster node answers: "
                          "%.150s)", s, cluster_why);
  else
    snprintf(err, errlen, "Redis Cluster slot %d has no primary (the cluster lists none for it: "
                          "a shard down with no replica to promote)", s);
  pthread_mutex_unlock(&mu);
  kick();
  return -1;
}

/* Whether node id serves a slot, in the slot map or in `pending` (a map
 * being built, or NULL); called with mu held. */
static int serves(int id, const unsigned char *pending) {
  for (int s = 0; s < NODE_SLOTS; s++)
    if (atomic_load_explicit(&slot_owner[s], memory_order_relaxed) == id ||
        (pending && pending[s] == id))
      return 1;
  return 0;
}

int node_any(int after) {
  if (!cluster_mode) return 0;
  unsigned char owns[NODE_MAX] = {0};
  for (int s = 0; s < NODE_SLOTS; s++) {
    int id = atomic_load_explicit(&slot_owner[s], memory_order_relaxed);
    if (id != SLOT_NONE) owns[id] = 1;
  }
  for (int i = 1; i <= NODE_MAX; i++) {
    int id = (after + i + NODE_MAX) % NODE_MAX;
    if (owns[id]) return id;
  }
  return -1;
}

/* ---- the nodes ------------------------------------------------------ */

unsigned long node_generation(int id) {
  return atomic_load_explicit(&nodes[id].gen, memory_order_relaxed);
}

/* The id for host:port; called with mu held. A new address takes a free id,
 * or else the id of a node that serves no slot, now or in `pending` (a
 * demoted primary, or one that left): bumping its generation closes every
 * connection to it. */
static int id_of_locked(const char *h, int p, const unsigned char *pending) {
  int free_id = -1;
  for (int i = 0; i < NODE_MAX; i++) {
    if (nodes[i].used && nodes[i].port == p && strcmp(nodes[i].host, h) == 0) return i;
    if (!nodes[i].used && free_id < 0) free_id = i;
  }
  if (free_id < 0)
    for (int i = 0; i < NODE_MAX && free_id < 0; i++)
      if (!serves(i, pending)) free_id = i;
  if (free_id < 0) return -1;
  node_entry *e = &nodes[free_id];
  e->used = 1;
  snprintf(e->host, sizeof e->host, "%s", h);
  e->port = p;
  atomic_fetch_add(&e->gen, 1);
  atomic_store(&e->trouble_since_ms, 0);
  return free_id;
}

int node_id_of(const char *h, int p) {
  pthread_mutex_lock(&mu);
  int id = id_of_locked(h, p, NULL);
  pthread_mutex_unlock(&mu);
  if (id < 0) LOG(LOG_WARN, "the node table is full (%d nodes serve slots): cannot follow a "
                            "redirection to %s:%d", NODE_MAX, h, p);
  return id;
}

void node_addr(int id, char *out, size_t cap) {
  if (!cluster_mode && cfg->sentinel_count == 0 && cfg->redis.is_unix) {
    snprintf(out, cap, "%s", cfg->redis.path);
    return;
  }
  pthread_mutex_lock(&mu);
  if (nodes[id].used) snprintf(out, cap, "%s:%d", nodes[id].host, nodes[id].port);
  else snprintf(out, cap, "(none)");
  pthread_mutex_unlock(&mu);
}

void node_on_switch(void (*fn)(void)) {
  pthread_mutex_lock(&mu);
  if (nhooks < MAX_HOOKS) hooks[nhooks++] = fn;
  pthread_mutex_unlock(&mu);
}

void node_trouble(int id) {
  long long zero = 0;
  atomic_compare_exchange_strong(&nodes[id].trouble_since_ms, &zero, (long long)clock_mono_ms());
  kick();
}

void node_ok(int id) {
  if (atomic_load_explicit(&nodes[id].trouble_since_ms, memory_order_relaxed) != 0)
    atomic_store(&nodes[id].trouble_since_ms, 0);
}

/* What ROLE's reply says of its node: 1 primary, 0 anything else, -1 no
 * usable answer (why in err). */
static int role_in(const redisReply *rep, char *err, size_t errlen) {
  int role = -1;
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
      rep->element[0]->type == REDIS_REPLY_STRING)
    role = strcmp(rep->element[0]->str, "master") == 0;
  else if (rep->type == REDIS_REPLY_ERROR)
    snprintf(err, errlen, "Redis refused ROLE (Sentinel mode needs it): %.150s", rep->str);
  else
    snprintf(err, errlen, "Redis gave an odd reply to ROLE");
  if (role == 0) snprintf(err, errlen, "is a %s, not the primary", rep->element[0]->str);
  return role;
}

/* Starts a connection to t and appends AUTH and SELECT (as t needs them)
 * to s's steps, unsent. timeout_ms 0: the connect does not wait (the
 * socket connects in the background; a host name is resolved first);
 * otherwise it waits up to timeout_ms, which is also the command timeout.
 * NULL with why in err when no socket could be made. */
static redisContext *open_target(const redis_target *t, int64_t timeout_ms, node_setup *s,
                                 char *err, size_t errlen) {
  struct timeval tv = ms_tv(timeout_ms);
  redisContext *c;
  if (timeout_ms > 0)
    c = t->is_unix ? redisConnectUnixWithTimeout(t->path, tv)
                   : redisConnectWithTimeout(t->host, t->port, tv);
  else
    c = t->is_unix ? redisConnectUnixNonBlock(t->path) : redisConnectNonBlock(t->host, t->port);
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
  if (timeout_ms > 0) redisSetTimeout(c, tv);
  if (!t->is_unix) redisEnableKeepAlive(c);
  s->n = s->next = 0;
  if (t->is_unix) snprintf(s->addr, sizeof s->addr, "%s", t->path);
  else snprintf(s->addr, sizeof s->addr, "%s:%d", t->host, t->port);
  int ok = REDIS_OK;
  if (t->password[0]) {
    ok = t->user[0] ? redisAppendCommand(c, "AUTH %s %s", t->user, t->password)
                    : redisAppendCommand(c, "AUTH %s", t->password);
    s->step[s->n++] = NODE_STEP_AUTH;
  }
  if (ok == REDIS_OK && t->db) {
    ok = redisAppendCommand(c, "SELECT %d", t->db);
    s->step[s->n++] = NODE_STEP_SELECT;
  }
  if (ok != REDIS_OK) {
    snprintf(err, errlen, "Redis connection failed: out of memory");
    redisFree(c);
    return NULL;
  }
  return c;
}

int node_setup_reply(node_setup *s, const redisReply *rep, char *err, size_t errlen) {
  int step = s->step[s->next++];
  if (step == NODE_STEP_ROLE) {
    /* A node Sentinel named once may have been demoted since: a replica
     * would answer READONLY to grants but serve stale reads of leases. */
    char why[200] = "";
    int role = role_in(rep, why, sizeof why);
    if (role == 1) return 0;
    snprintf(err, errlen, "Redis at %s %s", s->addr, why);
    if (role == 0) node_forget_primary(err);
    else node_trouble(0);
    return -1;
  }
  if (rep->type != REDIS_REPLY_ERROR) return 0;
  snprintf(err, errlen, "Redis refused %s: %.150s", step == NODE_STEP_AUTH ? "AUTH" : "SELECT",
           rep->str);
  if (s->id >= 0) node_trouble(s->id);
  return -1;
}

/* Reads the replies to s's steps on the blocking connection c: 0, or -1
 * with why in err. */
static int setup_drain(redisContext *c, node_setup *s, char *err, size_t errlen) {
  while (s->next < s->n) {
    redisReply *rep = NULL;
    if (redisGetReply(c, (void **)&rep) != REDIS_OK) {
      snprintf(err, errlen, "Redis connection failed: %s", c->errstr);
      if (s->id >= 0) node_trouble(s->id);
      return -1;
    }
    int ok = node_setup_reply(s, rep, err, errlen);
    freeReplyObject(rep);
    if (ok < 0) return -1;
  }
  return 0;
}

/* What ROLE says of c's node: 1 primary, 0 anything else, -1 no answer. */
static int role_of(redisContext *c, char *err, size_t errlen) {
  redisReply *rep = redisCommand(c, "ROLE");
  if (rep == NULL) {
    snprintf(err, errlen, "Redis connection failed: %s", c->errstr);
    return -1;
  }
  int role = role_in(rep, err, errlen);
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

/* An authenticated connection to t with its database selected, waited
 * for (up to timeout_ms per step). */
static redisContext *open_waited(const redis_target *t, int64_t timeout_ms, char *err,
                                 size_t errlen) {
  node_setup s = {.id = -1};
  redisContext *c = open_target(t, timeout_ms, &s, err, errlen);
  if (c && setup_drain(c, &s, err, errlen) < 0) {
    redisFree(c);
    return NULL;
  }
  return c;
}

int node_probe(const char *h, int p, char *err, size_t errlen) {
  redis_target t;
  data_target(&t, h, p);
  redisContext *c = open_waited(&t, cfg->redis_timeout_ms, err, errlen);
  if (c == NULL) return -1;
  int role = role_of(c, err, errlen);
  redisFree(c);
  return role;
}

redisContext *node_open_addr(const char *h, int p, int64_t timeout_ms, char *err, size_t errlen) {
  redis_target t;
  data_target(&t, h, p);
  return open_waited(&t, timeout_ms, err, errlen);
}

redisContext *node_connect_start(int id, int64_t timeout_ms, unsigned long *gen, node_setup *s,
                                 char *err, size_t errlen) {
  s->id = id;
  const redis_target *target = &cfg->redis;
  redis_target t;
  if (cluster_mode || cfg->sentinel_count > 0) {
    pthread_mutex_lock(&mu);
    int have = cluster_mode ? nodes[id].used : known;
    if (have) data_target(&t, nodes[id].host, nodes[id].port);
    else if (cluster_mode) snprintf(err, errlen, "Redis Cluster node %d is not known", id);
    else snprintf(err, errlen, "no Redis primary known: %s", unknown_why);
    *gen = node_generation(id);
    pthread_mutex_unlock(&mu);
    if (!have) {
      node_trouble(id);
      return NULL;
    }
    target = &t;
  } else {
    *gen = node_generation(0);
  }
  redisContext *c = open_target(target, timeout_ms, s, err, errlen);
  if (c == NULL) {
    if (target == &t) node_trouble(id);
    return NULL;
  }
  /* A cluster node that is no longer a slot's primary answers MOVED,
   * which repoints the slot: only Sentinel's primary is asked its ROLE. */
  if (!cluster_mode && cfg->sentinel_count > 0) {
    if (redisAppendCommand(c, "ROLE") != REDIS_OK) {
      snprintf(err, errlen, "Redis connection failed: out of memory");
      redisFree(c);
      return NULL;
    }
    s->step[s->n++] = NODE_STEP_ROLE;
  }
  return c;
}

redisContext *node_connect(int id, int64_t timeout_ms, unsigned long *gen, char *err,
                           size_t errlen) {
  node_setup s;
  redisContext *c = node_connect_start(id, timeout_ms, gen, &s, err, errlen);
  if (c && setup_drain(c, &s, err, errlen) < 0) {
    redisFree(c);
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

/* ---- Sentinel: node 0 ----------------------------------------------- */

void node_set_primary(const char *h, int p) {
  char addr[280];
  snprintf(addr, sizeof addr, "%s:%d", h, p);
  node_entry *e = &nodes[0];
  pthread_mutex_lock(&mu);
  if (known && strcmp(e->host, h) == 0 && e->port == p) {
    pthread_mutex_unlock(&mu);
    return;
  }
  char old[280];
  snprintf(old, sizeof old, "%s", last_addr);
  snprintf(e->host, sizeof e->host, "%s", h);
  e->port = p;
  e->used = known = 1;
  snprintf(last_addr, sizeof last_addr, "%s", addr);
  atomic_fetch_add(&e->gen, 1);
  pthread_mutex_unlock(&mu);
  redis_stats_set_primary(addr);
  if (old[0] == '\0') {
    LOG(LOG_INFO, "Redis primary is %s (Sentinel master '%s')", addr, cfg->sentinel_master);
  } else if (strcmp(old, addr) == 0) {
    LOG(LOG_INFO, "Redis primary %s confirmed again by Sentinel", addr);
  } else {
    long long since = atomic_exchange(&e->trouble_since_ms, 0);
    redis_stats_inc(REDIS_STAT_FAILOVERS);
    LOG(LOG_WARN, "Redis primary switched from %s to %s (Sentinel master '%s'); lock calls "
                  "had been refused for %lld ms",
        old, addr, cfg->sentinel_master, since ? (long long)(clock_mono_ms() - since) : 0LL);
  }
  run_hooks();
}

void node_forget_primary(const char *why) {
  pthread_mutex_lock(&mu);
  int was = known;
  known = 0;
  if (was) atomic_fetch_add(&nodes[0].gen, 1);
  snprintf(unknown_why, sizeof unknown_why, "%s", why);
  pthread_mutex_unlock(&mu);
  if (!was) return;
  node_trouble(0);
  redis_stats_set_primary("");
  LOG(LOG_WARN, "%s; refusing lock calls until Sentinel names the primary", why);
  run_hooks();
}

/* 1 when calls to node id are under the sentinels' lease. */
static int leased(int id) {
  return id == 0 && !cluster_mode && cfg->sentinel_count > 0 && cfg->sentinel_lease;
}

void node_sentinel_lease(int64_t until, const char *why) {
  static int logged; /* the state last logged (under mu); none is at startup */
  int64_t now = clock_mono_ms();
  pthread_mutex_lock(&mu);
  int was = atomic_load(&lease_until) > now, is = until > now;
  if (!(was && is)) atomic_fetch_add(&lease_epoch, 1);
  atomic_store(&lease_until, until);
  snprintf(lease_why, sizeof lease_why, "%s", why);
  int changed = logged != is;
  logged = is;
  pthread_mutex_unlock(&mu);
  if (!cfg->sentinel_lease || !changed) return;
  if (is) LOG(LOG_INFO, "the sentinels confirm the primary: taking lock calls");
  else LOG(LOG_WARN, "refusing lock calls: the sentinels do not confirm the primary: %s", why);
}

int node_lease_check(int id, unsigned long *epoch, char *err, size_t errlen) {
  *epoch = 0;
  if (!leased(id)) return 1;
  int64_t until = atomic_load(&lease_until);
  *epoch = atomic_load(&lease_epoch);
  if (clock_mono_ms() < until) return 1;
  pthread_mutex_lock(&mu);
  int ok = !known; /* no primary at all: node_connect says so, which is the news */
  if (!ok) snprintf(err, errlen, "the sentinels do not confirm the primary now: %s", lease_why);
  pthread_mutex_unlock(&mu);
  return ok;
}

int node_current(int id, unsigned long gen, unsigned long epoch, char *err, size_t errlen) {
  if (node_generation(id) != gen) {
    snprintf(err, errlen, "the Redis primary changed during the call (failover); its outcome is "
                          "unknown: retry");
    return 0;
  }
  if (!leased(id)) return 1;
  int64_t until = atomic_load(&lease_until);
  if (clock_mono_ms() < until && atomic_load(&lease_epoch) == epoch) return 1;
  snprintf(err, errlen, "the sentinels' confirmation of the primary lapsed during the call (a "
                        "failover may be under way); its outcome is unknown: retry");
  return 0;
}

void node_sentinel_state(int reachable, const char *why) {
  pthread_mutex_lock(&mu);
  sentinel_reachable = reachable;
  snprintf(sentinel_why, sizeof sentinel_why, "%s", reachable ? "" : why);
  pthread_mutex_unlock(&mu);
}

/* ---- Cluster: the slot map ------------------------------------------ */

int node_moved(int slot, const char *h, int p) {
  int id = node_id_of(h, p);
  if (id >= 0) atomic_store(&slot_owner[slot], (unsigned char)id);
  kick();
  return id;
}

void node_set_slots(const node_range *ranges, int n) {
  unsigned char next[NODE_SLOTS];
  memset(next, SLOT_NONE, sizeof next);
  pthread_mutex_lock(&mu);
  for (int i = 0; i < n; i++) {
    int id = id_of_locked(ranges[i].host, ranges[i].port, next);
    if (id < 0) continue; /* the table is full: those slots stay unserved (logged below) */
    for (int s = ranges[i].first; s <= ranges[i].last && s < NODE_SLOTS; s++)
      next[s] = (unsigned char)id;
  }
  /* One log line per run of slots whose primary changed: a failover or a
   * migration, seen in the map (a MOVED may have repointed them first). */
  int first = last_addr[0] == '\0', changed = 0;
  for (int s = 0; s < NODE_SLOTS;) {
    int old = atomic_load(&slot_owner[s]), now = next[s], e = s;
    while (e + 1 < NODE_SLOTS && atomic_load(&slot_owner[e + 1]) == old && next[e + 1] == now) e++;
    if (old != now && !first) {
      changed = 1;
      char from[280] = "none", to[280] = "none";
      long long since = 0;
      if (old != SLOT_NONE) {
        snprintf(from, sizeof from, "%s:%d", nodes[old].host, nodes[old].port);
        since = atomic_load(&nodes[old].trouble_since_ms);
      }
      if (now != SLOT_NONE) snprintf(to, sizeof to, "%s:%d", nodes[now].host, nodes[now].port);
      if (since)
        LOG(LOG_WARN, "Redis Cluster slots %d-%d: primary is now %s (was %s, whose calls had "
                      "failed for %lld ms)", s, e, to, from, (long long)(clock_mono_ms() - since));
      else
        LOG(now == SLOT_NONE ? LOG_WARN : LOG_INFO,
            "Redis Cluster slots %d-%d: primary is now %s (was %s)", s, e, to, from);
    }
    s = e + 1;
  }
  for (int s = 0; s < NODE_SLOTS; s++) atomic_store(&slot_owner[s], next[s]);
  if (first) snprintf(last_addr, sizeof last_addr, "cluster");
  cluster_reachable = 1;
  cluster_why[0] = '\0';
  pthread_mutex_unlock(&mu);
  if (first) LOG(LOG_INFO, "Redis Cluster: slot map read, %d slot ranges", n);
  if (changed) redis_stats_inc(REDIS_STAT_CLUSTER_MAP_CHANGES);
}

void node_cluster_state(int reachable, const char *why) {
  pthread_mutex_lock(&mu);
  cluster_reachable = reachable;
  snprintf(cluster_why, sizeof cluster_why, "%s", reachable ? "" : why);
  pthread_mutex_unlock(&mu);
}

int node_map_sources(node_range *out, int max) {
  int n = 0;
  node_shard sh[NODE_MAX];
  int ns = node_shards(sh, NODE_MAX);
  pthread_mutex_lock(&mu);
  for (int i = 0; i < ns && n < max; i++, n++) {
    snprintf(out[n].host, sizeof out[n].host, "%s", nodes[sh[i].id].host);
    out[n].port = nodes[sh[i].id].port;
  }
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < cfg->cluster_seed_count && n < max; i++, n++) {
    snprintf(out[n].host, sizeof out[n].host, "%s", cfg->cluster_seeds[i].host);
    out[n].port = cfg->cluster_seeds[i].port;
  }
  return n;
}

/* ---- what /readyz says ---------------------------------------------- */

int node_shards(node_shard *out, int max) {
  if (!cluster_mode) {
    node_info i;
    node_describe(&i);
    if (i.primary[0] == '\0' || max < 1) return 0;
    out[0].id = 0;
    out[0].slots = NODE_SLOTS;
    snprintf(out[0].primary, sizeof out[0].primary, "%s", i.primary);
    return 1;
  }
  int n = 0, seen[NODE_MAX];
  memset(seen, -1, sizeof seen);
  pthread_mutex_lock(&mu);
  for (int s = 0; s < NODE_SLOTS; s++) {
    int id = atomic_load(&slot_owner[s]);
    if (id == SLOT_NONE) continue;
    if (seen[id] < 0) {
      if (n == max) continue;
      seen[id] = n;
      out[n].id = id;
      out[n].slots = 0;
      snprintf(out[n].primary, sizeof out[n].primary, "%s:%d", nodes[id].host, nodes[id].port);
      n++;
    }
    out[seen[id]].slots++;
  }
  pthread_mutex_unlock(&mu);
  return n;
}

void node_describe(node_info *out) {
  memset(out, 0, sizeof *out);
  out->cluster = -1;
  out->sentinel = -1;
  out->lease = -1;
  if (cluster_mode) {
    pthread_mutex_lock(&mu);
    out->cluster = cluster_reachable;
    snprintf(out->cluster_msg, sizeof out->cluster_msg, "%s", cluster_why);
    pthread_mutex_unlock(&mu);
    return;
  }
  if (cfg->sentinel_count == 0) {
    const redis_target *t = &cfg->redis;
    if (t->is_unix) snprintf(out->primary, sizeof out->primary, "%s", t->path);
    else snprintf(out->primary, sizeof out->primary, "%s:%d", t->host, t->port);
    return;
  }
  pthread_mutex_lock(&mu);
  if (known) snprintf(out->primary, sizeof out->primary, "%s:%d", nodes[0].host, nodes[0].port);
  out->sentinel = sentinel_reachable;
  snprintf(out->sentinel_msg, sizeof out->sentinel_msg, "%s", sentinel_why);
  out->lease = cfg->sentinel_lease ? clock_mono_ms() < atomic_load(&lease_until) : -1;
  if (out->lease == 0) snprintf(out->lease_msg, sizeof out->lease_msg, "%s", lease_why);
  pthread_mutex_unlock(&mu);
}

int node_init(const config *c) {
  cfg = c;
  crc_init();
  slot_tags_init();
  for (int i = 0; i < NODE_MAX; i++) atomic_store(&nodes[i].gen, 1);
  memset((void *)slot_owner, SLOT_NONE, sizeof slot_owner);
  cluster_mode = cfg->cluster_seed_count > 0;
  if (cluster_mode) {
    redis_stats_set_primary("");
    return 0;
  }
  if (cfg->sentinel_count == 0) {
    nodes[0].used = 1;
    snprintf(nodes[0].host, sizeof nodes[0].host, "%s", cfg->redis.is_unix ? "" : cfg->redis.host);
    nodes[0].port = cfg->redis.port;
    node_info i;
    node_describe(&i);
    redis_stats_set_primary(i.primary);
  }
  return 0;
}
