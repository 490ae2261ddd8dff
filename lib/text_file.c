#include "text_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

bg_status_t bg_text_file_write(const char *path, const char *text, const char *what) {
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
