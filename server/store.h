/* store.h: the lock-store interface that api.c calls. store_redis.c is the
 * real one (hiredis, the scripts in proto/redis); the fuzzer links a stub
 * instead, so the request path can be fuzzed without a server.
 *
 * Calls are made from HTTP worker threads; an implementation keeps one
 * connection per calling thread, so calls never contend on a lock. Results
 * are store codes, never HTTP statuses: api.c alone maps them. */
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

/* All names and lease ids are validated by the caller. */
store_status store_acquire(const char *name, const char *lease, int64_t ttl_ms, const char *owner,
                           store_result *r);
store_status store_renew(const char *name, const char *lease, int64_t ttl_ms, store_result *r);
store_status store_release(const char *name, const char *lease, store_result *r);
store_status store_inspect(const char *name, store_result *r);
/* PING plus the replica count, for /readyz. */
store_status store_ready(store_result *r);

#endif
