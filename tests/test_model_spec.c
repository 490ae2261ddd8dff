/* Tests for the model spec parser: shapes, parameter counts and FLOPs of
 * known models, the fingerprint, and one test per error message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_spec.h"
#include "support/models.h"

#define MNIST_INPUT "input channels=1 height=28 width=28\n"

static const char origin_cnn[] = BG_TEST_ORIGIN_CNN;

/* A recognisable pointer, to check that *out is untouched on failure. */
static bg_model_spec_t *const untouched = (bg_model_spec_t *)&origin_cnn;

static bg_model_spec_t *parse_ok(const char *text) {
    bg_model_spec_t *spec = NULL;
    bg_status_t st = bg_model_spec_parse("spec", text, strlen(text), &spec);
    if (st != BG_OK) fail_msg("unexpected error: %s", bg_error_message());
    assert_non_null(spec);
    return spec;
}

static void expect_error_sized(const char *text, size_t size, const char *message) {
    bg_model_spec_t *spec = untouched;
    bg_error_clear();
    assert_int_equal(bg_model_spec_parse("spec", text, size, &spec), BG_ERR_PARSE);
    assert_string_equal(bg_error_message(), message);
    assert_ptr_equal(spec, untouched);
}

static void expect_error(const char *text, const char *message) {
    expect_error_sized(text, strlen(text), message);
}

static void assert_shape(bg_shape_t shape, int64_t c, int64_t h, int64_t w) {
    assert_int_equal(shape.c, c);
    assert_int_equal(shape.h, h);
    assert_int_equal(shape.w, w);
}

static uint64_t fingerprint_of(const char *text) {
    bg_model_spec_t *spec = parse_ok(text);
    uint64_t fingerprint = spec->fingerprint;
    bg_model_spec_destroy(spec);
    return fingerprint;
}

/* ---- accepted specs ---------------------------------------------------- */

static void test_origin_cnn(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok(origin_cnn);
    assert_string_equal(spec->source_name, "spec");
    assert_shape(spec->input, 1, 28, 28);
    assert_int_equal(spec->num_layers, 8);
    assert_int_equal(spec->classes, 10);

    const bg_layer_kind_t kinds[8] = {
        BG_LAYER_CONV2D, BG_LAYER_RELU, BG_LAYER_MAXPOOL, BG_LAYER_FLATTEN,
        BG_LAYER_DENSE,  BG_LAYER_RELU, BG_LAYER_DENSE,   BG_LAYER_SOFTMAX_CROSS_ENTROPY,
    };
    const int lines[8] = {2, 2, 3, 4, 5, 5, 6, 7};
    const int64_t params[8] = {320, 0, 0, 0, 5408 * 128 + 128, 0, 1290, 0};
    const int64_t flops[8] = {
        2 * 1 * 9 * 32 * 26 * 26, 32 * 26 * 26, 32 * 13 * 13 * 4, 0,
        2 * 5408 * 128,           128,          2 * 128 * 10,     30,
    };
    for (int i = 0; i < 8; i++) {
        assert_int_equal(spec->layers[i].kind, kinds[i]);
        assert_int_equal(spec->layers[i].line, lines[i]);
        assert_int_equal(spec->layers[i].col, 1);
        assert_int_equal(spec->layers[i].params, params[i]);
        assert_int_equal(spec->layers[i].flops, flops[i]);
        assert_int_equal(spec->layers[i].activation_bytes, bg_shape_numel(spec->layers[i].out) * 4);
        if (i > 0) {
            bg_shape_t previous = spec->layers[i - 1].out, in = spec->layers[i].in;
            assert_shape(in, previous.c, previous.h, previous.w);
        }
    }
    assert_shape(spec->layers[0].in, 1, 28, 28);
    assert_shape(spec->layers[0].out, 32, 26, 26);
    assert_shape(spec->layers[1].out, 32, 26, 26);
    assert_shape(spec->layers[2].out, 32, 13, 13);
    assert_shape(spec->layers[3].out, 5408, 1, 1);
    assert_shape(spec->layers[4].out, 128, 1, 1);
    assert_shape(spec->layers[6].out, 10, 1, 1);
    assert_shape(spec->layers[7].out, 10, 1, 1);

    const bg_layer_spec_t *conv = &spec->layers[0];
    assert_int_equal(conv->filters, 32);
    assert_int_equal(conv->kernel, 3);
    assert_int_equal(conv->stride, 1);
    assert_int_equal(conv->pad, 0);
    assert_int_equal(conv->activation_bytes, 32 * 26 * 26 * 4);
    assert_int_equal(spec->layers[2].kernel, 2);
    assert_int_equal(spec->layers[2].stride, 2);
    assert_int_equal(spec->layers[2].pad, 0);
    assert_int_equal(spec->layers[4].filters, 128);
    assert_int_equal(spec->layers[6].filters, 10);
    assert_int_equal(spec->layers[1].filters, 0);

    assert_int_equal(spec->total_params, 693962);
    int64_t total_flops = 0;
    for (int i = 0; i < 8; i++) total_flops += flops[i];
    assert_int_equal(spec->total_flops, total_flops);
    assert_int_equal(spec->total_flops, 1819806);
    bg_model_spec_destroy(spec);
}

static void test_conv_padding_same_and_stride(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=3 height=32 width=30\n"
                                     "conv2d filters=16 kernel=5 padding=same\n"
                                     "conv2d filters=8 kernel=3 padding=same stride=2\n"
                                     "conv2d filters=4 kernel=3 stride=2 padding=valid\n"
                                     "conv2d filters=2 kernel=1 activation=linear\n"
                                     "flatten\n"
                                     "dense units=5 activation=none\n"
                                     "softmax_cross_entropy\n");
    assert_int_equal(spec->num_layers, 7);
    const bg_layer_spec_t *l = spec->layers;
    assert_int_equal(l[0].kind, BG_LAYER_CONV2D);
    assert_int_equal(l[0].pad, 2);
    assert_int_equal(l[0].stride, 1);
    assert_shape(l[0].out, 16, 32, 30);
    assert_int_equal(l[0].params, 16 * 3 * 25 + 16);
    assert_int_equal(l[0].flops, 2LL * 3 * 25 * 16 * 32 * 30);
    /* (32 + 2 - 3) / 2 + 1 = 16, (30 + 2 - 3) / 2 + 1 = 15 */
    assert_int_equal(l[1].pad, 1);
    assert_int_equal(l[1].stride, 2);
    assert_shape(l[1].out, 8, 16, 15);
    /* (16 - 3) / 2 + 1 = 7, (15 - 3) / 2 + 1 = 7 */
    assert_int_equal(l[2].pad, 0);
    assert_shape(l[2].out, 4, 7, 7);
    assert_int_equal(l[2].flops, 2LL * 8 * 9 * 4 * 7 * 7);
    assert_shape(l[3].out, 2, 7, 7);
    assert_int_equal(l[3].params, 2 * 4 + 2);
    assert_int_equal(l[4].kind, BG_LAYER_FLATTEN);
    assert_shape(l[4].out, 98, 1, 1);
    assert_int_equal(l[5].kind, BG_LAYER_DENSE);
    assert_int_equal(l[6].kind, BG_LAYER_SOFTMAX_CROSS_ENTROPY);
    assert_int_equal(spec->classes, 5);
    bg_model_spec_destroy(spec);
}

/* Each activation, as an option (a layer of its own right after its conv2d
 * or dense, as relu) or on a line of its own; one FLOP per element. */
static void test_activations(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=2 height=6 width=6\n"
                                     "conv2d filters=3 kernel=3 activation=tanh\n"
                                     "sigmoid\n"
                                     "flatten\n"
                                     "dense units=7 activation=gelu\n"
                                     "dense units=5 activation=sigmoid\n"
                                     "tanh\n"
                                     "gelu\n"
                                     "dense units=4 activation=relu\n"
                                     "softmax_cross_entropy\n");
    const bg_layer_kind_t kinds[] = {
        BG_LAYER_CONV2D,
        BG_LAYER_TANH,
        BG_LAYER_SIGMOID,
        BG_LAYER_FLATTEN,
        BG_LAYER_DENSE,
        BG_LAYER_GELU,
        BG_LAYER_DENSE,
        BG_LAYER_SIGMOID,
        BG_LAYER_TANH,
        BG_LAYER_GELU,
        BG_LAYER_DENSE,
        BG_LAYER_RELU,
        BG_LAYER_SOFTMAX_CROSS_ENTROPY,
    };
    assert_int_equal(spec->num_layers, (int)(sizeof kinds / sizeof kinds[0]));
    for (int i = 0; i < spec->num_layers; i++) assert_int_equal(spec->layers[i].kind, kinds[i]);
    const bg_layer_spec_t *l = spec->layers;
    assert_shape(l[1].out, 3, 4, 4);
    assert_int_equal(l[1].flops, 3 * 4 * 4);
    assert_int_equal(l[1].params, 0);
    assert_int_equal(l[1].line, 2);
    assert_shape(l[2].out, 3, 4, 4);
    assert_int_equal(l[2].line, 3);
    assert_shape(l[5].out, 7, 1, 1);
    assert_int_equal(l[5].flops, 7);
    assert_int_equal(l[5].activation_bytes, 7 * 4);
    assert_int_equal(l[9].flops, 5);
    assert_string_equal(bg_layer_kind_name(l[7].kind), "sigmoid");
    assert_string_equal(bg_layer_kind_name(l[9].kind), "gelu");
    bg_model_spec_destroy(spec);
}

/* layernorm: gamma and beta per value of a sample, 7 FLOPs per value, the
 * shape and form of its input (an image stays one). */
static void test_layernorm(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=2 height=6 width=5\n"
                                     "conv2d filters=3 kernel=3\n"
                                     "layernorm\n"
                                     "relu\n"
                                     "flatten\n"
                                     "dense units=8\n"
                                     "layernorm\n"
                                     "dense units=4\n"
                                     "softmax_cross_entropy\n");
    const bg_layer_spec_t *l = spec->layers;
    assert_int_equal(l[1].kind, BG_LAYER_LAYERNORM);
    assert_shape(l[1].out, 3, 4, 3);
    assert_int_equal(l[1].params, 2 * 36);
    assert_int_equal(l[1].flops, 7 * 36);
    assert_int_equal(l[1].in_image, 1);
    assert_int_equal(l[2].in_image, 1); /* the relu after it */
    assert_int_equal(l[5].kind, BG_LAYER_LAYERNORM);
    assert_shape(l[5].out, 8, 1, 1);
    assert_int_equal(l[5].params, 16);
    assert_int_equal(l[5].in_image, 0);
    assert_int_equal(spec->total_params, (3 * 2 * 9 + 3) + 72 + (36 * 8 + 8) + 16 + (8 * 4 + 4));
    bg_model_spec_destroy(spec);
    /* On a 1x1 input, what comes after tells: a convolution an image (as
     * nn.LayerNorm([3, 1, 1]) before nn.Conv2d), dense a vector. */
    spec = parse_ok("input channels=3 height=1 width=1\nlayernorm\ntanh\n"
                    "conv2d filters=4 kernel=1\nflatten\nsoftmax_cross_entropy\n");
    for (int i = 0; i < 3; i++) assert_int_equal(spec->layers[i].in_image, 1);
    assert_int_equal(spec->layers[3].in_image, 1); /* flatten of the convolution's image */
    bg_model_spec_destroy(spec);
    spec = parse_ok("input channels=3 height=1 width=1\nlayernorm\ndense units=4\n"
                    "softmax_cross_entropy\n");
    assert_int_equal(spec->layers[0].in_image, 0);
    assert_int_equal(spec->layers[1].in_image, 0);
    bg_model_spec_destroy(spec);
    spec = parse_ok("input channels=3 height=1 width=1\nlayernorm\nsoftmax_cross_entropy\n");
    assert_int_equal(spec->layers[0].in_image, 0);
    assert_int_equal(spec->layers[1].in_image, 0);
    bg_model_spec_destroy(spec);
    /* Over one value a layernorm's output is its beta alone. */
    expect_error("input channels=1 height=1 width=1\nlayernorm\ndense units=2\n"
                 "softmax_cross_entropy\n",
                 "spec:2:1: layernorm over 1 value: its output is always its beta, and nothing "
                 "before it would learn; it needs 2 or more values a sample");
    expect_error(MNIST_INPUT "flatten\ndense units=1\nlayernorm\ndense units=10\n"
                             "softmax_cross_entropy\n",
                 "spec:4:1: layernorm over 1 value: its output is always its beta, and nothing "
                 "before it would learn; it needs 2 or more values a sample");
    /* dense after a layernorm of an image still needs flatten */
    bg_model_spec_t *bad = NULL;
    const char text[] = "input channels=1 height=4 width=4\nlayernorm\ndense units=3\n"
                        "softmax_cross_entropy\n";
    assert_int_equal(bg_model_spec_parse("spec", text, strlen(text), &bad), BG_ERR_PARSE);
    assert_null(bad);
    assert_non_null(strstr(bg_error_message(), "spec:3:1: dense needs a flat input"));
}

/* dropout: rate= a fraction in [0, 1), 0.5 unless given; the shape and
 * form of its input; one FLOP per value; no parameters. */
static void test_dropout(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=2 height=6 width=5\n"
                                     "dropout rate=0.2\n"
                                     "conv2d filters=3 kernel=3\n"
                                     "dropout\n"
                                     "flatten\n"
                                     "dense units=8\n"
                                     "dropout rate=.75\n"
                                     "dropout rate=0\n"
                                     "dense units=4\n"
                                     "softmax_cross_entropy\n");
    const bg_layer_spec_t *l = spec->layers;
    assert_int_equal(l[0].kind, BG_LAYER_DROPOUT);
    assert_true(l[0].rate == 0.2);
    assert_shape(l[0].out, 2, 6, 5);
    assert_int_equal(l[0].in_image, 1);
    assert_int_equal(l[0].flops, 60);
    assert_int_equal(l[0].params, 0);
    assert_true(l[2].rate == 0.5);
    assert_shape(l[2].out, 3, 4, 3);
    assert_true(l[5].rate == 0.75);
    assert_shape(l[5].out, 8, 1, 1);
    assert_int_equal(l[5].in_image, 0);
    assert_true(l[6].rate == 0);
    assert_string_equal(bg_layer_kind_name(l[6].kind), "dropout");
    assert_int_equal(spec->total_params, (3 * 2 * 9 + 3) + (36 * 8 + 8) + (8 * 4 + 4));
    bg_model_spec_destroy(spec);
    static const char *const bad_rates[] = {"1",   "1.0",  "2",   "-0.1", "+0.5", "0.5.1", ".",
                                            "0,5", "5e-1", "0x1", "nan",  "inf",  "half"};
    for (size_t i = 0; i < sizeof bad_rates / sizeof bad_rates[0]; i++) {
        char text[256], want[256];
        snprintf(text, sizeof text, MNIST_INPUT "dropout rate=%s\n", bad_rates[i]);
        const int range = i < 3; /* a plain decimal, but not below 1 */
        snprintf(want, sizeof want,
                 range ? "spec:2:14: rate=%s is out of range: a rate of 1 or more would drop "
                         "every value; expected 0 to 0.999999"
                       : "spec:2:14: rate=%s: expected a fraction from 0 to 0.999999, such as 0.5",
                 bad_rates[i]);
        expect_error(text, want);
    }
    /* Written below 1, a double of 1. */
    expect_error(MNIST_INPUT "dropout rate=0.999999999999999999\n",
                 "spec:2:14: rate=0.999999999999999999 rounds to 1 as a double, which would drop "
                 "every value; expected 0 to 0.999999");
    /* Nearer 1 than the 32-bit draws keep true to the rate. */
    expect_error(MNIST_INPUT "dropout rate=0.9999999999\n",
                 "spec:2:14: rate=0.9999999999 keeps fewer than one value in a million, more "
                 "finely than dropout's 32-bit draws can keep them; expected at most 0.999999");
    spec = parse_ok(MNIST_INPUT "flatten\ndropout rate=0.999999\ndense units=2\n"
                                "softmax_cross_entropy\n");
    assert_true(spec->layers[1].rate == 0.999999);
    bg_model_spec_destroy(spec);
    /* Any length a line allows (it was refused past 64 characters). */
    char longer[256];
    snprintf(longer, sizeof longer,
             "input channels=4 height=1 width=1\ndropout rate=0.5%0100d1\ndense units=2\n"
             "softmax_cross_entropy\n",
             0);
    spec = parse_ok(longer);
    assert_true(spec->layers[0].rate == 0.5);
    bg_model_spec_destroy(spec);
    expect_error(MNIST_INPUT "dropout p=0.5\n",
                 "spec:2:9: unknown option 'p' for dropout (expected rate)");
}

static void test_pools(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=4 height=13 width=11\n"
                                     "maxpool size=3 stride=2\n"
                                     "avgpool size=2\n"
                                     "avgpool size=2 stride=1\n"
                                     "relu\n"
                                     "flatten\n"
                                     "softmax_cross_entropy\n");
    const bg_layer_spec_t *l = spec->layers;
    assert_int_equal(spec->num_layers, 6);
    /* (13 - 3) / 2 + 1 = 6, (11 - 3) / 2 + 1 = 5 */
    assert_int_equal(l[0].kind, BG_LAYER_MAXPOOL);
    assert_int_equal(l[0].kernel, 3);
    assert_int_equal(l[0].stride, 2);
    assert_shape(l[0].out, 4, 6, 5);
    assert_int_equal(l[0].flops, 4 * 6 * 5 * 9);
    assert_int_equal(l[0].params, 0);
    /* floor: (6 - 2) / 2 + 1 = 3, (5 - 2) / 2 + 1 = 2 */
    assert_int_equal(l[1].kind, BG_LAYER_AVGPOOL);
    assert_int_equal(l[1].kernel, 2);
    assert_int_equal(l[1].stride, 2);
    assert_shape(l[1].out, 4, 3, 2);
    assert_int_equal(l[1].flops, 4 * 3 * 2 * 4);
    assert_int_equal(l[2].stride, 1);
    assert_shape(l[2].out, 4, 2, 1);
    assert_int_equal(l[2].flops, 4 * 2 * 1 * 4);
    assert_int_equal(l[3].kind, BG_LAYER_RELU);
    assert_int_equal(l[3].flops, 8);
    assert_int_equal(l[3].activation_bytes, 32);
    assert_shape(l[4].out, 8, 1, 1);
    assert_int_equal(l[5].flops, 24);
    assert_int_equal(spec->total_params, 0);
    assert_int_equal(spec->classes, 8);
    bg_model_spec_destroy(spec);
}

static void test_layout_comments_crlf_tabs(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("# the origin CNN\r\n"
                                     "\r\n"
                                     "   \t\n"
                                     "  input\tchannels=1  height=28 width=28   # MNIST\r\n"
                                     "\tconv2d filters=32 kernel=3 activation=relu\r\n"
                                     "maxpool size=2#no space before the comment\r\n"
                                     "flatten\r\n"
                                     "dense units=128\tactivation=relu\r\n"
                                     "dense units=10 \t \r\n"
                                     "softmax_cross_entropy");
    assert_int_equal(spec->num_layers, 8);
    assert_int_equal(spec->total_params, 693962);
    assert_int_equal(spec->layers[0].line, 5);
    assert_int_equal(spec->layers[0].col, 2);
    assert_int_equal(spec->layers[1].line, 5);
    assert_int_equal(spec->layers[1].col, 2);
    assert_int_equal(spec->layers[2].line, 6);
    assert_int_equal(spec->layers[4].line, 8);
    assert_int_equal(spec->layers[5].line, 8);
    assert_int_equal(spec->layers[7].line, 10);
    assert_int_equal(spec->fingerprint, fingerprint_of(origin_cnn));
    bg_model_spec_destroy(spec);
}

/* A UTF-8 byte-order mark, which some editors write first, is skipped:
 * columns on line 1 count from after it. Elsewhere it is named as such. */
static void test_byte_order_mark(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("\xEF\xBB\xBF" BG_TEST_ORIGIN_CNN);
    assert_int_equal(spec->num_layers, 8);
    assert_int_equal(spec->layers[0].line, 2);
    assert_int_equal(spec->layers[0].col, 1);
    assert_int_equal(spec->fingerprint, fingerprint_of(origin_cnn));
    bg_model_spec_destroy(spec);
    expect_error("\xEF\xBB\xBF"
                 "input channels=1 height=2 width=2 bogus=1\n",
                 "spec:1:35: unknown option 'bogus' for input (expected channels, height, width)");
    expect_error("input channels=1 height=2 width=2\n\xEF\xBB\xBF"
                 "flatten\n",
                 "spec:2:1: a UTF-8 byte-order mark (EF BB BF) here; only a file's first bytes "
                 "may hold one");
}

/* UTF-16 (Windows editors' "Unicode"), with a byte-order mark or without,
 * is named as such, not as a stray zero byte at 1:4. */
static void test_utf16(void **state) {
    (void)state;
    const char *le = "little-endian UTF-16 text (what Windows editors save as \"Unicode\"); a "
                     "model spec is UTF-8 or ASCII: save it as UTF-8";
    char want[256];
    snprintf(want, sizeof want, "spec:1:1: %s", le);
    expect_error_sized("\xFF\xFEi\0n\0", 6, want);
    expect_error_sized("i\0n\0p\0", 6, want);
    snprintf(want, sizeof want, "spec:1:1: big-%s", le + strlen("little-"));
    expect_error_sized("\xFE\xFF\0i\0n", 6, want);
    expect_error_sized("\0i\0n\0p", 6, want);
    /* One zero byte is no UTF-16: still a stray byte where it is. */
    expect_error_sized("inp\0ut", 6, "spec:1:4: unexpected byte 0x00; a model spec is text");
}

static void test_explicit_relu_and_largest_size(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=1048576 height=1 width=1\n"
                                     "relu\n"
                                     "dense units=1048576\n"
                                     "softmax_cross_entropy\n");
    assert_int_equal(spec->num_layers, 3);
    assert_int_equal(spec->layers[0].kind, BG_LAYER_RELU);
    assert_int_equal(spec->layers[0].flops, 1048576);
    assert_int_equal(spec->layers[0].params, 0);
    assert_int_equal(spec->layers[1].params, 1048576LL * 1048576 + 1048576);
    assert_int_equal(spec->classes, 1048576);
    bg_model_spec_destroy(spec);
}

static void test_leading_zeros(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=01 height=0028 width=28\n"
                                     "flatten\n"
                                     "softmax_cross_entropy\n");
    assert_shape(spec->input, 1, 28, 28);
    assert_int_equal(spec->classes, 784);
    bg_model_spec_destroy(spec);
}

/* The buffer ends exactly where the spec ends, so ASan catches any read past
 * `size`; and a size shorter than the text must hide what follows. */
static void test_not_nul_terminated(void **state) {
    (void)state;
    size_t size = strlen(origin_cnn) - 1; /* without the final newline */
    char *exact = malloc(size);
    assert_non_null(exact);
    memcpy(exact, origin_cnn, size);
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("exact", exact, size, &spec), BG_OK);
    assert_int_equal(spec->num_layers, 8);
    assert_int_equal(spec->total_params, 693962);
    bg_model_spec_destroy(spec);

    /* A number that ends the buffer: "width=2" of "width=28". */
    size_t input_size = strlen(MNIST_INPUT) - 2;
    memcpy(exact, MNIST_INPUT, input_size);
    expect_error_sized(exact, input_size,
                       "spec:1:1: missing final softmax_cross_entropy (the model must end "
                       "with the loss layer)");
    /* A layer word that ends the buffer. */
    expect_error_sized(
        exact, 3,
        "spec:1:1: unknown layer 'inp'; did you mean input? (expected input, conv2d, "
        "maxpool, avgpool, flatten, dense, relu, tanh, sigmoid, "
        "gelu, layernorm, dropout, residual, shortcut, add, softmax_cross_entropy)");
    /* A \r that ends the buffer ends no line: refused like any other. */
    memcpy(exact, "# x\r", 4);
    expect_error_sized(exact, 4,
                       "spec:1:4: a carriage return (\\r) inside a line; lines end with \\n or "
                       "\\r\\n, not \\r alone");
    free(exact);

    const char trailing[] = "input channels=2 height=1 width=1\nsoftmax_cross_entropy\nJUNK";
    spec = NULL;
    assert_int_equal(bg_model_spec_parse("t", trailing, sizeof trailing - 5, &spec), BG_OK);
    assert_int_equal(spec->num_layers, 1);
    assert_int_equal(spec->total_flops, 6);
    bg_model_spec_destroy(spec);
}

/* A checkpoint given where the model belongs is named as one; a header
 * length past the file's end is no safetensors file, only binary. */
static void test_safetensors_given(void **state) {
    (void)state;
    static const char file[] = "\x0a\0\0\0\0\0\0\0{\"a\":\"bc\"}"; /* 10 bytes of JSON */
    expect_error_sized(file, sizeof file - 1,
                       "spec:1:1: a safetensors file (a checkpoint: --load or --resume takes "
                       "it), not a model spec");
    expect_error_sized(file, sizeof file - 2,
                       "spec:2:1: unexpected byte 0x00; a model spec is text");
}

/* brigade's other files given where the model belongs: JSON (metrics,
 * profiles, traces) and XML (a timeline, a topology) are named as such
 * (until 2026-12-05 "unknown layer '{'"), where they start; a comment or
 * a layer first is a spec's. */
static void test_other_text_given(void **state) {
    (void)state;
    expect_error(
        "{\"model\": \"m\"}\n",
        "spec:1:1: a JSON file (brigade writes its metrics, profiles and traces so), not a "
        "model spec");
    expect_error(
        "\n  [1, 2]\n",
        "spec:2:3: a JSON file (brigade writes its metrics, profiles and traces so), not a "
        "model spec");
    expect_error("\xEF\xBB\xBF<?xml version=\"1.0\"?>\n<svg/>\n",
                 "spec:1:1: an XML file (an SVG timeline, an hwloc topology: --topology takes "
                 "one), not a model spec");
    expect_error("# {not json}\n{\n",
                 "spec:2:1: unknown layer '{' (expected input, conv2d, maxpool, avgpool, flatten, "
                 "dense, relu, tanh, sigmoid, gelu, layernorm, dropout, residual, shortcut, add, "
                 "softmax_cross_entropy)");
}

static void test_fingerprint(void **state) {
    (void)state;
    uint64_t base = fingerprint_of(origin_cnn);
    assert_int_not_equal(base, 0);
    /* Same model written differently: layout, comments, defaults spelled
     * out, the relu written as its own layer. */
    assert_int_equal(base, fingerprint_of("# origin\n\n"
                                          "input   width=28 height=28 channels=1\n"
                                          "conv2d kernel=3 filters=32 stride=1 padding=valid\n"
                                          "relu # split out\n"
                                          "maxpool size=2 stride=2\n"
                                          "\tflatten\n"
                                          "dense units=128 activation=relu\n"
                                          "dense units=10 activation=none\n"
                                          "softmax_cross_entropy\n"));
    /* Different models. */
    assert_int_not_equal(base, fingerprint_of("input channels=1 height=28 width=28\n"
                                              "conv2d filters=32 kernel=5 activation=relu\n"
                                              "maxpool size=2\n"
                                              "flatten\n"
                                              "dense units=128 activation=relu\n"
                                              "dense units=10\n"
                                              "softmax_cross_entropy\n"));
    assert_int_not_equal(base, fingerprint_of("input channels=1 height=28 width=28\n"
                                              "conv2d filters=32 kernel=3\n"
                                              "maxpool size=2\n"
                                              "flatten\n"
                                              "dense units=128 activation=relu\n"
                                              "dense units=10\n"
                                              "softmax_cross_entropy\n"));
    assert_int_not_equal(base, fingerprint_of("input channels=1 height=28 width=28\n"
                                              "conv2d filters=32 kernel=3 activation=relu\n"
                                              "avgpool size=2\n"
                                              "flatten\n"
                                              "dense units=128 activation=relu\n"
                                              "dense units=10\n"
                                              "softmax_cross_entropy\n"));
    /* A dropout renumbers the layers after it, and its rate changes what a
     * step computes (--resume refuses another; --load takes the weights). */
    const char *const dropped = "input channels=1 height=28 width=28\n"
                                "conv2d filters=32 kernel=3 activation=relu\n"
                                "maxpool size=2\n"
                                "dropout rate=0.25\n"
                                "flatten\n"
                                "dense units=128 activation=relu\n"
                                "dense units=10\n"
                                "softmax_cross_entropy\n";
    assert_int_not_equal(base, fingerprint_of(dropped));
    char other_rate[512];
    snprintf(other_rate, sizeof other_rate, "%.*srate=0.5%s",
             (int)(strstr(dropped, "rate=") - dropped), dropped,
             strstr(dropped, "rate=0.25") + strlen("rate=0.25"));
    assert_int_not_equal(fingerprint_of(dropped), fingerprint_of(other_rate));
    /* The same rate written otherwise is the same model. */
    snprintf(other_rate, sizeof other_rate, "%.*srate=.250%s",
             (int)(strstr(dropped, "rate=") - dropped), dropped,
             strstr(dropped, "rate=0.25") + strlen("rate=0.25"));
    assert_int_equal(fingerprint_of(dropped), fingerprint_of(other_rate));
    assert_int_not_equal(base, fingerprint_of("input channels=3 height=28 width=28\n"
                                              "conv2d filters=32 kernel=3 activation=relu\n"
                                              "maxpool size=2\n"
                                              "flatten\n"
                                              "dense units=128 activation=relu\n"
                                              "dense units=10\n"
                                              "softmax_cross_entropy\n"));
}

static void test_layer_kind_names(void **state) {
    (void)state;
    assert_string_equal(bg_layer_kind_name(BG_LAYER_CONV2D), "conv2d");
    assert_string_equal(bg_layer_kind_name(BG_LAYER_MAXPOOL), "maxpool");
    assert_string_equal(bg_layer_kind_name(BG_LAYER_AVGPOOL), "avgpool");
    assert_string_equal(bg_layer_kind_name(BG_LAYER_FLATTEN), "flatten");
    assert_string_equal(bg_layer_kind_name(BG_LAYER_DENSE), "dense");
    assert_string_equal(bg_layer_kind_name(BG_LAYER_RELU), "relu");
    assert_string_equal(bg_layer_kind_name(BG_LAYER_DROPOUT), "dropout");
    assert_string_equal(bg_layer_kind_name(BG_LAYER_SOFTMAX_CROSS_ENTROPY),
                        "softmax_cross_entropy");
}

static void test_destroy_null(void **state) {
    (void)state;
    bg_model_spec_destroy(NULL);
}

static void test_null_arguments(void **state) {
    (void)state;
    bg_model_spec_t *spec = untouched;
    assert_int_equal(bg_model_spec_parse("spec", origin_cnn, strlen(origin_cnn), NULL),
                     BG_ERR_INVALID);
    assert_int_equal(bg_model_spec_parse("spec", NULL, 5, &spec), BG_ERR_INVALID);
    assert_ptr_equal(spec, untouched);
    /* A NULL name still gives a usable message. */
    assert_int_equal(bg_model_spec_parse(NULL, NULL, 0, &spec), BG_ERR_PARSE);
    assert_string_equal(bg_error_message(),
                        "<model spec>:1:1: empty model spec: expected an 'input' line");
    assert_ptr_equal(spec, untouched);
}

/* ---- files ------------------------------------------------------------- */

static char *write_temp_file(const char *text, size_t size) {
    char *path = strdup("/tmp/test_model_spec_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, size), (ssize_t)size);
    assert_int_equal(close(fd), 0);
    return path;
}

static void test_load(void **state) {
    (void)state;
    char *path = write_temp_file(origin_cnn, strlen(origin_cnn));
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_load(path, &spec), BG_OK);
    assert_string_equal(spec->source_name, path);
    assert_int_equal(spec->num_layers, 8);
    assert_int_equal(spec->total_params, 693962);
    assert_int_equal(spec->fingerprint, fingerprint_of(origin_cnn));
    bg_model_spec_destroy(spec);
    unlink(path);
    free(path);
}

static void test_load_parse_error_names_file(void **state) {
    (void)state;
    const char text[] = MNIST_INPUT "conv3d filters=1\n";
    char *path = write_temp_file(text, strlen(text));
    bg_model_spec_t *spec = untouched;
    assert_int_equal(bg_model_spec_load(path, &spec), BG_ERR_PARSE);
    char expected[256];
    snprintf(
        expected, sizeof expected,
        "%s:2:1: unknown layer 'conv3d'; did you mean conv2d? (expected input, conv2d, maxpool, "
        "avgpool, "
        "flatten, dense, relu, tanh, sigmoid, gelu, layernorm, dropout, residual, shortcut, add, "
        "softmax_cross_entropy)",
        path);
    assert_string_equal(bg_error_message(), expected);
    assert_ptr_equal(spec, untouched);
    unlink(path);
    free(path);
}

static void test_load_missing_file(void **state) {
    (void)state;
    bg_model_spec_t *spec = untouched;
    assert_int_equal(bg_model_spec_load("/nonexistent/model.spec", &spec), BG_ERR_IO);
    assert_string_equal(bg_error_message(),
                        "cannot read '/nonexistent/model.spec': No such file or directory");
    assert_ptr_equal(spec, untouched);
}

static void test_load_directory(void **state) {
    (void)state;
    bg_model_spec_t *spec = untouched;
    assert_int_equal(bg_model_spec_load("/tmp", &spec), BG_ERR_IO);
    assert_string_equal(bg_error_message(), "cannot read '/tmp': Is a directory");
    assert_ptr_equal(spec, untouched);
}

static void test_load_too_large(void **state) {
    (void)state;
    char *path = write_temp_file("", 0);
    /* Sparse: 64 MiB + 1 of zeros without writing them. */
    assert_int_equal(truncate(path, (64 << 20) + 1), 0);
    bg_model_spec_t *spec = untouched;
    assert_int_equal(bg_model_spec_load(path, &spec), BG_ERR_PARSE);
    char expected[256];
    snprintf(expected, sizeof expected, "%s: larger than 64 MiB; a model spec is a short text file",
             path);
    assert_string_equal(bg_error_message(), expected);
    assert_ptr_equal(spec, untouched);
    unlink(path);
    free(path);
}

/* ---- errors: lexical --------------------------------------------------- */

static void test_error_empty(void **state) {
    (void)state;
    const char *message = "spec:1:1: empty model spec: expected an 'input' line";
    expect_error("", message);
    expect_error("\n\n  \t\r\n", message);
    expect_error("# only a comment\n   # and another\n", message);
}

static void test_error_nul_byte(void **state) {
    (void)state;
    const char text[] = "input channels=1\0 height=28 width=28\n";
    expect_error_sized(text, sizeof text - 1,
                       "spec:1:17: unexpected byte 0x00; a model spec is text");
}

static void test_error_control_byte_in_comment(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "flatten # \x01\n",
                 "spec:2:11: unexpected byte 0x01; a model spec is text");
    expect_error(MNIST_INPUT "\x1b[0m", "spec:2:1: unexpected byte 0x1b; a model spec is text");
    expect_error(MNIST_INPUT "flatten\x7f", "spec:2:8: unexpected byte 0x7f; a model spec is text");
}

/* A carriage return that does not end a line is refused at its column: a
 * file with old Mac line endings (\r alone) would otherwise be read as one
 * line, and a stray \r as a blank joining two words. */
static void test_error_bare_carriage_return(void **state) {
    (void)state;
    expect_error("input channels=1 height=28 width=28\rflatten\r",
                 "spec:1:36: a carriage return (\\r) inside a line; lines end with \\n or "
                 "\\r\\n, not \\r alone");
    expect_error(MNIST_INPUT "dense units=10\ractivation=relu\n",
                 "spec:2:15: a carriage return (\\r) inside a line; lines end with \\n or "
                 "\\r\\n, not \\r alone");
    /* the last line of a file without a final \n */
    expect_error("input channels=1 height=4 width=4\nflatten\ndense units=2\n"
                 "softmax_cross_entropy\r",
                 "spec:4:22: a carriage return (\\r) inside a line; lines end with \\n or "
                 "\\r\\n, not \\r alone");
}

static void test_error_long_line(void **state) {
    (void)state;
    /* A comment line of exactly BG_MODEL_SPEC_MAX_LINE bytes (plus \r\n) is
     * fine; one byte more is not. */
    size_t prefix = strlen(MNIST_INPUT);
    const char tail[] = "\r\nflatten\nsoftmax_cross_entropy\n";
    /* A static buffer, not malloc: gcc 12's -Warray-bounds misfires on the
     * malloc'd one under -fsanitize=undefined. */
    static char text[sizeof MNIST_INPUT + BG_MODEL_SPEC_MAX_LINE + 64];
    assert_true(prefix + BG_MODEL_SPEC_MAX_LINE + 1 + sizeof tail <= sizeof text);
    memcpy(text, MNIST_INPUT, prefix);
    memset(text + prefix, '#', BG_MODEL_SPEC_MAX_LINE);
    memcpy(text + prefix + BG_MODEL_SPEC_MAX_LINE, tail, sizeof tail);
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("spec", text, strlen(text), &spec), BG_OK);
    assert_int_equal(spec->num_layers, 2);
    bg_model_spec_destroy(spec);

    memset(text + prefix, '#', BG_MODEL_SPEC_MAX_LINE + 1);
    memcpy(text + prefix + BG_MODEL_SPEC_MAX_LINE + 1, "\nsoftmax_cross_entropy\n", 24);
    expect_error(text, "spec:2:4097: line longer than 4096 bytes");
}

/* ---- errors: layers and options ---------------------------------------- */

static void test_error_unknown_layer(void **state) {
    (void)state;
    expect_error(
        MNIST_INPUT "\n  conv3d filters=1 kernel=3\n",
        "spec:3:3: unknown layer 'conv3d'; did you mean conv2d? (expected input, conv2d, maxpool, "
        "avgpool, "
        "flatten, dense, relu, tanh, sigmoid, gelu, layernorm, dropout, residual, shortcut, add, "
        "softmax_cross_entropy)");
    /* Case matters. */
    expect_error(
        "Input channels=1 height=1 width=1\n",
        "spec:1:1: unknown layer 'Input'; did you mean input? (expected input, conv2d, maxpool, "
        "avgpool, "
        "flatten, dense, relu, tanh, sigmoid, gelu, layernorm, dropout, residual, shortcut, add, "
        "softmax_cross_entropy)");
}

static void test_error_unknown_option(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "conv2d filters=32 kernel=3 kernal=3\n",
                 "spec:2:28: unknown option 'kernal' for conv2d (expected filters, kernel, stride, "
                 "padding, activation)");
    expect_error(MNIST_INPUT "conv2d filters=32 kernal=3\n",
                 "spec:2:19: unknown option 'kernal' for conv2d; did you mean kernel? (expected "
                 "filters, kernel, stride, padding, activation)");
    expect_error(MNIST_INPUT "maxpool size=2 padding=same\n",
                 "spec:2:16: unknown option 'padding' for maxpool (expected size, stride)");
    expect_error(MNIST_INPUT "dense units=3 kernel=3\n",
                 "spec:2:15: unknown option 'kernel' for dense (expected units, activation)");
    expect_error("input channels=1 height=1 width=1 depth=1\n",
                 "spec:1:35: unknown option 'depth' for input (expected channels, height, "
                 "width)");
    expect_error(MNIST_INPUT "flatten start=1\n",
                 "spec:2:9: unknown option 'start' for flatten (it takes no options)");
}

static void test_error_option_without_value(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "maxpool size 2\n",
                 "spec:2:9: option 'size' needs a value (size=VALUE, with no space around '=')");
    /* A layer without options says so first, spaces or not. */
    expect_error(MNIST_INPUT "relu inplace\n",
                 "spec:2:6: unknown option 'inplace' for relu (it takes no options)");
    expect_error(MNIST_INPUT "layernorm eps = 1e-3\n",
                 "spec:2:11: unknown option 'eps' for layernorm (it takes no options)");
    expect_error(MNIST_INPUT "gelu approximate=tanh\n",
                 "spec:2:6: unknown option 'approximate' for gelu (it takes no options)");
    expect_error(MNIST_INPUT "relu =3\n", "spec:2:6: option '=3' has no name before '='");
    expect_error(MNIST_INPUT "maxpool =2\n", "spec:2:9: option '=2' has no name before '='");
    /* A bare word or number where an option belongs: options are KEY=VALUE. */
    expect_error(MNIST_INPUT "flatten\ndense 2\n",
                 "spec:3:7: '2' is not an option of dense: options are KEY=VALUE (as units=...), "
                 "KEY one of units, activation");
    /* An activation's name alone, where the layer takes one (Keras's
     * habit), and Python's call syntax: said as what to write (a new
     * user's). A pool takes none, so its message lists its keys. */
    expect_error(MNIST_INPUT "conv2d filters=32 kernel=3 relu\n",
                 "spec:2:28: 'relu' is not an option of conv2d: activation=relu sets its "
                 "activation");
    expect_error(MNIST_INPUT "maxpool size=2 relu\n",
                 "spec:2:16: 'relu' is not an option of maxpool: options are KEY=VALUE (as "
                 "size=...), KEY one of size, stride");
    expect_error(MNIST_INPUT "conv2d(filters=32, kernel=3)\n",
                 "spec:2:1: 'conv2d(filters=32,': a layer is its name and KEY=VALUE words after "
                 "it, with spaces, no parentheses or commas (as: conv2d filters=32 kernel=3)");
}

static void test_error_empty_value(void **state) {
    (void)state;
    const char *empty = "spec:2:9: empty value for option 'size' (size=VALUE, with no space "
                        "around '=')";
    expect_error(MNIST_INPUT "maxpool size=\n", empty);
    expect_error(MNIST_INPUT "maxpool size= 2\n", empty);
}

static void test_error_non_numeric_value(void **state) {
    (void)state;
    const char *expected = "spec:2:26: kernel=%s: expected a whole number from 1 to 1048576";
    const char *values[] = {"3x", "x3", "-3", "+3", "3.0", "0x3", "1e3"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char text[128], message[160];
        snprintf(text, sizeof text, MNIST_INPUT "conv2d filters=32 kernel=%s\n", values[i]);
        snprintf(message, sizeof message, expected, values[i]);
        expect_error(text, message);
    }
    /* A full-width digit looks like one: its bytes are given, and what it
     * is. */
    expect_error(MNIST_INPUT "conv2d filters=32 kernel=\xEF\xBC\x93\n",
                 "spec:2:26: bytes EF BC 93 (a full-width digit 3) outside a comment; a model "
                 "spec's words and numbers are ASCII, separated by spaces or tabs");
    /* A byte that begins a UTF-8 character the next bytes do not continue
     * (Latin-1's e acute before "lu") is named alone. */
    expect_error(MNIST_INPUT "conv2d filters=32 kernel=3 activation=r\xE9lu\n",
                 "spec:2:40: byte E9 outside a comment; a model spec's words and numbers are "
                 "ASCII, separated by spaces or tabs");
}

static void test_error_out_of_range_value(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "conv2d filters=0 kernel=3\n",
                 "spec:2:16: filters=0 is out of range (1 to 1048576)");
    expect_error(MNIST_INPUT "conv2d filters=000 kernel=3\n",
                 "spec:2:16: filters=000 is out of range (1 to 1048576)");
    expect_error("input channels=1048577 height=1 width=1\n",
                 "spec:1:16: channels=1048577 is out of range (1 to 1048576)");
    expect_error("input channels=1 height=99999999999999999999999999 width=1\n",
                 "spec:1:25: height=99999999999999999999999999 is out of range (1 to 1048576)");
    /* A value past 64 bytes is quoted to there, and "..." says so (until
     * 2026-12-05 its first 64 digits were shown as if they were all). */
    char text[512], message[512], digits[301];
    memset(digits, '9', 300);
    digits[300] = '\0';
    snprintf(text, sizeof text, MNIST_INPUT "dense units=%s\n", digits);
    snprintf(message, sizeof message, "spec:2:13: units=%.64s... is out of range (1 to 1048576)",
             digits);
    expect_error(text, message);
    digits[64] = '\0'; /* exactly 64: whole, with no "..." */
    snprintf(text, sizeof text, MNIST_INPUT "dense units=%s\n", digits);
    snprintf(message, sizeof message, "spec:2:13: units=%s is out of range (1 to 1048576)", digits);
    expect_error(text, message);
    memset(digits, 'x', 200);
    digits[200] = '\0';
    snprintf(text, sizeof text, MNIST_INPUT "dense units=3 %s=1\n", digits);
    snprintf(message, sizeof message,
             "spec:2:15: unknown option '%.64s...' for dense (expected units, activation)", digits);
    expect_error(text, message);
}

static void test_error_bad_enum_value(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "conv2d filters=1 kernel=3 padding=full\n",
                 "spec:2:35: padding=full: expected valid or same");
    expect_error(MNIST_INPUT "conv2d filters=1 kernel=3 padding=SAME\n",
                 "spec:2:35: padding=SAME: expected valid or same");
    expect_error(MNIST_INPUT "flatten\ndense units=10 activation=swish\n",
                 "spec:3:27: activation=swish: expected relu, tanh, sigmoid, gelu, none or "
                 "linear");
    /* A near miss is named, as a misspelt layer or option is. */
    expect_error(MNIST_INPUT "flatten\ndense units=10 activation=Tanh\n",
                 "spec:3:27: activation=Tanh: expected relu, tanh, sigmoid, gelu, none or "
                 "linear; did you mean tanh?");
    expect_error(MNIST_INPUT "flatten\ndense units=10 activation=tan\n",
                 "spec:3:27: activation=tan: expected relu, tanh, sigmoid, gelu, none or "
                 "linear; did you mean tanh?");
    expect_error(MNIST_INPUT "flatten\ndense units=10 activation=rleu\n",
                 "spec:3:27: activation=rleu: expected relu, tanh, sigmoid, gelu, none or "
                 "linear; did you mean relu?");
}

static void test_error_duplicate_option(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "maxpool size=2 size=3\n",
                 "spec:2:16: duplicate option 'size' (first at column 9)");
    expect_error(MNIST_INPUT "flatten\ndense units=1 activation=relu activation=relu\n",
                 "spec:3:31: duplicate option 'activation' (first at column 15)");
}

static void test_error_missing_required_option(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "  conv2d filters=32\n",
                 "spec:2:3: missing option 'kernel' for conv2d");
    expect_error(MNIST_INPUT "conv2d kernel=3\n", "spec:2:1: missing option 'filters' for conv2d");
    expect_error("input channels=1 height=28\n", "spec:1:1: missing option 'width' for input");
    expect_error(MNIST_INPUT "avgpool stride=2\n", "spec:2:1: missing option 'size' for avgpool");
    expect_error(MNIST_INPUT "flatten\ndense activation=relu\n",
                 "spec:3:1: missing option 'units' for dense");
}

/* ---- errors: layer order ----------------------------------------------- */

static void test_error_input_not_first(void **state) {
    (void)state;
    expect_error("# comment first is fine\n\nconv2d filters=1 kernel=1\n",
                 "spec:3:1: the first layer must be 'input', got 'conv2d'");
    expect_error("softmax_cross_entropy\n",
                 "spec:1:1: the first layer must be 'input', got 'softmax_cross_entropy'");
}

static void test_error_input_repeated(void **state) {
    (void)state;
    expect_error("\n" MNIST_INPUT "flatten\n input channels=1 height=1 width=1\n",
                 "spec:4:2: 'input' repeated (first at line 2); a model has one input");
}

static void test_error_missing_loss(void **state) {
    (void)state;
    const char *message = "missing final softmax_cross_entropy (the model must end with the "
                          "loss layer)";
    char expected[160];
    snprintf(expected, sizeof expected, "spec:1:1: %s", message);
    expect_error(MNIST_INPUT, expected);
    snprintf(expected, sizeof expected, "spec:3:3: %s", message);
    expect_error(MNIST_INPUT "flatten\n  dense units=10\n# trailing comment\n\n", expected);
}

static void test_error_layer_after_loss(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "flatten\nsoftmax_cross_entropy\n\ndense units=3\n",
                 "spec:5:1: 'dense' after softmax_cross_entropy (line 3); the loss must be "
                 "the last layer");
    expect_error(MNIST_INPUT "flatten\nsoftmax_cross_entropy\nsoftmax_cross_entropy\n",
                 "spec:4:1: 'softmax_cross_entropy' after softmax_cross_entropy (line 3); the "
                 "loss must be the last layer");
}

static void test_error_too_many_layers(void **state) {
    (void)state;
    /* input 2x1x1, then `count` relus and the loss (over 2 classes). */
    size_t count = BG_MODEL_SPEC_MAX_LAYERS - 1;
    size_t prefix = strlen("input channels=2 height=1 width=1\n");
    const char last[] = "dense units=1 activation=relu\nsoftmax_cross_entropy\n";
    size_t capacity = prefix + count * 5 + sizeof last;
    char *text = malloc(capacity);
    assert_non_null(text);
    memcpy(text, "input channels=2 height=1 width=1\n", prefix);
    char *cursor = text + prefix;
    for (size_t i = 0; i < count; i++, cursor += 5) memcpy(cursor, "relu\n", 5);
    strcpy(cursor, "softmax_cross_entropy\n");

    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("spec", text, strlen(text), &spec), BG_OK);
    assert_int_equal(spec->num_layers, BG_MODEL_SPEC_MAX_LAYERS);
    assert_int_equal(spec->layers[BG_MODEL_SPEC_MAX_LAYERS - 1].line, BG_MODEL_SPEC_MAX_LAYERS + 1);
    bg_model_spec_destroy(spec);

    memcpy(cursor, "relu\n", 5);
    strcpy(cursor + 5, "softmax_cross_entropy\n");
    expect_error(text, "spec:100002:1: more than 100000 layers");

    /* The relu that activation=relu adds counts too. */
    memcpy(cursor, last, sizeof last);
    expect_error(text, "spec:100001:1: more than 100000 layers");
    free(text);
}

/* ---- errors: shapes ---------------------------------------------------- */

static void test_error_conv_kernel_too_large(void **state) {
    (void)state;
    expect_error("input channels=1 height=2 width=5\nconv2d filters=1 kernel=3\n",
                 "spec:2:18: conv2d kernel 3x3 does not fit its 2x5 input (no padding): "
                 "kernel=2 at most, or padding=same");
    expect_error(MNIST_INPUT "maxpool size=14 stride=1\nconv2d filters=1 kernel=16\n",
                 "spec:3:18: conv2d kernel 16x16 does not fit its 15x15 input (no padding): "
                 "kernel=15 at most");
}

static void test_error_same_padding_even_kernel(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "conv2d filters=1 kernel=4 padding=same\n",
                 "spec:2:27: padding=same needs an odd kernel, got kernel=4 (kernel=3 or "
                 "kernel=5 centres it)");
}

static void test_error_pool_too_large(void **state) {
    (void)state;
    expect_error("input channels=1 height=4 width=2\nmaxpool size=3\n",
                 "spec:2:9: maxpool size 3 does not fit its 4x2 input: size=2 at most");
    expect_error("input channels=1 height=2 width=4\n\tavgpool size=3 stride=1\n",
                 "spec:2:10: avgpool size 3 does not fit its 2x4 input: size=2 at most");
}

static void test_error_dense_needs_flat_input(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "conv2d filters=32 kernel=3\nmaxpool size=2\ndense units=10\n",
                 "spec:4:1: dense needs a flat input, got 32x13x13; add 'flatten' before it");
    /* A loss with layers after it (past comments and blank lines) says so
     * first: the flatten asked for would not mend it. Last, the flatten. */
    expect_error(MNIST_INPUT "conv2d filters=8 kernel=3\nsoftmax_cross_entropy\n# more\n\n"
                             "  maxpool size=2 # pool\nflatten\n",
                 "spec:6:3: 'maxpool' after softmax_cross_entropy (line 3); the loss must be the "
                 "last layer");
    expect_error(MNIST_INPUT "conv2d filters=8 kernel=3\nsoftmax_cross_entropy\n# the end\n",
                 "spec:3:1: softmax_cross_entropy needs a flat input, got 8x26x26; add 'flatten' "
                 "before it");
}

/* What nn.Sequential would see: a convolution's or a pool's output is an
 * image even at 1x1, flatten's and dense's a vector; an input of height
 * and width 1 is either. */
static void test_images_and_vectors(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "conv2d filters=2 kernel=3 stride=40\ndense units=10\n",
                 "spec:3:1: dense needs a flat input, got 2x1x1 (an image, 1x1); add 'flatten' "
                 "before it");
    expect_error("input channels=3 height=2 width=2\nmaxpool size=2\nrelu\nsoftmax_cross_entropy\n",
                 "spec:4:1: softmax_cross_entropy needs a flat input, got 3x1x1 (an image, 1x1); "
                 "add 'flatten' before it");
    expect_error(MNIST_INPUT "flatten\nconv2d filters=4 kernel=1\n",
                 "spec:3:1: conv2d needs an image input (channels x height x width), got the "
                 "vector of 784 values that line 2 makes");
    expect_error(MNIST_INPUT "flatten\ndense units=8 activation=relu\nmaxpool size=1\n",
                 "spec:4:1: maxpool needs an image input (channels x height x width), got the "
                 "vector of 8 values that line 3 makes");
    /* An input of 1x1 goes to either kind of layer. */
    bg_model_spec_t *spec = parse_ok("input channels=5 height=1 width=1\n"
                                     "conv2d filters=4 kernel=1\n"
                                     "flatten\n"
                                     "softmax_cross_entropy\n");
    assert_int_equal(spec->num_layers, 3);
    bg_model_spec_destroy(spec);
    spec = parse_ok("input channels=5 height=1 width=1\ndense units=4\nsoftmax_cross_entropy\n");
    assert_int_equal(spec->num_layers, 2);
    bg_model_spec_destroy(spec);
}

static void test_error_loss_needs_flat_input(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "softmax_cross_entropy\n",
                 "spec:2:1: softmax_cross_entropy needs a flat input, got 1x28x28; add "
                 "'flatten' before it");
}

static void test_error_layer_too_large(void **state) {
    (void)state;
    /* 2^60 inputs times 2^20 units overflows int64. */
    expect_error("input channels=1048576 height=1048576 width=1048576\n"
                 "flatten\n"
                 "dense units=1048576\n"
                 "softmax_cross_entropy\n",
                 "spec:3:1: layer too large: its sizes overflow 64-bit counts");
    /* Each relu's output is 2^62 bytes, which fits; the two together are
     * 2^63, which the total of activation bytes cannot hold. */
    expect_error(
        "input channels=1048576 height=1048576 width=1048576\n"
        "relu\n"
        "relu\n"
        "flatten\n"
        "dense units=1\n"
        "softmax_cross_entropy\n",
        "spec:3:1: model too large: with this layer its parameters, FLOPs or activation bytes "
        "overflow 64-bit counts");
    /* filters * c * k * k = 2^20 * 2^20 * 2^40. */
    expect_error("input channels=1048576 height=1048576 width=1048576\n"
                 "conv2d filters=1048576 kernel=1048576\n",
                 "spec:2:1: layer too large: its sizes overflow 64-bit counts");
    /* A relu on a 2^60-float map fits (2^60 FLOPs, 2^62 bytes) but a conv
     * with 8 filters on it needs 2 * 2^20 * 8 * 2^40 = 2^64 FLOPs. */
    expect_error("input channels=1048576 height=1048576 width=1048576\n"
                 "relu\n"
                 "conv2d filters=8 kernel=1\n",
                 "spec:3:1: layer too large: its sizes overflow 64-bit counts");
    /* Each convolution fits, and their outputs' bytes together too
     * (2^42 + 2^62 + 2^43); their FLOPs, 2^61 + 2^61 + 2^62, reach 2^63 at
     * the third. */
    expect_error("input channels=1048576 height=1048576 width=1048576\n"
                 "conv2d filters=1 kernel=1\n"
                 "conv2d filters=1048576 kernel=1\n"
                 "conv2d filters=2 kernel=1\n",
                 "spec:4:1: "
                 "model too large: with this layer its parameters, FLOPs or activation bytes "
                 "overflow 64-bit counts");
}

/* What a paste or a typo leaves that looks right: bytes outside ASCII,
 * named; '#' in the middle of a line; spaces around '='; one class. */
static void test_lookalikes_and_hints(void **state) {
    (void)state;
    expect_error(MNIST_INPUT "conv2d filters=8\xC2\xA0kernel=3\n",
                 "spec:2:17: bytes C2 A0 (a no-break space) outside a comment; a model spec's "
                 "words and numbers are ASCII, separated by spaces or tabs");
    expect_error(MNIST_INPUT "conv2d filters=8 kernel\xE2\x80\x8B=3\n",
                 "spec:2:24: bytes E2 80 8B (a zero-width space) outside a comment; a model "
                 "spec's words and numbers are ASCII, separated by spaces or tabs");
    expect_error(MNIST_INPUT "\xFF\xFE\n",
                 "spec:2:1: byte FF outside a comment; a model spec's words and numbers are "
                 "ASCII, separated by spaces or tabs");
    /* A character cut short by the line's end. */
    expect_error(MNIST_INPUT "flatten \xE2\x80\n",
                 "spec:2:9: bytes E2 80 outside a comment; a model spec's words and numbers are "
                 "ASCII, separated by spaces or tabs");
    /* In a comment anything goes. */
    bg_model_spec_t *spec = parse_ok(MNIST_INPUT "# caf\xC3\xA9 \xE2\x80\x8B\n"
                                                 "flatten\ndense units=2\nsoftmax_cross_entropy\n");
    assert_int_equal(spec->classes, 2);
    bg_model_spec_destroy(spec);
    expect_error(MNIST_INPUT "conv2d filters=8#note kernel=3\n",
                 "spec:2:1: missing option 'kernel' for conv2d (what follows '#' at column 17 "
                 "is a comment)");
    expect_error(MNIST_INPUT "conv2d filters=#8 kernel=3\n",
                 "spec:2:8: empty value for option 'filters' (what follows '#' at column 16 is a "
                 "comment)");
    expect_error(MNIST_INPUT "conv2d filters= kernel=3\n",
                 "spec:2:8: empty value for option 'filters' (filters=VALUE, with no space around "
                 "'=')");
    expect_error(MNIST_INPUT "conv2d filters = 8 kernel=3\n",
                 "spec:2:8: option 'filters' needs a value (filters=VALUE, with no space around "
                 "'=')");
    expect_error(MNIST_INPUT "flatten\ndense units=1\nsoftmax_cross_entropy\n",
                 "spec:4:1: softmax_cross_entropy over 1 output: with one class the loss is "
                 "always 0 and nothing learns; the layer before it needs 2 or more outputs, one "
                 "per class");
}

/* ---- residual blocks ----------------------------------------------------- */

/* A block over an image and two nested over vectors: each residual and add
 * names its partner, open_blocks counts the blocks around each layer (an
 * add inside its own, a residual outside its own), shapes pass through,
 * an add costs a FLOP a value and a residual none, and a stage may start
 * only outside every block. */
static void test_residual_blocks(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=2 height=6 width=6\n"
                                     "residual\n" /* 0 */
                                     "conv2d filters=2 kernel=3 padding=same activation=relu\n"
                                     "conv2d filters=2 kernel=3 padding=same\n" /* 3 */
                                     "add\n"                                    /* 4 */
                                     "flatten\n"                                /* 5 */
                                     "dense units=8\n"                          /* 6 */
                                     "residual\n"                               /* 7 */
                                     "dense units=8 activation=tanh\n"          /* 8, 9 */
                                     "residual\n"                               /* 10 */
                                     "layernorm\n"                              /* 11 */
                                     "add\n"                                    /* 12 */
                                     "add\n"                                    /* 13 */
                                     "dense units=3\n"                          /* 14 */
                                     "softmax_cross_entropy\n");
    assert_int_equal(spec->num_layers, 16);
    const bg_layer_spec_t *l = spec->layers;
    static const int partner[16] = {4, -1, -1, -1, 0, -1, -1, 13, -1, -1, 12, -1, 10, 7, -1, -1};
    static const int open[16] = {0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 2, 2, 1, 0, 0};
    static const int cut[16] = {-1, 0, 0, 0, 0, -1, -1, -1, 7, 7, 7, 7, 7, 7, -1, -1};
    for (int i = 0; i < 16; i++) {
        if (l[i].partner != partner[i]) fail_msg("layer %d: partner %d", i, l[i].partner);
        if (l[i].open_blocks != open[i]) fail_msg("layer %d: open_blocks %d", i, l[i].open_blocks);
        if (bg_model_spec_block_cut(spec, i) != cut[i])
            fail_msg("layer %d: block cut %d", i, bg_model_spec_block_cut(spec, i));
    }
    assert_int_equal(bg_model_spec_block_cut(spec, 16), -1); /* the end */
    assert_int_equal(l[0].kind, BG_LAYER_RESIDUAL);
    assert_int_equal(l[4].kind, BG_LAYER_ADD);
    assert_shape(l[0].out, 2, 6, 6);
    assert_shape(l[4].in, 2, 6, 6);
    assert_shape(l[4].out, 2, 6, 6);
    assert_shape(l[13].out, 8, 1, 1);
    assert_int_equal(l[0].flops, 0);
    assert_int_equal(l[4].flops, 72);
    assert_int_equal(l[13].flops, 8);
    assert_int_equal(l[0].params + l[4].params, 0);
    assert_int_equal(l[4].in_image, 1);
    assert_int_equal(l[13].in_image, 0);
    assert_string_equal(bg_layer_kind_name(BG_LAYER_RESIDUAL), "residual");
    assert_string_equal(bg_layer_kind_name(BG_LAYER_ADD), "add");

    /* --split: outside the blocks only, naming the block and where to cut. */
    int first[4]; /* each stage's first layer, then the layer count */
    const int good[] = {5, 14};
    assert_int_equal(bg_model_spec_check_split(spec, 3, good, first), BG_OK);
    assert_int_equal(first[1], 5);
    assert_int_equal(first[3], 16);
    const int inside[] = {5, 11};
    assert_int_equal(bg_model_spec_check_split(spec, 3, inside, NULL), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(),
                        "--split: stage 2 would start at layer 11, inside the residual block of "
                        "layers 7..13 (lines 8..13), whose add needs the block's input on the "
                        "same stage; start it at layer 7 or 14");
    const int add[] = {4};
    assert_int_equal(bg_model_spec_check_split(spec, 2, add, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "block of layers 0..4 (lines 2..5)"));
    /* A block that starts the model: stage 1 cannot start at its layer 0
     * (until 2026-12-04 offered: "start it at layer 0 or 5"). */
    assert_non_null(strstr(bg_error_message(), "same stage; start it at layer 5"));
    /* Nor where the stage before starts. */
    const int after[] = {7, 11};
    assert_int_equal(bg_model_spec_check_split(spec, 3, after, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "same stage; start it at layer 14"));
    bg_model_spec_destroy(spec);

    /* The structure is in the fingerprint: the same layers, blocks apart. */
    const uint64_t nested = fingerprint_of("input channels=4 height=1 width=1\n"
                                           "residual\nrelu\nresidual\ntanh\nadd\nadd\n"
                                           "dense units=2\nsoftmax_cross_entropy\n");
    const uint64_t apart = fingerprint_of("input channels=4 height=1 width=1\n"
                                          "residual\nrelu\nadd\nresidual\ntanh\nadd\n"
                                          "dense units=2\nsoftmax_cross_entropy\n");
    assert_true(nested != apart);
}

/* A shortcut branch: a downsampling block whose shortcut is a strided
 * 1x1 convolution. The shortcut's input is the main branch's output, its
 * output the block's input again; each end names the block's shortcut;
 * the layers of both branches lie inside the block. */
static void test_shortcut_blocks(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse_ok("input channels=2 height=6 width=6\n"
                                     "residual\n"                                        /* 0 */
                                     "conv2d filters=4 kernel=3 stride=2 padding=same\n" /* 1 */
                                     "shortcut\n"                                        /* 2 */
                                     "conv2d filters=4 kernel=1 stride=2\n"              /* 3 */
                                     "add\n"                                             /* 4 */
                                     "flatten\n"
                                     "dense units=2\n"
                                     "softmax_cross_entropy\n");
    const bg_layer_spec_t *l = spec->layers;
    assert_int_equal(l[2].kind, BG_LAYER_SHORTCUT);
    assert_string_equal(bg_layer_kind_name(BG_LAYER_SHORTCUT), "shortcut");
    assert_shape(l[2].in, 4, 3, 3);
    assert_shape(l[2].out, 2, 6, 6);
    assert_shape(l[3].in, 2, 6, 6);
    assert_shape(l[4].in, 4, 3, 3);
    assert_shape(l[4].out, 4, 3, 3);
    assert_int_equal(l[0].partner, 4);
    assert_int_equal(l[2].partner, 0);
    assert_int_equal(l[4].partner, 0);
    for (int i = 0; i < 5; i++) assert_int_equal(l[i].shortcut, i == 1 || i == 3 ? -1 : 2);
    for (int i = 1; i < 5; i++) assert_int_equal(l[i].open_blocks, 1);
    assert_int_equal(l[2].flops, 0);
    assert_int_equal(l[5].shortcut, -1);
    assert_int_equal(bg_model_spec_block_cut(spec, 3), 0);
    bg_model_spec_destroy(spec);
    /* The same layers without the shortcut are another model. */
    assert_true(fingerprint_of("input channels=4 height=1 width=1\nresidual\nrelu\nshortcut\n"
                               "tanh\nadd\ndense units=2\nsoftmax_cross_entropy\n") !=
                fingerprint_of("input channels=4 height=1 width=1\nresidual\nrelu\n"
                               "tanh\nadd\ndense units=2\nsoftmax_cross_entropy\n"));
}

static void test_error_residual_blocks(void **state) {
    (void)state;
    expect_error("input channels=4 height=1 width=1\nrelu\nadd\n",
                 "spec:3:1: 'add' with no residual block open; write 'residual' where the "
                 "block starts, and its input is what add adds");
    expect_error("input channels=4 height=1 width=1\nresidual\nrelu\nadd\nadd\n",
                 "spec:5:1: 'add' with no residual block open; write 'residual' where the "
                 "block starts, and its input is what add adds");
    expect_error("input channels=4 height=1 width=1\nrelu\nresidual # x\nadd\n",
                 "spec:4:1: empty residual block (line 3): put the block's layers between "
                 "'residual' and 'add'");
    expect_error("input channels=4 height=1 width=1\nresidual\ndense units=5\nadd\n",
                 "spec:4:1: 'add' needs the block's output the shape of its input: the block "
                 "from 'residual' at line 2 takes a vector of 4 values and ends with a vector "
                 "of 5 values (where a block changes the shape, a 'shortcut' branch before "
                 "'add' can take its input there)");
    expect_error(MNIST_INPUT "residual\nconv2d filters=1 kernel=3\nadd\n",
                 "spec:4:1: 'add' needs the block's output the shape of its input: the block "
                 "from 'residual' at line 2 takes a 1x28x28 image and ends with a 1x26x26 "
                 "image (where a block changes the shape, a 'shortcut' branch before 'add' can "
                 "take its input there)");
    /* A shortcut branch starts from the block's input, which 'residual'
     * hands on and the main branch's dense took as a vector (until
     * 2026-12-05: "that line 2 makes", of the residual line alone). */
    expect_error("input channels=6 height=1 width=1\nresidual\ndense units=6\nshortcut\n"
                 "conv2d filters=6 kernel=1\nadd\nsoftmax_cross_entropy\n",
                 "spec:5:1: conv2d needs an image input (channels x height x width), got the "
                 "vector of 6 values that the block from line 2 takes in (6x1x1, which line 3 "
                 "takes as a vector, and so every layer on it)");
    expect_error("input channels=6 height=1 width=1\ndense units=6\nresidual\ndense units=6\n"
                 "shortcut\nconv2d filters=6 kernel=1\nadd\nsoftmax_cross_entropy\n",
                 "spec:6:1: conv2d needs an image input (channels x height x width), got the "
                 "vector of 6 values that the block from line 3 takes in");
    /* After the block, what reaches a layer is its add's sum (a review:
     * it was "the block from line 2 takes in"). */
    expect_error("input channels=6 height=1 width=1\nresidual\ndense units=6\nshortcut\nrelu\n"
                 "add\nconv2d filters=6 kernel=1\nsoftmax_cross_entropy\n",
                 "spec:7:1: conv2d needs an image input (channels x height x width), got the "
                 "vector of 6 values that line 6 makes");
    expect_error("input channels=6 height=1 width=1\ndense units=6\nconv2d filters=6 kernel=1\n"
                 "softmax_cross_entropy\n",
                 "spec:3:1: conv2d needs an image input (channels x height x width), got the "
                 "vector of 6 values that line 2 makes");
    /* "an 8x6x6", "an 11x..", "an 18000x..", "a 180x..": the article as the
     * number is said (until 2026-12-05 always "a"). */
    static const struct {
        int channels;
        const char *article;
    } said[] = {{8, "an"},   {11, "an"},    {18, "an"},   {80, "an"}, {180, "a"},
                {1100, "a"}, {18000, "an"}, {8192, "an"}, {2048, "a"}};
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++) {
        char text[160], message[400];
        snprintf(text, sizeof text,
                 "input channels=4 height=8 width=8\nresidual\nconv2d filters=%d kernel=3\nadd\n",
                 said[i].channels);
        snprintf(message, sizeof message,
                 "spec:4:1: 'add' needs the block's output the shape of its input: the block "
                 "from 'residual' at line 2 takes a 4x8x8 image and ends with %s %dx6x6 image "
                 "(where a block changes the shape, a 'shortcut' branch before 'add' can take "
                 "its input there)",
                 said[i].article, said[i].channels);
        expect_error(text, message);
    }
    /* The same values, but an image against a vector. */
    expect_error("input channels=4 height=2 width=2\nresidual\nflatten\ndense units=16\nadd\n",
                 "spec:5:1: 'add' needs the block's output the shape of its input: the block "
                 "from 'residual' at line 2 takes a 4x2x2 image and ends with a vector of 16 "
                 "values (where a block changes the shape, a 'shortcut' branch before 'add' can "
                 "take its input there)");
    expect_error("input channels=4 height=1 width=1\nresidual\nconv2d filters=4 kernel=1\n"
                 "flatten\nadd\n",
                 "spec:5:1: 'add' needs the block's output the shape of its input: the block "
                 "from 'residual' at line 2 takes a 4x1x1 image and ends with a vector of 4 "
                 "values (where a block changes the shape, a 'shortcut' branch before 'add' can "
                 "take its input there)");
    expect_error("input channels=4 height=1 width=1\nresidual\nresidual\nrelu\nadd\n"
                 "softmax_cross_entropy\n",
                 "spec:6:1: softmax_cross_entropy inside the residual block opened at line 2; "
                 "close the block with 'add' before the loss");
    expect_error("input channels=4 height=1 width=1\nresidual\nrelu\n",
                 "spec:3:1: missing final softmax_cross_entropy (the model must end with the "
                 "loss layer); the residual block opened at line 2 is still open");
    expect_error("input channels=4 height=1 width=1\nrelu\nshortcut\n",
                 "spec:3:1: 'shortcut' with no residual block open; it ends the main branch of a "
                 "block that 'residual' opens");
    expect_error("input channels=4 height=1 width=1\nresidual\nshortcut\n",
                 "spec:3:1: empty residual block (line 2): put the block's layers between "
                 "'residual' and 'shortcut'");
    expect_error("input channels=4 height=1 width=1\nresidual\nrelu\nshortcut\nadd\n",
                 "spec:5:1: empty shortcut (line 4): put the layers the block's input takes to "
                 "the add between 'shortcut' and 'add', or leave 'shortcut' out to add the "
                 "input itself");
    expect_error("input channels=4 height=1 width=1\nresidual\nrelu\nshortcut\ntanh\n"
                 "shortcut\n",
                 "spec:6:1: a second 'shortcut' in the residual block opened at line 2 (the "
                 "first at line 4); a block has one main branch and one shortcut");
    expect_error("input channels=4 height=1 width=1\nresidual\ndense units=5\nshortcut\n"
                 "dense units=6\nadd\n",
                 "spec:6:1: 'add' needs both branches to end with the same shape: the main "
                 "branch of the block from 'residual' at line 2 ends with a vector of 5 values "
                 "(at 'shortcut', line 4), the shortcut branch with a vector of 6 values");
    /* A shortcut branch starts from the block's input: an image here. */
    expect_error("input channels=4 height=2 width=2\nresidual\nflatten\nshortcut\n"
                 "dense units=16\n",
                 "spec:5:1: dense needs a flat input, got 4x2x2; add 'flatten' before it");
    /* A nested block's shortcut is its own. */
    bg_model_spec_destroy(parse_ok("input channels=4 height=1 width=1\nresidual\nrelu\n"
                                   "shortcut\nresidual\ntanh\nshortcut\nrelu\nadd\nadd\n"
                                   "dense units=2\nsoftmax_cross_entropy\n"));
    expect_error("input channels=4 height=1 width=1\nresidual size=2\n",
                 "spec:2:10: unknown option 'size' for residual (it takes no options)");
}

/* A spec in a deep folder: the message keeps its position and reason after
 * a path as long as a path may be (4095 bytes), with a prefix before it. */
static void test_error_at_longest_path(void **state) {
    (void)state;
    enum { PATH_BYTES = 4095 };
    char *path = malloc(PATH_BYTES + 1);
    assert_non_null(path);
    memset(path, 'd', PATH_BYTES);
    path[PATH_BYTES] = '\0';
    bg_model_spec_t *spec = untouched;
    const char text[] = "bogus\n";
    assert_int_equal(bg_model_spec_parse(path, text, strlen(text), &spec), BG_ERR_PARSE);
    bg_error_prefix(BG_ERR_PARSE, "summary of the model: ");
    const char *message = bg_error_message();
    const char *tail = ":1:1: unknown layer 'bogus' (expected input, conv2d, maxpool, avgpool, "
                       "flatten, dense, relu, tanh, sigmoid, gelu, layernorm, dropout, residual, "
                       "shortcut, add, softmax_cross_entropy)";
    assert_int_equal(strlen(message), strlen("summary of the model: ") + PATH_BYTES + strlen(tail));
    assert_string_equal(message + strlen(message) - strlen(tail), tail);
    assert_ptr_equal(spec, untouched);
    free(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_at_longest_path),
        cmocka_unit_test(test_lookalikes_and_hints),
        cmocka_unit_test(test_origin_cnn),
        cmocka_unit_test(test_conv_padding_same_and_stride),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_layout_comments_crlf_tabs),
        cmocka_unit_test(test_byte_order_mark),
        cmocka_unit_test(test_utf16),
        cmocka_unit_test(test_explicit_relu_and_largest_size),
        cmocka_unit_test(test_leading_zeros),
        cmocka_unit_test(test_not_nul_terminated),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_layer_kind_names),
        cmocka_unit_test(test_destroy_null),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_load_parse_error_names_file),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_load_directory),
        cmocka_unit_test(test_load_too_large),
        cmocka_unit_test(test_error_empty),
        cmocka_unit_test(test_error_nul_byte),
        cmocka_unit_test(test_error_control_byte_in_comment),
        cmocka_unit_test(test_error_bare_carriage_return),
        cmocka_unit_test(test_error_long_line),
        cmocka_unit_test(test_error_unknown_layer),
        cmocka_unit_test(test_error_unknown_option),
        cmocka_unit_test(test_error_option_without_value),
        cmocka_unit_test(test_error_empty_value),
        cmocka_unit_test(test_error_non_numeric_value),
        cmocka_unit_test(test_error_out_of_range_value),
        cmocka_unit_test(test_error_bad_enum_value),
        cmocka_unit_test(test_error_duplicate_option),
        cmocka_unit_test(test_error_missing_required_option),
        cmocka_unit_test(test_error_input_not_first),
        cmocka_unit_test(test_error_input_repeated),
        cmocka_unit_test(test_error_missing_loss),
        cmocka_unit_test(test_error_layer_after_loss),
        cmocka_unit_test(test_error_too_many_layers),
        cmocka_unit_test(test_error_conv_kernel_too_large),
        cmocka_unit_test(test_error_same_padding_even_kernel),
        cmocka_unit_test(test_error_pool_too_large),
        cmocka_unit_test(test_error_dense_needs_flat_input),
        cmocka_unit_test(test_error_loss_needs_flat_input),
        cmocka_unit_test(test_images_and_vectors),
        cmocka_unit_test(test_error_layer_too_large),
        cmocka_unit_test(test_safetensors_given),
        cmocka_unit_test(test_other_text_given),
        cmocka_unit_test(test_residual_blocks),
        cmocka_unit_test(test_shortcut_blocks),
        cmocka_unit_test(test_error_residual_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
