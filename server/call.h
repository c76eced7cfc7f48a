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

/* call_now: a call that a request would otherwise suspend its connection
 * for. When the calling loop has no other call out and pipes this kind,
 * op goes to the pipe and the loop waits for it on the spot
 * (loop_pipe_wait: anything else the loop must do ends that wait): if it
 * is done then, op->done is NOT called and the caller goes on with op->st
 * and op->r (CALL_DONE_NOW). Otherwise op is out as after call_submit,
 * and its done comes later (CALL_OUT: the caller suspends now, as it
 * would have before submitting), or it was not tried (CALL_NOT_TRIED:
 * nothing happened; the caller does as for call_submit). Why: a lone
 * request on a loop, the usual case at low load, then costs no suspend,
 * no resume and no extra daemon passes (bench/run, one connection). */
typedef enum { CALL_NOT_TRIED, CALL_OUT, CALL_DONE_NOW } call_now_result;
call_now_result call_now(store_op *op);

/* Runs op on the calling thread, which is not a loop's (events.c's and
 * sweep.c's threads of their own): store_run, counted with the rest. */
void call_run(store_op *op);

#endif
