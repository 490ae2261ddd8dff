/* The executor: stages on several devices, one host thread per device,
 * running a schedule (scheduler/schedule.h) for every mini-batch.
 *
 * A mini-batch of n samples is cut into M micro-batches (sizes differ by at
 * most one); the first stage reads images, the last reads labels, and
 * channels (scheduler/channel.h) carry activations forward and gradients
 * back between stages. Gradients accumulate over the micro-batches, scaled by
 * 1/n, and every stage takes one optimizer step at the end: the same update
 * as one device on the whole mini-batch. Evaluation runs a forward-only
 * schedule through the same stages. */
#ifndef BG_PIPELINE_H
#define BG_PIPELINE_H

#include <stdint.h>

#include "backend.h"
#include "channel.h"
#include "cuda/backend_cuda.h"
#include "devices.h"
#include "model_spec.h"
#include "optimizer.h"
#include "schedule.h"
#include "stage.h"
#include "timeline.h"
#include "topology.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { BG_MAX_STAGES = 1024 };

typedef struct bg_pipeline bg_pipeline_t;

typedef struct bg_pipeline_config {
    const bg_model_spec_t *spec;     /* must outlive the pipeline */
    const bg_device_list_t *devices; /* K = devices->count */
    bg_topology_t *topology;         /* binds device threads to their core, or near their GPU */
    bg_schedule_kind_t schedule;
    int chunks;       /* V stages per device (interleaved) */
    int microbatches; /* M */
    int64_t batch;    /* B: largest mini-batch */
    const int *split; /* first layer of stages 1..S-1 (S-1 values), or NULL */
    int recompute;
    /* 1: the pipeline only evaluates (bg_pipeline_evaluate): its stages are
     * forward-only (bg_stage_config_t), one stash slot each, with no
     * gradient channels; a train step is refused. */
    int forward_only;
    uint64_t seed;
    bg_optimizer_config_t optimizer;
    bg_dtype_t dtype;            /* BG_F32; BG_F64 for exact equivalence tests */
    int allow_tf32;              /* CUDA devices may use TF32 tensor cores (bg_cuda_config_t) */
    size_t conv_workspace_limit; /* CUDA devices' bg_cuda_config_t.conv_workspace_limit */
    /* A stage waiting on a neighbour longer than this stops the whole step
     * with BG_ERR_STALLED and a report of what every device was doing (the
     * last ops of each, like a flight recorder); 0 waits forever. At most
     * BG_PIPELINE_STALL_MAX_S. */
    double stall_timeout_s;
    /* Check losses, activations sent between stages, gradients sent back and
     * the accumulated weight gradients for NaN/Inf; if any is found, every
     * stage skips the optimizer step and the result says where (step,
     * stage, micro-batch, layer). */
    int check_finite;
    /* Test hooks, -1 when off: the device of stage `stop_stage` stops (waits
     * until the step is aborted) at its first op of that stage; stage
     * `nan_stage` writes a NaN into its forward output of `nan_microbatch`. */
    int stop_stage, nan_stage, nan_microbatch;
    /* > 0: before the optimizer step, scale every gradient by
     * clip / (norm + 1e-6) where that is below 1, norm the 2-norm of all
     * the model's gradients together (PyTorch's clip_grad_norm_ over
     * model.parameters()); each layer's squares summed where it lies and
     * the layers' sums added in layer order, so any placement scales alike. */
    double clip_grad_norm;
    /* Test hook, 0 when off: channels between CUDA stages copy through
     * pinned host memory even where a direct copy works, as they do between
     * GPUs without peer access, so one GPU can run that path. */
    int stage_through_host;
    /* How long a wait polls before it sleeps: a channel's, a device
     * thread's for its next job, and the caller's for the job's end. < 0
     * (the default) chooses: on GPUs, where each device's thread can have
     * a core of its own, BG_CHANNEL_POLL_S, and for the caller, with a
     * core more, BG_PIPELINE_DONE_POLL_S; else never. 0 never polls. */
    double poll_s;
} bg_pipeline_config_t;

/* How long the caller of a job polls for its end on GPUs: a step of the
 * models tried there takes less, and a sleeping thread wakes microseconds
 * late; a longer step costs a core 2 ms of polling, then a wake-up. */
#define BG_PIPELINE_DONE_POLL_S 2e-3
/* The longest poll_s a pipeline takes. */
#define BG_PIPELINE_POLL_MAX_S 0.1
/* The longest stall timeout: the channels' (about 31 years). */
#define BG_PIPELINE_STALL_MAX_S BG_CHANNEL_TIMEOUT_MAX_S

#define BG_PIPELINE_CONFIG_INIT                                                                    \
    {                                                                                              \
        .schedule = BG_SCHEDULE_1F1B, .chunks = 1, .microbatches = 1, .batch = 64, .split = NULL,  \
        .recompute = 0, .seed = 1, .optimizer = BG_OPTIMIZER_CONFIG_INIT, .dtype = BG_F32,         \
        .stall_timeout_s = 300, .check_finite = 1, .stop_stage = -1, .nan_stage = -1,              \
        .nan_microbatch = -1, .conv_workspace_limit = BG_CUDA_CONV_WORKSPACE_LIMIT, .poll_s = -1,  \
    }

/* Sums over a mini-batch, from the last stage. */
typedef struct bg_pipeline_result {
    double loss_sum;
    int64_t correct;
    /* 1 when a non-finite value was found and no stage took its optimizer
     * step; nan_report then says where ("stage 1, micro-batch 3, layer 6
     * (dense): forward output is not finite"). */
    int skipped;
    char nan_report[256];
    /* With clip_grad_norm: the gradients' 2-norm before clipping, and 1
     * when they were scaled down. */
    double grad_norm;
    int clipped;
} bg_pipeline_result_t;

/* Where a stage runs and what it holds. */
typedef struct bg_pipeline_stage_info {
    int first_layer, last_layer; /* [first, last) */
    int device;                  /* index into the device list */
    char device_name[24];
    int stash_slots; /* from the schedule's theory */
    bg_stage_memory_t memory;
    size_t channel_bytes; /* ring buffers of the channels it receives from */
    /* What their slots add in the device's arena, where they lie there
     * (between GPUs: bg_channel_padding). */
    size_t channel_padding;
} bg_pipeline_stage_info_t;

/* Cuts the model into S = K * V stages (cfg->split, or balancing FLOPs),
 * generates and validates the schedule, creates backends, stages, channels
 * and the device threads. BG_ERR_INVALID for impossible requests (more stages
 * than layers, a bad split, a schedule that rejects K/V/M), BG_ERR_UNSUPPORTED
 * for CUDA devices in a build without the CUDA backend. */
bg_status_t bg_pipeline_create(const bg_pipeline_config_t *cfg, bg_pipeline_t **out);

/* Stops the threads and frees everything; NULL is a no-op. */
void bg_pipeline_destroy(bg_pipeline_t *p);

/* Where to gather the next job's batch so that the job copies none of it:
 * *images and *labels come in as the caller's own buffers (B samples) and
 * are replaced by the pipeline's pinned host memory where its first stage
 * (images) or last stage (labels) is on a GPU, once that GPU has read the
 * batch of the last job that used it. There are two such sets, so that
 * one job's batch can be gathered while the job before it runs
 * (bg_pipeline_train_step_meanwhile); a set handed out is not handed out
 * again until a job has read it (BG_ERR_INVALID when both are waiting for
 * one). A job given a set reads it in place; one given other buffers
 * copies them into a free set. Not to be called while a job runs. */
bg_status_t bg_pipeline_batch_buffers(bg_pipeline_t *p, float **images, int32_t **labels);

/* Whether jobs of up to `batch` samples of shape `sample` fit p: at most
 * its B, each sample its model's input. BG_ERR_INVALID saying which does
 * not. */
bg_status_t bg_pipeline_check_batch(const bg_pipeline_t *p, int64_t batch, bg_shape_t sample);

/* One optimizer step on n <= B samples: images (n, in), labels (n). */
bg_status_t bg_pipeline_train_step(bg_pipeline_t *p, const float *images, const int32_t *labels,
                                   int64_t n, bg_pipeline_result_t *result);

/* Work of the caller's own, done on the calling thread while a step runs. */
typedef void (*bg_pipeline_meanwhile_fn)(void *ctx);

/* bg_pipeline_train_step that calls meanwhile(ctx) once the devices have
 * started, before waiting for them: host work that overlaps the step, such
 * as gathering the next batch into the other set of batch buffers (the
 * step reads its own). It must not call the pipeline. */
bg_status_t bg_pipeline_train_step_meanwhile(bg_pipeline_t *p, const float *images,
                                             const int32_t *labels, int64_t n,
                                             bg_pipeline_result_t *result,
                                             bg_pipeline_meanwhile_fn meanwhile, void *ctx);

/* Forward only (no gradients, no step) on n <= B samples. */
bg_status_t bg_pipeline_evaluate(bg_pipeline_t *p, const float *images, const int32_t *labels,
                                 int64_t n, bg_pipeline_result_t *result);

int bg_pipeline_stage_count(const bg_pipeline_t *p);
bg_pipeline_stage_info_t bg_pipeline_stage_info(const bg_pipeline_t *p, int stage);

/* What a stage held at its peak: everything but the stash is fixed, and
 * the stash peaks with the most micro-batches in flight. */
size_t bg_pipeline_stage_peak_bytes(const bg_pipeline_stage_info_t *info);

const bg_schedule_t *bg_pipeline_schedule(const bg_pipeline_t *p);

/* Records every following training step into `tl` (created with
 * bg_pipeline_timeline_create), until called with NULL: each op, each copy
 * into or out of a channel, and each wait on a neighbour, with monotonic
 * clock times, in seconds from the start of the timeline's first recorded
 * step (by this pipeline or another: the timeline keeps it). Evaluation is
 * not recorded. Recording adds two clock reads per event and no allocation
 * during a step. */
bg_status_t bg_pipeline_record(bg_pipeline_t *p, bg_timeline_t *tl);

/* A timeline shaped for this pipeline (devices, stages, schedule). */
bg_status_t bg_pipeline_timeline_create(const bg_pipeline_t *p, bg_timeline_t **out);

/* Refuses (BG_ERR_INVALID, bg_timeline_check_room) the recording of
 * `steps` steps where their events could not be held, before a run that
 * would otherwise fail once it reached them. */
bg_status_t bg_pipeline_check_record_room(const bg_pipeline_t *p, int64_t steps);

/* All parameters, flat in layer order (spec->total_params floats). */
bg_status_t bg_pipeline_download_params(bg_pipeline_t *p, float *host);
bg_status_t bg_pipeline_upload_params(bg_pipeline_t *p, const float *host);

/* Optimizer state k (0..bg_optimizer_state_buffers-1) of every stage, flat
 * like the parameters; and the step count every stage has taken. For
 * checkpoints that resume a run exactly. */
bg_status_t bg_pipeline_download_optimizer_state(bg_pipeline_t *p, int k, float *host);
bg_status_t bg_pipeline_upload_optimizer_state(bg_pipeline_t *p, int k, const float *host);
int64_t bg_pipeline_steps(const bg_pipeline_t *p);
void bg_pipeline_set_steps(bg_pipeline_t *p, int64_t steps);

/* First layer of each of `stages` stages that balances forward+backward
 * FLOPs (the slowest stage as light as possible), into first[0..stages),
 * none inside a residual block. BG_ERR_INVALID when the model has fewer
 * places to start a stage than stages. */
bg_status_t bg_pipeline_balance_split(const bg_model_spec_t *spec, int stages, int *first);

#ifdef __cplusplus
}
#endif

#endif /* BG_PIPELINE_H */
