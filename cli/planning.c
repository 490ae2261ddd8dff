#include "planning.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cuda/backend_cuda.h"
#include "progress.h"
#include "report.h"
#include "text_table.h"
#include "utf8.h"

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

const char *bg_cli_microbatch_sizes(int64_t batch, int microbatches, char *buf, size_t size) {
    const long long least = (long long)(batch / microbatches);
    if (batch % microbatches == 0)
        snprintf(buf, size, "micro-batches of %lld", least);
    else
        snprintf(buf, size, "micro-batches of %lld or %lld", least, least + 1);
    return buf;
}

/* A profile made with `brigade profile --split` times only that split's
 * stages, which then tile the model; the planner prices any other split
 * from the layers' sums. Says so when `plan` is on another split, since
 * its figures (and the planner's choice, where it chose) then compare
 * unlike figures; returns whether it did. */
int bg_cli_note_split_profile(const bg_plan_t *plan, const char *profile_path) {
    const bg_profile_t *prof = plan->request.profile;
    if (prof == NULL) return 0;
    char shown[BG_CLI_SHOWN_MAX];
    const char *path = bg_cli_shown(profile_path, shown, sizeof shown);
    int split[BG_MAX_STAGES], count = 0, end = 0;
    for (int i = 0; i < prof->stage_count; i++) {
        const bg_stage_profile_t *s = &prof->stage[i];
        if (i > 0 && s->first == prof->stage[i - 1].first && s->last == prof->stage[i - 1].last)
            continue; /* the same range at another slot count */
        if (s->first != end || count >= BG_MAX_STAGES) return 0; /* every range: a full profile */
        if (s->first > 0) split[count++] = s->first;
        end = s->last;
    }
    if (count == 0 || end != prof->layers) return 0;
    int same = plan->partition->stages == count + 1;
    for (int s = 0; same && s < count; s++) same = plan->first_layer[s + 1] == split[s];
    if (same) return 0;
    char text[12 * BG_MAX_STAGES]; /* each boundary: a comma and up to 10 digits */
    int at = 0;
    for (int s = 0; s < count; s++)
        at += snprintf(text + at, sizeof text - (size_t)at, "%s%d", s ? "," : "", split[s]);
    /* --split with the profile's boundaries works only on as many stages. */
    if (plan->partition->stages == count + 1)
        fprintf(stderr,
                "note: %s times only the stages of split %s (brigade profile --split); other "
                "splits are priced from its layers' sums, without the slowdowns it measured "
                "beside the other stages, so they may look faster than they run: give --split %s "
                "too, or profile without --split\n",
                path, text, text);
    else
        fprintf(stderr,
                "note: %s times only the %d stages of split %s (brigade profile --split), not "
                "this placement's %d; its stages are priced from the profile's layers' sums "
                "(profile without --split, or with a split of %d stages, to time them)\n",
                path, count + 1, text, plan->partition->stages, plan->partition->stages);
    return 1;
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

/* A profile made on one device has stage times of stages running alone;
 * CPU devices beside each other share memory bandwidth and caches, which
 * profile --devices cpu:K times. Says so where K CPU stages are placed. */
static void note_alone(const bg_placement_t *p, const bg_profile_t *prof, const char *path) {
    if (prof->stage_count == 0 || p->devices.count < 2) return;
    for (int i = 0; i < prof->stage_count; i++)
        if (prof->stage[i].loaded.forward_s > 0) return;
    fprintf(stderr,
            "note: %s times its stages running alone only (a profile made on one device has no "
            "times beside another), so the %d CPU "
            "devices here, which share the machine's memory and caches, are priced as if each "
            "ran alone; brigade profile --devices cpu:%d also times them beside each other\n",
            path, p->devices.count, p->devices.count);
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
    BG_CHECK(bg_cli_option_input_status(bg_profile_load(p->profile_path, spec, out), "--profile"));
    const bg_status_t st = bg_profile_check_optimizer(*out, p->profile_path, optimizer);
    if (st != BG_OK) {
        bg_profile_destroy(*out);
        *out = NULL;
        return st;
    }
    char shown[BG_CLI_SHOWN_MAX];
    const char *path = bg_cli_shown(p->profile_path, shown, sizeof shown);
    note_no_stage_times(p, *out, path);
    note_alone(p, *out, path);
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

void bg_cli_note_profile_sizes(const bg_profile_t *prof, int64_t batch, const int *ms, int count) {
    if (prof == NULL || prof->batch < 1 || batch < 1) return;
    int64_t timed[BG_PROFILE_MAX_OTHER_SIZES + 1];
    int where[BG_PROFILE_MAX_OTHER_SIZES + 1];
    const int n = bg_profile_timed_sizes(prof, timed, where);
    char sizes[128] = "", outside[256] = "";
    for (int k = 0, at = 0; k < n && at < (int)sizeof sizes; k++)
        at += snprintf(sizes + at, sizeof sizes - (size_t)at, "%s%lld", k > 0 ? ", " : "",
                       (long long)timed[k]);
    int found = 0, first = 0;
    for (int i = 0, at = 0; i < count && at < (int)sizeof outside; i++) {
        if (bg_profile_covers(prof, batch, ms[i])) continue;
        if (found++ == 0) first = i;
        at += snprintf(outside + at, sizeof outside - (size_t)at, "%s%d", found > 1 ? "," : "",
                       ms[i]);
    }
    if (found == 0) return;
    if (found == 1) {
        const double size = (double)batch / ms[first];
        char about[32]; /* whole past 100: "1024", not "1.02e+03" */
        snprintf(about, sizeof about, size >= 100 ? "%.0f" : "%.3g", size);
        fprintf(stderr,
                "note: M=%d makes micro-batches of about %s sample%s, %s the sizes --profile "
                "timed (%s): its times are extrapolated there; 'brigade profile' with --batch "
                "%lld --microbatches %d, and this run's MODEL, --devices and --split, times "
                "every size of a step of %lld\n",
                ms[first], about, size == 1 ? "" : "s",
                size > (double)timed[n - 1] ? "above" : "below", sizes, (long long)batch, ms[first],
                (long long)batch);
        return;
    }
    fprintf(stderr,
            "note: M=%s make micro-batches outside the sizes --profile timed (%s): their times "
            "are extrapolated there; 'brigade profile' with --batch %lld, and this run's MODEL, "
            "--devices and --split, times every size of a step of %lld\n",
            outside, sizes, (long long)batch, (long long)batch);
}

bg_status_t bg_cli_check_microbatches(int64_t microbatches, int64_t batch) {
    if (microbatches <= batch) return BG_OK;
    return bg_error_set(BG_ERR_INVALID,
                        "--microbatches %lld with --batch %lld would leave some micro-batches "
                        "empty (at most --microbatches %lld)",
                        (long long)microbatches, (long long)batch, (long long)batch);
}

void bg_cli_note_turns(const bg_plan_t *plan, const bg_placement_t *p, int64_t batch) {
    const int stages = plan->partition->stages;
    if (stages < 2 || p->microbatches != 1) return;
    /* ZB-H1 runs a stage's weight gradients (W) beside the backward of the
     * stage before it: the one overlap a single micro-batch allows. */
    const int zb = p->schedule == BG_SCHEDULE_ZB_H1;
    const char *turns = zb ? "take turns but for their weight gradients (a stage's W runs "
                             "beside the backward of the stage before it)"
                           : "take turns and never work at once";
    const char *speed = zb ? "little faster" : "no faster";
    if (batch == 1)
        fprintf(stderr,
                "note: a batch of one sample is one micro-batch: the %d stages %s, so this "
                "runs %s than one device\n",
                stages, turns, speed);
    else if (p->auto_microbatches)
        fprintf(stderr,
                "note: --microbatches auto chose one micro-batch: the %d stages %s, which the "
                "planner predicts faster here than smaller micro-batches that overlap "
                "('brigade sweep --simulate' shows each count)\n",
                stages, zb ? turns : "take turns");
    else /* a micro-batch a sample at most: 4, or as many as the batch has */
        fprintf(stderr,
                "note: with one micro-batch the %d stages %s, so this runs %s than one "
                "device; --microbatches %lld (or auto) lets them overlap\n",
                stages, turns, speed, (long long)(batch < 4 ? batch : 4));
}

const char *bg_cli_plan_device_stages(const bg_plan_t *p, int device, int words, char *buf,
                                      size_t size) {
    const bg_partition_t *part = p->partition;
    int count = 0, total = 0;
    for (int s = 0; s < part->stages; s++) total += part->stage[s].device == device;
    size_t at = 0;
    buf[0] = '\0';
    for (int s = 0; s < part->stages && at < size; s++) {
        if (part->stage[s].device != device) continue;
        const char *between = count == 0 ? "" : !words ? "," : count + 1 == total ? " and " : ", ";
        const int n = snprintf(buf + at, size - at, "%s%d", between, s);
        if (n < 0) break;
        at += (size_t)n;
        count++;
    }
    return buf;
}

/* The bubble of the plan's simulated step (the mean of its devices' idle
 * fractions, as `simulate` reports it); -1 for a plan that does not fit
 * or when the simulation fails. */
static double simulated_bubble(const bg_plan_t *p) {
    if (!(p->simulated_step_s > 0)) return -1;
    bg_timeline_t *tl = NULL;
    bg_timeline_summary_t *summary = NULL;
    double bubble = -1;
    if (bg_plan_simulate(p, 1, &tl) == BG_OK && bg_timeline_summarize(tl, &summary) == BG_OK)
        bubble = summary->bubble_measured;
    else
        bg_error_clear();
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
    return bubble;
}

/* A stage's or a device's use of its capacity for the table's 5-character
 * column: far over, the MiB columns say by how much. */
static void format_use(size_t peak, size_t capacity, char *use, size_t size) {
    const double used = 100.0 * (double)peak / (double)(capacity ? capacity : 1);
    if (capacity == 0)
        snprintf(use, size, "-");
    else if (peak > capacity && used < 100.5)
        snprintf(use, size, ">100%%"); /* over, though it rounds to 100 */
    else if (used < 9999.5)
        snprintf(use, size, "%.0f%%", used);
    else
        snprintf(use, size, ">9999%%");
}

/* With V > 1 stages a device: each device's stages together against its
 * whole capacity, and which check the plan went by. */
static void print_devices(const bg_plan_t *p, FILE *out) {
    const bg_partition_t *part = p->partition;
    const int v = p->request.chunks;
    static const bg_text_column_t columns[] = {{"device", 'l', 8, 0},
                                               {"stages", 'l', 16, 1},
                                               {"peak MiB", 'r', 10, 1},
                                               {"cap MiB", 'r', 10, 1},
                                               {"use", 'r', 5, 1}};
    bg_text_table_t *t = NULL;
    fputc('\n', out);
    if (bg_text_table_create(columns, (int)(sizeof columns / sizeof columns[0]), &t) != BG_OK) {
        fprintf(out, "(no table: %s)\n", bg_error_message());
        return;
    }
    for (int d = 0; d < p->request.devices; d++) {
        const size_t peak = bg_partition_device_peak_bytes(part, d),
                     capacity = p->device[d].memory_bytes;
        char stages[64], use[16];
        bg_cli_plan_device_stages(p, d, 0, stages, sizeof stages);
        format_use(peak, capacity, use, sizeof use);
        bg_text_table_add(t, "%s", p->device[d].name);
        bg_text_table_add(t, "%s", stages);
        bg_text_table_add(t, "%.2f", (double)peak / mib);
        if (capacity)
            bg_text_table_add(t, "%.2f", (double)capacity / mib);
        else
            bg_text_table_add(t, "-");
        bg_text_table_add(t, "%s", use);
    }
    bg_text_table_print(t, out);
    bg_text_table_destroy(t);
    /* How the searches per device found the planner's split, where they did:
     * by its slowest stage, or by its predicted step. */
    const int by_step = p->config.objective == BG_PARTITION_LEAST_STEP;
    const char *found =
        p->device_search == BG_PLAN_DEVICES_SEARCHED
            ? (by_step ? "has the shortest predicted step of those that fit as a device holds it"
                       : "is the fastest of those that fit as a device holds it")
            : "fits as a device holds it (a search per device for a faster one stopped at its "
              "budget)";
    if (p->simulated_split)
        fprintf(out,
                "(the planner simulated each of its %d splits, checked as a device holds its "
                "%d stages together against its capacity, which cap MiB above shows whole: this "
                "one is the fastest of the %d that fit)\n",
                p->splits_simulated, v, p->splits_fitting);
    else if (part->memory_check == BG_PARTITION_CHECK_DEVICES && p->request.split == NULL &&
             p->even_split_fits)
        fprintf(out,
                "(a split that keeps each stage within 1/%d of its device's capacity fits, but "
                "this one is faster and %s: each device's %d stages together against its "
                "capacity, which cap MiB above shows whole)\n",
                v, found, v);
    else if (part->memory_check == BG_PARTITION_CHECK_DEVICES && p->request.split == NULL)
        fprintf(out,
                "(no split keeps each stage within 1/%d of its device's capacity, as the "
                "planner's first search does; this one %s: each device's %d stages together "
                "against its capacity, which cap MiB above shows whole)\n",
                v, found, v);
    else if (part->memory_check == BG_PARTITION_CHECK_DEVICES)
        fprintf(out,
                "(a given --split is checked per device: each device's %d stages together "
                "against its capacity, which cap MiB above shows whole; the planner's own "
                "split keeps each stage within 1/%d of it where that is fastest)\n",
                v, v);
    else if (!part->fits) {
        fprintf(out,
                "(the stages' cap MiB above is 1/%d of their device's capacity, as the "
                "planner's first search holds each stage: no split fits so, and this one "
                "overflows least; below, what the search with each device's %d stages "
                "together found)\n",
                v, v);
    } else {
        /* What the planner tried beside it, which it did not find faster. */
        char tried[192];
        if (p->splits_simulated == 1)
            snprintf(tried, sizeof tried, "it is the model's only split into these stages");
        else if (p->splits_simulated > 1)
            snprintf(tried, sizeof tried,
                     "none of its %d splits, each simulated as a device holds it, is faster",
                     p->splits_simulated);
        else
            snprintf(tried, sizeof tried, "%s",
                     p->device_search == BG_PLAN_DEVICES_STOPPED
                         ? "a search per device for a faster split that fits as a device holds "
                           "its stages together stopped at its budget"
                         : "the searches per device, by the slowest stage and by the predicted "
                           "step, found no split that simulates faster");
        fprintf(out,
                "(the planner's split keeps each stage within 1/%d of its device's capacity, "
                "the stages' cap MiB above; %s; a given --split is checked per device, its %d "
                "stages together)\n",
                v, tried, v);
    }
}

/* The GPU convolution workspace a plan counts: each GPU stage holding a
 * convolution counts the device's whole limit (cost_model.h); where there
 * is one, says how much, and that it is an upper bound. */
static void print_conv_workspace(const bg_plan_t *p, FILE *out) {
    const bg_partition_t *part = p->partition;
    int counted = 0;
    size_t limit = 0;
    for (int s = 0; s < part->stages; s++) {
        const bg_partition_stage_t *st = &part->stage[s];
        const bg_cost_device_t *dev = &p->device[st->device];
        if (!dev->own_conv_workspace ||
            !bg_cost_has_convolution(p->model, st->first_layer, st->last_layer))
            continue;
        counted = 1;
        if (dev->conv_workspace_bytes > limit) limit = dev->conv_workspace_bytes;
    }
    if (!counted) return;
    if (limit == 0) {
        fprintf(out, "(other holds no convolution workspace on the GPU stages: --conv-workspace "
                     "0 lets cuDNN use only algorithms that need none)\n");
        return;
    }
    char amount[32];
    if (limit >= (size_t)1 << 20)
        snprintf(amount, sizeof amount, "%.2f MiB", (double)limit / mib);
    else
        snprintf(amount, sizeof amount, "%zu byte%s", limit, limit == 1 ? "" : "s");
    fprintf(out,
            "(other holds %s of convolution workspace for each GPU stage with a convolution: "
            "the most cuDNN's algorithms may use, --conv-workspace; which they take, and what it "
            "needs, is found by timing them on the GPU)\n",
            amount);
}

/* The plan's table; a figure wider than its column widens the column. */
static void print_stages(const bg_plan_t *p, FILE *out) {
    static const bg_text_column_t columns[] = {
        {"stage", 'r', 5, 0},     {"layers", 'l', 9, 2},    {"device", 'l', 8, 1},
        {"fwd ms", 'r', 8, 1},    {"bwd ms", 'r', 8, 1},    {"send ms", 'r', 8, 1},
        {"busy ms", 'r', 8, 1},   {"peak MiB", 'r', 10, 1}, {"cap MiB", 'r', 10, 1},
        {"use", 'r', 5, 1},       {"params", 'r', 9, 1},    {"grads", 'r', 9, 1},
        {"optimizer", 'r', 9, 1}, {"stash", 'r', 9, 1},     {"buffers", 'r', 9, 1},
        {"other", 'r', 9, 1},
    };
    const bg_partition_t *part = p->partition;
    const int m = p->request.microbatches;
    bg_text_table_t *t = NULL;
    if (bg_text_table_create(columns, (int)(sizeof columns / sizeof columns[0]), &t) != BG_OK) {
        fprintf(out, "(no table: %s)\n", bg_error_message());
        return;
    }
    for (int s = 0; s < part->stages; s++) {
        const bg_partition_stage_t *st = &part->stage[s];
        char use[16];
        format_use(st->peak_bytes, st->capacity_bytes, use, sizeof use);
        bg_text_table_add(t, "%d", s);
        bg_text_table_add(t, "%d-%d", st->first_layer, st->last_layer - 1);
        bg_text_table_add(t, "%s", p->device[st->device].name);
        bg_text_table_add(t, "%.3f", m * st->time.forward * 1e3);
        bg_text_table_add(t, "%.3f", m * (st->time.backward + st->time.recompute) * 1e3);
        bg_text_table_add(t, "%.3f", m * st->send_s * 1e3);
        bg_text_table_add(t, "%.3f", m * st->seconds * 1e3);
        bg_text_table_add(t, "%.2f", (double)st->peak_bytes / mib);
        if (st->capacity_bytes)
            bg_text_table_add(t, "%.2f", (double)st->capacity_bytes / mib);
        else
            bg_text_table_add(t, "-");
        bg_text_table_add(t, "%s", use);
        const size_t categories[] = {
            st->memory.params,    st->memory.grads,
            st->memory.optimizer, st->memory.stash,
            st->memory.buffers,   st->memory.channels + st->memory.workspace + st->memory.padding};
        for (size_t k = 0; k < sizeof categories / sizeof categories[0]; k++)
            bg_text_table_add(t, "%.2f", (double)categories[k] / mib);
    }
    bg_text_table_print(t, out);
    bg_text_table_destroy(t);
}

void bg_cli_plan_print_table(const bg_plan_t *p, FILE *out) {
    const bg_partition_t *part = p->partition;
    print_stages(p, out);
    fprintf(out, "(peak MiB is the sum of the columns from params on; other: the slots of "
                 "the channels into the stage, the ops' workspace and the padding of each "
                 "buffer to 256 bytes)\n");
    /* A walk read a stage of 0.02 ms of ops as busy for 1.4: its sends'
     * hand-offs, from a profile taken on a busy machine. */
    char together[48] = "its one micro-batch";
    if (p->request.microbatches > 1)
        snprintf(together, sizeof together, "its %d micro-batches together",
                 p->request.microbatches);
    fprintf(out,
            "(ms per step, %s; send ms: its sends, each its bytes over the link and the "
            "link's latency, which a profile measures as the hand-off to the receiving "
            "thread; busy ms: all three)\n",
            together);
    print_conv_workspace(p, out);
    if (p->request.recompute && p->schedule->split_backward)
        fprintf(out, "(bwd ms holds the recomputed forward, which --recompute runs before each "
                     "B and again before each W; --json gives both apart as "
                     "predicted_ms.recompute)\n");
    else if (p->request.recompute)
        fprintf(out, "(bwd ms holds the recomputed forward, which --recompute runs before "
                     "each backward; --json gives it apart as predicted_ms.recompute)\n");
    int unchecked = 0;
    for (int s = 0; s < part->stages; s++) unchecked |= part->stage[s].capacity_bytes == 0;
    if (unchecked)
        fprintf(out, "(cap MiB -: no capacity is known for that device (a --topology file "
                     "without its memory), so its memory is not checked; --device-mem gives "
                     "one)\n");
    if (p->request.chunks > 1) print_devices(p, out);
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
    /* The two can differ widely; say why, so neither reads as a mistake. */
    const double estimate = p->step_s + p->update_s;
    if (p->simulated_step_s > 0 && fabs(p->simulated_step_s - estimate) > 0.1 * estimate)
        fprintf(out,
                "(the simulation plays the schedule op by op: each wait, hand-off and copy, "
                "and each stage's NaN check of its weight gradients, which comes before the "
                "last gradient it sends%s; "
                "the predicted step is the planner's estimate, M x the slowest stage plus the "
                "others' fill and drain, which leaves those out)\n",
                p->request.profile != NULL
                    ? ", and the profile's slowdowns of ops after a wait and beside another core"
                    : "");
    char simulated[48] = "";
    const double bubble = simulated_bubble(p);
    if (bubble >= 0) snprintf(simulated, sizeof simulated, ", %.1f%% simulated", 100.0 * bubble);
    fprintf(out,
            "bubble: %.1f%% predicted (the planner's estimate)%s, %.1f%% in theory for equal "
            "stages\n",
            100.0 * p->bubble, simulated, 100.0 * p->bubble_theory);
}

cJSON *bg_cli_json_add_uint(cJSON *object, const char *key, uint64_t value) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, value);
    return cJSON_AddRawToObject(object, key, text);
}

char *bg_cli_json_print(const cJSON *root) {
    char *text = cJSON_Print(root);
    if (text == NULL) return NULL;
    char *repaired = bg_utf8_repaired(text);
    free(text);
    return repaired;
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
    bg_cli_json_add_uint(peak, "padding", m->padding);
}

bg_status_t bg_cli_run_devices_json(cJSON *root, const bg_pipeline_stage_info_t *info, int count) {
    cJSON *devices = cJSON_AddArrayToObject(root, "devices");
    if (devices == NULL) return BG_ERR_NOMEM;
    for (int d = 0; d < count; d++) { /* device indices run below the stage count */
        cJSON *device = NULL, *stages = NULL;
        size_t together = 0;
        for (int s = 0; s < count; s++) {
            const bg_pipeline_stage_info_t *stage = &info[s];
            if (stage->device != d) continue;
            if (device == NULL) {
                device = cJSON_CreateObject();
                if (device == NULL || !cJSON_AddItemToArray(devices, device)) {
                    cJSON_Delete(device);
                    return BG_ERR_NOMEM;
                }
                cJSON_AddStringToObject(device, "device", stage->device_name);
                stages = cJSON_AddArrayToObject(device, "stages");
                if (stages == NULL) return BG_ERR_NOMEM;
            }
            cJSON_AddItemToArray(stages, cJSON_CreateNumber(s));
            together += bg_pipeline_stage_peak_bytes(stage);
        }
        if (device != NULL && bg_cli_json_add_uint(device, "peak_bytes", together) == NULL)
            return BG_ERR_NOMEM;
    }
    return BG_OK;
}

cJSON *bg_cli_run_stage_json(const bg_pipeline_stage_info_t *info) {
    const bg_stage_memory_t *m = &info->memory;
    cJSON *stage = cJSON_CreateObject();
    if (stage == NULL) return NULL;
    cJSON *layers = cJSON_AddArrayToObject(stage, "layers");
    for (int l = info->first_layer; layers != NULL && l < info->last_layer; l++)
        cJSON_AddItemToArray(layers, cJSON_CreateNumber(l));
    cJSON_AddStringToObject(stage, "device", info->device_name);
    bg_cli_json_add_uint(stage, "peak_bytes", bg_pipeline_stage_peak_bytes(info));
    const bg_cost_memory_t measured = {.params = m->params,
                                       .grads = m->grads,
                                       .optimizer = m->optimizer,
                                       .stash = m->stash_peak,
                                       .buffers = m->buffers,
                                       .channels = info->channel_bytes,
                                       .workspace = m->workspace,
                                       .padding = m->padding + info->channel_padding};
    bg_cli_json_add_memory(stage, &measured);
    cJSON_AddNumberToObject(stage, "stash_slots", info->stash_slots);
    cJSON_AddNumberToObject(stage, "peak_microbatches_in_flight", m->peak_in_flight);
    return stage;
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
    if (!p->partition->fits) { /* the refusal below says what was searched */
        snprintf(buf, size,
                 "split chosen by the planner (none fits: the one that overflows least)");
        return buf;
    }
    if (p->simulated_split) {
        int at = snprintf(buf, size,
                          "split chosen by the planner (the fastest simulated of its %d splits, "
                          "%d of which fit",
                          p->splits_simulated, p->splits_fitting);
        if (p->other_split_step_s > 0 && at > 0 && (size_t)at < size)
            at += snprintf(buf + at, size - (size_t)at, "; %.3f ms against %.3f for the %s",
                           p->simulated_step_s * 1e3, p->other_split_step_s * 1e3,
                           least ? "shortest predicted step's split" : "slowest stage's split");
        if (at > 0 && (size_t)at < size) snprintf(buf + at, size - (size_t)at, ")");
        return buf;
    }
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
    /* Where the simulation had more than one split to choose from. */
    if (p->splits_simulated > 1 && at > 0 && (size_t)at < size)
        at += snprintf(buf + at, size - (size_t)at,
                       "; the fastest simulated of its %d splits, %d of which fit",
                       p->splits_simulated, p->splits_fitting);
    if (at > 0 && (size_t)at < size) snprintf(buf + at, size - (size_t)at, ")");
    return buf;
}

int bg_cli_print_split_layers(const bg_plan_t *p, FILE *out) {
    int printed = 0;
    for (int s = 1; s < p->partition->stages; s++)
        printed += fprintf(out, "%s%d", s > 1 ? "," : "", p->first_layer[s]);
    return printed;
}

void bg_cli_print_split(const bg_plan_t *p, int source, FILE *out) {
    if (p->partition->stages < 2) return;
    fputs("; split ", out);
    bg_cli_print_split_layers(p, out);
    if (source) fputs(p->request.split != NULL ? " (--split)" : " (the planner's)", out);
}

const char *bg_cli_plan_split_key(const bg_plan_t *p) {
    if (p->request.split != NULL) return "given";
    if (!p->partition->fits) return "least_overflow";
    if (p->simulated_split) return "fastest_simulated";
    return p->config.objective == BG_PARTITION_LEAST_STEP ? "least_step" : "slowest_stage";
}

/* Adds "stages", the stages device d holds, to a JSON object. */
static void add_device_stages(cJSON *object, const bg_partition_t *part, int d) {
    cJSON *stages = cJSON_AddArrayToObject(object, "stages");
    for (int s = 0; stages != NULL && s < part->stages; s++)
        if (part->stage[s].device == d) cJSON_AddItemToArray(stages, cJSON_CreateNumber(s));
}

int bg_cli_plan_add_devices_json(cJSON *root, const bg_plan_t *p) {
    const bg_partition_t *part = p->partition;
    if (p->request.chunks == 1) return 1;
    const int per_device = part->memory_check == BG_PARTITION_CHECK_DEVICES;
    cJSON_AddStringToObject(root, "memory_check", per_device ? "per_device" : "per_stage");
    if (p->device_search != BG_PLAN_DEVICES_NOT_SEARCHED)
        cJSON_AddStringToObject(root, "device_search",
                                p->device_search == BG_PLAN_DEVICES_SEARCHED ? "searched"
                                                                             : "stopped");
    cJSON *devices = cJSON_AddArrayToObject(root, "devices");
    for (int d = 0; devices != NULL && d < p->request.devices; d++) {
        cJSON *device = cJSON_CreateObject();
        if (device == NULL || !cJSON_AddItemToArray(devices, device)) {
            cJSON_Delete(device);
            return 0;
        }
        cJSON_AddStringToObject(device, "device", p->device[d].name);
        add_device_stages(device, part, d);
        bg_cli_json_add_uint(device, "peak_bytes", bg_partition_device_peak_bytes(part, d));
        bg_cli_json_add_uint(device, "capacity_bytes", p->device[d].memory_bytes);
    }
    return devices != NULL;
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
    if (p->splits_simulated > 0) {
        cJSON_AddNumberToObject(root, "splits_simulated", p->splits_simulated);
        cJSON_AddNumberToObject(root, "splits_fitting", p->splits_fitting);
    }
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
    const double bubble = simulated_bubble(p);
    if (bubble >= 0) cJSON_AddNumberToObject(root, "simulated_bubble", bubble);
    cJSON_AddNumberToObject(root, "bottleneck_stage", bg_plan_bottleneck_stage(p));
    cJSON_AddNumberToObject(root, "bubble", p->bubble);
    cJSON_AddNumberToObject(root, "bubble_theory", p->bubble_theory);
    for (int d = 0; d < r->devices; d++)
        if (p->device[d].own_conv_workspace) {
            bg_cli_json_add_uint(root, "conv_workspace_bytes", p->device[d].conv_workspace_bytes);
            break;
        }
    const int per_device = part->memory_check == BG_PARTITION_CHECK_DEVICES;
    if (!bg_cli_plan_add_devices_json(root, p)) {
        cJSON_Delete(root);
        return NULL;
    }
    if (!part->fits) {
        cJSON *over = cJSON_AddObjectToObject(root, "overflow");
        if (per_device) {
            cJSON_AddStringToObject(over, "device", p->device[part->worst_device].name);
            add_device_stages(over, part, part->worst_device);
        } else {
            cJSON_AddNumberToObject(over, "stage", part->worst_stage);
        }
        bg_cli_json_add_uint(over, "bytes", part->overflow_bytes);
    }
    return root;
}

int bg_cli_links_json(const bg_placement_t *p, cJSON *plan) {
    cJSON *links = cJSON_AddArrayToObject(plan, "links");
    if (links == NULL) return 0;
    const bg_device_links_t *l = p->links;
    const int k = l != NULL ? l->count : 0, hops = bg_placement_link_hops(p);
    for (int d = 0; d < hops; d++) {
        cJSON *link = cJSON_CreateObject();
        if (link == NULL || !cJSON_AddItemToArray(links, link)) {
            cJSON_Delete(link);
            return 0;
        }
        const int next = (d + 1) % k, at = d * k + next;
        if (cJSON_AddStringToObject(link, "from", p->devices.devices[d].name) == NULL ||
            cJSON_AddStringToObject(link, "to", p->devices.devices[next].name) == NULL ||
            cJSON_AddStringToObject(link, "kind", l->word[at]) == NULL ||
            cJSON_AddNumberToObject(link, "bytes_per_s", l->link[at].bytes_per_s) == NULL)
            return 0;
    }
    return 1;
}

/* Where the devices are GPUs: placement->gpus, the devices listed (virtual
 * ones as listed), then every other GPU the machine (or the topology file)
 * has, whole, and their links in setup->gpu_links; nothing otherwise. */
static bg_status_t list_every_gpu(bg_placement_t *placement, bg_cli_setup_t *setup,
                                  const bg_cost_link_t *host) {
    const bg_device_list_t *listed = &placement->devices; /* before --stages chooses */
    /* CPU cores first: asking CUDA would load its module (lib/cuda/module.h). */
    if (!bg_placement_all_of_kind(placement, BG_DEVICE_CUDA)) return BG_OK;
    /* The GPUs' CUDA numbers: a topology file's (gaps included), or this
     * machine's 0 to N-1. */
    const int xml = placement->topology_path != NULL;
    int number[BG_MAX_DEVICES], gpus = 0;
    if (xml)
        gpus = bg_topology_cuda_numbers(setup->topology, number, BG_MAX_DEVICES);
    else
        for (const int n = bg_cuda_device_count(); gpus < n && gpus < BG_MAX_DEVICES; gpus++)
            number[gpus] = gpus;
    int taken[BG_MAX_DEVICES] = {0}; /* by index into number[] */
    for (int d = 0; d < listed->count; d++) {
        int i = 0;
        while (i < gpus && number[i] != listed->devices[d].physical) i++;
        if (i == gpus) return BG_OK; /* a GPU not there, which the run refuses */
        taken[i] = 1;
    }
    placement->gpus = *listed;
    for (int i = 0; i < gpus && placement->gpus.count < BG_MAX_DEVICES; i++) {
        if (taken[i]) continue;
        bg_device_t *g = &placement->gpus.devices[placement->gpus.count++];
        *g = (bg_device_t){.kind = BG_DEVICE_CUDA, .physical = number[i]};
        snprintf(g->name, sizeof g->name, "cuda:%d", number[i]);
    }
    BG_CHECK(
        bg_device_links_create(setup->topology, &placement->gpus, host, !xml, &setup->gpu_links));
    placement->gpus_links = setup->gpu_links;
    return BG_OK;
}

/* Where the devices are cpu:N's cores without --stages: cpu:2N (up to
 * BG_MAX_DEVICES) and its links into setup->core_links, whose first k
 * devices are cpu:k's; nothing otherwise. */
static bg_status_t list_more_cores(bg_placement_t *placement, bg_cli_setup_t *setup,
                                   const bg_cost_link_t *host) {
    const bg_device_list_t *listed = &placement->devices; /* before --stages chooses */
    if (!bg_placement_all_of_kind(placement, BG_DEVICE_CPU) || placement->stages > 0) return BG_OK;
    const int most = 2 * listed->count < BG_MAX_DEVICES ? 2 * listed->count : BG_MAX_DEVICES;
    char text[32];
    snprintf(text, sizeof text, "cpu:%d", most);
    bg_device_list_t cores;
    BG_CHECK(bg_device_list_parse_on(text, bg_topology_core_count(setup->topology), 0, &cores));
    for (int d = 0; d < listed->count; d++) /* a list of other cores: not cpu:N's */
        if (listed->devices[d].physical != cores.devices[d].physical) return BG_OK;
    BG_CHECK(bg_device_links_create(setup->topology, &cores, host, placement->topology_path == NULL,
                                    &setup->core_links));
    placement->cores_links = setup->core_links;
    return BG_OK;
}

bg_status_t bg_cli_setup_open(const char *model, bg_placement_t *placement,
                              const bg_optimizer_config_t *optimizer, bg_cli_setup_t *out) {
    *out = (bg_cli_setup_t){0};
    BG_CHECK(bg_cli_model_load(model, &out->spec));
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
    if (placement->run != NULL) {
        BG_CHECK(bg_cli_check_profile_used(placement->run, placement));
        bg_cli_note_unbound(out->topology);
    }
    BG_CHECK(bg_cli_profile_load(placement, out->spec, optimizer, &out->profile));
    bg_cost_link_t host = BG_COST_LINK_HOST_INIT;
    if (out->profile != NULL) host = bg_plan_profile_link(out->profile);
    bg_device_links_t *all = NULL;
    BG_CHECK(bg_cli_input_status(
        bg_device_links_create(out->topology, &placement->devices, &host, xml == NULL, &all)));
    out->all_links = all;
    placement->listed_links = all;
    BG_CHECK(bg_cli_input_status(list_every_gpu(placement, out, &host)));
    BG_CHECK(bg_cli_input_status(list_more_cores(placement, out, &host)));
    BG_CHECK(bg_placement_choose(placement, all, &out->links));
    placement->links = out->links;
    /* Interleaved's cycle, and a path for the other schedules (--schedule
     * auto may choose one, a sweep list them beside it). */
    if (placement->chunks > 1) {
        bg_placement_t *path = malloc(sizeof *path);
        if (path == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory");
        *path = *placement;
        path->devices = placement->listed;
        path->chunks = 1;
        const bg_status_t chosen = bg_placement_choose(path, all, &out->path_links);
        placement->path = path->devices;
        free(path);
        BG_CHECK(chosen);
        placement->path_links = out->path_links;
    }
    bg_placement_note_shared_cores(placement, bg_topology_core_count(out->topology));
    bg_placement_note_device_mem(placement);
    out->devices = calloc((size_t)placement->devices.count, sizeof *out->devices);
    if (out->devices == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory");
    return BG_OK;
}

void bg_cli_setup_close(bg_cli_setup_t *setup) {
    free(setup->devices);
    bg_device_links_destroy(setup->links);
    bg_device_links_destroy(setup->all_links);
    bg_device_links_destroy(setup->core_links);
    bg_device_links_destroy(setup->gpu_links);
    bg_device_links_destroy(setup->path_links);
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
    return bg_cli_plan_make(cmd, p, setup, &r, 1, plan);
}
