/* test_client_events.c: libpicket's side of lock events (client/events.c,
 * client/keeper.c; docs/events.md) against a real redis-server and a real
 * picketd (tests/harness), and against a small fake server in this file
 * for what picketd never sends (an older picketd's 404, a line over
 * 8 KiB, a flood of events, a stream that keeps dropping).
 *
 * Test case "watch" (picket_watch):
 *   watch_lifecycle      state, granted, renewed, released, broken and
 *                        expired, each with the right fences, owner, TTL,
 *                        `by`; a timeout leaves the watch usable;
 *                        picket_event_ends on each
 *   watch_refusals       a bad name (no request), a 404 of an older picketd
 *                        (PICKET_EUNSUPPORTED with its detail on the
 *                        client), a 200 that is no event stream
 *   watch_bounds         a line over 8 KiB ends the watch (PICKET_EPROTO);
 *                        a flood of 3,000 events arrives whole and in order
 *                        through the bounded buffer; a stream that ends says
 *                        so after its events
 *   watch_interrupt      picket_watch_interrupt from another thread ends a
 *                        wait at once
 * Test case "keeper" (the keeper's watching thread):
 *   keeper_learns_of_break  a break reaches on_lost through the stream, long
 *                        before the next renewal (ttl 30 s, renewal at 10 s):
 *                        within 2 s, over 10 runs; prints the median and the
 *                        most from the break's reply to on_lost
 *   keeper_learns_of_grant  the lease deleted in Redis and the lock granted
 *                        to another: the `granted` event ends it at once
 *   keeper_learns_of_expiry the lease shortened by another holder of its id
 *                        (300 ms) expires: the `expired` event ends it at
 *                        once, 30 s before its local deadline
 *   keeper_stop_prompt   stopping a keeper whose watch is open, and one whose
 *                        picketd is paused, is prompt, and no loss
 *   keeper_without_events  an older picketd (404): the keeper renews only
 *                        and says so (picket_keeper_watching)
 *   keeper_watch_off     opts.watch 0: no stream is opened, a break is not
 *                        noticed until a renewal
 *   keeper_reopens       a stream that keeps ending is opened again
 *
 * Upper bounds on time are multiplied by harness_time_scale(). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "picket/picket.h"

static harness_redis *redis;
static harness_picketd *picketd;

static void servers_start(void) {
  redis = harness_redis_start(NULL);
  ck_assert_ptr_nonnull(redis);
  picketd = harness_picketd_start(harness_redis_url(redis), NULL);
  ck_assert_ptr_nonnull(picketd);
}

static void servers_stop(void) {
  harness_picketd_free(picketd);
  harness_redis_free(redis);
}

static void resume_all(void) { kill(harness_picketd_pid(picketd), SIGCONT); }

static picket_client *client_of(const char *url) {
  picket_client *c = NULL;
  ck_assert_int_eq(picket_client_new(url, NULL, &c), 0);
  return c;
}

static picket_client *client(void) { return client_of(harness_picketd_url(picketd)); }

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The next event other than a heartbeat, within timeout_ms. */
static void next_event(picket_watch *w, picket_event *ev, int64_t timeout_ms) {
  int err;
  do {
    err = picket_watch_next(w, ev, timeout_ms * harness_time_scale());
    ck_assert_msg(err == 0, "no event: %s (%s)", picket_err_name(err),
                  picket_watch_error_message(w));
  } while (ev->type == PICKET_EVENT_HEARTBEAT);
}

static void expect_event(picket_watch *w, picket_event *ev, int type, const char *name) {
  next_event(w, ev, 3000);
  ck_assert_int_eq(ev->type, type);
  ck_assert_str_eq(ev->name, name);
  ck_assert_int_gt(ev->time_ms, 1700000000000LL);
  ck_assert_ptr_nonnull(strstr(ev->data, name));
}

/* ---- a fake server -------------------------------------------------------- */

/* Answers each connection (one request, then closed) in a thread of its
 * own with `handler`, given the request line's method and path and the
 * socket. */
typedef struct fake fake;
typedef void (*fake_handler)(fake *f, const char *method, const char *path, int fd);
struct fake {
  int fd;
  char url[64];
  fake_handler handler;
  pthread_t thread;
  atomic_int stop;
  atomic_int active;  /* connections being answered */
  atomic_int streams; /* event requests seen */
  int64_t fence;      /* what its renewals and states say */
};

typedef struct {
  fake *f;
  int fd;
} fake_conn;

static void send_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void send_str(int fd, const char *s) { send_all(fd, s, strlen(s)); }

/* Until the client hangs up, or the fake stops. */
static void hold_open(fake *f, int fd) {
  char b[256];
  while (!atomic_load(&f->stop)) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 50) > 0 && recv(fd, b, sizeof b, 0) <= 0) return;
  }
}

static void *fake_conn_main(void *arg) {
  fake_conn *fc = arg;
  char req[8192] = "";
  size_t len = 0;
  while (len < sizeof req - 1 && strstr(req, "\r\n\r\n") == NULL) {
    ssize_t got = recv(fc->fd, req + len, sizeof req - 1 - len, 0);
    if (got <= 0) break;
    len += (size_t)got;
    req[len] = '\0';
  }
  char method[16] = "", path[1024] = "";
  if (sscanf(req, "%15s %1023s", method, path) == 2) fc->f->handler(fc->f, method, path, fc->fd);
  close(fc->fd);
  atomic_fetch_sub(&fc->f->active, 1);
  free(fc);
  return NULL;
}

static void *fake_main(void *arg) {
  fake *f = arg;
  while (!atomic_load(&f->stop)) {
    struct pollfd p = {.fd = f->fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) continue;
    int cfd = accept(f->fd, NULL, NULL);
    if (cfd < 0) continue;
    fake_conn *fc = malloc(sizeof *fc);
    fc->f = f;
    fc->fd = cfd;
    atomic_fetch_add(&f->active, 1);
    pthread_t t;
    pthread_create(&t, NULL, fake_conn_main, fc);
    pthread_detach(t);
  }
  return NULL;
}

static fake *fake_start(fake_handler handler) {
  fake *f = calloc(1, sizeof *f);
  f->handler = handler;
  f->fence = 7;
  f->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  ck_assert_int_eq(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(f->fd, 16), 0);
  getsockname(f->fd, (struct sockaddr *)&a, &alen);
  snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", ntohs(a.sin_port));
  pthread_create(&f->thread, NULL, fake_main, f);
  return f;
}

static void fake_stop(fake *f) {
  atomic_store(&f->stop, 1);
  pthread_join(f->thread, NULL);
  for (int i = 0; i < 200 && atomic_load(&f->active) > 0; i++) harness_sleep_ms(10);
  close(f->fd);
  free(f);
}

static const char sse_head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Connection: close\r\n\r\n";

static void reply_json(int fd, int status, const char *body) {
  char head[256];
  snprintf(head, sizeof head,
           "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
           "Connection: close\r\n\r\n",
           status, strlen(body));
  send_str(fd, head);
  send_str(fd, body);
}

/* An older picketd: renewals work, events are a 404 like any unknown path. */
static void old_picketd(fake *f, const char *method, const char *path, int fd) {
  char body[256];
  if (strstr(path, "/renew") != NULL) {
    snprintf(body, sizeof body, "{\"lock\":\"old\",\"fence\":%lld,\"ttl_ms\":900}",
             (long long)f->fence);
    reply_json(fd, 200, body);
    return;
  }
  if (strstr(path, "/events") != NULL) atomic_fetch_add(&f->streams, 1);
  reply_json(fd, 404, "{\"error\":{\"code\":\"not_found\",\"message\":\"no such lock action; use "
                      "acquire, renew or release\"}}");
}

/* ---- test case "watch" ------------------------------------------------------ */

START_TEST(watch_lifecycle) {
  picket_client *c = client(), *wc = client();
  picket_watch *w = NULL;
  picket_event ev;
  ck_assert_int_eq(picket_watch_open(wc, "ev life", &w), PICKET_EINVAL);
  ck_assert_str_ne(picket_client_error_message(wc), "");
  ck_assert_int_eq(picket_watch_open(wc, "ev-life", &w), 0);
  ck_assert_int_eq(picket_client_status(wc), 0); /* the last call's detail is gone */
  ck_assert_str_eq(picket_client_error_message(wc), "");
  expect_event(w, &ev, PICKET_EVENT_STATE, "ev-life");
  ck_assert_str_eq(ev.type_name, "state");
  ck_assert_int_eq(ev.held, 0);
  ck_assert_int_eq(ev.fence, 0);
  ck_assert_int_eq(ev.ttl_ms, 0);
  ck_assert(!ev.has_owner);
  ck_assert_int_eq(ev.next_fence, -1);

  /* nothing for a while: a timeout, and the watch goes on */
  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(picket_watch_next(w, &ev, 150), PICKET_ETIMEDOUT);
  ck_assert_int_ge(picket_now_ms() - t0, 150);
  ck_assert_int_eq(picket_watch_next(w, &ev, 0), PICKET_ETIMEDOUT);
  ck_assert_str_eq(picket_watch_error_message(w), "");

  picket_lease *l = NULL, *l2 = NULL;
  picket_acquire_opts o = {.ttl_ms = 30000, .owner = "worker 7"};
  ck_assert_int_eq(picket_acquire(c, "ev-life", &o, &l), 0);
  int64_t f1 = picket_lease_fence(l);
  expect_event(w, &ev, PICKET_EVENT_GRANTED, "ev-life");
  ck_assert_int_eq(ev.fence, f1);
  ck_assert_int_eq(ev.ttl_ms, 30000);
  ck_assert(ev.has_owner);
  ck_assert_str_eq(ev.owner, "worker 7");
  ck_assert_int_eq(ev.held, -1);
  ck_assert(!picket_event_ends(&ev, f1));
  ck_assert(picket_event_ends(&ev, f1 - 1)); /* someone else's grant */

  ck_assert_int_eq(picket_renew(c, l, 20000), 0);
  expect_event(w, &ev, PICKET_EVENT_RENEWED, "ev-life");
  ck_assert_int_eq(ev.fence, f1);
  ck_assert_int_eq(ev.ttl_ms, 20000);
  ck_assert(!picket_event_ends(&ev, f1));

  ck_assert_int_eq(picket_release(c, l), 0);
  expect_event(w, &ev, PICKET_EVENT_RELEASED, "ev-life");
  ck_assert_int_eq(ev.fence, f1);
  ck_assert_int_eq(ev.ttl_ms, -1);
  ck_assert(picket_event_ends(&ev, f1));

  picket_acquire_opts o2 = {.ttl_ms = 30000};
  ck_assert_int_eq(picket_acquire(c, "ev-life", &o2, &l2), 0);
  int64_t f2 = picket_lease_fence(l2);
  ck_assert_int_gt(f2, f1);
  expect_event(w, &ev, PICKET_EVENT_GRANTED, "ev-life");
  ck_assert_int_eq(ev.fence, f2);
  ck_assert(!ev.has_owner);

  picket_break_result br;
  ck_assert_int_eq(picket_break(c, "ev-life", &br), 0);
  expect_event(w, &ev, PICKET_EVENT_BROKEN, "ev-life");
  ck_assert_int_eq(ev.fence, f2);
  ck_assert_int_eq(ev.next_fence, br.fence);
  ck_assert_ptr_nonnull(strstr(ev.by, "address"));
  ck_assert(picket_event_ends(&ev, f2));
  ck_assert(!picket_event_ends(&ev, f1));

  /* a lease left to expire: picketd reports it at its expiry */
  picket_lease *l3 = NULL;
  picket_acquire_opts o3 = {.ttl_ms = 300};
  ck_assert_int_eq(picket_acquire(c, "ev-life", &o3, &l3), 0);
  t0 = picket_now_ms();
  expect_event(w, &ev, PICKET_EVENT_GRANTED, "ev-life");
  ck_assert_int_eq(ev.fence, picket_lease_fence(l3));
  expect_event(w, &ev, PICKET_EVENT_EXPIRED, "ev-life");
  ck_assert_int_eq(ev.fence, picket_lease_fence(l3));
  ck_assert_int_ge(picket_now_ms() - t0, 250);
  ck_assert_int_le(picket_now_ms() - t0, 1300 * harness_time_scale());
  ck_assert(picket_event_ends(&ev, picket_lease_fence(l3)));

  /* a second watch starts with the state as it is now */
  picket_watch *w2 = NULL;
  picket_lease *l4 = NULL;
  picket_acquire_opts o4 = {.ttl_ms = 30000, .owner = "w2"};
  ck_assert_int_eq(picket_acquire(c, "ev-life", &o4, &l4), 0);
  ck_assert_int_eq(picket_watch_open(wc, "ev-life", &w2), 0);
  expect_event(w2, &ev, PICKET_EVENT_STATE, "ev-life");
  ck_assert_int_eq(ev.held, 1);
  ck_assert_int_eq(ev.fence, picket_lease_fence(l4));
  ck_assert_str_eq(ev.owner, "w2");
  ck_assert_int_gt(ev.ttl_ms, 29000);
  ck_assert(!picket_event_ends(&ev, picket_lease_fence(l4)));
  ck_assert(picket_event_ends(&ev, f2));
  ck_assert_int_eq(picket_release(c, l4), 0);
  picket_watch_close(w2);
  picket_watch_close(w);
  picket_watch_close(NULL);
  picket_lease_free(l);
  picket_lease_free(l2);
  picket_lease_free(l3);
  picket_lease_free(l4);
  picket_client_free(c);
  picket_client_free(wc);
}
END_TEST

/* A 200 whose body is no event stream. */
static void not_sse(fake *f, const char *method, const char *path, int fd) {
  send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello");
}

START_TEST(watch_refusals) {
  picket_client *c = client();
  picket_watch *w = (picket_watch *)&w; /* set to NULL on failure */
  ck_assert_int_eq(picket_watch_open(c, "bad name", &w), PICKET_EINVAL);
  ck_assert_ptr_null(w);
  ck_assert_int_eq(picket_client_status(c), 0); /* refused here: no request */
  ck_assert_int_eq(picket_watch_open(c, NULL, &w), PICKET_EINVAL);
  ck_assert_int_eq(picket_watch_open(NULL, "x", &w), PICKET_EINVAL);

  fake *f = fake_start(old_picketd);
  picket_client *oc = client_of(f->url);
  ck_assert_int_eq(picket_watch_open(oc, "ev-old", &w), PICKET_EUNSUPPORTED);
  ck_assert_ptr_null(w);
  ck_assert_int_eq(picket_client_status(oc), 404);
  ck_assert_str_eq(picket_client_error_code(oc), "not_found");
  ck_assert_str_eq(picket_err_name(PICKET_EUNSUPPORTED), "EUNSUPPORTED");
  picket_client_free(oc);
  fake_stop(f);

  f = fake_start(not_sse);
  oc = client_of(f->url);
  ck_assert_int_eq(picket_watch_open(oc, "ev-html", &w), PICKET_EPROTO);
  ck_assert_ptr_nonnull(strstr(picket_client_error_message(oc), "text/html"));
  picket_client_free(oc);
  fake_stop(f);

  /* nothing listening */
  oc = client_of("http://127.0.0.1:1");
  ck_assert_int_eq(picket_watch_open(oc, "ev-none", &w), PICKET_ETRANSPORT);
  picket_client_free(oc);
  picket_client_free(c);
}
END_TEST

/* A state, then a line of 9,000 bytes. */
static void long_line(fake *f, const char *method, const char *path, int fd) {
  send_str(fd, sse_head);
  send_str(fd, "event: state\ndata: {\"name\":\"ev-long\",\"held\":false,\"fence\":0,\"owner\":null,"
               "\"ttl_ms\":0,\"time\":1800000000000}\n\n");
  static char line[9000 + 2];
  memset(line, 'x', sizeof line - 2);
  memcpy(line, "data: ", 6);
  line[sizeof line - 2] = '\n';
  send_all(fd, line, sizeof line - 1);
  hold_open(f, fd);
}

/* 3,000 renewals at once (CRLF line ends, a comment, an id: field),
 * then the end of the stream. */
#define FLOOD 3000
static void flood(fake *f, const char *method, const char *path, int fd) {
  send_str(fd, sse_head);
  size_t cap = FLOOD * 128, len = 0;
  char *b = malloc(cap);
  len += (size_t)snprintf(b + len, cap - len, ": hello\r\n");
  for (int i = 1; i <= FLOOD; i++)
    len += (size_t)snprintf(b + len, cap - len,
                            "id: %d\r\nevent: renewed\r\ndata: {\"name\":\"ev-flood\",\"fence\":7,"
                            "\"ttl_ms\":%d,\"time\":1800000000000}\r\n\r\n",
                            i, i);
  send_all(fd, b, len);
  free(b);
}

START_TEST(watch_bounds) {
  picket_watch *w = NULL;
  picket_event ev;
  fake *f = fake_start(long_line);
  picket_client *oc = client_of(f->url);
  ck_assert_int_eq(picket_watch_open(oc, "ev-long", &w), 0);
  next_event(w, &ev, 2000);
  ck_assert_int_eq(ev.type, PICKET_EVENT_STATE);
  ck_assert_int_eq(picket_watch_next(w, &ev, 2000), PICKET_EPROTO);
  ck_assert_ptr_nonnull(strstr(picket_watch_error_message(w), "8192"));
  ck_assert_int_eq(picket_watch_next(w, &ev, 0), PICKET_EPROTO); /* over for good */
  picket_watch_close(w);
  picket_client_free(oc);
  fake_stop(f);

  f = fake_start(flood);
  oc = client_of(f->url);
  ck_assert_int_eq(picket_watch_open(oc, "ev-flood", &w), 0);
  harness_sleep_ms(200); /* let it all arrive: the buffer fills and pauses */
  for (int i = 1; i <= FLOOD; i++) {
    next_event(w, &ev, 2000);
    ck_assert_int_eq(ev.type, PICKET_EVENT_RENEWED);
    ck_assert_int_eq(ev.ttl_ms, i);
  }
  ck_assert_int_eq(picket_watch_next(w, &ev, 2000), PICKET_ETRANSPORT);
  ck_assert_str_eq(picket_watch_error_message(w), "picketd ended the event stream");
  picket_watch_close(w);
  picket_client_free(oc);
  fake_stop(f);
}
END_TEST

static void *interrupt_later(void *arg) {
  harness_sleep_ms(200);
  picket_watch_interrupt(arg);
  return NULL;
}

START_TEST(watch_interrupt) {
  picket_client *c = client();
  picket_watch *w = NULL;
  picket_event ev;
  ck_assert_int_eq(picket_watch_open(c, "ev-intr", &w), 0);
  next_event(w, &ev, 3000);
  pthread_t t;
  pthread_create(&t, NULL, interrupt_later, w);
  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(picket_watch_next(w, &ev, -1), PICKET_ECANCELED);
  int64_t took = picket_now_ms() - t0;
  pthread_join(t, NULL);
  ck_assert_int_ge(took, 190);
  ck_assert_int_lt(took, 200 + 100 * harness_time_scale());
  ck_assert_int_eq(picket_watch_next(w, &ev, 1000), PICKET_ECANCELED);
  picket_watch_close(w);
  picket_client_free(c);
}
END_TEST

/* ---- test case "keeper" ----------------------------------------------------- */

typedef struct {
  atomic_int calls;
  atomic_int err;
  _Atomic int64_t at_us;
} lost_report;

static void on_lost(picket_lease *l, int err, void *arg) {
  lost_report *r = arg;
  atomic_store(&r->at_us, now_us());
  atomic_store(&r->err, err);
  atomic_fetch_add(&r->calls, 1);
}

typedef struct {
  picket_client *c;
  picket_lease *l;
  picket_keeper *k;
  lost_report r;
} kept;

/* Starts a keeper of t->l (renewing every ttl/3) that watches, or not,
 * and reports a loss to t->r. */
static void kept_keep(kept *t, int watch) {
  picket_keeper_options ko;
  picket_keeper_options_init(&ko);
  ck_assert_int_eq(ko.watch, 1); /* the default */
  ko.on_lost = on_lost;
  ko.arg = &t->r;
  ko.watch = watch;
  ck_assert_int_eq(picket_keeper_start(t->c, t->l, &ko, &t->k), 0);
}

/* A lease of `name` for ttl_ms under a keeper; waits until its watch has
 * its state. */
static void kept_start(kept *t, const char *name, int64_t ttl_ms, int watch) {
  memset(t, 0, sizeof *t);
  t->c = client();
  picket_acquire_opts o = {.ttl_ms = ttl_ms};
  ck_assert_int_eq(picket_acquire(t->c, name, &o, &t->l), 0);
  kept_keep(t, watch);
  if (!watch) return;
  int64_t t0 = picket_now_ms();
  while (picket_keeper_watching(t->k) != 1 && picket_now_ms() - t0 < 3000 * harness_time_scale())
    harness_sleep_ms(2);
  ck_assert_int_eq(picket_keeper_watching(t->k), 1);
}

/* Waits up to ms for on_lost; its time (µs, monotonic), or 0. */
static int64_t await_lost(kept *t, int64_t ms) {
  int64_t until = now_us() + ms * 1000 * harness_time_scale();
  while (atomic_load(&t->r.calls) == 0 && now_us() < until) harness_sleep_ms(1);
  return atomic_load(&t->r.calls) ? atomic_load(&t->r.at_us) : 0;
}

/* Stops the keeper (expecting `lost` from it), releases a lease that was
 * kept (when `release`) and frees the rest. */
static void kept_end(kept *t, int lost, int release) {
  ck_assert_int_eq(picket_keeper_stop(t->k), lost);
  ck_assert_int_eq(atomic_load(&t->r.calls), lost ? 1 : 0);
  if (lost == 0 && release) ck_assert_int_eq(picket_release(t->c, t->l), 0);
  picket_lease_free(t->l);
  picket_client_free(t->c);
}

static void kept_finish(kept *t, int lost) { kept_end(t, lost, 1); }

/* The fake's lease of lock "old" (fence 7, TTL 900 ms), known by its id
 * and renewed once, under a keeper that watches. */
static void kept_old(kept *t, fake *f) {
  memset(t, 0, sizeof *t);
  t->c = client_of(f->url);
  ck_assert_int_eq(picket_lease_new("old", "0123456789abcdef0123456789abcdef", &t->l), 0);
  ck_assert_int_eq(picket_renew(t->c, t->l, 900), 0);
  ck_assert_int_eq(picket_lease_fence(t->l), 7);
  kept_keep(t, 1);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

#define BREAK_RUNS 10

/* The measure of issue 27: a break's reply to on_lost. on_lost may come
 * before the reply does (picketd publishes the event inside the break's
 * script, before it answers), so the figure may be below zero. */
START_TEST(keeper_learns_of_break) {
  int64_t after_reply[BREAK_RUNS], after_send[BREAK_RUNS];
  picket_client *op = client();
  picket_break_result br;
  ck_assert_int_eq(picket_break(op, "ev-warm", &br), 0); /* the operator's connection is warm */
  for (int i = 0; i < BREAK_RUNS; i++) {
    kept t;
    kept_start(&t, "ev-break", 30000, 1); /* the next renewal is 10 s away */
    int64_t sent = now_us();
    ck_assert_int_eq(picket_break(op, "ev-break", &br), 0);
    int64_t replied = now_us();
    ck_assert(br.broken);
    int64_t at = await_lost(&t, 2000);
    ck_assert_msg(at > 0, "run %d: no loss reported within 2 s of the break", i);
    ck_assert_int_eq(atomic_load(&t.r.err), PICKET_ELOST);
    ck_assert_int_eq(picket_keeper_lost(t.k), PICKET_ELOST);
    ck_assert_int_eq(picket_keeper_renewals(t.k), 0); /* the stream's doing, not a renewal's */
    after_reply[i] = at - replied;
    after_send[i] = at - sent;
    kept_finish(&t, PICKET_ELOST);
  }
  qsort(after_reply, BREAK_RUNS, sizeof after_reply[0], cmp_i64);
  qsort(after_send, BREAK_RUNS, sizeof after_send[0], cmp_i64);
  printf("keeper_learns_of_break: %d runs, break reply -> on_lost: median %.3f ms, max %.3f ms; "
         "break sent -> on_lost: median %.3f ms, max %.3f ms\n",
         BREAK_RUNS, after_reply[BREAK_RUNS / 2] / 1000.0, after_reply[BREAK_RUNS - 1] / 1000.0,
         after_send[BREAK_RUNS / 2] / 1000.0, after_send[BREAK_RUNS - 1] / 1000.0);
  fflush(stdout);
  picket_client_free(op);
}
END_TEST

START_TEST(keeper_learns_of_grant) {
  kept t;
  kept_start(&t, "ev-grant", 30000, 1);
  redisReply *rep = harness_redis_cmd(redis, "DEL picket:{ev-grant}:lease");
  ck_assert_ptr_nonnull(rep);
  ck_assert_int_eq(rep->integer, 1);
  freeReplyObject(rep);
  ck_assert_int_eq(await_lost(&t, 300), 0); /* a DEL publishes nothing */
  picket_client *c2 = client();
  picket_lease *other = NULL;
  ck_assert_int_eq(picket_acquire(c2, "ev-grant", NULL, &other), 0);
  int64_t t0 = now_us();
  int64_t at = await_lost(&t, 2000);
  ck_assert_msg(at > 0, "another's grant was not noticed within 2 s");
  ck_assert_int_lt(at - t0, 2000000);
  ck_assert_int_eq(atomic_load(&t.r.err), PICKET_ELOST);
  ck_assert_int_eq(picket_keeper_renewals(t.k), 0);
  kept_finish(&t, PICKET_ELOST);
  ck_assert_int_eq(picket_release(c2, other), 0);
  picket_lease_free(other);
  picket_client_free(c2);
}
END_TEST

START_TEST(keeper_learns_of_expiry) {
  kept t;
  kept_start(&t, "ev-exp", 30000, 1);
  /* another holder of the lease id shortens it to 300 ms; the keeper's
   * local deadline stays 30 s away and its next renewal 10 s */
  picket_client *c2 = client();
  picket_lease *same = NULL;
  ck_assert_int_eq(picket_lease_new("ev-exp", picket_lease_id(t.l), &same), 0);
  ck_assert_int_eq(picket_renew(c2, same, 300), 0);
  int64_t t0 = now_us();
  int64_t at = await_lost(&t, 2000);
  ck_assert_msg(at > 0, "the expiry was not noticed within 2 s");
  ck_assert_int_ge(at - t0, 250000);
  ck_assert_int_eq(atomic_load(&t.r.err), PICKET_ELOST);
  ck_assert(picket_lease_valid(t.l)); /* the local deadline had not come */
  ck_assert_int_eq(picket_keeper_renewals(t.k), 0);
  kept_finish(&t, PICKET_ELOST);
  picket_lease_free(same);
  picket_client_free(c2);
}
END_TEST

START_TEST(keeper_stop_prompt) {
  kept t;
  kept_start(&t, "ev-stop", 30000, 1);
  int64_t t0 = now_us();
  ck_assert_int_eq(picket_keeper_stop(t.k), 0);
  int64_t took = now_us() - t0;
  ck_assert_msg(took < 100000 * harness_time_scale(), "stop took %lld us", (long long)took);
  ck_assert_int_eq(atomic_load(&t.r.calls), 0);
  ck_assert_int_eq(picket_release(t.c, t.l), 0);
  picket_lease_free(t.l);
  picket_client_free(t.c);

  /* picketd paused: the watch hangs (and, once reopened, its connect) */
  kept_start(&t, "ev-stop", 30000, 1);
  kill(harness_picketd_pid(picketd), SIGSTOP);
  harness_sleep_ms(300);
  t0 = now_us();
  ck_assert_int_eq(picket_keeper_stop(t.k), 0);
  took = now_us() - t0;
  kill(harness_picketd_pid(picketd), SIGCONT);
  ck_assert_msg(took < 100000 * harness_time_scale(), "stop took %lld us", (long long)took);
  ck_assert_int_eq(picket_release(t.c, t.l), 0);
  picket_lease_free(t.l);
  picket_client_free(t.c);
}
END_TEST

START_TEST(keeper_without_events) {
  fake *f = fake_start(old_picketd);
  kept t;
  kept_old(&t, f);
  harness_sleep_ms(1200);
  ck_assert_int_eq(picket_keeper_watching(t.k), PICKET_EUNSUPPORTED);
  ck_assert_int_eq(atomic_load(&f->streams), 1); /* asked once, then renewing only */
  ck_assert_int_ge(picket_keeper_renewals(t.k), 2); /* every 300 ms */
  kept_end(&t, 0, 0);
  fake_stop(f);
}
END_TEST

START_TEST(keeper_watch_off) {
  kept t;
  kept_start(&t, "ev-off", 30000, 0);
  harness_sleep_ms(300);
  ck_assert_int_eq(picket_keeper_watching(t.k), 0);
  ck_assert(harness_metric(harness_picketd_url(picketd), "picket_event_streams") == 0);
  picket_break_result br;
  ck_assert_int_eq(picket_break(t.c, "ev-off", &br), 0);
  ck_assert_int_eq(await_lost(&t, 500), 0); /* only the renewal, 10 s on, would tell */
  kept_end(&t, 0, 0);
}
END_TEST

/* Each event request gets the state (held, with the fake's fence), then
 * the stream ends. */
static void dropping(fake *f, const char *method, const char *path, int fd) {
  if (strstr(path, "/events") == NULL) {
    old_picketd(f, method, path, fd);
    return;
  }
  atomic_fetch_add(&f->streams, 1);
  char ev[256];
  snprintf(ev, sizeof ev,
           "event: state\ndata: {\"name\":\"old\",\"held\":true,\"fence\":%lld,\"owner\":null,"
           "\"ttl_ms\":900,\"time\":1800000000000}\n\n",
           (long long)f->fence);
  send_str(fd, sse_head);
  send_str(fd, ev);
}

START_TEST(keeper_reopens) {
  fake *f = fake_start(dropping);
  kept t;
  kept_old(&t, f);
  harness_sleep_ms(1000);
  /* every ~100 ms (the backoff starts over after each state) */
  ck_assert_int_ge(atomic_load(&f->streams), 3);
  ck_assert_int_le(atomic_load(&f->streams), 15);
  ck_assert_int_ge(picket_keeper_renewals(t.k), 2);
  kept_end(&t, 0, 0);
  fake_stop(f);
}
END_TEST

/* A test case whose tests share one redis-server and picketd. */
static TCase *servers_tcase(const char *name) {
  TCase *t = tcase_create(name);
  tcase_add_unchecked_fixture(t, servers_start, servers_stop);
  tcase_add_checked_fixture(t, NULL, resume_all);
  tcase_set_timeout(t, 90);
  return t;
}

static Suite *events_suite(void) {
  Suite *s = suite_create("events");
  TCase *w = servers_tcase("watch");
  tcase_add_test(w, watch_lifecycle);
  tcase_add_test(w, watch_refusals);
  tcase_add_test(w, watch_bounds);
  tcase_add_test(w, watch_interrupt);
  suite_add_tcase(s, w);
  TCase *k = servers_tcase("keeper");
  tcase_add_test(k, keeper_learns_of_break);
  tcase_add_test(k, keeper_learns_of_grant);
  tcase_add_test(k, keeper_learns_of_expiry);
  tcase_add_test(k, keeper_stop_prompt);
  tcase_add_test(k, keeper_without_events);
  tcase_add_test(k, keeper_watch_off);
  tcase_add_test(k, keeper_reopens);
  suite_add_tcase(s, k);
  return s;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  SRunner *sr = srunner_create(events_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
