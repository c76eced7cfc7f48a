/* stats.h: what /metrics shows of Redis (stats.c). The Redis store counts
 * its own failures, reconnects, failovers, redirections and pipelined
 * batches, and reads its server's memory and key count, here; it registers
 * these families with metrics_add_families at store_init, as quota.c and
 * holds.c register theirs, so metrics.c names no backend and a picketd on
 * etcd shows none of them. The names, labels and help are the ones the
 * counters had in metrics.h (docs/picketd.md lists them; alerts and tests
 * read them). Every update is one relaxed atomic add or store. */
#ifndef PICKETD_REDIS_STATS_H
#define PICKETD_REDIS_STATS_H

/* Counters: X(enum, metric name, labels, help of the family). Rows of one
 * family sit together; the help is printed once per family. */
#define REDIS_STATS_MAP(X)                                                                     \
  X(ERR_UNAVAILABLE, "picket_redis_errors_total", "kind=\"unavailable\"", "Redis failures by kind.") \
  X(ERR_REPLY, "picket_redis_errors_total", "kind=\"error_reply\"", "")                        \
  X(ERR_MISCONFIGURED, "picket_redis_errors_total", "kind=\"misconfigured\"", "")              \
  X(ERR_FULL, "picket_redis_errors_total", "kind=\"full\"", "")                                \
  X(ERR_NOT_REPLICATED, "picket_redis_errors_total", "kind=\"not_replicated\"", "")            \
  X(RECONNECTS, "picket_redis_reconnects_total", "", "Redis connections (re)established.")     \
  X(FAILOVERS, "picket_redis_failovers_total", "", "Switches to a new Redis primary named by Sentinel.") \
  X(REDIRECT_MOVED, "picket_redis_redirects_total", "kind=\"moved\"", "Redis Cluster redirections met by lock calls (each retried on the node named; tryagain after a short backoff).") \
  X(REDIRECT_ASK, "picket_redis_redirects_total", "kind=\"ask\"", "")                          \
  X(REDIRECT_TRYAGAIN, "picket_redis_redirects_total", "kind=\"tryagain\"", "")                \
  X(CLUSTER_MAP_REFRESHES, "picket_cluster_map_reads_total", "", "Reads of the Redis Cluster slot map (CLUSTER SLOTS).") \
  X(CLUSTER_MAP_CHANGES, "picket_cluster_map_changes_total", "", "Slot maps read that moved slots to another primary (failover or resharding).") \
  X(PIPELINE_BATCHES, "picket_redis_pipeline_batches_total", "", "Writes of pipelined lock calls to Redis (one per event-loop pass that had calls).") \
  X(PIPELINE_CALLS, "picket_redis_pipeline_calls_total", "", "Lock calls sent pipelined (divided by batches: calls per write).")

typedef enum {
#define REDIS_STATS_ENUM(e, name, labels, help) REDIS_STAT_##e,
  REDIS_STATS_MAP(REDIS_STATS_ENUM)
#undef REDIS_STATS_ENUM
  REDIS_STAT_COUNT
} redis_stat;

/* Gauges, each a family of its own (stats.c has their names and help). */
typedef enum { REDIS_GAUGE_UP, REDIS_GAUGE_USED_MEMORY, REDIS_GAUGE_DB_KEYS, REDIS_GAUGE_COUNT } redis_gauge;

/* Registers the families (metrics_add_families): once, from store_init,
 * before the HTTP server runs. */
void redis_stats_init(void);
void redis_stats_inc(redis_stat s);
void redis_stats_add(redis_stat s, long n);
void redis_stats_set(redis_gauge g, long v);
/* The last Redis call of a worker succeeded (1) or failed (0): sets
 * picket_redis_up and, beside it, metrics.h's neutral picket_store_up. */
void redis_stats_up(int up);
/* The address lock calls go to now, for picket_redis_primary_info{addr};
 * "" when no primary is known (the sample is then left out). Copied. */
void redis_stats_set_primary(const char *addr);

#endif
