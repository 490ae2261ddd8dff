#include "path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

const char *bg_path_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

const char *bg_path_separator(const char *folder) {
    const size_t length = strlen(folder);
    return length > 0 && folder[length - 1] == '/' ? "" : "/";
}

char *bg_path_join(const char *folder, const char *name) {
    const size_t size = strlen(folder) + strlen(name) + 2;
    char *joined = malloc(size);
    if (joined != NULL) snprintf(joined, size, "%s%s%s", folder, bg_path_separator(folder), name);
    return joined;
}

char *bg_path_link_target(const char *path) {
    /* Linux keeps a link's target within 4095 bytes; one more byte read
     * tells a longer one (another system's) from one that fills it. */
    char target[4097];
    const ssize_t length = readlink(path, target, sizeof target - 1);
    if (length < 0) return NULL;
    if (length == (ssize_t)sizeof target - 1) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    target[length] = '\0';
    if (target[0] == '/') return strdup(target);
    char *folder = bg_path_folder(path);
    char *resolved = folder != NULL ? bg_path_join(folder, target) : NULL;
    free(folder);
    return resolved;
}

const char *bg_path_shell_word(const char *path, char *buf, size_t size) {
    const size_t plain = strspn(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789_./:@%+,=-");
    if ((path[0] != '\0' && path[plain] == '\0') || size < 3) return path;
    size_t at = 0;
    buf[at++] = '\'';
    for (const char *c = path; *c != '\0'; c++) {
        const char *piece = *c == '\'' ? "'\\''" : NULL;
        const size_t length = piece != NULL ? 4 : 1;
        if (at + length + 2 > size) return path; /* the closing quote and NUL */
        if (piece != NULL)
            memcpy(buf + at, piece, length);
        else
            buf[at] = *c;
        at += length;
    }
    buf[at++] = '\'';
    buf[at] = '\0';
    return buf;
}
