/* safetensors writer: F32 tensors and string metadata, written atomically
 * (lib/atomic_file.h). It refuses whatever the reader would, so a file it
 * writes always loads. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "byte_order.h"
#include "safetensors_impl.h"
#include "utf8.h"

/* Rejects what the reader would refuse, so a written file always loads:
 * names, shapes, data pointers, 2^53 offsets. Fills bytes[i]. */
static bg_status_t tensors_check(const char *path, const bg_safetensors_tensor_t *tensors,
                                 int count, uint64_t *bytes) {
    uint64_t total = 0;
    for (int i = 0; i < count; i++) {
        const bg_safetensors_tensor_t *t = &tensors[i];
        if (!t->name || t->name[0] == '\0')
            return bg_error_set(BG_ERR_INVALID, "%s: tensor %d has no name", path, i);
        if (strcmp(t->name, bg_safetensors_metadata_key) == 0 ||
            bg_utf8_invalid_at(t->name, strlen(t->name)) != strlen(t->name))
            return bg_error_set(BG_ERR_INVALID, "%s: tensor %d: invalid name '%s'", path, i,
                                t->name);
        if (t->ndim < 0 || t->ndim > BG_SAFETENSORS_MAX_DIMS)
            return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s': ndim %d not in [0, %d]", path,
                                t->name, t->ndim, BG_SAFETENSORS_MAX_DIMS);
        uint64_t size = 4;
        bool overflow = false;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || (uint64_t)t->shape[d] >= BG_SAFETENSORS_EXACT_LIMIT)
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
        if (overflow || size > BG_SAFETENSORS_EXACT_LIMIT - 1 - total)
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
    const char *duplicate = bg_safetensors_names_find_duplicate(sorted, (size_t)count);
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
            if (!texts[k] || bg_utf8_invalid_at(texts[k], strlen(texts[k])) != strlen(texts[k]))
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
        cJSON *metadata = cJSON_AddObjectToObject(root, bg_safetensors_metadata_key);
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
    /* What the reader would refuse is not written (until 2026-12-06 a header
     * past its limit was). */
    if (padded > BG_SAFETENSORS_MAX_HEADER) {
        status = bg_error_set(BG_ERR_INVALID,
                              "%s: a header of %zu bytes, past the %llu a safetensors file may "
                              "have (brigade's reader's limit)",
                              path, padded, (unsigned long long)BG_SAFETENSORS_MAX_HEADER);
        goto cleanup;
    }
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

/* The format is little-endian; big-endian hosts swap through a bounce
 * buffer rather than touching the caller's floats. */
static bg_status_t floats_write(bg_atomic_file_t *file, const float *data, uint64_t bytes) {
    if (bg_host_is_little_endian()) return bg_atomic_file_write(file, data, (size_t)bytes);
    uint8_t chunk[4096];
    const uint8_t *src = (const uint8_t *)data;
    while (bytes > 0) {
        size_t n = bytes < sizeof chunk ? (size_t)bytes : sizeof chunk;
        bg_f32_le_copy(chunk, src, n);
        BG_CHECK(bg_atomic_file_write(file, chunk, n));
        src += n;
        bytes -= n;
    }
    return BG_OK;
}

/* The header, then each tensor's data, in one atomic replace of `path`. */
static bg_status_t file_write(const char *path, const uint8_t *header, size_t header_size,
                              const bg_safetensors_tensor_t *tensors, int count,
                              const uint64_t *bytes) {
    bg_atomic_file_t file;
    BG_CHECK(bg_atomic_file_open(&file, path));
    bg_status_t status = bg_atomic_file_write(&file, header, header_size);
    for (int i = 0; status == BG_OK && i < count; i++)
        if (bytes[i] > 0) status = floats_write(&file, tensors[i].data, bytes[i]);
    if (status != BG_OK) {
        bg_atomic_file_abort(&file);
        return status;
    }
    return bg_atomic_file_commit(&file);
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
    return bg_safetensors_entry_compare(&((const laid_out_t *)a)->entry,
                                        &((const laid_out_t *)b)->entry);
}

/* Checks that `header` parses and lays out exactly `tensors`, so the data
 * lands where the header says. */
static bg_status_t encoded_header_check(const char *path, const uint8_t *header, size_t header_size,
                                        const bg_safetensors_tensor_t *tensors, int count,
                                        const uint64_t *bytes) {
    uint64_t data_size = 0;
    for (int i = 0; i < count; i++) data_size += bytes[i];
    if (header_size < 8 || bg_safetensors_le64_decode(header) != header_size - 8)
        return bg_error_set(BG_ERR_INVALID, "%s: header to write: bad length prefix", path);
    if (header_size - 8 > BG_SAFETENSORS_MAX_HEADER)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: a header of %zu bytes, past the %llu a safetensors file may have "
                            "(brigade's reader's limit)",
                            path, header_size - 8, (unsigned long long)BG_SAFETENSORS_MAX_HEADER);
    char *text = malloc(header_size - 8 + 1);
    if (!text) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
    memcpy(text, header + 8, header_size - 8);
    text[header_size - 8] = '\0';
    bg_safetensors_t *st = NULL;
    laid_out_t *expected = NULL;
    bg_status_t status =
        bg_safetensors_header_parse(path, text, header_size - 8, data_size, 0, &st);
    free(text);
    if (status != BG_OK) { /* the parser's message begins with the path: kept first */
        char why[BG_ERROR_MAX];
        const char *message = bg_error_message();
        const size_t named = strlen(path);
        const int path_first = strncmp(message, path, named) == 0 && message[named] == ':' &&
                               message[named + 1] == ' ';
        snprintf(why, sizeof why, "%s", path_first ? message + named + 2 : message);
        return bg_error_set(BG_ERR_INVALID, "%s: header to write does not parse: %s", path, why);
    }
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
    if (status == BG_OK) status = file_write(path, header, header_size, tensors, count, bytes);
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
    status = file_write(path, header, header_size, tensors, count, bytes);

cleanup:
    free(header);
    free(bytes);
    return status;
}
