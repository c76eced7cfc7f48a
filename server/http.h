/* http.h: the HTTP front of picketd, on libmicrohttpd. */
#ifndef PICKETD_HTTP_H
#define PICKETD_HTTP_H

#include <stdint.h>

#include "config.h"

/* Starts the --threads event loops, each with its libmicrohttpd daemon on
 * the one listen socket; *port gets the bound port. Returns 0, or -1 after
 * logging why. */
int http_start(const config *cfg, int *port);
/* Stops accepting connections (in-flight requests go on). */
void http_quiesce(void);
/* Requests being handled now, waiting ones included. */
long http_inflight(void);
/* Sends no more lock calls through the pipes and waits (at most limit_ms)
 * until every piped call has its reply. Call before http_stop: the loops
 * must not stop with connections waiting on Redis. */
void http_drain_pipes(int64_t limit_ms);
/* Stops the loops and their daemons: closes every connection. */
void http_stop(void);
/* wait.c's resume function: resumes a waiter's suspended connection, from
 * any thread. `req` is what http.c put in waiter.conn. */
void http_resume(void *req);

#endif
