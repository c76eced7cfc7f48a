/* keeper.c: picket_keeper, the threads that keep a lease alive and find out
 * at once when it is gone.
 *
 * The renewing thread renews every ttl/renew_divisor, measured from when
 * the last successful renew was sent. A failed renewal is not a loss: the
 * keeper retries with backoff, and no attempt runs past the lease's local
 * deadline, so the loss is reported at the deadline at the latest, even
 * when the server hangs (SIGSTOP, partition). It reports loss at once when
 * the server says the lease is gone, and at the deadline when the lease's
 * max_hold_ms cut a renewal short.
 *
 * The watching thread (a lock's lease, opts.watch) follows the lock's
 * events (events.c; a leader's lease: its election's leader events) and
 * reports the loss the moment one says the lease is gone
 * (picket_event_ends: a break, an expiry, another's grant or term), instead
 * of at the next renewal, up to ttl/renew_divisor later. A stream is a
 * fast path only (docs/events.md: events can be missed while picketd
 * resubscribes), so renewing goes on beside it; a stream that drops is
 * opened again with backoff (its first event, a state, covers what was
 * missed), and one that is quiet far past picketd's heartbeats is taken
 * for dead and opened again. A picketd without events (404) or a token
 * without the read verb is no error: the keeper then renews only.
 *
 * Each thread has its own client handle, because a handle belongs to one
 * thread. Both stop on `halt`, set by a stop or by the loss (whichever
 * thread finds it): it wakes their waits, aborts a renewal in flight
 * (the clients' abort flag) and ends the watch (picket_watch_interrupt).
 * Only the first to find the loss reports it. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

/* A watch that got nothing, not even a heartbeat (15 s by default), for
 * this long is opened again. */
#define WATCH_IDLE_MS 60000
/* After a watch fails (picketd restarting, a quota of streams), the next
 * try waits this long, doubling up to the cap; renewals go on meanwhile. */
#define WATCH_RETRY_MS 100
#define WATCH_RETRY_MAX_MS 10000

struct picket_keeper {
  picket_client *client; /* the renewing thread's */
  picket_client *wclient; /* the watching thread's; NULL: no watching */
  picket_lease *lease;
  int64_t fence; /* the lease's, which never changes (read once: the renewing
                    thread writes the lease's copy) */
  picket_keeper_options opts;
  int64_t ttl_ms; /* asked for by each renew */
  pthread_t thread, wthread;
  pthread_mutex_t mu;
  pthread_cond_t cv;   /* signalled by halt; waits on CLOCK_MONOTONIC */
  picket_watch *watch; /* the watching thread's current watch (mu) */
  atomic_int halt;     /* stopped or lost: both threads end */
  atomic_int lost;
  atomic_int watching; /* what picket_keeper_watching says */
  _Atomic int64_t renewals;
};

void picket_keeper_options_init(picket_keeper_options *o) {
  o->renew_divisor = 3;
  o->ttl_ms = 0;
  o->on_lost = NULL;
  o->arg = NULL;
  o->watch = 1;
}

/* Sleeps until monotonic time `until` or a halt; returns 1 on halt. */
static int wait_until(picket_keeper *k, int64_t until) {
  struct timespec ts = {until / 1000, (until % 1000) * 1000000};
  pthread_mutex_lock(&k->mu);
  while (!atomic_load(&k->halt) && picket_now_ms() < until)
    if (pthread_cond_timedwait(&k->cv, &k->mu, &ts) == ETIMEDOUT) break;
  pthread_mutex_unlock(&k->mu);
  return atomic_load(&k->halt);
}

/* Ends both threads' work: waits return, a renewal in flight is aborted,
 * the watch ends. */
static void halt_all(picket_keeper *k) {
  pthread_mutex_lock(&k->mu);
  atomic_store(&k->halt, 1);
  pthread_cond_broadcast(&k->cv);
  if (k->watch != NULL) picket_watch_interrupt(k->watch);
  pthread_mutex_unlock(&k->mu);
}

/* Reports the loss, unless the other thread already did or the keeper was
 * stopped first (a stop is not a loss). */
static void lose(picket_keeper *k, int err) {
  int none = 0;
  if (atomic_load(&k->halt) && !atomic_load(&k->lost)) return; /* stopped */
  if (!atomic_compare_exchange_strong(&k->lost, &none, err)) return;
  halt_all(k);
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
    if (atomic_load(&k->halt)) break;
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

/* One watch of the lease's lock, from opening to its end: 1 when it found
 * the loss (reported), 0 when it ended otherwise (dropped, idle, halted),
 * or the PICKET_E* refusal after which watching is pointless. */
static int watch_once(picket_keeper *k, int64_t *retry_ms) {
  picket_watch *w = NULL;
  if (picket__watch_new(k->wclient, k->lease->kind, k->lease->lock, &w) != 0) return 0;
  pthread_mutex_lock(&k->mu); /* from here on halt_all can interrupt it */
  int halted = atomic_load(&k->halt);
  if (!halted) k->watch = w;
  pthread_mutex_unlock(&k->mu);
  int err = halted ? PICKET_ECANCELED : picket__watch_connect(w, k->wclient);
  int found = 0, first = 1;
  picket_event ev;
  while (err == 0 && (err = picket_watch_next(w, &ev, WATCH_IDLE_MS)) == 0) {
    /* the first event (a lock's state, an election's leader) says where
     * things stand: the watch works */
    if (ev.type != PICKET_EVENT_HEARTBEAT && first) {
      first = 0;
      atomic_store(&k->watching, 1);
      *retry_ms = WATCH_RETRY_MS; /* it works: a later drop starts the backoff over */
    }
    if (picket_event_ends(&ev, k->fence)) {
      /* Past the local deadline the lease had ended for this process
       * already: say so, as the renewing thread would. */
      found = 1;
      lose(k, picket_now_ms() >= picket_lease_deadline_ms(k->lease) ? PICKET_EEXPIRED
                                                                     : PICKET_ELOST);
    }
  }
  atomic_store(&k->watching, 0);
  pthread_mutex_lock(&k->mu);
  k->watch = NULL;
  pthread_mutex_unlock(&k->mu);
  picket_watch_close(w);
  if (err == PICKET_EUNSUPPORTED || err == PICKET_EAUTH || err == PICKET_EINVAL) return err;
  return found;
}

static void *watch_main(void *arg) {
  picket_keeper *k = arg;
  int64_t retry = WATCH_RETRY_MS;
  while (!atomic_load(&k->halt)) {
    int r = watch_once(k, &retry);
    if (r < 0) {
      atomic_store(&k->watching, r); /* refused for good: renewing only */
      break;
    }
    if (r > 0 || wait_until(k, picket_now_ms() + retry)) break;
    retry = retry * 2 < WATCH_RETRY_MAX_MS ? retry * 2 : WATCH_RETRY_MAX_MS;
  }
  return NULL;
}

static void keeper_free(picket_keeper *k) {
  pthread_cond_destroy(&k->cv);
  pthread_mutex_destroy(&k->mu);
  picket_client_free(k->client);
  picket_client_free(k->wclient);
  free(k);
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
  k->fence = lease->fence;
  k->opts = *opts;
  k->ttl_ms = opts->ttl_ms > 0 ? opts->ttl_ms : picket_lease_ttl_ms(lease);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&k->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&k->mu, NULL);
  /* Only locks and elections have events (docs/events.md), and only a
   * known fence (term) can be compared with theirs. */
  int watch = opts->watch &&
              (lease->kind == PICKET__KIND_LOCK || lease->kind == PICKET__KIND_ELECTION) &&
              k->fence > 0;
  k->client = picket__client_clone(c);
  if (watch) k->wclient = picket__client_clone(c);
  if (k->client == NULL || (watch && k->wclient == NULL)) {
    keeper_free(k);
    return PICKET_ENOMEM;
  }
  /* The keeper does its own retrying, so that a stop is never stuck in
   * a backoff sleep inside the client. */
  picket__client_set_retries(k->client, 0);
  picket__client_set_abort(k->client, &k->halt);
  if (watch) picket__client_set_abort(k->wclient, &k->halt);
  if (pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
    keeper_free(k);
    return PICKET_ESYS;
  }
  if (watch && pthread_create(&k->wthread, NULL, watch_main, k) != 0) {
    halt_all(k);
    pthread_join(k->thread, NULL);
    keeper_free(k);
    return PICKET_ESYS;
  }
  *out = k;
  return 0;
}

int picket_keeper_lost(const picket_keeper *k) { return atomic_load(&k->lost); }
int64_t picket_keeper_renewals(const picket_keeper *k) { return atomic_load(&k->renewals); }
int picket_keeper_watching(const picket_keeper *k) { return atomic_load(&k->watching); }

int picket_keeper_stop(picket_keeper *k) {
  if (k == NULL) return 0;
  halt_all(k);
  pthread_join(k->thread, NULL);
  if (k->wclient != NULL) pthread_join(k->wthread, NULL);
  int lost = atomic_load(&k->lost);
  keeper_free(k);
  return lost;
}
