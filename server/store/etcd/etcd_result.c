/* etcd_result.c: what frees the results of etcd_client.h, which both
 * ways of calling etcd fill (etcd_client.c through the JSON gateway,
 * etcd_grpc.c over gRPC): below both, so that neither calls the other
 * back. */
#include <stdlib.h>
#include <string.h>

#include "etcd_result.h"

void etcd_kv_clear(etcd_kv *kv) {
  free(kv->key);
  free(kv->value);
  memset(kv, 0, sizeof *kv);
}

void etcd_op_result_clear(etcd_op_result *r) {
  if (r == NULL) return;
  for (int i = 0; i < r->nkvs; i++) etcd_kv_clear(&r->kvs[i]);
  free(r->kvs);
  memset(r, 0, sizeof *r);
}

void etcd_txn_result_clear(etcd_txn_result *r) {
  if (r == NULL) return;
  for (int i = 0; i < r->nresults; i++) etcd_op_result_clear(&r->results[i]);
  free(r->results);
  memset(r, 0, sizeof *r);
}
