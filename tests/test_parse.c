/* bg_parse_digits: digits only, up to a maximum, at any length. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "parse.h"

static bool parse(const char *text, uint64_t max, uint64_t *out) {
    return bg_parse_digits(text, strlen(text), max, out);
}

static void test_whole_numbers(void **state) {
    (void)state;
    uint64_t v = 7;
    assert_true(parse("0", 10, &v));
    assert_int_equal(v, 0);
    assert_true(parse("0042", 100, &v));
    assert_int_equal(v, 42);
    /* Part of a longer text: only len characters count. */
    assert_true(bg_parse_digits("12x", 2, 100, &v));
    assert_int_equal(v, 12);
    assert_true(parse("18446744073709551615", UINT64_MAX, &v));
    assert_true(v == UINT64_MAX);
    assert_true(parse("9223372036854775807", INT64_MAX, &v));
    assert_true(v == (uint64_t)INT64_MAX);
}

/* What strtoll would take, and what passes the maximum, leave *out alone. */
static void test_refusals(void **state) {
    (void)state;
    uint64_t v = 7;
    const char *bad[] = {"", "+5", "-5", " 5", "5 ", "0x10", "1e3", "5.0", "١"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(parse(bad[i], UINT64_MAX, &v));
        assert_int_equal(v, 7);
    }
    assert_false(bg_parse_digits(NULL, 3, 10, &v));
    assert_false(parse("11", 10, &v));
    assert_false(parse("5", 4, &v)); /* one digit above the maximum */
    assert_false(parse("1", 0, &v)); /* a maximum below the digit */
    assert_int_equal(v, 7);
    assert_true(parse("0", 0, &v) && v == 0);
    v = 7;
    assert_false(parse("9223372036854775808", INT64_MAX, &v));
    assert_false(parse("18446744073709551616", UINT64_MAX, &v)); /* 2^64 would wrap to 0 */
    assert_false(parse("99999999999999999999999999999999999999", UINT64_MAX, &v));
    assert_int_equal(v, 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_numbers),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
