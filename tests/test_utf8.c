/* UTF-8 checks (lib/utf8.c): the well-formed sequences of RFC 3629 kept,
 * every other byte replaced by U+FFFD, one for each; the first bad byte of
 * a buffer found. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* The sequence at the start of a NUL-terminated string. */
static size_t sequence(const char *s) { return bg_utf8_sequence(s, strlen(s)); }

static void test_sequence_lengths(void **state) {
    (void)state;
    assert_int_equal(sequence("a"), 1);
    assert_int_equal(sequence(""), 0);
    assert_int_equal(sequence("\xc3\xa9"), 2);         /* é */
    assert_int_equal(sequence("\xe2\x82\xac"), 3);     /* € */
    assert_int_equal(sequence("\xf0\x9f\x98\x80"), 4); /* an emoji */
    assert_int_equal(sequence("\xf4\x8f\xbf\xbf"), 4); /* U+10FFFF, the last */
    assert_int_equal(sequence("\xed\x9f\xbf"), 3);     /* U+D7FF, below the surrogates */
    /* Not well-formed: a stray continuation, overlong forms, a surrogate,
     * past U+10FFFF, bytes no sequence starts with, cut short. */
    const char *bad[] = {"\x80",
                         "\xbf",
                         "\xc0\xaf",
                         "\xc1\xbf",
                         "\xe0\x9f\xbf",
                         "\xed\xa0\x80",
                         "\xf0\x8f\xbf\xbf",
                         "\xf4\x90\x80\x80",
                         "\xf5\x80\x80\x80",
                         "\xff",
                         "\xfe",
                         "\xc3",
                         "\xe2\x82",
                         "\xf0\x9f\x98",
                         "\xe2\x28\xa1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (sequence(bad[i]) != 0) fail_msg("bad sequence %zu taken as well-formed", i);
    }
}

/* A length that cuts a sequence short ends it, as a NUL does; the first
 * bad byte of a buffer, NUL included, is found (safetensors headers). */
static void test_bounded(void **state) {
    (void)state;
    assert_int_equal(bg_utf8_sequence("\xc3\xa9", 1), 0);
    assert_int_equal(bg_utf8_sequence("\xe2\x82\xac", 2), 0);
    assert_int_equal(bg_utf8_sequence("\xe2\x82\xac", 3), 3);
    assert_int_equal(bg_utf8_sequence("a", 0), 0);
    const char header[] = "{\"n\xc3\xa9\":1}\0x\xff";
    assert_int_equal(bg_utf8_invalid_at(header, 9), 9);                 /* all of it */
    assert_int_equal(bg_utf8_invalid_at(header, sizeof header - 1), 9); /* the NUL */
    assert_int_equal(bg_utf8_invalid_at(header + 10, 2), 1);            /* "x", then 0xff */
    assert_int_equal(bg_utf8_invalid_at(header, 4), 3);                 /* é cut short */
}

static void test_repaired(void **state) {
    (void)state;
    char *text = bg_utf8_repaired("bad\xffname \xc3\xa9t\xc3\xa9 \xe2\x82 end\x80");
    assert_non_null(text);
    assert_string_equal(text, "bad" BG_UTF8_REPLACEMENT
                              "name \xc3\xa9t\xc3\xa9 " BG_UTF8_REPLACEMENT BG_UTF8_REPLACEMENT
                              " end" BG_UTF8_REPLACEMENT);
    free(text);
    text = bg_utf8_repaired("plain ASCII, kept as it is");
    assert_string_equal(text, "plain ASCII, kept as it is");
    free(text);
    /* Every byte bad: three bytes each, the most the copy is sized for. */
    text = bg_utf8_repaired("\xff\xff\xff");
    assert_string_equal(text, BG_UTF8_REPLACEMENT BG_UTF8_REPLACEMENT BG_UTF8_REPLACEMENT);
    free(text);
}

/* Asserts bg_utf8_next's bytes and control flag at the start of `s`. */
static void expect_next(const char *s, size_t bytes, bool control) {
    bool got = !control;
    assert_int_equal(bg_utf8_next(s, &got), bytes);
    assert_int_equal(got, control);
}

static void test_next(void **state) {
    (void)state;
    expect_next("\x1b[31m", 1, true); /* ESC */
    expect_next("\n", 1, true);
    expect_next("\x7f", 1, true);     /* DEL */
    expect_next("\xc2\x80", 2, true); /* U+0080, C1's first */
    expect_next("\xc2\x9b"
                "31m",
                2, true);                      /* CSI */
    expect_next("\xc2\x9f", 2, true);          /* U+009F, C1's last */
    expect_next("\xc2\xa0", 2, false);         /* U+00A0, no control */
    expect_next("\xc3\xa9t", 2, false);        /* é */
    expect_next("\xe2\x82\xac", 3, false);     /* € */
    expect_next("\xf0\x9f\x98\x80", 4, false); /* an emoji: its 9F is no C1 */
    /* Stray bytes: C1 to a Latin-1 terminal from 80 to 9F, not past. */
    expect_next("\x9b"
                "31m",
                1, true);
    expect_next("\x80", 1, true);
    expect_next("\xa0", 1, false);
    expect_next("\xff", 1, false);
    expect_next("\xc2", 1, false); /* cut short: NUL after */
    expect_next(" ", 1, false);
    expect_next("~", 1, false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequence_lengths),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_repaired),
        cmocka_unit_test(test_next),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
