#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "text_file.h"
#include "dataset.h"
#include "cli.h"
#include "path.h"
#include "placement.h"
#include "spelling.h"
#include "svg.h"
#include "trace.h"
#include "utf8.h"

/* Writes a message for the terminal: its control characters (a file
 * name may hold any, an escape sequence among them; bg_utf8_next) as a \xNN
 * for each byte, so that none acts on the terminal; with `keep_lines`
 * (the library's own lines: an error's detail), newlines and tabs as they
 * are. */
static void put_message(const char *text, bool keep_lines) {
    for (const char *c = text; *c != '\0';) {
        bool control;
        const size_t bytes = bg_utf8_next(c, &control);
        if (keep_lines && (*c == '\n' || *c == '\t')) control = false;
        for (size_t k = 0; k < bytes; k++, c++)
            if (control)
                fprintf(stderr, "\\x%02x", (unsigned char)*c);
            else
                fputc(*c, stderr);
    }
}

const char *bg_cli_shown(const char *text, char *buf, size_t size) {
    bool control = false;
    for (const char *c = text; *c != '\0' && !control;) c += bg_utf8_next(c, &control);
    if (!control || size == 0) return text;
    size_t used = 0;
    for (const char *c = text; *c != '\0';) {
        const size_t bytes = bg_utf8_next(c, &control);
        char piece[4 * 4 + 1]; /* a character of up to 4 bytes, each as \xNN */
        size_t n = 0;
        for (size_t k = 0; k < bytes; k++)
            if (control)
                n += (size_t)snprintf(piece + n, sizeof piece - n, "\\x%02x", (unsigned char)c[k]);
            else
                piece[n++] = c[k];
        if (used + n + 1 > size) break; /* whole characters only */
        memcpy(buf + used, piece, n);
        used += n;
        c += bytes;
    }
    buf[used] = '\0';
    return buf;
}

int bg_cli_usage_error(const char *cmd, const char *format, ...) {
    va_list args;
    va_start(args, format);
    char *text = NULL;
    const int made = vasprintf(&text, format, args);
    va_end(args);
    fprintf(stderr, "brigade %s: ", cmd);
    put_message(made >= 0 ? text : format, false);
    fprintf(stderr, "\n(see 'brigade %s --help')\n", cmd);
    if (made >= 0) free(text);
    return 2;
}

/* The calling thread's message, on one line (a newline from a path or a
 * file shown as \x0a), then its detail's lines, as the library made them. */
static void put_error(void) {
    put_message(bg_error_message(), false);
    fputc('\n', stderr);
    if (bg_error_detail()[0] != '\0') {
        put_message(bg_error_detail(), true);
        fputc('\n', stderr);
    }
}

int bg_cli_fail(const char *cmd, bg_status_t status) {
    fprintf(stderr, "brigade %s: ", cmd);
    put_error();
    return bg_status_exit_code(status);
}

bg_status_t bg_cli_input_status(bg_status_t status) {
    return status == BG_ERR_IO ? BG_ERR_INVALID : status;
}

bg_status_t bg_cli_model_load(const char *path, bg_model_spec_t **out) {
    const bg_status_t status = bg_model_spec_load(path, out);
    if (status != BG_ERR_IO) return status;
    struct stat info;
    const char *prefix = "examples/";
    if (strncmp(path, prefix, strlen(prefix)) != 0 || stat(path, &info) == 0)
        return bg_cli_input_status(status);
    /* A new user's `brigade summary examples/fashion_cnn.model` outside
     * the source tree, after meson install, read only "cannot read". */
    char *installed = bg_path_join(BG_SHARE_DIR, path);
    if (installed == NULL || stat(installed, &info) != 0) {
        free(installed);
        return bg_cli_input_status(status);
    }
    char why[BG_ERROR_MAX];
    snprintf(why, sizeof why, "%s", bg_error_message());
    bg_error_set(BG_ERR_INVALID, "%s (the example models are installed in %s/examples: %s)", why,
                 BG_SHARE_DIR, installed);
    free(installed);
    return BG_ERR_INVALID;
}

static void note_data_keyword(const char *data, int given) {
    if (strcmp(data, "fashion-mnist") != 0 && strcmp(data, "synthetic") != 0) return;
    struct stat info;
    if (stat(data, &info) != 0 || !S_ISDIR(info.st_mode)) return;
    fprintf(
        stderr, "note: %s--data %s reads %s, not the folder '%s' here (--data ./%s reads that)\n",
        given ? "" : "the default ", data,
        strcmp(data, "synthetic") == 0 ? "generated data" : "Debian's Fashion-MNIST", data, data);
}

int bg_cli_stdout_errno;
int bg_cli_stdout_closed;

void bg_cli_flush_stdout(void) {
    if (fflush(stdout) != 0 && bg_cli_stdout_errno == 0) bg_cli_stdout_errno = errno;
}

void bg_cli_files_begin(bg_cli_files_guard_t *guard) {
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    guard->saved = sigaction(SIGPIPE, &ignore, &guard->before) == 0;
    bg_cli_clean_stop_signals(&guard->stops);
}

int bg_cli_stdout_reader_gone(void) {
    /* POLLERR on a pipe or FIFO means just that, and every write fails with
       EPIPE (a terminal or a socket reports other errors so). */
    struct stat info;
    struct pollfd out = {.fd = STDOUT_FILENO, .events = POLLOUT};
    return fstat(STDOUT_FILENO, &info) == 0 && S_ISFIFO(info.st_mode) && poll(&out, 1, 0) == 1 &&
           (out.revents & POLLERR);
}

void bg_cli_files_end(bg_cli_files_guard_t *guard) {
    bg_cli_flush_stdout(); /* the report, where it is still buffered */
    bg_cli_restore_stop_signals(&guard->stops);
    if (!guard->saved) return;
    sigaction(SIGPIPE, &guard->before, NULL);
    /* A write that failed inside printf left stdio no errno to keep: the
     * pipe says whether its reader is gone. */
    const int gone = bg_cli_stdout_errno == EPIPE ||
                     (bg_cli_stdout_errno == 0 && ferror(stdout) && bg_cli_stdout_reader_gone());
    if (guard->before.sa_handler == SIG_DFL && gone) raise(SIGPIPE);
}

/* The address-space limit (ulimit -v), else the data limit (ulimit -d,
 * which anonymous mappings count against since Linux 4.7), in bytes; 0:
 * neither is set. `*option` names the ulimit option. */
static uint64_t memory_limit(const char **option) {
    static const struct {
        int resource;
        const char *option;
    } limits[] = {{RLIMIT_AS, "-v"}, {RLIMIT_DATA, "-d"}};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        struct rlimit limit;
        if (getrlimit(limits[i].resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
            *option = limits[i].option;
            return (uint64_t)limit.rlim_cur;
        }
    }
    return 0;
}

int bg_cli_address_limited(void) {
    const char *option;
    return memory_limit(&option) > 0;
}

void bg_cli_note_address_limit(void) {
    const char *option = "";
    const uint64_t bytes = memory_limit(&option);
    if (bytes == 0) return;
    fprintf(stderr,
            "note: ulimit %s holds this process to %.0f MiB of %s; OpenBLAS before "
            "its fix of June 2025 (its pull request 5303; Debian 12 has 0.3.21) retries without "
            "end where it cannot map a buffer, so a run short of memory may spin at full "
            "CPU instead of failing: if it does, raise the limit (ulimit %s unlimited)\n",
            option, (double)bytes / (1 << 20), strcmp(option, "-v") == 0 ? "address space" : "data",
            option);
}

static void note_synthetic_counts(const char *data, bg_shape_t shape, int64_t classes) {
    if (strcmp(data, "synthetic") != 0) return;
    int64_t train, test;
    bg_dataset_synthetic_counts(shape, classes, &train, &test);
    if (train == BG_DATASET_SYNTHETIC_TRAIN) return;
    /* The prototypes, a float a value, can pass the bound by themselves. */
    const double prototypes = (double)classes * (double)bg_shape_numel(shape) * sizeof(float);
    char why[160];
    if (prototypes > (double)BG_DATASET_SYNTHETIC_MOST_BYTES)
        snprintf(why, sizeof why, "one each, as its %lld class prototypes alone take %.1f GiB",
                 (long long)classes, prototypes / (1 << 30));
    else
        snprintf(why, sizeof why, "%d GiB of them and their class prototypes at most",
                 BG_DATASET_SYNTHETIC_MOST_BYTES >> 30);
    fprintf(stderr,
            "note: --data synthetic makes %lld training and %lld test sample%s of "
            "%lldx%lldx%lld, not %d and %d: %s\n",
            (long long)train, (long long)test, test == 1 ? "" : "s", (long long)shape.c,
            (long long)shape.h, (long long)shape.w, BG_DATASET_SYNTHETIC_TRAIN,
            BG_DATASET_SYNTHETIC_TEST, why);
}

void bg_cli_note_data(const char *data, int given, bg_shape_t shape, int64_t classes) {
    note_data_keyword(data, given);
    note_synthetic_counts(data, shape, classes);
}

bg_status_t bg_cli_option_input_status(bg_status_t status, const char *option) {
    if (status == BG_OK) return BG_OK;
    return bg_error_prefix(bg_cli_input_status(status), "%s: ", option);
}

/* Whether argv[i] was given before it. Values never start with "--" (see
 * bg_cli_option_value), so an earlier equal argument was the option. */
static int given_before(char **argv, int i) {
    for (int k = 1; k < i; k++)
        if (strcmp(argv[k], argv[i]) == 0) return k;
    return 0;
}

/* Whether an option's value names a file or folder (where a name
 * starting with -- would need writing as ./--NAME). */
static int takes_path(const char *option) {
    static const char *const options[] = {"--chart",    "--data",   "--load", "--metrics",
                                          "--profile",  "--resume", "--save", "--timeline",
                                          "--topology", "--trace",  "-o"};
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
        if (strcmp(option, options[k]) == 0) return 1;
    return 0;
}

bg_status_t bg_cli_option_value(int argc, char **argv, int *i, const char **out) {
    const char *option = argv[*i];
    if (*i + 1 >= argc) return bg_error_set(BG_ERR_INVALID, "%s needs a value", option);
    const char *value = argv[*i + 1];
    /* "--metrics --recompute" forgot the file name; taking the next option
     * as one would write a file named --recompute and drop the option. */
    if (value[0] == '-' && value[1] == '-') {
        const int path = takes_path(option);
        return bg_error_set(BG_ERR_INVALID, "%s needs a value, got the option '%s'%s%s%s", option,
                            value,
                            path ? " (a file whose name starts with -- can be written ./" : "",
                            path ? value : "", path ? ")" : "");
    }
    /* The last would win unseen. */
    const int before = given_before(argv, *i);
    if (before > 0)
        return bg_error_set(BG_ERR_INVALID, "%s given twice ('%s' and '%s')", option,
                            argv[before + 1], value);
    *i += 1;
    *out = value;
    return BG_OK;
}

bg_status_t bg_cli_flag(char **argv, int i) {
    if (given_before(argv, i) > 0) return bg_error_set(BG_ERR_INVALID, "%s given twice", argv[i]);
    return BG_OK;
}

/* The names an unknown option is weighed against: the command's options
 * that take a value, the placement's, its flags and --help; each once. */
typedef struct option_names {
    const char *name[96];
    char flag_text[128]; /* the flags, split in place */
    size_t count;
} option_names_t;

static void add_name(option_names_t *n, const char *name) {
    for (size_t k = 0; k < n->count; k++)
        if (strcmp(n->name[k], name) == 0) return; /* sweep's --schedule is the placement's too */
    if (n->count < sizeof n->name / sizeof n->name[0]) n->name[n->count++] = name;
}

static void gather_names(option_names_t *n, const char *const *options, size_t count, int placement,
                         const char *flags) {
    n->count = 0;
    for (size_t k = 0; k < count; k++) add_name(n, options[k]);
    size_t placement_count = 0;
    const char *const *placement_names =
        placement ? bg_placement_option_names(&placement_count) : NULL;
    for (size_t k = 0; k < placement_count; k++) add_name(n, placement_names[k]);
    snprintf(n->flag_text, sizeof n->flag_text, "%s", flags != NULL ? flags : "");
    for (char *save = NULL, *flag = strtok_r(n->flag_text, " ", &save); flag != NULL;
         flag = strtok_r(NULL, " ", &save))
        add_name(n, flag);
    add_name(n, "--help");
}

/* The option among `n` that `arg` most likely misspells
 * (bg_spelling_nearest; --device is one edit from --devices and begins
 * --device-mem too: --devices); NULL for a word of fewer than two letters
 * after "--". */
static const char *nearest_option(const char *arg, const option_names_t *n) {
    if (strncmp(arg, "--", 2) != 0 || strlen(arg) < 4) return NULL;
    return bg_spelling_nearest(arg, n->name, n->count, strlen(arg) - 2);
}

bg_status_t bg_cli_unknown_option(const char *arg, const char *const *options, size_t count,
                                  int placement, const char *flags) {
    option_names_t names;
    gather_names(&names, options, count, placement, flags);
    const char *equals = strchr(arg, '=');
    char name[64] = "";
    int known = 0, flag = 0;
    if (arg[0] == '-' && arg[1] == '-' && equals != NULL && (size_t)(equals - arg) < sizeof name) {
        snprintf(name, sizeof name, "%.*s", (int)(equals - arg), arg);
        for (size_t k = 0; k < count; k++) known |= strcmp(name, options[k]) == 0;
        known |= placement && bg_placement_is_option(name) == 1;
        for (size_t k = 0; k < names.count && !known; k++) flag |= strcmp(name, names.name[k]) == 0;
    }
    if (known && equals[1] != '\0')
        return bg_error_set(BG_ERR_INVALID,
                            "unknown option '%s' (brigade takes an option's value as the next "
                            "word: '%s %s')",
                            arg, name, equals + 1);
    if (known) /* "--steps=": the value left out, or a space after '=' */
        return bg_error_set(BG_ERR_INVALID,
                            "unknown option '%s' (brigade takes an option's value as the next "
                            "word: '%s VALUE')",
                            arg, name);
    if (flag)
        return bg_error_set(BG_ERR_INVALID, "unknown option '%s' (%s takes no value)", arg, name);
    /* The end-of-options marker of getopt's tools: said so, with the way
     * to name such a file here. */
    if (strcmp(arg, "--") == 0)
        return bg_error_set(BG_ERR_INVALID,
                            "unknown option '--' (brigade reads no end-of-options marker; a file "
                            "whose name starts with - can be written ./-NAME)");
    const char *near = nearest_option(arg, &names);
    if (near != NULL)
        return bg_error_set(BG_ERR_INVALID, "unknown option '%s' (did you mean %s?)", arg, near);
    return bg_error_set(BG_ERR_INVALID, "unknown option '%s'", arg);
}

bg_status_t bg_cli_second_model(const char *first, const char *second, int values) {
    struct stat st;
    const char *stray = !values                  ? NULL
                        : stat(second, &st) != 0 ? second
                        : stat(first, &st) != 0  ? first
                                                 : NULL;
    if (stray != NULL)
        return bg_error_set(BG_ERR_INVALID,
                            "more than one MODEL given ('%s', '%s'); '%s' is no file: the end of "
                            "an option's value, written with a space?",
                            first, second, stray);
    return bg_error_set(BG_ERR_INVALID, "more than one MODEL given ('%s', '%s')", first, second);
}

bg_status_t bg_cli_for_each_item(const char *option, const char *text,
                                 bg_status_t (*take)(const char *, const char *, void *),
                                 void *ctx) {
    char item[64];
    const char *at = text;
    for (;;) {
        const char *comma = strchr(at, ',');
        const size_t len = comma ? (size_t)(comma - at) : strlen(at);
        if (len == 0)
            return bg_error_set(BG_ERR_INVALID, "%s: empty item in '%s' (expected A,B,...)", option,
                                text);
        if (len >= sizeof item)
            return bg_error_set(BG_ERR_INVALID, "%s: item '%.*s' is too long", option, (int)len,
                                at);
        memcpy(item, at, len);
        item[len] = '\0';
        BG_CHECK(take(option, item, ctx));
        if (comma == NULL) return BG_OK;
        at = comma + 1;
    }
}

bg_status_t bg_cli_parse_int(const char *option, const char *text, int64_t min, int64_t max,
                             int64_t *out) {
    char *end = NULL;
    errno = 0;
    /* Digits and an optional minus only: strtoll alone would also take
     * leading spaces and a plus sign. */
    const int digits =
        (text[0] >= '0' && text[0] <= '9') || (text[0] == '-' && text[1] >= '0' && text[1] <= '9');
    long long value = digits ? strtoll(text, &end, 10) : 0;
    if (!digits || *end != '\0')
        return bg_error_set(BG_ERR_INVALID, "%s: expected an integer, got '%s'", option, text);
    if (errno == ERANGE)
        return bg_error_set(BG_ERR_INVALID, "%s: %s is outside %" PRId64 "..%" PRId64, option, text,
                            min, max);
    if (value < min || value > max)
        return bg_error_set(BG_ERR_INVALID, "%s: %lld is outside %" PRId64 "..%" PRId64, option,
                            value, min, max);
    *out = value;
    return BG_OK;
}

bg_status_t bg_cli_parse_optimizer(const char *option, const char *text, bg_optimizer_kind_t *out) {
    bg_status_t st = bg_optimizer_kind_parse(text, out);
    return st == BG_OK ? BG_OK : bg_error_prefix(st, "%s: ", option);
}

bg_status_t bg_cli_check_optimizer(const bg_optimizer_config_t *optimizer, int argc, char **argv) {
    /* Given at all, even as 0: values never start with "--". */
    int momentum = 0;
    for (int k = 1; k < argc; k++) momentum |= strcmp(argv[k], "--momentum") == 0;
    if (optimizer->kind != BG_OPTIMIZER_SGD && momentum)
        return bg_error_set(BG_ERR_INVALID,
                            "--momentum is an SGD setting; this run uses --optimizer %s, which "
                            "would ignore it (add --optimizer sgd)",
                            bg_optimizer_kind_name(optimizer->kind));
    return BG_OK;
}

bg_status_t bg_cli_parse_double(const char *option, const char *text, double min, double max,
                                double *out) {
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    /* strtod also reads hexadecimal ("0x10" is 16), a leading '+' and
       leading space, which the integer options refuse: none is a number
       here. */
    if (text[0] == '\0' || text[0] == '+' || isspace((unsigned char)text[0]) || *end != '\0' ||
        strpbrk(text, "xX") != NULL || (errno != ERANGE && !isfinite(value)))
        return bg_error_set(BG_ERR_INVALID, "%s: expected a number, got '%s'", option, text);
    /* Past a double (1e309) is out of range; a number nearer 0 than a
       double holds at all (1e-400 reads as 0) is said so. A subnormal one
       (2e-308) strtod also flags, but holds: it is taken. */
    if (errno == ERANGE && fabs(value) > 1)
        return bg_error_set(BG_ERR_INVALID, "%s: %s is outside %g..%g", option, text, min, max);
    if (errno == ERANGE && value == 0)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: %s is nearer 0 than a double holds (about 4.9e-324); write 0 "
                            "for none",
                            option, text);
    /* As typed: %g would show 4294967297 as 4.29497e+09. */
    if (value < min || value > max)
        return bg_error_set(BG_ERR_INVALID, "%s: %s is outside %g..%g", option, text, min, max);
    *out = value == 0 ? 0 : value; /* -0 is 0, and is shown so */
    return BG_OK;
}

const char *bg_cli_rate(double per_s, char *buf, size_t size) {
    snprintf(buf, size, per_s >= 100 ? "%.0f" : "%.3g", per_s);
    return buf;
}

const char *bg_cli_loss(double loss, char *buf, size_t size) {
    if (fabs(loss) < 1e6)
        snprintf(buf, size, "%.4f", loss);
    else
        snprintf(buf, size, "%.4g", loss);
    return buf;
}

const char *bg_cli_group_digits(int64_t n, char *buf, size_t size) {
    char digits[32];
    snprintf(digits, sizeof digits, "%" PRId64, n < 0 ? -n : n);
    size_t len = strlen(digits), at = 0;
    if (n < 0 && at + 1 < size) buf[at++] = '-';
    for (size_t i = 0; i < len && at + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[at++] = ',';
        buf[at++] = digits[i];
    }
    buf[at] = '\0';
    return buf;
}

bg_status_t bg_cli_check_replaced(const char *option, const char *path) {
    if (path != NULL && strcmp(path, "-") == 0)
        return bg_error_set(BG_ERR_INVALID, "%s -: this goes to a file; give a file name", option);
    struct stat st;
    if (path != NULL && path[0] != '\0' && lstat(path, &st) == 0 && !S_ISREG(st.st_mode) &&
        !S_ISDIR(st.st_mode))
        return bg_error_set(BG_ERR_INVALID,
                            "%s: '%s' is %s; the file is replaced whole (a temporary file "
                            "renamed over it), so give a regular file's path",
                            option, path,
                            S_ISLNK(st.st_mode) ? "a symbolic link" : "not a regular file");
    return bg_cli_check_output(option, path);
}

/* In a sticky folder (like /tmp) only the owner of a file, or of the
 * folder, may replace it (rename(2) over it fails with EPERM), however
 * writable the file: found now, not when the finished run's output is
 * renamed into place (a walk: a whole run, then "rename: Operation not
 * permitted"). `file` is the regular file at `path`. */
static bg_status_t check_sticky_folder(const char *option, const char *path,
                                       const struct stat *file) {
    char *folder = bg_path_folder(path);
    if (folder == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", option);
    struct stat st;
    const uid_t me = geteuid();
    bg_status_t status = BG_OK;
    if (stat(folder, &st) == 0 && (st.st_mode & S_ISVTX) && me != 0 && me != file->st_uid &&
        me != st.st_uid)
        status = bg_error_set(BG_ERR_INVALID,
                              "%s: cannot replace '%s': it is another user's, in folder '%s', "
                              "whose sticky bit (as on /tmp) lets only its owner replace it "
                              "(give another name)",
                              option, path, folder);
    free(folder);
    return status;
}

/* Whether the folder of `path` exists and takes new files. Permission bits
 * do not tell (root passes them; /proc and read-only mounts refuse anyway),
 * so the temporary file the write at the end will make is made now and
 * removed (lib/atomic_file.h). `shown` is the path the user gave. */
static bg_status_t check_folder(const char *option, const char *shown, const char *path) {
    char *folder = bg_path_folder(path);
    if (folder == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", option);
    bg_status_t status = BG_OK;
    bg_atomic_file_t probe;
    struct stat st;
    long longest = 0;
    if (stat(folder, &st) == 0 && !S_ISDIR(st.st_mode)) {
        /* "out.json/" or "out.json/x" with out.json a file. */
        status = bg_error_set(BG_ERR_INVALID, "%s: cannot write '%s': '%s' is not a folder", option,
                              shown, folder);
    } else if (access(folder, W_OK | X_OK) != 0) {
        status = bg_error_set(BG_ERR_INVALID, "%s: cannot write '%s': folder '%s': %s", option,
                              shown, folder, strerror(errno));
    } else if (!bg_atomic_file_name_fits(path, &longest)) {
        status = bg_error_set(BG_ERR_INVALID,
                              "%s: cannot write '%s': a name of %zu bytes is too long in folder "
                              "'%s', where the temporary file written first adds 11 to it; at "
                              "most %ld bytes",
                              option, shown, strlen(bg_path_name(path)), folder, longest);
    } else if (bg_atomic_file_open(&probe, path) != BG_OK) {
        char why[BG_ERROR_MAX];
        snprintf(why, sizeof why, "%s", bg_error_message());
        status = bg_error_set(BG_ERR_INVALID,
                              "%s: cannot write '%s': no new file can be made in folder '%s' (%s)",
                              option, shown, folder, why);
    } else {
        if (bg_atomic_file_check_descriptors(&probe) != BG_OK) {
            const int error = errno;
            struct rlimit files = {0};
            getrlimit(RLIMIT_NOFILE, &files);
            status =
                bg_error_set(BG_ERR_INVALID,
                             "%s: cannot write '%s': writing it takes two file descriptors "
                             "beside those open, and a second one cannot be had (%s; ulimit "
                             "-n is %llu)",
                             option, shown, strerror(error), (unsigned long long)files.rlim_cur);
        }
        bg_atomic_file_abort(&probe);
    }
    free(folder);
    return status;
}

/* A symbolic link to no file yet: writing through it makes the file it
 * names, so that file's folder must take files. */
static bg_status_t check_link_target(const char *option, const char *path) {
    char *target = bg_path_link_target(path);
    if (target == NULL && errno == ENAMETOOLONG)
        return bg_error_set(BG_ERR_INVALID, "%s: the link '%s' names a path too long to check",
                            option, path);
    if (target == NULL)
        return bg_error_set(BG_ERR_INVALID, "%s: cannot read the link '%s': %s", option, path,
                            strerror(errno));
    const bg_status_t status = check_folder(option, path, target);
    free(target);
    return status;
}

/* Whether `path` ends in the extension of an image format other than SVG,
 * which the pictures brigade draws are not. */
static int names_another_image_format(const char *path) {
    static const char *const raster[] = {
        ".png",  ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif",
        ".tiff", ".pdf", ".eps",  ".ps",  ".svgz"}; /* .svgz: compressed, which these are not */
    const char *dot = strrchr(path, '.');
    if (dot == NULL || strchr(dot, '/') != NULL) return 0;
    for (size_t i = 0; i < sizeof raster / sizeof raster[0]; i++)
        if (strcasecmp(dot, raster[i]) == 0) return 1;
    return 0;
}

/* Whether `path`'s last extension is `extension` (".json"), in any case. */
static int has_extension(const char *path, const char *extension) {
    const char *dot = strrchr(path, '.');
    return dot != NULL && strchr(dot, '/') == NULL && strcasecmp(dot, extension) == 0;
}

bg_status_t bg_cli_check_output(const char *option, const char *path) {
    if (path == NULL) return BG_OK;
    if (path[0] == '\0') return bg_error_set(BG_ERR_INVALID, "%s: empty file name", option);
    if (strcmp(path, "-") == 0)
        return bg_error_set(BG_ERR_INVALID,
                            "%s -: this goes to a file; standard output holds the text report "
                            "(give a file name, or /dev/stdout to mix the two)",
                            option);
    const int picture = strcmp(option, "--timeline") == 0 || strcmp(option, "--chart") == 0;
    if (picture && names_another_image_format(path))
        return bg_error_set(BG_ERR_INVALID,
                            "%s %s: brigade draws SVG only; name it .svg (rsvg-convert or a "
                            "browser turns it into other formats)",
                            option, path);
    /* Swapped names (--trace t.svg --timeline t.json) would write each into
     * the other's file, a trace over the picture one meant to keep. */
    if (picture && has_extension(path, ".json"))
        return bg_error_set(BG_ERR_INVALID,
                            "%s %s: this is an SVG picture; name it .svg (a .json name is for "
                            "a JSON output, such as --metrics)",
                            option, path);
    const int json = strcmp(option, "--trace") == 0 || strcmp(option, "--metrics") == 0 ||
                     strcmp(option, "-o") == 0; /* a profile */
    if (json && has_extension(path, ".svg"))
        return bg_error_set(BG_ERR_INVALID,
                            "%s %s: this is JSON; name it .json (a .svg name is for an SVG "
                            "picture)",
                            option, path);
    /* And a report under a checkpoint's name, which --load and --resume
     * would take for one (a walk: --metrics m.safetensors was written). */
    if ((json || picture) && has_extension(path, ".safetensors"))
        return bg_error_set(BG_ERR_INVALID,
                            "%s %s: this is %s; name it %s (a .safetensors name is for a "
                            "checkpoint, --save)",
                            option, path, json ? "JSON" : "an SVG picture",
                            json ? ".json" : ".svg");
    /* A checkpoint under a report's name (--save run.json beside --metrics
     * run.json's kin) is one mix-up from being overwritten by one. */
    if (strcmp(option, "--save") == 0 &&
        (has_extension(path, ".json") || has_extension(path, ".svg")))
        return bg_error_set(BG_ERR_INVALID,
                            "%s %s: this is a safetensors checkpoint; name it .safetensors (a "
                            "%s name is for %s)",
                            option, path, has_extension(path, ".json") ? ".json" : ".svg",
                            has_extension(path, ".json") ? "a JSON output, such as --metrics"
                                                         : "an SVG picture");
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && stat(path, &st) != 0) {
        if (errno != ENOENT)
            return bg_error_set(BG_ERR_INVALID, "%s: cannot write '%s': %s", option, path,
                                strerror(errno));
        return check_link_target(option, path);
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return bg_error_set(BG_ERR_INVALID, "%s: '%s' is a directory", option, path);
        if (access(path, W_OK) != 0)
            return bg_error_set(BG_ERR_INVALID, "%s: cannot write '%s': %s", option, path,
                                strerror(errno));
        /* A regular file, or the regular file a link leads to
         * (bg_text_file_link_target), is replaced whole through a temporary
         * file beside it (lib/text_file.c, lib/atomic_file.c), so its folder
         * must take files too; a device, a FIFO or another link is written
         * into. */
        char *target = bg_text_file_link_target(path);
        if (target != NULL) {
            bg_status_t status = BG_OK;
            if (stat(target, &st) == 0) status = check_sticky_folder(option, target, &st);
            if (status == BG_OK) status = check_folder(option, path, target);
            free(target);
            return status;
        }
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return BG_OK;
        BG_CHECK(check_sticky_folder(option, path, &st));
        /* Replacing the file standard output or error goes to (`> m.json`)
         * would lose what they hold, in silence. */
        static const char *const streams[] = {"standard output", "standard error"};
        for (int fd = 1; fd <= 2; fd++) {
            struct stat stream;
            if (fstat(fd, &stream) == 0 && S_ISREG(stream.st_mode) && stream.st_dev == st.st_dev &&
                stream.st_ino == st.st_ino)
                return bg_error_set(BG_ERR_INVALID,
                                    "%s '%s' is the file %s goes to: replacing it would lose "
                                    "what that holds (give another name%s)",
                                    option, path, streams[fd - 1],
                                    fd == 1 ? ", or /dev/stdout to add it after the report" : "");
        }
    }
    /* A new file, or one replaced. */
    return check_folder(option, path, path);
}

/* Where `path` leads: a regular file's or a named FIFO's device and
 * inode, else the real path of its folder and its name (*where, to free)
 * for a file not made yet, through a link to no file yet to the file the
 * link names. 0 when it cannot be told, and for devices and what links
 * lead to otherwise, which two options may share (--metrics /dev/stdout
 * --trace /dev/stdout, a pipe then). A named FIFO is not: its reader
 * takes one writer's report and ends, and the next finds none. */
typedef struct file_key {
    int exists;
    dev_t dev;
    ino_t ino;
    char *where;
} file_key_t;

static int file_key(const char *path, file_key_t *key) {
    struct stat st;
    *key = (file_key_t){0};
    if (stat(path, &st) == 0) {
        struct stat named;
        const int fifo =
            S_ISFIFO(st.st_mode) && lstat(path, &named) == 0 && S_ISFIFO(named.st_mode);
        if (!S_ISREG(st.st_mode) && !fifo) return 0;
        key->exists = 1;
        key->dev = st.st_dev;
        key->ino = st.st_ino;
        return 1;
    }
    /* A link to no file yet: writing through it makes its target. */
    char *linked = bg_path_link_target(path);
    const char *file = linked != NULL ? linked : path;
    char *folder = bg_path_folder(file);
    char *real = folder != NULL ? realpath(folder, NULL) : NULL;
    if (real != NULL) key->where = bg_path_join(real, bg_path_name(file));
    free(real);
    free(folder);
    free(linked);
    return key->where != NULL;
}

static int same_file(const file_key_t *a, const file_key_t *b) {
    if (a->exists != b->exists) return 0;
    if (a->exists) return a->dev == b->dev && a->ino == b->ino;
    return strcmp(a->where, b->where) == 0;
}

int bg_cli_same_file(const char *a, const char *b) {
    file_key_t ka, kb;
    const int known_a = file_key(a, &ka), known_b = file_key(b, &kb);
    const int same = known_a && known_b && same_file(&ka, &kb);
    free(ka.where);
    free(kb.where);
    return same;
}

const char *bg_cli_env_topology(const char *topology_path) {
    const char *env = getenv("HWLOC_XMLFILE");
    return topology_path == NULL && env != NULL && env[0] != '\0' ? env : NULL;
}

void bg_cli_note_unbound(const bg_topology_t *topology) {
    const char *file = bg_cli_env_topology(NULL);
    if (file == NULL || bg_topology_can_bind(topology)) return;
    char shown[BG_CLI_SHOWN_MAX];
    fprintf(stderr,
            "note: hwloc read HWLOC_XMLFILE=%s for this machine and takes it for another, so the "
            "worker threads run on no core of their own (unbound); HWLOC_THISSYSTEM=1 says the "
            "file is this machine's\n",
            bg_cli_shown(file, shown, sizeof shown));
}

int bg_cli_add_data_files(bg_cli_file_t *files, int count, const char *source) {
    static char paths[BG_DATASET_FILES][BG_DATASET_PATH_MAX];
    const int found = bg_dataset_files(source, paths);
    for (int k = 0; k < found; k++)
        files[count + k] = (bg_cli_file_t){"--data", paths[k], 0, NULL, 1};
    return count + found;
}

bg_status_t bg_cli_check_distinct(const bg_cli_file_t *files, int count) {
    bg_status_t st = BG_OK;
    file_key_t *keys = calloc((size_t)(count > 0 ? count : 1), sizeof *keys);
    int *known = calloc((size_t)(count > 0 ? count : 1), sizeof *known);
    if (keys == NULL || known == NULL) {
        st = bg_error_set(BG_ERR_NOMEM, "out of memory checking the files given");
        goto done;
    }
    /* An input that does not exist is left to its loader's message, but for
     * a name that a reader tries. */
    for (int i = 0; i < count; i++)
        known[i] = files[i].path != NULL && files[i].path[0] != '\0' &&
                   file_key(files[i].path, &keys[i]) &&
                   (files[i].output || keys[i].exists || files[i].if_present);
    for (int i = 0; i < count && st == BG_OK; i++)
        for (int j = i + 1; j < count && st == BG_OK; j++) {
            const bg_cli_file_t *a = &files[i], *b = &files[j];
            if (!known[i] || !known[j] || (!a->output && !b->output)) continue;
            if (!same_file(&keys[i], &keys[j])) continue;
            if (a->output && b->output && strcmp(a->path, b->path) == 0) {
                st = bg_error_set(BG_ERR_INVALID,
                                  "%s and %s both name '%s': each output needs a file of its own",
                                  a->option, b->option, b->path);
                continue;
            }
            if (a->output && b->output) { /* a link, or another spelling */
                st = bg_error_set(BG_ERR_INVALID,
                                  "%s '%s' and %s '%s' are one file: each output needs a file of "
                                  "its own",
                                  a->option, a->path, b->option, b->path);
                continue;
            }
            const bg_cli_file_t *in = a->output ? b : a, *out = a->output ? a : b;
            const file_key_t *in_key = a->output ? &keys[j] : &keys[i];
            if (in->replaced_by != NULL && strcmp(in->replaced_by, out->option) == 0) continue;
            if (!in_key->exists) {
                st = bg_error_set(BG_ERR_INVALID,
                                  "%s '%s' is a name %s reads first where it is: writing it "
                                  "would put a file there for it to read",
                                  out->option, out->path, in->option);
                continue;
            }
            st = bg_error_set(BG_ERR_INVALID,
                              "%s '%s' is the file %s reads: writing it would destroy it",
                              out->option, out->path, in->option);
        }
done:
    for (int i = 0; keys != NULL && i < count; i++) free(keys[i].where);
    free(keys);
    free(known);
    return st;
}

/* Whether `path` is a link to the standard output that was closed at
 * start. */
static int names_closed_stdout(const char *path) {
    struct stat link, file, out;
    /* A link (/dev/stdout, /dev/fd/1) to it: /dev/full named itself is
     * full. */
    return bg_cli_stdout_closed && lstat(path, &link) == 0 && S_ISLNK(link.st_mode) &&
           stat(path, &file) == 0 && fstat(STDOUT_FILENO, &out) == 0 && file.st_dev == out.st_dev &&
           file.st_ino == out.st_ino;
}

bg_status_t bg_cli_closed_stdout_status(bg_status_t status, const char *prefix, const char *path) {
    if (status == BG_OK || !names_closed_stdout(path)) return status;
    char shown[BG_CLI_SHOWN_MAX];
    return bg_error_set(status,
                        "%scannot write '%s': it is the standard output, which was closed when "
                        "brigade started",
                        prefix, bg_cli_shown(path, shown, sizeof shown));
}

void bg_cli_output_written(bg_cli_outputs_t *outputs, bg_status_t status, const char *what,
                           const char *path) {
    if (status == BG_OK) {
        /* A note, not a result: stdout stays the report (and a --metrics
           /dev/stdout's JSON, alone after it). */
        bg_cli_flush_stdout();
        char shown[BG_CLI_SHOWN_MAX];
        fprintf(stderr, "%s written to %s\n", what, bg_cli_shown(path, shown, sizeof shown));
        return;
    }
    bg_cli_flush_stdout(); /* what it follows comes first, also into a pipe */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: ", what);
    status = bg_cli_closed_stdout_status(status, prefix, path);
    fprintf(stderr, "brigade %s: ", outputs->cmd);
    put_error();
    if (outputs->failed == BG_OK) outputs->failed = status;
}

/* A trace this large (a simulation of 1,000 steps at M = 64 on four
 * devices writes 211 MiB) gets a note: a viewer reads all of it. */
#define TRACE_NOTED_BYTES (100 * 1024 * 1024)

void bg_cli_write_timeline_files(bg_cli_outputs_t *outputs, const char *trace, const char *svg,
                                 const bg_timeline_t *tl) {
    if (trace != NULL) {
        const bg_status_t st = bg_trace_write(trace, tl);
        bg_cli_output_written(outputs, st, "trace", trace);
        struct stat info;
        if (st == BG_OK && stat(trace, &info) == 0 && S_ISREG(info.st_mode) &&
            info.st_size > TRACE_NOTED_BYTES)
            fprintf(stderr,
                    "note: the trace is %.0f MiB, %d step%s: a trace viewer reads all of it "
                    "before it shows any%s\n",
                    (double)info.st_size / (1024.0 * 1024.0), tl->steps, tl->steps == 1 ? "" : "s",
                    tl->steps == 1 ? ""
                    : strcmp(outputs->cmd, "train") == 0
                        ? "; a smaller --record-steps makes it smaller"
                        : "; fewer --steps make it smaller");
    }
    if (svg != NULL)
        bg_cli_output_written(outputs, bg_svg_timeline_write(svg, tl, tl->steps - 1), "timeline",
                              svg);
}
