/* test_fencedkv.c: fenced-kv end to end, as a real process on a loopback
 * port with its SQLite file in a temp dir: every status of the contract in
 * DESIGN.md ("Validator and fenced-kv"), that a refused request changes
 * nothing (also when the database fails), its flags, the --no-fence plain
 * store, and that the highest fences survive a clean stop and a crash.
 *
 * Issue 17 (a store that verifies instead of trusting): signed fences
 * (--fence-key-file: unsigned, forged and misapplied tokens are 403 and
 * change nothing; key rotation; SIGHUP), keys bound to their lock
 * (wrong_lock, and the migration of an older database), --max-locks, and
 * dribbling sockets (the per-address cap and the whole-request deadline). */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "picket_proto.h"

/* ---- one fenced-kv process ---- */

typedef struct {
  char dir[64];
  char db[128];
  char port_file[128];
  char log[128];
  char url[64];
  const char *const *args; /* more flags for every start, or NULL */
  pid_t pid;
} fkv;

static const char *bin_path(void) {
  static char path[1024];
  const char *dir = getenv("PICKET_BIN_DIR");
  snprintf(path, sizeof path, "%s/fenced-kv", dir ? dir : "build/bin");
  return path;
}

/* The key of proto/README.md's test vector (the bytes 0..31). */
#define KEY_K1 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

/* `fenced-kv --help` as a shell command (static buffer). */
static const char *bin_path_help(void) {
  static char cmd[1100];
  snprintf(cmd, sizeof cmd, "'%s' --help", bin_path());
  return cmd;
}

/* fork+exec fenced-kv with argv[1..] = args then more (may be NULL),
 * stderr to `log`. */
static pid_t spawn_fkv2(const char *const *args, const char *const *more, const char *log) {
  const char *argv[32] = {bin_path()};
  int n = 1;
  for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
  for (int i = 0; more && more[i] && n < 31; i++) argv[n++] = more[i];
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

static pid_t spawn_fkv(const char *const *args, const char *log) {
  return spawn_fkv2(args, NULL, log);
}

/* Starts fenced-kv on port 0 with the db in f->dir and f->args; waits for
 * the port file. `extra` is one more flag or NULL. */
static void fkv_start(fkv *f, const char *extra) {
  unlink(f->port_file);
  const char *args[] = {"--db", f->db, "--listen", "127.0.0.1:0", "--port-file", f->port_file,
                        extra, NULL};
  f->pid = spawn_fkv2(args, f->args, f->log);
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

/* A new temp dir for a fenced-kv, not started yet. */
static fkv *fkv_alloc(void) {
  fkv *f = calloc(1, sizeof *f);
  strcpy(f->dir, "/tmp/picket-fkv-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(f->dir));
  snprintf(f->db, sizeof f->db, "%s/kv.db", f->dir);
  snprintf(f->port_file, sizeof f->port_file, "%s/port", f->dir);
  snprintf(f->log, sizeof f->log, "%s/fenced-kv.log", f->dir);
  return f;
}

static fkv *fkv_new(const char *extra) {
  fkv *f = fkv_alloc();
  fkv_start(f, extra);
  return f;
}

/* A fenced-kv started, and restarted, with the flags `args` (NULL-ended,
 * which must outlive it). */
static fkv *fkv_new_args(const char *const *args) {
  fkv *f = fkv_alloc();
  f->args = args;
  fkv_start(f, NULL);
  return f;
}

/* Its log so far (static buffer). */
static const char *fkv_log(fkv *f) {
  static char log[16384];
  FILE *lf = fopen(f->log, "r");
  size_t n = lf ? fread(log, 1, sizeof log - 1, lf) : 0;
  log[n] = '\0';
  if (lf) fclose(lf);
  return log;
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

/* One request with optional Picket-Lock, Picket-Fence, Picket-Fence-Token
 * and If-Match headers (NULL leaves one out). Returns the status. */
static long req_t(fkv *f, const char *method, const char *path, const char *lock,
                  const char *fence, const char *token, const char *if_match, const char *body) {
  char h[4][256];
  const char *hs[5];
  int n = 0;
  if (lock) snprintf(h[n], sizeof h[n], "Picket-Lock: %s", lock), hs[n] = h[n], n++;
  if (fence) snprintf(h[n], sizeof h[n], "Picket-Fence: %s", fence), hs[n] = h[n], n++;
  if (token) snprintf(h[n], sizeof h[n], "Picket-Fence-Token: %s", token), hs[n] = h[n], n++;
  if (if_match) snprintf(h[n], sizeof h[n], "If-Match: %s", if_match), hs[n] = h[n], n++;
  hs[n] = NULL;
  harness_resp_free(&R);
  ck_assert_int_eq(harness_http_h(f->url, method, path, body, hs, &R), 0);
  ck_assert_str_eq(R.content_type, "application/json");
  ck_assert_ptr_nonnull(R.json);
  return R.status;
}

static long req(fkv *f, const char *method, const char *path, const char *lock,
                const char *fence, const char *if_match, const char *body) {
  return req_t(f, method, path, lock, fence, NULL, if_match, body);
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
      {"--db", "/tmp/x.db", "--max-locks", "0", NULL},
      {"--db", "/tmp/x.db", "--max-locks", "12x", NULL},
      {"--db", "/tmp/x.db", "--max-connections", "0", NULL},
      {"--db", "/tmp/x.db", "--max-connections-per-ip", "-1", NULL},
      {"--db", "/tmp/x.db", "--request-timeout-ms", "5", NULL},
      {"--db", "/tmp/x.db", "--key-prefix", "a{b}", NULL},
      {"--db", "/tmp/x.db", "--fence-key-file=", NULL},
      {"--db", "/tmp/x.db", "--no-fence", "--fence-key-file", "/tmp/k", NULL},
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
  /* So is a key file that does not load: the path and the line, never the
   * key. */
  char keys[64];
  ck_assert_int_eq(harness_write_tmpfile(keys, sizeof keys, "fkv-keys", "k1 " KEY_K1 "\nk1 " KEY_K1 "\n"), 0);
  const char *badkeys[] = {"--db", "/tmp/x.db", "--fence-key-file", keys, NULL};
  ck_assert_int_eq(run_flags(badkeys, line, sizeof line, &lines), 1);
  unlink(keys);
  ck_assert_msg(strstr(line, keys) && strstr(line, "line 2") && !strstr(line, "0102030405"), "%s", line);
  const char *nokeys[] = {"--db", "/tmp/x.db", "--fence-key-file", "/nonexistent-dir/keys", NULL};
  ck_assert_int_eq(run_flags(nokeys, line, sizeof line, &lines), 1);
  ck_assert_ptr_nonnull(strstr(line, "/nonexistent-dir/keys"));
  /* --help names every flag. */
  FILE *h = popen(bin_path_help(), "r");
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, h);
  text[n] = '\0';
  pclose(h);
  const char *all[] = {"--db", "--listen", "--port-file", "--fence-key-file", "--key-prefix",
                       "--max-locks", "--max-connections", "--max-connections-per-ip",
                       "--request-timeout-ms", "--no-fence"};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    ck_assert_msg(strstr(text, all[i]) != NULL, "--help lacks %s:\n%s", all[i], text);
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

/* ---- issue 17: signed fences ---- */

#define KEY_K2 "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
#define KEY_K3 "3333333333333333333333333333333333333333333333333333333333333333"
#define KEY_K9 "9999999999999999999999999999999999999999999999999999999999999999"
/* What the store's key file holds: k1 signs (picketd's), k2 is the old key
 * of a rotation, still verified. */
static const char store_keys[] = "# picketd signs with the first key\nk1 " KEY_K1 "\nk2 " KEY_K2 "\n";

typedef char token_buf[PICKET_PROTO_FENCE_TOKEN_MAX + 1];

/* The token of (prefix, lock, fence) under key `kid`: k1, k2, k3 or k9 (a
 * key no store has), as picketd makes it. Returns out. */
static const char *token(token_buf out, const char *kid, const char *prefix, const char *lock,
                         int64_t fence) {
  static const char all[] = "k1 " KEY_K1 "\nk2 " KEY_K2 "\nk3 " KEY_K3 "\nk9 " KEY_K9 "\n";
  picket_proto_fence_keys ks;
  char err[128];
  ck_assert_int_eq(picket_proto_fence_keys_parse(all, sizeof all - 1, &ks, err, sizeof err), 0);
  for (int i = 0; i < ks.n; i++)
    if (strcmp(ks.keys[i].kid, kid) == 0) {
      ck_assert_int_eq(picket_proto_fence_token(&ks.keys[i], picket_proto_fence_kind_of_name(lock),
                                                prefix, lock, fence, out), 0);
      return out;
    }
  ck_abort_msg("no key %s", kid);
  return NULL;
}

static void write_file(const char *path, const char *text) {
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  ck_assert_int_eq(fputs(text, fp) >= 0, 1);
  ck_assert_int_eq(fclose(fp), 0);
}

/* A fenced-kv with --fence-key-file (store_keys, at f->keys) and `more`
 * flags (may be NULL), which must outlive it. */
typedef struct {
  fkv *f;
  char keys[160];
  const char *args[8];
} signed_fkv;

static fkv *fkv_new_signed(signed_fkv *sf, const char *const *more) {
  sf->f = fkv_alloc();
  snprintf(sf->keys, sizeof sf->keys, "%s/keys", sf->f->dir);
  write_file(sf->keys, store_keys);
  int n = 0;
  sf->args[n++] = "--fence-key-file";
  sf->args[n++] = sf->keys;
  for (int i = 0; more && more[i] && n < 7; i++) sf->args[n++] = more[i];
  sf->args[n] = NULL;
  sf->f->args = sf->args;
  fkv_start(sf->f, NULL);
  return sf->f;
}

/* A fenced PUT or claim (key NULL) with fence and token (NULL: none). */
static long sput(fkv *f, const char *key, const char *lock, int64_t fence, const char *tok,
                 const char *value) {
  char path[512], fs[24];
  snprintf(fs, sizeof fs, "%lld", (long long)fence);
  if (key == NULL) {
    snprintf(path, sizeof path, "/fence/%s/claim", lock);
    return req_t(f, "POST", path, NULL, fs, tok, NULL, NULL);
  }
  snprintf(path, sizeof path, "/kv/%s", key);
  return req_t(f, "PUT", path, lock, fs, tok, NULL, value);
}

/* One integer that `sql` reads from f's database (as another process). */
static int64_t db_int(fkv *f, const char *sql) {
  sqlite3 *d;
  sqlite3_stmt *st;
  ck_assert_int_eq(sqlite3_open(f->db, &d), SQLITE_OK);
  ck_assert_int_eq(sqlite3_prepare_v2(d, sql, -1, &st, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(d);
  return v;
}

/* The hostile review's lock-out: one made-up fence of 2^63-1 (unsigned, or
 * with a forged or borrowed token) must not raise the highest; signed
 * writes and claims go through; every refusal is 403 fence_invalid, comes
 * before the fence check, and changes nothing. Without the key file (the
 * old behaviour, test_claim) the same claim of 2^63-1 is admitted. */
START_TEST(test_signed_fences) {
  signed_fkv sf;
  fkv *f = fkv_new_signed(&sf, NULL);
  token_buf t, t2;
  const char *log = fkv_log(f);
  ck_assert_msg(strstr(log, "fences must be signed") && !strstr(log, "trusted as given") &&
                    !strstr(log, "0102030405") && !strstr(log, "ffffffff"),
                "%s", log);
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 100,
                        token(t, "k1", "picket:", "inventory-sync", 100), "100"), 200);
  ck_assert_int_eq(harness_json_int(R.json, "fence"), 100);
  ck_assert_int_eq(sput(f, NULL, "inventory-sync", 100, t, NULL), 200); /* a signed claim */

  const int64_t max = INT64_MAX;
  const char *forged = "v2.lock.k1.0000000000000000000000000000000000000000000000000000000000000000";
  struct {
    const char *what, *tok;
  } refused[] = {
      {"no token", NULL},
      {"empty", ""},
      {"forged", forged},
      {"not a token", "hello"},
      {"another lock's", token(t, "k1", "picket:", "whatever", max)},
      {"another fence's", token(t2, "k1", "picket:", "inventory-sync", max - 1)},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    long st = sput(f, "stock", "inventory-sync", max, refused[i].tok, "0");
    ck_assert_msg(st == 403, "PUT with %s token: %ld", refused[i].what, st);
    expect_error("fence_invalid");
    ck_assert_ptr_null(strstr(R.body, "0000000000000000"));
    st = sput(f, NULL, "inventory-sync", max, refused[i].tok, NULL);
    ck_assert_msg(st == 403, "claim with %s token: %ld", refused[i].what, st);
    expect_error("fence_invalid");
  }
  /* Another prefix (another deployment sharing the key), a key the store
   * does not have, and a stale fence with a forged token: 403 too (the
   * token is checked before the fence). */
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 101, token(t, "k1", "other:", "inventory-sync", 101), "0"), 403);
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 101, token(t, "k9", "picket:", "inventory-sync", 101), "0"), 403);
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 1, forged, "0"), 403);
  expect_error("fence_invalid");
  /* The header Picket-Fence-Token is the token; the body is not. */
  expect_kv(f, "stock", "100", 1, 100);
  expect_highest(f, "inventory-sync", 100);
  expect_highest(f, "whatever", 0);

  /* Honest holders go on: a signed stale fence is 409 as before, the next
   * fence is admitted, and so is a token of the old key k2 (rotation). */
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 99, token(t, "k1", "picket:", "inventory-sync", 99), "1"), 409);
  ck_assert_int_eq(stale_highest(), 100);
  ck_assert_int_eq(sput(f, NULL, "inventory-sync", 101, token(t, "k1", "picket:", "inventory-sync", 101), NULL), 200);
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 102, token(t, "k2", "picket:", "inventory-sync", 102), "99"), 200);
  expect_kv(f, "stock", "99", 2, 102);
  ck_assert_int_eq(sput(f, NULL, "orders", max, token(t, "k2", "picket:", "orders", max), NULL), 200);

  /* 2,000 unsigned claims of fresh lock names add no row. */
  int64_t rows = db_int(f, "SELECT count(*) FROM fences;");
  for (int i = 0; i < 2000; i++) {
    char lock[32];
    snprintf(lock, sizeof lock, "fresh-%d", i);
    ck_assert_int_eq(sput(f, NULL, lock, 1, NULL, NULL), 403);
  }
  ck_assert_int_eq(db_int(f, "SELECT count(*) FROM fences;"), rows);

  /* SIGHUP rereads the file: a new signing key k3 in, k1 out. A file that
   * does not load leaves the keys as they were. */
  write_file(sf.keys, "k3 " KEY_K3 "\nk2 " KEY_K2 "\n");
  kill(f->pid, SIGHUP);
  for (int i = 0; i < 200 && !strstr(fkv_log(f), "reread the keys"); i++) harness_sleep_ms(10);
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 103, token(t, "k3", "picket:", "inventory-sync", 103), "98"), 200);
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 103, token(t, "k1", "picket:", "inventory-sync", 103), "97"), 403);
  write_file(sf.keys, "k1 not-hex\n");
  kill(f->pid, SIGHUP);
  for (int i = 0; i < 200 && !strstr(fkv_log(f), "keeping the keys"); i++) harness_sleep_ms(10);
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 103, token(t, "k3", "picket:", "inventory-sync", 103), "96"), 200);
  expect_kv(f, "stock", "96", 4, 103);
  ck_assert_ptr_null(strstr(fkv_log(f), KEY_K3));
  fkv_free(f);
}
END_TEST

/* --key-prefix must match picketd's: tokens are signed over it. */
START_TEST(test_signed_prefix) {
  signed_fkv sf;
  const char *more[] = {"--key-prefix", "tenant-a:", NULL};
  fkv *f = fkv_new_signed(&sf, more);
  token_buf t;
  ck_assert_int_eq(sput(f, "k", "inv", 5, token(t, "k1", "picket:", "inv", 5), "x"), 403);
  expect_error("fence_invalid");
  ck_assert_int_eq(sput(f, "k", "inv", 5, token(t, "k1", "tenant-a:", "inv", 5), "x"), 200);
  fkv_free(f);
  /* The empty prefix is a prefix too. */
  const char *empty[] = {"--key-prefix=", NULL};
  f = fkv_new_signed(&sf, empty);
  ck_assert_int_eq(sput(f, "k", "inv", 5, token(t, "k1", "picket:", "inv", 5), "x"), 403);
  ck_assert_int_eq(sput(f, "k", "inv", 5, token(t, "k1", "", "inv", 5), "x"), 200);
  fkv_free(f);
}
END_TEST

/* Without a key file fences are trusted as given, and the log says so. */
START_TEST(test_unsigned_warns) {
  fkv *f = fkv_new(NULL);
  ck_assert_msg(strstr(fkv_log(f), "fences are trusted as given") != NULL, "%s", fkv_log(f));
  /* A token is not needed, and not looked at. */
  ck_assert_int_eq(req_t(f, "PUT", "/kv/k", "inv", "3", "junk", NULL, "x"), 200);
  fkv_free(f);
}
END_TEST

/* ---- issue 17: keys bound to their lock ---- */

/* The review's overwrite: a key written under inventory-sync at fence 100
 * was overwritten by a write naming lock "whatever" with fence 1. */
START_TEST(test_wrong_lock) {
  fkv *f = fkv_new(NULL);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "100", "100"), 200);
  ck_assert_int_eq(put(f, "stock", "whatever", "1", "0"), 409);
  expect_error("wrong_lock");
  ck_assert_int_eq(req(f, "PUT", "/kv/stock", "whatever", "1", "1", "0"), 409); /* before If-Match */
  expect_error("wrong_lock");
  expect_kv(f, "stock", "100", 1, 100);
  ck_assert_str_eq(harness_json_str(R.json, "lock"), "inventory-sync");
  expect_highest(f, "whatever", 0); /* nothing recorded for the other lock either */
  ck_assert_int_eq(db_int(f, "SELECT count(*) FROM fences WHERE lock_name = 'whatever';"), 0);
  /* The key's own lock goes on; another lock has keys of its own. */
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "101", "99"), 200);
  ck_assert_int_eq(put(f, "orders-1", "whatever", "1", "x"), 200);
  expect_kv(f, "orders-1", "x", 1, 1);
  ck_assert_str_eq(harness_json_str(R.json, "lock"), "whatever");
  /* Signed, too: a holder of another lock cannot write this key. */
  fkv_free(f);
  signed_fkv sf;
  token_buf t;
  f = fkv_new_signed(&sf, NULL);
  ck_assert_int_eq(sput(f, "stock", "inventory-sync", 100, token(t, "k1", "picket:", "inventory-sync", 100), "100"), 200);
  ck_assert_int_eq(sput(f, "stock", "whatever", 1, token(t, "k1", "picket:", "whatever", 1), "0"), 409);
  expect_error("wrong_lock");
  expect_kv(f, "stock", "100", 1, 100);
  /* --no-fence writes bind nothing. */
  fkv_free(f);
  f = fkv_new("--no-fence");
  ck_assert_int_eq(put(f, "plain", NULL, NULL, "1"), 200);
  ck_assert_int_eq(req(f, "GET", "/kv/plain", NULL, NULL, NULL, NULL), 200);
  ck_assert(json_is_null(json_object_get(R.json, "lock")));
  fkv_free(f);
}
END_TEST

/* A database made before keys had a lock: the column is added at start, an
 * old key has no lock ("lock": null) until its next fenced write binds it,
 * and the highest fences are kept. */
START_TEST(test_migration) {
  fkv *f = fkv_alloc();
  sqlite3 *d;
  ck_assert_int_eq(sqlite3_open(f->db, &d), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(d,
                                "CREATE TABLE fences (lock_name TEXT PRIMARY KEY, highest INTEGER NOT NULL);"
                                "CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
                                " version INTEGER NOT NULL, fence INTEGER NOT NULL);"
                                "INSERT INTO fences VALUES ('inventory-sync', 7), ('orders', 3);"
                                "INSERT INTO kv VALUES ('stock', '100', 1, 7), ('total', '5', 2, 3);",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(d);
  fkv_start(f, NULL);
  expect_kv(f, "stock", "100", 1, 7);
  ck_assert(json_is_null(json_object_get(R.json, "lock")));
  expect_highest(f, "inventory-sync", 7);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "6", "1"), 409); /* still fenced */
  ck_assert_int_eq(stale_highest(), 7);
  ck_assert_int_eq(put(f, "stock", "inventory-sync", "8", "99"), 200); /* binds it */
  expect_kv(f, "stock", "99", 2, 8);
  ck_assert_str_eq(harness_json_str(R.json, "lock"), "inventory-sync");
  ck_assert_int_eq(put(f, "stock", "orders", "9", "1"), 409);
  expect_error("wrong_lock");
  /* A restart finds the column there and changes nothing. */
  ck_assert_int_eq(fkv_stop(f, SIGTERM), 0);
  fkv_start(f, NULL);
  ck_assert_int_eq(put(f, "stock", "orders", "9", "1"), 409);
  expect_error("wrong_lock");
  ck_assert_int_eq(put(f, "total", "orders", "3", "6"), 200);
  expect_kv(f, "total", "6", 3, 3);
  ck_assert_str_eq(harness_json_str(R.json, "lock"), "orders");
  fkv_free(f);
}
END_TEST

/* ---- issue 17: bounds ---- */

/* --max-locks: claims and first writes of new lock names stop at the
 * limit (507 too_many_locks, nothing written); known locks go on. */
START_TEST(test_max_locks) {
  const char *args[] = {"--max-locks", "3", NULL};
  fkv *f = fkv_new_args(args);
  ck_assert_int_eq(req(f, "POST", "/fence/a/claim", NULL, "1", NULL, NULL), 200);
  ck_assert_int_eq(req(f, "POST", "/fence/b/claim", NULL, "1", NULL, NULL), 200);
  ck_assert_int_eq(put(f, "kc", "c", "1", "x"), 200);
  ck_assert_int_eq(req(f, "POST", "/fence/d/claim", NULL, "1", NULL, NULL), 507);
  expect_error("too_many_locks");
  ck_assert_int_eq(put(f, "ke", "e", "1", "x"), 507);
  expect_error("too_many_locks");
  ck_assert_int_eq(req(f, "GET", "/kv/ke", NULL, NULL, NULL, NULL), 404);
  expect_highest(f, "d", 0);
  /* The review's 2,000 claims of fresh names: still 3 rows. */
  for (int i = 0; i < 2000; i++) {
    char path[64];
    snprintf(path, sizeof path, "/fence/fresh-%d/claim", i);
    ck_assert_int_eq(req(f, "POST", path, NULL, "1", NULL, NULL), 507);
  }
  ck_assert_int_eq(db_int(f, "SELECT count(*) FROM fences;"), 3);
  ck_assert_int_eq(req(f, "POST", "/fence/a/claim", NULL, "2", NULL, NULL), 200);
  ck_assert_int_eq(put(f, "kc", "c", "2", "y"), 200);
  ck_assert_int_eq(put(f, "kc2", "b", "1", "z"), 200); /* a new key of a known lock */
  /* A lower limit than the rows there: the known locks keep working. */
  ck_assert_int_eq(fkv_stop(f, SIGTERM), 0);
  args[1] = "2";
  fkv_start(f, NULL);
  ck_assert_int_eq(put(f, "kc", "c", "3", "w"), 200);
  ck_assert_int_eq(req(f, "POST", "/fence/d/claim", NULL, "1", NULL, NULL), 507);
  fkv_free(f);
}
END_TEST

/* Dribbling sockets: each sends a request line and then one header byte
 * every 200 ms, from the address `from`, until stopped. */
typedef struct {
  int fd[1024];
  int n;
  atomic_int stop;
  pthread_t thread;
} dribblers;

static void *dribble(void *arg) {
  dribblers *d = arg;
  while (!atomic_load(&d->stop)) {
    for (int i = 0; i < d->n; i++)
      if (send(d->fd[i], "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
      }
    harness_sleep_ms(200);
  }
  return NULL;
}

static void dribblers_start(dribblers *d, fkv *f, const char *from, int n) {
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(atoi(strrchr(f->url, ':') + 1))};
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  memset(d, 0, sizeof *d);
  for (int i = 0; i < n; i++) {
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &me.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&me, sizeof me), 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
    const char line[] = "PUT /kv/stock HTTP/1.1\r\nHost: x\r\nPicket-Lock: inv\r\nX-Slow: ";
    if (send(fd, line, sizeof line - 1, MSG_NOSIGNAL) < 0) {
    }
    d->fd[d->n++] = fd;
  }
  ck_assert_int_eq(pthread_create(&d->thread, NULL, dribble, d), 0);
}

/* Stops them; returns how many were answered 408. */
static int dribblers_stop(dribblers *d) {
  atomic_store(&d->stop, 1);
  pthread_join(d->thread, NULL);
  int cut = 0;
  for (int i = 0; i < d->n; i++) {
    char buf[64] = "";
    if (recv(d->fd[i], buf, sizeof buf - 1, MSG_DONTWAIT) > 0 && strncmp(buf, "HTTP/1.1 408", 12) == 0)
      cut++;
    close(d->fd[i]);
  }
  return cut;
}

/* A PUT that must be answered within ms; returns its status (0: none in
 * time) and its time in *took_ms. */
static long put_within(fkv *f, const char *key, const char *fence, long ms, int64_t *took_ms) {
  char url[512];
  snprintf(url, sizeof url, "%s/kv/%s", f->url, key);
  CURL *c = curl_easy_init();
  struct curl_slist *hl = curl_slist_append(NULL, "Picket-Lock: honest");
  char fh[64];
  snprintf(fh, sizeof fh, "Picket-Fence: %s", fence);
  hl = curl_slist_append(hl, fh);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, "v");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
  FILE *null = fopen("/dev/null", "w");
  curl_easy_setopt(c, CURLOPT_WRITEDATA, null);
  long status = 0;
  int64_t t0 = harness_now_ms();
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  *took_ms = harness_now_ms() - t0;
  fclose(null);
  curl_slist_free_all(hl);
  curl_easy_cleanup(c);
  return status;
}

/* The review's 256 dribbling sockets, as 300 from 127.0.0.2, against the
 * default flags: the per-address cap keeps most of them out, and honest
 * writes from 127.0.0.1 are answered at once. (Before: all 256 slots held,
 * every honest write hung.) */
START_TEST(test_dribblers_one_address) {
  fkv *f = fkv_new(NULL);
  dribblers d;
  dribblers_start(&d, f, "127.0.0.2", 300);
  harness_sleep_ms(300); /* accepted, or refused past the cap */
  int64_t worst = 0;
  for (int i = 0; i < 5; i++) {
    char key[16], fence[16];
    snprintf(key, sizeof key, "h%d", i);
    snprintf(fence, sizeof fence, "%d", i + 1);
    int64_t took;
    ck_assert_int_eq(put_within(f, key, fence, 3000 * harness_time_scale(), &took), 200);
    if (took > worst) worst = took;
  }
  fprintf(stderr, "dribblers_one_address: 5 honest writes beside 300 dribblers, slowest %lld ms\n",
          (long long)worst);
  dribblers_stop(&d);
  fkv_free(f);
}
END_TEST

/* Dribblers from many addresses can fill every slot (here 16, no per-address
 * cap); the whole-request deadline (500 ms) cuts them with a 408, and the
 * honest write waiting behind them is served. A request that is whole is not
 * timed any more: one that waits 1.5 s for the database is still answered.
 * (Bounds on time are multiplied by harness_time_scale() for slow builds.) */
struct db_release {
  sqlite3 *db;
  int64_t after_ms;
};

static void *release_later(void *arg) {
  struct db_release *r = arg;
  harness_sleep_ms(r->after_ms);
  sqlite3_exec(r->db, "ROLLBACK;", NULL, NULL, NULL);
  return NULL;
}

START_TEST(test_request_deadline) {
  const char *args[] = {"--max-connections", "16", "--max-connections-per-ip", "0",
                        "--request-timeout-ms", "500", NULL};
  fkv *f = fkv_new_args(args);
  dribblers d;
  dribblers_start(&d, f, "127.0.0.3", 16);
  harness_sleep_ms(100);
  int64_t took;
  ck_assert_int_eq(put_within(f, "h", "1", 5000 * harness_time_scale(), &took), 200);
  int cut = dribblers_stop(&d);
  fprintf(stderr, "request_deadline: the honest write took %lld ms behind 16 dribblers; %d cut with 408\n",
          (long long)took, cut);
  ck_assert_int_ge(took, 250);  /* it did wait for a slot ... */
  ck_assert_int_lt(took, 3000 * harness_time_scale()); /* ... which the deadline freed */
  ck_assert_int_ge(cut, 15);
  for (int i = 0; i < 200 && !strstr(fkv_log(f), "--request-timeout-ms"); i++) harness_sleep_ms(10);
  ck_assert_ptr_nonnull(strstr(fkv_log(f), "did not arrive whole within 500 ms"));

  struct db_release r = {.after_ms = 1500};
  pthread_t t;
  ck_assert_int_eq(sqlite3_open(f->db, &r.db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(r.db, "BEGIN IMMEDIATE;", NULL, NULL, NULL), SQLITE_OK);
  ck_assert_int_eq(pthread_create(&t, NULL, release_later, &r), 0);
  ck_assert_int_eq(put_within(f, "h", "2", 5000 * harness_time_scale(), &took), 200);
  ck_assert_int_ge(took, 1400);
  pthread_join(t, NULL);
  sqlite3_close(r.db);
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
  tcase_add_test(tc, test_signed_fences);
  tcase_add_test(tc, test_signed_prefix);
  tcase_add_test(tc, test_unsigned_warns);
  tcase_add_test(tc, test_wrong_lock);
  tcase_add_test(tc, test_migration);
  tcase_add_test(tc, test_max_locks);
  tcase_add_test(tc, test_dribblers_one_address);
  tcase_add_test(tc, test_request_deadline);
  suite_add_tcase(s, tc);
  int failed = harness_run_suite(s);
  harness_resp_free(&R);
  return failed;
}
