/* A device's ops within one job of the executor (scheduler/pipeline.h):
 * forwards and backwards with their receives and sends, the weight ops,
 * the optimizer step's barrier; what each op waits for on a GPU; the NaN
 * and Inf checks and the loss, left on the device until the step's end;
 * and the events that record it all. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pipeline_impl.h"
#include "monotonic.h"

/* A moment of a device's work: the host's clock, and on a GPU being
 * recorded the clock mark enqueued then (-1: none). */
typedef struct stamp {
    double host;
    int mark;
} stamp_t;

/* A clock mark of a GPU being recorded, else -1 (no work on CPU devices). */
static int gpu_mark(bg_pipeline_t *p, int device) {
    return gpu_timed(p, device) ? bg_cuda_clock_mark(p->clocks[device]) : -1;
}

static stamp_t stamp(bg_pipeline_t *p, int device) {
    return (stamp_t){bg_monotonic_seconds(), gpu_mark(p, device)};
}

/* Records one event of `device` when recording and returns it (NULL when
 * not recording); never allocates. */
static bg_event_t *note(bg_pipeline_t *p, int device, bg_event_kind_t kind, int stage, int mb,
                        int peer, stamp_t start, stamp_t end) {
    if (p->record == NULL || p->event_count[device] >= p->event_capacity[device]) return NULL;
    int i = p->event_count[device]++;
    p->events[device][i] =
        (bg_event_t){.kind = kind,
                     .device = device,
                     .stage = stage,
                     .microbatch = mb,
                     .peer_stage = peer,
                     .step = p->record->steps, /* this step's, merged at its end */
                     .start = start.host - p->origin,
                     .end = end.host - p->origin};
    if (p->event_marks != NULL && p->event_marks[device] != NULL) {
        p->event_marks[device][2 * i] = start.mark;
        p->event_marks[device][2 * i + 1] = end.mark;
        p->event_link[device][i] = NULL;
    }
    return &p->events[device][i];
}

/* Records the LINK event of a send by `device` from stage `from` to stage
 * `to`: its copy ran between the marks t->link_start and t->link_end of
 * `channel`'s link clocks (bg_channel_link_span). */
static void note_link(bg_pipeline_t *p, int device, bg_channel_t *channel, int to, int mb, int from,
                      const bg_channel_timing_t *t) {
    if (t->link_start < 0 || t->link_end < 0) return;
    /* The host's times are placeholders: read_gpu_times replaces them. */
    const stamp_t start = {t->ready, t->link_start}, end = {t->done, t->link_end};
    bg_event_t *e = note(p, device, BG_EVENT_LINK, to, mb, from, start, end);
    if (e == NULL) return;
    e->device = to % p->devices;
    p->event_link[device][e - p->events[device]] = channel;
}

static stamp_t host_stamp(double host) { return (stamp_t){host, -1}; }

/* Records the wait and the copy of a channel transfer with `peer`, done
 * between the GPU marks `before` and `after` (gpu_mark). On the host's
 * clock: the channel's own times. On a GPU's clock, for a channel between
 * GPUs: a receive waited from `before` until the message arrived
 * (t->ready_mark) and copied it out until `after`; a send only enqueues
 * its copy on the receiver's copy stream, so it takes about nothing, after
 * a wait until the host had ring space (t->ready_mark, when it waited for
 * it) during which the GPU may have run out of work. */
static void note_transfer(bg_pipeline_t *p, int device, bg_event_kind_t copy, int stage, int mb,
                          int peer, const bg_channel_timing_t *t, int before, int after) {
    const stamp_t start = {t->call, before}, end = {t->done, after};
    if (!gpu_timed(p, device)) {
        bg_event_t *wait = NULL;
        /* Only a real wait (polled or asleep): taking the lock is not one. */
        if (t->blocked && t->ready > t->call)
            wait = note(p, device, BG_EVENT_WAIT, stage, mb, peer, host_stamp(t->call),
                        host_stamp(t->ready));
        /* A send waits for a free slot, a receive for its message. */
        if (wait != NULL) wait->to_send = copy == BG_EVENT_SEND;
        bg_event_t *e =
            note(p, device, copy, stage, mb, peer, host_stamp(t->ready), host_stamp(t->done));
        if (e != NULL) e->tail_s = t->done - t->copied; /* the wake */
    } else if (t->ready_mark >= 0) {
        const stamp_t ready = {t->ready, t->ready_mark};
        bg_event_t *wait = note(p, device, BG_EVENT_WAIT, stage, mb, peer, start, ready);
        if (wait != NULL) wait->to_send = copy == BG_EVENT_SEND;
        note(p, device, copy, stage, mb, peer, ready, end);
    } else {
        note(p, device, copy, stage, mb, peer, start, end);
    }
}

/* Records an F or B of stage s from `start` to now, whose check of what
 * it sends began at `checked` (host time; the event's tail on a CPU; -1:
 * it sends nothing). */
static void note_op(bg_pipeline_t *p, int device, bg_event_kind_t kind, int s, int mb,
                    stamp_t start, double checked) {
    const stamp_t end = stamp(p, device);
    bg_event_t *e = note(p, device, kind, s, mb, -1, start, end);
    if (e != NULL && checked >= 0 && !gpu_timed(p, device)) e->tail_s = end.host - checked;
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
    w->checks[w->check_count] = (nan_check_t){s, mb, layer, what, bg_monotonic_seconds()};
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

/* What stage s's op on stash slot `slot` may overwrite of what it sent, as
 * its GPU work must wait for the copies still reading it: a forward writes
 * the slot's input and output; with recompute a backward or weight op
 * writes the (shared) output again; a backward writes the input gradient.
 * On CPU stages nothing is pending. */
typedef enum { WRITES_OUTPUT = 1, WRITES_INPUT_GRAD = 2 } sent_writes_t;

static bg_status_t wait_sent(bg_pipeline_t *p, int s, int slot, int writes) {
    bg_backend_t *be = stage_backend(p, s);
    if (writes & WRITES_OUTPUT) BG_CHECK(bg_channel_wait_sent(be, p->output_sent[s][slot]));
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
    const int device = s % p->devices;
    /* The forward's event holds the loading of its samples and labels
     * (as the profile's forward does) and the check of what it sends (the
     * profile's check; the simulator adds it to the op's event too). It
     * starts here on the first stage, after the receive on the others: one
     * stamp either way, as a GPU's clock has room for so many marks. */
    stamp_t start = {0, -1};
    if (s == 0) start = stamp(p, device);
    if (s == 0 && n > 0)
        BG_CHECK(bg_stage_load_slot_async(stage, slot, n, p->images + at * in_numel,
                                          last ? p->labels + at : NULL));
    bg_channel_timing_t t = {.clock = gpu_timed(p, device) ? p->clocks[device] : NULL,
                             .time_link = gpu_timed(p, device)};
    if (s > 0) {
        size_t got;
        set_doing(p, s, "waiting for activations from stage %d", s - 1);
        int before = gpu_mark(p, device);
        BG_CHECK(bg_channel_recv_trading(p->forward[s - 1], be, mb,
                                         bg_stage_slot_input_ref(stage, slot),
                                         stage_bytes(p, p->first[s], p->max_micro), &got, &t));
        note_transfer(p, device, BG_EVENT_RECV, s, mb, s - 1, &t, before, gpu_mark(p, device));
        start = stamp(p, device);
        if (last && n > 0) BG_CHECK(bg_stage_load_slot_async(stage, slot, n, NULL, p->labels + at));
    }
    const int out_layer = p->first[s + 1] - 1;
    /* The loss stays on the device until the step's end (take_results). */
    int loss_tag = -1;
    if (last && p->cfg.check_finite && n > 0)
        BG_CHECK(log_check(p, s, mb, out_layer, "the loss", &loss_tag));
    set_doing(p, s, "computing a forward on stage %d", s);
    bg_stage_slot_set_first_sample(stage, slot, at); /* dropout's draw */
    if (last) {
        BG_CHECK(bg_stage_forward_slot_deferred(stage, slot, n, p->job == JOB_TRAIN, loss_tag));
        p->workers[device].loss_pending = 1;
    } else {
        BG_CHECK(bg_stage_forward_slot(stage, slot, n, p->job == JOB_TRAIN, NULL));
    }
    if (s == p->cfg.nan_stage && mb == p->cfg.nan_microbatch && p->job == JOB_TRAIN && n > 0) {
        const double nan = NAN;
        BG_CHECK(bg_backend_upload_doubles(be, (void *)bg_stage_slot_output(stage, slot), &nan, 1));
    }
    const double checked = last ? -1 : bg_monotonic_seconds();
    if (!last)
        BG_CHECK(check_finite(p, s, mb, out_layer, bg_stage_slot_output(stage, slot),
                              n * bg_shape_numel(p->cfg.spec->layers[out_layer].out),
                              "the forward output"));
    note_op(p, device, BG_EVENT_FORWARD, s, mb, start, checked);
    if (!last) {
        set_doing(p, s, "sending activations to stage %d", s + 1);
        int before = gpu_mark(p, device);
        BG_CHECK(bg_channel_send(p->forward[s], be, mb, bg_stage_slot_output(stage, slot),
                                 stage_bytes(p, p->first[s + 1], n), &t, p->output_sent[s][slot]));
        note_transfer(p, device, BG_EVENT_SEND, s, mb, s + 1, &t, before, gpu_mark(p, device));
        note_link(p, device, p->forward[s], s + 1, mb, s, &t);
    }
    return BG_OK;
}

/* After the op of `kind` that completes stage s's weight gradients for the
 * step (the last micro-batch's B, or W when split), checks them for NaN and
 * Inf within that op's event: the barrier of the optimizer step then only
 * gathers what every device found, and the check shows as the work it is. */
static bg_status_t check_weight_gradients(bg_pipeline_t *p, int s, int mb, bg_op_kind_t kind) {
    if (!p->cfg.check_finite || kind != bg_schedule_gradient_kind(p->train) ||
        mb != p->last_gradient_mb[s])
        return BG_OK;
    int tag = 0;
    BG_CHECK(log_check(p, s, -1, -1, "the accumulated weight gradient", &tag));
    return bg_stage_mark_nonfinite_grads(p->stage[s], tag);
}

static bg_status_t run_backward(bg_pipeline_t *p, int s, int mb) {
    bg_stage_t *stage = p->stage[s];
    bg_backend_t *be = stage_backend(p, s);
    const int64_t n = p->micro_size[mb];
    const int device = s % p->devices;
    bg_channel_timing_t t = {.clock = gpu_timed(p, device) ? p->clocks[device] : NULL,
                             .time_link = gpu_timed(p, device)};
    if (s < p->stages - 1) {
        size_t got;
        set_doing(p, s, "waiting for gradients from stage %d", s + 1);
        int before = gpu_mark(p, device);
        BG_CHECK(bg_channel_recv_trading(p->backward[s], be, mb, bg_stage_output_grad_ref(stage),
                                         stage_bytes(p, p->first[s + 1], p->max_micro), &got, &t));
        note_transfer(p, device, BG_EVENT_RECV, s, mb, s + 1, &t, before, gpu_mark(p, device));
    }
    set_doing(p, s, "computing a backward on stage %d", s);
    BG_CHECK(wait_sent(p, s, mb % p->slots[s],
                       WRITES_INPUT_GRAD | (p->cfg.recompute ? WRITES_OUTPUT : 0)));
    stamp_t start = stamp(p, device);
    BG_CHECK(bg_stage_backward_slot(stage, mb % p->slots[s], n, 1.0 / (double)p->batch));
    BG_CHECK(check_weight_gradients(p, s, mb, BG_OP_BACKWARD));
    const double checked = s > 0 ? bg_monotonic_seconds() : -1;
    if (s > 0) /* within the backward's event, as in the forward's */
        BG_CHECK(check_finite(p, s, mb, p->first[s], bg_stage_input_grad(stage),
                              n * bg_shape_numel(p->cfg.spec->layers[p->first[s]].in),
                              "the gradient of its input"));
    note_op(p, device, BG_EVENT_BACKWARD, s, mb, start, checked);
    if (s > 0) {
        set_doing(p, s, "sending gradients to stage %d", s - 1);
        int before = gpu_mark(p, device);
        BG_CHECK(bg_channel_send(p->backward[s - 1], be, mb, bg_stage_input_grad(stage),
                                 stage_bytes(p, p->first[s], n), &t, &p->grad_sent[s]));
        note_transfer(p, device, BG_EVENT_SEND, s, mb, s - 1, &t, before, gpu_mark(p, device));
        note_link(p, device, p->backward[s - 1], s - 1, mb, s, &t);
    }
    return BG_OK;
}

/* Every device has checked its weight gradients (check_weight_gradients)
 * and waits here until all have: the step is taken everywhere or nowhere. */
static bg_status_t step_barrier(bg_pipeline_t *p, int device) {
    BG_CHECK(take_results(p, device));
    pthread_mutex_lock(&p->lock);
    uint64_t round = p->barrier_round;
    if (++p->barrier_count == p->devices) {
        p->barrier_count = 0;
        p->barrier_round++;
        pthread_cond_broadcast(&p->barrier);
    }
    /* A stall timeout of 0 waits as long as it takes, as the channels do. */
    const int forever = !(p->cfg.stall_timeout_s > 0);
    const struct timespec deadline = bg_monotonic_deadline(forever ? 0 : p->cfg.stall_timeout_s);
    int timed_out = 0;
    while (p->barrier_round == round && !p->aborted && !timed_out) {
        if (forever)
            pthread_cond_wait(&p->barrier, &p->lock);
        else
            timed_out = pthread_cond_timedwait(&p->barrier, &p->lock, &deadline) == ETIMEDOUT;
    }
    if (p->barrier_round != round) timed_out = 0; /* the round ended as the wait timed out */
    /* This device leaves the round: a device arriving before its failure
     * aborts the job must not end the round, and take a step this one
     * does not. */
    if (timed_out) p->barrier_count--;
    int aborted = p->aborted, skip = p->nan_found;
    pthread_mutex_unlock(&p->lock);
    if (aborted) return bg_error_set(BG_ERR_INTERNAL, "aborted at the optimizer step");
    if (timed_out)
        return bg_error_set(BG_ERR_STALLED,
                            "waited at the optimizer step for the other devices longer than the "
                            "stall timeout");
    return skip ? BG_ERR_NUMERIC : BG_OK;
}

/* After the barrier, every layer's sum of squares is in: each device adds
 * them in layer order (the same norm on every device and placement) and
 * scales its stages' gradients where the norm is over the limit. */
static bg_status_t clip_gradients(bg_pipeline_t *p, int device) {
    double squares = 0;
    for (int l = 0; l < p->cfg.spec->num_layers; l++) squares += p->layer_squares[l];
    const double norm = sqrt(squares), factor = p->cfg.clip_grad_norm / (norm + 1e-6);
    if (device == 0) { /* the job's result; read once every device is done */
        p->grad_norm = norm;
        p->clipped = factor < 1;
    }
    if (!(factor < 1)) return BG_OK;
    for (int s = device; s < p->stages; s += p->devices)
        BG_CHECK(bg_stage_scale_grads(p->stage[s], factor));
    return BG_OK;
}

/* The op itself, between NVTX range marks named like the trace's ops. */
static bg_status_t run_op_marked(bg_pipeline_t *p, int device, const bg_op_t *op);

static bg_status_t run_op(bg_pipeline_t *p, int device, const bg_op_t *op) {
    bg_nvtx_push_op(bg_op_letter(op->kind), op->kind == BG_OP_STEP ? -1 : op->microbatch,
                    op->stage);
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
        BG_CHECK(check_weight_gradients(p, op->stage, op->microbatch, BG_OP_WEIGHT));
        note(p, device, BG_EVENT_WEIGHT, op->stage, op->microbatch, -1, start, stamp(p, device));
        return BG_OK;
    case BG_OP_STEP: {
        /* Clipping's pass over each stage's gradients is work of its
         * update, recorded so, not as the barrier's wait after it (until
         * 2026-12-06 it was counted as waiting). */
        if (p->job == JOB_TRAIN && p->cfg.clip_grad_norm > 0)
            for (int s = device; s < p->stages; s += p->devices) {
                BG_CHECK(bg_stage_grad_square_sums(p->stage[s], p->layer_squares + p->first[s]));
                const stamp_t summed = stamp(p, device);
                note(p, device, BG_EVENT_STEP, s, -1, -1, start, summed);
                start = summed;
            }
        snprintf(p->workers[device].doing, sizeof p->workers[device].doing,
                 "waiting for every device to reach the optimizer step");
        bg_status_t st = step_barrier(p, device);
        /* The barrier is waiting, not work: a WAIT on no particular stage
         * (on a GPU's clock it is idle time, as nothing was enqueued). */
        stamp_t stepping = stamp(p, device);
        if (!gpu_timed(p, device)) note(p, device, BG_EVENT_WAIT, device, -1, -1, start, stepping);
        start = stepping;
        if (st == BG_ERR_NUMERIC) { /* skipped everywhere; reported by run_job */
            for (int s = device; s < p->stages; s += p->devices)
                BG_CHECK(bg_stage_zero_grads(p->stage[s]));
            p->workers[device].grads_zero = 1;
            return BG_OK;
        }
        BG_CHECK(st);
        if (p->cfg.clip_grad_norm > 0) BG_CHECK(clip_gradients(p, device));
        /* One event per stage, so that each stage's row counts its own
         * update (a device holds several with interleaving), and the
         * zeroing of its gradients for the next step with it. */
        for (int s = device; s < p->stages; s += p->devices) {
            BG_CHECK(bg_stage_step(p->stage[s]));
            BG_CHECK(bg_stage_zero_grads(p->stage[s]));
            const stamp_t stepped = stamp(p, device);
            note(p, device, BG_EVENT_STEP, s, -1, -1, start, stepped);
            start = stepped;
        }
        p->workers[device].grads_zero = 1;
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

bg_status_t bg_pipeline_run_device(bg_pipeline_t *p, int device) {
    const bg_schedule_t *schedule = p->job == JOB_TRAIN ? p->train : p->eval;
    device_worker_t *w = &p->workers[device];
    /* The last optimizer step zeroed the gradients; the first step, and one
     * after a step that failed before its update, zero them here. */
    if (p->job == JOB_TRAIN) {
        if (!w->grads_zero)
            for (int s = device; s < p->stages; s += p->devices)
                BG_CHECK(bg_stage_zero_grads(p->stage[s]));
        w->grads_zero = 0;
    }
    w->recent_count = 0;
    w->stopped_stage = -1;
    if (w->check_count > 0 || w->loss_pending) { /* left by a failed job: forget them */
        bg_backend_t *be = p->backends[device];
        int stale;
        double loss;
        int64_t correct;
        /* What they say (a bad label of that job's batch, say) belongs to
         * the failed job, not to this one. */
        if (be->ops->take_nonfinite(be, &stale) != BG_OK) bg_error_clear();
        if (be->ops->take_loss(be, &loss, &correct) != BG_OK) bg_error_clear();
        w->check_count = 0;
        w->loss_pending = 0;
    }
    if (gpu_timed(p, device)) {
        BG_CHECK(bg_cuda_clock_restart(p->clocks[device], &p->clock_zero[device]));
        /* The link clocks of the channels this device sends on: only its
         * thread marks them. */
        for (int s = device; s < p->stages; s += p->devices) {
            if (s + 1 < p->stages) BG_CHECK(bg_channel_restart_links(p->forward[s]));
            if (s > 0) BG_CHECK(bg_channel_restart_links(p->backward[s - 1]));
        }
    }
    for (int i = 0; i < schedule->op_counts[device]; i++) {
        const bg_op_t *op = &schedule->ops[device][i];
        flight_entry_t *e = &w->recent[w->recent_count++ % RECORDER_DEPTH];
        *e = (flight_entry_t){*op, bg_monotonic_seconds() - p->job_start, -1, 0};
        bg_status_t st = run_op(p, device, op);
        e->end = bg_monotonic_seconds() - p->job_start;
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
