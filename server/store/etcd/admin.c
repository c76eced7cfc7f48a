/* admin.c: listing and breaking on etcd. PLACEHOLDER on the etcd branch:
 * being written. */
#include <stdio.h>

#include "store_etcd.h"

store_status store_etcd_list(const char *prefix, int limit, store_cursor *at, int *more,
                             store_result *r) {
  *more = 0;
  snprintf(r->err, sizeof r->err, "listing is not supported on etcd yet");
  return STORE_EREPLY;
}

store_status store_etcd_break(const char *name, const char *who, store_result *r) {
  snprintf(r->err, sizeof r->err, "break is not supported on etcd yet");
  return STORE_EREPLY;
}

void store_etcd_broken_why(etcd_client *c, const char *name, const char *lease,
                           store_result *r) {
  (void)c, (void)name, (void)lease, (void)r;
}
