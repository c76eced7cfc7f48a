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
  /* A semaphore's permit (lock is then the semaphore's name): its calls go
   * to /v1/semaphores/. Set at the grant, or by the first renew of a
   * handed-over permit (permit -1 until then); a renewal never changes them
   * after, so reading them while a keeper renews is safe. */
  int sem;
  int64_t permit; /* -1: a lock's lease, or not known yet */
  int64_t limit;  /* 0: a lock's lease, or not known */
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
