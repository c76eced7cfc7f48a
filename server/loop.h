/* loop.h: picketd's event loops (loop.c).
 *
 * A loop is one thread and one epoll set: the HTTP daemon's own epoll fd,
 * the client sockets whose request deadlines conns.c keeps, the socket of
 * the loop's store pipe (its pipelined store connection, store.h), and an
 * eventfd through which other threads hand it connections to resume. One
 * pass: wait for any of them (or the nearest timeout), complete the store
 * calls whose replies came in, resume what other threads asked to, let the
 * daemon run, and write the store calls that pass appended in one go.
 * Everything a connection does happens on its loop's thread, so a piped
 * call crosses no thread and wakes nobody.
 *
 * The loop knows no HTTP: http.c plugs its daemon in through loop_hooks. */
#ifndef PICKETD_LOOP_H
#define PICKETD_LOOP_H

#include <stdint.h>

#include "config.h"
#include "conns.h"
#include "store.h"

typedef struct loop loop;

/* An entry in a loop's resume queue; the caller embeds it in its own
 * per-request state. */
typedef struct loop_resume {
  struct loop_resume *next;
} loop_resume;

/* What the loop calls back, each time on its own thread, with `ctx`. */
typedef struct {
  void (*pass)(void *ctx);           /* the top of each pass (e.g. to quiesce the daemon) */
  int64_t (*timeout_ms)(void *ctx);  /* the daemon's next timeout, or -1 */
  void (*run)(void *ctx);            /* lets the daemon run: once per pass */
  void (*resume)(loop_resume *item); /* resumes an entry queued by loop_resume */
} loop_hooks;

/* Sets the shared state up (cfg must outlive the loops). */
void loop_init(const config *cfg);
/* A loop around the daemon whose epoll fd is daemon_ep, with a store pipe
 * unless pipelining is off (store_pipeline_enabled), or NULL (out of
 * memory or file descriptors). Not started yet. */
loop *loop_new(int daemon_ep, const loop_hooks *hooks, void *ctx);
/* Starts the loop's thread: 0, or -1. */
int loop_start(loop *l);
/* Asks every loop to stop after its pass, then stops l's thread and
 * frees its pipe (which fails any call still waiting on it). The daemon
 * must be stopped after this, and l freed after that. Accepts NULL. */
void loop_stop(loop *l);
/* Frees l (its connections' state too: every connection has closed).
 * Accepts NULL. */
void loop_free(loop *l);

/* The loop running on the calling thread, or NULL. */
loop *loop_current(void);
/* The connection-limits state of l's client sockets (conns.c). */
conns_loop *loop_conns(loop *l);
/* Makes l resume `item` on its own thread (hooks.resume), soon. Any
 * thread may call it. */
void loop_resume_soon(loop *l, loop_resume *item);
/* Wakes l for one pass now (any thread). */
void loop_wake(loop *l);

/* ---- for call.c, the runner of store calls ---------------------------- */

/* 1 when the calling thread is a loop whose pipe takes calls now (it has
 * one, and pipes are not closed). */
int loop_pipe_open(void);
/* Queues op on the calling thread's loop's pipe: 0, after which op->done
 * is called once from a later pass of this loop (never before the caller
 * returns to the loop), or -1 when the call is over at once (op->st and
 * op->r say why, and done is not called). */
int loop_pipe_call(store_op *op);
/* Waits on the spot, inside the caller's pass, for the calling loop's pipe
 * to complete calls, until *done is set (by a call's done), anything else
 * in the loop's set is ready, the loop's nearest deadline or max_ms comes:
 * the pass's own wait, taken early. 1 when *done was set. Writes what the
 * pipe holds first. Why (call_now): a lone call then needs no suspend,
 * no resume and no extra passes of the daemon. */
int loop_pipe_wait(const int *done, int max_ms);
/* 1 when the calling loop's pass serves at most one client's request and
 * nothing else (no resume, no pipe replies): when loop_pipe_wait waits. */
int loop_pass_lone(void);
/* Stopping: new store calls go to the runner's workers from now on. */
void loop_close_pipes(void);
/* A call for l went to another thread (call.c's workers): l owes it a
 * done. loop_stop waits for what l is owed before it returns. */
void loop_owe(loop *l);
/* Calls op->done(op) on l's thread, from its next pass; any thread may
 * call it, once per loop_owe. (After l's thread has stopped, loop_stop
 * calls it on the stopping thread.) */
void loop_done_soon(loop *l, store_op *op);

#endif
