/* redis.h: what every file of the Redis store's calls shares about one
 * call in flight (server/store/redis/: lease_count.c, codec.c, conn.c,
 * redirect.c, direct.c, operators.c, pipe.c and store_redis.c): the
 * backend's state of a call in flight (redis_op), its phases, the kind
 * only Redis makes, and the helper that words a failure. No code of its
 * own, so it sits below every file that includes it. */
#ifndef PICKETD_REDIS_H
#define PICKETD_REDIS_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"
#include "stats.h"

/* What store.h's failure statuses are on Redis: STORE_EREPLY an error
 * reply (e.g. WRONGTYPE); STORE_EUNAVAIL unreachable, timed out, LOADING
 * or READONLY; STORE_EMISCONF a maxmemory-policy other than noeviction
 * (allkeys-* can evict fence counters, volatile-* live leases); STORE_EFULL at maxmemory,
 * writes refused with OOM (codec_error sorts the replies).
 *
 * Pipelining (store_pipeline_enabled, _forced) is --redis-pipeline: off
 * sends every call through the runner's workers, on pipelines every call
 * that can be, and the default pipelines calls that have company. A pipe
 * waits --redis-timeout-ms for a reply (store_pipe_expire). Under
 * --min-replicas a pipe writes one WAIT after each batch that holds a
 * grant or a renewal (pipe.c), and a direct call its own WAIT (direct.c).
 * The per-kind scripts are in codec.c: semaphore.lua for a semaphore's
 * calls, rwlock.lua for a read/write lock's, break.lua for a break. */

/* A lock's events kept published (watch.lua; store_redis_watch): a kind
 * of the Redis store's own, which the HTTP side never makes. */
#define STORE_OP_WATCH ((store_op_kind)(STORE_OP_KINDS + 0))

/* What the Redis store keeps of a call in flight, in the op's private
 * area (store.h's store_op_private). All zero is a fresh call: every path
 * sets its phase (lease_count_begin) and routing state before a send. */
typedef struct {
  int64_t deadline_ms;      /* this send's reply is due */
  int64_t call_deadline_ms; /* the whole call's, across redirections */
  int64_t retry_at_ms;      /* TRYAGAIN: sent again at this time */
  int node, slot, backoff_ms;
  short hops, asking;
  short phase;              /* Cluster quota: taking the count, or the call */
  short quota_added;        /* ...the take counted the lock in */
  short reloaded;           /* a pipe sent it again after NOSCRIPT (once per phase) */
  const char *note;         /* a count update of its own: "touch" or "drop" */
} redis_op;

_Static_assert(sizeof(redis_op) <= STORE_OP_PRIVATE_BYTES,
               "redis_op must fit in store_op's private area (STORE_OP_PRIVATE_BYTES)");
_Static_assert(_Alignof(redis_op) <= _Alignof(store_op_private),
               "store_op's private area must be aligned for redis_op");

/* op's Redis state... */
static inline redis_op *redis_op_of(store_op *op) { return (redis_op *)(void *)op->priv.bytes; }
/* ...and for reading only. */
static inline const redis_op *redis_op_view(const store_op *op) {
  return (const redis_op *)(const void *)op->priv.bytes;
}

/* Where a call is: its script (PHASE_CALL); under Redis Cluster the take
 * of its token's lease count before it, or a count update of its own
 * (lease_count.c). The rest mark a pipe's entries that are no call
 * (pipe.c): a WAIT, a connection's setup, a SCRIPT LOAD, an INFO. */
enum { PHASE_CALL = 0, PHASE_TAKE, PHASE_NOTE, PHASE_WAIT, PHASE_SETUP, PHASE_LOAD, PHASE_INFO };

/* Words r->err: fmt with one %s, given detail (NULL: ""). */
static inline void set_err(store_result *r, const char *fmt, const char *detail) {
  snprintf(r->err, sizeof r->err, fmt, detail ? detail : "");
}

#endif
