/* 2-D convolutions through cuDNN 9's legacy convolution API (NCHW float
 * tensors, cross-correlation as the CPU's im2col computes, symmetric zero
 * padding and equal strides from the geometry), with the per-geometry cache
 * of algorithms described in backend_cuda.h. The bias terms are brigade's own
 * kernels: y += b per channel (and with a relu after the convolution, the
 * relu in the same pass), and db += sum of dy per filter, a block per
 * filter in a fixed order (the same bits on every run). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* ---- bias kernels ---- */

/* y: (n, filters, plane) += b: (filters); with `relu`, then y = relu(y)
 * by relu_forward's expression (elementwise.cu), so the fused pass gives
 * the bits of the two. */
__global__ static void add_channel_bias_kernel(float *y, const float *b, int64_t n, int64_t filters,
                                               int64_t plane, bool relu) {
    BG_CUDA_GRID_LOOP(i, n * filters * plane) {
        const float v = y[i] + b[(i / plane) % filters];
        y[i] = !relu || !(v <= 0) ? v : 0.0f; /* NaN passes */
    }
}

/* db: (filters) += the sum of dy: (n, filters, plane) over n and plane; one
 * block of FILTER_SUM_THREADS (a power of two) per filter. The filter's
 * values, sample by sample, are v_0 .. v_(n plane - 1); thread t adds
 * v_t, v_(t+T), v_(t+2T), ... into four running sums in turn, loading
 * sixteen values before adding them so that as many loads are in flight
 * (the origin CNN's 32 filters at batch 256: 23.5 us, against 27.5 with
 * four; ncu on the H200, bench/results/README.md), and walks
 * (sample, position) by steps where a division per value made each load
 * wait on the one before; then the threads' sums by halves. The order
 * depends on the sizes alone: the same bits on every run. */
enum { FILTER_SUM_THREADS = 1024 };

__global__ static void __launch_bounds__(FILTER_SUM_THREADS)
    add_filter_sums_kernel(float *db, const float *dy, int64_t n, int64_t filters, int64_t plane) {
    __shared__ float partial[FILTER_SUM_THREADS];
    const int64_t T = FILTER_SUM_THREADS, count = n * plane, sample = filters * plane;
    /* From v_i to v_(i+T): step_s samples and step_p positions on, one
     * sample more when the position passes the plane's end. */
    const int64_t step_s = T / plane, step_p = T % plane;
    const int64_t jump = step_s * sample + step_p, wrap = sample - plane;
    int64_t i = threadIdx.x, p = i % plane;
    const float *v = dy + (i / plane) * sample + blockIdx.x * plane + p;
#define NEXT_VALUE()                                                                               \
    do {                                                                                           \
        i += T;                                                                                    \
        v += jump;                                                                                 \
        p += step_p;                                                                               \
        if (p >= plane) {                                                                          \
            p -= plane;                                                                            \
            v += wrap;                                                                             \
        }                                                                                          \
    } while (0)
    float sum0 = 0, sum1 = 0, sum2 = 0, sum3 = 0;
    /* Added into the four sums in the same turn as the loop after this
     * one: the same bits. */
    while (i + 15 * T < count) {
        float ahead[16];
#pragma unroll
        for (int k = 0; k < 16; k++) {
            ahead[k] = *v;
            NEXT_VALUE();
        }
#pragma unroll
        for (int k = 0; k < 16; k += 4) {
            sum0 += ahead[k];
            sum1 += ahead[k + 1];
            sum2 += ahead[k + 2];
            sum3 += ahead[k + 3];
        }
    }
    while (i + 3 * T < count) {
        const float a = *v;
        NEXT_VALUE();
        const float b = *v;
        NEXT_VALUE();
        const float c = *v;
        NEXT_VALUE();
        const float d = *v;
        NEXT_VALUE();
        sum0 += a;
        sum1 += b;
        sum2 += c;
        sum3 += d;
    }
    while (i < count) {
        sum0 += *v;
        NEXT_VALUE();
    }
#undef NEXT_VALUE
    partial[threadIdx.x] = (sum0 + sum1) + (sum2 + sum3);
    __syncthreads();
    for (int half = FILTER_SUM_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) db[blockIdx.x] += partial[0];
}

static cudaError_t add_channel_bias(float *y, const float *b, int64_t n, int64_t filters,
                                    int64_t plane, bool relu, cudaStream_t stream) {
    const int64_t count = n * filters * plane;
    if (count == 0) return cudaSuccess;
    add_channel_bias_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(y, b, n, filters,
                                                                                   plane, relu);
    return cudaGetLastError();
}

static cudaError_t add_filter_sums(float *db, const float *dy, int64_t n, int64_t filters,
                                   int64_t plane, cudaStream_t stream) {
    if (filters == 0 || n * plane == 0) return cudaSuccess; /* (and no division by 0) */
    add_filter_sums_kernel<<<(unsigned)filters, FILTER_SUM_THREADS, 0, stream>>>(db, dy, n, filters,
                                                                                 plane);
    return cudaGetLastError();
}

/* ---- descriptors ---- */

static int same_shape(const bg_conv2d_geometry_t *a, const bg_conv2d_geometry_t *b) {
    return a->c == b->c && a->h == b->h && a->w == b->w && a->filters == b->filters &&
           a->kernel == b->kernel && a->stride == b->stride && a->pad == b->pad &&
           a->out_h == b->out_h && a->out_w == b->out_w;
}

/* Whether a * b * c * d (each in 0..INT_MAX) is at most INT_MAX. */
static int product_fits(int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t ab, abc, abcd;
    return !__builtin_mul_overflow(a, b, &ab) && !__builtin_mul_overflow(ab, c, &abc) &&
           !__builtin_mul_overflow(abc, d, &abcd) && abcd <= INT_MAX;
}

/* cuDNN's legacy API takes int sizes and tensors of fewer than 2^31
 * elements. */
static bg_status_t check_geometry(bg_backend_t *be, const bg_conv2d_geometry_t *g) {
    const int64_t sizes[] = {g->n,      g->c,      g->h,   g->w,     g->filters,
                             g->kernel, g->stride, g->pad, g->out_h, g->out_w};
    int fits = g->stride >= 1 && g->kernel >= 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        fits = fits && sizes[i] >= 0 && sizes[i] <= INT_MAX;
    /* Each factor is at most INT_MAX, so a product of four can pass 2^63:
     * each is taken only where it did not (a wrapped one could pass the
     * bound). */
    fits = fits && product_fits(g->n, g->c, g->h, g->w) &&
           product_fits(g->n, g->filters, g->out_h, g->out_w) &&
           product_fits(g->filters, g->c, g->kernel, g->kernel);
    if (!fits)
        return bg_error_set(BG_ERR_UNSUPPORTED,
                            "%s: conv2d of (%lld, %lld, %lld, %lld) with %lld filters %lldx%lld "
                            "is beyond cuDNN's 32-bit sizes",
                            be->name, (long long)g->n, (long long)g->c, (long long)g->h,
                            (long long)g->w, (long long)g->filters, (long long)g->kernel,
                            (long long)g->kernel);
    return BG_OK;
}

/* Sets the backend's descriptors to geometry g: x (n,c,h,w), w (f,c,k,k),
 * y (n,f,oh,ow), and the convolution with the given math type. */
static bg_status_t describe(bg_backend_t *be, const bg_conv2d_geometry_t *g, cudnnMathType_t math) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    BG_CHECK(check_geometry(be, g));
    BG_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(cu->x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                  (int)g->n, (int)g->c, (int)g->h, (int)g->w));
    BG_CUDNN_CHECK(be, cudnnSetFilter4dDescriptor(cu->w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                  (int)g->filters, (int)g->c, (int)g->kernel,
                                                  (int)g->kernel));
    BG_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(cu->y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                  (int)g->n, (int)g->filters, (int)g->out_h,
                                                  (int)g->out_w));
    BG_CUDNN_CHECK(be, cudnnSetConvolution2dDescriptor(cu->conv_desc, (int)g->pad, (int)g->pad,
                                                       (int)g->stride, (int)g->stride, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    BG_CUDNN_CHECK(be, cudnnSetConvolutionMathType(cu->conv_desc, math));
    return BG_OK;
}

/* The math type algorithms are chosen under: with TF32 allowed, cuDNN's
 * default (tensor-op math may be offered), else FMA only. */
static cudnnMathType_t choice_math(const bg_cuda_backend_t *cu) {
    return cu->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* The math type a call runs with: without TF32, FMA only (cuDNN's default
 * math allows TF32 tensor cores on Ampere and later). */
static cudnnMathType_t run_math(const bg_cuda_backend_t *cu, cudnnMathType_t timed) {
    return cu->allow_tf32 ? timed : CUDNN_FMA_MATH;
}

/* ---- the choice's log (BRIGADE_CUDA_LOG_CONV=1) ---- */

/* With BRIGADE_CUDA_LOG_CONV set to 1, every geometry's algorithms go to
 * stderr as they are chosen: cuDNN's list for each direction (timed by a
 * search, or ranked by its heuristics) and the three taken, so that a run
 * on a GPU shows which algorithm gave each result and what the search
 * measured. Off by default: it is a line per algorithm. */
static int logging_conv(void) {
    const char *v = getenv("BRIGADE_CUDA_LOG_CONV");
    return v != NULL && strcmp(v, "1") == 0;
}

static void log_geometry(const bg_backend_t *be, const bg_conv2d_geometry_t *g, const char *what) {
    fprintf(stderr,
            "%s: conv2d (%lld, %lld, %lld, %lld), %lld filters %lldx%lld stride %lld pad %lld: "
            "%s\n",
            be->name, (long long)g->n, (long long)g->c, (long long)g->h, (long long)g->w,
            (long long)g->filters, (long long)g->kernel, (long long)g->kernel, (long long)g->stride,
            (long long)g->pad, what);
}

/* One direction's list as cuDNN gave it, best first. */
template <typename Perf>
static void log_results(const char *which, const Perf *results, int count) {
    for (int i = 0; i < count; i++)
        fprintf(stderr, "  %s #%d: algo %d, %s, %.4f ms, %zu bytes, math %d, %s\n", which, i,
                (int)results[i].algo, cudnnGetErrorString(results[i].status),
                (double)results[i].time, results[i].memory, (int)results[i].mathType,
                results[i].determinism == CUDNN_DETERMINISTIC ? "deterministic"
                                                              : "non-deterministic");
}

static void log_choice(const bg_cuda_conv_algos_t *a) {
    fprintf(stderr,
            "  taken: forward algo %d (math %d, %zu bytes), backward-data algo %d (math %d, %zu "
            "bytes), backward-filter algo %d (math %d, %zu bytes)\n",
            (int)a->forward, (int)a->forward_math, a->forward_bytes, (int)a->backward_data,
            (int)a->backward_data_math, a->backward_data_bytes, (int)a->backward_filter,
            (int)a->backward_filter_math, a->backward_filter_bytes);
}

/* ---- choosing algorithms ---- */

/* The algorithms never taken: cuDNN's non-fused Winograd ones for filters
 * larger than 3x3, in every direction. On the H200 (2026-12-04, cuDNN
 * 9.19) the data gradient's (algorithm 5) of (2, 16, 12, 12) with 8
 * filters 5x5, pad 2, was off the CPU's by 1e-3 of the sum of its terms'
 * magnitudes (tests/test_cuda_ops.c allows 5e-5). Winograd's transforms
 * round more the larger the filter, and the forward's and the weight
 * gradient's non-fused ones, untested at 5x5, are left out with it. For
 * 3x3 filters they matched the CPU's whenever they were taken. */
static int untrusted(cudnnConvolutionFwdAlgo_t a, int64_t kernel) {
    return kernel > 3 && a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
static int untrusted(cudnnConvolutionBwdDataAlgo_t a, int64_t kernel) {
    return kernel > 3 && a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
static int untrusted(cudnnConvolutionBwdFilterAlgo_t a, int64_t kernel) {
    return kernel > 3 && a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

/* Index of the result to use among cudnnFind's, which come fastest first:
 * the fastest that succeeded, is not untrusted for filters of `kernel`,
 * fits `limit`, is not passed_over[i] and uses no tensor-op math unless
 * TF32 is allowed, and never tensor-op math that may convert the float
 * data down (ALLOW_CONVERSION: to half precision, which TF32 does not
 * promise), preferring deterministic ones and,
 * without TF32, ones timed under FMA math (the math they will run with;
 * cuDNN's default math may have timed a TF32 kernel); -1 when none fits. */
template <typename Perf>
static int choose(const Perf *results, int count, size_t limit, int allow_tf32, int64_t kernel,
                  const unsigned char *passed_over) {
    for (int pass = 0; pass < 4; pass++) {
        const int deterministic_only = pass < 2, fma_only = !allow_tf32 && pass % 2 == 0;
        for (int i = 0; i < count; i++) {
            const Perf *r = &results[i];
            if (passed_over[i] || r->status != CUDNN_STATUS_SUCCESS || r->memory > limit ||
                untrusted(r->algo, kernel))
                continue;
            if (r->mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
                (!allow_tf32 && r->mathType == CUDNN_TENSOR_OP_MATH))
                continue;
            if (deterministic_only && r->determinism != CUDNN_DETERMINISTIC) continue;
            if (fma_only && r->mathType != CUDNN_FMA_MATH) continue;
            return i;
        }
    }
    return -1;
}

/* The most of cuDNN's results an algorithm is chosen from: more than any
 * direction has algorithms. */
enum { MAX_RESULTS = 64 };

/* The error when choose() found none among cuDNN's `count` results (at
 * most MAX_RESULTS):
 * blaming the workspace only where a result would have been taken but for
 * it (else every one failed, is untrusted, or needs tensor-op math). */
template <typename Perf>
static bg_status_t none_fits(bg_backend_t *be, const char *which, const bg_conv2d_geometry_t *g,
                             const Perf *results, int count, size_t limit) {
    const unsigned char none_passed_over[MAX_RESULTS] = {0};
    const int by_workspace = choose(results, count, SIZE_MAX, bg_cuda_of(be)->allow_tf32, g->kernel,
                                    none_passed_over) >= 0;
    char reason[256];
    if (by_workspace)
        snprintf(reason, sizeof reason,
                 "within %zu bytes of workspace (the backend's conv_workspace_limit, brigade's "
                 "--conv-workspace, or what the GPU had free for its search)",
                 limit);
    else
        snprintf(reason, sizeof reason,
                 "that brigade takes: each failed, is Winograd's for filters over 3x3, or needs "
                 "tensor-op math%s",
                 bg_cuda_of(be)->allow_tf32 ? "" : " (--tf32 allows TF32)");
    return bg_error_set(BG_ERR_BACKEND,
                        "%s: cuDNN has no %s algorithm for conv2d of (%lld, %lld, %lld, %lld) with "
                        "%lld filters %lldx%lld %s",
                        be->name, which, (long long)g->n, (long long)g->c, (long long)g->h,
                        (long long)g->w, (long long)g->filters, (long long)g->kernel,
                        (long long)g->kernel, reason);
}

/* Scratch for a search: `limit` bytes, or less when the device has less
 * free (halving, and giving up below 1 MiB). *got is what was allocated.
 * Running short only narrows the choice; any other CUDA error (a fault of
 * an earlier kernel, say) is returned, under its own call's name. */
static bg_status_t search_workspace(bg_backend_t *be, size_t limit, void **out, size_t *got) {
    size_t bytes = limit;
    *out = NULL;
    *got = 0;
    while (bytes > 0) {
        const bg_status_t st = bg_cuda_malloc(be, bytes, out);
        if (st == BG_OK) {
            *got = bytes;
            return BG_OK;
        }
        *out = NULL;
        if (st != BG_ERR_NOMEM) return st;
        bytes = bytes > ((size_t)1 << 20) ? bytes / 2 : 0;
    }
    bg_error_clear();
    return BG_OK;
}

/* cuDNN's workspace query for one algorithm of one direction (g's
 * descriptors set, the convolution's math type set to the one the
 * algorithm will run with). */
static cudnnStatus_t query_bytes(bg_cuda_backend_t *cu, cudnnConvolutionFwdAlgo_t algo,
                                 size_t *bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(cu->cudnn, cu->x_desc, cu->w_desc, cu->conv_desc,
                                                   cu->y_desc, algo, bytes);
}

static cudnnStatus_t query_bytes(bg_cuda_backend_t *cu, cudnnConvolutionBwdDataAlgo_t algo,
                                 size_t *bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(cu->cudnn, cu->w_desc, cu->y_desc,
                                                        cu->conv_desc, cu->x_desc, algo, bytes);
}

static cudnnStatus_t query_bytes(bg_cuda_backend_t *cu, cudnnConvolutionBwdFilterAlgo_t algo,
                                 size_t *bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(cu->cudnn, cu->x_desc, cu->y_desc,
                                                          cu->conv_desc, cu->w_desc, algo, bytes);
}

/* Takes the result `choose` picks among `count` (cuDNN's list for one
 * direction, best first, g's descriptors set) into *algo, *math and
 * *bytes. Its workspace is the larger of the list's figure and cuDNN's
 * query under the math it will run with (without TF32, FMA even where cuDNN
 * timed or ranked it under its default math). A choice whose workspace
 * exceeds `limit`, or which the query refuses under that math, is passed
 * over for the next. The error when none is left. The convolution's math
 * type is set back to the one algorithms are chosen under, for the
 * searches and rankings that follow. */
template <typename Perf, typename Algo>
static bg_status_t take(bg_backend_t *be, const char *which, const bg_conv2d_geometry_t *g,
                        const Perf *results, int count, size_t limit, Algo *algo,
                        cudnnMathType_t *math, size_t *bytes) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    unsigned char passed_over[MAX_RESULTS] = {0};
    if (count > MAX_RESULTS) count = MAX_RESULTS;
    cudnnStatus_t refused = CUDNN_STATUS_SUCCESS; /* the last query that failed */
    for (;;) {
        const int pick = choose(results, count, limit, cu->allow_tf32, g->kernel, passed_over);
        /* None left: cuDNN's own error if a query failed, as it may be
         * why none fits. */
        if (pick < 0 && refused != CUDNN_STATUS_SUCCESS)
            return bg_cudnn_fail(be, refused, "the workspace query of every fitting algorithm",
                                 __FILE__, __LINE__);
        if (pick < 0) return none_fits(be, which, g, results, count, limit);
        size_t queried = 0;
        BG_CUDNN_CHECK(
            be, cudnnSetConvolutionMathType(cu->conv_desc, run_math(cu, results[pick].mathType)));
        const cudnnStatus_t asked = query_bytes(cu, results[pick].algo, &queried);
        BG_CUDNN_CHECK(be, cudnnSetConvolutionMathType(cu->conv_desc, choice_math(cu)));
        const size_t needed = queried > results[pick].memory ? queried : results[pick].memory;
        if (asked == CUDNN_STATUS_SUCCESS && needed <= limit) {
            /* A query passed over left its explanation behind: read it
             * (cuDNN resets it once read), so that it is not taken for a
             * later failure's. */
            if (refused != CUDNN_STATUS_SUCCESS) {
                char stale[256];
                cudnnGetLastErrorString(stale, sizeof stale);
            }
            /* Said once per geometry and direction, as choices are
             * cached: a run on this GPU is then not bit-reproducible. */
            if (results[pick].determinism != CUDNN_DETERMINISTIC)
                fprintf(stderr,
                        "note: %s: no deterministic %s algorithm of cuDNN fits %zu bytes of "
                        "workspace for conv2d of (%lld, %lld, %lld, %lld) with %lld filters "
                        "%lldx%lld; the one taken may round differently from run to run (a "
                        "larger --conv-workspace may leave room for a deterministic one)\n",
                        be->name, which, limit, (long long)g->n, (long long)g->c, (long long)g->h,
                        (long long)g->w, (long long)g->filters, (long long)g->kernel,
                        (long long)g->kernel);
            *algo = results[pick].algo;
            *math = results[pick].mathType;
            *bytes = needed;
            return BG_OK;
        }
        if (asked != CUDNN_STATUS_SUCCESS) refused = asked;
        passed_over[pick] = 1;
    }
}

/* a->workspace_bytes: the most any of its three algorithms needs. */
static void set_workspace_bytes(bg_cuda_conv_algos_t *a) {
    a->workspace_bytes = a->forward_bytes;
    if (a->backward_data_bytes > a->workspace_bytes) a->workspace_bytes = a->backward_data_bytes;
    if (a->backward_filter_bytes > a->workspace_bytes)
        a->workspace_bytes = a->backward_filter_bytes;
}

/* Times every algorithm of the three convolutions of g (cudnnFind*Ex on
 * zeroed scratch tensors) and fills *a with the choices, within scratch of
 * `limit` bytes allocated here (less when the device has less free). */
static bg_status_t search(bg_backend_t *be, const bg_conv2d_geometry_t *g, size_t limit,
                          bg_cuda_conv_algos_t *a) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    size_t x_bytes = 0, w_bytes = 0, y_bytes = 0; /* once describe() has checked g's sizes */
    void *x = NULL, *w = NULL, *y = NULL, *workspace = NULL;
    cudnnConvolutionFwdAlgoPerf_t forward[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t backward_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t backward_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int returned = 0, out_n = 0, out_c = 0, out_h = 0, out_w = 0;
    bg_status_t st = BG_OK;
    const int log = logging_conv();

    BG_CHECK_GOTO(describe(be, g, choice_math(cu)), st, done);
    BG_CUDNN_CHECK_GOTO(be,
                        cudnnGetConvolution2dForwardOutputDim(cu->conv_desc, cu->x_desc, cu->w_desc,
                                                              &out_n, &out_c, &out_h, &out_w),
                        st, done);
    if (out_h != g->out_h || out_w != g->out_w) {
        st = bg_error_set(BG_ERR_INVALID,
                          "%s: conv2d geometry says %lldx%lld outputs, cuDNN computes %dx%d",
                          be->name, (long long)g->out_h, (long long)g->out_w, out_h, out_w);
        goto done;
    }
    x_bytes = sizeof(float) * (size_t)(g->n * g->c * g->h * g->w);
    w_bytes = sizeof(float) * (size_t)(g->filters * g->c * g->kernel * g->kernel);
    y_bytes = sizeof(float) * (size_t)(g->n * g->filters * g->out_h * g->out_w);
    BG_CHECK_GOTO(bg_cuda_malloc(be, x_bytes, &x), st, done);
    BG_CHECK_GOTO(bg_cuda_malloc(be, w_bytes, &w), st, done);
    BG_CHECK_GOTO(bg_cuda_malloc(be, y_bytes, &y), st, done);
    /* Zeros rather than leftover bits: NaNs or denormals could skew timings. */
    BG_CUDA_CHECK_GOTO(be, cudaMemsetAsync(x, 0, x_bytes, cu->compute), st, done);
    BG_CUDA_CHECK_GOTO(be, cudaMemsetAsync(w, 0, w_bytes, cu->compute), st, done);
    BG_CUDA_CHECK_GOTO(be, cudaMemsetAsync(y, 0, y_bytes, cu->compute), st, done);
    if (limit > 0) BG_CHECK_GOTO(search_workspace(be, limit, &workspace, &limit), st, done);
    if (log) log_geometry(be, g, "cudnnFind* timed (ms) within the scratch it got");

    BG_CUDNN_CHECK_GOTO(be,
                        cudnnFindConvolutionForwardAlgorithmEx(
                            cu->cudnn, cu->x_desc, x, cu->w_desc, w, cu->conv_desc, cu->y_desc, y,
                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, forward, workspace, limit),
                        st, done);
    if (log) log_results("forward", forward, returned);
    BG_CHECK_GOTO(take(be, "forward", g, forward, returned, limit, &a->forward, &a->forward_math,
                       &a->forward_bytes),
                  st, done);
    /* dy is y's scratch, dx is x's. */
    BG_CUDNN_CHECK_GOTO(be,
                        cudnnFindConvolutionBackwardDataAlgorithmEx(
                            cu->cudnn, cu->w_desc, w, cu->y_desc, y, cu->conv_desc, cu->x_desc, x,
                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, backward_data,
                            workspace, limit),
                        st, done);
    if (log) log_results("backward-data", backward_data, returned);
    BG_CHECK_GOTO(take(be, "backward-data", g, backward_data, returned, limit, &a->backward_data,
                       &a->backward_data_math, &a->backward_data_bytes),
                  st, done);
    /* dy is y's scratch, dw is w's. */
    BG_CUDNN_CHECK_GOTO(be,
                        cudnnFindConvolutionBackwardFilterAlgorithmEx(
                            cu->cudnn, cu->x_desc, x, cu->y_desc, y, cu->conv_desc, cu->w_desc, w,
                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, backward_filter,
                            workspace, limit),
                        st, done);
    if (log) log_results("backward-filter", backward_filter, returned);
    BG_CHECK_GOTO(take(be, "backward-filter", g, backward_filter, returned, limit,
                       &a->backward_filter, &a->backward_filter_math, &a->backward_filter_bytes),
                  st, done);
    set_workspace_bytes(a);
done:
    /* The searches ran on the compute stream (cudnnSetStream); cudaFree
     * need not wait for them, so this does. A failure here is the search's
     * unless it failed already. */
    const cudaError_t synced = cudaStreamSynchronize(cu->compute);
    if (synced != cudaSuccess && st == BG_OK)
        st = bg_cuda_fail(be, synced, "cudaStreamSynchronize(compute)", __FILE__, __LINE__);
    else if (synced != cudaSuccess)
        (void)cudaGetLastError();
    bg_cuda_free_quietly(workspace);
    bg_cuda_free_quietly(y);
    bg_cuda_free_quietly(w);
    bg_cuda_free_quietly(x);
    return st;
}

/* Fills *a with the algorithms cuDNN's heuristics rank first for g
 * (cudnnGet*Algorithm_v7, by the same rules as a search) within `limit`
 * bytes of workspace. Nothing is timed, allocated or waited for, so an op
 * can do this in the middle of a step. */
static bg_status_t rank(bg_backend_t *be, const bg_conv2d_geometry_t *g, size_t limit,
                        bg_cuda_conv_algos_t *a) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    cudnnConvolutionFwdAlgoPerf_t forward[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t backward_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t backward_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int returned = 0;
    const int log = logging_conv();
    BG_CHECK(describe(be, g, choice_math(cu)));
    if (log) log_geometry(be, g, "cudnnGet*_v7 ranked (untimed) for an op's workspace");
    BG_CUDNN_CHECK(be, cudnnGetConvolutionForwardAlgorithm_v7(
                           cu->cudnn, cu->x_desc, cu->w_desc, cu->conv_desc, cu->y_desc,
                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, forward));
    if (log) log_results("forward", forward, returned);
    BG_CHECK(take(be, "forward", g, forward, returned, limit, &a->forward, &a->forward_math,
                  &a->forward_bytes));
    BG_CUDNN_CHECK(be, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                           cu->cudnn, cu->w_desc, cu->y_desc, cu->conv_desc, cu->x_desc,
                           CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, backward_data));
    if (log) log_results("backward-data", backward_data, returned);
    BG_CHECK(take(be, "backward-data", g, backward_data, returned, limit, &a->backward_data,
                  &a->backward_data_math, &a->backward_data_bytes));
    BG_CUDNN_CHECK(be, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                           cu->cudnn, cu->x_desc, cu->y_desc, cu->conv_desc, cu->w_desc,
                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, backward_filter));
    if (log) log_results("backward-filter", backward_filter, returned);
    BG_CHECK(take(be, "backward-filter", g, backward_filter, returned, limit, &a->backward_filter,
                  &a->backward_filter_math, &a->backward_filter_bytes));
    set_workspace_bytes(a);
    return BG_OK;
}

/* The cached algorithms of g, found on a miss. `sizing`: called from
 * conv2d_workspace_bytes, which searches (times every algorithm) within the
 * configured limit and marks the entry as one a caller sizes its workspace
 * from. Otherwise (an op) the caller's workspace is only known to hold the
 * smallest sized entry of the same shape with a batch at least g->n (0
 * bytes when there is none, or no workspace): a cached entry for g->n that
 * needs more (sized by another caller, at this batch) is passed over, and a
 * miss takes cuDNN's heuristic ranking within that bound, since a search
 * would allocate and wait in the middle of a step. *out is a copy: the
 * cache may move. */
static bg_status_t algorithms(bg_backend_t *be, const bg_conv2d_geometry_t *g, int sizing,
                              void *workspace, bg_cuda_conv_algos_t *out) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    size_t limit = sizing ? cu->conv_workspace_limit : 0;
    int sized_found = 0;
    for (int i = 0; !sizing && i < cu->conv_cache_count; i++) {
        const bg_cuda_conv_algos_t *entry = &cu->conv_cache[i];
        if (same_shape(&entry->geometry, g) && entry->sized && entry->geometry.n >= g->n &&
            (!sized_found || entry->workspace_bytes < limit)) {
            limit = entry->workspace_bytes;
            sized_found = 1;
        }
    }
    if (!sizing && workspace == NULL) limit = 0; /* the op has nothing to run within */
    /* An entry of g's shape and batch; for an op, one within the limit, a
     * searched (timed) one before one ranked by heuristics. */
    int pick = -1;
    for (int i = 0; i < cu->conv_cache_count; i++) {
        bg_cuda_conv_algos_t *entry = &cu->conv_cache[i];
        if (!same_shape(&entry->geometry, g) || entry->geometry.n != g->n) continue;
        if (sizing) {
            /* A ranked entry was picked within some op's limit, untimed:
             * sizing searches afresh rather than sizing from it. */
            if (!entry->searched) continue;
            entry->sized = 1;
            pick = i;
            break;
        }
        if (entry->workspace_bytes > limit) continue;
        if (pick < 0 || (entry->searched && !cu->conv_cache[pick].searched)) pick = i;
    }
    if (pick >= 0) {
        *out = cu->conv_cache[pick];
        return BG_OK;
    }
    if (cu->conv_cache_count == cu->conv_cache_capacity) {
        const int capacity = cu->conv_cache_capacity > 0 ? 2 * cu->conv_cache_capacity : 8;
        bg_cuda_conv_algos_t *grown =
            (bg_cuda_conv_algos_t *)realloc(cu->conv_cache, sizeof *grown * (size_t)capacity);
        if (grown == NULL)
            return bg_error_set(BG_ERR_NOMEM, "%s: out of memory caching conv2d algorithms",
                                be->name);
        cu->conv_cache = grown;
        cu->conv_cache_capacity = capacity;
    }
    bg_cuda_conv_algos_t found = {};
    found.geometry = *g;
    found.sized = sizing;
    found.searched = sizing;
    BG_CHECK(sizing ? search(be, g, limit, &found) : rank(be, g, limit, &found));
    if (logging_conv()) log_choice(&found);
    cu->conv_cache[cu->conv_cache_count++] = found;
    *out = found;
    return BG_OK;
}

extern "C" void bg_cuda_conv_cache_clear(bg_cuda_backend_t *cu) {
    free(cu->conv_cache);
    cu->conv_cache = NULL;
    cu->conv_cache_count = cu->conv_cache_capacity = 0;
}

/* An algorithm needing workspace must get some. */
static bg_status_t check_workspace(bg_backend_t *be, size_t bytes, const void *workspace) {
    if (bytes > 0 && workspace == NULL)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: conv2d needs %zu bytes of workspace and got none (size it with "
                            "conv2d_workspace_bytes)",
                            be->name, bytes);
    return BG_OK;
}

/* ---- ops ---- */

/* The largest workspace the chosen algorithms of g need; a failed search is
 * the error (backend.h: a backend that cannot size it fails). */
extern "C" bg_status_t
bg_cuda_conv2d_workspace_bytes(bg_backend_t *be, const bg_conv2d_geometry_t *g, size_t *bytes) {
    bg_cuda_conv_algos_t a = {};
    *bytes = 0;
    if (g->n == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CHECK(algorithms(be, g, 1, NULL, &a));
    *bytes = a.workspace_bytes;
    return BG_OK;
}

/* y = conv(x, w) + b, then with `relu` relu(y) in the bias's pass. */
static bg_status_t conv_forward(bg_backend_t *be, const bg_conv2d_geometry_t *g, const void *x,
                                const void *w, const void *b, void *y, void *workspace, bool relu) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    bg_cuda_conv_algos_t a = {};
    const float one = 1, zero = 0;
    if (g->n == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CHECK(algorithms(be, g, 0, workspace, &a));
    BG_CHECK(check_workspace(be, a.forward_bytes, workspace));
    BG_CHECK(describe(be, g, run_math(cu, a.forward_math)));
    /* y (n,f,oh,ow) = conv(x (n,c,h,w), w (f,c,k,k)) */
    BG_CUDNN_CHECK(be, cudnnConvolutionForward(cu->cudnn, &one, cu->x_desc, x, cu->w_desc, w,
                                               cu->conv_desc, a.forward, workspace, a.forward_bytes,
                                               &zero, cu->y_desc, y));
    BG_CUDA_CHECK(be, add_channel_bias((float *)y, (const float *)b, g->n, g->filters,
                                       g->out_h * g->out_w, relu, cu->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_conv2d_forward(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                              const void *x, const void *w, const void *b, void *y,
                                              void *workspace) {
    return conv_forward(be, g, x, w, b, y, workspace, false);
}

extern "C" bg_status_t bg_cuda_conv2d_relu_forward(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                                   const void *x, const void *w, const void *b,
                                                   void *y, void *workspace) {
    return conv_forward(be, g, x, w, b, y, workspace, true);
}

extern "C" bg_status_t bg_cuda_conv2d_backward_data(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                                    const void *dy, const void *w, void *dx,
                                                    void *workspace) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    bg_cuda_conv_algos_t a = {};
    const float one = 1, zero = 0;
    if (g->n == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CHECK(algorithms(be, g, 0, workspace, &a));
    BG_CHECK(check_workspace(be, a.backward_data_bytes, workspace));
    BG_CHECK(describe(be, g, run_math(cu, a.backward_data_math)));
    /* dx (n,c,h,w) = conv_transpose(dy (n,f,oh,ow), w (f,c,k,k)); beta = 0
     * overwrites */
    BG_CUDNN_CHECK(be, cudnnConvolutionBackwardData(cu->cudnn, &one, cu->w_desc, w, cu->y_desc, dy,
                                                    cu->conv_desc, a.backward_data, workspace,
                                                    a.backward_data_bytes, &zero, cu->x_desc, dx));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_conv2d_backward_weights(bg_backend_t *be,
                                                       const bg_conv2d_geometry_t *g, const void *x,
                                                       const void *dy, void *dw, void *db,
                                                       void *workspace) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    bg_cuda_conv_algos_t a = {};
    const float one = 1;
    if (g->n == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CHECK(algorithms(be, g, 0, workspace, &a));
    BG_CHECK(check_workspace(be, a.backward_filter_bytes, workspace));
    BG_CHECK(describe(be, g, run_math(cu, a.backward_filter_math)));
    /* dw (f,c,k,k) += x (n,c,h,w) (*) dy (n,f,oh,ow); beta = 1 accumulates */
    BG_CUDNN_CHECK(be,
                   cudnnConvolutionBackwardFilter(cu->cudnn, &one, cu->x_desc, x, cu->y_desc, dy,
                                                  cu->conv_desc, a.backward_filter, workspace,
                                                  a.backward_filter_bytes, &one, cu->w_desc, dw));
    /* db (f) += sum of dy over n, oh, ow */
    BG_CUDA_CHECK(be, add_filter_sums((float *)db, (const float *)dy, g->n, g->filters,
                                      g->out_h * g->out_w, cu->compute));
    return BG_OK;
}
