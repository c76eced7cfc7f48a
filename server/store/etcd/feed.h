/* feed.h: the release feed on etcd (feed.c), for the dispatcher. */
#ifndef PICKETD_STORE_ETCD_FEED_H
#define PICKETD_STORE_ETCD_FEED_H

#include "common.h"

/* store.h's store_feed_start, store_feed_want and store_feed_stop. */
int store_etcd_feed_start(void (*released)(const char *key));
void store_etcd_feed_want(int on);
void store_etcd_feed_stop(void);

#endif
