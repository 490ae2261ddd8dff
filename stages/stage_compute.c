/* The passes of a stage over one micro-batch slot: forward, backward (B) and
 * the separate weight-gradient pass (W) of split-backward schedules. */
#include <string.h>

#include "stage_impl.h"

static bg_status_t check_slot(const bg_stage_t *s, int slot, int64_t n) {
    if (slot < 0 || slot >= s->slot_count)
        return bg_error_set(BG_ERR_INTERNAL, "stage: slot %d of %d", slot, s->slot_count);
    if (n < 0 || n > s->max_batch)
        return bg_error_set(BG_ERR_INVALID, "stage: batch of %lld samples, room for 1..%lld",
                            (long long)n, (long long)s->max_batch);
    return BG_OK;
}

void *bg_stage_layer_output(const bg_stage_t *s, const stage_slot_t *slot, int i) {
    const int owner = s->output_owner[i];
    if (owner < 0) return slot->input;
    return s->recompute ? s->work_outputs[owner] : slot->outputs[owner];
}

void *bg_stage_slot_input(bg_stage_t *s, int slot) { return s->slots[slot].input; }

void **bg_stage_slot_input_ref(bg_stage_t *s, int slot) { return &s->slots[slot].input; }

void **bg_stage_output_grad_ref(bg_stage_t *s) { return &s->output_grad; }

void bg_stage_slot_set_first_sample(bg_stage_t *s, int slot, int64_t first_sample) {
    s->slots[slot].first_sample = first_sample;
}

/* Dropout layer i's pass over the slot (x -> y forward, dy -> dx
 * backward): its mask when the slot's forward trained, else the identity. */
static bg_status_t run_dropout(const bg_stage_t *s, const stage_slot_t *sl, int i, int64_t n,
                               const void *x, void *y) {
    const bg_layer_spec_t *l = stage_layer(s, i);
    const bg_dropout_mask_t mask =
        bg_layer_dropout_mask(l, s->first + i, s->seed, sl->step, sl->first_sample);
    return bg_layer_dropout(l, s->be, sl->training ? &mask : NULL, n, x, y);
}

void *bg_stage_input(bg_stage_t *s) { return s->slots[0].input; }

const void *bg_stage_slot_output(const bg_stage_t *s, int slot) {
    return bg_stage_layer_output(s, &s->slots[slot], s->count - 1);
}

const void *bg_stage_output(const bg_stage_t *s) { return bg_stage_slot_output(s, 0); }

void *bg_stage_output_grad(bg_stage_t *s) { return s->output_grad; }

const void *bg_stage_input_grad(const bg_stage_t *s) { return s->input_grad; }

/* Both loads; with `async` from host_alloc memory, without waiting (an
 * F64 stage converts its images, and so waits). */
static bg_status_t load_slot(bg_stage_t *s, int slot, int64_t n, const float *images,
                             const int32_t *labels, int async) {
    BG_CHECK(check_slot(s, slot, n));
    if (n < 1)
        return bg_error_set(BG_ERR_INVALID, "stage: batch of %lld samples, room for 1..%lld",
                            (long long)n, (long long)s->max_batch);
    stage_slot_t *sl = &s->slots[slot];
    bg_status_t (*upload)(bg_backend_t *, void *, const void *, size_t) =
        async ? s->be->ops->upload_async : s->be->ops->upload;
    const int64_t pixels = n * bg_shape_numel(stage_layer(s, 0)->in);
    if (images != NULL && async && s->be->dtype == BG_F32)
        BG_CHECK(upload(s->be, sl->input, images, sizeof(float) * (size_t)pixels));
    else if (images != NULL)
        BG_CHECK(bg_stage_upload_floats(s->be, sl->input, images, pixels));
    if (bg_stage_has_loss(s) && labels != NULL)
        BG_CHECK(upload(s->be, sl->labels, labels, sizeof(int32_t) * (size_t)n));
    return BG_OK;
}

bg_status_t bg_stage_load_slot(bg_stage_t *s, int slot, int64_t n, const float *images,
                               const int32_t *labels) {
    return load_slot(s, slot, n, images, labels, 0);
}

bg_status_t bg_stage_load_slot_async(bg_stage_t *s, int slot, int64_t n, const float *images,
                                     const int32_t *labels) {
    return load_slot(s, slot, n, images, labels, 1);
}

bg_status_t bg_stage_load_batch(bg_stage_t *s, int64_t n, const float *images,
                                const int32_t *labels) {
    return bg_stage_load_slot(s, 0, n, images, labels);
}

/* What a forward does with the loss layer's loss. */
typedef enum loss_use {
    LOSS_RETURN, /* into *loss (the backend waits for it) */
    LOSS_ADD,    /* into the backend's totals, non-finite marked with loss_tag */
    LOSS_NONE,   /* probabilities only: a recomputed forward, counted before */
} loss_use_t;

/* 1 when layer i of the stage is a conv2d whose forward also does the relu
 * after it, which runs in place over its output in the stage: the relu's
 * own forward then has nothing left to do. */
static int convolves_into_relu(const bg_stage_t *s, int i) {
    return i >= 0 && i + 1 < s->count && stage_layer(s, i)->kind == BG_LAYER_CONV2D &&
           stage_layer(s, i + 1)->kind == BG_LAYER_RELU && stage_layer_aliases(s, i + 1) &&
           bg_layer_fuses_relu(stage_layer(s, i), s->be);
}

/* Runs the layers of `slot` forward; the loss layer's loss as `use` says. */
static bg_status_t run_forward(bg_stage_t *s, stage_slot_t *sl, int64_t n, loss_use_t use,
                               bg_stage_loss_t *loss, int loss_tag) {
    const void *x = sl->input;
    for (int i = 0; i < s->count; i++) {
        const bg_layer_spec_t *l = stage_layer(s, i);
        void *y = bg_stage_layer_output(s, sl, i);
        bg_status_t st = BG_OK;
        double start = s->timing ? bg_monotonic_seconds() : 0;
        /* Its output aliases its input, with nothing to run: a reshape, a
         * residual (whose add reads its input there), or a relu the conv2d
         * before it did. */
        const int nothing = l->kind == BG_LAYER_FLATTEN || l->kind == BG_LAYER_RESIDUAL ||
                            l->kind == BG_LAYER_SHORTCUT || convolves_into_relu(s, i - 1);
        if (nothing) {
            /* the output is already there */
        } else if (convolves_into_relu(s, i)) {
            st = bg_layer_forward_relu(l, s->be, &s->params[i], n, x, y, s->workspace);
        } else if (l->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY && use != LOSS_RETURN) {
            st = s->be->ops->softmax_xent_forward_add(s->be, n, l->in.c, x, sl->labels, y,
                                                      use == LOSS_ADD, loss_tag);
        } else if (l->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY) {
            bg_stage_loss_t result = {0};
            st = s->be->ops->softmax_xent_forward(s->be, n, l->in.c, x, sl->labels, y,
                                                  &result.loss_sum, &result.correct);
            if (st == BG_OK && loss != NULL) *loss = result;
        } else if (l->kind == BG_LAYER_DROPOUT) {
            st = run_dropout(s, sl, i, n, x, y);
        } else if (l->kind == BG_LAYER_ADD) {
            /* The block's input, or with a shortcut the main branch's
             * output, beside the shortcut's input. */
            const int other = l->shortcut >= 0 ? l->shortcut - 1 : l->partner;
            st = s->be->ops->add(s->be, n * bg_shape_numel(l->in), x,
                                 bg_stage_layer_output(s, sl, other - s->first), y);
        } else {
            st = bg_layer_forward(l, s->be, &s->params[i], n, x, y, s->workspace);
        }
        if (st != BG_OK)
            return bg_error_prefix(st, "forward of layer %d (%s): ", s->first + i,
                                   bg_layer_kind_name(l->kind));
        if (!nothing) stage_time_add(s, s->times.forward, i, start);
        x = y;
    }
    return BG_OK;
}

static bg_status_t forward_slot(bg_stage_t *s, int slot, int64_t n, int stash, loss_use_t use,
                                bg_stage_loss_t *loss, int loss_tag) {
    BG_CHECK(check_slot(s, slot, n));
    stage_slot_t *sl = &s->slots[slot];
    if (stash) {
        BG_CHECK(bg_stage_check_trains(s, "micro-batches to keep for a backward"));
        if (sl->state == SLOT_FREE) {
            s->memory.in_flight++;
            if (s->memory.in_flight > s->memory.peak_in_flight)
                s->memory.peak_in_flight = s->memory.in_flight;
        } else if (sl->state == SLOT_BACKWARD_DONE) {
            return bg_error_set(BG_ERR_INTERNAL, "stage: forward into slot %d, whose W has not run",
                                slot);
        }
        sl->state = SLOT_FORWARD_DONE;
    } else if (s->memory.peak_in_flight < 1) {
        /* An evaluation keeps nothing, but its activations fill the slot
         * while it runs: the peak counts them. */
        s->memory.peak_in_flight = 1;
    }
    sl->batch = n;
    sl->step = s->steps;
    sl->training = stash;
    if (loss != NULL) *loss = (bg_stage_loss_t){0};
    if (n == 0) return BG_OK;
    return run_forward(s, sl, n, use, loss, loss_tag);
}

bg_status_t bg_stage_forward_slot(bg_stage_t *s, int slot, int64_t n, int stash,
                                  bg_stage_loss_t *loss) {
    return forward_slot(s, slot, n, stash, LOSS_RETURN, loss, -1);
}

bg_status_t bg_stage_forward_slot_deferred(bg_stage_t *s, int slot, int64_t n, int stash,
                                           int loss_tag) {
    return forward_slot(s, slot, n, stash, LOSS_ADD, NULL, loss_tag);
}

bg_status_t bg_stage_forward(bg_stage_t *s, int64_t n, bg_stage_loss_t *loss) {
    if (n < 1)
        return bg_error_set(BG_ERR_INVALID, "stage: batch of %lld samples, room for 1..%lld",
                            (long long)n, (long long)s->max_batch);
    return bg_stage_forward_slot(s, 0, n, 1, loss);
}

static void release(bg_stage_t *s, stage_slot_t *sl) {
    sl->state = SLOT_FREE;
    s->memory.in_flight--;
}

/* Where B writes dL/d(output of layer i-1), i.e. layer i's dx: the slot's
 * saved gradient when W will need it, else the ping-pong buffer not holding
 * dy. Layer 0 writes to the stage's input_grad (NULL at the model's input). */
static void *backward_target(bg_stage_t *s, stage_slot_t *sl, int i, const void *dy) {
    if (i == 0) return s->input_grad;
    if (s->split_backward && stage_layer_has_params(s, i - 1)) return sl->saved_dy[i - 1];
    return dy == s->grad_a ? s->grad_b : s->grad_a;
}

/* 1 when layer i of the stage is a max-pool over the relu before it, also
 * in the stage, and the backend does both backwards in one op: the pool's
 * backward then does the relu's, whose own passes its gradient through. */
static int pools_over_relu(const bg_stage_t *s, int i) {
    return i > 0 && i < s->count && stage_layer(s, i)->kind == BG_LAYER_MAXPOOL &&
           stage_layer(s, i - 1)->kind == BG_LAYER_RELU &&
           bg_layer_fuses_relu(stage_layer(s, i), s->be);
}

bg_status_t bg_stage_backward_slot(bg_stage_t *s, int slot, int64_t n, double loss_scale) {
    BG_CHECK(bg_stage_check_trains(s, "backward"));
    BG_CHECK(check_slot(s, slot, n));
    stage_slot_t *sl = &s->slots[slot];
    if (sl->state != SLOT_FORWARD_DONE || sl->batch != n)
        return bg_error_set(BG_ERR_INTERNAL,
                            "stage: backward of %lld samples in slot %d without its forward",
                            (long long)n, slot);
    if (n == 0) goto done;
    if (s->recompute) BG_CHECK(run_forward(s, sl, n, LOSS_NONE, NULL, -1));
    const void *dy = s->output_grad; /* NULL on the loss stage; set by the loss layer */
    for (int i = s->count - 1; i >= 0; i--) {
        const bg_layer_spec_t *l = stage_layer(s, i);
        const void *x = i > 0 ? bg_stage_layer_output(s, sl, i - 1) : sl->input;
        const void *y = bg_stage_layer_output(s, sl, i);
        void *dx = backward_target(s, sl, i, dy);
        bg_status_t st = BG_OK;
        double start = s->timing ? bg_monotonic_seconds() : 0;
        if (s->split_backward && stage_layer_has_params(s, i) && dy != sl->saved_dy[i]) {
            /* The stage's last layer gets dy in a shared buffer: keep a copy. */
            st = s->be->ops->copy(s->be, sl->saved_dy[i], dy, n * bg_shape_numel(l->out));
            dy = sl->saved_dy[i];
        }
        if (st == BG_OK && l->kind == BG_LAYER_ADD) {
            /* The block's input gets dy twice: through the block's layers,
             * and straight, kept here until its residual's backward adds
             * it. */
            st = s->be->ops->copy(s->be, s->skip_grads[l->open_blocks - 1], dy,
                                  n * bg_shape_numel(l->in));
        }
        const int passes =
            l->kind == BG_LAYER_FLATTEN || l->kind == BG_LAYER_ADD || pools_over_relu(s, i + 1);
        if (st == BG_OK && passes) {
            /* The gradient passes through unchanged (a flatten is a
             * reshape, an add's dX is its dy; the max-pool after this relu
             * did the relu's backward), unless the layer starts the stage
             * and must hand it over in its own buffer, or W keeps it. */
            if (i > 0 && dx != sl->saved_dy[i - 1]) {
                if (l->kind == BG_LAYER_ADD) stage_time_add(s, s->times.backward_data, i, start);
                continue;
            }
            if (dx != NULL) st = s->be->ops->copy(s->be, dx, dy, n * bg_shape_numel(l->in));
        } else if (st == BG_OK && l->kind == BG_LAYER_SHORTCUT) {
            /* The main branch's gradient is the add's dy, kept; the
             * shortcut branch's (dy) is kept in its place for the residual. */
            void *kept = s->skip_grads[l->open_blocks - 1];
            const int64_t count = n * bg_shape_numel(l->in);
            st = s->be->ops->copy(s->be, dx, kept, count);
            if (st == BG_OK) st = s->be->ops->copy(s->be, kept, dy, n * bg_shape_numel(l->out));
        } else if (st == BG_OK && l->kind == BG_LAYER_RESIDUAL) {
            if (dx != NULL)
                st = s->be->ops->add(s->be, n * bg_shape_numel(l->in), dy,
                                     s->skip_grads[l->open_blocks], dx);
        } else if (st == BG_OK && l->kind == BG_LAYER_DROPOUT) {
            if (dx != NULL) st = run_dropout(s, sl, i, n, dy, dx);
        } else if (st == BG_OK && l->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY) {
            if (dx == NULL) break; /* a model that is only its loss: nothing to train */
            st =
                s->be->ops->softmax_xent_backward(s->be, n, l->in.c, y, sl->labels, loss_scale, dx);
        } else if (st == BG_OK) {
            if (!s->split_backward) {
                st = bg_layer_backward_weights(l, s->be, &s->params[i], n, x, dy, s->workspace);
                if (stage_layer_has_params(s, i)) {
                    stage_time_add(s, s->times.backward_weights, i, start);
                    start = s->timing ? bg_monotonic_seconds() : 0;
                }
            }
            /* The model's first layer has no one to pass dL/d(input) to. */
            if (st == BG_OK && dx != NULL && pools_over_relu(s, i))
                st = bg_layer_backward_data_relu(l, s->be, n, x, y, dy, dx);
            else if (st == BG_OK && dx != NULL)
                st = bg_layer_backward_data(l, s->be, &s->params[i], n, x, y, dy, dx, s->workspace);
        }
        if (st != BG_OK)
            return bg_error_prefix(st, "backward of layer %d (%s): ", s->first + i,
                                   bg_layer_kind_name(l->kind));
        /* The model's first layer computes no dX: nothing to time. */
        if (dx != NULL) stage_time_add(s, s->times.backward_data, i, start);
        dy = dx;
    }
done:
    if (s->split_backward)
        sl->state = SLOT_BACKWARD_DONE;
    else
        release(s, sl);
    return BG_OK;
}

bg_status_t bg_stage_backward(bg_stage_t *s, int64_t n, double loss_scale) {
    return bg_stage_backward_slot(s, 0, n, loss_scale);
}

bg_status_t bg_stage_weights_slot(bg_stage_t *s, int slot, int64_t n) {
    BG_CHECK(bg_stage_check_trains(s, "weight gradients"));
    BG_CHECK(check_slot(s, slot, n));
    stage_slot_t *sl = &s->slots[slot];
    if (!s->split_backward || sl->state != SLOT_BACKWARD_DONE || sl->batch != n)
        return bg_error_set(BG_ERR_INTERNAL, "stage: W of slot %d without its B", slot);
    if (n > 0 && s->recompute) BG_CHECK(run_forward(s, sl, n, LOSS_NONE, NULL, -1));
    for (int i = 0; n > 0 && i < s->count; i++) {
        if (!stage_layer_has_params(s, i)) continue;
        const void *x = i > 0 ? bg_stage_layer_output(s, sl, i - 1) : sl->input;
        double start = s->timing ? bg_monotonic_seconds() : 0;
        bg_status_t st = bg_layer_backward_weights(stage_layer(s, i), s->be, &s->params[i], n, x,
                                                   sl->saved_dy[i], s->workspace);
        if (st == BG_OK) stage_time_add(s, s->times.backward_weights, i, start);
        if (st != BG_OK)
            return bg_error_prefix(st, "weight gradient of layer %d (%s): ", s->first + i,
                                   bg_layer_kind_name(stage_layer(s, i)->kind));
    }
    release(s, sl);
    return BG_OK;
}

void bg_stage_release_slots(bg_stage_t *s) {
    for (int k = 0; k < s->slot_count; k++) s->slots[k].state = SLOT_FREE;
    s->memory.in_flight = 0;
}
