/* hist.c: the log-linear latency histogram (see hist.h). Bucket index:
 * values below 2^HIST_SUB_BITS get one bucket each; above, the position of
 * the top bit picks the power of two and the next HIST_SUB_BITS bits pick
 * the sub-bucket. */
#include "hist.h"

static unsigned bucket_of(uint64_t v) {
  if (v < HIST_SUB) return (unsigned)v;
  unsigned top = 63u - (unsigned)__builtin_clzll(v); /* >= HIST_SUB_BITS */
  unsigned shift = top - HIST_SUB_BITS;
  unsigned sub = (unsigned)(v >> shift) & (HIST_SUB - 1);
  return (shift + 1) * HIST_SUB + sub;
}

/* The largest value that falls into bucket b. */
static uint64_t bucket_top(unsigned b) {
  if (b < HIST_SUB) return b;
  unsigned shift = b / HIST_SUB - 1;
  uint64_t sub = b % HIST_SUB;
  return (((uint64_t)HIST_SUB + sub + 1) << shift) - 1;
}

void hist_record(hist *h, uint64_t ns) {
  h->n[bucket_of(ns)]++;
  h->count++;
  if (ns > h->max_ns) h->max_ns = ns;
}

void hist_merge(hist *dst, const hist *src) {
  for (unsigned i = 0; i < HIST_BUCKETS; i++) dst->n[i] += src->n[i];
  dst->count += src->count;
  if (src->max_ns > dst->max_ns) dst->max_ns = src->max_ns;
}

uint64_t hist_quantile(const hist *h, double q) {
  if (h->count == 0) return 0;
  /* The rank of the sample we want, 1-based: ceil(q * count), at least 1. */
  uint64_t rank = (uint64_t)(q * (double)h->count);
  if ((double)rank < q * (double)h->count) rank++;
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (unsigned b = 0; b < HIST_BUCKETS; b++) {
    seen += h->n[b];
    if (seen >= rank) {
      uint64_t top = bucket_top(b);
      return top < h->max_ns ? top : h->max_ns;
    }
  }
  return h->max_ns;
}
