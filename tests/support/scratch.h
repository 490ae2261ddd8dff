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

/* A scratch directory and a file path in it, for cmocka fixtures. */
typedef struct bg_test_scratch_file {
    char dir[64];
    char path[128];
} bg_test_scratch_file_t;

/* Makes *state a new bg_test_scratch_file_t: a fresh directory tagged
 * `tag` and the path of `name` in it (nothing is created there). Returns 0,
 * or -1 when the directory cannot be made. */
int bg_test_scratch_file_setup(void **state, const char *tag, const char *name);

/* Removes the directory (and the files in it) and frees *state: 0, or -1
 * when something could not be removed. */
int bg_test_scratch_file_teardown(void **state);

/* Entries of dir other than "." and ".." (a temporary file left behind
 * shows up here), or -1 when dir cannot be read. */
int bg_test_scratch_entries(const char *dir);

/* A file's whole content, up to cap - 1 bytes, into buf (NUL-terminated);
 * its length, or -1 when it cannot be opened. */
long bg_test_file_text(const char *path, char *buf, size_t cap);

#endif /* BG_TEST_SCRATCH_H */
