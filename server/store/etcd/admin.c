/* admin.c: the operators' calls on etcd: listing held names, breaking a
 * lock, and telling a broken holder why its lease is gone.
 *
 * Listing needs no index here (Redis keeps one, proto/redis/list.lua):
 * etcd ranges its keys in order, so a page is a range of P l/ (locks),
 * P r/ (read/write locks) and P s/ (semaphores) each from the cursor's
 * name on, merged in the order Redis lists ("NAME k", k = l, r or s). A
 * range cut short by its limit sets the horizon: no entry past the last
 * name it reached is listed in this page, since that range may hold names
 * before it. The TTLs come from each grant's `exp` (what its last grant or
 * refresh set): no call per name.
 *
 * A break deletes the grant and puts P f/NAME in one txn: that txn's
 * revision is the new last fence, above the broken holder's, and the next
 * grant's is above it. It leaves P b/NAME (who, when, the broken lease's
 * id) on a lease of what the grant had left and at least a minute, and
 * then revokes the grant's etcd leases so nothing keeps them alive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "store_etcd.h"

#define BROKEN_KEEP_S 60

/* ---- listing ------------------------------------------------------------- */

typedef struct {
  store_entry e;
  int64_t exp; /* the latest end of its leases (unix ms) */
} candidate;

typedef struct {
  candidate *c;
  int n, cap;
} candidates;

static candidate *cand_get(candidates *cs, char kind, const char *name, size_t len) {
  if (cs->n > 0) {
    candidate *last = &cs->c[cs->n - 1];
    if (last->e.kind == kind && strlen(last->e.name) == len &&
        memcmp(last->e.name, name, len) == 0)
      return last;
  }
  if (len == 0 || len > PICKET_PROTO_NAME_MAX) return NULL;
  if (cs->n == cs->cap) {
    int cap = cs->cap ? cs->cap * 2 : 64;
    candidate *c = realloc(cs->c, (size_t)cap * sizeof *c);
    if (c == NULL) return NULL;
    cs->c = c;
    cs->cap = cap;
  }
  candidate *x = &cs->c[cs->n++];
  memset(x, 0, sizeof *x);
  x->e.kind = kind;
  memcpy(x->e.name, name, len);
  return x;
}

/* One kind's keys from `from` (a name) to the end of the name prefix:
 * ETCD_OK with the range in res. */
static int range_kind(etcd_client *c, char kind, const char *from, const char *prefix, int64_t limit,
                      etcd_op_result *res) {
  char start[STORE_ETCD_KEY_MAX], end[STORE_ETCD_KEY_MAX];
  snprintf(start, sizeof start, "%s%c/%s", store_etcd_cfg->key_prefix, kind, from);
  /* the end: just past every key that starts with the name prefix */
  int n = snprintf(end, sizeof end, "%s%c/%s", store_etcd_cfg->key_prefix, kind, prefix);
  if (n <= 0 || (size_t)n >= sizeof end) return ETCD_EINVAL;
  end[n - 1]++; /* names are printable ASCII: no byte wraps */
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = start, .end = end, .limit = limit};
  return etcd_range(c, &op, res);
}

/* The name a key of `kind` belongs to: its start and length. */
static const char *name_of(const etcd_kv *kv, char kind, size_t *len) {
  size_t plen = strlen(store_etcd_cfg->key_prefix) + 2;
  if (kv->key_len <= plen) return NULL;
  const char *name = kv->key + plen;
  const char *slash = kind == 'l' ? NULL : memchr(name, '/', kv->key_len - plen);
  *len = slash ? (size_t)(slash - name) : kv->key_len - plen;
  return name;
}

/* The candidate of a grant's key of `kind`, with the grant parsed into g;
 * NULL when the key holds none. */
static candidate *grant_entry(candidates *cs, const etcd_kv *kv, char kind, store_etcd_grant *g) {
  size_t len = 0;
  const char *name = name_of(kv, kind, &len);
  if (name == NULL || store_etcd_grant_parse(kv, g) < 0) return NULL;
  return cand_get(cs, kind, name, len);
}

/* x is held by the one lease g of kv (a lock, or a read/write lock's writer). */
static void one_holder(candidate *x, const etcd_kv *kv, const store_etcd_grant *g) {
  x->e.holders = 1;
  x->e.fence = kv->create_revision;
  x->e.at = g->at;
  x->e.renewals = g->renewals;
  x->exp = g->exp;
  snprintf(x->e.owner, sizeof x->e.owner, "%s", g->owner);
}

static void add_lock(candidates *cs, const etcd_kv *kv) {
  store_etcd_grant g;
  candidate *x = grant_entry(cs, kv, 'l', &g);
  if (x) one_holder(x, kv, &g);
}

static void add_semaphore(candidates *cs, const etcd_kv *kv) {
  store_etcd_grant g;
  candidate *x = grant_entry(cs, kv, 's', &g);
  if (x == NULL) return;
  x->e.holders++;
  x->e.limit = g.limit;
  if (g.exp > x->exp) x->exp = g.exp;
}

/* A read/write lock's keys come in key order: f, q/..., r/..., w, wd. */
static void add_rwlock(candidates *cs, const etcd_kv *kv) {
  size_t len = 0;
  const char *name = name_of(kv, 'r', &len);
  if (name == NULL) return;
  const char *rest = name + len + 1; /* after NAME/ */
  candidate *x = cand_get(cs, 'r', name, len);
  if (x == NULL) return;
  store_etcd_grant g;
  if (strcmp(rest, "f") == 0) {
    if (x->e.at == 0) x->e.fence = kv->mod_revision; /* the last write's, for readers */
  } else if (strncmp(rest, "r/", 2) == 0 && store_etcd_grant_parse(kv, &g) == 0) {
    if (x->e.at == 0) { /* no writer (yet, in key order: w sorts after r/) */
      x->e.holders++;
      if (g.exp > x->exp) x->exp = g.exp;
    }
  } else if (strcmp(rest, "w") == 0 && store_etcd_grant_parse(kv, &g) == 0) {
    one_holder(x, kv, &g);
  }
}

static int by_member(const void *a, const void *b) {
  const candidate *x = a, *y = b;
  int c = strcmp(x->e.name, y->e.name);
  return c ? c : (x->e.kind > y->e.kind) - (x->e.kind < y->e.kind);
}

store_status store_etcd_list(const char *prefix, int limit, store_cursor *at, int *more,
                             store_result *r) {
  memset(r, 0, sizeof *r);
  *more = 0;
  at->slot = 0;
  etcd_client *c = store_etcd_client(r);
  if (c == NULL) return STORE_EUNAVAIL;
  /* the cursor "NAME k": its name is where every range starts */
  char from[PICKET_PROTO_NAME_MAX + 3];
  snprintf(from, sizeof from, "%s", at->after[0] ? at->after : prefix);
  char *sp = strrchr(from, ' ');
  if (at->after[0] && sp) *sp = '\0';
  static const char kinds[3] = {'l', 'r', 's'};
  candidates cs = {0};
  char horizon[PICKET_PROTO_NAME_MAX + 1] = "";
  int cut = 0;
  for (int k = 0; k < 3; k++) {
    etcd_op_result res = {0};
    /* a lock is one key; the others several, so their ranges are longer */
    int64_t lim = kinds[k] == 'l' ? limit + 1 : ETCD_KVS_MAX;
    int rc = range_kind(c, kinds[k], from, prefix, lim, &res);
    if (rc != ETCD_OK) {
      etcd_op_result_clear(&res);
      free(cs.c);
      return store_etcd_failed(c, rc, r);
    }
    for (int i = 0; i < res.nkvs; i++) {
      if (kinds[k] == 'l') add_lock(&cs, &res.kvs[i]);
      else if (kinds[k] == 'r') add_rwlock(&cs, &res.kvs[i]);
      else add_semaphore(&cs, &res.kvs[i]);
    }
    if (res.more && res.nkvs > 0) {
      /* names at or past the last one this range reached may have more
       * keys of this kind (or names) beyond it: the page stops before */
      size_t len = 0;
      const char *name = name_of(&res.kvs[res.nkvs - 1], kinds[k], &len);
      char last[PICKET_PROTO_NAME_MAX + 1];
      snprintf(last, sizeof last, "%.*s", (int)len, name ? name : "");
      if (!cut || strcmp(last, horizon) < 0) snprintf(horizon, sizeof horizon, "%s", last);
      cut = 1;
    }
    etcd_op_result_clear(&res);
  }
  if (cs.n > 1) qsort(cs.c, (size_t)cs.n, sizeof *cs.c, by_member); /* cs.c is NULL with none */
  int64_t now = clock_wall_ms();
  r->entries = limit > 0 ? calloc((size_t)limit, sizeof *r->entries) : NULL;
  if (limit > 0 && r->entries == NULL) {
    free(cs.c);
    return store_etcd_no_memory(r);
  }
  char member[PICKET_PROTO_NAME_MAX + 3] = "";
  for (int i = 0; i < cs.n; i++) {
    candidate *x = &cs.c[i];
    if (x->e.holders == 0) continue; /* only a last write's fence, or delays */
    char m[PICKET_PROTO_NAME_MAX + 3];
    snprintf(m, sizeof m, "%s %c", x->e.name, x->e.kind);
    if (at->after[0] && strcmp(m, at->after) <= 0) continue;
    if (cut && strcmp(x->e.name, horizon) >= 0) {
      *more = 1;
      break;
    }
    if (r->nentries == limit) {
      *more = 1;
      break;
    }
    x->e.ttl_ms = x->exp > now ? x->exp - now : 1;
    r->entries[r->nentries++] = x->e;
    snprintf(member, sizeof member, "%s", m);
  }
  if (cut && !*more) *more = 1;
  free(cs.c);
  if (*more) {
    if (member[0]) snprintf(at->after, sizeof at->after, "%s", member);
  } else {
    at->after[0] = '\0';
  }
  return STORE_OK;
}

/* ---- breaking -------------------------------------------------------------- */

store_status store_etcd_break(const char *name, const char *who, store_result *r) {
  memset(r, 0, sizeof *r);
  etcd_client *c = store_etcd_client(r);
  if (c == NULL) return STORE_EUNAVAIL;
  char l[STORE_ETCD_KEY_MAX], d[STORE_ETCD_KEY_MAX], f[STORE_ETCD_KEY_MAX], b[STORE_ETCD_KEY_MAX];
  store_etcd_key(l, sizeof l, 'l', name);
  store_etcd_key(d, sizeof d, 'd', name);
  store_etcd_key(f, sizeof f, 'f', name);
  store_etcd_key(b, sizeof b, 'b', name);
  for (int attempt = 0; attempt < 4; attempt++) {
    etcd_op_result res = {0};
    etcd_kv *kv = NULL;
    int rc = store_etcd_read(c, l, &res, &kv);
    if (rc < 0) {
      etcd_op_result_clear(&res);
      return store_etcd_failed(c, rc, r);
    }
    store_etcd_grant g;
    int held = rc == 1 && store_etcd_grant_parse(kv, &g) == 0;
    int64_t now = clock_wall_ms(), M = 0, given = 0;
    char *marker = NULL, qentry[sizeof ((store_etcd_quota *)0)->entry];
    int nops = 0;
    etcd_op ops[5];
    ops[nops++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = l};
    ops[nops++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = d};
    ops[nops++] = (etcd_op){.kind = ETCD_OP_PUT, .key = f, .value = ""};
    /* the reason, for the broken holder's next renew or release, and what
     * event followers tell of the break (store_events.c) */
    int64_t keep_s = held && g.exp > now ? (g.exp - now + 999) / 1000 : 0;
    if (keep_s < BROKEN_KEEP_S) keep_s = BROKEN_KEEP_S;
    json_t *j = json_pack("{s:s, s:s, s:I, s:I}", "lease", held ? g.lease : "", "by", who, "at",
                          (json_int_t)now, "fence", (json_int_t)(held ? kv->create_revision : 0));
    marker = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (marker && etcd_lease_grant(c, keep_s, &M, &given) == ETCD_OK)
      ops[nops++] = (etcd_op){.kind = ETCD_OP_PUT, .key = b, .value = marker, .lease = M};
    if (held && g.token[0]) { /* the broken lease's place in its token's count */
      store_op qop = {.kind = STORE_OP_ACQUIRE, .name = name, .lease = g.lease};
      store_etcd_quota_entry(qentry, sizeof qentry, g.token, &qop);
      ops[nops++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = qentry};
    }
    /* only the grant just read (or, with none, still none) */
    etcd_compare cmp = held ? (etcd_compare){.key = l, .target = ETCD_CMP_MOD,
                                             .number = kv->mod_revision}
                            : (etcd_compare){.key = l, .target = ETCD_CMP_CREATE};
    etcd_txn_req t = {&cmp, 1, ops, nops, NULL, 0};
    etcd_txn_result tr = {0};
    rc = etcd_txn(c, &t, &tr);
    int ok = rc == ETCD_OK && tr.succeeded;
    int64_t rev = tr.revision;
    etcd_txn_result_clear(&tr);
    free(marker);
    if (!ok) {
      store_status st = rc != ETCD_OK ? store_etcd_failed(c, rc, r) : STORE_OK;
      if (M) etcd_lease_revoke(c, M); /* after: its call replaces the failure's message */
      etcd_op_result_clear(&res);
      if (rc != ETCD_OK) return st;
      continue; /* granted or renewed meanwhile: break what is there now */
    }
    r->fence = rev;
    r->held = held;
    if (held) {
      r->at = g.at;
      snprintf(r->owner, sizeof r->owner, "%s", g.owner);
      snprintf(r->token, sizeof r->token, "%s", g.token);
      /* nothing may keep the broken lease alive */
      store_etcd_leases_revoke(c, kv->lease, g.delay_lease);
    }
    etcd_op_result_clear(&res);
    return STORE_OK;
  }
  snprintf(r->err, sizeof r->err, "etcd: lock %.200s kept changing while it was broken", name);
  return STORE_EUNAVAIL;
}

void store_etcd_broken_why(etcd_client *c, const char *name, const char *lease,
                           store_result *r) {
  char b[STORE_ETCD_KEY_MAX];
  store_etcd_key(b, sizeof b, 'b', name);
  etcd_op_result res = {0};
  etcd_kv *kv = NULL;
  if (store_etcd_read(c, b, &res, &kv) == 1) {
    json_t *j = json_loadb(kv->value, kv->value_len, 0, NULL);
    const char *l = json_string_value(json_object_get(j, "lease"));
    const char *by = json_string_value(json_object_get(j, "by"));
    if (l && strcmp(l, lease) == 0)
      snprintf(r->why, sizeof r->why, "broken by %.100s at %lld", by ? by : "?",
               (long long)json_integer_value(json_object_get(j, "at")));
    json_decref(j);
  }
  etcd_op_result_clear(&res);
}
