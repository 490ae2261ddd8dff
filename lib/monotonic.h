/* The one clock brigade times with: CLOCK_MONOTONIC in seconds, for
 * durations and for placing GPU timings on the host's timeline; and the
 * stall timeouts' waits, measured on it too, so that a step of the wall
 * clock (NTP, a resumed virtual machine, date -s) neither ends a wait at
 * once nor stretches it. */
#ifndef BG_MONOTONIC_H
#define BG_MONOTONIC_H

#include <math.h>
#include <pthread.h>
#include <time.h>

static inline double bg_monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Initialises `cond` for pthread_cond_timedwait with deadlines from
 * bg_monotonic_deadline. */
static inline void bg_cond_init_monotonic(pthread_cond_t *cond) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

/* The CLOCK_MONOTONIC time `seconds` (>= 0) from now. */
static inline struct timespec bg_monotonic_deadline(double seconds) {
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    const double whole = floor(seconds);
    at.tv_sec += (time_t)whole;
    at.tv_nsec += (long)((seconds - whole) * 1e9);
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    return at;
}

#endif /* BG_MONOTONIC_H */
