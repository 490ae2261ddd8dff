/* Every allocation of a pipeline's setup made to fail in turn: each ends in a
 * clean BG_ERR_NOMEM (or another error naming what failed), never a crash;
 * run under ASan, the leak checker sees no leak. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dataset.h"
#include "pipeline.h"

static const char small_cnn[] = "input channels=1 height=8 width=8\n"
                                "conv2d filters=4 kernel=3 activation=relu\n"
                                "maxpool size=2\n"
                                "flatten\n"
                                "dense units=8 activation=relu\n"
                                "dense units=4\n"
                                "softmax_cross_entropy\n";

/* The small CNN, 16 samples of synthetic data for it, and the devices
 * the pipelines run on. */
typedef struct small {
    bg_model_spec_t *spec;
    bg_dataset_t *data;
    float *images;
    bg_device_list_t devices;
} small_t;

static void small_create(small_t *f, const char *devices_text) {
    assert_int_equal(bg_model_spec_parse("small", small_cnn, strlen(small_cnn), &f->spec), BG_OK);
    assert_int_equal(bg_dataset_synthetic(f->spec->input, 4, 16, 1, 0, &f->data), BG_OK);
    f->images = bg_dataset_all_images(f->data);
    assert_non_null(f->images);
    assert_int_equal(bg_device_list_parse(devices_text, 2, &f->devices), BG_OK);
}

static void small_destroy(small_t *f) {
    bg_dataset_destroy(f->data);
    free(f->images);
    bg_model_spec_destroy(f->spec);
}

/* A pipeline of f's model on its devices, a batch of 16 in m micro-batches. */
static bg_pipeline_config_t small_config(small_t *f, int m) {
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = f->spec;
    cfg.devices = &f->devices;
    cfg.microbatches = m;
    cfg.batch = 16;
    return cfg;
}

/* Walks n = 0, 1, ... until setup succeeds with the n-th allocation failing
 * (it made fewer than n). Returns how many allocations setup makes; each
 * device's one allocation for its stages fails once on the way, with a
 * message naming the device and the stages' shares, which *named counts. */
static int walk(bg_schedule_kind_t kind, const char *devices_text, int m, int recompute,
                int *named) {
    small_t f;
    small_create(&f, devices_text);
    bg_pipeline_config_t cfg = small_config(&f, m);
    cfg.schedule = kind;
    cfg.recompute = recompute;
    float *images = f.images;
    const bg_dataset_t *data = f.data;
    int n = 0;
    for (;; n++) {
        bg_pipeline_t *p = NULL;
        bg_timeline_t *tl = NULL;
        bg_alloc_fail_after(n);
        bg_status_t st = bg_pipeline_create(&cfg, &p);
        if (st != BG_OK) assert_null(p); /* untouched on failure */
        if (st == BG_OK) st = bg_pipeline_timeline_create(p, &tl);
        if (st == BG_OK) st = bg_pipeline_record(p, tl);
        bg_alloc_fail_after(-1);
        if (st == BG_OK) {
            /* Setup is done: the pipeline works. */
            bg_pipeline_result_t r;
            assert_int_equal(bg_pipeline_train_step(p, images, data->labels, 16, &r), BG_OK);
            assert_true(tl->count > 0);
            bg_timeline_destroy(tl);
            bg_pipeline_destroy(p);
            break;
        }
        if (st != BG_ERR_NOMEM) fail_msg("n=%d: status %d: %s", n, st, bg_error_message());
        const char *message = bg_error_message();
        assert_true(strlen(message) > 0);
        const char *at = strstr(message, ": one allocation of ");
        if (at != NULL) {
            char device[8];
            snprintf(device, sizeof device, "cpu:%d", *named);
            assert_true(strncmp(message, device, strlen(device)) == 0);
            assert_non_null(strstr(at, " MiB) for its stages (layers "));
            assert_non_null(strstr(at, "), not its channel rings (allocated apart on CPUs): "));
            /* The backend's message, after it, does not name the device again. */
            if (strstr(at, device) != NULL) fail_msg("the device named twice: %s", message);
            ++*named;
        }
        bg_timeline_destroy(tl);
        bg_pipeline_destroy(p);
    }
    small_destroy(&f);
    return n;
}

static void test_every_allocation_fails_cleanly(void **state) {
    (void)state;
    int named[3] = {0, 0, 0};
    int a = walk(BG_SCHEDULE_1F1B, "cpu:2", 4, 0, &named[0]);
    int b = walk(BG_SCHEDULE_ZB_H1, "cpu:3", 4, 1, &named[1]);
    int c = walk(BG_SCHEDULE_INTERLEAVED, "cpu:2", 4, 0, &named[2]);
    /* Each device's allocation failed once, in device order. */
    assert_int_equal(named[0], 2);
    assert_int_equal(named[1], 3);
    assert_int_equal(named[2], 2);
    print_message("allocations walked: %d (1f1b), %d (zb-h1, recompute), %d (interleaved)\n", a, b,
                  c);
    /* A pipeline makes dozens of allocations; a walk of a handful would
     * mean the hook is not reached. */
    assert_true(a > 50 && b > 50 && c > 50);
}

/* bg_pipeline_record failing at each of its allocations in turn, then
 * called again without a failure: the retry records the step whole, as a
 * first call that did not fail (until 2026-12-06 it found the buffers half
 * made, took them, and the step crashed or recorded no event). */
static void test_record_after_a_failure(void **state) {
    (void)state;
    small_t f;
    small_create(&f, "cpu:2");
    const bg_pipeline_config_t cfg = small_config(&f, 4);
    int n = 0;
    for (;; n++) {
        bg_pipeline_t *p = NULL;
        bg_timeline_t *tl = NULL;
        assert_int_equal(bg_pipeline_create(&cfg, &p), BG_OK);
        assert_int_equal(bg_pipeline_timeline_create(p, &tl), BG_OK);
        bg_alloc_fail_after(n);
        const bg_status_t first = bg_pipeline_record(p, tl);
        bg_alloc_fail_after(-1);
        if (first != BG_OK) {
            assert_int_equal(first, BG_ERR_NOMEM);
            assert_int_equal(bg_pipeline_record(p, tl), BG_OK);
        }
        bg_pipeline_result_t r;
        assert_int_equal(bg_pipeline_train_step(p, f.images, f.data->labels, 16, &r), BG_OK);
        assert_int_equal(tl->steps, 1);
        /* Each device's 4 forwards, 4 backwards and optimizer step, at
         * least (waits are recorded where they happened). */
        assert_true(tl->count >= 2 * (4 + 4 + 1));
        bg_timeline_destroy(tl);
        bg_pipeline_destroy(p);
        if (first == BG_OK) break;
    }
    /* Two devices' buffers and the three lists they hang from. */
    assert_int_equal(n, 5);
    small_destroy(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_fails_cleanly),
        cmocka_unit_test(test_record_after_a_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
