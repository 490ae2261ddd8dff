/* Measured per-layer costs: `brigade profile` times each layer's forward,
 * backward-data, backward-weights and optimizer update on a device at the
 * micro-batch size, after warm-up, and the bandwidth of a channel copy. The
 * cost model (stages/cost_model.h) uses a profile in place of its analytic
 * estimates when one is given (--profile), so plans and simulations follow
 * this machine.
 *
 * Saved as JSON: {"model": fingerprint (hex), "device": "cpu", "batch": b,
 * "copy_bytes_per_s": x, "layers": [{"forward_s": ..,
 * "backward_data_s": .., "backward_weights_s": .., "update_s": ..}, ...]}. */
#ifndef BG_PROFILE_H
#define BG_PROFILE_H

#include <stdint.h>

#include "model_spec.h"
#include "optimizer.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_layer_profile {
    double forward_s;          /* one micro-batch */
    double backward_data_s;    /* dX */
    double backward_weights_s; /* dW (0 for layers without weights) */
    double update_s;           /* optimizer step of its parameters */
} bg_layer_profile_t;

typedef struct bg_profile {
    int layers;
    int64_t batch;           /* micro-batch size the times are for */
    double copy_bytes_per_s; /* one memcpy, as a channel does on each end */
    uint64_t fingerprint;    /* of the model spec */
    char device[24];
    bg_layer_profile_t *layer;
} bg_profile_t;

typedef struct bg_profile_config {
    const bg_model_spec_t *spec;
    int64_t batch;   /* micro-batch size to time */
    int repetitions; /* timed runs per op after warm-up; the median counts */
    bg_optimizer_config_t optimizer;
} bg_profile_config_t;

#define BG_PROFILE_CONFIG_INIT                                                                     \
    { .spec = NULL, .batch = 64, .repetitions = 7, .optimizer = BG_OPTIMIZER_CONFIG_INIT }

/* Times every layer on one CPU device (this thread, one OpenBLAS thread). */
bg_status_t bg_profile_measure(const bg_profile_config_t *cfg, bg_profile_t **out);

/* Writes a profile as JSON (BG_ERR_IO naming the path). */
bg_status_t bg_profile_save(const bg_profile_t *profile, const char *path);

/* Reads a profile and checks it belongs to `spec` (same fingerprint and layer
 * count); BG_ERR_PARSE / BG_ERR_INVALID naming the file otherwise. */
bg_status_t bg_profile_load(const char *path, const bg_model_spec_t *spec, bg_profile_t **out);

/* NULL is a no-op. */
void bg_profile_destroy(bg_profile_t *profile);

#ifdef __cplusplus
}
#endif

#endif /* BG_PROFILE_H */
