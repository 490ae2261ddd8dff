#include "path.h"

#include <stdlib.h>
#include <string.h>

char *bg_path_folder(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *from = slash != NULL ? path : ".";
    const size_t len = slash == NULL ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *folder = malloc(len + 1);
    if (folder == NULL) return NULL;
    memcpy(folder, from, len);
    folder[len] = '\0';
    return folder;
}
