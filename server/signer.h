/* signer.h: signed fences on picketd's side (--fence-key-file): the key
 * set, reloaded on SIGHUP, and the fence token of each grant (the format
 * is proto/fence_token.c's; proto/README.md "Signed fences"). */
#ifndef PICKETD_SIGNER_H
#define PICKETD_SIGNER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "picket_proto.h"

/* Loads --fence-key-file when set: 0, or -1 with the file and why in err
 * (never key material). */
int signer_init(const config *cfg, char *err, size_t errlen);
/* 1 when grants carry a fence token. */
int signer_enabled(void);
/* SIGHUP: reads the file again; one that does not parse keeps the keys
 * loaded before, and the log says why. */
void signer_reload(void);
/* The token of (kind, lock, fence) under the signing key (kind: one of
 * PICKET_PROTO_FENCE_KIND_*, what the grant is): 0, or -1 when signing is
 * off or the fence is not one. Safe from any thread. */
int signer_sign(unsigned kind, const char *lock, int64_t fence,
                char out[PICKET_PROTO_FENCE_TOKEN_MAX + 1]);
/* The fuzzer's switch: sign with k (a copy is kept) under `prefix`, or
 * stop signing (k NULL). */
void signer_set_key(const picket_proto_fence_key *k, const config *cfg);

#endif
