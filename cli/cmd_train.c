/* brigade train MODEL [options]: trains through a pipeline of stages,
 * evaluates on the test set, reports per-stage memory, optionally
 * loads/saves a checkpoint and writes metrics JSON. */
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "cli.h"
#include "dataset.h"
#include "host_memory.h"
#include "model_spec.h"
#include "placement.h"
#include "parse.h"
#include "path.h"
#include "planning.h"
#include "progress.h"
#include "report.h"
#include "topology.h"
#include "train.h"
#include "train_report.h"

static const char help[] =
    "usage: brigade train MODEL [options]\n"
    "\n"
    "Trains MODEL (a model spec file), cut into stages on one or more devices,\n"
    "then prints the test accuracy, the training throughput and each stage's\n"
    "memory. One device and one micro-batch is plain training; any placement\n"
    "computes the same weights up to floating-point rounding.\n"
    "\n"
    "training:\n"
    "  --data SOURCE      fashion-mnist (default; Debian's dataset-fashion-mnist),\n"
    "                     synthetic (generated, for benchmarks), or a directory of\n"
    "                     MNIST-format IDX files (plain or .gz)\n"
    "  --epochs E         passes over the training set (default 1)\n"
    "  --steps N          N optimizer steps in all, over as many epochs as they\n"
    "                     take; with --epochs too, whichever ends first; 0 trains\n"
    "                     nothing and only evaluates the weights (--load FILE's,\n"
    "                     or the initial ones) on the test set, on stages that\n"
    "                     run forwards only (no gradients or optimizer state)\n"
    "  --batch B          samples per optimizer step (default 64)\n"
    "  --optimizer NAME   adam (default) or sgd\n"
    "  --lr X             learning rate, 0 to 1e6 (default: adam 0.001, sgd 0.01)\n"
    "  --lr-schedule NAME constant (default), cosine or linear: after any warmup,\n"
    "                     the rate falls from --lr toward --min-lr over the run's\n"
    "                     remaining steps (cosine as PyTorch's CosineAnnealingLR)\n"
    "  --warmup N         the first N steps ramp the rate up: lr x step / N\n"
    "                     (default 0; fewer than the run's steps)\n"
    "  --min-lr X         the rate the decay would reach one step past the run's\n"
    "                     end, as CosineAnnealingLR's eta_min (default 0)\n"
    "  --clip-grad-norm X scale the step's gradients down to a 2-norm of X (all\n"
    "                     the model's together) where it is larger, as PyTorch's\n"
    "                     clip_grad_norm_; the same on any placement (default: off)\n"
    "  --momentum X       sgd momentum (default 0)\n"
    "  --weight-decay X   L2 penalty added to the gradient (default 0)\n"
    "  --seed S           initialisation and shuffling seed (default 1)\n"
    "  --test-samples N   evaluate on the first N test samples only (default: all;\n"
    "                     a quick check of a short run need not score all 10,000)\n"
    "  --load FILE        start from the weights of a safetensors checkpoint (from\n"
    "                     brigade or PyTorch); optimizer and data order start afresh\n"
    "  --save FILE        write the training state (weights under PyTorch's names,\n"
    "                     optimizer state, step, data position) atomically at the\n"
    "                     end, and when SIGINT, SIGTERM or SIGHUP stops the run\n"
    "                     (after its step)\n"
    "  --save-every N     ... and every N steps (a crash loses at most N steps)\n"
    "  --resume FILE      continue the run saved in FILE exactly; --steps and\n"
    "                     --epochs count from the start of the run\n"
    "  --nan stop|skip    a NaN or Inf in a loss or gradient stops the run (default),\n"
    "                     or skips that optimizer step on every stage and goes on\n"
    "  --nan-limit N      with --nan skip, stop once more than N steps are skipped\n"
    "                     (default 10)\n"
    "  --stall-timeout S  a stage waiting on a neighbour longer than S seconds stops\n"
    "                     the run with what every stage was doing (default 300;\n"
    "                     0 waits as long as it takes)\n"
    "  --tf32             let cuBLAS and cuDNN on cuda devices round products to\n"
    "                     TF32 (tensor cores, about 1e-3 relative); default: IEEE\n"
    "                     FP32 arithmetic, as on the CPU (refused with only CPU\n"
    "                     devices; with --devices auto, for the GPUs it finds)\n"
    "%s%s%s"
    "  (without --split, train cuts the model as 'brigade plan' does; with\n"
    "  --device-mem it refuses a plan that does not fit, as plan does)\n"
    "outputs:\n"
    "  --metrics FILE     write the final figures as JSON: loss, test_loss,\n"
    "                     test_accuracy, samples_per_s, steps, train_seconds\n"
    "                     (checkpoint writes apart: save_seconds, with --save), a\n"
    "                     stages list (layers, device, peak_bytes by category) and\n"
    "                     the timeline summary (bubble, waits, transfers); with\n"
    "                     --steps 0 no loss, samples_per_s, train_seconds or\n"
    "                     timeline\n"
    "  --trace FILE.json  Chrome trace of the last recorded steps (open in Perfetto\n"
    "                     or chrome://tracing): one track per stage and transfer lane\n"
    "  --timeline FILE.svg  picture of the last recorded step, one row per stage\n"
    "  --record-steps N   how many final steps to record for the reports, 1 to 1000\n"
    "                     (default 3; a shorter run records all its steps)\n"
    "\n"
    "Progress goes to stderr: a bar on a terminal, a line per tenth of an epoch\n"
    "otherwise; its loss is the epoch's so far, the mean of its steps' losses.\n"
    "Results go to stdout.\n"
    "\n"
    "examples:\n"
    "  brigade train examples/fashion_cnn.model --epochs 5\n"
    "  brigade train examples/fashion_cnn.model --devices cpu:2 --microbatches 4\n"
    "  brigade train examples/fashion_cnn.model --stages 4 --schedule zb-h1 \\\n"
    "      --microbatches 8\n";

/* Every option takes a value. */
static const char *const options_with_value[] = {
    "--data",        "--epochs",        "--steps",        "--batch",          "--optimizer",
    "--lr",          "--momentum",      "--weight-decay", "--seed",           "--load",
    "--lr-schedule", "--warmup",        "--min-lr",       "--clip-grad-norm", "--save",
    "--metrics",     "--trace",         "--timeline",     "--record-steps",   "--nan",
    "--nan-limit",   "--stall-timeout", "--save-every",   "--resume",         "--test-samples",
};

#define OPTIONS_WITH_VALUE (sizeof options_with_value / sizeof options_with_value[0])

static int is_option(const char *arg) {
    for (size_t i = 0; i < OPTIONS_WITH_VALUE; i++)
        if (strcmp(arg, options_with_value[i]) == 0) return 1;
    return 0;
}

/* What --steps 0 (no training, only the test set's evaluation) leaves
 * without effect: the training's settings and outputs, and --recompute
 * (an evaluation keeps nothing for a backward). */
static const char *const training_only[] = {
    "--epochs",      "--optimizer",    "--lr",     "--momentum",       "--weight-decay", "--save",
    "--lr-schedule", "--warmup",       "--min-lr", "--clip-grad-norm", "--save-every",   "--trace",
    "--timeline",    "--record-steps", "--nan",    "--nan-limit",      "--recompute",
};

#define TRAINING_ONLY (sizeof training_only / sizeof training_only[0])

/* Refuses, with --steps 0, an option that would change nothing, and
 * --resume, whose weights --load takes. */
static bg_status_t check_evaluate_only(const train_options_t *o, int argc, char **argv) {
    char word[BG_PATH_SHELL_WORD_MAX];
    if (o->resume != NULL)
        return bg_error_set(BG_ERR_INVALID,
                            "--steps 0 evaluates and trains nothing, so --resume has no run to "
                            "continue; --load %s evaluates its weights",
                            bg_path_shell_word(o->resume, word, sizeof word));
    for (int k = 1; k < argc; k++) /* values never start with "--" */
        for (size_t i = 0; i < TRAINING_ONLY; i++)
            if (strcmp(argv[k], training_only[i]) == 0)
                return bg_error_set(BG_ERR_INVALID,
                                    "%s changes nothing with --steps 0, which trains nothing "
                                    "(it only evaluates the weights on the test set)",
                                    training_only[i]);
    /* The seed makes the initial weights and synthetic data; an evaluation
     * of a file's weights on a data set read in order has neither. */
    if (o->seed_given && bg_cli_train_seed_unused(o))
        return bg_error_set(BG_ERR_INVALID,
                            "--seed changes nothing with --steps 0 --load: the weights are the "
                            "file's and the test set is read in order (with --data synthetic "
                            "the seed makes the data)");
    /* Its stages run their forwards one micro-batch after another
     * whatever the schedule; only interleaved's V stages a device change
     * where they run. */
    for (int k = 1; k + 1 < argc; k++)
        if (strcmp(argv[k], "--schedule") == 0 && strcmp(argv[k + 1], "interleaved") != 0)
            return bg_error_set(BG_ERR_INVALID,
                                "--schedule %s changes nothing with --steps 0, whose stages run "
                                "their forwards only, in the same order under every schedule "
                                "(interleaved with --chunks changes where they run)",
                                argv[k + 1]);
    return BG_OK;
}

static bg_status_t parse_args(int argc, char **argv, train_options_t *o, int *show_help) {
    int64_t value;
    int epochs_given = 0, nan_limit_given = 0, min_lr_given = 0;
    bg_placement_init(&o->placement);
    o->data = "fashion-mnist";
    o->train.record_steps = 3;
    o->lr = -1;
    for (int i = 1; i < argc && !*show_help; i++) {
        int taken;
        BG_CHECK(bg_cli_shared_arg(argc, argv, &i, &o->model, &o->placement, show_help, &taken));
        if (taken) continue;
        const char *arg = argv[i], *v;
        if (strcmp(arg, "--tf32") == 0) {
            BG_CHECK(bg_cli_flag(argv, i));
            o->train.allow_tf32 = 1;
            continue;
        }
        if (!is_option(arg))
            return bg_cli_unknown_option(arg, options_with_value, OPTIONS_WITH_VALUE, 1, "--tf32");
        BG_CHECK(bg_cli_option_value(argc, argv, &i, &v));
        if (strcmp(arg, "--data") == 0) {
            o->data = v;
            o->data_given = 1;
        } else if (strcmp(arg, "--epochs") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 1, BG_TRAIN_MAX_EPOCHS, &value));
            o->train.epochs = (int)value;
            epochs_given = 1;
        } else if (strcmp(arg, "--steps") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 0, INT64_MAX / 2, &o->train.steps));
            o->train.evaluate_only = o->train.steps == 0;
        } else if (strcmp(arg, "--batch") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 1, 1 << 20, &o->train.batch));
        } else if (strcmp(arg, "--optimizer") == 0) {
            BG_CHECK(bg_cli_parse_optimizer(arg, v, &o->train.optimizer.kind));
        } else if (strcmp(arg, "--lr") == 0) {
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1e6, &o->lr));
        } else if (strcmp(arg, "--lr-schedule") == 0) {
            bg_status_t st = bg_lr_schedule_kind_parse(v, &o->train.optimizer.schedule.kind);
            if (st != BG_OK) return bg_error_prefix(st, "--lr-schedule: ");
        } else if (strcmp(arg, "--warmup") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 0, INT64_MAX / 2,
                                      &o->train.optimizer.schedule.warmup_steps));
        } else if (strcmp(arg, "--min-lr") == 0) {
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1e6, &o->train.optimizer.schedule.min_lr));
            min_lr_given = 1;
        } else if (strcmp(arg, "--clip-grad-norm") == 0) {
            BG_CHECK(bg_cli_parse_double(arg, v, 1e-30, 1e30, &o->train.clip_grad_norm));
        } else if (strcmp(arg, "--momentum") == 0) {
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1, &o->train.optimizer.sgd.momentum));
        } else if (strcmp(arg, "--weight-decay") == 0) {
            double wd;
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1e6, &wd));
            o->train.optimizer.sgd.weight_decay = wd;
            o->train.optimizer.adam.weight_decay = wd;
        } else if (strcmp(arg, "--seed") == 0) {
            /* Any 64-bit seed, as a checkpoint may hold (brigade.seed). */
            if (!bg_parse_digits(v, strlen(v), UINT64_MAX, &o->train.seed))
                return bg_error_set(BG_ERR_INVALID,
                                    "--seed: expected a whole number from 0 to %" PRIu64
                                    ", got '%s'",
                                    UINT64_MAX, v);
            o->seed_given = 1;
        } else if (strcmp(arg, "--load") == 0 || strcmp(arg, "--resume") == 0) {
            if (v[0] == '\0') return bg_error_set(BG_ERR_INVALID, "%s: empty file name", arg);
            if (strcmp(arg, "--load") == 0)
                o->load = v;
            else
                o->resume = v;
        } else if (strcmp(arg, "--save-every") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 1, INT64_MAX / 2, &o->train.save_every));
        } else if (strcmp(arg, "--save") == 0) {
            o->save = v;
        } else if (strcmp(arg, "--metrics") == 0) {
            o->metrics = v;
        } else if (strcmp(arg, "--trace") == 0) {
            o->trace = v;
        } else if (strcmp(arg, "--timeline") == 0) {
            o->timeline = v;
        } else if (strcmp(arg, "--nan") == 0) {
            if (strcmp(v, "stop") != 0 && strcmp(v, "skip") != 0)
                return bg_error_set(BG_ERR_INVALID, "--nan: expected stop or skip, got '%s'", v);
            o->train.nan_skip = strcmp(v, "skip") == 0;
        } else if (strcmp(arg, "--nan-limit") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 0, INT64_MAX / 2, &o->train.nan_limit));
            nan_limit_given = 1;
        } else if (strcmp(arg, "--stall-timeout") == 0) {
            BG_CHECK(
                bg_cli_parse_double(arg, v, 0, BG_PIPELINE_STALL_MAX_S, &o->train.stall_timeout_s));
            o->stall_given = 1;
        } else if (strcmp(arg, "--test-samples") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 1, INT64_C(1000000000000), &o->test_samples));
        } else if (strcmp(arg, "--record-steps") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 1, BG_CLI_MAX_RECORDED_STEPS, &value));
            o->train.record_steps = (int)value;
            o->record_steps_given = 1;
        } else {
            return bg_cli_unknown_option(arg, options_with_value, OPTIONS_WITH_VALUE, 1, "--tf32");
        }
    }
    if (*show_help) return BG_OK;
    if (o->model == NULL) return bg_error_set(BG_ERR_INVALID, "no MODEL given");
    if (o->train.evaluate_only) {
        BG_CHECK(check_evaluate_only(o, argc, argv));
        o->train.record_steps = 0; /* no step to record */
    }
    BG_CHECK(bg_cli_check_optimizer(&o->train.optimizer, argc, argv));
    if (nan_limit_given && !o->train.nan_skip)
        return bg_error_set(BG_ERR_INVALID,
                            "--nan-limit counts skipped steps: it needs --nan skip (with --nan "
                            "stop, the default, the first non-finite step ends the run)");
    if (o->load != NULL && o->resume != NULL)
        return bg_error_set(BG_ERR_INVALID,
                            "--load and --resume both give the weights; choose one");
    if (o->placement.topology_path != NULL)
        return bg_error_set(BG_ERR_INVALID,
                            "--topology %s describes another machine; train runs on this one "
                            "(plan or simulate it with --topology)",
                            o->placement.topology_path);
    if (o->lr >= 0) bg_optimizer_set_lr(&o->train.optimizer, o->lr);
    const bg_lr_schedule_t *schedule = &o->train.optimizer.schedule;
    if (min_lr_given && schedule->kind == BG_LR_CONSTANT)
        return bg_error_set(BG_ERR_INVALID,
                            "--min-lr is where a decay ends; the constant schedule has none "
                            "(add --lr-schedule cosine or linear)");
    const double lr = bg_optimizer_lr(&o->train.optimizer);
    if (schedule->min_lr > lr)
        return bg_error_set(BG_ERR_INVALID,
                            "--min-lr %g is above the learning rate %g: the schedule would "
                            "climb, not decay",
                            schedule->min_lr, lr);
    /* Options that would change nothing (a tester's runs went through). */
    if (schedule->kind != BG_LR_CONSTANT && schedule->min_lr == lr && lr > 0)
        return bg_error_set(BG_ERR_INVALID,
                            "--min-lr %g is the learning rate: the rate would not fall (the "
                            "constant schedule, the default, runs so)",
                            lr);
    if (schedule->kind != BG_LR_CONSTANT && lr == 0)
        return bg_error_set(BG_ERR_INVALID,
                            "--lr-schedule %s lowers the rate from --lr, here 0: it changes "
                            "nothing",
                            bg_lr_schedule_kind_name(schedule->kind));
    if (schedule->warmup_steps > 0 && lr == 0)
        return bg_error_set(BG_ERR_INVALID,
                            "--warmup ramps the rate up to --lr, here 0: it changes nothing");
    /* --steps alone runs that many steps, not one epoch's worth at most. */
    if (o->train.steps > 0 && !epochs_given) o->train.epochs = 0;
    /* Found now, not after the whole run. */
    if (o->train.save_every > 0 && o->save == NULL)
        return bg_error_set(BG_ERR_INVALID, "--save-every needs --save FILE to write to");
    BG_CHECK(bg_cli_check_replaced("--save", o->save));
    BG_CHECK(bg_cli_check_output("--metrics", o->metrics));
    BG_CHECK(bg_cli_check_output("--trace", o->trace));
    BG_CHECK(bg_cli_check_output("--timeline", o->timeline));
    bg_cli_file_t files[9 + BG_DATASET_FILES] = {
        {"MODEL", o->model, 0, NULL, 0},
        {"--load", o->load, 0, NULL, 0},
        {"--resume", o->resume, 0, "--save", 0},
        {"--profile", o->placement.profile_path, 0, NULL, 0},
        {"hwloc (HWLOC_XMLFILE)", bg_cli_env_topology(NULL), 0, NULL, 1},
        {"--save", o->save, 1, NULL, 0},
        {"--metrics", o->metrics, 1, NULL, 0},
        {"--trace", o->trace, 1, NULL, 0},
        {"--timeline", o->timeline, 1, NULL, 0},
    };
    /* The data's files are inputs too: an output there would replace them. */
    return bg_cli_check_distinct(files, bg_cli_add_data_files(files, 9, o->data));
}

/* --tf32 changes only what cuBLAS and cuDNN do: on CPU devices alone it
 * would change nothing, and is refused like other such options; with
 * --devices auto it applies wherever that finds GPUs, and a machine where
 * it found none is told so (the same command line serves both). */
static bg_status_t check_tf32(const train_options_t *o) {
    if (!o->train.allow_tf32) return BG_OK;
    for (int d = 0; d < o->placement.devices.count; d++)
        if (o->placement.devices.devices[d].kind == BG_DEVICE_CUDA) return BG_OK;
    if (strcmp(o->placement.devices_text, "auto") == 0) {
        fprintf(stderr, "note: --tf32 changes nothing here: --devices auto found no GPU and "
                        "took CPU cores, whose ops never round to TF32\n");
        return BG_OK;
    }
    char words[128];
    return bg_error_set(BG_ERR_INVALID,
                        "--tf32 applies to CUDA devices only; this run's devices are CPU cores "
                        "(%s), whose ops never round to TF32",
                        bg_placement_device_words(&o->placement, words, sizeof words));
}

/* Refuses the stall watchdog, which times waits on a neighbour, with one
 * stage, which never makes them (an unused profile: bg_cli_setup_open). */
static bg_status_t check_unused(const train_options_t *o) {
    const bg_placement_t *p = &o->placement;
    if (o->stall_given && bg_placement_stage_count(p) == 1)
        return bg_error_set(BG_ERR_INVALID,
                            "--stall-timeout times a stage's waits on its neighbours; this run "
                            "has one stage, which never waits");
    return BG_OK;
}

/* Refuses --save-every N where the run ends by its step N: --save writes
 * at the end anyway. The run's steps count from its start, as the saves do
 * (scheduler/train.c), resumed or not; a resumed run is not refused for
 * having no multiple of N left before its end, so that the command that
 * started a run also restarts it. */
static bg_status_t check_save_every(const train_options_t *o, const bg_dataset_t *train) {
    const bg_train_config_t *c = &o->train;
    if (c->save_every <= 0 || c->batch < 1 || train->count < 1) return BG_OK;
    const int64_t total = bg_train_total_steps(c, train->count);
    if (c->save_every < total) return BG_OK;
    return bg_error_set(BG_ERR_INVALID,
                        "--save-every %lld: this run ends at step %lld, where --save writes "
                        "anyway (give N below the run's steps)",
                        (long long)c->save_every, (long long)total);
}

/* Refuses a warmup as long as the run: the rate would never reach --lr,
 * and no decay would follow. */
static bg_status_t check_warmup(const train_options_t *o, const bg_dataset_t *train) {
    const bg_train_config_t *c = &o->train;
    const int64_t warmup = c->optimizer.schedule.warmup_steps;
    if (warmup <= 0 || c->batch < 1 || train->count < 1) return BG_OK;
    const int64_t total = bg_train_total_steps(c, train->count);
    if (warmup < total) return BG_OK;
    return bg_error_set(BG_ERR_INVALID,
                        "--warmup %lld is not below the run's %lld step%s: the rate would never "
                        "reach --lr",
                        (long long)warmup, (long long)total, total == 1 ? "" : "s");
}

/* A resumed run keeps its seed: synthetic data are made from it (the
 * weights and the data order come from the file). Without --seed it is
 * taken from the file; a different one is refused, as another batch is. */
static bg_status_t resume_seed(train_options_t *o, const bg_train_state_t *saved,
                               const char *name) {
    if (!saved->seed_saved) return BG_OK; /* saved before checkpoints held it */
    if (!o->seed_given) {
        o->train.seed = saved->seed;
        return BG_OK;
    }
    if (saved->seed != o->train.seed)
        return bg_error_set(BG_ERR_INVALID,
                            "--resume: %s: the run was saved with --seed %llu, this one has "
                            "--seed %llu (a resumed run continues the same one; synthetic data "
                            "are made from the seed; --load starts another)",
                            name, (unsigned long long)saved->seed,
                            (unsigned long long)o->train.seed);
    return BG_OK;
}

/* What train reports after each step: the progress line, and what --save
 * holds (`held`, as of step `noted_step`) for the answer to a second stop
 * signal, which quits at once (in the final evaluation, say, after the
 * last save, or during a save). */
typedef struct step_report {
    bg_progress_t progress;
    const char *save;
    int64_t noted_step;
    int saving; /* a save began since the last step's report */
    char held[BG_ERROR_MAX];
} step_report_t;

/* An epoch's last batch, where the batch does not divide the training
 * set, may hold fewer samples than the micro-batches: the rest run empty
 * (a tester's run of --batch 100 --microbatches 100 drew 8 empty forwards
 * in its trace with no word). Said when a step from `after` + 1 to `last`
 * takes such a batch. */
static void note_empty_microbatches(const train_options_t *o, int64_t count, int64_t after,
                                    int64_t last) {
    const int64_t empty = bg_cli_train_empty_microbatches(o, count);
    const int64_t per_epoch = bg_train_steps_per_epoch(count, o->train.batch);
    if (empty == 0 || per_epoch <= 0 || last / per_epoch == after / per_epoch) return;
    const int64_t rest = count % o->train.batch;
    fprintf(stderr,
            "note: an epoch's last batch holds %lld sample%s, which leaves %lld of the %lld "
            "micro-batches of its step empty (--microbatches %lld or fewer would not)\n",
            (long long)rest, rest == 1 ? "" : "s", (long long)empty,
            (long long)o->placement.microbatches, (long long)rest);
}

/* The answer to a second signal from now: what --save holds. */
static void note_held(step_report_t *s) {
    char note[BG_ERROR_MAX + 2];
    snprintf(note, sizeof note, "; %s", s->held);
    bg_cli_set_quit_note(note);
}

/* Before the run's first save: the file as it was, which holds step
 * `resumed_from` where the run resumed from it. */
static void note_first_held(step_report_t *s, const train_options_t *o, int64_t resumed_from) {
    if (o->save == NULL) return;
    if (o->resume != NULL && bg_cli_same_file(o->save, o->resume))
        snprintf(s->held, sizeof s->held, "%s still holds step %lld, which this run resumed from",
                 o->save, (long long)resumed_from);
    else if (access(o->save, F_OK) == 0)
        snprintf(s->held, sizeof s->held,
                 "nothing of this run is saved, and %s is as it was before it", o->save);
    else
        snprintf(s->held, sizeof s->held, "nothing of this run is saved");
    note_held(s);
}

/* A save begins: a second signal during it leaves the file with the step,
 * where the write got that far (the rename), else as it was. */
static void report_saving(void *ctx, int64_t step) {
    step_report_t *s = ctx;
    s->saving = 1;
    char note[2 * BG_ERROR_MAX];
    snprintf(note, sizeof note, "; %s holds step %lld if its save got that far, else as before: %s",
             s->save, (long long)step, s->held);
    bg_cli_set_quit_note(note);
}

static void report_step(void *ctx, const bg_train_progress_t *r) {
    step_report_t *s = ctx;
    /* After a save: the step it holds, or (one that failed) as it was;
     * steps without one leave the note alone. */
    if (s->saving) {
        if (r->saved_step != s->noted_step) {
            bg_train_saved_words(s->save, r->saved_step, r->saved_step == r->total_steps, s->held,
                                 sizeof s->held);
            s->noted_step = r->saved_step;
        }
        note_held(s);
        s->saving = 0;
    }
    bg_progress_report(&s->progress, r);
}

/* The run's first lines on stderr: what trains (or is evaluated) on what
 * data with which settings, and the placement with its split. */
static void print_header(const train_options_t *o, const bg_plan_t *plan, const char *settings) {
    /* File names as the headers and notes show them (bg_cli_shown). */
    char model_shown[BG_CLI_SHOWN_MAX], data_shown[BG_CLI_SHOWN_MAX];
    if (o->train.evaluate_only)
        fprintf(stderr, "evaluating %s on %s: %lld test sample%s, batch %lld\n",
                bg_cli_shown(o->model, model_shown, sizeof model_shown),
                bg_cli_shown(o->data, data_shown, sizeof data_shown),
                (long long)o->train.test->count, o->train.test->count == 1 ? "" : "s",
                (long long)o->train.batch);
    else
        fprintf(stderr, "training %s on %s: %lld train / %lld test samples, batch %lld, %s\n",
                bg_cli_shown(o->model, model_shown, sizeof model_shown),
                bg_cli_shown(o->data, data_shown, sizeof data_shown),
                (long long)o->train.train->count, (long long)o->train.test->count,
                (long long)o->train.batch, settings);
    fputs("placement: ", stderr);
    bg_placement_describe(&o->placement, o->train.evaluate_only, stderr);
    bg_cli_print_split(plan, 1, stderr);
    fputc('\n', stderr);
}

/* --load: the checkpoint's weights into *params (malloc'd; the caller
 * frees them) as the run's initial ones, with a note of what they are and
 * what starts afresh. Any run first has its parameters checked against the
 * host's memory. */
static bg_status_t load_weights(train_options_t *o, const bg_model_spec_t *spec,
                                const char *load_name, float **params) {
    /* Parameters past the machine's memory are refused before the data and
     * any stage; --load reads them into a host copy first. */
    const double param_bytes = 4.0 * (double)spec->total_params;
    const double host_bytes = (double)bg_host_memory_bytes();
    if (o->load != NULL && (param_bytes <= host_bytes || host_bytes <= 0))
        *params = malloc(sizeof(float) * (size_t)(spec->total_params > 0 ? spec->total_params : 1));
    if ((o->load != NULL && *params == NULL) || (param_bytes > host_bytes && host_bytes > 0)) {
        char count[32];
        return bg_error_set(
            BG_ERR_NOMEM,
            "%s: out of host memory for the model's %s parameters (%.1f GiB "
            "as floats; brigade plan with --device-mem shows what each stage needs)",
            o->model, bg_cli_group_digits(spec->total_params, count, sizeof count),
            param_bytes / (1 << 30));
    }
    if (o->load == NULL) return BG_OK;
    bg_checkpoint_info_t loaded;
    char other_shown[BG_CLI_SHOWN_MAX];
    BG_CHECK(
        bg_cli_option_input_status(bg_checkpoint_load(o->load, spec, *params, &loaded), "--load"));
    if (loaded.other_model[0] != '\0')
        fprintf(stderr,
                "note: %s was saved from another model (fingerprint %s, this one's is "
                "%016" PRIx64 "%s%s); its tensors have this model's names and shapes, so "
                "they are loaded\n",
                load_name, bg_cli_shown(loaded.other_model, other_shown, sizeof other_shown),
                spec->fingerprint, loaded.difference[0] ? "; " : "", loaded.difference);
    if (o->train.evaluate_only && loaded.step > 0)
        fprintf(stderr, "evaluating the weights of %s, saved at step %lld of its run\n", load_name,
                (long long)loaded.step);
    else if (o->train.evaluate_only)
        fprintf(stderr, "evaluating the weights of %s\n", load_name);
    else if (loaded.step > 0 && loaded.training_state)
        fprintf(stderr,
                "loading the weights of %s, saved at step %lld of its run; the optimizer "
                "state, step count and data order start afresh (--resume continues that "
                "run)\n",
                load_name, (long long)loaded.step);
    else
        fprintf(stderr, "loading the weights of %s; the optimizer state starts afresh\n",
                load_name);
    /* Synthetic data are made from the seed: without --seed, the
       file's, so the weights meet the data they were trained on (as
       --resume does). */
    if (strcmp(o->data, "synthetic") == 0 && !o->seed_given && loaded.seed_saved &&
        loaded.seed != o->train.seed) {
        o->train.seed = loaded.seed;
        fprintf(stderr, "--seed %llu, as %s was saved with: synthetic data are made from it\n",
                (unsigned long long)loaded.seed, load_name);
    }
    o->train.initial_params = *params;
    return BG_OK;
}

int bg_cmd_train(int argc, char **argv) {
    bg_train_config_t defaults = BG_TRAIN_CONFIG_INIT;
    train_options_t o = {.train = defaults};
    int show_help = 0;
    bg_status_t st = parse_args(argc, argv, &o, &show_help);
    if (show_help) {
        printf(help, bg_placement_help, bg_placement_help_schedule, bg_placement_help_rest);
        return 0;
    }
    /* A closed pipe (`| head`, a `| tee` that was killed) costs the output,
       not the run, which goes on and saves: a failed write is EPIPE, from
       the first line printed on. --help above ends by it, as any command's
       output does. */
    signal(SIGPIPE, SIG_IGN);
    if (st != BG_OK) return bg_cli_usage_error("train", "%s", bg_error_message());

    /* The checkpoints' names, and what a training state says of its run, as
     * notes show them (bg_cli_shown: no control character reaches the
     * terminal). */
    char load_shown[BG_CLI_SHOWN_MAX], resume_shown[BG_CLI_SHOWN_MAX], save_shown[BG_CLI_SHOWN_MAX];
    char settings_shown[BG_CLI_SHOWN_MAX];
    const char *load_name =
                   o.load != NULL ? bg_cli_shown(o.load, load_shown, sizeof load_shown) : NULL,
               *resume_name = o.resume != NULL
                                  ? bg_cli_shown(o.resume, resume_shown, sizeof resume_shown)
                                  : NULL;
    bg_cli_setup_t setup = {0};
    bg_dataset_t *train = NULL, *test = NULL;
    bg_train_result_t r = {0};
    bg_timeline_summary_t *summary = NULL;
    bg_train_state_t resume = {0};
    bg_plan_t *plan = NULL;
    bg_cli_stop_handlers_t old_handlers;
    int caught = 0; /* old_handlers hold what to restore */
    float *params = NULL;
    int code = 0;
    bg_cli_outputs_t outputs = {.cmd = "train", .failed = BG_OK};
    o.placement.run = "train";
    BG_CHECK_GOTO(bg_cli_setup_open(o.model, &o.placement, &o.train.optimizer, &setup), st, fail);
    const bg_model_spec_t *spec = setup.spec;
    BG_CHECK_GOTO(check_unused(&o), st, fail); /* refusals before check_tf32's note */
    BG_CHECK_GOTO(check_tf32(&o), st, fail);
    if (o.resume != NULL) {
        BG_CHECK_GOTO(
            bg_cli_option_input_status(
                bg_train_state_load(o.resume, spec, &o.train.optimizer, &resume), "--resume"),
            st, fail);
        BG_CHECK_GOTO(resume_seed(&o, &resume, resume_name), st, fail);
        o.train.resume = &resume;
        o.train.resume_name = resume_name;
        fprintf(stderr, "resuming %s at step %lld (epoch %d, sample %lld)\n", resume_name,
                (long long)resume.step, resume.epoch, (long long)resume.position);
    }
    BG_CHECK_GOTO(load_weights(&o, spec, load_name, &params), st, fail);
    /* An evaluation reads the test set only. */
    bg_cli_note_data(o.data, o.data_given, spec->input, spec->classes);
    BG_CHECK_GOTO(
        bg_cli_input_status(bg_dataset_open(o.data, spec->input, spec->classes, o.train.seed,
                                            o.train.evaluate_only ? NULL : &train, &test)),
        st, fail);
    o.test_count = test->count;
    if (o.test_samples > test->count) {
        st = bg_error_set(BG_ERR_INVALID,
                          "--test-samples %lld, but the test set of %s holds %lld (leave the "
                          "option out to score them all)",
                          (long long)o.test_samples, o.data, (long long)test->count);
        goto fail;
    }
    if (o.test_samples > 0) test->count = o.test_samples; /* its first samples */
    o.train.spec = spec;
    o.train.train = train;
    o.train.test = test;
    /* Before the plan: a batch the training set cannot fill, a resumed run
       that cannot continue, is refused as itself, not given memory advice. */
    if (train != NULL) {
        BG_CHECK_GOTO(bg_train_check_config(&o.train), st, fail);
        BG_CHECK_GOTO(check_save_every(&o, train), st, fail);
        BG_CHECK_GOTO(check_warmup(&o, train), st, fail);
    }
    /* An evaluation updates nothing: its stages run forwards only, with no
     * gradients, optimizer state (Adam's is two buffers the size of the
     * parameters) or stash for a backward, and its plan counts none. Its
     * options were refused above (check_evaluate_only). */
    if (o.train.evaluate_only) {
        o.train.optimizer = (bg_optimizer_config_t)BG_OPTIMIZER_CONFIG_INIT;
        o.train.optimizer.kind = BG_OPTIMIZER_SGD;
        o.train.optimizer.sgd.momentum = 0;
    }
    /* The planner picks the split (unless --split), and M and the schedule
     * when asked; memory is checked only against a given --device-mem. */
    bg_plan_request_t request;
    bg_placement_plan_request(&o.placement, spec, o.train.batch, &o.train.optimizer, setup.profile,
                              0, setup.devices, &request);
    request.forward_only = o.train.evaluate_only;
    BG_CHECK_GOTO(bg_cli_plan_make("train", &o.placement, &setup, &request, 0, &plan), st, fail);
    if (!plan->partition->fits) {
        bg_cli_plan_explain_overflow("train", plan, &o.placement, 0, NULL, NULL);
        code = 2;
        goto done;
    }
    o.train.save_path = o.save;
    /* The step the run ends at (0: an evaluation's, which trains none). */
    const int64_t total_steps = train != NULL ? bg_train_total_steps(&o.train, train->count) : 0;
    char settings[sizeof resume.settings]; /* as training states record them */
    bg_train_settings(&o.train, total_steps, settings, sizeof settings);
    /* The options that shape each update come from this command line, not
     * the file: say so where they differ from the saved run's (a longer run
     * stretches a moving learning rate's schedule). */
    if (o.resume != NULL && resume.settings[0] != '\0' && strcmp(settings, resume.settings) != 0)
        fprintf(stderr,
                "note: %s was saved by a run with %s; this one goes on with %s, so from step "
                "%lld it trains otherwise than that run would have (give that run's options to "
                "continue it exactly)\n",
                resume_name, bg_cli_shown(resume.settings, settings_shown, sizeof settings_shown),
                settings, (long long)resume.step + 1);
    /* The steps this process runs: a --record-steps past them records them all. */
    const int64_t to_run = total_steps - (o.resume != NULL ? resume.step : 0);
    if (o.record_steps_given && to_run > 0 && o.train.record_steps > to_run)
        fprintf(stderr, "note: --record-steps %d: this run has %lld step%s to take, all recorded\n",
                o.train.record_steps, (long long)to_run, to_run == 1 ? "" : "s");
    print_header(&o, plan, settings);
    bg_cli_note_address_limit();
    if (!o.train.evaluate_only) bg_cli_note_turns(plan, &o.placement, o.train.batch);
    if (train != NULL && to_run > 0)
        note_empty_microbatches(&o, train->count, total_steps - to_run, total_steps);
    step_report_t report = {.save = o.save};
    bg_progress_t *progress = &report.progress;
    bg_progress_init(progress, stderr,
                     train != NULL ? bg_train_steps_per_epoch(train->count, o.train.batch) : 1);
    o.train.progress = report_step;
    o.train.progress_ctx = &report;
    if (o.save != NULL) o.train.saving = report_saving;
    o.train.devices = &o.placement.devices;
    o.train.topology = setup.topology;
    o.train.schedule = o.placement.schedule;
    o.train.chunks = o.placement.chunks;
    o.train.microbatches = o.placement.microbatches;
    o.train.split = bg_plan_split(plan);
    o.train.recompute = o.placement.recompute;
    o.train.conv_workspace_limit = o.placement.conv_workspace;
    o.train.stop = &bg_cli_stop_signal;
    note_first_held(&report, &o, resume.step);
    caught = 1;
    bg_cli_catch_stop_signals(
        &old_handlers, "train",
        o.train.evaluate_only
            ? "\nbrigade train: stopping once the evaluation ends, with its results; a second "
              "signal a second from now quits at once\n"
            : "\nbrigade train: stopping once the step or the evaluation in progress ends, "
              "keeping what the run has; a second signal a second from now quits at once\n");
    bg_cli_cpu_sample_t cpu;
    bg_cli_cpu_start(&cpu);
    st = bg_train_run(&o.train, &r, NULL); /* a --save file holds the final weights */
    /* Waits a busy machine stretched read as the stages' own (a tester's
     * measured bubble was twice the simulated, with no word of why). */
    const double others_cpu = bg_cli_others_cpu_share(&cpu);
    /* The handlers stay until the results are printed and the reports
     * written (until 2026-12-06 a signal then ended the run at once,
     * silently, its results and reports lost). */
    bg_cli_set_stop_reply("\nbrigade train: stopping once the results are printed and the "
                          "reports written; a second signal a second from now quits at once\n");
    if (st == BG_ERR_INTERRUPTED) {
        bg_progress_end_line(progress);
        bg_cli_fail("train", st);
        bg_cli_train_report_unwritten(&o, "was interrupted");
        code = 128 + bg_cli_stop_signal;
        goto done;
    }
    if (st != BG_OK) {
        code = bg_cli_fail("train", st);
        bg_cli_train_report_unwritten(&o, "failed");
        goto done;
    }
    if (r.save_failed_step > 0) bg_progress_end_line(progress);
    if (r.stopped) { /* a stop signal's save failed: an interrupted run's end, as above */
        bg_cli_train_report_failed_save(&o, &r, total_steps);
        bg_cli_train_report_unwritten(&o, "was interrupted");
        code = 128 + bg_cli_stop_signal;
        goto done;
    }
    bg_progress_end_line(progress);
    /* Only where the run's timings were asked for: a training run's own
     * figures are its loss and accuracy, which no neighbour changes. */
    if (o.trace != NULL || o.timeline != NULL || o.metrics != NULL || o.record_steps_given)
        bg_cli_note_others_cpu(others_cpu, "it ran");
    bg_cli_train_print_test(&o, &r);
    if (o.train.evaluate_only) {
        if (o.load != NULL)
            printf("evaluated the weights of %s; trained nothing (--steps 0)\n", load_name);
        else
            printf("evaluated the initial weights (--seed %llu); trained nothing (--steps 0)\n",
                   (unsigned long long)o.train.seed);
        bg_cli_train_print_stages(&r);
        goto outputs;
    }
    bg_cli_train_print_trained(&o, &r);
    bg_cli_train_print_stages(&r);
    if (r.timeline != NULL && r.timeline->steps > 0) {
        BG_CHECK_GOTO(bg_cli_train_print_recorded(&o, &r, &summary), st, fail);
        bg_cli_write_timeline_files(&outputs, o.trace, o.timeline, r.timeline);
    } else if (o.trace != NULL || o.timeline != NULL) {
        /* A run stopped by a failed save, before the steps it records. */
        fprintf(stderr,
                "note: no step was recorded (the run stopped at step %lld, before its last %d), "
                "so %s written\n",
                (long long)r.steps, o.train.record_steps,
                o.trace != NULL && o.timeline != NULL ? "--trace and --timeline are not"
                : o.trace != NULL                     ? "--trace is not"
                                                      : "--timeline is not");
    }
outputs:
    if (o.save != NULL && r.saved_step > 0) { /* a note, as "metrics written to F" is */
        bg_cli_flush_stdout();
        fprintf(stderr, "saved the training state at step %lld to %s\n", (long long)r.saved_step,
                bg_cli_shown(o.save, save_shown, sizeof save_shown));
    }
    if (o.metrics != NULL)
        bg_cli_output_written(&outputs, bg_cli_train_write_metrics(o.metrics, &o, &r, summary),
                              "metrics", o.metrics);
    if (outputs.failed != BG_OK) code = bg_status_exit_code(outputs.failed);
    if (r.save_failed_step > 0) {
        bg_cli_train_report_failed_save(&o, &r, total_steps);
        code = bg_status_exit_code(r.save_status);
    }
    goto done;
fail:
    code = bg_cli_fail("train", st);
done:
    bg_train_state_free(&resume);
    bg_timeline_summary_destroy(summary);
    bg_train_result_free(&r);
    bg_plan_destroy(plan);
    free(params);
    bg_dataset_destroy(train);
    bg_dataset_destroy(test);
    bg_cli_setup_close(&setup);
    /* The results out of stdio's buffer first: a signal after the handlers
     * are back would lose them. */
    bg_cli_flush_stdout();
    if (caught) bg_cli_restore_stop_signals(&old_handlers);
    /* A stop signal ends the process by that signal, also when it came
     * during the final evaluation, after the results are printed. */
    if (bg_cli_stop_signal != 0) bg_cli_end_by_stop_signal();
    return code;
}
