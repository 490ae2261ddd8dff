/* Writing a whole text file (a JSON document, a report, a picture) in one
 * call. */
#ifndef BG_TEXT_FILE_H
#define BG_TEXT_FILE_H

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

#ifdef __cplusplus
}
#endif

#endif /* BG_TEXT_FILE_H */
