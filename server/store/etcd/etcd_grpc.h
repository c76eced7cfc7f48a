/* etcd_grpc.h: etcd's KV/Txn over gRPC directly (etcd_grpc.c), for
 * etcd_client.c, which makes its txns this way when it can and through the
 * JSON gateway otherwise. */
#ifndef PICKETD_STORE_ETCD_GRPC_H
#define PICKETD_STORE_ETCD_GRPC_H

#include "etcd_result.h"

typedef struct etcd_grpc etcd_grpc;

/* A channel to the member at url (http://HOST:PORT, or https:// with the
 * PEM files: ca_file to verify it, cert_file and key_file to be known by
 * it; NULL for none). NULL with err set when it cannot be made. */
etcd_grpc *etcd_grpc_new(const char *url, const char *ca_file, const char *cert_file,
                         const char *key_file, char *err, size_t errlen);
void etcd_grpc_free(etcd_grpc *g);

/* etcd_txn_batch's request (n txns, nested when n > 1) over gRPC, sent
 * with `token` as its auth token when not NULL, answered within
 * timeout_ms. ETCD_OK with outs[0..n) filled; else err is set and the
 * caller makes the call again through the gateway, which says what the
 * failure was (a txn that was applied though its answer was lost is then
 * refused by its own compares): -2 when the member answered with an
 * error, -1 when it did not answer (or could not be reached). */
int etcd_grpc_txn(etcd_grpc *g, const char *token, const etcd_txn_req *const *ts, int n,
                  etcd_txn_result *outs, long timeout_ms, char *err, size_t errlen);

/* Requests answered over gRPC, and requests that failed over it (made
 * again through the gateway) since the process started. */
void etcd_grpc_counts(long *answered, long *failed);

#endif
