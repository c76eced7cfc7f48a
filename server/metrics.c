/* metrics.c: storage and rendering of picketd's metrics (see metrics.h).
 * Fixed arrays of C11 atomics: no allocation and no lock when counting;
 * rendering reads each value once with relaxed loads, which is all a
 * scrape needs. */
#include "metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const metrics_row counter_info[] = {
#define METRICS_INFO(e, name, labels, help) {name, labels, help},
    METRICS_COUNTER_MAP(METRICS_INFO)
#undef METRICS_INFO
};

/* The endpoint label of each row: the route table's (routes.c names them at
 * start), and the two that no route has. */
static const char *endpoint_names[EP_COUNT] = {[EP_OTHER] = "other", [EP_UI] = "ui"};

void metrics_endpoint_name(metrics_endpoint ep, const char *label) { endpoint_names[ep] = label; }

/* The statuses picketd sends; anything else is counted as "other". */
static const int statuses[] = {200, 400, 401, 403, 404, 405, 409, 411, 413, 415, 421, 429, 500, 502, 503};
#define NSTATUS (sizeof statuses / sizeof statuses[0])

static const char *const gauge_info[G_COUNT][2] = {
    {"picket_waiters", "Acquires waiting for a lock now."},
    {"picket_http_inflight_requests", "Requests being handled now (waiters included)."},
    {"picket_http_connections", "Open client connections."},
    {"picket_event_streams", "Open event streams (GET /v1/locks/NAME/events)."},
    {"picket_store_up", "1 when the last call to the store (whichever backend) of any worker succeeded."},
};

static const char *const hist_info[H_COUNT][2] = {
    {"picket_request_duration_seconds", "Time from request to reply, waits excluded."},
    {"picket_wait_duration_seconds", "Time waiting acquires spent waiting."},
};
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                0.1,    0.25,  0.5,    1,     2.5,   5,     10, 30, 60};
#define NBOUNDS (sizeof bounds / sizeof bounds[0])

static atomic_ulong counters[M_COUNT];
static atomic_ulong requests[EP_COUNT][NSTATUS + 1];
static atomic_long gauges[G_COUNT];
static struct {
  atomic_ulong buckets[NBOUNDS + 1];
  atomic_ulong count;
  atomic_ulong sum_us; /* microseconds, so the sum stays an integer atomic */
} hists[H_COUNT];

static metrics_family_fn *families[8];
static int nfamilies;

void metrics_add_families(metrics_family_fn *fn) {
  if (nfamilies < (int)(sizeof families / sizeof families[0])) families[nfamilies++] = fn;
}

void metrics_inc(metrics_counter c) { atomic_fetch_add_explicit(&counters[c], 1, memory_order_relaxed); }
void metrics_add(metrics_counter c, long n) { atomic_fetch_add_explicit(&counters[c], n, memory_order_relaxed); }
void metrics_gauge_set(metrics_gauge g, long v) { atomic_store_explicit(&gauges[g], v, memory_order_relaxed); }
void metrics_gauge_add(metrics_gauge g, long d) { atomic_fetch_add_explicit(&gauges[g], d, memory_order_relaxed); }
long metrics_gauge_get(metrics_gauge g) { return atomic_load_explicit(&gauges[g], memory_order_relaxed); }

void metrics_observe(metrics_histogram h, double seconds) {
  size_t i = 0;
  while (i < NBOUNDS && seconds > bounds[i]) i++;
  atomic_fetch_add_explicit(&hists[h].buckets[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&hists[h].count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&hists[h].sum_us, (unsigned long)(seconds * 1e6), memory_order_relaxed);
}

void metrics_request(metrics_endpoint ep, int status) {
  size_t i = 0;
  while (i < NSTATUS && statuses[i] != status) i++;
  atomic_fetch_add_explicit(&requests[ep][i], 1, memory_order_relaxed);
}

typedef struct metrics_buf {
  char *buf;
  size_t len, cap;
  int oom;
} sbuf;

void metrics_put(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    size_t ncap = b->cap * 2 + (size_t)(n > 0 ? n : 0);
    char *nb = realloc(b->buf, ncap);
    if (nb == NULL) {
      b->oom = 1;
      return;
    }
    b->buf = nb;
    b->cap = ncap;
  }
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void metrics_put_counter(sbuf *b, const char **family, const metrics_row *row, unsigned long v) {
  if (strcmp(*family, row->name) != 0) {
    *family = row->name;
    metrics_put(b, "# HELP %s %s\n# TYPE %s counter\n", row->name, row->help, row->name);
  }
  if (row->labels[0])
    metrics_put(b, "%s{%s} %lu\n", row->name, row->labels, v);
  else
    metrics_put(b, "%s %lu\n", row->name, v);
}

void metrics_put_gauge(sbuf *b, const char *name, const char *help, long v) {
  metrics_put(b, "# HELP %s %s\n# TYPE %s gauge\n%s %ld\n", name, help, name, name, v);
}

char *metrics_render(size_t *len, int all_tenants) {
  sbuf b = {malloc(8192), 0, 8192, 0};
  if (b.buf == NULL) return NULL;

  metrics_put(&b, "# HELP picket_http_requests_total HTTP requests by endpoint and status.\n"
          "# TYPE picket_http_requests_total counter\n");
  for (int e = 0; e < EP_COUNT; e++) {
    if (endpoint_names[e] == NULL) continue;
    for (size_t s = 0; s <= NSTATUS; s++) {
      unsigned long v = LOAD(requests[e][s]);
      if (v == 0 && s != 0) continue; /* keep the scrape short; 200 always shows */
      if (s < NSTATUS)
        metrics_put(&b, "picket_http_requests_total{endpoint=\"%s\",status=\"%d\"} %lu\n",
            endpoint_names[e], statuses[s], v);
      else
        metrics_put(&b, "picket_http_requests_total{endpoint=\"%s\",status=\"other\"} %lu\n",
            endpoint_names[e], v);
    }
  }

  const char *family = "";
  for (int c = 0; c < M_COUNT; c++) metrics_put_counter(&b, &family, &counter_info[c], LOAD(counters[c]));
  for (int g = 0; g < G_COUNT; g++) metrics_put_gauge(&b, gauge_info[g][0], gauge_info[g][1], LOAD(gauges[g]));

  for (int h = 0; h < H_COUNT; h++) {
    const char *n = hist_info[h][0];
    metrics_put(&b, "# HELP %s %s\n# TYPE %s histogram\n", n, hist_info[h][1], n);
    unsigned long cum = 0;
    for (size_t i = 0; i < NBOUNDS; i++) {
      cum += LOAD(hists[h].buckets[i]);
      metrics_put(&b, "%s_bucket{le=\"%g\"} %lu\n", n, bounds[i], cum);
    }
    cum += LOAD(hists[h].buckets[NBOUNDS]);
    metrics_put(&b, "%s_bucket{le=\"+Inf\"} %lu\n%s_sum %.6f\n%s_count %lu\n", n, cum, n,
        LOAD(hists[h].sum_us) / 1e6, n, LOAD(hists[h].count));
  }
  for (int i = 0; i < nfamilies; i++) families[i](&b, all_tenants);
  if (b.oom) {
    free(b.buf);
    return NULL;
  }
  *len = b.len;
  return b.buf;
}
