/* log.c: formats and writes picketd's log lines (see log.h). One write(2)
 * per line, so lines from worker threads never interleave. */
#include "log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int log_level = LOG_INFO;
static int log_format = LOG_FORMAT_TEXT;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_setup(int level, int format) {
  log_level = level;
  log_format = format;
}

void log_write(int level, const char *fmt, ...) {
  char msg[1024], line[2048], ts[40];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  struct timeval tv;
  struct tm tm;
  gettimeofday(&tv, NULL);
  gmtime_r(&tv.tv_sec, &tm);
  size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(ts + n, sizeof ts - n, ".%03dZ", (int)(tv.tv_usec / 1000));

  const char *lv = level_names[level < 0 ? 0 : level > LOG_ERROR ? LOG_ERROR : level];
  int len;
  if (log_format == LOG_FORMAT_JSON) {
    json_t *j = json_pack("{s:s, s:s, s:s}", "ts", ts, "level", lv, "msg", msg);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    len = snprintf(line, sizeof line, "%s\n", s ? s : "{}");
    free(s);
    json_decref(j);
  } else {
    len = snprintf(line, sizeof line, "%s %-5s %s\n", ts, lv, msg);
  }
  if (len > (int)sizeof line - 1) len = (int)sizeof line - 1, line[len - 1] = '\n';
  if (write(STDERR_FILENO, line, (size_t)len) < 0) { /* nowhere left to report it */ }
}

const char *log_lease(const char *lease, char out[16]) {
  snprintf(out, 16, "%.8s…", lease ? lease : "");
  return out;
}
