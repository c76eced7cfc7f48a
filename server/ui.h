/* ui.h: the web console's static files (server/ui/), served at /ui/. */
#ifndef PICKETD_UI_H
#define PICKETD_UI_H

#include "api_types.h"

/* 1 when `path` (as received, no query) is the console's: "/ui" or
 * anything under "/ui/". */
int ui_owns(const char *path);

/* Answers a request for a path ui_owns: the file (200; "/ui" and "/ui/"
 * are the page), 404 not_found or 405 method_not_allowed, every one with
 * the console's security headers. No token is needed: the files
 * are the same for everyone, and the API calls they make carry the token.
 * Fills *resp (its body is malloc'd: api_response_free) and returns
 * API_DONE. */
api_result ui_serve(const api_request *req, api_response *resp);

#endif
