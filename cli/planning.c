#include "planning.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cuda/backend_cuda.h"

static const double mib = 1024.0 * 1024.0;

bg_status_t bg_cli_shared_arg(int argc, char **argv, int *i, const char **model,
                              bg_placement_t *placement, int *show_help, int *taken) {
    const char *arg = argv[*i], *value = NULL;
    *taken = 1;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        *show_help = 1;
        return BG_OK;
    }
    if (arg[0] != '-' || arg[1] == '\0') {
        if (*model != NULL) return bg_cli_second_model(*model, arg, 1);
        *model = arg;
        return BG_OK;
    }
    int kind = bg_placement_is_option(arg);
    if (kind == 0) {
        *taken = 0;
        return BG_OK;
    }
    BG_CHECK(kind == 1 ? bg_cli_option_value(argc, argv, i, &value) : bg_cli_flag(argv, *i));
    return bg_placement_apply(placement, arg, value);
}

/* A profile made with `brigade profile --split` times only that split's
 * stages, which then tile the model; the planner prices any other split
 * from the layers' sums. Says so when the placement does not ask for that
 * split, since a plan would then compare unlike figures. */
static void note_split_profile(const bg_placement_t *p, const bg_profile_t *prof,
                               const char *path) {
    int split[BG_MAX_STAGES], count = 0, end = 0;
    for (int i = 0; i < prof->stage_count; i++) {
        const bg_stage_profile_t *s = &prof->stage[i];
        if (i > 0 && s->first == prof->stage[i - 1].first && s->last == prof->stage[i - 1].last)
            continue; /* the same range at another slot count */
        if (s->first != end || count >= BG_MAX_STAGES) return; /* every range: a full profile */
        if (s->first > 0) split[count++] = s->first;
        end = s->last;
    }
    if (count == 0 || end != prof->layers) return;
    int same = p->split_count == count;
    for (int s = 0; same && s < count; s++) same = p->split[s] == split[s];
    if (same) return;
    char text[12 * BG_MAX_STAGES]; /* each boundary: a comma and up to 10 digits */
    int at = 0;
    for (int s = 0; s < count; s++)
        at += snprintf(text + at, sizeof text - (size_t)at, "%s%d", s ? "," : "", split[s]);
    fprintf(stderr,
            "note: %s times only the stages of split %s (brigade profile --split); other "
            "splits are priced from its layers' sums, so give --split %s too, or profile "
            "without --split\n",
            path, text, text);
}

/* A profile without stage times (its model has more layers than profile
 * times every range of, and it was made without --split; or an older
 * file) prices each stage from the sum of its layers' times, missing what
 * the stage's own working set costs. Says so where stages are cut. */
static void note_no_stage_times(const bg_placement_t *p, const bg_profile_t *prof,
                                const char *path) {
    if (prof->stage_count > 0 || bg_placement_stage_count(p) < 2) return;
    char why[96];
    if (prof->layers > BG_PROFILE_MAX_STAGE_LAYERS)
        snprintf(why, sizeof why,
                 "its model has %d layers, and without --split only models of "
                 "up to %d get them",
                 prof->layers, BG_PROFILE_MAX_STAGE_LAYERS);
    else
        snprintf(why, sizeof why, "a version %d profile, older than stage times", prof->version);
    fprintf(stderr,
            "note: %s holds no stage times (%s), so each stage is priced from the sum of its "
            "layers' times; brigade profile --split I,J,.. times the stages of one placement\n",
            path, why);
}

bg_status_t bg_cli_profile_load(const bg_placement_t *p, const bg_model_spec_t *spec,
                                const bg_optimizer_config_t *optimizer, bg_profile_t **out) {
    *out = NULL;
    if (p->profile_path == NULL) return BG_OK;
    for (int d = 0; d < p->devices.count; d++)
        if (p->devices.devices[d].kind != BG_DEVICE_CPU)
            return bg_error_set(BG_ERR_INVALID,
                                "--profile %s holds CPU core times, but --devices %s has %s (GPUs "
                                "are planned from the analytic costs; leave out --profile)",
                                p->profile_path, p->devices_text, p->devices.devices[d].name);
    BG_CHECK(bg_cli_input_status(bg_profile_load(p->profile_path, spec, out)));
    const bg_status_t st = bg_profile_check_optimizer(*out, p->profile_path, optimizer);
    if (st != BG_OK) {
        bg_profile_destroy(*out);
        *out = NULL;
        return st;
    }
    note_split_profile(p, *out, p->profile_path);
    note_no_stage_times(p, *out, p->profile_path);
    return BG_OK;
}

bg_status_t bg_cli_check_profile_used(const char *cmd, const bg_placement_t *p) {
    const int stages = bg_placement_stage_count(p);
    const int planner_chooses =
        p->auto_microbatches || p->auto_schedule || (p->split_count == 0 && stages > 1);
    if (p->profile_path != NULL && !planner_chooses)
        return bg_error_set(BG_ERR_INVALID,
                            "--profile prices the splits the planner chooses among; %s, so "
                            "%s would not use it (plan and simulate take it to predict "
                            "this placement)",
                            stages == 1 ? "this run has one stage" : "--split fixes the split",
                            cmd);
    return BG_OK;
}

bg_status_t bg_cli_plan_make(const char *cmd, bg_placement_t *p, const bg_plan_request_t *request,
                             bg_plan_t **out) {
    unsigned flags = (p->auto_microbatches ? BG_PLAN_SEARCH_MICROBATCHES : 0) |
                     (p->auto_schedule ? BG_PLAN_SEARCH_SCHEDULE : 0);
    if (flags == 0) return bg_plan_create(request, out);
    bg_plan_t *plan = NULL;
    BG_CHECK(bg_plan_search(request, flags, &plan));
    p->microbatches = plan->request.microbatches;
    p->schedule = plan->request.schedule;
    /* --chunks is interleaved's: another choice runs one chunk a device. */
    const int dropped_chunks = p->chunks != plan->request.chunks;
    p->chunks = plan->request.chunks;
    char rate[32];
    fprintf(stderr, "brigade %s: chose", cmd);
    if (p->auto_microbatches) fprintf(stderr, " --microbatches %d", p->microbatches);
    if (p->auto_schedule) fprintf(stderr, " --schedule %s", bg_schedule_kind_name(p->schedule));
    if (dropped_chunks) fprintf(stderr, " (one chunk a device: --chunks is interleaved's)");
    /* Without a profile the figure is the cost model's FLOPs at an assumed
     * speed, which can be several times off for small layers: said so. */
    if (plan->partition->fits && plan->simulated_step_s > 0)
        fprintf(stderr, ": %s samples/s simulated (a step of %.3f ms%s), every stage fits\n",
                bg_cli_group_digits(
                    (int64_t)((double)plan->request.batch / plan->simulated_step_s + 0.5), rate,
                    sizeof rate),
                plan->simulated_step_s * 1e3,
                p->profile_path != NULL ? ", from --profile's times"
                                        : ", from FLOPs at an assumed speed; 'brigade profile' "
                                          "measures this model");
    else if (!plan->partition->fits)
        fprintf(stderr, ": nothing fits; this overflows least\n");
    else
        fprintf(stderr, ", every stage fits\n");
    *out = plan;
    return BG_OK;
}

void bg_cli_plan_print_table(const bg_plan_t *p, FILE *out) {
    const bg_partition_t *part = p->partition;
    const int m = p->request.microbatches;
    fprintf(out, "%5s  %-9s %-8s %8s %8s %8s %8s %10s %10s %5s %9s %9s %9s %9s %9s %9s\n", "stage",
            "layers", "device", "fwd ms", "bwd ms", "send ms", "busy ms", "peak MiB", "cap MiB",
            "use", "params", "grads", "optimizer", "stash", "buffers", "other");
    for (int s = 0; s < part->stages; s++) {
        const bg_partition_stage_t *st = &part->stage[s];
        char layers[32], cap[16], use[16];
        snprintf(layers, sizeof layers, "%d-%d", st->first_layer, st->last_layer - 1);
        snprintf(cap, sizeof cap, "%.2f", (double)st->capacity_bytes / mib);
        const double used =
            100.0 * (double)st->peak_bytes / (double)(st->capacity_bytes ? st->capacity_bytes : 1);
        /* The column holds 5 characters; far over, the MiB columns say by
         * how much. */
        if (used < 9999.5)
            snprintf(use, sizeof use, "%.0f%%", used);
        else
            snprintf(use, sizeof use, ">9999%%");
        fprintf(out,
                "%5d  %-9s %-8s %8.3f %8.3f %8.3f %8.3f %10.2f %10s %5s %9.2f %9.2f %9.2f %9.2f "
                "%9.2f %9.2f\n",
                s, layers, p->device[st->device].name, m * st->time.forward * 1e3,
                m * (st->time.backward + st->time.recompute) * 1e3, m * st->send_s * 1e3,
                m * st->seconds * 1e3, (double)st->peak_bytes / mib, st->capacity_bytes ? cap : "-",
                st->capacity_bytes ? use : "-", (double)st->memory.params / mib,
                (double)st->memory.grads / mib, (double)st->memory.optimizer / mib,
                (double)st->memory.stash / mib, (double)st->memory.buffers / mib,
                (double)(st->memory.channels + st->memory.workspace) / mib);
    }
    fprintf(out, "(peak MiB is the sum of the columns from params on; other: the slots of "
                 "the channels into the stage and the ops' workspace)\n");
    /* The planner's estimate, with the update; a searched plan also has the
     * simulated step the choice went by. */
    char rate[32];
    fprintf(out,
            "\npredicted step: %.3f ms, %.3f ms with the optimizer step (%s samples/s); "
            "bottleneck stage %d\n",
            p->step_s * 1e3, (p->step_s + p->update_s) * 1e3,
            bg_cli_rate(bg_plan_samples_per_s(p), rate, sizeof rate), bg_plan_bottleneck_stage(p));
    if (p->simulated_step_s > 0)
        fprintf(out,
                "simulated step: %.3f ms with the optimizer step (%s samples/s; what "
                "--microbatches auto and --schedule auto go by)\n",
                p->simulated_step_s * 1e3,
                bg_cli_rate((double)p->request.batch / p->simulated_step_s, rate, sizeof rate));
    fprintf(out,
            "bubble: %.1f%% predicted (the planner's estimate), %.1f%% in theory for equal "
            "stages\n",
            100.0 * p->bubble, 100.0 * p->bubble_theory);
}

cJSON *bg_cli_json_add_uint(cJSON *object, const char *key, uint64_t value) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, value);
    return cJSON_AddRawToObject(object, key, text);
}

void bg_cli_json_add_memory(cJSON *stage, const bg_cost_memory_t *m) {
    cJSON *peak = cJSON_AddObjectToObject(stage, "peak_by_category");
    bg_cli_json_add_uint(peak, "params", m->params);
    bg_cli_json_add_uint(peak, "grads", m->grads);
    bg_cli_json_add_uint(peak, "optimizer", m->optimizer);
    bg_cli_json_add_uint(peak, "stash", m->stash);
    bg_cli_json_add_uint(peak, "buffers", m->buffers);
    bg_cli_json_add_uint(peak, "channels", m->channels);
    bg_cli_json_add_uint(peak, "workspace", m->workspace);
}

cJSON *bg_cli_plan_stage_json(const bg_plan_t *p, int s) {
    const bg_partition_stage_t *st = &p->partition->stage[s];
    const bg_cost_memory_t *mem = &st->memory;
    const int m = p->request.microbatches;
    cJSON *stage = cJSON_CreateObject();
    if (stage == NULL) return NULL;
    cJSON *layers = cJSON_AddArrayToObject(stage, "layers");
    for (int l = st->first_layer; layers != NULL && l < st->last_layer; l++)
        cJSON_AddItemToArray(layers, cJSON_CreateNumber(l));
    cJSON_AddStringToObject(stage, "device", p->device[st->device].name);
    cJSON *ms = cJSON_AddObjectToObject(stage, "predicted_ms");
    cJSON_AddNumberToObject(ms, "forward", m * st->time.forward * 1e3);
    cJSON_AddNumberToObject(ms, "backward", m * st->time.backward * 1e3);
    cJSON_AddNumberToObject(ms, "recompute", m * st->time.recompute * 1e3);
    cJSON_AddNumberToObject(ms, "send", m * st->send_s * 1e3);
    cJSON_AddNumberToObject(ms, "busy", m * st->seconds * 1e3);
    bg_cli_json_add_uint(stage, "peak_bytes", st->peak_bytes);
    bg_cli_json_add_uint(stage, "capacity_bytes", st->capacity_bytes);
    bg_cli_json_add_memory(stage, mem);
    int slots = p->stash_slots[s] < 1 ? 1 : p->stash_slots[s];
    cJSON_AddNumberToObject(stage, "stash_slots", slots);
    cJSON_AddNumberToObject(stage, "peak_microbatches_in_flight", slots);
    return stage;
}

const char *bg_cli_plan_split_source(const bg_plan_t *p, char *buf, size_t size) {
    if (p->request.split != NULL) {
        snprintf(buf, size, "split given by --split");
        return buf;
    }
    const int least = p->config.objective == BG_PARTITION_LEAST_STEP;
    int at = snprintf(buf, size, "split chosen by the planner (%s",
                      least ? "shortest predicted step: M x the slowest stage plus the others' "
                              "fill and drain"
                            : "slowest stage minimised");
    if (p->other_split_step_s > 0 && at > 0 && (size_t)at < size)
        at += snprintf(buf + at, size - (size_t)at, "; %.3f ms simulated against %.3f for the %s",
                       p->simulated_step_s * 1e3, p->other_split_step_s * 1e3,
                       least ? "slowest stage's split" : "shortest predicted step's split");
    if (p->least_step_skipped && at > 0 && (size_t)at < size)
        at += snprintf(buf + at, size - (size_t)at,
                       "; the search for the shortest predicted step ran out of memory and was "
                       "skipped");
    if (at > 0 && (size_t)at < size) snprintf(buf + at, size - (size_t)at, ")");
    return buf;
}

const char *bg_cli_plan_split_key(const bg_plan_t *p) {
    if (p->request.split != NULL) return "given";
    return p->config.objective == BG_PARTITION_LEAST_STEP ? "least_step" : "slowest_stage";
}

cJSON *bg_cli_plan_json(const bg_plan_t *p, const char *model) {
    const bg_plan_request_t *r = &p->request;
    const bg_partition_t *part = p->partition;
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) return NULL;
    cJSON_AddStringToObject(root, "model", model);
    cJSON_AddStringToObject(root, "optimizer", bg_optimizer_kind_name(r->optimizer.kind));
    cJSON_AddNumberToObject(root, "batch", (double)r->batch);
    cJSON_AddStringToObject(root, "schedule", bg_schedule_kind_name(r->schedule));
    cJSON_AddNumberToObject(root, "microbatches", r->microbatches);
    cJSON_AddNumberToObject(root, "chunks", r->chunks);
    cJSON_AddBoolToObject(root, "recompute", r->recompute);
    cJSON_AddBoolToObject(root, "fits", part->fits);
    cJSON_AddStringToObject(root, "split", bg_cli_plan_split_key(p));
    if (p->other_split_step_s > 0)
        cJSON_AddNumberToObject(root, "other_split_simulated_step_ms", p->other_split_step_s * 1e3);
    if (p->least_step_skipped) cJSON_AddTrueToObject(root, "least_step_skipped");
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    for (int s = 0; stages != NULL && s < part->stages; s++) {
        cJSON *stage = bg_cli_plan_stage_json(p, s);
        if (stage == NULL) {
            cJSON_Delete(root);
            return NULL;
        }
        cJSON_AddItemToArray(stages, stage);
    }
    /* The planner's estimate (step_ms without the optimizer step, update_ms
     * the slowest device's, samples_per_s over both), then the simulator's. */
    cJSON_AddNumberToObject(root, "step_ms", p->step_s * 1e3);
    cJSON_AddNumberToObject(root, "update_ms", p->update_s * 1e3);
    cJSON_AddNumberToObject(root, "samples_per_s", bg_plan_samples_per_s(p));
    if (p->simulated_step_s > 0) {
        cJSON_AddNumberToObject(root, "simulated_step_ms", p->simulated_step_s * 1e3);
        cJSON_AddNumberToObject(root, "simulated_samples_per_s",
                                (double)r->batch / p->simulated_step_s);
    }
    cJSON_AddNumberToObject(root, "bottleneck_stage", bg_plan_bottleneck_stage(p));
    cJSON_AddNumberToObject(root, "bubble", p->bubble);
    cJSON_AddNumberToObject(root, "bubble_theory", p->bubble_theory);
    if (!part->fits) {
        cJSON *over = cJSON_AddObjectToObject(root, "overflow");
        cJSON_AddNumberToObject(over, "stage", part->worst_stage);
        bg_cli_json_add_uint(over, "bytes", part->overflow_bytes);
    }
    return root;
}

/* Tries one change; prints it if the plan then fits, and adds it to
 * `found` (when not NULL) as {"change", "largest_stage_bytes", "step_ms"}.
 * Returns 1 if it fit. */
static int try_variant(const bg_plan_request_t *r, const char *what, cJSON *found) {
    bg_plan_t *p = NULL;
    bg_plan_request_t v = *r;
    v.fits_only = 1; /* a variant that does not fit is not shown */
    if (bg_plan_create(&v, &p) != BG_OK) return 0;
    int fits = p->partition->fits;
    if (fits) {
        size_t peak = 0;
        for (int s = 0; s < p->partition->stages; s++)
            if (p->partition->stage[s].peak_bytes > peak) peak = p->partition->stage[s].peak_bytes;
        fprintf(stderr,
                "  %-32s fits: largest stage %.2f MiB, step %.3f ms without the optimizer step\n",
                what, (double)peak / mib, p->step_s * 1e3);
        cJSON *change = found != NULL ? cJSON_CreateObject() : NULL;
        if (change != NULL) {
            cJSON_AddStringToObject(change, "change", what);
            bg_cli_json_add_uint(change, "largest_stage_bytes", peak);
            cJSON_AddNumberToObject(change, "step_ms", p->step_s * 1e3);
            cJSON_AddItemToArray(found, change);
        }
    }
    bg_plan_destroy(p);
    return fits;
}

/* Tries the micro-batch counts `--microbatches auto` would (divisors of B,
 * powers of two, and for interleaved K times powers of two), nearest to the request first in each
 * direction, and prints the nearest above and the nearest below that fit. Returns 1 if one did. */
static int try_microbatches(const bg_plan_request_t *r, cJSON *found) {
    const int multiple = bg_plan_microbatch_multiple(r, 0);
    const int count = bg_plan_microbatch_candidates(r->batch, multiple, NULL, 0);
    int *ms = malloc(sizeof *ms * (size_t)(count > 0 ? count : 1));
    if (ms == NULL) return 0;
    bg_plan_microbatch_candidates(r->batch, multiple, ms, count);
    bg_plan_request_t v = *r;
    char what[64];
    int helped = 0;
    for (int up = 1; up >= 0; up--) {
        for (int k = 0; k < count; k++) {
            const int m = up ? ms[k] : ms[count - 1 - k];
            if (up ? m <= r->microbatches : m >= r->microbatches) continue;
            v.microbatches = m;
            snprintf(what, sizeof what, "--microbatches %d", m);
            if (try_variant(&v, what, found)) {
                helped = 1;
                break;
            }
        }
    }
    free(ms);
    return helped;
}

/* The bytes of the model's parameters, gradients and optimizer state:
 * every stage holds its own share, so k devices that cannot hold them
 * together cannot fit any split. */
static double model_state_bytes(const bg_cost_model_t *model) {
    const bg_cost_stage_t whole = {
        .first_layer = 0, .last_layer = bg_cost_model_layers(model), .stash_slots = 1};
    const bg_cost_memory_t all = bg_cost_stage_memory(model, &whole);
    return (double)all.params + (double)all.grads + (double)all.optimizer;
}

/* Whether k devices could hold `state` bytes (model_state_bytes) at all: a
 * device's capacity bounds its stages' sum, and one without a capacity (0)
 * holds anything. Planning a count that fails this is wasted: a
 * 2,000-layer model on cpu:64 with --device-mem 512K tried 64 counts in
 * 7.0 s, and now none in 1.0 s. */
static int could_hold(const bg_cost_device_t *devices, int k, double state) {
    double capacity = 0;
    for (int d = 0; d < k; d++) {
        if (devices[d].memory_bytes == 0) return 1;
        capacity += (double)devices[d].memory_bytes;
    }
    return capacity >= state;
}

/* Whether every device of the placement is CPU cores. */
static int all_cores(const bg_placement_t *placement) {
    for (int d = 0; d < placement->devices.count; d++)
        if (placement->devices.devices[d].kind != BG_DEVICE_CPU) return 0;
    return 1;
}

/* Tries k devices in place of the request's; returns 1 if the plan then
 * fits. The planner chooses the split (a given --split is for the
 * request's count). */
static int try_device_count(const bg_plan_t *failed, const bg_placement_t *placement,
                            int host_share, int k, bg_cost_device_t *devices, cJSON *found) {
    const bg_plan_request_t *r = &failed->request;
    bg_plan_request_t v = *r;
    v.split = NULL;
    v.links = NULL; /* the links of the chosen devices only */
    v.device = devices;
    v.devices = k;
    bg_placement_cost_devices(placement, k, host_share, devices);
    if (!could_hold(devices, k, model_state_bytes(failed->model))) return 0;
    const int cores = all_cores(placement);
    /* The options that give k devices: cores are there for the asking;
     * GPUs must be listed (--stages alone only picks among them). */
    char what[112], devices_option[48];
    if (cores && placement->stages > 0)
        snprintf(devices_option, sizeof devices_option, "--devices cpu:%d --stages %d", k, k);
    else if (cores)
        snprintf(devices_option, sizeof devices_option, "--devices cpu:%d", k);
    else
        snprintf(devices_option, sizeof devices_option, "%d in --devices", k);
    snprintf(what, sizeof what, "%d device%s (%s%s)", k, k == 1 ? "" : "s", devices_option,
             r->split != NULL ? ", without --split" : "");
    return try_variant(&v, what, found);
}

/* Tries other device counts and returns 1 at the first that fits: fewer
 * (the most first) where CPU devices divide the host's memory, since each
 * then has a larger share, and more (the fewest first). */
static int try_device_counts(const bg_plan_t *failed, const bg_placement_t *placement,
                             int host_share, cJSON *found) {
    const bg_plan_request_t *r = &failed->request;
    int most = 2 * r->devices < BG_MAX_DEVICES ? 2 * r->devices : BG_MAX_DEVICES;
    bg_cost_device_t *devices = calloc((size_t)most, sizeof *devices);
    if (devices == NULL) return 0;
    int fits = 0;
    if (all_cores(placement) && host_share && placement->device_mem == 0)
        for (int k = r->devices - 1; !fits && k >= 1; k--)
            fits = try_device_count(failed, placement, host_share, k, devices, found);
    for (int k = r->devices + 1; !fits && k <= most && k * r->chunks <= r->spec->num_layers; k++)
        fits = try_device_count(failed, placement, host_share, k, devices, found);
    free(devices);
    return fits;
}

/* The most micro-batches `--microbatches auto` would try for r: the
 * smallest micro-batches, whose stash is least. */
static int most_microbatches(const bg_plan_request_t *r) {
    const int multiple = bg_plan_microbatch_multiple(r, 0);
    const int count = bg_plan_microbatch_candidates(r->batch, multiple, NULL, 0);
    int *ms = malloc(sizeof *ms * (size_t)(count > 0 ? count : 1));
    if (ms == NULL) return r->microbatches;
    bg_plan_microbatch_candidates(r->batch, multiple, ms, count);
    int most = r->microbatches;
    for (int k = 0; k < count; k++)
        if (ms[k] > most) most = ms[k];
    free(ms);
    return most;
}

/* With every memory saving of `v` made: the layer that needs the most
 * memory on a stage of its own (*layer), and that need (returned; 0 when
 * it cannot be worked out). A lower bound: no channel slots, one micro-
 * batch in flight. */
static size_t largest_layer_alone(const bg_plan_request_t *v, int *layer) {
    bg_plan_request_t alone = *v;
    alone.fits_only = 0;
    bg_plan_t *p = NULL;
    if (bg_plan_create(&alone, &p) != BG_OK) return 0;
    size_t most = 0;
    for (int l = 0; l < bg_cost_model_layers(p->model); l++) {
        const bg_cost_stage_t stage = {.first_layer = l, .last_layer = l + 1, .stash_slots = 1};
        const bg_cost_memory_t m = bg_cost_stage_memory(p->model, &stage);
        if (bg_cost_memory_peak(&m) > most) {
            most = bg_cost_memory_peak(&m);
            *layer = l;
        }
    }
    bg_plan_destroy(p);
    return most;
}

/* Every memory saving at once, on the devices given: the planner's own
 * split, --recompute, SGD without momentum, 1f1b for gpipe and the most
 * micro-batches. Prints it if that fits; else, where one layer alone
 * needs more than any stage may have, says so and what --device-mem
 * would do, for more devices cannot help. */
static void try_every_saving(const bg_plan_t *failed, cJSON *found) {
    const bg_plan_request_t *r = &failed->request;
    bg_plan_request_t v = *r;
    char what[160];
    int at = 0;
    if (r->split != NULL) at += snprintf(what + at, sizeof what - (size_t)at, " without --split");
    v.split = NULL;
    if (!r->recompute) at += snprintf(what + at, sizeof what - (size_t)at, " --recompute");
    v.recompute = 1;
    if (r->optimizer.kind != BG_OPTIMIZER_SGD)
        at += snprintf(what + at, sizeof what - (size_t)at, " --optimizer sgd");
    if (r->optimizer.sgd.momentum != 0)
        at += snprintf(what + at, sizeof what - (size_t)at, " --momentum 0");
    v.optimizer.kind = BG_OPTIMIZER_SGD;
    v.optimizer.sgd.momentum = 0;
    if (v.schedule == BG_SCHEDULE_GPIPE) {
        at += snprintf(what + at, sizeof what - (size_t)at, " --schedule 1f1b");
        v.schedule = BG_SCHEDULE_1F1B;
    }
    if (at > 0 && try_variant(&v, what + 1, found)) return;
    /* And then with the smallest micro-batches. */
    v.microbatches = most_microbatches(r);
    if (v.microbatches != r->microbatches) {
        at += snprintf(what + at, sizeof what - (size_t)at, " --microbatches %d", v.microbatches);
        if (try_variant(&v, what + 1, found)) return;
    }
    size_t capacity = 0;
    for (int s = 0; s < failed->partition->stages; s++)
        if (failed->partition->stage[s].capacity_bytes > capacity)
            capacity = failed->partition->stage[s].capacity_bytes;
    int layer = 0;
    const size_t need = largest_layer_alone(&v, &layer);
    if (capacity > 0 && need > capacity) {
        char need_text[32], cap_text[32];
        fprintf(stderr,
                "  none of these fits, alone or together: layer %d (%s) needs at least %s bytes "
                "(%.2f MiB) on a stage of its own%s, over the %s bytes a stage may have here, so "
                "more devices cannot help; give each device at least %s (--device-mem%s)\n",
                layer, bg_layer_kind_name(r->spec->layers[layer].kind),
                bg_cli_group_digits((int64_t)need, need_text, sizeof need_text), (double)need / mib,
                at > 0 ? " even with all of these" : "",
                bg_cli_group_digits((int64_t)capacity, cap_text, sizeof cap_text), need_text,
                r->chunks > 1 ? ", times --chunks" : "");
        return;
    }
    fprintf(stderr, "  none of these fits, alone or together: use more devices or give each more "
                    "memory (--device-mem)\n");
}

void bg_cli_plan_explain_overflow(const char *cmd, const bg_plan_t *p,
                                  const bg_placement_t *placement, int host_share, cJSON *found) {
    const bg_plan_request_t *r = &p->request;
    const bg_partition_t *part = p->partition;
    const bg_partition_stage_t *st = &part->stage[part->worst_stage];
    const char *device = p->device[st->device].name;
    char need[32], cap[32], over[32], share[96] = "";
    fflush(stdout); /* the table this explains comes first, also into a pipe */
    if (r->chunks > 1)
        snprintf(share, sizeof share, " (1/%d of %s's: --chunks %d)", r->chunks, device, r->chunks);
    else if (host_share && placement->device_mem == 0 && r->devices > 1 &&
             st->device < placement->devices.count &&
             placement->devices.devices[st->device].kind == BG_DEVICE_CPU)
        snprintf(share, sizeof share,
                 " (the host's memory divided among %d CPU devices; --device-mem sets it)",
                 r->devices);
    fprintf(stderr,
            "brigade %s: does not fit: stage %d (layers %d-%d on %s) needs %s bytes "
            "(%.2f MiB), %s byte%s over its %s-byte capacity%s\n",
            cmd, part->worst_stage, st->first_layer, st->last_layer - 1, device,
            bg_cli_group_digits((int64_t)st->peak_bytes, need, sizeof need),
            (double)st->peak_bytes / mib,
            bg_cli_group_digits((int64_t)part->overflow_bytes, over, sizeof over),
            part->overflow_bytes == 1 ? "" : "s",
            bg_cli_group_digits((int64_t)st->capacity_bytes, cap, sizeof cap), share);
    fprintf(stderr, "%s; what would help:\n",
            r->split != NULL ? "this is the given --split"
                             : "this is the split that overflows least");
    int helped = 0;
    bg_plan_request_t v = *r;
    if (r->split != NULL) {
        v.split = NULL;
        helped |= try_variant(&v, "leave out --split", found);
        v = *r;
    }
    if (!r->recompute) {
        v.recompute = 1;
        helped |= try_variant(&v, "--recompute", found);
        v = *r;
    }
    if (r->schedule == BG_SCHEDULE_GPIPE) {
        v.schedule = BG_SCHEDULE_1F1B;
        helped |= try_variant(&v, "--schedule 1f1b", found);
        v = *r;
    }
    if (r->optimizer.kind == BG_OPTIMIZER_ADAM) {
        v.optimizer.kind = BG_OPTIMIZER_SGD;
        helped |= try_variant(&v, "--optimizer sgd", found);
        v = *r;
    } else if (r->optimizer.kind == BG_OPTIMIZER_SGD && r->optimizer.sgd.momentum != 0) {
        v.optimizer.sgd.momentum = 0;
        helped |= try_variant(&v, "--momentum 0", found);
        v = *r;
    }
    helped |= try_microbatches(r, found);
    if (try_device_counts(p, placement, host_share, found)) helped = 1;
    if (!helped) try_every_saving(p, found);
}

int bg_cli_links_json(const bg_placement_t *p, cJSON *plan) {
    cJSON *links = cJSON_AddArrayToObject(plan, "links");
    if (links == NULL) return 0;
    const bg_device_links_t *l = p->links;
    const int k = l != NULL ? l->count : 0;
    for (int d = 0; d + 1 < k; d++) {
        cJSON *link = cJSON_CreateObject();
        if (link == NULL || !cJSON_AddItemToArray(links, link)) {
            cJSON_Delete(link);
            return 0;
        }
        int at = d * k + d + 1;
        if (cJSON_AddStringToObject(link, "from", p->devices.devices[d].name) == NULL ||
            cJSON_AddStringToObject(link, "to", p->devices.devices[d + 1].name) == NULL ||
            cJSON_AddStringToObject(link, "kind", l->word[at]) == NULL ||
            cJSON_AddNumberToObject(link, "bytes_per_s", l->link[at].bytes_per_s) == NULL)
            return 0;
    }
    return 1;
}

bg_status_t bg_cli_setup_open(const char *model, bg_placement_t *placement,
                              const bg_optimizer_config_t *optimizer, bg_cli_setup_t *out) {
    *out = (bg_cli_setup_t){0};
    BG_CHECK(bg_cli_input_status(bg_model_spec_load(model, &out->spec)));
    /* An XML file describes another machine, GPUs and all; on this one the
     * PCI devices are read only where the devices may be GPUs and CUDA sees
     * some (hwloc's PCI scan is slow). */
    const char *xml = placement->topology_path;
    if (xml != NULL || bg_device_text_gpus(placement->devices_text) > 0)
        BG_CHECK(bg_cli_input_status(bg_topology_create_with_pci(xml, &out->topology)));
    else
        BG_CHECK(bg_topology_create(NULL, &out->topology));
    BG_CHECK(bg_placement_resolve(placement, out->spec, out->topology));
    /* Refused before it is read, so no note about its contents comes first. */
    if (placement->run != NULL) BG_CHECK(bg_cli_check_profile_used(placement->run, placement));
    BG_CHECK(bg_cli_profile_load(placement, out->spec, optimizer, &out->profile));
    bg_cost_link_t host = BG_COST_LINK_HOST_INIT;
    if (out->profile != NULL) host = bg_plan_profile_link(out->profile);
    bg_device_links_t *all = NULL;
    BG_CHECK(bg_cli_input_status(
        bg_device_links_create(out->topology, &placement->devices, &host, xml == NULL, &all)));
    bg_status_t st = bg_placement_choose(placement, all, &out->links);
    bg_device_links_destroy(all);
    BG_CHECK(st);
    placement->links = out->links;
    bg_placement_note_shared_cores(placement, bg_topology_core_count(out->topology));
    out->devices = calloc((size_t)placement->devices.count, sizeof *out->devices);
    if (out->devices == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory");
    return BG_OK;
}

void bg_cli_setup_close(bg_cli_setup_t *setup) {
    free(setup->devices);
    bg_device_links_destroy(setup->links);
    bg_profile_destroy(setup->profile);
    bg_topology_destroy(setup->topology);
    bg_model_spec_destroy(setup->spec);
    *setup = (bg_cli_setup_t){0};
}

bg_status_t bg_cli_plan_open(const char *cmd, const char *model, bg_placement_t *p, int64_t batch,
                             const bg_optimizer_config_t *optimizer, bg_cli_setup_t *setup,
                             bg_plan_t **plan) {
    BG_CHECK(bg_cli_setup_open(model, p, optimizer, setup));
    bg_plan_request_t r;
    bg_placement_plan_request(p, setup->spec, batch, optimizer, setup->profile, 1, setup->devices,
                              &r);
    return bg_cli_plan_make(cmd, p, &r, plan);
}
