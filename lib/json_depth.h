/* How deep JSON text nests where cJSON stopped reading it: cJSON refuses
 * arrays and objects nested more than CJSON_NESTING_LIMIT levels (1,000)
 * deep, and says only where it stopped, which then reads as a syntax
 * error in valid JSON. */
#ifndef BG_JSON_DEPTH_H
#define BG_JSON_DEPTH_H

#include <stdbool.h>
#include <stddef.h>

/* The number of arrays and objects open (outside strings) before byte `at`
 * of the JSON text s[0..at). */
int bg_json_depth_at(const char *s, size_t at);

/* Whether cJSON, stopping at byte `at` of s (inside the text), stopped at
 * its nesting limit: there an array or object opens, 1,000 deep. */
bool bg_json_too_deep_at(const char *s, size_t at);

#endif
