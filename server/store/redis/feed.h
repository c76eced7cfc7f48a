/* feed.h: what the Redis store's feeds (feed.c, the release feed; and
 * store_events.c, lock events) share with store_redis.c, inside the
 * store. The feeds themselves are store_feed_* and store_events_* in
 * store.h. */
#ifndef PICKETD_FEED_H
#define PICKETD_FEED_H

#include "config.h"
#include "store.h"

/* Keeps cfg for the feeds: called by store_redis_init, before either starts. */
void feed_init(const config *cfg);
/* ...and gives it back. */
const config *feed_config(void);

/* The release feed (feed.c) and the lock-event follower
 * (store_events.c): store.h's store_feed_* and store_events_*, for
 * store_redis_backend. */
int store_redis_feed_start(void (*released)(const char *key));
void store_redis_feed_want(int on);
void store_redis_feed_stop(void);
store_events *store_redis_events_new(const store_events_hooks *hooks, void *ctx);
void store_redis_events_free(store_events *e);
int store_redis_events_add(store_events *e, const char *name);
void store_redis_events_remove(store_events *e, const char *name);
int64_t store_redis_events_run(store_events *e, int readable);
int store_redis_events_fd(const store_events *e);

/* Keeps lock `name`'s events published for `for_ms` more (watch.lua; the
 * scripts publish on its channel only while this lasts: events.lua). A
 * direct call on the calling thread (operators.c). */
store_status store_redis_watch(const char *name, int64_t for_ms, store_result *r);

#endif
