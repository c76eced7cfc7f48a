/* internal.h: what the files of libpicket share and users must not see: the
 * lease struct (the keeper updates it in place) and the hooks the keeper
 * needs on a client (a private copy, and a flag that aborts a request in
 * flight so that stopping a keeper never waits for a slow server).
 * Symbols here are picket__* and hidden. */
#ifndef PICKET_INTERNAL_H
#define PICKET_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "picket/picket.h"

/* What a lease is of (picket_lease.kind). */
enum { PICKET__KIND_LOCK, PICKET__KIND_SEM, PICKET__KIND_RW };

struct picket_lease {
  char lock[PICKET_NAME_MAX + 1];
  char id[PICKET_LEASE_ID_LEN + 1];
  int64_t fence;
  char fence_token[PICKET_FENCE_TOKEN_MAX + 1]; /* "" when picketd signs no fences */
  int has_owner;
  char owner[PICKET_OWNER_BYTES_MAX + 1];
  /* Written by whichever thread renews, read by any: atomics, so that
   * picket_lease_valid() is safe while a keeper runs. */
  _Atomic int64_t ttl_ms;
  _Atomic int64_t sent_ms;     /* when the last successful grant/renew was sent */
  _Atomic int64_t deadline_ms; /* local deadline; 0 when unknown */
  atomic_int capped;           /* a grant or renewal was cut by max_hold_ms */
  /* What the lease is of, which says where its calls go: a lock's
   * (/v1/locks/), a semaphore's permit (/v1/semaphores/; lock is then the
   * semaphore's name) or a read/write lock's read or write lease
   * (/v1/rwlocks/; lock is the rwlock's name). A permit's slot, and a
   * handed-over rwlock lease's mode, are set at the grant or by the first
   * renew (-1 until then); a renewal never changes them after, so reading
   * them while a keeper renews is safe. */
  int kind;       /* PICKET__KIND_* */
  int64_t permit; /* -1: not a permit, or not known yet */
  int64_t limit;  /* 0: not a permit, or not known */
  int mode;       /* PICKET_MODE_READ/WRITE; -1: not an rwlock's, or not known yet */
  char fence_lock[PICKET_NAME_MAX + 1]; /* "" while unknown */
};

/* A new client with the same server and options as `c`; NULL on failure. */
picket_client *picket__client_clone(const picket_client *c);
/* While *flag is non-zero, requests on `c` stop with PICKET_ECANCELED.
 * flag NULL removes the hook. */
void picket__client_set_abort(picket_client *c, const atomic_int *flag);
/* Overrides the client's retry count (the keeper retries by itself). */
void picket__client_set_retries(picket_client *c, int retries);
/* Backoff before retry number `attempt` (0-based): capped exponential with
 * jitter, from the client's options. */
int64_t picket__client_backoff_ms(picket_client *c, int attempt);
/* picket_renew, but no attempt runs past until_ms (monotonic; 0: no
 * bound), so a keeper learns in time that its deadline came. */
int picket__renew(picket_client *c, picket_lease *l, int64_t ttl_ms, int64_t until_ms);

#endif
