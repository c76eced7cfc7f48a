/* http.h: the HTTP front of picketd, on libmicrohttpd. */
#ifndef PICKETD_HTTP_H
#define PICKETD_HTTP_H

#include "config.h"

/* Starts the daemon with its worker thread pool; *port gets the bound port.
 * Returns 0, or -1 after logging why. */
int http_start(const config *cfg, int *port);
/* Stops accepting connections (in-flight requests go on). */
void http_quiesce(void);
/* Requests being handled now, waiting ones included. */
long http_inflight(void);
/* Stops the daemon: closes every connection and joins the threads. */
void http_stop(void);
/* Resumes a suspended connection (the resume function wait.c calls). */
void http_resume(void *conn);

#endif
