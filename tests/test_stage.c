/* Tests for the stage runtime on the CPU backend: the origin CNN run as one
 * stage equals the same CNN cut into two stages (losses, probabilities,
 * gradients, and parameters after an optimizer step), micro-batches
 * accumulate to the gradient of the whole batch, initialisation does not
 * depend on the split, memory accounting, and the argument errors.
 *
 * Exact comparisons run in double precision (BG_F64). The stage hands its
 * gradients and parameters to the host as floats, so the double values are
 * read by a spy on the backend's download op (see capture_t). */
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
#include "layer.h"
#include "stage.h"
#include "stage_impl.h"
#include "support/models.h"

static const char origin_cnn[] = BG_TEST_ORIGIN_CNN;

enum { LAYERS = 8, SPLIT = 4, BATCH = 16, PIXELS = 28 * 28, CLASSES = 10 };
enum { FLAT = 32 * 13 * 13 }; /* the output of layer 3 (flatten), input of layer 4 */
enum { TOTAL_PARAMS = 693962 };

/* ---- the download spy ----
 * The CPU backend's device memory is host memory, but the stage only offers
 * float copies of its buffers. A copy of the ops table whose download also
 * appends the bytes it moved to `values` lets a test see the doubles that an
 * F64 stage holds. One capture at a time (tests run one after another). */
typedef struct capture {
    bg_status_t (*download)(bg_backend_t *be, void *host_dst, const void *src, size_t bytes);
    double *values;
    int64_t used, capacity;
} capture_t;

static capture_t capture;

static bg_status_t spy_download(bg_backend_t *be, void *host_dst, const void *src, size_t bytes) {
    bg_status_t st = capture.download(be, host_dst, src, bytes);
    if (st != BG_OK || capture.values == NULL) return st;
    int64_t count = (int64_t)(bytes / sizeof(double));
    assert_true(capture.used + count <= capture.capacity);
    memcpy(capture.values + capture.used, host_dst, bytes);
    capture.used += count;
    return st;
}

typedef struct fixture {
    bg_model_spec_t *spec;
    bg_backend_t *f64, *f32;
    bg_backend_ops_t f64_ops; /* the CPU ops with spy_download */
    float images[BATCH * PIXELS];
    int32_t labels[BATCH];
} fixture_t;

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(bg_model_spec_parse("origin", origin_cnn, strlen(origin_cnn), &f->spec),
                     BG_OK);
    assert_int_equal(f->spec->num_layers, LAYERS);
    assert_int_equal(f->spec->total_params, TOTAL_PARAMS);
    assert_int_equal(bg_shape_numel(f->spec->layers[SPLIT].in), FLAT);

    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    assert_int_equal(bg_backend_cpu_create(&cfg, &f->f32), BG_OK);
    cfg.dtype = BG_F64;
    assert_int_equal(bg_backend_cpu_create(&cfg, &f->f64), BG_OK);
    f->f64_ops = *f->f64->ops;
    capture.download = f->f64_ops.download;
    f->f64_ops.download = spy_download;
    f->f64->ops = &f->f64_ops;

    /* Pixels in [0, 1] from a fixed LCG; labels cover every class. */
    uint64_t x = 12345;
    for (int i = 0; i < BATCH * PIXELS; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        f->images[i] = (float)(x >> 40) / (float)(1u << 24);
    }
    for (int i = 0; i < BATCH; i++) f->labels[i] = (i * 7) % CLASSES;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    bg_backend_destroy(f->f64);
    bg_backend_destroy(f->f32);
    bg_model_spec_destroy(f->spec);
    free(f);
    return 0;
}

/* ---- helpers ---- */

/* The configuration of a stage of the fixture's model (seed 42). */
static bg_stage_config_t stage_config(const fixture_t *f, bg_backend_t *be, int first, int last,
                                      int64_t max_batch) {
    bg_stage_config_t cfg = BG_STAGE_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.backend = be;
    cfg.first_layer = first;
    cfg.last_layer = last;
    cfg.max_batch = max_batch;
    cfg.seed = 42;
    return cfg;
}

static bg_stage_t *stage_create(const fixture_t *f, bg_backend_t *be, int first, int last,
                                int64_t max_batch, const bg_optimizer_config_t *optimizer) {
    bg_stage_config_t cfg = stage_config(f, be, first, last, max_batch);
    if (optimizer != NULL) cfg.optimizer = *optimizer;
    bg_stage_t *stage = NULL;
    bg_status_t st = bg_stage_create(&cfg, &stage);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    return stage;
}

static void ok(bg_status_t st) {
    if (st != BG_OK) fail_msg("%s: %s", bg_status_name(st), bg_error_message());
}

/* The stage's gradients (grads != 0) or parameters as doubles, appended to
 * `out` at `at`; returns how many. The stage must be on the spied F64
 * backend. */
static int64_t download_f64(bg_stage_t *stage, int grads, double *out, int64_t at,
                            int64_t capacity) {
    int64_t count = bg_stage_param_count(stage);
    float *host = malloc(sizeof(float) * (size_t)count);
    assert_non_null(host);
    capture.values = out + at;
    capture.used = 0;
    capture.capacity = capacity - at;
    ok(grads ? bg_stage_download_grads(stage, host) : bg_stage_download_params(stage, host));
    assert_int_equal(capture.used, count);
    /* The floats handed out are the doubles rounded. */
    for (int64_t i = 0; i < count; i++) assert_true(host[i] == (float)out[at + i]);
    capture.values = NULL;
    free(host);
    return count;
}

/* max |a - b| <= rel * max |b|: the difference is measured against the
 * vector's scale, since a sum reassociated can put a near-zero element
 * anywhere. */
static void assert_close(const double *a, const double *b, int64_t n, double rel,
                         const char *what) {
    double scale = 0, worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
        double d = fabs(a[i] - b[i]);
        if (!(d <= worst)) { /* also catches NaN */
            worst = d;
            at = i;
        }
    }
    assert_true(scale > 0);
    if (!(worst <= rel * scale))
        fail_msg("%s: element %lld differs by %g (%.17g vs %.17g), scale %g, allowed %g", what,
                 (long long)at, worst, a[at], b[at], scale, rel * scale);
}

static void assert_close_scalar(double a, double b, double rel, const char *what) {
    if (!(fabs(a - b) <= rel * fabs(b))) fail_msg("%s: %.17g vs %.17g", what, a, b);
}

/* One forward and backward of the whole batch through stages a = [0, SPLIT)
 * and b = [SPLIT, LAYERS) on the same backend, handing activations and
 * gradients over with the backend's copy op. */
static void two_stage_pass(bg_backend_t *be, bg_stage_t *a, bg_stage_t *b, int64_t n,
                           const float *images, const int32_t *labels, double loss_scale,
                           bg_stage_loss_t *loss) {
    ok(bg_stage_load_batch(a, n, images, NULL));
    /* Stage b's labels: load_batch also fills its input, overwritten below
     * with stage a's output. */
    float *placeholder = calloc((size_t)(n * FLAT), sizeof(float));
    assert_non_null(placeholder);
    ok(bg_stage_load_batch(b, n, placeholder, labels));
    free(placeholder);

    ok(bg_stage_forward(a, n, NULL));
    ok(be->ops->copy(be, bg_stage_input(b), bg_stage_output(a), n * FLAT));
    ok(bg_stage_forward(b, n, loss));
    ok(bg_stage_backward(b, n, loss_scale));
    assert_non_null(bg_stage_input_grad(b));
    assert_non_null(bg_stage_output_grad(a));
    ok(be->ops->copy(be, bg_stage_output_grad(a), bg_stage_input_grad(b), n * FLAT));
    ok(bg_stage_backward(a, n, loss_scale));
}

static void whole_pass(bg_stage_t *s, int64_t n, const float *images, const int32_t *labels,
                       double loss_scale, bg_stage_loss_t *loss) {
    ok(bg_stage_load_batch(s, n, images, labels));
    ok(bg_stage_forward(s, n, loss));
    ok(bg_stage_backward(s, n, loss_scale));
}

/* ---- tests ---- */

/* Two stages split at `split` compute what one stage computes, over two
 * optimizer steps (Adam). */
static void check_split_equals_whole(fixture_t *f, int split) {
    bg_backend_t *be = f->f64;
    bg_stage_t *whole = stage_create(f, be, 0, LAYERS, BATCH, NULL);
    bg_stage_t *a = stage_create(f, be, 0, split, BATCH, NULL);
    bg_stage_t *b = stage_create(f, be, split, LAYERS, BATCH, NULL);
    assert_true(bg_stage_has_loss(whole));
    assert_false(bg_stage_has_loss(a));
    assert_true(bg_stage_has_loss(b));
    assert_null(bg_stage_input_grad(a));  /* layer 0 has no predecessor */
    assert_null(bg_stage_output_grad(b)); /* the loss stage makes its own */
    assert_int_equal(bg_stage_param_count(a) + bg_stage_param_count(b), TOTAL_PARAMS);

    double *want = malloc(sizeof(double) * TOTAL_PARAMS);
    double *got = malloc(sizeof(double) * TOTAL_PARAMS);
    double want_probs[BATCH * CLASSES], got_probs[BATCH * CLASSES];
    assert_non_null(want);
    assert_non_null(got);

    for (int step = 1; step <= 2; step++) {
        ok(bg_stage_zero_grads(whole));
        ok(bg_stage_zero_grads(a));
        ok(bg_stage_zero_grads(b));
        bg_stage_loss_t whole_loss = {0}, split_loss = {0};
        whole_pass(whole, BATCH, f->images, f->labels, 1.0 / BATCH, &whole_loss);
        two_stage_pass(be, a, b, BATCH, f->images, f->labels, 1.0 / BATCH, &split_loss);

        assert_true(whole_loss.loss_sum > 0);
        assert_close_scalar(split_loss.loss_sum, whole_loss.loss_sum, 1e-12, "loss sum");
        assert_int_equal(split_loss.correct, whole_loss.correct);
        ok(bg_backend_download_doubles(be, want_probs, bg_stage_output(whole), BATCH * CLASSES));
        ok(bg_backend_download_doubles(be, got_probs, bg_stage_output(b), BATCH * CLASSES));
        assert_close(got_probs, want_probs, BATCH * CLASSES, 1e-12, "probabilities");

        int64_t n = download_f64(whole, 1, want, 0, TOTAL_PARAMS);
        int64_t m = download_f64(a, 1, got, 0, TOTAL_PARAMS);
        m += download_f64(b, 1, got, m, TOTAL_PARAMS);
        assert_int_equal(n, TOTAL_PARAMS);
        assert_int_equal(m, TOTAL_PARAMS);
        assert_close(got, want, TOTAL_PARAMS, 1e-12, "gradients");
        /* Every parameter tensor gets a gradient. (Many single values stay 0:
         * ReLU units dead for the whole batch pass nothing back.) */
        static const int64_t tensor_ends[] = {288, 320, 692544, 692672, 693952, TOTAL_PARAMS};
        for (int t = 0, begin = 0; t < 6; begin = (int)tensor_ends[t++]) {
            double largest = 0;
            for (int64_t i = begin; i < tensor_ends[t]; i++)
                if (fabs(want[i]) > largest) largest = fabs(want[i]);
            if (!(largest > 1e-4)) fail_msg("tensor %d: gradient %g", t, largest);
        }

        ok(bg_stage_step(whole));
        ok(bg_stage_step(a));
        ok(bg_stage_step(b));
        assert_int_equal(bg_stage_steps(whole), step);
        assert_int_equal(bg_stage_steps(a), step);
        assert_int_equal(bg_stage_steps(b), step);
        download_f64(whole, 0, want, 0, TOTAL_PARAMS);
        m = download_f64(a, 0, got, 0, TOTAL_PARAMS);
        download_f64(b, 0, got, m, TOTAL_PARAMS);
        assert_close(got, want, TOTAL_PARAMS, 1e-12, "parameters after the step");
    }
    free(want);
    free(got);
    bg_stage_destroy(whole);
    bg_stage_destroy(a);
    bg_stage_destroy(b);
}

/* Split after the flatten (stage b starts with dense) and before it (stage b
 * starts with the flatten, whose output aliases its input). */
static void test_split_equals_whole(void **state) {
    check_split_equals_whole(*state, 4);
    check_split_equals_whole(*state, 3);
}

/* Gradients accumulate: two micro-batches of 8, each scaled by 1/16, give
 * the gradient of one batch of 16; so does the SGD step that follows. Also
 * across the split: stage pairs fed the two micro-batches. */
static void test_microbatches_accumulate(void **state) {
    fixture_t *f = *state;
    bg_backend_t *be = f->f64;
    bg_optimizer_config_t sgd = BG_OPTIMIZER_CONFIG_INIT;
    sgd.kind = BG_OPTIMIZER_SGD;
    sgd.sgd.lr = 0.1;
    sgd.sgd.momentum = 0.9;
    bg_stage_t *one = stage_create(f, be, 0, LAYERS, BATCH, &sgd);
    bg_stage_t *two = stage_create(f, be, 0, LAYERS, BATCH / 2, &sgd);
    bg_stage_t *a = stage_create(f, be, 0, SPLIT, BATCH / 2, &sgd);
    bg_stage_t *b = stage_create(f, be, SPLIT, LAYERS, BATCH / 2, &sgd);
    double *want = malloc(sizeof(double) * TOTAL_PARAMS);
    double *got = malloc(sizeof(double) * TOTAL_PARAMS);
    assert_non_null(want);
    assert_non_null(got);
    const int64_t half = BATCH / 2;

    for (int step = 1; step <= 2; step++) {
        ok(bg_stage_zero_grads(one));
        ok(bg_stage_zero_grads(two));
        ok(bg_stage_zero_grads(a));
        ok(bg_stage_zero_grads(b));
        bg_stage_loss_t whole_loss = {0}, mb_loss[2] = {{0}}, split_loss[2] = {{0}};
        whole_pass(one, BATCH, f->images, f->labels, 1.0 / BATCH, &whole_loss);
        for (int mb = 0; mb < 2; mb++) {
            const float *images = f->images + mb * half * PIXELS;
            const int32_t *labels = f->labels + mb * half;
            whole_pass(two, half, images, labels, 1.0 / BATCH, &mb_loss[mb]);
            two_stage_pass(be, a, b, half, images, labels, 1.0 / BATCH, &split_loss[mb]);
        }
        assert_close_scalar(mb_loss[0].loss_sum + mb_loss[1].loss_sum, whole_loss.loss_sum, 1e-12,
                            "loss sum over micro-batches");
        assert_int_equal(mb_loss[0].correct + mb_loss[1].correct, whole_loss.correct);
        assert_close_scalar(split_loss[0].loss_sum + split_loss[1].loss_sum, whole_loss.loss_sum,
                            1e-12, "loss sum over micro-batches, two stages");

        download_f64(one, 1, want, 0, TOTAL_PARAMS);
        download_f64(two, 1, got, 0, TOTAL_PARAMS);
        assert_close(got, want, TOTAL_PARAMS, 1e-12, "accumulated gradients");
        int64_t m = download_f64(a, 1, got, 0, TOTAL_PARAMS);
        download_f64(b, 1, got, m, TOTAL_PARAMS);
        assert_close(got, want, TOTAL_PARAMS, 1e-12, "accumulated gradients, two stages");

        ok(bg_stage_step(one));
        ok(bg_stage_step(two));
        ok(bg_stage_step(a));
        ok(bg_stage_step(b));
        download_f64(one, 0, want, 0, TOTAL_PARAMS);
        download_f64(two, 0, got, 0, TOTAL_PARAMS);
        assert_close(got, want, TOTAL_PARAMS, 1e-12, "parameters after the step");
        m = download_f64(a, 0, got, 0, TOTAL_PARAMS);
        download_f64(b, 0, got, m, TOTAL_PARAMS);
        assert_close(got, want, TOTAL_PARAMS, 1e-12, "parameters after the step, two stages");
    }

    /* Without zero_grads the gradients keep adding up: a second backward of
     * the same batch doubles them. */
    ok(bg_stage_zero_grads(one));
    whole_pass(one, BATCH, f->images, f->labels, 1.0 / BATCH, NULL);
    download_f64(one, 1, want, 0, TOTAL_PARAMS);
    whole_pass(one, BATCH, f->images, f->labels, 1.0 / BATCH, NULL);
    download_f64(one, 1, got, 0, TOTAL_PARAMS);
    for (int64_t i = 0; i < TOTAL_PARAMS; i++) want[i] *= 2;
    assert_close(got, want, TOTAL_PARAMS, 1e-12, "gradients of two backward passes");

    free(want);
    free(got);
    bg_stage_destroy(one);
    bg_stage_destroy(two);
    bg_stage_destroy(a);
    bg_stage_destroy(b);
}

/* The same float32 check, with float32's tolerance. */
static void test_microbatches_f32(void **state) {
    fixture_t *f = *state;
    bg_stage_t *one = stage_create(f, f->f32, 0, LAYERS, BATCH, NULL);
    bg_stage_t *two = stage_create(f, f->f32, 0, LAYERS, 4, NULL);
    float *want = malloc(sizeof(float) * TOTAL_PARAMS);
    float *got = malloc(sizeof(float) * TOTAL_PARAMS);
    double *want_d = malloc(sizeof(double) * TOTAL_PARAMS);
    double *got_d = malloc(sizeof(double) * TOTAL_PARAMS);
    assert_non_null(want);
    assert_non_null(got);
    assert_non_null(want_d);
    assert_non_null(got_d);
    ok(bg_stage_zero_grads(one));
    ok(bg_stage_zero_grads(two));
    whole_pass(one, BATCH, f->images, f->labels, 1.0 / BATCH, NULL);
    for (int mb = 0; mb < BATCH / 4; mb++)
        whole_pass(two, 4, f->images + mb * 4 * PIXELS, f->labels + mb * 4, 1.0 / BATCH, NULL);
    ok(bg_stage_download_grads(one, want));
    ok(bg_stage_download_grads(two, got));
    for (int64_t i = 0; i < TOTAL_PARAMS; i++) {
        want_d[i] = want[i];
        got_d[i] = got[i];
    }
    assert_close(got_d, want_d, TOTAL_PARAMS, 1e-5, "float32 accumulated gradients");
    free(want);
    free(got);
    free(want_d);
    free(got_d);
    bg_stage_destroy(one);
    bg_stage_destroy(two);
}

/* A layer's initial parameters depend on the seed and its index, not on
 * the stage it lands in: every split's stages together hold exactly the
 * whole model's parameters. */
static void test_init_independent_of_split(void **state) {
    fixture_t *f = *state;
    bg_stage_t *whole = stage_create(f, f->f32, 0, LAYERS, 2, NULL);
    assert_int_equal(bg_stage_param_count(whole), TOTAL_PARAMS);
    float *want = malloc(sizeof(float) * TOTAL_PARAMS);
    float *got = malloc(sizeof(float) * TOTAL_PARAMS);
    assert_non_null(want);
    assert_non_null(got);
    ok(bg_stage_download_params(whole, want));
    /* PyTorch's default init: |w| <= 1/sqrt(fan_in), not all equal. */
    for (int64_t i = 0; i < 320; i++) assert_true(fabsf(want[i]) <= 1.0f / 3.0f);
    assert_true(want[0] != want[1]);

    for (int split = 1; split < LAYERS; split++) {
        bg_stage_t *a = stage_create(f, f->f32, 0, split, 2, NULL);
        bg_stage_t *b = stage_create(f, f->f32, split, LAYERS, 2, NULL);
        int64_t na = bg_stage_param_count(a);
        assert_int_equal(na + bg_stage_param_count(b), TOTAL_PARAMS);
        memset(got, 0, sizeof(float) * TOTAL_PARAMS);
        ok(bg_stage_download_params(a, got));
        ok(bg_stage_download_params(b, got + na));
        if (memcmp(got, want, sizeof(float) * TOTAL_PARAMS) != 0)
            fail_msg("split at layer %d: parameters differ from the whole model's", split);
        bg_stage_destroy(a);
        bg_stage_destroy(b);
    }

    /* Three stages, and the F64 backend: the same values. */
    bg_stage_t *parts[3] = {
        stage_create(f, f->f64, 0, 1, 2, NULL),
        stage_create(f, f->f64, 1, 5, 2, NULL),
        stage_create(f, f->f64, 5, LAYERS, 2, NULL),
    };
    int64_t at = 0;
    for (int i = 0; i < 3; i++) {
        ok(bg_stage_download_params(parts[i], got + at));
        at += bg_stage_param_count(parts[i]);
        bg_stage_destroy(parts[i]);
    }
    assert_int_equal(at, TOTAL_PARAMS);
    assert_memory_equal(got, want, sizeof(float) * TOTAL_PARAMS);

    /* Another seed, other values. */
    bg_stage_config_t cfg = stage_config(f, f->f32, 0, LAYERS, 1);
    cfg.seed = 43;
    bg_stage_t *other = NULL;
    ok(bg_stage_create(&cfg, &other));
    ok(bg_stage_download_params(other, got));
    assert_true(memcmp(got, want, sizeof(float) * 320) != 0);

    /* upload_params round-trips. */
    ok(bg_stage_upload_params(other, want));
    ok(bg_stage_download_params(other, got));
    assert_memory_equal(got, want, sizeof(float) * TOTAL_PARAMS);
    bg_stage_destroy(other);

    free(want);
    free(got);
    bg_stage_destroy(whole);
}

static void test_memory(void **state) {
    fixture_t *f = *state;
    bg_optimizer_config_t plain_sgd = BG_OPTIMIZER_CONFIG_INIT;
    plain_sgd.kind = BG_OPTIMIZER_SGD;

    bg_stage_t *whole = stage_create(f, f->f32, 0, LAYERS, BATCH, NULL); /* Adam */
    bg_stage_memory_t m = bg_stage_memory(whole);
    assert_int_equal(m.params, (size_t)TOTAL_PARAMS * 4);
    assert_int_equal(m.grads, (size_t)TOTAL_PARAMS * 4);
    assert_int_equal(m.optimizer, (size_t)TOTAL_PARAMS * 4 * 2); /* m and v */
    /* One slot's stash: the input, the labels, and every layer's output but
     * the flatten's (it aliases its input) and the relus' after conv2d and
     * dense (they run in place), for max_batch samples. */
    size_t slot = (size_t)BATCH * PIXELS * 4 + (size_t)BATCH * 4;
    for (int i = 0; i < LAYERS; i++)
        if (f->spec->layers[i].kind != BG_LAYER_FLATTEN && f->spec->layers[i].kind != BG_LAYER_RELU)
            slot += (size_t)BATCH * (size_t)f->spec->layers[i].activation_bytes;
    assert_true(bg_layer_runs_in_place(f->spec, 1));  /* relu after conv2d */
    assert_false(bg_layer_runs_in_place(f->spec, 2)); /* maxpool */
    assert_int_equal(m.stash_slot, slot);
    assert_int_equal(m.stash, slot); /* one slot by default */
    assert_int_equal(m.in_flight, 0);
    assert_int_equal(m.stash_current, 0);
    bg_stage_destroy(whole);

    /* Twice the batch, twice the stash; same parameters. */
    bg_stage_t *bigger = stage_create(f, f->f32, 0, LAYERS, 2 * BATCH, NULL);
    bg_stage_memory_t m2 = bg_stage_memory(bigger);
    assert_int_equal(m2.params, m.params);
    assert_int_equal(m2.stash_slot, 2 * slot);
    bg_stage_destroy(bigger);

    /* SGD without momentum keeps no state. */
    bg_stage_t *a = stage_create(f, f->f32, 0, SPLIT, BATCH, &plain_sgd);
    bg_stage_t *b = stage_create(f, f->f32, SPLIT, LAYERS, BATCH, &plain_sgd);
    bg_stage_memory_t ma = bg_stage_memory(a), mb = bg_stage_memory(b);
    assert_int_equal(ma.params, (size_t)320 * 4);
    assert_int_equal(ma.params + mb.params, (size_t)TOTAL_PARAMS * 4);
    assert_int_equal(ma.optimizer, 0);
    assert_int_equal(mb.optimizer, 0);
    bg_stage_destroy(a);
    bg_stage_destroy(b);

    /* F64 holds 8 bytes per value. */
    bg_stage_t *wide = stage_create(f, f->f64, 0, LAYERS, BATCH, &plain_sgd);
    assert_int_equal(bg_stage_memory(wide).params, (size_t)TOTAL_PARAMS * 8);
    bg_stage_destroy(wide);
}

/* An evaluation's stage: the same forward as a training stage's from the
 * same seed, in a fraction of the memory, and a refusal of everything
 * about gradients. */
static void test_forward_only(void **state) {
    fixture_t *f = *state;
    bg_stage_t *trains = stage_create(f, f->f32, 0, LAYERS, BATCH, NULL); /* Adam */
    bg_stage_config_t cfg = stage_config(f, f->f32, 0, LAYERS, BATCH);
    cfg.forward_only = 1;
    cfg.split_backward = 1; /* ignored, as recompute would be */
    bg_stage_t *evaluates = NULL;
    ok(bg_stage_create(&cfg, &evaluates));
    bg_stage_loss_t want, got;
    for (int k = 0; k < 2; k++) {
        bg_stage_t *s = k ? evaluates : trains;
        ok(bg_stage_load_batch(s, BATCH, f->images, f->labels));
        ok(bg_stage_forward_slot(s, 0, BATCH, 0, k ? &got : &want));
    }
    assert_true(got.loss_sum == want.loss_sum);
    assert_int_equal(got.correct, want.correct);
    /* The CPU backend's device memory is host memory. */
    assert_memory_equal(bg_stage_output(evaluates), bg_stage_output(trains),
                        sizeof(float) * BATCH * CLASSES);

    const bg_stage_memory_t mt = bg_stage_memory(trains), me = bg_stage_memory(evaluates);
    assert_int_equal(me.params, (size_t)TOTAL_PARAMS * 4);
    assert_int_equal(me.grads, 0);
    assert_int_equal(me.optimizer, 0);
    assert_int_equal(me.buffers, 0);
    assert_int_equal(me.stash_slot, mt.stash_slot); /* no saved dy for W */
    assert_int_equal(me.workspace, mt.workspace);
    assert_int_equal(me.peak_in_flight, 1); /* the forward's activations */
    assert_true(me.arena < mt.arena / 3);
    assert_int_equal(bg_stage_optimizer_states(evaluates), 0);
    assert_null(bg_stage_output_grad(evaluates));

    const bg_status_t refused[] = {
        bg_stage_forward(evaluates, BATCH, NULL), /* keeps its micro-batch for a backward */
        bg_stage_backward_slot(evaluates, 0, BATCH, 1.0 / BATCH),
        bg_stage_weights_slot(evaluates, 0, BATCH),
        bg_stage_zero_grads(evaluates),
        bg_stage_scale_grads(evaluates, 0.5),
        bg_stage_step(evaluates),
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_equal(refused[i], BG_ERR_INVALID);
    }
    assert_non_null(strstr(bg_error_message(), "layers 0..7 on cpu:0 runs forwards only"));
    assert_non_null(strstr(bg_error_message(), "no optimizer step"));
    assert_int_equal(bg_stage_steps(evaluates), 0);

    /* A stage after the first: no input gradient either. */
    cfg = stage_config(f, f->f32, SPLIT, LAYERS, BATCH);
    cfg.forward_only = 1;
    bg_stage_t *second = NULL;
    ok(bg_stage_create(&cfg, &second));
    assert_null(bg_stage_input_grad(second));
    assert_int_equal(bg_stage_memory(second).buffers, 0);
    bg_stage_destroy(second);
    bg_stage_destroy(evaluates);
    bg_stage_destroy(trains);
}

static void expect_create_error(const fixture_t *f, int first, int last, int64_t max_batch,
                                const char *needle) {
    bg_stage_config_t cfg = stage_config(f, f->f32, first, last, max_batch);
    bg_stage_t *sentinel = (bg_stage_t *)&cfg, *out = sentinel;
    bg_status_t st = bg_stage_create(&cfg, &out);
    if (st != BG_ERR_INVALID)
        fail_msg("layers [%d, %d) max_batch %lld: status %s, expected invalid", first, last,
                 (long long)max_batch, bg_status_name(st));
    assert_ptr_equal(out, sentinel); /* untouched on failure */
    if (strstr(bg_error_message(), needle) == NULL)
        fail_msg("message does not contain '%s': %s", needle, bg_error_message());
}

static bg_status_t refuse_workspace(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                    size_t *bytes) {
    (void)be;
    *bytes = 12345;
    return bg_error_set(BG_ERR_BACKEND, "no algorithm for a %lldx%lld convolution", (long long)g->h,
                        (long long)g->w);
}

/* A backend that cannot size a convolution's workspace (cuDNN refusing the
 * geometry) fails the stage's creation, naming the stage: a stage with no
 * workspace would fail only at its first step. */
static void test_workspace_sizing_error(void **state) {
    fixture_t *f = *state;
    bg_backend_ops_t ops = *f->f32->ops;
    const bg_backend_ops_t *saved = f->f32->ops;
    ops.conv2d_workspace_bytes = refuse_workspace;
    f->f32->ops = &ops;
    bg_stage_config_t cfg = stage_config(f, f->f32, 0, SPLIT, 4);
    bg_stage_t *out = NULL;
    const bg_status_t st = bg_stage_create(&cfg, &out);
    f->f32->ops = saved;
    assert_int_equal(st, BG_ERR_BACKEND);
    assert_null(out);
    assert_string_equal(bg_error_message(),
                        "stage for layers 0..3 on cpu:0: no algorithm for a 28x28 convolution");
    /* Without a convolution nothing asks. */
    ops.conv2d_workspace_bytes = refuse_workspace;
    f->f32->ops = &ops;
    cfg.first_layer = SPLIT;
    cfg.last_layer = LAYERS;
    const bg_status_t dense = bg_stage_create(&cfg, &out);
    f->f32->ops = saved;
    assert_int_equal(dense, BG_OK);
    bg_stage_destroy(out);
}

static void test_errors(void **state) {
    fixture_t *f = *state;
    expect_create_error(f, 0, 0, 4, "stage: layer range [0, 0) is not within 0..8");
    expect_create_error(f, 4, 4, 4, "stage: layer range [4, 4) is not within 0..8");
    expect_create_error(f, 5, 3, 4, "stage: layer range [5, 3) is not within 0..8");
    expect_create_error(f, -1, 3, 4, "stage: layer range [-1, 3) is not within 0..8");
    expect_create_error(f, 0, LAYERS + 1, 4, "stage: layer range [0, 9) is not within 0..8");
    expect_create_error(f, 0, LAYERS, 0, "stage: batch size must be >= 1, got 0");
    expect_create_error(f, 0, LAYERS, -3, "stage: batch size must be >= 1, got -3");

    bg_stage_config_t cfg = BG_STAGE_CONFIG_INIT;
    cfg.backend = f->f32;
    cfg.last_layer = LAYERS;
    bg_stage_t *out = NULL;
    assert_int_equal(bg_stage_create(&cfg, &out), BG_ERR_INVALID); /* no spec */
    assert_non_null(strstr(bg_error_message(), "stage: no model spec or backend given"));
    cfg.spec = f->spec;
    cfg.backend = NULL;
    bg_error_clear();
    assert_int_equal(bg_stage_create(&cfg, &out), BG_ERR_INVALID); /* no backend */
    assert_non_null(strstr(bg_error_message(), "stage: no model spec or backend given"));
    cfg.backend = f->f32;
    const int bad_slots[] = {0, 65537};
    for (int i = 0; i < 2; i++) {
        cfg.stash_slots = bad_slots[i];
        char want[64];
        snprintf(want, sizeof want, "stage: stash slots must be 1..65536, got %d", bad_slots[i]);
        assert_int_equal(bg_stage_create(&cfg, &out), BG_ERR_INVALID);
        if (strstr(bg_error_message(), want) == NULL)
            fail_msg("message does not contain '%s': %s", want, bg_error_message());
    }
    assert_null(out);

    bg_stage_destroy(NULL);

    bg_stage_t *s = stage_create(f, f->f32, 0, LAYERS, 4, NULL);
    assert_int_equal(bg_stage_forward(s, 5, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "stage: batch of 5 samples, room for 1..4"));
    assert_int_equal(bg_stage_forward(s, 0, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "stage: batch of 0 samples, room for 1..4"));
    assert_int_equal(bg_stage_forward(s, -1, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "stage: batch of -1 samples, room for 1..4"));
    assert_int_equal(bg_stage_load_batch(s, 5, f->images, f->labels), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "stage: batch of 5 samples, room for 1..4"));
    assert_int_equal(bg_stage_load_batch(s, 0, f->images, f->labels), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "stage: batch of 0 samples, room for 1..4"));

    /* A label outside [0, classes) is refused by the loss, naming the layer,
     * the label and its sample. */
    int32_t bad_labels[4] = {0, 1, CLASSES, 2};
    ok(bg_stage_load_batch(s, 4, f->images, bad_labels));
    assert_int_equal(bg_stage_forward(s, 4, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "forward of layer 7 (softmax_cross_entropy): "));
    assert_non_null(strstr(bg_error_message(), "label 10 of sample 2 is outside 0..9"));

    /* The stage still works after the errors. */
    bg_stage_loss_t loss = {0};
    ok(bg_stage_load_batch(s, 4, f->images, f->labels));
    ok(bg_stage_forward(s, 4, &loss));
    assert_true(loss.loss_sum > 0 && isfinite(loss.loss_sum));
    /* Backward must follow a forward of the same n. */
    assert_int_equal(bg_stage_backward(s, 3, 0.25), BG_ERR_INTERNAL);
    assert_non_null(
        strstr(bg_error_message(), "stage: backward of 3 samples in slot 0 without its forward"));
    ok(bg_stage_backward(s, 4, 0.25));
    bg_stage_destroy(s);
}

/* A conv2d does the relu after it in its forward, and a max-pool over a
 * relu both backwards, in one op each where the backend has them
 * (conv2d_relu_forward, maxpool_relu_backward); without them the stage
 * runs the layers one by one. The loss and gradients agree to the bit, for
 * the whole model and for a stage that starts with the relu (its input
 * gradient, handed to the stage before). */
static void test_fused_relus(void **state) {
    fixture_t *f = *state;
    bg_backend_t *be = f->f64;
    const bg_backend_ops_t *fused = be->ops;
    bg_backend_ops_t plain = *fused;
    plain.maxpool_relu_backward = NULL;
    plain.conv2d_relu_forward = NULL;
    const int64_t in1 = BATCH * bg_shape_numel(f->spec->layers[1].in);
    float *input = malloc(sizeof(float) * (size_t)in1); /* conv outputs: either sign */
    assert_non_null(input);
    for (int64_t i = 0; i < in1; i++) input[i] = (float)((i * 37) % 11 - 5) / 4;
    double *grads[2], *input_grad[2];
    bg_stage_loss_t loss[2];
    for (int run = 0; run < 2; run++) {
        be->ops = run ? &plain : fused;
        bg_stage_t *whole = stage_create(f, be, 0, LAYERS, BATCH, NULL);
        whole_pass(whole, BATCH, f->images, f->labels, 1.0 / BATCH, &loss[run]);
        grads[run] = malloc(sizeof(double) * TOTAL_PARAMS);
        assert_non_null(grads[run]);
        assert_int_equal(download_f64(whole, 1, grads[run], 0, TOTAL_PARAMS), TOTAL_PARAMS);
        bg_stage_destroy(whole);
        bg_stage_t *tail = stage_create(f, be, 1, LAYERS, BATCH, NULL);
        whole_pass(tail, BATCH, input, f->labels, 1.0 / BATCH, NULL);
        input_grad[run] = malloc(sizeof(double) * (size_t)in1);
        assert_non_null(input_grad[run]);
        /* The CPU backend's memory is the host's. */
        memcpy(input_grad[run], bg_stage_input_grad(tail), sizeof(double) * (size_t)in1);
        bg_stage_destroy(tail);
    }
    be->ops = fused;
    assert_memory_equal(&loss[0].loss_sum, &loss[1].loss_sum, sizeof loss[0].loss_sum);
    assert_int_equal(loss[0].correct, loss[1].correct);
    assert_memory_equal(grads[0], grads[1], sizeof(double) * TOTAL_PARAMS);
    assert_memory_equal(input_grad[0], input_grad[1], sizeof(double) * (size_t)in1);
    int zeros = 0, others = 0;
    for (int64_t i = 0; i < in1; i++) {
        zeros += input_grad[0][i] == 0 && input[i] <= 0;
        others += input_grad[0][i] != 0;
    }
    assert_true(zeros > 0 && others > 0);
    for (int run = 0; run < 2; run++) {
        free(grads[run]);
        free(input_grad[run]);
    }
    free(input);
}

/* Layer times: while set, each layer's work lands in its own entries (dW,
 * the update, the zeroing after it and the check of the gradients only for
 * layers with weights; flatten does nothing, layer 0 computes no dX, a
 * relu after a conv2d has its forward done by the conv2d's, one before a
 * max-pool its dX by the pool's); unset, nothing is added. Timed, the check
 * and the zeroing go tensor by tensor and still do their work: a NaN in a
 * gradient is marked, and every gradient is zero after. */
static void test_layer_times(void **state) {
    fixture_t *f = *state;
    bg_stage_t *stage = stage_create(f, f->f32, 0, LAYERS, BATCH, NULL);
    double forward[LAYERS] = {0}, dx[LAYERS] = {0}, dw[LAYERS] = {0}, update[LAYERS] = {0},
           check[LAYERS] = {0};
    bg_stage_layer_times_t times = {forward, dx, dw, update, check};
    bg_stage_set_layer_times(stage, &times);
    ok(bg_stage_load_batch(stage, BATCH, f->images, f->labels));
    ok(bg_stage_forward(stage, BATCH, NULL));
    ok(bg_stage_backward(stage, BATCH, 1.0 / BATCH));
    ok(bg_stage_mark_nonfinite_grads(stage, 5));
    int tag = 0;
    ok(f->f32->ops->take_nonfinite(f->f32, &tag));
    assert_int_equal(tag, -1);
    ok(bg_stage_step(stage));
    double stepped[LAYERS];
    memcpy(stepped, update, sizeof stepped);
    /* A NaN in the last layer's bias gradient: the timed check marks it. */
    const int64_t total = bg_stage_param_count(stage);
    float *grads = malloc(sizeof(float) * (size_t)total);
    assert_non_null(grads);
    ok(bg_stage_download_grads(stage, grads));
    assert_true(grads[total - 1] != 0);
    bg_backend_t *be = f->f32;
    ((float *)stage->grad_block)[stage->block_elems - 1] = NAN; /* host memory: a CPU device */
    ok(bg_stage_mark_nonfinite_grads(stage, 5));
    ok(be->ops->take_nonfinite(be, &tag));
    assert_int_equal(tag, 5);
    ok(bg_stage_zero_grads(stage));
    ok(bg_stage_download_grads(stage, grads));
    for (int64_t i = 0; i < total; i++) assert_true(grads[i] == 0.0f);
    free(grads);
    for (int i = 0; i < LAYERS; i++) {
        const bg_layer_kind_t kind = f->spec->layers[i].kind;
        const int weighted = kind == BG_LAYER_CONV2D || kind == BG_LAYER_DENSE;
        if (kind == BG_LAYER_FLATTEN) {
            assert_true(forward[i] == 0 && dx[i] == 0);
        } else {
            const int convolved =
                kind == BG_LAYER_RELU && f->spec->layers[i - 1].kind == BG_LAYER_CONV2D;
            assert_true(convolved ? forward[i] == 0 : forward[i] > 0);
            const int pooled = kind == BG_LAYER_RELU && i + 1 < LAYERS &&
                               f->spec->layers[i + 1].kind == BG_LAYER_MAXPOOL;
            assert_true(i == 0 || pooled ? dx[i] == 0 : dx[i] > 0);
        }
        assert_true(weighted ? dw[i] > 0 && update[i] > 0 : dw[i] == 0 && update[i] == 0);
        assert_true(weighted ? check[i] > 0 : check[i] == 0);
        assert_true(weighted ? update[i] > stepped[i] : update[i] == 0); /* and the zeroing */
    }
    const double conv = forward[0];
    bg_stage_set_layer_times(stage, NULL);
    ok(bg_stage_forward(stage, BATCH, NULL));
    assert_true(forward[0] == conv);
    bg_stage_destroy(stage);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_equals_whole),
        cmocka_unit_test(test_microbatches_accumulate),
        cmocka_unit_test(test_microbatches_f32),
        cmocka_unit_test(test_init_independent_of_split),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_forward_only),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_workspace_sizing_error),
        cmocka_unit_test(test_layer_times),
        cmocka_unit_test(test_fused_relus),
    };
    return cmocka_run_group_tests_name("stage", tests, setup, teardown);
}
