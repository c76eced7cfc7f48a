/* call.c: the runner of store calls, the one way every store call that a
 * request makes is run: a first try, a waiter's retry, the undo of a grant
 * whose reply was lost, a writer's forget, a page of a listing, a break.
 *
 * Why one runner: a loop serves all of its connections, so a loop that
 * waits on the store serves nobody meanwhile. Calls used to run in two
 * ways, chosen in http.c: a first try could go through the loop's pipe,
 * while retries, undo, forget, listings and breaks blocked the loop
 * thread, and on a backend without a pipe every call did. Now http.c and api.c hand every op
 * to call_submit and go on in op->done; where the op runs is decided here,
 * from what the backend offers through store.h:
 *
 *   - the loop's pipe, when the backend pipelines (store_pipeline_enabled;
 *     a backend's own flag may turn it off): the loop writes the calls of one pass at once
 *     and completes each as its reply comes in (loop.c, store_pipe_*);
 *   - otherwise one of --store-workers threads, each with the store
 *     connection of its own, which makes the call with store_run (it may
 *     block there: that is the backend's way) and hands the op back to its
 *     loop (loop_done_soon). When the backend does not pipeline, every
 *     call goes this way, so a loop has as many store calls in flight as
 *     it has requests, up to the number of workers.
 *
 * The queue to the workers is bounded by the requests being handled
 * (each has at most one call out, bounded by --max-connections) plus the
 * undo and forget calls of requests that ended, one each. */
#include "call.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "log.h"
#include "loop.h"
#include "metrics.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static store_op *queue_head, *queue_tail; /* calls waiting for a worker */
static int stopping;
static pthread_t *workers;
static int nworkers;

/* What /metrics shows of the runner (call_families). */
static atomic_long in_flight;      /* submitted, not done: all loops */
static atomic_long in_flight_peak; /* the most one loop had out at once */
static atomic_long by_pipe, by_worker, by_caller;
static __thread long loop_in_flight; /* this loop's (submit and done run on it) */

/* Every op a loop submits comes back through here, on that loop's
 * thread: the counts, then the caller's own done. */
static void call_done(store_op *op) {
  loop_in_flight--;
  atomic_fetch_sub(&in_flight, 1);
  op->done = op->then;
  op->done(op);
}

static void *worker_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (queue_head == NULL && !stopping) pthread_cond_wait(&cond, &mu);
    store_op *op = queue_head;
    if (op == NULL) break; /* stopping, and nothing is left */
    queue_head = op->next;
    if (queue_head == NULL) queue_tail = NULL;
    pthread_mutex_unlock(&mu);
    store_run(op);
    loop_done_soon(op->loop, op);
    pthread_mutex_lock(&mu);
  }
  pthread_mutex_unlock(&mu);
  store_thread_done();
  return NULL;
}

static void to_worker(store_op *op) {
  loop_owe(op->loop);
  op->next = NULL;
  pthread_mutex_lock(&mu);
  if (queue_tail) queue_tail->next = op;
  else queue_head = op;
  queue_tail = op;
  pthread_cond_signal(&cond);
  pthread_mutex_unlock(&mu);
}

void call_submit(store_op *op) {
  loop *l = loop_current();
  if (l == NULL) { /* no loop to come back to: here and now */
    atomic_fetch_add(&by_caller, 1);
    store_run(op);
    op->done(op);
    return;
  }
  op->then = op->done;
  op->done = call_done;
  op->loop = l;
  atomic_fetch_add(&in_flight, 1);
  if (++loop_in_flight > atomic_load(&in_flight_peak)) atomic_store(&in_flight_peak, loop_in_flight);
  /* A listing's page, a break and /readyz's probe are calls of several
   * steps in the backend (indexes to visit, a replica guard, a status and
   * a read): never pipelined. */
  if (op->kind < STORE_OP_BREAK && loop_pipe_open()) {
    atomic_fetch_add(&by_pipe, 1);
    if (loop_pipe_call(op) == 0) return;
    loop_owe(l); /* over at once (the store unreachable): done from the next pass */
    loop_done_soon(l, op);
    return;
  }
  atomic_fetch_add(&by_worker, 1);
  to_worker(op);
}

/* How long a loop waits for a lone call on the spot (loop_pipe_wait)
 * before it leaves the call to the pipe and serves on: a store's round
 * trip on a local network is about 0.1 ms; one that takes longer meets the
 * loop's own pass. */
#define CALL_NOW_MAX_MS 10

static __thread int now_finished; /* call_now's op is done */

static void now_done(store_op *op) {
  (void)op;
  now_finished = 1;
}

call_now_result call_now(store_op *op) {
  loop *l = loop_current();
  if (l == NULL || loop_in_flight > 0 || op->kind >= STORE_OP_BREAK || !loop_pipe_open() ||
      !loop_pass_lone())
    return CALL_NOT_TRIED;
  void (*then)(store_op *) = op->done;
  op->done = now_done;
  now_finished = 0;
  call_submit(op); /* to the pipe: call_done calls now_done when it is over */
  if (loop_pipe_wait(&now_finished, CALL_NOW_MAX_MS)) {
    now_finished = 0;
    op->done = then;
    return CALL_DONE_NOW;
  }
  op->then = then; /* out in the pipe: call_done hands it to the caller's done */
  return CALL_OUT;
}

void call_run(store_op *op) {
  atomic_fetch_add(&by_caller, 1);
  store_run(op);
}

static void call_families(metrics_buf *b, int all_tenants) {
  (void)all_tenants;
  metrics_put(b, "# HELP picket_store_calls_in_flight Store calls submitted and not yet done, all loops.\n"
                 "# TYPE picket_store_calls_in_flight gauge\n"
                 "picket_store_calls_in_flight %ld\n",
              atomic_load(&in_flight));
  metrics_put(b, "# HELP picket_store_calls_in_flight_peak The most store calls one loop had in flight "
                 "at once, since start.\n"
                 "# TYPE picket_store_calls_in_flight_peak gauge\n"
                 "picket_store_calls_in_flight_peak %ld\n",
              atomic_load(&in_flight_peak));
  metrics_put(b, "# HELP picket_store_calls_total Store calls made, by how they ran: a loop's pipe, "
                 "a --store-workers thread, or the calling thread (not a loop).\n"
                 "# TYPE picket_store_calls_total counter\n"
                 "picket_store_calls_total{path=\"pipe\"} %ld\n"
                 "picket_store_calls_total{path=\"worker\"} %ld\n"
                 "picket_store_calls_total{path=\"caller\"} %ld\n",
              atomic_load(&by_pipe), atomic_load(&by_worker), atomic_load(&by_caller));
}

int call_start(const config *cfg) {
  metrics_add_families(call_families);
  workers = calloc((size_t)cfg->store_workers, sizeof *workers);
  if (workers == NULL) return -1;
  stopping = 0;
  for (nworkers = 0; nworkers < cfg->store_workers; nworkers++)
    if (pthread_create(&workers[nworkers], NULL, worker_main, NULL) != 0) {
      LOG(LOG_ERROR, "cannot start store worker %d", nworkers + 1);
      call_stop();
      return -1;
    }
  return 0;
}

void call_stop(void) {
  pthread_mutex_lock(&mu);
  stopping = 1;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < nworkers; i++) pthread_join(workers[i], NULL);
  free(workers);
  workers = NULL;
  nworkers = 0;
}
