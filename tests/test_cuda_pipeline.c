/* The pipeline on one GPU shared by 2 and 4 stages (cuda:0x2, cuda:0x4)
 * against one CPU device: the weights after 3 Adam steps agree within 1e-4
 * relative, on every schedule; and a NaN is found and reported. Adam runs
 * with eps = 1e-3 here (ADAM_EPS): at the default 1e-8 its first step turns
 * a gradient summed to +1e-9 on one device and -1e-9 on the other into
 * weights 2 * lr apart, which compares the summation order, not the
 * pipeline (inputs moved by 1 ulp gave 3.6e-5 relative on the CPU alone).
 * The same for a model of tanh, sigmoid, gelu, layernorm and dropout, and
 * with the gradients clipped by their norm.
 * Skips (exit 77) without a CUDA build or a GPU; run on the GPU machine by
 * bench/gpu-check.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "channel.h"
#include "cost_model.h"
#include "cuda/backend_cuda.h"
#include "dataset.h"
#include "partition.h"
#include "pipeline.h"
#include "support/models.h"
#include "topology.h"

static const char origin_cnn[] = BG_TEST_ORIGIN_CNN;

enum { BATCH = 64, STEPS = 3 };
static const double ADAM_EPS = 1e-3;

/* A placement and schedule to train on the GPU. */
typedef struct run {
    const char *devices;
    bg_schedule_kind_t schedule;
    int chunks, recompute;
    int nan_stage; /* the test hook's NaN into micro-batch 1's output, or -1 */
    int staged;    /* channels copy through NUMA-bound pinned host memory, as
                    * between GPUs without peer access */
    double clip;   /* --clip-grad-norm, or 0 */
} run_t;

static bg_topology_t *live; /* this machine's, for the staging buffers */

/* The pipeline of `run`, or NULL with the reason printed. */
static bg_pipeline_t *open_pipeline(const bg_model_spec_t *spec, const run_t *run, int m,
                                    bg_device_list_t *devices) {
    assert_int_equal(bg_device_list_parse(run->devices, 1, devices), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    /* A stuck placement reports what each stage was doing well within the
       GPU check's time for this test (bench/gpu-check.sh). */
    cfg.stall_timeout_s = 20;
    cfg.spec = spec;
    cfg.devices = devices;
    cfg.schedule = run->schedule;
    cfg.chunks = run->chunks;
    cfg.recompute = run->recompute;
    cfg.microbatches = m;
    cfg.batch = BATCH;
    cfg.optimizer.adam.eps = ADAM_EPS;
    cfg.nan_stage = run->nan_stage;
    cfg.nan_microbatch = 1;
    cfg.stage_through_host = run->staged;
    cfg.clip_grad_norm = run->clip;
    cfg.topology = live;
    bg_pipeline_t *p = NULL;
    if (bg_pipeline_create(&cfg, &p) != BG_OK) {
        printf("%s, %s: %s\n", run->devices, bg_schedule_kind_name(run->schedule),
               bg_error_message());
        return NULL;
    }
    return p;
}

static bg_pipeline_t *make(const bg_model_spec_t *spec, const run_t *run, int m,
                           bg_device_list_t *devices) {
    bg_pipeline_t *p = open_pipeline(spec, run, m, devices);
    if (p == NULL) fail_msg("%s: %s", run->devices, bg_error_message());
    return p;
}

/* The weights after STEPS steps of `run`, or NULL with the reason printed
 * (so that one failing placement does not hide the others'). */
static float *train(const bg_model_spec_t *spec, const bg_dataset_t *data, const run_t *run,
                    int m) {
    bg_device_list_t devices;
    bg_pipeline_t *p = open_pipeline(spec, run, m, &devices);
    if (p == NULL) return NULL;
    const int64_t numel = bg_shape_numel(spec->input);
    float *params = malloc(sizeof(float) * (size_t)spec->total_params);
    float *images = bg_dataset_all_images(data);
    assert_non_null(params);
    assert_non_null(images);
    int ok = 1;
    for (int k = 0; k < STEPS && ok; k++) {
        bg_pipeline_result_t r;
        if (bg_pipeline_train_step(p, images + k * BATCH * numel, data->labels + k * BATCH, BATCH,
                                   &r) != BG_OK) {
            printf("%s, %s: step %d: %s\n", run->devices, bg_schedule_kind_name(run->schedule), k,
                   bg_error_message());
            ok = 0;
        } else if (r.skipped) {
            printf("%s, %s: step %d skipped: %s\n", run->devices,
                   bg_schedule_kind_name(run->schedule), k, r.nan_report);
            ok = 0;
        }
    }
    if (ok && bg_pipeline_download_params(p, params) != BG_OK) {
        printf("%s: downloading the weights: %s\n", run->devices, bg_error_message());
        ok = 0;
    }
    bg_pipeline_destroy(p);
    free(images);
    if (ok) return params;
    free(params);
    return NULL;
}

/* Trains the model `text` on one CPU device (clipping as runs[0] does) and
 * then on each of `runs` at M = 4 from the same data, and returns how many of them failed or differ
 * from the CPU's weights by more than 1e-4 of the largest, each printed.
 * The same M: gradient accumulation in the same order, so what differs is
 * the GPU's arithmetic (M = 1 against M = 4 differs by 4e-5 relative on the
 * CPU alone). Every placement runs even after one fails. */
static size_t placements_differing(const char *text, uint64_t data_seed, const run_t *runs,
                                   size_t count) {
    bg_model_spec_t *spec;
    assert_int_equal(bg_model_spec_parse("model", text, strlen(text), &spec), BG_OK);
    bg_dataset_t *data;
    assert_int_equal(bg_dataset_synthetic(spec->input, 10, STEPS * BATCH, data_seed, 0, &data),
                     BG_OK);
    const run_t cpu = {"cpu", BG_SCHEDULE_1F1B, 1, 0, -1, 0, count > 0 ? runs[0].clip : 0};
    float *want = train(spec, data, &cpu, 4);
    assert_non_null(want);
    size_t failed = 0;
    for (size_t i = 0; i < count; i++) {
        const run_t *run = &runs[i];
        float *got = train(spec, data, run, 4);
        if (got == NULL) {
            failed++;
            continue;
        }
        double diff = 0, scale = 0;
        for (int64_t k = 0; k < spec->total_params; k++) {
            diff = fmax(diff, fabs((double)got[k] - want[k]));
            scale = fmax(scale, fabs((double)want[k]));
        }
        printf("%s, %s%s%s%s, M=4: largest difference %.3g of largest weight %.3g (%.3g "
               "relative)\n",
               run->devices, bg_schedule_kind_name(run->schedule),
               run->chunks > 1 ? " x2 chunks" : "", run->recompute ? ", recompute" : "",
               run->staged ? ", through host memory" : "", diff, scale, diff / scale);
        if (!(diff <= 1e-4 * scale)) {
            printf("    that is over 1e-4 relative\n");
            failed++;
        }
        free(got);
    }
    free(want);
    bg_dataset_destroy(data);
    bg_model_spec_destroy(spec);
    return failed;
}

/* Fails the test unless every one of `runs` matches the CPU
 * (placements_differing). */
static void expect_placements_match(const char *text, uint64_t data_seed, const run_t *runs,
                                    size_t count) {
    const size_t failed = placements_differing(text, data_seed, runs, count);
    if (failed > 0) fail_msg("%zu of %zu placements failed or differ (above)", failed, count);
}

/* Every schedule, with and without recomputation, on one GPU shared by
 * one, two and four stages: each stage's sends are copied while it
 * computes on, so this is where a missing wait before overwriting a sent
 * buffer would show. */
static void test_shared_gpu_matches_cpu(void **state) {
    (void)state;
    static const run_t runs[] = {
        {"cuda:0", BG_SCHEDULE_1F1B, 1, 0, -1, 0, 0},
        {"cuda:0x2", BG_SCHEDULE_1F1B, 1, 0, -1, 0, 0},
        {"cuda:0x4", BG_SCHEDULE_1F1B, 1, 0, -1, 0, 0},
        {"cuda:0x4", BG_SCHEDULE_GPIPE, 1, 0, -1, 0, 0},
        {"cuda:0x4", BG_SCHEDULE_ZB_H1, 1, 0, -1, 0, 0},
        {"cuda:0x4", BG_SCHEDULE_1F1B, 1, 1, -1, 0, 0},
        {"cuda:0x2", BG_SCHEDULE_INTERLEAVED, 2, 0, -1, 0, 0},
        /* With recompute all forwards of a stage write one output buffer:
         * GPipe's forwards back to back would overwrite it under a copy
         * that has not read it yet, were the waits wrong. */
        {"cuda:0x4", BG_SCHEDULE_GPIPE, 1, 1, -1, 0, 0},
        /* Through host memory last: pinning memory that is already
         * allocated (cudaHostRegister) is what a sandboxed GPU machine
         * is likeliest to refuse. */
        {"cuda:0x2", BG_SCHEDULE_1F1B, 1, 0, -1, 1, 0},
        {"cuda:0x4", BG_SCHEDULE_GPIPE, 1, 0, -1, 1, 0},
        {"cuda:0x4", BG_SCHEDULE_GPIPE, 1, 1, -1, 1, 0},
        {"cuda:0x4", BG_SCHEDULE_ZB_H1, 1, 1, -1, 1, 0},
    };
    expect_placements_match(origin_cnn, 5, runs, sizeof runs / sizeof runs[0]);
}

/* `model` on one GPU, on four stages sharing it, and on four with zb-h1
 * and recompute, each within 1e-4 of one CPU device's weights. */
static void expect_shared_gpu_matches_cpu(const char *model) {
    static const run_t runs[] = {
        {"cuda:0", BG_SCHEDULE_1F1B, 1, 0, -1, 0, 0},
        {"cuda:0x4", BG_SCHEDULE_1F1B, 1, 0, -1, 0, 0},
        {"cuda:0x4", BG_SCHEDULE_ZB_H1, 1, 1, -1, 0, 0},
    };
    expect_placements_match(model, 6, runs, sizeof runs / sizeof runs[0]);
}

/* tanh, sigmoid, gelu and layernorm (whose kernels are not the CPU's bits:
 * CUDA's libm, and a row's sums by a block's tree) and dropout (whose mask
 * is, wherever the layer lands) on one GPU and on four stages sharing it,
 * with and without recompute, against one CPU device. */
static void test_new_layers_match_cpu(void **state) {
    (void)state;
    static const char model[] = "input channels=1 height=28 width=28\n"
                                "conv2d filters=8 kernel=3 activation=tanh\n"
                                "layernorm\n"
                                "maxpool size=2\n"
                                "dropout rate=0.25\n"
                                "flatten\n"
                                "dense units=64 activation=gelu\n"
                                "dropout\n"
                                "layernorm\n"
                                "dense units=32 activation=sigmoid\n"
                                "dense units=10\n"
                                "softmax_cross_entropy\n";
    expect_shared_gpu_matches_cpu(model);
}

/* Residual blocks (a convolution block, nested dense blocks) on one GPU
 * and on four stages sharing it (the planner's cuts, between blocks), with
 * and without recompute, against one CPU device. */
static void test_residual_blocks_match_cpu(void **state) {
    (void)state;
    static const char model[] = "input channels=1 height=28 width=28\n"
                                "conv2d filters=8 kernel=3 padding=same activation=relu\n"
                                "residual\n"
                                "conv2d filters=8 kernel=3 padding=same activation=relu\n"
                                "conv2d filters=8 kernel=3 padding=same\n"
                                "add\n"
                                "relu\n"
                                "maxpool size=2\n"
                                "flatten\n"
                                "dense units=64 activation=relu\n"
                                "residual\n"
                                "dense units=64 activation=gelu\n"
                                "residual\n"
                                "layernorm\n"
                                "dense units=64\n"
                                "add\n"
                                "add\n"
                                "dense units=10\n"
                                "softmax_cross_entropy\n";
    expect_shared_gpu_matches_cpu(model);
}

/* Clipping by the norm of all the stages' gradients (square_sum on each
 * GPU, one block's tree against the CPU's running sums) at a limit every
 * step reaches, on one GPU and four stages sharing it, against one CPU
 * device clipping alike. */
static void test_clipping_matches_cpu(void **state) {
    (void)state;
    static const run_t runs[] = {
        {"cuda:0", BG_SCHEDULE_1F1B, 1, 0, -1, 0, 0.05},
        {"cuda:0x4", BG_SCHEDULE_ZB_H1, 1, 0, -1, 0, 0.05},
        {"cuda:0x4", BG_SCHEDULE_GPIPE, 1, 1, -1, 0, 0.05},
    };
    expect_placements_match(origin_cnn, 7, runs, sizeof runs / sizeof runs[0]);
}

/* A NaN on a GPU stage is found by the checks marked on the device and
 * read at the optimizer step: the step is skipped and the report names
 * the stage and micro-batch. */
static void test_nan_on_gpu(void **state) {
    (void)state;
    bg_model_spec_t *spec;
    assert_int_equal(bg_model_spec_parse("origin", origin_cnn, strlen(origin_cnn), &spec), BG_OK);
    bg_dataset_t *data;
    assert_int_equal(bg_dataset_synthetic(spec->input, 10, BATCH, 5, 0, &data), BG_OK);
    const run_t run = {"cuda:0x2", BG_SCHEDULE_1F1B, 1, 0, 0, 0, 0};
    bg_device_list_t devices;
    bg_pipeline_t *p = make(spec, &run, 4, &devices);
    float *images = bg_dataset_all_images(data);
    assert_non_null(images);
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, images, data->labels, BATCH, &r), BG_OK);
    assert_int_equal(r.skipped, 1);
    if (strstr(r.nan_report, "stage 0, micro-batch 1, layer") == NULL)
        fail_msg("report: '%s'", r.nan_report);
    assert_int_equal(bg_pipeline_steps(p), 0);
    bg_pipeline_destroy(p);
    free(images);
    bg_dataset_destroy(data);
    bg_model_spec_destroy(spec);
}

/* The origin CNN and one synthetic batch of BATCH samples for it. */
typedef struct origin_batch {
    bg_model_spec_t *spec;
    bg_dataset_t *data;
    float *images;
} origin_batch_t;

static origin_batch_t origin_batch_open(void) {
    origin_batch_t b;
    assert_int_equal(bg_model_spec_parse("origin", origin_cnn, strlen(origin_cnn), &b.spec), BG_OK);
    assert_int_equal(bg_dataset_synthetic(b.spec->input, 10, BATCH, 5, 0, &b.data), BG_OK);
    b.images = bg_dataset_all_images(b.data);
    assert_non_null(b.images);
    return b;
}

static void origin_batch_close(origin_batch_t *b) {
    free(b->images);
    bg_dataset_destroy(b->data);
    bg_model_spec_destroy(b->spec);
}

/* What the next batch's gathering writes while a step runs. */
typedef struct scribble {
    float *images;
    int32_t *labels;
    int64_t numel;
} scribble_t;

static void scribble_next_batch(void *ctx) {
    const scribble_t *s = ctx;
    for (int64_t i = 0; i < BATCH * s->numel; i++) s->images[i] = NAN;
    for (int64_t i = 0; i < BATCH; i++) s->labels[i] = 10; /* out of range */
}

/* With its ends on a GPU the pipeline hands out two sets of pinned batch
 * buffers, and a set not yet read by a job is not handed out again (a
 * third request is refused). A step reads the set its batch was gathered
 * into while the other is written (bg_pipeline_train_step_meanwhile: here
 * with values no step may see) and trains as a step given the caller's own
 * arrays does; an evaluation given the caller's arrays in between copies
 * them into the free set, never into the one waiting for the next step. */
static void test_batch_sets_on_gpu(void **state) {
    (void)state;
    origin_batch_t b = origin_batch_open();
    const run_t run = {"cuda:0x2", BG_SCHEDULE_1F1B, 1, 0, -1, 0, 0};
    bg_device_list_t devices_a, devices_b;
    bg_pipeline_t *a = make(b.spec, &run, 2, &devices_a),
                  *plain = make(b.spec, &run, 2, &devices_b);
    const int64_t numel = bg_shape_numel(b.spec->input);
    float *images[2] = {b.images, b.images};
    int32_t *labels[2] = {b.data->labels, b.data->labels};
    for (int set = 0; set < 2; set++)
        assert_int_equal(bg_pipeline_batch_buffers(a, &images[set], &labels[set]), BG_OK);
    assert_ptr_not_equal(images[0], b.images);
    assert_ptr_not_equal(images[0], images[1]);
    assert_ptr_not_equal(labels[0], labels[1]);
    float *third_images = b.images;
    int32_t *third_labels = b.data->labels;
    assert_int_equal(bg_pipeline_batch_buffers(a, &third_images, &third_labels), BG_ERR_INVALID);
    for (int k = 0; k < 4; k++) {
        const int set = k % 2; /* handed out: the initial two, then each step's next */
        memcpy(images[set], b.images, sizeof(float) * (size_t)(BATCH * numel));
        memcpy(labels[set], b.data->labels, sizeof(int32_t) * BATCH);
        scribble_t next = {images[!set], labels[!set], numel};
        bg_pipeline_result_t ra, rb;
        assert_int_equal(bg_pipeline_train_step_meanwhile(a, images[set], labels[set], BATCH, &ra,
                                                          scribble_next_batch, &next),
                         BG_OK);
        assert_int_equal(bg_pipeline_train_step(plain, b.images, b.data->labels, BATCH, &rb),
                         BG_OK);
        assert_false(ra.skipped);
        /* (Each pipeline times cuDNN's algorithms for itself: they may
         * pick others, which round differently, and four steps carry that
         * on: within the 1e-4 of the pipelines' equivalence, as a step that
         * read the scribbled NaNs and labels could not be.) */
        assert_true(fabs(ra.loss_sum - rb.loss_sum) <= 1e-4 * fabs(rb.loss_sum));
        /* The set just read is free again, the other still handed out. */
        if (k == 1) {
            /* What the set waiting for the next step holds (the scribble)
             * is still there after the evaluation. */
            const size_t image_bytes = sizeof(float) * (size_t)(BATCH * numel),
                         label_bytes = sizeof(int32_t) * BATCH;
            float *kept_images = malloc(image_bytes);
            int32_t *kept_labels = malloc(label_bytes);
            assert_non_null(kept_images);
            assert_non_null(kept_labels);
            memcpy(kept_images, images[!set], image_bytes);
            memcpy(kept_labels, labels[!set], label_bytes);
            bg_pipeline_result_t re;
            assert_int_equal(bg_pipeline_evaluate(a, b.images, b.data->labels, BATCH, &re), BG_OK);
            assert_true(isfinite(re.loss_sum));
            assert_memory_equal(kept_images, images[!set], image_bytes);
            assert_memory_equal(kept_labels, labels[!set], label_bytes);
            free(kept_images);
            free(kept_labels);
        }
        float *again = b.images;
        int32_t *again_labels = b.data->labels;
        assert_int_equal(bg_pipeline_batch_buffers(a, &again, &again_labels), BG_OK);
        assert_ptr_equal(again, images[set]);
        assert_ptr_equal(again_labels, labels[set]);
    }
    bg_pipeline_destroy(a);
    bg_pipeline_destroy(plain);
    origin_batch_close(&b);
}

/* The convolution workspace limit reaches the backend: a stage's workspace
 * (what cuDNN's chosen algorithms need) stays within it, and a step runs,
 * at the default, at 1 MiB and at 0 (algorithms that need none). */
static void test_conv_workspace_limit_on_gpu(void **state) {
    (void)state;
    origin_batch_t b = origin_batch_open();
    const size_t limits[] = {BG_CUDA_CONV_WORKSPACE_LIMIT, (size_t)1 << 20, 0};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        bg_device_list_t devices;
        assert_int_equal(bg_device_list_parse("cuda:0", 1, &devices), BG_OK);
        bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
        cfg.spec = b.spec;
        cfg.devices = &devices;
        cfg.batch = BATCH;
        cfg.conv_workspace_limit = limits[k];
        bg_pipeline_t *p = NULL;
        if (bg_pipeline_create(&cfg, &p) != BG_OK)
            fail_msg("conv workspace limit %zu: %s", limits[k], bg_error_message());
        const size_t used = bg_pipeline_stage_info(p, 0).memory.workspace;
        printf("conv workspace limit %zu bytes: the stage holds %zu\n", limits[k], used);
        assert_true(used <= limits[k]);
        bg_pipeline_result_t r;
        assert_int_equal(bg_pipeline_train_step(p, b.images, b.data->labels, BATCH, &r), BG_OK);
        assert_int_equal(r.skipped, 0);
        bg_pipeline_destroy(p);
    }
    origin_batch_close(&b);
}

/* What a workspace of `bytes` adds in the arena: none is reserved at 0. */
static size_t workspace_padding(size_t bytes) { return bytes > 0 ? bg_arena_padding(bytes) : 0; }

/* The planner's memory of two stages sharing the GPU (cuda:0x2, the origin
 * CNN split at 4) against what they hold: the dense stage byte for byte,
 * the padding of the slots of its input channel, which lie in the GPU's
 * arena, included; the convolution's stage alike but for its workspace,
 * which the plan counts at the limit. */
static void test_memory_as_planned_on_gpu(void **state) {
    (void)state;
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("origin", origin_cnn, strlen(origin_cnn), &spec), BG_OK);
    bg_device_list_t devices;
    assert_int_equal(bg_device_list_parse("cuda:0x2", 1, &devices), BG_OK);
    const int split[] = {4};
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.devices = &devices;
    cfg.batch = 28; /* micro-batches of 7: 7 x 5,408 floats at the cut, 128 bytes short of 256s */
    cfg.microbatches = 4;
    cfg.split = split;
    bg_pipeline_t *pipe = NULL;
    if (bg_pipeline_create(&cfg, &pipe) != BG_OK) fail_msg("%s", bg_error_message());
    const bg_schedule_t *sched = bg_pipeline_schedule(pipe);
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = spec;
    cc.batch = cfg.batch;
    cc.microbatches = cfg.microbatches;
    cc.optimizer = cfg.optimizer;
    bg_cost_model_t *model = NULL;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    int slots[2], first[2] = {0, split[0]};
    bg_cost_device_t dev[2];
    for (int s = 0; s < 2; s++) {
        slots[s] = bg_schedule_stash_slots(sched, s);
        dev[s] = (bg_cost_device_t)BG_COST_DEVICE_CPU_CORE_INIT;
        dev[s].own_conv_workspace = 1;
        dev[s].conv_workspace_bytes = BG_CUDA_CONV_WORKSPACE_LIMIT;
        dev[s].channels_in_arena = 1;
    }
    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = model;
    pc.devices = 2;
    pc.device = dev;
    pc.stash_slots = slots;
    bg_partition_t *p = NULL;
    assert_int_equal(bg_partition_evaluate(&pc, first, &p), BG_OK);
    for (int s = 0; s < 2; s++) {
        const bg_cost_memory_t *want = &p->stage[s].memory;
        const bg_pipeline_stage_info_t got = bg_pipeline_stage_info(pipe, s);
        printf("stage %d: padding planned %zu, held %zu (%zu of it the channels' slots)\n", s,
               want->padding, got.memory.padding + got.channel_padding, got.channel_padding);
        assert_int_equal(want->params, got.memory.params);
        assert_int_equal(want->grads, got.memory.grads);
        assert_int_equal(want->optimizer, got.memory.optimizer);
        assert_int_equal(want->stash, got.memory.stash);
        assert_int_equal(want->buffers, got.memory.buffers);
        assert_int_equal(want->channels, got.channel_bytes);
        assert_true(got.channel_padding > 0 && got.channel_padding % 128 == 0);
        if (s == 1) {
            assert_int_equal(want->workspace, got.memory.workspace);
            assert_int_equal(want->padding, got.memory.padding + got.channel_padding);
        } else {
            /* cuDNN's choice within the limit, and its own padding. */
            assert_true(got.memory.workspace <= want->workspace);
            assert_int_equal(want->padding - workspace_padding(want->workspace),
                             got.memory.padding + got.channel_padding -
                                 workspace_padding(got.memory.workspace));
        }
    }
    bg_partition_destroy(p);
    bg_cost_model_destroy(model);
    bg_pipeline_destroy(pipe);
    bg_model_spec_destroy(spec);
}

/* An evaluation on forward-only stages sharing the GPU, through the
 * device-to-device channel and through host memory: the loss and the
 * count of one CPU device's, and no gradients held. */
static void test_forward_only_on_gpu(void **state) {
    (void)state;
    origin_batch_t b = origin_batch_open();
    static const char *const places[] = {"cpu", "cuda:0x2", "cuda:0x2"};
    bg_pipeline_result_t r[3];
    for (int k = 0; k < 3; k++) {
        bg_device_list_t devices;
        assert_int_equal(bg_device_list_parse(places[k], 1, &devices), BG_OK);
        bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
        cfg.spec = b.spec;
        cfg.devices = &devices;
        cfg.batch = BATCH;
        cfg.microbatches = 4;
        cfg.forward_only = 1;
        cfg.stage_through_host = k == 2;
        cfg.topology = live;
        bg_pipeline_t *p = NULL;
        if (bg_pipeline_create(&cfg, &p) != BG_OK)
            fail_msg("%s: %s", places[k], bg_error_message());
        if (bg_pipeline_evaluate(p, b.images, b.data->labels, BATCH, &r[k]) != BG_OK)
            fail_msg("%s: %s", places[k], bg_error_message());
        for (int s = 0; s < bg_pipeline_stage_count(p); s++)
            assert_int_equal(bg_pipeline_stage_info(p, s).memory.grads, 0);
        bg_pipeline_destroy(p);
        printf("forward-only on %s%s: loss sum %.9g, %lld correct\n", places[k],
               k == 2 ? " (through host memory)" : "", r[k].loss_sum, (long long)r[k].correct);
    }
    for (int k = 1; k < 3; k++) {
        assert_true(fabs(r[k].loss_sum - r[0].loss_sum) <= 1e-4 * r[0].loss_sum);
        assert_true(llabs(r[k].correct - r[0].correct) <= 1); /* a near tie may flip */
    }
    origin_batch_close(&b);
}

/* The event of `kind` of stage `stage` (with peer `peer`) for micro-batch
 * mb of step `step`, or NULL. */
static const bg_event_t *find_event(const bg_timeline_t *tl, bg_event_kind_t kind, int step,
                                    int stage, int peer, int mb) {
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->kind == kind && e->step == step && e->stage == stage && e->microbatch == mb &&
            (peer < 0 || e->peer_stage == peer))
            return e;
    }
    return NULL;
}

/* Each copy between stages shows as a LINK event of the receiving stage,
 * timed on its copy stream: after the sender's op that made the tensor,
 * before the receiver's copy out of the slot ends. Clocks of different
 * streams meet here, each placed on the host's clock by its restart within
 * about 10 us (bg_cuda_clock_restart), so the order is checked within
 * LINK_SLACK. */
static void check_links(const bg_timeline_t *tl, int stages, int microbatches) {
    const double LINK_SLACK = 1e-4;
    int from_prev[8] = {0}, from_next[8] = {0};
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->kind != BG_EVENT_LINK) continue;
        assert_true(e->end >= e->start);
        assert_int_equal(e->device, e->stage % tl->devices);
        const int forward = e->peer_stage == e->stage - 1;
        assert_true(forward || e->peer_stage == e->stage + 1);
        from_prev[e->stage] += forward;
        from_next[e->stage] += !forward;
        const bg_event_t *made = find_event(tl, forward ? BG_EVENT_FORWARD : BG_EVENT_BACKWARD,
                                            e->step, e->peer_stage, -1, e->microbatch);
        const bg_event_t *read =
            find_event(tl, BG_EVENT_RECV, e->step, e->stage, e->peer_stage, e->microbatch);
        assert_non_null(made);
        assert_non_null(read);
        if (e->start < made->end - LINK_SLACK || e->end > read->end + LINK_SLACK)
            fail_msg("link %d -> %d, micro-batch %d, step %d: %.6f..%.6f s, made by %.6f, read "
                     "by %.6f",
                     e->peer_stage, e->stage, e->microbatch, e->step, e->start, e->end, made->end,
                     read->end);
    }
    for (int s = 0; s < stages; s++) {
        assert_int_equal(from_prev[s], s > 0 ? tl->steps * microbatches : 0);
        assert_int_equal(from_next[s], s + 1 < stages ? tl->steps * microbatches : 0);
    }
}

/* A recorded run on a shared GPU: CUDA events time every op, each stage
 * gets its forwards, backwards and its own optimizer update, a device's
 * events other than its links do not overlap, each copy between stages has
 * its link event (check_links), and the pipeline is torn down after
 * recording (its clocks before its backends). */
static void check_recording(const run_t *run) {
    bg_model_spec_t *spec;
    assert_int_equal(bg_model_spec_parse("origin", origin_cnn, strlen(origin_cnn), &spec), BG_OK);
    bg_dataset_t *data;
    assert_int_equal(bg_dataset_synthetic(spec->input, 10, BATCH, 5, 0, &data), BG_OK);
    bg_device_list_t devices;
    bg_pipeline_t *p = make(spec, run, 4, &devices);
    bg_timeline_t *tl;
    assert_int_equal(bg_pipeline_timeline_create(p, &tl), BG_OK);
    float *images = bg_dataset_all_images(data);
    assert_non_null(images);
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, images, data->labels, BATCH, &r), BG_OK);
    assert_int_equal(bg_pipeline_record(p, tl), BG_OK);
    for (int k = 0; k < 2; k++)
        assert_int_equal(bg_pipeline_train_step(p, images, data->labels, BATCH, &r), BG_OK);
    assert_int_equal(bg_pipeline_record(p, NULL), BG_OK);
    assert_int_equal(tl->steps, 2);
    int forwards[4] = {0}, backwards[4] = {0}, updates[4] = {0};
    bg_timeline_sort(tl);
    const bg_event_t *before = NULL; /* the device's last event other than a link */
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        assert_true(e->end >= e->start);
        assert_true(e->step == 0 || e->step == 1);
        if (e->kind == BG_EVENT_LINK) continue;
        if (before != NULL && before->device == e->device)
            assert_true(e->start >= before->end - 1e-9);
        before = e;
        if (e->stage < 0 || e->stage >= 4) continue;
        if (e->kind == BG_EVENT_FORWARD) forwards[e->stage]++;
        if (e->kind == BG_EVENT_BACKWARD) backwards[e->stage]++;
        if (e->kind == BG_EVENT_STEP) updates[e->stage]++;
    }
    for (int s = 0; s < 4; s++) {
        assert_int_equal(forwards[s], 2 * 4);
        assert_int_equal(backwards[s], 2 * 4);
        assert_int_equal(updates[s], 2);
    }
    check_links(tl, 4, 4);
    bg_pipeline_destroy(p);
    bg_timeline_destroy(tl);
    free(images);
    bg_dataset_destroy(data);
    bg_model_spec_destroy(spec);
}

static void test_recording_on_gpu(void **state) {
    (void)state;
    const run_t run = {"cuda:0x2", BG_SCHEDULE_INTERLEAVED, 2, 0, -1, 0, 0};
    check_recording(&run);
}

/* The same with every copy through pinned host memory, whose link events
 * span both legs, from the start of the first on the sender's GPU to the
 * end of the second on the receiver's (check_links holds for one leg as
 * for two: it checks their order and count, not which clock started
 * them). */
static void test_recording_staged_on_gpu(void **state) {
    (void)state;
    const run_t run = {"cuda:0x2", BG_SCHEDULE_INTERLEAVED, 2, 0, -1, 1, 0};
    check_recording(&run);
}

/* A channel between two backends on one GPU, its slots in the receiver's
 * arena, as a pipeline lays them out: a trading receive hands the receiver
 * the slot its message arrived in, holding the message, and the slot the
 * old buffer, which a later fill of that slot overwrites with the next
 * message intact; into a buffer of another size it copies. */
static void test_channel_trades_on_gpu(void **state) {
    (void)state;
    enum { FLOATS = 4096 };
    const size_t bytes = sizeof(float) * FLOATS;
    bg_cuda_config_t cfg = BG_CUDA_CONFIG_INIT;
    bg_backend_t *sender = NULL, *receiver = NULL;
    assert_int_equal(bg_backend_cuda_create(&cfg, &sender), BG_OK);
    assert_int_equal(bg_backend_cuda_create(&cfg, &receiver), BG_OK);
    bg_arena_t arena = bg_arena_init(receiver);
    const bg_channel_config_t cc = {.slot_bytes = bytes,
                                    .capacity = 2,
                                    .name = "activations stage 0 -> 1",
                                    .timeout_s = 5,
                                    .sender = sender,
                                    .receiver = receiver,
                                    .arena = &arena,
                                    .copy_lane = BG_CUDA_LANE_ACTIVATIONS};
    bg_channel_t *ch = NULL;
    assert_int_equal(bg_channel_create(&cc, &ch), BG_OK);
    void *dst = NULL, *half = NULL, *src = NULL;
    assert_int_equal(bg_arena_reserve(&arena, bytes, &dst), BG_OK);
    assert_int_equal(bg_arena_reserve(&arena, bytes / 2, &half), BG_OK);
    assert_int_equal(bg_arena_commit(&arena), BG_OK);
    assert_int_equal(sender->ops->alloc(sender, bytes, &src), BG_OK);
    void *const first = dst, *const half_first = half;
    static float sent[FLOATS], got[FLOATS];
    void *held[3];
    for (int mb = 0; mb < 4; mb++) {
        /* Micro-batch 3: half as many bytes, into the half-sized buffer. */
        const size_t size = mb < 3 ? bytes : bytes / 2;
        void **into = mb < 3 ? &dst : &half;
        for (int i = 0; i < FLOATS; i++) sent[i] = (float)(mb * FLOATS + i);
        assert_int_equal(sender->ops->upload(sender, src, sent, size), BG_OK);
        assert_int_equal(bg_channel_send(ch, sender, mb, src, size, NULL, NULL), BG_OK);
        size_t size_got = 0;
        void *before = *into;
        assert_int_equal(bg_channel_recv_trading(ch, receiver, mb, into, size, &size_got, NULL),
                         BG_OK);
        assert_int_equal(size_got, size);
        if (mb < 3) {
            assert_ptr_not_equal(*into, before);
            held[mb] = *into;
        } else {
            assert_ptr_equal(*into, half_first);
        }
        memset(got, 0, sizeof got);
        assert_int_equal(receiver->ops->download(receiver, got, *into, size), BG_OK);
        assert_memory_equal(got, sent, size);
    }
    /* Micro-batch 2 came in ring slot 0 again, into the buffer micro-batch
     * 0's receive gave it: the receiver's first. */
    assert_ptr_not_equal(held[0], held[1]);
    assert_ptr_equal(held[2], first);
    sender->ops->free(sender, src);
    bg_channel_destroy(ch);
    bg_arena_release(&arena);
    bg_backend_destroy(receiver);
    bg_backend_destroy(sender);
}

int main(void) {
    /* Line by line into the GPU check's log: a run it kills keeps what it
       printed. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!bg_cuda_built() || bg_cuda_device_count() == 0) {
        /* A CUDA build whose module does not load is broken, not skipped. */
        const char *absent = bg_cuda_absent_reason();
        if (bg_cuda_built() && absent != NULL) {
            printf("test_cuda_pipeline: %s\n", absent);
            return 1;
        }
        const char *why = bg_cuda_no_device_reason();
        if (!bg_cuda_built())
            printf("test_cuda_pipeline: skipped: no CUDA backend in this build\n");
        else
            printf("test_cuda_pipeline: skipped: CUDA sees no GPU on this machine (%s)\n",
                   why != NULL ? why : "it counts none");
        return 77;
    }
    if (bg_topology_create_with_pci(NULL, &live) != BG_OK) live = NULL; /* then unbound */
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_channel_trades_on_gpu),
                                       cmocka_unit_test(test_shared_gpu_matches_cpu),
                                       cmocka_unit_test(test_nan_on_gpu),
                                       cmocka_unit_test(test_recording_on_gpu),
                                       cmocka_unit_test(test_recording_staged_on_gpu),
                                       cmocka_unit_test(test_conv_workspace_limit_on_gpu),
                                       cmocka_unit_test(test_batch_sets_on_gpu),
                                       cmocka_unit_test(test_new_layers_match_cpu),
                                       cmocka_unit_test(test_residual_blocks_match_cpu),
                                       cmocka_unit_test(test_clipping_matches_cpu),
                                       cmocka_unit_test(test_forward_only_on_gpu),
                                       cmocka_unit_test(test_memory_as_planned_on_gpu)};
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    bg_topology_destroy(live);
    return failed;
}
