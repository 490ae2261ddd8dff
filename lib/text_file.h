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
 * the earlier results as they were. A symbolic link to a regular file
 * (bg_text_file_link_target) has that file replaced so, the link kept.
 * Where `path` names something else that is not a regular file
 * (/dev/stdout, a FIFO, a device, a link to one, or to no file yet), the
 * text is written into it instead, as a shell redirection would.
 * BG_ERR_IO "WHAT: cannot write 'PATH': reason" ("cannot open" when the
 * path cannot be opened for writing in place). */
bg_status_t bg_text_file_write(const char *path, const char *text, const char *what);

/* The regular file a symbolic link at `path` leads to, as its real path
 * (to free), which bg_text_file_write replaces whole; NULL where `path` is
 * no link, leads to no regular file, or is one a redirection set up (under
 * /dev or /proc, as /dev/stdout and /dev/fd/3 are, or leading there
 * first) or one that leads to the file standard output or error goes to:
 * those are written into. */
char *bg_text_file_link_target(const char *path);

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
