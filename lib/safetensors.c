/* safetensors reader. The header is untrusted input (checkpoints are
 * downloaded and shared), so every field is validated before any offset is
 * used, and the data must be tiled exactly by the tensors. The writer is
 * safetensors_write.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup, O_CLOEXEC */
#endif

#include "safetensors.h"
#include "json_depth.h"
#include "regular_file.h"
#include "safetensors_impl.h"
#include "utf8.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char bg_safetensors_metadata_key[] = "__metadata__";

typedef struct dtype_info {
    const char *name;
    uint64_t size;
} dtype_info_t;

static const dtype_info_t dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8},
};

/* Bytes per element, or 0 for a dtype this reader does not know. */
static uint64_t dtype_size(const char *name) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0) return dtypes[i].size;
    return 0;
}

static bool json_integer(const cJSON *item, uint64_t *value) {
    if (!cJSON_IsNumber(item)) return false;
    double d = item->valuedouble;
    if (!(d >= 0.0 && d < (double)BG_SAFETENSORS_EXACT_LIMIT)) return false;
    uint64_t v = (uint64_t)d;
    if ((double)v != d) return false;
    *value = v;
    return true;
}

/* Why json_integer refused `item`, for a message (a sign or a fraction
 * is named before, where it stands in the header). */
static const char *integer_problem(const cJSON *item) {
    if (!cJSON_IsNumber(item)) return "is not a number";
    if (item->valuedouble >= (double)BG_SAFETENSORS_EXACT_LIMIT)
        return "is 2^53 or more, past what brigade reads exactly";
    return "is not a non-negative integer";
}

static void shape_format(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

static int string_pointer_compare(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts `names` in place; returns a name that occurs twice, or NULL. Sorting
 * keeps this O(n log n) for headers with millions of keys. */
const char *bg_safetensors_names_find_duplicate(const char **names, size_t count) {
    if (count < 2) return NULL;
    qsort(names, count, sizeof *names, string_pointer_compare);
    for (size_t i = 1; i < count; i++)
        if (strcmp(names[i - 1], names[i]) == 0) return names[i];
    return NULL;
}

/* Orders pointers to entries by the entries' names. */
static int entry_name_compare(const void *a, const void *b) {
    return strcmp((*(const bg_safetensors_entry_t *const *)a)->name,
                  (*(const bg_safetensors_entry_t *const *)b)->name);
}

int bg_safetensors_entry_compare(const void *a, const void *b) {
    const bg_safetensors_entry_t *x = a, *y = b;
    /* Zero-size tensors sort before the tensor starting at the same byte,
     * so they tile; names break remaining ties for a stable order. */
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bg_status_t entry_parse(const char *name, const cJSON *item, uint64_t data_size, int in_file,
                               bg_safetensors_entry_t *entry) {
    const char *tensor = item->string;
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    if (!cJSON_IsObject(item))
        return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': entry is not a JSON object", name,
                            tensor);
    for (const cJSON *field = item->child; field; field = field->next) {
        const cJSON **slot;
        if (strcmp(field->string, "dtype") == 0) {
            slot = &dtype;
        } else if (strcmp(field->string, "shape") == 0) {
            slot = &shape;
        } else if (strcmp(field->string, "data_offsets") == 0) {
            slot = &offsets;
        } else {
            return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': unexpected field '%s'", name,
                                tensor, field->string);
        }
        if (*slot)
            return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': duplicate field '%s'", name, tensor,
                                field->string);
        *slot = field;
    }
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !offsets ? "data_offsets" : NULL;
    if (missing)
        return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': missing field '%s'", name, tensor,
                            missing);

    if (!cJSON_IsString(dtype))
        return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': dtype is not a string", name, tensor);
    uint64_t element_size = dtype_size(dtype->valuestring);
    if (element_size == 0)
        return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': unknown dtype '%s'", name, tensor,
                            dtype->valuestring);

    if (!cJSON_IsArray(shape))
        return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': shape is not an array", name, tensor);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > BG_SAFETENSORS_MAX_DIMS)
        return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': shape has %d dims, more than %d", name,
                            tensor, ndim, BG_SAFETENSORS_MAX_DIMS);
    int64_t dims[BG_SAFETENSORS_MAX_DIMS];
    bool any_zero = false;
    int d = 0;
    for (const cJSON *dim = shape->child; dim; dim = dim->next, d++) {
        uint64_t value;
        if (!json_integer(dim, &value))
            return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': shape[%d] %s", name, tensor, d,
                                integer_problem(dim));
        dims[d] = (int64_t)value;
        any_zero = any_zero || value == 0;
    }
    /* Overflow only matters when no dim is zero: [2^40, 2^40, 0] is empty. */
    bool overflow = false;
    uint64_t bytes = any_zero ? 0 : element_size;
    for (int k = 0; k < ndim && !any_zero; k++) {
        uint64_t value = (uint64_t)dims[k];
        if (bytes > UINT64_MAX / value)
            overflow = true;
        else
            bytes *= value;
    }

    uint64_t begin, end;
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: tensor '%s': data_offsets is not a pair of non-negative integers",
                            name, tensor);
    for (const cJSON *at = offsets->child; at != NULL; at = at->next)
        if (!json_integer(at, at == offsets->child ? &begin : &end))
            return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': data_offsets[%d] %s", name, tensor,
                                at == offsets->child ? 0 : 1, integer_problem(at));
    if (begin > end)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] end before they begin",
                            name, tensor, begin, end);
    if (end > data_size)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] exceed the %" PRIu64 " bytes of data%s",
                            name, tensor, begin, end, data_size,
                            in_file ? " after the header, where the file ends: is it cut short?"
                                    : "");
    char shape_text[256];
    shape_format(shape_text, sizeof shape_text, dims, ndim);
    if (overflow)
        return bg_error_set(BG_ERR_PARSE, "%s: tensor '%s': shape %s of %s overflows 64 bits", name,
                            tensor, shape_text, dtype->valuestring);
    if (end - begin != bytes)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] do not match shape %s of %s (%" PRIu64 " bytes)",
                            name, tensor, begin, end, shape_text, dtype->valuestring, bytes);

    entry->name = strdup(tensor);
    if (!entry->name)
        return bg_error_set(BG_ERR_NOMEM, "%s: tensor '%s': out of memory", name, tensor);
    snprintf(entry->dtype, sizeof entry->dtype, "%s", dtype->valuestring);
    entry->ndim = ndim;
    memcpy(entry->shape, dims, (size_t)ndim * sizeof dims[0]);
    entry->begin = begin;
    entry->end = end;
    return BG_OK;
}

static bg_status_t metadata_parse(const char *name, const cJSON *object, bg_safetensors_t *file) {
    if (!cJSON_IsObject(object))
        return bg_error_set(BG_ERR_PARSE, "%s: %s is not a JSON object", name,
                            bg_safetensors_metadata_key);
    int count = cJSON_GetArraySize(object);
    size_t slots = count > 0 ? (size_t)count : 1;
    file->metadata_keys = calloc(slots, sizeof *file->metadata_keys);
    file->metadata_values = calloc(slots, sizeof *file->metadata_values);
    if (!file->metadata_keys || !file->metadata_values)
        return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for metadata", name);
    for (const cJSON *item = object->child; item; item = item->next) {
        if (!cJSON_IsString(item))
            return bg_error_set(BG_ERR_PARSE, "%s: metadata '%s' is not a string", name,
                                item->string);
        int i = file->metadata_count++;
        file->metadata_keys[i] = strdup(item->string);
        file->metadata_values[i] = strdup(item->valuestring);
        if (!file->metadata_keys[i] || !file->metadata_values[i])
            return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for metadata", name);
    }
    /* The metadata keys are copies, so sorting their pointers is harmless. */
    const char **keys = malloc(slots * sizeof *keys);
    if (!keys) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for metadata", name);
    memcpy(keys, file->metadata_keys, (size_t)file->metadata_count * sizeof *keys);
    const char *duplicate = bg_safetensors_names_find_duplicate(keys, (size_t)file->metadata_count);
    bg_status_t status = BG_OK;
    if (duplicate)
        status = bg_error_set(BG_ERR_PARSE, "%s: duplicate metadata key '%s'", name, duplicate);
    free(keys);
    return status;
}

/* Checks that the entries, sorted by begin, cover [0, data_size) with no
 * gap and no overlap: an unclaimed byte hides data, a shared one aliases. */
static bg_status_t entries_check_tiling(const char *name, const bg_safetensors_t *file) {
    uint64_t expected = 0;
    for (int i = 0; i < file->count; i++) {
        const bg_safetensors_entry_t *e = &file->entries[i];
        if (e->begin > expected)
            return bg_error_set(BG_ERR_PARSE,
                                "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                                "] leave a gap: bytes [%" PRIu64 ", %" PRIu64
                                ") belong to no tensor",
                                name, e->name, e->begin, e->end, expected, e->begin);
        if (e->begin < expected)
            return bg_error_set(BG_ERR_PARSE,
                                "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                                "] overlap tensor '%s' [%" PRIu64 ", %" PRIu64 "]",
                                name, e->name, e->begin, e->end, file->entries[i - 1].name,
                                file->entries[i - 1].begin, file->entries[i - 1].end);
        expected = e->end;
    }
    if (expected != file->data_size)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: bytes [%" PRIu64 ", %" PRIu64 ") of the data belong to no tensor",
                            name, expected, file->data_size);
    return BG_OK;
}

/* A fault of the header's text (text_fault_at). */
typedef enum text_fault {
    STRING_ESCAPED_NUL, /* "\u0000": cJSON decodes it to a NUL that cuts its C
                           string short, so "1.weight\u0000zz" would read as
                           "1.weight" */
    STRING_CONTROL,     /* a raw control character, which JSON writes escaped
                           and cJSON lets through */
    OUTSIDE_CONTROL,    /* a control character between tokens other than JSON's
                           white space (tab, CR, LF), which cJSON skips as
                           white space */
} text_fault_t;

/* Offset of the first fault of the JSON text s[0..len), its kind in
 * *fault; or len. */
static size_t text_fault_at(const char *s, size_t len, text_fault_t *fault) {
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (s[i] == '"') {
            in_string = !in_string;
        } else if (c < 0x20 && (in_string || (c != '\t' && c != '\n' && c != '\r'))) {
            *fault = in_string ? STRING_CONTROL : OUTSIDE_CONTROL;
            return i;
        } else if (in_string && s[i] == '\\' && i + 1 < len) {
            if (i + 5 < len && memcmp(s + i + 1, "u0000", 5) == 0) {
                *fault = STRING_ESCAPED_NUL;
                return i;
            }
            i++; /* the escaped character, a quote perhaps */
        }
    }
    return len;
}

/* Offset of the first number of the JSON text s[0..len), outside strings,
 * written otherwise than as a plain non-negative integer ("2.0", "8e0",
 * "-0", "08"), its length in *length; or len. Every number of a header is
 * a shape's dimension or a data offset, which safetensors writes as plain
 * integers and its own reader refuses in any other form; cJSON gives only
 * the value, so these are read from the text, after the metadata's check
 * (a number there is no string) and before the entries'. */
static size_t non_integer_number_at(const char *s, size_t len, size_t *length) {
    int in_string = 0;
    /* Whether each open container is an array: only a number in one is a
     * shape's or an offset's (a dtype of 1.5 is said to be no string by the
     * entry's check). Deeper than the stack, taken as an array. */
    char in_array[1024];
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"') {
            in_string = !in_string;
        } else if (in_string && s[i] == '\\') {
            i++;
        } else if (!in_string && (s[i] == '[' || s[i] == '{')) {
            if (depth < (int)sizeof in_array) in_array[depth] = s[i] == '[';
            depth++;
        } else if (!in_string && (s[i] == ']' || s[i] == '}')) {
            if (depth > 0) depth--;
        } else if (!in_string && (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) &&
                   (depth > (int)sizeof in_array || (depth > 0 && in_array[depth - 1]))) {
            size_t j = i;
            int plain = 1;
            for (; j < len && ((s[j] >= '0' && s[j] <= '9') || s[j] == '+' || s[j] == '-' ||
                               s[j] == '.' || s[j] == 'e' || s[j] == 'E');
                 j++)
                if (s[j] < '0' || s[j] > '9') plain = 0;
            if (!plain || (s[i] == '0' && j - i > 1)) {
                *length = j - i;
                return i;
            }
            i = j - 1;
        }
    }
    return len;
}

/* Builds everything but the data from the header text, which must be
 * followed by a NUL at json[json_len]: released cJSON versions read one
 * byte past the given length on truncated input (DaveGamble/cJSON#800), and
 * the NUL makes that byte ours and harmless. */
bg_status_t bg_safetensors_header_parse(const char *name, const char *json, size_t json_len,
                                        uint64_t data_size, int in_file, bg_safetensors_t **out) {
    bg_status_t status = BG_OK;
    cJSON *root = NULL;
    const char **keys = NULL;
    bg_safetensors_t *file = NULL;

    /* A NUL would cut cJSON's C strings short; a writer that pads with
     * them rather than spaces is the likely cause. */
    const char *nul = memchr(json, '\0', json_len);
    if (nul != NULL)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header byte %zu is a NUL byte (a header is JSON text, padded with "
                            "spaces)",
                            name, (size_t)(nul - json));
    /* The format requires UTF-8, and Python's loader refuses anything else. */
    size_t bad = bg_utf8_invalid_at(json, json_len);
    if (bad < json_len)
        return bg_error_set(BG_ERR_PARSE, "%s: header is not valid UTF-8 (header byte %zu)", name,
                            bad);
    text_fault_t fault = STRING_CONTROL;
    bad = text_fault_at(json, json_len, &fault);
    if (bad < json_len && fault == STRING_ESCAPED_NUL)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header holds an escaped NUL (\\u0000) in a string (header byte "
                            "%zu); no name or value may hold one",
                            name, bad);
    if (bad < json_len && fault == STRING_CONTROL)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header byte %zu is a control character (0x%02x) inside a string, "
                            "which JSON writes escaped",
                            name, bad, (unsigned)(unsigned char)json[bad]);
    if (bad < json_len)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header byte %zu is a control character (0x%02x), which JSON "
                            "holds only escaped inside a string",
                            name, bad, (unsigned)(unsigned char)json[bad]);
    /* The format's own words: the header begins with '{'. */
    if (json_len >= 3 && memcmp(json, "\xef\xbb\xbf", 3) == 0)
        return bg_error_set(
            BG_ERR_PARSE, "%s: header begins with a byte order mark; it must begin with '{'", name);
    if (json_len > 0 && (json[0] == ' ' || json[0] == '\t' || json[0] == '\r' || json[0] == '\n'))
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header begins with whitespace; it must begin with '{'", name);
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(json, json_len, &end, false);
    if (!root && end != NULL && bg_json_too_deep_at(json, (size_t)(end - json)))
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header nests arrays and objects more than %d levels deep (header "
                            "byte %zu)",
                            name, CJSON_NESTING_LIMIT, (size_t)(end - json));
    if (!root)
        return bg_error_set(BG_ERR_PARSE, "%s: header is not valid JSON (near header byte %zu)",
                            name, end ? (size_t)(end - json) : (size_t)0);
    /* The writer pads with spaces; anything else after the object is a
     * second value or garbage that other readers would refuse. */
    for (const char *p = end; p < json + json_len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            status = bg_error_set(BG_ERR_PARSE,
                                  "%s: unexpected text after the JSON header (header byte %zu)",
                                  name, (size_t)(p - json));
            goto cleanup;
        }
    }
    if (!cJSON_IsObject(root)) {
        status = bg_error_set(BG_ERR_PARSE, "%s: header is not a JSON object", name);
        goto cleanup;
    }

    size_t key_count = 0, tensor_count = 0;
    const cJSON *metadata = NULL;
    for (const cJSON *item = root->child; item; item = item->next, key_count++) {
        if (strcmp(item->string, bg_safetensors_metadata_key) == 0)
            metadata = item;
        else
            tensor_count++;
        if (item->string[0] == '\0') {
            status = bg_error_set(BG_ERR_PARSE, "%s: empty tensor name in header", name);
            goto cleanup;
        }
    }
    keys = malloc((key_count ? key_count : 1) * sizeof *keys);
    BG_ALLOC_CHECK_GOTO(keys, status, cleanup);
    key_count = 0;
    for (const cJSON *item = root->child; item; item = item->next) keys[key_count++] = item->string;
    const char *duplicate = bg_safetensors_names_find_duplicate(keys, key_count);
    if (duplicate) {
        status = bg_error_set(BG_ERR_PARSE, "%s: duplicate key '%s' in header", name, duplicate);
        goto cleanup;
    }

    file = calloc(1, sizeof *file);
    BG_ALLOC_CHECK_GOTO(file, status, cleanup);
    file->data_size = data_size;
    file->entries = calloc(tensor_count ? tensor_count : 1, sizeof *file->entries);
    BG_ALLOC_CHECK_GOTO(file->entries, status, cleanup);
    /* The metadata first: a number there ("lr": 0.001) is a value that is
     * not a string, as its check says. */
    if (metadata) BG_CHECK_GOTO(metadata_parse(name, metadata, file), status, cleanup);
    /* Then, before the entries, a shape's "-0" or "1e1" is named where it
     * stands, not read as the value it denotes (until 2026-12-05 a shape
     * [-0] was told as [0] not matching its offsets). */
    size_t number_length = 0;
    bad = non_integer_number_at(json, json_len, &number_length);
    if (bad < json_len) {
        status = bg_error_set(BG_ERR_PARSE,
                              "%s: header byte %zu: the number '%.*s' is not written as a plain "
                              "integer (shapes and data offsets are written without a fraction, "
                              "an exponent, a sign or a leading zero)",
                              name, bad, number_length > 32 ? 32 : (int)number_length, json + bad);
        goto cleanup;
    }
    for (const cJSON *item = root->child; item; item = item->next) {
        if (item == metadata) continue;
        BG_CHECK_GOTO(entry_parse(name, item, data_size, in_file, &file->entries[file->count]),
                      status, cleanup);
        file->count++;
    }
    qsort(file->entries, (size_t)file->count, sizeof *file->entries, bg_safetensors_entry_compare);
    BG_CHECK_GOTO(entries_check_tiling(name, file), status, cleanup);
    /* Found by name in O(log n): a training state of 100,000 layers looks
       up 300,000 tensors. */
    file->by_name = calloc((size_t)file->count + 1, sizeof *file->by_name);
    BG_ALLOC_CHECK_GOTO(file->by_name, status, cleanup);
    for (int i = 0; i < file->count; i++) file->by_name[i] = &file->entries[i];
    qsort(file->by_name, (size_t)file->count, sizeof *file->by_name, entry_name_compare);
    *out = file;
    file = NULL;

cleanup:
    bg_safetensors_destroy(file);
    free(keys);
    cJSON_Delete(root);
    return status;
}

uint64_t bg_safetensors_le64_decode(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

/* What a file that is not safetensors more likely is, from its first bytes
 * (the formats weights are most often saved in), or NULL. */
static const char *other_format(const uint8_t b[8]) {
    if (memcmp(b, "PK\3\4", 4) == 0)
        return "a zip archive, which is what torch.save writes (in Python, torch.load it and "
               "write the state dict with safetensors.torch.save_file)";
    if (b[0] == 0x80 && b[1] >= 2 && b[1] <= 5)
        return "a Python pickle, as an older torch.save writes (in Python, torch.load it and "
               "write the state dict with safetensors.torch.save_file)";
    if (memcmp(b, "\x93NUMPY", 6) == 0) return "a NumPy .npy array";
    if (memcmp(b, "\x89HDF\r\n", 6) == 0) return "an HDF5 file (as Keras writes .h5)";
    if (b[0] == 0x1f && b[1] == 0x8b) return "gzip data (unpack it first)";
    return NULL;
}

/* A file of another format whose first 8 bytes happen to make a length
 * that fits (gzip data written with no time stamp: about 560 KB): named
 * so, where its header is no JSON object. `header` holds the 8 bytes and
 * header_len more. */
static bg_status_t other_format_check(const char *name, const uint8_t *header,
                                      uint64_t header_len) {
    const char *other = other_format(header);
    if (other != NULL && (header_len == 0 || header[8] != '{'))
        return bg_error_set(BG_ERR_PARSE, "%s: not a safetensors file: it is %s", name, other);
    return BG_OK;
}

/* Validates the 8-byte header length against the limit and the file size;
 * the caller has checked that the file holds at least 8 bytes. A length
 * out of bounds whose bytes are all text is a text file given for a
 * checkpoint (a model spec, a JSON file), and is named so. */
static bg_status_t header_length_check(const char *name, const uint8_t prefix[8],
                                       uint64_t file_size, uint64_t *header_len) {
    uint64_t n = bg_safetensors_le64_decode(prefix);
    int text = 1;
    for (int i = 0; i < 8; i++)
        text &= (prefix[i] >= 0x20 && prefix[i] < 0x7f) || prefix[i] == '\n' || prefix[i] == '\t' ||
                prefix[i] == '\r';
    if (text && (n > BG_SAFETENSORS_MAX_HEADER || n > file_size - 8)) {
        char start[9];
        for (int i = 0; i < 8; i++) start[i] = prefix[i] >= 0x20 ? (char)prefix[i] : ' ';
        start[8] = '\0';
        return bg_error_set(BG_ERR_PARSE,
                            "%s: not a safetensors file: it starts with text ('%s') where a "
                            "safetensors file has its header's length, 8 bytes",
                            name, start);
    }
    const char *other = other_format(prefix);
    if (other != NULL && (n > BG_SAFETENSORS_MAX_HEADER || n > file_size - 8))
        return bg_error_set(BG_ERR_PARSE, "%s: not a safetensors file: it is %s", name, other);
    if (n > BG_SAFETENSORS_MAX_HEADER)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header length %" PRIu64 " exceeds the limit of %" PRIu64 " bytes",
                            name, n, BG_SAFETENSORS_MAX_HEADER);
    if (n > file_size - 8)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header length %" PRIu64 " runs past the end of the file (%" PRIu64
                            " bytes): is it cut short?",
                            name, n, file_size);
    *header_len = n;
    return BG_OK;
}

static bg_status_t file_size_check(const char *name, uint64_t file_size) {
    if (file_size < 8)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: %" PRIu64 " bytes is too short for the 8-byte header length", name,
                            file_size);
    return BG_OK;
}

bg_status_t bg_safetensors_parse(const char *name, const uint8_t *bytes, size_t size,
                                 bg_safetensors_t **out) {
    if (!name) name = "<memory>";
    if ((!bytes && size > 0) || !out)
        return bg_error_set(BG_ERR_INVALID, "%s: bg_safetensors_parse: NULL argument", name);
    uint64_t header_len = 0;
    BG_CHECK(file_size_check(name, size));
    BG_CHECK(header_length_check(name, bytes, size, &header_len));

    /* The length prefix, the header text and a NUL for cJSON (bg_safetensors_header_parse). */
    uint8_t *header = malloc(8 + header_len + 1);
    if (!header) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for the header", name);
    memcpy(header, bytes, 8 + header_len);
    header[8 + header_len] = '\0';
    uint64_t data_size = size - 8 - header_len;
    bg_safetensors_t *file = NULL;
    bg_status_t status = other_format_check(name, header, header_len);
    if (status == BG_OK)
        status = bg_safetensors_header_parse(name, (const char *)header + 8, header_len, data_size,
                                             1, &file);
    if (status != BG_OK) {
        free(header);
        return status;
    }
    file->header = header;
    file->header_size = 8 + header_len;

    file->data = malloc(data_size ? data_size : 1);
    if (!file->data) {
        bg_safetensors_destroy(file);
        return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for %" PRIu64 " bytes of data", name,
                            data_size);
    }
    memcpy(file->data, bytes + 8 + header_len, data_size);
    *out = file;
    return BG_OK;
}

/* 0 on success, -1 with errno on error, 1 when the file ends early. */
static int read_exact(int fd, void *buf, size_t len) {
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) return 1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static bg_status_t read_error(const char *path, int result) {
    if (result > 0)
        return bg_error_set(BG_ERR_IO, "cannot read '%s': file ended early (changed while read?)",
                            path);
    return bg_error_set(BG_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
}

bg_status_t bg_safetensors_load(const char *path, bg_safetensors_t **out) {
    if (!path || !out) return bg_error_set(BG_ERR_INVALID, "bg_safetensors_load: NULL argument");
    bg_status_t status = BG_OK;
    uint8_t *header = NULL;
    bg_safetensors_t *file = NULL;
    int result;
    /* Read by its size, which only a regular file has. */
    int fd = -1;
    uint64_t file_size = 0;
    BG_CHECK(bg_regular_file_open(path, &fd, &file_size));
    uint8_t prefix[8];
    uint64_t header_len = 0;
    BG_CHECK_GOTO(file_size_check(path, file_size), status, cleanup);
    if ((result = read_exact(fd, prefix, sizeof prefix)) != 0) {
        status = read_error(path, result);
        goto cleanup;
    }
    BG_CHECK_GOTO(header_length_check(path, prefix, file_size, &header_len), status, cleanup);
    uint64_t data_size = file_size - 8 - header_len;
    if (data_size > SIZE_MAX) {
        status = bg_error_set(BG_ERR_UNSUPPORTED,
                              "cannot read '%s': %" PRIu64 " bytes of data do not fit in memory",
                              path, data_size);
        goto cleanup;
    }

    header = malloc(8 + header_len + 1);
    BG_ALLOC_CHECK_GOTO(header, status, cleanup);
    memcpy(header, prefix, sizeof prefix);
    if ((result = read_exact(fd, header + 8, header_len)) != 0) {
        status = read_error(path, result);
        goto cleanup;
    }
    header[8 + header_len] = '\0';
    BG_CHECK_GOTO(other_format_check(path, header, header_len), status, cleanup);
    BG_CHECK_GOTO(bg_safetensors_header_parse(path, (const char *)header + 8, header_len, data_size,
                                              1, &file),
                  status, cleanup);
    file->header = header;
    file->header_size = 8 + header_len;
    header = NULL;

    /* Reading the data straight into its owned buffer avoids holding a
     * multi-gigabyte checkpoint twice. */
    file->data = malloc(data_size ? data_size : 1);
    BG_ALLOC_CHECK_GOTO(file->data, status, cleanup);
    if ((result = read_exact(fd, file->data, data_size)) != 0) {
        status = read_error(path, result);
        goto cleanup;
    }
    *out = file;
    file = NULL;

cleanup:
    bg_safetensors_destroy(file);
    free(header);
    close(fd);
    return status;
}

const bg_safetensors_entry_t *bg_safetensors_find(const bg_safetensors_t *file, const char *name) {
    if (!file || !name || file->by_name == NULL) return NULL;
    bg_safetensors_entry_t key_entry = {.name = (char *)name};
    const bg_safetensors_entry_t *key = &key_entry;
    bg_safetensors_entry_t *const *found = bsearch(&key, file->by_name, (size_t)file->count,
                                                   sizeof *file->by_name, entry_name_compare);
    return found != NULL ? *found : NULL;
}

const char *bg_safetensors_metadata(const bg_safetensors_t *file, const char *key) {
    if (!file || !key) return NULL;
    for (int i = 0; i < file->metadata_count; i++)
        if (strcmp(file->metadata_keys[i], key) == 0) return file->metadata_values[i];
    return NULL;
}

void bg_safetensors_destroy(bg_safetensors_t *file) {
    if (!file) return;
    if (file->entries)
        for (int i = 0; i < file->count; i++) free(file->entries[i].name);
    free(file->entries);
    free(file->by_name);
    for (int i = 0; i < file->metadata_count; i++) {
        free(file->metadata_keys[i]);
        free(file->metadata_values[i]);
    }
    free(file->metadata_keys);
    free(file->metadata_values);
    free(file->data);
    free(file->header);
    free(file);
}
