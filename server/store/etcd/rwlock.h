/* rwlock.h: the read/write lock calls on etcd (rwlock.c), for the dispatcher. */
#ifndef PICKETD_STORE_ETCD_RWLOCK_H
#define PICKETD_STORE_ETCD_RWLOCK_H

#include "common.h"

/* A read/write lock call (op->kind: acquire, renew, release, inspect,
 * forget), setting op->st and op->r. */
void store_etcd_rwlock(etcd_client *c, store_op *op);

#endif
