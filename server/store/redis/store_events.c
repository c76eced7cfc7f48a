/* store_events.c: lock events on Redis (store_events_* in store.h), for
 * the events thread (events.c), which owns the streams.
 *
 * The scripts that grant, renew, release and break a lock publish an
 * event on the lock's channel P{NAME}:events, but only while the key
 * P{NAME}:watch exists (proto/redis/events.lua): an unwatched lock pays
 * one EXISTS per call and publishes nothing, which keeps Redis Cluster,
 * where every classic PUBLISH is broadcast to all nodes, from carrying
 * each grant and renewal of every lock. So, for each name followed, this
 *  1. subscribes to its channel on one Redis connection (any primary under
 *     --redis-cluster: a classic PUBLISH reaches every node, as the release
 *     channel's does; docs/cluster.md),
 *  2. once Redis confirms the subscription, sets P{NAME}:watch for
 *     WATCH_FOR_MS, and again every WATCH_EVERY_MS (watch.lua), so no event
 *     published after the key is set can be missed,
 *  3. and only then reports the name ready: a read of the lock from then
 *     on misses no event.
 * When the subscription is lost (Redis restarts, the primary moves) events
 * published meanwhile are lost: the hooks hear `lost`, and every name is
 * subscribed again and reported ready again.
 *
 * One thread uses a store_events; nothing here takes a lock. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "feed.h"
#include "clock.h"
#include "log.h"
#include "node.h"
#include "store.h"

#define WATCH_FOR_MS 10000  /* P{NAME}:watch lives this long... */
#define WATCH_EVERY_MS 3000 /* ...and is set again this often */
#define PING_MS 1000        /* a quiet subscription is checked this often */
#define RETRY_MS 250        /* a failed connect or watch is tried again after */
#define CHANNEL_MAX (PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 16)

enum { CH_NONE, CH_SENT, CH_ACTIVE };

typedef struct entry {
  char name[PICKET_PROTO_NAME_MAX + 1];
  char channel[CHANNEL_MAX];
  int state;             /* its channel on the current connection */
  int ready;             /* reported ready since the channel became active */
  int64_t watch_due_ms;  /* when to set P{NAME}:watch again */
  struct entry *next;
} entry;

struct store_events {
  store_events_hooks hooks;
  void *ctx;
  const config *cfg;
  entry *list;
  redisContext *c;
  int node;
  unsigned long gen;
  int64_t retry_at, ping_sent, next_ping;
};

store_events *store_redis_events_new(const store_events_hooks *hooks, void *ctx) {
  store_events *e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  e->hooks = *hooks;
  e->ctx = ctx;
  e->cfg = feed_config();
  e->node = -1;
  return e;
}

void store_redis_events_free(store_events *e) {
  if (e == NULL) return;
  if (e->c) redisFree(e->c);
  for (entry *x = e->list, *next; x; x = next) {
    next = x->next;
    free(x);
  }
  free(e);
}

int store_redis_events_add(store_events *e, const char *name) {
  entry *x = calloc(1, sizeof *x);
  if (x == NULL) return -1;
  snprintf(x->name, sizeof x->name, "%s", name);
  picket_proto_channel_events(x->channel, sizeof x->channel, e->cfg->key_prefix, name);
  x->next = e->list;
  e->list = x;
  return 0;
}

void store_redis_events_remove(store_events *e, const char *name) {
  for (entry **p = &e->list; *p; p = &(*p)->next) {
    entry *x = *p;
    if (strcmp(x->name, name) != 0) continue;
    if (e->c && x->state != CH_NONE) redisAppendCommand(e->c, "UNSUBSCRIBE %s", x->channel);
    *p = x->next;
    free(x);
    return;
  }
}

int store_redis_events_fd(const store_events *e) { return e->c ? e->c->fd : -1; }

/* Drops the connection: every channel must be subscribed again, and the
 * events published meanwhile are lost. */
static void drop(store_events *e, const char *why) {
  if (why) LOG(LOG_INFO, "events: %s; subscribing again (streams get a new state)", why);
  if (e->c) redisFree(e->c);
  e->c = NULL;
  for (entry *x = e->list; x; x = x->next) x->state = CH_NONE, x->ready = 0;
  e->retry_at = clock_mono_ms() + RETRY_MS;
  e->hooks.lost(e->ctx);
}

static redisContext *connect_node(store_events *e) {
  char err[256] = "no Redis primary known";
  e->node = node_any(e->node < 0 ? -1 : e->node);
  redisContext *c =
      e->node >= 0 ? node_connect(e->node, e->cfg->redis_timeout_ms, &e->gen, err, sizeof err)
                   : NULL;
  if (c == NULL) {
    LOG(LOG_DEBUG, "events: %s", err);
    return NULL;
  }
  struct timeval forever = {0, 0}; /* a subscriber waits for messages */
  redisSetTimeout(c, forever);
  return c;
}

/* Sends SUBSCRIBE for the names not yet on this connection, and whatever
 * UNSUBSCRIBE store_redis_events_remove appended. -1 when the connection failed. */
static int sync_channels(store_events *e) {
  for (entry *x = e->list; x; x = x->next)
    if (x->state == CH_NONE) {
      redisAppendCommand(e->c, "SUBSCRIBE %s", x->channel);
      x->state = CH_SENT;
    }
  int done = 0;
  while (!done)
    if (redisBufferWrite(e->c, &done) != REDIS_OK) return -1;
  return 0;
}

static entry *by_channel(store_events *e, const redisReply *r) {
  if (r->type != REDIS_REPLY_STRING) return NULL;
  for (entry *x = e->list; x; x = x->next)
    if (strcmp(x->channel, r->str) == 0) return x;
  return NULL;
}

/* A message on a lock's channel: "KIND FENCE N TIME TEXT" (events.lua). */
static void on_message(store_events *e, entry *x, const char *msg, size_t len) {
  char copy[1024];
  if (len >= sizeof copy) return;
  memcpy(copy, msg, len);
  copy[len] = '\0';
  char kind = 0;
  long long fence = 0, n = 0, time = 0;
  int text_at = 0;
  if (sscanf(copy, "%c %lld %lld %lld %n", &kind, &fence, &n, &time, &text_at) < 4) return;
  if (kind != 'g' && kind != 'n' && kind != 'r' && kind != 'b') return;
  store_event ev = {kind, fence, n, time, text_at > 0 ? copy + text_at : ""};
  e->hooks.event(e->ctx, x->name, &ev);
}

/* One reply on the subscription. */
static void on_reply(store_events *e, redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
      r->element[0]->type != REDIS_REPLY_STRING)
    return;
  const char *what = r->element[0]->str;
  entry *x = by_channel(e, r->element[1]);
  if (x == NULL) return;
  if (strcmp(what, "subscribe") == 0) {
    x->state = CH_ACTIVE;
    x->ready = 0;
    x->watch_due_ms = 0; /* set P{NAME}:watch now, then report it ready */
  } else if (strcmp(what, "message") == 0 && r->elements == 3 &&
             r->element[2]->type == REDIS_REPLY_STRING) {
    on_message(e, x, r->element[2]->str, r->element[2]->len);
  }
}

/* Sets the watch keys that are due; the next one due goes into *next. */
static void watch_keys(store_events *e, int64_t *next) {
  for (entry *x = e->list; x; x = x->next) {
    if (x->state != CH_ACTIVE) continue;
    int64_t now = clock_mono_ms();
    if (now >= x->watch_due_ms) {
      store_result r;
      int ok = store_redis_watch(x->name, WATCH_FOR_MS, &r) == STORE_OK;
      if (!ok) LOG(LOG_DEBUG, "events: cannot watch %s: %s", x->name, r.err);
      x->watch_due_ms = now + (ok ? WATCH_EVERY_MS : RETRY_MS);
      if (ok && !x->ready) {
        x->ready = 1;
        e->hooks.ready(e->ctx, x->name);
      }
    }
    if (x->watch_due_ms < *next) *next = x->watch_due_ms;
  }
}

int64_t store_redis_events_run(store_events *e, int readable) {
  int64_t now = clock_mono_ms();
  int64_t next = now + 1000;
  if (e->c && (e->list == NULL || e->gen != node_generation(e->node))) {
    /* nobody watches, or the primary moved */
    if (e->list) drop(e, NULL);
    else {
      redisFree(e->c);
      e->c = NULL;
    }
  }
  if (e->list && e->c == NULL && now >= e->retry_at) {
    if ((e->c = connect_node(e)) == NULL) e->retry_at = now + RETRY_MS;
    e->ping_sent = 0, e->next_ping = now + PING_MS;
  }
  if (e->c == NULL) return e->list && e->retry_at < next ? e->retry_at : next;
  if (sync_channels(e) < 0) {
    drop(e, "subscription lost");
    return e->retry_at;
  }
  if (e->ping_sent && now - e->ping_sent >= e->cfg->redis_timeout_ms) {
    drop(e, "no answer to PING");
    return e->retry_at;
  }
  if (readable) {
    int ok = redisBufferRead(e->c) == REDIS_OK;
    redisReply *r = NULL;
    while (ok && (ok = redisGetReplyFromReader(e->c, (void **)&r) == REDIS_OK) && r) {
      e->ping_sent = 0, e->next_ping = clock_mono_ms() + PING_MS; /* any traffic shows it alive */
      on_reply(e, r);
      freeReplyObject(r);
      r = NULL;
    }
    if (!ok) {
      drop(e, "subscription closed");
      return e->retry_at;
    }
  }
  watch_keys(e, &next);
  if (!e->ping_sent && clock_mono_ms() >= e->next_ping) {
    int done = 0;
    redisAppendCommand(e->c, "PING");
    while (!done && redisBufferWrite(e->c, &done) == REDIS_OK) {
    }
    e->ping_sent = clock_mono_ms();
  }
  int64_t t = e->ping_sent ? e->ping_sent + e->cfg->redis_timeout_ms : e->next_ping;
  return t < next ? t : next;
}
