/* sentinel.c: the Sentinel watcher (--sentinel): which node is the primary.
 *
 * It does what Redis's "Sentinel client spec" asks of a client, and what
 * redis-py and Redisson do:
 *  - ask the sentinels in turn for the master's address
 *    (SENTINEL get-master-addr-by-name), the last one that answered first;
 *  - check the named node with ROLE before it is used: a sentinel can name
 *    a node that has just been demoted, and a replica must never take a
 *    lock call;
 *  - act on the failover announcements (+selected-slave, +promoted-slave,
 *    +switch-master) the moment any sentinel makes them, not when the old
 *    primary's connections break;
 *  - ask again when told to (node_trouble: READONLY, LOADING, a dead
 *    connection), at most every ASK_MIN_MS, and every ASK_PERIOD_MS anyway,
 *    in case an announcement was missed while no subscription was up.
 * The announcements are heard, and the primary lease kept, by one thread
 * per sentinel (sentinel_link.c), so that a sentinel or a node that does
 * not answer never delays them: this file's thread is the only one that
 * waits on the data nodes (asks and ROLE probes), and the links hand it
 * the nodes to probe. */
#include "sentinel.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "node.h"
#include "sentinel_link.h"
#include "watcher.h"

#define ASK_MIN_MS 50        /* between two asks on trouble */
#define ASK_UNKNOWN_MS 200   /* between asks while no primary is known */
#define ASK_PERIOD_MS 5000   /* between asks when all is well */
#define RELOOK_MS 250        /* between looks at the links' reachability */

static const config *cfg;
static watcher w = WATCHER_INIT;
static int next_sentinel; /* the one to try first: the last that answered (watcher only) */

void sentinel_kick(void) { watcher_kick(&w); }

/* The primary a failover is deposing. From +selected-slave on, no lock
 * call goes to it: it is still a primary then, and stays one until the
 * sentinels convert it, seconds after +switch-master. A grant made there
 * would replicate only to replicas about to resync from the new primary,
 * and be lost. Nor may it come back after +promoted-slave: a sentinel that
 * has not heard of the promotion still names it (the leader alone knows
 * until +switch-master), and asking is routine (a kick, every 5 s, every
 * resubscribe), and neither does a sentinel that has not yet taken the
 * new configuration that +switch-master announced. So each of the three
 * announcements makes the old primary the deposed one. The hold lapses
 * after HOLD_MS when no promotion followed (the failover aborted: the old
 * primary is the primary), and DEPOSED_MS after the promotion or the
 * switch (Sentinel's default failover-timeout), by when every sentinel
 * names the new primary and has converted the old one. A later failover
 * back to the old node is announced as such and replaces the hold; one
 * this picketd did not hear (it was cut off from the sentinels) shows as
 * a sentinel naming the held node under a config-epoch above the one of
 * the hold (each successful failover raises it), and lifts the hold. */
#define HOLD_MS 10000
#define DEPOSED_MS 180000
/* Shared by the link threads (which set them) and the watcher: */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char hold_addr[280];   /* "host:port" of the deposed primary */
static int64_t hold_until_ms; /* 0: no hold */
static int64_t hold_epoch;    /* the sentinels' config-epoch when it began (0: unknown) */
static char named_host[256];  /* a node an announcement named, to probe (port 0: none) */
static int named_port;

/* Holds addr (host:port) off for ms, from the sentinels' config-epoch
 * `epoch` on (sentinel_link_epoch(), read before mu is taken). Called with
 * mu held. */
static void hold_locked(const char *host, int port, int64_t ms, int64_t epoch) {
  snprintf(hold_addr, sizeof hold_addr, "%s:%d", host, port);
  hold_until_ms = clock_mono_ms() + ms;
  hold_epoch = epoch;
}

/* Acts on an address a sentinel gave for the primary: probes it and, if it
 * says it is the primary (or cannot be reached: then calls fail with the
 * reason until Sentinel names another), makes it the table's primary. A
 * node that says it is a replica is not used, nor the one being deposed. */
static void primary_named(const char *host, int port) {
  char why[240], addr[280];
  snprintf(addr, sizeof addr, "%s:%d", host, port);
  pthread_mutex_lock(&mu);
  int held = hold_until_ms && strcmp(addr, hold_addr) == 0;
  int64_t since = hold_epoch;
  pthread_mutex_unlock(&mu);
  if (held && since > 0 && sentinel_link_names_after(addr, since)) {
    LOG(LOG_WARN, "Sentinel failed over back to %s (config-epoch above %lld) without this picketd "
                  "hearing it; using it again", addr, (long long)since);
    pthread_mutex_lock(&mu);
    if (strcmp(addr, hold_addr) == 0) hold_until_ms = 0;
    pthread_mutex_unlock(&mu);
    held = 0;
  }
  if (held) return;
  int role = node_probe(host, port, why, sizeof why);
  if (role == 0) {
    char msg[320];
    snprintf(msg, sizeof msg, "Sentinel names %s:%d as the primary, but it %s", host, port, why);
    node_forget_primary(msg);
    return;
  }
  if (role < 0) LOG(LOG_DEBUG, "Sentinel names %s:%d as the primary: %s", host, port, why);
  node_set_primary(host, port);
}

/* Asks the sentinels in turn for the primary. 1 when one answered. */
static int ask(char *err, size_t errlen) {
  int n = cfg->sentinel_count;
  for (int k = 0; k < n; k++) {
    int i = (next_sentinel + k) % n;
    redisContext *c = sentinel_link_open(cfg, i, err, errlen);
    if (c == NULL) continue;
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", cfg->sentinel_master);
    const sentinel_addr *a = &cfg->sentinels[i];
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
      char host[256];
      snprintf(host, sizeof host, "%s", r->element[0]->str);
      int port = atoi(r->element[1]->str);
      freeReplyObject(r);
      redisFree(c);
      next_sentinel = i;
      if (port > 0 && port <= 65535) primary_named(host, port);
      return 1;
    }
    if (r == NULL)
      snprintf(err, errlen, "sentinel %s:%d: %s", a->host, a->port, c->errstr);
    else if (r->type == REDIS_REPLY_NIL)
      snprintf(err, errlen, "sentinel %s:%d does not know master '%s'", a->host, a->port,
               cfg->sentinel_master);
    else if (r->type == REDIS_REPLY_ERROR)
      snprintf(err, errlen, "sentinel %s:%d: %.120s", a->host, a->port, r->str);
    else
      snprintf(err, errlen, "sentinel %s:%d gave an odd reply", a->host, a->port);
    if (r) freeReplyObject(r);
    redisFree(c);
  }
  if (n > 1) { /* say that all were tried, not only the last */
    char last[240];
    snprintf(last, sizeof last, "%s", err);
    snprintf(err, errlen, "none of %d sentinels answers; last: %.190s", n, last);
  }
  return 0;
}

/* old_h:old_p is deposed (held off for DEPOSED_MS) and new_h:new_p named:
 * the watcher probes it and, if it says it is the primary, uses it. */
static void deposed(const char *old_h, int old_p, const char *new_h, int new_p) {
  int64_t epoch = sentinel_link_epoch();
  pthread_mutex_lock(&mu);
  hold_locked(old_h, old_p, DEPOSED_MS, epoch);
  snprintf(named_host, sizeof named_host, "%s", new_h);
  named_port = new_p;
  pthread_mutex_unlock(&mu);
  watcher_kick(&w);
}

/* One announcement, on a link's thread (it must not block: the probe of a
 * node named here is left to the watcher). Payloads: "+switch-master
 * <name> <old-ip> <old-port> <new-ip> <new-port>"; "+selected-slave" and
 * "+promoted-slave": "slave <ip:port> <ip> <port> @ <name> <master-ip>
 * <master-port>". */
static void on_event(const char *chan, const char *msg) {
  char name[128], h1[256], h2[256], id[300];
  int p1, p2;
  if (strcmp(chan, "+switch-master") == 0) {
    if (sscanf(msg, "%127s %255s %d %255s %d", name, h1, &p1, h2, &p2) != 5 ||
        strcmp(name, cfg->sentinel_master) != 0)
      return;
    LOG(LOG_INFO, "Sentinel announces +switch-master for '%s': %s:%d -> %s:%d", name, h1, p1, h2,
        p2);
    deposed(h1, p1, h2, p2);
    return;
  }
  /* +selected-slave or +promoted-slave: h1:p1 the replica, h2:p2 the old primary */
  if (sscanf(msg, "slave %299s %255s %d @ %127s %255s %d", id, h1, &p1, name, h2, &p2) != 6 ||
      strcmp(name, cfg->sentinel_master) != 0)
    return;
  if (strcmp(chan, "+selected-slave") == 0) {
    int64_t epoch = sentinel_link_epoch();
    pthread_mutex_lock(&mu);
    hold_locked(h2, p2, HOLD_MS, epoch);
    pthread_mutex_unlock(&mu);
    char why[800];
    snprintf(why, sizeof why, "Sentinel is failing over '%s' from %s:%d to %s:%d", name, h2, p2,
             h1, p1);
    node_forget_primary(why);
  } else if (strcmp(chan, "+promoted-slave") == 0) {
    LOG(LOG_INFO, "Sentinel promoted %s:%d for '%s'", h1, p1, name);
    deposed(h2, p2, h1, p1);
  }
}

/* Sentinel reachability, logged on each change. */
static void reachable(int yes, const char *why, int *was) {
  if (yes && *was == 0) LOG(LOG_INFO, "hearing Sentinel again");
  if (!yes && *was != 0)
    LOG(LOG_WARN, "Sentinel unreachable (%s): %s", why,
        cfg->sentinel_lease ? "lock calls are refused once the sentinels' last confirmation "
                              "of the primary runs out"
                            : "serving from the last primary it named (--sentinel-lease false), "
                              "and cannot learn of a failover until a sentinel answers");
  *was = yes;
  node_sentinel_state(yes, why);
}

static void *watch_main(void *arg) {
  int heard = -1; /* not logged yet */
  int64_t next_ask = clock_mono_ms() + ASK_PERIOD_MS, last_ask = clock_mono_ms();
  char err[240] = "no sentinel link is up";
  int was_up = 0;
  int64_t started_ms = clock_mono_ms();
  while (!atomic_load(&w.stopping)) {
    int64_t now = clock_mono_ms();
    /* A node an announcement named: probed here, where waiting is allowed. */
    char host[256];
    pthread_mutex_lock(&mu);
    int port = named_port;
    snprintf(host, sizeof host, "%s", named_host);
    named_port = 0;
    pthread_mutex_unlock(&mu);
    if (port) primary_named(host, port);

    int up = sentinel_link_up();
    if (up > was_up) next_ask = now; /* an announcement may have been missed while it was down */
    was_up = up;
    int want = atomic_exchange(&w.kicked, 0);
    if ((want && now - last_ask >= ASK_MIN_MS) || now >= next_ask) {
      last_ask = now;
      int ok = ask(err, sizeof err);
      reachable(ok || up > 0, err, &heard);
      node_info i;
      node_describe(&i);
      next_ask = now + (i.primary[0] ? ASK_PERIOD_MS : ASK_UNKNOWN_MS);
    } else {
      if (want) atomic_store(&w.kicked, 1); /* too soon: keep it for its turn */
      /* (the links get --redis-timeout-ms to connect before they count as lost) */
      if (up > 0) reachable(1, err, &heard);
      else if (now - started_ms > cfg->redis_timeout_ms) reachable(0, err, &heard);
    }

    pthread_mutex_lock(&mu);
    int lapsed = hold_until_ms && clock_mono_ms() >= hold_until_ms;
    char was[280];
    snprintf(was, sizeof was, "%s", hold_addr);
    if (lapsed) hold_until_ms = 0;
    int64_t hold = hold_until_ms;
    pthread_mutex_unlock(&mu);
    if (lapsed) {
      LOG(LOG_WARN, "Sentinel's failover away from %s was not announced as finished in time; "
                    "asking the sentinels again", was);
      next_ask = clock_mono_ms();
      continue;
    }

    /* Sleep until a kick (a link's announcement, a call's trouble), the
     * next ask, or the hold's end; and look at the links' state now and
     * then (the reachability above). */
    int64_t until = next_ask;
    if (atomic_load(&w.kicked) && last_ask + ASK_MIN_MS < until) until = last_ask + ASK_MIN_MS;
    if (hold && hold < until) until = hold;
    if (clock_mono_ms() + RELOOK_MS < until) until = clock_mono_ms() + RELOOK_MS;
    struct pollfd p = {.fd = w.fd, .events = POLLIN};
    now = clock_mono_ms();
    if (poll(&p, 1, until > now ? (int)(until - now) : 0) < 0 && errno != EINTR) break;
    if (p.revents & POLLIN) watcher_drain(&w);
  }
  return arg;
}

int sentinel_start(const config *c, char *err, size_t errlen) {
  cfg = c;
  if (watcher_init(&w) < 0) {
    snprintf(err, errlen, "eventfd: %s", strerror(errno));
    return -1;
  }
  char why[240] = "";
  if (!ask(why, sizeof why)) {
    LOG(LOG_WARN, "no sentinel answers yet (%s); lock calls get 503 until one names the primary",
        why);
    node_sentinel_state(0, why);
  }
  if (sentinel_link_start(c, on_event, err, errlen) < 0) return -1;
  if (watcher_start(&w, watch_main) < 0) {
    snprintf(err, errlen, "cannot start the Sentinel watcher thread");
    return -1;
  }
  return 0;
}

void sentinel_stop(void) {
  sentinel_link_stop();
  watcher_stop(&w);
}
