/* redirect.c: where a Redis call goes (its key's node, from the node
 * table) and, under --redis-cluster, the redirections it follows: MOVED,
 * ASK and TRYAGAIN. The direct path (direct.c) and the pipe (pipe.c)
 * follow them the same way: this file decides, they send.
 *
 * Why following one is safe: Redis answers MOVED, ASK and TRYAGAIN before
 * it runs the script (it checks the keys' slot first), so the call did
 * nothing on that node, and sending it again cannot grant twice or bump a
 * fence twice. The calls that may have run (a lost connection, a timeout)
 * are never sent again by picketd: they end in 503, and the client's retry
 * with the same lease is idempotent (acquire.lua). */
#include "redirect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "node.h"
#include "redis.h"
#include "stats.h"

#define HOPS_MAX 5        /* MOVED followed per call, as Lettuce's maxRedirects */

/* The node for op (its key's slot's primary under --redis-cluster; sets
 * op->slot and op->node), or -1 with op->r.err set. */
int redirect_route(store_op *op, const op_command *cmd) {
  redis_op *ro = redis_op_of(op);
  int id = node_for_key(cmd->lease_key, &ro->slot, op->r.err, sizeof op->r.err);
  if (id < 0) redis_stats_inc(REDIS_STAT_ERR_UNAVAILABLE);
  ro->node = id;
  return id;
}

/* A redirection in rep: "MOVED 3999 10.0.0.2:6381", "ASK 3999 ...",
 * "TRYAGAIN ...". 0 when rep is none of them. */
static int redirect_of(const redisReply *rep, int *kind, int *slot, char *host, size_t cap,
                       int *port) {
  if (rep->type != REDIS_REPLY_ERROR) return 0;
  if (strncmp(rep->str, "TRYAGAIN", 8) == 0) {
    *kind = REDIS_STAT_REDIRECT_TRYAGAIN;
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
  *kind = moved ? REDIS_STAT_REDIRECT_MOVED : REDIS_STAT_REDIRECT_ASK;
  return 1;
}

/* What the next send of op is after the reply rep from node `from`: the
 * node to send it to (ASK; op->asking set), FOLLOW_ROUTE (MOVED repointed
 * the slot, or TRYAGAIN after *wait_ms), or FOLLOW_GIVE_UP: rep is not a
 * redirection, or the call has followed HOPS_MAX MOVED or run out of its
 * --redis-timeout-ms, and rep is its answer (a 503). Frees rep unless it
 * gives up. */
int redirect_follow(store_op *op, int from, redisReply *rep, int64_t *wait_ms) {
  redis_op *ro = redis_op_of(op);
  int kind, slot, port;
  char host[256];
  *wait_ms = 0;
  if (!node_is_cluster() || !redirect_of(rep, &kind, &slot, host, sizeof host, &port))
    return FOLLOW_GIVE_UP;
  if (kind == REDIS_STAT_REDIRECT_MOVED && ro->hops >= HOPS_MAX) {
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
  if (kind == REDIS_STAT_REDIRECT_TRYAGAIN) {
    /* The slot is mid-migration and its keys are split between the two
     * nodes: wait for the rest to move. */
    if (clock_mono_ms() + ro->backoff_ms >= ro->call_deadline_ms) return FOLLOW_GIVE_UP;
    *wait_ms = ro->backoff_ms;
    ro->backoff_ms = ro->backoff_ms * 2 > TRYAGAIN_MAX_MS ? TRYAGAIN_MAX_MS : ro->backoff_ms * 2;
    redis_stats_inc((redis_stat)kind);
    freeReplyObject(rep);
    return FOLLOW_ROUTE; /* not a hop: the deadline bounds these */
  } else if (kind == REDIS_STAT_REDIRECT_MOVED) {
    if (node_moved(slot, host, port) < 0) return FOLLOW_GIVE_UP;
    ro->hops++;
  } else if (clock_mono_ms() >= ro->call_deadline_ms || (next = node_id_of(host, port)) < 0) {
    return FOLLOW_GIVE_UP;
  } else {
    /* ASK: this one call, on that node, after ASKING. Not a hop either:
     * mid-migration, a free lock's acquire goes ASK, then TRYAGAIN at the
     * target (its lease key exists on neither side) until the slot has
     * moved; the deadline bounds that too. */
    ro->asking = 1;
  }
  redis_stats_inc((redis_stat)kind);
  freeReplyObject(rep);
  return next;
}
