/* etcd_client.h: a small client for etcd's v3 JSON gateway, for the etcd
 * lock store (issue 29). It speaks plain C structs: no JSON, no base64 and
 * no HTTP status leaves this module; results are ETCD_* codes plus a
 * message on the handle, as the rest of picketd reports errors. Its
 * txns go over gRPC directly when they can (etcd_grpc.h says why), and
 * through the gateway when they cannot: with etcd auth, or when gRPC
 * failed at that member (then for a second).
 *
 * Two kinds of handle. An etcd_client makes unary calls (txn, range,
 * leases, status) on one keep-alive connection and is used by one thread at
 * a time. An etcd_watch is one streaming watch on a connection of its own,
 * read by one thread (a store's watch thread); any thread may stop it.
 *
 * Keys and values passed in are NUL-terminated text (picket's keys and JSON
 * values never hold a NUL); keys and values handed back are NUL-terminated
 * copies that also carry their length. */
#ifndef PICKETD_ETCD_CLIENT_H
#define PICKETD_ETCD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "etcd_result.h"

/* A static name for a code ("ETCD_EUNAVAIL"). */
const char *etcd_strerror(int code);

/* At most this many endpoints (--etcd). */
#define ETCD_ENDPOINTS_MAX 16

typedef struct etcd_client etcd_client;
typedef struct etcd_watch etcd_watch;

/* Options; the strings are copied by etcd_client_new (the caller keeps
 * its own). Zero or NULL means the default. */
typedef struct {
  const char *endpoints; /* "http://127.0.0.1:2379[,https://h:p...]" (required) */
  long timeout_ms;       /* one call, every endpoint it tries included (default 5000) */
  long attempt_ms;       /* one try at one endpoint, when there are several
                            (default: half of timeout_ms, at most 1000) */
  const char *ca_file;   /* https: the CA that signed etcd's certificates */
  const char *cert_file; /* https: this client's certificate and key (mutual TLS) */
  const char *key_file;
  const char *user; /* etcd auth: user and password (both, or neither) */
  const char *password;
  int first_endpoint; /* where the first call (or a watch) starts: an index into
                         endpoints, modulo their number (default 0) */
  int no_grpc;        /* 1: txns through the JSON gateway too (etcd_grpc.h) */
} etcd_client_opts;

/* A new client. Returns NULL with the reason in err when the options are
 * bad (no endpoint, a URL that is not http(s)://, a user without a
 * password) or memory ran out. Nothing is sent yet: the first call
 * connects (and authenticates). The caller frees it with etcd_client_free. */
etcd_client *etcd_client_new(const etcd_client_opts *o, char *err, size_t errlen);
/* Frees the client, its connection and its copies of the secrets (wiped
 * first). NULL is fine. */
void etcd_client_free(etcd_client *c);
/* The last call's failure, for a person: "" after a success. Never holds
 * a password or a token. Valid until the next call on the handle. */
const char *etcd_client_errstr(const etcd_client *c);
/* The endpoint that answered the last call (or was tried last). */
const char *etcd_client_endpoint(const etcd_client *c);

/* ---- key-value (the types: etcd_result.h) ------------------------------ */


/* One atomic txn. ETCD_OK with *out filled (the caller clears it with
 * etcd_txn_result_clear, also after a failure, when nothing is in it).
 *
 * A txn that failed over to another endpoint (the first one timed out or
 * lost its leader after the request was sent) may have been applied twice:
 * write txns that must not be, guard themselves with compares (picket's
 * acquire compares create_revision == 0, so its second run fails and reads
 * the first one's grant). ENOTFOUND: a put named a lease that is gone. */
int etcd_txn(etcd_client *c, const etcd_txn_req *t, etcd_txn_result *out);
/* n independent txns (1 to ETCD_TXN_OPS_MAX) in one request and one Raft
 * proposal: nested in the success branch of a txn with no compare, each
 * with its own compares and branches, *outs[i] its outcome (all at one
 * revision). No two of them may write the same key (etcd refuses the
 * whole request: EREPLY or EINVAL), and a failure of any (a put naming a
 * lease that is gone: ENOTFOUND) fails them all: the caller then makes
 * them one by one. The caller clears every outs[i]. */
int etcd_txn_batch(etcd_client *c, const etcd_txn_req *const *ts, int n, etcd_txn_result *outs);

/* A range read (op->kind must be ETCD_OP_RANGE), linearizable. *out is
 * filled as for a txn's range op, its revision the header's; the caller
 * clears it. ECOMPACTED: op->revision is compacted. */
int etcd_range(etcd_client *c, const etcd_op *op, etcd_op_result *out);

/* ---- leases -------------------------------------------------------------- */

/* A new lease of ttl_s seconds; etcd raises a TTL under its minimum (which
 * depends on its election timeout: 2 s with the defaults), and *granted_s
 * says what it gave. */
int etcd_lease_grant(etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_s);
/* Ends a lease and deletes every key attached to it. ENOTFOUND: gone already. */
int etcd_lease_revoke(etcd_client *c, int64_t id);
/* One keepalive: the lease's TTL restarts at its granted TTL, which *ttl_s
 * returns; 0 means the lease is gone (expired or revoked). */
int etcd_lease_keepalive_once(etcd_client *c, int64_t id, int64_t *ttl_s);
/* What is left of a lease: *ttl_s seconds (-1: gone) of *granted_s. */
int etcd_lease_timetolive(etcd_client *c, int64_t id, int64_t *ttl_s, int64_t *granted_s);

/* ---- the cluster --------------------------------------------------------- */

typedef struct {
  uint64_t member_id; /* the member that answered */
  uint64_t leader;    /* the leader it knows (0: none) */
  uint64_t raft_term;
  int64_t raft_index;
  int64_t db_size;        /* bytes of its backend file */
  int64_t db_size_in_use; /* ...of which in use */
  char version[32];
} etcd_status_info;

/* The status of the member that answers (POST /v3/maintenance/status). */
int etcd_status(etcd_client *c, etcd_status_info *out);

typedef struct {
  uint64_t id;
  char name[64];
  char client_url[256]; /* its first client URL ("" before it started) */
  int learner;
} etcd_member;

/* The cluster's members: *members is a malloc'd array of *n (the caller
 * frees it with free()). */
int etcd_member_list(etcd_client *c, etcd_member **members, int *n);

/* ---- watches ------------------------------------------------------------- */

typedef enum { ETCD_EVENT_PUT, ETCD_EVENT_DELETE } etcd_event_type;

typedef struct {
  etcd_event_type type;
  char key[ETCD_KEY_MAX + 1];
  size_t key_len;
  int64_t mod_revision;    /* the revision of this put or delete */
  int64_t create_revision; /* PUT: the key's; DELETE: 0 */
  int64_t version;         /* PUT: the key's; DELETE: 0 */
  int64_t lease;           /* PUT: the key's lease (0: none) */
} etcd_event;

/* Opens a watch of `key` (or of every key under it, with prefix) from
 * start_revision (0: from now) on a connection of its own, and returns
 * once etcd says the watch is in place, within o->timeout_ms. The options
 * are copied. ETCD_OK with *out set, which the caller frees with
 * etcd_watch_free; else a code with the reason in err and *out NULL.
 *
 * A start_revision that etcd has compacted still opens: the first
 * etcd_watch_next returns ETCD_ECOMPACTED, so a caller handles compaction
 * in one place whether it happens at open or later. */
int etcd_watch_open(const etcd_client_opts *o, const char *key, int prefix, int64_t start_revision,
                    etcd_watch **out, char *err, size_t errlen);

/* Up to max events in revision order into ev. Returns how many (0: none
 * came within timeout_ms) or a code:
 *  - ETCD_EUNAVAIL: the stream ended (the member went away, or canceled
 *    the watch); reopen from etcd_watch_last_revision(w) + 1;
 *  - ETCD_ECOMPACTED: events from the asked revision are gone; the caller
 *    reads the state anew and reopens from etcd_watch_compact_revision(w);
 *  - ETCD_EREPLY: etcd sent what this client cannot read (out of order,
 *    a key over ETCD_KEY_MAX, bad JSON);
 *  - ETCD_ESTOPPED: etcd_watch_stop was called.
 * Events already received are returned before the error that followed them.
 * Only one thread calls it. */
int etcd_watch_next(etcd_watch *w, etcd_event *ev, int max, long timeout_ms);
/* Makes a blocked etcd_watch_next return ETCD_ESTOPPED at once, and every
 * later one too. Safe from any thread (and from a signal-free shutdown
 * path) while the watch is not being freed. */
void etcd_watch_stop(etcd_watch *w);
/* The mod_revision of the last event returned (or start_revision - 1
 * before any): a reopen continues from it + 1. */
int64_t etcd_watch_last_revision(const etcd_watch *w);
/* The index (in the options' endpoints) of the member the watch is open
 * on: a watch that ended ETCD_EUNAVAIL is best reopened on the next. */
int etcd_watch_endpoint(const etcd_watch *w);
/* The revision etcd compacted to, after ETCD_ECOMPACTED; else 0. */
int64_t etcd_watch_compact_revision(const etcd_watch *w);
/* Why the watch ended ("" while it runs). */
const char *etcd_watch_errstr(const etcd_watch *w);
/* Closes the stream and frees the watch. NULL is fine. Not while another
 * thread is inside etcd_watch_next or etcd_watch_stop of it. */
void etcd_watch_free(etcd_watch *w);

#endif
