#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/backend_cpu.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bg_status_t bg_train_evaluate(bg_stage_t *stage, int64_t batch, const bg_dataset_t *data,
                              double *loss, double *accuracy) {
    bg_status_t st = BG_OK;
    int64_t numel = bg_shape_numel(data->shape);
    float *images = malloc(sizeof(float) * (size_t)(batch * numel));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)batch);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)batch);
    BG_ALLOC_CHECK_GOTO(images, st, done);
    BG_ALLOC_CHECK_GOTO(labels, st, done);
    BG_ALLOC_CHECK_GOTO(order, st, done);
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t start = 0; start < data->count; start += batch) {
        int64_t n = data->count - start < batch ? data->count - start : batch;
        for (int64_t i = 0; i < n; i++) order[i] = start + i;
        bg_dataset_gather(data, order, n, images, labels);
        bg_stage_loss_t part;
        BG_CHECK_GOTO(bg_stage_load_batch(stage, n, images, labels), st, done);
        BG_CHECK_GOTO(bg_stage_forward(stage, n, &part), st, done);
        loss_sum += part.loss_sum;
        correct += part.correct;
    }
    *loss = loss_sum / (double)data->count;
    *accuracy = (double)correct / (double)data->count;
done:
    free(images);
    free(labels);
    free(order);
    return st;
}

static bg_status_t check_config(const bg_train_config_t *cfg) {
    if (cfg->batch < 1)
        return bg_error_set(BG_ERR_INVALID, "--batch must be >= 1, got %lld",
                            (long long)cfg->batch);
    if (cfg->epochs < 1 && cfg->steps < 1)
        return bg_error_set(BG_ERR_INVALID, "nothing to do: --epochs and --steps are both 0");
    if (cfg->train->count < 1 || cfg->test->count < 1)
        return bg_error_set(BG_ERR_INVALID, "the training or test set is empty");
    if (cfg->train->classes > cfg->spec->classes)
        return bg_error_set(BG_ERR_INVALID,
                            "the data has %lld classes but the model outputs only %lld",
                            (long long)cfg->train->classes, (long long)cfg->spec->classes);
    return BG_OK;
}

bg_status_t bg_train_run(const bg_train_config_t *cfg, bg_train_result_t *result,
                         float *final_params) {
    BG_CHECK(check_config(cfg));
    const bg_dataset_t *train = cfg->train;
    const int64_t batch = cfg->batch;
    const int64_t numel = bg_shape_numel(train->shape);
    const int64_t per_epoch = (train->count + batch - 1) / batch;
    int epochs = cfg->epochs > 0 ? cfg->epochs : (int)((cfg->steps + per_epoch - 1) / per_epoch);
    int64_t total = (int64_t)epochs * per_epoch;
    if (cfg->steps > 0 && cfg->steps < total) total = cfg->steps;
    epochs = (int)((total + per_epoch - 1) / per_epoch);

    bg_status_t st = BG_OK;
    bg_backend_t *be = NULL;
    bg_stage_t *stage = NULL;
    float *images = malloc(sizeof(float) * (size_t)(batch * numel));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)batch);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)train->count);
    BG_ALLOC_CHECK_GOTO(images, st, done);
    BG_ALLOC_CHECK_GOTO(labels, st, done);
    BG_ALLOC_CHECK_GOTO(order, st, done);

    bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
    BG_CHECK_GOTO(bg_backend_cpu_create(&cpu, &be), st, done);
    bg_stage_config_t sc = BG_STAGE_CONFIG_INIT;
    sc.spec = cfg->spec;
    sc.first_layer = 0;
    sc.last_layer = cfg->spec->num_layers;
    sc.backend = be;
    sc.max_batch = batch;
    sc.seed = cfg->seed;
    sc.optimizer = cfg->optimizer;
    BG_CHECK_GOTO(bg_stage_create(&sc, &stage), st, done);
    if (cfg->initial_params != NULL)
        BG_CHECK_GOTO(bg_stage_upload_params(stage, cfg->initial_params), st, done);

    /* Shuffling has its own stream, apart from the per-layer init streams. */
    bg_rng_t shuffle;
    bg_rng_seed(&shuffle, cfg->seed, UINT64_C(0x5348554646));
    int64_t step = 0;
    double start = now_seconds();
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    for (int epoch = 1; epoch <= epochs && step < total; epoch++) {
        bg_dataset_shuffle(train->count, order, &shuffle);
        epoch_loss = 0;
        epoch_steps = 0;
        for (int64_t at = 0; at < train->count && step < total; at += batch) {
            int64_t n = train->count - at < batch ? train->count - at : batch;
            bg_dataset_gather(train, order + at, n, images, labels);
            bg_stage_loss_t loss;
            BG_CHECK_GOTO(bg_stage_load_batch(stage, n, images, labels), st, done);
            BG_CHECK_GOTO(bg_stage_zero_grads(stage), st, done);
            BG_CHECK_GOTO(bg_stage_forward(stage, n, &loss), st, done);
            BG_CHECK_GOTO(bg_stage_backward(stage, n, 1.0 / (double)n), st, done);
            BG_CHECK_GOTO(bg_stage_step(stage), st, done);
            double mean = loss.loss_sum / (double)n;
            if (!isfinite(mean)) {
                st = bg_error_set(BG_ERR_NUMERIC, "step %lld (epoch %d): loss is %g",
                                  (long long)step + 1, epoch, mean);
                goto done;
            }
            epoch_loss += mean;
            epoch_steps++;
            step++;
            if (cfg->progress != NULL) {
                double elapsed = now_seconds() - start;
                bg_train_progress_t p = {
                    .epoch = epoch,
                    .epochs = epochs,
                    .step = step,
                    .total_steps = total,
                    .loss = epoch_loss / (double)epoch_steps,
                    .samples_per_s = elapsed > 0 ? (double)(step * batch) / elapsed : 0,
                    .eta_s = elapsed / (double)step * (double)(total - step),
                    .epoch_done = at + batch >= train->count || step == total,
                };
                cfg->progress(cfg->progress_ctx, &p);
            }
        }
    }
    double seconds = now_seconds() - start;
    bg_train_result_t r = {
        .steps = step,
        .loss = epoch_steps > 0 ? epoch_loss / (double)epoch_steps : 0,
        .train_seconds = seconds,
    };
    /* Count the samples actually seen: the last batch of an epoch may be short. */
    int64_t samples = 0;
    for (int64_t k = 0; k < step; k++) {
        int64_t at = (k % per_epoch) * batch;
        samples += train->count - at < batch ? train->count - at : batch;
    }
    r.samples_per_s = seconds > 0 ? (double)samples / seconds : 0;
    BG_CHECK_GOTO(bg_train_evaluate(stage, batch, cfg->test, &r.test_loss, &r.test_accuracy), st,
                  done);
    if (final_params != NULL)
        BG_CHECK_GOTO(bg_stage_download_params(stage, final_params), st, done);
    *result = r;
done:
    bg_stage_destroy(stage);
    bg_backend_destroy(be);
    free(images);
    free(labels);
    free(order);
    return st;
}
