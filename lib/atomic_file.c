#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkostemp, flock, fsync, strdup, O_CLOEXEC */
#endif

#include "atomic_file.h"
#include "path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most one write(2) is given: a signal is taken when the call returns,
 * so a stop signal waits for at most this much (a trace of 723 MiB in one
 * call held a Ctrl-C's answer back about a second, and merged a second
 * signal into the first). */
#define WRITE_PIECE_BYTES ((size_t)8 << 20)

/* 0 on success, -1 with errno set. */
static int write_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len < WRITE_PIECE_BYTES ? len : WRITE_PIECE_BYTES);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) {
            errno = EIO; /* a regular file never accepts zero bytes; avoid spinning */
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* fsync(fd) with the signals a process is sent blocked in this thread:
 * a sync can wait in the kernel for most of a second, and a handler due
 * to run on this thread would wait with it (a stop signal answered 0.71 s
 * late during a 605 MB checkpoint's sync), where another thread of the
 * process (a pipeline's workers) can take it at once. With no other
 * thread the signal waits, as it would have. Faults stay unblocked. */
static int fsync_signals_blocked(int fd) {
    sigset_t all, old;
    sigfillset(&all);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) sigdelset(&all, faults[i]);
    const int blocked = pthread_sigmask(SIG_BLOCK, &all, &old) == 0;
    const int result = fsync(fd);
    const int saved_errno = errno;
    if (blocked) pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved_errno;
    return result;
}

/* Makes the rename durable: without it a crash can bring back the old file,
 * or none at all. */
static bg_status_t directory_sync(const char *path) {
    char *dir = bg_path_folder(path);
    if (!dir) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
    bg_status_t status = BG_OK;
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        status = bg_error_set(BG_ERR_IO, "cannot write '%s': open directory '%s': %s", path, dir,
                              strerror(errno));
    } else {
        /* Some file systems cannot fsync a directory and say EINVAL; there
         * is nothing more to make durable there. */
        if (fsync_signals_blocked(fd) != 0 && errno != EINVAL)
            status = bg_error_set(BG_ERR_IO, "cannot write '%s': fsync directory '%s': %s", path,
                                  dir, strerror(errno));
        close(fd);
    }
    free(dir);
    return status;
}

static bg_status_t io_error(const char *path, const char *call, int error) {
    return bg_error_set(BG_ERR_IO, "cannot write '%s': %s: %s", path, call, strerror(error));
}

enum { TEMP_RANDOM_CHARS = 6 }; /* the XXXXXX of mkostemp */
static const char temp_infix[] = ".tmp.";

/* The temporary files open now, for bg_atomic_file_remove_unfinished,
 * which a signal handler calls: a slot is FREE, being FILLED (its path
 * written) or OPEN (its path whole). Lock-free atomics are
 * async-signal-safe. A file whose path is longer than a slot, or past the
 * slots, is left out (a kill would leave it, as it leaves any). */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a signal handler reads the slots");
enum { SLOTS = 4, SLOT_FREE = 0, SLOT_FILLED, SLOT_OPEN };
static atomic_int slot_state[SLOTS];
static char slot_path[SLOTS][PATH_MAX];

/* Notes `temp` as open; returns its slot, or -1 where it is left out. */
static int slot_take(const char *temp) {
    if (strlen(temp) >= PATH_MAX) return -1;
    for (int i = 0; i < SLOTS; i++) {
        int free_state = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&slot_state[i], &free_state, SLOT_FILLED)) continue;
        strcpy(slot_path[i], temp);
        atomic_store(&slot_state[i], SLOT_OPEN);
        return i;
    }
    return -1;
}

/* Gives slot `i` back (-1: none), once its file is renamed or removed. */
static void slot_give(int i) {
    if (i >= 0) atomic_store(&slot_state[i], SLOT_FREE);
}

void bg_atomic_file_remove_unfinished(void) {
    for (int i = 0; i < SLOTS; i++)
        if (atomic_load(&slot_state[i]) == SLOT_OPEN) unlink(slot_path[i]);
}

/* Creates and locks "PATH.tmp.XXXXXX" in `temp` (path_len + sizeof
 * temp_infix + TEMP_RANDOM_CHARS bytes). The lock tells temp_files_remove_stale
 * in other processes that the file is alive; a cleaner that locked the new
 * file before us has unlinked it, which we see as no links, and try again. */
static int temp_create(const char *path, char *temp) {
    size_t path_len = strlen(path);
    for (int attempt = 0; attempt < 100; attempt++) {
        memcpy(temp, path, path_len);
        memcpy(temp + path_len, temp_infix, sizeof temp_infix - 1);
        memset(temp + path_len + sizeof temp_infix - 1, 'X', TEMP_RANDOM_CHARS);
        temp[path_len + sizeof temp_infix - 1 + TEMP_RANDOM_CHARS] = '\0';
        int fd = mkostemp(temp, O_CLOEXEC);
        if (fd < 0) return -1;
        int locked;
        while ((locked = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
        }
        /* Without working locks (some network file systems) the file stays
         * unlocked; cleaners then never take it, so writing on is safe. */
        if (locked != 0) return fd;
        struct stat info;
        if (fstat(fd, &info) != 0) {
            int error = errno;
            close(fd);
            unlink(temp);
            errno = error;
            return -1;
        }
        if (info.st_nlink > 0) return fd;
        close(fd);
    }
    errno = EEXIST;
    return -1;
}

/* True when `name` is base + ".tmp." + 6 letters or digits, mkostemp's form. */
static bool temp_name_matches(const char *name, const char *base, size_t base_len) {
    size_t infix_len = sizeof temp_infix - 1;
    if (strlen(name) != base_len + infix_len + TEMP_RANDOM_CHARS) return false;
    if (memcmp(name, base, base_len) != 0 || memcmp(name + base_len, temp_infix, infix_len) != 0)
        return false;
    for (const char *p = name + base_len + infix_len; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* Removes the temporary files of writers of `path` that died mid-write (a
 * kill, a crash, a power cut): those nobody holds a lock on. A live writer
 * holds its lock from creation to rename, so its file is never taken; the
 * name is checked to still be the locked inode before it is unlinked.
 * Best effort: a failure here leaves files behind, never fails a write. */
static void temp_files_remove_stale(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0; /* with the slash */
    size_t base_len = strlen(base);
    char *candidate = malloc(dir_len + base_len + sizeof temp_infix + TEMP_RANDOM_CHARS);
    if (!candidate) return;
    memcpy(candidate, path, dir_len);
    char *dir_name = bg_path_folder(path);
    if (!dir_name) {
        free(candidate);
        return;
    }
    DIR *dir = opendir(dir_name);
    for (struct dirent *e; dir && (e = readdir(dir)) != NULL;) {
        if (!temp_name_matches(e->d_name, base, base_len)) continue;
        strcpy(candidate + dir_len, e->d_name);
        /* O_NONBLOCK: a FIFO of that name must not hang the writer. */
        int fd = open(candidate, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) continue;
        struct stat held, named;
        if (fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            lstat(candidate, &named) == 0 && named.st_dev == held.st_dev &&
            named.st_ino == held.st_ino)
            unlink(candidate);
        close(fd);
    }
    if (dir) closedir(dir);
    free(dir_name);
    free(candidate);
}

int bg_atomic_file_name_fits(const char *path, long *longest) {
    char *folder = bg_path_folder(path);
    if (folder == NULL) return 1; /* out of memory: the write will say */
    errno = 0;
    const long name_max = pathconf(folder, _PC_NAME_MAX);
    free(folder);
    const long added = (long)(sizeof temp_infix - 1) + TEMP_RANDOM_CHARS;
    if (name_max < 0 || (long)strlen(bg_path_name(path)) + added <= name_max) return 1;
    *longest = name_max - added;
    return 0;
}

/* The process's umask, from /proc/self/status (umask() would set it, a
 * race with other threads); 022 where that does not say. */
static mode_t process_umask(void) {
    FILE *status = fopen("/proc/self/status", "re");
    unsigned mask = 022;
    if (status == NULL) return (mode_t)mask;
    char line[256];
    while (fgets(line, sizeof line, status) != NULL)
        if (sscanf(line, "Umask: %o", &mask) == 1) break;
    fclose(status);
    return (mode_t)(mask & 0777);
}

/* The mode a file written to `path` gets: the replaced file's (a private
 * checkpoint stays private), else what a new file gets, 0666 less the
 * umask. */
static mode_t new_file_mode(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 0777;
    return 0666 & ~process_umask();
}

/* The error of a temporary file beside `path` that could not be made
 * (mkostemp's `error`): a name too long for its suffix and a folder that
 * is gone in words of their own. (A folder that is there can refuse new
 * files with ENOENT too, as /proc does: mkostemp's words then.) */
static bg_status_t create_error(const char *path, int error) {
    long longest = 0;
    if (error == ENAMETOOLONG && !bg_atomic_file_name_fits(path, &longest))
        return bg_error_set(BG_ERR_IO,
                            "cannot write '%s': its name of %zu bytes is too long here: the "
                            "temporary file written first adds '%sXXXXXX' to it; at most %ld "
                            "bytes",
                            path, strlen(bg_path_name(path)), temp_infix, longest);
    if (error != ENOENT) return io_error(path, "mkostemp", error);
    char *folder = bg_path_folder(path);
    struct stat st;
    const bg_status_t status =
        folder != NULL && stat(folder, &st) == 0 && S_ISDIR(st.st_mode)
            ? io_error(path, "mkostemp", error)
            : bg_error_set(BG_ERR_IO, "cannot write '%s': folder '%s' does not exist", path,
                           folder != NULL ? folder : "?"); /* it went, or never was */
    free(folder);
    return status;
}

bg_status_t bg_atomic_file_open(bg_atomic_file_t *file, const char *path) {
    *file = (bg_atomic_file_t){.fd = -1, .slot = -1};
    const size_t path_len = strlen(path);
    char *copy = strdup(path), *temp = malloc(path_len + sizeof temp_infix + TEMP_RANDOM_CHARS);
    if (copy == NULL || temp == NULL) {
        free(copy);
        free(temp);
        return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
    }
    /* Dead writers' files first: on a full disk they may hold the room
     * this write needs, and a commit that fails would never remove them. */
    temp_files_remove_stale(path);
    const int fd = temp_create(path, temp);
    if (fd < 0) {
        const bg_status_t status = create_error(path, errno);
        free(copy);
        free(temp);
        return status;
    }
    *file = (bg_atomic_file_t){.path = copy, .temp = temp, .fd = fd, .slot = slot_take(temp)};
    /* mkostemp creates 0600: the mode the file gets instead. */
    if (fchmod(fd, new_file_mode(path)) != 0) {
        bg_status_t status = io_error(path, "fchmod", errno);
        bg_atomic_file_abort(file);
        return status;
    }
    return BG_OK;
}

bg_status_t bg_atomic_file_check_descriptors(const bg_atomic_file_t *file) {
    const int second = fcntl(file->fd, F_DUPFD_CLOEXEC, 0);
    if (second < 0) {
        const int error = errno;
        const bg_status_t status = io_error(file->path, "fcntl", error);
        errno = error;
        return status;
    }
    close(second);
    return BG_OK;
}

bg_status_t bg_atomic_file_write(bg_atomic_file_t *file, const void *data, size_t len) {
    if (write_all(file->fd, data, len) != 0) return io_error(file->path, "write", errno);
    return BG_OK;
}

/* Frees what open allocated and gives its slot back; the file is empty
 * after. */
static void forget(bg_atomic_file_t *file) {
    slot_give(file->slot);
    free(file->path);
    free(file->temp);
    *file = (bg_atomic_file_t){.fd = -1, .slot = -1};
}

void bg_atomic_file_abort(bg_atomic_file_t *file) {
    if (file->temp == NULL) return;
    unlink(file->temp);
    if (file->fd >= 0) close(file->fd);
    forget(file);
}

bg_status_t bg_atomic_file_commit(bg_atomic_file_t *file) {
    const char *path = file->path;
    bg_status_t status = BG_OK;
    if (fsync_signals_blocked(file->fd) != 0) {
        status = io_error(path, "fsync", errno);
        bg_atomic_file_abort(file);
        return status;
    }
    /* A second descriptor keeps the lock until after the rename: a cleaner
     * must not take the file while it has its temporary name, and closing
     * the first still reports late write errors (NFS) before the rename. */
    const int lock_fd = fcntl(file->fd, F_DUPFD_CLOEXEC, 0);
    if (lock_fd < 0) {
        status = io_error(path, "fcntl", errno);
        bg_atomic_file_abort(file);
        return status;
    }
    const int closed = close(file->fd);
    file->fd = -1;
    if (closed != 0)
        status = io_error(path, "close", errno);
    else if (rename(file->temp, path) != 0)
        status = io_error(path, "rename", errno);
    if (status != BG_OK) {
        unlink(file->temp);
        close(lock_fd);
        forget(file);
        return status;
    }
    close(lock_fd);
    status = directory_sync(path);
    if (status == BG_OK) temp_files_remove_stale(path);
    forget(file);
    return status;
}
