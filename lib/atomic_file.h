/* Replacing a file whole or not at all: the bytes go to a temporary file
 * beside it ("PATH.tmp.XXXXXX"), which is synced and then renamed over PATH,
 * and the directory is synced so that the rename survives a crash. A reader
 * sees the old file or the new one, never a part. Checkpoints are written
 * this way (lib/safetensors_write.c).
 *
 * The temporary file is locked while it is written. An open and a commit
 * remove temporary files of PATH that no one holds a lock on: those left by
 * writers that died mid-write (a kill, a crash, a power cut).
 *
 * Meant for regular files: a rename would replace a device or a FIFO named
 * PATH rather than write into it. */
#ifndef BG_ATOMIC_FILE_H
#define BG_ATOMIC_FILE_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_atomic_file {
    char *path; /* the file to replace (a copy) */
    char *temp; /* the temporary file being written */
    int fd;     /* of temp; -1 once closed */
    int slot;   /* where bg_atomic_file_remove_unfinished finds temp; -1: none */
} bg_atomic_file_t;

/* Creates and locks the temporary file, with the mode of the file it
 * replaces, or for a new file 0666 less the umask, as any program's. BG_ERR_IO "cannot write
 * 'PATH': CALL: reason" when it cannot (a missing directory, no permission); *file is then empty
 * and needs no abort. */
bg_status_t bg_atomic_file_open(bg_atomic_file_t *file, const char *path);

/* Whether the last component of `path` is short enough for the temporary
 * file beside it ("NAME.tmp.XXXXXX", 11 bytes more) in its folder: 1, or 0
 * with *longest set to the longest name that is (the folder's NAME_MAX less
 * 11). 1 when the folder does not say its limit. */
int bg_atomic_file_name_fits(const char *path, long *longest);

/* Takes a second descriptor of the open `file` and gives it back: the most
 * a commit holds at once (the file's and one that keeps its lock through
 * the rename). A check made early, beside bg_atomic_file_open, that a
 * commit will not run out of descriptors (a run under `ulimit -n 4` passed
 * a check of the open alone, then failed its final save). BG_ERR_IO
 * "cannot write 'PATH': fcntl: reason", errno kept. */
bg_status_t bg_atomic_file_check_descriptors(const bg_atomic_file_t *file);

/* Appends `len` bytes. On failure (BG_ERR_IO, a full disk) the caller
 * aborts. */
bg_status_t bg_atomic_file_write(bg_atomic_file_t *file, const void *data, size_t len);

/* Syncs the temporary file, renames it over the path, syncs the directory
 * and removes stale temporary files. On failure the temporary file is gone
 * and the old file (if any) is untouched, unless the directory sync alone
 * failed (the new file is then in place but may not survive a crash). The
 * file is closed either way. */
bg_status_t bg_atomic_file_commit(bg_atomic_file_t *file);

/* Removes the temporary files of every write open now (up to four), for
 * a signal handler that ends the process mid-write: async-signal-safe
 * (atomics and unlink). The paths keep their old content. */
void bg_atomic_file_remove_unfinished(void);

/* Closes and removes the temporary file; the path keeps its old content.
 * A no-op on an empty or committed file. */
void bg_atomic_file_abort(bg_atomic_file_t *file);

#ifdef __cplusplus
}
#endif

#endif /* BG_ATOMIC_FILE_H */
