/* UTF-8 checks: of what brigade writes into JSON and SVG files, whose
 * readers (Python's json, XML parsers) refuse bytes that are not UTF-8 (a
 * file name can hold any bytes but '/' and NUL), and of safetensors
 * headers, which the format requires to be UTF-8. */
#ifndef BG_UTF8_H
#define BG_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* U+FFFD, the replacement character, in UTF-8. */
#define BG_UTF8_REPLACEMENT "\xef\xbf\xbd"

/* The length (1 to 4) of the well-formed UTF-8 sequence at the start of
 * s[0 .. len), or 0 when it starts with NUL or with a byte that begins none
 * there (a stray continuation byte, an overlong form, a surrogate, past
 * U+10FFFF, a sequence cut short by len or a NUL). */
size_t bg_utf8_sequence(const char *s, size_t len);

/* Offset of the first byte of s[0 .. len) that starts no well-formed
 * sequence (NUL included), or len. */
size_t bg_utf8_invalid_at(const char *s, size_t len);

/* A copy of `text` with every byte that starts no well-formed sequence
 * replaced by U+FFFD: a new string to free, or NULL when memory runs out. */
char *bg_utf8_repaired(const char *text);

/* The next character of NUL-terminated, non-empty `s`: its bytes, or 1
 * for a byte that starts no well-formed sequence. *control says whether a
 * terminal may act on it, so that it must not reach one raw: C0 (newline
 * and tab among them), DEL, C1 in UTF-8 (U+0080 to U+009F, C2 80 to C2 9F;
 * U+009B acts as ESC [), or a stray byte 0x80 to 0x9F, C1 itself to a
 * terminal in a Latin-1 locale or with 8-bit controls. */
size_t bg_utf8_next(const char *s, bool *control);

#ifdef __cplusplus
}
#endif

#endif /* BG_UTF8_H */
