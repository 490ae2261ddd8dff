/* Model checkpoints as safetensors files that PyTorch can read.
 *
 * Tensor names follow nn.Sequential's state_dict: the layer stack (input
 * line excluded, activation=relu counted as its own layer) is numbered from
 * 0, and layer i with parameters stores "i.weight" and "i.bias". Layouts are
 * PyTorch's: conv2d weight (filters, channels, k, k), dense weight (units,
 * inputs). For the origin CNN: 0.weight (32,1,3,3), 0.bias (32), 4.weight
 * (128,5408), 4.bias (128), 6.weight (10,128), 6.bias (10).
 *
 * Metadata: "format": "pt", "brigade.model": the model's fingerprint (hex),
 * "brigade.step": optimizer steps taken. */
#ifndef BG_CHECKPOINT_H
#define BG_CHECKPOINT_H

#include <stdint.h>

#include "model_spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the model's parameters, given flat in host memory (for each layer in
 * order, weight then bias; spec->total_params floats), atomically to `path`. */
bg_status_t bg_checkpoint_save(const char *path, const bg_model_spec_t *spec, const float *params,
                               int64_t step);

/* Reads parameters for `spec` from `path` into `params` (spec->total_params
 * floats). The file must hold exactly the model's tensors, as F32 with the
 * model's shapes; a brigade fingerprint, if present, must match the model.
 * Anything else is BG_ERR_INVALID or BG_ERR_PARSE naming the file and tensor.
 * `step` (may be NULL) receives brigade.step, or 0 when absent. */
bg_status_t bg_checkpoint_load(const char *path, const bg_model_spec_t *spec, float *params,
                               int64_t *step);

#ifdef __cplusplus
}
#endif

#endif /* BG_CHECKPOINT_H */
