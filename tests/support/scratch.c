#include "scratch.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int bg_test_scratch_make(char *dir, size_t size, const char *tag) {
    int n = snprintf(dir, size, "/tmp/brigade-%s-XXXXXX", tag);
    if (n < 0 || (size_t)n >= size) return -1;
    return mkdtemp(dir) != NULL ? 0 : -1;
}

int bg_test_scratch_remove(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int failed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4096];
        int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (n < 0 || (size_t)n >= sizeof path || unlink(path) != 0) failed = 1;
    }
    closedir(d);
    if (rmdir(dir) != 0) failed = 1;
    return failed ? -1 : 0;
}
