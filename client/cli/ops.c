/* ops.c: the operators' commands of `picket`: ls (the held names, a table
 * or the listing's pages as JSON), show (one lock, for a person: who holds
 * it, since when, how often renewed, who waits) and break (end a lock's
 * lease now and move its fence past it).
 *
 * Unlike the one-shot lock commands, whose output is JSON for scripts,
 * these are read by people at 3 a.m.: a table and plain lines by default,
 * the API's JSON with --json. break changes who holds a lock, and nothing
 * undoes it, so it asks first on a terminal and needs --yes elsewhere
 * (main.c refuses a break without --yes when stdin is not a terminal,
 * before any request). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define LS_PAGES_MAX 10000 /* ls follows at most this many cursors */
#define LS_DEFAULT_LIMIT 100
#define CELL_MAX (PICKET_OWNER_BYTES_MAX + 1)

/* Wall-clock milliseconds since the Unix epoch (acquired_at is Redis's). */
static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A duration for people: 850ms, 4.2s, 27s, 4m12s, 2h05m, 3d04h. */
static void fmt_duration(char *buf, size_t cap, int64_t ms) {
  if (ms < 0) ms = 0;
  int64_t s = ms / 1000;
  if (ms < 1000)
    snprintf(buf, cap, "%lldms", (long long)ms);
  else if (ms < 10000)
    snprintf(buf, cap, "%lld.%llds", (long long)s, (long long)(ms % 1000 / 100));
  else if (s < 60)
    snprintf(buf, cap, "%llds", (long long)s);
  else if (s < 3600)
    snprintf(buf, cap, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  else if (s < 86400)
    snprintf(buf, cap, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  else
    snprintf(buf, cap, "%lldd%02lldh", (long long)(s / 86400), (long long)(s % 86400 / 3600));
}

void cli_fmt_iso(char *buf, size_t cap, int64_t ms) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  char day[32];
  gmtime_r(&t, &tm);
  strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, cap, "%s.%03lldZ", day, (long long)(ms % 1000));
}

/* A grant time as "4m12s" (its age by this machine's clock; a Redis clock
 * ahead of it reads as 0ms), or "-" when unknown. */
static void fmt_age(char *buf, size_t cap, int64_t at_ms, int64_t now_ms) {
  if (at_ms <= 0)
    snprintf(buf, cap, "-");
  else
    fmt_duration(buf, cap, now_ms - at_ms);
}

static void fmt_int_or_dash(char *buf, size_t cap, int64_t v) {
  if (v < 0)
    snprintf(buf, cap, "-");
  else
    snprintf(buf, cap, "%lld", (long long)v);
}

/* ---- ls ------------------------------------------------------------------ */

enum { COL_KIND, COL_NAME, COL_HOLDERS, COL_OWNER, COL_FENCE, COL_TTL, COL_AGE, COL_RENEWALS,
       COL_WAITERS, NCOLS };
static const char *const headers[NCOLS] = {"KIND", "NAME", "HOLDERS", "OWNER", "FENCE",
                                           "TTL", "AGE", "RENEWALS", "WAITERS"};
static const char *const kind_names[] = {[PICKET_KIND_LOCK] = "lock",
                                         [PICKET_KIND_SEMAPHORE] = "semaphore",
                                         [PICKET_KIND_RWLOCK] = "rwlock"};

/* Characters (not bytes) of UTF-8 text, for padding. */
static size_t text_width(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

static void entry_cells(const picket_lock_entry *e, int64_t now, char cells[NCOLS][CELL_MAX]) {
  snprintf(cells[COL_KIND], CELL_MAX, "%s", kind_names[e->kind]);
  snprintf(cells[COL_NAME], CELL_MAX, "%s", e->name);
  if (e->kind == PICKET_KIND_SEMAPHORE)
    snprintf(cells[COL_HOLDERS], CELL_MAX, "%lld/%lld", (long long)e->holders,
             (long long)e->limit);
  else
    snprintf(cells[COL_HOLDERS], CELL_MAX, "%lld", (long long)e->holders);
  snprintf(cells[COL_OWNER], CELL_MAX, "%s", e->has_owner ? e->owner : "-");
  fmt_int_or_dash(cells[COL_FENCE], CELL_MAX, e->fence);
  fmt_duration(cells[COL_TTL], CELL_MAX, e->ttl_ms);
  fmt_age(cells[COL_AGE], CELL_MAX, e->acquired_at_ms, now);
  fmt_int_or_dash(cells[COL_RENEWALS], CELL_MAX, e->renewals);
  fmt_int_or_dash(cells[COL_WAITERS], CELL_MAX, e->waiters);
}

/* A row, its columns padded to width and two spaces apart (a longer cell
 * than its column pushes the rest of its row on). */
static void print_row(const char *const cells[NCOLS], const size_t width[NCOLS]) {
  for (int k = 0; k < NCOLS; k++) {
    size_t w = text_width(cells[k]);
    fputs(cells[k], stdout);
    if (k + 1 < NCOLS) printf("%*s", (int)(w < width[k] ? width[k] - w + 2 : 2), "");
  }
  putchar('\n');
}

/* A page as the API's JSON: {"locks": [...], "cursor": ...}. */
static json_t *page_json(const picket_lock_list *page) {
  json_t *locks = json_array();
  for (size_t i = 0; locks && i < page->nentries; i++) {
    const picket_lock_entry *e = &page->entries[i];
    json_t *o = json_pack(
        "{ss ss sI so so sI so so sI}", "kind", kind_names[e->kind], "name", e->name, "holders",
        (json_int_t)e->holders, "owner", cli_string_or_null(e->has_owner ? e->owner : NULL),
        "fence", e->fence >= 0 ? json_integer(e->fence) : json_null(), "ttl_ms",
        (json_int_t)e->ttl_ms, "acquired_at",
        e->acquired_at_ms > 0 ? json_integer(e->acquired_at_ms) : json_null(), "renewals",
        e->renewals >= 0 ? json_integer(e->renewals) : json_null(), "waiters",
        (json_int_t)e->waiters);
    if (o && e->kind == PICKET_KIND_SEMAPHORE)
      json_object_set_new(o, "limit", json_integer(e->limit));
    json_array_append_new(locks, o);
  }
  return json_pack("{so so}", "locks", locks, "cursor", cli_string_or_null(page->cursor));
}

int cli_ls(picket_client *c, const cli_args *a) {
  int limit = a->limit > 0 ? (int)a->limit : LS_DEFAULT_LIMIT;
  char cursor[PICKET_LIST_CURSOR_MAX + 1] = "";
  char cells[NCOLS][CELL_MAX];
  const char *row[NCOLS];
  size_t width[NCOLS] = {0};
  int64_t shown = 0, now = wall_ms();
  int widths_set = 0;
  char what[300];
  snprintf(what, sizeof what, "ls%s%s", a->prefix ? " " : "", a->prefix ? a->prefix : "");

  /* Without --all, one page's worth: a page may come back short while
   * more follow (Redis Cluster), so go on until `limit` names or the end. */
  for (int pages = 0;; pages++) {
    if (pages == LS_PAGES_MAX) {
      fprintf(stderr, "picket: %s: stopped after %d pages; more names follow\n", what, pages);
      return CLI_EXIT_FAIL;
    }
    picket_lock_list page;
    int ask = a->all ? limit : (int)(limit - shown);
    int err = picket_list(c, a->prefix, ask, cursor[0] ? cursor : NULL, &page);
    if (err != 0) return cli_report(c, what, err);
    if (a->json) {
      int rc = cli_print_json(page_json(&page));
      if (rc != CLI_EXIT_OK) {
        picket_lock_list_clear(&page);
        return rc;
      }
    } else {
      /* Column widths come from the first rows, so pages line up; a
       * longer cell later only pushes its own row. */
      if (!widths_set && (page.nentries > 0 || page.cursor == NULL)) {
        for (int k = 0; k < NCOLS; k++) width[k] = strlen(headers[k]);
        width[COL_KIND] = strlen("semaphore"); /* whatever kinds come later */
        for (size_t i = 0; i < page.nentries; i++) {
          entry_cells(&page.entries[i], now, cells);
          for (int k = 0; k < NCOLS; k++)
            if (text_width(cells[k]) > width[k]) width[k] = text_width(cells[k]);
        }
        print_row(headers, width);
        widths_set = 1;
      }
      for (size_t i = 0; i < page.nentries; i++) {
        entry_cells(&page.entries[i], now, cells);
        for (int k = 0; k < NCOLS; k++) row[k] = cells[k];
        print_row(row, width);
      }
    }
    shown += (int64_t)page.nentries;
    snprintf(cursor, sizeof cursor, "%s", page.cursor ? page.cursor : "");
    picket_lock_list_clear(&page);
    if (cursor[0] == '\0' || (!a->all && shown >= limit)) break;
  }
  if (fflush(stdout) != 0) return CLI_EXIT_FAIL;
  if (!a->json && cursor[0] != '\0')
    fprintf(stderr, "picket: %s: more names follow (--all lists them all)\n", what);
  return CLI_EXIT_OK;
}

/* ---- show ------------------------------------------------------------------ */

int cli_show(picket_client *c, const cli_args *a) {
  picket_lock_info info;
  char what[300], ttl[32], age[32], iso[64];
  snprintf(what, sizeof what, "show %s", a->name);
  int err = picket_inspect(c, a->name, &info);
  if (err != 0) return cli_report(c, what, err);
  if (a->json)
    return cli_print_json(json_pack(
        "{ss sb sI sI so so so so}", "lock", a->name, "held", info.held, "fence",
        (json_int_t)info.fence, "ttl_ms", (json_int_t)info.ttl_ms, "owner",
        cli_string_or_null(info.has_owner ? info.owner : NULL), "acquired_at",
        info.acquired_at_ms > 0 ? json_integer(info.acquired_at_ms) : json_null(), "renewals",
        info.renewals >= 0 ? json_integer(info.renewals) : json_null(), "waiters",
        info.waiters >= 0 ? json_integer(info.waiters) : json_null()));
  printf("lock:      %s\n", a->name);
  printf("held:      %s\n", info.held ? "yes" : "no");
  printf("owner:     %s\n", info.held && info.has_owner ? info.owner : "-");
  printf("fence:     %lld%s\n", (long long)info.fence,
         info.held ? "" : info.fence ? " (the last issued)" : " (never granted)");
  fmt_duration(ttl, sizeof ttl, info.ttl_ms);
  printf("ttl:       %s\n", info.held ? ttl : "-");
  if (info.acquired_at_ms > 0) {
    fmt_age(age, sizeof age, info.acquired_at_ms, wall_ms());
    cli_fmt_iso(iso, sizeof iso, info.acquired_at_ms);
    printf("acquired:  %s ago (%s)\n", age, iso);
  } else {
    printf("acquired:  -\n");
  }
  fmt_int_or_dash(age, sizeof age, info.renewals);
  printf("renewals:  %s\n", age);
  fmt_int_or_dash(age, sizeof age, info.waiters);
  printf("waiters:   %s\n", age);
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ---- break ----------------------------------------------------------------- */

/* Asks on the terminal (stdin) whether to break, saying what breaking
 * does and who holds the lock now. 0: yes; else the exit code. */
static int confirm_break(picket_client *c, const cli_args *a, const char *what) {
  picket_lock_info info;
  char line[64];
  int err = picket_inspect(c, a->name, &info);
  if (err != 0) return cli_report(c, what, err);
  if (info.held)
    fprintf(stderr,
            "Break lock '%s', held by %s%s%s (fence %lld)? Its lease ends now, its fence moves "
            "past it, and a store that checks fences refuses the holder's writes. [y/N] ",
            a->name, info.has_owner ? "owner '" : "a lease with no owner",
            info.has_owner ? info.owner : "", info.has_owner ? "'" : "", (long long)info.fence);
  else
    fprintf(stderr, "Lock '%s' is not held. Move its fence on (past %lld) all the same? [y/N] ",
            a->name, (long long)info.fence);
  fflush(stderr);
  if (fgets(line, sizeof line, stdin) == NULL) line[0] = '\0';
  size_t n = strcspn(line, "\r\n");
  line[n] = '\0';
  for (size_t i = 0; i < n; i++) line[i] = (char)tolower((unsigned char)line[i]);
  if (strcmp(line, "y") == 0 || strcmp(line, "yes") == 0) return 0;
  fprintf(stderr, "picket: %s: not confirmed; nothing was done\n", what);
  return CLI_EXIT_FAIL;
}

int cli_break(picket_client *c, const cli_args *a) {
  picket_break_result r;
  char what[300];
  snprintf(what, sizeof what, "break %s", a->name);
  int rc;
  if (!a->yes && (rc = confirm_break(c, a, what)) != 0) return rc;
  int err = picket_break(c, a->name, &r);
  if (err != 0) return cli_report(c, what, err);
  if (a->json)
    return cli_print_json(json_pack("{ss sb sI so}", "lock", a->name, "broken", r.broken, "fence",
                                    (json_int_t)r.fence, "owner",
                                    cli_string_or_null(r.has_owner ? r.owner : NULL)));
  if (r.broken && r.has_owner)
    printf("broken: lock %s; the lease of owner '%s' ended; its fence is now %lld\n", a->name,
           r.owner, (long long)r.fence);
  else if (r.broken)
    printf("broken: lock %s; its lease (no owner) ended; its fence is now %lld\n", a->name,
           (long long)r.fence);
  else
    printf("not broken: lock %s was not held; its fence is now %lld\n", a->name,
           (long long)r.fence);
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
