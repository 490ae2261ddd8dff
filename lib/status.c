#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Per-thread message buffer: the one piece of thread-local state in the
 * library, the errno pattern. */
static _Thread_local char error_message[BG_ERROR_MAX];
static _Thread_local char error_detail[BG_ERROR_MAX];

const char *bg_status_name(bg_status_t status) {
    switch (status) {
    case BG_OK: return "ok";
    case BG_ERR_INVALID: return "invalid";
    case BG_ERR_PARSE: return "parse";
    case BG_ERR_IO: return "io";
    case BG_ERR_NOMEM: return "out-of-memory";
    case BG_ERR_UNSUPPORTED: return "unsupported";
    case BG_ERR_NUMERIC: return "numeric";
    case BG_ERR_BACKEND: return "backend";
    case BG_ERR_INTERNAL: return "internal";
    case BG_ERR_STALLED: return "stalled";
    case BG_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown";
}

bg_status_t bg_error_set(bg_status_t status, const char *format, ...) {
    error_detail[0] = '\0';
    va_list args;
    va_start(args, format);
    vsnprintf(error_message, sizeof error_message, format, args);
    va_end(args);
    return status;
}

bg_status_t bg_error_prefix(bg_status_t status, const char *format, ...) {
    char prefix[BG_ERROR_MAX];
    char old[BG_ERROR_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(prefix, sizeof prefix, format, args);
    va_end(args);
    memcpy(old, error_message, sizeof old);
    /* Truncation is fine: the message stays a valid, shortened string. */
    size_t len = strlen(prefix);
    if (len >= sizeof error_message) len = sizeof error_message - 1;
    memcpy(error_message, prefix, len);
    size_t rest = strlen(old);
    if (rest > sizeof error_message - 1 - len) rest = sizeof error_message - 1 - len;
    memcpy(error_message + len, old, rest);
    error_message[len + rest] = '\0';
    return status;
}

void bg_error_drop_name(const char *name) {
    const size_t len = strlen(name);
    if (len == 0 || strncmp(error_message, name, len) != 0 || error_message[len] != ':' ||
        error_message[len + 1] != ' ')
        return;
    memmove(error_message, error_message + len + 2, strlen(error_message + len + 2) + 1);
}

bg_status_t bg_error_suffix(bg_status_t status, const char *format, ...) {
    /* Truncation is fine: the message stays a valid, shortened string. */
    const size_t len = strlen(error_message);
    va_list args;
    va_start(args, format);
    vsnprintf(error_message + len, sizeof error_message - len, format, args);
    va_end(args);
    return status;
}

void bg_error_set_detail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error_detail, sizeof error_detail, format, args);
    va_end(args);
}

const char *bg_error_message(void) { return error_message; }

const char *bg_error_detail(void) { return error_detail; }

void bg_error_clear(void) {
    error_message[0] = '\0';
    error_detail[0] = '\0';
}

int bg_status_exit_code(bg_status_t status) {
    switch (status) {
    case BG_OK: return 0;
    case BG_ERR_INVALID:
    case BG_ERR_PARSE:
    case BG_ERR_UNSUPPORTED: return 2;
    default: return 1;
    }
}
