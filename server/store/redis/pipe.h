/* pipe.h: store.h's pipelined calls on Redis (pipe.c), for the backend
 * table. The contracts are store.h's store_pipe_* of the same names. */
#ifndef PICKETD_PIPE_H
#define PICKETD_PIPE_H

#include <stdint.h>

#include "store.h"

int store_redis_pipeline_enabled(void);
store_pipe *store_redis_pipe_new(void);
int store_redis_pipe_connect(store_pipe *p);
void store_redis_pipe_free(store_pipe *p);
int store_redis_pipe_append(store_pipe *p, store_op *op);
void store_redis_pipe_flush(store_pipe *p);
int store_redis_pipe_fd(const store_pipe *p, unsigned long *opens);
void store_redis_pipe_read(store_pipe *p);
int64_t store_redis_pipe_timeout_ms(const store_pipe *p);
void store_redis_pipe_expire(store_pipe *p);

#endif
