/* lib/atomic_file: a file is replaced whole or not at all, temporary files
 * never outlive a write, and stale ones of dead writers are cleaned up while
 * live ones are left alone. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* flock */
#endif

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "atomic_file.h"
#include "path.h"
#include "support/scratch.h"

typedef bg_test_scratch_file_t fixture_t;

static int setup(void **state) { return bg_test_scratch_file_setup(state, "atomic", "out.bin"); }

static int teardown(void **state) { return bg_test_scratch_file_teardown(state); }

static void write_file(const char *path, const char *text) {
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fputs(text, file) >= 0, 1);
    assert_int_equal(fclose(file), 0);
}

static void test_commit_writes_every_part(void **state) {
    fixture_t *f = *state;
    bg_atomic_file_t file;
    assert_int_equal(bg_atomic_file_open(&file, f->path), BG_OK);
    /* Until the commit only the temporary file exists. */
    assert_int_equal(access(f->path, F_OK), -1);
    assert_int_equal(bg_test_scratch_entries(f->dir), 1);
    assert_int_equal(bg_atomic_file_write(&file, "header|", 7), BG_OK);
    assert_int_equal(bg_atomic_file_write(&file, "", 0), BG_OK);
    assert_int_equal(bg_atomic_file_write(&file, "data", 4), BG_OK);
    assert_int_equal(bg_atomic_file_commit(&file), BG_OK);
    char buf[64];
    assert_int_equal(bg_test_file_text(f->path, buf, sizeof buf), 11);
    assert_string_equal(buf, "header|data");
    struct stat info;
    assert_int_equal(stat(f->path, &info), 0);
    assert_int_equal(info.st_mode & 0777, 0644);
    assert_int_equal(bg_test_scratch_entries(f->dir), 1); /* no temporary file left */
    assert_null(file.path);
    assert_int_equal(file.fd, -1);
}

/* The written file keeps the replaced file's mode (a private checkpoint
 * stays private); a new one gets 0666 less the umask. */
static void test_mode_of_the_written_file(void **state) {
    fixture_t *f = *state;
    write_file(f->path, "old");
    assert_int_equal(chmod(f->path, 0600), 0);
    bg_atomic_file_t file;
    assert_int_equal(bg_atomic_file_open(&file, f->path), BG_OK);
    assert_int_equal(bg_atomic_file_commit(&file), BG_OK);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(unlink(f->path), 0);
    const mode_t old_mask = umask(027);
    const bg_status_t opened = bg_atomic_file_open(&file, f->path);
    umask(old_mask);
    assert_int_equal(opened, BG_OK);
    assert_int_equal(bg_atomic_file_commit(&file), BG_OK);
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
}

static void test_commit_replaces_the_old_file(void **state) {
    fixture_t *f = *state;
    write_file(f->path, "an old and longer content");
    bg_atomic_file_t file;
    assert_int_equal(bg_atomic_file_open(&file, f->path), BG_OK);
    assert_int_equal(bg_atomic_file_write(&file, "new", 3), BG_OK);
    char buf[64];
    /* Mid-write, readers still see the old file whole. */
    assert_int_equal(bg_test_file_text(f->path, buf, sizeof buf), 25);
    assert_int_equal(bg_atomic_file_commit(&file), BG_OK);
    assert_int_equal(bg_test_file_text(f->path, buf, sizeof buf), 3);
    assert_string_equal(buf, "new");
    assert_int_equal(bg_test_scratch_entries(f->dir), 1);
}

static void test_abort_keeps_the_old_file(void **state) {
    fixture_t *f = *state;
    write_file(f->path, "old");
    bg_atomic_file_t file;
    assert_int_equal(bg_atomic_file_open(&file, f->path), BG_OK);
    assert_int_equal(bg_atomic_file_write(&file, "half of the new", 15), BG_OK);
    assert_int_equal(bg_test_scratch_entries(f->dir), 2);
    bg_atomic_file_abort(&file);
    char buf[64];
    assert_int_equal(bg_test_file_text(f->path, buf, sizeof buf), 3);
    assert_string_equal(buf, "old");
    assert_int_equal(bg_test_scratch_entries(f->dir), 1);
    bg_atomic_file_abort(&file); /* a second abort does nothing */
    assert_int_equal(bg_test_scratch_entries(f->dir), 1);
}

static void test_open_in_a_missing_directory_names_the_path(void **state) {
    fixture_t *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/missing/out.bin", f->dir);
    bg_atomic_file_t file;
    assert_int_equal(bg_atomic_file_open(&file, path), BG_ERR_IO);
    char want[512];
    snprintf(want, sizeof want, "cannot write '%s': folder '%s/missing' does not exist", path,
             f->dir);
    assert_string_equal(bg_error_message(), want);
    bg_error_clear();
    assert_null(file.path);
    assert_null(file.temp);
    assert_int_equal(file.fd, -1);
    bg_atomic_file_abort(&file); /* safe on the emptied file */
    assert_int_equal(bg_test_scratch_entries(f->dir), 0);
}

/* A name that fits the folder but not with the temporary file's 11 bytes
 * added is refused saying so (mkostemp's "File name too long" named
 * neither), and one 11 bytes shorter is written. */
static void test_name_too_long_for_the_temporary_file(void **state) {
    fixture_t *f = *state;
    const long name_max = pathconf(f->dir, _PC_NAME_MAX);
    if (name_max < 20 || name_max > 4000) skip(); /* no limit to test against */
    char name[4096], path[4200];
    memset(name, 'n', (size_t)name_max - 2);
    name[name_max - 2] = '\0';
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    long longest = 0;
    assert_int_equal(bg_atomic_file_name_fits(path, &longest), 0);
    assert_int_equal(longest, name_max - 11);
    bg_atomic_file_t file;
    assert_int_equal(bg_atomic_file_open(&file, path), BG_ERR_IO);
    char want[256];
    snprintf(want, sizeof want,
             "its name of %ld bytes is too long here: the temporary file written first adds "
             "'.tmp.XXXXXX' to it; at most %ld bytes",
             name_max - 2, name_max - 11);
    assert_non_null(strstr(bg_error_message(), want));
    bg_error_clear();
    name[name_max - 11] = '\0';
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    assert_int_equal(bg_atomic_file_name_fits(path, &longest), 1);
    assert_int_equal(bg_atomic_file_open(&file, path), BG_OK);
    assert_int_equal(bg_atomic_file_write(&file, "x", 1), BG_OK);
    assert_int_equal(bg_atomic_file_commit(&file), BG_OK);
    assert_int_equal(unlink(path), 0);
}

static void test_commit_removes_only_stale_temporary_files(void **state) {
    fixture_t *f = *state;
    char stale[160], live[160], other[160], wrong[160];
    snprintf(stale, sizeof stale, "%s.tmp.Ab12cd", f->path);       /* a dead writer's */
    snprintf(live, sizeof live, "%s.tmp.Zz99yy", f->path);         /* a live writer's */
    snprintf(other, sizeof other, "%s/in.bin.tmp.Ab12cd", f->dir); /* another file's */
    snprintf(wrong, sizeof wrong, "%s.tmp.Ab12c", f->path);        /* not mkostemp's form */
    write_file(stale, "x");
    write_file(live, "y");
    write_file(other, "z");
    write_file(wrong, "w");
    const int held = open(live, O_RDONLY | O_CLOEXEC);
    assert_true(held >= 0);
    assert_int_equal(flock(held, LOCK_EX), 0);

    bg_atomic_file_t file;
    assert_int_equal(bg_atomic_file_open(&file, f->path), BG_OK);
    assert_int_equal(bg_atomic_file_write(&file, "ok", 2), BG_OK);
    assert_int_equal(bg_atomic_file_commit(&file), BG_OK);
    close(held);

    assert_int_equal(access(stale, F_OK), -1);
    assert_int_equal(access(live, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0);
    assert_int_equal(access(wrong, F_OK), 0);
    assert_int_equal(bg_test_scratch_entries(f->dir), 4); /* out.bin and the three kept */
}

/* An open removes a dead writer's file before it writes: on a full disk
 * that file may hold the room the write needs, and a commit that failed
 * for want of it would never remove it (a tester's tmpfs). */
static void test_open_removes_stale_temporary_files(void **state) {
    fixture_t *f = *state;
    char stale[160];
    snprintf(stale, sizeof stale, "%s.tmp.Ab12cd", f->path);
    write_file(stale, "x");
    bg_atomic_file_t file;
    assert_int_equal(bg_atomic_file_open(&file, f->path), BG_OK);
    assert_int_equal(access(stale, F_OK), -1);
    assert_int_equal(bg_test_scratch_entries(f->dir), 1); /* its own temporary file */
    bg_atomic_file_abort(&file);
    assert_int_equal(bg_test_scratch_entries(f->dir), 0);
}

/* What a signal handler ending the process calls: the temporary files of
 * the writes open now are removed, the files they replace kept; a write
 * committed or aborted is no longer one of them. */
static void test_remove_unfinished(void **state) {
    fixture_t *f = *state;
    write_file(f->path, "old");
    char second[160];
    snprintf(second, sizeof second, "%s/second.bin", f->dir);
    bg_atomic_file_t file, other, done;
    assert_int_equal(bg_atomic_file_open(&done, second), BG_OK);
    assert_int_equal(bg_atomic_file_write(&done, "new", 3), BG_OK);
    assert_int_equal(bg_atomic_file_commit(&done), BG_OK);
    assert_int_equal(bg_atomic_file_open(&file, f->path), BG_OK);
    assert_int_equal(bg_atomic_file_open(&other, f->path), BG_OK);
    assert_int_equal(bg_atomic_file_write(&file, "half", 4), BG_OK);
    assert_int_equal(bg_test_scratch_entries(f->dir), 4); /* out.bin, second.bin, two temps */
    bg_atomic_file_remove_unfinished();
    assert_int_equal(bg_test_scratch_entries(f->dir), 2);
    char buf[16];
    assert_int_equal(bg_test_file_text(f->path, buf, sizeof buf), 3);
    assert_string_equal(buf, "old");
    assert_int_equal(bg_test_file_text(second, buf, sizeof buf), 3);
    assert_string_equal(buf, "new");
    bg_atomic_file_abort(&file); /* its file gone already: no harm */
    bg_atomic_file_abort(&other);
    /* The slots are free again: a new write is removed as well. */
    assert_int_equal(bg_atomic_file_open(&file, f->path), BG_OK);
    bg_atomic_file_remove_unfinished();
    assert_int_equal(bg_test_scratch_entries(f->dir), 2);
    bg_atomic_file_abort(&file);
    assert_int_equal(unlink(second), 0);
}

/* The folder a file is written in (where the rename and its sync happen). */
static void test_path_folder(void **state) {
    (void)state;
    const char *cases[][2] = {{"out.bin", "."},
                              {"/out.bin", "/"},
                              {"a/b/out.bin", "a/b"},
                              {"./out.bin", "."},
                              {"/tmp/x/out.bin", "/tmp/x"},
                              {"dir/", "dir"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *folder = bg_path_folder(cases[i][0]);
        assert_non_null(folder);
        assert_string_equal(folder, cases[i][1]);
        free(folder);
    }
}

/* Paths as one shell word: plain ones as they are, others single-quoted,
 * a quote inside closed, escaped and reopened; too long to quote, as is. */
static void test_path_shell_word(void **state) {
    (void)state;
    const char *cases[][2] = {{"runs/a-1_b.2,c=3@d%e+f:g.st", "runs/a-1_b.2,c=3@d%e+f:g.st"},
                              {"dir with space/sig.st", "'dir with space/sig.st'"},
                              {"it's.st", "'it'\\''s.st'"},
                              {"$HOME/x", "'$HOME/x'"},
                              {"", "''"}};
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(bg_path_shell_word(cases[i][0], buf, sizeof buf), cases[i][1]);
    char small[8];
    assert_string_equal(bg_path_shell_word("a b c d e", small, sizeof small), "a b c d e");
    assert_string_equal(bg_path_shell_word("a b c", small, sizeof small), "'a b c'");
}

/* A link's target as a path from the working folder: a relative target
 * joined to the link's folder; the longest target Linux keeps (4095
 * bytes) read whole. */
static void test_path_link_target(void **state) {
    fixture_t *f = *state;
    char *link = bg_path_join(f->dir, "link");
    assert_int_equal(symlink("data/train.gz", link), 0);
    char *target = bg_path_link_target(link);
    char *want = bg_path_join(f->dir, "data/train.gz");
    assert_string_equal(target, want);
    free(target);
    free(want);
    assert_int_equal(unlink(link), 0);

    char longest[4096];
    memset(longest, 'a', sizeof longest - 1);
    longest[0] = '/';
    for (size_t i = 200; i < sizeof longest - 1; i += 200) longest[i] = '/';
    longest[sizeof longest - 1] = '\0';
    assert_int_equal(symlink(longest, link), 0);
    target = bg_path_link_target(link);
    assert_non_null(target);
    assert_int_equal(strlen(target), 4095);
    assert_string_equal(target, longest);
    free(target);
    assert_int_equal(unlink(link), 0);
    free(link);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_folder),
        cmocka_unit_test(test_path_shell_word),
        cmocka_unit_test_setup_teardown(test_path_link_target, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_writes_every_part, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_replaces_the_old_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mode_of_the_written_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_keeps_the_old_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_in_a_missing_directory_names_the_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_name_too_long_for_the_temporary_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_removes_only_stale_temporary_files, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_open_removes_stale_temporary_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_unfinished, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
