#include "text_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_file.h"

/* Into what `path` names, as a redirection writes: for devices, FIFOs and
 * links, which a rename would replace rather than write through. */
static bg_status_t write_in_place(const char *path, const char *text, const char *what) {
    FILE *file = fopen(path, "w");
    if (file == NULL)
        return bg_error_set(BG_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(errno));
    const size_t length = strlen(text);
    int ok = fwrite(text, 1, length, file) == length && fputc('\n', file) != EOF;
    int saved = errno;
    if (fclose(file) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok)
        return bg_error_set(BG_ERR_IO, "%s: cannot write '%s': %s", what, path, strerror(saved));
    return BG_OK;
}

bg_status_t bg_text_file_write(const char *path, const char *text, const char *what) {
    struct stat info;
    if (lstat(path, &info) == 0 && !S_ISREG(info.st_mode)) return write_in_place(path, text, what);
    bg_atomic_file_t file;
    bg_status_t st = bg_atomic_file_open(&file, path);
    if (st == BG_OK) st = bg_atomic_file_write(&file, text, strlen(text));
    if (st == BG_OK) st = bg_atomic_file_write(&file, "\n", 1);
    if (st == BG_OK)
        st = bg_atomic_file_commit(&file);
    else
        bg_atomic_file_abort(&file);
    if (st != BG_OK) bg_error_prefix(st, "%s: ", what);
    return st;
}
