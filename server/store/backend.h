/* backend.h: what a backend gives store.c, which implements store.h by
 * passing each call to the backend that store_init chose. One table per
 * backend (store_redis.c's store_redis_backend); the fields are store.h's
 * functions of the same names, with the same contracts.
 *
 * Optional, NULL when a backend leaves them out (store.c then does
 * without): the pipe (pipeline_enabled and every pipe_*, all or none:
 * without them every call of a loop goes to the runner's workers,
 * call.c) and the release feed (feed_*, all or none: without it a waiter
 * retries at its holder's expiry). Everything else is required. */
#ifndef PICKETD_STORE_BACKEND_H
#define PICKETD_STORE_BACKEND_H

#include "store.h"

typedef struct {
  const char *name; /* for logs: "redis" */
  int (*init)(const config *cfg, char *err, size_t errlen);
  void (*thread_done)(void);
  store_status (*ready)(int detail, store_result *r, json_t **body);
  void (*stop)(void);
  int (*feed_start)(void (*released)(const char *key));
  void (*feed_want)(int on);
  void (*feed_stop)(void);
  void (*run)(store_op *op);
  int (*pipeline_enabled)(void);
  store_pipe *(*pipe_new)(void);
  int (*pipe_connect)(store_pipe *p);
  void (*pipe_free)(store_pipe *p);
  int (*pipe_append)(store_pipe *p, store_op *op);
  void (*pipe_flush)(store_pipe *p);
  int (*pipe_fd)(const store_pipe *p, unsigned long *opens);
  void (*pipe_read)(store_pipe *p);
  int64_t (*pipe_timeout_ms)(const store_pipe *p);
  void (*pipe_expire)(store_pipe *p);
  store_status (*list)(const char *prefix, int limit, store_cursor *at, int *more,
                       store_result *r);
  store_status (*break_lock)(const char *name, const char *who, int64_t fence, store_result *r);
  store_events *(*events_new)(const store_events_hooks *hooks, void *ctx);
  void (*events_free)(store_events *e);
  int (*events_add)(store_events *e, const char *name);
  void (*events_remove)(store_events *e, const char *name);
  int64_t (*events_run)(store_events *e, int readable);
  int (*events_fd)(const store_events *e);
} store_backend;

/* The Redis store (server/store/redis/) and the etcd store (server/store/etcd/). */
extern const store_backend store_redis_backend;
extern const store_backend store_etcd_backend;

#endif
