/* Model spec: the text format of DESIGN.md, parsed into a layer stack with
 * inferred shapes, parameter counts, FLOPs and activation bytes.
 *
 *   input channels=1 height=28 width=28
 *   conv2d filters=32 kernel=3 activation=relu
 *   maxpool size=2
 *   flatten
 *   dense units=128 activation=relu
 *   dense units=10
 *   softmax_cross_entropy
 *
 * One layer per line, `key=value` options, `#` starts a comment. The first
 * layer must be `input`, the last `softmax_cross_entropy`. An `activation=`
 * option on conv2d or dense (relu, tanh, sigmoid, gelu) becomes a separate
 * layer of that name right after it, so
 * the layer stack numbers layers the way PyTorch's nn.Sequential does
 * (checkpoint names "0.weight", "4.bias", ... follow that numbering). */
#ifndef BG_MODEL_SPEC_H
#define BG_MODEL_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { BG_MODEL_SPEC_MAX_LINE = 4096 }; /* bytes per line, newline excluded */
enum { BG_MODEL_SPEC_MAX_LAYERS = 100000 };
enum { BG_MODEL_SPEC_MAX_DIM = 1 << 20 }; /* largest accepted size option */

typedef enum bg_layer_kind {
    BG_LAYER_CONV2D,
    BG_LAYER_MAXPOOL,
    BG_LAYER_AVGPOOL,
    BG_LAYER_FLATTEN,
    BG_LAYER_DENSE,
    BG_LAYER_RELU,
    BG_LAYER_TANH,
    BG_LAYER_SIGMOID,
    BG_LAYER_GELU,
    BG_LAYER_LAYERNORM,
    BG_LAYER_DROPOUT,
    BG_LAYER_RESIDUAL,
    BG_LAYER_SHORTCUT,
    BG_LAYER_ADD,
    BG_LAYER_SOFTMAX_CROSS_ENTROPY,
} bg_layer_kind_t;

/* Per-sample activation shape. Dense outputs are (C, 1, 1). */
typedef struct bg_shape {
    int64_t c, h, w;
} bg_shape_t;

typedef struct bg_layer_spec {
    bg_layer_kind_t kind;
    int line, col;      /* where the layer was written in the spec file */
    bg_shape_t in, out; /* per-sample shapes */
    /* 1 when the input is an image (c, h, w), even 1x1; 0 a vector. A 1x1
     * model input is what the first layer that needs one or the other
     * (conv2d or a pool: an image; flatten, dense: a vector) takes it for. */
    int in_image;
    /* conv2d: filters, kernel, stride, padding; pools: kernel (=size), stride;
     * dense: units (in `filters`). Unused fields are 0. */
    int64_t filters;
    int64_t kernel;
    int64_t stride;
    int64_t pad; /* rows/cols of zeros on each side (same => (k-1)/2) */
    double rate; /* dropout: the chance that training zeroes a value, [0, 1) */
    /* Residual blocks. `residual` opens one: its output is its input x,
     * which the matching `add` closing the block adds to the block's
     * output (y = block(x) + x). A `shortcut` in the block ends its main
     * branch F and starts a second, G, from x: the add then gives
     * F(x) + G(x) (a projection where F changes the shape). partner: on a
     * residual its add, on an add or a shortcut the block's residual (-1
     * for other kinds); shortcut: on all three the block's shortcut (-1:
     * none, and for other kinds). open_blocks: how many blocks are open
     * when the layer's input arrives (a block's residual not counted, its
     * shortcut and add counted), so a stage may start at a layer only
     * where it is 0. */
    int partner;
    int shortcut;
    int open_blocks;
    int64_t params;           /* trainable parameters (weights + biases) */
    int64_t flops;            /* forward FLOPs per sample (multiply-add = 2) */
    int64_t activation_bytes; /* bytes of this layer's output per sample (fp32) */
} bg_layer_spec_t;

typedef struct bg_model_spec {
    char *source_name; /* file name used in messages */
    bg_shape_t input;
    int64_t classes; /* outputs of the last layer before the loss */
    int num_layers;  /* including the final softmax_cross_entropy */
    bg_layer_spec_t *layers;
    int64_t total_params;
    int64_t total_flops;            /* forward, per sample */
    int64_t total_activation_bytes; /* every layer's output, per sample (fp32) */
    uint64_t fingerprint;           /* hash of the canonical layer stack (checkpoints) */
} bg_model_spec_t;

/* Parses a model spec held in memory (`text`, `size` bytes, need not be
 * NUL-terminated). `name` is used in error messages: on BG_ERR_PARSE the
 * message reads "name:line:col: what is wrong". On success *out owns a new
 * spec; free it with bg_model_spec_destroy(). *out is untouched on failure. */
bg_status_t bg_model_spec_parse(const char *name, const char *text, size_t size,
                                bg_model_spec_t **out);

/* Reads and parses the file at `path` (BG_ERR_IO if it cannot be read). */
bg_status_t bg_model_spec_load(const char *path, bg_model_spec_t **out);

/* Frees a spec; NULL is a no-op. */
void bg_model_spec_destroy(bg_model_spec_t *spec);

/* Checks a split of `spec` into stages: split[s - 1] is the first layer of
 * stage s (s = 1 .. stages - 1), as --split gives them. They must increase
 * and lie within 1 .. num_layers - 1, and no stage may start inside a
 * residual block (bg_model_spec_block_cut); BG_ERR_INVALID naming the
 * stage and the layer otherwise. Unless `first` is NULL, fills first[0 .. stages]
 * with each stage's first layer and num_layers at the end. */
bg_status_t bg_model_spec_check_split(const bg_model_spec_t *spec, int stages, const int *split,
                                      int *first);

/* The residual layer opening the outermost block that a stage starting at
 * `layer` would cut in two (its add at or after `layer`), or -1 when a
 * stage may start there (layer 0, and every layer outside the blocks).
 * Walks back to that residual: for messages; bg_model_spec_can_start
 * answers the question alone at once. */
int bg_model_spec_block_cut(const bg_model_spec_t *spec, int layer);

/* 1 when a stage may start at `layer` (0 .. num_layers, the end
 * included): no residual block is open there. */
static inline int bg_model_spec_can_start(const bg_model_spec_t *spec, int layer) {
    return layer <= 0 || layer >= spec->num_layers || spec->layers[layer].open_blocks == 0;
}

/* How many layers a stage may start at (bg_model_spec_can_start; layer 0
 * counts): the most stages the model can be cut into. */
int bg_model_spec_stage_places(const bg_model_spec_t *spec);

/* Checks that the model has places for `stages` stages to start at
 * (bg_model_spec_can_start; layer 0 counts): BG_ERR_INVALID otherwise,
 * naming the places, with `why` (how the stages come to be so many, e.g.
 * " (2 devices x --chunks 2)"; "" for nothing) after the count. A model
 * of fewer layers than stages is refused as such. */
bg_status_t bg_model_spec_check_stage_count(const bg_model_spec_t *spec, int stages,
                                            const char *why);

/* Lower-case name of a layer kind as written in spec files. */
const char *bg_layer_kind_name(bg_layer_kind_t kind);

/* Number of floats in a per-sample shape. */
static inline int64_t bg_shape_numel(bg_shape_t s) { return s.c * s.h * s.w; }

#ifdef __cplusplus
}
#endif

#endif /* BG_MODEL_SPEC_H */
