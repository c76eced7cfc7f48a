/* sse.h: a test's reader of picketd's lock event streams (GET
 * /v1/locks/{name}/events; docs/events.md), over a raw socket in
 * HTTP/1.0 so the body comes unchunked. Header-only, for Check tests:
 * picketd_events and fault_sentinel. */
#ifndef PICKET_TEST_SSE_H
#define PICKET_TEST_SSE_H

#include <arpa/inet.h>
#include <check.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

typedef struct {
  int fd;
  int status;
  char buf[65536];
  size_t len;
} stream;

/* Opens GET `path` (an event stream) on picketd p (HTTP/1.0: the body
 * comes unchunked); returns the status, the body's first bytes kept in s. */
static inline int stream_open_path(harness_picketd *p, const char *path, stream *s) {
  memset(s, 0, sizeof *s);
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)harness_picketd_port(p)),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(connect(s->fd, (struct sockaddr *)&a, sizeof a), 0);
  char req[512];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
  ck_assert_int_eq(write(s->fd, req, (size_t)n), n);
  int64_t t0 = harness_now_ms();
  char *end = NULL;
  while ((end = strstr(s->buf, "\r\n\r\n")) == NULL && harness_now_ms() - t0 < 5000) {
    struct pollfd pf = {.fd = s->fd, .events = POLLIN};
    if (poll(&pf, 1, 100) <= 0) continue;
    ssize_t got = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
    if (got <= 0) break;
    s->len += (size_t)got;
    s->buf[s->len] = '\0';
  }
  ck_assert_msg(end != NULL, "no response headers: %s", s->buf);
  sscanf(s->buf, "HTTP/1.%*d %d", &s->status);
  if (s->status == 200) ck_assert_ptr_nonnull(strstr(s->buf, "text/event-stream"));
  size_t head = (size_t)(end + 4 - s->buf);
  memmove(s->buf, s->buf + head, s->len - head + 1);
  s->len -= head;
  return s->status;
}

/* Opens GET /v1/locks/NAME/events on picketd p (stream_open_path). */
static inline int stream_open(harness_picketd *p, const char *name, stream *s) {
  char path[300];
  snprintf(path, sizeof path, "/v1/locks/%s/events", name);
  return stream_open_path(p, path, s);
}

/* The next event within timeout_ms: its type into type and its data
 * (NULL when none came; the caller json_decrefs it). */
static inline json_t *next_event(stream *s, char type[32], int timeout_ms) {
  int64_t t0 = harness_now_ms();
  for (;;) {
    char *end = strstr(s->buf, "\n\n");
    if (end) {
      type[0] = '\0';
      json_t *data = NULL;
      *end = '\0';
      for (char *line = s->buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strncmp(line, "event: ", 7) == 0) snprintf(type, 32, "%s", line + 7);
        if (strncmp(line, "data: ", 6) == 0) data = json_loads(line + 6, 0, NULL);
        line = nl ? nl + 1 : NULL;
      }
      size_t used = (size_t)(end + 2 - s->buf);
      memmove(s->buf, s->buf + used, s->len - used + 1);
      s->len -= used;
      if (data) return data;
      continue; /* a comment or retry line: not an event */
    }
    int left = timeout_ms - (int)(harness_now_ms() - t0);
    if (left <= 0) return NULL;
    struct pollfd pf = {.fd = s->fd, .events = POLLIN};
    if (poll(&pf, 1, left) <= 0) return NULL;
    ssize_t got = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
    if (got <= 0) return NULL;
    s->len += (size_t)got;
    s->buf[s->len] = '\0';
  }
}

/* The next event must be `want`: its data (the caller decrefs it). */
static inline json_t *expect_event(stream *s, const char *want, int timeout_ms) {
  char type[32] = "";
  json_t *d = next_event(s, type, timeout_ms);
  while (d && strcmp(want, "heartbeat") != 0 && strcmp(type, "heartbeat") == 0) {
    json_decref(d); /* heartbeats may come between any two events */
    d = next_event(s, type, timeout_ms);
  }
  ck_assert_msg(d != NULL, "no %s event within %d ms", want, timeout_ms);
  ck_assert_msg(strcmp(type, want) == 0, "expected %s, got %s", want, type);
  return d;
}

/* Opens a stream of NAME on p and takes its first event, the state. */
static inline void watch(harness_picketd *p, const char *name, stream *s) {
  ck_assert_int_eq(stream_open(p, name, s), 200);
  json_decref(expect_event(s, "state", 3000));
}

static inline void stream_close(stream *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

#endif
