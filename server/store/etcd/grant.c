/* grant.c: one lease on one key, as the etcd store keeps every lease
 * (a lock's, a permit's, a read or write lease): what locks.c,
 * semaphore.c and rwlock.c share. A grant is a key holding its JSON
 * (store_etcd_grant) on a shared etcd lease L of the grant's TTL (pool.h),
 * and, with a lock-delay, a second key on a shared lease D of that TTL
 * plus the delay (locks.c says why). A shared lease is never kept alive:
 * a refresh moves the grant to the pool's lease of its new TTL. Last,
 * why a grant was lost: the note a break (admin.c) leaves, read here so
 * that the families and admin.c stay side by side, none calling another. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "grant.h"
#include "pool.h"
#include "batch.h"

store_status store_etcd_no_memory(store_result *r) {
  snprintf(r->err, sizeof r->err, "out of memory");
  return STORE_EREPLY;
}

/* The TTL (s) that a grant or renewal at `now` gets for ttl_ms under the
 * cap (0: none): ttl_ms rounded up, cut to the cap rounded down, so no
 * expiry runs past it. 0 when the cap has passed; -1 when what is left of
 * it is shorter than etcd's shortest lease (no new etcd lease can end in
 * time). */
int64_t store_etcd_ttl_under_cap(int64_t ttl_ms, int64_t cap, int64_t now) {
  int64_t s = store_etcd_ttl_s(ttl_ms);
  if (cap == 0) return s;
  if (now >= cap) return 0;
  int64_t left_s = (cap - now) / 1000;
  if (left_s >= s) return s;
  return left_s >= store_etcd_min_ttl_s() ? left_s : -1;
}

/* The etcd leases of a grant of ttl_s (pool.c's, shared): *L, and with a
 * lock-delay *D, on which the delay key lives ttl_s plus the delay. */
int store_etcd_leases_grant(etcd_client *c, int64_t ttl_s, int64_t delay_ms, int64_t *L,
                            int64_t *D) {
  *D = 0;
  int rc = store_etcd_pool_lease(c, ttl_s, L);
  if (rc != ETCD_OK || delay_ms <= 0) return rc;
  return store_etcd_pool_lease(c, ttl_s + (delay_ms + 999) / 1000, D);
}

int64_t store_etcd_grant_left_ms(etcd_client *c, const etcd_kv *kv, const store_etcd_grant *g) {
  int64_t left = g->exp - clock_wall_ms();
  return left > 0 ? left : store_etcd_left_s(c, kv->lease) * 1000;
}

/* The seconds left of etcd lease `id` (at least 1: it was live a moment
 * ago; 1 when etcd cannot say). */
int64_t store_etcd_left_s(etcd_client *c, int64_t id) {
  int64_t left = 0, of = 0;
  if (etcd_lease_timetolive(c, id, &left, &of) != ETCD_OK || left < 1) return 1;
  return left;
}

/* Ends a grant as an expiry would (its lock-delay key stays, on its own
 * lease), in a txn guarded by the revision read: with ckey, when its cap
 * key (a lock's P c/NAME, on an etcd lease that ends at the cap) is gone,
 * so that the lock is free at the cap on etcd's clock and not one TTL
 * later, whatever the clock of the picketd that renewed it last said;
 * without, when a renewal came after the grant's end (its key lives on a
 * shared lease up to a second and a half longer: pool.h). Best effort: a
 * failure leaves it to its etcd lease. */
static void refresh_end(etcd_client *c, const store_op *op, const char *key, const char *okey,
                        const char *ckey, const etcd_kv *kv, const store_etcd_grant *g) {
  char qentry[sizeof ((store_etcd_quota *)0)->entry];
  etcd_compare cmp[2] = {{.key = key, .target = ETCD_CMP_MOD, .number = kv->mod_revision},
                         {.key = ckey, .target = ETCD_CMP_MOD, .number = 0}};
  etcd_op del[3] = {{.kind = ETCD_OP_DELETE, .key = key}};
  int n = 1;
  if (okey) del[n++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = okey};
  if (g->token[0]) {
    store_etcd_quota_entry(qentry, sizeof qentry, g->token, op);
    del[n++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = qentry};
  }
  etcd_txn_req t = {cmp, ckey ? 2 : 1, del, n, NULL, 0};
  etcd_txn_result tr = {0};
  etcd_txn(c, &t, &tr);
  etcd_txn_result_clear(&tr);
}

/* How often a refresh whose guarded write met another write of the same
 * grant (a concurrent renewal of the same lease, or its own txn redone
 * after a reply that was lost: batch.c, etcd_grpc.c) reads it again and
 * tries once more. Each try is one txn; two renewals at once settle in
 * two. */
#define REFRESH_TRIES 8

/* One guarded write of a refresh (below), its outcome in *st: 1 when
 * another write of the same grant came first and the grant is still op's
 * (then *again holds the txn whose failure branch read the grant as it is
 * now: its kv to try again with), else 0. */
static int refresh_once(etcd_client *c, const store_op *op, const store_etcd_keys *k,
                        const etcd_kv *kv, const store_etcd_grant *g, int renewal,
                        etcd_txn_result *again, store_status *st, store_result *r) {
  int64_t now = clock_wall_ms();
  /* A renewal after the grant's end: lost, as on Redis, though its key
   * may live on for up to a second and a half (pool.h). The end is the
   * one the last grant or renewal wrote, on its picketd's clock; with
   * clocks apart, etcd's end of the shared lease still bounds it. */
  if (g->exp > 0 && now > g->exp) {
    refresh_end(c, op, k->key, k->okey, NULL, kv, g);
    *st = STORE_LOST;
    return 0;
  }
  /* (a proclaim's TTL 0: the TTL the lease has) */
  int64_t want_s = store_etcd_ttl_under_cap(op->ttl_ms > 0 ? op->ttl_ms : g->ttl_ms, g->cap, now);
  *st = STORE_OK;
  if (want_s == 0) { /* at its cap */
    *st = STORE_LOST;
    return 0;
  }
  if (want_s < 0) {
    /* Less of the cap is left than etcd's shortest lease: the lease keeps
     * the end it has, which the last grant or renewal kept inside the
     * cap, and says what is left of it. */
    int64_t left = g->exp - now;
    r->ttl_ms = left < g->cap - now ? left : g->cap - now;
    return 0;
  }
  store_etcd_grant ng = *g;
  ng.renewals += renewal;
  /* a proclaim's value, or a campaign retry's again, in the same guarded
   * write as the renewal (only an election's calls carry one) */
  if (op->value) snprintf(ng.value, sizeof ng.value, "%s", op->value);
  int64_t L = 0, D = 0;
  int rc = store_etcd_leases_grant(c, want_s, g->delay_ms, &L, &D);
  if (rc != ETCD_OK) {
    *st = store_etcd_failed(c, rc, r);
    return 0;
  }
  ng.ttl_ms = want_s * 1000;
  ng.delay_lease = D;
  ng.exp = now + want_s * 1000;
  char *value = store_etcd_grant_value(&ng);
  if (value == NULL) {
    *st = store_etcd_no_memory(r);
    return 0;
  }
  /* A lock's hold cap on etcd's clock: its cap key was put in the
   * grant's txn (so its mod_revision is the fence) on an etcd lease that
   * ends at the cap and is never kept alive. The write requires it, so no
   * renewal outlives the cap, whatever this picketd's clock says; `cap`
   * above only cuts the TTL on the clock of the picketd that renews. */
  char ckey[STORE_ETCD_KEY_MAX], qentry[sizeof ((store_etcd_quota *)0)->entry];
  etcd_compare cmp[2] = {{.key = k->key, .target = ETCD_CMP_MOD, .number = kv->mod_revision},
                         {.key = ckey, .target = ETCD_CMP_MOD, .number = kv->create_revision}};
  /* what failed, read in the same txn: the grant, and its cap key */
  etcd_op read[2] = {{.kind = ETCD_OP_RANGE, .key = k->key}, {.kind = ETCD_OP_RANGE, .key = ckey}};
  int ncmp = 1;
  if (g->cap_lease) {
    store_etcd_key(ckey, sizeof ckey, 'c', op->name);
    ncmp = 2;
  }
  etcd_op put[4] = {{.kind = ETCD_OP_PUT, .key = k->key, .value = value, .lease = L}};
  int nput = 1;
  if (D) put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = k->dkey, .value = value, .lease = D};
  if (k->okey) put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = k->okey, .value = g->lease, .lease = L};
  if (g->token[0]) {
    store_etcd_quota_entry(qentry, sizeof qentry, g->token, op);
    put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = qentry, .value = "", .lease = L};
  }
  etcd_txn_req t = {cmp, ncmp, put, nput, read, ncmp};
  rc = etcd_txn(c, &t, again);
  free(value);
  if (rc == ETCD_ENOTFOUND) { /* a shared lease etcd no longer has: the next call gets another */
    store_etcd_pool_drop(L);
    store_etcd_pool_drop(D);
  }
  if (rc != ETCD_OK) {
    *st = store_etcd_failed(c, rc, r);
    return 0;
  }
  if (again->succeeded) {
    r->ttl_ms = want_s * 1000;
    return 0;
  }
  /* Still op's grant (the same create_revision, so the same fence and
   * lease) with its cap key in place: another write of it came first. */
  const etcd_kv *now_kv = again->nresults > 0 && again->results[0].nkvs > 0
                              ? &again->results[0].kvs[0] : NULL;
  int capped = g->cap_lease && !(again->nresults > 1 && again->results[1].nkvs > 0 &&
                                 again->results[1].kvs[0].mod_revision == kv->create_revision);
  int same = now_kv && now_kv->create_revision == kv->create_revision;
  if (same && !capped) return 1;
  /* (the grant as read now, when a renewal moved it since: the end is
   * guarded by its revision) */
  if (capped) refresh_end(c, op, k->key, k->okey, ckey, same ? now_kv : kv, g);
  *st = STORE_LOST;
  return 0;
}

/* A live grant of op's lease gets ttl_ms from now (a same-lease acquire, a
 * renewal: `renewal` counts it): moved to a shared etcd lease of that TTL
 * (pool.h: one that nothing keeps alive) in a txn guarded by the revision
 * read, never past its cap. kv is P l/NAME as read, g its grant. A write
 * of the same grant that came between the read and the txn (two renewals
 * of one lease at once, as Redis takes them both) is not a loss: the grant
 * is read again in the failed txn and the refresh tried again. */
store_status store_etcd_refresh(etcd_client *c, const store_op *op, const store_etcd_keys *k,
                                const etcd_kv *kv, const store_etcd_grant *g, int renewal,
                                store_result *r) {
  r->fence = kv->create_revision;
  r->at = g->at;
  snprintf(r->owner, sizeof r->owner, "%s", g->owner);
  etcd_txn_result held = {0}; /* owns the kv of the try after the first */
  store_etcd_grant cur = *g;
  store_status st = STORE_OK;
  for (int i = 0; i < REFRESH_TRIES; i++) {
    etcd_txn_result tr = {0};
    int again = refresh_once(c, op, k, kv, &cur, renewal, &tr, &st, r);
    etcd_txn_result_clear(&held);
    held = tr;
    if (!again) break;
    kv = &held.results[0].kvs[0];
    if (store_etcd_grant_parse(kv, &cur) < 0 || strcmp(cur.lease, g->lease) != 0) {
      st = STORE_LOST;
      break;
    }
    if (i == REFRESH_TRIES - 1) {
      snprintf(r->err, sizeof r->err,
               "etcd: %.200s: %d tries each found the grant written meanwhile", op->name,
               REFRESH_TRIES);
      st = STORE_EUNAVAIL;
    }
  }
  etcd_txn_result_clear(&held);
  return st;
}

store_status store_etcd_grant_new(etcd_client *c, const store_op *op, const store_etcd_quota *q,
                                  int64_t delay_ms, store_etcd_grant *g, int64_t *L, int64_t *D,
                                  store_result *r) {
  int64_t now = clock_wall_ms(), cap = op->max_hold_ms > 0 ? now + op->max_hold_ms : 0;
  int64_t ttl_s = store_etcd_ttl_under_cap(op->ttl_ms, cap, now);
  /* a cap shorter than etcd's shortest lease: that lease, the least etcd gives */
  if (ttl_s <= 0) ttl_s = store_etcd_min_ttl_s();
  if (delay_ms < 0) delay_ms = 0;
  int rc = store_etcd_leases_grant(c, ttl_s, delay_ms, L, D);
  if (rc != ETCD_OK) return store_etcd_failed(c, rc, r);
  *g = (store_etcd_grant){.at = now, .exp = now + ttl_s * 1000, .ttl_ms = ttl_s * 1000,
                          .cap = cap, .delay_ms = delay_ms, .delay_lease = *D};
  snprintf(g->lease, sizeof g->lease, "%s", op->lease);
  snprintf(g->owner, sizeof g->owner, "%s", op->owner ? op->owner : "");
  snprintf(g->value, sizeof g->value, "%s", op->value ? op->value : "");
  if (q->on) snprintf(g->token, sizeof g->token, "%s", op->token);
  return STORE_OK;
}

int store_etcd_grant_commit(etcd_client *c, const etcd_txn_req *t, const store_etcd_grant *g,
                            int64_t L, int64_t D, etcd_txn_result *tr, store_status *st,
                            store_result *r) {
  int rc = store_etcd_txn_batched(c, t->success[0].key, t, tr);
  if (rc == ETCD_OK && tr->succeeded) {
    r->fence = tr->revision; /* the grant key's create_revision */
    r->ttl_ms = g->ttl_ms;
    r->created = 1;
    r->at = g->at;
    return 1;
  }
  if (rc == ETCD_ENOTFOUND) { /* a shared lease etcd no longer has: the next call gets another */
    store_etcd_pool_drop(L);
    store_etcd_pool_drop(D);
  }
  if (rc != ETCD_OK) *st = store_etcd_failed(c, rc, r);
  return rc == ETCD_OK ? 0 : -1;
}

store_status store_etcd_grant_end(etcd_client *c, const store_op *op, const char *key,
                                  const char *dkey, const etcd_kv *kv, const store_etcd_grant *g,
                                  const etcd_op *also, int nalso, store_result *r) {
  char qentry[sizeof ((store_etcd_quota *)0)->entry];
  etcd_compare cmp = {.key = key, .target = ETCD_CMP_MOD, .number = kv->mod_revision};
  etcd_op ops[3 + STORE_ETCD_END_ALSO_MAX] = {{.kind = ETCD_OP_DELETE, .key = key}};
  int n = 1;
  if (dkey[0]) ops[n++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = dkey};
  for (int i = 0; i < nalso && i < STORE_ETCD_END_ALSO_MAX; i++) ops[n++] = also[i];
  if (g->token[0]) {
    store_etcd_quota_entry(qentry, sizeof qentry, g->token, op);
    ops[n++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = qentry};
  }
  etcd_txn_req t = {&cmp, 1, ops, n, NULL, 0};
  etcd_txn_result tr = {0};
  int rc = etcd_txn(c, &t, &tr);
  store_status st = rc == ETCD_ENOTFOUND ? STORE_LOST /* its etcd lease ended meanwhile */
                    : rc != ETCD_OK      ? store_etcd_failed(c, rc, r)
                    : tr.succeeded       ? STORE_OK
                                         : STORE_LOST;
  etcd_txn_result_clear(&tr);
  r->fence = kv->create_revision;
  r->at = g->at;
  return st;
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
    /* (note_by and note_at: the break that ended `lease`; a later break of
     * the free lock keeps them, and its own by and at are for events) */
    json_t *n = json_object_get(j, "note_by") ? j : NULL;
    const char *by = json_string_value(json_object_get(j, n ? "note_by" : "by"));
    if (l && strcmp(l, lease) == 0)
      snprintf(r->why, sizeof r->why, "broken by %.100s at %lld", by ? by : "?",
               (long long)json_integer_value(json_object_get(j, n ? "note_at" : "at")));
    json_decref(j);
  }
  etcd_op_result_clear(&res);
}
