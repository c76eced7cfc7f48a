/* node.h: which Redis node picketd's connections go to (the node table).
 *
 * Every Redis connection picketd opens (each thread's direct one, each
 * event loop's pipe, the waiters' pub/sub one) is opened here, to the
 * node this table names as the primary. With --redis that is the URL's
 * node, for good. With --sentinel the Sentinel watcher (sentinel.c) keeps
 * it current, and every change of primary bumps a generation number: a
 * connection opened under an older generation is closed before its next
 * call, and a reply that arrives after the switch is not trusted (the node
 * that sent it may no longer be the primary). Callers never learn how the
 * primary was found; they ask for a connection and report trouble. */
#ifndef PICKETD_NODE_H
#define PICKETD_NODE_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Sets the table up from the config. With --sentinel it starts the watcher
 * and asks the sentinels once before it returns (bounded by
 * --redis-timeout-ms per sentinel), so startup checks meet the real
 * primary; no answer is not an error (lock calls get 503 until one comes).
 * 0, or -1 with a message in err. `cfg` must outlive the table. */
int node_init(const config *cfg, char *err, size_t errlen);
/* Stops the watcher (after every user of the table has stopped). */
void node_stop(void);

/* The generation of the current primary: it changes whenever the primary
 * does (one relaxed atomic load, cheap enough for every call). */
unsigned long node_generation(void);

/* Opens a connection to the current primary: connected within `timeout_ms`
 * (also set as its command timeout), authenticated, its database selected
 * and, under --sentinel, checked with ROLE to be a primary. *gen gets the
 * generation it belongs to. NULL with a message in err when no primary is
 * known or it cannot be reached; the caller frees the context. */
redisContext *node_connect(int64_t timeout_ms, unsigned long *gen, char *err, size_t errlen);

/* A call met trouble that may mean the primary moved: a connection error,
 * a timeout, READONLY, LOADING, MASTERDOWN. Under --sentinel the watcher
 * asks the sentinels again (at most every few tens of ms); with --redis it
 * only starts the clock that the switch log line reports. */
void node_trouble(void);
/* A call succeeded: stops that clock. */
void node_ok(void);

/* Registers a function the watcher calls right after each switch of
 * primary (on its thread, with no lock of the table held). At most a few. */
void node_on_switch(void (*fn)(void));

/* What /readyz says about the topology. */
typedef struct {
  char primary[280];    /* "host:port" or the socket path; "" when none is known */
  int sentinel;         /* -1: not in Sentinel mode; 0: no sentinel answers; 1: one does */
  char sentinel_msg[240]; /* why no sentinel answers */
} node_info;
void node_describe(node_info *out);

/* ---- for the Sentinel watcher (sentinel.c) --------------------------- */

/* The sentinels name host:port as the primary, and it says so itself. */
void node_set_primary(const char *host, int port);
/* The named primary says it is a replica: no lock call may go to it until
 * the sentinels name another (or confirm it again). */
void node_forget_primary(const char *why);
/* Whether a sentinel answers now, and why not. */
void node_sentinel_state(int reachable, const char *why);
/* Connects to host:port as a data node (the primary's password and db) and
 * says what ROLE reports: 1 primary, 0 replica (or any other role), -1
 * unreachable or no usable answer (why in err). */
int node_probe(const char *host, int port, char *err, size_t errlen);

#endif
