/* Time of one training step (forward, backward, optimizer) of a model on one
 * CPU device with one thread, on synthetic data. Prints ms per step, the
 * spread over repetitions, and GFLOP/s from the model's FLOP count.
 *
 *   bench_step [MODEL] [--batch B] [--steps N] [--optimizer adam|sgd]
 *
 * Not a test: run it on a quiet machine and compare figures, never assert on
 * them. bench/step_time.sh runs it beside PyTorch and prints the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/backend_cpu.h"
#include "dataset.h"
#include "model_spec.h"
#include "stage.h"
#include "bench_timing.h"

int main(int argc, char **argv) {
    const char *path = "examples/fashion_cnn.model";
    int64_t batch = 64, steps = 200;
    bg_optimizer_config_t opt = BG_OPTIMIZER_CONFIG_INIT;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = atoll(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoll(argv[++i]);
        else if (strcmp(argv[i], "--optimizer") == 0 && i + 1 < argc) {
            if (bg_optimizer_kind_parse(argv[++i], &opt.kind) != BG_OK) {
                fprintf(stderr, "bench_step: %s\n", bg_error_message());
                return 2;
            }
        } else if (argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_step [MODEL] [--batch B] [--steps N] "
                            "[--optimizer adam|sgd]\n");
            return 2;
        }
    }
    if (batch < 1 || steps < 1) {
        fprintf(stderr, "bench_step: --batch and --steps must be >= 1\n");
        return 2;
    }
    bg_model_spec_t *spec = NULL;
    bg_dataset_t *data = NULL;
    bg_backend_t *be = NULL;
    bg_stage_t *stage = NULL;
    double *times = calloc((size_t)steps, sizeof *times);
    bg_status_t st = bg_model_spec_load(path, &spec);
    if (st == BG_OK) st = bg_dataset_synthetic(spec->input, spec->classes, batch, 7, 0, &data);
    bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
    if (st == BG_OK) st = bg_backend_cpu_create(&cpu, &be);
    bg_stage_config_t sc = BG_STAGE_CONFIG_INIT;
    if (st == BG_OK) {
        sc.spec = spec;
        sc.last_layer = spec->num_layers;
        sc.backend = be;
        sc.max_batch = batch;
        sc.optimizer = opt;
        st = bg_stage_create(&sc, &stage);
    }
    float *images = st == BG_OK ? bg_dataset_all_images(data) : NULL;
    if (st == BG_OK && images == NULL) st = bg_error_set(BG_ERR_NOMEM, "out of memory");
    if (st == BG_OK) st = bg_stage_load_batch(stage, batch, images, data->labels);
    const int64_t warmup = 20;
    for (int64_t k = 0; st == BG_OK && k < warmup + steps; k++) {
        double t0 = bg_monotonic_seconds();
        st = bg_stage_zero_grads(stage);
        if (st == BG_OK) st = bg_stage_forward(stage, batch, NULL);
        if (st == BG_OK) st = bg_stage_backward(stage, batch, 1.0 / (double)batch);
        if (st == BG_OK) st = bg_stage_step(stage);
        if (k >= warmup) times[k - warmup] = bg_monotonic_seconds() - t0;
    }
    int code = 0;
    if (st != BG_OK) {
        /* A stall's flight recorder is the message's detail. */
        fprintf(stderr, "bench_step: %s\n%s%s", bg_error_message(), bg_error_detail(),
                bg_error_detail()[0] != '\0' ? "\n" : "");
        code = 1;
    } else {
        qsort(times, (size_t)steps, sizeof *times, compare_doubles);
        double median = times[steps / 2];
        /* forward + backward-data + backward-weights is about 3x the forward */
        double flops = 3.0 * (double)spec->total_flops * (double)batch;
        printf("model %s, batch %lld, %s, 1 thread, %lld timed steps after %lld warm-up\n", path,
               (long long)batch, bg_optimizer_kind_name(opt.kind), (long long)steps,
               (long long)warmup);
        printf("brigade step: median %.3f ms (min %.3f, p90 %.3f), %.1f GFLOP/s "
               "(%.0f MFLOP/step)\n",
               median * 1e3, times[0] * 1e3, times[steps * 9 / 10] * 1e3, flops / median * 1e-9,
               flops * 1e-6);
        printf("brigade_step_ms %.4f\n", median * 1e3);
    }
    bg_stage_destroy(stage);
    bg_backend_destroy(be);
    bg_dataset_destroy(data);
    free(images);
    bg_model_spec_destroy(spec);
    free(times);
    return code;
}
