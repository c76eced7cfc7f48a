/* direct.c: a Redis call made directly, on the calling thread's own
 * connection (conn.c): the thread is blocked for the round trip, the
 * redirections under --redis-cluster (redirect.c) and the WAIT of
 * --min-replicas. The codec (codec.c) builds what is sent and reads what
 * comes back. Operators' calls (operators.c) and, on the --store-workers
 * threads, every call when pipelining is off come here; a pipe never
 * does (its loop must not wait).
 *
 * The replica guard lives here too: a grant or renewal that fewer than
 * --min-replicas acknowledged is refused, and a new grant is taken back.
 * The pipe guards its calls with one WAIT per batch but takes grants back
 * through the same functions. */
#include "direct.h"

#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "clock.h"
#include "codec.h"
#include "conn.h"
#include "lease_count.h"
#include "log.h"
#include "node.h"
#include "redirect.h"
#include "redis.h"
#include "stats.h"

static struct timeval ms_tv(int64_t ms) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
  return tv;
}

/* Sends cmd on k (after ASKING when op->asking) and reads the reply; on
 * NOSCRIPT loads the script and sends once more. NULL with *st set on a
 * transport failure or a refused SCRIPT LOAD. */
static redisReply *call_once(conn *k, store_op *op, op_command *cmd, store_status *st) {
  for (int attempt = 0;; attempt++) {
    redisReply *rep = NULL, *asked = NULL;
    if (redis_op_of(op)->asking) {
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
      *st = conn_transport_error(k, &op->r);
      return NULL;
    }
    if (!codec_is_noscript(rep) || attempt == 1) return rep;
    freeReplyObject(rep);
    int s = codec_script_of(op);
    LOG(LOG_INFO, "Redis lost script %s (restart or SCRIPT FLUSH); reloading",
        codec_script_name[s]);
    if (conn_load_script(k, s, &op->r) < 0) {
      *st = k->c->err ? conn_transport_error(k, &op->r) : STORE_EREPLY;
      return NULL;
    }
  }
}

/* Runs op's script on the calling thread's connection to its node: one
 * round trip, plus a SCRIPT LOAD and a second try on NOSCRIPT, and under
 * --redis-cluster the redirections followed (redirect.c). op->node is the
 * node that answered, for the WAIT of --min-replicas. */
store_status direct_run(store_op *op) {
  redis_op *ro = redis_op_of(op);
  op_command cmd;
  if (codec_build(op, &cmd) < 0) return codec_bad_name(&op->r);
  ro->call_deadline_ms = clock_mono_ms() + store_redis_cfg->redis_timeout_ms;
  ro->hops = ro->asking = 0;
  ro->backoff_ms = TRYAGAIN_MIN_MS;
  int next = FOLLOW_ROUTE;
  for (;;) {
    int id = next >= 0 ? next : redirect_route(op, &cmd);
    if (id < 0) return STORE_EUNAVAIL;
    ro->node = id;
    store_status st;
    conn *k = conn_for_calls(id, &op->r, &st);
    if (k == NULL) return st;
    conn_bind(&cmd, k, op);
    redisReply *rep = call_once(k, op, &cmd, &st);
    ro->asking = 0;
    if (rep == NULL) return st;
    if (!node_current(id, k->gen, k->lease_epoch, op->r.err, sizeof op->r.err))
      return conn_primary_moved(k, rep, &op->r);
    int64_t wait_ms;
    if ((next = redirect_follow(op, id, rep, &wait_ms)) == FOLLOW_GIVE_UP)
      return codec_parse(op, rep);
    if (wait_ms > 0) {
      struct timespec ts = {0, (long)wait_ms * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
}

/* Waits for --min-replicas to acknowledge the writes of this thread's
 * connection to node `id`: the shard that took the grant. */
static store_status wait_replicas(int id, store_result *r) {
  if (store_redis_cfg->min_replicas <= 0) return STORE_OK;
  conn *k = conn_current(id);
  if (k == NULL || k->c == NULL) {
    set_err(r, "Redis connection lost before WAIT%s", NULL);
    return STORE_EUNAVAIL;
  }
  /* WAIT blocks for up to --replica-timeout-ms by design: allow that on
   * top of the command timeout, or a long WAIT would look like a dead
   * Redis (store_unavailable and a reconnect instead of not_replicated). */
  redisSetTimeout(k->c,
                  ms_tv(store_redis_cfg->redis_timeout_ms + store_redis_cfg->replica_timeout_ms));
  redisReply *rep = redisCommand(k->c, "WAIT %d %lld", store_redis_cfg->min_replicas,
                                 (long long)store_redis_cfg->replica_timeout_ms);
  redisSetTimeout(k->c, ms_tv(store_redis_cfg->redis_timeout_ms));
  if (rep == NULL) return conn_transport_error(k, r);
  if (!node_current(id, k->gen, k->lease_epoch, r->err, sizeof r->err))
    return conn_primary_moved(k, rep, r);
  store_status st = STORE_OK;
  if (rep->type == REDIS_REPLY_ERROR) {
    st = codec_error(id, rep->str, r);
  } else if (rep->type != REDIS_REPLY_INTEGER || rep->integer < store_redis_cfg->min_replicas) {
    snprintf(r->err, sizeof r->err, "only %lld of %d replicas acknowledged within %lld ms",
             rep->type == REDIS_REPLY_INTEGER ? (long long)rep->integer : 0LL,
             store_redis_cfg->min_replicas, (long long)store_redis_cfg->replica_timeout_ms);
    redis_stats_inc(REDIS_STAT_ERR_NOT_REPLICATED);
    st = STORE_ENOTREPL;
  }
  freeReplyObject(rep);
  return st;
}

/* 1 when op's outcome must reach --min-replicas before it is passed on:
 * a grant or a renewal (a refusal wrote nothing that matters; a release
 * that is lost in a failover only leaves a lease to its TTL). */
int direct_guarded(const store_op *op) {
  store_op_kind base = store_op_base(op->kind);
  return store_redis_cfg->min_replicas > 0 && redis_op_view(op)->phase == PHASE_CALL &&
         op->st == STORE_OK &&
         (base == STORE_OP_ACQUIRE || base == STORE_OP_RENEW || base == STORE_OP_BREAK);
}

/* A guarded call that the replicas did not acknowledge (op->st says why):
 * a new grant is taken back, so no caller ever holds a grant that another
 * could get after a promotion. A same-lease retry only refreshed a grant
 * made (and replicated) before: it stays, as a renewal that was not
 * replicated does. undo(op) runs the release, on a direct connection or
 * on the pipe. */
void direct_guard_refused(store_op *op, void (*undo)(void *, const store_op *), void *arg) {
  if (store_op_base(op->kind) != STORE_OP_ACQUIRE || !op->r.created) return;
  undo(arg, op);
  redis_op_of(op)->quota_added = 0; /* the undo dropped the count */
}


static void undo_direct(void *arg, const store_op *op) {
  (void)arg;
  store_op undo = {.kind = store_op_release_of(op->kind), .name = op->name, .lease = op->lease,
                   .token = op->token, .max_leases = op->max_leases};
  store_redis_run(&undo); /* a failure leaves the lease to its TTL */
}

/* The replica guard on the calling thread's direct connection, which made
 * op's write: WAIT, and the undo when it falls short. */
void direct_guard(store_op *op) {
  if (!direct_guarded(op)) return;
  op->st = wait_replicas(redis_op_of(op)->node, &op->r);
  if (op->st != STORE_OK) direct_guard_refused(op, undo_direct, NULL);
}

/* A direct call: the script (after the count's take, under a cluster),
 * then (grants and renewals) the replica guard, then any count update. */
void store_redis_run(store_op *op) {
  memset(&op->r, 0, sizeof op->r);
  lease_count_begin(op);
  do op->st = direct_run(op);
  while (lease_count_taken(op));
  direct_guard(op);
  const char *verb = lease_count_note_of(op);
  if (verb) {
    store_op note = {.kind = op->kind, .name = op->name, .lease = op->lease, .token = op->token,
                     .max_leases = op->max_leases, .ttl_ms = op->ttl_ms};
    lease_count_note(&note, verb);
    if (direct_run(&note) != STORE_OK) lease_count_note_failed(&note);
  }
}
