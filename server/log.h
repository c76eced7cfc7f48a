/* log.h: picketd's one logger. Every message goes through LOG(), which is
 * gated on the configured level before any formatting happens, so debug
 * logging costs a branch on the hot path (Redis serverLog does the same). */
#ifndef PICKETD_LOG_H
#define PICKETD_LOG_H

enum { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };
enum { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON };

extern int log_level;

void log_setup(int level, int format);
/* Writes one line to stderr (text or JSON). Use LOG(), not this. */
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A lease id fit for logs: its first 8 hex digits and "…". Lease ids are
 * secrets: whoever has one can release the lock. `out` needs 16 bytes. */
const char *log_lease(const char *lease, char out[16]);

#define LOG(level, ...)                                   \
  do {                                                    \
    if ((level) >= log_level) log_write(level, __VA_ARGS__); \
  } while (0)

#endif
