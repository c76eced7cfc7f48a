/* conns.c: the whole-request deadline of fenced-kv (issue 17: 256 sockets
 * that each dribbled a header byte now and then held every connection slot,
 * and honest writes hung; libmicrohttpd's --connection-timeout only ends a
 * connection that sends *nothing* for that long, and every byte resets it).
 *
 * fenced-kv answers every request with "Connection: close", so a connection
 * carries one request and the request's clock can start at the accept:
 * libmicrohttpd's NOTIFY_CONNECTION callback (STARTED) appends the
 * connection to a list, and the request leaves the list once it has arrived
 * whole (conns_request_complete, from the access handler's last call,
 * before any store work). Handling and the reply are not timed: they are
 * ours, not the client's. All connections share one timeout, so the list
 * is in deadline order and a watchdog thread needs to look at its head only:
 * a connection past its deadline gets a bare 408 (no reply can have begun:
 * replies start only after the request is complete) and shutdown(), which
 * libmicrohttpd sees as the client leaving: it closes the socket, which it
 * owns, and calls back as usual.
 *
 * The watchdog runs beside libmicrohttpd's thread, so the list and each
 * entry's state are under one mutex. libmicrohttpd calls CLOSED before it
 * closes the socket, and CLOSED takes the mutex, so the watchdog never
 * shuts down a descriptor number that has been closed and reused. */
#include "conns.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

enum { ARRIVING, COMPLETE, CUT };

typedef struct conn {
  struct conn *prev, *next; /* in the list while ARRIVING, oldest first */
  int fd;
  int state;
  int64_t started_ms; /* the accept */
} conn;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake; /* on CLOCK_MONOTONIC: stop */
static pthread_t watchdog;
static conn *head, *tail;
static int64_t timeout_ms;
static int running;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Takes c out of the list. Called with mu held, c ARRIVING. */
static void unlink_conn(conn *c) {
  if (c->prev) c->prev->next = c->next;
  else head = c->next;
  if (c->next) c->next->prev = c->prev;
  else tail = c->prev;
  c->prev = c->next = NULL;
}

/* Ends a late request: 408, then shutdown. Called with mu held. */
static void cut(conn *c) {
  static const char reply[] = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                              "Content-Length: 0\r\n\r\n";
  unlink_conn(c);
  c->state = CUT;
  /* Best effort: the socket is non-blocking and its send buffer empty. */
  if (send(c->fd, reply, sizeof reply - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
  }
  shutdown(c->fd, SHUT_RDWR);
}

static void *watch(void *arg) {
  (void)arg;
  int64_t cuts = 0, logged_ms = 0;
  pthread_mutex_lock(&mu);
  while (running) {
    int64_t now = now_ms();
    while (head != NULL && head->started_ms + timeout_ms <= now) cut(head), cuts++;
    if (cuts > 0 && now - logged_ms >= 1000) { /* one line a second at most */
      fprintf(stderr,
              "fenced-kv: closed %lld connection(s) whose request did not arrive whole within "
              "%lld ms (--request-timeout-ms)\n",
              (long long)cuts, (long long)timeout_ms);
      cuts = 0;
      logged_ms = now;
    }
    /* Until the head's deadline; a connection accepted later has a later one. */
    int64_t wait = head ? head->started_ms + timeout_ms - now : timeout_ms;
    if (cuts > 0 && wait > 1000) wait = 1000; /* to log the rest */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + (wait % 1000) * 1000000;
    ts.tv_sec += wait / 1000 + ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&wake, &mu, &ts);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

int conns_start(int64_t ms) {
  pthread_condattr_t ca;
  timeout_ms = ms;
  running = 1;
  if (pthread_condattr_init(&ca) != 0) return -1;
  int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                   pthread_cond_init(&wake, &ca) == 0 &&
                   pthread_create(&watchdog, NULL, watch, NULL) == 0
               ? 0
               : -1;
  pthread_condattr_destroy(&ca);
  return rc;
}

void conns_stop(void) {
  pthread_mutex_lock(&mu);
  running = 0;
  pthread_cond_signal(&wake);
  pthread_mutex_unlock(&mu);
  pthread_join(watchdog, NULL);
}

void conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                  enum MHD_ConnectionNotificationCode code) {
  (void)cls;
  conn *c = *socket_context;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    /* Without memory the connection goes untimed; the cap still bounds it. */
    if (fd == NULL || (c = calloc(1, sizeof *c)) == NULL) return;
    c->fd = fd->connect_fd;
    c->state = ARRIVING;
    pthread_mutex_lock(&mu);
    c->started_ms = now_ms();
    c->prev = tail;
    if (tail) tail->next = c;
    else head = c;
    tail = c;
    pthread_mutex_unlock(&mu);
    *socket_context = c;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && c != NULL) {
    pthread_mutex_lock(&mu);
    if (c->state == ARRIVING) unlink_conn(c);
    pthread_mutex_unlock(&mu);
    free(c);
    *socket_context = NULL;
  }
}

int conns_request_complete(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn *c = info ? info->socket_context : NULL;
  if (c == NULL) return 1;
  pthread_mutex_lock(&mu);
  int go_on = c->state != CUT;
  if (c->state == ARRIVING) unlink_conn(c);
  if (go_on) c->state = COMPLETE;
  pthread_mutex_unlock(&mu);
  return go_on;
}
