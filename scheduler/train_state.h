/* Training-state checkpoints: everything a run needs to continue exactly
 * where it stopped, in one safetensors file (lib/checkpoint.h, with its
 * checksums):
 *
 *   tensors   the model's parameters under their PyTorch names ("0.weight",
 *             ...), so other tools read the weights on their own; the
 *             optimizer state beside them as "optimizer.m.0.weight",
 *             "optimizer.v.0.weight" (adam) or "optimizer.momentum.0.weight"
 *             (sgd with momentum)
 *   metadata  brigade.kind = "training-state", brigade.step (iterations
 *             done), brigade.optimizer_steps, brigade.optimizer (adam|sgd),
 *             brigade.epoch (the epoch in progress, 1-based),
 *             brigade.position (its samples already trained on),
 *             brigade.shuffle_rng (the shuffling generator as it was before
 *             that epoch's shuffle, 4 x 16 hex digits), brigade.batch and
 *             brigade.train_samples (the run's batch size and training set
 *             size, which a resumed run must share), brigade.epoch_loss_sum
 *             and brigade.epoch_steps (that epoch's losses so far, so a
 *             resumed run reports the epoch's mean loss as an unbroken one
 *             would), brigade.skipped_steps (steps skipped for
 *             non-finite values so far, which --nan-limit counts) and
 *             brigade.seed (the run's --seed), brigade.train_crc32 (the
 *             training set's CRC-32) and brigade.settings (the update's
 *             settings, in words). The last eight are absent from
 *             checkpoints written before they were added; such files load
 *             with them 0 (the seed and the CRC as not saved, the settings
 *             as none). Beside brigade.model, the fingerprint, files
 *             written since 2026-12-05 also hold brigade.layers
 *             (lib/checkpoint.h), read only to say where another model's
 *             file differs.
 *
 * A checkpoint belongs to its model (the fingerprint is checked) but not to a
 * placement: weights are per layer, so a run may resume on other devices,
 * stages or schedules. */
#ifndef BG_TRAIN_STATE_H
#define BG_TRAIN_STATE_H

#include <stdint.h>

#include "model_spec.h"
#include "optimizer.h"
#include "rng.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_train_state {
    int64_t step;            /* training iterations done (skipped ones included) */
    int64_t optimizer_steps; /* updates taken (Adam's bias correction counts these) */
    int epoch;               /* the epoch in progress, 1-based */
    int64_t position;        /* samples of that epoch already trained on */
    bg_rng_t shuffle_rng;    /* before that epoch's shuffle */
    int64_t batch;           /* the run's batch size; 0: not recorded */
    int64_t train_samples;   /* its training set's size; 0: not recorded */
    double epoch_loss_sum;   /* the epoch's mean losses of the steps taken so far, added */
    int64_t epoch_steps;     /* how many steps those are */
    int64_t skipped_steps;   /* steps of the run skipped for non-finite values */
    uint64_t seed;           /* the run's --seed (synthetic data are made from it) */
    int seed_saved;          /* loaded: 1 if the file records the seed (later ones do) */
    uint32_t data_crc32;     /* its training set's bg_dataset_crc32 */
    int data_crc32_saved;    /* 1 if recorded (set to save it; later files do) */
    /* What shapes each update (bg_train_settings: the optimizer, its rate
     * and schedule, clipping), for a resumed run to compare with its own;
     * "" when the file does not record it (older ones). */
    char settings[256];
    bg_optimizer_kind_t optimizer;
    int states;           /* optimizer state buffers: 0, 1 or 2 */
    int64_t params_count; /* spec->total_params */
    float *params;        /* params_count values, flat in layer order */
    float *state[2];      /* states buffers of params_count values */
} bg_train_state_t;

/* The steps an epoch of `samples` takes at `batch` (its last one short). */
static inline int64_t bg_train_steps_per_epoch(int64_t samples, int64_t batch) {
    return samples / batch + (samples % batch != 0);
}

/* The step a run stands at `position` samples into its (1-based) `epoch`,
 * at `batch` over `samples`: what a state's step must be, checked on load
 * where the file records its batch and samples, and by a resumed run at
 * its own where the file does not. In double: a file's counts can be
 * anything up to 2^63. */
static inline double bg_train_step_at(int epoch, int64_t position, int64_t samples, int64_t batch) {
    return (double)(epoch - 1) * (double)bg_train_steps_per_epoch(samples, batch) +
           (double)(position / batch);
}

/* Allocates the buffers of a state for `spec` and `optimizer`. */
bg_status_t bg_train_state_init(bg_train_state_t *state, const bg_model_spec_t *spec,
                                const bg_optimizer_config_t *optimizer);

/* Frees the buffers; the struct may then be reused. */
void bg_train_state_free(bg_train_state_t *state);

/* Writes the state atomically to `path`. */
bg_status_t bg_train_state_save(const char *path, const bg_model_spec_t *spec,
                                const bg_train_state_t *state);

/* Reads a training-state checkpoint of `spec` into `state` (buffers
 * allocated here; free with bg_train_state_free). The optimizer must be the
 * one of the run (`optimizer`): resuming Adam state into SGD is refused.
 * BG_ERR_PARSE for a corrupt file, BG_ERR_INVALID for another model's file,
 * another optimizer, or a weights-only checkpoint (use --load for those). */
bg_status_t bg_train_state_load(const char *path, const bg_model_spec_t *spec,
                                const bg_optimizer_config_t *optimizer, bg_train_state_t *state);

#ifdef __cplusplus
}
#endif

#endif /* BG_TRAIN_STATE_H */
