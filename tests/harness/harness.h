/* Test harness: throwaway redis-server and picketd processes on private
 * sockets and loopback ports, and a small HTTP client, for the Check suites
 * under tests/. Every process is started with PR_SET_PDEATHSIG, so a test
 * that crashes or times out takes its servers with it; every temp dir is
 * removed by the matching _free.
 *
 * Binaries are found in HARNESS_BIN_DIR (set by CMake to build/bin), so one
 * build tree always tests its own picketd. */
#ifndef PICKET_HARNESS_H
#define PICKET_HARNESS_H

#include <jansson.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct harness_redis harness_redis;
typedef struct harness_etcd harness_etcd;
typedef struct harness_picketd harness_picketd;

/* Options for a Redis server; zero means the default. */
typedef struct {
  int appendonly;          /* 1: AOF on with appendfsync always */
  int tcp;                 /* 1: also listen on a free loopback port */
  const char *extra_conf;  /* more redis.conf lines, or NULL */
} harness_redis_opts;

/* Starts redis-server in a new temp dir, on a unix socket, and waits until
 * it answers PING. Returns NULL (after printing why) on failure.
 *
 * With PICKET_TEST_BACKEND=etcd in the environment it also starts a
 * one-member etcd (harness_etcd.h), which picketd is given instead of this
 * Redis (harness_picketd_start), and which harness_redis_stop, _restart and
 * _free stop, restart and free with it: the same suite then tests picketd
 * on etcd. */
harness_redis *harness_redis_start(const harness_redis_opts *opts);
/* Stops with `sig` (SIGTERM waits for a clean exit; SIGKILL is a crash)
 * and reaps it; the dir and its AOF stay, so restart brings the data back. */
void harness_redis_stop(harness_redis *r, int sig);
/* Starts it again on the same socket, dir and port. Returns 0 or -1. */
int harness_redis_restart(harness_redis *r);
/* Stops it if it runs and removes its temp dir. NULL is fine. */
void harness_redis_free(harness_redis *r);
/* 1 when PICKET_TEST_BACKEND=etcd; the etcd standing in for r, or NULL. */
int harness_backend_etcd(void);
harness_etcd *harness_redis_etcd(const harness_redis *r);
const char *harness_redis_socket(const harness_redis *r); /* unix socket path */
const char *harness_redis_url(const harness_redis *r);    /* unix:///... */
int harness_redis_port(const harness_redis *r);           /* TCP port, 0 if none */
const char *harness_redis_dir(const harness_redis *r);
pid_t harness_redis_pid(const harness_redis *r);
/* A new hiredis connection to it; the caller frees it with redisFree. */
redisContext *harness_redis_connect(const harness_redis *r);
/* Runs one command (printf-style, hiredis) and returns the reply; the
 * caller frees it with freeReplyObject. NULL if the connection failed. */
redisReply *harness_redis_cmd(const harness_redis *r, const char *fmt, ...);

/* Starts picketd on 127.0.0.1 port 0 with --port-file, against redis_url
 * (NULL: no --redis, for args that name the store another way), with more
 * flags from the NULL-terminated `args` (may be NULL), and waits
 * until it has written its port. Returns NULL on failure. */
harness_picketd *harness_picketd_start(const char *redis_url, const char *const *args);
/* Sends `sig` and waits for exit; returns the exit status as the shell
 * reports it (code, or 128+signal), or -1. */
int harness_picketd_stop(harness_picketd *p, int sig);
/* Stops it if running (SIGTERM, then SIGKILL after 20 s), removes its dir;
 * NULL ok. $PICKET_PICKETD_WRAPPER (e.g. "valgrind -q") prefixes the command. */
void harness_picketd_free(harness_picketd *p);
/* Both at once, as most suites want them: redis-server with `opts`, and
 * picketd on it with `args` (either may be NULL). 0 and *r, *p set, or -1
 * (after printing why) with nothing left running. _free stops both. */
int harness_servers_start(const harness_redis_opts *opts, const char *const *args,
                          harness_redis **r, harness_picketd **p);
void harness_servers_free(harness_redis *r, harness_picketd *p);
int harness_picketd_port(const harness_picketd *p);
pid_t harness_picketd_pid(const harness_picketd *p);
const char *harness_picketd_url(const harness_picketd *p); /* http://127.0.0.1:PORT */
const char *harness_picketd_log(const harness_picketd *p); /* path of its stderr */

/* One HTTP exchange. */
typedef struct {
  long status;         /* 0 on a transport error */
  char *body;          /* NUL-terminated, owned */
  size_t body_len;
  json_t *json;        /* parsed body or NULL; owned */
  char content_type[128];
  char retry_after[32];
  char allow[64];
  char www_authenticate[128];
  double seconds;      /* total time of the exchange */
} harness_resp;

/* Sends `method` to base+path with `body` (NULL: none) and fills *resp
 * (free it with harness_resp_free). Returns 0, or -1 on a transport error.
 * Each exchange is appended to $PICKET_CONTRACT_LOG (if set), so the
 * contract test can check every reply against proto/openapi.yaml. */
int harness_http(const char *base, const char *method, const char *path, const char *body,
                 harness_resp *resp);
/* The same with extra request headers ("Name: value", NULL-terminated). */
int harness_http_h(const char *base, const char *method, const char *path, const char *body,
                   const char *const *headers, harness_resp *resp);
void harness_resp_free(harness_resp *resp);

/* Helpers on a parsed reply: an integer member or -1, a string member or
 * NULL; the error object's code ("lock_held") or NULL. */
int64_t harness_json_int(const json_t *j, const char *key);
const char *harness_json_str(const json_t *j, const char *key);
const char *harness_error_code(const harness_resp *resp);

/* The value of one sample of picketd's /metrics at base: the first line
 * that starts with `sample` and a space (e.g. "picket_waiters" or
 * "picket_acquire_total{outcome=\"granted\"}"), or -1 when there is none. */
double harness_metric(const char *base, const char *sample);

/* Fences. picketd's --fence-floor comes from $PICKET_FENCE_FLOOR when the
 * test does not pass the flag (ctest runs the fence suites once with the
 * default, clock, and once with "none"). harness_fence_clock() says which:
 * 1 for clock, 0 for none (and on etcd, whose fences are revisions). */
int harness_fence_clock(void);
/* Redis TIME in microseconds (the clock floor's unit), or -1. */
int64_t harness_redis_time_us(const harness_redis *r);
/* 1 when `fence` may follow `prev` (the lock's last fence, 0 if none) under
 * the suite's floor: exactly prev + 1 with none; above prev and at least
 * `floor_us` (Redis TIME read before the grant; 0: unchecked) with clock;
 * on etcd above prev (revisions of the whole cluster: rising, with gaps). */
int harness_fence_follows(int64_t prev, int64_t fence, int64_t floor_us);

/* Runs a Check suite (CK_NORMAL output) and returns the process exit code:
 * 0 when every test passed. `suite` is a Suite *; it is freed. */
int harness_run_suite(void *suite);

/* How much slower than normal this run may be: $PICKET_TIME_SCALE (default
 * 1; the valgrind stage sets 10, ASan 3). Timing bounds in tests are
 * multiplied by it, so they stay meaningful without flaking. */
int64_t harness_time_scale(void);

/* For suites that run servers of their own (tests/fault/sentinel_group.c):
 * a new mkdtemp(3) dir named /tmp/picket-<what>-<random> (0, or -1 after
 * printing why); rm -r of a dir; a free loopback TCP port (-1 on error);
 * fork+exec of argv (found on PATH) with stdout and stderr appended to
 * `log` and PR_SET_PDEATHSIG, so the child dies with the test (its pid, or
 * -1). */
int harness_make_tmpdir(char *out, size_t cap, const char *what);
/* A new file /tmp/picket-<what>-<random> (mode 0600) holding `text`, for
 * password and key files: 0 with its path in out (the caller unlinks it),
 * or -1 after printing why. */
int harness_write_tmpfile(char *out, size_t cap, const char *what, const char *text);
void harness_rm_rf(const char *dir);
int harness_free_port(void);
pid_t harness_spawn(char *const argv[], const char *log);

/* Monotonic clock in milliseconds, and a sleep. */
int64_t harness_now_ms(void);
void harness_sleep_ms(int64_t ms);
/* Resident set size (kB) of a process, from /proc; -1 on error. */
long harness_proc_rss_kb(pid_t pid);
/* Threads of a process that still carry its own name (its comm): the
 * ones it made itself. Libraries that name their threads (gRPC core's
 * executor, timer and event-engine threads, which come and go with its
 * load) are not counted. -1 on error. */
long harness_proc_own_threads(pid_t pid);

#endif
