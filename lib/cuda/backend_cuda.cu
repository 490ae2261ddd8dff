/* The CUDA backend's object: creation and destruction, device memory,
 * host transfers, synchronization, and the failure messages of the check
 * macros (cuda_check.h). The ops are in the other .cu files. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_internal.h"

bg_status_t bg_cuda_fail(const bg_backend_t *be, cudaError_t error, const char *call,
                         const char *file, int line) {
    /* Clear the non-sticky error so the next launch check does not see it. */
    (void)cudaGetLastError();
    return bg_error_set(BG_ERR_BACKEND, "%s: %s:%d: %s failed: %s (%s)", be->name, file, line, call,
                        cudaGetErrorName(error), cudaGetErrorString(error));
}

/* The name of the CUDA error a library met, NULL when none; it is cleared,
 * so that the next launch check does not report it again under that
 * launch's name. */
static const char *cuda_cause(void) {
    const cudaError_t cause = cudaGetLastError();
    return cause != cudaSuccess ? cudaGetErrorName(cause) : NULL;
}

bg_status_t bg_cublas_fail(const bg_backend_t *be, cublasStatus_t status, const char *call,
                           const char *file, int line) {
    const char *cause = cuda_cause(); /* often the reason */
    return bg_error_set(BG_ERR_BACKEND, "%s: %s:%d: %s failed: %s (%s)%s%s", be->name, file, line,
                        call, cublasGetStatusName(status), cublasGetStatusString(status),
                        cause != NULL ? "; CUDA: " : "", cause != NULL ? cause : "");
}

bg_status_t bg_cudnn_fail(const bg_backend_t *be, cudnnStatus_t status, const char *call,
                          const char *file, int line) {
    /* cuDNN 9 keeps a longer explanation of the last failure. */
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    const char *cause = cuda_cause();
    return bg_error_set(BG_ERR_BACKEND, "%s: %s:%d: %s failed: %s%s%s%s%s", be->name, file, line,
                        call, cudnnGetErrorString(status), detail[0] != '\0' ? ": " : "", detail,
                        cause != NULL ? "; CUDA: " : "", cause != NULL ? cause : "");
}

/* What CUDA answered when first asked for its GPUs: their number, and
 * when that failed (no driver, a driver older than the runtime, no
 * device), the error. Asked once, on first use, from any thread (a C++
 * function-local static is initialised exactly once). */
typedef struct device_census {
    int count;
    char reason[192]; /* "" when CUDA answered */
} device_census_t;

static device_census_t take_census(void) {
    device_census_t c = {0, ""};
    const cudaError_t e = cudaGetDeviceCount(&c.count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        c.count = 0;
        snprintf(c.reason, sizeof c.reason, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    return c;
}

static const device_census_t &census(void) {
    static const device_census_t c = take_census();
    return c;
}

/* Without a driver or a GPU cudaGetDeviceCount fails (cudaErrorNoDevice,
 * cudaErrorInsufficientDriver): that is the answer 0, not an error; the
 * error is kept for bg_cuda_no_device_reason. */
extern "C" int bg_cuda_device_count(void) { return census().count; }

extern "C" const char *bg_cuda_no_device_reason(void) {
    return census().reason[0] != '\0' ? census().reason : NULL;
}

extern "C" bg_status_t bg_cuda_enter(bg_backend_t *be) {
    BG_CUDA_CHECK(be, cudaSetDevice(bg_cuda_of(be)->device));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_malloc(bg_backend_t *be, size_t bytes, void **out) {
    cudaError_t error = cudaMalloc(out, bytes);
    if (error == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
        return bg_error_set(BG_ERR_NOMEM,
                            "%s: out of device memory allocating %zu bytes (%zu of %zu bytes free)",
                            be->name, bytes, free_bytes, total_bytes);
    }
    if (error != cudaSuccess)
        return bg_cuda_fail(be, error, "cudaMalloc(out, bytes)", __FILE__, __LINE__);
    return BG_OK;
}

extern "C" void bg_cuda_free_quietly(void *ptr) {
    if (ptr != NULL && cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

extern "C" void bg_cuda_destroy(bg_backend_t *be) {
    if (be == NULL) return;
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    /* Destructors cannot fail: errors here (a dead context) are dropped. */
    if (cudaSetDevice(cu->device) != cudaSuccess) (void)cudaGetLastError();
    if (cu->compute != NULL && cudaStreamSynchronize(cu->compute) != cudaSuccess)
        (void)cudaGetLastError();
    bg_cuda_conv_cache_clear(cu);
    if (cu->conv_desc != NULL) (void)cudnnDestroyConvolutionDescriptor(cu->conv_desc);
    if (cu->w_desc != NULL) (void)cudnnDestroyFilterDescriptor(cu->w_desc);
    if (cu->y_desc != NULL) (void)cudnnDestroyTensorDescriptor(cu->y_desc);
    if (cu->x_desc != NULL) (void)cudnnDestroyTensorDescriptor(cu->x_desc);
    if (cu->cudnn != NULL) (void)cudnnDestroy(cu->cudnn);
    if (cu->cublas != NULL) (void)cublasDestroy(cu->cublas);
    bg_cuda_free_quietly(cu->cublas_workspace);
    bg_cuda_free_quietly(cu->row_scratch);
    bg_cuda_free_quietly(cu->device_reduction);
    if (cu->host_reduction != NULL && cudaFreeHost(cu->host_reduction) != cudaSuccess)
        (void)cudaGetLastError();
    cudaStream_t streams[BG_CUDA_STREAMS];
    bg_cuda_streams(cu, streams);
    for (cudaStream_t s : streams)
        if (s != NULL && cudaStreamDestroy(s) != cudaSuccess) (void)cudaGetLastError();
    free(cu);
}

/* The handles and buffers of a new backend; on failure `be` is half-built
 * and bg_cuda_destroy() releases what was made. */
static bg_status_t cuda_setup(bg_backend_t *be) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    BG_CUDA_CHECK(be, cudaSetDevice(cu->device));
    /* Non-blocking: no implicit ordering with the legacy default stream,
     * which other libraries in the process may use. */
    BG_CUDA_CHECK(be, cudaStreamCreateWithFlags(&cu->compute, cudaStreamNonBlocking));
    for (int lane = 0; lane < BG_CUDA_LANES; lane++) {
        BG_CUDA_CHECK(be, cudaStreamCreateWithFlags(&cu->copy_in[lane], cudaStreamNonBlocking));
        BG_CUDA_CHECK(be, cudaStreamCreateWithFlags(&cu->copy_out[lane], cudaStreamNonBlocking));
    }

    BG_CUBLAS_CHECK(be, cublasCreate(&cu->cublas));
    BG_CUBLAS_CHECK(be, cublasSetStream(cu->cublas, cu->compute));
    /* Without a workspace of its own cuBLAS takes one from a pool it
     * manages, outside what the plan counts; this one is made now, so no
     * GEMM allocates, and its size is known. After cublasSetStream, which
     * puts the handle back on the pool. */
    BG_CHECK(bg_cuda_malloc(be, BG_CUDA_CUBLAS_WORKSPACE_BYTES, &cu->cublas_workspace));
    BG_CUBLAS_CHECK(
        be, cublasSetWorkspace(cu->cublas, cu->cublas_workspace, BG_CUDA_CUBLAS_WORKSPACE_BYTES));
    /* CUBLAS_DEFAULT_MATH keeps SGEMM in IEEE FP32: TF32 is a math mode
     * asked for (NVIDIA_TF32_OVERRIDE=0 can only forbid it), here only
     * with allow_tf32. */
    BG_CUBLAS_CHECK(be, cublasSetMathMode(cu->cublas, cu->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                     : CUBLAS_DEFAULT_MATH));

    BG_CUDNN_CHECK(be, cudnnCreate(&cu->cudnn));
    BG_CUDNN_CHECK(be, cudnnSetStream(cu->cudnn, cu->compute));
    BG_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&cu->x_desc));
    BG_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&cu->y_desc));
    BG_CUDNN_CHECK(be, cudnnCreateFilterDescriptor(&cu->w_desc));
    BG_CUDNN_CHECK(be, cudnnCreateConvolutionDescriptor(&cu->conv_desc));

    BG_CHECK(bg_cuda_malloc(be, sizeof *cu->device_reduction, (void **)&cu->device_reduction));
    /* Zero is "nothing marked" for mark_nonfinite; on the compute stream,
     * which orders it before the first mark (it is non-blocking: the
     * legacy stream would not). */
    BG_CUDA_CHECK(
        be, cudaMemsetAsync(cu->device_reduction, 0, sizeof *cu->device_reduction, cu->compute));
    BG_CUDA_CHECK(be, cudaMallocHost((void **)&cu->host_reduction, sizeof *cu->host_reduction));
    return BG_OK;
}

extern "C" bg_status_t bg_backend_cuda_create(const bg_cuda_config_t *cfg, bg_backend_t **out) {
    if (cfg->dtype == BG_F64)
        return bg_error_set(BG_ERR_UNSUPPORTED,
                            "cuda:%d: the CUDA backend computes in single precision only "
                            "(double-precision gradient checks run on the CPU backend)",
                            cfg->device);
    if (cfg->dtype != BG_F32)
        return bg_error_set(BG_ERR_INVALID, "cuda:%d: unknown element type %d", cfg->device,
                            (int)cfg->dtype);
    const int count = bg_cuda_device_count();
    if (cfg->device < 0 || cfg->device >= count)
        return bg_error_set(BG_ERR_INVALID, "cuda:%d: no such GPU (CUDA sees %d on this machine)",
                            cfg->device, count);
    bg_cuda_backend_t *cu = (bg_cuda_backend_t *)calloc(1, sizeof *cu);
    if (cu == NULL) return bg_error_set(BG_ERR_NOMEM, "cuda:%d: out of memory", cfg->device);
    cu->base.ops = &bg_cuda_ops_f32;
    cu->base.dtype = BG_F32;
    snprintf(cu->base.name, sizeof cu->base.name, "cuda:%d", cfg->device);
    cu->device = cfg->device;
    cu->allow_tf32 = cfg->allow_tf32 != 0;
    cu->conv_workspace_limit = cfg->conv_workspace_limit;
    bg_status_t st = cuda_setup(&cu->base);
    if (st != BG_OK) {
        bg_cuda_destroy(&cu->base);
        return st;
    }
    *out = &cu->base;
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_alloc(bg_backend_t *be, size_t bytes, void **out) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    void *ptr = NULL;
    BG_CHECK(bg_cuda_enter(be));
    /* A zero-byte request still gets a distinct pointer, as on the CPU. */
    BG_CHECK(bg_cuda_malloc(be, bytes > 0 ? bytes : 1, &ptr));
    bg_status_t st = BG_OK;
    BG_CUDA_CHECK_GOTO(be, cudaMemsetAsync(ptr, 0, bytes, cu->compute), st, fail);
    /* Wait, so the zeros hold for any stream that uses the memory next (the
     * executor's copy stream too); allocation happens only at setup. */
    BG_CUDA_CHECK_GOTO(be, cudaStreamSynchronize(cu->compute), st, fail);
    *out = ptr;
    return BG_OK;
fail:
    bg_cuda_free_quietly(ptr);
    return st;
}

extern "C" void bg_cuda_free(bg_backend_t *be, void *ptr) {
    if (ptr == NULL) return;
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    if (cudaSetDevice(cu->device) != cudaSuccess) (void)cudaGetLastError();
    /* CUDA says cudaFree "may" synchronize, no more: the work still reading
     * or writing ptr, on either stream, finishes first. A peer's copy stream
     * reading ptr (a direct transfer between GPUs) is not waited for here:
     * the caller synchronizes every backend first (bg_pipeline_destroy). */
    cudaStream_t streams[BG_CUDA_STREAMS];
    bg_cuda_streams(cu, streams);
    for (cudaStream_t s : streams)
        if (s != NULL && cudaStreamSynchronize(s) != cudaSuccess) (void)cudaGetLastError();
    bg_cuda_free_quietly(ptr);
}

/* Copies on the compute stream, after the ops enqueued before, then waits
 * for it: an upload's source may be reused and a download's destination read
 * as soon as this returns. Pageable host memory is fine (the driver stages
 * it); pinned memory would copy faster but is the caller's business. */
extern "C" bg_status_t bg_cuda_upload(bg_backend_t *be, void *dst, const void *host_src,
                                      size_t bytes) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    if (bytes == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, cu->compute));
    BG_CUDA_CHECK(be, cudaStreamSynchronize(cu->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_take_reduction(bg_backend_t *be, const void *field, size_t bytes) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    const size_t at = (size_t)((const char *)field - (const char *)cu->device_reduction);
    void *device = (char *)cu->device_reduction + at, *host = (char *)cu->host_reduction + at;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, cu->compute));
    BG_CUDA_CHECK(be, cudaMemsetAsync(device, 0, bytes, cu->compute));
    BG_CUDA_CHECK(be, cudaStreamSynchronize(cu->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_host_alloc(bg_backend_t *be, size_t bytes, void **out) {
    BG_CHECK(bg_cuda_enter(be));
    void *ptr = NULL;
    cudaError_t error = cudaMallocHost(&ptr, bytes > 0 ? bytes : 1);
    if (error == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return bg_error_set(BG_ERR_NOMEM, "%s: out of pinned host memory allocating %zu bytes",
                            be->name, bytes);
    }
    if (error != cudaSuccess)
        return bg_cuda_fail(be, error, "cudaMallocHost(&ptr, bytes)", __FILE__, __LINE__);
    *out = ptr;
    return BG_OK;
}

extern "C" void bg_cuda_host_free(bg_backend_t *be, void *ptr) {
    (void)be;
    if (ptr != NULL && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

/* From pinned memory the copy engine reads the host buffer itself: the
 * call returns at once, ordered on the compute stream before later ops. */
extern "C" bg_status_t bg_cuda_upload_async(bg_backend_t *be, void *dst, const void *host_src,
                                            size_t bytes) {
    if (bytes == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(
        be, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_download(bg_backend_t *be, void *host_dst, const void *src,
                                        size_t bytes) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    if (bytes == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, cu->compute));
    BG_CUDA_CHECK(be, cudaStreamSynchronize(cu->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_synchronize(bg_backend_t *be) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    BG_CHECK(bg_cuda_enter(be));
    cudaStream_t streams[BG_CUDA_STREAMS];
    bg_cuda_streams(cu, streams);
    /* Every stream, even after one fails: a caller about to free memory
     * needs the others' work done; the first failure is the one told. */
    bg_status_t st = BG_OK;
    for (cudaStream_t s : streams) {
        const cudaError_t error = cudaStreamSynchronize(s);
        if (error != cudaSuccess && st == BG_OK)
            st = bg_cuda_fail(be, error, "cudaStreamSynchronize(s)", __FILE__, __LINE__);
    }
    return st;
}
