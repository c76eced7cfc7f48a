/* call.h: the one way picketd runs a store call (call.c). */
#ifndef PICKETD_CALL_H
#define PICKETD_CALL_H

#include "config.h"
#include "store.h"

/* Starts the workers (--store-workers) and registers the runner's
 * metrics: 0, or -1 (out of threads). After store_init. */
int call_start(const config *cfg);
/* Stops the workers once the calls queued for them are made (after the
 * loops have stopped: nothing submits any more). */
void call_stop(void);

/* Runs op and calls op->done(op) once when it is over (op->st, op->r).
 * On a loop's thread, done comes from a later pass of the same loop,
 * never from inside this call, and the loop never waits for the store
 * meanwhile. On any other thread (picketd stopping: libmicrohttpd ends
 * requests on the main thread) op runs at once on the calling thread and
 * done is called before this returns. The caller owns op and what it
 * points to until done; done may free op. */
void call_submit(store_op *op);

/* Runs op on the calling thread, which is not a loop's (events.c's and
 * sweep.c's threads of their own): store_run, counted with the rest. */
void call_run(store_op *op);

#endif
