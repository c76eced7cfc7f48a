/* batch.c: group commit of txns on etcd (batch.h).
 *
 * Why: through etcd's JSON gateway a request costs etcd about three times
 * the CPU of the same call over gRPC, so with many clients picketd spent
 * etcd's CPU on requests, not on work. A txn that a worker thread would
 * send alone joins a queue instead; while fewer than BATCH_IN_FLIGHT
 * requests are out, the thread at the queue's head takes what is queued
 * (at most BATCH_MAX, one per key) and sends it as one request, and the
 * others wait for their outcome. At one client this is a txn sent at once,
 * as before; at many, the txns that queued during a round trip go in the
 * next request (as a database's group commit gathers the transactions
 * that wait for one fsync).
 *
 * What a request shares: one revision (the fences of the grants in it are
 * equal, each strictly above its own lock's last: fences are per lock),
 * and its fate. A request that fails (a put naming a shared lease that is
 * gone fails them all) is made again txn by txn, each thread its own: a
 * txn that etcd applied though its reply was lost is then refused by its
 * own compare, as a retry across a failover is (etcd_client.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "batch.h"

#define BATCH_MAX 32
#define BATCH_IN_FLIGHT 2

typedef struct batch_call {
  const char *key;
  const etcd_txn_req *t;
  etcd_txn_result *out;
  int rc;
  int state; /* 0 queued, 1 taken, 2 done, 3 alone: make it by itself */
  pthread_cond_t cv; /* its thread waits on it: woken for its outcome, or to send */
  struct batch_call *next;
} batch_call;

/* Each waiting thread has its own condition variable, and is woken only
 * when its outcome is in or when it is to send the next request (the
 * queue's head, with a request's place free): a broadcast to every
 * waiting thread per request cost more context switches than the
 * requests saved. */
static pthread_mutex_t batch_mu = PTHREAD_MUTEX_INITIALIZER;
static batch_call *queue_head, **queue_tail = &queue_head;
static int in_flight;
static atomic_long requests, txns;

/* Takes up to BATCH_MAX queued calls, one per key, in queue order. */
static int take(batch_call **calls) {
  int n = 0;
  for (batch_call **p = &queue_head; *p && n < BATCH_MAX;) {
    batch_call *b = *p;
    int clash = 0;
    for (int i = 0; i < n && !clash; i++) clash = strcmp(calls[i]->key, b->key) == 0;
    if (clash) {
      p = &b->next;
      continue;
    }
    *p = b->next;
    if (queue_tail == &b->next) queue_tail = p;
    b->state = 1;
    calls[n++] = b;
  }
  return n;
}

static void send_batch(etcd_client *c, batch_call **calls, int n) {
  const etcd_txn_req *ts[BATCH_MAX];
  etcd_txn_result outs[BATCH_MAX];
  for (int i = 0; i < n; i++) ts[i] = calls[i]->t;
  int rc = etcd_txn_batch(c, ts, n, outs);
  atomic_fetch_add(&requests, 1);
  atomic_fetch_add(&txns, n);
  pthread_mutex_lock(&batch_mu);
  for (int i = 0; i < n; i++) {
    if (rc == ETCD_OK) *calls[i]->out = outs[i];
    calls[i]->rc = rc;
    /* a lone txn's failure is its own; a batch's is made again one by one */
    calls[i]->state = rc == ETCD_OK || n == 1 ? 2 : 3;
  }
  in_flight--;
  for (int i = 0; i < n; i++) pthread_cond_signal(&calls[i]->cv);
  if (queue_head) pthread_cond_signal(&queue_head->cv); /* it sends next */
  pthread_mutex_unlock(&batch_mu);
}

int store_etcd_txn_batched(etcd_client *c, const char *key, const etcd_txn_req *t,
                           etcd_txn_result *out) {
  batch_call me = {.key = key, .t = t, .out = out};
  memset(out, 0, sizeof *out);
  pthread_cond_init(&me.cv, NULL);
  pthread_mutex_lock(&batch_mu);
  *queue_tail = &me;
  queue_tail = &me.next;
  while (me.state < 2) {
    if (me.state == 0 && in_flight < BATCH_IN_FLIGHT) {
      batch_call *calls[BATCH_MAX];
      int n = take(calls);
      if (n > 0) {
        in_flight++;
        pthread_mutex_unlock(&batch_mu);
        send_batch(c, calls, n);
        pthread_mutex_lock(&batch_mu);
        continue;
      }
    }
    pthread_cond_wait(&me.cv, &batch_mu);
  }
  pthread_mutex_unlock(&batch_mu);
  pthread_cond_destroy(&me.cv);
  if (me.state == 3) return etcd_txn(c, t, out);
  return me.rc;
}

void store_etcd_batch_counts(long *reqs, long *carried) {
  *reqs = atomic_load(&requests);
  *carried = atomic_load(&txns);
}
