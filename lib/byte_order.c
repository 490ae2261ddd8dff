#include "byte_order.h"

#include <stdint.h>
#include <string.h>

int bg_host_is_little_endian(void) {
    const uint16_t probe = 1;
    uint8_t first;
    memcpy(&first, &probe, 1);
    return first == 1;
}

void bg_f32_le_copy(void *dst, const void *src, size_t bytes) {
    if (bg_host_is_little_endian()) {
        if (dst != src) memcpy(dst, src, bytes);
        return;
    }
    uint8_t *d = dst;
    const uint8_t *s = src;
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        const uint8_t b0 = s[i], b1 = s[i + 1], b2 = s[i + 2], b3 = s[i + 3];
        d[i] = b3;
        d[i + 1] = b2;
        d[i + 2] = b1;
        d[i + 3] = b0;
    }
}
