/* Tests for a model's layer stack in words (lib/model_words.c): each kind's
 * words, the whole stack as checkpoints keep it, and where another model's
 * words first differ. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_spec.h"
#include "model_words.h"
#include "support/models.h"

static bg_model_spec_t *parse_ok(const char *text) {
    bg_model_spec_t *spec = NULL;
    if (bg_model_spec_parse("spec", text, strlen(text), &spec) != BG_OK)
        fail_msg("unexpected error: %s", bg_error_message());
    return spec;
}

/* Every kind, with options given, defaulted and turned into layers. */
static const char every_kind[] = "input channels=3 height=12 width=12\n"
                                 "conv2d filters=8 kernel=3 padding=same activation=gelu\n"
                                 "conv2d filters=4 kernel=2 stride=2\n"
                                 "avgpool size=3 stride=1\n"
                                 "maxpool size=2\n"
                                 "residual\n"
                                 "tanh\n"
                                 "shortcut\n"
                                 "sigmoid\n"
                                 "add\n"
                                 "flatten\n"
                                 "layernorm\n"
                                 "dropout rate=0.00001\n"
                                 "dense units=16 activation=relu\n"
                                 "dropout\n"
                                 "dense units=5\n"
                                 "softmax_cross_entropy\n";

static const char every_kind_words[] =
    "input channels=3 height=12 width=12; conv2d filters=8 kernel=3 stride=1 padding=same; gelu; "
    "conv2d filters=4 kernel=2 stride=2 padding=valid; avgpool size=3 stride=1; maxpool size=2 "
    "stride=2; residual; tanh; shortcut; sigmoid; add; flatten; layernorm; dropout rate=0.00001; "
    "dense units=16; relu; dropout rate=0.5; dense units=5; softmax_cross_entropy";

static void test_words_of_every_kind(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok(every_kind);
    char *words = bg_model_spec_words(spec);
    assert_non_null(words);
    assert_string_equal(words, every_kind_words);
    free(words);
    char one[64];
    bg_layer_words(&spec->layers[0], one, sizeof one);
    assert_string_equal(one, "conv2d filters=8 kernel=3 stride=1 padding=same");
    /* Cut to the buffer, never past it. */
    bg_layer_words(&spec->layers[0], one, 12);
    assert_string_equal(one, "conv2d filt");
    bg_model_spec_destroy(spec);
}

static void test_fraction_words(void **state) {
    (void)state;
    char text[48];
    bg_fraction_words(0.25, text, sizeof text);
    assert_string_equal(text, "0.25");
    bg_fraction_words(0.123456789, text, sizeof text);
    assert_string_equal(text, "0.123456789");
    bg_fraction_words(0.1, text, sizeof text);
    assert_string_equal(text, "0.1");
    bg_fraction_words(0, text, sizeof text);
    assert_string_equal(text, "0");
    bg_fraction_words(1.0 / 3.0, text, sizeof text);
    assert_string_equal(text, "0.3333333333333333");
    /* Plain notation, as a spec takes it: never %g's 1e-05. */
    bg_fraction_words(0.00001, text, sizeof text);
    assert_string_equal(text, "0.00001");
    /* The smallest double reads back from 323 zeros and a 5, which the
     * words hold whole; a buffer that cuts them says so. */
    char whole[BG_FRACTION_WORDS_MAX];
    assert_true(bg_fraction_words(0x1p-1074, whole, sizeof whole));
    assert_int_equal(strlen(whole), 2 + 324);
    assert_int_equal(whole[2 + 323], '5');
    assert_true(strtod(whole, NULL) == 0x1p-1074);
    assert_false(bg_fraction_words(0x1p-1074, text, 12));
    assert_false(bg_fraction_words(0.25, text, 4)); /* "0.2" is another number */
    assert_true(bg_fraction_words(0.25, text, 5));
    assert_string_equal(text, "0.25");
}

/* Two rates that differ past the 40th decimal have words that differ: a
 * checkpoint of one, resumed with the other, names the layer. */
static void test_tiny_rates_differ(void **state) {
    (void)state;
    char spec_a[256], spec_b[256];
    const char *zeros = "00000000000000000000000000000000000000000000000000";
    snprintf(spec_a, sizeof spec_a,
             "input channels=1 height=2 width=2\nflatten\ndropout rate=0.%s123\ndense "
             "units=2\nsoftmax_cross_entropy\n",
             zeros);
    snprintf(spec_b, sizeof spec_b,
             "input channels=1 height=2 width=2\nflatten\ndropout rate=0.%s456\ndense "
             "units=2\nsoftmax_cross_entropy\n",
             zeros);
    bg_model_spec_t *a = parse_ok(spec_a), *b = parse_ok(spec_b);
    char *words = bg_model_spec_words(a);
    assert_non_null(words);
    assert_non_null(
        strstr(words, "; dropout rate=0.00000000000000000000000000000000000000000000000000123; "));
    char difference[400];
    assert_true(bg_model_spec_difference(b, words, difference, sizeof difference));
    assert_non_null(strstr(difference, "its layer 1 is 'dropout rate=0."));
    free(words);
    bg_model_spec_destroy(a);
    bg_model_spec_destroy(b);
}

/* `text` parsed, its words compared with `spec`'s: the difference in words. */
static void expect_difference(const bg_model_spec_t *spec, const char *saved, const char *want) {
    char difference[400];
    const bool differs = bg_model_spec_difference(spec, saved, difference, sizeof difference);
    assert_string_equal(difference, want);
    assert_int_equal(differs, want[0] != '\0');
}

static void expect_model_difference(const bg_model_spec_t *spec, const char *other_text,
                                    const char *want) {
    bg_model_spec_t *other = parse_ok(other_text);
    char *saved = bg_model_spec_words(other);
    assert_non_null(saved);
    expect_difference(spec, saved, want);
    free(saved);
    bg_model_spec_destroy(other);
}

static void test_difference_of_models(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok(BG_TEST_ORIGIN_CNN);
    /* Itself, and itself written otherwise: no difference. */
    expect_model_difference(spec, BG_TEST_ORIGIN_CNN, "");
    expect_model_difference(spec,
                            "input channels=1 height=28 width=28\n"
                            "conv2d filters=32 kernel=3 stride=1 padding=valid\nrelu\n"
                            "maxpool size=2 stride=2\nflatten\ndense units=128\nrelu\n"
                            "dense units=10\nsoftmax_cross_entropy\n",
                            "");
    expect_model_difference(spec,
                            "input channels=1 height=32 width=32\n"
                            "conv2d filters=32 kernel=3 activation=relu\nmaxpool size=2\n"
                            "flatten\ndense units=128 activation=relu\ndense units=10\n"
                            "softmax_cross_entropy\n",
                            "its input is 'input channels=1 height=32 width=32' where this "
                            "model's is 'input channels=1 height=28 width=28'");
    expect_model_difference(spec,
                            "input channels=1 height=28 width=28\n"
                            "conv2d filters=32 kernel=3 activation=relu\navgpool size=2\n"
                            "flatten\ndense units=128 activation=relu\ndense units=10\n"
                            "softmax_cross_entropy\n",
                            "its layer 2 is 'avgpool size=2 stride=2' where this model has "
                            "'maxpool size=2 stride=2'");
    /* A layer more: the first that differs, and both counts. */
    expect_model_difference(spec,
                            "input channels=1 height=28 width=28\n"
                            "conv2d filters=32 kernel=3 activation=relu\nmaxpool size=2\n"
                            "dropout rate=0.25\nflatten\ndense units=128 activation=relu\n"
                            "dense units=10\nsoftmax_cross_entropy\n",
                            "its layer 3 is 'dropout rate=0.25' where this model has 'flatten'; "
                            "it has 9 layers, this model 8");
    bg_model_spec_destroy(spec);
}

/* Saved words that end early or run on, and what a crafted file might
 * hold: control characters and items too long to show whole. */
static void test_difference_of_saved_words(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok(BG_TEST_ORIGIN_CNN);
    char *own = bg_model_spec_words(spec);
    assert_non_null(own);
    char *cut = strdup(own);
    assert_non_null(cut);
    *strstr(cut, "; dense units=10") = '\0';
    expect_difference(spec, cut,
                      "it ends before layer 6, this model's 'dense units=10'; it has 6 layers, "
                      "this model 8");
    char longer[1024];
    snprintf(longer, sizeof longer, "%s; relu", own);
    expect_difference(
        spec, longer,
        "its layer 8 'relu' is past this model's last; it has 9 layers, this model 8");
    expect_difference(spec, "",
                      "its input is '' where this model's is 'input channels=1 "
                      "height=28 width=28'; it has 0 layers, this model 8");
    expect_difference(spec, "input channels=1 height=28 width=28; conv2d\x1b[2J filters=32",
                      "its layer 0 is 'conv2d' where this model has 'conv2d filters=32 kernel=3 "
                      "stride=1 padding=valid'; it has 1 layer, this model 8");
    /* C1's CSI (U+009B, C2 9B in UTF-8) acts as ESC [ on a terminal. */
    expect_difference(spec,
                      "input channels=1 height=28 width=28; dense\xc2\x9b"
                      "31m",
                      "its layer 0 is 'dense' where this model has 'conv2d filters=32 kernel=3 "
                      "stride=1 padding=valid'; it has 1 layer, this model 8");
    /* An item of 200 bytes shows its first 120; a UTF-8 character (é, two
     * bytes) across that cut is left out whole. */
    char item[256] = "input channels=1 height=28 width=28; ";
    const size_t start = strlen(item);
    memset(item + start, 'x', 119);
    memcpy(item + start + 119, "\xc3\xa9", 2);
    memset(item + start + 121, 'y', 79);
    item[start + 200] = '\0';
    char want[400];
    snprintf(want, sizeof want,
             "its layer 0 is '%.119s' where this model has 'conv2d filters=32 kernel=3 stride=1 "
             "padding=valid'; it has 1 layer, this model 8",
             item + start);
    expect_difference(spec, item, want);
    free(cut);
    free(own);
    bg_model_spec_destroy(spec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words_of_every_kind),
        cmocka_unit_test(test_fraction_words),
        cmocka_unit_test(test_tiny_rates_differ),
        cmocka_unit_test(test_difference_of_models),
        cmocka_unit_test(test_difference_of_saved_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
