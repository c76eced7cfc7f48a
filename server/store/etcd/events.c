/* events.c: the lock-event follower on etcd. PLACEHOLDER on the etcd
 * branch: being written; a follower that never reports a name ready. */
#include <stdlib.h>

#include "clock.h"
#include "store_etcd.h"

struct store_events {
  int unused;
};
store_events *store_etcd_events_new(const store_events_hooks *hooks, void *ctx) {
  return calloc(1, sizeof(store_events));
}
void store_etcd_events_free(store_events *e) { free(e); }
int store_etcd_events_add(store_events *e, const char *name) { return 0; }
void store_etcd_events_remove(store_events *e, const char *name) {}
int64_t store_etcd_events_run(store_events *e, int readable) { return clock_mono_ms() + 1000; }
int store_etcd_events_fd(const store_events *e) { return -1; }
