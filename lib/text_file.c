#include "text_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "path.h"

/* The standard stream (stdout or stderr) that `path` names, as
 * /dev/stdout does, or NULL. Opening the file again would start a second
 * offset at 0 (and with "w" truncate it): where stdout is redirected to a
 * file with `>`, the report written through stdout would then overwrite
 * what was written there. */
static FILE *standard_stream(const char *path) {
    struct stat target, stream;
    if (stat(path, &target) != 0) return NULL;
    FILE *const streams[] = {stdout, stderr};
    for (int i = 0; i < 2; i++)
        if (fstat(fileno(streams[i]), &stream) == 0 && stream.st_dev == target.st_dev &&
            stream.st_ino == target.st_ino)
            return streams[i];
    return NULL;
}

/* `path` opened for writing, as fopen "w" opens it, but a FIFO without a
 * reader fails at once with ENXIO rather than waiting for one forever (a
 * run's reports come at its end, when no one may be left to read). */
static FILE *open_in_place(const char *path) {
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) return NULL;
    /* Blocking again: a reader slower than the writer is waited for. */
    const int flags = fcntl(fd, F_GETFL);
    FILE *file =
        flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "w") : NULL;
    if (file == NULL) {
        const int saved = errno;
        close(fd);
        errno = saved;
    }
    return file;
}

/* Into what `path` names, as a redirection writes: for devices, FIFOs and
 * links, which a rename would replace rather than write through; through
 * the stream itself where it names stdout or stderr. */
static bg_status_t write_in_place(const char *path, const char *text, const char *what) {
    FILE *stream = standard_stream(path);
    if (stream != NULL) {
        const int ok =
            fputs(text, stream) != EOF && fputc('\n', stream) != EOF && fflush(stream) == 0;
        if (!ok)
            return bg_error_set(BG_ERR_IO, "%s: cannot write '%s': %s", what, path,
                                strerror(errno));
        return BG_OK;
    }
    FILE *file = open_in_place(path);
    if (file == NULL) {
        const int saved = errno;
        struct stat info;
        /* ENXIO is also a socket's, or a device's without a driver. */
        if (saved == ENXIO && stat(path, &info) == 0 && S_ISFIFO(info.st_mode))
            return bg_error_set(BG_ERR_IO,
                                "%s: cannot write '%s': it is a FIFO that no process reads "
                                "(start its reader first)",
                                what, path);
        return bg_error_set(BG_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(saved));
    }
    /* A reader that closes early (`--trace >(head -c 100)`) makes this a
       failed write (EPIPE), reported as any other, not the process's end by
       SIGPIPE, which would lose the reports still to write. Ignored for the
       write alone: a SIGPIPE raised while ignored is discarded, and the
       command's own stdout keeps its disposition. No thread blocks SIGPIPE,
       where it would stay pending instead. */
    struct sigaction ignore = {.sa_handler = SIG_IGN}, previous;
    sigemptyset(&ignore.sa_mask);
    const int swapped = sigaction(SIGPIPE, &ignore, &previous) == 0;
    const size_t length = strlen(text);
    int ok = fwrite(text, 1, length, file) == length && fputc('\n', file) != EOF;
    int saved = errno;
    if (fclose(file) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (swapped) sigaction(SIGPIPE, &previous, NULL);
    if (!ok)
        return bg_error_set(BG_ERR_IO, "%s: cannot write '%s': %s", what, path, strerror(saved));
    return BG_OK;
}

static int starts_with(const char *text, const char *prefix) {
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* Under /dev or /proc, where a redirection's links live. */
static int redirection_path(const char *path) {
    return starts_with(path, "/dev/") || starts_with(path, "/proc/");
}

/* Whether the link at `hop` lies under /dev or /proc, its folder resolved
 * (w/../dev/fd/3 does); 1 where that cannot be told. */
static int redirection_hop(const char *hop) {
    char *folder = bg_path_folder(hop);
    char *real = folder != NULL ? realpath(folder, NULL) : NULL;
    const int under = real == NULL || redirection_path(real) || redirection_path(hop);
    free(real);
    free(folder);
    return under;
}

char *bg_text_file_link_target(const char *path) {
    struct stat info;
    if (lstat(path, &info) != 0 || !S_ISLNK(info.st_mode) || standard_stream(path) != NULL)
        return NULL;
    /* Every link on the way, not only the first: w/via.json -> fd3 ->
     * /dev/fd/3 is a redirection's too (a review). Past 40 links, as
     * realpath gives up, it is written into. */
    char *hop = strdup(path);
    int redirection = 0;
    for (int hops = 0; hop != NULL && !(redirection = redirection_hop(hop)); hops++) {
        if (hops == 40 || lstat(hop, &info) != 0 || !S_ISLNK(info.st_mode)) break;
        char *next = bg_path_link_target(hop);
        free(hop);
        hop = next; /* NULL: a link that could not be read */
    }
    const int written_into = hop == NULL || redirection;
    free(hop);
    if (written_into) return NULL;
    char *target = realpath(path, NULL);
    if (target != NULL && (stat(target, &info) != 0 || !S_ISREG(info.st_mode))) {
        free(target);
        target = NULL;
    }
    return target;
}

/* Replaces the regular file (or makes the file) at `path` whole. */
static bg_status_t write_whole(const char *path, const char *text, const char *what) {
    bg_atomic_file_t file;
    bg_status_t st = bg_atomic_file_open(&file, path);
    if (st == BG_OK) st = bg_atomic_file_write(&file, text, strlen(text));
    if (st == BG_OK) st = bg_atomic_file_write(&file, "\n", 1);
    if (st == BG_OK)
        st = bg_atomic_file_commit(&file);
    else
        bg_atomic_file_abort(&file);
    if (st != BG_OK) bg_error_prefix(st, "%s: ", what);
    return st;
}

bg_status_t bg_text_file_write(const char *path, const char *text, const char *what) {
    struct stat info;
    if (lstat(path, &info) != 0 || S_ISREG(info.st_mode)) return write_whole(path, text, what);
    /* Until 2026-12-06 a link was written through, in place: a full disk
     * left the file it led to cut short (a walk). */
    char *target = bg_text_file_link_target(path);
    if (target == NULL) return write_in_place(path, text, what);
    const bg_status_t st = write_whole(target, text, what);
    free(target);
    return st;
}

bg_status_t bg_text_file_read(const char *path, size_t max_bytes, const char *why, char **text,
                              size_t *size) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) return bg_error_set(BG_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    bg_status_t st = BG_OK;
    char *buffer = NULL;
    size_t used = 0, capacity = 0;
    /* In chunks, one byte past the limit to see a file over it. */
    for (;;) {
        if (used == capacity) {
            capacity = capacity == 0 ? 4096 : 2 * capacity;
            if (capacity > max_bytes + 1) capacity = max_bytes + 1;
            char *grown = realloc(buffer, capacity + 1); /* and the NUL */
            if (grown == NULL) {
                st = bg_error_set(BG_ERR_NOMEM, "cannot read '%s': out of memory", path);
                goto done;
            }
            buffer = grown;
        }
        errno = 0;
        const size_t got = fread(buffer + used, 1, capacity - used, file);
        used += got;
        if (used > max_bytes) {
            st = bg_error_set(BG_ERR_PARSE, "%s: larger than %zu MiB; %s", path, max_bytes >> 20,
                              why);
            goto done;
        }
        if (got == 0) break;
    }
    /* A folder opens but does not read (EISDIR). */
    if (ferror(file)) {
        st = bg_error_set(BG_ERR_IO, "cannot read '%s': %s", path,
                          strerror(errno != 0 ? errno : EIO));
        goto done;
    }
    buffer[used] = '\0';
    *text = buffer;
    *size = used;
    buffer = NULL;
done:
    free(buffer);
    fclose(file);
    return st;
}
