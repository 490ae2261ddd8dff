/* Checkpoints: the model's tensors in safetensors files, with CRC-32s of
 * the header and of every tensor in the metadata (checkpoint.h). The
 * header checksum sits at a fixed place, the first value of the header, so
 * that it can cover every other byte of the header, padding included: with
 * it and the tensor checksums, any change of a single byte is detected. */
#include "checkpoint.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "byte_order.h"
#include "crc32.h"
#include "layer.h"
#include "model_words.h"
#include "safetensors.h"
#include "parse.h"

enum { NAME_CAPACITY = 32 };
enum { CRC_DIGITS = 8 };

static const char crc_placeholder[] = "00000000";

/* One parameter tensor of the model: its name, shape and offset in the flat
 * parameter vector. */
typedef struct tensor_slot {
    char name[NAME_CAPACITY];
    int ndim;
    int64_t shape[4];
    int64_t offset, count;
} tensor_slot_t;

/* Lists the model's parameter tensors in flat order; returns how many. */
static int list_tensors(const bg_model_spec_t *spec, tensor_slot_t *slots) {
    int n = 0;
    int64_t offset = 0;
    for (int i = 0; i < spec->num_layers; i++) {
        const bg_layer_spec_t *l = &spec->layers[i];
        int64_t nw, nb;
        bg_layer_param_counts(l, &nw, &nb);
        if (nw == 0) continue;
        tensor_slot_t *w = &slots[n++], *b = &slots[n++];
        snprintf(w->name, sizeof w->name, "%d.weight", i);
        snprintf(b->name, sizeof b->name, "%d.bias", i);
        if (l->kind == BG_LAYER_CONV2D) {
            w->ndim = 4;
            w->shape[0] = l->filters;
            w->shape[1] = l->in.c;
            w->shape[2] = l->kernel;
            w->shape[3] = l->kernel;
        } else if (l->kind == BG_LAYER_LAYERNORM) {
            /* nn.LayerNorm over the sample's shape: (c, h, w) or (features) */
            w->ndim = l->in_image ? 3 : 1;
            w->shape[0] = l->in.c;
            w->shape[1] = l->in.h;
            w->shape[2] = l->in.w;
        } else {
            w->ndim = 2;
            w->shape[0] = l->filters;
            w->shape[1] = bg_shape_numel(l->in);
        }
        b->ndim = 1;
        b->shape[0] = l->filters;
        if (l->kind == BG_LAYER_LAYERNORM) {
            b->ndim = w->ndim;
            memcpy(b->shape, w->shape, sizeof b->shape);
        }
        w->offset = offset;
        w->count = nw;
        b->offset = offset + nw;
        b->count = nb;
        offset += nw + nb;
    }
    return n;
}

static bg_status_t slots_create(const bg_model_spec_t *spec, tensor_slot_t **slots, int *count);

bg_status_t bg_checkpoint_model_tensors(const bg_model_spec_t *spec, bg_checkpoint_tensor_t **out,
                                        int *count) {
    tensor_slot_t *slots = NULL;
    int n = 0;
    BG_CHECK(slots_create(spec, &slots, &n));
    bg_checkpoint_tensor_t *list = calloc((size_t)n + 1, sizeof *list);
    if (list == NULL) {
        free(slots);
        return bg_error_set(BG_ERR_NOMEM, "checkpoint: out of memory");
    }
    for (int i = 0; i < n; i++) {
        memcpy(list[i].name, slots[i].name, sizeof list[i].name);
        list[i].ndim = slots[i].ndim;
        memcpy(list[i].shape, slots[i].shape, sizeof list[i].shape);
        list[i].offset = slots[i].offset;
        list[i].count = slots[i].count;
    }
    free(slots);
    *out = list;
    *count = n;
    return BG_OK;
}

static bg_status_t slots_create(const bg_model_spec_t *spec, tensor_slot_t **slots, int *count) {
    *slots = calloc((size_t)spec->num_layers * 2 + 1, sizeof **slots);
    if (*slots == NULL) return bg_error_set(BG_ERR_NOMEM, "checkpoint: out of memory");
    *count = list_tensors(spec, *slots);
    return BG_OK;
}

/* ---- checksums ---- */

/* CRC-32 of the bytes the file holds for `data`: little-endian floats. */
static uint32_t crc32_floats(const float *data, uint64_t size) {
    uint32_t crc = bg_crc32_start();
    if (bg_host_is_little_endian()) return bg_crc32_update(crc, (const uint8_t *)data, size);
    uint8_t chunk[4096];
    const uint8_t *src = (const uint8_t *)data;
    while (size > 0) {
        size_t n = size < sizeof chunk ? (size_t)size : sizeof chunk;
        bg_f32_le_copy(chunk, src, n);
        crc = bg_crc32_update(crc, chunk, n);
        src += n;
        size -= n;
    }
    return crc;
}

/* Exactly 8 lowercase hex digits, as the writer prints them. */
static bool crc_parse(const char *text, uint32_t *value) {
    uint32_t v = 0;
    for (int i = 0; i < CRC_DIGITS; i++) {
        char c = text[i];
        int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (digit < 0) return false;
        v = v << 4 | (uint32_t)digit;
    }
    if (text[CRC_DIGITS] != '\0' && text[CRC_DIGITS] != '"') return false;
    *value = v;
    return true;
}

static bool has_prefix(const char *text, const char *prefix) {
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* The header checksum: CRC-32 of header[0, size) with the 8 digits at
 * `digits` read as zeros. */
static uint32_t header_crc(const uint8_t *header, size_t size, size_t digits) {
    uint32_t crc = bg_crc32_start();
    crc = bg_crc32_update(crc, header, digits);
    crc = bg_crc32_update(crc, (const uint8_t *)crc_placeholder, CRC_DIGITS);
    return bg_crc32_update(crc, header + digits + CRC_DIGITS, size - digits - CRC_DIGITS);
}

/* Where the header checksum's digits sit in a file brigade wrote. */
static size_t header_crc_offset(void) { return 8 + strlen(BG_CHECKPOINT_HEADER_START); }

bg_status_t bg_checkpoint_save_tensors(const char *path, const bg_safetensors_tensor_t *tensors,
                                       int count, const char *const *metadata_keys,
                                       const char *const *metadata_values, int metadata_count) {
    if (!path || path[0] == '\0' || count < 0 || (count > 0 && !tensors) || metadata_count < 0 ||
        (metadata_count > 0 && (!metadata_keys || !metadata_values)) ||
        count > INT_MAX - 1 - metadata_count)
        return bg_error_set(BG_ERR_INVALID, "%s: bg_checkpoint_save_tensors: invalid arguments",
                            path ? path : "(null)");
    for (int i = 0; i < metadata_count; i++) {
        const char *key = metadata_keys[i];
        if (key && (strcmp(key, BG_CHECKPOINT_HEADER_CRC_KEY) == 0 ||
                    has_prefix(key, BG_CHECKPOINT_TENSOR_CRC_KEY)))
            return bg_error_set(BG_ERR_INVALID, "%s: metadata key '%s' is reserved for checksums",
                                path, key);
    }
    for (int i = 0; i < count; i++)
        if (!tensors[i].name)
            return bg_error_set(BG_ERR_INVALID, "%s: tensor %d has no name", path, i);

    bg_status_t st = BG_OK;
    int total = 1 + metadata_count + count;
    const char **keys = calloc((size_t)total, sizeof *keys);
    const char **values = calloc((size_t)total, sizeof *values);
    char **crc_keys = calloc((size_t)count + 1, sizeof *crc_keys);
    char(*digits)[CRC_DIGITS + 1] = calloc((size_t)count + 1, sizeof *digits);
    uint8_t *header = NULL;
    size_t header_size = 0;
    BG_ALLOC_CHECK_GOTO(keys, st, done);
    BG_ALLOC_CHECK_GOTO(values, st, done);
    BG_ALLOC_CHECK_GOTO(crc_keys, st, done);
    BG_ALLOC_CHECK_GOTO(digits, st, done);
    /* The header checksum first: it must open the header (checkpoint.h). */
    keys[0] = BG_CHECKPOINT_HEADER_CRC_KEY;
    values[0] = crc_placeholder;
    for (int i = 0; i < metadata_count; i++) {
        keys[1 + i] = metadata_keys[i];
        values[1 + i] = metadata_values[i];
    }
    for (int i = 0; i < count; i++) {
        size_t len = strlen(BG_CHECKPOINT_TENSOR_CRC_KEY) + strlen(tensors[i].name) + 1;
        crc_keys[i] = malloc(len);
        BG_ALLOC_CHECK_GOTO(crc_keys[i], st, done);
        snprintf(crc_keys[i], len, "%s%s", BG_CHECKPOINT_TENSOR_CRC_KEY, tensors[i].name);
        keys[1 + metadata_count + i] = crc_keys[i];
        values[1 + metadata_count + i] = crc_placeholder;
    }
    /* A first encoding checks every argument (names, shapes, data, UTF-8)
     * before the data is read for its checksums. */
    BG_CHECK_GOTO(bg_safetensors_header_encode(path, tensors, count, keys, values, total, &header,
                                               &header_size),
                  st, done);
    free(header);
    header = NULL;
    for (int i = 0; i < count; i++) {
        uint64_t size = sizeof(float);
        for (int d = 0; d < tensors[i].ndim; d++) size *= (uint64_t)tensors[i].shape[d];
        snprintf(digits[i], sizeof digits[i], "%08" PRIx32,
                 size ? crc32_floats(tensors[i].data, size) : bg_crc32_start());
        values[1 + metadata_count + i] = digits[i];
    }
    BG_CHECK_GOTO(bg_safetensors_header_encode(path, tensors, count, keys, values, total, &header,
                                               &header_size),
                  st, done);
    size_t at = header_crc_offset();
    if (header_size < at + CRC_DIGITS ||
        memcmp(header + 8, BG_CHECKPOINT_HEADER_START, at - 8) != 0) {
        st = bg_error_set(BG_ERR_INTERNAL, "%s: the encoded header does not start with %s", path,
                          BG_CHECKPOINT_HEADER_START);
        goto done;
    }
    char crc_text[CRC_DIGITS + 1];
    snprintf(crc_text, sizeof crc_text, "%08" PRIx32, header_crc(header, header_size, at));
    memcpy(header + at, crc_text, CRC_DIGITS);
    st = bg_safetensors_write_encoded(path, header, header_size, tensors, count);

done:
    free(header);
    if (crc_keys)
        for (int i = 0; i < count; i++) free(crc_keys[i]);
    free(crc_keys);
    free(digits);
    free(values);
    free(keys);
    return st;
}

/* A tensor checksum from the metadata: the tensor's name and the value. */
typedef struct named_crc {
    const char *name;
    const char *text;
} named_crc_t;

static int named_crc_compare(const void *a, const void *b) {
    return strcmp(((const named_crc_t *)a)->name, ((const named_crc_t *)b)->name);
}

static bg_status_t header_verify(const char *name, const bg_safetensors_t *file) {
    const char *value = bg_safetensors_metadata(file, BG_CHECKPOINT_HEADER_CRC_KEY);
    if (!value)
        return bg_error_set(
            BG_ERR_PARSE,
            "%s: brigade checkpoint without a header checksum "
            "(" BG_CHECKPOINT_HEADER_CRC_KEY "): corrupt, written before brigade "
            "had checksums, or rewritten by a tool that kept the brigade.* metadata",
            name);
    size_t at = header_crc_offset();
    uint32_t expected;
    /* The checksum key there, but not where brigade writes it: a header
     * written again by another tool (Python's json reorders or spaces
     * it), likelier than damage that kept the JSON whole. */
    if (file->header != NULL && file->header_size >= at + CRC_DIGITS + 1 &&
        memcmp(file->header + 8, BG_CHECKPOINT_HEADER_START, at - 8) != 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header is not as brigade writes it (starting with %sXXXXXXXX\", "
                            "8 lowercase hex digits): rewritten by a tool that kept the "
                            "brigade.* metadata, or corrupt; without the brigade.* keys it loads "
                            "as another tool's file",
                            name, BG_CHECKPOINT_HEADER_START);
    if (!file->header || file->header_size < at + CRC_DIGITS + 1 ||
        !crc_parse((const char *)file->header + at, &expected) ||
        strncmp(value, (const char *)file->header + at, CRC_DIGITS) != 0 ||
        value[CRC_DIGITS] != '\0')
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header is corrupt: a brigade checkpoint starts with "
                            "%sXXXXXXXX\" (8 lowercase hex digits)",
                            name, BG_CHECKPOINT_HEADER_START);
    uint32_t actual = header_crc(file->header, (size_t)file->header_size, at);
    if (actual != expected)
        return bg_error_set(
            BG_ERR_PARSE, "%s: header is corrupt (checksum %08" PRIx32 ", expected %08" PRIx32 ")",
            name, actual, expected);
    return BG_OK;
}

/* Every tensor has a checksum and every checksum a tensor; both lists go
 * in name order, so this is O(n log n) for files with many tensors. */
static bg_status_t tensors_verify(const char *name, const bg_safetensors_t *file) {
    bg_status_t st = BG_OK;
    size_t prefix_len = strlen(BG_CHECKPOINT_TENSOR_CRC_KEY);
    int crc_count = 0;
    named_crc_t *crcs = calloc((size_t)file->metadata_count + 1, sizeof *crcs);
    BG_ALLOC_CHECK_GOTO(crcs, st, done);
    for (int i = 0; i < file->metadata_count; i++) {
        if (!has_prefix(file->metadata_keys[i], BG_CHECKPOINT_TENSOR_CRC_KEY)) continue;
        crcs[crc_count].name = file->metadata_keys[i] + prefix_len;
        crcs[crc_count].text = file->metadata_values[i];
        crc_count++;
    }
    qsort(crcs, (size_t)crc_count, sizeof *crcs, named_crc_compare);
    int c = 0;
    for (int i = 0; i < file->count; i++) {
        const bg_safetensors_entry_t *e = file->by_name[i];            /* in name order */
        if (c < crc_count && strcmp(crcs[c].name, e->name) < 0) break; /* orphan, below */
        if (c == crc_count || strcmp(crcs[c].name, e->name) != 0) {
            st = bg_error_set(BG_ERR_PARSE,
                              "%s: tensor '%s' has no checksum (" BG_CHECKPOINT_TENSOR_CRC_KEY
                              "%s) in a brigade checkpoint",
                              name, e->name, e->name);
            goto done;
        }
        uint32_t expected;
        if (strlen(crcs[c].text) != CRC_DIGITS || !crc_parse(crcs[c].text, &expected)) {
            st = bg_error_set(BG_ERR_PARSE,
                              "%s: tensor '%s': checksum '%s' is not 8 lowercase hex digits", name,
                              e->name, crcs[c].text);
            goto done;
        }
        uint32_t actual =
            bg_crc32_update(bg_crc32_start(), file->data + e->begin, e->end - e->begin);
        if (actual != expected) {
            st = bg_error_set(BG_ERR_PARSE,
                              "%s: tensor '%s' is corrupt (checksum %08" PRIx32
                              ", expected %08" PRIx32 ")",
                              name, e->name, actual, expected);
            goto done;
        }
        c++;
    }
    if (c < crc_count)
        st =
            bg_error_set(BG_ERR_PARSE, "%s: checksum for tensor '%s', which the file does not hold",
                         name, crcs[c].name);
done:
    free(crcs);
    return st;
}

bg_status_t bg_checkpoint_verify(const char *name, const bg_safetensors_t *file) {
    if (!file) return bg_error_set(BG_ERR_INVALID, "bg_checkpoint_verify: NULL file");
    if (!name) name = "<memory>";
    bool brigade = false;
    for (int i = 0; i < file->metadata_count && !brigade; i++)
        brigade = has_prefix(file->metadata_keys[i], BG_CHECKPOINT_METADATA_PREFIX);
    if (!brigade) return BG_OK;
    BG_CHECK(header_verify(name, file));
    /* The fingerprint as brigade writes it, or the file is told as another
     * model's (until 2026-12-05 an upper-cased one was). */
    const char *model = bg_safetensors_metadata(file, "brigade.model");
    size_t digits = 0;
    while (model != NULL && ((model[digits] >= '0' && model[digits] <= '9') ||
                             (model[digits] >= 'a' && model[digits] <= 'f')))
        digits++;
    if (model != NULL && (digits != 16 || model[digits] != '\0'))
        return bg_error_set(BG_ERR_PARSE,
                            "%s: metadata 'brigade.model' is '%.40s%s', not a model fingerprint "
                            "(16 lowercase hex digits)",
                            name, model, strlen(model) > 40 ? "..." : "");
    /* A kind brigade did not write, forged or from a later brigade: until
     * 2026-12-06 it read as a file of weights. */
    const char *kind = bg_safetensors_metadata(file, "brigade.kind");
    if (kind != NULL && strcmp(kind, "training-state") != 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: metadata 'brigade.kind' is '%.40s%s', not one brigade writes "
                            "('training-state' in a training state; a file of weights has none)",
                            name, kind, strlen(kind) > 40 ? "..." : "");
    return tensors_verify(name, file);
}

bg_status_t bg_checkpoint_read(const char *path, bg_safetensors_t **out) {
    if (!path || !out) return bg_error_set(BG_ERR_INVALID, "bg_checkpoint_read: NULL argument");
    bg_safetensors_t *file = NULL;
    BG_CHECK(bg_safetensors_load(path, &file));
    bg_status_t st = bg_checkpoint_verify(path, file);
    if (st != BG_OK) {
        bg_safetensors_destroy(file);
        return st;
    }
    *out = file;
    return BG_OK;
}

/* ---- the model's parameters ---- */

bg_status_t bg_checkpoint_save(const char *path, const bg_model_spec_t *spec, const float *params,
                               int64_t step) {
    tensor_slot_t *slots = NULL;
    int count = 0;
    BG_CHECK(slots_create(spec, &slots, &count));
    bg_safetensors_tensor_t *tensors = calloc((size_t)count + 1, sizeof *tensors);
    if (tensors == NULL) {
        free(slots);
        return bg_error_set(BG_ERR_NOMEM, "checkpoint: out of memory");
    }
    for (int i = 0; i < count; i++) {
        tensors[i].name = slots[i].name;
        tensors[i].ndim = slots[i].ndim;
        memcpy(tensors[i].shape, slots[i].shape, sizeof slots[i].shape);
        tensors[i].data = params + slots[i].offset;
    }
    char fingerprint[32], steps[32];
    snprintf(fingerprint, sizeof fingerprint, "%016" PRIx64, spec->fingerprint);
    snprintf(steps, sizeof steps, "%" PRId64, step);
    char *layers = bg_model_spec_words(spec);
    bg_status_t st;
    if (layers == NULL) {
        st = bg_error_set(BG_ERR_NOMEM, "checkpoint: out of memory");
    } else {
        const char *keys[] = {"format", "brigade.model", "brigade.layers", "brigade.step"};
        const char *values[] = {"pt", fingerprint, layers, steps};
        st = bg_checkpoint_save_tensors(path, tensors, count, keys, values, 4);
    }
    free(layers);
    free(tensors);
    free(slots);
    return st;
}

bg_status_t bg_checkpoint_check_entry(const char *path, const bg_safetensors_entry_t *e,
                                      const char *name, int ndim, const int64_t *shape) {
    if (strcmp(e->dtype, "F32") != 0)
        return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' is %s; brigade needs F32", path, name,
                            e->dtype);
    int same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = e->shape[d] == shape[d];
    if (!same) {
        char want[96] = "", got[96] = "";
        for (int d = 0; d < ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? ", " : "",
                     (long long)shape[d]);
        for (int d = 0; d < e->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
                     (long long)e->shape[d]);
        return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' has shape [%s]; the model needs [%s]",
                            path, name, got, want);
    }
    return BG_OK;
}

/* Orders pointers to slots by their tensors' names. */
static int slot_pointer_compare(const void *a, const void *b) {
    return strcmp((*(const tensor_slot_t *const *)a)->name,
                  (*(const tensor_slot_t *const *)b)->name);
}

bool bg_checkpoint_other_model(const bg_safetensors_t *file, const bg_model_spec_t *spec,
                               bg_checkpoint_info_t *info) {
    info->other_model[0] = info->difference[0] = '\0';
    char own[20];
    snprintf(own, sizeof own, "%016" PRIx64, spec->fingerprint);
    const char *fingerprint = bg_safetensors_metadata(file, "brigade.model");
    if (fingerprint == NULL || strcmp(fingerprint, own) == 0) return false;
    /* 16 digits (bg_checkpoint_verify); cut there all the same. */
    snprintf(info->other_model, sizeof info->other_model, "%.16s", fingerprint);
    const char *layers = bg_safetensors_metadata(file, "brigade.layers");
    if (layers != NULL)
        bg_model_spec_difference(spec, layers, info->difference, sizeof info->difference);
    return true;
}

/* Where the file names a missing tensor `name` with a prefix (a wrapped
 * PyTorch model saves "model.0.weight" for "0.weight"), "; the file's
 * names carry a prefix: it has 'model.0.weight'" into out, else "". */
static const char *prefixed_hint(const bg_safetensors_t *st_file, const char *name, char *out,
                                 size_t size) {
    const size_t length = strlen(name);
    out[0] = '\0';
    for (int i = 0; i < st_file->count; i++) {
        const char *other = st_file->entries[i].name;
        const size_t other_length = strlen(other);
        if (other_length > length + 1 && other[other_length - length - 1] == '.' &&
            strcmp(other + other_length - length, name) == 0) {
            snprintf(out, size, "; the file's names carry a prefix: it has '%s'", other);
            break;
        }
    }
    return out;
}

/* Copies the model's tensors out of a verified file. Lookups go through
 * name-sorted arrays: a model may have 200,000 tensors. */
static bg_status_t params_take(const char *path, const bg_safetensors_t *st_file,
                               const bg_model_spec_t *spec, float *params,
                               bg_checkpoint_info_t *info) {
    tensor_slot_t *slots = NULL;
    const tensor_slot_t **sorted_slots = NULL;
    int count = 0;
    bg_status_t st;
    bg_checkpoint_info_t found_info = {0};
    char own[20];
    snprintf(own, sizeof own, "%016" PRIx64, spec->fingerprint);
    bg_checkpoint_other_model(st_file, spec, &found_info);
    int mismatch = 0; /* a tensor missing, of another shape, or not the model's */
    BG_CHECK_GOTO(slots_create(spec, &slots, &count), st, done);
    sorted_slots = calloc((size_t)count + 1, sizeof *sorted_slots);
    BG_ALLOC_CHECK_GOTO(sorted_slots, st, done);
    for (int i = 0; i < count; i++) {
        const bg_safetensors_entry_t *found = bg_safetensors_find(st_file, slots[i].name);
        if (found == NULL) {
            char hint[320];
            st = bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' is missing%s", path, slots[i].name,
                              prefixed_hint(st_file, slots[i].name, hint, sizeof hint));
            mismatch = 1;
            goto done;
        }
        mismatch = 1; /* until its dtype and shape are the model's */
        BG_CHECK_GOTO(
            bg_checkpoint_check_entry(path, found, slots[i].name, slots[i].ndim, slots[i].shape),
            st, done);
        mismatch = 0;
        bg_f32_le_copy(params + slots[i].offset, st_file->data + found->begin,
                       sizeof(float) * (size_t)slots[i].count);
        BG_CHECK_GOTO(bg_checkpoint_check_finite(path, slots[i].name, params + slots[i].offset,
                                                 slots[i].count),
                      st, done);
    }
    /* Names are unique on both sides, so equal counts mean equal sets. */
    if (st_file->count != count) {
        for (int i = 0; i < count; i++) sorted_slots[i] = &slots[i];
        qsort(sorted_slots, (size_t)count, sizeof *sorted_slots, slot_pointer_compare);
        for (int k = 0; k < st_file->count; k++) {
            tensor_slot_t key_slot;
            snprintf(key_slot.name, sizeof key_slot.name, "%s", st_file->entries[k].name);
            const tensor_slot_t *key = &key_slot;
            /* A training-state checkpoint also holds the optimizer's state
             * (scheduler/train_state.h); loading weights leaves it aside. */
            bool known = strncmp(st_file->entries[k].name, "optimizer.", 10) == 0 ||
                         (strlen(st_file->entries[k].name) < sizeof key_slot.name &&
                          bsearch(&key, sorted_slots, (size_t)count, sizeof *sorted_slots,
                                  slot_pointer_compare) != NULL);
            if (!known) {
                st = bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' is not part of this model", path,
                                  st_file->entries[k].name);
                mismatch = 1;
                goto done;
            }
        }
    }
    {
        const char *text = bg_safetensors_metadata(st_file, "brigade.step");
        if (text != NULL) {
            uint64_t value;
            if (!bg_parse_digits(text, strlen(text), INT64_MAX, &value)) {
                st = bg_error_set(BG_ERR_PARSE, "%s: brigade.step is '%s', not a step count", path,
                                  text);
                goto done;
            }
            found_info.step = (int64_t)value;
            const char *kind = bg_safetensors_metadata(st_file, "brigade.kind");
            found_info.training_state = kind != NULL && strcmp(kind, "training-state") == 0;
        }
        /* --load takes it for synthetic data without --seed: one that is
         * there but no seed is refused, as --resume refuses it
         * (train_state.c), not passed over for the default (until
         * 2026-12-05 the weights then met other data, said nowhere). */
        const char *seed = bg_safetensors_metadata(st_file, "brigade.seed");
        found_info.seed_saved = seed != NULL;
        if (seed != NULL && !bg_parse_digits(seed, strlen(seed), UINT64_MAX, &found_info.seed)) {
            st =
                bg_error_set(BG_ERR_PARSE,
                             "%s: metadata 'brigade.seed' is '%s', not a whole number", path, seed);
            goto done;
        }
    }
    if (info != NULL) *info = found_info;
    st = BG_OK;
done:
    /* Tensors that are not this model's, in a file of another model: say
     * so, the likelier mistake than a damaged file. */
    if (mismatch && found_info.other_model[0] != '\0') {
        /* Residual blocks number their ends: a block added or removed
         * renames every layer after it. */
        int blocks = 0;
        for (int i = 0; i < spec->num_layers && !blocks; i++)
            blocks = spec->layers[i].kind == BG_LAYER_RESIDUAL;
        st = bg_error_suffix(st,
                             " (the file holds another model: fingerprint %s, this model's is "
                             "%s%s%s%s)",
                             found_info.other_model, own, found_info.difference[0] ? "; " : "",
                             found_info.difference,
                             blocks ? "; residual, shortcut and add layers take numbers too, so a "
                                      "block added or removed renames the layers after it"
                                    : "");
    }
    free(sorted_slots);
    free(slots);
    return st;
}

int bg_checkpoint_describe_nonfinite(const char *name, const float *values, int64_t count,
                                     char *buf, size_t size) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(values[i]) && bad++ == 0) first = i;
    buf[0] = '\0';
    if (bad == 0) return 0;
    snprintf(buf, size,
             "tensor '%s' holds %lld non-finite value%s (NaN or infinity; the first at element "
             "%lld)",
             name, (long long)bad, bad == 1 ? "" : "s", (long long)first);
    return 1;
}

bg_status_t bg_checkpoint_check_finite(const char *path, const char *name, const float *values,
                                       int64_t count) {
    char what[BG_ERROR_MAX];
    if (!bg_checkpoint_describe_nonfinite(name, values, count, what, sizeof what)) return BG_OK;
    return bg_error_set(BG_ERR_INVALID, "%s: %s: a run cannot start from it", path, what);
}

bg_status_t bg_checkpoint_load(const char *path, const bg_model_spec_t *spec, float *params,
                               bg_checkpoint_info_t *info) {
    if (!path || !spec || (!params && spec->total_params > 0))
        return bg_error_set(BG_ERR_INVALID, "bg_checkpoint_load: NULL argument");
    bg_safetensors_t *file = NULL;
    BG_CHECK(bg_checkpoint_read(path, &file));
    bg_status_t st = params_take(path, file, spec, params, info);
    bg_safetensors_destroy(file);
    return st;
}

bg_status_t bg_checkpoint_parse(const char *name, const uint8_t *bytes, size_t size,
                                const bg_model_spec_t *spec, float *params,
                                bg_checkpoint_info_t *info) {
    if (!name) name = "<memory>";
    if (!spec || (!params && spec->total_params > 0))
        return bg_error_set(BG_ERR_INVALID, "%s: bg_checkpoint_parse: NULL argument", name);
    bg_safetensors_t *file = NULL;
    BG_CHECK(bg_safetensors_parse(name, bytes, size, &file));
    bg_status_t st = bg_checkpoint_verify(name, file);
    if (st == BG_OK) st = params_take(name, file, spec, params, info);
    bg_safetensors_destroy(file);
    return st;
}
