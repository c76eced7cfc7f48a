/* sentinel.c: the Sentinel watcher (--sentinel), one thread.
 *
 * It does what Redis's "Sentinel client spec" asks of a client, and what
 * redis-py and Redisson do:
 *  - ask the sentinels in turn for the master's address
 *    (SENTINEL get-master-addr-by-name), the last one that answered first;
 *  - check the named node with ROLE before it is used: a sentinel can name
 *    a node that has just been demoted, and a replica must never take a
 *    lock call;
 *  - stay subscribed to +switch-master on one sentinel (another when that
 *    one goes away), so a failover moves picketd the moment Sentinel
 *    announces it, not when the old primary's connections break;
 *  - ask again when told to (node_trouble: READONLY, LOADING, a dead
 *    connection), at most every ASK_MIN_MS, and every ASK_PERIOD_MS anyway,
 *    in case an announcement was missed while no subscription was up.
 * The subscription is PINGed after PING_MS of silence, so a sentinel lost
 * without a word is noticed within --redis-timeout-ms. While no sentinel
 * answers, the primary it last named keeps serving; /readyz and the log say
 * that Sentinel cannot be heard. */
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

#include "log.h"
#include "node.h"
#include "watcher.h"

#define ASK_MIN_MS 50        /* between two asks on trouble */
#define ASK_UNKNOWN_MS 200   /* between asks while no primary is known */
#define ASK_PERIOD_MS 5000   /* between asks when all is well */
#define PING_MS 1000         /* silence on the subscription before a PING */
#define RESUBSCRIBE_MS 250   /* between rounds of subscribe attempts */

static const config *cfg;
static watcher w = WATCHER_INIT;
static int next_sentinel; /* the one to try first: the last that answered */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sentinel_kick(void) { watcher_kick(&w); }

/* A connection to sentinel i, authenticated; NULL with why in err. */
static redisContext *sentinel_open(int i, char *err, size_t errlen) {
  const sentinel_addr *a = &cfg->sentinels[i];
  struct timeval tv = {(time_t)(cfg->redis_timeout_ms / 1000),
                       (suseconds_t)((cfg->redis_timeout_ms % 1000) * 1000)};
  redisContext *c = redisConnectWithTimeout(a->host, a->port, tv);
  if (c == NULL || c->err) {
    snprintf(err, errlen, "sentinel %s:%d: %s", a->host, a->port, c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  redisEnableKeepAlive(c);
  if (cfg->sentinel_password[0]) {
    redisReply *r = redisCommand(c, "AUTH %s", cfg->sentinel_password);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    snprintf(err, errlen, "sentinel %s:%d refused AUTH: %.100s", a->host, a->port,
             r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
    if (r) freeReplyObject(r);
    if (!ok) {
      redisFree(c);
      return NULL;
    }
  }
  return c;
}

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
 * back to the old node is announced as such and replaces the hold. */
#define HOLD_MS 10000
#define DEPOSED_MS 180000
static char hold_addr[280];   /* "host:port" of the deposed primary */
static int64_t hold_until_ms; /* 0: no hold */

/* Acts on an address a sentinel gave for the primary: probes it and, if it
 * says it is the primary (or cannot be reached: then calls fail with the
 * reason until Sentinel names another), makes it the table's primary. A
 * node that says it is a replica is not used, nor the one being deposed. */
static void primary_named(const char *host, int port) {
  char why[240];
  if (hold_until_ms) {
    char addr[280];
    snprintf(addr, sizeof addr, "%s:%d", host, port);
    if (strcmp(addr, hold_addr) == 0) return;
  }
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
    redisContext *c = sentinel_open(i, err, errlen);
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

/* A subscription to one sentinel's announcements. */
typedef struct {
  redisContext *c;      /* NULL while down */
  int64_t next_try_ms;  /* when to subscribe again */
  int64_t ping_sent_ms; /* a PING is out since then (0: none) */
  int64_t next_ping_ms;
} subscription;

static subscription subs[CONFIG_SENTINELS_MAX];

/* Subscribes to sentinel i's failover announcements. Every sentinel is
 * subscribed to, not one: the steps before +switch-master are announced
 * only by the sentinel that leads the failover, and any of them may. */
static int subscribe(int i, char *err, size_t errlen) {
  subscription *s = &subs[i];
  redisContext *c = sentinel_open(i, err, errlen);
  if (c == NULL) return -1;
  redisReply *r = redisCommand(c, "SUBSCRIBE +selected-slave +promoted-slave +switch-master");
  int ok = r && r->type == REDIS_REPLY_ARRAY;
  if (r) freeReplyObject(r);
  if (!ok) {
    snprintf(err, errlen, "sentinel %s:%d: SUBSCRIBE failed", cfg->sentinels[i].host,
             cfg->sentinels[i].port);
    redisFree(c);
    return -1;
  }
  /* The two replies still owed (one per further channel) are read, and
   * ignored, as messages. */
  s->c = c;
  s->ping_sent_ms = 0;
  s->next_ping_ms = now_ms() + PING_MS;
  return 0;
}

static void unsubscribe(int i, const char *why) {
  subscription *s = &subs[i];
  LOG(LOG_INFO, "subscription to sentinel %s:%d lost (%s)", cfg->sentinels[i].host,
      cfg->sentinels[i].port, why);
  redisFree(s->c);
  s->c = NULL;
  s->next_try_ms = now_ms() + RESUBSCRIBE_MS;
}


/* One announcement. Payloads: "+switch-master <name> <old-ip> <old-port>
 * <new-ip> <new-port>"; "+selected-slave" and "+promoted-slave": "slave
 * <ip:port> <ip> <port> @ <name> <master-ip> <master-port>". */
static void on_message(const redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
      r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0 ||
      r->element[1]->type != REDIS_REPLY_STRING || r->element[2]->type != REDIS_REPLY_STRING)
    return;
  const char *chan = r->element[1]->str, *msg = r->element[2]->str;
  char name[128], h1[256], h2[256], id[300];
  int p1, p2;
  if (strcmp(chan, "+switch-master") == 0) {
    if (sscanf(msg, "%127s %255s %d %255s %d", name, h1, &p1, h2, &p2) != 5 ||
        strcmp(name, cfg->sentinel_master) != 0)
      return;
    LOG(LOG_INFO, "Sentinel announces +switch-master for '%s': %s:%d -> %s:%d", name, h1, p1, h2,
        p2);
    snprintf(hold_addr, sizeof hold_addr, "%s:%d", h1, p1);
    hold_until_ms = now_ms() + DEPOSED_MS;
    primary_named(h2, p2);
    return;
  }
  /* +selected-slave or +promoted-slave: h1:p1 the replica, h2:p2 the old primary */
  if (sscanf(msg, "slave %299s %255s %d @ %127s %255s %d", id, h1, &p1, name, h2, &p2) != 6 ||
      strcmp(name, cfg->sentinel_master) != 0)
    return;
  if (strcmp(chan, "+selected-slave") == 0) {
    snprintf(hold_addr, sizeof hold_addr, "%s:%d", h2, p2);
    hold_until_ms = now_ms() + HOLD_MS;
    char why[800];
    snprintf(why, sizeof why, "Sentinel is failing over '%s' from %s:%d to %s:%d", name, h2, p2,
             h1, p1);
    node_forget_primary(why);
  } else if (strcmp(chan, "+promoted-slave") == 0) {
    LOG(LOG_INFO, "Sentinel promoted %s:%d for '%s'", h1, p1, name);
    snprintf(hold_addr, sizeof hold_addr, "%s:%d", h2, p2);
    hold_until_ms = now_ms() + DEPOSED_MS;
    primary_named(h1, p1);
  }
}

/* Sentinel reachability, logged on each change. */
static void reachable(int yes, const char *why, int *was) {
  if (yes && *was == 0) LOG(LOG_INFO, "hearing Sentinel again");
  if (!yes && *was != 0)
    LOG(LOG_WARN, "Sentinel unreachable (%s): serving from the last primary it named, and "
                  "cannot learn of a failover until a sentinel answers", why);
  *was = yes;
  node_sentinel_state(yes, why);
}

/* Reads what sentinel i sent; -1 when its connection is gone. */
static int sub_read(int i) {
  subscription *s = &subs[i];
  if (redisBufferRead(s->c) != REDIS_OK) return -1;
  redisReply *r = NULL;
  while (redisGetReplyFromReader(s->c, (void **)&r) == REDIS_OK && r != NULL) {
    on_message(r);
    freeReplyObject(r);
    r = NULL;
    s->ping_sent_ms = 0; /* any traffic shows the sentinel alive */
    s->next_ping_ms = now_ms() + PING_MS;
  }
  return s->c->err ? -1 : 0;
}

/* The health check of an idle subscription: PING after PING_MS of
 * silence, and give up on it when the answer takes --redis-timeout-ms.
 * -1 when it is to be dropped (why in err). */
static int sub_ping(int i, int64_t now, char *err, size_t errlen) {
  subscription *s = &subs[i];
  if (s->ping_sent_ms && now - s->ping_sent_ms >= cfg->redis_timeout_ms) {
    snprintf(err, errlen, "no answer to PING within %lld ms", (long long)cfg->redis_timeout_ms);
    return -1;
  }
  if (s->ping_sent_ms || now < s->next_ping_ms) return 0;
  int done = 0;
  if (redisAppendCommand(s->c, "PING") != REDIS_OK) return -1;
  while (!done)
    if (redisBufferWrite(s->c, &done) != REDIS_OK) return -1;
  s->ping_sent_ms = now;
  return 0;
}

static void *watch_main(void *arg) {
  int n = cfg->sentinel_count;
  int heard = -1; /* not logged yet */
  int64_t next_ask = now_ms() + ASK_PERIOD_MS, last_ask = now_ms();
  char err[240] = "";
  while (!atomic_load(&w.stopping)) {
    int64_t now = now_ms(), until = next_ask;
    int up = 0;
    for (int i = 0; i < n; i++) {
      if (subs[i].c == NULL && now >= subs[i].next_try_ms) {
        if (subscribe(i, err, sizeof err) == 0)
          next_ask = now; /* an announcement may have been missed while it was down */
        else
          subs[i].next_try_ms = now + RESUBSCRIBE_MS;
      }
      up += subs[i].c != NULL;
    }
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
      if (up == 0) reachable(0, err, &heard);
    }

    /* Sleep until a message, a kick, or the next thing due. */
    struct pollfd p[CONFIG_SENTINELS_MAX + 1];
    p[n] = (struct pollfd){.fd = w.fd, .events = POLLIN};
    until = next_ask;
    if (atomic_load(&w.kicked) && last_ask + ASK_MIN_MS < until) until = last_ask + ASK_MIN_MS;
    for (int i = 0; i < n; i++) {
      subscription *s = &subs[i];
      p[i] = (struct pollfd){.fd = s->c ? s->c->fd : -1, .events = POLLIN};
      int64_t due = s->c == NULL      ? s->next_try_ms
                    : s->ping_sent_ms ? s->ping_sent_ms + cfg->redis_timeout_ms
                                      : s->next_ping_ms;
      if (due < until) until = due;
    }
    now = now_ms();
    if (poll(p, (nfds_t)n + 1, until > now ? (int)(until - now) : 0) < 0 && errno != EINTR) break;
    if (p[n].revents & POLLIN) {
      watcher_drain(&w);
    }
    now = now_ms();
    for (int i = 0; i < n; i++) {
      if (subs[i].c == NULL) continue;
      char why[200] = "closed";
      int lost = (p[i].revents & (POLLIN | POLLHUP | POLLERR)) && sub_read(i) < 0;
      if (lost && subs[i].c->err) snprintf(why, sizeof why, "%s", subs[i].c->errstr);
      if (!lost && sub_ping(i, now, why, sizeof why) < 0) lost = 1;
      if (lost) unsubscribe(i, why);
    }
    if (hold_until_ms && now >= hold_until_ms) {
      LOG(LOG_WARN, "Sentinel's failover away from %s was not announced as finished in time; "
                    "asking the sentinels again", hold_addr);
      hold_until_ms = 0;
      next_ask = now;
    }
  }
  for (int i = 0; i < n; i++)
    if (subs[i].c) redisFree(subs[i].c);
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
  if (watcher_start(&w, watch_main) < 0) {
    snprintf(err, errlen, "cannot start the Sentinel watcher thread");
    return -1;
  }
  return 0;
}

void sentinel_stop(void) { watcher_stop(&w); }
