/* events.h: lock event streams, GET /v1/locks/{name}/events (see
 * events.c for the design, docs/events.md for the wire format).
 *
 * api.c opens a stream once the caller may read the lock (events_open);
 * http.c attaches it to the connection and feeds libmicrohttpd from
 * events_read, suspending the connection while there is nothing to send;
 * events.c resumes it through the function given to events_start. */
#ifndef PICKETD_EVENTS_H
#define PICKETD_EVENTS_H

#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "picket_proto.h"

typedef struct events_sub events_sub;

/* Sets the limits events_open keeps (events_start does too). */
void events_init(const config *cfg);
/* Starts the events thread (the store's follower of watched locks, the
 * expiry checks and heartbeats). resume(conn) must resume a connection
 * from any thread (http_resume). 0, or -1 with errno. */
int events_start(const config *cfg, void (*resume)(void *conn));
/* Ends every open stream (what is buffered is still sent): call before
 * the HTTP loops drain. Later opens are refused (shutting_down). */
void events_shutdown(void);
void events_stop(void);

/* A stream of lock `name`'s events for `client` (a token's name, or a
 * client address without --auth-file); sees_operators: whether a
 * `broken` event may say who broke the lock (auth_sees_operators), else
 * it says AUTH_OPERATOR_HIDDEN. NULL with *err (too_many_watchers
 * per client or in total, shutting_down) when refused. Works without
 * events_start (nothing is then published to it but its heartbeats'
 * absence): the fuzzer opens and closes streams. */
events_sub *events_open(const char *name, const char *client, int sees_operators,
                        picket_proto_err *err);
/* The connection that carries the stream (given to resume) and its socket
 * (watched for a hang-up while the connection is suspended; -1: none). */
void events_attach(events_sub *s, void *conn, int fd);
/* Up to max of the stream's next bytes: the count (> 0); 0 when there is
 * nothing yet (the caller suspends the connection; events.c resumes it
 * when there is); -1 when the stream is over. */
ssize_t events_read(events_sub *s, char *buf, size_t max);
/* The stream's connection ended: frees it. */
void events_close(events_sub *s);

#endif
