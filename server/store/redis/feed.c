/* feed.c: the release feed on Redis (store_feed_* in store.h): what
 * wakes waiting acquires at once when a lock they wait for is released.
 *
 * One thread holds one blocking Redis connection subscribed to the release
 * channel that the release scripts PUBLISH on, and passes each released
 * name to wait.c. It subscribes only while somebody waits (store_redis_feed_want)
 * and FEED_LINGER_MS after the last one left: every release in the
 * cluster is published, and a picketd that nobody waits on has no use for
 * hearing each one. Under --redis-cluster it subscribes on any one
 * primary, and on the next when that one fails: a cluster broadcasts
 * every PUBLISH to all its nodes, so one subscription hears the releases
 * of every shard (docs/cluster.md says why this and not sharded pub/sub).
 *
 * Releases published while the feed was not subscribed are lost, so each
 * time it subscribes it reports "anything may have been released" (a NULL
 * name): every waiter at the head of its queue retries once. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "node.h"
#include "store.h"
#include "feed.h"

/* A subscriber waits for messages with no timeout, so a connection lost
 * silently (a proxy or NAT in between dropped it: no FIN, no RST, and the
 * middlebox still answers keepalives) would never be noticed, and waiters
 * would wake only at their holders' expiry. So the feed PINGs Redis after
 * this long without traffic and reconnects when the answer takes longer
 * than --redis-timeout-ms. */
#define FEED_PING_MS 1000
/* How long the feed stays subscribed after the last waiter left, so a
 * lock that is waited on now and then does not resubscribe each time. */
#define FEED_LINGER_MS 3000

static const config *cfg;
static void (*released)(const char *key);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wanted_cv = PTHREAD_COND_INITIALIZER; /* wanted, a move, or stopping */
static int wanted, stopping, started;
static int64_t idle_since_ms; /* when wanted last fell to 0 */
static pthread_t thread;
static redisContext *sub; /* guarded by mu, so stop and a move can shut it down */
static char channel[PICKET_PROTO_KEY_PREFIX_MAX + 16];

/* A subscribed connection to node id (node.c says which; *gen gets its
 * generation), or NULL. */
static redisContext *feed_connect(int id, unsigned long *gen) {
  char err[256] = "no Redis Cluster primary known";
  *gen = id >= 0 ? node_generation(id) : 0;
  redisContext *c = id >= 0 ? node_connect(id, cfg->redis_timeout_ms, gen, err, sizeof err) : NULL;
  if (c == NULL) {
    LOG(LOG_DEBUG, "release channel: %s", err);
    return NULL;
  }
  redisReply *r = redisCommand(c, "SUBSCRIBE %s", channel);
  int ok = r && r->type == REDIS_REPLY_ARRAY;
  if (r) freeReplyObject(r);
  if (!ok) {
    redisFree(c);
    return NULL;
  }
  struct timeval forever = {0, 0}; /* a subscriber waits for messages */
  redisSetTimeout(c, forever);
  return c;
}

/* node.c's switch hook: the subscription is on the old primary, which
 * publishes no more releases. Cut it, so the feed resubscribes on the new
 * one at once and lets every head retry there. */
static void feed_primary_moved(void) {
  pthread_mutex_lock(&mu);
  if (sub) shutdown(sub->fd, SHUT_RDWR);
  pthread_cond_broadcast(&wanted_cv); /* ...or ends its backoff */
  pthread_mutex_unlock(&mu);
}

/* A release message names what was released: a lock's name, or "s/" and
 * a semaphore's, "r/" and a read/write lock's, "/e/" and an election's
 * (api_call.key). Anything else on the channel is ignored. */
static int release_key_valid(const char *s, size_t len) {
  const size_t el = strlen(PICKET_PROTO_ELECTION_STORE_PREFIX);
  if (len > 2 && (s[0] == 's' || s[0] == 'r') && s[1] == '/') s += 2, len -= 2;
  else if (len > el && strncmp(s, PICKET_PROTO_ELECTION_STORE_PREFIX, el) == 0) s += el, len -= el;
  return picket_proto_name_valid(s, len);
}

/* Handles one reply, or waits for traffic and sends the health-check PING
 * when due. 0 to go on, -1 when the connection is lost or stopping. */
static int feed_next(redisContext *c, int64_t *ping_sent, int64_t *next_ping) {
  redisReply *r = NULL;
  if (redisGetReplyFromReader(c, (void **)&r) != REDIS_OK) return -1;
  if (r != NULL) {
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "message") == 0 &&
        r->element[2]->type == REDIS_REPLY_STRING &&
        release_key_valid(r->element[2]->str, r->element[2]->len))
      released(r->element[2]->str);
    freeReplyObject(r);
    *ping_sent = 0; /* any traffic (a PONG too) shows the channel alive */
    *next_ping = clock_mono_ms() + FEED_PING_MS;
    return 0;
  }
  int64_t now = clock_mono_ms();
  if (*ping_sent && now - *ping_sent >= cfg->redis_timeout_ms) {
    LOG(LOG_WARN, "release channel: no answer to PING within %lld ms; reconnecting",
        (long long)cfg->redis_timeout_ms);
    return -1;
  }
  if (!*ping_sent && now >= *next_ping) {
    int done = 0;
    if (redisAppendCommand(c, "PING") != REDIS_OK) return -1;
    while (!done)
      if (redisBufferWrite(c, &done) != REDIS_OK) return -1;
    *ping_sent = now;
  }
  int64_t until = *ping_sent ? *ping_sent + cfg->redis_timeout_ms : *next_ping;
  struct pollfd p = {.fd = c->fd, .events = POLLIN};
  int n = poll(&p, 1, until > now ? (int)(until - now) : 0);
  if (n < 0 && errno != EINTR) return -1;
  if (n > 0 && redisBufferRead(c) != REDIS_OK) return -1;
  return 0;
}

static void *feed_main(void *arg) {
  int64_t backoff = 20;
  int was_up = 0;
  int node = node_any(-1); /* the node subscribed on: 0 outside a cluster */
  for (;;) {
    pthread_mutex_lock(&mu);
    while (!stopping && !wanted) pthread_cond_wait(&wanted_cv, &mu);
    int stop = stopping;
    pthread_mutex_unlock(&mu);
    if (stop) break;
    unsigned long gen;
    redisContext *c = feed_connect(node, &gen);
    if (c == NULL) {
      node = node_any(node); /* the next primary, under --redis-cluster */
      if (was_up) LOG(LOG_WARN, "release channel lost; waiters retry at holders' expiry");
      was_up = 0;
      /* The backoff ends early when the primary moves (the retry is then
       * against a new node) or picketd stops. */
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += (long)backoff * 1000000L;
      until.tv_sec += until.tv_nsec / 1000000000L;
      until.tv_nsec %= 1000000000L;
      pthread_mutex_lock(&mu);
      while (!stopping && (node < 0 || gen == node_generation(node)) &&
             pthread_cond_timedwait(&wanted_cv, &mu, &until) == 0) {
      }
      pthread_mutex_unlock(&mu);
      backoff = backoff * 2 > 500 ? 500 : backoff * 2;
      continue;
    }
    backoff = 20;
    int64_t ping_sent = 0, next_ping = clock_mono_ms() + FEED_PING_MS;
    pthread_mutex_lock(&mu);
    sub = c;
    stop = stopping;
    pthread_mutex_unlock(&mu);
    if (!was_up) LOG(LOG_DEBUG, "subscribed to %s", channel);
    was_up = 1;
    released(NULL); /* what was published while not subscribed is lost */
    int idle = 0;
    while (!stop && !idle && gen == node_generation(node) &&
           feed_next(c, &ping_sent, &next_ping) == 0) {
      pthread_mutex_lock(&mu);
      stop = stopping;
      idle = !wanted && clock_mono_ms() - idle_since_ms >= FEED_LINGER_MS;
      pthread_mutex_unlock(&mu);
    }
    pthread_mutex_lock(&mu);
    sub = NULL;
    pthread_mutex_unlock(&mu);
    redisFree(c);
    if (idle) {
      LOG(LOG_DEBUG, "no waiters for %d ms: unsubscribed from %s", FEED_LINGER_MS, channel);
      was_up = 0;
    } else if (!stopping) {
      LOG(LOG_INFO, "release channel connection closed; resubscribing");
      node = node_any(node);
    }
  }
  return arg;
}

void feed_init(const config *c) { cfg = c; }

const config *feed_config(void) { return cfg; }

int store_redis_feed_start(void (*on_released)(const char *key)) {
  released = on_released;
  picket_proto_channel(channel, sizeof channel, cfg->key_prefix);
  node_on_switch(feed_primary_moved);
  if (pthread_create(&thread, NULL, feed_main, NULL) != 0) return -1;
  started = 1;
  return 0;
}

void store_redis_feed_want(int on) {
  pthread_mutex_lock(&mu);
  if (on && !wanted) pthread_cond_signal(&wanted_cv);
  if (!on && wanted) idle_since_ms = clock_mono_ms();
  wanted = on;
  pthread_mutex_unlock(&mu);
}

void store_redis_feed_stop(void) {
  if (!started) return;
  pthread_mutex_lock(&mu);
  stopping = 1;
  if (sub) shutdown(sub->fd, SHUT_RDWR);
  pthread_cond_broadcast(&wanted_cv);
  pthread_mutex_unlock(&mu);
  pthread_join(thread, NULL);
  started = 0;
}
