/* Max and average pooling, brigade's own kernels rather than cuDNN's: the
 * max-pool backward must route each gradient to the first maximum of its
 * window in row-major order (a window whose maximum is NaN routes to its
 * last position), which cuDNN does not promise, and both backwards must sum
 * overlapping windows in the CPU's order.
 *
 * Forwards run one thread per output. Backwards run one thread per input
 * element and gather from the windows that cover it, in increasing (oy, ox)
 * order starting from zero: the same sums, in the same order, as the CPU's
 * scatter (lib/cpu/kernels.inc), with no atomics and so the same bits on
 * every run; except max-pool's where 2x2 windows of stride 2 tile the
 * input (the origin CNN's), which runs a thread per window writing its
 * four elements. Geometry: x, dx (n, c, h, w); y, dy (n, c, out_h, out_w); planes
 * p = n * c. */
#include "cuda_internal.h"

/* The coordinates of element i of a (planes, height, width) array. */
typedef struct pool_position {
    int64_t plane, row, col;
} pool_position_t;

__device__ static pool_position_t pool_position(int64_t i, int64_t height, int64_t width) {
    pool_position_t at;
    at.col = i % width;
    at.row = (i / width) % height;
    at.plane = i / (width * height);
    return at;
}

/* The range [*lo, *hi] of windows along one axis that cover input position
 * `pos`: those o with o * stride <= pos < o * stride + size. */
__device__ static void covering_windows(int64_t pos, int64_t size, int64_t stride, int64_t out,
                                        int64_t *lo, int64_t *hi) {
    *lo = pos < size ? 0 : (pos - size) / stride + 1;
    *hi = pos / stride < out - 1 ? pos / stride : out - 1;
}

/* The larger of a and b, or NaN where either is (the CPU's nan_max). */
__device__ static float nan_max(float a, float b) { return a > b || isnan(a) ? a : b; }

/* x: (n,c,h,w) y: (n,c,oh,ow) */
__global__ static void maxpool_forward_kernel(float *y, const float *x, bg_pool_geometry_t g) {
    const int64_t count = g.n * g.c * g.out_h * g.out_w;
    BG_CUDA_GRID_LOOP(i, count) {
        const pool_position_t o = pool_position(i, g.out_h, g.out_w);
        const float *win = x + (o.plane * g.h + o.row * g.stride) * g.w + o.col * g.stride;
        float best;
        if (g.size == 2 && g.stride == 2) {
            /* In pairs, as the CPU's 2x2 path: which of two equal zeros
             * (+0, -0) is kept follows that order. */
            best = nan_max(nan_max(win[0], win[1]), nan_max(win[g.w], win[g.w + 1]));
        } else {
            best = win[0];
            for (int64_t ky = 0; ky < g.size; ky++)
                for (int64_t kx = 0; kx < g.size; kx++) best = nan_max(best, win[ky * g.w + kx]);
        }
        y[i] = best;
    }
}

/* Offset within its window (ky * w + kx) of the position that takes a
 * window's gradient: the first, in row-major order, holding the maximum
 * `best`; the last when none does (best is NaN). win: the window's first
 * element in x. */
__device__ static int64_t maxpool_routed(const float *win, int64_t w, int64_t size, float best) {
    for (int64_t ky = 0; ky < size; ky++)
        for (int64_t kx = 0; kx < size; kx++)
            if (win[ky * w + kx] == best) return ky * w + kx;
    return (size - 1) * w + size - 1;
}

/* Whether 2x2 windows of stride 2 tile the input: each element in one. */
static bool maxpool_tiled(const bg_pool_geometry_t *g) {
    return g->size == 2 && g->stride == 2 && g->h % 2 == 0 && g->w % 2 == 0;
}

/* maxpool_backward_kernel where the windows tile the input: a thread per
 * window writes its four dx, the routed one dy's value (copied, as the
 * CPU's tiled path does: a -0.0 stays -0.0), the others +0.0; with relu,
 * 0 where x <= 0. A quarter of the threads, and no search for the windows
 * covering an element. */
__global__ static void maxpool_backward_tiled_kernel(float *dx, const float *x, const float *y,
                                                     const float *dy, bg_pool_geometry_t g,
                                                     int relu) {
    const int64_t count = g.n * g.c * g.out_h * g.out_w;
    BG_CUDA_GRID_LOOP(o, count) {
        const pool_position_t at = pool_position(o, g.out_h, g.out_w);
        const int64_t start = (at.plane * g.h + at.row * 2) * g.w + at.col * 2;
        const int64_t routed = maxpool_routed(x + start, g.w, 2, y[o]);
        const int64_t offsets[4] = {0, 1, g.w, g.w + 1};
        for (int k = 0; k < 4; k++) {
            const int64_t j = start + offsets[k];
            const float v = offsets[k] == routed ? dy[o] : 0.0f;
            dx[j] = relu && x[j] <= 0 ? 0.0f : v; /* as relu_backward_kernel */
        }
    }
}

/* x, dx: (n,c,h,w) y, dy: (n,c,oh,ow); dx is overwritten. With relu, also
 * the backward of the relu whose output x is: 0 where x <= 0. Windows that
 * do not tile the input (maxpool_backward_tiled_kernel's do). */
__global__ static void maxpool_backward_kernel(float *dx, const float *x, const float *y,
                                               const float *dy, bg_pool_geometry_t g, int relu) {
    const int64_t count = g.n * g.c * g.h * g.w;
    BG_CUDA_GRID_LOOP(i, count) {
        const pool_position_t in = pool_position(i, g.h, g.w);
        int64_t oy_lo, oy_hi, ox_lo, ox_hi;
        covering_windows(in.row, g.size, g.stride, g.out_h, &oy_lo, &oy_hi);
        covering_windows(in.col, g.size, g.stride, g.out_w, &ox_lo, &ox_hi);
        float sum = 0;
        for (int64_t oy = oy_lo; oy <= oy_hi; oy++) {
            for (int64_t ox = ox_lo; ox <= ox_hi; ox++) {
                const int64_t o = (in.plane * g.out_h + oy) * g.out_w + ox;
                const int64_t start = (in.plane * g.h + oy * g.stride) * g.w + ox * g.stride;
                /* The CPU adds them to zeros (0 + -0.0 is +0.0). */
                if (start + maxpool_routed(x + start, g.w, g.size, y[o]) == i) sum += dy[o];
            }
        }
        dx[i] = relu && x[i] <= 0 ? 0.0f : sum; /* as relu_backward_kernel */
    }
}

/* x: (n,c,h,w) y: (n,c,oh,ow) */
__global__ static void avgpool_forward_kernel(float *y, const float *x, bg_pool_geometry_t g) {
    const float inv = 1.0f / (float)(g.size * g.size);
    const int64_t count = g.n * g.c * g.out_h * g.out_w;
    BG_CUDA_GRID_LOOP(i, count) {
        const pool_position_t o = pool_position(i, g.out_h, g.out_w);
        const float *win = x + (o.plane * g.h + o.row * g.stride) * g.w + o.col * g.stride;
        float sum = 0;
        for (int64_t ky = 0; ky < g.size; ky++)
            for (int64_t kx = 0; kx < g.size; kx++) sum += win[ky * g.w + kx];
        y[i] = sum * inv;
    }
}

/* dy: (n,c,oh,ow) dx: (n,c,h,w); dx is overwritten */
__global__ static void avgpool_backward_kernel(float *dx, const float *dy, bg_pool_geometry_t g) {
    const float inv = 1.0f / (float)(g.size * g.size);
    const int64_t count = g.n * g.c * g.h * g.w;
    BG_CUDA_GRID_LOOP(i, count) {
        const pool_position_t in = pool_position(i, g.h, g.w);
        int64_t oy_lo, oy_hi, ox_lo, ox_hi;
        covering_windows(in.row, g.size, g.stride, g.out_h, &oy_lo, &oy_hi);
        covering_windows(in.col, g.size, g.stride, g.out_w, &ox_lo, &ox_hi);
        float sum = 0;
        for (int64_t oy = oy_lo; oy <= oy_hi; oy++)
            for (int64_t ox = ox_lo; ox <= ox_hi; ox++)
                sum += dy[(in.plane * g.out_h + oy) * g.out_w + ox] * inv;
        dx[i] = sum;
    }
}

/* ---- launchers: stream last ---- */

static cudaError_t maxpool_forward(float *y, const float *x, bg_pool_geometry_t g,
                                   cudaStream_t stream) {
    const int64_t count = g.n * g.c * g.out_h * g.out_w;
    if (count == 0) return cudaSuccess;
    maxpool_forward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(y, x, g);
    return cudaGetLastError();
}

static cudaError_t maxpool_backward(float *dx, const float *x, const float *y, const float *dy,
                                    bg_pool_geometry_t g, int relu, cudaStream_t stream) {
    const int64_t count = g.n * g.c * g.h * g.w;
    if (count == 0) return cudaSuccess;
    if (maxpool_tiled(&g)) {
        const int64_t windows = count / 4;
        maxpool_backward_tiled_kernel<<<bg_cuda_blocks(windows), BG_CUDA_THREADS, 0, stream>>>(
            dx, x, y, dy, g, relu);
    } else {
        maxpool_backward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(dx, x, y, dy,
                                                                                       g, relu);
    }
    return cudaGetLastError();
}

static cudaError_t avgpool_forward(float *y, const float *x, bg_pool_geometry_t g,
                                   cudaStream_t stream) {
    const int64_t count = g.n * g.c * g.out_h * g.out_w;
    if (count == 0) return cudaSuccess;
    avgpool_forward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(y, x, g);
    return cudaGetLastError();
}

static cudaError_t avgpool_backward(float *dx, const float *dy, bg_pool_geometry_t g,
                                    cudaStream_t stream) {
    const int64_t count = g.n * g.c * g.h * g.w;
    if (count == 0) return cudaSuccess;
    avgpool_backward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(dx, dy, g);
    return cudaGetLastError();
}

/* ---- ops ---- */

extern "C" bg_status_t bg_cuda_maxpool_forward(bg_backend_t *be, const bg_pool_geometry_t *g,
                                               const void *x, void *y) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, maxpool_forward((float *)y, (const float *)x, *g, bg_cuda_of(be)->compute));
    return BG_OK;
}

/* Max-pool's backward on the compute stream, with relu that of the relu
 * whose output x is too. */
static bg_status_t run_maxpool_backward(bg_backend_t *be, const bg_pool_geometry_t *g,
                                        const void *x, const void *y, const void *dy, void *dx,
                                        int relu) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, maxpool_backward((float *)dx, (const float *)x, (const float *)y,
                                       (const float *)dy, *g, relu, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_maxpool_backward(bg_backend_t *be, const bg_pool_geometry_t *g,
                                                const void *x, const void *y, const void *dy,
                                                void *dx) {
    return run_maxpool_backward(be, g, x, y, dy, dx, 0);
}

extern "C" bg_status_t bg_cuda_maxpool_relu_backward(bg_backend_t *be, const bg_pool_geometry_t *g,
                                                     const void *x, const void *y, const void *dy,
                                                     void *dx) {
    return run_maxpool_backward(be, g, x, y, dy, dx, 1);
}

extern "C" bg_status_t bg_cuda_avgpool_forward(bg_backend_t *be, const bg_pool_geometry_t *g,
                                               const void *x, void *y) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, avgpool_forward((float *)y, (const float *)x, *g, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_avgpool_backward(bg_backend_t *be, const bg_pool_geometry_t *g,
                                                const void *dy, void *dx) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be,
                  avgpool_backward((float *)dx, (const float *)dy, *g, bg_cuda_of(be)->compute));
    return BG_OK;
}
