/* watcher.h: the thread under each topology watcher (sentinel.c for
 * --sentinel, cluster.c for --redis-cluster): started once, kicked from
 * any thread (kicks that come before it looks make one), stopped at exit.
 * The watcher's loop polls `fd` beside its own sockets. */
#ifndef PICKETD_WATCHER_H
#define PICKETD_WATCHER_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
  pthread_t thread;
  int started;
  atomic_int stopping;
  atomic_int kicked; /* a kick not yet acted on */
  int fd;            /* eventfd: readable after a kick, and at stop */
} watcher;

#define WATCHER_INIT {.fd = -1}

/* Makes the eventfd: 0, or -1. */
int watcher_init(watcher *w);
/* Runs fn(NULL) on the watcher's thread: 0, or -1. */
int watcher_start(watcher *w, void *(*fn)(void *));
void watcher_kick(watcher *w);
/* Empties fd once poll says it is readable. */
void watcher_drain(watcher *w);
/* Sets stopping, wakes the thread, joins it and closes fd. */
void watcher_stop(watcher *w);

#endif
