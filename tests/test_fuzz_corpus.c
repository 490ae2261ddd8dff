/* Replays the fuzz corpus (every file under fuzz/corpus/TARGET/) as an
 * ordinary test, so a corpus file that once crashed a parser keeps failing
 * CI until fixed, with or without clang: every file goes through all four
 * fuzz target bodies (fuzz/targets.c, which abort on a violated property).
 * Seeds named "ok-*" must be accepted by their own directory's parser and
 * "bad-*" refused; files the fuzzer added (hashes) only have to pass the
 * properties. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "targets.h"

typedef bg_status_t (*target_fn)(const uint8_t *data, size_t size);

static const struct {
    const char *dir;
    target_fn run;
} targets[] = {
    {"model_spec", bg_fuzz_model_spec},
    {"idx", bg_fuzz_idx},
    {"safetensors", bg_fuzz_safetensors},
    {"profile", bg_fuzz_profile},
};
enum { TARGETS = sizeof targets / sizeof targets[0] };

static uint8_t *file_read(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    /* Exactly the file's size, so ASan sees any read past its end. */
    uint8_t *bytes = malloc(len > 0 ? (size_t)len : 1);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *size = (size_t)len;
    return bytes;
}

static int name_compare(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_corpus_replay(void **state) {
    (void)state;
    const char *root = getenv("BRIGADE_SOURCE_ROOT");
    if (!root) fail_msg("BRIGADE_SOURCE_ROOT is not set (meson test sets it)");
    int files_total = 0;
    for (int t = 0; t < TARGETS; t++) {
        char dir_path[1024];
        snprintf(dir_path, sizeof dir_path, "%s/fuzz/corpus/%s", root, targets[t].dir);
        DIR *dir = opendir(dir_path);
        if (!dir) fail_msg("cannot open %s", dir_path);
        char *names[4096];
        int count = 0;
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            if (e->d_name[0] == '.') continue;
            assert_true(count < 4096);
            names[count] = strdup(e->d_name);
            assert_non_null(names[count]);
            count++;
        }
        closedir(dir);
        qsort(names, (size_t)count, sizeof names[0], name_compare);
        int accepted = 0, refused = 0, ok_seeds = 0, bad_seeds = 0;
        for (int i = 0; i < count; i++) {
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", dir_path, names[i]);
            size_t size;
            uint8_t *bytes = file_read(path, &size);
            bg_status_t own = BG_OK;
            for (int k = 0; k < TARGETS; k++) {
                bg_status_t status = targets[k].run(bytes, size);
                if (k == t) own = status;
            }
            if (strncmp(names[i], "ok-", 3) == 0) {
                if (own != BG_OK)
                    fail_msg("%s/%s: refused: %s", targets[t].dir, names[i], bg_error_message());
                ok_seeds++;
            } else if (strncmp(names[i], "bad-", 4) == 0) {
                if (own == BG_OK) fail_msg("%s/%s: accepted", targets[t].dir, names[i]);
                bad_seeds++;
            }
            accepted += own == BG_OK;
            refused += own != BG_OK;
            free(bytes);
            free(names[i]);
        }
        print_message("%s: %d files (%d ok- and %d bad- seeds): %d accepted, %d refused\n",
                      targets[t].dir, count, ok_seeds, bad_seeds, accepted, refused);
        /* Every corpus keeps valid and invalid seeds. */
        assert_true(ok_seeds >= 2);
        assert_true(bad_seeds >= 2);
        files_total += count;
    }
    assert_true(files_total >= 4 * TARGETS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_replay),
    };
    return cmocka_run_group_tests_name("fuzz_corpus", tests, NULL, NULL);
}
