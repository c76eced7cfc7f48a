/* auth.h: who is calling (--auth-file): bearer tokens resolved to
 * principals with lock-name prefixes, verbs and quotas.
 *
 * The file is parsed once into a table that requests share by reference;
 * SIGHUP parses it again and swaps the table atomically, so a request
 * keeps the principal it started with and none fails for a reload. */
#ifndef PICKETD_AUTH_H
#define PICKETD_AUTH_H

#include <stddef.h>

#include "config.h"
#include "picket_proto.h"
#include "quota.h"

#define AUTH_TOKENS_MAX 4096
#define AUTH_PREFIXES_MAX 64   /* per token */
#define AUTH_LINE_MAX 4096
#define AUTH_FILE_MAX (1 << 20)
#define AUTH_NAME_MAX 64
#define AUTH_TOKEN_MAX 512     /* bytes of a presented token */

/* lock: acquire, renew, release; read: GET of one name; metrics: /metrics;
 * list: GET /v1/locks (the names under its prefixes); admin: break. */
typedef enum {
  AUTH_LOCK = 1,
  AUTH_READ = 2,
  AUTH_METRICS = 4,
  AUTH_LIST = 8,
  AUTH_ADMIN = 16
} auth_verb;

typedef struct auth_table auth_table;
typedef struct auth_principal auth_principal;

/* Loads --auth-file when set. 0, or -1 with the file, line and reason in
 * err. Call once, before any other auth function. */
int auth_init(const config *cfg, char *err, size_t errlen);
/* 1 when --auth-file is set: every lock call and /metrics needs a token. */
int auth_enabled(void);
/* SIGHUP: parses the file again and swaps it in; a file that does not
 * parse keeps the old table, and the log says which line and why. */
void auth_reload(void);
/* Frees the current table (at exit, for leak checkers). */
void auth_stop(void);

/* The principal of an Authorization header value (NULL: none sent). On
 * success returns 0 and a reference in *who (give it back with auth_put).
 * Otherwise returns PICKET_PROTO_ERR_UNAUTHENTICATED with a message for
 * the client (never the token) and the reason in *why. A presented token
 * is hashed (SHA-256), found through an index of the stored hashes, and its
 * hash compared with theirs in constant time. */
int auth_resolve(const char *authorization, auth_principal **who, char *msg, size_t cap,
                 quota_deny *why);
void auth_put(auth_principal *who); /* NULL is allowed */
/* Another reference to who, for a holder that outlives the request (give
 * it back with auth_put). */
auth_principal *auth_ref(auth_principal *who);
/* The same token (same name, same hash) in the table requests resolve
 * against now, as a new reference (auth_put it), or NULL when a reload
 * removed it or replaced its hash: the token who was made from is no
 * longer accepted. */
auth_principal *auth_current(const auth_principal *who);
/* 1 when a and b are one token: the same name and the same hash. */
int auth_same(const auth_principal *a, const auth_principal *b);

const char *auth_name(const auth_principal *who);
int auth_allows(const auth_principal *who, auth_verb verb);
/* 1 when `name` starts with one of the token's prefixes (or it has "*"). */
int auth_covers(const auth_principal *who, const char *name);
/* 1 when `who` covers every name (its prefixes are "*"), and without
 * --auth-file (who NULL): what /metrics shows of other tenants, such as
 * the series labelled by token name, is only for such a reader. */
int auth_covers_all(const auth_principal *who);
/* Who broke a lock (a break's "token 'NAME'" or "address A") is for
 * operators: a token with the admin verb, or anyone without --auth-file
 * (there it is an address, and every caller is the operator's own
 * client). Everyone else is told AUTH_OPERATOR_HIDDEN instead, in event
 * streams and in the broken holder's lease_lost: an admin token's name
 * tells a tenant which token to go after, and it needs no more than
 * "broken, and when" to stop its job. */
#define AUTH_OPERATOR_HIDDEN "an operator"
int auth_sees_operators(const auth_principal *who);
/* `by` when auth_sees_operators(who), else AUTH_OPERATOR_HIDDEN (static). */
const char *auth_operator_shown(const auth_principal *who, const char *by);
/* The token's i-th prefix ("*" for every name), or NULL past the last. */
const char *auth_prefix(const auth_principal *who, int i);
/* The token's quota subject (owned by the table: do not put it). */
quota_subject *auth_subject(const auth_principal *who);
/* The lease id kept in the store for a client's lease id: the first 128 bits
 * of SHA-256("lease:" token name ":" lease), in hex. Another token's same
 * id is another lease, so a leaked or guessed lease id is worth nothing
 * without its token. A token replaced under the same name keeps its
 * leases (a rotation does not drop the locks it holds). */
void auth_bind_lease(const auth_principal *who, const char *lease,
                     char out[PICKET_PROTO_LEASE_LEN + 1]);

/* The parser alone (the fuzzer's entry point): a table, or NULL with the
 * line and reason in err. The table owns its quota subjects. */
auth_table *auth_parse(const char *text, size_t len, char *err, size_t errlen);
/* Makes t the table requests resolve against (the fuzzer's switch): NULL
 * turns authentication off. Takes a reference to t; the caller keeps its
 * own. */
void auth_set_table(auth_table *t);
void auth_table_free(auth_table *t);
int auth_table_count(const auth_table *t);

#endif
