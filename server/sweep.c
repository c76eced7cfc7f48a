/* sweep.c: drops expired names from the index of held names.
 *
 * A grant puts its name into the store's index of held names and a
 * release or break takes it out, but nothing runs when a lease expires:
 * its name stays until a listing meets it (the listing drops the names it
 * finds gone). A workload of unique names that expire, and
 * nobody listing, would grow the index without bound. So one thread of
 * each picketd walks the whole index in the background, a page at a time,
 * through the same listing call (store_list), and lets the listing drop what
 * is gone: at most SWEEP_PAGE live entries read per --index-sweep-ms (the
 * entries themselves are thrown away), and around again from the start
 * when it reaches the end. On a store with many indexes a page may look
 * at several of them (the backend bounds how many). Several picketd sweeping the same index do the same
 * harmless drops; the cost is bounded per picketd. The index then holds
 * the names held now plus those that expired since the sweep last passed
 * them: with 100,000 names and a page of 256 a second (the default), a
 * pass takes about 6 minutes. */
#include "sweep.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "call.h"
#include "log.h"
#include "store.h"

#define SWEEP_PAGE 256

static pthread_t thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stopping, started;
static int64_t every_ms;

static void *sweep_main(void *arg) {
  (void)arg;
  store_cursor at = {""};
  pthread_mutex_lock(&mu);
  while (!stopping) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(every_ms / 1000);
    until.tv_nsec += (long)(every_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    while (!stopping && pthread_cond_timedwait(&cond, &mu, &until) != ETIMEDOUT) {
    }
    if (stopping) break;
    pthread_mutex_unlock(&mu);
    store_op op = {.kind = STORE_OP_LIST, .name = "", .limit = SWEEP_PAGE, .cursor = &at};
    call_run(&op); /* a failure (the store away) just waits for the next turn */
    store_result_clear(&op.r);
    if (op.st != STORE_OK || !op.r.more) at = (store_cursor){""}; /* around again */
    pthread_mutex_lock(&mu);
  }
  pthread_mutex_unlock(&mu);
  store_thread_done();
  return NULL;
}

int sweep_start(const config *cfg) {
  every_ms = cfg->index_sweep_ms;
  if (every_ms == 0) return 0; /* off */
  int rc = pthread_create(&thread, NULL, sweep_main, NULL);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  started = 1;
  return 0;
}

void sweep_stop(void) {
  if (!started) return;
  pthread_mutex_lock(&mu);
  stopping = 1;
  pthread_cond_signal(&cond);
  pthread_mutex_unlock(&mu);
  pthread_join(thread, NULL);
  started = 0;
}
