/* leases.h: a token's lease count (op->token, op->max_leases), kept by
 * leases.c for grant.c, the families and a break.
 *
 * Every lease a token holds is one key P q/TOKEN/ENTRY on the lease's own
 * etcd lease, so a lease that ends, however it ends, leaves the count with
 * it (ENTRY is a lock's NAME, as Redis counts a lock once per token; a
 * permit's or a read/write lease's is its kind, NAME and lease id). A
 * grant reads the count first and adds to its txn a compare that no key
 * under P q/TOKEN/ changed since that read (etcd compares a whole prefix),
 * so two grants racing for a token's last lease cannot both succeed. */
#ifndef PICKETD_STORE_ETCD_LEASES_H
#define PICKETD_STORE_ETCD_LEASES_H

#include "common.h"

typedef struct {
  int on;                           /* 0: this call counts nothing */
  char prefix[STORE_ETCD_KEY_MAX];  /* P q/TOKEN/ */
  char entry[STORE_ETCD_KEY_MAX + PICKET_PROTO_LEASE_LEN + 8]; /* P q/TOKEN/ENTRY */
  int64_t revision;                 /* the revision the count was read at */
} store_etcd_quota;
/* The count entry of op's lease for `token` (op->kind, name and lease say
 * which): out = P q/TOKEN/ENTRY. */
void store_etcd_quota_entry(char *out, size_t cap, const char *token, const store_op *op);
/* Before a grant of op (its kind, name, lease, token, max_leases): reads
 * the token's count. STORE_OK with q filled (q->on 0 when op counts
 * nothing), STORE_EQUOTA when the token holds max_leases already and this
 * is not a retry of one of them, or a failure. */
store_status store_etcd_quota_read(etcd_client *c, const store_op *op, store_etcd_quota *q,
                                   store_result *r);
/* Adds to a grant's txn the compare (nothing counted since the read) at
 * *cmp and the put (this grant counted, on etcd lease `lease`) at *put;
 * returns how many of each it added (0 when !q->on, else 1). A txn that
 * fails on that compare is tried again from store_etcd_quota_read, or from
 * what store_etcd_quota_get read in its failure branch. */
int store_etcd_quota_txn(const store_etcd_quota *q, int64_t lease, etcd_compare *cmp,
                         etcd_op *put);
/* Adds to a grant's txn's failure branch, at *get, the reads of the count
 * and of this lease's entry (2 ranges; 0 when !q->on), so that a txn
 * refused because the count moved says what it is now, at the txn's
 * revision, with no call of its own. */
int store_etcd_quota_get(const store_etcd_quota *q, etcd_op *get);
/* After a txn refused: res (its 2 ranges of store_etcd_quota_get), read at
 * `revision`, becomes the count the next try compares against. STORE_OK,
 * or STORE_EQUOTA (r->err unset) when the token is full now. */
store_status store_etcd_quota_reread(store_etcd_quota *q, const store_op *op,
                                     const etcd_op_result *res, int64_t revision);

#endif
