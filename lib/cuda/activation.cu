/* tanh, sigmoid and gelu: the loop bodies of their CPU references
 * (lib/cpu/kernels.inc) over a grid-stride loop. Unlike the other
 * elementwise ops these do not give the CPU's bits: CUDA's tanhf, expf and
 * erfcf are not glibc's (both are within a few ulp of the true value), so
 * tests/test_cuda_ops.c compares them with a tolerance. */
#include <math.h>

#include "cuda_internal.h"

/* x, y: (count); may alias */
__global__ static void activation_forward_kernel(bg_activation_t f, float *y, const float *x,
                                                 int64_t count) {
    BG_CUDA_GRID_LOOP(i, count) {
        const float v = x[i];
        switch (f) {
        case BG_ACTIVATION_TANH: y[i] = tanhf(v); break;
        case BG_ACTIVATION_SIGMOID: y[i] = 1.0f / (1.0f + expf(-v)); break;
        case BG_ACTIVATION_GELU: y[i] = 0.5f * v * erfcf(-v * (float)M_SQRT1_2); break;
        }
    }
}

/* x, y, dy, dx: (count); dy and dx may alias. tanh and sigmoid read y, gelu
 * reads x (the other may be NULL or stale). */
__global__ static void activation_backward_kernel(bg_activation_t f, float *dx, const float *x,
                                                  const float *y, const float *dy, int64_t count) {
    const float inv_sqrt_2pi = (float)(0.5 * M_2_SQRTPI * M_SQRT1_2);
    BG_CUDA_GRID_LOOP(i, count) {
        switch (f) {
        case BG_ACTIVATION_TANH: dx[i] = dy[i] * (1.0f - y[i] * y[i]); break;
        case BG_ACTIVATION_SIGMOID: dx[i] = dy[i] * (y[i] * (1.0f - y[i])); break;
        case BG_ACTIVATION_GELU: {
            const float v = x[i];
            const float cdf = 0.5f * erfcf(-v * (float)M_SQRT1_2);
            const float pdf = inv_sqrt_2pi * expf(-0.5f * v * v);
            dx[i] = dy[i] * (cdf + v * pdf);
            break;
        }
        }
    }
}

static cudaError_t activation_forward(bg_activation_t f, float *y, const float *x, int64_t count,
                                      cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    activation_forward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(f, y, x,
                                                                                     count);
    return cudaGetLastError();
}

static cudaError_t activation_backward(bg_activation_t f, float *dx, const float *x, const float *y,
                                       const float *dy, int64_t count, cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    activation_backward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(f, dx, x, y,
                                                                                      dy, count);
    return cudaGetLastError();
}

extern "C" bg_status_t bg_cuda_activation_forward(bg_backend_t *be, bg_activation_t f,
                                                  int64_t count, const void *x, void *y) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(
        be, activation_forward(f, (float *)y, (const float *)x, count, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_activation_backward(bg_backend_t *be, bg_activation_t f,
                                                   int64_t count, const void *x, const void *y,
                                                   const void *dy, void *dx) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, activation_backward(f, (float *)dx, (const float *)x, (const float *)y,
                                          (const float *)dy, count, bg_cuda_of(be)->compute));
    return BG_OK;
}
