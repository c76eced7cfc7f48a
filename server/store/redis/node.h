/* node.h: which Redis node picketd's connections go to (the node table).
 *
 * Every Redis connection picketd opens (each thread's direct ones, each
 * event loop's pipes, the waiters' pub/sub one) is opened here, to a node
 * of this table, named by a small id (0..NODE_MAX-1). The table answers
 * "which node for this key":
 *  - with --redis, node 0 is the URL's node, for good;
 *  - with --sentinel, node 0 is the primary the Sentinel watcher
 *    (sentinel.c) keeps current;
 *  - with --redis-cluster, each of the 16384 slots names the node of its
 *    primary, from CLUSTER SLOTS (cluster.c keeps the map current) and
 *    from each MOVED reply at once.
 * Each node has a generation number, bumped whenever its id comes to mean
 * another address (a Sentinel switch, or an id reused for a new cluster
 * node): a connection opened under an older generation is closed before
 * its next call, and a reply that arrives after the switch is not trusted.
 * Callers never learn how a node was found; they ask for a connection and
 * report trouble. */
#ifndef PICKETD_NODE_H
#define PICKETD_NODE_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Sets the table up from the config: under --redis node 0 is the URL's
 * node; under --sentinel and --redis-cluster the table starts empty and
 * its watcher (started by the table's owner, store_redis.c) fills it.
 * Returns 0. `cfg` must outlive the table. */
int node_init(const config *cfg);
/* The function the table calls to ask its watcher to look again (a node
 * in trouble, a MOVED slot); any thread may call it, at any time. NULL
 * (the default, and under --redis) asks nobody. */
void node_set_kick(void (*fn)(void));

/* Distinct nodes the table can name at once (ids 0..NODE_MAX-1); an id of
 * a node that owns no slot any more is reused when a new one is needed. */
#define NODE_MAX 64
#define NODE_SLOTS 16384

/* 1 under --redis-cluster. */
int node_is_cluster(void);

/* The cluster slot of a key: CRC16 of its hash tag ({...}) or of the whole
 * key, mod 16384, as Redis computes it. */
int node_key_slot(const char *key, size_t len);
/* A hash tag ("/i/..." ) whose keys land in `slot`: for keys picketd keeps
 * one of per slot. Set up by node_init. */
const char *node_slot_tag(int slot);

/* The node for a key: its slot's primary (always 0 outside a cluster).
 * *slot gets the key's slot (-1 outside a cluster). -1 with why in err
 * when the slot has no known primary. One atomic load per call. */
int node_for_key(const char *key, int *slot, char *err, size_t errlen);

/* A primary to subscribe to (any one hears every PUBLISH of a cluster):
 * the first slot owner after node `after` (-1: from the start), or -1
 * when none is known. Always 0 outside a cluster. */
int node_any(int after);

/* The generation of node `id`: it changes whenever the id comes to mean
 * another node (one relaxed atomic load, cheap enough for every call). */
unsigned long node_generation(int id);

/* Opens a connection to node `id`: connected within `timeout_ms` (also set
 * as its command timeout), authenticated, its database selected and, under
 * --sentinel, checked with ROLE to be a primary. *gen gets the generation
 * it belongs to. NULL with a message in err when the node is not known or
 * cannot be reached; the caller frees the context. */
redisContext *node_connect(int id, int64_t timeout_ms, unsigned long *gen, char *err,
                           size_t errlen);
/* The replies a new connection's first commands get, in order, and what
 * node_setup_reply checks each for. */
enum { NODE_STEP_AUTH, NODE_STEP_SELECT, NODE_STEP_ROLE };
typedef struct {
  unsigned char step[3];
  int n, next;    /* steps appended, and the next whose reply is due */
  int id;         /* the node, -1 for a watcher's connection by address */
  char addr[280]; /* "host:port" or the socket path, for messages */
} node_setup;

/* node_connect in steps, for a caller that must not wait: with timeout_ms
 * 0 the socket connects in the background (a host name is still resolved
 * first) and AUTH, SELECT and (under --sentinel) ROLE are appended to the
 * context, not sent, their order in *s. The caller writes them ahead of
 * anything else and hands each reply, in order, to node_setup_reply.
 * With timeout_ms > 0 the connect waits as node_connect's does. NULL
 * with a message in err when the node is not known or no socket could
 * be made. */
redisContext *node_connect_start(int id, int64_t timeout_ms, unsigned long *gen, node_setup *s,
                                 char *err, size_t errlen);
/* The reply to s's next step (not freed): 0 when it is fine, -1 with why
 * in err when the node refused it or (ROLE) is not the primary; a demoted
 * primary is forgotten, as node_connect does. */
int node_setup_reply(node_setup *s, const redisReply *rep, char *err, size_t errlen);

/* "host:port" of node id (or the socket path), for messages. */
void node_addr(int id, char *out, size_t cap);

/* Whether a call may go to node `id` now: 1, except under --sentinel with
 * --sentinel-lease when the sentinels' lease on the primary has lapsed (0,
 * why in err). *epoch gets the lease's epoch, for node_current: each lease
 * that starts after a lapse has a new one. Two atomic loads. */
int node_lease_check(int id, unsigned long *epoch, char *err, size_t errlen);
/* Whether a reply that a connection opened under generation `gen` got for
 * a call made under lease epoch `epoch` can be trusted: the id still means
 * the same node and, under --sentinel-lease, the lease held without a
 * break from the call's start until now. 0 with why in err. */
int node_current(int id, unsigned long gen, unsigned long epoch, char *err, size_t errlen);

/* A call to node `id` met trouble that may mean its primary moved: a
 * connection error, a timeout, READONLY, LOADING, MASTERDOWN, CLUSTERDOWN.
 * The watcher (Sentinel's or the cluster's) looks again, at most every few
 * tens of ms; with --redis it only starts the clock the logs report. */
void node_trouble(int id);
/* A call to node `id` succeeded: stops that clock. */
void node_ok(int id);

/* ---- redirections (--redis-cluster) ------------------------------------ */

/* The id for host:port, added to the table if new; -1 when the table is
 * full of nodes that own slots. */
int node_id_of(const char *host, int port);
/* A MOVED reply: `slot` is served by host:port now. The slot is pointed
 * there at once and the watcher asked to read the whole map again (once
 * per burst of MOVED, not per call). The new owner's id, or -1. */
int node_moved(int slot, const char *host, int port);

/* Registers a function the watcher calls right after each switch of
 * primary (on its thread, with no lock of the table held). At most a few. */
void node_on_switch(void (*fn)(void));

/* What /readyz says about the topology. */
typedef struct {
  char primary[280];    /* "host:port" or the socket path; "" when none is known */
  int sentinel;         /* -1: not in Sentinel mode; 0: no sentinel answers; 1: one does */
  char sentinel_msg[240]; /* why no sentinel answers */
  int lease;            /* -1: no lease kept; 0: lapsed; 1: held */
  char lease_msg[600];  /* why it lapsed */
  int cluster;          /* -1: not a cluster; 0: no node answers CLUSTER SLOTS; 1: one does */
  char cluster_msg[240];  /* why none answers */
} node_info;
void node_describe(node_info *out);

/* One shard of the cluster: a primary and how many slots it serves. */
typedef struct {
  int id;
  char primary[280];
  int slots;
} node_shard;
/* The shards now (one in single-node and Sentinel mode, while a primary is
 * known), in slot order; how many were written (at most max). */
int node_shards(node_shard *out, int max);

/* ---- for the cluster watcher (cluster.c) ------------------------------ */

/* One range of CLUSTER SLOTS: slots first..last are served by host:port. */
typedef struct {
  int first, last;
  char host[256];
  int port;
} node_range;
/* A whole slot map read from one node: every slot not in a range has no
 * primary now. Logs each shard whose primary changed. */
void node_set_slots(const node_range *ranges, int n);
/* Whether a cluster node answers CLUSTER SLOTS now, and why not. */
void node_cluster_state(int reachable, const char *why);
/* The seed nodes and the known primaries, to ask for the map: up to max
 * addresses, the known primaries first. */
int node_map_sources(node_range *out, int max);
/* A node's connection for the watcher: like node_connect, by address. */
redisContext *node_open_addr(const char *host, int port, int64_t timeout_ms, char *err,
                             size_t errlen);

/* ---- for the Sentinel watcher (sentinel.c) --------------------------- */

/* The sentinels name host:port as the primary, and it says so itself. */
void node_set_primary(const char *host, int port);
/* The named primary says it is a replica: no lock call may go to it until
 * the sentinels name another (or confirm it again). */
void node_forget_primary(const char *why);
/* Whether a sentinel answers now, and why not. */
void node_sentinel_state(int reachable, const char *why);
/* The sentinels' lease on the primary (sentinel_link.c): under
 * --sentinel-lease, lock calls go to node 0 only before until_ms
 * (CLOCK_MONOTONIC ms; 0 or past: no lease, for the reason `why`). */
void node_sentinel_lease(int64_t until_ms, const char *why);
/* Connects to host:port as a data node (the primary's password and db) and
 * says what ROLE reports: 1 primary, 0 replica (or any other role), -1
 * unreachable or no usable answer (why in err). */
int node_probe(const char *host, int port, char *err, size_t errlen);

#endif
