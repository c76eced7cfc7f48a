/* leases.c: a token's max_leases on etcd (store_etcd.h says the model).
 *
 * Redis keeps the count in the lock call's own script; etcd has no
 * scripts, so the count is the number of keys under P q/TOKEN/, each on
 * the etcd lease of the grant it counts, and a grant's txn compares that
 * no key under the prefix was written since the count was read. A race
 * for a token's last lease makes one grant's txn fail on that compare; the
 * caller reads again and tries once more, and finds the token full. */
#include <stdio.h>
#include <string.h>

#include "leases.h"

void store_etcd_quota_entry(char *out, size_t cap, const char *token, const store_op *op) {
  const char *kind = "";
  if (op->kind >= STORE_OP_SEM_ACQUIRE && op->kind <= STORE_OP_SEM_INSPECT) kind = "s/";
  else if (op->kind >= STORE_OP_RW_ACQUIRE && op->kind <= STORE_OP_RW_FORGET) kind = "r/";
  if (kind[0])
    snprintf(out, cap, "%sq/%s/%s%s/%s", store_etcd_cfg->key_prefix, token, kind, op->name,
             op->lease);
  else
    snprintf(out, cap, "%sq/%s/%s", store_etcd_cfg->key_prefix, token, op->name);
}

store_status store_etcd_quota_read(etcd_client *c, const store_op *op, store_etcd_quota *q,
                                   store_result *r) {
  memset(q, 0, sizeof *q);
  if (op->token == NULL || op->token[0] == '\0' || op->max_leases <= 0) return STORE_OK;
  q->on = 1;
  snprintf(q->prefix, sizeof q->prefix, "%sq/%s/", store_etcd_cfg->key_prefix, op->token);
  store_etcd_quota_entry(q->entry, sizeof q->entry, op->token, op);
  /* the count and this lease's own entry, at one revision */
  etcd_op get[2];
  store_etcd_quota_get(q, get);
  etcd_txn_req t = {NULL, 0, get, 2, NULL, 0};
  etcd_txn_result tr = {0};
  int rc = etcd_txn(c, &t, &tr);
  store_status st = STORE_OK;
  if (rc != ETCD_OK) {
    st = store_etcd_failed(c, rc, r);
  } else if (tr.nresults != 2) {
    snprintf(r->err, sizeof r->err, "etcd: a quota read gave %d results", tr.nresults);
    st = STORE_EREPLY;
  } else {
    st = store_etcd_quota_reread(q, op, tr.results, tr.revision);
  }
  etcd_txn_result_clear(&tr);
  return st;
}

int store_etcd_quota_txn(const store_etcd_quota *q, int64_t lease, etcd_compare *cmp,
                         etcd_op *put) {
  if (!q->on) return 0;
  *cmp = (etcd_compare){.key = q->prefix, .prefix = 1, .target = ETCD_CMP_MOD,
                        .result = ETCD_CMP_LESS, .number = q->revision + 1};
  *put = (etcd_op){.kind = ETCD_OP_PUT, .key = q->entry, .value = "", .lease = lease};
  return 1;
}

int store_etcd_quota_get(const store_etcd_quota *q, etcd_op *get) {
  if (!q->on) return 0;
  get[0] = (etcd_op){.kind = ETCD_OP_RANGE, .key = q->prefix, .prefix = 1, .count_only = 1};
  get[1] = (etcd_op){.kind = ETCD_OP_RANGE, .key = q->entry, .count_only = 1};
  return 2;
}

store_status store_etcd_quota_reread(store_etcd_quota *q, const store_op *op,
                                     const etcd_op_result *res, int64_t revision) {
  q->revision = revision;
  /* counted already (a retry of this lease): never refused */
  return res[1].count == 0 && res[0].count >= op->max_leases ? STORE_EQUOTA : STORE_OK;
}
