/* Timelines: what every device did, and when, during one or more training
 * steps. The executor records them from clocks (measured); the simulator
 * produces them from a cost model (predicted). Every report (text summary,
 * Chrome trace, SVG picture) reads this one type, so predicted and measured
 * runs compare directly.
 *
 * Times are seconds from the timeline's origin (the start of its first
 * recorded step). Events of one device never overlap, except LINK events:
 * those run on the receiving device's copy engine, beside its ops. */
#ifndef BG_TIMELINE_H
#define BG_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bg_event_kind {
    BG_EVENT_FORWARD,  /* F: a stage's forward of one micro-batch */
    BG_EVENT_BACKWARD, /* B: backward (dX, plus dW unless the schedule splits it) */
    BG_EVENT_WEIGHT,   /* W: weight gradients (split schedules) */
    BG_EVENT_STEP,     /* optimizer update of one stage (a device's step: one each;
                        * with clipping, also its pass over the gradients before
                        * the barrier, one more each) */
    BG_EVENT_SEND,     /* copying a tensor into the channel to peer_stage */
    BG_EVENT_RECV,     /* copying a tensor out of the channel from peer_stage */
    BG_EVENT_WAIT,     /* blocked on peer_stage: its data has not arrived, or the
                        * channel to it is full (to_send); peer_stage -1: waiting
                        * for every device to reach the optimizer step */
    BG_EVENT_LINK,     /* a tensor from peer_stage crossing the link into `stage`,
                        * on the receiving device's copy engine (a GPU's copy
                        * stream), overlapping its ops; neither busy nor idle */
} bg_event_kind_t;

enum { BG_EVENT_KINDS = 8 };

typedef struct bg_event {
    bg_event_kind_t kind;
    int device;
    int stage;      /* the stage the device was working for */
    int microbatch; /* -1 for STEP */
    int peer_stage; /* SEND/RECV/WAIT: the other end; -1 otherwise */
    int step;       /* which recorded step, 0-based */
    double start, end;
    /* WAIT only: 1 when the device waited for room in the channel's ring
     * to send to peer_stage (the peer is behind: it has not taken the
     * earlier messages yet), 0 when it waited for a message or at the
     * barrier. */
    int to_send;
    /* Of its length, what ended it (CPU devices; 0 where none): an F's or
     * B's check for NaN and Inf of what it sends, a SEND's or RECV's wake
     * of the peer asleep on the channel (the trace's check_us, wake_us). */
    double tail_s;
} bg_event_t;

typedef struct bg_timeline_config {
    bg_schedule_kind_t schedule;
    int devices, stages, chunks, microbatches;
    const char *const *device_names; /* devices entries, copied */
    int measured;                    /* 1: from the executor; 0: from the simulator */
} bg_timeline_config_t;

typedef struct bg_timeline {
    bg_schedule_kind_t schedule;
    int devices, stages, chunks, microbatches;
    int measured;
    char (*device_names)[24];
    int steps; /* steps recorded */
    /* The run's step (counted from 1, as train's progress counts them)
     * that recorded step 0 was; 0 where the steps are not a training
     * run's (simulated, or a sweep's point). Recorded steps follow on. */
    int64_t first_step;
    /* Where a pipeline records (bg_pipeline_record): the monotonic clock's
     * seconds at time 0, set by the first to record into it, so that steps
     * recorded by turns (by pipelines, or into timelines in turn) keep one
     * origin; has_clock 0 until then. */
    int has_clock;
    double clock_origin;
    double *step_start, *step_end; /* per step */
    int step_capacity;
    bg_event_t *events;
    int count, capacity;
} bg_timeline_t;

bg_status_t bg_timeline_create(const bg_timeline_config_t *cfg, bg_timeline_t **out);

/* NULL is a no-op. */
void bg_timeline_destroy(bg_timeline_t *tl);

/* Appends an event (grows the buffer; the executor reserves ahead so this
 * does not allocate during a step). */
bg_status_t bg_timeline_add(bg_timeline_t *tl, const bg_event_t *event);

/* BG_OK when a timeline of `events` events fits in half of this
 * machine's memory, and its count in half an int (the capacity doubles);
 * `status` saying how much it would take otherwise: BG_ERR_INVALID for a
 * request refused before it runs, BG_ERR_NOMEM for a run that outgrew it. */
bg_status_t bg_timeline_check_room(int64_t events, bg_status_t status);

/* Makes room for `events` more events and one more step (checked with
 * bg_timeline_check_room). */
bg_status_t bg_timeline_reserve(bg_timeline_t *tl, int events);

/* The run's number of recorded step `step` (first_step + step), or 0 where
 * the timeline's steps are not a run's. */
static inline int64_t bg_timeline_run_step(const bg_timeline_t *tl, int step) {
    return tl->first_step > 0 ? tl->first_step + step : 0;
}

/* Recorded step `step` as reports name it: the run's number where known,
 * else its index. */
static inline int64_t bg_timeline_step_number(const bg_timeline_t *tl, int step) {
    return tl->first_step > 0 ? tl->first_step + step : step;
}

/* Records a step's span; returns its index. */
int bg_timeline_add_step(bg_timeline_t *tl, double start, double end);

/* Sorts events by device, then start time (reports expect this order). */
void bg_timeline_sort(bg_timeline_t *tl);

/* Drops all events and steps (keeps the buffers) and the clock's origin. */
void bg_timeline_clear(bg_timeline_t *tl);

/* Short name of an event kind: "F", "B", "W", "step", "send", "recv", "wait",
 * "link". */
const char *bg_event_kind_name(bg_event_kind_t kind);

/* The event as the trace and the SVG timeline name it: "F3", "B3", "W3",
 * "step", "send F3 to stage 2", "recv B2 from stage 3", "wait for F3 from stage 1"
 * (for a message), "wait for room to send F3 to stage 2" (the receiver had
 * not taken the earlier messages), "wait for every device (optimizer
 * step)", and a link's "F3 from stage 1". A tensor sent to a later stage is
 * F's activation, to an earlier one B's gradient. */
enum { BG_EVENT_NAME_MAX = 96 }; /* bytes that hold any of these names */
void bg_event_describe(const bg_event_t *e, char *name, size_t size);

/* The idle fraction a schedule leaves in theory with equal stage times:
 *   gpipe, 1f1b:  (K-1) / (M + K - 1)
 *   interleaved:  (K-1) / (V*M + K - 1)
 *   zb-h1:        (K-1) / (3M + K - 1)   (F, B and W of equal length)
 *                 (2K-M-1) / (2M + 2K - 1) when M < K (too few W's to
 *                 fill the drain)
 * K devices, M micro-batches, V chunks. */
double bg_schedule_theoretical_bubble(bg_schedule_kind_t kind, int devices, int microbatches,
                                      int chunks);

/* The share of the fill and drain (K - 1 stage times of one micro-batch)
 * that stays idle with equal stages, which both the theory above and the
 * planner's step (bg_partition_step_seconds) use: 1/V with V chunks (1 for
 * gpipe and 1f1b); a third of that when the backward is split (zb-h1's
 * W's fill the rest), times 1 + (K-M)/(K-1) with M < K (too few W's). */
double bg_schedule_drain_share(int split_backward, int devices, int microbatches, int chunks);

#ifdef __cplusplus
}
#endif

#endif /* BG_TIMELINE_H */
