/* The placement options shared by train, plan, simulate and sweep:
 * --devices --stages --split --schedule --chunks --microbatches --recompute
 * --device-mem --conv-workspace --profile --topology, and what the planner
 * makes of them. */
#ifndef BG_CLI_PLACEMENT_H
#define BG_CLI_PLACEMENT_H

#include <stdio.h>

#include "device_links.h"
#include "devices.h"
#include "model_spec.h"
#include "pipeline.h"
#include "planner.h"
#include "schedule.h"
#include "topology.h"

typedef struct bg_placement {
    const char *devices_text; /* --devices, default "cpu" */
    int stages;               /* --stages, 0: one per device */
    int split[BG_MAX_STAGES];
    int split_count; /* --split values given, 0: the planner's split */
    bg_schedule_kind_t schedule;
    int chunks, microbatches, recompute;
    int auto_schedule, auto_microbatches; /* --schedule auto, --microbatches auto */
    size_t device_mem;                    /* --device-mem in bytes, 0: not given */
    size_t conv_workspace;                /* --conv-workspace in bytes, default 256 MiB */
    int conv_workspace_given;             /* so was --conv-workspace */
    const char *profile_path;             /* --profile, or NULL */
    const char *topology_path;            /* --topology, or NULL: this machine */
    /* 1 where a sweep lists schedules besides interleaved (set before
     * bg_placement_resolve), which with --schedule auto may then leave
     * interleaved out rather than refuse the command. */
    int other_schedules;
    /* Why interleaved cannot run here (set by bg_placement_resolve where
     * the model has no room for its K x V stages and other schedules may
     * run instead: --chunks is then 1); "" otherwise. */
    char interleaved_out[192];
    /* The run this placement is for ("train"), which uses --profile only
     * where the planner chooses; NULL for plan, simulate and sweep, which
     * also predict with it (a measured sweep its sim ms column). */
    const char *run;
    bg_device_list_t devices; /* resolved by bg_placement_resolve, then chosen */
    /* The devices as resolved, before --stages K chose among them, and
     * their links (set by bg_cli_setup_open, which owns them): the plan
     * advice prices other counts of them. */
    bg_device_list_t listed;
    const bg_device_links_t *listed_links;
    /* The chosen devices' links and memory, in chain order (set by
     * bg_cli_setup_open, which owns them); NULL: the default link and no
     * known memory. */
    const bg_device_links_t *links;
    /* Where the devices listed are whole GPUs: every GPU of the machine
     * (or of --topology), those listed first, and their links (set by
     * bg_cli_setup_open, which owns them; NULL otherwise): the plan advice
     * prices more devices as the GPUs there are, not as GPUs imagined. */
    bg_device_list_t gpus;
    const bg_device_links_t *gpus_links;
    /* Where the devices are cpu:N's cores and --stages is not given: the
     * links of cpu:2N's (set by bg_cli_setup_open, which owns them; NULL
     * otherwise), whose first k are cpu:k's: the plan advice prices other
     * counts of cores on the links `--devices cpu:k` has. */
    const bg_device_links_t *cores_links;
    /* Where interleaved's chain closes into a cycle (--chunks V > 1) and
     * another schedule may run instead (--schedule auto, a sweep's list):
     * the devices chosen as a path, and their links (set by
     * bg_cli_setup_open, which owns them; NULL otherwise). */
    bg_device_list_t path;
    const bg_device_links_t *path_links;
    /* 1 where bg_cli_plan_make ran the chain the other way round (it fits
     * only so), which plan --json and the metrics of simulate and train
     * say as "devices_reversed". */
    int reversed;
} bg_placement_t;

/* Help text for the options, for commands' --help, in three parts:
 * devices, stages and split; schedule and micro-batches (which a sweep
 * takes as lists of its own); the rest. */
extern const char bg_placement_help[];
extern const char bg_placement_help_schedule[];
extern const char bg_placement_help_rest[];

void bg_placement_init(bg_placement_t *p);

/* 1 if `arg` is a placement option taking a value, 2 if a flag. */
int bg_placement_is_option(const char *arg);

/* The placement options' names, those taking a value first, then the
 * flag; *count of them. */
const char *const *bg_placement_option_names(size_t *count);

/* Parses a --split value, "I,J,...": the first layer of stages 1, 2, ...
 * into split[] (room for BG_MAX_STAGES - 1), their number into *count.
 * Checks the form only; bg_model_spec_check_split checks it against a
 * model. */
bg_status_t bg_placement_parse_split(const char *text, int *split, int *count);

/* Applies option `arg` with `value` (NULL for flags). */
bg_status_t bg_placement_apply(bg_placement_t *p, const char *arg, const char *value);

/* The placement's stages: --stages K (else every device) times --chunks. */
int bg_placement_stage_count(const bg_placement_t *p);

/* Interleaved runs V >= 2 chunks of layers per device (--chunks V); with
 * one it would be 1F1B's order with a longer warm-up, under another name,
 * so it is refused (BG_ERR_INVALID), the message ending with `advice`
 * ("give --chunks 2 or more"). Other schedules pass. */
bg_status_t bg_placement_check_chunks(bg_schedule_kind_t kind, int chunks, const char *advice);

/* The resolved devices for a message (bg_device_list_words). */
const char *bg_placement_device_words(const bg_placement_t *p, char *buf, size_t size);

/* Resolves the device list against the machine `topo` describes (its cores;
 * its GPUs for `auto` when it is an XML file, else the GPUs CUDA sees) and
 * checks the combination: --stages K at most the devices; a --split needs
 * one value per stage boundary; --conv-workspace needs a CUDA device
 * (with auto that found none, a note says it changes nothing). */
bg_status_t bg_placement_resolve(bg_placement_t *p, const bg_model_spec_t *spec,
                                 const bg_topology_t *topo);

/* Chooses the devices the stages run on and their order from `all`, the
 * links among every resolved device (stages/device_order.h: the chain of
 * the fastest links; --stages K takes the best K, as many GPUs as there are
 * first and no GPU more of them than it must (its virtual devices share its
 * arithmetic); interleaved chains close
 * into a cycle; picking K of more devices, of equally linked chains the
 * one of larger GPUs; then the order given). Keeps the devices given in
 * p->listed, reorders p->devices to the choice and stores the chosen
 * devices' links in *chosen (the caller frees it and may point p->links
 * at it). */
bg_status_t bg_placement_choose(bg_placement_t *p, const bg_device_links_t *all,
                                bg_device_links_t **chosen);

/* How many devices of `list` are virtual devices of GPU `physical` (at
 * least 1). */
int bg_placement_gpu_sharing(const bg_device_list_t *list, int physical);

/* One chunk a device (a schedule other than interleaved): --chunks 1, on
 * the devices chosen as a path where interleaved's were a cycle. */
void bg_placement_use_path(bg_placement_t *p);

/* The first `count` devices as the planner sees them (beyond the list,
 * copies of its last device named by index; where the last device's GPU
 * holds several virtual devices, the copies are more of them, sharing its
 * speed and memory): a CPU device is one core
 * (BG_COST_DEVICE_CPU_CORE_INIT), a CUDA device an assumed 10 TFLOP/s
 * shared among the virtual devices of its GPU, whose stages holding a
 * convolution count --conv-workspace of workspace. Each may use --device-mem
 * bytes; without it, a GPU has its memory when the links know it (divided
 * among its virtual devices), and with `host_share` CPU devices share the
 * host's memory (1/count each); else they are unlimited. */
void bg_placement_cost_devices(const bg_placement_t *p, int count, int host_share,
                               bg_cost_device_t *out);

/* The most a stage may have on one of the machine's GPUs, whole
 * (placement->gpus; its memory less the context and cuBLAS's workspace);
 * 0 where they are not known or --device-mem gives each device its own. */
size_t bg_placement_largest_gpu(const bg_placement_t *p);

/* What brigade's CUDA context takes of a GPU beyond the memory the links
 * give: 0 on this machine (they give CUDA's free memory once the context
 * is made), BG_CUDA_CONTEXT_BYTES on an XML topology's GPU (they give its
 * whole memory). */
size_t bg_placement_context_bytes(const bg_placement_t *p);

/* A planner request for the resolved placement (K, V, M, schedule,
 * recompute, --split, the chosen devices' links) with batch B, an optimizer
 * and a profile (or NULL; with one the link between CPU devices is the
 * profile's, bg_plan_profile_link). `device` must hold K entries; it is
 * filled with bg_placement_cost_devices. */
void bg_placement_plan_request(const bg_placement_t *p, const bg_model_spec_t *spec, int64_t batch,
                               const bg_optimizer_config_t *optimizer, const bg_profile_t *profile,
                               int host_share, bg_cost_device_t *device, bg_plan_request_t *out);

/* Says on stderr when two of the chosen CPU devices run on one of the
 * machine's `cores` cores (more devices than cores): the predictions assume
 * a core each. */
void bg_placement_note_shared_cores(const bg_placement_t *p, int cores);

/* Notes on stderr where a given --device-mem is more than a chosen GPU has
 * (what its stages together are given, for virtual devices sharing it,
 * with their cuBLAS workspaces): the plan counts the size given, so it may
 * fit where the GPU cannot; and where neither the topology nor
 * --device-mem gives a GPU's memory, which then goes unchecked. */
void bg_placement_note_device_mem(const bg_placement_t *p);

/* Prints the chosen devices, "cpu:0, cpu:1" (no newline). */
void bg_placement_describe_devices(const bg_placement_t *p, FILE *out);

/* Prints a one-line description ("2 stages on cpu:0, cpu:1; 1f1b, 4
 * micro-batches"); with forward_only, an evaluation's, whose stages run
 * forwards whatever the schedule ("...; forwards only, 4 micro-batches"). */
void bg_placement_describe(const bg_placement_t *p, int forward_only, FILE *out);

/* Prints the chain of devices with the links between neighbours
 * ("links: cuda:0 -PIX- cuda:1 -PHB- cuda:2, slowest PHB at 18.0 GB/s")
 * and a newline; nothing for one device or without links. */
void bg_placement_describe_links(const bg_placement_t *p, FILE *out);

/* How many links the stages cross, device to next device, in chain order:
 * K - 1, or K where with --chunks V on more than two devices the stages
 * come round from the last device to the first; 0 without links. */
int bg_placement_link_hops(const bg_placement_t *p);

/* 1 when the placement has devices and every one is of `kind` (CPU cores,
 * or CUDA devices, whole or virtual); else 0. */
int bg_placement_all_of_kind(const bg_placement_t *p, bg_device_kind_t kind);

#endif /* BG_CLI_PLACEMENT_H */
