/* A model's layer stack in words (model_words.h). */
#include "model_words.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* What separates the input's and the layers' words in bg_model_spec_words. */
static const char separator[] = "; ";

/* A saved layer's words are shown up to this many bytes. */
enum { SHOWN_MAX = 120 };

bool bg_fraction_words(double value, char *out, size_t size) {
    /* Every double has a finite decimal expansion: 1074 decimals at most. */
    for (int decimals = 0; decimals <= 1074; decimals++) {
        const int length = snprintf(out, size, "%.*f", decimals, value);
        if (length < 0 || (size_t)length >= size) return false;
        if (strtod(out, NULL) == value) return true;
    }
    return false; /* not a finite double */
}

void bg_layer_words(const bg_layer_spec_t *layer, char *out, size_t size) {
    const char *kind = bg_layer_kind_name(layer->kind);
    switch (layer->kind) {
    case BG_LAYER_CONV2D: {
        char padding[24] = "valid";
        if (layer->pad > 0 && layer->pad == (layer->kernel - 1) / 2)
            snprintf(padding, sizeof padding, "same");
        else if (layer->pad > 0) /* not a spec's, but said as it is */
            snprintf(padding, sizeof padding, "%" PRId64, layer->pad);
        snprintf(out, size,
                 "%s filters=%" PRId64 " kernel=%" PRId64 " stride=%" PRId64 " padding=%s", kind,
                 layer->filters, layer->kernel, layer->stride, padding);
        break;
    }
    case BG_LAYER_MAXPOOL:
    case BG_LAYER_AVGPOOL:
        snprintf(out, size, "%s size=%" PRId64 " stride=%" PRId64, kind, layer->kernel,
                 layer->stride);
        break;
    case BG_LAYER_DENSE: snprintf(out, size, "%s units=%" PRId64, kind, layer->filters); break;
    case BG_LAYER_DROPOUT: {
        char rate[BG_FRACTION_WORDS_MAX];
        bg_fraction_words(layer->rate, rate, sizeof rate);
        snprintf(out, size, "%s rate=%s", kind, rate);
        break;
    }
    default: snprintf(out, size, "%s", kind); break;
    }
}

/* Item 0 is the input line, item i + 1 layer i. */
static void item_words(const bg_model_spec_t *spec, int item, char *out, size_t size) {
    if (item == 0)
        snprintf(out, size, "input channels=%" PRId64 " height=%" PRId64 " width=%" PRId64,
                 spec->input.c, spec->input.h, spec->input.w);
    else
        bg_layer_words(&spec->layers[item - 1], out, size);
}

/* Long enough for any item's words: five 19-digit numbers and their keys,
 * or a dropout's rate of the most decimals. */
enum { ITEM_MAX = BG_FRACTION_WORDS_MAX + 120 };

char *bg_model_spec_words(const bg_model_spec_t *spec) {
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (out == NULL) return NULL;
    for (int item = 0; item <= spec->num_layers; item++) {
        char words[ITEM_MAX];
        item_words(spec, item, words, sizeof words);
        fprintf(out, "%s%s", item > 0 ? separator : "", words);
    }
    const bool written = !ferror(out);
    if (fclose(out) != 0 || !written) {
        free(text);
        return NULL;
    }
    return text;
}

/* Counts the items of saved words: one more than its separators. */
static int item_count(const char *saved) {
    int items = 1;
    for (const char *at = strstr(saved, separator); at != NULL;
         at = strstr(at + sizeof separator - 1, separator))
        items++;
    return items;
}

/* How much of a saved item to show: up to its end, a control character
 * (a crafted file's; not to reach a terminal; bg_utf8_next) or SHOWN_MAX
 * bytes of whole characters. */
static int shown_length(const char *item) {
    size_t length = 0;
    while (item[length] != '\0' && item[length] != ';') {
        bool control;
        const size_t bytes = bg_utf8_next(item + length, &control);
        if (control || length + bytes > SHOWN_MAX) break;
        length += bytes;
    }
    return (int)length;
}

bool bg_model_spec_difference(const bg_model_spec_t *spec, const char *saved, char *out,
                              size_t size) {
    out[0] = '\0';
    const int saved_items = item_count(saved), own_items = spec->num_layers + 1;
    const char *at = saved;
    int item = 0;
    char own[ITEM_MAX];
    for (; item < own_items && item < saved_items; item++) {
        const char *end = strstr(at, separator);
        const size_t length = end != NULL ? (size_t)(end - at) : strlen(at);
        item_words(spec, item, own, sizeof own);
        if (strlen(own) != length || memcmp(own, at, length) != 0) break;
        at += length + (end != NULL ? sizeof separator - 1 : 0);
    }
    if (item == own_items && item == saved_items) return false;
    const int shown = shown_length(at);
    if (item < own_items) item_words(spec, item, own, sizeof own);
    if (item == 0)
        snprintf(out, size, "its input is '%.*s' where this model's is '%s'", shown, at, own);
    else if (item < own_items && item < saved_items)
        snprintf(out, size, "its layer %d is '%.*s' where this model has '%s'", item - 1, shown, at,
                 own);
    else if (item < own_items)
        snprintf(out, size, "it ends before layer %d, this model's '%s'", item - 1, own);
    else
        snprintf(out, size, "its layer %d '%.*s' is past this model's last", item - 1, shown, at);
    if (saved_items != own_items) {
        const size_t used = strlen(out);
        snprintf(out + used, size - used, "; it has %d layer%s, this model %d", saved_items - 1,
                 saved_items == 2 ? "" : "s", own_items - 1);
    }
    return true;
}
