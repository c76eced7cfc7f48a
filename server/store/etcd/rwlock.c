/* rwlock.c: read/write locks on etcd: many readers or one writer, and a
 * writer that waits keeps new readers out (proto/redis/rwlock.lua's rules).
 *
 * For read/write lock NAME, every key is under P r/NAME/ (so the release
 * feed wakes the "r/NAME" queue on any delete there):
 *  - w        the write lease (a grant, grant.c) on its etcd lease; its
 *             create_revision is the writer's fence, above every grant of
 *             the lock before it, read or write;
 *  - wd       the write lease's lock-delay (as a lock's P d/NAME);
 *  - f        put with every write grant: its mod_revision is the last
 *             write's fence, the epoch a read lease reads (a read grant
 *             with no write before it puts f itself, so every fence is a
 *             revision above the ones before);
 *  - r/LEASE  a read lease, its fence (the epoch) in its JSON;
 *  - rd/LEASE a read lease's lock-delay, on an etcd lease D of the read
 *             lease's TTL plus the delay (grant.c keeps D alive with the
 *             read lease, and deletes it with a release): a read lease
 *             that expires leaves it behind, and writers wait it out as
 *             Redis's readers set keeps an expired reader until its
 *             delay has run;
 *  - q/LEASE  a writer that waits, on an etcd lease as long as its wait,
 *             so it is gone when the wait is, even if picketd dies.
 * A write grant's txn compares that there is no writer, no delay and no
 * reader (whole-prefix compares on r/ and rd/: etcd compares every key of
 * a range, and an empty one as a key that does not exist); a read grant's,
 * that there is no writer, no write lease's delay and no waiting writer
 * (on q/): a read lease's delay keeps out writers only, as on Redis. A read finds at most
 * --max-readers read leases there: past it, it is refused (held_by 3)
 * with nothing written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grant.h"
#include "rwlock.h"

#define RW_KEY_MAX (STORE_ETCD_KEY_MAX + PICKET_PROTO_LEASE_LEN + 8)

typedef struct {
  char base[STORE_ETCD_KEY_MAX]; /* P r/NAME/ */
  char w[RW_KEY_MAX], wd[RW_KEY_MAX], f[RW_KEY_MAX], r[RW_KEY_MAX], q[RW_KEY_MAX];
  char rd[RW_KEY_MAX];
  /* r/LEASE, rd/LEASE and q/LEASE of op's lease */
  char mine[RW_KEY_MAX], mine_delay[RW_KEY_MAX], waiting[RW_KEY_MAX];
} rw_keys;

static void keys_of(rw_keys *k, const char *name, const char *lease) {
  snprintf(k->base, sizeof k->base, "%sr/%s/", store_etcd_cfg->key_prefix, name);
  snprintf(k->w, sizeof k->w, "%sw", k->base);
  snprintf(k->wd, sizeof k->wd, "%swd", k->base);
  snprintf(k->f, sizeof k->f, "%sf", k->base);
  snprintf(k->r, sizeof k->r, "%sr/", k->base);
  snprintf(k->q, sizeof k->q, "%sq/", k->base);
  snprintf(k->rd, sizeof k->rd, "%srd/", k->base);
  snprintf(k->mine, sizeof k->mine, "%sr/%s", k->base, lease ? lease : "");
  snprintf(k->mine_delay, sizeof k->mine_delay, "%srd/%s", k->base, lease ? lease : "");
  snprintf(k->waiting, sizeof k->waiting, "%sq/%s", k->base, lease ? lease : "");
}

/* What a call needs of P r/NAME/, read at one revision. */
typedef struct {
  etcd_txn_result tr;
  etcd_kv *w, *wd, *f, *mine;
  int readers, waiting;
  int64_t revision;                 /* the revision it was read at */
  int delays;                       /* read leases' lock-delays (rd/) */
  etcd_kv *first_reader, *first_waiting, *first_delay;
  etcd_kv *listed;                  /* the first nlisted readers, in key order */
  int nlisted;
} rw_view;

/* Reads the lock: STORE_OK with *v filled (the caller clears v->tr), or a
 * failure (nothing to clear). One txn of five ranges: f and the waiting
 * writers (P r/NAME/ up to r/), w and wd (past rd/), this lease's reader,
 * the readers counted with at most `listed` of them (at least one) read,
 * and the read leases' delays counted with one read: a lock with many
 * readers costs a call no more than a few. */
static store_status view_read(etcd_client *c, const rw_keys *k, int64_t listed, rw_view *v,
                              store_result *r) {
  memset(v, 0, sizeof *v);
  char rd_end[RW_KEY_MAX], base_end[RW_KEY_MAX];
  snprintf(rd_end, sizeof rd_end, "%srd0", k->base); /* past rd/...: '/' + 1 is '0' */
  snprintf(base_end, sizeof base_end, "%.*s0", (int)strlen(k->base) - 1, k->base);
  etcd_op ops[5] = {
      {.kind = ETCD_OP_RANGE, .key = k->base, .end = k->r},
      {.kind = ETCD_OP_RANGE, .key = rd_end, .end = base_end},
      {.kind = ETCD_OP_RANGE, .key = k->mine},
      {.kind = ETCD_OP_RANGE, .key = k->r, .prefix = 1, .limit = listed > 0 ? listed : 1},
      {.kind = ETCD_OP_RANGE, .key = k->rd, .prefix = 1, .limit = 1},
  };
  etcd_txn_req t = {NULL, 0, ops, 5, NULL, 0};
  int rc = etcd_txn(c, &t, &v->tr);
  if (rc != ETCD_OK || v->tr.nresults != 5) {
    store_status st = store_etcd_failed(c, rc != ETCD_OK ? rc : ETCD_EREPLY, r);
    etcd_txn_result_clear(&v->tr);
    return st;
  }
  v->revision = v->tr.revision;
  size_t ql = strlen(k->q);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < v->tr.results[i].nkvs; j++) {
      etcd_kv *kv = &v->tr.results[i].kvs[j];
      if (strcmp(kv->key, k->w) == 0) v->w = kv;
      else if (strcmp(kv->key, k->wd) == 0) v->wd = kv;
      else if (strcmp(kv->key, k->f) == 0) v->f = kv;
      else if (strncmp(kv->key, k->q, ql) == 0 && v->waiting++ == 0) v->first_waiting = kv;
    }
  if (v->tr.results[2].nkvs == 1 && k->mine[strlen(k->r)] != '\0') v->mine = &v->tr.results[2].kvs[0];
  etcd_op_result *rd = &v->tr.results[3];
  v->readers = (int)rd->count;
  v->listed = rd->kvs;
  v->nlisted = rd->nkvs;
  if (rd->nkvs > 0) v->first_reader = &rd->kvs[0];
  v->delays = (int)v->tr.results[4].count;
  if (v->tr.results[4].nkvs > 0) v->first_delay = &v->tr.results[4].kvs[0];
  return STORE_OK;
}

/* A write acquire that will wait: it keeps new readers out until its wait
 * ends (q/LEASE on a lease of the wait), best effort. */
static void wait_mark(etcd_client *c, const store_op *op, const rw_keys *k) {
  if (!op->write || op->wait_ms <= 0) return;
  int64_t id = 0, given = 0;
  if (etcd_lease_grant(c, store_etcd_ttl_s(op->wait_ms), &id, &given) != ETCD_OK) return;
  etcd_op put = {.kind = ETCD_OP_PUT, .key = k->waiting, .value = "", .lease = id};
  etcd_txn_req t = {NULL, 0, &put, 1, NULL, 0};
  etcd_txn_result tr = {0};
  etcd_txn(c, &t, &tr);
  etcd_txn_result_clear(&tr);
}

static void owner_of(const etcd_kv *kv, store_result *r) {
  store_etcd_grant g;
  if (kv && store_etcd_grant_parse(kv, &g) == 0) snprintf(r->owner, sizeof r->owner, "%s", g.owner);
}

static store_status rw_acquire(etcd_client *c, store_op *op, store_result *r) {
  rw_keys k;
  keys_of(&k, op->name, op->lease);
  for (int attempt = 0; attempt < 4; attempt++) {
    store_etcd_quota q;
    store_status st = store_etcd_quota_read(c, op, &q, r);
    if (st != STORE_OK) return st;
    rw_view v;
    if ((st = view_read(c, &k, 1, &v, r)) != STORE_OK) return st;
    store_etcd_grant g;
    /* a same-lease retry refreshes the lease it holds */
    etcd_kv *own = op->write ? v.w : v.mine;
    if (own && store_etcd_grant_parse(own, &g) == 0 && strcmp(g.lease, op->lease) == 0) {
      store_etcd_keys at = {own->key, op->write ? k.wd : k.mine_delay, NULL};
      st = store_etcd_refresh(c, op, &at, own, &g, 0, r);
      if (!op->write) r->fence = g.fence;
      etcd_txn_result_clear(&v.tr);
      if (st == STORE_LOST) r->ttl_ms = 1, st = STORE_HELD;
      return st;
    }
    if (!v.w && v.wd) { /* the last write lease's lock-delay runs */
      owner_of(v.wd, r);
      r->ttl_ms = store_etcd_left_s(c, v.wd->lease) * 1000;
      etcd_txn_result_clear(&v.tr);
      return STORE_DELAYED;
    }
    etcd_kv *blocker = NULL;
    if (v.w) blocker = v.w, r->held_by = 0;
    else if (op->write && v.readers) blocker = v.first_reader, r->held_by = 1;
    /* an expired read lease's delay holds the lock for writers as its
     * reader did (Redis keeps it in the readers set until then) */
    else if (op->write && v.delays) blocker = v.first_delay, r->held_by = 1;
    else if (!op->write && v.waiting) blocker = v.first_waiting, r->held_by = 2;
    if (blocker) {
      if (r->held_by == 0) owner_of(v.w, r);
      r->ttl_ms = store_etcd_left_s(c, blocker->lease) * 1000;
      etcd_txn_result_clear(&v.tr);
      if (r->held_by != 2) wait_mark(c, op, &k);
      return STORE_HELD;
    }
    if (!op->write && v.readers >= store_etcd_cfg->max_readers) {
      /* --max-readers: refused before anything is written (not even the
       * epoch below); try again when the first reader's lease ends */
      r->held_by = 3;
      r->ttl_ms = store_etcd_left_s(c, v.first_reader->lease) * 1000;
      etcd_txn_result_clear(&v.tr);
      return STORE_HELD;
    }
    /* From half the bound up, no other reader may be granted between this
     * read and the grant (a compare on r/'s create revisions; a renewal
     * does not create), so racing readers cannot pass it together; below
     * half, as many grants as race at once could, and that is more than
     * half of --max-readers only with that many picketd threads. */
    int64_t counted_at = 2 * (int64_t)v.readers >= store_etcd_cfg->max_readers ? v.revision : 0;
    int64_t epoch = v.f ? v.f->mod_revision : 0;
    etcd_txn_result_clear(&v.tr);
    if (!op->write && !epoch) {
      /* Never written: a read lease's fence is the epoch it reads, so the
       * count starts first (f put if still absent), then the grant reads
       * it like any other. */
      etcd_compare none = {.key = k.f, .target = ETCD_CMP_CREATE};
      etcd_op start = {.kind = ETCD_OP_PUT, .key = k.f, .value = ""};
      etcd_txn_req t0 = {&none, 1, &start, 1, NULL, 0};
      etcd_txn_result tr0 = {0};
      int rc = etcd_txn(c, &t0, &tr0);
      etcd_txn_result_clear(&tr0);
      if (rc != ETCD_OK) return store_etcd_failed(c, rc, r);
      continue;
    }

    store_etcd_grant ng;
    int64_t L = 0, D = 0;
    st = store_etcd_grant_new(c, op, &q, op->lock_delay_ms, &ng, &L, &D, r);
    if (st != STORE_OK) return st;
    ng.write = op->write;
    ng.fence = op->write ? 0 : epoch;
    char *value = store_etcd_grant_value(&ng);
    if (value == NULL) return store_etcd_no_memory(r);
    etcd_compare cmp[6] = {{.key = k.w, .target = ETCD_CMP_CREATE},
                           {.key = k.wd, .target = ETCD_CMP_CREATE},
                           {.key = op->write ? k.r : k.q, .prefix = 1, .target = ETCD_CMP_CREATE}};
    int ncmp = 3, nput = 0;
    etcd_op put[6];
    if (op->write) {
      put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = k.w, .value = value, .lease = L};
      put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = k.f, .value = ""};
      put[nput++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = k.waiting};
      if (D) put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = k.wd, .value = value, .lease = D};
      cmp[ncmp++] = (etcd_compare){.key = k.rd, .prefix = 1, .target = ETCD_CMP_CREATE};
    } else {
      put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = k.mine, .value = value, .lease = L};
      /* a retry of a lease whose delay runs starts a new one (or none) */
      put[nput++] = D ? (etcd_op){.kind = ETCD_OP_PUT, .key = k.mine_delay, .value = value,
                                  .lease = D}
                      : (etcd_op){.kind = ETCD_OP_DELETE, .key = k.mine_delay};
      /* the epoch read must still be the last write's */
      cmp[ncmp++] = (etcd_compare){.key = k.f, .target = ETCD_CMP_MOD, .number = epoch};
      if (counted_at)
        cmp[ncmp++] = (etcd_compare){.key = k.r, .prefix = 1, .target = ETCD_CMP_CREATE,
                                     .result = ETCD_CMP_LESS, .number = counted_at + 1};
    }
    int counted = store_etcd_quota_txn(&q, L, &cmp[ncmp], &put[nput]);
    ncmp += counted;
    nput += counted;
    etcd_txn_req t = {cmp, ncmp, put, nput, NULL, 0};
    etcd_txn_result tr;
    int done = store_etcd_grant_commit(c, &t, &ng, L, D, &tr, &st, r);
    free(value);
    etcd_txn_result_clear(&tr);
    if (done > 0 && !op->write) r->fence = epoch; /* the write epoch it reads */
    if (done != 0) return done > 0 ? STORE_OK : st;
  }
  r->ttl_ms = 1;
  return STORE_HELD;
}

static store_status rw_renew_release(etcd_client *c, store_op *op, store_result *r) {
  rw_keys k;
  keys_of(&k, op->name, op->lease);
  rw_view v;
  store_status vst = view_read(c, &k, 1, &v, r);
  if (vst != STORE_OK) return vst;
  store_etcd_grant g;
  etcd_kv *own = NULL;
  int write = 0;
  if (v.w && store_etcd_grant_parse(v.w, &g) == 0 && strcmp(g.lease, op->lease) == 0)
    own = v.w, write = 1;
  else if (v.mine && store_etcd_grant_parse(v.mine, &g) == 0)
    own = v.mine;
  store_status st = STORE_LOST;
  if (own && op->kind == STORE_OP_RW_RENEW) {
    store_etcd_keys at = {own->key, write ? k.wd : k.mine_delay, NULL};
    st = store_etcd_refresh(c, op, &at, own, &g, 1, r);
    if (!write) r->fence = g.fence;
    r->held_by = !write;
  } else if (own) {
    st = store_etcd_grant_end(c, op, own->key, write ? k.wd : k.mine_delay, own, &g, NULL, 0, r);
    if (!write) r->fence = g.fence;
  }
  etcd_txn_result_clear(&v.tr);
  return st;
}

static store_status rw_forget(etcd_client *c, store_op *op, store_result *r) {
  rw_keys k;
  keys_of(&k, op->name, op->lease);
  etcd_op del = {.kind = ETCD_OP_DELETE, .key = k.waiting};
  etcd_txn_req t = {NULL, 0, &del, 1, NULL, 0};
  etcd_txn_result tr = {0};
  int rc = etcd_txn(c, &t, &tr);
  etcd_txn_result_clear(&tr);
  return rc == ETCD_OK ? STORE_OK : store_etcd_failed(c, rc, r);
}

static store_status rw_inspect(etcd_client *c, store_op *op, store_result *r) {
  rw_keys k;
  keys_of(&k, op->name, NULL);
  rw_view v;
  store_status vst = view_read(c, &k, op->limit, &v, r);
  if (vst != STORE_OK) return vst;
  r->fence = v.f ? v.f->mod_revision : 0;
  if (v.w) {
    r->held = 1;
    r->fence = v.w->create_revision;
    r->ttl_ms = store_etcd_left_s(c, v.w->lease) * 1000;
    owner_of(v.w, r);
  } else if (v.wd) { /* the write lease expired; its lock-delay runs */
    r->held = 1;
    r->delay_ms = store_etcd_left_s(c, v.wd->lease) * 1000;
    owner_of(v.wd, r);
  }
  r->live = v.readers;
  r->waiting = v.waiting;
  int listed = v.readers < op->limit ? v.readers : (int)op->limit;
  if (listed > 0 && (r->permits = calloc((size_t)listed, sizeof *r->permits)) == NULL) {
    etcd_txn_result_clear(&v.tr);
    return store_etcd_no_memory(r);
  }
  for (int i = 0; i < v.nlisted && r->npermits < listed; i++) {
    etcd_kv *kv = &v.listed[i];
    store_etcd_grant g;
    if (store_etcd_grant_parse(kv, &g) < 0) continue;
    store_permit *p = &r->permits[r->npermits++];
    p->fence = g.fence;
    p->ttl_ms = store_etcd_left_s(c, kv->lease) * 1000;
    snprintf(p->owner, sizeof p->owner, "%s", g.owner);
  }
  etcd_txn_result_clear(&v.tr);
  return STORE_OK;
}

void store_etcd_rwlock(etcd_client *c, store_op *op) {
  switch (op->kind) {
    case STORE_OP_RW_ACQUIRE: op->st = rw_acquire(c, op, &op->r); break;
    case STORE_OP_RW_RENEW:
    case STORE_OP_RW_RELEASE: op->st = rw_renew_release(c, op, &op->r); break;
    case STORE_OP_RW_FORGET: op->st = rw_forget(c, op, &op->r); break;
    default: op->st = rw_inspect(c, op, &op->r); break;
  }
}
