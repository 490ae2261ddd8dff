/* bg_spelling_nearest: the word a misspelling most likely meant. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "spelling.h"

static const char *const layers[] = {"input", "conv2d", "maxpool", "avgpool", "dense", "relu"};
enum { LAYERS = sizeof layers / sizeof layers[0] };

static const char *nearest(const char *word) {
    return bg_spelling_nearest(word, layers, LAYERS, strlen(word));
}

/* One edit of any kind (a letter changed, left out, added, or two
 * neighbours swapped), within six letters. */
static void test_one_edit(void **state) {
    (void)state;
    assert_string_equal(nearest("dens"), "dense");
    assert_string_equal(nearest("densse"), "dense");
    assert_string_equal(nearest("dnese"), "dense");
    assert_string_equal(nearest("rleu"), "relu");
    assert_string_equal(nearest("maxpol"), "maxpool");
    assert_string_equal(nearest("input"), "input"); /* the word itself */
}

/* Two edits only past six letters: "maxpl" (5 letters, 2 edits from
 * maxpool) is no guess, "maxxpoool" (9 letters, 2 edits) is. */
static void test_two_edits_for_long_words(void **state) {
    (void)state;
    assert_null(bg_spelling_nearest("maxpl", layers, LAYERS, 5));
    assert_string_equal(nearest("maxxpoool"), "maxpool");
    assert_null(nearest("conv3dxyz"));
}

/* Two words as near: no guess; nothing within reach, the only word it
 * begins; none where it begins two. */
static void test_ties_and_prefixes(void **state) {
    (void)state;
    static const char *const pools[] = {"maxpool", "mixpool"};
    assert_null(bg_spelling_nearest("mexpool", pools, 2, 7)); /* one from each */
    assert_string_equal(bg_spelling_nearest("maxpoo", pools, 2, 6), "maxpool");
    assert_string_equal(nearest("inp"), "input");
    static const char *const flags[] = {"--device", "--device-mem"};
    assert_null(bg_spelling_nearest("--dev", flags, 2, 3));
}

/* Past 40 bytes no word is near by its edits (the table's bound): a
 * 42-letter word one letter off another is no guess. */
static void test_long_words(void **state) {
    (void)state;
    char word[43], other[43];
    memset(word, 'a', 42);
    memcpy(other, word, 42);
    word[42] = other[42] = '\0';
    other[41] = 'b';
    const char *const words[] = {other};
    assert_null(bg_spelling_nearest(word, words, 1, 42));
    word[41] = 'b'; /* the same word: it begins it */
    assert_ptr_equal(bg_spelling_nearest(word, words, 1, 42), other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_edit),
        cmocka_unit_test(test_two_edits_for_long_words),
        cmocka_unit_test(test_ties_and_prefixes),
        cmocka_unit_test(test_long_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
