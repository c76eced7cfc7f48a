/* pipe.c: pipelined calls on Redis (store.h's store_pipe).
 *
 * A store_pipe belongs to one HTTP event loop and has connections of its
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
 * it on the pipe's retry list until its backoff passes.
 *
 * Nothing here waits on Redis, so the loop never does: a lane (lane.c)
 * connects and sets itself up in the background, with the calls appended
 * meanwhile queued behind its setup, and writes what its socket takes. A
 * call that meets NOSCRIPT (SCRIPT FLUSH) is sent again on its lane behind
 * a SCRIPT LOAD of its script (NOSCRIPT comes before the script runs, so
 * it ran nowhere); EVAL would do without the load but is not in the
 * least-privilege ACL (deploy/users.acl). What is left: resolving a host
 * name (getaddrinfo, in hiredis's connect) still blocks; give --redis an
 * address to avoid it. */
#include "pipe.h"

#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h"
#include "codec.h"
#include "conn.h"
#include "direct.h"
#include "lane.h"
#include "lease_count.h"
#include "log.h"
#include "metrics.h"
#include "node.h"
#include "redirect.h"
#include "redis.h"
#include "stats.h"

/* Connections per node and pipe: enough for a WAIT per pass to be in
 * flight while the next passes go out (a replica's acknowledgement takes
 * about one round trip; a pass of a busy loop is shorter), and few enough
 * that --threads loops cannot crowd Redis's maxclients. */
#define LANES_MAX 8

struct store_pipe {
  int ep;                                /* the lanes' sockets */
  node_pipe *lanes[NODE_MAX][LANES_MAX]; /* by node id, made on first use */
  node_pipe *all[NODE_MAX * LANES_MAX];  /* every lane made, to walk them */
  int nall;
  store_op *retry;                       /* TRYAGAIN: sent again at their retry_at_ms */
};

int store_redis_pipeline_enabled(void) { return store_redis_cfg->redis_pipeline != PIPELINE_OFF; }

store_pipe *store_redis_pipe_new(void) {
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
 * last WAIT ends first (a batch there waits for all of that lane's).
 * NULL (r->err set) when out of memory. */
static node_pipe *lane_for(store_pipe *p, int id, store_result *r) {
  node_pipe *soonest = NULL;
  for (int j = 0; j < LANES_MAX; j++) {
    node_pipe *np = p->lanes[id][j];
    if (np == NULL) return lane_get(p, id, j, r);
    if (np->waits == NULL) return np;
    if (soonest == NULL || redis_op_of(&np->waits_tail->entry)->deadline_ms <
                               redis_op_of(&soonest->waits_tail->entry)->deadline_ms)
      soonest = np;
  }
  return soonest;
}

int store_redis_pipe_connect(store_pipe *p) {
  store_result r = {0};
  node_shard sh[NODE_MAX];
  int n = node_shards(sh, NODE_MAX), ok = n > 0;
  for (int i = 0; i < n; i++) {
    node_pipe *np = lane_get(p, sh[i].id, 0, &r);
    if (np == NULL || lane_open(p->ep, np, &r) < 0) ok = 0;
  }
  return ok ? 0 : -1;
}

void store_redis_pipe_free(store_pipe *p) {
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
    lane_fail(p->all[i], &why);
    free(p->all[i]);
  }
  close(p->ep);
  free(p);
}

/* Queues op's command (cmd, built by the caller to route it) on a lane of
 * node `id` (after ASKING when op->asking; after a SCRIPT LOAD of its
 * script when `reload`). Written at the next flush, or once the lane's
 * setup is done. 0, or -1 with op->st and op->r set (done not called). */
static int pipe_send(store_pipe *p, store_op *op, op_command *cmd, int id, int reload) {
  redis_op *ro = redis_op_of(op);
  node_pipe *np = lane_for(p, id, &op->r);
  if (np == NULL) {
    op->st = STORE_EUNAVAIL;
    return -1;
  }
  lane_check_primary(np);
  int at_rest = np->head == NULL, st = lane_open(p->ep, np, &op->r);
  if (conn_admit(st < 0 ? NULL : &np->k, id, &op->r, &op->st) == NULL) return -1;
  /* The policy check's turn, on a lane at rest: its verdict holds from
   * the calls after this one on (a check on a direct connection came
   * before its call, but no sooner than a second after the last). */
  if ((reload && lane_entry(np, PHASE_LOAD, codec_script_of(op)) == NULL) ||
      (st > 0 && at_rest && conn_policy_claim(id) && lane_entry(np, PHASE_INFO, 0) == NULL)) {
    set_err(&op->r, "out of memory%s", NULL);
    op->st = STORE_EUNAVAIL;
    return -1;
  }
  if (!conn_opening(&np->k) && lane_append(np, op, cmd) < 0) { /* out of memory */
    op->st = conn_transport_error(&np->k, &op->r);
    lane_fail(np, &op->r); /* the calls already waiting share its fate */
    return -1;
  }
  ro->node = id;
  lane_queue(np, op);
  np->unsent_n++;
  store_op_kind base = store_op_base(op->kind);
  if (store_redis_cfg->min_replicas > 0 && ro->phase == PHASE_CALL &&
      (base == STORE_OP_ACQUIRE || base == STORE_OP_RENEW))
    np->unsent_guarded++;
  return 0;
}

/* Routes and queues op's command for its current phase: 0, or -1 with
 * op->st and op->r set (done not called). */
static int pipe_submit(store_pipe *p, store_op *op) {
  redis_op *ro = redis_op_of(op);
  ro->call_deadline_ms = clock_mono_ms() + store_redis_cfg->redis_timeout_ms;
  ro->hops = ro->asking = ro->reloaded = 0;
  ro->backoff_ms = TRYAGAIN_MIN_MS;
  op_command cmd;
  if (codec_build(op, &cmd) < 0) {
    op->st = codec_bad_name(&op->r);
    return -1;
  }
  int id = redirect_route(op, &cmd);
  if (id < 0) {
    op->st = STORE_EUNAVAIL;
    return -1;
  }
  return pipe_send(p, op, &cmd, id, 0);
}

int store_redis_pipe_append(store_pipe *p, store_op *op) {
  memset(&op->r, 0, sizeof op->r);
  lease_count_begin(op);
  return pipe_submit(p, op);
}

/* Sends a redirected call again (from a reply or the retry list, so done
 * may be called): to node `to`, or by the slot map (FOLLOW_ROUTE); after
 * a SCRIPT LOAD of its script when `reload`. */
static void pipe_resend(store_pipe *p, store_op *op, int to, int reload) {
  op_command cmd;
  if (codec_build(op, &cmd) < 0 || (to < 0 && (to = redirect_route(op, &cmd)) < 0)) {
    op->st = STORE_EUNAVAIL;
    op->done(op);
    return;
  }
  if (pipe_send(p, op, &cmd, to, reload) < 0) op->done(op);
}

/* Appends the WAIT that covers np's unsent batch. 0, or -1 when out of
 * memory (np has failed, its calls with it). */
static int pipe_append_wait(node_pipe *np) {
  pipe_entry *w = lane_entry(np, PHASE_WAIT, 0);
  if (w == NULL) return -1;
  if (np->waits_tail) np->waits_tail->next = w;
  else np->waits = w;
  np->waits_tail = w;
  return 0;
}

void store_redis_pipe_flush(store_pipe *p) {
  for (int i = 0; i < p->nall; i++) {
    node_pipe *np = p->all[i];
    if (np->k.c == NULL) continue;
    /* A lane still in its setup holds its calls (lane_ready appends
     * them); their batch is counted, and WAITed for, at the flush after. */
    if (np->unsent && !conn_opening(&np->k)) {
      long n = np->unsent_n;
      if (np->unsent_guarded > 0 && pipe_append_wait(np) < 0) continue;
      np->unsent = NULL;
      np->unsent_n = np->unsent_guarded = 0;
      if (n > 0) {
        redis_stats_inc(REDIS_STAT_PIPELINE_BATCHES);
        redis_stats_add(REDIS_STAT_PIPELINE_CALLS, n);
      }
    }
    if (np->dirty) lane_write(p->ep, np);
  }
}

int store_redis_pipe_fd(const store_pipe *p, unsigned long *opens) {
  *opens = 1; /* the epoll set is the pipe's for its whole life */
  return p->ep;
}

int64_t store_redis_pipe_timeout_ms(const store_pipe *p) {
  int64_t at = -1;
  for (int i = 0; i < p->nall; i++)
    if (p->all[i]->head && (at < 0 || redis_op_of(p->all[i]->head)->deadline_ms < at))
      at = redis_op_of(p->all[i]->head)->deadline_ms;
  for (const store_op *op = p->retry; op; op = op->next)
    if (at < 0 || redis_op_view(op)->retry_at_ms < at) at = redis_op_view(op)->retry_at_ms;
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
  if (op->st != STORE_OK && redis_op_of(op)->phase == PHASE_NOTE) lease_count_note_failed(op);
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
        redis_op_of(&call)->phase == PHASE_NOTE ? "token's lease count not updated"
                                                : "unreplicated grant not taken back");
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
  if (redis_op_of(&n->op)->phase == PHASE_CALL) lease_count_begin(&n->op);
  if (pipe_submit(p, &n->op) < 0) pipe_own_done(&n->op);
}

static void pipe_note_send(store_pipe *p, const store_op *of, const char *verb) {
  store_op note = {.kind = of->kind, .ttl_ms = of->ttl_ms};
  lease_count_note(&note, verb);
  pipe_own_send(p, of, note);
}

static void undo_piped(void *p, const store_op *of) {
  pipe_own_send(p, of, (store_op){.kind = store_op_release_of(of->kind)});
}

/* op's reply for its current phase is in (op->st set): sends its next
 * phase, or completes it (and sends the count update it calls for). */
static void pipe_complete(store_pipe *p, store_op *op) {
  if (lease_count_taken(op)) {
    if (pipe_submit(p, op) < 0) op->done(op);
    return;
  }
  const char *verb = lease_count_note_of(op);
  if (verb) pipe_note_send(p, op, verb);
  op->done(op);
}

/* A WAIT's reply: the calls it covers complete, or fail when fewer than
 * --min-replicas acknowledged. Frees rep and w. */
static void wait_reply(store_pipe *p, node_pipe *np, pipe_entry *w, redisReply *rep) {
  store_result why = {0};
  store_status st = STORE_OK;
  if (rep->type == REDIS_REPLY_ERROR) {
    st = codec_error(np->k.node, rep->str, &why);
  } else if (rep->type != REDIS_REPLY_INTEGER || rep->integer < store_redis_cfg->min_replicas) {
    snprintf(why.err, sizeof why.err, "only %lld of %d replicas acknowledged within %lld ms",
             rep->type == REDIS_REPLY_INTEGER ? (long long)rep->integer : 0LL,
             store_redis_cfg->min_replicas, (long long)store_redis_cfg->replica_timeout_ms);
    st = STORE_ENOTREPL;
  }
  freeReplyObject(rep);
  for (store_op *op = w->held, *next; op; op = next) {
    next = op->next;
    if (st != STORE_OK) {
      if (st == STORE_ENOTREPL) redis_stats_inc(REDIS_STAT_ERR_NOT_REPLICATED);
      op->st = st;
      memcpy(op->r.err, why.err, sizeof why.err);
      direct_guard_refused(op, undo_piped, p);
    }
    pipe_complete(p, op);
  }
  free(w);
}

/* A call's reply for its current phase (not ASKING's): done, held for its
 * WAIT, or sent again. Frees rep. */
static void call_reply(store_pipe *p, node_pipe *np, store_op *op, redisReply *rep,
                       int *noscript_logged) {
  redis_op *ro = redis_op_of(op);
  if (codec_is_noscript(rep) && !ro->reloaded) {
    /* Redis lost its scripts (SCRIPT FLUSH; a restart drops the
     * connection, whose setup loads them): the script did not run, so the
     * call goes again, behind a SCRIPT LOAD on its lane. Once: a second
     * NOSCRIPT is its answer. */
    freeReplyObject(rep);
    if (!(*noscript_logged)++)
      LOG(LOG_INFO, "Redis lost script %s (restart or SCRIPT FLUSH); reloading",
          codec_script_name[codec_script_of(op)]);
    ro->reloaded = 1;
    pipe_resend(p, op, np->k.node, 1);
    return;
  }
  int64_t wait_ms;
  int next = redirect_follow(op, np->k.node, rep, &wait_ms);
  if (next != FOLLOW_GIVE_UP) {
    if (wait_ms <= 0) {
      pipe_resend(p, op, next, 0);
      return;
    }
    ro->retry_at_ms = clock_mono_ms() + wait_ms;
    op->next = p->retry;
    p->retry = op;
    return;
  }
  op->st = codec_parse(op, rep);
  if (!direct_guarded(op)) {
    pipe_complete(p, op);
    return;
  }
  /* Held for the WAIT written after its batch, the oldest one
   * outstanding (replies come in order). */
  pipe_entry *w = np->waits;
  if (w == NULL) { /* cannot happen: its flush wrote a WAIT after it */
    op->st = STORE_ENOTREPL;
    set_err(&op->r, "no WAIT followed the call%s", NULL);
    direct_guard_refused(op, undo_piped, p);
    pipe_complete(p, op);
    return;
  }
  op->next = NULL;
  if (w->held_tail) w->held_tail->next = op;
  else w->held = op;
  w->held_tail = op;
}

/* Completes each call of np whose reply is in. */
static void node_pipe_read(store_pipe *p, node_pipe *np) {
  lane_check_primary(np);
  if (np->k.c == NULL) return;
  /* One read: called when the socket is readable, so it does not block. */
  if (redisBufferRead(np->k.c) != REDIS_OK) {
    lane_fail_transport(np);
    return;
  }
  int noscript_logged = 0;
  for (;;) {
    redisReply *rep = NULL;
    if (np->k.c == NULL) return; /* failed meanwhile (a resend to this node) */
    if (redisGetReplyFromReader(np->k.c, (void **)&rep) != REDIS_OK) {
      lane_fail_transport(np);
      return;
    }
    if (rep == NULL) return; /* the rest has not arrived yet */
    store_op *op = np->head;
    if (op == NULL || op == np->unsent) { /* a reply to nothing sent: out of step */
      freeReplyObject(rep);
      store_result why = {0};
      set_err(&why, "Redis sent a reply nobody asked for%s", NULL);
      lane_fail(np, &why);
      return;
    }
    redis_op *ro = redis_op_of(op);
    if (ro->asking) { /* ASKING's +OK: the call's own reply comes next */
      ro->asking = 0;
      freeReplyObject(rep);
      continue;
    }
    if (ro->phase == PHASE_SETUP) { /* stays at the head until its last reply */
      lane_setup_reply(np, rep);
      continue;
    }
    np->head = op->next;
    if (np->head == NULL) np->tail = NULL;
    if (ro->phase == PHASE_WAIT) { /* the oldest outstanding WAIT */
      np->waits = np->waits->next;
      if (np->waits == NULL) np->waits_tail = NULL;
      wait_reply(p, np, (pipe_entry *)op, rep);
    } else if (ro->phase == PHASE_LOAD || ro->phase == PHASE_INFO) {
      lane_entry_reply(np, (pipe_entry *)op, rep);
    } else {
      call_reply(p, np, op, rep, &noscript_logged);
    }
  }
}

void store_redis_pipe_read(store_pipe *p) {
  struct epoll_event evs[64];
  int n = epoll_wait(p->ep, evs, 64, 0);
  for (int i = 0; i < n; i++) {
    node_pipe *np = evs[i].data.ptr;
    if ((evs[i].events & EPOLLOUT) && np->dirty && np->k.c) lane_write(p->ep, np);
    if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) node_pipe_read(p, np);
  }
}

void store_redis_pipe_expire(store_pipe *p) {
  int64_t now = clock_mono_ms();
  for (int i = 0; i < p->nall; i++) {
    node_pipe *np = p->all[i];
    lane_check_primary(np);
    if (np->head == NULL || now < redis_op_of(np->head)->deadline_ms) continue;
    store_result why = {0};
    int waited = redis_op_of(np->head)->phase == PHASE_WAIT;
    snprintf(why.err, sizeof why.err, "Redis timed out after %lld ms",
             (long long)(store_redis_cfg->redis_timeout_ms +
                         (waited ? store_redis_cfg->replica_timeout_ms : 0)));
    lane_fail(np, &why);
  }
  /* The TRYAGAIN calls whose backoff has passed (taken off the list
   * first: a resend may put one back). */
  store_op *due = NULL;
  for (store_op **pp = &p->retry; *pp;) {
    store_op *op = *pp;
    if (redis_op_of(op)->retry_at_ms <= now) {
      *pp = op->next;
      op->next = due;
      due = op;
    } else {
      pp = &op->next;
    }
  }
  for (store_op *op = due, *next; op; op = next) {
    next = op->next;
    pipe_resend(p, op, FOLLOW_ROUTE, 0);
  }
}
