/* redis.h: what every file of the Redis store's calls shares about one
 * call in flight (server/store/redis/: lease_count.c, codec.c, conn.c,
 * redirect.c, direct.c, operators.c, pipe.c and store_redis.c): the
 * phases of a call and the helper that words a failure. No code of its
 * own, so it sits below every file that includes it. */
#ifndef PICKETD_REDIS_H
#define PICKETD_REDIS_H

#include <stdio.h>

#include "store.h"

/* Where a call is: its script (PHASE_CALL); under Redis Cluster the take
 * of its token's lease count before it, or a count update of its own
 * (lease_count.c); or a pipe's WAIT entry, which is no call (pipe.c). */
enum { PHASE_CALL = 0, PHASE_TAKE, PHASE_NOTE, PHASE_WAIT /* a pipe's WAIT entry, not a call */ };

/* Words r->err: fmt with one %s, given detail (NULL: ""). */
static inline void set_err(store_result *r, const char *fmt, const char *detail) {
  snprintf(r->err, sizeof r->err, fmt, detail ? detail : "");
}

#endif
