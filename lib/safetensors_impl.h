/* What the safetensors reader (safetensors.c) shares with its writer
 * (safetensors_write.c); not for other callers. */
#ifndef BG_SAFETENSORS_IMPL_H
#define BG_SAFETENSORS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

/* JSON numbers arrive as doubles: from 2^53 on, neighbouring integers
 * collapse, so a larger dim or offset could silently mean another value. */
#define BG_SAFETENSORS_EXACT_LIMIT ((uint64_t)1 << 53)

/* The header key that holds the metadata object, not a tensor. */
extern const char bg_safetensors_metadata_key[];

/* Sorts `names` in place; returns a name that occurs twice, or NULL. */
const char *bg_safetensors_names_find_duplicate(const char **names, size_t count);

/* qsort order of bg_safetensors_entry_t: by data offsets, then name. */
int bg_safetensors_entry_compare(const void *a, const void *b);

/* The 8-byte little-endian integer at b. */
uint64_t bg_safetensors_le64_decode(const uint8_t *b);

/* Builds everything but the data from the JSON header text (json[json_len]
 * must be a NUL) for `data_size` bytes of data; BG_ERR_PARSE naming `name`
 * on a bad header. `in_file`: the data is what a file holds after the
 * header, so a tensor past it says the file may be cut short. */
bg_status_t bg_safetensors_header_parse(const char *name, const char *json, size_t json_len,
                                        uint64_t data_size, int in_file, bg_safetensors_t **out);

#endif /* BG_SAFETENSORS_IMPL_H */
