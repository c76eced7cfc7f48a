/* grant.h: one lease on one key (grant.c), as every primitive on etcd
 * keeps its leases (a lock's, a permit's, a read or write lease): what
 * locks.c, semaphore.c, rwlock.c and admin.c share above common.h. */
#ifndef PICKETD_STORE_ETCD_GRANT_H
#define PICKETD_STORE_ETCD_GRANT_H

#include "common.h"
#include "leases.h"

/* "out of memory" in r->err: STORE_EREPLY. */
store_status store_etcd_no_memory(store_result *r);
/* The TTL (s) that a grant or renewal at `now` (unix ms) gets for ttl_ms
 * under the cap (unix ms; 0: none): ttl_ms rounded up, cut to the cap
 * rounded down, so no expiry runs past it. 0 when the cap has passed; -1
 * when what is left of it is shorter than etcd's shortest lease. */
int64_t store_etcd_ttl_under_cap(int64_t ttl_ms, int64_t cap, int64_t now);
/* A grant's etcd leases, shared (pool.h): *L on which a grant of ttl_s
 * made now lives at least ttl_s, and with a lock-delay *D, on which its
 * delay key lives that plus the delay (else 0). ETCD_OK, or a code. They
 * are never revoked and never kept alive. */
int store_etcd_leases_grant(etcd_client *c, int64_t ttl_s, int64_t delay_ms, int64_t *L,
                            int64_t *D);
/* What is left of grant g (kv as read) in ms, at least 1: until the end
 * its last grant or renewal wrote, as long as that is ahead on this
 * picketd's clock; else what etcd says its lease has left (its key is
 * still there: a shared lease outlives the grant by up to 1.5 s). */
int64_t store_etcd_grant_left_ms(etcd_client *c, const etcd_kv *kv, const store_etcd_grant *g);
/* Seconds left of etcd lease id: at least 1 (it was live a moment ago). */
int64_t store_etcd_left_s(etcd_client *c, int64_t id);
/* Where a grant lives: its key, its delay key (used only with a
 * lock-delay) and, for a lock, its owner key P o/NAME (the lease id, that
 * a release compares; NULL for the other families). */
typedef struct {
  const char *key, *dkey, *okey;
} store_etcd_keys;
/* A live grant of op's lease, as read in kv and g, gets op->ttl_ms from
 * now: moved to a shared etcd lease of that TTL, never past its cap;
 * `renewal` counts it in the grant. Sets r->fence, ttl_ms, at and owner.
 * STORE_LOST when it ended meanwhile, is at its cap, or its end (as the
 * last grant or renewal wrote it) has passed: then it is ended as an
 * expiry would end it. */
store_status store_etcd_refresh(etcd_client *c, const store_op *op, const store_etcd_keys *k,
                                const etcd_kv *kv, const store_etcd_grant *g, int renewal,
                                store_result *r);

/* A new grant of op, now: takes its shared etcd leases (*L for its TTL
 * under its hold cap, and *D with a lock-delay of delay_ms) and fills g
 * (lease id, owner, the token when q counts it, times, TTL). STORE_OK, or
 * a failure. The caller adds its own fields and makes the value
 * (store_etcd_grant_value); L and D need nothing if the grant does not
 * happen (pool.h). */
store_status store_etcd_grant_new(etcd_client *c, const store_op *op, const store_etcd_quota *q,
                                  int64_t delay_ms, store_etcd_grant *g, int64_t *L, int64_t *D,
                                  store_result *r);

/* Writes a new grant g with txn t (its compares say the place is free, its
 * success branch puts g's keys on L and D): 1 granted, with r->fence (the
 * txn's revision, the grant key's create_revision), ttl_ms, at and created
 * set; 0 when a compare failed, *tr holding the failure branch's reads; -1
 * a failure, *st saying why. t's first success op is the grant key's put:
 * the txn may go to etcd with other threads' (batch.h), one per grant key.
 * The caller clears *tr. */
int store_etcd_grant_commit(etcd_client *c, const etcd_txn_req *t, const store_etcd_grant *g,
                            int64_t L, int64_t D, etcd_txn_result *tr, store_status *st,
                            store_result *r);
/* Ends op's grant at key (its delay key dkey, "" for none), as read in kv
 * and g: one txn guarded by kv's mod_revision deletes them and its place
 * in its token's count, with the nalso ops of `also` (at most
 * STORE_ETCD_END_ALSO_MAX) in it. Sets r->fence and r->at. STORE_OK,
 * STORE_LOST when it changed or ended meanwhile, or a failure. */
#define STORE_ETCD_END_ALSO_MAX 2
store_status store_etcd_grant_end(etcd_client *c, const store_op *op, const char *key,
                                  const char *dkey, const etcd_kv *kv, const store_etcd_grant *g,
                                  const etcd_op *also, int nalso, store_result *r);

/* Why a lease was lost. A break (admin.c) leaves P b/NAME (who, when, and
 * the broken lease's id) for as long as the lease had left and at least a
 * minute. On a renew or release
 * that found its lease gone: fills r->why ("broken by WHO at TIME") when
 * this lease was broken, else leaves it "". Best effort: a failure to read
 * leaves it "" too. */
void store_etcd_broken_why(etcd_client *c, const char *name, const char *lease, store_result *r);

#endif
