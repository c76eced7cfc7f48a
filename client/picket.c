/* picket.c: the client half of libpicket: one libcurl easy handle per
 * client (so the connection is kept alive between calls), the four lock
 * calls of picketd's HTTP API, the semaphore's four and the read/write
 * lock's four (a permit or a read or write lease is a lease that remembers
 * what it is of, so renew and release find its path), the operators'
 * listing and break, leases and their local deadlines, error mapping, and
 * retries. An election's leader holds a lease too (client/election.c):
 * its calls are the lock's under other names (campaign, term, resign), so
 * the table of kinds below routes them and the same code runs.
 *
 * Why retries are safe where they happen: acquire sends a lease id chosen
 * here, and the server answers a repeated acquire with the same id with the
 * same grant; renew and release name the lease, so repeating them cannot
 * touch anyone else's. Retries happen only on 503 and transport errors
 * (the request may not have been applied), with capped exponential backoff
 * and jitter, and never past the lease's local deadline.
 *
 * Why the deadline is computed from the time a request was *sent*: the
 * server starts the TTL when it runs the script, which is after the send,
 * so send time + TTL is never later than the server's expiry; the drift
 * margin covers clock-rate differences between here and Redis. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "picket_proto.h"

_Static_assert(PICKET_NAME_MAX == PICKET_PROTO_NAME_MAX, "name limit out of step");
_Static_assert(PICKET_OWNER_MAX == PICKET_PROTO_OWNER_MAX, "owner limit out of step");
_Static_assert(PICKET_OWNER_BYTES_MAX == PICKET_PROTO_OWNER_BYTES_MAX, "owner limit out of step");
_Static_assert(PICKET_LEASE_ID_LEN == PICKET_PROTO_LEASE_LEN, "lease id length out of step");
_Static_assert(PICKET_SEM_NAME_MAX == PICKET_PROTO_SEM_NAME_MAX, "semaphore name limit out of step");
_Static_assert(PICKET_SEM_LIMIT_MAX == PICKET_PROTO_SEM_LIMIT_MAX, "semaphore limit out of step");
_Static_assert(PICKET_RW_NAME_MAX == PICKET_PROTO_RW_NAME_MAX, "rwlock name limit out of step");
_Static_assert(PICKET_ELECTION_NAME_MAX == PICKET_PROTO_ELECTION_NAME_MAX,
               "election name limit out of step");
_Static_assert(PICKET_ELECTION_VALUE_MAX == PICKET_PROTO_VALUE_BYTES_MAX,
               "election value limit out of step");

#define REPLY_MAX (64 * 1024) /* picketd's replies are small; more is not picketd */
/* ...but a semaphore's GET lists every live permit: up to 4096 (picketd's
 * default --max-semaphore-limit) of at most ~800 bytes each. */
#define SEM_REPLY_MAX (4 * 1024 * 1024)
/* ...and a page of the listing up to 1000 names, each with an owner of up
 * to 512 bytes (1 KiB escaped) beside its name and numbers. */
#define LIST_REPLY_MAX (4 * 1024 * 1024)
#define BASE_URL_MAX 512
/* a base URL, then a listing's query: prefix and cursor percent-encoded */
#define URL_MAX (BASE_URL_MAX + 64 + 3 * (PICKET_NAME_MAX + PICKET_LIST_CURSOR_MAX))

struct picket_client {
  CURL *curl;
  struct curl_slist *headers;
  char *base_url;
  char *token;
  char *ca_file;
  char *cert_file, *key_file;
  picket_options opts;
  char curl_err[CURL_ERROR_SIZE];
  char *body; /* reply body being read */
  size_t body_len, body_cap, body_max;
  uint64_t rng; /* xorshift state for jitter */
  const atomic_int *abort_flag;
  /* The last call's detail. */
  long status;
  char code[64];
  char message[512];
  int64_t retry_after_ms;
  int has_holder;
  char holder[PICKET_OWNER_BYTES_MAX + 1];
  int64_t sem_limit; /* after limit_mismatch: the live permits' limit */
};

/* ---- errors and clock --------------------------------------------------- */

const char *picket_strerror(int err) {
  switch (err) {
#define PICKET_ERRNO_MSG(name, value, msg) \
  case PICKET_##name:                      \
    return msg;
    PICKET_ERRNO_MAP(PICKET_ERRNO_MSG)
#undef PICKET_ERRNO_MSG
  case 0:
    return "success";
  }
  return "unknown error";
}

const char *picket_err_name(int err) {
  switch (err) {
#define PICKET_ERRNO_NAME(name, value, msg) \
  case PICKET_##name:                       \
    return #name;
    PICKET_ERRNO_MAP(PICKET_ERRNO_NAME)
#undef PICKET_ERRNO_NAME
  }
  return "UNKNOWN";
}

int64_t picket_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Records a failure detected here (no server involved) on the handle. */
static int fail(picket_client *c, int err, const char *message) {
  if (c != NULL) {
    c->status = 0;
    c->code[0] = '\0';
    snprintf(c->message, sizeof c->message, "%s", message);
  }
  return err;
}

static void clear_detail(picket_client *c) {
  c->status = 0;
  c->code[0] = '\0';
  c->message[0] = '\0';
  c->retry_after_ms = -1;
  c->has_holder = 0;
  c->holder[0] = '\0';
  c->sem_limit = -1;
}

/* ---- client ------------------------------------------------------------- */

void picket_options_init(picket_options *o) {
  memset(o, 0, sizeof *o);
  o->connect_timeout_ms = 2000;
  o->request_timeout_ms = 10000;
  o->retries = 3;
  o->retry_base_ms = 50;
  o->retry_max_ms = 1000;
  o->drift_permille = 10;
  o->drift_min_ms = 2;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t on_body(char *ptr, size_t size, size_t n, void *ud) {
  picket_client *c = ud;
  size_t len = size * n;
  if (c->body_len + len + 1 > c->body_max) return 0; /* makes curl fail: not picketd */
  if (c->body_len + len + 1 > c->body_cap) {
    size_t cap = c->body_cap ? c->body_cap : 1024;
    while (cap < c->body_len + len + 1) cap *= 2;
    char *b = realloc(c->body, cap);
    if (b == NULL) return 0;
    c->body = b;
    c->body_cap = cap;
  }
  memcpy(c->body + c->body_len, ptr, len);
  c->body_len += len;
  c->body[c->body_len] = '\0';
  return len;
}

/* Lets a keeper's stop interrupt a request in flight; libcurl calls this
 * about once a second or more often. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  picket_client *c = ud;
  return c->abort_flag != NULL && atomic_load(c->abort_flag) != 0;
}

/* What every transfer of client c has, its own and its watches'
 * (events.c): the TLS files, the connect timeout, http(s) only, no
 * redirects, no signals (threads: no SIGALRM), and where its body, its
 * progress (a stop flag's check) and its error message go. */
static void configure_easy(const picket_client *c, CURL *h, curl_write_callback on_write,
                           curl_xferinfo_callback on_xfer, void *ud, char *errbuf) {
  if (c->ca_file != NULL) {
    /* Only this bundle: no CA directory of the system's beside it. */
    curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
  }
  if (c->cert_file != NULL) { /* and key_file: options_valid */
    curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
    curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
  }
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->opts.connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, ud);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_xfer);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, ud);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
}

/* Request headers: the bearer token's (when there is one), then the n
 * `fixed` ones. NULL when out of memory. */
static struct curl_slist *headers_new(const char *token, const char *const *fixed, size_t n) {
  struct curl_slist *list = NULL, *h;
  if (token != NULL) {
    char *auth = malloc(strlen(token) + 32);
    if (auth == NULL) return NULL;
    sprintf(auth, "Authorization: Bearer %s", token);
    h = curl_slist_append(list, auth);
    explicit_bzero(auth, strlen(auth));
    free(auth);
    if (h == NULL) return NULL;
    list = h;
  }
  for (size_t i = 0; i < n; i++) {
    if ((h = curl_slist_append(list, fixed[i])) == NULL) {
      curl_slist_free_all(list);
      return NULL;
    }
    list = h;
  }
  return list;
}

static int options_valid(const picket_options *o) {
  return o->connect_timeout_ms > 0 && o->request_timeout_ms > 0 && o->retries >= 0 &&
         o->retry_base_ms >= 0 && o->retry_max_ms >= o->retry_base_ms &&
         o->drift_permille >= 0 && o->drift_permille < 1000 && o->drift_min_ms >= 0 &&
         (o->cert_file == NULL) == (o->key_file == NULL);
}

static int url_valid(const char *u) {
  size_t n = strlen(u);
  if (n == 0 || n > BASE_URL_MAX) return 0;
  if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) return 0;
  for (const char *p = u; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == '?' || *p == '#') return 0;
  return 1;
}

int picket_client_new(const char *base_url, const picket_options *opts, picket_client **out) {
  picket_options defaults;
  *out = NULL;
  if (base_url == NULL) base_url = PICKET_DEFAULT_SERVER;
  if (opts == NULL) {
    picket_options_init(&defaults);
    opts = &defaults;
  }
  if (!url_valid(base_url) || !options_valid(opts)) return PICKET_EINVAL;
  if (opts->bearer_token != NULL && strpbrk(opts->bearer_token, "\r\n") != NULL)
    return PICKET_EINVAL;
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK) return PICKET_ENOMEM;

  picket_client *c = calloc(1, sizeof *c);
  if (c == NULL) return PICKET_ENOMEM;
  c->opts = *opts;
  c->base_url = strdup(base_url);
  c->curl = curl_easy_init();
  if (c->base_url == NULL || c->curl == NULL) goto nomem;
  /* "http://h:p/" and "http://h:p" name the same server. */
  size_t n = strlen(c->base_url);
  while (n > 0 && c->base_url[n - 1] == '/') c->base_url[--n] = '\0';
  c->opts.bearer_token = NULL;
  if (opts->bearer_token != NULL) {
    if ((c->token = strdup(opts->bearer_token)) == NULL) goto nomem;
    c->opts.bearer_token = c->token;
  }
  c->opts.ca_file = NULL;
  if (opts->ca_file != NULL) {
    if ((c->ca_file = strdup(opts->ca_file)) == NULL) goto nomem;
    c->opts.ca_file = c->ca_file;
  }
  c->opts.cert_file = c->opts.key_file = NULL;
  if (opts->cert_file != NULL) { /* and key_file: options_valid */
    if ((c->cert_file = strdup(opts->cert_file)) == NULL ||
        (c->key_file = strdup(opts->key_file)) == NULL)
      goto nomem;
    c->opts.cert_file = c->cert_file;
    c->opts.key_file = c->key_file;
  }
  /* No "Expect: 100-continue" round trip; bodies are tiny. */
  static const char *const fixed[] = {"Content-Type: application/json", "Accept: application/json",
                                      "Expect:", "User-Agent: libpicket/" PICKET_VERSION};
  if ((c->headers = headers_new(c->token, fixed, sizeof fixed / sizeof fixed[0])) == NULL)
    goto nomem;
  /* Jitter needs no cryptographic quality, only different clients
   * spreading out; the lease-id generator gives a random seed. */
  char seed[PICKET_PROTO_LEASE_LEN + 1];
  if (picket_proto_lease_new(seed) == 0) c->rng = strtoull(seed + 16, NULL, 16);
  c->rng ^= (uint64_t)(uintptr_t)c ^ (uint64_t)picket_now_ms();
  if (c->rng == 0) c->rng = 0x9e3779b97f4a7c15ULL;

  configure_easy(c, c->curl, on_body, on_progress, c, c->curl_err);
  curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
  clear_detail(c);
  *out = c;
  return 0;
nomem:
  picket_client_free(c);
  return PICKET_ENOMEM;
}

void picket_client_free(picket_client *c) {
  if (c == NULL) return;
  if (c->curl) curl_easy_cleanup(c->curl);
  curl_slist_free_all(c->headers);
  free(c->base_url);
  free(c->token);
  free(c->ca_file);
  free(c->cert_file);
  free(c->key_file);
  free(c->body);
  free(c);
}

picket_client *picket__client_clone(const picket_client *c) {
  picket_client *copy = NULL;
  if (picket_client_new(c->base_url, &c->opts, &copy) != 0) return NULL;
  return copy;
}

void picket__client_set_abort(picket_client *c, const atomic_int *flag) { c->abort_flag = flag; }
void picket__client_set_retries(picket_client *c, int retries) { c->opts.retries = retries; }

int64_t picket__client_backoff_ms(picket_client *c, int attempt) {
  int64_t cap = c->opts.retry_base_ms;
  for (int i = 0; i < attempt && cap < c->opts.retry_max_ms; i++) cap *= 2;
  if (cap > c->opts.retry_max_ms) cap = c->opts.retry_max_ms;
  if (cap <= 1) return cap;
  c->rng ^= c->rng << 13;
  c->rng ^= c->rng >> 7;
  c->rng ^= c->rng << 17;
  return cap / 2 + (int64_t)(c->rng % (uint64_t)(cap - cap / 2 + 1));
}

int picket__client_stream_setup(const picket_client *c, CURL *h, const char *accept,
                                struct curl_slist **headers, curl_write_callback on_write,
                                curl_xferinfo_callback on_xfer, void *ud, char *errbuf) {
  char accept_header[128];
  snprintf(accept_header, sizeof accept_header, "Accept: %s", accept);
  const char *const fixed[] = {accept_header, "User-Agent: libpicket/" PICKET_VERSION};
  if ((*headers = headers_new(c->token, fixed, sizeof fixed / sizeof fixed[0])) == NULL)
    return PICKET_ENOMEM;
  configure_easy(c, h, on_write, on_xfer, ud, errbuf);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
  return 0;
}

const char *picket__client_base_url(const picket_client *c) { return c->base_url; }
const atomic_int *picket__client_abort_flag(const picket_client *c) { return c->abort_flag; }
int64_t picket__client_request_timeout_ms(const picket_client *c) {
  return c->opts.request_timeout_ms;
}

long picket_client_status(const picket_client *c) { return c->status; }
const char *picket_client_error_code(const picket_client *c) { return c->code; }
const char *picket_client_error_message(const picket_client *c) { return c->message; }
int64_t picket_client_retry_after_ms(const picket_client *c) { return c->retry_after_ms; }
const char *picket_client_holder(const picket_client *c) {
  return c->has_holder ? c->holder : NULL;
}
int64_t picket_client_sem_limit(const picket_client *c) { return c->sem_limit; }

/* ---- one HTTP exchange ---------------------------------------------------- */

int picket__err_from_curl(CURLcode rc) {
  switch (rc) {
  case CURLE_OPERATION_TIMEDOUT:
    return PICKET_ETIMEDOUT;
  case CURLE_ABORTED_BY_CALLBACK:
    return PICKET_ECANCELED;
  case CURLE_OUT_OF_MEMORY:
    return PICKET_ENOMEM;
  default:
    return PICKET_ETRANSPORT;
  }
}

static int from_curl(picket_client *c, CURLcode rc) {
  if (rc == CURLE_WRITE_ERROR) { /* on_body refused it */
    snprintf(c->message, sizeof c->message, "reply larger than %zu bytes", c->body_max - 1);
    return PICKET_EPROTO;
  }
  snprintf(c->message, sizeof c->message, "%s", c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc));
  return picket__err_from_curl(rc);
}

/* Reads an integer member >= min, or -1 when missing, mistyped or smaller. */
static int64_t get_int(const json_t *j, const char *key, int64_t min) {
  json_t *v = json_object_get(j, key);
  if (!json_is_integer(v) || json_integer_value(v) < min) return -1;
  return json_integer_value(v);
}

/* Maps a non-2xx reply (status, parsed body or NULL) to a PICKET_E* code,
 * keeping the server's code and message on the handle. */
static int from_reply(picket_client *c, long status, json_t *j) {
  json_t *e = json_object_get(j, "error");
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  if (code != NULL) snprintf(c->code, sizeof c->code, "%s", code);
  if (msg != NULL)
    snprintf(c->message, sizeof c->message, "%s", msg);
  else
    snprintf(c->message, sizeof c->message, "HTTP status %ld", status);

  if (status == 429) {
    /* too_many_leases, too_many_waiters (this client's own limit; 503
     * too_many_waiters is the server's) or rate_limited, which says when */
    json_t *ra = json_object_get(e, "retry_after_ms");
    c->retry_after_ms = json_is_integer(ra) ? json_integer_value(ra) : -1;
    return PICKET_ELIMIT;
  }
  int err = code ? picket_proto_err_from_code(code) : -1;
  switch (err) {
  case PICKET_PROTO_ERR_LIMIT_MISMATCH:
    c->sem_limit = get_int(e, "limit", 1);
    return PICKET_EMISMATCH;
  case PICKET_PROTO_ERR_SEMAPHORE_FULL: /* retry_after_ms, and no owner */
  case PICKET_PROTO_ERR_TOO_MANY_READERS: /* the same: a read lease frees, then try again */
  case PICKET_PROTO_ERR_LOCK_HELD:
  case PICKET_PROTO_ERR_LOCK_DELAY:
  case PICKET_PROTO_ERR_LEADER_EXISTS: /* a campaign's lock_held */ {
    json_t *ra = json_object_get(e, "retry_after_ms");
    c->retry_after_ms = json_is_integer(ra) ? json_integer_value(ra) : -1;
    const char *owner = json_string_value(json_object_get(e, "owner"));
    if (owner != NULL) {
      c->has_holder = 1;
      snprintf(c->holder, sizeof c->holder, "%s", owner);
    }
    return err == PICKET_PROTO_ERR_LEADER_EXISTS ? PICKET_ELEADER : PICKET_EHELD;
  }
  case PICKET_PROTO_ERR_LEASE_LOST:
    return PICKET_ELOST;
  case PICKET_PROTO_ERR_INVALID_ARGUMENT:
  case PICKET_PROTO_ERR_BODY_TOO_LARGE:
    return PICKET_EINVAL;
  case PICKET_PROTO_ERR_STORE_ERROR:
    return PICKET_ESTORE;
  case PICKET_PROTO_ERR_STORE_UNAVAILABLE:
  case PICKET_PROTO_ERR_STORE_MISCONFIGURED:
  case PICKET_PROTO_ERR_STORE_FULL:
  case PICKET_PROTO_ERR_NOT_REPLICATED:
  case PICKET_PROTO_ERR_QUOTA_WAITERS: /* the code's first row; at 503 it is the server's limit */
  case PICKET_PROTO_ERR_SHUTTING_DOWN:
    return PICKET_EUNAVAIL;
  }
  /* Not one of picketd's codes (a proxy, or a newer server): go by status. */
  if (status == 401 || status == 403) return PICKET_EAUTH;
  if (status == 503) return PICKET_EUNAVAIL;
  if (status == 400) return PICKET_EINVAL;
  return status >= 400 ? PICKET_ESERVER : PICKET_EPROTO;
}

int picket__client_reply_error(picket_client *c, long status, const char *body, size_t len) {
  clear_detail(c);
  c->status = status;
  json_t *j = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
  int err = from_reply(c, status, j);
  json_decref(j);
  return err;
}

void picket__client_clear(picket_client *c) { clear_detail(c); }

int picket__client_fail(picket_client *c, int err, const char *message) {
  clear_detail(c);
  return fail(c, err, message);
}

/* Sends one request (body NULL: GET) with the given total timeout and
 * bound on the reply's size. On 2xx returns 0 and sets *reply to the
 * parsed object (the caller decrefs it). */
static int exchange(picket_client *c, const char *url, const char *body, int64_t timeout_ms,
                    size_t reply_max, json_t **reply) {
  *reply = NULL;
  clear_detail(c);
  c->curl_err[0] = '\0';
  c->body_len = 0;
  c->body_max = reply_max;
  if (timeout_ms < 1) timeout_ms = 1;
  curl_easy_setopt(c->curl, CURLOPT_URL, url);
  if (body != NULL) {
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  } else {
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  CURLcode rc = curl_easy_perform(c->curl);
  if (rc != CURLE_OK) return from_curl(c, rc);
  curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->status);
  json_t *j = c->body_len ? json_loadb(c->body, c->body_len, 0, NULL) : NULL;
  if (c->status >= 200 && c->status < 300) {
    if (!json_is_object(j)) {
      json_decref(j);
      snprintf(c->message, sizeof c->message, "HTTP %ld with a body that is not a JSON object",
               c->status);
      return PICKET_EPROTO;
    }
    *reply = j;
    return 0;
  }
  int err = from_reply(c, c->status, j);
  json_decref(j);
  return err;
}

static int retryable(int err) {
  return err == PICKET_EUNAVAIL || err == PICKET_ETIMEDOUT || err == PICKET_ETRANSPORT;
}

/* One call of the API. */
typedef struct {
  char url[URL_MAX];
  char *body;        /* owned JSON text, NULL for GET */
  int64_t extra_ms;  /* added to the request timeout (a waiting acquire) */
  int may_retry;     /* safe to repeat */
  int64_t until_ms;  /* > 0: no attempt runs past this monotonic time */
  const picket_lease *lease; /* retries stop at its local deadline */
  size_t reply_max;  /* 0: REPLY_MAX */
} call_t;

/* Runs a call with retries. Sets *sent_ms to when the successful attempt
 * was sent, and *repeated to 1 if an earlier attempt may have been applied
 * by the server. */
static int perform(picket_client *c, const call_t *call, json_t **reply, int64_t *sent_ms,
                   int *repeated) {
  *repeated = 0;
  for (int attempt = 0;; attempt++) {
    int64_t timeout = c->opts.request_timeout_ms + call->extra_ms;
    int64_t now = picket_now_ms();
    if (call->until_ms > 0) {
      if (now >= call->until_ms) return fail(c, PICKET_ETIMEDOUT, "no time left before the deadline");
      if (call->until_ms - now < timeout) timeout = call->until_ms - now;
    }
    *sent_ms = now;
    int err = exchange(c, call->url, call->body, timeout,
                       call->reply_max ? call->reply_max : REPLY_MAX, reply);
    if (err == 0 || !call->may_retry || !retryable(err) || attempt >= c->opts.retries) return err;
    int64_t pause = picket__client_backoff_ms(c, attempt);
    int64_t deadline = call->lease ? atomic_load(&call->lease->deadline_ms) : 0;
    now = picket_now_ms();
    if (deadline > 0 && now + pause >= deadline) return err;
    if (call->until_ms > 0 && now + pause >= call->until_ms) return err;
    if (c->abort_flag != NULL && atomic_load(c->abort_flag)) return err;
    *repeated = 1;
    sleep_ms(pause);
  }
}

/* Serializes obj (stolen) into a call's body. */
static int set_body(picket_client *c, call_t *call, json_t *obj) {
  if (obj == NULL) return fail(c, PICKET_ENOMEM, "out of memory");
  call->body = json_dumps(obj, JSON_COMPACT);
  json_decref(obj);
  return call->body ? 0 : fail(c, PICKET_ENOMEM, "out of memory");
}

/* Per PICKET__KIND_*: the API's path, the replies' name member, the
 * longest name, what a bad name gets told, and the words an election uses
 * for a lock's: the grant's verb, its fence's member, its signed fence's
 * member, the release's verb and its reply's member. */
static const struct {
  const char *path, *key;
  size_t name_max;
  const char *bad_name;
  const char *acquire, *fence, *token, *release, *released;
} kinds[] = {
    [PICKET__KIND_LOCK] = {"locks", "lock", PICKET_NAME_MAX,
                           "lock names are 1-200 bytes of [A-Za-z0-9._:-]", "acquire", "fence",
                           "fence_token", "release", "released"},
    [PICKET__KIND_SEM] = {"semaphores", "semaphore", PICKET_SEM_NAME_MAX,
                          "semaphore names are 1-180 bytes of [A-Za-z0-9._:-]", "acquire", "fence",
                          "fence_token", "release", "released"},
    [PICKET__KIND_RW] = {"rwlocks", "rwlock", PICKET_RW_NAME_MAX,
                         "rwlock names are 1-197 bytes of [A-Za-z0-9._:-]", "acquire", "fence",
                         "fence_token", "release", "released"},
    [PICKET__KIND_ELECTION] = {"elections", "election", PICKET_ELECTION_NAME_MAX,
                               "election names are 1-197 bytes of [A-Za-z0-9._:-]", "campaign",
                               "term", "fence_token", "resign", "resigned"},
};

/* A name of a `kind` (PICKET__KIND_*) thing: 1 when valid. */
static int name_valid(int kind, const char *name) {
  size_t n = name ? strlen(name) : 0;
  return name != NULL && picket_proto_name_valid(name, n) && n <= kinds[kind].name_max;
}

/* The URL of a `kind` thing's path; verb NULL: GET. */
static int set_url(picket_client *c, call_t *call, int kind, const char *name, const char *verb) {
  if (!name_valid(kind, name)) return fail(c, PICKET_EINVAL, kinds[kind].bad_name);
  snprintf(call->url, sizeof call->url, "%s/v1/%s/%s%s%s", c->base_url, kinds[kind].path, name,
           verb ? "/" : "", verb ? verb : "");
  return 0;
}

static int proto_error(picket_client *c, const char *what) {
  snprintf(c->message, sizeof c->message, "unexpected reply: %s", what);
  return PICKET_EPROTO;
}

int picket__proto_error(picket_client *c, const char *what) { return proto_error(c, what); }

static int64_t drift_ms(const picket_client *c, int64_t ttl) {
  return ttl * c->opts.drift_permille / 1000 + c->opts.drift_min_ms;
}

/* ---- leases ----------------------------------------------------------------- */

/* A new lease of a `kind` (PICKET__KIND_*) thing `name`. */
static int lease_new(int kind, const char *name, const char *lease_id, picket_lease **out) {
  *out = NULL;
  if (!name_valid(kind, name) || lease_id == NULL ||
      !picket_proto_lease_valid(lease_id, strlen(lease_id)))
    return PICKET_EINVAL;
  picket_lease *l = calloc(1, sizeof *l);
  if (l == NULL) return PICKET_ENOMEM;
  if (pthread_mutex_init(&l->deadline_mu, NULL) != 0) {
    free(l);
    return PICKET_ENOMEM;
  }
  strcpy(l->lock, name);
  strcpy(l->id, lease_id);
  l->kind = kind;
  l->permit = -1;
  l->mode = -1;
  /* a lock's fence (an election's term) is checked under its name, an
   * rwlock's under NAME:rw */
  if (kind == PICKET__KIND_LOCK || kind == PICKET__KIND_ELECTION) strcpy(l->fence_lock, name);
  if (kind == PICKET__KIND_RW) snprintf(l->fence_lock, sizeof l->fence_lock, "%s:rw", name);
  *out = l;
  return 0;
}

int picket__lease_new(int kind, const char *name, const char *lease_id, picket_lease **out) {
  return lease_new(kind, name, lease_id, out);
}

int picket_lease_new(const char *lock, const char *lease_id, picket_lease **out) {
  return lease_new(PICKET__KIND_LOCK, lock, lease_id, out);
}

int picket_sem_lease_new(const char *semaphore, const char *lease_id, picket_lease **out) {
  return lease_new(PICKET__KIND_SEM, semaphore, lease_id, out);
}

int picket_rw_lease_new(const char *rwlock, const char *lease_id, picket_lease **out) {
  return lease_new(PICKET__KIND_RW, rwlock, lease_id, out);
}

void picket_lease_free(picket_lease *l) {
  if (l == NULL) return;
  pthread_mutex_destroy(&l->deadline_mu);
  free(l);
}
const char *picket_lease_lock(const picket_lease *l) { return l->lock; }
const char *picket_lease_id(const picket_lease *l) { return l->id; }
int64_t picket_lease_fence(const picket_lease *l) { return l->fence; }

const char *picket_lease_fence_token(const picket_lease *l) {
  return l->fence_token[0] ? l->fence_token : NULL;
}

/* A reply's fence_token (an election's: token), when picketd signs fences:
 * copied to l, or -1 when it is there but no token (too long, not a
 * string, a control byte). */
static int take_fence_token(picket_lease *l, json_t *reply) {
  json_t *t = json_object_get(reply, kinds[l->kind].token);
  if (t == NULL) return 0;
  const char *s = json_string_value(t);
  size_t n = s ? json_string_length(t) : 0;
  if (s == NULL || n == 0 || n > PICKET_FENCE_TOKEN_MAX || strcspn(s, "\r\n\t ") != n) return -1;
  memcpy(l->fence_token, s, n + 1);
  return 0;
}
int64_t picket_lease_ttl_ms(const picket_lease *l) { return atomic_load(&l->ttl_ms); }
const char *picket_lease_owner(const picket_lease *l) { return l->has_owner ? l->owner : NULL; }
int64_t picket_lease_deadline_ms(const picket_lease *l) { return atomic_load(&l->deadline_ms); }

int picket_lease_capped(const picket_lease *l) { return atomic_load(&l->capped); }
int64_t picket_lease_permit(const picket_lease *l) { return l->permit; }
int picket_lease_is_permit(const picket_lease *l) { return l->kind == PICKET__KIND_SEM; }
int picket_lease_is_rwlock(const picket_lease *l) { return l->kind == PICKET__KIND_RW; }
int picket_lease_is_election(const picket_lease *l) { return l->kind == PICKET__KIND_ELECTION; }
int picket_lease_mode(const picket_lease *l) { return l->mode; }
int64_t picket_lease_limit(const picket_lease *l) { return l->limit; }
const char *picket_lease_fence_lock(const picket_lease *l) {
  return l->fence_lock[0] ? l->fence_lock : NULL;
}

/* A permit's slot and fence lock from a grant or renewal reply: 0 when
 * they are there and fit (a slot below the limit, when it is known), and
 * agree with what l already knows; -1 otherwise. Sets them when unknown. */
static int take_permit(picket_lease *l, json_t *reply) {
  int64_t permit = get_int(reply, "permit", 0);
  const char *fl = json_string_value(json_object_get(reply, "fence_lock"));
  if (permit < 0 || (l->limit > 0 && permit >= l->limit) || fl == NULL ||
      !picket_proto_name_valid(fl, strlen(fl)))
    return -1;
  if (l->permit >= 0) return permit == l->permit && strcmp(fl, l->fence_lock) == 0 ? 0 : -1;
  l->permit = permit;
  strcpy(l->fence_lock, fl);
  return 0;
}

/* An rwlock lease's mode and fence lock from a grant or renewal reply: 0
 * when the mode is read or write and agrees with what l knows (want, or
 * l's mode once known) and the fence lock is NAME:rw; -1 otherwise. Sets
 * the mode when unknown. */
static int take_mode(picket_lease *l, json_t *reply, int want) {
  const char *m = json_string_value(json_object_get(reply, "mode"));
  const char *fl = json_string_value(json_object_get(reply, "fence_lock"));
  int mode = m == NULL                 ? -1
             : strcmp(m, "read") == 0  ? PICKET_MODE_READ
             : strcmp(m, "write") == 0 ? PICKET_MODE_WRITE
                                       : -1;
  if (want < 0) want = l->mode;
  if (mode < 0 || (want >= 0 && mode != want) || fl == NULL || strcmp(fl, l->fence_lock) != 0)
    return -1;
  if (l->mode < 0) l->mode = mode;
  return 0;
}

int picket_lease_valid(const picket_lease *l) {
  int64_t d = atomic_load(&l->deadline_ms);
  return d > 0 && picket_now_ms() < d;
}

int64_t picket_lease_remaining_ms(const picket_lease *l) {
  int64_t d = atomic_load(&l->deadline_ms);
  int64_t left = d - picket_now_ms();
  return d > 0 && left > 0 ? left : 0;
}

/* ---- calls ------------------------------------------------------------------ */

/* picket_acquire (PICKET__KIND_LOCK), picket_sem_acquire (SEM, arg: the
 * limit), picket_rw_acquire (RW, arg: the mode) and picket_campaign
 * (ELECTION, with its value). */
static int acquire(picket_client *c, int kind, const char *name, int64_t arg,
                   const picket_acquire_opts *opts, const char *value, picket_lease **out) {
  picket_acquire_opts none = {0};
  int sem = kind == PICKET__KIND_SEM, rw = kind == PICKET__KIND_RW;
  int64_t limit = sem ? arg : 0;
  call_t call = {0};
  json_t *reply = NULL;
  char id[PICKET_PROTO_LEASE_LEN + 1] = "";
  int err;

  *out = NULL;
  clear_detail(c);
  if (opts == NULL) opts = &none;
  if ((err = set_url(c, &call, kind, name, kinds[kind].acquire)) != 0) return err;
  if (sem && (limit < 1 || limit > PICKET_SEM_LIMIT_MAX))
    return fail(c, PICKET_EINVAL, "a semaphore's limit is 1 to 100000");
  if (rw && arg != PICKET_MODE_READ && arg != PICKET_MODE_WRITE)
    return fail(c, PICKET_EINVAL, "an rwlock's mode is PICKET_MODE_READ or PICKET_MODE_WRITE");
  if (opts->ttl_ms < 0 || opts->wait_ms < 0 || opts->lock_delay_ms < 0 || opts->max_hold_ms < 0)
    return fail(c, PICKET_EINVAL,
                "ttl_ms, wait_ms, lock_delay_ms and max_hold_ms must not be negative");
  if (opts->owner != NULL && !picket_proto_owner_valid(opts->owner, strlen(opts->owner)))
    return fail(c, PICKET_EINVAL, "owner must be at most 128 characters of UTF-8 without control characters");
  if (!opts->server_lease_id) {
    if (opts->lease_id != NULL) {
      if (!picket_proto_lease_valid(opts->lease_id, strlen(opts->lease_id)))
        return fail(c, PICKET_EINVAL, "a lease id is 32 lowercase hex digits");
      strcpy(id, opts->lease_id);
    } else if (picket_proto_lease_new(id) != 0) {
      return fail(c, PICKET_ESYS, "getrandom failed");
    }
  }
  json_t *body = json_object();
  if (body == NULL) return fail(c, PICKET_ENOMEM, "out of memory");
  if (sem) json_object_set_new(body, "limit", json_integer(limit));
  if (rw) json_object_set_new(body, "mode", json_string(arg == PICKET_MODE_WRITE ? "write" : "read"));
  if (opts->ttl_ms > 0) json_object_set_new(body, "ttl_ms", json_integer(opts->ttl_ms));
  if (opts->wait_ms > 0) json_object_set_new(body, "wait_ms", json_integer(opts->wait_ms));
  if (opts->lock_delay_ms > 0)
    json_object_set_new(body, "lock_delay_ms", json_integer(opts->lock_delay_ms));
  if (opts->max_hold_ms > 0)
    json_object_set_new(body, "max_hold_ms", json_integer(opts->max_hold_ms));
  if (opts->owner != NULL && opts->owner[0] != '\0')
    json_object_set_new(body, "owner", json_string(opts->owner));
  if (id[0] != '\0') json_object_set_new(body, "lease", json_string(id));
  if (value != NULL) json_object_set_new(body, "value", json_string(value));
  if ((err = set_body(c, &call, body)) != 0) return err;
  call.extra_ms = opts->wait_ms;
  call.may_retry = id[0] != '\0';

  int64_t sent = 0;
  int repeated;
  err = perform(c, &call, &reply, &sent, &repeated);
  free(call.body);
  if (err != 0) return err;

  const char *lock = json_string_value(json_object_get(reply, kinds[kind].key));
  const char *lease = json_string_value(json_object_get(reply, "lease"));
  json_t *owner = json_object_get(reply, "owner");
  int64_t fence = get_int(reply, kinds[kind].fence, 1);
  int64_t ttl = get_int(reply, "ttl_ms", 1);
  if (lock == NULL || strcmp(lock, name) != 0 || lease == NULL ||
      !picket_proto_lease_valid(lease, strlen(lease)) || (id[0] && strcmp(lease, id) != 0) ||
      fence < 1 || ttl < 1 || (owner != NULL && !json_is_null(owner) && !json_is_string(owner))) {
    json_decref(reply);
    return proto_error(c, kind == PICKET__KIND_ELECTION
                              ? "campaign reply lacks election, lease, term or ttl_ms"
                              : "acquire reply lacks lock, lease, fence or ttl_ms");
  }
  picket_lease *l = NULL;
  if ((err = lease_new(kind, name, lease, &l)) != 0) {
    json_decref(reply);
    return fail(c, err, "out of memory");
  }
  l->fence = fence;
  l->limit = limit;
  if (take_fence_token(l, reply) < 0 ||
      (sem && (get_int(reply, "limit", 1) != limit || take_permit(l, reply) < 0)) ||
      (rw && take_mode(l, reply, (int)arg) < 0)) {
    json_decref(reply);
    picket_lease_free(l);
    return proto_error(c, sem  ? "acquire reply lacks permit, limit or fence_lock, or has a "
                                 "fence_token that is no token"
                          : rw ? "acquire reply lacks the mode asked for or fence_lock NAME:rw, "
                                 "or has a fence_token that is no token"
                               : "the grant's signed fence is no token");
  }
  if (json_is_string(owner) && json_string_length(owner) > 0) {
    l->has_owner = 1;
    snprintf(l->owner, sizeof l->owner, "%s", json_string_value(owner));
  }
  atomic_store(&l->ttl_ms, ttl);
  atomic_store(&l->sent_ms, sent);
  atomic_store(&l->deadline_ms, sent + ttl - drift_ms(c, ttl));
  l->deadline_sent_ms = sent; /* no other thread has l yet */
  if (opts->ttl_ms > 0 && ttl < opts->ttl_ms) atomic_store(&l->capped, 1);
  json_decref(reply);
  /* A waited grant was made at some moment between sending and the reply
   * that this clock cannot see: sent + ttl is still a safe deadline, but
   * the wait may have spent most or all of it. Renew at once then: the
   * renewal is sent after the grant, so its deadline is safe and full. */
  if (opts->wait_ms > 0 && picket_now_ms() - sent > ttl / 10) {
    err = picket__renew(c, l, ttl, 0);
    if (err != 0 && !picket_lease_valid(l)) {
      /* Without a deadline the lease is unusable: give the lock back. */
      char msg[256];
      snprintf(msg, sizeof msg, "the waited grant could not be renewed: %s",
               picket_client_error_message(c));
      picket_release(c, l);
      picket_lease_free(l);
      return fail(c, err, msg);
    }
  }
  *out = l;
  return 0;
}

int picket_acquire(picket_client *c, const char *name, const picket_acquire_opts *opts,
                   picket_lease **out) {
  return acquire(c, PICKET__KIND_LOCK, name, 0, opts, NULL, out);
}

int picket_sem_acquire(picket_client *c, const char *name, int64_t limit,
                       const picket_acquire_opts *opts, picket_lease **out) {
  return acquire(c, PICKET__KIND_SEM, name, limit, opts, NULL, out);
}

int picket_rw_acquire(picket_client *c, const char *name, int mode,
                      const picket_acquire_opts *opts, picket_lease **out) {
  return acquire(c, PICKET__KIND_RW, name, mode, opts, NULL, out);
}

int picket__acquire(picket_client *c, int kind, const char *name, int64_t arg,
                    const picket_acquire_opts *opts, const char *value, picket_lease **out) {
  return acquire(c, kind, name, arg, opts, value, out);
}

/* A renew, or a call by another verb whose reply is a renew's (an
 * election's proclaim), with extra's members (stolen) in the request. */
/* A successful renewal (number seq) sent at `sent` ends the lease, at
 * picketd, at about sent + its TTL: `d`. The local deadline follows the
 * NEWEST-SENT successful renewal, not the largest deadline: a renewal that
 * asked for a shorter TTL than before moves it back (picketd expires the
 * lease sooner now), so a reply to a renewal sent after the one that last
 * set the deadline (later, or in the same millisecond and started after
 * it) sets it to its own d, earlier or later. A late reply to an older
 * renewal (the keeper's and the caller's renewals may cross) may only
 * lower it, never raise it: picketd may have applied that renewal after
 * the newer one. Both ways are conservative. After a release
 * (deadline_sent_ms INT64_MAX) nothing raises it again. */
static void move_deadline(picket_lease *l, int64_t sent, uint64_t seq, int64_t d) {
  pthread_mutex_lock(&l->deadline_mu);
  if (sent > l->deadline_sent_ms || (sent == l->deadline_sent_ms && seq > l->deadline_seq)) {
    l->deadline_sent_ms = sent;
    l->deadline_seq = seq;
    atomic_store(&l->deadline_ms, d);
  } else if (d < atomic_load(&l->deadline_ms)) {
    atomic_store(&l->deadline_ms, d);
  }
  pthread_mutex_unlock(&l->deadline_mu);
}

static int renew(picket_client *c, picket_lease *l, const char *verb, json_t *extra,
                 int64_t ttl_ms, int64_t until_ms) {
  call_t call = {0};
  json_t *reply = NULL;
  int err;

  clear_detail(c);
  if (l == NULL || ttl_ms < 0) {
    json_decref(extra);
    return fail(c, PICKET_EINVAL, l ? "ttl_ms must not be negative" : "no lease");
  }
  if ((err = set_url(c, &call, l->kind, l->lock, verb)) != 0) {
    json_decref(extra);
    return err;
  }
  json_t *body = extra != NULL ? extra : json_object();
  if (body != NULL) json_object_set_new(body, "lease", json_string(l->id));
  if (body != NULL && ttl_ms > 0) json_object_set_new(body, "ttl_ms", json_integer(ttl_ms));
  if ((err = set_body(c, &call, body)) != 0) return err;
  call.may_retry = 1;
  call.lease = l;
  call.until_ms = until_ms;

  int64_t sent = 0;
  int repeated;
  uint64_t seq = atomic_fetch_add(&l->renewals_started, 1) + 1; /* the grant's is 0 */
  err = perform(c, &call, &reply, &sent, &repeated);
  free(call.body);
  if (err != 0) return err;
  int64_t ttl = get_int(reply, "ttl_ms", 1);
  int64_t fence = get_int(reply, kinds[l->kind].fence, 1);
  const char *lock = json_string_value(json_object_get(reply, kinds[l->kind].key));
  int same = lock != NULL && strcmp(lock, l->lock) == 0 &&
             (l->kind != PICKET__KIND_SEM || take_permit(l, reply) == 0) &&
             (l->kind != PICKET__KIND_RW || take_mode(l, reply, -1) == 0);
  /* the keeper renews while the caller may read the token: a renewal
   * only ever confirms it (same lock and fence), so it is not rewritten */
  int token_ok = json_object_get(reply, kinds[l->kind].token) == NULL ||
                 json_is_string(json_object_get(reply, kinds[l->kind].token));
  json_decref(reply);
  if (ttl < 1 || fence < 1 || !same || !token_ok || (l->fence != 0 && fence != l->fence))
    return proto_error(c, "renew reply lacks lock, fence or ttl_ms, or names another fence, "
                          "permit or mode");
  l->fence = fence;
  atomic_store(&l->ttl_ms, ttl);
  atomic_store(&l->sent_ms, sent);
  if (ttl_ms > 0 && ttl < ttl_ms) atomic_store(&l->capped, 1); /* max_hold_ms reached */
  move_deadline(l, sent, seq, sent + ttl - drift_ms(c, ttl));
  return 0;
}

int picket__renew(picket_client *c, picket_lease *l, int64_t ttl_ms, int64_t until_ms) {
  return renew(c, l, "renew", NULL, ttl_ms, until_ms);
}

int picket__renew_verb(picket_client *c, picket_lease *l, const char *verb, json_t *extra,
                       int64_t ttl_ms) {
  return renew(c, l, verb, extra, ttl_ms, 0);
}

int picket_renew(picket_client *c, picket_lease *l, int64_t ttl_ms) {
  return picket__renew(c, l, ttl_ms, 0);
}

int picket_release(picket_client *c, picket_lease *l) {
  call_t call = {0};
  json_t *reply = NULL;
  int err;

  clear_detail(c);
  if (l == NULL) return fail(c, PICKET_EINVAL, "no lease");
  if ((err = set_url(c, &call, l->kind, l->lock, kinds[l->kind].release)) != 0) return err;
  if ((err = set_body(c, &call, json_pack("{ss}", "lease", l->id))) != 0) return err;
  call.may_retry = 1;
  call.lease = l;
  int64_t sent = 0;
  int repeated;
  err = perform(c, &call, &reply, &sent, &repeated);
  free(call.body);
  /* Whatever happens the caller must stop using the lease now, and no
   * renewal's late reply may give it a deadline again. */
  pthread_mutex_lock(&l->deadline_mu);
  l->deadline_sent_ms = INT64_MAX;
  atomic_store(&l->deadline_ms, 0);
  pthread_mutex_unlock(&l->deadline_mu);
  if (err == PICKET_ELOST && repeated) {
    /* An earlier attempt may have released it: the goal is reached. */
    clear_detail(c);
    return 0;
  }
  if (err != 0) return err;
  int released = json_is_true(json_object_get(reply, kinds[l->kind].released));
  json_decref(reply);
  if (!released) return proto_error(c, "release (resign) reply lacks \"released\" (\"resigned\"): true");
  return 0;
}

/* GET of a `kind` (PICKET__KIND_*) thing's state, with retries. */
static int get_state(picket_client *c, int kind, const char *name, size_t reply_max,
                     json_t **reply) {
  call_t call = {0};
  int err;
  clear_detail(c);
  if ((err = set_url(c, &call, kind, name, NULL)) != 0) return err;
  call.may_retry = 1;
  call.reply_max = reply_max;
  int64_t sent = 0;
  int repeated;
  return perform(c, &call, reply, &sent, &repeated);
}

/* An "owner" member (NULL, null or a string) into has/buf: 0, or -1 when
 * it has another type. */
static int take_owner(const json_t *owner, int *has, char *buf, size_t cap) {
  if (owner != NULL && !json_is_null(owner) && !json_is_string(owner)) return -1;
  if (json_is_string(owner) && json_string_length(owner) > 0) {
    *has = 1;
    snprintf(buf, cap, "%s", json_string_value(owner));
  }
  return 0;
}

int picket__get_state(picket_client *c, int kind, const char *name, json_t **reply) {
  return get_state(c, kind, name, 0, reply);
}

int64_t picket__json_int(const json_t *j, const char *key, int64_t min) {
  return get_int(j, key, min);
}
int picket__json_owner(const json_t *owner, int *has, char *buf, size_t cap) {
  return take_owner(owner, has, buf, cap);
}

/* An optional integer member that may be null: 0 with *out = its value
 * (>= min), or `absent` when missing or null; -1 when mistyped or smaller. */
static int take_nullable(const json_t *j, const char *key, int64_t min, int64_t absent,
                         int64_t *out) {
  json_t *v = json_object_get(j, key);
  *out = absent;
  if (v == NULL || json_is_null(v)) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < min) return -1;
  *out = json_integer_value(v);
  return 0;
}

/* A lease's acquired_at (> 0, else 0 for unknown) and renewals (-1 for
 * unknown): 0, or -1 when either is mistyped. */
static int take_grant_time(const json_t *j, int64_t *at, int64_t *renewals) {
  if (take_nullable(j, "acquired_at", 0, 0, at) < 0) return -1;
  return take_nullable(j, "renewals", 0, -1, renewals);
}

int picket_inspect(picket_client *c, const char *name, picket_lock_info *info) {
  json_t *reply = NULL;
  int err;

  memset(info, 0, sizeof *info);
  if ((err = get_state(c, PICKET__KIND_LOCK, name, 0, &reply)) != 0) return err;
  json_t *held = json_object_get(reply, "held");
  int64_t fence = get_int(reply, "fence", 0);
  int64_t ttl = get_int(reply, "ttl_ms", 0);
  if (!json_is_boolean(held) || fence < 0 || ttl < 0 ||
      take_owner(json_object_get(reply, "owner"), &info->has_owner, info->owner,
                 sizeof info->owner) < 0 ||
      take_grant_time(reply, &info->acquired_at_ms, &info->renewals) < 0 ||
      take_nullable(reply, "waiters", 0, -1, &info->waiters) < 0) {
    json_decref(reply);
    memset(info, 0, sizeof *info);
    return proto_error(c, "inspect reply lacks held, fence or ttl_ms, or has a mistyped "
                          "acquired_at, renewals or waiters");
  }
  info->held = json_is_true(held);
  info->fence = fence;
  info->ttl_ms = ttl;
  json_decref(reply);
  return 0;
}

void picket_sem_info_clear(picket_sem_info *info) {
  if (info == NULL) return;
  free(info->permits);
  memset(info, 0, sizeof *info);
}

/* The n objects of the JSON array `arr` into a new array of n elements
 * of `size` bytes (*out; NULL when n is 0), each filled by take (which
 * returns 0, or -1 when the object is malformed). Returns 0, or
 * PICKET_ENOMEM or PICKET_EPROTO (`what` says which element) with nothing
 * allocated. */
static int take_array(picket_client *c, const json_t *arr, size_t size,
                      int (*take)(void *elem, const json_t *o), const char *what, void **out) {
  size_t n = json_array_size(arr);
  char *a = NULL;
  *out = NULL;
  if (n > 0 && (a = calloc(n, size)) == NULL) return fail(c, PICKET_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    if (take(a + i * size, json_array_get(arr, i)) < 0) {
      free(a);
      return proto_error(c, what);
    }
  }
  *out = a;
  return 0;
}

/* One entry of a semaphore's "permits" into a picket_permit_info: 0, or
 * -1 when malformed. */
static int take_permit_info(void *elem, const json_t *o) {
  picket_permit_info *p = elem;
  const char *fl = json_string_value(json_object_get(o, "fence_lock"));
  p->permit = get_int(o, "permit", 0);
  p->fence = get_int(o, "fence", 0);
  p->ttl_ms = get_int(o, "ttl_ms", 0);
  p->lock_delay_ms = json_object_get(o, "lock_delay_ms") ? get_int(o, "lock_delay_ms", 0) : 0;
  if (p->permit < 0 || p->fence < 0 || p->ttl_ms < 0 || p->lock_delay_ms < 0 || fl == NULL ||
      strlen(fl) > PICKET_NAME_MAX)
    return -1;
  strcpy(p->fence_lock, fl);
  return take_owner(json_object_get(o, "owner"), &p->has_owner, p->owner, sizeof p->owner);
}

int picket_sem_inspect(picket_client *c, const char *name, picket_sem_info *info) {
  json_t *reply = NULL;
  int err;

  memset(info, 0, sizeof *info);
  if ((err = get_state(c, PICKET__KIND_SEM, name, SEM_REPLY_MAX, &reply)) != 0) return err;
  json_t *permits = json_object_get(reply, "permits");
  info->limit = get_int(reply, "limit", 0);
  info->held = get_int(reply, "held", 0);
  info->waiters = get_int(reply, "waiters", 0);
  void *elems = NULL;
  if (info->limit < 0 || info->held < 0 || info->waiters < 0 || !json_is_array(permits))
    err = proto_error(c, "semaphore reply lacks limit, held, permits or waiters");
  else
    err = take_array(c, permits, sizeof *info->permits, take_permit_info,
                     "semaphore reply has a malformed permit", &elems);
  if (err == 0) {
    info->permits = elems;
    info->npermits = json_array_size(permits);
  } else {
    memset(info, 0, sizeof *info);
  }
  json_decref(reply);
  return err;
}

void picket_rw_info_clear(picket_rw_info *info) {
  if (info == NULL) return;
  free(info->reads);
  memset(info, 0, sizeof *info);
}

/* An rwlock's "writer" (null or an object) into info: 0, or -1 when malformed. */
static int take_writer(picket_rw_info *info, json_t *w) {
  if (w == NULL || json_is_null(w)) return json_is_null(w) ? 0 : -1;
  info->writer = 1;
  info->writer_ttl_ms = get_int(w, "ttl_ms", 0);
  info->writer_lock_delay_ms =
      json_object_get(w, "lock_delay_ms") ? get_int(w, "lock_delay_ms", 0) : 0;
  if (!json_is_object(w) || info->writer_ttl_ms < 0 || info->writer_lock_delay_ms < 0) return -1;
  return take_owner(json_object_get(w, "owner"), &info->has_writer_owner, info->writer_owner,
                    sizeof info->writer_owner);
}

/* One of an rwlock's "read_leases" into a picket_read_info: 0, or -1 when
 * malformed. */
static int take_read_info(void *elem, const json_t *o) {
  picket_read_info *r = elem;
  r->fence = get_int(o, "fence", 0);
  r->ttl_ms = get_int(o, "ttl_ms", 0);
  if (r->fence < 0 || r->ttl_ms < 0) return -1;
  return take_owner(json_object_get(o, "owner"), &r->has_owner, r->owner, sizeof r->owner);
}

int picket_rw_inspect(picket_client *c, const char *name, picket_rw_info *info) {
  json_t *reply = NULL;
  int err;

  memset(info, 0, sizeof *info);
  if ((err = get_state(c, PICKET__KIND_RW, name, 0, &reply)) != 0) return err;
  json_t *reads = json_object_get(reply, "read_leases");
  size_t n = json_array_size(reads);
  info->fence = get_int(reply, "fence", 0);
  info->readers = get_int(reply, "readers", 0);
  info->writers_waiting = get_int(reply, "writers_waiting", 0);
  info->waiters = get_int(reply, "waiters", 0);
  void *elems = NULL;
  if (info->fence < 0 || info->readers < 0 || info->writers_waiting < 0 || info->waiters < 0 ||
      !json_is_array(reads) || n > PICKET_PROTO_RW_LISTED_MAX ||
      take_writer(info, json_object_get(reply, "writer")) < 0)
    err = proto_error(c, "rwlock reply lacks fence, writer, readers, read_leases, "
                         "writers_waiting or waiters");
  else
    err = take_array(c, reads, sizeof *info->reads, take_read_info,
                     "rwlock reply has a malformed read lease", &elems);
  if (err == 0) {
    info->reads = elems;
    info->nreads = n;
  } else {
    memset(info, 0, sizeof *info);
  }
  json_decref(reply);
  return err;
}

/* ---- operators ------------------------------------------------------------ */

#define NAME_BYTES "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"

/* 1 when s is a listing's prefix: up to PICKET_NAME_MAX bytes of the
 * lock-name bytes ("" too). */
static int prefix_valid(const char *s) {
  size_t n = strlen(s);
  return n <= PICKET_NAME_MAX && strspn(s, NAME_BYTES) == n;
}

/* 1 when s may be a listing's cursor: 1..PICKET_LIST_CURSOR_MAX bytes of
 * the lock-name bytes, '~' and '/' (what picketd makes, proto/openapi.yaml
 * ListCursor; it checks the rest). */
static int cursor_valid(const char *s, size_t n) {
  return n > 0 && n <= PICKET_LIST_CURSOR_MAX && strspn(s, NAME_BYTES "~/") == n;
}

/* Appends "&key=" and value, percent-encoded, to url (cap bytes). */
static void query_append(char *url, size_t cap, const char *key, const char *value) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(url);
  n += (size_t)snprintf(url + n, cap - n, "%s%s=", strchr(url, '?') ? "&" : "?", key);
  for (const unsigned char *p = (const unsigned char *)value; *p && n + 4 < cap; p++) {
    if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", *p)) {
      url[n++] = (char)*p;
    } else {
      url[n++] = '%';
      url[n++] = hex[*p >> 4];
      url[n++] = hex[*p & 15];
    }
  }
  url[n] = '\0';
}

void picket_lock_list_clear(picket_lock_list *list) {
  if (list == NULL) return;
  free(list->entries);
  free(list->cursor);
  memset(list, 0, sizeof *list);
}

/* One entry of a listing into a picket_lock_entry: 0, or -1 when malformed. */
static int take_entry(void *elem, const json_t *o) {
  picket_lock_entry *e = elem;
  static const char *const kind_names[] = {[PICKET_KIND_LOCK] = "lock",
                                           [PICKET_KIND_SEMAPHORE] = "semaphore",
                                           [PICKET_KIND_RWLOCK] = "rwlock"};
  const char *kind = json_string_value(json_object_get(o, "kind"));
  const char *name = json_string_value(json_object_get(o, "name"));
  e->kind = -1;
  for (int k = 0; kind != NULL && k < (int)(sizeof kind_names / sizeof kind_names[0]); k++)
    if (strcmp(kind, kind_names[k]) == 0) e->kind = k;
  if (e->kind < 0 || name == NULL || !picket_proto_name_valid(name, strlen(name))) return -1;
  strcpy(e->name, name);
  int sem = e->kind == PICKET_KIND_SEMAPHORE;
  e->holders = get_int(o, "holders", 1);
  e->ttl_ms = get_int(o, "ttl_ms", 0);
  e->waiters = get_int(o, "waiters", 0);
  e->limit = sem ? get_int(o, "limit", 1) : 0;
  if (e->holders < 1 || e->ttl_ms < 0 || e->waiters < 0 || e->limit < 0 ||
      take_nullable(o, "fence", 0, -1, &e->fence) < 0 ||
      take_grant_time(o, &e->acquired_at_ms, &e->renewals) < 0)
    return -1;
  return take_owner(json_object_get(o, "owner"), &e->has_owner, e->owner, sizeof e->owner);
}

int picket_list(picket_client *c, const char *prefix, int limit, const char *cursor,
                picket_lock_list *out) {
  call_t call = {0};
  json_t *reply = NULL;
  int64_t sent;
  int repeated, err;

  memset(out, 0, sizeof *out);
  clear_detail(c);
  if (prefix == NULL) prefix = "";
  if (!prefix_valid(prefix))
    return fail(c, PICKET_EINVAL, "a prefix is up to 200 bytes of [A-Za-z0-9._:-]");
  if (limit < 0 || limit > PICKET_LIST_MAX)
    return fail(c, PICKET_EINVAL, "a page's limit is 1 to 1000 (0: the server's default)");
  if (cursor != NULL && !cursor_valid(cursor, strlen(cursor)))
    return fail(c, PICKET_EINVAL, "a cursor is one a listing returned, unchanged");
  snprintf(call.url, sizeof call.url, "%s/v1/locks", c->base_url);
  if (prefix[0] != '\0') query_append(call.url, sizeof call.url, "prefix", prefix);
  if (limit > 0) {
    char v[16];
    snprintf(v, sizeof v, "%d", limit);
    query_append(call.url, sizeof call.url, "limit", v);
  }
  if (cursor != NULL) query_append(call.url, sizeof call.url, "cursor", cursor);
  call.may_retry = 1;
  call.reply_max = LIST_REPLY_MAX;
  if ((err = perform(c, &call, &reply, &sent, &repeated)) != 0) return err;

  json_t *locks = json_object_get(reply, "locks");
  json_t *next = json_object_get(reply, "cursor");
  size_t n = json_array_size(locks);
  if (!json_is_array(locks) || n > (size_t)(limit > 0 ? limit : PICKET_LIST_MAX) ||
      !(json_is_null(next) ||
        (json_is_string(next) && cursor_valid(json_string_value(next), json_string_length(next))))) {
    json_decref(reply);
    return proto_error(c, "listing lacks locks or cursor, or has more entries than asked for");
  }
  void *elems = NULL;
  err = take_array(c, locks, sizeof *out->entries, take_entry, "listing has a malformed entry",
                   &elems);
  if (err == 0 && json_is_string(next) && (out->cursor = strdup(json_string_value(next))) == NULL) {
    free(elems);
    err = fail(c, PICKET_ENOMEM, "out of memory");
  }
  if (err == 0) {
    out->entries = elems;
    out->nentries = n;
  }
  json_decref(reply);
  return err;
}

int picket_break(picket_client *c, const char *name, picket_break_result *out) {
  call_t call = {0};
  json_t *reply = NULL;
  int64_t sent;
  int repeated, err;

  memset(out, 0, sizeof *out);
  clear_detail(c);
  if ((err = set_url(c, &call, PICKET__KIND_LOCK, name, "break")) != 0) return err;
  if ((err = set_body(c, &call, json_object())) != 0) return err;
  call.may_retry = 0; /* a repeat could break the next holder's new lease */
  err = perform(c, &call, &reply, &sent, &repeated);
  free(call.body);
  if (err != 0) return err;
  const char *lock = json_string_value(json_object_get(reply, "lock"));
  json_t *broken = json_object_get(reply, "broken");
  out->fence = get_int(reply, "fence", 1);
  if (lock == NULL || strcmp(lock, name) != 0 || !json_is_boolean(broken) || out->fence < 1 ||
      take_owner(json_object_get(reply, "owner"), &out->has_owner, out->owner,
                 sizeof out->owner) < 0) {
    json_decref(reply);
    memset(out, 0, sizeof *out);
    return proto_error(c, "break reply lacks lock, broken, fence or owner");
  }
  out->broken = json_is_true(broken);
  json_decref(reply);
  return 0;
}
