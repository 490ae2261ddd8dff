/* The training loop: epochs of shuffled mini-batches through a pipeline
 * (scheduler/pipeline.h) of one or more stages, then evaluation on the test
 * set through the same stages. One device and one micro-batch is the
 * reference that every pipelined configuration must match. */
#ifndef BG_TRAIN_H
#define BG_TRAIN_H

#include <signal.h>
#include <stdint.h>

#include "dataset.h"
#include "devices.h"
#include "model_spec.h"
#include "optimizer.h"
#include "pipeline.h"
#include "topology.h"
#include "train_state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the loop reports after each step (and once more at each epoch end). */
typedef struct bg_train_progress {
    int epoch, epochs;         /* 1-based epoch, number of epochs */
    int64_t step, total_steps; /* steps done in the run, steps the run will take */
    double loss;               /* mean training loss over this epoch so far; NAN while
                                  every step of it was skipped (non-finite values) */
    int64_t samples;           /* samples this process's steps trained on (a short batch's
                                  as they are) */
    double samples_per_s;      /* training throughput so far: samples over the time */
    double eta_s;              /* estimated seconds to the end of training */
    double lr;                 /* the last step's learning rate; < 0 when it never moves */
    int epoch_done;            /* 1 on the report that closes an epoch */
    int64_t saved_step;        /* the step the --save file holds from this run; 0: none */
} bg_train_progress_t;

typedef void (*bg_train_progress_fn)(void *ctx, const bg_train_progress_t *progress);

/* What a --save file at `path` holds once a run saved `step` there, for a
 * message: "F holds step N (--resume F goes on from there)", or with
 * `last` (the run's last step, which no --resume goes on from) "F holds
 * step N, the run's last". Returns buf. */
const char *bg_train_saved_words(const char *path, int64_t step, int last, char *buf, size_t size);

/* The most epochs a run may have (--epochs, or what --steps takes), as a
 * training-state checkpoint records them. */
enum { BG_TRAIN_MAX_EPOCHS = 1000000 };

typedef struct bg_train_config {
    const bg_model_spec_t *spec;
    const bg_dataset_t *train, *test;
    int64_t batch;     /* samples per optimizer step */
    int epochs;        /* passes over the training set */
    int64_t steps;     /* if > 0, stop after this many steps in all */
    int evaluate_only; /* train no step: only evaluate the weights on the test set
                          (then `train` is not read and may be NULL) */
    uint64_t seed;     /* initialisation and shuffling */
    bg_optimizer_config_t optimizer;
    double clip_grad_norm;       /* > 0: bg_pipeline_config_t.clip_grad_norm */
    const float *initial_params; /* if not NULL, spec->total_params values to start from */
    /* Placement; the defaults are one CPU device, one micro-batch. */
    const bg_device_list_t *devices; /* NULL: one CPU device */
    bg_topology_t *topology;         /* NULL: threads unbound */
    bg_schedule_kind_t schedule;
    int chunks, microbatches;
    const int *split; /* NULL: balance FLOPs */
    int recompute;
    int record_steps; /* record the last N training steps into result->timeline */
    /* A step with a NaN or Inf: stop the run (nan_skip 0, the default) or skip
     * the step on every stage and go on, up to nan_limit skipped steps. */
    int nan_skip;
    int64_t nan_limit;
    double stall_timeout_s;      /* see bg_pipeline_config_t; 0 waits forever */
    int allow_tf32;              /* see bg_pipeline_config_t */
    size_t conv_workspace_limit; /* see bg_pipeline_config_t */
    /* Continue a run from a training-state checkpoint (scheduler/train_state.h);
     * steps and epochs still count from the start of the run. */
    const bg_train_state_t *resume;
    const char *resume_name; /* the file `resume` was read from, named in its refusals; or NULL */
    /* Write the training state to save_path every save_every steps (0: only
     * at the end) and at the end. */
    const char *save_path;
    int64_t save_every;
    bg_train_progress_fn progress;
    void *progress_ctx;
    /* If not NULL, called with progress_ctx as a save of `step` to
     * save_path begins: until the progress callback after it, the file
     * holds that step or what it held before. */
    void (*saving)(void *ctx, int64_t step);
    /* If not NULL, read after every step: once nonzero (a signal handler's
     * flag), the run stops there, saves the training state when save_path
     * is set, and returns BG_ERR_INTERRUPTED saying where it stopped. */
    const volatile sig_atomic_t *stop;
} bg_train_config_t;

#define BG_TRAIN_CONFIG_INIT                                                                       \
    {                                                                                              \
        .batch = 64, .epochs = 1, .steps = 0, .seed = 1, .optimizer = BG_OPTIMIZER_CONFIG_INIT,    \
        .schedule = BG_SCHEDULE_1F1B, .chunks = 1, .microbatches = 1, .nan_skip = 0,               \
        .nan_limit = 10, .stall_timeout_s = 300,                                                   \
        .conv_workspace_limit = BG_CUDA_CONV_WORKSPACE_LIMIT                                       \
    }

typedef struct bg_train_result {
    int64_t steps;        /* steps of the run done, from its start (a resumed run's included) */
    int64_t first_step;   /* steps already done when this process began (--resume), else 0 */
    double loss;          /* mean training loss over the last epoch's steps; NAN where
                             every one was skipped (non-finite values) */
    double test_loss;     /* mean cross-entropy on the test set */
    double test_accuracy; /* fraction of test samples classified correctly */
    double train_seconds; /* wall time of this process's steps (evaluation and saves excluded) */
    double save_seconds;  /* wall time of this process's checkpoint file writes (--save) */
    double samples_per_s; /* training samples per second over those steps */
    int stages;
    bg_pipeline_stage_info_t *stage_info; /* per stage, at the end; bg_train_result_free */
    bg_timeline_t *timeline;              /* the recorded steps, or NULL; idem */
    /* Steps skipped for non-finite values over the whole run (a resumed
     * run's count included), and where this process found the last it
     * skipped: "" where it skipped none. */
    int64_t skipped_steps;
    char nan_report[320];
    int64_t saved_step; /* step of the last checkpoint written, or 0 */
    /* A checkpoint that could not be written: the step it was for, after
     * which the run stopped (its results are still made), the status and
     * the message; 0 when none failed. */
    int64_t save_failed_step;
    bg_status_t save_status;
    char save_error[BG_ERROR_MAX];
    /* 1 when that checkpoint was the one a stop (cfg->stop) asked for: the
     * run ends as an interrupted one does, without scoring the test set
     * (test_loss and test_accuracy NAN); where the save works the run
     * returns BG_ERR_INTERRUPTED instead. */
    int stopped;
    /* With clip_grad_norm: the steps this process took (skipped ones
     * not), those whose gradients were scaled down, and the last one's
     * norm before clipping. */
    int64_t taken_steps, clipped_steps;
    double grad_norm;
    /* Where --warmup or a schedule moves the rate: the rate of the run's
     * last optimizer step, as its last progress line gives it; else -1. */
    double last_lr;
} bg_train_result_t;

/* What bg_train_run checks of a training run's config before it starts
 * (the batch, the run's length, its data against the model, a resumed
 * state against the run, all but the data's CRC-32), for a command to check
 * first, before slower work such as planning. Not for evaluate_only. */
bg_status_t bg_train_check_config(const bg_train_config_t *cfg);

/* Trains, evaluates, and leaves the final parameters in `final_params`
 * (spec->total_params floats) if not NULL. Deterministic: the same config
 * gives bit-identical parameters. With evaluate_only it trains no step and
 * evaluates the initial, loaded or resumed weights (result->steps is the
 * step they were saved at, or 0). */
bg_status_t bg_train_run(const bg_train_config_t *cfg, bg_train_result_t *result,
                         float *final_params);

/* The step a run of cfg->epochs and cfg->steps (whichever ends first; 0:
 * not given) ends at, counted from the run's start, over a training set of
 * `samples` at cfg->batch (both >= 1). */
int64_t bg_train_total_steps(const bg_train_config_t *cfg, int64_t samples);

/* What shapes each update of cfg's run, in words: the optimizer and its
 * rate ("adam lr 0.001"), the rate's schedule (a moving one with the run's
 * length, `total_steps`, which it spans: "cosine to 0.0001 over 500
 * steps"), SGD's momentum, the weight decay and the clipping limit where
 * set. Training states record it, so that a resumed run with other
 * settings, a longer run among them, can say so. */
void bg_train_settings(const bg_train_config_t *cfg, int64_t total_steps, char *buf, size_t size);

/* Frees what a result owns. */
void bg_train_result_free(bg_train_result_t *result);

/* Mean loss and accuracy over `data`, in batches of `batch`, through p. */
bg_status_t bg_train_evaluate(bg_pipeline_t *p, int64_t batch, const bg_dataset_t *data,
                              double *loss, double *accuracy);

#ifdef __cplusplus
}
#endif

#endif /* BG_TRAIN_H */
