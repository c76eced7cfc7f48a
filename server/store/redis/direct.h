/* direct.h: a Redis call made on the calling thread's own connection,
 * blocking it for the round trip (direct.c), and the replica guard that
 * the pipe shares. */
#ifndef PICKETD_DIRECT_H
#define PICKETD_DIRECT_H

#include "store.h"

/* store.h's store_run on Redis: the script (after the count's take, under
 * a cluster), then (grants and renewals) the replica guard, then any
 * count update. */
void store_redis_run(store_op *op);
/* Runs op's script for its current phase on the calling thread's
 * connection to its node: one round trip, plus a SCRIPT LOAD and a second
 * try on NOSCRIPT, and under --redis-cluster the redirections followed.
 * op->node is the node that answered, for the WAIT of --min-replicas. */
store_status direct_run(store_op *op);
/* 1 when op's outcome must reach --min-replicas before it is passed on. */
int direct_guarded(const store_op *op);
/* A guarded call that the replicas did not acknowledge (op->st says why):
 * a new grant is taken back by undo(arg, op). */
void direct_guard_refused(store_op *op, void (*undo)(void *, const store_op *), void *arg);
/* The replica guard on the calling thread's direct connection, which made
 * op's write: WAIT, and the undo when it falls short. */
void direct_guard(store_op *op);

#endif
