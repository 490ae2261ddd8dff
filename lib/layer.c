#include "layer.h"

#include <math.h>

#include "dropout.h"

static bg_conv2d_geometry_t conv_geometry(const bg_layer_spec_t *s, int64_t n) {
    bg_conv2d_geometry_t g = {
        .n = n,
        .c = s->in.c,
        .h = s->in.h,
        .w = s->in.w,
        .filters = s->filters,
        .kernel = s->kernel,
        .stride = s->stride,
        .pad = s->pad,
        .out_h = s->out.h,
        .out_w = s->out.w,
    };
    return g;
}

static bg_pool_geometry_t pool_geometry(const bg_layer_spec_t *s, int64_t n) {
    bg_pool_geometry_t g = {
        .n = n,
        .c = s->in.c,
        .h = s->in.h,
        .w = s->in.w,
        .size = s->kernel,
        .stride = s->stride,
        .out_h = s->out.h,
        .out_w = s->out.w,
    };
    return g;
}

/* The backend activation of an activation layer other than relu. */
static bg_activation_t activation_of(bg_layer_kind_t kind) {
    return kind == BG_LAYER_TANH      ? BG_ACTIVATION_TANH
           : kind == BG_LAYER_SIGMOID ? BG_ACTIVATION_SIGMOID
                                      : BG_ACTIVATION_GELU;
}

int bg_layer_output_is_view(const bg_layer_spec_t *layer) {
    return layer->kind == BG_LAYER_FLATTEN || layer->kind == BG_LAYER_RESIDUAL ||
           layer->kind == BG_LAYER_SHORTCUT;
}

int bg_layer_runs_in_place(const bg_model_spec_t *spec, int index) {
    if (index < 1 || index >= spec->num_layers) return 0;
    bg_layer_kind_t kind = spec->layers[index].kind;
    /* These take their derivative from their output alone (dropout and
     * add from neither); gelu needs its input. */
    if (kind != BG_LAYER_RELU && kind != BG_LAYER_TANH && kind != BG_LAYER_SIGMOID &&
        kind != BG_LAYER_DROPOUT && kind != BG_LAYER_ADD)
        return 0;
    bg_layer_kind_t before = spec->layers[index - 1].kind;
    /* Those whose passes never read their own output (gelu and layernorm
     * read their input, dropout and add neither); max-pool's backward
     * compares its input with its output, and a relu's, tanh's or
     * sigmoid's reads its output: those must keep theirs, and so must a
     * residual or a shortcut, whose output is the block's input, which
     * its add or its shortcut branch reads. */
    return before == BG_LAYER_CONV2D || before == BG_LAYER_DENSE || before == BG_LAYER_AVGPOOL ||
           before == BG_LAYER_GELU || before == BG_LAYER_LAYERNORM || before == BG_LAYER_DROPOUT ||
           before == BG_LAYER_ADD;
}

void bg_layer_param_counts(const bg_layer_spec_t *spec, int64_t *weights, int64_t *biases) {
    *weights = 0;
    *biases = 0;
    if (spec->kind == BG_LAYER_CONV2D) {
        *weights = spec->filters * spec->in.c * spec->kernel * spec->kernel;
        *biases = spec->filters;
    } else if (spec->kind == BG_LAYER_DENSE) {
        *weights = spec->filters * bg_shape_numel(spec->in);
        *biases = spec->filters;
    } else if (spec->kind == BG_LAYER_LAYERNORM) {
        *weights = bg_shape_numel(spec->in); /* gamma */
        *biases = *weights;                  /* beta */
    }
}

void bg_layer_init_params(const bg_layer_spec_t *spec, int index, uint64_t seed, float *weights,
                          float *biases) {
    int64_t nw, nb;
    bg_layer_param_counts(spec, &nw, &nb);
    if (nw == 0) return;
    if (spec->kind == BG_LAYER_LAYERNORM) { /* the identity, as PyTorch starts it */
        for (int64_t i = 0; i < nw; i++) weights[i] = 1;
        for (int64_t i = 0; i < nb; i++) biases[i] = 0;
        return;
    }
    int64_t fan_in = nw / spec->filters;
    double bound = 1.0 / sqrt((double)fan_in);
    bg_rng_t rng;
    bg_rng_seed(&rng, seed, (uint64_t)index);
    for (int64_t i = 0; i < nw; i++) weights[i] = (float)((2 * bg_rng_uniform(&rng) - 1) * bound);
    for (int64_t i = 0; i < nb; i++) biases[i] = (float)((2 * bg_rng_uniform(&rng) - 1) * bound);
}

bg_status_t bg_layer_workspace_bytes(const bg_layer_spec_t *spec, bg_backend_t *be, int64_t n,
                                     size_t *bytes) {
    *bytes = 0;
    if (spec->kind == BG_LAYER_LAYERNORM) {
        *bytes = bg_backend_bytes(be, 2 * n); /* each sample's mean and 1/std */
        return BG_OK;
    }
    if (spec->kind != BG_LAYER_CONV2D) return BG_OK;
    bg_conv2d_geometry_t g = conv_geometry(spec, n);
    return be->ops->conv2d_workspace_bytes(be, &g, bytes);
}

bg_status_t bg_layer_forward(const bg_layer_spec_t *spec, bg_backend_t *be,
                             const bg_layer_params_t *p, int64_t n, const void *x, void *y,
                             void *workspace) {
    const bg_backend_ops_t *ops = be->ops;
    switch (spec->kind) {
    case BG_LAYER_CONV2D: {
        bg_conv2d_geometry_t g = conv_geometry(spec, n);
        return ops->conv2d_forward(be, &g, x, p->weight, p->bias, y, workspace);
    }
    case BG_LAYER_DENSE:
        return ops->dense_forward(be, n, bg_shape_numel(spec->in), spec->filters, x, p->weight,
                                  p->bias, y);
    case BG_LAYER_MAXPOOL: {
        bg_pool_geometry_t g = pool_geometry(spec, n);
        return ops->maxpool_forward(be, &g, x, y);
    }
    case BG_LAYER_AVGPOOL: {
        bg_pool_geometry_t g = pool_geometry(spec, n);
        return ops->avgpool_forward(be, &g, x, y);
    }
    case BG_LAYER_RELU: return ops->relu_forward(be, n * bg_shape_numel(spec->in), x, y);
    case BG_LAYER_TANH:
    case BG_LAYER_SIGMOID:
    case BG_LAYER_GELU:
        return ops->activation_forward(be, activation_of(spec->kind), n * bg_shape_numel(spec->in),
                                       x, y);
    case BG_LAYER_LAYERNORM:
        return ops->layernorm_forward(be, n, bg_shape_numel(spec->in), x, p->weight, p->bias, y,
                                      workspace);
    case BG_LAYER_FLATTEN: return ops->copy(be, y, x, n * bg_shape_numel(spec->in));
    case BG_LAYER_DROPOUT:  /* bg_layer_dropout, with the stage's mask */
    case BG_LAYER_RESIDUAL: /* the stage's: they pass values between layers */
    case BG_LAYER_SHORTCUT:
    case BG_LAYER_ADD:
    case BG_LAYER_SOFTMAX_CROSS_ENTROPY: break;
    }
    return bg_error_set(BG_ERR_INTERNAL, "%s: bg_layer_forward called on %s", be->name,
                        bg_layer_kind_name(spec->kind));
}

bg_status_t bg_layer_backward_data(const bg_layer_spec_t *spec, bg_backend_t *be,
                                   const bg_layer_params_t *p, int64_t n, const void *x,
                                   const void *y, const void *dy, void *dx, void *workspace) {
    const bg_backend_ops_t *ops = be->ops;
    switch (spec->kind) {
    case BG_LAYER_CONV2D: {
        bg_conv2d_geometry_t g = conv_geometry(spec, n);
        return ops->conv2d_backward_data(be, &g, dy, p->weight, dx, workspace);
    }
    case BG_LAYER_DENSE:
        return ops->dense_backward_data(be, n, bg_shape_numel(spec->in), spec->filters, dy,
                                        p->weight, dx);
    case BG_LAYER_MAXPOOL: {
        bg_pool_geometry_t g = pool_geometry(spec, n);
        return ops->maxpool_backward(be, &g, x, y, dy, dx);
    }
    case BG_LAYER_AVGPOOL: {
        bg_pool_geometry_t g = pool_geometry(spec, n);
        return ops->avgpool_backward(be, &g, dy, dx);
    }
    case BG_LAYER_RELU: return ops->relu_backward(be, n * bg_shape_numel(spec->in), y, dy, dx);
    case BG_LAYER_TANH:
    case BG_LAYER_SIGMOID:
    case BG_LAYER_GELU:
        return ops->activation_backward(be, activation_of(spec->kind), n * bg_shape_numel(spec->in),
                                        x, y, dy, dx);
    case BG_LAYER_LAYERNORM:
        return ops->layernorm_backward_data(be, n, bg_shape_numel(spec->in), x, p->weight, dy, dx,
                                            workspace);
    case BG_LAYER_FLATTEN: return ops->copy(be, dx, dy, n * bg_shape_numel(spec->in));
    case BG_LAYER_DROPOUT:
    case BG_LAYER_RESIDUAL:
    case BG_LAYER_SHORTCUT:
    case BG_LAYER_ADD:
    case BG_LAYER_SOFTMAX_CROSS_ENTROPY: break;
    }
    return bg_error_set(BG_ERR_INTERNAL, "%s: bg_layer_backward_data called on %s", be->name,
                        bg_layer_kind_name(spec->kind));
}

bg_dropout_mask_t bg_layer_dropout_mask(const bg_layer_spec_t *spec, int index, uint64_t seed,
                                        int64_t step, int64_t first_row) {
    return (bg_dropout_mask_t){.key = bg_dropout_key(seed, step, index),
                               .first_row = first_row,
                               .threshold = bg_dropout_threshold(spec->rate),
                               .scale = 1 / (1 - spec->rate)};
}

bg_status_t bg_layer_dropout(const bg_layer_spec_t *spec, bg_backend_t *be,
                             const bg_dropout_mask_t *mask, int64_t n, const void *x, void *y) {
    if (spec->kind != BG_LAYER_DROPOUT)
        return bg_error_set(BG_ERR_INTERNAL, "%s: bg_layer_dropout called on %s", be->name,
                            bg_layer_kind_name(spec->kind));
    const int64_t features = bg_shape_numel(spec->in);
    /* At rate 0 every value is kept and scaled by 1: x itself, without a
     * hash a value. */
    if (mask != NULL && mask->threshold > 0) return be->ops->dropout(be, mask, n, features, x, y);
    return x == y ? BG_OK : be->ops->copy(be, y, x, n * features);
}

int bg_layer_fuses_relu(const bg_layer_spec_t *spec, const bg_backend_t *be) {
    if (spec->kind == BG_LAYER_CONV2D) return be->ops->conv2d_relu_forward != NULL;
    if (spec->kind == BG_LAYER_MAXPOOL) return be->ops->maxpool_relu_backward != NULL;
    return 0;
}

static bg_status_t no_fused_op(const bg_layer_spec_t *spec, const bg_backend_t *be) {
    return bg_error_set(BG_ERR_INTERNAL, "%s: no pass of %s with a relu", be->name,
                        bg_layer_kind_name(spec->kind));
}

bg_status_t bg_layer_forward_relu(const bg_layer_spec_t *conv, bg_backend_t *be,
                                  const bg_layer_params_t *p, int64_t n, const void *x, void *y,
                                  void *workspace) {
    if (conv->kind != BG_LAYER_CONV2D || !bg_layer_fuses_relu(conv, be))
        return no_fused_op(conv, be);
    bg_conv2d_geometry_t g = conv_geometry(conv, n);
    return be->ops->conv2d_relu_forward(be, &g, x, p->weight, p->bias, y, workspace);
}

bg_status_t bg_layer_backward_data_relu(const bg_layer_spec_t *pool, bg_backend_t *be, int64_t n,
                                        const void *x, const void *y, const void *dy, void *dx) {
    if (pool->kind != BG_LAYER_MAXPOOL || !bg_layer_fuses_relu(pool, be))
        return no_fused_op(pool, be);
    bg_pool_geometry_t g = pool_geometry(pool, n);
    return be->ops->maxpool_relu_backward(be, &g, x, y, dy, dx);
}

bg_status_t bg_layer_backward_weights(const bg_layer_spec_t *spec, bg_backend_t *be,
                                      const bg_layer_params_t *p, int64_t n, const void *x,
                                      const void *dy, void *workspace) {
    const bg_backend_ops_t *ops = be->ops;
    if (spec->kind == BG_LAYER_CONV2D) {
        bg_conv2d_geometry_t g = conv_geometry(spec, n);
        return ops->conv2d_backward_weights(be, &g, x, dy, p->weight_grad, p->bias_grad, workspace);
    }
    if (spec->kind == BG_LAYER_DENSE)
        return ops->dense_backward_weights(be, n, bg_shape_numel(spec->in), spec->filters, x, dy,
                                           p->weight_grad, p->bias_grad);
    if (spec->kind == BG_LAYER_LAYERNORM)
        return ops->layernorm_backward_weights(be, n, bg_shape_numel(spec->in), x, dy,
                                               p->weight_grad, p->bias_grad, workspace);
    return BG_OK;
}
