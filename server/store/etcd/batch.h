/* batch.h: group commit of txns on etcd (batch.c), for grant.c and
 * locks.c. */
#ifndef PICKETD_STORE_ETCD_BATCH_H
#define PICKETD_STORE_ETCD_BATCH_H

#include "common.h"

/* etcd_txn(c, t, out), made together with the txns other threads ask for
 * meanwhile, in one request and one Raft proposal (etcd_txn_batch), at
 * most one per `key` in a request: key names what t writes (a grant's
 * key), so that no two txns of a request write the same keys. Returns
 * what etcd_txn would; the caller clears *out. */
int store_etcd_txn_batched(etcd_client *c, const char *key, const etcd_txn_req *t,
                           etcd_txn_result *out);
/* Since the process started: requests sent, and the txns they carried
 * (store_etcd.c's /metrics). */
void store_etcd_batch_counts(long *requests, long *txns);

#endif
