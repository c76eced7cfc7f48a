/* signer.c: the keys that sign fences (see signer.h).
 *
 * The key set is small (16 keys at most) and read on every grant, so it
 * is copied under a mutex into the caller's stack rather than shared by
 * reference: a reload never frees keys a signing thread still reads. Only
 * the first key signs; the others are in the file for the verifiers
 * (rotation: a new key goes first on the verifiers, then here). */
#include "signer.h"

#include <pthread.h>
#include <string.h>

#include "log.h"

static const config *cfg;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static picket_proto_fence_key signing; /* under mu */
static int enabled;

static int load(picket_proto_fence_key *out, char *err, size_t errlen) {
  picket_proto_fence_keys ks;
  char why[400];
  if (picket_proto_fence_keys_load(cfg->fence_key_file, &ks, why, sizeof why) < 0) {
    snprintf(err, errlen, "--fence-key-file %s", why);
    return -1;
  }
  *out = ks.keys[0];
  memset(&ks, 0, sizeof ks);
  return 0;
}

int signer_init(const config *c, char *err, size_t errlen) {
  cfg = c;
  if (cfg->fence_key_file[0] == '\0') return 0;
  if (load(&signing, err, errlen) < 0) return -1;
  enabled = 1;
  LOG(LOG_INFO, "grants carry fence tokens signed with key '%s'", signing.kid);
  return 0;
}

int signer_enabled(void) { return enabled; }

void signer_reload(void) {
  if (!enabled) return;
  picket_proto_fence_key k;
  char err[500];
  if (load(&k, err, sizeof err) < 0) {
    LOG(LOG_ERROR, "SIGHUP: %s; keeping the fence key loaded before", err);
    return;
  }
  pthread_mutex_lock(&mu);
  signing = k;
  pthread_mutex_unlock(&mu);
  LOG(LOG_INFO, "SIGHUP: fence tokens are now signed with key '%s'", k.kid);
  memset(&k, 0, sizeof k);
}

void signer_set_key(const picket_proto_fence_key *k, const config *c) {
  pthread_mutex_lock(&mu);
  cfg = c;
  if (k) signing = *k;
  enabled = k != NULL;
  pthread_mutex_unlock(&mu);
}

int signer_sign(unsigned kind, const char *lock, int64_t fence,
                char out[PICKET_PROTO_FENCE_TOKEN_MAX + 1]) {
  if (!enabled) return -1;
  picket_proto_fence_key k;
  pthread_mutex_lock(&mu);
  k = signing;
  pthread_mutex_unlock(&mu);
  int rc = picket_proto_fence_token(&k, kind, cfg->key_prefix, lock, fence, out);
  memset(&k, 0, sizeof k);
  return rc;
}
