/* pool.h: the etcd leases that grants share (pool.c), for grant.c and the
 * families.
 *
 * A grant used to cost an etcd lease of its own: one LeaseGrant, a Raft
 * proposal and a request, on every acquire, on top of the grant's txn.
 * Grants of one TTL made within POOL_SLACK_MS (200 ms) of each other now
 * share one (as Kubernetes shares a lease among the events of a window),
 * so each lives at least its TTL and at most 200 ms longer (plus the
 * lease's round trip and etcd's sweep, 0-500 ms, as before), and a busy
 * TTL costs five LeaseGrants a second instead of one per acquire.
 *
 * What a shared lease may not do: be kept alive (that would keep every
 * grant on it alive, the crashed holders' too) or be revoked (that would
 * end them all). So a renewal moves its grant to a lease of the pool (a
 * put, which rewrites the grant anyway), a release deletes its keys and
 * leaves the lease to expire, and nothing revokes a pool lease. */
#ifndef PICKETD_STORE_ETCD_POOL_H
#define PICKETD_STORE_ETCD_POOL_H

#include "common.h"

/* An etcd lease on which a grant of ttl_s seconds made now lives at least
 * ttl_s seconds from now (etcd's clock): the
 * pool's (it ends at most 200 ms later), or a new one granted on the
 * calling thread. ETCD_OK with *id set, or an etcd code. Thread-safe. */
int store_etcd_pool_lease(etcd_client *c, int64_t ttl_s, int64_t *id);
/* Forgets lease id (a put naming it was refused: etcd no longer has it),
 * so the next grant gets a new one. */
void store_etcd_pool_drop(int64_t id);
/* Since the process started: leases granted, grants that needed one, and
 * of those the ones put on a shared lease (store_etcd.c's /metrics). */
void store_etcd_pool_counts(long *leases, long *grants, long *shared);

#endif
