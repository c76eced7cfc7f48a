/* main.c: picketd's process: configuration, signals, start and stop.
 *
 * Start: read the config (bad flags exit 2), start the store (store_init
 * logs what it keeps the locks in; a store set up to lose fences exits 1;
 * an unreachable one is fine, requests get 503 until it answers), start
 * the waiter threads and the HTTP daemon, write the port.
 * Stop (SIGTERM/SIGINT): answer every waiter 503 shutting_down, stop
 * accepting, let in-flight requests finish (bounded by
 * --shutdown-timeout-ms), then close everything and exit 0. SIGHUP
 * rereads the TLS files (tls.c) and serves on. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "auth.h"
#include "call.h"
#include "routes.h"
#include "config.h"
#include "conns_token.h"
#include "events.h"
#include "holds.h"
#include "http.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "origin.h"
#include "quota.h"
#include "signer.h"
#include "store.h"
#include "sweep.h"
#include "tls.h"
#include "wait.h"

#ifndef PICKET_VERSION
#define PICKET_VERSION "0.0.0"
#endif

static int write_port_file(const char *path, int port) {
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (f == NULL) return -1;
  fprintf(f, "%d\n", port);
  if (fclose(f) != 0) return -1;
  return rename(tmp, path); /* readers never see a half-written file */
}

/* Each connection and each waiter holds a socket: make sure the process
 * may open as many as --max-connections allows (Redis does the same in
 * adjustOpenFilesLimit), and say so when the hard limit is lower. */
static void raise_fd_limit(const config *cfg) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  /* per event loop: its epoll set, eventfd, libmicrohttpd's epoll fd and
   * eventfd, a copy of the listen socket, two store connections */
  rlim_t want = (rlim_t)cfg->max_connections + 64 + (rlim_t)cfg->threads * 8;
  if (rl.rlim_cur >= want) return;
  rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < want)
    LOG(LOG_WARN, "open-file limit is %llu, below the %llu that --max-connections %d needs",
        (unsigned long long)rl.rlim_cur, (unsigned long long)want, cfg->max_connections);
}

/* After the pipeline is drained, how long its last replies may take to go
 * out before the daemon stops (which would cut them off). */
#define SHUTDOWN_GRACE_MS 1000

/* Waits until count() is 0 (requests in flight, piped calls), or for
 * limit_ms; returns the time waited. */
static int64_t drain(long (*count)(void), int64_t limit_ms) {
  struct timespec tick = {0, 5 * 1000000L};
  int64_t waited = 0;
  for (; count() > 0 && waited < limit_ms; waited += 5) nanosleep(&tick, NULL);
  return waited;
}

int main(int argc, char **argv) {
  static config cfg;
  char err[600];
  int rc = config_load(&cfg, argc, argv, NULL, err, sizeof err);
  if (rc < 0) {
    fprintf(stderr, "picketd: %s\n", err);
    return 2;
  }
  if (rc == CONFIG_HELP) {
    config_usage(stdout);
    return 0;
  }
  if (rc == CONFIG_VERSION) {
    printf("picketd %s\n", PICKET_VERSION);
    return 0;
  }
  log_setup(cfg.log_level, cfg.log_format);
  if (origin_init(&cfg, err, sizeof err) < 0 ||
      tls_init(&cfg, err, sizeof err) < 0) { /* a TLS file is config: exit 2 like a flag */
    fprintf(stderr, "picketd: %s\n", err);
    return 2;
  }
  raise_fd_limit(&cfg);

  /* Every thread inherits this mask; only main receives the signals, in
   * sigwait below, so no handler ever runs inside a worker. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  if (store_init(&cfg, err, sizeof err) < 0) {
    LOG(LOG_ERROR, "%s", err);
    fprintf(stderr, "picketd: %s\n", err);
    return 1;
  }
  metrics_add_families(quota_render_metrics);
  holds_init();
  /* before auth_init: each token's quota entry starts with a full
   * listing bucket of this rate */
  quota_set_list_rate(cfg.list_rate);
  if (signer_init(&cfg, err, sizeof err) < 0 || auth_init(&cfg, err, sizeof err) < 0) {
    LOG(LOG_ERROR, "%s", err);
    fprintf(stderr, "picketd: %s\n", err);
    return 2;
  }
  api_init(&cfg);
  routes_init();
  if (call_start(&cfg) < 0) {
    LOG(LOG_ERROR, "cannot start the store workers: %s", strerror(errno));
    return 1;
  }
  if (wait_start(&cfg, http_resume) < 0) {
    LOG(LOG_ERROR, "cannot start the waiter threads: %s", strerror(errno));
    return 1;
  }
  if (events_start(&cfg, http_resume) < 0) {
    LOG(LOG_ERROR, "cannot start the events thread: %s", strerror(errno));
    return 1;
  }
  if (sweep_start(&cfg) < 0) {
    LOG(LOG_ERROR, "cannot start the index sweeper: %s", strerror(errno));
    return 1;
  }
  int port = 0;
  if (http_start(&cfg, &port) < 0) return 1;
  if (cfg.port_file[0] && write_port_file(cfg.port_file, port) < 0) {
    LOG(LOG_ERROR, "cannot write --port-file %s: %s", cfg.port_file, strerror(errno));
    http_stop();
    return 1;
  }
  /* What the locks are kept in, store_init has logged. */
  LOG(LOG_INFO, "picketd %s listening on %s port %d (%d threads)", PICKET_VERSION, cfg.listen_host,
      port, cfg.threads);

  int sig = 0;
  for (;;) { /* SIGHUP reloads and serves on; SIGTERM and SIGINT stop */
    if (sigwait(&sigs, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    auth_reload();
    int revoked = conns_token_revoke(); /* after the swap: what the new file lacks is gone */
    wait_revoke(http_revoked);          /* after the marks: its waiters answer 401 */
    if (revoked > 0)
      LOG(LOG_INFO, "SIGHUP: closing %d connection%s of tokens no longer in --auth-file", revoked,
          revoked == 1 ? "" : "s");
    signer_reload();
    tls_reload();
  }
  LOG(LOG_INFO, "got %s: stopping (waiters get 503, in-flight requests finish)",
      sig == SIGTERM ? "SIGTERM" : "SIGINT");
  wait_shutdown();
  events_shutdown();
  http_quiesce();
  int64_t waited = drain(http_inflight, cfg.shutdown_timeout_ms);
  if (http_inflight() > 0)
    LOG(LOG_WARN, "%ld requests still running after %lld ms; closing them", http_inflight(),
        (long long)waited);
  /* A connection suspended on a store call must be resumed before the
   * loops stop: let the pipes answer what they hold (bounded by the
   * backend's call timeout; later calls go to the store workers), then
   * give the loops a moment to send those replies. */
  loop_close_pipes();
  drain(http_piped, cfg.store_timeout_ms + SHUTDOWN_GRACE_MS); /* the limit: a safety net */
  drain(http_inflight, SHUTDOWN_GRACE_MS);
  http_stop();
  call_stop(); /* after the loops: what they handed the workers is done */
  tls_stop();
  sweep_stop();
  events_stop();
  wait_stop();
  store_stop();
  auth_stop();
  store_thread_done();
  LOG(LOG_INFO, "stopped");
  return 0;
}
