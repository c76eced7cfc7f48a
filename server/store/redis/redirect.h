/* redirect.h: where a Redis call goes, and the redirections it follows
 * under --redis-cluster (redirect.c). */
#ifndef PICKETD_REDIRECT_H
#define PICKETD_REDIRECT_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "codec.h"
#include "store.h"

#define TRYAGAIN_MIN_MS 2 /* first backoff after TRYAGAIN; doubles... */
#define TRYAGAIN_MAX_MS 50 /* ...up to this, within the call's --redis-timeout-ms */

/* redirect_follow's answers besides a node id. */
enum { FOLLOW_GIVE_UP = -2, FOLLOW_ROUTE = -1 };

/* The node for op (its key's slot's primary under --redis-cluster; sets
 * op->slot and op->node), or -1 with op->r.err set. */
int redirect_route(store_op *op, const op_command *cmd);
/* What the next send of op is after the reply rep from node `from`: the
 * node to send it to (ASK; op->asking set), FOLLOW_ROUTE (MOVED repointed
 * the slot, or TRYAGAIN after *wait_ms), or FOLLOW_GIVE_UP: rep is not a
 * redirection, or the call has followed its MOVED limit or run out of its
 * --redis-timeout-ms, and rep is its answer (a 503). Frees rep unless it
 * gives up. */
int redirect_follow(store_op *op, int from, redisReply *rep, int64_t *wait_ms);

#endif
