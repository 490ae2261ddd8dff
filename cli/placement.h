/* The placement options shared by train (and later plan, simulate, sweep):
 * --devices --stages --split --schedule --chunks --microbatches --recompute. */
#ifndef BG_CLI_PLACEMENT_H
#define BG_CLI_PLACEMENT_H

#include <stdio.h>

#include "devices.h"
#include "model_spec.h"
#include "pipeline.h"
#include "schedule.h"

typedef struct bg_placement {
    const char *devices_text; /* --devices, default "cpu" */
    int stages;               /* --stages, 0: one per device */
    int split[BG_MAX_STAGES];
    int split_count; /* --split values given, 0: balance FLOPs */
    bg_schedule_kind_t schedule;
    int chunks, microbatches, recompute;
    bg_device_list_t devices; /* resolved by bg_placement_resolve */
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

/* Prints a one-line description ("2 stages on cpu:0, cpu:1; 1f1b, M=4"). */
void bg_placement_describe(const bg_placement_t *p, FILE *out);

#endif /* BG_CLI_PLACEMENT_H */
