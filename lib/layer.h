/* Layers: the math of one entry of the layer stack on a backend, split the
 * way pipeline schedules need it: forward, backward_data (dX) and
 * backward_weights (dW, accumulated). A layer holds no activations; the
 * stage that runs it passes them in, so it can keep several micro-batches in
 * flight.
 *
 * Parameters follow PyTorch's layouts: conv2d weight (filters, channels, k, k),
 * dense weight (units, inputs), biases (filters) / (units); layernorm's
 * gamma ("weight") and beta ("bias") one per value of a sample, each in the
 * sample's shape. */
#ifndef BG_LAYER_H
#define BG_LAYER_H

#include "backend.h"
#include "model_spec.h"
#include "rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device buffers of one layer's parameters and their gradients. Layers
 * without parameters have counts of 0 and NULL pointers. */
typedef struct bg_layer_params {
    int64_t weight_count, bias_count;
    void *weight, *bias;
    void *weight_grad, *bias_grad;
} bg_layer_params_t;

/* 1 if layer `index` of the stack is a relu, tanh or sigmoid (whose
 * backward reads only its output) or a dropout or a residual block's add
 * (which read neither) that may overwrite its input: the layer before it (conv2d, dense, avgpool,
 * gelu, layernorm, dropout or add) never reads its own output in its passes,
 * so the activation's output can live in that buffer. A stage applies
 * this only when both layers are in it. */
int bg_layer_runs_in_place(const bg_model_spec_t *spec, int index);

/* 1 if the layer's output is a view of another buffer in any stage: a
 * flatten's and a residual's of their input, a shortcut's of its block's
 * input. (A layer that runs in place shares too, when its predecessor is in
 * its stage.) */
int bg_layer_output_is_view(const bg_layer_spec_t *layer);

/* Number of weight and bias values of a layer. */
void bg_layer_param_counts(const bg_layer_spec_t *spec, int64_t *weights, int64_t *biases);

/* Initialises weights and biases the way PyTorch's nn.Conv2d and nn.Linear
 * do by default (layernorm: gamma 1 and beta 0, as nn.LayerNorm): uniform in [-1/sqrt(fan_in),
 * 1/sqrt(fan_in)] (Kaiming-uniform with a = sqrt(5)), fan_in = channels * k * k or inputs. The
 * random stream is seeded by (seed, layer index), so a layer gets the same values whatever stage or
 * device it lands on. Values are written to host `weights` and `biases` (sized by
 * bg_layer_param_counts). */
void bg_layer_init_params(const bg_layer_spec_t *spec, int index, uint64_t seed, float *weights,
                          float *biases);

/* Scratch bytes forward and backward need for a batch of n samples, in
 * *bytes (0 for layers that need none); the backend's error when it cannot
 * size them. */
bg_status_t bg_layer_workspace_bytes(const bg_layer_spec_t *spec, bg_backend_t *be, int64_t n,
                                     size_t *bytes);

/* y = layer(x). x: (n, in.c, in.h, in.w) y: (n, out.c, out.h, out.w).
 * Not for softmax_cross_entropy (see bg_stage_t, which owns the labels),
 * dropout (bg_layer_dropout) or a residual block's residual, shortcut and add, which
 * pass values between the stage's layers (stage_compute.c). */
bg_status_t bg_layer_forward(const bg_layer_spec_t *spec, bg_backend_t *be,
                             const bg_layer_params_t *p, int64_t n, const void *x, void *y,
                             void *workspace);

/* dx = dL/dx from dy = dL/dy, given the forward's x and y. dx is overwritten. */
bg_status_t bg_layer_backward_data(const bg_layer_spec_t *spec, bg_backend_t *be,
                                   const bg_layer_params_t *p, int64_t n, const void *x,
                                   const void *y, const void *dy, void *dx, void *workspace);

/* The mask of dropout layer `index` (its place in the stack) for rows
 * first_row, first_row + 1, ... of the mini-batch at optimizer step `step`
 * (the steps taken before it) of a run seeded with `seed`. */
bg_dropout_mask_t bg_layer_dropout_mask(const bg_layer_spec_t *spec, int index, uint64_t seed,
                                        int64_t step, int64_t first_row);

/* A dropout layer's pass, forward (x -> y) and backward (dy -> dx) alike:
 * the values the mask keeps, scaled by 1 / (1 - rate), and 0 for the
 * others. With mask NULL (evaluation) or a rate of 0, y = x: nothing to
 * do when they alias.
 * x, y: (n, in) */
bg_status_t bg_layer_dropout(const bg_layer_spec_t *spec, bg_backend_t *be,
                             const bg_dropout_mask_t *mask, int64_t n, const void *x, void *y);

/* Layers whose pass also does a relu beside them, in one op, to the bit:
 * a conv2d's forward that of the relu after it (in place over its output),
 * and a max-pool's backward that of the relu before it (whose output is the
 * pool's input x: dx = dL/d(the relu's input)). 1 when `spec` is such a
 * layer and the backend has the op; otherwise run the two layers. */
int bg_layer_fuses_relu(const bg_layer_spec_t *spec, const bg_backend_t *be);
bg_status_t bg_layer_forward_relu(const bg_layer_spec_t *conv, bg_backend_t *be,
                                  const bg_layer_params_t *p, int64_t n, const void *x, void *y,
                                  void *workspace);
bg_status_t bg_layer_backward_data_relu(const bg_layer_spec_t *pool, bg_backend_t *be, int64_t n,
                                        const void *x, const void *y, const void *dy, void *dx);

/* Accumulates dL/dW and dL/db into p->weight_grad and p->bias_grad. A no-op
 * for layers without parameters. */
bg_status_t bg_layer_backward_weights(const bg_layer_spec_t *spec, bg_backend_t *be,
                                      const bg_layer_params_t *p, int64_t n, const void *x,
                                      const void *dy, void *workspace);

#ifdef __cplusplus
}
#endif

#endif /* BG_LAYER_H */
