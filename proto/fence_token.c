/* fence_token.c: signed fences (issue 17), shared by picketd (which signs
 * each grant's fence) and the storage side (picket/fence.h, fenced-kv,
 * which verify). A fence alone is a number anybody can make up, and one
 * made-up 2^63-1 would lock every honest holder out; a fence token is an
 * HMAC-SHA256 over what the fence means, under a key only picketd and the
 * storage share:
 *
 *   token = "v2." KIND "." KID "." hex(HMAC-SHA256(key[KID], msg))
 *   msg   = "picket-fence-v2" NUL KIND NUL KID NUL PREFIX NUL LOCK NUL FENCE
 *
 * KIND says what the grant was (lock, permit, read, write: issue 39): a
 * read lease's fence is its write epoch's, and a plain lock may be named
 * like a semaphore's permit (S:permit:3), so without the kind a reader's
 * token or such a lock's would be the token a writer or a permit holder
 * shows. KID names the key (so keys can rotate: the first key of the file
 * signs, every key verifies), PREFIX is picketd's --key-prefix (one
 * deployment's tokens mean nothing to another sharing a key), LOCK the
 * lock name and FENCE the fence in decimal. None of them can hold a NUL,
 * so the message reads one way only. proto/README.md ("Signed fences") is
 * the contract for other languages.
 *
 * v1 tokens ("v1." KID "." MAC over "picket-fence-v1" NUL KID NUL PREFIX
 * NUL LOCK NUL FENCE) carry no kind: they verify only where a verifier
 * turned accept_v1 on, for the upgrade of a deployment, never by default.
 *
 * The key file: one key per line, "KID HEX" (KID 1-32 bytes of
 * [A-Za-z0-9_-], the key 32 to 64 bytes as 64 to 128 hex digits), '#'
 * comment lines and blank lines ignored, at most 16 keys. */
#include <errno.h>
#include <gnutls/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picket_proto.h"

static int kid_valid(const char *s, size_t n) {
  if (n == 0 || n > PICKET_PROTO_FENCE_KID_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-'))
      return 0;
  }
  return 1;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int picket_proto_fence_keys_parse(const char *text, size_t len, picket_proto_fence_keys *out,
                                  char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  int line = 0;
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - text - at) : len - at;
    const char *s = text + at;
    at = nl ? (size_t)(nl - text) + 1 : len;
    line++;
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    if (n == 0 || *s == '#') continue;
    const char *sp = memchr(s, ' ', n);
    const char *tab = memchr(s, '\t', n);
    if (sp == NULL || (tab && tab < sp)) sp = tab;
    if (sp == NULL) {
      snprintf(err, errlen, "line %d: expected KID and a hex key", line);
      return -1;
    }
    size_t kl = (size_t)(sp - s);
    const char *hex = sp;
    size_t hl = n - kl;
    while (hl > 0 && (*hex == ' ' || *hex == '\t')) hex++, hl--;
    if (!kid_valid(s, kl)) {
      snprintf(err, errlen, "line %d: a key id is 1 to %d bytes of [A-Za-z0-9_-]", line,
               PICKET_PROTO_FENCE_KID_MAX);
      return -1;
    }
    if (hl < 64 || hl > 128 || hl % 2) {
      snprintf(err, errlen, "line %d: a key is 32 to 64 bytes, as 64 to 128 hex digits", line);
      return -1;
    }
    if (out->n == PICKET_PROTO_FENCE_KEYS_MAX) {
      snprintf(err, errlen, "line %d: more than %d keys", line, PICKET_PROTO_FENCE_KEYS_MAX);
      return -1;
    }
    picket_proto_fence_key *k = &out->keys[out->n];
    for (size_t i = 0; i < hl / 2; i++) {
      int h = hexval(hex[2 * i]), l = hexval(hex[2 * i + 1]);
      if (h < 0 || l < 0) {
        snprintf(err, errlen, "line %d: the key has a character that is not hex", line);
        memset(out, 0, sizeof *out);
        return -1;
      }
      k->key[i] = (unsigned char)(h << 4 | l);
    }
    k->key_len = hl / 2;
    memcpy(k->kid, s, kl);
    k->kid[kl] = '\0';
    for (int i = 0; i < out->n; i++)
      if (strcmp(out->keys[i].kid, k->kid) == 0) {
        snprintf(err, errlen, "line %d: key id '%s' given twice", line, k->kid);
        memset(out, 0, sizeof *out);
        return -1;
      }
    out->n++;
  }
  if (out->n == 0) {
    snprintf(err, errlen, "no key in it");
    return -1;
  }
  return 0;
}

int picket_proto_fence_keys_load(const char *path, picket_proto_fence_keys *out, char *err,
                                 size_t errlen) {
  char buf[8192], why[160];
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  size_t n = fread(buf, 1, sizeof buf, f);
  int bad = ferror(f) || !feof(f);
  fclose(f);
  if (bad) {
    snprintf(err, errlen, "%s: unreadable, or larger than %zu bytes", path, sizeof buf - 1);
    return -1;
  }
  int rc = picket_proto_fence_keys_parse(buf, n, out, why, sizeof why);
  memset(buf, 0, sizeof buf); /* key material does not linger on the stack */
  if (rc < 0) snprintf(err, errlen, "%s: %s", path, why);
  return rc;
}

static const char *const kind_names[] = {"lock", "permit", "read", "write"};

const char *picket_proto_fence_kind_name(unsigned kind) {
  for (int i = 0; i < 4; i++)
    if (kind == 1u << i) return kind_names[i];
  return NULL;
}

/* The kind a token's KIND field names (len bytes), or 0. */
static unsigned kind_parse(const char *s, size_t len) {
  for (int i = 0; i < 4; i++)
    if (strlen(kind_names[i]) == len && memcmp(kind_names[i], s, len) == 0) return 1u << i;
  return 0;
}

unsigned picket_proto_fence_kind_of_name(const char *lock) {
  size_t n = strlen(lock);
  if (n > 3 && strcmp(lock + n - 3, ":rw") == 0) return PICKET_PROTO_FENCE_KIND_WRITE;
  size_t d = n;
  while (d > 0 && lock[d - 1] >= '0' && lock[d - 1] <= '9') d--;
  if (d < n && d > 8 && memcmp(lock + d - 8, ":permit:", 8) == 0)
    return PICKET_PROTO_FENCE_KIND_PERMIT;
  return PICKET_PROTO_FENCE_KIND_LOCK;
}

/* The HMAC of a fence under k, as 64 hex digits: the v2 message with
 * `kind`, or the v1 message (no kind) when kind is NULL. */
static int mac_hex(const picket_proto_fence_key *k, const char *kind, const char *prefix,
                   const char *lock, int64_t fence, char out[65]) {
  char msg[16 + 8 + PICKET_PROTO_FENCE_KID_MAX + PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX +
           32];
  int n = kind ? snprintf(msg, sizeof msg, "picket-fence-v2%c%s%c%s%c%s%c%s%c%lld", 0, kind, 0,
                          k->kid, 0, prefix, 0, lock, 0, (long long)fence)
               : snprintf(msg, sizeof msg, "picket-fence-v1%c%s%c%s%c%s%c%lld", 0, k->kid, 0,
                          prefix, 0, lock, 0, (long long)fence);
  if (n < 0 || (size_t)n >= sizeof msg) return -1;
  unsigned char mac[32];
  if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, k->key, k->key_len, msg, (size_t)n, mac) < 0) return -1;
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", mac[i]);
  return 0;
}

int picket_proto_fence_token(const picket_proto_fence_key *k, unsigned kind, const char *prefix,
                             const char *lock, int64_t fence,
                             char out[PICKET_PROTO_FENCE_TOKEN_MAX + 1]) {
  char mac[65];
  const char *kn = picket_proto_fence_kind_name(kind);
  if (kn == NULL || fence < 1 || mac_hex(k, kn, prefix, lock, fence, mac) < 0) return -1;
  snprintf(out, PICKET_PROTO_FENCE_TOKEN_MAX + 1, "v2.%s.%s.%s", kn, k->kid, mac);
  return 0;
}

int picket_proto_fence_token_verify(const picket_proto_fence_keys *ks, const char *prefix,
                                    const char *lock, int64_t fence, unsigned kinds,
                                    const char *token, size_t len) {
  if (token == NULL || len < 3 + 1 + 1 + 64 || len > PICKET_PROTO_FENCE_TOKEN_MAX || fence < 1)
    return 0;
  if (kinds == PICKET_PROTO_FENCE_KIND_BY_NAME) kinds = picket_proto_fence_kind_of_name(lock);
  const char *kind = NULL, *kid;
  if (strncmp(token, "v2.", 3) == 0) {
    const char *dot = memchr(token + 3, '.', len - 3);
    if (dot == NULL) return 0;
    size_t kn = (size_t)(dot - token - 3);
    unsigned k = kind_parse(token + 3, kn);
    if (k == 0 || !(kinds & k)) return 0; /* not a kind this verifier takes */
    kind = picket_proto_fence_kind_name(k);
    kid = dot + 1;
  } else if (strncmp(token, "v1.", 3) == 0 && ks->accept_v1) {
    kid = token + 3; /* no kind signed: only during an upgrade (proto/README.md) */
  } else {
    return 0;
  }
  size_t rest = len - (size_t)(kid - token);
  if (rest < 1 + 1 + 64) return 0;
  size_t kl = rest - 1 - 64;
  if (kid[kl] != '.' || !kid_valid(kid, kl)) return 0;
  const picket_proto_fence_key *k = NULL;
  for (int i = 0; i < ks->n; i++)
    if (strlen(ks->keys[i].kid) == kl && memcmp(ks->keys[i].kid, kid, kl) == 0) k = &ks->keys[i];
  char mac[65];
  if (k == NULL || mac_hex(k, kind, prefix, lock, fence, mac) < 0) return 0;
  /* constant time: the position of the first wrong digit stays unknown */
  unsigned diff = 0;
  for (int i = 0; i < 64; i++) diff |= (unsigned char)(mac[i] ^ kid[kl + 1 + i]);
  return diff == 0;
}
