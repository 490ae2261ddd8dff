#include "pipeline.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "channel.h"
#include "timeline.h"
#include "cpu/backend_cpu.h"
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
} device_worker_t;

struct bg_pipeline {
    bg_pipeline_config_t cfg;
    int devices, chunks, stages, microbatches;
    int64_t max_micro;       /* largest micro-batch */
    bg_backend_t **backends; /* per device */
    bg_stage_t **stage;      /* per stage */
    int *first;              /* stages + 1 layer boundaries */
    int *slots;              /* stash slots per stage */
    bg_schedule_t *train, *eval;
    bg_channel_t **forward;  /* forward[s]: stage s -> s+1 activations */
    bg_channel_t **backward; /* backward[s]: stage s+1 -> s gradients */
    /* Sends whose copies may still read their source (CUDA stages): per
     * stage, output_sent[s][k] of stash slot k's output, grad_sent[s] of
     * its input gradient. Waited for before the stage may overwrite them. */
    bg_channel_sent_t **output_sent;
    bg_channel_sent_t *grad_sent;
    device_worker_t *workers;

    /* The current job, written by the caller before it starts the workers. */
    pipeline_job_t job;
    const float *images;
    const int32_t *labels;
    int64_t batch;
    int64_t *micro_offset, *micro_size; /* per micro-batch */
    double loss_sum;                    /* written by the last stage's device only */
    int64_t correct;

    /* Recording (bg_pipeline_record): each device appends to its own buffer,
     * sized from the schedule, merged into the timeline after the step. */
    bg_timeline_t *record;
    int recorded_steps;
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

    /* Non-finite values of the current step: the first one found (the
     * earliest enqueued check that found one, over all devices). */
    int nan_found;
    double nan_when;
    char nan_report[256];
    /* Devices waiting at the optimizer step until all have checked. */
    int barrier_count;
    uint64_t barrier_round;
    int aborted;

    pthread_mutex_t lock;
    pthread_cond_t work, done, barrier;
    uint64_t generation; /* incremented for every job */
    int remaining;       /* workers still running the current job */
    int quit;
    bg_status_t status; /* first failure of the current job */
    char message[1024];
};

bg_status_t bg_pipeline_balance_split(const bg_model_spec_t *spec, int stages, int *first) {
    const int n = spec->num_layers;
    if (stages < 1 || stages > n)
        return bg_error_set(BG_ERR_INVALID, "cannot cut %d layers into %d stages", n, stages);
    /* Cost of a layer: forward plus backward, about 3x the forward for layers
     * with weights (dX and dW) and 2x for the others. */
    int64_t *prefix = bg_calloc((size_t)n + 1, sizeof *prefix);
    int64_t *best = bg_malloc(sizeof(int64_t) * (size_t)(n + 1) * (size_t)(stages + 1));
    int *cut = bg_malloc(sizeof(int) * (size_t)(n + 1) * (size_t)(stages + 1));
    if (prefix == NULL || best == NULL || cut == NULL) {
        free(prefix);
        free(best);
        free(cut);
        return bg_error_set(BG_ERR_NOMEM, "out of memory balancing stages");
    }
    for (int i = 0; i < n; i++)
        prefix[i + 1] = prefix[i] + spec->layers[i].flops * (spec->layers[i].params ? 3 : 2) + 1;
#define BEST(k, j) best[(size_t)(k) * (size_t)(n + 1) + (size_t)(j)]
#define CUT(k, j)  cut[(size_t)(k) * (size_t)(n + 1) + (size_t)(j)]
    /* BEST(k, j): the lightest slowest stage when layers [0, j) form k stages. */
    for (int j = 1; j <= n; j++) BEST(1, j) = prefix[j];
    for (int k = 2; k <= stages; k++) {
        for (int j = k; j <= n; j++) {
            BEST(k, j) = INT64_MAX;
            for (int i = k - 1; i < j; i++) {
                int64_t last = prefix[j] - prefix[i];
                int64_t worst = BEST(k - 1, i) > last ? BEST(k - 1, i) : last;
                if (worst < BEST(k, j)) {
                    BEST(k, j) = worst;
                    CUT(k, j) = i;
                }
            }
        }
    }
    int j = n;
    for (int k = stages; k >= 2; k--) {
        j = CUT(k, j);
        first[k - 1] = j;
    }
    first[0] = 0;
#undef BEST
#undef CUT
    free(prefix);
    free(best);
    free(cut);
    return BG_OK;
}

static bg_status_t check_split(const bg_model_spec_t *spec, int stages, const int *split,
                               int *first) {
    first[0] = 0;
    for (int s = 1; s < stages; s++) {
        first[s] = split[s - 1];
        if (first[s] <= first[s - 1] || first[s] >= spec->num_layers)
            return bg_error_set(BG_ERR_INVALID,
                                "--split: stage %d would start at layer %d; boundaries must "
                                "increase and lie within 1..%d",
                                s, first[s], spec->num_layers - 1);
    }
    first[stages] = spec->num_layers;
    return BG_OK;
}

/* ---- running ops ---- */

static bg_backend_t *stage_backend(const bg_pipeline_t *p, int s) {
    return p->backends[s % p->devices];
}

static size_t stage_bytes(const bg_pipeline_t *p, int layer_boundary, int64_t n) {
    const bg_model_spec_t *spec = p->cfg.spec;
    int64_t numel = bg_shape_numel(spec->layers[layer_boundary].in);
    return bg_backend_bytes(p->backends[0], n * numel);
}

/* A moment of a device's work: the host's clock, and on a GPU being
 * recorded the clock mark enqueued then (-1: none). */
typedef struct stamp {
    double host;
    int mark;
} stamp_t;

static int gpu_timed(const bg_pipeline_t *p, int device) {
    return p->record != NULL && p->clocks != NULL && p->clocks[device] != NULL;
}

/* A clock mark of a GPU being recorded, else -1 (no work on CPU devices). */
static int gpu_mark(bg_pipeline_t *p, int device) {
    return gpu_timed(p, device) ? bg_cuda_clock_mark(p->clocks[device]) : -1;
}

static stamp_t stamp(bg_pipeline_t *p, int device) {
    return (stamp_t){bg_channel_clock(), gpu_mark(p, device)};
}

/* Records one event of `device` when recording; never allocates. */
static void note(bg_pipeline_t *p, int device, bg_event_kind_t kind, int stage, int mb, int peer,
                 stamp_t start, stamp_t end) {
    if (p->record == NULL || p->event_count[device] >= p->event_capacity[device]) return;
    int i = p->event_count[device]++;
    p->events[device][i] = (bg_event_t){.kind = kind,
                                        .device = device,
                                        .stage = stage,
                                        .microbatch = mb,
                                        .peer_stage = peer,
                                        .step = p->recorded_steps,
                                        .start = start.host - p->origin,
                                        .end = end.host - p->origin};
    if (p->event_marks != NULL && p->event_marks[device] != NULL) {
        p->event_marks[device][2 * i] = start.mark;
        p->event_marks[device][2 * i + 1] = end.mark;
    }
}

static stamp_t host_stamp(double host) { return (stamp_t){host, -1}; }

/* Records the wait and the copy of a channel transfer with `peer`, done
 * between the GPU marks `before` and `after` (gpu_mark). On the host's
 * clock: the channel's own times. On a GPU's clock, for a channel between
 * GPUs: a receive waited from `before` until the message arrived
 * (t->arrived) and copied it out until `after`; a send only enqueues its
 * copy on the receiver's copy stream, so it takes about nothing between
 * `before` and `after` (its wait for ring space is the host's). */
static void note_transfer(bg_pipeline_t *p, int device, bg_event_kind_t copy, int stage, int mb,
                          int peer, const bg_channel_timing_t *t, int before, int after) {
    const stamp_t start = {t->call, before}, end = {t->done, after};
    if (!gpu_timed(p, device)) {
        if (t->ready > t->call)
            note(p, device, BG_EVENT_WAIT, stage, mb, peer, host_stamp(t->call),
                 host_stamp(t->ready));
        note(p, device, copy, stage, mb, peer, host_stamp(t->ready), host_stamp(t->done));
    } else if (copy == BG_EVENT_RECV && t->arrived >= 0) {
        const stamp_t arrived = {t->ready, t->arrived};
        note(p, device, BG_EVENT_WAIT, stage, mb, peer, start, arrived);
        note(p, device, copy, stage, mb, peer, arrived, end);
    } else {
        note(p, device, copy, stage, mb, peer, start, end);
    }
}

static void set_doing(bg_pipeline_t *p, int s, const char *format, int peer) {
    device_worker_t *w = &p->workers[s % p->devices];
    snprintf(w->doing, sizeof w->doing, format, peer);
}

/* Records the first non-finite value of the step (by the time `when` its
 * check was made); later ones are effects. */
static void report_nan(bg_pipeline_t *p, int stage, int mb, int layer, const char *what,
                       double when) {
    pthread_mutex_lock(&p->lock);
    if (!p->nan_found || when < p->nan_when) {
        p->nan_found = 1;
        p->nan_when = when;
        char where[48] = "";
        if (mb >= 0) snprintf(where, sizeof where, ", micro-batch %d", mb);
        snprintf(p->nan_report, sizeof p->nan_report, "stage %d%s, layer %d (%s): %s is not finite",
                 stage, where, layer, bg_layer_kind_name(p->cfg.spec->layers[layer].kind), what);
    }
    pthread_mutex_unlock(&p->lock);
}

/* Notes a check by stage s in its device's list; *tag is its tag. */
static bg_status_t log_check(bg_pipeline_t *p, int s, int mb, int layer, const char *what,
                             int *tag) {
    device_worker_t *w = &p->workers[s % p->devices];
    if (w->check_count == w->check_capacity)
        return bg_error_set(BG_ERR_INTERNAL, "more than %d NaN checks on device %s in one step",
                            w->check_capacity, p->cfg.devices->devices[w->device].name);
    w->checks[w->check_count] = (nan_check_t){s, mb, layer, what, bg_channel_clock()};
    *tag = w->check_count++;
    return BG_OK;
}

/* Enqueues the check of `count` values at `x` on stage s's device for NaN
 * and Inf; its result is read at the optimizer step (take_checks). */
static bg_status_t check_finite(bg_pipeline_t *p, int s, int mb, int layer, const void *x,
                                int64_t count, const char *what) {
    if (!p->cfg.check_finite || count == 0) return BG_OK;
    bg_backend_t *be = stage_backend(p, s);
    int tag = 0;
    BG_CHECK(log_check(p, s, mb, layer, what, &tag));
    return be->ops->mark_nonfinite(be, count, x, tag);
}

/* Reads what the checks device d enqueued found (waiting for a GPU to run
 * them), reports the first, and empties the list. */
static bg_status_t take_checks(bg_pipeline_t *p, int device) {
    device_worker_t *w = &p->workers[device];
    if (w->check_count == 0) return BG_OK;
    int tag;
    BG_CHECK(p->backends[device]->ops->take_nonfinite(p->backends[device], &tag));
    const int count = w->check_count;
    w->check_count = 0;
    if (tag >= count)
        return bg_error_set(BG_ERR_INTERNAL, "device %s marked NaN check %d of %d",
                            p->cfg.devices->devices[device].name, tag, count);
    if (tag >= 0) {
        const nan_check_t *c = &w->checks[tag];
        int layer = c->layer;
        /* The gradients were checked in one scan: find the layer now. */
        if (layer < 0) BG_CHECK(bg_stage_find_nonfinite_grad(p->stage[c->stage], &layer));
        report_nan(p, c->stage, c->microbatch, layer >= 0 ? layer : p->first[c->stage], c->what,
                   c->when);
    }
    return BG_OK;
}

/* The test hook that stops a stage: waits until the step is aborted. */
static bg_status_t maybe_stop(bg_pipeline_t *p, int s) {
    device_worker_t *w = &p->workers[s % p->devices];
    if (s != p->cfg.stop_stage || p->job != JOB_TRAIN || w->stopped_stage == s) return BG_OK;
    w->stopped_stage = s;
    set_doing(p, s, "stopped by the test hook on stage %d", s);
    pthread_mutex_lock(&p->lock);
    while (!p->aborted) pthread_cond_wait(&p->barrier, &p->lock);
    pthread_mutex_unlock(&p->lock);
    return bg_error_set(BG_ERR_INTERNAL, "stopped by the test hook");
}

/* Reads what device d's GPU holds of the job so far, waiting for it: the
 * loss totals (the last stage's device; only its thread writes loss_sum
 * and correct) and the NaN checks' marks. */
static bg_status_t take_results(bg_pipeline_t *p, int device) {
    device_worker_t *w = &p->workers[device];
    if (w->loss_pending) {
        bg_backend_t *be = p->backends[device];
        double loss;
        int64_t correct;
        w->loss_pending = 0;
        BG_CHECK(be->ops->take_loss(be, &loss, &correct));
        p->loss_sum += loss;
        p->correct += correct;
    }
    return take_checks(p, device);
}

/* Where the sends of stage s's stash slot `slot` output are recorded: at
 * the first slot whose output is the same buffer. With recompute every
 * slot's output is one buffer shared by all (and a stage whose layers all
 * alias has its input as output), so any op writing it waits for the
 * latest send from it, which comes after the earlier ones on the same
 * copy stream. */
static bg_channel_sent_t *output_sent(bg_pipeline_t *p, int s, int slot) {
    const void *out = bg_stage_slot_output(p->stage[s], slot);
    for (int k = 0; k < slot; k++)
        if (bg_stage_slot_output(p->stage[s], k) == out) return &p->output_sent[s][k];
    return &p->output_sent[s][slot];
}

/* What stage s's op on stash slot `slot` may overwrite of what it sent, as
 * its GPU work must wait for the copies still reading it: a forward writes
 * the slot's input and output; with recompute a backward or weight op
 * writes the (shared) output again; a backward writes the input gradient.
 * On CPU stages nothing is pending. */
typedef enum { WRITES_OUTPUT = 1, WRITES_INPUT_GRAD = 2 } sent_writes_t;

static bg_status_t wait_sent(bg_pipeline_t *p, int s, int slot, int writes) {
    bg_backend_t *be = stage_backend(p, s);
    if (writes & WRITES_OUTPUT) BG_CHECK(bg_channel_wait_sent(be, output_sent(p, s, slot)));
    if (writes & WRITES_INPUT_GRAD) BG_CHECK(bg_channel_wait_sent(be, &p->grad_sent[s]));
    return BG_OK;
}

static bg_status_t run_forward(bg_pipeline_t *p, int s, int mb) {
    bg_stage_t *stage = p->stage[s];
    bg_backend_t *be = stage_backend(p, s);
    const int slot = mb % p->slots[s];
    const int64_t n = p->micro_size[mb], at = p->micro_offset[mb];
    const int last = s == p->stages - 1;
    const int64_t in_numel = bg_shape_numel(p->cfg.spec->layers[p->first[s]].in);
    /* Before the load or receive, which may write the output (a stage of
     * aliasing layers only). */
    BG_CHECK(wait_sent(p, s, slot, WRITES_OUTPUT));
    if (s == 0 && n > 0)
        BG_CHECK(bg_stage_load_slot(stage, slot, n, p->images + at * in_numel,
                                    last ? p->labels + at : NULL));
    const int device = s % p->devices;
    bg_channel_timing_t t = {.clock = gpu_timed(p, device) ? p->clocks[device] : NULL};
    if (s > 0) {
        size_t got;
        set_doing(p, s, "waiting for activations from stage %d", s - 1);
        int before = gpu_mark(p, device);
        BG_CHECK(bg_channel_recv(p->forward[s - 1], be, mb, bg_stage_slot_input(stage, slot),
                                 stage_bytes(p, p->first[s], p->max_micro), &got, &t));
        note_transfer(p, device, BG_EVENT_RECV, s, mb, s - 1, &t, before, gpu_mark(p, device));
        if (last && n > 0) BG_CHECK(bg_stage_load_slot(stage, slot, n, NULL, p->labels + at));
    }
    const int out_layer = p->first[s + 1] - 1;
    /* The loss stays on the device until the step's end (take_results). */
    int loss_tag = -1;
    if (last && p->cfg.check_finite && n > 0)
        BG_CHECK(log_check(p, s, mb, out_layer, "the loss", &loss_tag));
    set_doing(p, s, "computing a forward on stage %d", s);
    stamp_t start = stamp(p, device);
    if (last) {
        BG_CHECK(bg_stage_forward_slot_deferred(stage, slot, n, p->job == JOB_TRAIN, loss_tag));
        p->workers[device].loss_pending = 1;
    } else {
        BG_CHECK(bg_stage_forward_slot(stage, slot, n, p->job == JOB_TRAIN, NULL));
    }
    note(p, device, BG_EVENT_FORWARD, s, mb, -1, start, stamp(p, device));
    if (s == p->cfg.nan_stage && mb == p->cfg.nan_microbatch && p->job == JOB_TRAIN && n > 0) {
        const double nan = NAN;
        BG_CHECK(bg_backend_upload_doubles(be, (void *)bg_stage_slot_output(stage, slot), &nan, 1));
    }
    if (!last) {
        BG_CHECK(check_finite(p, s, mb, out_layer, bg_stage_slot_output(stage, slot),
                              n * bg_shape_numel(p->cfg.spec->layers[out_layer].out),
                              "the forward output"));
        set_doing(p, s, "sending activations to stage %d", s + 1);
        int before = gpu_mark(p, device);
        BG_CHECK(bg_channel_send(p->forward[s], be, mb, bg_stage_slot_output(stage, slot),
                                 stage_bytes(p, p->first[s + 1], n), &t, output_sent(p, s, slot)));
        note_transfer(p, device, BG_EVENT_SEND, s, mb, s + 1, &t, before, gpu_mark(p, device));
    }
    return BG_OK;
}

static bg_status_t run_backward(bg_pipeline_t *p, int s, int mb) {
    bg_stage_t *stage = p->stage[s];
    bg_backend_t *be = stage_backend(p, s);
    const int64_t n = p->micro_size[mb];
    const int device = s % p->devices;
    bg_channel_timing_t t = {.clock = gpu_timed(p, device) ? p->clocks[device] : NULL};
    if (s < p->stages - 1) {
        size_t got;
        set_doing(p, s, "waiting for gradients from stage %d", s + 1);
        int before = gpu_mark(p, device);
        BG_CHECK(bg_channel_recv(p->backward[s], be, mb, bg_stage_output_grad(stage),
                                 stage_bytes(p, p->first[s + 1], p->max_micro), &got, &t));
        note_transfer(p, device, BG_EVENT_RECV, s, mb, s + 1, &t, before, gpu_mark(p, device));
    }
    set_doing(p, s, "computing a backward on stage %d", s);
    BG_CHECK(wait_sent(p, s, mb % p->slots[s],
                       WRITES_INPUT_GRAD | (p->cfg.recompute ? WRITES_OUTPUT : 0)));
    stamp_t start = stamp(p, device);
    BG_CHECK(bg_stage_backward_slot(stage, mb % p->slots[s], n, 1.0 / (double)p->batch));
    note(p, device, BG_EVENT_BACKWARD, s, mb, -1, start, stamp(p, device));
    if (s > 0) {
        BG_CHECK(check_finite(p, s, mb, p->first[s], bg_stage_input_grad(stage),
                              n * bg_shape_numel(p->cfg.spec->layers[p->first[s]].in),
                              "the gradient of its input"));
        set_doing(p, s, "sending gradients to stage %d", s - 1);
        int before = gpu_mark(p, device);
        BG_CHECK(bg_channel_send(p->backward[s - 1], be, mb, bg_stage_input_grad(stage),
                                 stage_bytes(p, p->first[s], n), &t, &p->grad_sent[s]));
        note_transfer(p, device, BG_EVENT_SEND, s, mb, s - 1, &t, before, gpu_mark(p, device));
    }
    return BG_OK;
}

/* Every device checks its weight gradients, then waits here until all
 * have: the step is taken everywhere or nowhere. */
static bg_status_t step_barrier(bg_pipeline_t *p, int device) {
    for (int s = device; s < p->stages && p->cfg.check_finite; s += p->devices) {
        int tag = 0;
        BG_CHECK(log_check(p, s, -1, -1, "the accumulated weight gradient", &tag));
        BG_CHECK(bg_stage_mark_nonfinite_grads(p->stage[s], tag));
    }
    BG_CHECK(take_results(p, device));
    pthread_mutex_lock(&p->lock);
    uint64_t round = p->barrier_round;
    if (++p->barrier_count == p->devices) {
        p->barrier_count = 0;
        p->barrier_round++;
        pthread_cond_broadcast(&p->barrier);
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)ceil(p->cfg.stall_timeout_s > 0 ? p->cfg.stall_timeout_s : 1e6);
    int timed_out = 0;
    while (p->barrier_round == round && !p->aborted && !timed_out)
        timed_out = pthread_cond_timedwait(&p->barrier, &p->lock, &deadline) == ETIMEDOUT;
    int aborted = p->aborted, skip = p->nan_found;
    pthread_mutex_unlock(&p->lock);
    if (aborted) return bg_error_set(BG_ERR_INTERNAL, "aborted at the optimizer step");
    if (timed_out)
        return bg_error_set(BG_ERR_STALLED,
                            "waited at the optimizer step for the other devices longer than the "
                            "stall timeout");
    return skip ? BG_ERR_NUMERIC : BG_OK;
}

/* The op itself, between NVTX range marks named like the trace's ops. */
static bg_status_t run_op_marked(bg_pipeline_t *p, int device, const bg_op_t *op);

static bg_status_t run_op(bg_pipeline_t *p, int device, const bg_op_t *op) {
    bg_nvtx_push_op(op->kind == BG_OP_FORWARD    ? "F"
                    : op->kind == BG_OP_BACKWARD ? "B"
                                                 : "W",
                    op->kind == BG_OP_STEP ? -1 : op->microbatch, op->stage);
    bg_status_t st = run_op_marked(p, device, op);
    bg_nvtx_pop();
    return st;
}

static bg_status_t run_op_marked(bg_pipeline_t *p, int device, const bg_op_t *op) {
    stamp_t start = stamp(p, device);
    if (op->kind != BG_OP_STEP) BG_CHECK(maybe_stop(p, op->stage));
    switch (op->kind) {
    case BG_OP_FORWARD: return run_forward(p, op->stage, op->microbatch);
    case BG_OP_BACKWARD: return run_backward(p, op->stage, op->microbatch);
    case BG_OP_WEIGHT:
        if (p->cfg.recompute) {
            BG_CHECK(wait_sent(p, op->stage, op->microbatch % p->slots[op->stage], WRITES_OUTPUT));
            start = stamp(p, device);
        }
        BG_CHECK(bg_stage_weights_slot(p->stage[op->stage], op->microbatch % p->slots[op->stage],
                                       p->micro_size[op->microbatch]));
        note(p, device, BG_EVENT_WEIGHT, op->stage, op->microbatch, -1, start, stamp(p, device));
        return BG_OK;
    case BG_OP_STEP: {
        snprintf(p->workers[device].doing, sizeof p->workers[device].doing,
                 "waiting for every device to reach the optimizer step");
        bg_status_t st = step_barrier(p, device);
        /* The barrier is waiting, not work: a WAIT on no particular stage
         * (on a GPU's clock it is idle time, as nothing was enqueued). */
        stamp_t stepping = stamp(p, device);
        if (!gpu_timed(p, device)) note(p, device, BG_EVENT_WAIT, device, -1, -1, start, stepping);
        start = stepping;
        if (st == BG_ERR_NUMERIC) return BG_OK; /* skipped everywhere; reported by run_job */
        BG_CHECK(st);
        for (int s = device; s < p->stages; s += p->devices) BG_CHECK(bg_stage_step(p->stage[s]));
        note(p, device, BG_EVENT_STEP, device, -1, -1, start, stamp(p, device));
        return BG_OK;
    }
    }
    return bg_error_set(BG_ERR_INTERNAL, "unknown op kind %d", (int)op->kind);
}

static const char *op_name(bg_op_kind_t kind) {
    switch (kind) {
    case BG_OP_FORWARD: return "forward";
    case BG_OP_BACKWARD: return "backward";
    case BG_OP_WEIGHT: return "weight gradient";
    case BG_OP_STEP: return "optimizer step";
    }
    return "?";
}

static bg_status_t run_device(bg_pipeline_t *p, int device) {
    const bg_schedule_t *schedule = p->job == JOB_TRAIN ? p->train : p->eval;
    if (p->job == JOB_TRAIN)
        for (int s = device; s < p->stages; s += p->devices)
            BG_CHECK(bg_stage_zero_grads(p->stage[s]));
    device_worker_t *w = &p->workers[device];
    w->recent_count = 0;
    w->stopped_stage = -1;
    if (w->check_count > 0 || w->loss_pending) { /* left by a failed job: forget them */
        bg_backend_t *be = p->backends[device];
        int stale;
        double loss;
        int64_t correct;
        BG_CHECK(be->ops->take_nonfinite(be, &stale));
        BG_CHECK(be->ops->take_loss(be, &loss, &correct));
        w->check_count = 0;
        w->loss_pending = 0;
    }
    if (gpu_timed(p, device)) {
        BG_CHECK(bg_cuda_clock_restart(p->clocks[device]));
        p->clock_zero[device] = bg_channel_clock();
    }
    for (int i = 0; i < schedule->op_counts[device]; i++) {
        const bg_op_t *op = &schedule->ops[device][i];
        flight_entry_t *e = &w->recent[w->recent_count++ % RECORDER_DEPTH];
        *e = (flight_entry_t){*op, bg_channel_clock() - p->job_start, -1, 0};
        bg_status_t st = run_op(p, device, op);
        e->end = bg_channel_clock() - p->job_start;
        e->failed = st != BG_OK;
        if (st != BG_OK) {
            if (op->kind == BG_OP_STEP)
                return bg_error_prefix(
                    st, "device %s, optimizer step: ", p->cfg.devices->devices[device].name);
            return bg_error_prefix(st, "stage %d on %s, micro-batch %d, %s: ", op->stage,
                                   p->cfg.devices->devices[device].name, op->microbatch,
                                   op_name(op->kind));
        }
    }
    snprintf(w->doing, sizeof w->doing, "finished its ops");
    return take_results(p, device); /* an evaluation's (a step's were taken at its end) */
}

static void abort_channels(bg_pipeline_t *p) {
    pthread_mutex_lock(&p->lock);
    p->aborted = 1;
    pthread_cond_broadcast(&p->barrier);
    pthread_mutex_unlock(&p->lock);
    for (int s = 0; s + 1 < p->stages; s++) {
        bg_channel_abort(p->forward[s]);
        bg_channel_abort(p->backward[s]);
    }
}

/* The topology's GPU (bg_topology_gpu's index) that a CUDA device is: the
 * one at the PCI address CUDA reports for it; -1 when there is none. */
static int topology_gpu(bg_topology_t *topo, const bg_device_t *dev) {
    bg_cuda_device_info_t info;
    int gpu = bg_cuda_device_info(dev->physical, &info) == BG_OK
                  ? bg_topology_gpu_find(topo, dev->physical, info.busid)
                  : -1;
    bg_error_clear();
    return gpu;
}

/* Binds the calling thread to a CPU device's core, or to the cores near a
 * GPU (its PCI address from CUDA, found in the topology's PCI tree). */
static void bind_device_thread(bg_topology_t *topo, const bg_device_t *dev) {
    if (dev->kind == BG_DEVICE_CPU) {
        (void)bg_topology_bind_thread(topo, dev->physical);
    } else {
        int gpu = topology_gpu(topo, dev);
        if (gpu >= 0) (void)bg_topology_bind_thread_near_gpu(topo, gpu);
    }
    bg_error_clear();
}

static void *device_main(void *arg) {
    device_worker_t *w = arg;
    bg_pipeline_t *p = w->p;
    const bg_device_t *dev = &p->cfg.devices->devices[w->device];
    /* Unbound is slower, not wrong: a refused binding is not an error. */
    if (p->cfg.topology != NULL) bind_device_thread(p->cfg.topology, dev);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->work, &p->lock);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        bg_status_t st = run_device(p, w->device);
        if (st != BG_OK) {
            /* Wake the stages waiting on this one; their own failures
             * ("aborted") are consequences, not the cause. */
            pthread_mutex_lock(&p->lock);
            int first_failure = p->status == BG_OK;
            if (first_failure) {
                p->status = st;
                snprintf(p->message, sizeof p->message, "%s", bg_error_message());
            }
            pthread_mutex_unlock(&p->lock);
            if (first_failure) abort_channels(p);
        }
        pthread_mutex_lock(&p->lock);
        if (--p->remaining == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* The message of a stalled step: the first failure, then every device's
 * last ops and what it was doing when the step stopped. */
static bg_status_t stall_report(bg_pipeline_t *p) {
    char text[4096];
    size_t at = (size_t)snprintf(text, sizeof text,
                                 "%s\nflight recorder (ms from the step's start):", p->message);
    for (int d = 0; d < p->devices && at < sizeof text; d++) {
        const device_worker_t *w = &p->workers[d];
        at += (size_t)snprintf(text + at, sizeof text - at,
                               "\n  %s:", p->cfg.devices->devices[d].name);
        int first = w->recent_count > RECORDER_DEPTH ? w->recent_count - RECORDER_DEPTH : 0;
        for (int i = first; i < w->recent_count && at < sizeof text; i++) {
            const flight_entry_t *e = &w->recent[i % RECORDER_DEPTH];
            char name[24];
            if (e->op.kind == BG_OP_STEP)
                snprintf(name, sizeof name, "step");
            else
                snprintf(name, sizeof name, "%s%d@%d",
                         e->op.kind == BG_OP_FORWARD    ? "F"
                         : e->op.kind == BG_OP_BACKWARD ? "B"
                                                        : "W",
                         e->op.microbatch, e->op.stage);
            if (e->end >= 0)
                at += (size_t)snprintf(text + at, sizeof text - at, " %s %.3f-%.3f%s", name,
                                       1e3 * e->start, 1e3 * e->end, e->failed ? " (failed)" : "");
            else
                at += (size_t)snprintf(text + at, sizeof text - at, " %s from %.3f (unfinished)",
                                       name, 1e3 * e->start);
        }
        if (at < sizeof text)
            at += (size_t)snprintf(text + at, sizeof text - at, "; last: %s", w->doing);
    }
    return bg_error_set(BG_ERR_STALLED, "%s", text);
}

/* Puts a GPU's events on the host's clock: each event with both marks gets
 * their times; one without (a mark the clock had no room for) is dropped,
 * as host and GPU times do not mix. Returns the last end, or `end`. */
static bg_status_t read_gpu_times(bg_pipeline_t *p, int d, double *end) {
    const int *marks = p->event_marks[d];
    int kept = 0;
    for (int i = 0; i < p->event_count[d]; i++) {
        if (marks[2 * i] < 0 || marks[2 * i + 1] < 0) continue;
        double a, b;
        BG_CHECK(bg_cuda_clock_seconds(p->clocks[d], marks[2 * i], &a));
        BG_CHECK(bg_cuda_clock_seconds(p->clocks[d], marks[2 * i + 1], &b));
        bg_event_t e = p->events[d][i];
        e.start = p->clock_zero[d] + a - p->origin;
        e.end = p->clock_zero[d] + b - p->origin;
        if (e.end + p->origin > *end) *end = e.end + p->origin;
        p->events[d][kept++] = e;
    }
    p->event_count[d] = kept;
    return BG_OK;
}

/* Moves the devices' events of the step just run into the timeline. */
static bg_status_t merge_events(bg_pipeline_t *p, double job_end) {
    int total = 0;
    for (int d = 0; d < p->devices; d++)
        if (gpu_timed(p, d)) BG_CHECK(read_gpu_times(p, d, &job_end));
    for (int d = 0; d < p->devices; d++) total += p->event_count[d];
    BG_CHECK(bg_timeline_reserve(p->record, total));
    for (int d = 0; d < p->devices; d++)
        for (int i = 0; i < p->event_count[d]; i++)
            BG_CHECK(bg_timeline_add(p->record, &p->events[d][i]));
    /* A GPU may finish the step after its host thread has. */
    bg_timeline_add_step(p->record, p->job_start - p->origin, job_end - p->origin);
    p->recorded_steps++;
    return BG_OK;
}

static bg_status_t run_job(bg_pipeline_t *p, pipeline_job_t job, const float *images,
                           const int32_t *labels, int64_t n, bg_pipeline_result_t *result) {
    if (n < 1 || n > p->cfg.batch)
        return bg_error_set(BG_ERR_INVALID, "a batch of %lld samples; the pipeline takes 1..%lld",
                            (long long)n, (long long)p->cfg.batch);
    p->job = job;
    p->images = images;
    p->labels = labels;
    p->batch = n;
    p->loss_sum = 0;
    p->correct = 0;
    for (int mb = 0, at = 0; mb < p->microbatches; mb++) {
        p->micro_size[mb] = n / p->microbatches + (mb < n % p->microbatches);
        p->micro_offset[mb] = at;
        at += (int)p->micro_size[mb];
    }
    const int recording = p->record != NULL && job == JOB_TRAIN;
    p->job_start = bg_channel_clock();
    if (recording) {
        if (p->recorded_steps == 0) p->origin = p->job_start;
        for (int d = 0; d < p->devices; d++) p->event_count[d] = 0;
    }
    bg_timeline_t *record = p->record;
    if (!recording) p->record = NULL; /* evaluation steps are not recorded */
    pthread_mutex_lock(&p->lock);
    p->status = BG_OK;
    p->nan_found = 0;
    p->nan_report[0] = '\0';
    p->aborted = 0;
    p->barrier_count = 0;
    p->remaining = p->devices;
    p->generation++;
    pthread_cond_broadcast(&p->work);
    while (p->remaining > 0) pthread_cond_wait(&p->done, &p->lock);
    bg_status_t st = p->status;
    pthread_mutex_unlock(&p->lock);
    double job_end = bg_channel_clock();
    p->record = record;
    if (recording && st == BG_OK) st = merge_events(p, job_end);
    if (st != BG_OK) {
        for (int s = 0; s + 1 < p->stages; s++) {
            bg_channel_reset(p->forward[s]);
            bg_channel_reset(p->backward[s]);
        }
        for (int s = 0; s < p->stages; s++) bg_stage_release_slots(p->stage[s]);
        if (st == BG_ERR_STALLED) return stall_report(p);
        return bg_error_set(st, "%s", p->message);
    }
    result->loss_sum = p->loss_sum;
    result->correct = p->correct;
    result->skipped = p->nan_found;
    snprintf(result->nan_report, sizeof result->nan_report, "%s", p->nan_report);
    if (p->nan_found)
        for (int s = 0; s < p->stages; s++) bg_stage_release_slots(p->stage[s]);
    return BG_OK;
}

bg_status_t bg_pipeline_train_step(bg_pipeline_t *p, const float *images, const int32_t *labels,
                                   int64_t n, bg_pipeline_result_t *result) {
    return run_job(p, JOB_TRAIN, images, labels, n, result);
}

bg_status_t bg_pipeline_evaluate(bg_pipeline_t *p, const float *images, const int32_t *labels,
                                 int64_t n, bg_pipeline_result_t *result) {
    return run_job(p, JOB_EVALUATE, images, labels, n, result);
}

/* ---- construction ---- */

static bg_status_t create_backends(bg_pipeline_t *p) {
    for (int d = 0; d < p->devices; d++) {
        const bg_device_t *dev = &p->cfg.devices->devices[d];
        if (dev->kind == BG_DEVICE_CUDA) {
            if (!bg_cuda_built())
                return bg_error_set(BG_ERR_UNSUPPORTED,
                                    "device %s: this build has no CUDA backend (use --devices "
                                    "cpu:N)",
                                    dev->name);
            if (dev->physical >= bg_cuda_device_count())
                return bg_error_set(BG_ERR_UNSUPPORTED,
                                    "device %s: CUDA sees %d GPU%s on this machine (use "
                                    "--devices cpu:N)",
                                    dev->name, bg_cuda_device_count(),
                                    bg_cuda_device_count() == 1 ? "" : "s");
            /* Channels between two CUDA stages copy on the receiver's copy
             * stream (scheduler/channel.h); with a CPU stage, through host
             * memory. */
            bg_cuda_config_t cuda = BG_CUDA_CONFIG_INIT;
            cuda.device = dev->physical;
            cuda.dtype = p->cfg.dtype;
            cuda.allow_tf32 = p->cfg.allow_tf32;
            BG_CHECK(bg_backend_cuda_create(&cuda, &p->backends[d]));
            continue;
        }
        bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
        cpu.dtype = p->cfg.dtype;
        cpu.index = d;
        BG_CHECK(bg_backend_cpu_create(&cpu, &p->backends[d]));
    }
    return BG_OK;
}

static bg_status_t create_schedules(bg_pipeline_t *p) {
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.kind = p->cfg.schedule;
    sc.devices = p->devices;
    sc.chunks = p->chunks;
    sc.microbatches = p->microbatches;
    BG_CHECK(bg_schedule_create(&sc, &p->train));
    sc.forward_only = 1;
    BG_CHECK(bg_schedule_create(&sc, &p->eval));
    for (int s = 0; s < p->stages; s++) {
        p->slots[s] = bg_schedule_stash_slots(p->train, s);
        if (p->slots[s] < 1) p->slots[s] = 1;
    }
    return BG_OK;
}

static bg_status_t create_stages(bg_pipeline_t *p) {
    for (int s = 0; s < p->stages; s++) {
        p->output_sent[s] = bg_calloc((size_t)p->slots[s], sizeof *p->output_sent[s]);
        if (p->output_sent[s] == NULL) return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory");
        bg_stage_config_t sc = BG_STAGE_CONFIG_INIT;
        sc.spec = p->cfg.spec;
        sc.first_layer = p->first[s];
        sc.last_layer = p->first[s + 1];
        sc.backend = stage_backend(p, s);
        sc.max_batch = p->max_micro;
        sc.seed = p->cfg.seed;
        sc.optimizer = p->cfg.optimizer;
        sc.stash_slots = p->slots[s];
        sc.split_backward = p->train->split_backward;
        sc.recompute = p->cfg.recompute;
        BG_CHECK(bg_stage_create(&sc, &p->stage[s]));
    }
    return BG_OK;
}

/* The NUMA node near device d's GPU, for host staging buffers that GPU
 * reads; -1 for a CPU device or where the topology does not say. */
static int staging_node(const bg_pipeline_t *p, int d) {
    const bg_device_t *dev = &p->cfg.devices->devices[d];
    if (p->cfg.topology == NULL || dev->kind != BG_DEVICE_CUDA) return -1;
    int gpu = topology_gpu(p->cfg.topology, dev);
    return gpu >= 0 ? bg_topology_gpu(p->cfg.topology, gpu).numa : -1;
}

static bg_status_t create_channels(bg_pipeline_t *p) {
    for (int s = 0; s + 1 < p->stages; s++) {
        char name[64];
        bg_channel_config_t cc = {
            .slot_bytes = stage_bytes(p, p->first[s + 1], p->max_micro),
            .capacity = bg_channel_ring_slots(p->devices, p->microbatches, s, s + 1),
            .name = name,
            .timeout_s = p->cfg.stall_timeout_s,
            .topology = p->cfg.topology,
            .force_staging = p->cfg.stage_through_host,
        };
        bg_backend_t *here = p->backends[s % p->devices], *next = p->backends[(s + 1) % p->devices];
        snprintf(name, sizeof name, "activations stage %d -> %d", s, s + 1);
        cc.sender = here;
        cc.receiver = next;
        cc.staging_node = staging_node(p, (s + 1) % p->devices);
        BG_CHECK(bg_channel_create(&cc, &p->forward[s]));
        snprintf(name, sizeof name, "gradients stage %d -> %d", s + 1, s);
        cc.sender = next;
        cc.receiver = here;
        cc.staging_node = staging_node(p, s % p->devices);
        BG_CHECK(bg_channel_create(&cc, &p->backward[s]));
    }
    return BG_OK;
}

/* Room for the NaN checks of a step: per stage of the device, a forward
 * output (or the loss) and an input gradient per micro-batch, and its
 * gradients. */
static bg_status_t allocate_checks(bg_pipeline_t *p) {
    for (int d = 0; d < p->devices; d++) {
        device_worker_t *w = &p->workers[d];
        for (int s = d; s < p->stages; s += p->devices)
            w->check_capacity += 2 * p->microbatches + 1;
        w->checks = bg_calloc((size_t)w->check_capacity, sizeof *w->checks);
        if (w->checks == NULL) return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory");
    }
    return BG_OK;
}

static bg_status_t start_workers(bg_pipeline_t *p) {
    for (int d = 0; d < p->devices; d++) {
        device_worker_t *w = &p->workers[d];
        w->p = p;
        w->device = d;
        if (pthread_create(&w->thread, NULL, device_main, w) != 0)
            return bg_error_set(BG_ERR_NOMEM, "cannot start the thread of device %s",
                                p->cfg.devices->devices[d].name);
        w->started = 1;
    }
    return BG_OK;
}

static bg_status_t allocate(bg_pipeline_t *p) {
    p->backends = bg_calloc((size_t)p->devices, sizeof *p->backends);
    p->stage = bg_calloc((size_t)p->stages, sizeof *p->stage);
    p->first = bg_calloc((size_t)p->stages + 1, sizeof *p->first);
    p->slots = bg_calloc((size_t)p->stages, sizeof *p->slots);
    p->forward = bg_calloc((size_t)p->stages, sizeof *p->forward);
    p->backward = bg_calloc((size_t)p->stages, sizeof *p->backward);
    p->output_sent = bg_calloc((size_t)p->stages, sizeof *p->output_sent);
    p->grad_sent = bg_calloc((size_t)p->stages, sizeof *p->grad_sent);
    p->workers = bg_calloc((size_t)p->devices, sizeof *p->workers);
    p->micro_offset = bg_calloc((size_t)p->microbatches, sizeof *p->micro_offset);
    p->micro_size = bg_calloc((size_t)p->microbatches, sizeof *p->micro_size);
    if (!p->backends || !p->stage || !p->first || !p->slots || !p->forward || !p->backward ||
        !p->output_sent || !p->grad_sent || !p->workers || !p->micro_offset || !p->micro_size)
        return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory");
    return BG_OK;
}

bg_status_t bg_pipeline_create(const bg_pipeline_config_t *cfg, bg_pipeline_t **out) {
    if (cfg->spec == NULL || cfg->devices == NULL || cfg->devices->count < 1)
        return bg_error_set(BG_ERR_INVALID, "pipeline: no model or no devices");
    if (cfg->chunks < 1 || cfg->microbatches < 1 || cfg->batch < 1)
        return bg_error_set(BG_ERR_INVALID,
                            "pipeline: chunks, micro-batches and batch must be >= 1");
    if (cfg->microbatches > cfg->batch)
        return bg_error_set(BG_ERR_INVALID,
                            "%d micro-batches of a %lld-sample batch would leave some empty",
                            cfg->microbatches, (long long)cfg->batch);
    const int stages = cfg->devices->count * cfg->chunks;
    if (stages > BG_MAX_STAGES)
        return bg_error_set(BG_ERR_INVALID, "%d stages; at most %d", stages, BG_MAX_STAGES);
    bg_pipeline_t *p = bg_calloc(1, sizeof *p);
    if (p == NULL) return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory");
    p->cfg = *cfg;
    p->devices = cfg->devices->count;
    p->chunks = cfg->chunks;
    p->stages = stages;
    p->microbatches = cfg->microbatches;
    p->max_micro = (cfg->batch + cfg->microbatches - 1) / cfg->microbatches;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    pthread_cond_init(&p->barrier, NULL);
    bg_status_t st;
    BG_CHECK_GOTO(allocate(p), st, fail);
    if (stages > cfg->spec->num_layers) {
        st = bg_error_set(BG_ERR_INVALID,
                          "%d stages (%d devices x %d chunks) but the model has only %d layers",
                          stages, p->devices, p->chunks, cfg->spec->num_layers);
        goto fail;
    }
    if (cfg->split != NULL)
        BG_CHECK_GOTO(check_split(cfg->spec, stages, cfg->split, p->first), st, fail);
    else
        BG_CHECK_GOTO(bg_pipeline_balance_split(cfg->spec, stages, p->first), st, fail);
    p->first[stages] = cfg->spec->num_layers;
    BG_CHECK_GOTO(create_schedules(p), st, fail);
    BG_CHECK_GOTO(create_backends(p), st, fail);
    BG_CHECK_GOTO(create_stages(p), st, fail);
    BG_CHECK_GOTO(create_channels(p), st, fail);
    BG_CHECK_GOTO(allocate_checks(p), st, fail);
    BG_CHECK_GOTO(start_workers(p), st, fail);
    *out = p;
    return BG_OK;
fail:
    bg_pipeline_destroy(p);
    return st;
}

void bg_pipeline_destroy(bg_pipeline_t *p) {
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int d = 0; p->workers != NULL && d < p->devices; d++)
        if (p->workers[d].started) pthread_join(p->workers[d].thread, NULL);
    /* A GPU may still copy between stages (copies run while the sender
     * computes on): let them end before their buffers are freed. */
    for (int d = 0; p->backends != NULL && d < p->devices; d++)
        if (p->backends[d] != NULL && p->backends[d]->ops->synchronize(p->backends[d]) != BG_OK)
            bg_error_clear();
    for (int s = 0; s < p->stages; s++) {
        if (p->stage != NULL) bg_stage_destroy(p->stage[s]);
        if (p->forward != NULL) bg_channel_destroy(p->forward[s]);
        if (p->backward != NULL) bg_channel_destroy(p->backward[s]);
        if (p->output_sent != NULL) free(p->output_sent[s]);
    }
    for (int d = 0; p->backends != NULL && d < p->devices; d++) bg_backend_destroy(p->backends[d]);
    bg_schedule_destroy(p->train);
    bg_schedule_destroy(p->eval);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->barrier);
    free(p->backends);
    free(p->stage);
    free(p->first);
    free(p->slots);
    free(p->forward);
    free(p->backward);
    free(p->output_sent);
    free(p->grad_sent);
    for (int d = 0; p->workers != NULL && d < p->devices; d++) free(p->workers[d].checks);
    free(p->workers);
    free(p->micro_offset);
    free(p->micro_size);
    for (int d = 0; p->events != NULL && d < p->devices; d++) free(p->events[d]);
    for (int d = 0; p->clocks != NULL && d < p->devices; d++) bg_cuda_clock_destroy(p->clocks[d]);
    for (int d = 0; p->event_marks != NULL && d < p->devices; d++) free(p->event_marks[d]);
    free(p->clocks);
    free(p->event_marks);
    free(p->clock_zero);
    free(p->events);
    free(p->event_count);
    free(p->event_capacity);
    free(p);
}

/* ---- recording ---- */

/* A clock for GPU device d, with room for both marks of `events` events
 * and the arrival marks of its receives. */
static bg_status_t create_clock(bg_pipeline_t *p, int d, int events) {
    if (p->clocks == NULL) {
        p->clocks = bg_calloc((size_t)p->devices, sizeof *p->clocks);
        p->event_marks = bg_calloc((size_t)p->devices, sizeof *p->event_marks);
        p->clock_zero = bg_calloc((size_t)p->devices, sizeof *p->clock_zero);
        if (p->clocks == NULL || p->event_marks == NULL || p->clock_zero == NULL)
            return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory for recording");
    }
    p->event_marks[d] = bg_malloc(sizeof **p->event_marks * (size_t)(2 * events));
    if (p->event_marks[d] == NULL)
        return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory for recording");
    return bg_cuda_clock_create(p->backends[d], 3 * events + 1, &p->clocks[d]);
}

bg_status_t bg_pipeline_record(bg_pipeline_t *p, bg_timeline_t *tl) {
    if (tl != NULL && p->events == NULL) {
        p->events = bg_calloc((size_t)p->devices, sizeof *p->events);
        p->event_count = bg_calloc((size_t)p->devices, sizeof *p->event_count);
        p->event_capacity = bg_calloc((size_t)p->devices, sizeof *p->event_capacity);
        if (!p->events || !p->event_count || !p->event_capacity)
            return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory for recording");
        for (int d = 0; d < p->devices; d++) {
            /* Per op at most: a wait and a copy in, the op, a wait and a copy out. */
            int capacity = 5 * p->train->op_counts[d] + 8;
            p->events[d] = bg_malloc(sizeof **p->events * (size_t)capacity);
            if (p->events[d] == NULL)
                return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory for recording");
            p->event_capacity[d] = capacity;
            if (bg_backend_is_cuda(p->backends[d])) BG_CHECK(create_clock(p, d, capacity));
        }
    }
    /* A timeline's times count from the start of its first recorded step. */
    if (tl != p->record) p->recorded_steps = tl != NULL ? tl->steps : 0;
    p->record = tl;
    return BG_OK;
}

bg_status_t bg_pipeline_timeline_create(const bg_pipeline_t *p, bg_timeline_t **out) {
    const char *names[BG_MAX_DEVICES];
    for (int d = 0; d < p->devices; d++) names[d] = p->cfg.devices->devices[d].name;
    bg_timeline_config_t tc = {
        .schedule = p->cfg.schedule,
        .devices = p->devices,
        .stages = p->stages,
        .chunks = p->chunks,
        .microbatches = p->microbatches,
        .device_names = names,
        .measured = 1,
    };
    return bg_timeline_create(&tc, out);
}

/* ---- queries ---- */

int bg_pipeline_stage_count(const bg_pipeline_t *p) { return p->stages; }

const bg_schedule_t *bg_pipeline_schedule(const bg_pipeline_t *p) { return p->train; }

bg_pipeline_stage_info_t bg_pipeline_stage_info(const bg_pipeline_t *p, int s) {
    bg_pipeline_stage_info_t info = {
        .first_layer = p->first[s],
        .last_layer = p->first[s + 1],
        .device = s % p->devices,
        .stash_slots = p->slots[s],
        .memory = bg_stage_memory(p->stage[s]),
    };
    snprintf(info.device_name, sizeof info.device_name, "%s",
             p->cfg.devices->devices[s % p->devices].name);
    if (s > 0) info.channel_bytes += bg_channel_bytes(p->forward[s - 1]);
    if (s + 1 < p->stages) info.channel_bytes += bg_channel_bytes(p->backward[s]);
    return info;
}

bg_status_t bg_pipeline_download_params(bg_pipeline_t *p, float *host) {
    int64_t at = 0;
    for (int s = 0; s < p->stages; s++) {
        BG_CHECK(bg_stage_download_params(p->stage[s], host + at));
        at += bg_stage_param_count(p->stage[s]);
    }
    return BG_OK;
}

bg_status_t bg_pipeline_download_optimizer_state(bg_pipeline_t *p, int k, float *host) {
    int64_t at = 0;
    for (int s = 0; s < p->stages; s++) {
        if (bg_stage_param_count(p->stage[s]) > 0)
            BG_CHECK(bg_stage_download_optimizer_state(p->stage[s], k, host + at));
        at += bg_stage_param_count(p->stage[s]);
    }
    return BG_OK;
}

bg_status_t bg_pipeline_upload_optimizer_state(bg_pipeline_t *p, int k, const float *host) {
    int64_t at = 0;
    for (int s = 0; s < p->stages; s++) {
        if (bg_stage_param_count(p->stage[s]) > 0)
            BG_CHECK(bg_stage_upload_optimizer_state(p->stage[s], k, host + at));
        at += bg_stage_param_count(p->stage[s]);
    }
    return BG_OK;
}

int64_t bg_pipeline_steps(const bg_pipeline_t *p) { return bg_stage_steps(p->stage[0]); }

void bg_pipeline_set_steps(bg_pipeline_t *p, int64_t steps) {
    for (int s = 0; s < p->stages; s++) bg_stage_set_steps(p->stage[s], steps);
}

bg_status_t bg_pipeline_upload_params(bg_pipeline_t *p, const float *host) {
    int64_t at = 0;
    for (int s = 0; s < p->stages; s++) {
        BG_CHECK(bg_stage_upload_params(p->stage[s], host + at));
        at += bg_stage_param_count(p->stage[s]);
    }
    return BG_OK;
}
