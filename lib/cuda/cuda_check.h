/* The CUDA backend's check macros (STYLE.md rule 4), one family in the
 * style of NCCL's checks.h: each evaluates a CUDA runtime, cuBLAS or cuDNN
 * call once and, when it fails, records through bg_error_set() a message
 * naming the backend, the source file and line, the failed call as written
 * and the library's own name and text for the error, then returns
 * BG_ERR_BACKEND from the enclosing function (plain form) or stores it in
 * `st` and jumps forward to a cleanup label (_GOTO form).
 *
 *   BG_CUDA_CHECK(be, cudaMemsetAsync(x, 0, bytes, stream));
 *   BG_CUDNN_CHECK_GOTO(be, cudnnCreate(&handle), st, fail);
 *
 * Kernel launches return nothing, so every launch is followed by
 * cudaGetLastError(). The launcher functions of the .cu files (stream last)
 * return it, and the op that calls a launcher checks that with
 * BG_CUDA_CHECK, so the message names the launcher and its arguments:
 *
 *   relu_kernel<<<blocks, threads, 0, stream>>>(y, x, count);
 *   return cudaGetLastError();
 *
 * `be` is the bg_backend_t whose name ("cuda:0") starts the message. A
 * failed runtime call also clears CUDA's last-error slot (non-sticky errors),
 * so the next launch check does not report it a second time; so does every
 * cuBLAS and cuDNN call that succeeds, as those libraries may make runtime
 * calls of their own that fail, handle the failure and still succeed,
 * leaving it in the slot for the next launch check to blame on a kernel of
 * ours. (Every launch of ours is checked right after it, so nothing of ours
 * is pending there; a sticky error is reported again by the next call.)
 * Only for .cu files and C files that include the CUDA headers. */
#ifndef BG_CUDA_CHECK_H
#define BG_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record the failure of `call` (its source text) at file:line and return
 * BG_ERR_BACKEND. */
bg_status_t bg_cuda_fail(const bg_backend_t *be, cudaError_t error, const char *call,
                         const char *file, int line);
bg_status_t bg_cublas_fail(const bg_backend_t *be, cublasStatus_t status, const char *call,
                           const char *file, int line);
bg_status_t bg_cudnn_fail(const bg_backend_t *be, cudnnStatus_t status, const char *call,
                          const char *file, int line);

#ifdef __cplusplus
}
#endif

#define BG_CUDA_CHECK(be, expr)                                                                    \
    do {                                                                                           \
        cudaError_t bg_cuda_error_ = (expr);                                                       \
        if (bg_cuda_error_ != cudaSuccess)                                                         \
            return bg_cuda_fail((be), bg_cuda_error_, #expr, __FILE__, __LINE__);                  \
    } while (0)

#define BG_CUDA_CHECK_GOTO(be, expr, st, label)                                                    \
    do {                                                                                           \
        cudaError_t bg_cuda_error_ = (expr);                                                       \
        if (bg_cuda_error_ != cudaSuccess) {                                                       \
            (st) = bg_cuda_fail((be), bg_cuda_error_, #expr, __FILE__, __LINE__);                  \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#define BG_CUBLAS_CHECK(be, expr)                                                                  \
    do {                                                                                           \
        cublasStatus_t bg_cublas_status_ = (expr);                                                 \
        if (bg_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                            \
            return bg_cublas_fail((be), bg_cublas_status_, #expr, __FILE__, __LINE__);             \
        (void)cudaGetLastError();                                                                  \
    } while (0)

#define BG_CUBLAS_CHECK_GOTO(be, expr, st, label)                                                  \
    do {                                                                                           \
        cublasStatus_t bg_cublas_status_ = (expr);                                                 \
        if (bg_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                          \
            (st) = bg_cublas_fail((be), bg_cublas_status_, #expr, __FILE__, __LINE__);             \
            goto label;                                                                            \
        }                                                                                          \
        (void)cudaGetLastError();                                                                  \
    } while (0)

#define BG_CUDNN_CHECK(be, expr)                                                                   \
    do {                                                                                           \
        cudnnStatus_t bg_cudnn_status_ = (expr);                                                   \
        if (bg_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                              \
            return bg_cudnn_fail((be), bg_cudnn_status_, #expr, __FILE__, __LINE__);               \
        (void)cudaGetLastError();                                                                  \
    } while (0)

#define BG_CUDNN_CHECK_GOTO(be, expr, st, label)                                                   \
    do {                                                                                           \
        cudnnStatus_t bg_cudnn_status_ = (expr);                                                   \
        if (bg_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                            \
            (st) = bg_cudnn_fail((be), bg_cudnn_status_, #expr, __FILE__, __LINE__);               \
            goto label;                                                                            \
        }                                                                                          \
        (void)cudaGetLastError();                                                                  \
    } while (0)

#endif /* BG_CUDA_CHECK_H */
