/* IDX parsing and loading. Every length in the header is checked against the
 * bytes actually present before anything is read, because these files come
 * from outside (and the parser is fuzzed). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* open(), close() */
#endif

#include "idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

enum {
    IDX_TYPE_UBYTE = 0x08,
    IDX_MAGIC_BYTES = 4,
    IDX_HEADER_MAX = IDX_MAGIC_BYTES + 4 * BG_IDX_MAX_DIMS,
    IDX_READ_FIRST = 1 << 16, /* first buffer; label files fit in it */
    IDX_READ_CHUNK = 1 << 24, /* gzread takes an unsigned and returns an int */
};

/* What the header says, once it has been checked against `size`. */
typedef struct idx_layout {
    int ndim;
    int64_t dims[BG_IDX_MAX_DIMS];
    size_t header_bytes;
    size_t data_bytes;
} idx_layout_t;

static uint32_t read_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* "65535x65535x65535x65535", for messages about the dimensions. */
static void format_dims(char *text, size_t capacity, const uint64_t *dims, int ndim) {
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < ndim && used < capacity; i++) {
        int n = snprintf(text + used, capacity - used, "%s%llu", i ? "x" : "",
                         (unsigned long long)dims[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

/* Validates the whole image without copying it: magic, type, dimensions,
 * and that exactly the promised data follows the header. */
static bg_status_t idx_check(const char *name, const uint8_t *bytes, size_t size,
                             const bg_idx_expect_t *expect, idx_layout_t *layout) {
    if (size < IDX_MAGIC_BYTES)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: truncated: %zu bytes, too short for the 4-byte IDX magic", name,
                            size);
    if (bytes[0] != 0 || bytes[1] != 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: bad magic 0x%02X%02X%02X%02X: not an IDX file (an IDX file "
                            "starts with two zero bytes, a type code and a dimension count)",
                            name, bytes[0], bytes[1], bytes[2], bytes[3]);
    if (bytes[2] != IDX_TYPE_UBYTE)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: unsupported IDX element type 0x%02X (brigade reads unsigned "
                            "bytes, 0x08)",
                            name, bytes[2]);
    int ndim = bytes[3];
    if (expect != NULL && ndim != expect->ndim)
        return bg_error_set(BG_ERR_PARSE, "%s: %s must have %d dimension%s (%s), the file has %d",
                            name, expect->what, expect->ndim, expect->ndim == 1 ? "" : "s",
                            expect->axes, ndim);
    if (ndim < 1 || ndim > BG_IDX_MAX_DIMS)
        return bg_error_set(BG_ERR_PARSE, "%s: IDX header has %d dimensions; brigade reads 1 to %d",
                            name, ndim, BG_IDX_MAX_DIMS);
    size_t header_bytes = IDX_MAGIC_BYTES + 4 * (size_t)ndim;
    if (size < header_bytes)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: truncated: a %d-dimensional IDX header needs %zu bytes, file has "
                            "%zu",
                            name, ndim, header_bytes, size);

    uint64_t dims[BG_IDX_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        dims[i] = read_be32(bytes + IDX_MAGIC_BYTES + 4 * (size_t)i);
        if (dims[i] == 0)
            return bg_error_set(BG_ERR_PARSE, "%s: dimension %d of %d is zero", name, i + 1, ndim);
    }
    /* Checking the running product against the limit after every step keeps
     * it below 2^30 * 2^32, so it cannot overflow 64 bits. */
    uint64_t product = 1;
    for (int i = 0; i < ndim; i++) {
        product *= dims[i];
        if (product > BG_IDX_MAX_BYTES) {
            char text[64];
            format_dims(text, sizeof text, dims, ndim);
            return bg_error_set(BG_ERR_PARSE,
                                "%s: dimensions %s exceed the limit of %llu data bytes", name, text,
                                (unsigned long long)BG_IDX_MAX_BYTES);
        }
    }

    size_t available = size - header_bytes;
    if (available < product)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: truncated: header promises %llu data bytes, file has %zu", name,
                            (unsigned long long)product, available);
    if (available > product)
        return bg_error_set(BG_ERR_PARSE, "%s: %zu unexpected bytes after the data", name,
                            available - (size_t)product);

    layout->ndim = ndim;
    for (int i = 0; i < BG_IDX_MAX_DIMS; i++) layout->dims[i] = i < ndim ? (int64_t)dims[i] : 0;
    layout->header_bytes = header_bytes;
    layout->data_bytes = (size_t)product;
    return BG_OK;
}

/* Builds the result around `data`, which it takes over (also on failure). */
static bg_status_t idx_wrap(const idx_layout_t *layout, uint8_t *data, bg_idx_t **out) {
    bg_status_t st = BG_OK;
    bg_idx_t *idx = calloc(1, sizeof *idx);
    BG_ALLOC_CHECK_GOTO(idx, st, fail);
    idx->ndim = layout->ndim;
    memcpy(idx->dims, layout->dims, sizeof idx->dims);
    idx->data = data;
    idx->size = layout->data_bytes;
    *out = idx;
    return BG_OK;
fail:
    free(data);
    return st;
}

bg_status_t bg_idx_parse(const char *name, const uint8_t *bytes, size_t size, bg_idx_t **out) {
    if (name == NULL) name = "(memory)";
    if (out == NULL || (bytes == NULL && size > 0))
        return bg_error_set(BG_ERR_INVALID, "%s: bg_idx_parse: NULL bytes or out", name);
    idx_layout_t layout;
    BG_CHECK(idx_check(name, bytes, size, NULL, &layout));

    bg_status_t st = BG_OK;
    uint8_t *data = malloc(layout.data_bytes);
    BG_ALLOC_CHECK_GOTO(data, st, fail);
    memcpy(data, bytes + layout.header_bytes, layout.data_bytes);
    return idx_wrap(&layout, data, out);
fail:
    return st;
}

/* zlib's reason for a gzip error, without the "<fd:3>: " it puts first
 * for a stream opened with gzdopen (the message names the path already). */
static const char *gz_reason(gzFile gz, int *code) {
    const char *why = gzerror(gz, code);
    if (strncmp(why, "<fd:", 4) == 0) {
        const char *after = strstr(why, ">: ");
        if (after != NULL) why = after + 3;
    }
    return why;
}

/* Reads the whole (decompressed) file into *buffer. The cap stops a gzip bomb
 * or a huge file long before memory runs out: nothing bigger can be valid. */
static bg_status_t read_all(const char *path, gzFile gz, uint8_t **buffer, size_t *length) {
    const size_t cap = (size_t)BG_IDX_MAX_BYTES + IDX_HEADER_MAX;
    bg_status_t st = BG_OK;
    uint8_t *data = NULL;
    size_t capacity = 0, used = 0;
    for (;;) {
        if (used == capacity) {
            if (capacity > cap) {
                st = bg_error_set(BG_ERR_PARSE,
                                  "%s: more than %zu bytes (after decompression); an IDX file "
                                  "holds at most %llu data bytes",
                                  path, cap, (unsigned long long)BG_IDX_MAX_BYTES);
                goto fail;
            }
            /* One byte past the cap, so an oversized file is noticed. */
            size_t grown = capacity == 0 ? IDX_READ_FIRST : capacity * 2;
            if (grown > cap + 1) grown = cap + 1;
            uint8_t *bigger = realloc(data, grown);
            BG_ALLOC_CHECK_GOTO(bigger, st, fail);
            data = bigger;
            capacity = grown;
        }
        size_t want = capacity - used;
        if (want > IDX_READ_CHUNK) want = IDX_READ_CHUNK;
        int got = gzread(gz, data + used, (unsigned)want);
        int saved_errno = errno;
        if (got < 0) {
            int code = Z_OK;
            const char *why = gz_reason(gz, &code);
            if (code == Z_ERRNO)
                st = bg_error_set(BG_ERR_IO, "%s: read failed: %s", path, strerror(saved_errno));
            else
                st = bg_error_set(BG_ERR_PARSE, "%s: corrupt gzip data: %s", path, why);
            goto fail;
        }
        if (got == 0) break;
        used += (size_t)got;
    }
    /* A gzip stream that simply stops is not an error for gzread, only a
     * recorded Z_BUF_ERROR ("unexpected end of file"). */
    int code = Z_OK;
    const char *why = gz_reason(gz, &code);
    if (code != Z_OK) {
        st = bg_error_set(BG_ERR_PARSE, "%s: corrupt gzip data: %s", path, why);
        goto fail;
    }
    *buffer = data;
    *length = used;
    return BG_OK;
fail:
    free(data);
    return st;
}

bg_status_t bg_idx_load(const char *path, bg_idx_t **out) {
    return bg_idx_load_expecting(path, NULL, out);
}

bg_status_t bg_idx_load_expecting(const char *path, const bg_idx_expect_t *expect, bg_idx_t **out) {
    if (path == NULL || out == NULL)
        return bg_error_set(BG_ERR_INVALID, "bg_idx_load: NULL path or out");
    /* open() first so a missing file is reported with its errno, which
     * gzopen() does not promise. */
    int fd = open(path, O_RDONLY);
    if (fd < 0) return bg_error_set(BG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    gzFile gz = gzdopen(fd, "rb");
    if (gz == NULL) {
        close(fd);
        return bg_error_set(BG_ERR_NOMEM, "%s: out of memory opening the file (gzdopen)", path);
    }
    gzbuffer(gz, 1 << 17);

    uint8_t *bytes = NULL;
    size_t size = 0;
    bg_status_t st = read_all(path, gz, &bytes, &size);
    gzclose_r(gz); /* closes fd; read errors were already taken from gzerror() */
    if (st != BG_OK) return st;

    idx_layout_t layout;
    BG_CHECK_GOTO(idx_check(path, bytes, size, expect, &layout), st, fail);
    /* Reuse the read buffer for the data rather than holding two copies of
     * a file that may be hundreds of megabytes. */
    memmove(bytes, bytes + layout.header_bytes, layout.data_bytes);
    uint8_t *shrunk = realloc(bytes, layout.data_bytes);
    if (shrunk != NULL) bytes = shrunk;
    return idx_wrap(&layout, bytes, out);
fail:
    free(bytes);
    return st;
}

void bg_idx_destroy(bg_idx_t *idx) {
    if (idx == NULL) return;
    free(idx->data);
    free(idx);
}
