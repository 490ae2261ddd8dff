#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A continuation byte: 10xxxxxx. */
static int continues(unsigned char c) { return (c & 0xc0) == 0x80; }

size_t bg_utf8_sequence(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    if (len == 0 || u[0] == 0) return 0;
    if (u[0] < 0x80) return 1;
    /* The lead byte gives the length and the range of the second byte
     * (RFC 3629's table): what rules out overlong forms (two byte strings
     * spelling one name), surrogates and code points past U+10FFFF. */
    size_t length;
    unsigned char low = 0x80, high = 0xbf;
    if (u[0] >= 0xc2 && u[0] <= 0xdf) {
        length = 2;
    } else if (u[0] >= 0xe0 && u[0] <= 0xef) {
        length = 3;
        if (u[0] == 0xe0) low = 0xa0;
        if (u[0] == 0xed) high = 0x9f;
    } else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
        length = 4;
        if (u[0] == 0xf0) low = 0x90;
        if (u[0] == 0xf4) high = 0x8f;
    } else {
        return 0;
    }
    if (len < length || u[1] < low || u[1] > high) return 0;
    for (size_t i = 2; i < length; i++)
        if (!continues(u[i])) return 0;
    return length;
}

size_t bg_utf8_invalid_at(const char *s, size_t len) {
    size_t at = 0;
    while (at < len) {
        const size_t length = bg_utf8_sequence(s + at, len - at);
        if (length == 0) return at;
        at += length;
    }
    return len;
}

char *bg_utf8_repaired(const char *text) {
    /* At most three bytes for each byte of the text. */
    const size_t n = strlen(text);
    if (n > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(3 * n + 1), *at = out;
    if (out == NULL) return NULL;
    const char *end = text + n;
    while (text < end) {
        const size_t length = bg_utf8_sequence(text, (size_t)(end - text));
        if (length == 0) {
            memcpy(at, BG_UTF8_REPLACEMENT, 3);
            at += 3;
            text++;
        } else {
            memcpy(at, text, length);
            at += length;
            text += length;
        }
    }
    *at = '\0';
    return out;
}

size_t bg_utf8_next(const char *s, bool *control) {
    const unsigned char *c = (const unsigned char *)s;
    const size_t bytes = bg_utf8_sequence(s, strnlen(s, 4));
    *control = c[0] < 0x20 || c[0] == 0x7f || (bytes == 2 && c[0] == 0xc2 && c[1] <= 0x9f) ||
               (bytes == 0 && c[0] >= 0x80 && c[0] <= 0x9f);
    return bytes > 0 ? bytes : 1;
}
