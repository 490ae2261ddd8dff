/* Resuming a run: N steps, save, resume, N more steps gives the weights and
 * loss of 2N steps straight, bit for bit, on one and two stages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dataset.h"
#include "support/scratch.h"
#include "train.h"
#include "train_state.h"

static const char small_cnn[] = "input channels=1 height=8 width=8\n"
                                "conv2d filters=4 kernel=3 activation=relu\n"
                                "flatten\n"
                                "dense units=16 activation=relu\n"
                                "dropout rate=0.3\n" /* its mask follows the step */
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
    /* The last epoch's mean loss too: the checkpoint carries the part of
     * the epoch before it. */
    assert_true(a.loss == c.loss);
    assert_true(a.test_loss == c.test_loss);
    free(straight);
    free(resumed);
}

/* A diverging run with --nan skip: the steps skipped before a checkpoint
 * count after it, as for --nan-limit in an unbroken run. */
static void test_skipped_steps_carry_over(void **state) {
    fixture_t *f = *state;
    char half[128];
    snprintf(half, sizeof half, "%s/skipping.safetensors", f->dir);
    bg_device_list_t devices;
    bg_train_config_t cfg = config(f, &devices, 1);
    cfg.optimizer.kind = BG_OPTIMIZER_SGD;
    cfg.optimizer.sgd.lr = 1e30;
    cfg.nan_skip = 1;
    cfg.nan_limit = 1000;
    bg_train_result_t r;
    cfg.steps = 8;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    const int64_t straight = r.skipped_steps;
    bg_train_result_free(&r);
    assert_true(straight >= 4); /* the first step at most is finite */

    cfg.steps = 4;
    cfg.save_path = half;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    const int64_t before = r.skipped_steps;
    bg_train_result_free(&r);
    assert_true(before >= 1 && before < straight);

    bg_train_state_t saved = {0};
    assert_int_equal(bg_train_state_load(half, f->spec, &cfg.optimizer, &saved), BG_OK);
    assert_int_equal(saved.skipped_steps, before);
    cfg.steps = 8;
    cfg.save_path = NULL;
    cfg.resume = &saved;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    assert_int_equal(r.skipped_steps, straight);
    bg_train_result_free(&r);
    /* A limit the unbroken run would exceed stops the resumed one too. */
    cfg.nan_limit = straight - 1;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_NUMERIC);
    assert_non_null(strstr(bg_error_message(), "more than --nan-limit"));
    bg_train_state_free(&saved);
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

/* Stops the run once its progress reports step *ctx (the stop is seen
 * after the next step, as a signal's would be). */
static volatile sig_atomic_t stop_flag;

static void stop_after(void *ctx, const bg_train_progress_t *progress) {
    if (progress->step == *(const int64_t *)ctx) stop_flag = 1;
}

/* The learning rate follows the run's step, so a run with warmup and a
 * cosine decay, stopped midway and resumed, ends as the unbroken one; and
 * the schedule moved the rate (a constant one ends elsewhere). */
static void test_resume_with_schedule(void **state) {
    fixture_t *f = *state;
    const size_t bytes = sizeof(float) * (size_t)f->spec->total_params;
    float *straight = malloc(bytes), *resumed = malloc(bytes), *constant = malloc(bytes);
    assert_true(straight != NULL && resumed != NULL && constant != NULL);
    bg_device_list_t devices;
    bg_train_config_t cfg = config(f, &devices, 2);
    cfg.steps = 12;
    cfg.optimizer.schedule = (bg_lr_schedule_t){BG_LR_COSINE, 3, 0, 1e-4};
    bg_train_result_t r = {0};
    assert_int_equal(bg_train_run(&cfg, &r, straight), BG_OK);
    bg_train_result_free(&r);

    char path[128];
    snprintf(path, sizeof path, "%s/scheduled.safetensors", f->dir);
    const int64_t at = 5;
    stop_flag = 0;
    cfg.stop = &stop_flag;
    cfg.progress = stop_after;
    cfg.progress_ctx = (void *)&at;
    cfg.save_path = path;
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INTERRUPTED);
    bg_train_result_free(&r);
    bg_train_state_t saved = {0};
    assert_int_equal(bg_train_state_load(path, f->spec, &cfg.optimizer, &saved), BG_OK);
    assert_int_equal(saved.step, at + 1);
    assert_string_equal(saved.settings,
                        "adam lr 0.001, cosine to 0.0001 over 12 steps, 3 warmup steps");
    cfg.stop = NULL;
    cfg.progress = NULL;
    cfg.save_path = NULL;
    cfg.resume = &saved;
    assert_int_equal(bg_train_run(&cfg, &r, resumed), BG_OK);
    bg_train_result_free(&r);
    assert_memory_equal(straight, resumed, bytes);

    cfg.resume = NULL;
    cfg.optimizer.schedule = (bg_lr_schedule_t)BG_LR_SCHEDULE_INIT;
    assert_int_equal(bg_train_run(&cfg, &r, constant), BG_OK);
    bg_train_result_free(&r);
    assert_true(memcmp(straight, constant, bytes) != 0);
    bg_train_state_free(&saved);
    free(straight);
    free(resumed);
    free(constant);
}

/* What the saving hook saw: the step of each save as it began, and the
 * step the file held then (0: no file yet). */
typedef struct saves_seen {
    const fixture_t *f;
    const char *path;
    int count;
    int64_t step[8], held[8];
} saves_seen_t;

static void note_saving(void *ctx, int64_t step) {
    saves_seen_t *seen = ctx;
    assert_true(seen->count < 8);
    bg_train_state_t held = {0};
    const bg_optimizer_config_t adam = BG_OPTIMIZER_CONFIG_INIT;
    seen->step[seen->count] = step;
    seen->held[seen->count] =
        bg_train_state_load(seen->path, seen->f->spec, &adam, &held) == BG_OK ? held.step : 0;
    bg_error_clear();
    bg_train_state_free(&held);
    seen->count++;
}

/* A 2-stage run of `steps` steps saving to `name` in the scratch folder
 * (its path into path[128]) every 2 steps, `saving` called with `ctx` as
 * each save begins. */
static bg_train_config_t saving_every_2(const fixture_t *f, bg_device_list_t *devices,
                                        int64_t steps, const char *name, char *path,
                                        void (*saving)(void *, int64_t), void *ctx) {
    bg_train_config_t cfg = config(f, devices, 2);
    snprintf(path, 128, "%s/%s", f->dir, name);
    cfg.steps = steps;
    cfg.save_path = path;
    cfg.save_every = 2;
    cfg.saving = saving;
    cfg.progress_ctx = ctx;
    return cfg;
}

/* The saving hook is called as each save begins, before the file holds
 * that step: at --save-every 2 of 5 steps, steps 2, 4 and the last, 5. */
static void test_saving_hook(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    char path[128];
    saves_seen_t seen = {.f = f, .path = path};
    bg_train_config_t cfg =
        saving_every_2(f, &devices, 5, "saving.safetensors", path, note_saving, &seen);
    bg_train_result_t r = {0};
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    assert_int_equal(r.saved_step, 5);
    bg_train_result_free(&r);
    assert_int_equal(seen.count, 3);
    const int64_t steps[] = {2, 4, 5}, held[] = {0, 2, 4};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(seen.step[i], steps[i]);
        assert_int_equal(seen.held[i], held[i]);
    }
}

/* A saving hook that raises the stop flag *ctx points to, as a signal
 * that comes during the save would. */
static void stop_while_saving(void *ctx, int64_t step) {
    (void)step;
    *(volatile sig_atomic_t *)ctx = 1;
}

/* A stop during a --save-every save ends the run at that save's step,
 * whose state the file holds: no step and no save more (until 2026-12-05
 * the run took one more step and saved it too). */
static void test_stop_during_save(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    char path[128];
    volatile sig_atomic_t stop = 0;
    bg_train_config_t cfg = saving_every_2(f, &devices, 6, "stopped.safetensors", path,
                                           stop_while_saving, (void *)&stop);
    cfg.stop = &stop;
    bg_train_result_t r = {0};
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_ERR_INTERRUPTED);
    assert_non_null(strstr(bg_error_message(), "interrupted after step 2 of 6"));
    bg_train_result_free(&r);
    bg_error_clear();
    bg_train_state_t saved = {0};
    assert_int_equal(bg_train_state_load(path, f->spec, &cfg.optimizer, &saved), BG_OK);
    assert_int_equal(saved.step, 2);
    bg_train_state_free(&saved);
    assert_int_equal(unlink(path), 0);
}

/* Renames the folder *ctx names away (to the same name + "-gone") once the
 * progress reports step 2, so that the saves after it cannot be written. */
static void move_folder_at_2(void *ctx, const bg_train_progress_t *progress) {
    const char *folder = ctx;
    char gone[160];
    snprintf(gone, sizeof gone, "%s-gone", folder);
    if (progress->step == 2) assert_int_equal(rename(folder, gone), 0);
}

/* A 2-stage, 6-step run saving to run.st in a new scratch folder `name`
 * (its path into folder[128], the file's into path[160]) that `progress`
 * moves away at step 2, so that the saves after it fail. */
static bg_train_config_t run_losing_its_folder(const fixture_t *f, const char *name,
                                               bg_train_progress_fn progress, char *folder,
                                               char *path, bg_device_list_t *devices) {
    snprintf(folder, 128, "%s/%s", f->dir, name);
    assert_int_equal(mkdir(folder, 0700), 0);
    snprintf(path, 160, "%s/run.st", folder);
    bg_train_config_t cfg = config(f, devices, 2);
    cfg.steps = 6;
    cfg.save_path = path;
    cfg.progress = progress;
    cfg.progress_ctx = folder;
    return cfg;
}

/* A checkpoint that cannot be written stops the run after its step with
 * the run's results made (not an error): the steps done, the evaluation,
 * the last save that worked, and why the next failed. */
static void test_failed_save_stops_with_results(void **state) {
    fixture_t *f = *state;
    char folder[128], path[160];
    bg_device_list_t devices;
    bg_train_config_t cfg =
        run_losing_its_folder(f, "saves", move_folder_at_2, folder, path, &devices);
    cfg.save_every = 2;
    bg_train_result_t r = {0};
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    assert_int_equal(r.saved_step, 2);
    assert_int_equal(r.save_failed_step, 4);
    assert_int_equal(r.steps, 4);
    assert_int_equal(r.save_status, BG_ERR_IO);
    assert_non_null(strstr(r.save_error, path));
    assert_true(r.test_accuracy >= 0 && r.test_accuracy <= 1 && isfinite(r.test_loss));
    assert_int_equal(r.stopped, 0);
    assert_int_equal(r.stages, 2);
    bg_train_result_free(&r);
    /* The step 2 state is whole, where the folder went. */
    char gone[160];
    snprintf(gone, sizeof gone, "%s-gone/run.st", folder);
    bg_train_state_t saved = {0};
    assert_int_equal(bg_train_state_load(gone, f->spec, &cfg.optimizer, &saved), BG_OK);
    assert_int_equal(saved.step, 2);
    bg_train_state_free(&saved);
    assert_int_equal(unlink(gone), 0); /* scratch folders hold no folders */
    snprintf(gone, sizeof gone, "%s-gone", folder);
    assert_int_equal(rmdir(gone), 0);
}

/* Moves the folder away at step 2 (move_folder_at_2) and asks the run to
 * stop there, as a signal would. */
static void move_folder_and_stop_at_2(void *ctx, const bg_train_progress_t *progress) {
    move_folder_at_2(ctx, progress);
    if (progress->step == 2) stop_flag = 1;
}

/* A stop whose save fails ends the run as an interrupted one does, without
 * scoring the test set (until 2026-12-04 it scored it, delaying the exit
 * the stop asked for), but with the results of its steps and why the save
 * failed. */
static void test_failed_save_of_a_stop(void **state) {
    fixture_t *f = *state;
    char folder[128], path[160], gone[160];
    bg_device_list_t devices;
    bg_train_config_t cfg =
        run_losing_its_folder(f, "stop-saves", move_folder_and_stop_at_2, folder, path, &devices);
    stop_flag = 0;
    cfg.stop = &stop_flag;
    bg_train_result_t r = {0};
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    assert_int_equal(r.stopped, 1);
    assert_int_equal(r.save_failed_step, 3); /* the stop is seen after the next step */
    assert_int_equal(r.steps, 3);
    assert_int_equal(r.saved_step, 0);
    assert_int_equal(r.save_status, BG_ERR_IO);
    assert_true(isnan(r.test_loss) && isnan(r.test_accuracy));
    assert_int_equal(r.stages, 2);
    bg_train_result_free(&r);
    snprintf(gone, sizeof gone, "%s-gone", folder);
    assert_int_equal(rmdir(gone), 0); /* nothing was saved there */
}

/* A saving hook that moves the folder *ctx names away and raises
 * stop_flag, as a signal during a save that then fails would. */
static void move_folder_and_stop_saving(void *ctx, int64_t step) {
    (void)step;
    const char *folder = ctx;
    char gone[160];
    snprintf(gone, sizeof gone, "%s-gone", folder);
    assert_int_equal(rename(folder, gone), 0);
    stop_flag = 1;
}

/* A stop during a --save-every save that fails: as a stop whose save
 * failed (until 2026-12-05 the run went on to score the test set). */
static void test_failed_save_during_a_stop(void **state) {
    fixture_t *f = *state;
    char folder[128], path[160], gone[160];
    bg_device_list_t devices;
    bg_train_config_t cfg = run_losing_its_folder(f, "stop-in-save", NULL, folder, path, &devices);
    cfg.save_every = 2;
    cfg.saving = move_folder_and_stop_saving;
    stop_flag = 0;
    cfg.stop = &stop_flag;
    bg_train_result_t r = {0};
    assert_int_equal(bg_train_run(&cfg, &r, NULL), BG_OK);
    assert_int_equal(r.stopped, 1);
    assert_int_equal(r.save_failed_step, 2);
    assert_int_equal(r.steps, 2);
    assert_int_equal(r.saved_step, 0);
    assert_true(isnan(r.test_loss) && isnan(r.test_accuracy));
    bg_train_result_free(&r);
    snprintf(gone, sizeof gone, "%s-gone", folder);
    assert_int_equal(rmdir(gone), 0); /* nothing was saved there */
}

/* The settings a training state records, in words: each part where set. */
static void test_settings_words(void **state) {
    fixture_t *f = *state;
    bg_device_list_t devices;
    bg_train_config_t cfg = config(f, &devices, 1);
    char words[256];
    bg_train_settings(&cfg, 70, words, sizeof words);
    assert_string_equal(words, "adam lr 0.001");
    cfg.optimizer.kind = BG_OPTIMIZER_SGD;
    cfg.optimizer.sgd.momentum = 0.9;
    cfg.optimizer.sgd.weight_decay = 1e-4;
    cfg.optimizer.schedule = (bg_lr_schedule_t){BG_LR_LINEAR, 10, 0, 0.001};
    cfg.clip_grad_norm = 2.5;
    bg_train_settings(&cfg, 70, words, sizeof words);
    assert_string_equal(words, "sgd lr 0.01, linear to 0.001 over 70 steps, 10 warmup steps, "
                               "momentum 0.9, weight decay 0.0001, clipping at norm 2.5");
    char small[16];
    bg_train_settings(&cfg, 70, small, sizeof small);
    assert_string_equal(small, "sgd lr 0.01, li");
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
    char want[512];
    snprintf(want, sizeof want,
             "%s: checkpoint belongs to another model (fingerprint %016" PRIx64
             ", this model is %016" PRIx64
             "; its layer 0 is 'conv2d filters=4 kernel=3 stride=1 padding=valid' where this "
             "model has 'flatten'; it has 8 layers, this model 3)",
             path, f->spec->fingerprint, spec2->fingerprint);
    assert_string_equal(bg_error_message(), want);
    bg_model_spec_destroy(spec2);
    free(params);
    free(loaded);
}

/* ---- hand-made training states ---- */

enum { STATE_KEYS = 16 };

static const char *const state_keys[STATE_KEYS] = {"format",
                                                   "brigade.model",
                                                   "brigade.kind",
                                                   "brigade.step",
                                                   "brigade.optimizer_steps",
                                                   "brigade.optimizer",
                                                   "brigade.epoch",
                                                   "brigade.position",
                                                   "brigade.shuffle_rng",
                                                   "brigade.batch",
                                                   "brigade.train_samples",
                                                   "brigade.epoch_loss_sum",
                                                   "brigade.epoch_steps",
                                                   "brigade.skipped_steps",
                                                   "brigade.seed",
                                                   "brigade.train_crc32"};

/* The rng words the hand-made states hold. */
static const uint64_t state_rng[4] = {UINT64_C(0x0123456789abcdef), UINT64_C(0xfedcba9876543210),
                                      UINT64_C(0x1111222233334444), 5};

/* Writes an Adam training state of f->spec to `path` as bg_train_state_save
 * lays it out (parameter i is i / 1024, m's is -i, v's is 2 i): step 10
 * (7 steps of epoch 1, 3 of epoch 2), optimizer_steps 8, epoch 2, position 48, the state_rng words,
 * batch 16, train_samples 100, epoch_loss_sum 1.25, epoch_steps 3, skipped_steps 2, seed 2^64 - 6
 * (past int64, as an API caller may give). One change may be asked for: metadata `key` set to
 * `value` (left out when NULL); tensor `drop` left out; tensor `reshape` written flat (its element
 * count kept). */
/* Up to two more metadata changes for write_state (NULL: none); set only
 * by write_state_both and write_state_three. */
static const char *also_key[2], *also_value[2];
/* A tensor write_state adds, with the last model tensor's shape (NULL:
 * none). */
static const char *extra_tensor;
/* An element of v that write_state makes NaN (-1: none), as a file of an
 * older brigade or another tool may hold: bg_train_state_save writes none. */
static int64_t v_nan_at = -1;

static void write_state(const fixture_t *f, const char *path, const char *key, const char *value,
                        const char *drop, const char *reshape) {
    bg_checkpoint_tensor_t *model = NULL;
    int count = 0;
    assert_int_equal(bg_checkpoint_model_tensors(f->spec, &model, &count), BG_OK);
    const int64_t n = f->spec->total_params;
    float *buffers[3];
    for (int b = 0; b < 3; b++) {
        buffers[b] = malloc(sizeof(float) * (size_t)n);
        assert_non_null(buffers[b]);
        for (int64_t i = 0; i < n; i++)
            buffers[b][i] = (float)i * (b == 0 ? 1.0f / 1024 : b == 1 ? -1.0f : 2.0f);
    }
    if (v_nan_at >= 0) buffers[2][v_nan_at] = NAN;
    bg_safetensors_tensor_t tensors[3 * 16 + 1];
    char names[3 * 16][64];
    assert_true(count <= 16);
    int used = 0;
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < count; i++) {
            snprintf(names[used], sizeof names[used], "%s%s",
                     b == 0   ? ""
                     : b == 1 ? "optimizer.m."
                              : "optimizer.v.",
                     model[i].name);
            if (drop != NULL && strcmp(names[used], drop) == 0) continue;
            memset(&tensors[used], 0, sizeof tensors[used]);
            tensors[used].name = names[used];
            tensors[used].ndim = model[i].ndim;
            memcpy(tensors[used].shape, model[i].shape, sizeof model[i].shape);
            if (reshape != NULL && strcmp(names[used], reshape) == 0) {
                tensors[used].ndim = 1;
                tensors[used].shape[0] = model[i].count;
            }
            tensors[used].data = buffers[b] + model[i].offset;
            used++;
        }
    }
    if (extra_tensor != NULL) {
        const bg_checkpoint_tensor_t *last = &model[count - 1];
        memset(&tensors[used], 0, sizeof tensors[used]);
        tensors[used].name = extra_tensor;
        tensors[used].ndim = last->ndim;
        memcpy(tensors[used].shape, last->shape, sizeof last->shape);
        tensors[used].data = buffers[1] + last->offset;
        used++;
    }
    char fingerprint[32], rng[80];
    snprintf(fingerprint, sizeof fingerprint, "%016" PRIx64, f->spec->fingerprint);
    snprintf(rng, sizeof rng, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, state_rng[0],
             state_rng[1], state_rng[2], state_rng[3]);
    const char *values[STATE_KEYS] = {"pt",      fingerprint, "training-state",
                                      "10",      "8",         "adam",
                                      "2",       "48",        rng,
                                      "16",      "100",       "1.25",
                                      "3",       "2",         "18446744073709551610",
                                      "0badc0de"};
    const char *keys[STATE_KEYS];
    const char *vals[STATE_KEYS];
    int pairs = 0, changed = key == NULL;
    for (int k = 0; k < STATE_KEYS; k++) {
        const char *v = values[k];
        if (key != NULL && strcmp(key, state_keys[k]) == 0) v = value, changed = 1;
        for (int a = 0; a < 2; a++)
            if (also_key[a] != NULL && strcmp(also_key[a], state_keys[k]) == 0) v = also_value[a];
        if (v == NULL) continue;
        keys[pairs] = state_keys[k];
        vals[pairs++] = v;
    }
    assert_true(changed);
    bg_status_t st = bg_checkpoint_save_tensors(path, tensors, used, keys, vals, pairs);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    for (int b = 0; b < 3; b++) free(buffers[b]);
    free(model);
}

/* write_state with two metadata changes, `key` and `key2` (value2 NULL:
 * left out), where one alone would make the counts disagree. */
static void write_state_both(const fixture_t *f, const char *path, const char *key,
                             const char *value, const char *key2, const char *value2) {
    also_key[0] = key2;
    also_value[0] = value2;
    write_state(f, path, key, value, NULL, NULL);
    also_key[0] = also_value[0] = NULL;
}

/* write_state_both with a third change, `key3` to `value3`. */
static void write_state_three(const fixture_t *f, const char *path, const char *key,
                              const char *value, const char *key2, const char *value2,
                              const char *key3, const char *value3) {
    also_key[1] = key3;
    also_value[1] = value3;
    write_state_both(f, path, key, value, key2, value2);
    also_key[1] = also_value[1] = NULL;
}

/* Loads `path` for Adam expecting `status` and a message with `path` and
 * `needle`; the state's buffers are freed on failure. */
static void expect_state_error(const fixture_t *f, const char *path, bg_status_t status,
                               const char *needle) {
    bg_optimizer_config_t adam = BG_OPTIMIZER_CONFIG_INIT;
    bg_train_state_t st = {0};
    bg_status_t got = bg_train_state_load(path, f->spec, &adam, &st);
    if (got != status || strstr(bg_error_message(), path) == NULL ||
        strstr(bg_error_message(), needle) == NULL)
        fail_msg("got %s \"%s\", wanted %s with \"%s\"", bg_status_name(got), bg_error_message(),
                 bg_status_name(status), needle);
    assert_null(st.params);
    assert_null(st.state[0]);
    assert_null(st.state[1]);
}

/* Loads `path` for Adam into *st, which must succeed; the caller frees it. */
static void load_state(const fixture_t *f, const char *path, bg_train_state_t *st) {
    bg_optimizer_config_t adam = BG_OPTIMIZER_CONFIG_INIT;
    *st = (bg_train_state_t){0};
    const bg_status_t status = bg_train_state_load(path, f->spec, &adam, st);
    if (status != BG_OK) fail_msg("%s", bg_error_message());
}

/* Saves with bg_train_state_save a one-epoch Adam state of f->spec whose
 * every value is 0.5 but element `at` of v (in the first tensor, 0.weight,
 * for small `at`), which is `v`; returns its status. */
static bg_status_t save_state_with_v(const fixture_t *f, const char *path, int64_t at, float v) {
    bg_optimizer_config_t adam = BG_OPTIMIZER_CONFIG_INIT;
    bg_train_state_t st;
    assert_int_equal(bg_train_state_init(&st, f->spec, &adam), BG_OK);
    for (int64_t i = 0; i < f->spec->total_params; i++)
        st.params[i] = st.state[0][i] = st.state[1][i] = 0.5f;
    st.epoch = 1;
    memcpy(st.shuffle_rng.state, state_rng, sizeof state_rng);
    st.state[1][at] = v;
    const bg_status_t status = bg_train_state_save(path, f->spec, &st);
    bg_train_state_free(&st);
    return status;
}

/* The hand-made state loads with every number as written, so each refusal
 * below comes from its one change. */
static void test_state_fields(void **state) {
    fixture_t *f = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/fields.safetensors", f->dir);
    write_state(f, path, NULL, NULL, NULL, NULL);
    bg_train_state_t st;
    load_state(f, path, &st);
    assert_int_equal(st.step, 10);
    assert_int_equal(st.optimizer_steps, 8);
    assert_int_equal(st.epoch, 2);
    assert_int_equal(st.position, 48);
    for (int i = 0; i < 4; i++) assert_int_equal(st.shuffle_rng.state[i], state_rng[i]);
    assert_int_equal(st.batch, 16);
    assert_int_equal(st.train_samples, 100);
    assert_true(st.epoch_loss_sum == 1.25);
    assert_int_equal(st.epoch_steps, 3);
    assert_int_equal(st.skipped_steps, 2);
    assert_true(st.seed_saved && st.seed == UINT64_MAX - 5);
    assert_true(st.data_crc32_saved && st.data_crc32 == UINT32_C(0x0badc0de));
    assert_int_equal(st.states, 2);
    for (int64_t i = 0; i < f->spec->total_params; i++) {
        if (st.params[i] != (float)i / 1024 || st.state[0][i] != -(float)i ||
            st.state[1][i] != 2.0f * (float)i)
            fail_msg("element %" PRId64 ": %g %g %g", i, st.params[i], st.state[0][i],
                     st.state[1][i]);
    }
    bg_train_state_free(&st);
}

/* An optimizer buffer holding a NaN is refused by name, as weights are. */
static void test_state_not_finite(void **state) {
    fixture_t *f = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/nan.safetensors", f->dir);
    /* Not written: no run could resume from it (until 2026-12-05 a run
     * whose update made its weights infinite saved them over a good file). */
    assert_int_equal(save_state_with_v(f, path, 1, NAN), BG_ERR_NUMERIC);
    assert_non_null(strstr(bg_error_message(),
                           "not written: tensor 'optimizer.v.0.weight' holds 1 non-finite value "
                           "(NaN or infinity; the first at element 1), which no run could resume "
                           "from (the optimizer's state overflowed: --clip-grad-norm may keep it "
                           "finite)"));
    FILE *file = fopen(path, "rb");
    assert_null(file);
    /* Nor over a state that can be resumed, which stays as it was. */
    assert_int_equal(save_state_with_v(f, path, 1, 0.25f), BG_OK);
    assert_int_equal(save_state_with_v(f, path, 1, INFINITY), BG_ERR_NUMERIC);
    bg_train_state_t kept;
    load_state(f, path, &kept);
    assert_true(kept.state[1][1] == 0.25f && kept.state[1][0] == 0.5f);
    bg_train_state_free(&kept);
    /* A file that holds one anyway is refused. */
    v_nan_at = 3;
    write_state(f, path, NULL, NULL, NULL, NULL);
    v_nan_at = -1;
    expect_state_error(f, path, BG_ERR_INVALID,
                       "tensor 'optimizer.v.0.weight' holds 1 non-finite value (NaN or infinity; "
                       "the first at element 3)");
}

/* Counts that contradict each other (the hand-made state: step 10, 8
 * updates, 2 skipped, 48 samples of batch 16 into epoch 2 of 7 steps), a
 * negative second moment, and a shuffle generator in its one dead state,
 * are refused by name. */
static void test_state_inconsistent(void **state) {
    fixture_t *f = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/inconsistent.safetensors", f->dir);
    /* One key changed each time, and the message that names it. Epoch 9
     * at step 10 is a user's edit: the run would do nothing, quietly. */
    static const struct {
        const char *key, *value, *message;
    } cases[] = {
        {"brigade.skipped_steps", "11", "brigade.skipped_steps 11 is more than brigade.step 10"},
        {"brigade.optimizer_steps", "11",
         "brigade.optimizer_steps 11 is more than brigade.step 10"},
        /* Every step updates or is skipped: until 2026-12-04 fewer updates
         * loaded, and Adam's bias correction restarted. */
        {"brigade.optimizer_steps", "7",
         "brigade.optimizer_steps 7 and brigade.skipped_steps 2 do not add up to brigade.step 10 "
         "(each step updates the weights or is skipped)"},
        {"brigade.skipped_steps", "1",
         "brigade.optimizer_steps 8 and brigade.skipped_steps 1 do not add up to brigade.step 10"},
        {"brigade.position", "161",
         "brigade.position 161 is more samples than brigade.step 10 steps of brigade.batch 16 "
         "train on"},
        {"brigade.position", "50", "brigade.position 50 is not a whole number of brigade.batch 16"},
        {"brigade.epoch", "9",
         "brigade.step 10 does not match brigade.epoch 9 and brigade.position 48: epochs of 7 "
         "steps (brigade.train_samples 100 at brigade.batch 16) put that position at step 59"},
        {"brigade.position", "64", "put that position at step 11"},
        /* The epoch's mean loss divides by epoch_steps: an inflated one
         * made a resumed run report a mean 200 times too small. */
        {"brigade.epoch_steps", "11", "brigade.epoch_steps 11 is more than brigade.step 10"},
        {"brigade.epoch_steps", "4",
         "brigade.epoch_steps 4 is more steps than brigade.position 48 is into its epoch at "
         "brigade.batch 16 (3)"},
        /* ... and a deflated one a mean too large: the 3 steps of the epoch
         * less the run's 2 skipped leave at least 1 counted. */
        {"brigade.epoch_steps", "0",
         "brigade.epoch_loss_sum 1.25 is the sum of no steps (brigade.epoch_steps 0)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_state(f, path, cases[i].key, cases[i].value, NULL, NULL);
        expect_state_error(f, path, BG_ERR_PARSE, cases[i].message);
    }
    /* Values brigade does not write, refused as malformed: a fingerprint
     * (empty, long, upper case), not taken for another model's (until
     * 2026-12-05 it was told as one, and --load loaded the file beside that
     * note), and a kind, not read as weights only (until 2026-12-06). */
    static const char fingerprint[] =
        "metadata 'brigade.model' is '%s', not a model fingerprint (16 lowercase hex digits)";
    static const char kind[] = "metadata 'brigade.kind' is '%s', not one brigade writes "
                               "('training-state' in a training state; a file of weights has none)";
    static const struct {
        const char *key, *value, *format;
    } malformed[] = {
        {"brigade.model", "", fingerprint},
        {"brigade.model", "0123456789abcdef0123456789abcdef", fingerprint},
        {"brigade.model", "0123456789ABCDEF", fingerprint},
        {"brigade.model", "0123456789abcde", fingerprint},
        {"brigade.kind", "", kind},
        {"brigade.kind", "foo", kind},
        {"brigade.kind", "Training-State", kind},
        {"brigade.kind", "training-state ", kind},
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        char want[200];
        snprintf(want, sizeof want, malformed[i].format, malformed[i].value);
        write_state(f, path, malformed[i].key, malformed[i].value, NULL, NULL);
        expect_state_error(f, path, BG_ERR_PARSE, want);
    }
    /* Another model's, well formed: the file lacks brigade.layers, so no
     * layer is named. */
    char want[160];
    snprintf(want, sizeof want,
             "checkpoint belongs to another model (fingerprint 0123456789abcdef, this model is "
             "%016" PRIx64 ")",
             f->spec->fingerprint);
    write_state(f, path, "brigade.model", "0123456789abcdef", NULL, NULL);
    expect_state_error(f, path, BG_ERR_INVALID, want);
    /* The loss sum and its step count come together or not at all (an
     * older checkpoint); one alone once gave a mean of the sum over 0 or
     * over nothing recorded. */
    write_state(f, path, "brigade.epoch_steps", NULL, NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE,
                       "metadata 'brigade.epoch_loss_sum' without 'brigade.epoch_steps'");
    write_state(f, path, "brigade.epoch_loss_sum", NULL, NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE,
                       "metadata 'brigade.epoch_steps' without 'brigade.epoch_loss_sum'");
    write_state_both(f, path, "brigade.epoch_steps", NULL, "brigade.epoch_loss_sum", NULL);
    bg_train_state_t older;
    load_state(f, path, &older);
    assert_int_equal(older.epoch_steps, 0);
    assert_true(older.epoch_loss_sum == 0);
    bg_train_state_free(&older);
    write_state_both(f, path, "brigade.epoch_steps", "0", "brigade.epoch_loss_sum", "0");
    expect_state_error(f, path, BG_ERR_PARSE,
                       "brigade.epoch_steps 0 is fewer than the 3 steps brigade.position 48 is "
                       "into its epoch less the brigade.skipped_steps 2 of the run");
    /* One counted step of three, two skipped: the story holds. */
    write_state_both(f, path, "brigade.epoch_steps", "1", "brigade.epoch_loss_sum", "0.5");
    bg_train_state_t counted;
    load_state(f, path, &counted);
    assert_int_equal(counted.epoch_steps, 1);
    bg_train_state_free(&counted);
    /* Without the training set's size (older checkpoints) the epochs' length
     * is unknown: the largest position step 10 allows, 10 batches, loads. */
    write_state_both(f, path, "brigade.position", "160", "brigade.train_samples", NULL);
    bg_train_state_t old;
    load_state(f, path, &old);
    assert_int_equal(old.position, 160);
    assert_int_equal(old.train_samples, 0);
    bg_train_state_free(&old);
    /* A batch or a training set of 0 is no record of one. */
    write_state(f, path, "brigade.batch", "0", NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE, "metadata 'brigade.batch' is 0; it is at least 1");
    write_state(f, path, "brigade.train_samples", "0", NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE,
                       "metadata 'brigade.train_samples' is 0; it is at least 1");

    snprintf(path, sizeof path, "%s/negative-v.safetensors", f->dir);
    assert_int_equal(save_state_with_v(f, path, 3, -0.25f), BG_OK);
    expect_state_error(f, path, BG_ERR_PARSE,
                       "tensor 'optimizer.v.0.weight'[3] is -0.25; Adam's v is never below 0");

    /* From xoshiro256's all-zero state every draw is 0: no run saves it. */
    snprintf(path, sizeof path, "%s/dead-rng.safetensors", f->dir);
    char zeros[80];
    snprintf(zeros, sizeof zeros, "%064d", 0);
    write_state(f, path, "brigade.shuffle_rng", zeros, NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE,
                       "brigade.shuffle_rng is all zeros, a state no generator reaches");
}

/* Each field --resume reads, broken on its own, is refused by name. */
static void test_state_refusals(void **state) {
    fixture_t *f = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/broken.safetensors", f->dir);

    static const char *const epochs[] = {"0", "1000002"};
    for (int i = 0; i < 2; i++) {
        char want[64];
        snprintf(want, sizeof want, "brigade.epoch %s is out of range", epochs[i]);
        write_state(f, path, "brigade.epoch", epochs[i], NULL, NULL);
        expect_state_error(f, path, BG_ERR_PARSE, want);
    }
    /* The largest in range, a run 3 steps into epoch 1,000,001 (after a
     * million epochs of 7 steps), loads; at step 10 it does not match. */
    write_state(f, path, "brigade.epoch", "1000001", NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE, "does not match brigade.epoch 1000001");
    write_state_three(f, path, "brigade.epoch", "1000001", "brigade.step", "7000003",
                      "brigade.optimizer_steps", "7000001");
    bg_train_state_t st;
    load_state(f, path, &st);
    assert_int_equal(st.epoch, 1000001);
    assert_int_equal(st.step, 7000003);
    bg_train_state_free(&st);

    /* The optimizer: missing is said as such (until 2026-12-05 "saved with
     * optimizer ?"), another is named. */
    write_state(f, path, "brigade.optimizer", NULL, NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE, "metadata 'brigade.optimizer' is missing");
    write_state(f, path, "brigade.optimizer", "sgd", NULL, NULL);
    expect_state_error(f, path, BG_ERR_INVALID, "saved with optimizer sgd; this run uses adam");

    /* Counts: missing, empty, negative, trailing junk, not a number, a sign
     * or a space first, past int64 (strtoll would clamp it). */
    static const char *const count_keys[] = {"brigade.step", "brigade.optimizer_steps",
                                             "brigade.epoch", "brigade.position"};
    static const char *const bad_counts[] = {NULL,    "",   "-1", "7x",
                                             "seven", "+5", " 5", "99999999999999999999"};
    for (int k = 0; k < 4; k++) {
        for (size_t b = 0; b < sizeof bad_counts / sizeof bad_counts[0]; b++) {
            char want[96];
            snprintf(want, sizeof want, "metadata '%s' is missing or not a count", count_keys[k]);
            write_state(f, path, count_keys[k], bad_counts[b], NULL, NULL);
            expect_state_error(f, path, BG_ERR_PARSE, want);
        }
    }

    /* The counts added later (batch, training set size, the epoch's steps)
     * may be missing, as in older checkpoints (0: not recorded), but not
     * malformed; nor may the epoch's loss sum. The epoch's steps came with
     * its loss sum, and go missing with it. */
    static const char *const later_keys[] = {"brigade.batch", "brigade.train_samples",
                                             "brigade.epoch_steps", "brigade.skipped_steps"};
    for (int k = 0; k < 4; k++) {
        write_state_both(f, path, later_keys[k], NULL,
                         k == 2 ? "brigade.epoch_loss_sum" : later_keys[k], NULL);
        load_state(f, path, &st);
        const int64_t got[] = {st.batch, st.train_samples, st.epoch_steps, st.skipped_steps};
        /* Without the key, the steps that did not update were skipped:
         * 10 less 8 (until 2026-12-04 read as 0, and a resumed run then
         * saved counts that did not add up). */
        assert_int_equal(got[k], k == 3 ? 2 : 0);
        bg_train_state_free(&st);
        for (size_t b = 1; b < sizeof bad_counts / sizeof bad_counts[0]; b++) {
            char want[96];
            snprintf(want, sizeof want, "metadata '%s' is missing or not a count", later_keys[k]);
            write_state(f, path, later_keys[k], bad_counts[b], NULL, NULL);
            expect_state_error(f, path, BG_ERR_PARSE, want);
        }
    }
    /* The seed: missing in older checkpoints (not saved), never malformed. */
    write_state(f, path, "brigade.seed", NULL, NULL, NULL);
    load_state(f, path, &st);
    assert_int_equal(st.seed_saved, 0);
    bg_train_state_free(&st);
    static const char *const bad_seeds[] = {"", "-1", "+5", " 5", "7x", "18446744073709551616"};
    for (size_t b = 0; b < sizeof bad_seeds / sizeof bad_seeds[0]; b++) {
        write_state(f, path, "brigade.seed", bad_seeds[b], NULL, NULL);
        expect_state_error(f, path, BG_ERR_PARSE, "metadata 'brigade.seed' is not a whole number");
    }
    /* The data's CRC: missing in older checkpoints, else 8 hex digits. */
    write_state(f, path, "brigade.train_crc32", NULL, NULL, NULL);
    load_state(f, path, &st);
    assert_int_equal(st.data_crc32_saved, 0);
    bg_train_state_free(&st);
    static const char *const bad_crcs[] = {"",         "0badc0d",  "0badc0de0",
                                           "0BADC0DE", "0badc0dg", " badc0de"};
    for (size_t b = 0; b < sizeof bad_crcs / sizeof bad_crcs[0]; b++) {
        write_state(f, path, "brigade.train_crc32", bad_crcs[b], NULL, NULL);
        expect_state_error(f, path, BG_ERR_PARSE,
                           "metadata 'brigade.train_crc32' is not 8 lowercase hex digits");
    }
    write_state_both(f, path, "brigade.epoch_loss_sum", NULL, "brigade.epoch_steps", NULL);
    load_state(f, path, &st);
    assert_true(st.epoch_loss_sum == 0);
    bg_train_state_free(&st);
    static const char *const bad_sums[] = {"", "abc", "1.5x", "nan", "inf", "1e999", "-1"};
    for (size_t b = 0; b < sizeof bad_sums / sizeof bad_sums[0]; b++) {
        write_state(f, path, "brigade.epoch_loss_sum", bad_sums[b], NULL, NULL);
        expect_state_error(f, path, BG_ERR_PARSE,
                           "metadata 'brigade.epoch_loss_sum' is not a number >= 0");
    }

    /* The shuffle generator: 64 hex digits exactly. */
    char rng[80];
    snprintf(rng, sizeof rng, "%064d", 0);
    rng[63] = '\0';
    write_state(f, path, "brigade.shuffle_rng", rng, NULL, NULL); /* 63 digits */
    expect_state_error(f, path, BG_ERR_PARSE, "brigade.shuffle_rng is missing or malformed");
    write_state(f, path, "brigade.shuffle_rng", NULL, NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE, "brigade.shuffle_rng is missing or malformed");
    snprintf(rng, sizeof rng, "%064d", 0);
    rng[40] = 'g';
    write_state(f, path, "brigade.shuffle_rng", rng, NULL, NULL);
    expect_state_error(f, path, BG_ERR_PARSE, "brigade.shuffle_rng is malformed");
    /* strtoull would read these 16-digit pieces as numbers. */
    static const char signs[] = {'-', '+', ' '};
    for (int i = 0; i < 3; i++) {
        snprintf(rng, sizeof rng, "%064d", 0);
        rng[16] = signs[i];
        write_state(f, path, "brigade.shuffle_rng", rng, NULL, NULL);
        expect_state_error(f, path, BG_ERR_PARSE, "brigade.shuffle_rng is malformed");
    }

    /* Another rule's state beside Adam's: said to be (until 2026-12-05
     * "not part of this model", of a tensor named after one of its own). */
    extra_tensor = "optimizer.momentum.3.bias";
    write_state(f, path, NULL, NULL, NULL, NULL);
    extra_tensor = NULL;
    expect_state_error(f, path, BG_ERR_INVALID,
                       "tensor 'optimizer.momentum.3.bias' is optimizer state that this run's "
                       "optimizer (adam) does not keep");
    extra_tensor = "optimizer.m.9.weight"; /* Adam's, of a layer the model lacks */
    write_state(f, path, NULL, NULL, NULL, NULL);
    extra_tensor = NULL;
    expect_state_error(f, path, BG_ERR_INVALID,
                       "tensor 'optimizer.m.9.weight' is not part of this model");
    extra_tensor = "3.running_mean";
    write_state(f, path, NULL, NULL, NULL, NULL);
    extra_tensor = NULL;
    expect_state_error(f, path, BG_ERR_INVALID,
                       "tensor '3.running_mean' is not part of this model");
    /* Tensors: one of the weights' or the optimizer's missing or reshaped. */
    write_state(f, path, NULL, NULL, "optimizer.v.3.bias", NULL);
    expect_state_error(f, path, BG_ERR_INVALID, "tensor 'optimizer.v.3.bias' is missing");
    write_state(f, path, NULL, NULL, NULL, "optimizer.m.0.weight");
    expect_state_error(
        f, path, BG_ERR_INVALID,
        "tensor 'optimizer.m.0.weight' has shape [36]; the model needs [4, 1, 3, 3]");
    write_state(f, path, NULL, NULL, NULL, "3.weight");
    expect_state_error(f, path, BG_ERR_INVALID,
                       "tensor '3.weight' has shape [2304]; the model needs [16, 144]");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_one_stage),
        cmocka_unit_test(test_resume_two_stages),
        cmocka_unit_test(test_resume_with_schedule),
        cmocka_unit_test(test_saving_hook),
        cmocka_unit_test(test_stop_during_save),
        cmocka_unit_test(test_failed_save_stops_with_results),
        cmocka_unit_test(test_failed_save_of_a_stop),
        cmocka_unit_test(test_failed_save_during_a_stop),
        cmocka_unit_test(test_settings_words),
        cmocka_unit_test(test_skipped_steps_carry_over),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_state_fields),
        cmocka_unit_test(test_state_refusals),
        cmocka_unit_test(test_state_inconsistent),
        cmocka_unit_test(test_state_not_finite),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
