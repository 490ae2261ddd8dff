/* Internal to the executor (scheduler/pipeline_create.c builds it,
 * scheduler/pipeline.c runs its jobs, scheduler/pipeline_ops.c runs a
 * device's ops within a job): the pipeline object and the helpers they
 * share. */
#ifndef BG_PIPELINE_IMPL_H
#define BG_PIPELINE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "channel.h"
#include "pipeline.h"
#include "timeline.h"
#include "cuda/backend_cuda.h"

typedef enum pipeline_job { JOB_TRAIN, JOB_EVALUATE } pipeline_job_t;

enum { RECORDER_DEPTH = 6 };

/* The flight recorder of one device: its last ops, and what it is doing
 * now. Written only by the device's thread; read after the step ended. */
typedef struct flight_entry {
    bg_op_t op;
    double start, end; /* end < 0: still running */
    int failed;
} flight_entry_t;

/* A check for NaN and Inf that a device enqueued this step (its tag is its
 * index in the device's list): where it looked, for the report. */
typedef struct nan_check {
    int stage, microbatch, layer; /* -1, -1: the accumulated gradients */
    const char *what;             /* "the forward output", ... */
    double when;                  /* host time it was enqueued */
} nan_check_t;

typedef struct device_worker {
    bg_pipeline_t *p;
    int device;
    pthread_t thread;
    int started;
    flight_entry_t recent[RECORDER_DEPTH];
    int recent_count;  /* ops recorded this step */
    char doing[96];    /* "waiting for gradients from stage 2", ... */
    int stopped_stage; /* test hook: the stage already stopped this step */
    /* The checks enqueued on the device's backend since the marks were
     * last taken (once per step: a GPU is not waited for at each one). */
    nan_check_t *checks;
    int check_count, check_capacity;
    int loss_pending; /* the backend holds loss totals not yet taken */
    /* Its stages' weight gradients are zero, ready for a training step
     * (each optimizer step zeroes them after its update). */
    int grads_zero;
} device_worker_t;

struct bg_pipeline {
    bg_pipeline_config_t cfg;
    int devices, chunks, stages, microbatches;
    int64_t max_micro;       /* largest micro-batch */
    bg_backend_t **backends; /* per device */
    /* Per device, one allocation: its stages' buffers and the slots of the
     * channels into it that live on a GPU. */
    bg_arena_t *arenas;
    bg_stage_t **stage; /* per stage */
    int *first;         /* stages + 1 layer boundaries */
    int *slots;         /* stash slots per stage */
    /* Per stage, the micro-batch whose B (W when split) completes the
     * step's weight gradients (bg_schedule_last_gradient_microbatch); the
     * check of the accumulated gradients follows it, within its event. */
    int *last_gradient_mb;
    bg_schedule_t *train, *eval;
    bg_channel_t **forward;  /* forward[s]: stage s -> s+1 activations */
    bg_channel_t **backward; /* backward[s]: stage s+1 -> s gradients */
    /* Sends whose copies may still read their source (CUDA stages), waited
     * for before the stage may overwrite them: per stage, output_sent[s][k]
     * for stash slot k's output buffer (the record of the first slot with
     * that buffer, found at setup: with recompute every slot's output is one
     * shared buffer, and a stage of aliasing layers only outputs its input;
     * the latest send from a buffer comes after the earlier ones on the same
     * copy stream), grad_sent[s] for its input gradient. */
    bg_channel_sent_t ***output_sent;
    bg_channel_sent_t **output_records; /* per stage, per slot: what output_sent points to */
    bg_channel_sent_t *grad_sent;
    device_worker_t *workers;

    /* The current job, written by the caller before it starts the workers. */
    pipeline_job_t job;
    const float *images;
    const int32_t *labels;
    /* A first stage on a GPU reads the batch's images, and a last stage on
     * a GPU its labels, from pinned copies made at the job's start (their
     * backends' host_alloc), so that the uploads do not wait; NULL on CPU
     * devices, which read the caller's arrays. Two sets, handed out in
     * turn by bg_pipeline_batch_buffers: the next job's batch can be
     * gathered into one while a job reads the other. */
    float *pinned_images[2];
    int32_t *pinned_labels[2];
    /* bg_pipeline_batch_buffers handed set k out and no job has read it
     * since: the caller may be writing it, so it is not handed out again,
     * and a job given it reads it in place (the GPUs had read the batch
     * before, when it was handed out). */
    int pinned_handed[2];
    int pinned_next; /* the set handed out next, when both are free */
    /* A job read set k and may not have finished its uploads from it: one
     * that failed, or the one running. A job that returns its results has
     * (the results come after every upload of its batch), so handing the
     * set out again waits for the GPUs only after a failure. */
    int pinned_reading[2];
    int job_set; /* the set the current job reads, or -1 */
    int64_t batch;
    int64_t *micro_offset, *micro_size; /* per micro-batch */
    double loss_sum;                    /* written by the last stage's device only */
    int64_t correct;

    /* Recording (bg_pipeline_record): each device appends to its own buffer,
     * sized from the schedule, merged into the timeline after the step. */
    bg_timeline_t *record;
    double origin, job_start;
    bg_event_t **events; /* per device */
    int *event_count, *event_capacity;
    /* GPUs run ops later than the host enqueues them: a CUDA device's
     * events are timed by its clock (CUDA events on the compute stream;
     * NULL for CPU devices), from the marks of each event's start and end
     * (event_marks[d][2 i], [2 i + 1]; -1 for none), read after the step
     * and placed on the host's clock at clock_zero[d], the host time of
     * mark 0. */
    bg_cuda_clock_t **clocks;
    int **event_marks;
    double *clock_zero;
    /* Per GPU device and event: for a LINK event (a copy it sent, run on
     * the receiver's copy stream), the channel whose link clock holds its
     * marks (bg_channel_time_links); NULL for the device's own events. */
    bg_channel_t ***event_link;

    /* Non-finite values of the current step: the first one found (the
     * earliest enqueued check that found one, over all devices). */
    int nan_found;
    double nan_when;
    char nan_report[256];
    /* Clipping (cfg.clip_grad_norm): each layer's sum of squared
     * gradients, written by its stage's device before the optimizer step's
     * barrier and read by every device after it; the step's norm. */
    double *layer_squares;
    double grad_norm;
    int clipped;
    /* Devices waiting at the optimizer step until all have checked. */
    int barrier_count;
    uint64_t barrier_round;
    int aborted;

    pthread_mutex_t lock;
    pthread_cond_t work, done, barrier;
    /* Changed with the lock held; read without it by the waits that poll
     * (poll_s, done_poll_s) before they sleep on `work` and `done`. */
    atomic_uint_fast64_t generation; /* incremented for every job */
    atomic_int remaining;            /* workers still running the current job */
    int quit;
    double poll_s;      /* a device thread's wait for its next job, and the channels' */
    double done_poll_s; /* the caller's wait for the job's end */
    bg_status_t status; /* first failure of the current job */
    char message[BG_ERROR_MAX];
};

/* The backend of stage s (stage s runs on device s mod K). */
static inline bg_backend_t *stage_backend(const bg_pipeline_t *p, int s) {
    return p->backends[s % p->devices];
}

/* Bytes of the tensor at layer boundary `layer_boundary` (the input of
 * that layer) for n samples. */
static inline size_t stage_bytes(const bg_pipeline_t *p, int layer_boundary, int64_t n) {
    const bg_model_spec_t *spec = p->cfg.spec;
    int64_t numel = bg_shape_numel(spec->layers[layer_boundary].in);
    return bg_backend_bytes(p->backends[0], n * numel);
}

/* Whether device `device`'s ops are timed on its GPU's clock this job. */
static inline int gpu_timed(const bg_pipeline_t *p, int device) {
    return p->record != NULL && p->clocks != NULL && p->clocks[device] != NULL;
}

/* Frees what recording made (bg_pipeline_record: the event buffers and
 * the GPU devices' clocks), leaving their pointers NULL; before the
 * backends the clocks were made on are destroyed. */
void bg_pipeline_free_recording(bg_pipeline_t *p);

/* Runs device `device`'s ops of the current job (p->job) in schedule
 * order, from its worker thread. */
bg_status_t bg_pipeline_run_device(bg_pipeline_t *p, int device);

/* A device worker's thread (arg: its device_worker_t): binds itself near
 * its device, then runs each job it is given until the pipeline quits. */
void *bg_pipeline_device_main(void *arg);

/* The topology's GPU (bg_topology_gpu's index) that a CUDA device is, or
 * -1 when there is none. */
int bg_pipeline_topology_gpu(bg_topology_t *topo, const bg_device_t *dev);

#endif /* BG_PIPELINE_IMPL_H */
