/* End-to-end training on one device: synthetic data, a small CNN. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dataset.h"
#include "model_spec.h"
#include "train.h"

static const char small_cnn[] = "input channels=1 height=12 width=12\n"
                                "conv2d filters=8 kernel=3 activation=relu\n"
                                "maxpool size=2\n"
                                "flatten\n"
                                "dense units=32 activation=relu\n"
                                "dense units=4\n"
                                "softmax_cross_entropy\n";

typedef struct fixture {
    bg_model_spec_t *spec;
    bg_dataset_t *train, *test;
} fixture_t;

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_int_equal(bg_model_spec_parse("small", small_cnn, strlen(small_cnn), &f->spec), BG_OK);
    assert_int_equal(bg_dataset_synthetic(f->spec->input, 4, 1024, 3, 0, &f->train), BG_OK);
    assert_int_equal(bg_dataset_synthetic(f->spec->input, 4, 512, 3, 1, &f->test), BG_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    bg_dataset_destroy(f->train);
    bg_dataset_destroy(f->test);
    bg_model_spec_destroy(f->spec);
    free(f);
    return 0;
}

static bg_train_config_t config(const fixture_t *f) {
    bg_train_config_t cfg = BG_TRAIN_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.train = f->train;
    cfg.test = f->test;
    cfg.batch = 32;
    cfg.epochs = 3;
    cfg.seed = 11;
    return cfg;
}

/* The model learns: chance is 0.25 and the initial loss about ln 4. */
static void test_learns_synthetic(void **state) {
    fixture_t *f = *state;
    bg_train_config_t cfg = config(f);
    bg_train_result_t r;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    bg_train_result_free(&r);
    assert_int_equal(r.steps, 3 * 32);
    assert_true(r.test_accuracy > 0.9);
    print_message("loss %.4f test accuracy %.4f\n", r.loss, r.test_accuracy);
    assert_true(r.loss < 0.8); /* from about ln 4 = 1.39 */
    assert_true(r.samples_per_s > 0);
}

/* No memory for the batches: said with their size and what takes less,
 * and nothing run (two sets of 32 samples of 144 values, 18,432 bytes each). */
static void test_no_memory_for_the_batches(void **state) {
    fixture_t *f = *state;
    bg_train_config_t cfg = config(f);
    bg_train_result_t r;
    bg_alloc_fail_after(0);
    const bg_status_t st = bg_train_run(&cfg, &r, NULL);
    bg_alloc_fail_after(-1);
    assert_int_equal(st, BG_ERR_NOMEM);
    assert_string_equal(bg_error_message(),
                        "out of memory for the batches: two sets of 32 samples of 144 values, "
                        "18432 bytes each (a smaller --batch takes less)");
    /* The fifth allocation, the samples' order, said as that. */
    bg_alloc_fail_after(4);
    const bg_status_t order = bg_train_run(&cfg, &r, NULL);
    bg_alloc_fail_after(-1);
    assert_int_equal(order, BG_ERR_NOMEM);
    assert_string_equal(bg_error_message(),
                        "out of memory for the order of the 1024 training samples (8192 bytes)");
}

/* Same configuration, bit-identical weights (DESIGN: synchronous semantics). */
static void test_deterministic(void **state) {
    fixture_t *f = *state;
    bg_train_config_t cfg = config(f);
    cfg.epochs = 1;
    int64_t n = f->spec->total_params;
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    bg_train_result_t ra, rb;
    assert_int_equal(bg_train_run(&cfg, &ra, a), BG_OK);
    assert_int_equal(bg_train_run(&cfg, &rb, b), BG_OK);
    bg_train_result_free(&ra);
    bg_train_result_free(&rb);
    assert_memory_equal(a, b, sizeof(float) * (size_t)n);
    assert_true(ra.loss == rb.loss);
    cfg.seed = 12;
    assert_int_equal(bg_train_run(&cfg, &rb, b), BG_OK);
    bg_train_result_free(&rb);
    assert_true(memcmp(a, b, sizeof(float) * (size_t)n) != 0);
    free(a);
    free(b);
}

/* Keeps the last progress report. */
static void keep_progress(void *ctx, const bg_train_progress_t *progress) {
    *(bg_train_progress_t *)ctx = *progress;
}

/* --steps stops early; a partial last batch is trained on, not dropped,
 * and the progress counts its samples as they are. */
static void test_steps_and_partial_batch(void **state) {
    fixture_t *f = *state;
    bg_train_config_t cfg = config(f);
    bg_train_progress_t last = {0};
    cfg.progress = keep_progress;
    cfg.progress_ctx = &last;
    cfg.steps = 5;
    bg_train_result_t r;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    bg_train_result_free(&r);
    assert_int_equal(r.steps, 5);
    cfg.steps = 0;
    cfg.epochs = 1;
    cfg.batch = 1000; /* 1024 samples: one batch of 1000, one of 24 */
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    bg_train_result_free(&r);
    assert_int_equal(r.steps, 2);
    assert_int_equal(last.step, 2);
    assert_int_equal(last.samples, 1024); /* not 2 x 1000 */
}

/* Starting from given parameters: zero steps of training is impossible, so
 * compare one SGD step with lr 0 against the initial parameters. */
static void test_initial_params_used(void **state) {
    fixture_t *f = *state;
    bg_train_config_t cfg = config(f);
    int64_t n = f->spec->total_params;
    float *start = malloc(sizeof(float) * (size_t)n), *end = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) start[i] = (float)((i % 7) - 3) * 0.01f;
    cfg.initial_params = start;
    cfg.steps = 1;
    cfg.optimizer.kind = BG_OPTIMIZER_SGD;
    cfg.optimizer.sgd.lr = 0;
    bg_train_result_t r;
    assert_int_equal(bg_train_run(&cfg, &r, end), BG_OK);
    bg_train_result_free(&r);
    assert_memory_equal(start, end, sizeof(float) * (size_t)n);
    free(start);
    free(end);
}

static void test_rejects_bad_config(void **state) {
    fixture_t *f = *state;
    bg_train_config_t cfg = config(f);
    bg_train_result_t r;
    cfg.batch = 0;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "--batch must be >= 1, got 0"));
    cfg.batch = -5;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "--batch must be >= 1, got -5"));
    cfg = config(f);
    cfg.epochs = 0;
    cfg.steps = 0;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "nothing to do: --epochs 0 and no --steps"));
    /* Copies of the fixture's sets with one field changed. */
    cfg = config(f);
    bg_dataset_t empty = *f->test;
    empty.count = 0;
    cfg.test = &empty;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "the training or test set is empty"));
    cfg = config(f);
    bg_dataset_t wider = *f->train;
    wider.classes = 5;
    cfg.train = &wider;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INVALID);
    assert_non_null(
        strstr(bg_error_message(), "the data has 5 classes but the model outputs only 4"));
    /* Samples of another shape than the model's input: refused before the
     * first stage reads past them (until 2026-12-06 a smaller one was read
     * past its end), also for an evaluation (--steps 0). */
    bg_dataset_t smaller = *f->train;
    smaller.shape.h = smaller.shape.w = 10;
    cfg = config(f);
    cfg.train = &smaller;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(),
                        "the training set's samples are 1x10x10, the model's input 1x12x12");
    bg_dataset_t deeper = *f->test;
    deeper.shape.c = 3;
    cfg = config(f);
    cfg.test = &deeper;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(),
                        "the test set's samples are 3x12x12, the model's input 1x12x12");
    cfg.evaluate_only = 1;
    cfg.train = NULL;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INVALID);
    assert_string_equal(bg_error_message(),
                        "the test set's samples are 3x12x12, the model's input 1x12x12");
}

/* A diverging run stops with a numeric error naming the step. */
static void test_divergence_reported(void **state) {
    fixture_t *f = *state;
    bg_train_config_t cfg = config(f);
    cfg.optimizer.kind = BG_OPTIMIZER_SGD;
    cfg.optimizer.sgd.lr = 1e30;
    bg_train_result_t r;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_NUMERIC);
    assert_non_null(strstr(bg_error_message(), "step "));
    assert_non_null(strstr(bg_error_message(), "no stage took the step"));
    assert_non_null(strstr(bg_error_message(), "stage "));
    /* Skipping goes on past such steps, up to the limit. */
    cfg.nan_skip = 1;
    cfg.nan_limit = 2;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_NUMERIC);
    assert_non_null(strstr(bg_error_message(), "3 steps skipped"));
    assert_non_null(strstr(bg_error_message(), "--nan-limit 2"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learns_synthetic),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_no_memory_for_the_batches),
        cmocka_unit_test(test_steps_and_partial_batch),
        cmocka_unit_test(test_initial_params_used),
        cmocka_unit_test(test_rejects_bad_config),
        cmocka_unit_test(test_divergence_reported),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
