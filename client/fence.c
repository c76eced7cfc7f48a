/* fence.c: the in-process fence register of picket/fence.h, the storage
 * side of fencing for C services.
 *
 * A chained hash table maps each resource name to an entry holding the
 * highest fence admitted for it. Two levels of locking keep admits of
 * different resources independent: the table mutex guards lookups, inserts
 * and growth (short), and each entry has its own mutex, held across the
 * caller's write callback so that "check, write, record" is one step for
 * that resource. Entries are allocated one by one and never freed before
 * the register, so an entry pointer stays valid after the table mutex is
 * dropped, even while the bucket array grows.
 *
 * It also holds the verifier of signed fences (picket_fence_keys_*,
 * picket_fence_token_verify): a thin, validating wrapper around
 * proto/fence_token.c, which picketd signs with, so both sides share one
 * implementation of the format. */
#include "picket/fence.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picket_proto.h"

typedef struct fence_entry {
  struct fence_entry *next; /* bucket chain */
  pthread_mutex_t lock;     /* serialises check-write-record of this resource */
  int64_t highest;          /* highest admitted fence; guarded by `lock` */
  uint64_t hash;
  char name[];              /* NUL-terminated resource name */
} fence_entry;

struct picket_fence_register {
  pthread_mutex_t lock; /* guards buckets, nbuckets, count */
  fence_entry **buckets;
  size_t nbuckets;      /* a power of two */
  size_t count;
  size_t max;
};

#define FENCE_INITIAL_BUCKETS 64

/* FNV-1a: simple and fast on short names. It is not collision resistant:
 * a client that chooses resource names could pile them into one chain, but
 * never more of them than the register's cap, so the cost stays bounded. */
static uint64_t fence_hash(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ULL;
  }
  return h;
}

picket_fence_register *picket_fence_register_new(size_t max_resources) {
  picket_fence_register *reg = calloc(1, sizeof *reg);
  if (reg == NULL) return NULL;
  reg->buckets = calloc(FENCE_INITIAL_BUCKETS, sizeof *reg->buckets);
  if (reg->buckets == NULL || pthread_mutex_init(&reg->lock, NULL) != 0) {
    free(reg->buckets);
    free(reg);
    return NULL;
  }
  reg->nbuckets = FENCE_INITIAL_BUCKETS;
  reg->max = max_resources ? max_resources : PICKET_FENCE_DEFAULT_MAX_RESOURCES;
  return reg;
}

void picket_fence_register_free(picket_fence_register *reg) {
  if (reg == NULL) return;
  for (size_t i = 0; i < reg->nbuckets; i++) {
    fence_entry *e = reg->buckets[i];
    while (e != NULL) {
      fence_entry *next = e->next;
      pthread_mutex_destroy(&e->lock);
      free(e);
      e = next;
    }
  }
  pthread_mutex_destroy(&reg->lock);
  free(reg->buckets);
  free(reg);
}

int64_t picket_fence_parse(const char *s, size_t len) {
  int64_t v;
  return picket_proto_fence_parse(s, len, &v) ? v : 0;
}

/* Doubles the bucket array when the load passes 1. Called with reg->lock
 * held. On allocation failure the table just stays denser: still correct. */
static void fence_grow(picket_fence_register *reg) {
  size_t n = reg->nbuckets * 2;
  fence_entry **b = calloc(n, sizeof *b);
  if (b == NULL) return;
  for (size_t i = 0; i < reg->nbuckets; i++) {
    fence_entry *e = reg->buckets[i];
    while (e != NULL) {
      fence_entry *next = e->next;
      size_t j = e->hash & (n - 1);
      e->next = b[j];
      b[j] = e;
      e = next;
    }
  }
  free(reg->buckets);
  reg->buckets = b;
  reg->nbuckets = n;
}

/* Finds the entry of `name` (len bytes, already validated); with `create`
 * adds it when missing. Returns the entry, or NULL when it is missing and
 * was not created; *full is set when creation failed for want of room
 * (the cap, or memory). */
static fence_entry *fence_lookup(picket_fence_register *reg, const char *name, size_t len,
                                 int create, int *full) {
  uint64_t h = fence_hash(name, len);
  *full = 0;
  pthread_mutex_lock(&reg->lock);
  fence_entry *e = reg->buckets[h & (reg->nbuckets - 1)];
  while (e != NULL && (e->hash != h || strcmp(e->name, name) != 0)) e = e->next;
  if (e == NULL && create) {
    if (reg->count >= reg->max || (e = malloc(sizeof *e + len + 1)) == NULL) {
      *full = 1;
    } else if (pthread_mutex_init(&e->lock, NULL) != 0) {
      free(e);
      e = NULL;
      *full = 1;
    } else {
      e->highest = 0;
      e->hash = h;
      memcpy(e->name, name, len + 1);
      if (reg->count + 1 > reg->nbuckets) fence_grow(reg);
      size_t i = h & (reg->nbuckets - 1);
      e->next = reg->buckets[i];
      reg->buckets[i] = e;
      reg->count++;
    }
  }
  pthread_mutex_unlock(&reg->lock);
  return e;
}

/* The common start of check and admit: validates the arguments, zeroes
 * *highest, and finds (with `create`, adds) the entry into *out. Returns
 * MALFORMED, FULL, or ADMITTED meaning "go on" (*out may then be NULL for an
 * unknown resource when not creating). */
static picket_fence_verdict fence_enter(picket_fence_register *reg, const char *resource,
                                        int64_t fence, int create, fence_entry **out,
                                        int64_t *highest) {
  int full;
  *out = NULL;
  if (highest) *highest = 0;
  if (reg == NULL || resource == NULL || fence < 1) return PICKET_FENCE_MALFORMED;
  size_t len = strnlen(resource, PICKET_PROTO_NAME_MAX + 1);
  if (!picket_proto_name_valid(resource, len)) return PICKET_FENCE_MALFORMED;
  *out = fence_lookup(reg, resource, len, create, &full);
  return full ? PICKET_FENCE_FULL : PICKET_FENCE_ADMITTED;
}

picket_fence_verdict picket_fence_check(picket_fence_register *reg, const char *resource,
                                        int64_t fence, int64_t *highest) {
  fence_entry *e;
  /* A check never creates an entry: asking must not use up the cap. */
  picket_fence_verdict v = fence_enter(reg, resource, fence, 0, &e, highest);
  if (e == NULL) return v;
  pthread_mutex_lock(&e->lock);
  int64_t h = e->highest;
  pthread_mutex_unlock(&e->lock);
  if (highest) *highest = h;
  return fence >= h ? PICKET_FENCE_ADMITTED : PICKET_FENCE_STALE;
}

picket_fence_verdict picket_fence_admit(picket_fence_register *reg, const char *resource,
                                        int64_t fence, picket_fence_write_fn write, void *arg,
                                        int64_t *highest) {
  fence_entry *e;
  picket_fence_verdict v = fence_enter(reg, resource, fence, 1, &e, highest);
  if (e == NULL) return v;

  pthread_mutex_lock(&e->lock);
  if (fence < e->highest) {
    v = PICKET_FENCE_STALE;
  } else if (write != NULL && write(arg, e->name, fence) != 0) {
    v = PICKET_FENCE_WRITE_FAILED;
  } else {
    e->highest = fence;
    v = PICKET_FENCE_ADMITTED;
  }
  if (highest) *highest = e->highest;
  pthread_mutex_unlock(&e->lock);
  return v;
}

picket_fence_verdict picket_fence_claim(picket_fence_register *reg, const char *resource,
                                        int64_t fence, int64_t *highest) {
  return picket_fence_admit(reg, resource, fence, NULL, NULL, highest);
}

int64_t picket_fence_highest(picket_fence_register *reg, const char *resource) {
  int64_t h;
  picket_fence_check(reg, resource, 1, &h);
  return h;
}

size_t picket_fence_count(picket_fence_register *reg) {
  if (reg == NULL) return 0;
  pthread_mutex_lock(&reg->lock);
  size_t n = reg->count;
  pthread_mutex_unlock(&reg->lock);
  return n;
}

const char *picket_fence_verdict_str(picket_fence_verdict v) {
  switch (v) {
  case PICKET_FENCE_ADMITTED: return "admitted";
  case PICKET_FENCE_STALE: return "stale";
  case PICKET_FENCE_MALFORMED: return "malformed";
  case PICKET_FENCE_FULL: return "full";
  case PICKET_FENCE_WRITE_FAILED: return "write_failed";
  }
  return "unknown";
}

/* ---- signed fences ---- */

/* the public kinds are the contract's */
_Static_assert(PICKET_FENCE_KIND_LOCK == PICKET_PROTO_FENCE_KIND_LOCK &&
                   PICKET_FENCE_KIND_PERMIT == PICKET_PROTO_FENCE_KIND_PERMIT &&
                   PICKET_FENCE_KIND_READ == PICKET_PROTO_FENCE_KIND_READ &&
                   PICKET_FENCE_KIND_WRITE == PICKET_PROTO_FENCE_KIND_WRITE,
               "fence kinds");

struct picket_fence_keys {
  picket_proto_fence_keys k;
};

picket_fence_keys *picket_fence_keys_load(const char *path, char *err, size_t errlen) {
  char why[256];
  picket_fence_keys *keys = calloc(1, sizeof *keys);
  if (keys == NULL) {
    snprintf(why, sizeof why, "out of memory");
  } else if (path == NULL) {
    snprintf(why, sizeof why, "no key file given");
  } else if (picket_proto_fence_keys_load(path, &keys->k, why, sizeof why) == 0) {
    return keys;
  }
  picket_fence_keys_free(keys);
  if (err != NULL && errlen > 0) snprintf(err, errlen, "%s", why);
  return NULL;
}

void picket_fence_keys_free(picket_fence_keys *keys) {
  if (keys == NULL) return;
  /* volatile: the wipe of memory about to be freed is not optimised away */
  volatile unsigned char *p = (volatile unsigned char *)keys;
  for (size_t i = 0; i < sizeof *keys; i++) p[i] = 0;
  free(keys);
}

void picket_fence_keys_accept_v1(picket_fence_keys *keys, int on) {
  if (keys != NULL) keys->k.accept_v1 = on != 0;
}

int picket_fence_token_verify(const picket_fence_keys *keys, const char *prefix,
                              const char *lock, int64_t fence, const char *token) {
  return picket_fence_token_verify_kinds(keys, prefix, lock, fence, 0, token);
}

int picket_fence_token_verify_kinds(const picket_fence_keys *keys, const char *prefix,
                                    const char *lock, int64_t fence, unsigned kinds,
                                    const char *token) {
  if (prefix == NULL) prefix = PICKET_PROTO_KEY_PREFIX_DEFAULT;
  if (keys == NULL || lock == NULL || token == NULL || fence < 1) return 0;
  size_t pl = strnlen(prefix, PICKET_PROTO_KEY_PREFIX_MAX + 1);
  size_t ll = strnlen(lock, PICKET_PROTO_NAME_MAX + 1);
  if (!picket_proto_prefix_valid(prefix, pl) || !picket_proto_name_valid(lock, ll)) return 0;
  size_t tl = strnlen(token, PICKET_PROTO_FENCE_TOKEN_MAX + 1);
  if (kinds & ~(PICKET_FENCE_KIND_LOCK | PICKET_FENCE_KIND_PERMIT | PICKET_FENCE_KIND_READ |
                PICKET_FENCE_KIND_WRITE))
    return 0;
  return picket_proto_fence_token_verify(&keys->k, prefix, lock, fence, kinds, token, tl);
}
