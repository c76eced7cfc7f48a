/* cluster.h: the Redis Cluster watcher (--redis-cluster), one thread that
 * keeps the node table's slot map (node.h) current. */
#ifndef PICKETD_CLUSTER_H
#define PICKETD_CLUSTER_H

#include <stddef.h>

#include "config.h"

/* Reads the slot map once from the seeds (each bounded by
 * --redis-timeout-ms) and starts the watcher. No node answering is not an
 * error: lock calls get 503 until one does. 0, or -1 with a message. */
int cluster_start(const config *cfg, char *err, size_t errlen);
/* Asks for the map again soon (a MOVED, a dead node, CLUSTERDOWN): many
 * kicks in a burst make one read, at most every REFRESH_MIN_MS. */
void cluster_kick(void);
void cluster_stop(void);

#endif
