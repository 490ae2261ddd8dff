/* Time of the CPU backend's all_finite, the NaN and Inf check the executor
 * runs on every tensor a stage sends, over COUNT floats (default: the
 * origin CNN's boundary tensor at micro-batch 16, 16 x 32 x 13 x 13). Prints
 * the best and the median of REPS calls on the same buffer (warm in cache,
 * as a tensor just written by the stage is).
 *
 *   bench_finite [COUNT] [REPS]
 *
 * Not a test: compare figures on a quiet machine, never assert on them. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/backend_cpu.h"
#include "bench_timing.h"

int main(int argc, char **argv) {
    long long count = 16LL * 32 * 13 * 13;
    int reps = 2000;
    if (bench_count_reps(argc, argv, "bench_finite", &count, &reps) != 0) return 2;
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    bg_backend_t *be = NULL;
    void *x = NULL;
    double *times = calloc((size_t)reps, sizeof *times);
    bg_status_t st = times != NULL ? bg_backend_cpu_create(&cfg, &be) : BG_ERR_NOMEM;
    if (st == BG_OK) st = bg_backend_alloc_elems(be, count, &x);
    int finite = 0;
    for (int r = 0; st == BG_OK && r < reps; r++) {
        double t0 = bg_monotonic_seconds();
        st = be->ops->all_finite(be, count, x, &finite);
        times[r] = bg_monotonic_seconds() - t0;
    }
    if (st == BG_OK) {
        qsort(times, (size_t)reps, sizeof *times, compare_doubles);
        printf("all_finite over %lld floats, %d calls: best %.2f us, median %.2f us (%.1f GB/s)\n",
               count, reps, 1e6 * times[0], 1e6 * times[reps / 2],
               4e-9 * (double)count / times[reps / 2]);
    } else {
        fprintf(stderr, "bench_finite: %s\n", bg_error_message());
    }
    if (be != NULL) be->ops->free(be, x);
    bg_backend_destroy(be);
    free(times);
    return st == BG_OK ? (finite ? 0 : 1) : 1;
}
