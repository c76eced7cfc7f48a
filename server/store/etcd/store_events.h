/* store_events.h: the lock-event follower on etcd (store_events.c), for the dispatcher. */
#ifndef PICKETD_STORE_ETCD_STORE_EVENTS_H
#define PICKETD_STORE_ETCD_STORE_EVENTS_H

#include "common.h"

/* store.h's store_events_* on etcd. */
store_events *store_etcd_events_new(const store_events_hooks *hooks, void *ctx);
void store_etcd_events_free(store_events *e);
int store_etcd_events_add(store_events *e, const char *name);
void store_etcd_events_remove(store_events *e, const char *name);
int64_t store_etcd_events_run(store_events *e, int readable);
int store_etcd_events_fd(const store_events *e);

#endif
