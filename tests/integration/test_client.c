/* test_client.c: libpicket against a real redis-server and a real picketd
 * (tests/harness). Two suites, run as two ctest entries through
 * CK_RUN_SUITE: "lib" (every call's success and failure paths, local
 * deadlines against Redis's PTTL, retries, timeouts, semaphore permits,
 * the operators' listing, inspect fields and break) and "keeper" (the background renewal thread: survives a short pause of
 * picketd, reports the loss of a lease at its local deadline or at once
 * when the server says so).
 *
 * Each test uses its own lock names, so tests do not see each other's
 * leases; tests that pause or stop a server undo it in the teardown. Upper
 * bounds on time are multiplied by harness_time_scale() (sanitizer and
 * valgrind runs); lower bounds are what the code promises and stay. */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "picket/picket.h"

static harness_redis *redis;
static harness_picketd *picketd;

static void servers_start(void) {
  redis = harness_redis_start(&(harness_redis_opts){.appendonly = 1});
  ck_assert_ptr_nonnull(redis);
  picketd = harness_picketd_start(harness_redis_url(redis), NULL);
  ck_assert_ptr_nonnull(picketd);
}

static void servers_stop(void) {
  harness_picketd_free(picketd);
  harness_redis_free(redis);
}

/* Undoes what a failed test may have left: a paused process. */
static void resume_all(void) {
  kill(harness_picketd_pid(picketd), SIGCONT);
  kill(harness_redis_pid(redis), SIGCONT);
}

static picket_client *client_with(const picket_options *o) {
  picket_client *c = NULL;
  ck_assert_int_eq(picket_client_new(harness_picketd_url(picketd), o, &c), 0);
  return c;
}

static picket_client *client(void) { return client_with(NULL); }

/* PTTL of the lock's lease key in Redis (-2: no key). */
static int64_t redis_pttl(const char *name) {
  redisReply *r = harness_redis_cmd(redis, "PTTL picket:{%s}:lease", name);
  ck_assert_ptr_nonnull(r);
  ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
  int64_t v = r->integer;
  freeReplyObject(r);
  return v;
}

static int64_t drift(int64_t ttl) { return ttl / 100 + 2; }

/* 1 when every thread of pid is stopped (state T in each /proc/PID/task/TID/stat). */
static int all_stopped(pid_t pid) {
  char path[300], buf[512];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  ck_assert_ptr_nonnull(d);
  int stopped = 1;
  struct dirent *e;
  while (stopped && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue; /* the thread just ended */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *state = strrchr(buf, ')'); /* "tid (comm) S ..." */
    stopped = state != NULL && state[1] == ' ' && state[2] == 'T';
  }
  closedir(d);
  return stopped;
}

/* Sends SIGSTOP or SIGCONT and, for SIGSTOP, waits until the process is
 * really stopped: kill() only queues the signal, and a running picketd
 * thread could still answer one more request. */
static void pause_process(pid_t pid, int sig) {
  ck_assert_int_eq(kill(pid, sig), 0);
  if (sig != SIGSTOP) return;
  for (int i = 0; i < 1000 && !all_stopped(pid); i++) harness_sleep_ms(2);
  ck_assert_msg(all_stopped(pid), "process %d did not stop", (int)pid);
}

/* ---- suite "lib" ---------------------------------------------------------- */

START_TEST(acquire_release) {
  picket_client *c = client();
  picket_lease *l = NULL;
  ck_assert_int_eq(picket_acquire(c, "lib-basic", NULL, &l), 0);
  ck_assert_int_eq(picket_client_status(c), 200);
  ck_assert_str_eq(picket_lease_lock(l), "lib-basic");
  ck_assert_int_eq(strlen(picket_lease_id(l)), PICKET_LEASE_ID_LEN);
  ck_assert_int_ge(picket_lease_fence(l), 1);
  ck_assert_int_eq(picket_lease_ttl_ms(l), 30000);
  ck_assert_ptr_null(picket_lease_owner(l));
  ck_assert(picket_lease_valid(l));
  ck_assert_int_gt(picket_lease_remaining_ms(l), 29000);

  picket_lock_info info;
  ck_assert_int_eq(picket_inspect(c, "lib-basic", &info), 0);
  ck_assert(info.held);
  ck_assert_int_eq(info.fence, picket_lease_fence(l));
  ck_assert_int_gt(info.ttl_ms, 29000);
  ck_assert(!info.has_owner);

  ck_assert_int_eq(picket_release(c, l), 0);
  ck_assert(!picket_lease_valid(l)); /* released: no longer ours */
  ck_assert_int_eq(picket_inspect(c, "lib-basic", &info), 0);
  ck_assert(!info.held);
  ck_assert_int_eq(info.fence, picket_lease_fence(l)); /* the counter stays */
  ck_assert_int_eq(redis_pttl("lib-basic"), -2);
  picket_lease_free(l);
  picket_client_free(c);
}
END_TEST

START_TEST(held_and_fences) {
  picket_client *c = client();
  picket_lease *a = NULL, *b = NULL;
  picket_acquire_opts o = {.ttl_ms = 5000, .owner = "worker-1"};
  ck_assert_int_eq(picket_acquire(c, "lib-held", &o, &a), 0);
  ck_assert_str_eq(picket_lease_owner(a), "worker-1");
  ck_assert_int_eq(picket_lease_ttl_ms(a), 5000);

  /* Another lease: lock_held, with retry_after_ms and the holder's owner;
   * nothing changes on the server. */
  picket_acquire_opts o2 = {.ttl_ms = 5000, .owner = "worker-2"};
  ck_assert_int_eq(picket_acquire(c, "lib-held", &o2, &b), PICKET_EHELD);
  ck_assert_ptr_null(b);
  ck_assert_int_eq(picket_client_status(c), 409);
  ck_assert_str_eq(picket_client_error_code(c), "lock_held");
  ck_assert_int_gt(picket_client_retry_after_ms(c), 0);
  ck_assert_int_le(picket_client_retry_after_ms(c), 5000);
  ck_assert_str_eq(picket_client_holder(c), "worker-1");
  picket_lock_info info;
  ck_assert_int_eq(picket_inspect(c, "lib-held", &info), 0);
  ck_assert_int_eq(info.fence, picket_lease_fence(a));
  ck_assert_str_eq(info.owner, "worker-1");
  /* A successful call clears the last error's detail. */
  ck_assert_int_eq(picket_client_retry_after_ms(c), -1);
  ck_assert_ptr_null(picket_client_holder(c));
  ck_assert_str_eq(picket_client_error_code(c), "");

  /* Each new grant gets a higher fence. */
  ck_assert_int_eq(picket_release(c, a), 0);
  ck_assert_int_eq(picket_acquire(c, "lib-held", &o2, &b), 0);
  ck_assert_msg(harness_fence_follows(picket_lease_fence(a), picket_lease_fence(b), 0),
                "fence %lld after %lld", (long long)picket_lease_fence(b),
                (long long)picket_lease_fence(a));
  ck_assert_int_eq(picket_release(c, b), 0);
  picket_lease_free(a);
  picket_lease_free(b);
  picket_client_free(c);
}
END_TEST

/* A client-chosen lease id makes acquire idempotent: the same id gets the
 * same grant back (what a retry after a lost reply relies on). */
START_TEST(client_lease_id) {
  picket_client *c = client();
  const char *id = "0123456789abcdef0123456789abcdef";
  picket_acquire_opts o = {.ttl_ms = 5000, .lease_id = id};
  picket_lease *a = NULL, *b = NULL;
  ck_assert_int_eq(picket_acquire(c, "lib-id", &o, &a), 0);
  ck_assert_str_eq(picket_lease_id(a), id);
  ck_assert_int_eq(picket_acquire(c, "lib-id", &o, &b), 0);
  ck_assert_int_eq(picket_lease_fence(b), picket_lease_fence(a));
  ck_assert_int_eq(picket_release(c, b), 0);
  picket_lease_free(a);
  picket_lease_free(b);

  /* The server may choose the id instead. */
  picket_acquire_opts s = {.ttl_ms = 5000, .server_lease_id = 1};
  ck_assert_int_eq(picket_acquire(c, "lib-id", &s, &a), 0);
  ck_assert_int_eq(strlen(picket_lease_id(a)), 32);
  ck_assert_int_eq(picket_release(c, a), 0);
  picket_lease_free(a);
  picket_client_free(c);
}
END_TEST

/* The local deadline is never later than the server's expiry: the expiry
 * is at least (time before asking PTTL) + PTTL. And it is exactly the send
 * time + ttl - (ttl/100 + 2), with the send time inside the call. */
START_TEST(deadline_before_server_expiry) {
  picket_client *c = client();
  for (int i = 0; i < 5; i++) {
    picket_lease *l = NULL;
    picket_acquire_opts o = {.ttl_ms = 10000};
    int64_t before = picket_now_ms();
    ck_assert_int_eq(picket_acquire(c, "lib-deadline", &o, &l), 0);
    int64_t after = picket_now_ms();
    int64_t d = picket_lease_deadline_ms(l);
    ck_assert_int_ge(d, before + 10000 - drift(10000));
    ck_assert_int_le(d, after + 10000 - drift(10000));
    int64_t t = picket_now_ms();
    int64_t pttl = redis_pttl("lib-deadline");
    ck_assert_int_gt(pttl, 0);
    ck_assert_int_le(d, t + pttl);

    /* The same after a renew with another TTL. */
    harness_sleep_ms(20);
    before = picket_now_ms();
    ck_assert_int_eq(picket_renew(c, l, 20000), 0);
    after = picket_now_ms();
    d = picket_lease_deadline_ms(l);
    ck_assert_int_eq(picket_lease_ttl_ms(l), 20000);
    ck_assert_int_ge(d, before + 20000 - drift(20000));
    ck_assert_int_le(d, after + 20000 - drift(20000));
    t = picket_now_ms();
    pttl = redis_pttl("lib-deadline");
    ck_assert_int_le(d, t + pttl);
    ck_assert_int_eq(picket_release(c, l), 0);
    picket_lease_free(l);
  }
  /* The margin is configurable; with none, the deadline still holds. */
  picket_options opts;
  picket_options_init(&opts);
  opts.drift_permille = 0;
  opts.drift_min_ms = 0;
  picket_client *c0 = client_with(&opts);
  picket_lease *l = NULL;
  picket_acquire_opts o = {.ttl_ms = 10000};
  int64_t before = picket_now_ms();
  ck_assert_int_eq(picket_acquire(c0, "lib-deadline", &o, &l), 0);
  ck_assert_int_ge(picket_lease_deadline_ms(l), before + 10000);
  int64_t t = picket_now_ms();
  /* 3 ms of slack for three millisecond clocks' truncation: the send time
   * and t here (picket_now_ms), and Redis's own expiry and PTTL (one CI
   * run was 1 ms past a 1 ms slack). */
  ck_assert_int_le(picket_lease_deadline_ms(l), t + redis_pttl("lib-deadline") + 3);
  ck_assert_int_eq(picket_release(c0, l), 0);
  picket_lease_free(l);
  picket_client_free(c0);
  picket_client_free(c);
}
END_TEST

/* A renewal that asks for a shorter TTL than the lease had: picketd
 * expires the lease at about its send time + the new TTL, so the local
 * deadline must come down with it (it used to stay at the longer one). */
START_TEST(deadline_follows_shorter_renewal) {
  picket_client *c = client();
  picket_lease *l = NULL;
  picket_acquire_opts o = {.ttl_ms = 10000};
  ck_assert_int_eq(picket_acquire(c, "lib-shorter", &o, &l), 0);
  ck_assert_int_gt(picket_lease_remaining_ms(l), 9000);
  int64_t before = picket_now_ms();
  ck_assert_int_eq(picket_renew(c, l, 1000), 0);
  int64_t after = picket_now_ms();
  ck_assert_int_eq(picket_lease_ttl_ms(l), 1000);
  ck_assert_int_ge(picket_lease_deadline_ms(l), before + 1000 - drift(1000));
  ck_assert_int_le(picket_lease_deadline_ms(l), after + 1000 - drift(1000));
  ck_assert_int_le(picket_lease_remaining_ms(l), 1000);
  ck_assert_int_le(picket_lease_deadline_ms(l), picket_now_ms() + redis_pttl("lib-shorter"));
  /* and back up with a longer one */
  ck_assert_int_eq(picket_renew(c, l, 10000), 0);
  ck_assert_int_gt(picket_lease_remaining_ms(l), 9000);
  ck_assert_int_eq(picket_release(c, l), 0);
  ck_assert(!picket_lease_valid(l));
  picket_lease_free(l);
  picket_client_free(c);
}
END_TEST

START_TEST(renew_and_lost) {
  picket_client *c = client();
  picket_lease *l = NULL;
  picket_acquire_opts o = {.ttl_ms = 3000};
  ck_assert_int_eq(picket_acquire(c, "lib-renew", &o, &l), 0);
  int64_t fence = picket_lease_fence(l);
  int64_t d0 = picket_lease_deadline_ms(l);
  harness_sleep_ms(50);
  ck_assert_int_eq(picket_renew(c, l, 0), 0); /* 0: the server's default */
  ck_assert_int_eq(picket_lease_ttl_ms(l), 30000);
  ck_assert_int_gt(picket_lease_deadline_ms(l), d0);
  ck_assert_int_eq(picket_lease_fence(l), fence);
  ck_assert_int_gt(redis_pttl("lib-renew"), 29000);

  /* A lease known by id only (handed over from elsewhere) renews too,
   * and gets a deadline from it. */
  picket_lease *h = NULL;
  ck_assert_int_eq(picket_lease_new("lib-renew", picket_lease_id(l), &h), 0);
  ck_assert(!picket_lease_valid(h));
  ck_assert_int_eq(picket_lease_fence(h), 0);
  ck_assert_int_eq(picket_renew(c, h, 4000), 0);
  ck_assert(picket_lease_valid(h));
  ck_assert_int_eq(picket_lease_fence(h), fence);

  /* Released: renew and release say the lease is lost. */
  ck_assert_int_eq(picket_release(c, h), 0);
  ck_assert_int_eq(picket_renew(c, l, 3000), PICKET_ELOST);
  ck_assert_int_eq(picket_client_status(c), 409);
  ck_assert_str_eq(picket_client_error_code(c), "lease_lost");
  ck_assert_str_ne(picket_client_error_message(c), "");
  ck_assert_int_eq(picket_release(c, l), PICKET_ELOST);
  ck_assert(!picket_lease_valid(l));

  /* A lease that never existed. */
  picket_lease *n = NULL;
  ck_assert_int_eq(picket_lease_new("lib-renew", "ffffffffffffffffffffffffffffffff", &n), 0);
  ck_assert_int_eq(picket_renew(c, n, 1000), PICKET_ELOST);
  ck_assert_int_eq(picket_release(c, n), PICKET_ELOST);
  ck_assert_int_eq(redis_pttl("lib-renew"), -2);
  picket_lease_free(n);
  picket_lease_free(h);
  picket_lease_free(l);
  picket_client_free(c);
}
END_TEST

/* Expiry on the server: the lease is lost after its TTL. */
START_TEST(expiry) {
  picket_client *c = client();
  picket_lease *l = NULL;
  picket_acquire_opts o = {.ttl_ms = 200};
  ck_assert_int_eq(picket_acquire(c, "lib-expiry", &o, &l), 0);
  ck_assert_int_le(picket_lease_deadline_ms(l), picket_now_ms() + 200);
  harness_sleep_ms(400);
  ck_assert(!picket_lease_valid(l));
  ck_assert_int_eq(picket_lease_remaining_ms(l), 0);
  ck_assert_int_eq(picket_renew(c, l, 1000), PICKET_ELOST);
  picket_lease *m = NULL;
  ck_assert_int_eq(picket_acquire(c, "lib-expiry", &o, &m), 0);
  ck_assert_msg(harness_fence_follows(picket_lease_fence(l), picket_lease_fence(m), 0),
                "fence %lld after %lld", (long long)picket_lease_fence(m),
                (long long)picket_lease_fence(l));
  picket_lease_free(m);
  picket_lease_free(l);
  picket_client_free(c);
}
END_TEST

/* Bad input is refused before any request (status 0) or by the server
 * (400), and changes nothing. */
START_TEST(invalid_arguments) {
  picket_client *c = client();
  picket_lease *l = NULL;
  picket_lock_info info;
  const char *bad_names[] = {"", "a b", "a{b}", "x/../y", "caf\xc3\xa9"};
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    ck_assert_int_eq(picket_acquire(c, bad_names[i], NULL, &l), PICKET_EINVAL);
    ck_assert_int_eq(picket_client_status(c), 0);
    ck_assert_str_ne(picket_client_error_message(c), "");
    ck_assert_int_eq(picket_inspect(c, bad_names[i], &info), PICKET_EINVAL);
  }
  char longname[PICKET_NAME_MAX + 2];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  ck_assert_int_eq(picket_acquire(c, longname, NULL, &l), PICKET_EINVAL);
  longname[PICKET_NAME_MAX] = '\0';
  ck_assert_int_eq(picket_inspect(c, longname, &info), 0); /* 200 bytes is fine */

  char owner[PICKET_OWNER_MAX + 2];
  memset(owner, 'o', sizeof owner - 1);
  owner[sizeof owner - 1] = '\0';
  picket_acquire_opts o = {.owner = owner};
  ck_assert_int_eq(picket_acquire(c, "lib-inval", &o, &l), PICKET_EINVAL);
  picket_acquire_opts o2 = {.lease_id = "ABCDEF0123456789ABCDEF0123456789"};
  ck_assert_int_eq(picket_acquire(c, "lib-inval", &o2, &l), PICKET_EINVAL);
  picket_acquire_opts o3 = {.ttl_ms = -1};
  ck_assert_int_eq(picket_acquire(c, "lib-inval", &o3, &l), PICKET_EINVAL);
  ck_assert_int_eq(picket_client_status(c), 0);

  /* Past the server's --max-ttl-ms: its 400 invalid_argument. */
  picket_acquire_opts o4 = {.ttl_ms = 3600001};
  ck_assert_int_eq(picket_acquire(c, "lib-inval", &o4, &l), PICKET_EINVAL);
  ck_assert_int_eq(picket_client_status(c), 400);
  ck_assert_str_eq(picket_client_error_code(c), "invalid_argument");
  ck_assert_ptr_null(l);
  ck_assert_int_eq(picket_inspect(c, "lib-inval", &info), 0);
  ck_assert(!info.held);
  ck_assert_int_eq(info.fence, 0);

  ck_assert_int_eq(picket_lease_new("ok", "short", &l), PICKET_EINVAL);
  ck_assert_int_eq(picket_lease_new("not ok", "0123456789abcdef0123456789abcdef", &l),
                   PICKET_EINVAL);
  ck_assert_ptr_null(l);
  ck_assert_int_eq(picket_renew(c, NULL, 0), PICKET_EINVAL);
  ck_assert_int_eq(picket_release(c, NULL), PICKET_EINVAL);

  picket_client *x = NULL;
  ck_assert_int_eq(picket_client_new("ftp://127.0.0.1", NULL, &x), PICKET_EINVAL);
  ck_assert_int_eq(picket_client_new("http://a b", NULL, &x), PICKET_EINVAL);
  picket_options bad;
  picket_options_init(&bad);
  bad.request_timeout_ms = 0;
  ck_assert_int_eq(picket_client_new(NULL, &bad, &x), PICKET_EINVAL);
  picket_options_init(&bad);
  bad.bearer_token = "a\r\nX-Evil: 1";
  ck_assert_int_eq(picket_client_new(NULL, &bad, &x), PICKET_EINVAL);
  ck_assert_ptr_null(x);
  picket_client_free(NULL);
  picket_lease_free(NULL);
  picket_client_free(c);
}
END_TEST

START_TEST(inspect_unknown_and_token) {
  picket_options o;
  picket_options_init(&o);
  o.bearer_token = "s3cret"; /* sent, and ignored until picketd checks it */
  char url[128];
  snprintf(url, sizeof url, "%s/", harness_picketd_url(picketd)); /* trailing slash */
  picket_client *c = NULL;
  ck_assert_int_eq(picket_client_new(url, &o, &c), 0);
  picket_lock_info info;
  memset(&info, 0x55, sizeof info);
  ck_assert_int_eq(picket_inspect(c, "lib-never-used", &info), 0);
  ck_assert(!info.held);
  ck_assert_int_eq(info.fence, 0);
  ck_assert_int_eq(info.ttl_ms, 0);
  ck_assert(!info.has_owner);
  ck_assert_str_eq(info.owner, "");
  picket_client_free(c);
}
END_TEST

START_TEST(errors_table) {
  const int codes[] = {
#define X(name, value, msg) PICKET_##name,
      PICKET_ERRNO_MAP(X)
#undef X
  };
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    ck_assert_int_lt(codes[i], 0);
    ck_assert_str_ne(picket_strerror(codes[i]), "unknown error");
    ck_assert_str_ne(picket_err_name(codes[i]), "UNKNOWN");
    for (size_t j = 0; j < i; j++) ck_assert_int_ne(codes[i], codes[j]);
  }
  ck_assert_str_eq(picket_err_name(PICKET_EHELD), "EHELD");
  ck_assert_str_eq(picket_strerror(0), "success");
  ck_assert_str_eq(picket_strerror(-1000), "unknown error");
  ck_assert_str_eq(picket_strerror(5), "unknown error");
}
END_TEST

/* The inode of this process's one established TCP connection to loopback
 * `port` (from /proc/self/fd and /proc/net/tcp); 0 when there is none, -1
 * when there are several. */
static long conn_inode(int port) {
  long found = 0;
  char line[512];
  FILE *f = fopen("/proc/net/tcp", "r");
  ck_assert_ptr_nonnull(f);
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned rport, st;
    unsigned long inode;
    if (sscanf(line, " %*d: %*x:%*x %*x:%x %x %*x:%*x %*x:%*x %*x %*d %*d %lu", &rport, &st,
               &inode) != 3 ||
        (int)rport != port || st != 1 /* ESTABLISHED */)
      continue;
    char want[64], link[64], path[300];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
      ssize_t n = readlink(path, link, sizeof link - 1);
      if (n <= 0) continue;
      link[n] = '\0';
      if (strcmp(link, want) == 0) found = found ? -1 : (long)inode;
    }
    closedir(d);
  }
  fclose(f);
  return found;
}

/* One keep-alive connection per handle: many calls, one TCP connection. */
START_TEST(one_connection_per_handle) {
  picket_client *c = client();
  picket_lock_info info;
  ck_assert_int_eq(conn_inode(harness_picketd_port(picketd)), 0);
  ck_assert_int_eq(picket_inspect(c, "lib-conn", &info), 0);
  long first = conn_inode(harness_picketd_port(picketd));
  ck_assert_int_gt(first, 0);
  for (int i = 0; i < 10; i++) {
    picket_lease *l = NULL;
    ck_assert_int_eq(picket_acquire(c, "lib-conn", NULL, &l), 0);
    ck_assert_int_eq(picket_renew(c, l, 5000), 0);
    picket_lease *other = NULL;
    ck_assert_int_eq(picket_acquire(c, "lib-conn", NULL, &other), PICKET_EHELD);
    ck_assert_int_eq(picket_inspect(c, "lib-conn", &info), 0);
    ck_assert_int_eq(picket_release(c, l), 0);
    picket_lease_free(l);
  }
  ck_assert_int_eq(conn_inode(harness_picketd_port(picketd)), first);
  picket_client_free(c);
  ck_assert_int_eq(conn_inode(harness_picketd_port(picketd)), 0);
}
END_TEST

/* Redis answers with an error (the lease key has the wrong type): 502
 * store_error, not retried; a URL that is not picketd's API: 404. */
START_TEST(store_error_and_not_found) {
  picket_client *c = client();
  redisReply *rep = harness_redis_cmd(redis, "SET picket:{lib-wrongtype}:lease x");
  ck_assert_ptr_nonnull(rep);
  freeReplyObject(rep);
  picket_lease *l = NULL;
  ck_assert_int_eq(picket_acquire(c, "lib-wrongtype", NULL, &l), PICKET_ESTORE);
  ck_assert_int_eq(picket_client_status(c), 502);
  ck_assert_str_eq(picket_client_error_code(c), "store_error");
  ck_assert_ptr_null(l);
  picket_client_free(c);

  char url[128];
  snprintf(url, sizeof url, "%s/nothing-here", harness_picketd_url(picketd));
  ck_assert_int_eq(picket_client_new(url, NULL, &c), 0);
  picket_lock_info info;
  ck_assert_int_eq(picket_inspect(c, "x", &info), PICKET_ESERVER);
  ck_assert_int_eq(picket_client_status(c), 404);
  picket_client_free(c);
}
END_TEST

/* Nothing listens: a transport error, retried with backoff when allowed. */
START_TEST(transport_retries) {
  picket_options o;
  picket_options_init(&o);
  o.retries = 0;
  o.retry_base_ms = 200;
  o.retry_max_ms = 2000;
  picket_client *c = NULL;
  ck_assert_int_eq(picket_client_new("http://127.0.0.1:1", &o, &c), 0);
  picket_lock_info info;
  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(picket_inspect(c, "x", &info), PICKET_ETRANSPORT);
  int64_t once = picket_now_ms() - t0;
  ck_assert_int_eq(picket_client_status(c), 0);
  ck_assert_str_ne(picket_client_error_message(c), "");
  picket_client_free(c);

  /* 3 retries sleep at least 100 + 200 + 400 ms (jitter keeps each sleep
   * in the upper half of its cap: 200, 400, 800). */
  o.retries = 3;
  ck_assert_int_eq(picket_client_new("http://127.0.0.1:1", &o, &c), 0);
  t0 = picket_now_ms();
  ck_assert_int_eq(picket_inspect(c, "x", &info), PICKET_ETRANSPORT);
  ck_assert_int_ge(picket_now_ms() - t0, 700);
  /* The server chose no id: acquire is not safe to repeat, so no retry. */
  picket_acquire_opts s = {.server_lease_id = 1};
  picket_lease *l = NULL;
  t0 = picket_now_ms();
  ck_assert_int_eq(picket_acquire(c, "x", &s, &l), PICKET_ETRANSPORT);
  ck_assert_int_lt(picket_now_ms() - t0, once + 500 * harness_time_scale());
  picket_client_free(c);
}
END_TEST

/* A hung server: the request timeout bounds every call. */
START_TEST(request_timeout) {
  picket_options o;
  picket_options_init(&o);
  o.request_timeout_ms = 300;
  o.retries = 0;
  picket_client *c = client_with(&o);
  picket_lock_info info;
  ck_assert_int_eq(picket_inspect(c, "lib-timeout", &info), 0); /* connected */
  pause_process(harness_picketd_pid(picketd), SIGSTOP);
  int64_t t0 = picket_now_ms();
  int err = picket_inspect(c, "lib-timeout", &info);
  int64_t took = picket_now_ms() - t0;
  kill(harness_picketd_pid(picketd), SIGCONT);
  ck_assert_int_eq(err, PICKET_ETIMEDOUT);
  ck_assert_int_ge(took, 250);
  ck_assert_int_lt(took, 5000 * harness_time_scale());
  /* And the handle works again once the server does. */
  ck_assert_int_eq(picket_inspect(c, "lib-timeout", &info), 0);
  picket_client_free(c);
}
END_TEST

/* Redis down: picketd answers 503 store_unavailable; retried, then given up. */
START_TEST(store_unavailable) {
  picket_client *c = client();
  picket_lease *l = NULL;
  harness_redis_stop(redis, SIGKILL);
  int err = picket_acquire(c, "lib-503", NULL, &l);
  long status = picket_client_status(c);
  char code[64];
  snprintf(code, sizeof code, "%s", picket_client_error_code(c));
  ck_assert_int_eq(harness_redis_restart(redis), 0);
  ck_assert_int_eq(err, PICKET_EUNAVAIL);
  ck_assert_int_eq(status, 503);
  ck_assert_str_eq(code, "store_unavailable");
  ck_assert_ptr_null(l);
  /* picketd reconnects; the same handle succeeds again. */
  int64_t until = picket_now_ms() + 10000;
  while ((err = picket_acquire(c, "lib-503", NULL, &l)) == PICKET_EUNAVAIL &&
         picket_now_ms() < until)
    harness_sleep_ms(100);
  ck_assert_int_eq(err, 0);
  ck_assert_int_eq(picket_release(c, l), 0);
  picket_lease_free(l);
  picket_client_free(c);
}
END_TEST

/* Retries carry a call through a short outage: Redis is down when the
 * acquire starts (picketd answers 503) and back ~0.7 s later. The acquire
 * runs on its own thread with its own handle; Redis is restarted by this
 * thread, which owns it (the harness ties a server to the thread that
 * started it). */
typedef struct {
  int err;
  int64_t fence;
} acquire_result;

static void *acquire_with_retries(void *arg) {
  acquire_result *r = arg;
  picket_options o;
  picket_options_init(&o);
  o.retries = 10;
  o.retry_base_ms = 100;
  o.retry_max_ms = 1000; /* sleeps add up to 5 s and more */
  picket_client *c = NULL;
  picket_lease *l = NULL;
  r->err = picket_client_new(harness_picketd_url(picketd), &o, &c);
  if (r->err == 0) r->err = picket_acquire(c, "lib-outage", NULL, &l);
  r->fence = l ? picket_lease_fence(l) : 0;
  picket_lease_free(l);
  picket_client_free(c);
  return NULL;
}

START_TEST(retries_ride_out_an_outage) {
  acquire_result r = {1, 0};
  pthread_t th;
  harness_redis_stop(redis, SIGKILL);
  ck_assert_int_eq(pthread_create(&th, NULL, acquire_with_retries, &r), 0);
  harness_sleep_ms(700);
  int restarted = harness_redis_restart(redis);
  pthread_join(th, NULL);
  ck_assert_int_eq(restarted, 0);
  ck_assert_int_eq(r.err, 0);
  ck_assert_int_ge(r.fence, 1);
}
END_TEST

/* wait_ms: the server holds the acquire until the holder's lease ends. */
START_TEST(blocking_acquire) {
  picket_client *c = client();
  picket_lease *a = NULL, *b = NULL;
  picket_acquire_opts o = {.ttl_ms = 600};
  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(picket_acquire(c, "lib-wait", &o, &a), 0);
  picket_acquire_opts w = {.ttl_ms = 30000, .wait_ms = 10000};
  ck_assert_int_eq(picket_acquire(c, "lib-wait", &w, &b), 0);
  int64_t took = picket_now_ms() - t0; /* since before the 600 ms grant */
  ck_assert_int_ge(took, 590);
  ck_assert_int_lt(took, 8000 * harness_time_scale());
  ck_assert_msg(harness_fence_follows(picket_lease_fence(a), picket_lease_fence(b), 0),
                "fence %lld after %lld", (long long)picket_lease_fence(b),
                (long long)picket_lease_fence(a));
  /* A wait that runs out: lock_held, after about the wait. */
  picket_lease *x = NULL;
  picket_acquire_opts s = {.ttl_ms = 1000, .wait_ms = 300};
  t0 = picket_now_ms();
  ck_assert_int_eq(picket_acquire(c, "lib-wait", &s, &x), PICKET_EHELD);
  took = picket_now_ms() - t0;
  ck_assert_int_ge(took, 250);
  ck_assert_int_lt(took, 4000 * harness_time_scale());
  ck_assert_int_eq(picket_release(c, b), 0);
  picket_lease_free(a);
  picket_lease_free(b);
  picket_client_free(c);
}
END_TEST

/* ---- suite "keeper" ------------------------------------------------------- */

typedef struct {
  atomic_int calls;
  atomic_int err;
  _Atomic int64_t at_ms;
} lost_report;

static void on_lost(picket_lease *l, int err, void *arg) {
  lost_report *r = arg;
  atomic_store(&r->err, err);
  atomic_store(&r->at_ms, picket_now_ms());
  atomic_fetch_add(&r->calls, 1);
}

/* A lease under a keeper, with what the loss callback saw. */
typedef struct {
  picket_client *c;
  picket_lease *l;
  picket_keeper *k;
  lost_report r;
} kept;

static void kept_start(kept *t, const char *name, int64_t ttl_ms, int renew_divisor) {
  memset(t, 0, sizeof *t);
  t->c = client();
  picket_acquire_opts o = {.ttl_ms = ttl_ms};
  ck_assert_int_eq(picket_acquire(t->c, name, &o, &t->l), 0);
  picket_keeper_options ko;
  picket_keeper_options_init(&ko);
  ko.on_lost = on_lost;
  ko.arg = &t->r;
  if (renew_divisor) ko.renew_divisor = renew_divisor;
  ck_assert_int_eq(picket_keeper_start(t->c, t->l, &ko, &t->k), 0);
}

/* Stops the keeper (expecting `lost` from it); a kept lease must still be
 * valid and releasable with the caller's handle, which the keeper never
 * used. */
static void kept_finish(kept *t, int lost) {
  ck_assert_int_eq(picket_keeper_stop(t->k), lost);
  ck_assert_int_eq(atomic_load(&t->r.calls), lost ? 1 : 0);
  if (lost == 0) {
    ck_assert(picket_lease_valid(t->l));
    ck_assert_int_eq(picket_release(t->c, t->l), 0);
  } else {
    ck_assert(!picket_lease_valid(t->l) || lost == PICKET_ELOST);
  }
  picket_lease_free(t->l);
  picket_client_free(t->c);
}

static void pause_picketd(int sig) { pause_process(harness_picketd_pid(picketd), sig); }

START_TEST(keeper_renews) {
  kept t;
  kept_start(&t, "keep-renews", 1500, 0);
  harness_sleep_ms(3200); /* more than 2 TTLs */
  ck_assert(picket_lease_valid(t.l));
  ck_assert_int_eq(picket_keeper_lost(t.k), 0);
  ck_assert_int_ge(picket_keeper_renewals(t.k), 3);
  ck_assert_int_gt(redis_pttl("keep-renews"), 0);
  ck_assert_int_le(picket_lease_deadline_ms(t.l), picket_now_ms() + redis_pttl("keep-renews"));
  int64_t t0 = picket_now_ms();
  kept_finish(&t, 0);
  ck_assert_int_lt(picket_now_ms() - t0, 1000 * harness_time_scale());
}
END_TEST

/* picketd paused for less than the TTL: the renewal waits and succeeds. */
START_TEST(keeper_survives_short_pause) {
  kept t;
  kept_start(&t, "keep-pause", 3000, 0);
  pause_picketd(SIGSTOP);
  harness_sleep_ms(1800); /* the renewal at ~1 s hangs for ~0.8 s */
  pause_picketd(SIGCONT);
  harness_sleep_ms(2700); /* past the first grant's expiry */
  ck_assert_int_eq(picket_keeper_lost(t.k), 0);
  ck_assert_int_ge(picket_keeper_renewals(t.k), 2);
  ck_assert_int_gt(redis_pttl("keep-pause"), 0);
  kept_finish(&t, 0);
}
END_TEST

/* picketd paused for longer than the TTL: the loss is reported at the local
 * deadline (not before, not much after), as PICKET_EEXPIRED. */
START_TEST(keeper_reports_loss_at_deadline) {
  kept t;
  kept_start(&t, "keep-long-pause", 2000, 0);
  int64_t deadline = picket_lease_deadline_ms(t.l);
  pause_picketd(SIGSTOP);
  while (atomic_load(&t.r.calls) == 0 && picket_now_ms() < deadline + 5000) harness_sleep_ms(10);
  pause_picketd(SIGCONT);
  ck_assert_int_eq(atomic_load(&t.r.calls), 1);
  ck_assert_int_eq(atomic_load(&t.r.err), PICKET_EEXPIRED);
  ck_assert_int_ge(atomic_load(&t.r.at_ms), deadline);
  ck_assert_int_le(atomic_load(&t.r.at_ms), deadline + 750 * harness_time_scale());
  ck_assert_int_eq(picket_keeper_lost(t.k), PICKET_EEXPIRED);
  kept_finish(&t, PICKET_EEXPIRED);
}
END_TEST

/* The lease deleted in Redis: the next renewal learns it, and the keeper
 * reports PICKET_ELOST at once rather than at the deadline. */
START_TEST(keeper_reports_server_loss) {
  kept t;
  kept_start(&t, "keep-del", 9000, 0);
  redisReply *rep = harness_redis_cmd(redis, "DEL picket:{keep-del}:lease");
  ck_assert_ptr_nonnull(rep);
  ck_assert_int_eq(rep->integer, 1);
  freeReplyObject(rep);
  int64_t t0 = picket_now_ms();
  while (atomic_load(&t.r.calls) == 0 && picket_now_ms() < t0 + 8000) harness_sleep_ms(10);
  ck_assert_int_eq(atomic_load(&t.r.err), PICKET_ELOST);
  ck_assert_int_lt(atomic_load(&t.r.at_ms), picket_lease_deadline_ms(t.l)); /* before the deadline */
  ck_assert_int_le(atomic_load(&t.r.at_ms) - t0, (3000 + 1000) * harness_time_scale()); /* renewal */
  kept_finish(&t, PICKET_ELOST);
}
END_TEST

/* Redis paused: renewals fail (503 or time out) for a while; the keeper
 * keeps trying and holds on once Redis is back within the TTL. */
START_TEST(keeper_retries_failed_renewals) {
  kept t;
  kept_start(&t, "keep-retry", 6000, 0);
  harness_sleep_ms(1500);
  pause_process(harness_redis_pid(redis), SIGSTOP);
  harness_sleep_ms(2000); /* the renewal due at 2 s fails or waits */
  kill(harness_redis_pid(redis), SIGCONT);
  int64_t renewals = picket_keeper_renewals(t.k);
  harness_sleep_ms(3500); /* past the first grant's expiry */
  ck_assert_int_eq(picket_keeper_lost(t.k), 0);
  ck_assert_int_gt(picket_keeper_renewals(t.k), renewals);
  kept_finish(&t, 0);
}
END_TEST

/* max_hold_ms (proto/redis/hold.lua): renewals are cut to what is left of
 * the cap; the keeper sends none after a cut one and reports
 * PICKET_ECAPPED at the lease's local deadline, which is at the cap, not
 * before the cap's renewals and not long after it. */
START_TEST(keeper_stops_at_cap) {
  lost_report r = {0};
  picket_client *cc = client();
  picket_lease *l = NULL;
  /* A TTL with room for a slow renewal (every 600 ms, each with 1.2 s to
   * arrive: the CI run of 71ac310 under ASan lost a 900 ms lease to one
   * renewal that took over 600 ms) */
  picket_acquire_opts o = {.ttl_ms = 1800, .max_hold_ms = 4000};
  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(picket_acquire(cc, "keep-cap", &o, &l), 0);
  ck_assert_int_eq(picket_lease_ttl_ms(l), 1800);
  ck_assert(!picket_lease_capped(l));
  picket_keeper_options ko;
  picket_keeper_options_init(&ko);
  ko.on_lost = on_lost;
  ko.arg = &r;
  picket_keeper *k = NULL;
  ck_assert_int_eq(picket_keeper_start(cc, l, &ko, &k), 0);
  while (atomic_load(&r.calls) == 0 && picket_now_ms() < t0 + 12000) harness_sleep_ms(10);
  ck_assert_int_eq(atomic_load(&r.calls), 1);
  ck_assert_int_eq(atomic_load(&r.err), PICKET_ECAPPED);
  ck_assert(picket_lease_capped(l));
  int64_t at = atomic_load(&r.at_ms) - t0;
  ck_assert_msg(at >= 3700 && at <= 4000 + 750 * harness_time_scale(),
                "loss reported %lld ms after the grant; the cap is at 4000", (long long)at);
  /* the renewals before the cut, and none after: 1800/3 = every 600 ms */
  ck_assert_int_le(picket_keeper_renewals(k), 8);
  ck_assert_int_eq(picket_keeper_stop(k), PICKET_ECAPPED);
  /* the local deadline comes a little before the server's cap (drift
   * margin); past the cap the server agrees */
  harness_sleep_ms(4000 + 300 - (picket_now_ms() - t0));
  ck_assert_int_eq(picket_renew(cc, l, 1800), PICKET_ELOST);
  picket_lease_free(l);
  picket_client_free(cc);
}
END_TEST

/* lock_delay_ms: after the lease expires, an acquire is PICKET_EHELD with
 * the code lock_delay and how long the delay still runs. */
START_TEST(lock_delay_is_held) {
  picket_client *cc = client();
  picket_lease *l = NULL, *l2 = NULL;
  picket_acquire_opts o = {.ttl_ms = 200, .lock_delay_ms = 3000};
  ck_assert_int_eq(picket_acquire(cc, "keep-delay", &o, &l), 0);
  harness_sleep_ms(400);
  picket_acquire_opts o2 = {.ttl_ms = 200};
  ck_assert_int_eq(picket_acquire(cc, "keep-delay", &o2, &l2), PICKET_EHELD);
  ck_assert_str_eq(picket_client_error_code(cc), "lock_delay");
  ck_assert_int_gt(picket_client_retry_after_ms(cc), 0);
  ck_assert_int_le(picket_client_retry_after_ms(cc), 3000);
  picket_acquire_opts bad = {.lock_delay_ms = -1};
  ck_assert_int_eq(picket_acquire(cc, "keep-delay", &bad, &l2), PICKET_EINVAL);
  picket_lease_free(l);
  picket_client_free(cc);
}
END_TEST

/* Stopping while a renewal hangs on a paused server is prompt. */
START_TEST(keeper_stop_interrupts) {
  kept t;
  kept_start(&t, "keep-stop", 30000, 100); /* a renewal every 300 ms */
  pause_picketd(SIGSTOP);
  harness_sleep_ms(800); /* a renewal is in flight, hung */
  int64_t t0 = picket_now_ms();
  int lost = picket_keeper_stop(t.k);
  int64_t took = picket_now_ms() - t0;
  pause_picketd(SIGCONT);
  ck_assert_int_eq(lost, 0);
  ck_assert_int_lt(took, 2500 * harness_time_scale());
  ck_assert_int_eq(picket_release(t.c, t.l), 0);
  picket_lease_free(t.l);
  picket_client_free(t.c);
}
END_TEST

START_TEST(keeper_invalid) {
  picket_client *c = client();
  picket_lease *l = NULL;
  picket_keeper *k = NULL;
  ck_assert_int_eq(picket_lease_new("keep-inval", "0123456789abcdef0123456789abcdef", &l), 0);
  ck_assert_int_eq(picket_keeper_start(c, l, NULL, &k), PICKET_EINVAL); /* no deadline */
  picket_lease_free(l);
  picket_acquire_opts o = {.ttl_ms = 5000};
  ck_assert_int_eq(picket_acquire(c, "keep-inval", &o, &l), 0);
  picket_keeper_options ko;
  picket_keeper_options_init(&ko);
  ko.renew_divisor = 1;
  ck_assert_int_eq(picket_keeper_start(c, l, &ko, &k), PICKET_EINVAL);
  ck_assert_ptr_null(k);
  ck_assert_int_eq(picket_keeper_stop(NULL), 0);
  ck_assert_int_eq(picket_release(c, l), 0);
  picket_lease_free(l);
  picket_client_free(c);
}
END_TEST

/* Semaphores: `limit` permits and no more (semaphore_full is PICKET_EHELD
 * with when the first frees), each a lease on a slot with its own fence
 * checked under NAME:permit:I; renew, release, a handed-over permit and a
 * keeper work on it as on a lock's lease; another limit while permits live
 * is PICKET_EMISMATCH naming the live one; GET lists the permits. */
START_TEST(semaphore_permits) {
  picket_client *c = client();
  picket_lease *p[3] = {NULL}, *extra = NULL;
  picket_acquire_opts o = {.ttl_ms = 20000, .owner = "sem-worker"};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", 3, &o, &p[i]), 0);
    ck_assert(picket_lease_is_permit(p[i]));
    ck_assert_str_eq(picket_lease_lock(p[i]), "lib-sem");
    ck_assert_int_eq(picket_lease_permit(p[i]), i); /* the lowest free slot */
    ck_assert_int_eq(picket_lease_limit(p[i]), 3);
    char want[64];
    snprintf(want, sizeof want, "lib-sem:permit:%d", i);
    ck_assert_str_eq(picket_lease_fence_lock(p[i]), want);
    ck_assert_int_ge(picket_lease_fence(p[i]), 1);
    ck_assert_str_eq(picket_lease_owner(p[i]), "sem-worker");
    ck_assert(picket_lease_valid(p[i]));
  }
  /* full: EHELD, code semaphore_full, retry_after_ms up to the TTL */
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", 3, &o, &extra), PICKET_EHELD);
  ck_assert_ptr_null(extra);
  ck_assert_int_eq(picket_client_status(c), 409);
  ck_assert_str_eq(picket_client_error_code(c), "semaphore_full");
  ck_assert_int_gt(picket_client_retry_after_ms(c), 0);
  ck_assert_int_le(picket_client_retry_after_ms(c), 20000);
  /* another limit while permits live */
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", 5, &o, &extra), PICKET_EMISMATCH);
  ck_assert_str_eq(picket_client_error_code(c), "limit_mismatch");
  ck_assert_int_eq(picket_client_sem_limit(c), 3);
  ck_assert_int_eq(picket_client_retry_after_ms(c), -1);
  ck_assert_str_ne(picket_strerror(PICKET_EMISMATCH), "unknown error");
  /* a lock of the same name is apart; its fence lock is its own name */
  picket_lease *lk = NULL;
  ck_assert_int_eq(picket_acquire(c, "lib-sem", NULL, &lk), 0);
  ck_assert(!picket_lease_is_permit(lk));
  ck_assert_int_eq(picket_lease_permit(lk), -1);
  ck_assert_int_eq(picket_lease_limit(lk), 0);
  ck_assert_str_eq(picket_lease_fence_lock(lk), "lib-sem");
  ck_assert_int_eq(picket_client_sem_limit(c), -1);
  ck_assert_int_eq(picket_release(c, lk), 0);
  picket_lease_free(lk);

  /* renew: same slot and fence, new TTL, at the semaphore's path */
  int64_t f1 = picket_lease_fence(p[1]);
  ck_assert_int_eq(picket_renew(c, p[1], 7000), 0);
  ck_assert_int_eq(picket_lease_ttl_ms(p[1]), 7000);
  ck_assert_int_eq(picket_lease_fence(p[1]), f1);
  ck_assert_int_eq(picket_lease_permit(p[1]), 1);

  /* a handed-over permit learns its slot and fence lock at its renew */
  picket_lease *h = NULL;
  ck_assert_int_eq(picket_sem_lease_new("lib-sem", picket_lease_id(p[2]), &h), 0);
  ck_assert(picket_lease_is_permit(h));
  ck_assert_int_eq(picket_lease_permit(h), -1);
  ck_assert_ptr_null(picket_lease_fence_lock(h));
  ck_assert_int_eq(picket_renew(c, h, 20000), 0);
  ck_assert_int_eq(picket_lease_permit(h), 2);
  ck_assert_str_eq(picket_lease_fence_lock(h), "lib-sem:permit:2");
  ck_assert_int_eq(picket_lease_fence(h), picket_lease_fence(p[2]));
  picket_lease_free(h);
  /* a lock's lease of that id is not the permit */
  ck_assert_int_eq(picket_lease_new("lib-sem", picket_lease_id(p[2]), &h), 0);
  ck_assert_int_eq(picket_renew(c, h, 5000), PICKET_ELOST);
  picket_lease_free(h);

  /* inspect: limit, held, the permits lowest first, never a lease id */
  picket_sem_info info;
  ck_assert_int_eq(picket_sem_inspect(c, "lib-sem", &info), 0);
  ck_assert_int_eq(info.limit, 3);
  ck_assert_int_eq(info.held, 3);
  ck_assert_int_eq(info.npermits, 3);
  ck_assert_int_eq(info.waiters, 0);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(info.permits[i].permit, i);
    ck_assert_int_eq(info.permits[i].fence, picket_lease_fence(p[i]));
    ck_assert_str_eq(info.permits[i].fence_lock, picket_lease_fence_lock(p[i]));
    ck_assert(info.permits[i].has_owner);
    ck_assert_str_eq(info.permits[i].owner, "sem-worker");
    ck_assert_int_gt(info.permits[i].ttl_ms, 0);
  }
  picket_sem_info_clear(&info);
  ck_assert_ptr_null(info.permits);
  picket_sem_info_clear(NULL);

  /* a keeper keeps a permit past its TTL */
  picket_lease *k = NULL;
  picket_acquire_opts ko = {.ttl_ms = 900};
  ck_assert_int_eq(picket_release(c, p[0]), 0);
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", 3, &ko, &k), 0);
  ck_assert_int_eq(picket_lease_permit(k), 0); /* slot 0 again, with a newer fence */
  ck_assert_int_gt(picket_lease_fence(k), picket_lease_fence(p[0]));
  picket_keeper *kp = NULL;
  ck_assert_int_eq(picket_keeper_start(c, k, NULL, &kp), 0);
  harness_sleep_ms(2200);
  ck_assert_int_eq(picket_keeper_lost(kp), 0);
  ck_assert_int_ge(picket_keeper_renewals(kp), 2);
  ck_assert(picket_lease_valid(k));
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", 3, &o, &extra), PICKET_EHELD);
  ck_assert_int_eq(picket_keeper_stop(kp), 0);

  /* release frees the slot; a second release is ELOST */
  ck_assert_int_eq(picket_release(c, p[1]), 0);
  ck_assert(!picket_lease_valid(p[1]));
  ck_assert_int_eq(picket_release(c, p[1]), PICKET_ELOST);
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", 3, &o, &extra), 0);
  ck_assert_int_eq(picket_lease_permit(extra), 1);
  ck_assert_int_gt(picket_lease_fence(extra), f1);
  picket_lease *all[] = {k, p[2], extra};
  for (int i = 0; i < 3; i++) ck_assert_int_eq(picket_release(c, all[i]), 0);
  ck_assert_int_eq(picket_sem_inspect(c, "lib-sem", &info), 0);
  ck_assert_int_eq(info.held, 0);
  ck_assert_int_eq(info.limit, 0);
  picket_sem_info_clear(&info);
  /* with none live, another limit is fine */
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", 1, NULL, &lk), 0);
  ck_assert_int_eq(picket_release(c, lk), 0);
  picket_lease_free(lk);

  /* bad arguments, refused here */
  char longname[PICKET_SEM_NAME_MAX + 2];
  memset(longname, 's', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  ck_assert_int_eq(picket_sem_acquire(c, longname, 2, NULL, &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", 0, NULL, &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", -2, NULL, &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_sem_acquire(c, "lib-sem", PICKET_SEM_LIMIT_MAX + 1, NULL, &lk),
                   PICKET_EINVAL);
  ck_assert_int_eq(picket_sem_acquire(c, "bad name", 2, NULL, &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_sem_lease_new(longname, picket_lease_id(k), &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_sem_inspect(c, longname, &info), PICKET_EINVAL);
  ck_assert_ptr_null(lk);
  for (int i = 0; i < 3; i++) picket_lease_free(p[i]);
  picket_lease_free(k);
  picket_lease_free(extra);
  picket_client_free(c);
}
END_TEST

START_TEST(rwlock_modes) {
  picket_client *c = client();
  picket_lease *w = NULL, *r[2] = {NULL}, *lk = NULL, *x = NULL;
  picket_acquire_opts wo = {.ttl_ms = 20000, .owner = "rw-writer"};
  picket_acquire_opts ro = {.ttl_ms = 20000, .owner = "rw-reader"};
  /* a write first, so that reads have an epoch */
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", PICKET_MODE_WRITE, &wo, &w), 0);
  ck_assert(picket_lease_is_rwlock(w));
  ck_assert(!picket_lease_is_permit(w));
  ck_assert_int_eq(picket_lease_mode(w), PICKET_MODE_WRITE);
  ck_assert_str_eq(picket_lease_lock(w), "lib-rw");
  ck_assert_str_eq(picket_lease_fence_lock(w), "lib-rw:rw");
  ck_assert_str_eq(picket_lease_owner(w), "rw-writer");
  int64_t wf = picket_lease_fence(w);
  ck_assert_int_ge(wf, 1);
  /* a writer keeps readers (and other writers) out: EHELD as for locks */
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", PICKET_MODE_READ, &ro, &x), PICKET_EHELD);
  ck_assert_ptr_null(x);
  ck_assert_str_eq(picket_client_error_code(c), "lock_held");
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", PICKET_MODE_WRITE, &wo, &x), PICKET_EHELD);
  /* renew a write: same fence, new TTL, at the rwlock's path */
  ck_assert_int_eq(picket_renew(c, w, 6000), 0);
  ck_assert_int_eq(picket_lease_ttl_ms(w), 6000);
  ck_assert_int_eq(picket_lease_fence(w), wf);
  ck_assert_int_eq(picket_release(c, w), 0);
  ck_assert_int_eq(picket_release(c, w), PICKET_ELOST);

  /* readers share, with the last write's fence */
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", PICKET_MODE_READ, &ro, &r[i]), 0);
    ck_assert_int_eq(picket_lease_mode(r[i]), PICKET_MODE_READ);
    ck_assert_int_eq(picket_lease_fence(r[i]), wf);
    ck_assert_str_eq(picket_lease_fence_lock(r[i]), "lib-rw:rw");
  }
  /* ... and keep a writer out */
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", PICKET_MODE_WRITE, &wo, &x), PICKET_EHELD);
  ck_assert_str_eq(picket_client_error_code(c), "lock_held");
  /* a lock of the same name is apart */
  ck_assert_int_eq(picket_acquire(c, "lib-rw", NULL, &lk), 0);
  ck_assert(!picket_lease_is_rwlock(lk));
  ck_assert_int_eq(picket_lease_mode(lk), -1);
  ck_assert_int_eq(picket_release(c, lk), 0);
  picket_lease_free(lk);
  lk = NULL;

  /* a handed-over read lease learns its mode at its renew */
  picket_lease *h = NULL;
  ck_assert_int_eq(picket_rw_lease_new("lib-rw", picket_lease_id(r[1]), &h), 0);
  ck_assert(picket_lease_is_rwlock(h));
  ck_assert_int_eq(picket_lease_mode(h), -1);
  ck_assert_str_eq(picket_lease_fence_lock(h), "lib-rw:rw");
  ck_assert_int_eq(picket_renew(c, h, 20000), 0);
  ck_assert_int_eq(picket_lease_mode(h), PICKET_MODE_READ);
  ck_assert_int_eq(picket_lease_fence(h), wf);
  picket_lease_free(h);
  /* a lock's lease of that id is not the read lease */
  ck_assert_int_eq(picket_lease_new("lib-rw", picket_lease_id(r[1]), &h), 0);
  ck_assert_int_eq(picket_renew(c, h, 5000), PICKET_ELOST);
  picket_lease_free(h);

  /* inspect: readers, no writer, never a lease id */
  picket_rw_info info;
  ck_assert_int_eq(picket_rw_inspect(c, "lib-rw", &info), 0);
  ck_assert_int_eq(info.fence, wf);
  ck_assert(!info.writer);
  ck_assert_int_eq(info.readers, 2);
  ck_assert_int_eq(info.nreads, 2);
  ck_assert_int_eq(info.writers_waiting, 0);
  ck_assert_int_eq(info.reads[0].fence, wf);
  ck_assert(info.reads[0].has_owner);
  ck_assert_str_eq(info.reads[0].owner, "rw-reader");
  picket_rw_info_clear(&info);
  ck_assert_ptr_null(info.reads);
  picket_rw_info_clear(NULL);

  /* a keeper keeps a read lease past its TTL; the writer stays out */
  picket_lease *k = NULL;
  picket_acquire_opts ko = {.ttl_ms = 900};
  ck_assert_int_eq(picket_release(c, r[0]), 0);
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", PICKET_MODE_READ, &ko, &k), 0);
  picket_keeper *kp = NULL;
  ck_assert_int_eq(picket_keeper_start(c, k, NULL, &kp), 0);
  ck_assert_int_eq(picket_release(c, r[1]), 0);
  harness_sleep_ms(2200);
  ck_assert_int_eq(picket_keeper_lost(kp), 0);
  ck_assert_int_ge(picket_keeper_renewals(kp), 2);
  ck_assert(picket_lease_valid(k));
  ck_assert_int_eq(picket_lease_mode(k), PICKET_MODE_READ);
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", PICKET_MODE_WRITE, &wo, &x), PICKET_EHELD);
  ck_assert_int_eq(picket_keeper_stop(kp), 0);
  ck_assert_int_eq(picket_release(c, k), 0);
  /* free again: a write's fence is above every earlier grant's */
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", PICKET_MODE_WRITE, &wo, &x), 0);
  ck_assert_int_gt(picket_lease_fence(x), wf);
  ck_assert_int_eq(picket_rw_inspect(c, "lib-rw", &info), 0);
  ck_assert(info.writer);
  ck_assert_str_eq(info.writer_owner, "rw-writer");
  ck_assert_int_eq(info.readers, 0);
  picket_rw_info_clear(&info);
  ck_assert_int_eq(picket_release(c, x), 0);
  picket_lease_free(x);

  /* bad arguments, refused here */
  char longname[PICKET_RW_NAME_MAX + 2];
  memset(longname, 'r', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  ck_assert_int_eq(picket_rw_acquire(c, longname, PICKET_MODE_READ, NULL, &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", 2, NULL, &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_rw_acquire(c, "lib-rw", -1, NULL, &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_rw_lease_new(longname, picket_lease_id(k), &lk), PICKET_EINVAL);
  ck_assert_int_eq(picket_rw_inspect(c, longname, &info), PICKET_EINVAL);
  ck_assert_ptr_null(lk);
  picket_lease_free(w);
  for (int i = 0; i < 2; i++) picket_lease_free(r[i]);
  picket_lease_free(k);
  picket_client_free(c);
}
END_TEST


/* ---- operators: listing, inspect's grant fields, break -------------------- */

/* A waiting acquire of `name` on a client of its own (a thread). */
typedef struct {
  const char *name;
  int err;
  int64_t fence;
} waiter_arg;

static void *wait_for_lock(void *arg) {
  waiter_arg *w = arg;
  picket_client *c = NULL;
  picket_lease *l = NULL;
  picket_acquire_opts o = {.ttl_ms = 30000, .wait_ms = 20000};
  w->err = picket_client_new(harness_picketd_url(picketd), NULL, &c);
  if (w->err == 0) w->err = picket_acquire(c, w->name, &o, &l);
  w->fence = l ? picket_lease_fence(l) : 0;
  if (l) picket_release(c, l);
  picket_lease_free(l);
  picket_client_free(c);
  return NULL;
}

/* Waits until picket_inspect counts `n` waiters on lock `name` (5 s at most). */
static void await_waiters(picket_client *c, const char *name, int64_t n) {
  picket_lock_info info;
  for (int i = 0; i < 500; i++) {
    ck_assert_int_eq(picket_inspect(c, name, &info), 0);
    if (info.waiters == n) return;
    harness_sleep_ms(10);
  }
  ck_assert_msg(0, "%s: %lld waiters, want %lld", name, (long long)info.waiters, (long long)n);
}

/* picket_list: 5 locks, a semaphore and an rwlock under one prefix (and a
 * name beside it) in pages of 2, each exactly once, in name order, with
 * their kind, owner, fence, grant time, renewals and waiters; the last
 * page's cursor is NULL. Bad arguments are refused here or by picketd. */
START_TEST(list_pages) {
  picket_client *c = client();
  picket_lease *l[5] = {NULL}, *sem = NULL, *rw = NULL, *other = NULL;
  picket_acquire_opts o = {.ttl_ms = 60000, .owner = "lister"};
  char name[64];
  int64_t t0 = harness_redis_time_us(redis) / 1000;
  for (int i = 0; i < 5; i++) {
    snprintf(name, sizeof name, "lib-ls.%d", i);
    ck_assert_int_eq(picket_acquire(c, name, &o, &l[i]), 0);
  }
  ck_assert_int_eq(picket_renew(c, l[1], 60000), 0);
  ck_assert_int_eq(picket_sem_acquire(c, "lib-ls.sem", 3, &o, &sem), 0);
  ck_assert_int_eq(picket_rw_acquire(c, "lib-ls.rw", PICKET_MODE_WRITE, &o, &rw), 0);
  ck_assert_int_eq(picket_acquire(c, "lib-lt", &o, &other), 0); /* sorts next to it, not in it */
  int64_t t1 = harness_redis_time_us(redis) / 1000;

  picket_lock_list page;
  char cursor[PICKET_LIST_CURSOR_MAX + 1] = "", last[PICKET_NAME_MAX + 1] = "";
  int pages = 0, locks = 0, sems = 0, rws = 0;
  do {
    memset(&page, 0x55, sizeof page);
    ck_assert_int_eq(picket_list(c, "lib-ls.", 2, cursor[0] ? cursor : NULL, &page), 0);
    ck_assert_int_le(page.nentries, 2);
    for (size_t i = 0; i < page.nentries; i++) {
      const picket_lock_entry *e = &page.entries[i];
      ck_assert_msg(strncmp(e->name, "lib-ls.", 7) == 0, "listed %s", e->name);
      ck_assert_msg(strcmp(e->name, last) > 0, "%s after %s", e->name, last);
      snprintf(last, sizeof last, "%s", e->name);
      ck_assert_int_eq(e->waiters, 0);
      ck_assert_int_gt(e->ttl_ms, 50000);
      if (e->kind == PICKET_KIND_SEMAPHORE) {
        sems++;
        ck_assert_str_eq(e->name, "lib-ls.sem");
        ck_assert_int_eq(e->holders, 1);
        ck_assert_int_eq(e->limit, 3);
        ck_assert_int_eq(e->fence, -1);
        ck_assert_int_eq(e->renewals, -1);
        continue;
      }
      ck_assert_int_eq(e->limit, 0);
      ck_assert_int_eq(e->holders, 1);
      ck_assert(e->has_owner);
      ck_assert_str_eq(e->owner, "lister");
      ck_assert_int_ge(e->acquired_at_ms, t0);
      ck_assert_int_le(e->acquired_at_ms, t1);
      if (e->kind == PICKET_KIND_RWLOCK) {
        rws++;
        ck_assert_str_eq(e->name, "lib-ls.rw");
        ck_assert_int_eq(e->fence, picket_lease_fence(rw));
        continue;
      }
      ck_assert_int_eq(e->kind, PICKET_KIND_LOCK);
      int k = e->name[7] - '0';
      ck_assert(k >= 0 && k < 5);
      ck_assert_int_eq(e->fence, picket_lease_fence(l[k]));
      ck_assert_int_eq(e->renewals, k == 1 ? 1 : 0);
      locks++;
    }
    ck_assert(page.cursor == NULL || strlen(page.cursor) <= PICKET_LIST_CURSOR_MAX);
    snprintf(cursor, sizeof cursor, "%s", page.cursor ? page.cursor : "");
    picket_lock_list_clear(&page);
    ck_assert_ptr_null(page.entries);
    ck_assert_ptr_null(page.cursor);
    ck_assert_int_lt(++pages, 20);
  } while (cursor[0]);
  ck_assert_int_eq(locks, 5);
  ck_assert_int_eq(sems, 1);
  ck_assert_int_eq(rws, 1);
  ck_assert_int_ge(pages, 4); /* 7 names, 2 a page */
  /* the server's default page; the prefix matches nothing */
  ck_assert_int_eq(picket_list(c, "lib-ls.nothing", 0, NULL, &page), 0);
  ck_assert_int_eq(page.nentries, 0);
  ck_assert_ptr_null(page.cursor);
  picket_lock_list_clear(&page);
  /* released: gone from the listing */
  ck_assert_int_eq(picket_release(c, l[0]), 0);
  ck_assert_int_eq(picket_list(c, "lib-ls.0", 10, NULL, &page), 0);
  ck_assert_int_eq(page.nentries, 0);
  picket_lock_list_clear(&page);

  /* refused here: no request made */
  char longp[PICKET_NAME_MAX + 2];
  memset(longp, 'p', sizeof longp - 1);
  longp[sizeof longp - 1] = '\0';
  ck_assert_int_eq(picket_list(c, "lib ls", 10, NULL, &page), PICKET_EINVAL);
  ck_assert_int_eq(picket_client_status(c), 0);
  ck_assert_int_eq(picket_list(c, longp, 10, NULL, &page), PICKET_EINVAL);
  ck_assert_int_eq(picket_list(c, "lib-ls.", PICKET_LIST_MAX + 1, NULL, &page), PICKET_EINVAL);
  ck_assert_int_eq(picket_list(c, "lib-ls.", -1, NULL, &page), PICKET_EINVAL);
  ck_assert_int_eq(picket_list(c, "lib-ls.", 10, "0&limit=5", &page), PICKET_EINVAL);
  ck_assert_int_eq(picket_list(c, "lib-ls.", 10, "", &page), PICKET_EINVAL);
  ck_assert_int_eq(picket_client_status(c), 0);
  ck_assert_ptr_null(page.entries);
  /* refused by picketd (400): a cursor of another prefix */
  ck_assert_int_eq(picket_list(c, "lib-ls.", 10, "0-l-zzz", &page), PICKET_EINVAL);
  ck_assert_int_eq(picket_client_status(c), 400);
  ck_assert_str_eq(picket_client_error_code(c), "invalid_argument");
  picket_lock_list_clear(NULL);

  for (int i = 1; i < 5; i++) ck_assert_int_eq(picket_release(c, l[i]), 0);
  ck_assert_int_eq(picket_release(c, sem), 0);
  ck_assert_int_eq(picket_release(c, rw), 0);
  ck_assert_int_eq(picket_release(c, other), 0);
  for (int i = 0; i < 5; i++) picket_lease_free(l[i]);
  picket_lease_free(sem);
  picket_lease_free(rw);
  picket_lease_free(other);
  picket_client_free(c);
}
END_TEST

/* picket_inspect's appended fields: the grant's time by Redis's clock,
 * the renewals, the acquires waiting on this picketd; unknown when free. */
START_TEST(inspect_grant_fields) {
  picket_client *c = client();
  picket_lease *l = NULL;
  picket_lock_info info;
  ck_assert_int_eq(picket_inspect(c, "lib-info", &info), 0);
  ck_assert(!info.held);
  ck_assert_int_eq(info.acquired_at_ms, 0);
  ck_assert_int_eq(info.renewals, -1);
  ck_assert_int_eq(info.waiters, 0);

  int64_t t0 = harness_redis_time_us(redis) / 1000;
  picket_acquire_opts o = {.ttl_ms = 30000};
  ck_assert_int_eq(picket_acquire(c, "lib-info", &o, &l), 0);
  int64_t t1 = harness_redis_time_us(redis) / 1000;
  ck_assert_int_eq(picket_inspect(c, "lib-info", &info), 0);
  ck_assert(info.held);
  ck_assert_int_ge(info.acquired_at_ms, t0);
  ck_assert_int_le(info.acquired_at_ms, t1);
  ck_assert_int_eq(info.renewals, 0);
  int64_t at = info.acquired_at_ms;
  ck_assert_int_eq(picket_renew(c, l, 30000), 0);
  ck_assert_int_eq(picket_renew(c, l, 30000), 0);
  ck_assert_int_eq(picket_inspect(c, "lib-info", &info), 0);
  ck_assert_int_eq(info.renewals, 2);
  ck_assert_int_eq(info.acquired_at_ms, at); /* a renewal is no new grant */

  waiter_arg w = {"lib-info", 1, 0};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, wait_for_lock, &w), 0);
  await_waiters(c, "lib-info", 1);
  ck_assert_int_eq(picket_release(c, l), 0);
  pthread_join(th, NULL);
  ck_assert_int_eq(w.err, 0);
  ck_assert_int_gt(w.fence, picket_lease_fence(l));
  ck_assert_int_eq(picket_inspect(c, "lib-info", &info), 0);
  ck_assert_int_eq(info.waiters, 0);
  picket_lease_free(l);
  picket_client_free(c);
}
END_TEST

/* picket_break: the lease ends at once, a waiter is granted with a fence
 * above the break's, which is above the broken holder's; the broken
 * holder's renew and release are PICKET_ELOST saying it was broken. A
 * free lock's break says so and moves the fence all the same. */
START_TEST(break_lock) {
  picket_client *c = client();
  picket_lease *l = NULL, *next = NULL;
  picket_acquire_opts o = {.ttl_ms = 60000, .owner = "stuck job"};
  ck_assert_int_eq(picket_acquire(c, "lib-break", &o, &l), 0);
  waiter_arg w = {"lib-break", 1, 0};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, wait_for_lock, &w), 0);
  await_waiters(c, "lib-break", 1);

  picket_break_result r;
  memset(&r, 0x55, sizeof r);
  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(picket_break(c, "lib-break", &r), 0);
  ck_assert_int_eq(picket_client_status(c), 200);
  ck_assert(r.broken);
  ck_assert(r.has_owner);
  ck_assert_str_eq(r.owner, "stuck job");
  ck_assert_int_gt(r.fence, picket_lease_fence(l));
  pthread_join(th, NULL);
  ck_assert_int_lt(picket_now_ms() - t0, 5000 * harness_time_scale());
  ck_assert_int_eq(w.err, 0);
  ck_assert_int_gt(w.fence, r.fence);

  ck_assert_int_eq(picket_renew(c, l, 60000), PICKET_ELOST);
  ck_assert_str_eq(picket_client_error_code(c), "lease_lost");
  ck_assert_msg(strstr(picket_client_error_message(c), "broken") != NULL, "renew: %s",
                picket_client_error_message(c));
  ck_assert_int_eq(picket_release(c, l), PICKET_ELOST);
  ck_assert_msg(strstr(picket_client_error_message(c), "broken") != NULL, "release: %s",
                picket_client_error_message(c));

  /* nothing held (the waiter released): not broken, the fence moves on */
  ck_assert_int_eq(picket_break(c, "lib-break", &r), 0);
  ck_assert(!r.broken);
  ck_assert(!r.has_owner);
  ck_assert_str_eq(r.owner, "");
  ck_assert_int_gt(r.fence, w.fence);
  ck_assert_int_eq(picket_acquire(c, "lib-break", NULL, &next), 0);
  ck_assert_int_gt(picket_lease_fence(next), r.fence);
  ck_assert_int_eq(picket_release(c, next), 0);

  /* a bad name: refused here, *out zeroed */
  memset(&r, 0x55, sizeof r);
  ck_assert_int_eq(picket_break(c, "bad name", &r), PICKET_EINVAL);
  ck_assert_int_eq(picket_client_status(c), 0);
  ck_assert_int_eq(r.broken, 0);
  ck_assert_int_eq(r.fence, 0);
  picket_lease_free(l);
  picket_lease_free(next);
  picket_client_free(c);
}
END_TEST

static Suite *lib_suite(void) {
  Suite *s = suite_create("lib");
  TCase *t = tcase_create("calls");
  tcase_add_unchecked_fixture(t, servers_start, servers_stop);
  tcase_add_checked_fixture(t, NULL, resume_all);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, acquire_release);
  tcase_add_test(t, held_and_fences);
  tcase_add_test(t, client_lease_id);
  tcase_add_test(t, deadline_before_server_expiry);
  tcase_add_test(t, deadline_follows_shorter_renewal);
  tcase_add_test(t, renew_and_lost);
  tcase_add_test(t, expiry);
  tcase_add_test(t, invalid_arguments);
  tcase_add_test(t, inspect_unknown_and_token);
  tcase_add_test(t, errors_table);
  tcase_add_test(t, one_connection_per_handle);
  tcase_add_test(t, store_error_and_not_found);
  tcase_add_test(t, transport_retries);
  tcase_add_test(t, request_timeout);
  tcase_add_test(t, blocking_acquire);
  tcase_add_test(t, semaphore_permits);
  tcase_add_test(t, rwlock_modes);
  tcase_add_test(t, list_pages);
  tcase_add_test(t, inspect_grant_fields);
  tcase_add_test(t, break_lock);
  suite_add_tcase(s, t);
  /* Restarts Redis: the servers must belong to the test's own process
   * (the harness ties them to their parent), hence a checked fixture. */
  TCase *r = tcase_create("restart");
  tcase_add_checked_fixture(r, servers_start, servers_stop);
  tcase_set_timeout(r, 60);
  tcase_add_test(r, store_unavailable);
  tcase_add_test(r, retries_ride_out_an_outage);
  suite_add_tcase(s, r);
  return s;
}

static Suite *keeper_suite(void) {
  Suite *s = suite_create("keeper");
  TCase *t = tcase_create("keeper");
  tcase_add_unchecked_fixture(t, servers_start, servers_stop);
  tcase_add_checked_fixture(t, NULL, resume_all);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, keeper_renews);
  tcase_add_test(t, keeper_survives_short_pause);
  tcase_add_test(t, keeper_reports_loss_at_deadline);
  tcase_add_test(t, keeper_reports_server_loss);
  tcase_add_test(t, keeper_retries_failed_renewals);
  tcase_add_test(t, keeper_stop_interrupts);
  tcase_add_test(t, keeper_invalid);
  tcase_add_test(t, keeper_stops_at_cap);
  tcase_add_test(t, lock_delay_is_held);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(lib_suite());
  srunner_add_suite(sr, keeper_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
