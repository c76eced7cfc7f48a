/* sentinel_link.h: picketd's links to each sentinel (see sentinel_link.c):
 * one thread per sentinel that hears its announcements and polls its view
 * of the master, and the primary lease derived from what they say. Only
 * sentinel.c calls it. */
#ifndef PICKETD_SENTINEL_LINK_H
#define PICKETD_SENTINEL_LINK_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* An announcement of the sentinels' (channel, payload), handed over on the
 * link's own thread. It must not block: no Redis call, no long lock. */
typedef void sentinel_link_event_fn(const char *channel, const char *payload);

/* Starts one thread per --sentinel address. Each subscribes to the
 * failover announcements and calls on_event with those about
 * --sentinel-master, and polls SENTINEL MASTER to keep the primary lease
 * (node_sentinel_lease) current. 0, or -1 with a message in err. */
int sentinel_link_start(const config *cfg, sentinel_link_event_fn *on_event, char *err,
                        size_t errlen);
/* Stops and joins the threads (each within --redis-timeout-ms). */
void sentinel_link_stop(void);

/* How many sentinels are heard now (a subscription or a poll that works). */
int sentinel_link_up(void);

/* The highest config-epoch any sentinel's last SENTINEL MASTER answer
 * gave, from answers that showed no failover under way (0: none yet). A
 * failover that succeeds raises it. */
int64_t sentinel_link_epoch(void);
/* 1 when some sentinel's last answer with no failover under way names
 * addr ("host:port") as the master under a config-epoch above `epoch`: a
 * failover to addr happened after that epoch. */
int sentinel_link_names_after(const char *addr, int64_t epoch);

/* A connection to sentinel i of --sentinel, authenticated, with
 * --redis-timeout-ms as its connect and command timeout; NULL with why in
 * err. The caller frees it. */
redisContext *sentinel_link_open(const config *cfg, int i, char *err, size_t errlen);

#endif
