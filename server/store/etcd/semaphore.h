/* semaphore.h: the semaphore calls on etcd (semaphore.c), for the dispatcher. */
#ifndef PICKETD_STORE_ETCD_SEMAPHORE_H
#define PICKETD_STORE_ETCD_SEMAPHORE_H

#include "common.h"

/* A semaphore call (op->kind: one permit's acquire, renew, release, or an
 * inspect), setting op->st and op->r. */
void store_etcd_semaphore(etcd_client *c, store_op *op);

#endif
