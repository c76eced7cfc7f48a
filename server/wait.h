/* wait.h: blocking acquire without a thread per waiter.
 *
 * An acquire with wait_ms that finds the lock held is parked here while its
 * HTTP connection is suspended (libmicrohttpd suspend/resume): it costs a
 * struct, not a thread. Waiters of one lock form a FIFO queue and only the
 * head ever retries, so one release causes one retry, not a herd. The head
 * is woken by the store's release feed (store_feed_*: one subscription
 * per picketd), or at the holder's expiry if the message never comes; any
 * waiter is woken at its deadline, when its client disconnects, and at
 * shutdown. A woken waiter's connection is resumed and its HTTP event
 * loop runs the retry. */
#ifndef PICKETD_WAIT_H
#define PICKETD_WAIT_H

#include <stdint.h>

#include "api_types.h"
#include "config.h"

/* Why a waiter's connection was resumed. */
typedef enum {
  WAKE_NONE = 0,
  WAKE_RETRY,      /* released or expired: try the grant again */
  WAKE_TIMEOUT,    /* wait_ms ran out */
  WAKE_REVOKED,    /* its token was removed by a reload (wait_revoke) */
  WAKE_DISCONNECT, /* the client went away */
  WAKE_SHUTDOWN    /* picketd is stopping */
} wait_wake;

typedef struct waiter waiter;

/* One waiting acquire; embedded in the HTTP request, which owns it. The
 * fields are private to wait.c except where noted. */
struct waiter {
  void *conn;          /* given to the resume function (http.c: its request) */
  int fd;              /* its socket (set by http.c) */
  api_call *call;      /* name, deadline_ms, retry_at_ms (set by http.c) */
  wait_wake wake;      /* why it was resumed (read by http.c) */
  /* private */
  int state;
  wait_wake pending;
  int64_t parked_ms;
  struct wait_queue *queue;
  waiter *prev, *next;         /* in its lock's queue, arrival order */
  waiter *all_prev, *all_next; /* in the list of all waiters */
};

/* Starts the timer/disconnect thread and the store's release feed. The resume
 * function resumes a suspended connection (MHD_resume_connection). */
int wait_start(const config *cfg, void (*resume)(void *conn));
/* Answers every waiter with WAKE_SHUTDOWN and refuses new ones. */
void wait_shutdown(void);
/* After a reload of --auth-file: wakes with WAKE_REVOKED every waiter
 * for whose connection revoked(conn) is 1 (its token is gone), so that
 * it is answered (401) rather than left waiting. */
void wait_revoke(int (*revoked)(void *conn));
/* Joins the threads (after the HTTP daemon is stopped). */
void wait_stop(void);

/* Parks a waiter at the tail of its lock's queue, before the caller
 * suspends its connection. Returns 0, or -1 when --max-waiters is reached
 * (*err = too_many_waiters) or picketd is shutting down (shutting_down). */
int wait_park(waiter *w, picket_proto_err *err);
/* After a retry that found the lock still held: parks it again at the same
 * place in its queue. */
void wait_repark(waiter *w);
/* Called right after the connection is suspended: from now on the waiter
 * may be resumed. Resumes at once if a wake came meanwhile. */
void wait_suspended(waiter *w);
/* Takes the waiter out of its queue for good; `granted` says whether it got
 * the lock (else the next waiter retries at once). Safe to call twice. */
void wait_leave(waiter *w, int granted);

/* Waiters parked on this picketd for `key` (an api_call's key). */
int wait_queue_length(const char *key);

/* The most waiters parked on this picketd for any one key (0: none), for
 * picket_lock_waiters_max: a count, never which name. */
int wait_max(void);

/* Counts a wake-up cause (for http.c's disconnect check). */
void wait_count_disconnect(void);

#endif
