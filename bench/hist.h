/* hist.h: the latency histogram of picket-bench.
 *
 * A log-linear histogram over nanoseconds (the HdrHistogram idea in a few
 * lines): 64 sub-buckets per power of two, so any reported percentile is
 * within 1/64 (1.6 %) of the true sample, memory is fixed (32 KiB) however
 * long the run, and recording is an increment with no lock. Each bench
 * thread owns one; the main thread merges them after the threads stop. */
#ifndef PICKET_BENCH_HIST_H
#define PICKET_BENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 6
#define HIST_SUB (1 << HIST_SUB_BITS)
#define HIST_BUCKETS (64 * HIST_SUB)

typedef struct {
  uint64_t n[HIST_BUCKETS];
  uint64_t count;
  uint64_t max_ns; /* exact, not bucketed */
} hist;

/* Adds one sample of ns nanoseconds. */
void hist_record(hist *h, uint64_t ns);
/* Adds every sample of src into dst. */
void hist_merge(hist *dst, const hist *src);
/* The value (ns) at or below which a fraction q (0..1) of the samples lie:
 * the upper edge of that sample's bucket, never above max_ns. 0 when empty. */
uint64_t hist_quantile(const hist *h, double q);

#endif
