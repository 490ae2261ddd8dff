#include "stage.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "arena.h"
#include "stage_impl.h"

/* Lays out `elems` elements for *out in the stage's arena and counts their
 * bytes in `category`; the memory comes with bg_arena_commit. */
static bg_status_t reserve_counted(bg_stage_t *s, int64_t elems, size_t *category, void **out) {
    BG_CHECK(bg_arena_reserve(s->arena, bg_backend_bytes(s->be, elems), out));
    *category += bg_backend_bytes(s->be, elems);
    return BG_OK;
}

/* Host floats to device memory in the backend's type. */
static bg_status_t upload_floats(bg_backend_t *be, void *dst, const float *src, int64_t n) {
    if (be->dtype == BG_F32) return be->ops->upload(be, dst, src, (size_t)n * sizeof(float));
    double *tmp = bg_malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (tmp == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", be->name);
    for (int64_t i = 0; i < n; i++) tmp[i] = src[i];
    bg_status_t st = be->ops->upload(be, dst, tmp, (size_t)n * sizeof(double));
    free(tmp);
    return st;
}

static bg_status_t download_floats(bg_backend_t *be, float *dst, const void *src, int64_t n) {
    if (be->dtype == BG_F32) return be->ops->download(be, dst, src, (size_t)n * sizeof(float));
    double *tmp = bg_malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (tmp == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", be->name);
    bg_status_t st = be->ops->download(be, tmp, src, (size_t)n * sizeof(double));
    for (int64_t i = 0; st == BG_OK && i < n; i++) dst[i] = (float)tmp[i];
    free(tmp);
    return st;
}

/* The parameter tensors of every layer, then all their gradients, then
 * each optimizer state's tensors: each kind one run of the arena (see
 * param_block in stage_impl.h). A forward-only stage holds the first. */
static bg_status_t reserve_params(bg_stage_t *s) {
    const int states = bg_stage_optimizer_states(s);
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        bg_layer_param_counts(stage_layer(s, i), &p->weight_count, &p->bias_count);
        if (p->weight_count == 0) continue;
        BG_CHECK(reserve_counted(s, p->weight_count, &s->memory.params, &p->weight));
        BG_CHECK(reserve_counted(s, p->bias_count, &s->memory.params, &p->bias));
    }
    for (int i = 0; i < s->count && !s->forward_only; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        BG_CHECK(reserve_counted(s, p->weight_count, &s->memory.grads, &p->weight_grad));
        BG_CHECK(reserve_counted(s, p->bias_count, &s->memory.grads, &p->bias_grad));
    }
    for (int k = 0; k < states; k++)
        for (int i = 0; i < s->count; i++) {
            bg_layer_params_t *p = &s->params[i];
            if (p->weight_count == 0) continue;
            BG_CHECK(reserve_counted(s, p->weight_count, &s->memory.optimizer,
                                     &s->opt_state[(i * 2) * 2 + k]));
            BG_CHECK(reserve_counted(s, p->bias_count, &s->memory.optimizer,
                                     &s->opt_state[(i * 2 + 1) * 2 + k]));
        }
    return BG_OK;
}

/* 1 when [ptr, ptr + count elements) lies in [block, block + elems). */
static int within(const bg_stage_t *s, const void *block, int64_t elems, const void *ptr,
                  int64_t count) {
    const char *b = block, *p = ptr;
    return p >= b && p + bg_backend_bytes(s->be, count) <= b + bg_backend_bytes(s->be, elems);
}

/* After commit: the runs reserve_params laid out, checked to hold every
 * tensor (the arena lays reservations out in order). */
static bg_status_t find_param_blocks(bg_stage_t *s) {
    int first = -1, last = -1;
    for (int i = 0; i < s->count; i++)
        if (stage_layer_has_params(s, i)) {
            if (first < 0) first = i;
            last = i;
        }
    if (first < 0) return BG_OK;
    const bg_layer_params_t *a = &s->params[first], *z = &s->params[last];
    const size_t span = (size_t)((const char *)z->bias - (const char *)a->weight) +
                        bg_backend_bytes(s->be, z->bias_count);
    s->block_elems = (int64_t)(span / bg_backend_bytes(s->be, 1));
    s->param_block = a->weight;
    s->grad_block = a->weight_grad;
    const int states = bg_stage_optimizer_states(s);
    for (int k = 0; k < states; k++) s->state_block[k] = s->opt_state[(first * 2) * 2 + k];
    for (int i = first; i <= last; i++) {
        const bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        int ok = within(s, s->param_block, s->block_elems, p->weight, p->weight_count) &&
                 within(s, s->param_block, s->block_elems, p->bias, p->bias_count);
        if (!s->forward_only)
            ok = ok && within(s, s->grad_block, s->block_elems, p->weight_grad, p->weight_count) &&
                 within(s, s->grad_block, s->block_elems, p->bias_grad, p->bias_count);
        for (int k = 0; k < states; k++)
            ok = ok &&
                 within(s, s->state_block[k], s->block_elems, s->opt_state[(i * 2) * 2 + k],
                        p->weight_count) &&
                 within(s, s->state_block[k], s->block_elems, s->opt_state[(i * 2 + 1) * 2 + k],
                        p->bias_count);
        if (!ok)
            return bg_error_set(BG_ERR_INTERNAL, "layer %d's parameters lie outside the block",
                                s->first + i);
    }
    return BG_OK;
}

/* Sets every layer's parameters from `seed` (the arena is zero otherwise). */
static bg_status_t init_params(bg_stage_t *s, uint64_t seed) {
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        float *host = bg_malloc(sizeof(float) * (size_t)(p->weight_count + p->bias_count));
        if (host == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory initialising layer");
        bg_layer_init_params(stage_layer(s, i), s->first + i, seed, host, host + p->weight_count);
        bg_status_t st = upload_floats(s->be, p->weight, host, p->weight_count);
        if (st == BG_OK) st = upload_floats(s->be, p->bias, host + p->weight_count, p->bias_count);
        free(host);
        BG_CHECK(st);
    }
    return BG_OK;
}

/* Lays out one micro-batch's stash and adds its bytes to *bytes. */
static bg_status_t reserve_slot(bg_stage_t *s, stage_slot_t *slot, size_t *bytes) {
    const int64_t nb = s->max_batch;
    BG_CHECK(reserve_counted(s, nb * bg_shape_numel(stage_layer(s, 0)->in), bytes, &slot->input));
    slot->outputs = bg_calloc((size_t)s->count, sizeof *slot->outputs);
    slot->saved_dy = bg_calloc((size_t)s->count, sizeof *slot->saved_dy);
    if (slot->outputs == NULL || slot->saved_dy == NULL)
        return bg_error_set(BG_ERR_NOMEM, "stage: out of memory");
    for (int i = 0; i < s->count; i++) {
        const bg_layer_spec_t *l = stage_layer(s, i);
        int64_t out = nb * bg_shape_numel(l->out);
        if (!s->recompute && !stage_layer_aliases(s, i))
            BG_CHECK(reserve_counted(s, out, bytes, &slot->outputs[i]));
        if (s->split_backward && stage_layer_has_params(s, i))
            BG_CHECK(reserve_counted(s, out, bytes, &slot->saved_dy[i]));
    }
    if (bg_stage_has_loss(s)) {
        BG_CHECK(bg_arena_reserve(s->arena, sizeof(int32_t) * (size_t)nb, (void **)&slot->labels));
        *bytes += sizeof(int32_t) * (size_t)nb;
    }
    return BG_OK;
}

/* Fills s->output_owner: a shortcut's output is its block's input (its
 * residual's output), a view's or an in-place layer's its input's. */
static void find_output_owners(bg_stage_t *s) {
    for (int i = 0; i < s->count; i++) {
        const bg_layer_spec_t *l = stage_layer(s, i);
        if (l->kind == BG_LAYER_SHORTCUT)
            s->output_owner[i] = s->output_owner[l->partner - s->first];
        else if (stage_layer_aliases(s, i))
            s->output_owner[i] = i > 0 ? s->output_owner[i - 1] : -1;
        else
            s->output_owner[i] = i;
    }
}

/* The buffers gradients pass through, for activations of `in` values at
 * the stage's input and `widest` at most: the ping-pong between layers, a
 * skip gradient for each depth of residual blocks, the output gradient
 * from the successor and the input gradient for the predecessor. */
static bg_status_t reserve_gradient_buffers(bg_stage_t *s, int64_t in, int64_t widest) {
    const int64_t nb = s->max_batch;
    BG_CHECK(reserve_counted(s, nb * widest, &s->memory.buffers, &s->grad_a));
    BG_CHECK(reserve_counted(s, nb * widest, &s->memory.buffers, &s->grad_b));
    for (int d = 0; d < s->skip_depths; d++)
        BG_CHECK(reserve_counted(s, nb * widest, &s->memory.buffers, &s->skip_grads[d]));
    if (!bg_stage_has_loss(s)) {
        int64_t out = bg_shape_numel(stage_layer(s, s->count - 1)->out);
        BG_CHECK(reserve_counted(s, nb * out, &s->memory.buffers, &s->output_grad));
    }
    if (s->first > 0) BG_CHECK(reserve_counted(s, nb * in, &s->memory.buffers, &s->input_grad));
    return BG_OK;
}

/* Lays out the stash slots, the gradients' buffers (none on a forward-only
 * stage) and the workspace. */
static bg_status_t reserve_buffers(bg_stage_t *s) {
    const int64_t nb = s->max_batch;
    int64_t in = bg_shape_numel(stage_layer(s, 0)->in);
    int64_t widest = in;
    size_t workspace = 0;
    for (int i = 0; i < s->count; i++) {
        const bg_layer_spec_t *l = stage_layer(s, i);
        int64_t out = bg_shape_numel(l->out);
        if (out > widest) widest = out;
        size_t ws;
        BG_CHECK(bg_layer_workspace_bytes(l, s->be, nb, &ws));
        if (ws > workspace) workspace = ws;
        if (s->recompute && !stage_layer_aliases(s, i))
            BG_CHECK(reserve_counted(s, nb * out, &s->memory.buffers, &s->work_outputs[i]));
    }
    for (int k = 0; k < s->slot_count; k++) {
        size_t bytes = 0;
        BG_CHECK(reserve_slot(s, &s->slots[k], &bytes));
        s->memory.stash += bytes;
        s->memory.stash_slot = bytes;
    }
    if (!s->forward_only) BG_CHECK(reserve_gradient_buffers(s, in, widest));
    if (workspace > 0) {
        BG_CHECK(bg_arena_reserve(s->arena, workspace, &s->workspace));
        s->memory.workspace = workspace;
    }
    /* The loss's scratch is the backend's (a few bytes a row), not the
     * arena's. */
    if (bg_stage_has_loss(s) && s->be->ops->softmax_xent_reserve != NULL)
        BG_CHECK(s->be->ops->softmax_xent_reserve(s->be, nb));
    return BG_OK;
}

/* Once the arena is committed: the parameter blocks and the parameters'
 * first values. */
static bg_status_t bind_buffers(bg_stage_t *s) {
    BG_CHECK(find_param_blocks(s));
    BG_CHECK(init_params(s, s->seed));
    s->bound = 1;
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
    /* A block's add reads its residual's input: both must be here. */
    for (int end = 0; end < 2; end++) {
        const int at = end ? cfg->last_layer : cfg->first_layer;
        const int block = bg_model_spec_block_cut(spec, at);
        if (block >= 0)
            return bg_error_set(BG_ERR_INVALID,
                                "stage: layers [%d, %d) cut the residual block of layers "
                                "%d..%d at layer %d",
                                cfg->first_layer, cfg->last_layer, block,
                                spec->layers[block].partner, at);
    }
    if (cfg->stash_slots < 1 || cfg->stash_slots > 65536)
        return bg_error_set(BG_ERR_INVALID, "stage: stash slots must be 1..65536, got %d",
                            cfg->stash_slots);
    bg_stage_t *s = bg_calloc(1, sizeof *s);
    if (s == NULL) return bg_error_set(BG_ERR_NOMEM, "stage: out of memory");
    s->spec = spec;
    s->be = cfg->backend;
    s->own_arena = bg_arena_init(s->be);
    s->arena = cfg->arena != NULL ? cfg->arena : &s->own_arena;
    const size_t arena_before = s->arena->bytes;
    s->seed = cfg->seed;
    s->first = cfg->first_layer;
    s->last = cfg->last_layer;
    s->count = cfg->last_layer - cfg->first_layer;
    s->max_batch = cfg->max_batch;
    s->optimizer = cfg->optimizer;
    s->forward_only = cfg->forward_only != 0;
    s->split_backward = cfg->split_backward && !s->forward_only;
    s->recompute = cfg->recompute && !s->forward_only;
    s->slot_count = cfg->stash_slots;
    bg_status_t st = BG_OK;
    s->params = bg_calloc((size_t)s->count, sizeof *s->params);
    s->opt_state = bg_calloc((size_t)s->count * 4, sizeof *s->opt_state);
    s->slots = bg_calloc((size_t)s->slot_count, sizeof *s->slots);
    s->work_outputs = bg_calloc((size_t)s->count, sizeof *s->work_outputs);
    s->output_owner = bg_malloc(sizeof *s->output_owner * (size_t)s->count);
    for (int i = 0; i < s->count; i++)
        if (stage_layer(s, i)->open_blocks > s->skip_depths)
            s->skip_depths = stage_layer(s, i)->open_blocks;
    s->skip_grads = bg_calloc((size_t)s->skip_depths + 1, sizeof *s->skip_grads);
    if (s->params == NULL || s->opt_state == NULL || s->slots == NULL || s->work_outputs == NULL ||
        s->output_owner == NULL || s->skip_grads == NULL) {
        st = bg_error_set(BG_ERR_NOMEM, "stage: out of memory");
        goto fail;
    }
    find_output_owners(s);
    BG_CHECK_GOTO(reserve_params(s), st, fail);
    BG_CHECK_GOTO(reserve_buffers(s), st, fail);
    s->memory.arena = s->arena->bytes - arena_before;
    if (cfg->arena == NULL) {
        st = bg_arena_commit(s->arena);
        if (st != BG_OK) {
            const bg_stage_memory_t memory = bg_stage_memory(s), *m = &memory;
            /* The backend's message names the device, as the prefix below
             * does (it said "on cpu:0: ...: cpu:0: out of memory"). */
            bg_error_drop_name(s->be->name);
            bg_error_prefix(st,
                            "one allocation of %zu bytes for parameters %zu, gradients %zu, "
                            "optimizer state %zu, stash %zu, buffers %zu, workspace %zu and "
                            "padding %zu (each buffer rounded up to 256 bytes): ",
                            m->arena, m->params, m->grads, m->optimizer, m->stash, m->buffers,
                            m->workspace, m->padding);
            goto fail;
        }
        BG_CHECK_GOTO(bind_buffers(s), st, fail);
    }
    *out = s;
    return BG_OK;
fail:
    bg_error_prefix(st, "stage for layers %d..%d on %s: ", s->first, s->last - 1, s->be->name);
    bg_stage_destroy(s);
    return st;
}

bg_status_t bg_stage_bind(bg_stage_t *s) {
    if (s->bound) return BG_OK;
    const bg_status_t st = s->arena->base == NULL
                               ? bg_error_set(BG_ERR_INTERNAL, "arena not allocated")
                               : bind_buffers(s);
    if (st != BG_OK)
        bg_error_prefix(st, "stage for layers %d..%d on %s: ", s->first, s->last - 1, s->be->name);
    return st;
}

void bg_stage_destroy(bg_stage_t *s) {
    if (s == NULL) return;
    bg_arena_release(&s->own_arena); /* a shared arena is its owner's to release */
    if (s->slots != NULL)
        for (int k = 0; k < s->slot_count; k++) {
            free(s->slots[k].outputs);
            free(s->slots[k].saved_dy);
        }
    free(s->params);
    free(s->opt_state);
    free(s->slots);
    free(s->work_outputs);
    free(s->output_owner);
    free(s->skip_grads);
    free(s);
}

int bg_stage_has_loss(const bg_stage_t *s) {
    return s->last == s->spec->num_layers &&
           s->spec->layers[s->last - 1].kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY;
}

bg_status_t bg_stage_upload_floats(bg_backend_t *be, void *dst, const float *src, int64_t n) {
    return upload_floats(be, dst, src, n);
}

bg_status_t bg_stage_check_trains(const bg_stage_t *s, const char *what) {
    if (!s->forward_only) return BG_OK;
    return bg_error_set(BG_ERR_INVALID,
                        "stage for layers %d..%d on %s runs forwards only (an evaluation): it "
                        "has no %s",
                        s->first, s->last - 1, s->be->name, what);
}

bg_status_t bg_stage_zero_grads(bg_stage_t *s) {
    BG_CHECK(bg_stage_check_trains(s, "gradients to zero"));
    if (s->block_elems == 0) return BG_OK;
    if (!s->timing) return s->be->ops->zero(s->be, s->grad_block, s->block_elems);
    /* Profiling: tensor by tensor, into each layer's update (the padding
     * between them is never written). */
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        double start = bg_monotonic_seconds();
        BG_CHECK(s->be->ops->zero(s->be, p->weight_grad, p->weight_count));
        BG_CHECK(s->be->ops->zero(s->be, p->bias_grad, p->bias_count));
        stage_time_add(s, s->times.update, i, start);
    }
    return BG_OK;
}

bg_status_t bg_stage_grad_square_sums(bg_stage_t *s, double *out) {
    BG_CHECK(bg_stage_check_trains(s, "gradients to measure"));
    for (int i = 0; i < s->count; i++) {
        const bg_layer_params_t *p = &s->params[i];
        double weights = 0, biases = 0;
        if (p->weight_count > 0) {
            BG_CHECK(s->be->ops->square_sum(s->be, p->weight_count, p->weight_grad, &weights));
            BG_CHECK(s->be->ops->square_sum(s->be, p->bias_count, p->bias_grad, &biases));
        }
        out[i] = weights + biases;
    }
    return BG_OK;
}

bg_status_t bg_stage_scale_grads(bg_stage_t *s, double factor) {
    BG_CHECK(bg_stage_check_trains(s, "gradients to scale"));
    if (s->block_elems == 0) return BG_OK;
    return s->be->ops->scale(s->be, s->grad_block, s->block_elems, factor);
}

bg_status_t bg_stage_step(bg_stage_t *s) {
    BG_CHECK(bg_stage_check_trains(s, "optimizer step"));
    int64_t step = s->steps + 1;
    if (!s->timing) {
        /* Elementwise over the blocks: the same numbers as tensor by tensor,
         * and the padding, with zero gradient and state, stays zero. */
        if (s->block_elems > 0)
            BG_CHECK(bg_optimizer_update(&s->optimizer, s->be, step, s->block_elems, s->param_block,
                                         s->grad_block, s->state_block));
        s->steps = step;
        return BG_OK;
    }
    /* Profiling: tensor by tensor, for each layer's share of the time. */
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        double start = bg_monotonic_seconds();
        BG_CHECK(bg_optimizer_update(&s->optimizer, s->be, step, p->weight_count, p->weight,
                                     p->weight_grad, &s->opt_state[(i * 2) * 2]));
        BG_CHECK(bg_optimizer_update(&s->optimizer, s->be, step, p->bias_count, p->bias,
                                     p->bias_grad, &s->opt_state[(i * 2 + 1) * 2]));
        stage_time_add(s, s->times.update, i, start);
    }
    s->steps = step;
    return BG_OK;
}

int64_t bg_stage_steps(const bg_stage_t *s) { return s->steps; }

void bg_stage_set_layer_times(bg_stage_t *s, const bg_stage_layer_times_t *times) {
    s->timing = times != NULL;
    if (times != NULL) s->times = *times;
}

int64_t bg_stage_param_count(const bg_stage_t *s) {
    int64_t total = 0;
    for (int i = 0; i < s->count; i++) total += s->params[i].weight_count + s->params[i].bias_count;
    return total;
}

/* What copy_buffers moves: parameters, gradients or optimizer state k. */
enum { COPY_PARAMS = -2, COPY_GRADS = -1 };

/* Visits every parameter buffer (or its gradient, or its optimizer state
 * `which` >= 0) in the flat order: per layer, weight then bias. */
static bg_status_t copy_buffers(bg_stage_t *s, int which, float *host_out, const float *host_in) {
    int64_t at = 0;
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        void *w = which == COPY_PARAMS  ? p->weight
                  : which == COPY_GRADS ? p->weight_grad
                                        : s->opt_state[(i * 2) * 2 + which];
        void *b = which == COPY_PARAMS  ? p->bias
                  : which == COPY_GRADS ? p->bias_grad
                                        : s->opt_state[(i * 2 + 1) * 2 + which];
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
    return copy_buffers(s, COPY_PARAMS, host, NULL);
}

bg_status_t bg_stage_upload_params(bg_stage_t *s, const float *host) {
    return copy_buffers(s, COPY_PARAMS, NULL, host);
}

bg_status_t bg_stage_download_grads(bg_stage_t *s, float *host) {
    BG_CHECK(bg_stage_check_trains(s, "gradients to download"));
    return copy_buffers(s, COPY_GRADS, host, NULL);
}

bg_status_t bg_stage_mark_nonfinite_grads(bg_stage_t *s, int tag) {
    BG_CHECK(bg_stage_check_trains(s, "gradients to check"));
    if (s->block_elems == 0) return BG_OK;
    if (!s->timing || s->times.weight_check == NULL)
        return s->be->ops->mark_nonfinite(s->be, s->block_elems, s->grad_block, tag);
    /* Profiling: tensor by tensor, into each layer's weight_check. */
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        double start = bg_monotonic_seconds();
        BG_CHECK(s->be->ops->mark_nonfinite(s->be, p->weight_count, p->weight_grad, tag));
        BG_CHECK(s->be->ops->mark_nonfinite(s->be, p->bias_count, p->bias_grad, tag));
        stage_time_add(s, s->times.weight_check, i, start);
    }
    return BG_OK;
}

bg_status_t bg_stage_find_nonfinite_grad(bg_stage_t *s, int *layer) {
    *layer = -1;
    BG_CHECK(bg_stage_check_trains(s, "gradients to check"));
    for (int i = 0; i < s->count; i++) {
        bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        int weights_ok, biases_ok;
        BG_CHECK(s->be->ops->all_finite(s->be, p->weight_count, p->weight_grad, &weights_ok));
        BG_CHECK(s->be->ops->all_finite(s->be, p->bias_count, p->bias_grad, &biases_ok));
        if (!weights_ok || !biases_ok) {
            *layer = s->first + i;
            return BG_OK;
        }
    }
    return BG_OK;
}

int bg_stage_optimizer_states(const bg_stage_t *s) {
    return s->forward_only ? 0 : bg_optimizer_state_buffers(&s->optimizer);
}

static bg_status_t check_state(const bg_stage_t *s, int k) {
    if (k < 0 || k >= bg_stage_optimizer_states(s))
        return bg_error_set(BG_ERR_INVALID, "stage: optimizer state %d of %d", k,
                            bg_stage_optimizer_states(s));
    return BG_OK;
}

bg_status_t bg_stage_download_optimizer_state(bg_stage_t *s, int k, float *host) {
    BG_CHECK(check_state(s, k));
    return copy_buffers(s, k, host, NULL);
}

bg_status_t bg_stage_upload_optimizer_state(bg_stage_t *s, int k, const float *host) {
    BG_CHECK(check_state(s, k));
    return copy_buffers(s, k, NULL, host);
}

void bg_stage_set_steps(bg_stage_t *s, int64_t steps) { s->steps = steps; }

bg_stage_memory_t bg_stage_memory(const bg_stage_t *s) {
    bg_stage_memory_t m = s->memory;
    m.padding = m.arena - (m.params + m.grads + m.optimizer + m.stash + m.buffers + m.workspace);
    m.stash_current = m.stash_slot * (size_t)m.in_flight;
    m.stash_peak = m.stash_slot * (size_t)m.peak_in_flight;
    return m;
}
