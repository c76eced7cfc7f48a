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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "picket/fence.h"
#include "picket_proto.h"
#include "store.h"

#define FKV_VALUE_MAX (64 * 1024) /* values: at most 64 KiB of UTF-8 */
#define FKV_CONN_MAX 256
#define FKV_CONN_TIMEOUT_S 30
#define FKV_LISTEN_DEFAULT "127.0.0.1:7071"

typedef struct {
  const char *listen;
  const char *db;
  const char *port_file;
  int no_fence;
} config;

static store *db;
static int no_fence;

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

static enum MHD_Result reply_stale(struct MHD_Connection *c, int64_t highest) {
  return reply_error(c, PICKET_PROTO_ERR_STALE_FENCE, NULL, highest, NULL);
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
  if (!no_fence) {
    lock = header(c, PICKET_PROTO_HEADER_LOCK);
    if (lock == NULL) return reply_bad(c, "missing Picket-Lock header (the lock guarding this key)");
    if (!name_ok(lock)) return reply_bad(c, "malformed Picket-Lock header: want [A-Za-z0-9._:-]{1,200}");
    if (!fence_header(c, &fence, &why)) return reply_bad(c, why);
  }
  int64_t if_match = if_match_header(c);
  if (if_match == -2) return reply_bad(c, "malformed If-Match header: want a decimal version");
  if (!utf8_text_valid((const unsigned char *)rq->body, rq->len))
    return reply_bad(c, "the value must be UTF-8 text without NUL bytes");

  switch (store_put(db, key, rq->body ? rq->body : "", rq->len, lock, fence, if_match, &version,
                    &highest)) {
  case STORE_OK:
    return reply_json(c, MHD_HTTP_OK,
                      json_pack("{s:s, s:I, s:I}", "key", key, "version", (json_int_t)version,
                                "fence", (json_int_t)fence),
                      NULL);
  case STORE_STALE:
    return reply_stale(c, highest);
  case STORE_MISMATCH: {
    char msg[96];
    snprintf(msg, sizeof msg, "the stored version is %lld, not %lld", (long long)version,
             (long long)if_match);
    return reply_error(c, PICKET_PROTO_ERR_VERSION_MISMATCH, msg, -1, NULL);
  }
  default:
    return reply_store_error(c);
  }
}

static enum MHD_Result kv_get(struct MHD_Connection *c, const char *key) {
  char *value;
  size_t len;
  int64_t version, fence;
  switch (store_get(db, key, &value, &len, &version, &fence)) {
  case STORE_OK: {
    json_t *j = json_pack("{s:s, s:s%, s:I, s:I}", "key", key, "value", value, len, "version",
                          (json_int_t)version, "fence", (json_int_t)fence);
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
  switch (store_claim(db, lock, fence, &highest)) {
  case STORE_OK:
    return reply_json(c, MHD_HTTP_OK, json_pack("{s:s, s:I}", "lock", lock, "fence", (json_int_t)fence),
                      NULL);
  case STORE_STALE:
    return reply_stale(c, highest);
  default:
    return reply_store_error(c);
  }
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

static void usage(FILE *f) {
  fprintf(f,
          "usage: fenced-kv --db FILE [--listen HOST:PORT] [--port-file PATH] [--no-fence]\n"
          "  --db FILE          SQLite database (created if missing)\n"
          "  --listen HOST:PORT address to serve on (default " FKV_LISTEN_DEFAULT "; port 0 picks one)\n"
          "  --port-file PATH   write the bound port there once listening\n"
          "  --no-fence         act as a plain store: PUT needs and checks no fence (demos only)\n");
}

static void die_usage(const char *fmt, const char *arg) {
  fputs("fenced-kv: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs(" (see --help)\n", stderr);
  exit(2);
}

static void parse_flags(int argc, char **argv, config *cfg) {
  cfg->listen = FKV_LISTEN_DEFAULT;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *eq = strchr(a, '=');
    char name[32];
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n >= sizeof name) die_usage("unknown flag %s", a);
    memcpy(name, a, n);
    name[n] = '\0';
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(name, "--no-fence") == 0 && eq == NULL) {
      cfg->no_fence = 1;
      continue;
    }
    const char **dst = strcmp(name, "--listen") == 0      ? &cfg->listen
                       : strcmp(name, "--db") == 0        ? &cfg->db
                       : strcmp(name, "--port-file") == 0 ? &cfg->port_file
                                                          : NULL;
    if (dst == NULL) die_usage("unknown flag %s", a);
    if (eq) {
      *dst = eq + 1;
    } else if (i + 1 < argc) {
      *dst = argv[++i];
    } else {
      die_usage("%s needs a value", name);
    }
    if (**dst == '\0') die_usage("%s needs a value", name);
  }
  if (cfg->db == NULL) die_usage("%s is required", "--db FILE");
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

int main(int argc, char **argv) {
  config cfg = {0};
  parse_flags(argc, argv, &cfg);
  struct sockaddr_storage ss;
  socklen_t sslen;
  parse_listen(cfg.listen, &ss, &sslen);
  no_fence = cfg.no_fence;

  char err[512];
  if ((db = store_open(cfg.db, err, sizeof err)) == NULL) {
    fprintf(stderr, "fenced-kv: cannot open database %s\n", err);
    return 1;
  }

  /* Block the stop signals before libmicrohttpd starts its thread, so they
   * reach only sigwait below. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  signal(SIGPIPE, SIG_IGN);

  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)FKV_CONN_MAX, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)FKV_CONN_TIMEOUT_S,
      MHD_OPTION_END);
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
          no_fence ? ", UNFENCED (--no-fence: stale writes are accepted)" : "");

  int sig;
  while (sigwait(&stop, &sig) != 0) {
  }
  fprintf(stderr, "fenced-kv: %s, stopping\n", strsignal(sig));
  MHD_stop_daemon(d); /* waits for the request in progress */
  store_close(db);
  return 0;
}
