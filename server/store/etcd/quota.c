/* quota.c: a token's lease count on etcd. PLACEHOLDER on the etcd branch:
 * being written; counts nothing yet. */
#include <string.h>

#include "store_etcd.h"

store_status store_etcd_quota_read(etcd_client *c, const store_op *op, store_etcd_quota *q,
                                   store_result *r) {
  (void)c, (void)op, (void)r;
  memset(q, 0, sizeof *q);
  return STORE_OK;
}

int store_etcd_quota_txn(const store_etcd_quota *q, int64_t lease, etcd_compare *cmp,
                         etcd_op *put) {
  (void)q, (void)lease, (void)cmp, (void)put;
  return 0;
}
