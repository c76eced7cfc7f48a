/* common.h: what every file of the etcd store shares (common.c), the
 * floor the rest stands on. It is not an interface of picketd: store.h
 * is, through the backend table at the end of store_etcd.c. The files
 * stand in layers, each using only those below it:
 *   store_etcd.c   the dispatcher: the backend table, init, /readyz, and
 *                  where each call goes
 *   pipe.c         a loop's pipe: worker threads that make its calls
 *   locks.c semaphore.c rwlock.c admin.c feed.c store_events.c
 *                  the families of calls, the release feed and the
 *                  lock-event follower, each behind a header of its own
 *   grant.c        one lease on one key (grant.h)
 *   pool.c batch.c the etcd leases grants share (pool.h), and several
 *                  threads' txns in one request (batch.h)
 *   leases.c       a token's lease count (leases.h)
 *   common.c       this header's
 *   etcd_client.c  the client for etcd's JSON gateway
 *
 * The data model is in docs/etcd-design.md. Every key is the key prefix,
 * one letter for what it holds, a slash and the name:
 *   P l/NAME   a lock's grant (JSON, on the grant's etcd lease; its
 *              create_revision is the fence)
 *   P f/NAME   put with every grant, no lease: its mod_revision is the
 *              last fence issued
 * and the keys that the files above add, each documented in its file. */
#ifndef PICKETD_STORE_ETCD_COMMON_H
#define PICKETD_STORE_ETCD_COMMON_H

#include <jansson.h>

#include "backend.h"
#include "etcd_client.h"

/* Set by store_etcd_init before any other call; read-only afterwards. */
extern const config *store_etcd_cfg;
extern etcd_client_opts store_etcd_opts;

/* Room for any key of the model: the prefix, a kind letter, a name and a
 * suffix of up to 64 bytes (a slot, a lease id). */
#define STORE_ETCD_KEY_MAX (PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 72)

/* Makes the key that holds each thread's client: once, at init, before
 * any store_etcd_client. 0, or an errno. */
int store_etcd_clients_init(void);
/* The calling thread's client, made on first use and freed by
 * store_etcd_thread_done; NULL with r->err set. */
etcd_client *store_etcd_client(store_result *r);
/* Frees the calling thread's client (store.h's store_thread_done). */
void store_etcd_thread_done(void);
/* An etcd failure (rc < 0) as a store status, its message in r->err. */
store_status store_etcd_failed(etcd_client *c, int rc, store_result *r);
/* out = P KIND/NAME. */
void store_etcd_key(char *out, size_t cap, char kind, const char *name);
/* A TTL in ms as etcd's whole seconds: rounded up, never shorter than
 * asked, and at least etcd's shortest lease (what etcd would raise it to
 * anyway: then a renewal with the same ttl_ms finds the same TTL and only
 * keeps its lease alive). */
int64_t store_etcd_ttl_s(int64_t ttl_ms);
/* etcd's shortest lease in seconds (1.5 election timeouts, rounded up; 1
 * until known), learned from what etcd gives when asked for less: by a
 * probe at startup (or the next /readyz), and by every lease grant. */
int64_t store_etcd_min_ttl_s(void);
void store_etcd_min_ttl_seen(int64_t asked_s, int64_t given_s);
/* Learns etcd's minimum once, by granting a 1 s lease: at startup and, if
 * etcd did not answer then, at the next /readyz; never on a lock call. */
void store_etcd_min_ttl_learn(etcd_client *c);

/* A lease as its key's JSON value holds it. */
typedef struct {
  char lease[PICKET_PROTO_LEASE_LEN + 1];
  char owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
  char token[72];    /* the token whose max_leases counts it ("": none; store_result.token) */
  int64_t at;        /* grant time (unix ms, picketd's clock) */
  int64_t exp;       /* when its lease ends, as of its last grant or refresh
                        (unix ms, picketd's clock; etcd may keep it longer,
                        never shorter): a listing's TTL, with no call per name */
  int64_t renewals;
  int64_t ttl_ms;    /* what etcd granted, whole seconds */
  int64_t cap;       /* the hold cap: no expiry past it (unix ms; 0: none) */
  int64_t cap_lease; /* a lock's: the etcd lease of its cap key, P c/NAME,
                        which ends at the cap on etcd's clock (0: none) */
  int64_t delay_ms;  /* its lock-delay (0: none) */
  int64_t delay_lease; /* the etcd lease of its delay key (0: none) */
  int64_t limit;     /* a permit's: its semaphore's limit */
  int write;         /* a read/write lease's: 1 a writer */
  int64_t fence;     /* a read lease's: the write epoch it reads (its key's
                        create_revision is not its fence) */
  char value[PICKET_PROTO_VALUE_BYTES_MAX + 1]; /* a lock lease's value (an election's
                                                    leader's; "": none) */
} store_etcd_grant;
/* Parses a grant's value; 0, or -1 when it is not one of picket's. */
int store_etcd_grant_parse(const etcd_kv *kv, store_etcd_grant *g);
/* The JSON value of a grant (malloc'd; the caller frees it), or NULL. */
char *store_etcd_grant_value(const store_etcd_grant *g);
/* Reads one key: 1 with *kv pointing into res (the caller clears res), 0
 * when it does not exist, or a negative etcd code. */
int store_etcd_read(etcd_client *c, const char *key, etcd_op_result *res, etcd_kv **kv);

#endif
