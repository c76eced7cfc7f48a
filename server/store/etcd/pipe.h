/* pipe.h: an event loop's store pipe on etcd (pipe.c): worker threads
 * that make the loop's calls, so the loop never waits on etcd. The
 * functions are store.h's store_pipe_* with the same contracts, but for
 * the two below; the dispatcher (store_etcd.c) puts them in the backend
 * table. */
#ifndef PICKETD_STORE_ETCD_PIPE_H
#define PICKETD_STORE_ETCD_PIPE_H

#include "common.h"
#include "metrics.h"

/* A pipe whose workers make each call with run (on the worker's thread,
 * setting op->st and op->r); workers_max of them, started now. NULL when
 * out of memory, eventfds or threads. */
store_pipe *store_etcd_pipe_new(void (*run)(store_op *op), int workers_max);
int store_etcd_pipe_connect(store_pipe *p);
void store_etcd_pipe_free(store_pipe *p);
int store_etcd_pipe_append(store_pipe *p, store_op *op);
int store_etcd_pipe_fd(const store_pipe *p, unsigned long *opens);
void store_etcd_pipe_read(store_pipe *p);
/* The pipes' families of /metrics (metrics_add_families). */
void store_etcd_pipe_metrics(metrics_buf *b, int all_tenants);

#endif
