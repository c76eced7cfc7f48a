/* stats.c: what /metrics shows of Redis (see stats.h): fixed arrays of C11
 * atomics, as metrics.c keeps picketd's own, and the renderer of their
 * families, which metrics_render calls after picketd's. Counting takes no
 * lock and allocates nothing; only the primary's address, written on a
 * switch of primary, sits under a mutex. */
#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "metrics.h"

static const metrics_row stat_info[] = {
#define REDIS_STATS_INFO(e, name, labels, help) {name, labels, help},
    REDIS_STATS_MAP(REDIS_STATS_INFO)
#undef REDIS_STATS_INFO
};

static const char *const gauge_info[REDIS_GAUGE_COUNT][2] = {
    {"picket_redis_up", "1 when the last Redis call of any worker succeeded."},
    {"picket_redis_used_memory_bytes",
     "Redis used_memory (INFO memory), read at most once a second and at every connect."},
    {"picket_redis_db_keys",
     "Keys in picketd's Redis database (INFO keyspace), all of them: picket's own only when the "
     "database is not shared. Read at most once a second and at every connect."},
};

static atomic_ulong stats[REDIS_STAT_COUNT];
static atomic_long gauges[REDIS_GAUGE_COUNT];

void redis_stats_inc(redis_stat s) { atomic_fetch_add_explicit(&stats[s], 1, memory_order_relaxed); }
void redis_stats_add(redis_stat s, long n) {
  atomic_fetch_add_explicit(&stats[s], (unsigned long)n, memory_order_relaxed);
}
void redis_stats_set(redis_gauge g, long v) { atomic_store_explicit(&gauges[g], v, memory_order_relaxed); }
void redis_stats_up(int up) {
  redis_stats_set(REDIS_GAUGE_UP, up);
  metrics_gauge_set(G_STORE_UP, up);
}

/* Written on a switch of primary, read by a scrape: rare enough for a mutex. */
static pthread_mutex_t primary_mu = PTHREAD_MUTEX_INITIALIZER;
static char primary[280];

void redis_stats_set_primary(const char *addr) {
  char v[sizeof primary];
  size_t n = 0;
  for (; *addr && n + 3 < sizeof v; addr++) { /* a label value escapes \\, " and newline */
    if (*addr == '\\' || *addr == '"' || *addr == '\n') v[n++] = '\\';
    v[n++] = *addr == '\n' ? 'n' : *addr;
  }
  v[n] = '\0';
  pthread_mutex_lock(&primary_mu);
  memcpy(primary, v, n + 1);
  pthread_mutex_unlock(&primary_mu);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* The families, in the order metrics.c printed them before they moved
 * here: the counters, the gauges, then the primary. No series names a
 * tenant, so all_tenants changes nothing. */
static void render(metrics_buf *b, int all_tenants) {
  (void)all_tenants;
  const char *family = "";
  for (int s = 0; s < REDIS_STAT_COUNT; s++) metrics_put_counter(b, &family, &stat_info[s], LOAD(stats[s]));
  for (int g = 0; g < REDIS_GAUGE_COUNT; g++)
    metrics_put_gauge(b, gauge_info[g][0], gauge_info[g][1], LOAD(gauges[g]));
  metrics_put(b, "# HELP picket_redis_primary_info The Redis node lock calls go to (none while no "
                 "primary is known).\n# TYPE picket_redis_primary_info gauge\n");
  pthread_mutex_lock(&primary_mu);
  if (primary[0]) metrics_put(b, "picket_redis_primary_info{addr=\"%s\"} 1\n", primary);
  pthread_mutex_unlock(&primary_mu);
}

void redis_stats_init(void) { metrics_add_families(render); }
