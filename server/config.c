/* config.c: picketd's configuration table and its parser.
 *
 * Every setting is one row of `options` (name, type, bounds, default, help),
 * in the manner of Redis's config.c: the defaults, the PICKET_* environment,
 * the --flags and --help all come from that row, so a setting cannot exist
 * in one of them and be missing from another. Precedence: flag > env >
 * default. Errors are one line for the caller to print before exit 2. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "picket_proto.h"

extern char **environ;

typedef enum { OPT_STRING, OPT_INT, OPT_INT_AUTO, OPT_BOOL, OPT_ENUM } opt_type;

typedef struct {
  const char *name;
  opt_type type;
  size_t offset;
  size_t size;       /* OPT_STRING: buffer size; OPT_INT: 4 or 8; OPT_INT_AUTO: 4 */
  long long min, max;
  const char *def;
  const char *const *choices; /* OPT_ENUM: names, index = value */
  const char *help;
} config_option;

static const char *const level_choices[] = {"debug", "info", "warn", "error", NULL};
static const char *const format_choices[] = {"text", "json", NULL};
static const char *const pipeline_choices[] = {"auto", "on", "off", NULL}; /* PIPELINE_* */
static const char *const floor_choices[] = {"clock", "none", NULL};         /* FENCE_FLOOR_* */
static const char *const trust_choices[] = {"off", "on", NULL};            /* LOOPBACK_TRUST_* */

#define STR(field) OPT_STRING, offsetof(config, field), sizeof(((config *)0)->field), 0, 0
#define INT(field, lo, hi) OPT_INT, offsetof(config, field), sizeof(((config *)0)->field), lo, hi
/* An int that may also be the word "auto", stored as CONFIG_AUTO. */
#define INT_AUTO(field, lo, hi) OPT_INT_AUTO, offsetof(config, field), sizeof(int), lo, hi
#define BOOL(field) OPT_BOOL, offsetof(config, field), sizeof(int), 0, 1
#define ENUM(field) OPT_ENUM, offsetof(config, field), sizeof(int), 0, 0

static const config_option options[] = {
    {"listen", STR(listen), "127.0.0.1:7070", NULL,
     "HOST:PORT to serve HTTP on; port 0 picks a free one (logged, and written to --port-file)"},
    {"redis", STR(redis_url), "redis://127.0.0.1:6379", NULL,
     "Redis URL: redis://[user@]host:port[/db] or unix://[user@]/path/redis.sock[?db=N]; the "
     "password goes in --redis-password-file, not in argv (redis://user:pass@ is read too, for "
     "$PICKET_REDIS)"},
    {"redis-user", STR(redis_user_flag), "", NULL,
     "Redis ACL user to AUTH as (overrides one in the URL; with --sentinel or --redis-cluster, "
     "the data nodes' user); needs --redis-password-file. See deploy/users.acl for the least it "
     "needs"},
    {"redis-password-file", STR(redis_password_file), "", NULL,
     "file whose first line is the Redis password (overrides one in the URL); with --sentinel or "
     "--redis-cluster, the data nodes' password"},
    {"sentinel", STR(sentinel_list), "", NULL,
     "HOST:PORT[,HOST:PORT...] of Redis Sentinels: find the primary through them and follow it "
     "through failovers (instead of --redis; needs --sentinel-master)"},
    {"sentinel-master", STR(sentinel_master), "", NULL,
     "the master name the sentinels monitor (sentinel monitor NAME ...)"},
    {"sentinel-password-file", STR(sentinel_password_file), "", NULL,
     "file whose first line is the sentinels' password (requirepass of sentinel.conf)"},
    {"sentinel-lease", BOOL(sentinel_lease), "true", NULL,
     "with --sentinel: take lock calls only while enough sentinels (all but quorum - 1) have "
     "confirmed, within half their down-after-milliseconds, that the primary answers them and "
     "no failover is under way, so a primary cut off from the sentinels stops granting before "
     "they can promote another (docs/failures.md). false: serve from the last primary named "
     "while no sentinel answers (a partition can then hand a fence out twice)"},
    {"redis-cluster", STR(cluster_list), "", NULL,
     "HOST:PORT[,HOST:PORT...] of some Redis Cluster nodes: learn the slot map from them and "
     "send each lock to its slot's primary, through resharding and failovers (instead of "
     "--redis)"},
    {"etcd", STR(etcd_list), "", NULL,
     "http(s)://HOST:PORT[,...] of etcd v3 members: keep locks in etcd instead of Redis; "
     "fences are etcd revisions, with no clock assumption (docs/etcd.md)"},
    {"etcd-ca-file", STR(etcd_ca_file), "", NULL, "with https:// members: the CA (PEM) that signed them"},
    {"etcd-cert-file", STR(etcd_cert_file), "", NULL,
     "with https:// members: picketd's client certificate (PEM; needs --etcd-key-file)"},
    {"etcd-key-file", STR(etcd_key_file), "", NULL, "...and its private key (PEM)"},
    {"etcd-user", STR(etcd_user), "", NULL, "etcd user to authenticate as (needs --etcd-password-file)"},
    {"etcd-password-file", STR(etcd_password_file), "", NULL,
     "file whose first line is the etcd user's password"},
    {"etcd-timeout-ms", INT(etcd_timeout_ms, 100, 60000), "3000", NULL,
     "one etcd call, across the members it tries; past it a request gets 503"},
    {"etcd-calls-in-flight", INT(etcd_calls_in_flight, 1, 64), "8", NULL,
     "etcd calls each event loop keeps in flight at once, each on a worker thread of the loop "
     "with its own etcd connection (started with the loop); a loop's further calls queue for a "
     "worker, so its thread never waits on etcd"},
    {"redis-db", INT(redis_db, 0, 1000000), "0", NULL,
     "with --sentinel, the database number on the data nodes (with --redis, it is in the URL)"},
    {"redis-timeout-ms", INT(redis_timeout_ms, 10, 60000), "1000", NULL,
     "connect and command timeout for Redis; past it a request gets 503"},
    {"key-prefix", STR(key_prefix), PICKET_PROTO_KEY_PREFIX_DEFAULT, NULL,
     "prefix of every Redis key and of the release channel"},
    {"threads", INT_AUTO(threads, 1, 256), "auto", NULL,
     "HTTP event loops, each a thread with its own pipelined Redis connection. auto: one per "
     "online CPU (at most 64): a loop never waits on the store, so more loops than cores "
     "mostly add switching"},
    {"redis-pipeline", ENUM(redis_pipeline), "auto", pipeline_choices,
     "auto and on: lock calls share their loop's pipelined Redis connection; off: each call "
     "goes to a --store-workers thread and waits there on that thread's own connection. With "
     "--min-replicas, one WAIT follows each batch that grants or renews"},
    {"store-workers", INT(store_workers, 1, 256), "8", NULL,
     "threads that make the store calls no loop pipelines (listings, breaks; on etcd, or with "
     "--redis-pipeline off, every call), each on a store connection of its own: a loop never "
     "waits on the store, and this many such calls are in flight at once"},
    {"max-ttl-ms", INT(max_ttl_ms, 1, 86400000LL * 365), "3600000", NULL,
     "largest ttl_ms a client may ask for"},
    {"max-wait-ms", INT(max_wait_ms, 0, 86400000LL), "60000", NULL,
     "largest wait_ms a client may ask for"},
    {"max-lock-delay-ms", INT(max_lock_delay_ms, 0, 86400000LL), "60000", NULL,
     "largest lock_delay_ms a client may ask for (0: lock-delay refused)"},
    {"index-sweep-ms", INT(index_sweep_ms, 0, 3600000LL), "1000", NULL,
     "every this many ms, read one page of the index of held names and drop the names whose "
     "lease expired (0: never; listings still drop what they meet)"},
    {"max-watchers", INT(max_watchers, 0, 100000), "1024", NULL,
     "open event streams (GET /v1/locks/NAME/events) across all clients; past it, 503 "
     "too_many_watchers (0: events refused)"},
    {"max-watchers-per-client", INT(max_watchers_per_client, 1, 100000), "16", NULL,
     "open event streams of one token (with --auth-file) or one client address; past it, 429 "
     "too_many_watchers"},
    {"events-heartbeat-ms", INT(events_heartbeat_ms, 100, 3600000LL), "15000", NULL,
     "an event stream quiet this long gets a heartbeat event (proxies keep it open, the "
     "client knows picketd is there)"},
    {"max-semaphore-limit", INT(max_semaphore_limit, 1, PICKET_PROTO_SEM_LIMIT_MAX), "4096", NULL,
     "largest limit a semaphore may have (its permits are slots 0..limit-1; GET lists them all)"},
    {"max-readers", INT(max_readers, 1, PICKET_PROTO_RW_READERS_MAX), "1000", NULL,
     "read leases one read/write lock may have at once; past it, a read acquire is 409 "
     "too_many_readers with Retry-After (and waits like a refused one with wait_ms), and "
     "changes nothing. Bounds what one tenant's readers cost every listing and acquire"},
    {"max-waiters", INT(max_waiters, 0, 1000000), "10000", NULL,
     "waiting acquires across all locks; past it, 503 too_many_waiters"},
    {"max-waiters-per-ip", INT_AUTO(max_waiters_per_ip, 0, 1000000), "auto", NULL,
     "without --auth-file: waiting acquires from one client address group (as "
     "--max-connections-per-ip groups them); past it, 429 "
     "too_many_waiters. auto: a quarter of --max-waiters for addresses other than loopback "
     "(sidecars and local workers are not limited); 0: no limit; N: N for every address. With "
     "--auth-file, each token's max_waiters applies instead"},
    {"acquire-rate-per-ip", INT(acquire_rate_per_ip, 0, 10000000), "0", NULL,
     "without --auth-file: acquires per second from one client address group (as "
     "--max-connections-per-ip groups them); past it, 429 "
     "rate_limited with Retry-After (0: no limit)"},
    {"list-rate", INT(list_rate, 0, 1000000), "20", NULL,
     "listings (GET /v1/locks) per second for each token, or without --auth-file for each "
     "client address group other than loopback, in bursts of a second's worth; past it, 429 "
     "rate_limited with Retry-After (0: no limit)"},
    {"fence-key-file", STR(fence_key_file), "", NULL,
     "HMAC keys (\"KID HEX\" per line; the first signs) to sign each grant's fence: replies "
     "carry fence_token, which storage verifies (proto/README.md). Reloaded on SIGHUP"},
    {"auth-file", STR(auth_file), "", NULL,
     "tokens, their lock-name prefixes, verbs and quotas (see docs/security.md); every /v1/locks "
     "call and /metrics then needs Authorization: Bearer. Reloaded on SIGHUP"},
    {"allowed-hosts", STR(allowed_hosts), "auto", NULL,
     "the Host names picketd answers as, besides IP addresses, localhost and the host of "
     "--listen: NAME[,NAME...]; any other Host is 421 misdirected_request on every path, so a "
     "web page cannot reach picketd through DNS rebinding. auto: that check without "
     "--auth-file, none with it (every call that reads or changes locks then needs a token); "
     "*: no check"},
    {"loopback-trust", ENUM(loopback_trust), "on", trust_choices,
     "without --auth-file, on: a client on loopback is this host's own (it may break locks, "
     "and the per-address limits spare it); off: loopback is an address like any other. "
     "Behind a reverse proxy on this host every client is loopback: use off, or --auth-file"},
    {"max-connections", INT(max_connections, 1, 1000000), "4096", NULL,
     "open HTTP connections; past it new ones are refused"},
    {"connection-timeout-s", INT(conn_timeout_s, 1, 86400), "60", NULL,
     "close a connection idle (or stuck mid-request) this long"},
    {"request-timeout-ms", INT(request_timeout_ms, 100, 600000), "10000", NULL,
     "a request's line, headers and body must all arrive within this long of its first byte, "
     "however slowly they come (a byte every few seconds keeps --connection-timeout-s from "
     "ever firing); past it the connection is answered 408 (if no reply has begun) and closed. "
     "Not timed: handling, a waiting acquire, the reply, an idle keep-alive connection. "
     "10 s: a lock call (at most 8 KiB) arrives in milliseconds even from a loaded client, "
     "and a slow-loris connection holds its slot no longer than that"},
    {"max-connections-per-ip", INT_AUTO(max_conns_per_ip, 0, 1000000), "auto", NULL,
     "open connections from one client address group, across all loops: an IPv4 address, an "
     "IPv6 prefix of --ipv6-prefix-len bits, or all of loopback (127.0.0.0/8 and ::1: one "
     "host); past it new ones are refused at accept (with --auth-file, the group's oldest "
     "connection without a token is closed instead). auto: 256 for each group, loopback "
     "half of --max-connections; N: N for every group; 0: no cap"},
    {"ipv6-prefix-len", INT(ipv6_prefix_len, 1, 128), "64", NULL,
     "IPv6 clients share one --max-connections-per-ip count per prefix of this many bits: "
     "a host given a /64 has endless addresses in it. Raise it where many hosts share a /64; "
     "128: each address alone"},
    {"reserved-auth-connections", INT_AUTO(reserved_auth_conns, 0, 1000000), "auto", NULL,
     "with --auth-file: slots of --max-connections that connections without a valid token "
     "may not hold; a new connection past their share closes the oldest one without a token "
     "(a connection has one once a request on it sent a valid Authorization: Bearer). auto: "
     "an eighth of --max-connections with --auth-file, 0 without; 0: none"},
    {"max-connections-per-token", INT_AUTO(max_conns_per_token, 0, 1000000), "auto", NULL,
     "with --auth-file: open connections that requests of one token may hold, across all "
     "loops and addresses (a connection counts once a request on it is authenticated); past "
     "it, 429 too_many_connections with Retry-After, and the connection is closed. auto: a "
     "quarter of --max-connections (1024 of the default 4096): four times what "
     "--max-connections-per-ip lets one host hold, so a fleet of about a thousand sidecars "
     "sharing one token (one keep-alive connection each) fits, while no token can take more "
     "than a quarter of the slots; 0: no cap"},
    {"shutdown-timeout-ms", INT(shutdown_timeout_ms, 0, 600000), "10000", NULL,
     "on SIGTERM, how long in-flight requests may take to finish"},
    {"log-level", ENUM(log_level), "info", level_choices, "debug, info, warn or error"},
    {"log-format", ENUM(log_format), "text", format_choices, "text or json"},
    {"port-file", STR(port_file), "", NULL, "write the bound HTTP port to this file"},
    {"allow-eviction", BOOL(allow_eviction), "false", NULL,
     "start even if Redis maxmemory-policy evicts (allkeys-*: fence counters; volatile-*: live leases)"},
    {"min-replicas", INT(min_replicas, 0, 64), "0", NULL,
     "after each grant and renewal, WAIT for this many replicas; fewer is 503 not_replicated. "
     "Default 1 with --sentinel and --redis-cluster, so the replica a failover promotes has "
     "every grant"},
    {"replica-timeout-ms", INT(replica_timeout_ms, 1, 60000), "500", NULL,
     "how long WAIT may take for --min-replicas"},
    {"fence-floor", ENUM(fence_floor), "clock", floor_choices,
     "clock: a new fence is max(counter + 1, Redis TIME in microseconds), so a lost counter "
     "never sends fences back; none: counter + 1 (1, 2, 3...)"},
    {"fence-idle-ttl-ms", INT(fence_idle_ttl_ms, 0, 86400000LL * 3650),
     "86400000", NULL,
     "with --fence-floor clock: a lock's fence counter expires after this long unused (never "
     "before its lease), so names used once cost Redis nothing; 0: counters never expire. "
     "Default 1 day with the clock floor, 0 (never) with --fence-floor none"},
    {"tls-cert", STR(tls_cert), "", NULL,
     "PEM certificate chain (leaf first) to serve HTTPS with; needs --tls-key. Reread on SIGHUP"},
    {"tls-key", STR(tls_key), "", NULL,
     "PEM private key (unencrypted) of --tls-cert. Reread on SIGHUP"},
    {"tls-client-ca", STR(tls_client_ca), "", NULL,
     "PEM CA bundle: mutual TLS, every request needs a client certificate signed by one of "
     "these CAs, else 401 unauthenticated (needs --tls-cert). Reread on SIGHUP"},
};
#define NOPTIONS (sizeof options / sizeof options[0])

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

static int parse_ll(const char *s, long long *out) {
  if (s == NULL || *s == '\0' || isspace((unsigned char)*s)) return -1;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || *end != '\0') return -1;
  *out = v;
  return 0;
}

static int set_option(config *cfg, const config_option *o, const char *value, char *err,
                      size_t errlen) {
  char *field = (char *)cfg + o->offset;
  switch (o->type) {
    case OPT_STRING:
      if (strlen(value) >= o->size)
        return fail(err, errlen, "--%s: value too long (max %zu bytes)", o->name, o->size - 1);
      memcpy(field, value, strlen(value) + 1);
      return 0;
    case OPT_INT: {
      long long v;
      if (parse_ll(value, &v) < 0 || v < o->min || v > o->max)
        return fail(err, errlen, "--%s: expected an integer in %lld..%lld, got '%s'", o->name,
                    o->min, o->max, value);
      if (o->size == sizeof(int))
        *(int *)field = (int)v;
      else
        *(int64_t *)field = v;
      return 0;
    }
    case OPT_INT_AUTO: {
      long long v = CONFIG_AUTO;
      if (strcmp(value, "auto") != 0 && (parse_ll(value, &v) < 0 || v < o->min || v > o->max))
        return fail(err, errlen, "--%s: expected auto or an integer in %lld..%lld, got '%s'",
                    o->name, o->min, o->max, value);
      *(int *)field = (int)v;
      return 0;
    }
    case OPT_BOOL:
      if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0 || strcmp(value, "yes") == 0)
        *(int *)field = 1;
      else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0 || strcmp(value, "no") == 0)
        *(int *)field = 0;
      else
        return fail(err, errlen, "--%s: expected true or false, got '%s'", o->name, value);
      return 0;
    case OPT_ENUM:
      for (int i = 0; o->choices[i]; i++)
        if (strcmp(o->choices[i], value) == 0) {
          *(int *)field = i;
          return 0;
        }
      return fail(err, errlen, "--%s: unknown value '%s'", o->name, value);
  }
  return fail(err, errlen, "--%s: bad option type", o->name);
}

static const config_option *find_option(const char *name, size_t len) {
  for (size_t i = 0; i < NOPTIONS; i++)
    if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0)
      return &options[i];
  return NULL;
}

static size_t option_index(const char *name) {
  return (size_t)(find_option(name, strlen(name)) - options);
}

/* PICKET_MAX_TTL_MS for max-ttl-ms. */
static void env_name(const char *opt, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "PICKET_");
  for (; *opt && n + 1 < cap; opt++) out[n++] = *opt == '-' ? '_' : (char)toupper((unsigned char)*opt);
  out[n] = '\0';
}

int config_parse_hostport(const char *s, char *host, size_t hostcap, int *port) {
  const char *colon;
  size_t hl;
  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (close == NULL || close[1] != ':') return -1;
    hl = (size_t)(close - s - 1);
    memcpy(host, s + 1, hl < hostcap ? hl : 0);
    colon = close + 1;
  } else {
    colon = strrchr(s, ':');
    if (colon == NULL) return -1;
    hl = (size_t)(colon - s);
    if (hl < hostcap) memcpy(host, s, hl);
  }
  if (hl == 0 || hl >= hostcap) return -1;
  host[hl] = '\0';
  long long p;
  if (parse_ll(colon + 1, &p) < 0 || p < 0 || p > 65535) return -1;
  *port = (int)p;
  return 0;
}

int config_parse_redis_url(const char *url, redis_target *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  if (strncmp(url, "unix://", 7) == 0) {
    const char *path = url + 7;
    const char *at = path[0] != '/' ? strchr(path, '@') : NULL;
    if (at) { /* unix://USER@/path: an ACL user, its password from --redis-password-file */
      size_t ul = (size_t)(at - path);
      if (memchr(path, ':', ul)) /* never echo it: it may be a password */
        return fail(err, errlen, "--redis: a unix URL takes a user but no password "
                                 "(unix://USER@/path); give the password with "
                                 "--redis-password-file");
      if (ul == 0 || ul >= sizeof t->user)
        return fail(err, errlen, "--redis: the unix URL's user is empty or too long");
      memcpy(t->user, path, ul);
      path = at + 1;
    }
    const char *q = strchr(path, '?');
    size_t pl = q ? (size_t)(q - path) : strlen(path);
    if (pl == 0 || path[0] != '/' || pl >= sizeof t->path)
      return fail(err, errlen, "--redis: unix URL needs an absolute socket path: unix:///path");
    memcpy(t->path, path, pl);
    t->is_unix = 1;
    if (q) {
      long long db;
      if (strncmp(q, "?db=", 4) != 0 || parse_ll(q + 4, &db) < 0 || db < 0 || db > 1000000)
        return fail(err, errlen, "--redis: the only unix URL query is ?db=N");
      t->db = (int)db;
    }
    return 0;
  }
  if (strncmp(url, "rediss://", 9) == 0)
    return fail(err, errlen, "--redis: rediss:// (TLS to Redis) is not supported: hiredis 0.14 "
                             "has no TLS. Run a TLS tunnel (stunnel, spiped) beside picketd and "
                             "point --redis at its local end");
  if (strncmp(url, "redis://", 8) != 0) {
    /* Never echo what may be a password: only the part before "://". */
    const char *sep = strstr(url, "://");
    int scheme = sep && sep - url < 16 ? (int)(sep - url) : 0;
    return fail(err, errlen, "--redis: expected redis://host:port or unix:///path, got %s%.*s%s",
                scheme ? "a " : "something else", scheme, url, scheme ? ":// URL" : "");
  }
  const char *p = url + 8;
  const char *at = strrchr(p, '@');
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    size_t ul = colon ? (size_t)(colon - p) : 0;
    const char *pw = colon ? colon + 1 : p;
    size_t pwl = (size_t)(at - pw);
    if (ul >= sizeof t->user || pwl >= sizeof t->password)
      return fail(err, errlen, "--redis: user or password too long");
    memcpy(t->user, p, ul);
    memcpy(t->password, pw, pwl);
    p = at + 1;
  }
  char hostport[300];
  const char *slash = strchr(p, '/');
  size_t hpl = slash ? (size_t)(slash - p) : strlen(p);
  if (hpl >= sizeof hostport) return fail(err, errlen, "--redis: host too long");
  memcpy(hostport, p, hpl);
  hostport[hpl] = '\0';
  if (strchr(hostport, ':') == NULL && hostport[0] != '[') {
    /* host without a port: the Redis default */
    if (hpl == 0 || hpl >= sizeof t->host) return fail(err, errlen, "--redis: missing host");
    memcpy(t->host, hostport, hpl + 1);
    t->port = 6379;
  } else if (config_parse_hostport(hostport, t->host, sizeof t->host, &t->port) < 0 ||
             t->port == 0) {
    return fail(err, errlen, "--redis: bad host:port '%s'", hostport);
  }
  if (slash && slash[1] != '\0') {
    long long db;
    if (parse_ll(slash + 1, &db) < 0 || db < 0 || db > 1000000)
      return fail(err, errlen, "--redis: bad database number '%s'", slash + 1);
    t->db = (int)db;
  }
  return 0;
}

/* Reads the first line of the file named by --`flag` into out. */
static int read_password_file(const char *flag, const char *path, char *out, size_t cap,
                              char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return fail(err, errlen, "--%s: cannot open %s: %s", flag, path, strerror(errno));
  char line[512];
  if (fgets(line, sizeof line, f) == NULL) line[0] = '\0';
  fclose(f);
  line[strcspn(line, "\r\n")] = '\0';
  if (line[0] == '\0') return fail(err, errlen, "--%s: %s is empty", flag, path);
  if (strlen(line) >= cap) return fail(err, errlen, "--%s: password too long", flag);
  memcpy(out, line, strlen(line) + 1);
  return 0;
}

/* --sentinel or --redis-cluster HOST:PORT[,HOST:PORT...] into out[]. */
static int parse_addrs(const char *flag, const char *given, sentinel_addr *out, int max,
                       int *count, char *err, size_t errlen) {
  char list[2048];
  snprintf(list, sizeof list, "%s", given);
  char *save = NULL;
  for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*count == max) return fail(err, errlen, "--%s: at most %d addresses", flag, max);
    sentinel_addr *a = &out[*count];
    if (config_parse_hostport(tok, a->host, sizeof a->host, &a->port) < 0 || a->port == 0)
      return fail(err, errlen, "--%s: expected HOST:PORT[,HOST:PORT...], got '%s'", flag, tok);
    (*count)++;
  }
  if (*count == 0) return fail(err, errlen, "--%s: expected HOST:PORT[,HOST:PORT...]", flag);
  return 0;
}

/* A master name as sentinel.conf's "sentinel monitor NAME" takes it. */
static int master_name_valid(const char *s) {
  if (*s == '\0') return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && !strchr("._-", *s)) return 0;
  return 1;
}

/* --redis-user over the URL's user; a user needs a password (AUTH USER
 * PASS): without one picketd would connect as the default user, which on a
 * shared Redis is not the one the ACL confines. */
static int check_user(config *cfg, char *err, size_t errlen) {
  if (cfg->redis_user_flag[0]) {
    if (strlen(cfg->redis_user_flag) >= sizeof cfg->redis.user)
      return fail(err, errlen, "--redis-user: too long (max %zu bytes)", sizeof cfg->redis.user - 1);
    memcpy(cfg->redis.user, cfg->redis_user_flag, strlen(cfg->redis_user_flag) + 1);
  }
  for (const char *s = cfg->redis.user; *s; s++)
    if ((unsigned char)*s <= ' ' || *s == 0x7f)
      return fail(err, errlen, "the Redis user (--redis-user, or the URL's): no spaces or "
                               "control characters");
  if (cfg->redis.user[0] && !cfg->redis.password[0])
    return fail(err, errlen, "a Redis user (--redis-user, or the URL's) needs its password: "
                             "give it with --redis-password-file");
  return 0;
}

/* --redis-cluster: the seeds, the nodes' credentials, and --min-replicas 1
 * unless given, for the reason it is 1 under --sentinel: a shard's failover
 * promotes its replica, which must already have every grant. A cluster has
 * no databases but 0. */
static int check_cluster(config *cfg, const char *given, char *err, size_t errlen) {
  if (given[option_index("sentinel-master")] || given[option_index("sentinel-password-file")])
    return fail(err, errlen, "--sentinel-master and --sentinel-password-file need --sentinel");
  if (given[option_index("redis-db")])
    return fail(err, errlen, "--redis-db: a Redis Cluster has only database 0");
  if (parse_addrs("redis-cluster", cfg->cluster_list, cfg->cluster_seeds,
                  CONFIG_CLUSTER_SEEDS_MAX, &cfg->cluster_seed_count, err, errlen) < 0)
    return -1;
  memset(&cfg->redis, 0, sizeof cfg->redis); /* the slot map names hosts and ports */
  if (cfg->redis_password_file[0] &&
      read_password_file("redis-password-file", cfg->redis_password_file, cfg->redis.password,
                         sizeof cfg->redis.password, err, errlen) < 0)
    return -1;
  if (!given[option_index("min-replicas")]) cfg->min_replicas = 1;
  return check_user(cfg, err, errlen);
}

/* --etcd: the members' URLs, and the flags that belong to it alone. The
 * Redis flags are refused with it, so no setting is silently ignored. */
static int check_etcd(config *cfg, const char *given, char *err, size_t errlen) {
  static const char *const redis_only[] = {
      "redis", "redis-user", "redis-password-file", "sentinel", "sentinel-master",
      "sentinel-password-file", "redis-cluster", "redis-db", "min-replicas", NULL};
  for (int i = 0; redis_only[i]; i++)
    if (given[option_index(redis_only[i])])
      return fail(err, errlen, "--%s is for Redis; --etcd keeps locks in etcd", redis_only[i]);
  int n = 0, https = 0;
  for (const char *p = cfg->etcd_list; *p;) {
    size_t len = strcspn(p, ",");
    int is_http = len > 7 && strncmp(p, "http://", 7) == 0;
    int is_https = len > 8 && strncmp(p, "https://", 8) == 0;
    if (!is_http && !is_https)
      return fail(err, errlen, "--etcd: each member is http://HOST:PORT or https://HOST:PORT");
    https |= is_https;
    if (++n > 16) return fail(err, errlen, "--etcd: at most 16 members");
    p += len;
    if (*p == ',') p++;
  }
  if (!https && (cfg->etcd_ca_file[0] || cfg->etcd_cert_file[0] || cfg->etcd_key_file[0]))
    return fail(err, errlen, "--etcd-ca-file, --etcd-cert-file and --etcd-key-file need "
                             "https:// members");
  if (!cfg->etcd_cert_file[0] != !cfg->etcd_key_file[0])
    return fail(err, errlen, "--etcd-cert-file and --etcd-key-file go together");
  if (!cfg->etcd_user[0] != !cfg->etcd_password_file[0])
    return fail(err, errlen, "--etcd-user and --etcd-password-file go together");
  if (cfg->etcd_password_file[0] &&
      read_password_file("etcd-password-file", cfg->etcd_password_file, cfg->etcd_password,
                         sizeof cfg->etcd_password, err, errlen) < 0)
    return -1;
  memset(&cfg->redis, 0, sizeof cfg->redis);
  return 0;
}

/* The rules between settings: which store, and what each mode needs. */
static int check_store(config *cfg, const char *given, char *err, size_t errlen) {
  int sentinel = cfg->sentinel_list[0] != '\0'; /* PICKET_SENTINEL= (empty) is unset */
  int cluster = cfg->cluster_list[0] != '\0';
  if (cfg->etcd_list[0]) return check_etcd(cfg, given, err, errlen);
  if (given[option_index("etcd-ca-file")] || given[option_index("etcd-cert-file")] ||
      given[option_index("etcd-key-file")] || given[option_index("etcd-user")] ||
      given[option_index("etcd-password-file")])
    return fail(err, errlen, "the --etcd-* flags need --etcd");
  if ((sentinel || cluster) && given[option_index("redis")])
    return fail(err, errlen, "--redis, --sentinel and --redis-cluster are exclusive: name the "
                             "store one way");
  if (sentinel && cluster)
    return fail(err, errlen, "--redis, --sentinel and --redis-cluster are exclusive: name the "
                             "store one way");
  if (cluster) return check_cluster(cfg, given, err, errlen);
  if (!sentinel) {
    if (given[option_index("sentinel-master")] || given[option_index("sentinel-password-file")])
      return fail(err, errlen, "--sentinel-master and --sentinel-password-file need --sentinel");
    if (given[option_index("redis-db")])
      return fail(err, errlen, "--redis-db is for --sentinel; with --redis, put the db in the "
                               "URL (redis://host:port/N)");
    if (config_parse_redis_url(cfg->redis_url, &cfg->redis, err, errlen) < 0) return -1;
    if (cfg->redis_password_file[0] &&
        read_password_file("redis-password-file", cfg->redis_password_file, cfg->redis.password,
                           sizeof cfg->redis.password, err, errlen) < 0)
      return -1;
    return check_user(cfg, err, errlen);
  }
  if (parse_addrs("sentinel", cfg->sentinel_list, cfg->sentinels, CONFIG_SENTINELS_MAX,
                  &cfg->sentinel_count, err, errlen) < 0)
    return -1;
  if (!master_name_valid(cfg->sentinel_master))
    return fail(err, errlen, cfg->sentinel_master[0]
                                 ? "--sentinel-master: up to 127 bytes of [A-Za-z0-9._-]"
                                 : "--sentinel needs --sentinel-master NAME");
  memset(&cfg->redis, 0, sizeof cfg->redis); /* the sentinels name host and port */
  cfg->redis.db = cfg->redis_db;
  if (cfg->redis_password_file[0] &&
      read_password_file("redis-password-file", cfg->redis_password_file, cfg->redis.password,
                         sizeof cfg->redis.password, err, errlen) < 0)
    return -1;
  if (cfg->sentinel_password_file[0] &&
      read_password_file("sentinel-password-file", cfg->sentinel_password_file,
                         cfg->sentinel_password, sizeof cfg->sentinel_password, err, errlen) < 0)
    return -1;
  if (!given[option_index("min-replicas")]) cfg->min_replicas = 1;
  return check_user(cfg, err, errlen);
}

int config_load(config *cfg, int argc, char **argv, char **envp, char *err, size_t errlen) {
  memset(cfg, 0, sizeof *cfg);
  char given[NOPTIONS] = {0}; /* set by the environment or a flag */
  for (size_t i = 0; i < NOPTIONS; i++)
    if (set_option(cfg, &options[i], options[i].def, err, errlen) < 0) return -1;

  if (envp == NULL) envp = environ;
  for (size_t i = 0; i < NOPTIONS; i++) {
    char name[64];
    env_name(options[i].name, name, sizeof name);
    size_t nl = strlen(name);
    for (char **e = envp; *e; e++)
      if (strncmp(*e, name, nl) == 0 && (*e)[nl] == '=') {
        char sub[512];
        if (set_option(cfg, &options[i], *e + nl + 1, sub, sizeof sub) < 0)
          return fail(err, errlen, "%s: %s", name, sub);
        given[i] = 1;
      }
  }

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return CONFIG_HELP;
    if (strcmp(a, "--version") == 0) return CONFIG_VERSION;
    if (strncmp(a, "--", 2) != 0)
      return fail(err, errlen, "unexpected argument '%s' (see --help)", a);
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t nl = eq ? (size_t)(eq - name) : strlen(name);
    const config_option *o = find_option(name, nl);
    if (o == NULL) return fail(err, errlen, "unknown flag '%.*s' (see --help)", (int)nl + 2, a);
    const char *value = eq ? eq + 1 : NULL;
    if (value == NULL && o->type == OPT_BOOL) value = "true";
    if (value == NULL) {
      if (i + 1 >= argc) return fail(err, errlen, "--%s needs a value", o->name);
      value = argv[++i];
    }
    if (set_option(cfg, o, value, err, errlen) < 0) return -1;
    given[o - options] = 1;
  }

  if (cfg->threads == CONFIG_AUTO) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
  }
  if (config_parse_hostport(cfg->listen, cfg->listen_host, sizeof cfg->listen_host,
                            &cfg->listen_port) < 0)
    return fail(err, errlen, "--listen: expected HOST:PORT, got '%s'", cfg->listen);
  if (check_store(cfg, given, err, errlen) < 0) return -1;
  cfg->store_timeout_ms = cfg->etcd_list[0] ? cfg->etcd_timeout_ms : cfg->redis_timeout_ms;
  /* Bounded by default (issue 39): the clock floor keeps the next fence
   * of an expired counter above the last one; without it an expired
   * counter would start over, so there the default is to keep them. */
  if (!given[option_index("fence-idle-ttl-ms")] && cfg->fence_floor != FENCE_FLOOR_CLOCK)
    cfg->fence_idle_ttl_ms = 0;
  if (cfg->fence_idle_ttl_ms > 0 && cfg->fence_floor != FENCE_FLOOR_CLOCK)
    return fail(err, errlen, "--fence-idle-ttl-ms needs --fence-floor clock: without the clock "
                             "floor an expired counter would send that lock's fences back to 1");
  if (!cfg->tls_cert[0] != !cfg->tls_key[0])
    return fail(err, errlen, "--tls-cert and --tls-key go together: give both or neither");
  if (cfg->tls_client_ca[0] && !cfg->tls_cert[0])
    return fail(err, errlen, "--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is "
                             "TLS with client certificates)");
  if (cfg->reserved_auth_conns > 0 && !cfg->auth_file[0])
    return fail(err, errlen, "--reserved-auth-connections needs --auth-file (without tokens no "
                             "connection can show it is authenticated)");
  if (cfg->max_conns_per_token > 0 && !cfg->auth_file[0])
    return fail(err, errlen, "--max-connections-per-token needs --auth-file (without tokens no "
                             "connection has one)");
  if (cfg->reserved_auth_conns >= cfg->max_connections)
    return fail(err, errlen, "--reserved-auth-connections must be below --max-connections (%d)",
                cfg->max_connections);
  if (!picket_proto_prefix_valid(cfg->key_prefix, strlen(cfg->key_prefix)))
    return fail(err, errlen, "--key-prefix: up to %d bytes of [A-Za-z0-9._:-]",
                PICKET_PROTO_KEY_PREFIX_MAX);
  return CONFIG_RUN;
}

void config_usage(FILE *out) {
  fprintf(out,
          "Usage: picketd [--flag value | --flag=value]...\n"
          "picketd grants leases on named locks stored in Redis or etcd; every grant carries a fence.\n\n"
          "Flags (each also read from the environment as PICKET_<FLAG>, flags win):\n");
  for (size_t i = 0; i < NOPTIONS; i++) {
    const config_option *o = &options[i];
    char env[64], head[80];
    env_name(o->name, env, sizeof env);
    snprintf(head, sizeof head, "--%s%s", o->name, o->type == OPT_BOOL ? "" : " VALUE");
    fprintf(out, "  %-28s %s\n  %-28s [%s; default: %s]\n", head, o->help, "", env,
            o->def[0] ? o->def : "none");
  }
  fprintf(out, "  %-28s %s\n  %-28s %s\n", "--help", "show this help and exit", "--version",
          "show the version and exit");
}
