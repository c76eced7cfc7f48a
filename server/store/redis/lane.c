/* lane.c: one connection of a store pipe (pipe.c) to one node, and its
 * queue: every call and entry of the pipe's own appended to it, in the
 * order their replies will come. pipe.c decides what goes on which lane
 * and when a batch is written; this file keeps a lane's connection from
 * its connect to its failure without ever waiting on Redis, since the
 * event loop that owns the pipe serves every client meanwhile.
 *
 * A lane's socket is non-blocking from its connect on. Opening one (at the
 * loop's start, or after a failure) appends its setup (AUTH, SELECT, ROLE,
 * the SCRIPT LOADs, INFO: conn.c) as its first commands, under a setup
 * entry that heads the queue until the last of their replies is read, like
 * any other reply. Calls appended meanwhile wait behind it, unwritten, and
 * are appended once the setup is done, so none reaches a node that turned
 * out to be a replica or to evict keys; a setup that does not end within
 * --redis-timeout-ms fails them as a failed connect would (the backoff
 * starts). A write that does not fit the socket is finished when the
 * socket is writable (EPOLLOUT while a lane is dirty). Besides calls and
 * WAITs, the queue holds the pipe's own SCRIPT LOAD (a call that met
 * NOSCRIPT goes again behind one) and INFO (the once-a-second policy
 * check of a lane at rest). */
#include "lane.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "node.h"
#include "redis.h"
#include "stats.h"

/* Puts np's socket in the pipe's epoll set after each (re)connect, for
 * replies and, while a write is unfinished, for room to write. (A closed
 * socket leaves the set by itself.) */
void lane_watch(int ep, node_pipe *np) {
  if (np->k.c == NULL) return;
  uint32_t want = EPOLLIN | (np->dirty ? EPOLLOUT : 0);
  int known = np->watched == np->k.starts;
  if (known && np->events == want) return;
  struct epoll_event ev = {.events = want, .data.ptr = np};
  if (epoll_ctl(ep, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, np->k.c->fd, &ev) < 0 && !known)
    epoll_ctl(ep, EPOLL_CTL_MOD, np->k.c->fd, &ev);
  np->watched = np->k.starts;
  np->events = want;
}

/* e joins the end of np's queue (unsent: the next flush writes it). */
void lane_queue(node_pipe *np, store_op *e) {
  e->next = NULL;
  if (np->tail) np->tail->next = e;
  else np->head = e;
  np->tail = e;
  if (np->unsent == NULL) np->unsent = e;
}

/* Appends the command of np's queue entry e to its connection (cmd: a
 * call's, built by the caller, or NULL to build it here) and starts e's
 * clock. 0, or -1 when out of memory. */
int lane_append(node_pipe *np, store_op *e, op_command *cmd) {
  redis_op *ro = redis_op_of(e);
  redisContext *c = np->k.c;
  int64_t due = store_redis_cfg->redis_timeout_ms;
  int ok;
  op_command built;
  /* Redis blocks a connection while its WAIT runs, so every WAIT already
   * written on this lane may hold e up to --replica-timeout-ms before
   * Redis reads it: that silence is by design, not a dead Redis (under
   * load with lagging replicas every lane may carry a few). Without this
   * a call queued behind two WAITs timed out as store_unavailable where
   * the answer was not_replicated (fault_sentinel, issue 41). */
  for (const pipe_entry *w = np->waits; w; w = w->next) due += store_redis_cfg->replica_timeout_ms;
  if (ro->phase == PHASE_WAIT) {
    ok = redisAppendCommand(c, "WAIT %d %lld", store_redis_cfg->min_replicas,
                            (long long)store_redis_cfg->replica_timeout_ms);
    /* WAIT may take --replica-timeout-ms by design: only past that and
     * the command timeout is its silence a dead Redis. */
    due += store_redis_cfg->replica_timeout_ms;
  } else if (ro->phase == PHASE_LOAD) {
    ok = redisAppendCommand(c, "SCRIPT LOAD %s", codec_script_src[((pipe_entry *)e)->script]);
  } else if (ro->phase == PHASE_INFO) {
    ok = redisAppendCommand(c, "INFO");
  } else {
    if (cmd == NULL && codec_build(e, cmd = &built) < 0) return -1; /* it was built once */
    conn_bind(cmd, &np->k, e);
    ok = ro->asking ? redisAppendCommand(c, "ASKING") : REDIS_OK;
    if (ok == REDIS_OK) ok = redisAppendCommandArgv(c, cmd->argc, cmd->argv, NULL);
  }
  ro->deadline_ms = clock_mono_ms() + due;
  np->dirty = 1;
  return ok == REDIS_OK ? 0 : -1;
}

static void op_fail(store_op *op, const store_result *why, store_status st) {
  op->r = *why;
  op->st = st;
  if (st == STORE_EUNAVAIL) redis_stats_inc(REDIS_STAT_ERR_UNAVAILABLE);
  op->done(op);
}

/* Completes every call in np's queue with st and `why`, and frees the
 * pipe's own entries; the connection is left as it is. done() may end
 * the request that owns an op. */
void lane_drain(node_pipe *np, const store_result *why, store_status st) {
  store_op *op = np->head;
  np->head = np->tail = np->unsent = NULL;
  np->unsent_n = np->unsent_guarded = 0;
  np->waits = np->waits_tail = NULL;
  for (store_op *next; op; op = next) {
    next = op->next;
    int phase = redis_op_of(op)->phase;
    if (phase == PHASE_SETUP) continue; /* np's own */
    if (phase != PHASE_WAIT && phase != PHASE_LOAD && phase != PHASE_INFO) {
      op_fail(op, why, st);
      continue;
    }
    /* A grant held for a WAIT stays in Redis until its TTL: its client
     * gets 503, and a retry with the same lease gets it back. */
    pipe_entry *w = (pipe_entry *)op;
    for (store_op *h = w->held, *hn; h; h = hn) {
      hn = h->next;
      op_fail(h, why, st);
    }
    free(w);
  }
}

/* Completes every call still waiting on np's connection with `why` (the
 * connection is gone, and with it any way to know which of them Redis
 * ran, or whether the replicas have what it wrote) and closes it: as a
 * failed connect (the backoff starts) while its setup was under way. */
void lane_fail(node_pipe *np, const store_result *why) {
  if (np->k.c && conn_opening(&np->k)) conn_setup_failed(&np->k, why);
  else if (np->k.c) conn_lost(&np->k);
  lane_drain(np, why, STORE_EUNAVAIL);
}

int lane_open(int ep, node_pipe *np, store_result *r) {
  unsigned long starts = np->k.starts;
  int st = conn_start(&np->k, np->head == NULL, 1, r);
  if (st == 0 && np->k.starts != starts) {
    if (np->head) { /* reopened under calls (a primary switch between two checks) */
      store_result why = {0};
      set_err(&why, "Redis primary changed while calls were in flight%s", NULL);
      lane_drain(np, &why, STORE_EUNAVAIL);
    }
    np->setup = (store_op){0};
    redis_op_of(&np->setup)->phase = PHASE_SETUP;
    redis_op_of(&np->setup)->deadline_ms = clock_mono_ms() + store_redis_cfg->redis_timeout_ms;
    np->head = np->tail = &np->setup;
    np->dirty = 1;
  }
  lane_watch(ep, np);
  return st;
}

/* Sentinel named a new primary (or a cluster node's id was given to
 * another node, or the sentinels' lease lapsed) while calls wait on np:
 * their replies would come from a node that may no longer be the primary
 * (see conn_primary_moved). */
void lane_check_primary(node_pipe *np) {
  store_result why = {0};
  if (np->k.c == NULL ||
      node_current(np->k.node, np->k.gen, np->k.lease_epoch, why.err, sizeof why.err))
    return;
  lane_fail(np, &why);
}

/* A node that refuses the setup may close the connection before all of it
 * is written (Redis closes an unauthenticated client that sends a long
 * argument, such as a SCRIPT LOAD's script): its refusal (NOAUTH), when it
 * reached the socket, says more than the broken pipe. 1 with why set (and
 * the connection closed), or 0. */
static int setup_refused(node_pipe *np, store_result *why) {
  redisContext *c = np->k.c;
  char buf[4096];
  ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n > 0) redisReaderFeed(c->reader, buf, (size_t)n);
  void *rep = NULL;
  while (redisReaderGetReply(c->reader, &rep) == REDIS_OK && rep != NULL) {
    int st = conn_setup_reply(&np->k, rep, why);
    freeReplyObject(rep);
    if (st < 0) return 1;
    if (st > 0 || np->k.c == NULL) return 0;
    rep = NULL;
  }
  return 0;
}

void lane_fail_transport(node_pipe *np) {
  store_result why = {0};
  if (np->k.c && conn_opening(&np->k) && setup_refused(np, &why)) {
    lane_fail(np, &why);
    return;
  }
  conn_transport_reason(&np->k, &why);
  lane_fail(np, &why);
}

/* Writes what np's socket takes now; the rest when it is writable. */
void lane_write(int ep, node_pipe *np) {
  int done = 0;
  if (redisBufferWrite(np->k.c, &done) != REDIS_OK) {
    lane_fail_transport(np);
    return;
  }
  np->dirty = !done;
  lane_watch(ep, np);
}

/* np's setup is done: the entries queued behind it are appended, or,
 * when its node evicts keys (its INFO said so), the calls among them are
 * refused; the connection stays either way. */
static void lane_ready(node_pipe *np) {
  np->head = np->setup.next;
  if (np->head == NULL) np->tail = NULL;
  store_result why = {0};
  store_status st;
  if (conn_admit(&np->k, np->k.node, &why, &st) == NULL) {
    lane_drain(np, &why, st);
    return;
  }
  for (store_op *e = np->head; e; e = e->next)
    if (lane_append(np, e, NULL) < 0) {
      set_err(&why, "out of memory%s", NULL);
      lane_fail(np, &why);
      return;
    }
}

/* Queues an entry of the pipe's own (phase, script: see pipe_entry) on
 * np, or NULL when out of memory (np has failed, its calls with it). */
pipe_entry *lane_entry(node_pipe *np, int phase, int script) {
  pipe_entry *w = calloc(1, sizeof *w);
  store_result why = {0};
  set_err(&why, "out of memory%s", NULL);
  if (w == NULL) {
    lane_fail(np, &why);
    return NULL;
  }
  redis_op_of(&w->entry)->phase = phase;
  w->script = script;
  lane_queue(np, &w->entry);
  if (!conn_opening(&np->k) && lane_append(np, &w->entry, NULL) < 0) {
    lane_fail(np, &why); /* frees w */
    return NULL;
  }
  return w;
}

/* A reply to an entry of the pipe's own other than a WAIT (a SCRIPT LOAD,
 * an INFO). Frees rep and w. */
void lane_entry_reply(node_pipe *np, pipe_entry *w, redisReply *rep) {
  store_result why = {0};
  if (redis_op_of(&w->entry)->phase == PHASE_INFO) conn_policy_reply(np->k.node, rep);
  else if (conn_script_reply(&np->k, w->script, rep, &why) < 0)
    LOG(LOG_WARN, "%s; the call that met NOSCRIPT fails", why.err);
  freeReplyObject(rep);
  free(w);
}

/* A reply of np's setup: once the last is in, the calls queued behind it
 * go out. Frees rep. */
void lane_setup_reply(node_pipe *np, redisReply *rep) {
  store_result why = {0};
  int st = conn_setup_reply(&np->k, rep, &why);
  freeReplyObject(rep);
  if (st < 0) lane_fail(np, &why); /* k is closed: its calls fail */
  else if (st > 0) lane_ready(np);
}
