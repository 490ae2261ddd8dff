/* safetensors files (the Hugging Face format): an 8-byte little-endian header
 * length, a JSON header mapping tensor names to dtype, shape and
 * data_offsets [begin, end) into the byte buffer that follows, and an optional
 * "__metadata__" object of string values. brigade writes F32 tensors; files
 * load in PyTorch with safetensors.torch.load_file(). */
#ifndef BG_SAFETENSORS_H
#define BG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { BG_SAFETENSORS_MAX_DIMS = 8 };
/* Largest JSON header accepted (the reference implementation's limit). */
#define BG_SAFETENSORS_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

typedef struct bg_safetensors_entry {
    char *name;
    char dtype[8]; /* "F32", "F64", "I32", ... as written in the file */
    int ndim;
    int64_t shape[BG_SAFETENSORS_MAX_DIMS];
    uint64_t begin, end; /* byte range within data */
} bg_safetensors_entry_t;

typedef struct bg_safetensors {
    int count;
    bg_safetensors_entry_t *entries;  /* in file order of data_offsets */
    bg_safetensors_entry_t **by_name; /* the entries in name order: bg_safetensors_find's */
    int metadata_count;
    char **metadata_keys;
    char **metadata_values;
    uint8_t *data; /* the byte buffer after the header (owned) */
    uint64_t data_size;
    /* The file's first header_size bytes exactly as read: the 8-byte length
     * and the JSON text with its padding (owned). Kept so that a caller can
     * verify the header byte for byte (checkpoint.h's header checksum). */
    uint8_t *header;
    uint64_t header_size;
} bg_safetensors_t;

/* Parses a whole file held in memory. Validates: the header length against
 * BG_SAFETENSORS_MAX_HEADER and the file size; the header is a JSON object;
 * every entry has a known dtype, at most BG_SAFETENSORS_MAX_DIMS non-negative
 * dims, and data_offsets with begin <= end, end - begin == product(shape) *
 * dtype size (no overflow); the entries tile the data buffer exactly, without
 * gaps or overlaps; metadata values are strings. Any failure is BG_ERR_PARSE
 * with a message starting "name: " and naming the tensor. */
bg_status_t bg_safetensors_parse(const char *name, const uint8_t *bytes, size_t size,
                                 bg_safetensors_t **out);

/* Reads and parses the file at `path` (BG_ERR_IO if unreadable). */
bg_status_t bg_safetensors_load(const char *path, bg_safetensors_t **out);

/* The entry called `name`, or NULL. */
const bg_safetensors_entry_t *bg_safetensors_find(const bg_safetensors_t *st, const char *name);

/* The metadata value for `key`, or NULL. */
const char *bg_safetensors_metadata(const bg_safetensors_t *st, const char *key);

/* NULL is a no-op. */
void bg_safetensors_destroy(bg_safetensors_t *st);

/* One F32 tensor to write. */
typedef struct bg_safetensors_tensor {
    const char *name;
    int ndim;
    int64_t shape[BG_SAFETENSORS_MAX_DIMS];
    const float *data; /* product(shape) floats, host memory */
} bg_safetensors_tensor_t;

/* Writes `count` tensors and `metadata_count` string pairs to `path`
 * atomically: a temporary file "PATH.tmp.XXXXXX" in the same directory,
 * fsync, rename over `path`, fsync of the directory. On any failure the
 * temporary file is removed and an existing file at `path` is left as it was
 * (BG_ERR_IO naming the path and the failing call). Header padded with
 * spaces to 8 bytes; metadata first, in the given order, then the tensors in
 * the given order, their data laid out in that order.
 *
 * A writer holds an exclusive flock() on its temporary file from creation to
 * rename. A process killed mid-write leaves its temporary file behind, and
 * the kernel drops its lock; after every successful write, files named
 * "PATH.tmp." plus 6 letters or digits that nobody holds a lock on are
 * removed. Concurrent writers of the same path never remove each other's
 * files (the last rename wins); names of that form next to `path` are
 * reserved for this. Thread-safe for distinct or equal paths. */
bg_status_t bg_safetensors_write(const char *path, const bg_safetensors_tensor_t *tensors,
                                 int count, const char *const *metadata_keys,
                                 const char *const *metadata_values, int metadata_count);

/* The first bytes bg_safetensors_write would write for these tensors and
 * metadata: the 8-byte length and the JSON header padded with spaces.
 * Same argument checks as bg_safetensors_write (BG_ERR_INVALID naming `name`).
 * On success *out is a malloc'd buffer of *out_size bytes the caller frees;
 * both are untouched on failure. */
bg_status_t bg_safetensors_header_encode(const char *name, const bg_safetensors_tensor_t *tensors,
                                         int count, const char *const *metadata_keys,
                                         const char *const *metadata_values, int metadata_count,
                                         uint8_t **out, size_t *out_size);

/* Writes `header` (header_size bytes, the 8-byte length included) followed
 * by the tensors' data to `path`, atomically as bg_safetensors_write does.
 * The header must parse and describe exactly these tensors, as F32 with
 * these shapes, laid out in this order: one from bg_safetensors_header_encode
 * for the same tensors, possibly with metadata values rewritten in place
 * (same length). Anything else is BG_ERR_INVALID and writes nothing. */
bg_status_t bg_safetensors_write_encoded(const char *path, const uint8_t *header,
                                         size_t header_size, const bg_safetensors_tensor_t *tensors,
                                         int count);

#ifdef __cplusplus
}
#endif

#endif /* BG_SAFETENSORS_H */
