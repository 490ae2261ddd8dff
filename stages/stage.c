#include "stage.h"

#include <stdlib.h>
#include <string.h>

#include "layer.h"

struct bg_stage {
    const bg_model_spec_t *spec;
    bg_backend_t *be;
    int first, last; /* layer slice [first, last) */
    int count;       /* last - first */
    int64_t max_batch;
    int64_t batch; /* n of the last forward */
    bg_optimizer_config_t optimizer;
    int64_t steps;

    bg_layer_params_t *params; /* count entries */
    void **opt_state;          /* count * 2 * state_buffers: weight states, bias states */
    void *input;               /* (max_batch, in) */
    void **outputs;            /* count entries, (max_batch, out of layer) */
    void *grad_a, *grad_b;     /* ping-pong dL/d(activation) buffers */
    void *output_grad;         /* non-loss stage: dL/d(output) from the successor */
    void *input_grad;          /* stage not at layer 0: dL/d(input) for the predecessor */
    int32_t *labels;           /* loss stage: (max_batch) */
    void *workspace;
    bg_stage_memory_t memory;
};

static const bg_layer_spec_t *layer_spec(const bg_stage_t *s, int i) {
    return &s->spec->layers[s->first + i];
}

static bg_status_t alloc_counted(bg_stage_t *s, int64_t elems, size_t *category, void **out) {
    BG_CHECK(bg_backend_alloc_elems(s->be, elems, out));
    *category += bg_backend_bytes(s->be, elems);
    return BG_OK;
}

/* Host floats to device memory in the backend's type. */
static bg_status_t upload_floats(bg_backend_t *be, void *dst, const float *src, int64_t n) {
    if (be->dtype == BG_F32) return be->ops->upload(be, dst, src, (size_t)n * sizeof(float));
    double *tmp = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (tmp == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", be->name);
    for (int64_t i = 0; i < n; i++) tmp[i] = src[i];
    bg_status_t st = be->ops->upload(be, dst, tmp, (size_t)n * sizeof(double));
    free(tmp);
    return st;
}

static bg_status_t download_floats(bg_backend_t *be, float *dst, const void *src, int64_t n) {
    if (be->dtype == BG_F32) return be->ops->download(be, dst, src, (size_t)n * sizeof(float));
    double *tmp = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (tmp == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", be->name);
    bg_status_t st = be->ops->download(be, tmp, src, (size_t)n * sizeof(double));
    for (int64_t i = 0; st == BG_OK && i < n; i++) dst[i] = (float)tmp[i];
    free(tmp);
    return st;
}

static bg_status_t allocate_params(bg_stage_t *s, uint64_t seed) {
    int states = bg_optimizer_state_buffers(&s->optimizer);
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        bg_layer_param_counts(layer_spec(s, i), &p->weight_count, &p->bias_count);
        if (p->weight_count == 0) continue;
        BG_CHECK(alloc_counted(s, p->weight_count, &s->memory.params, &p->weight));
        BG_CHECK(alloc_counted(s, p->bias_count, &s->memory.params, &p->bias));
        BG_CHECK(alloc_counted(s, p->weight_count, &s->memory.grads, &p->weight_grad));
        BG_CHECK(alloc_counted(s, p->bias_count, &s->memory.grads, &p->bias_grad));
        for (int k = 0; k < states; k++) {
            BG_CHECK(alloc_counted(s, p->weight_count, &s->memory.optimizer,
                                   &s->opt_state[(i * 2) * 2 + k]));
            BG_CHECK(alloc_counted(s, p->bias_count, &s->memory.optimizer,
                                   &s->opt_state[(i * 2 + 1) * 2 + k]));
        }
        float *host = malloc(sizeof(float) * (size_t)(p->weight_count + p->bias_count));
        if (host == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory initialising layer");
        bg_layer_init_params(layer_spec(s, i), s->first + i, seed, host, host + p->weight_count);
        bg_status_t st = upload_floats(s->be, p->weight, host, p->weight_count);
        if (st == BG_OK) st = upload_floats(s->be, p->bias, host + p->weight_count, p->bias_count);
        free(host);
        BG_CHECK(st);
    }
    return BG_OK;
}

static bg_status_t allocate_buffers(bg_stage_t *s) {
    const int64_t nb = s->max_batch;
    int64_t in = bg_shape_numel(layer_spec(s, 0)->in);
    int64_t widest = in;
    size_t workspace = 0;
    BG_CHECK(alloc_counted(s, nb * in, &s->memory.activations, &s->input));
    for (int i = 0; i < s->count; i++) {
        const bg_layer_spec_t *l = layer_spec(s, i);
        int64_t out = bg_shape_numel(l->out);
        if (out > widest) widest = out;
        if (l->kind == BG_LAYER_FLATTEN) {
            /* A flatten is a reshape of NCHW data: its output is its input. */
            s->outputs[i] = i > 0 ? s->outputs[i - 1] : s->input;
            continue;
        }
        BG_CHECK(alloc_counted(s, nb * out, &s->memory.activations, &s->outputs[i]));
        size_t ws = bg_layer_workspace_bytes(l, s->be, nb);
        if (ws > workspace) workspace = ws;
    }
    BG_CHECK(alloc_counted(s, nb * widest, &s->memory.activations, &s->grad_a));
    BG_CHECK(alloc_counted(s, nb * widest, &s->memory.activations, &s->grad_b));
    if (bg_stage_has_loss(s)) {
        BG_CHECK(s->be->ops->alloc(s->be, sizeof(int32_t) * (size_t)nb, (void **)&s->labels));
        s->memory.activations += sizeof(int32_t) * (size_t)nb;
    } else {
        int64_t out = bg_shape_numel(layer_spec(s, s->count - 1)->out);
        BG_CHECK(alloc_counted(s, nb * out, &s->memory.activations, &s->output_grad));
    }
    if (s->first > 0) BG_CHECK(alloc_counted(s, nb * in, &s->memory.activations, &s->input_grad));
    if (workspace > 0) {
        BG_CHECK(s->be->ops->alloc(s->be, workspace, &s->workspace));
        s->memory.workspace = workspace;
    }
    return BG_OK;
}

bg_status_t bg_stage_create(const bg_stage_config_t *cfg, bg_stage_t **out) {
    const bg_model_spec_t *spec = cfg->spec;
    if (spec == NULL || cfg->backend == NULL)
        return bg_error_set(BG_ERR_INVALID, "stage: no model spec or backend given");
    if (cfg->first_layer < 0 || cfg->last_layer > spec->num_layers ||
        cfg->first_layer >= cfg->last_layer)
        return bg_error_set(BG_ERR_INVALID, "stage: layer range [%d, %d) is not within 0..%d",
                            cfg->first_layer, cfg->last_layer, spec->num_layers);
    if (cfg->max_batch < 1)
        return bg_error_set(BG_ERR_INVALID, "stage: batch size must be >= 1, got %lld",
                            (long long)cfg->max_batch);
    bg_stage_t *s = calloc(1, sizeof *s);
    if (s == NULL) return bg_error_set(BG_ERR_NOMEM, "stage: out of memory");
    s->spec = spec;
    s->be = cfg->backend;
    s->first = cfg->first_layer;
    s->last = cfg->last_layer;
    s->count = cfg->last_layer - cfg->first_layer;
    s->max_batch = cfg->max_batch;
    s->optimizer = cfg->optimizer;
    bg_status_t st = BG_OK;
    s->params = calloc((size_t)s->count, sizeof *s->params);
    s->opt_state = calloc((size_t)s->count * 4, sizeof *s->opt_state);
    s->outputs = calloc((size_t)s->count, sizeof *s->outputs);
    if (s->params == NULL || s->opt_state == NULL || s->outputs == NULL) {
        st = bg_error_set(BG_ERR_NOMEM, "stage: out of memory");
        goto fail;
    }
    BG_CHECK_GOTO(allocate_params(s, cfg->seed), st, fail);
    BG_CHECK_GOTO(allocate_buffers(s), st, fail);
    *out = s;
    return BG_OK;
fail:
    bg_error_prefix(st, "stage for layers %d..%d on %s: ", s->first, s->last - 1, s->be->name);
    bg_stage_destroy(s);
    return st;
}

void bg_stage_destroy(bg_stage_t *s) {
    if (s == NULL) return;
    bg_backend_t *be = s->be;
    if (s->params != NULL) {
        for (int i = 0; i < s->count; i++) {
            be->ops->free(be, s->params[i].weight);
            be->ops->free(be, s->params[i].bias);
            be->ops->free(be, s->params[i].weight_grad);
            be->ops->free(be, s->params[i].bias_grad);
        }
    }
    if (s->opt_state != NULL)
        for (int i = 0; i < s->count * 4; i++) be->ops->free(be, s->opt_state[i]);
    if (s->outputs != NULL)
        for (int i = 0; i < s->count; i++)
            if (layer_spec(s, i)->kind != BG_LAYER_FLATTEN) be->ops->free(be, s->outputs[i]);
    be->ops->free(be, s->input);
    be->ops->free(be, s->grad_a);
    be->ops->free(be, s->grad_b);
    be->ops->free(be, s->output_grad);
    be->ops->free(be, s->input_grad);
    be->ops->free(be, s->labels);
    be->ops->free(be, s->workspace);
    free(s->params);
    free(s->opt_state);
    free(s->outputs);
    free(s);
}

int bg_stage_has_loss(const bg_stage_t *s) {
    return s->last == s->spec->num_layers &&
           s->spec->layers[s->last - 1].kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY;
}

void *bg_stage_input(bg_stage_t *s) { return s->input; }

bg_status_t bg_stage_load_batch(bg_stage_t *s, int64_t n, const float *images,
                                const int32_t *labels) {
    if (n < 1 || n > s->max_batch)
        return bg_error_set(BG_ERR_INVALID, "stage: batch of %lld samples, room for 1..%lld",
                            (long long)n, (long long)s->max_batch);
    if (images != NULL)
        BG_CHECK(upload_floats(s->be, s->input, images, n * bg_shape_numel(layer_spec(s, 0)->in)));
    if (bg_stage_has_loss(s) && labels != NULL)
        BG_CHECK(s->be->ops->upload(s->be, s->labels, labels, sizeof(int32_t) * (size_t)n));
    return BG_OK;
}

bg_status_t bg_stage_forward(bg_stage_t *s, int64_t n, bg_stage_loss_t *loss) {
    if (n < 1 || n > s->max_batch)
        return bg_error_set(BG_ERR_INVALID, "stage: batch of %lld samples, room for 1..%lld",
                            (long long)n, (long long)s->max_batch);
    s->batch = n;
    const void *x = s->input;
    for (int i = 0; i < s->count; i++) {
        const bg_layer_spec_t *l = layer_spec(s, i);
        bg_status_t st;
        if (l->kind == BG_LAYER_FLATTEN) {
            st = BG_OK; /* output aliases the input */
        } else if (l->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY) {
            bg_stage_loss_t result = {0};
            st = s->be->ops->softmax_xent_forward(s->be, n, l->in.c, x, s->labels, s->outputs[i],
                                                  &result.loss_sum, &result.correct);
            if (st == BG_OK && loss != NULL) *loss = result;
        } else {
            st = bg_layer_forward(l, s->be, &s->params[i], n, x, s->outputs[i], s->workspace);
        }
        if (st != BG_OK)
            return bg_error_prefix(st, "forward of layer %d (%s): ", s->first + i,
                                   bg_layer_kind_name(l->kind));
        x = s->outputs[i];
    }
    return BG_OK;
}

const void *bg_stage_output(const bg_stage_t *s) { return s->outputs[s->count - 1]; }

void *bg_stage_output_grad(bg_stage_t *s) { return s->output_grad; }

const void *bg_stage_input_grad(const bg_stage_t *s) { return s->input_grad; }

bg_status_t bg_stage_backward(bg_stage_t *s, int64_t n, double loss_scale) {
    if (n != s->batch)
        return bg_error_set(BG_ERR_INTERNAL,
                            "stage: backward of %lld samples after a forward "
                            "of %lld",
                            (long long)n, (long long)s->batch);
    const void *dy = s->output_grad; /* NULL on the loss stage; set by its first layer */
    for (int i = s->count - 1; i >= 0; i--) {
        const bg_layer_spec_t *l = layer_spec(s, i);
        const void *x = i > 0 ? s->outputs[i - 1] : s->input;
        void *dx = dy == s->grad_a ? s->grad_b : s->grad_a;
        if (i == 0) dx = s->input_grad;
        bg_status_t st = BG_OK;
        if (l->kind == BG_LAYER_FLATTEN) {
            /* The gradient passes through unchanged; only a stage that starts
             * with the flatten must hand it over in its own buffer. */
            if (i > 0) continue;
            if (dx != NULL) st = s->be->ops->copy(s->be, dx, dy, n * bg_shape_numel(l->in));
        } else if (l->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY) {
            if (dx == NULL) break; /* a model that is only its loss: nothing to train */
            st = s->be->ops->softmax_xent_backward(s->be, n, l->in.c, s->outputs[i], s->labels,
                                                   loss_scale, dx);
        } else {
            st = bg_layer_backward_weights(l, s->be, &s->params[i], n, x, dy, s->workspace);
            /* The model's first layer has no one to pass dL/d(input) to. */
            if (st == BG_OK && dx != NULL)
                st = bg_layer_backward_data(l, s->be, &s->params[i], n, x, s->outputs[i], dy, dx,
                                            s->workspace);
        }
        if (st != BG_OK)
            return bg_error_prefix(st, "backward of layer %d (%s): ", s->first + i,
                                   bg_layer_kind_name(l->kind));
        dy = dx;
    }
    return BG_OK;
}

bg_status_t bg_stage_zero_grads(bg_stage_t *s) {
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        BG_CHECK(s->be->ops->zero(s->be, p->weight_grad, p->weight_count));
        BG_CHECK(s->be->ops->zero(s->be, p->bias_grad, p->bias_count));
    }
    return BG_OK;
}

bg_status_t bg_stage_step(bg_stage_t *s) {
    int64_t step = s->steps + 1;
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        BG_CHECK(bg_optimizer_update(&s->optimizer, s->be, step, p->weight_count, p->weight,
                                     p->weight_grad, &s->opt_state[(i * 2) * 2]));
        BG_CHECK(bg_optimizer_update(&s->optimizer, s->be, step, p->bias_count, p->bias,
                                     p->bias_grad, &s->opt_state[(i * 2 + 1) * 2]));
    }
    s->steps = step;
    return BG_OK;
}

int64_t bg_stage_steps(const bg_stage_t *s) { return s->steps; }

int64_t bg_stage_param_count(const bg_stage_t *s) {
    int64_t total = 0;
    for (int i = 0; i < s->count; i++) total += s->params[i].weight_count + s->params[i].bias_count;
    return total;
}

/* Visits every parameter buffer (or its gradient) in the flat order. */
static bg_status_t copy_params(bg_stage_t *s, float *host_out, const float *host_in, int grads) {
    int64_t at = 0;
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        void *w = grads ? p->weight_grad : p->weight;
        void *b = grads ? p->bias_grad : p->bias;
        if (host_out != NULL) {
            BG_CHECK(download_floats(s->be, host_out + at, w, p->weight_count));
            BG_CHECK(download_floats(s->be, host_out + at + p->weight_count, b, p->bias_count));
        } else {
            BG_CHECK(upload_floats(s->be, w, host_in + at, p->weight_count));
            BG_CHECK(upload_floats(s->be, b, host_in + at + p->weight_count, p->bias_count));
        }
        at += p->weight_count + p->bias_count;
    }
    return BG_OK;
}

bg_status_t bg_stage_download_params(bg_stage_t *s, float *host) {
    return copy_params(s, host, NULL, 0);
}

bg_status_t bg_stage_upload_params(bg_stage_t *s, const float *host) {
    return copy_params(s, NULL, host, 0);
}

bg_status_t bg_stage_download_grads(bg_stage_t *s, float *host) {
    return copy_params(s, host, NULL, 1);
}

bg_stage_memory_t bg_stage_memory(const bg_stage_t *s) { return s->memory; }
