/* fault_proxy.c: the loopback TCP proxy of the fault tests (see
 * fault_proxy.h). One thread, poll(), blocking writes: the traffic is a
 * test's, small and short. */
#include "fault_proxy.h"

#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define PROXY_CONNS 32

struct fault_proxy {
  int lfd, port, upstream;
  int fd[PROXY_CONNS][2]; /* [0] the client's side, [1] the upstream's */
  int silent[PROXY_CONNS]; /* client sides kept open, never read */
  int nsilent;
  atomic_int partitioned, heal, drop, stop;
  pthread_t thread;
};

static int connect_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

static void close_pair(fault_proxy *p, int i) {
  close(p->fd[i][0]);
  close(p->fd[i][1]);
  p->fd[i][0] = p->fd[i][1] = -1;
}

/* Copies what is readable on `from` to `to`; -1 when either side closed. */
static int pump(fault_proxy *p, int from, int to) {
  char buf[16384];
  ssize_t n = read(from, buf, sizeof buf);
  if (n <= 0) return -1;
  if (atomic_load(&p->partitioned)) return 0; /* read after the cut: dropped */
  for (ssize_t off = 0; off < n;) {
    ssize_t w = write(to, buf + off, (size_t)(n - off));
    if (w <= 0) return -1;
    off += w;
  }
  return 0;
}

static void accept_one(fault_proxy *p) {
  int c = accept(p->lfd, NULL, NULL);
  int u = c >= 0 ? connect_port(p->upstream) : -1;
  int slot = -1;
  for (int i = 0; i < PROXY_CONNS && slot < 0; i++)
    if (p->fd[i][0] < 0) slot = i;
  if (c >= 0 && u >= 0 && slot >= 0) {
    p->fd[slot][0] = c;
    p->fd[slot][1] = u;
  } else {
    if (c >= 0) close(c);
    if (u >= 0) close(u);
  }
}

static void *proxy_main(void *arg) {
  fault_proxy *p = arg;
  while (!atomic_load(&p->stop)) {
    if (atomic_load(&p->drop)) {
      for (int i = 0; i < PROXY_CONNS; i++) {
        if (p->fd[i][0] < 0) continue;
        close(p->fd[i][1]);
        p->silent[p->nsilent++] = p->fd[i][0];
        p->fd[i][0] = p->fd[i][1] = -1;
      }
      atomic_store(&p->drop, 0);
    }
    if (atomic_load(&p->heal)) {
      for (int i = 0; i < PROXY_CONNS; i++)
        if (p->fd[i][0] >= 0) close_pair(p, i);
      atomic_store(&p->partitioned, 0);
      atomic_store(&p->heal, 0);
    }
    if (atomic_load(&p->partitioned)) { /* the cable is cut: nothing moves */
      harness_sleep_ms(10);
      continue;
    }
    struct pollfd pf[1 + 2 * PROXY_CONNS];
    int n = 0;
    pf[n++] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
    for (int i = 0; i < PROXY_CONNS; i++)
      for (int s = 0; s < 2; s++) pf[n++] = (struct pollfd){.fd = p->fd[i][s], .events = POLLIN};
    if (poll(pf, (nfds_t)n, 10) <= 0) continue;
    if (pf[0].revents & POLLIN) accept_one(p);
    for (int i = 0; i < PROXY_CONNS; i++)
      for (int s = 0; s < 2; s++) {
        short ev = pf[1 + 2 * i + s].revents;
        if (p->fd[i][s] < 0 || !(ev & (POLLIN | POLLHUP | POLLERR))) continue;
        if (pump(p, p->fd[i][s], p->fd[i][!s]) < 0) close_pair(p, i);
      }
  }
  return NULL;
}

fault_proxy *fault_proxy_start(int upstream) {
  fault_proxy *p = calloc(1, sizeof *p);
  ck_assert_ptr_nonnull(p);
  for (int i = 0; i < PROXY_CONNS; i++) p->fd[i][0] = p->fd[i][1] = -1;
  p->upstream = upstream;
  p->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  ck_assert_int_eq(bind(p->lfd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(p->lfd, 64), 0);
  ck_assert_int_eq(getsockname(p->lfd, (struct sockaddr *)&a, &len), 0);
  p->port = ntohs(a.sin_port);
  pthread_create(&p->thread, NULL, proxy_main, p);
  return p;
}

int fault_proxy_port(const fault_proxy *p) { return p->port; }

void fault_proxy_partition(fault_proxy *p) { atomic_store(&p->partitioned, 1); }

void fault_proxy_heal(fault_proxy *p) {
  atomic_store(&p->heal, 1);
  while (atomic_load(&p->heal)) harness_sleep_ms(5);
}

void fault_proxy_drop_silently(fault_proxy *p) {
  atomic_store(&p->drop, 1);
  while (atomic_load(&p->drop)) harness_sleep_ms(5);
}

void fault_proxy_free(fault_proxy *p) {
  if (p == NULL) return;
  atomic_store(&p->stop, 1);
  pthread_join(p->thread, NULL);
  close(p->lfd);
  for (int i = 0; i < PROXY_CONNS; i++)
    if (p->fd[i][0] >= 0) close_pair(p, i);
  for (int i = 0; i < p->nsilent; i++) close(p->silent[i]);
  free(p);
}
