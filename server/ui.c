/* ui.c: serves the web console, the static files of server/ui/
 * (index.html, app.js, style.css, favicon.svg), at /ui/.
 *
 * The files are embedded at build time (proto/embed.cmake, as the
 * store's scripts are), so picketd serves the very bytes of the source tree, needs
 * no files at run time and no network (no CDN). The console speaks only
 * the public API, with the token its user pastes, so this file knows
 * nothing of locks or tokens: it maps a path to a file and adds the headers
 * that keep a browser strict with it: a Content-Security-Policy that
 * allows only the console's own script, style and API calls (no inline
 * script, no eval, no framing), nosniff, no Referer, and no-cache so an
 * upgraded picketd is never run with a stale app.js. */
#include "ui.h"

#include <stdlib.h>
#include <string.h>

#include "api_json.h"

/* Generated from server/ui/ by proto/embed.cmake (server/CMakeLists.txt). */
extern const char picketd_ui_index_html[], picketd_ui_app_js[], picketd_ui_style_css[],
    picketd_ui_favicon_svg[];
extern const size_t picketd_ui_index_html_len, picketd_ui_app_js_len, picketd_ui_style_css_len,
    picketd_ui_favicon_svg_len;

/* Sent with every reply under /ui/ (errors too). */
static const char *const security_headers[] = {
    "Content-Security-Policy",
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options", "nosniff",
    "Referrer-Policy", "no-referrer",
    "Cache-Control", "no-cache",
    NULL};

static const struct {
  const char *path, *type;
  const char *data;
  const size_t *len;
} files[] = {
    /* "/ui" is the page too, rather than a redirect: the page names its
     * files by absolute paths (as it does the API's), so both work. */
    {"/ui", "text/html; charset=utf-8", picketd_ui_index_html, &picketd_ui_index_html_len},
    {"/ui/", "text/html; charset=utf-8", picketd_ui_index_html, &picketd_ui_index_html_len},
    /* text/javascript: the type RFC 9239 names for JavaScript */
    {"/ui/app.js", "text/javascript; charset=utf-8", picketd_ui_app_js, &picketd_ui_app_js_len},
    {"/ui/style.css", "text/css; charset=utf-8", picketd_ui_style_css, &picketd_ui_style_css_len},
    /* the page names it, so the browser does not ask for /favicon.ico (a 404) */
    {"/ui/favicon.svg", "image/svg+xml", picketd_ui_favicon_svg, &picketd_ui_favicon_svg_len},
};

int ui_owns(const char *path) {
  return strncmp(path, "/ui", 3) == 0 && (path[3] == '\0' || path[3] == '/');
}

/* A copy of an embedded file as the body (libmicrohttpd frees it). */
static void reply(api_response *resp, const char *type, const char *data, size_t len) {
  char *copy = malloc(len ? len : 1);
  if (copy == NULL) {
    api_error(resp, PICKET_PROTO_ERR_INTERNAL, "out of memory");
    return;
  }
  memcpy(copy, data, len);
  resp->status = 200;
  resp->content_type = type;
  resp->body = copy;
  resp->body_len = len;
}

api_result ui_serve(const api_request *req, api_response *resp) {
  resp->endpoint = EP_UI;
  resp->extra_headers = security_headers;
  size_t i = 0;
  while (i < sizeof files / sizeof files[0] && strcmp(req->path, files[i].path) != 0) i++;
  /* As everywhere in the API: an unknown path is 404 whatever the method,
   * a known one with another method 405. */
  if (i == sizeof files / sizeof files[0]) {
    api_error(resp, PICKET_PROTO_ERR_NOT_FOUND,
              "no such file of the console; it is /ui/, /ui/app.js, /ui/style.css and "
              "/ui/favicon.svg");
  } else if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
    resp->allow = "GET, HEAD";
    api_error(resp, PICKET_PROTO_ERR_METHOD_NOT_ALLOWED, "method not allowed; use GET, HEAD");
  } else {
    reply(resp, files[i].type, files[i].data, *files[i].len);
  }
  return API_DONE;
}
