/* conns.h: limits on client connections that libmicrohttpd 0.9.75 does
 * not have: a deadline for a whole request (--request-timeout-ms), a cap
 * on open connections per client address group (--max-connections-per-ip,
 * IPv6 by --ipv6-prefix-len) and, under --auth-file, slots kept for
 * clients that authenticated (--reserved-auth-connections) and a cap per
 * token (--max-connections-per-token, conns_token.c).
 * http.c calls these from its libmicrohttpd callbacks and event loops;
 * conns.c says how they work. */
#ifndef PICKETD_CONNS_H
#define PICKETD_CONNS_H

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdint.h>
#include <sys/socket.h>

#include "auth.h"
#include "config.h"

typedef struct conns_client conns_client; /* one client connection: its socket context */
typedef struct conns_loop conns_loop; /* the connections of one event loop */

/* Sets up the per-address table. Call once before any daemon starts;
 * cfg must outlive every connection. Returns 0, or -1 if out of memory. */
int conns_init(const config *cfg);
/* Frees the table, once every daemon has stopped. */
void conns_free(void);

/* The connections of the loop whose own epoll set is `ep` (each waits
 * there for the first byte of its next request). NULL if out of memory.
 * conns_loop_free frees it once its daemon has stopped (NULL is fine). */
conns_loop *conns_loop_new(int ep);
void conns_loop_free(conns_loop *cl);

/* libmicrohttpd's accept policy: MHD_NO when the client's address group
 * already has as many connections as it may (under --auth-file, the
 * group's oldest unauthenticated connection is closed instead, if it has
 * one; so is the loop's, past its share of unauthenticated connections).
 * Runs on the accepting loop's thread, and the connection it lets in is
 * the next conns_opened on that thread. */
enum MHD_Result conns_accept(void *cls, const struct sockaddr *addr, socklen_t len);

/* api.c authenticated a request on c as `who` (c's loop's thread; NULL c
 * is fine): the first time, c counts against who's token instead of its
 * address group and the loop's unauthenticated share. 0, or -1 when the
 * token already holds --max-connections-per-token (c stays counted as
 * unauthenticated: the caller answers 429 and closes it). */
int conns_authenticated(conns_client *c, auth_principal *who);
/* 1 when c's token was removed by a reload (conns_token_revoke): each of
 * its requests is answered 401 and the connection closed. */
int conns_revoked(const conns_client *c);
/* http.c: a waiting acquire is parked on c (on), or no longer (NULL c is
 * fine). A revocation leaves such a connection's socket alone: the waiter
 * is woken instead and answers 401 before the close. */
void conns_waiting(conns_client *c, int on);

/* MHD_CONNECTION_NOTIFY_STARTED, on the loop cl that accepted mc: returns
 * the socket context for it, or NULL when out of memory (the connection
 * is then cut at once, and never counted). */
conns_client *conns_opened(conns_loop *cl, struct MHD_Connection *mc);
/* MHD_CONNECTION_NOTIFY_CLOSED: frees c (NULL is fine). */
void conns_closed(conns_client *c);

/* The events of a connection's request, from http.c (NULL c is fine):
 * readable: the loop's epoll set reported c, tagged with c (a byte came);
 * started: libmicrohttpd has the request line (uri_logged);
 * complete: the whole request is in, so the deadline no longer applies;
 * finished: the request is over (on_completed), the next one may come. */
/* The client's address group as text, for api.c's per-address limits
 * (--max-waiters-per-ip, --acquire-rate-per-ip), so that they count the
 * groups the connection cap counts: "loopback", an IPv4 address, or an
 * IPv6 prefix of --ipv6-prefix-len bits ("2001:db8:1:2::/64"); "" when
 * unknown (c NULL). Made when the connection opens; lives as long as c. */
#define CONNS_GROUP_TEXT_MAX (INET6_ADDRSTRLEN + 12) /* an address, "/" and a number */
const char *conns_peer(const conns_client *c);
/* The key of the group whose connections one cap counts, for a 16-byte
 * address (IPv4 mapped as ::ffff:a.b.c.d): all of loopback (127.0.0.0/8,
 * ::1) is one group (key ::1); an IPv4 address is its own; an IPv6
 * address is cut to its first ipv6_prefix_len bits (1..128). */
void conns_group_key(const unsigned char addr[16], int ipv6_prefix_len, unsigned char key[16]);

/* 1 when the client is on loopback (127.0.0.0/8, ::1, IPv4-mapped), where
 * one address is every sidecar of the host: api.c's `auto` limits leave it
 * alone. */
int conns_peer_loopback(const conns_client *c);

void conns_readable(conns_client *c);
void conns_request_started(conns_client *c);
void conns_request_complete(conns_client *c);
void conns_request_finished(conns_client *c);

/* Each pass of the loop: cuts every connection whose request is past its
 * deadline. */
void conns_expire(conns_loop *cl);
/* Milliseconds until the loop's next deadline (0 if one is past), or -1
 * when no request is arriving. */
int64_t conns_timeout_ms(const conns_loop *cl);

#endif
