/* http.c: libmicrohttpd wiring: the daemons, request bodies (bounded),
 * suspend/resume for pipelined calls and waiting acquires, and sending
 * api_response values. It knows nothing of locks: api.c decides every
 * reply, wait.c decides when a waiter runs again, and the event loops that
 * run the daemons are loop.c's.
 *
 * picketd runs --threads event loops. Each runs one libmicrohttpd daemon
 * in external epoll mode (all of them accept on one listen socket, as
 * libmicrohttpd's own thread pool does); a pass of a loop lets it run
 * once (loop.h says what else a pass does).
 *
 * Per request libmicrohttpd calls on_request several times: first with no
 * state (we allocate it), then once per body chunk, then with no data (we
 * handle it). A piped store call suspends the connection until its reply
 * is in, and re-enters on_request to answer. A waiting acquire is
 * suspended after its first attempt and re-enters on_request each time
 * wait.c resumes it.
 *
 * conns.c keeps the limits on connections that libmicrohttpd lacks (a
 * deadline for each request, a cap per client address); this file only
 * tells it what happens to a connection and its requests. */
#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>

#include "api.h"
#include "api_json.h"
#include "call.h"
#include "conns.h"
#include "events.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "routes.h"
#include "tls.h"
#include "wait.h"

typedef struct http_loop http_loop;

/* What a request does once its writer's mark is out (http_req.forgetting). */
enum { FORGET_THEN_REPLY = 1, FORGET_THEN_CLOSE = 2 };

typedef struct http_req {
  api_call call;
  http_loop *loop;      /* the loop that serves its connection */
  struct MHD_Connection *conn;
  conns_client *sock;   /* its connection's state in conns.c, or NULL */
  loop_resume resume;   /* in its loop's resume queue, while queued */
  struct http_req *spare_next;  /* in loop->spare, once ended */
  waiter w;
  events_sub *stream;   /* an event stream's (API_STREAM), until the request ends */
  int waiting;          /* parked in wait.c at least once */
  int piped;            /* its store call is with the runner (call.c) */
  int forgetting;       /* ...and it takes a writer's mark out before... */
  api_response held;    /* ...this reply is sent (FORGET_THEN_REPLY), or before
                           the waiter leaves and the connection closes */
  int replied;          /* a response was queued */
  char *body;
  size_t len, cap;
  int too_large;
  int64_t t0_ms;
  int seen;             /* on_request has been called for it */
  int refused;          /* answered 400 for its framing: its body is ignored */
  const char *target;   /* the request target as uri_logged saw it... */
  size_t target_len;    /* ...and its length up to the first NUL */
} http_req;

/* One event loop's daemon, and what this file keeps per loop. */
struct http_loop {
  struct MHD_Daemon *d;
  loop *ev;             /* its event loop (loop.c) */
  MHD_socket quiesced;  /* the listen socket after quiesce: closed after the stop */
  http_req *spare;      /* ended requests kept for reuse (this loop's thread only)... */
  int nspare;           /* ...and how many */
};

static http_loop *loops;
static int nloops;
static __thread http_loop *cur; /* the loop running on this thread */
static atomic_int quiesce_req;
static atomic_long piped_waiting; /* piped calls not yet done, all loops */
static const config *cfg;
static atomic_long inflight;
static atomic_long connections; /* open client connections */

long http_inflight(void) { return atomic_load(&inflight); }

/* wait.c's and events.c's resume function (it may run on any thread):
 * the connection is resumed by its own loop, which an eventfd wakes.
 * libmicrohttpd would accept a resume from another thread, but a loop in
 * external mode can miss it and sleep on until its next event. */
void http_resume(void *arg) {
  http_req *r = arg;
  if (r->loop == NULL) { /* a request met while the daemons stop, on no loop */
    MHD_resume_connection(r->conn);
    return;
  }
  loop_resume_soon(r->loop->ev, &r->resume);
}

int http_revoked(void *arg) {
  http_req *r = arg;
  return conns_revoked(r->sock);
}

/* The loop's resume hook: on the loop's thread. */
static void resume_now(loop_resume *item) {
  http_req *r = (http_req *)((char *)item - offsetof(http_req, resume));
  MHD_resume_connection(r->conn);
}

/* Keep paths exactly as sent: api.c splits a path into segments first and
 * only then percent-decodes the name segment, once. MHD's own unescaping
 * would decode before the split, turning '%2F' into a segment boundary and
 * '%00' into an end of string. */
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

/* api_request.query_arg: libmicrohttpd has decoded the query. */
static const char *query_arg(void *conn, const char *key) {
  return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

/* A request header's value, or NULL (the first one when sent twice). */
static const char *header(struct MHD_Connection *conn, const char *name) {
  return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static void piped_done(store_op *op);
static enum MHD_Result store_done(struct MHD_Connection *conn, http_req *r);

/* Runs the request's store call (call->op) through the runner: done on
 * the spot when the loop has nothing else to do (call_now), and then the
 * request goes on here; else the connection is suspended until
 * piped_done resumes it. */
static enum MHD_Result submit(struct MHD_Connection *conn, http_req *r) {
  r->call.op.done = piped_done;
  r->call.op.arg = r;
  call_now_result now = call_now(&r->call.op);
  if (now == CALL_DONE_NOW) return store_done(conn, r);
  r->piped = 1;
  atomic_fetch_add(&piped_waiting, 1);
  MHD_suspend_connection(conn);
  /* done comes from a later pass of this loop */
  if (now == CALL_NOT_TRIED) call_submit(&r->call.op);
  return MHD_YES;
}

static enum MHD_Result send_response(struct MHD_Connection *conn, http_req *r, api_response *resp) {
  /* Before the reply, a waiting writer's mark is taken out (a client that
   * reads the reply may act on it at once): the reply waits in r->held
   * for that store call. */
  if (api_wait_left_call(&r->call)) {
    if (loop_current() != NULL) {
      r->held = *resp;
      r->forgetting = FORGET_THEN_REPLY;
      return submit(conn, r);
    }
    api_run_store(&r->call); /* off a loop: here and now */
  }
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
  if (resp->www_authenticate)
    MHD_add_response_header(m, MHD_HTTP_HEADER_WWW_AUTHENTICATE, resp->www_authenticate);
  for (const char *const *h = resp->extra_headers; h && h[0] && h[1]; h += 2)
    MHD_add_response_header(m, h[0], h[1]);
  if (resp->close) MHD_add_response_header(m, MHD_HTTP_HEADER_CONNECTION, "close");
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

/* The answer to a request on a connection whose token a reload removed. */
#define REVOKED_MSG "this connection's token was removed from --auth-file; the connection is closed"
#define REVOKED_CHALLENGE "Bearer realm=\"picket\", error=\"invalid_token\""

/* Parks a waiting acquire and suspends its connection. */
static enum MHD_Result park(struct MHD_Connection *conn, http_req *r) {
  if (!r->waiting) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->w.conn = r;
    r->w.fd = ci ? ci->connect_fd : -1;
    r->w.call = &r->call;
    picket_proto_err err;
    if (wait_park(&r->w, &err) < 0) {
      api_response resp = {0};
      api_error(&resp, err, NULL);
      resp.endpoint = r->call.endpoint;
      metrics_inc(M_ACQUIRE_ERROR);
      return send_response(conn, r, &resp);
    }
    r->waiting = 1;
    conns_waiting(r->sock, 1);
  } else {
    wait_repark(&r->w);
  }
  MHD_suspend_connection(conn);
  wait_suspended(&r->w);
  return MHD_YES;
}

/* The waiter leaves its queue for good; a read/write lock's writer that
 * did not get the lock also stops keeping new readers out. */
static void leave_wait(http_req *r, int granted) {
  conns_waiting(r->sock, 0);
  wait_leave(&r->w, granted);
  api_wait_over(&r->call);
  /* (its mark: before the reply, send_response; with none, on_completed) */
}

static enum MHD_Result go_on(struct MHD_Connection *conn, http_req *r, api_result res,
                             api_response *resp);

/* A waiter whose client left: its writer's mark is taken out before it
 * leaves its queue (whoever sees the queue empty may read at once), then
 * the connection closes (on_request, back from the runner). */
static enum MHD_Result gone(struct MHD_Connection *conn, http_req *r) {
  if (api_wait_left_call(&r->call)) {
    if (loop_current() != NULL) {
      r->forgetting = FORGET_THEN_CLOSE;
      return submit(conn, r);
    }
    api_run_store(&r->call); /* off a loop: here and now */
  }
  leave_wait(r, 0);
  return MHD_NO;
}

/* A resumed waiter: act on why it was woken. */
static enum MHD_Result resumed(struct MHD_Connection *conn, http_req *r) {
  api_response resp = {0};
  resp.endpoint = r->call.endpoint;
  if (conns_revoked(r->sock)) {
    /* Its token was removed (SIGHUP): whatever woke it (the socket shut
     * down for reading looks like a client that left), it gets no grant,
     * a 401 and the close. */
    leave_wait(r, 0);
    metrics_inc(M_ACQUIRE_ERROR);
    resp.close = 1;
    resp.www_authenticate = REVOKED_CHALLENGE;
    api_error(&resp, PICKET_PROTO_ERR_UNAUTHENTICATED, REVOKED_MSG);
    return send_response(conn, r, &resp);
  }
  switch (r->w.wake) {
    case WAKE_RETRY:
      if (client_gone(r->w.fd)) {
        /* Never grant to a client that is gone: the lock would sit held
         * for a whole TTL with nobody to use or release it. */
        wait_count_disconnect();
        return gone(conn, r);
      }
      return go_on(conn, r, api_retry_acquire(&r->call), &resp);
    case WAKE_TIMEOUT:
      leave_wait(r, 0);
      api_wait_expired(&r->call, &resp);
      return send_response(conn, r, &resp);
    case WAKE_SHUTDOWN:
      leave_wait(r, 0);
      metrics_inc(M_ACQUIRE_ERROR);
      api_error(&resp, PICKET_PROTO_ERR_SHUTTING_DOWN, "picketd is shutting down; retry elsewhere");
      return send_response(conn, r, &resp);
    case WAKE_DISCONNECT:
    default:
      return gone(conn, r);
  }
}

/* libmicrohttpd 0.9.75 hands the request target over as a C string, so a
 * raw NUL in it would cut the path short: "/v1/locks/a/acquire\0junk"
 * would grant lock "a", and a proxy that routes by path would disagree
 * with us about the lock. The URI log callback sees the whole target
 * before libmicrohttpd splits off the query, and in its request-line
 * buffer the version follows the target at once; so the target had a NUL
 * when what the log callback measured (up to the first NUL) is shorter
 * than the space between target and version. That holds with a query or
 * without (the check once counted parsed query arguments, and
 * "acquire\0?x" slipped through). If the layout is not the one expected
 * (another libmicrohttpd), no request is refused for it. */
static int target_has_nul(const http_req *r, const char *url, const char *version) {
  if (r->target != url || version <= url) return 0;
  size_t raw = (size_t)(version - url - 1); /* the target, less the NUL that ended it */
  return raw > r->target_len && raw <= r->target_len + 65536;
}

/* A connection's state in conns.c (its socket context). */
static conns_client *sock_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* Ended requests a loop keeps for its next ones. An http_req is 2.5 KiB
 * (the api_call's names, owner and store result): calloc and free of it
 * per request went through glibc's large-chunk path (malloc_consolidate
 * each time), and its body buffer was allocated afresh too. Bounded, so a
 * burst of connections does not pin memory for good. */
#define SPARE_MAX 64

static http_req *req_new(struct MHD_Connection *conn) {
  http_req *r;
  if (cur && cur->spare) {
    r = cur->spare;
    cur->spare = r->spare_next;
    cur->nspare--;
    char *body = r->body; /* its buffer (at most 1 KiB) is kept, emptied */
    size_t cap = r->cap;
    memset(r, 0, sizeof *r);
    r->body = body, r->cap = cap;
  } else if ((r = calloc(1, sizeof *r)) == NULL) {
    return NULL;
  }
  r->t0_ms = api_now_ms();
  r->w.fd = -1;
  r->loop = cur;
  r->conn = conn;
  r->sock = sock_of(conn);
  atomic_fetch_add(&inflight, 1);
  metrics_gauge_add(G_INFLIGHT, 1);
  return r;
}

/* libmicrohttpd's URI log callback: the first sight of a request, with
 * its target whole. Its return value is the request's state. */
static void *uri_logged(void *cls, const char *uri, struct MHD_Connection *conn) {
  /* A pipelined request already in libmicrohttpd's buffer woke no epoll
   * set: its deadline starts here, if no byte started it already. */
  conns_request_started(sock_of(conn));
  http_req *r = req_new(conn);
  if (r) {
    r->target = uri;
    r->target_len = strlen(uri);
  }
  return r;
}

/* Request framing that two HTTP parsers could read two ways (RFC 9112
 * 6.3: a sender must not, a server must reject and close). libmicrohttpd
 * 0.9.75 accepts them and picks one reading; a proxy in front may pick the
 * other, and a request hidden in the body then runs here (issue 17: a
 * hidden acquire of another lock was granted). Refused with 400: two
 * Content-Length headers; a header name with a space or a control byte
 * ("Content-Length : 5" is not Content-Length to libmicrohttpd); a header
 * value with a control byte other than tab; a header section whose lines
 * are not each ended by CRLF, or that holds a NUL byte or a folded line;
 * and a Transfer-Encoding whose final coding is not chunked (RFC 9112 6.3
 * says 400 and close for that one).
 *
 * Every other request that carries Transfer-Encoding is refused too, with
 * 411 length_required (RFC 9112 6.3 lets a server refuse a body without
 * Content-Length so): libmicrohttpd parses chunk lines itself, a bare LF
 * as CRLF, and passes on only the data, so chunk framing is the one
 * framing picketd could never check, and a proxy that reads "2\n{}..."
 * otherwise would see another request than we do. Nothing needs chunked
 * bodies: ours are a few hundred bytes of JSON and every client of ours
 * sends Content-Length. Content-Length together with Transfer-Encoding is
 * 411 too (the body is not read either way, and the connection is closed).
 *
 * That last check reads libmicrohttpd's read buffer. 0.9.75 hands a value
 * over cut at its first NUL (its size is strlen's), and ends a line at a
 * bare LF as at CRLF (get_next_header_line accepts both), so neither shows
 * in the values: "Content-Length: 5\0..." is 5 here and something else to
 * a proxy. But the header lines stay where they were read, in order, one
 * after the other, with CR and LF overwritten by NUL (the read buffer
 * grows in place; header records come from the pool's other end). So
 * after a value of size n, an honest line has exactly two NULs (its CR and
 * LF) and then the next header's name; and after the last one, two more
 * (the empty line). A NUL inside the value, a bare LF, or a folded line
 * (libmicrohttpd copies it elsewhere) breaks that chain. Every request the
 * suites send passes through this check, so a libmicrohttpd that laid its
 * buffer out otherwise would fail them all at once, not quietly. */
typedef struct {
  int content_length, transfer_encoding, bad;
  const char *why;
  const char *next; /* where the next header's name must start (NULL: anywhere) */
  const char *te;   /* the last Transfer-Encoding value... */
  size_t te_size;   /* ...and its size */
} framing;

static const char lines_why[] =
    "a header line not ended by CRLF, or with a NUL byte, or folded onto the next";

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size) {
  framing *f = cls;
  if (kind != MHD_HEADER_KIND || value == NULL) return MHD_YES;
  if ((f->next && key != f->next) || value[value_size] != '\0' || value[value_size + 1] != '\0') {
    f->bad = 1, f->why = lines_why;
    return MHD_NO;
  }
  f->next = value + value_size + 2;
  for (size_t i = 0; i < key_size; i++) {
    unsigned char c = (unsigned char)key[i];
    if (c <= ' ' || c == 0x7f) {
      f->bad = 1, f->why = "a header name with a space or a control byte";
      return MHD_NO;
    }
  }
  for (size_t i = 0; value && i < value_size; i++) {
    unsigned char c = (unsigned char)value[i];
    if ((c < ' ' && c != '\t') || c == 0x7f) {
      f->bad = 1, f->why = "a header value with a control byte";
      return MHD_NO;
    }
  }
  if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) f->content_length++;
  if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
    f->transfer_encoding++;
    f->te = value, f->te_size = value_size;
  }
  return MHD_YES;
}

/* 1 when the last coding of a Transfer-Encoding value is "chunked"
 * ("gzip, chunked" is; "chunked, gzip" and "" are not). */
static int te_ends_chunked(const char *v, size_t n) {
  size_t start = n;
  while (start > 0 && v[start - 1] != ',') start--;
  while (start < n && (v[start] == ' ' || v[start] == '\t')) start++;
  while (n > start && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  return n - start == 7 && strncasecmp(v + start, "chunked", 7) == 0;
}

/* What framing_refused found. */
enum { FRAMING_OK, FRAMING_AMBIGUOUS, FRAMING_NO_LENGTH };

/* FRAMING_OK when the request's framing is unambiguous and by
 * Content-Length (or there is no body); FRAMING_AMBIGUOUS (400) with *why
 * set; FRAMING_NO_LENGTH (411) when it carries Transfer-Encoding. */
static int framing_refused(struct MHD_Connection *conn, const char *version, const char **why) {
  framing f = {0};
  *why = lines_why;
  /* the request line ends with its version, then CR LF (both NUL now) */
  size_t vlen = version ? strlen(version) : 0;
  if (vlen && version[vlen + 1] == '\0') f.next = version + vlen + 2;
  else if (vlen) return FRAMING_AMBIGUOUS; /* the request line ended by a bare LF */
  MHD_get_connection_values_n(conn, MHD_HEADER_KIND, framing_header, &f);
  if (f.bad) {
    *why = f.why;
    return FRAMING_AMBIGUOUS;
  }
  /* the empty line after the headers: CR LF */
  if (f.next && (f.next[0] != '\0' || f.next[1] != '\0')) return FRAMING_AMBIGUOUS;
  if (f.transfer_encoding) {
    if (te_ends_chunked(f.te, f.te_size)) return FRAMING_NO_LENGTH;
    *why = "a Transfer-Encoding whose final coding is not chunked";
    return FRAMING_AMBIGUOUS;
  }
  if (f.content_length > 1) {
    *why = "more than one Content-Length";
    return FRAMING_AMBIGUOUS;
  }
  return FRAMING_OK;
}

/* Answers err and closes: nothing after the headers is read. challenge:
 * the WWW-Authenticate of a 401 (NULL otherwise). */
static enum MHD_Result refuse_as(struct MHD_Connection *conn, http_req *r, picket_proto_err err,
                                 const char *msg, const char *challenge) {
  api_response resp = {0};
  resp.endpoint = EP_OTHER;
  resp.close = 1;
  resp.www_authenticate = challenge;
  api_error(&resp, err, msg);
  r->refused = 1;
  return send_response(conn, r, &resp);
}

/* Answers 400 and closes: nothing after the headers can be trusted. */
static enum MHD_Result refuse(struct MHD_Connection *conn, http_req *r, const char *why) {
  char msg[160];
  snprintf(msg, sizeof msg, "ambiguous request framing: %s", why);
  return refuse_as(conn, r, PICKET_PROTO_ERR_INVALID_ARGUMENT, msg, NULL);
}

static enum MHD_Result reply(struct MHD_Connection *conn, http_req *r, api_result res,
                             api_response *resp);

/* Goes on with a request after api.c's answer: API_STORE hands the
 * request's store call to the runner (call.c) and suspends the connection
 * until piped_done resumes it, when on_request calls api_finish and comes
 * back here; anything else is the reply, or a wait. Off a loop (picketd
 * stopping) the runner makes the call here and now. */
static enum MHD_Result go_on(struct MHD_Connection *conn, http_req *r, api_result res,
                             api_response *resp) {
  while (res == API_STORE) {
    if (loop_current() != NULL) return submit(conn, r);
    api_run_store(&r->call);
    res = api_finish(&r->call, resp);
  }
  if (r->waiting && res != API_WAIT) leave_wait(r, api_granted(&r->call));
  return reply(conn, r, res, resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state) {
  http_req *r = *state;
  if (r == NULL && (r = req_new(conn)) == NULL) return MHD_NO; /* uri_logged ran out of memory */
  *state = r;
  if (!r->seen) { /* the first call: headers are in, the body (if any) follows */
    r->seen = 1;
    const char *why = tls_peer_refused(conn); /* mutual TLS: 401 on every path */
    if (why) return refuse_as(conn, r, PICKET_PROTO_ERR_UNAUTHENTICATED, why, TLS_CHALLENGE);
    if (conns_revoked(r->sock)) /* a request that came before its connection closed */
      return refuse_as(conn, r, PICKET_PROTO_ERR_UNAUTHENTICATED, REVOKED_MSG, REVOKED_CHALLENGE);
    switch (framing_refused(conn, version, &why)) {
      case FRAMING_AMBIGUOUS:
        return refuse(conn, r, why);
      case FRAMING_NO_LENGTH:
        return refuse_as(conn, r, PICKET_PROTO_ERR_LENGTH_REQUIRED,
                         "picketd reads a request body by its Content-Length only: send "
                         "Content-Length instead of Transfer-Encoding",
                         NULL);
      default:
        return MHD_YES;
    }
  }
  if (r->refused) { /* libmicrohttpd may still pass the body on: drop it */
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size) {
    if (append_body(r, upload, *upload_size) < 0) return MHD_NO;
    *upload_size = 0;
    return MHD_YES;
  }
  conns_request_complete(r->sock); /* all in: what follows is ours to finish */
  if (r->replied) {
    /* Seen while the daemon stops: libmicrohttpd 0.9.75 may drop a queued
     * response and call again. Handling the request afresh would make a
     * second grant under a new lease; end it instead. */
    return MHD_NO;
  }
  if (r->piped) { /* its store call is done (piped_done) */
    r->piped = 0;
    return store_done(conn, r);
  }
  if (r->waiting) return resumed(conn, r);

  api_response resp;
  /* With --loopback-trust off, a loopback client is an address like any
   * other: behind a reverse proxy on this host every client is loopback. */
  api_request req = {
      .method = method, .path = url, .body = r->body, .body_len = r->len,
      .body_too_large = r->too_large, .authorization = header(conn, MHD_HTTP_HEADER_AUTHORIZATION),
      .peer = conns_peer(r->sock),
      .peer_loopback = conns_peer_loopback(r->sock) && cfg->loopback_trust,
      .query_arg = query_arg, .query_ctx = conn,
      .host = header(conn, MHD_HTTP_HEADER_HOST), .origin = header(conn, "Origin"),
      .sec_fetch_site = header(conn, "Sec-Fetch-Site"),
      .content_type = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE), .conn = r->sock};
  if (target_has_nul(r, url, version)) {
    memset(&resp, 0, sizeof resp);
    resp.endpoint = EP_OTHER;
    api_error(&resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, "the request target contains a NUL byte");
    return send_response(conn, r, &resp);
  }
  return go_on(conn, r, routes_prepare(&req, &r->call, &resp), &resp);
}

/* The request's store call is done (on the spot, or piped_done resumed
 * the connection): what it was for comes next. */
static enum MHD_Result store_done(struct MHD_Connection *conn, http_req *r) {
  api_response resp;
  if (r->forgetting == FORGET_THEN_CLOSE) { /* the mark is out: now the queue */
    r->forgetting = 0;
    leave_wait(r, 0);
    return MHD_NO;
  }
  if (r->forgetting) { /* the mark is out: now the reply */
    r->forgetting = 0;
    resp = r->held;
    return send_response(conn, r, &resp);
  }
  return go_on(conn, r, api_finish(&r->call, &resp), &resp);
}

/* A piped call's reply is in (on its loop's thread): answer it. */
static void piped_done(store_op *op) {
  http_req *r = op->arg;
  atomic_fetch_sub(&piped_waiting, 1);
  MHD_resume_connection(r->conn);
}

/* libmicrohttpd's reader of an event stream's body: with nothing to
 * send, the connection is suspended until events.c resumes it (the only
 * safe moment to suspend, besides the request handler, is here). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  http_req *r = cls;
  ssize_t n = events_read(r->stream, buf, max);
  if (n == 0) MHD_suspend_connection(r->conn);
  return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

/* Starts an event stream's response (API_STREAM). */
static enum MHD_Result stream_start(struct MHD_Connection *conn, http_req *r, api_response *resp) {
  r->stream = resp->stream;
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  events_attach(r->stream, r, ci ? ci->connect_fd : -1);
  struct MHD_Response *m = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, r, NULL);
  if (m == NULL) return MHD_NO; /* on_completed closes the stream */
  MHD_add_response_header(m, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
  MHD_add_response_header(m, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(m, "X-Accel-Buffering", "no"); /* proxies: pass events on at once */
  enum MHD_Result ok = MHD_queue_response(conn, (unsigned)resp->status, m);
  MHD_destroy_response(m);
  if (ok == MHD_YES) r->replied = 1;
  metrics_request(resp->endpoint, resp->status);
  return ok;
}

/* Sends what the handler decided, or parks a waiting acquire. */
static enum MHD_Result reply(struct MHD_Connection *conn, http_req *r, api_result res,
                             api_response *resp) {
  if (res == API_WAIT) return park(conn, r);
  if (res == API_STREAM) return stream_start(conn, r, resp);
  if (api_granted(&r->call)) {
    /* A client that gave up (its timeout, while picketd was paused or the
     * store slow) has closed its side, yet the reply would still "send" into the
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
  conns_request_finished(r ? r->sock : sock_of(conn));
  if (r == NULL) return;
  events_close(r->stream);
  r->stream = NULL;
  if (r->forgetting) api_response_free(&r->held); /* its client left meanwhile */
  r->forgetting = 0;
  if (r->waiting) leave_wait(r, api_granted(&r->call));
  api_wait_left(&r->call); /* (a call that ended with no reply sent) */
  if (api_granted(&r->call) && toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN && r->replied) {
    /* The daemon stopped with the reply queued: it may have reached the
     * client, which then holds the lock. Giving it back could make two
     * holders; leaving it costs its TTL at most. */
    char lease_log[16];
    LOG(LOG_INFO, "grant of %s (lease %s) may have been delivered as picketd stopped; "
        "left to expire", r->call.name, log_lease(r->call.client_lease, lease_log));
  } else if (api_granted(&r->call) && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    /* The grant never reached its client: give the lock back now rather
     * than leave it held for a whole TTL by nobody. */
    api_undo_grant(&r->call);
  }
  api_call_end(&r->call);
  *state = NULL;
  if (cur && r->loop == cur && cur->nspare < SPARE_MAX) {
    if (r->cap > 1024) { /* an odd large body: not kept for every request */
      free(r->body);
      r->body = NULL, r->cap = 0;
    }
    r->spare_next = cur->spare;
    cur->spare = r;
    cur->nspare++;
  } else {
    free(r->body);
    free(r);
  }
  atomic_fetch_sub(&inflight, 1);
  metrics_gauge_add(G_INFLIGHT, -1);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  int started = code == MHD_CONNECTION_NOTIFY_STARTED;
  if (started) *socket_context = conns_opened(loop_conns(cur->ev), conn); /* accepted on this loop */
  else conns_closed(*socket_context);
  atomic_fetch_add(&connections, started ? 1 : -1);
  metrics_gauge_add(G_CONNECTIONS, started ? 1 : -1);
}

/* ---- the daemons in their event loops ---------------------------------- */

/* The loop's hooks (loop_hooks), on the loop's thread. */
static void on_pass(void *ctx) {
  http_loop *l = ctx;
  cur = l;
  if (atomic_load(&quiesce_req) && l->quiesced == MHD_INVALID_SOCKET)
    l->quiesced = MHD_quiesce_daemon(l->d);
}

static int64_t daemon_timeout(void *ctx) {
  http_loop *l = ctx;
  MHD_UNSIGNED_LONG_LONG mt;
  return MHD_get_timeout(l->d, &mt) == MHD_YES ? (int64_t)mt : -1;
}

static void daemon_run(void *ctx) {
  http_loop *l = ctx;
  MHD_run(l->d);
}

static const loop_hooks hooks = {on_pass, daemon_timeout, daemon_run, resume_now};

static struct MHD_Daemon *daemon_start(const struct sockaddr *addr, MHD_socket listen_fd,
                                       unsigned limit, int ipv6) {
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (ipv6) flags |= MHD_USE_IPv6;
  if (tls_enabled()) flags |= MHD_USE_TLS;
  /* The first daemon binds the address; the others share its socket. */
  struct MHD_OptionItem where[] = {
      addr ? (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)addr}
           : (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, (intptr_t)listen_fd, NULL},
      {MHD_OPTION_END, 0, NULL}};
  return MHD_start_daemon(
      flags, 0, conns_accept, NULL, on_request, NULL,
      MHD_OPTION_ARRAY, where,
      MHD_OPTION_ARRAY, tls_mhd_options(), /* only MHD_OPTION_END without TLS */
      MHD_OPTION_CONNECTION_LIMIT, limit,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->conn_timeout_s,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
      MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
      MHD_OPTION_URI_LOG_CALLBACK, uri_logged, NULL,
      MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
      /* Per-connection pool for the request line, headers and reply
       * headers (bodies live in http_req): 16 KiB instead of the default
       * 32 halves the memory of idle keep-alive connections. */
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
      MHD_OPTION_END);
}

static int http_loop_init(http_loop *l, const struct sockaddr *addr, MHD_socket listen_fd,
                          unsigned limit, int ipv6) {
  l->d = daemon_start(addr, listen_fd, limit, ipv6);
  if (l->d == NULL) return -1;
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(l->d, MHD_DAEMON_INFO_EPOLL_FD);
  if (di == NULL || (l->ev = loop_new(di->epoll_fd, &hooks, l)) == NULL) return -1;
  return 0;
}

int http_start(const config *c, int *port) {
  cfg = c;
  loop_init(cfg);
  if (conns_init(cfg) < 0) {
    LOG(LOG_ERROR, "out of memory");
    return -1;
  }
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
  /* Each loop takes its share of --max-connections, as libmicrohttpd's
   * own thread pool shares it among its threads. */
  nloops = cfg->threads < cfg->max_connections ? cfg->threads : cfg->max_connections;
  loops = calloc((size_t)nloops, sizeof *loops);
  if (loops == NULL) {
    freeaddrinfo(ai);
    LOG(LOG_ERROR, "out of memory");
    return -1;
  }
  for (int i = 0; i < nloops; i++) /* so that http_stop may clean up any of them */
    loops[i].quiesced = MHD_INVALID_SOCKET;
  int ipv6 = ai->ai_family == AF_INET6;
  MHD_socket listen_fd = MHD_INVALID_SOCKET;
  for (int i = 0; i < nloops; i++) {
    unsigned limit = (unsigned)(cfg->max_connections / nloops + (i < cfg->max_connections % nloops));
    MHD_socket fd = MHD_INVALID_SOCKET;
    if (i > 0 && (fd = dup(listen_fd)) < 0) rc = -1;
    else rc = http_loop_init(&loops[i], i == 0 ? ai->ai_addr : NULL, fd, limit, ipv6);
    if (rc < 0 && loops[i].d == NULL && fd >= 0) close(fd);
    if (rc < 0) break;
    if (i == 0) {
      const union MHD_DaemonInfo *li = MHD_get_daemon_info(loops[0].d, MHD_DAEMON_INFO_LISTEN_FD);
      listen_fd = li ? li->listen_fd : MHD_INVALID_SOCKET;
    }
  }
  freeaddrinfo(ai);
  if (rc < 0) {
    LOG(LOG_ERROR, "cannot listen on %s (in use, or not a local address?)", cfg->listen);
    http_stop();
    return -1;
  }
  for (int i = 0; i < nloops; i++) {
    if (loop_start(loops[i].ev) != 0) {
      LOG(LOG_ERROR, "cannot start the HTTP event loops");
      http_stop();
      return -1;
    }
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(loops[0].d, MHD_DAEMON_INFO_BIND_PORT);
  *port = di ? di->port : cfg->listen_port;
  return 0;
}

void http_quiesce(void) {
  /* Each loop quiesces its own daemon (libmicrohttpd in external mode
   * wants every call on the thread that runs it); the listen socket is
   * closed after MHD_stop_daemon. */
  atomic_store(&quiesce_req, 1);
  for (int i = 0; i < nloops; i++)
    if (loops[i].ev) loop_wake(loops[i].ev);
}

long http_piped(void) { return atomic_load(&piped_waiting); }

void http_stop(void) {
  for (int i = 0; i < nloops; i++) loop_stop(loops[i].ev);
  for (int i = 0; i < nloops; i++) {
    http_loop *l = &loops[i];
    if (l->d) MHD_stop_daemon(l->d); /* on_completed runs here, on this thread */
    l->d = NULL;
    loop_free(l->ev); /* every connection has closed */
    l->ev = NULL;
    if (l->quiesced != MHD_INVALID_SOCKET) close(l->quiesced);
    for (http_req *r = l->spare, *next; r; r = next) {
      next = r->spare_next;
      free(r->body);
      free(r);
    }
  }
  free(loops);
  loops = NULL;
  nloops = 0;
  conns_free();
}
