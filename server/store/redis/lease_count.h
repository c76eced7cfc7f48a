/* lease_count.h: a token's lease count around a Redis call (lease_count.c). */
#ifndef PICKETD_LEASE_COUNT_H
#define PICKETD_LEASE_COUNT_H

#include "store.h"

/* 1 when op's lease is counted in its token's max_leases (a token, a
 * limit, and not an inspect). */
int lease_count_counts(const store_op *op);
/* ...and the count lives apart from the lock (Redis Cluster): the store
 * makes calls of its own for it. */
int lease_count_apart(const store_op *op);
/* Sets op's first phase, before its first send. */
void lease_count_begin(store_op *op);
/* After a take: 1 when the call itself goes out next (op->phase moved on). */
int lease_count_taken(store_op *op);
/* The count update op's outcome calls for once it is complete: "touch",
 * "drop", or NULL for none (or when the scripts keep the count). */
const char *lease_count_note_of(const store_op *op);
/* Makes `note`, a fresh op that names the lease, the count update `verb`
 * ("touch" or "drop"): an op of its own, run after the call. */
void lease_count_note(store_op *note, const char *verb);
/* Logs a count update that failed (the entry expires with its lease). */
void lease_count_note_failed(const store_op *note);

#endif
