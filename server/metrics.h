/* metrics.h: picketd's counters, gauges and histograms, served at /metrics
 * in the Prometheus text format. Every update is one relaxed atomic add, so
 * worker threads never take a lock to count. Only what every backend has
 * is here: a backend's own metrics are its families, which it registers
 * with metrics_add_families at store_init (as quota.c and holds.c do). */
#ifndef PICKETD_METRICS_H
#define PICKETD_METRICS_H

#include <stddef.h>

/* HTTP endpoints, for picket_http_requests_total{endpoint}: the rows; their
 * labels come from the route table (routes.c, metrics_endpoint_name). */
typedef enum {
  EP_ACQUIRE, EP_RENEW, EP_RELEASE, EP_INSPECT, EP_HEALTHZ, EP_READYZ, EP_METRICS, EP_OPENAPI,
  EP_OTHER, EP_SEM_ACQUIRE, EP_SEM_RENEW, EP_SEM_RELEASE, EP_SEM_INSPECT, EP_RW_ACQUIRE,
  EP_RW_RENEW, EP_RW_RELEASE, EP_RW_INSPECT, EP_UI, EP_LIST, EP_BREAK, EP_WHOAMI, EP_EVENTS,
  EP_EL_CAMPAIGN, EP_EL_RENEW, EP_EL_RESIGN, EP_EL_INSPECT, EP_EL_PROCLAIM, EP_EL_OBSERVE, EP_COUNT
} metrics_endpoint;

/* Counters: X(enum, metric name, labels, help of the family). Rows of one
 * family sit together; the help is printed once per family. */
#define METRICS_COUNTER_MAP(X)                                                                   \
  X(ACQUIRE_GRANTED, "picket_acquire_total", "outcome=\"granted\"", "Acquire outcomes.")        \
  X(ACQUIRE_HELD, "picket_acquire_total", "outcome=\"held\"", "")                                \
  X(ACQUIRE_FULL, "picket_acquire_total", "outcome=\"semaphore_full\"", "")                                \
  X(ACQUIRE_DELAYED, "picket_acquire_total", "outcome=\"lock_delay\"", "")                                \
  X(ACQUIRE_ERROR, "picket_acquire_total", "outcome=\"error\"", "")                              \
  X(RENEW_RENEWED, "picket_renew_total", "outcome=\"renewed\"", "Renew outcomes; lease_lost is a holder that overran its TTL.") \
  X(RENEW_LOST, "picket_renew_total", "outcome=\"lease_lost\"", "")                              \
  X(RENEW_ERROR, "picket_renew_total", "outcome=\"error\"", "")                                  \
  X(RELEASE_RELEASED, "picket_release_total", "outcome=\"released\"", "Release outcomes; lease_lost is a holder that overran its TTL.") \
  X(RELEASE_LOST, "picket_release_total", "outcome=\"lease_lost\"", "")                          \
  X(RELEASE_ERROR, "picket_release_total", "outcome=\"error\"", "")                              \
  X(FENCE_TAMPERED_REPAIRED, "picket_fence_tampered_total", "action=\"repaired\"", "Fence counters found changed by another writer (below the live grant's fence, missing, or not a count): repaired in the same script (the call went on), or refused (no fence was certain: store_tampered).") \
  X(FENCE_TAMPERED_REFUSED, "picket_fence_tampered_total", "action=\"refused\"", "")           \
  X(BREAK_BROKEN, "picket_breaks_total", "outcome=\"broken\"", "Operator breaks (POST /v1/locks/NAME/break): broken ended a live lease, not_held found none; both moved the fence on. The log line names who broke it.") \
  X(BREAK_NOT_HELD, "picket_breaks_total", "outcome=\"not_held\"", "")                         \
  X(EVENTS_SENT, "picket_events_sent_total", "", "Events written to event streams (one per stream), heartbeats included.") \
  X(EVENTS_DROPPED, "picket_event_streams_dropped_total", "", "Event streams ended because their client fell too far behind.") \
  X(WAKE_RELEASE, "picket_wait_wakeups_total", "cause=\"release\"", "Waiter wake-ups by cause.") \
  X(WAKE_EXPIRY, "picket_wait_wakeups_total", "cause=\"expiry\"", "")                            \
  X(WAKE_TIMEOUT, "picket_wait_wakeups_total", "cause=\"timeout\"", "")                          \
  X(WAKE_DISCONNECT, "picket_wait_wakeups_total", "cause=\"disconnect\"", "")                    \
  X(WAIT_REJECTED, "picket_wait_rejected_total", "", "Waits refused with too_many_waiters.") \
  X(CONN_REFUSED_PER_IP, "picket_connections_refused_total", "reason=\"per_ip\"", "Client connections refused, by reason (per_ip: at accept, --max-connections-per-ip; per_token: answered 429 too_many_connections and closed, --max-connections-per-token).") \
  X(CONN_REFUSED_PER_TOKEN, "picket_connections_refused_total", "reason=\"per_token\"", "") \
  X(CONN_CUT_REQUEST_TIMEOUT, "picket_connections_cut_total", "reason=\"request_timeout\"", "Client connections picketd closed, by reason (request_timeout: mid-request, past --request-timeout-ms; unauthenticated: the oldest without a token, to make room under --auth-file; token_removed: its token left --auth-file on SIGHUP).") \
  X(CONN_CUT_UNAUTHENTICATED, "picket_connections_cut_total", "reason=\"unauthenticated\"", "") \
  X(CONN_CUT_TOKEN_REMOVED, "picket_connections_cut_total", "reason=\"token_removed\"", "") \
  X(TLS_REFUSED_NO_CERT, "picket_tls_refused_total", "reason=\"no_certificate\"", "Requests refused 401 under --tls-client-ca, by reason.") \
  X(TLS_REFUSED_UNTRUSTED, "picket_tls_refused_total", "reason=\"untrusted\"", "")              \
  X(TLS_RELOAD_OK, "picket_tls_reloads_total", "outcome=\"ok\"", "SIGHUP reloads of the TLS files (failed: the old ones kept).") \
  X(TLS_RELOAD_FAILED, "picket_tls_reloads_total", "outcome=\"failed\"", "")

typedef enum {
#define METRICS_ENUM(e, name, labels, help) M_##e,
  METRICS_COUNTER_MAP(METRICS_ENUM)
#undef METRICS_ENUM
  M_COUNT
} metrics_counter;

typedef enum { G_WAITERS, G_INFLIGHT, G_CONNECTIONS, G_EVENT_STREAMS, G_STORE_UP, G_COUNT } metrics_gauge;
typedef enum { H_REQUEST, H_WAIT, H_COUNT } metrics_histogram;

/* Names row ep's endpoint label (a static string), before the first
 * scrape; a row never named is left out of scrapes. */
void metrics_endpoint_name(metrics_endpoint ep, const char *label);
void metrics_inc(metrics_counter c);
void metrics_add(metrics_counter c, long n);
void metrics_gauge_set(metrics_gauge g, long v);
void metrics_gauge_add(metrics_gauge g, long delta);
long metrics_gauge_get(metrics_gauge g);
void metrics_observe(metrics_histogram h, double seconds);
/* A scrape being rendered, for the subsystems that add their own families
 * (quota.c: per-token rows) to it. */
typedef struct metrics_buf metrics_buf;
void metrics_put(metrics_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One counter row of a family table: the metric's name, its labels (""
 * for none) and the family's help (on the family's first row). */
typedef struct {
  const char *name, *labels, *help;
} metrics_row;
/* Puts row's sample with value v, after the family's HELP and TYPE lines
 * when *family (the last row's name; "" before the first) is another. */
void metrics_put_counter(metrics_buf *b, const char **family, const metrics_row *row,
                         unsigned long v);
/* Puts a gauge family of one sample without labels. */
void metrics_put_gauge(metrics_buf *b, const char *name, const char *help, long v);
/* A subsystem's own families (quota.c: per-token rows), appended to every
 * scrape after picketd's. Registered at start, before the HTTP server
 * runs, so that metrics.c depends on nothing above it; at most 8.
 * all_tenants is metrics_render's: 0 leaves out every series that names
 * a tenant's token. (No series names a lock: see docs/security.md.) */
typedef void metrics_family_fn(metrics_buf *b, int all_tenants);
void metrics_add_families(metrics_family_fn *fn);
/* Counts one served request (status is the HTTP status sent). */
void metrics_request(metrics_endpoint ep, int status);

/* Renders everything in the Prometheus text format into a malloc'd string
 * (the caller frees it); *len gets its length. NULL if out of memory.
 * all_tenants: the reader may see every tenant (a token whose prefixes are
 * "*", or anyone without --auth-file), so the series labelled by token
 * name are included; a scoped metrics token gets the rest. */
char *metrics_render(size_t *len, int all_tenants);

#endif
