/* What the benchmarks share: a monotonic clock and the comparison that
 * qsort needs to take a median. */
#ifndef BG_BENCH_TIMING_H
#define BG_BENCH_TIMING_H

#include <time.h>

/* Monotonic seconds. */
static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Ascending order of doubles, for qsort. */
static inline int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif /* BG_BENCH_TIMING_H */
