/* keeper.c: picket_keeper, the thread that keeps a lease alive.
 *
 * It renews every ttl/renew_divisor, measured from when the last successful
 * renew was sent. A failed renewal is not a loss: the keeper retries with
 * backoff, and no attempt runs past the lease's local deadline, so the loss
 * is reported at the deadline at the latest, even when the server hangs
 * (SIGSTOP, partition). It reports loss at once when the server says the
 * lease is gone, and at the deadline when the lease's max_hold_ms cut a
 * renewal short. It uses its own client handle, because a handle belongs to
 * one thread, and a stop flag that also aborts a request in flight. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

struct picket_keeper {
  picket_client *client; /* private to the thread */
  picket_lease *lease;
  picket_keeper_options opts;
  int64_t ttl_ms; /* asked for by each renew */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* signalled by stop; waits on CLOCK_MONOTONIC */
  atomic_int stop;
  atomic_int lost;
  _Atomic int64_t renewals;
};

void picket_keeper_options_init(picket_keeper_options *o) {
  o->renew_divisor = 3;
  o->ttl_ms = 0;
  o->on_lost = NULL;
  o->arg = NULL;
}

/* Sleeps until monotonic time `until` or a stop; returns 1 on stop. */
static int wait_until(picket_keeper *k, int64_t until) {
  struct timespec ts = {until / 1000, (until % 1000) * 1000000};
  pthread_mutex_lock(&k->mu);
  while (!atomic_load(&k->stop) && picket_now_ms() < until)
    if (pthread_cond_timedwait(&k->cv, &k->mu, &ts) == ETIMEDOUT) break;
  pthread_mutex_unlock(&k->mu);
  return atomic_load(&k->stop);
}

static void lose(picket_keeper *k, int err) {
  atomic_store(&k->lost, err);
  if (k->opts.on_lost != NULL) k->opts.on_lost(k->lease, err, k->opts.arg);
}

static void *keeper_main(void *arg) {
  picket_keeper *k = arg;
  int failures = 0;
  int64_t next = atomic_load(&k->lease->sent_ms) + k->ttl_ms / k->opts.renew_divisor;
  for (;;) {
    if (picket_lease_capped(k->lease)) {
      /* max_hold_ms cut the last grant or renewal: no renewal can carry
       * the lease further, so none is sent (each would get less, without
       * end); the lease ends at its deadline, reported as the cap. */
      if (!wait_until(k, picket_lease_deadline_ms(k->lease))) lose(k, PICKET_ECAPPED);
      break;
    }
    if (wait_until(k, next)) break;
    int64_t deadline = picket_lease_deadline_ms(k->lease);
    if (picket_now_ms() >= deadline) {
      lose(k, PICKET_EEXPIRED);
      break;
    }
    int err = picket__renew(k->client, k->lease, k->ttl_ms, deadline);
    if (atomic_load(&k->stop)) break;
    if (err == 0) {
      atomic_fetch_add(&k->renewals, 1);
      failures = 0;
      next = atomic_load(&k->lease->sent_ms) +
             picket_lease_ttl_ms(k->lease) / k->opts.renew_divisor;
      continue;
    }
    if (err == PICKET_ELOST) {
      lose(k, PICKET_ELOST);
      break;
    }
    /* Transient (or at least not a verdict): try again soon, and wake at
     * the deadline at the latest to report the loss on time. */
    next = picket_now_ms() + picket__client_backoff_ms(k->client, failures++);
    if (next > deadline) next = deadline;
  }
  return NULL;
}

int picket_keeper_start(picket_client *c, picket_lease *lease, const picket_keeper_options *opts,
                        picket_keeper **out) {
  picket_keeper_options defaults;
  *out = NULL;
  if (opts == NULL) {
    picket_keeper_options_init(&defaults);
    opts = &defaults;
  }
  if (c == NULL || lease == NULL || opts->renew_divisor < 2 || opts->ttl_ms < 0 ||
      picket_lease_deadline_ms(lease) <= 0)
    return PICKET_EINVAL;
  picket_keeper *k = calloc(1, sizeof *k);
  if (k == NULL) return PICKET_ENOMEM;
  k->lease = lease;
  k->opts = *opts;
  k->ttl_ms = opts->ttl_ms > 0 ? opts->ttl_ms : picket_lease_ttl_ms(lease);
  k->client = picket__client_clone(c);
  if (k->client == NULL) {
    free(k);
    return PICKET_ENOMEM;
  }
  /* The keeper does its own retrying, so that a stop is never stuck in
   * a backoff sleep inside the client. */
  picket__client_set_retries(k->client, 0);
  picket__client_set_abort(k->client, &k->stop);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&k->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&k->mu, NULL);
  if (pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    picket_client_free(k->client);
    free(k);
    return PICKET_ESYS;
  }
  *out = k;
  return 0;
}

int picket_keeper_lost(const picket_keeper *k) { return atomic_load(&k->lost); }
int64_t picket_keeper_renewals(const picket_keeper *k) { return atomic_load(&k->renewals); }

int picket_keeper_stop(picket_keeper *k) {
  if (k == NULL) return 0;
  pthread_mutex_lock(&k->mu);
  atomic_store(&k->stop, 1);
  pthread_cond_signal(&k->cv);
  pthread_mutex_unlock(&k->mu);
  pthread_join(k->thread, NULL);
  int lost = atomic_load(&k->lost);
  pthread_cond_destroy(&k->cv);
  pthread_mutex_destroy(&k->mu);
  picket_client_free(k->client);
  free(k);
  return lost;
}
