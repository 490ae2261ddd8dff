/* Fuzz target bodies (targets.h). A violated property prints what went
 * wrong and aborts, which libFuzzer reports as a crash with the input and
 * the replay test as a failed test. */
#include "targets.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "idx.h"
#include "model_spec.h"
#include "profile.h"
#include "safetensors.h"

static _Noreturn void property_fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("fuzz property violated: ", stderr);
    vfprintf(stderr, format, args);
    fputs("\n", stderr);
    va_end(args);
    abort();
}

#define PROPERTY(condition, ...)                                                                   \
    do {                                                                                           \
        if (!(condition)) property_fail(__VA_ARGS__);                                              \
    } while (0)

/* A failed parse names the input first and returns one of `allowed`. */
static void failure_check(const char *parser, bg_status_t status, const char *name,
                          bg_status_t allowed_a, bg_status_t allowed_b) {
    PROPERTY(status == allowed_a || status == allowed_b || status == BG_ERR_NOMEM,
             "%s: unexpected status %s: %s", parser, bg_status_name(status), bg_error_message());
    PROPERTY(strncmp(bg_error_message(), name, strlen(name)) == 0,
             "%s: message does not start with the name '%s': %s", parser, name, bg_error_message());
}

static bool shape_equal(bg_shape_t a, bg_shape_t b) {
    return a.c == b.c && a.h == b.h && a.w == b.w;
}

/* ---- model spec ---- */

bg_status_t bg_fuzz_model_spec(const uint8_t *data, size_t size) {
    static const char name[] = "fuzz.model";
    bg_model_spec_t sentinel;
    bg_model_spec_t *spec = &sentinel;
    /* A heap copy of exactly `size` bytes: the parser must not read a
     * terminator that is not there (ASan sees the overread). */
    char *text = malloc(size ? size : 1);
    if (!text) return 0;
    memcpy(text, data, size);
    bg_status_t status = bg_model_spec_parse(name, text, size, &spec);
    if (status != BG_OK) {
        PROPERTY(spec == &sentinel, "model spec: *out changed on failure");
        failure_check("model spec", status, name, BG_ERR_PARSE, BG_ERR_PARSE);
        free(text);
        return status;
    }
    PROPERTY(spec->num_layers >= 1 && spec->num_layers <= BG_MODEL_SPEC_MAX_LAYERS,
             "model spec: %d layers", spec->num_layers);
    const bg_layer_spec_t *last = &spec->layers[spec->num_layers - 1];
    PROPERTY(last->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY, "model spec: last layer is %s",
             bg_layer_kind_name(last->kind));
    PROPERTY(spec->classes == last->in.c, "model spec: classes %lld, loss input %lld",
             (long long)spec->classes, (long long)last->in.c);
    int64_t params = 0, flops = 0;
    bg_shape_t shape = spec->input;
    for (int i = 0; i < spec->num_layers; i++) {
        const bg_layer_spec_t *l = &spec->layers[i];
        PROPERTY(shape_equal(l->in, shape), "model spec: layer %d input is not the previous output",
                 i);
        PROPERTY(l->out.c >= 1 && l->out.h >= 1 && l->out.w >= 1,
                 "model spec: layer %d output %lldx%lldx%lld", i, (long long)l->out.c,
                 (long long)l->out.h, (long long)l->out.w);
        PROPERTY(l->params >= 0 && l->flops >= 0 && l->activation_bytes > 0,
                 "model spec: layer %d has negative counts", i);
        params += l->params;
        flops += l->flops;
        shape = l->out;
        /* Residual blocks: each end names the other, the add takes the
         * block's input shape (or the shortcut's, which gives the block's
         * input back), and a block's layers count it open. */
        const int open = l->kind == BG_LAYER_RESIDUAL ? l->open_blocks + 1 : l->open_blocks;
        PROPERTY(i + 1 == spec->num_layers ||
                     spec->layers[i + 1].open_blocks == open - (l->kind == BG_LAYER_ADD),
                 "model spec: layer %d's open blocks do not chain", i);
        if (l->kind == BG_LAYER_RESIDUAL || l->kind == BG_LAYER_ADD) {
            const int p = l->partner;
            PROPERTY(p >= 0 && p < spec->num_layers && spec->layers[p].partner == i &&
                         (l->kind == BG_LAYER_RESIDUAL) == (p > i + 1) &&
                         (l->shortcut >= 0 || shape_equal(spec->layers[p].in, l->in)),
                     "model spec: layer %d's block is not matched", i);
        } else if (l->kind == BG_LAYER_SHORTCUT) {
            const int r = l->partner;
            PROPERTY(r >= 0 && r < i - 1 && spec->layers[r].kind == BG_LAYER_RESIDUAL &&
                         spec->layers[r].shortcut == i && l->shortcut == i &&
                         spec->layers[spec->layers[r].partner].shortcut == i &&
                         shape_equal(l->out, spec->layers[r].in),
                     "model spec: layer %d's shortcut is not its block's", i);
        } else {
            PROPERTY(l->partner == -1 && l->shortcut == -1, "model spec: layer %d has a partner",
                     i);
        }
    }
    PROPERTY(spec->layers[0].open_blocks == 0 && last->open_blocks == 0,
             "model spec: a block open at the ends");
    PROPERTY(params == spec->total_params, "model spec: params %lld, total_params %lld",
             (long long)params, (long long)spec->total_params);
    PROPERTY(flops == spec->total_flops, "model spec: flops %lld, total_flops %lld",
             (long long)flops, (long long)spec->total_flops);
    /* The fingerprint is a function of the text. */
    bg_model_spec_t *again = NULL;
    PROPERTY(bg_model_spec_parse("again", text, size, &again) == BG_OK,
             "model spec: a second parse failed: %s", bg_error_message());
    PROPERTY(again->fingerprint == spec->fingerprint && again->num_layers == spec->num_layers,
             "model spec: a second parse differs");
    bg_model_spec_destroy(again);
    bg_model_spec_destroy(spec);
    free(text);
    return BG_OK;
}

/* ---- IDX ---- */

bg_status_t bg_fuzz_idx(const uint8_t *data, size_t size) {
    static const char name[] = "fuzz.idx";
    bg_idx_t sentinel;
    bg_idx_t *idx = &sentinel;
    bg_status_t status = bg_idx_parse(name, data, size, &idx);
    if (status != BG_OK) {
        PROPERTY(idx == &sentinel, "idx: *out changed on failure");
        failure_check("idx", status, name, BG_ERR_PARSE, BG_ERR_PARSE);
        return status;
    }
    PROPERTY(idx->ndim >= 1 && idx->ndim <= BG_IDX_MAX_DIMS, "idx: %d dims", idx->ndim);
    uint64_t product = 1;
    for (int i = 0; i < idx->ndim; i++) {
        PROPERTY(idx->dims[i] >= 1, "idx: dim %d is %lld", i, (long long)idx->dims[i]);
        product *= (uint64_t)idx->dims[i];
    }
    PROPERTY(product == idx->size && product <= BG_IDX_MAX_BYTES, "idx: %llu bytes, dims give %llu",
             (unsigned long long)idx->size, (unsigned long long)product);
    PROPERTY(size == 4 + 4 * (size_t)idx->ndim + idx->size, "idx: %zu input bytes, parsed %zu",
             size, 4 + 4 * (size_t)idx->ndim + idx->size);
    PROPERTY(memcmp(idx->data, data + size - idx->size, idx->size) == 0,
             "idx: data differs from the input");
    bg_idx_destroy(idx);
    return BG_OK;
}

/* ---- safetensors and checkpoints ---- */

/* Two small models whose checkpoints are in the seed corpus: a dense layer
 * (1.weight (3, 16), 1.bias (3)) and a conv2d (0.weight (2, 1, 3, 3), ...). */
static const char *const model_texts[] = {
    "input channels=1 height=4 width=4\nflatten\ndense units=3\nsoftmax_cross_entropy\n",
    "input channels=1 height=4 width=4\nconv2d filters=2 kernel=3\nflatten\ndense units=2\n"
    "softmax_cross_entropy\n",
};
enum { MODELS = sizeof model_texts / sizeof model_texts[0] };

/* Parsed once; kept for the process's life. */
static bg_model_spec_t *model_get(int which) {
    static bg_model_spec_t *models[MODELS];
    if (!models[which]) {
        const char *text = model_texts[which];
        if (bg_model_spec_parse("fuzz", text, strlen(text), &models[which]) != BG_OK)
            property_fail("cannot parse the fuzz model %d: %s", which, bg_error_message());
    }
    return models[which];
}

static uint64_t dtype_bytes(const char *dtype) {
    static const char *const one[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3"};
    static const char *const two[] = {"I16", "U16", "F16", "BF16"};
    static const char *const four[] = {"I32", "U32", "F32"};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
        if (strcmp(dtype, one[i]) == 0) return 1;
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
        if (strcmp(dtype, two[i]) == 0) return 2;
    for (size_t i = 0; i < sizeof four / sizeof four[0]; i++)
        if (strcmp(dtype, four[i]) == 0) return 4;
    return 8; /* I64, U64, F64: the parser knows no other */
}

/* A parsed file is what the format promises: entries tile the data in
 * order, sizes match shapes, names and metadata keys are found. */
static void parsed_check(const bg_safetensors_t *st, const uint8_t *data, size_t size) {
    PROPERTY(st->header && st->header_size >= 8 && st->header_size + st->data_size == size,
             "safetensors: header %llu + data %llu bytes, input %zu",
             (unsigned long long)st->header_size, (unsigned long long)st->data_size, size);
    PROPERTY(memcmp(st->header, data, (size_t)st->header_size) == 0,
             "safetensors: header bytes differ from the input");
    PROPERTY(st->data_size == 0 ||
                 memcmp(st->data, data + st->header_size, (size_t)st->data_size) == 0,
             "safetensors: data differs from the input");
    uint64_t offset = 0;
    for (int i = 0; i < st->count; i++) {
        const bg_safetensors_entry_t *e = &st->entries[i];
        PROPERTY(e->begin == offset && e->end >= e->begin && e->end <= st->data_size,
                 "safetensors: entry %d [%llu, %llu) does not follow %llu", i,
                 (unsigned long long)e->begin, (unsigned long long)e->end,
                 (unsigned long long)offset);
        PROPERTY(e->ndim >= 0 && e->ndim <= BG_SAFETENSORS_MAX_DIMS, "safetensors: ndim %d",
                 e->ndim);
        uint64_t bytes = dtype_bytes(e->dtype);
        for (int d = 0; d < e->ndim; d++) {
            PROPERTY(e->shape[d] >= 0, "safetensors: negative dim");
            bytes *= (uint64_t)e->shape[d]; /* bounded: the product is checked by the parser */
        }
        PROPERTY(bytes == e->end - e->begin, "safetensors: '%s' has %llu bytes for its shape, %llu",
                 e->name, (unsigned long long)bytes, (unsigned long long)(e->end - e->begin));
        PROPERTY(e->name[0] != '\0', "safetensors: empty name");
        PROPERTY(bg_safetensors_find(st, e->name) == e, "safetensors: find('%s') fails", e->name);
        offset = e->end;
    }
    PROPERTY(offset == st->data_size, "safetensors: the entries leave data unclaimed");
    for (int i = 0; i < st->metadata_count; i++)
        PROPERTY(bg_safetensors_metadata(st, st->metadata_keys[i]) == st->metadata_values[i],
                 "safetensors: metadata('%s') fails", st->metadata_keys[i]);
}

/* For files of F32 tensors only: encoding the parsed content again gives a
 * header that, followed by the same data, parses to the same content. */
static void encode_round_trip(const bg_safetensors_t *st) {
    for (int i = 0; i < st->count; i++)
        if (strcmp(st->entries[i].dtype, "F32") != 0) return;
    bg_safetensors_tensor_t *tensors = calloc((size_t)st->count + 1, sizeof *tensors);
    if (!tensors) return;
    static const float dummy = 0; /* encoding checks data pointers, never reads them */
    for (int i = 0; i < st->count; i++) {
        const bg_safetensors_entry_t *e = &st->entries[i];
        tensors[i].name = e->name;
        tensors[i].ndim = e->ndim;
        memcpy(tensors[i].shape, e->shape, sizeof e->shape);
        tensors[i].data = &dummy;
    }
    uint8_t *header = NULL;
    size_t header_size = 0;
    bg_status_t status = bg_safetensors_header_encode(
        "again", tensors, st->count, (const char *const *)st->metadata_keys,
        (const char *const *)st->metadata_values, st->metadata_count, &header, &header_size);
    free(tensors);
    if (status == BG_ERR_NOMEM) return;
    /* Names and values came from a valid file, so they are valid input. */
    PROPERTY(status == BG_OK, "safetensors: cannot re-encode a parsed file: %s",
             bg_error_message());
    size_t total = header_size + (size_t)st->data_size;
    uint8_t *bytes = malloc(total ? total : 1);
    if (bytes) {
        memcpy(bytes, header, header_size);
        if (st->data_size) memcpy(bytes + header_size, st->data, (size_t)st->data_size);
        bg_safetensors_t *again = NULL;
        status = bg_safetensors_parse("again", bytes, total, &again);
        PROPERTY(status == BG_OK, "safetensors: re-encoded file does not parse: %s",
                 bg_error_message());
        PROPERTY(again->count == st->count && again->metadata_count == st->metadata_count,
                 "safetensors: re-encoded file has other counts");
        for (int i = 0; i < st->count; i++) {
            const bg_safetensors_entry_t *a = &st->entries[i], *b = &again->entries[i];
            bool same = strcmp(a->name, b->name) == 0 && a->ndim == b->ndim &&
                        a->begin == b->begin && a->end == b->end;
            for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
            PROPERTY(same, "safetensors: re-encoded entry %d differs", i);
        }
        for (int i = 0; i < st->metadata_count; i++) {
            const char *value = bg_safetensors_metadata(again, st->metadata_keys[i]);
            PROPERTY(value && strcmp(value, st->metadata_values[i]) == 0,
                     "safetensors: re-encoded metadata '%s' differs", st->metadata_keys[i]);
        }
        bg_safetensors_destroy(again);
        free(bytes);
    }
    free(header);
}

bg_status_t bg_fuzz_safetensors(const uint8_t *data, size_t size) {
    static const char name[] = "fuzz.safetensors";
    bg_safetensors_t sentinel;
    bg_safetensors_t *st = &sentinel;
    bg_status_t accepted = bg_safetensors_parse(name, data, size, &st);
    if (accepted != BG_OK) {
        PROPERTY(st == &sentinel, "safetensors: *out changed on failure");
        failure_check("safetensors", accepted, name, BG_ERR_PARSE, BG_ERR_PARSE);
    } else {
        parsed_check(st, data, size);
        accepted = bg_checkpoint_verify(name, st);
        if (accepted != BG_OK) failure_check("verify", accepted, name, BG_ERR_PARSE, BG_ERR_PARSE);
        encode_round_trip(st);
        bg_safetensors_destroy(st);
    }
    /* The whole load path against each model: parse, verify, fit. */
    for (int m = 0; m < MODELS; m++) {
        const bg_model_spec_t *spec = model_get(m);
        float params[64];
        bg_checkpoint_info_t info = {.step = -1};
        if ((size_t)spec->total_params > sizeof params / sizeof params[0])
            property_fail("fuzz model %d has %lld parameters", m, (long long)spec->total_params);
        bg_status_t status = bg_checkpoint_parse(name, data, size, spec, params, &info);
        if (status == BG_OK) {
            PROPERTY(accepted == BG_OK, "checkpoint: loads a file that does not verify");
            PROPERTY(info.step >= 0, "checkpoint: step %lld", (long long)info.step);
            /* Another model's fingerprint is never this model's own. */
            char own[20];
            snprintf(own, sizeof own, "%016" PRIx64, spec->fingerprint);
            PROPERTY(strcmp(info.other_model, own) != 0,
                     "checkpoint: its own fingerprint named as another model's");
        } else {
            failure_check("checkpoint", status, name, BG_ERR_PARSE, BG_ERR_INVALID);
        }
    }
    return accepted;
}

/* ---- profiles (brigade profile's JSON) ---- */

static bool time_ok(double seconds) { return isfinite(seconds) && seconds >= 0; }

/* What the planner reads of an accepted profile: sizes in order, every
 * time finite and not negative, stage entries within the model, and a
 * layer's price at any size finite and not negative. */
static void profile_check(const bg_profile_t *p, const bg_model_spec_t *spec) {
    PROPERTY(p->version >= 1 && p->version <= BG_PROFILE_VERSION, "profile: version %d",
             p->version);
    PROPERTY(p->layers == spec->num_layers && p->fingerprint == spec->fingerprint,
             "profile: %d layers for %d, or another fingerprint", p->layers, spec->num_layers);
    PROPERTY(p->batch >= 1, "profile: batch %lld", (long long)p->batch);
    PROPERTY(p->other_sizes >= 0 && p->other_sizes <= BG_PROFILE_MAX_OTHER_SIZES,
             "profile: %d other sizes", p->other_sizes);
    int64_t sizes[BG_PROFILE_MAX_OTHER_SIZES + 1];
    int where[BG_PROFILE_MAX_OTHER_SIZES + 1];
    const int n = bg_profile_timed_sizes(p, sizes, where);
    PROPERTY(n == p->other_sizes + 1, "profile: %d timed sizes for %d other", n, p->other_sizes);
    for (int k = 1; k < n; k++)
        PROPERTY(sizes[k - 1] < sizes[k], "profile: timed sizes %lld, %lld out of order",
                 (long long)sizes[k - 1], (long long)sizes[k]);
    PROPERTY(p->copy_bytes_per_s >= BG_PROFILE_MIN_COPY_BYTES_PER_S &&
                 p->copy_bytes_per_s <= BG_PROFILE_MAX_COPY_BYTES_PER_S,
             "profile: copy bandwidth %g", p->copy_bytes_per_s);
    PROPERTY(time_ok(p->handoff_s) && time_ok(p->wake_s), "profile: hand-off %g, wake %g",
             p->handoff_s, p->wake_s);
    static const double samples[] = {0.25, 1, 1.5, 3, 7, 64, 1000, 1e6};
    for (int i = 0; i < p->layers; i++) {
        const bg_layer_profile_t *l = &p->layer[i];
        PROPERTY(time_ok(l->forward_s) && time_ok(l->backward_data_s) &&
                     time_ok(l->backward_weights_s) && time_ok(l->update_s) && time_ok(l->send_s) &&
                     time_ok(l->recv_s) && time_ok(l->weight_check_s),
                 "profile: layer %d has a time that is negative or not finite", i);
        for (int k = 0; k < n; k++) {
            const bg_layer_at_size_t t = bg_profile_layer_at(l, where[k]);
            PROPERTY(time_ok(t.forward_s) && time_ok(t.backward_data_s) &&
                         time_ok(t.backward_weights_s),
                     "profile: layer %d at %lld samples: a time negative or not finite", i,
                     (long long)sizes[k]);
        }
        for (size_t s = 0; s < sizeof samples / sizeof samples[0]; s++)
            for (int op = BG_PROFILE_FORWARD; op <= BG_PROFILE_BACKWARD_WEIGHTS; op++) {
                const double t = bg_profile_layer_seconds(p, l, (bg_profile_op_t)op, samples[s]);
                PROPERTY(time_ok(t), "profile: layer %d op %d priced at %g samples: %g", i, op,
                         samples[s], t);
            }
    }
    PROPERTY(p->stage_count >= 0 && (p->stage_count == 0 || p->stage != NULL),
             "profile: %d stage entries", p->stage_count);
    for (int s = 0; s < p->stage_count; s++) {
        const bg_stage_profile_t *e = &p->stage[s];
        PROPERTY(e->first >= 0 && e->first < e->last && e->last <= p->layers && e->slots >= 1,
                 "profile: stage entry %d holds layers [%d, %d) at %d slots", s, e->first, e->last,
                 e->slots);
        PROPERTY(time_ok(e->forward_s) && time_ok(e->backward_s) && time_ok(e->update_s) &&
                     time_ok(e->recv_s) && time_ok(e->send_s) && time_ok(e->grad_recv_s) &&
                     time_ok(e->grad_send_s) && time_ok(e->check_s) && time_ok(e->grad_check_s) &&
                     time_ok(e->weight_check_s),
                 "profile: stage entry %d has a time that is negative or not finite", s);
    }
    for (int m = 1; m <= 64; m *= 2) (void)bg_profile_covers(p, 64, m);
}

bg_status_t bg_fuzz_profile(const uint8_t *data, size_t size) {
    static const char name[] = "fuzz.profile.json";
    /* A NUL after exactly `size` bytes, as a file read gives it. */
    char *text = malloc(size + 1);
    if (!text) return BG_ERR_NOMEM;
    memcpy(text, data, size);
    text[size] = '\0';
    const bg_model_spec_t *spec = model_get(1);
    bg_profile_t sentinel;
    bg_profile_t *p = &sentinel;
    const bg_status_t status = bg_profile_parse(name, text, spec, &p);
    free(text);
    if (status != BG_OK) {
        PROPERTY(p == &sentinel, "profile: *out changed on failure");
        failure_check("profile", status, name, BG_ERR_PARSE, BG_ERR_INVALID);
        return status;
    }
    profile_check(p, spec);
    bg_profile_destroy(p);
    return status;
}
