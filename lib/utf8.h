/* UTF-8 checks for text brigade writes into JSON and SVG files, whose
 * readers (Python's json, XML parsers) refuse bytes that are not UTF-8: a
 * file name can hold any bytes but '/' and NUL. */
#ifndef BG_UTF8_H
#define BG_UTF8_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* U+FFFD, the replacement character, in UTF-8. */
#define BG_UTF8_REPLACEMENT "\xef\xbf\xbd"

/* The length (1 to 4) of the well-formed UTF-8 sequence at the start of
 * `s`, or 0 when it starts with a byte that begins none there (a stray
 * continuation byte, an overlong form, a surrogate, past U+10FFFF, a
 * sequence cut short) or with NUL. */
size_t bg_utf8_sequence(const char *s);

/* A copy of `text` with every byte that starts no well-formed sequence
 * replaced by U+FFFD: a new string to free, or NULL when memory runs out. */
char *bg_utf8_repaired(const char *text);

#ifdef __cplusplus
}
#endif

#endif /* BG_UTF8_H */
