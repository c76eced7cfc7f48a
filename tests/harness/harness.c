/* harness.c: starts and stops real redis-server and picketd processes for
 * tests, and speaks HTTP to them (see harness.h). Deliberately plain: fork,
 * exec, files in a temp dir, libcurl easy handles. */
#include "harness.h"
#include "harness_etcd.h"

#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HARNESS_BIN_DIR
#define HARNESS_BIN_DIR "build/bin"
#endif

struct harness_redis {
  harness_etcd *etcd; /* PICKET_TEST_BACKEND=etcd: the store picketd is given instead */
  char dir[256];
  char sock[300];
  char url[320];
  char conf[300];
  int port;
  pid_t pid;
};

struct harness_picketd {
  char dir[256];
  char url[64];
  char log[300];
  int port;
  pid_t pid;
};

int64_t harness_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int harness_run_suite(void *suite) {
  SRunner *sr = srunner_create(suite);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

int64_t harness_time_scale(void) {
  const char *s = getenv("PICKET_TIME_SCALE");
  long v = s ? strtol(s, NULL, 10) : 1;
  return v >= 1 ? v : 1;
}

void harness_sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Both take a mkdtemp(3)/mkstemp(3) template: the six X are theirs to fill. */
int harness_make_tmpdir(char *out, size_t cap, const char *what) {
  snprintf(out, cap, "/tmp/picket-%s-XXXXXX", what);
  if (mkdtemp(out) == NULL) {
    perror("harness: mkdtemp");
    return -1;
  }
  return 0;
}

int harness_write_tmpfile(char *out, size_t cap, const char *what, const char *text) {
  snprintf(out, cap, "/tmp/picket-%s-XXXXXX", what);
  int fd = mkstemp(out);
  if (fd < 0) {
    perror("harness: mkstemp");
    return -1;
  }
  size_t n = strlen(text);
  int ok = write(fd, text, n) == (ssize_t)n;
  close(fd);
  if (!ok) perror("harness: write");
  return ok ? 0 : -1;
}

void harness_rm_rf(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
      harness_rm_rf(path);
    else
      unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* A free loopback TCP port, found by binding port 0. */
int harness_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* fork+exec argv with stdout and stderr appended to `log`; the child dies
 * with this process (PR_SET_PDEATHSIG), so no test leaks a server. */
pid_t harness_spawn(char *const argv[], const char *log) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    execvp(argv[0], argv);
    fprintf(stderr, "harness: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

/* 1 once `pid` has exited (gone, or a zombie nobody has reaped yet). */
static int exited(pid_t pid) {
  if (kill(pid, 0) < 0 && errno == ESRCH) return 1;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *close = strrchr(buf, ')'); /* "pid (comm) S ..." */
  return close && close[1] == ' ' && close[2] == 'Z';
}

static int wait_exit(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno == EINTR) continue;
    if (errno == ECHILD) {
      /* Not our child: a server started by a Check fixture in the parent,
       * stopped from a test in a forked child. It must still be gone
       * before we go on (a restart would otherwise race the old server's
       * exit, which unlinks the socket the new one just made). */
      for (int i = 0; i < 3000 && !exited(pid); i++) harness_sleep_ms(10);
    }
    return -1;
  }
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

static int alive(pid_t pid) {
  int st;
  return waitpid(pid, &st, WNOHANG) == 0;
}

/* ---- Redis ---------------------------------------------------------- */

static int redis_spawn(harness_redis *r) {
  char log[300];
  snprintf(log, sizeof log, "%s/redis.log", r->dir);
  char *argv[] = {"redis-server", r->conf, NULL};
  r->pid = harness_spawn(argv, log);
  if (r->pid < 0) return -1;
  int64_t until = harness_now_ms() + 15000;
  while (harness_now_ms() < until) {
    if (!alive(r->pid)) {
      fprintf(stderr, "harness: redis-server exited; see %s\n", log);
      r->pid = 0;
      return -1;
    }
    redisReply *rep = harness_redis_cmd(r, "PING");
    int ok = rep && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0;
    if (rep) freeReplyObject(rep);
    if (ok) return 0;
    harness_sleep_ms(10);
  }
  fprintf(stderr, "harness: redis-server did not answer PING\n");
  return -1;
}

/* PICKET_TEST_BACKEND=etcd: every harness_redis also starts a one-member
 * etcd, and a picketd given that Redis's URL is given --etcd with that
 * etcd instead, so one suite runs against either backend. The Redis still
 * runs (a case that reads it directly is a Redis case: the suites leave it
 * out on etcd). */
#define ETCD_LIVE_MAX 16
static harness_redis *etcd_live[ETCD_LIVE_MAX];

int harness_backend_etcd(void) {
  const char *b = getenv("PICKET_TEST_BACKEND");
  return b && strcmp(b, "etcd") == 0;
}

static void etcd_track(harness_redis *r, int on) {
  for (int i = 0; i < ETCD_LIVE_MAX; i++) {
    if (on && etcd_live[i] == NULL) {
      etcd_live[i] = r;
      return;
    }
    if (!on && etcd_live[i] == r) etcd_live[i] = NULL;
  }
}

/* The etcd that stands in for the Redis at url, or NULL. */
static harness_etcd *etcd_for(const char *url) {
  for (int i = 0; i < ETCD_LIVE_MAX; i++)
    if (etcd_live[i] && strcmp(etcd_live[i]->url, url) == 0) return etcd_live[i]->etcd;
  return NULL;
}

harness_etcd *harness_redis_etcd(const harness_redis *r) { return r ? r->etcd : NULL; }

harness_redis *harness_redis_start(const harness_redis_opts *opts) {
  harness_redis_opts none = {0};
  if (opts == NULL) opts = &none;
  harness_redis *r = calloc(1, sizeof *r);
  if (r == NULL || harness_make_tmpdir(r->dir, sizeof r->dir, "redis") < 0) {
    free(r);
    return NULL;
  }
  snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
  snprintf(r->url, sizeof r->url, "unix://%s", r->sock);
  snprintf(r->conf, sizeof r->conf, "%s/redis.conf", r->dir);
  r->port = opts->tcp ? harness_free_port() : 0;
  FILE *f = fopen(r->conf, "w");
  if (f == NULL) {
    harness_redis_free(r);
    return NULL;
  }
  fprintf(f,
          "port %d\nbind 127.0.0.1\nunixsocket %s\nunixsocketperm 700\ndir %s\n"
          "daemonize no\nsave \"\"\nappendonly %s\nappendfsync always\n"
          "maxmemory-policy noeviction\nenable-debug-command yes\nlogfile \"\"\n%s\n",
          r->port, r->sock, r->dir, opts->appendonly ? "yes" : "no",
          opts->extra_conf ? opts->extra_conf : "");
  fclose(f);
  if (redis_spawn(r) < 0) {
    harness_redis_free(r);
    return NULL;
  }
  if (harness_backend_etcd()) {
    if ((r->etcd = harness_etcd_start(1)) == NULL) {
      harness_redis_free(r);
      return NULL;
    }
    etcd_track(r, 1);
  }
  return r;
}

void harness_redis_stop(harness_redis *r, int sig) {
  if (r == NULL) return;
  if (r->etcd && harness_etcd_pid(r->etcd, 0) > 0) harness_etcd_signal(r->etcd, 0, sig);
  if (r->pid <= 0) return;
  kill(r->pid, SIGCONT); /* a paused server cannot handle SIGTERM */
  kill(r->pid, sig);
  wait_exit(r->pid);
  r->pid = 0;
}

int harness_redis_restart(harness_redis *r) {
  harness_redis_stop(r, SIGTERM);
  if (r->etcd && harness_etcd_restart(r->etcd, 0) < 0) return -1;
  return redis_spawn(r);
}

void harness_redis_free(harness_redis *r) {
  if (r == NULL) return;
  harness_redis_stop(r, SIGKILL);
  if (r->etcd) {
    etcd_track(r, 0);
    harness_etcd_free(r->etcd);
  }
  if (getenv("HARNESS_KEEP") == NULL) harness_rm_rf(r->dir);
  free(r);
}

const char *harness_redis_socket(const harness_redis *r) { return r->sock; }
const char *harness_redis_url(const harness_redis *r) { return r->url; }
int harness_redis_port(const harness_redis *r) { return r->port; }
const char *harness_redis_dir(const harness_redis *r) { return r->dir; }
pid_t harness_redis_pid(const harness_redis *r) { return r->pid; }

redisContext *harness_redis_connect(const harness_redis *r) {
  struct timeval tv = {2, 0};
  redisContext *c = redisConnectUnixWithTimeout(r->sock, tv);
  if (c == NULL) return NULL;
  if (c->err) {
    redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  return c;
}

redisReply *harness_redis_cmd(const harness_redis *r, const char *fmt, ...) {
  redisContext *c = harness_redis_connect(r);
  if (c == NULL) return NULL;
  va_list ap;
  va_start(ap, fmt);
  redisReply *rep = redisvCommand(c, fmt, ap);
  va_end(ap);
  redisFree(c);
  return rep;
}

/* ---- picketd -------------------------------------------------------- */

harness_picketd *harness_picketd_start(const char *redis_url, const char *const *args) {
  harness_picketd *p = calloc(1, sizeof *p);
  if (p == NULL || harness_make_tmpdir(p->dir, sizeof p->dir, "picketd") < 0) {
    free(p);
    return NULL;
  }
  char portfile[300], bin[512];
  snprintf(portfile, sizeof portfile, "%s/port", p->dir);
  snprintf(p->log, sizeof p->log, "%s/picketd.log", p->dir);
  snprintf(bin, sizeof bin, "%s/picketd", HARNESS_BIN_DIR);
  char *argv[80];
  int n = 0;
  /* PICKET_PICKETD_WRAPPER runs picketd under a tool, e.g. valgrind
   * (space-separated words; the valgrind stage of scripts/test sets it). */
  static char wrapper[512];
  const char *w = getenv("PICKET_PICKETD_WRAPPER");
  if (w && *w) {
    snprintf(wrapper, sizeof wrapper, "%s", w);
    for (char *tok = strtok(wrapper, " "); tok && n < 16; tok = strtok(NULL, " ")) argv[n++] = tok;
  }
  argv[n++] = bin;
  argv[n++] = "--listen";
  argv[n++] = "127.0.0.1:0";
  argv[n++] = "--port-file";
  argv[n++] = portfile;
  if (redis_url && harness_backend_etcd()) {
    /* the etcd standing in for that Redis; a URL the harness did not start
     * (a store that is down) becomes a member nobody listens on */
    static char dead[64];
    harness_etcd *e = etcd_for(redis_url);
    snprintf(dead, sizeof dead, "http://127.0.0.1:%d", harness_free_port());
    argv[n++] = "--etcd";
    argv[n++] = e ? (char *)harness_etcd_urls(e) : dead;
  } else if (redis_url) { /* NULL: the args name the store (--sentinel ...) */
    argv[n++] = "--redis";
    argv[n++] = (char *)redis_url;
  }
  for (int i = 0; args && args[i] && n < 79; i++) argv[n++] = (char *)args[i];
  argv[n] = NULL;
  p->pid = harness_spawn(argv, p->log);
  int64_t until = harness_now_ms() + (w && *w ? 60000 : 15000);
  while (p->pid > 0 && harness_now_ms() < until) {
    FILE *f = fopen(portfile, "r");
    if (f) {
      int port = 0;
      int ok = fscanf(f, "%d", &port) == 1 && port > 0;
      fclose(f);
      if (ok) {
        p->port = port;
        snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", port);
        return p;
      }
    }
    if (!alive(p->pid)) {
      fprintf(stderr, "harness: picketd exited at start; its log:\n");
      char cmd[400];
      snprintf(cmd, sizeof cmd, "cat %s >&2", p->log);
      if (system(cmd) != 0) { /* nothing more to say */ }
      p->pid = 0;
      break;
    }
    harness_sleep_ms(5);
  }
  fprintf(stderr, "harness: picketd did not start\n");
  harness_picketd_free(p);
  return NULL;
}

int harness_picketd_stop(harness_picketd *p, int sig) {
  if (p == NULL || p->pid <= 0) return -1;
  kill(p->pid, SIGCONT);
  kill(p->pid, sig);
  int st = wait_exit(p->pid);
  p->pid = 0;
  return st;
}

/* Stops with SIGTERM, so picketd shuts down as in production (and a
 * leak checker sees a clean exit); SIGKILL after 20 s. */
static void stop_gently(harness_picketd *p) {
  kill(p->pid, SIGCONT);
  kill(p->pid, SIGTERM);
  for (int i = 0; i < 2000; i++) {
    int st;
    pid_t got = waitpid(p->pid, &st, WNOHANG);
    if (got == p->pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      /* picketd must exit 0 on SIGTERM; anything else (a crash, or a
       * sanitizer's leak report, exit 23) fails the whole test run. */
      fprintf(stderr, "harness: picketd exited with status %d on SIGTERM; its log:\n", st);
      char cmd[400];
      snprintf(cmd, sizeof cmd, "tail -n 60 %s >&2", p->log);
      if (system(cmd) != 0) { /* the abort below says enough */ }
      abort();
    }
    if (got != 0) {
      p->pid = 0;
      return;
    }
    harness_sleep_ms(10);
  }
  harness_picketd_stop(p, SIGKILL);
}

int harness_servers_start(const harness_redis_opts *opts, const char *const *args,
                          harness_redis **r, harness_picketd **p) {
  *p = NULL;
  if ((*r = harness_redis_start(opts)) == NULL) return -1;
  if ((*p = harness_picketd_start(harness_redis_url(*r), args)) == NULL) {
    harness_redis_free(*r);
    *r = NULL;
    return -1;
  }
  return 0;
}

void harness_servers_free(harness_redis *r, harness_picketd *p) {
  harness_picketd_free(p);
  harness_redis_free(r);
}

void harness_picketd_free(harness_picketd *p) {
  if (p == NULL) return;
  if (p->pid > 0) stop_gently(p);
  if (getenv("HARNESS_KEEP") == NULL) harness_rm_rf(p->dir);
  free(p);
}

int harness_picketd_port(const harness_picketd *p) { return p->port; }
pid_t harness_picketd_pid(const harness_picketd *p) { return p->pid; }
const char *harness_picketd_url(const harness_picketd *p) { return p->url; }
const char *harness_picketd_log(const harness_picketd *p) { return p->log; }

/* ---- HTTP ----------------------------------------------------------- */

typedef struct {
  char *buf;
  size_t len;
} membuf;

static size_t on_body(char *data, size_t size, size_t n, void *ud) {
  membuf *m = ud;
  size_t add = size * n;
  char *nb = realloc(m->buf, m->len + add + 1);
  if (nb == NULL) return 0;
  memcpy(nb + m->len, data, add);
  m->buf = nb;
  m->len += add;
  m->buf[m->len] = '\0';
  return add;
}

static void header_value(const char *line, size_t len, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  if (len <= nl + 1 || strncasecmp(line, name, nl) != 0 || line[nl] != ':') return;
  const char *v = line + nl + 1;
  const char *end = line + len;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
  size_t vl = (size_t)(end - v) < cap - 1 ? (size_t)(end - v) : cap - 1;
  memcpy(out, v, vl);
  out[vl] = '\0';
}

static size_t on_header(char *data, size_t size, size_t n, void *ud) {
  harness_resp *r = ud;
  size_t len = size * n;
  header_value(data, len, "Content-Type", r->content_type, sizeof r->content_type);
  header_value(data, len, "Retry-After", r->retry_after, sizeof r->retry_after);
  header_value(data, len, "Allow", r->allow, sizeof r->allow);
  header_value(data, len, "WWW-Authenticate", r->www_authenticate, sizeof r->www_authenticate);
  return len;
}

/* The caller's own Content-Type header among headers (the first, as
 * libcurl uses it; "Content-Type:" or "Content-Type;" sends none or an
 * empty one), or NULL. */
static const char *given_content_type(const char *const *headers) {
  static const char name[] = "Content-Type";
  size_t nl = sizeof name - 1;
  for (int i = 0; headers && headers[i]; i++)
    if (strncasecmp(headers[i], name, nl) == 0 && (headers[i][nl] == ':' || headers[i][nl] == ';'))
      return headers[i];
  return NULL;
}

/* The header a body goes with when the caller names no Content-Type:
 * JSON, as every client of picketd sends it (picketd refuses a body of
 * another type, origin.c), rather than libcurl's form type. */
static const char json_type_header[] = "Content-Type: application/json";

/* The Content-Type the request really carried, for the contract log: the
 * caller's own header if it passed one (an empty value sends none or an
 * empty one), else application/json when a body is sent (harness_http_h
 * adds it), else none. A validator that assumed application/json would
 * judge requests picketd never saw. */
static void request_content_type(const char *method, const char *body,
                                 const char *const *headers, char *out, size_t cap) {
  const char *h = given_content_type(headers);
  out[0] = '\0';
  if (h) {
    if (h[12] == ':') header_value(h, strlen(h), "Content-Type", out, cap);
    return;
  }
  /* HEAD uses CURLOPT_NOBODY: libcurl then sends no body and no type. */
  if (body != NULL && strcmp(method, "HEAD") != 0)
    header_value(json_type_header, sizeof json_type_header - 1, "Content-Type", out, cap);
}

/* One JSON line per exchange: the request (method, path as sent, body as
 * sent, its Content-Type) and the reply (status, Content-Type, body and the
 * headers the spec documents). The request half lets a validator ask
 * whether the spec allows the request, and so whether a 400 was due. */
static void contract_log(const char *method, const char *path, const char *body,
                         const char *const *headers, const harness_resp *r) {
  const char *file = getenv("PICKET_CONTRACT_LOG");
  if (file == NULL || *file == '\0' || r->status == 0) return;
  char req_type[128];
  request_content_type(method, body, headers, req_type, sizeof req_type);
  /* HEAD sends no body (CURLOPT_NOBODY), so none is logged. */
  if (body == NULL || strcmp(method, "HEAD") == 0) body = "";
  /* A body that is not UTF-8 cannot be a JSON string: it is logged as hex
   * under request_body_hex (request_body null) rather than losing the
   * whole line, so the reply is still checked. */
  size_t body_len = strlen(body);
  json_t *req_body = json_stringn(body, body_len);
  char *hex = NULL;
  if (req_body == NULL) {
    req_body = json_null();
    hex = malloc(2 * body_len + 1);
    for (size_t i = 0; hex != NULL && i < body_len; i++)
      snprintf(hex + 2 * i, 3, "%02x", (unsigned char)body[i]);
  }
  json_t *j = json_pack("{s:s, s:s, s:i, s:s, s:s%, s:s, s:s, s:s, s:o, s:s}", "method", method,
                        "path", path, "status", (json_int_t)r->status, "content_type",
                        r->content_type, "body", r->body ? r->body : "",
                        r->body ? r->body_len : (size_t)0, "retry_after", r->retry_after, "allow",
                        r->allow, "www_authenticate", r->www_authenticate, "request_body",
                        req_body, "request_content_type", req_type);
  if (j != NULL && hex != NULL) json_object_set_new(j, "request_body_hex", json_string(hex));
  free(hex);
  if (j == NULL) return;
  char *line = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  if (line == NULL) return;
  int fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    size_t len = strlen(line);
    line[len] = '\n'; /* replaces the NUL; written as one append */
    if (write(fd, line, len + 1) < 0) { /* best effort */ }
    close(fd);
  }
  free(line);
}

int harness_http_h(const char *base, const char *method, const char *path, const char *body,
                   const char *const *headers, harness_resp *resp) {
  memset(resp, 0, sizeof *resp);
  CURL *c = curl_easy_init();
  if (c == NULL) return -1;
  char url[2048];
  snprintf(url, sizeof url, "%s%s", base, path);
  membuf m = {0};
  struct curl_slist *hl = NULL;
  hl = curl_slist_append(hl, "Expect:");
  for (int i = 0; headers && headers[i]; i++) hl = curl_slist_append(hl, headers[i]);
  if (body && given_content_type(headers) == NULL) hl = curl_slist_append(hl, json_type_header);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (strcmp(method, "HEAD") == 0) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 120000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &resp->seconds);
  }
  curl_slist_free_all(hl);
  curl_easy_cleanup(c);
  resp->body = m.buf ? m.buf : strdup("");
  resp->body_len = m.len;
  if (rc != CURLE_OK) return -1;
  resp->json = json_loadb(resp->body, resp->body_len, 0, NULL);
  contract_log(method, path, body, headers, resp);
  return 0;
}

int harness_http(const char *base, const char *method, const char *path, const char *body,
                 harness_resp *resp) {
  return harness_http_h(base, method, path, body, NULL, resp);
}

void harness_resp_free(harness_resp *resp) {
  free(resp->body);
  json_decref(resp->json);
  memset(resp, 0, sizeof *resp);
}

int harness_fence_clock(void) {
  if (harness_backend_etcd()) return 0;
  const char *f = getenv("PICKET_FENCE_FLOOR");
  return f == NULL || strcmp(f, "none") != 0;
}

int64_t harness_redis_time_us(const harness_redis *r) {
  redisReply *rep = harness_redis_cmd(r, "TIME");
  int64_t us = -1;
  if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
    us = strtoll(rep->element[0]->str, NULL, 10) * 1000000 + strtoll(rep->element[1]->str, NULL, 10);
  if (rep) freeReplyObject(rep);
  return us;
}

int harness_fence_follows(int64_t prev, int64_t fence, int64_t floor_us) {
  if (harness_backend_etcd()) return fence > prev; /* revisions: rising, with gaps */
  if (!harness_fence_clock()) return fence == prev + 1;
  return fence > prev && fence >= floor_us;
}

int64_t harness_json_int(const json_t *j, const char *key) {
  json_t *v = json_object_get(j, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

const char *harness_json_str(const json_t *j, const char *key) {
  return json_string_value(json_object_get(j, key));
}

const char *harness_error_code(const harness_resp *resp) {
  return json_string_value(json_object_get(json_object_get(resp->json, "error"), "code"));
}

double harness_metric(const char *base, const char *sample) {
  harness_resp r;
  double v = -1;
  size_t n = strlen(sample);
  if (harness_http(base, "GET", "/metrics", NULL, &r) == 0)
    for (const char *line = r.body; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
      if (strncmp(line, sample, n) == 0 && line[n] == ' ') {
        v = atof(line + n + 1);
        break;
      }
  harness_resp_free(&r);
  return v;
}

/* ---- /proc ---------------------------------------------------------- */

static long proc_status_field(pid_t pid, const char *field) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  long v = -1;
  size_t fl = strlen(field);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
      v = strtol(line + fl + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

long harness_proc_rss_kb(pid_t pid) { return proc_status_field(pid, "VmRSS"); }

/* One line of /proc/PID[/task/TID]/comm into out (newline cut); 0 or -1. */
static int read_comm(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  int ok = fgets(out, (int)cap, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  out[strcspn(out, "\n")] = '\0';
  return 0;
}

long harness_proc_own_threads(pid_t pid) {
  char path[64], name[32], tname[32];
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  if (read_comm(path, name, sizeof name) < 0) return -1;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (d == NULL) return -1;
  long n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char tpath[300];
    snprintf(tpath, sizeof tpath, "/proc/%d/task/%s/comm", (int)pid, e->d_name);
    if (read_comm(tpath, tname, sizeof tname) == 0 && strcmp(tname, name) == 0) n++;
  }
  closedir(d);
  return n;
}
