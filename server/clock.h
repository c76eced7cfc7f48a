/* clock.h: the two clocks picketd reads, in milliseconds. Monotonic for
 * every deadline, timeout and backoff (it never steps); the wall clock only
 * for times shown to people and clients (grant times, event times). */
#ifndef PICKETD_CLOCK_H
#define PICKETD_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t clock_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
