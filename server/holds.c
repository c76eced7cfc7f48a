/* holds.c: how long locks are held (holds.h).
 *
 * What an on-call engineer alerts on is a hold that goes on too long: a
 * job stuck while its keeper still renews. Two signals:
 *
 *  - picket_hold_duration_seconds{outcome}: a histogram of how long each
 *    lease was held when it ended, released, broken, or found lost (by its
 *    holder's renew or release after it expired: then the time is to that
 *    call);
 *  - picket_lock_oldest_hold_seconds: the age of the oldest lease this
 *    picketd has renewed and that has not expired since. A lease that is
 *    never renewed is no older than its TTL (--max-ttl-ms), so the long
 *    holds are the renewed ones; each picketd sees the renewals it serves,
 *    so take max() across picketd. The table keeps the HOLDS_TRACKED
 *    oldest.
 *
 * plus picket_lock_waiters_max: the most waiters on any one name on this
 * picketd (wait.c).
 *
 * No series names its lock: /metrics is read by metrics tokens of any
 * prefix, and a label would show every tenant's names to each of them
 * (issue 39). Which lock it is, an operator finds with the listing
 * (GET /v1/locks: holders, acquired_at, waiters), which shows a token
 * only its own names.
 *
 * Times are the store's clock (the grant's `at`) against picketd's wall clock:
 * a skew between the two hosts shows up in them, a few milliseconds on a
 * synchronized network. Only locks: semaphore permits and read/write
 * leases carry no `at` (GET /v1/semaphores and /v1/rwlocks show them). */
#include "holds.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "metrics.h"
#include "picket_proto.h"
#include "wait.h"

#define HOLDS_TRACKED 16

static const double bounds[] = {1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600};
#define NBOUNDS (sizeof bounds / sizeof bounds[0])
static const char *const outcome_names[HOLD_OUTCOMES] = {"released", "broken", "lost"};

static struct {
  atomic_ulong buckets[NBOUNDS + 1];
  atomic_ulong count;
  atomic_ulong sum_ms;
} hist[HOLD_OUTCOMES];

/* The oldest renewed holds: a small table, its own mutex (a renewal takes
 * it once; the table is scanned, 16 entries). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char key[PICKET_PROTO_NAME_MAX + 3];
  int64_t at_ms, until_ms; /* until_ms 0: a free entry */
} held[HOLDS_TRACKED];

static int find(const char *key) {
  for (int i = 0; i < HOLDS_TRACKED; i++)
    if (held[i].until_ms && strcmp(held[i].key, key) == 0) return i;
  return -1;
}

void holds_renewed(const char *key, int64_t at_ms, int64_t until_ms) {
  if (at_ms <= 0) return;
  int64_t now = clock_wall_ms();
  pthread_mutex_lock(&mu);
  int i = find(key);
  if (i < 0) { /* a free or expired entry, else the youngest if this is older */
    for (int j = 0; j < HOLDS_TRACKED; j++) {
      if (held[j].until_ms <= now) {
        i = j;
        break;
      }
      if (held[j].at_ms > at_ms && (i < 0 || held[j].at_ms > held[i].at_ms)) i = j;
    }
  }
  if (i >= 0) {
    snprintf(held[i].key, sizeof held[i].key, "%s", key);
    held[i].at_ms = at_ms;
    held[i].until_ms = until_ms;
  }
  pthread_mutex_unlock(&mu);
}

void holds_forget(const char *key) {
  pthread_mutex_lock(&mu);
  int i = find(key);
  if (i >= 0) held[i].until_ms = 0;
  pthread_mutex_unlock(&mu);
}

void holds_ended(const char *key, int64_t at_ms, hold_outcome how) {
  pthread_mutex_lock(&mu);
  int i = find(key);
  if (i >= 0) {
    if (at_ms <= 0) at_ms = held[i].at_ms;
    held[i].until_ms = 0;
  }
  pthread_mutex_unlock(&mu);
  if (at_ms <= 0) return;
  int64_t ms = clock_wall_ms() - at_ms;
  if (ms < 0) ms = 0; /* clock skew */
  size_t b = 0;
  while (b < NBOUNDS && (double)ms / 1000 > bounds[b]) b++;
  atomic_fetch_add_explicit(&hist[how].buckets[b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&hist[how].count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&hist[how].sum_ms, (unsigned long)ms, memory_order_relaxed);
}

static void render(metrics_buf *b, int all_tenants) {
  (void)all_tenants; /* nothing here names a tenant */
  metrics_put(b, "# HELP picket_hold_duration_seconds How long leases were held when they "
                 "ended: released, broken by an operator, or found lost by their holder "
                 "(locks only).\n# TYPE picket_hold_duration_seconds histogram\n");
  for (int h = 0; h < HOLD_OUTCOMES; h++) {
    unsigned long cum = 0;
    for (size_t i = 0; i <= NBOUNDS; i++) {
      cum += atomic_load_explicit(&hist[h].buckets[i], memory_order_relaxed);
      if (i < NBOUNDS)
        metrics_put(b, "picket_hold_duration_seconds_bucket{outcome=\"%s\",le=\"%g\"} %lu\n",
                    outcome_names[h], bounds[i], cum);
      else
        metrics_put(b, "picket_hold_duration_seconds_bucket{outcome=\"%s\",le=\"+Inf\"} %lu\n",
                    outcome_names[h], cum);
    }
    metrics_put(b, "picket_hold_duration_seconds_sum{outcome=\"%s\"} %.3f\n", outcome_names[h],
                (double)atomic_load_explicit(&hist[h].sum_ms, memory_order_relaxed) / 1000);
    metrics_put(b, "picket_hold_duration_seconds_count{outcome=\"%s\"} %lu\n", outcome_names[h],
                atomic_load_explicit(&hist[h].count, memory_order_relaxed));
  }
  int64_t now = clock_wall_ms(), oldest = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < HOLDS_TRACKED; i++)
    if (held[i].until_ms > now && now - held[i].at_ms > oldest) oldest = now - held[i].at_ms;
  pthread_mutex_unlock(&mu);
  metrics_put(b, "# HELP picket_lock_oldest_hold_seconds The age of the oldest live lease this "
                 "picketd has renewed (0: none); take max() across picketd. Alert on it to find "
                 "a job that holds too long while its keeper renews (GET /v1/locks says which).\n"
                 "# TYPE picket_lock_oldest_hold_seconds gauge\n"
                 "picket_lock_oldest_hold_seconds %.3f\n",
              (double)oldest / 1000);
  metrics_put(b, "# HELP picket_lock_waiters_max The most acquires waiting on any one name on "
                 "this picketd (a lock, a semaphore or a read/write lock; GET /v1/locks says "
                 "which).\n# TYPE picket_lock_waiters_max gauge\npicket_lock_waiters_max %d\n",
              wait_max());
}

void holds_init(void) { metrics_add_families(render); }
