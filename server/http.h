/* http.h: the HTTP front of picketd, on libmicrohttpd. */
#ifndef PICKETD_HTTP_H
#define PICKETD_HTTP_H

#include "config.h"

/* Starts the --threads event loops, each with its libmicrohttpd daemon on
 * the one listen socket; *port gets the bound port. Returns 0, or -1 after
 * logging why. */
int http_start(const config *cfg, int *port);
/* Stops accepting connections (in-flight requests go on). */
void http_quiesce(void);
/* Requests being handled now, waiting ones included. */
long http_inflight(void);
/* Piped calls still waiting for their reply. Each ends by its reply or by
 * the store's call timeout; http_stop must not come before they have. */
long http_piped(void);
/* Stops the loops and their daemons: closes every connection. */
void http_stop(void);
/* wait.c's resume function: resumes a waiter's suspended connection, from
 * any thread. `req` is what http.c put in waiter.conn. */
void http_resume(void *req);
/* 1 when the request's connection lost its token to a reload (for
 * wait_revoke; any thread). */
int http_revoked(void *req);

#endif
