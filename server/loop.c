/* loop.c: picketd's event loops (see loop.h for what a loop is).
 *
 * This file owns the epoll set of each loop and what is in it besides the
 * daemon: the loop's store pipe, its eventfd and resume queue, and the
 * client sockets' deadlines (conns.c tags them). It owns the pass too:
 * how long to wait, in which order events are taken, when the pipe is
 * read, expired and flushed. What a request is, and when a connection is
 * suspended, is http.c's business. */
#include "loop.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"

struct loop {
  loop_hooks hooks;
  void *ctx;
  store_pipe *pipe;         /* NULL when store calls are never pipelined */
  int ep;                   /* epoll: the daemon's epoll fd, the pipe's socket, wake, clients */
  int wake;                 /* eventfd: resumes asked by other threads, and stop */
  int pipe_fd;              /* the pipe socket now in ep, or -1 */
  unsigned long pipe_opens; /* ...and which one it is */
  conns_loop *conns;        /* its connections' deadlines (their sockets are in ep too) */
  pthread_t thread;
  int started;
  pthread_mutex_t mu;       /* guards the resume and done queues */
  loop_resume *resume_head, *resume_tail;
  store_op *done_head, *done_tail; /* calls other threads made for it (loop_done_soon) */
  atomic_long owed;         /* ...and how many it still waits for */
  int lone;                 /* this pass serves at most one client's request (loop_pipe_wait) */
};

static const config *cfg;
static __thread loop *cur; /* the loop running on this thread */
static atomic_int stop_req;
static atomic_int pipes_closed;

/* The tag of the daemon's epoll fd: its events need no action here, since
 * the daemon runs once every pass. */
static char daemon_tag;

void loop_init(const config *c) {
  cfg = c;
  atomic_store(&stop_req, 0);
  atomic_store(&pipes_closed, 0);
}

static void epoll_watch(int ep, int fd, void *tag) {
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

loop *loop_new(int daemon_ep, const loop_hooks *hooks, void *ctx) {
  loop *l = calloc(1, sizeof *l);
  if (l == NULL) return NULL;
  l->hooks = *hooks;
  l->ctx = ctx;
  l->pipe_fd = -1;
  pthread_mutex_init(&l->mu, NULL);
  l->ep = epoll_create1(EPOLL_CLOEXEC);
  l->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (l->ep < 0 || l->wake < 0 || (l->conns = conns_loop_new(l->ep)) == NULL ||
      (store_pipeline_enabled() && (l->pipe = store_pipe_new()) == NULL)) {
    loop_free(l);
    return NULL;
  }
  epoll_watch(l->ep, daemon_ep, &daemon_tag);
  epoll_watch(l->ep, l->wake, &l->wake);
  return l;
}

void loop_wake(loop *l) {
  uint64_t one = 1;
  ssize_t n = write(l->wake, &one, sizeof one); /* only fails when already nonzero */
  (void)n;
}

void loop_resume_soon(loop *l, loop_resume *item) {
  item->next = NULL;
  pthread_mutex_lock(&l->mu);
  int first = l->resume_head == NULL;
  if (l->resume_tail) l->resume_tail->next = item;
  else l->resume_head = item;
  l->resume_tail = item;
  pthread_mutex_unlock(&l->mu);
  if (first) loop_wake(l);
}

loop *loop_current(void) { return cur; }

conns_loop *loop_conns(loop *l) { return l->conns; }

int loop_pipe_open(void) { return cur && cur->pipe && !atomic_load(&pipes_closed); }

void loop_owe(loop *l) { atomic_fetch_add(&l->owed, 1); }

void loop_done_soon(loop *l, store_op *op) {
  op->next = NULL;
  pthread_mutex_lock(&l->mu);
  int first = l->resume_head == NULL && l->done_head == NULL;
  if (l->done_tail) l->done_tail->next = op;
  else l->done_head = op;
  l->done_tail = op;
  pthread_mutex_unlock(&l->mu);
  if (first) loop_wake(l);
}

/* Completes the calls other threads finished for l. */
static void take_dones(loop *l) {
  pthread_mutex_lock(&l->mu);
  store_op *op = l->done_head;
  l->done_head = l->done_tail = NULL;
  pthread_mutex_unlock(&l->mu);
  for (store_op *next; op; op = next) {
    next = op->next; /* done may free op */
    atomic_fetch_sub(&l->owed, 1);
    op->done(op);
  }
}

int loop_pipe_call(store_op *op) { return store_pipe_append(cur->pipe, op); }

void loop_close_pipes(void) { atomic_store(&pipes_closed, 1); }

/* The nearest deadline of l's own (its pipe's calls, its connections'
 * requests), in ms from now, or -1; the daemon's is left out, since this
 * runs inside the daemon's pass. */
static int64_t own_timeout_ms(loop *l) {
  int64_t t = l->pipe ? store_pipe_timeout_ms(l->pipe) : -1;
  int64_t ct = conns_timeout_ms(l->conns);
  if (ct >= 0 && (t < 0 || ct < t)) t = ct;
  return t;
}

/* Only in a pass that serves one client: the daemon goes through the
 * connections it read one after the other, and a wait would hold the
 * others back and keep their calls out of one batch. */
int loop_pass_lone(void) { return cur && cur->lone; }

int loop_pipe_wait(const int *done, int max_ms) {
  loop *l = cur;
  unsigned long opens = 0;
  if (l == NULL || !l->lone) return *done;
  int fd = l->pipe ? store_pipe_fd(l->pipe, &opens) : -1;
  if (fd < 0) return *done;
  store_pipe_flush(l->pipe);
  int64_t t = own_timeout_ms(l);
  int64_t until = clock_mono_ms() + (t >= 0 && t < max_ms ? t : max_ms);
  while (!*done) {
    int64_t left = until - clock_mono_ms();
    if (left <= 0) break;
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = l->ep, .events = POLLIN}};
    int n = poll(p, 2, (int)left);
    if (n < 0 && errno != EINTR) break;
    if (p[0].revents) store_pipe_read(l->pipe);
    if (p[1].revents) break; /* the loop has something else to do */
  }
  return *done;
}

/* Keeps the pipe's socket in the set. A reconnect makes a new socket,
 * possibly with the old one's number: the count of opens tells them apart.
 * (A closed socket has left the set by itself.) */
static void watch_pipe(loop *l) {
  unsigned long opens = 0;
  int fd = l->pipe ? store_pipe_fd(l->pipe, &opens) : -1;
  if (fd == l->pipe_fd && opens == l->pipe_opens) return;
  if (fd >= 0) epoll_watch(l->ep, fd, &l->pipe_fd);
  l->pipe_fd = fd;
  l->pipe_opens = opens;
}

/* How long a pass may wait: until the daemon's next timeout, the oldest
 * piped call's or the next request deadline, and never more than a second
 * (a safety net: every event that matters wakes the loop). */
static int pass_timeout(loop *l) {
  int64_t t = 1000;
  int64_t dt = l->hooks.timeout_ms(l->ctx);
  if (dt >= 0 && dt < t) t = dt;
  int64_t pt = l->pipe ? store_pipe_timeout_ms(l->pipe) : -1;
  if (pt >= 0 && pt < t) t = pt;
  int64_t ct = conns_timeout_ms(l->conns);
  if (ct >= 0 && ct < t) t = ct;
  return (int)t;
}

/* Resumes the connections other threads asked to resume. */
static void take_resumes(loop *l) {
  uint64_t n;
  if (read(l->wake, &n, sizeof n) < 0) { /* nothing pending */
  }
  pthread_mutex_lock(&l->mu);
  loop_resume *r = l->resume_head;
  l->resume_head = l->resume_tail = NULL;
  pthread_mutex_unlock(&l->mu);
  for (loop_resume *next; r; r = next) {
    next = r->next; /* the request may end once resumed */
    l->hooks.resume(r);
  }
  take_dones(l);
}

/* How long loop_stop waits for the calls workers make for a loop: longer
 * than any store call may take (every store timeout is at most 60 s). */
#define LOOP_OWED_WAIT_MS 65000

/* Events taken from a loop's epoll set per call. */
#define LOOP_EVENTS 32

static void *loop_main(void *arg) {
  loop *l = arg;
  cur = l;
  if (l->pipe) store_pipe_connect(l->pipe);
  struct epoll_event evs[LOOP_EVENTS];
  while (!atomic_load(&stop_req)) {
    l->hooks.pass(l->ctx);
    watch_pipe(l);
    int n = epoll_wait(l->ep, evs, LOOP_EVENTS, pass_timeout(l));
    /* Every event is taken before the daemon runs: once libmicrohttpd has
     * read a client's first byte, epoll no longer reports it, and the
     * request's deadline would start late (conns.c). So a full batch is
     * followed by another. Client sockets are edge-triggered, so one that
     * keeps receiving could be reported again and again while the daemon
     * waits: the rounds are bounded by what this loop's connections could
     * fill once each (the bound one-shot events used to give), and a
     * request that misses it starts at its line instead. */
    int clients = 0, others = 0;
    for (int rounds = (int)(cfg->max_connections / LOOP_EVENTS) + 2;; rounds--) {
      for (int i = 0; i < n; i++) {
        void *tag = evs[i].data.ptr;
        if (tag == &l->wake) {
          take_resumes(l);
          others++;
        } else if (tag == &l->pipe_fd) {
          if (l->pipe) store_pipe_read(l->pipe);
          others++; /* its calls' connections are resumed */
        } else if (tag != &daemon_tag) {
          conns_readable(tag); /* the rest are client sockets, tagged by conns.c */
          clients++;
        }
      }
      if (n < LOOP_EVENTS || rounds == 0) break;
      n = epoll_wait(l->ep, evs, LOOP_EVENTS, 0);
    }
    conns_expire(l->conns);
    if (l->pipe) store_pipe_expire(l->pipe);
    l->lone = clients <= 1 && others == 0;
    l->hooks.run(l->ctx);
    l->lone = 0;
    if (l->pipe) store_pipe_flush(l->pipe);
  }
  store_thread_done();
  return NULL;
}

int loop_start(loop *l) {
  if (pthread_create(&l->thread, NULL, loop_main, l) != 0) return -1;
  l->started = 1;
  return 0;
}

void loop_stop(loop *l) {
  atomic_store(&stop_req, 1);
  if (l == NULL) return;
  if (l->started) {
    loop_wake(l);
    pthread_join(l->thread, NULL);
    l->started = 0;
  }
  store_pipe_free(l->pipe); /* fails any call still waiting; nothing should */
  l->pipe = NULL;
  /* Calls a worker still makes for l end within the store's timeout: their
   * requests are answered (or their undo freed) here, on this thread. */
  for (int64_t waited = 0; atomic_load(&l->owed) > 0 && waited < LOOP_OWED_WAIT_MS; waited++) {
    take_dones(l);
    if (atomic_load(&l->owed) > 0) usleep(1000);
  }
  take_dones(l);
}

void loop_free(loop *l) {
  if (l == NULL) return;
  store_pipe_free(l->pipe);
  conns_loop_free(l->conns);
  if (l->ep >= 0) close(l->ep);
  if (l->wake >= 0) close(l->wake);
  pthread_mutex_destroy(&l->mu);
  free(l);
}
