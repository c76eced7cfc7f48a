/* store.h: the lock-store interface, the one seam between picketd's HTTP
 * side (api.c, wait.c, http.c, loop.c, which name no backend) and where
 * locks are kept. Each backend implements it in a folder of its own under
 * server/store/ (store/backend.h is the table each one fills, and
 * store/store.c picks one by flag at startup); the fuzzer links an
 * in-memory store instead
 * (tests/fuzz/store_stub.c), so the request path can be fuzzed without a
 * server.
 *
 * Two ways to make a call. A direct call (store_run) runs on the calling
 * thread's own connection: one round trip (and, under --min-replicas,
 * the replicas' acknowledgement), the thread blocked for it. A store_pipe is an event
 * loop's pipelined connection instead (loop.c): the loop appends every call
 * it meets in one pass, writes them at once, and completes each when its
 * reply arrives, so under load many requests share one round trip and no
 * loop waits on the store (store_pipeline_enabled says whether the
 * backend pipelines; its own flag may turn it off). Results are store codes,
 * never HTTP statuses: api.c alone maps them. */
#ifndef PICKETD_STORE_H
#define PICKETD_STORE_H

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "picket_proto.h"

typedef enum {
  STORE_OK = 0,       /* granted / renewed / released / inspected / ready */
  STORE_HELD,         /* acquire: another lease holds it (ttl_ms, owner set) */
  STORE_DELAYED,      /* acquire: the last lease expired and its lock-delay runs ttl_ms more */
  STORE_LOST,         /* renew/release: the lease is not held by this id */
  STORE_EREPLY,       /* the store answered with an error (e.g. a key of the wrong type) */
  STORE_EUNAVAIL,     /* the store unreachable, timed out, still loading, or read-only */
  STORE_EMISCONF,     /* the store is set up to evict keys, which could lose fences */
  STORE_EFULL,        /* the store is out of memory and refuses writes */
  STORE_ENOTREPL,     /* fewer than --min-replicas acknowledged (grant undone) */
  STORE_ETAMPERED,    /* another writer changed a lock's fence state beyond a certain repair */
  STORE_EQUOTA,       /* acquire: the op's token holds its max_leases (nothing granted) */
  STORE_ELIMIT,       /* semaphore acquire: live permits use another limit (r.limit) */
  STORE_EARG          /* list: a cursor this store did not write for this prefix */
} store_status;

/* One live permit of a semaphore, as inspect sees it. */
typedef struct {
  int64_t permit;   /* the slot, 0..limit-1 */
  int64_t fence;
  int64_t ttl_ms;   /* left; 0 while its lock-delay runs */
  int64_t delay_ms; /* its lock-delay left (0: none) */
  char owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
} store_permit;

/* Where a listing goes on, as the backend wrote it (store/cursor.h): text
 * that the HTTP side never parses, only hands back (inside the API's own
 * cursor). "" is the first page. The backend reads back only what it could
 * have written for the same prefix (else STORE_EARG), so a cursor made up
 * by a client starts a listing somewhere in that prefix or nowhere. */
#define STORE_CURSOR_MAX (PICKET_PROTO_NAME_MAX + 16)
typedef struct {
  char text[STORE_CURSOR_MAX];
} store_cursor;

/* One held name in a listing (store_list). */
typedef struct {
  char kind;         /* 'l' a lock, 's' a semaphore, 'r' a read/write lock */
  char name[PICKET_PROTO_NAME_MAX + 1];
  int64_t holders;   /* live leases: 1 for a lock or a writer, else permits or readers */
  int64_t fence;     /* a lock's or writer's fence; a read lock's last write's; 0 for a semaphore */
  int64_t ttl_ms;    /* until its last lease expires */
  int64_t at;        /* a lock's or writer's grant (unix ms; 0: unknown) */
  int64_t renewals;  /* ...and how often it was renewed */
  int64_t limit;     /* a semaphore's limit */
  char owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
} store_entry;

typedef struct {
  int64_t fence;     /* the grant's fence; inspect: the last fence issued */
  int64_t ttl_ms;    /* acquire and renew OK: the TTL given (the hold cap may cut it);
                        HELD and inspect: the holder's remaining TTL; DELAYED: the delay's */
  int64_t delay_ms;  /* inspect: an expired lease's lock-delay still to run (0: none) */
  int held;          /* inspect: 1 when a lease is live */
  int created;       /* acquire: 1 for a new grant, 0 for a same-lease retry */
  int replicas;      /* ready: connected replicas */
  int64_t permit;    /* semaphore acquire and renew OK: the slot */
  int64_t limit;     /* semaphore: ELIMIT: the live permits' limit; inspect: the limit (0: none live) */
  int64_t live;      /* semaphore inspect: live permits */
  store_permit *permits; /* semaphore inspect: the first npermits of them, lowest slot
                            first; malloc'd: the caller frees it (store_result_clear) */
  int npermits;
  int held_by;       /* rwlock HELD: 0 a writer, 1 readers, 2 a writer waits, 3 readers
                        at --max-readers (a read acquire) */
  int64_t waiting;   /* rwlock inspect: writers waiting */
  int64_t at;        /* inspect, lock renew and release, break: the (broken) lease's
                        grant time (unix ms, the store's clock; 0: unknown or none) */
  int64_t renewals;  /* inspect: how often the lease was renewed */
  char why[160];     /* renew or release LOST: why, when known ("broken by ... at ...") */
  char token[72];    /* break: the token whose max_leases counted the broken lease, or "" */
  char next[PICKET_PROTO_NAME_MAX + 3]; /* list: the index member to resume after, "" at the end */
  int more;          /* list by store_run: 1 when another page follows (op->cursor) */
  json_t *body;      /* ready by store_run: store_ready's body (store_result_clear frees it) */
  store_entry *entries; /* list: the page; malloc'd, freed by store_result_clear */
  int nentries;
  char owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
  char *value;       /* lock inspect: the lease's value (an election's leader's), or NULL
                        for none; malloc'd, freed by store_result_clear */
  char err[256];     /* a message for the E* results */
} store_result;

/* Starts the backend the flags choose and checks the store once (whatever
 * could cost a fence, such as a store set up to evict keys), and logs what
 * it serves from and what it finds. Returns 0 to go on (also when the store
 * is unreachable: picketd serves 503 until it connects), or -1 with a
 * message in err when the store could lose fences and --allow-eviction is
 * off. Must be called before any other store function; `cfg` must outlive
 * the store. */
int store_init(const config *cfg, char *err, size_t errlen);
/* Closes the calling thread's connection (threads call it before exit). */
void store_thread_done(void);

/* Whether lock calls can be served now, for /readyz: STORE_OK with *body
 * the reply (a JSON object the caller owns: "status": "ready", "replicas"
 * and the backend's own fields on where lock calls go). With detail 0 the
 * body holds nothing an anonymous probe may not see (no addresses, no
 * messages from the backend). Otherwise the failure, r->err saying why. */
store_status store_ready(int detail, store_result *r, json_t **body);

/* Stops what store_init started (the backend's topology threads); after
 * every other thread that calls the store has stopped. */
void store_stop(void);

/* ---- the release feed --------------------------------------------------- */

/* What wakes waiting acquires at once: the store reports each released
 * lock, semaphore or read/write lock by its key (api_call.key), from a
 * thread of its own. A NULL key means anything may have been released
 * (the feed was not listening for a while): every waiter at the head of
 * its queue should retry once. Without a report a waiter still retries at
 * its holder's expiry, so a feed that falls silent costs latency, never a
 * lock. Started once, after store_init: 0, or -1. */
int store_feed_start(void (*released)(const char *key));
/* Somebody waits (1) or nobody does any more (0): a feed may stop
 * listening while nobody waits (after a while, so that a lock waited on
 * now and then does not make it start and stop each time). */
void store_feed_want(int on);
/* Stops the feed's thread; no report comes after it returns. */
void store_feed_stop(void);

/* ---- pipelined calls -------------------------------------------------- */

typedef enum {
  STORE_OP_ACQUIRE, STORE_OP_RENEW, STORE_OP_RELEASE, STORE_OP_INSPECT,
  /* the same four on a semaphore: one permit */
  STORE_OP_SEM_ACQUIRE, STORE_OP_SEM_RENEW, STORE_OP_SEM_RELEASE, STORE_OP_SEM_INSPECT,
  /* and on a read/write lock: a read or write lease */
  STORE_OP_RW_ACQUIRE, STORE_OP_RW_RENEW, STORE_OP_RW_RELEASE, STORE_OP_RW_INSPECT,
  STORE_OP_RW_FORGET, /* a writer stopped waiting: new readers may enter */
  STORE_OP_BREAK,     /* an operator ends a lock's lease (store_break) */
  STORE_OP_LIST,      /* a page of one index (store_list) */
  STORE_OP_READY,     /* whether calls can be served (store_ready; op->limit: detail) */
  STORE_OP_KINDS      /* backends number their own kinds from here */
} store_op_kind;

/* The lock call a semaphore call is the counterpart of (itself for a lock
 * call): what waits, counts and undoes the same way. */
static inline store_op_kind store_op_base(store_op_kind kind) {
  /* (a forget writes nothing a count or a replica guard cares about;
   * a break and a list are their own) */
  if (kind >= STORE_OP_RW_FORGET) return kind == STORE_OP_RW_FORGET ? STORE_OP_INSPECT : kind;
  return (store_op_kind)(kind % 4);
}
/* The release of the same resource as `kind`. */
static inline store_op_kind store_op_release_of(store_op_kind kind) {
  return (store_op_kind)(kind - kind % 4 + STORE_OP_RELEASE);
}
/* Frees what a result owns (an inspect's permits and value, a list's
 * entries). */
static inline void store_result_clear(store_result *r) {
  free(r->value);
  r->value = NULL;
  free(r->permits);
  r->permits = NULL;
  r->npermits = 0;
  free(r->entries);
  r->entries = NULL;
  r->nentries = 0;
  json_decref(r->body);
  r->body = NULL;
}

/* The backend's own state of a call in flight; nothing outside the
 * backend reads it (store/<backend>/ casts it to its own struct, with a
 * static assert that it fits). A zeroed area (a store_op made with a
 * designated initializer) is a fresh call to every backend. */
#define STORE_OP_PRIVATE_BYTES 64
typedef union {
  char bytes[STORE_OP_PRIVATE_BYTES];
  int64_t align_i;
  void *align_p;
} store_op_private;

/* One lock call, direct (store_run) or for a store_pipe. The caller owns
 * it and the strings it points to, and keeps them alive until store_run
 * returns or `done` has been called.
 *
 * A token's lease count: with `token` set and max_leases > 0, an acquire
 * that would make a new grant while the token holds max_leases leases
 * ends in STORE_EQUOTA, and the grant, renew and release keep the count.
 * The backend keeps it in the store, with the lock call itself where it
 * can; where the count lives apart from the lock, the backend adds a call
 * of its own before a grant and after a renew or release (the caller sees
 * one call either way). */
typedef struct store_op {
  store_op_kind kind;
  const char *name;
  const char *lease;               /* acquire, renew, release */
  const char *owner;               /* acquire; "" for none */
  /* A lock lease's value (an election's leader's, docs/elections.md):
   * acquire: kept in a new grant (NULL: none); renew: set when non-NULL
   * ("" clears it: a proclaim), with ttl_ms 0 meaning the TTL the lease
   * has. Never on a semaphore's or read/write lock's call. */
  const char *value;
  int64_t ttl_ms;                  /* acquire, renew */
  int64_t lock_delay_ms;           /* acquire: kept off the lock this long after an expiry */
  int64_t max_hold_ms;             /* acquire: no expiry past grant + this (0: no cap) */
  int64_t limit;                   /* semaphore acquire: its limit; inspect (both): leases listed */
  int write;                       /* rwlock acquire: 1 write, 0 read */
  int64_t wait_ms;                 /* rwlock write acquire: how long it will wait (0: no wait) */
  const char *who;                 /* break: who breaks it */
  int64_t fence;                   /* break: only the grant of this fence (0: whoever holds it) */
  const char *after;               /* list: the index member to resume after ("": the first) */
  int index_slot;                  /* list: which of the store's indexes (0: its only one) */
  store_cursor *cursor;            /* a list's (STORE_OP_LIST by store_run): where it starts;
                                      on return where the next page starts */
  const char *token;               /* whose lease count this lease is in, or NULL */
  int64_t max_leases;              /* ...and its limit (0: none, nothing counted) */
  store_status st;                 /* the outcome */
  store_result r;
  void (*done)(struct store_op *); /* called once, on the pipe's thread */
  void *arg;                       /* the caller's */
  /* the runner's (call.c): the caller's done, and the loop it runs on */
  void (*then)(struct store_op *);
  void *loop;
  /* the store's: */
  struct store_op *next;           /* the store's queue link while the call is in flight */
  store_op_private priv;           /* the backend's */
} store_op;

/* Runs op on the calling thread's own connection (one round trip, the
 * thread blocked for it; with --min-replicas also the replicas'
 * acknowledgement) and sets
 * op->st and op->r. op->done is not called. A STORE_OP_LIST is
 * store_list(op->name as the prefix, op->limit, op->cursor, &op->r.more),
 * a STORE_OP_BREAK store_break(op->name, op->who, op->fence) and a STORE_OP_READY
 * store_ready(op->limit, &op->r, &op->r.body): so that every call
 * can be handed to one runner (call.c) as an op. Loops never call this:
 * call_submit does, on a thread that may block. */
void store_run(store_op *op);

/* A pipelined connection, used by one thread only. */
typedef struct store_pipe store_pipe;

/* 1 when lock calls may be pipelined: the backend pipelines and its own
 * flag does not turn it off. (With --min-replicas a pipe asks the
 * replicas once per batch that holds a grant or a renewal, and holds only
 * those calls for their answer.) */
int store_pipeline_enabled(void);
/* A pipe with no connection yet (it opens on the first call); NULL when out
 * of memory. */
store_pipe *store_pipe_new(void);
/* Starts p's connection now, so that its first call does not wait for the
 * connect and its setup (the loop never waits for them: a backend opens
 * the connection without blocking and holds the calls made meanwhile
 * behind the setup). 0, or -1 when the store cannot be reached now (the
 * next call tries again). */
int store_pipe_connect(store_pipe *p);
/* Completes any call still waiting with STORE_EUNAVAIL, closes the
 * connection and frees p. Accepts NULL. */
void store_pipe_free(store_pipe *p);
/* Queues op's command; 0, after which op->done is called once, from
 * store_pipe_read, _expire or _free (never from inside this call), or -1
 * when the call is over at once (the store unreachable or misconfigured, or a
 * name too long for a key): op->st and op->r say why, and done is not
 * called. Calls already waiting may be completed (failed) meanwhile when
 * the connection breaks. */
int store_pipe_append(store_pipe *p, store_op *op);
/* Writes every command appended since the last flush, in one write. */
void store_pipe_flush(store_pipe *p);
/* The socket to watch for replies (and for the store closing it), or -1; *opens
 * gets how many times the pipe has connected, which tells a new socket
 * from an old one with the same number. */
int store_pipe_fd(const store_pipe *p, unsigned long *opens);
/* The socket is readable: completes each call whose reply is in. */
void store_pipe_read(store_pipe *p);
/* Milliseconds until the oldest waiting call times out (0: now), or -1
 * when nothing waits. */
int64_t store_pipe_timeout_ms(const store_pipe *p);
/* Past the oldest call's timeout (the backend's flag): fails every waiting call with
 * STORE_EUNAVAIL and drops the connection (a late reply would be out of
 * step). Does nothing before that. */
void store_pipe_expire(store_pipe *p);

/* ---- operators: listing and breaking ---------------------------------- */


/* Up to `limit` held names that start with `prefix`, from *at on, into
 * r->entries (the caller frees them with store_result_clear). On return
 * *at is where the next page starts, and *more is 0 when there is none.
 * A backend may come back with a short page and *more set (one that
 * keeps many indexes bounds how many one call looks at). Names that
 * expired are dropped from the index as they are met. */
store_status store_list(const char *prefix, int limit, store_cursor *at, int *more,
                        store_result *r);

/* Ends lock `name`'s lease now and moves its fence on, in one store
 * call: r->held 1 when a live lease ended, r->fence the
 * new fence, r->owner the broken lease's, r->at the time. `who` is shown
 * to the broken holder when it renews or releases. With --min-replicas the
 * break is acknowledged by the replicas first (else STORE_ENOTREPL: it
 * happened on the primary but may not survive a failover).
 *
 * With fence > 0 only the grant of that fence is broken: when the lock is
 * held (or in the lock-delay of) a grant of another fence, STORE_HELD
 * with r->fence, r->owner and r->ttl_ms that grant's, and nothing changed; when no
 * grant is there, as a break of a free lock. So a retry of a break whose
 * reply was lost never ends the next holder's lease, and the broken
 * holder's reason (who broke it) is kept. */
store_status store_break(const char *name, const char *who, int64_t fence, store_result *r);

/* ---- lock events (events.c) --------------------------------------------- */

/* One event of a watched lock, as the store tells it. */
typedef struct {
  char kind;        /* 'g' granted, 'n' renewed, 'r' released, 'b' broken */
  int64_t fence;    /* the lease's fence (a break of a free lock: 0) */
  int64_t n;        /* granted, renewed: the TTL given (ms); broken: the next fence */
  int64_t time;     /* when (unix ms, the store's clock) */
  const char *text; /* granted: the owner; broken: who broke it; else "" */
} store_event;

/* What a store_events calls back, on the thread that runs it. */
typedef struct {
  /* name's events are followed from now on: a read of the lock made after
   * this call misses none of them */
  void (*ready)(void *ctx, const char *name);
  void (*event)(void *ctx, const char *name, const store_event *ev);
  /* events may have been missed (the connection was lost): no name is
   * followed until it is ready again, which the store sees to itself */
  void (*lost)(void *ctx);
} store_events_hooks;

/* The events of a set of locks, followed for one thread (events.c's): a
 * subscription of its own, which that thread drives with
 * store_events_run and polls on store_events_fd. */
typedef struct store_events store_events;

/* A follower of no lock yet, or NULL (out of memory). */
store_events *store_events_new(const store_events_hooks *hooks, void *ctx);
/* Frees e (and its connection). Accepts NULL. */
void store_events_free(store_events *e);
/* Follows lock `name` too (ready is called once it is): 0, or -1 (out of
 * memory). */
int store_events_add(store_events *e, const char *name);
/* Stops following `name`. */
void store_events_remove(store_events *e, const char *name);
/* Connects, follows what was added, reads what came in when `readable`
 * (the fd polled readable), and keeps the subscription alive; calls the
 * hooks. Returns when it wants to run again (monotonic ms) at the latest. */
int64_t store_events_run(store_events *e, int readable);
/* The socket to poll for input, or -1. */
int store_events_fd(const store_events *e);

#endif
