/* The backend interface: a table of function pointers behind an opaque
 * handle, one implementation per kind of device (CPU now, CUDA later).
 *
 * Every op works on device memory obtained from the same backend, in the
 * backend's element type (float, or double for the CPU backend's gradient
 * checks). Arrays are dense and row-major; activations are NCHW. Ops with
 * "accumulate" in their comment add into their outputs (gradients are summed
 * over micro-batches); all others overwrite. On CUDA an op is enqueued on the
 * backend's compute stream; on CPU it runs to completion in the caller.
 *
 * Layers (lib/layer.h) call these ops; nothing else touches device memory. */
#ifndef BG_BACKEND_H
#define BG_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "optim_config.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bg_dtype { BG_F32, BG_F64 } bg_dtype_t;

static inline size_t bg_dtype_size(bg_dtype_t t) { return t == BG_F64 ? 8 : 4; }

/* Geometry of a 2-D convolution on a batch: x (n, c, h, w), weights
 * (filters, c, kernel, kernel), y (n, filters, out_h, out_w). */
typedef struct bg_conv2d_geometry {
    int64_t n, c, h, w;
    int64_t filters, kernel, stride, pad;
    int64_t out_h, out_w;
} bg_conv2d_geometry_t;

/* Geometry of max/average pooling: x (n, c, h, w), y (n, c, out_h, out_w);
 * no padding, windows of size x size every `stride`. */
typedef struct bg_pool_geometry {
    int64_t n, c, h, w;
    int64_t size, stride;
    int64_t out_h, out_w;
} bg_pool_geometry_t;

/* The elementwise activations besides relu (which has ops of its own,
 * fused into its neighbours). */
typedef enum bg_activation {
    BG_ACTIVATION_TANH,    /* tanh(x) */
    BG_ACTIVATION_SIGMOID, /* 1 / (1 + exp(-x)) */
    BG_ACTIVATION_GELU,    /* x * Phi(x), Phi the normal CDF (erf form, PyTorch's default) */
} bg_activation_t;

/* Which values of a dropout layer's tensor a training step keeps: value j
 * of row r (of rows first_row, first_row + 1, ... of the mini-batch) when
 * bg_dropout_keeps(key, (first_row + r) * features + j, threshold)
 * (lib/dropout.h); a kept value is multiplied by scale, 1 / (1 - rate). */
typedef struct bg_dropout_mask {
    uint64_t key;       /* bg_dropout_key: the layer's draw at this step */
    int64_t first_row;  /* the rows' place in the mini-batch */
    uint32_t threshold; /* bg_dropout_threshold(rate) */
    double scale;
} bg_dropout_mask_t;

/* The epsilon of layer normalisation, PyTorch's default. */
#define BG_LAYERNORM_EPS 1e-5

typedef struct bg_backend bg_backend_t;

typedef struct bg_backend_ops {
    void (*destroy)(bg_backend_t *be);

    /* Memory. alloc returns zeroed memory; free(NULL) is a no-op. */
    bg_status_t (*alloc)(bg_backend_t *be, size_t bytes, void **out);
    void (*free)(bg_backend_t *be, void *ptr);
    bg_status_t (*upload)(bg_backend_t *be, void *dst, const void *host_src, size_t bytes);
    /* Host memory that upload_async copies from directly (pinned on a GPU,
     * plain on the CPU), and the upload that does not wait: host_src (on a
     * GPU from host_alloc, or it is staged and waited for) must stay unchanged until the device has
     * run the copy (synchronize waits for that). On the CPU the copy is done on return. */
    bg_status_t (*host_alloc)(bg_backend_t *be, size_t bytes, void **out);
    void (*host_free)(bg_backend_t *be, void *ptr);
    bg_status_t (*upload_async)(bg_backend_t *be, void *dst, const void *host_src, size_t bytes);
    bg_status_t (*download)(bg_backend_t *be, void *host_dst, const void *src, size_t bytes);
    /* Waits until every op enqueued so far has finished. */
    bg_status_t (*synchronize)(bg_backend_t *be);

    /* x[0..n) = 0 */
    bg_status_t (*zero)(bg_backend_t *be, void *x, int64_t n);
    /* dst[0..n) = src[0..n) */
    bg_status_t (*copy)(bg_backend_t *be, void *dst, const void *src, int64_t n);
    /* x[0..n) *= alpha */
    bg_status_t (*scale)(bg_backend_t *be, void *x, int64_t n, double alpha);
    /* y = a + b: a residual block's add forward, and its residual's
     * backward (dx = dy + the add's dy); y may alias a or b.
     * a, b, y: (count) */
    bg_status_t (*add)(bg_backend_t *be, int64_t count, const void *a, const void *b, void *y);

    /* Scratch bytes the conv2d ops below need for this geometry, in
     * *bytes. Fails when the backend cannot size it (cuDNN refusing the
     * geometry), rather than saying 0 and failing at the first step. */
    bg_status_t (*conv2d_workspace_bytes)(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                          size_t *bytes);
    /* y = conv(x, w) + b. x: (n,c,h,w) w: (f,c,k,k) b: (f) y: (n,f,oh,ow) */
    bg_status_t (*conv2d_forward)(bg_backend_t *be, const bg_conv2d_geometry_t *g, const void *x,
                                  const void *w, const void *b, void *y, void *workspace);
    /* conv2d_forward, then relu_forward over y in place, to the bit; each
     * sample's output while it is still in cache. May be NULL (then the
     * stage runs the two). */
    bg_status_t (*conv2d_relu_forward)(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                       const void *x, const void *w, const void *b, void *y,
                                       void *workspace);
    /* dx = conv_transpose(dy, w). dy: (n,f,oh,ow) w: (f,c,k,k) dx: (n,c,h,w) */
    bg_status_t (*conv2d_backward_data)(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                        const void *dy, const void *w, void *dx, void *workspace);
    /* accumulate: dw += dy (*) x, db += sum of dy over n, oh, ow.
     * x: (n,c,h,w) dy: (n,f,oh,ow) dw: (f,c,k,k) db: (f) */
    bg_status_t (*conv2d_backward_weights)(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                           const void *x, const void *dy, void *dw, void *db,
                                           void *workspace);

    /* y = x w^T + b. x: (n, in) w: (out, in) b: (out) y: (n, out) */
    bg_status_t (*dense_forward)(bg_backend_t *be, int64_t n, int64_t in, int64_t out,
                                 const void *x, const void *w, const void *b, void *y);
    /* dx = dy w. dy: (n, out) w: (out, in) dx: (n, in) */
    bg_status_t (*dense_backward_data)(bg_backend_t *be, int64_t n, int64_t in, int64_t out,
                                       const void *dy, const void *w, void *dx);
    /* accumulate: dw += dy^T x, db += sum of dy over n.
     * x: (n, in) dy: (n, out) dw: (out, in) db: (out) */
    bg_status_t (*dense_backward_weights)(bg_backend_t *be, int64_t n, int64_t in, int64_t out,
                                          const void *x, const void *dy, void *dw, void *db);

    /* y = max(x, 0); x and y may alias. x, y: (count) */
    bg_status_t (*relu_forward)(bg_backend_t *be, int64_t count, const void *x, void *y);
    /* dx = dy where y > 0, else 0; dy and dx may alias. y, dy, dx: (count) */
    bg_status_t (*relu_backward)(bg_backend_t *be, int64_t count, const void *y, const void *dy,
                                 void *dx);

    /* y = f(x) for the activation f; x and y may alias. x, y: (count) */
    bg_status_t (*activation_forward)(bg_backend_t *be, bg_activation_t f, int64_t count,
                                      const void *x, void *y);
    /* dx = dy * f'(x). tanh and sigmoid read only their output y (so their
     * x may have been overwritten by it), gelu only its input x. dy and dx
     * may alias. x, y, dy, dx: (count) */
    bg_status_t (*activation_backward)(bg_backend_t *be, bg_activation_t f, int64_t count,
                                       const void *x, const void *y, const void *dy, void *dx);

    /* y = x * mask->scale where the mask keeps a value, 0 where it drops
     * it: a dropout layer's forward (x -> y) and its backward (dy -> dx)
     * alike, for the same mask. x and y may alias. x, y: (n, features) */
    bg_status_t (*dropout)(bg_backend_t *be, const bg_dropout_mask_t *mask, int64_t n,
                           int64_t features, const void *x, void *y);

    /* Layer normalisation of each of n rows of `features` values (PyTorch's
     * nn.LayerNorm over a sample's whole shape, eps BG_LAYERNORM_EPS):
     * y = (x - mean) / sqrt(var + eps) * gamma + beta, var the biased
     * variance. The backward ops find each row's mean and variance again
     * from x; `workspace` holds 2n values for them (a GPU's weights'
     * backward; the CPU backend uses none, but a layer asks the same of
     * every backend, so that plans count it alike).
     * x, y, dy, dx: (n, features) gamma, beta, dgamma, dbeta: (features).
     * The weights' backward accumulates. */
    bg_status_t (*layernorm_forward)(bg_backend_t *be, int64_t n, int64_t features, const void *x,
                                     const void *gamma, const void *beta, void *y, void *workspace);
    bg_status_t (*layernorm_backward_data)(bg_backend_t *be, int64_t n, int64_t features,
                                           const void *x, const void *gamma, const void *dy,
                                           void *dx, void *workspace);
    bg_status_t (*layernorm_backward_weights)(bg_backend_t *be, int64_t n, int64_t features,
                                              const void *x, const void *dy, void *dgamma,
                                              void *dbeta, void *workspace);

    /* Max pooling. x: (n,c,h,w) y: (n,c,oh,ow); a window holding a NaN
     * pools to NaN. The backward routes each gradient to the first
     * position of its window that holds the maximum (found again from x
     * and y, so no index buffer is kept; a window holding a NaN sends it to
     * its last position). Overlapping windows accumulate into dx, which is
     * overwritten first. */
    bg_status_t (*maxpool_forward)(bg_backend_t *be, const bg_pool_geometry_t *g, const void *x,
                                   void *y);
    bg_status_t (*maxpool_backward)(bg_backend_t *be, const bg_pool_geometry_t *g, const void *x,
                                    const void *y, const void *dy, void *dx);
    /* Max-pool's backward over a relu's output x, followed by that relu's:
     * maxpool_backward, then relu_backward with y = x (dx = 0 where x <= 0),
     * to the bit, in one pass over dx instead of three. May be NULL (then
     * the stage runs the two). */
    bg_status_t (*maxpool_relu_backward)(bg_backend_t *be, const bg_pool_geometry_t *g,
                                         const void *x, const void *y, const void *dy, void *dx);
    /* Average pooling, same shapes; dx is overwritten. */
    bg_status_t (*avgpool_forward)(bg_backend_t *be, const bg_pool_geometry_t *g, const void *x,
                                   void *y);
    bg_status_t (*avgpool_backward)(bg_backend_t *be, const bg_pool_geometry_t *g, const void *dy,
                                    void *dx);

    /* probs = softmax(logits) row by row; *loss_sum = sum over rows of
     * -log probs[label]; *correct = rows whose argmax equals the label (ties:
     * lowest index). labels: device int32 (n). logits, probs: (n, classes).
     * Labels outside [0, classes) are BG_ERR_INVALID. */
    bg_status_t (*softmax_xent_forward)(bg_backend_t *be, int64_t n, int64_t classes,
                                        const void *logits, const int32_t *labels, void *probs,
                                        double *loss_sum, int64_t *correct);
    /* The same forward, deferred: writes probs and, with `add`, adds the
     * loss sum and correct count to the backend's loss totals, read by
     * take_loss (without: probs only, for a recomputed forward); a loss sum
     * that is not finite lowers the non-finite mark to `tag` (as
     * mark_nonfinite; -1 leaves it). Does not wait. A label outside
     * [0, classes) is BG_ERR_INVALID from this call or, on a GPU, from
     * take_loss; a GPU checks labels only with `add` (a recomputed forward
     * reads the labels its counted forward checked, and a bad label never
     * matches in the backward). */
    bg_status_t (*softmax_xent_forward_add)(bg_backend_t *be, int64_t n, int64_t classes,
                                            const void *logits, const int32_t *labels, void *probs,
                                            int add, int tag);
    /* Readies the scratch the two forwards above need for batches of up to
     * `rows` rows, so that no step allocates it. May be NULL (they need
     * none). */
    bg_status_t (*softmax_xent_reserve)(bg_backend_t *be, int64_t rows);
    /* Waits for the forwards added so far, sets *loss_sum and *correct to
     * their totals (0 for none) and clears them. */
    bg_status_t (*take_loss)(bg_backend_t *be, double *loss_sum, int64_t *correct);
    /* dlogits = scale * (probs - onehot(labels)). Use scale = 1/B to average
     * the loss over a mini-batch of B samples split into micro-batches. */
    bg_status_t (*softmax_xent_backward)(bg_backend_t *be, int64_t n, int64_t classes,
                                         const void *probs, const int32_t *labels, double scale,
                                         void *dlogits);

    /* Optimizer updates of `count` parameters in place; `step` counts from 1.
     * velocity / m / v are state buffers, zero before the first step. */
    bg_status_t (*sgd_update)(bg_backend_t *be, int64_t count, void *param, const void *grad,
                              void *velocity, const bg_sgd_config_t *cfg, int64_t step);
    bg_status_t (*adam_update)(bg_backend_t *be, int64_t count, void *param, const void *grad,
                               void *m, void *v, const bg_adam_config_t *cfg, int64_t step);

    /* *out = true if every x[0..count) is finite. Returns a host value,
     * so on a GPU it waits for the device. */
    bg_status_t (*all_finite)(bg_backend_t *be, int64_t count, const void *x, int *out);

    /* *out = the sum of the squares of x[0..count), added in double in an
     * order fixed by count alone (on a CPU eight interleaved running sums
     * added in order; on a GPU one block's fixed tree), so that a tensor
     * gives the same sum in any stage of one kind of device. Returns a
     * host value, so on a GPU it waits for the device. */
    bg_status_t (*square_sum)(bg_backend_t *be, int64_t count, const void *x, double *out);

    /* The same check, deferred: enqueues a scan of x[0..count) and, if some
     * value is NaN or Inf, lowers the backend's non-finite mark to `tag`
     * (0 <= tag < INT_MAX) unless it is lower already. Does not wait. */
    bg_status_t (*mark_nonfinite)(bg_backend_t *be, int64_t count, const void *x, int tag);
    /* Waits for the scans enqueued so far, sets *tag to the lowest tag they
     * marked (-1 when every value was finite) and clears the mark. */
    bg_status_t (*take_nonfinite)(bg_backend_t *be, int *tag);
} bg_backend_ops_t;

/* The common head of every backend object; implementations embed it first. */
struct bg_backend {
    const bg_backend_ops_t *ops;
    bg_dtype_t dtype;
    char name[32]; /* "cpu:0", "cuda:1", ... for messages */
};

/* Destroys any backend; NULL is a no-op. */
void bg_backend_destroy(bg_backend_t *be);

/* Bytes of `count` elements in the backend's type. */
static inline size_t bg_backend_bytes(const bg_backend_t *be, int64_t count) {
    return (size_t)count * bg_dtype_size(be->dtype);
}

/* Allocates `count` zeroed elements of the backend's type. */
bg_status_t bg_backend_alloc_elems(bg_backend_t *be, int64_t count, void **out);

/* Copies `count` host doubles to device memory in the backend's type. */
bg_status_t bg_backend_upload_doubles(bg_backend_t *be, void *dst, const double *src,
                                      int64_t count);
/* Copies `count` device elements to host doubles. */
bg_status_t bg_backend_download_doubles(bg_backend_t *be, double *dst, const void *src,
                                        int64_t count);

#ifdef __cplusplus
}
#endif

#endif /* BG_BACKEND_H */
