/* Resuming a run: N steps, save, resume, N more steps gives the weights and
 * loss of 2N steps straight, bit for bit, on one and two stages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dataset.h"
#include "support/scratch.h"
#include "train.h"

static const char small_cnn[] = "input channels=1 height=8 width=8\n"
                                "conv2d filters=4 kernel=3 activation=relu\n"
                                "flatten\n"
                                "dense units=16 activation=relu\n"
                                "dense units=4\n"
                                "softmax_cross_entropy\n";

typedef struct fixture {
    bg_model_spec_t *spec;
    bg_dataset_t *train, *test;
    char dir[64];
} fixture_t;

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_int_equal(bg_model_spec_parse("small", small_cnn, strlen(small_cnn), &f->spec), BG_OK);
    /* 100 samples in batches of 16: 7 steps an epoch, the last one short. */
    assert_int_equal(bg_dataset_synthetic(f->spec->input, 4, 100, 3, 0, &f->train), BG_OK);
    assert_int_equal(bg_dataset_synthetic(f->spec->input, 4, 40, 3, 1, &f->test), BG_OK);
    assert_int_equal(bg_test_scratch_make(f->dir, sizeof f->dir, "resume"), 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    assert_int_equal(bg_test_scratch_remove(f->dir), 0);
    bg_dataset_destroy(f->train);
    bg_dataset_destroy(f->test);
    bg_model_spec_destroy(f->spec);
    free(f);
    return 0;
}

static bg_train_config_t config(const fixture_t *f, bg_device_list_t *devices, int stages) {
    bg_train_config_t cfg = BG_TRAIN_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.train = f->train;
    cfg.test = f->test;
    cfg.batch = 16;
    cfg.epochs = 100;
    cfg.seed = 21;
    char text[16];
    snprintf(text, sizeof text, "cpu:%d", stages);
    assert_int_equal(bg_device_list_parse(text, 2, devices), BG_OK);
    cfg.devices = devices;
    cfg.microbatches = stages == 1 ? 1 : 4;
    return cfg;
}

/* Trains to `steps`, optionally resuming from `from`, saving to `to`. */
static void run(const fixture_t *f, int stages, int64_t steps, const char *from, const char *to,
                float *params, bg_train_result_t *r) {
    bg_device_list_t devices;
    bg_train_config_t cfg = config(f, &devices, stages);
    cfg.steps = steps;
    cfg.save_path = to;
    bg_train_state_t state = {0};
    if (from != NULL) {
        bg_status_t st = bg_train_state_load(from, f->spec, &cfg.optimizer, &state);
        if (st != BG_OK) fail_msg("%s", bg_error_message());
        cfg.resume = &state;
    }
    bg_status_t st = bg_train_run(&cfg, r, params);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    bg_train_result_free(r);
    bg_train_state_free(&state);
}

static void check_resume(fixture_t *f, int stages, int64_t n) {
    const int64_t count = f->spec->total_params;
    float *straight = malloc(sizeof(float) * (size_t)count);
    float *resumed = malloc(sizeof(float) * (size_t)count);
    char half[128], end[128];
    snprintf(half, sizeof half, "%s/half-%d.safetensors", f->dir, stages);
    snprintf(end, sizeof end, "%s/end-%d.safetensors", f->dir, stages);
    bg_train_result_t a, b, c;
    run(f, stages, 2 * n, NULL, NULL, straight, &a);
    run(f, stages, n, NULL, half, NULL, &b);
    assert_int_equal(b.saved_step, n);
    run(f, stages, 2 * n, half, end, resumed, &c);
    assert_int_equal(c.steps, 2 * n);
    assert_memory_equal(straight, resumed, sizeof(float) * (size_t)count);
    assert_true(a.loss == c.loss || n < 7); /* same last epoch when it lies after the resume */
    assert_true(a.test_loss == c.test_loss);
    free(straight);
    free(resumed);
}

static void test_resume_one_stage(void **state) {
    check_resume(*state, 1, 3);  /* inside the first epoch */
    check_resume(*state, 1, 10); /* past an epoch boundary, mid-epoch */
    check_resume(*state, 1, 7);  /* exactly at an epoch boundary */
}

static void test_resume_two_stages(void **state) {
    check_resume(*state, 2, 5);
    check_resume(*state, 2, 9);
}

/* The weights of a training state load on their own (--load), and a
 * weights-only or foreign-model file is refused for --resume. */
static void test_files(void **state) {
    fixture_t *f = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/state.safetensors", f->dir);
    bg_train_result_t r;
    float *params = malloc(sizeof(float) * (size_t)f->spec->total_params);
    float *loaded = malloc(sizeof(float) * (size_t)f->spec->total_params);
    run(f, 1, 2, NULL, path, params, &r);
    assert_int_equal(bg_checkpoint_load(path, f->spec, loaded, NULL), BG_OK);
    assert_memory_equal(params, loaded, sizeof(float) * (size_t)f->spec->total_params);

    char weights[128];
    snprintf(weights, sizeof weights, "%s/weights.safetensors", f->dir);
    assert_int_equal(bg_checkpoint_save(weights, f->spec, params, 2), BG_OK);
    bg_optimizer_config_t adam = BG_OPTIMIZER_CONFIG_INIT, sgd = BG_OPTIMIZER_CONFIG_INIT;
    sgd.kind = BG_OPTIMIZER_SGD;
    bg_train_state_t st = {0};
    assert_int_equal(bg_train_state_load(weights, f->spec, &adam, &st), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "use --load"));
    assert_int_equal(bg_train_state_load(path, f->spec, &sgd, &st), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "optimizer adam"));

    static const char other[] = "input channels=1 height=8 width=8\nflatten\ndense units=4\n"
                                "softmax_cross_entropy\n";
    bg_model_spec_t *spec2;
    assert_int_equal(bg_model_spec_parse("other", other, strlen(other), &spec2), BG_OK);
    assert_int_equal(bg_train_state_load(path, spec2, &adam, &st), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "another model"));
    bg_model_spec_destroy(spec2);
    free(params);
    free(loaded);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_one_stage),
        cmocka_unit_test(test_resume_two_stages),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
