/* conns.h: fenced-kv's whole-request deadline (see conns.c): a request must
 * arrive whole within --request-timeout-ms of its connection's accept, or
 * the connection gets a bare 408 and is closed. */
#ifndef FENCED_KV_CONNS_H
#define FENCED_KV_CONNS_H

#include <microhttpd.h>
#include <stdint.h>

/* Starts the watchdog thread that cuts late requests. Call it with the
 * signals the process waits for already blocked. Returns 0 or -1. */
int conns_start(int64_t timeout_ms);

/* Stops the watchdog. Call it after MHD_stop_daemon. */
void conns_stop(void);

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback: starts a
 * connection's clock at its accept and forgets it at its close. */
void conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                  enum MHD_ConnectionNotificationCode code);

/* Called when the request has arrived whole, before it is handled: stops
 * its clock. Returns 1 to go on, or 0 when the deadline cut it first (the
 * client has its 408: handle nothing, answer MHD_NO). */
int conns_request_complete(struct MHD_Connection *c);

#endif
