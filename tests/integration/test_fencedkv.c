/* test_fencedkv.c: fenced-kv end to end, as a real process on a loopback
 * port with its SQLite file in a temp dir: every status of the contract in
 * DESIGN.md ("Validator and fenced-kv"), that a refused request changes
 * nothing (also when the database fails), its flags, the --no-fence plain
 * store, and that the highest fences survive a clean stop and a crash. */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* ---- one fenced-kv process ---- */

typedef struct {
  char dir[64];
  char db[128];
  char port_file[128];
  char log[128];
  char url[64];
  pid_t pid;
} fkv;

static const char *bin_path(void) {
  static char path[1024];
  const char *dir = getenv("PICKET_BIN_DIR");
  snprintf(path, sizeof path, "%s/fenced-kv", dir ? dir : "build/bin");
  return path;
}

/* fork+exec fenced-kv with argv[1..] = args, stderr to `log`. */
static pid_t spawn_fkv(const char *const *args, const char *log) {
  const char *argv[16] = {bin_path()};
  int n = 1;
  for (; args[n - 1] && n < 15; n++) argv[n] = args[n - 1];
  argv[n] = NULL;
  pid_t parent = getpid(), pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  return pid;
}

/* Starts fenced-kv on port 0 with the db in f->dir; waits for the port
 * file. `extra` is one more flag or NULL. */
static void fkv_start(fkv *f, const char *extra) {
  unlink(f->port_file);
  const char *args[] = {"--db", f->db, "--listen", "127.0.0.1:0", "--port-file", f->port_file,
                        extra, NULL};
  f->pid = spawn_fkv(args, f->log);
  ck_assert_int_gt(f->pid, 0);
  for (int i = 0; i < 1000; i++) {
    FILE *pf = fopen(f->port_file, "r");
    int port = 0;
    if (pf) {
      if (fscanf(pf, "%d", &port) != 1) port = 0;
      fclose(pf);
    }
    if (port > 0) {
      snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", port);
      return;
    }
    ck_assert_msg(waitpid(f->pid, NULL, WNOHANG) == 0, "fenced-kv exited at start");
    harness_sleep_ms(10);
  }
  ck_abort_msg("fenced-kv did not write its port file");
}

/* Stops it with `sig` and returns its exit code (128+signal if killed). */
static int fkv_stop(fkv *f, int sig) {
  int st;
  kill(f->pid, sig);
  while (waitpid(f->pid, &st, 0) < 0 && errno == EINTR) {
  }
  f->pid = 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static fkv *fkv_new(const char *extra) {
  fkv *f = calloc(1, sizeof *f);
  strcpy(f->dir, "/tmp/picket-fkv-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(f->dir));
  snprintf(f->db, sizeof f->db, "%s/kv.db", f->dir);
  snprintf(f->port_file, sizeof f->port_file, "%s/port", f->dir);
  snprintf(f->log, sizeof f->log, "%s/fenced-kv.log", f->dir);
  fkv_start(f, extra);
  return f;
}

static void fkv_free(fkv *f) {
  if (f->pid > 0) fkv_stop(f, SIGKILL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", f->dir);
  free(f);
}

/* ---- requests ---- */

static harness_resp R; /* the last reply; each request frees the one before */

/* One request with optional Picket-Lock, Picket-Fence and If-Match headers
 * (NULL leaves one out). Returns the status. */
static long req(fkv *f, const char *method, const char *path, const char *lock,
                const char *fence, const char *if_match, const char *body) {
  char h[3][256];
  const char *hs[4];
  int n = 0;
  if (lock) snprintf(h[n], sizeof h[n], "Picket-Lock: %s", lock), hs[n] = h[n], n++;
  if (fence) snprintf(h[n], sizeof h[n], "Picket-Fence: %s", fence), hs[n] = h[n], n++;
  if (if_match) snprintf(h[n], sizeof h[n], "If-Match: %s", if_match), hs[n] = h[n], n++;
  hs[n] = NULL;
  harness_resp_free(&R);
  ck_assert_int_eq(harness_http_h(f->url, method, path, body, hs, &R), 0);
  ck_assert_str_eq(R.content_type, "application/json");
  ck_assert_ptr_nonnull(R.json);
  return R.status;
}

static long put(fkv *f, const char *key, const char *lock, const char *fence, const char *value) {
  char path[512];
  snprintf(path, sizeof path, "/kv/%s", key);
  return req(f, "PUT", path, lock, fence, NULL, value);
}

/* A PUT with a body of `len` raw bytes (may hold NULs), outside the
 * harness (which sends C strings); `chunked` sends it without a length.
 * Returns the status. */
static long put_raw(fkv *f, const char *key, const char *body, size_t len, int chunked) {
  char url[512];
  snprintf(url, sizeof url, "%s/kv/%s", f->url, key);
  CURL *c = curl_easy_init();
  struct curl_slist *hl = curl_slist_append(NULL, "Picket-Lock: inv");
  hl = curl_slist_append(hl, "Picket-Fence: 1000");
  hl = curl_slist_append(hl, "Expect:");
  if (chunked) hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  if (!chunked) curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  FILE *null = fopen("/dev/null", "w");
  curl_easy_setopt(c, CURLOPT_WRITEDATA, null);
  long status = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  fclose(null);
  curl_slist_free_all(hl);
  curl_easy_cleanup(c);
  return status;
}

/* Asserts the stored value, version and fence of `key`. */
static void expect_kv(fkv *f, const char *key, const char *value, int64_t version, int64_t fence) {
  char path[512];
  snprintf(path, sizeof path, "/kv/%s", key);
  ck_assert_int_eq(req(f, "GET", path, NULL, NULL, NULL, NULL), 200);
  ck_assert_str_eq(harness_json_str(R.json, "key"), key);
  ck_assert_str_eq(harness_json_str(R.json, "value"), value);
  ck_assert_int_eq(harness_json_int(R.json, "version"), version);
  ck_assert_int_eq(harness_json_int(R.json, "fence"), fence);
}

static void expect_highest(fkv *f, const char *lock, int64_t highest) {
  char path[512];
  snprintf(path, sizeof path, "/fence/%s", lock);
  ck_assert_int_eq(req(f, "GET", path, NULL, NULL, NULL, NULL), 200);
  ck_assert_str_eq(harness_json_str(R.json, "lock"), lock);
  ck_assert_int_eq(harness_json_int(R.json, "highest"), highest);
}

static void expect_error(const char *code) {
  ck_assert_ptr_nonnull(harness_error_code(&R));
  ck_assert_str_eq(harness_error_code(&R), code);
  ck_assert_ptr_nonnull(json_string_value(json_object_get(json_object_get(R.json, "error"), "message")));
}

static int64_t stale_highest(void) {
  expect_error("stale_fence");
  return harness_json_int(json_object_get(R.json, "error"), "highest");
}

/* ---- tests ---- */

START_TEST(test_put_get_versions) {
  fkv *f = fkv_new(NULL);
  ck_assert_int_eq(req(f, "GET", "/kv/stock", NULL, NULL, NULL, NULL), 404);
  expect_error("not_found");
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "5", "100"), 200);
  ck_assert_str_eq(harness_json_str(R.json, "key"), "stock");
  ck_assert_int_eq(harness_json_int(R.json, "version"), 1);
  ck_assert_int_eq(harness_json_int(R.json, "fence"), 5);
  expect_kv(f, "stock", "100", 1, 5);
  /* Equal fence: the same holder writes again. */
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "5", "99"), 200);
  ck_assert_int_eq(harness_json_int(R.json, "version"), 2);
  /* A newer holder. */
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "6", "98"), 200);
  ck_assert_int_eq(harness_json_int(R.json, "version"), 3);
  expect_kv(f, "stock", "98", 3, 6);
  expect_highest(f, "inventory-sync", 6);
  /* An empty value and UTF-8 text are values too. */
  ck_assert_int_eq(put(f, "empty", "inventory-sync", "6", ""), 200);
  expect_kv(f, "empty", "", 1, 6);
  ck_assert_int_eq(put(f, "utf8", "inventory-sync", "6", "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80\n"), 200);
  expect_kv(f, "utf8", "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80\n", 1, 6);
  fkv_free(f);
}
END_TEST

START_TEST(test_stale_changes_nothing) {
  fkv *f = fkv_new(NULL);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "42", "100"), 200);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "41", "1"), 409);
  ck_assert_int_eq(stale_highest(), 42);
  expect_kv(f, "stock", "100", 1, 42);
  expect_highest(f, "inventory-sync", 42);
  /* Fences are per lock: the lock's highest guards every key it covers... */
  ck_assert_int_eq(put(f, "other-key", "inventory-sync", "7", "x"), 409);
  ck_assert_int_eq(stale_highest(), 42);
  ck_assert_int_eq(req(f, "GET", "/kv/other-key", NULL, NULL, NULL, NULL), 404);
  /* ...and another lock has its own. */
  ck_assert_int_eq(put(f, "other-key", "orders", "7", "x"), 200);
  expect_highest(f, "orders", 7);
  expect_highest(f, "inventory-sync", 42);
  /* Fence check first, then If-Match: stale with a wrong If-Match is 409. */
  ck_assert_int_eq(req(f, "PUT", "/kv/stock", "inventory-sync", "1", "9", "v"), 409);
  expect_kv(f, "stock", "100", 1, 42);
  fkv_free(f);
}
END_TEST

START_TEST(test_claim) {
  fkv *f = fkv_new(NULL);
  expect_highest(f, "inventory-sync", 0);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "3", "100"), 200);
  ck_assert_int_eq(req(f, "POST", "/fence/inventory-sync/claim", NULL, "4", NULL, NULL), 200);
  ck_assert_str_eq(harness_json_str(R.json, "lock"), "inventory-sync");
  ck_assert_int_eq(harness_json_int(R.json, "fence"), 4);
  expect_highest(f, "inventory-sync", 4);
  /* Idempotent: the same claim again; a matching Picket-Lock is fine. */
  ck_assert_int_eq(req(f, "POST", "/fence/inventory-sync/claim", "inventory-sync", "4", NULL, NULL), 200);
  /* The zombie (fence 3) is shut out before the new holder wrote anything. */
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "3", "99"), 409);
  ck_assert_int_eq(stale_highest(), 4);
  expect_kv(f, "stock", "100", 1, 3);
  /* An older claim is stale too, and changes nothing. */
  ck_assert_int_eq(req(f, "POST", "/fence/inventory-sync/claim", NULL, "2", NULL, NULL), 409);
  ck_assert_int_eq(stale_highest(), 4);
  expect_highest(f, "inventory-sync", 4);
  /* The claimer writes with its fence. */
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "4", "99"), 200);
  expect_kv(f, "stock", "99", 2, 4);
  /* Claims of a never-seen lock, and a claim with a body (ignored). */
  ck_assert_int_eq(req(f, "POST", "/fence/fresh/claim", NULL, "9223372036854775807", NULL, "{}"), 200);
  expect_highest(f, "fresh", INT64_MAX);
  fkv_free(f);
}
END_TEST

START_TEST(test_if_match) {
  fkv *f = fkv_new(NULL);
  /* If-Match: 0 creates only. */
  ck_assert_int_eq(req(f, "PUT", "/kv/stock", "inv", "2", "0", "100"), 200);
  ck_assert_int_eq(req(f, "PUT", "/kv/stock", "inv", "2", "0", "100"), 412);
  expect_error("version_mismatch");
  ck_assert_int_eq(req(f, "PUT", "/kv/stock", "inv", "2", "1", "99"), 200);
  ck_assert_int_eq(harness_json_int(R.json, "version"), 2);
  /* A lost compare-and-set changes nothing: not the value, and not the
   * lock's highest fence either, though its fence (5) was newer. */
  ck_assert_int_eq(req(f, "PUT", "/kv/stock", "inv", "5", "1", "0"), 412);
  expect_error("version_mismatch");
  expect_kv(f, "stock", "99", 2, 2);
  expect_highest(f, "inv", 2);
  ck_assert_int_eq(req(f, "PUT", "/kv/stock", "inv", "5", "2", "98"), 200);
  expect_kv(f, "stock", "98", 3, 5);
  fkv_free(f);
}
END_TEST

START_TEST(test_bad_requests) {
  fkv *f = fkv_new(NULL);
  ck_assert_int_eq(put(f, "stock", "inv", "10", "100"), 200);
  struct {
    const char *key, *lock, *fence, *if_match, *body;
  } bad[] = {
      {"stock", NULL, "11", NULL, "1"},            /* no Picket-Lock */
      {"stock", "inv", NULL, NULL, "1"},           /* no Picket-Fence */
      {"stock", NULL, NULL, NULL, "1"},            /* neither */
      {"stock", "inv", "0", NULL, "1"},            /* fences start at 1 */
      {"stock", "inv", "-11", NULL, "1"},
      {"stock", "inv", "+11", NULL, "1"},
      {"stock", "inv", "011", NULL, "1"},
      {"stock", "inv", "1 1", NULL, "1"},
      {"stock", "inv", "11x", NULL, "1"},
      {"stock", "inv", "9223372036854775808", NULL, "1"}, /* 2^63 */
      {"stock", "inv", "", NULL, "1"},
      {"stock", "in/v", "11", NULL, "1"},          /* lock names follow the rule */
      {"stock", "in v", "11", NULL, "1"},
      {"stock", "inv", "11", "x", "1"},            /* If-Match: a version */
      {"stock", "inv", "11", "-1", "1"},
      {"stock", "inv", "11", NULL, "\xff\xfe"},    /* not UTF-8 */
      {"stock", "inv", "11", NULL, "\xc0\xaf"},    /* overlong */
      {"stock", "inv", "11", NULL, "\xed\xa0\x80"},/* surrogate */
      {"stock", "inv", "11", NULL, "\xe2\x9c"},    /* truncated */
      {"a%2Fb", "inv", "11", NULL, "1"},           /* keys follow the lock-name rule */
      {"a%20b", "inv", "11", NULL, "1"},
      {"a{b}", "inv", "11", NULL, "1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[256];
    snprintf(path, sizeof path, "/kv/%s", bad[i].key);
    long st = req(f, "PUT", path, bad[i].lock, bad[i].fence, bad[i].if_match, bad[i].body);
    ck_assert_msg(st == 400, "case %zu: status %ld, want 400", i, st);
    expect_error("invalid_argument");
  }
  char longkey[260] = "/kv/";
  memset(longkey + 4, 'k', 201);
  longkey[205] = '\0';
  ck_assert_int_eq(req(f, "PUT", longkey, "inv", "11", NULL, "1"), 400);
  longkey[204] = '\0'; /* 200 bytes: valid */
  ck_assert_int_eq(req(f, "PUT", longkey, "inv", "11", NULL, "1"), 200);
  ck_assert_int_eq(req(f, "GET", longkey, NULL, NULL, NULL, NULL), 200);
  ck_assert_int_eq(req(f, "PUT", "/kv/", "inv", "11", NULL, "1"), 400);
  ck_assert_int_eq(req(f, "GET", "/kv/a%2Fb", NULL, NULL, NULL, NULL), 400);
  /* A NUL byte is not text. */
  ck_assert_int_eq(put_raw(f, "stock", "1\0002", 3, 0), 400);
  /* Claims: fence required and well formed, names valid, the header (when
   * given) must name the path's lock. */
  ck_assert_int_eq(req(f, "POST", "/fence/inv/claim", NULL, NULL, NULL, NULL), 400);
  ck_assert_int_eq(req(f, "POST", "/fence/inv/claim", NULL, "x", NULL, NULL), 400);
  ck_assert_int_eq(req(f, "POST", "/fence/inv/claim", "other", "20", NULL, NULL), 400);
  ck_assert_int_eq(req(f, "POST", "/fence/in%20v/claim", NULL, "20", NULL, NULL), 400);
  ck_assert_int_eq(req(f, "GET", "/fence/in%20v", NULL, NULL, NULL, NULL), 400);
  ck_assert_int_eq(req(f, "GET", "/fence/", NULL, NULL, NULL, NULL), 400);
  expect_error("invalid_argument");
  /* None of it changed anything. */
  expect_kv(f, "stock", "100", 1, 10);
  expect_highest(f, "inv", 11); /* 11: from the valid 200-byte key above */
  expect_highest(f, "other", 0);
  fkv_free(f);
}
END_TEST

START_TEST(test_not_found_and_methods) {
  fkv *f = fkv_new(NULL);
  const char *nf[] = {"/", "/kv", "/nope", "/fence/inv/other", "/fence/inv/claim/x", "/KV/stock"};
  for (size_t i = 0; i < sizeof nf / sizeof nf[0]; i++) {
    ck_assert_msg(req(f, "GET", nf[i], NULL, NULL, NULL, NULL) == 404, "%s", nf[i]);
    expect_error("not_found");
  }
  struct {
    const char *method, *path, *allow;
  } na[] = {
      {"DELETE", "/kv/stock", "GET, PUT"},
      {"POST", "/kv/stock", "GET, PUT"},
      {"GET", "/fence/inv/claim", "POST"},
      {"PUT", "/fence/inv/claim", "POST"},
      {"POST", "/fence/inv", "GET"},
      {"DELETE", "/fence/inv", "GET"},
  };
  for (size_t i = 0; i < sizeof na / sizeof na[0]; i++) {
    long st = req(f, na[i].method, na[i].path, "inv", "1", NULL, NULL);
    ck_assert_msg(st == 405, "%s %s: %ld", na[i].method, na[i].path, st);
    expect_error("method_not_allowed");
    ck_assert_str_eq(R.allow, na[i].allow);
  }
  expect_highest(f, "inv", 0);
  fkv_free(f);
}
END_TEST

START_TEST(test_body_limit) {
  fkv *f = fkv_new(NULL);
  size_t max = 64 * 1024;
  char *v = malloc(max + 2);
  memset(v, 'a', max + 1);
  v[max + 1] = '\0';
  ck_assert_int_eq(put(f, "big", "inv", "1", v), 413);
  expect_error("body_too_large");
  ck_assert_int_eq(req(f, "GET", "/kv/big", NULL, NULL, NULL, NULL), 404);
  expect_highest(f, "inv", 0);
  v[max] = '\0'; /* exactly 64 KiB is allowed */
  ck_assert_int_eq(put(f, "big", "inv", "1", v), 200);
  ck_assert_int_eq(req(f, "GET", "/kv/big", NULL, NULL, NULL, NULL), 200);
  ck_assert_uint_eq(strlen(harness_json_str(R.json, "value")), max);
  /* Without a Content-Length (chunked), the limit holds as the body comes. */
  v[max] = 'a';
  ck_assert_int_eq(put_raw(f, "big", v, max + 1, 1), 413);
  ck_assert_int_eq(put_raw(f, "chunked", "7", 1, 1), 200);
  expect_kv(f, "big", v + 1, 1, 1); /* unchanged: max bytes of 'a' */
  free(v);
  fkv_free(f);
}
END_TEST

/* Highest fences and values survive a clean stop and a crash (SIGKILL right
 * after the replies: each write was committed before its reply). */
START_TEST(test_restart) {
  fkv *f = fkv_new(NULL);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "7", "100"), 200);
  ck_assert_int_eq(req(f, "POST", "/fence/orders/claim", NULL, "12", NULL, NULL), 200);
  ck_assert_int_eq(fkv_stop(f, SIGTERM), 0);
  fkv_start(f, NULL);
  expect_kv(f, "stock", "100", 1, 7);
  expect_highest(f, "inventory-sync", 7);
  expect_highest(f, "orders", 12);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "6", "99"), 409);
  ck_assert_int_eq(stale_highest(), 7);

  ck_assert_int_eq(put(f, "stock", "inventory-sync", "8", "99"), 200);
  ck_assert_int_eq(req(f, "POST", "/fence/inventory-sync/claim", NULL, "9", NULL, NULL), 200);
  ck_assert_int_eq(fkv_stop(f, SIGKILL), 128 + SIGKILL);
  fkv_start(f, NULL);
  expect_kv(f, "stock", "99", 2, 8);
  expect_highest(f, "inventory-sync", 9);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "8", "98"), 409);
  ck_assert_int_eq(stale_highest(), 9);
  fkv_free(f);
}
END_TEST

/* A write the database cannot take (another process holds its write lock
 * past fenced-kv's 5 s busy timeout) is a 500 internal_error and changes
 * nothing; writes resume once the lock is free. */
START_TEST(test_database_busy) {
  fkv *f = fkv_new(NULL);
  ck_assert_int_eq(put(f, "stock", "inv", "3", "100"), 200);
  sqlite3 *other;
  ck_assert_int_eq(sqlite3_open(f->db, &other), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(other, "BEGIN IMMEDIATE;", NULL, NULL, NULL), SQLITE_OK);
  int64_t t0 = harness_now_ms();
  ck_assert_int_eq(put(f, "stock", "inv", "4", "99"), 500);
  expect_error("internal_error");
  ck_assert_int_ge(harness_now_ms() - t0, 4000); /* it waited for the lock first */
  char log[4096] = "";
  FILE *lf = fopen(f->log, "r");
  ck_assert_ptr_nonnull(lf);
  size_t n = fread(log, 1, sizeof log - 1, lf);
  log[n] = '\0';
  fclose(lf);
  ck_assert_msg(strstr(log, "database is locked") != NULL, "log: %s", log);
  expect_kv(f, "stock", "100", 1, 3);
  expect_highest(f, "inv", 3);
  ck_assert_int_eq(sqlite3_exec(other, "ROLLBACK;", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(other);
  ck_assert_int_eq(put(f, "stock", "inv", "4", "99"), 200);
  expect_kv(f, "stock", "99", 2, 4);
  fkv_free(f);
}
END_TEST

/* --no-fence: the plain store of the demo. PUT needs no headers and an
 * older fence is not refused; reads and claims work as before. */
START_TEST(test_no_fence_mode) {
  fkv *f = fkv_new("--no-fence");
  ck_assert_int_eq(put(f, "stock", NULL, NULL, "100"), 200);
  ck_assert_int_eq(harness_json_int(R.json, "fence"), 0);
  ck_assert_int_eq(req(f, "POST", "/fence/inv/claim", NULL, "5", NULL, NULL), 200);
  ck_assert_int_eq(put(f, "stock", "inv", "1", "99"), 200);
  expect_kv(f, "stock", "99", 2, 0);
  ck_assert_int_eq(req(f, "PUT", "/kv/stock", NULL, NULL, "1", "98"), 412);
  fkv_free(f);
}
END_TEST

/* Runs fenced-kv with `args` (NULL-terminated) expecting it to exit at
 * once; returns the exit code, the first line of its output in line and
 * the number of lines in *lines. */
static int run_flags(const char *const *args, char *line, size_t cap, int *lines) {
  char log[] = "/tmp/picket-fkv-flags-XXXXXX";
  int fd = mkstemp(log);
  close(fd);
  pid_t pid = spawn_fkv(args, log);
  int st = 0;
  for (int i = 0; i < 500 && waitpid(pid, &st, WNOHANG) == 0; i++) harness_sleep_ms(10);
  if (kill(pid, 0) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    st = 0xff00; /* still running: report 255 */
  }
  FILE *f = fopen(log, "r");
  line[0] = '\0';
  char buf[512];
  *lines = 0;
  while (f && fgets(buf, sizeof buf, f)) {
    if ((*lines)++ == 0) snprintf(line, cap, "%s", buf);
  }
  if (f) fclose(f);
  unlink(log);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

START_TEST(test_flags) {
  char line[512];
  int lines;
  const char *cases[][6] = {
      {"--bogus", NULL},
      {"--db", NULL},
      {"--listen", "127.0.0.1:0", NULL},                  /* --db is required */
      {"--db", "/tmp/x.db", "--listen", "127.0.0.1", NULL},
      {"--db", "/tmp/x.db", "--listen", "127.0.0.1:99999", NULL},
      {"--db", "/tmp/x.db", "--listen", ":80", NULL},
      {"--db", "/tmp/x.db", "--listen", "127.0.0.1:8x", NULL},
      {"--db", "/tmp/x.db", "--no-fence=1", NULL},
      {"--db=", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int code = run_flags(cases[i], line, sizeof line, &lines);
    ck_assert_msg(code == 2, "case %zu: exit %d (%s)", i, code, line);
    ck_assert_msg(lines == 1, "case %zu: %d lines, want one", i, lines);
    ck_assert_msg(strncmp(line, "fenced-kv: ", 11) == 0, "case %zu: %s", i, line);
  }
  const char *help[] = {"--help", NULL};
  ck_assert_int_eq(run_flags(help, line, sizeof line, &lines), 0);
  ck_assert_ptr_nonnull(strstr(line, "usage: fenced-kv"));
  /* An unusable database is a runtime failure: exit 1, not 2. */
  const char *nodb[] = {"--db", "/nonexistent-dir/x.db", "--listen", "127.0.0.1:0", NULL};
  ck_assert_int_eq(run_flags(nodb, line, sizeof line, &lines), 1);
  ck_assert_int_eq(lines, 1);
  ck_assert_ptr_nonnull(strstr(line, "/nonexistent-dir/x.db"));
}
END_TEST

/* --listen HOST:PORT with a fixed port, and the --flag=value form; the port
 * file then holds that port. */
START_TEST(test_listen_fixed_port) {
  fkv *f = fkv_new(NULL);
  int port = atoi(strrchr(f->url, ':') + 1);
  ck_assert_int_eq(fkv_stop(f, SIGTERM), 0);
  char listen[64];
  snprintf(listen, sizeof listen, "--listen=127.0.0.1:%d", port);
  unlink(f->port_file);
  const char *args[] = {"--db", f->db, listen, "--port-file", f->port_file, NULL};
  f->pid = spawn_fkv(args, f->log);
  int got = 0;
  for (int i = 0; i < 500 && got == 0; i++) {
    FILE *pf = fopen(f->port_file, "r");
    if (pf) {
      if (fscanf(pf, "%d", &got) != 1) got = 0;
      fclose(pf);
    }
    if (got == 0) harness_sleep_ms(10);
  }
  ck_assert_int_eq(got, port);
  ck_assert_int_eq(req(f, "GET", "/fence/x", NULL, NULL, NULL, NULL), 200);
  fkv_free(f);
}
END_TEST

int main(void) {
  /* The contract log is for picketd's API (proto/openapi.yaml); fenced-kv's
   * exchanges have their own contract, checked right here. */
  unsetenv("PICKET_CONTRACT_LOG");
  curl_global_init(CURL_GLOBAL_ALL);
  Suite *s = suite_create("fenced-kv");
  TCase *tc = tcase_create("http");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_put_get_versions);
  tcase_add_test(tc, test_stale_changes_nothing);
  tcase_add_test(tc, test_claim);
  tcase_add_test(tc, test_if_match);
  tcase_add_test(tc, test_bad_requests);
  tcase_add_test(tc, test_not_found_and_methods);
  tcase_add_test(tc, test_body_limit);
  tcase_add_test(tc, test_restart);
  tcase_add_test(tc, test_database_busy);
  tcase_add_test(tc, test_no_fence_mode);
  tcase_add_test(tc, test_flags);
  tcase_add_test(tc, test_listen_fixed_port);
  suite_add_tcase(s, tc);
  int failed = harness_run_suite(s);
  harness_resp_free(&R);
  return failed;
}
