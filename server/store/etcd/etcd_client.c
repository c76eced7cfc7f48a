/* etcd_client.c: picketd's client for etcd v3 (see etcd_client.h). It owns
 * the HTTP exchanges with etcd's JSON gateway (/v3/...: every gRPC call of
 * the KV, Lease, Watch, Maintenance, Cluster and Auth services, as JSON,
 * bytes fields in base64, 64-bit numbers as strings, zero values left
 * out; the encoding itself is etcd_json.c's), the choice of endpoint, the
 * auth token, and the translation of all of it into the plain structs of
 * etcd_client.h.
 *
 * Why the gateway: etcd 3.4 serves it on its client URLs out of the box,
 * and libcurl and jansson are already picketd's dependencies, so every call
 * has one way that works. Its cost is a JSON encoding per call twice over
 * (the gateway is a gRPC client of its own member): fine for leases,
 * watches and status, not for the txns every cycle makes, which go over
 * gRPC directly when they can (etcd_grpc.c; the gateway remains their
 * fallback).
 *
 * Endpoints. A call starts at the endpoint that answered last. A transport
 * failure, an HTTP 502/503/504, or an answer that says the member cannot
 * serve now (gRPC Unavailable or DeadlineExceeded: "no leader", "leader
 * changed", "request timed out", "too many requests") moves it to the next
 * endpoint, round after round, until the call's deadline (timeout_ms for
 * the whole call). A single attempt gets at most attempt_ms (default: half
 * the timeout, at most 1 s) when there are other endpoints, because a
 * member can hold a request without answering for long: a paused one (its
 * kernel still accepts connections) forever, and a follower whose leader
 * died until etcd's own request timeout (5 s + 2 election timeouts), not
 * failing fast with "no leader" as one might hope.
 *
 * Auth. With a user, the first call authenticates (POST
 * /v3/auth/authenticate) and every call sends the token as the
 * Authorization header. A token the member does not know (it restarted,
 * or the token expired: --auth-token-ttl) is met by one new
 * authentication and one retry. Neither the password nor the token ever
 * goes into a message, and both are wiped when the client is freed.
 *
 * Watches have their own connection and a libcurl multi handle: a stream
 * never ends by itself, so etcd_watch_next polls it for at most its
 * timeout, and etcd_watch_stop wakes that poll from another thread
 * (curl_multi_wakeup); the transfer's progress callback checks the same
 * flag, so libcurl ends the transfer as well. The gateway sends one JSON
 * object per line; the write callback splits the lines and queues the
 * events, and pauses the transfer while the queue is full, so memory stays
 * bounded however fast etcd writes.
 *
 * A paused member (SIGSTOP, a hung VM) keeps its watch streams open and
 * silent: its kernel still ACKs, so neither TCP nor libcurl notices. And
 * the gateway gives no way to ask for a progress notification on a
 * stream whose request body is sent whole. So a watch that has heard
 * nothing for WATCH_SILENCE_MS asks its member for a linearizable read
 * of the watched key (a count, no value): a member that answers within
 * WATCH_PROBE_MS serves (it reaches its leader), and its silence only
 * means nothing changed; one that does not ends the watch with
 * ETCD_EUNAVAIL, which its owner reopens where a member answers. An idle
 * watch costs one read per WATCH_SILENCE_MS and nothing is reopened. */
#include "etcd_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "etcd_grpc.h"
#include "etcd_json.h"

#define DEFAULT_TIMEOUT_MS 5000
/* The least an attempt gets, so that a short timeout still connects. */
#define ATTEMPT_MIN_MS 200
#define ATTEMPT_DEFAULT_MAX_MS 1000
#define CONNECT_MAX_MS 1000
/* After every endpoint failed once, a pause before the next round, so an
 * election in progress is not hammered. */
#define ROUND_PAUSE_MS 50
/* A member whose gRPC call failed gets its txns through the gateway this
 * long (etcd_client.txn_grpc). */
#define GRPC_REST_MS 1000
/* Events a watch queues before it pauses its transfer. */
#define WATCH_QUEUE_MAX 1024
/* A watch's poll never waits longer than this (the stop flag is also
 * checked by the progress callback; this is a second line). */
#define WATCH_POLL_SLICE_MS 1000
/* A watch silent this long asks its member whether it serves, and gives
 * the answer this long (the top of the file says why). */
#define WATCH_SILENCE_MS 3000
#define WATCH_PROBE_MS 1000
#define ERR_BODY_MAX (64 * 1024)

/* gRPC status codes, as the gateway reports them in "code". */
enum {
  GRPC_INVALID_ARGUMENT = 3,
  GRPC_DEADLINE = 4,
  GRPC_NOT_FOUND = 5,
  GRPC_EXHAUSTED = 8,
  GRPC_OUT_OF_RANGE = 11,
  GRPC_UNAVAILABLE = 14,
  GRPC_UNAUTHENTICATED = 16
};

/* What one attempt at one endpoint came to. */
enum { A_OK, A_NEXT, A_AUTH, A_FINAL };

struct etcd_client {
  char *endpoints[ETCD_ENDPOINTS_MAX];
  int nendpoints;
  int cur;  /* where the next call starts: the endpoint that answered last */
  int last; /* the endpoint tried last */
  long timeout_ms;
  long attempt_ms; /* one try when there are several endpoints */
  char *ca_file, *cert_file, *key_file;
  char *user, *password;
  char *token; /* the gateway's auth token, or NULL */
  CURL *easy;
  char curl_err[CURL_ERROR_SIZE];
  char *buf; /* the reply being received */
  size_t len, cap;
  int too_big;
  char errstr[512];
  /* How the last classified failure ended, for its caller. */
  int code;
  /* Txns over gRPC (etcd_grpc.h): a channel per endpoint, made on first
   * use; one that failed is left alone for GRPC_REST_MS (the gateway then
   * makes the calls, failing over as it does), so a member that stopped
   * answering costs a gRPC try once, not on every call. */
  int no_grpc;
  etcd_grpc *grpc[ETCD_ENDPOINTS_MAX];
  int64_t grpc_rest_until[ETCD_ENDPOINTS_MAX];
};

struct etcd_watch {
  etcd_client *c; /* settings, endpoints and token; its easy handle makes the auth calls */
  CURLM *multi;
  CURL *easy;
  struct curl_slist *headers;
  char *body;  /* the create request */
  char *probe; /* the read that asks a silent watch's member whether it serves */
  int endpoint; /* where the watch is open */
  int from_now; /* created with no start revision: the created reply's is the last seen */
  int64_t heard_ms; /* when the stream last brought anything */
  atomic_int stop;
  char curl_err[CURL_ERROR_SIZE];
  long status;     /* the reply's, once its head is in */
  int running;     /* 0 once libcurl says the transfer is over... */
  CURLcode result; /* ...and how */
  int created;
  int auth_refused; /* etcd canceled the watch over its token */
  int paused;
  char *line; /* the message being received (or a refusal's body) */
  size_t line_len, line_cap;
  etcd_event *queue; /* received, not returned yet: queue[qhead .. qhead+qlen) */
  int qhead, qlen, qcap;
  int64_t queued_revision; /* the last queued event's, to check the order */
  int64_t last_revision;
  int64_t compact_revision;
  int err;
  char errstr[512];
};

static const char *const code_names[] = {"ETCD_OK",         "ETCD_EUNAVAIL",  "ETCD_EREPLY",
                                         "ETCD_ECOMPACTED", "ETCD_ENOTFOUND", "ETCD_ENOSPACE",
                                         "ETCD_EINVAL",     "ETCD_ESTOPPED", "ETCD_EAUTH"};

const char *etcd_strerror(int code) {
  if (code > 0 || -code >= (int)(sizeof code_names / sizeof code_names[0])) return "ETCD_E?";
  return code_names[-code];
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Sets the client's message; returns code. */
__attribute__((format(printf, 3, 4))) static int fail(etcd_client *c, int code, const char *fmt,
                                                      ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errstr, sizeof c->errstr, fmt, ap);
  va_end(ap);
  c->code = code;
  return code;
}

/* Frees a secret after overwriting it, so it does not linger in freed heap. */
static void free_secret(char *s) {
  if (s == NULL) return;
  explicit_bzero(s, strlen(s));
  free(s);
}

/* ---- the client ------------------------------------------------------------ */

static size_t on_reply(char *data, size_t size, size_t n, void *ud) {
  etcd_client *c = ud;
  size_t add = size * n;
  if (c->len + add > ETCD_REPLY_MAX) {
    c->too_big = 1;
    return 0; /* libcurl ends the transfer with CURLE_WRITE_ERROR */
  }
  if (c->len + add + 1 > c->cap) {
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < c->len + add + 1) cap *= 2;
    char *nb = realloc(c->buf, cap);
    if (nb == NULL) return 0;
    c->buf = nb;
    c->cap = cap;
  }
  memcpy(c->buf + c->len, data, add);
  c->len += add;
  c->buf[c->len] = '\0';
  return add;
}

/* The options every transfer of this client shares: TLS files, no proxy,
 * http(s) only, no redirects, TCP keepalive. */
static void setup_easy(etcd_client *c, CURL *e, char *curl_err) {
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, curl_err);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  /* A proxy from the environment must not silently sit between picketd
   * and its consensus store. */
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 10L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 5L);
  if (c->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
  if (c->cert_file) curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file);
  if (c->key_file) curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file);
}

static char *dup_opt(const char *s, int *oom) {
  if (s == NULL || *s == '\0') return NULL;
  char *d = strdup(s);
  if (d == NULL) *oom = 1;
  return d;
}

/* curl_global_init is not thread-safe in every libcurl, and a watch thread
 * may make the first client: once, whoever comes first. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

etcd_client *etcd_client_new(const etcd_client_opts *o, char *err, size_t errlen) {
  pthread_once(&curl_once, curl_init_once);
  if (o == NULL || o->endpoints == NULL || *o->endpoints == '\0') {
    snprintf(err, errlen, "etcd: no endpoint given");
    return NULL;
  }
  if ((o->user && *o->user) != (o->password && *o->password)) {
    snprintf(err, errlen, "etcd: a user needs a password, and a password a user");
    return NULL;
  }
  etcd_client *c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(err, errlen, "etcd: out of memory");
    return NULL;
  }
  int oom = 0;
  c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
  c->attempt_ms = o->attempt_ms > 0 ? o->attempt_ms : c->timeout_ms / 2;
  if (o->attempt_ms <= 0 && c->attempt_ms > ATTEMPT_DEFAULT_MAX_MS)
    c->attempt_ms = ATTEMPT_DEFAULT_MAX_MS;
  if (c->attempt_ms < ATTEMPT_MIN_MS) c->attempt_ms = ATTEMPT_MIN_MS;
  c->ca_file = dup_opt(o->ca_file, &oom);
  c->cert_file = dup_opt(o->cert_file, &oom);
  c->key_file = dup_opt(o->key_file, &oom);
  c->user = dup_opt(o->user, &oom);
  c->password = dup_opt(o->password, &oom);
  /* "http://a:2379, https://b:2379": commas split, blanks around are trimmed,
   * a trailing slash is dropped (paths are appended). */
  const char *p = o->endpoints;
  while (!oom && *p) {
    while (*p == ' ' || *p == ',') p++;
    size_t n = strcspn(p, ",");
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '/')) n--;
    if (n == 0) break;
    if (c->nendpoints == ETCD_ENDPOINTS_MAX) {
      snprintf(err, errlen, "etcd: more than %d endpoints", ETCD_ENDPOINTS_MAX);
      etcd_client_free(c);
      return NULL;
    }
    if (!(n > 7 && strncasecmp(p, "http://", 7) == 0) &&
        !(n > 8 && strncasecmp(p, "https://", 8) == 0)) {
      snprintf(err, errlen, "etcd: endpoint '%.*s' is not an http:// or https:// URL",
               (int)(n < 200 ? n : 200), p);
      etcd_client_free(c);
      return NULL;
    }
    if ((c->endpoints[c->nendpoints++] = strndup(p, n)) == NULL) oom = 1;
    p += strcspn(p, ",");
  }
  if (!oom && c->nendpoints == 0) {
    snprintf(err, errlen, "etcd: no endpoint given");
    etcd_client_free(c);
    return NULL;
  }
  if (oom || (c->easy = curl_easy_init()) == NULL) {
    snprintf(err, errlen, "etcd: out of memory");
    etcd_client_free(c);
    return NULL;
  }
  if (o->first_endpoint > 0) c->cur = o->first_endpoint % c->nendpoints;
  c->no_grpc = o->no_grpc;
  setup_easy(c, c->easy, c->curl_err);
  curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_reply);
  curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
  return c;
}

void etcd_client_free(etcd_client *c) {
  if (c == NULL) return;
  for (int i = 0; i < c->nendpoints; i++) {
    free(c->endpoints[i]);
    etcd_grpc_free(c->grpc[i]);
  }
  free(c->ca_file);
  free(c->cert_file);
  free(c->key_file);
  free(c->user);
  free_secret(c->password);
  free_secret(c->token);
  if (c->easy) curl_easy_cleanup(c->easy);
  free(c->buf);
  free(c);
}

const char *etcd_client_errstr(const etcd_client *c) { return c->errstr; }

const char *etcd_client_endpoint(const etcd_client *c) { return c->endpoints[c->last]; }

/* The request headers of a call: JSON, no "Expect: 100-continue" (an extra
 * round trip), and the token when there is one. NULL: out of memory. */
static struct curl_slist *call_headers(const etcd_client *c, int with_token) {
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  if (h) h = curl_slist_append(h, "Expect:");
  if (h && with_token && c->token) {
    char line[600];
    snprintf(line, sizeof line, "Authorization: %s", c->token);
    struct curl_slist *t = curl_slist_append(h, line);
    explicit_bzero(line, sizeof line);
    if (t == NULL) curl_slist_free_all(h);
    h = t;
  }
  return h;
}

/* Frees a header list after wiping it: it may hold the token. */
static void free_headers(struct curl_slist *h) {
  for (struct curl_slist *t = h; t; t = t->next) explicit_bzero(t->data, strlen(t->data));
  curl_slist_free_all(h);
}

static int contains(const char *s, const char *what) { return s && strstr(s, what) != NULL; }

/* Sorts a refusal: an HTTP status and the gateway's error body ({"error",
 * "message", "code"}, or a stream's {"error": {"grpc_code", "message"}}).
 * Sets c's message and code; returns A_NEXT, A_AUTH or A_FINAL. */
static int classify(etcd_client *c, int endpoint, long status, const char *body, size_t len) {
  json_t *j = body ? json_loadb(body, len, 0, NULL) : NULL;
  const json_t *e = json_object_get(j, "error");
  const json_t *o = json_is_object(e) ? e : j;
  const char *msg = json_string_value(json_object_get(o, "message"));
  if (msg == NULL) msg = json_string_value(e);
  int64_t grpc = 0;
  if (etcd_j_i64(o, json_is_object(e) ? "grpc_code" : "code", &grpc) < 0) grpc = 0;
  char detail[300];
  if (msg)
    snprintf(detail, sizeof detail, "%.280s", msg);
  else
    snprintf(detail, sizeof detail, "HTTP %ld", status);
  const char *ep = c->endpoints[endpoint];
  int r;
  if (status == 401 || grpc == GRPC_UNAUTHENTICATED ||
      (grpc == GRPC_INVALID_ARGUMENT && contains(msg, "user name is empty"))) {
    r = A_AUTH;
    fail(c, ETCD_EAUTH, "etcd %s refused the credentials: %s", ep, detail);
  } else if (status == 502 || status == 503 || status == 504 || grpc == GRPC_UNAVAILABLE ||
             grpc == GRPC_DEADLINE || contains(msg, "no leader") ||
             contains(msg, "leader changed") || contains(msg, "timed out") ||
             contains(msg, "too many requests")) {
    r = A_NEXT;
    fail(c, ETCD_EUNAVAIL, "etcd %s: %s", ep, detail);
  } else if (contains(msg, "lease not found")) {
    r = A_FINAL;
    fail(c, ETCD_ENOTFOUND, "etcd %s: %s", ep, detail);
  } else if (grpc == GRPC_OUT_OF_RANGE && contains(msg, "compacted")) {
    r = A_FINAL;
    fail(c, ETCD_ECOMPACTED, "etcd %s: %s", ep, detail);
  } else if (grpc == GRPC_EXHAUSTED && contains(msg, "space exceeded")) {
    r = A_FINAL;
    fail(c, ETCD_ENOSPACE, "etcd %s: %s", ep, detail);
  } else {
    r = A_FINAL;
    fail(c, ETCD_EREPLY, "etcd %s: %s", ep, detail);
  }
  json_decref(j);
  return r;
}

/* One POST of body to endpoint i, for at most attempt_ms. A_OK with the
 * parsed reply in *reply (the caller's), or another A_* with c's message
 * and code set. */
static int attempt(etcd_client *c, int i, const char *path, const char *body, int with_token,
                   long attempt_ms, json_t **reply) {
  char url[1200];
  snprintf(url, sizeof url, "%s%s", c->endpoints[i], path);
  struct curl_slist *h = call_headers(c, with_token);
  if (h == NULL) {
    fail(c, ETCD_EREPLY, "etcd: out of memory");
    return A_FINAL;
  }
  c->last = i;
  c->len = 0;
  c->too_big = 0;
  c->curl_err[0] = '\0';
  curl_easy_setopt(c->easy, CURLOPT_URL, url);
  curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, attempt_ms);
  curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS,
                   attempt_ms < CONNECT_MAX_MS ? attempt_ms : (long)CONNECT_MAX_MS);
  CURLcode rc = curl_easy_perform(c->easy);
  /* libcurl keeps the list's pointer until the next transfer sets another;
   * unset it so the freed list (which holds the token) is never read. */
  curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
  free_headers(h);
  if (rc != CURLE_OK) {
    if (c->too_big) {
      fail(c, ETCD_EREPLY, "etcd %s: a reply over %d bytes", c->endpoints[i], ETCD_REPLY_MAX);
      return A_FINAL;
    }
    fail(c, ETCD_EUNAVAIL, "etcd %s: %s", c->endpoints[i],
         c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc));
    return A_NEXT;
  }
  long status = 0;
  curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status == 200) {
    json_t *j = json_loadb(c->buf ? c->buf : "", c->len, 0, NULL);
    /* A 200 can still carry an error: a stream's ({"error": {...}}) or a
     * lease grant's "error" member. */
    if (json_is_object(j) && json_object_get(j, "error") == NULL) {
      *reply = j;
      return A_OK;
    }
    if (j == NULL) {
      fail(c, ETCD_EREPLY, "etcd %s: a reply that is not JSON", c->endpoints[i]);
      return A_FINAL;
    }
    json_decref(j);
  }
  return classify(c, i, status, c->buf, c->len);
}

static int authenticate(etcd_client *c, int64_t deadline);

/* POSTs req (borrowed) to path and returns ETCD_OK with the reply object in
 * *reply (the caller's reference), or a code with the message set. Moves
 * from endpoint to endpoint as the top of the file says, until `deadline`
 * (0: timeout_ms from now). with_token 0 is the authentication itself. */
static int post(etcd_client *c, const char *path, json_t *req, json_t **reply, int with_token,
                int64_t deadline) {
  *reply = NULL;
  c->errstr[0] = '\0';
  c->code = ETCD_OK;
  if (deadline == 0) deadline = now_ms() + c->timeout_ms;
  if (with_token && c->user && c->token == NULL) {
    int rc = authenticate(c, deadline);
    if (rc != ETCD_OK) return rc;
  }
  char *body = json_dumps(req, JSON_COMPACT);
  if (body == NULL) return fail(c, ETCD_EREPLY, "etcd: out of memory");
  int reauthed = 0, rc = ETCD_EUNAVAIL, timed_out = 0;
  char last[sizeof c->errstr] = "";
  for (int tries = 0;; tries++) {
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    long ms = c->nendpoints == 1 || left < c->attempt_ms ? (long)left : c->attempt_ms;
    int i = c->cur;
    int a = attempt(c, i, path, body, with_token, ms, reply);
    if (a == A_OK) {
      rc = ETCD_OK;
      c->errstr[0] = '\0';
      break;
    }
    if (a == A_AUTH && with_token && c->user && !reauthed) {
      /* The member does not know the token (restarted, or it expired):
       * one new authentication, then the same endpoint again. */
      reauthed = 1;
      free_secret(c->token);
      c->token = NULL;
      if ((rc = authenticate(c, deadline)) != ETCD_OK) break;
      tries--;
      continue;
    }
    if (a != A_NEXT) {
      rc = c->code;
      if (a == A_AUTH && !c->user)
        rc = fail(c, ETCD_EAUTH, "etcd requires auth, and no user is configured");
      break;
    }
    snprintf(last, sizeof last, "%s", c->errstr);
    c->cur = (i + 1) % c->nendpoints;
    if ((tries + 1) % c->nendpoints == 0) {
      left = deadline - now_ms();
      sleep_ms(left < ROUND_PAUSE_MS ? (left > 0 ? left : 0) : ROUND_PAUSE_MS);
    }
  }
  if (with_token == 0) explicit_bzero(body, strlen(body)); /* it holds the password */
  free(body);
  if (timed_out)
    fail(c, ETCD_EUNAVAIL, "etcd: no endpoint answered within %ld ms (last: %s)", c->timeout_ms,
         last[0] ? last : "none tried");
  return rc;
}

/* Gets a token for c's user. The password travels in the body only; a
 * refusal's message is etcd's, which never repeats it. */
static int authenticate(etcd_client *c, int64_t deadline) {
  json_t *req = json_pack("{s:s, s:s}", "name", c->user, "password", c->password);
  if (req == NULL) return fail(c, ETCD_EREPLY, "etcd: out of memory");
  json_t *rep = NULL;
  int rc = post(c, "/v3/auth/authenticate", req, &rep, 0, deadline);
  /* jansson keeps its own copy of the password: wipe it before freeing. */
  json_t *pw = json_object_get(req, "password");
  if (pw) {
    char *s = (char *)json_string_value(pw);
    explicit_bzero(s, strlen(s));
  }
  json_decref(req);
  if (rc == ETCD_OK) {
    const char *tok = json_string_value(json_object_get(rep, "token"));
    if (tok == NULL || *tok == '\0' || strlen(tok) > 500)
      rc = fail(c, ETCD_EREPLY, "etcd %s: authentication gave no usable token (is auth enabled?)",
                c->endpoints[c->last]);
    else if ((c->token = strdup(tok)) == NULL)
      rc = fail(c, ETCD_EREPLY, "etcd: out of memory");
  } else if (rc == ETCD_EREPLY || rc == ETCD_EAUTH) {
    char why[sizeof c->errstr];
    snprintf(why, sizeof why, "%s", c->errstr);
    rc = fail(c, ETCD_EAUTH, "etcd refused user '%.64s': %.400s", c->user, why);
  }
  json_decref(rep);
  return rc;
}

/* ---- key-value ------------------------------------------------------------- */

static int parse_kv(const json_t *j, etcd_kv *kv) {
  memset(kv, 0, sizeof *kv);
  if (!json_is_object(j) || etcd_j_bytes(j, "key", &kv->key, &kv->key_len) < 0 ||
      etcd_j_bytes(j, "value", &kv->value, &kv->value_len) < 0 ||
      etcd_j_i64(j, "create_revision", &kv->create_revision) < 0 ||
      etcd_j_i64(j, "mod_revision", &kv->mod_revision) < 0 || etcd_j_i64(j, "version", &kv->version) < 0 ||
      etcd_j_i64(j, "lease", &kv->lease) < 0) {
    etcd_kv_clear(kv);
    return -1;
  }
  return 0;
}

/* A RangeResponse, DeleteRangeResponse or PutResponse object into *r. 0 or -1. */
static int parse_op_result(const json_t *j, etcd_op_kind kind, etcd_op_result *r) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
  if (!json_is_object(j) || etcd_j_i64(json_object_get(j, "header"), "revision", &r->revision) < 0)
    return -1;
  if (kind == ETCD_OP_DELETE) return etcd_j_i64(j, "deleted", &r->count);
  if (kind != ETCD_OP_RANGE) return 0;
  r->more = etcd_j_bool(j, "more");
  if (etcd_j_i64(j, "count", &r->count) < 0) return -1;
  const json_t *kvs = json_object_get(j, "kvs");
  size_t n = json_array_size(kvs);
  if (n > ETCD_KVS_MAX || (kvs && !json_is_array(kvs))) return -1;
  if (n == 0) return 0;
  if ((r->kvs = calloc(n, sizeof *r->kvs)) == NULL) return -1;
  for (size_t i = 0; i < n; i++) {
    if (parse_kv(json_array_get(kvs, i), &r->kvs[i]) < 0) {
      etcd_op_result_clear(r);
      return -1;
    }
    r->nkvs++;
  }
  return 0;
}

/* The JSON of one op (a RangeRequest, PutRequest or DeleteRangeRequest). */
static json_t *op_json(const etcd_op *op) {
  json_t *o = json_object();
  if (o == NULL || op->key == NULL || strlen(op->key) > ETCD_KEY_MAX) goto bad;
  if (op->kind == ETCD_OP_PUT) {
    if (etcd_set_bytes(o, "key", op->key, strlen(op->key)) < 0 ||
        etcd_set_bytes(o, "value", op->value ? op->value : "", op->value ? strlen(op->value) : 0) < 0 ||
        (op->lease && etcd_set_i64(o, "lease", op->lease) < 0))
      goto bad;
    return o;
  }
  if ((op->end && strlen(op->end) > ETCD_KEY_MAX) ||
      etcd_set_key_range(o, op->key, op->prefix, op->end) < 0)
    goto bad;
  if (op->kind == ETCD_OP_DELETE) return o;
  if (op->kind != ETCD_OP_RANGE) goto bad;
  int64_t limit = op->limit > 0 && op->limit < ETCD_KVS_MAX ? op->limit : ETCD_KVS_MAX;
  if (etcd_set_i64(o, "limit", limit) < 0 ||
      (op->count_only && json_object_set_new(o, "count_only", json_true()) < 0) ||
      (op->revision > 0 && etcd_set_i64(o, "revision", op->revision) < 0))
    goto bad;
  return o;
bad:
  json_decref(o);
  return NULL;
}

static const char *const op_request[] = {"request_range", "request_put", "request_delete_range"};
static const char *const op_response[] = {"response_range", "response_put",
                                          "response_delete_range"};
static const char *const cmp_targets[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
static const char *const cmp_fields[] = {"version", "create_revision", "mod_revision", "value",
                                         "lease"};
static const char *const cmp_results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};

static json_t *compare_json(const etcd_compare *k) {
  if (k->key == NULL || strlen(k->key) > ETCD_KEY_MAX || (unsigned)k->target > ETCD_CMP_LEASE ||
      (unsigned)k->result > ETCD_CMP_NOT_EQUAL || (k->target == ETCD_CMP_VALUE && k->value == NULL))
    return NULL;
  json_t *o =
      json_pack("{s:s, s:s}", "target", cmp_targets[k->target], "result", cmp_results[k->result]);
  int bad = o == NULL || etcd_set_key_range(o, k->key, k->prefix, NULL) < 0;
  if (!bad && k->target == ETCD_CMP_VALUE)
    bad = etcd_set_bytes(o, "value", k->value, strlen(k->value)) < 0;
  else if (!bad)
    bad = etcd_set_i64(o, cmp_fields[k->target], k->number) < 0;
  if (bad) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* An array of n ops as RequestOps, or NULL (a bad op, or out of memory). */
static json_t *ops_json(const etcd_op *ops, int n) {
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) {
    json_t *op = (unsigned)ops[i].kind <= ETCD_OP_DELETE ? op_json(&ops[i]) : NULL;
    if (op == NULL ||
        json_array_append_new(a, json_pack("{s:o}", op_request[ops[i].kind], op)) < 0) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

/* The JSON of a TxnRequest, or NULL (a bad compare or op, out of memory). */
static json_t *txn_json(const etcd_txn_req *t) {
  if (t->ncompare < 0 || t->ncompare > ETCD_TXN_OPS_MAX || t->nsuccess < 0 ||
      t->nsuccess > ETCD_TXN_OPS_MAX || t->nfailure < 0 || t->nfailure > ETCD_TXN_OPS_MAX)
    return NULL;
  json_t *cmp = json_array();
  for (int i = 0; cmp && i < t->ncompare; i++)
    if (json_array_append_new(cmp, compare_json(&t->compare[i])) < 0) {
      json_decref(cmp);
      cmp = NULL;
    }
  json_t *ok = ops_json(t->success, t->nsuccess);
  json_t *no = ops_json(t->failure, t->nfailure);
  if (cmp == NULL || ok == NULL || no == NULL) {
    json_decref(cmp);
    json_decref(ok);
    json_decref(no);
    return NULL;
  }
  return json_pack("{s:o, s:o, s:o}", "compare", cmp, "success", ok, "failure", no);
}

/* A TxnResponse for t into *out: 0, or -1 (*out cleared). A nested one's
 * header may hold no revision: then `revision` (the outer txn's). */
static int txn_parse(const json_t *rep, const etcd_txn_req *t, int64_t revision,
                     etcd_txn_result *out) {
  memset(out, 0, sizeof *out);
  out->succeeded = etcd_j_bool(rep, "succeeded");
  const etcd_op *ops = out->succeeded ? t->success : t->failure;
  int nops = out->succeeded ? t->nsuccess : t->nfailure;
  const json_t *resp = json_object_get(rep, "responses");
  out->revision = revision;
  int bad = !json_is_object(rep) || (int)json_array_size(resp) != nops ||
            (revision == 0 &&
             etcd_j_i64(json_object_get(rep, "header"), "revision", &out->revision) < 0);
  if (!bad && nops > 0 && (out->results = calloc((size_t)nops, sizeof *out->results)) == NULL)
    bad = 1;
  for (int i = 0; !bad && i < nops; i++) {
    const json_t *r = json_object_get(json_array_get(resp, (size_t)i), op_response[ops[i].kind]);
    if (parse_op_result(r, ops[i].kind, &out->results[i]) < 0)
      bad = 1;
    else
      out->nresults++;
  }
  if (bad) etcd_txn_result_clear(out);
  return bad ? -1 : 0;
}

int etcd_txn(etcd_client *c, const etcd_txn_req *t, etcd_txn_result *out) {
  return etcd_txn_batch(c, &t, 1, out);
}

/* The txns over gRPC at the endpoint that answered last: 1 done, 0 not
 * (no channel, or it failed: the gateway makes the call). Not with etcd
 * auth: its token is the gateway's to get and renew. */
static int txn_grpc(etcd_client *c, const etcd_txn_req *const *ts, int n, etcd_txn_result *outs) {
  int e = c->cur;
  if (c->no_grpc || c->user || now_ms() < c->grpc_rest_until[e]) return 0;
  char err[256];
  if (c->grpc[e] == NULL &&
      (c->grpc[e] = etcd_grpc_new(c->endpoints[e], c->ca_file, c->cert_file, c->key_file, err,
                                  sizeof err)) == NULL) {
    c->grpc_rest_until[e] = now_ms() + GRPC_REST_MS;
    return 0;
  }
  long t = c->nendpoints > 1 ? c->attempt_ms : c->timeout_ms;
  int rc = etcd_grpc_txn(c->grpc[e], NULL, ts, n, outs, t, err, sizeof err);
  if (rc == -2) return 0; /* the member's own answer: the gateway's tells it */
  if (rc != ETCD_OK) {
    /* no answer: the gateway starts at the next member, and this one is
     * left to the gateway for a while */
    c->grpc_rest_until[e] = now_ms() + GRPC_REST_MS;
    if (c->nendpoints > 1) c->cur = (e + 1) % c->nendpoints;
    return 0;
  }
  c->last = e;
  return 1;
}

int etcd_txn_batch(etcd_client *c, const etcd_txn_req *const *ts, int n, etcd_txn_result *outs) {
  for (int i = 0; i < n; i++) memset(&outs[i], 0, sizeof outs[i]);
  c->errstr[0] = '\0';
  if (n < 1 || n > ETCD_TXN_OPS_MAX)
    return fail(c, ETCD_EINVAL, "etcd: a batch holds 1 to %d txns", ETCD_TXN_OPS_MAX);
  /* the gateway gets what a failed gRPC try left of the call's time */
  int64_t deadline = now_ms() + c->timeout_ms;
  if (txn_grpc(c, ts, n, outs)) return ETCD_OK;
  json_t *req = NULL;
  if (n == 1) {
    req = txn_json(ts[0]);
  } else { /* one txn with no compare whose success branch is the n txns */
    json_t *ok = json_array();
    for (int i = 0; ok && i < n; i++) {
      json_t *one = txn_json(ts[i]);
      if (one == NULL || json_array_append_new(ok, json_pack("{s:o}", "request_txn", one)) < 0) {
        json_decref(ok);
        ok = NULL;
      }
    }
    if (ok) req = json_pack("{s:[], s:o, s:[]}", "compare", "success", ok, "failure");
  }
  if (req == NULL)
    return fail(c, ETCD_EINVAL,
                "etcd: a txn with a missing or too long key, a bad op, or over %d compares "
                "and ops per branch",
                ETCD_TXN_OPS_MAX);
  json_t *rep = NULL;
  int rc = post(c, "/v3/kv/txn", req, &rep, 1, deadline);
  json_decref(req);
  if (rc != ETCD_OK) return rc;
  int bad = 0;
  if (n == 1) {
    bad = txn_parse(rep, ts[0], 0, &outs[0]) < 0;
  } else {
    int64_t rev = 0;
    const json_t *resp = json_object_get(rep, "responses");
    bad = etcd_j_i64(json_object_get(rep, "header"), "revision", &rev) < 0 ||
          (int)json_array_size(resp) != n;
    for (int i = 0; !bad && i < n; i++)
      bad = txn_parse(json_object_get(json_array_get(resp, (size_t)i), "response_txn"), ts[i],
                      rev, &outs[i]) < 0;
    for (int i = 0; bad && i < n; i++) etcd_txn_result_clear(&outs[i]);
  }
  json_decref(rep);
  if (bad)
    return fail(c, ETCD_EREPLY, "etcd %s: a txn reply this client cannot read",
                c->endpoints[c->last]);
  return ETCD_OK;
}

int etcd_range(etcd_client *c, const etcd_op *op, etcd_op_result *out) {
  memset(out, 0, sizeof *out);
  c->errstr[0] = '\0';
  json_t *req = op->kind == ETCD_OP_RANGE ? op_json(op) : NULL;
  if (req == NULL)
    return fail(c, ETCD_EINVAL, "etcd: a range needs a key of at most %d bytes", ETCD_KEY_MAX);
  json_t *rep = NULL;
  int rc = post(c, "/v3/kv/range", req, &rep, 1, 0);
  json_decref(req);
  if (rc == ETCD_OK && parse_op_result(rep, ETCD_OP_RANGE, out) < 0)
    rc = fail(c, ETCD_EREPLY, "etcd %s: a range reply this client cannot read",
              c->endpoints[c->last]);
  json_decref(rep);
  return rc;
}

/* ---- leases ---------------------------------------------------------------- */

/* POSTs {idname: id} to path ({"TTL": n} for a grant); the reply goes to
 * *reply (the caller's). */
static int lease_call(etcd_client *c, const char *path, const char *idname, int64_t id,
                      json_t **reply) {
  json_t *req = json_object();
  int rc = req && etcd_set_i64(req, idname, id) == 0 ? post(c, path, req, reply, 1, 0)
                                                : fail(c, ETCD_EREPLY, "etcd: out of memory");
  json_decref(req);
  return rc;
}

int etcd_lease_grant(etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_s) {
  *id = *granted_s = 0;
  c->errstr[0] = '\0';
  if (ttl_s <= 0) return fail(c, ETCD_EINVAL, "etcd: a lease needs a TTL of 1 s or more");
  json_t *rep = NULL;
  int rc = lease_call(c, "/v3/lease/grant", "TTL", ttl_s, &rep);
  if (rc == ETCD_OK && (etcd_j_i64(rep, "ID", id) < 0 || etcd_j_i64(rep, "TTL", granted_s) < 0 || *id == 0))
    rc = fail(c, ETCD_EREPLY, "etcd %s: a lease grant reply with no lease", c->endpoints[c->last]);
  json_decref(rep);
  return rc;
}

int etcd_lease_revoke(etcd_client *c, int64_t id) {
  json_t *rep = NULL;
  int rc = lease_call(c, "/v3/lease/revoke", "ID", id, &rep);
  json_decref(rep);
  return rc;
}

int etcd_lease_keepalive_once(etcd_client *c, int64_t id, int64_t *ttl_s) {
  *ttl_s = 0;
  json_t *rep = NULL;
  /* LeaseKeepAlive is a stream; the gateway ends it once our one request
   * (the whole body) is answered: {"result": {"ID", "TTL"}}. A gone lease
   * is answered with no TTL, which reads as 0. */
  int rc = lease_call(c, "/v3/lease/keepalive", "ID", id, &rep);
  const json_t *res = json_object_get(rep, "result");
  if (rc == ETCD_OK && (res == NULL || etcd_j_i64(res, "TTL", ttl_s) < 0))
    rc = fail(c, ETCD_EREPLY, "etcd %s: a keepalive reply with no result", c->endpoints[c->last]);
  json_decref(rep);
  return rc;
}

int etcd_lease_timetolive(etcd_client *c, int64_t id, int64_t *ttl_s, int64_t *granted_s) {
  *ttl_s = -1;
  *granted_s = 0;
  json_t *rep = NULL;
  int rc = lease_call(c, "/v3/lease/timetolive", "ID", id, &rep);
  if (rc == ETCD_OK && (etcd_j_i64(rep, "TTL", ttl_s) < 0 || etcd_j_i64(rep, "grantedTTL", granted_s) < 0))
    rc = fail(c, ETCD_EREPLY, "etcd %s: a timetolive reply this client cannot read",
              c->endpoints[c->last]);
  json_decref(rep);
  return rc;
}

/* ---- the cluster ----------------------------------------------------------- */

int etcd_status(etcd_client *c, etcd_status_info *out) {
  memset(out, 0, sizeof *out);
  json_t *req = json_object(), *rep = NULL;
  int rc = req ? post(c, "/v3/maintenance/status", req, &rep, 1, 0)
               : fail(c, ETCD_EREPLY, "etcd: out of memory");
  json_decref(req);
  if (rc == ETCD_OK) {
    if (etcd_j_u64(json_object_get(rep, "header"), "member_id", &out->member_id) < 0 ||
        etcd_j_u64(rep, "leader", &out->leader) < 0 || etcd_j_u64(rep, "raftTerm", &out->raft_term) < 0 ||
        etcd_j_i64(rep, "raftIndex", &out->raft_index) < 0 || etcd_j_i64(rep, "dbSize", &out->db_size) < 0 ||
        etcd_j_i64(rep, "dbSizeInUse", &out->db_size_in_use) < 0)
      rc = fail(c, ETCD_EREPLY, "etcd %s: a status reply this client cannot read",
                c->endpoints[c->last]);
    const char *version = json_string_value(json_object_get(rep, "version"));
    snprintf(out->version, sizeof out->version, "%s", version ? version : "");
  }
  json_decref(rep);
  return rc;
}

int etcd_member_list(etcd_client *c, etcd_member **members, int *n) {
  *members = NULL;
  *n = 0;
  json_t *req = json_object(), *rep = NULL;
  int rc = req ? post(c, "/v3/cluster/member/list", req, &rep, 1, 0)
               : fail(c, ETCD_EREPLY, "etcd: out of memory");
  json_decref(req);
  const json_t *arr = json_object_get(rep, "members");
  size_t count = json_array_size(arr);
  if (rc == ETCD_OK && count > 0 && count <= 1000 &&
      (*members = calloc(count, sizeof **members)) == NULL)
    rc = fail(c, ETCD_EREPLY, "etcd: out of memory");
  for (size_t i = 0; rc == ETCD_OK && i < count && *members; i++) {
    const json_t *m = json_array_get(arr, i);
    etcd_member *e = &(*members)[i];
    const char *name = json_string_value(json_object_get(m, "name"));
    const char *url = json_string_value(json_array_get(json_object_get(m, "clientURLs"), 0));
    if (etcd_j_u64(m, "ID", &e->id) < 0) {
      rc = fail(c, ETCD_EREPLY, "etcd %s: a member list this client cannot read",
                c->endpoints[c->last]);
      break;
    }
    snprintf(e->name, sizeof e->name, "%s", name ? name : "");
    snprintf(e->client_url, sizeof e->client_url, "%s", url ? url : "");
    e->learner = etcd_j_bool(m, "isLearner");
    (*n)++;
  }
  if (rc != ETCD_OK) {
    free(*members);
    *members = NULL;
    *n = 0;
  }
  json_decref(rep);
  return rc;
}

/* ---- watches --------------------------------------------------------------- */

/* Ends the watch with code and a message (the first reason wins). */
__attribute__((format(printf, 3, 4))) static void watch_over(etcd_watch *w, int code,
                                                             const char *fmt, ...) {
  if (w->err != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->errstr, sizeof w->errstr, fmt, ap);
  va_end(ap);
  w->err = code;
}

static int watch_push(etcd_watch *w, const etcd_event *ev) {
  if (w->qhead + w->qlen == w->qcap) {
    if (w->qhead > 0) { /* slide down before growing */
      memmove(w->queue, w->queue + w->qhead, (size_t)w->qlen * sizeof *w->queue);
      w->qhead = 0;
    } else {
      int cap = w->qcap ? w->qcap * 2 : 64;
      etcd_event *q = realloc(w->queue, (size_t)cap * sizeof *q);
      if (q == NULL) return -1;
      w->queue = q;
      w->qcap = cap;
    }
  }
  w->queue[w->qhead + w->qlen++] = *ev;
  return 0;
}

/* One event object of a WatchResponse into *ev; 0, or -1 with the watch over. */
static int watch_event(etcd_watch *w, const json_t *j, etcd_event *ev) {
  const json_t *kv = json_object_get(j, "kv");
  const char *type = json_string_value(json_object_get(j, "type"));
  memset(ev, 0, sizeof *ev);
  ev->type = type && strcmp(type, "DELETE") == 0 ? ETCD_EVENT_DELETE : ETCD_EVENT_PUT;
  size_t len = 0;
  char *key = NULL;
  if (!json_is_object(kv) || etcd_j_bytes(kv, "key", &key, &len) < 0 ||
      etcd_j_i64(kv, "mod_revision", &ev->mod_revision) < 0 ||
      etcd_j_i64(kv, "create_revision", &ev->create_revision) < 0 ||
      etcd_j_i64(kv, "version", &ev->version) < 0 || etcd_j_i64(kv, "lease", &ev->lease) < 0) {
    free(key);
    watch_over(w, ETCD_EREPLY, "etcd watch: an event this client cannot read");
    return -1;
  }
  if (len > ETCD_KEY_MAX) {
    free(key);
    watch_over(w, ETCD_EREPLY, "etcd watch: a key over %d bytes", ETCD_KEY_MAX);
    return -1;
  }
  memcpy(ev->key, key, len + 1);
  ev->key_len = len;
  free(key);
  if (ev->mod_revision < w->queued_revision) {
    watch_over(w, ETCD_EREPLY, "etcd watch: revision %lld after %lld", (long long)ev->mod_revision,
               (long long)w->queued_revision);
    return -1;
  }
  w->queued_revision = ev->mod_revision;
  return 0;
}

/* One line of the stream: {"result": WatchResponse} or {"error": {...}}. */
static void watch_message(etcd_watch *w, const char *line, size_t len) {
  json_t *j = json_loadb(line, len, 0, NULL);
  const json_t *res = json_object_get(j, "result");
  const json_t *e = json_object_get(j, "error");
  if (!json_is_object(res)) {
    const char *msg = json_string_value(json_object_get(e, "message"));
    watch_over(w, ETCD_EUNAVAIL, "etcd watch: %s", msg ? msg : "a message this client cannot read");
    json_decref(j);
    return;
  }
  if (etcd_j_bool(res, "created")) {
    /* A watch from now starts after the revision its creation reports: a
     * reopen from the last revision + 1 then starts there too, and not
     * at revision 1 (the whole history again) when no event came. */
    int64_t rev = 0;
    if (w->from_now && w->last_revision == 0 &&
        etcd_j_i64(json_object_get(res, "header"), "revision", &rev) == 0)
      w->last_revision = rev;
    w->created = 1;
  }
  if (etcd_j_bool(res, "canceled")) {
    int64_t compact = 0;
    const char *why = json_string_value(json_object_get(res, "cancel_reason"));
    if (etcd_j_i64(res, "compact_revision", &compact) == 0 && compact > 0) {
      w->compact_revision = compact;
      watch_over(w, ETCD_ECOMPACTED, "etcd watch: revisions before %lld are compacted",
                 (long long)compact);
    } else if (contains(why, "auth token") || contains(why, "user name is empty")) {
      w->auth_refused = 1;
      watch_over(w, ETCD_EAUTH, "etcd refused the watch's credentials: %.200s", why);
    } else if (contains(why, "permission denied")) {
      watch_over(w, ETCD_EREPLY, "etcd watch: %.200s", why);
    } else {
      watch_over(w, ETCD_EUNAVAIL, "etcd canceled the watch: %.200s",
                 why ? why : "no reason given");
    }
  }
  const json_t *evs = json_object_get(res, "events");
  for (size_t i = 0; w->err == 0 && i < json_array_size(evs); i++) {
    etcd_event ev;
    if (watch_event(w, json_array_get(evs, i), &ev) == 0 && watch_push(w, &ev) < 0)
      watch_over(w, ETCD_EREPLY, "etcd watch: out of memory");
  }
  json_decref(j);
}

static int line_append(etcd_watch *w, const char *p, size_t n, size_t max) {
  if (w->line_len + n > max) return -1;
  if (w->line_len + n + 1 > w->line_cap) {
    size_t cap = w->line_cap ? w->line_cap : 4096;
    while (cap < w->line_len + n + 1) cap *= 2;
    char *nb = realloc(w->line, cap);
    if (nb == NULL) return -1;
    w->line = nb;
    w->line_cap = cap;
  }
  memcpy(w->line + w->line_len, p, n);
  w->line_len += n;
  w->line[w->line_len] = '\0';
  return 0;
}

static size_t on_watch_data(char *ptr, size_t size, size_t n, void *ud) {
  etcd_watch *w = ud;
  size_t len = size * n;
  w->heard_ms = now_ms();
  if (w->status == 0) curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->status);
  if (w->status != 200) { /* a refusal's body: what fits is plenty */
    size_t room = ERR_BODY_MAX - w->line_len;
    line_append(w, ptr, len < room ? len : room, ERR_BODY_MAX);
    return len;
  }
  if (w->err) return len; /* over: the rest is not read */
  if (w->qlen >= WATCH_QUEUE_MAX) {
    w->paused = 1;
    return CURL_WRITEFUNC_PAUSE; /* libcurl hands this chunk over again once resumed */
  }
  for (size_t i = 0; i < len;) {
    const char *nl = memchr(ptr + i, '\n', len - i);
    size_t take = nl ? (size_t)(nl - (ptr + i)) : len - i;
    if (line_append(w, ptr + i, take, ETCD_REPLY_MAX) < 0) {
      watch_over(w, ETCD_EREPLY, "etcd watch: a message over %d bytes", ETCD_REPLY_MAX);
      return len;
    }
    i += take;
    if (nl) {
      i++;
      if (w->line_len > 0) watch_message(w, w->line, w->line_len);
      w->line_len = 0;
    }
  }
  return len;
}

static int on_watch_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  etcd_watch *w = ud;
  return atomic_load(&w->stop);
}

/* Moves the transfer on, first waiting up to wait_ms for data or a wakeup. */
static void watch_pump(etcd_watch *w, long wait_ms) {
  int running = 0, left;
  if (wait_ms > 0) curl_multi_poll(w->multi, NULL, 0, (int)wait_ms, NULL);
  curl_multi_perform(w->multi, &running);
  CURLMsg *m;
  while ((m = curl_multi_info_read(w->multi, &left)) != NULL)
    if (m->msg == CURLMSG_DONE) {
      w->running = 0;
      w->result = m->data.result;
    }
}

/* Ends the transfer (if any) and forgets its state, for another attempt. */
static void watch_reset(etcd_watch *w) {
  curl_multi_remove_handle(w->multi, w->easy); /* (a handle not in it: an ignored error) */
  free_headers(w->headers);
  w->headers = NULL;
  w->running = w->created = w->auth_refused = w->paused = 0;
  w->status = 0;
  w->line_len = 0;
  w->qhead = w->qlen = 0;
  w->err = 0;
  w->errstr[0] = '\0';
  w->compact_revision = 0;
}

/* One try at endpoint i until `deadline`: A_OK once etcd created the watch
 * (or canceled it for compaction, which next reports), else A_NEXT, A_AUTH
 * or A_FINAL with w's message set. */
static int watch_try(etcd_watch *w, int i, int64_t deadline) {
  etcd_client *c = w->c;
  char url[1200];
  snprintf(url, sizeof url, "%s/v3/watch", c->endpoints[i]);
  c->last = i;
  if ((w->headers = call_headers(c, 1)) == NULL) {
    watch_over(w, ETCD_EREPLY, "etcd: out of memory");
    return A_FINAL;
  }
  curl_easy_setopt(w->easy, CURLOPT_URL, url);
  curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->headers);
  curl_easy_setopt(w->easy, CURLOPT_POSTFIELDS, w->body);
  curl_easy_setopt(w->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(w->body));
  long left = (long)(deadline - now_ms());
  curl_easy_setopt(w->easy, CURLOPT_CONNECTTIMEOUT_MS,
                   left < CONNECT_MAX_MS ? (left > 1 ? left : 1) : CONNECT_MAX_MS);
  w->curl_err[0] = '\0';
  if (curl_multi_add_handle(w->multi, w->easy) != CURLM_OK) {
    watch_over(w, ETCD_EREPLY, "etcd: out of memory");
    return A_FINAL;
  }
  w->running = 1;
  watch_pump(w, 0);
  while (w->running && !w->created && w->err == 0 && w->status <= 200) {
    if (atomic_load(&w->stop)) {
      watch_over(w, ETCD_ESTOPPED, "etcd watch: stopped");
      return A_FINAL;
    }
    left = (long)(deadline - now_ms());
    if (left <= 0) break;
    watch_pump(w, left < WATCH_POLL_SLICE_MS ? left : WATCH_POLL_SLICE_MS);
  }
  if (w->status == 0) curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->status);
  if (w->status != 0 && w->status != 200) {
    /* a refusal: its body is short; let it finish (or the deadline pass) */
    while (w->running && now_ms() < deadline) watch_pump(w, 50);
    int a = classify(c, i, w->status, w->line, w->line_len);
    w->err = 0;
    watch_over(w, c->code, "%s", c->errstr);
    return a;
  }
  if (w->auth_refused) return A_AUTH;
  if (w->created || w->err == ETCD_ECOMPACTED) return A_OK;
  if (w->err) return A_FINAL;
  if (!w->running)
    watch_over(w, ETCD_EUNAVAIL, "etcd %s: watch: %s", c->endpoints[i],
               w->curl_err[0] ? w->curl_err
               : w->result    ? curl_easy_strerror(w->result)
                              : "the stream ended");
  else
    watch_over(w, ETCD_EUNAVAIL, "etcd %s: watch: not created in time", c->endpoints[i]);
  return A_NEXT;
}

int etcd_watch_open(const etcd_client_opts *o, const char *key, int prefix, int64_t start_revision,
                    etcd_watch **out, char *err, size_t errlen) {
  *out = NULL;
  if (key == NULL || strlen(key) > ETCD_KEY_MAX || start_revision < 0) {
    snprintf(err, errlen, "etcd watch: a key of at most %d bytes and a revision >= 0",
             ETCD_KEY_MAX);
    return ETCD_EINVAL;
  }
  etcd_watch *w = calloc(1, sizeof *w);
  if (w == NULL) {
    snprintf(err, errlen, "etcd: out of memory");
    return ETCD_EREPLY;
  }
  if ((w->c = etcd_client_new(o, err, errlen)) == NULL) {
    free(w);
    return ETCD_EINVAL;
  }
  etcd_client *c = w->c;
  w->last_revision = start_revision > 0 ? start_revision - 1 : 0;
  w->from_now = start_revision == 0;
  json_t *pr = json_object();
  if (pr && etcd_set_key_range(pr, key, 0, NULL) == 0 && json_object_set_new(pr, "count_only", json_true()) == 0)
    w->probe = json_dumps(pr, JSON_COMPACT);
  json_decref(pr);
  json_t *cr = json_object();
  if (cr && start_revision > 0) etcd_set_i64(cr, "start_revision", start_revision);
  json_t *req =
      cr && etcd_set_key_range(cr, key, prefix, NULL) == 0 ? json_pack("{s:O}", "create_request", cr) : NULL;
  json_decref(cr);
  w->body = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  if (w->body == NULL || w->probe == NULL || (w->easy = curl_easy_init()) == NULL ||
      (w->multi = curl_multi_init()) == NULL) {
    snprintf(err, errlen, "etcd: out of memory");
    etcd_watch_free(w);
    return ETCD_EREPLY;
  }
  setup_easy(c, w->easy, w->curl_err);
  curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_watch_data);
  curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
  curl_easy_setopt(w->easy, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(w->easy, CURLOPT_XFERINFOFUNCTION, on_watch_progress);
  curl_easy_setopt(w->easy, CURLOPT_XFERINFODATA, w);
  int64_t deadline = now_ms() + c->timeout_ms;
  int reauthed = 0, rc = ETCD_EUNAVAIL;
  char last[sizeof w->errstr] = "no endpoint tried";
  for (int tries = 0; now_ms() < deadline; tries++) {
    if (c->user && c->token == NULL && (rc = authenticate(c, deadline)) != ETCD_OK) {
      snprintf(last, sizeof last, "%s", c->errstr);
      if (rc != ETCD_EUNAVAIL) break;
      continue;
    }
    int i = c->cur;
    int64_t slice = c->nendpoints == 1 ? c->timeout_ms : c->attempt_ms;
    int64_t until = now_ms() + slice < deadline ? now_ms() + slice : deadline;
    int a = watch_try(w, i, until);
    if (a == A_OK) {
      rc = ETCD_OK;
      w->endpoint = i;
      w->heard_ms = now_ms();
      break;
    }
    snprintf(last, sizeof last, "%s", w->errstr);
    rc = w->err;
    watch_reset(w);
    if (a == A_AUTH && c->user && !reauthed) {
      reauthed = 1;
      free_secret(c->token);
      c->token = NULL;
      continue;
    }
    if (a != A_NEXT) {
      if (a == A_AUTH && !c->user)
        snprintf(last, sizeof last, "etcd requires auth, and no user is configured");
      rc = a == A_AUTH ? ETCD_EAUTH : rc;
      break;
    }
    rc = ETCD_EUNAVAIL;
    c->cur = (i + 1) % c->nendpoints;
    if ((tries + 1) % c->nendpoints == 0) sleep_ms(ROUND_PAUSE_MS);
  }
  if (rc != ETCD_OK) {
    if (rc == ETCD_EUNAVAIL)
      snprintf(err, errlen, "etcd watch: no endpoint answered within %ld ms (last: %s)",
               c->timeout_ms, last);
    else
      snprintf(err, errlen, "%s", last);
    etcd_watch_free(w);
    return rc;
  }
  *out = w;
  return ETCD_OK;
}

/* After WATCH_SILENCE_MS of silence: 0 when the watch's member answers
 * a read of the watched key (its silence is news of nothing), else -1
 * with the watch over (ETCD_EUNAVAIL). */
static int watch_probe(etcd_watch *w) {
  json_t *rep = NULL;
  etcd_client *c = w->c;
  int a = attempt(c, w->endpoint, "/v3/kv/range", w->probe, 1, WATCH_PROBE_MS, &rep);
  json_decref(rep);
  if (a == A_NEXT) {
    watch_over(w, ETCD_EUNAVAIL, "etcd %s: the watch heard nothing for %d ms and its member "
               "did not answer a read: %s", c->endpoints[w->endpoint], WATCH_SILENCE_MS,
               c->errstr);
    return -1;
  }
  w->heard_ms = now_ms(); /* any answer, even a refusal: the member is there */
  return 0;
}

int etcd_watch_next(etcd_watch *w, etcd_event *ev, int max, long timeout_ms) {
  int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  for (;;) {
    if (atomic_load(&w->stop)) {
      watch_over(w, ETCD_ESTOPPED, "etcd watch: stopped");
      return ETCD_ESTOPPED;
    }
    if (w->qlen > 0 && max > 0) {
      int n = w->qlen < max ? w->qlen : max;
      memcpy(ev, w->queue + w->qhead, (size_t)n * sizeof *ev);
      w->qhead += n;
      w->qlen -= n;
      if (w->qlen == 0) w->qhead = 0;
      w->last_revision = ev[n - 1].mod_revision;
      if (w->paused && w->qlen < WATCH_QUEUE_MAX) {
        w->paused = 0;
        curl_easy_pause(w->easy, CURLPAUSE_CONT);
      }
      return n;
    }
    if (w->err) return w->err;
    if (!w->running) {
      watch_over(w, ETCD_EUNAVAIL, "etcd %s: the watch stream ended: %s",
                 etcd_client_endpoint(w->c),
                 w->curl_err[0] ? w->curl_err
                 : w->result    ? curl_easy_strerror(w->result)
                                : "closed by etcd");
      continue;
    }
    if (now_ms() - w->heard_ms >= WATCH_SILENCE_MS && watch_probe(w) < 0) continue;
    long left = (long)(deadline - now_ms());
    if (left <= 0) return 0;
    long slice = WATCH_SILENCE_MS - (long)(now_ms() - w->heard_ms);
    if (slice > WATCH_POLL_SLICE_MS) slice = WATCH_POLL_SLICE_MS;
    if (slice < 1) slice = 1;
    watch_pump(w, left < slice ? left : slice);
  }
}

void etcd_watch_stop(etcd_watch *w) {
  atomic_store(&w->stop, 1);
  if (w->multi) curl_multi_wakeup(w->multi);
}

int64_t etcd_watch_last_revision(const etcd_watch *w) { return w->last_revision; }

int64_t etcd_watch_compact_revision(const etcd_watch *w) { return w->compact_revision; }

int etcd_watch_endpoint(const etcd_watch *w) { return w->endpoint; }

const char *etcd_watch_errstr(const etcd_watch *w) { return w->errstr; }

void etcd_watch_free(etcd_watch *w) {
  if (w == NULL) return;
  if (w->multi && w->easy) curl_multi_remove_handle(w->multi, w->easy);
  if (w->easy) curl_easy_cleanup(w->easy);
  if (w->multi) curl_multi_cleanup(w->multi);
  free_headers(w->headers);
  free(w->body);
  free(w->probe);
  free(w->line);
  free(w->queue);
  etcd_client_free(w->c);
  free(w);
}
