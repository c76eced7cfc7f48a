/* locks.c: the lock calls on etcd (acquire, renew, release, inspect), with
 * lock-delay, the hold cap and a token's max_leases.
 *
 * For lock NAME under the key prefix P:
 *  - P l/NAME: the grant (JSON, store_etcd_grant) on the grant's etcd lease
 *    L. Its create_revision is the fence: the revision of the txn that
 *    wrote it. A put keeps create_revision, so a renewal that rewrites the
 *    grant (its count of renewals, or a move to another etcd lease) keeps
 *    the fence.
 *  - P f/NAME: put in every grant's txn, with no lease: its mod_revision is
 *    the last fence issued, which inspect reports after the grant is gone.
 *  - P d/NAME: only for a grant with a lock-delay: the same value on a
 *    second etcd lease D of the grant's TTL plus the delay, kept alive with
 *    L. When L expires (no release) P l/NAME goes and P d/NAME stays for
 *    the delay: every acquire compares that neither exists, so nobody gets
 *    the lock before the delay has run (Consul's lock-delay, as hold.lua
 *    does it on Redis). A release deletes both.
 *  - P c/NAME: only for a grant with a hold cap: put in the grant's txn
 *    (its mod_revision is the fence) on an etcd lease C of the cap's
 *    length that nobody keeps alive. Every renewal's txn requires it
 *    (grant.c), so the cap is counted on etcd's clock: a renewal through
 *    a picketd whose clock is behind still ends at the cap. The grant's
 *    `cap` (the granting picketd's wall clock, ms) only cuts each
 *    renewal's TTL so that L does not run past it either. A release
 *    revokes C.
 *  - a token's count: leases.c.
 *
 * etcd leases count whole seconds and have a minimum (store_etcd_ttl_s);
 * an etcd lease keeps the TTL it was granted, so a renewal that asks for
 * the same TTL keeps L alive and one that asks for another moves the grant
 * to a new etcd lease. A released grant's etcd leases are not revoked:
 * with their keys gone they hold nothing, and etcd drops them at their
 * TTL; that saves a round trip per release.
 *
 * Every write is one txn guarded by a compare, so a call that a failover
 * made run twice cannot grant twice, and a stale renew or release cannot
 * touch a newer holder's grant (docs/etcd-design.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "grant.h"
#include "locks.h"

/* A grant whose txn finds the lock free but was refused all the same (a
 * release between the compare and the failure branch's reads, or the
 * token's count moved: another grant of the same token) is tried again
 * with the same etcd leases, this often. A count race is what a busy
 * token meets all the time: every grant of the token under another client
 * moves the count, and each try costs one txn, the count it compares
 * against being the one its failed try read. A grant that loses every try
 * is STORE_EUNAVAIL ("try again"), never a false "held": 16 clients of one
 * token on one picketd lose 32 tries about once in 50 cycles (a pause
 * between tries made it worse: the losers' windows grow), which only a
 * count that grants do not all compare (slots, as a semaphore's) would
 * end. */
#define ACQUIRE_TRIES 32

typedef struct {
  char l[STORE_ETCD_KEY_MAX], f[STORE_ETCD_KEY_MAX], d[STORE_ETCD_KEY_MAX], c[STORE_ETCD_KEY_MAX];
  char o[STORE_ETCD_KEY_MAX];
  store_etcd_keys at; /* l, d and o, for grant.c */
} lock_keys;

static void keys_of(lock_keys *k, const char *name) {
  store_etcd_key(k->l, sizeof k->l, 'l', name);
  store_etcd_key(k->o, sizeof k->o, 'o', name);
  k->at = (store_etcd_keys){k->l, k->d, k->o};
  store_etcd_key(k->c, sizeof k->c, 'c', name);
  store_etcd_key(k->f, sizeof k->f, 'f', name);
  store_etcd_key(k->d, sizeof k->d, 'd', name);
}

/* lock_found's outcome when something is there. */
static store_status lock_outcome(etcd_client *c, store_op *op, const lock_keys *k,
                                 const etcd_kv *held, const etcd_kv *delayed, store_result *r) {
  store_etcd_grant cur;
  if (held && store_etcd_grant_parse(held, &cur) < 0) {
    snprintf(r->err, sizeof r->err, "etcd: %.200s holds no picket grant", k->l);
    return STORE_EREPLY;
  }
  if (held && strcmp(cur.lease, op->lease) == 0) {
    /* a retry of this lease's own acquire (its reply was lost, or the
     * txn ran twice across a failover): the same grant, its TTL
     * refreshed, its delay and cap kept */
    store_status st = store_etcd_refresh(c, op, &k->at, held, &cur, 0, r);
    if (st == STORE_LOST) { /* at its cap: held, by nobody who may renew it */
      r->ttl_ms = 1;
      st = STORE_HELD;
    }
    return st;
  }
  if (held) {
    r->ttl_ms = store_etcd_grant_left_ms(c, held, &cur);
    snprintf(r->owner, sizeof r->owner, "%s", cur.owner);
    return STORE_HELD;
  }
  store_etcd_grant dg; /* only a delay is there */
  if (store_etcd_grant_parse(delayed, &dg) == 0) snprintf(r->owner, sizeof r->owner, "%s", dg.owner);
  r->ttl_ms = store_etcd_left_s(c, delayed->lease) * 1000;
  return STORE_DELAYED;
}

/* What a refused acquire found at P l/NAME (held) and P d/NAME (delayed),
 * either NULL: 1 with *st the outcome (STORE_HELD, STORE_DELAYED, a
 * same-lease retry's), or 0 when neither is there (the caller decides). */
static int lock_found(etcd_client *c, store_op *op, const lock_keys *k, const etcd_kv *held,
                      const etcd_kv *delayed, store_status *st, store_result *r) {
  if (!held && !delayed) return 0;
  *st = lock_outcome(c, op, k, held, delayed, r);
  return 1;
}

/* The first kv of range i of tr, or NULL. */
static const etcd_kv *first_kv(const etcd_txn_result *tr, int i) {
  return tr->nresults > i && tr->results[i].nkvs > 0 ? &tr->results[i].kvs[0] : NULL;
}

/* A token at its max_leases: a held lock (or its delay, or this lease's
 * own grant) is told first, as Redis's acquire.lua looks at the holder
 * before the count; only a free lock is STORE_EQUOTA. One read-only txn,
 * paid only at the quota. */
static store_status lock_at_quota(etcd_client *c, store_op *op, const lock_keys *k,
                                  store_result *r) {
  etcd_op get[2] = {{.kind = ETCD_OP_RANGE, .key = k->l}, {.kind = ETCD_OP_RANGE, .key = k->d}};
  etcd_txn_req t = {NULL, 0, get, 2, NULL, 0};
  etcd_txn_result tr = {0};
  int rc = etcd_txn(c, &t, &tr);
  store_status st = STORE_EQUOTA;
  if (rc != ETCD_OK) st = store_etcd_failed(c, rc, r);
  else lock_found(c, op, k, first_kv(&tr, 0), first_kv(&tr, 1), &st, r);
  etcd_txn_result_clear(&tr);
  return st;
}

static store_status lock_acquire(etcd_client *c, store_op *op, store_result *r) {
  lock_keys k;
  keys_of(&k, op->name);
  store_etcd_quota q;
  store_status st = store_etcd_quota_read(c, op, &q, r);
  if (st == STORE_EQUOTA) return lock_at_quota(c, op, &k, r);
  if (st != STORE_OK) return st;
  store_etcd_grant g;
  int64_t L = 0, D = 0;
  st = store_etcd_grant_new(c, op, &q, op->lock_delay_ms, &g, &L, &D, r);
  if (st != STORE_OK) return st;
  if (op->max_hold_ms > 0) {
    /* the cap on etcd's clock (P c/NAME): whole seconds, rounded down, as
     * the grant's TTL is cut to it */
    int64_t cap_s = op->max_hold_ms / 1000, given = 0;
    int rc = etcd_lease_grant(c, cap_s > 0 ? cap_s : 1, &g.cap_lease, &given);
    if (rc != ETCD_OK) return store_etcd_failed(c, rc, r);
  }
  char *value = store_etcd_grant_value(&g);
  if (value == NULL) {
    if (g.cap_lease) etcd_lease_revoke(c, g.cap_lease);
    return store_etcd_no_memory(r);
  }
  for (int attempt = 0; attempt < ACQUIRE_TRIES; attempt++) {
    /* Free means no grant and no lock-delay running. */
    etcd_compare cmp[3] = {{.key = k.l, .target = ETCD_CMP_CREATE},
                           {.key = k.d, .target = ETCD_CMP_CREATE}};
    etcd_op put[6] = {{.kind = ETCD_OP_PUT, .key = k.l, .value = value, .lease = L},
                      {.kind = ETCD_OP_PUT, .key = k.f, .value = ""},
                      {.kind = ETCD_OP_PUT, .key = k.o, .value = op->lease, .lease = L}};
    int ncmp = 2, nput = 3;
    if (D) put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = k.d, .value = value, .lease = D};
    if (g.cap_lease)
      put[nput++] = (etcd_op){.kind = ETCD_OP_PUT, .key = k.c, .value = "", .lease = g.cap_lease};
    int counted = store_etcd_quota_txn(&q, L, &cmp[ncmp], &put[nput]);
    ncmp += counted;
    nput += counted;
    /* The failure branch says why: who holds it, its delay, and the count
     * as it is now (a count race is not "held"). */
    etcd_op get[4] = {{.kind = ETCD_OP_RANGE, .key = k.l}, {.kind = ETCD_OP_RANGE, .key = k.d}};
    int nget = 2 + store_etcd_quota_get(&q, &get[2]);
    etcd_txn_req t = {cmp, ncmp, put, nput, get, nget};
    etcd_txn_result tr;
    int done = store_etcd_grant_commit(c, &t, &g, L, D, &tr, &st, r), again = 0;
    if (done == 0) {
      if (tr.nresults != nget) {
        snprintf(r->err, sizeof r->err, "etcd: a refused acquire gave %d results", tr.nresults);
        st = STORE_EREPLY;
      } else if (!lock_found(c, op, &k, first_kv(&tr, 0), first_kv(&tr, 1), &st, r)) {
        /* neither held nor delayed (read in the same txn as the compare):
         * the token's count moved. At the quota now, the token is full
         * (the lock is free); else the next try compares against it. */
        st = q.on ? store_etcd_quota_reread(&q, op, &tr.results[2], tr.revision) : STORE_OK;
        again = st == STORE_OK;
      }
    }
    etcd_txn_result_clear(&tr);
    if (again) continue;
    free(value);
    /* (L and D, shared, were taken before the first try, after the client
     * sent its call: the grant lives its TTL from then, however many tries) */
    if (done <= 0 && g.cap_lease) etcd_lease_revoke(c, g.cap_lease);
    return done > 0 ? STORE_OK : st;
  }
  free(value);
  if (g.cap_lease) etcd_lease_revoke(c, g.cap_lease);
  snprintf(r->err, sizeof r->err, "etcd: lock %.200s: %d tries each found its place changed",
           op->name, ACQUIRE_TRIES);
  return STORE_EUNAVAIL;
}

/* P l/NAME when it is op's lease's grant: 1 with *kv into res and *g, 0
 * (lost: r->why says why when it was broken), or a store failure (< 0,
 * *st set). */
static int own_grant(etcd_client *c, const store_op *op, const lock_keys *k, etcd_op_result *res,
                     etcd_kv **kv, store_etcd_grant *g, store_status *st, store_result *r) {
  int rc = store_etcd_read(c, k->l, res, kv);
  if (rc < 0) {
    *st = store_etcd_failed(c, rc, r);
    return -1;
  }
  if (rc == 0 || store_etcd_grant_parse(*kv, g) < 0 || strcmp(g->lease, op->lease) != 0) {
    store_etcd_broken_why(c, op->name, op->lease, r);
    *st = STORE_LOST;
    return 0;
  }
  return 1;
}

static store_status lock_renew(etcd_client *c, store_op *op, store_result *r) {
  lock_keys k;
  keys_of(&k, op->name);
  etcd_op_result res = {0};
  etcd_kv *kv;
  store_etcd_grant g;
  store_status st = STORE_OK;
  if (own_grant(c, op, &k, &res, &kv, &g, &st, r) > 0) st = store_etcd_refresh(c, op, &k.at, kv, &g, 1, r);
  etcd_op_result_clear(&res);
  return st;
}

/* A released grant's place in the count of a token other than the
 * releaser's (a lease handed to another token's client): deleted unless
 * a grant wrote it again after the release's txn (rev). Best effort: it
 * ends with its lease anyway. */
static void uncount(etcd_client *c, const store_op *op, const char *token, int64_t rev) {
  char qentry[sizeof ((store_etcd_quota *)0)->entry];
  store_etcd_quota_entry(qentry, sizeof qentry, token, op);
  etcd_compare cmp = {.key = qentry, .target = ETCD_CMP_MOD, .result = ETCD_CMP_LESS, .number = rev};
  etcd_op del = {.kind = ETCD_OP_DELETE, .key = qentry};
  etcd_txn_req t = {&cmp, 1, &del, 1, NULL, 0};
  etcd_txn_result tr = {0};
  etcd_txn(c, &t, &tr);
  etcd_txn_result_clear(&tr);
}

/* The release in one txn, with no read first: P o/NAME holds the lease id
 * of the grant at P l/NAME (every write of the grant writes both, every
 * delete deletes both), so "P o/NAME is this lease and P l/NAME exists"
 * says the grant is this lease's, and the txn deletes it, reading it as it
 * goes (the fence, the time, the token and the cap lease, for the reply
 * and what follows). P x/NAME tells event followers (store_events.c) that
 * the delete was a release, not an expiry; it has no lease (one key per
 * name, as P f/NAME: followers read it at its revision). 1 released, 0 when the compare failed (lost, or a
 * grant written before P o/ existed: lock_release reads and decides), or
 * -1 with *st a failure. */
static int release_at_once(etcd_client *c, store_op *op, const lock_keys *k, store_status *st,
                           store_result *r) {
  char x[STORE_ETCD_KEY_MAX], qentry[sizeof ((store_etcd_quota *)0)->entry];
  store_etcd_key(x, sizeof x, 'x', op->name);
  etcd_compare cmp[2] = {{.key = k->o, .target = ETCD_CMP_VALUE, .value = op->lease},
                         {.key = k->l, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_GREATER}};
  etcd_op ops[6] = {{.kind = ETCD_OP_RANGE, .key = k->l},
                    {.kind = ETCD_OP_DELETE, .key = k->l},
                    {.kind = ETCD_OP_DELETE, .key = k->d},
                    {.kind = ETCD_OP_DELETE, .key = k->o},
                    {.kind = ETCD_OP_PUT, .key = x, .value = "{}"}};
  int n = 5;
  if (op->token && op->token[0]) { /* the releaser's place, as the grant's usually is */
    store_etcd_quota_entry(qentry, sizeof qentry, op->token, op);
    ops[n++] = (etcd_op){.kind = ETCD_OP_DELETE, .key = qentry};
  }
  etcd_txn_req t = {cmp, 2, ops, n, NULL, 0};
  etcd_txn_result tr = {0};
  int rc = store_etcd_txn_batched(c, k->l, &t, &tr);
  if (rc != ETCD_OK || !tr.succeeded) {
    if (rc != ETCD_OK) *st = store_etcd_failed(c, rc, r);
    etcd_txn_result_clear(&tr);
    return rc == ETCD_OK ? 0 : -1;
  }
  *st = STORE_OK;
  store_etcd_grant g;
  const etcd_kv *kv = first_kv(&tr, 0);
  if (kv && store_etcd_grant_parse(kv, &g) == 0) {
    r->fence = kv->create_revision;
    r->at = g.at;
    if (g.token[0] && strcmp(g.token, op->token ? op->token : "") != 0)
      uncount(c, op, g.token, tr.revision + 1);
    /* its cap key goes with its cap lease (a long cap would keep both) */
    if (g.cap_lease) etcd_lease_revoke(c, g.cap_lease);
  }
  etcd_txn_result_clear(&tr);
  return 1;
}

static store_status lock_release(etcd_client *c, store_op *op, store_result *r) {
  lock_keys k;
  keys_of(&k, op->name);
  store_status st = STORE_OK;
  if (release_at_once(c, op, &k, &st, r) != 0) return st;
  etcd_op_result res = {0};
  etcd_kv *kv;
  store_etcd_grant g;
  if (own_grant(c, op, &k, &res, &kv, &g, &st, r) <= 0) {
    etcd_op_result_clear(&res);
    return st;
  }
  /* Deleted only if it is still the grant just read: a stale release
   * cannot end a newer holder's lease. */
  char x[STORE_ETCD_KEY_MAX], mark[48];
  store_etcd_key(x, sizeof x, 'x', op->name);
  snprintf(mark, sizeof mark, "{\"fence\":%lld}", (long long)kv->create_revision);
  etcd_op also[2] = {{.kind = ETCD_OP_PUT, .key = x, .value = mark, .lease = kv->lease},
                     {.kind = ETCD_OP_DELETE, .key = k.o}};
  st = store_etcd_grant_end(c, op, k.l, k.d, kv, &g, also, 2, r);
  if (st == STORE_OK && g.cap_lease) etcd_lease_revoke(c, g.cap_lease);
  etcd_op_result_clear(&res);
  return st;
}

static store_status lock_inspect(etcd_client *c, store_op *op, store_result *r) {
  lock_keys k;
  keys_of(&k, op->name);
  /* One txn with no compare: the three keys read at one revision. */
  etcd_op get[3] = {{.kind = ETCD_OP_RANGE, .key = k.l},
                    {.kind = ETCD_OP_RANGE, .key = k.f},
                    {.kind = ETCD_OP_RANGE, .key = k.d}};
  etcd_txn_req t = {NULL, 0, get, 3, NULL, 0};
  etcd_txn_result tr = {0};
  int rc = etcd_txn(c, &t, &tr);
  store_status st = STORE_OK;
  if (rc != ETCD_OK) {
    st = store_etcd_failed(c, rc, r);
  } else if (tr.nresults == 3) {
    if (tr.results[1].nkvs > 0) r->fence = tr.results[1].kvs[0].mod_revision;
    store_etcd_grant g;
    if (tr.results[0].nkvs > 0 && store_etcd_grant_parse(&tr.results[0].kvs[0], &g) == 0) {
      int64_t left = 0, of = 0;
      if (etcd_lease_timetolive(c, tr.results[0].kvs[0].lease, &left, &of) == ETCD_OK &&
          left >= 0) {
        r->held = 1;
        r->ttl_ms = left > 0 ? left * 1000 : 1;
        r->at = g.at;
        r->renewals = g.renewals;
        snprintf(r->owner, sizeof r->owner, "%s", g.owner);
        if (g.value[0] && (r->value = strdup(g.value)) == NULL) st = store_etcd_no_memory(r);
      }
    } else if (tr.results[2].nkvs > 0) {
      r->delay_ms = store_etcd_left_s(c, tr.results[2].kvs[0].lease) * 1000;
    }
  }
  etcd_txn_result_clear(&tr);
  return st;
}

void store_etcd_lock(etcd_client *c, store_op *op) {
  switch (op->kind) {
    case STORE_OP_ACQUIRE: op->st = lock_acquire(c, op, &op->r); break;
    case STORE_OP_RENEW: op->st = lock_renew(c, op, &op->r); break;
    case STORE_OP_RELEASE: op->st = lock_release(c, op, &op->r); break;
    default: op->st = lock_inspect(c, op, &op->r); break;
  }
}
