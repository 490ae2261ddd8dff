/* IDX files, the format of MNIST and Fashion-MNIST: a 4-byte magic (two zero
 * bytes, a type code, the number of dimensions), big-endian 32-bit sizes, then
 * the raw data. Files may be gzip-compressed; both forms are read. */
#ifndef BG_IDX_H
#define BG_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { BG_IDX_MAX_DIMS = 4 };
/* Refuse files whose data would exceed this (1 GiB): far above any dataset
 * brigade reads this way, and a guard against absurd header sizes. */
#define BG_IDX_MAX_BYTES ((uint64_t)1 << 30)

/* An IDX array of unsigned bytes (type code 0x08, the only type MNIST-style
 * datasets use; others are rejected as unsupported). */
typedef struct bg_idx {
    int ndim;
    int64_t dims[BG_IDX_MAX_DIMS];
    uint8_t *data; /* dims[0] * ... * dims[ndim-1] bytes */
    size_t size;
} bg_idx_t;

/* Parses an IDX image held in memory (already decompressed). `name` is used
 * in messages ("name: truncated: header says 47040000 data bytes, file has
 * 1000"). Rejects a bad magic, a type other than 0x08, 0 or more than
 * BG_IDX_MAX_DIMS dimensions, a zero dimension, a size product that overflows
 * or exceeds BG_IDX_MAX_BYTES, truncated data and trailing bytes:
 * BG_ERR_PARSE. *out untouched on failure. */
bg_status_t bg_idx_parse(const char *name, const uint8_t *bytes, size_t size, bg_idx_t **out);

/* Reads the file at `path`, gunzipping it if it is gzip (zlib; members in a
 * row are one file's bytes), and parses it: the header first, so that
 * memory never goes past the data it promises. A missing or unreadable
 * file, or one that is not a regular file (a FIFO, a device), is BG_ERR_IO
 * naming the path; a corrupt gzip stream, bytes after it that start no
 * other member included, is BG_ERR_PARSE. */
bg_status_t bg_idx_load(const char *path, bg_idx_t **out);

/* What a file must hold, checked before its size: a file of the other
 * kind (labels for images) is named as such, not by the data its header
 * would promise. */
typedef struct bg_idx_expect {
    int ndim;         /* dimensions it must have */
    const char *what; /* for the message: "images" */
    const char *axes; /* for the message: "count, height, width" */
} bg_idx_expect_t;

/* bg_idx_load of a file that must have expect->ndim dimensions: BG_ERR_PARSE
 * "PATH: images must have 3 dimensions (count, height, width), the file
 * has 1" otherwise. */
bg_status_t bg_idx_load_expecting(const char *path, const bg_idx_expect_t *expect, bg_idx_t **out);

/* NULL is a no-op. */
void bg_idx_destroy(bg_idx_t *idx);

#ifdef __cplusplus
}
#endif

#endif /* BG_IDX_H */
