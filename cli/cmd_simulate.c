/* brigade simulate MODEL [options]: plans a placement (stages/planner.h),
 * runs its schedule through the discrete-event simulator with the plan's
 * predicted costs, and prints the same summary as train, so predicted and
 * measured runs compare directly; writes the same trace, timeline and
 * metrics files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "placement.h"
#include "planning.h"
#include "report.h"
#include "svg.h"
#include "topology.h"
#include "text_file.h"
#include "trace.h"

static const char help[] =
    "usage: brigade simulate MODEL [options]\n"
    "\n"
    "Predicts a training run without running it: plans the stages as 'brigade\n"
    "plan' does (or takes --split), then simulates the schedule event by event,\n"
    "each device running its ops in order, transfers crossing the links while\n"
    "devices compute (between CPU devices with --profile: the two devices'\n"
    "threads copying the tensor themselves, with the measured hand-off\n"
    "between), the optimizer step behind a barrier as in train. Durations\n"
    "come from the cost model: analytic, or this machine's measured layer\n"
    "and stage times with --profile (brigade profile). A profile of two CPU\n"
    "devices also holds each stage's time beside a co-runner on the other\n"
    "core: each F, B and W then takes longer by that slowdown times the\n"
    "fraction of it during which another device computes or copies (cores\n"
    "share the cache and the memory bandwidth), settled over a few\n"
    "simulated passes. Prints the same per-stage summary as 'brigade train'\n"
    "(busy, idle, waits, bubble beside the schedule's in theory: (K-1)/(M+K-1)\n"
    "for gpipe and 1f1b) with the plan's peak memory per stage, and the\n"
    "simulated samples/s. A plan that does not fit is refused as plan does.\n"
    "\n"
    "simulate:\n"
    "  --batch B          samples per optimizer step (default 64)\n"
    "  --optimizer NAME   adam (default) or sgd\n"
    "  --momentum X       sgd momentum (default 0)\n"
    "  --steps N          steps to simulate, 1 to 1000 (default 3)\n"
    "\n%s%s%s"
    "outputs:\n"
    "  --metrics FILE     the summary as JSON under \"timeline\", and a \"stages\"\n"
    "                     list with the keys of 'brigade plan --json' stages\n"
    "  --trace FILE.json  Chrome trace of the simulated steps (Perfetto)\n"
    "  --timeline FILE.svg  picture of the last simulated step\n"
    "\n"
    "examples:\n"
    "  brigade simulate examples/fashion_cnn.model --devices cpu:2 --microbatches 4\n"
    "  brigade profile examples/fashion_cnn.model --devices cpu:2 --microbatches 4 \\\n"
    "      -o cnn.profile.json\n"
    "  brigade simulate examples/fashion_cnn.model --devices cpu:2 --microbatches 4 \\\n"
    "      --profile cnn.profile.json --timeline sim.svg\n";

typedef struct simulate_options {
    const char *model, *metrics, *trace, *timeline;
    bg_placement_t placement;
    int64_t batch, steps;
    bg_optimizer_config_t optimizer;
} simulate_options_t;

static bg_status_t parse_args(int argc, char **argv, simulate_options_t *o, int *show_help) {
    static const char *const own[] = {"--batch",   "--optimizer", "--momentum", "--steps",
                                      "--metrics", "--trace",     "--timeline"};
    bg_placement_init(&o->placement);
    for (int i = 1; i < argc && !*show_help; i++) {
        int taken, known = 0;
        BG_CHECK(bg_cli_shared_arg(argc, argv, &i, &o->model, &o->placement, show_help, &taken));
        if (taken) continue;
        const char *arg = argv[i], *v;
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) known |= !strcmp(arg, own[k]);
        if (!known) return bg_cli_unknown_option(arg, own, sizeof own / sizeof own[0], 1, NULL);
        BG_CHECK(bg_cli_option_value(argc, argv, &i, &v));
        if (strcmp(arg, "--batch") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, 1 << 20, &o->batch));
        else if (strcmp(arg, "--optimizer") == 0)
            BG_CHECK(bg_cli_parse_optimizer(arg, v, &o->optimizer.kind));
        else if (strcmp(arg, "--momentum") == 0)
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1, &o->optimizer.sgd.momentum));
        else if (strcmp(arg, "--steps") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, BG_CLI_MAX_RECORDED_STEPS, &o->steps));
        else if (strcmp(arg, "--metrics") == 0)
            o->metrics = v;
        else if (strcmp(arg, "--trace") == 0)
            o->trace = v;
        else
            o->timeline = v;
    }
    if (*show_help) return BG_OK;
    if (o->model == NULL) return bg_error_set(BG_ERR_INVALID, "no MODEL given");
    BG_CHECK(bg_cli_check_optimizer(&o->optimizer, argc, argv));
    BG_CHECK(bg_cli_check_output("--metrics", o->metrics));
    BG_CHECK(bg_cli_check_output("--trace", o->trace));
    BG_CHECK(bg_cli_check_output("--timeline", o->timeline));
    const bg_cli_file_t files[] = {
        {"MODEL", o->model, 0, NULL, 0},
        {"--profile", o->placement.profile_path, 0, NULL, 0},
        {"--topology", o->placement.topology_path, 0, NULL, 0},
        {"hwloc (HWLOC_XMLFILE)", bg_cli_env_topology(o->placement.topology_path), 0, NULL, 1},
        {"--metrics", o->metrics, 1, NULL, 0},
        {"--trace", o->trace, 1, NULL, 0},
        {"--timeline", o->timeline, 1, NULL, 0},
    };
    return bg_cli_check_distinct(files, (int)(sizeof files / sizeof files[0]));
}

static bg_status_t write_metrics(const simulate_options_t *o, const bg_plan_t *plan,
                                 const bg_timeline_summary_t *summary) {
    cJSON *root = cJSON_CreateObject(), *timeline = NULL;
    if (root == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory writing metrics");
    const bg_plan_request_t *r = &plan->request;
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddStringToObject(root, "optimizer", bg_optimizer_kind_name(r->optimizer.kind));
    cJSON_AddNumberToObject(root, "batch", (double)r->batch);
    cJSON_AddStringToObject(root, "schedule", bg_schedule_kind_name(r->schedule));
    cJSON_AddNumberToObject(root, "microbatches", r->microbatches);
    cJSON_AddNumberToObject(root, "chunks", r->chunks);
    cJSON_AddBoolToObject(root, "recompute", r->recompute);
    if (o->placement.reversed) cJSON_AddTrueToObject(root, "devices_reversed");
    if (o->placement.profile_path != NULL)
        cJSON_AddStringToObject(root, "profile", o->placement.profile_path);
    else
        cJSON_AddNullToObject(root, "profile");
    cJSON_AddNumberToObject(root, "steps", (double)o->steps);
    cJSON_AddNumberToObject(root, "samples_per_s",
                            summary->step_s > 0 ? (double)r->batch / summary->step_s : 0);
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    bg_status_t st = stages != NULL ? BG_OK : BG_ERR_NOMEM;
    for (int s = 0; st == BG_OK && s < plan->partition->stages; s++) {
        cJSON *stage = bg_cli_plan_stage_json(plan, s);
        if (stage == NULL) st = BG_ERR_NOMEM;
        cJSON_AddItemToArray(stages, stage);
    }
    if (st == BG_OK && !bg_cli_plan_add_devices_json(root, plan)) st = BG_ERR_NOMEM;
    if (st == BG_OK) timeline = cJSON_AddObjectToObject(root, "timeline");
    if (st == BG_OK) st = timeline != NULL ? bg_summary_to_json(summary, timeline) : BG_ERR_NOMEM;
    char *text = st == BG_OK ? bg_cli_json_print(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory writing metrics");
    st = bg_text_file_write(o->metrics, text, "metrics");
    free(text);
    return st;
}

/* Prints the summary and writes the requested files, whose failures go to
 * `outputs`. */
static bg_status_t report(const simulate_options_t *o, const bg_plan_t *plan,
                          const bg_timeline_t *tl, bg_cli_outputs_t *outputs) {
    bg_timeline_summary_t *summary = NULL;
    const int stages = plan->partition->stages;
    size_t *peaks = calloc((size_t)stages, sizeof *peaks);
    bg_status_t st = BG_OK;
    BG_ALLOC_CHECK_GOTO(peaks, st, done);
    for (int s = 0; s < stages; s++) peaks[s] = plan->partition->stage[s].peak_bytes;
    BG_CHECK_GOTO(bg_timeline_summarize(tl, &summary), st, done);
    bg_cli_files_guard_t guard;
    bg_cli_files_begin(&guard);
    if (tl->steps > 1)
        printf("%d steps, as simulated; ms and %% per step, their mean:\n", tl->steps);
    else
        printf("1 step, as simulated:\n");
    st = bg_summary_print(stdout, summary, peaks);
    if (st != BG_OK) {
        bg_cli_files_end(&guard);
        goto done;
    }
    char rate[32];
    printf("simulated: %s samples/s (step %.3f ms)\n",
           bg_cli_rate(summary->step_s > 0 ? (double)plan->request.batch / summary->step_s : 0.0,
                       rate, sizeof rate),
           summary->step_s * 1e3);
    /* The summary out of stdio's buffer before the files: a stop signal
     * while they are written ends the process without flushing it. */
    bg_cli_flush_stdout();
    bg_cli_write_timeline_files(outputs, o->trace, o->timeline, tl);
    if (o->metrics != NULL)
        bg_cli_output_written(outputs, write_metrics(o, plan, summary), "metrics", o->metrics);
    bg_cli_files_end(&guard);
done:
    bg_timeline_summary_destroy(summary);
    free(peaks);
    return st;
}

int bg_cmd_simulate(int argc, char **argv) {
    simulate_options_t o = {.batch = 64, .steps = 3, .optimizer = BG_OPTIMIZER_CONFIG_INIT};
    int show_help = 0;
    bg_status_t st = parse_args(argc, argv, &o, &show_help);
    if (show_help) {
        printf(help, bg_placement_help, bg_placement_help_schedule, bg_placement_help_rest);
        return 0;
    }
    if (st != BG_OK) return bg_cli_usage_error("simulate", "%s", bg_error_message());
    bg_cli_setup_t setup = {0};
    bg_plan_t *plan = NULL;
    bg_timeline_t *tl = NULL;
    int code = 0;
    BG_CHECK_GOTO(
        bg_cli_plan_open("simulate", o.model, &o.placement, o.batch, &o.optimizer, &setup, &plan),
        st, fail);
    /* Simulated before anything is printed, so that a refusal (a timeline
     * it could never hold) leaves stdout empty, as other usage errors do. */
    if (plan->partition->fits) BG_CHECK_GOTO(bg_plan_simulate(plan, (int)o.steps, &tl), st, fail);
    char source[384];
    char shown[BG_CLI_SHOWN_MAX];
    printf("simulation of %s: ", bg_cli_shown(o.model, shown, sizeof shown));
    bg_placement_describe(&o.placement, 0, stdout);
    /* The layers of each stage (a new user's); the next line says whose. */
    bg_cli_print_split(plan, 0, stdout);
    char sizes[64];
    printf("\nbatch %lld (%s), %s; %s; costs from %s\n\n", (long long)o.batch,
           bg_cli_microbatch_sizes(o.batch, plan->request.microbatches, sizes, sizeof sizes),
           bg_optimizer_kind_name(o.optimizer.kind),
           bg_cli_plan_split_source(plan, source, sizeof source),
           setup.profile != NULL ? bg_cli_shown(o.placement.profile_path, shown, sizeof shown)
                                 : "the analytic cost model");
    if (!plan->partition->fits) {
        bg_cli_plan_explain_overflow("simulate", plan, &o.placement, 1, NULL, NULL);
        code = 2;
        goto done;
    }
    bg_cli_outputs_t outputs = {.cmd = "simulate", .failed = BG_OK};
    BG_CHECK_GOTO(report(&o, plan, tl, &outputs), st, fail);
    if (outputs.failed != BG_OK) code = bg_status_exit_code(outputs.failed);
    goto done;
fail:
    code = bg_cli_fail("simulate", st);
done:
    bg_timeline_destroy(tl);
    bg_plan_destroy(plan);
    bg_cli_setup_close(&setup);
    return code;
}
