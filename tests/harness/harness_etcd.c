/* harness_etcd.c: starts, pauses, kills and restarts the members of a
 * throwaway etcd cluster for tests (see harness_etcd.h). It asks the
 * members about themselves over their own HTTP endpoints (/health and the
 * gateway's maintenance/status) with plain libcurl, so it depends on no
 * code under test. */
#include "harness_etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define MEMBERS_MAX 5
#define START_TRIES 3
#define HEALTH_WAIT_MS 30000

typedef struct {
  char name[16];
  char dir[256];
  char log[300];
  char url[64]; /* client URL */
  char peer_url[64];
  pid_t pid; /* 0: not running */
  int paused;
} member;

struct harness_etcd {
  int n;
  member m[MEMBERS_MAX];
  char cluster[MEMBERS_MAX * 96]; /* --initial-cluster */
  char token[48];                 /* --initial-cluster-token */
  char urls[MEMBERS_MAX * 64];
};

/* ---- asking a member ------------------------------------------------------ */

typedef struct {
  char buf[8192];
  size_t len;
} smallbuf;

static size_t on_body(char *data, size_t size, size_t n, void *ud) {
  smallbuf *b = ud;
  size_t add = size * n;
  size_t take = add < sizeof b->buf - 1 - b->len ? add : sizeof b->buf - 1 - b->len;
  memcpy(b->buf + b->len, data, take);
  b->len += take;
  b->buf[b->len] = '\0';
  return add;
}

/* GET (body NULL) or POST url+path within timeout_ms: the parsed JSON reply
 * of a 200 (the caller's), or NULL. */
static json_t *ask(const char *url, const char *path, const char *body, long timeout_ms) {
  CURL *c = curl_easy_init();
  if (c == NULL) return NULL;
  char full[128];
  snprintf(full, sizeof full, "%s%s", url, path);
  smallbuf b = {.len = 0};
  curl_easy_setopt(c, CURLOPT_URL, full);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  long status = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  return status == 200 ? json_loadb(b.buf, b.len, 0, NULL) : NULL;
}

/* 1 when the member says it is healthy (it has a leader and a quorum read
 * succeeds). */
static int healthy(const member *m) {
  json_t *j = ask(m->url, "/health", NULL, 1000);
  int ok = j && strcmp(json_string_value(json_object_get(j, "health")) ?: "", "true") == 0;
  json_decref(j);
  return ok;
}

/* A uint64 the gateway writes as a decimal string; 0 when absent. */
static unsigned long long id_of(const json_t *o, const char *name) {
  const char *s = json_string_value(json_object_get(o, name));
  return s ? strtoull(s, NULL, 10) : 0;
}

int harness_etcd_leader(harness_etcd *e) {
  unsigned long long self[MEMBERS_MAX] = {0}, leader[MEMBERS_MAX] = {0};
  for (int i = 0; i < e->n; i++) {
    if (e->m[i].pid <= 0 || e->m[i].paused) continue;
    json_t *j = ask(e->m[i].url, "/v3/maintenance/status", "{}", 1000);
    self[i] = id_of(json_object_get(j, "header"), "member_id");
    leader[i] = id_of(j, "leader");
    json_decref(j);
  }
  /* The leader is the running member that names itself, and that every
   * other running member that knows a leader names too. */
  for (int i = 0; i < e->n; i++) {
    if (self[i] == 0 || leader[i] != self[i]) continue;
    int agreed = 1;
    for (int k = 0; k < e->n; k++)
      if (leader[k] != 0 && leader[k] != self[i]) agreed = 0;
    if (agreed) return i;
  }
  return -1;
}

int harness_etcd_wait_leader(harness_etcd *e, int64_t timeout_ms) {
  int64_t until = harness_now_ms() + timeout_ms;
  for (;;) {
    int l = harness_etcd_leader(e);
    if (l >= 0 || harness_now_ms() >= until) return l;
    harness_sleep_ms(50);
  }
}

/* ---- processes --------------------------------------------------------- */

static int reap(pid_t pid, int hang) {
  int st;
  pid_t got;
  while ((got = waitpid(pid, &st, hang ? 0 : WNOHANG)) < 0 && errno == EINTR) {
  }
  return got == pid;
}

static int spawn(harness_etcd *e, int i) {
  member *m = &e->m[i];
  char data[300];
  snprintf(data, sizeof data, "%s/data", m->dir);
  char *argv[] = {"etcd", "--name", m->name, "--data-dir", data, "--listen-client-urls", m->url,
                  "--advertise-client-urls", m->url, "--listen-peer-urls", m->peer_url,
                  "--initial-advertise-peer-urls", m->peer_url, "--initial-cluster", e->cluster,
                  "--initial-cluster-state", "new", "--initial-cluster-token", e->token,
                  /* Fast elections: a lost leader is replaced within about a
                   * second, so fault tests stay short. */
                  "--heartbeat-interval", "50", "--election-timeout", "500", "--snapshot-count",
                  "5000", "--quota-backend-bytes", "134217728", "--logger", "zap", "--log-outputs",
                  "stderr", "--log-level", "error", NULL};
  m->paused = 0;
  m->pid = harness_spawn(argv, m->log);
  return m->pid > 0 ? 0 : -1;
}

/* Waits until member i is healthy; -1 (pid set to 0) if it exits first,
 * or on timeout. */
static int wait_healthy(harness_etcd *e, int i, int64_t until) {
  member *m = &e->m[i];
  while (harness_now_ms() < until) {
    if (reap(m->pid, 0)) {
      m->pid = 0;
      return -1;
    }
    if (healthy(m)) return 0;
    harness_sleep_ms(50);
  }
  return -1;
}

void harness_etcd_signal(harness_etcd *e, int i, int sig) {
  member *m = &e->m[i];
  if (m->pid <= 0) return;
  if (sig == SIGSTOP || sig == SIGCONT) {
    /* kill() only queues the signal, and a running thread of etcd could
     * still answer one more request. The member is our child: waitpid
     * reports it stopped once every thread is (the group stop is
     * complete), and continued once it runs again. */
    if (m->paused == (sig == SIGSTOP)) return;
    kill(m->pid, sig);
    m->paused = sig == SIGSTOP;
    int st;
    while (waitpid(m->pid, &st, sig == SIGSTOP ? WUNTRACED : WCONTINUED) < 0 && errno == EINTR) {
    }
    return;
  }
  kill(m->pid, SIGCONT);
  kill(m->pid, sig);
  reap(m->pid, 1);
  m->pid = 0;
  m->paused = 0;
}

int harness_etcd_restart(harness_etcd *e, int i) {
  harness_etcd_signal(e, i, SIGTERM);
  if (spawn(e, i) < 0 || wait_healthy(e, i, harness_now_ms() + HEALTH_WAIT_MS) < 0) {
    fprintf(stderr, "harness: etcd member %d did not come back; see %s\n", i, e->m[i].log);
    return -1;
  }
  return 0;
}

static void stop_all(harness_etcd *e) {
  for (int i = 0; i < e->n; i++) harness_etcd_signal(e, i, SIGKILL);
}

/* Picks ports, writes the flags every member shares and starts them all;
 * 0 once each is healthy, else -1 with everything stopped. */
static int start_once(harness_etcd *e) {
  size_t off = 0;
  e->urls[0] = e->cluster[0] = '\0';
  snprintf(e->token, sizeof e->token, "picket-test-%d-%lld", (int)getpid(),
           (long long)harness_now_ms());
  for (int i = 0; i < e->n; i++) {
    member *m = &e->m[i];
    int cport = harness_free_port(), pport = harness_free_port();
    if (cport < 0 || pport < 0 || cport == pport) return -1;
    snprintf(m->url, sizeof m->url, "http://127.0.0.1:%d", cport);
    snprintf(m->peer_url, sizeof m->peer_url, "http://127.0.0.1:%d", pport);
    off += (size_t)snprintf(e->cluster + off, sizeof e->cluster - off, "%s%s=%s", i ? "," : "",
                            m->name, m->peer_url);
    size_t ul = strlen(e->urls);
    snprintf(e->urls + ul, sizeof e->urls - ul, "%s%s", i ? "," : "", m->url);
  }
  for (int i = 0; i < e->n; i++)
    if (spawn(e, i) < 0) {
      stop_all(e);
      return -1;
    }
  int64_t until = harness_now_ms() + HEALTH_WAIT_MS;
  for (int i = 0; i < e->n; i++)
    if (wait_healthy(e, i, until) < 0) {
      fprintf(stderr, "harness: etcd member %d did not become healthy; its log %s:\n", i,
              e->m[i].log);
      char cmd[400];
      snprintf(cmd, sizeof cmd, "tail -n 5 %s >&2", e->m[i].log);
      if (system(cmd) != 0) { /* the message above says enough */
      }
      stop_all(e);
      return -1;
    }
  return 0;
}

harness_etcd *harness_etcd_start(int n) {
  if (n < 1 || n > MEMBERS_MAX) return NULL;
  harness_etcd *e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  e->n = n;
  for (int i = 0; i < n; i++) {
    member *m = &e->m[i];
    snprintf(m->name, sizeof m->name, "m%d", i);
    if (harness_make_tmpdir(m->dir, sizeof m->dir, "etcd") < 0) {
      harness_etcd_free(e);
      return NULL;
    }
    char log[sizeof m->log]; /* (gcc takes m->dir and m->log for one object) */
    snprintf(log, sizeof log, "%s/etcd.log", m->dir);
    memcpy(m->log, log, sizeof log);
  }
  /* A port picked free can be taken before etcd binds it (another test
   * picks ports too): etcd then exits, and the whole cluster starts again
   * with new ports and empty data dirs. */
  for (int t = 0; t < START_TRIES; t++) {
    if (start_once(e) == 0 && harness_etcd_wait_leader(e, HEALTH_WAIT_MS) >= 0) return e;
    stop_all(e);
    for (int i = 0; i < n; i++) {
      char data[300];
      snprintf(data, sizeof data, "%s/data", e->m[i].dir);
      harness_rm_rf(data);
    }
  }
  fprintf(stderr, "harness: could not start a %d-member etcd cluster\n", n);
  harness_etcd_free(e);
  return NULL;
}

const char *harness_etcd_urls(const harness_etcd *e) { return e->urls; }
const char *harness_etcd_url(const harness_etcd *e, int i) { return e->m[i].url; }
pid_t harness_etcd_pid(const harness_etcd *e, int i) { return e->m[i].pid; }
int harness_etcd_size(const harness_etcd *e) { return e->n; }

void harness_etcd_free(harness_etcd *e) {
  if (e == NULL) return;
  stop_all(e);
  for (int i = 0; i < e->n; i++)
    if (e->m[i].dir[0] && getenv("HARNESS_KEEP") == NULL) harness_rm_rf(e->m[i].dir);
  free(e);
}
