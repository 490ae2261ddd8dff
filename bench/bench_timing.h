/* What the benchmarks share: the comparison that qsort needs to take a
 * median, and the reading of [COUNT] [REPS]; they time with
 * bg_monotonic_seconds (lib/monotonic.h). */
#ifndef BG_BENCH_TIMING_H
#define BG_BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>

#include "monotonic.h"

/* Ascending order of doubles, for qsort. */
static inline int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Reads a benchmark's optional arguments [COUNT] [REPS] over the defaults
 * in *count and *reps. 0, or 2 (the exit status) after printing the usage
 * when they are not two positive numbers at most. */
static inline int bench_count_reps(int argc, char **argv, const char *name, long long *count,
                                   int *reps) {
    if (argc > 1) *count = atoll(argv[1]);
    if (argc > 2) *reps = atoi(argv[2]);
    if (argc <= 3 && *count >= 1 && *reps >= 1) return 0;
    fprintf(stderr, "usage: %s [COUNT >= 1] [REPS >= 1]\n", name);
    return 2;
}

#endif /* BG_BENCH_TIMING_H */
