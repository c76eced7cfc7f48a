/* api_family.h: the kinds of named thing the lease endpoints serve: locks
 * (/v1/locks/), semaphores (/v1/semaphores/), read/write locks
 * (/v1/rwlocks/) and elections (/v1/elections/, a lock with a value whose
 * fence is the term: docs/elections.md). Their calls follow one path through api.c (check, one
 * store call, outcome, wait); what sets a family apart is one row here:
 * its path and bounds, its own acquire members, its store calls and its
 * replies. A new primitive is a new row, and its endpoints rows of the
 * route table (routes.c), not branches in api.c. */
#ifndef PICKETD_API_FAMILY_H
#define PICKETD_API_FAMILY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api_types.h"

struct api_family {
  const char *prefix;         /* the path prefix, "/v1/semaphores/" */
  const char *noun;           /* the replies' name member, "semaphore" */
  const char *key_prefix;     /* of call->key (waiters' queue, release message) */
  const char *store_prefix;   /* of the name the store keeps it under (call->store_name) */
  const char *actions[3];     /* the path's action for an acquire, renew, release (its
                                 routes are routes.c's rows; these name them in a 404) */
  const char *released;       /* a release's 200 says this is true */
  int values;                 /* its leases carry a value (acquire's `value`, proclaim) */
  size_t name_max;            /* names are at most this long... */
  const char *name_why;       /* ...and the 400 says why, when shorter than a lock's */
  store_op_kind kind;         /* its acquire's STORE_OP_*; the others follow */
  const char *const *fields;  /* the members an acquire body may have */
  /* Reads the family's own acquire members (a limit, a mode) from body
   * into call: 0, or -1 with a 400 in *resp. */
  int (*acquire_args)(json_t *body, api_call *call, api_response *resp);
  /* The 200 of a grant (renewal 0) or a renewal (1), from call->op.r. */
  void (*grant)(api_response *resp, const api_call *call, int renewal);
  /* The 409 of an acquire that found it taken (call->held_*): retry in ms.
   * Counts the outcome in picket_acquire_total. */
  void (*taken)(api_response *resp, const api_call *call, int64_t ms);
  /* The 200 of a GET, from call->op.r, which it clears. */
  void (*inspect)(api_response *resp, api_call *call);
  /* How many holders a GET lists at most (call->limit of the inspect). */
  int64_t (*inspect_max)(void);
};

void api_family_init(const config *cfg);
/* Reads an election's `value` (required: it must be there, maybe null)
 * into call->value and has_value: 0, or -1 with a 400 in *resp. */
int api_family_value(json_t *body, int required, api_call *call, api_response *resp);
/* An election's `leader` member from an inspect's result: null when no
 * lease is live, else {term, value, owner, since, ttl_ms}. */
json_t *api_family_leader(const store_result *r);
/* The family whose prefix path starts with, or NULL. */
const api_family *api_family_of(const char *path);

#endif
