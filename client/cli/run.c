/* run.c: `picket run NAME -- CMD`, the sidecar: holds a lease (or, with
 * --semaphore, one permit of a counting semaphore, or with --read/--write a
 * read/write lock's read or write lease: each is a lease too)
 * for as long as a command runs, and stops the command when it is lost.
 * `picket elect` (elect.c) runs its command the same way once it leads:
 * cli_run_lease is everything after the grant, for any lease.
 *
 * Shape: acquire; start a picket_keeper (its own thread renews the lease);
 * fork the child into its own process group, so that the whole job (a
 * shell script and whatever it starts) can be signalled at once; then wait
 * in one poll() on a signalfd (SIGCHLD and the signals to forward) and on a
 * pipe the keeper's loss callback writes to. The signals are blocked in
 * every thread before the keeper starts, so only the signalfd sees them.
 *
 * On loss: SIGTERM to the child's group at once, SIGKILL after --grace,
 * and exit CLI_EXIT_LOST whatever the child's status, because whatever it
 * did after the deadline was done without the lock. The keeper also
 * watches the lock's events (a lock's lease, where picketd has them), so
 * a break or another's grant reaches the pipe within milliseconds, not at
 * the next renewal. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "picket_proto.h"

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void on_lost(picket_lease *lease, int err, void *arg) {
  int fd = *(int *)arg;
  char b = (char)-err;
  /* Nothing to do if this fails: the pipe has room, and the keeper's flag
   * is also polled below. */
  if (write(fd, &b, 1) < 0) {
  }
}

static int64_t realtime_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int set_env(const picket_lease *l) {
  char fence[32], deadline[32];
  snprintf(fence, sizeof fence, "%lld", (long long)picket_lease_fence(l));
  /* The child gets the first grant's local deadline as Unix time in ms, a
   * clock any script can read (date +%s%3N). Renewals move the real one
   * later; this one is what holds if renewing stops. */
  snprintf(deadline, sizeof deadline, "%lld",
           (long long)(realtime_ms() + picket_lease_remaining_ms(l)));
  /* the signed fence, for storage that verifies (picketd --fence-key-file) */
  const char *token = picket_lease_fence_token(l);
  if (token ? setenv(PICKET_PROTO_ENV_FENCE_TOKEN, token, 1) : unsetenv(PICKET_PROTO_ENV_FENCE_TOKEN))
    return -1;
  /* an election's name and term (the term is the fence too) */
  char term[32];
  snprintf(term, sizeof term, "%lld", (long long)picket_lease_fence(l));
  if (picket_lease_is_election(l)
          ? setenv(CLI_ENV_ELECTION, picket_lease_lock(l), 1) | setenv(CLI_ENV_TERM, term, 1)
          : unsetenv(CLI_ENV_ELECTION) | unsetenv(CLI_ENV_TERM))
    return -1;
  /* a permit's slot and semaphore; a lock's child inherits no stale ones */
  char permit[32];
  snprintf(permit, sizeof permit, "%lld", (long long)picket_lease_permit(l));
  if (picket_lease_is_permit(l)
          ? setenv(PICKET_PROTO_ENV_PERMIT, permit, 1) |
                setenv(PICKET_PROTO_ENV_SEMAPHORE, picket_lease_lock(l), 1)
          : unsetenv(PICKET_PROTO_ENV_PERMIT) | unsetenv(PICKET_PROTO_ENV_SEMAPHORE))
    return -1;
  /* an rwlock lease's mode and rwlock, likewise */
  if (picket_lease_is_rwlock(l)
          ? setenv(PICKET_PROTO_ENV_MODE,
                   picket_lease_mode(l) == PICKET_MODE_WRITE ? "write" : "read", 1) |
                setenv(PICKET_PROTO_ENV_RWLOCK, picket_lease_lock(l), 1)
          : unsetenv(PICKET_PROTO_ENV_MODE) | unsetenv(PICKET_PROTO_ENV_RWLOCK))
    return -1;
  /* the lock name the fence is checked under: NAME:permit:I for a permit,
   * NAME:rw for an rwlock's lease, the election's NAME for a leader */
  return setenv(PICKET_PROTO_ENV_LOCK, picket_lease_fence_lock(l), 1) |
         setenv(PICKET_PROTO_ENV_FENCE, fence, 1) |
         setenv(PICKET_PROTO_ENV_LEASE, picket_lease_id(l), 1) |
         setenv(PICKET_PROTO_ENV_DEADLINE_MS, deadline, 1);
}

/* Forks and execs the child in its own process group; with `tty`, that
 * group becomes the terminal's foreground group, so an interactive command
 * can read the terminal and gets ^C directly (SIGTTOU is blocked, so this
 * works from the background group). Only async-signal-safe calls happen in
 * the child: the keeper thread already runs. The exec error comes back
 * through a close-on-exec pipe. Returns the pid or -1. */
static pid_t spawn(char **argv, const sigset_t *mask, int tty, int *exec_errno) {
  int ep[2];
  *exec_errno = 0;
  if (pipe2(ep, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(ep[0]);
    close(ep[1]);
    return -1;
  }
  if (pid == 0) {
    setpgid(0, 0);
    if (tty) tcsetpgrp(STDIN_FILENO, getpid());
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, mask, NULL);
    execvp(argv[0], argv);
    int e = errno;
    if (write(ep[1], &e, sizeof e) < 0) {
    }
    _exit(e == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC);
  }
  /* Also here, so the group exists before we might signal it. */
  setpgid(pid, pid);
  close(ep[1]);
  ssize_t n;
  while ((n = read(ep[0], exec_errno, sizeof *exec_errno)) < 0 && errno == EINTR) {
  }
  if (n != (ssize_t)sizeof *exec_errno) *exec_errno = 0;
  close(ep[0]);
  return pid;
}

static int status_code(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return CLI_EXIT_RUN_FAIL;
}

int cli_run(picket_client *c, const cli_args *a) {
  char what[300];
  snprintf(what, sizeof what, "run %s", a->name);
  picket_lease *l = NULL;
  int err = cli_acquire(c, a, &l); /* a->lease is NULL: run takes no --lease */
  if (err != 0) {
    int rc = cli_report(c, what, err);
    return rc == CLI_EXIT_FAIL ? CLI_EXIT_RUN_FAIL : rc;
  }
  int rc = cli_run_lease(c, a, what, l);
  picket_lease_free(l);
  return rc;
}

int cli_run_lease(picket_client *c, const cli_args *a, const char *what, picket_lease *l) {
  int err, rc = CLI_EXIT_RUN_FAIL;
  int sfd = -1, lp[2] = {-1, -1};
  picket_keeper *k = NULL;
  sigset_t set, block, old;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaddset(&set, forwarded[i]);
  block = set;
  sigaddset(&block, SIGTTOU); /* for tcsetpgrp from a background group */
  pthread_sigmask(SIG_BLOCK, &block, &old);
  int tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  signal(SIGPIPE, SIG_IGN);

  if (set_env(l) != 0 || (sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
      pipe2(lp, O_CLOEXEC | O_NONBLOCK) < 0) {
    fprintf(stderr, "picket: %s: %s\n", what, strerror(errno));
    goto release;
  }
  picket_keeper_options ko;
  picket_keeper_options_init(&ko);
  ko.on_lost = on_lost;
  ko.arg = &lp[1];
  if ((err = picket_keeper_start(c, l, &ko, &k)) != 0) {
    cli_report(NULL, what, err);
    goto release;
  }
  int exec_errno;
  pid_t pid = spawn(a->argv, &old, tty, &exec_errno);
  if (pid < 0) {
    fprintf(stderr, "picket: %s: fork: %s\n", what, strerror(errno));
    goto release;
  }
  if (exec_errno != 0)
    fprintf(stderr, "picket: %s: cannot run %s: %s\n", what, a->argv[0], strerror(exec_errno));

  int lost = 0, killed = 0, status = 0;
  int64_t kill_at = 0;
  for (;;) {
    struct pollfd fds[2] = {{.fd = sfd, .events = POLLIN}, {.fd = lp[0], .events = POLLIN}};
    int timeout = -1;
    if (lost && !killed) {
      int64_t left = kill_at - picket_now_ms();
      timeout = left > 0 ? (int)left : 0;
    }
    int n = poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      char b;
      while (read(lp[0], &b, 1) > 0) {
      }
    }
    if (!lost && picket_keeper_lost(k) != 0) {
      lost = picket_keeper_lost(k);
      fprintf(stderr, "picket: %s: %s; stopping %s (SIGTERM, SIGKILL after %lld ms)\n", what,
              picket_strerror(lost), a->argv[0], (long long)a->grace_ms);
      kill(-pid, SIGTERM);
      kill_at = picket_now_ms() + a->grace_ms;
    }
    if (lost && !killed && picket_now_ms() >= kill_at) {
      kill(-pid, SIGKILL);
      killed = 1;
    }
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si && si.ssi_signo != SIGCHLD)
        kill(-pid, (int)si.ssi_signo);
    }
    /* SIGCHLD may coalesce: ask waitpid every time round. */
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      rc = status_code(status);
      if (tty) tcsetpgrp(STDIN_FILENO, getpgrp()); /* take the terminal back */
      break;
    }
    if (w < 0 && errno != EINTR) break;
  }

  err = picket_keeper_stop(k);
  k = NULL;
  if (err != 0) {
    if (!lost)
      fprintf(stderr, "picket: %s: %s after %s exited\n", what, picket_strerror(err),
              a->argv[0]);
    rc = CLI_EXIT_LOST;
    goto out;
  }
release:
  picket_keeper_stop(k);
  if ((err = picket_release(c, l)) != 0) { /* a leader's: a resign */
    /* The child's work is done; a lease we could not release expires
     * by itself within its TTL, so the child's status stands. */
    char w2[320];
    snprintf(w2, sizeof w2, "%s: %s", what, picket_lease_is_election(l) ? "resign" : "release");
    cli_report(c, w2, err);
  }
out:
  if (sfd >= 0) close(sfd);
  if (lp[0] >= 0) close(lp[0]);
  if (lp[1] >= 0) close(lp[1]);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}
