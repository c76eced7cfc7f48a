/* tls.h: picketd's TLS (--tls-cert, --tls-key, --tls-client-ca): the
 * credentials every handshake is served, their reload on SIGHUP, and the
 * check of a client's certificate under mutual TLS. http.c asks for the
 * libmicrohttpd options and, on each request's first call, whether its
 * peer is refused; nothing else in picketd knows TLS exists. */
#ifndef PICKETD_TLS_H
#define PICKETD_TLS_H

#include <microhttpd.h>
#include <stddef.h>

#include "config.h"

/* Reads and checks the files named by the config (certificate chain, its
 * key, and the client CA bundle if any). Without --tls-cert it does nothing
 * and TLS stays off. Returns 0, or -1 with a one-line message in err that
 * names the file and why (never its contents); the caller exits 2. `cfg`
 * must outlive everything here (tls_reload reads the same paths). */
int tls_init(const config *cfg, char *err, size_t errlen);

/* 1 when picketd serves HTTPS (then every daemon gets MHD_USE_TLS). */
int tls_enabled(void);

/* The libmicrohttpd options of a TLS daemon, for MHD_OPTION_ARRAY: the
 * certificate callback, the priorities and, with --tls-client-ca, the
 * trust that makes libmicrohttpd ask for a client certificate. Only
 * MHD_OPTION_END when TLS is off. Valid until tls_stop. */
struct MHD_OptionItem *tls_mhd_options(void);

/* SIGHUP: reads the files again. If they all parse (and the key matches
 * the certificate), new handshakes get the new credentials and new
 * requests are checked against the new client CA; open connections are
 * not dropped. Otherwise the old ones stay and one line says which file
 * and why. Does nothing when TLS is off. Called from the main thread. */
void tls_reload(void);

/* The challenge a 401 of tls_peer_refused carries (RFC 9110 11.6.1: every
 * 401 has one). No registered HTTP scheme stands for a TLS client
 * certificate, and no Authorization header answers it: it names what is
 * missing, a certificate at the handshake (proto/openapi.yaml). */
#define TLS_CHALLENGE "Mutual-TLS realm=\"picket\""
/* Under --tls-client-ca: NULL when the request's connection presented a
 * certificate chain that verifies against the client CA (for TLS client
 * authentication, valid now), else the message of the 401 to send (a
 * static string). NULL whenever mutual TLS is off. Counts refusals in
 * picket_tls_refused_total. Called on a loop's thread. */
const char *tls_peer_refused(struct MHD_Connection *conn);

/* Frees every credential (after the daemons have stopped). */
void tls_stop(void);

#endif
