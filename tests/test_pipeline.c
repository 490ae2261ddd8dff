/* The executor: K stages x M micro-batches x every schedule, with and without
 * recomputation, against one device and one micro-batch. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataset.h"
#include "layer.h"
#include "channel.h"
#include "pipeline.h"
#include "pipeline_impl.h" /* the polls a pipeline chose */
#include "report.h"
#include "monotonic.h"
#include "support/models.h"

/* 8 layers: conv, relu, maxpool, flatten, dense, relu, dense, loss. */
static const char small_cnn[] = "input channels=1 height=10 width=10\n"
                                "conv2d filters=4 kernel=3 activation=relu\n"
                                "maxpool size=2\n"
                                "flatten\n"
                                "dense units=16 activation=relu\n"
                                "dense units=5\n"
                                "softmax_cross_entropy\n";

enum { BATCH = 16, STEPS = 3 };

typedef struct fixture {
    bg_model_spec_t *spec;
    bg_dataset_t *data; /* STEPS batches */
    float *images;      /* its images as floats */
    float *want_f32, *want_f64;
    double want_loss;
} fixture_t;

typedef struct run_config {
    bg_schedule_kind_t schedule;
    int devices, chunks, microbatches, recompute;
    bg_dtype_t dtype;
} run_config_t;

/* The pipelines' cfg.poll_s: < 0 chooses (CPU devices never poll). */
static double poll_s = -1;
/* expect_create_error's cfg.stall_timeout_s. */
static double stall_timeout_s = 300;

static bg_optimizer_config_t optimizer(void) {
    bg_optimizer_config_t o = BG_OPTIMIZER_CONFIG_INIT; /* Adam */
    o.adam.lr = 0.01;
    return o;
}

/* Trains STEPS steps on stages cut at `split` (NULL: balanced); returns the
 * parameters (caller frees) and loss sum. */
static float *train_split(const fixture_t *f, const run_config_t *rc, const int *split,
                          double *loss_sum) {
    bg_device_list_t devices;
    char spec[32];
    snprintf(spec, sizeof spec, "cpu:%d", rc->devices);
    assert_int_equal(bg_device_list_parse(spec, 2, &devices), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.devices = &devices;
    cfg.schedule = rc->schedule;
    cfg.chunks = rc->chunks;
    cfg.microbatches = rc->microbatches;
    cfg.batch = BATCH;
    cfg.recompute = rc->recompute;
    cfg.seed = 5;
    cfg.optimizer = optimizer();
    cfg.dtype = rc->dtype;
    cfg.split = split;
    cfg.poll_s = poll_s;
    bg_pipeline_t *p = NULL;
    bg_status_t st = bg_pipeline_create(&cfg, &p);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    double total = 0;
    for (int k = 0; k < STEPS; k++) {
        bg_pipeline_result_t r;
        const int64_t numel = bg_shape_numel(f->spec->input);
        st = bg_pipeline_train_step(p, f->images + k * BATCH * numel, f->data->labels + k * BATCH,
                                    BATCH, &r);
        if (st != BG_OK) fail_msg("%s", bg_error_message());
        total += r.loss_sum;
    }
    float *params = malloc(sizeof(float) * (size_t)f->spec->total_params);
    assert_int_equal(bg_pipeline_download_params(p, params), BG_OK);
    bg_pipeline_destroy(p);
    *loss_sum = total;
    return params;
}

static float *train(const fixture_t *f, const run_config_t *rc, double *loss_sum) {
    return train_split(f, rc, NULL, loss_sum);
}

/* The fixture of a model: its spec, STEPS batches of data, and one device's
 * weights after STEPS steps at M = 1 in float and double. */
static fixture_t *fixture_create(const char *name, const char *text) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(bg_model_spec_parse(name, text, strlen(text), &f->spec), BG_OK);
    assert_int_equal(bg_dataset_synthetic(f->spec->input, 5, STEPS * BATCH, 9, 0, &f->data), BG_OK);
    f->images = bg_dataset_all_images(f->data);
    assert_non_null(f->images);
    run_config_t one = {BG_SCHEDULE_GPIPE, 1, 1, 1, 0, BG_F32};
    double loss64;
    f->want_f32 = train(f, &one, &f->want_loss);
    one.dtype = BG_F64;
    f->want_f64 = train(f, &one, &loss64);
    return f;
}

static void fixture_destroy(fixture_t *f) {
    free(f->want_f32);
    free(f->want_f64);
    bg_dataset_destroy(f->data);
    free(f->images);
    bg_model_spec_destroy(f->spec);
    free(f);
}

static int setup(void **state) {
    *state = fixture_create("small", small_cnn);
    return 0;
}

static int teardown(void **state) {
    fixture_destroy(*state);
    return 0;
}

/* Largest difference relative to the largest parameter. */
static double relative_error(const float *a, const float *b, int64_t n) {
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > diff) diff = fabs((double)a[i] - b[i]);
        if (fabs((double)b[i]) > scale) scale = fabs((double)b[i]);
    }
    return diff / scale;
}

static int allowed(const run_config_t *rc) {
    if (rc->schedule == BG_SCHEDULE_INTERLEAVED) return rc->microbatches % rc->devices == 0;
    return rc->chunks == 1;
}

/* Every schedule, K in 1..4, M in {1,2,4,8}, with and without recompute
 * (interleaved with V=2, as the CLI asks), equals one device with one
 * micro-batch after STEPS Adam steps. */
static void test_equivalence(void **state) {
    fixture_t *f = *state;
    static const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_GPIPE, BG_SCHEDULE_1F1B,
                                               BG_SCHEDULE_INTERLEAVED, BG_SCHEDULE_ZB_H1};
    static const int ms[] = {1, 2, 4, 8};
    int runs = 0;
    double worst = 0;
    for (int k = 0; k < 4; k++) {
        for (int devices = 1; devices <= 4; devices++) {
            for (int m = 0; m < 4; m++) {
                for (int recompute = 0; recompute <= 1; recompute++) {
                    run_config_t rc = {kinds[k], devices, 1, ms[m], recompute, BG_F32};
                    if (kinds[k] == BG_SCHEDULE_INTERLEAVED) rc.chunks = 2;
                    if (!allowed(&rc)) continue;
                    double loss;
                    float *got = train(f, &rc, &loss);
                    double err = relative_error(got, f->want_f32, f->spec->total_params);
                    if (err > worst) worst = err;
                    if (!(err <= 1e-5))
                        fail_msg("%s K=%d V=%d M=%d recompute=%d: relative error %g",
                                 bg_schedule_kind_name(rc.schedule), devices, rc.chunks, ms[m],
                                 recompute, err);
                    if (!(fabs(loss - f->want_loss) <= 1e-5 * fabs(f->want_loss)))
                        fail_msg("loss %.9g vs %.9g", loss, f->want_loss);
                    free(got);
                    runs++;
                }
            }
        }
    }
    print_message("%d configurations, worst relative error %.3g\n", runs, worst);
    /* gpipe, 1f1b and zb-h1 run every K (4), M (4) and recompute (2): 3 * 32
     * = 96. Interleaved needs M divisible by K: M = 1, 2, 4, 8 at K = 1,
     * 2, 4, 8 at K = 2, none at K = 3, 4, 8 at K = 4; 9 * 2 = 18. */
    assert_int_equal(runs, 96 + 18);
}

/* In double precision the pipeline matches one device to rounding. */
static void test_equivalence_f64(void **state) {
    fixture_t *f = *state;
    static const run_config_t cases[] = {
        {BG_SCHEDULE_1F1B, 4, 1, 8, 0, BG_F64},
        {BG_SCHEDULE_ZB_H1, 3, 1, 4, 1, BG_F64},
        {BG_SCHEDULE_INTERLEAVED, 2, 2, 4, 0, BG_F64},
        {BG_SCHEDULE_GPIPE, 2, 1, 2, 1, BG_F64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double loss;
        float *got = train(f, &cases[i], &loss);
        double err = relative_error(got, f->want_f64, f->spec->total_params);
        if (!(err <= 1e-6)) fail_msg("case %zu: relative error %g", i, err);
        free(got);
    }
}

/* At the same micro-batch count M, every schedule on K devices sums each
 * gradient in the order one device does, so weights and losses after STEPS
 * Adam steps are one device's bit for bit (README, docs/pipelines.md):
 * every schedule, K = 2 to 4 (interleaved where K divides M, with V = 2),
 * with and without recompute, at M = 4. */
static void test_same_m_bit_identical(void **state) {
    fixture_t *f = *state;
    static const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_GPIPE, BG_SCHEDULE_1F1B,
                                               BG_SCHEDULE_INTERLEAVED, BG_SCHEDULE_ZB_H1};
    const size_t bytes = sizeof(float) * (size_t)f->spec->total_params;
    const run_config_t one = {BG_SCHEDULE_GPIPE, 1, 1, 4, 0, BG_F32};
    double want_loss;
    float *want = train(f, &one, &want_loss);
    /* One device at M=4 sums in another order than at M=1: the check below
     * would pass vacuously if M were ignored. */
    assert_true(memcmp(want, f->want_f32, bytes) != 0);
    int runs = 0;
    for (int k = 0; k < 4; k++) {
        for (int devices = 2; devices <= 4; devices++) {
            for (int recompute = 0; recompute <= 1; recompute++) {
                run_config_t rc = {kinds[k], devices, 1, 4, recompute, BG_F32};
                if (kinds[k] == BG_SCHEDULE_INTERLEAVED) rc.chunks = 2;
                if (!allowed(&rc)) continue;
                double loss;
                float *got = train(f, &rc, &loss);
                if (memcmp(got, want, bytes) != 0 || loss != want_loss)
                    fail_msg("%s K=%d V=%d M=4 recompute=%d: not one device's bits (relative "
                             "error %g, loss %.9g vs %.9g)",
                             bg_schedule_kind_name(rc.schedule), devices, rc.chunks, recompute,
                             relative_error(got, want, f->spec->total_params), loss, want_loss);
                free(got);
                runs++;
            }
        }
    }
    /* gpipe, 1f1b, zb-h1 at K = 2, 3, 4 (18); interleaved at K = 2, 4 (4). */
    assert_int_equal(runs, 22);
    free(want);
}

/* Waits that poll before they sleep, as on GPUs (the channels', the device
 * threads' for their next job, the caller's for the job's end), give the
 * same bits as waits that sleep at once, under every schedule at K = 2 and
 * 4 (run under ThreadSanitizer too: tsan build). */
static void test_polling_waits(void **state) {
    fixture_t *f = *state;
    const size_t bytes = sizeof(float) * (size_t)f->spec->total_params;
    /* What each wait polls: as asked; on CPU devices, by default, never. */
    static const double asked[] = {20e-6, 0, -1}, chosen[] = {20e-6, 0, 0};
    for (int i = 0; i < 3; i++) {
        bg_device_list_t devices;
        assert_int_equal(bg_device_list_parse("cpu:2", 2, &devices), BG_OK);
        bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
        cfg.spec = f->spec;
        cfg.devices = &devices;
        cfg.batch = BATCH;
        cfg.poll_s = asked[i];
        bg_pipeline_t *p = NULL;
        assert_int_equal(bg_pipeline_create(&cfg, &p), BG_OK);
        assert_true(p->poll_s == chosen[i] && p->done_poll_s == chosen[i]);
        bg_pipeline_destroy(p);
    }
    static const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_GPIPE, BG_SCHEDULE_1F1B,
                                               BG_SCHEDULE_INTERLEAVED, BG_SCHEDULE_ZB_H1};
    for (int k = 0; k < 4; k++) {
        for (int devices = 2; devices <= 4; devices += 2) {
            run_config_t rc = {kinds[k], devices, 1, 4, 0, BG_F32};
            if (kinds[k] == BG_SCHEDULE_INTERLEAVED) rc.chunks = 2;
            double want_loss, loss;
            poll_s = 0;
            float *want = train(f, &rc, &want_loss);
            /* Long enough for polls to see the change they wait for, not
             * only to time out, between CPU ops of milliseconds. */
            poll_s = 5e-3;
            float *got = train(f, &rc, &loss);
            poll_s = -1;
            if (memcmp(got, want, bytes) != 0 || loss != want_loss)
                fail_msg("%s K=%d: polling waits changed the bits (relative error %g)",
                         bg_schedule_kind_name(rc.schedule), devices,
                         relative_error(got, want, f->spec->total_params));
            free(want);
            free(got);
        }
    }
}

/* Every cut of f's model into two stages (outside its residual blocks)
 * gives one device's bits at M = 4 under 1F1B and zb-h1, with and without
 * recompute; and three stages at M = 8 in double match one device at
 * M = 1. Returns one device's weights at M = 4 (the caller frees them). */
static float *expect_every_cut_alike(const fixture_t *f) {
    const size_t bytes = sizeof(float) * (size_t)f->spec->total_params;
    const run_config_t one = {BG_SCHEDULE_GPIPE, 1, 1, 4, 0, BG_F32};
    double want_loss;
    float *want = train(f, &one, &want_loss);
    static const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_1F1B, BG_SCHEDULE_ZB_H1};
    int runs = 0, cuts = 0;
    for (int split = 1; split < f->spec->num_layers; split++) {
        if (bg_model_spec_block_cut(f->spec, split) >= 0) continue;
        cuts++;
        for (int k = 0; k < 2; k++) {
            for (int recompute = 0; recompute <= 1; recompute++) {
                const run_config_t rc = {kinds[k], 2, 1, 4, recompute, BG_F32};
                double loss;
                float *got = train_split(f, &rc, &split, &loss);
                if (memcmp(got, want, bytes) != 0 || loss != want_loss)
                    fail_msg("%s split %d recompute=%d: not one device's bits (relative error "
                             "%g, loss %.9g vs %.9g)",
                             bg_schedule_kind_name(rc.schedule), split, recompute,
                             relative_error(got, want, f->spec->total_params), loss, want_loss);
                free(got);
                runs++;
            }
        }
    }
    assert_int_equal(runs, cuts * 2 * 2);
    const run_config_t three = {BG_SCHEDULE_1F1B, 3, 1, 8, 0, BG_F64};
    double loss;
    float *got = train(f, &three, &loss);
    const double err = relative_error(got, f->want_f64, f->spec->total_params);
    if (!(err <= 1e-6)) fail_msg("K=3 M=8 in double: relative error %g", err);
    free(got);
    return want;
}

/* tanh, sigmoid, gelu and layernorm in a pipeline: cut after every layer
 * in turn (tanh, sigmoid and relu then run in place over their
 * predecessor's output, a convolution's, a pool's, gelu's or layernorm's,
 * or start a stage and keep their own), each placement gives one
 * device's bits at the same M, under 1F1B and zb-h1 (whose W reads saved
 * gradients), with and without recompute; and three stages match one device
 * at M = 1. */
static void test_activation_and_norm_layers(void **state) {
    (void)state;
    static const char model[] = "input channels=1 height=10 width=10\n"
                                "conv2d filters=4 kernel=3 activation=tanh\n"
                                "layernorm\n"
                                "maxpool size=2\n"
                                "sigmoid\n" /* not in place: the pool reads its output */
                                "avgpool size=2 stride=1\n"
                                "tanh\n" /* in place */
                                "flatten\n"
                                "dense units=16 activation=gelu\n"
                                "tanh\n" /* in place over gelu's output */
                                "layernorm\n"
                                "relu\n" /* in place over layernorm's */
                                "dense units=12 activation=sigmoid\n"
                                "dense units=5\n"
                                "softmax_cross_entropy\n";
    fixture_t *f = fixture_create("activations", model);
    assert_int_equal(f->spec->num_layers, 17);
    float *want = expect_every_cut_alike(f);
    /* The first layer's weights moved from their start: gradients came back
     * through every activation, so the comparisons above saw them. */
    float w0[36], b0[4];
    assert_int_equal(f->spec->layers[0].params, 36 + 4);
    bg_layer_init_params(&f->spec->layers[0], 0, 5, w0, b0);
    int moved = 0;
    for (int i = 0; i < 36; i++) moved += fabsf(want[i] - w0[i]) > 1e-3f;
    if (moved < 30) fail_msg("only %d of layer 0's 36 weights moved", moved);
    /* and the first layernorm's gamma (after layer 0's 40 values), from 1 */
    moved = 0;
    for (int i = 0; i < 256; i++) moved += fabsf(want[40 + i] - 1) > 1e-3f;
    if (moved < 200) fail_msg("only %d of layer 2's 256 gammas moved", moved);
    free(want);
    fixture_destroy(f);
}

/* Residual blocks: a convolution block at the model's input (whose
 * residual has no dX to pass on), a relu in place over its add, nested
 * blocks over vectors with a dropout inside (in place over a gelu), two
 * adds in a row, and a block right before the classifier. Every cut
 * between blocks gives one device's bits under 1F1B and zb-h1 (whose W
 * reads gradients B saved) with and without recompute, and three stages
 * in double match one device at M = 1. Gradients reached the first
 * convolution through the blocks. */
static void test_residual_blocks(void **state) {
    (void)state;
    static const char model[] = "input channels=2 height=8 width=8\n"
                                "residual\n" /* 0 */
                                "conv2d filters=2 kernel=3 padding=same activation=relu\n"
                                "conv2d filters=2 kernel=3 padding=same\n"
                                "add\n"  /* 4 */
                                "relu\n" /* in place over the add's output */
                                "maxpool size=2\n"
                                "flatten\n"
                                "dense units=12 activation=tanh\n" /* 8, 9 */
                                "residual\n"                       /* 10 */
                                "dense units=12 activation=gelu\n"
                                "dropout rate=0.2\n" /* in place over gelu's */
                                "residual\n"         /* 14 */
                                "layernorm\n"
                                "dense units=12\n"
                                "add\n" /* 17 */
                                "add\n" /* 18 */
                                "residual\n"
                                "dense units=12 activation=relu\n"
                                "add\n" /* 22 */
                                "dense units=5\n"
                                "softmax_cross_entropy\n";
    fixture_t *f = fixture_create("residual", model);
    assert_int_equal(f->spec->num_layers, 25);
    assert_int_equal(f->spec->layers[18].partner, 10);
    float *want = expect_every_cut_alike(f);
    float w0[2 * 2 * 9];
    float b0[2];
    bg_layer_init_params(&f->spec->layers[1], 1, 5, w0, b0);
    int moved = 0;
    for (int i = 0; i < 36; i++) moved += fabsf(want[i] - w0[i]) > 1e-3f;
    if (moved < 30) fail_msg("only %d of layer 1's 36 weights moved", moved);
    free(want);
    /* The balanced split (no --split) cuts between blocks only: the model
     * has 10 places a stage may start at, layer 0 included. */
    int first[10];
    for (int stages = 2; stages <= 10; stages++) {
        assert_int_equal(bg_pipeline_balance_split(f->spec, stages, first), BG_OK);
        for (int s = 1; s < stages; s++) {
            assert_true(first[s] > first[s - 1]);
            assert_int_equal(bg_model_spec_block_cut(f->spec, first[s]), -1);
        }
    }
    assert_int_equal(bg_pipeline_balance_split(f->spec, 11, first), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(),
                        "11 stages but the model has only 10 places to start one, layers 0, 5, 6, "
                        "7, 8, 9, 10, 19, ...: a stage may not start inside a residual block");
    fixture_destroy(f);

    /* Shortcut branches: a downsampling block projected by a strided 1x1
     * convolution, and a dense block whose shortcut branch holds a block
     * of its own. */
    f = fixture_create("shortcuts", BG_TEST_SHORTCUT_MODEL);
    assert_int_equal(f->spec->num_layers, 23);
    free(expect_every_cut_alike(f));
    fixture_destroy(f);
}

/* Dropout draws its mask by a value's place in the mini-batch, the layer
 * and the step, so: every cut of a model with dropout (at the input, in
 * place after a convolution and a gelu with a relu in place after it,
 * after a relu with its own buffer, first in a stage) gives one device's bits at the same M under
 * 1F1B and zb-h1 with and without recompute; in double, K = 3 at M = 8
 * matches one device at M = 1 (another cut into micro-batches drops the
 * same values); the masks change with the step (SGD, which the step count
 * does not touch otherwise); rates of 0 train otherwise (it drops); and
 * evaluation passes every value on. */
static void test_dropout_layers(void **state) {
    (void)state;
    static const char model[] = "input channels=1 height=8 width=8\n"
                                "dropout rate=0.2\n" /* the model's input: no dX */
                                "conv2d filters=3 kernel=3\n"
                                "dropout rate=0.3\n" /* in place over the conv's output */
                                "relu\n"             /* in place over the dropout's */
                                "maxpool size=2\n"
                                "flatten\n"
                                "dense units=12 activation=relu\n"
                                "dropout\n" /* after a relu: its own buffer */
                                "dense units=10 activation=gelu\n"
                                "dropout rate=0.1\n" /* in place over gelu's, before the loss */
                                "softmax_cross_entropy\n";
    fixture_t *f = fixture_create("dropout", model);
    assert_int_equal(f->spec->num_layers, 13);
    const size_t bytes = sizeof(float) * (size_t)f->spec->total_params;
    free(expect_every_cut_alike(f));
    /* Rates of 0: the same layers and initial weights, other weights. */
    static const char undropped[] = "input channels=1 height=8 width=8\n"
                                    "dropout rate=0\n"
                                    "conv2d filters=3 kernel=3\n"
                                    "dropout rate=0\n"
                                    "relu\n"
                                    "maxpool size=2\n"
                                    "flatten\n"
                                    "dense units=12 activation=relu\n"
                                    "dropout rate=0\n"
                                    "dense units=10 activation=gelu\n"
                                    "dropout rate=0\n"
                                    "softmax_cross_entropy\n";
    fixture_t *plain = fixture_create("no dropout", undropped);
    const double moved = relative_error(plain->want_f64, f->want_f64, f->spec->total_params);
    if (!(moved > 1e-3)) fail_msg("dropout changed the weights by only %g", moved);
    /* Evaluation passes every value: the dropped model scores its weights
     * as the undropped one does. */
    bg_device_list_t devices;
    assert_int_equal(bg_device_list_parse("cpu:2", 2, &devices), BG_OK);
    bg_pipeline_result_t results[2];
    const fixture_t *models[2] = {f, plain};
    for (int m = 0; m < 2; m++) {
        bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
        cfg.spec = models[m]->spec;
        cfg.devices = &devices;
        cfg.microbatches = 2;
        cfg.batch = BATCH;
        bg_pipeline_t *p = NULL;
        if (bg_pipeline_create(&cfg, &p) != BG_OK) fail_msg("%s", bg_error_message());
        assert_int_equal(bg_pipeline_upload_params(p, f->want_f32), BG_OK);
        assert_int_equal(bg_pipeline_evaluate(p, f->images, f->data->labels, BATCH, &results[m]),
                         BG_OK);
        bg_pipeline_destroy(p);
    }
    assert_true(results[0].loss_sum == results[1].loss_sum);
    assert_int_equal(results[0].correct, results[1].correct);
    /* One SGD step from step 0 and from step 7, from the same weights on
     * the same batch: other masks, other weights. */
    float *after[2];
    for (int run = 0; run < 2; run++) {
        bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
        cfg.spec = f->spec;
        cfg.devices = &devices;
        cfg.batch = BATCH;
        cfg.optimizer.kind = BG_OPTIMIZER_SGD;
        bg_pipeline_t *p = NULL;
        if (bg_pipeline_create(&cfg, &p) != BG_OK) fail_msg("%s", bg_error_message());
        bg_pipeline_set_steps(p, run == 0 ? 0 : 7);
        bg_pipeline_result_t r;
        assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
        after[run] = malloc(bytes);
        assert_int_equal(bg_pipeline_download_params(p, after[run]), BG_OK);
        bg_pipeline_destroy(p);
    }
    assert_true(memcmp(after[0], after[1], bytes) != 0);
    free(after[0]);
    free(after[1]);
    fixture_destroy(plain);
    fixture_destroy(f);
}

/* One SGD step at lr 1 (the weights move by minus the gradient) on the
 * first batch, on `devices` CPU devices cut at `split` (NULL: balanced) at
 * M = 4, clipping at `clip`; the weights before and after it (caller
 * frees both) and the step's result. */
static float *clipped_step(const fixture_t *f, int devices, const int *split, double clip,
                           float **before, bg_pipeline_result_t *result) {
    bg_device_list_t list;
    char spec[16];
    snprintf(spec, sizeof spec, "cpu:%d", devices);
    assert_int_equal(bg_device_list_parse(spec, 2, &list), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.devices = &list;
    cfg.microbatches = 4;
    cfg.batch = BATCH;
    cfg.split = split;
    cfg.seed = 5;
    cfg.optimizer.kind = BG_OPTIMIZER_SGD;
    cfg.optimizer.sgd.lr = 1;
    cfg.clip_grad_norm = clip;
    bg_pipeline_t *p = NULL;
    if (bg_pipeline_create(&cfg, &p) != BG_OK) fail_msg("%s", bg_error_message());
    const size_t bytes = sizeof(float) * (size_t)f->spec->total_params;
    float *after = malloc(bytes);
    *before = malloc(bytes);
    assert_true(after != NULL && *before != NULL);
    assert_int_equal(bg_pipeline_download_params(p, *before), BG_OK);
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, result), BG_OK);
    assert_int_equal(bg_pipeline_download_params(p, after), BG_OK);
    bg_pipeline_destroy(p);
    return after;
}

/* Clipping by the norm of all the gradients together: a step's reported
 * norm is the unclipped step's length (SGD at lr 1 moves the weights by
 * the gradient); clipped at a quarter of it, the step is the unclipped one
 * times clip / (norm + 1e-6), of length clip; and every cut into 2 stages,
 * and 3 and 4 balanced ones, at M = 4 gives one device's bits (each
 * layer's squares summed where it lies, the layers' sums in layer order). */
static void test_clip_grad_norm(void **state) {
    fixture_t *f = *state;
    const int64_t n = f->spec->total_params;
    bg_pipeline_result_t free_result, clip_result;
    float *p0 = NULL, *p0_again = NULL;
    float *free_step = clipped_step(f, 1, NULL, 1e30, &p0, &free_result);
    double length = 0;
    for (int64_t i = 0; i < n; i++)
        length += ((double)free_step[i] - p0[i]) * (free_step[i] - p0[i]);
    length = sqrt(length);
    assert_false(free_result.clipped);
    if (!(fabs(free_result.grad_norm - length) <= 1e-5 * length))
        fail_msg("norm %.9g, the step's length %.9g", free_result.grad_norm, length);
    const double clip = free_result.grad_norm / 4;
    float *clipped = clipped_step(f, 1, NULL, clip, &p0_again, &clip_result);
    assert_memory_equal(p0, p0_again, sizeof(float) * (size_t)n);
    assert_true(clip_result.clipped);
    assert_true(clip_result.grad_norm == free_result.grad_norm);
    const double factor = clip / (free_result.grad_norm + 1e-6);
    double clipped_length = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double step = (double)clipped[i] - p0[i],
                     want = factor * ((double)free_step[i] - p0[i]);
        clipped_length += step * step;
        if (fabs(step - want) > worst) worst = fabs(step - want);
    }
    if (!(fabs(sqrt(clipped_length) - clip) <= 1e-4 * clip))
        fail_msg("clipped step of length %.9g, want %.9g", sqrt(clipped_length), clip);
    if (!(worst <= 1e-6)) fail_msg("clipped step off the scaled one by %g", worst);
    /* The same bits on any placement. */
    for (int split = 1; split < f->spec->num_layers; split++) {
        float *before = NULL;
        bg_pipeline_result_t r;
        float *got = clipped_step(f, 2, &split, clip, &before, &r);
        if (memcmp(got, clipped, sizeof(float) * (size_t)n) != 0 ||
            r.grad_norm != clip_result.grad_norm)
            fail_msg("split %d: not one device's bits (norm %.17g vs %.17g)", split, r.grad_norm,
                     clip_result.grad_norm);
        free(got);
        free(before);
    }
    for (int devices = 3; devices <= 4; devices++) {
        float *before = NULL;
        bg_pipeline_result_t r;
        float *got = clipped_step(f, devices, NULL, clip, &before, &r);
        assert_memory_equal(got, clipped, sizeof(float) * (size_t)n);
        free(got);
        free(before);
    }
    free(p0);
    free(p0_again);
    free(free_step);
    free(clipped);
}

/* Two runs of one configuration give bit-identical weights. */
static void test_bit_identical(void **state) {
    fixture_t *f = *state;
    run_config_t rc = {BG_SCHEDULE_1F1B, 3, 1, 4, 0, BG_F32};
    double la, lb;
    float *a = train(f, &rc, &la), *b = train(f, &rc, &lb);
    assert_memory_equal(a, b, sizeof(float) * (size_t)f->spec->total_params);
    assert_true(la == lb);
    free(a);
    free(b);
}

/* Peak micro-batches held per stage match the schedule's theory. */
static void test_stash_peaks(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    assert_int_equal(bg_device_list_parse("cpu:4", 2, &devices), BG_OK);
    for (int kind = 0; kind < 2; kind++) {
        bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
        cfg.spec = f->spec;
        cfg.devices = &devices;
        cfg.schedule = kind == 0 ? BG_SCHEDULE_GPIPE : BG_SCHEDULE_1F1B;
        cfg.microbatches = 8;
        cfg.batch = BATCH;
        bg_pipeline_t *p;
        assert_int_equal(bg_pipeline_create(&cfg, &p), BG_OK);
        bg_pipeline_result_t r;
        assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
        for (int s = 0; s < 4; s++) {
            bg_pipeline_stage_info_t info = bg_pipeline_stage_info(p, s);
            int want = kind == 0 ? 8 : 4 - s; /* GPipe: M; 1F1B: K - s */
            assert_int_equal(info.memory.peak_in_flight, want);
            assert_int_equal(info.stash_slots, want);
            assert_int_equal(info.memory.in_flight, 0);
            assert_int_equal(info.memory.stash_peak, (size_t)want * info.memory.stash_slot);
        }
        bg_pipeline_destroy(p);
    }
}

/* Evaluation through the pipeline counts what one device counts. */
static void test_evaluate(void **state) {
    fixture_t *f = *state;
    bg_device_list_t one, three;
    assert_int_equal(bg_device_list_parse("cpu", 2, &one), BG_OK);
    assert_int_equal(bg_device_list_parse("cpu:3", 2, &three), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.devices = &one;
    cfg.batch = BATCH;
    bg_pipeline_t *a, *b;
    assert_int_equal(bg_pipeline_create(&cfg, &a), BG_OK);
    cfg.devices = &three;
    cfg.microbatches = 4;
    assert_int_equal(bg_pipeline_create(&cfg, &b), BG_OK);
    bg_pipeline_result_t ra, rb;
    assert_int_equal(bg_pipeline_evaluate(a, f->images, f->data->labels, 13, &ra), BG_OK);
    assert_int_equal(bg_pipeline_evaluate(b, f->images, f->data->labels, 13, &rb), BG_OK);
    assert_int_equal(ra.correct, rb.correct);
    assert_true(fabs(ra.loss_sum - rb.loss_sum) <= 1e-5 * ra.loss_sum);
    assert_true(ra.loss_sum > 0);
    /* What a caller's buffers for a job must hold: at most B samples of
     * the model's input (bg_train_evaluate asks before it gathers). */
    assert_int_equal(bg_pipeline_check_batch(b, BATCH, f->spec->input), BG_OK);
    assert_int_equal(bg_pipeline_check_batch(b, BATCH + 1, f->spec->input), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(), "a batch of 17 samples; the pipeline takes 1..16");
    const bg_shape_t other = {1, 9, 10};
    assert_int_equal(bg_pipeline_check_batch(b, BATCH, other), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(),
                        "samples of 1x9x10; the pipeline's model takes 1x10x10");
    /* Evaluation changes nothing: the same call gives the same figures. */
    assert_int_equal(bg_pipeline_evaluate(b, f->images, f->data->labels, 13, &ra), BG_OK);
    assert_true(ra.loss_sum == rb.loss_sum);
    /* A forward-only pipeline: the same figures, bit for bit, from stages
     * that hold no gradients and receive none; it trains no step. */
    cfg.forward_only = 1;
    bg_pipeline_t *c;
    assert_int_equal(bg_pipeline_create(&cfg, &c), BG_OK);
    assert_int_equal(bg_pipeline_evaluate(c, f->images, f->data->labels, 13, &ra), BG_OK);
    assert_true(ra.loss_sum == rb.loss_sum);
    assert_int_equal(ra.correct, rb.correct);
    for (int s = 0; s < 3; s++) {
        const bg_pipeline_stage_info_t trains = bg_pipeline_stage_info(b, s),
                                       evaluates = bg_pipeline_stage_info(c, s);
        assert_int_equal(evaluates.first_layer, trains.first_layer);
        assert_int_equal(evaluates.stash_slots, 1);
        assert_int_equal(evaluates.memory.grads + evaluates.memory.buffers, 0);
        assert_true(evaluates.memory.params == trains.memory.params);
        /* The last stage receives activations, as it does training; the
         * others no gradients, so stage 0 nothing. */
        if (s == 2)
            assert_int_equal(evaluates.channel_bytes, trains.channel_bytes);
        else
            assert_true(evaluates.channel_bytes < trains.channel_bytes);
        if (s == 0) assert_int_equal(evaluates.channel_bytes, 0);
    }
    assert_int_equal(bg_pipeline_train_step(c, f->images, f->data->labels, 13, &ra),
                     BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "forward-only pipeline evaluates"));
    bg_pipeline_destroy(a);
    bg_pipeline_destroy(b);
    bg_pipeline_destroy(c);
}

/* A pipeline of f's model on `devices_text` (*devices must outlive it),
 * a batch of BATCH in m micro-batches, with `adjust(cfg, arg)` (if not
 * NULL) changing its config before it is made. */
static bg_pipeline_t *make_pipeline(const fixture_t *f, const char *devices_text,
                                    bg_schedule_kind_t kind, int m, bg_device_list_t *devices,
                                    void (*adjust)(bg_pipeline_config_t *, int), int arg) {
    assert_int_equal(bg_device_list_parse(devices_text, 2, devices), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.devices = devices;
    cfg.schedule = kind;
    cfg.microbatches = m;
    cfg.batch = BATCH;
    if (adjust != NULL) adjust(&cfg, arg);
    bg_pipeline_t *p = NULL;
    if (bg_pipeline_create(&cfg, &p) != BG_OK) fail_msg("%s", bg_error_message());
    return p;
}

/* make_pipeline's adjustments: the longest stall timeout; clipping at 1. */
static void longest_stall_timeout(bg_pipeline_config_t *cfg, int unused) {
    (void)unused;
    cfg->stall_timeout_s = BG_PIPELINE_STALL_MAX_S;
}

static void clip_at_one(bg_pipeline_config_t *cfg, int unused) {
    (void)unused;
    cfg->clip_grad_norm = 1;
}

static void expect_create_error(fixture_t *f, const char *devices_text, bg_schedule_kind_t kind,
                                int chunks, int m, const int *split, bg_status_t want,
                                const char *needle) {
    bg_device_list_t devices;
    assert_int_equal(bg_device_list_parse(devices_text, 2, &devices), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.devices = &devices;
    cfg.schedule = kind;
    cfg.chunks = chunks;
    cfg.microbatches = m;
    cfg.batch = BATCH;
    cfg.split = split;
    cfg.poll_s = poll_s;
    cfg.stall_timeout_s = stall_timeout_s;
    bg_pipeline_t *p = NULL;
    assert_int_equal(bg_pipeline_create(&cfg, &p), want);
    assert_null(p);
    if (strstr(bg_error_message(), needle) == NULL)
        fail_msg("message '%s' lacks '%s'", bg_error_message(), needle);
}

static void test_invalid_requests(void **state) {
    fixture_t *f = *state;
    expect_create_error(f, "cpu:4", BG_SCHEDULE_INTERLEAVED, 2, 6, NULL, BG_ERR_INVALID,
                        "multiple");
    expect_create_error(f, "cpu:9", BG_SCHEDULE_1F1B, 1, 4, NULL, BG_ERR_INVALID, "only 8 layers");
    expect_create_error(f, "cpu:2", BG_SCHEDULE_1F1B, 2, 4, NULL, BG_ERR_INVALID, "chunks");
    expect_create_error(f, "cpu:2", BG_SCHEDULE_1F1B, 1, 32, NULL, BG_ERR_INVALID, "empty");
    /* Devices x chunks past an int: counted, not wrapped to 4 stages. */
    expect_create_error(f, "cpu:4", BG_SCHEDULE_INTERLEAVED, (1 << 30) + 1, 4, NULL, BG_ERR_INVALID,
                        "4294967300 stages (4 devices x 1073741825 chunks)");
    static const int backwards[] = {5, 3};
    expect_create_error(f, "cpu:3", BG_SCHEDULE_GPIPE, 1, 2, backwards, BG_ERR_INVALID, "--split");
    static const int too_far[] = {8};
    expect_create_error(f, "cpu:2", BG_SCHEDULE_GPIPE, 1, 2, too_far, BG_ERR_INVALID, "--split");
    expect_create_error(f, "cuda:0x2", BG_SCHEDULE_GPIPE, 1, 2, NULL, BG_ERR_UNSUPPORTED,
                        "(use --devices cpu:N)");
    /* A poll longer than BG_PIPELINE_POLL_MAX_S, or none at all. */
    static const double bad_polls[] = {0.5, INFINITY, NAN};
    for (int i = 0; i < 3; i++) {
        poll_s = bad_polls[i];
        expect_create_error(f, "cpu:2", BG_SCHEDULE_1F1B, 1, 2, NULL, BG_ERR_INVALID,
                            "waits poll 0 to 0.1 s");
    }
    poll_s = -1;
    /* A stall timeout whose deadline is no time: until 2026-12-06 an
     * infinite one made a wait spin holding its lock, and 1e300 stalled at
     * once. */
    static const double bad_timeouts[] = {INFINITY, NAN, 1e300, 1.5e9, -1};
    for (int i = 0; i < 5; i++) {
        stall_timeout_s = bad_timeouts[i];
        expect_create_error(f, "cpu:2", BG_SCHEDULE_1F1B, 1, 2, NULL, BG_ERR_INVALID,
                            "the stall timeout is 0 (none) to 1e+09 s");
    }
    stall_timeout_s = 300;
    /* The bound itself is a time. */
    bg_device_list_t devices;
    bg_pipeline_t *p =
        make_pipeline(f, "cpu:2", BG_SCHEDULE_1F1B, 2, &devices, longest_stall_timeout, 0);
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    bg_pipeline_destroy(p);
}

/* The default split balances FLOPs: on the origin-like CNN the conv and the
 * big dense layer end up on different stages. */
static void test_balance_split(void **state) {
    fixture_t *f = *state;
    int first[8];
    assert_int_equal(bg_pipeline_balance_split(f->spec, 2, first), BG_OK);
    assert_int_equal(first[0], 0);
    assert_true(first[1] >= 1 && first[1] <= 4);
    assert_int_equal(bg_pipeline_balance_split(f->spec, 8, first), BG_OK);
    for (int s = 0; s < 8; s++) assert_int_equal(first[s], s);
    assert_int_equal(bg_pipeline_balance_split(f->spec, 9, first), BG_ERR_INVALID);
    /* A convolution of 2^62 FLOPs a sample, whose forward and backward
     * (three times that) pass 64-bit integers: it alone is stage 0, and
     * the balance is still found for 3 stages. */
    static const char huge[] = "input channels=1048576 height=1025 width=1024\n"
                               "conv2d filters=1048576 kernel=1024\n"
                               "flatten\n"
                               "dense units=10\n"
                               "softmax_cross_entropy\n";
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("huge", huge, strlen(huge), &spec), BG_OK);
    assert_true(spec->layers[0].flops == (int64_t)1 << 62);
    assert_int_equal(bg_pipeline_balance_split(spec, 2, first), BG_OK);
    assert_int_equal(first[1], 1);
    assert_int_equal(bg_pipeline_balance_split(spec, 3, first), BG_OK);
    assert_int_equal(first[1], 1);
    bg_model_spec_destroy(spec);
}

/* make_pipeline's adjustment: `chunks` stages a device. */
static void with_chunks(bg_pipeline_config_t *cfg, int chunks) { cfg->chunks = chunks; }

/* A pipeline on cpu:2 with a timeline of its shape (*devices must outlive
 * it). */
static bg_pipeline_t *two_devices(const fixture_t *f, bg_schedule_kind_t kind, int chunks, int m,
                                  bg_device_list_t *devices, bg_timeline_t **tl) {
    bg_pipeline_t *p = make_pipeline(f, "cpu:2", kind, m, devices, with_chunks, chunks);
    assert_int_equal(bg_pipeline_timeline_create(p, tl), BG_OK);
    return p;
}

/* Recording: every op once per step, every transfer as a copy (and maybe a
 * wait) on both ends, events of a device never overlap, all inside the
 * step's span. */
static void test_recording(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    bg_timeline_t *tl;
    bg_pipeline_t *p = two_devices(f, BG_SCHEDULE_ZB_H1, 1, 4, &devices, &tl);
    bg_pipeline_result_t r;
    /* An unrecorded step, two recorded ones, an evaluation, one more unrecorded. */
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    assert_int_equal(bg_pipeline_record(p, tl), BG_OK);
    for (int k = 0; k < 2; k++)
        assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    assert_int_equal(bg_pipeline_evaluate(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    assert_int_equal(bg_pipeline_record(p, NULL), BG_OK);
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    assert_int_equal(tl->steps, 2);
    assert_true(tl->step_start[0] == 0);
    assert_true(tl->step_end[0] > 0 && tl->step_start[1] >= tl->step_end[0]);
    assert_string_equal(tl->device_names[1], "cpu:1");

    int count[2][BG_EVENT_KINDS] = {{0}}, barrier_waits[2] = {0};
    bg_timeline_sort(tl);
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        assert_true(e->step == 0 || e->step == 1);
        assert_true(e->start >= tl->step_start[e->step] && e->end <= tl->step_end[e->step]);
        assert_int_equal(e->stage, e->device);
        if (i > 0 && tl->events[i - 1].device == e->device)
            assert_true(e->start >= tl->events[i - 1].end);
        /* Waits at the optimizer step name no stage. */
        if (e->kind >= BG_EVENT_SEND && e->peer_stage >= 0)
            assert_int_equal(e->peer_stage, 1 - e->stage);
        if (e->kind == BG_EVENT_WAIT && e->peer_stage < 0) barrier_waits[e->device]++;
        /* An op that sends holds its check at its end, a copy its wake
         * (0 where the peer was not asleep): a tail within the event; an
         * op that sends nothing (stage 1's F, stage 0's B, W) has none. */
        assert_true(e->tail_s >= 0 && e->tail_s <= e->end - e->start);
        const int sends = (e->kind == BG_EVENT_FORWARD && e->stage == 0) ||
                          (e->kind == BG_EVENT_BACKWARD && e->stage == 1);
        if (sends) assert_true(e->tail_s > 0);
        if (e->kind <= BG_EVENT_STEP && !sends) assert_true(e->tail_s == 0);
        /* A wait for a peer comes right before its copy: a send's wait (for
         * ring space) says so, a receive's (for the message) does not. */
        if (e->kind == BG_EVENT_WAIT && e->peer_stage >= 0) {
            assert_true(i + 1 < tl->count);
            const bg_event_t *copy = &tl->events[i + 1];
            assert_int_equal(copy->device, e->device);
            assert_int_equal(copy->microbatch, e->microbatch);
            assert_int_equal(copy->kind, e->to_send ? BG_EVENT_SEND : BG_EVENT_RECV);
        }
        count[e->device][e->kind]++;
    }
    for (int d = 0; d < 2; d++) {
        assert_int_equal(count[d][BG_EVENT_FORWARD], 2 * 4);
        assert_int_equal(count[d][BG_EVENT_BACKWARD], 2 * 4);
        assert_int_equal(count[d][BG_EVENT_WEIGHT], 2 * 4);
        assert_int_equal(count[d][BG_EVENT_STEP], 2);
        assert_int_equal(barrier_waits[d], 2); /* one per step, before the update */
        /* stage 0 sends activations and receives gradients; stage 1 the reverse */
        assert_int_equal(count[d][BG_EVENT_SEND], 2 * 4);
        assert_int_equal(count[d][BG_EVENT_RECV], 2 * 4);
    }
    bg_timeline_destroy(tl);
    bg_pipeline_destroy(p);
}

/* One recorded step of p into tl after a pause of 50 ms; its events'
 * step numbers and times lie within its span. */
static void record_step_after_pause(const fixture_t *f, bg_pipeline_t *p, bg_timeline_t *tl) {
    const struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    assert_int_equal(bg_pipeline_record(p, tl), BG_OK);
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    assert_int_equal(bg_pipeline_record(p, NULL), BG_OK);
    const int step = tl->steps - 1;
    int events = 0;
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->step != step) continue;
        assert_true(e->start >= tl->step_start[step] && e->end <= tl->step_end[step]);
        events++;
    }
    assert_true(events > 0);
}

/* Steps recorded by turns keep their timeline's origin: into A, into B,
 * into A again, then by a second pipeline going on with A, each after a
 * pause of 50 ms. A's steps follow one another with the pauses between
 * them (until 2026-12-06 its second step was timed from B's start, over
 * its first, and the second pipeline's from the clock's zero, hours on). */
static void test_recording_by_turns(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    bg_timeline_t *a, *b;
    bg_pipeline_t *p = two_devices(f, BG_SCHEDULE_1F1B, 1, 4, &devices, &a);
    assert_int_equal(bg_pipeline_timeline_create(p, &b), BG_OK);
    record_step_after_pause(f, p, a);
    record_step_after_pause(f, p, b);
    record_step_after_pause(f, p, a);
    assert_int_equal(b->steps, 1);
    assert_true(b->step_start[0] == 0);
    assert_int_equal(a->steps, 2);
    assert_true(a->step_start[0] == 0);
    /* B's step and two pauses between A's. */
    assert_true(a->step_start[1] >= a->step_end[0] + 0.1 + (b->step_end[0] - b->step_start[0]));
    bg_pipeline_destroy(p);
    p = make_pipeline(f, "cpu:2", BG_SCHEDULE_1F1B, 4, &devices, with_chunks, 1);
    record_step_after_pause(f, p, a);
    assert_int_equal(a->steps, 3);
    assert_true(a->step_start[2] >= a->step_end[1] + 0.05);
    assert_true(a->step_start[2] < a->step_end[1] + 60);
    bg_timeline_destroy(a);
    bg_timeline_destroy(b);
    bg_pipeline_destroy(p);
}

/* With clipping, each stage's pass over its gradients before the barrier
 * is recorded as its update's work (a step event), the barrier's wait only
 * after it (until 2026-12-06 the wait took it in, counted as idle). */
static void test_recording_clipping(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    bg_pipeline_t *p = make_pipeline(f, "cpu:2", BG_SCHEDULE_1F1B, 4, &devices, clip_at_one, 0);
    bg_timeline_t *tl;
    assert_int_equal(bg_pipeline_timeline_create(p, &tl), BG_OK);
    assert_int_equal(bg_pipeline_record(p, tl), BG_OK);
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    bg_timeline_sort(tl);
    for (int d = 0; d < 2; d++) {
        const bg_event_t *steps[2] = {NULL, NULL}, *barrier = NULL;
        int step_count = 0;
        for (int i = 0; i < tl->count; i++) {
            const bg_event_t *e = &tl->events[i];
            if (e->device != d) continue;
            if (e->kind == BG_EVENT_STEP && step_count < 2) steps[step_count] = e;
            step_count += e->kind == BG_EVENT_STEP;
            if (e->kind == BG_EVENT_WAIT && e->peer_stage < 0) barrier = e;
        }
        assert_int_equal(step_count, 2);
        assert_non_null(barrier);
        assert_int_equal(steps[0]->stage, d);
        assert_int_equal(steps[1]->stage, d);
        /* The pass, the wait, the update, one after another. */
        assert_true(steps[0]->end == barrier->start);
        assert_true(barrier->end == steps[1]->start);
    }
    bg_timeline_destroy(tl);
    bg_pipeline_destroy(p);
}

/* With interleaving a device's optimizer step updates each of its stages
 * in turn and records one STEP event per stage, so each stage's row in the
 * reports counts its own update (K = 2, V = 2: device 0 holds stages 0
 * and 2, device 1 stages 1 and 3). */
static void test_recording_interleaved_steps(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    bg_timeline_t *tl;
    bg_pipeline_t *p = two_devices(f, BG_SCHEDULE_INTERLEAVED, 2, 2, &devices, &tl);
    assert_int_equal(bg_pipeline_record(p, tl), BG_OK);
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    bg_timeline_sort(tl);
    int steps[4] = {0}, last_stage[2] = {-1, -1};
    double last_end[2] = {0, 0};
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->kind != BG_EVENT_STEP) continue;
        assert_true(e->stage >= 0 && e->stage < 4);
        assert_int_equal(e->device, e->stage % 2);
        /* A device's stages in order, each update after the one before. */
        assert_true(e->stage > last_stage[e->device]);
        assert_true(e->start >= last_end[e->device] && e->end >= e->start);
        last_stage[e->device] = e->stage;
        last_end[e->device] = e->end;
        steps[e->stage]++;
    }
    for (int s = 0; s < 4; s++) assert_int_equal(steps[s], 1);
    bg_timeline_summary_t *summary;
    assert_int_equal(bg_timeline_summarize(tl, &summary), BG_OK);
    /* Every stage has forwards, backwards and an update of its own. */
    for (int s = 0; s < 4; s++)
        assert_true(summary->stage[s].compute_s >
                    summary->stage[s].forward_s + summary->stage[s].backward_s);
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
    bg_pipeline_destroy(p);
}

/* Parameters, optimizer state and step count moved into a fresh pipeline of
 * another placement continue the run bit for bit (in double, where the
 * placements agree exactly). */
static void test_state_transfer(void **state) {
    fixture_t *f = *state;
    bg_device_list_t two, one;
    assert_int_equal(bg_device_list_parse("cpu:2", 2, &two), BG_OK);
    assert_int_equal(bg_device_list_parse("cpu", 2, &one), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.devices = &two;
    cfg.microbatches = 2;
    cfg.batch = BATCH;
    cfg.optimizer = optimizer();
    cfg.dtype = BG_F64;
    bg_pipeline_t *a, *b;
    assert_int_equal(bg_pipeline_create(&cfg, &a), BG_OK);
    cfg.devices = &one;
    cfg.microbatches = 1;
    cfg.seed = 99; /* other initial weights: all must come from the transfer */
    assert_int_equal(bg_pipeline_create(&cfg, &b), BG_OK);
    const int64_t n = f->spec->total_params, numel = bg_shape_numel(f->spec->input);
    bg_pipeline_result_t r;
    for (int k = 0; k < 2; k++)
        assert_int_equal(bg_pipeline_train_step(a, f->images + k * BATCH * numel,
                                                f->data->labels + k * BATCH, BATCH, &r),
                         BG_OK);
    float *buf = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(bg_pipeline_download_params(a, buf), BG_OK);
    assert_int_equal(bg_pipeline_upload_params(b, buf), BG_OK);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(bg_pipeline_download_optimizer_state(a, k, buf), BG_OK);
        assert_int_equal(bg_pipeline_upload_optimizer_state(b, k, buf), BG_OK);
    }
    assert_int_equal(bg_pipeline_download_optimizer_state(a, 2, buf), BG_ERR_INVALID);
    assert_int_equal(bg_pipeline_steps(a), 2);
    bg_pipeline_set_steps(b, bg_pipeline_steps(a));
    const float *images = f->images + 2 * BATCH * numel;
    const int32_t *labels = f->data->labels + 2 * BATCH;
    bg_pipeline_result_t ra, rb;
    assert_int_equal(bg_pipeline_train_step(a, images, labels, BATCH, &ra), BG_OK);
    assert_int_equal(bg_pipeline_train_step(b, images, labels, BATCH, &rb), BG_OK);
    float *pa = malloc(sizeof(float) * (size_t)n), *pb = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(bg_pipeline_download_params(a, pa), BG_OK);
    assert_int_equal(bg_pipeline_download_params(b, pb), BG_OK);
    double err = relative_error(pa, pb, n);
    if (!(err <= 1e-6)) fail_msg("relative error %g after the transfer", err);
    assert_true(fabs(ra.loss_sum - rb.loss_sum) <= 1e-9 * ra.loss_sum);
    free(buf);
    free(pa);
    free(pb);
    bg_pipeline_destroy(a);
    bg_pipeline_destroy(b);
}

/* What the work done while a step runs saw (test_meanwhile). */
typedef struct meanwhile_seen {
    const bg_pipeline_t *p;
    uint64_t generation; /* the pipeline's job count before the step */
    int calls;
    int posted; /* the step's job was posted to the devices when it was called */
    double at;  /* when it was called */
} meanwhile_seen_t;

static void note_meanwhile(void *ctx) {
    meanwhile_seen_t *seen = ctx;
    seen->calls++;
    seen->posted = atomic_load(&seen->p->generation) > seen->generation;
    seen->at = bg_monotonic_seconds();
}

/* bg_pipeline_train_step_meanwhile calls its work once, during the step,
 * and trains as bg_pipeline_train_step does, bit for bit; on CPU devices
 * the batch buffers are the caller's own. */
static void test_meanwhile(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    bg_pipeline_t *a = make_pipeline(f, "cpu:2", BG_SCHEDULE_1F1B, 2, &devices, NULL, 0),
                  *b = make_pipeline(f, "cpu:2", BG_SCHEDULE_1F1B, 2, &devices, NULL, 0);
    float *images = f->images;
    int32_t *labels = f->data->labels;
    assert_int_equal(bg_pipeline_batch_buffers(a, &images, &labels), BG_OK);
    assert_ptr_equal(images, f->images);
    assert_ptr_equal(labels, f->data->labels);
    const int64_t n = f->spec->total_params;
    for (int k = 0; k < 2; k++) {
        meanwhile_seen_t seen = {a, atomic_load(&a->generation), 0, 0, 0};
        bg_pipeline_result_t ra, rb;
        const double before = bg_monotonic_seconds();
        assert_int_equal(bg_pipeline_train_step_meanwhile(a, f->images, f->data->labels, BATCH, &ra,
                                                          note_meanwhile, &seen),
                         BG_OK);
        const double after = bg_monotonic_seconds();
        assert_int_equal(seen.calls, 1);
        assert_true(seen.posted);
        assert_true(before <= seen.at && seen.at <= after);
        assert_int_equal(bg_pipeline_train_step(b, f->images, f->data->labels, BATCH, &rb), BG_OK);
        assert_true(ra.loss_sum == rb.loss_sum);
    }
    float *pa = malloc(sizeof(float) * (size_t)n), *pb = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(bg_pipeline_download_params(a, pa), BG_OK);
    assert_int_equal(bg_pipeline_download_params(b, pb), BG_OK);
    assert_memory_equal(pa, pb, sizeof(float) * (size_t)n);
    free(pa);
    free(pb);
    bg_pipeline_destroy(a);
    bg_pipeline_destroy(b);
}

static void inject_nan(bg_pipeline_config_t *cfg, int stage) {
    cfg->nan_stage = stage;
    cfg->nan_microbatch = 1;
}

/* A NaN written into one micro-batch's activation on one stage: found on
 * that stage, reported with micro-batch and layer, and no stage steps. */
static void test_nan_guard(void **state) {
    fixture_t *f = *state;
    static const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_GPIPE, BG_SCHEDULE_1F1B,
                                               BG_SCHEDULE_ZB_H1};
    const int64_t n = f->spec->total_params;
    float *before = malloc(sizeof(float) * (size_t)n), *after = malloc(sizeof(float) * (size_t)n);
    for (int k = 0; k < 3; k++) {
        for (int stage = 0; stage < 2; stage++) {
            bg_device_list_t devices;
            bg_pipeline_t *p = make_pipeline(f, "cpu:3", kinds[k], 4, &devices, inject_nan, stage);
            assert_int_equal(bg_pipeline_download_params(p, before), BG_OK);
            bg_pipeline_result_t r;
            assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r),
                             BG_OK);
            assert_int_equal(r.skipped, 1);
            char want[64];
            snprintf(want, sizeof want, "stage %d, micro-batch 1, layer", stage);
            if (strstr(r.nan_report, want) == NULL ||
                strstr(r.nan_report, "forward output") == NULL)
                fail_msg("report '%s' lacks '%s'", r.nan_report, want);
            assert_int_equal(bg_pipeline_download_params(p, after), BG_OK);
            assert_memory_equal(before, after, sizeof(float) * (size_t)n);
            assert_int_equal(bg_pipeline_steps(p), 0);
            bg_pipeline_destroy(p);
        }
    }
    /* Without the hook the same step is taken. */
    bg_device_list_t devices;
    bg_pipeline_t *p = make_pipeline(f, "cpu:3", BG_SCHEDULE_1F1B, 4, &devices, NULL, 0);
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    assert_int_equal(r.skipped, 0);
    assert_int_equal(bg_pipeline_steps(p), 1);
    bg_pipeline_destroy(p);
    free(before);
    free(after);
}

/* A NaN in the last stage's output reaches the gradients: on one device,
 * the first layer with weights is named (every layer's gradient holds it);
 * on three, the last stage's input gradient, the earliest check that saw
 * it. An evaluation after it (the hook writes only when training) reports
 * nothing: the step's marks were all taken. */
static void test_nan_in_gradients(void **state) {
    fixture_t *f = *state;
    for (int k = 0; k < 2; k++) {
        bg_device_list_t devices;
        const int last = k == 0 ? 0 : 2;
        bg_pipeline_t *p = make_pipeline(f, k == 0 ? "cpu" : "cpu:3", BG_SCHEDULE_1F1B, 4, &devices,
                                         inject_nan, last);
        bg_pipeline_result_t r;
        assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
        assert_int_equal(r.skipped, 1);
        const char *want = k == 0 ? "stage 0, layer 0 (conv2d): the accumulated weight gradient"
                                  : "stage 2, micro-batch 1, layer";
        if (strstr(r.nan_report, want) == NULL ||
            (k == 1 && strstr(r.nan_report, "the gradient of its input") == NULL))
            fail_msg("report '%s' lacks '%s'", r.nan_report, want);
        assert_int_equal(bg_pipeline_steps(p), 0);
        assert_int_equal(bg_pipeline_evaluate(p, f->images, f->data->labels, BATCH, &r), BG_OK);
        assert_int_equal(r.skipped, 0);
        bg_pipeline_destroy(p);
    }
}

/* An infinity in a sample's input, through a dense layer (no ReLU to stop
 * what it makes), gives its micro-batch a loss that is not finite: the
 * first check to see it is that loss, which stays on the device until the
 * step's end, so the report names the loss layer and that micro-batch. The
 * next step, on clean input, is taken. */
static void test_nan_in_loss(void **state) {
    fixture_t *f = *state;
    static const char linear[] = "input channels=1 height=10 width=10\n"
                                 "flatten\n"
                                 "dense units=5\n"
                                 "softmax_cross_entropy\n";
    bg_model_spec_t *spec;
    assert_int_equal(bg_model_spec_parse("linear", linear, strlen(linear), &spec), BG_OK);
    const int64_t numel = bg_shape_numel(spec->input);
    float *images = malloc(sizeof(float) * (size_t)(BATCH * numel));
    assert_non_null(images);
    memcpy(images, f->images, sizeof(float) * (size_t)(BATCH * numel));
    images[(BATCH / 4 * 2 + 1) * numel + 37] = INFINITY; /* a sample of micro-batch 2 */
    bg_device_list_t devices;
    assert_int_equal(bg_device_list_parse("cpu", 2, &devices), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.devices = &devices;
    cfg.microbatches = 4;
    cfg.batch = BATCH;
    bg_pipeline_t *p = NULL;
    assert_int_equal(bg_pipeline_create(&cfg, &p), BG_OK);
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, images, f->data->labels, BATCH, &r), BG_OK);
    assert_int_equal(r.skipped, 1);
    const char *want = "stage 0, micro-batch 2, layer 2 (softmax_cross_entropy): the loss";
    if (strstr(r.nan_report, want) == NULL) fail_msg("report '%s' lacks '%s'", r.nan_report, want);
    assert_true(!isfinite(r.loss_sum));
    assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
    assert_int_equal(r.skipped, 0);
    assert_true(isfinite(r.loss_sum) && r.loss_sum > 0);
    assert_int_equal(bg_pipeline_steps(p), 1);
    bg_pipeline_destroy(p);
    bg_model_spec_destroy(spec);
    free(images);
}

static void stop_stage(bg_pipeline_config_t *cfg, int stage) {
    cfg->stop_stage = stage;
    cfg->stall_timeout_s = 0.2;
}

/* A stage that stops: the step ends within the timeout on every schedule,
 * with what every device was doing. */
static void test_stall_watchdog(void **state) {
    fixture_t *f = *state;
    static const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_GPIPE, BG_SCHEDULE_1F1B,
                                               BG_SCHEDULE_INTERLEAVED, BG_SCHEDULE_ZB_H1};
    for (int k = 0; k < 4; k++) {
        for (int stage = 0; stage < 2; stage++) {
            bg_device_list_t devices;
            bg_pipeline_t *p = make_pipeline(f, "cpu:2", kinds[k], 4, &devices, stop_stage, stage);
            bg_pipeline_result_t r;
            double start = bg_monotonic_seconds();
            bg_status_t st = bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r);
            double seconds = bg_monotonic_seconds() - start;
            assert_int_equal(st, BG_ERR_STALLED);
            /* The message is one line; the flight recorder its detail. */
            const char *msg = bg_error_message(), *detail = bg_error_detail();
            if (strstr(msg, "stall timeout") == NULL || strchr(msg, '\n') != NULL ||
                strncmp(detail, "flight recorder", 15) != 0 ||
                strstr(detail, "stopped by the test hook") == NULL ||
                strstr(detail, "cpu:1:") == NULL)
                fail_msg("%s: %s\n%s", bg_schedule_kind_name(kinds[k]), msg, detail);
            assert_true(seconds < 5.0);
            bg_pipeline_destroy(p);
        }
    }
}

static void no_stall_timeout(bg_pipeline_config_t *cfg, int unused) {
    (void)unused;
    cfg->stall_timeout_s = 0;
}

/* A stall timeout of 0 takes the barrier's wait without a deadline: steps
 * run as with one. (That it would wait for days is not tested.) */
static void test_no_stall_timeout(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    bg_pipeline_t *p =
        make_pipeline(f, "cpu:2", BG_SCHEDULE_1F1B, 4, &devices, no_stall_timeout, 0);
    for (int step = 0; step < 2; step++) {
        bg_pipeline_result_t r;
        assert_int_equal(bg_pipeline_train_step(p, f->images, f->data->labels, BATCH, &r), BG_OK);
        assert_int_equal(r.skipped, 0);
    }
    assert_int_equal(bg_pipeline_steps(p), 2);
    bg_pipeline_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equivalence),
        cmocka_unit_test(test_equivalence_f64),
        cmocka_unit_test(test_bit_identical),
        cmocka_unit_test(test_meanwhile),
        cmocka_unit_test(test_stash_peaks),
        cmocka_unit_test(test_evaluate),
        cmocka_unit_test(test_invalid_requests),
        cmocka_unit_test(test_balance_split),
        cmocka_unit_test(test_recording),
        cmocka_unit_test(test_recording_by_turns),
        cmocka_unit_test(test_recording_clipping), /* with clip_grad_norm */
        cmocka_unit_test(test_state_transfer),
        cmocka_unit_test(test_nan_guard),
        cmocka_unit_test(test_nan_in_gradients),
        cmocka_unit_test(test_nan_in_loss),
        cmocka_unit_test(test_stall_watchdog),
        cmocka_unit_test(test_recording_interleaved_steps),
        cmocka_unit_test(test_no_stall_timeout),
        cmocka_unit_test(test_same_m_bit_identical),
        cmocka_unit_test(test_polling_waits),
        cmocka_unit_test(test_activation_and_norm_layers),
        cmocka_unit_test(test_dropout_layers),
        cmocka_unit_test(test_residual_blocks),
        cmocka_unit_test(test_clip_grad_norm),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
