/* events.c: picket_watch, a lock's events as picketd streams them (GET
 * /v1/locks/{name}/events, Server-Sent Events; docs/events.md) or an
 * election's leader events (GET /v1/elections/{name}/observe: the same
 * stream with events of another name), and picket_event_ends, which says
 * when one of them ends a lease (a leader's too).
 *
 * Why libcurl's multi interface rather than the easy one the calls use: a
 * stream never ends by itself, so a blocking curl_easy_perform would leave
 * no way to wait "up to timeout_ms" for the next event, nor to end a wait
 * from another thread. Here picket_watch_next polls the one transfer for
 * at most what is left of its timeout, and picket_watch_interrupt wakes
 * that poll at once (curl_multi_wakeup). The transfer's progress callback
 * checks the same flag and the client's abort flag (a keeper's stop), so
 * libcurl itself stops the transfer too.
 *
 * Why memory stays bounded whatever the server sends: received bytes wait
 * in one fixed buffer (BUF_CAP) until picket_watch_next reads events out
 * of it; when it is full the write callback pauses the transfer (libcurl
 * keeps that chunk and hands it over again once resumed). A line, or the
 * data of one event, longer than PICKET_EVENT_LINE_MAX ends the watch:
 * picketd's are far shorter, so such a stream is not picketd's.
 *
 * A watch takes from its client only the settings (server, token, TLS
 * files, connect timeout) and, when opening, a place for the detail of a
 * refusal; after that it is on its own, with its own connection. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "picket_proto.h"

/* Received bytes not yet read. More than a whole line and a whole chunk
 * of libcurl's (CURL_MAX_WRITE_SIZE, 16 KiB), so a pause always ends. */
#define BUF_CAP (64 * 1024)
#define URL_MAX 1024
/* A poll never waits longer than this, so that a client's abort flag is
 * seen even by a watch nobody interrupts (a keeper's stop does both). */
#define POLL_SLICE_MS 1000

struct picket_watch {
  CURL *easy;
  CURLM *multi;
  struct curl_slist *headers;
  char name[PICKET_NAME_MAX + 1];
  const atomic_int *abort_flag; /* the client's (a keeper's stop), or NULL */
  atomic_int interrupted;       /* picket_watch_interrupt was called */
  int64_t head_timeout_ms;      /* for the reply's head: the client's request timeout */
  char curl_err[CURL_ERROR_SIZE];
  /* The transfer. */
  long status;     /* the reply's, once its head is in; 0 before */
  int running;     /* 0 once libcurl says the transfer is over... */
  CURLcode result; /* ...and how it ended */
  int paused;      /* the write callback paused it: the buffer was full */
  char *buf;       /* BUF_CAP bytes: received and not read yet (a refusal: its body) */
  size_t len;
  /* The event being read: its event: field and its data: lines. */
  char type[32];
  int type_long; /* the event: field did not fit in type */
  int has_data;
  size_t data_len;
  char data[PICKET_EVENT_LINE_MAX + 1];
  char event_data[PICKET_EVENT_LINE_MAX + 1]; /* the last event's data (picket_event.data) */
  /* Once the watch is over: why. */
  int err;
  char message[512];
};

/* The members each kind of event must have (docs/events.md), beside
 * `time`, which all have. */
enum { M_NAME = 1, M_FENCE = 2, M_TTL = 4, M_HELD = 8, M_OWNER = 16, M_NEXT = 32, M_BY = 64,
       M_LEADER = 128 /* "election", "leader", "term": picket__leader_take */ };
static const struct {
  const char *name;
  int members;
} kinds[] = {
    [PICKET_EVENT_OTHER] = {"", 0},
    [PICKET_EVENT_STATE] = {"state", M_NAME | M_FENCE | M_TTL | M_HELD | M_OWNER},
    [PICKET_EVENT_GRANTED] = {"granted", M_NAME | M_FENCE | M_TTL | M_OWNER},
    [PICKET_EVENT_RENEWED] = {"renewed", M_NAME | M_FENCE | M_TTL},
    [PICKET_EVENT_RELEASED] = {"released", M_NAME | M_FENCE},
    [PICKET_EVENT_EXPIRED] = {"expired", M_NAME | M_FENCE},
    [PICKET_EVENT_BROKEN] = {"broken", M_NAME | M_FENCE | M_NEXT | M_BY},
    [PICKET_EVENT_HEARTBEAT] = {"heartbeat", 0},
    [PICKET_EVENT_LEADER] = {"leader", M_LEADER},
};

static int stopped(const picket_watch *w) {
  return atomic_load(&w->interrupted) || (w->abort_flag != NULL && atomic_load(w->abort_flag));
}

/* Ends the watch with err and a message; every later picket_watch_next
 * returns err. Returns -1. */
__attribute__((format(printf, 3, 4))) static int over(picket_watch *w, int err,
                                                      const char *fmt, ...) {
  if (w->err == 0) {
    va_list ap;
    va_start(ap, fmt);
    w->err = err;
    vsnprintf(w->message, sizeof w->message, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- libcurl's callbacks ------------------------------------------------- */

/* The blank line that ends a reply's head: its status is known. */
static size_t on_header(char *ptr, size_t size, size_t n, void *ud) {
  picket_watch *w = ud;
  size_t len = size * n;
  if (len <= 2 && (ptr[0] == '\r' || ptr[0] == '\n')) {
    long status = 0;
    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200) w->status = status; /* a 1xx head is followed by another */
  }
  return len;
}

static size_t on_data(char *ptr, size_t size, size_t n, void *ud) {
  picket_watch *w = ud;
  size_t len = size * n;
  if (w->status != 200) { /* a refusal's body: what fits is plenty */
    size_t take = len < BUF_CAP - 1 - w->len ? len : BUF_CAP - 1 - w->len;
    memcpy(w->buf + w->len, ptr, take);
    w->len += take;
    return len;
  }
  if (len > BUF_CAP - w->len) {
    if (w->len == 0) return 0; /* a chunk larger than the buffer: cannot be */
    w->paused = 1;
    return CURL_WRITEFUNC_PAUSE;
  }
  memcpy(w->buf + w->len, ptr, len);
  w->len += len;
  return len;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  return stopped(ud);
}

/* Moves the transfer on, first waiting up to wait_ms for its socket or a
 * wakeup (0: not at all). */
static void pump(picket_watch *w, int64_t wait_ms) {
  int running = 0, left;
  if (wait_ms > 0) curl_multi_poll(w->multi, NULL, 0, (int)wait_ms, NULL);
  curl_multi_perform(w->multi, &running);
  CURLMsg *m;
  while ((m = curl_multi_info_read(w->multi, &left)) != NULL)
    if (m->msg == CURLMSG_DONE) {
      w->running = 0;
      w->result = m->data.result;
    }
}

/* ---- open ---------------------------------------------------------------- */

int picket__watch_new(picket_client *c, int kind, const char *name, picket_watch **out) {
  int election = kind == PICKET__KIND_ELECTION;
  *out = NULL;
  if (c == NULL) return PICKET_EINVAL;
  picket__client_clear(c);
  if (name == NULL || !picket_proto_name_valid(name, strlen(name)) ||
      (election && strlen(name) > PICKET_ELECTION_NAME_MAX))
    return picket__client_fail(c, PICKET_EINVAL,
                               election ? "election names are 1-197 bytes of [A-Za-z0-9._:-]"
                                        : "lock names are 1-200 bytes of [A-Za-z0-9._:-]");
  picket_watch *w = calloc(1, sizeof *w);
  if (w == NULL || (w->buf = malloc(BUF_CAP)) == NULL || (w->easy = curl_easy_init()) == NULL ||
      (w->multi = curl_multi_init()) == NULL ||
      picket__client_stream_setup(c, w->easy, "text/event-stream", &w->headers, on_data,
                                  on_progress, w, w->curl_err) != 0) {
    picket_watch_close(w);
    return picket__client_fail(c, PICKET_ENOMEM, "out of memory");
  }
  strcpy(w->name, name);
  w->abort_flag = picket__client_abort_flag(c);
  w->head_timeout_ms = picket__client_request_timeout_ms(c);
  char url[URL_MAX];
  snprintf(url, sizeof url, election ? "%s/v1/elections/%s/observe" : "%s/v1/locks/%s/events",
           picket__client_base_url(c), name);
  curl_easy_setopt(w->easy, CURLOPT_URL, url);
  curl_easy_setopt(w->easy, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(w->easy, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(w->easy, CURLOPT_HEADERDATA, w);
  /* A connection that died without a word (a peer rebooted, a NAT forgot
   * it) is found by TCP; picketd's heartbeats only find it when it sends. */
  curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPINTVL, 10L);
  *out = w;
  return 0;
}

int picket__watch_connect(picket_watch *w, picket_client *c) {
  if (curl_multi_add_handle(w->multi, w->easy) != CURLM_OK)
    return picket__client_fail(c, PICKET_ENOMEM, "out of memory");
  w->running = 1;
  /* The head, or the whole of a refusal (JSON, small), or the end. */
  int64_t until = picket_now_ms() + w->head_timeout_ms;
  pump(w, 0);
  while (w->running && w->status != 200) {
    int64_t left = until - picket_now_ms();
    if (stopped(w)) return picket__client_fail(c, PICKET_ECANCELED, "the watch was interrupted");
    if (left <= 0 && w->status != 0) break; /* a refusal whose body does not end: its head will do */
    if (left <= 0) {
      char msg[96];
      snprintf(msg, sizeof msg, "no reply within %lld ms", (long long)w->head_timeout_ms);
      return picket__client_fail(c, PICKET_ETIMEDOUT, msg);
    }
    pump(w, left < POLL_SLICE_MS ? left : POLL_SLICE_MS);
  }
  if (w->status == 200) {
    char *type = NULL;
    curl_easy_getinfo(w->easy, CURLINFO_CONTENT_TYPE, &type);
    if (type == NULL || strncasecmp(type, "text/event-stream", 17) != 0) {
      char msg[160];
      snprintf(msg, sizeof msg, "a 200 reply of type '%.64s', not an event stream",
               type ? type : "");
      return picket__client_fail(c, PICKET_EPROTO, msg);
    }
    return 0; /* (a stream that already ended: picket_watch_next says so after its events) */
  }
  if (w->status != 0) {
    int err = picket__client_reply_error(c, w->status, w->buf, w->len);
    /* an older picketd: no such path. Callers fall back on this code. */
    return w->status == 404 ? PICKET_EUNSUPPORTED : err;
  }
  return picket__client_fail(c, picket__err_from_curl(w->result),
                             w->curl_err[0] ? w->curl_err : curl_easy_strerror(w->result));
}

static int watch_open(picket_client *c, int kind, const char *name, picket_watch **out) {
  int err = picket__watch_new(c, kind, name, out);
  if (err == 0 && (err = picket__watch_connect(*out, c)) != 0) {
    picket_watch_close(*out);
    *out = NULL;
  }
  return err;
}

int picket_watch_open(picket_client *c, const char *name, picket_watch **out) {
  return watch_open(c, PICKET__KIND_LOCK, name, out);
}

int picket_observe_open(picket_client *c, const char *name, picket_watch **out) {
  return watch_open(c, PICKET__KIND_ELECTION, name, out);
}

/* ---- reading events ------------------------------------------------------ */

/* Copies at most cap-1 bytes of UTF-8 s into buf, cut at a character's start. */
static void copy_cut(char *buf, size_t cap, const char *s) {
  size_t n = strlen(s);
  if (n >= cap) {
    n = cap - 1;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
}

/* A leader event's members into ev: held (a leader or not), fence (its
 * term, else the last term issued), owner and ttl_ms. 0, or -1 when
 * malformed. */
static int leader_event(const json_t *j, picket_event *ev) {
  picket_leader_info info;
  if (picket__leader_take(j, &info) < 0) return -1;
  ev->held = info.has_leader;
  ev->fence = info.has_leader ? info.term : info.last_term;
  ev->ttl_ms = info.ttl_ms;
  ev->has_owner = info.has_owner;
  memcpy(ev->owner, info.owner, sizeof ev->owner);
  return 0;
}

/* The event read so far into *ev: 1, or -1 when its data is not what
 * docs/events.md says for its kind (the watch is over). */
static int make_event(picket_watch *w, picket_event *ev) {
  size_t len = w->data_len - 1; /* the last data line's '\n' is not data */
  memcpy(w->event_data, w->data, len);
  w->event_data[len] = '\0';
  memset(ev, 0, sizeof *ev);
  ev->held = -1;
  ev->fence = ev->next_fence = ev->ttl_ms = ev->time_ms = -1;
  ev->data = w->event_data;
  /* no event: field means "message" (SSE); picketd always names them */
  snprintf(ev->type_name, sizeof ev->type_name, "%s",
           w->type_long ? "" : w->type[0] ? w->type : "message");
  for (int k = 1; k < (int)(sizeof kinds / sizeof kinds[0]); k++)
    if (strcmp(ev->type_name, kinds[k].name) == 0) ev->type = k;

  json_t *j = json_loadb(w->event_data, len, 0, NULL);
  if (!json_is_object(j)) {
    json_decref(j);
    return over(w, PICKET_EPROTO, "a '%s' event whose data is not a JSON object", ev->type_name);
  }
  int m = kinds[ev->type].members;
  /* a leader event names its election; the others their lock */
  const char *name = json_string_value(json_object_get(j, m & M_LEADER ? "election" : "name"));
  json_t *held = json_object_get(j, "held"), *by = json_object_get(j, "by");
  if (name != NULL && strlen(name) <= PICKET_NAME_MAX) strcpy(ev->name, name);
  ev->time_ms = picket__json_int(j, "time", 0);
  if (m & M_FENCE) ev->fence = picket__json_int(j, "fence", 0);
  if (m & M_NEXT) ev->next_fence = picket__json_int(j, "next_fence", 0);
  if (m & M_TTL) ev->ttl_ms = picket__json_int(j, "ttl_ms", 0);
  if (m & M_HELD) ev->held = json_is_boolean(held) ? json_is_true(held) : -1;
  if ((m & M_BY) && json_is_string(by)) copy_cut(ev->by, sizeof ev->by, json_string_value(by));
  int leader_ok = !(m & M_LEADER) || leader_event(j, ev) == 0;
  int ok = ev->type == PICKET_EVENT_OTHER ||
           (ev->time_ms >= 0 && leader_ok &&
            (!(m & (M_NAME | M_LEADER)) || (name && strcmp(name, w->name) == 0)) &&
            (!(m & M_FENCE) || ev->fence >= 0) && (!(m & M_NEXT) || ev->next_fence >= 0) &&
            (!(m & M_TTL) || ev->ttl_ms >= 0) && (!(m & M_HELD) || ev->held >= 0) &&
            (!(m & M_BY) || by == NULL || json_is_string(by)) &&
            (!(m & M_OWNER) || picket__json_owner(json_object_get(j, "owner"), &ev->has_owner,
                                                  ev->owner, sizeof ev->owner) == 0));
  json_decref(j);
  if (!ok)
    return over(w, PICKET_EPROTO, "a '%s' event without the members docs/events.md gives it "
                                  "(or of another lock)", ev->type_name);
  return 1;
}

/* One line (NUL-terminated, n bytes, its end not counted): 1 when it
 * completed an event (then in *ev), 0 when not, -1 when the watch is over. */
static int take_line(picket_watch *w, char *line, size_t n, picket_event *ev) {
  if (n == 0) { /* an empty line ends an event (none without data) */
    int r = w->has_data ? make_event(w, ev) : 0;
    w->type[0] = '\0';
    w->type_long = w->has_data = 0;
    w->data_len = 0;
    return r;
  }
  if (line[0] == ':') return 0; /* a comment */
  const char *value = "";
  char *colon = memchr(line, ':', n);
  if (colon != NULL) {
    *colon = '\0';
    value = colon[1] == ' ' ? colon + 2 : colon + 1;
  }
  size_t vlen = n - (size_t)(value - line);
  if (colon == NULL) vlen = 0;
  if (strcmp(line, "event") == 0) {
    w->type_long = vlen >= sizeof w->type;
    snprintf(w->type, sizeof w->type, "%.*s", w->type_long ? 0 : (int)vlen, value);
  } else if (strcmp(line, "data") == 0) {
    if (w->data_len + vlen + 1 > PICKET_EVENT_LINE_MAX)
      return over(w, PICKET_EPROTO, "an event with more than %d bytes of data",
                  PICKET_EVENT_LINE_MAX);
    memcpy(w->data + w->data_len, value, vlen);
    w->data_len += vlen;
    w->data[w->data_len++] = '\n';
    w->has_data = 1;
  } /* id:, retry: and unknown fields mean nothing here */
  return 0;
}

/* Reads the buffer's complete lines until one ends an event: 1 (the event
 * in *ev), 0 when more bytes are needed, -1 when the watch is over. */
static int take_event(picket_watch *w, picket_event *ev) {
  size_t pos = 0;
  int r = 0;
  while (r == 0) {
    char *line = w->buf + pos;
    size_t avail = w->len - pos, n = 0;
    while (n < avail && line[n] != '\n' && line[n] != '\r') n++;
    if (n > PICKET_EVENT_LINE_MAX) {
      r = over(w, PICKET_EPROTO, "a line longer than %d bytes", PICKET_EVENT_LINE_MAX);
      break;
    }
    if (n == avail) break; /* no line end yet */
    size_t end = n + 1;    /* \n, \r\n or \r ends a line */
    if (line[n] == '\r') {
      if (end == avail && w->running) break; /* a \n may follow */
      if (end < avail && line[end] == '\n') end++;
    }
    line[n] = '\0';
    r = take_line(w, line, n, ev);
    pos += end;
  }
  memmove(w->buf, w->buf + pos, w->len - pos);
  w->len -= pos;
  return r;
}

int picket_watch_next(picket_watch *w, picket_event *ev, int64_t timeout_ms) {
  int64_t until = timeout_ms < 0 ? INT64_MAX : picket_now_ms() + timeout_ms;
  for (int pumped = 0; w->err == 0;) {
    int r = take_event(w, ev);
    if (r > 0) return 0;
    if (r < 0) break;
    if (stopped(w)) {
      over(w, PICKET_ECANCELED, "the watch was interrupted");
      break;
    }
    if (w->paused) { /* take_event made room: what libcurl kept comes now */
      w->paused = 0;
      curl_easy_pause(w->easy, CURLPAUSE_CONT);
      continue;
    }
    if (!w->running) {
      if (w->result == CURLE_OK)
        over(w, PICKET_ETRANSPORT, "picketd ended the event stream");
      else
        over(w, picket__err_from_curl(w->result), "%s",
             w->curl_err[0] ? w->curl_err : curl_easy_strerror(w->result));
      break;
    }
    int64_t left = until - picket_now_ms();
    if (left <= 0 && pumped) return PICKET_ETIMEDOUT;
    pump(w, left <= 0 ? 0 : left < POLL_SLICE_MS ? left : POLL_SLICE_MS);
    pumped = 1;
  }
  return w->err;
}

void picket_watch_interrupt(picket_watch *w) {
  atomic_store(&w->interrupted, 1);
  curl_multi_wakeup(w->multi);
}

const char *picket_watch_error_message(const picket_watch *w) { return w->message; }

void picket_watch_close(picket_watch *w) {
  if (w == NULL) return;
  if (w->multi != NULL && w->easy != NULL) curl_multi_remove_handle(w->multi, w->easy);
  if (w->easy != NULL) curl_easy_cleanup(w->easy);
  if (w->multi != NULL) curl_multi_cleanup(w->multi);
  curl_slist_free_all(w->headers);
  free(w->buf);
  free(w);
}

int picket_event_ends(const picket_event *ev, int64_t fence) {
  switch (ev->type) {
  case PICKET_EVENT_EXPIRED:
  case PICKET_EVENT_BROKEN:
  case PICKET_EVENT_RELEASED:
    return ev->fence == fence;
  case PICKET_EVENT_GRANTED:
    return ev->fence != fence;
  case PICKET_EVENT_STATE:
  case PICKET_EVENT_LEADER: /* no leader, or another term */
    return ev->held == 0 || ev->fence != fence;
  default:
    return 0;
  }
}
