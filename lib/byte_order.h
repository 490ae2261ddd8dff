/* Checkpoints hold floats little-endian (safetensors, and the CRCs over
 * those bytes); hosts of either byte order read and write them through
 * here. */
#ifndef BG_BYTE_ORDER_H
#define BG_BYTE_ORDER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 on a little-endian host, where the copy below is a memcpy. */
int bg_host_is_little_endian(void);

/* Copies `bytes` bytes (a multiple of 4) of 32-bit floats from src to dst,
 * reversing each float's bytes on a big-endian host: host order to the
 * file's and back (the swap is its own inverse). src and dst may be the
 * same buffer, not otherwise overlapping ones. */
void bg_f32_le_copy(void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* BG_BYTE_ORDER_H */
