/* brigade sweep MODEL --microbatches 1,2,4,...: runs a few warmed-up
 * training steps for every micro-batch count (and schedule), measures step
 * time, throughput, bubble and memory from the recorded timelines, prints a
 * table, can draw throughput and bubble against M and write every point's
 * figures as JSON. With --simulate each point is planned and simulated
 * (stages/planner.h) instead of run. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "dataset.h"
#include "placement.h"
#include "planning.h"
#include "report.h"
#include "svg.h"
#include "text_file.h"
#include "topology.h"

enum { MAX_POINTS = 256 };

static const char help[] =
    "usage: brigade sweep MODEL --microbatches M1,M2,... [options]\n"
    "\n"
    "For each micro-batch count (and each schedule), builds the pipeline, runs\n"
    "warm-up steps, records timed steps, and prints, under a line saying what\n"
    "is swept: M, schedule, step ms and min-max ms (the mean of the timed\n"
    "steps and their spread: a busy machine widens it, and a note says when\n"
    "other processes took 10%% or more of its CPU time while the points ran;\n"
    "simulated steps have none), samples/s, measured bubble %%, theoretical\n"
    "bubble %%, imbalance %% (of the stages' compute; on interleaved rows, of\n"
    "the devices', each running several stages), in a measured sweep sim ms\n"
    "(err): each point's simulated step and its error against the measured\n"
    "one ((sim - measured) / measured: negative where the simulation is\n"
    "faster), with their mean |error| on a last line; then each stage's peak\n"
    "memory and, last, the split (the first layer of each stage after the\n"
    "first, as --split takes it: each point's own without --split).\n"
    "samples/s is the batch over the mean step (train's closing rate also\n"
    "counts the host's work between steps, a few %% slower).\n"
    "Figures are measured on this machine; with --simulate they are predicted\n"
    "instead (as 'brigade simulate' does, from the cost model or --profile), and\n"
    "the table and chart say \"(simulated)\".\n"
    "Without --split each point uses the planner's split for its M and\n"
    "schedule; a point that does not fit its devices' memory (--device-mem,\n"
    "else what 'brigade plan' gives them: a GPU's, or an even share of the\n"
    "host's among the CPU devices) is skipped, with the reason. SIGINT,\n"
    "SIGTERM or SIGHUP stops the sweep after the point in progress; the chart\n"
    "and metrics then hold the points done, as they do when a point fails.\n"
    "A closed pipe (| head) loses the table, not the points (exit status 1).\n"
    "\n"
    "sweep:\n"
    "  --microbatches LIST  micro-batch counts, e.g. 1,2,4,8,16 (required)\n"
    "  --schedule LIST      schedules, e.g. gpipe,1f1b (default 1f1b)\n"
    "  --simulate           predict every point instead of running it\n"
    "  --steps N            timed steps per point, 1 to 1000 (default 5; a\n"
    "                       point's timeline holds each, as train's\n"
    "                       --record-steps); with --simulate, simulated steps\n"
    "  --warmup N           untimed steps first, 0 to 100000 (default 2)\n"
    "  --batch B            samples per step (default 64)\n"
    "  --optimizer NAME     adam (default) or sgd: its state is memory and its\n"
    "                       update part of the step\n"
    "  --momentum X         sgd momentum (default 0; > 0 keeps a velocity buffer)\n"
    "  --data SOURCE        synthetic (default), fashion-mnist or a directory\n"
    "  --chart FILE.svg     draw samples/s and bubble against M (measured: with\n"
    "                       each point's plan simulated, dotted)\n"
    "  --metrics FILE.json  every point's figures (a simulated point's stages as\n"
    "                       simulate --metrics has them, a measured one's as\n"
    "                       train --metrics), and the skipped points with the\n"
    "                       reason (docs/reports.md)\n"
    "%s%s"
    "\n"
    "example:\n"
    "  brigade sweep examples/fashion_cnn.model --devices cpu:2 \\\n"
    "      --microbatches 1,2,4,8,16 --schedule gpipe,1f1b --chart sweep.svg\n"
    "  brigade sweep examples/fashion_cnn.model --devices cpu:2 --simulate \\\n"
    "      --microbatches 1,2,4,8,16 --profile cnn.profile.json\n";

typedef struct sweep_options {
    const char *model, *data, *chart, *metrics;
    int ms[64], m_count;
    bg_schedule_kind_t schedules[4];
    int schedule_count;
    int64_t steps, warmup, batch;
    bg_optimizer_config_t optimizer; /* its state is memory, its update time */
    int simulate;
    int data_given, warmup_given; /* refused with --simulate, which runs nothing */
    bg_placement_t placement;
} sweep_options_t;

/* What every point shares. */
typedef struct sweep_context {
    const sweep_options_t *o;
    const bg_model_spec_t *spec;
    const bg_dataset_t *data; /* NULL when simulating */
    bg_topology_t *topology;
    const bg_profile_t *profile;
    bg_cost_device_t *devices; /* K entries */
    cJSON *points;             /* --metrics' "points"; NULL without it */
    /* A measured sweep's simulated steps beside its measured ones: the sum
     * of the errors' sizes, and their number. */
    double error_sum;
    int errors;
    int split_noted; /* bg_cli_note_split_profile said so, once a sweep */
    /* Points that did not fit their chain and ran on it the other way
     * round (bg_plan_create_either_way). */
    int reversed_points;
    int unfit_m; /* the M of the first point skipped as not fitting, else 0 */
    /* Points whose bubble reads below theory because their optimizer steps
     * count as busy (bg_summary_below_theory_by_update), and the first of
     * them: its M, schedule, optimizer step's share and bubble without it. */
    int below_theory_points, below_theory_m;
    const char *below_theory_schedule;
    double below_theory_update, below_theory_without;
} sweep_context_t;

/* Chart line names of simulated points, by bg_schedule_kind_t. */
static const char *const simulated_names[] = {"gpipe (simulated)", "1f1b (simulated)",
                                              "interleaved (simulated)", "zb-h1 (simulated)"};

/* A point's schedule as the table and chart name it. */
static const char *point_name(const sweep_options_t *o, bg_schedule_kind_t kind) {
    return o->simulate ? simulated_names[kind] : bg_schedule_kind_name(kind);
}

static bg_status_t take_microbatches(const char *option, const char *item, void *ctx) {
    sweep_options_t *o = ctx;
    int64_t v;
    if (o->m_count >= (int)(sizeof o->ms / sizeof o->ms[0]))
        return bg_error_set(BG_ERR_INVALID, "%s: more than %d values", option,
                            (int)(sizeof o->ms / sizeof o->ms[0]));
    if (strcmp(item, "auto") == 0)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: auto picks one count; a sweep lists those to compare, as in "
                            "1,2,4,8 (brigade plan --microbatches auto says which it would pick)",
                            option);
    BG_CHECK(bg_cli_parse_int(option, item, 1, 65536, &v));
    for (int i = 0; i < o->m_count; i++)
        if (o->ms[i] == v)
            return bg_error_set(BG_ERR_INVALID, "%s: %lld is listed twice", option, (long long)v);
    o->ms[o->m_count++] = (int)v;
    return BG_OK;
}

static bg_status_t take_schedule(const char *option, const char *item, void *ctx) {
    sweep_options_t *o = ctx;
    if (o->schedule_count >= (int)(sizeof o->schedules / sizeof o->schedules[0]))
        return bg_error_set(BG_ERR_INVALID, "%s: at most %d schedules", option,
                            (int)(sizeof o->schedules / sizeof o->schedules[0]));
    if (bg_schedule_kind_parse(item, &o->schedules[o->schedule_count]) != BG_OK)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: unknown schedule '%s' (expected gpipe, 1f1b, interleaved or "
                            "zb-h1; a sweep lists them, it does not pick one)",
                            option, item);
    for (int i = 0; i < o->schedule_count; i++)
        if (o->schedules[i] == o->schedules[o->schedule_count])
            return bg_error_set(BG_ERR_INVALID, "%s: %s is listed twice", option, item);
    o->schedule_count++;
    return BG_OK;
}

static bg_status_t parse_args(int argc, char **argv, sweep_options_t *o, int *show_help) {
    bg_placement_init(&o->placement);
    o->data = "synthetic";
    o->steps = 5;
    o->warmup = 2;
    o->batch = 64;
    o->optimizer = (bg_optimizer_config_t)BG_OPTIMIZER_CONFIG_INIT;
    o->schedules[0] = BG_SCHEDULE_1F1B;
    o->schedule_count = 1;
    static const char *const own[] = {"--microbatches", "--schedule",  "--steps",    "--warmup",
                                      "--batch",        "--optimizer", "--momentum", "--data",
                                      "--chart",        "--metrics"};
    for (int i = 1; i < argc && !*show_help; i++) {
        const char *arg = argv[i], *v;
        int taken = 0, known = 0;
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) known |= !strcmp(arg, own[k]);
        /* --microbatches and --schedule are lists here, not placement's. */
        if (!known)
            BG_CHECK(
                bg_cli_shared_arg(argc, argv, &i, &o->model, &o->placement, show_help, &taken));
        if (taken) continue;
        if (strcmp(arg, "--simulate") == 0) {
            BG_CHECK(bg_cli_flag(argv, i));
            o->simulate = 1;
            continue;
        }
        if (!known)
            return bg_cli_unknown_option(arg, own, sizeof own / sizeof own[0], 1, "--simulate");
        BG_CHECK(bg_cli_option_value(argc, argv, &i, &v));
        if (strcmp(arg, "--microbatches") == 0) {
            o->m_count = 0;
            BG_CHECK(bg_cli_for_each_item(arg, v, take_microbatches, o));
        } else if (strcmp(arg, "--schedule") == 0) {
            o->schedule_count = 0;
            BG_CHECK(bg_cli_for_each_item(arg, v, take_schedule, o));
        } else if (strcmp(arg, "--steps") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, BG_CLI_MAX_RECORDED_STEPS, &o->steps));
        else if (strcmp(arg, "--warmup") == 0) {
            BG_CHECK(bg_cli_parse_int(arg, v, 0, 100000, &o->warmup));
            o->warmup_given = 1;
        } else if (strcmp(arg, "--batch") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, 1 << 20, &o->batch));
        else if (strcmp(arg, "--optimizer") == 0)
            BG_CHECK(bg_cli_parse_optimizer(arg, v, &o->optimizer.kind));
        else if (strcmp(arg, "--momentum") == 0)
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1, &o->optimizer.sgd.momentum));
        else if (strcmp(arg, "--data") == 0) {
            o->data = v;
            o->data_given = 1;
        } else if (strcmp(arg, "--chart") == 0)
            o->chart = v;
        else
            o->metrics = v;
    }
    if (*show_help) return BG_OK;
    if (o->model == NULL) return bg_error_set(BG_ERR_INVALID, "no MODEL given");
    BG_CHECK(bg_cli_check_optimizer(&o->optimizer, argc, argv));
    /* Now, not after every point. */
    BG_CHECK(bg_cli_check_output("--chart", o->chart));
    BG_CHECK(bg_cli_check_output("--metrics", o->metrics));
    bg_cli_file_t files[6 + BG_DATASET_FILES] = {
        {"MODEL", o->model, 0, NULL, 0},
        {"--profile", o->placement.profile_path, 0, NULL, 0},
        {"--topology", o->placement.topology_path, 0, NULL, 0},
        {"hwloc (HWLOC_XMLFILE)", bg_cli_env_topology(o->placement.topology_path), 0, NULL, 1},
        {"--chart", o->chart, 1, NULL, 0},
        {"--metrics", o->metrics, 1, NULL, 0},
    };
    /* A measured sweep reads the data's files: an output must not replace one. */
    BG_CHECK(
        bg_cli_check_distinct(files, o->simulate ? 6 : bg_cli_add_data_files(files, 6, o->data)));
    if (o->m_count == 0)
        return bg_error_set(BG_ERR_INVALID, "--microbatches LIST is required (e.g. 1,2,4,8)");
    /* A count no schedule can run is a typo in the list, not a point. */
    for (int i = 0; i < o->m_count; i++) BG_CHECK(bg_cli_check_microbatches(o->ms[i], o->batch));
    if (o->placement.topology_path != NULL && !o->simulate)
        return bg_error_set(BG_ERR_INVALID,
                            "--topology %s describes another machine: add --simulate (a sweep "
                            "without it trains on this one)",
                            o->placement.topology_path);
    /* Options that would change nothing are refused, not dropped unseen. */
    if (o->simulate && (o->data_given || o->warmup_given))
        return bg_error_set(BG_ERR_INVALID,
                            "%s has no use with --simulate (nothing is run: every point is "
                            "predicted)",
                            o->data_given ? "--data" : "--warmup");
    int interleaved = 0;
    for (int k = 0; k < o->schedule_count; k++) {
        interleaved |= o->schedules[k] == BG_SCHEDULE_INTERLEAVED;
        o->placement.other_schedules |= o->schedules[k] != BG_SCHEDULE_INTERLEAVED;
    }
    if (o->placement.chunks > 1 && !interleaved)
        return bg_error_set(BG_ERR_INVALID,
                            "--chunks applies only to the interleaved schedule, which --schedule "
                            "does not list");
    if (interleaved)
        BG_CHECK(bg_placement_check_chunks(BG_SCHEDULE_INTERLEAVED, o->placement.chunks,
                                           "give --chunks 2 or more for its points"));
    /* One --split cannot cut both interleaved's stages (--chunks a device)
     * and the others' (one a device). */
    if (interleaved && o->schedule_count > 1 && o->placement.split_count > 0)
        return bg_error_set(BG_ERR_INVALID,
                            "--split gives one cut for every point, but interleaved's points "
                            "have --chunks %d stages a device and the other schedules' one: "
                            "sweep --schedule interleaved apart from them, each with its "
                            "--split",
                            o->placement.chunks);
    return BG_OK;
}

/* A step's milliseconds for the table: to 0.01 ms, and to 0.001 below
 * 0.1 ms (once rounded so: 0.0996 is "0.10", not "0.100"), where a small
 * model's 0.011 ms step was "0.01". */
static const char *ms_text(double ms, char *buf, size_t size) {
    snprintf(buf, size, "%.*f", ms < 0.0995 ? 3 : 2, ms);
    return buf;
}

/* Prints a point's row of the table: its figures, a measured point's
 * `predicted_ms` (the simulated step of its plan; 0 for a simulated point)
 * with its error, each stage's peak MiB, the plan's split (each point's
 * own without --split: a tester compared schedules whose points were cut
 * otherwise, unsaid; last, whole, as long as it is), then `after`. */
static void print_row(FILE *out, const bg_sweep_point_t *point, const char *schedule,
                      const bg_timeline_summary_t *summary, double predicted_ms,
                      const bg_plan_t *plan, const size_t *peaks, const char *after) {
    const int stages = plan->partition->stages;
    char spread[32] = "-", low[16], high[16], step[16]; /* a simulated point's steps are alike */
    if (!point->simulated)
        snprintf(spread, sizeof spread, "%s-%s",
                 ms_text(summary->step_min_s * 1e3, low, sizeof low),
                 ms_text(summary->step_max_s * 1e3, high, sizeof high));
    char rate[32]; /* 3 digits below 100 samples/s: a large model's 0.0513 is not 0 */
    fprintf(out, "%4d  %-11s %9s %15s %11s %9.1f %9.1f %9.1f  ", point->microbatches, schedule,
            ms_text(point->step_ms, step, sizeof step), spread,
            bg_cli_rate(point->samples_per_s, rate, sizeof rate), 100 * summary->bubble_measured,
            100 * summary->bubble_theory, 100 * summary->imbalance);
    if (!point->simulated) {
        char predicted[40], predicted_ms_text[16];
        snprintf(predicted, sizeof predicted, "%s (%+.0f%%)",
                 ms_text(predicted_ms, predicted_ms_text, sizeof predicted_ms_text),
                 100 * (predicted_ms - point->step_ms) / point->step_ms);
        fprintf(out, "%15s  ", predicted);
    }
    int width = 0; /* of the peaks, padded to their heading's */
    for (int s = 0; s < stages; s++)
        width += fprintf(out, "%s%.1f", s ? "/" : "", (double)peaks[s] / (1024.0 * 1024.0));
    fprintf(out, "%*s", width < 18 ? 20 - width : 2, "");
    if (bg_cli_print_split_layers(plan, out) == 0) fputc('-', out); /* one stage */
    fprintf(out, "%s\n", after);
    fflush(out);
}

/* Runs the plan's placement: warm-up, recorded steps; leaves the recorded
 * timeline in *out and each stage's layers and memory in info (one per
 * stage of the plan). A configuration the pipeline refuses is reported in
 * *skip and is not an error. */
static bg_status_t measure(const sweep_context_t *c, const bg_placement_t *placement,
                           const bg_plan_t *plan, bg_timeline_t **out,
                           bg_pipeline_stage_info_t *info, char *skip, size_t skip_size) {
    const sweep_options_t *o = c->o;
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = c->spec;
    cfg.devices = &placement->devices; /* the point's: a path or interleaved's cycle */
    cfg.topology = c->topology;
    cfg.schedule = plan->request.schedule;
    cfg.chunks = plan->request.chunks;
    cfg.microbatches = plan->request.microbatches;
    cfg.batch = o->batch;
    cfg.split = bg_plan_split(plan);
    cfg.recompute = o->placement.recompute;
    cfg.optimizer = o->optimizer;
    cfg.conv_workspace_limit = o->placement.conv_workspace;
    bg_pipeline_t *p = NULL;
    bg_timeline_t *tl = NULL;
    float *images = NULL; /* a step's images as floats, made outside its timing */
    bg_status_t st = bg_pipeline_create(&cfg, &p);
    if (st == BG_ERR_INVALID) {
        snprintf(skip, skip_size, "%s", bg_error_message());
        return BG_OK;
    }
    BG_CHECK(st);
    const bg_dataset_t *data = c->data;
    const int64_t numel = bg_shape_numel(c->spec->input);
    const int64_t per_epoch = data->count / o->batch;
    images = malloc((size_t)(o->batch * numel) * sizeof(float));
    BG_ALLOC_CHECK_GOTO(images, st, done);
    BG_CHECK_GOTO(bg_pipeline_check_record_room(p, o->steps), st, done);
    BG_CHECK_GOTO(bg_pipeline_timeline_create(p, &tl), st, done);
    for (int64_t k = 0; k < o->warmup + o->steps; k++) {
        if (k == o->warmup) BG_CHECK_GOTO(bg_pipeline_record(p, tl), st, done);
        int64_t at = (k % (per_epoch > 0 ? per_epoch : 1)) * o->batch;
        bg_dataset_images(data, at, o->batch, images);
        bg_pipeline_result_t r;
        BG_CHECK_GOTO(bg_pipeline_train_step(p, images, data->labels + at, o->batch, &r), st, done);
    }
    BG_CHECK_GOTO(bg_pipeline_record(p, NULL), st, done);
    for (int s = 0; s < bg_pipeline_stage_count(p); s++) info[s] = bg_pipeline_stage_info(p, s);
    *out = tl;
    tl = NULL;
done:
    free(images);
    bg_timeline_destroy(tl);
    bg_pipeline_destroy(p);
    return st;
}

/* A point of --metrics: its schedule and M, then "skipped" (why) or its
 * figures: samples/s, its stages (as plan, or as the run measured them),
 * with V > 1 its devices (the same) and the summary of its timeline (its steps' mean, median and
 * spread among them). NULL if out of memory. */
static cJSON *point_json(const sweep_context_t *c, bg_schedule_kind_t kind, int m, const char *skip,
                         const bg_plan_t *plan, const bg_pipeline_stage_info_t *info,
                         const bg_timeline_summary_t *summary, double predicted_ms) {
    cJSON *point = cJSON_CreateObject();
    if (point == NULL) return NULL;
    cJSON_AddStringToObject(point, "schedule", bg_schedule_kind_name(kind));
    cJSON_AddNumberToObject(point, "microbatches", m);
    if (skip[0] != '\0') {
        cJSON_AddStringToObject(point, "skipped", skip);
        return point;
    }
    cJSON_AddNumberToObject(point, "samples_per_s", (double)c->o->batch / summary->step_s);
    if (!c->o->simulate) cJSON_AddNumberToObject(point, "simulated_step_ms", predicted_ms);
    cJSON *stages = cJSON_AddArrayToObject(point, "stages");
    for (int s = 0; stages != NULL && s < plan->partition->stages; s++)
        cJSON_AddItemToArray(stages, info != NULL ? bg_cli_run_stage_json(&info[s])
                                                  : bg_cli_plan_stage_json(plan, s));
    /* V stages a device: what each device holds, as plan and train say. */
    int devices_ok = 1;
    if (plan->request.chunks > 1)
        devices_ok = info != NULL
                         ? bg_cli_run_devices_json(point, info, plan->partition->stages) == BG_OK
                         : bg_cli_plan_add_devices_json(point, plan);
    cJSON *timeline = cJSON_AddObjectToObject(point, "timeline");
    if (!devices_ok || timeline == NULL || bg_summary_to_json(summary, timeline) != BG_OK) {
        cJSON_Delete(point);
        return NULL;
    }
    return point;
}

/* The step of `plan` as the simulator predicts it over `steps` steps. */
static bg_status_t simulated_ms(const bg_plan_t *plan, int64_t steps, double *out) {
    bg_timeline_t *tl = NULL;
    bg_timeline_summary_t *summary = NULL;
    bg_status_t st = bg_plan_simulate(plan, (int)steps, &tl);
    if (st == BG_OK) st = bg_timeline_summarize(tl, &summary);
    if (st == BG_OK) *out = summary->step_s * 1e3;
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
    return st;
}

/* The placement and the planner's request of the point (kind, m). */
static void point_request(const sweep_context_t *c, bg_schedule_kind_t kind, int m,
                          bg_placement_t *placement, bg_plan_request_t *request) {
    const sweep_options_t *o = c->o;
    *placement = o->placement;
    placement->schedule = kind;
    placement->microbatches = m;
    /* --chunks is interleaved's: the other schedules listed beside it run
     * one stage per device, so that one chart compares them all. */
    if (kind != BG_SCHEDULE_INTERLEAVED) bg_placement_use_path(placement);
    bg_placement_plan_request(placement, c->spec, o->batch, &o->optimizer, c->profile, o->simulate,
                              c->devices, request);
}

/* One point: plans it, then measures or simulates it, prints its row and
 * adds it to the metrics. A configuration that is impossible or does not
 * fit is reported in *skip and is not an error of the sweep. */
static bg_status_t run_point(sweep_context_t *c, bg_schedule_kind_t kind, int m,
                             bg_sweep_point_t *point, char *skip, size_t skip_size, FILE *out) {
    const sweep_options_t *o = c->o;
    bg_placement_t placement;
    bg_plan_request_t request;
    point_request(c, kind, m, &placement, &request);
    bg_plan_t *plan = NULL;
    bg_timeline_t *tl = NULL;
    bg_timeline_summary_t *summary = NULL;
    bg_pipeline_stage_info_t *info = NULL; /* measured points only */
    size_t *peaks = NULL;
    double predicted_ms = 0; /* a measured point's plan, simulated */
    int reversed = 0;        /* run on its devices the other way round */
    /* Interleaved where the model has no room for its stages: skipped,
     * as bg_placement_resolve found (the other schedules run). */
    bg_status_t st = kind == BG_SCHEDULE_INTERLEAVED && o->placement.interleaved_out[0]
                         ? bg_error_set(BG_ERR_INVALID, "%s", o->placement.interleaved_out)
                         : bg_plan_create_either_way(&request, &plan, &reversed);
    if (st == BG_ERR_INVALID) {
        snprintf(skip, skip_size, "%s", bg_error_message());
        st = BG_OK;
        goto add_point;
    }
    BG_CHECK(st);
    /* As plan, simulate and train run it: where it fits only the other way
     * round, on the devices so (measure builds the pipeline on them). */
    if (reversed) bg_device_list_reverse(&placement.devices);
    if (!c->split_noted)
        c->split_noted = bg_cli_note_split_profile(plan, o->placement.profile_path);
    const bg_partition_t *part = plan->partition;
    if (!part->fits) {
        char over[32], stages[64];
        bg_cli_group_digits((int64_t)part->overflow_bytes, over, sizeof over);
        const char *plural = part->overflow_bytes == 1 ? "" : "s";
        if (part->memory_check == BG_PARTITION_CHECK_DEVICES)
            snprintf(skip, skip_size,
                     "does not fit: %s's stages %s together are %s byte%s over its capacity",
                     plan->device[part->worst_device].name,
                     bg_cli_plan_device_stages(plan, part->worst_device, 1, stages, sizeof stages),
                     over, plural);
        else
            snprintf(skip, skip_size,
                     "does not fit: stage %d (on %s) is %s byte%s over its capacity%s",
                     part->worst_stage, plan->device[part->stage[part->worst_stage].device].name,
                     over, plural,
                     bg_plan_may_fit_reversed(plan) ? ", nor do the devices fit the other way round"
                                                    : "");
        if (c->unfit_m == 0) c->unfit_m = m;
        goto add_point;
    }
    peaks = calloc((size_t)part->stages, sizeof *peaks);
    BG_ALLOC_CHECK_GOTO(peaks, st, done);
    if (o->simulate) {
        for (int s = 0; s < part->stages; s++) peaks[s] = part->stage[s].peak_bytes;
        BG_CHECK_GOTO(bg_plan_simulate(plan, (int)o->steps, &tl), st, done);
    } else {
        info = calloc((size_t)part->stages, sizeof *info);
        BG_ALLOC_CHECK_GOTO(info, st, done);
        BG_CHECK_GOTO(measure(c, &placement, plan, &tl, info, skip, skip_size), st, done);
        if (tl == NULL) goto add_point;
        for (int s = 0; s < part->stages; s++) peaks[s] = bg_pipeline_stage_peak_bytes(&info[s]);
        BG_CHECK_GOTO(simulated_ms(plan, o->steps, &predicted_ms), st, done);
    }
    BG_CHECK_GOTO(bg_timeline_summarize(tl, &summary), st, done);
    point->schedule = point_name(o, kind);
    point->microbatches = m;
    point->step_ms = summary->step_s * 1e3;
    point->samples_per_s = (double)o->batch / summary->step_s;
    point->bubble_measured = summary->bubble_measured;
    point->simulated = o->simulate;
    point->bubble_theory = summary->bubble_theory;
    if (predicted_ms > 0) point->simulated_samples_per_s = (double)o->batch / (predicted_ms * 1e-3);
    print_row(out, point, bg_schedule_kind_name(kind), summary, predicted_ms, plan, peaks,
              reversed ? "  (devices the other way round)" : "");
    if (reversed) c->reversed_points++;
    double update_frac = 0, without = 0;
    if (bg_summary_below_theory_by_update(summary, &update_frac, &without) &&
        c->below_theory_points++ == 0) {
        c->below_theory_m = m;
        c->below_theory_schedule = bg_schedule_kind_name(kind);
        c->below_theory_update = update_frac;
        c->below_theory_without = without;
    }
    if (!o->simulate) {
        c->error_sum += fabs(predicted_ms - point->step_ms) / point->step_ms;
        c->errors++;
    }
add_point:
    if (c->points != NULL) {
        cJSON *json = point_json(c, kind, m, skip, plan, info, summary, predicted_ms);
        if (json != NULL && reversed && cJSON_AddTrueToObject(json, "devices_reversed") == NULL) {
            cJSON_Delete(json);
            json = NULL;
        }
        if (json == NULL)
            st = bg_error_set(BG_ERR_NOMEM, "out of memory writing metrics");
        else
            cJSON_AddItemToArray(c->points, json);
    }
done:
    free(info);
    free(peaks);
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
    bg_plan_destroy(plan);
    return st;
}

/* The settings every point shares, and an empty "points" for them. */
static cJSON *metrics_create(const sweep_options_t *o) {
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) return NULL;
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddBoolToObject(root, "simulated", o->simulate);
    if (!o->simulate) cJSON_AddStringToObject(root, "data", o->data);
    cJSON_AddStringToObject(root, "optimizer", bg_optimizer_kind_name(o->optimizer.kind));
    cJSON_AddNumberToObject(root, "batch", (double)o->batch);
    cJSON_AddNumberToObject(root, "chunks", o->placement.chunks);
    cJSON_AddBoolToObject(root, "recompute", o->placement.recompute);
    if (o->placement.profile_path != NULL)
        cJSON_AddStringToObject(root, "profile", o->placement.profile_path);
    else
        cJSON_AddNullToObject(root, "profile");
    cJSON_AddNumberToObject(root, "steps", (double)o->steps);
    if (!o->simulate) cJSON_AddNumberToObject(root, "warmup", (double)o->warmup);
    if (cJSON_AddArrayToObject(root, "points") == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* Writes the metrics: the points done, and why the sweep ended early when
 * it did (a stop signal, or the error of the point that failed). */
static bg_status_t metrics_write(const char *path, cJSON *root, int signal_number,
                                 const char *error) {
    cJSON_AddBoolToObject(root, "complete", signal_number == 0 && error == NULL);
    if (signal_number != 0) cJSON_AddNumberToObject(root, "stop_signal", signal_number);
    if (error != NULL) cJSON_AddStringToObject(root, "error", error);
    char *text = bg_cli_json_print(root);
    if (text == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory writing metrics");
    bg_status_t st = bg_text_file_write(path, text, "metrics");
    free(text);
    return st;
}

/* What the chart shows, under its title: "examples/fashion_cnn.model, batch
 * 64, on cpu:0, cpu:1; measured, 2 warm-up + 5 timed steps a point" (after
 * the devices, "(interleaved: 2 stages a device)" with --chunks 2). More
 * than CHART_DEVICES_NAMED devices are named by the first few and the last
 * ("cpu:0, cpu:1, cpu:2, ..., cpu:47 (48 devices)"). A new string to free;
 * NULL where memory runs out. */
enum { CHART_DEVICES_NAMED = 8 };

/* Where interleaved's devices close a cycle and the other schedules
 * listed run on a path of others (bg_placement_use_path): ", the others
 * on cuda:0, cuda:2, cuda:3". */
static void describe_path(const sweep_options_t *o, FILE *f) {
    const bg_placement_t *p = &o->placement;
    int others = 0;
    for (int k = 0; k < o->schedule_count; k++)
        others |= o->schedules[k] != BG_SCHEDULE_INTERLEAVED;
    if (p->path_links == NULL || !others) return;
    int same = p->path.count == p->devices.count;
    for (int d = 0; same && d < p->devices.count; d++)
        same = strcmp(p->path.devices[d].name, p->devices.devices[d].name) == 0;
    if (same) return;
    fputs(", the others on ", f);
    bg_device_list_print(&p->path, f);
}

static char *chart_subtitle(const sweep_options_t *o, const bg_cli_setup_t *setup,
                            int reversed_points) {
    char *text = NULL;
    size_t length = 0;
    FILE *f = open_memstream(&text, &length);
    if (f == NULL) return NULL;
    const bg_device_list_t *list = &o->placement.devices;
    fprintf(f, "%s, batch %lld, on ", o->model, (long long)o->batch);
    if (list->count <= CHART_DEVICES_NAMED)
        bg_placement_describe_devices(&o->placement, f);
    else
        fprintf(f, "%s, %s, %s, ..., %s (%d devices)", list->devices[0].name, list->devices[1].name,
                list->devices[2].name, list->devices[list->count - 1].name, list->count);
    if (o->placement.chunks > 1) {
        fprintf(f, " (interleaved: %d stages a device", o->placement.chunks);
        describe_path(o, f);
        fputc(')', f);
    }
    if (reversed_points > 0) /* which ones, the table says */
        fprintf(f, "; %d point%s on them the other way round", reversed_points,
                reversed_points == 1 ? "" : "s");
    if (o->simulate)
        fprintf(f, "; simulated from %s",
                setup->profile != NULL ? o->placement.profile_path : "the analytic cost model");
    else
        fprintf(f, "; measured, %lld warm-up + %lld timed step%s a point", (long long)o->warmup,
                (long long)o->steps, o->steps == 1 ? "" : "s");
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* What a sweep that ended early kept, for its last message. */
static const char *kept_outputs(int chart, int metrics) {
    if (chart && metrics) return "; the chart and metrics have those done";
    if (chart) return "; the chart has those done";
    if (metrics) return "; the metrics have those done";
    return "";
}

/* The counts that do not divide the batch run micro-batches one sample
 * apart (as plan and simulate say of theirs), each point's step their sum:
 * a note names them, so that a row is not read as of equal ones; past
 * what a line holds, the rest as "and N more". */
static void note_unequal_microbatches(const sweep_options_t *o) {
    char list[400] = "";
    int at = 0, listed = 0, unequal = 0;
    for (int k = 0; k < o->m_count; k++) {
        if (o->batch % o->ms[k] == 0) continue;
        unequal++;
        char sizes[64], entry[96];
        bg_cli_microbatch_sizes(o->batch, o->ms[k], sizes, sizeof sizes);
        const int n =
            snprintf(entry, sizeof entry, "%sM=%d: %s", listed > 0 ? "; " : "", o->ms[k], sizes);
        /* Once one does not fit the line, the rest are only counted. */
        if (listed < unequal - 1 || n < 0 || (size_t)(at + n) >= sizeof list) continue;
        memcpy(list + at, entry, (size_t)n + 1);
        at += n;
        listed++;
    }
    if (unequal == 0) return;
    char more[32] = "";
    if (unequal > listed) snprintf(more, sizeof more, "; and %d more", unequal - listed);
    fprintf(stderr,
            "note: a batch of %lld does not divide evenly into every count swept, and those "
            "points run micro-batches one sample apart (%s%s)\n",
            (long long)o->batch, list, more);
}

/* The sweep's first line (what is swept, how, on which devices) and its
 * table's header, on stdout with the table: a table redirected to a file
 * kept no word of what it measured (a tester's; until 2026-12-06 the first
 * line went to the standard error). */
static void print_header(const sweep_options_t *o, const bg_cli_setup_t *setup) {
    char shown[BG_CLI_SHOWN_MAX], profile_shown[BG_CLI_SHOWN_MAX];
    if (!o->simulate)
        printf("sweep of %s, batch %lld, %lld warm-up + %lld timed step%s per point: ",
               bg_cli_shown(o->model, shown, sizeof shown), (long long)o->batch,
               (long long)o->warmup, (long long)o->steps, o->steps == 1 ? "" : "s");
    else
        printf("simulated sweep of %s, batch %lld, %lld step%s per point, costs from %s: ",
               bg_cli_shown(o->model, shown, sizeof shown), (long long)o->batch,
               (long long)o->steps, o->steps == 1 ? "" : "s",
               setup->profile != NULL
                   ? bg_cli_shown(o->placement.profile_path, profile_shown, sizeof profile_shown)
                   : "the analytic cost model");
    /* Stages per point vary with --chunks (interleaved only): devices here. */
    fputs("on ", stdout);
    bg_placement_describe_devices(&o->placement, stdout);
    if (o->placement.recompute) fputs(", recompute", stdout);
    if (o->placement.chunks > 1) {
        printf(", %d chunks per device for interleaved", o->placement.chunks);
        describe_path(o, stdout);
    }
    fputc('\n', stdout);
    if (o->simulate) printf("(simulated) predicted by the planner and the simulator, not run\n");
    printf("%4s  %-11s %9s %15s %11s %9s %9s %9s  ", "M", "schedule", "step ms", "min-max ms",
           "samples/s", "bubble %", "theory %", "imbal. %");
    if (!o->simulate) printf("%15s  ", "sim ms (err)");
    printf("peak MiB per stage  split\n");
}

/* Runs each schedule's points in turn, each printed as its row, into
 * points[*count...] (skipped ones too, marked); *done counts the points
 * begun. Ends early on a stop signal, or on a point that fails: its status,
 * with what it said in error and detail. */
static bg_status_t sweep_points(sweep_context_t *c, bg_sweep_point_t *points, int *count, int *done,
                                char error[BG_ERROR_MAX], char detail[BG_ERROR_MAX]) {
    const sweep_options_t *o = c->o;
    const int total = o->schedule_count * o->m_count;
    char shown[BG_CLI_SHOWN_MAX];
    for (int k = 0; k < o->schedule_count && !bg_cli_stop_signal; k++) {
        const char *name = bg_schedule_kind_name(o->schedules[k]);
        for (int i = 0; i < o->m_count && !bg_cli_stop_signal; i++) {
            char skip[BG_ERROR_MAX] = "";
            fprintf(stderr, "[%d/%d] %s M=%d\n", ++*done, total, name, o->ms[i]);
            const bg_status_t failed =
                run_point(c, o->schedules[k], o->ms[i], &points[*count], skip, sizeof skip, stdout);
            if (failed != BG_OK) {
                snprintf(error, BG_ERROR_MAX, "%s M=%d: %s", name, o->ms[i], bg_error_message());
                snprintf(detail, BG_ERROR_MAX, "%s", bg_error_detail());
                return failed;
            }
            if (skip[0] != '\0') {
                printf("%4d  %-11s skipped: %s\n", o->ms[i], name,
                       bg_cli_shown(skip, shown, sizeof shown));
                bg_cli_flush_stdout();
                /* A skipped point stays, marked, so the chart shows it. */
                if (*count < MAX_POINTS)
                    points[*count] = (bg_sweep_point_t){.schedule = point_name(o, o->schedules[k]),
                                                        .microbatches = o->ms[i],
                                                        .simulated = o->simulate,
                                                        .skipped = 1};
            }
            if (*count < MAX_POINTS) /* at most 64 counts x 4 schedules */
                ++*count;
        }
    }
    return BG_OK;
}

int bg_cmd_sweep(int argc, char **argv) {
    sweep_options_t o = {0};
    int show_help = 0;
    bg_status_t st = parse_args(argc, argv, &o, &show_help);
    if (show_help) {
        printf(help, bg_placement_help, bg_placement_help_rest);
        return 0;
    }
    /* A closed pipe (`| head`, a `| tee` that was killed) costs the table,
       not the points: the sweep goes on and writes its chart and metrics
       (each row's write fails with EPIPE instead of ending the process).
       --help above ends by it, as any command's output does. */
    signal(SIGPIPE, SIG_IGN);
    if (st != BG_OK) return bg_cli_usage_error("sweep", "%s", bg_error_message());
    bg_cli_setup_t setup = {0};
    bg_dataset_t *train = NULL, *test = NULL;
    bg_sweep_point_t *points = calloc(MAX_POINTS, sizeof *points);
    cJSON *metrics = NULL;
    int count = 0, code = 0;
    bg_cli_stop_handlers_t old_handlers;
    int caught = 0; /* old_handlers hold what to restore */
    BG_ALLOC_CHECK_GOTO(points, st, fail);
    if (o.metrics != NULL) {
        metrics = metrics_create(&o);
        if (metrics == NULL) {
            st = bg_error_set(BG_ERR_NOMEM, "out of memory writing metrics");
            goto fail;
        }
    }
    /* A measured sweep takes --profile even for a fixed split or one stage:
     * its sim ms column prices each point's plan with it. */
    BG_CHECK_GOTO(bg_cli_setup_open(o.model, &o.placement, &o.optimizer, &setup), st, fail);
    const bg_model_spec_t *spec = setup.spec;
    if (!o.simulate) {
        bg_cli_note_unbound(setup.topology);
        bg_cli_note_data(o.data, o.data_given, spec->input, spec->classes);
        bg_cli_note_busy_machine();
        bg_cli_note_address_limit();
        BG_CHECK_GOTO(bg_cli_input_status(
                          bg_dataset_open(o.data, spec->input, spec->classes, 1, &train, &test)),
                      st, fail);
        if (train->count < o.batch) {
            st = bg_error_set(BG_ERR_INVALID,
                              "--batch %lld is larger than the %lld training samples",
                              (long long)o.batch, (long long)train->count);
            goto fail;
        }
    }
    print_header(&o, &setup);
    bg_cli_flush_stdout(); /* each row as it comes, also into a file beside stderr's progress */
    sweep_context_t c = {.o = &o,
                         .spec = spec,
                         .data = train,
                         .topology = setup.topology,
                         .profile = setup.profile,
                         .devices = setup.devices,
                         .points = cJSON_GetObjectItem(metrics, "points")};
    bg_cli_note_profile_sizes(setup.profile, o.batch, o.ms, o.m_count);
    note_unequal_microbatches(&o);
    const int total = o.schedule_count * o.m_count;
    int done_points = 0;
    char error[BG_ERROR_MAX] = "", detail[BG_ERROR_MAX] = ""; /* of the point that failed */
    bg_status_t failed;
    /* A stop signal ends the sweep after the point in progress, with the
       chart and metrics of the points done; so does a point that fails. */
    caught = 1;
    bg_cli_catch_stop_signals(&old_handlers, "sweep",
                              "\nbrigade sweep: stopping once the point in progress ends, keeping "
                              "the points done; a second signal a second from now quits at "
                              "once\n");
    bg_cli_cpu_sample_t cpu;
    bg_cli_cpu_start(&cpu);
    failed = sweep_points(&c, points, &count, &done_points, error, detail);
    const int stopped_in_points = bg_cli_stop_signal != 0;
    /* The load average before the points (bg_cli_note_busy_machine) misses
     * a machine that gets busy while they run. */
    const double others_cpu = o.simulate ? -1 : bg_cli_others_cpu_share(&cpu);
    /* The handlers stay until the chart and metrics are written (until
     * 2026-12-06 a signal then ended the sweep at once, silently). */
    bg_cli_set_stop_reply("\nbrigade sweep: stopping once the chart and metrics are written; a "
                          "second signal a second from now quits at once\n");
    /* As train and simulate say it of one device's bubble. */
    int run_points = 0;
    for (int i = 0; i < count; i++) run_points += !points[i].skipped;
    if (c.reversed_points > 0)
        printf("(%d point%s marked \"devices the other way round\" did not fit the chain the "
               "header names and ran on its devices the other way round, as plan, simulate and "
               "train run them)\n",
               c.reversed_points, c.reversed_points == 1 ? "" : "s");
    if (c.unfit_m > 0)
        printf("(a point that does not fit: 'brigade plan' with the sweep's options and that "
               "point's --microbatches, such as %d, says what would help)\n",
               c.unfit_m);
    if (o.placement.devices.count == 1 && run_points > 0 && !o.simulate) /* measured only */
        printf("(one device: its bubble %% is the host's work between ops and steps, not a "
               "pipeline bubble)\n");
    /* As train and simulate say it under their summary. */
    if (c.below_theory_points > 0)
        printf("(bubble %% below theory at %d point%s, such as M = %d under %s: the optimizer "
               "step, %.1f%% of its step on average, is busy time, which the theory, of F and B "
               "alone, leaves out; without it that point's bubble is %.1f%%)\n",
               c.below_theory_points, c.below_theory_points == 1 ? "" : "s", c.below_theory_m,
               c.below_theory_schedule, 100 * c.below_theory_update, 100 * c.below_theory_without);
    /* The gap between the planner's world and this machine, reported. */
    if (c.errors > 0) {
        char shown[BG_CLI_SHOWN_MAX];
        printf("simulated against measured: mean |error| %.0f%% over %d point%s (costs from %s; "
               "sim ms: each point's plan simulated; err: (sim - measured) / measured, negative "
               "where the simulation is faster)\n",
               100 * c.error_sum / c.errors, c.errors, c.errors == 1 ? "" : "s",
               setup.profile != NULL ? bg_cli_shown(o.placement.profile_path, shown, sizeof shown)
                                     : "the analytic cost model");
        if (metrics != NULL)
            cJSON_AddNumberToObject(metrics, "simulated_mean_abs_error", c.error_sum / c.errors);
    }
    if (run_points > 0 && !o.simulate) {
        bg_cli_note_others_cpu(others_cpu, "the points ran");
        if (metrics != NULL && others_cpu >= 0)
            cJSON_AddNumberToObject(metrics, "others_cpu_share", others_cpu);
    }
    /* A stop signal during the last point ends nothing early: the sweep is
     * whole, and ends by the signal once it is written. */
    const int early = failed != BG_OK || (bg_cli_stop_signal != 0 && done_points < total);
    bg_cli_outputs_t outputs = {.cmd = "sweep", .failed = BG_OK};
    int chart_written = 0, metrics_written = 0;
    if (o.chart != NULL && run_points > 0) {
        char *subtitle = chart_subtitle(&o, &setup, c.reversed_points); /* NULL: without it */
        const bg_status_t written = bg_svg_chart_write(o.chart, points, count, subtitle);
        free(subtitle);
        bg_cli_output_written(&outputs, written, "chart", o.chart);
        chart_written = written == BG_OK;
    }
    if (metrics != NULL) {
        const bg_status_t written = metrics_write(
            o.metrics, metrics, early ? bg_cli_stop_signal : 0, failed != BG_OK ? error : NULL);
        bg_cli_output_written(&outputs, written, "metrics", o.metrics);
        metrics_written = written == BG_OK;
    }
    bg_cli_flush_stdout(); /* the rows a last message points to go first, also into a pipe */
    const char *kept = kept_outputs(chart_written, metrics_written);
    if (failed != BG_OK) {
        /* Shown as every error is, after the chart and metrics. */
        bg_error_set(failed, "%s", error);
        if (detail[0] != '\0') bg_error_set_detail("%s", detail);
        bg_cli_fail("sweep", failed);
        fprintf(stderr, "brigade sweep: stopped after %d of %d points%s\n", done_points - 1, total,
                kept);
        code = bg_status_exit_code(failed);
    } else if (early) {
        fprintf(stderr, "brigade sweep: interrupted after %d of %d points%s\n", done_points, total,
                kept);
        code = 128 + bg_cli_stop_signal;
    } else if (bg_cli_stop_signal != 0) {
        fprintf(stderr, "brigade sweep: a stop signal came %s; every point is done%s\n",
                stopped_in_points ? "during the last point"
                                  : "while the chart and metrics were written",
                kept[0] != '\0' ? ", and written" : "");
    } else if (run_points == 0) {
        /* Like plan when nothing fits: a result, but not a usable one. */
        fprintf(stderr, "brigade sweep: every point was skipped (above)%s%s\n",
                o.chart != NULL ? "; no chart written" : "",
                metrics_written ? "; the metrics say why" : "");
        code = 2;
    }
    if (code == 0 && outputs.failed != BG_OK) code = bg_status_exit_code(outputs.failed);
    goto done;
fail:
    code = bg_cli_fail("sweep", st);
done:
    free(points);
    cJSON_Delete(metrics);
    bg_dataset_destroy(train);
    bg_dataset_destroy(test);
    bg_cli_setup_close(&setup);
    if (caught) bg_cli_restore_stop_signals(&old_handlers);
    if (bg_cli_stop_signal != 0) bg_cli_end_by_stop_signal();
    return code;
}
