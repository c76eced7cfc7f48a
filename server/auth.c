/* auth.c: bearer tokens, their prefixes, verbs and quotas (see auth.h).
 *
 * The auth file holds one line per token (docs/security.md):
 *
 *   NAME sha256:HEX64 PREFIXES VERBS [max_leases=N] [max_waiters=N] [acquire_rate=N]
 *
 * NAME is 1..64 bytes of [A-Za-z0-9._-]; HEX64 the SHA-256 of the token
 * exactly as sent after "Bearer " (so the file never holds a token);
 * PREFIXES "*" or a comma list of lock-name prefixes; VERBS a comma list
 * of lock (acquire, renew, release), read (GET of a lock), metrics, list
 * (GET /v1/locks: the names under its prefixes) and admin (break).
 * '#' starts a comment line; blank lines are ignored; fields are separated
 * by spaces or tabs. Anything else is an error that names its line: a file
 * that half parses would grant what its author did not mean.
 *
 * A table is shared by the requests that resolved a token in it (one
 * reference each) and by `current`; SIGHUP makes a new one and drops
 * `current`'s reference to the old, which is freed by its last request. */
#include "auth.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

#define HASH_LEN 32

struct auth_principal {
  auth_table *table;
  char name[AUTH_NAME_MAX + 1];
  unsigned char hash[HASH_LEN];
  int verbs;
  int all;                      /* PREFIXES was "*" */
  int nprefixes;
  char *prefixes[AUTH_PREFIXES_MAX];
  quota_subject *subject;       /* a reference */
};

/* Tokens are found by their hash: a chained hash table on the hash's first
 * bytes, then a constant-time compare of the whole hash with each entry of
 * that chain (about one). What the time can tell is how long one chain of
 * stored SHA-256 values is, which says nothing about any token; a scan of
 * every entry cost 70 us a request with 1,000 tokens (bench/run). */
struct auth_table {
  atomic_int refs;
  int n;
  auth_principal *tokens;
  unsigned mask;          /* buckets - 1 (a power of two, at least 2n) */
  int *head, *next;       /* chains of token indexes, -1 ends one */
};

static const config *cfg;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards `current` */
static auth_table *current;
static atomic_int enabled; /* --auth-file, or auth_set_table */

static void sha256(const void *data, size_t len, unsigned char out[HASH_LEN]) {
  gnutls_hash_fast(GNUTLS_DIG_SHA256, data, len, out);
}

/* ---- the parser -------------------------------------------------------- */

typedef struct {
  char *err;
  size_t errlen;
  int line;
} parse_ctx;

static int bad(parse_ctx *p, const char *fmt, const char *what) {
  char why[200];
  snprintf(why, sizeof why, fmt, what);
  snprintf(p->err, p->errlen, "line %d: %s", p->line, why);
  return -1;
}

static int name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > AUTH_NAME_MAX) return 0;
  for (; *s; s++)
    if (!(((*s | 32) >= 'a' && (*s | 32) <= 'z') || (*s >= '0' && *s <= '9') || strchr("._-", *s)))
      return 0;
  return 1;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 32) >= 'a' && (c | 32) <= 'f') return (c | 32) - 'a' + 10;
  return -1;
}

static int parse_hash(parse_ctx *p, const char *s, unsigned char out[HASH_LEN]) {
  if (strncmp(s, "sha256:", 7) != 0 || strlen(s + 7) != 2 * HASH_LEN)
    return bad(p, "%s", "the second field must be sha256: and 64 hex digits (the token's SHA-256)");
  for (int i = 0; i < HASH_LEN; i++) {
    int hi = hex_value(s[7 + 2 * i]), lo = hex_value(s[8 + 2 * i]);
    if (hi < 0 || lo < 0) return bad(p, "%s", "the token hash has a character that is not hex");
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}

static int parse_prefixes(parse_ctx *p, char *s, auth_principal *t) {
  if (strcmp(s, "*") == 0) {
    t->all = 1;
    return 0;
  }
  for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (t->nprefixes == AUTH_PREFIXES_MAX) return bad(p, "more than %s prefixes", "64");
    /* A prefix is the start of a lock name: the same bytes, at most as long. */
    if (strcmp(tok, "*") == 0) return bad(p, "%s", "'*' stands alone, not in a list");
    if (!picket_proto_name_valid(tok, strlen(tok)) &&
        !(strcmp(tok, ".") == 0 || strcmp(tok, "..") == 0))
      return bad(p, "prefix '%.64s' is not the start of a lock name ([A-Za-z0-9._:-], at most "
                    "200 bytes)", tok);
    if ((t->prefixes[t->nprefixes] = strdup(tok)) == NULL) return bad(p, "%s", "out of memory");
    t->nprefixes++;
  }
  if (t->nprefixes == 0) return bad(p, "%s", "no prefixes (use * for every lock)");
  return 0;
}

static int parse_verbs(parse_ctx *p, char *s, auth_principal *t) {
  for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (strcmp(tok, "lock") == 0) t->verbs |= AUTH_LOCK;
    else if (strcmp(tok, "read") == 0) t->verbs |= AUTH_READ;
    else if (strcmp(tok, "metrics") == 0) t->verbs |= AUTH_METRICS;
    else if (strcmp(tok, "list") == 0) t->verbs |= AUTH_LIST;
    else if (strcmp(tok, "admin") == 0) t->verbs |= AUTH_ADMIN;
    else return bad(p, "unknown verb '%.32s' (lock, read, metrics, list, admin)", tok);
  }
  if (t->verbs == 0) return bad(p, "%s", "no verbs (lock, read, metrics, list, admin)");
  return 0;
}

static int parse_limit(parse_ctx *p, const char *s, quota_limits *l, int *seen) {
  static const char *const keys[] = {"max_leases", "max_waiters", "acquire_rate"};
  const char *eq = strchr(s, '=');
  for (int i = 0; eq && i < 3; i++) {
    if (strlen(keys[i]) != (size_t)(eq - s) || strncmp(s, keys[i], (size_t)(eq - s)) != 0) continue;
    if (*seen & (1 << i)) return bad(p, "%s given twice", keys[i]);
    *seen |= 1 << i;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (eq[1] < '1' || eq[1] > '9' || *end || errno || v > 1000000000)
      return bad(p, "%s must be an integer from 1 to 1000000000", keys[i]);
    int64_t *f[] = {&l->max_leases, &l->max_waiters, &l->acquire_rate};
    *f[i] = v;
    return 0;
  }
  return bad(p, "unknown field '%.40s' (max_leases=N, max_waiters=N, acquire_rate=N)", s);
}

/* One non-comment line, cut into fields in place. */
static int parse_line(parse_ctx *p, char *line, auth_table *t) {
  char *f[8];
  int n = 0;
  for (char *save = NULL, *tok = strtok_r(line, " \t", &save); tok;
       tok = strtok_r(NULL, " \t", &save)) {
    if (n == 7) return bad(p, "%s", "too many fields");
    f[n++] = tok;
  }
  if (n < 4) return bad(p, "%s", "expected NAME sha256:HEX64 PREFIXES VERBS [limits]");
  if (t->n == AUTH_TOKENS_MAX) return bad(p, "more than %s tokens", "4096");
  auth_principal *k = &t->tokens[t->n];
  memset(k, 0, sizeof *k);
  k->table = t;
  t->n++; /* counted now, so auth_table_free frees what a failed line made */
  if (!name_ok(f[0])) return bad(p, "token name '%.64s' is not 1 to 64 bytes of [A-Za-z0-9._-]", f[0]);
  snprintf(k->name, sizeof k->name, "%s", f[0]);
  quota_limits limits = {0};
  int seen = 0;
  if (parse_hash(p, f[1], k->hash) < 0 || parse_prefixes(p, f[2], k) < 0 ||
      parse_verbs(p, f[3], k) < 0)
    return -1;
  for (int i = 4; i < n; i++)
    if (parse_limit(p, f[i], &limits, &seen) < 0) return -1;
  for (int i = 0; i < t->n - 1; i++) {
    if (strcmp(t->tokens[i].name, k->name) == 0) return bad(p, "token name '%s' given twice", k->name);
    if (memcmp(t->tokens[i].hash, k->hash, HASH_LEN) == 0)
      return bad(p, "the same token hash as '%s'", t->tokens[i].name);
  }
  char key[16 + AUTH_NAME_MAX];
  snprintf(key, sizeof key, "token %s", k->name);
  k->subject = quota_get(key, &limits);
  return 0;
}

static unsigned bucket_of(const auth_table *t, const unsigned char h[HASH_LEN]) {
  return ((unsigned)h[0] | (unsigned)h[1] << 8 | (unsigned)h[2] << 16 | (unsigned)h[3] << 24) &
         t->mask;
}

static int index_tokens(auth_table *t) {
  unsigned buckets = 2;
  while (buckets < 2u * (unsigned)t->n) buckets *= 2;
  t->mask = buckets - 1;
  t->head = malloc(buckets * sizeof *t->head);
  t->next = malloc(((size_t)t->n + 1) * sizeof *t->next);
  if (t->head == NULL || t->next == NULL) return -1;
  for (unsigned b = 0; b < buckets; b++) t->head[b] = -1;
  for (int i = 0; i < t->n; i++) {
    unsigned b = bucket_of(t, t->tokens[i].hash);
    t->next[i] = t->head[b];
    t->head[b] = i;
  }
  return 0;
}

auth_table *auth_parse(const char *text, size_t len, char *err, size_t errlen) {
  parse_ctx p = {err, errlen, 0};
  auth_table *t = calloc(1, sizeof *t);
  if (t == NULL || len > AUTH_FILE_MAX) {
    snprintf(err, errlen, len > AUTH_FILE_MAX ? "larger than 1 MiB" : "out of memory");
    free(t);
    return NULL;
  }
  atomic_init(&t->refs, 1);
  int lines = 1;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  t->tokens = calloc((size_t)(lines < AUTH_TOKENS_MAX ? lines : AUTH_TOKENS_MAX) + 1, sizeof *t->tokens);
  if (t->tokens == NULL) {
    snprintf(err, errlen, "out of memory");
    free(t);
    return NULL;
  }
  char line[AUTH_LINE_MAX + 1];
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - text - at) : len - at;
    p.line++;
    if (n > 0 && text[at + n - 1] == '\r') n--; /* a file edited on Windows */
    if (n > AUTH_LINE_MAX || memchr(text + at, '\0', n)) {
      bad(&p, "%s", n > AUTH_LINE_MAX ? "longer than 4096 bytes" : "a NUL byte");
      goto fail;
    }
    memcpy(line, text + at, n);
    line[n] = '\0';
    at = nl ? (size_t)(nl - text) + 1 : len;
    for (char *c = line; *c; c++)
      if ((unsigned char)*c < ' ' && *c != '\t') {
        bad(&p, "%s", "a control character");
        goto fail;
      }
    char *s = line + strspn(line, " \t");
    if (*s == '\0' || *s == '#') continue;
    if (parse_line(&p, s, t) < 0) goto fail;
  }
  if (index_tokens(t) == 0) return t;
  snprintf(err, errlen, "out of memory");
fail:
  auth_table_free(t);
  return NULL;
}

void auth_table_free(auth_table *t) {
  if (t == NULL) return;
  for (int i = 0; i < t->n; i++) {
    for (int j = 0; j < t->tokens[i].nprefixes; j++) free(t->tokens[i].prefixes[j]);
    quota_put(t->tokens[i].subject);
  }
  free(t->tokens);
  free(t->head);
  free(t->next);
  free(t);
}

int auth_table_count(const auth_table *t) { return t->n; }

static void table_put(auth_table *t) {
  if (t && atomic_fetch_sub(&t->refs, 1) == 1) auth_table_free(t);
}

/* ---- the file ------------------------------------------------------------ */

static auth_table *load(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "--auth-file %s: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = malloc(AUTH_FILE_MAX + 1);
  size_t n = buf ? fread(buf, 1, AUTH_FILE_MAX + 1, f) : 0;
  int failed = buf == NULL || ferror(f);
  fclose(f);
  if (failed) {
    free(buf);
    snprintf(err, errlen, "--auth-file %s: cannot read it", path);
    return NULL;
  }
  char why[300];
  auth_table *t = auth_parse(buf, n, why, sizeof why);
  free(buf);
  if (t == NULL) snprintf(err, errlen, "--auth-file %s: %s", path, why);
  return t;
}

int auth_init(const config *c, char *err, size_t errlen) {
  cfg = c;
  if (cfg->auth_file[0] == '\0') return 0;
  if ((current = load(cfg->auth_file, err, errlen)) == NULL) return -1;
  atomic_store(&enabled, 1);
  LOG(LOG_INFO, "--auth-file %s: %d tokens", cfg->auth_file, current->n);
  return 0;
}

int auth_enabled(void) { return atomic_load(&enabled); }

void auth_set_table(auth_table *t) {
  if (t) atomic_fetch_add(&t->refs, 1);
  pthread_mutex_lock(&mu);
  auth_table *old = current;
  current = t;
  atomic_store(&enabled, t != NULL);
  pthread_mutex_unlock(&mu);
  table_put(old);
}

void auth_reload(void) {
  if (cfg == NULL || cfg->auth_file[0] == '\0') return;
  char err[400];
  auth_table *t = load(cfg->auth_file, err, sizeof err);
  if (t == NULL) {
    LOG(LOG_ERROR, "SIGHUP: %s; keeping the tokens loaded before", err);
    return;
  }
  pthread_mutex_lock(&mu);
  auth_table *old = current;
  current = t;
  pthread_mutex_unlock(&mu);
  table_put(old);
  LOG(LOG_INFO, "SIGHUP: --auth-file %s reloaded: %d tokens", cfg->auth_file, t->n);
}

void auth_stop(void) {
  pthread_mutex_lock(&mu);
  auth_table *t = current;
  current = NULL;
  pthread_mutex_unlock(&mu);
  table_put(t);
}

/* ---- requests ------------------------------------------------------------ */

static int token68_char(char c) {
  return ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9') ||
         (c != '\0' && strchr("-._~+/", c) != NULL);
}

/* The token of "Bearer TOKEN" (RFC 6750 section 2.1), or NULL. */
static const char *bearer(const char *h, size_t *len) {
  if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return NULL;
  h += 6 + strspn(h + 6, " \t");
  size_t n = 0;
  while (token68_char(h[n])) n++;
  size_t end = n;
  while (h[end] == '=') end++;
  if (n == 0 || h[end + strspn(h + end, " \t")] != '\0' || end > AUTH_TOKEN_MAX) return NULL;
  *len = end;
  return h;
}

int auth_resolve(const char *authorization, auth_principal **who, char *msg, size_t cap,
                 quota_deny *why) {
  *who = NULL;
  if (authorization == NULL) {
    snprintf(msg, cap, "this picketd needs a token: send Authorization: Bearer TOKEN");
    *why = QUOTA_DENY_NO_TOKEN;
    return PICKET_PROTO_ERR_UNAUTHENTICATED;
  }
  size_t len = 0;
  const char *tok = bearer(authorization, &len);
  if (tok == NULL) {
    snprintf(msg, cap, "the Authorization header must be Bearer and a token");
    *why = QUOTA_DENY_BAD_TOKEN;
    return PICKET_PROTO_ERR_UNAUTHENTICATED;
  }
  unsigned char h[HASH_LEN];
  sha256(tok, len, h);
  pthread_mutex_lock(&mu);
  auth_table *t = current;
  if (t) atomic_fetch_add(&t->refs, 1);
  pthread_mutex_unlock(&mu);
  /* Each entry of the chain is compared whole, whichever matches: no
   * early exit says how many bytes of a stored hash came close. */
  int found = -1;
  for (int i = t ? t->head[bucket_of(t, h)] : -1; i >= 0; i = t->next[i]) {
    unsigned diff = 0;
    for (int j = 0; j < HASH_LEN; j++) diff |= t->tokens[i].hash[j] ^ h[j];
    int match = -(int)(diff == 0); /* all ones on a match, else 0: no branch */
    found = (i & match) | (found & ~match);
  }
  if (found < 0) {
    table_put(t);
    snprintf(msg, cap, "unknown token");
    *why = QUOTA_DENY_UNKNOWN_TOKEN;
    return PICKET_PROTO_ERR_UNAUTHENTICATED;
  }
  *who = &t->tokens[found];
  return 0;
}

void auth_put(auth_principal *who) {
  if (who) table_put(who->table);
}

auth_principal *auth_ref(auth_principal *who) {
  atomic_fetch_add(&who->table->refs, 1);
  return who;
}

int auth_same(const auth_principal *a, const auth_principal *b) {
  return a == b || (memcmp(a->hash, b->hash, HASH_LEN) == 0 && strcmp(a->name, b->name) == 0);
}

auth_principal *auth_current(const auth_principal *who) {
  pthread_mutex_lock(&mu);
  auth_table *t = current;
  if (t) atomic_fetch_add(&t->refs, 1);
  pthread_mutex_unlock(&mu);
  for (int i = t ? t->head[bucket_of(t, who->hash)] : -1; i >= 0; i = t->next[i])
    if (auth_same(&t->tokens[i], who)) return &t->tokens[i];
  table_put(t);
  return NULL;
}

const char *auth_name(const auth_principal *who) { return who->name; }

int auth_allows(const auth_principal *who, auth_verb verb) { return (who->verbs & verb) != 0; }

int auth_covers(const auth_principal *who, const char *name) {
  if (who->all) return 1;
  for (int i = 0; i < who->nprefixes; i++)
    if (strncmp(name, who->prefixes[i], strlen(who->prefixes[i])) == 0) return 1;
  return 0;
}

int auth_covers_all(const auth_principal *who) { return who == NULL ? !auth_enabled() : who->all; }

int auth_sees_operators(const auth_principal *who) {
  return !auth_enabled() || (who && auth_allows(who, AUTH_ADMIN));
}

const char *auth_operator_shown(const auth_principal *who, const char *by) {
  return auth_sees_operators(who) ? by : AUTH_OPERATOR_HIDDEN;
}

const char *auth_prefix(const auth_principal *who, int i) {
  if (who->all) return i == 0 ? "*" : NULL;
  return i < who->nprefixes ? who->prefixes[i] : NULL;
}

quota_subject *auth_subject(const auth_principal *who) { return who->subject; }

void auth_bind_lease(const auth_principal *who, const char *lease,
                     char out[PICKET_PROTO_LEASE_LEN + 1]) {
  char in[16 + AUTH_NAME_MAX + PICKET_PROTO_LEASE_LEN];
  int n = snprintf(in, sizeof in, "lease:%s:%s", who->name, lease);
  unsigned char h[HASH_LEN];
  sha256(in, (size_t)n, h);
  picket_proto_lease_format(h, out); /* the first 16 bytes */
}
