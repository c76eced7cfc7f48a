/* store_redis.c: the lock store on Redis (store.h), reached through the
 * backend table at the end of this file (store/backend.h).
 *
 * Each thread that calls Redis owns one hiredis connection for direct
 * calls (a pthread key holds it), and each HTTP event loop owns one more
 * for its pipelined calls (a store_pipe, end of this file). No connection
 * is ever shared between threads. All lock
 * logic runs inside the Lua scripts of proto/redis, embedded at build time:
 * they are loaded with SCRIPT LOAD when a connection opens and called with
 * EVALSHA; NOSCRIPT (Redis restarted or SCRIPT FLUSH) reloads and retries
 * once. A broken connection is dropped and reopened on the next call, with
 * a capped backoff between failed attempts so a dead Redis costs each
 * request one fast 503, not a connect timeout. Every connect re-checks
 * maxmemory-policy: an evicting policy could delete a fence counter, which
 * would break the one promise picket makes. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cursor.h"
#include "log.h"
#include "metrics.h"
#include "cluster.h"
#include "feed.h"
#include "node.h"
#include "sentinel.h"
#include "backend.h"

enum { SCRIPT_ACQUIRE, SCRIPT_RENEW, SCRIPT_RELEASE, SCRIPT_INSPECT, SCRIPT_QUOTA, SCRIPT_SEM,
       SCRIPT_SEM_INSPECT, SCRIPT_RW, SCRIPT_RW_INSPECT, SCRIPT_LIST, SCRIPT_BREAK, SCRIPT_WATCH,
       SCRIPT_COUNT };

static const char *const script_src[SCRIPT_COUNT] = {
    picket_proto_lua_acquire, picket_proto_lua_renew,     picket_proto_lua_release,
    picket_proto_lua_inspect, picket_proto_lua_quota,     picket_proto_lua_semaphore,
    picket_proto_lua_sem_inspect, picket_proto_lua_rwlock, picket_proto_lua_rw_inspect,
    picket_proto_lua_list, picket_proto_lua_break, picket_proto_lua_watch};
static const char *const script_name[SCRIPT_COUNT] = {
    "acquire", "renew", "release", "inspect", "quota", "semaphore", "sem_inspect", "rwlock",
    "rw_inspect", "list", "break", "watch"};

#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 250 /* so a returning Redis is found well within 1 s */
#define POLICY_RECHECK_MS 1000
#define KEY_MAX (PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 16)

typedef struct {
  redisContext *c;
  int node;             /* the node table's id of the node it goes to */
  char sha[SCRIPT_COUNT][41];
  int64_t next_try_ms;  /* no reconnect before this (backoff)... */
  unsigned long seen_epoch; /* ...unless another thread connected since */
  unsigned long seen_failure; /* failure_epoch when this connection opened */
  int64_t backoff_ms;
  unsigned long opens;  /* successful connects */
  unsigned long gen;    /* the node table's generation at the last connect attempt */
  unsigned long lease_epoch; /* the primary lease's epoch its calls went out under */
  char last_err[200];   /* why the last connect failed */
} conn;

/* A thread's direct connections, one per node it has called (lazily). */
typedef struct {
  conn *by_node[NODE_MAX];
} thread_conns;

static const config *cfg;
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
static char channel[PICKET_PROTO_KEY_PREFIX_MAX + 16];
/* The scripts' fence arguments, fixed by the config: --fence-floor and
 * --fence-idle-ttl-ms as the scripts take them (acquire.lua). */
static const char *floor_arg;
static char idle_arg[24];

static void set_err(store_result *r, const char *fmt, const char *detail) {
  snprintf(r->err, sizeof r->err, fmt, detail ? detail : "");
}

static void conn_close(conn *k) {
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

static struct timeval ms_tv(int64_t ms) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
  return tv;
}

/* A command on a fresh connection during setup; NULL (and the reason in r)
 * when it fails at the transport level or Redis answers with an error. */
static redisReply *setup_cmd(redisContext *c, store_result *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *rep = redisvCommand(c, fmt, ap);
  va_end(ap);
  if (rep == NULL) {
    set_err(r, "Redis connection failed: %s", c->errstr);
    return NULL;
  }
  if (rep->type == REDIS_REPLY_ERROR) {
    set_err(r, "Redis refused setup: %s", rep->str);
    freeReplyObject(rep);
    return NULL;
  }
  return rep;
}

/* The line "name..." (name ends with ':') of an INFO reply, or NULL. */
static const char *info_line(const char *info, const char *name) {
  size_t n = strlen(name);
  for (const char *p = info; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, name, n) == 0) return p + n;
  return NULL;
}

/* A number field of an INFO reply, or -1. */
static long long info_field(const char *info, const char *name) {
  const char *v = info_line(info, name);
  return v ? strtoll(v, NULL, 10) : -1;
}

/* What picketd reads from one INFO (all default sections: memory,
 * persistence, keyspace; one reply of a few KiB). INFO, not CONFIG GET:
 * a least-privilege ACL user (deploy/users.acl) cannot be granted CONFIG
 * GET safely, since it also reads requirepass and masterauth. */
typedef struct {
  char policy[64]; /* maxmemory_policy, "" when INFO was refused or lacks it */
  int aof;         /* aof_enabled: 1, 0, or -1 unknown */
  int other_error; /* INFO failed for another reason than an ACL (NOAUTH, LOADING...) */
  char err[160];   /* ...and how */
} info_facts;

/* Runs INFO on c, fills *f and refreshes the memory and key gauges.
 * Returns 0, or -1 when no reply came (the connection failed). */
static int info_read(redisContext *c, info_facts *f) {
  f->policy[0] = f->err[0] = '\0';
  f->aof = -1;
  f->other_error = 0;
  redisReply *rep = redisCommand(c, "INFO");
  if (rep == NULL) return -1;
  if (rep->type == REDIS_REPLY_ERROR) {
    /* NOPERM: an ACL forbids INFO, so the policy stays unknown (refused
     * as evicting). Anything else says nothing of the policy. */
    f->other_error = strncmp(rep->str, "NOPERM", 6) != 0;
    snprintf(f->err, sizeof f->err, "%s", rep->str);
  }
  if (rep->type == REDIS_REPLY_STRING) {
    const char *v = info_line(rep->str, "maxmemory_policy:");
    if (v) snprintf(f->policy, sizeof f->policy, "%.*s", (int)strcspn(v, "\r\n"), v);
    f->aof = (int)info_field(rep->str, "aof_enabled:");
    long long used = info_field(rep->str, "used_memory:");
    if (used >= 0) metrics_gauge_set(G_REDIS_USED_MEMORY, (long)used);
    /* Keys of picketd's database ("db0:keys=12,expires=3,..."; no line
     * when it is empty). All its keys, not only picket's: counting only
     * those would need a SCAN of the whole keyspace (see docs/picketd.md). */
    char db[32];
    snprintf(db, sizeof db, "db%d:keys=", cfg->redis.db);
    long long keys = info_field(rep->str, db);
    metrics_gauge_set(G_REDIS_DB_KEYS, keys > 0 ? (long)keys : 0);
  }
  freeReplyObject(rep);
  return 0;
}

/* 1 when the policy may evict picket's keys: allkeys-* a fence counter
 * (that lock's fences restart), volatile-* a live lease (the lock frees
 * while its holder believes it holds it; on a Redis shared with a cache,
 * another application's memory pressure decides when). Both are refused
 * unless --allow-eviction. */
static int policy_evicts(const char *policy) { return strcmp(policy, "noeviction") != 0; }

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

static void check_policy(conn *k) {
  info_facts f;
  atomic_store(&policy_due_ms[k->node], (long long)(clock_mono_ms() + POLICY_RECHECK_MS));
  /* The connection failed (its next call finds out), or a transient
   * refusal: the verdict stands. */
  if (info_read(k->c, &f) < 0 || f.other_error) return;
  int bad = policy_evicts(f.policy) && !cfg->allow_eviction;
  int was = atomic_exchange(&evicting[k->node], bad);
  if (bad && !was && f.policy[0] == '\0')
    LOG(LOG_ERROR, "cannot read Redis maxmemory-policy (INFO refused, or it has no "
                   "maxmemory_policy): refusing locks (allow INFO, see deploy/users.acl, or "
                   "start with --allow-eviction)");
  else if (bad && !was)
    LOG(LOG_ERROR, "Redis maxmemory-policy is %s: it can evict fence counters or live leases; "
                   "refusing locks (set noeviction, or start with --allow-eviction)", f.policy);
  if (!bad && was) LOG(LOG_INFO, "Redis maxmemory-policy is now %s", f.policy);
}

/* Re-reads the policy on k (which has no reply outstanding) when the
 * process's check is due; one connection takes each turn. */
static void policy_due(conn *k) {
  atomic_llong *d = &policy_due_ms[k->node];
  long long due = atomic_load(d), now = (long long)clock_mono_ms();
  if (now >= due && atomic_compare_exchange_strong(d, &due, now + POLICY_RECHECK_MS))
    check_policy(k);
}

/* A connection to node `id` (node.c finds it, authenticates and checks
 * it); NULL with r->err set. *gen gets its generation. */
static redisContext *redis_open(int id, store_result *r, unsigned long *gen) {
  return node_connect(id, cfg->redis_timeout_ms, gen, r->err, sizeof r->err);
}

static int load_script(conn *k, int s, store_result *r) {
  redisReply *rep = setup_cmd(k->c, r, "SCRIPT LOAD %s", script_src[s]);
  if (rep == NULL) return -1;
  int ok = rep->type == REDIS_REPLY_STRING && rep->len == 40;
  if (ok) memcpy(k->sha[s], rep->str, 41);
  else set_err(r, "Redis gave an odd reply to SCRIPT LOAD %s", script_name[s]);
  freeReplyObject(rep);
  return ok ? 0 : -1;
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

/* Opens k if it is closed (or must be reopened); NULL with r->err set when
 * Redis cannot be reached now. `at_rest`: k has no replies outstanding, so
 * it may be reopened after another connection's failure. */
static conn *conn_ready(conn *k, int at_rest, store_result *r) {
  /* Under the sentinels' lease (node.h): none lapsed since the calls in
   * flight went out, or their replies will be refused anyway. */
  unsigned long epoch;
  if (!node_lease_check(k->node, &epoch, r->err, sizeof r->err)) return NULL;
  if (at_rest) {
    k->lease_epoch = epoch;
  } else if (epoch != k->lease_epoch) {
    set_err(r, "the sentinels' confirmation of the primary lapsed while calls were in flight; "
               "retry%s", NULL);
    return NULL;
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
  if (k->c) return k;
  int64_t now = clock_mono_ms();
  /* k->gen is the generation of the last attempt: a new primary is tried
   * at once, whatever the backoff from failures against the old one. */
  if (now < k->next_try_ms && k->seen_epoch == atomic_load(&connect_epoch[k->node]) &&
      k->gen == node_generation(k->node)) {
    /* the reason of the last attempt, which may be this call's first
     * sight of it (a loop's pipe connects at start) */
    snprintf(r->err, sizeof r->err, "%s (retrying)", k->last_err);
    return NULL;
  }
  k->seen_failure = atomic_load(&failure_epoch[k->node]);
  k->c = redis_open(k->node, r, &k->gen);
  for (int s = 0; k->c && s < SCRIPT_COUNT; s++)
    if (load_script(k, s, r) < 0) conn_close(k);
  if (k->c == NULL) {
    snprintf(k->last_err, sizeof k->last_err, "%.199s", r->err);
    k->seen_epoch = atomic_load(&connect_epoch[k->node]);
    k->next_try_ms = now + k->backoff_ms;
    k->backoff_ms = k->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : k->backoff_ms * 2;
    return NULL;
  }
  k->backoff_ms = BACKOFF_MIN_MS;
  k->next_try_ms = 0;
  k->opens++;
  atomic_fetch_add(&connect_epoch[k->node], 1);
  check_policy(k);
  metrics_inc(M_REDIS_RECONNECTS);
  LOG(LOG_DEBUG, "Redis connection opened");
  return k;
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
static conn *conn_get(int id, store_result *r) {
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

/* A refusal repeats on every call to that lock until someone fixes the
 * counter, so its log line is kept to one a second (with a count of the
 * lines left out); a repair happens once and is always logged. */
static void tamper_log_refused(const char *msg) {
  static atomic_llong next_ms;
  static atomic_long skipped;
  long long now = (long long)clock_mono_ms(), due = atomic_load(&next_ms);
  if (now < due || !atomic_compare_exchange_strong(&next_ms, &due, now + 1000)) {
    atomic_fetch_add(&skipped, 1);
    return;
  }
  long n = atomic_exchange(&skipped, 0);
  LOG(LOG_ERROR, "refusing a lock call: %s (%ld more refusals since the last such line)", msg, n);
}

/* A script's tamper element (counter.lua's guard): "" when the counter was
 * sound, else why it was repaired. Counts and logs a repair. */
static void tamper_repaired(const store_op *op, const redisReply *e) {
  if (e->type != REDIS_REPLY_STRING || e->len == 0) return;
  const char *why = strcmp(e->str, "missing") == 0 ? "was missing (deleted)"
                    : strcmp(e->str, "below") == 0 ? "was below the live grant's fence"
                    : "held a value that is not a count";
  metrics_inc(M_FENCE_TAMPERED_REPAIRED);
  LOG(LOG_WARN, "lock %s: its fence counter %s (another writer on this Redis changed it); "
                "repaired in the same script, so the next fence is above every fence picketd "
                "knows of", op->name, why);
}

/* Sorts an error reply of node `node` into unavailable (retry later) or a
 * real error. */
static store_status error_reply(int node, const char *msg, store_result *r) {
  static const char *const transient[] = {"LOADING", "BUSY", "READONLY", "MASTERDOWN",
                                          "TRYAGAIN", "CLUSTERDOWN", "MOVED ", "ASK ", NULL};
  char clean[200];
  snprintf(clean, sizeof clean, "%s", msg);
  char *script = strstr(clean, " script:");
  if (script) *script = '\0'; /* drop Redis's "script: <sha>, on @user_script:N." */
  static const char counter[] = "PICKET_COUNTER "; /* acquire.lua: no fence left */
  if (strncmp(clean, counter, sizeof counter - 1) == 0) {
    set_err(r, "%s", clean + sizeof counter - 1);
    metrics_inc(M_REDIS_ERR_REPLY);
    return STORE_EREPLY;
  }
  static const char tampered[] = "PICKET_TAMPERED "; /* no certain repair (counter.lua) */
  if (strncmp(clean, tampered, sizeof tampered - 1) == 0) {
    set_err(r, "%s", clean + sizeof tampered - 1);
    metrics_inc(M_FENCE_TAMPERED_REFUSED);
    tamper_log_refused(r->err);
    return STORE_ETAMPERED;
  }
  if (!node_is_cluster() && (strncmp(msg, "MOVED ", 6) == 0 || strncmp(msg, "ASK ", 4) == 0 ||
                             strncmp(msg, "CROSSSLOT ", 10) == 0)) {
    /* --redis (or Sentinel) names a node of a Redis Cluster: the lock's
     * slot is elsewhere (MOVED), or its keys and the one index of held
     * names are in different slots (CROSSSLOT), as they are outside a
     * cluster. */
    snprintf(r->err, sizeof r->err, "Redis is a Redis Cluster node and the lock's keys are in "
             "slots apart (%.80s): start picketd with --redis-cluster", clean);
    metrics_inc(M_REDIS_ERR_MISCONFIGURED);
    return STORE_EMISCONF;
  }
  if (strncmp(msg, "OOM", 3) == 0) {
    /* maxmemory with noeviction: a 503 the operator can act on (and
     * /readyz says so), not a 502 as if the request were wrong. */
    set_err(r, "Redis is at its maxmemory, out of memory: %s", clean);
    metrics_inc(M_REDIS_ERR_FULL);
    return STORE_EFULL;
  }
  for (int i = 0; transient[i]; i++)
    if (strncmp(msg, transient[i], strlen(transient[i])) == 0) {
      node_trouble(node); /* READONLY: a demoted primary; LOADING: a restarted one */
      set_err(r, "Redis cannot serve now: %s", clean);
      metrics_inc(M_REDIS_ERR_UNAVAILABLE);
      return STORE_EUNAVAIL;
    }
  set_err(r, "Redis error: %s", clean);
  metrics_inc(M_REDIS_ERR_REPLY);
  return STORE_EREPLY;
}

/* Why k's last command failed at the transport level. */
static void transport_reason(const conn *k, store_result *r) {
  if (k->c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
    snprintf(r->err, sizeof r->err, "Redis timed out after %lld ms",
             (long long)cfg->redis_timeout_ms);
  else
    set_err(r, "Redis connection lost: %s", k->c->errstr);
}

/* Drops k after a transport failure or a timeout (a timed-out connection
 * may still deliver the old reply), and has every other connection reopen
 * before its next call. */
static void conn_lost(conn *k) {
  conn_close(k);
  node_trouble(k->node);
  atomic_fetch_add(&failure_epoch[k->node], 1);
  metrics_gauge_set(G_REDIS_UP, 0), metrics_gauge_set(G_STORE_UP, 0);
}

/* A reply that came in after Sentinel named a new primary, or after the
 * sentinels' lease on the primary lapsed (node_current set r->err): the
 * node that sent it may be a replica now, or about to be one, and whatever
 * it granted or renewed there may be gone from the new primary. It is not
 * passed on; the caller gets 503 and retries (a same-lease retry of
 * acquire is idempotent). Frees rep. */
static store_status primary_moved(conn *k, redisReply *rep, store_result *r) {
  freeReplyObject(rep);
  conn_close(k);
  metrics_inc(M_REDIS_ERR_UNAVAILABLE);
  return STORE_EUNAVAIL;
}

static store_status transport_error(conn *k, store_result *r) {
  transport_reason(k, r);
  conn_lost(k);
  metrics_inc(M_REDIS_ERR_UNAVAILABLE);
  return STORE_EUNAVAIL;
}

/* ---- one call: its command and its reply ----------------------------- */

static const int op_script[] = {
    [STORE_OP_ACQUIRE] = SCRIPT_ACQUIRE,   [STORE_OP_RENEW] = SCRIPT_RENEW,
    [STORE_OP_RELEASE] = SCRIPT_RELEASE,   [STORE_OP_INSPECT] = SCRIPT_INSPECT,
    [STORE_OP_SEM_ACQUIRE] = SCRIPT_SEM,   [STORE_OP_SEM_RENEW] = SCRIPT_SEM,
    [STORE_OP_SEM_RELEASE] = SCRIPT_SEM,   [STORE_OP_SEM_INSPECT] = SCRIPT_SEM_INSPECT,
    [STORE_OP_RW_ACQUIRE] = SCRIPT_RW,     [STORE_OP_RW_RENEW] = SCRIPT_RW,
    [STORE_OP_RW_RELEASE] = SCRIPT_RW,     [STORE_OP_RW_INSPECT] = SCRIPT_RW_INSPECT,
    [STORE_OP_RW_FORGET] = SCRIPT_RW,      [STORE_OP_BREAK] = SCRIPT_BREAK,
    [STORE_OP_LIST] = SCRIPT_LIST,         [STORE_OP_WATCH] = SCRIPT_WATCH};

/* ---- a token's lease count (proto/redis/leases.lua) --------------------
 *
 * On one Redis the lock scripts keep it: the token's key is their third
 * key, and the call stays one EVALSHA. Under Redis Cluster that key is in
 * the token's slot, which one script cannot reach together with the
 * lock's, so an op goes through phases: an acquire first takes the count
 * (quota.lua, on the token's slot), then makes the call; an update after
 * the call (touch after a renew, drop after a release or a failed grant)
 * is an op of its own, sent once the call's reply is in, and its failure
 * is only logged: the entry expires with the lease it counts. */
enum { PHASE_CALL = 0, PHASE_TAKE, PHASE_NOTE, PHASE_WAIT /* a pipe's WAIT entry, not a call */ };

static int quota_counted(const store_op *op) {
  return op->token && op->max_leases > 0 && store_op_base(op->kind) != STORE_OP_INSPECT;
}
static int quota_apart(const store_op *op) { return quota_counted(op) && node_is_cluster(); }

static int op_script_of(const store_op *op) {
  return op->phase == PHASE_CALL ? op_script[op->kind] : SCRIPT_QUOTA;
}

/* The first phase of op, before its first send. */
static void phase_begin(store_op *op) {
  op->phase =
      quota_apart(op) && store_op_base(op->kind) == STORE_OP_ACQUIRE ? PHASE_TAKE : PHASE_CALL;
  op->quota_added = 0;
}

/* After a take: 1 when the call itself goes out next (op->phase moved on). */
static int phase_take_done(store_op *op) {
  if (op->phase != PHASE_TAKE || op->st != STORE_OK) return 0;
  op->phase = PHASE_CALL;
  return 1;
}

/* The count update op's outcome calls for once it is complete: "touch",
 * "drop", or NULL for none (or when the scripts keep the count). */
static const char *phase_note_of(const store_op *op) {
  if (op->phase != PHASE_CALL || !quota_apart(op)) return NULL;
  switch (store_op_base(op->kind)) {
    case STORE_OP_ACQUIRE: return op->st != STORE_OK && op->quota_added ? "drop" : NULL;
    case STORE_OP_RENEW: return op->st == STORE_OK ? "touch" : NULL;
    case STORE_OP_RELEASE: return op->st == STORE_OK ? "drop" : NULL;
    default: return NULL;
  }
}

static void note_failed(const store_op *note) {
  LOG(LOG_WARN, "token '%s': lease count of %s not updated (%s): it expires with the lease",
      note->token, note->name, note->r.err);
}

/* The EVALSHA command of one call; the strings live in the struct. */
typedef struct {
  const char *argv[24];
  int argc;
  char lease_key[KEY_MAX], fence_key[KEY_MAX], token_key[KEY_MAX], ttl[24], max[24];
  char delay[24], cap[24];
  char member[PICKET_PROTO_NAME_MAX + PICKET_PROTO_LEASE_LEN + 8]; /* in a token's count */
  char limit[24], wake[PICKET_PROTO_NAME_MAX + 8], wait[24], readers[24];
  char index_key[KEY_MAX], look[24];
} op_command;

/* The index of held names (proto/redis/list.lua) that name's keys go
 * with: P:index on one Redis; under Redis Cluster the index of the hash
 * slot (name NULL: of index_slot), in that slot. */
static void index_key_build(char out[KEY_MAX], const char *name, int index_slot) {
  if (!node_is_cluster()) {
    snprintf(out, KEY_MAX, "%sindex", cfg->key_prefix);
    return;
  }
  int slot = index_slot;
  if (name) {
    char tag[PICKET_PROTO_NAME_MAX + 3];
    int n = snprintf(tag, sizeof tag, "{%s}", name);
    slot = node_key_slot(tag, (size_t)n);
  }
  snprintf(out, KEY_MAX, "%s{%s}:index", cfg->key_prefix, node_slot_tag(slot));
}

/* What a lease is counted as in its token's lease count: a lock's name; a
 * permit's "s/NAME/LEASE", a read/write lease's "r/NAME/LEASE" ('/' is no
 * name byte: never a lock's). */
static void quota_member(const store_op *op, op_command *cmd) {
  if (op->kind < STORE_OP_SEM_ACQUIRE)
    snprintf(cmd->member, sizeof cmd->member, "%s", op->name);
  else
    snprintf(cmd->member, sizeof cmd->member, "%c/%s/%s",
             op->kind >= STORE_OP_RW_ACQUIRE ? 'r' : 's', op->name, op->lease ? op->lease : "");
}

/* A semaphore's or a read/write lock's call: semaphore.lua or rwlock.lua
 * (base; verb, lease, ttl, owner, floor, idle, delay, cap, limit or mode,
 * max, member, channel, wake[, wait]) or their inspect (base; listed). 0,
 * or -1 when the name cannot make a key. */
static int family_command_build(const store_op *op, op_command *cmd, int inline_quota) {
  const char **a = cmd->argv;
  int n = 2, rw = op->kind >= STORE_OP_RW_ACQUIRE;
  if ((rw ? picket_proto_key_rw : picket_proto_key_sem)(cmd->lease_key, KEY_MAX, cfg->key_prefix,
                                                        op->name) < 0)
    return -1;
  snprintf(cmd->limit, sizeof cmd->limit, "%lld", (long long)op->limit);
  if (store_op_base(op->kind) == STORE_OP_INSPECT && op->kind != STORE_OP_RW_FORGET) {
    a[n++] = "1", a[n++] = cmd->lease_key, a[n++] = cmd->limit;
    cmd->argc = n;
    return 0;
  }
  static const char *const verbs[] = {"acquire", "renew", "release"};
  snprintf(cmd->delay, sizeof cmd->delay, "%lld", (long long)op->lock_delay_ms);
  snprintf(cmd->cap, sizeof cmd->cap, "%lld", (long long)op->max_hold_ms);
  snprintf(cmd->wake, sizeof cmd->wake, "%c/%s", rw ? 'r' : 's', op->name);
  snprintf(cmd->wait, sizeof cmd->wait, "%lld", (long long)op->wait_ms);
  snprintf(cmd->readers, sizeof cmd->readers, "%lld", (long long)cfg->max_readers);
  index_key_build(cmd->index_key, op->name, 0);
  a[n++] = inline_quota ? "3" : "2", a[n++] = cmd->lease_key, a[n++] = cmd->index_key;
  if (inline_quota) a[n++] = cmd->token_key;
  /* (a forget is kind 12, 0 mod 4: it names its own verb) */
  a[n++] = op->kind == STORE_OP_RW_FORGET ? "forget" : verbs[op->kind % 4], a[n++] = op->lease;
  a[n++] = cmd->ttl, a[n++] = op->owner ? op->owner : "", a[n++] = floor_arg;
  a[n++] = idle_arg, a[n++] = cmd->delay, a[n++] = cmd->cap;
  a[n++] = rw ? (op->write ? "write" : "read") : cmd->limit;
  a[n++] = inline_quota ? cmd->max : "0", a[n++] = cmd->member, a[n++] = channel;
  a[n++] = cmd->wake;
  if (rw) a[n++] = cmd->wait, a[n++] = cmd->readers;
  cmd->argc = n;
  return 0;
}

/* Fills cmd for op; -1 when the name cannot make a key. The script's SHA
 * (argv[1]) is the connection's: cmd_bind sets it once one is chosen.
 * cmd->lease_key is the key the call is routed by (the token's key in a
 * quota phase): every key of one call shares its hash tag, except the
 * token's key outside a cluster, where slots do not matter. */
static int op_command_build(const store_op *op, op_command *cmd) {
  int quota = quota_counted(op);
  if (quota && picket_proto_key_token_leases(cmd->token_key, KEY_MAX, cfg->key_prefix,
                                             op->token) < 0)
    return -1;
  snprintf(cmd->ttl, sizeof cmd->ttl, "%lld", (long long)op->ttl_ms);
  if (quota) snprintf(cmd->max, sizeof cmd->max, "%lld", (long long)op->max_leases);
  const char **a = cmd->argv;
  int n = 0;
  a[n++] = "EVALSHA";
  a[n++] = NULL; /* cmd_bind */
  quota_member(op, cmd);
  if (op->phase != PHASE_CALL) { /* quota.lua (token_key; verb, member, ttl, max) */
    memcpy(cmd->lease_key, cmd->token_key, sizeof cmd->lease_key);
    a[n++] = "1", a[n++] = cmd->token_key;
    a[n++] = op->phase == PHASE_TAKE ? "take" : op->note, a[n++] = cmd->member;
    a[n++] = cmd->ttl, a[n++] = cmd->max;
    cmd->argc = n;
    return 0;
  }
  int inline_quota = quota && !node_is_cluster();
  if (op->kind == STORE_OP_LIST) { /* list.lua (index; P, after, prefix, limit, look) */
    index_key_build(cmd->index_key, NULL, op->index_slot);
    memcpy(cmd->lease_key, cmd->index_key, sizeof cmd->lease_key); /* routed by it */
    snprintf(cmd->limit, sizeof cmd->limit, "%lld", (long long)op->limit);
    snprintf(cmd->look, sizeof cmd->look, "%lld", (long long)(op->limit * 4 + 64));
    a[n++] = "1", a[n++] = cmd->index_key, a[n++] = cfg->key_prefix, a[n++] = op->after;
    a[n++] = op->name, a[n++] = cmd->limit, a[n++] = cmd->look;
    cmd->argc = n;
    return 0;
  }
  if (op->kind == STORE_OP_WATCH) { /* watch.lua (lease key; for ms) */
    if (picket_proto_key_lease(cmd->lease_key, KEY_MAX, cfg->key_prefix, op->name) < 0) return -1;
    a[n++] = "1", a[n++] = cmd->lease_key, a[n++] = cmd->ttl;
    cmd->argc = n;
    return 0;
  }
  if (op->kind >= STORE_OP_SEM_ACQUIRE && op->kind != STORE_OP_BREAK)
    return family_command_build(op, cmd, inline_quota);
  if (picket_proto_key_lease(cmd->lease_key, KEY_MAX, cfg->key_prefix, op->name) < 0 ||
      picket_proto_key_fence(cmd->fence_key, KEY_MAX, cfg->key_prefix, op->name) < 0)
    return -1;
  /* acquire, release and break keep the index of held names (KEYS[3]) */
  int indexed = op->kind == STORE_OP_ACQUIRE || op->kind == STORE_OP_RELEASE ||
                op->kind == STORE_OP_BREAK;
  if (indexed) index_key_build(cmd->index_key, op->name, 0);
  a[n++] = inline_quota ? (indexed ? "4" : "3") : (indexed ? "3" : "2");
  a[n++] = cmd->lease_key, a[n++] = cmd->fence_key;
  if (indexed) a[n++] = cmd->index_key;
  if (inline_quota) a[n++] = cmd->token_key;
  switch (op->kind) {
    case STORE_OP_ACQUIRE: /* (lease, ttl, owner, floor, idle, delay, cap, max, name) */
      snprintf(cmd->delay, sizeof cmd->delay, "%lld", (long long)op->lock_delay_ms);
      snprintf(cmd->cap, sizeof cmd->cap, "%lld", (long long)op->max_hold_ms);
      a[n++] = op->lease, a[n++] = cmd->ttl, a[n++] = op->owner ? op->owner : "";
      a[n++] = floor_arg, a[n++] = idle_arg, a[n++] = cmd->delay, a[n++] = cmd->cap;
      a[n++] = inline_quota ? cmd->max : "0", a[n++] = op->name;
      a[n++] = quota ? op->token : "";
      if (op->value) a[n++] = op->value;
      break;
    case STORE_OP_BREAK: /* (floor, idle, channel, name, who) */
      a[n++] = floor_arg, a[n++] = idle_arg, a[n++] = channel, a[n++] = op->name;
      a[n++] = op->who ? op->who : "";
      break;
    case STORE_OP_RENEW: /* (lease, ttl, idle[, name[, "v", value]]) */
      a[n++] = op->lease, a[n++] = cmd->ttl, a[n++] = idle_arg;
      if (inline_quota || op->value) a[n++] = op->name;
      if (op->value) a[n++] = "v", a[n++] = op->value;
      break;
    case STORE_OP_RELEASE: /* (lease, channel, name, idle) */
      a[n++] = op->lease, a[n++] = channel, a[n++] = op->name, a[n++] = idle_arg;
      break;
    default: break; /* inspect: (lease_key, fence_key) */
  }
  cmd->argc = n;
  return 0;
}

static void cmd_bind(op_command *cmd, const conn *k, const store_op *op) {
  cmd->argv[1] = k->sha[op_script_of(op)];
}

static store_status bad_name(store_result *r) {
  set_err(r, "lock name too long for a key%s", NULL);
  return STORE_EREPLY;
}

static int is_int(const redisReply *e) { return e->type == REDIS_REPLY_INTEGER; }

/* A fence as the scripts return it: a decimal string 1..2^63-1, parsed as
 * an int64 (never through a double, which is exact only below 2^53); "0"
 * too when zero_ok (inspect: never granted). 1 when it is one. */
static int fence_reply(const redisReply *e, int zero_ok, int64_t *out) {
  if (e->type != REDIS_REPLY_STRING) return 0;
  if (zero_ok && e->len == 1 && e->str[0] == '0') {
    *out = 0;
    return 1;
  }
  return picket_proto_fence_parse(e->str, e->len, out);
}

static void copy_owner(const redisReply *e, store_result *r) {
  r->owner[0] = '\0';
  if (e->type == REDIS_REPLY_STRING && e->len <= PICKET_PROTO_OWNER_BYTES_MAX)
    memcpy(r->owner, e->str, e->len + 1);
}

/* r->permits for an inspect's n leases: 0, or -1 (out of memory, said in
 * r->err). */
static int permits_alloc(store_result *r, int n) {
  r->npermits = n;
  r->permits = n ? calloc((size_t)n, sizeof *r->permits) : NULL;
  if (n && r->permits == NULL) {
    r->npermits = 0;
    set_err(r, "out of memory reading the leases of an inspect%s", "");
    return -1;
  }
  return 0;
}

/* Every family's acquire reply opens the same way: {1, fence, created,
 * tamper, ttl} granted, {0, retry, owner, tamper, 0} held, {3, ...} held
 * off by a lock-delay, {2, ...} the token holds its max_leases, {4,
 * limit, ...} (semaphores) the live permits use another limit. What
 * follows the fifth element is the family's (sem_parse, rw_parse). */
static store_status acquire_head(store_op *op, redisReply **e, size_t n) {
  store_result *r = &op->r;
  if (n < 5 || !is_int(e[0]) || !is_int(e[4])) return STORE_EREPLY;
  tamper_repaired(op, e[3]);
  switch (e[0]->integer) {
    case 1:
      if (!fence_reply(e[1], 0, &r->fence)) return STORE_EREPLY;
      r->created = is_int(e[2]) && e[2]->integer == 1;
      r->ttl_ms = e[4]->integer;
      return STORE_OK;
    case 0:
    case 3:
      if (!is_int(e[1])) return STORE_EREPLY;
      r->ttl_ms = e[1]->integer;
      copy_owner(e[2], r);
      return e[0]->integer == 0 ? STORE_HELD : STORE_DELAYED;
    case 2: return STORE_EQUOTA;
    case 4:
      if (!is_int(e[1])) return STORE_EREPLY;
      r->limit = e[1]->integer;
      return STORE_ELIMIT;
    default: return STORE_EREPLY;
  }
}

/* ...and a renewal's: {fence, tamper, ttl}, or {0, tamper, 0} when the
 * lease is not held. */
static store_status renew_head(store_op *op, redisReply **e, size_t n) {
  if (n < 3 || !is_int(e[2])) return STORE_EREPLY;
  tamper_repaired(op, e[1]);
  if (is_int(e[0]) && e[0]->integer == 0) return STORE_LOST;
  if (!fence_reply(e[0], 0, &op->r.fence)) return STORE_EREPLY;
  op->r.ttl_ms = e[2]->integer;
  return STORE_OK;
}

/* Why a lease is lost, when the script knows (a break: hold_broken). */
static void lost_why(const redisReply *e, store_result *r) {
  if (e->type == REDIS_REPLY_STRING) snprintf(r->why, sizeof r->why, "%s", e->str);
}

/* ...and a release's: {1, tamper[, "", at]} released, {0, tamper[, why]}
 * not held. */
static store_status release_reply(store_op *op, redisReply **e, size_t n) {
  if (n < 2 || n > 4 || !is_int(e[0])) return STORE_EREPLY;
  tamper_repaired(op, e[1]);
  if (n >= 3) lost_why(e[2], &op->r);
  if (n == 4 && is_int(e[3])) op->r.at = e[3]->integer;
  return e[0]->integer == 1 ? STORE_OK : STORE_LOST;
}

/* semaphore.lua's and sem_inspect.lua's replies (an array; the layouts
 * are theirs): the status, or STORE_EREPLY for a reply of another shape
 * (the caller reports it). */
static store_status sem_parse(store_op *op, const redisReply *rep) {
  store_result *r = &op->r;
  redisReply **e = rep->element;
  size_t n = rep->elements;
  switch (op->kind) {
    case STORE_OP_SEM_ACQUIRE: { /* acquire_head, then the permit's slot (-1) */
      if (n != 6 || !is_int(e[5])) return STORE_EREPLY;
      store_status st = acquire_head(op, e, n);
      r->permit = e[5]->integer;
      return st;
    }
    case STORE_OP_SEM_RENEW: { /* renew_head, then the slot */
      if (n != 4 || !is_int(e[3])) return STORE_EREPLY;
      r->permit = e[3]->integer;
      return renew_head(op, e, n);
    }
    case STORE_OP_SEM_RELEASE: return release_reply(op, e, n);
    default: /* inspect: {limit, live, then slot, fence, owner, ttl, delay per permit} */
      if (n < 2 || (n - 2) % 5 != 0 || !is_int(e[0]) || !is_int(e[1])) return STORE_EREPLY;
      r->limit = e[0]->integer;
      r->live = e[1]->integer;
      if (permits_alloc(r, (int)((n - 2) / 5)) < 0) return STORE_EUNAVAIL;
      for (int i = 0; i < r->npermits; i++) {
        redisReply **p = e + 2 + 5 * i;
        store_permit *s = &r->permits[i];
        if (!is_int(p[0]) || !fence_reply(p[1], 0, &s->fence) || !is_int(p[3]) || !is_int(p[4])) {
          store_result_clear(r);
          return STORE_EREPLY;
        }
        s->permit = p[0]->integer;
        s->ttl_ms = p[3]->integer;
        s->delay_ms = p[4]->integer;
        if (p[2]->type == REDIS_REPLY_STRING && p[2]->len <= PICKET_PROTO_OWNER_BYTES_MAX)
          memcpy(s->owner, p[2]->str, p[2]->len + 1);
      }
      return STORE_OK;
  }
}

/* rwlock.lua's and rw_inspect.lua's replies (an array; the layouts are
 * theirs): the status, or STORE_EREPLY for another shape. */
static store_status rw_parse(store_op *op, const redisReply *rep) {
  store_result *r = &op->r;
  redisReply **e = rep->element;
  size_t n = rep->elements;
  switch (op->kind) {
    case STORE_OP_RW_ACQUIRE: { /* acquire_head, then the mode granted or why not */
      if (n != 6 || e[5]->type != REDIS_REPLY_STRING) return STORE_EREPLY;
      store_status st = acquire_head(op, e, n);
      r->held_by = strcmp(e[5]->str, "read") == 0      ? 1
                   : strcmp(e[5]->str, "waiting") == 0 ? 2
                   : strcmp(e[5]->str, "full") == 0    ? 3
                                                       : 0;
      return st;
    }
    case STORE_OP_RW_RENEW: /* renew_head, then the mode */
      if (n != 4) return STORE_EREPLY;
      r->held_by = e[3]->type == REDIS_REPLY_STRING && strcmp(e[3]->str, "read") == 0;
      return renew_head(op, e, n);
    case STORE_OP_RW_RELEASE:
    case STORE_OP_RW_FORGET: return release_reply(op, e, n);
    default: /* inspect: {last, writer {fence, owner, ttl, delay} or {}, readers,
              * waiting, then fence, owner, ttl per listed reader} */
      if (n < 4 || (n - 4) % 3 != 0 || !fence_reply(e[0], 1, &r->fence) ||
          e[1]->type != REDIS_REPLY_ARRAY || !is_int(e[2]) || !is_int(e[3]))
        return STORE_EREPLY;
      if (e[1]->elements == 4) {
        redisReply **w = e[1]->element;
        int64_t wf;
        if (!fence_reply(w[0], 0, &wf) || !is_int(w[2]) || !is_int(w[3])) return STORE_EREPLY;
        r->held = 1;
        r->ttl_ms = w[2]->integer;
        r->delay_ms = w[3]->integer;
        copy_owner(w[1], r);
      }
      r->live = e[2]->integer;
      r->waiting = e[3]->integer;
      if (permits_alloc(r, (int)((n - 4) / 3)) < 0) return STORE_EUNAVAIL;
      for (int i = 0; i < r->npermits; i++) {
        redisReply **p = e + 4 + 3 * i;
        store_permit *s = &r->permits[i];
        if (!fence_reply(p[0], 0, &s->fence) || !is_int(p[2])) {
          store_result_clear(r);
          return STORE_EREPLY;
        }
        s->permit = -1;
        s->ttl_ms = p[2]->integer;
        if (p[1]->type == REDIS_REPLY_STRING && p[1]->len <= PICKET_PROTO_OWNER_BYTES_MAX)
          memcpy(s->owner, p[1]->str, p[1]->len + 1);
      }
      return STORE_OK;
  }
}

/* list.lua's reply: {next, then kind, name, holders, fence, owner, ttl,
 * at, renewals, limit per entry}. The entries go to r->entries, next to
 * r->next. */
static store_status list_parse(store_op *op, const redisReply *rep) {
  store_result *r = &op->r;
  redisReply **e = rep->element;
  size_t n = rep->elements;
  if (n < 1 || (n - 1) % 9 != 0 || e[0]->type != REDIS_REPLY_STRING ||
      e[0]->len >= sizeof r->next)
    return STORE_EREPLY;
  memcpy(r->next, e[0]->str, e[0]->len + 1);
  int count = (int)((n - 1) / 9);
  r->entries = count ? calloc((size_t)count, sizeof *r->entries) : NULL;
  if (count && r->entries == NULL) {
    set_err(r, "out of memory reading a list of %s", "held names");
    return STORE_EUNAVAIL;
  }
  for (int i = 0; i < count; i++) {
    redisReply **x = e + 1 + 9 * i;
    store_entry *en = &r->entries[r->nentries];
    if (x[0]->type != REDIS_REPLY_STRING || x[0]->len < 1 || x[1]->type != REDIS_REPLY_STRING ||
        x[1]->len > PICKET_PROTO_NAME_MAX || !is_int(x[2]) || !fence_reply(x[3], 1, &en->fence) ||
        !is_int(x[5]) || !is_int(x[6]) || !is_int(x[7]) || !is_int(x[8])) {
      store_result_clear(r);
      return STORE_EREPLY;
    }
    en->kind = x[0]->str[0];
    memcpy(en->name, x[1]->str, x[1]->len + 1);
    en->holders = x[2]->integer;
    if (x[4]->type == REDIS_REPLY_STRING && x[4]->len <= PICKET_PROTO_OWNER_BYTES_MAX)
      memcpy(en->owner, x[4]->str, x[4]->len + 1);
    en->ttl_ms = x[5]->integer > 0 ? x[5]->integer : 1;
    en->at = x[6]->integer;
    en->renewals = x[7]->integer;
    en->limit = x[8]->integer;
    r->nentries++;
  }
  return STORE_OK;
}

/* Reads one script's reply (not NOSCRIPT, which the caller handles) into
 * op->r and returns the call's status. Frees rep. */
static store_status op_parse(store_op *op, redisReply *rep) {
  store_result *r = &op->r;
  store_status st = STORE_OK;
  if (rep->type == REDIS_REPLY_ERROR) {
    st = error_reply(op->node, rep->str, r);
    if (op->slot >= 0 && (strncmp(rep->str, "CLUSTERDOWN", 11) == 0 ||
                          strncmp(rep->str, "TRYAGAIN", 8) == 0)) {
      /* Name the slot: which shard is down (or mid-migration for longer
       * than --redis-timeout-ms) is what an operator needs. */
      char detail[200];
      snprintf(detail, sizeof detail, "%.199s", r->err);
      snprintf(r->err, sizeof r->err, "Redis Cluster slot %d: %.200s", op->slot, detail);
    }
    freeReplyObject(rep);
    return st;
  }
  metrics_gauge_set(G_REDIS_UP, 1), metrics_gauge_set(G_STORE_UP, 1);
  node_ok(op->node);
  redisReply **e = rep->element;
  if (op->phase != PHASE_CALL) { /* quota.lua: take 0, 1 or 2; touch, drop 1 */
    if (!is_int(rep) || rep->integer < 0 || rep->integer > 2) goto odd;
    if (rep->integer == 0) st = STORE_EQUOTA;
    op->quota_added = rep->integer == 1;
    freeReplyObject(rep);
    return st;
  }
  switch (op->kind) {
    case STORE_OP_ACQUIRE: /* acquire_head, and no more */
      if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 5) goto odd;
      if ((st = acquire_head(op, e, 5)) == STORE_EREPLY) goto odd;
      break;
    case STORE_OP_RENEW: /* renew_head, then why a lost lease is lost, and `at` */
      if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 5 || !is_int(e[4])) goto odd;
      if ((st = renew_head(op, e, 5)) == STORE_EREPLY) goto odd;
      if (st == STORE_LOST) lost_why(e[3], r);
      r->at = e[4]->integer;
      break;
    case STORE_OP_RELEASE:
      if (rep->type != REDIS_REPLY_ARRAY) goto odd;
      if ((st = release_reply(op, e, rep->elements)) == STORE_EREPLY) goto odd;
      break;
    case STORE_OP_BREAK: /* {broken, fence, owner, tamper, at, token} */
      if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 6 || !is_int(e[0]) ||
          !fence_reply(e[1], 0, &r->fence) || !is_int(e[4]) || e[5]->type != REDIS_REPLY_STRING ||
          e[5]->len >= sizeof r->token)
        goto odd;
      memcpy(r->token, e[5]->str, e[5]->len + 1);
      r->held = e[0]->integer == 1;
      copy_owner(e[2], r);
      tamper_repaired(op, e[3]);
      r->at = e[4]->integer;
      break;
    case STORE_OP_LIST:
      if (rep->type != REDIS_REPLY_ARRAY || (st = list_parse(op, rep)) == STORE_EREPLY) goto odd;
      break;
    case STORE_OP_WATCH:
      if (!is_int(rep)) goto odd;
      break;
    case STORE_OP_SEM_ACQUIRE:
    case STORE_OP_SEM_RENEW:
    case STORE_OP_SEM_RELEASE:
    case STORE_OP_SEM_INSPECT:
    case STORE_OP_RW_ACQUIRE:
    case STORE_OP_RW_RENEW:
    case STORE_OP_RW_RELEASE:
    case STORE_OP_RW_INSPECT:
    case STORE_OP_RW_FORGET:
      if (rep->type != REDIS_REPLY_ARRAY) goto odd;
      st = op->kind >= STORE_OP_RW_ACQUIRE ? rw_parse(op, rep) : sem_parse(op, rep);
      if (st == STORE_EREPLY) goto odd;
      break;
    case STORE_OP_INSPECT: /* {fence, held, pttl, owner, delay, at, renewals, value} */
      if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 8 ||
          e[7]->type != REDIS_REPLY_STRING ||
          !fence_reply(e[0], 1, &r->fence) || !is_int(e[1]) || !is_int(e[2]) || !is_int(e[4]) ||
          !is_int(e[5]) || !is_int(e[6]))
        goto odd;
      r->held = e[1]->integer == 1;
      r->at = e[5]->integer;
      r->renewals = e[6]->integer;
      r->ttl_ms = r->held ? e[2]->integer : 0;
      r->delay_ms = e[4]->integer > 0 ? e[4]->integer : 0;
      copy_owner(e[3], r);
      if (r->held && e[7]->len > 0 && (r->value = strndup(e[7]->str, e[7]->len)) == NULL) {
        freeReplyObject(rep);
        set_err(r, "out of memory%s", "");
        return STORE_EREPLY;
      }
      break;
  }
  freeReplyObject(rep);
  return st;
odd:
  freeReplyObject(rep);
  set_err(r, "unexpected reply from the %s script", script_name[op_script_of(op)]);
  metrics_inc(M_REDIS_ERR_REPLY);
  return STORE_EREPLY;
}

static int is_noscript(const redisReply *rep) {
  return rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0;
}

/* k (NULL: the calling thread's connection to node `id`), ready for lock
 * calls: NULL with the status in *st (and r->err) when the node is
 * unreachable or misconfigured. */
static conn *conn_for_calls(conn *k, int id, int at_rest, store_result *r, store_status *st) {
  k = k ? conn_ready(k, at_rest, r) : conn_get(id, r);
  if (k == NULL) {
    metrics_inc(M_REDIS_ERR_UNAVAILABLE);
    metrics_gauge_set(G_REDIS_UP, 0), metrics_gauge_set(G_STORE_UP, 0);
    *st = STORE_EUNAVAIL;
    return NULL;
  }
  if (at_rest) policy_due(k);
  if (atomic_load(&evicting[k->node])) {
    set_err(r, "Redis maxmemory-policy evicts keys; fences are unsafe, so no lock calls%s", NULL);
    metrics_inc(M_REDIS_ERR_MISCONFIGURED);
    *st = STORE_EMISCONF;
    return NULL;
  }
  return k;
}

/* The node for op (its key's slot's primary under --redis-cluster; sets
 * op->slot and op->node), or -1 with op->r.err set. */
static int route(store_op *op, const op_command *cmd) {
  int id = node_for_key(cmd->lease_key, &op->slot, op->r.err, sizeof op->r.err);
  if (id < 0) metrics_inc(M_REDIS_ERR_UNAVAILABLE);
  op->node = id;
  return id;
}

/* ---- redirections (--redis-cluster) -----------------------------------
 *
 * Why following one is safe: Redis answers MOVED, ASK and TRYAGAIN before
 * it runs the script (it checks the keys' slot first), so the call did
 * nothing on that node, and sending it again cannot grant twice or bump a
 * fence twice. The calls that may have run (a lost connection, a timeout)
 * are never sent again by picketd: they end in 503, and the client's retry
 * with the same lease is idempotent (acquire.lua). */

#define HOPS_MAX 5        /* MOVED followed per call, as Lettuce's maxRedirects */
#define TRYAGAIN_MIN_MS 2 /* first backoff after TRYAGAIN; doubles... */
#define TRYAGAIN_MAX_MS 50 /* ...up to this, within the call's --redis-timeout-ms */

enum { FOLLOW_GIVE_UP = -2, FOLLOW_ROUTE = -1 };

/* A redirection in rep: "MOVED 3999 10.0.0.2:6381", "ASK 3999 ...",
 * "TRYAGAIN ...". 0 when rep is none of them. */
static int redirect_of(const redisReply *rep, int *kind, int *slot, char *host, size_t cap,
                       int *port) {
  if (rep->type != REDIS_REPLY_ERROR) return 0;
  if (strncmp(rep->str, "TRYAGAIN", 8) == 0) {
    *kind = M_REDIS_REDIRECT_TRYAGAIN;
    return 1;
  }
  int moved = strncmp(rep->str, "MOVED ", 6) == 0;
  if (!moved && strncmp(rep->str, "ASK ", 4) != 0) return 0;
  const char *sp = strchr(rep->str, ' '), *addr = sp ? strchr(sp + 1, ' ') : NULL;
  const char *colon = addr ? strrchr(addr, ':') : NULL; /* the last: IPv6 hosts have colons */
  if (colon == NULL || (size_t)(colon - addr - 1) >= cap) return 0;
  *slot = atoi(sp + 1);
  *port = atoi(colon + 1);
  if (*slot < 0 || *slot >= NODE_SLOTS || *port <= 0 || *port > 65535) return 0;
  memcpy(host, addr + 1, (size_t)(colon - addr - 1));
  host[colon - addr - 1] = '\0';
  *kind = moved ? M_REDIS_REDIRECT_MOVED : M_REDIS_REDIRECT_ASK;
  return 1;
}

/* What the next send of op is after the reply rep from node `from`: the
 * node to send it to (ASK; op->asking set), FOLLOW_ROUTE (MOVED repointed
 * the slot, or TRYAGAIN after *wait_ms), or FOLLOW_GIVE_UP: rep is not a
 * redirection, or the call has followed HOPS_MAX MOVED or run out of its
 * --redis-timeout-ms, and rep is its answer (a 503). Frees rep unless it
 * gives up. */
static int follow(store_op *op, int from, redisReply *rep, int64_t *wait_ms) {
  int kind, slot, port;
  char host[256];
  *wait_ms = 0;
  if (!node_is_cluster() || !redirect_of(rep, &kind, &slot, host, sizeof host, &port))
    return FOLLOW_GIVE_UP;
  if (kind == M_REDIS_REDIRECT_MOVED && op->hops >= HOPS_MAX) {
    LOG(LOG_WARN, "lock %s: %d MOVED redirections in one call (the slot map keeps "
                  "changing?); answering 503", op->name, HOPS_MAX);
    return FOLLOW_GIVE_UP;
  }
  if (host[0] == '\0') { /* "MOVED 3999 :6381": the node did not know its own address */
    char a[280];
    node_addr(from, a, sizeof a);
    a[strcspn(a, ":")] = '\0';
    snprintf(host, sizeof host, "%.255s", a);
  }
  int next = FOLLOW_ROUTE;
  if (kind == M_REDIS_REDIRECT_TRYAGAIN) {
    /* The slot is mid-migration and its keys are split between the two
     * nodes: wait for the rest to move. */
    if (clock_mono_ms() + op->backoff_ms >= op->call_deadline_ms) return FOLLOW_GIVE_UP;
    *wait_ms = op->backoff_ms;
    op->backoff_ms = op->backoff_ms * 2 > TRYAGAIN_MAX_MS ? TRYAGAIN_MAX_MS : op->backoff_ms * 2;
    metrics_inc((metrics_counter)kind);
    freeReplyObject(rep);
    return FOLLOW_ROUTE; /* not a hop: the deadline bounds these */
  } else if (kind == M_REDIS_REDIRECT_MOVED) {
    if (node_moved(slot, host, port) < 0) return FOLLOW_GIVE_UP;
    op->hops++;
  } else if (clock_mono_ms() >= op->call_deadline_ms || (next = node_id_of(host, port)) < 0) {
    return FOLLOW_GIVE_UP;
  } else {
    /* ASK: this one call, on that node, after ASKING. Not a hop either:
     * mid-migration, a free lock's acquire goes ASK, then TRYAGAIN at the
     * target (its lease key exists on neither side) until the slot has
     * moved; the deadline bounds that too. */
    op->asking = 1;
  }
  metrics_inc((metrics_counter)kind);
  freeReplyObject(rep);
  return next;
}

/* Sends cmd on k (after ASKING when op->asking) and reads the reply; on
 * NOSCRIPT loads the script and sends once more. NULL with *st set on a
 * transport failure or a refused SCRIPT LOAD. */
static redisReply *call_once(conn *k, store_op *op, op_command *cmd, store_status *st) {
  for (int attempt = 0;; attempt++) {
    redisReply *rep = NULL, *asked = NULL;
    if (op->asking) {
      /* ASKING and the call in one write: the flag lasts one command. */
      if (redisAppendCommand(k->c, "ASKING") != REDIS_OK ||
          redisAppendCommandArgv(k->c, cmd->argc, cmd->argv, NULL) != REDIS_OK ||
          redisGetReply(k->c, (void **)&asked) != REDIS_OK ||
          redisGetReply(k->c, (void **)&rep) != REDIS_OK)
        rep = NULL;
      if (asked) freeReplyObject(asked);
    } else {
      rep = redisCommandArgv(k->c, cmd->argc, cmd->argv, NULL);
    }
    if (rep == NULL) {
      *st = transport_error(k, &op->r);
      return NULL;
    }
    if (!is_noscript(rep) || attempt == 1) return rep;
    freeReplyObject(rep);
    int s = op_script_of(op);
    LOG(LOG_INFO, "Redis lost script %s (restart or SCRIPT FLUSH); reloading", script_name[s]);
    if (load_script(k, s, &op->r) < 0) {
      *st = k->c->err ? transport_error(k, &op->r) : STORE_EREPLY;
      return NULL;
    }
  }
}

/* Runs op's script on the calling thread's connection to its node: one
 * round trip, plus a SCRIPT LOAD and a second try on NOSCRIPT, and under
 * --redis-cluster the redirections followed (see above). op->node is the
 * node that answered, for the WAIT of --min-replicas. */
static store_status op_run(store_op *op) {
  op_command cmd;
  if (op_command_build(op, &cmd) < 0) return bad_name(&op->r);
  op->call_deadline_ms = clock_mono_ms() + cfg->redis_timeout_ms;
  op->hops = op->asking = 0;
  op->backoff_ms = TRYAGAIN_MIN_MS;
  int next = FOLLOW_ROUTE;
  for (;;) {
    int id = next >= 0 ? next : route(op, &cmd);
    if (id < 0) return STORE_EUNAVAIL;
    op->node = id;
    store_status st;
    conn *k = conn_for_calls(NULL, id, 1, &op->r, &st);
    if (k == NULL) return st;
    cmd_bind(&cmd, k, op);
    redisReply *rep = call_once(k, op, &cmd, &st);
    op->asking = 0;
    if (rep == NULL) return st;
    if (!node_current(id, k->gen, k->lease_epoch, op->r.err, sizeof op->r.err))
      return primary_moved(k, rep, &op->r);
    int64_t wait_ms;
    if ((next = follow(op, id, rep, &wait_ms)) == FOLLOW_GIVE_UP) return op_parse(op, rep);
    if (wait_ms > 0) {
      struct timespec ts = {0, (long)wait_ms * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
}

/* Waits for --min-replicas to acknowledge the writes of this thread's
 * connection to node `id`: the shard that took the grant. */
static store_status wait_replicas(int id, store_result *r) {
  if (cfg->min_replicas <= 0) return STORE_OK;
  thread_conns *t = pthread_getspecific(conn_key);
  conn *k = t ? t->by_node[id] : NULL;
  if (k == NULL || k->c == NULL) {
    set_err(r, "Redis connection lost before WAIT%s", NULL);
    return STORE_EUNAVAIL;
  }
  /* WAIT blocks for up to --replica-timeout-ms by design: allow that on
   * top of the command timeout, or a long WAIT would look like a dead
   * Redis (store_unavailable and a reconnect instead of not_replicated). */
  redisSetTimeout(k->c, ms_tv(cfg->redis_timeout_ms + cfg->replica_timeout_ms));
  redisReply *rep = redisCommand(k->c, "WAIT %d %lld", cfg->min_replicas,
                                 (long long)cfg->replica_timeout_ms);
  redisSetTimeout(k->c, ms_tv(cfg->redis_timeout_ms));
  if (rep == NULL) return transport_error(k, r);
  if (!node_current(id, k->gen, k->lease_epoch, r->err, sizeof r->err))
    return primary_moved(k, rep, r);
  store_status st = STORE_OK;
  if (rep->type == REDIS_REPLY_ERROR) {
    st = error_reply(id, rep->str, r);
  } else if (rep->type != REDIS_REPLY_INTEGER || rep->integer < cfg->min_replicas) {
    snprintf(r->err, sizeof r->err, "only %lld of %d replicas acknowledged within %lld ms",
             rep->type == REDIS_REPLY_INTEGER ? (long long)rep->integer : 0LL, cfg->min_replicas,
             (long long)cfg->replica_timeout_ms);
    metrics_inc(M_REDIS_ERR_NOT_REPLICATED);
    st = STORE_ENOTREPL;
  }
  freeReplyObject(rep);
  return st;
}

/* 1 when op's outcome must reach --min-replicas before it is passed on:
 * a grant or a renewal (a refusal wrote nothing that matters; a release
 * that is lost in a failover only leaves a lease to its TTL). */
static int guarded(const store_op *op) {
  store_op_kind base = store_op_base(op->kind);
  return cfg->min_replicas > 0 && op->phase == PHASE_CALL && op->st == STORE_OK &&
         (base == STORE_OP_ACQUIRE || base == STORE_OP_RENEW || base == STORE_OP_BREAK);
}

/* A guarded call that the replicas did not acknowledge (op->st says why):
 * a new grant is taken back, so no caller ever holds a grant that another
 * could get after a promotion. A same-lease retry only refreshed a grant
 * made (and replicated) before: it stays, as a renewal that was not
 * replicated does. undo(op) runs the release, on a direct connection or
 * on the pipe. */
static void guard_refused(store_op *op, void (*undo)(void *, const store_op *), void *arg) {
  if (store_op_base(op->kind) != STORE_OP_ACQUIRE || !op->r.created) return;
  undo(arg, op);
  op->quota_added = 0; /* the undo dropped the count */
}

static void store_redis_run(store_op *op);

static void undo_direct(void *arg, const store_op *op) {
  (void)arg;
  store_op undo = {.kind = store_op_release_of(op->kind), .name = op->name, .lease = op->lease,
                   .token = op->token, .max_leases = op->max_leases};
  store_redis_run(&undo); /* a failure leaves the lease to its TTL */
}

/* The replica guard on the calling thread's direct connection, which made
 * op's write: WAIT, and the undo when it falls short. */
static void guard_direct(store_op *op) {
  if (!guarded(op)) return;
  op->st = wait_replicas(op->node, &op->r);
  if (op->st != STORE_OK) guard_refused(op, undo_direct, NULL);
}

/* A direct call: the script (after the count's take, under a cluster),
 * then (grants and renewals) the replica guard, then any count update. */
static void store_redis_run(store_op *op) {
  memset(&op->r, 0, sizeof op->r);
  phase_begin(op);
  do op->st = op_run(op);
  while (phase_take_done(op));
  guard_direct(op);
  const char *verb = phase_note_of(op);
  if (verb) {
    store_op note = {.kind = op->kind, .name = op->name, .lease = op->lease, .token = op->token,
                     .max_leases = op->max_leases, .ttl_ms = op->ttl_ms,
                     .phase = PHASE_NOTE, .note = verb};
    if (op_run(&note) != STORE_OK) note_failed(&note);
  }
}

/* ---- operators: listing and breaking ----------------------------------- */

/* A listing call looks at most this many hash slots of Redis Cluster (a
 * page may come back short, with more set). */
#define LIST_SLOTS 512

static store_status store_redis_list(const char *prefix, int limit, store_cursor *at, int *more,
                        store_result *r) {
  memset(r, 0, sizeof *r);
  *more = 0;
  int cluster = node_is_cluster(), slot;
  char after[PICKET_PROTO_NAME_MAX + 3];
  if (store_cursor_read(at, prefix, cluster ? NODE_SLOTS - 1 : 0, &slot, after) < 0) {
    set_err(r, "not a cursor of this %s", "listing");
    return STORE_EARG;
  }
  for (int visited = 0; visited < LIST_SLOTS; visited++) {
    store_op op = {.kind = STORE_OP_LIST, .name = prefix, .after = after,
                   .index_slot = slot, .limit = limit - r->nentries};
    store_redis_run(&op);
    if (op.st != STORE_OK) {
      store_result_clear(r);
      memcpy(r->err, op.r.err, sizeof r->err);
      return op.st;
    }
    if (op.r.nentries > 0) { /* append this slot's entries to the page */
      store_entry *all = realloc(r->entries, (size_t)(r->nentries + op.r.nentries) * sizeof *all);
      if (all == NULL) {
        store_result_clear(&op.r);
        store_result_clear(r);
        set_err(r, "out of memory listing %s", "held names");
        return STORE_EUNAVAIL;
      }
      memcpy(all + r->nentries, op.r.entries, (size_t)op.r.nentries * sizeof *all);
      r->entries = all;
      r->nentries += op.r.nentries;
    }
    store_result_clear(&op.r);
    if (op.r.next[0]) { /* this index has more */
      store_cursor_write(at, slot, op.r.next);
      *more = 1;
      return STORE_OK;
    }
    after[0] = '\0';
    if (!cluster || slot + 1 >= NODE_SLOTS) {
      at->text[0] = '\0';
      return STORE_OK;
    }
    slot++;
    if (r->nentries >= limit) break;
  }
  store_cursor_write(at, slot, ""); /* a full page, or LIST_SLOTS slots looked at */
  *more = 1;
  return STORE_OK;
}

static store_status store_redis_break(const char *name, const char *who, store_result *r) {
  store_op op = {.kind = STORE_OP_BREAK, .name = name, .who = who};
  store_redis_run(&op);
  *r = op.r;
  if (op.st != STORE_OK || r->token[0] == '\0') return op.st;
  /* The broken lease's place in its token's max_leases goes back now, not
   * at its TTL (quota.lua: the count may live in another slot). */
  store_op note = {.kind = STORE_OP_RELEASE, .name = name, .token = r->token, .max_leases = 1,
                   .phase = PHASE_NOTE, .note = "drop"};
  if (op_run(&note) != STORE_OK) note_failed(&note);
  return op.st;
}

store_status store_redis_watch(const char *name, int64_t for_ms, store_result *r) {
  store_op op = {.kind = STORE_OP_WATCH, .name = name, .ttl_ms = for_ms};
  store_redis_run(&op);
  *r = op.r;
  return op.st;
}

/* One node's readiness: reachable, not evicting, not full, a primary, and
 * (r->replicas) how many replicas are online. */
static store_status ready_node(int id, const char *addr, store_result *r) {
  conn *k = conn_get(id, r);
  if (k == NULL) {
    metrics_gauge_set(G_REDIS_UP, 0), metrics_gauge_set(G_STORE_UP, 0);
    return STORE_EUNAVAIL;
  }
  if (atomic_load(&evicting[id])) check_policy(k); /* so /readyz sees a fix at once */
  else policy_due(k);
  if (atomic_load(&evicting[id])) {
    set_err(r, "Redis maxmemory-policy evicts keys; fences are unsafe%s", NULL);
    return STORE_EMISCONF;
  }
  redisReply *rep = redisCommand(k->c, "INFO"); /* replication and memory (one section each before Redis 7) */
  if (rep == NULL) return transport_error(k, r);
  store_status st = STORE_OK;
  r->replicas = 0;
  if (rep->type == REDIS_REPLY_ERROR) {
    st = error_reply(id, rep->str, r);
  } else if (rep->type == REDIS_REPLY_STRING) {
    /* Count the replicas online, not connected_slaves: that also counts
     * replicas still syncing, which WAIT cannot count yet. */
    for (const char *p = rep->str; (p = strstr(p, ",state=online")) != NULL; p++) r->replicas++;
    metrics_gauge_set(G_REDIS_UP, 1), metrics_gauge_set(G_STORE_UP, 1);
    long long used = info_field(rep->str, "used_memory:"), max = info_field(rep->str, "maxmemory:"),
              exempt = info_field(rep->str, "mem_not_counted_for_evict:");
    if (max > 0 && used - (exempt > 0 ? exempt : 0) > max) {
      /* What Redis compares before it refuses a write with OOM. */
      snprintf(r->err, sizeof r->err, "Redis is out of memory: %lld of maxmemory %lld bytes used; "
               "writes are refused", used - (exempt > 0 ? exempt : 0), max);
      metrics_inc(M_REDIS_ERR_FULL);
      freeReplyObject(rep);
      return STORE_EFULL;
    }
    if (strstr(rep->str, "role:master") == NULL) {
      /* Demoted since this connection opened (or --redis names a
       * replica): every grant would meet READONLY. */
      snprintf(r->err, sizeof r->err, "Redis at %.200s is a replica, not the primary",
               addr[0] ? addr : "the configured address");
      node_trouble(id);
      freeReplyObject(rep);
      return STORE_EUNAVAIL;
    }
  }
  freeReplyObject(rep);
  return st;
}

/* Where lock calls go, for /readyz (store_redis_ready). */
#define STORE_SHARDS_MAX 64
typedef struct {
  char primary[280];      /* "host:port" or a socket path; "" when no primary is known */
  int sentinel;           /* -1: no --sentinel; 1: a sentinel answers; 0: none does */
  char sentinel_msg[240]; /* why none does */
  int cluster;            /* 0: not a cluster; else the shards below */
  int nshards;
  struct {
    char primary[280];
    int slots;            /* how many of the 16384 it serves */
    int replicas;         /* online (INFO replication) */
  } shards[STORE_SHARDS_MAX];
} store_topology;

/* The replica count (INFO replication; under --redis-cluster the fewest
 * of any shard) into r, and the topology. */

static store_status ready_check(store_result *r, store_topology *topo) {
  node_info ni;
  node_describe(&ni);
  snprintf(topo->primary, sizeof topo->primary, "%s", ni.primary);
  topo->sentinel = ni.sentinel;
  snprintf(topo->sentinel_msg, sizeof topo->sentinel_msg, "%s", ni.sentinel_msg);
  node_shard sh[STORE_SHARDS_MAX];
  int n = node_shards(sh, STORE_SHARDS_MAX);
  topo->cluster = ni.cluster >= 0;
  if (!topo->cluster) {
    store_status st = ready_node(0, topo->primary, r);
    if (st == STORE_OK && r->replicas < cfg->min_replicas) {
      /* Every grant would be refused with not_replicated: not ready. */
      snprintf(r->err, sizeof r->err, "%d of --min-replicas %d replicas online", r->replicas,
               cfg->min_replicas);
      st = STORE_ENOTREPL;
    }
    return st;
  }
  /* A cluster is ready when every slot has a primary that answers: a lock
   * on any slot must be grantable. Each shard is asked in turn (a few
   * INFO round trips; /readyz is polled, not hammered). */
  int uncovered = NODE_SLOTS; /* from the same reading of the map as the shards */
  for (int i = 0; i < n; i++) uncovered -= sh[i].slots;
  if (uncovered > 0) {
    if (ni.cluster == 0)
      snprintf(r->err, sizeof r->err, "no Redis Cluster node answers: %.180s", ni.cluster_msg);
    else
      snprintf(r->err, sizeof r->err, "%d of %d Redis Cluster slots have no primary", uncovered,
               NODE_SLOTS);
    metrics_gauge_set(G_REDIS_UP, 0), metrics_gauge_set(G_STORE_UP, 0);
    return STORE_EUNAVAIL;
  }
  int fewest = -1;
  topo->nshards = n;
  for (int i = 0; i < n; i++) {
    snprintf(topo->shards[i].primary, sizeof topo->shards[i].primary, "%s", sh[i].primary);
    topo->shards[i].slots = sh[i].slots;
    store_status st = ready_node(sh[i].id, sh[i].primary, r);
    if (st != STORE_OK) {
      char why[200];
      snprintf(why, sizeof why, "%.199s", r->err);
      snprintf(r->err, sizeof r->err, "Redis Cluster shard %.100s (%d slots): %.120s",
               sh[i].primary, sh[i].slots, why);
      return st;
    }
    topo->shards[i].replicas = r->replicas;
    if (fewest < 0 || r->replicas < fewest) fewest = r->replicas;
    if (r->replicas < cfg->min_replicas) {
      snprintf(r->err, sizeof r->err, "Redis Cluster shard %.100s: %d of --min-replicas %d "
               "replicas online", sh[i].primary, r->replicas, cfg->min_replicas);
      return STORE_ENOTREPL;
    }
  }
  r->replicas = fewest;
  return STORE_OK;
}

static store_status store_redis_ready(int detail, store_result *r, json_t **out) {
  store_topology topo = {0};
  *out = NULL;
  store_status st = ready_check(r, &topo);
  if (st != STORE_OK) return st;
  json_t *body = topo.cluster || !detail
                     ? json_pack("{s:s, s:i}", "status", "ready", "replicas", r->replicas)
                     : json_pack("{s:s, s:i, s:s}", "status", "ready", "replicas", r->replicas,
                                 "primary", topo.primary);
  if (body && !detail) {
    if (topo.sentinel >= 0)
      json_object_set_new(body, "sentinel", json_pack("{s:b}", "reachable", topo.sentinel != 0));
    *out = body;
    return STORE_OK;
  }
  if (body && topo.cluster) {
    /* Each shard's primary: where its locks are, and how safe (replicas). */
    json_t *shards = json_array();
    for (int i = 0; shards && i < topo.nshards; i++)
      json_array_append_new(shards, json_pack("{s:s, s:i, s:i}", "primary", topo.shards[i].primary,
                                              "slots", topo.shards[i].slots, "replicas",
                                              topo.shards[i].replicas));
    json_object_set_new(body, "shards", shards);
  }
  if (body && topo.sentinel >= 0) {
    /* Still ready without Sentinel: the primary it last named serves, but
     * a failover would go unnoticed until a sentinel answers again. */
    json_t *sen = topo.sentinel ? json_pack("{s:b}", "reachable", 1)
                                : json_pack("{s:b, s:s}", "reachable", 0, "message",
                                            topo.sentinel_msg);
    json_object_set_new(body, "sentinel", sen);
  }
  *out = body;
  return STORE_OK;
}

static void store_redis_stop(void) {
  node_set_kick(NULL);
  if (cfg && cfg->cluster_seed_count > 0) cluster_stop();
  else if (cfg && cfg->sentinel_count > 0) sentinel_stop();
}

static void store_redis_thread_done(void) {
  thread_conns *t = pthread_getspecific(conn_key);
  if (t) {
    pthread_setspecific(conn_key, NULL);
    conn_destroy(t);
  }
}

/* ---- pipelined calls -------------------------------------------------- */

/* A store_pipe belongs to one HTTP event loop and has connections of its
 * own, to each node it has called (never the loop thread's direct ones: a
 * direct call waits for the next reply on its connection, which on a
 * pipelined one would be someone else's). While libmicrohttpd runs, the
 * loop appends each lock call it meets to a connection of the call's node;
 * after the pass it writes each connection's calls at once, and the
 * replies, read in order as they arrive, complete the calls. Under load a
 * round trip carries as many calls as the pass met for that node, and a
 * lone call still goes out at once. Each script runs atomically and each
 * call gets its own reply, so batching changes no outcome.
 *
 * --min-replicas: one WAIT per batch. WAIT waits for the replicas to
 * acknowledge the replication offset of its connection's last write, so a
 * WAIT written after a batch covers every grant and renewal in it (and,
 * the replication stream being one sequence, every write before them).
 * The flush appends one WAIT to a batch that holds a grant or a renewal;
 * their replies are held until the WAIT's reply is in, and a WAIT that
 * falls short fails them (new grants taken back, as on the direct path).
 * Every other call (a refusal, a release, an inspect) completes on its
 * own reply: no call waits for a WAIT it does not need. But Redis blocks
 * a connection while its WAIT runs, so a command written behind a WAIT
 * waits for it whatever it is. Hence lanes: a node has up to LANES_MAX
 * connections, and a batch goes to the first lane with no WAIT
 * outstanding (a new lane is opened when all wait). A lagging replica
 * then delays only the batches that wrote; only when every lane waits is
 * a batch queued behind the oldest WAIT (as if there were no lanes).
 * Without --min-replicas a node only ever has lane 0.
 *
 * The loop watches one descriptor: the pipe's own epoll set, which holds
 * the sockets of its lanes. So http.c never learns how many nodes there
 * are, and a node's reconnect changes nothing it watches.
 *
 * Redirections are followed without blocking the loop: a MOVED or ASK
 * reply sends the call again at once (to the node named), a TRYAGAIN puts
 * it on the pipe's retry list until its backoff passes. */

/* Connections per node and pipe: enough for a WAIT per pass to be in
 * flight while the next passes go out (a replica's acknowledgement takes
 * about one round trip; a pass of a busy loop is shorter), and few enough
 * that --threads loops cannot crowd Redis's maxclients. */
#define LANES_MAX 8

/* A WAIT written after a batch: its place in the lane's queue, and the
 * calls it covers whose script replies are in. */
typedef struct pipe_wait {
  store_op entry;              /* phase PHASE_WAIT; entry.next is the queue */
  store_op *held, *held_tail;  /* covered calls, in reply order (op->next) */
  struct pipe_wait *next;      /* the lane's next outstanding WAIT */
} pipe_wait;

typedef struct {
  conn k;
  store_op *head, *tail; /* appended, in the order their replies will come */
  store_op *unsent;      /* the first of them not yet written, or NULL */
  long unsent_n;         /* ...and how many from there */
  int unsent_guarded;    /* ...of which may write (grants, renewals): WAIT after them */
  pipe_wait *waits, *waits_tail; /* WAITs written, their replies not in: oldest first */
  unsigned long watched; /* k.opens when its socket joined the epoll set */
} node_pipe;

struct store_pipe {
  int ep;                                /* the lanes' sockets */
  node_pipe *lanes[NODE_MAX][LANES_MAX]; /* by node id, made on first use */
  node_pipe *all[NODE_MAX * LANES_MAX];  /* every lane made, to walk them */
  int nall;
  store_op *retry;                       /* TRYAGAIN: sent again at their retry_at_ms */
};

static int store_redis_pipeline_enabled(void) { return cfg->redis_pipeline != PIPELINE_OFF; }
static int store_redis_pipeline_forced(void) { return cfg->redis_pipeline == PIPELINE_ON; }

static store_pipe *store_redis_pipe_new(void) {
  store_pipe *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  if ((p->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
    free(p);
    return NULL;
  }
  return p;
}

/* Lane j of node id, made if new; NULL (r->err set) when out of memory. */
static node_pipe *lane_get(store_pipe *p, int id, int j, store_result *r) {
  if (p->lanes[id][j]) return p->lanes[id][j];
  node_pipe *np = calloc(1, sizeof *np);
  if (np == NULL) {
    set_err(r, "out of memory%s", NULL);
    return NULL;
  }
  np->k.node = id;
  np->k.backoff_ms = BACKOFF_MIN_MS;
  p->all[p->nall++] = np;
  return p->lanes[id][j] = np;
}

/* The lane of node id that the next calls go to: the first with no WAIT
 * outstanding (made if need be), or, when every lane waits, the one whose
 * WAIT ends first. NULL (r->err set) when out of memory. */
static node_pipe *lane_for(store_pipe *p, int id, store_result *r) {
  node_pipe *soonest = NULL;
  for (int j = 0; j < LANES_MAX; j++) {
    node_pipe *np = p->lanes[id][j];
    if (np == NULL) return lane_get(p, id, j, r);
    if (np->waits == NULL) return np;
    if (soonest == NULL || np->waits->entry.deadline_ms < soonest->waits->entry.deadline_ms)
      soonest = np;
  }
  return soonest;
}

/* Puts np's socket in the pipe's epoll set after each (re)connect. (A
 * closed socket leaves the set by itself.) */
static void node_pipe_watch(store_pipe *p, node_pipe *np) {
  if (np->k.c == NULL || np->watched == np->k.opens) return;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = np};
  if (epoll_ctl(p->ep, EPOLL_CTL_ADD, np->k.c->fd, &ev) < 0)
    epoll_ctl(p->ep, EPOLL_CTL_MOD, np->k.c->fd, &ev);
  np->watched = np->k.opens;
}

static int store_redis_pipe_connect(store_pipe *p) {
  store_result r = {0};
  node_shard sh[NODE_MAX];
  int n = node_shards(sh, NODE_MAX), ok = n > 0;
  for (int i = 0; i < n; i++) {
    node_pipe *np = lane_get(p, sh[i].id, 0, &r);
    if (np == NULL || conn_ready(&np->k, 1, &r) == NULL) ok = 0;
    else node_pipe_watch(p, np);
  }
  return ok ? 0 : -1;
}

static void op_fail(store_op *op, const store_result *why) {
  op->r = *why;
  op->st = STORE_EUNAVAIL;
  metrics_inc(M_REDIS_ERR_UNAVAILABLE);
  op->done(op);
}

/* Completes every call still waiting on np's connection with `why` (the
 * connection is gone, and with it any way to know which of them Redis
 * ran, or whether the replicas have what it wrote) and closes it. done()
 * may end the request that owns an op. */
static void pipe_fail(node_pipe *np, const store_result *why) {
  if (np->k.c) conn_lost(&np->k);
  store_op *op = np->head;
  np->head = np->tail = np->unsent = NULL;
  np->unsent_n = np->unsent_guarded = 0;
  np->waits = np->waits_tail = NULL;
  for (store_op *next; op; op = next) {
    next = op->next;
    if (op->phase != PHASE_WAIT) {
      op_fail(op, why);
      continue;
    }
    /* A grant held for this WAIT stays in Redis until its TTL: its
     * client gets 503, and a retry with the same lease gets it back. */
    pipe_wait *w = (pipe_wait *)op;
    for (store_op *h = w->held, *hn; h; h = hn) {
      hn = h->next;
      op_fail(h, why);
    }
    free(w);
  }
}

/* Sentinel named a new primary (or a cluster node's id was given to
 * another node, or the sentinels' lease lapsed) while calls wait on np:
 * their replies would come from a node that may no longer be the primary
 * (see primary_moved). */
static void pipe_check_primary(node_pipe *np) {
  store_result why = {0};
  if (np->k.c == NULL ||
      node_current(np->k.node, np->k.gen, np->k.lease_epoch, why.err, sizeof why.err))
    return;
  pipe_fail(np, &why);
}

static void pipe_fail_transport(node_pipe *np) {
  store_result why = {0};
  transport_reason(&np->k, &why);
  pipe_fail(np, &why);
}

static void store_redis_pipe_free(store_pipe *p) {
  if (p == NULL) return;
  store_result why = {0};
  set_err(&why, "picketd is stopping%s", NULL);
  for (store_op *op = p->retry, *next; op; op = next) {
    next = op->next;
    op->r = why;
    op->st = STORE_EUNAVAIL;
    op->done(op);
  }
  for (int i = 0; i < p->nall; i++) {
    pipe_fail(p->all[i], &why);
    free(p->all[i]);
  }
  close(p->ep);
  free(p);
}

/* Queues op's command (cmd, built by the caller to route it) on a lane of
 * node `id` (after ASKING when op->asking). 0, or -1 with op->st and
 * op->r set (done not called). */
static int pipe_send(store_pipe *p, store_op *op, op_command *cmd, int id) {
  node_pipe *np = lane_for(p, id, &op->r);
  if (np == NULL) {
    op->st = STORE_EUNAVAIL;
    return -1;
  }
  pipe_check_primary(np);
  conn *k = conn_for_calls(&np->k, id, np->head == NULL, &op->r, &op->st);
  if (k == NULL) return -1;
  node_pipe_watch(p, np);
  cmd_bind(cmd, k, op);
  if ((op->asking && redisAppendCommand(k->c, "ASKING") != REDIS_OK) ||
      redisAppendCommandArgv(k->c, cmd->argc, cmd->argv, NULL) != REDIS_OK) { /* out of memory */
    op->st = transport_error(k, &op->r);
    pipe_fail(np, &op->r); /* the calls already waiting share its fate */
    return -1;
  }
  op->node = id;
  op->next = NULL;
  op->deadline_ms = clock_mono_ms() + cfg->redis_timeout_ms;
  if (np->tail) np->tail->next = op;
  else np->head = op;
  np->tail = op;
  if (np->unsent == NULL) np->unsent = op;
  np->unsent_n++;
  store_op_kind base = store_op_base(op->kind);
  if (cfg->min_replicas > 0 && op->phase == PHASE_CALL &&
      (base == STORE_OP_ACQUIRE || base == STORE_OP_RENEW))
    np->unsent_guarded++;
  return 0;
}

/* Routes and queues op's command for its current phase: 0, or -1 with
 * op->st and op->r set (done not called). */
static int pipe_submit(store_pipe *p, store_op *op) {
  op->call_deadline_ms = clock_mono_ms() + cfg->redis_timeout_ms;
  op->hops = op->asking = 0;
  op->backoff_ms = TRYAGAIN_MIN_MS;
  op_command cmd;
  if (op_command_build(op, &cmd) < 0) {
    op->st = bad_name(&op->r);
    return -1;
  }
  int id = route(op, &cmd);
  if (id < 0) {
    op->st = STORE_EUNAVAIL;
    return -1;
  }
  return pipe_send(p, op, &cmd, id);
}

static int store_redis_pipe_append(store_pipe *p, store_op *op) {
  memset(&op->r, 0, sizeof op->r);
  phase_begin(op);
  return pipe_submit(p, op);
}

/* Sends a redirected call again (from a reply or the retry list, so done
 * may be called): to node `to`, or by the slot map (FOLLOW_ROUTE). */
static void pipe_resend(store_pipe *p, store_op *op, int to) {
  op_command cmd;
  if (op_command_build(op, &cmd) < 0 || (to < 0 && (to = route(op, &cmd)) < 0)) {
    op->st = STORE_EUNAVAIL;
    op->done(op);
    return;
  }
  if (pipe_send(p, op, &cmd, to) < 0) op->done(op);
}

/* Appends the WAIT that covers np's unsent batch. 0, or -1 when out of
 * memory (np has failed, its calls with it). */
static int pipe_append_wait(node_pipe *np) {
  pipe_wait *w = calloc(1, sizeof *w);
  store_result why = {0};
  if (w == NULL) {
    set_err(&why, "out of memory%s", NULL);
    pipe_fail(np, &why);
    return -1;
  }
  if (redisAppendCommand(np->k.c, "WAIT %d %lld", cfg->min_replicas,
                         (long long)cfg->replica_timeout_ms) != REDIS_OK) {
    free(w);
    set_err(&why, "out of memory%s", NULL);
    pipe_fail(np, &why);
    return -1;
  }
  /* WAIT may take --replica-timeout-ms by design: only past that and the
   * command timeout is its silence a dead Redis. */
  w->entry.phase = PHASE_WAIT;
  w->entry.deadline_ms = clock_mono_ms() + cfg->redis_timeout_ms + cfg->replica_timeout_ms;
  np->tail->next = &w->entry; /* the batch is not empty */
  np->tail = &w->entry;
  if (np->waits_tail) np->waits_tail->next = w;
  else np->waits = w;
  np->waits_tail = w;
  return 0;
}

static void store_redis_pipe_flush(store_pipe *p) {
  for (int i = 0; i < p->nall; i++) {
    node_pipe *np = p->all[i];
    if (np->unsent == NULL) continue;
    long n = np->unsent_n;
    int guard = np->unsent_guarded > 0;
    np->unsent = NULL;
    np->unsent_n = np->unsent_guarded = 0;
    if (guard && pipe_append_wait(np) < 0) continue;
    /* The socket blocks (up to --redis-timeout-ms): a round trip's
     * commands fit the socket buffer unless Redis has stopped reading,
     * and then every call on it is lost anyway. */
    int done = 0;
    while (!done)
      if (redisBufferWrite(np->k.c, &done) != REDIS_OK) {
        pipe_fail_transport(np);
        break;
      }
    if (!done) continue;
    metrics_inc(M_REDIS_PIPELINE_BATCHES);
    metrics_add(M_REDIS_PIPELINE_CALLS, n);
  }
}

static int store_redis_pipe_fd(const store_pipe *p, unsigned long *opens) {
  *opens = 1; /* the epoll set is the pipe's for its whole life */
  return p->ep;
}

static int64_t store_redis_pipe_timeout_ms(const store_pipe *p) {
  int64_t at = -1;
  for (int i = 0; i < p->nall; i++)
    if (p->all[i]->head && (at < 0 || p->all[i]->head->deadline_ms < at))
      at = p->all[i]->head->deadline_ms;
  for (const store_op *op = p->retry; op; op = op->next)
    if (at < 0 || op->retry_at_ms < at) at = op->retry_at_ms;
  if (at < 0) return -1;
  int64_t left = at - clock_mono_ms();
  return left > 0 ? left : 0;
}

/* A call the pipe makes for itself: a count update (see PHASE_NOTE), or
 * the release that takes back a grant the replicas did not acknowledge.
 * Owned by the pipe: freed by its done, which logs a failure. */
typedef struct {
  store_op op;
  char name[PICKET_PROTO_NAME_MAX + 1];
  char token[PICKET_PROTO_NAME_MAX + 1]; /* token names are shorter (AUTH_NAME_MAX) */
  char lease[PICKET_PROTO_LEASE_LEN + 1];
} pipe_own;

static void pipe_own_done(store_op *op) {
  if (op->st != STORE_OK && op->phase == PHASE_NOTE) note_failed(op);
  else if (op->st != STORE_OK && op->st != STORE_LOST)
    LOG(LOG_WARN, "lock %s: an unreplicated grant was not taken back (%s); it expires with "
                  "its TTL", op->name, op->r.err);
  free(op->arg);
}

/* A call of the pipe's own about `of`, queued; `set` fills in what it is. */
static void pipe_own_send(store_pipe *p, const store_op *of, store_op call) {
  pipe_own *n = calloc(1, sizeof *n);
  if (n == NULL) {
    LOG(LOG_WARN, "lock %s: %s (out of memory): it expires with the lease", of->name,
        call.phase == PHASE_NOTE ? "token's lease count not updated" : "unreplicated grant "
                                                                       "not taken back");
    return;
  }
  snprintf(n->name, sizeof n->name, "%s", of->name);
  if (of->token) snprintf(n->token, sizeof n->token, "%s", of->token);
  if (of->lease) snprintf(n->lease, sizeof n->lease, "%s", of->lease);
  n->op = call;
  n->op.name = n->name;
  n->op.token = of->token ? n->token : NULL;
  n->op.lease = of->lease ? n->lease : NULL;
  n->op.max_leases = of->max_leases;
  n->op.done = pipe_own_done;
  n->op.arg = n;
  if (n->op.phase == PHASE_CALL) phase_begin(&n->op);
  if (pipe_submit(p, &n->op) < 0) pipe_own_done(&n->op);
}

static void pipe_note_send(store_pipe *p, const store_op *of, const char *verb) {
  pipe_own_send(p, of, (store_op){.kind = of->kind, .ttl_ms = of->ttl_ms, .phase = PHASE_NOTE,
                                  .note = verb});
}

static void undo_piped(void *p, const store_op *of) {
  pipe_own_send(p, of, (store_op){.kind = store_op_release_of(of->kind)});
}

/* op's reply for its current phase is in (op->st set): sends its next
 * phase, or completes it (and sends the count update it calls for). */
static void pipe_complete(store_pipe *p, store_op *op) {
  if (phase_take_done(op)) {
    if (pipe_submit(p, op) < 0) op->done(op);
    return;
  }
  const char *verb = phase_note_of(op);
  if (verb) pipe_note_send(p, op, verb);
  op->done(op);
}

/* A WAIT's reply: the calls it covers complete, or fail when fewer than
 * --min-replicas acknowledged. Frees rep and w. */
static void wait_reply(store_pipe *p, node_pipe *np, pipe_wait *w, redisReply *rep) {
  store_result why = {0};
  store_status st = STORE_OK;
  if (rep->type == REDIS_REPLY_ERROR) {
    st = error_reply(np->k.node, rep->str, &why);
  } else if (rep->type != REDIS_REPLY_INTEGER || rep->integer < cfg->min_replicas) {
    snprintf(why.err, sizeof why.err, "only %lld of %d replicas acknowledged within %lld ms",
             rep->type == REDIS_REPLY_INTEGER ? (long long)rep->integer : 0LL,
             cfg->min_replicas, (long long)cfg->replica_timeout_ms);
    st = STORE_ENOTREPL;
  }
  freeReplyObject(rep);
  for (store_op *op = w->held, *next; op; op = next) {
    next = op->next;
    if (st != STORE_OK) {
      if (st == STORE_ENOTREPL) metrics_inc(M_REDIS_ERR_NOT_REPLICATED);
      op->st = st;
      memcpy(op->r.err, why.err, sizeof why.err);
      guard_refused(op, undo_piped, p);
    }
    pipe_complete(p, op);
  }
  free(w);
}

/* Completes each call of np whose reply is in. */
static void node_pipe_read(store_pipe *p, node_pipe *np) {
  pipe_check_primary(np);
  if (np->k.c == NULL) return;
  /* One read: called when the socket is readable, so it does not block. */
  if (redisBufferRead(np->k.c) != REDIS_OK) {
    pipe_fail_transport(np);
    return;
  }
  int noscript_logged = 0;
  for (;;) {
    redisReply *rep = NULL;
    if (np->k.c == NULL) return; /* failed meanwhile (a resend to this node) */
    if (redisGetReplyFromReader(np->k.c, (void **)&rep) != REDIS_OK) {
      pipe_fail_transport(np);
      return;
    }
    if (rep == NULL) return; /* the rest has not arrived yet */
    store_op *op = np->head;
    if (op == NULL || op == np->unsent) { /* a reply to nothing sent: out of step */
      freeReplyObject(rep);
      store_result why = {0};
      set_err(&why, "Redis sent a reply nobody asked for%s", NULL);
      pipe_fail(np, &why);
      return;
    }
    if (op->asking) { /* ASKING's +OK: the call's own reply comes next */
      op->asking = 0;
      freeReplyObject(rep);
      continue;
    }
    np->head = op->next;
    if (np->head == NULL) np->tail = NULL;
    if (op->phase == PHASE_WAIT) { /* the oldest outstanding WAIT */
      np->waits = np->waits->next;
      if (np->waits == NULL) np->waits_tail = NULL;
      wait_reply(p, np, (pipe_wait *)op, rep);
      continue;
    }
    if (is_noscript(rep)) {
      /* Redis lost its scripts (a restart, SCRIPT FLUSH): run the call
       * again on the thread's direct connection, which reloads it (and
       * WAITs there, if it must). Rare enough to block the loop for. */
      freeReplyObject(rep);
      if (!noscript_logged++)
        LOG(LOG_INFO, "Redis lost script %s (restart or SCRIPT FLUSH); reloading",
            script_name[op_script_of(op)]);
      op->st = op_run(op);
      guard_direct(op);
      pipe_complete(p, op);
      continue;
    }
    int64_t wait_ms;
    int next = follow(op, np->k.node, rep, &wait_ms);
    if (next == FOLLOW_GIVE_UP) {
      op->st = op_parse(op, rep);
      if (guarded(op)) {
        /* Held for the WAIT written after its batch, the oldest one
         * outstanding (replies come in order). */
        pipe_wait *w = np->waits;
        if (w == NULL) { /* cannot happen: its flush wrote a WAIT after it */
          op->st = STORE_ENOTREPL;
          set_err(&op->r, "no WAIT followed the call%s", NULL);
          guard_refused(op, undo_piped, p);
          pipe_complete(p, op);
          continue;
        }
        op->next = NULL;
        if (w->held_tail) w->held_tail->next = op;
        else w->held = op;
        w->held_tail = op;
      } else {
        pipe_complete(p, op);
      }
    } else if (wait_ms > 0) {
      op->retry_at_ms = clock_mono_ms() + wait_ms;
      op->next = p->retry;
      p->retry = op;
    } else {
      pipe_resend(p, op, next);
    }
  }
}

static void store_redis_pipe_read(store_pipe *p) {
  struct epoll_event evs[64];
  int n = epoll_wait(p->ep, evs, 64, 0);
  for (int i = 0; i < n; i++) node_pipe_read(p, evs[i].data.ptr);
}

static void store_redis_pipe_expire(store_pipe *p) {
  int64_t now = clock_mono_ms();
  for (int i = 0; i < p->nall; i++) {
    node_pipe *np = p->all[i];
    pipe_check_primary(np);
    if (np->head == NULL || now < np->head->deadline_ms) continue;
    store_result why = {0};
    snprintf(why.err, sizeof why.err, "Redis timed out after %lld ms",
             (long long)(cfg->redis_timeout_ms +
                         (np->head->phase == PHASE_WAIT ? cfg->replica_timeout_ms : 0)));
    pipe_fail(np, &why);
  }
  /* The TRYAGAIN calls whose backoff has passed (taken off the list
   * first: a resend may put one back). */
  store_op *due = NULL;
  for (store_op **pp = &p->retry; *pp;) {
    store_op *op = *pp;
    if (op->retry_at_ms <= now) {
      *pp = op->next;
      op->next = due;
      due = op;
    } else {
      pp = &op->next;
    }
  }
  for (store_op *op = due, *next; op; op = next) {
    next = op->next;
    pipe_resend(p, op, FOLLOW_ROUTE);
  }
}

static int startup_check(int id, char *err, size_t errlen);

static int store_redis_init(const config *c, char *err, size_t errlen) {
  cfg = c;
  /* The node table and its watcher know each other only through the
   * kick set here: the table is filled by the watcher, and asks it to
   * look again through the pointer. */
  node_init(cfg);
  feed_init(cfg);
  if (cfg->cluster_seed_count > 0) {
    if (cluster_start(cfg, err, errlen) < 0) return -1;
    node_set_kick(cluster_kick);
  } else if (cfg->sentinel_count > 0) {
    if (sentinel_start(cfg, err, errlen) < 0) return -1;
    node_set_kick(sentinel_kick);
  }
  picket_proto_channel(channel, sizeof channel, cfg->key_prefix);
  floor_arg = cfg->fence_floor == FENCE_FLOOR_CLOCK ? "clock" : "none";
  snprintf(idle_arg, sizeof idle_arg, "%lld", (long long)cfg->fence_idle_ttl_ms);
  if (pthread_key_create(&conn_key, conn_destroy) != 0) {
    snprintf(err, errlen, "pthread_key_create failed");
    return -1;
  }
  if (cfg->fence_floor == FENCE_FLOOR_CLOCK)
    LOG(LOG_INFO, "fences are floored by Redis's clock: a lost counter (restart without AOF, "
                  "FLUSHALL, eviction, failover to a replica behind) never sends a fence back, "
                  "while Redis's clock does not step back. Not covered: a failover that loses a "
                  "grant can leave two live leases; fenced storage is what keeps that safe");
  node_shard sh[NODE_MAX];
  int n = node_shards(sh, NODE_MAX);
  if (n == 0) LOG(LOG_WARN, "no Redis primary known yet; serving 503 until one answers");
  /* Every shard is checked: any one that evicts could lose its locks'
   * fence counters. */
  for (int i = 0; i < n; i++)
    if (startup_check(sh[i].id, err, errlen) < 0) return -1;
  return 0;
}

/* The startup check of node id: -1 (why in err) when it evicts keys and
 * --allow-eviction is off; 0 otherwise, also when it cannot be reached. */
static int startup_check(int id, char *err, size_t errlen) {
  store_result r = {0};
  unsigned long gen;
  redisContext *rc = redis_open(id, &r, &gen);
  if (rc == NULL) {
    LOG(LOG_WARN, "%s; serving 503 until Redis answers", r.err);
    return 0;
  }
  info_facts f;
  const char *policy = f.policy;
  if (info_read(rc, &f) < 0 || f.other_error) {
    LOG(LOG_WARN, "Redis %s during the startup check: %s; maxmemory-policy is checked when it "
                  "answers, and lock calls get 503 until then",
        f.other_error ? "refused INFO" : "connection failed", f.other_error ? f.err : rc->errstr);
  } else if (f.policy[0] == '\0' && !cfg->allow_eviction) {
    snprintf(err, errlen, "cannot read Redis maxmemory-policy (INFO refused, or it has no "
                          "maxmemory_policy): allow picketd's Redis user INFO (see "
                          "deploy/users.acl), or start with --allow-eviction");
    redisFree(rc);
    return -1;
  } else {
    if (!*policy) policy = "unreadable (INFO refused)"; /* and --allow-eviction is set */
    int counters = strncmp(policy, "volatile-", 9) != 0; /* allkeys-* (or unknown) */
    if (policy_evicts(policy) && !cfg->allow_eviction) {
      snprintf(err, errlen,
               counters ? "Redis maxmemory-policy is %s, which can evict fence counters and "
                          "break fences; set it to noeviction (or start with --allow-eviction)"
                        : "Redis maxmemory-policy is %s, which can evict a live lease and free "
                          "a lock its holder still holds; set it to noeviction (or start with "
                          "--allow-eviction)",
               policy);
      redisFree(rc);
      return -1;
    }
    if (policy_evicts(policy))
      LOG(LOG_WARN, counters ? "Redis maxmemory-policy is %s and --allow-eviction is set: an "
                               "evicted fence counter restarts that lock's fences"
                             : "Redis maxmemory-policy is %s and --allow-eviction is set: a live "
                               "lease may be evicted (the lock frees early; fences still protect "
                               "storage)",
          policy);
    if (cfg->fence_floor == FENCE_FLOOR_NONE && f.aof == 0)
      LOG(LOG_WARN, "Redis appendonly is no: a Redis restart loses the fence counters, and "
                    "fenced storage then rejects every new holder until fences catch up "
                    "(--fence-floor clock avoids it)");
  }
  redisFree(rc);
  return 0;
}

const store_backend store_redis_backend = {
    .name = "redis",
    .init = store_redis_init,
    .thread_done = store_redis_thread_done,
    .ready = store_redis_ready,
    .stop = store_redis_stop,
    .feed_start = store_redis_feed_start,
    .feed_want = store_redis_feed_want,
    .feed_stop = store_redis_feed_stop,
    .run = store_redis_run,
    .pipeline_enabled = store_redis_pipeline_enabled,
    .pipeline_forced = store_redis_pipeline_forced,
    .pipe_new = store_redis_pipe_new,
    .pipe_connect = store_redis_pipe_connect,
    .pipe_free = store_redis_pipe_free,
    .pipe_append = store_redis_pipe_append,
    .pipe_flush = store_redis_pipe_flush,
    .pipe_fd = store_redis_pipe_fd,
    .pipe_read = store_redis_pipe_read,
    .pipe_timeout_ms = store_redis_pipe_timeout_ms,
    .pipe_expire = store_redis_pipe_expire,
    .list = store_redis_list,
    .break_lock = store_redis_break,
    .events_new = store_redis_events_new,
    .events_free = store_redis_events_free,
    .events_add = store_redis_events_add,
    .events_remove = store_redis_events_remove,
    .events_run = store_redis_events_run,
    .events_fd = store_redis_events_fd,
};
