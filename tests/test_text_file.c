/* lib/text_file: results (metrics, traces, profiles, pictures) replace a
 * regular file whole (or the file a symbolic link leads to), leaving no
 * temporary file behind, and are written into devices as a redirection
 * would; inputs
 * are read whole, from files and pipes, up to a limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "text_file.h"
#include "support/scratch.h"

typedef bg_test_scratch_file_t fixture_t;

static int setup(void **state) { return bg_test_scratch_file_setup(state, "text", "metrics.json"); }

static int teardown(void **state) { return bg_test_scratch_file_teardown(state); }

static void test_replaces_a_regular_file_whole(void **state) {
    fixture_t *f = *state;
    char buf[256];
    assert_int_equal(bg_text_file_write(f->path, "{\"step_s\": 1.5, \"steps\": 80}", "metrics"),
                     BG_OK);
    assert_int_equal(bg_test_file_text(f->path, buf, sizeof buf), 29);
    assert_string_equal(buf, "{\"step_s\": 1.5, \"steps\": 80}\n");
    /* A shorter text leaves nothing of the longer one behind. */
    assert_int_equal(bg_text_file_write(f->path, "{}", "metrics"), BG_OK);
    assert_int_equal(bg_test_file_text(f->path, buf, sizeof buf), 3);
    assert_string_equal(buf, "{}\n");
    /* Replaced by a rename: no temporary file is left beside it. */
    assert_int_equal(bg_test_scratch_entries(f->dir), 1);
    struct stat info;
    assert_int_equal(stat(f->path, &info), 0);
    assert_int_equal(info.st_mode & 0777, 0644);
}

static void test_a_reader_keeps_the_old_file_whole(void **state) {
    fixture_t *f = *state;
    char buf[64];
    assert_int_equal(bg_text_file_write(f->path, "{\"loss\": 0.25}", "metrics"), BG_OK);
    FILE *reader = fopen(f->path, "rb");
    assert_non_null(reader);
    assert_int_equal(bg_text_file_write(f->path, "{\"loss\": 0.5, \"steps\": 2}", "metrics"),
                     BG_OK);
    /* Written in place, the open file would now be truncated or new. */
    size_t n = fread(buf, 1, sizeof buf - 1, reader);
    fclose(reader);
    buf[n] = '\0';
    assert_string_equal(buf, "{\"loss\": 0.25}\n");
    assert_int_equal(bg_test_file_text(f->path, buf, sizeof buf), 26);
    assert_string_equal(buf, "{\"loss\": 0.5, \"steps\": 2}\n");
}

/* A link to a regular file has that file replaced whole, as a regular
 * file is: a new file in its place (until 2026-12-06 it was written
 * through the link, in place, and a full disk left it cut short). */
static void test_replaces_what_a_symbolic_link_leads_to(void **state) {
    fixture_t *f = *state;
    char target[160], buf[64];
    snprintf(target, sizeof target, "%s/kept.json", f->dir);
    assert_int_equal(bg_text_file_write(target, "old", "metrics"), BG_OK);
    assert_int_equal(chmod(target, 0600), 0);
    assert_int_equal(symlink("kept.json", f->path), 0);
    struct stat before, info;
    assert_int_equal(stat(target, &before), 0);
    char *real = bg_text_file_link_target(f->path);
    assert_non_null(real);
    assert_non_null(strstr(real, "/kept.json"));
    free(real);
    assert_int_equal(bg_text_file_write(f->path, "new", "metrics"), BG_OK);
    assert_int_equal(lstat(f->path, &info), 0);
    assert_true(S_ISLNK(info.st_mode)); /* the link is still a link */
    assert_int_equal(stat(target, &info), 0);
    assert_true(info.st_ino != before.st_ino);   /* a new file, renamed in */
    assert_int_equal(info.st_mode & 0777, 0600); /* with the old one's mode */
    assert_int_equal(bg_test_file_text(target, buf, sizeof buf), 4);
    assert_string_equal(buf, "new\n");
    assert_int_equal(bg_test_scratch_entries(f->dir), 2);
    /* A chain through a link of a redirection's (a descriptor's, under
     * /proc) is written into, its file the same: not replaced. */
    char log[160], via[160], proc[64];
    snprintf(log, sizeof log, "%s/log.json", f->dir);
    snprintf(via, sizeof via, "%s/via", f->dir);
    FILE *held = fopen(log, "w");
    assert_non_null(held);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fileno(held));
    assert_int_equal(symlink(proc, via), 0);
    assert_int_equal(unlink(f->path), 0);
    assert_int_equal(symlink("via", f->path), 0);
    assert_null(bg_text_file_link_target(f->path));
    assert_int_equal(stat(log, &before), 0);
    assert_int_equal(bg_text_file_write(f->path, "through", "metrics"), BG_OK);
    assert_int_equal(stat(log, &info), 0);
    assert_true(info.st_ino == before.st_ino);
    fclose(held);
    assert_int_equal(bg_test_file_text(log, buf, sizeof buf), 8);
    assert_string_equal(buf, "through\n");
    assert_int_equal(unlink(via), 0);
    assert_int_equal(unlink(log), 0);
    /* Links a redirection sets up, or to no regular file, are written into. */
    assert_null(bg_text_file_link_target("/dev/stdout"));
    assert_null(bg_text_file_link_target(target)); /* no link */
    assert_int_equal(unlink(f->path), 0);
    assert_int_equal(symlink("/dev/null", f->path), 0);
    assert_null(bg_text_file_link_target(f->path));
    assert_int_equal(bg_text_file_write(f->path, "gone", "metrics"), BG_OK);
    assert_int_equal(lstat(f->path, &info), 0);
    assert_true(S_ISLNK(info.st_mode));
}

static void test_writes_into_a_device(void **state) {
    (void)state;
    /* A rename over /dev/null would replace the device (as root, for the
     * whole machine); the text goes into it instead. */
    assert_int_equal(bg_text_file_write("/dev/null", "{}", "trace"), BG_OK);
    struct stat info;
    assert_int_equal(stat("/dev/null", &info), 0);
    assert_true(S_ISCHR(info.st_mode));
    /* A device that refuses the bytes is an I/O error naming it. */
    assert_int_equal(bg_text_file_write("/dev/full", "{}", "trace"), BG_ERR_IO);
    assert_string_equal(bg_error_message(),
                        "trace: cannot write '/dev/full': No space left on device");
}

static void test_errors_name_what_and_where(void **state) {
    fixture_t *f = *state;
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/folder/trace.json", f->dir);
    assert_int_equal(bg_text_file_write(missing, "{}", "trace"), BG_ERR_IO);
    char expected[320];
    snprintf(expected, sizeof expected,
             "trace: cannot write '%s': folder '%s/no/such/folder' does not exist", missing,
             f->dir);
    assert_string_equal(bg_error_message(), expected);
    /* A folder at the path stays a folder. */
    char folder[160];
    snprintf(folder, sizeof folder, "%s/out", f->dir);
    assert_int_equal(mkdir(folder, 0755), 0);
    assert_int_equal(bg_text_file_write(folder, "{}", "metrics"), BG_ERR_IO);
    snprintf(expected, sizeof expected, "metrics: cannot open '%s': Is a directory", folder);
    assert_string_equal(bg_error_message(), expected);
    struct stat info;
    assert_int_equal(stat(folder, &info), 0);
    assert_true(S_ISDIR(info.st_mode));
    assert_int_equal(rmdir(folder), 0);
    assert_int_equal(bg_test_scratch_entries(f->dir), 0);
}

/* Read back whole, with a NUL after it; past the limit, and a folder or a
 * missing file, refused by name. */
static void test_reads_whole_up_to_a_limit(void **state) {
    fixture_t *f = *state;
    char *text = NULL;
    size_t size = 0;
    /* Longer than the first 4 KiB chunk, with a NUL inside kept. */
    char big[10000];
    for (size_t i = 0; i < sizeof big - 1; i++) big[i] = (char)('a' + i % 26);
    big[sizeof big - 1] = '\0';
    big[5000] = 'Z';
    assert_int_equal(bg_text_file_write(f->path, big, "text"), BG_OK); /* and a newline */
    assert_int_equal(bg_text_file_read(f->path, 1 << 20, "why", &text, &size), BG_OK);
    assert_int_equal(size, sizeof big);
    assert_int_equal(text[5000], 'Z');
    assert_int_equal(text[size - 1], '\n');
    assert_int_equal(text[size], '\0');
    free(text);
    /* The limit itself is allowed, one byte more is not. */
    text = NULL;
    assert_int_equal(bg_text_file_read(f->path, sizeof big, "why", &text, &size), BG_OK);
    free(text);
    text = NULL;
    assert_int_equal(bg_text_file_read(f->path, sizeof big - 1, "a note is short", &text, &size),
                     BG_ERR_PARSE);
    char expected[320];
    snprintf(expected, sizeof expected, "%s: larger than 0 MiB; a note is short", f->path);
    assert_string_equal(bg_error_message(), expected);
    assert_null(text);
    /* A folder opens but does not read; a missing file does not open. */
    assert_int_equal(bg_text_file_read(f->dir, 1 << 20, "why", &text, &size), BG_ERR_IO);
    snprintf(expected, sizeof expected, "cannot read '%s': Is a directory", f->dir);
    assert_string_equal(bg_error_message(), expected);
    assert_int_equal(unlink(f->path), 0);
    assert_int_equal(bg_text_file_read(f->path, 1 << 20, "why", &text, &size), BG_ERR_IO);
    snprintf(expected, sizeof expected, "cannot read '%s': No such file or directory", f->path);
    assert_string_equal(bg_error_message(), expected);
    assert_null(text);
}

/* A pipe has no size to trust: read to its end. */
static void test_reads_a_pipe(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "input channels=1\n", 17), 17);
    assert_int_equal(close(fds[1]), 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    char *text = NULL;
    size_t size = 0;
    assert_int_equal(bg_text_file_read(path, 1 << 20, "why", &text, &size), BG_OK);
    assert_int_equal(size, 17);
    assert_string_equal(text, "input channels=1\n");
    free(text);
    close(fds[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replaces_a_regular_file_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_reader_keeps_the_old_file_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replaces_what_a_symbolic_link_leads_to, setup,
                                        teardown),
        cmocka_unit_test(test_writes_into_a_device),
        cmocka_unit_test_setup_teardown(test_errors_name_what_and_where, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reads_whole_up_to_a_limit, setup, teardown),
        cmocka_unit_test(test_reads_a_pipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
