/* The planner (stages/planner.h) as the commands use it: loading --profile,
 * resolving --microbatches auto and --schedule auto, the plan's table and
 * JSON, and the explanation of a plan that does not fit. plan, train,
 * simulate and sweep share these so that they print and refuse alike. */
#ifndef BG_CLI_PLANNING_H
#define BG_CLI_PLANNING_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "placement.h"
#include "planner.h"

/* Takes argument argv[*i] of plan, simulate, sweep or train when it is one
 * they all share: --help or -h (sets *show_help), the MODEL (a word not
 * starting with '-'; a second one is an error naming both), or a
 * placement option with its value (advancing *i past the value). *taken is
 * 1 for those, 0 for anything else, which the command parses itself. */
bg_status_t bg_cli_shared_arg(int argc, char **argv, int *i, const char **model,
                              bg_placement_t *placement, int *show_help, int *taken);

/* Loads --profile for `spec` into *out, or sets *out = NULL without one.
 * Refused (exit 2, naming the file): a profile for GPU devices (profiles
 * hold CPU core times), or one whose update times are for another
 * optimizer than `optimizer`. */
bg_status_t bg_cli_profile_load(const bg_placement_t *p, const bg_model_spec_t *spec,
                                const bg_optimizer_config_t *optimizer, bg_profile_t **out);

/* What every planning command (plan, simulate, sweep, train) starts from:
 * the model, the machine's topology (this one, or --topology), the
 * placement resolved against it with its devices chosen and ordered by
 * their links, the --profile (NULL without one), and room for the
 * planner's description of each device. */
typedef struct bg_cli_setup {
    bg_model_spec_t *spec;
    bg_topology_t *topology;
    bg_device_links_t *links;      /* the chosen devices' (placement->links points here) */
    bg_device_links_t *all_links;  /* every listed device's (placement->listed_links) */
    bg_device_links_t *gpu_links;  /* every GPU's, where whole GPUs are listed (placement->gpus) */
    bg_device_links_t *core_links; /* cpu:2N's, where cpu:N is listed (placement->cores_links) */
    bg_device_links_t *path_links; /* the devices chosen as a path (placement->path_links) */
    bg_profile_t *profile;
    bg_cost_device_t *devices; /* placement->devices.count entries */
} bg_cli_setup_t;

/* Opens all of it for MODEL, for a run of `optimizer`; a model or profile
 * that cannot be read or used is bad input (exit 2). Close with
 * bg_cli_setup_close, also after a failure. */
bg_status_t bg_cli_setup_open(const char *model, bg_placement_t *placement,
                              const bg_optimizer_config_t *optimizer, bg_cli_setup_t *out);
void bg_cli_setup_close(bg_cli_setup_t *setup);

/* For a run (train; bg_cli_setup_open calls it where the placement names
 * its run): refuses --profile where the planner chooses nothing from it,
 * since it prices only the splits (and M and the schedule, when auto) the
 * planner chooses among: a --split given, or one stage. plan, simulate and
 * sweep also predict with it, and take it always. */
bg_status_t bg_cli_check_profile_used(const char *cmd, const bg_placement_t *p);

/* Refuses more micro-batches than samples in a batch, naming both
 * options. */
bg_status_t bg_cli_check_microbatches(int64_t microbatches, int64_t batch);

/* Stages taking turns (one micro-batch on more than one stage), said on
 * stderr: why, and whether more micro-batches would help. For a plan
 * that trains (train, plan). */
void bg_cli_note_turns(const bg_plan_t *plan, const bg_placement_t *p, int64_t batch);

/* Plans `request`; with --microbatches auto or --schedule auto searches
 * them (bg_plan_search), prints the choice on stderr ("brigade CMD: chose
 * --microbatches 8: 9,976 samples/s simulated (a step of 6.415 ms), every
 * stage fits") and writes it back into the placement. Under --chunks V > 1
 * the search prices the schedules of one chunk a device on the devices
 * chosen as a path (placement->path, their memory with `host_share` as
 * bg_placement_plan_request has it), and a choice of one moves the
 * placement there (bg_placement_use_path). A plan that fits carries its
 * simulated step (simulated_step_s) either way. `request` is the
 * placement's (bg_placement_plan_request, its devices in setup->devices).
 * Where it does not fit, yet might the other way round
 * (bg_plan_may_fit_reversed: the capacities differ at mirrored places),
 * the chain is planned the other way round too and, where that fits, runs
 * so (the placement's devices, setup->links and setup->devices reversed
 * in place, or under --schedule auto --chunks V the path and
 * setup->path_links; a note says why, and placement->reversed). */
bg_status_t bg_cli_plan_make(const char *cmd, bg_placement_t *p, bg_cli_setup_t *setup,
                             const bg_plan_request_t *request, int host_share, bg_plan_t **out);

/* What plan and simulate start from: bg_cli_setup_open for MODEL, then
 * the plan of the placement for batch B and `optimizer` (CPU devices share
 * the host's memory when --device-mem is not given) through
 * bg_cli_plan_make. Close the setup and destroy the plan also after a
 * failure. */
bg_status_t bg_cli_plan_open(const char *cmd, const char *model, bg_placement_t *p, int64_t batch,
                             const bg_optimizer_config_t *optimizer, bg_cli_setup_t *setup,
                             bg_plan_t **plan);

/* Where the plan's split came from, for a header line, into buf: given by
 * --split, or chosen by the planner for the slowest stage or the shortest
 * predicted step (stages/partition.h), with the other objective's split's
 * simulated step when it differed. Returns buf. */
const char *bg_cli_plan_split_source(const bg_plan_t *plan, char *buf, size_t size);

/* "4,6": the first layer of each stage after the first, as --split takes
 * it; nothing for one stage. Returns the characters printed. */
int bg_cli_print_split_layers(const bg_plan_t *plan, FILE *out);

/* "; split 4,6" after a placement's words (bg_cli_print_split_layers),
 * and with `source` whose split it is ("(the planner's)" or "(--split)");
 * nothing for one stage. */
void bg_cli_print_split(const bg_plan_t *plan, int source, FILE *out);

/* The same as a JSON word: "given", "slowest_stage" or "least_step". */
const char *bg_cli_plan_split_key(const bg_plan_t *plan);

/* "micro-batches of 16" or, where M does not divide B (their sizes then
 * differ by one), "micro-batches of 1 or 2", into buf; returns buf. */
const char *bg_cli_microbatch_sizes(int64_t batch, int microbatches, char *buf, size_t size);

/* Says on stderr, in a note, that `plan` is cut elsewhere than the one
 * split its profile (from `path`) times, where the profile was made with
 * profile --split: the plan's other stages are priced from layer sums.
 * Returns 1 when it said so. */
int bg_cli_note_split_profile(const bg_plan_t *plan, const char *path);

/* Says on stderr, in one note, which of the micro-batch counts ms[0..count)
 * of a step of `batch` samples make micro-batches outside the sizes
 * `profile` timed (none, or no profile: nothing said): a profile's times
 * are exact at those sizes and on lines between them, and outside them
 * guesses (a GEMM of a few rows runs slower per sample, bound by reading
 * its weights; past the largest size they are scaled in proportion). The
 * note gives the command that times them. */
void bg_cli_note_profile_sizes(const bg_profile_t *profile, int64_t batch, const int *ms,
                               int count);

/* The stages device `device` holds, into buf: "0,2" or, with `words`,
 * "0 and 2" ("0, 2 and 4"). Returns buf. */
const char *bg_cli_plan_device_stages(const bg_plan_t *plan, int device, int words, char *buf,
                                      size_t size);

/* The stage table, with V > 1 stages a device each device's stages
 * together against its capacity, then the predicted step and bubble, as
 * 'brigade plan' prints them. */
void bg_cli_plan_print_table(const bg_plan_t *plan, FILE *out);

/* Stage s as a JSON object with the keys of 'brigade train --metrics'
 * stages plus predicted_ms and capacity_bytes; NULL if out of memory. */
cJSON *bg_cli_plan_stage_json(const bg_plan_t *plan, int s);

/* A run's stage (its layers, device and measured memory) as a JSON object
 * with the keys bg_cli_plan_stage_json shares; NULL if out of memory. */
cJSON *bg_cli_run_stage_json(const bg_pipeline_stage_info_t *info);

/* Adds "devices" as plan --json has them with V > 1 stages a device: each
 * device, its stages and their measured peaks together (`info`, `count`
 * stages of a run), which is what its memory must hold. BG_ERR_NOMEM. */
bg_status_t bg_cli_run_devices_json(cJSON *root, const bg_pipeline_stage_info_t *info, int count);

/* Adds a whole number (a count of bytes, a seed) to `object` as a JSON
 * integer, exact at any size: cJSON_AddNumberToObject writes 15
 * significant digits where they read back within a rounding error, so 2^53
 * came out as 9.00719925474099e+15. NULL when it could not be added. */
cJSON *bg_cli_json_add_uint(cJSON *object, const char *key, uint64_t value);

/* cJSON_Print(root) made valid UTF-8 (bg_utf8_repaired: a file name's bytes
 * that are not UTF-8 become U+FFFD, which JSON readers take): a new string
 * to free, or NULL when memory runs out. */
char *bg_cli_json_print(const cJSON *root);

/* Adds "peak_by_category" to a stage's JSON object: m's seven categories,
 * as plan predicts them and train measures them. */
void bg_cli_json_add_memory(cJSON *stage, const bg_cost_memory_t *m);

/* With V > 1 stages a device, adds to `root` "memory_check" ("per_device"
 * where the plan was checked so: a given split, or the planner's where its
 * search per device chose it; else "per_stage"), "devices" ({"device", "stages",
 * "peak_bytes", "capacity_bytes"}: each device's stages together) and,
 * where the planner searched the splits per device (bg_plan_t's
 * device_search), "device_search": "searched" (every split) or "stopped"
 * (at its budget); with one, nothing. 0 if out of memory. */
int bg_cli_plan_add_devices_json(cJSON *root, const bg_plan_t *plan);

/* The whole plan as JSON ('brigade plan --json'); NULL if out of memory.
 * It has bg_cli_plan_add_devices_json's keys; a plan that does not fit
 * has "overflow", {"stage", "bytes"}, or checked per device {"device",
 * "stages", "bytes"}. */
cJSON *bg_cli_plan_json(const bg_plan_t *plan, const char *model);

/* Adds "links" to a plan's JSON: for each pair of consecutive devices in
 * the chain, {"from", "to", "kind" (nvidia-smi topo's word), "bytes_per_s"}.
 * 0 if out of memory. */
int bg_cli_links_json(const bg_placement_t *p, cJSON *plan);

/* Explains on stderr a plan that does not fit: which stage overflows by how
 * many bytes (checked per device: which device, its stages and their bytes
 * together), and which single changes (or all memory savings together)
 * would make it fit. `host_share` as for bg_placement_cost_devices. With
 * `found` (a JSON array, or NULL), each change that fits is also added to
 * it as {"change", "largest_stage_bytes", "step_ms"}; with `plan_json`
 * (the plan's JSON object, or NULL), a layer too large for any stage even
 * with every saving as "layer_too_large": {"layer", "kind",
 * "bytes_at_least", "stage_capacity_bytes"}. */
void bg_cli_plan_explain_overflow(const char *cmd, const bg_plan_t *plan, const bg_placement_t *p,
                                  int host_share, cJSON *found, cJSON *plan_json);

#endif /* BG_CLI_PLANNING_H */
