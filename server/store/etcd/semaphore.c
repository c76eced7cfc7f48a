/* semaphore.c: semaphores on etcd, a fence per permit.
 *
 * A semaphore NAME with limit N has N slots, 0..N-1, as on Redis
 * (proto/redis/semaphore.lua). A permit is a lease on one slot, kept as a
 * lock's is (grant.c):
 *  - P s/NAME/I: slot I's grant (JSON, with the limit) on its etcd lease;
 *    its create_revision is the permit's fence, above every fence slot I
 *    had before (etcd's revisions rise across the whole cluster);
 *  - P e/NAME/I: slot I's lock-delay, as a lock's P d/NAME.
 * Acquire reads both prefixes at one revision, picks the lowest slot that
 * neither holds, and writes it in one txn that compares that nothing
 * under P s/NAME/ was written since that read: two acquires that raced
 * for the same slot, or past the limit, cannot both succeed (the loser
 * reads again). Every live permit carries the limit it was granted under:
 * an acquire with another limit while any is live is STORE_ELIMIT.
 * A release deletes the slot's keys; waiters hear of it through the
 * release feed (feed.c: a DELETE under P s/NAME/ is "s/NAME"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grant.h"
#include "semaphore.h"

#define SEM_TRIES 4
#define SLOT_KEY_MAX (STORE_ETCD_KEY_MAX + 24) /* a prefix and a slot */

typedef struct {
  char s[STORE_ETCD_KEY_MAX], e[STORE_ETCD_KEY_MAX]; /* P s/NAME/ and P e/NAME/ */
} sem_prefixes;

static void prefixes_of(sem_prefixes *p, const char *name) {
  snprintf(p->s, sizeof p->s, "%ss/%s/", store_etcd_cfg->key_prefix, name);
  snprintf(p->e, sizeof p->e, "%se/%s/", store_etcd_cfg->key_prefix, name);
}

/* The slot of a key under prefix (P s/NAME/I), or -1. */
static int64_t slot_of(const etcd_kv *kv, const char *prefix) {
  size_t n = strlen(prefix);
  if (kv->key_len <= n) return -1;
  char *end;
  long long i = strtoll(kv->key + n, &end, 10);
  return *end == '\0' && i >= 0 ? i : -1;
}

/* What the two prefixes hold, read at one revision (a txn of two ranges). */
typedef struct {
  etcd_txn_result tr;
  etcd_op_result *grants, *delays;
} sem_view;

/* Reads the semaphore: STORE_OK with *v filled (the caller clears v->tr),
 * or a failure (nothing to clear). */
static store_status view_read(etcd_client *c, const sem_prefixes *p, sem_view *v,
                              store_result *r) {
  memset(v, 0, sizeof *v);
  etcd_op get[2] = {{.kind = ETCD_OP_RANGE, .key = p->s, .prefix = 1},
                    {.kind = ETCD_OP_RANGE, .key = p->e, .prefix = 1}};
  etcd_txn_req t = {NULL, 0, get, 2, NULL, 0};
  int rc = etcd_txn(c, &t, &v->tr);
  if (rc == ETCD_OK && v->tr.nresults != 2) rc = ETCD_EREPLY;
  if (rc != ETCD_OK) {
    store_status st = store_etcd_failed(c, rc, r);
    etcd_txn_result_clear(&v->tr);
    return st;
  }
  v->grants = &v->tr.results[0];
  v->delays = &v->tr.results[1];
  return STORE_OK;
}

/* The live permit of op's lease: its kv (into v) and grant, or NULL. */
static etcd_kv *find_own(const sem_view *v, const store_op *op, store_etcd_grant *g) {
  for (int i = 0; i < v->grants->nkvs; i++)
    if (store_etcd_grant_parse(&v->grants->kvs[i], g) == 0 && strcmp(g->lease, op->lease) == 0)
      return &v->grants->kvs[i];
  return NULL;
}

static void slot_keys(const sem_prefixes *p, int64_t slot, char *key, char *dkey) {
  snprintf(key, SLOT_KEY_MAX, "%s%lld", p->s, (long long)slot);
  snprintf(dkey, SLOT_KEY_MAX, "%s%lld", p->e, (long long)slot);
}

static store_status sem_acquire(etcd_client *c, store_op *op, store_result *r) {
  sem_prefixes p;
  prefixes_of(&p, op->name);
  for (int attempt = 0; attempt < SEM_TRIES; attempt++) {
    store_etcd_quota q;
    store_status st = store_etcd_quota_read(c, op, &q, r);
    if (st != STORE_OK) return st;
    sem_view v;
    if ((st = view_read(c, &p, &v, r)) != STORE_OK) return st;
    char key[SLOT_KEY_MAX], dkey[SLOT_KEY_MAX];
    store_etcd_grant g;
    etcd_kv *own = find_own(&v, op, &g);
    if (own) {
      /* a retry by a lease that holds a permit: that permit, refreshed */
      int64_t slot = slot_of(own, p.s);
      slot_keys(&p, slot, key, dkey);
      store_etcd_keys at = {key, dkey, NULL};
      st = store_etcd_refresh(c, op, &at, own, &g, 0, r);
      etcd_txn_result_clear(&v.tr);
      r->permit = slot;
      if (st == STORE_LOST) { /* at its cap: its slot is taken till it ends */
        r->ttl_ms = 1;
        st = STORE_HELD;
      }
      return st;
    }
    /* the limit the live permits use, and the slots taken (held or delayed) */
    int64_t limit = op->limit, stored = 0;
    char *taken = calloc((size_t)limit, 1);
    if (taken == NULL) {
      etcd_txn_result_clear(&v.tr);
      return store_etcd_no_memory(r);
    }
    int64_t ntaken = 0, first_lease = 0;
    for (int i = 0; i < v.grants->nkvs; i++) {
      store_etcd_grant h;
      if (store_etcd_grant_parse(&v.grants->kvs[i], &h) == 0 && h.limit) stored = h.limit;
      int64_t s = slot_of(&v.grants->kvs[i], p.s);
      if (first_lease == 0) first_lease = v.grants->kvs[i].lease;
      if (s >= 0 && s < limit && !taken[s]) taken[s] = 1, ntaken++;
      else if (s >= limit) ntaken++; /* a slot of a larger limit */
    }
    for (int i = 0; i < v.delays->nkvs; i++) {
      int64_t s = slot_of(&v.delays->kvs[i], p.e);
      if (first_lease == 0) first_lease = v.delays->kvs[i].lease;
      if (s >= 0 && s < limit && !taken[s]) taken[s] = 1, ntaken++;
    }
    if (v.grants->nkvs > 0 && stored && stored != limit) {
      free(taken);
      etcd_txn_result_clear(&v.tr);
      r->limit = stored;
      return STORE_ELIMIT;
    }
    int64_t slot = 0;
    while (slot < limit && taken[slot]) slot++;
    free(taken);
    int64_t read_at = v.tr.revision;
    etcd_txn_result_clear(&v.tr);
    if (slot >= limit || ntaken >= limit) {
      r->ttl_ms = first_lease ? store_etcd_left_s(c, first_lease) * 1000 : 1;
      return STORE_HELD;
    }
    slot_keys(&p, slot, key, dkey);
    store_etcd_grant ng;
    int64_t L = 0, D = 0;
    st = store_etcd_grant_new(c, op, &q, op->lock_delay_ms, &ng, &L, &D, r);
    if (st != STORE_OK) return st;
    ng.limit = limit;
    char *value = store_etcd_grant_value(&ng);
    if (value == NULL) return store_etcd_no_memory(r);
    etcd_compare cmp[4] = {{.key = key, .target = ETCD_CMP_CREATE},
                           {.key = dkey, .target = ETCD_CMP_CREATE},
                           {.key = p.s, .prefix = 1, .target = ETCD_CMP_MOD,
                            .result = ETCD_CMP_LESS, .number = read_at + 1}};
    etcd_op put[3] = {{.kind = ETCD_OP_PUT, .key = key, .value = value, .lease = L}};
    int ncmp = 3, nput = 1;
    if (D) put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = dkey, .value = value, .lease = D};
    int counted = store_etcd_quota_txn(&q, L, &cmp[ncmp], &put[nput]);
    ncmp += counted;
    nput += counted;
    etcd_txn_req t = {cmp, ncmp, put, nput, NULL, 0};
    etcd_txn_result tr;
    int done = store_etcd_grant_commit(c, &t, &ng, L, D, &tr, &st, r);
    free(value);
    etcd_txn_result_clear(&tr);
    if (done > 0) r->permit = slot;
    if (done != 0) return done > 0 ? STORE_OK : st;
    /* the semaphore changed since the read: read again */
  }
  r->ttl_ms = 1;
  return STORE_HELD;
}

static store_status sem_renew_release(etcd_client *c, store_op *op, store_result *r) {
  sem_prefixes p;
  prefixes_of(&p, op->name);
  sem_view v;
  store_status vst = view_read(c, &p, &v, r);
  if (vst != STORE_OK) return vst;
  store_etcd_grant g;
  etcd_kv *own = find_own(&v, op, &g);
  store_status st = STORE_LOST;
  if (own) {
    char key[SLOT_KEY_MAX], dkey[SLOT_KEY_MAX];
    int64_t slot = slot_of(own, p.s);
    slot_keys(&p, slot, key, dkey);
    r->permit = slot;
    if (op->kind == STORE_OP_SEM_RENEW) {
      store_etcd_keys at = {key, dkey, NULL};
      st = store_etcd_refresh(c, op, &at, own, &g, 1, r);
    } else {
      st = store_etcd_grant_end(c, op, key, dkey, own, &g, NULL, 0, r);
    }
  }
  etcd_txn_result_clear(&v.tr);
  return st;
}

static int by_slot(const void *a, const void *b) {
  const store_permit *x = a, *y = b;
  return x->permit < y->permit ? -1 : x->permit > y->permit;
}

static store_status sem_inspect(etcd_client *c, store_op *op, store_result *r) {
  sem_prefixes p;
  prefixes_of(&p, op->name);
  sem_view v;
  store_status vst = view_read(c, &p, &v, r);
  if (vst != STORE_OK) return vst;
  /* live: the held slots, and those whose lock-delay runs (as Redis's held
   * set keeps a slot for its TTL and its delay) */
  int n = v.grants->nkvs + v.delays->nkvs;
  store_permit *all = n ? calloc((size_t)n, sizeof *all) : NULL;
  if (n && all == NULL) {
    etcd_txn_result_clear(&v.tr);
    return store_etcd_no_memory(r);
  }
  int live = 0;
  for (int i = 0; i < v.grants->nkvs; i++) {
    store_etcd_grant g;
    etcd_kv *kv = &v.grants->kvs[i];
    if (store_etcd_grant_parse(kv, &g) < 0) continue;
    if (g.limit) r->limit = g.limit;
    store_permit *s = &all[live++];
    s->permit = slot_of(kv, p.s);
    s->fence = kv->create_revision;
    s->ttl_ms = -kv->lease; /* its lease, for below */
    snprintf(s->owner, sizeof s->owner, "%s", g.owner);
  }
  int held = live;
  for (int i = 0; i < v.delays->nkvs; i++) {
    int64_t slot = slot_of(&v.delays->kvs[i], p.e), seen = 0;
    for (int k = 0; k < held; k++) seen |= all[k].permit == slot;
    if (seen) continue;
    store_etcd_grant g;
    store_permit *s = &all[live++];
    s->permit = slot;
    /* written in the grant's txn: its create_revision is the grant's fence */
    s->fence = v.delays->kvs[i].create_revision;
    if (store_etcd_grant_parse(&v.delays->kvs[i], &g) == 0) {
      snprintf(s->owner, sizeof s->owner, "%s", g.owner);
      if (g.limit && !r->limit) r->limit = g.limit;
    }
    s->delay_ms = -v.delays->kvs[i].lease; /* its lease, for below */
  }
  etcd_txn_result_clear(&v.tr);
  if (live > 1) qsort(all, (size_t)live, sizeof *all, by_slot); /* all is NULL with none */
  r->live = live;
  if (live == 0) r->limit = 0;
  /* what is left of each listed permit: one call each, op->limit at most */
  int listed = live < op->limit ? live : (int)op->limit;
  for (int i = 0; i < listed; i++) {
    if (all[i].ttl_ms < 0) all[i].ttl_ms = store_etcd_left_s(c, -all[i].ttl_ms) * 1000;
    if (all[i].delay_ms < 0) all[i].delay_ms = store_etcd_left_s(c, -all[i].delay_ms) * 1000;
  }
  r->permits = all;
  r->npermits = listed;
  return STORE_OK;
}

void store_etcd_semaphore(etcd_client *c, store_op *op) {
  switch (op->kind) {
    case STORE_OP_SEM_ACQUIRE: op->st = sem_acquire(c, op, &op->r); break;
    case STORE_OP_SEM_RENEW:
    case STORE_OP_SEM_RELEASE: op->st = sem_renew_release(c, op, &op->r); break;
    default: op->st = sem_inspect(c, op, &op->r); break;
  }
}
