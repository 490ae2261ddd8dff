/* The partitioner: cuts the layer stack into S = K * V contiguous stages,
 * stage s on device s % K (Megatron's interleaving when V > 1), so that the
 * slowest stage is as fast as possible (or the stages' total is least,
 * below) and every stage fits its device.
 *
 * Objective. A stage's time per micro-batch is its compute (forward,
 * backward, recompute; bg_cost_stage_time on its device) plus the sends it
 * makes itself: its output activation to the next stage and its input
 * gradient to the previous one (bg_cost_boundary_send_seconds: a mean
 * micro-batch's bytes over the link between their devices). Sends are
 * counted as if nothing hid them: on the CPU backend the sending thread
 * does the copy, and on a GPU the copy engine overlaps them only partly.
 * The partition minimises the largest stage time (the pipeline's
 * steady-state period); ties keep the first split found.
 *
 * Constraint. Every stage's predicted peak (bg_cost_stage_memory with its
 * schedule's stash slots and channel slots) is at most its device's
 * capacity divided by V: with V > 1 a device holds V stages, and an even
 * share each keeps the problem one a dynamic programme solves exactly.
 * That is conservative: what a device must hold is the sum of its V
 * stages (a device holds nothing beside its stages: each stage has its own
 * channel rings and workspace), and a split whose stages are uneven can
 * fit its devices with one stage over the share. Checking the sums would
 * tie together stages s, s + K, s + 2K, ..., which the programme over
 * (stage, last layer) cannot see; so only bg_partition_evaluate, which
 * prices a given split, and bg_partition_search_devices, a branch and
 * bound, check them (BG_PARTITION_CHECK_DEVICES).
 *
 * Exactness. For this objective and constraint the dynamic programme over
 * (stage, last layer) is exact: it accounts for every contiguous split, in
 * O(S * N^2) time at worst and O(S * N + N log N) memory for N layers. Each
 * stage's start is searched outwards from the previous end's best start,
 * and bounds that only rule out starts which cannot do better stop the
 * search; on balanced stages that is a few candidates per (stage, end),
 * so about O(S * N log N) in practice (partition.c). When no split fits, the
 * result is the fastest (slowest stage least) of the splits whose worst
 * overflow is smallest (again exact; fits_only: any of them), and
 * names that stage and its overflow.
 *
 * The least total. The slowest stage sets the step when M is large; with
 * few micro-batches the stages hardly overlap, and at M = 1 a step is the
 * sum of the stage times (bg_partition_step_seconds). Objective
 * BG_PARTITION_LEAST_TOTAL minimises that sum instead, under the same
 * memory constraint, again exactly. Stage compute adds up over layers, so
 * the sum differs between splits only by the sends at the cuts: the
 * programme ranks each stage's starts by that, best first, and prices
 * starts until one fits (about O(S * N log N)).
 *
 * The least step. Between the two, a step of M micro-batches is predicted
 * as bg_partition_step_seconds, (M - share) * L + share * total with one
 * stage per device (L the slowest stage). Objective BG_PARTITION_LEAST_STEP
 * minimises it: the least total under a cap on every stage's seconds (the
 * programme above, where starts whose compute is over the cap are never
 * taken) traces the front of (L, total) as the cap rises from the slowest
 * stage's optimum, and a branch and bound over caps probes that front only
 * where the bound (M - share) * (the cap below) + share * (the least total
 * above) is under the best step found, less step_tolerance of it. Exact
 * with one stage per device and no tolerance. With V > 1 the step counts
 * each device's stages together, which the front does not see: each point
 * is moved a layer at a time between stages while its step falls (a local
 * optimum; on random small instances the brute force's step 93% of the
 * time, test_partition), and the best point after that is kept (so
 * step_tolerance bounds the front's points, not the moved ones); a few
 * dozen programmes for 1,000 layers onto 64 stages (bench_partition). The
 * planner asks for it within 0.1%, prices the slowest stage's split and
 * this one, and keeps the one whose simulated step is shorter
 * (stages/planner.h). */
#ifndef BG_PARTITION_H
#define BG_PARTITION_H

#include <stddef.h>

#include "cost_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the partition minimises (above); every objective falls back to the
 * smallest worst overflow when nothing fits. */
typedef enum bg_partition_objective {
    BG_PARTITION_SLOWEST_STAGE = 0, /* the largest stage time: the pipeline's period */
    BG_PARTITION_LEAST_TOTAL,       /* the sum of the stage times: a step at M = 1 */
    BG_PARTITION_LEAST_STEP,        /* bg_partition_step_seconds: a step at any M */
} bg_partition_objective_t;

/* How memory is checked; with V = 1 the two are the same. */
typedef enum bg_partition_memory_check {
    /* Each stage against its device's capacity / V (the programme's). */
    BG_PARTITION_CHECK_STAGES = 0,
    /* Each device's V stages together against its whole capacity: for a
     * given split (bg_partition_evaluate) and the search per device
     * (bg_partition_search_devices); bg_partition_create refuses it. */
    BG_PARTITION_CHECK_DEVICES,
} bg_partition_memory_check_t;

typedef struct bg_partition_config {
    const bg_cost_model_t *model;   /* borrowed */
    int devices;                    /* K >= 1 */
    int chunks;                     /* V >= 1: stages per device */
    const bg_cost_device_t *device; /* K entries, in chain order */
    /* K x K, links[a * K + b] carries device a's sends to device b; NULL:
     * `link` between every pair (and within a device). */
    const bg_cost_link_t *links;
    bg_cost_link_t link;
    const int *stash_slots; /* S entries (bg_schedule_stash_slots); NULL: 1 each */
    bg_partition_objective_t objective;
    /* BG_PARTITION_LEAST_STEP only: the search may end once no split left
     * could beat the best found by more than this share of it (0: exact). */
    double step_tolerance;
    /* BG_PARTITION_LEAST_STEP only: the slowest-stage split of this same
     * config when the caller has it (borrowed), which the search then
     * starts from instead of finding it again; NULL: found first. */
    const struct bg_partition *slowest;
    /* When nothing fits: 0 (the default) finds the fastest slowest stage
     * among the splits of the least worst overflow, with one more
     * programme; 1 takes the first such split found, for callers that only
     * ask whether anything fits and by how much it overflows. */
    int fits_only;
    /* BG_PARTITION_CHECK_STAGES (the default), or, for
     * bg_partition_evaluate and bg_partition_search_devices,
     * BG_PARTITION_CHECK_DEVICES. */
    bg_partition_memory_check_t memory_check;
} bg_partition_config_t;

#define BG_PARTITION_CONFIG_INIT                                                                   \
    {                                                                                              \
        .model = NULL, .devices = 1, .chunks = 1, .device = NULL, .links = NULL,                   \
        .link = BG_COST_LINK_HOST_INIT, .stash_slots = NULL,                                       \
        .objective = BG_PARTITION_SLOWEST_STAGE, .step_tolerance = 0, .slowest = NULL,             \
        .fits_only = 0, .memory_check = BG_PARTITION_CHECK_STAGES                                  \
    }

typedef struct bg_partition_stage {
    int first_layer, last_layer; /* [first, last) */
    int device;                  /* index into the config's devices */
    bg_cost_time_t time;         /* per micro-batch */
    double send_s;               /* its sends per micro-batch */
    double seconds;              /* compute + sends per micro-batch */
    bg_cost_memory_t memory;
    size_t peak_bytes; /* bg_cost_memory_peak(&memory) */
    /* Its share of the device, 1/V of it; checked per device, the whole
     * device's; 0: unlimited. */
    size_t capacity_bytes;
} bg_partition_stage_t;

typedef struct bg_partition {
    int stages; /* S */
    /* How fits was decided: BG_PARTITION_CHECK_DEVICES only where the
     * config asked for it and V > 1. */
    bg_partition_memory_check_t memory_check;
    int fits;            /* 1: every stage (or device) within its capacity */
    double bottleneck_s; /* the largest stage seconds */
    double total_s;      /* the sum of the stage seconds */
    /* !fits: the stage with the largest overflow, or checked per device the
     * largest stage of worst_device; else -1. */
    int worst_stage;
    int worst_device;      /* !fits: the device over (worst_stage's), else -1 */
    size_t overflow_bytes; /* its peak (the device's stages together) minus its capacity */
    /* BG_PARTITION_LEAST_STEP: the points of the front it probed past its
     * first three (at most BG_PARTITION_FRONT_PROBES_CHUNKED with V > 1);
     * else 0. */
    int front_probes;
    bg_partition_stage_t *stage; /* S entries */
} bg_partition_t;

/* With V > 1, the most points of the front the least step probes past its
 * first three (partition.c, solve_step). */
enum { BG_PARTITION_FRONT_PROBES_CHUNKED = 64 };

/* Finds the best split (above). A split that does not fit is still a result
 * (fits = 0), not an error. BG_ERR_INVALID for a bad config (no model, K or
 * V < 1 or K x V past an int, more stages than layers, a table of
 * stages x layers past the partitioner's limit, a device with
 * flops_per_s <= 0, an unknown objective, a step tolerance outside
 * [0, 1), a memory check other than BG_PARTITION_CHECK_STAGES with V > 1);
 * a config's `slowest` split of another stage count is ignored;
 * BG_ERR_NOMEM. *out is set only on success; free with
 * bg_partition_destroy. */
bg_status_t bg_partition_create(const bg_partition_config_t *cfg, bg_partition_t **out);

/* Prices a given split: first[0..S) with first[0] = 0 and boundaries
 * increasing below the layer count (BG_ERR_INVALID naming the first bad
 * one otherwise). With BG_PARTITION_CHECK_DEVICES and V > 1 it fits when
 * each device's stages together (bg_partition_device_peak_bytes) are
 * within its capacity, and each stage's capacity_bytes is the device's. */
bg_status_t bg_partition_evaluate(const bg_partition_config_t *cfg, const int *first,
                                  bg_partition_t **out);

/* With V > 1 stages a device, the split whose slowest stage is fastest
 * (cfg's objective BG_PARTITION_SLOWEST_STAGE), or whose step
 * bg_partition_step_seconds predicts shortest (BG_PARTITION_LEAST_STEP),
 * among those where each device holds its V stages together (what
 * bg_partition_evaluate checks with BG_PARTITION_CHECK_DEVICES, and what a
 * device really needs), for memory_check BG_PARTITION_CHECK_DEVICES
 * (BG_ERR_INVALID otherwise).
 * bg_partition_create holds each stage to 1/V of its device instead, which
 * refuses uneven splits that fit; this one ties the stages of a device
 * together, which no programme over (stage, layer) can, so it is a branch
 * and bound. Its first bound is a greedy split (each stage as long as a
 * limit on its seconds and an even share of what its device has left
 * allow, the limit bisected); then, stage by stage, each stage's ends from
 * where it holds an even share of the compute left outwards, ruling out
 * any end whose compute reaches the best split found so far (for the step:
 * whose device's load with that compute would make a longer step, however
 * the layers left are split), whose device's stages so far outgrow it, or
 * after which the devices' room could not hold the parameters, gradients
 * and optimizer state of the layers left. It stops after `budget` stage
 * pricings, the greedy's included: *complete is 1 when it tried every
 * split it did not rule out (the result is then exact), 0 when the budget
 * ran out first (the best found, or none). *out is the split (fits = 1),
 * or NULL where none fits or none was found. Only splits whose slowest
 * stage (or step) takes at most `bound` seconds count (DBL_MAX: any; a
 * caller with a split looks for one at least as fast); of those that tie,
 * the one with the shorter step (or the faster slowest stage) is kept.
 * BG_ERR_INVALID for a bad config (as bg_partition_create's, or another
 * objective or memory check), BG_ERR_NOMEM; on an error *out and
 * *complete are left as they were.
 * With few layers a device it is quick (the origin CNN's 8 layers on 4
 * stages: at most 35 splits); test_partition checks it against every
 * split on small random instances. */
bg_status_t bg_partition_search_devices(const bg_partition_config_t *cfg, double bound, long budget,
                                        bg_partition_t **out, int *complete);

/* The peak of device d's stages together (d, d + K, ...: those whose
 * `device` is d), what the device must hold. */
size_t bg_partition_device_peak_bytes(const bg_partition_t *partition, int device);

/* NULL is a no-op. */
void bg_partition_destroy(bg_partition_t *partition);

/* Predicted seconds of one optimizer step of M micro-batches, extending the
 * theoretical bubble to unequal stages. With t_s the stage times, L_d the
 * sum over device d's stages and L the largest L_d:
 *   step = M * L + (sum_s t_s - L) * share
 * with share the idle part of the fill and drain, bg_schedule_drain_share
 * (1/V; zb-h1's W's fill two thirds, less with M < K). Equal stages give
 * back bg_schedule_theoretical_bubble: (K-1)/(M+K-1) (gpipe, 1f1b),
 * (K-1)/(VM+K-1) (interleaved), (K-1)/(3M+K-1) (zb-h1, M >= K). */
double bg_partition_step_seconds(const bg_partition_t *partition, const bg_partition_config_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* BG_PARTITION_H */
