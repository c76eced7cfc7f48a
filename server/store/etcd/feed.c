/* feed.c: the release feed on etcd (store.h's store_feed_*): one watch
 * over the key prefix P, on a thread of its own, open while somebody waits
 * (and FEED_LINGER_MS after). A DELETE of a lease's key (a release, an
 * expiry, a break) or of its lock-delay's wakes the waiters of its queue:
 * P l/NAME and P d/NAME are lock NAME's, P s/NAME/I and P e/NAME/I
 * semaphore NAME's ("s/NAME"), P r/NAME/... read/write lock NAME's
 * ("r/NAME"); other keys wake nobody. It reopens from the last revision seen + 1,
 * so nothing released meanwhile is missed; when it cannot (it was closed,
 * or etcd compacted that revision) it reports NULL: every waiter retries. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "feed.h"

#define FEED_LINGER_MS 3000
static void (*released)(const char *key);
static pthread_mutex_t feed_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t feed_cv = PTHREAD_COND_INITIALIZER;
static int feed_wanted, feed_stopping, feed_started;
static int64_t feed_idle_since;
static etcd_watch *feed_watch; /* guarded by feed_mu, so stop can stop it */
static pthread_t feed_thread;

/* Reports the queue a deleted key (its name after the prefix) wakes. */
static void report(const char *k, size_t n) {
  char q[PICKET_PROTO_NAME_MAX + 3];
  if (n < 3 || k[1] != '/') return;
  const char *name = k + 2;
  size_t len = n - 2;
  if (k[0] == 's' || k[0] == 'e' || k[0] == 'r') { /* up to the slot's or lease's slash */
    const char *slash = memchr(name, '/', len);
    if (slash == NULL) return;
    len = (size_t)(slash - name);
  } else if (k[0] != 'l' && k[0] != 'd') {
    return;
  }
  if (len == 0 || len > PICKET_PROTO_NAME_MAX) return;
  if (k[0] == 'l' || k[0] == 'd')
    snprintf(q, sizeof q, "%.*s", (int)len, name);
  else
    snprintf(q, sizeof q, "%c/%.*s", k[0] == 'r' ? 'r' : 's', (int)len, name);
  released(q);
}

static void *feed_main(void *arg) {
  char prefix[sizeof store_etcd_cfg->key_prefix + 4];
  snprintf(prefix, sizeof prefix, "%s", store_etcd_cfg->key_prefix);
  size_t plen = strlen(prefix);
  int64_t from = 0;
  etcd_client_opts o = store_etcd_opts; /* o.first_endpoint: where the next watch opens */
  for (;;) {
    pthread_mutex_lock(&feed_mu);
    while (!feed_stopping && !feed_wanted) pthread_cond_wait(&feed_cv, &feed_mu);
    int stop = feed_stopping;
    pthread_mutex_unlock(&feed_mu);
    if (stop) break;
    etcd_watch *w = NULL;
    char err[200];
    if (etcd_watch_open(&o, prefix, 1, from, &w, err, sizeof err) != ETCD_OK) {
      LOG(LOG_DEBUG, "release feed: %s", err);
      struct timespec ts = {0, 200 * 1000000L};
      nanosleep(&ts, NULL);
      continue;
    }
    pthread_mutex_lock(&feed_mu);
    feed_watch = w;
    stop = feed_stopping;
    pthread_mutex_unlock(&feed_mu);
    if (from == 0) released(NULL); /* what was released while not watching */
    etcd_event ev[64];
    int n = 0;
    while (!stop) {
      n = etcd_watch_next(w, ev, 64, 1000);
      if (n < 0) break;
      for (int i = 0; i < n; i++)
        if (ev[i].type == ETCD_EVENT_DELETE) report(ev[i].key + plen, ev[i].key_len - plen);
      pthread_mutex_lock(&feed_mu);
      stop = feed_stopping ||
             (!feed_wanted && clock_mono_ms() - feed_idle_since >= FEED_LINGER_MS);
      pthread_mutex_unlock(&feed_mu);
    }
    from = n == ETCD_EUNAVAIL ? etcd_watch_last_revision(w) + 1 : 0;
    /* a member that went away, or was paused (a silent stream whose
     * member no longer answers, etcd_client.c): the next one first */
    if (n == ETCD_EUNAVAIL) o.first_endpoint = etcd_watch_endpoint(w) + 1;
    if (n == ETCD_ECOMPACTED) released(NULL);
    pthread_mutex_lock(&feed_mu);
    feed_watch = NULL;
    pthread_mutex_unlock(&feed_mu);
    etcd_watch_free(w);
  }
  return arg;
}

int store_etcd_feed_start(void (*on_released)(const char *key)) {
  released = on_released;
  if (pthread_create(&feed_thread, NULL, feed_main, NULL) != 0) return -1;
  feed_started = 1;
  return 0;
}

void store_etcd_feed_want(int on) {
  pthread_mutex_lock(&feed_mu);
  if (on && !feed_wanted) pthread_cond_signal(&feed_cv);
  if (!on && feed_wanted) feed_idle_since = clock_mono_ms();
  feed_wanted = on;
  pthread_mutex_unlock(&feed_mu);
}

void store_etcd_feed_stop(void) {
  if (!feed_started) return;
  pthread_mutex_lock(&feed_mu);
  feed_stopping = 1;
  if (feed_watch) etcd_watch_stop(feed_watch);
  pthread_cond_broadcast(&feed_cv);
  pthread_mutex_unlock(&feed_mu);
  pthread_join(feed_thread, NULL);
  feed_started = 0;
}
