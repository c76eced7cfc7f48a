/* watcher.c: the thread under a topology watcher (see watcher.h). */
#include "watcher.h"

#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

int watcher_init(watcher *w) {
  w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return w->fd < 0 ? -1 : 0;
}

int watcher_start(watcher *w, void *(*fn)(void *)) {
  if (pthread_create(&w->thread, NULL, fn, NULL) != 0) return -1;
  w->started = 1;
  return 0;
}

static void signal_fd(watcher *w) {
  uint64_t one = 1;
  if (write(w->fd, &one, sizeof one) < 0) { /* already signalled */ }
}

void watcher_kick(watcher *w) {
  if (w->fd < 0 || atomic_exchange(&w->kicked, 1)) return; /* already asked for */
  signal_fd(w);
}

void watcher_drain(watcher *w) {
  uint64_t v;
  if (read(w->fd, &v, sizeof v) < 0) { /* drained already */ }
}

void watcher_stop(watcher *w) {
  if (!w->started) return;
  atomic_store(&w->stopping, 1);
  signal_fd(w);
  pthread_join(w->thread, NULL);
  w->started = 0;
  close(w->fd);
  w->fd = -1;
}
