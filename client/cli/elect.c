/* elect.c: the election commands of `picket`: `elect NAME -- CMD`, which
 * campaigns and runs CMD only while it leads; `leader NAME`, who leads;
 * and `proclaim` and `resign`, a leader's one-shot calls by lease id.
 *
 * `picket elect` is `picket run` with a campaign for an acquire (an
 * election is a lease with a term, docs/elections.md): once it leads, the
 * lease goes to run.c's cli_run_lease, which exports it (PICKET_LOCK is
 * the election's name and PICKET_FENCE the term, so a command written for
 * `picket run` checks its writes unchanged; PICKET_ELECTION and
 * PICKET_TERM beside them), keeps it, stops the command when it is lost
 * (exit 76), and gives it up when the command exits, a resign that hands
 * the leadership to the next candidate at once.
 *
 * Why it campaigns again and again: picketd bounds a wait (--max-wait-ms,
 * 60 s by default), while a candidate without --wait waits for as long as
 * it takes. Each campaign carries the same lease id, chosen here once, so
 * a grant whose reply was lost (or that came as this side's timeout ran
 * out) is returned by the next campaign instead of leaving a leader that
 * nobody runs. While picketd is unreachable or unavailable it tries again
 * every second. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "picket_proto.h"

/* Each campaign's wait without --wait: picketd's default --max-wait-ms. */
#define ELECT_WAIT_MS PICKET_PROTO_MAX_WAIT_DEFAULT_MS
#define ELECT_RETRY_MS 1000 /* after picketd was unreachable or unavailable */
#define ELECT_QUICK_MS 100  /* a wait that ended sooner is followed by a pause */

static void sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Campaigns until it leads (or --wait runs out): 0 and *out, or the exit code. */
static int campaign(picket_client *c, const cli_args *a, const char *what,
                    picket_leadership **out) {
  char id[PICKET_PROTO_LEASE_LEN + 1];
  if (picket_proto_lease_new(id) != 0) {
    fprintf(stderr, "picket: %s: getrandom: %s\n", what, strerror(errno));
    return CLI_EXIT_RUN_FAIL;
  }
  int64_t until = picket_now_ms() + a->wait_ms;
  for (;;) {
    int64_t start = picket_now_ms(), wait = ELECT_WAIT_MS;
    if (a->wait_set) {
      wait = until - start;
      if (wait < 0) wait = 0;
      if (wait > ELECT_WAIT_MS) wait = ELECT_WAIT_MS;
    }
    picket_campaign_opts o = {.ttl_ms = a->ttl_ms, .wait_ms = wait, .owner = a->owner,
                              .lease_id = id, .value = a->value};
    int err = picket_campaign(c, a->name, &o, out);
    if (err == 0) return 0;
    int64_t now = picket_now_ms();
    int more = !a->wait_set || now < until;
    int transient = err == PICKET_EUNAVAIL || err == PICKET_ETRANSPORT || err == PICKET_ETIMEDOUT;
    if (more && err == PICKET_ELEADER) {
      /* a wait that came back at once (a picketd that does not wait)
       * must not become a busy loop */
      if (now - start < ELECT_QUICK_MS) sleep_ms(ELECT_QUICK_MS);
      continue;
    }
    if (more && transient && !a->wait_set) {
      cli_report(c, what, err);
      sleep_ms(ELECT_RETRY_MS);
      continue;
    }
    int rc = cli_report(c, what, err);
    return rc == CLI_EXIT_FAIL ? CLI_EXIT_RUN_FAIL : rc;
  }
}

int cli_elect(picket_client *c, const cli_args *a) {
  char what[300];
  snprintf(what, sizeof what, "elect %s", a->name);
  picket_leadership *l = NULL;
  int rc = campaign(c, a, what, &l);
  if (rc != 0) return rc;
  rc = cli_run_lease(c, a, what, picket_leadership_lease(l));
  picket_leadership_free(l);
  return rc;
}

int cli_leader(picket_client *c, const cli_args *a) {
  char what[300];
  picket_leader_info info;
  snprintf(what, sizeof what, "leader %s", a->name);
  int err = picket_leader(c, a->name, &info);
  if (err != 0) return cli_report(c, what, err);
  json_t *leader = json_null();
  if (info.has_leader)
    leader = json_pack("{sI so so sI sI}", "term", (json_int_t)info.term, "value",
                       cli_string_or_null(info.has_value ? info.value : NULL), "owner",
                       cli_string_or_null(info.has_owner ? info.owner : NULL), "since",
                       (json_int_t)info.since_ms, "ttl_ms", (json_int_t)info.ttl_ms);
  return cli_print_json(json_pack("{ss so sI sI}", "election", a->name, "leader", leader, "term",
                                  (json_int_t)info.last_term, "candidates",
                                  (json_int_t)info.candidates));
}

int cli_proclaim_resign(picket_client *c, const cli_args *a) {
  char what[300];
  int proclaim = strcmp(a->command, "proclaim") == 0;
  snprintf(what, sizeof what, "%s %s", a->command, a->name);
  picket_leadership *l = NULL;
  int err = picket_leadership_new(a->name, a->lease, &l);
  if (err == 0) err = proclaim ? picket_proclaim(c, l, a->value, a->ttl_ms) : picket_resign(c, l);
  int rc;
  if (err != 0)
    rc = cli_report(err == PICKET_EINVAL && l == NULL ? NULL : c, what, err);
  else if (proclaim)
    rc = cli_print_json(json_pack("{ss sI sI so}", "election", a->name, "term",
                                  (json_int_t)picket_leadership_term(l), "ttl_ms",
                                  (json_int_t)picket_lease_ttl_ms(picket_leadership_lease(l)),
                                  "value", cli_string_or_null(picket_leadership_value(l))));
  else
    rc = cli_print_json(json_pack("{ss sb}", "election", a->name, "resigned", 1));
  picket_leadership_free(l);
  return rc;
}
