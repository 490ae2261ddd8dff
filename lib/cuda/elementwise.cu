/* Elementwise ops: zero, copy, scale, add, relu, the optimizer updates and the
 * finiteness check. Each kernel is the loop body of its CPU reference
 * (lib/cpu/kernels.inc) over a grid-stride loop, with the same expressions
 * in the same order; built with --fmad=false (lib/meson.build), so nothing
 * is contracted into an FMA and the results are the CPU's bits. */
#include <limits.h>
#include <math.h>

#include "cuda_internal.h"

/* ---- kernels ---- */

/* x: (count) */
__global__ static void scale_kernel(float *x, int64_t count, float alpha) {
    BG_CUDA_GRID_LOOP(i, count) x[i] *= alpha;
}

/* a, b, y: (count); y may alias a or b */
__global__ static void add_kernel(float *y, const float *a, const float *b, int64_t count) {
    BG_CUDA_GRID_LOOP(i, count) y[i] = a[i] + b[i];
}

/* x, y: (count); may alias */
__global__ static void relu_forward_kernel(float *y, const float *x, int64_t count) {
    BG_CUDA_GRID_LOOP(i, count) {
        const float v = x[i];
        y[i] = !(v <= 0) ? v : 0.0f; /* NaN passes, as on the CPU */
    }
}

/* y, dy, dx: (count); dy and dx may alias */
__global__ static void relu_backward_kernel(float *dx, const float *y, const float *dy,
                                            int64_t count) {
    BG_CUDA_GRID_LOOP(i, count) {
        const float g = dy[i];
        dx[i] = !(y[i] <= 0) ? g : 0.0f; /* as on the CPU */
    }
}

/* The SGD hyper-parameters rounded to float on the host, as the CPU does. */
typedef struct sgd_coefficients {
    float lr, weight_decay, momentum, damp; /* damp = 1 - dampening, in double then rounded */
    int nesterov, first_step;
} sgd_coefficients_t;

/* param, grad, velocity: (count) */
__global__ static void sgd_update_kernel(float *param, const float *grad, float *velocity,
                                         int64_t count, sgd_coefficients_t c) {
    BG_CUDA_GRID_LOOP(i, count) {
        float g = grad[i] + c.weight_decay * param[i];
        if (c.momentum != 0) {
            /* PyTorch starts the buffer at the first gradient, undampened. */
            velocity[i] = c.first_step ? g : c.momentum * velocity[i] + c.damp * g;
            g = c.nesterov ? g + c.momentum * velocity[i] : velocity[i];
        }
        param[i] -= c.lr * g;
    }
}

/* The Adam coefficients, computed on the host exactly as the CPU does:
 * 1 - beta in double then rounded, the bias corrections in double. */
typedef struct adam_coefficients {
    float beta1, beta2, weight_decay, eps;
    float one_minus_beta1, one_minus_beta2;
    float step_size, inv_sqrt_correction2;
} adam_coefficients_t;

/* param, grad, m, v: (count), distinct buffers */
__global__ static void adam_update_kernel(float *__restrict__ param, const float *__restrict__ grad,
                                          float *__restrict__ m, float *__restrict__ v,
                                          int64_t count, adam_coefficients_t c) {
    BG_CUDA_GRID_LOOP(i, count) {
        const float g = grad[i] + c.weight_decay * param[i];
        const float mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
        const float vi = c.beta2 * v[i] + c.one_minus_beta2 * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] -= c.step_size * mi / (sqrtf(vi) * c.inv_sqrt_correction2 + c.eps);
    }
}

/* x: (count); raises *flag to `value` when some element is Inf or NaN
 * (atomicMax: scans with different values may run at once; the plain read
 * first spares a tensor of NaNs an atomic per element, and a stale read
 * only costs an atomic that changes nothing). */
__global__ static void all_finite_kernel(int *flag, int value, const float *x, int64_t count) {
    BG_CUDA_GRID_LOOP(i, count) {
        if (!isfinite(x[i]) && *(volatile int *)flag < value) atomicMax(flag, value);
    }
}

/* One block of SQUARE_SUM_THREADS adds the squares of x in double: thread
 * t over x[t], x[t + threads], ... in turn, then the threads' sums by
 * halves. The order depends on count alone, so a tensor's sum is the same
 * wherever it lies. */
enum { SQUARE_SUM_THREADS = 512 };

__global__ static void square_sum_kernel(double *sum, const float *x, int64_t count) {
    __shared__ double partial[SQUARE_SUM_THREADS];
    double own = 0;
    for (int64_t i = threadIdx.x; i < count; i += SQUARE_SUM_THREADS)
        own += (double)x[i] * (double)x[i];
    partial[threadIdx.x] = own;
    __syncthreads();
    for (int half = SQUARE_SUM_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) *sum = partial[0];
}

/* ---- launchers: stream last; each returns the launch's error ---- */

static cudaError_t square_sum(double *sum, const float *x, int64_t count, cudaStream_t stream) {
    square_sum_kernel<<<1, SQUARE_SUM_THREADS, 0, stream>>>(sum, x, count);
    return cudaGetLastError();
}

static cudaError_t scale(float *x, int64_t count, float alpha, cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    scale_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(x, count, alpha);
    return cudaGetLastError();
}

static cudaError_t add(float *y, const float *a, const float *b, int64_t count,
                       cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    add_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(y, a, b, count);
    return cudaGetLastError();
}

static cudaError_t relu_forward(float *y, const float *x, int64_t count, cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    relu_forward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(y, x, count);
    return cudaGetLastError();
}

static cudaError_t relu_backward(float *dx, const float *y, const float *dy, int64_t count,
                                 cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    relu_backward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(dx, y, dy, count);
    return cudaGetLastError();
}

static cudaError_t sgd_update(float *param, const float *grad, float *velocity, int64_t count,
                              sgd_coefficients_t c, cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    sgd_update_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(param, grad, velocity,
                                                                             count, c);
    return cudaGetLastError();
}

static cudaError_t adam_update(float *param, const float *grad, float *m, float *v, int64_t count,
                               adam_coefficients_t c, cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    adam_update_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(param, grad, m, v,
                                                                              count, c);
    return cudaGetLastError();
}

static cudaError_t all_finite(int *flag, int value, const float *x, int64_t count,
                              cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    all_finite_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(flag, value, x, count);
    return cudaGetLastError();
}

/* ---- ops ---- */

extern "C" bg_status_t bg_cuda_zero(bg_backend_t *be, void *x, int64_t n) {
    if (n == 0) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, cudaMemsetAsync(x, 0, sizeof(float) * (size_t)n, bg_cuda_of(be)->compute));
    return BG_OK;
}

/* dst and src must not overlap unless they are equal (the CPU's memmove
 * allows overlap; no caller needs it). */
extern "C" bg_status_t bg_cuda_copy(bg_backend_t *be, void *dst, const void *src, int64_t n) {
    if (n == 0 || dst == src) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, cudaMemcpyAsync(dst, src, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice,
                                      bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_scale(bg_backend_t *be, void *x, int64_t n, double alpha) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, scale((float *)x, n, (float)alpha, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_add(bg_backend_t *be, int64_t count, const void *a, const void *b,
                                   void *y) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(
        be, add((float *)y, (const float *)a, (const float *)b, count, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_relu_forward(bg_backend_t *be, int64_t count, const void *x,
                                            void *y) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, relu_forward((float *)y, (const float *)x, count, bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_relu_backward(bg_backend_t *be, int64_t count, const void *y,
                                             const void *dy, void *dx) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, relu_backward((float *)dx, (const float *)y, (const float *)dy, count,
                                    bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_sgd_update(bg_backend_t *be, int64_t count, void *param,
                                          const void *grad, void *velocity,
                                          const bg_sgd_config_t *cfg, int64_t step) {
    sgd_coefficients_t c;
    c.lr = (float)cfg->lr;
    c.weight_decay = (float)cfg->weight_decay;
    c.momentum = (float)cfg->momentum;
    c.damp = (float)(1.0 - cfg->dampening);
    c.nesterov = cfg->nesterov != 0;
    c.first_step = step == 1;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, sgd_update((float *)param, (const float *)grad, (float *)velocity, count, c,
                                 bg_cuda_of(be)->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_adam_update(bg_backend_t *be, int64_t count, void *param,
                                           const void *grad, void *m, void *v,
                                           const bg_adam_config_t *cfg, int64_t step) {
    const double correction1 = 1.0 - pow(cfg->beta1, (double)step);
    const double correction2 = 1.0 - pow(cfg->beta2, (double)step);
    adam_coefficients_t c;
    c.beta1 = (float)cfg->beta1;
    c.beta2 = (float)cfg->beta2;
    c.weight_decay = (float)cfg->weight_decay;
    c.eps = (float)cfg->eps;
    /* 1 - beta in double, then rounded, as PyTorch and the CPU do. */
    c.one_minus_beta1 = (float)(1.0 - cfg->beta1);
    c.one_minus_beta2 = (float)(1.0 - cfg->beta2);
    c.step_size = (float)(cfg->lr / correction1);
    c.inv_sqrt_correction2 = (float)(1.0 / sqrt(correction2));
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, adam_update((float *)param, (const float *)grad, (float *)m, (float *)v,
                                  count, c, bg_cuda_of(be)->compute));
    return BG_OK;
}

/* Returns a host value, so it waits for the compute stream. */
extern "C" bg_status_t bg_cuda_square_sum(bg_backend_t *be, int64_t count, const void *x,
                                          double *out) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    double *sum = &cu->device_reduction->square_sum;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, square_sum(sum, (const float *)x, count, cu->compute));
    BG_CUDA_CHECK(be, cudaMemcpyAsync(&cu->host_reduction->square_sum, sum, sizeof *sum,
                                      cudaMemcpyDeviceToHost, cu->compute));
    BG_CUDA_CHECK(be, cudaStreamSynchronize(cu->compute));
    *out = cu->host_reduction->square_sum;
    return BG_OK;
}

/* Returns a host value, so it waits for the compute stream. */
extern "C" bg_status_t bg_cuda_all_finite(bg_backend_t *be, int64_t count, const void *x,
                                          int *out) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    int *nonfinite = &cu->device_reduction->nonfinite;
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, cudaMemsetAsync(nonfinite, 0, sizeof *nonfinite, cu->compute));
    BG_CUDA_CHECK(be, all_finite(nonfinite, 1, (const float *)x, count, cu->compute));
    BG_CUDA_CHECK(be, cudaMemcpyAsync(&cu->host_reduction->nonfinite, nonfinite, sizeof *nonfinite,
                                      cudaMemcpyDeviceToHost, cu->compute));
    BG_CUDA_CHECK(be, cudaStreamSynchronize(cu->compute));
    *out = cu->host_reduction->nonfinite == 0;
    return BG_OK;
}

/* Enqueued on the compute stream after the ops that wrote x; no wait. */
extern "C" bg_status_t bg_cuda_mark_nonfinite(bg_backend_t *be, int64_t count, const void *x,
                                              int tag) {
    if (tag < 0 || tag == INT_MAX)
        return bg_error_set(BG_ERR_INTERNAL, "%s: non-finite mark tag %d out of range", be->name,
                            tag);
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    BG_CHECK(bg_cuda_enter(be));
    cu->mark_pending = 1;
    BG_CUDA_CHECK(be, all_finite(&cu->device_reduction->job_end.nonfinite_mark, INT_MAX - tag,
                                 (const float *)x, count, cu->compute));
    return BG_OK;
}

extern "C" void bg_cuda_keep_mark(bg_cuda_backend_t *cu) {
    /* The higher word is the lower tag. */
    if (cu->host_reduction->job_end.nonfinite_mark > cu->mark_read)
        cu->mark_read = cu->host_reduction->job_end.nonfinite_mark;
    cu->mark_pending = 0;
}

/* The one wait, for the marks enqueued so far; none when take_loss read
 * them all. */
extern "C" bg_status_t bg_cuda_take_nonfinite(bg_backend_t *be, int *tag) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    if (cu->mark_pending) {
        BG_CHECK(bg_cuda_take_reduction(be, &cu->device_reduction->job_end.nonfinite_mark,
                                        sizeof cu->device_reduction->job_end.nonfinite_mark));
        bg_cuda_keep_mark(cu);
    }
    const int marked = cu->mark_read;
    cu->mark_read = 0;
    *tag = marked == 0 ? -1 : INT_MAX - marked;
    return BG_OK;
}
