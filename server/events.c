/* events.c: lock event streams, GET /v1/locks/{name}/events
 * (docs/events.md says what a client sees).
 *
 * Where events come from. The store follows the events of each name
 * somebody watches (store_events_* in store.h): this thread adds a name
 * when its first stream opens and removes it when its last one closes.
 * Once the store reports a name ready, the thread reads the lock (inspect)
 * and sends it as the stream's `state`; from then on it passes on each
 * event the store reports. Nothing happens in the store when a lease
 * expires, so for an `expired` event the thread keeps each watched lock's
 * expiry as its events tell it and reads the lock again at that moment:
 * gone, or another fence, and the lease expired. When the store reports
 * events lost (its connection failed) every stream gets a fresh `state`
 * once the store reports its name ready again.
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
 * Who broke a lock. A `broken` event's `by` names the operator ("token
 * 'NAME'"): only streams opened by a reader that may see operators get
 * it; the others get the same event with AUTH_OPERATOR_HIDDEN (auth.h).
 *
 * Elections. An election is watched as its lock "/e/NAME" (api_family.c),
 * and its streams get `leader` events instead of the lock's
 * (docs/elections.md): a leader's value is in no lock event, so a grant or
 * a renewal (a proclaim is one) makes this thread read the election once,
 * for all its streams, and send the leader when it or its value changed;
 * a release, break or expiry sends `leader: null` at once. The first
 * `leader` event of a stream is its state.
 *
 * One mutex guards names and streams. Only this thread frees a watched
 * name (once nobody watches it and the store stopped following it), so it
 * may use a name's entry outside the mutex while it calls the store. */
#include "events.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "api_family.h"
#include "api_types.h"
#include "api_json.h"
#include "auth.h"
#include "clock.h"
#include "call.h"
#include "log.h"
#include "metrics.h"
#include "store.h"

#define SUB_BUF 16384          /* bytes a stream may have waiting to be sent: one
                                  leader event with the longest value fits */
#define RETRY_MS 250           /* a failed store call is tried again after */
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
  int sees_operators;     /* a `broken` event's `by` as it is (else hidden) */
  int64_t last_write_ms;  /* when an event was last put in (for heartbeats) */
  size_t len;
  char buf[SUB_BUF];
};

struct watched {
  char name[PICKET_PROTO_NAME_MAX + 1];
  events_sub *subs;
  int followed;           /* added to the store's follower */
  int watching;           /* the store reported it ready (and no loss since) */
  int64_t fence;          /* the live lease's fence, as the events tell (0: none) */
  int64_t expires_ms;     /* ...and when it ends unless renewed (monotonic; 0: none known) */
  int64_t state_fence;    /* the lock as last read (-1: not yet), for stale() */
  int state_held;
  int election;           /* an election's lock: `leader` events */
  int reread;             /* an election owes its streams a read (a grant or renewal) */
  char *last_leader;      /* an election's leader as last sent (term, owner, value), or NULL */
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
 * state and not a newer one (mu held): data to the streams that see
 * operators, hidden to the others (NULL: data to every stream). Takes
 * both. */
static void broadcast_to(watched *w, const char *type, json_t *data, json_t *hidden, char kind,
                         int64_t fence) {
  char text[2048], text_hidden[2048];
  size_t n = format(text, sizeof text, type, data);
  size_t nh = hidden ? format(text_hidden, sizeof text_hidden, type, hidden) : 0;
  for (events_sub *s = w->subs; s; s = s->next) {
    if (s->want_state || stale(s->state_fence, s->state_held, kind, fence)) continue;
    if (hidden == NULL || s->sees_operators) {
      if (n) put(s, text, n);
    } else if (nh) {
      put(s, text_hidden, nh);
    }
  }
}

static void broadcast(watched *w, const char *type, json_t *data, char kind, int64_t fence) {
  broadcast_to(w, type, data, NULL, kind, fence);
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

/* ---- elections ---------------------------------------------------------- */

/* The leader as a stream sees it change: term, owner and value (not the
 * TTL left, which every read tells anew). malloc'd, or NULL. */
static char *leader_signature(const store_result *r) {
  if (!r->held) return strdup("null");
  json_t *j = json_pack("[I, s, s]", (json_int_t)r->fence, r->owner, r->value ? r->value : "");
  char *sig = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return sig;
}

/* Sends election w's leader as r shows it (mu held). From a read
 * (from_read): the state of the streams owed one, and to the others when
 * the leader changed. From an event (kind, order: see stale()), only ever
 * no leader: to the streams whose state it is not older than. */
static void leader_send(watched *w, const store_result *r, int from_read, char kind,
                        int64_t order) {
  char *sig = leader_signature(r);
  int changed = sig == NULL || w->last_leader == NULL || strcmp(sig, w->last_leader) != 0;
  free(w->last_leader);
  w->last_leader = sig;
  json_t *d = json_pack("{s:s, s:o, s:I, s:I}", "election",
                        w->name + strlen(PICKET_PROTO_ELECTION_STORE_PREFIX), "leader",
                        api_family_leader(r), "term", (json_int_t)r->fence, "time",
                        (json_int_t)clock_wall_ms());
  char *text = malloc(SUB_BUF);
  size_t n = text && d ? format(text, SUB_BUF, "leader", d) : 0;
  if (text == NULL) json_decref(d);
  for (events_sub *s = w->subs; n && s; s = s->next) {
    if (s->want_state) {
      if (!from_read) continue;
      s->want_state = 0;
      s->state_fence = r->fence, s->state_held = r->held;
      put(s, text, n);
    } else if (changed && (from_read || !stale(s->state_fence, s->state_held, kind, order))) {
      put(s, text, n);
    }
  }
  free(text);
}

/* An election's event (mu held, `old`: older than the last read). */
static void election_event(watched *w, const store_event *ev, int old, int64_t order) {
  if (old) return;
  if (ev->kind == 'g' || ev->kind == 'n') {
    w->fence = ev->fence, w->expires_ms = now_ms() + ev->n;
    w->reread = 1;
    notify();
  } else if (ev->kind == 'r' || ev->kind == 'b') {
    w->fence = 0, w->expires_ms = 0;
    store_result none = {.fence = order};
    leader_send(w, &none, 0, ev->kind, order);
  }
}

static watched *find(const char *name) {
  for (watched *w = names; w; w = w->next)
    if (strcmp(w->name, name) == 0) return w;
  return NULL;
}

events_sub *events_open(const char *name, const char *client, int sees_operators,
                        picket_proto_err *err) {
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
    w->election = strncmp(name, PICKET_PROTO_ELECTION_STORE_PREFIX,
                          strlen(PICKET_PROTO_ELECTION_STORE_PREFIX)) == 0;
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
    s->sees_operators = sees_operators;
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
    free(w->last_leader);
    free(w);
  }
  pthread_mutex_unlock(&mu);
  free(s);
  notify();
}

/* ---- what the thread does with the store ------------------------------- */

/* The store's hooks (store_events_hooks), on this thread, mu not held. */

static void on_ready(void *ctx, const char *name) {
  (void)ctx;
  pthread_mutex_lock(&mu);
  watched *w = find(name);
  if (w) w->watching = 1; /* store_work reads its state now */
  pthread_mutex_unlock(&mu);
}

static void on_lost(void *ctx) {
  (void)ctx;
  pthread_mutex_lock(&mu);
  for (watched *w = names; w; w = w->next) {
    w->watching = 0;
    for (events_sub *s = w->subs; s; s = s->next) s->want_state = 1;
  }
  pthread_mutex_unlock(&mu);
}

static void on_event(void *ctx, const char *name, const store_event *ev) {
  (void)ctx;
  pthread_mutex_lock(&mu);
  watched *w = find(name);
  json_t *d = w ? json_pack("{s:s,s:I,s:I}", "name", w->name, "fence", (json_int_t)ev->fence,
                            "time", (json_int_t)ev->time)
                : NULL;
  if (d == NULL) {
    pthread_mutex_unlock(&mu);
    return;
  }
  const char *type = NULL;
  json_t *hidden = NULL; /* a `broken` event as a stream that may not see operators gets it */
  /* an event older than the last state must not move what the state
   * told: the live fence and its expiry */
  int64_t order = ev->kind == 'b' ? ev->n : ev->fence;
  int old = stale(w->state_fence, w->state_held, ev->kind, order);
  if (w->election) {
    election_event(w, ev, old, order);
    json_decref(d);
    pthread_mutex_unlock(&mu);
    return;
  }
  switch (ev->kind) {
    case 'g':
      type = "granted";
      json_object_set_new(d, "owner", api_json_owner(ev->text));
      json_object_set_new(d, "ttl_ms", json_integer(ev->n));
      if (!old) w->fence = ev->fence, w->expires_ms = now_ms() + ev->n;
      break;
    case 'n':
      type = "renewed";
      json_object_set_new(d, "ttl_ms", json_integer(ev->n));
      if (!old) w->fence = ev->fence, w->expires_ms = now_ms() + ev->n;
      break;
    case 'r':
      type = "released";
      if (!old) w->fence = 0, w->expires_ms = 0;
      break;
    case 'b':
      type = "broken";
      json_object_set_new(d, "next_fence", json_integer(ev->n));
      if (!old) w->fence = 0, w->expires_ms = 0;
      if ((hidden = json_deep_copy(d)) == NULL) { /* never the name in its place */
        json_decref(d);
        pthread_mutex_unlock(&mu);
        return;
      }
      json_object_set_new(d, "by", json_string(ev->text));
      json_object_set_new(hidden, "by", json_string(AUTH_OPERATOR_HIDDEN));
      break;
    default:
      json_decref(d);
      pthread_mutex_unlock(&mu);
      return;
  }
  broadcast_to(w, type, d, hidden, ev->kind, order);
  pthread_mutex_unlock(&mu);
}

static const store_events_hooks hooks = {on_ready, on_event, on_lost};

/* Reads lock w (the thread, mu not held): 0 with r filled, or -1. */
static int inspect(watched *w, store_result *r) {
  store_op op = {.kind = STORE_OP_INSPECT, .name = w->name};
  call_run(&op); /* on the events thread: it may wait */
  *r = op.r;
  if (op.st != STORE_OK) {
    LOG(LOG_DEBUG, "events: reading %s failed: %s", w->name, op.r.err);
    store_result_clear(r);
    return -1;
  }
  return 0;
}

/* The reads one pass owes: states, expiry checks. Runs without mu (store
 * calls block), taking it to look and to deliver. */
static void store_work(int64_t *next) {
  int64_t now = now_ms();
  pthread_mutex_lock(&mu);
  for (watched *w = names; w; w = w->next) {
    if (!w->watching || w->subs == NULL) continue;
    int want = 0;
    for (events_sub *s = w->subs; s; s = s->next) want |= s->want_state;
    int expiry = w->expires_ms && now >= w->expires_ms;
    if (!want && !expiry && !w->reread) {
      if (w->expires_ms && w->expires_ms < *next) *next = w->expires_ms;
      continue;
    }
    int reread = w->reread; /* (an event during the read owes another) */
    w->reread = 0;
    pthread_mutex_unlock(&mu);
    store_result r;
    int ok = inspect(w, &r) == 0;
    pthread_mutex_lock(&mu);
    if (!ok) w->reread |= reread;
    if (ok && w->election) leader_send(w, &r, 1, 0, 0);
    if (ok && !w->election) {
      if (expiry && (!r.held || r.fence != w->fence)) {
        broadcast(w, "expired",
                  json_pack("{s:s,s:I,s:I}", "name", w->name, "fence", (json_int_t)w->fence,
                            "time", (json_int_t)clock_wall_ms()),
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
                                  (json_int_t)clock_wall_ms()),
                        r.held, r.fence);
    }
    if (ok) {
      store_result_clear(&r);
      w->state_fence = r.fence, w->state_held = r.held;
      if (r.held) w->fence = r.fence, w->expires_ms = now_ms() + r.ttl_ms + 1;
      else w->fence = 0, w->expires_ms = 0;
    } else {
      /* try again soon: the expiry check, or the state still owed */
      if (w->expires_ms) w->expires_ms = now_ms() + RETRY_MS;
      if (now_ms() + RETRY_MS < *next) *next = now_ms() + RETRY_MS;
    }
    if (w->expires_ms && w->expires_ms < *next) *next = w->expires_ms;
  }
  pthread_mutex_unlock(&mu);
}

/* Makes the store follow the names somebody watches, and frees those
 * nobody watches any more. */
static void sync_names(store_events *se) {
  pthread_mutex_lock(&mu);
  for (watched **p = &names; *p;) {
    watched *w = *p;
    if (w->subs == NULL) {
      if (w->followed) store_events_remove(se, w->name);
      *p = w->next;
      free(w->last_leader);
      free(w);
      continue;
    }
    if (!w->followed && store_events_add(se, w->name) == 0) w->followed = 1;
    p = &w->next;
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
                          json_pack("{s:I}", "time", (json_int_t)clock_wall_ms()));
        if (n) put(s, text, n);
        s->last_write_ms = now;
      }
      if (s->last_write_ms + cfg->events_heartbeat_ms < *next)
        *next = s->last_write_ms + cfg->events_heartbeat_ms;
    }
  pthread_mutex_unlock(&mu);
}

static void *events_main(void *arg) {
  store_events *se = store_events_new(&hooks, NULL);
  struct pollfd *pf = calloc(POLL_MAX, sizeof *pf);
  events_sub **pfs = calloc(POLL_MAX, sizeof *pfs);
  if (se == NULL || pf == NULL || pfs == NULL) {
    LOG(LOG_ERROR, "events: out of memory; no event streams");
    store_events_free(se);
    free(pf), free(pfs);
    return arg;
  }
  int readable = 0;
  for (;;) {
    pthread_mutex_lock(&mu);
    int stop = stopping;
    pthread_mutex_unlock(&mu);
    if (stop) break;
    sync_names(se);
    int64_t next = store_events_run(se, readable);
    store_work(&next);
    heartbeats(&next);

    int n = 0;
    pf[n++] = (struct pollfd){.fd = evfd, .events = POLLIN};
    int sfd = store_events_fd(se);
    if (sfd >= 0) pf[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
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
    readable = 0;
    if (poll(pf, (nfds_t)n, wait < 0 ? 0 : wait > 1000 ? 1000 : (int)wait) < 0 && errno != EINTR)
      continue;
    if (pf[0].revents) {
      uint64_t v;
      if (read(evfd, &v, sizeof v) < 0) { /* nothing pending */
      }
    }
    readable = sfd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR));
    pthread_mutex_lock(&mu);
    for (int i = first_sub; i < n; i++) {
      if (!(pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
      /* still there? a stream that ended meanwhile was freed */
      for (watched *w = names; w; w = w->next)
        for (events_sub *s = w->subs; s; s = s->next)
          if (s == pfs[i] && s->parked) end_sub(s);
    }
    pthread_mutex_unlock(&mu);
  }
  store_events_free(se);
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
