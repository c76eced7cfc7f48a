/* origin.c: a browser on the host is not a client (issue 39, item 3).
 *
 * Without --auth-file picketd trusts whoever reaches it, and on loopback it
 * even lets a caller break locks. A web page in the operator's browser
 * reaches loopback too: it may send a "simple" cross-site request (a form,
 * or fetch() with a text/plain body or none) without the browser asking
 * first, and with DNS rebinding (a name of the page's that it re-points at
 * 127.0.0.1) it may even read the replies, since to the browser they come
 * from the page's own origin. Three checks, made here once for every
 * request before any handler runs, close that:
 *
 * 1. Host: picketd answers only as the names it listens as. IP literals
 *    (rebinding needs a DNS name the attacker controls), localhost, the
 *    host of --listen when it is a name, and the names of --allowed-hosts.
 *    Anything else is 421 misdirected_request, on every path (the console
 *    too). By default (--allowed-hosts auto) the check is made only
 *    without --auth-file: with tokens every call that reads or changes
 *    anything needs a bearer token that a page on another origin does not
 *    have, and a picketd behind a DNS name keeps answering its clients and
 *    load balancers without a new flag.
 * 2. Origin and Sec-Fetch-Site: a state-changing call (any method but GET
 *    and HEAD) that a browser made for another origin is 403
 *    forbidden_origin. Browsers send Origin with every POST, and
 *    Sec-Fetch-Site with every request; curl and the clients send neither,
 *    and are unaffected.
 * 3. Content-Type: a state-changing call's body must be declared
 *    application/json (parameters allowed), else 415
 *    unsupported_media_type. JSON is the one body type a page cannot send
 *    cross-site without a CORS preflight, which picketd never answers; so
 *    even a browser that sent no Origin could not get a body through. A
 *    call with no body needs no Content-Type (curl -X POST .../break), but
 *    one that declares another type with an empty body (an empty form) is
 *    refused too.
 *
 * The checks read headers only: nothing is looked up, nothing is changed. */
#include "origin.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api_json.h"

#define HOSTS_MAX 64
#define HOST_NAME_MAX_LEN 253 /* a DNS name */

static int host_check;  /* 0: every Host is answered */
static int nnames;      /* names picketd answers as besides IP literals... */
static char names[HOSTS_MAX + 2][HOST_NAME_MAX_LEN + 1]; /* ...lowercase, no trailing dot */

/* 1 when s (NUL-terminated) is an IPv4 or IPv6 address literal. */
static int ip_literal(const char *s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* A name as it is compared: lowercase, without one trailing dot
 * ("LocalHost." is localhost). Returns its length, or 0 when it is empty,
 * too long or not made of DNS name bytes. */
static size_t name_norm(const char *s, size_t n, char out[HOST_NAME_MAX_LEN + 1]) {
  if (n > 0 && s[n - 1] == '.') n--;
  if (n == 0 || n > HOST_NAME_MAX_LEN) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
      return 0;
    out[i] = c;
  }
  out[n] = '\0';
  return n;
}

static int add_name(const char *s, size_t n) {
  if (nnames == HOSTS_MAX + 2 || name_norm(s, n, names[nnames]) == 0) return -1;
  nnames++;
  return 0;
}

int origin_init(const config *cfg, char *err, size_t errlen) {
  nnames = 0;
  const char *list = cfg->allowed_hosts;
  host_check = strcmp(list, "*") != 0 && (strcmp(list, "auto") != 0 || !cfg->auth_file[0]);
  add_name("localhost", 9);
  if (cfg->listen_host[0] && !ip_literal(cfg->listen_host))
    add_name(cfg->listen_host, strlen(cfg->listen_host)); /* a bad one fails to bind anyway */
  if (strcmp(list, "auto") == 0 || strcmp(list, "*") == 0) return 0;
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    if (n > 0 && add_name(p, n) < 0) {
      snprintf(err, errlen, "--allowed-hosts: '%.*s' is not a host name (or more than %d "
               "names); give auto, * or NAME[,NAME...]", (int)(n > 64 ? 64 : n), p, HOSTS_MAX);
      return -1;
    }
    p += n;
    if (*p == ',') p++;
  }
  return 0;
}

/* Whether picketd answers as the Host header value h: "name", "name:port",
 * "a.b.c.d[:port]" or "[v6][:port]". An absent Host (HTTP/1.0) names
 * nothing a page could have chosen. */
static int host_allowed(const char *h) {
  if (!host_check || h == NULL) return 1;
  size_t n = strlen(h);
  char host[HOST_NAME_MAX_LEN + 1];
  if (h[0] == '[') { /* an IPv6 literal, as URLs write it */
    const char *close = strchr(h, ']');
    if (close == NULL || (size_t)(close - h - 1) >= sizeof host) return 0;
    if (close[1] != '\0' && (close[1] != ':' || strspn(close + 2, "0123456789") != strlen(close + 2)))
      return 0;
    memcpy(host, h + 1, (size_t)(close - h - 1));
    host[close - h - 1] = '\0';
    unsigned char buf[16];
    return inet_pton(AF_INET6, host, buf) == 1;
  }
  const char *colon = strchr(h, ':');
  if (colon) {
    if (strchr(colon + 1, ':') || strspn(colon + 1, "0123456789") != strlen(colon + 1)) return 0;
    n = (size_t)(colon - h);
  }
  if (name_norm(h, n, host) == 0) return 0;
  if (ip_literal(host)) return 1;
  for (int i = 0; i < nnames; i++)
    if (strcmp(host, names[i]) == 0) return 1;
  return 0;
}

/* Whether Origin o is picketd's own as the request's Host names it:
 * "http://" or "https://" (a TLS proxy in front may change the scheme)
 * and then exactly the Host value. "null" (a sandboxed frame, a file) and
 * anything else are another origin. */
static int origin_own(const char *o, const char *host) {
  if (host == NULL) return 0;
  size_t skip = strncasecmp(o, "http://", 7) == 0 ? 7 : strncasecmp(o, "https://", 8) == 0 ? 8 : 0;
  return skip && strcasecmp(o + skip, host) == 0;
}

/* 1 when Content-Type ct is application/json, with or without parameters
 * ("application/json; charset=utf-8"). */
static int json_media(const char *ct) {
  static const char json[] = "application/json";
  ct += strspn(ct, " \t");
  if (strncasecmp(ct, json, sizeof json - 1) != 0) return 0;
  ct += sizeof json - 1;
  ct += strspn(ct, " \t");
  return *ct == '\0' || *ct == ';';
}

static int refuse(api_response *resp, picket_proto_err e, const char *fmt, const char *what) {
  char msg[400];
  snprintf(msg, sizeof msg, fmt, what);
  api_error(resp, e, msg);
  return -1;
}

int origin_check(const api_request *req, api_response *resp) {
  if (!host_allowed(req->host))
    return refuse(resp, PICKET_PROTO_ERR_MISDIRECTED_REQUEST,
                  "picketd does not answer as host '%.64s': only as its IP addresses, "
                  "localhost, the host of --listen and the names of --allowed-hosts (a web "
                  "page could point any other name at it: DNS rebinding)", req->host);
  if (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0) return 0;
  const char *site = req->sec_fetch_site;
  if (site && (strcasecmp(site, "cross-site") == 0 || strcasecmp(site, "same-site") == 0))
    return refuse(resp, PICKET_PROTO_ERR_FORBIDDEN_ORIGIN,
                  "a web page on another origin may not change anything here "
                  "(Sec-Fetch-Site: %.16s)", site);
  if (req->origin && !origin_own(req->origin, req->host))
    return refuse(resp, PICKET_PROTO_ERR_FORBIDDEN_ORIGIN,
                  "a web page on another origin may not change anything here (Origin: %.64s)",
                  req->origin);
  /* A declared type must be JSON: a form or text/plain is what a page can
   * send without asking. No Content-Type at all is taken as JSON, as
   * before: clients written against earlier picketd send none, and a
   * browser cannot send a body without one unless it also sends Origin
   * (every fetch or form other than GET/HEAD carries it), checked above. */
  const char *ct = req->content_type;
  if (ct != NULL && ct[0] && !json_media(ct))
    return refuse(resp, PICKET_PROTO_ERR_UNSUPPORTED_MEDIA_TYPE,
                  "a request body must be JSON sent with Content-Type: application/json "
                  "(curl: -H 'Content-Type: application/json'); this one was %.64s",
                  ct);
  return 0;
}
