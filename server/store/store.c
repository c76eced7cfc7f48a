/* store.c: store.h's functions, each passed to the backend store_init
 * chose (backend.h). The HTTP side calls these and never a backend's own
 * functions, so a backend is chosen by a flag at startup and nothing else
 * changes: --etcd chooses etcd, anything else Redis. */
#include "backend.h"

static const store_backend *be = &store_redis_backend;

int store_init(const config *cfg, char *err, size_t errlen) {
  be = cfg->etcd_list[0] ? &store_etcd_backend : &store_redis_backend;
  return be->init(cfg, err, errlen);
}

void store_thread_done(void) { be->thread_done(); }
store_status store_ready(int detail, store_result *r, json_t **body) {
  return be->ready(detail, r, body);
}
void store_stop(void) { be->stop(); }

/* (a backend without a feed leaves waiters to retry at their holder's
 * expiry, as store.h allows) */
int store_feed_start(void (*released)(const char *key)) {
  return be->feed_start ? be->feed_start(released) : 0;
}
void store_feed_want(int on) {
  if (be->feed_want) be->feed_want(on);
}
void store_feed_stop(void) {
  if (be->feed_stop) be->feed_stop();
}

void store_run(store_op *op) {
  if (op->kind == STORE_OP_LIST)
    op->st = be->list(op->name, (int)op->limit, op->cursor, &op->r.more, &op->r);
  else if (op->kind == STORE_OP_BREAK)
    op->st = be->break_lock(op->name, op->who, op->fence, &op->r);
  else if (op->kind == STORE_OP_READY)
    op->st = be->ready((int)op->limit, &op->r, &op->r.body);
  else
    be->run(op);
}
/* (a backend without pipe_new pipelines nothing: loop.c then makes no
 * pipe, and no other pipe function is called) */
int store_pipeline_enabled(void) {
  return be->pipe_new != NULL && (be->pipeline_enabled == NULL || be->pipeline_enabled());
}
store_pipe *store_pipe_new(void) { return be->pipe_new(); }
int store_pipe_connect(store_pipe *p) { return be->pipe_connect(p); }
void store_pipe_free(store_pipe *p) {
  if (p) be->pipe_free(p);
}
int store_pipe_append(store_pipe *p, store_op *op) { return be->pipe_append(p, op); }
void store_pipe_flush(store_pipe *p) { be->pipe_flush(p); }
int store_pipe_fd(const store_pipe *p, unsigned long *opens) { return be->pipe_fd(p, opens); }
void store_pipe_read(store_pipe *p) { be->pipe_read(p); }
int64_t store_pipe_timeout_ms(const store_pipe *p) { return be->pipe_timeout_ms(p); }
void store_pipe_expire(store_pipe *p) { be->pipe_expire(p); }

store_status store_list(const char *prefix, int limit, store_cursor *at, int *more,
                        store_result *r) {
  return be->list(prefix, limit, at, more, r);
}
store_status store_break(const char *name, const char *who, int64_t fence, store_result *r) {
  return be->break_lock(name, who, fence, r);
}

store_events *store_events_new(const store_events_hooks *hooks, void *ctx) {
  return be->events_new(hooks, ctx);
}
void store_events_free(store_events *e) {
  if (e) be->events_free(e);
}
int store_events_add(store_events *e, const char *name) { return be->events_add(e, name); }
void store_events_remove(store_events *e, const char *name) { be->events_remove(e, name); }
int64_t store_events_run(store_events *e, int readable) { return be->events_run(e, readable); }
int store_events_fd(const store_events *e) { return be->events_fd(e); }
