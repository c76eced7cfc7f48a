/* origin.h: which requests a browser on the host could have sent on a web
 * page's behalf, refused before any handler runs (origin.c says why and
 * how). */
#ifndef PICKETD_ORIGIN_H
#define PICKETD_ORIGIN_H

#include "api_types.h"
#include "config.h"

/* Reads --allowed-hosts, --listen and --auth-file from cfg (kept: it must
 * outlive every call). Returns 0, or -1 with a one-line message in err
 * (a bad --allowed-hosts list). */
int origin_init(const config *cfg, char *err, size_t errlen);

/* 0 when the request may go on to its handler; -1 with *resp filled when
 * it is refused: 421 misdirected_request (a Host picketd does not answer
 * as), 403 forbidden_origin (a state-changing call from another origin),
 * 415 unsupported_media_type (a state-changing call whose body is not
 * declared application/json). Changes nothing else. */
int origin_check(const api_request *req, api_response *resp);

#endif
