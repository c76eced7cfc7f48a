/* conns_token.h: the connections of each token of --auth-file: a cap on
 * how many one token may hold open (--max-connections-per-token), and
 * their end when a reload (SIGHUP) removes the token. conns.c counts a
 * connection in the first time a request on it is authenticated (api.c),
 * and out when it closes; conns_token.c says why it works so. */
#ifndef PICKETD_CONNS_TOKEN_H
#define PICKETD_CONNS_TOKEN_H

#include <stdatomic.h>

#include "auth.h"
#include "config.h"

typedef struct conns_token conns_token; /* one token's connections */

/* One connection's place in its token's count: embedded in the
 * connection (conns.c), zeroed when it opens. */
typedef struct conns_token_member {
  conns_token *token;                       /* NULL: counted against no token */
  struct conns_token_member *prev, *next;   /* in its token's list */
  int fd;                                   /* its socket, to shut down on a revocation */
  atomic_int revoked;                       /* its token was removed: it is closing */
  atomic_int waiting;                       /* a waiting acquire is parked on it */
} conns_token_member;

/* The cap: --max-connections-per-token resolved (auto: a quarter of
 * --max-connections; 0: none). Call once before any connection opens. */
void conns_token_init(const config *cfg);
/* The cap in force (0: none), for messages. */
int conns_token_cap(void);

/* Counts m (socket fd) in for who's token: 0, or -1 when the token
 * already holds its cap (m is then counted against nothing). Keeps its
 * own reference to the token. Any thread; m must not be counted yet. */
int conns_token_join(conns_token_member *m, auth_principal *who, int fd);
/* Counts m out (not counted is fine), before its socket is closed. */
void conns_token_leave(conns_token_member *m);
/* 1 when m's token was removed by a reload: m is to be closed. */
int conns_token_revoked(const conns_token_member *m);

/* After auth_reload: every connection whose token the current table no
 * longer has (removed, or its hash replaced) is marked revoked and its
 * socket shut down for reading, so that its loop, and events.c for a
 * suspended stream, see the end of the stream and close it. A connection
 * with a parked waiter is only marked: wait_revoke wakes it, and it is
 * answered 401 and closed (libmicrohttpd would close a resumed connection
 * that reads the end of the stream before its handler could answer). A
 * token that remains keeps its connections. Returns how many were
 * revoked. */
int conns_token_revoke(void);

/* Frees what is left, once every connection has closed. */
void conns_token_free(void);

#endif
