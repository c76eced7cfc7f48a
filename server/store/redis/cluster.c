/* cluster.c: the Redis Cluster watcher (--redis-cluster), one thread.
 *
 * It reads the slot map with CLUSTER SLOTS (every Redis from 3.0 has it;
 * CLUSTER SHARDS is 7.0 only and says nothing more that picketd uses) and
 * hands it to the node table, which routes every lock call by it. It asks
 * the known primaries first, then the seeds of --redis-cluster, the last
 * node that answered first of all, and takes the first whole answer, as
 * redis-py and Lettuce do. It asks:
 *  - at start, before picketd serves (so the first calls need no MOVED);
 *  - when kicked (node_trouble, MOVED, CLUSTERDOWN, a slot with no owner):
 *    a burst of kicks makes one read, at most every REFRESH_MIN_MS, so a
 *    failing shard costs the cluster one CLUSTER SLOTS per REFRESH_MIN_MS,
 *    not one per call;
 *  - every REFRESH_PERIOD_MS anyway, so a failover or a resharding that no
 *    call has run into yet is seen within that.
 * While no node answers, the map read last keeps serving; /readyz says
 * that the cluster cannot be heard. */
#include "cluster.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "node.h"
#include "stats.h"
#include "watcher.h"

#define REFRESH_MIN_MS 50      /* between two reads on trouble */
#define REFRESH_PERIOD_MS 2000 /* between reads when all is well */
#define SOURCES_MAX (NODE_MAX + CONFIG_CLUSTER_SEEDS_MAX)
#define RANGES_MAX 4096        /* a map more fragmented than this is refused */

static const config *cfg;
static watcher w = WATCHER_INIT;
static redisContext *conn;     /* to the node that answered last; the watcher's alone */
static char conn_addr[280];

void cluster_kick(void) { watcher_kick(&w); }

/* One CLUSTER SLOTS reply into ranges[]: how many, or -1 with why in err.
 * A node that does not know its own address names it "" (or "?"): it is
 * the node asked, at `host`. */
static int parse_slots(const redisReply *rep, const char *host, node_range *ranges, char *err,
                       size_t errlen) {
  if (rep->type == REDIS_REPLY_ERROR) {
    snprintf(err, errlen, "CLUSTER SLOTS refused: %.150s", rep->str);
    return -1;
  }
  if (rep->type != REDIS_REPLY_ARRAY) {
    snprintf(err, errlen, "odd reply to CLUSTER SLOTS");
    return -1;
  }
  if (rep->elements > RANGES_MAX) {
    snprintf(err, errlen, "CLUSTER SLOTS has %zu ranges (at most %d)", rep->elements, RANGES_MAX);
    return -1;
  }
  int n = 0;
  for (size_t i = 0; i < rep->elements; i++) {
    const redisReply *r = rep->element[i];
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER ||
        r->element[2]->type != REDIS_REPLY_ARRAY || r->element[2]->elements < 2 ||
        r->element[2]->element[0]->type != REDIS_REPLY_STRING ||
        r->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
      snprintf(err, errlen, "odd range in CLUSTER SLOTS");
      return -1;
    }
    node_range *g = &ranges[n++];
    g->first = (int)r->element[0]->integer;
    g->last = (int)r->element[1]->integer;
    const redisReply *ip = r->element[2]->element[0];
    g->port = (int)r->element[2]->element[1]->integer;
    if (g->first < 0 || g->last >= NODE_SLOTS || g->first > g->last || g->port <= 0 ||
        g->port > 65535 || ip->len >= sizeof g->host) {
      snprintf(err, errlen, "odd range in CLUSTER SLOTS");
      return -1;
    }
    snprintf(g->host, sizeof g->host, "%s",
             ip->len == 0 || strcmp(ip->str, "?") == 0 ? host : ip->str);
  }
  return n;
}

/* Asks one node for the map: the number of ranges, or -1 with why in err. */
static int ask(const node_range *src, node_range *ranges, char *err, size_t errlen) {
  char addr[280];
  snprintf(addr, sizeof addr, "%s:%d", src->host, src->port);
  if (conn && strcmp(conn_addr, addr) != 0) {
    redisFree(conn);
    conn = NULL;
  }
  if (conn == NULL) {
    conn = node_open_addr(src->host, src->port, cfg->redis_timeout_ms, err, errlen);
    if (conn == NULL) return -1;
    snprintf(conn_addr, sizeof conn_addr, "%s", addr);
  }
  redisReply *rep = redisCommand(conn, "CLUSTER SLOTS");
  if (rep == NULL) {
    snprintf(err, errlen, "Redis at %.120s: %.100s", addr, conn->errstr);
    redisFree(conn);
    conn = NULL;
    return -1;
  }
  int n = parse_slots(rep, src->host, ranges, err, errlen);
  freeReplyObject(rep);
  if (n == 0) { /* a node not yet joined, or one cut off: ask another */
    snprintf(err, errlen, "Redis at %.120s serves no slots (CLUSTER SLOTS is empty)", addr);
    return -1;
  }
  return n;
}

/* Reads the map from the first node that answers; 0, or -1 when none does. */
static int refresh(void) {
  static node_range sources[SOURCES_MAX], ranges[RANGES_MAX];
  int ns = node_map_sources(sources, SOURCES_MAX);
  char err[240] = "no node to ask";
  redis_stats_inc(REDIS_STAT_CLUSTER_MAP_REFRESHES);
  /* The node that answered last first: its connection is open. */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < ns; i++) {
      char addr[280];
      snprintf(addr, sizeof addr, "%s:%d", sources[i].host, sources[i].port);
      if ((pass == 0) != (conn && strcmp(addr, conn_addr) == 0)) continue;
      int n = ask(&sources[i], ranges, err, sizeof err);
      if (n > 0) {
        node_set_slots(ranges, n);
        return 0;
      }
      LOG(LOG_DEBUG, "cluster map from %s: %s", addr, err);
    }
  node_cluster_state(0, err);
  return -1;
}

static void *watch_main(void *arg) {
  (void)arg;
  int64_t last = clock_mono_ms(), logged_down = 0;
  while (!atomic_load(&w.stopping)) {
    int64_t now = clock_mono_ms();
    int64_t wait = atomic_load(&w.kicked) ? last + REFRESH_MIN_MS - now : last + REFRESH_PERIOD_MS - now;
    if (wait > 0) {
      struct pollfd p = {.fd = w.fd, .events = POLLIN};
      if (poll(&p, 1, (int)wait) > 0) {
        watcher_drain(&w);
      }
      if (atomic_load(&w.stopping)) break;
      now = clock_mono_ms();
      if (atomic_load(&w.kicked) ? now < last + REFRESH_MIN_MS : now < last + REFRESH_PERIOD_MS)
        continue;
    }
    atomic_store(&w.kicked, 0);
    last = now;
    if (refresh() < 0) {
      if (now - logged_down >= 10000) {
        node_info i;
        node_describe(&i);
        LOG(LOG_WARN, "no Redis Cluster node answers CLUSTER SLOTS (%s); keeping the last map",
            i.cluster_msg);
        logged_down = now;
      }
      atomic_store(&w.kicked, 1); /* try again soon */
    } else {
      logged_down = 0;
    }
  }
  if (conn) redisFree(conn);
  conn = NULL;
  return NULL;
}

int cluster_start(const config *c, char *err, size_t errlen) {
  cfg = c;
  if (watcher_init(&w) < 0) {
    snprintf(err, errlen, "eventfd failed");
    return -1;
  }
  if (refresh() < 0) {
    node_info i;
    node_describe(&i);
    LOG(LOG_WARN, "no Redis Cluster node answers yet (%s); serving 503 until one does",
        i.cluster_msg);
  }
  if (watcher_start(&w, watch_main) < 0) {
    snprintf(err, errlen, "cannot start the cluster watcher thread");
    return -1;
  }
  return 0;
}

void cluster_stop(void) { watcher_stop(&w); }
