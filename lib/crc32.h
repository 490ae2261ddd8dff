/* CRC-32 (zlib's crc32) over buffers of any size: what checkpoints check
 * their header and tensors with, and what a checkpoint records of the data
 * a run trained on. */
#ifndef BG_CRC32_H
#define BG_CRC32_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CRC of nothing: where a running CRC starts. */
uint32_t bg_crc32_start(void);

/* `crc` carried over `size` more bytes (zlib takes an unsigned length; a
 * larger buffer goes in pieces). */
uint32_t bg_crc32_update(uint32_t crc, const uint8_t *bytes, uint64_t size);

#ifdef __cplusplus
}
#endif

#endif /* BG_CRC32_H */
