/* Internal to the stage runtime (stage.c: lifecycle and parameters;
 * stage_compute.c: forward, backward and weight passes). */
#ifndef BG_STAGE_IMPL_H
#define BG_STAGE_IMPL_H

#include "arena.h"
#include "layer.h"
#include "monotonic.h"
#include "stage.h"

typedef enum slot_state { SLOT_FREE, SLOT_FORWARD_DONE, SLOT_BACKWARD_DONE } slot_state_t;

/* What one in-flight micro-batch keeps. */
typedef struct stage_slot {
    void *input;     /* (max_batch, in) */
    void **outputs;  /* per layer (max_batch, out); NULL with recompute; flatten aliases */
    void **saved_dy; /* split_backward: per layer with parameters, dL/d(output) for W */
    int32_t *labels; /* loss stage: (max_batch) */
    int64_t batch;   /* n of its forward */
    slot_state_t state;
    /* Dropout's draw (bg_layer_dropout_mask): where the samples sit in their
     * mini-batch (bg_stage_slot_set_first_sample), the optimizer steps taken
     * when the forward ran, and whether it trained (stashed) or evaluated. */
    int64_t first_sample, step;
    int training;
} stage_slot_t;

struct bg_stage {
    const bg_model_spec_t *spec;
    bg_backend_t *be;
    int first, last; /* layer slice [first, last) */
    int count;       /* last - first */
    int64_t max_batch;
    bg_optimizer_config_t optimizer;
    int64_t steps;
    int split_backward, recompute, forward_only;

    bg_layer_params_t *params; /* count entries */
    void **opt_state;          /* count * 4: (weight, bias) x up to 2 state buffers */
    /* The parameters, their gradients and each optimizer state lie in one
     * run of the arena each (reserved one after another), with zero padding
     * between tensors that the updates keep zero. So zeroing the gradients,
     * checking them and the optimizer update are one call over block_elems
     * elements each, not one per tensor (a GPU launch each). NULL and 0 on a
     * stage without parameters. */
    void *param_block, *grad_block, *state_block[2];
    int64_t block_elems;
    int slot_count;
    stage_slot_t *slots;
    void **work_outputs; /* recompute: per layer outputs shared by all slots */
    /* Per layer, the layer whose buffer holds its output (itself, or the
     * layer it aliases back along a run of views and in-place layers), or
     * -1 for the slot's input: bg_stage_layer_output in one look, however
     * deep the run. */
    int *output_owner;
    void *grad_a, *grad_b; /* ping-pong dL/d(activation) between layers */
    /* Residual blocks: while B runs from a block's add back to its
     * residual, the add's dy, which the residual adds to the block's dX
     * (with a shortcut: from the add to the shortcut, the add's dy, which
     * the shortcut hands to the main branch; from there on the shortcut
     * branch's dX, which the residual adds to the main branch's).
     * One buffer (max_batch, the widest activation) for each depth of
     * nesting (an add's is open_blocks - 1, its residual's open_blocks);
     * skip_depths of them, NULL with none. */
    void **skip_grads;
    int skip_depths;
    void *output_grad; /* non-loss stage: dL/d(output) from the successor */
    void *input_grad;  /* stage not at layer 0: dL/d(input) for the predecessor */
    void *workspace;
    /* Holds every device buffer above: own_arena, one allocation made at
     * creation, or the device's arena shared with its other stages
     * (bg_stage_config_t.arena), committed by its owner before
     * bg_stage_bind. */
    bg_arena_t *arena;
    bg_arena_t own_arena;
    uint64_t seed;
    int bound; /* the buffers exist and the parameters are initialised */
    bg_stage_memory_t memory;
    int timing;                   /* 1 while layer times are being added */
    bg_stage_layer_times_t times; /* bg_stage_set_layer_times */
};

static inline const bg_layer_spec_t *stage_layer(const bg_stage_t *s, int i) {
    return &s->spec->layers[s->first + i];
}

static inline int stage_layer_has_params(const bg_stage_t *s, int i) {
    return s->params[i].weight_count > 0;
}

/* 1 when layer i (of the stage) keeps no output buffer of its own: a
 * flatten (a reshape), a residual (its output is its input, which its add
 * reads) or a shortcut (its output is its block's input again), or a
 * relu, tanh, sigmoid or dropout running in place over its predecessor's
 * output (bg_layer_runs_in_place). */
static inline int stage_layer_aliases(const bg_stage_t *s, int i) {
    return bg_layer_output_is_view(stage_layer(s, i)) ||
           (i > 0 && bg_layer_runs_in_place(s->spec, s->first + i));
}

/* Where layer i's output for `slot` lives: its own buffer, the shared
 * recompute buffer, its input (flatten, residual), or its block's input
 * (shortcut). */
void *bg_stage_layer_output(const bg_stage_t *s, const stage_slot_t *slot, int i);

/* Adds the seconds since `since` to entry i of `array` when timing. */
static inline void stage_time_add(const bg_stage_t *s, double *array, int i, double since) {
    if (s->timing) array[i] += bg_monotonic_seconds() - since;
}

/* BG_OK, or on a forward-only stage the error that refuses `what`. */
bg_status_t bg_stage_check_trains(const bg_stage_t *s, const char *what);

/* Host floats to device memory in the backend's type. */
bg_status_t bg_stage_upload_floats(bg_backend_t *be, void *dst, const float *src, int64_t n);

#endif /* BG_STAGE_IMPL_H */
