/* Opening an input that is read by its size: a regular file only. */
#ifndef BG_REGULAR_FILE_H
#define BG_REGULAR_FILE_H

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens `path` for reading into *fd (close it) and its size into *size,
 * without waiting for a FIFO's writer or taking a terminal as the
 * controlling one. A directory, a device or a pipe is refused: a device
 * such as /dev/zero never ends, a pipe has no size. BG_ERR_IO "cannot read
 * 'PATH': REASON" ("a directory, not a regular file", "a device or a pipe,
 * not a regular file", or the system's). */
bg_status_t bg_regular_file_open(const char *path, int *fd, uint64_t *size);

#ifdef __cplusplus
}
#endif

#endif /* BG_REGULAR_FILE_H */
