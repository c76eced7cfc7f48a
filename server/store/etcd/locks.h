/* locks.h: the lock calls on etcd (locks.c), for the dispatcher. */
#ifndef PICKETD_STORE_ETCD_LOCKS_H
#define PICKETD_STORE_ETCD_LOCKS_H

#include "common.h"

/* A lock call (op->kind: acquire, renew, release, inspect), setting op->st
 * and op->r. */
void store_etcd_lock(etcd_client *c, store_op *op);

#endif
