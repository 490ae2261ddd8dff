/* The planner: from a model, a schedule request and the devices, builds the
 * schedule, the cost model (analytic, or from a measured profile) and the
 * partition into stages (the best split, stages/partition.h, or a given
 * one), with the predicted step time and bubble. The best split is the
 * faster in simulation of the partition's two: the one of the fastest
 * slowest stage and the one of the least predicted step (which trades the
 * slowest stage against the total stage time and wins at few
 * micro-batches, where the stages hardly overlap); on a tie the first.
 * It also searches the micro-batch count and the schedule for the fastest
 * simulated step (--microbatches auto, --schedule auto), and turns a plan
 * into the simulator's per-stage costs (scheduler/simulator.h), so that
 * `brigade plan`, `train`, `simulate` and `sweep --simulate` all decide the
 * same way.
 *
 * Predictions. step_s is bg_partition_step_seconds: M times the busiest
 * device's time per micro-batch plus the fill and drain of the others,
 * without the optimizer step, which update_s adds (the slowest device's
 * updates of its stages' parameters; it does not depend on M or the
 * schedule). bubble is the predicted idle fraction of the whole step
 * (step_s + update_s), counted as a run's report counts it: busy is
 * computing (forwards, backwards, updates) or copying (a crossing's copies
 * at each end, bg_cost_boundary_crossing), not a link's part; bubble_theory
 * is the schedule's (K-1)/(M+K-1) family (bg_schedule_theoretical_bubble)
 * for equal stages. */
#ifndef BG_PLANNER_H
#define BG_PLANNER_H

#include <stdint.h>

#include "cost_model.h"
#include "partition.h"
#include "profile.h"
#include "schedule.h"
#include "simulator.h"
#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to plan. Pointers are borrowed for the call; the plan copies the
 * devices and the split, but keeps pointing at spec and profile, which must
 * outlive it. */
typedef struct bg_plan_request {
    const bg_model_spec_t *spec;
    bg_schedule_kind_t schedule;
    int devices;      /* K >= 1 */
    int chunks;       /* V >= 1: stages per device (interleaved) */
    int microbatches; /* M, 1..B */
    int64_t batch;    /* B, samples per optimizer step */
    bg_optimizer_config_t optimizer;
    int recompute;
    int forward_only;               /* an evaluation's memory (bg_cost_config_t.forward_only) */
    const int *split;               /* S - 1 first layers of stages 1..S-1; NULL: the planner */
    const bg_cost_device_t *device; /* K entries, in chain order */
    bg_cost_link_t link;            /* between every pair of devices, unless `links` */
    const bg_cost_link_t *links;    /* K x K in chain order, a * K + b: a's sends to b; or NULL */
    const bg_profile_t *profile;    /* measured layer times, or NULL: analytic */
    /* Where `chunks` > 1 and a search (BG_PLAN_SEARCH_SCHEDULE) also tries
     * schedules of one chunk a device: the devices and links those run on,
     * K entries and K x K in chain order (a path, where `device` and `links`
     * close interleaved's chain into a cycle); NULL: the same as
     * interleaved's. Not kept in a plan's request. */
    const bg_cost_device_t *path_device;
    const bg_cost_link_t *path_links;
    /* 1: the caller asks only whether the plan fits (and by how much it
     * overflows): when nothing fits, the split is not made the fastest of
     * those that overflow least (bg_partition_config_t.fits_only). */
    int fits_only;
} bg_plan_request_t;

#define BG_PLAN_REQUEST_INIT                                                                       \
    {                                                                                              \
        .spec = NULL, .schedule = BG_SCHEDULE_1F1B, .devices = 1, .chunks = 1, .microbatches = 1,  \
        .batch = 64, .optimizer = BG_OPTIMIZER_CONFIG_INIT, .recompute = 0, .forward_only = 0,     \
        .split = NULL, .device = NULL, .link = BG_COST_LINK_HOST_INIT, .links = NULL,              \
        .profile = NULL, .path_device = NULL, .path_links = NULL, .fits_only = 0                   \
    }

typedef struct bg_plan {
    /* The request, with device pointing at `device` below, links at `links`
     * (when given) and split at first_layer + 1 when a split was given
     * (else NULL). */
    bg_plan_request_t request;
    bg_schedule_t *schedule;
    bg_cost_model_t *model;
    bg_cost_device_t *device; /* K entries */
    bg_cost_link_t *links;    /* K x K, or NULL: request.link everywhere */
    int *stash_slots;         /* S entries, bg_schedule_stash_slots */
    int *first_layer;         /* S entries: where each stage starts */
    bg_partition_config_t config;
    bg_partition_t *partition; /* fits, per-stage layers, times, memory, worst overflow */
    double step_s;             /* predicted seconds per step, without the update */
    double update_s;           /* the optimizer step: the slowest device's updates */
    double bubble;             /* predicted idle fraction (above) */
    double bubble_theory;      /* for equal stages */
    /* A plan that fits: one simulated step, the optimizer's included
     * (bg_plan_simulated_step); 0 for one that does not. */
    double simulated_step_s;
    /* When the planner compared the splits of both objectives and they
     * differed: the simulated step of the one it did not keep; else 0. */
    double other_split_step_s;
    /* 1 when the search for the least predicted step's split ran out of
     * memory (a huge model): the slowest stage's split, which fits, stands
     * without that comparison. */
    int least_step_skipped;
    /* With V > 1 and the planner's own split, how the searches per device
     * (for the slowest stage, then for the least predicted step) ended:
     * BG_PLAN_DEVICES_SEARCHED when they tried every split (where the plan
     * does not fit, none does; where it keeps the programme's split, what
     * they found did not simulate faster), BG_PLAN_DEVICES_STOPPED when one
     * stopped at its budget first (or ran out of memory); else
     * BG_PLAN_DEVICES_NOT_SEARCHED. */
    int device_search;
    /* With V > 1 and the planner's own split: 1 when a split keeping each
     * stage within 1/V of its device fits (the programme's). */
    int even_split_fits;
    /* Where the planner simulated every split (BG_PLAN_EVERY_SPLIT_MAX, or
     * more within BG_PLAN_EVERY_SPLIT_MORE and _WORK): how many, and how many of them fit
     * (else 0 and 0); the plan's is the fastest simulated of those that
     * fit. simulated_split is 1 where that is not the split the searches
     * chose (config.objective's): other_split_step_s is then that split's
     * simulated step. */
    int splits_simulated, splits_fitting, simulated_split;
} bg_plan_t;

enum {
    BG_PLAN_DEVICES_NOT_SEARCHED = 0,
    BG_PLAN_DEVICES_SEARCHED,
    BG_PLAN_DEVICES_STOPPED,
};

/* Every split of a model is simulated one by one, the fastest that fits
 * kept, where there are at most BG_PLAN_EVERY_SPLIT_MAX, or up to
 * BG_PLAN_EVERY_SPLIT_MORE where that is at most BG_PLAN_EVERY_SPLIT_WORK
 * stage micro-batches (splits x stages x M): every split of a small model
 * (the origin CNN's 8 layers into 4 stages are 35; fashion_resnet's 12
 * places to start a stage, into 8, 330; a 27-layer model into 4 stages,
 * 2,600). The searches' objectives only predict the step, and where the
 * prediction and the simulation disagree, more memory could give a slower
 * plan; simulating each split settles it by the simulation, which is what
 * --microbatches auto and --schedule auto go by. Past 512 splits the two
 * limits keep it to about 0.1 s a plan (a split costs about 2.5 us and the
 * simulator plays 1.6 to 6 million stage micro-batches a second here), as
 * auto plans every count it tries: with one limit of 1,048,576 stage
 * micro-batches, a reviewer's 27-layer model on cpu:4 at a batch of 5,040
 * took 6.1 s to plan with auto, 0.10 s before. (Until 2026-12-06 only the
 * 512 splits: a 27-layer model on cpu:2 with --chunks 2 and M = 4, 2,600
 * splits, 41,600 stage micro-batches, planned 4.862 ms simulated at
 * --device-mem 6750K and 5.053 at 7500K, at the costs of then; 4.813 with
 * each split simulated.) */
#define BG_PLAN_EVERY_SPLIT_MAX  512
#define BG_PLAN_EVERY_SPLIT_MORE 4096
#define BG_PLAN_EVERY_SPLIT_WORK 262144L

/* The stage prices each search per device may take: 25 to 46 ms where it
 * runs out on 1,000 layers into 64 stages (bench_partition prints its
 * rate: 10.8 to 19.7 million a second on the development machine). */
#define BG_PLAN_DEVICE_SEARCH_BUDGET 500000L

/* Plans a request; a plan that fits is also simulated for one step
 * (simulated_step_s). A plan that does not fit its devices' memory is still a
 * plan (partition->fits = 0, naming the worst stage and its overflow), not
 * an error. A given split with V > 1 is checked per device, each device's
 * V stages together against its capacity (BG_PARTITION_CHECK_DEVICES:
 * partition->worst_device names the device over); the planner's own split
 * is the programme's, each stage within 1/V of its device (stages/partition.h),
 * unless the searches per device find a split that fits per device and is
 * predicted faster (by its slowest stage or by its step) and simulates
 * faster or, where no split fits 1/V a stage, one that fits per device at
 * all (bg_partition_search_devices; device_search says how they ended).
 * Then, on a model of at most BG_PLAN_EVERY_SPLIT_MAX splits, or of up to
 * BG_PLAN_EVERY_SPLIT_MORE whose simulations are within
 * BG_PLAN_EVERY_SPLIT_WORK, every split that fits is simulated and the
 * fastest kept (splits_simulated).
 * BG_ERR_INVALID for an impossible request, with the message of the part
 * that refused it: M > B ("would leave some empty"), a schedule that
 * rejects K/V/M, a bad split, more stages than layers, a profile of
 * another layer count; BG_ERR_NOMEM. *out is set only on success; free
 * with bg_plan_destroy. */
bg_status_t bg_plan_create(const bg_plan_request_t *request, bg_plan_t **out);

/* NULL and half-built plans are fine. */
void bg_plan_destroy(bg_plan_t *plan);

/* The cost model request r's plan would price its stages with (prepared
 * for r's devices), without a schedule or a partition: for what a layer
 * range costs under r's settings, where a whole plan is not needed. Free
 * with bg_cost_model_destroy. */
bg_status_t bg_plan_cost_model_create(const bg_plan_request_t *r, bg_cost_model_t **out);

/* The stage with the largest time per micro-batch (the first of equals). */
int bg_plan_bottleneck_stage(const bg_plan_t *plan);

/* The plan's cut as a pipeline takes it (bg_pipeline_config_t.split): the
 * first layer of stages 1..S-1, or NULL for one stage. */
const int *bg_plan_split(const bg_plan_t *plan);

/* The link that carries stage `from`'s sends to stage `to`: between their
 * devices (stage s runs on device s % K). */
const bg_cost_link_t *bg_plan_link(const bg_plan_t *plan, int from, int to);

/* --- the chain's direction (stages/plan_direction.c) -------------------
 *
 * The devices' order comes from their links (stages/device_order.h), and a
 * chain run the other way round has the same links: the order given
 * decides between the two, and it does not weigh memory. A first layer
 * that needs a whole GPU did not fit on cuda:0x2,cuda:1, where
 * cuda:1,cuda:0x2 fits. */

/* 1 where `plan` does not fit, runs one chunk a device on two or more
 * devices, and the chain the other way round would put a device of
 * another capacity (memory, or the convolution workspace it counts) at
 * some stage's place: the one case where the other way round may fit, as
 * what fits depends on each place's capacity alone. */
int bg_plan_may_fit_reversed(const bg_plan_t *plan);

/* 1 when device a and device k-1-a have the same capacity, for every a:
 * a chain of them fits alike either way round. */
int bg_plan_capacities_mirrored(const bg_cost_device_t *device, int k);

/* Request r with its chain of devices the other way round, into *out: its
 * devices into `device` (K entries) and, where r has links, those into
 * `links` (K x K), both the caller's; no path (path_device and path_links
 * NULL). */
void bg_plan_request_reverse(const bg_plan_request_t *r, bg_cost_device_t *device,
                             bg_cost_link_t *links, bg_plan_request_t *out);

/* bg_plan_create, then, where bg_plan_may_fit_reversed, the request the
 * other way round (bg_plan_request_reverse), whose plan is kept where it
 * fits (*reversed = 1; its devices are then in the reversed order). Errors
 * as bg_plan_create's; one planning the other way round (BG_ERR_NOMEM)
 * too. */
bg_status_t bg_plan_create_either_way(const bg_plan_request_t *r, bg_plan_t **out, int *reversed);

/* Predicted samples per second with the optimizer step: B / (step_s +
 * update_s), 0 when that is 0. */
double bg_plan_samples_per_s(const bg_plan_t *plan);

/* The link between two CPU devices as a profile measured it: a channel
 * copies a tensor twice (into the ring and out of it), each a memcpy at the
 * profile's copy_bytes_per_s, done by the two devices' threads
 * (copy_bytes_per_s set), and wakes the receiver: with a version 2 profile
 * its measured hand-off (the latency) and wake costs, else 5 us. */
bg_cost_link_t bg_plan_profile_link(const bg_profile_t *profile);

/* --- searching M and the schedule ------------------------------------- */

enum {
    BG_PLAN_SEARCH_MICROBATCHES = 1, /* try every M of bg_plan_microbatch_candidates */
    BG_PLAN_SEARCH_SCHEDULE = 2,     /* try gpipe, 1f1b, zb-h1, and interleaved when V > 1 */
};

/* The micro-batch counts worth trying for a batch of B: every divisor of B,
 * every power of two up to B, and every `multiple` times a power of two up
 * to B (interleaved needs M a multiple of K; 1 adds nothing), ascending,
 * without repeats. Writes at most `capacity` of them into `out` and returns
 * how many there are in all. */
int bg_plan_microbatch_candidates(int64_t batch, int multiple, int *out, int capacity);

/* The `multiple` of bg_plan_microbatch_candidates for a request: its K when
 * interleaved is the schedule or, with BG_PLAN_SEARCH_SCHEDULE and
 * chunks > 1, one of the schedules searched; else 1. */
int bg_plan_microbatch_multiple(const bg_plan_request_t *r, unsigned flags);

/* With a profile, of the micro-batch counts ms[0..count) those it covers
 * (bg_profile_covers), kept in order at the front; their number, or
 * `count` where none is (the array untouched: every count is priced by
 * extrapolation, as a note says). The counts a search of M tries. */
int bg_plan_keep_profiled_counts(const bg_plan_request_t *r, int *ms, int count);

/* Plans every combination `flags` opens up (the request's own M and
 * schedule otherwise) and keeps the one with the highest throughput among
 * those where every stage fits, as the simulator predicts it (B over
 * bg_plan_simulated_step, kept in simulated_step_s: it models what the
 * planner's estimate leaves out, such as the optimizer barrier, the
 * channels' rings and each op in turn); ties keep the smaller M,
 * then the earlier schedule in the order 1f1b, gpipe, zb-h1, interleaved
 * (1f1b holds less than gpipe for the same time). Combinations a schedule
 * rejects (interleaved with M not a multiple of K) are skipped. When none
 * fits, the result is the one whose worst overflow is smallest (fits = 0).
 * With a profile, only the counts whose micro-batches lie within the sizes
 * it timed are searched, where any does (its times elsewhere are guesses).
 * BG_ERR_INVALID for flags other than the two above, or when every
 * combination is rejected (the last reason); BG_ERR_NOMEM. */
bg_status_t bg_plan_search(const bg_plan_request_t *request, unsigned flags, bg_plan_t **out);

/* Called with (0, total) before the first combination and (done, total)
 * after each, counting the micro-batches of the combinations planned (the
 * simulation runs each): a large batch of a small model has hundreds of
 * counts, each with every split simulated, and can take minutes. */
typedef void (*bg_plan_progress_fn)(void *ctx, int64_t done, int64_t total);

/* bg_plan_search, reporting to `progress` (NULL: none, as bg_plan_search). */
bg_status_t bg_plan_search_progress(const bg_plan_request_t *request, unsigned flags,
                                    bg_plan_progress_fn progress, void *ctx, bg_plan_t **out);

/* --- simulating a plan ------------------------------------------------ */

/* The length of one simulated step of `plan` (bg_plan_simulate), its
 * optimizer step included, into *seconds. */
bg_status_t bg_plan_simulated_step(const bg_plan_t *plan, double *seconds);

/* Per-stage durations for bg_simulate, from a plan's cost model: forward;
 * backward (dX and dW, or dX only when the schedule splits the backward,
 * zb-h1); weight (dW, split schedules); recompute; activation and gradient
 * crossings of each boundary over the request's link, split into the
 * devices' copies and the link's part (bg_cost_boundary_crossing); the
 * link's wake and hand-off costs; and per stage its optimizer update (a
 * device's STEP updates its stages in turn) and the check of its weight
 * gradients (after its last backward of a step). */
typedef struct bg_plan_costs {
    bg_sim_costs_t sim; /* points into the arrays below */
    double *forward, *backward, *weight, *recompute;
    double *activation_transfer, *gradient_transfer; /* S - 1 entries (at least 1) */
    double *activation_send, *activation_recv;       /* the devices' own copies */
    double *gradient_send, *gradient_recv;           /* (bg_cost_boundary_crossing) */
    double *activation_check, *gradient_check;       /* measured stages only */
    double *step;                                    /* S entries: each stage's update */
    double *weight_check;                            /* S entries: its gradients' check */
    double *contention;                              /* measured stages under load only, else 0 */
    bg_sim_after_wait_t *after_wait;                 /* measured stages only, else 0 */
} bg_plan_costs_t;

/* *out is set only on success; free with bg_plan_costs_destroy. */
bg_status_t bg_plan_costs_create(const bg_plan_t *plan, bg_plan_costs_t **out);

/* NULL is a no-op. */
void bg_plan_costs_destroy(bg_plan_costs_t *costs);

/* Simulates `steps` >= 1 steps of the plan into a new timeline (measured =
 * 0, devices named as the plan's). *out is set only on success; free with
 * bg_timeline_destroy. */
bg_status_t bg_plan_simulate(const bg_plan_t *plan, int steps, bg_timeline_t **out);

#ifdef __cplusplus
}
#endif

#endif /* BG_PLANNER_H */
