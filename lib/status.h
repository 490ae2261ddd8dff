/* Status codes, error messages and the check-macro family.
 *
 * Library code never prints or exits: a failing function records a message
 * (what failed, where: file, line, stage, device) with bg_error_set() and
 * returns a bg_status_t. The caller reads it with bg_error_message().
 * Messages are kept per thread, like errno, so stage worker threads do not
 * overwrite each other's errors. */
#ifndef BG_STATUS_H
#define BG_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bg_status {
    BG_OK = 0,
    BG_ERR_INVALID,     /* bad argument or bad user input (maps to exit status 2) */
    BG_ERR_PARSE,       /* malformed file: model spec, IDX, safetensors (exit 2) */
    BG_ERR_IO,          /* open/read/write/fsync failed (exit 1) */
    BG_ERR_NOMEM,       /* an allocation failed (exit 1) */
    BG_ERR_UNSUPPORTED, /* valid request this build cannot serve (exit 2) */
    BG_ERR_NUMERIC,     /* non-finite value where a finite one is required (exit 1) */
    BG_ERR_BACKEND,     /* a backend call failed (exit 1) */
    BG_ERR_INTERNAL,    /* a broken invariant: a bug in brigade (exit 1) */
    BG_ERR_STALLED,     /* a stage waited longer than the stall timeout (exit 1) */
    BG_ERR_INTERRUPTED, /* stopped on request (a signal; the command line exits
                         * with 128 + the signal's number, 1 otherwise) */
} bg_status_t;

/* Short stable name of a status ("invalid", "parse", ...). Never NULL. */
const char *bg_status_name(bg_status_t status);

/* The longest message kept, its terminator included: room for a path as
 * long as a path may be (PATH_MAX, 4096) and what is said of it, so that a
 * deep folder does not push the line, column or reason out of a message.
 * Longer messages are cut at the end. */
enum { BG_ERROR_MAX = 2 * 4096 };

/* Records a printf-style message for the calling thread and returns status,
 * so that `return bg_error_set(BG_ERR_INVALID, "...")` reads naturally. */
bg_status_t bg_error_set(bg_status_t status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepends context ("stage 2: ") to the calling thread's message and returns
 * status unchanged. */
bg_status_t bg_error_prefix(bg_status_t status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends context (" (the file holds another model)") to the calling
 * thread's message and returns status unchanged. */
bg_status_t bg_error_suffix(bg_status_t status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Sets the calling thread's detail: lines said after its message, which
 * is one line (a stalled step's flight recorder). The library alone writes
 * them; bg_error_set clears them, so that they go with their message. */
void bg_error_set_detail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* The calling thread's detail; "" when its message has none. */
const char *bg_error_detail(void);

/* Removes "NAME: " from the beginning of the calling thread's message where
 * it begins so: for a caller whose own context names what the message
 * began with (a device, "cuda:0: "), so that it is not said twice. */
void bg_error_drop_name(const char *name);

/* The calling thread's last message; "" when none was recorded. */
const char *bg_error_message(void);

/* Forgets the calling thread's last message, and its detail. */
void bg_error_clear(void);

/* Exit status the command line uses for a status: 0, 1 (failure while
 * running) or 2 (bad usage or bad input). */
int bg_status_exit_code(bg_status_t status);

/* Check macros. BG_CHECK returns the failing status from the enclosing
 * function; BG_CHECK_GOTO stores it in `st` and jumps to a cleanup label. */
#define BG_CHECK(expr)                                                                             \
    do {                                                                                           \
        bg_status_t bg_check_status_ = (expr);                                                     \
        if (bg_check_status_ != BG_OK) return bg_check_status_;                                    \
    } while (0)

#define BG_CHECK_GOTO(expr, st, label)                                                             \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) != BG_OK) goto label;                                                             \
    } while (0)

/* Allocation check: records an out-of-memory message naming the statement. */
#define BG_ALLOC_CHECK_GOTO(ptr, st, label)                                                        \
    do {                                                                                           \
        if ((ptr) == NULL) {                                                                       \
            (st) =                                                                                 \
                bg_error_set(BG_ERR_NOMEM, "%s:%d: out of memory (%s)", __FILE__, __LINE__, #ptr); \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* BG_STATUS_H */
