#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */
#endif

#include "regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bg_status_t bg_regular_file_open(const char *path, int *fd, uint64_t *size) {
    /* O_NONBLOCK: a FIFO opens at once, to be refused below; reads of a
     * regular file are not affected by it. */
    const int got = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (got < 0) return bg_error_set(BG_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    struct stat info;
    bg_status_t st = BG_OK;
    if (fstat(got, &info) != 0)
        st = bg_error_set(BG_ERR_IO, "cannot read '%s': fstat: %s", path, strerror(errno));
    else if (!S_ISREG(info.st_mode))
        st = bg_error_set(BG_ERR_IO, "cannot read '%s': %s, not a regular file", path,
                          S_ISDIR(info.st_mode) ? "a directory" : "a device or a pipe");
    if (st != BG_OK) {
        close(got);
        return st;
    }
    *fd = got;
    *size = (uint64_t)info.st_size;
    return BG_OK;
}
