/* quota.c: per-client subjects and their limits (see quota.h).
 *
 * Subjects live in one hash table under one mutex, held only to find,
 * make or free an entry; the counters themselves are atomics or a
 * per-subject mutex, so two clients never wait on each other's limits.
 * An entry is freed when nothing refers to it and nothing of its state
 * matters any more: no waiter, and a bucket that would be full again. A
 * client whose entry went away comes back to a full bucket, which it
 * would have had anyway. The table is bounded (SUBJECTS_MAX): past it,
 * new clients share the overflow subject, so a flood of addresses costs
 * picketd a fixed amount of memory and its authors a shared, small limit. */
#include "quota.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"

#define BUCKETS 1024
#define SUBJECTS_MAX 65536
#define KEY_MAX 80

static const char *const deny_names[QUOTA_DENY_COUNT] = {
    "no_token", "bad_token", "unknown_token", "verb", "prefix",
    "too_many_leases", "too_many_waiters", "rate_limited", "too_many_connections"};
static atomic_ulong anonymous_denied[QUOTA_DENY_COUNT]; /* token="" */

/* A token bucket: refilled at `rate` per second up to one second's worth. */
typedef struct {
  double tokens;
  int64_t refilled_us;
} quota_bucket;

struct quota_subject {
  char key[KEY_MAX + 1];
  quota_limits limits;     /* written under table_mu (quota_get), read racily: ints */
  int refs;                /* under table_mu */
  atomic_long waiters;
  pthread_mutex_t mu;      /* the buckets */
  quota_bucket acquires;   /* limits.acquire_rate */
  quota_bucket listings;   /* list_rate: GET /v1/locks */
  atomic_ulong denied[QUOTA_DENY_COUNT];
  atomic_ulong grants;
  struct quota_subject *next;
};

static _Atomic int64_t list_rate; /* quota_set_list_rate */
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static quota_subject *table[BUCKETS];
static long nsubjects;
static quota_subject overflow = {.key = "overflow", .refs = 1, .mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static unsigned hash(const char *s) {
  unsigned h = 2166136261u; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h % BUCKETS;
}

/* 1 when s holds nothing worth keeping: no reference, no waiter, and
 * buckets that a second without calls has filled again. */
static int idle(quota_subject *s, int64_t now) {
  if (s->refs > 0 || atomic_load(&s->waiters) > 0) return 0;
  pthread_mutex_lock(&s->mu);
  int full = (s->limits.acquire_rate <= 0 || now - s->acquires.refilled_us >= 1000000) &&
             (atomic_load(&list_rate) <= 0 || now - s->listings.refilled_us >= 1000000);
  pthread_mutex_unlock(&s->mu);
  return full;
}

/* Frees the idle entries of one chain. Under table_mu. */
static void sweep(unsigned b, int64_t now) {
  for (quota_subject **p = &table[b]; *p;) {
    quota_subject *s = *p;
    if (!idle(s, now)) {
      p = &s->next;
      continue;
    }
    *p = s->next;
    pthread_mutex_destroy(&s->mu);
    free(s);
    nsubjects--;
  }
}

quota_subject *quota_get(const char *key, const quota_limits *limits) {
  unsigned b = hash(key);
  int64_t now = now_us();
  pthread_mutex_lock(&table_mu);
  sweep(b, now);
  quota_subject *s = table[b];
  while (s && strncmp(s->key, key, KEY_MAX) != 0) s = s->next;
  if (s == NULL && nsubjects < SUBJECTS_MAX && (s = calloc(1, sizeof *s)) != NULL) {
    strncpy(s->key, key, KEY_MAX);
    pthread_mutex_init(&s->mu, NULL);
    s->acquires = (quota_bucket){(double)limits->acquire_rate, now};
    s->listings = (quota_bucket){(double)atomic_load(&list_rate), now};
    s->next = table[b];
    table[b] = s;
    nsubjects++;
  }
  if (s == NULL) s = &overflow;
  s->limits = *limits;
  s->refs++;
  pthread_mutex_unlock(&table_mu);
  return s;
}

quota_subject *quota_ref(quota_subject *s) {
  pthread_mutex_lock(&table_mu);
  s->refs++;
  pthread_mutex_unlock(&table_mu);
  return s;
}

void quota_put(quota_subject *s) {
  if (s == NULL) return;
  pthread_mutex_lock(&table_mu);
  s->refs--;
  /* freed by a later sweep of its chain: an address that comes back
   * within the second must find its bucket as it left it */
  pthread_mutex_unlock(&table_mu);
}

const quota_limits *quota_limits_of(const quota_subject *s) { return &s->limits; }

const char *quota_token(const quota_subject *s) {
  return strncmp(s->key, "token ", 6) == 0 ? s->key + 6 : NULL;
}

/* Takes one call from b (of s) at `rate` per second: 0, or -1 with the
 * wait until the next one in *retry_after_ms. */
static int bucket_take(quota_subject *s, quota_bucket *b, int64_t rate, int64_t *retry_after_ms) {
  if (rate <= 0) return 0;
  pthread_mutex_lock(&s->mu);
  int64_t now = now_us();
  b->tokens += (double)(now - b->refilled_us) * (double)rate / 1e6;
  if (b->tokens > (double)rate) b->tokens = (double)rate; /* a burst of one second at most */
  b->refilled_us = now;
  int ok = b->tokens >= 1.0;
  if (ok) b->tokens -= 1.0;
  else *retry_after_ms = (int64_t)((1.0 - b->tokens) * 1000.0 / (double)rate) + 1;
  pthread_mutex_unlock(&s->mu);
  return ok ? 0 : -1;
}

int quota_rate_take(quota_subject *s, int64_t *retry_after_ms) {
  return bucket_take(s, &s->acquires, s->limits.acquire_rate, retry_after_ms);
}

void quota_set_list_rate(int64_t per_second) { atomic_store(&list_rate, per_second); }
int64_t quota_list_rate(void) { return atomic_load(&list_rate); }

int quota_list_take(quota_subject *s, int64_t *retry_after_ms) {
  return bucket_take(s, &s->listings, atomic_load(&list_rate), retry_after_ms);
}

int quota_waiter_enter(quota_subject *s) {
  int64_t max = s->limits.max_waiters;
  long n = atomic_fetch_add(&s->waiters, 1);
  if (max > 0 && n >= max) {
    atomic_fetch_sub(&s->waiters, 1);
    return -1;
  }
  return 0;
}

void quota_waiter_leave(quota_subject *s) { atomic_fetch_sub(&s->waiters, 1); }

void quota_count_denied(quota_subject *s, quota_deny why) {
  atomic_fetch_add(s && quota_token(s) ? &s->denied[why] : &anonymous_denied[why], 1);
}

void quota_count_grant(quota_subject *s) { atomic_fetch_add(&s->grants, 1); }

void quota_render_metrics(struct metrics_buf *b, int all_tenants) {
  metrics_put(b, "# HELP picket_auth_denied_total Requests refused by authentication, "
                 "permissions or quotas, by token (\"\": none, or a client address) and reason.\n"
                 "# TYPE picket_auth_denied_total counter\n");
  for (int r = 0; r < QUOTA_DENY_COUNT; r++)
    metrics_put(b, "picket_auth_denied_total{token=\"\",reason=\"%s\"} %lu\n", deny_names[r],
                atomic_load(&anonymous_denied[r]));
  /* A token's name is one tenant's business: a metrics token scoped to
   * its own prefixes learns no other token's name, nor what it does. The
   * families stay (empty), so a scrape has the same shape for everyone. */
  pthread_mutex_lock(&table_mu);
  for (int i = 0; all_tenants && i < BUCKETS; i++)
    for (quota_subject *s = table[i]; s; s = s->next) {
      const char *t = quota_token(s);
      for (int r = QUOTA_DENY_VERB; t && r < QUOTA_DENY_COUNT; r++)
        metrics_put(b, "picket_auth_denied_total{token=\"%s\",reason=\"%s\"} %lu\n", t,
                    deny_names[r], atomic_load(&s->denied[r]));
    }
  metrics_put(b, "# HELP picket_grants_by_token_total New grants, by token.\n"
                 "# TYPE picket_grants_by_token_total counter\n");
  for (int i = 0; all_tenants && i < BUCKETS; i++)
    for (quota_subject *s = table[i]; s; s = s->next)
      if (quota_token(s))
        metrics_put(b, "picket_grants_by_token_total{token=\"%s\"} %lu\n", quota_token(s),
                    atomic_load(&s->grants));
  pthread_mutex_unlock(&table_mu);
}
