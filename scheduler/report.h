/* Summary figures of a timeline: where each device's step time went
 * (compute, copies, waits, idle), per stage and per device, the measured
 * bubble beside the schedule's theoretical one, stage imbalance and exposed
 * transfer time. Works on measured and predicted timelines alike.
 *
 * All times are seconds per training step: sums over the recorded steps
 * divided by their number. A timeline with events but no recorded step is
 * read as one step spanning its events. */
#ifndef BG_REPORT_H
#define BG_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_device_summary {
    double compute_s;   /* F, B, W and STEP events */
    double update_s;    /* of compute_s: STEP events, the optimizer step */
    double copy_s;      /* SEND and RECV events */
    double wait_s;      /* WAIT events */
    double link_wait_s; /* of wait_s: for messages while they crossed a link (LINK) */
    double barrier_s;   /* of wait_s: at the optimizer step, for the other devices */
    /* Of idle_s, outside any event: from a recorded step's start to the
     * device's first event in it, while the caller woke its thread. */
    double start_wait_s;
    /* Of idle_s, outside any event: from the device's last event of a step
     * to the last event of any device in it, while the others finished
     * their optimizer steps (which run at once, after the barrier). */
    double end_wait_s;
    /* Of idle_s, the rest: in no wait, not at the step's edges above nor in
     * the caller's time after the last event (host_end_s): between its
     * events, its thread's own work between ops, or its thread not
     * running (0 where the parts round past idle_s). */
    double other_idle_s;
    double idle_s;                             /* step_s - compute_s - copy_s: waits and gaps */
    double compute_frac, copy_frac, idle_frac; /* of step_s (0 when step_s is 0) */
} bg_device_summary_t;

typedef struct bg_stage_summary {
    int device;       /* the device that ran the stage */
    double compute_s; /* forward_s + backward_s + weight_s + STEP events of the stage */
    double forward_s, backward_s, weight_s;
    double wait_prev_s; /* WAIT events whose peer_stage is stage - 1 */
    double wait_next_s; /* WAIT events whose peer_stage is stage + 1 */
    /* Of those, the waits for room to send (to_send): the channel's ring
     * was full because that neighbour had not taken the earlier messages,
     * so the neighbour is the slower one. */
    double room_prev_s, room_next_s;
    double copy_s; /* SEND and RECV events of the stage */
    /* Of its waits for messages, the time the message was crossing the
     * link into it (a LINK event of the same step, stage, peer and
     * micro-batch): transfer time the stage could not hide. */
    double link_wait_s;
    /* Of its waits (for messages and for room), the time after the
     * neighbour had made it ready (sent the message, or taken one and so
     * freed a slot) until this stage's thread ran again: the hand-off
     * between threads, tens of microseconds a wait on a quiet machine and
     * more where other work holds the cores; not the neighbour's slowness.
     * From waits whose neighbour's copy recorded its wake of a sleeper
     * (bg_event_t.tail_s > 0: host-timed devices) and a simulation's;
     * `wakes` counts those waits with a hand-off (over 0). */
    double wake_s, wakes;
    /* Of wake_s, the waits for room to send to the previous stage and to
     * the next one: of room_prev_s and room_next_s, the part after the
     * neighbour had taken a message. */
    double room_prev_wake_s, room_next_wake_s;
} bg_stage_summary_t;

typedef struct bg_timeline_summary {
    bg_schedule_kind_t schedule;
    int devices, stages, chunks, microbatches, steps;
    int measured;           /* copied from the timeline */
    double step_s;          /* mean of step_end - step_start */
    double bubble_measured; /* mean over devices of idle_frac */
    /* Robust to a few disturbed steps (a busy machine): the median of the
     * recorded steps' lengths, and of their own bubbles (each the mean over
     * devices of that step's idle fraction); step_s and bubble_measured
     * when no step is recorded. */
    double step_median_s, bubble_median;
    /* And of their imbalances (each the spread of that step's devices'
     * compute over its length); imbalance without recorded steps. */
    double imbalance_median;
    /* The shortest and longest recorded step; step_s without one. */
    double step_min_s, step_max_s;
    double bubble_theory; /* bg_schedule_theoretical_bubble */
    /* From the last event of any device in a recorded step to the step's
     * end: the caller joining the device threads; idle on every device (0
     * without recorded steps). */
    double host_end_s;
    double imbalance; /* (max - min device compute_s) / step_s */
    /* Mean over devices of (copy_s + link_wait_s) / step_s: transfer time
     * not hidden behind compute. */
    double exposed_transfer_frac;
    bg_device_summary_t *device; /* devices entries */
    bg_stage_summary_t *stage;   /* stages entries */
    char (*device_names)[24];    /* devices entries, copied from the timeline */
} bg_timeline_summary_t;

/* Decimals that print a step of `ms` milliseconds to about three
 * significant digits: 123 ms, 12.3 ms, 1.23 ms, 0.123 ms. */
int bg_report_ms_decimals(double ms);

/* Summarizes a timeline (its events in any order). *out is set only on
 * success and freed with bg_timeline_summary_destroy. BG_ERR_INVALID for a
 * NULL timeline or an event whose device or stage is out of range (the
 * message names it); BG_ERR_NOMEM if an allocation fails. */
bg_status_t bg_timeline_summarize(const bg_timeline_t *tl, bg_timeline_summary_t **out);

/* NULL is a no-op. */
void bg_timeline_summary_destroy(bg_timeline_summary_t *s);

/* Whether s's bubble reads below theory because its optimizer steps count
 * as busy (theory's (K-1)/(M+K-1) is of F and B alone): more than one
 * device, the bubble below theory, and the optimizer step at least 5% of
 * the step, on average over the devices (*update_frac, set either way).
 * *without: the bubble without it, each device's idle time over its step,
 * both less its optimizer step and its wait after it for the others' to
 * end, on average (stage imbalance and transfers may leave that above or
 * below theory). */
int bg_summary_below_theory_by_update(const bg_timeline_summary_t *s, double *update_frac,
                                      double *without);

/* Prints a table, one row per stage (device, compute ms, busy % of the
 * step, idle % of its device, waits on the previous and next stage in ms,
 * copy ms, peak MiB from peak_bytes[stage] or "-" when peak_bytes is NULL),
 * then one line: "bubble: measured 18.2% vs theory 20.0% (1f1b, K=2, M=4);
 * stage imbalance 3.1%; exposed transfer 0.8%; step 12.3 ms (measured)",
 * then for each wait for room to send of at least 2% of the step (less
 * its hand-off) a line such as "stage 0 waited 1.500 ms per step for room
 * to send activations to stage 1, which had not taken the earlier ones"
 * (with ", and 0.200 ms more after it had (hand-off, below)" where the
 * hand-off is 0.0005 ms or more), and for each stage whose wake_s is at
 * least 2% of the step a line such as "stage 1: 0.640 ms per step of its
 * waits came after the neighbour was ready (16 waits a step, 40 us on
 * average): the hand-off to its thread, not the neighbour's slowness",
 * and where bg_summary_below_theory_by_update, a line saying so.
 * BG_ERR_IO if writing to out fails. */
bg_status_t bg_summary_print(FILE *out, const bg_timeline_summary_t *s, const size_t *peak_bytes);

/* Recorded step `step`'s own bubble (as bubble_measured, of that step
 * alone); NAN for a step out of range, or without memory. */
double bg_timeline_step_bubble(const bg_timeline_t *tl, int step);

/* Sets *out to an array of tl->count times (freed with free()): for each
 * event that is a wait on a neighbour, when that neighbour made the wait's
 * message or room ready (past the message's crossing of a link), as
 * wake_s counts it; NAN for the other events and where no copy that ended
 * the wait is known. BG_ERR_INVALID for NULL arguments; BG_ERR_NOMEM. */
bg_status_t bg_timeline_wait_ready(const bg_timeline_t *tl, double **out);

/* Adds every figure to an existing JSON object: "schedule" (its name),
 * "chunks", "microbatches", "steps", "measured" (bool), "step_s",
 * "bubble_measured", "step_median_s", "bubble_median", "step_min_s", "step_max_s",
 * "bubble_theory", "imbalance", "imbalance_median",
 * "exposed_transfer_frac", "devices" (array, one object per device: "name" and the
 * bg_device_summary_t fields by name) and "stages" (array, one object per
 * stage: "stage" and the bg_stage_summary_t fields by name). Times in
 * seconds, fractions in 0..1. BG_ERR_INVALID for NULL arguments;
 * BG_ERR_NOMEM if cJSON cannot allocate (object may then hold some of the
 * fields). */
bg_status_t bg_summary_to_json(const bg_timeline_summary_t *s, cJSON *object);

#ifdef __cplusplus
}
#endif

#endif /* BG_REPORT_H */
