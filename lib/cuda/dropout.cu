/* Dropout: the CPU's loop body (lib/cpu/kernels.inc) over a grid-stride
 * loop, with the mask of lib/dropout.h. Its one product per value is
 * exact IEEE arithmetic on both, so a GPU keeps and scales the very values
 * a CPU does, to the bit. */
#include "../dropout.h"
#include "cuda_internal.h"

/* x, y: (count), the values from number `first` of the mini-batch on; may
 * alias */
__global__ static void dropout_kernel(uint64_t key, uint64_t first, uint32_t threshold, float scale,
                                      float *y, const float *x, int64_t count) {
    BG_CUDA_GRID_LOOP(i, count) {
        const int keep = bg_dropout_keeps(key, first + (uint64_t)i, threshold);
        y[i] = x[i] * (keep ? scale : 0.0f);
    }
}

static cudaError_t dropout(const bg_dropout_mask_t *mask, float *y, const float *x, int64_t n,
                           int64_t features, cudaStream_t stream) {
    const int64_t count = n * features;
    if (count == 0) return cudaSuccess;
    const uint64_t first = (uint64_t)mask->first_row * (uint64_t)features;
    dropout_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(
        mask->key, first, mask->threshold, (float)mask->scale, y, x, count);
    return cudaGetLastError();
}

extern "C" bg_status_t bg_cuda_dropout(bg_backend_t *be, const bg_dropout_mask_t *mask, int64_t n,
                                       int64_t features, const void *x, void *y) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(
        be, dropout(mask, (float *)y, (const float *)x, n, features, bg_cuda_of(be)->compute));
    return BG_OK;
}
