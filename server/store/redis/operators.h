/* operators.h: an operator's calls on Redis (operators.c): store.h's
 * store_list and store_break, and the watch the lock events keep up. */
#ifndef PICKETD_OPERATORS_H
#define PICKETD_OPERATORS_H

#include <stdint.h>

#include "store.h"

store_status store_redis_list(const char *prefix, int limit, store_cursor *at, int *more,
                              store_result *r);
store_status store_redis_break(const char *name, const char *who, int64_t fence,
                               store_result *r);
/* (store_redis_watch, which store_events.c calls, is declared in feed.h.) */

#endif
