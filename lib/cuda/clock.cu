/* Op timing on a CUDA backend's compute stream, and copy timing on its
 * copy streams, with CUDA events (backend_cuda.h, "Clocks"). */
#include <stdlib.h>

#include "backend_cuda.h"
#include "cuda_check.h"
#include "cuda_internal.h"
#include "monotonic.h"

extern "C" void bg_cuda_clock_destroy(bg_cuda_clock_t *clock) {
    if (clock == NULL) return;
    if (clock->marks != NULL && cudaSetDevice(clock->device) == cudaSuccess) {
        for (int i = 0; i < clock->capacity; i++)
            if (clock->marks[i] != NULL && cudaEventDestroy(clock->marks[i]) != cudaSuccess)
                (void)cudaGetLastError();
    } else {
        (void)cudaGetLastError();
    }
    free(clock->marks);
    free(clock);
}

extern "C" bg_status_t bg_cuda_clock_create(bg_backend_t *be, int lane, int capacity,
                                            bg_cuda_clock_t **out) {
    if (lane < BG_CUDA_CLOCK_COMPUTE || lane >= BG_CUDA_CLOCK_OUTGOING + BG_CUDA_LANES)
        return bg_error_set(BG_ERR_INTERNAL, "%s: no stream %d to put a clock on", be->name, lane);
    /* Mark 0 is the clock's zero: a clock holds at least that one. */
    if (capacity < 1)
        return bg_error_set(BG_ERR_INTERNAL, "%s: a clock of %d marks", be->name, capacity);
    bg_cuda_clock_t *clock = (bg_cuda_clock_t *)calloc(1, sizeof *clock);
    if (clock != NULL) clock->marks = (cudaEvent_t *)calloc((size_t)capacity, sizeof(cudaEvent_t));
    if (clock == NULL || clock->marks == NULL) {
        free(clock);
        return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for %d clock marks", be->name,
                            capacity);
    }
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    clock->be = be;
    clock->device = cu->device;
    clock->stream = lane == BG_CUDA_CLOCK_COMPUTE    ? cu->compute
                    : lane >= BG_CUDA_CLOCK_OUTGOING ? cu->copy_out[lane - BG_CUDA_CLOCK_OUTGOING]
                                                     : cu->copy_in[lane];
    clock->capacity = capacity;
    bg_status_t st = BG_OK;
    BG_CUDA_CHECK_GOTO(be, cudaSetDevice(cu->device), st, fail);
    for (int i = 0; i < capacity; i++)
        BG_CUDA_CHECK_GOTO(be, cudaEventCreate(&clock->marks[i]), st, fail);
    *out = clock;
    return BG_OK;
fail:
    bg_cuda_clock_destroy(clock);
    return st;
}

/* Records mark 0 on the idle stream and waits for it: *host_zero is the
 * middle of the host's window around the two, *window its width. */
static bg_status_t mark_zero(bg_cuda_clock_t *clock, double *host_zero, double *window) {
    bg_backend_t *be = clock->be;
    clock->count = 0;
    /* Recorded here rather than by bg_cuda_clock_mark, which drops CUDA's
     * error: a failure says which call failed and why. */
    const double before = bg_monotonic_seconds();
    BG_CUDA_CHECK(be, cudaEventRecord(clock->marks[0], clock->stream));
    clock->count = 1;
    BG_CUDA_CHECK(be, cudaEventSynchronize(clock->marks[0]));
    const double after = bg_monotonic_seconds();
    *host_zero = 0.5 * (before + after);
    *window = after - before;
    return BG_OK;
}

/* bg_cuda_clock_restart with the clock's GPU current. */
static bg_status_t restart_here(bg_cuda_clock_t *clock, double *host_zero) {
    /* Mark 0 stands for "now" only on an idle stream. */
    BG_CUDA_CHECK(clock->be, cudaStreamSynchronize(clock->stream));
    /* Each attempt records mark 0 again; the last one's window is kept,
     * however wide, after 8 (a machine that busy times nothing well). */
    double window = 0;
    for (int attempt = 0; attempt < 8 && (attempt == 0 || window > 20e-6); attempt++)
        BG_CHECK(mark_zero(clock, host_zero, &window));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_clock_restart(bg_cuda_clock_t *clock, double *host_zero) {
    bg_backend_t *be = clock->be;
    int caller = 0;
    BG_CUDA_CHECK(be, cudaGetDevice(&caller));
    BG_CUDA_CHECK(be, cudaSetDevice(bg_cuda_of(be)->device));
    const bg_status_t st = restart_here(clock, host_zero);
    /* The caller's GPU again, after a failure too (its message stays). */
    const cudaError_t back = cudaSetDevice(caller);
    if (back != cudaSuccess) {
        (void)cudaGetLastError();
        if (st == BG_OK) return bg_cuda_fail(be, back, "cudaSetDevice(caller)", __FILE__, __LINE__);
    }
    return st;
}

extern "C" int bg_cuda_clock_mark(bg_cuda_clock_t *clock) {
    if (clock->count >= clock->capacity) return -1;
    bg_cuda_backend_t *cu = bg_cuda_of(clock->be);
    if (cudaSetDevice(cu->device) != cudaSuccess ||
        cudaEventRecord(clock->marks[clock->count], clock->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return clock->count++;
}

extern "C" bg_status_t bg_cuda_clock_seconds(bg_cuda_clock_t *clock, int index, double *out) {
    bg_backend_t *be = clock->be;
    if (index < 0 || index >= clock->count)
        return bg_error_set(BG_ERR_INTERNAL, "%s: no clock mark %d (%d recorded)", be->name, index,
                            clock->count);
    float ms = 0;
    /* Called from the pipeline's main thread for each GPU in turn. */
    BG_CUDA_CHECK(be, cudaSetDevice(bg_cuda_of(be)->device));
    BG_CUDA_CHECK(be, cudaEventSynchronize(clock->marks[index]));
    BG_CUDA_CHECK(be, cudaEventElapsedTime(&ms, clock->marks[0], clock->marks[index]));
    *out = 1e-3 * (double)ms;
    return BG_OK;
}
