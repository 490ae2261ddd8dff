/* The plan advice (bg_cli_plan_explain_overflow, planning.h) in two parts:
 * plan_advice.c tries the memory savings, the micro-batch counts and their
 * combinations; advice_devices.c other counts of devices. What one part
 * calls of the other is here. */
#ifndef BG_CLI_ADVICE_H
#define BG_CLI_ADVICE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "placement.h"
#include "planner.h"
#include "progress.h"

/* plan_advice.c */

/* What the search for what would help carries from change to change: the
 * changes found, for --json (NULL without), the fastest step of those
 * printed (0 before any, and for an evaluation, whose steps are not
 * priced), and its progress on a terminal
 * (bg_progress_tick: the plans made so far, erased before each line of
 * advice). */
typedef struct bg_advice {
    cJSON *found;
    double fastest_s;
    bg_progress_t progress;
    int64_t plans;
    /* The request's optimizer, against which a variant's trains another
     * way (SGD for Adam, none of SGD's momentum), said once under the first
     * line whose variant does: noted_sgd, noted_momentum. */
    bg_optimizer_config_t optimizer;
    int noted_sgd, noted_momentum;
} bg_advice_t;

/* Whether request r fits, said nowhere (a plan made, for `advice`'s count). */
int bg_advice_variant_fits(const bg_plan_request_t *r, bg_advice_t *advice);

/* Tries one change; prints it if the plan then fits, and adds it to
 * `advice->found` (when not NULL) as {"change", "largest_stage_bytes", "step_ms"},
 * and "largest_device_bytes" where the plan is checked per device (with
 * --chunks V, a given split or one no split fits 1/V a stage). Returns 1
 * if it fit. */
int bg_advice_try_variant(const bg_plan_request_t *r, const char *what, bg_advice_t *advice);

/* The smallest GPU convolution workspace limit among r's devices; SIZE_MAX
 * where none is a GPU. */
size_t bg_advice_conv_limit(const bg_plan_request_t *r);

/* advice_devices.c */

/* The most devices any plan of r's model can have: a stage at each place
 * one can start (every layer outside residual blocks; V stages a device
 * with --chunks V), and at most BG_MAX_DEVICES. */
int bg_advice_most_possible(const bg_plan_request_t *r);

/* Whether the placement's devices are two or more virtual devices of one
 * GPU. */
int bg_advice_one_gpu(const bg_placement_t *placement);

/* Whether the placement's devices are virtual devices of one GPU that
 * share its memory (no --device-mem gives them theirs) and the machine (or
 * the topology file) has no other GPU for more devices to be: more of
 * them hold no more, fewer each hold more. */
int bg_advice_shares_one_gpu(const bg_placement_t *placement);

/* Whether fewer devices each have more memory: CPU devices dividing the
 * host's, or virtual devices dividing a GPU's (fewer take fewer of each
 * GPU, bg_placement_choose). */
int bg_advice_fewer_have_more(const bg_placement_t *placement, int host_share);

/* Whether the machine (or the topology file) has GPUs besides those
 * listed, which more devices may be (placement->gpus). */
int bg_advice_other_gpus(const bg_placement_t *placement);

/* Whether a GPU holds two or more of the devices of `list`. */
int bg_advice_gpu_held_twice(const bg_device_list_t *list);

/* How many GPUs the devices of `list` are on. */
int bg_advice_gpu_count(const bg_device_list_t *list);

/* The fewest devices bg_advice_try_device_counts tries for r: one where
 * fewer devices each have more memory; else, under a schedule whose first
 * stages hold a micro-batch for each stage after them (1F1B, ZB-H1,
 * interleaved), half the request's, since fewer stages hold fewer in
 * flight (fashion_cnn under zb-h1 at 5.5 MiB a device, with SGD at M = 64,
 * fits on two to five CPU devices, not on six); else the request's own
 * count (GPipe holds every micro-batch on every stage, so fewer devices
 * only hold more). */
int bg_advice_fewest_tried(const bg_plan_request_t *r, const bg_placement_t *placement,
                           int host_share);

/* The most devices bg_advice_try_device_counts tries for r: twice the
 * request's, and no more than r has stages' worth of layers; on one GPU
 * without --device-mem no more virtual devices than listed, since they
 * share its memory; whole GPUs no more than the machine (or --topology)
 * has. */
int bg_advice_most_tried(const bg_plan_request_t *r, const bg_placement_t *placement);

/* Whether the search for r's device counts up to `limit` (either way)
 * plans every count in turn: where those counts times the layers are few,
 * so that it is cheap. Else it gallops out and halves back, since planning
 * every count took minutes for 20,000 layers on cpu:100. */
int bg_advice_scans_every_count(const bg_plan_request_t *r, int limit);

/* Tries other device counts for request r, prints those that fit (none
 * where `quiet`) and returns 1 if one did: fewer, the most that fit down
 * to bg_advice_fewest_tried, and more, the fewest that fit up to
 * bg_advice_most_tried. `with` (may be "") names the changes r already
 * holds, for the lines printed. */
int bg_advice_try_device_counts(const bg_plan_request_t *r, const bg_placement_t *placement,
                                int host_share, const char *with, int quiet, bg_advice_t *advice);

/* Whether request r fits on k devices, chosen or made as
 * bg_advice_try_device_counts would have them; prints nothing. */
int bg_advice_fits_on(const bg_plan_request_t *r, const bg_placement_t *placement, int host_share,
                      int k, bg_advice_t *advice);

/* The fewest devices past `from`, up to `limit`, on which request r fits,
 * searched as bg_advice_try_device_counts searches past the request's
 * count; 0 for none. Prints nothing. */
int bg_advice_fewest_fitting(const bg_plan_request_t *r, const bg_placement_t *placement,
                             int host_share, int from, int limit, bg_advice_t *advice);

#endif
