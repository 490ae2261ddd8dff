/* The progress display without a terminal: a line at each tenth of a
 * count, and a second count after a first one printing its own tenths. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"

/* The one function of the rest of the command line progress.c calls (for
 * a training's loss, not counted here). */
const char *bg_cli_loss(double loss, char *buf, size_t size) {
    snprintf(buf, size, "%.4f", loss);
    return buf;
}

static int lines_of(FILE *out) {
    rewind(out);
    int lines = 0, c;
    while ((c = fgetc(out)) != EOF) lines += c == '\n';
    return lines;
}

/* Ten units, then four: ten lines, then four more (until 2026-12-06 the
 * second count, a profile's next phase, printed only its last). */
static void test_counts_print_their_tenths(void **state) {
    (void)state;
    FILE *out = tmpfile();
    assert_non_null(out);
    bg_progress_t p;
    bg_progress_init(&p, out, 1);
    p.what = "first:";
    bg_progress_count(&p, 0, 10);
    for (int k = 1; k <= 10; k++) bg_progress_count(&p, k, 10);
    assert_int_equal(lines_of(out), 10);
    fseek(out, 0, SEEK_END);
    p.what = "second:";
    bg_progress_count(&p, 0, 4);
    for (int k = 1; k <= 4; k++) bg_progress_count(&p, k, 4);
    assert_int_equal(lines_of(out), 14);
    char line[96];
    rewind(out);
    for (int k = 0; k < 11; k++) assert_non_null(fgets(line, sizeof line, out));
    assert_true(strncmp(line, "second: 1/4 (25%), ", 19) == 0);
    fclose(out);
}

/* The time left goes on at the rate so far: 30 s for 1 of 10 units
 * leaves 270 s; none before the first unit, none after the last. */
static void test_time_left(void **state) {
    (void)state;
    bg_progress_t p;
    bg_progress_init(&p, stderr, 1);
    p.started = 100;
    assert_float_equal(bg_progress_left_s(&p, 1, 10, 130), 270, 1e-9);
    assert_float_equal(bg_progress_left_s(&p, 5, 10, 130), 30, 1e-9);
    assert_float_equal(bg_progress_left_s(&p, 0, 10, 130), 0, 1e-9);
    assert_float_equal(bg_progress_left_s(&p, 10, 10, 130), 0, 1e-9);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_print_their_tenths),
        cmocka_unit_test(test_time_left),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
