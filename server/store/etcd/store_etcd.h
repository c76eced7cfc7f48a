/* store_etcd.h: what the files of the etcd store share. It is not an
 * interface of picketd: store.h is, through the backend table at the end
 * of store_etcd.c. Each family of calls has a file of its own behind one
 * entry point here (locks.c, semaphore.c, rwlock.c, admin.c), as do the
 * release feed (feed.c) and the lock-event follower (store_events.c).
 *
 * The data model is in docs/etcd-design.md. Every key is the key prefix,
 * one letter for what it holds, a slash and the name:
 *   P l/NAME   a lock's grant (JSON, on the grant's etcd lease; its
 *              create_revision is the fence)
 *   P f/NAME   put with every grant, no lease: its mod_revision is the
 *              last fence issued
 * and the keys that the files below add, each documented in its file. */
#ifndef PICKETD_STORE_ETCD_H
#define PICKETD_STORE_ETCD_H

#include <jansson.h>

#include "backend.h"
#include "etcd_client.h"

/* Set by store_etcd_init before any other call; read-only afterwards. */
extern const config *store_etcd_cfg;
extern etcd_client_opts store_etcd_opts;

/* Room for any key of the model: the prefix, a kind letter, a name and a
 * suffix of up to 64 bytes (a slot, a lease id). */
#define STORE_ETCD_KEY_MAX (PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 72)

/* The calling thread's client, made on first use and freed by
 * store_thread_done; NULL with r->err set. */
etcd_client *store_etcd_client(store_result *r);
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

/* ---- grant.c: one lease on one key (locks, permits, read/write leases) -- */

/* "out of memory" in r->err: STORE_EREPLY. */
store_status store_etcd_no_memory(store_result *r);
/* The TTL (s) that a grant or renewal at `now` (unix ms) gets for ttl_ms
 * under the cap (unix ms; 0: none): ttl_ms rounded up, cut to the cap
 * rounded down, so no expiry runs past it. 0 when the cap has passed; -1
 * when what is left of it is shorter than etcd's shortest lease. */
int64_t store_etcd_ttl_under_cap(int64_t ttl_ms, int64_t cap, int64_t now);
/* Grants a grant's etcd leases: *L of ttl_s (*given_s what etcd gave) and,
 * with a lock-delay, *D of that plus the delay (else 0). ETCD_OK, or a
 * code with none left granted. */
int store_etcd_leases_grant(etcd_client *c, int64_t ttl_s, int64_t delay_ms, int64_t *L,
                            int64_t *given_s, int64_t *D);
/* Revokes L and D (0: none), best effort. */
void store_etcd_leases_revoke(etcd_client *c, int64_t L, int64_t D);
/* Seconds left of etcd lease id: at least 1 (it was live a moment ago). */
int64_t store_etcd_left_s(etcd_client *c, int64_t id);
/* A live grant of op's lease at `key` (its delay key `dkey`), as read in
 * kv and g, gets op->ttl_ms from now: kept alive when its etcd lease has
 * that TTL, else moved to new ones, never past its cap; `renewal` counts
 * it in the grant. Sets r->fence, ttl_ms, at and owner. STORE_LOST when it
 * ended meanwhile or is at its cap. */
store_status store_etcd_refresh(etcd_client *c, const store_op *op, const char *key,
                                const char *dkey, const etcd_kv *kv, const store_etcd_grant *g,
                                int renewal, store_result *r);

/* ---- leases.c: a token's lease count (op->token, op->max_leases) ----------
 * Every lease a token holds is one key P q/TOKEN/ENTRY on the lease's own
 * etcd lease, so a lease that ends, however it ends, leaves the count with
 * it (ENTRY is a lock's NAME, as Redis counts a lock once per token; a
 * permit's or a read/write lease's is its kind, NAME and lease id). A
 * grant reads the count first and adds to its txn a compare that no key
 * under P q/TOKEN/ changed since that read (etcd compares a whole prefix),
 * so two grants racing for a token's last lease cannot both succeed. */
typedef struct {
  int on;                           /* 0: this call counts nothing */
  char prefix[STORE_ETCD_KEY_MAX];  /* P q/TOKEN/ */
  char entry[STORE_ETCD_KEY_MAX + PICKET_PROTO_LEASE_LEN + 8]; /* P q/TOKEN/ENTRY */
  int64_t revision;                 /* the revision the count was read at */
} store_etcd_quota;
/* The count entry of op's lease for `token` (op->kind, name and lease say
 * which): out = P q/TOKEN/ENTRY. */
void store_etcd_quota_entry(char *out, size_t cap, const char *token, const store_op *op);
/* Before a grant of op (its kind, name, lease, token, max_leases): reads
 * the token's count. STORE_OK with q filled (q->on 0 when op counts
 * nothing), STORE_EQUOTA when the token holds max_leases already and this
 * is not a retry of one of them, or a failure. */
store_status store_etcd_quota_read(etcd_client *c, const store_op *op, store_etcd_quota *q,
                                   store_result *r);
/* Adds to a grant's txn the compare (nothing counted since the read) at
 * *cmp and the put (this grant counted, on etcd lease `lease`) at *put;
 * returns how many of each it added (0 when !q->on, else 1). A txn that
 * fails on that compare is tried again from store_etcd_quota_read. */
int store_etcd_quota_txn(const store_etcd_quota *q, int64_t lease, etcd_compare *cmp,
                         etcd_op *put);

/* A new grant of op, now: grants its etcd leases (*L for its TTL under its
 * hold cap, and *D with a lock-delay of delay_ms) and fills g (lease id,
 * owner, the token when q counts it, times, TTL). STORE_OK, or a failure
 * with nothing granted. The caller adds its own fields, makes the value
 * (store_etcd_grant_value) and revokes L and D if the grant does not
 * happen. */
store_status store_etcd_grant_new(etcd_client *c, const store_op *op, const store_etcd_quota *q,
                                  int64_t delay_ms, store_etcd_grant *g, int64_t *L, int64_t *D,
                                  store_result *r);

/* Writes a new grant g with txn t (its compares say the place is free, its
 * success branch puts g's keys): 1 granted, with r->fence (the txn's
 * revision, the grant key's create_revision), ttl_ms, at and created set;
 * 0 when a compare failed, *tr holding the failure branch's reads; -1 a
 * failure, *st saying why. Unless granted, g's etcd leases L and D are
 * revoked. The caller clears *tr. */
int store_etcd_grant_commit(etcd_client *c, const etcd_txn_req *t, const store_etcd_grant *g,
                            int64_t L, int64_t D, etcd_txn_result *tr, store_status *st,
                            store_result *r);
/* Ends op's grant at key (its delay key dkey, "" for none), as read in kv
 * and g: one txn guarded by kv's mod_revision deletes them and its place
 * in its token's count, with `also` (NULL, or one more op) in it. Sets
 * r->fence and r->at. STORE_OK, STORE_LOST when it changed or ended
 * meanwhile, or a failure. */
store_status store_etcd_grant_end(etcd_client *c, const store_op *op, const char *key,
                                  const char *dkey, const etcd_kv *kv, const store_etcd_grant *g,
                                  const etcd_op *also, store_result *r);

/* ---- admin.c: why a lease was lost ---------------------------------------
 * A break leaves P b/NAME (who, when, and the broken lease's id) for as
 * long as the lease had left and at least a minute. On a renew or release
 * that found its lease gone: fills r->why ("broken by WHO at TIME") when
 * this lease was broken, else leaves it "". Best effort: a failure to read
 * leaves it "" too. */
void store_etcd_broken_why(etcd_client *c, const char *name, const char *lease, store_result *r);

/* The calls of each family (op->kind tells which), setting op->st and op->r. */
void store_etcd_lock(etcd_client *c, store_op *op);      /* locks.c */
void store_etcd_semaphore(etcd_client *c, store_op *op); /* semaphore.c */
void store_etcd_rwlock(etcd_client *c, store_op *op);    /* rwlock.c */

/* admin.c: store.h's store_list and store_break on etcd. */
store_status store_etcd_list(const char *prefix, int limit, store_cursor *at, int *more,
                             store_result *r);
store_status store_etcd_break(const char *name, const char *who, store_result *r);

/* feed.c: the release feed. */
int store_etcd_feed_start(void (*released)(const char *key));
void store_etcd_feed_want(int on);
void store_etcd_feed_stop(void);

/* store_events.c: the lock-event follower. */
store_events *store_etcd_events_new(const store_events_hooks *hooks, void *ctx);
void store_etcd_events_free(store_events *e);
int store_etcd_events_add(store_events *e, const char *name);
void store_etcd_events_remove(store_events *e, const char *name);
int64_t store_etcd_events_run(store_events *e, int readable);
int store_etcd_events_fd(const store_events *e);

#endif
