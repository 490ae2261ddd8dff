/* Softmax with cross-entropy. The forward returns host values (the loss
 * sum and the correct count), so it waits for the GPU: one kernel computes
 * each row (a thread per row, in double like the CPU) into per-row
 * scratch, a one-block kernel reduces the rows in a fixed order (the same
 * bits on every run), and the result, a few bytes, is copied into pinned
 * host memory before the stream is waited on. The executor uses the
 * deferred form instead (forward_add): a one-thread kernel adds each
 * micro-batch's result to totals on the device, read once per step
 * (take_loss). */
#include <limits.h>
#include <math.h>

#include "cuda_internal.h"

enum { REDUCE_THREADS = 256 }; /* a power of two: the tree halves it */

/* Per-row results between the two kernels. */
typedef struct row_results {
    double *loss; /* (n): -log probs[label], 0 for a bad label */
    int *flag;    /* (n): 1 argmax == label, 0 not, -1 label out of range */
} row_results_t;

/* logits, probs: (n, classes) labels: (n). The CPU's row: first maximum
 * (ties: lowest index), exponentials of the float differences summed in
 * double and kept in probs as floats until the sum is known, each then
 * divided by it in double and rounded to float again (the CPU computes
 * each exp() once so). */
__global__ static void softmax_xent_rows_kernel(float *probs, row_results_t rows,
                                                const float *logits, const int32_t *labels,
                                                int64_t n, int64_t classes) {
    BG_CUDA_GRID_LOOP(i, n) {
        const float *z = logits + i * classes;
        float *p = probs + i * classes;
        int64_t best = 0;
        for (int64_t k = 1; k < classes; k++)
            if (z[k] > z[best]) best = k;
        /* Subtract the maximum so exp() cannot overflow. */
        double sum = 0;
        for (int64_t k = 0; k < classes; k++) {
            const double e = exp((double)(z[k] - z[best]));
            p[k] = (float)e;
            sum += e;
        }
        for (int64_t k = 0; k < classes; k++) p[k] = (float)((double)p[k] / sum);
        const int32_t label = labels[i];
        if (label < 0 || label >= classes) {
            rows.loss[i] = 0;
            rows.flag[i] = -1;
            continue;
        }
        rows.loss[i] = log(sum) - (double)(z[label] - z[best]);
        rows.flag[i] = best == label;
    }
}

/* One block of REDUCE_THREADS: thread t sums rows t, t + T, ... in order,
 * then a tree halves the partial sums. */
__global__ static void softmax_xent_reduce_kernel(bg_cuda_reduction_t *out, row_results_t rows,
                                                  int64_t n) {
    __shared__ double loss[REDUCE_THREADS];
    __shared__ long long correct[REDUCE_THREADS];
    __shared__ long long first_bad[REDUCE_THREADS];
    const int t = threadIdx.x;
    double my_loss = 0;
    long long my_correct = 0, my_bad = n;
    for (int64_t i = t; i < n; i += REDUCE_THREADS) {
        if (rows.flag[i] < 0) {
            if (my_bad == n) my_bad = i;
        } else {
            my_loss += rows.loss[i];
            my_correct += rows.flag[i];
        }
    }
    loss[t] = my_loss;
    correct[t] = my_correct;
    first_bad[t] = my_bad;
    __syncthreads();
    for (int half = REDUCE_THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            loss[t] += loss[t + half];
            correct[t] += correct[t + half];
            if (first_bad[t + half] < first_bad[t]) first_bad[t] = first_bad[t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        out->loss_sum = loss[0];
        out->correct = correct[0];
        out->first_bad_label = first_bad[0];
    }
}

/* probs, dlogits: (n, classes) labels: (n) */
__global__ static void softmax_xent_backward_kernel(float *dlogits, const float *probs,
                                                    const int32_t *labels, float scale, int64_t n,
                                                    int64_t classes) {
    BG_CUDA_GRID_LOOP(i, n * classes) {
        const float target = i % classes == labels[i / classes] ? 1.0f : 0.0f;
        dlogits[i] = scale * (probs[i] - target);
    }
}

/* ---- launchers: stream last ---- */

static cudaError_t softmax_xent_rows(float *probs, row_results_t rows, const float *logits,
                                     const int32_t *labels, int64_t n, int64_t classes,
                                     cudaStream_t stream) {
    softmax_xent_rows_kernel<<<bg_cuda_blocks(n), BG_CUDA_THREADS, 0, stream>>>(probs, rows, logits,
                                                                                labels, n, classes);
    return cudaGetLastError();
}

static cudaError_t softmax_xent_reduce(bg_cuda_reduction_t *out, row_results_t rows, int64_t n,
                                       cudaStream_t stream) {
    softmax_xent_reduce_kernel<<<1, REDUCE_THREADS, 0, stream>>>(out, rows, n);
    return cudaGetLastError();
}

/* One thread: adds the micro-batch just reduced into the totals, notes its
 * first bad label if it is the first, and marks a loss that is not finite
 * with `tag` (as mark_nonfinite; -1: no mark). */
__global__ static void softmax_xent_add_kernel(bg_cuda_reduction_t *r, const int32_t *labels,
                                               int64_t n, int64_t classes, int tag) {
    bg_cuda_loss_totals_t *t = &r->job_end.totals;
    t->loss_sum += r->loss_sum;
    t->correct += r->correct;
    if (r->first_bad_label < n && t->bad_row_plus_one == 0) {
        t->bad_row_plus_one = r->first_bad_label + 1;
        t->bad_label = labels[r->first_bad_label];
        t->classes = (int)classes;
    }
    if (tag >= 0 && !isfinite(r->loss_sum)) atomicMax(&r->job_end.nonfinite_mark, INT_MAX - tag);
}

static cudaError_t softmax_xent_add(bg_cuda_reduction_t *r, const int32_t *labels, int64_t n,
                                    int64_t classes, int tag, cudaStream_t stream) {
    softmax_xent_add_kernel<<<1, 1, 0, stream>>>(r, labels, n, classes, tag);
    return cudaGetLastError();
}

static cudaError_t softmax_xent_backward(float *dlogits, const float *probs, const int32_t *labels,
                                         float scale, int64_t n, int64_t classes,
                                         cudaStream_t stream) {
    const int64_t count = n * classes;
    if (count == 0) return cudaSuccess;
    softmax_xent_backward_kernel<<<bg_cuda_blocks(count), BG_CUDA_THREADS, 0, stream>>>(
        dlogits, probs, labels, scale, n, classes);
    return cudaGetLastError();
}

/* Makes the per-row scratch hold n rows: at setup for the largest batch
 * (bg_cuda_softmax_xent_reserve), else when a larger batch comes (the
 * stream is synchronized, as ops enqueued before may still use the old
 * scratch). */
static bg_status_t grow_row_scratch(bg_backend_t *be, int64_t n) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    const size_t bytes = (size_t)n * (sizeof(double) + sizeof(int));
    if (bytes <= cu->row_scratch_bytes) return BG_OK;
    BG_CUDA_CHECK(be, cudaStreamSynchronize(cu->compute));
    bg_cuda_free_quietly(cu->row_scratch);
    cu->row_scratch = NULL;
    cu->row_scratch_bytes = 0;
    BG_CHECK(bg_cuda_malloc(be, bytes, &cu->row_scratch));
    cu->row_scratch_bytes = bytes;
    return BG_OK;
}

/* The per-row scratch for n rows, grown if it must be. */
static bg_status_t row_scratch(bg_backend_t *be, int64_t n, row_results_t *rows) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    rows->loss = NULL;
    rows->flag = NULL;
    BG_CHECK(grow_row_scratch(be, n));
    rows->loss = (double *)cu->row_scratch;
    rows->flag = (int *)(rows->loss + n);
    return BG_OK;
}

/* ---- ops ---- */

extern "C" bg_status_t bg_cuda_softmax_xent_reserve(bg_backend_t *be, int64_t rows) {
    if (rows < 1) return BG_OK;
    BG_CHECK(bg_cuda_enter(be));
    return grow_row_scratch(be, rows);
}

extern "C" bg_status_t bg_cuda_softmax_xent_forward(bg_backend_t *be, int64_t n, int64_t classes,
                                                    const void *logits, const int32_t *labels,
                                                    void *probs, double *loss_sum,
                                                    int64_t *correct) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    row_results_t rows;
    if (n == 0) {
        *loss_sum = 0;
        *correct = 0;
        return BG_OK;
    }
    if (classes < 1)
        return bg_error_set(BG_ERR_INVALID, "%s: softmax over %lld classes", be->name,
                            (long long)classes);
    BG_CHECK(bg_cuda_enter(be));
    BG_CHECK(row_scratch(be, n, &rows));
    BG_CUDA_CHECK(be, softmax_xent_rows((float *)probs, rows, (const float *)logits, labels, n,
                                        classes, cu->compute));
    BG_CUDA_CHECK(be, softmax_xent_reduce(cu->device_reduction, rows, n, cu->compute));
    BG_CUDA_CHECK(be,
                  cudaMemcpyAsync(cu->host_reduction, cu->device_reduction,
                                  sizeof *cu->host_reduction, cudaMemcpyDeviceToHost, cu->compute));
    /* The loss is a host value: wait for it. */
    BG_CUDA_CHECK(be, cudaStreamSynchronize(cu->compute));
    const bg_cuda_reduction_t *result = cu->host_reduction;
    if (result->first_bad_label < n) {
        int32_t label = 0;
        /* On the compute stream, not the legacy default one. */
        BG_CUDA_CHECK(be, cudaMemcpyAsync(&label, labels + result->first_bad_label, sizeof label,
                                          cudaMemcpyDeviceToHost, cu->compute));
        BG_CUDA_CHECK(be, cudaStreamSynchronize(cu->compute));
        return bg_error_set(BG_ERR_INVALID, "%s: label %d of sample %lld is outside 0..%lld",
                            be->name, (int)label, (long long)result->first_bad_label,
                            (long long)classes - 1);
    }
    *loss_sum = result->loss_sum;
    *correct = result->correct;
    return BG_OK;
}

/* The rows and their reduction as in the forward above, then the add: no
 * copy to the host and no wait. */
extern "C" bg_status_t bg_cuda_softmax_xent_forward_add(bg_backend_t *be, int64_t n,
                                                        int64_t classes, const void *logits,
                                                        const int32_t *labels, void *probs, int add,
                                                        int tag) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    if (tag < -1 || tag == INT_MAX)
        return bg_error_set(BG_ERR_INTERNAL, "%s: non-finite mark tag %d out of range", be->name,
                            tag);
    if (classes < 1 || classes > INT_MAX)
        return bg_error_set(BG_ERR_INVALID, "%s: softmax over %lld classes", be->name,
                            (long long)classes);
    if (n == 0) return BG_OK;
    row_results_t rows;
    BG_CHECK(bg_cuda_enter(be));
    BG_CHECK(row_scratch(be, n, &rows));
    BG_CUDA_CHECK(be, softmax_xent_rows((float *)probs, rows, (const float *)logits, labels, n,
                                        classes, cu->compute));
    if (!add) return BG_OK; /* probs only: a recomputed forward */
    if (tag >= 0) cu->mark_pending = 1;
    BG_CUDA_CHECK(be, softmax_xent_reduce(cu->device_reduction, rows, n, cu->compute));
    BG_CUDA_CHECK(be, softmax_xent_add(cu->device_reduction, labels, n, classes, tag, cu->compute));
    return BG_OK;
}

/* The one wait of the loss: for the totals, a few bytes into pinned memory,
 * and with them the non-finite mark, which take_nonfinite then returns
 * without a wait of its own when nothing was marked since (the executor
 * takes the two in a row at the end of each job). */
extern "C" bg_status_t bg_cuda_take_loss(bg_backend_t *be, double *loss_sum, int64_t *correct) {
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    BG_CHECK(bg_cuda_take_reduction(be, &cu->device_reduction->job_end,
                                    sizeof cu->device_reduction->job_end));
    bg_cuda_keep_mark(cu);
    const bg_cuda_loss_totals_t *t = &cu->host_reduction->job_end.totals;
    if (t->bad_row_plus_one > 0)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: label %d of sample %lld of a micro-batch is outside 0..%d",
                            be->name, t->bad_label, t->bad_row_plus_one - 1, t->classes - 1);
    *loss_sum = t->loss_sum;
    *correct = t->correct;
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_softmax_xent_backward(bg_backend_t *be, int64_t n, int64_t classes,
                                                     const void *probs, const int32_t *labels,
                                                     double scale, void *dlogits) {
    BG_CHECK(bg_cuda_enter(be));
    BG_CUDA_CHECK(be, softmax_xent_backward((float *)dlogits, (const float *)probs, labels,
                                            (float)scale, n, classes, bg_cuda_of(be)->compute));
    return BG_OK;
}
