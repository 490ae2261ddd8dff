/* Residual blocks in a stage (double precision on the CPU backend): the
 * forward of a model with nested blocks, an activation in place over an
 * add and a block closing right after another, against a host reference
 * written plainly; every parameter's gradient and the stage input's
 * against central finite differences of the loss, for stages starting at
 * layer 0 and at a residual; and a stage refusing to cut a block. The
 * pipeline tests (test_pipeline.c) check that every placement computes
 * one device's weights; this checks that those are the right ones. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "model_spec.h"
#include "stage.h"

enum { BATCH = 4, FEATURES = 6, WIDTH = 5, CLASSES = 3 };

/* Nested blocks over vectors; tanh (smooth, for finite differences) in
 * place over a dense layer's output and over an add's. */
static const char vector_model[] = "input channels=6 height=1 width=1\n"
                                   "dense units=5 activation=tanh\n" /* 0, 1 */
                                   "residual\n"                      /* 2 */
                                   "dense units=5 activation=tanh\n" /* 3, 4 */
                                   "residual\n"                      /* 5 */
                                   "layernorm\n"                     /* 6 */
                                   "dense units=5\n"                 /* 7 */
                                   "add\n"                           /* 8 */
                                   "tanh\n"                          /* 9: in place */
                                   "add\n"                           /* 10 */
                                   "residual\n"                      /* 11 */
                                   "dense units=5 activation=tanh\n" /* 12, 13 */
                                   "add\n"                           /* 14 */
                                   "dense units=3\n"                 /* 15 */
                                   "softmax_cross_entropy\n";        /* 16 */

/* A block over images at the model's input, two closing together, an
 * avgpool inside a block. */
static const char image_model[] = "input channels=2 height=4 width=4\n"
                                  "residual\n" /* 0 */
                                  "conv2d filters=2 kernel=3 padding=same activation=tanh\n"
                                  "residual\n" /* 3 */
                                  "conv2d filters=2 kernel=3 padding=same\n"
                                  "add\n" /* 5 */
                                  "add\n" /* 6 */
                                  "avgpool size=2\n"
                                  "flatten\n"
                                  "dense units=3\n"
                                  "softmax_cross_entropy\n";

/* Shortcut branches: a downsampling block (a strided convolution on the
 * main branch, a strided 1x1 on the shortcut, ResNet's projection), and
 * over vectors one whose shortcut branch holds a block of its own. */
static const char shortcut_model[] = "input channels=2 height=6 width=6\n"
                                     "conv2d filters=3 kernel=3 padding=same activation=tanh\n"
                                     "residual\n" /* 2 */
                                     "conv2d filters=4 kernel=3 stride=2 padding=same\n"
                                     "tanh\n"
                                     "conv2d filters=4 kernel=3 padding=same\n"
                                     "shortcut\n" /* 6 */
                                     "conv2d filters=4 kernel=1 stride=2\n"
                                     "add\n"  /* 8 */
                                     "tanh\n" /* in place over the add's */
                                     "flatten\n"
                                     "dense units=6\n"
                                     "residual\n" /* 12 */
                                     "dense units=4 activation=tanh\n"
                                     "shortcut\n" /* 15 */
                                     "dense units=4\n"
                                     "residual\n"
                                     "tanh\n"
                                     "add\n"
                                     "add\n" /* 20 */
                                     "dense units=3\n"
                                     "softmax_cross_entropy\n";

typedef struct fixture {
    bg_backend_t *be;
} fixture_t;

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    cfg.dtype = BG_F64;
    assert_int_equal(bg_backend_cpu_create(&cfg, &f->be), BG_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    bg_backend_destroy(f->be);
    free(f);
    return 0;
}

static void ok(bg_status_t st) {
    if (st != BG_OK) fail_msg("%s: %s", bg_status_name(st), bg_error_message());
}

static bg_model_spec_t *parse(const char *text) {
    bg_model_spec_t *spec = NULL;
    ok(bg_model_spec_parse("residual", text, strlen(text), &spec));
    return spec;
}

static bg_stage_t *stage_of(const bg_model_spec_t *spec, bg_backend_t *be, int first) {
    bg_stage_config_t cfg = BG_STAGE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.backend = be;
    cfg.first_layer = first;
    cfg.last_layer = spec->num_layers;
    cfg.max_batch = BATCH;
    cfg.seed = 3;
    bg_stage_t *stage = NULL;
    ok(bg_stage_create(&cfg, &stage));
    return stage;
}

/* Values in [-1, 1) from a fixed LCG. */
static void fill(float *x, int64_t n, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)((double)(seed >> 11) / 0x1p53 * 2 - 1);
    }
}

static const int32_t labels[BATCH] = {0, 2, 1, 2};

/* The loss summed over the batch for these inputs and the stage's present
 * parameters. */
static double loss_of(bg_stage_t *stage, const float *input) {
    ok(bg_stage_load_batch(stage, BATCH, input, labels));
    bg_stage_loss_t loss;
    ok(bg_stage_forward(stage, BATCH, &loss));
    return loss.loss_sum;
}

/* ---- the host reference of vector_model ---- */

/* y = W x + b, W (out, in). */
static void dense(const double *w, const double *b, int in, int out, const double *x, double *y) {
    for (int o = 0; o < out; o++) {
        double sum = b[o];
        for (int i = 0; i < in; i++) sum += w[o * in + i] * x[i];
        y[o] = sum;
    }
}

/* The loss of one sample, layer by layer; p: the stage's parameters in
 * their flat order (each layer's weight, then its bias). */
static double reference_loss(const float *p, const float *x6, int32_t label) {
    double w[64], b[8], x[FEATURES], h[WIDTH], outer[WIDTH], inner[WIDTH], t[WIDTH], z[CLASSES];
    for (int i = 0; i < FEATURES; i++) x[i] = x6[i];
    const float *at = p;
    /* Reads a layer's weight (count) and bias (out) from the flat list. */
#define TAKE(count, out)                                                                           \
    do {                                                                                           \
        for (int k = 0; k < (count); k++) w[k] = at[k];                                            \
        for (int k = 0; k < (out); k++) b[k] = at[(count) + k];                                    \
        at += (count) + (out);                                                                     \
    } while (0)
    TAKE(FEATURES * WIDTH, WIDTH);
    dense(w, b, FEATURES, WIDTH, x, h);
    for (int k = 0; k < WIDTH; k++) h[k] = tanh(h[k]);
    memcpy(outer, h, sizeof h); /* layer 2: residual */
    TAKE(WIDTH * WIDTH, WIDTH);
    dense(w, b, WIDTH, WIDTH, h, t);
    for (int k = 0; k < WIDTH; k++) h[k] = tanh(t[k]);
    memcpy(inner, h, sizeof h); /* layer 5: residual */
    TAKE(WIDTH, WIDTH);         /* layernorm: gamma, beta */
    double mean = 0, var = 0;
    for (int k = 0; k < WIDTH; k++) mean += h[k] / WIDTH;
    for (int k = 0; k < WIDTH; k++) var += (h[k] - mean) * (h[k] - mean) / WIDTH;
    for (int k = 0; k < WIDTH; k++) t[k] = (h[k] - mean) / sqrt(var + 1e-5) * w[k] + b[k];
    TAKE(WIDTH * WIDTH, WIDTH);
    dense(w, b, WIDTH, WIDTH, t, h);
    for (int k = 0; k < WIDTH; k++) h[k] = tanh(h[k] + inner[k]); /* add, tanh */
    for (int k = 0; k < WIDTH; k++) h[k] += outer[k];             /* add */
    memcpy(outer, h, sizeof h);                                   /* layer 11: residual */
    TAKE(WIDTH * WIDTH, WIDTH);
    dense(w, b, WIDTH, WIDTH, h, t);
    for (int k = 0; k < WIDTH; k++) h[k] = tanh(t[k]) + outer[k]; /* add */
    TAKE(WIDTH * CLASSES, CLASSES);
    dense(w, b, WIDTH, CLASSES, h, z);
#undef TAKE
    double most = z[0], sum = 0;
    for (int c = 1; c < CLASSES; c++) most = fmax(most, z[c]);
    for (int c = 0; c < CLASSES; c++) sum += exp(z[c] - most);
    return log(sum) + most - z[label];
}

/* The stage's forward through the blocks is the reference's: the loss of
 * each sample summed, to 1e-12. */
static void test_forward_matches_reference(void **state) {
    fixture_t *f = *state;
    bg_model_spec_t *spec = parse(vector_model);
    assert_int_equal(spec->num_layers, 17);
    bg_stage_t *stage = stage_of(spec, f->be, 0);
    const int64_t count = bg_stage_param_count(stage);
    assert_int_equal(count, 35 + 30 + 10 + 30 + 30 + 18);
    float *params = malloc(sizeof(float) * (size_t)count), input[BATCH * FEATURES];
    assert_non_null(params);
    /* Larger values than the initial ones, so that every block's branch
     * weighs in the loss. */
    fill(params, count, 11);
    ok(bg_stage_upload_params(stage, params));
    fill(input, BATCH * FEATURES, 12);
    double want = 0;
    for (int i = 0; i < BATCH; i++) want += reference_loss(params, input + i * FEATURES, labels[i]);
    const double got = loss_of(stage, input);
    if (!(fabs(got - want) <= 1e-12 * want)) fail_msg("loss %.17g, reference %.17g", got, want);
    /* Without the outer skip (layer 10's add of layer 2's input) the loss
     * differs: the reference would see it. */
    float *zeroed = malloc(sizeof(float) * (size_t)count);
    assert_non_null(zeroed);
    memcpy(zeroed, params, sizeof(float) * (size_t)count);
    for (int k = 0; k < 30; k++) zeroed[k] = 0; /* layer 0's weights: its outputs tanh(b) */
    ok(bg_stage_upload_params(stage, zeroed));
    double zero_want = 0;
    for (int i = 0; i < BATCH; i++)
        zero_want += reference_loss(zeroed, input + i * FEATURES, labels[i]);
    assert_true(fabs(loss_of(stage, input) - zero_want) <= 1e-12 * zero_want);
    assert_true(fabs(zero_want - want) > 1e-3);
    free(zeroed);
    free(params);
    bg_stage_destroy(stage);
    bg_model_spec_destroy(spec);
}

/* |got - want| <= 1e-6 of the largest |want|, element by element. */
static void expect_gradients(const double *got, const double *want, int64_t n, const char *what) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    assert_true(scale > 1e-3);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-6 * scale))
            fail_msg("%s %lld: backward %.12g, finite difference %.12g (scale %g)", what,
                     (long long)i, got[i], want[i], scale);
}

/* The derivative of the loss along value k of `values` (floats the stage
 * reads: its parameters or its input), by central differences over the
 * step the float rounding leaves. */
static double finite_difference(bg_stage_t *stage, float *values, int64_t k, int params,
                                float *input) {
    const float saved = values[k];
    const float plus = saved + 1e-4f, minus = saved - 1e-4f;
    double loss[2];
    for (int side = 0; side < 2; side++) {
        values[k] = side == 0 ? plus : minus;
        if (params) ok(bg_stage_upload_params(stage, values));
        loss[side] = loss_of(stage, input);
    }
    values[k] = saved;
    if (params) ok(bg_stage_upload_params(stage, values));
    return (loss[0] - loss[1]) / ((double)plus - (double)minus);
}

/* The stage of `text` from layer `first`: the backward's gradient of every
 * parameter (and, unless the stage starts the model, of every input value)
 * is the loss's finite difference. */
static void check_gradients(bg_backend_t *be, const char *text, int first) {
    bg_model_spec_t *spec = parse(text);
    bg_stage_t *stage = stage_of(spec, be, first);
    const int64_t count = bg_stage_param_count(stage);
    const int64_t inputs = BATCH * bg_shape_numel(spec->layers[first].in);
    float *params = malloc(sizeof(float) * (size_t)count);
    float *input = malloc(sizeof(float) * (size_t)inputs),
          *grads = malloc(sizeof(float) * (size_t)count);
    double *got = malloc(sizeof(double) * (size_t)(count > inputs ? count : inputs));
    double *want = malloc(sizeof(double) * (size_t)(count > inputs ? count : inputs));
    assert_true(params && input && grads && got && want);
    ok(bg_stage_download_params(stage, params));
    for (int64_t k = 0; k < count; k++) params[k] *= 3; /* branches that matter */
    ok(bg_stage_upload_params(stage, params));
    fill(input, inputs, 21);

    ok(bg_stage_zero_grads(stage));
    loss_of(stage, input);
    ok(bg_stage_backward(stage, BATCH, 1.0));
    ok(bg_stage_download_grads(stage, grads));
    for (int64_t k = 0; k < count; k++) got[k] = grads[k];
    if (first > 0) { /* the input's gradient, in `got` for a while */
        ok(bg_backend_download_doubles(be, got, bg_stage_input_grad(stage), inputs));
        for (int64_t k = 0; k < inputs; k++) want[k] = finite_difference(stage, input, k, 0, input);
        expect_gradients(got, want, inputs, "input gradient");
        for (int64_t k = 0; k < count; k++) got[k] = grads[k];
    }
    for (int64_t k = 0; k < count; k++) want[k] = finite_difference(stage, params, k, 1, input);
    /* The float copies of the gradients hold 24 bits: within 1e-6. */
    expect_gradients(got, want, count, "parameter gradient");
    free(params);
    free(input);
    free(grads);
    free(got);
    free(want);
    bg_stage_destroy(stage);
    bg_model_spec_destroy(spec);
}

static void test_gradients_match_finite_differences(void **state) {
    fixture_t *f = *state;
    check_gradients(f->be, vector_model, 0);
    check_gradients(f->be, vector_model, 2);  /* a stage starting at a residual */
    check_gradients(f->be, vector_model, 11); /* ... at the last block's */
    check_gradients(f->be, image_model, 0);
    check_gradients(f->be, shortcut_model, 0);
    check_gradients(f->be, shortcut_model, 2);  /* at a block with a shortcut */
    check_gradients(f->be, shortcut_model, 12); /* ... whose branch holds a block */
}

/* A stage takes whole blocks only: one starting or ending inside a block
 * is refused, naming the block and the layer. */
static void test_stage_refuses_cut_block(void **state) {
    fixture_t *f = *state;
    bg_model_spec_t *spec = parse(vector_model);
    bg_stage_config_t cfg = BG_STAGE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.backend = f->be;
    cfg.max_batch = BATCH;
    bg_stage_t *stage = NULL;
    cfg.first_layer = 0;
    cfg.last_layer = 6;
    assert_int_equal(bg_stage_create(&cfg, &stage), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(),
                        "stage: layers [0, 6) cut the residual block of layers 2..10 at layer 6");
    cfg.first_layer = 12;
    cfg.last_layer = 17;
    assert_int_equal(bg_stage_create(&cfg, &stage), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(),
                        "stage: layers [12, 17) cut the residual block of layers 11..14 at "
                        "layer 12");
    assert_null(stage);
    cfg.first_layer = 2;
    cfg.last_layer = 11;
    ok(bg_stage_create(&cfg, &stage));
    /* Two depths of blocks: two skip gradients beside the ping-pong pair,
     * each a batch of the widest activation (5 doubles). */
    const bg_stage_memory_t m = bg_stage_memory(stage);
    const size_t vector = BATCH * WIDTH * sizeof(double);
    assert_int_equal(m.buffers, (2 + 2) * vector + vector /* output grad */ + vector /* input */);
    bg_stage_destroy(stage);
    bg_model_spec_destroy(spec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_matches_reference),
        cmocka_unit_test(test_gradients_match_finite_differences),
        cmocka_unit_test(test_stage_refuses_cut_block),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
