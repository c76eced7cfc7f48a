/* wait.c: waiting acquires (see wait.h for the design).
 *
 * One thread, whatever the number of waiters: the timer thread sleeps in
 * epoll_wait on the sockets of suspended waiters (EPOLLRDHUP: the client
 * went away) and an eventfd, with a timeout at the next deadline or head
 * retry time. Releases come from the store's release feed (store.h,
 * store_feed_*), which hears them only while somebody waits: it names
 * what was released, and this wakes the head of that queue.
 * One mutex guards the queues. Waking a waiter means resuming its HTTP
 * connection; the retry itself runs on its HTTP event loop.
 *
 * A wake that arrives while its waiter is not suspended (it is parking, or
 * its loop is retrying it) is kept as `pending` and acted on as soon as the
 * waiter suspends again, so no release message is ever lost to a race. */
#include "wait.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "store.h"

enum { W_IDLE = 0, W_PARKING, W_SUSPENDED, W_RUNNING };

#define NBUCKETS 4096

typedef struct wait_queue {
  char name[PICKET_PROTO_NAME_MAX + 3]; /* api_call.key: a lock's name, "s/" + a semaphore's */
  waiter *head, *tail;
  struct wait_queue *next; /* hash chain */
} wait_queue;

static const config *cfg;
static void (*resume_conn)(void *conn);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static wait_queue *buckets[NBUCKETS];
static waiter *all;
static long nwaiters;
static int shutting_down, stopping;
static int epfd = -1, evfd = -1;
static pthread_t timer_thread;
static int threads_started;

static int64_t now_ms(void) { return api_now_ms(); }

static void notify(void) {
  uint64_t one = 1;
  if (write(evfd, &one, sizeof one) < 0) { /* already signalled */ }
}

static unsigned hash(const char *s) {
  unsigned h = 2166136261u; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h % NBUCKETS;
}

static wait_queue *queue_find(const char *name, int create) {
  unsigned b = hash(name);
  for (wait_queue *q = buckets[b]; q; q = q->next)
    if (strcmp(q->name, name) == 0) return q;
  if (!create) return NULL;
  wait_queue *q = calloc(1, sizeof *q);
  if (q == NULL) return NULL;
  snprintf(q->name, sizeof q->name, "%s", name);
  q->next = buckets[b];
  buckets[b] = q;
  return q;
}

static void queue_free(wait_queue *q) {
  wait_queue **pp = &buckets[hash(q->name)];
  while (*pp != q) pp = &(*pp)->next;
  *pp = q->next;
  free(q);
}

/* Resumes w with `why`, or remembers the wake if w cannot be resumed now.
 * A stronger reason wins over a weaker pending one (SHUTDOWN > DISCONNECT
 * > REVOKED > TIMEOUT > RETRY). Caller holds mu. */
static void wake_locked(waiter *w, wait_wake why) {
  if (w->state == W_SUSPENDED) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->state = W_RUNNING;
    w->wake = why;
    resume_conn(w->conn);
  } else if (w->state == W_PARKING || w->state == W_RUNNING) {
    if (why > w->pending) w->pending = why;
  }
}

int wait_park(waiter *w, picket_proto_err *err) {
  pthread_mutex_lock(&mu);
  if (shutting_down) {
    pthread_mutex_unlock(&mu);
    *err = PICKET_PROTO_ERR_SHUTTING_DOWN;
    return -1;
  }
  wait_queue *q = nwaiters < cfg->max_waiters ? queue_find(w->call->key, 1) : NULL;
  if (q == NULL) {
    pthread_mutex_unlock(&mu);
    metrics_inc(M_WAIT_REJECTED);
    *err = PICKET_PROTO_ERR_TOO_MANY_WAITERS;
    return -1;
  }
  w->queue = q;
  w->prev = q->tail;
  w->next = NULL;
  if (q->tail) q->tail->next = w;
  else q->head = w;
  q->tail = w;
  w->all_prev = NULL;
  w->all_next = all;
  if (all) all->all_prev = w;
  all = w;
  w->state = W_PARKING;
  /* A new head retries once as soon as it is suspended: the release that
   * freed the lock may have been announced between its failed attempt and
   * now, when no queue was there to wake. (Later waiters are woken by the
   * head's leaving, under this mutex, so nothing falls between for them.) */
  w->pending = q->head == w ? WAKE_RETRY : WAKE_NONE;
  w->wake = WAKE_NONE;
  w->parked_ms = now_ms();
  if (++nwaiters == 1) store_feed_want(1);
  metrics_gauge_set(G_WAITERS, nwaiters);
  pthread_mutex_unlock(&mu);
  return 0;
}

void wait_repark(waiter *w) {
  pthread_mutex_lock(&mu);
  if (w->queue) w->state = W_PARKING;
  pthread_mutex_unlock(&mu);
}

void wait_suspended(waiter *w) {
  pthread_mutex_lock(&mu);
  if (w->queue == NULL) { /* cannot happen: parked before suspending */
    pthread_mutex_unlock(&mu);
    return;
  }
  wait_wake why = w->pending;
  if (why == WAKE_NONE && now_ms() >= w->call->deadline_ms) why = WAKE_TIMEOUT;
  w->pending = WAKE_NONE;
  w->state = W_SUSPENDED;
  if (why != WAKE_NONE) {
    if (why == WAKE_TIMEOUT) metrics_inc(M_WAKE_TIMEOUT);
    w->state = W_RUNNING;
    w->wake = why;
    pthread_mutex_unlock(&mu);
    resume_conn(w->conn);
    return;
  }
  /* Suspended sockets are not watched by libmicrohttpd, so watch them for
   * a hang-up: a gone client must leave the queue at once. */
  struct epoll_event ev = {.events = EPOLLRDHUP, .data.ptr = w};
  if (w->fd >= 0) epoll_ctl(epfd, EPOLL_CTL_ADD, w->fd, &ev);
  pthread_mutex_unlock(&mu);
  notify();
}

void wait_leave(waiter *w, int granted) {
  pthread_mutex_lock(&mu);
  wait_queue *q = w->queue;
  if (q == NULL) {
    pthread_mutex_unlock(&mu);
    return;
  }
  if (w->state == W_SUSPENDED) epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
  int was_head = q->head == w;
  if (w->prev) w->prev->next = w->next;
  else q->head = w->next;
  if (w->next) w->next->prev = w->prev;
  else q->tail = w->prev;
  if (w->all_prev) w->all_prev->all_next = w->all_next;
  else all = w->all_next;
  if (w->all_next) w->all_next->all_prev = w->all_prev;
  int64_t now = now_ms();
  if (q->head == NULL) {
    queue_free(q);
  } else if (was_head && q->head->state != W_RUNNING) {
    /* The new head retries when the lock next frees: at once if the old
     * head left without it, else when its fresh grant would expire. */
    waiter *h = q->head;
    h->call->retry_at_ms = granted ? now + w->call->ttl_ms : now;
    if (!granted) wake_locked(h, WAKE_RETRY);
  }
  w->queue = NULL;
  w->state = W_IDLE;
  if (--nwaiters == 0) store_feed_want(0);
  metrics_gauge_set(G_WAITERS, nwaiters);
  metrics_observe(H_WAIT, (double)(now - w->parked_ms) / 1000.0);
  pthread_mutex_unlock(&mu);
  notify();
}

void wait_count_disconnect(void) { metrics_inc(M_WAKE_DISCONNECT); }

int wait_queue_length(const char *key) {
  int n = 0;
  pthread_mutex_lock(&mu);
  wait_queue *q = queue_find(key, 0);
  for (waiter *w = q ? q->head : NULL; w; w = w->next) n++;
  pthread_mutex_unlock(&mu);
  return n;
}

int wait_max(void) {
  int most = 0;
  pthread_mutex_lock(&mu);
  for (int b = 0; b < NBUCKETS; b++)
    for (wait_queue *q = buckets[b]; q; q = q->next) {
      int len = 0;
      for (waiter *w = q->head; w; w = w->next) len++;
      if (len > most) most = len;
    }
  pthread_mutex_unlock(&mu);
  return most;
}

/* Wakes the head of every queue; when `name` is given, only that lock's. */
static void wake_heads(const char *name, metrics_counter cause) {
  pthread_mutex_lock(&mu);
  if (name) {
    wait_queue *q = queue_find(name, 0);
    if (q && q->head) {
      metrics_inc(cause);
      wake_locked(q->head, WAKE_RETRY);
    }
  } else {
    for (int b = 0; b < NBUCKETS; b++)
      for (wait_queue *q = buckets[b]; q; q = q->next) {
        metrics_inc(cause);
        wake_locked(q->head, WAKE_RETRY);
      }
  }
  pthread_mutex_unlock(&mu);
}

/* ---- timer thread --------------------------------------------------- */

static int is_watched(waiter *w) {
  for (waiter *x = all; x; x = x->all_next)
    if (x == w) return 1;
  return 0;
}

static void *timer_main(void *arg) {
  struct epoll_event evs[64];
  for (;;) {
    pthread_mutex_lock(&mu);
    if (stopping) {
      pthread_mutex_unlock(&mu);
      break;
    }
    int64_t now = now_ms(), next = now + 1000;
    for (waiter *w = all; w; w = w->all_next) {
      if (w->state != W_SUSPENDED) continue;
      if (w->call->deadline_ms < next) next = w->call->deadline_ms;
      if (w->queue->head == w && w->call->retry_at_ms < next) next = w->call->retry_at_ms;
    }
    pthread_mutex_unlock(&mu);
    int timeout = next > now ? (int)(next - now) : 0;
    int n = epoll_wait(epfd, evs, 64, timeout);

    pthread_mutex_lock(&mu);
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == NULL) {
        uint64_t v;
        if (read(evfd, &v, sizeof v) < 0) { /* nothing to drain */ }
        continue;
      }
      /* The event may be stale: the waiter could have been woken and freed
       * since epoll_wait returned. Only act on one still in the list. */
      waiter *w = evs[i].data.ptr;
      if (is_watched(w) && w->state == W_SUSPENDED) {
        metrics_inc(M_WAKE_DISCONNECT);
        wake_locked(w, WAKE_DISCONNECT);
      }
    }
    now = now_ms();
    for (waiter *w = all; w; w = w->all_next) {
      if (w->state != W_SUSPENDED) continue;
      if (now >= w->call->deadline_ms) {
        metrics_inc(M_WAKE_TIMEOUT);
        wake_locked(w, WAKE_TIMEOUT);
      } else if (w->queue->head == w && now >= w->call->retry_at_ms) {
        metrics_inc(M_WAKE_EXPIRY);
        wake_locked(w, WAKE_RETRY);
      }
    }
    pthread_mutex_unlock(&mu);
  }
  return arg;
}

/* The store's release feed: `key` was released (NULL: anything may have
 * been, while the feed was not listening). */
static void on_released(const char *key) { wake_heads(key, M_WAKE_RELEASE); }

/* ---- lifecycle ------------------------------------------------------ */

int wait_start(const config *c, void (*resume)(void *conn)) {
  cfg = c;
  resume_conn = resume;
  epfd = epoll_create1(EPOLL_CLOEXEC);
  evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd < 0 || evfd < 0) return -1;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, evfd, &ev) < 0) return -1;
  if (pthread_create(&timer_thread, NULL, timer_main, NULL) != 0) return -1;
  threads_started = 1;
  if (store_feed_start(on_released) < 0) return -1;
  return 0;
}

void wait_shutdown(void) {
  pthread_mutex_lock(&mu);
  shutting_down = 1;
  for (waiter *w = all; w; w = w->all_next) wake_locked(w, WAKE_SHUTDOWN);
  pthread_mutex_unlock(&mu);
}

void wait_revoke(int (*revoked)(void *conn)) {
  pthread_mutex_lock(&mu);
  for (waiter *w = all; w; w = w->all_next)
    if (revoked(w->conn)) wake_locked(w, WAKE_REVOKED);
  pthread_mutex_unlock(&mu);
}

void wait_stop(void) {
  if (!threads_started) return;
  pthread_mutex_lock(&mu);
  stopping = 1;
  pthread_mutex_unlock(&mu);
  store_feed_stop();
  notify();
  pthread_join(timer_thread, NULL);
  threads_started = 0;
  close(epfd);
  close(evfd);
}
