/* store.h: the lock-store interface that api.c calls. store_redis.c is the
 * real one (hiredis, the scripts in proto/redis); the fuzzer links a stub
 * instead, so the request path can be fuzzed without a server.
 *
 * Two ways to make a call. The direct calls (store_acquire, ...) run on the
 * calling HTTP worker thread, on that thread's own connection: one round
 * trip, the worker blocked for it. store_submit hands a call to the
 * pipeline thread instead, which sends every call queued since its last
 * round trip in one write on its own connection and reads the replies in
 * order: under load many requests share one round trip, and no worker
 * blocks on Redis (see --redis-pipeline). Results are store codes, never
 * HTTP statuses: api.c alone maps them. */
#ifndef PICKETD_STORE_H
#define PICKETD_STORE_H

#include <stdint.h>

#include "config.h"
#include "picket_proto.h"

typedef enum {
  STORE_OK = 0,       /* granted / renewed / released / inspected / ready */
  STORE_HELD,         /* acquire: another lease holds it (ttl_ms, owner set) */
  STORE_LOST,         /* renew/release: the lease is not held by this id */
  STORE_EREPLY,       /* Redis answered with an error (e.g. WRONGTYPE) */
  STORE_EUNAVAIL,     /* Redis unreachable, timed out, loading, read-only */
  STORE_EMISCONF,     /* Redis evicts keys (maxmemory-policy allkeys-*) */
  STORE_ENOTREPL      /* fewer than --min-replicas acknowledged (grant undone) */
} store_status;

typedef struct {
  int64_t fence;     /* the grant's fence; inspect: the last fence issued */
  int64_t ttl_ms;    /* HELD and inspect: the holder's remaining TTL */
  int held;          /* inspect: 1 when a lease is live */
  int created;       /* acquire: 1 for a new grant, 0 for a same-lease retry */
  int replicas;      /* ready: connected replicas */
  char owner[PICKET_PROTO_OWNER_MAX + 1];
  char err[256];     /* a message for the E* results */
} store_result;

/* Checks Redis once at startup (maxmemory-policy, appendonly) and logs what
 * it finds. Returns 0 to go on (also when Redis is unreachable: picketd
 * serves 503 until it connects), or -1 with a message in err when Redis
 * evicts keys and --allow-eviction is off. Must be called before any other
 * store function; `cfg` must outlive the store. */
int store_init(const config *cfg, char *err, size_t errlen);
/* Closes the calling thread's connection (threads call it before exit). */
void store_thread_done(void);

/* All names and lease ids are validated by the caller. These run on the
 * calling thread's connection. */
store_status store_acquire(const char *name, const char *lease, int64_t ttl_ms, const char *owner,
                           store_result *r);
store_status store_renew(const char *name, const char *lease, int64_t ttl_ms, store_result *r);
store_status store_release(const char *name, const char *lease, store_result *r);
store_status store_inspect(const char *name, store_result *r);
/* PING plus the replica count, for /readyz. */
store_status store_ready(store_result *r);

/* ---- the pipeline --------------------------------------------------- */

typedef enum { STORE_OP_ACQUIRE, STORE_OP_RENEW, STORE_OP_RELEASE, STORE_OP_INSPECT } store_op_kind;

/* One lock call for store_submit. The caller owns it and the strings it
 * points to, and keeps them alive until `done` has been called. */
typedef struct store_op {
  store_op_kind kind;
  const char *name;
  const char *lease;               /* acquire, renew, release */
  const char *owner;               /* acquire; "" for none */
  int64_t ttl_ms;                  /* acquire, renew */
  store_status st;                 /* the outcome, as the direct call returns it */
  store_result r;
  void (*done)(struct store_op *); /* called once, on the pipeline thread */
  void *arg;                       /* the caller's */
  struct store_op *next;           /* the store's */
} store_op;

/* 1 while store_submit takes calls: the pipeline is not off, --min-replicas
 * (which needs a WAIT per call on the caller's connection) is not set, and
 * picketd is not stopping. */
int store_pipeline_open(void);
/* Queues op for the pipeline thread, which sets op->st and op->r and then
 * calls op->done. Returns 0, or -1 when the pipeline is closed (stopping):
 * the caller then runs the call directly. */
int store_submit(store_op *op);
/* Closes the pipeline to new calls and waits until every queued one is
 * done (bounded by --redis-timeout-ms per batch). Call before stopping the
 * HTTP daemon: it must not stop with connections waiting on Redis. */
void store_pipeline_drain(void);
/* Joins the pipeline thread (after the HTTP daemon has stopped). */
void store_stop(void);

#endif
