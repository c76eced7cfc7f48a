/* conn.c: the Redis store's connections, one hiredis context each. Each
 * thread that calls Redis owns one connection per node for direct calls
 * (a pthread key holds them); each HTTP event loop's pipe owns more
 * (pipe.c), which open and fail through the same functions here. No
 * connection is ever shared between threads.
 *
 * Opening one is a setup (conn_start): AUTH, SELECT, ROLE, the scripts of
 * proto/redis (SCRIPT LOAD; calls use EVALSHA) and an INFO, appended at
 * once. A direct connection waits for their replies (conn_ready); a
 * pipe's lane reads them as they come (lane.c), so no loop waits for a
 * connect. A broken connection is dropped and reopened on the next call,
 * with a capped backoff between failed attempts so a dead Redis costs each
 * request one fast 503, not a connect timeout. Every connect re-checks
 * maxmemory-policy, and so does a connection at rest once a second: an
 * evicting policy could delete a fence counter, which would break the one
 * promise picket makes. */
#include "conn.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "node.h"
#include "redis.h"
#include "stats.h"

#define POLICY_RECHECK_MS 1000

/* A thread's direct connections, one per node it has called (lazily). */
typedef struct {
  conn *by_node[NODE_MAX];
} thread_conns;

static pthread_key_t conn_key;
/* Per node. Bumped by every successful connect: when a node comes back,
 * the first thread to reach it lets all the others skip their backoff. */
static atomic_ulong connect_epoch[NODE_MAX];
/* Per node. Bumped by every lost or timed-out connection. A connection
 * opened before the last failure is reopened before its next use: when one
 * worker finds a node gone (a restart, or a middlebox that dropped every
 * connection without a word), the others do not each pay a timeout to
 * find out. */
static atomic_ulong failure_epoch[NODE_MAX];

void conn_close(conn *k) {
  if (k->c) redisFree(k->c);
  k->c = NULL;
}

static void conn_destroy(void *p) {
  thread_conns *t = p;
  for (int i = 0; i < NODE_MAX; i++)
    if (t->by_node[i]) {
      conn_close(t->by_node[i]);
      free(t->by_node[i]);
    }
  free(t);
}
/* The line "name..." (name ends with ':') of an INFO reply, or NULL. */
static const char *info_line(const char *info, const char *name) {
  size_t n = strlen(name);
  for (const char *p = info; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, name, n) == 0) return p + n;
  return NULL;
}

/* A number field of an INFO reply, or -1. */
long long conn_info_field(const char *info, const char *name) {
  const char *v = info_line(info, name);
  return v ? strtoll(v, NULL, 10) : -1;
}

/* Reads an INFO reply into *f and refreshes the memory and key gauges. */
static void info_parse(const redisReply *rep, info_facts *f) {
  f->policy[0] = f->err[0] = '\0';
  f->aof = -1;
  f->other_error = 0;
  if (rep->type == REDIS_REPLY_ERROR) {
    /* NOPERM: an ACL forbids INFO, so the policy stays unknown (refused
     * as evicting). Anything else says nothing of the policy. */
    f->other_error = strncmp(rep->str, "NOPERM", 6) != 0;
    snprintf(f->err, sizeof f->err, "%s", rep->str);
  }
  if (rep->type == REDIS_REPLY_STRING) {
    const char *v = info_line(rep->str, "maxmemory_policy:");
    if (v) snprintf(f->policy, sizeof f->policy, "%.*s", (int)strcspn(v, "\r\n"), v);
    f->aof = (int)conn_info_field(rep->str, "aof_enabled:");
    long long used = conn_info_field(rep->str, "used_memory:");
    if (used >= 0) redis_stats_set(REDIS_GAUGE_USED_MEMORY, (long)used);
    /* Keys of picketd's database ("db0:keys=12,expires=3,..."; no line
     * when it is empty). All its keys, not only picket's: counting only
     * those would need a SCAN of the whole keyspace (see docs/picketd.md). */
    char db[32];
    snprintf(db, sizeof db, "db%d:keys=", store_redis_cfg->redis.db);
    long long keys = conn_info_field(rep->str, db);
    redis_stats_set(REDIS_GAUGE_DB_KEYS, keys > 0 ? (long)keys : 0);
  }
}

/* Runs INFO on c, fills *f and refreshes the memory and key gauges.
 * Returns 0, or -1 when no reply came (the connection failed). */
int conn_info_read(redisContext *c, info_facts *f) {
  redisReply *rep = redisCommand(c, "INFO");
  if (rep == NULL) return -1;
  info_parse(rep, f);
  freeReplyObject(rep);
  return 0;
}

/* 1 when the policy may evict picket's keys: allkeys-* a fence counter
 * (that lock's fences restart), volatile-* a live lease (the lock frees
 * while its holder believes it holds it; on a Redis shared with a cache,
 * another application's memory pressure decides when). Both are refused
 * unless --allow-eviction. */
int conn_policy_evicts(const char *policy) { return strcmp(policy, "noeviction") != 0; }

/* The eviction verdict, one for the whole process: every connection and
 * every loop refuses lock calls while it is set. It was kept per
 * connection and checked only when one opened, so after a runtime CONFIG
 * SET maxmemory-policy allkeys-lru the keep-alive connections went on
 * granting until memory filled, the counters were evicted and fence 1 was
 * handed out again (issue 17). Now a connection at rest re-reads the
 * policy whenever POLICY_RECHECK_MS has passed since anyone last did (one
 * INFO a second for the process, which also refreshes the memory and key
 * gauges), and each connect does too. A policy picketd cannot read (INFO
 * refused) counts as evicting: nothing says it is not. */
static atomic_int evicting[NODE_MAX]; /* per node: a cluster's shards are checked each */
static atomic_llong policy_due_ms[NODE_MAX];

void conn_policy_reply(int id, const redisReply *rep) {
  info_facts f;
  atomic_store(&policy_due_ms[id], (long long)(clock_mono_ms() + POLICY_RECHECK_MS));
  info_parse(rep, &f);
  if (f.other_error) return; /* a transient refusal: the verdict stands */
  int bad = conn_policy_evicts(f.policy) && !store_redis_cfg->allow_eviction;
  int was = atomic_exchange(&evicting[id], bad);
  if (bad && !was && f.policy[0] == '\0')
    LOG(LOG_ERROR, "cannot read Redis maxmemory-policy (INFO refused, or it has no "
                   "maxmemory_policy): refusing locks (allow INFO, see deploy/users.acl, or "
                   "start with --allow-eviction)");
  else if (bad && !was)
    LOG(LOG_ERROR, "Redis maxmemory-policy is %s: it can evict fence counters or live leases; "
                   "refusing locks (set noeviction, or start with --allow-eviction)", f.policy);
  if (!bad && was) LOG(LOG_INFO, "Redis maxmemory-policy is now %s", f.policy);
}

void conn_check_policy(conn *k) {
  atomic_store(&policy_due_ms[k->node], (long long)(clock_mono_ms() + POLICY_RECHECK_MS));
  redisReply *rep = redisCommand(k->c, "INFO");
  if (rep == NULL) return; /* the connection failed: its next call finds out */
  conn_policy_reply(k->node, rep);
  freeReplyObject(rep);
}

int conn_policy_claim(int id) {
  atomic_llong *d = &policy_due_ms[id];
  long long due = atomic_load(d), now = (long long)clock_mono_ms();
  return now >= due && atomic_compare_exchange_strong(d, &due, now + POLICY_RECHECK_MS);
}

/* Re-reads the policy on k (which has no reply outstanding) when the
 * process's check is due; one connection takes each turn. */
void conn_policy_due(conn *k) {
  if (conn_policy_claim(k->node)) conn_check_policy(k);
}

/* A connection to node `id` (node.c finds it, authenticates and checks
 * it); NULL with r->err set. *gen gets its generation. */
redisContext *conn_open(int id, store_result *r, unsigned long *gen) {
  return node_connect(id, store_redis_cfg->redis_timeout_ms, gen, r->err, sizeof r->err);
}

int conn_script_reply(conn *k, int s, const redisReply *rep, store_result *r) {
  if (rep->type == REDIS_REPLY_ERROR) {
    snprintf(r->err, sizeof r->err, "Redis refused SCRIPT LOAD %s: %.150s", codec_script_name[s],
             rep->str);
    return -1;
  }
  if (rep->type != REDIS_REPLY_STRING || rep->len != 40) {
    set_err(r, "Redis gave an odd reply to SCRIPT LOAD %s", codec_script_name[s]);
    return -1;
  }
  memcpy(k->sha[s], rep->str, 41);
  return 0;
}

int conn_load_script(conn *k, int s, store_result *r) {
  redisReply *rep = redisCommand(k->c, "SCRIPT LOAD %s", codec_script_src[s]);
  if (rep == NULL) {
    set_err(r, "Redis connection failed: %s", k->c->errstr);
    return -1;
  }
  int ok = conn_script_reply(k, s, rep, r);
  freeReplyObject(rep);
  return ok;
}

/* 1 when the peer has closed the socket: readable with nothing to read
 * (a connection at rest has no pending bytes from Redis). */
static int peer_closed(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (poll(&p, 1, 0) <= 0) return 0;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return 1;
  char b;
  return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* A connect or a setup failed (r->err says why): no new attempt before
 * the backoff has passed, unless another thread reaches the node first. */
static void open_failed(conn *k, const store_result *r) {
  snprintf(k->last_err, sizeof k->last_err, "%.199s", r->err);
  k->seen_epoch = atomic_load(&connect_epoch[k->node]);
  k->next_try_ms = clock_mono_ms() + k->backoff_ms;
  k->backoff_ms = k->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : k->backoff_ms * 2;
}

void conn_setup_failed(conn *k, const store_result *r) {
  conn_close(k);
  open_failed(k, r);
}

int conn_opening(const conn *k) { return k->c != NULL && k->setup_next < k->setup_n; }

int conn_start(conn *k, int at_rest, int nonblock, store_result *r) {
  /* Under the sentinels' lease (node.h): none lapsed since the calls in
   * flight went out, or their replies will be refused anyway. */
  unsigned long epoch;
  if (!node_lease_check(k->node, &epoch, r->err, sizeof r->err)) return -1;
  if (at_rest) {
    k->lease_epoch = epoch;
  } else if (epoch != k->lease_epoch) {
    set_err(r, "the sentinels' confirmation of the primary lapsed while calls were in flight; "
               "retry%s", NULL);
    return -1;
  }
  if (k->c && at_rest && k->seen_failure != atomic_load(&failure_epoch[k->node])) {
    LOG(LOG_DEBUG, "another connection to Redis failed; reconnecting");
    conn_close(k);
  }
  if (k->c && k->gen != node_generation(k->node)) {
    /* Sentinel named a new primary: no call goes to the old one. (A pipe
     * with calls waiting has failed them before it gets here.) */
    LOG(LOG_DEBUG, "Redis primary changed; reconnecting");
    conn_close(k);
  }
  if (k->c) return conn_opening(k) ? 0 : 1;
  /* k->gen is the generation of the last attempt: a new primary is tried
   * at once, whatever the backoff from failures against the old one. */
  if (clock_mono_ms() < k->next_try_ms &&
      k->seen_epoch == atomic_load(&connect_epoch[k->node]) && k->gen == node_generation(k->node)) {
    /* the reason of the last attempt, which may be this call's first
     * sight of it (a loop's pipe connects at start) */
    snprintf(r->err, sizeof r->err, "%s (retrying)", k->last_err);
    return -1;
  }
  k->seen_failure = atomic_load(&failure_epoch[k->node]);
  k->c = node_connect_start(k->node, nonblock ? 0 : store_redis_cfg->redis_timeout_ms, &k->gen,
                            &k->setup, r->err, sizeof r->err);
  if (k->c == NULL) {
    open_failed(k, r);
    return -1;
  }
  k->starts++;
  int ok = REDIS_OK;
  for (int s = 0; ok == REDIS_OK && s < SCRIPT_COUNT; s++)
    ok = redisAppendCommand(k->c, "SCRIPT LOAD %s", codec_script_src[s]);
  /* Every connect re-reads maxmemory-policy (see conn_check_policy). */
  if (ok == REDIS_OK) ok = redisAppendCommand(k->c, "INFO");
  if (ok != REDIS_OK) {
    set_err(r, "Redis connection failed: out of memory%s", NULL);
    conn_setup_failed(k, r);
    return -1;
  }
  k->setup_next = 0;
  k->setup_n = k->setup.n + SCRIPT_COUNT + 1;
  return 0;
}

int conn_setup_reply(conn *k, const redisReply *rep, store_result *r) {
  int i = k->setup_next++, n = k->setup.n, ok = 0;
  if (i < n) ok = node_setup_reply(&k->setup, rep, r->err, sizeof r->err);
  else if (i < n + SCRIPT_COUNT) ok = conn_script_reply(k, i - n, rep, r);
  else conn_policy_reply(k->node, rep);
  if (ok < 0) {
    conn_setup_failed(k, r);
    return -1;
  }
  if (k->setup_next < k->setup_n) return 0;
  k->backoff_ms = BACKOFF_MIN_MS;
  k->next_try_ms = 0;
  k->opens++;
  atomic_fetch_add(&connect_epoch[k->node], 1);
  redis_stats_inc(REDIS_STAT_RECONNECTS);
  LOG(LOG_DEBUG, "Redis connection opened");
  return 1;
}

conn *conn_ready(conn *k, int at_rest, store_result *r) {
  int st = conn_start(k, at_rest, 0, r);
  while (st == 0) {
    redisReply *rep = NULL;
    if (redisGetReply(k->c, (void **)&rep) != REDIS_OK) {
      set_err(r, "Redis connection failed: %s", k->c->errstr);
      conn_setup_failed(k, r);
      return NULL;
    }
    st = conn_setup_reply(k, rep, r);
    freeReplyObject(rep);
  }
  return st > 0 ? k : NULL;
}

/* A new connection slot for node `id`, not connected yet; NULL (r->err
 * set) when out of memory. */
static conn *conn_new(int id, store_result *r) {
  conn *k = calloc(1, sizeof *k);
  if (k == NULL) {
    set_err(r, "out of memory%s", NULL);
    return NULL;
  }
  k->node = id;
  k->backoff_ms = BACKOFF_MIN_MS;
  return k;
}

/* The calling thread's connection to node `id` for direct calls, (re)opened
 * as needed; NULL with r->err set when the node cannot be reached now. */
conn *conn_get(int id, store_result *r) {
  thread_conns *t = pthread_getspecific(conn_key);
  if (t == NULL) {
    if ((t = calloc(1, sizeof *t)) == NULL) {
      set_err(r, "out of memory%s", NULL);
      return NULL;
    }
    pthread_setspecific(conn_key, t);
  }
  conn *k = t->by_node[id];
  if (k == NULL && (k = t->by_node[id] = conn_new(id, r)) == NULL) return NULL;
  if (k->c && peer_closed(k->c->fd)) {
    /* Redis closed this idle connection (restart, CLIENT KILL, timeout):
     * reconnect now instead of failing the request that finds out. (A
     * pipe's connection needs no probe: its loop watches it, and reads
     * the close as it comes.) */
    LOG(LOG_DEBUG, "Redis closed an idle connection; reconnecting");
    conn_close(k);
  }
  return conn_ready(k, 1, r);
}
/* Why k's last command failed at the transport level. */
void conn_transport_reason(const conn *k, store_result *r) {
  if (k->c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
    snprintf(r->err, sizeof r->err, "Redis timed out after %lld ms",
             (long long)store_redis_cfg->redis_timeout_ms);
  else
    set_err(r, "Redis connection lost: %s", k->c->errstr);
}

/* Drops k after a transport failure or a timeout (a timed-out connection
 * may still deliver the old reply), and has every other connection reopen
 * before its next call. */
void conn_lost(conn *k) {
  conn_close(k);
  node_trouble(k->node);
  atomic_fetch_add(&failure_epoch[k->node], 1);
  redis_stats_up(0);
}

/* A reply that came in after Sentinel named a new primary, or after the
 * sentinels' lease on the primary lapsed (node_current set r->err): the
 * node that sent it may be a replica now, or about to be one, and whatever
 * it granted or renewed there may be gone from the new primary. It is not
 * passed on; the caller gets 503 and retries (a same-lease retry of
 * acquire is idempotent). Frees rep. */
store_status conn_primary_moved(conn *k, redisReply *rep, store_result *r) {
  freeReplyObject(rep);
  conn_close(k);
  redis_stats_inc(REDIS_STAT_ERR_UNAVAILABLE);
  return STORE_EUNAVAIL;
}

store_status conn_transport_error(conn *k, store_result *r) {
  conn_transport_reason(k, r);
  conn_lost(k);
  redis_stats_inc(REDIS_STAT_ERR_UNAVAILABLE);
  return STORE_EUNAVAIL;
}
void conn_bind(op_command *cmd, const conn *k, const store_op *op) {
  cmd->argv[1] = k->sha[codec_script_of(op)];
}

conn *conn_admit(conn *k, int id, store_result *r, store_status *st) {
  if (k == NULL) {
    redis_stats_inc(REDIS_STAT_ERR_UNAVAILABLE);
    redis_stats_up(0);
    *st = STORE_EUNAVAIL;
    return NULL;
  }
  if (conn_evicting(id)) {
    set_err(r, "Redis maxmemory-policy evicts keys; fences are unsafe, so no lock calls%s", NULL);
    redis_stats_inc(REDIS_STAT_ERR_MISCONFIGURED);
    *st = STORE_EMISCONF;
    return NULL;
  }
  return k;
}

conn *conn_for_calls(int id, store_result *r, store_status *st) {
  conn *k = conn_get(id, r);
  if (k) conn_policy_due(k);
  return conn_admit(k, id, r, st);
}

int conn_evicting(int id) { return atomic_load(&evicting[id]); }

conn *conn_current(int id) {
  thread_conns *t = pthread_getspecific(conn_key);
  return t ? t->by_node[id] : NULL;
}

int conn_init(void) { return pthread_key_create(&conn_key, conn_destroy) == 0 ? 0 : -1; }

void conn_thread_done(void) {
  thread_conns *t = pthread_getspecific(conn_key);
  if (t) {
    pthread_setspecific(conn_key, NULL);
    conn_destroy(t);
  }
}
