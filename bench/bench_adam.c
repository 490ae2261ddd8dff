/* What subnormal floats cost the CPU backend's Adam update, over COUNT
 * parameters (default: the origin CNN's dense layers, 5408 x 128 + 128 +
 * 128 x 10 + 10), each call with a zero gradient from a fresh m:
 *   - m normal (1e-3): the update's usual speed;
 *   - m subnormal (1e-39), flushed: as the backend runs it (on this thread
 *     the upload's conversion to float already gives 0, as the update's
 *     own arithmetic would: DAZ and FTZ);
 *   - m subnormal, kept: this thread's flush turned off for the calls, as
 *     the backend ran before it flushed (docs/training.md, "Subnormal
 *     floats"); x86 only.
 * Prints the median of REPS calls of each. m is uploaded again before each
 * call, outside the timing: a kept subnormal m decays to 0 within 140 steps.
 *
 *   bench_adam [COUNT] [REPS]
 *
 * Not a test: compare figures on a quiet machine, never assert on them. */
#include <stdio.h>
#include <stdlib.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "cpu/backend_cpu.h"
#include "optimizer.h"
#include "bench_timing.h"

typedef struct buffers {
    void *param, *grad, *state[2];
    double *host_m;
} buffers_t;

/* The median seconds of `reps` updates, each from m = `m0`. */
static bg_status_t time_updates(bg_backend_t *be, buffers_t *b, long long count, int reps,
                                double m0, double *times, double *median) {
    const bg_optimizer_config_t cfg = BG_OPTIMIZER_CONFIG_INIT; /* Adam, PyTorch's defaults */
    for (long long i = 0; i < count; i++) b->host_m[i] = m0;
    for (int r = 0; r < reps; r++) {
        BG_CHECK(bg_backend_upload_doubles(be, b->state[0], b->host_m, count));
        const double t0 = bg_monotonic_seconds();
        BG_CHECK(bg_optimizer_update(&cfg, be, 2, count, b->param, b->grad, b->state));
        times[r] = bg_monotonic_seconds() - t0;
    }
    qsort(times, (size_t)reps, sizeof *times, compare_doubles);
    *median = times[reps / 2];
    return BG_OK;
}

int main(int argc, char **argv) {
    long long count = 5408LL * 128 + 128 + 128 * 10 + 10;
    int reps = 200;
    if (bench_count_reps(argc, argv, "bench_adam", &count, &reps) != 0) return 2;
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    bg_backend_t *be = NULL;
    buffers_t b = {.host_m = malloc(sizeof(double) * (size_t)count)};
    double *times = calloc((size_t)reps, sizeof *times);
    bg_status_t st =
        times != NULL && b.host_m != NULL ? bg_backend_cpu_create(&cfg, &be) : BG_ERR_NOMEM;
    /* Parameters and v of 1, gradients of 0 (the backend zeroes them). */
    if (st == BG_OK) st = bg_backend_alloc_elems(be, count, &b.param);
    if (st == BG_OK) st = bg_backend_alloc_elems(be, count, &b.grad);
    for (int i = 0; i < 2 && st == BG_OK; i++) st = bg_backend_alloc_elems(be, count, &b.state[i]);
    for (long long i = 0; st == BG_OK && i < count; i++) b.host_m[i] = 1;
    if (st == BG_OK) st = bg_backend_upload_doubles(be, b.param, b.host_m, count);
    if (st == BG_OK) st = bg_backend_upload_doubles(be, b.state[1], b.host_m, count);
    double normal = 0, flushed = 0, kept = 0;
    if (st == BG_OK) st = time_updates(be, &b, count, reps, 1e-3, times, &normal);
    if (st == BG_OK) st = time_updates(be, &b, count, reps, 1e-39, times, &flushed);
#if defined(__SSE__)
    if (st == BG_OK) {
        const unsigned int mode = _mm_getcsr();
        _mm_setcsr(mode & ~0x8040u); /* FTZ and DAZ off */
        st = time_updates(be, &b, count, reps, 1e-39, times, &kept);
        _mm_setcsr(mode);
    }
#endif
    if (st == BG_OK) {
        printf("adam_update over %lld floats, median of %d calls:\n", count, reps);
        printf("  m normal                        %9.1f us\n", 1e6 * normal);
        printf("  m subnormal, flushed (default)  %9.1f us  (%.2fx normal)\n", 1e6 * flushed,
               flushed / normal);
        if (kept > 0)
            printf("  m subnormal, kept               %9.1f us  (%.2fx normal)\n", 1e6 * kept,
                   kept / normal);
        else
            printf("  m subnormal, kept               not timed (x86 only)\n");
    } else {
        fprintf(stderr, "bench_adam: %s\n", bg_error_message());
    }
    if (be != NULL) {
        be->ops->free(be, b.param);
        be->ops->free(be, b.grad);
        be->ops->free(be, b.state[0]);
        be->ops->free(be, b.state[1]);
    }
    bg_backend_destroy(be);
    free(b.host_m);
    free(times);
    return st == BG_OK ? 0 : 1;
}
