/* The one clock brigade times with: CLOCK_MONOTONIC in seconds, for
 * durations and for placing GPU timings on the host's timeline. */
#ifndef BG_MONOTONIC_H
#define BG_MONOTONIC_H

#include <time.h>

static inline double bg_monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* BG_MONOTONIC_H */
