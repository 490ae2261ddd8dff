#include "crc32.h"

#include <zlib.h>

uint32_t bg_crc32_start(void) { return (uint32_t)crc32(0, Z_NULL, 0); }

uint32_t bg_crc32_update(uint32_t crc, const uint8_t *bytes, uint64_t size) {
    while (size > 0) {
        uInt piece = size > (1u << 30) ? (1u << 30) : (uInt)size;
        crc = (uint32_t)crc32(crc, bytes, piece);
        bytes += piece;
        size -= piece;
    }
    return crc;
}
