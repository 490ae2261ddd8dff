/* Internal to the CUDA backend (.cu files only): the backend object, its
 * convolution-algorithm cache, and helpers shared by the op files. */
#ifndef BG_CUDA_INTERNAL_H
#define BG_CUDA_INTERNAL_H

#include <stdint.h>

#include "backend_cuda.h"
#include "cuda_check.h"
#include "cuda_ops.h"

/* Threads per block of the elementwise kernels. */
enum { BG_CUDA_THREADS = 256 };

/* The algorithms cuDNN chose for one convolution geometry (see the cache in
 * backend_cuda.h) and the workspace bytes each needs. */
typedef struct bg_cuda_conv_algos {
    bg_conv2d_geometry_t geometry;
    cudnnConvolutionFwdAlgo_t forward;
    cudnnConvolutionBwdDataAlgo_t backward_data;
    cudnnConvolutionBwdFilterAlgo_t backward_filter;
    /* Math type each was timed with; with allow_tf32 = 0 always FMA. */
    cudnnMathType_t forward_math, backward_data_math, backward_filter_math;
    size_t forward_bytes, backward_data_bytes, backward_filter_bytes;
    size_t workspace_bytes; /* the largest of the three */
    int sized;              /* returned by conv2d_workspace_bytes: a caller may hold this much */
    int searched; /* timed by a search; 0: ranked by heuristics within an op's smaller limit */
} bg_cuda_conv_algos_t;

/* softmax_xent_forward_add's totals since the last take_loss (zero: none). */
typedef struct bg_cuda_loss_totals {
    double loss_sum;
    long long correct;
    long long bad_row_plus_one; /* the first row with a label out of range, + 1; 0 none */
    int bad_label, classes;     /* that label, and the classes it was outside of */
} bg_cuda_loss_totals_t;

/* What the reductions (softmax_xent_forward, all_finite, mark_nonfinite)
 * hand back to the
 * host: one device copy, one pinned host copy. */
typedef struct bg_cuda_reduction {
    double loss_sum;
    long long correct;
    long long first_bad_label; /* lowest row whose label is out of range; n when none */
    int nonfinite;             /* all_finite: 1 when some element is Inf or NaN */
    double square_sum;         /* square_sum */
    /* What a job leaves on the device, which take_loss reads with one wait
     * (take_nonfinite the mark alone when marks came since). */
    struct {
        /* mark_nonfinite: INT_MAX minus the lowest tag marked, 0 for none
         * (so that a zeroed word is "none" and atomicMax keeps the lowest
         * tag). */
        int nonfinite_mark;
        bg_cuda_loss_totals_t totals; /* softmax_xent_forward_add */
    } job_end;
} bg_cuda_reduction_t;

typedef struct bg_cuda_backend {
    bg_backend_t base;
    int device;
    int allow_tf32;
    size_t conv_workspace_limit;
    cudaStream_t compute; /* every op */
    /* The executor's channel copies into this GPU, one stream per lane
     * (BG_CUDA_LANE_*: activations from the stage before, gradients from
     * the stage after), so that a copy waiting for its sender's op does not
     * hold up one of the other direction; and the first legs of copies out
     * of it through host memory, per lane too. */
    cudaStream_t copy_in[BG_CUDA_LANES], copy_out[BG_CUDA_LANES];
    cublasHandle_t cublas;
    void *cublas_workspace; /* BG_CUDA_CUBLAS_WORKSPACE_BYTES, cuBLAS's (cublasSetWorkspace) */
    cudnnHandle_t cudnn;
    /* Descriptors reset before every cuDNN call (host-side structs, cheap). */
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    bg_cuda_conv_algos_t *conv_cache;
    int conv_cache_count, conv_cache_capacity;
    bg_cuda_reduction_t *device_reduction;
    bg_cuda_reduction_t *host_reduction; /* pinned (cudaMallocHost) */
    /* The non-finite mark as read (and cleared on the GPU) by take_loss,
     * not yet taken by take_nonfinite; and whether marks were enqueued
     * since it was read: without, take_nonfinite returns it without a wait
     * of its own. */
    int mark_read;
    int mark_pending;
    /* Per-row scratch of softmax_xent_forward: made when a stage with the
     * loss is laid out (softmax_xent_reserve, the largest micro-batch),
     * grown only for a larger batch, which the executor never runs. */
    void *row_scratch;
    size_t row_scratch_bytes;
} bg_cuda_backend_t;

static inline bg_cuda_backend_t *bg_cuda_of(bg_backend_t *be) { return (bg_cuda_backend_t *)be; }

/* A clock (backend_cuda.h, "Clocks"): timing events recorded on one stream
 * of `be`. */
struct bg_cuda_clock {
    bg_backend_t *be;
    int device;          /* be's GPU, kept so that destroy needs no backend */
    cudaStream_t stream; /* be's compute stream, or a copy stream into it */
    cudaEvent_t *marks;
    int capacity, count;
};

/* Every stream of a backend, the compute stream first (NULL where not made
 * yet): to wait for all its work, or to destroy them. */
enum { BG_CUDA_STREAMS = 1 + 2 * BG_CUDA_LANES };
static inline void bg_cuda_streams(const bg_cuda_backend_t *cu,
                                   cudaStream_t streams[BG_CUDA_STREAMS]) {
    streams[0] = cu->compute;
    for (int lane = 0; lane < BG_CUDA_LANES; lane++) {
        streams[1 + lane] = cu->copy_in[lane];
        streams[1 + BG_CUDA_LANES + lane] = cu->copy_out[lane];
    }
}

/* Blocks of BG_CUDA_THREADS threads for a grid-stride loop over `count`
 * elements: enough to fill the GPU, never more than there are elements. */
static inline unsigned bg_cuda_blocks(int64_t count) {
    const int64_t most = 65536;
    int64_t blocks = (count + BG_CUDA_THREADS - 1) / BG_CUDA_THREADS;
    return (unsigned)(blocks < most ? blocks : most);
}

/* for (i = this thread's first element; i < count; i += threads in the grid) */
#define BG_CUDA_GRID_LOOP(i, count)                                                                \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count);                  \
         i += (int64_t)gridDim.x * blockDim.x)

#ifdef __cplusplus
extern "C" {
#endif

/* Makes the backend's GPU current on the calling thread. Every op starts so. */
bg_status_t bg_cuda_enter(bg_backend_t *be);

/* cudaMalloc with an out-of-memory message that names the bytes asked for
 * and the bytes free (BG_ERR_NOMEM). Never managed memory. */
bg_status_t bg_cuda_malloc(bg_backend_t *be, size_t bytes, void **out);

/* Copies `bytes` at `field` of the device reduction into the same place of
 * the pinned host one, zeroes the device's, and waits for the compute
 * stream: how the deferred results (the non-finite mark, the loss totals)
 * are read and cleared once per step. */
bg_status_t bg_cuda_take_reduction(bg_backend_t *be, const void *field, size_t bytes);

/* After the non-finite mark was read into the host reduction: keeps it (the
 * lowest tag of it and any read before) for take_nonfinite. */
void bg_cuda_keep_mark(bg_cuda_backend_t *cu);

/* Frees what bg_cuda_malloc returned (NULL is a no-op); errors are ignored,
 * as in destructors. */
void bg_cuda_free_quietly(void *ptr);

/* Forgets every cached convolution algorithm (backend destruction). */
void bg_cuda_conv_cache_clear(bg_cuda_backend_t *cu);

#ifdef __cplusplus
}
#endif

#endif /* BG_CUDA_INTERNAL_H */
