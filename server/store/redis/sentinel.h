/* sentinel.h: the Sentinel watcher, which keeps the node table's primary
 * current under --sentinel (see sentinel.c). Only node.c calls it. */
#ifndef PICKETD_SENTINEL_H
#define PICKETD_SENTINEL_H

#include <stddef.h>

#include "config.h"

/* Asks the sentinels once for the primary, then starts the watcher thread.
 * 0, or -1 with a message in err (the thread could not start). */
int sentinel_start(const config *cfg, char *err, size_t errlen);
/* Asks the sentinels again soon (a call met READONLY, a dead connection...).
 * Cheap and safe from any thread, as often as you like. */
void sentinel_kick(void);
/* Stops and joins the thread. */
void sentinel_stop(void);

#endif
