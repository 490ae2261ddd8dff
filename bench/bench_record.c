/* What recording a timeline costs: training steps of a pipeline with and
 * without bg_pipeline_record, in alternating blocks so that machine noise
 * hits both alike. Prints the mean step time of each and the overhead.
 *
 *   bench_record [MODEL] [--devices cpu:N] [--microbatches M] [--blocks N]
 *
 * Not a test: the figures go in docs/performance.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "dataset.h"
#include "pipeline.h"
#include "monotonic.h"

enum { BATCH = 64, STEPS_PER_BLOCK = 40 };

static double run_block(bg_pipeline_t *p, const bg_dataset_t *data, const float *images,
                        int64_t numel) {
    double start = bg_monotonic_seconds();
    for (int k = 0; k < STEPS_PER_BLOCK; k++) {
        bg_pipeline_result_t r;
        int64_t at = (int64_t)(k % (data->count / BATCH)) * BATCH;
        if (bg_pipeline_train_step(p, images + at * numel, data->labels + at, BATCH, &r) != BG_OK) {
            /* A stall's flight recorder is the message's detail. */
            fprintf(stderr, "bench_record: %s\n%s%s", bg_error_message(), bg_error_detail(),
                    bg_error_detail()[0] != '\0' ? "\n" : "");
            exit(1);
        }
    }
    return (bg_monotonic_seconds() - start) / STEPS_PER_BLOCK;
}

int main(int argc, char **argv) {
    const char *path = "examples/fashion_cnn.model", *devices_text = "cpu:2";
    int m = 8, blocks = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc)
            devices_text = argv[++i];
        else if (strcmp(argv[i], "--microbatches") == 0 && i + 1 < argc)
            m = atoi(argv[++i]);
        else if (strcmp(argv[i], "--blocks") == 0 && i + 1 < argc)
            blocks = atoi(argv[++i]);
        else if (argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_record [MODEL] [--devices cpu:N] [--microbatches M] "
                            "[--blocks N]\n");
            return 2;
        }
    }
    bg_model_spec_t *spec = NULL;
    bg_dataset_t *data = NULL;
    bg_device_list_t devices;
    bg_pipeline_t *p = NULL;
    bg_timeline_t *tl = NULL;
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    if (bg_model_spec_load(path, &spec) != BG_OK ||
        bg_dataset_synthetic(spec->input, spec->classes, 8 * BATCH, 7, 0, &data) != BG_OK ||
        bg_device_list_parse(devices_text, 2, &devices) != BG_OK) {
        fprintf(stderr, "bench_record: %s\n", bg_error_message());
        return 2;
    }
    float *images = bg_dataset_all_images(data);
    if (images == NULL) {
        fprintf(stderr, "bench_record: out of memory\n");
        return 1;
    }
    cfg.spec = spec;
    cfg.devices = &devices;
    cfg.microbatches = m;
    cfg.batch = BATCH;
    if (bg_pipeline_create(&cfg, &p) != BG_OK || bg_pipeline_timeline_create(p, &tl) != BG_OK) {
        fprintf(stderr, "bench_record: %s\n", bg_error_message());
        return 1;
    }
    const int64_t numel = bg_shape_numel(spec->input);
    run_block(p, data, images, numel); /* warm-up */
    double plain = 0, recorded = 0;
    for (int b = 0; b < blocks; b++) {
        bg_pipeline_record(p, NULL);
        plain += run_block(p, data, images, numel);
        bg_timeline_clear(tl);
        bg_pipeline_record(p, tl);
        recorded += run_block(p, data, images, numel);
    }
    bg_pipeline_record(p, NULL);
    plain /= blocks;
    recorded /= blocks;
    printf("%s on %s, 1f1b, M=%d, batch %d: %d blocks of %d steps each way\n", path, devices_text,
           m, BATCH, blocks, STEPS_PER_BLOCK);
    printf("step without recording %.3f ms, with recording %.3f ms: overhead %+.2f%% "
           "(%d events per step)\n",
           plain * 1e3, recorded * 1e3, 100 * (recorded - plain) / plain,
           tl->count / (tl->steps > 0 ? tl->steps : 1));
    bg_timeline_destroy(tl);
    bg_pipeline_destroy(p);
    free(images);
    bg_dataset_destroy(data);
    bg_model_spec_destroy(spec);
    return 0;
}
