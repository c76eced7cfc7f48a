/* semaphore.c: semaphores on etcd. PLACEHOLDER on the etcd branch: being
 * written. */
#include <stdio.h>

#include "store_etcd.h"

void store_etcd_semaphore(etcd_client *c, store_op *op) {
  (void)c;
  snprintf(op->r.err, sizeof op->r.err, "semaphores are not supported on etcd yet");
  op->st = STORE_EREPLY;
}
