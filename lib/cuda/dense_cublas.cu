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
 * The bias kernels follow the CPU: the forward starts y from the bias and
 * the GEMM accumulates onto it (beta = 1); db sums the rows of dy in row
 * order, one thread per unit, giving the CPU's bits. */
#include <limits.h>

#include "cuda_internal.h"

/* y: (n, out) b: (out); every row of y = b */
__global__ static void fill_rows_kernel(float *y, const float *b, int64_t n, int64_t out) {
    BG_CUDA_GRID_LOOP(i, n * out) y[i] = b[i % out];
}

/* db: (out) += the sum over rows of dy: (n, out), in row order. A unit's
 * thread loads COLUMN_SUM_AHEAD rows before adding them, so that as many
 * loads are in flight (few threads, one per unit: each would otherwise
 * wait on its loads a few at a time); the adds keep the CPU's order. */
enum { COLUMN_SUM_AHEAD = 16 };

__global__ static void add_column_sums_kernel(float *db, const float *dy, int64_t n, int64_t out) {
    BG_CUDA_GRID_LOOP(o, out) {
        float sum = db[o];
        int64_t i = 0;
        for (; i + COLUMN_SUM_AHEAD <= n; i += COLUMN_SUM_AHEAD) {
            float rows[COLUMN_SUM_AHEAD];
#pragma unroll
            for (int k = 0; k < COLUMN_SUM_AHEAD; k++) rows[k] = dy[(i + k) * out + o];
#pragma unroll
            for (int k = 0; k < COLUMN_SUM_AHEAD; k++) sum += rows[k];
        }
        for (; i < n; i++) sum += dy[i * out + o];
        db[o] = sum;
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
    add_column_sums_kernel<<<bg_cuda_blocks(out), BG_CUDA_THREADS, 0, stream>>>(db, dy, n, out);
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
