/* store_redis.c: the lock store on Redis (store.h), reached through the
 * backend table at the end of this file (store/backend.h). The core: it
 * starts the store (the node table with its Sentinel or Cluster watcher,
 * the startup check of maxmemory-policy), answers /readyz, stops, and
 * names in the table the files that do the rest. From the ground up:
 *
 *   lease_count.c  a token's lease count around a call (Redis Cluster)
 *   codec.c        one call's command and its reply; no connection
 *   conn.c         the connections (per thread, and a pipe's lanes)
 *   redirect.c     where a call goes, and MOVED / ASK / TRYAGAIN
 *   direct.c       a call on the thread's own connection, the replica guard
 *   operators.c    listing, breaking, and the watch of lock events
 *   pipe.c         an event loop's pipelined calls
 *
 * beside the node table (node.c), its watchers (sentinel.c, cluster.c)
 * and the feeds (feed.c, store_events.c). All lock logic runs inside the
 * Lua scripts of proto/redis, embedded at build time. */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cluster.h"
#include "codec.h"
#include "conn.h"
#include "direct.h"
#include "feed.h"
#include "log.h"
#include "node.h"
#include "operators.h"
#include "pipe.h"
#include "redis.h"
#include "sentinel.h"
#include "stats.h"

/* One node's readiness: reachable, not evicting, not full, a primary, and
 * (r->replicas) how many replicas are online. */
static store_status ready_node(int id, const char *addr, store_result *r) {
  conn *k = conn_get(id, r);
  if (k == NULL) {
    redis_stats_up(0);
    return STORE_EUNAVAIL;
  }
  if (conn_evicting(id)) conn_check_policy(k); /* so /readyz sees a fix at once */
  else conn_policy_due(k);
  if (conn_evicting(id)) {
    set_err(r, "Redis maxmemory-policy evicts keys; fences are unsafe%s", NULL);
    return STORE_EMISCONF;
  }
  redisReply *rep = redisCommand(k->c, "INFO"); /* replication and memory (one section each before Redis 7) */
  if (rep == NULL) return conn_transport_error(k, r);
  store_status st = STORE_OK;
  r->replicas = 0;
  if (rep->type == REDIS_REPLY_ERROR) {
    st = codec_error(id, rep->str, r);
  } else if (rep->type == REDIS_REPLY_STRING) {
    /* Count the replicas online, not connected_slaves: that also counts
     * replicas still syncing, which WAIT cannot count yet. */
    for (const char *p = rep->str; (p = strstr(p, ",state=online")) != NULL; p++) r->replicas++;
    redis_stats_up(1);
    long long used = conn_info_field(rep->str, "used_memory:"),
              max = conn_info_field(rep->str, "maxmemory:"),
              exempt = conn_info_field(rep->str, "mem_not_counted_for_evict:");
    if (max > 0 && used - (exempt > 0 ? exempt : 0) > max) {
      /* What Redis compares before it refuses a write with OOM. */
      snprintf(r->err, sizeof r->err, "Redis is out of memory: %lld of maxmemory %lld bytes used; "
               "writes are refused", used - (exempt > 0 ? exempt : 0), max);
      redis_stats_inc(REDIS_STAT_ERR_FULL);
      freeReplyObject(rep);
      return STORE_EFULL;
    }
    if (strstr(rep->str, "role:master") == NULL) {
      /* Demoted since this connection opened (or --redis names a
       * replica): every grant would meet READONLY. */
      snprintf(r->err, sizeof r->err, "Redis at %.200s is a replica, not the primary",
               addr[0] ? addr : "the configured address");
      node_trouble(id);
      freeReplyObject(rep);
      return STORE_EUNAVAIL;
    }
  }
  freeReplyObject(rep);
  return st;
}

/* Where lock calls go, for /readyz (store_redis_ready). */
#define STORE_SHARDS_MAX 64
typedef struct {
  char primary[280];      /* "host:port" or a socket path; "" when no primary is known */
  int sentinel;           /* -1: no --sentinel; 1: a sentinel answers; 0: none does */
  char sentinel_msg[240]; /* why none does */
  int cluster;            /* 0: not a cluster; else the shards below */
  int nshards;
  struct {
    char primary[280];
    int slots;            /* how many of the 16384 it serves */
    int replicas;         /* online (INFO replication) */
  } shards[STORE_SHARDS_MAX];
} store_topology;

/* The replica count (INFO replication; under --redis-cluster the fewest
 * of any shard) into r, and the topology. */

static store_status ready_check(store_result *r, store_topology *topo) {
  node_info ni;
  node_describe(&ni);
  snprintf(topo->primary, sizeof topo->primary, "%s", ni.primary);
  topo->sentinel = ni.sentinel;
  snprintf(topo->sentinel_msg, sizeof topo->sentinel_msg, "%s", ni.sentinel_msg);
  node_shard sh[STORE_SHARDS_MAX];
  int n = node_shards(sh, STORE_SHARDS_MAX);
  topo->cluster = ni.cluster >= 0;
  if (!topo->cluster) {
    store_status st = ready_node(0, topo->primary, r);
    if (st == STORE_OK && r->replicas < store_redis_cfg->min_replicas) {
      /* Every grant would be refused with not_replicated: not ready. */
      snprintf(r->err, sizeof r->err, "%d of --min-replicas %d replicas online", r->replicas,
               store_redis_cfg->min_replicas);
      st = STORE_ENOTREPL;
    }
    return st;
  }
  /* A cluster is ready when every slot has a primary that answers: a lock
   * on any slot must be grantable. Each shard is asked in turn (a few
   * INFO round trips; /readyz is polled, not hammered). */
  int uncovered = NODE_SLOTS; /* from the same reading of the map as the shards */
  for (int i = 0; i < n; i++) uncovered -= sh[i].slots;
  if (uncovered > 0) {
    if (ni.cluster == 0)
      snprintf(r->err, sizeof r->err, "no Redis Cluster node answers: %.180s", ni.cluster_msg);
    else
      snprintf(r->err, sizeof r->err, "%d of %d Redis Cluster slots have no primary", uncovered,
               NODE_SLOTS);
    redis_stats_up(0);
    return STORE_EUNAVAIL;
  }
  int fewest = -1;
  topo->nshards = n;
  for (int i = 0; i < n; i++) {
    snprintf(topo->shards[i].primary, sizeof topo->shards[i].primary, "%s", sh[i].primary);
    topo->shards[i].slots = sh[i].slots;
    store_status st = ready_node(sh[i].id, sh[i].primary, r);
    if (st != STORE_OK) {
      char why[200];
      snprintf(why, sizeof why, "%.199s", r->err);
      snprintf(r->err, sizeof r->err, "Redis Cluster shard %.100s (%d slots): %.120s",
               sh[i].primary, sh[i].slots, why);
      return st;
    }
    topo->shards[i].replicas = r->replicas;
    if (fewest < 0 || r->replicas < fewest) fewest = r->replicas;
    if (r->replicas < store_redis_cfg->min_replicas) {
      snprintf(r->err, sizeof r->err, "Redis Cluster shard %.100s: %d of --min-replicas %d "
               "replicas online", sh[i].primary, r->replicas, store_redis_cfg->min_replicas);
      return STORE_ENOTREPL;
    }
  }
  r->replicas = fewest;
  return STORE_OK;
}

static store_status store_redis_ready(int detail, store_result *r, json_t **out) {
  store_topology topo = {0};
  *out = NULL;
  store_status st = ready_check(r, &topo);
  if (st != STORE_OK) return st;
  json_t *body = topo.cluster || !detail
                     ? json_pack("{s:s, s:i}", "status", "ready", "replicas", r->replicas)
                     : json_pack("{s:s, s:i, s:s}", "status", "ready", "replicas", r->replicas,
                                 "primary", topo.primary);
  if (body && !detail) {
    if (topo.sentinel >= 0)
      json_object_set_new(body, "sentinel", json_pack("{s:b}", "reachable", topo.sentinel != 0));
    *out = body;
    return STORE_OK;
  }
  if (body && topo.cluster) {
    /* Each shard's primary: where its locks are, and how safe (replicas). */
    json_t *shards = json_array();
    for (int i = 0; shards && i < topo.nshards; i++)
      json_array_append_new(shards, json_pack("{s:s, s:i, s:i}", "primary", topo.shards[i].primary,
                                              "slots", topo.shards[i].slots, "replicas",
                                              topo.shards[i].replicas));
    json_object_set_new(body, "shards", shards);
  }
  if (body && topo.sentinel >= 0) {
    /* Still ready without Sentinel: the primary it last named serves, but
     * a failover would go unnoticed until a sentinel answers again. */
    json_t *sen = topo.sentinel ? json_pack("{s:b}", "reachable", 1)
                                : json_pack("{s:b, s:s}", "reachable", 0, "message",
                                            topo.sentinel_msg);
    json_object_set_new(body, "sentinel", sen);
  }
  *out = body;
  return STORE_OK;
}

static void store_redis_stop(void) {
  node_set_kick(NULL);
  if (store_redis_cfg && store_redis_cfg->cluster_seed_count > 0) cluster_stop();
  else if (store_redis_cfg && store_redis_cfg->sentinel_count > 0) sentinel_stop();
}

static void store_redis_thread_done(void) { conn_thread_done(); }

/* What the locks are kept in, logged once at start (main.c then logs where
 * picketd listens), and the warning a replicated Redis without
 * --min-replicas deserves. */
static void log_target(const config *c) {
  if (c->sentinel_count > 0)
    LOG(LOG_INFO, "locks are kept in Sentinel master '%s' via %d sentinels", c->sentinel_master,
        c->sentinel_count);
  else if (c->cluster_seed_count > 0)
    LOG(LOG_INFO, "locks are kept in Redis Cluster via %d seeds", c->cluster_seed_count);
  else
    LOG(LOG_INFO, "locks are kept in redis %s", c->redis.is_unix ? c->redis.path : c->redis.host);
  if ((c->sentinel_count > 0 || c->cluster_seed_count > 0) && c->min_replicas == 0)
    LOG(LOG_WARN, "--min-replicas 0 under --%s: a grant is returned before any replica "
                  "has it, so a failover can lose it and, with --fence-floor none, hand its "
                  "fence out again", c->sentinel_count > 0 ? "sentinel" : "redis-cluster");
}
static int startup_check(int id, char *err, size_t errlen);

static int store_redis_init(const config *c, char *err, size_t errlen) {
  redis_stats_init(); /* Redis's own families of /metrics (stats.h) */
  log_target(c);
  codec_init(c);
  /* The node table and its watcher know each other only through the
   * kick set here: the table is filled by the watcher, and asks it to
   * look again through the pointer. */
  node_init(store_redis_cfg);
  feed_init(store_redis_cfg);
  if (store_redis_cfg->cluster_seed_count > 0) {
    if (cluster_start(store_redis_cfg, err, errlen) < 0) return -1;
    node_set_kick(cluster_kick);
  } else if (store_redis_cfg->sentinel_count > 0) {
    if (sentinel_start(store_redis_cfg, err, errlen) < 0) return -1;
    node_set_kick(sentinel_kick);
  }
  if (conn_init() < 0) {
    snprintf(err, errlen, "pthread_key_create failed");
    return -1;
  }
  if (store_redis_cfg->fence_floor == FENCE_FLOOR_CLOCK)
    LOG(LOG_INFO, "fences are floored by Redis's clock: a lost counter (restart without AOF, "
                  "FLUSHALL, eviction, failover to a replica behind) never sends a fence back, "
                  "while Redis's clock does not step back. Not covered: a failover that loses a "
                  "grant can leave two live leases; fenced storage is what keeps that safe");
  node_shard sh[NODE_MAX];
  int n = node_shards(sh, NODE_MAX);
  if (n == 0) LOG(LOG_WARN, "no Redis primary known yet; serving 503 until one answers");
  /* Every shard is checked: any one that evicts could lose its locks'
   * fence counters. */
  for (int i = 0; i < n; i++)
    if (startup_check(sh[i].id, err, errlen) < 0) return -1;
  return 0;
}

/* The startup check of node id: -1 (why in err) when it evicts keys and
 * --allow-eviction is off; 0 otherwise, also when it cannot be reached. */
static int startup_check(int id, char *err, size_t errlen) {
  store_result r = {0};
  unsigned long gen;
  redisContext *rc = conn_open(id, &r, &gen);
  if (rc == NULL) {
    LOG(LOG_WARN, "%s; serving 503 until Redis answers", r.err);
    return 0;
  }
  info_facts f;
  const char *policy = f.policy;
  if (conn_info_read(rc, &f) < 0 || f.other_error) {
    LOG(LOG_WARN, "Redis %s during the startup check: %s; maxmemory-policy is checked when it "
                  "answers, and lock calls get 503 until then",
        f.other_error ? "refused INFO" : "connection failed", f.other_error ? f.err : rc->errstr);
  } else if (f.policy[0] == '\0' && !store_redis_cfg->allow_eviction) {
    snprintf(err, errlen, "cannot read Redis maxmemory-policy (INFO refused, or it has no "
                          "maxmemory_policy): allow picketd's Redis user INFO (see "
                          "deploy/users.acl), or start with --allow-eviction");
    redisFree(rc);
    return -1;
  } else {
    if (!*policy) policy = "unreadable (INFO refused)"; /* and --allow-eviction is set */
    int counters = strncmp(policy, "volatile-", 9) != 0; /* allkeys-* (or unknown) */
    if (conn_policy_evicts(policy) && !store_redis_cfg->allow_eviction) {
      snprintf(err, errlen,
               counters ? "Redis maxmemory-policy is %s, which can evict fence counters and "
                          "break fences; set it to noeviction (or start with --allow-eviction)"
                        : "Redis maxmemory-policy is %s, which can evict a live lease and free "
                          "a lock its holder still holds; set it to noeviction (or start with "
                          "--allow-eviction)",
               policy);
      redisFree(rc);
      return -1;
    }
    if (conn_policy_evicts(policy))
      LOG(LOG_WARN, counters ? "Redis maxmemory-policy is %s and --allow-eviction is set: an "
                               "evicted fence counter restarts that lock's fences"
                             : "Redis maxmemory-policy is %s and --allow-eviction is set: a live "
                               "lease may be evicted (the lock frees early; fences still protect "
                               "storage)",
          policy);
    if (store_redis_cfg->fence_floor == FENCE_FLOOR_NONE && f.aof == 0)
      LOG(LOG_WARN, "Redis appendonly is no: a Redis restart loses the fence counters, and "
                    "fenced storage then rejects every new holder until fences catch up "
                    "(--fence-floor clock avoids it)");
  }
  redisFree(rc);
  return 0;
}

const store_backend store_redis_backend = {
    .name = "redis",
    .init = store_redis_init,
    .thread_done = store_redis_thread_done,
    .ready = store_redis_ready,
    .stop = store_redis_stop,
    .feed_start = store_redis_feed_start,
    .feed_want = store_redis_feed_want,
    .feed_stop = store_redis_feed_stop,
    .run = store_redis_run,
    .pipeline_enabled = store_redis_pipeline_enabled,
    .pipe_new = store_redis_pipe_new,
    .pipe_connect = store_redis_pipe_connect,
    .pipe_free = store_redis_pipe_free,
    .pipe_append = store_redis_pipe_append,
    .pipe_flush = store_redis_pipe_flush,
    .pipe_fd = store_redis_pipe_fd,
    .pipe_read = store_redis_pipe_read,
    .pipe_timeout_ms = store_redis_pipe_timeout_ms,
    .pipe_expire = store_redis_pipe_expire,
    .list = store_redis_list,
    .break_lock = store_redis_break,
    .events_new = store_redis_events_new,
    .events_free = store_redis_events_free,
    .events_add = store_redis_events_add,
    .events_remove = store_redis_events_remove,
    .events_run = store_redis_events_run,
    .events_fd = store_redis_events_fd,
};
