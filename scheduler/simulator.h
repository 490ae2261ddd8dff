/* The simulator: a discrete-event run of a schedule with given durations,
 * producing the same timeline type as the executor, so every report (summary,
 * trace, SVG) works on predicted runs and predicted and measured runs compare
 * directly.
 *
 * Model: each device runs its op list in order, one op at a time; an op
 * starts when its device is free and its inputs have arrived. A transfer
 * between stages on different devices starts when the producing op ends (or
 * when its link is free: one transfer at a time per direction between two
 * stages) and overlaps compute; between stages on one device it is free.
 * Channels are unbounded. The time a device spends waiting for an input is
 * recorded as a WAIT event with the peer stage; transfers themselves are not
 * events of any device (they run on links). */
#ifndef BG_SIMULATOR_H
#define BG_SIMULATOR_H

#include "schedule.h"
#include "status.h"
#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Durations in seconds, per stage (stages entries) unless noted. */
typedef struct bg_sim_costs {
    const double *forward;   /* F of one micro-batch */
    const double *backward;  /* B (dX, plus dW when the schedule does not split it) */
    const double *weight;    /* W (split schedules); may be NULL otherwise */
    const double *recompute; /* extra forward before B (and W) with recompute; may be NULL */
    const double *activation_transfer; /* stage s -> s+1, stages-1 entries */
    const double *gradient_transfer;   /* stage s+1 -> s, stages-1 entries */
    const double *step; /* optimizer step per device (devices entries); may be NULL */
} bg_sim_costs_t;

/* Runs `steps` training steps of `schedule` and appends them to `tl` (made
 * with bg_timeline_create for the schedule's shape, measured = 0). Step k
 * starts when step k-1 has ended on every device. BG_ERR_INVALID for a
 * negative or non-finite duration, or a timeline of another shape. */
bg_status_t bg_simulate(const bg_schedule_t *schedule, const bg_sim_costs_t *costs, int steps,
                        bg_timeline_t *tl);

#ifdef __cplusplus
}
#endif

#endif /* BG_SIMULATOR_H */
