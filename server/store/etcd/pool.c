/* pool.c: the etcd leases that grants share (pool.h says why and what a
 * shared lease may not do).
 *
 * One slot per TTL in use (at most POOL_SLOTS; the least recently used
 * goes when a new TTL needs a slot), each with a ring of leases. A lease
 * asked for at t0 (before the request left) for given_s seconds ends on
 * etcd's clock no sooner than lo = t0 + given_s, so a grant of ttl_s made
 * at t may go on it when lo >= t + ttl_s; it may when lo is also at most
 * POOL_SLACK_MS later, so that no grant outlives its TTL by more than
 * that (plus etcd's sweep). While a TTL is busy, the grant that finds the
 * ring's newest lease POOL_SLACK_MS old asks for the next one, of ttl_s +
 * 1 s: it serves the grants of a second later, one after another. A grant
 * that finds none close enough (the first second of a busy TTL, or a TTL
 * seldom used) gets a lease of its own, as before the pool. So under load
 * a TTL costs 1000 / POOL_SLACK_MS lease grants a second, not one per
 * acquire. The monotonic clock times it; etcd's leader counts a lease's
 * TTL on its own monotonic clock, and the two run at the same rate. */
#include <pthread.h>
#include <stdatomic.h>

#include "clock.h"
#include "pool.h"

#define POOL_SLOTS 32
/* A grant lives at most POOL_SLACK_MS past its TTL (plus a round trip
 * and etcd's sweep): leases shared by a TTL are granted POOL_SLACK_MS
 * apart while it is busy, each of TTL + 1 s, so that a second after the
 * first there is always one that ends between t + TTL and t + TTL +
 * POOL_SLACK_MS. */
#define POOL_SLACK_MS 200
#define POOL_RING (1000 / POOL_SLACK_MS + 2)
/* Busy: at least this many grants of one TTL in the last second; a TTL
 * used less often gets a lease per grant, as it did before the pool. */
#define POOL_BUSY 8

typedef struct {
  int64_t id;
  int64_t lo; /* mono ms: it ends on etcd's clock no sooner than this */
} pool_lease;

typedef struct {
  int64_t ttl_s;   /* 0: unused */
  pool_lease ring[POOL_RING];
  int n;
  int64_t last_t0; /* mono ms: when the newest of ring was asked for */
  int granting;    /* a thread is granting the next lease of the ring */
  int64_t win_start, win_calls; /* grants in the current second */
  int64_t used;    /* mono ms: last use, for eviction */
} pool_slot;

static pool_slot slots[POOL_SLOTS];
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long leases_granted, grants_placed, grants_shared;

static pool_slot *slot_of(int64_t ttl_s, int64_t now) {
  pool_slot *best = NULL;
  for (int i = 0; i < POOL_SLOTS; i++) {
    if (slots[i].ttl_s == ttl_s) return &slots[i];
    if (slots[i].granting) continue;
    if (best == NULL || slots[i].ttl_s == 0 || slots[i].used < best->used) best = &slots[i];
    if (slots[i].ttl_s == 0) break;
  }
  if (best) *best = (pool_slot){.ttl_s = ttl_s, .win_start = now, .used = now};
  return best;
}

/* Asks etcd for a lease of ttl_s: ETCD_OK with *id and *lo (no sooner
 * than t0 + what etcd gave, on the monotonic clock; etcd's leader counts
 * a lease's TTL on its own, at the same rate). */
static int grant(etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *lo) {
  int64_t t0 = clock_mono_ms(), given_s = 0;
  int rc = etcd_lease_grant(c, ttl_s, id, &given_s);
  if (rc != ETCD_OK) return rc;
  store_etcd_min_ttl_seen(ttl_s, given_s);
  atomic_fetch_add(&leases_granted, 1);
  *lo = t0 + given_s * 1000;
  return ETCD_OK;
}

int store_etcd_pool_lease(etcd_client *c, int64_t ttl_s, int64_t *id) {
  atomic_fetch_add(&grants_placed, 1);
  pthread_mutex_lock(&pool_mu);
  int64_t now = clock_mono_ms(), need = now + ttl_s * 1000;
  pool_slot *s = slot_of(ttl_s, now);
  int shared = 0, ahead = 0;
  if (s) {
    s->used = now;
    if (now - s->win_start >= 1000) s->win_start = now, s->win_calls = 0;
    s->win_calls++;
    /* the lease that ends soonest after need; those that end before it
     * are of no use to anyone any more */
    int best = -1, k = 0;
    for (int i = 0; i < s->n; i++) {
      if (s->ring[i].lo < need) continue;
      s->ring[k] = s->ring[i];
      if (best < 0 || s->ring[k].lo < s->ring[best].lo) best = k;
      k++;
    }
    s->n = k;
    if (best >= 0 && s->ring[best].lo - need <= POOL_SLACK_MS) {
      *id = s->ring[best].id;
      shared = 1;
    }
    /* busy: the lease that will serve a second from now */
    ahead = s->win_calls >= POOL_BUSY && !s->granting && s->n < POOL_RING &&
            now - s->last_t0 >= POOL_SLACK_MS;
    if (ahead) s->granting = 1;
  }
  pthread_mutex_unlock(&pool_mu);
  if (ahead) {
    int64_t nid = 0, lo = 0;
    int rc = grant(c, ttl_s + 1, &nid, &lo);
    pthread_mutex_lock(&pool_mu);
    s->granting = 0;
    if (rc == ETCD_OK && s->ttl_s == ttl_s && s->n < POOL_RING) {
      s->ring[s->n++] = (pool_lease){nid, lo};
      s->last_t0 = now;
    }
    pthread_mutex_unlock(&pool_mu);
  }
  if (shared) {
    atomic_fetch_add(&grants_shared, 1);
    return ETCD_OK;
  }
  int64_t lo; /* none ends soon enough after need: a lease of this grant's own */
  return grant(c, ttl_s, id, &lo);
}

void store_etcd_pool_drop(int64_t id) {
  if (id == 0) return;
  pthread_mutex_lock(&pool_mu);
  for (int i = 0; i < POOL_SLOTS; i++) {
    pool_slot *s = &slots[i];
    int k = 0;
    for (int j = 0; j < s->n; j++)
      if (s->ring[j].id != id) s->ring[k++] = s->ring[j];
    s->n = k;
  }
  pthread_mutex_unlock(&pool_mu);
}

void store_etcd_pool_counts(long *leases, long *grants, long *shared) {
  *leases = atomic_load(&leases_granted);
  *grants = atomic_load(&grants_placed);
  *shared = atomic_load(&grants_shared);
}
