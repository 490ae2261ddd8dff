/* Running the executor's jobs (scheduler/pipeline.h): the device workers'
 * threads, a training step or an evaluation handed to them and waited for,
 * the stall report, the recorded timeline, and the pipeline's queries and
 * state transfers. Building it is scheduler/pipeline_create.c; a device's
 * ops within a job, scheduler/pipeline_ops.c. */
#include "pipeline.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "pipeline_impl.h"
#include "monotonic.h"
#include "spin_pause.h"

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
int bg_pipeline_topology_gpu(bg_topology_t *topo, const bg_device_t *dev) {
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
        int gpu = bg_pipeline_topology_gpu(topo, dev);
        if (gpu >= 0) (void)bg_topology_bind_thread_near_gpu(topo, gpu);
    }
    bg_error_clear();
}

/* Whether no job later than `seen` is posted yet (destroy posts one too,
 * so that a poll ends at once). */
static int job_not_posted(const bg_pipeline_t *p, uint64_t seen) {
    return atomic_load_explicit(&p->generation, memory_order_acquire) == seen;
}

/* Whether devices still run the job (`unused`: job_not_posted's `seen`). */
static int job_running(const bg_pipeline_t *p, uint64_t unused) {
    (void)unused;
    return atomic_load_explicit(&p->remaining, memory_order_acquire) > 0;
}

/* With the lock held: waits on `cond` while pending(p, seen), polling for
 * `poll_s` seconds with the lock released before it sleeps. */
static void poll_then_wait(bg_pipeline_t *p, pthread_cond_t *cond,
                           int (*pending)(const bg_pipeline_t *, uint64_t), uint64_t seen,
                           double poll_s) {
    if (poll_s > 0 && pending(p, seen)) {
        const double until = bg_monotonic_seconds() + poll_s;
        pthread_mutex_unlock(&p->lock);
        while (pending(p, seen) && bg_monotonic_seconds() < until) bg_spin_pause();
        pthread_mutex_lock(&p->lock);
    }
    while (pending(p, seen)) pthread_cond_wait(cond, &p->lock);
}

void *bg_pipeline_device_main(void *arg) {
    device_worker_t *w = arg;
    bg_pipeline_t *p = w->p;
    const bg_device_t *dev = &p->cfg.devices->devices[w->device];
    /* Unbound is slower, not wrong: a refused binding is not an error. */
    if (p->cfg.topology != NULL) bind_device_thread(p->cfg.topology, dev);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        poll_then_wait(p, &p->work, job_not_posted, seen, p->poll_s);
        if (p->quit) break;
        seen = atomic_load_explicit(&p->generation, memory_order_relaxed);
        pthread_mutex_unlock(&p->lock);
        bg_status_t st = bg_pipeline_run_device(p, w->device);
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
        /* A load and a store, with the lock held (as the channels count,
         * for GCC 12's ASan). A caller that polls sees it, then takes the
         * lock before it reads the job's results. */
        const int left = atomic_load_explicit(&p->remaining, memory_order_relaxed) - 1;
        atomic_store_explicit(&p->remaining, left, memory_order_release);
        if (left == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* The message of a stalled step: the first failure; in its detail, every
 * device's last ops and what it was doing when the step stopped. */
static bg_status_t stall_report(bg_pipeline_t *p) {
    char text[BG_ERROR_MAX];
    size_t at = (size_t)snprintf(text, sizeof text, "flight recorder (ms from the step's start):");
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
                snprintf(name, sizeof name, "%s%d@%d", bg_op_letter(e->op.kind), e->op.microbatch,
                         e->op.stage);
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
    bg_error_set(BG_ERR_STALLED, "%s", p->message);
    bg_error_set_detail("%s", text);
    return BG_ERR_STALLED;
}

/* Puts a GPU's events on the host's clock: each event with both marks gets
 * their times (its LINK events' from their channels' link clocks); one
 * without (a mark the clock had no room for) is dropped, as host and GPU
 * times do not mix. Raises *end to the last end, if later. */
static bg_status_t read_gpu_times(bg_pipeline_t *p, int d, double *end) {
    const int *marks = p->event_marks[d];
    int kept = 0;
    for (int i = 0; i < p->event_count[d]; i++) {
        if (marks[2 * i] < 0 || marks[2 * i + 1] < 0) continue;
        double a, b;
        bg_channel_t *link = p->event_link[d][i];
        if (link != NULL) {
            /* A copy between stages, by its channel's link clocks. */
            BG_CHECK(bg_channel_link_span(link, marks[2 * i], marks[2 * i + 1], &a, &b));
        } else {
            BG_CHECK(bg_cuda_clock_seconds(p->clocks[d], marks[2 * i], &a));
            BG_CHECK(bg_cuda_clock_seconds(p->clocks[d], marks[2 * i + 1], &b));
            a += p->clock_zero[d];
            b += p->clock_zero[d];
        }
        bg_event_t e = p->events[d][i];
        e.start = a - p->origin;
        e.end = b - p->origin;
        if (e.end + p->origin > *end) *end = e.end + p->origin;
        p->events[d][kept] = e;
        p->event_link[d][kept++] = link;
    }
    p->event_count[d] = kept;
    return BG_OK;
}

/* The monotonic clock's seconds at `tl`'s time 0, a step about to be
 * recorded into it starting at `now`: its first recorder's start, kept in
 * the timeline. One with steps that no pipeline recorded (a simulator's)
 * goes on from its last step's end. Until 2026-12-06 the origin was the
 * pipeline's: recording into two timelines in turn timed the first's later
 * steps from the second's start, and a second pipeline going on with a
 * timeline timed its steps from the clock's zero (a review). */
static double clock_origin(bg_timeline_t *tl, double now) {
    if (!tl->has_clock) {
        tl->clock_origin = now - (tl->steps > 0 ? tl->step_end[tl->steps - 1] : 0);
        tl->has_clock = 1;
    }
    return tl->clock_origin;
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
    return BG_OK;
}

/* Whether an end of the pipeline is on a GPU: it has pinned batch sets. */
static int has_pinned_sets(const bg_pipeline_t *p) {
    return p->pinned_images[0] != NULL || p->pinned_labels[0] != NULL;
}

/* Hands out a free pinned set (the one not handed out last, where both
 * are free) into *set, once the GPUs are done with a failed job's uploads
 * from it. */
static bg_status_t hand_out_set(bg_pipeline_t *p, int *set_out) {
    int set = p->pinned_next;
    if (p->pinned_handed[set]) set = !set;
    if (p->pinned_handed[set])
        return bg_error_set(BG_ERR_INVALID,
                            "both sets of batch buffers are handed out and no job "
                            "has read either (a batch gathered and not trained on)");
    p->pinned_next = !set;
    if (p->pinned_reading[set]) { /* the uploads of a job that failed */
        if (p->pinned_images[set] != NULL)
            BG_CHECK(stage_backend(p, 0)->ops->synchronize(stage_backend(p, 0)));
        if (p->pinned_labels[set] != NULL)
            BG_CHECK(
                stage_backend(p, p->stages - 1)->ops->synchronize(stage_backend(p, p->stages - 1)));
        p->pinned_reading[set] = 0;
    }
    p->pinned_handed[set] = 1;
    *set_out = set;
    return BG_OK;
}

bg_status_t bg_pipeline_batch_buffers(bg_pipeline_t *p, float **images, int32_t **labels) {
    if (!has_pinned_sets(p)) return BG_OK;
    int set = 0;
    BG_CHECK(hand_out_set(p, &set));
    if (p->pinned_images[set] != NULL) *images = p->pinned_images[set];
    if (p->pinned_labels[set] != NULL) *labels = p->pinned_labels[set];
    return BG_OK;
}

/* Points the job at its batch: the caller's arrays, or for stages on GPUs
 * a set of pinned ones, into which the batch is copied unless the caller
 * gathered it there, after bg_pipeline_batch_buffers handed the set out (a
 * caller that kept the pointers from an earlier job is handed a set and
 * copied from, as a caller with arrays of its own). */
static bg_status_t pin_batch(bg_pipeline_t *p, const float *images, const int32_t *labels,
                             int64_t n) {
    p->images = images;
    p->labels = labels;
    p->job_set = -1;
    if (!has_pinned_sets(p)) return BG_OK;
    int set = -1;
    for (int k = 0; k < 2 && set < 0; k++)
        if (p->pinned_handed[k] && (p->pinned_images[k] == NULL || images == p->pinned_images[k]) &&
            (p->pinned_labels[k] == NULL || labels == p->pinned_labels[k]))
            set = k; /* gathered there */
    if (set < 0) {   /* the caller's own arrays: copied into a free set */
        BG_CHECK(hand_out_set(p, &set));
        if (p->pinned_images[set] != NULL) {
            if (p->pinned_images[set] != images)
                memcpy(p->pinned_images[set], images,
                       sizeof(float) * (size_t)(n * bg_shape_numel(p->cfg.spec->input)));
            p->images = p->pinned_images[set];
        }
        if (p->pinned_labels[set] != NULL) {
            if (p->pinned_labels[set] != labels)
                memcpy(p->pinned_labels[set], labels, sizeof(int32_t) * (size_t)n);
            p->labels = p->pinned_labels[set];
        }
    }
    p->pinned_handed[set] = 0; /* this job reads it */
    p->pinned_reading[set] = 1;
    p->job_set = set;
    return BG_OK;
}

bg_status_t bg_pipeline_check_batch(const bg_pipeline_t *p, int64_t batch, bg_shape_t sample) {
    const bg_shape_t in = p->cfg.spec->input;
    if (batch < 1 || batch > p->cfg.batch)
        return bg_error_set(BG_ERR_INVALID, "a batch of %lld samples; the pipeline takes 1..%lld",
                            (long long)batch, (long long)p->cfg.batch);
    if (sample.c != in.c || sample.h != in.h || sample.w != in.w)
        return bg_error_set(BG_ERR_INVALID,
                            "samples of %lldx%lldx%lld; the pipeline's model takes %lldx%lldx%lld",
                            (long long)sample.c, (long long)sample.h, (long long)sample.w,
                            (long long)in.c, (long long)in.h, (long long)in.w);
    return BG_OK;
}

static bg_status_t run_job(bg_pipeline_t *p, pipeline_job_t job, const float *images,
                           const int32_t *labels, int64_t n, bg_pipeline_result_t *result,
                           bg_pipeline_meanwhile_fn meanwhile, void *ctx) {
    if (n < 1 || n > p->cfg.batch)
        return bg_error_set(BG_ERR_INVALID, "a batch of %lld samples; the pipeline takes 1..%lld",
                            (long long)n, (long long)p->cfg.batch);
    p->job = job;
    BG_CHECK(pin_batch(p, images, labels, n));
    p->batch = n;
    p->loss_sum = 0;
    p->correct = 0;
    int64_t at = 0;
    for (int mb = 0; mb < p->microbatches; mb++) {
        p->micro_size[mb] = n / p->microbatches + (mb < n % p->microbatches);
        p->micro_offset[mb] = at;
        at += p->micro_size[mb];
    }
    const int recording = p->record != NULL && job == JOB_TRAIN;
    p->job_start = bg_monotonic_seconds();
    if (recording) {
        p->origin = clock_origin(p->record, p->job_start);
        for (int d = 0; d < p->devices; d++) p->event_count[d] = 0;
    }
    bg_timeline_t *record = p->record;
    if (!recording) p->record = NULL; /* evaluation steps are not recorded */
    pthread_mutex_lock(&p->lock);
    p->status = BG_OK;
    p->nan_found = 0;
    p->grad_norm = 0;
    p->clipped = 0;
    p->nan_report[0] = '\0';
    p->aborted = 0;
    p->barrier_count = 0;
    atomic_store_explicit(&p->remaining, p->devices, memory_order_relaxed);
    atomic_store_explicit(&p->generation,
                          atomic_load_explicit(&p->generation, memory_order_relaxed) + 1,
                          memory_order_release);
    pthread_cond_broadcast(&p->work);
    if (meanwhile != NULL) {
        pthread_mutex_unlock(&p->lock);
        meanwhile(ctx);
        pthread_mutex_lock(&p->lock);
    }
    poll_then_wait(p, &p->done, job_running, 0, p->done_poll_s);
    bg_status_t st = p->status;
    pthread_mutex_unlock(&p->lock);
    double job_end = bg_monotonic_seconds();
    p->record = record;
    if (st != BG_OK) {
        for (int s = 0; s + 1 < p->stages; s++) {
            bg_channel_reset(p->forward[s]);
            bg_channel_reset(p->backward[s]);
        }
        for (int s = 0; s < p->stages; s++) bg_stage_release_slots(p->stage[s]);
        if (st == BG_ERR_STALLED) return stall_report(p);
        return bg_error_set(st, "%s", p->message);
    }
    if (p->job_set >= 0) p->pinned_reading[p->job_set] = 0; /* its results came after them */
    result->loss_sum = p->loss_sum;
    result->correct = p->correct;
    result->skipped = p->nan_found;
    result->grad_norm = p->grad_norm;
    result->clipped = p->clipped;
    snprintf(result->nan_report, sizeof result->nan_report, "%s", p->nan_report);
    if (p->nan_found)
        for (int s = 0; s < p->stages; s++) bg_stage_release_slots(p->stage[s]);
    /* The step ran; an error here (reading a GPU's clock) is the main
     * thread's own, with its own message. */
    if (recording) BG_CHECK(merge_events(p, job_end));
    return BG_OK;
}

bg_status_t bg_pipeline_train_step(bg_pipeline_t *p, const float *images, const int32_t *labels,
                                   int64_t n, bg_pipeline_result_t *result) {
    return bg_pipeline_train_step_meanwhile(p, images, labels, n, result, NULL, NULL);
}

bg_status_t bg_pipeline_train_step_meanwhile(bg_pipeline_t *p, const float *images,
                                             const int32_t *labels, int64_t n,
                                             bg_pipeline_result_t *result,
                                             bg_pipeline_meanwhile_fn meanwhile, void *ctx) {
    if (p->cfg.forward_only)
        return bg_error_set(BG_ERR_INVALID, "a forward-only pipeline evaluates: it trains no step");
    return run_job(p, JOB_TRAIN, images, labels, n, result, meanwhile, ctx);
}

bg_status_t bg_pipeline_evaluate(bg_pipeline_t *p, const float *images, const int32_t *labels,
                                 int64_t n, bg_pipeline_result_t *result) {
    return run_job(p, JOB_EVALUATE, images, labels, n, result, NULL, NULL);
}

/* ---- recording ---- */

/* A clock for GPU device d, with room for both marks of `events` events
 * and the ready marks of its transfers (bg_channel_timing_t). */
static bg_status_t create_clock(bg_pipeline_t *p, int d, int events) {
    if (p->clocks == NULL) {
        p->clocks = bg_calloc((size_t)p->devices, sizeof *p->clocks);
        p->event_marks = bg_calloc((size_t)p->devices, sizeof *p->event_marks);
        p->clock_zero = bg_calloc((size_t)p->devices, sizeof *p->clock_zero);
        p->event_link = bg_calloc((size_t)p->devices, sizeof *p->event_link);
        if (p->clocks == NULL || p->event_marks == NULL || p->clock_zero == NULL ||
            p->event_link == NULL)
            return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory for recording");
    }
    p->event_marks[d] = bg_malloc(sizeof **p->event_marks * (size_t)(2 * events));
    p->event_link[d] = bg_calloc((size_t)events, sizeof **p->event_link);
    if (p->event_marks[d] == NULL || p->event_link[d] == NULL) {
        /* Both or neither: note() writes to both once event_marks[d] is. */
        free(p->event_marks[d]);
        free(p->event_link[d]);
        p->event_marks[d] = NULL;
        p->event_link[d] = NULL;
        return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory for recording");
    }
    return bg_cuda_clock_create(p->backends[d], BG_CUDA_CLOCK_COMPUTE, 3 * events + 1,
                                &p->clocks[d]);
}

/* The most events device d records in a step. Per op at most: a wait and
 * a copy in, the op, a wait and a copy out and that copy's link; the step
 * op a wait and two events per stage of the device (with clipping, its
 * pass over the gradients before the wait, and the update). */
static int step_events_most(const bg_pipeline_t *p, int d) {
    return 6 * p->train->op_counts[d] + 8 + 2 * (p->stages / p->devices);
}

bg_status_t bg_pipeline_check_record_room(const bg_pipeline_t *p, int64_t steps) {
    int64_t events = 0;
    for (int d = 0; d < p->devices; d++) events += step_events_most(p, d);
    return bg_timeline_check_room(steps * events, BG_ERR_INVALID);
}

void bg_pipeline_free_recording(bg_pipeline_t *p) {
    for (int d = 0; p->clocks != NULL && d < p->devices; d++) bg_cuda_clock_destroy(p->clocks[d]);
    for (int d = 0; p->events != NULL && d < p->devices; d++) free(p->events[d]);
    for (int d = 0; p->event_marks != NULL && d < p->devices; d++) free(p->event_marks[d]);
    for (int d = 0; p->event_link != NULL && d < p->devices; d++) free(p->event_link[d]);
    free(p->clocks);
    free(p->event_marks);
    free(p->event_link);
    free(p->clock_zero);
    free(p->events);
    free(p->event_count);
    free(p->event_capacity);
    p->clocks = NULL;
    p->event_marks = NULL;
    p->event_link = NULL;
    p->clock_zero = NULL;
    p->events = NULL;
    p->event_count = NULL;
    p->event_capacity = NULL;
}

/* Every device's event buffer, and the clocks of those on GPUs and of the
 * channels between them. */
static bg_status_t start_recording(bg_pipeline_t *p) {
    p->events = bg_calloc((size_t)p->devices, sizeof *p->events);
    p->event_count = bg_calloc((size_t)p->devices, sizeof *p->event_count);
    p->event_capacity = bg_calloc((size_t)p->devices, sizeof *p->event_capacity);
    if (!p->events || !p->event_count || !p->event_capacity)
        return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory for recording");
    for (int d = 0; d < p->devices; d++) {
        const int capacity = step_events_most(p, d);
        p->events[d] = bg_malloc(sizeof **p->events * (size_t)capacity);
        if (p->events[d] == NULL)
            return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory for recording");
        p->event_capacity[d] = capacity;
        if (bg_backend_is_cuda(p->backends[d])) BG_CHECK(create_clock(p, d, capacity));
    }
    /* Each channel between GPUs carries one message per micro-batch and
     * step; its copies are timed on the receiver's copy stream (and the
     * first legs of those through host memory on the sender's). A
     * channel's clocks, once made, stay (a retry keeps them). */
    for (int s = 0; s + 1 < p->stages; s++) {
        BG_CHECK(bg_channel_time_links(p->forward[s], p->microbatches));
        BG_CHECK(bg_channel_time_links(p->backward[s], p->microbatches));
    }
    return BG_OK;
}

bg_status_t bg_pipeline_record(bg_pipeline_t *p, bg_timeline_t *tl) {
    if (tl != NULL && p->events == NULL) {
        /* Whole or not at all: a call after a failure starts again (until
         * 2026-12-06 it found the buffers half made and recorded into them). */
        const bg_status_t st = start_recording(p);
        if (st != BG_OK) {
            bg_pipeline_free_recording(p);
            return st;
        }
    }
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
    if (s > 0) {
        info.channel_bytes += bg_channel_bytes(p->forward[s - 1]);
        info.channel_padding += bg_channel_padding(p->forward[s - 1]);
    }
    if (s + 1 < p->stages) {
        info.channel_bytes += bg_channel_bytes(p->backward[s]);
        info.channel_padding += bg_channel_padding(p->backward[s]);
    }
    return info;
}

size_t bg_pipeline_stage_peak_bytes(const bg_pipeline_stage_info_t *info) {
    const bg_stage_memory_t *m = &info->memory;
    return m->params + m->grads + m->optimizer + m->stash_peak + m->buffers + m->workspace +
           m->padding + info->channel_bytes + info->channel_padding;
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
