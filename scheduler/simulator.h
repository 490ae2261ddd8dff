/* The simulator: a discrete-event run of a schedule with given durations,
 * producing the same timeline type as the executor, so every report (summary,
 * trace, SVG) works on predicted runs and predicted and measured runs compare
 * directly.
 *
 * Model: each device runs its op list in order, one op at a time; an op
 * starts when its device is free and its inputs have arrived.
 *
 * A tensor crossing between stages goes in three parts. The sending
 * device checks it (part of the op's event that made it) and copies it
 * out (a SEND event: on CPU
 * devices the thread copies it into the channel's ring itself); then it
 * crosses the link between the two devices (one transfer at a time per
 * direction between two stages; a transfer overlaps compute; between
 * stages on one device there is no link); then the receiving device copies
 * it in (a RECV event) before the op that needs it. Any part may cost 0 (a
 * GPU's copy engine: only the link part, then recorded as a LINK event of
 * the receiving device, beside its ops). Time a device spends waiting for
 * an input is recorded as a WAIT event with the peer stage.
 *
 * Channels are rings of bg_schedule_ring_slots() slots, as the executor's
 * (two between devices, one within one): a send takes a slot when it starts
 * copying, and the receive frees it once it has copied the message in. A
 * sender that finds every slot taken waits (a WAIT with the receiver's
 * stage as peer, as the executor records it) until a receive frees one;
 * that receive wakes it (wake_s more on the receiving device, part of its
 * RECV event), and it copies handoff_s after the slot freed.
 *
 * Hand-overs between threads cost time too (measured on CPU devices, where
 * a blocked thread sleeps on a condition variable): a send to a device that
 * is already waiting for it keeps the sender busy wake_s longer (waking the
 * sleeper, part of its SEND event, as the executor records it; until
 * 2026-12-06 neither recorded it, nor the check); every device starts a
 * step handoff_s after the step begins (its thread is woken by the caller),
 * and the step ends handoff_s after its last op (the caller is woken).
 *
 * The optimizer step is a barrier, as in the executor: every device's STEP
 * starts only when every device has finished its other ops. The last to
 * arrive wakes the others (a WAIT of wake_s), which start handoff_s after
 * that arrival (a WAIT of the device's first stage, peer -1, as the
 * executor records it).
 *
 * Contention (costs->contention): how long an op takes depends on what the
 * other devices do meanwhile, which depends on how long ops take. The
 * simulator runs a step with every op at its own duration, notes for each
 * F, B and W the fraction of it during which another device was busy,
 * stretches each by its fraction of its stage's contention, and runs the
 * step again: BG_SIM_SETTLING_PASSES such passes, then the recorded
 * steps with the last pass's durations. With K > 2 the fractions of the
 * other devices add (at most 1). The same passes run with after-wait costs
 * alone, so that the first recorded step has the idle gaps of a step
 * before it. */
#ifndef BG_SIMULATOR_H
#define BG_SIMULATOR_H

#include "schedule.h"
#include "status.h"
#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Passes that settle the durations of ops under contention, and give the
 * first recorded step a step before it (after-wait costs). */
#define BG_SIM_SETTLING_PASSES 3

/* How much longer a stage's F and B (and W) take when its device was idle
 * before them while another device ran ops (on CPU devices: those ops
 * push the stage's data out of the caches it shares with them). Ratios
 * by the kind of the other device's op: its F, its B or W, its STEP. An
 * op whose device was idle from g0 to g1 (from its last op or copy to the
 * op, or to the copy in before it) takes its duration times the largest
 * 1 + (r - 1) x f over the other devices' ops that ran in that gap: f the
 * fraction of such an op that lies in the gap, r this op's ratio after
 * that op's kind. Nothing when none ran, or for ratios of 1 or less. */
enum { BG_SIM_AFTER_FORWARD, BG_SIM_AFTER_BACKWARD, BG_SIM_AFTER_STEP, BG_SIM_AFTER_KINDS };
typedef struct bg_sim_after_wait {
    double forward[BG_SIM_AFTER_KINDS];  /* an F's ratios */
    double backward[BG_SIM_AFTER_KINDS]; /* a B's, and a W's */
} bg_sim_after_wait_t;

/* Durations in seconds, per stage (stages entries) unless noted. */
typedef struct bg_sim_costs {
    const double *forward;   /* F of one micro-batch */
    const double *backward;  /* B (dX, plus dW when the schedule does not split it) */
    const double *weight;    /* W (split schedules); may be NULL otherwise */
    const double *recompute; /* extra forward before B (and W) with recompute; may be NULL */
    /* Per boundary (stages-1 entries): the link part of a crossing,
     * activations stage s -> s+1 and gradients stage s+1 -> s. */
    const double *activation_transfer;
    const double *gradient_transfer;
    /* Per boundary, the parts the devices do themselves; each may be NULL
     * (0): stage s's device copying its activation out, stage s+1's copying
     * it in, stage s+1's copying its gradient out, stage s's copying it in. */
    const double *activation_send, *activation_recv;
    const double *gradient_send, *gradient_recv;
    /* Per boundary, may be NULL (0): what the sending device does with the
     * tensor before it copies it out (the executor's check for NaN and Inf
     * on CPU devices), activations and gradients; part of the event of the
     * op that made it, as the executor records it. */
    const double *activation_check, *gradient_check;
    /* The optimizer's update of each stage (stages entries); may be NULL.
     * A device's STEP updates its stages in order, one STEP event each. */
    const double *step;
    /* Per stage, may be NULL: the check of its accumulated weight gradients
     * for NaN and Inf, which the executor runs within the stage's last B
     * (W when split) of a step (bg_schedule_last_gradient_microbatch); that
     * op takes this much longer, stretched with it. */
    const double *weight_check;
    /* Per stage, may be NULL (and an entry 0 or 1): how many times longer
     * the stage's F, B and W (and recompute) take while another device
     * computes beside them, all the time (CPU cores sharing a cache and the
     * memory bandwidth; measured by `brigade profile` under load). An op
     * takes its duration times 1 + (contention - 1) x the fraction of it
     * during which another device is busy (an op or a copy, not a wait),
     * found by a fixed point (below). */
    const double *contention;
    /* Per stage, may be NULL: the slowdown of ops after an idle gap
     * (above). A device's gap before its first op of a step counts from
     * its last op or copy of the step before, and the other devices' ops
     * of that step count in it; simulating a step first, untimed, gives
     * the first recorded step a step before. */
    const bg_sim_after_wait_t *after_wait;
    double wake_s;    /* a device waking a peer blocked on it (above) */
    double handoff_s; /* from a wake to the woken thread running (above) */
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
