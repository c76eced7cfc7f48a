/* admin.c: the operators' calls on etcd: listing held names and breaking
 * a lock (a broken holder is told why its lease is gone by grant.c's
 * store_etcd_broken_why, which reads what a break leaves).
 *
 * Listing needs no index here (Redis keeps one, proto/redis/list.lua):
 * etcd ranges its keys in order, so a page walks P l/ (locks), then P r/
 * (read/write locks), then P s/ (semaphores) from the cursor on, in
 * ranges as long as the page needs (store_etcd_list says why it always
 * advances). The TTLs come from each grant's `exp` (what its last grant
 * or refresh set): no call per name.
 *
 * A break deletes the grant and puts P f/NAME in one txn: that txn's
 * revision is the new last fence, above the broken holder's, and the next
 * grant's is above it. It leaves P b/NAME (who, when, the broken lease's
 * id) on a lease of what the grant had left and at least a minute. A
 * break of a free lock keeps the last broken lease's reason in it, and a
 * break given a fence leaves another fence's grant alone: a retried break
 * is told from a new one by the fence it names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "admin.h"
#include "cursor.h"
#include "grant.h"

#define BROKEN_KEEP_S 60

/* ---- listing ------------------------------------------------------------- */

/* A range asks for at most LIST_CHUNK keys: a key is at most ~330 bytes
 * and a grant's JSON ~1 KB, so a reply stays under 2 MB, far from
 * ETCD_REPLY_MAX (8 MiB) whatever is stored. A page stops at the end of
 * the first name after it has looked at LIST_SCAN_KEYS keys: names that
 * hold nothing (a read/write lock's last-write fence outlives its leases)
 * cost a page no more than that. */
#define LIST_CHUNK 1000
#define LIST_SCAN_KEYS 4000
#define LIST_KEY_MAX (ETCD_KEY_MAX + 1) /* any key etcd hands back, to resume after it */

static const char list_kinds[3] = {'l', 'r', 's'};

/* One name of one kind, gathered from its keys. */
typedef struct {
  store_entry e;
  int64_t exp; /* the latest end of its leases (unix ms) */
  int on;      /* 1 while a name is being gathered */
  int valid;   /* its name is a name (a key of someone else's may not be) */
} gathered;

/* The name a key of `kind` belongs to: its start and length. */
static const char *name_of(const etcd_kv *kv, char kind, size_t *len) {
  size_t plen = strlen(store_etcd_cfg->key_prefix) + 2;
  if (kv->key_len <= plen) return NULL;
  const char *name = kv->key + plen;
  const char *slash = kind == 'l' ? NULL : memchr(name, '/', kv->key_len - plen);
  *len = slash ? (size_t)(slash - name) : kv->key_len - plen;
  return name;
}

/* x is held by the one lease g of kv (a lock, or a read/write lock's writer). */
static void one_holder(gathered *x, const etcd_kv *kv, const store_etcd_grant *g) {
  x->e.holders = 1;
  x->e.fence = kv->create_revision;
  x->e.at = g->at;
  x->e.renewals = g->renewals;
  x->exp = g->exp;
  snprintf(x->e.owner, sizeof x->e.owner, "%s", g->owner);
}

/* Adds one key of x's name (of x's kind) to x. A read/write lock's keys
 * come in key order: f, q/..., r/..., w, wd. */
static void gather_key(gathered *x, const etcd_kv *kv, const char *rest) {
  store_etcd_grant g;
  if (x->e.kind == 'l') {
    if (store_etcd_grant_parse(kv, &g) == 0) one_holder(x, kv, &g);
  } else if (x->e.kind == 's') {
    if (store_etcd_grant_parse(kv, &g) < 0) return;
    x->e.holders++;
    x->e.limit = g.limit;
    if (g.exp > x->exp) x->exp = g.exp;
  } else if (strcmp(rest, "f") == 0) {
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

/* Whether a key's name is one picketd keeps: a name, or for a lock an
 * election's "/e/NAME" (api_family.c). */
static int listed_valid(char kind, const char *name, size_t len) {
  const size_t el = strlen(PICKET_PROTO_ELECTION_STORE_PREFIX);
  if (kind == 'l' && len > el && memcmp(name, PICKET_PROTO_ELECTION_STORE_PREFIX, el) == 0)
    name += el, len -= el;
  return picket_proto_name_valid(name, len);
}

/* One page being made. */
typedef struct {
  int limit;
  store_result *r;
  char last[PICKET_PROTO_NAME_MAX + 3]; /* the member ("NAME k") of the last name consumed */
  int64_t looked;                       /* keys looked at */
  int more, stop;
} page;

/* x holds all of its name's keys: list it (if held and the page has room),
 * and move the page's position past it. A held name that finds the page
 * full is not consumed: the next page starts with it. */
static void name_done(page *p, gathered *x, int64_t now) {
  x->on = 0;
  if (!x->valid) return;
  if (x->e.holders > 0) {
    if (p->r->nentries == p->limit) {
      p->more = p->stop = 1;
      return;
    }
    x->e.ttl_ms = x->exp > now ? x->exp - now : 1;
    p->r->entries[p->r->nentries++] = x->e;
  }
  snprintf(p->last, sizeof p->last, "%s %c", x->e.name, x->e.kind);
  if (p->looked >= LIST_SCAN_KEYS) p->more = p->stop = 1;
}

/* Lists kind k's names from key `start` (exclusive of the key `skip`,
 * "" for none) up to `end`, in key order, into p until p stops. start
 * and skip have LIST_KEY_MAX bytes: a range goes on after its last key. */
static int list_kind(etcd_client *c, page *p, char k, char *start, const char *end,
                     char *skip, int64_t now) {
  gathered x = {.on = 0};
  for (;;) {
    /* what this page still needs, and a little more (the key skipped,
     * the next held name that says whether there is more); a read/write
     * lock or a semaphore has a few keys per name */
    int64_t need = p->limit - p->r->nentries + 2;
    int64_t want = k == 'l' ? need : 4 * need + 8;
    if (want > LIST_CHUNK) want = LIST_CHUNK;
    etcd_op op = {.kind = ETCD_OP_RANGE, .key = start, .end = end, .limit = want};
    etcd_op_result res = {0};
    int rc = etcd_range(c, &op, &res);
    if (rc != ETCD_OK) {
      etcd_op_result_clear(&res);
      return rc;
    }
    for (int i = 0; i < res.nkvs && !p->stop; i++) {
      const etcd_kv *kv = &res.kvs[i];
      if (skip[0] && strcmp(kv->key, skip) == 0) continue;
      p->looked++;
      size_t len = 0;
      const char *name = name_of(kv, k, &len);
      if (name == NULL) continue;
      if (x.on && (strlen(x.e.name) != len || memcmp(x.e.name, name, len) != 0))
        name_done(p, &x, now);
      if (p->stop) break;
      if (!x.on) {
        memset(&x, 0, sizeof x);
        x.on = 1;
        x.e.kind = k;
        x.valid = len <= PICKET_PROTO_NAME_MAX && listed_valid(k, name, len);
        if (x.valid) memcpy(x.e.name, name, len);
      }
      if (x.valid) gather_key(&x, kv, name + len + (len < kv->key_len ? 1 : 0));
    }
    int more = res.more && res.nkvs > 0;
    if (more && !p->stop) { /* go on after the last key read */
      snprintf(start, LIST_KEY_MAX, "%s", res.kvs[res.nkvs - 1].key);
      snprintf(skip, LIST_KEY_MAX, "%s", start);
    }
    etcd_op_result_clear(&res);
    if (p->stop) return ETCD_OK;
    if (!more) {
      if (x.on) name_done(p, &x, now);
      return ETCD_OK;
    }
  }
}

/* A page is a walk over P l/, then P r/, then P s/ (each within the name
 * prefix), in etcd's key order, from the cursor's member "NAME k" on: the
 * keys after NAME's in kind k, then the later kinds from their start. So
 * the order is locks, then read/write locks, then semaphores, each by key
 * (a name sorts as its keys do: "a.b" before "a" among read/write locks
 * and semaphores, whose keys are "NAME/..."). Merging the three kinds in
 * name order, as before, needed every range to reach the same name, and a
 * range cut inside one name with many keys (10,000 read leases) never did.
 *
 * Why every name is listed exactly once and paging always ends: a page
 * reads only whole names (the ranges go on, LIST_CHUNK keys at a time,
 * until a name's last key, however many it has) and consumes them in key
 * order: each is listed if held, else passed over. The cursor is the last
 * name consumed, and the next page starts just past all of its keys. A
 * page stops only after it has consumed at least one name, or at the end:
 * when it is full (limit >= 1 names listed) or has looked at
 * LIST_SCAN_KEYS keys at the end of a name it consumed. So each cursor is
 * strictly after the one before it in (kind, key) order, a finite order:
 * no page repeats a name, none is skipped, and the listing ends. A name
 * held throughout is listed exactly once; one taken or released meanwhile,
 * at most once. A page's cost is O(limit + LIST_SCAN_KEYS) keys plus the
 * keys of the one name it finishes, which --max-readers and
 * --max-semaphore-limit bound. */
store_status store_etcd_list(const char *prefix, int limit, store_cursor *at, int *more,
                             store_result *r) {
  memset(r, 0, sizeof *r);
  *more = 0;
  /* the cursor's member "NAME k": the kind it is in and the name it is past */
  int from = 0, slot;
  char member[PICKET_PROTO_NAME_MAX + 3], after[PICKET_PROTO_NAME_MAX + 3] = "";
  if (store_cursor_read(at, prefix, &slot, member) < 0) {
    snprintf(r->err, sizeof r->err, "not a cursor of this listing");
    return STORE_EARG;
  }
  etcd_client *c = store_etcd_client(r);
  if (c == NULL) return STORE_EUNAVAIL;
  r->entries = limit > 0 ? calloc((size_t)limit, sizeof *r->entries) : NULL;
  if (limit > 0 && r->entries == NULL) return store_etcd_no_memory(r);
  size_t alen = strlen(member);
  if (alen >= 3) {
    from = (int)((const char *)memchr(list_kinds, member[alen - 1], sizeof list_kinds) - list_kinds);
    snprintf(after, sizeof after, "%.*s", (int)(alen - 2), member);
  }
  page p = {.limit = limit, .r = r};
  int64_t now = clock_wall_ms();
  const char *kp = store_etcd_cfg->key_prefix;
  for (int ki = from; ki < 3 && !p.stop; ki++) {
    char k = list_kinds[ki];
    char start[LIST_KEY_MAX], end[STORE_ETCD_KEY_MAX];
    char skip[sizeof start] = "";
    /* the end: just past every key that starts with the name prefix */
    int n = snprintf(end, sizeof end, "%s%c/%s", kp, k, prefix);
    if (n <= 0 || (size_t)n >= sizeof end) { /* cannot be: prefixes and names are bounded */
      store_result_clear(r);
      snprintf(r->err, sizeof r->err, "a listing's key does not fit");
      return STORE_EREPLY;
    }
    end[n - 1]++; /* names are printable ASCII: no byte wraps */
    if (ki == from && after[0] && k == 'l') { /* from the cursor's lock, itself left out */
      snprintf(start, sizeof start, "%s%c/%s", kp, k, after);
      snprintf(skip, sizeof skip, "%s", start);
    } else if (ki == from && after[0]) { /* past NAME/...: '/' + 1 is '0' */
      snprintf(start, sizeof start, "%s%c/%s0", kp, k, after);
    } else {
      snprintf(start, sizeof start, "%s%c/%s", kp, k, prefix);
    }
    int rc = list_kind(c, &p, k, start, end, skip, now);
    if (rc != ETCD_OK) {
      store_result_clear(r);
      return store_etcd_failed(c, rc, r);
    }
  }
  *more = p.more;
  if (p.more) store_cursor_write(at, 0, p.last);
  else at->text[0] = '\0';
  return STORE_OK;
}

/* ---- breaking -------------------------------------------------------------- */

/* The note a break leaves in P b/NAME: what event followers tell of this
 * break (by, at, and the broken lease's fence, 0 for none), and the reason
 * the broken holder is given (lease, note_by, note_at). A break of a free
 * lock keeps the reason of the last lease broken (old: P b/NAME as read,
 * or NULL), so a retry of a break whose reply was lost does not erase it.
 * The caller frees the string; NULL when out of memory. */
static char *break_note(const etcd_kv *old, const store_etcd_grant *g, int64_t fence,
                        const char *who, int64_t now) {
  json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:s, s:I}", "lease", g ? g->lease : "", "by", who,
                        "at", (json_int_t)now, "fence", (json_int_t)fence, "note_by", who,
                        "note_at", (json_int_t)now);
  json_t *o = old && !g ? json_loadb(old->value, old->value_len, 0, NULL) : NULL;
  const char *lease = json_string_value(json_object_get(o, "lease"));
  if (j && lease && lease[0]) {
    json_t *by = json_object_get(o, "note_by"), *at = json_object_get(o, "note_at");
    json_object_set(j, "lease", json_object_get(o, "lease"));
    json_object_set(j, "note_by", by ? by : json_object_get(o, "by"));
    json_object_set(j, "note_at", at ? at : json_object_get(o, "at"));
  }
  char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(o);
  json_decref(j);
  return text;
}

store_status store_etcd_break(const char *name, const char *who, int64_t fence,
                              store_result *r) {
  memset(r, 0, sizeof *r);
  etcd_client *c = store_etcd_client(r);
  if (c == NULL) return STORE_EUNAVAIL;
  char l[STORE_ETCD_KEY_MAX], d[STORE_ETCD_KEY_MAX], f[STORE_ETCD_KEY_MAX], b[STORE_ETCD_KEY_MAX];
  char okey[STORE_ETCD_KEY_MAX];
  store_etcd_key(l, sizeof l, 'l', name);
  store_etcd_key(okey, sizeof okey, 'o', name);
  store_etcd_key(d, sizeof d, 'd', name);
  store_etcd_key(f, sizeof f, 'f', name);
  store_etcd_key(b, sizeof b, 'b', name);
  for (int attempt = 0; attempt < 4; attempt++) {
    /* the grant, its lock-delay (put in the grant's txn: the same
     * create_revision, its fence) and the last break's note */
    etcd_op reads[3] = {{.kind = ETCD_OP_RANGE, .key = l},
                        {.kind = ETCD_OP_RANGE, .key = d},
                        {.kind = ETCD_OP_RANGE, .key = b}};
    etcd_txn_req rt = {NULL, 0, reads, 3, NULL, 0};
    etcd_txn_result rr = {0};
    int rc = etcd_txn(c, &rt, &rr);
    if (rc != ETCD_OK || rr.nresults != 3) {
      store_status st = store_etcd_failed(c, rc != ETCD_OK ? rc : ETCD_EREPLY, r);
      etcd_txn_result_clear(&rr);
      return st;
    }
    etcd_kv *kv = rr.results[0].nkvs == 1 ? &rr.results[0].kvs[0] : NULL;
    etcd_kv *dk = rr.results[1].nkvs == 1 ? &rr.results[1].kvs[0] : NULL;
    etcd_kv *bk = rr.results[2].nkvs == 1 ? &rr.results[2].kvs[0] : NULL;
    store_etcd_grant g;
    int held = kv && store_etcd_grant_parse(kv, &g) == 0;
    etcd_kv *there = kv ? kv : dk;
    if (fence > 0 && there && there->create_revision != fence) {
      /* another grant's: left alone (a retry must not break the next holder) */
      store_etcd_grant o;
      r->fence = there->create_revision;
      r->ttl_ms = store_etcd_left_s(c, there->lease) * 1000;
      if (store_etcd_grant_parse(there, &o) == 0)
        snprintf(r->owner, sizeof r->owner, "%s", o.owner);
      etcd_txn_result_clear(&rr);
      return STORE_HELD;
    }
    int64_t now = clock_wall_ms(), M = 0, given = 0;
    char qentry[sizeof ((store_etcd_quota *)0)->entry];
    int nops = 0;
    etcd_op ops[6];
    ops[nops++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = l};
    ops[nops++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = okey}; /* its owner key (locks.c) */
    ops[nops++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = d};
    ops[nops++] = (etcd_op){.kind = ETCD_OP_PUT, .key = f, .value = ""};
    /* the reason, for the broken holder's next renew or release, and what
     * event followers tell of the break (store_events.c) */
    int64_t keep_s = held && g.exp > now ? (g.exp - now + 999) / 1000 : 0;
    if (keep_s < BROKEN_KEEP_S) keep_s = BROKEN_KEEP_S;
    char *marker = break_note(bk, held ? &g : NULL, held ? kv->create_revision : 0, who, now);
    if (marker && etcd_lease_grant(c, keep_s, &M, &given) == ETCD_OK)
      ops[nops++] = (etcd_op){.kind = ETCD_OP_PUT, .key = b, .value = marker, .lease = M};
    if (held && g.token[0]) { /* the broken lease's place in its token's count */
      store_op qop = {.kind = STORE_OP_ACQUIRE, .name = name, .lease = g.lease};
      store_etcd_quota_entry(qentry, sizeof qentry, g.token, &qop);
      ops[nops++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = qentry};
    }
    /* only the grant just read (or, with none, still none), and only over
     * the note just read */
    etcd_compare cmp[2] = {
        held ? (etcd_compare){.key = l, .target = ETCD_CMP_MOD, .number = kv->mod_revision}
             : (etcd_compare){.key = l, .target = ETCD_CMP_CREATE},
        bk ? (etcd_compare){.key = b, .target = ETCD_CMP_MOD, .number = bk->mod_revision}
           : (etcd_compare){.key = b, .target = ETCD_CMP_CREATE}};
    etcd_txn_req t = {cmp, 2, ops, nops, NULL, 0};
    etcd_txn_result tr = {0};
    rc = etcd_txn(c, &t, &tr);
    int ok = rc == ETCD_OK && tr.succeeded;
    int64_t rev = tr.revision;
    etcd_txn_result_clear(&tr);
    free(marker);
    if (!ok) {
      store_status st = rc != ETCD_OK ? store_etcd_failed(c, rc, r) : STORE_OK;
      if (M) etcd_lease_revoke(c, M); /* after: its call replaces the failure's message */
      etcd_txn_result_clear(&rr);
      if (rc != ETCD_OK) return st;
      continue; /* granted, renewed or broken meanwhile: look again */
    }
    r->fence = rev;
    r->held = held;
    if (held) {
      r->at = g.at;
      snprintf(r->owner, sizeof r->owner, "%s", g.owner);
      snprintf(r->token, sizeof r->token, "%s", g.token);
      /* (its etcd leases are shared and nothing keeps them alive: pool.h) */
    }
    etcd_txn_result_clear(&rr);
    return STORE_OK;
  }
  snprintf(r->err, sizeof r->err, "etcd: lock %.200s kept changing while it was broken", name);
  return STORE_EUNAVAIL;
}
