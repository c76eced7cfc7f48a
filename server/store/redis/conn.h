/* conn.h: hiredis connections to the Redis nodes (conn.c): each thread's
 * direct ones, and the state a pipe's lanes keep the same way. */
#ifndef PICKETD_CONN_H
#define PICKETD_CONN_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "codec.h"
#include "node.h"
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
  unsigned long starts; /* sockets made (a pipe watches each new one) */
  node_setup setup;     /* the node's steps of the setup under way... */
  int setup_next, setup_n; /* ...and of the whole setup: replies read, replies due */
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
/* A SCRIPT LOAD reply for script s, kept in k->sha (rep not freed): 0, or
 * -1 with r->err set. */
int conn_script_reply(conn *k, int s, const redisReply *rep, store_result *r);

/* Opening a connection is a setup: the node's steps (node_connect_start:
 * AUTH, SELECT, ROLE), a SCRIPT LOAD per script, then one INFO for the
 * maxmemory-policy verdict, all appended at once; k takes calls once
 * every reply is in. A direct connection reads them at once (conn_ready);
 * a pipe's lane reads them as they come, like any other reply, so its
 * loop never waits for a connect.
 *
 * Makes sure k is open or opening: -1 (r->err set) when Redis cannot be
 * reached now (or the backoff after a failed attempt has not passed); 0
 * when its setup is under way (conn_opening); 1 when it takes calls.
 * `at_rest`: k has no replies outstanding, so it may be reopened after
 * another connection's failure. `nonblock`: a new socket connects in the
 * background and nothing is read; otherwise the connect waits up to
 * --redis-timeout-ms. */
int conn_start(conn *k, int at_rest, int nonblock, store_result *r);
/* 1 while k's setup replies are not all in. */
int conn_opening(const conn *k);
/* The next reply of k's setup (rep not freed): 0 when more are due, 1 when
 * k now takes calls, -1 when Redis refused a step (k is closed, r->err
 * says why, and the backoff starts). */
int conn_setup_reply(conn *k, const redisReply *rep, store_result *r);
/* k's setup ended without its replies (a transport failure, a timeout; the
 * reason in r->err): closes k and starts the backoff, as a failed connect. */
void conn_setup_failed(conn *k, const store_result *r);
/* conn_start, waiting for the setup's replies: k, or NULL with r->err set
 * when Redis cannot be reached now. */
conn *conn_ready(conn *k, int at_rest, store_result *r);
/* The calling thread's connection to node `id` for direct calls, (re)opened
 * as needed; NULL with r->err set when the node cannot be reached now. */
conn *conn_get(int id, store_result *r);
/* ...as it stands, not (re)opened: NULL when the thread has none. */
conn *conn_current(int id);
/* The calling thread's connection to node `id`, ready for lock calls: NULL
 * with the status in *st (and r->err) when the node is unreachable or
 * misconfigured. */
conn *conn_for_calls(int id, store_result *r, store_status *st);
/* Whether lock calls may go to node `id` on k (NULL: it could not be
 * opened, r->err says why): k, or NULL with the status in *st. */
conn *conn_admit(conn *k, int id, store_result *r, store_status *st);
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
/* 1 when the process's check is due, and the caller takes this turn: it
 * sends INFO and hands the reply to conn_policy_reply. */
int conn_policy_claim(int id);
/* An INFO reply from node `id` (not freed): the verdict and gauges. */
void conn_policy_reply(int id, const redisReply *rep);
/* 1 while node `id` is known to evict keys (and --allow-eviction is off):
 * no lock calls go to it. */
int conn_evicting(int id);

#endif
