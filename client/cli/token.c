/* token.c: `picket token new`, which makes a bearer token for picketd's
 * --auth-file and the line of that file that admits it. It talks to no
 * server: the token is printed once, here, and picketd only ever stores
 * its SHA-256, so a leaked auth file gives nobody a working token.
 *
 * A token is "pkt_" and 64 lowercase hex digits: 32 bytes (256 bits) from
 * the kernel's CSPRNG. Hex survives every shell, header and config file
 * unquoted; the prefix lets secret scanners and people recognise one.
 *
 * The auth-file grammar, one token a line (server/auth.c parses the same):
 *
 *   file     = *( line LF )
 *   line     = *WSP [ entry / comment ] *WSP   ; blank lines are ignored
 *   comment  = "#" *( any byte but LF )        ; ignored
 *   entry    = NAME 1*WSP "sha256:" HEX64 1*WSP PREFIXES 1*WSP VERBS *( 1*WSP limit )
 *   NAME     = 1*64( ALPHA / DIGIT / "." / "_" / "-" )   ; who, for logs and metrics
 *   HEX64    = 64( DIGIT / %x61-66 )   ; lowercase hex SHA-256 of the token exactly
 *                                      ; as sent in "Authorization: Bearer <token>"
 *   PREFIXES = "*" / prefix *( "," prefix )   ; the lock names it may use start so
 *   prefix   = 1*200( ALPHA / DIGIT / "." / "_" / ":" / "-" )   ; the lock-name alphabet
 *   VERBS    = verb *( "," verb )
 *   verb     = "lock" / "read" / "metrics" / "list" / "admin"
 *   limit    = ( "max_leases" / "max_waiters" / "acquire_rate" ) "=" N
 *   N        = a decimal integer 1..1000000000, no sign, no leading zero
 *   WSP      = SP / HTAB
 *
 * Each verb and each limit at most once. The line printed here has its
 * limits in the order above. */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "picket_proto.h"

#define TOKEN_PREFIX "pkt_"
#define TOKEN_BYTES 32
#define LIMIT_MAX 1000000000L

static const char *const verbs[] = {"lock", "read", "metrics", "list", "admin"};
static const char *const limits[] = {"max_leases", "max_waiters", "acquire_rate"};
#define NVERBS (sizeof verbs / sizeof verbs[0])
#define NLIMITS (sizeof limits / sizeof limits[0])

static const char usage[] =
    "usage: picket token new NAME PREFIXES VERBS [max_leases=N] [max_waiters=N] [acquire_rate=N]\n";

static int bad(const char *what, const char *value, const char *rule) {
  fprintf(stderr, "picket: token new: %s '%s': %s (see picket --help)\n", what, value, rule);
  return CLI_EXIT_USAGE;
}

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* How many of the first n bytes of p are in `set`. */
static size_t span(const char *p, size_t n, const char *set) {
  size_t i = 0;
  while (i < n && p[i] != '\0' && strchr(set, p[i]) != NULL) i++;
  return i;
}

static int name_ok(const char *s) {
  size_t n = strlen(s);
  return n >= 1 && n <= 64 && span(s, n, ALNUM "._-") == n;
}

/* "*" or a comma list of non-empty prefixes in the lock-name alphabet. */
static int prefixes_ok(const char *s) {
  if (strcmp(s, "*") == 0) return 1;
  for (const char *p = s;;) {
    size_t n = strcspn(p, ",");
    if (n == 0 || n > PICKET_PROTO_NAME_MAX || span(p, n, ALNUM "._:-") != n) return 0;
    if (p[n] == '\0') return 1;
    p += n + 1;
  }
}

/* A comma list of verbs, each once. */
static int verbs_ok(const char *s) {
  int seen[NVERBS] = {0};
  for (const char *p = s;;) {
    size_t n = strcspn(p, ","), v = 0;
    while (v < NVERBS && !(strlen(verbs[v]) == n && strncmp(p, verbs[v], n) == 0)) v++;
    if (v == NVERBS || seen[v]++) return 0;
    if (p[n] == '\0') return 1;
    p += n + 1;
  }
}

/* "max_leases=N": which limit (its index) and N, or -1. */
static int limit_parse(const char *s, long *value) {
  const char *eq = strchr(s, '=');
  if (eq == NULL) return -1;
  size_t i = 0, n = (size_t)(eq - s);
  while (i < NLIMITS && !(strlen(limits[i]) == n && strncmp(s, limits[i], n) == 0)) i++;
  const char *d = eq + 1;
  size_t digits = strspn(d, "0123456789");
  if (i == NLIMITS || digits == 0 || digits > 10 || d[digits] != '\0' || d[0] == '0') return -1;
  *value = strtol(d, NULL, 10);
  return *value <= LIMIT_MAX ? (int)i : -1;
}

static void hex(const unsigned char *in, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", in[i]);
}

int cli_token(int argc, char **argv) {
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(usage, stdout);
    return CLI_EXIT_OK;
  }
  if (argc < 2 || strcmp(argv[1], "new") != 0) {
    fprintf(stderr, "picket: token: the only subcommand is new: %s", usage);
    return CLI_EXIT_USAGE;
  }
  if (argc < 5) {
    fprintf(stderr, "picket: token new needs NAME PREFIXES VERBS: %s", usage);
    return CLI_EXIT_USAGE;
  }
  const char *name = argv[2], *prefixes = argv[3], *vlist = argv[4];
  if (!name_ok(name)) return bad("NAME", name, "1 to 64 of A-Z a-z 0-9 . _ -");
  if (!prefixes_ok(prefixes))
    return bad("PREFIXES", prefixes,
               "* or a comma list of lock-name prefixes (1 to 200 of A-Z a-z 0-9 . _ : -)");
  if (!verbs_ok(vlist)) return bad("VERBS", vlist, "a comma list of lock, read, metrics, list, admin, each once");
  long lim[NLIMITS] = {0};
  for (int i = 5; i < argc; i++) {
    long v;
    int k = limit_parse(argv[i], &v);
    if (k < 0)
      return bad("limit", argv[i],
                 "max_leases=N, max_waiters=N or acquire_rate=N with N from 1 to 1000000000");
    if (lim[k]) return bad("limit", argv[i], "given twice");
    lim[k] = v;
  }

  unsigned char raw[TOKEN_BYTES], digest[32];
  char token[sizeof TOKEN_PREFIX + 2 * TOKEN_BYTES], digest_hex[2 * sizeof digest + 1];
  if (picket_proto_random(raw, sizeof raw) != 0) {
    fprintf(stderr, "picket: token new: getrandom failed\n");
    return CLI_EXIT_FAIL;
  }
  memcpy(token, TOKEN_PREFIX, strlen(TOKEN_PREFIX));
  hex(raw, sizeof raw, token + strlen(TOKEN_PREFIX));
  explicit_bzero(raw, sizeof raw);
  if (gnutls_hash_fast(GNUTLS_DIG_SHA256, token, strlen(token), digest) < 0) {
    explicit_bzero(token, sizeof token);
    fprintf(stderr, "picket: token new: SHA-256 failed\n");
    return CLI_EXIT_FAIL;
  }
  hex(digest, sizeof digest, digest_hex);
  printf("%s\n%s sha256:%s %s %s", token, name, digest_hex, prefixes, vlist);
  explicit_bzero(token, sizeof token);
  for (size_t k = 0; k < NLIMITS; k++)
    if (lim[k]) printf(" %s=%ld", limits[k], lim[k]);
  putchar('\n');
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
