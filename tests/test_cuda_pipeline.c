/* The pipeline on one GPU shared by 2 and 4 stages (cuda:0x2, cuda:0x4)
 * against one CPU device: the weights after 3 Adam steps agree within 1e-4
 * relative. Skips (exit 77) without a CUDA build or a GPU; run on the GPU
 * machine by bench/gpu-check.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/backend_cuda.h"
#include "dataset.h"
#include "pipeline.h"
#include "support/models.h"

static const char origin_cnn[] = BG_TEST_ORIGIN_CNN;

enum { BATCH = 64, STEPS = 3 };

static float *train(const bg_model_spec_t *spec, const bg_dataset_t *data, const char *devices_text,
                    int m) {
    bg_device_list_t devices;
    assert_int_equal(bg_device_list_parse(devices_text, 1, &devices), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.devices = &devices;
    cfg.microbatches = m;
    cfg.batch = BATCH;
    bg_pipeline_t *p = NULL;
    if (bg_pipeline_create(&cfg, &p) != BG_OK) fail_msg("%s: %s", devices_text, bg_error_message());
    const int64_t numel = bg_shape_numel(spec->input);
    for (int k = 0; k < STEPS; k++) {
        bg_pipeline_result_t r;
        if (bg_pipeline_train_step(p, data->images + k * BATCH * numel, data->labels + k * BATCH,
                                   BATCH, &r) != BG_OK)
            fail_msg("%s: %s", devices_text, bg_error_message());
    }
    float *params = malloc(sizeof(float) * (size_t)spec->total_params);
    assert_int_equal(bg_pipeline_download_params(p, params), BG_OK);
    bg_pipeline_destroy(p);
    return params;
}

static void test_shared_gpu_matches_cpu(void **state) {
    (void)state;
    bg_model_spec_t *spec;
    assert_int_equal(bg_model_spec_parse("origin", origin_cnn, strlen(origin_cnn), &spec), BG_OK);
    bg_dataset_t *data;
    assert_int_equal(bg_dataset_synthetic(spec->input, 10, STEPS * BATCH, 5, 0, &data), BG_OK);
    float *want = train(spec, data, "cpu", 1);
    static const char *const placements[] = {"cuda:0", "cuda:0x2", "cuda:0x4"};
    for (int i = 0; i < 3; i++) {
        float *got = train(spec, data, placements[i], 4);
        double diff = 0, scale = 0;
        for (int64_t k = 0; k < spec->total_params; k++) {
            diff = fmax(diff, fabs((double)got[k] - want[k]));
            scale = fmax(scale, fabs((double)want[k]));
        }
        printf("%s, 1f1b, M=4: largest difference %.3g of largest weight %.3g (%.3g relative)\n",
               placements[i], diff, scale, diff / scale);
        if (!(diff <= 1e-4 * scale)) fail_msg("%s: relative error %g", placements[i], diff / scale);
        free(got);
    }
    free(want);
    bg_dataset_destroy(data);
    bg_model_spec_destroy(spec);
}

int main(void) {
    if (!bg_cuda_built() || bg_cuda_device_count() == 0) {
        printf("test_cuda_pipeline: skipped: %s\n", bg_cuda_built()
                                                        ? "CUDA sees no GPU on this machine"
                                                        : "no CUDA backend in this build");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shared_gpu_matches_cpu)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
