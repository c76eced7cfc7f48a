/* feed.h: what the Redis store's feeds (feed.c, the release feed; and
 * store_events.c, lock events) share with store_redis.c, inside the
 * store. The feeds themselves are store_feed_* and store_events_* in
 * store.h. */
#ifndef PICKETD_FEED_H
#define PICKETD_FEED_H

#include "config.h"
#include "store.h"

/* Keeps cfg for the feeds: called by store_init, before either starts. */
void feed_init(const config *cfg);
/* ...and gives it back. */
const config *feed_config(void);

/* Keeps lock `name`'s events published for `for_ms` more (watch.lua; the
 * scripts publish on its channel only while this lasts: events.lua). A
 * direct call on the calling thread (store_redis.c). */
store_status store_watch(const char *name, int64_t for_ms, store_result *r);

#endif
