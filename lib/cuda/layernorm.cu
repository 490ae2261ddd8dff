/* Layer normalisation (lib/backend.h): the expressions of the CPU reference
 * (lib/cpu/kernels.inc), each row's sums in double as there, but added up
 * by a block's tree rather than in the row's order, so a row's mean and
 * 1/std may differ from the CPU's in the last bit of the float they are
 * rounded to. The weights' gradient then sums over rows in the CPU's order. */
#include <math.h>

#include "cuda_internal.h"

enum { ROW_THREADS = 256 }; /* one block of these per row */

/* The sum over the block of each thread's `value`, returned to every
 * thread. scratch: ROW_THREADS doubles of shared memory. */
__device__ static double block_sum(double value, double *scratch) {
    const int t = threadIdx.x;
    scratch[t] = value;
    __syncthreads();
    for (int half = ROW_THREADS / 2; half > 0; half /= 2) {
        if (t < half) scratch[t] += scratch[t + half];
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads(); /* every thread has read it before scratch is reused */
    return total;
}

/* A row's mean and 1 / sqrt(variance + eps), in double, rounded to float
 * (two passes: the variance of the centred values). The whole block calls it. */
__device__ static void row_stats(const float *xi, int64_t features, double *scratch, float *mean,
                                 float *rstd) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < features; j += ROW_THREADS) sum += (double)xi[j];
    const double m = block_sum(sum, scratch) / (double)features;
    double squares = 0;
    for (int64_t j = threadIdx.x; j < features; j += ROW_THREADS)
        squares += ((double)xi[j] - m) * ((double)xi[j] - m);
    const double variance = block_sum(squares, scratch) / (double)features;
    *mean = (float)m;
    *rstd = (float)(1 / sqrt(variance + BG_LAYERNORM_EPS));
}

/* x, y: (n, features) gamma, beta: (features); a block per row */
__global__ static void layernorm_forward_kernel(float *y, const float *x, const float *gamma,
                                                const float *beta, int64_t n, int64_t features) {
    __shared__ double scratch[ROW_THREADS];
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const float *xi = x + i * features;
        float *yi = y + i * features;
        float mean, rstd;
        row_stats(xi, features, scratch, &mean, &rstd);
        for (int64_t j = threadIdx.x; j < features; j += ROW_THREADS)
            yi[j] = (xi[j] - mean) * rstd * gamma[j] + beta[j];
    }
}

/* x, dy, dx: (n, features) gamma: (features); a block per row */
__global__ static void layernorm_backward_data_kernel(float *dx, const float *x, const float *gamma,
                                                      const float *dy, int64_t n,
                                                      int64_t features) {
    __shared__ double scratch[ROW_THREADS];
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const float *xi = x + i * features, *dyi = dy + i * features;
        float *dxi = dx + i * features;
        float mean, rstd;
        row_stats(xi, features, scratch, &mean, &rstd);
        double sum_g = 0, sum_gx = 0;
        for (int64_t j = threadIdx.x; j < features; j += ROW_THREADS) {
            const float g = gamma[j] * dyi[j], xhat = (xi[j] - mean) * rstd;
            sum_g += (double)g;
            sum_gx += (double)(g * xhat);
        }
        const float mean_g = (float)(block_sum(sum_g, scratch) / (double)features);
        const float mean_gx = (float)(block_sum(sum_gx, scratch) / (double)features);
        for (int64_t j = threadIdx.x; j < features; j += ROW_THREADS) {
            const float xhat = (xi[j] - mean) * rstd;
            dxi[j] = rstd * (gamma[j] * dyi[j] - mean_g - xhat * mean_gx);
        }
    }
}

/* Each row's mean and 1/std into stats (n means, then n values of 1/std). */
__global__ static void layernorm_stats_kernel(float *stats, const float *x, int64_t n,
                                              int64_t features) {
    __shared__ double scratch[ROW_THREADS];
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        float mean, rstd;
        row_stats(x + i * features, features, scratch, &mean, &rstd);
        if (threadIdx.x == 0) {
            stats[i] = mean;
            stats[n + i] = rstd;
        }
    }
}

/* accumulate, a thread per feature, over the rows in order (as the CPU):
 * dgamma += dy xhat, dbeta += dy. x, dy: (n, features) */
__global__ static void layernorm_backward_weights_kernel(float *dgamma, float *dbeta,
                                                         const float *x, const float *dy,
                                                         const float *stats, int64_t n,
                                                         int64_t features) {
    BG_CUDA_GRID_LOOP(j, features) {
        float g = dgamma[j], b = dbeta[j];
        for (int64_t i = 0; i < n; i++) {
            const float d = dy[i * features + j];
            g += d * ((x[i * features + j] - stats[i]) * stats[n + i]);
            b += d;
        }
        dgamma[j] = g;
        dbeta[j] = b;
    }
}

/* Blocks for a block-per-row kernel. */
static unsigned row_blocks(int64_t n) { return (unsigned)(n < 65535 ? n : 65535); }

static cudaError_t layernorm_forward(float *y, const float *x, const float *gamma,
                                     const float *beta, int64_t n, int64_t features,
                                     cudaStream_t stream) {
    if (n == 0 || features == 0) return cudaSuccess;
    layernorm_forward_kernel<<<row_blocks(n), ROW_THREADS, 0, stream>>>(y, x, gamma, beta, n,
                                                                        features);
    return cudaGetLastError();
}

static cudaError_t layernorm_backward_data(float *dx, const float *x, const float *gamma,
                                           const float *dy, int64_t n, int64_t features,
                                           cudaStream_t stream) {
    if (n == 0 || features == 0) return cudaSuccess;
    layernorm_backward_data_kernel<<<row_blocks(n), ROW_THREADS, 0, stream>>>(dx, x, gamma, dy, n,
                                                                              features);
    return cudaGetLastError();
}

static cudaError_t layernorm_backward_weights(float *dgamma, float *dbeta, const float *x,
                                              const float *dy, float *stats, int64_t n,
                                              int64_t features, cudaStream_t stream) {
    if (n == 0 || features == 0) return cudaSuccess;
    layernorm_stats_kernel<<<row_blocks(n), ROW_THREADS, 0, stream>>>(stats, x, n, features);
    cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    layernorm_backward_weights_kernel<<<bg_cuda_blocks(features), BG_CUDA_THREADS, 0, stream>>>(
        dgamma, dbeta, x, dy, stats, n, features);
    return cudaGetLastError();
}

extern "C" bg_status_t bg_cuda_layernorm_forward(bg_backend_t *be, int64_t n, int64_t features,
                                                 const void *x, const void *gamma, const void *beta,
                                                 void *y, void *workspace) {
    (void)workspace;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, layernorm_forward((float *)y, (const float *)x, (const float *)gamma,
                                        (const float *)beta, n, features, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_layernorm_backward_data(bg_backend_t *be, int64_t n,
                                                       int64_t features, const void *x,
                                                       const void *gamma, const void *dy, void *dx,
                                                       void *workspace) {
    (void)workspace;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be,
                  layernorm_backward_data((float *)dx, (const float *)x, (const float *)gamma,
                                          (const float *)dy, n, features, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_layernorm_backward_weights(bg_backend_t *be, int64_t n,
                                                          int64_t features, const void *x,
                                                          const void *dy, void *dgamma, void *dbeta,
                                                          void *workspace) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, layernorm_backward_weights((float *)dgamma, (float *)dbeta, (const float *)x,
                                                 (const float *)dy, (float *)workspace, n, features,
                                                 bg_cuda_of(be)->compute));
    return BG_OK;
}
