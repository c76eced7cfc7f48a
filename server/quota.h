/* quota.h: what one client may take of picketd's shared resources.
 *
 * A subject is one client as the limits see it: a token of --auth-file
 * ("token NAME"), or, without it, a client address ("ip ADDR"). It counts
 * the client's parked waiters and paces its acquires (a token bucket), and
 * carries its auth counters for /metrics. A token's max_leases is not
 * counted here but in the store, by the lock calls themselves (store.h), so it holds across several
 * picketd on one store; waiters and acquire rates are this process's
 * resources, so each picketd counts its own. */
#ifndef PICKETD_QUOTA_H
#define PICKETD_QUOTA_H

#include <stdint.h>

/* A client's limits; 0 means none. */
typedef struct {
  int64_t max_leases;   /* held at once (tokens only; the store counts them) */
  int64_t max_waiters;  /* parked at once */
  int64_t acquire_rate; /* acquires per second (bursts of up to one second's worth) */
} quota_limits;

typedef struct quota_subject quota_subject;

/* Why a request was denied, for picket_auth_denied_total{token,reason}. */
typedef enum {
  QUOTA_DENY_NO_TOKEN, QUOTA_DENY_BAD_TOKEN, QUOTA_DENY_UNKNOWN_TOKEN, /* 401 */
  QUOTA_DENY_VERB, QUOTA_DENY_PREFIX,                                   /* 403 */
  QUOTA_DENY_LEASES, QUOTA_DENY_WAITERS, QUOTA_DENY_RATE,               /* 429 */
  QUOTA_DENY_CONNECTIONS,                                               /* 429 */
  QUOTA_DENY_COUNT
} quota_deny;

/* The subject called `key` (at most 80 bytes are kept), made if new, with
 * its limits set to *limits. Returns a reference the caller gives back
 * with quota_put. Never NULL: when memory or the table's bound runs out,
 * all new clients share one subject ("overflow"), which is stricter, never
 * looser. */
quota_subject *quota_get(const char *key, const quota_limits *limits);
quota_subject *quota_ref(quota_subject *s);
void quota_put(quota_subject *s); /* NULL is allowed */

const quota_limits *quota_limits_of(const quota_subject *s);
/* The token's name for a "token NAME" subject, else NULL. */
const char *quota_token(const quota_subject *s);

/* Takes one acquire from the bucket: 0, or -1 with the wait until the next
 * one in *retry_after_ms. */
int quota_rate_take(quota_subject *s, int64_t *retry_after_ms);
/* Listings (GET /v1/locks) per second that every subject may make, in
 * bursts of up to a second's worth (--list-rate; 0: none). A listing
 * costs the store far more than an acquire (it reads up to a page's worth
 * of leases), so it is paced on its own, for tokens and addresses alike. */
void quota_set_list_rate(int64_t per_second);
int64_t quota_list_rate(void);
/* Takes one listing from s's bucket: 0, or -1 with the wait until the
 * next one in *retry_after_ms. */
int quota_list_take(quota_subject *s, int64_t *retry_after_ms);

/* Counts a parked waiter in: 0, or -1 when the subject has max_waiters. */
int quota_waiter_enter(quota_subject *s);
void quota_waiter_leave(quota_subject *s);

/* Counts a refusal against s's token, or (s NULL, or an address) against
 * token="": addresses are not labels, or one scrape would grow with every
 * address that ever called. */
void quota_count_denied(quota_subject *s, quota_deny why);
void quota_count_grant(quota_subject *s);

/* Appends the per-token families to a /metrics scrape: main.c registers
 * it with metrics_add_families (metrics.h). The rows labelled by a
 * token's name only when all_tenants (the reader sees every tenant). */
struct metrics_buf;
void quota_render_metrics(struct metrics_buf *b, int all_tenants);

#endif
