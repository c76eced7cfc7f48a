/* conn.h: hiredis connections to the Redis nodes (conn.c): each thread's
 * direct ones, and the state a pipe's lanes keep the same way. */
#ifndef PICKETD_CONN_H
#define PICKETD_CONN_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "codec.h"
#include "store.h"

#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 250 /* so a returning Redis is found well within 1 s */

/* One connection to one node, with its scripts loaded. A thread's direct
 * connections are conn.c's; a pipe embeds one per lane (pipe.c). */
typedef struct {
  redisContext *c;
  int node;             /* the node table's id of the node it goes to */
  char sha[SCRIPT_COUNT][41];
  int64_t next_try_ms;  /* no reconnect before this (backoff)... */
  unsigned long seen_epoch; /* ...unless another thread connected since */
  unsigned long seen_failure; /* failure_epoch when this connection opened */
  int64_t backoff_ms;
  unsigned long opens;  /* successful connects */
  unsigned long gen;    /* the node table's generation at the last connect attempt */
  unsigned long lease_epoch; /* the primary lease's epoch its calls went out under */
  char last_err[200];   /* why the last connect failed */
} conn;

/* What picketd reads from one INFO (all default sections: memory,
 * persistence, keyspace; one reply of a few KiB). INFO, not CONFIG GET:
 * a least-privilege ACL user (deploy/users.acl) cannot be granted CONFIG
 * GET safely, since it also reads requirepass and masterauth. */
typedef struct {
  char policy[64]; /* maxmemory_policy, "" when INFO was refused or lacks it */
  int aof;         /* aof_enabled: 1, 0, or -1 unknown */
  int other_error; /* INFO failed for another reason than an ACL (NOAUTH, LOADING...) */
  char err[160];   /* ...and how */
} info_facts;

/* Makes the key under which each thread keeps its direct connections:
 * 0, or -1. Called once by store_redis_init, before any call. */
int conn_init(void);
/* Closes and frees the calling thread's direct connections. */
void conn_thread_done(void);

/* A connection to node `id` (node.c finds it, authenticates and checks
 * it); NULL with r->err set. *gen gets its generation. The caller frees
 * it with redisFree. */
redisContext *conn_open(int id, store_result *r, unsigned long *gen);
/* Loads script s on k (SCRIPT LOAD) into k->sha: 0, or -1 (r->err set). */
int conn_load_script(conn *k, int s, store_result *r);
/* Opens k if it is closed (or must be reopened); NULL with r->err set when
 * Redis cannot be reached now. `at_rest`: k has no replies outstanding, so
 * it may be reopened after another connection's failure. */
conn *conn_ready(conn *k, int at_rest, store_result *r);
/* The calling thread's connection to node `id` for direct calls, (re)opened
 * as needed; NULL with r->err set when the node cannot be reached now. */
conn *conn_get(int id, store_result *r);
/* ...as it stands, not (re)opened: NULL when the thread has none. */
conn *conn_current(int id);
/* k (NULL: the calling thread's connection to node `id`), ready for lock
 * calls: NULL with the status in *st (and r->err) when the node is
 * unreachable or misconfigured. */
conn *conn_for_calls(conn *k, int id, int at_rest, store_result *r, store_status *st);
/* Sets cmd's script SHA to k's for op's current phase. */
void conn_bind(op_command *cmd, const conn *k, const store_op *op);
void conn_close(conn *k);

/* Why k's last command failed at the transport level, into r->err. */
void conn_transport_reason(const conn *k, store_result *r);
/* Drops k after a transport failure or a timeout, and has every other
 * connection to its node reopen before its next call. */
void conn_lost(conn *k);
/* conn_transport_reason and conn_lost: STORE_EUNAVAIL. */
store_status conn_transport_error(conn *k, store_result *r);
/* A reply that came in after the primary moved (node_current set r->err):
 * dropped with k, STORE_EUNAVAIL. Frees rep. */
store_status conn_primary_moved(conn *k, redisReply *rep, store_result *r);

/* Runs INFO on c, fills *f and refreshes the memory and key gauges.
 * Returns 0, or -1 when no reply came (the connection failed). */
int conn_info_read(redisContext *c, info_facts *f);
/* A number field of an INFO reply ("name:" included), or -1. */
long long conn_info_field(const char *info, const char *name);
/* 1 when a maxmemory-policy may evict picket's keys. */
int conn_policy_evicts(const char *policy);
/* Re-reads node k->node's maxmemory-policy now (one INFO)... */
void conn_check_policy(conn *k);
/* ...or when the process's check is due. */
void conn_policy_due(conn *k);
/* 1 while node `id` is known to evict keys (and --allow-eviction is off):
 * no lock calls go to it. */
int conn_evicting(int id);

#endif
