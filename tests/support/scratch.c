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

int bg_test_scratch_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

long bg_test_file_text(const char *path, char *buf, size_t cap) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) return -1;
    size_t n = fread(buf, 1, cap - 1, file);
    fclose(file);
    buf[n] = '\0';
    return (long)n;
}

int bg_test_scratch_file_setup(void **state, const char *tag, const char *name) {
    bg_test_scratch_file_t *f = calloc(1, sizeof *f);
    if (f == NULL) return -1;
    int n = 0;
    if (bg_test_scratch_make(f->dir, sizeof f->dir, tag) != 0 ||
        (n = snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name)) < 0 ||
        (size_t)n >= sizeof f->path) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

int bg_test_scratch_file_teardown(void **state) {
    bg_test_scratch_file_t *f = *state;
    int result = bg_test_scratch_remove(f->dir);
    free(f);
    *state = NULL;
    return result;
}
