/* The placement options shared by train, plan, simulate and sweep:
 * --devices --stages --split --schedule --chunks --microbatches --recompute
 * --device-mem --profile, and what the planner makes of them. */
#ifndef BG_CLI_PLACEMENT_H
#define BG_CLI_PLACEMENT_H

#include <stdio.h>

#include "devices.h"
#include "model_spec.h"
#include "pipeline.h"
#include "planner.h"
#include "schedule.h"

typedef struct bg_placement {
    const char *devices_text; /* --devices, default "cpu" */
    int stages;               /* --stages, 0: one per device */
    int split[BG_MAX_STAGES];
    int split_count; /* --split values given, 0: the planner's split */
    bg_schedule_kind_t schedule;
    int chunks, microbatches, recompute;
    int auto_schedule, auto_microbatches; /* --schedule auto, --microbatches auto */
    size_t device_mem;                    /* --device-mem in bytes, 0: not given */
    const char *profile_path;             /* --profile, or NULL */
    bg_device_list_t devices;             /* resolved by bg_placement_resolve */
} bg_placement_t;

/* Help text for the options, for commands' --help. */
extern const char bg_placement_help[];

void bg_placement_init(bg_placement_t *p);

/* 1 if `arg` is a placement option taking a value, 2 if a flag. */
int bg_placement_is_option(const char *arg);

/* Applies option `arg` with `value` (NULL for flags). */
bg_status_t bg_placement_apply(bg_placement_t *p, const char *arg, const char *value);

/* Resolves the device list against the machine's `cores` and checks the
 * combination: --stages K uses the first K devices; a --split needs one value
 * per stage boundary. */
bg_status_t bg_placement_resolve(bg_placement_t *p, const bg_model_spec_t *spec, int cores);

/* The first `count` devices as the planner sees them (beyond the list,
 * copies of its last device named by index): a CPU device is one core
 * (BG_COST_DEVICE_CPU_CORE_INIT), a CUDA device an assumed 10 TFLOP/s. Each
 * may use --device-mem bytes; without it, with `host_share`, CPU devices
 * share the host's memory (1/count each), else they are unlimited. */
void bg_placement_cost_devices(const bg_placement_t *p, int count, int host_share,
                               bg_cost_device_t *out);

/* A planner request for the resolved placement (K, V, M, schedule,
 * recompute, --split) with batch B, an optimizer and a profile (or NULL;
 * with one the link is the profile's, bg_plan_profile_link). `device` must
 * hold K entries; it is filled with bg_placement_cost_devices. */
void bg_placement_plan_request(const bg_placement_t *p, const bg_model_spec_t *spec, int64_t batch,
                               const bg_optimizer_config_t *optimizer, const bg_profile_t *profile,
                               int host_share, bg_cost_device_t *device, bg_plan_request_t *out);

/* Prints a one-line description ("2 stages on cpu:0, cpu:1; 1f1b, M=4"). */
void bg_placement_describe(const bg_placement_t *p, FILE *out);

#endif /* BG_CLI_PLACEMENT_H */
