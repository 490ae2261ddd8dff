/* Model checkpoints as safetensors files that PyTorch can read, with
 * checksums that catch any corruption of a single byte.
 *
 * Tensor names follow nn.Sequential's state_dict: the layer stack (input
 * line excluded, activation=relu counted as its own layer) is numbered from
 * 0, and layer i with parameters stores "i.weight" and "i.bias". Layouts are
 * PyTorch's: conv2d weight (filters, channels, k, k), dense weight (units,
 * inputs). For the origin CNN: 0.weight (32,1,3,3), 0.bias (32), 4.weight
 * (128,5408), 4.bias (128), 6.weight (10,128), 6.bias (10).
 *
 * Metadata: "format": "pt", "brigade.model": the model's fingerprint (hex),
 * "brigade.layers": its layer stack in words (model_words.h), which says
 * where another model differs, "brigade.step": optimizer steps taken, and
 * the checksums below.
 *
 * Checksums (docs/checkpoints.md): every file brigade writes holds, in its
 * __metadata__,
 *   "brigade.header_crc32": CRC-32 (zlib's crc32) of the file's first
 *       8 + N bytes (length prefix, JSON header, padding) with this value's
 *       own 8 digits read as "00000000". It is the first key of the first
 *       object: the header starts with exactly BG_CHECKPOINT_HEADER_START;
 *   "brigade.crc32.NAME": CRC-32 of tensor NAME's data bytes,
 * each as 8 lowercase hex digits. A file with any "brigade." metadata key is
 * a brigade checkpoint and must carry all of them; files of other tools
 * (no "brigade." key) are read without checksums. */
#ifndef BG_CHECKPOINT_H
#define BG_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model_spec.h"
#include "model_words.h"
#include "safetensors.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BG_CHECKPOINT_METADATA_PREFIX "brigade."
#define BG_CHECKPOINT_HEADER_CRC_KEY  "brigade.header_crc32"
#define BG_CHECKPOINT_TENSOR_CRC_KEY  "brigade.crc32." /* + tensor name */
#define BG_CHECKPOINT_HEADER_START    "{\"__metadata__\":{\"" BG_CHECKPOINT_HEADER_CRC_KEY "\":\""

/* One parameter tensor of a model: its checkpoint name, PyTorch shape, and
 * where it lies in the flat parameter vector (floats). */
typedef struct bg_checkpoint_tensor {
    char name[32];
    int ndim;
    int64_t shape[4];
    int64_t offset, count;
} bg_checkpoint_tensor_t;

/* Lists the model's parameter tensors in flat order into *out (allocated,
 * caller frees with free()) and their number into *count. */
bg_status_t bg_checkpoint_model_tensors(const bg_model_spec_t *spec, bg_checkpoint_tensor_t **out,
                                        int *count);

/* Writes `count` F32 tensors (any names: model parameters, optimizer state
 * such as "optimizer.m.4.weight", ...) and `metadata_count` extra string
 * pairs to `path` atomically (bg_safetensors_write), adding the header and
 * per-tensor checksums. Metadata keys "brigade.header_crc32" and
 * "brigade.crc32.*" are the writer's own: passing one is BG_ERR_INVALID.
 * The data is read twice (checksum, then write): it must not change
 * meanwhile. BG_ERR_IO naming the path when the file cannot be written. */
bg_status_t bg_checkpoint_save_tensors(const char *path, const bg_safetensors_tensor_t *tensors,
                                       int count, const char *const *metadata_keys,
                                       const char *const *metadata_values, int metadata_count);

/* Checks the checksums of a parsed file named `name` (for messages). A file
 * without "brigade." metadata passes untouched. A brigade checkpoint must
 * start with BG_CHECKPOINT_HEADER_START and an 8-digit header checksum that
 * matches, and hold a matching checksum for every tensor and none for a
 * tensor it lacks. Failures are BG_ERR_PARSE: "NAME: tensor '4.weight' is
 * corrupt (checksum 1a2b3c4d, expected 5e6f7a8b)", "NAME: header is corrupt
 * (...)", "NAME: tensor '4.weight' has no checksum ...", and a
 * brigade.model that is no fingerprint (16 lowercase hex digits). */
bg_status_t bg_checkpoint_verify(const char *name, const bg_safetensors_t *file);

/* Reads the file at `path` (bg_safetensors_load) and verifies it
 * (bg_checkpoint_verify). On success *out owns the file; untouched on
 * failure. For callers that take more than the model's tensors from it. */
bg_status_t bg_checkpoint_read(const char *path, bg_safetensors_t **out);

/* Writes the model's parameters, given flat in host memory (for each layer in
 * order, weight then bias; spec->total_params floats), atomically to `path`
 * with bg_checkpoint_save_tensors. */
bg_status_t bg_checkpoint_save(const char *path, const bg_model_spec_t *spec, const float *params,
                               int64_t step);

/* BG_ERR_INVALID, naming the file and the tensor `name`, unless entry `e`
 * is F32 of the shape[0..ndim) given: "is F64; brigade needs F32", or
 * "has shape [a, b]; the model needs [c, d]". */
bg_status_t bg_checkpoint_check_entry(const char *path, const bg_safetensors_entry_t *e,
                                      const char *name, int ndim, const int64_t *shape);

/* Where `count` floats of tensor `name` hold a NaN or an infinity, says
 * so into buf ("tensor 'NAME' holds N non-finite values (NaN or infinity;
 * the first at element I)") and returns 1; else buf is "" and 0. */
int bg_checkpoint_describe_nonfinite(const char *name, const float *values, int64_t count,
                                     char *buf, size_t size);

/* BG_ERR_INVALID, naming the file and the tensor, when `values` (`count`
 * floats read from tensor `name` of `path`) hold a NaN or an infinity: a
 * run cannot start from them, and the checks for non-finite values would
 * only find them after the first step. */
bg_status_t bg_checkpoint_check_finite(const char *path, const char *name, const float *values,
                                       int64_t count);

/* What bg_checkpoint_load read besides the weights. */
typedef struct bg_checkpoint_info {
    int64_t step;       /* brigade.step, or 0 when absent */
    int training_state; /* 1: a training state (brigade.kind), which --resume continues */
    /* The brigade.model fingerprint when it is not this model's (hex, ""
     * when it is, or absent): a model that differs only where there are
     * no weights (a pool's kind, a relu) has the same tensors, and loads. */
    char other_model[20];
    /* Where that other model differs from this one, in words
     * (bg_model_spec_difference), or "" when the file lacks brigade.layers. */
    char difference[BG_MODEL_DIFFERENCE_MAX];
    /* brigade.seed, the run's --seed, when the file holds it (seed_saved):
     * synthetic data are made from it. */
    int seed_saved;
    uint64_t seed;
} bg_checkpoint_info_t;

/* Whether `file`'s brigade.model fingerprint is present and not `spec`'s;
 * then info->other_model holds it as messages show it (cut to 19
 * characters, "(empty)" for none) and info->difference where the models
 * part, from the file's brigade.layers. Both "" otherwise. */
bool bg_checkpoint_other_model(const bg_safetensors_t *file, const bg_model_spec_t *spec,
                               bg_checkpoint_info_t *info);

/* Reads parameters for `spec` from `path` into `params` (spec->total_params
 * floats). The file must verify (bg_checkpoint_verify), and hold exactly the
 * model's tensors, as F32 with the model's shapes and finite values, as
 * PyTorch's load_state_dict would check them. Anything else is BG_ERR_PARSE
 * (corrupt or malformed) or BG_ERR_INVALID (another model's tensors, or not
 * finite), naming the file and the tensor, and the file's model when its
 * fingerprint is another's; `params` may then be partly written. `info`
 * (may be NULL) receives the step and the fingerprint of another model. */
bg_status_t bg_checkpoint_load(const char *path, const bg_model_spec_t *spec, float *params,
                               bg_checkpoint_info_t *info);

/* bg_checkpoint_load of a file held in memory (`size` bytes), called `name`
 * in messages. */
bg_status_t bg_checkpoint_parse(const char *name, const uint8_t *bytes, size_t size,
                                const bg_model_spec_t *spec, float *params,
                                bg_checkpoint_info_t *info);

#ifdef __cplusplus
}
#endif

#endif /* BG_CHECKPOINT_H */
