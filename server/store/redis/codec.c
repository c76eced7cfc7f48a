/* codec.c: one Redis call, its command and its reply. For a store_op it
 * builds the EVALSHA of the script of proto/redis that the call's kind
 * runs (the keys, the arguments), and it reads that script's reply back
 * into the op's store_result and a store status, error replies included.
 *
 * It holds no connection and sends nothing: the direct path (direct.c)
 * and the pipe (pipe.c) send what it builds and hand it what comes back.
 * So the codec can be linked and tested alone (tests/unit/test_codec.c),
 * on replies built by hand. */
#include "codec.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "lease_count.h"
#include "log.h"
#include "metrics.h"
#include "node.h"
#include "redis.h"
#include "stats.h"

const char *const codec_script_src[SCRIPT_COUNT] = {
    picket_proto_lua_acquire, picket_proto_lua_renew,     picket_proto_lua_release,
    picket_proto_lua_inspect, picket_proto_lua_quota,     picket_proto_lua_semaphore,
    picket_proto_lua_sem_inspect, picket_proto_lua_rwlock, picket_proto_lua_rw_inspect,
    picket_proto_lua_list, picket_proto_lua_break, picket_proto_lua_watch};
const char *const codec_script_name[SCRIPT_COUNT] = {
    "acquire", "renew", "release", "inspect", "quota", "semaphore", "sem_inspect", "rwlock",
    "rw_inspect", "list", "break", "watch"};
const config *store_redis_cfg;

/* The release channel the scripts publish on (P:released). */
static char channel[PICKET_PROTO_KEY_PREFIX_MAX + 16];
/* The scripts' fence arguments, fixed by the config: --fence-floor and
 * --fence-idle-ttl-ms as the scripts take them (acquire.lua). */
static const char *floor_arg;
static char idle_arg[24];

void codec_init(const config *cfg) {
  store_redis_cfg = cfg;
  picket_proto_channel(channel, sizeof channel, cfg->key_prefix);
  floor_arg = cfg->fence_floor == FENCE_FLOOR_CLOCK ? "clock" : "none";
  snprintf(idle_arg, sizeof idle_arg, "%lld", (long long)cfg->fence_idle_ttl_ms);
}

/* ---- error replies -------------------------------------------------- */

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
store_status codec_error(int node, const char *msg, store_result *r) {
  static const char *const transient[] = {"LOADING", "BUSY", "READONLY", "MASTERDOWN",
                                          "TRYAGAIN", "CLUSTERDOWN", "MOVED ", "ASK ", NULL};
  char clean[200];
  snprintf(clean, sizeof clean, "%s", msg);
  char *script = strstr(clean, " script:");
  if (script) *script = '\0'; /* drop Redis's "script: <sha>, on @user_script:N." */
  static const char counter[] = "PICKET_COUNTER "; /* acquire.lua: no fence left */
  if (strncmp(clean, counter, sizeof counter - 1) == 0) {
    set_err(r, "%s", clean + sizeof counter - 1);
    redis_stats_inc(REDIS_STAT_ERR_REPLY);
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
    redis_stats_inc(REDIS_STAT_ERR_MISCONFIGURED);
    return STORE_EMISCONF;
  }
  if (strncmp(msg, "OOM", 3) == 0) {
    /* maxmemory with noeviction: a 503 the operator can act on (and
     * /readyz says so), not a 502 as if the request were wrong. */
    set_err(r, "Redis is at its maxmemory, out of memory: %s", clean);
    redis_stats_inc(REDIS_STAT_ERR_FULL);
    return STORE_EFULL;
  }
  for (int i = 0; transient[i]; i++)
    if (strncmp(msg, transient[i], strlen(transient[i])) == 0) {
      node_trouble(node); /* READONLY: a demoted primary; LOADING: a restarted one */
      set_err(r, "Redis cannot serve now: %s", clean);
      redis_stats_inc(REDIS_STAT_ERR_UNAVAILABLE);
      return STORE_EUNAVAIL;
    }
  set_err(r, "Redis error: %s", clean);
  redis_stats_inc(REDIS_STAT_ERR_REPLY);
  return STORE_EREPLY;
}
/* ---- the command ---------------------------------------------------- */

static const int op_script[] = {
    [STORE_OP_ACQUIRE] = SCRIPT_ACQUIRE,   [STORE_OP_RENEW] = SCRIPT_RENEW,
    [STORE_OP_RELEASE] = SCRIPT_RELEASE,   [STORE_OP_INSPECT] = SCRIPT_INSPECT,
    [STORE_OP_SEM_ACQUIRE] = SCRIPT_SEM,   [STORE_OP_SEM_RENEW] = SCRIPT_SEM,
    [STORE_OP_SEM_RELEASE] = SCRIPT_SEM,   [STORE_OP_SEM_INSPECT] = SCRIPT_SEM_INSPECT,
    [STORE_OP_RW_ACQUIRE] = SCRIPT_RW,     [STORE_OP_RW_RENEW] = SCRIPT_RW,
    [STORE_OP_RW_RELEASE] = SCRIPT_RW,     [STORE_OP_RW_INSPECT] = SCRIPT_RW_INSPECT,
    [STORE_OP_RW_FORGET] = SCRIPT_RW,      [STORE_OP_BREAK] = SCRIPT_BREAK,
    [STORE_OP_LIST] = SCRIPT_LIST,         [STORE_OP_WATCH] = SCRIPT_WATCH};
int codec_script_of(const store_op *op) {
  return redis_op_view(op)->phase == PHASE_CALL ? op_script[op->kind] : SCRIPT_QUOTA;
}

/* The index of held names (proto/redis/list.lua) that name's keys go
 * with: P:index on one Redis; under Redis Cluster the index of the hash
 * slot (name NULL: of index_slot), in that slot. */
static void index_key_build(char out[KEY_MAX], const char *name, int index_slot) {
  if (!node_is_cluster()) {
    snprintf(out, KEY_MAX, "%sindex", store_redis_cfg->key_prefix);
    return;
  }
  int slot = index_slot;
  if (name) {
    char tag[PICKET_PROTO_NAME_MAX + 3];
    int n = snprintf(tag, sizeof tag, "{%s}", name);
    slot = node_key_slot(tag, (size_t)n);
  }
  snprintf(out, KEY_MAX, "%s{%s}:index", store_redis_cfg->key_prefix, node_slot_tag(slot));
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
  if ((rw ? picket_proto_key_rw : picket_proto_key_sem)(cmd->lease_key, KEY_MAX,
                                                        store_redis_cfg->key_prefix, op->name) < 0)
    return -1;
  snprintf(cmd->limit, sizeof cmd->limit, "%lld", (long long)op->limit);
  if (store_op_base(op->kind) == STORE_OP_INSPECT && op->kind != STORE_OP_RW_FORGET) {
    a[n++] = "1", a[n++] = cmd->lease_key, a[n++] = cmd->limit;
    cmd->argc = n;
    return 0;
  }
  static const char *const verbs[] = {"acquire", "renew", "release"};
  /* Lock-delay and the hold cap are kept by hold.lua, embedded in front of
   * acquire.lua, renew.lua and release.lua: the key outlives an expired
   * lease by its delay (409 lock_delay until then). */
  snprintf(cmd->delay, sizeof cmd->delay, "%lld", (long long)op->lock_delay_ms);
  snprintf(cmd->cap, sizeof cmd->cap, "%lld", (long long)op->max_hold_ms);
  snprintf(cmd->wake, sizeof cmd->wake, "%c/%s", rw ? 'r' : 's', op->name);
  snprintf(cmd->wait, sizeof cmd->wait, "%lld", (long long)op->wait_ms);
  snprintf(cmd->readers, sizeof cmd->readers, "%lld", (long long)store_redis_cfg->max_readers);
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
 * (argv[1]) is the connection's: conn_bind sets it once one is chosen.
 * cmd->lease_key is the key the call is routed by (the token's key in a
 * quota phase): every key of one call shares its hash tag, except the
 * token's key outside a cluster, where slots do not matter. */
int codec_build(const store_op *op, op_command *cmd) {
  const redis_op *ro = redis_op_view(op);
  int quota = lease_count_counts(op);
  if (quota && picket_proto_key_token_leases(cmd->token_key, KEY_MAX, store_redis_cfg->key_prefix,
                                             op->token) < 0)
    return -1;
  snprintf(cmd->ttl, sizeof cmd->ttl, "%lld", (long long)op->ttl_ms);
  if (quota) snprintf(cmd->max, sizeof cmd->max, "%lld", (long long)op->max_leases);
  const char **a = cmd->argv;
  int n = 0;
  a[n++] = "EVALSHA";
  a[n++] = NULL; /* conn_bind */
  quota_member(op, cmd);
  if (ro->phase != PHASE_CALL) { /* quota.lua (token_key; verb, member, ttl, max) */
    memcpy(cmd->lease_key, cmd->token_key, sizeof cmd->lease_key);
    a[n++] = "1", a[n++] = cmd->token_key;
    a[n++] = ro->phase == PHASE_TAKE ? "take" : ro->note, a[n++] = cmd->member;
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
    a[n++] = "1", a[n++] = cmd->index_key, a[n++] = store_redis_cfg->key_prefix, a[n++] = op->after;
    a[n++] = op->name, a[n++] = cmd->limit, a[n++] = cmd->look;
    cmd->argc = n;
    return 0;
  }
  if (op->kind == STORE_OP_WATCH) { /* watch.lua (lease key; for ms) */
    if (picket_proto_key_lease(cmd->lease_key, KEY_MAX, store_redis_cfg->key_prefix, op->name) < 0)
      return -1;
    a[n++] = "1", a[n++] = cmd->lease_key, a[n++] = cmd->ttl;
    cmd->argc = n;
    return 0;
  }
  if (op->kind >= STORE_OP_SEM_ACQUIRE && op->kind != STORE_OP_BREAK)
    return family_command_build(op, cmd, inline_quota);
  if (picket_proto_key_lease(cmd->lease_key, KEY_MAX, store_redis_cfg->key_prefix, op->name) < 0 ||
      picket_proto_key_fence(cmd->fence_key, KEY_MAX, store_redis_cfg->key_prefix, op->name) < 0)
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
    case STORE_OP_BREAK: /* (floor, idle, channel, name, who, fence) */
      snprintf(cmd->ttl, sizeof cmd->ttl, "%lld", (long long)op->fence);
      a[n++] = floor_arg, a[n++] = idle_arg, a[n++] = channel, a[n++] = op->name;
      a[n++] = op->who ? op->who : "", a[n++] = cmd->ttl;
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
/* ---- the reply ------------------------------------------------------ */

store_status codec_bad_name(store_result *r) {
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
store_status codec_parse(store_op *op, redisReply *rep) {
  redis_op *ro = redis_op_of(op);
  store_result *r = &op->r;
  store_status st = STORE_OK;
  if (rep->type == REDIS_REPLY_ERROR) {
    st = codec_error(ro->node, rep->str, r);
    if (ro->slot >= 0 && (strncmp(rep->str, "CLUSTERDOWN", 11) == 0 ||
                          strncmp(rep->str, "TRYAGAIN", 8) == 0)) {
      /* Name the slot: which shard is down (or mid-migration for longer
       * than --redis-timeout-ms) is what an operator needs. */
      char detail[200];
      snprintf(detail, sizeof detail, "%.199s", r->err);
      snprintf(r->err, sizeof r->err, "Redis Cluster slot %d: %.200s", ro->slot, detail);
    }
    freeReplyObject(rep);
    return st;
  }
  redis_stats_up(1);
  node_ok(ro->node);
  redisReply **e = rep->element;
  if (ro->phase != PHASE_CALL) { /* quota.lua: take 0, 1 or 2; touch, drop 1 */
    if (!is_int(rep) || rep->integer < 0 || rep->integer > 2) goto odd;
    if (rep->integer == 0) st = STORE_EQUOTA;
    ro->quota_added = rep->integer == 1;
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
      if (e[0]->integer == 2) { /* another fence's grant, left alone: its PTTL */
        st = STORE_HELD;
        r->ttl_ms = r->at;
        r->at = 0;
      }
      tamper_repaired(op, e[3]);
      r->at = e[4]->integer;
      break;
    case STORE_OP_LIST:
      if (rep->type != REDIS_REPLY_ARRAY || (st = list_parse(op, rep)) == STORE_EREPLY) goto odd;
      break;
    case STORE_OP_WATCH:
      if (!is_int(rep)) goto odd;
      break;
    case STORE_OP_READY: /* no script: store.c makes it store_ready */
      goto odd;
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
  set_err(r, "unexpected reply from the %s script", codec_script_name[codec_script_of(op)]);
  redis_stats_inc(REDIS_STAT_ERR_REPLY);
  return STORE_EREPLY;
}

int codec_is_noscript(const redisReply *rep) {
  return rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0;
}
