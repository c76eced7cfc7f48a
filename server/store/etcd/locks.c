/* locks.c: the lock calls on etcd (acquire, renew, release, inspect).
 *
 * A grant is P l/NAME, attached to an etcd lease of the grant's TTL; its
 * create_revision is the fence. P f/NAME is put in the grant's txn (no
 * lease): its mod_revision is the last fence, which inspect reports after
 * the grant is gone. Every write is one txn guarded by a compare, so a call
 * that a failover made run twice cannot grant twice or end another
 * holder's lease (docs/etcd-design.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "store_etcd.h"

static store_status lock_acquire(etcd_client *c, store_op *op, store_result *r) {
  char key[STORE_ETCD_KEY_MAX], fkey[sizeof key];
  store_etcd_key(key, sizeof key, 'l', op->name);
  store_etcd_key(fkey, sizeof fkey, 'f', op->name);
  int64_t lease_id = 0, granted_s = 0;
  int rc = etcd_lease_grant(c, store_etcd_ttl_s(op->ttl_ms), &lease_id, &granted_s);
  if (rc != ETCD_OK) return store_etcd_failed(c, rc, r);
  int64_t at = clock_wall_ms();
  store_etcd_grant ng = {.at = at, .ttl_ms = granted_s * 1000};
  snprintf(ng.lease, sizeof ng.lease, "%s", op->lease);
  snprintf(ng.owner, sizeof ng.owner, "%s", op->owner ? op->owner : "");
  char *value = store_etcd_grant_value(&ng);
  if (value == NULL) {
    etcd_lease_revoke(c, lease_id);
    snprintf(r->err, sizeof r->err, "out of memory");
    return STORE_EREPLY;
  }
  etcd_compare cmp = {.key = key, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL};
  etcd_op put[2] = {{.kind = ETCD_OP_PUT, .key = key, .value = value, .lease = lease_id},
                    {.kind = ETCD_OP_PUT, .key = fkey, .value = ""}};
  etcd_op get = {.kind = ETCD_OP_RANGE, .key = key};
  etcd_txn_req t = {&cmp, 1, put, 2, &get, 1};
  etcd_txn_result res = {0};
  rc = etcd_txn(c, &t, &res);
  free(value);
  store_status st = STORE_OK;
  if (rc != ETCD_OK) {
    st = store_etcd_failed(c, rc, r);
  } else if (res.succeeded) {
    r->fence = res.revision; /* the key's create_revision */
    r->ttl_ms = granted_s * 1000;
    r->created = 1;
    r->at = at;
    lease_id = 0; /* the grant's now */
  } else if (res.nresults < 1 || res.results[0].nkvs < 1) {
    /* released between the compare and the read: the caller retries */
    r->ttl_ms = 1;
    st = STORE_HELD;
  } else {
    etcd_kv *kv = &res.results[0].kvs[0];
    store_etcd_grant g;
    if (store_etcd_grant_parse(kv, &g) < 0) {
      snprintf(r->err, sizeof r->err, "etcd: %.200s holds no picket grant", key);
      st = STORE_EREPLY;
    } else if (strcmp(g.lease, op->lease) == 0) {
      /* a retry of this lease's own acquire (its reply was lost, or the
       * txn ran twice across a failover): the same grant, kept alive */
      int64_t ttl_s = 0;
      rc = etcd_lease_keepalive_once(c, kv->lease, &ttl_s);
      if (rc != ETCD_OK) st = store_etcd_failed(c, rc, r);
      r->fence = kv->create_revision;
      r->ttl_ms = ttl_s * 1000;
      r->at = g.at;
      snprintf(r->owner, sizeof r->owner, "%s", g.owner);
    } else {
      int64_t left_s = 0, of_s = 0;
      if (etcd_lease_timetolive(c, kv->lease, &left_s, &of_s) != ETCD_OK || left_s < 1)
        left_s = 1;
      r->ttl_ms = left_s * 1000;
      snprintf(r->owner, sizeof r->owner, "%s", g.owner);
      st = STORE_HELD;
    }
  }
  etcd_txn_result_clear(&res);
  if (lease_id) etcd_lease_revoke(c, lease_id); /* granted for nothing */
  return st;
}

static store_status lock_renew(etcd_client *c, store_op *op, store_result *r) {
  char key[STORE_ETCD_KEY_MAX];
  store_etcd_key(key, sizeof key, 'l', op->name);
  etcd_op_result res = {0};
  etcd_kv *kv;
  int rc = store_etcd_read(c, key, &res, &kv);
  if (rc < 0) {
    etcd_op_result_clear(&res);
    return store_etcd_failed(c, rc, r);
  }
  store_etcd_grant g;
  if (rc == 0 || store_etcd_grant_parse(kv, &g) < 0 || strcmp(g.lease, op->lease) != 0) {
    etcd_op_result_clear(&res);
    return STORE_LOST;
  }
  int64_t want_s = store_etcd_ttl_s(op->ttl_ms), left_s = 0, of_s = 0;
  store_status st = STORE_OK;
  rc = etcd_lease_timetolive(c, kv->lease, &left_s, &of_s);
  if (rc != ETCD_OK) {
    st = store_etcd_failed(c, rc, r);
  } else if (left_s < 0) {
    st = STORE_LOST;
  } else if (want_s <= of_s) {
    /* An etcd lease keeps the TTL it was granted: a renewal that asks no
     * more is a keepalive (never shorter than asked). */
    int64_t ttl_s = 0;
    rc = etcd_lease_keepalive_once(c, kv->lease, &ttl_s);
    if (rc != ETCD_OK) st = store_etcd_failed(c, rc, r);
    else if (ttl_s == 0) st = STORE_LOST;
    r->ttl_ms = ttl_s * 1000;
  } else {
    /* A longer TTL needs a new etcd lease: the same grant (and fence: a
     * put keeps create_revision) moves to it, then the old one ends. */
    int64_t id = 0, granted_s = 0;
    rc = etcd_lease_grant(c, want_s, &id, &granted_s);
    store_etcd_grant ng = g;
    ng.ttl_ms = granted_s * 1000;
    ng.renewals++;
    char *value = rc == ETCD_OK ? store_etcd_grant_value(&ng) : NULL;
    if (rc != ETCD_OK) {
      st = store_etcd_failed(c, rc, r);
    } else if (value == NULL) {
      snprintf(r->err, sizeof r->err, "out of memory");
      st = STORE_EREPLY;
    } else {
      etcd_compare cmp = {.key = key, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL,
                          .number = kv->mod_revision};
      etcd_op put = {.kind = ETCD_OP_PUT, .key = key, .value = value, .lease = id};
      etcd_txn_req t = {&cmp, 1, &put, 1, NULL, 0};
      etcd_txn_result tr = {0};
      rc = etcd_txn(c, &t, &tr);
      if (rc != ETCD_OK) st = store_etcd_failed(c, rc, r);
      else if (!tr.succeeded) st = STORE_LOST;
      etcd_txn_result_clear(&tr);
    }
    free(value);
    if (st == STORE_OK) {
      etcd_lease_revoke(c, kv->lease); /* its key has moved: this deletes nothing */
      r->ttl_ms = granted_s * 1000;
    } else if (id) {
      etcd_lease_revoke(c, id);
    }
  }
  r->fence = kv->create_revision;
  r->at = g.at;
  etcd_op_result_clear(&res);
  return st;
}

static store_status lock_release(etcd_client *c, store_op *op, store_result *r) {
  char key[STORE_ETCD_KEY_MAX];
  store_etcd_key(key, sizeof key, 'l', op->name);
  etcd_op_result res = {0};
  etcd_kv *kv;
  int rc = store_etcd_read(c, key, &res, &kv);
  if (rc < 0) {
    etcd_op_result_clear(&res);
    return store_etcd_failed(c, rc, r);
  }
  store_etcd_grant g;
  if (rc == 0 || store_etcd_grant_parse(kv, &g) < 0 || strcmp(g.lease, op->lease) != 0) {
    etcd_op_result_clear(&res);
    return STORE_LOST;
  }
  /* Deleted only if it is still the grant just read: a stale release
   * cannot end a newer holder's lease. */
  etcd_compare cmp = {.key = key, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL,
                      .number = kv->mod_revision};
  etcd_op del = {.kind = ETCD_OP_DELETE, .key = key};
  etcd_txn_req t = {&cmp, 1, &del, 1, NULL, 0};
  etcd_txn_result tr = {0};
  store_status st = STORE_OK;
  rc = etcd_txn(c, &t, &tr);
  if (rc != ETCD_OK) st = store_etcd_failed(c, rc, r);
  else if (!tr.succeeded) st = STORE_LOST;
  etcd_txn_result_clear(&tr);
  if (st == STORE_OK) etcd_lease_revoke(c, kv->lease);
  r->fence = kv->create_revision;
  r->at = g.at;
  etcd_op_result_clear(&res);
  return st;
}

static store_status lock_inspect(etcd_client *c, store_op *op, store_result *r) {
  char key[STORE_ETCD_KEY_MAX], fkey[sizeof key];
  store_etcd_key(key, sizeof key, 'l', op->name);
  store_etcd_key(fkey, sizeof fkey, 'f', op->name);
  /* One txn with no compare: both keys read at one revision. */
  etcd_op get[2] = {{.kind = ETCD_OP_RANGE, .key = key}, {.kind = ETCD_OP_RANGE, .key = fkey}};
  etcd_txn_req t = {NULL, 0, get, 2, NULL, 0};
  etcd_txn_result tr = {0};
  int rc = etcd_txn(c, &t, &tr);
  store_status st = STORE_OK;
  if (rc != ETCD_OK) {
    st = store_etcd_failed(c, rc, r);
  } else if (tr.nresults == 2) {
    if (tr.results[1].nkvs > 0) r->fence = tr.results[1].kvs[0].mod_revision;
    store_etcd_grant g;
    if (tr.results[0].nkvs > 0 && store_etcd_grant_parse(&tr.results[0].kvs[0], &g) == 0) {
      int64_t left_s = 0, of_s = 0;
      if (etcd_lease_timetolive(c, tr.results[0].kvs[0].lease, &left_s, &of_s) == ETCD_OK &&
          left_s >= 0) {
        r->held = 1;
        r->ttl_ms = left_s > 0 ? left_s * 1000 : 1;
        r->at = g.at;
        r->renewals = g.renewals;
        snprintf(r->owner, sizeof r->owner, "%s", g.owner);
      }
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
