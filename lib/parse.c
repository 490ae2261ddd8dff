#include "parse.h"

bool bg_parse_digits(const char *text, size_t len, uint64_t max, uint64_t *out) {
    if (text == NULL || len == 0) return false;
    uint64_t value = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return false;
        const unsigned digit = (unsigned)(text[i] - '0');
        if (digit > max || value > (max - digit) / 10) return false; /* value * 10 + digit > max */
        value = value * 10 + digit;
    }
    *out = value;
    return true;
}
