/* Killing a process while it saves never costs the checkpoint: a child saves
 * two parameter sets in turn to one path, back to back, and is killed with
 * SIGKILL at 200 random moments (fixed seed); after every kill the file at
 * the path loads, verifies and holds exactly one of the two sets. Killed
 * writers may leave "PATH.tmp.XXXXXX" files, never anything else, and the
 * next successful save removes them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, usleep */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "model_spec.h"

enum { KILLS = 200, MAX_DELAY_US = 2000 };

/* 16448 parameters, 66 KB of data: a save takes long enough to be killed
 * in any of its phases. */
static const char model[] = "input channels=1 height=16 width=16\n"
                            "flatten\n"
                            "dense units=64\n"
                            "softmax_cross_entropy\n";

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The child: saves set B (step 2) and set A (step 1) in turn, writing one
 * byte to `ready` after each save, until killed (or 60 s, a safety net). */
static _Noreturn void child_run(const char *path, const bg_model_spec_t *spec, float *const sets[2],
                                int ready) {
    double start = seconds_now();
    for (uint64_t n = 0; seconds_now() - start < 60; n++) {
        int which = n % 2 == 0 ? 1 : 0;
        if (bg_checkpoint_save(path, spec, sets[which], which + 1) != BG_OK) {
            fprintf(stderr, "child: %s\n", bg_error_message());
            _exit(3);
        }
        char byte = 1;
        if (write(ready, &byte, 1) != 1) _exit(4);
    }
    _exit(5);
}

/* Waits until the child has finished `saves` saves; returns how many bytes
 * it read. */
static int saves_wait(int ready, int saves) {
    int seen = 0;
    while (seen < saves) {
        struct pollfd p = {.fd = ready, .events = POLLIN};
        int n = poll(&p, 1, 20000);
        if (n <= 0) fail_msg("the child did not save within 20 s");
        char buf[64];
        ssize_t got = read(
            ready, buf, (size_t)(saves - seen) < sizeof buf ? (size_t)(saves - seen) : sizeof buf);
        if (got <= 0) fail_msg("the child stopped before saving (read %zd)", got);
        seen += (int)got;
    }
    return seen;
}

/* Counts the directory's entries other than `name`; each must be one of
 * name's temporary files. */
static int temp_files_count(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int temps = 0;
    size_t len = strlen(name);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (strcmp(e->d_name, name) == 0) continue;
        if (strlen(e->d_name) != len + 11 || strncmp(e->d_name, name, len) != 0 ||
            strncmp(e->d_name + len, ".tmp.", 5) != 0)
            fail_msg("unexpected file '%s' beside '%s'", e->d_name, name);
        temps++;
    }
    closedir(d);
    return temps;
}

static void test_kill_during_save(void **state) {
    (void)state;
    char dir[] = "/tmp/test_kill_save.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("kill.model", model, strlen(model), &spec), BG_OK);
    size_t n = (size_t)spec->total_params;
    assert_int_equal(n, 16448);
    float *sets[2], *loaded = malloc(n * sizeof(float));
    assert_non_null(loaded);
    for (int s = 0; s < 2; s++) {
        sets[s] = malloc(n * sizeof(float));
        assert_non_null(sets[s]);
        for (size_t i = 0; i < n; i++)
            sets[s][i] = s == 0 ? (float)i * 0.001f : 1.0f - (float)i * 0.002f;
    }
    /* The file exists before the first child runs: set A, step 1. */
    assert_int_equal(bg_checkpoint_save(path, spec, sets[0], 1), BG_OK);

    int found[2] = {0, 0}, kills_leaving_temps = 0, most_temps = 0;
    double start = seconds_now();
    for (int kill_index = 0; kill_index < KILLS; kill_index++) {
        int pipe_fds[2];
        assert_int_equal(pipe(pipe_fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(pipe_fds[0]);
            child_run(path, spec, sets, pipe_fds[1]);
        }
        close(pipe_fds[1]);
        /* After one save the file holds B, after two A: waiting for one or
         * two makes both outcomes certain to occur, whatever the disk's
         * speed; the kill then lands somewhere in the next save. */
        saves_wait(pipe_fds[0], 1 + (int)(rng_next() % 2));
        usleep((useconds_t)(rng_next() % (MAX_DELAY_US + 1)));
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0) assert_int_equal(errno, EINTR);
        close(pipe_fds[0]);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
            fail_msg("kill %d: the child ended by itself (status 0x%x)", kill_index, status);

        bg_checkpoint_info_t info = {.step = -1};
        bg_status_t st = bg_checkpoint_load(path, spec, loaded, &info);
        const int64_t step = info.step;
        if (st != BG_OK) fail_msg("kill %d: %s", kill_index, bg_error_message());
        if (step != 1 && step != 2) fail_msg("kill %d: step %lld", kill_index, (long long)step);
        int which = (int)step - 1;
        if (memcmp(loaded, sets[which], n * sizeof(float)) != 0)
            fail_msg("kill %d: step %lld but not parameter set %c", kill_index, (long long)step,
                     "AB"[which]);
        found[which]++;
        int temps = temp_files_count(dir, "ckpt.safetensors");
        kills_leaving_temps += temps > 0;
        if (temps > most_temps) most_temps = temps;
    }
    print_message("%d kills in %.1f s: file held A %d times, B %d times; temporary files present "
                  "after %d kills (at most %d at once)\n",
                  KILLS, seconds_now() - start, found[0], found[1], kills_leaving_temps,
                  most_temps);
    assert_int_equal(found[0] + found[1], KILLS);
    assert_true(found[0] > 0);
    assert_true(found[1] > 0);
    /* The child saves back to back, so most kills land mid-save. */
    assert_true(kills_leaving_temps > 0);

    /* The next successful save cleans up after the killed writers. */
    assert_int_equal(bg_checkpoint_save(path, spec, sets[1], 7), BG_OK);
    assert_int_equal(temp_files_count(dir, "ckpt.safetensors"), 0);
    bg_checkpoint_info_t info = {0};
    assert_int_equal(bg_checkpoint_load(path, spec, loaded, &info), BG_OK);
    assert_int_equal(info.step, 7);

    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    for (int s = 0; s < 2; s++) free(sets[s]);
    free(loaded);
    bg_model_spec_destroy(spec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_during_save),
    };
    return cmocka_run_group_tests_name("kill_save", tests, NULL, NULL);
}
