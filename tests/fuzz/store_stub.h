/* store_stub.h: control of the in-memory lock store (store_stub.c) that
 * stands in for the Redis store (server/store/redis/) in the fuzz harness.
 * It implements every function of server/store.h with the semantics of the Redis scripts
 * in proto/redis (fences only grow, a same-lease acquire is idempotent,
 * renew and release need the live lease), on a virtual clock so that a run
 * is deterministic, and it can be told to fail the way Redis fails, so the
 * fuzzer reaches api.c's error paths too.
 *
 * Single-threaded: the fuzz harness calls api.c from one thread. */
#ifndef PICKET_FUZZ_STORE_STUB_H
#define PICKET_FUZZ_STORE_STUB_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* How a store call fails. */
typedef enum {
  STUB_FAULT_NONE = 0,
  STUB_FAULT_UNAVAIL,       /* STORE_EUNAVAIL with a transport message */
  STUB_FAULT_REPLY,         /* STORE_EREPLY (a WRONGTYPE-style answer) */
  STUB_FAULT_MISCONF,       /* STORE_EMISCONF (evicting policy) */
  STUB_FAULT_NOTREPL,       /* STORE_ENOTREPL (WAIT fell short; grant undone) */
  STUB_FAULT_UNAVAIL_QUIET, /* STORE_EUNAVAIL with an empty message */
  STUB_FAULT_ODD_STATUS,    /* a status this call never returns (HELD from renew...) */
  STUB_FAULT_LONG_MESSAGE,  /* STORE_EREPLY with a message that fills store_result.err */
  STUB_FAULT_COUNT
} stub_fault;

/* Which store calls of one request fail. */
typedef enum {
  STUB_WHEN_EVERY = 0,
  STUB_WHEN_FIRST,       /* the first call only */
  STUB_WHEN_SECOND,      /* the second call only (a waiting acquire's retry) */
  STUB_WHEN_AFTER_FIRST, /* every call but the first */
  STUB_WHEN_COUNT
} stub_when;

/* Empties the store and sets the virtual clock to its start. */
void stub_reset(void);
/* Starts one request: its calls are counted from zero and fail as told. */
void stub_request_begin(stub_fault fault, stub_when when);
/* The next call that names a lock finds it held by a foreign lease (32
 * 'f's) whose owner is the `len` bytes at `owner` (any bytes: Redis keeps
 * whatever was written, and store_redis.c copies up to
 * PICKET_PROTO_OWNER_BYTES_MAX of them), for `ttl_ms` more, or with no
 * expiry at all when ttl_ms < 0 (a key someone PERSISTed: PTTL answers -1),
 * unless a lease already holds it. */
void stub_preheld(const char *owner, size_t len, int64_t ttl_ms);
/* Moves the virtual clock forward (holders expire). */
void stub_advance_ms(int64_t ms);
/* Store calls made since stub_request_begin. */
int stub_calls(void);
/* 1 when the last acquire that succeeded made a new grant, 0 when it
 * refreshed the caller's live one (store_result.created). */
int stub_last_created(void);

/* What the store holds for `name`: returns 1 and fills the fields when the
 * lock is known (fence counter, whether a live lease holds it and that
 * lease), 0 when it has never been named. `lease` needs 33 bytes. */
int stub_lookup(const char *name, int64_t *fence, int *held, char *lease);

#endif
