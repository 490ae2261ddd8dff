#include "model_spec.h"
#include "dropout.h"
#include "spelling.h"
#include "text_file.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A spec is a few hundred bytes; anything this big is the wrong file, and
 * refusing it keeps a mistaken path from eating memory. */
enum { MODEL_SPEC_MAX_FILE = 64 << 20 };

/* Longest piece of a user token echoed back in a message, so one absurd
 * token cannot crowd the file name and position out of the message. */
enum { TOKEN_SHOWN_MAX = 64 };

enum { OPTIONS_MAX = 5 };

typedef enum option_type {
    OPTION_SIZE,       /* whole number 1..BG_MODEL_SPEC_MAX_DIM */
    OPTION_PADDING,    /* valid = 0, same = 1 */
    OPTION_ACTIVATION, /* none/linear, relu, tanh, sigmoid, gelu */
    OPTION_RATE,       /* a decimal fraction in [0, 1): 0.5, .25, 0 */
} option_type_t;

enum { PADDING_VALID = 0, PADDING_SAME = 1 };
/* An activation option's value is the layer it adds (ACTIVATION_NONE: none). */
enum { ACTIVATION_NONE = -1 };

/* The names an activation may have (each kind's own, as bg_layer_kind_name
 * gives it, and none's two). */
static const char *const ACTIVATION_WORDS[] = {"relu", "tanh", "sigmoid", "gelu", "none", "linear"};
enum { ACTIVATION_WORD_COUNT = sizeof ACTIVATION_WORDS / sizeof ACTIVATION_WORDS[0] };

/* The index in ACTIVATION_WORDS of the `length` bytes at `text`, or -1. */
static int activation_index(const char *text, size_t length) {
    for (int a = 0; a < ACTIVATION_WORD_COUNT; a++)
        if (length == strlen(ACTIVATION_WORDS[a]) && memcmp(text, ACTIVATION_WORDS[a], length) == 0)
            return a;
    return -1;
}

typedef struct option_def {
    const char *key;
    option_type_t type;
    bool required;
} option_def_t;

/* Input is not a bg_layer_kind_t (it is not in the layer stack), so the
 * table marks it apart and its `kind` is unused. */
typedef struct layer_def {
    const char *word;
    bool is_input;
    bg_layer_kind_t kind;
    const option_def_t *options;
    int num_options;
} layer_def_t;

/* The build_* functions read option values by these indices; keep each
 * enum in step with its table. */
static const option_def_t input_options[] = {
    {"channels", OPTION_SIZE, true},
    {"height", OPTION_SIZE, true},
    {"width", OPTION_SIZE, true},
};
enum { INPUT_CHANNELS, INPUT_HEIGHT, INPUT_WIDTH };

static const option_def_t conv2d_options[] = {
    {"filters", OPTION_SIZE, true},           {"kernel", OPTION_SIZE, true},
    {"stride", OPTION_SIZE, false},           {"padding", OPTION_PADDING, false},
    {"activation", OPTION_ACTIVATION, false},
};
enum { CONV_FILTERS, CONV_KERNEL, CONV_STRIDE, CONV_PADDING, CONV_ACTIVATION };

static const option_def_t pool_options[] = {
    {"size", OPTION_SIZE, true},
    {"stride", OPTION_SIZE, false},
};
enum { POOL_SIZE, POOL_STRIDE };

static const option_def_t dense_options[] = {
    {"units", OPTION_SIZE, true},
    {"activation", OPTION_ACTIVATION, false},
};
enum { DENSE_UNITS, DENSE_ACTIVATION };

static const option_def_t dropout_options[] = {
    {"rate", OPTION_RATE, false},
};
enum { DROPOUT_RATE };
/* PyTorch's nn.Dropout() and the rate most Keras models give. */
#define DROPOUT_DEFAULT_RATE 0.5

#define LAYER_DEF(word, is_input, kind, options)                                                   \
    { word, is_input, kind, options, (int)(sizeof options / sizeof options[0]) }

static const layer_def_t layer_defs[] = {
    LAYER_DEF("input", true, BG_LAYER_CONV2D, input_options),
    LAYER_DEF("conv2d", false, BG_LAYER_CONV2D, conv2d_options),
    LAYER_DEF("maxpool", false, BG_LAYER_MAXPOOL, pool_options),
    LAYER_DEF("avgpool", false, BG_LAYER_AVGPOOL, pool_options),
    {"flatten", false, BG_LAYER_FLATTEN, NULL, 0},
    LAYER_DEF("dense", false, BG_LAYER_DENSE, dense_options),
    {"relu", false, BG_LAYER_RELU, NULL, 0},
    {"tanh", false, BG_LAYER_TANH, NULL, 0},
    {"sigmoid", false, BG_LAYER_SIGMOID, NULL, 0},
    {"gelu", false, BG_LAYER_GELU, NULL, 0},
    {"layernorm", false, BG_LAYER_LAYERNORM, NULL, 0},
    LAYER_DEF("dropout", false, BG_LAYER_DROPOUT, dropout_options),
    {"residual", false, BG_LAYER_RESIDUAL, NULL, 0},
    {"shortcut", false, BG_LAYER_SHORTCUT, NULL, 0},
    {"add", false, BG_LAYER_ADD, NULL, 0},
    {"softmax_cross_entropy", false, BG_LAYER_SOFTMAX_CROSS_ENTROPY, NULL, 0},
};
enum { NUM_LAYER_DEFS = (int)(sizeof layer_defs / sizeof layer_defs[0]) };

/* One line's layer word and option values, before shapes are inferred. */
typedef struct layer_line {
    const layer_def_t *def;
    int line, col;
    int64_t values[OPTIONS_MAX];
    double rate;                 /* the OPTION_RATE option's value, when written */
    int value_cols[OPTIONS_MAX]; /* 0 when the option was not written */
    int key_cols[OPTIONS_MAX];
    const char *comment; /* the line's '#', or NULL */
} layer_line_t;

typedef struct parser {
    const char *name;
    bg_model_spec_t *spec;
    int capacity;
    bool seen_input, seen_loss;
    int input_line, loss_line;
    int last_line, last_col; /* the last layer word, for "missing loss" */
    bg_shape_t shape;        /* output of the last layer so far */
    /* What that output is, as PyTorch's nn.Sequential would see it: an
     * image (c, h, w) from the input, a convolution or a pool, even at 1x1;
     * a vector (c) from flatten or dense; or either (an input of height and
     * width 1, a vector of c features). Dense and the loss take no image,
     * convolutions and pools no vector. */
    enum { FORM_EITHER, FORM_IMAGE, FORM_VECTOR } form;
    int form_line;    /* the line of the layer that made the output so */
    int decided_line; /* the line of the layer that took an either as one (0: none yet) */
    /* The innermost residual block still open: its residual layer's index
     * (-1: none; the residual's `partner` holds the block around it until
     * its add closes it), and how many are open. */
    int open_residual, open_blocks;
    /* A loss whose input is not flat, said at the end unless a layer
     * follows it (which check_order says first: the flatten the message
     * asks for would not mend that); line 0: none. */
    int flat_loss_line, flat_loss_col;
    bg_shape_t flat_loss_in;
} parser_t;

const char *bg_layer_kind_name(bg_layer_kind_t kind) {
    switch (kind) {
    case BG_LAYER_CONV2D: return "conv2d";
    case BG_LAYER_MAXPOOL: return "maxpool";
    case BG_LAYER_AVGPOOL: return "avgpool";
    case BG_LAYER_FLATTEN: return "flatten";
    case BG_LAYER_DENSE: return "dense";
    case BG_LAYER_RELU: return "relu";
    case BG_LAYER_TANH: return "tanh";
    case BG_LAYER_SIGMOID: return "sigmoid";
    case BG_LAYER_GELU: return "gelu";
    case BG_LAYER_LAYERNORM: return "layernorm";
    case BG_LAYER_DROPOUT: return "dropout";
    case BG_LAYER_RESIDUAL: return "residual";
    case BG_LAYER_SHORTCUT: return "shortcut";
    case BG_LAYER_ADD: return "add";
    case BG_LAYER_SOFTMAX_CROSS_ENTROPY: return "softmax_cross_entropy";
    }
    return "unknown";
}

/* A token in a message: its first TOKEN_SHOWN_MAX bytes (token_shown, for
 * "%.*s"), then "..." where it was longer (token_cut), so that no value is
 * quoted that was not written. */
static int token_shown(size_t length) {
    return length > TOKEN_SHOWN_MAX ? TOKEN_SHOWN_MAX : (int)length;
}

static const char *token_cut(size_t length) { return length > TOKEN_SHOWN_MAX ? "..." : ""; }

__attribute__((format(printf, 4, 5))) static bg_status_t
parse_error(const parser_t *p, int line, int col, const char *format, ...) {
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    return bg_error_set(BG_ERR_PARSE, "%s:%d:%d: %s", p->name, line, col, message);
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* Tabs are layout and carriage returns end lines (parse_text); every other
 * control byte means the file is not text (a binary or a truncated
 * download). */
static bool is_control(unsigned char c) {
    return (c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f;
}

static bool checked_mul(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

static bool checked_add(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

static uint64_t fnv1a_update(uint64_t hash, const char *bytes, size_t length) {
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)bytes[i];
        hash *= 0x100000001b3ULL;
    }
    return hash;
}

/* Hashes what determines the model's parameters and computation, not how it
 * was written, so reformatting a spec keeps checkpoints loadable. */
static uint64_t spec_fingerprint(const bg_model_spec_t *spec) {
    char canonical[160];
    uint64_t hash = 0xcbf29ce484222325ULL;
    int length =
        snprintf(canonical, sizeof canonical, "input %" PRId64 " %" PRId64 " %" PRId64 "\n",
                 spec->input.c, spec->input.h, spec->input.w);
    hash = fnv1a_update(hash, canonical, (size_t)length);
    for (int i = 0; i < spec->num_layers; i++) {
        const bg_layer_spec_t *layer = &spec->layers[i];
        length = snprintf(canonical, sizeof canonical,
                          "%s %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n",
                          bg_layer_kind_name(layer->kind), layer->filters, layer->kernel,
                          layer->stride, layer->pad);
        hash = fnv1a_update(hash, canonical, (size_t)length);
        /* Only for dropout, so that the other models keep their hashes. */
        if (layer->kind == BG_LAYER_DROPOUT) {
            length = snprintf(canonical, sizeof canonical, "rate %.17g\n", layer->rate);
            hash = fnv1a_update(hash, canonical, (size_t)length);
        }
    }
    return hash;
}

/* "; did you mean WORD?" where text[0..length) most likely misspells one of
 * `words` (bg_spelling_nearest, in lower case: "Dense" is dense), else "". */
static const char *guess(const char *text, size_t length, const char *const *words, size_t count,
                         char *out, size_t size) {
    char word[48];
    out[0] = '\0';
    if (length < 2 || length >= sizeof word) return out;
    for (size_t i = 0; i < length; i++) word[i] = (char)tolower((unsigned char)text[i]);
    word[length] = '\0';
    const char *near = bg_spelling_nearest(word, words, count, length);
    if (near != NULL) snprintf(out, size, "; did you mean %s?", near);
    return out;
}

/* A rate: digits with at most one decimal point, in [0, 1). Checked by
 * hand first, because strtod would also take signs, exponents, hex, "inf"
 * and "nan". */
static bg_status_t parse_rate(const parser_t *p, layer_line_t *layer, const char *key,
                              size_t key_length, const char *value, size_t value_length, int line,
                              int value_col) {
    size_t digits = 0, points = 0, others = 0;
    for (size_t i = 0; i < value_length; i++) {
        if (value[i] >= '0' && value[i] <= '9')
            digits++;
        else if (value[i] == '.')
            points++;
        else
            others++;
    }
    char text[BG_MODEL_SPEC_MAX_LINE + 1]; /* a value is part of a line */
    const bool plain = digits >= 1 && points <= 1 && others == 0 && value_length < sizeof text;
    double rate = -1;
    if (plain) {
        memcpy(text, value, value_length);
        text[value_length] = '\0';
        rate = strtod(text, NULL);
    }
    /* Written below 1 (its whole part zeros or none), but 1 as a double. */
    size_t whole = 0;
    while (whole < value_length && value[whole] != '.') whole++;
    bool below_one = true;
    for (size_t i = 0; i < whole; i++) below_one = below_one && value[i] == '0';
    if (!plain)
        return parse_error(p, line, value_col,
                           "%.*s=%.*s%s: expected a fraction from 0 to %g, such as 0.5",
                           (int)key_length, key, token_shown(value_length), value,
                           token_cut(value_length), BG_DROPOUT_MAX_RATE);
    if (!(rate < 1) && below_one)
        return parse_error(p, line, value_col,
                           "%.*s=%.*s%s rounds to 1 as a double, which would drop every value; "
                           "expected 0 to %g",
                           (int)key_length, key, token_shown(value_length), value,
                           token_cut(value_length), BG_DROPOUT_MAX_RATE);
    if (!(rate < 1))
        return parse_error(p, line, value_col,
                           "%.*s=%.*s%s is out of range: a rate of 1 or more would drop every "
                           "value; expected 0 to %g",
                           (int)key_length, key, token_shown(value_length), value,
                           token_cut(value_length), BG_DROPOUT_MAX_RATE);
    /* A value is kept when 32 random bits reach the rate's share of 2^32
     * (lib/dropout.h): off by up to 2^-32, which nearer 1 becomes a large
     * part of what is kept, while the kept values are still scaled by
     * exactly 1 / (1 - rate). */
    if (rate > BG_DROPOUT_MAX_RATE)
        return parse_error(p, line, value_col,
                           "%.*s=%.*s%s keeps fewer than one value in a million, more finely than "
                           "dropout's 32-bit draws can keep them; expected at most %g",
                           (int)key_length, key, token_shown(value_length), value,
                           token_cut(value_length), BG_DROPOUT_MAX_RATE);
    layer->rate = rate;
    return BG_OK;
}

static bg_status_t parse_option_value(const parser_t *p, layer_line_t *layer, int index,
                                      const char *key, size_t key_length, const char *value,
                                      size_t value_length, int line, int value_col) {
    const option_def_t *option = &layer->def->options[index];
    if (option->type == OPTION_PADDING) {
        if (value_length == 5 && memcmp(value, "valid", 5) == 0) {
            layer->values[index] = PADDING_VALID;
        } else if (value_length == 4 && memcmp(value, "same", 4) == 0) {
            layer->values[index] = PADDING_SAME;
        } else {
            return parse_error(p, line, value_col, "padding=%.*s%s: expected valid or same",
                               token_shown(value_length), value, token_cut(value_length));
        }
        return BG_OK;
    }
    if (option->type == OPTION_ACTIVATION) {
        /* What each of ACTIVATION_WORDS sets. */
        static const int values[] = {BG_LAYER_RELU, BG_LAYER_TANH,   BG_LAYER_SIGMOID,
                                     BG_LAYER_GELU, ACTIVATION_NONE, ACTIVATION_NONE};
        const int a = activation_index(value, value_length);
        if (a >= 0) {
            layer->values[index] = values[a];
            return BG_OK;
        }
        char near[64];
        guess(value, value_length, ACTIVATION_WORDS, ACTIVATION_WORD_COUNT, near, sizeof near);
        return parse_error(
            p, line, value_col,
            "activation=%.*s%s: expected relu, tanh, sigmoid, gelu, none or linear%s",
            token_shown(value_length), value, token_cut(value_length), near);
    }
    if (option->type == OPTION_RATE)
        return parse_rate(p, layer, key, key_length, value, value_length, line, value_col);
    /* Digits only: strtol would accept signs, spaces and hex, none of which
     * belong in a size. The running value stops growing past the maximum, so
     * a thousand-digit number cannot overflow. */
    int64_t number = 0;
    for (size_t i = 0; i < value_length; i++) {
        if (value[i] < '0' || value[i] > '9') {
            return parse_error(p, line, value_col,
                               "%.*s=%.*s%s: expected a whole number from 1 to %d", (int)key_length,
                               key, token_shown(value_length), value, token_cut(value_length),
                               BG_MODEL_SPEC_MAX_DIM);
        }
        if (number <= BG_MODEL_SPEC_MAX_DIM) number = number * 10 + (value[i] - '0');
    }
    if (number < 1 || number > BG_MODEL_SPEC_MAX_DIM) {
        return parse_error(p, line, value_col, "%.*s=%.*s%s is out of range (1 to %d)",
                           (int)key_length, key, token_shown(value_length), value,
                           token_cut(value_length), BG_MODEL_SPEC_MAX_DIM);
    }
    layer->values[index] = number;
    return BG_OK;
}

/* A layer's option keys, "units, activation", for messages. */
static void option_keys(const layer_def_t *def, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < def->num_options && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i > 0 ? ", " : "",
                                 def->options[i].key);
}

static bg_status_t parse_option(const parser_t *p, layer_line_t *layer, const char *token,
                                size_t length, int line, int col) {
    const char *equals = memchr(token, '=', length);
    if (layer->def->num_options == 0 && equals != token) {
        const size_t key_length = equals != NULL ? (size_t)(equals - token) : length;
        return parse_error(p, line, col, "unknown option '%.*s%s' for %s (it takes no options)",
                           token_shown(key_length), token, token_cut(key_length), layer->def->word);
    }
    size_t key_length = equals != NULL ? (size_t)(equals - token) : length;
    int index = -1;
    for (int i = 0; i < layer->def->num_options; i++) {
        const char *key = layer->def->options[i].key;
        if (strlen(key) == key_length && memcmp(key, token, key_length) == 0) index = i;
    }
    if (equals == NULL && index >= 0)
        return parse_error(p, line, col,
                           "option '%.*s%s' needs a value (%.*s%s=VALUE, with no space around '=')",
                           token_shown(length), token, token_cut(length), token_shown(length),
                           token, token_cut(length));
    /* The layer's keys, for the two messages below that list them (built
       only for them: a valid option needs none). */
    char expected[128] = "";
    if (equals == NULL || (key_length > 0 && index < 0))
        option_keys(layer->def, expected, sizeof expected);
    /* A bare word or number ("dense 2"): options are written KEY=VALUE; an
     * activation's name, as Keras's habit has it, is activation=NAME (a new
     * user's "conv2d filters=32 kernel=3 relu"). */
    if (equals == NULL) {
        const int a = activation_index(token, length);
        int takes_activation = 0;
        for (int i = 0; i < layer->def->num_options; i++)
            takes_activation |= layer->def->options[i].type == OPTION_ACTIVATION;
        if (a >= 0 && takes_activation)
            return parse_error(p, line, col,
                               "'%s' is not an option of %s: activation=%s sets its activation",
                               ACTIVATION_WORDS[a], layer->def->word, ACTIVATION_WORDS[a]);
    }
    if (equals == NULL)
        return parse_error(
            p, line, col,
            "'%.*s%s' is not an option of %s: options are KEY=VALUE (as %s=...), KEY "
            "one of %s",
            token_shown(length), token, token_cut(length), layer->def->word,
            layer->def->options[0].key, expected);
    if (key_length == 0) {
        return parse_error(p, line, col, "option '%.*s%s' has no name before '='",
                           token_shown(length), token, token_cut(length));
    }
    if (index < 0) {
        /* The guess among the keys not given yet ("kernel=3 kernal=3" is
         * no misspelt kernel). */
        const char *keys[OPTIONS_MAX];
        size_t open_keys = 0;
        for (int i = 0; i < layer->def->num_options; i++)
            if (layer->key_cols[i] == 0) keys[open_keys++] = layer->def->options[i].key;
        char near[80];
        return parse_error(p, line, col, "unknown option '%.*s%s' for %s%s (expected %s)",
                           token_shown(key_length), token, token_cut(key_length), layer->def->word,
                           guess(token, key_length, keys, open_keys, near, sizeof near), expected);
    }
    if (layer->key_cols[index] != 0) {
        return parse_error(p, line, col, "duplicate option '%.*s' (first at column %d)",
                           (int)key_length, token, layer->key_cols[index]);
    }
    size_t value_length = length - key_length - 1;
    if (value_length == 0 && layer->comment == token + length) /* "filters=#8" */
        return parse_error(p, line, col,
                           "empty value for option '%.*s' (what follows '#' at column %d is a "
                           "comment)",
                           (int)key_length, token, col + (int)length);
    if (value_length == 0) {
        return parse_error(p, line, col,
                           "empty value for option '%.*s' (%.*s=VALUE, with no space around '=')",
                           (int)key_length, token, (int)key_length, token);
    }
    int value_col = col + (int)key_length + 1;
    BG_CHECK(parse_option_value(p, layer, index, token, key_length, equals + 1, value_length, line,
                                value_col));
    layer->key_cols[index] = col;
    layer->value_cols[index] = value_col;
    return BG_OK;
}

static bg_status_t append_layer(parser_t *p, const layer_line_t *source, bg_layer_spec_t **out) {
    bg_model_spec_t *spec = p->spec;
    if (spec->num_layers >= BG_MODEL_SPEC_MAX_LAYERS) {
        return parse_error(p, source->line, source->col, "more than %d layers",
                           BG_MODEL_SPEC_MAX_LAYERS);
    }
    if (spec->num_layers == p->capacity) {
        int capacity = p->capacity == 0 ? 16 : p->capacity * 2;
        bg_layer_spec_t *layers = realloc(spec->layers, (size_t)capacity * sizeof *layers);
        if (layers == NULL) {
            return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for %d layers", p->name, capacity);
        }
        spec->layers = layers;
        p->capacity = capacity;
    }
    bg_layer_spec_t *layer = &spec->layers[spec->num_layers++];
    memset(layer, 0, sizeof *layer);
    layer->line = source->line;
    layer->col = source->col;
    layer->in = p->shape;
    layer->in_image = p->form == FORM_IMAGE ? 1 : p->form == FORM_VECTOR ? 0 : -1; /* set_form */
    layer->partner = -1;
    layer->shortcut = -1;
    layer->open_blocks = p->open_blocks;
    *out = layer;
    return BG_OK;
}

/* Fills params, FLOPs and activation bytes from the shapes already set and
 * folds them into the totals; all of it overflow-checked. */
static bg_status_t finish_layer(parser_t *p, bg_layer_spec_t *layer) {
    bg_model_spec_t *spec = p->spec;
    bg_shape_t in = layer->in, out = layer->out;
    int64_t in_numel = 0, out_numel = 0, k2 = 0, t = 0, u = 0;
    bool ok = checked_mul(in.c, in.h, &t) && checked_mul(t, in.w, &in_numel) &&
              checked_mul(out.c, out.h, &t) && checked_mul(t, out.w, &out_numel) &&
              checked_mul(out_numel, 4, &layer->activation_bytes);
    switch (layer->kind) {
    case BG_LAYER_CONV2D:
        /* params = filters*c*k*k + filters; flops = 2*c*k*k*filters*out_h*out_w */
        ok = ok && checked_mul(layer->kernel, layer->kernel, &k2) && checked_mul(in.c, k2, &t) &&
             checked_mul(t, layer->filters, &t) && checked_add(t, layer->filters, &layer->params) &&
             checked_mul(t, 2, &u) && checked_mul(u, out.h, &u) &&
             checked_mul(u, out.w, &layer->flops);
        break;
    case BG_LAYER_MAXPOOL:
    case BG_LAYER_AVGPOOL:
        ok = ok && checked_mul(layer->kernel, layer->kernel, &k2) &&
             checked_mul(out_numel, k2, &layer->flops);
        break;
    case BG_LAYER_FLATTEN:
    case BG_LAYER_RESIDUAL:
    case BG_LAYER_SHORTCUT: break;
    case BG_LAYER_DENSE:
        ok = ok && checked_mul(in_numel, layer->filters, &t) &&
             checked_add(t, layer->filters, &layer->params) && checked_mul(t, 2, &layer->flops);
        break;
    case BG_LAYER_RELU:
    case BG_LAYER_TANH:
    case BG_LAYER_SIGMOID:
    case BG_LAYER_GELU:
    case BG_LAYER_DROPOUT:
    case BG_LAYER_ADD: layer->flops = in_numel; break;
    case BG_LAYER_LAYERNORM:
        /* gamma and beta, one each per value; per value the sum, the
         * centred square and its sum, centring and scaling, gamma and beta */
        ok = ok && checked_mul(in_numel, 2, &layer->params) &&
             checked_mul(in_numel, 7, &layer->flops);
        break;
    case BG_LAYER_SOFTMAX_CROSS_ENTROPY: ok = ok && checked_mul(in.c, 3, &layer->flops); break;
    }
    if (!ok) {
        return parse_error(p, layer->line, layer->col,
                           "layer too large: its sizes overflow 64-bit counts");
    }
    if (!checked_add(spec->total_params, layer->params, &spec->total_params) ||
        !checked_add(spec->total_flops, layer->flops, &spec->total_flops) ||
        !checked_add(spec->total_activation_bytes, layer->activation_bytes,
                     &spec->total_activation_bytes)) {
        return parse_error(p, layer->line, layer->col,
                           "model too large: with this layer its parameters, FLOPs or "
                           "activation bytes overflow 64-bit counts");
    }
    p->shape = out;
    return BG_OK;
}

/* The layer that option `index` (an activation) of a conv2d or dense line
 * adds after it, if written and not none. */
static bg_status_t append_activation(parser_t *p, const layer_line_t *source, int index) {
    if (!source->value_cols[index] || source->values[index] == ACTIVATION_NONE) return BG_OK;
    bg_layer_spec_t *layer = NULL;
    BG_CHECK(append_layer(p, source, &layer));
    layer->kind = (bg_layer_kind_t)source->values[index];
    layer->out = layer->in;
    return finish_layer(p, layer);
}

/* Sets what the last layer, on `line`, made. The first to make an image or
 * a vector of an input that could be either (1x1) tells what the layers on
 * it had as input (their in_image, -1 until then; a model with no such
 * layer takes a vector). */
static void set_form(parser_t *p, int form, int line) {
    /* Once only: nothing makes an output that could be either again. */
    if (p->form == FORM_EITHER && form != FORM_EITHER) {
        for (int i = 0; i < p->spec->num_layers; i++)
            if (p->spec->layers[i].in_image < 0) p->spec->layers[i].in_image = form == FORM_IMAGE;
        p->decided_line = line;
    }
    p->form = form;
    p->form_line = line;
}

/* The error for an image or pool layer given a vector. One of height and
 * width 1 that a later line decided (a shortcut branch takes the block's
 * input, which the main branch's dense took as a vector) says which. */
static bg_status_t vector_error(parser_t *p, const layer_line_t *source, const char *what) {
    char decided[96] = "";
    if (p->shape.h == 1 && p->shape.w == 1 && p->decided_line > p->form_line)
        snprintf(decided, sizeof decided,
                 " (%" PRId64 "x1x1, which line %d takes as a vector, and so every layer on it)",
                 p->shape.c, p->decided_line);
    /* A shortcut branch starts from the block's input, which its
     * 'residual' line hands on. */
    int from_block = 0;
    for (int i = 0; i < p->spec->num_layers; i++)
        from_block |=
            p->spec->layers[i].line == p->form_line && p->spec->layers[i].kind == BG_LAYER_RESIDUAL;
    return parse_error(p, source->line, source->col,
                       "%s needs an image input (channels x height x width), got the vector of "
                       "%" PRId64 " values that %s %d %s%s",
                       what, p->shape.c, from_block ? "the block from line" : "line", p->form_line,
                       from_block ? "takes in" : "makes", decided);
}

static bg_status_t build_conv2d(parser_t *p, const layer_line_t *source) {
    bg_shape_t in = p->shape;
    if (p->form == FORM_VECTOR) return vector_error(p, source, "conv2d");
    int64_t filters = source->values[CONV_FILTERS];
    int64_t kernel = source->values[CONV_KERNEL];
    int64_t stride = source->value_cols[CONV_STRIDE] ? source->values[CONV_STRIDE] : 1;
    int64_t pad = 0;
    if (source->value_cols[CONV_PADDING] && source->values[CONV_PADDING] == PADDING_SAME) {
        /* An even kernel cannot be centred, so "same" would need uneven
         * padding, which the backends do not implement. */
        if (kernel % 2 == 0) {
            char odd[64];
            if (kernel < BG_MODEL_SPEC_MAX_DIM)
                snprintf(odd, sizeof odd, "kernel=%" PRId64 " or kernel=%" PRId64, kernel - 1,
                         kernel + 1);
            else
                snprintf(odd, sizeof odd, "kernel=%" PRId64, kernel - 1);
            return parse_error(p, source->line, source->key_cols[CONV_PADDING],
                               "padding=same needs an odd kernel, got kernel=%" PRId64
                               " (%s centres it)",
                               kernel, odd);
        }
        pad = (kernel - 1) / 2;
    }
    /* Unpadded only: padding=same (an odd kernel, (k - 1) / 2 on each side)
     * leaves room for any kernel. */
    if (pad == 0 && (in.h < kernel || in.w < kernel)) {
        const int64_t most = in.h < in.w ? in.h : in.w;
        return parse_error(p, source->line, source->key_cols[CONV_KERNEL],
                           "conv2d kernel %" PRId64 "x%" PRId64 " does not fit its %" PRId64
                           "x%" PRId64 " input (no padding): kernel=%" PRId64 " at most%s",
                           kernel, kernel, in.h, in.w, most,
                           kernel % 2 == 1 ? ", or padding=same" : "");
    }
    bg_layer_spec_t *layer = NULL;
    BG_CHECK(append_layer(p, source, &layer));
    layer->kind = BG_LAYER_CONV2D;
    layer->filters = filters;
    layer->kernel = kernel;
    layer->stride = stride;
    layer->pad = pad;
    layer->out.c = filters;
    layer->out.h = (in.h + 2 * pad - kernel) / stride + 1;
    layer->out.w = (in.w + 2 * pad - kernel) / stride + 1;
    BG_CHECK(finish_layer(p, layer));
    set_form(p, FORM_IMAGE, source->line);
    return append_activation(p, source, CONV_ACTIVATION);
}

static bg_status_t build_pool(parser_t *p, const layer_line_t *source, bg_layer_kind_t kind) {
    bg_shape_t in = p->shape;
    if (p->form == FORM_VECTOR) return vector_error(p, source, bg_layer_kind_name(kind));
    int64_t size = source->values[POOL_SIZE];
    int64_t stride = source->value_cols[POOL_STRIDE] ? source->values[POOL_STRIDE] : size;
    if (size > in.h || size > in.w) {
        return parse_error(p, source->line, source->key_cols[POOL_SIZE],
                           "%s size %" PRId64 " does not fit its %" PRId64 "x%" PRId64
                           " input: size=%" PRId64 " at most",
                           bg_layer_kind_name(kind), size, in.h, in.w, in.h < in.w ? in.h : in.w);
    }
    bg_layer_spec_t *layer = NULL;
    BG_CHECK(append_layer(p, source, &layer));
    layer->kind = kind;
    layer->kernel = size;
    layer->stride = stride;
    layer->out.c = in.c;
    layer->out.h = (in.h - size) / stride + 1;
    layer->out.w = (in.w - size) / stride + 1;
    set_form(p, FORM_IMAGE, source->line);
    return finish_layer(p, layer);
}

static bg_status_t flat_input_error(parser_t *p, int line, int col, bg_layer_kind_t kind,
                                    bg_shape_t in) {
    return parse_error(p, line, col,
                       "%s needs a flat input, got %" PRId64 "x%" PRId64 "x%" PRId64
                       "%s; add 'flatten' before it",
                       bg_layer_kind_name(kind), in.c, in.h, in.w,
                       in.h == 1 && in.w == 1 ? " (an image, 1x1)" : "");
}

static bg_status_t build_flat_layer(parser_t *p, const layer_line_t *source, bg_layer_kind_t kind) {
    bg_shape_t in = p->shape;
    if (in.h != 1 || in.w != 1 || p->form == FORM_IMAGE) {
        /* A loss with layers after it: check_order says that first (a new
         * user's loss on line 5 of 17 was told to add a flatten, then that
         * the loss must be last); the end of the file says this. */
        if (kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY) {
            p->flat_loss_line = source->line;
            p->flat_loss_col = source->col;
            p->flat_loss_in = in;
            return BG_OK;
        }
        return flat_input_error(p, source->line, source->col, kind, in);
    }
    bg_layer_spec_t *layer = NULL;
    BG_CHECK(append_layer(p, source, &layer));
    layer->kind = kind;
    if (kind == BG_LAYER_DENSE) {
        layer->filters = source->values[DENSE_UNITS];
        layer->out = (bg_shape_t){layer->filters, 1, 1};
        set_form(p, FORM_VECTOR, source->line);
    } else {
        if (in.c < 2)
            return parse_error(p, source->line, source->col,
                               "softmax_cross_entropy over %" PRId64 " output: with one class "
                               "the loss is always 0 and nothing learns; the layer before it "
                               "needs 2 or more outputs, one per class",
                               in.c);
        layer->out = in;
        p->spec->classes = in.c;
    }
    BG_CHECK(finish_layer(p, layer));
    return kind == BG_LAYER_DENSE ? append_activation(p, source, DENSE_ACTIVATION) : BG_OK;
}

/* A sample's shape in words: "a vector of 64 values", "a 32x7x7 image". */
/* The article said before the number n: "an" where it is said with a
 * vowel first (8, 11, 18, 80 to 89, 800 to 899, 8,000, 11,000 ...). */
static const char *article_for(int64_t n) {
    while (n >= 1000) n /= 1000; /* its leading group of three digits */
    if (n == 11 || n == 18) return "an";
    while (n >= 10) n /= 10;
    return n == 8 ? "an" : "a";
}

static void describe_shape(bg_shape_t shape, int image, char *out, size_t size) {
    if (image)
        snprintf(out, size, "%s %" PRId64 "x%" PRId64 "x%" PRId64 " image", article_for(shape.c),
                 shape.c, shape.h, shape.w);
    else
        snprintf(out, size, "a vector of %" PRId64 " values", shape.c * shape.h * shape.w);
}

/* The form (FORM_*) a layer's in_image stands for. */
static int form_of(int in_image) {
    return in_image == 1 ? FORM_IMAGE : in_image == 0 ? FORM_VECTOR : FORM_EITHER;
}

/* 1 when the output so far is `want`, of the form of a layer's in_image
 * `want_image` (an add's operands must match); else 0, with both in words
 * in now[64] and then[64]. */
static int same_shape(const parser_t *p, bg_shape_t want, int want_image, char *now, char *then) {
    const int image = p->form == FORM_IMAGE, was_image = want_image == 1;
    if (p->shape.c == want.c && p->shape.h == want.h && p->shape.w == want.w &&
        (p->form == FORM_EITHER || image == was_image))
        return 1;
    describe_shape(p->shape, image, now, 64);
    describe_shape(want, was_image, then, 64);
    return 0;
}

/* `residual` opens a block; `shortcut`, optional, ends its main branch and
 * starts the one its input takes to the add (a projection); `add` closes
 * the innermost block, adding the main branch's output to the block's input
 * or to the shortcut branch's output, which must have the same shape (and
 * be an image or a vector alike). */
static bg_status_t build_block_layer(parser_t *p, const layer_line_t *source,
                                     bg_layer_kind_t kind) {
    bg_model_spec_t *spec = p->spec;
    const int r = p->open_residual;
    const int index = spec->num_layers; /* the layer's, once appended */
    if (kind == BG_LAYER_ADD && r < 0)
        return parse_error(p, source->line, source->col,
                           "'add' with no residual block open; write 'residual' where the block "
                           "starts, and its input is what add adds");
    if (kind == BG_LAYER_SHORTCUT && r < 0)
        return parse_error(p, source->line, source->col,
                           "'shortcut' with no residual block open; it ends the main branch of a "
                           "block that 'residual' opens");
    const bg_layer_spec_t *open = r >= 0 ? &spec->layers[r] : NULL;
    const int cut = open != NULL ? open->shortcut : -1; /* the block's shortcut so far */
    if (kind == BG_LAYER_SHORTCUT && cut >= 0)
        return parse_error(p, source->line, source->col,
                           "a second 'shortcut' in the residual block opened at line %d (the "
                           "first at line %d); a block has one main branch and one shortcut",
                           open->line, spec->layers[cut].line);
    if (kind != BG_LAYER_RESIDUAL && r == index - 1)
        return parse_error(p, source->line, source->col,
                           "empty residual block (line %d): put the block's layers between "
                           "'residual' and '%s'",
                           open->line, source->def->word);
    if (kind == BG_LAYER_ADD && cut >= 0 && cut == index - 1)
        return parse_error(p, source->line, source->col,
                           "empty shortcut (line %d): put the layers the block's input takes "
                           "to the add between 'shortcut' and 'add', or leave 'shortcut' out "
                           "to add the input itself",
                           spec->layers[cut].line);
    char now[64], then[64];
    if (kind == BG_LAYER_ADD && cut < 0 && !same_shape(p, open->in, open->in_image, now, then))
        return parse_error(p, source->line, source->col,
                           "'add' needs the block's output the shape of its input: the block "
                           "from 'residual' at line %d takes %s and ends with %s (where a block "
                           "changes the shape, a 'shortcut' branch before 'add' can take its "
                           "input there)",
                           open->line, then, now);
    if (kind == BG_LAYER_ADD && cut >= 0 &&
        !same_shape(p, spec->layers[cut].in, spec->layers[cut].in_image, now, then))
        return parse_error(p, source->line, source->col,
                           "'add' needs both branches to end with the same shape: the main branch "
                           "of the block from 'residual' at line %d ends with %s (at 'shortcut', "
                           "line %d), the shortcut branch with %s",
                           open->line, then, spec->layers[cut].line, now);
    bg_layer_spec_t *layer = NULL;
    BG_CHECK(append_layer(p, source, &layer));
    layer->kind = kind;
    layer->out = layer->in;
    if (kind == BG_LAYER_RESIDUAL) {
        layer->partner = r; /* the enclosing block, until the add is found */
        p->open_residual = index;
        p->open_blocks++;
    } else if (kind == BG_LAYER_SHORTCUT) {
        /* From the main branch's output back to the block's input. */
        bg_layer_spec_t *residual = &spec->layers[r];
        layer->partner = r;
        layer->shortcut = index;
        layer->out = residual->in;
        residual->shortcut = index;
        p->form = form_of(residual->in_image);
        p->form_line = residual->line;
    } else {
        bg_layer_spec_t *residual = &spec->layers[r];
        p->open_residual = residual->partner;
        residual->partner = index;
        layer->partner = r;
        layer->shortcut = residual->shortcut;
        if (layer->shortcut >= 0) spec->layers[layer->shortcut].partner = r;
        p->open_blocks--;
        p->form_line = source->line; /* the add makes the block's output */
    }
    return finish_layer(p, layer);
}

static bg_status_t build_layer(parser_t *p, const layer_line_t *source) {
    const layer_def_t *def = source->def;
    if (def->is_input) {
        p->spec->input = (bg_shape_t){source->values[INPUT_CHANNELS], source->values[INPUT_HEIGHT],
                                      source->values[INPUT_WIDTH]};
        p->shape = p->spec->input;
        set_form(p, p->shape.h == 1 && p->shape.w == 1 ? FORM_EITHER : FORM_IMAGE, source->line);
        return BG_OK;
    }
    bg_layer_spec_t *layer = NULL;
    switch (def->kind) {
    case BG_LAYER_CONV2D: return build_conv2d(p, source);
    case BG_LAYER_MAXPOOL:
    case BG_LAYER_AVGPOOL: return build_pool(p, source, def->kind);
    case BG_LAYER_DENSE:
    case BG_LAYER_SOFTMAX_CROSS_ENTROPY: return build_flat_layer(p, source, def->kind);
    case BG_LAYER_RESIDUAL:
    case BG_LAYER_SHORTCUT:
    case BG_LAYER_ADD: return build_block_layer(p, source, def->kind);
    case BG_LAYER_FLATTEN:
    case BG_LAYER_RELU:
    case BG_LAYER_TANH:
    case BG_LAYER_SIGMOID:
    case BG_LAYER_GELU:
    case BG_LAYER_LAYERNORM:
    case BG_LAYER_DROPOUT:
        if (def->kind == BG_LAYER_LAYERNORM && p->shape.c * p->shape.h * p->shape.w < 2)
            return parse_error(p, source->line, source->col,
                               "layernorm over 1 value: its output is always its beta, and "
                               "nothing before it would learn; it needs 2 or more values a "
                               "sample");
        BG_CHECK(append_layer(p, source, &layer));
        layer->kind = def->kind;
        layer->out = layer->in;
        if (def->kind == BG_LAYER_DROPOUT)
            layer->rate = source->value_cols[DROPOUT_RATE] ? source->rate : DROPOUT_DEFAULT_RATE;
        if (def->kind == BG_LAYER_FLATTEN) {
            int64_t channels = 0;
            if (!checked_mul(layer->in.c, layer->in.h, &channels) ||
                !checked_mul(channels, layer->in.w, &channels)) {
                return parse_error(p, layer->line, layer->col,
                                   "layer too large: its sizes overflow 64-bit counts");
            }
            layer->out = (bg_shape_t){channels, 1, 1};
            set_form(p, FORM_VECTOR, source->line);
        }
        return finish_layer(p, layer);
    }
    return bg_error_set(BG_ERR_INTERNAL, "%s: unhandled layer kind %d", p->name, def->kind);
}

/* Checks where a layer may appear: input first and once, the loss last. */
static bg_status_t check_order(parser_t *p, const layer_def_t *def, int line, int col) {
    if (p->seen_loss) {
        return parse_error(p, line, col,
                           "'%s' after softmax_cross_entropy (line %d); the loss must be the "
                           "last layer",
                           def->word, p->loss_line);
    }
    if (def->is_input) {
        if (p->seen_input) {
            return parse_error(p, line, col,
                               "'input' repeated (first at line %d); a model has one input",
                               p->input_line);
        }
        p->seen_input = true;
        p->input_line = line;
        return BG_OK;
    }
    if (!p->seen_input) {
        return parse_error(p, line, col, "the first layer must be 'input', got '%s'", def->word);
    }
    if (def->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY && p->open_residual >= 0) {
        const bg_layer_spec_t *open = &p->spec->layers[p->open_residual];
        return parse_error(p, line, col,
                           "softmax_cross_entropy inside the residual block opened at line %d; "
                           "close the block with 'add' before the loss",
                           open->line);
    }
    if (def->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY) {
        p->seen_loss = true;
        p->loss_line = line;
    }
    return BG_OK;
}

/* The usual invisible or look-alike characters pasted into text, by
 * their UTF-8 bytes. */
static const struct {
    const char *bytes, *name;
} lookalikes[] = {
    {"\xC2\xA0", "a no-break space"},        {"\xE2\x80\xAF", "a narrow no-break space"},
    {"\xE2\x80\x8B", "a zero-width space"},  {"\xE2\x80\x8C", "a zero-width non-joiner"},
    {"\xE2\x80\x8D", "a zero-width joiner"}, {"\xE2\x81\xA0", "a word joiner"},
    {"\xEF\xBB\xBF", "a byte-order mark"},   {"\xE2\x80\x93", "an en dash"},
    {"\xE2\x80\x94", "an em dash"},          {"\xE2\x80\x9C", "a curly quote"},
    {"\xE2\x80\x9D", "a curly quote"},       {"\xE2\x80\x98", "a curly quote"},
    {"\xE2\x80\x99", "a curly quote"},
};

/* Refuses a byte outside ASCII (before any comment): a spec's words and
 * numbers are ASCII, and a pasted no-break or zero-width space, printed
 * as it is, would look like the blank it replaced. The message gives the
 * character's bytes in hex, and its name for the usual ones. */
static bg_status_t check_ascii(const parser_t *p, const char *text, size_t length, int line) {
    for (size_t i = 0; i < length; i++) {
        const unsigned char lead = (unsigned char)text[i];
        if (lead < 0x80) continue;
        /* A UTF-8 character's length from its first byte (1 when not one),
         * cut at the first byte that does not continue it (Latin-1's 'é'
         * before "lu" is one byte, not three). */
        size_t n = lead >= 0xF8 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (n > length - i) n = length - i;
        for (size_t k = 1; k < n; k++)
            if (((unsigned char)text[i + k] & 0xC0) != 0x80) {
                n = k;
                break;
            }
        char hex[16] = "";
        for (size_t k = 0, used = 0; k < n; k++)
            used += (size_t)snprintf(hex + used, sizeof hex - used, "%s%02X", k ? " " : "",
                                     (unsigned char)text[i + k]);
        const char *name = NULL;
        for (size_t l = 0; l < sizeof lookalikes / sizeof lookalikes[0]; l++)
            if (strlen(lookalikes[l].bytes) == n && memcmp(lookalikes[l].bytes, text + i, n) == 0)
                name = lookalikes[l].name;
        /* U+FF10 to U+FF19, as an East Asian keyboard types digits. */
        char digit[40];
        if (n == 3 && memcmp(text + i, "\xEF\xBC", 2) == 0 && (unsigned char)text[i + 2] >= 0x90 &&
            (unsigned char)text[i + 2] <= 0x99) {
            snprintf(digit, sizeof digit, "a full-width digit %c",
                     '0' + ((unsigned char)text[i + 2] - 0x90));
            name = digit;
        }
        return parse_error(p, line, (int)i + 1,
                           "byte%s %s%s%s%s outside a comment; a model spec's words and numbers "
                           "are ASCII, separated by spaces or tabs",
                           n > 1 ? "s" : "", hex, name != NULL ? " (" : "",
                           name != NULL ? name : "", name != NULL ? ")" : "");
    }
    return BG_OK;
}

/* Parses one line (`length` bytes, newline and trailing \r removed). */
static bg_status_t parse_line(parser_t *p, const char *text, size_t length, int line) {
    const char *comment = memchr(text, '#', length);
    if (comment != NULL) length = (size_t)(comment - text);
    BG_CHECK(check_ascii(p, text, length, line));
    size_t i = 0;
    while (i < length && is_blank(text[i])) i++;
    if (i == length) return BG_OK;

    size_t word_start = i;
    while (i < length && !is_blank(text[i])) i++;
    size_t word_length = i - word_start;
    const char *word = text + word_start;
    int word_col = (int)word_start + 1;

    const layer_def_t *def = NULL;
    for (int d = 0; d < NUM_LAYER_DEFS; d++) {
        if (strlen(layer_defs[d].word) == word_length &&
            memcmp(layer_defs[d].word, word, word_length) == 0) {
            def = &layer_defs[d];
        }
    }
    /* Python's call syntax (a new user's "conv2d(filters=32, kernel=3)"). */
    const char *paren = memchr(word, '(', word_length);
    if (def == NULL && paren != NULL && paren > word)
        return parse_error(p, line, word_col,
                           "'%.*s%s': a layer is its name and KEY=VALUE words after it, with "
                           "spaces, no parentheses or commas (as: conv2d filters=32 kernel=3)",
                           token_shown(word_length), word, token_cut(word_length));
    if (def == NULL) {
        const char *words[NUM_LAYER_DEFS];
        for (int d = 0; d < NUM_LAYER_DEFS; d++) words[d] = layer_defs[d].word;
        char near[80];
        return parse_error(p, line, word_col,
                           "unknown layer '%.*s%s'%s (expected input, conv2d, maxpool, avgpool, "
                           "flatten, dense, relu, tanh, sigmoid, gelu, layernorm, "
                           "dropout, residual, shortcut, add, softmax_cross_entropy)",
                           token_shown(word_length), word, token_cut(word_length),
                           guess(word, word_length, words, NUM_LAYER_DEFS, near, sizeof near));
    }
    BG_CHECK(check_order(p, def, line, word_col));

    layer_line_t layer = {.def = def, .line = line, .col = word_col, .comment = comment};
    for (;;) {
        while (i < length && is_blank(text[i])) i++;
        if (i == length) break;
        size_t token_start = i;
        while (i < length && !is_blank(text[i])) i++;
        BG_CHECK(parse_option(p, &layer, text + token_start, i - token_start, line,
                              (int)token_start + 1));
    }
    for (int o = 0; o < def->num_options; o++) {
        if (def->options[o].required && layer.value_cols[o] == 0) {
            /* "conv2d filters=8#kernel=3": '#' starts a comment anywhere. */
            char after[64] = "";
            if (comment != NULL)
                snprintf(after, sizeof after, " (what follows '#' at column %d is a comment)",
                         (int)(comment - text) + 1);
            return parse_error(p, line, word_col, "missing option '%s' for %s%s",
                               def->options[o].key, def->word, after);
        }
    }
    p->last_line = line;
    p->last_col = word_col;
    return build_layer(p, &layer);
}

/* Whether `text` starts as a safetensors file does: an 8-byte
 * little-endian length of the JSON header that follows, within the file. */
static int looks_like_safetensors(const char *text, size_t size) {
    if (size < 10 || text[8] != '{') return 0;
    uint64_t length = 0;
    for (int i = 7; i >= 0; i--) length = length << 8 | (unsigned char)text[i];
    return length >= 2 && length <= size - 8;
}

/* What a text file that is no model spec more likely is, from its first
 * character that is not white space (a spec's first line is a layer's
 * word or a comment), or NULL; its line and column into *line, *col. */
static const char *other_text_format(const char *text, size_t size, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < size; i++, (*col)++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 0;
        } else if (text[i] == '{' || text[i] == '[') {
            return "a JSON file (brigade writes its metrics, profiles and traces so)";
        } else if (text[i] == '<') {
            return "an XML file (an SVG timeline, an hwloc topology: --topology takes one)";
        } else if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') {
            return NULL;
        }
    }
    return NULL;
}

/* "little-endian" or "big-endian" where the text is UTF-16 (Windows
 * editors' "Unicode"): by its byte-order mark, or without one by the zero
 * byte beside each ASCII character of its first two; else NULL. */
static const char *utf16_order(const unsigned char *text, size_t size) {
    if (size >= 2 && text[0] == 0xFF && text[1] == 0xFE) return "little-endian";
    if (size >= 2 && text[0] == 0xFE && text[1] == 0xFF) return "big-endian";
    if (size >= 4 && text[0] != 0 && text[1] == 0 && text[2] != 0 && text[3] == 0)
        return "little-endian";
    if (size >= 4 && text[0] == 0 && text[1] != 0 && text[2] == 0 && text[3] != 0)
        return "big-endian";
    return NULL;
}

static bg_status_t parse_text(parser_t *p, const char *text, size_t size) {
    if (looks_like_safetensors(text, size))
        return parse_error(p, 1, 1,
                           "a safetensors file (a checkpoint: --load or --resume takes it), "
                           "not a model spec");
    const char *order = utf16_order((const unsigned char *)text, size);
    if (order != NULL)
        return parse_error(p, 1, 1,
                           "%s UTF-16 text (what Windows editors save as \"Unicode\"); a model "
                           "spec is UTF-8 or ASCII: save it as UTF-8",
                           order);
    /* A UTF-8 byte-order mark, which some editors write first, is no text. */
    size_t position = size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    int other_line = 0, other_col = 0;
    const char *other =
        other_text_format(text + position, size - position, &other_line, &other_col);
    if (other != NULL) return parse_error(p, other_line, other_col, "%s, not a model spec", other);
    int line = 0;
    while (position < size) {
        if (line == INT_MAX) {
            return parse_error(p, line, 1, "more than %d lines", INT_MAX);
        }
        line++;
        const char *start = text + position;
        const char *newline = memchr(start, '\n', size - position);
        size_t length = newline != NULL ? (size_t)(newline - start) : size - position;
        position += length + (newline != NULL ? 1 : 0);
        if (newline != NULL && length > 0 && start[length - 1] == '\r') length--;

        /* Bytes are checked before the length, so a binary file is called
         * binary rather than "line too long". */
        size_t checked = length > BG_MODEL_SPEC_MAX_LINE ? BG_MODEL_SPEC_MAX_LINE : length;
        for (size_t i = 0; i < checked; i++) {
            unsigned char byte = (unsigned char)start[i];
            if (is_control(byte)) {
                return parse_error(p, line, (int)i + 1,
                                   "unexpected byte 0x%02x; a model spec is text", byte);
            }
        }
        /* A \r anywhere else is a line break of old Mac files, or a stray byte:
         * read as a blank it would silently join lines. */
        const char *carriage = memchr(start, '\r', checked);
        if (carriage != NULL)
            return parse_error(p, line, (int)(carriage - start) + 1,
                               "a carriage return (\\r) inside a line; lines end with \\n "
                               "or \\r\\n, not \\r alone");
        /* Files joined with cat carry the second one's mark inside. */
        if (length >= 3 && memcmp(start, "\xEF\xBB\xBF", 3) == 0)
            return parse_error(p, line, 1,
                               "a UTF-8 byte-order mark (EF BB BF) here; only a file's first "
                               "bytes may hold one");
        if (length > BG_MODEL_SPEC_MAX_LINE) {
            return parse_error(p, line, BG_MODEL_SPEC_MAX_LINE + 1, "line longer than %d bytes",
                               BG_MODEL_SPEC_MAX_LINE);
        }
        BG_CHECK(parse_line(p, start, length, line));
    }
    if (p->flat_loss_line > 0)
        return flat_input_error(p, p->flat_loss_line, p->flat_loss_col,
                                BG_LAYER_SOFTMAX_CROSS_ENTROPY, p->flat_loss_in);
    if (!p->seen_input) {
        return parse_error(p, 1, 1, "empty model spec: expected an 'input' line");
    }
    if (!p->seen_loss) {
        char open[80] = "";
        if (p->open_residual >= 0)
            snprintf(open, sizeof open, "; the residual block opened at line %d is still open",
                     p->spec->layers[p->open_residual].line);
        return parse_error(p, p->last_line, p->last_col,
                           "missing final softmax_cross_entropy (the model must end with the "
                           "loss layer)%s",
                           open);
    }
    return BG_OK;
}

static char *copy_string(const char *s) {
    size_t length = strlen(s);
    char *copy = malloc(length + 1);
    if (copy != NULL) memcpy(copy, s, length + 1);
    return copy;
}

bg_status_t bg_model_spec_parse(const char *name, const char *text, size_t size,
                                bg_model_spec_t **out) {
    if (out == NULL || (text == NULL && size > 0)) {
        return bg_error_set(BG_ERR_INVALID, "bg_model_spec_parse: %s is NULL",
                            out == NULL ? "out" : "text");
    }
    if (name == NULL) name = "<model spec>";
    bg_status_t st = BG_OK;
    bg_model_spec_t *spec = calloc(1, sizeof *spec);
    BG_ALLOC_CHECK_GOTO(spec, st, fail);
    spec->source_name = copy_string(name);
    BG_ALLOC_CHECK_GOTO(spec->source_name, st, fail);

    parser_t parser = {.name = name, .spec = spec, .open_residual = -1};
    BG_CHECK_GOTO(parse_text(&parser, text, size), st, fail);
    set_form(&parser, FORM_VECTOR, 0); /* what nothing told */
    spec->fingerprint = spec_fingerprint(spec);
    *out = spec;
    return BG_OK;
fail:
    bg_model_spec_destroy(spec);
    return st;
}

bg_status_t bg_model_spec_load(const char *path, bg_model_spec_t **out) {
    if (path == NULL || out == NULL) {
        return bg_error_set(BG_ERR_INVALID, "bg_model_spec_load: %s is NULL",
                            path == NULL ? "path" : "out");
    }
    char *text = NULL;
    size_t size = 0;
    BG_CHECK(bg_text_file_read(path, MODEL_SPEC_MAX_FILE, "a model spec is a short text file",
                               &text, &size));
    bg_status_t st = bg_model_spec_parse(path, text, size, out);
    free(text);
    return st;
}

void bg_model_spec_destroy(bg_model_spec_t *spec) {
    if (spec == NULL) return;
    free(spec->layers);
    free(spec->source_name);
    free(spec);
}
