/* watch.c: `picket watch NAME`, a lock's events as they happen
 * (libpicket's picket_watch; docs/events.md), one line each: for people,
 * the UTC time, the event and its members as key=value; with --json,
 * {"event": TYPE, "data": {...}} with the data picketd sent. Heartbeats are
 * not shown: they only say that the stream is alive.
 *
 * It runs until SIGINT or SIGTERM (exit 0) or --count N events. The two
 * signals are blocked and taken by a thread of their own (sigwait), which
 * ends the process between two lines, never in the middle of one; the main
 * thread can then wait in libcurl's poll without a timeout. A signal that
 * was ignored when picket started (a background job of a script) stays
 * ignored, as for any program.
 *
 * A stream that ends after it started (picketd restarted, or this client
 * fell 8 KiB behind) is opened again with backoff while picketd is
 * unreachable, unavailable or busy; its first event, a new state, says
 * where the lock stands. A refusal (a bad name, a token without the read
 * verb, an older picketd without events) ends the command with the exit
 * code of the refusal, like every other command's. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define BACKOFF_MS 100     /* the first wait before opening a dropped stream again */
#define BACKOFF_MAX_MS 5000

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER; /* held while a line is written */
static sigset_t stop_set;

static void *on_stop_signal(void *arg) {
  int sig;
  while (sigwait(&stop_set, &sig) != 0) {
  }
  /* Not in the middle of a line (never unlocked), unless the line is stuck
   * in a full pipe: then a second is enough waiting. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 1;
  if (pthread_mutex_timedlock(&out_mu, &until) != 0) _exit(CLI_EXIT_OK);
  _exit(fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL);
}

/* Blocks SIGINT and SIGTERM (those not ignored) in this thread and every
 * thread made from now on, and starts the one that waits for them.
 * 0, or -1 with errno set. */
static int catch_stop_signals(void) {
  static const int sigs[] = {SIGINT, SIGTERM};
  sigemptyset(&stop_set);
  int any = 0;
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction old;
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaddset(&stop_set, sigs[i]);
    any = 1;
  }
  if (!any) return 0;
  pthread_t t;
  int e = pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
  if (e == 0) e = pthread_create(&t, NULL, on_stop_signal, NULL);
  if (e != 0) {
    errno = e;
    return -1;
  }
  pthread_detach(t);
  return 0;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* The event's data on one line (compact JSON), or NULL when out of memory. */
static char *data_line(const picket_event *ev, int with_type) {
  json_t *data = json_loads(ev->data, 0, NULL); /* libpicket checked it is an object */
  json_t *j = with_type ? json_pack("{s:s, s:o}", "event", ev->type_name, "data", data) : data;
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s;
}

/* " key=value": the value as it is when that reads unambiguously, else as
 * a JSON string (an owner may hold spaces, quotes or '='). */
static void put_text(const char *key, const char *v) {
  size_t n = strlen(v);
  if (n > 0 && strcspn(v, " \t\"'=\\") == n) {
    printf(" %s=%s", key, v);
    return;
  }
  json_t *s = json_string(v);
  char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
  printf(" %s=%s", key, q ? q : "\"?\"");
  free(q);
  json_decref(s);
}

static void put_int(const char *key, int64_t v) {
  if (v >= 0) printf(" %s=%lld", key, (long long)v);
}

/* One event as one line on stdout: 0, or -1 when out of memory. */
static int print_event(const picket_event *ev, int json) {
  if (json || ev->type == PICKET_EVENT_OTHER) {
    char *s = data_line(ev, json);
    if (s == NULL) return -1;
    if (json) {
      puts(s);
    } else { /* an event of a newer picketd: its name and data as they are */
      char when[64] = "-";
      if (ev->time_ms >= 0) cli_fmt_iso(when, sizeof when, ev->time_ms);
      printf("%s %s %s\n", when, ev->type_name[0] ? ev->type_name : "?", s);
    }
    free(s);
    return 0;
  }
  char when[64];
  cli_fmt_iso(when, sizeof when, ev->time_ms);
  printf("%s %s", when, ev->type_name);
  if (ev->type == PICKET_EVENT_STATE) printf(" held=%s", ev->held ? "true" : "false");
  put_int("fence", ev->fence);
  put_int("next_fence", ev->next_fence);
  if (ev->has_owner) put_text("owner", ev->owner);
  put_int("ttl_ms", ev->ttl_ms);
  if (ev->by[0] != '\0') put_text("by", ev->by);
  putchar('\n');
  return 0;
}

/* Opens the watch again after its stream ended, waiting *backoff_ms
 * first (doubled for the next time) and trying again while picketd is
 * unreachable, unavailable or busy. -1 with *w open, else the exit code
 * of a refusal. */
static int reopen(picket_client *c, const cli_args *a, const char *what, picket_watch **w,
                  int64_t *backoff_ms) {
  for (;;) {
    sleep_ms(*backoff_ms);
    *backoff_ms = *backoff_ms * 2 < BACKOFF_MAX_MS ? *backoff_ms * 2 : BACKOFF_MAX_MS;
    int err = picket_watch_open(c, a->name, w);
    if (err == 0) {
      fprintf(stderr, "picket: %s: watching again\n", what);
      return -1;
    }
    int rc = cli_report(c, what, err);
    if (err != PICKET_ETRANSPORT && err != PICKET_ETIMEDOUT && err != PICKET_EUNAVAIL &&
        err != PICKET_ELIMIT)
      return rc;
  }
}

int cli_watch(picket_client *c, const cli_args *a) {
  char what[300];
  snprintf(what, sizeof what, "watch %s", a->name);
  if (catch_stop_signals() != 0) {
    fprintf(stderr, "picket: %s: %s\n", what, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  picket_watch *w = NULL;
  int err = picket_watch_open(c, a->name, &w);
  if (err != 0) return cli_report(c, what, err);

  int rc = -1;
  int64_t shown = 0, backoff = BACKOFF_MS;
  while (rc < 0) {
    picket_event ev;
    err = picket_watch_next(w, &ev, -1);
    if (err == 0) {
      if (ev.type == PICKET_EVENT_HEARTBEAT) continue;
      if (ev.type == PICKET_EVENT_STATE) backoff = BACKOFF_MS; /* it works again */
      pthread_mutex_lock(&out_mu);
      int printed = print_event(&ev, a->json) == 0 && fflush(stdout) == 0;
      pthread_mutex_unlock(&out_mu);
      if (!printed) {
        fprintf(stderr, "picket: %s: writing the event: %s\n", what, strerror(errno));
        rc = CLI_EXIT_FAIL;
      } else if (a->count > 0 && ++shown >= a->count) {
        rc = CLI_EXIT_OK;
      }
      continue;
    }
    /* The stream is over: say why, and open another unless it was not
     * picketd's (another would be the same). */
    fprintf(stderr, "picket: %s: %s\n", what, picket_watch_error_message(w));
    picket_watch_close(w);
    w = NULL;
    rc = err == PICKET_EPROTO ? CLI_EXIT_FAIL : reopen(c, a, what, &w, &backoff);
  }
  picket_watch_close(w);
  return rc;
}
