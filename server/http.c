/* http.c: libmicrohttpd wiring: the daemon and its worker thread pool,
 * request bodies (bounded), suspend/resume for waiting acquires, and
 * sending api_response values. It knows nothing of locks: api.c decides
 * every reply, wait.c decides when a waiter runs again.
 *
 * Per request libmicrohttpd calls on_request several times: first with no
 * state (we allocate it), then once per body chunk, then with no data (we
 * handle it). A lock call sent through the Redis pipeline suspends the
 * connection until the pipeline thread has the reply, and re-enters
 * on_request to answer. A waiting acquire is suspended after its first
 * attempt and re-enters on_request each time wait.c resumes it. */
#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>

#include "api.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "wait.h"

typedef struct {
  api_call call;
  waiter w;
  int waiting;          /* parked in wait.c at least once */
  int piped;            /* its store call is with the pipeline */
  int replied;          /* a response was queued */
  int handling;         /* counted in `handling` */
  char *body;
  size_t len, cap;
  int too_large;
  int64_t t0_ms;
} http_req;

static struct MHD_Daemon *daemon_;
static MHD_socket quiesced = MHD_INVALID_SOCKET; /* closed after the stop */
static const config *cfg;
static atomic_long inflight;
static atomic_long connections; /* open client connections */
/* Requests between "complete" and "reply queued": the ones that may call
 * Redis now. Unlike `inflight`, it leaves out parked waiters and replies
 * still being sent, so a lone client's next request never sees its last
 * one as company. */
static atomic_long handling;

static void handling_set(http_req *r, int on) {
  if (r->handling == on) return;
  r->handling = on;
  atomic_fetch_add(&handling, on ? 1 : -1);
}

long http_inflight(void) { return atomic_load(&inflight); }

void http_resume(void *conn) { MHD_resume_connection(conn); }

/* Keep paths exactly as sent: a lock name must never be decoded into
 * something else ('%2F' into '/', '%00' into an end of string). */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s) { return strlen(s); }

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  LOG(LOG_DEBUG, "libmicrohttpd: %s", msg);
}

static int append_body(http_req *r, const char *data, size_t n) {
  if (r->too_large || r->len + n > PICKET_PROTO_BODY_MAX) {
    r->too_large = 1; /* keep reading, and drop it: the reply is 413 */
    return 0;
  }
  if (r->len + n > r->cap) {
    size_t cap = r->cap ? r->cap : 256;
    while (cap < r->len + n) cap *= 2;
    if (cap > PICKET_PROTO_BODY_MAX) cap = PICKET_PROTO_BODY_MAX;
    char *nb = realloc(r->body, cap);
    if (nb == NULL) return -1;
    r->body = nb;
    r->cap = cap;
  }
  memcpy(r->body + r->len, data, n);
  r->len += n;
  return 0;
}

static enum MHD_Result send_response(struct MHD_Connection *conn, http_req *r, api_response *resp) {
  struct MHD_Response *m =
      MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
  if (m == NULL) {
    api_response_free(resp);
    return MHD_NO;
  }
  resp->body = NULL; /* libmicrohttpd owns it now */
  MHD_add_response_header(m, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
  if (resp->allow) MHD_add_response_header(m, MHD_HTTP_HEADER_ALLOW, resp->allow);
  if (resp->retry_after[0]) MHD_add_response_header(m, MHD_HTTP_HEADER_RETRY_AFTER, resp->retry_after);
  enum MHD_Result ok = MHD_queue_response(conn, (unsigned)resp->status, m);
  MHD_destroy_response(m);
  if (ok == MHD_YES) r->replied = 1;
  metrics_request(resp->endpoint, resp->status);
  if (!r->waiting) metrics_observe(H_REQUEST, (double)(api_now_ms() - r->t0_ms) / 1000.0);
  return ok;
}

/* 1 when the peer has closed or reset the connection. */
static int client_gone(int fd) {
  if (fd < 0) return 0;
  struct pollfd p = {.fd = fd, .events = POLLRDHUP};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Parks a waiting acquire and suspends its connection. */
static enum MHD_Result park(struct MHD_Connection *conn, http_req *r) {
  if (!r->waiting) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->w.conn = conn;
    r->w.fd = ci ? ci->connect_fd : -1;
    r->w.call = &r->call;
    picket_proto_err err;
    if (wait_park(&r->w, &err) < 0) {
      api_response resp = {0};
      api_error(&resp, err, NULL);
      resp.endpoint = EP_ACQUIRE;
      metrics_inc(M_ACQUIRE_ERROR);
      return send_response(conn, r, &resp);
    }
    r->waiting = 1;
  } else {
    wait_repark(&r->w);
  }
  MHD_suspend_connection(conn);
  wait_suspended(&r->w);
  return MHD_YES;
}

/* A resumed waiter: act on why it was woken. */
static enum MHD_Result resumed(struct MHD_Connection *conn, http_req *r) {
  api_response resp = {0};
  resp.endpoint = EP_ACQUIRE;
  switch (r->w.wake) {
    case WAKE_RETRY:
      if (client_gone(r->w.fd)) {
        /* Never grant to a client that is gone: the lock would sit held
         * for a whole TTL with nobody to use or release it. */
        wait_count_disconnect();
        wait_leave(&r->w, 0);
        return MHD_NO;
      }
      if (api_retry_acquire(&r->call, &resp) == API_WAIT) return park(conn, r);
      wait_leave(&r->w, api_granted(&r->call));
      return send_response(conn, r, &resp);
    case WAKE_TIMEOUT:
      wait_leave(&r->w, 0);
      api_wait_expired(&r->call, &resp);
      return send_response(conn, r, &resp);
    case WAKE_SHUTDOWN:
      wait_leave(&r->w, 0);
      metrics_inc(M_ACQUIRE_ERROR);
      api_error(&resp, PICKET_PROTO_ERR_SHUTTING_DOWN, "picketd is shutting down; retry elsewhere");
      return send_response(conn, r, &resp);
    case WAKE_DISCONNECT:
    default:
      wait_leave(&r->w, 0);
      return MHD_NO;
  }
}

/* libmicrohttpd 0.9.75 hands the request target over as a C string, so a
 * raw NUL in it would cut the path short: "/v1/locks/a/acquire\0junk"
 * would grant lock "a", and a proxy that routes by path would disagree
 * with us about the lock. In its request-line buffer the version follows
 * the target at once (url + strlen(url) + 1 == version) unless the target
 * held a '?' (cut there, arguments follow) or a NUL. A gap without query
 * arguments is a NUL. If the layout is not the one expected (another
 * libmicrohttpd), no request is refused for it. */
static int target_has_nul(struct MHD_Connection *conn, const char *url, const char *version) {
  size_t n = strlen(url);
  if (version <= url + n + 1 || version > url + n + 1 + 65536) return 0;
  return MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, NULL, NULL) == 0;
}

/* Whether a lock call goes through the Redis pipeline. It pays when other
 * calls can share its round trip; a lone client is served faster on the
 * worker's own connection (one thread hop less: about 30% more ops/s at
 * one connection). Other requests being handled say there is company; so
 * do more open connections than worker threads, because a worker serves
 * its connections one request at a time and its requests alone never
 * overlap (with --threads 1, only one is ever being handled). */
static int use_pipeline(void) {
  if (!store_pipeline_open()) return 0;
  return cfg->redis_pipeline == PIPELINE_ON || atomic_load(&handling) > 1 ||
         atomic_load(&connections) > cfg->threads;
}

static void piped_done(store_op *op);
static enum MHD_Result reply(struct MHD_Connection *conn, http_req *r, api_result res,
                             api_response *resp);

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state) {
  http_req *r = *state;
  if (r == NULL) {
    r = calloc(1, sizeof *r);
    if (r == NULL) return MHD_NO;
    r->t0_ms = api_now_ms();
    r->w.fd = -1;
    *state = r;
    atomic_fetch_add(&inflight, 1);
    metrics_gauge_add(G_INFLIGHT, 1);
    return MHD_YES;
  }
  if (*upload_size) {
    if (append_body(r, upload, *upload_size) < 0) return MHD_NO;
    *upload_size = 0;
    return MHD_YES;
  }
  if (r->replied) {
    /* Seen while the daemon stops: libmicrohttpd 0.9.75 may drop a queued
     * response and call again. Handling the request afresh would make a
     * second grant under a new lease; end it instead. */
    return MHD_NO;
  }
  api_response resp;
  if (r->piped) {
    r->piped = 0;
    return reply(conn, r, api_finish(&r->call, &resp), &resp);
  }
  if (r->waiting) return resumed(conn, r);

  api_request req = {method, url, r->body, r->len, r->too_large};
  handling_set(r, 1); /* until reply(), or the end of the request */
  if (target_has_nul(conn, url, version)) {
    handling_set(r, 0);
    memset(&resp, 0, sizeof resp);
    resp.endpoint = EP_OTHER;
    api_error(&resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, "the request target contains a NUL byte");
    return send_response(conn, r, &resp);
  }
  api_result res = api_prepare(&req, &r->call, &resp);
  if (res == API_STORE) {
    if (use_pipeline()) {
      /* Suspend first: the reply may come back before store_submit
       * returns, and resuming needs a suspended connection. */
      r->piped = 1;
      r->call.op.done = piped_done;
      r->call.op.arg = conn;
      MHD_suspend_connection(conn);
      if (store_submit(&r->call.op) < 0) { /* closed meanwhile: stopping */
        api_run_store(&r->call);
        MHD_resume_connection(conn);
      }
      return MHD_YES;
    }
    api_run_store(&r->call);
    res = api_finish(&r->call, &resp);
  }
  return reply(conn, r, res, &resp);
}

static void piped_done(store_op *op) { MHD_resume_connection(op->arg); }

/* Sends what the handler decided, or parks a waiting acquire. */
static enum MHD_Result reply(struct MHD_Connection *conn, http_req *r, api_result res,
                             api_response *resp) {
  handling_set(r, 0);
  if (res == API_WAIT) return park(conn, r);
  if (api_granted(&r->call)) {
    /* A client that gave up (its timeout, while picketd was paused or Redis
     * slow) has closed its side, yet the reply would still "send" into the
     * half-closed socket. Close instead: on_completed gives the lock back. */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci && client_gone(ci->connect_fd)) {
      api_response_free(resp);
      return MHD_NO;
    }
  }
  return send_response(conn, r, resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode toe) {
  http_req *r = *state;
  if (r == NULL) return;
  handling_set(r, 0); /* a piped call whose client left while suspended */
  if (r->waiting) wait_leave(&r->w, api_granted(&r->call));
  if (api_granted(&r->call) && toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN && r->replied) {
    /* The daemon stopped with the reply queued: it may have reached the
     * client, which then holds the lock. Giving it back could make two
     * holders; leaving it costs its TTL at most. */
    char lease_log[16];
    LOG(LOG_INFO, "grant of %s (lease %s) may have been delivered as picketd stopped; "
        "left to expire", r->call.name, log_lease(r->call.lease, lease_log));
  } else if (api_granted(&r->call) && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    /* The grant never reached its client: give the lock back now rather
     * than leave it held for a whole TTL by nobody. */
    store_result sr = {0};
    store_release(r->call.name, r->call.lease, &sr);
    char lease_log[16];
    LOG(LOG_INFO, "grant of %s (lease %s) was not delivered; released it", r->call.name,
        log_lease(r->call.lease, lease_log));
  }
  free(r->body);
  free(r);
  *state = NULL;
  atomic_fetch_sub(&inflight, 1);
  metrics_gauge_add(G_INFLIGHT, -1);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  atomic_fetch_add(&connections, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

int http_start(const config *c, int *port) {
  cfg = c;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
  struct addrinfo *ai = NULL;
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", cfg->listen_port);
  int rc = getaddrinfo(cfg->listen_host, portstr, &hints, &ai);
  if (rc != 0 || ai == NULL) {
    LOG(LOG_ERROR, "--listen %s: %s", cfg->listen, gai_strerror(rc));
    return -1;
  }
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                   MHD_USE_ERROR_LOG;
  if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  daemon_ = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, NULL,
      MHD_OPTION_SOCK_ADDR, ai->ai_addr,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->conn_timeout_s,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
      MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
      MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
      /* Per-connection pool for the request line, headers and reply
       * headers (bodies live in http_req): 16 KiB instead of the default
       * 32 halves the memory of idle keep-alive connections. */
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
      MHD_OPTION_END);
  freeaddrinfo(ai);
  if (daemon_ == NULL) {
    LOG(LOG_ERROR, "cannot listen on %s (in use, or not a local address?)", cfg->listen);
    return -1;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  *port = di ? di->port : cfg->listen_port;
  return 0;
}

void http_quiesce(void) {
  /* libmicrohttpd's worker threads drop the listen socket from their epoll
   * sets a little later: closing it now could make one of them fail (and
   * abort), so it is closed after MHD_stop_daemon. */
  if (daemon_ && quiesced == MHD_INVALID_SOCKET) quiesced = MHD_quiesce_daemon(daemon_);
}

void http_stop(void) {
  if (daemon_) MHD_stop_daemon(daemon_);
  daemon_ = NULL;
  if (quiesced != MHD_INVALID_SOCKET) close(quiesced);
  quiesced = MHD_INVALID_SOCKET;
}
