#include "json_depth.h"

#include <cjson/cJSON.h>

int bg_json_depth_at(const char *s, size_t at) {
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < at; i++) {
        if (in_string) {
            if (s[i] == '\\')
                i++; /* the escaped character, a quote perhaps */
            else if (s[i] == '"')
                in_string = 0;
        } else if (s[i] == '"') {
            in_string = 1;
        } else if (s[i] == '[' || s[i] == '{') {
            depth++;
        } else if ((s[i] == ']' || s[i] == '}') && depth > 0) {
            depth--;
        }
    }
    return depth;
}

bool bg_json_too_deep_at(const char *s, size_t at) {
    /* cJSON stops at the array or object that would go past its limit. */
    return (s[at] == '[' || s[at] == '{') && bg_json_depth_at(s, at) >= CJSON_NESTING_LIMIT;
}
