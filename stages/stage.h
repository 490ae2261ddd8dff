/* A stage: a contiguous slice [first_layer, last_layer) of the layer stack
 * bound to one backend device, with everything it needs to run micro-batches:
 * parameters, gradients, optimizer state, activation buffers and workspace,
 * all laid out at creation and allocated as one block of the backend's
 * memory (lib/arena.h; no allocation while training).
 *
 * The stage that holds the final softmax_cross_entropy layer computes the loss
 * from labels; every other stage receives dL/d(output) from its successor.
 * Gradients accumulate across backward calls until bg_stage_zero_grads(), so
 * a mini-batch can be split into micro-batches. Not thread-safe: one thread
 * drives a stage. */
#ifndef BG_STAGE_H
#define BG_STAGE_H

#include <stdint.h>

#include "arena.h"
#include "backend.h"
#include "model_spec.h"
#include "optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_stage bg_stage_t;

typedef struct bg_stage_config {
    const bg_model_spec_t *spec; /* must outlive the stage */
    int first_layer, last_layer; /* [first, last) indices into spec->layers */
    bg_backend_t *backend;       /* borrowed; must outlive the stage */
    int64_t max_batch;           /* largest batch (micro-batch) forward will see */
    uint64_t seed;               /* parameter initialisation (bg_layer_init_params) */
    bg_optimizer_config_t optimizer;
    int stash_slots;    /* micro-batches held at once (bg_schedule_stash_slots), >= 1 */
    int split_backward; /* 1: backward is B (dX) then a separate W (dW), as in zb-h1 */
    int recompute;      /* 1: keep only each micro-batch's input; re-run the forward
                         * before its backward (and before its W) */
    /* 1: the stage only runs forwards (an evaluation): it holds no
     * gradients, no optimizer state and no buffers for backward;
     * split_backward, recompute and the optimizer's state are ignored, and
     * every call below about gradients or the optimizer is refused
     * (BG_ERR_INVALID). */
    int forward_only;
    /* NULL: the stage makes one allocation of its own at creation. Else the
     * arena (on `backend`, not yet committed) in which it lays out its
     * buffers beside other users of the device; its owner commits it, then
     * calls bg_stage_bind, and releases it after the stage is destroyed. */
    bg_arena_t *arena;
} bg_stage_config_t;

#define BG_STAGE_CONFIG_INIT                                                                       \
    {                                                                                              \
        .first_layer = 0, .last_layer = 0, .max_batch = 64, .seed = 0,                             \
        .optimizer = BG_OPTIMIZER_CONFIG_INIT, .stash_slots = 1, .split_backward = 0,              \
        .recompute = 0, .forward_only = 0, .arena = NULL                                           \
    }

/* Memory the stage holds, by category, in bytes. The stash is what in-flight
 * micro-batches keep between their forward and their last backward op (layer
 * inputs and outputs, labels, and with split_backward the output gradients W
 * needs); buffers are the gradients passed between layers and stages. All of
 * it lies in one arena (lib/arena.h): the stage's own allocation, or its
 * share of its device's; `arena` is the stage's bytes there, the
 * categories' sum (the stash of every slot) plus `padding`, what starting
 * each buffer on a 256-byte boundary adds (bg_arena_padding; worked out
 * by bg_stage_memory, as the stash figures are). */
typedef struct bg_stage_memory {
    size_t params, grads, optimizer, stash, buffers, workspace;
    size_t arena, padding;
    size_t stash_slot;    /* stash bytes of one micro-batch */
    size_t stash_current; /* stash_slot * micro-batches now in flight */
    size_t stash_peak;    /* stash_slot * most micro-batches ever in flight */
    int in_flight, peak_in_flight;
} bg_stage_memory_t;

/* Loss figures of one forward pass through the last stage. */
typedef struct bg_stage_loss {
    double loss_sum; /* sum over samples of the cross-entropy */
    int64_t correct; /* samples whose argmax equals the label */
} bg_stage_loss_t;

/* Creates a stage and initialises its parameters from cfg->seed (with
 * cfg->arena: lays its buffers out there and waits for bg_stage_bind).
 * BG_ERR_INVALID for an empty or out-of-range layer slice or max_batch < 1;
 * BG_ERR_NOMEM naming the bytes when memory runs out. */
bg_status_t bg_stage_create(const bg_stage_config_t *cfg, bg_stage_t **out);

/* For a stage laid out in a shared arena: once the arena is committed,
 * points the stage at its buffers and initialises its parameters. Nothing
 * else may be called on the stage before. A no-op on a bound stage. */
bg_status_t bg_stage_bind(bg_stage_t *stage);

/* NULL and half-built stages are fine. */
void bg_stage_destroy(bg_stage_t *stage);

/* Whether this stage ends with the loss layer. */
int bg_stage_has_loss(const bg_stage_t *stage);

/* Device buffer for the stage input, (max_batch, in) in the backend's type. */
void *bg_stage_input(bg_stage_t *stage);

/* Copies n host samples (n, in) and, on the loss stage, n labels into the
 * stage's input and label buffers. images may be NULL (a loss stage fed by a
 * predecessor needs only its labels); labels may be NULL on other stages. */
bg_status_t bg_stage_load_batch(bg_stage_t *stage, int64_t n, const float *images,
                                const int32_t *labels);

/* Runs the forward pass on the first n samples of the input buffer. On the
 * loss stage, `loss` (if not NULL) receives the loss sum and correct count. */
bg_status_t bg_stage_forward(bg_stage_t *stage, int64_t n, bg_stage_loss_t *loss);

/* Device buffer holding the output (n, out) of the last forward. On the loss
 * stage it holds the softmax probabilities. */
const void *bg_stage_output(const bg_stage_t *stage);

/* Device buffer (max_batch, out) into which a non-loss stage's caller writes
 * dL/d(output) before bg_stage_backward(). NULL on the loss stage. */
void *bg_stage_output_grad(bg_stage_t *stage);

/* Backward pass for the n samples of the last forward: accumulates parameter
 * gradients and, unless this stage starts at layer 0, leaves dL/d(input) in
 * bg_stage_input_grad(). On the loss stage the loss gradient is scaled by
 * loss_scale (1/B averages over a mini-batch of B samples). */
bg_status_t bg_stage_backward(bg_stage_t *stage, int64_t n, double loss_scale);

/* dL/d(input) of the last backward, (n, in); NULL for a stage at layer 0. */
const void *bg_stage_input_grad(const bg_stage_t *stage);

/* Micro-batch slots. A pipeline keeps several micro-batches in flight on a
 * stage; each gets a slot (micro-batch index mod stash_slots) holding what its
 * backward needs. The single-batch calls above use slot 0. */

/* Device buffer for the input of `slot`, (max_batch, in). */
void *bg_stage_slot_input(bg_stage_t *stage, int slot);

/* Where the stage keeps its pointer to the input of `slot` and to its
 * output gradient, for a receive that hands it another buffer of the same
 * size, holding the message, in exchange (bg_channel_recv_trading): the
 * stage reads these pointers afresh for every op. */
void **bg_stage_slot_input_ref(bg_stage_t *stage, int slot);
void **bg_stage_output_grad_ref(bg_stage_t *stage);

/* Where the samples of `slot`'s next forward start in their mini-batch
 * (0 until set): dropout draws its mask by a sample's place in the
 * mini-batch, so that any cut into micro-batches drops the same values. */
void bg_stage_slot_set_first_sample(bg_stage_t *stage, int slot, int64_t first_sample);

/* Like bg_stage_load_batch, into `slot`. */
bg_status_t bg_stage_load_slot(bg_stage_t *stage, int slot, int64_t n, const float *images,
                               const int32_t *labels);

/* The same without waiting for the device: images and labels lie in memory
 * from the backend's host_alloc and must stay unchanged until the device
 * has run the copies (its synchronize). */
bg_status_t bg_stage_load_slot_async(bg_stage_t *stage, int slot, int64_t n, const float *images,
                                     const int32_t *labels);

/* Forward of the n samples in `slot`'s input. With `stash` the slot is held
 * until its last backward op, and dropout drops; without (evaluation)
 * nothing is kept, and dropout passes its input on. n may be
 * 0 (an empty micro-batch of a short final batch): nothing is computed. */
bg_status_t bg_stage_forward_slot(bg_stage_t *stage, int slot, int64_t n, int stash,
                                  bg_stage_loss_t *loss);

/* The same, with the loss stage's loss left on the device: added to the
 * backend's loss totals (its take_loss reads them), a non-finite one
 * marked with `loss_tag` (mark_nonfinite; -1: unchecked). So the executor
 * does not wait for a GPU at each micro-batch's loss. */
bg_status_t bg_stage_forward_slot_deferred(bg_stage_t *stage, int slot, int64_t n, int stash,
                                           int loss_tag);

/* Output (n, out) of `slot`'s last forward. With recompute it is valid only
 * until the next forward, backward or weights call on any slot. */
const void *bg_stage_slot_output(const bg_stage_t *stage, int slot);

/* B for `slot`: dL/d(input) into bg_stage_input_grad() (unless the stage
 * starts at layer 0) and, without split_backward, the weight gradients;
 * reads dL/d(output) from bg_stage_output_grad() on non-loss stages. */
bg_status_t bg_stage_backward_slot(bg_stage_t *stage, int slot, int64_t n, double loss_scale);

/* W for `slot` (split_backward only): accumulates the weight gradients from
 * what B saved, then frees the slot. */
bg_status_t bg_stage_weights_slot(bg_stage_t *stage, int slot, int64_t n);

/* Forgets every held micro-batch (after an aborted step). */
void bg_stage_release_slots(bg_stage_t *stage);

/* Enqueues the check of all the stage's accumulated weight gradients for
 * NaN and Inf under `tag` (the backend's mark_nonfinite): one scan over
 * them all. Does not wait for the device. */
bg_status_t bg_stage_mark_nonfinite_grads(bg_stage_t *stage, int tag);

/* Finds the first layer whose accumulated weight gradients hold a NaN or an
 * infinity: *layer is its index in the model, or -1 when all are finite.
 * Waits for the device at each tensor: for naming the layer once a mark
 * said that there is one. */
bg_status_t bg_stage_find_nonfinite_grad(bg_stage_t *stage, int *layer);

/* Sets every gradient to zero. */
bg_status_t bg_stage_zero_grads(bg_stage_t *stage);

/* The sum of the squares of each of the stage's layers' accumulated weight
 * and bias gradients, into out[0 .. layers of the stage) (0 for a layer
 * without parameters): the weight's sum plus the bias's, each added in an
 * order that the tensor's size alone fixes (the backend's square_sum), so
 * a layer's figure is the same in any stage. Waits for the device. */
bg_status_t bg_stage_grad_square_sums(bg_stage_t *stage, double *out);

/* Multiplies every accumulated gradient by `factor` (clipping). */
bg_status_t bg_stage_scale_grads(bg_stage_t *stage, double factor);

/* Applies one optimizer step with the accumulated gradients. */
bg_status_t bg_stage_step(bg_stage_t *stage);

/* Optimizer steps taken so far. */
int64_t bg_stage_steps(const bg_stage_t *stage);

/* Trainable parameters held by the stage. */
int64_t bg_stage_param_count(const bg_stage_t *stage);

/* Copies parameters to/from host memory, flat: for each layer of the slice in
 * order, its weight then its bias (bg_stage_param_count() floats). */
bg_status_t bg_stage_download_params(bg_stage_t *stage, float *host);
bg_status_t bg_stage_upload_params(bg_stage_t *stage, const float *host);

/* Same for the accumulated gradients (tests compare them across placements). */
bg_status_t bg_stage_download_grads(bg_stage_t *stage, float *host);

/* Optimizer state buffers per parameter (0 sgd, 1 sgd with momentum, 2
 * adam: m then v; 0 on a forward-only stage), and their values in the flat order of the parameters.
 */
int bg_stage_optimizer_states(const bg_stage_t *stage);
bg_status_t bg_stage_download_optimizer_state(bg_stage_t *stage, int k, float *host);
bg_status_t bg_stage_upload_optimizer_state(bg_stage_t *stage, int k, const float *host);

/* Sets the optimizer step count (Adam's bias correction depends on it), for
 * resuming a run. */
void bg_stage_set_steps(bg_stage_t *stage, int64_t steps);

/* Seconds each layer's work took, for profiling (brigade profile): while
 * set, the forward, backward and weights calls and bg_stage_step add the
 * time of each layer's part to its entry (index i: the stage's i-th layer):
 * forward, dX (with the loss gradient and the copies B makes for W),
 * dW, the optimizer update of its parameters (and bg_stage_zero_grads'
 * zeroing of their gradients, which the pipeline does right after it), and
 * bg_stage_mark_nonfinite_grads' check of those gradients (weight_check,
 * may be NULL). Tensor by tensor while set, so that each layer has its
 * share. */
typedef struct bg_stage_layer_times {
    double *forward, *backward_data, *backward_weights, *update; /* layer-count entries */
    double *weight_check;                                        /* layer-count entries or NULL */
} bg_stage_layer_times_t;

/* Starts adding to `times` (copied; its arrays are borrowed and must
 * outlive the setting), or stops with NULL. */
void bg_stage_set_layer_times(bg_stage_t *stage, const bg_stage_layer_times_t *times);

/* Bytes held, by category. */
bg_stage_memory_t bg_stage_memory(const bg_stage_t *stage);

#ifdef __cplusplus
}
#endif

#endif /* BG_STAGE_H */
