/* Scratch directories for tests that write files. */
#ifndef BG_TEST_SCRATCH_H
#define BG_TEST_SCRATCH_H

#include <stddef.h>

/* Makes a new directory /tmp/brigade-TAG-XXXXXX and writes its path into
 * dir (size bytes). Returns 0, or -1 if it could not be made. */
int bg_test_scratch_make(char *dir, size_t size, const char *tag);

/* Removes the files in dir and then dir itself (scratch directories hold no
 * subdirectories). Returns 0 when everything was removed, -1 otherwise. */
int bg_test_scratch_remove(const char *dir);

#endif /* BG_TEST_SCRATCH_H */
