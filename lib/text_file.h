/* Writing a whole text file (a JSON document, a report) in one call. */
#ifndef BG_TEXT_FILE_H
#define BG_TEXT_FILE_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes `text` and a newline to `path`, replacing the file. BG_ERR_IO with
 * "WHAT: cannot open 'PATH': reason" or "WHAT: cannot write 'PATH':
 * reason" (a full disk shows at the close, which flushes). */
bg_status_t bg_text_file_write(const char *path, const char *text, const char *what);

#ifdef __cplusplus
}
#endif

#endif /* BG_TEXT_FILE_H */
