/* Tests for model checkpoints: a bit-exact round trip, the file's tensor
 * names, shapes and metadata (what PyTorch's state_dict of the origin CNN
 * would hold), and every way a file can fail to fit the model, each with a
 * message naming the file and the tensor; the checksums (values, the rules
 * for brigade and foreign files, extra tensors) and the cleanup of temporary
 * files that killed writers leave behind. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, flock */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint.h"
#include "support/scratch.h"
#include "model_spec.h"
#include "safetensors.h"

static const char origin_cnn[] = "# the CNN from the project's origin\n"
                                 "input channels=1 height=28 width=28\n"
                                 "conv2d filters=32 kernel=3 activation=relu\n"
                                 "maxpool size=2\n"
                                 "flatten\n"
                                 "dense units=128 activation=relu\n"
                                 "dense units=10\n"
                                 "softmax_cross_entropy\n";

static const char smaller_cnn[] = "input channels=1 height=28 width=28\n"
                                  "conv2d filters=32 kernel=3 activation=relu\n"
                                  "maxpool size=2\n"
                                  "flatten\n"
                                  "dense units=64 activation=relu\n"
                                  "dense units=10\n"
                                  "softmax_cross_entropy\n";

/* The origin CNN with an average pool: another model, the same tensors. */
static const char avgpool_cnn[] = "input channels=1 height=28 width=28\n"
                                  "conv2d filters=32 kernel=3 activation=relu\n"
                                  "avgpool size=2\n"
                                  "flatten\n"
                                  "dense units=128 activation=relu\n"
                                  "dense units=10\n"
                                  "softmax_cross_entropy\n";

/* The origin CNN's tensors in the order of the flat parameter vector. */
typedef struct expected_tensor {
    const char *name;
    int ndim;
    int64_t shape[4];
    int64_t count;
} expected_tensor_t;

static const expected_tensor_t origin_tensors[] = {
    {"0.weight", 4, {32, 1, 3, 3}, 288},  {"0.bias", 1, {32}, 32},
    {"4.weight", 2, {128, 5408}, 692224}, {"4.bias", 1, {128}, 128},
    {"6.weight", 2, {10, 128}, 1280},     {"6.bias", 1, {10}, 10},
};
enum { ORIGIN_TENSORS = sizeof origin_tensors / sizeof origin_tensors[0] };
enum { ORIGIN_PARAMS = 693962 };

typedef struct fixture {
    char *dir;
    char path[512];  /* a checkpoint file in dir */
    char other[512]; /* a second file name in dir */
    bg_model_spec_t *spec;
    float *params; /* i * 0.001f */
    float *loaded;
} fixture_t;

/* ---- helpers ---- */

static bg_model_spec_t *spec_parse(const char *name, const char *text) {
    bg_model_spec_t *spec = NULL;
    bg_status_t st = bg_model_spec_parse(name, text, strlen(text), &spec);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    return spec;
}

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->dir = malloc(64);
    assert_non_null(f->dir);
    assert_int_equal(bg_test_scratch_make(f->dir, 64, "checkpoint"), 0);
    snprintf(f->path, sizeof f->path, "%s/model.safetensors", f->dir);
    snprintf(f->other, sizeof f->other, "%s/other.safetensors", f->dir);
    f->spec = spec_parse("origin.model", origin_cnn);
    assert_int_equal(f->spec->total_params, ORIGIN_PARAMS);
    f->params = malloc(sizeof(float) * ORIGIN_PARAMS);
    f->loaded = malloc(sizeof(float) * ORIGIN_PARAMS);
    assert_non_null(f->params);
    assert_non_null(f->loaded);
    for (int64_t i = 0; i < ORIGIN_PARAMS; i++) f->params[i] = (float)i * 0.001f;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    assert_int_equal(bg_test_scratch_remove(f->dir), 0);
    free(f->dir);
    bg_model_spec_destroy(f->spec);
    free(f->params);
    free(f->loaded);
    free(f);
    return 0;
}

/* The tensors of the origin CNN over `params`, as bg_safetensors_write wants
 * them. */
static void origin_tensor_list(const float *params, bg_safetensors_tensor_t *out) {
    int64_t offset = 0;
    for (int i = 0; i < ORIGIN_TENSORS; i++) {
        const expected_tensor_t *e = &origin_tensors[i];
        memset(&out[i], 0, sizeof out[i]);
        out[i].name = e->name;
        out[i].ndim = e->ndim;
        memcpy(out[i].shape, e->shape, sizeof e->shape);
        out[i].data = params + offset;
        offset += e->count;
    }
}

/* Asserts status and that the message names the file and `needle`. */
static void check_error(bg_status_t got, bg_status_t want, const char *path, const char *needle) {
    const char *message = bg_error_message();
    if (got != want)
        fail_msg("status %s, expected %s (message: %s)", bg_status_name(got), bg_status_name(want),
                 message);
    if (strstr(message, path) == NULL) fail_msg("message does not name '%s': %s", path, message);
    if (needle != NULL && strstr(message, needle) == NULL)
        fail_msg("message does not contain '%s': %s", needle, message);
}

/* Loads `path` into f->loaded, first filled with 0xff bytes (NaNs), and
 * asserts that every float came back equal to f->params, bit for bit. */
static void expect_loads_params(fixture_t *f, const char *path) {
    memset(f->loaded, 0xff, sizeof(float) * ORIGIN_PARAMS);
    bg_status_t st = bg_checkpoint_load(path, f->spec, f->loaded, NULL);
    if (st != BG_OK) fail_msg("%s: %s", path, bg_error_message());
    assert_memory_equal(f->loaded, f->params, sizeof(float) * ORIGIN_PARAMS);
}

static void put_u64_le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes a safetensors file by hand, tensor i having dtype dtypes[i]
 * (bg_safetensors_write only writes F32): an F32 tensor holds its slice of
 * params as little-endian floats, any other dtype zero bytes. */
static void write_raw(const char *path, const char *const *dtypes, const float *params) {
    char header[2048];
    size_t len = 0;
    uint64_t offset = 0;
    len += (size_t)snprintf(header + len, sizeof header - len, "{");
    for (int i = 0; i < ORIGIN_TENSORS; i++) {
        const expected_tensor_t *e = &origin_tensors[i];
        uint64_t bytes = (uint64_t)e->count * (strcmp(dtypes[i], "F64") == 0 ? 8 : 4);
        len += (size_t)snprintf(header + len, sizeof header - len,
                                "%s\"%s\":{\"dtype\":\"%s\","
                                "\"shape\":[",
                                i ? "," : "", e->name, dtypes[i]);
        for (int d = 0; d < e->ndim; d++)
            len += (size_t)snprintf(header + len, sizeof header - len, "%s%" PRId64, d ? "," : "",
                                    e->shape[d]);
        len += (size_t)snprintf(header + len, sizeof header - len,
                                "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset,
                                offset + bytes);
        offset += bytes;
    }
    len += (size_t)snprintf(header + len, sizeof header - len, "}");
    assert_true(len < sizeof header);
    while (len % 8 != 0) header[len++] = ' ';
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    uint8_t prefix[8];
    put_u64_le(prefix, len);
    assert_int_equal(fwrite(prefix, 1, 8, file), 8);
    assert_int_equal(fwrite(header, 1, len, file), len);
    uint8_t *data = calloc(offset, 1);
    assert_non_null(data);
    uint8_t *at = data;
    const float *from = params;
    for (int i = 0; i < ORIGIN_TENSORS; i++) {
        const int64_t count = origin_tensors[i].count;
        const int f32 = strcmp(dtypes[i], "F32") == 0;
        for (int64_t k = 0; f32 && k < count; k++) {
            uint32_t bits;
            memcpy(&bits, &from[k], sizeof bits);
            for (int b = 0; b < 4; b++) at[4 * k + b] = (uint8_t)(bits >> (8 * b));
        }
        at += count * (f32 ? 4 : 8);
        from += count;
    }
    assert_int_equal(fwrite(data, 1, offset, file), offset);
    free(data);
    assert_int_equal(fclose(file), 0);
}

/* ---- tests ---- */

static void test_round_trip(void **state) {
    fixture_t *f = *state;
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 1234), BG_OK);
    memset(f->loaded, 0xff, sizeof(float) * ORIGIN_PARAMS);
    bg_checkpoint_info_t info = {.step = -1};
    bg_status_t st = bg_checkpoint_load(f->path, f->spec, f->loaded, &info);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    assert_int_equal(info.step, 1234);
    assert_memory_equal(f->loaded, f->params, sizeof(float) * ORIGIN_PARAMS);

    /* step is optional. */
    expect_loads_params(f, f->path);

    /* Saving again replaces the file atomically and leaves nothing else. */
    f->params[0] = -1.5f;
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 1235), BG_OK);
    memset(f->loaded, 0xff, sizeof(float) * ORIGIN_PARAMS);
    assert_int_equal(bg_checkpoint_load(f->path, f->spec, f->loaded, &info), BG_OK);
    assert_int_equal(info.step, 1235);
    assert_true(f->loaded[0] == -1.5f);
    assert_memory_equal(f->loaded, f->params, sizeof(float) * ORIGIN_PARAMS);
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) entries += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(entries, 1);
}

static void test_file_layout(void **state) {
    fixture_t *f = *state;
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 7), BG_OK);
    bg_safetensors_t *file = NULL;
    bg_status_t st = bg_safetensors_load(f->path, &file);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    assert_int_equal(file->count, ORIGIN_TENSORS);
    int64_t offset = 0;
    for (int i = 0; i < ORIGIN_TENSORS; i++) {
        const expected_tensor_t *want = &origin_tensors[i];
        const bg_safetensors_entry_t *e = bg_safetensors_find(file, want->name);
        if (e == NULL) fail_msg("tensor %s missing", want->name);
        assert_string_equal(e->dtype, "F32");
        assert_int_equal(e->ndim, want->ndim);
        for (int d = 0; d < want->ndim; d++) assert_int_equal(e->shape[d], want->shape[d]);
        assert_int_equal(e->end - e->begin, (uint64_t)want->count * 4);
        /* The data is the flat parameter slice, little-endian F32. */
        for (int64_t k = 0; k < want->count; k += want->count / 7 + 1) {
            const uint8_t *p = file->data + e->begin + 4 * k;
            uint32_t bits =
                (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            float value;
            memcpy(&value, &bits, sizeof value);
            assert_true(value == f->params[offset + k]);
        }
        offset += want->count;
    }
    assert_int_equal(offset, ORIGIN_PARAMS);
    const char *format = bg_safetensors_metadata(file, "format");
    assert_non_null(format);
    assert_string_equal(format, "pt");
    const char *step = bg_safetensors_metadata(file, "brigade.step");
    assert_non_null(step);
    assert_string_equal(step, "7");
    char fingerprint[32];
    snprintf(fingerprint, sizeof fingerprint, "%016" PRIx64, f->spec->fingerprint);
    const char *model = bg_safetensors_metadata(file, "brigade.model");
    assert_non_null(model);
    assert_string_equal(model, fingerprint);
    bg_safetensors_destroy(file);
}

/* layernorm's gamma and beta take the shape of what they normalise, as in
 * nn.LayerNorm([c, h, w]) or nn.LayerNorm(features); the weights go round. */
static void test_layernorm_tensors(void **state) {
    fixture_t *f = *state;
    bg_model_spec_t *spec = spec_parse("norm.model", "input channels=2 height=5 width=4\n"
                                                     "conv2d filters=3 kernel=3\n"
                                                     "layernorm\n"
                                                     "flatten\n"
                                                     "layernorm\n"
                                                     "dense units=2\n"
                                                     "softmax_cross_entropy\n");
    bg_checkpoint_tensor_t *tensors = NULL;
    int count = 0;
    assert_int_equal(bg_checkpoint_model_tensors(spec, &tensors, &count), BG_OK);
    assert_int_equal(count, 8);
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[3];
    } want[] = {{"1.weight", 3, {3, 3, 2}},
                {"1.bias", 3, {3, 3, 2}},
                {"3.weight", 1, {18}},
                {"3.bias", 1, {18}}};
    for (int i = 0; i < 4; i++) {
        const bg_checkpoint_tensor_t *t = &tensors[2 + i];
        assert_string_equal(t->name, want[i].name);
        assert_int_equal(t->ndim, want[i].ndim);
        for (int d = 0; d < want[i].ndim; d++) assert_int_equal(t->shape[d], want[i].shape[d]);
        assert_int_equal(t->count, 18);
    }
    assert_int_equal(tensors[2].offset, 3 * 2 * 9 + 3);
    free(tensors);
    float *params = malloc(sizeof(float) * (size_t)spec->total_params);
    float *loaded = malloc(sizeof(float) * (size_t)spec->total_params);
    assert_non_null(params);
    assert_non_null(loaded);
    for (int64_t i = 0; i < spec->total_params; i++) params[i] = (float)i / 8;
    assert_int_equal(bg_checkpoint_save(f->path, spec, params, 3), BG_OK);
    bg_status_t st = bg_checkpoint_load(f->path, spec, loaded, NULL);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    assert_memory_equal(loaded, params, sizeof(float) * (size_t)spec->total_params);
    free(params);
    free(loaded);
    bg_model_spec_destroy(spec);
}

static void test_other_model(void **state) {
    fixture_t *f = *state;
    bg_model_spec_t *small = spec_parse("small.model", smaller_cnn);
    assert_true(small->fingerprint != f->spec->fingerprint);
    float *small_params = calloc((size_t)small->total_params, sizeof(float));
    assert_non_null(small_params);

    /* A checkpoint of the origin CNN does not load into the smaller one... */
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 1), BG_OK);
    check_error(bg_checkpoint_load(f->path, small, small_params, NULL), BG_ERR_INVALID, f->path,
                "tensor '4.weight' has shape [128, 5408]; the model needs [64, 5408] (the file "
                "holds another model: fingerprint");
    /* ...and says which layer differs, from the file's brigade.layers. */
    check_error(bg_checkpoint_load(f->path, small, small_params, NULL), BG_ERR_INVALID, f->path,
                "; its layer 4 is 'dense units=128' where this model has 'dense units=64')");
    /* ...nor the other way round. */
    assert_int_equal(bg_checkpoint_save(f->other, small, small_params, 1), BG_OK);
    check_error(bg_checkpoint_load(f->other, f->spec, f->loaded, NULL), BG_ERR_INVALID, f->other,
                "another model");
    free(small_params);
    bg_model_spec_destroy(small);
}

/* Another model with the same tensors (names and shapes) loads, as
 * PyTorch's load_state_dict would take it, and says whose file it was. */
static void test_other_model_same_tensors(void **state) {
    fixture_t *f = *state;
    bg_model_spec_t *avg = spec_parse("avg.model", avgpool_cnn);
    assert_true(avg->fingerprint != f->spec->fingerprint);
    assert_int_equal(avg->total_params, ORIGIN_PARAMS);
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 5), BG_OK);
    memset(f->loaded, 0xff, sizeof(float) * ORIGIN_PARAMS);
    bg_checkpoint_info_t info;
    memset(&info, 'x', sizeof info);
    if (bg_checkpoint_load(f->path, avg, f->loaded, &info) != BG_OK)
        fail_msg("%s", bg_error_message());
    assert_memory_equal(f->loaded, f->params, sizeof(float) * ORIGIN_PARAMS);
    assert_int_equal(info.step, 5);
    char fingerprint[32];
    snprintf(fingerprint, sizeof fingerprint, "%016" PRIx64, f->spec->fingerprint);
    assert_string_equal(info.other_model, fingerprint);
    assert_string_equal(info.difference,
                        "its layer 2 is 'maxpool size=2 stride=2' where this model has 'avgpool "
                        "size=2 stride=2'");
    /* Its own model's file says nothing of another. */
    memset(&info, 'x', sizeof info);
    assert_int_equal(bg_checkpoint_load(f->path, f->spec, f->loaded, &info), BG_OK);
    assert_string_equal(info.other_model, "");
    assert_string_equal(info.difference, "");
    /* A value that is not finite is the file's fault, whoever's model it
     * holds: the message does not blame the model. */
    f->params[1] = NAN;
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 5), BG_OK);
    check_error(bg_checkpoint_load(f->path, avg, f->loaded, NULL), BG_ERR_INVALID, f->path,
                "non-finite");
    assert_null(strstr(bg_error_message(), "another model"));
    bg_model_spec_destroy(avg);
}

static void test_other_model_without_fingerprint(void **state) {
    fixture_t *f = *state;
    /* The origin CNN's tensors (no brigade metadata) into the smaller model:
     * the shapes give it away. */
    bg_model_spec_t *small = spec_parse("small.model", smaller_cnn);
    float *small_params = calloc((size_t)small->total_params, sizeof(float));
    assert_non_null(small_params);
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS];
    origin_tensor_list(f->params, tensors);
    assert_int_equal(bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS, NULL, NULL, 0), BG_OK);
    check_error(bg_checkpoint_load(f->path, small, small_params, NULL), BG_ERR_INVALID, f->path,
                "'4.weight' has shape [128, 5408]; the model needs [64, 5408]");
    free(small_params);
    bg_model_spec_destroy(small);
}

static void test_missing_tensor(void **state) {
    fixture_t *f = *state;
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS];
    origin_tensor_list(f->params, tensors);
    /* Leave 4.bias out. */
    memmove(&tensors[3], &tensors[4], sizeof tensors[0] * 2);
    assert_int_equal(bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS - 1, NULL, NULL, 0),
                     BG_OK);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_INVALID, f->path,
                "'4.bias' is missing");
}

/* A wrapped PyTorch model's file names its tensors with a prefix
 * ("model.0.weight"): the missing tensor's message says so. */
static void test_prefixed_names(void **state) {
    fixture_t *f = *state;
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS];
    origin_tensor_list(f->params, tensors);
    char names[ORIGIN_TENSORS][32];
    for (int i = 0; i < ORIGIN_TENSORS; i++) {
        snprintf(names[i], sizeof names[i], "model.%s", tensors[i].name);
        tensors[i].name = names[i];
    }
    assert_int_equal(bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS, NULL, NULL, 0), BG_OK);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_INVALID, f->path,
                "tensor '0.weight' is missing; the file's names carry a prefix: it has "
                "'model.0.weight'");
}

/* A tensor holding a NaN or an infinity is refused, naming it and the
 * first bad element (0.weight has 288 values, so 290 is 0.bias's third). */
static void test_non_finite_tensor(void **state) {
    fixture_t *f = *state;
    f->params[290] = NAN;
    f->params[295] = -INFINITY;
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 1), BG_OK);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_INVALID, f->path,
                "tensor '0.bias' holds 2 non-finite values (NaN or infinity; the first at element "
                "2)");
}

static void test_extra_tensor(void **state) {
    fixture_t *f = *state;
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS + 1];
    origin_tensor_list(f->params, tensors);
    memset(&tensors[ORIGIN_TENSORS], 0, sizeof tensors[0]);
    tensors[ORIGIN_TENSORS].name = "8.weight";
    tensors[ORIGIN_TENSORS].ndim = 2;
    tensors[ORIGIN_TENSORS].shape[0] = 2;
    tensors[ORIGIN_TENSORS].shape[1] = 3;
    tensors[ORIGIN_TENSORS].data = f->params;
    assert_int_equal(bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS + 1, NULL, NULL, 0),
                     BG_OK);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_INVALID, f->path,
                "'8.weight' is not part of this model");
}

static void test_wrong_dtype(void **state) {
    fixture_t *f = *state;
    const char *dtypes[ORIGIN_TENSORS] = {"F32", "F32", "F32", "F32", "F64", "F32"};
    write_raw(f->path, dtypes, f->params);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_INVALID, f->path,
                "'6.weight' is F64");

    /* The hand-written file itself is fine: all F32 loads, every value. */
    const char *all_f32[ORIGIN_TENSORS] = {"F32", "F32", "F32", "F32", "F32", "F32"};
    write_raw(f->path, all_f32, f->params);
    expect_loads_params(f, f->path);
}

static void test_wrong_shape(void **state) {
    fixture_t *f = *state;
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS];
    origin_tensor_list(f->params, tensors);
    /* Same element count, other shape: (32, 9) instead of (32, 1, 3, 3). */
    tensors[0].ndim = 2;
    tensors[0].shape[0] = 32;
    tensors[0].shape[1] = 9;
    tensors[0].shape[2] = tensors[0].shape[3] = 0;
    assert_int_equal(bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS, NULL, NULL, 0), BG_OK);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_INVALID, f->path,
                "'0.weight' has shape [32, 9]; the model needs [32, 1, 3, 3]");

    /* Transposed dense weight (PyTorch's layout is (out, in)). */
    origin_tensor_list(f->params, tensors);
    tensors[4].shape[0] = 128;
    tensors[4].shape[1] = 10;
    assert_int_equal(bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS, NULL, NULL, 0), BG_OK);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_INVALID, f->path,
                "'6.weight' has shape [128, 10]; the model needs [10, 128]");
}

static void test_foreign_file_loads(void **state) {
    fixture_t *f = *state;
    /* As PyTorch's safetensors.torch.save_file would write it: the right
     * tensors, in another order, with no brigade metadata. */
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS], reversed[ORIGIN_TENSORS];
    origin_tensor_list(f->params, tensors);
    for (int i = 0; i < ORIGIN_TENSORS; i++) reversed[i] = tensors[ORIGIN_TENSORS - 1 - i];
    const char *keys[] = {"format"};
    const char *values[] = {"pt"};
    assert_int_equal(bg_safetensors_write(f->path, reversed, ORIGIN_TENSORS, keys, values, 1),
                     BG_OK);
    bg_checkpoint_info_t info = {.step = -1};
    bg_status_t st = bg_checkpoint_load(f->path, f->spec, f->loaded, &info);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    assert_int_equal(info.step, 0);
    assert_memory_equal(f->loaded, f->params, sizeof(float) * ORIGIN_PARAMS);

    /* No metadata at all. */
    assert_int_equal(bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS, NULL, NULL, 0), BG_OK);
    memset(f->loaded, 0, sizeof(float) * ORIGIN_PARAMS);
    assert_int_equal(bg_checkpoint_load(f->path, f->spec, f->loaded, &info), BG_OK);
    assert_int_equal(info.step, 0);
    assert_memory_equal(f->loaded, f->params, sizeof(float) * ORIGIN_PARAMS);
}

/* A step count that is not a whole non-negative number is refused. */
static void test_bad_step_metadata(void **state) {
    fixture_t *f = *state;
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS];
    origin_tensor_list(f->params, tensors);
    const char *keys[] = {"brigade.step"};
    const char *bad[] = {"", "12x", "-3", "99999999999999999999"};
    for (int i = 0; i < 4; i++) {
        const char *values[] = {bad[i]};
        assert_int_equal(
            bg_checkpoint_save_tensors(f->path, tensors, ORIGIN_TENSORS, keys, values, 1), BG_OK);
        bg_checkpoint_info_t info = {.step = -1};
        check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, &info), BG_ERR_PARSE, f->path,
                    "not a step count");
    }
    const char *good[] = {"42"};
    assert_int_equal(bg_checkpoint_save_tensors(f->path, tensors, ORIGIN_TENSORS, keys, good, 1),
                     BG_OK);
    bg_checkpoint_info_t info = {.step = -1};
    memset(f->loaded, 0xff, sizeof(float) * ORIGIN_PARAMS);
    assert_int_equal(bg_checkpoint_load(f->path, f->spec, f->loaded, &info), BG_OK);
    assert_int_equal(info.step, 42);
    assert_memory_equal(f->loaded, f->params, sizeof(float) * ORIGIN_PARAMS);
}

/* A seed that is there but no whole number is refused, as --resume
 * refuses it (until 2026-12-05 --load passed it over, and synthetic data
 * were made from the default seed, said nowhere); a good one is read. */
static void test_bad_seed_metadata(void **state) {
    fixture_t *f = *state;
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS];
    origin_tensor_list(f->params, tensors);
    const char *keys[] = {"brigade.seed"};
    const char *bad[] = {"", "7 ", "abc", "-1", "+1", "0x10", "99999999999999999999"};
    for (int i = 0; i < 7; i++) {
        const char *values[] = {bad[i]};
        assert_int_equal(
            bg_checkpoint_save_tensors(f->path, tensors, ORIGIN_TENSORS, keys, values, 1), BG_OK);
        bg_checkpoint_info_t info = {0};
        check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, &info), BG_ERR_PARSE, f->path,
                    "metadata 'brigade.seed' is");
    }
    const char *good[] = {"18446744073709551615"};
    assert_int_equal(bg_checkpoint_save_tensors(f->path, tensors, ORIGIN_TENSORS, keys, good, 1),
                     BG_OK);
    bg_checkpoint_info_t info = {0};
    assert_int_equal(bg_checkpoint_load(f->path, f->spec, f->loaded, &info), BG_OK);
    assert_true(info.seed_saved);
    assert_true(info.seed == UINT64_MAX);
}

/* ---- checksums ---- */

static uint8_t *file_read(const char *path, size_t *size) {
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    assert_int_equal(fseek(in, 0, SEEK_END), 0);
    long len = ftell(in);
    assert_true(len > 0);
    rewind(in);
    uint8_t *bytes = malloc((size_t)len);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)len, in), (size_t)len);
    fclose(in);
    *size = (size_t)len;
    return bytes;
}

static void file_write(const char *path, const uint8_t *bytes, size_t size) {
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(bytes, 1, size, out), size);
    assert_int_equal(fclose(out), 0);
}

static uint32_t crc_of(const void *bytes, size_t size) {
    return (uint32_t)crc32(crc32(0, Z_NULL, 0), bytes, (uInt)size);
}

/* The header checksum as docs/checkpoints.md defines it, computed here
 * independently of the library: CRC-32 of the file's first 8 + N bytes with
 * the value's own digits read as "00000000". */
static uint32_t header_crc_by_hand(const uint8_t *file) {
    size_t header_size = 8;
    for (int i = 0; i < 8; i++) header_size += (size_t)file[i] << (8 * i);
    size_t at = 8 + strlen(BG_CHECKPOINT_HEADER_START);
    uint8_t *copy = malloc(header_size);
    assert_non_null(copy);
    memcpy(copy, file, header_size);
    memset(copy + at, '0', 8);
    uint32_t crc = crc_of(copy, header_size);
    free(copy);
    return crc;
}

/* Writes a file with a correct header checksum but the given metadata
 * (after the header checksum) and no tensor checksums of its own: for
 * files that are intact but break the checksum rules. */
static void write_with_header_crc(const char *path, const bg_safetensors_tensor_t *tensors,
                                  int count, const char *const *keys, const char *const *values,
                                  int metadata_count) {
    const char *all_keys[8] = {BG_CHECKPOINT_HEADER_CRC_KEY};
    const char *all_values[8] = {"00000000"};
    assert_true(metadata_count < 8);
    for (int i = 0; i < metadata_count; i++) {
        all_keys[1 + i] = keys[i];
        all_values[1 + i] = values[i];
    }
    uint8_t *header = NULL;
    size_t header_size = 0;
    assert_int_equal(bg_safetensors_header_encode(path, tensors, count, all_keys, all_values,
                                                  1 + metadata_count, &header, &header_size),
                     BG_OK);
    char digits[9];
    snprintf(digits, sizeof digits, "%08" PRIx32, header_crc_by_hand(header));
    memcpy(header + 8 + strlen(BG_CHECKPOINT_HEADER_START), digits, 8);
    bg_status_t st = bg_safetensors_write_encoded(path, header, header_size, tensors, count);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    free(header);
}

static void test_checksums_written(void **state) {
    fixture_t *f = *state;
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 3), BG_OK);
    size_t size;
    uint8_t *bytes = file_read(f->path, &size);
    /* The header checksum opens the header and covers all of it. */
    assert_memory_equal(bytes + 8, BG_CHECKPOINT_HEADER_START, strlen(BG_CHECKPOINT_HEADER_START));
    bg_safetensors_t *file = NULL;
    assert_int_equal(bg_safetensors_load(f->path, &file), BG_OK);
    char want[9];
    snprintf(want, sizeof want, "%08" PRIx32, header_crc_by_hand(bytes));
    assert_string_equal(bg_safetensors_metadata(file, BG_CHECKPOINT_HEADER_CRC_KEY), want);
    /* format, brigade.model, brigade.layers, brigade.step and the header
     * checksum, then a checksum per tensor. */
    assert_int_equal(file->metadata_count, 5 + ORIGIN_TENSORS);
    assert_string_equal(bg_safetensors_metadata(file, "brigade.layers"),
                        "input channels=1 height=28 width=28; conv2d filters=32 kernel=3 "
                        "stride=1 padding=valid; relu; maxpool size=2 stride=2; flatten; dense "
                        "units=128; relu; dense units=10; softmax_cross_entropy");
    /* One checksum per tensor: CRC-32 of its bytes in the file, which are
     * the little-endian floats of its slice of the parameters. */
    int64_t offset = 0;
    for (int i = 0; i < ORIGIN_TENSORS; i++) {
        const expected_tensor_t *t = &origin_tensors[i];
        char key[64];
        snprintf(key, sizeof key, "brigade.crc32.%s", t->name);
        const char *value = bg_safetensors_metadata(file, key);
        if (!value) fail_msg("no %s", key);
        snprintf(want, sizeof want, "%08" PRIx32,
                 crc_of(f->params + offset, sizeof(float) * (size_t)t->count));
        assert_string_equal(value, want);
        const bg_safetensors_entry_t *e = bg_safetensors_find(file, t->name);
        snprintf(want, sizeof want, "%08" PRIx32, crc_of(file->data + e->begin, e->end - e->begin));
        assert_string_equal(value, want);
        offset += t->count;
    }
    assert_int_equal(bg_checkpoint_verify(f->path, file), BG_OK);
    bg_safetensors_destroy(file);

    /* The in-memory twin of load agrees. */
    bg_checkpoint_info_t info = {.step = -1};
    memset(f->loaded, 0, sizeof(float) * ORIGIN_PARAMS);
    assert_int_equal(bg_checkpoint_parse("mem", bytes, size, f->spec, f->loaded, &info), BG_OK);
    assert_int_equal(info.step, 3);
    assert_memory_equal(f->loaded, f->params, sizeof(float) * ORIGIN_PARAMS);
    free(bytes);
}

static void test_corrupt_tensor(void **state) {
    fixture_t *f = *state;
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 3), BG_OK);
    size_t size;
    uint8_t *bytes = file_read(f->path, &size);
    bg_safetensors_t *file = NULL;
    assert_int_equal(bg_safetensors_parse("x", bytes, size, &file), BG_OK);
    const bg_safetensors_entry_t *e = bg_safetensors_find(file, "4.weight");
    size_t data_start = (size_t)file->header_size;
    /* One bit of one float of 4.weight, in the middle of the tensor. */
    size_t at = data_start + (size_t)(e->begin + e->end) / 2;
    bytes[at] ^= 0x10;
    char message[160];
    snprintf(message, sizeof message,
             "tensor '4.weight' is corrupt (checksum %08" PRIx32 ", expected %s)",
             crc_of(bytes + data_start + e->begin, e->end - e->begin),
             bg_safetensors_metadata(file, "brigade.crc32.4.weight"));
    file_write(f->other, bytes, size);
    check_error(bg_checkpoint_load(f->other, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->other,
                message);
    check_error(bg_checkpoint_parse(f->other, bytes, size, f->spec, f->loaded, NULL), BG_ERR_PARSE,
                f->other, message);
    bg_safetensors_destroy(file);

    /* A digit of the step count: the header checksum catches it. */
    bytes[at] ^= 0x10;
    char *step = (char *)memmem(bytes, data_start, "\"brigade.step\":\"3\"", 18);
    assert_non_null(step);
    step[16] = '4';
    file_write(f->other, bytes, size);
    check_error(bg_checkpoint_load(f->other, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->other,
                "header is corrupt (checksum");
    /* So does a padding byte turned into another kind of whitespace. */
    step[16] = '3';
    assert_int_equal(bytes[data_start - 1], ' ');
    bytes[data_start - 1] = '\n';
    file_write(f->other, bytes, size);
    check_error(bg_checkpoint_load(f->other, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->other,
                "header is corrupt (checksum");
    bytes[data_start - 1] = ' ';
    file_write(f->other, bytes, size);
    expect_loads_params(f, f->other);
    free(bytes);
}

/* A file with brigade metadata must carry every checksum; one without any
 * is another tool's and loads unchecked (test_foreign_file_loads). */
static void test_checksum_rules(void **state) {
    fixture_t *f = *state;
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS];
    origin_tensor_list(f->params, tensors);
    char fingerprint[32];
    snprintf(fingerprint, sizeof fingerprint, "%016" PRIx64, f->spec->fingerprint);

    /* brigade.model but no checksums at all, as brigade wrote before it
     * had them. */
    const char *model_key[] = {"brigade.model"};
    const char *model_value[] = {fingerprint};
    assert_int_equal(
        bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS, model_key, model_value, 1), BG_OK);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->path,
                "brigade checkpoint without a header checksum (brigade.header_crc32)");

    /* A header checksum that is not where brigade puts it (a tool that
     * rewrote the file, keeping the metadata in another order): said so,
     * with what loads (until 2026-12-05 only "header is corrupt"). */
    const char *late_keys[] = {"brigade.model", "brigade.header_crc32"};
    const char *late_values[] = {fingerprint, "00000000"};
    assert_int_equal(
        bg_safetensors_write(f->path, tensors, ORIGIN_TENSORS, late_keys, late_values, 2), BG_OK);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->path,
                "header is not as brigade writes it (starting with {\"__metadata__\":{\"brigade."
                "header_crc32\":\"XXXXXXXX\", 8 lowercase hex digits): rewritten by a tool that "
                "kept the brigade.* metadata, or corrupt; without the brigade.* keys it loads as "
                "another tool's file");
    /* Where brigade puts it, but no hex digits: corrupt. */
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 3), BG_OK);
    size_t size = 0;
    uint8_t *bytes = file_read(f->path, &size);
    const char key[] = "\"brigade.header_crc32\":\"";
    uint8_t *crc = memmem(bytes, size, key, sizeof key - 1);
    assert_non_null(crc);
    memcpy(crc + sizeof key - 1, "zzzzzzzz", 8);
    file_write(f->path, bytes, size);
    free(bytes);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->path,
                "header is corrupt: a brigade checkpoint starts with {\"__metadata__\":{\"brigade."
                "header_crc32\":\"XXXXXXXX\" (8 lowercase hex digits)");

    /* A sound header checksum, but no tensor checksums. */
    write_with_header_crc(f->path, tensors, ORIGIN_TENSORS, model_key, model_value, 1);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->path,
                "tensor '0.bias' has no checksum (brigade.crc32.0.bias)");

    /* A checksum of a tensor the file does not hold. */
    char crcs[ORIGIN_TENSORS + 1][9];
    const char *keys[ORIGIN_TENSORS + 1], *values[ORIGIN_TENSORS + 1];
    char names[ORIGIN_TENSORS + 1][40];
    int64_t offset = 0;
    for (int i = 0; i < ORIGIN_TENSORS; i++) {
        snprintf(names[i], sizeof names[i], "brigade.crc32.%s", origin_tensors[i].name);
        snprintf(crcs[i], sizeof crcs[i], "%08" PRIx32,
                 crc_of(f->params + offset, sizeof(float) * (size_t)origin_tensors[i].count));
        keys[i] = names[i];
        values[i] = crcs[i];
        offset += origin_tensors[i].count;
    }
    write_with_header_crc(f->path, tensors, ORIGIN_TENSORS, keys, values, 6);
    expect_loads_params(f, f->path);
    snprintf(names[6], sizeof names[6], "brigade.crc32.9.weight");
    keys[6] = names[6];
    values[6] = crcs[0];
    write_with_header_crc(f->path, tensors, ORIGIN_TENSORS, keys, values, 7);
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->path,
                "checksum for tensor '9.weight', which the file does not hold");

    /* Checksums are exactly 8 lowercase hex digits. */
    const char *malformed[] = {"ABCDEF01", "1234567", "123456789", "0x123456", ""};
    for (int k = 0; k < 5; k++) {
        values[2] = malformed[k];
        write_with_header_crc(f->path, tensors, ORIGIN_TENSORS, keys, values, 6);
        check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->path,
                    "tensor '4.weight': checksum");
    }
}

/* Extra tensors (optimizer state, say) get the same protection; the
 * checksum keys are the writer's own. */
static void test_save_tensors(void **state) {
    fixture_t *f = *state;
    bg_safetensors_tensor_t tensors[ORIGIN_TENSORS + 1];
    origin_tensor_list(f->params, tensors);
    float moment[6] = {0.5f, -0.25f, 1, 2, 3, 4};
    tensors[ORIGIN_TENSORS] = (bg_safetensors_tensor_t){
        .name = "optimizer.m.6.bias", .ndim = 2, .shape = {2, 3}, .data = moment};
    const char *keys[] = {"brigade.optimizer"};
    const char *values[] = {"adam"};
    assert_int_equal(
        bg_checkpoint_save_tensors(f->path, tensors, ORIGIN_TENSORS + 1, keys, values, 1), BG_OK);
    bg_safetensors_t *file = NULL;
    bg_status_t st = bg_checkpoint_read(f->path, &file);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    const bg_safetensors_entry_t *e = bg_safetensors_find(file, "optimizer.m.6.bias");
    assert_non_null(e);
    assert_memory_equal(file->data + e->begin, moment, sizeof moment);
    assert_string_equal(bg_safetensors_metadata(file, "brigade.optimizer"), "adam");
    char want[9];
    snprintf(want, sizeof want, "%08" PRIx32, crc_of(moment, sizeof moment));
    assert_string_equal(bg_safetensors_metadata(file, "brigade.crc32.optimizer.m.6.bias"), want);
    bg_safetensors_destroy(file);

    /* Corrupting the extra tensor is caught like any other. */
    size_t size;
    uint8_t *bytes = file_read(f->path, &size);
    bytes[size - 1] ^= 1; /* the last byte of the last tensor, the moment */
    file_write(f->other, bytes, size);
    bg_safetensors_t sentinel;
    file = &sentinel; /* must stay untouched on failure */
    check_error(bg_checkpoint_read(f->other, &file), BG_ERR_PARSE, f->other,
                "tensor 'optimizer.m.6.bias' is corrupt (checksum");
    assert_ptr_equal(file, &sentinel);
    free(bytes);

    /* Reserved keys. */
    const char *reserved[] = {"brigade.header_crc32", "brigade.crc32.0.weight"};
    for (int i = 0; i < 2; i++) {
        const char *v[] = {"00000000"};
        check_error(bg_checkpoint_save_tensors(f->other, tensors, 1, &reserved[i], v, 1),
                    BG_ERR_INVALID, f->other, "reserved for checksums");
    }
    /* Bad tensors are refused before their data is read. */
    bg_safetensors_tensor_t bad = {.name = "x", .ndim = 1, .shape = {4}, .data = NULL};
    check_error(bg_checkpoint_save_tensors(f->other, &bad, 1, NULL, NULL, 0), BG_ERR_INVALID,
                f->other, "data is NULL");
    bad.name = NULL;
    check_error(bg_checkpoint_save_tensors(f->other, &bad, 1, NULL, NULL, 0), BG_ERR_INVALID,
                f->other, "has no name");
}

/* ---- temporary files ---- */

static int dir_count(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) entries += e->d_name[0] != '.';
    closedir(d);
    return entries;
}

static void touch(const char *path) {
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fputs("partial", file) >= 0, 1);
    assert_int_equal(fclose(file), 0);
}

/* What a killed writer leaves (an unlocked PATH.tmp.XXXXXX) goes with the
 * next successful save; a live writer's (locked) file and other names stay. */
static void test_stale_temp_files(void **state) {
    fixture_t *f = *state;
    char stale[600], live[600], other_names[3][600];
    snprintf(stale, sizeof stale, "%s.tmp.Ab3xZ9", f->path);
    snprintf(live, sizeof live, "%s.tmp.q1w2e3", f->path);
    snprintf(other_names[0], sizeof other_names[0], "%s.tmp.backup1", f->path);
    snprintf(other_names[1], sizeof other_names[1], "%s.tmp.ab-cd_", f->path);
    snprintf(other_names[2], sizeof other_names[2], "%s.tmp.Ab3xZ9", f->other);
    touch(stale);
    touch(live);
    for (int i = 0; i < 3; i++) touch(other_names[i]);
    int held = open(live, O_RDONLY);
    assert_true(held >= 0);
    assert_int_equal(flock(held, LOCK_EX), 0);

    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 1), BG_OK);
    assert_int_equal(access(stale, F_OK), -1);
    assert_int_equal(access(live, F_OK), 0);
    for (int i = 0; i < 3; i++) assert_int_equal(access(other_names[i], F_OK), 0);
    assert_int_equal(dir_count(f->dir), 5);

    /* Its writer gone, the formerly live file is stale too. */
    close(held);
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 2), BG_OK);
    assert_int_equal(access(live, F_OK), -1);
    assert_int_equal(dir_count(f->dir), 4);
    for (int i = 0; i < 3; i++) assert_int_equal(unlink(other_names[i]), 0);
    expect_loads_params(f, f->path);
}

static void test_unreadable_files(void **state) {
    fixture_t *f = *state;
    check_error(bg_checkpoint_load(f->path, f->spec, f->loaded, NULL), BG_ERR_IO, f->path, NULL);

    /* A truncated checkpoint is a parse error naming the file. */
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 1), BG_OK);
    FILE *in = fopen(f->path, "rb");
    assert_non_null(in);
    char head[100];
    assert_int_equal(fread(head, 1, sizeof head, in), sizeof head);
    fclose(in);
    FILE *out = fopen(f->other, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(head, 1, sizeof head, out), sizeof head);
    assert_int_equal(fclose(out), 0);
    check_error(bg_checkpoint_load(f->other, f->spec, f->loaded, NULL), BG_ERR_PARSE, f->other,
                NULL);

    /* Saving into a missing directory is an I/O error naming the path. */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no/such/dir/model.safetensors", f->dir);
    check_error(bg_checkpoint_save(missing, f->spec, f->params, 1), BG_ERR_IO, missing, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layernorm_tensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_model_without_fingerprint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_model_same_tensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_tensor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefixed_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_finite_tensor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extra_tensor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_dtype, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_file_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_step_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_seed_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreadable_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checksums_written, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_tensor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checksum_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_tensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_temp_files, setup, teardown),
    };
    return cmocka_run_group_tests_name("checkpoint", tests, NULL, NULL);
}
