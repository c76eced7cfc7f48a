/* sweep.h: keeps the store's index of held names the size
 * of what is held, with a background pass over it. */
#ifndef PICKETD_SWEEP_H
#define PICKETD_SWEEP_H

#include "config.h"

/* Starts the sweeping thread: 0, or -1 (errno set). */
int sweep_start(const config *cfg);
/* Stops it and waits for it (a pass in flight ends first). */
void sweep_stop(void);

#endif
