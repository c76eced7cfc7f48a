/* store_events.c: lock events on etcd (store_events_* in store.h), for the
 * events thread (server/events.c), which owns the streams.
 *
 * etcd tells every change of a key to a watch, so no lock call has to
 * publish anything: one watch over the key prefix P, on a thread of this
 * follower's own, turns the changes of the followed names into events:
 *  - a PUT of P l/NAME that creates it: granted (fence = its create
 *    revision; the TTL, owner and time from the grant's JSON);
 *  - a PUT of P l/NAME that rewrites it (every renewal does): renewed;
 *  - a PUT of P x/NAME (a release writes it with the delete): released,
 *    its fence read from P l/NAME just before (or in P x/NAME's JSON);
 *  - a PUT of P b/NAME (a break writes it with the delete): broken, the
 *    next fence being that txn's revision;
 *  - a DELETE with neither marker is an expiry: no event (as on Redis:
 *    server/events.c sees the expiry itself).
 * A watch event carries no value, so the watch thread reads the key at
 * the event's revision for the JSON (one read per event of a followed
 * name). Events go through a queue to the events thread, which an eventfd
 * wakes: the hooks run there, as store.h asks.
 *
 * A watch that breaks is opened again from the revision after the last
 * one seen, so nothing is missed; a name is ready once the watch is in
 * place. Only when etcd compacted past that revision are events lost: then
 * `lost`, and every name is ready again once the watch is back. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "store_events.h"

#define NAMES_MAX 4096 /* followed names (server/events.c bounds its own) */
#define QUEUE_MAX 4096 /* events waiting for the events thread; more are dropped, then `lost` */

typedef struct name_entry {
  char name[PICKET_PROTO_NAME_MAX + 1];
  int ready; /* told to the events thread */
  struct name_entry *next;
} name_entry;

typedef struct {
  char name[PICKET_PROTO_NAME_MAX + 1];
  store_event ev;
  char text[PICKET_PROTO_OWNER_BYTES_MAX + 128];
} queued;

struct store_events {
  store_events_hooks hooks;
  void *ctx;
  int efd;
  pthread_t thread;
  int started;
  pthread_mutex_t mu; /* guards everything below */
  name_entry *names;
  int nnames;
  int watching;     /* the watch is in place: new names are ready at once */
  int lost;         /* events were lost: tell `lost` */
  int stopping;
  etcd_watch *watch; /* so free can stop it */
  queued *q;
  int qn;
};

static void wake(store_events *e) {
  uint64_t one = 1;
  if (write(e->efd, &one, sizeof one) < 0) { /* the counter is full: it is awake */
  }
}

static int followed(store_events *e, const char *name) {
  for (name_entry *n = e->names; n; n = n->next)
    if (strcmp(n->name, name) == 0) return 1;
  return 0;
}

static void push(store_events *e, const char *name, const store_event *ev, const char *text) {
  pthread_mutex_lock(&e->mu);
  if (e->qn == QUEUE_MAX) {
    e->lost = 1; /* the events thread is behind: tell it rather than grow */
  } else {
    queued *x = &e->q[e->qn++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->ev = *ev;
    snprintf(x->text, sizeof x->text, "%s", text ? text : "");
  }
  pthread_mutex_unlock(&e->mu);
  wake(e);
}

/* The JSON value of key at revision rev, parsed (the caller decrefs), or NULL. */
static json_t *value_at(etcd_client *c, const char *key, int64_t rev) {
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = key, .revision = rev};
  etcd_op_result res = {0};
  json_t *j = NULL;
  if (etcd_range(c, &op, &res) == ETCD_OK && res.nkvs > 0)
    j = json_loadb(res.kvs[0].value, res.kvs[0].value_len, 0, NULL);
  etcd_op_result_clear(&res);
  return j;
}

/* The fence of the grant a release deleted at revision rev: P l/NAME's
 * create_revision just before (a release that does not read first cannot
 * write it into P x/NAME: locks.c); 0 when etcd compacted it meanwhile. */
static int64_t fence_before(etcd_client *c, const char *name, int64_t rev) {
  char l[STORE_ETCD_KEY_MAX];
  store_etcd_key(l, sizeof l, 'l', name);
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = l, .revision = rev - 1};
  etcd_op_result res = {0};
  int64_t fence = 0;
  if (etcd_range(c, &op, &res) == ETCD_OK && res.nkvs > 0) fence = res.kvs[0].create_revision;
  etcd_op_result_clear(&res);
  return fence;
}

/* One event of the watch: an event for the queue when it is one of a
 * followed name's. */
static void on_change(store_events *e, etcd_client *c, const etcd_event *ev, size_t plen) {
  if (ev->type != ETCD_EVENT_PUT || ev->key_len < plen + 3 || ev->key[plen + 1] != '/') return;
  char kind = ev->key[plen];
  if (kind != 'l' && kind != 'x' && kind != 'b') return;
  const char *name = ev->key + plen + 2;
  pthread_mutex_lock(&e->mu);
  int want = followed(e, name);
  pthread_mutex_unlock(&e->mu);
  if (!want) return;
  json_t *j = value_at(c, ev->key, ev->mod_revision);
  if (j == NULL) return; /* compacted meanwhile, or not ours */
  store_event out = {.time = clock_wall_ms()};
  const char *text = "";
  if (kind == 'l') {
    out.kind = ev->version == 1 ? 'g' : 'n';
    out.fence = ev->create_revision;
    out.n = json_integer_value(json_object_get(j, "ttl_ms"));
    if (out.kind == 'g') {
      out.time = json_integer_value(json_object_get(j, "at"));
      text = json_string_value(json_object_get(j, "owner"));
    }
  } else if (kind == 'x') {
    out.kind = 'r';
    out.fence = json_integer_value(json_object_get(j, "fence"));
    if (out.fence == 0) out.fence = fence_before(c, name, ev->mod_revision);
  } else {
    out.kind = 'b';
    out.fence = json_integer_value(json_object_get(j, "fence"));
    out.n = ev->mod_revision; /* the break's txn: the last fence now */
    out.time = json_integer_value(json_object_get(j, "at"));
    text = json_string_value(json_object_get(j, "by"));
  }
  push(e, name, &out, text);
  json_decref(j);
}

static void *watch_main(void *arg) {
  store_events *e = arg;
  char prefix[sizeof store_etcd_cfg->key_prefix];
  snprintf(prefix, sizeof prefix, "%s", store_etcd_cfg->key_prefix);
  size_t plen = strlen(prefix);
  char err[200];
  etcd_client *c = etcd_client_new(&store_etcd_opts, err, sizeof err);
  int64_t from = 0;
  etcd_client_opts o = store_etcd_opts; /* o.first_endpoint: where the next watch opens */
  while (c) {
    pthread_mutex_lock(&e->mu);
    int stop = e->stopping;
    pthread_mutex_unlock(&e->mu);
    if (stop) break;
    etcd_watch *w = NULL;
    if (etcd_watch_open(&o, prefix, 1, from, &w, err, sizeof err) != ETCD_OK) {
      LOG(LOG_DEBUG, "lock events: %s", err);
      struct timespec ts = {0, 250 * 1000000L};
      nanosleep(&ts, NULL);
      continue;
    }
    pthread_mutex_lock(&e->mu);
    e->watch = w;
    stop = e->stopping;
    e->watching = 1; /* in place: every name followed now misses nothing */
    for (name_entry *n = e->names; n; n = n->next) n->ready = 0;
    pthread_mutex_unlock(&e->mu);
    wake(e);
    etcd_event ev[64];
    int n = 0;
    while (!stop) {
      n = etcd_watch_next(w, ev, 64, 1000);
      if (n < 0) break;
      for (int i = 0; i < n; i++) on_change(e, c, &ev[i], plen);
      pthread_mutex_lock(&e->mu);
      stop = e->stopping;
      pthread_mutex_unlock(&e->mu);
    }
    pthread_mutex_lock(&e->mu);
    e->watch = NULL;
    e->watching = 0;
    if (n == ETCD_ECOMPACTED) e->lost = 1; /* events gone: the streams read the state again */
    pthread_mutex_unlock(&e->mu);
    /* reopened after the last event seen: nothing in between is missed */
    from = n == ETCD_ECOMPACTED ? etcd_watch_compact_revision(w) : etcd_watch_last_revision(w) + 1;
    /* a member that went away, or was paused (a silent stream whose
     * member no longer answers, etcd_client.c): the next one first */
    if (n == ETCD_EUNAVAIL) o.first_endpoint = etcd_watch_endpoint(w) + 1;
    etcd_watch_free(w);
    wake(e);
  }
  etcd_client_free(c);
  return NULL;
}

store_events *store_etcd_events_new(const store_events_hooks *hooks, void *ctx) {
  store_events *e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  e->hooks = *hooks;
  e->ctx = ctx;
  e->q = calloc(QUEUE_MAX, sizeof *e->q);
  e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  pthread_mutex_init(&e->mu, NULL);
  if (e->q == NULL || e->efd < 0) {
    store_etcd_events_free(e);
    return NULL;
  }
  return e;
}

void store_etcd_events_free(store_events *e) {
  if (e == NULL) return;
  if (e->started) {
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    if (e->watch) etcd_watch_stop(e->watch);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
  }
  while (e->names) {
    name_entry *n = e->names;
    e->names = n->next;
    free(n);
  }
  if (e->efd >= 0) close(e->efd);
  pthread_mutex_destroy(&e->mu);
  free(e->q);
  free(e);
}

int store_etcd_events_add(store_events *e, const char *name) {
  pthread_mutex_lock(&e->mu);
  int have = followed(e, name), full = e->nnames >= NAMES_MAX;
  pthread_mutex_unlock(&e->mu);
  if (have) return 0;
  name_entry *n = full ? NULL : calloc(1, sizeof *n);
  if (n == NULL) return -1;
  snprintf(n->name, sizeof n->name, "%s", name);
  pthread_mutex_lock(&e->mu);
  n->next = e->names;
  e->names = n;
  e->nnames++;
  pthread_mutex_unlock(&e->mu);
  if (!e->started && pthread_create(&e->thread, NULL, watch_main, e) == 0) e->started = 1;
  wake(e);
  return 0;
}

void store_etcd_events_remove(store_events *e, const char *name) {
  pthread_mutex_lock(&e->mu);
  for (name_entry **p = &e->names; *p; p = &(*p)->next)
    if (strcmp((*p)->name, name) == 0) {
      name_entry *n = *p;
      *p = n->next;
      free(n);
      e->nnames--;
      break;
    }
  pthread_mutex_unlock(&e->mu);
}

int64_t store_etcd_events_run(store_events *e, int readable) {
  if (readable) {
    uint64_t v;
    if (read(e->efd, &v, sizeof v) < 0 && errno != EAGAIN) { /* nothing to drain */
    }
  }
  /* take what the watch thread left, then call the hooks unlocked */
  static __thread queued batch[256];
  char ready[64][PICKET_PROTO_NAME_MAX + 1];
  for (;;) {
    int nb = 0, nr = 0, lost = 0;
    pthread_mutex_lock(&e->mu);
    lost = e->lost;
    e->lost = 0;
    if (lost) {
      e->qn = 0; /* what is queued is from before the loss: the state is read again */
      for (name_entry *n = e->names; n; n = n->next) n->ready = 0;
    }
    if (e->watching)
      for (name_entry *n = e->names; n && nr < 64; n = n->next)
        if (!n->ready) {
          n->ready = 1;
          snprintf(ready[nr++], sizeof ready[0], "%s", n->name);
        }
    nb = e->qn < 256 ? e->qn : 256;
    memcpy(batch, e->q, (size_t)nb * sizeof *batch);
    memmove(e->q, e->q + nb, (size_t)(e->qn - nb) * sizeof *e->q);
    e->qn -= nb;
    int more = e->qn > 0;
    pthread_mutex_unlock(&e->mu);
    if (lost) e->hooks.lost(e->ctx);
    for (int i = 0; i < nr; i++) e->hooks.ready(e->ctx, ready[i]);
    for (int i = 0; i < nb; i++) {
      batch[i].ev.text = batch[i].text;
      e->hooks.event(e->ctx, batch[i].name, &batch[i].ev);
    }
    if (!more && nr < 64) break;
  }
  return clock_mono_ms() + 1000;
}

int store_etcd_events_fd(const store_events *e) { return e->efd; }
