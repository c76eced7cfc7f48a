/* admin.h: the operators' calls on etcd (admin.c), for the dispatcher. */
#ifndef PICKETD_STORE_ETCD_ADMIN_H
#define PICKETD_STORE_ETCD_ADMIN_H

#include "common.h"

/* store.h's store_list and store_break on etcd. */
store_status store_etcd_list(const char *prefix, int limit, store_cursor *at, int *more,
                             store_result *r);
store_status store_etcd_break(const char *name, const char *who, int64_t fence, store_result *r);

#endif
