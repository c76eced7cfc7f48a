/* tls.c: picketd's TLS (see tls.h), on GnuTLS, which libmicrohttpd uses.
 *
 * Credentials come in generations: one certificate chain, its private key
 * and (with --tls-client-ca) a trust list of client CAs, read and checked
 * together. libmicrohttpd is given no certificate of its own, only a
 * certificate callback (MHD_OPTION_HTTPS_CERT_CALLBACK) that hands each
 * handshake the current generation; a SIGHUP builds a new generation and
 * swaps the pointer, so new handshakes get the new certificate while open
 * connections carry on untouched. A generation whose files do not all
 * parse, or whose key is not the certificate's, is never installed.
 *
 * When is an old generation freed? GnuTLS keeps no reference of its own
 * to what the callback returns (it is ours to keep alive), and uses it
 * while it writes the server's first flight (certificate, signature)
 * right after the callback, on the loop thread that runs the handshake;
 * a client certificate is checked against the trust list in one call of
 * tls_peer_refused. libmicrohttpd gives us no "handshake done" hook to
 * count users with, so instead a replaced generation is retired, and
 * freed by a later reload only once it has been retired longer than
 * RETIRE_GRACE_MS: far longer than any of those uses take. Freeing it at
 * the very next reload would race with a handshake when two SIGHUPs come
 * close together; keeping every one forever would grow with each reload.
 *
 * Mutual TLS. libmicrohttpd asks for a client certificate only when it
 * is given a trust (MHD_OPTION_HTTPS_MEM_TRUST) and never verifies it;
 * we give it the client CA as read at startup (so the certificate request
 * names those CAs) and verify the peer's chain ourselves, on every
 * request, against the current generation's trust list: a reloaded CA
 * applies at once, to open connections too. Refusing a request with 401
 * rather than failing the handshake gives the client a reason it can
 * read (a handshake alert says only "certificate required"). */
#include "tls.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"

#define CHAIN_MAX 16               /* certificates in --tls-cert, and in a client's chain */
#define FILE_MAX (1024 * 1024)     /* a PEM file larger than this is not one */
#define RETIRE_GRACE_MS (60 * 1000)

/* TLS 1.2 and 1.3 only, GnuTLS's NORMAL choice of ciphers within them. */
static const char priorities[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";

static const char msg_no_cert[] =
    "a client certificate signed by the configured CA is required (--tls-client-ca)";
static const char msg_untrusted[] =
    "a client certificate signed by the configured CA is required (--tls-client-ca); the one "
    "presented is not signed by it, is not valid now, or is not for client authentication";

typedef struct tls_gen {
  gnutls_pcert_st chain[CHAIN_MAX];
  unsigned nchain;
  gnutls_privkey_t key;
  gnutls_x509_trust_list_t trust; /* NULL without --tls-client-ca */
  int64_t retired_ms;             /* when a newer one replaced it */
  struct tls_gen *next;           /* in `retired` */
} tls_gen;

static const config *cfg;
static _Atomic(tls_gen *) current; /* NULL: TLS off */
static tls_gen *retired;            /* only the main thread touches it */
static char *client_ca_pem;         /* --tls-client-ca as read at startup, for libmicrohttpd */
static struct MHD_OptionItem mhd_opts[4] = {{MHD_OPTION_END, 0, NULL}};

static int fail(char *err, size_t errlen, const char *flag, const char *path, const char *why) {
  snprintf(err, errlen, "--%s %s: %s", flag, path, why);
  return -1;
}

/* Reads a whole file into d (freed with file_free, which wipes it first:
 * it may be a private key). */
static int file_read(const char *flag, const char *path, gnutls_datum_t *d, char *err,
                     size_t errlen) {
  d->data = NULL;
  d->size = 0;
  FILE *f = fopen(path, "rb");
  if (f == NULL) return fail(err, errlen, flag, path, strerror(errno));
  unsigned char *buf = malloc(FILE_MAX + 1);
  size_t n = buf ? fread(buf, 1, FILE_MAX + 1, f) : 0;
  int bad = buf == NULL || ferror(f);
  fclose(f);
  if (bad || n == 0 || n > FILE_MAX) {
    if (buf) gnutls_memset(buf, 0, n);
    free(buf);
    return fail(err, errlen, flag, path,
                buf == NULL ? "out of memory"
                : bad       ? "cannot read it"
                : n == 0    ? "the file is empty"
                            : "larger than 1 MiB: not a PEM file");
  }
  buf[n] = '\0'; /* so a CA bundle can also be handed over as a C string */
  d->data = buf;
  d->size = (unsigned)n;
  return 0;
}

static void file_free(gnutls_datum_t *d) {
  if (d->data) gnutls_memset(d->data, 0, d->size);
  free(d->data);
  d->data = NULL;
}

static void gen_free(tls_gen *g) {
  if (g == NULL) return;
  for (unsigned i = 0; i < g->nchain; i++) gnutls_pcert_deinit(&g->chain[i]);
  if (g->key) gnutls_privkey_deinit(g->key);
  if (g->trust) gnutls_x509_trust_list_deinit(g->trust, 1);
  free(g);
}

/* 1 when the private key is the one of the chain's first certificate: a
 * pair that does not match would fail every handshake after a reload. */
static int key_matches(const tls_gen *g) {
  gnutls_pubkey_t pub = NULL;
  gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
  int ok = gnutls_pubkey_init(&pub) == 0 && gnutls_pubkey_import_privkey(pub, g->key, 0, 0) == 0 &&
           gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a) == 0 &&
           gnutls_pubkey_export2(g->chain[0].pubkey, GNUTLS_X509_FMT_DER, &b) == 0 &&
           a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
  gnutls_free(a.data);
  gnutls_free(b.data);
  if (pub) gnutls_pubkey_deinit(pub);
  return ok;
}

/* Reads the three files into a new generation; on startup (`first`) also
 * keeps the client CA's text for libmicrohttpd. NULL with why in err. */
static tls_gen *gen_load(int first, char *err, size_t errlen) {
  tls_gen *g = calloc(1, sizeof *g);
  gnutls_datum_t d;
  int rc;
  if (g == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (file_read("tls-cert", cfg->tls_cert, &d, err, errlen) < 0) goto bad;
  g->nchain = CHAIN_MAX;
  rc = gnutls_pcert_list_import_x509_raw(g->chain, &g->nchain, &d, GNUTLS_X509_FMT_PEM,
                                         GNUTLS_X509_CRT_LIST_FAIL_IF_UNSORTED);
  file_free(&d);
  if (rc < 0 || g->nchain == 0) {
    g->nchain = 0;
    char why[200];
    snprintf(why, sizeof why, "not a PEM certificate chain (leaf first): %s", gnutls_strerror(rc));
    fail(err, errlen, "tls-cert", cfg->tls_cert, why);
    goto bad;
  }

  if (file_read("tls-key", cfg->tls_key, &d, err, errlen) < 0) goto bad;
  rc = gnutls_privkey_init(&g->key);
  if (rc == 0) rc = gnutls_privkey_import_x509_raw(g->key, &d, GNUTLS_X509_FMT_PEM, NULL, 0);
  file_free(&d);
  if (rc < 0) {
    char why[200];
    snprintf(why, sizeof why, "not an unencrypted PEM private key: %s", gnutls_strerror(rc));
    fail(err, errlen, "tls-key", cfg->tls_key, why);
    goto bad;
  }
  if (!key_matches(g)) {
    char why[600];
    snprintf(why, sizeof why, "this key does not belong to the certificate in %.500s",
             cfg->tls_cert);
    fail(err, errlen, "tls-key", cfg->tls_key, why);
    goto bad;
  }

  if (cfg->tls_client_ca[0]) {
    if (file_read("tls-client-ca", cfg->tls_client_ca, &d, err, errlen) < 0) goto bad;
    rc = gnutls_x509_trust_list_init(&g->trust, 0);
    if (rc == 0) rc = gnutls_x509_trust_list_add_trust_mem(g->trust, &d, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
    if (rc <= 0) {
      file_free(&d);
      char why[200];
      snprintf(why, sizeof why, "no PEM CA certificate in it%s%s", rc < 0 ? ": " : "",
               rc < 0 ? gnutls_strerror(rc) : "");
      fail(err, errlen, "tls-client-ca", cfg->tls_client_ca, why);
      goto bad;
    }
    if (first) {
      client_ca_pem = (char *)d.data; /* a CA bundle is no secret: kept as it is */
      d.data = NULL;
    }
    file_free(&d);
  }
  return g;
bad:
  gen_free(g);
  return NULL;
}

/* "CN=picketd.example (expires 2026-01-31)", for the log. */
static void gen_describe(const tls_gen *g, char *out, size_t cap) {
  gnutls_x509_crt_t crt = NULL;
  gnutls_datum_t dn = {NULL, 0};
  char when[32] = "?";
  if (gnutls_x509_crt_init(&crt) == 0 &&
      gnutls_x509_crt_import(crt, &g->chain[0].cert, GNUTLS_X509_FMT_DER) == 0) {
    gnutls_x509_crt_get_dn3(crt, &dn, 0);
    time_t t = gnutls_x509_crt_get_expiration_time(crt);
    struct tm tm;
    if (t != (time_t)-1 && gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    if (t != (time_t)-1 && t < time(NULL))
      LOG(LOG_WARN, "TLS: the certificate in %s expired at %s", cfg->tls_cert, when);
  }
  snprintf(out, cap, "%.300s (expires %s)", dn.data ? (const char *)dn.data : "?", when);
  gnutls_free(dn.data);
  if (crt) gnutls_x509_crt_deinit(crt);
}

static void log_serving(const tls_gen *g, const char *what) {
  char desc[400];
  gen_describe(g, desc, sizeof desc);
  LOG(LOG_INFO, "TLS %s: serving %s from %s%s%s", what, desc, cfg->tls_cert,
      cfg->tls_client_ca[0] ? "; client certificates must be signed by a CA in " : "",
      cfg->tls_client_ca);
}

/* libmicrohttpd's certificate callback: every handshake gets the current
 * generation's chain and key (GnuTLS does not free them). */
static int retrieve_cert(gnutls_session_t s, const gnutls_datum_t *req_ca_rdn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                         gnutls_pcert_st **pcert, unsigned int *pcert_length,
                         gnutls_privkey_t *privkey) {
  tls_gen *g = atomic_load_explicit(&current, memory_order_acquire);
  if (g == NULL) return -1;
  *pcert = g->chain;
  *pcert_length = g->nchain;
  *privkey = g->key;
  return 0;
}

int tls_init(const config *c, char *err, size_t errlen) {
  cfg = c;
  if (cfg->tls_cert[0] == '\0') return 0;
  tls_gen *g = gen_load(1, err, errlen);
  if (g == NULL) return -1;
  atomic_store(&current, g);
  int i = 0;
  mhd_opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)retrieve_cert};
  mhd_opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)priorities};
  if (client_ca_pem)
    mhd_opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, client_ca_pem};
  mhd_opts[i] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  log_serving(g, "on");
  return 0;
}

int tls_enabled(void) { return atomic_load(&current) != NULL; }

struct MHD_OptionItem *tls_mhd_options(void) { return mhd_opts; }

void tls_reload(void) {
  if (!tls_enabled()) return;
  char err[1200];
  tls_gen *g = gen_load(0, err, sizeof err);
  if (g == NULL) {
    metrics_inc(M_TLS_RELOAD_FAILED);
    LOG(LOG_WARN, "SIGHUP: TLS files not reloaded, keeping the previous ones: %s", err);
    return;
  }
  int64_t now = clock_mono_ms();
  tls_gen *old = atomic_exchange_explicit(&current, g, memory_order_acq_rel);
  old->retired_ms = now;
  old->next = retired;
  retired = old;
  /* Free what has been retired long enough (see the top of the file). */
  for (tls_gen **p = &retired; *p;) {
    tls_gen *r = *p;
    if (now - r->retired_ms > RETIRE_GRACE_MS) {
      *p = r->next;
      gen_free(r);
    } else {
      p = &r->next;
    }
  }
  metrics_inc(M_TLS_RELOAD_OK);
  log_serving(g, "reloaded on SIGHUP");
}

const char *tls_peer_refused(struct MHD_Connection *conn) {
  if (cfg == NULL || cfg->tls_client_ca[0] == '\0') return NULL;
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  gnutls_session_t s = ci ? (gnutls_session_t)ci->tls_session : NULL;
  unsigned n = 0;
  const gnutls_datum_t *peers = s ? gnutls_certificate_get_peers(s, &n) : NULL;
  if (peers == NULL || n == 0) {
    metrics_inc(M_TLS_REFUSED_NO_CERT);
    return msg_no_cert;
  }
  gnutls_x509_crt_t crts[CHAIN_MAX];
  unsigned got = 0;
  int ok = n <= CHAIN_MAX;
  for (; ok && got < n; got++) {
    if (gnutls_x509_crt_init(&crts[got]) < 0) break;
    ok = gnutls_x509_crt_import(crts[got], &peers[got], GNUTLS_X509_FMT_DER) == 0;
  }
  unsigned status = 0;
  if (ok && got == n) {
    /* A chain the client sends leaf first; the purpose check refuses a
     * certificate whose extended key usage excludes client auth. */
    gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID,
                                     (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};
    tls_gen *g = atomic_load_explicit(&current, memory_order_acquire);
    ok = gnutls_x509_trust_list_verify_crt2(g->trust, crts, n, &purpose, 1, 0, &status, NULL) == 0 &&
         status == 0;
  }
  for (unsigned i = 0; i < got; i++) gnutls_x509_crt_deinit(crts[i]);
  if (ok) return NULL;
  metrics_inc(M_TLS_REFUSED_UNTRUSTED);
  LOG(LOG_DEBUG, "TLS: a client certificate was refused (verification status 0x%x)", status);
  return msg_untrusted;
}

void tls_stop(void) {
  gen_free(atomic_exchange(&current, NULL));
  while (retired) {
    tls_gen *r = retired;
    retired = r->next;
    gen_free(r);
  }
  free(client_ca_pem);
  client_ca_pem = NULL;
  mhd_opts[0] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
}
