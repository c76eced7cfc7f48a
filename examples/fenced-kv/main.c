/* fenced-kv: a small HTTP key-value store that checks fencing tokens, the
 * storage half of picket's protocol (DESIGN.md, "Validator and fenced-kv").
 *
 * This file owns the process: flags, the libmicrohttpd daemon, routing,
 * request bodies and JSON replies. The fence rule itself is in store.c, as
 * SQL inside the write's transaction, so a value and the highest fence that
 * admitted it reach the disk together.
 *
 *   PUT  /kv/{key}           Picket-Lock + Picket-Fence (+ If-Match) -> {key, version, fence}
 *   GET  /kv/{key}           -> {key, value, version, fence}
 *   POST /fence/{lock}/claim Picket-Fence -> {lock, fence}
 *   GET  /fence/{lock}       -> {lock, highest}
 *
 * It verifies instead of trusting (issue 17). With --fence-key-file, a write
 * or claim must carry the grant's signed fence (Picket-Fence-Token), checked
 * before anything else touches the store, so a made-up fence (2^63-1, say)
 * is a 403 fence_invalid that changes nothing; without a key file the
 * fences are trusted as given, and the startup log says so. A key is bound
 * to the lock of its first write (store.c), the number of locks is bounded
 * (--max-locks), and so are connections: --max-connections in all,
 * --max-connections-per-ip, and a whole-request deadline (conns.c).
 *
 * libmicrohttpd runs one internal thread, so requests are handled one at a
 * time on one SQLite connection: simple, and each write is fsynced before
 * its reply anyway (synchronous=FULL), so the disk, not the thread, bounds
 * throughput. With --no-fence it is the plain store the article's team had:
 * the same binary and routes, but PUT needs and checks no fence. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conns.h"
#include "picket/fence.h"
#include "picket_proto.h"
#include "store.h"

#define FKV_VALUE_MAX (64 * 1024) /* values: at most 64 KiB of UTF-8 */
#define FKV_CONN_TIMEOUT_S 30     /* idle: a client that reads no reply */
#define FKV_LISTEN_DEFAULT "127.0.0.1:7071"
#define FKV_MAX_LOCKS_DEFAULT 100000
#define FKV_MAX_CONNS_DEFAULT 256
#define FKV_MAX_CONNS_PER_IP_DEFAULT 32
#define FKV_REQUEST_TIMEOUT_MS_DEFAULT 10000
#define STR_(x) #x
#define STR(x) STR_(x)

typedef struct {
  const char *listen;
  const char *db;
  const char *port_file;
  const char *key_file;
  const char *key_prefix;
  int no_fence, accept_v1;
  long long max_locks, max_conns, max_conns_per_ip, request_timeout_ms;
} config;

static config cfg = {
    .listen = FKV_LISTEN_DEFAULT,
    .key_prefix = PICKET_PROTO_KEY_PREFIX_DEFAULT,
    .max_locks = FKV_MAX_LOCKS_DEFAULT,
    .max_conns = FKV_MAX_CONNS_DEFAULT,
    .max_conns_per_ip = FKV_MAX_CONNS_PER_IP_DEFAULT,
    .request_timeout_ms = FKV_REQUEST_TIMEOUT_MS_DEFAULT,
};

static store *db;
/* The verifying keys (NULL without --fence-key-file). SIGHUP swaps them on
 * the main thread while the HTTP thread verifies: keys_mu guards the swap. */
static picket_fence_keys *keys;
static pthread_mutex_t keys_mu = PTHREAD_MUTEX_INITIALIZER;

/* Per-request state, kept between libmicrohttpd's calls of one request. */
typedef struct {
  char *body;
  size_t len;
  int too_big; /* the body passed FKV_VALUE_MAX: the rest is discarded */
} request;

/* ---- replies ---- */

/* Sends `j` (this function takes the reference) with `status`, and an
 * Allow header when `allow` is not NULL. */
static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, json_t *j,
                                  const char *allow) {
  char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (text == NULL) return MHD_NO;
  size_t len = strlen(text);
  text[len] = '\n'; /* replaces the NUL: replies end with a newline for curl users */
  struct MHD_Response *r = MHD_create_response_from_buffer(len + 1, text, MHD_RESPMEM_MUST_FREE);
  if (r == NULL) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  /* One request a connection: the request deadline (conns.c) can then
   * start at the accept, and no idle keep-alive connection holds a slot. */
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

/* {"error": {"code", "message"[, "highest"]}} from the proto error table;
 * `message` NULL uses the table's. highest < 0 leaves it out. */
static enum MHD_Result reply_error(struct MHD_Connection *c, picket_proto_err e,
                                   const char *message, int64_t highest, const char *allow) {
  json_t *err = json_pack("{s:s, s:s}", "code", picket_proto_err_code(e), "message",
                          message ? message : picket_proto_err_message(e));
  if (err && highest >= 0) json_object_set_new(err, "highest", json_integer(highest));
  return reply_json(c, (unsigned)picket_proto_err_status(e), json_pack("{s:o}", "error", err),
                    allow);
}

static enum MHD_Result reply_bad(struct MHD_Connection *c, const char *message) {
  return reply_error(c, PICKET_PROTO_ERR_INVALID_ARGUMENT, message, -1, NULL);
}

static enum MHD_Result reply_store_error(struct MHD_Connection *c) {
  fprintf(stderr, "fenced-kv: sqlite: %s\n", store_errmsg(db));
  return reply_error(c, PICKET_PROTO_ERR_INTERNAL, "the database failed; nothing was written",
                     -1, NULL);
}

/* The replies of a refused fenced write or claim (store_put, store_claim)
 * that are not particular to it; anything else is a database failure. */
static enum MHD_Result reply_refused(struct MHD_Connection *c, store_result r, int64_t highest) {
  switch (r) {
  case STORE_STALE:
    return reply_error(c, PICKET_PROTO_ERR_STALE_FENCE, NULL, highest, NULL);
  case STORE_WRONG_LOCK:
    return reply_error(c, PICKET_PROTO_ERR_WRONG_LOCK,
                       "this key is bound to the lock of its first write; this write names another",
                       -1, NULL);
  case STORE_FULL: {
    char msg[128];
    snprintf(msg, sizeof msg, "this store tracks %lld locks (--max-locks): a new lock is refused",
             cfg.max_locks);
    return reply_error(c, PICKET_PROTO_ERR_TOO_MANY_LOCKS, msg, -1, NULL);
  }
  default:
    return reply_store_error(c);
  }
}

/* ---- request checks ---- */

/* UTF-8 text: well-formed (no overlong forms, no surrogates, at most
 * U+10FFFF) and without NUL bytes. Returns 1 when valid. */
static int utf8_text_valid(const unsigned char *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    unsigned char b = s[i];
    size_t n;
    unsigned cp;
    if (b == 0) return 0;
    if (b < 0x80) {
      i++;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      n = 1, cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 2, cp = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 3, cp = b & 0x07;
    } else {
      return 0;
    }
    if (len - i <= n) return 0;
    for (size_t k = 1; k <= n; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    i += n + 1;
  }
  return 1;
}

static int name_ok(const char *s) {
  return s != NULL && picket_proto_name_valid(s, strnlen(s, PICKET_PROTO_NAME_MAX + 1));
}

static const char *header(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* The Picket-Fence header: 1 and *fence when present and well formed,
 * else 0 with a message for the 400 in *why. */
static int fence_header(struct MHD_Connection *c, int64_t *fence, const char **why) {
  const char *f = header(c, PICKET_PROTO_HEADER_FENCE);
  if (f == NULL) {
    *why = "missing Picket-Fence header (the fence of your lease)";
    return 0;
  }
  *fence = picket_fence_parse(f, strlen(f));
  if (*fence == 0) {
    *why = "malformed Picket-Fence header: want a decimal integer 1..2^63-1";
    return 0;
  }
  return 1;
}

/* With --fence-key-file: 1 when the request's Picket-Fence-Token verifies
 * for (--key-prefix, lock, fence), else 0 with a message for the 403 in
 * *why (which never quotes the token). Without a key file: 1. */
static int token_ok(struct MHD_Connection *c, const char *lock, int64_t fence, const char **why) {
  if (cfg.key_file == NULL) return 1;
  const char *t = header(c, PICKET_PROTO_HEADER_FENCE_TOKEN);
  if (t == NULL) {
    *why = "missing Picket-Fence-Token header: this store admits only fences that picketd "
           "signed (the grant's fence_token, PICKET_FENCE_TOKEN under picket run)";
    return 0;
  }
  pthread_mutex_lock(&keys_mu);
  int ok = picket_fence_token_verify(keys, cfg.key_prefix, lock, fence, t);
  pthread_mutex_unlock(&keys_mu);
  if (!ok)
    *why = "the Picket-Fence-Token is not picketd's signature of this lock and fence, for the kind "
           "of lease its name says (a read lease's token never writes)";
  return ok;
}

/* If-Match: a decimal version (0 means "the key must not exist yet").
 * Returns the version, -1 when absent, -2 when malformed. */
static int64_t if_match_header(struct MHD_Connection *c) {
  const char *m = header(c, MHD_HTTP_HEADER_IF_MATCH);
  if (m == NULL) return -1;
  if (strcmp(m, "0") == 0) return 0;
  int64_t v = picket_fence_parse(m, strlen(m)); /* same grammar as a fence */
  return v > 0 ? v : -2;
}

/* ---- handlers ---- */

static enum MHD_Result kv_put(struct MHD_Connection *c, const char *key, request *rq) {
  int64_t fence = 0, version, highest;
  const char *lock = NULL, *why;
  if (!cfg.no_fence) {
    lock = header(c, PICKET_PROTO_HEADER_LOCK);
    if (lock == NULL) return reply_bad(c, "missing Picket-Lock header (the lock guarding this key)");
    if (!name_ok(lock)) return reply_bad(c, "malformed Picket-Lock header: want [A-Za-z0-9._:-]{1,200}");
    if (!fence_header(c, &fence, &why)) return reply_bad(c, why);
  }
  int64_t if_match = if_match_header(c);
  if (if_match == -2) return reply_bad(c, "malformed If-Match header: want a decimal version");
  if (!utf8_text_valid((const unsigned char *)rq->body, rq->len))
    return reply_bad(c, "the value must be UTF-8 text without NUL bytes");
  if (!cfg.no_fence && !token_ok(c, lock, fence, &why))
    return reply_error(c, PICKET_PROTO_ERR_FENCE_INVALID, why, -1, NULL);

  store_result r = store_put(db, key, rq->body ? rq->body : "", rq->len, lock, fence, if_match,
                             &version, &highest);
  if (r == STORE_OK)
    return reply_json(c, MHD_HTTP_OK,
                      json_pack("{s:s, s:I, s:I}", "key", key, "version", (json_int_t)version,
                                "fence", (json_int_t)fence),
                      NULL);
  if (r == STORE_MISMATCH) {
    char msg[96];
    snprintf(msg, sizeof msg, "the stored version is %lld, not %lld", (long long)version,
             (long long)if_match);
    return reply_error(c, PICKET_PROTO_ERR_VERSION_MISMATCH, msg, -1, NULL);
  }
  return reply_refused(c, r, highest);
}

static enum MHD_Result kv_get(struct MHD_Connection *c, const char *key) {
  char *value, lock[PICKET_PROTO_NAME_MAX + 1];
  size_t len;
  int64_t version, fence;
  switch (store_get(db, key, &value, &len, &version, &fence, lock, sizeof lock)) {
  case STORE_OK: {
    /* "lock": null for a key no fenced write has bound yet */
    json_t *j = json_pack("{s:s, s:s%, s:I, s:I, s:s?}", "key", key, "value", value, len,
                          "version", (json_int_t)version, "fence", (json_int_t)fence, "lock",
                          lock[0] ? lock : NULL);
    free(value);
    return reply_json(c, MHD_HTTP_OK, j, NULL);
  }
  case STORE_NOT_FOUND:
    return reply_error(c, PICKET_PROTO_ERR_NOT_FOUND, "no such key", -1, NULL);
  default:
    return reply_store_error(c);
  }
}

static enum MHD_Result fence_claim(struct MHD_Connection *c, const char *lock) {
  int64_t fence, highest;
  const char *why, *hl = header(c, PICKET_PROTO_HEADER_LOCK);
  if (hl != NULL && strcmp(hl, lock) != 0)
    return reply_bad(c, "the Picket-Lock header names another lock than the path");
  if (!fence_header(c, &fence, &why)) return reply_bad(c, why);
  if (!token_ok(c, lock, fence, &why))
    return reply_error(c, PICKET_PROTO_ERR_FENCE_INVALID, why, -1, NULL);
  store_result r = store_claim(db, lock, fence, &highest);
  if (r == STORE_OK)
    return reply_json(c, MHD_HTTP_OK, json_pack("{s:s, s:I}", "lock", lock, "fence", (json_int_t)fence),
                      NULL);
  return reply_refused(c, r, highest);
}

static enum MHD_Result fence_get(struct MHD_Connection *c, const char *lock) {
  int64_t highest;
  if (store_highest(db, lock, &highest) != STORE_OK) return reply_store_error(c);
  return reply_json(c, MHD_HTTP_OK,
                    json_pack("{s:s, s:I}", "lock", lock, "highest", (json_int_t)highest), NULL);
}

/* Routes a complete request. The path names come from the URL as
 * libmicrohttpd decoded it; a name is checked against the lock-name rule
 * before anything else, so "/kv/a%2Fb" is a 400, never a file path. */
static enum MHD_Result route(struct MHD_Connection *c, const char *url, const char *method,
                             request *rq) {
  if (!conns_request_complete(c)) return MHD_NO; /* too late: it has its 408 */
  int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  if (strncmp(url, "/kv/", 4) == 0) {
    const char *key = url + 4;
    int put = strcmp(method, MHD_HTTP_METHOD_PUT) == 0;
    if (!get && !put)
      return reply_error(c, PICKET_PROTO_ERR_METHOD_NOT_ALLOWED, NULL, -1, "GET, PUT");
    if (put && rq->too_big) return reply_error(c, PICKET_PROTO_ERR_BODY_TOO_LARGE, "values are at most 64 KiB", -1, NULL);
    if (!name_ok(key)) return reply_bad(c, "malformed key: want [A-Za-z0-9._:-]{1,200}");
    return put ? kv_put(c, key, rq) : kv_get(c, key);
  }
  if (strncmp(url, "/fence/", 7) == 0) {
    /* "/fence/{lock}" or "/fence/{lock}/claim"; a lock name has no '/'. */
    char lock[PICKET_PROTO_NAME_MAX + 2];
    const char *rest = url + 7, *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    int claim = slash != NULL && strcmp(slash, "/claim") == 0;
    if (slash != NULL && !claim) return reply_error(c, PICKET_PROTO_ERR_NOT_FOUND, NULL, -1, NULL);
    if (claim ? strcmp(method, MHD_HTTP_METHOD_POST) != 0 : !get)
      return reply_error(c, PICKET_PROTO_ERR_METHOD_NOT_ALLOWED, NULL, -1, claim ? "POST" : "GET");
    if (n > PICKET_PROTO_NAME_MAX) n = PICKET_PROTO_NAME_MAX + 1; /* too long: invalid anyway */
    memcpy(lock, rest, n);
    lock[n] = '\0';
    if (!name_ok(lock)) return reply_bad(c, "malformed lock name: want [A-Za-z0-9._:-]{1,200}");
    if (rq->too_big) return reply_error(c, PICKET_PROTO_ERR_BODY_TOO_LARGE, NULL, -1, NULL);
    return claim ? fence_claim(c, lock) : fence_get(c, lock);
  }
  return reply_error(c, PICKET_PROTO_ERR_NOT_FOUND, NULL, -1, NULL);
}

/* libmicrohttpd's access handler: called once with the headers, then with
 * each piece of the body, then once more with none, when we reply. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  request *rq = *con_cls;
  if (rq == NULL) {
    if ((rq = calloc(1, sizeof *rq)) == NULL) return MHD_NO;
    *con_cls = rq;
    /* A declared length over the limit is refused before it is sent. */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl != NULL && strtoull(cl, NULL, 10) > FKV_VALUE_MAX) {
      rq->too_big = 1;
      return route(c, url, method, rq);
    }
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (rq->too_big || rq->len + n > FKV_VALUE_MAX) {
      rq->too_big = 1;
      return MHD_YES;
    }
    char *b = realloc(rq->body, rq->len + n + 1);
    if (b == NULL) return MHD_NO;
    memcpy(b + rq->len, upload_data, n);
    rq->body = b;
    rq->len += n;
    rq->body[rq->len] = '\0';
    return MHD_YES;
  }
  return route(c, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  request *rq = *con_cls;
  if (rq == NULL) return;
  free(rq->body);
  free(rq);
  *con_cls = NULL;
}

/* ---- process ---- */

/* Every flag, for parsing and --help alike: a string (str), a whole number
 * in min..max (num), or a switch (on). */
static const struct {
  const char *name, *arg, *help;
  const char **str;
  long long *num, min, max;
  int *on;
} flags[] = {
    {"--db", "FILE", "SQLite database (created if missing; required)", .str = &cfg.db},
    {"--listen", "HOST:PORT",
     "address to serve on (default " FKV_LISTEN_DEFAULT ";\n"
     "port 0 picks one)",
     .str = &cfg.listen},
    {"--port-file", "PATH", "write the bound port there once listening", .str = &cfg.port_file},
    {"--fence-key-file", "PATH",
     "picketd's --fence-key-file: admit a write or\n"
     "claim only with a Picket-Fence-Token that\n"
     "verifies for its lock and fence (else 403\n"
     "fence_invalid); SIGHUP rereads it. Without it,\n"
     "fences are trusted as given. A token must be\n"
     "of the kind its lock name says (NAME:rw a\n"
     "write lease's, NAME:permit:I a permit's, any\n"
     "other a lock's): a read lease's never writes",
     .str = &cfg.key_file},
    {"--accept-v1-fence-tokens", NULL,
     "also admit v1 tokens (no kind signed) while\n"
     "picketd is upgraded; drop it once the leases\n"
     "granted before have ended",
     .on = &cfg.accept_v1},
    {"--key-prefix", "P",
     "picketd's --key-prefix, which tokens sign\n"
     "(default " PICKET_PROTO_KEY_PREFIX_DEFAULT ")",
     .str = &cfg.key_prefix},
    {"--max-locks", "N",
     "locks with a highest fence at most; a write or\n"
     "claim that would add one more is 507\n"
     "too_many_locks (default " STR(FKV_MAX_LOCKS_DEFAULT) ")",
     .num = &cfg.max_locks, .min = 1, .max = INT64_MAX},
    {"--max-connections", "N", "open connections at most (default " STR(FKV_MAX_CONNS_DEFAULT) ")",
     .num = &cfg.max_conns, .min = 1, .max = 65536},
    {"--max-connections-per-ip", "N",
     "open connections from one address at most,\n"
     "loopback too; 0: no cap (default " STR(FKV_MAX_CONNS_PER_IP_DEFAULT) ")",
     .num = &cfg.max_conns_per_ip, .min = 0, .max = 65536},
    {"--request-timeout-ms", "MS",
     "a request must arrive whole (line, headers,\n"
     "body) within MS of its connection's accept,\n"
     "else a bare 408 and close (default " STR(FKV_REQUEST_TIMEOUT_MS_DEFAULT) ")",
     .num = &cfg.request_timeout_ms, .min = 100, .max = 3600000},
    {"--no-fence", NULL,
     "act as a plain store: PUT needs and checks no\n"
     "fence (demos only)",
     .on = &cfg.no_fence},
};
#define NFLAGS (sizeof flags / sizeof flags[0])

static void usage(FILE *f) {
  fputs("usage: fenced-kv --db FILE [options]\n", f);
  for (size_t i = 0; i < NFLAGS; i++) {
    char left[64];
    snprintf(left, sizeof left, "%s%s%s", flags[i].name, flags[i].arg ? " " : "",
             flags[i].arg ? flags[i].arg : "");
    fprintf(f, "  %-29s ", left);
    for (const char *h = flags[i].help; *h; h++) { /* continued lines are indented */
      if (*h == '\n') fprintf(f, "\n%32s", "");
      else fputc(*h, f);
    }
    fputc('\n', f);
  }
}

__attribute__((format(printf, 1, 2), noreturn)) static void die_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fenced-kv: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs(" (see --help)\n", stderr);
  exit(2);
}

static void parse_flags(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *eq = strchr(a, '='), *val;
    size_t n = eq ? (size_t)(eq - a) : strlen(a), k;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    for (k = 0; k < NFLAGS; k++)
      if (strlen(flags[k].name) == n && strncmp(a, flags[k].name, n) == 0) break;
    if (k == NFLAGS) die_usage("unknown flag %s", a);
    if (flags[k].on) {
      if (eq) die_usage("%s takes no value", flags[k].name);
      *flags[k].on = 1;
      continue;
    }
    if (eq) {
      val = eq + 1;
    } else if (i + 1 < argc) {
      val = argv[++i];
    } else {
      die_usage("%s needs a value", flags[k].name);
    }
    /* An empty prefix is picketd's too; nothing else may be empty. */
    if (*val == '\0' && flags[k].str != &cfg.key_prefix) die_usage("%s needs a value", flags[k].name);
    if (flags[k].str) {
      *flags[k].str = val;
      continue;
    }
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (errno || *end || end == val || v < flags[k].min || v > flags[k].max)
      die_usage("%s wants a whole number from %lld to %lld", flags[k].name, flags[k].min,
                flags[k].max);
    *flags[k].num = v;
  }
  if (cfg.db == NULL) die_usage("%s is required", "--db FILE");
  if (!picket_proto_prefix_valid(cfg.key_prefix, strlen(cfg.key_prefix)))
    die_usage("--key-prefix: up to %d bytes of [A-Za-z0-9._:-]", PICKET_PROTO_KEY_PREFIX_MAX);
  if (cfg.no_fence && cfg.key_file)
    die_usage("--no-fence checks no fence: it cannot go with --fence-key-file");
  if (cfg.accept_v1 && cfg.key_file == NULL)
    die_usage("--accept-v1-fence-tokens needs --fence-key-file");
}

/* Resolves HOST:PORT ("[::1]:0" for IPv6) into *ss. Exits 2 when bad. */
static void parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *sslen) {
  char host[256];
  const char *colon = strrchr(listen, ':'), *port = colon ? colon + 1 : NULL;
  size_t hl = colon ? (size_t)(colon - listen) : 0;
  if (hl >= 2 && listen[0] == '[' && listen[hl - 1] == ']') listen++, hl -= 2;
  if (port == NULL || hl == 0 || hl >= sizeof host || *port == '\0' ||
      strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 || atoi(port) > 65535)
    die_usage("bad --listen %s: want HOST:PORT", listen);
  memcpy(host, listen, hl);
  host[hl] = '\0';
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV | AI_PASSIVE}, *res;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0) die_usage("bad --listen host: %s", gai_strerror(rc));
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *sslen = res->ai_addrlen;
  freeaddrinfo(res);
}

/* Writes the port to `path` through a temp file and rename, so a reader
 * never sees a half-written number. Returns 0 or -1. */
static int write_port_file(const char *path, int port) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) return -1;
  FILE *f = fopen(tmp, "w");
  if (f == NULL) return -1;
  int ok = fprintf(f, "%d\n", port) > 0;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* libmicrohttpd's messages (a connection past a limit, a client gone in
 * mid-request), at most 10 a second: a flood of hostile sockets must not
 * become a flood of log lines. Called on its thread only. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  static time_t second;
  static unsigned shown, dropped;
  (void)cls;
  time_t now = time(NULL);
  if (now != second) {
    if (dropped) fprintf(stderr, "fenced-kv: (%u more libmicrohttpd messages not shown)\n", dropped);
    second = now;
    shown = dropped = 0;
  }
  if (shown++ >= 10) {
    dropped++;
    return;
  }
  fputs("fenced-kv: ", stderr);
  vfprintf(stderr, fmt, ap);
  if (fmt[0] == '\0' || fmt[strlen(fmt) - 1] != '\n') fputc('\n', stderr);
}

/* SIGHUP: rereads --fence-key-file (to add a key before picketd signs with
 * it, or drop a retired one). A file that does not load leaves the keys as
 * they were. */
static void reload_keys(void) {
  char err[512];
  if (cfg.key_file == NULL) {
    fprintf(stderr, "fenced-kv: SIGHUP: no --fence-key-file to reread\n");
    return;
  }
  picket_fence_keys *k = picket_fence_keys_load(cfg.key_file, err, sizeof err);
  if (k == NULL) {
    fprintf(stderr, "fenced-kv: SIGHUP: keeping the keys in use: %s\n", err);
    return;
  }
  pthread_mutex_lock(&keys_mu);
  picket_fence_keys_accept_v1(k, cfg.accept_v1);
  picket_fence_keys *old = keys;
  keys = k;
  pthread_mutex_unlock(&keys_mu);
  picket_fence_keys_free(old);
  fprintf(stderr, "fenced-kv: SIGHUP: reread the keys of %s\n", cfg.key_file);
}

int main(int argc, char **argv) {
  parse_flags(argc, argv);
  struct sockaddr_storage ss;
  socklen_t sslen;
  parse_listen(cfg.listen, &ss, &sslen);

  char err[512];
  if (cfg.key_file && (keys = picket_fence_keys_load(cfg.key_file, err, sizeof err)) == NULL) {
    fprintf(stderr, "fenced-kv: --fence-key-file: %s\n", err);
    return 1;
  }
  picket_fence_keys_accept_v1(keys, cfg.accept_v1);
  if ((db = store_open(cfg.db, cfg.max_locks, err, sizeof err)) == NULL) {
    fprintf(stderr, "fenced-kv: cannot open database %s\n", err);
    picket_fence_keys_free(keys);
    return 1;
  }

  /* Block the signals before libmicrohttpd and the deadline's watchdog
   * start their threads, so they reach only sigwait below. */
  sigset_t wanted;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGINT);
  sigaddset(&wanted, SIGTERM);
  sigaddset(&wanted, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &wanted, NULL);
  signal(SIGPIPE, SIG_IGN);

  unsigned mhd_flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
  if (ss.ss_family == AF_INET6) mhd_flags |= MHD_USE_IPv6;
  struct MHD_Daemon *d = NULL;
  if (conns_start(cfg.request_timeout_ms) == 0)
    d = MHD_start_daemon(mhd_flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR,
                         (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                         MHD_OPTION_NOTIFY_CONNECTION, conns_notify, NULL,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg.max_conns,
                         MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg.max_conns_per_ip,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)FKV_CONN_TIMEOUT_S,
                         MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
  if (d == NULL) {
    fprintf(stderr, "fenced-kv: cannot listen on %s: %s\n", cfg.listen, strerror(errno));
    store_close(db);
    return 1;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  int port = -1;
  if (info && getsockname(info->listen_fd, (struct sockaddr *)&bound, &blen) == 0)
    port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                             : ((struct sockaddr_in *)&bound)->sin_port);
  if (port < 0 || (cfg.port_file && write_port_file(cfg.port_file, port) != 0)) {
    fprintf(stderr, "fenced-kv: cannot write port file %s\n", cfg.port_file ? cfg.port_file : "");
    MHD_stop_daemon(d);
    store_close(db);
    return 1;
  }
  fprintf(stderr, "fenced-kv: serving on port %d, database %s%s\n", port, cfg.db,
          cfg.no_fence ? ", UNFENCED (--no-fence: stale writes are accepted)" : "");
  if (cfg.key_file)
    fprintf(stderr, "fenced-kv: fences must be signed: verified with the keys of %s, prefix '%s'\n",
            cfg.key_file, cfg.key_prefix);
  else if (!cfg.no_fence)
    fprintf(stderr, "fenced-kv: warning: no --fence-key-file: fences are trusted as given, so any "
                    "client can claim any fence (2^63-1 locks every honest holder out)\n");

  int sig;
  for (;;) {
    if (sigwait(&wanted, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    reload_keys();
  }
  fprintf(stderr, "fenced-kv: %s, stopping\n", strsignal(sig));
  MHD_stop_daemon(d); /* waits for the request in progress */
  conns_stop();
  store_close(db);
  picket_fence_keys_free(keys);
  return 0;
}
