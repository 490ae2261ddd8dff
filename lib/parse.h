/* Whole numbers in brigade's files and option values: decimal digits and
 * nothing else. strtol and its kin would also take a sign, leading spaces,
 * hexadecimal (with base 0) and clamp an overflow; none of those is a
 * count, a step or a device number. */
#ifndef BG_PARSE_H
#define BG_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether text[0..len) is one or more decimal digits whose value is at
 * most `max`; the value into *out when it is (else *out is untouched).
 * Any length is safe: a long number is refused, never wrapped. */
bool bg_parse_digits(const char *text, size_t len, uint64_t max, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* BG_PARSE_H */
