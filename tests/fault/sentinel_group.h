/* sentinel_group.h: a Redis Sentinel group for the fault tests: three
 * data nodes (a primary and two replicas, harness_redis with TCP and AOF)
 * and three redis-sentinel processes watching them under the master name
 * "picket" (quorum 2), all on free loopback ports.
 *
 * Each Sentinel's config is deploy/sentinel/sentinel.conf, the shipped
 * production example, with only the local values replaced: port, bind,
 * dir, logfile, the monitor line's address, down-after-milliseconds and
 * failover-timeout. Every other line (quorum, parallel-syncs, ...) is the
 * shipped one, so the file is what the fault suite tests.
 *
 * Like the harness's servers, every process is started with
 * PR_SET_PDEATHSIG (it dies with the thread that started it: call these
 * from the test's main thread), stopped by pid and its temp dir
 * (made by harness_make_tmpdir) removed by sg_free ($HARNESS_KEEP keeps
 * them). Functions that wait assert (Check) when the group does not get
 * where it should within their bound; they print the Sentinels' logs
 * first. */
#ifndef PICKET_SENTINEL_GROUP_H
#define PICKET_SENTINEL_GROUP_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "fault_proxy.h"
#include "harness.h"

#define SG_MASTER "picket" /* the master name, as in the shipped file */
#define SG_NODES 3
#define SG_SENTINELS 3

typedef struct sg_group sg_group;

typedef struct {
  /* 1: each replica follows the primary through its own fault_proxy, so
   * sg_partition_replicas can make both lag. Sentinel repoints a replica
   * that follows an address other than the primary's failover_timeout_ms
   * after it saw that (+fix-slave-config), and a failover points the
   * replicas at the new primary directly: a proxied group is good for
   * one partition, within failover_timeout_ms of its start. */
  int proxied;
  /* 0: 1500. Not 1000 or less: Sentinel pings every min(down-after,
   * 1000) ms and counts a master it has just switched to as down when no
   * PONG came down-after ms after the switch, so with down-after <= 1000
   * its first PING races that check and a Sentinel sometimes declares the
   * new primary down a second after the failover, starting another one
   * (seen here: kill, failover, and a second failover 1.0 s later). */
  int down_after_ms;
  int failover_timeout_ms; /* 0: 5000, or 60000 when proxied */
} sg_opts;

/* Starts the nodes and the Sentinels and waits until the group is healthy
 * (sg_wait_healthy). Prints how long that took. Asserts. */
sg_group *sg_start(const sg_opts *opts);
/* Stops every process (SIGKILL) and proxy and removes the temp dirs. NULL
 * is fine. */
void sg_free(sg_group *g);

/* "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3", for picketd's --sentinel. */
const char *sg_sentinel_list(const sg_group *g);
int sg_sentinel_port(const sg_group *g, int s);
/* Data node i (0..SG_NODES-1; 0 is the first primary) and its address
 * "127.0.0.1:PORT" as Sentinel and picketd's /readyz spell it. */
harness_redis *sg_node(const sg_group *g, int i);
const char *sg_node_addr(const sg_group *g, int i);
/* Node i's replication proxy (proxied groups; NULL otherwise or for the
 * first primary). */
fault_proxy *sg_proxy(const sg_group *g, int i);

/* The node that is primary now: the one every running Sentinel names for
 * SG_MASTER and whose ROLE is master. -1 when they disagree or it is not
 * (yet) a master. */
int sg_primary(sg_group *g);
/* Waits up to timeout_ms for sg_primary to name a node other than `old`
 * (-1: any); returns it and, in *ms (may be NULL), how long it took. */
int sg_wait_primary(sg_group *g, int old, int64_t timeout_ms, int64_t *ms);
/* SENTINEL FAILOVER SG_MASTER (forced, no agreement needed) through
 * Sentinel `via` (-1: the first running one), which then leads it; waits
 * until every running Sentinel names a new primary whose ROLE is master.
 * Returns the ms from the command to that. Which Sentinel leads matters to
 * a client: the leader names the promoted replica as soon as it is
 * promoted, the others only once they hear of it (up to 2 s later). */
int64_t sg_failover(sg_group *g, int via);

/* SIGKILLs data node i (its AOF stays). */
void sg_kill_node(sg_group *g, int i);
/* Starts a killed node again (same port, dir, AOF) and waits until the
 * group is healthy: Sentinel turns a node that comes back as a stale
 * primary into a replica of the current one (about 10 s: Sentinel waits 4
 * publish periods, then its next INFO), and every Sentinel must then have
 * seen it as a replica (its next INFO, up to 10 s more). The old primary
 * of a forced failover goes the same way. Returns the ms. */
int64_t sg_restart_node(sg_group *g, int i);
/* Waits up to timeout_ms until the group is whole: every running Sentinel
 * names the same primary, whose ROLE is master, which has SG_NODES-1
 * online replicas that acknowledge a write (WAIT), and which every running
 * Sentinel sees as up (flags "master") with SG_NODES-1 replicas that are
 * not down or disconnected and that it last saw reporting the replica
 * role, and the other running Sentinels not down. Returns the ms it took.
 * $SG_DEBUG prints what it waits for. */
int64_t sg_wait_healthy(sg_group *g, int64_t timeout_ms);
/* Starts every data node and Sentinel that is stopped (a case that
 * failed half-way may leave some) and waits, as sg_wait_healthy. */
int64_t sg_heal(sg_group *g, int64_t timeout_ms);
/* Partitions every replica's proxy (proxied groups): the primary still
 * counts both replicas as connected, but none of its writes arrive. */
void sg_partition_replicas(sg_group *g);

/* SIGKILLs Sentinel s / starts it again from its own (rewritten) config
 * and waits until it answers and knows the primary. */
void sg_kill_sentinel(sg_group *g, int s);
void sg_restart_sentinel(sg_group *g, int s);
/* SIGSTOPs data node i (paused 1) or SIGCONTs it (0); sg_heal resumes a
 * paused one. */
void sg_pause_node(sg_group *g, int i, int paused);
/* SIGSTOPs Sentinel s (paused 1) or SIGCONTs it (0); sg_heal resumes a
 * paused one. */
void sg_pause_sentinel(sg_group *g, int s, int paused);
/* One command to Sentinel s (NULL when it cannot be reached); free the
 * reply with freeReplyObject. */
redisReply *sg_sentinel_cmd(const sg_group *g, int s, const char *fmt, ...);
/* The value of `key` in a flat key/value array reply (SENTINEL MASTER),
 * or NULL. */
const char *sg_field(const redisReply *kv, const char *key);
/* Prints the last lines of every Sentinel's log (to stderr). */
void sg_dump_logs(const sg_group *g);

#endif
