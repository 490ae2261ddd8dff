/* brigade summary MODEL: the layer table of a model spec. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "layer.h"
#include "model_spec.h"
#include "model_words.h"
#include "planning.h"
#include "text_table.h"

static const char help[] =
    "usage: brigade summary MODEL [--json]\n"
    "\n"
    "Prints each layer of MODEL (a model spec file) with its output shape,\n"
    "trainable parameters, forward FLOPs per sample (a multiply-add counts 2)\n"
    "and the bytes of its output activation per sample (fp32), then totals.\n"
    "Layer numbers are the names used in checkpoints (\"0.weight\", ...).\n"
    "\n"
    "  --json   the same as JSON on stdout, for scripts: model, input, classes,\n"
    "           layers (index, kind, what the table's kind column says,\n"
    "           line in MODEL, output as [c, h, w] or [n], params, flops,\n"
    "           activation_bytes) and the totals\n";

/* Blocks nested deeper than this are indented as this deep, and their
 * ends say their depth. */
enum { MOST_INDENTED = 8 };

/* The layer's kind and options, indented two spaces for each residual block
 * around it, so that blocks read as they nest. */
static void describe(const bg_layer_spec_t *l, char *buf, size_t size) {
    const int depth = l->open_blocks - (l->kind == BG_LAYER_ADD || l->kind == BG_LAYER_SHORTCUT);
    const int indent = 2 * (depth < MOST_INDENTED ? depth : MOST_INDENTED);
    if ((size_t)indent + 1 >= size) return;
    memset(buf, ' ', (size_t)indent);
    buf += indent;
    size -= (size_t)indent;
    switch (l->kind) {
    case BG_LAYER_CONV2D:
        snprintf(buf, size, "conv2d %lldx%lld/%lld pad %lld", (long long)l->kernel,
                 (long long)l->kernel, (long long)l->stride, (long long)l->pad);
        break;
    case BG_LAYER_MAXPOOL:
    case BG_LAYER_AVGPOOL:
        snprintf(buf, size, "%s %lldx%lld/%lld", bg_layer_kind_name(l->kind), (long long)l->kernel,
                 (long long)l->kernel, (long long)l->stride);
        break;
    case BG_LAYER_DROPOUT: {
        /* Plain, as a spec writes it, where that is short; a rate of many
         * zeros reads better as %g writes it, with the digits to tell it
         * from its neighbours (1.23e-54). */
        char rate[24];
        if (!bg_fraction_words(l->rate, rate, sizeof rate)) {
            int digits = 6;
            do snprintf(rate, sizeof rate, "%.*g", digits, l->rate);
            while (strtod(rate, NULL) != l->rate && ++digits <= 17);
        }
        snprintf(buf, size, "dropout %s", rate);
        break;
    }
    case BG_LAYER_RESIDUAL:
    case BG_LAYER_SHORTCUT:
    case BG_LAYER_ADD: {
        const char *link = l->kind == BG_LAYER_RESIDUAL   ? "to"
                           : l->kind == BG_LAYER_SHORTCUT ? "of"
                                                          : "from";
        char deep[24] = "";
        if (depth > MOST_INDENTED) snprintf(deep, sizeof deep, ", depth %d", depth);
        snprintf(buf, size, "%s (%s %d%s)", bg_layer_kind_name(l->kind), link, l->partner, deep);
        break;
    }
    default: snprintf(buf, size, "%s", bg_layer_kind_name(l->kind)); break;
    }
}

static const bg_text_column_t columns[] = {
    {"layer", 'r', 5, 0},   {"kind", 'l', 22, 2},         {"output", 'l', 12, 1},
    {"params", 'r', 12, 1}, {"FLOPs/sample", 'r', 14, 1}, {"act B/sample", 'r', 13, 1},
};

/* An image as CxHxW (even at 1x1, as a convolution's or a pool's output
 * stays an image), a vector as its length. */
static void shape_text(bg_shape_t s, bool image, char *buf, size_t size) {
    if (image)
        snprintf(buf, size, "%lldx%lldx%lld", (long long)s.c, (long long)s.h, (long long)s.w);
    else
        snprintf(buf, size, "%lld", (long long)s.c);
}

/* Whether a layer's output is an image: convolutions and pools make one,
 * flatten, dense and the loss a vector, an activation, a layernorm, a
 * dropout or a residual block's ends keeps
 * its input's (on a 1x1 model input, what the parser resolved it to:
 * bg_layer_spec_t.in_image, as the checkpoint's shapes have it). */
static bool makes_image(bg_layer_kind_t kind, bool input_image) {
    switch (kind) {
    case BG_LAYER_CONV2D:
    case BG_LAYER_MAXPOOL:
    case BG_LAYER_AVGPOOL: return true;
    case BG_LAYER_RELU:
    case BG_LAYER_TANH:
    case BG_LAYER_SIGMOID:
    case BG_LAYER_GELU:
    case BG_LAYER_LAYERNORM:
    case BG_LAYER_DROPOUT:
    case BG_LAYER_RESIDUAL:
    case BG_LAYER_SHORTCUT:
    case BG_LAYER_ADD: return input_image;
    default: return false;
    }
}

/* A layer's output: [c, h, w] for an image, [n] for a vector. */
static cJSON *shape_json(bg_shape_t s, bool image) {
    const double dims[] = {(double)s.c, (double)s.h, (double)s.w};
    return cJSON_CreateDoubleArray(dims, image ? 3 : 1);
}

/* The table as JSON on stdout; 0, or 1 where memory ran out. */
static int print_json(const char *path, const bg_model_spec_t *spec) {
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL && cJSON_AddStringToObject(root, "model", path) != NULL &&
             cJSON_AddItemToObject(root, "input", shape_json(spec->input, true)) &&
             bg_cli_json_add_uint(root, "classes", (uint64_t)spec->classes) != NULL;
    cJSON *layers = ok ? cJSON_AddArrayToObject(root, "layers") : NULL;
    ok = layers != NULL;
    char what[64];
    for (int i = 0; ok && i < spec->num_layers; i++) {
        const bg_layer_spec_t *l = &spec->layers[i];
        const int input_image =
            l->kind == BG_LAYER_SHORTCUT ? spec->layers[l->partner].in_image : l->in_image;
        describe(l, what, sizeof what);
        const char *text = what;
        while (*text == ' ') text++; /* the table's indent of blocks */
        cJSON *layer = cJSON_CreateObject();
        ok = layer != NULL && cJSON_AddItemToArray(layers, layer) &&
             cJSON_AddNumberToObject(layer, "index", i) != NULL &&
             cJSON_AddStringToObject(layer, "kind", bg_layer_kind_name(l->kind)) != NULL &&
             cJSON_AddStringToObject(layer, "text", text) != NULL &&
             cJSON_AddNumberToObject(layer, "line", l->line) != NULL &&
             cJSON_AddItemToObject(layer, "output",
                                   shape_json(l->out, makes_image(l->kind, input_image > 0))) &&
             bg_cli_json_add_uint(layer, "params", (uint64_t)l->params) != NULL &&
             bg_cli_json_add_uint(layer, "flops", (uint64_t)l->flops) != NULL &&
             bg_cli_json_add_uint(layer, "activation_bytes", (uint64_t)l->activation_bytes) != NULL;
    }
    ok = ok && bg_cli_json_add_uint(root, "total_params", (uint64_t)spec->total_params) != NULL &&
         bg_cli_json_add_uint(root, "total_flops", (uint64_t)spec->total_flops) != NULL &&
         bg_cli_json_add_uint(root, "total_activation_bytes",
                              (uint64_t)spec->total_activation_bytes) != NULL;
    char *text = ok ? bg_cli_json_print(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL) {
        fprintf(stderr, "brigade summary: out of memory writing the JSON\n");
        return 1;
    }
    puts(text);
    free(text);
    return 0;
}

int bg_cmd_summary(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) {
            if (json) return bg_cli_usage_error("summary", "--json given twice");
            json = 1;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            (void)bg_cli_unknown_option(argv[i], NULL, 0, 0, "--json");
            return bg_cli_usage_error("summary", "%s", bg_error_message());
        }
        if (path != NULL) {
            (void)bg_cli_second_model(path, argv[i], 0);
            return bg_cli_usage_error("summary", "%s", bg_error_message());
        }
        path = argv[i];
    }
    if (path == NULL) return bg_cli_usage_error("summary", "no MODEL given");
    bg_model_spec_t *spec;
    bg_status_t st = bg_cli_model_load(path, &spec);
    if (st != BG_OK) return bg_cli_fail("summary", st);
    if (json) {
        const int code = print_json(path, spec);
        bg_model_spec_destroy(spec);
        return code;
    }

    char shape[48], what[64], params[32], flops[32], bytes[32];
    bool image = true; /* the input line gives channels, height and width */
    shape_text(spec->input, image, shape, sizeof shape);
    char shown[BG_CLI_SHOWN_MAX];
    printf("%s: %d layer%s, input %s, %lld class%s\n\n", bg_cli_shown(path, shown, sizeof shown),
           spec->num_layers, spec->num_layers == 1 ? "" : "s", shape, (long long)spec->classes,
           spec->classes == 1 ? "" : "es");
    /* Columns widen for a deep block's indented kinds and large shapes. */
    bg_text_table_t *table = NULL;
    st = bg_text_table_create(columns, (int)(sizeof columns / sizeof columns[0]), &table);
    if (st != BG_OK) {
        bg_model_spec_destroy(spec);
        return bg_cli_fail("summary", st);
    }
    for (int i = 0; i < spec->num_layers; i++) {
        const bg_layer_spec_t *l = &spec->layers[i];
        describe(l, what, sizeof what);
        /* A shortcut's output is its block's input again. */
        const int input_image =
            l->kind == BG_LAYER_SHORTCUT ? spec->layers[l->partner].in_image : l->in_image;
        image = makes_image(l->kind, input_image > 0);
        shape_text(l->out, image, shape, sizeof shape);
        bg_text_table_add(table, "%d", i);
        bg_text_table_add(table, "%s", what);
        bg_text_table_add(table, "%s", shape);
        bg_text_table_add(table, "%s", bg_cli_group_digits(l->params, params, sizeof params));
        bg_text_table_add(table, "%s", bg_cli_group_digits(l->flops, flops, sizeof flops));
        bg_text_table_add(table, "%s",
                          bg_cli_group_digits(l->activation_bytes, bytes, sizeof bytes));
    }
    bg_text_table_add(table, "%s", "");
    bg_text_table_add(table, "%s", "total");
    bg_text_table_add(table, "%s", "");
    bg_text_table_add(table, "%s", bg_cli_group_digits(spec->total_params, params, sizeof params));
    bg_text_table_add(table, "%s", bg_cli_group_digits(spec->total_flops, flops, sizeof flops));
    bg_text_table_add(table, "%s",
                      bg_cli_group_digits(spec->total_activation_bytes, bytes, sizeof bytes));
    bg_text_table_print(table, stdout);
    bg_text_table_destroy(table);
    /* The weights' size in the largest unit that leaves at least 1. */
    static const char *const units[] = {"MiB", "GiB", "TiB", "PiB", "EiB"};
    double size = (double)spec->total_params * 4.0 / (1024.0 * 1024.0);
    int unit = 0;
    while (size >= 1024.0 && unit < 4) {
        size /= 1024.0;
        unit++;
    }
    printf("\nparameters: %s (%.2f %s fp32); one training step costs about 3x the forward "
           "FLOPs per sample\n",
           bg_cli_group_digits(spec->total_params, params, sizeof params), size, units[unit]);
    bg_model_spec_destroy(spec);
    return 0;
}
