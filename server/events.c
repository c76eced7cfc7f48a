/* events.c: lock event streams, GET /v1/locks/{name}/events
 * (docs/events.md says what a client sees).
 *
 * Where events come from. The scripts that grant, renew, release and break
 * a lock publish an event on the lock's channel P{NAME}:events, but only
 * while the key P{NAME}:watch exists (proto/redis/events.lua): an
 * unwatched lock pays one EXISTS per call and publishes nothing, which
 * keeps Redis Cluster, where every classic PUBLISH is broadcast to all
 * nodes, from carrying each grant and renewal of every lock. So, for each
 * name somebody watches, this thread
 *  1. subscribes to its channel on one Redis connection (any primary under
 *     --redis-cluster: a classic PUBLISH reaches every node, as the release
 *     channel's does; docs/cluster.md),
 *  2. once Redis confirms the subscription, sets P{NAME}:watch for
 *     WATCH_FOR_MS and sets it again every WATCH_EVERY_MS (watch.lua), so
 *     no event published after the key is set can be missed,
 *  3. then reads the lock (inspect) and sends it as the stream's `state`.
 * Nothing runs when a lease expires, so for an `expired` event the thread
 * keeps each watched lock's expiry as its events tell it and reads the lock
 * again at that moment: gone, or another fence, and the lease expired.
 * When the subscription is lost (Redis restarts, the primary moves) events
 * published meanwhile are lost: every stream gets a fresh `state` once the
 * thread has subscribed again.
 *
 * Order. A `state` is read by a call of its own, so messages published
 * before that read can still be waiting on the subscription when it is
 * sent: a `granted` of an earlier lease after a `state` naming the next
 * one would tell its holder's keeper that the lease is gone. Fences order
 * them instead: a lock's events carry fences that never go down, so once
 * a stream has a state with fence F, an event below F, or at F when the
 * lock was free or it is F's own grant again, is older than the state and
 * not sent (stale()). Before its state a stream gets no event at all.
 *
 * Streams. Each open stream has a bounded buffer (SUB_BUF): a client that
 * falls that far behind is cut off (it reconnects and gets a `state`),
 * never allowed to grow picketd's memory. A stream with nothing to send
 * has its connection suspended (http.c); pushing an event resumes it. A
 * suspended connection is not watched by libmicrohttpd, so this thread
 * polls the sockets of suspended streams for a hang-up and ends them. A
 * quiet stream gets a heartbeat every --events-heartbeat-ms. Streams are
 * bounded in total (--max-watchers) and per token or client address
 * (--max-watchers-per-client).
 *
 * One mutex guards names and streams. Only this thread frees a watched
 * name (once nobody watches it and it has unsubscribed), so it may use a
 * name's entry outside the mutex while it talks to Redis. */
#include "events.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "api.h"
#include "api_json.h"
#include "log.h"
#include "metrics.h"
#include "node.h"
#include "store.h"

#define SUB_BUF 8192           /* bytes a stream may have waiting to be sent */
#define WATCH_FOR_MS 10000     /* P{NAME}:watch lives this long... */
#define WATCH_EVERY_MS 3000    /* ...and is set again this often */
#define PING_MS 1000           /* a quiet subscription is checked this often */
#define RETRY_MS 250           /* a failed connect or store call is tried again after */
#define CHANNEL_MAX (PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 16)
#define POLL_MAX 4096          /* sockets polled at once (the rest next pass) */

typedef struct watched watched;

struct events_sub {
  watched *w;
  events_sub *next;       /* in w->subs */
  char client[PICKET_PROTO_NAME_MAX + 72];
  void *conn;             /* http.c's request, once attached */
  int fd;                 /* its socket (-1: none) */
  int parked;             /* its connection is (about to be) suspended for want of data */
  int ended;              /* over once its buffer is sent */
  int want_state;         /* owed a `state` event */
  int64_t state_fence;    /* the fence of the last state it was sent (-1: none) */
  int state_held;         /* ...and whether the lock was held then */
  int64_t last_write_ms;  /* when an event was last put in (for heartbeats) */
  size_t len;
  char buf[SUB_BUF];
};

enum { CH_NONE, CH_SENT, CH_ACTIVE };

struct watched {
  char name[PICKET_PROTO_NAME_MAX + 1];
  char channel[CHANNEL_MAX];
  events_sub *subs;
  int state;              /* its channel on the current subscription */
  int watching;           /* P{NAME}:watch was set since the channel became active */
  int64_t watch_due_ms;   /* when to set P{NAME}:watch again */
  int64_t fence;          /* the live lease's fence, as the events tell (0: none) */
  int64_t expires_ms;     /* ...and when it ends unless renewed (monotonic; 0: none known) */
  int64_t state_fence;    /* the lock as last read (-1: not yet), for stale() */
  int state_held;
  watched *next;
};

static const config *cfg;
static void (*resume_conn)(void *conn);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static watched *names;
static int nsubs;
static int started, shutting_down, stopping;
static int evfd = -1;
static pthread_t thread;

static int64_t now_ms(void) { return api_now_ms(); }

/* Wall-clock ms, for the `time` of the events picketd makes itself. */
static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void notify(void) {
  uint64_t one = 1;
  if (evfd >= 0 && write(evfd, &one, sizeof one) < 0) { /* already signalled */ }
}

/* Resumes a stream's suspended connection (mu held). */
static void wake(events_sub *s) {
  if (s->parked && s->conn) {
    s->parked = 0;
    resume_conn(s->conn);
  }
}

static void end_sub(events_sub *s) {
  s->ended = 1;
  wake(s);
}

/* Puts n bytes of one event into a stream (mu held); a stream with no
 * room left is ended instead. */
static void put(events_sub *s, const char *text, size_t n) {
  if (s->ended) return;
  if (s->len + n > SUB_BUF) {
    metrics_inc(M_EVENTS_DROPPED);
    end_sub(s);
    return;
  }
  memcpy(s->buf + s->len, text, n);
  s->len += n;
  s->last_write_ms = now_ms();
  metrics_inc(M_EVENTS_SENT);
  wake(s);
}

/* "event: TYPE\ndata: JSON\n\n" into buf (its length, or 0 when it does
 * not fit); takes data. */
static size_t format(char *buf, size_t cap, const char *type, json_t *data) {
  char *j = json_dumps(data, JSON_COMPACT);
  json_decref(data);
  if (j == NULL) return 0;
  int n = snprintf(buf, cap, "event: %s\ndata: %s\n\n", type, j);
  free(j);
  return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* Whether an event of kind ('g' granted, 'n' renewed, 'r' released,
 * 'b' broken, 'x' expired) with fence f is older than a state that showed
 * fence `at` (held or free): see "Order" above. A break is placed by the
 * fence it moved the counter to (its fence is the broken lease's, or 0
 * when the lock was free), which a later state shows as free. A lock's fences only go
 * down when its counter is lost under --fence-floor none; then later
 * events look stale until the next state (docs/events.md). */
static int stale(int64_t at, int held, char kind, int64_t f) {
  if (f != at) return f < at;
  return !held || kind == 'g';
}

/* Sends an event (kind, fence) to every stream of w that has had its
 * state and not a newer one (mu held). Takes data. */
static void broadcast(watched *w, const char *type, json_t *data, char kind, int64_t fence) {
  char text[2048];
  size_t n = format(text, sizeof text, type, data);
  if (n == 0) return;
  for (events_sub *s = w->subs; s; s = s->next)
    if (!s->want_state && !stale(s->state_fence, s->state_held, kind, fence)) put(s, text, n);
}

/* Sends the state (held, fence) to the streams owed one (mu held). Takes
 * data. */
static void broadcast_state(const watched *w, json_t *data, int held, int64_t fence) {
  char text[2048];
  size_t n = format(text, sizeof text, "state", data);
  if (n == 0) return;
  for (events_sub *s = w->subs; s; s = s->next) {
    if (!s->want_state) continue;
    s->want_state = 0;
    s->state_fence = fence, s->state_held = held;
    put(s, text, n);
  }
}

/* ---- streams (HTTP threads) ------------------------------------------- */

static watched *find(const char *name) {
  for (watched *w = names; w; w = w->next)
    if (strcmp(w->name, name) == 0) return w;
  return NULL;
}

events_sub *events_open(const char *name, const char *client, picket_proto_err *err) {
  pthread_mutex_lock(&mu);
  int mine = 0;
  for (watched *w = names; w; w = w->next)
    for (events_sub *s = w->subs; s; s = s->next) mine += strcmp(s->client, client) == 0;
  events_sub *s = NULL;
  watched *w = NULL;
  if (shutting_down) *err = PICKET_PROTO_ERR_SHUTTING_DOWN;
  else if (nsubs >= cfg->max_watchers) *err = PICKET_PROTO_ERR_TOO_MANY_WATCHERS;
  else if (mine >= cfg->max_watchers_per_client) *err = PICKET_PROTO_ERR_QUOTA_WATCHERS;
  else if ((s = calloc(1, sizeof *s)) == NULL) *err = PICKET_PROTO_ERR_INTERNAL;
  else if ((w = find(name)) == NULL && (w = calloc(1, sizeof *w)) != NULL) {
    snprintf(w->name, sizeof w->name, "%s", name);
    w->state_fence = -1;
    picket_proto_channel_events(w->channel, sizeof w->channel, cfg->key_prefix, name);
    w->next = names;
    names = w;
  }
  if (s && w == NULL) {
    free(s);
    s = NULL;
    *err = PICKET_PROTO_ERR_INTERNAL;
  }
  if (s) {
    s->w = w;
    s->fd = -1;
    s->want_state = 1;
    s->state_fence = -1;
    s->last_write_ms = now_ms();
    snprintf(s->client, sizeof s->client, "%s", client);
    s->next = w->subs;
    w->subs = s;
    nsubs++;
    metrics_gauge_add(G_EVENT_STREAMS, 1);
  }
  pthread_mutex_unlock(&mu);
  if (s) notify();
  return s;
}

void events_attach(events_sub *s, void *conn, int fd) {
  pthread_mutex_lock(&mu);
  s->conn = conn;
  s->fd = fd;
  pthread_mutex_unlock(&mu);
}

ssize_t events_read(events_sub *s, char *buf, size_t max) {
  pthread_mutex_lock(&mu);
  ssize_t n = 0;
  if (s->len > 0) {
    n = (ssize_t)(s->len < max ? s->len : max);
    memcpy(buf, s->buf, (size_t)n);
    memmove(s->buf, s->buf + n, s->len - (size_t)n);
    s->len -= (size_t)n;
  } else if (s->ended) {
    n = -1;
  } else {
    s->parked = 1; /* the caller suspends; put() or a hang-up resumes */
    notify();      /* so the thread polls its socket for a hang-up */
  }
  pthread_mutex_unlock(&mu);
  return n;
}

void events_close(events_sub *s) {
  if (s == NULL) return;
  pthread_mutex_lock(&mu);
  watched *w = s->w;
  for (events_sub **p = &w->subs; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  nsubs--;
  metrics_gauge_add(G_EVENT_STREAMS, -1);
  if (!started && w->subs == NULL) { /* no thread to unsubscribe and free it */
    for (watched **p = &names; *p; p = &(*p)->next)
      if (*p == w) {
        *p = w->next;
        break;
      }
    free(w);
  }
  pthread_mutex_unlock(&mu);
  free(s);
  notify();
}

/* ---- what the thread does with Redis ---------------------------------- */

/* A message on a lock's channel: "KIND FENCE N TIME TEXT" (events.lua). */
static void on_message(watched *w, const char *msg, size_t len) {
  char kind = 0;
  long long fence = 0, n = 0, time = 0;
  int text_at = 0;
  char copy[1024];
  if (len >= sizeof copy) return;
  memcpy(copy, msg, len);
  copy[len] = '\0';
  if (sscanf(copy, "%c %lld %lld %lld %n", &kind, &fence, &n, &time, &text_at) < 4) return;
  const char *text = text_at > 0 ? copy + text_at : "";
  json_t *d = json_pack("{s:s,s:I,s:I}", "name", w->name, "fence", (json_int_t)fence, "time",
                        (json_int_t)time);
  if (d == NULL) return;
  const char *type = NULL;
  /* an event older than the last state must not move what the state
   * told: the live fence and its expiry */
  int64_t order = kind == 'b' ? n : fence;
  int old = stale(w->state_fence, w->state_held, kind, order);
  switch (kind) {
    case 'g':
      type = "granted";
      json_object_set_new(d, "owner", api_json_owner(text));
      json_object_set_new(d, "ttl_ms", json_integer(n));
      if (!old) w->fence = fence, w->expires_ms = now_ms() + n;
      break;
    case 'n':
      type = "renewed";
      json_object_set_new(d, "ttl_ms", json_integer(n));
      if (!old) w->fence = fence, w->expires_ms = now_ms() + n;
      break;
    case 'r':
      type = "released";
      if (!old) w->fence = 0, w->expires_ms = 0;
      break;
    case 'b':
      type = "broken";
      json_object_set_new(d, "next_fence", json_integer(n));
      json_object_set_new(d, "by", json_string(text));
      if (!old) w->fence = 0, w->expires_ms = 0;
      break;
    default: json_decref(d); return;
  }
  broadcast(w, type, d, kind, order);
}

/* Reads lock w (the thread, mu not held): 0 with r filled, or -1. */
static int inspect(watched *w, store_result *r) {
  store_op op = {.kind = STORE_OP_INSPECT, .name = w->name};
  store_run(&op);
  *r = op.r;
  if (op.st != STORE_OK) {
    LOG(LOG_DEBUG, "events: reading %s failed: %s", w->name, op.r.err);
    return -1;
  }
  return 0;
}

/* The Redis work one pass owes: watch keys, states, expiry checks. Runs
 * without mu (store calls block), taking it to look and to deliver. */
static void store_work(int64_t *next) {
  int64_t now = now_ms();
  pthread_mutex_lock(&mu);
  for (watched *w = names; w; w = w->next) {
    if (w->state != CH_ACTIVE || w->subs == NULL) continue;
    int want = 0;
    for (events_sub *s = w->subs; s; s = s->next) want |= s->want_state;
    int set_watch = now >= w->watch_due_ms;
    int expiry = w->expires_ms && now >= w->expires_ms;
    if (!set_watch && !(want && w->watching) && !expiry) {
      int64_t t = w->watch_due_ms;
      if (w->expires_ms && w->expires_ms < t) t = w->expires_ms;
      if (t < *next) *next = t;
      continue;
    }
    pthread_mutex_unlock(&mu);
    store_result r;
    if (set_watch) {
      int ok = store_watch(w->name, WATCH_FOR_MS, &r) == STORE_OK;
      if (!ok) LOG(LOG_DEBUG, "events: cannot watch %s: %s", w->name, r.err);
      pthread_mutex_lock(&mu);
      w->watch_due_ms = now + (ok ? WATCH_EVERY_MS : RETRY_MS);
      if (ok) w->watching = 1;
      pthread_mutex_unlock(&mu);
    }
    int ok = (w->watching && (want || expiry)) ? inspect(w, &r) == 0 : -1;
    pthread_mutex_lock(&mu);
    if (ok == 1) {
      if (expiry && (!r.held || r.fence != w->fence)) {
        broadcast(w, "expired", json_pack("{s:s,s:I,s:I}", "name", w->name, "fence",
                                          (json_int_t)w->fence, "time", (json_int_t)wall_ms()),
                  'x', w->fence);
        w->fence = 0, w->expires_ms = 0;
      }
      want = 0;
      for (events_sub *s = w->subs; s; s = s->next) want |= s->want_state;
      if (want)
        broadcast_state(w,
                        json_pack("{s:s,s:b,s:I,s:o,s:I,s:I}", "name", w->name, "held", r.held,
                                  "fence", (json_int_t)r.fence, "owner", api_json_owner(r.owner),
                                  "ttl_ms", (json_int_t)(r.held ? r.ttl_ms : 0), "time",
                                  (json_int_t)wall_ms()),
                        r.held, r.fence);
      w->state_fence = r.fence, w->state_held = r.held;
      if (r.held) w->fence = r.fence, w->expires_ms = now_ms() + r.ttl_ms + 1;
      else w->fence = 0, w->expires_ms = 0;
    } else if (ok == 0 || expiry) {
      if (w->expires_ms) w->expires_ms = now_ms() + RETRY_MS; /* try again soon */
    }
    if (w->watch_due_ms < *next) *next = w->watch_due_ms;
    if (w->expires_ms && w->expires_ms < *next) *next = w->expires_ms;
  }
  pthread_mutex_unlock(&mu);
}

/* Sends SUBSCRIBE for the names not yet on this connection and
 * UNSUBSCRIBE for those nobody watches any more (freeing them). -1 when
 * the connection failed. */
static int sync_channels(redisContext *c) {
  int sent = 0;
  pthread_mutex_lock(&mu);
  for (watched **p = &names; *p;) {
    watched *w = *p;
    if (w->subs == NULL) {
      if (c && w->state != CH_NONE) {
        redisAppendCommand(c, "UNSUBSCRIBE %s", w->channel);
        sent = 1;
      }
      *p = w->next;
      free(w);
      continue;
    }
    if (c && w->state == CH_NONE) {
      redisAppendCommand(c, "SUBSCRIBE %s", w->channel);
      w->state = CH_SENT;
      sent = 1;
    }
    p = &w->next;
  }
  pthread_mutex_unlock(&mu);
  int done = !sent;
  while (!done)
    if (redisBufferWrite(c, &done) != REDIS_OK) return -1;
  return 0;
}

static watched *by_channel(const redisReply *e) {
  if (e->type != REDIS_REPLY_STRING) return NULL;
  for (watched *w = names; w; w = w->next)
    if (strcmp(w->channel, e->str) == 0) return w;
  return NULL;
}

/* One reply on the subscription (mu held). */
static void on_reply(redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
      r->element[0]->type != REDIS_REPLY_STRING)
    return;
  const char *what = r->element[0]->str;
  watched *w = by_channel(r->element[1]);
  if (w == NULL) return;
  if (strcmp(what, "subscribe") == 0) {
    w->state = CH_ACTIVE;
    w->watching = 0;
    w->watch_due_ms = 0; /* set P{NAME}:watch now, then read the lock */
  } else if (strcmp(what, "message") == 0 && r->elements == 3 &&
             r->element[2]->type == REDIS_REPLY_STRING) {
    on_message(w, r->element[2]->str, r->element[2]->len);
  }
}

/* Every name must subscribe again and every stream gets a fresh state. */
static void reset_channels(void) {
  pthread_mutex_lock(&mu);
  for (watched *w = names; w; w = w->next) {
    w->state = CH_NONE;
    w->watching = 0;
    for (events_sub *s = w->subs; s; s = s->next) s->want_state = 1;
  }
  pthread_mutex_unlock(&mu);
}

/* Heartbeats for quiet streams; the next one due goes into *next. */
static void heartbeats(int64_t *next) {
  int64_t now = now_ms();
  pthread_mutex_lock(&mu);
  for (watched *w = names; w; w = w->next)
    for (events_sub *s = w->subs; s; s = s->next) {
      if (now - s->last_write_ms >= cfg->events_heartbeat_ms) {
        char text[96];
        size_t n = format(text, sizeof text, "heartbeat",
                          json_pack("{s:I}", "time", (json_int_t)wall_ms()));
        if (n) put(s, text, n);
        s->last_write_ms = now;
      }
      if (s->last_write_ms + cfg->events_heartbeat_ms < *next)
        *next = s->last_write_ms + cfg->events_heartbeat_ms;
    }
  pthread_mutex_unlock(&mu);
}

static redisContext *connect_node(int *node, unsigned long *gen) {
  char err[256] = "no Redis primary known";
  *node = node_any(*node < 0 ? -1 : *node);
  redisContext *c = *node >= 0 ? node_connect(*node, cfg->redis_timeout_ms, gen, err, sizeof err)
                               : NULL;
  if (c == NULL) {
    LOG(LOG_DEBUG, "events: %s", err);
    return NULL;
  }
  struct timeval forever = {0, 0}; /* a subscriber waits for messages */
  redisSetTimeout(c, forever);
  return c;
}

static void *events_main(void *arg) {
  redisContext *c = NULL;
  int node = -1;
  unsigned long gen = 0;
  int64_t retry_at = 0, ping_sent = 0, next_ping = 0;
  struct pollfd *pf = calloc(POLL_MAX, sizeof *pf);
  events_sub **pfs = calloc(POLL_MAX, sizeof *pfs);
  if (pf == NULL || pfs == NULL) {
    LOG(LOG_ERROR, "events: out of memory; no event streams");
    free(pf), free(pfs);
    return arg;
  }
  for (;;) {
    pthread_mutex_lock(&mu);
    int stop = stopping, any = names != NULL;
    pthread_mutex_unlock(&mu);
    if (stop) break;
    int64_t now = now_ms();
    if (c && (!any || gen != node_generation(node))) { /* nobody watches, or the primary moved */
      redisFree(c);
      c = NULL;
      reset_channels();
    }
    if (any && c == NULL && now >= retry_at) {
      if ((c = connect_node(&node, &gen)) == NULL) retry_at = now + RETRY_MS;
      ping_sent = 0, next_ping = now + PING_MS;
    }
    if (sync_channels(c) < 0 || (c && ping_sent && now - ping_sent >= cfg->redis_timeout_ms)) {
      LOG(LOG_INFO, "events: subscription lost; subscribing again (streams get a new state)");
      redisFree(c);
      c = NULL;
      reset_channels();
      retry_at = now + RETRY_MS;
      continue;
    }
    int64_t next = now + 1000;
    if (c) {
      store_work(&next);
      if (!ping_sent && now_ms() >= next_ping) {
        int done = 0;
        redisAppendCommand(c, "PING");
        while (!done && redisBufferWrite(c, &done) == REDIS_OK) {
        }
        ping_sent = now_ms();
      }
      int64_t t = ping_sent ? ping_sent + cfg->redis_timeout_ms : next_ping;
      if (t < next) next = t;
    } else if (any && retry_at < next) {
      next = retry_at;
    }
    heartbeats(&next);

    int n = 0;
    pf[n++] = (struct pollfd){.fd = evfd, .events = POLLIN};
    if (c) pf[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
    int first_sub = n;
    pthread_mutex_lock(&mu);
    for (watched *w = names; w && n < POLL_MAX; w = w->next)
      for (events_sub *s = w->subs; s && n < POLL_MAX; s = s->next)
        if (s->parked && s->fd >= 0) {
          pfs[n] = s;
          pf[n++] = (struct pollfd){.fd = s->fd, .events = POLLRDHUP};
        }
    pthread_mutex_unlock(&mu);
    int64_t wait = next - now_ms();
    if (poll(pf, (nfds_t)n, wait < 0 ? 0 : wait > 1000 ? 1000 : (int)wait) < 0 && errno != EINTR)
      continue;
    if (pf[0].revents) {
      uint64_t v;
      if (read(evfd, &v, sizeof v) < 0) { /* nothing pending */
      }
    }
    pthread_mutex_lock(&mu);
    for (int i = first_sub; i < n; i++) {
      if (!(pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
      /* still there? a stream that ended meanwhile was freed */
      for (watched *w = names; w; w = w->next)
        for (events_sub *s = w->subs; s; s = s->next)
          if (s == pfs[i] && s->parked) end_sub(s);
    }
    pthread_mutex_unlock(&mu);
    if (c && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      int ok = redisBufferRead(c) == REDIS_OK;
      redisReply *r = NULL;
      while (ok && (ok = redisGetReplyFromReader(c, (void **)&r) == REDIS_OK) && r) {
        ping_sent = 0, next_ping = now_ms() + PING_MS; /* any traffic shows it alive */
        pthread_mutex_lock(&mu);
        on_reply(r);
        pthread_mutex_unlock(&mu);
        freeReplyObject(r);
        r = NULL;
      }
      if (!ok) {
        LOG(LOG_INFO, "events: subscription closed; subscribing again");
        redisFree(c);
        c = NULL;
        reset_channels();
      }
    }
  }
  if (c) redisFree(c);
  free(pf), free(pfs);
  store_thread_done();
  return arg;
}

/* ---- lifecycle -------------------------------------------------------- */

int events_start(const config *c, void (*resume)(void *conn)) {
  cfg = c;
  resume_conn = resume;
  evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (evfd < 0) return -1;
  if (pthread_create(&thread, NULL, events_main, NULL) != 0) return -1;
  started = 1;
  return 0;
}

void events_init(const config *c) { cfg = c; }

void events_shutdown(void) {
  pthread_mutex_lock(&mu);
  shutting_down = 1;
  for (watched *w = names; w; w = w->next)
    for (events_sub *s = w->subs; s; s = s->next) end_sub(s);
  pthread_mutex_unlock(&mu);
}

void events_stop(void) {
  if (!started) return;
  pthread_mutex_lock(&mu);
  stopping = 1;
  pthread_mutex_unlock(&mu);
  notify();
  pthread_join(thread, NULL);
  started = 0;
  close(evfd);
  evfd = -1;
}
