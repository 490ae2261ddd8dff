/* Dense layers through cuBLAS SGEMM, with small kernels for the bias.
 *
 * brigade's arrays are row-major; cuBLAS is column-major. A row-major
 * (r, c) array with leading dimension c is, byte for byte, the column-major
 * (c, r) array -- its transpose -- with the same leading dimension. So each
 * row-major product C = A B is computed as the column-major C^T = B^T A^T,
 * reading every operand in place. The three products, written out with the
 * shapes each side sees (n samples, `in` inputs, `out` units):
 *
 *   forward   y (n, out) = x (n, in) . w^T (in, out)
 *             col-major: y^T (out, n) = w (out, in) . x^T (in, n):
 *             Sgemm(T, N, m = out, n = n, k = in): A = w seen as (in, out),
 *             lda = in, transposed back to (out, in); B = x seen as
 *             (in, n), ldb = in; C = y seen as (out, n), ldc = out;
 *             beta = 1 onto the bias.
 *   back data dx (n, in) = dy (n, out) . w (out, in)
 *             col-major: dx^T (in, n) = w^T (in, out) . dy^T (out, n):
 *             Sgemm(N, N, m = in, n = n, k = out): A = w as (in, out),
 *             lda = in; B = dy as (out, n), ldb = out; C = dx as (in, n),
 *             ldc = in.
 *   back wts  dw (out, in) += dy^T (out, n) . x (n, in)
 *             col-major: dw^T (in, out) += x^T (in, n) . dy (n, out):
 *             Sgemm(N, T, m = in, n = out, k = n): A = x as (in, n),
 *             lda = in; B = dy as (out, n), ldb = out, transposed to
 *             (n, out); C = dw as (in, out), ldc = in; beta = 1.
 *
 * The forward starts y from the bias and the GEMM accumulates onto it
 * (beta = 1), as the CPU does; db sums the rows of dy in chunks, each in
 * row order, and then the chunks in order (the same bits on every run; not
 * the CPU's, which adds row after row). */
#include <limits.h>

#include "cuda_internal.h"

/* y: (n, out) b: (out); every row of y = b */
__global__ static void fill_rows_kernel(float *y, const float *b, int64_t n, int64_t out) {
    BG_CUDA_GRID_LOOP(i, n * out) y[i] = b[i % out];
}

/* db: (out) += the sum over rows of dy: (n, out). A block takes 32 units
 * (a warp reads 32 neighbouring values of a row) and COLUMN_SUM_CHUNKS
 * chunks of rows, a warp each: each thread sums its unit's rows of its
 * chunk in row order, loading COLUMN_SUM_AHEAD before adding them, and the
 * chunks' sums are added in chunk order. One thread per unit, walking all
 * n rows (the CPU's order), took 15 to 18 us at n = 256 on the H200: a
 * block for 10 or 128 units, each thread waiting on its loads in turn. */
enum { COLUMN_SUM_UNITS = 32, COLUMN_SUM_CHUNKS = 8, COLUMN_SUM_AHEAD = 8 };

__global__ static void __launch_bounds__((COLUMN_SUM_UNITS * COLUMN_SUM_CHUNKS))
    add_column_sums_kernel(float *db, const float *dy, int64_t n, int64_t out) {
    __shared__ float chunk_sums[COLUMN_SUM_CHUNKS][COLUMN_SUM_UNITS];
    const int64_t o = (int64_t)blockIdx.x * COLUMN_SUM_UNITS + threadIdx.x;
    const int64_t rows = (n + COLUMN_SUM_CHUNKS - 1) / COLUMN_SUM_CHUNKS;
    const int64_t first = threadIdx.y * rows, end = first + rows < n ? first + rows : n;
    float sum = 0;
    if (o < out) {
        int64_t i = first;
        for (; i + COLUMN_SUM_AHEAD <= end; i += COLUMN_SUM_AHEAD) {
            float ahead[COLUMN_SUM_AHEAD];
#pragma unroll
            for (int k = 0; k < COLUMN_SUM_AHEAD; k++) ahead[k] = dy[(i + k) * out + o];
#pragma unroll
            for (int k = 0; k < COLUMN_SUM_AHEAD; k++) sum += ahead[k];
        }
        for (; i < end; i++) sum += dy[i * out + o];
    }
    chunk_sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && o < out) {
        float total = chunk_sums[0][threadIdx.x];
        for (int c = 1; c < COLUMN_SUM_CHUNKS; c++) total += chunk_sums[c][threadIdx.x];
        db[o] += total;
    }
}

static cudaError_t fill_rows(float *y, const float *b, int64_t n, int64_t out,
                             cudaStream_t stream) {
    if (n * out == 0) return cudaSuccess;
    fill_rows_kernel<<<bg_cuda_blocks(n * out), BG_CUDA_THREADS, 0, stream>>>(y, b, n, out);
    return cudaGetLastError();
}

static cudaError_t add_column_sums(float *db, const float *dy, int64_t n, int64_t out,
                                   cudaStream_t stream) {
    if (out == 0) return cudaSuccess;
    const int64_t blocks = (out + COLUMN_SUM_UNITS - 1) / COLUMN_SUM_UNITS;
    add_column_sums_kernel<<<(unsigned)blocks, dim3(COLUMN_SUM_UNITS, COLUMN_SUM_CHUNKS), 0,
                             stream>>>(db, dy, n, out);
    return cudaGetLastError();
}

/* cuBLAS takes int sizes. */
static bg_status_t check_sizes(bg_backend_t *be, int64_t n, int64_t in, int64_t out) {
    if (n < 0 || in < 0 || out < 0 || n > INT_MAX || in > INT_MAX || out > INT_MAX)
        return bg_error_set(BG_ERR_UNSUPPORTED,
                            "%s: dense layer of %lld x %lld with batch %lld exceeds cuBLAS's "
                            "32-bit sizes",
                            be->name, (long long)out, (long long)in, (long long)n);
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_dense_forward(bg_backend_t *be, int64_t n, int64_t in, int64_t out,
                                             const void *x, const void *w, const void *b, void *y) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    const float one = 1;
    BG_CHECK(check_sizes(be, n, in, out));
    if (n == 0 || out == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, fill_rows((float *)y, (const float *)b, n, out, cu->compute));
    if (in > 0) {
        /* y^T (out, n) += w (out, in) . x^T (in, n) */
        BG_CUBLAS_CHECK(be, cublasSgemm(cu->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n,
                                        (int)in, &one, (const float *)w, (int)in, (const float *)x,
                                        (int)in, &one, (float *)y, (int)out));
    }
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_dense_backward_data(bg_backend_t *be, int64_t n, int64_t in,
                                                   int64_t out, const void *dy, const void *w,
                                                   void *dx) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    const float one = 1, zero = 0;
    BG_CHECK(check_sizes(be, n, in, out));
    if (n == 0 || in == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    /* dx^T (in, n) = w^T (in, out) . dy^T (out, n) */
    BG_CUBLAS_CHECK(be, cublasSgemm(cu->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)in, (int)n, (int)out,
                                    &one, (const float *)w, (int)in, (const float *)dy, (int)out,
                                    &zero, (float *)dx, (int)in));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_dense_backward_weights(bg_backend_t *be, int64_t n, int64_t in,
                                                      int64_t out, const void *x, const void *dy,
                                                      void *dw, void *db) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    const float one = 1;
    BG_CHECK(check_sizes(be, n, in, out));
    if (n == 0 || out == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    if (in > 0) {
        /* dw^T (in, out) += x^T (in, n) . dy (n, out) */
        BG_CUBLAS_CHECK(be, cublasSgemm(cu->cublas, CUBLAS_OP_N, CUBLAS_OP_T, (int)in, (int)out,
                                        (int)n, &one, (const float *)x, (int)in, (const float *)dy,
                                        (int)out, &one, (float *)dw, (int)in));
    }
    BG_CUDA_CHECK(be, add_column_sums((float *)db, (const float *)dy, n, out, cu->compute));
    return BG_OK;
}
