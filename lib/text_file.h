/* Reading and writing a whole text file (a model spec, a JSON document, a
 * report, a picture) in one call. */
#ifndef BG_TEXT_FILE_H
#define BG_TEXT_FILE_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes `text` and a newline to `path`, replacing the file whole or not at
 * all (lib/atomic_file.h): a run killed mid-write, or a full disk, leaves
 * the earlier results as they were. Where `path` names something that is
 * not a regular file (/dev/stdout, a FIFO, a symbolic link), the text is
 * written into it instead, as a shell redirection would.
 * BG_ERR_IO "WHAT: cannot write 'PATH': reason" ("cannot open" when the
 * path cannot be opened for writing in place). */
bg_status_t bg_text_file_write(const char *path, const char *text, const char *what);

/* Reads the whole of `path` (a file, a pipe, /dev/stdin: it is read to its
 * end, not by its size) into a new string with a NUL after its *size
 * bytes (*text, to free). BG_ERR_IO "cannot read 'PATH': reason" (a
 * folder: "Is a directory"); BG_ERR_PARSE "PATH: larger than N MiB; WHY"
 * past `max_bytes`, `why` saying what the file should have been ("a model
 * spec is a short text file"). */
bg_status_t bg_text_file_read(const char *path, size_t max_bytes, const char *why, char **text,
                              size_t *size);

#ifdef __cplusplus
}
#endif

#endif /* BG_TEXT_FILE_H */
