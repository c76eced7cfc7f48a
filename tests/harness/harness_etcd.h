/* Test harness for etcd (issue 29): a throwaway etcd cluster of 1 or 3
 * members on loopback ports, each member in a temp dir of its own, with
 * settings fit for tests (50 ms heartbeats, 500 ms elections, small
 * snapshots and quota, errors-only logs). Like the Redis harness, every
 * member is started with PR_SET_PDEATHSIG, so a test that crashes takes the
 * cluster with it, and harness_etcd_free removes every dir.
 *
 * Faults are signals: SIGKILL for a crash, SIGSTOP/SIGCONT for a pause
 * (which a member's peers see as a partition). There is no network
 * partition helper yet: that needs network namespaces or a proxy. */
#ifndef PICKET_HARNESS_ETCD_H
#define PICKET_HARNESS_ETCD_H

#include <stdint.h>
#include <sys/types.h>

typedef struct harness_etcd harness_etcd;

/* Starts an n-member cluster (1..5) and waits until it has a leader and
 * every member answers /health. Ports are picked free (bound to port 0);
 * a start that loses a port to another process is tried again with new
 * ones. Returns NULL (after printing why) on failure. */
harness_etcd *harness_etcd_start(int n);
/* Sends sig to member i. SIGSTOP returns once every thread of it is
 * stopped, SIGCONT once it runs; any other signal is a stop: the member is
 * continued (a stopped process cannot act on SIGTERM), signalled and
 * reaped. Its dir stays, so harness_etcd_restart brings its data back. */
void harness_etcd_signal(harness_etcd *e, int i, int sig);
/* Starts member i again (after a stop) with the same name, dir and ports.
 * Returns 0 once it answers /health, or -1. */
int harness_etcd_restart(harness_etcd *e, int i);
/* The index of the member that leads, as the running members agree on it
 * (paused members are not asked), or -1 when there is none. */
int harness_etcd_leader(harness_etcd *e);
/* Waits up to timeout_ms for a leader; its index, or -1. */
int harness_etcd_wait_leader(harness_etcd *e, int64_t timeout_ms);
/* Every member's client URL, comma-separated ("http://127.0.0.1:P,..."). */
const char *harness_etcd_urls(const harness_etcd *e);
/* Member i's client URL. */
const char *harness_etcd_url(const harness_etcd *e, int i);
/* Member i's pid (0 while it is stopped), and the cluster's size. */
pid_t harness_etcd_pid(const harness_etcd *e, int i);
int harness_etcd_size(const harness_etcd *e);
/* Kills every member that runs, removes the dirs (kept with $HARNESS_KEEP)
 * and frees. NULL is fine. */
void harness_etcd_free(harness_etcd *e);

#endif
