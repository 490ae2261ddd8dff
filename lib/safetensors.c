/* safetensors reader and atomic F32 writer. The header is untrusted input
 * (checkpoints are downloaded and shared), so every field is validated before
 * any offset is used, and the data must be tiled exactly by the tensors. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkostemp, flock; also fsync, strdup, O_CLOEXEC */
#endif

#include "safetensors.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* JSON numbers arrive as doubles: from 2^53 on, neighbouring integers
 * collapse, so a larger dim or offset could silently mean another value. */
#define EXACT_INTEGER_LIMIT ((uint64_t)1 << 53)

static const char metadata_key[] = "__metadata__";

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

/* Offset of the first byte that is not valid UTF-8, or len. The format
 * requires UTF-8 and Python's loader rejects anything else; NUL is refused
 * too because it would cut cJSON's C strings short. */
static size_t utf8_invalid_at(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        size_t follow;
        uint32_t code, least;
        if (c == 0) return i;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0) {
            follow = 1, code = c & 0x1F, least = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            follow = 2, code = c & 0x0F, least = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            follow = 3, code = c & 0x07, least = 0x10000;
        } else {
            return i;
        }
        if (len - i <= follow) return i;
        for (size_t k = 1; k <= follow; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            code = (code << 6) | (s[i + k] & 0x3F);
        }
        /* Overlong forms and surrogates are rejected: they let two byte
         * strings spell the same name. */
        if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
        i += follow + 1;
    }
    return len;
}

static bool json_integer(const cJSON *item, uint64_t *value) {
    if (!cJSON_IsNumber(item)) return false;
    double d = item->valuedouble;
    if (!(d >= 0.0 && d < (double)EXACT_INTEGER_LIMIT)) return false;
    uint64_t v = (uint64_t)d;
    if ((double)v != d) return false;
    *value = v;
    return true;
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
static const char *names_find_duplicate(const char **names, size_t count) {
    if (count < 2) return NULL;
    qsort(names, count, sizeof *names, string_pointer_compare);
    for (size_t i = 1; i < count; i++)
        if (strcmp(names[i - 1], names[i]) == 0) return names[i];
    return NULL;
}

static int entry_compare(const void *a, const void *b) {
    const bg_safetensors_entry_t *x = a, *y = b;
    /* Zero-size tensors sort before the tensor starting at the same byte,
     * so they tile; names break remaining ties for a stable order. */
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bg_status_t entry_parse(const char *name, const cJSON *item, uint64_t data_size,
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
            return bg_error_set(BG_ERR_PARSE,
                                "%s: tensor '%s': shape[%d] is not a non-negative integer", name,
                                tensor, d);
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
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_integer(offsets->child, &begin) || !json_integer(offsets->child->next, &end))
        return bg_error_set(BG_ERR_PARSE,
                            "%s: tensor '%s': data_offsets is not a pair of non-negative integers",
                            name, tensor);
    if (begin > end)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] end before they begin",
                            name, tensor, begin, end);
    if (end > data_size)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] exceed the %" PRIu64 " bytes of data",
                            name, tensor, begin, end, data_size);
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

static bg_status_t metadata_parse(const char *name, const cJSON *object, bg_safetensors_t *st) {
    if (!cJSON_IsObject(object))
        return bg_error_set(BG_ERR_PARSE, "%s: %s is not a JSON object", name, metadata_key);
    int count = cJSON_GetArraySize(object);
    size_t slots = count > 0 ? (size_t)count : 1;
    st->metadata_keys = calloc(slots, sizeof *st->metadata_keys);
    st->metadata_values = calloc(slots, sizeof *st->metadata_values);
    if (!st->metadata_keys || !st->metadata_values)
        return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for metadata", name);
    for (const cJSON *item = object->child; item; item = item->next) {
        if (!cJSON_IsString(item))
            return bg_error_set(BG_ERR_PARSE, "%s: metadata '%s' is not a string", name,
                                item->string);
        int i = st->metadata_count++;
        st->metadata_keys[i] = strdup(item->string);
        st->metadata_values[i] = strdup(item->valuestring);
        if (!st->metadata_keys[i] || !st->metadata_values[i])
            return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for metadata", name);
    }
    /* The metadata keys are copies, so sorting their pointers is harmless. */
    const char **keys = malloc(slots * sizeof *keys);
    if (!keys) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for metadata", name);
    memcpy(keys, st->metadata_keys, (size_t)st->metadata_count * sizeof *keys);
    const char *duplicate = names_find_duplicate(keys, (size_t)st->metadata_count);
    bg_status_t status = BG_OK;
    if (duplicate)
        status = bg_error_set(BG_ERR_PARSE, "%s: duplicate metadata key '%s'", name, duplicate);
    free(keys);
    return status;
}

/* Checks that the entries, sorted by begin, cover [0, data_size) with no
 * gap and no overlap: an unclaimed byte hides data, a shared one aliases. */
static bg_status_t entries_check_tiling(const char *name, const bg_safetensors_t *st) {
    uint64_t expected = 0;
    for (int i = 0; i < st->count; i++) {
        const bg_safetensors_entry_t *e = &st->entries[i];
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
                                name, e->name, e->begin, e->end, st->entries[i - 1].name,
                                st->entries[i - 1].begin, st->entries[i - 1].end);
        expected = e->end;
    }
    if (expected != st->data_size)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: bytes [%" PRIu64 ", %" PRIu64 ") of the data belong to no tensor",
                            name, expected, st->data_size);
    return BG_OK;
}

/* Builds everything but the data from the header text, which must be
 * followed by a NUL at json[json_len]: released cJSON versions read one
 * byte past the given length on truncated input (DaveGamble/cJSON#800), and
 * the NUL makes that byte ours and harmless. */
static bg_status_t header_parse(const char *name, const char *json, size_t json_len,
                                uint64_t data_size, bg_safetensors_t **out) {
    bg_status_t status = BG_OK;
    cJSON *root = NULL;
    const char **keys = NULL;
    bg_safetensors_t *st = NULL;

    size_t bad = utf8_invalid_at((const uint8_t *)json, json_len);
    if (bad < json_len)
        return bg_error_set(BG_ERR_PARSE, "%s: header is not valid UTF-8 (header byte %zu)", name,
                            bad);
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(json, json_len, &end, false);
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
        if (strcmp(item->string, metadata_key) == 0)
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
    const char *duplicate = names_find_duplicate(keys, key_count);
    if (duplicate) {
        status = bg_error_set(BG_ERR_PARSE, "%s: duplicate key '%s' in header", name, duplicate);
        goto cleanup;
    }

    st = calloc(1, sizeof *st);
    BG_ALLOC_CHECK_GOTO(st, status, cleanup);
    st->data_size = data_size;
    st->entries = calloc(tensor_count ? tensor_count : 1, sizeof *st->entries);
    BG_ALLOC_CHECK_GOTO(st->entries, status, cleanup);
    for (const cJSON *item = root->child; item; item = item->next) {
        if (item == metadata) continue;
        BG_CHECK_GOTO(entry_parse(name, item, data_size, &st->entries[st->count]), status, cleanup);
        st->count++;
    }
    if (metadata) BG_CHECK_GOTO(metadata_parse(name, metadata, st), status, cleanup);
    qsort(st->entries, (size_t)st->count, sizeof *st->entries, entry_compare);
    BG_CHECK_GOTO(entries_check_tiling(name, st), status, cleanup);
    *out = st;
    st = NULL;

cleanup:
    bg_safetensors_destroy(st);
    free(keys);
    cJSON_Delete(root);
    return status;
}

static uint64_t le64_decode(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

/* Validates the 8-byte header length against the limit and the file size;
 * the caller has checked that the file holds at least 8 bytes. */
static bg_status_t header_length_check(const char *name, const uint8_t prefix[8],
                                       uint64_t file_size, uint64_t *header_len) {
    uint64_t n = le64_decode(prefix);
    if (n > BG_SAFETENSORS_MAX_HEADER)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header length %" PRIu64 " exceeds the limit of %" PRIu64 " bytes",
                            name, n, BG_SAFETENSORS_MAX_HEADER);
    if (n > file_size - 8)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: header length %" PRIu64 " runs past the end of the file (%" PRIu64
                            " bytes)",
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

    /* The length prefix, the header text and a NUL for cJSON (header_parse). */
    uint8_t *header = malloc(8 + header_len + 1);
    if (!header) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for the header", name);
    memcpy(header, bytes, 8 + header_len);
    header[8 + header_len] = '\0';
    uint64_t data_size = size - 8 - header_len;
    bg_safetensors_t *st = NULL;
    bg_status_t status = header_parse(name, (const char *)header + 8, header_len, data_size, &st);
    if (status != BG_OK) {
        free(header);
        return status;
    }
    st->header = header;
    st->header_size = 8 + header_len;

    st->data = malloc(data_size ? data_size : 1);
    if (!st->data) {
        bg_safetensors_destroy(st);
        return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for %" PRIu64 " bytes of data", name,
                            data_size);
    }
    memcpy(st->data, bytes + 8 + header_len, data_size);
    *out = st;
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
    bg_safetensors_t *st = NULL;
    int result;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bg_error_set(BG_ERR_IO, "cannot read '%s': %s", path, strerror(errno));

    struct stat info;
    if (fstat(fd, &info) != 0) {
        status = bg_error_set(BG_ERR_IO, "cannot read '%s': fstat: %s", path, strerror(errno));
        goto cleanup;
    }
    uint64_t file_size = (uint64_t)info.st_size;
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
    BG_CHECK_GOTO(header_parse(path, (const char *)header + 8, header_len, data_size, &st), status,
                  cleanup);
    st->header = header;
    st->header_size = 8 + header_len;
    header = NULL;

    /* Reading the data straight into its owned buffer avoids holding a
     * multi-gigabyte checkpoint twice. */
    st->data = malloc(data_size ? data_size : 1);
    BG_ALLOC_CHECK_GOTO(st->data, status, cleanup);
    if ((result = read_exact(fd, st->data, data_size)) != 0) {
        status = read_error(path, result);
        goto cleanup;
    }
    *out = st;
    st = NULL;

cleanup:
    bg_safetensors_destroy(st);
    free(header);
    close(fd);
    return status;
}

const bg_safetensors_entry_t *bg_safetensors_find(const bg_safetensors_t *st, const char *name) {
    if (!st || !name) return NULL;
    for (int i = 0; i < st->count; i++)
        if (strcmp(st->entries[i].name, name) == 0) return &st->entries[i];
    return NULL;
}

const char *bg_safetensors_metadata(const bg_safetensors_t *st, const char *key) {
    if (!st || !key) return NULL;
    for (int i = 0; i < st->metadata_count; i++)
        if (strcmp(st->metadata_keys[i], key) == 0) return st->metadata_values[i];
    return NULL;
}

void bg_safetensors_destroy(bg_safetensors_t *st) {
    if (!st) return;
    if (st->entries)
        for (int i = 0; i < st->count; i++) free(st->entries[i].name);
    free(st->entries);
    for (int i = 0; i < st->metadata_count; i++) {
        free(st->metadata_keys[i]);
        free(st->metadata_values[i]);
    }
    free(st->metadata_keys);
    free(st->metadata_values);
    free(st->data);
    free(st->header);
    free(st);
}

/* ---- writer ---- */

/* Rejects what the reader would refuse, so a written file always loads:
 * names, shapes, data pointers, 2^53 offsets. Fills bytes[i]. */
static bg_status_t tensors_check(const char *path, const bg_safetensors_tensor_t *tensors,
                                 int count, uint64_t *bytes) {
    uint64_t total = 0;
    for (int i = 0; i < count; i++) {
        const bg_safetensors_tensor_t *t = &tensors[i];
        if (!t->name || t->name[0] == '\0')
            return bg_error_set(BG_ERR_INVALID, "%s: tensor %d has no name", path, i);
        if (strcmp(t->name, metadata_key) == 0 ||
            utf8_invalid_at((const uint8_t *)t->name, strlen(t->name)) != strlen(t->name))
            return bg_error_set(BG_ERR_INVALID, "%s: tensor %d: invalid name '%s'", path, i,
                                t->name);
        if (t->ndim < 0 || t->ndim > BG_SAFETENSORS_MAX_DIMS)
            return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s': ndim %d not in [0, %d]", path,
                                t->name, t->ndim, BG_SAFETENSORS_MAX_DIMS);
        uint64_t size = 4;
        bool overflow = false;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || (uint64_t)t->shape[d] >= EXACT_INTEGER_LIMIT)
                return bg_error_set(BG_ERR_INVALID,
                                    "%s: tensor '%s': shape[%d] = %" PRId64 " is out of range",
                                    path, t->name, d, t->shape[d]);
            uint64_t dim = (uint64_t)t->shape[d];
            if (dim != 0 && size > UINT64_MAX / dim)
                overflow = true;
            else
                size *= dim;
        }
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] == 0) size = 0, overflow = false;
        if (overflow || size > EXACT_INTEGER_LIMIT - 1 - total)
            return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s': data too large for the format",
                                path, t->name);
        if (size > 0 && !t->data)
            return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s': data is NULL", path, t->name);
        bytes[i] = size;
        total += size;
    }
    return BG_OK;
}

static bg_status_t names_check_unique(const char *path, const char *what, const char *const *names,
                                      int count) {
    if (count < 2) return BG_OK;
    const char **sorted = malloc((size_t)count * sizeof *sorted);
    if (!sorted) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
    memcpy(sorted, names, (size_t)count * sizeof *sorted);
    const char *duplicate = names_find_duplicate(sorted, (size_t)count);
    bg_status_t status = BG_OK;
    if (duplicate)
        status = bg_error_set(BG_ERR_INVALID, "%s: duplicate %s '%s'", path, what, duplicate);
    free(sorted);
    return status;
}

static bg_status_t metadata_check(const char *path, const char *const *keys,
                                  const char *const *values, int count) {
    for (int i = 0; i < count; i++) {
        const char *texts[2] = {keys[i], values[i]};
        for (int k = 0; k < 2; k++) {
            if (!texts[k] ||
                utf8_invalid_at((const uint8_t *)texts[k], strlen(texts[k])) != strlen(texts[k]))
                return bg_error_set(BG_ERR_INVALID, "%s: metadata %d: NULL or invalid UTF-8 %s",
                                    path, i, k ? "value" : "key");
        }
    }
    return names_check_unique(path, "metadata key", keys, count);
}

/* Integers go in as raw text: cJSON would print a double, which turns
 * 1e15 into "1e+15", which strict readers refuse as an offset. */
static bool json_array_add_integer(cJSON *array, uint64_t value) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, value);
    cJSON *item = cJSON_CreateRaw(text);
    if (!item) return false;
    if (!cJSON_AddItemToArray(array, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

/* The 8-byte length and the JSON header padded with spaces so that 8 +
 * length is a multiple of 8, which keeps the data aligned for readers that
 * map the file. */
static bg_status_t header_build(const char *path, const bg_safetensors_tensor_t *tensors, int count,
                                const uint64_t *bytes, const char *const *keys,
                                const char *const *values, int metadata_count, uint8_t **out,
                                size_t *out_size) {
    bg_status_t status = BG_OK;
    char *text = NULL;
    cJSON *root = cJSON_CreateObject();
    BG_ALLOC_CHECK_GOTO(root, status, cleanup);
    if (metadata_count > 0) {
        cJSON *metadata = cJSON_AddObjectToObject(root, metadata_key);
        BG_ALLOC_CHECK_GOTO(metadata, status, cleanup);
        for (int i = 0; i < metadata_count; i++)
            BG_ALLOC_CHECK_GOTO(cJSON_AddStringToObject(metadata, keys[i], values[i]), status,
                                cleanup);
    }
    uint64_t offset = 0;
    for (int i = 0; i < count; i++) {
        cJSON *entry = cJSON_AddObjectToObject(root, tensors[i].name);
        BG_ALLOC_CHECK_GOTO(entry, status, cleanup);
        BG_ALLOC_CHECK_GOTO(cJSON_AddStringToObject(entry, "dtype", "F32"), status, cleanup);
        cJSON *shape = cJSON_AddArrayToObject(entry, "shape");
        BG_ALLOC_CHECK_GOTO(shape, status, cleanup);
        for (int d = 0; d < tensors[i].ndim; d++)
            if (!json_array_add_integer(shape, (uint64_t)tensors[i].shape[d])) goto nomem;
        cJSON *offsets = cJSON_AddArrayToObject(entry, "data_offsets");
        BG_ALLOC_CHECK_GOTO(offsets, status, cleanup);
        if (!json_array_add_integer(offsets, offset) ||
            !json_array_add_integer(offsets, offset + bytes[i]))
            goto nomem;
        offset += bytes[i];
    }
    text = cJSON_PrintUnformatted(root);
    BG_ALLOC_CHECK_GOTO(text, status, cleanup);
    size_t len = strlen(text);
    size_t padded = len + (8 - len % 8) % 8;
    uint8_t *header = malloc(8 + padded);
    BG_ALLOC_CHECK_GOTO(header, status, cleanup);
    for (int i = 0; i < 8; i++) header[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(header + 8, text, len);
    memset(header + 8 + len, ' ', padded - len);
    *out = header;
    *out_size = 8 + padded;
    goto cleanup;

nomem:
    status = bg_error_set(BG_ERR_NOMEM, "%s: out of memory building the header", path);
cleanup:
    cJSON_free(text);
    cJSON_Delete(root);
    return status;
}

/* 0 on success, -1 with errno set. */
static int write_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) {
            errno = EIO; /* a regular file never accepts zero bytes; avoid spinning */
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static bool host_is_little_endian(void) {
    const uint16_t probe = 1;
    uint8_t first;
    memcpy(&first, &probe, 1);
    return first == 1;
}

/* The format is little-endian; big-endian hosts swap through a bounce
 * buffer rather than touching the caller's floats. */
static int floats_write(int fd, const float *data, uint64_t bytes) {
    if (host_is_little_endian()) return write_all(fd, data, (size_t)bytes);
    uint8_t chunk[4096];
    const uint8_t *src = (const uint8_t *)data;
    while (bytes > 0) {
        size_t n = bytes < sizeof chunk ? (size_t)bytes : sizeof chunk;
        for (size_t i = 0; i < n; i += 4)
            for (size_t k = 0; k < 4; k++) chunk[i + k] = src[i + 3 - k];
        if (write_all(fd, chunk, n) != 0) return -1;
        src += n;
        bytes -= n;
    }
    return 0;
}

/* Makes the rename durable: without it a crash can bring back the old file,
 * or none at all. */
static bg_status_t directory_sync(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    char *dir = malloc(len + 1);
    if (!dir) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
    memcpy(dir, slash ? path : ".", len);
    dir[len] = '\0';
    bg_status_t status = BG_OK;
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        status = bg_error_set(BG_ERR_IO, "cannot write '%s': open directory '%s': %s", path, dir,
                              strerror(errno));
    } else {
        /* Some file systems cannot fsync a directory and say EINVAL; there
         * is nothing more to make durable there. */
        if (fsync(fd) != 0 && errno != EINVAL)
            status = bg_error_set(BG_ERR_IO, "cannot write '%s': fsync directory '%s': %s", path,
                                  dir, strerror(errno));
        close(fd);
    }
    free(dir);
    return status;
}

static bg_status_t io_error(const char *path, const char *call, int error) {
    return bg_error_set(BG_ERR_IO, "cannot write '%s': %s: %s", path, call, strerror(error));
}

enum { TEMP_RANDOM_CHARS = 6 }; /* the XXXXXX of mkostemp */
static const char temp_infix[] = ".tmp.";

/* Creates and locks "PATH.tmp.XXXXXX" in `temp` (path_len + sizeof
 * temp_infix + TEMP_RANDOM_CHARS bytes). The lock tells temp_files_remove_stale
 * in other processes that the file is alive; a cleaner that locked the new
 * file before us has unlinked it, which we see as no links, and try again. */
static int temp_create(const char *path, char *temp) {
    size_t path_len = strlen(path);
    for (int attempt = 0; attempt < 100; attempt++) {
        memcpy(temp, path, path_len);
        memcpy(temp + path_len, temp_infix, sizeof temp_infix - 1);
        memset(temp + path_len + sizeof temp_infix - 1, 'X', TEMP_RANDOM_CHARS);
        temp[path_len + sizeof temp_infix - 1 + TEMP_RANDOM_CHARS] = '\0';
        int fd = mkostemp(temp, O_CLOEXEC);
        if (fd < 0) return -1;
        int locked;
        while ((locked = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
        }
        /* Without working locks (some network file systems) the file stays
         * unlocked; cleaners then never take it, so writing on is safe. */
        if (locked != 0) return fd;
        struct stat info;
        if (fstat(fd, &info) != 0) {
            int error = errno;
            close(fd);
            unlink(temp);
            errno = error;
            return -1;
        }
        if (info.st_nlink > 0) return fd;
        close(fd);
    }
    errno = EEXIST;
    return -1;
}

/* True when `name` is base + ".tmp." + 6 letters or digits, mkostemp's form. */
static bool temp_name_matches(const char *name, const char *base, size_t base_len) {
    size_t infix_len = sizeof temp_infix - 1;
    if (strlen(name) != base_len + infix_len + TEMP_RANDOM_CHARS) return false;
    if (memcmp(name, base, base_len) != 0 || memcmp(name + base_len, temp_infix, infix_len) != 0)
        return false;
    for (const char *p = name + base_len + infix_len; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* Removes the temporary files of writers of `path` that died mid-write (a
 * kill, a crash, a power cut): those nobody holds a lock on. A live writer
 * holds its lock from creation to rename, so its file is never taken; the
 * name is checked to still be the locked inode before it is unlinked.
 * Best effort: a failure here leaves files behind, never fails a write. */
static void temp_files_remove_stale(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0; /* with the slash */
    size_t base_len = strlen(base);
    char *candidate = malloc(dir_len + base_len + sizeof temp_infix + TEMP_RANDOM_CHARS);
    if (!candidate) return;
    memcpy(candidate, path, dir_len);
    char *dir_name = NULL;
    if (slash) {
        dir_name = malloc(dir_len + 1);
        if (!dir_name) {
            free(candidate);
            return;
        }
        memcpy(dir_name, path, dir_len);
        dir_name[dir_len] = '\0';
    }
    DIR *dir = opendir(dir_name ? dir_name : ".");
    for (struct dirent *e; dir && (e = readdir(dir)) != NULL;) {
        if (!temp_name_matches(e->d_name, base, base_len)) continue;
        strcpy(candidate + dir_len, e->d_name);
        /* O_NONBLOCK: a FIFO of that name must not hang the writer. */
        int fd = open(candidate, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) continue;
        struct stat held, named;
        if (fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            lstat(candidate, &named) == 0 && named.st_dev == held.st_dev &&
            named.st_ino == held.st_ino)
            unlink(candidate);
        close(fd);
    }
    if (dir) closedir(dir);
    free(dir_name);
    free(candidate);
}

static bg_status_t file_write_atomic(const char *path, const uint8_t *header, size_t header_size,
                                     const bg_safetensors_tensor_t *tensors, int count,
                                     const uint64_t *bytes) {
    bg_status_t status = BG_OK;
    size_t path_len = strlen(path);
    char *temp = malloc(path_len + sizeof temp_infix + TEMP_RANDOM_CHARS);
    if (!temp) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);

    int lock_fd = -1;
    int fd = temp_create(path, temp);
    if (fd < 0) {
        status = io_error(path, "mkostemp", errno);
        free(temp);
        return status;
    }
    bool temp_exists = true;
    /* mkostemp creates 0600; checkpoints are meant to be shared like any
     * file the user writes. The umask cannot be read without changing it,
     * which would race with other threads. */
    if (fchmod(fd, 0644) != 0) {
        status = io_error(path, "fchmod", errno);
        goto cleanup;
    }
    if (write_all(fd, header, header_size) != 0) {
        status = io_error(path, "write", errno);
        goto cleanup;
    }
    for (int i = 0; i < count; i++) {
        if (bytes[i] > 0 && floats_write(fd, tensors[i].data, bytes[i]) != 0) {
            status = io_error(path, "write", errno);
            goto cleanup;
        }
    }
    if (fsync(fd) != 0) {
        status = io_error(path, "fsync", errno);
        goto cleanup;
    }
    /* A second descriptor keeps the lock until after the rename: a cleaner
     * must not take the file while it has its temporary name, and closing
     * the first still reports late write errors (NFS) before the rename. */
    lock_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (lock_fd < 0) {
        status = io_error(path, "fcntl", errno);
        goto cleanup;
    }
    int closed = close(fd);
    fd = -1;
    if (closed != 0) {
        status = io_error(path, "close", errno);
        goto cleanup;
    }
    if (rename(temp, path) != 0) {
        status = io_error(path, "rename", errno);
        goto cleanup;
    }
    temp_exists = false;
    close(lock_fd);
    lock_fd = -1;
    status = directory_sync(path);
    if (status == BG_OK) temp_files_remove_stale(path);

cleanup:
    if (temp_exists) unlink(temp);
    if (fd >= 0) close(fd);
    if (lock_fd >= 0) close(lock_fd);
    free(temp);
    return status;
}

/* Everything bg_safetensors_write refuses before it builds a header; fills
 * bytes[i] with the size of tensor i. */
static bg_status_t write_arguments_check(const char *name, const bg_safetensors_tensor_t *tensors,
                                         int count, const char *const *metadata_keys,
                                         const char *const *metadata_values, int metadata_count,
                                         uint64_t *bytes) {
    BG_CHECK(tensors_check(name, tensors, count, bytes));
    const char **names = malloc((count > 0 ? (size_t)count : 1) * sizeof *names);
    if (!names) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", name);
    for (int i = 0; i < count; i++) names[i] = tensors[i].name;
    bg_status_t status = names_check_unique(name, "tensor name", names, count);
    free(names);
    if (status != BG_OK) return status;
    return metadata_check(name, metadata_keys, metadata_values, metadata_count);
}

static bool write_arguments_valid(const char *path, int count, const void *tensors,
                                  int metadata_count, const void *keys, const void *values) {
    return path && path[0] != '\0' && count >= 0 && (count == 0 || tensors) &&
           metadata_count >= 0 && (metadata_count == 0 || (keys && values));
}

bg_status_t bg_safetensors_header_encode(const char *name, const bg_safetensors_tensor_t *tensors,
                                         int count, const char *const *metadata_keys,
                                         const char *const *metadata_values, int metadata_count,
                                         uint8_t **out, size_t *out_size) {
    if (!write_arguments_valid(name, count, tensors, metadata_count, metadata_keys,
                               metadata_values) ||
        !out || !out_size)
        return bg_error_set(BG_ERR_INVALID, "%s: bg_safetensors_header_encode: invalid arguments",
                            name ? name : "(null)");
    uint64_t *bytes = malloc((count > 0 ? (size_t)count : 1) * sizeof *bytes);
    if (!bytes) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", name);
    bg_status_t status = write_arguments_check(name, tensors, count, metadata_keys, metadata_values,
                                               metadata_count, bytes);
    if (status == BG_OK)
        status = header_build(name, tensors, count, bytes, metadata_keys, metadata_values,
                              metadata_count, out, out_size);
    free(bytes);
    return status;
}

/* A tensor to write with its place in the data and in the caller's list. */
typedef struct laid_out {
    bg_safetensors_entry_t entry;
    int index;
} laid_out_t;

static int laid_out_compare(const void *a, const void *b) {
    return entry_compare(&((const laid_out_t *)a)->entry, &((const laid_out_t *)b)->entry);
}

/* Checks that `header` parses and lays out exactly `tensors`, so the data
 * lands where the header says. */
static bg_status_t encoded_header_check(const char *path, const uint8_t *header, size_t header_size,
                                        const bg_safetensors_tensor_t *tensors, int count,
                                        const uint64_t *bytes) {
    uint64_t data_size = 0;
    for (int i = 0; i < count; i++) data_size += bytes[i];
    if (header_size < 8 || le64_decode(header) != header_size - 8 ||
        header_size - 8 > BG_SAFETENSORS_MAX_HEADER)
        return bg_error_set(BG_ERR_INVALID, "%s: header to write: bad length prefix", path);
    char *text = malloc(header_size - 8 + 1);
    if (!text) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
    memcpy(text, header + 8, header_size - 8);
    text[header_size - 8] = '\0';
    bg_safetensors_t *st = NULL;
    laid_out_t *expected = NULL;
    bg_status_t status = header_parse(path, text, header_size - 8, data_size, &st);
    free(text);
    if (status != BG_OK) return bg_error_prefix(BG_ERR_INVALID, "header to write does not parse: ");
    expected = calloc(count > 0 ? (size_t)count : 1, sizeof *expected);
    if (!expected) {
        status = bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
        goto cleanup;
    }
    uint64_t offset = 0;
    for (int i = 0; i < count; i++) {
        expected[i].entry.name = (char *)tensors[i].name;
        expected[i].entry.begin = offset;
        expected[i].entry.end = offset += bytes[i];
        expected[i].index = i;
    }
    /* Both lists in the parser's order, so they must agree entry by entry. */
    qsort(expected, (size_t)count, sizeof *expected, laid_out_compare);
    bool same = st->count == count;
    for (int i = 0; same && i < count; i++) {
        const bg_safetensors_entry_t *e = &st->entries[i], *want = &expected[i].entry;
        const bg_safetensors_tensor_t *t = &tensors[expected[i].index];
        same = strcmp(e->name, want->name) == 0 && e->begin == want->begin && e->end == want->end &&
               strcmp(e->dtype, "F32") == 0 && e->ndim == t->ndim;
        for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == t->shape[d];
    }
    if (!same)
        status = bg_error_set(BG_ERR_INVALID,
                              "%s: header to write does not describe the given tensors", path);
cleanup:
    free(expected);
    bg_safetensors_destroy(st);
    return status;
}

bg_status_t bg_safetensors_write_encoded(const char *path, const uint8_t *header,
                                         size_t header_size, const bg_safetensors_tensor_t *tensors,
                                         int count) {
    if (!write_arguments_valid(path, count, tensors, 0, NULL, NULL) || !header)
        return bg_error_set(BG_ERR_INVALID, "%s: bg_safetensors_write_encoded: invalid arguments",
                            path ? path : "(null)");
    uint64_t *bytes = malloc((count > 0 ? (size_t)count : 1) * sizeof *bytes);
    if (!bytes) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
    bg_status_t status = tensors_check(path, tensors, count, bytes);
    if (status == BG_OK)
        status = encoded_header_check(path, header, header_size, tensors, count, bytes);
    if (status == BG_OK)
        status = file_write_atomic(path, header, header_size, tensors, count, bytes);
    free(bytes);
    return status;
}

bg_status_t bg_safetensors_write(const char *path, const bg_safetensors_tensor_t *tensors,
                                 int count, const char *const *metadata_keys,
                                 const char *const *metadata_values, int metadata_count) {
    if (!write_arguments_valid(path, count, tensors, metadata_count, metadata_keys,
                               metadata_values))
        return bg_error_set(BG_ERR_INVALID, "%s: bg_safetensors_write: invalid arguments",
                            path ? path : "(null)");
    bg_status_t status = BG_OK;
    uint8_t *header = NULL;
    size_t header_size = 0;
    uint64_t *bytes = malloc((count > 0 ? (size_t)count : 1) * sizeof *bytes);
    BG_ALLOC_CHECK_GOTO(bytes, status, cleanup);
    BG_CHECK_GOTO(write_arguments_check(path, tensors, count, metadata_keys, metadata_values,
                                        metadata_count, bytes),
                  status, cleanup);
    BG_CHECK_GOTO(header_build(path, tensors, count, bytes, metadata_keys, metadata_values,
                               metadata_count, &header, &header_size),
                  status, cleanup);
    status = file_write_atomic(path, header, header_size, tensors, count, bytes);

cleanup:
    free(header);
    free(bytes);
    return status;
}
