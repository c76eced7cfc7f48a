/* holds.h: how long locks are held, for alerts: the hold-time histogram
 * per outcome, the oldest hold this picketd has seen renewed, and the
 * most waiters on one name (no lock names: holds.c). api.c reports each lock's renewals and
 * ends; holds.c renders the families at every scrape. */
#ifndef PICKETD_HOLDS_H
#define PICKETD_HOLDS_H

#include <stdint.h>

typedef enum { HOLD_RELEASED, HOLD_BROKEN, HOLD_LOST, HOLD_OUTCOMES } hold_outcome;

/* Registers the metric families (before the HTTP server starts). */
void holds_init(void);
/* A renewal of lock `key` granted at at_ms (the store's clock, ms since the
 * epoch; 0: unknown, ignored) that now runs until until_ms. */
void holds_renewed(const char *key, int64_t at_ms, int64_t until_ms);
/* Lock `key`'s lease ended: released, broken, or found lost by its
 * holder's renew or release. at_ms as above; 0 takes the grant time last
 * seen renewed, if any. */
void holds_ended(const char *key, int64_t at_ms, hold_outcome how);

/* Lock `key` is no longer held, and another picketd counted its end (a
 * break): only the oldest-hold table forgets it. */
void holds_forget(const char *key);

#endif
