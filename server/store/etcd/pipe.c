/* pipe.c: an event loop's store pipe on etcd (store.h's store_pipe_*):
 * the loop hands each call to a small pool of worker threads of its own
 * and goes on serving; a worker makes the call and queues it back, and
 * the loop completes it (op->done) when the pipe's eventfd wakes it. So no
 * loop thread ever waits on etcd, and each loop keeps up to
 * --etcd-calls-in-flight calls in flight at once.
 *
 * Why threads: one etcd call is a sequence of dependent blocking requests
 * (a read, a lease grant, a txn, sometimes a retry of the txn after a
 * quota compare failed), written as plain code in the family files on
 * etcd_client.c's blocking libcurl easy handles. Each worker owns one such
 * client (common.c's per-thread client), so the family code runs on it
 * unchanged. libcurl's multi interface would keep many requests in flight
 * on the loop's own thread with no worker at all, but each family call
 * would then have to become a state machine, resumed at every reply with
 * what it read so far (lock, semaphore, read/write lock, each with its
 * quota and lock-delay branches), and etcd_client would need a
 * non-blocking twin of every request. That is the better end state if a
 * loop ever needs hundreds of calls in flight; a handful of workers per
 * loop already takes the round trip off the loop, at one thread and one
 * connection per call in flight.
 *
 * Bounded: a pipe starts --etcd-calls-in-flight workers (1..64) when it
 * is made, so picketd's thread count does not move with its load (a
 * thousand waiters cost no thread), and they stay until the pipe is
 * freed. Its queue needs no bound of its own: a connection whose call
 * is in the pipe is suspended until that call is done, so a loop never
 * has more calls queued than it has connections (--max-connections).
 *
 * Metrics: picket_etcd_calls_in_flight (calls being made now, all loops)
 * and picket_etcd_calls_in_flight_max (the most one loop has made at
 * once since start), registered by store_etcd_init. */
#include "pipe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common.h"
#include "metrics.h"

#define PIPE_WORKERS_MAX 64 /* config.c's bound of --etcd-calls-in-flight */

struct store_pipe {
  void (*run)(store_op *op); /* makes one call on the calling thread */
  int workers_max;
  pthread_mutex_t mu;        /* guards everything below */
  pthread_cond_t work;       /* a call was queued, or the pipe stops */
  store_op *queued, *queued_tail; /* appended, not yet taken by a worker */
  store_op *finished, *finished_tail; /* made, not yet completed by the loop */
  int running;               /* calls being made now */
  int stopping;
  int nthreads;
  pthread_t threads[PIPE_WORKERS_MAX];
  int efd;                   /* eventfd: readable while `finished` holds calls */
};

static atomic_long in_flight_now; /* all pipes */
static atomic_long in_flight_max; /* the most of one pipe at once */

static void queue_push(store_op **head, store_op **tail, store_op *op) {
  op->next = NULL;
  if (*tail) (*tail)->next = op;
  else *head = op;
  *tail = op;
}

/* Counts one more call being made by p (p->mu held). */
static void count_start(store_pipe *p) {
  p->running++;
  atomic_fetch_add(&in_flight_now, 1);
  long seen = atomic_load(&in_flight_max);
  while (p->running > seen && !atomic_compare_exchange_weak(&in_flight_max, &seen, p->running)) {
  }
}

static void *worker_main(void *arg) {
  store_pipe *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stopping && p->queued == NULL) pthread_cond_wait(&p->work, &p->mu);
    if (p->stopping) break; /* calls not started are store_etcd_pipe_free's */
    store_op *op = p->queued;
    p->queued = op->next;
    if (p->queued == NULL) p->queued_tail = NULL;
    count_start(p);
    pthread_mutex_unlock(&p->mu);
    p->run(op);
    pthread_mutex_lock(&p->mu);
    p->running--;
    atomic_fetch_sub(&in_flight_now, 1);
    int wake = p->finished == NULL; /* else the loop has a wake-up pending */
    queue_push(&p->finished, &p->finished_tail, op);
    if (wake) {
      uint64_t one = 1;
      ssize_t n = write(p->efd, &one, sizeof one); /* a counter: one add per wake-up */
      (void)n;
    }
  }
  pthread_mutex_unlock(&p->mu);
  store_etcd_thread_done(); /* this worker's etcd client */
  return NULL;
}

store_pipe *store_etcd_pipe_new(void (*run)(store_op *op), int workers_max) {
  store_pipe *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->run = run;
  p->workers_max = workers_max < 1 ? 1 : workers_max > PIPE_WORKERS_MAX ? PIPE_WORKERS_MAX : workers_max;
  p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->efd < 0) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  /* All workers now, so that a picketd's threads do not grow with its
   * load; each makes its etcd client on its first call. */
  while (p->nthreads < p->workers_max &&
         pthread_create(&p->threads[p->nthreads], NULL, worker_main, p) == 0)
    p->nthreads++;
  if (p->nthreads == 0) {
    store_etcd_pipe_free(p);
    return NULL;
  }
  return p;
}

/* Nothing to connect: each worker's client connects on its first call. */
int store_etcd_pipe_connect(store_pipe *p) { return 0; }

int store_etcd_pipe_append(store_pipe *p, store_op *op) {
  /* past the workers, a call waits in the queue for the first one free */
  pthread_mutex_lock(&p->mu);
  queue_push(&p->queued, &p->queued_tail, op);
  pthread_cond_signal(&p->work);
  pthread_mutex_unlock(&p->mu);
  return 0;
}

/* Takes every call made so far. */
static store_op *take_finished(store_pipe *p) {
  uint64_t n;
  if (read(p->efd, &n, sizeof n) < 0) { /* nothing pending: a wake-up already taken */
  }
  pthread_mutex_lock(&p->mu);
  store_op *op = p->finished;
  p->finished = p->finished_tail = NULL;
  pthread_mutex_unlock(&p->mu);
  return op;
}

static void complete_all(store_op *op) {
  for (store_op *next; op; op = next) {
    next = op->next; /* done may end the request that owns op */
    op->done(op);
  }
}

void store_etcd_pipe_read(store_pipe *p) { complete_all(take_finished(p)); }

int store_etcd_pipe_fd(const store_pipe *p, unsigned long *opens) {
  *opens = 1; /* one eventfd for the pipe's life */
  return p->efd;
}

void store_etcd_pipe_free(store_pipe *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  store_op *unstarted = p->queued;
  p->queued = p->queued_tail = NULL;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (store_op *op = unstarted, *next; op; op = next) {
    next = op->next;
    memset(&op->r, 0, sizeof op->r);
    snprintf(op->r.err, sizeof op->r.err, "picketd is stopping");
    op->st = STORE_EUNAVAIL;
    op->done(op);
  }
  /* the calls being made end within --etcd-timeout-ms (etcd_client's) */
  for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
  complete_all(take_finished(p)); /* with their own outcome */
  close(p->efd);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

void store_etcd_pipe_metrics(metrics_buf *b, int all_tenants) {
  (void)all_tenants; /* no series names a token */
  metrics_put(b,
              "# HELP picket_etcd_calls_in_flight etcd calls being made now by the event loops' "
              "workers, all loops (each loop at most --etcd-calls-in-flight).\n"
              "# TYPE picket_etcd_calls_in_flight gauge\n"
              "picket_etcd_calls_in_flight %ld\n",
              atomic_load(&in_flight_now));
  metrics_put(b,
              "# HELP picket_etcd_calls_in_flight_max The most etcd calls one event loop has had "
              "in flight at once since picketd started.\n"
              "# TYPE picket_etcd_calls_in_flight_max gauge\n"
              "picket_etcd_calls_in_flight_max %ld\n",
              atomic_load(&in_flight_max));
}
