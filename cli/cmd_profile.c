/* brigade profile MODEL [options]: times every layer's forward, dX, dW and
 * optimizer update on one CPU core at the micro-batch size the planner will
 * use, and the channel costs between two cores (stages/profile.h), prints
 * them, and writes the profile as JSON for --profile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "host_memory.h"
#include "planning.h"
#include "cost_model.h"
#include "devices.h"
#include "model_spec.h"
#include "monotonic.h"
#include "placement.h"
#include "profile.h"
#include "progress.h"
#include "topology.h"

/* The most the layers' timed rounds lie apart (profile.h's
 * layer_round_spread) without a note: on an idle 2-core AMD EPYC, 1.02 to
 * 1.26 in 17 profiles of fashion_cnn, fashion_mlp and fashion_resnet; with
 * two busy loops beside them, 1.45 to 17 in 5 (2026-12-05). */
#define SPREAD_NOTED 1.5

static const char help[] =
    "usage: brigade profile MODEL [options]\n"
    "\n"
    "Measures, on this machine, what the planner and the simulator need to\n"
    "predict a CPU pipeline, for a micro-batch of ceil(B / M) samples (every\n"
    "figure a mean of timings, leaving out any over 3 times their median: a\n"
    "step is a sum of ops, and follows their means, not their medians):\n"
    "\n"
    "  layers    each layer's forward, backward-data (dX), backward-weights (dW)\n"
    "            and optimizer update, timed where the pipeline runs them: inside\n"
    "            a stage of the whole model on one CPU core (one OpenBLAS\n"
    "            thread), with 2 micro-batches in flight through its stash slots;\n"
    "            each the mean of the timed rounds after two warm-up rounds;\n"
    "            and their forward, dX and dW again at micro-batches of one\n"
    "            sample, of B and between (--sizes): a size between two timed\n"
    "            ones is priced on each op's line through them, a fixed part\n"
    "            (reading its weights) plus a part per sample\n"
    "  channels  for every layer boundary, what handing its tensor to another CPU\n"
    "            device costs, measured with a second thread on the next device's\n"
    "            core passing it back and forth through real channels: the\n"
    "            sender's copy into the ring (send), the receiver's copy out\n"
    "            (recv), timed once for each size of message the boundaries\n"
    "            pass; and, over all sizes, the time from the sender's\n"
    "            copy to the sleeping receiver running (hand-off) and what waking\n"
    "            it costs the sender (wake)\n"
    "  stages    every range of consecutive layers (models of up to 64 layers;\n"
    "            with --split, the stages of that split only, at any size)\n"
    "            timed as a stage of its own, as a pipeline device runs one: its\n"
    "            forward, backward and update, and the channel copies around\n"
    "            them, with 1, 2 and M micro-batches in flight (the stash slots\n"
    "            of 1F1B's last stage, of the one before it, and of GPipe; M\n"
    "            at most 64, which a larger M's stash slots are priced from),\n"
    "            M micro-batches a round in groups of that many, one update;\n"
    "            in three passes over all ranges, each on a fresh allocation,\n"
    "            seconds apart; a range's figure is the mean of its passes'\n"
    "            means (--repetitions rounds split among the passes). A stage's\n"
    "            time is not the sum of its layers' (its working set decides its\n"
    "            cache misses); the simulator uses these where it can.\n"
    "            With two CPU devices or more (--devices cpu:N), each range is\n"
    "            timed again under load: while a thread on the second device's\n"
    "            core runs the layers a neighbour stage would hold (those after\n"
    "            the range, or before it when it ends the model) in a loop. Both\n"
    "            cores share the cache and the memory bandwidth, so a stage runs\n"
    "            slower while the other device computes; the simulator slows\n"
    "            each op by as much of that as the other device computes beside it.\n"
    "            Then each range's forward and backward again, straight after\n"
    "            its own ops and right after sleeping while that thread runs\n"
    "            one forward, backward or update of its layers (six ops a\n"
    "            round): a stage that waited for its neighbour finds part of\n"
    "            its data gone from the caches, more or less by what the\n"
    "            neighbour ran. The simulator slows an op after a wait by the\n"
    "            ratio for what the other device ran in it\n"
    "  memcpy    the bandwidth of one memcpy of 4 MiB\n"
    "\n"
    "The layer ranges take most of the time (32 s for the origin CNN at\n"
    "--microbatches 4 --devices cpu:2 on a 2-core AMD EPYC, 2 s with\n"
    "--split 4; minutes for larger models, and a note names --split where\n"
    "they would take over ten); their progress and the time left go to\n"
    "stderr. --split times the few ranges of a placement chosen already:\n"
    "the planner prices other splits from the layers' sums, so give the\n"
    "same --split to plan, simulate and train.\n"
    "\n"
    "Prints a table (beside each layer's measured fwd + dX + dW, model ms: what\n"
    "the analytic cost model prices it at without a profile, to show where it\n"
    "errs) and, with -o, writes the profile (JSON, format version 2;\n"
    "version 1 files still load) that plan, train, simulate and sweep take with\n"
    "--profile: their cost model then uses these times at their micro-batch\n"
    "size, instead of FLOPs over an assumed speed, and the\n"
    "simulator puts the copies on the devices that make them.\n"
    "\n"
    "options:\n"
    "  --batch B          samples per optimizer step (default 64)\n"
    "  --microbatches M   micro-batches per step (default 1): layers are timed\n"
    "                     on ceil(B / M) samples\n"
    "  --sizes N,...      also time the layers at these micro-batch sizes, up\n"
    "                     to 6, in place of the default: 1, B and sizes\n"
    "                     between them, so that every size a step of B can\n"
    "                     have lies between two (1,4,64 at B = 64, M = 4);\n"
    "                     0: ceil(B / M) only\n"
    "  --repetitions R    timed rounds, their mean counts (default 7, 1..101;\n"
    "                     a layer range's rounds are split among its passes;\n"
    "                     below 3 none can be left out as an outlier)\n"
    "  --optimizer NAME   adam (default) or sgd, for the update times\n"
    "  --momentum X       sgd momentum (default 0)\n"
    "  --split I,J,...    time only the stages of this split (first layer of\n"
    "                     stages 1..S-1, as for train)\n"
    "  --devices SPEC     where to measure; this build measures on CPU cores\n"
    "                     (cpu, the default, or cpu:N: layers on the first core,\n"
    "                     the channels' other end and the co-runner on the\n"
    "                     second)\n"
    "  -o FILE            write the profile as JSON\n"
    "\n"
    "example:\n"
    "  brigade profile examples/fashion_cnn.model --microbatches 4 --devices cpu:2 \\\n"
    "      -o cnn.profile.json\n"
    "  brigade simulate examples/fashion_cnn.model --devices cpu:2 --microbatches 4 \\\n"
    "      --profile cnn.profile.json\n"
    "  brigade profile examples/fashion_cnn.model --microbatches 4 --devices cpu:2 \\\n"
    "      --split 4 -o split4.profile.json      # seconds: the two stages only\n";

typedef struct profile_options profile_options_t;

/* --sizes "1,64": up to BG_PROFILE_MAX_OTHER_SIZES sizes (one more while
 * parsing: ceil(B / M), dropped later, may be among them), any order,
 * sorted into o; "0": none. */
static bg_status_t parse_sizes(const char *text, profile_options_t *o);

struct profile_options {
    const char *model, *output, *devices;
    int64_t batch, microbatches, repetitions;
    /* --sizes, ascending, without ceil(B / M); count -1: not given (1 and B) */
    int size_count;
    int64_t sizes[BG_PROFILE_MAX_OTHER_SIZES + 1];
    int split[BG_MAX_STAGES], split_count; /* --split, 0: every range */
    bg_optimizer_config_t optimizer;
};

/* One size of --sizes into ctx's options, sorted in; a repeat is refused,
 * as sweep's lists refuse one. */
typedef struct sizes_parse {
    profile_options_t *o;
    const char *text; /* the whole value, for messages */
} sizes_parse_t;

static bg_status_t take_size(const char *option, const char *item, void *ctx) {
    const sizes_parse_t *sp = ctx;
    profile_options_t *o = sp->o;
    if (strcmp(item, "0") == 0)
        return bg_error_set(BG_ERR_INVALID, "%s '%s': 0 (no other sizes) must stand alone", option,
                            sp->text);
    int64_t size;
    BG_CHECK(bg_cli_parse_int(option, item, 1, 1 << 20, &size));
    for (int k = 0; k < o->size_count; k++)
        if (o->sizes[k] == size)
            return bg_error_set(BG_ERR_INVALID, "%s '%s': %lld is listed twice", option, sp->text,
                                (long long)size);
    if (o->size_count == BG_PROFILE_MAX_OTHER_SIZES + 1)
        return bg_error_set(BG_ERR_INVALID, "%s '%s': at most %d sizes", option, sp->text,
                            BG_PROFILE_MAX_OTHER_SIZES);
    int k = o->size_count++; /* insertion sort */
    for (; k > 0 && o->sizes[k - 1] > size; k--) o->sizes[k] = o->sizes[k - 1];
    o->sizes[k] = size;
    return BG_OK;
}

static bg_status_t parse_sizes(const char *text, profile_options_t *o) {
    o->size_count = 0;
    if (strcmp(text, "0") == 0) return BG_OK;
    sizes_parse_t sp = {o, text};
    return bg_cli_for_each_item("--sizes", text, take_size, &sp);
}

static bg_status_t parse_args(int argc, char **argv, profile_options_t *o, int *show_help) {
    static const char *const with_value[] = {"--batch",       "--microbatches", "--sizes",
                                             "--repetitions", "--optimizer",    "--momentum",
                                             "--devices",     "--split",        "-o"};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *show_help = 1;
            return BG_OK;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (o->model != NULL) return bg_cli_second_model(o->model, arg, 1);
            o->model = arg;
            continue;
        }
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            known |= strcmp(arg, with_value[k]) == 0;
        if (!known)
            return bg_cli_unknown_option(arg, with_value, sizeof with_value / sizeof with_value[0],
                                         0, NULL);
        const char *v;
        BG_CHECK(bg_cli_option_value(argc, argv, &i, &v));
        if (strcmp(arg, "--batch") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, 1 << 20, &o->batch));
        else if (strcmp(arg, "--microbatches") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, 65536, &o->microbatches));
        else if (strcmp(arg, "--sizes") == 0)
            BG_CHECK(parse_sizes(v, o));
        else if (strcmp(arg, "--repetitions") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, 101, &o->repetitions));
        else if (strcmp(arg, "--optimizer") == 0)
            BG_CHECK(bg_cli_parse_optimizer(arg, v, &o->optimizer.kind));
        else if (strcmp(arg, "--momentum") == 0)
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1, &o->optimizer.sgd.momentum));
        else if (strcmp(arg, "--devices") == 0)
            o->devices = v;
        else if (strcmp(arg, "--split") == 0)
            BG_CHECK(bg_placement_parse_split(v, o->split, &o->split_count));
        else
            o->output = v;
    }
    if (o->model == NULL) return bg_error_set(BG_ERR_INVALID, "no MODEL given");
    BG_CHECK(bg_cli_check_optimizer(&o->optimizer, argc, argv));
    BG_CHECK(bg_cli_check_microbatches(o->microbatches, o->batch));
    const int64_t micro = (o->batch + o->microbatches - 1) / o->microbatches;
    const int given = o->size_count >= 0;
    if (!given) o->size_count = bg_profile_default_sizes(o->batch, micro, o->sizes);
    /* ceil(B / M) is timed anyway; one given is said to be. */
    int kept = 0;
    for (int k = 0; k < o->size_count; k++)
        if (o->sizes[k] != micro) o->sizes[kept++] = o->sizes[k];
    if (given && kept < o->size_count)
        fprintf(stderr,
                "note: --sizes: %lld is the micro-batch's own size (ceil(%lld / %lld)), which "
                "is timed anyway%s\n",
                (long long)micro, (long long)o->batch, (long long)o->microbatches,
                kept == 0 ? "; no other size is (as --sizes 0)" : "");
    o->size_count = kept;
    /* Sizes past B are no micro-batch of this batch: they serve plans of
     * a larger one, which a user may not have meant (a tester). Sorted:
     * the largest is last. */
    if (given && kept > 0 && o->sizes[kept - 1] > o->batch)
        fprintf(stderr,
                "note: --sizes: %lld is larger than the batch of %lld, so no micro-batch of it "
                "has that many samples; a size past the batch serves plans of a larger --batch\n",
                (long long)o->sizes[kept - 1], (long long)o->batch);
    if (kept > BG_PROFILE_MAX_OTHER_SIZES)
        return bg_error_set(BG_ERR_INVALID,
                            "--sizes: at most %d sizes besides the micro-batch's own, %lld",
                            BG_PROFILE_MAX_OTHER_SIZES, (long long)micro);
    BG_CHECK(bg_cli_check_output("-o", o->output)); /* now, not after the measuring */
    const bg_cli_file_t files[] = {{"MODEL", o->model, 0, NULL, 0},
                                   {"hwloc (HWLOC_XMLFILE)", bg_cli_env_topology(NULL), 0, NULL, 1},
                                   {"-o", o->output, 1, NULL, 0}};
    return bg_cli_check_distinct(files, 3);
}

/* Whether p->stage[i] times another layer range than entry *last, the
 * last one counted (each range is timed at several slot counts, one entry
 * each, in a row); makes i the last counted. */
static int new_range(const bg_profile_t *p, int i, int *last) {
    const int fresh = *last < 0 || p->stage[i].first != p->stage[*last].first ||
                      p->stage[i].last != p->stage[*last].last;
    *last = i;
    return fresh;
}

/* One ratio's range, "x0.91 to x1.20", or "not measured" where no range
 * kept one (a ratio past BG_PROFILE_MAX_AFTER_WAIT_RATIO is noise, and
 * stored as 0). */
static const char *ratio_range(double lo, double hi, int count, char *buf, size_t size) {
    if (count == 0)
        snprintf(buf, size, "not measured");
    else
        snprintf(buf, size, "x%.2f to x%.2f", lo, hi);
    return buf;
}

/* Says, where a slowdown ratio printed above came out below 1 (`lowest`,
 * printed x0.99 or less), what that means: the op ran faster than its
 * reference, which only a busy or throttling machine's noise makes; the
 * simulator applies none. */
static void note_ratio_below_one(double lowest, const char *what) {
    char printed[32]; /* as the ranges above print it */
    snprintf(printed, sizeof printed, "%.2f", lowest);
    if (strtod(printed, NULL) < 1)
        printf("  (%s below x1.00 are noise of a busy or frequency-scaling machine, not a "
               "speed-up: the simulator slows ops by ratios above 1 only)\n",
               what);
}

/* Over the ranges timed after waits: each ratio's lowest and highest of
 * those measured. */
static void print_after_wait(const bg_profile_t *p) {
    double lo[2][BG_NEIGHBOUR_KINDS] = {{0}}, hi[2][BG_NEIGHBOUR_KINDS] = {{0}};
    int kept[2][BG_NEIGHBOUR_KINDS] = {{0}};
    int count = 0, ranges = 0, last = -1;
    for (int i = 0; i < p->stage_count; i++) {
        const bg_stage_after_wait_t *w = &p->stage[i].after_wait;
        int any = 0;
        for (int k = 0; k < BG_NEIGHBOUR_KINDS; k++) any |= w->forward[k] > 0 || w->backward[k] > 0;
        if (!any) continue;
        ranges += new_range(p, i, &last);
        for (int k = 0; k < BG_NEIGHBOUR_KINDS; k++)
            for (int op = 0; op < 2; op++) {
                const double v = op == 0 ? w->forward[k] : w->backward[k];
                if (v <= 0) continue; /* not measured */
                if (kept[op][k] == 0 || v < lo[op][k]) lo[op][k] = v;
                if (kept[op][k] == 0 || v > hi[op][k]) hi[op][k] = v;
                kept[op][k]++;
            }
        count++;
    }
    if (count == 0) return;
    printf("after a wait: %d timings of %d layer ranges, their ops after a wait over warm ones, "
           "by what the other core ran meanwhile:\n",
           count, ranges);
    for (int op = 0; op < 2; op++) {
        char f[40], b[40], u[40];
        printf("  %s after the other's fwd %s, bwd %s, update %s\n", op == 0 ? "fwd" : "bwd",
               ratio_range(lo[op][BG_NEIGHBOUR_FORWARD], hi[op][BG_NEIGHBOUR_FORWARD],
                           kept[op][BG_NEIGHBOUR_FORWARD], f, sizeof f),
               ratio_range(lo[op][BG_NEIGHBOUR_BACKWARD], hi[op][BG_NEIGHBOUR_BACKWARD],
                           kept[op][BG_NEIGHBOUR_BACKWARD], b, sizeof b),
               ratio_range(lo[op][BG_NEIGHBOUR_UPDATE], hi[op][BG_NEIGHBOUR_UPDATE],
                           kept[op][BG_NEIGHBOUR_UPDATE], u, sizeof u));
    }
    double lowest = 1;
    for (int op = 0; op < 2; op++)
        for (int k = 0; k < BG_NEIGHBOUR_KINDS; k++)
            if (kept[op][k] > 0 && lo[op][k] < lowest) lowest = lo[op][k];
    note_ratio_below_one(lowest, "ratios after a wait");
}

/* Each layer's fwd + dX + dW at every size timed, ascending (the profile's
 * batch marked), and how other sizes are priced. */
static void print_sizes(const bg_model_spec_t *spec, const bg_profile_t *p) {
    if (p->other_sizes == 0) {
        printf("other micro-batch sizes are priced in proportion to the samples (one size "
               "timed; --sizes names others to time)\n");
        return;
    }
    int64_t size[BG_PROFILE_MAX_OTHER_SIZES + 1];
    int where[BG_PROFILE_MAX_OTHER_SIZES + 1];
    const int n = bg_profile_timed_sizes(p, size, where);
    printf("\n%5s  %-22s", "layer", "fwd + dX + dW ms at");
    for (int k = 0; k < n; k++) {
        char head[24];
        snprintf(head, sizeof head, "%lld%s", (long long)size[k], where[k] < 0 ? "*" : "");
        printf(" %9s", head);
    }
    printf("\n");
    for (int i = 0; i < p->layers; i++) {
        printf("%5d  %-22s", i, bg_layer_kind_name(spec->layers[i].kind));
        for (int k = 0; k < n; k++) {
            const bg_layer_at_size_t t = bg_profile_layer_at(&p->layer[i], where[k]);
            printf(" %9.4f", (t.forward_s + t.backward_data_s + t.backward_weights_s) * 1e3);
        }
        printf("\n");
    }
    printf("(*: the micro-batch of the table above; a size between two timed ones is priced on "
           "each op's line through them, past the largest in proportion to it, below the "
           "smallest on the line through the two smallest, between its time and that time in "
           "proportion)\n");
}

/* Why some of the table's times are 0: ops fused into a neighbour's (the
 * CPU backend's conv2d + relu forward, relu + max-pool backward), a
 * flatten that only reshapes, a residual's forward, which hands its input
 * on, and the first layer's dX, which no stage asks for. */
static void print_zero_times(const bg_model_spec_t *spec) {
    printf("(0 ms: layer 0's dX is never run, as nothing comes before it");
    for (int i = 0; i < spec->num_layers; i++) {
        const bg_layer_kind_t kind = spec->layers[i].kind;
        const int after_conv = i > 0 && spec->layers[i - 1].kind == BG_LAYER_CONV2D,
                  before_pool =
                      i + 1 < spec->num_layers && spec->layers[i + 1].kind == BG_LAYER_MAXPOOL;
        if (kind == BG_LAYER_FLATTEN) printf("; layer %d (flatten) only reshapes", i);
        if (kind == BG_LAYER_RESIDUAL || kind == BG_LAYER_SHORTCUT)
            printf("; layer %d (%s)'s fwd hands its block's input on", i, bg_layer_kind_name(kind));
        if (kind != BG_LAYER_RELU || !(after_conv || before_pool)) continue;
        printf("; layer %d (relu)'s", i);
        if (after_conv)
            printf(" fwd runs inside layer %d's conv2d%s", i - 1, before_pool ? "," : "");
        if (before_pool) printf(" dX inside layer %d's maxpool", i + 1);
    }
    printf(")\n");
}

/* Each layer's fwd + dX + dW for a micro-batch of `batch` samples as the
 * analytic cost model prices it on one CPU core (what plan, simulate and
 * sweep go by without --profile), in seconds; NULL where the model cannot
 * be made (the column is then left out). */
static double *analytic_layer_seconds(const bg_model_spec_t *spec, int64_t batch) {
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = spec;
    cc.batch = batch;
    bg_cost_model_t *model = NULL;
    double *seconds = malloc(sizeof *seconds * (size_t)spec->num_layers);
    if (seconds == NULL || bg_cost_model_create(&cc, &model) != BG_OK) {
        bg_error_clear();
        free(seconds);
        return NULL;
    }
    const bg_cost_device_t core = BG_COST_DEVICE_CPU_CORE_INIT;
    for (int i = 0; i < spec->num_layers; i++) {
        const bg_cost_time_t t = bg_cost_layer_time(model, &core, i);
        seconds[i] = t.forward + t.backward; /* backward: dX (none for layer 0) and dW */
    }
    bg_cost_model_destroy(model);
    return seconds;
}

static void print_profile(const bg_model_spec_t *spec, const bg_profile_t *p) {
    double *model = analytic_layer_seconds(spec, p->batch), model_sum = 0;
    printf("%5s  %-22s %9s %9s %9s %10s %9s", "layer", "kind", "fwd ms", "dX ms", "dW ms",
           "update ms", "total ms");
    printf(model != NULL ? " %9s\n" : "\n", "model ms");
    bg_layer_profile_t sum = {0};
    for (int i = 0; i < p->layers; i++) {
        const bg_layer_profile_t *l = &p->layer[i];
        double total = l->forward_s + l->backward_data_s + l->backward_weights_s;
        printf("%5d  %-22s %9.4f %9.4f %9.4f %10.4f %9.4f", i,
               bg_layer_kind_name(spec->layers[i].kind), l->forward_s * 1e3,
               l->backward_data_s * 1e3, l->backward_weights_s * 1e3, l->update_s * 1e3,
               total * 1e3);
        if (model != NULL) printf(" %9.4f", model[i] * 1e3);
        putchar('\n');
        sum.forward_s += l->forward_s;
        sum.backward_data_s += l->backward_data_s;
        sum.backward_weights_s += l->backward_weights_s;
        sum.update_s += l->update_s;
        if (model != NULL) model_sum += model[i];
    }
    printf("%5s  %-22s %9.4f %9.4f %9.4f %10.4f %9.4f", "", "total", sum.forward_s * 1e3,
           sum.backward_data_s * 1e3, sum.backward_weights_s * 1e3, sum.update_s * 1e3,
           (sum.forward_s + sum.backward_data_s + sum.backward_weights_s) * 1e3);
    if (model != NULL) printf(" %9.4f", model_sum * 1e3);
    putchar('\n');
    print_zero_times(spec);
    printf("\ntotal ms: fwd + dX + dW of one micro-batch of %lld sample%s (update: once a step)\n",
           (long long)p->batch, p->batch == 1 ? "" : "s");
    if (model != NULL)
        printf("model ms: the same fwd + dX + dW as the analytic cost model prices it on one "
               "core, beside its neighbours in a stage of the whole model (what plan, simulate "
               "and sweep go by without --profile): where it is far from total ms, they "
               "misjudge that layer without this profile\n");
    free(model);
    print_sizes(spec, p);
    printf("copy bandwidth: %.2f GB/s per memcpy (a channel copies twice per transfer)\n",
           p->copy_bytes_per_s / 1e9);
    /* A boundary is named by the layer after it, as --split names a cut:
     * "3-4" is the cuts before layers 3 and 4 (a tester read it as one). */
    printf("channels: hand-off %.1f us, wake %.1f us; per boundary (us, by the first layer after "
           "it, as --split): send/recv",
           1e6 * p->handoff_s, 1e6 * p->wake_s);
    /* A run of boundaries with the same figures (tensors of one size,
     * timed once) is one entry, "2-4:0.3/0.2". */
    for (int i = 1, end; i < p->layers; i = end) {
        const bg_layer_profile_t *l = &p->layer[i];
        for (end = i + 1; end < p->layers && p->layer[end].send_s == l->send_s &&
                          p->layer[end].recv_s == l->recv_s;
             end++) {
        }
        if (end - i > 1)
            printf(" %d-%d:%.1f/%.1f", i, end - 1, 1e6 * l->send_s, 1e6 * l->recv_s);
        else
            printf(" %d:%.1f/%.1f", i, 1e6 * l->send_s, 1e6 * l->recv_s);
    }
    printf("\n");
    /* Over the ranges timed under load: F + B beside the co-runner / alone. */
    double lowest = 0, highest = 0;
    int loaded = 0, ranges = 0, last = -1;
    for (int i = 0; i < p->stage_count; i++) {
        const bg_stage_profile_t *sp = &p->stage[i];
        const double alone = sp->forward_s + sp->backward_s,
                     under = sp->loaded.forward_s + sp->loaded.backward_s;
        if (alone <= 0 || under <= 0) continue;
        ranges += new_range(p, i, &last);
        const double ratio = under / alone;
        if (loaded == 0 || ratio < lowest) lowest = ratio;
        if (loaded == 0 || ratio > highest) highest = ratio;
        loaded++;
    }
    if (loaded > 0)
        printf("under load: %d timings of %d layer ranges, their fwd + bwd beside a co-runner "
               "on the other core, x%.2f to x%.2f of alone\n",
               loaded, ranges, lowest, highest);
    if (loaded > 0) note_ratio_below_one(lowest, "ratios under load");
    print_after_wait(p);
}

/* The measurement's progress (bg_profile_config_t.progress_ctx): its line,
 * and whether the note on a long timing of every layer range was said. */
typedef struct profile_progress {
    bg_progress_t line;
    int ranges; /* the phase is the layer ranges' (BG_PROFILE_PHASE_RANGES) */
    int long_noted;
    int layers;
} profile_progress_t;

/* The profiler's bg_profile_config_t.phase: the progress line's `what`,
 * kept (the profiler's text is its own). The layers' rounds say nothing
 * where they end within a second (a small model's); the ranges' phase,
 * the longest, always ends with its count. */
static void name_phase(void *ctx, const char *what) {
    static char kept[96];
    profile_progress_t *progress = ctx;
    bg_progress_end_line(&progress->line); /* the last phase's line, if left open */
    snprintf(kept, sizeof kept, "%s", what);
    progress->line.what = kept;
    progress->ranges = strcmp(what, BG_PROFILE_PHASE_RANGES) == 0;
    progress->line.quiet_s = progress->ranges ? 0 : 1.0;
}

/* Past this many seconds left of timing every layer range, once 30 s of
 * it tell, a note names --split: a 13-layer MLP of 3072-wide layers (47M
 * parameters) on cpu:2 at B = 64, M = 4 had about 68 minutes more to go
 * over its 91 ranges 30 s in, and took 2 minutes in all with --split 6
 * (2026-12-06, a 2-core Xeon). */
#define LONG_RANGES_S 600.0

/* The profiler's bg_profile_config_t.progress with --split, which times
 * only its stages' ranges: the line. */
static void count_progress(void *ctx, int64_t done, int64_t total) {
    bg_progress_count(&((profile_progress_t *)ctx)->line, done, total);
}

/* And without --split: the line, and in the ranges' phase, once it shows
 * the rest will take over LONG_RANGES_S, a note that --split times one
 * placement's stages only. */
static void count_progress_noting_split(void *ctx, int64_t done, int64_t total) {
    profile_progress_t *progress = ctx;
    bg_progress_count(&progress->line, done, total);
    if (!progress->ranges || progress->long_noted || done <= 0 || done >= total) return;
    const double now = bg_monotonic_seconds();
    const double left = bg_progress_left_s(&progress->line, done, total, now);
    if (now - progress->line.started < 30 || left < LONG_RANGES_S) return;
    progress->long_noted = 1;
    bg_progress_end_line(&progress->line);
    fprintf(stderr,
            "note: timing every range of the %d layers as a stage will take about %.0f "
            "minutes more; --split I,J,.. (the planner's split: 'brigade plan' shows it) times "
            "that placement's stages alone (interrupt this and profile again with it)\n",
            progress->layers, left / 60);
}

/* Leaves out of pc's other sizes those at which the stage of the whole
 * model that times the layers would hold over half of this machine's
 * memory (a large B of a large model), saying so: their times are then
 * extrapolated from the largest size kept. */
static bg_status_t keep_sizes_that_fit(bg_profile_config_t *pc) {
    const uint64_t host = bg_host_memory_bytes();
    if (host == 0) return BG_OK; /* not known: all kept */
    const double budget = 0.5 * (double)host;
    int kept = 0;
    for (int k = 0; k < pc->other_sizes; k++) {
        bg_cost_config_t cc = BG_COST_CONFIG_INIT;
        cc.spec = pc->spec;
        cc.batch = pc->other_size[k];
        cc.optimizer = pc->optimizer;
        bg_cost_model_t *m = NULL;
        BG_CHECK(bg_cost_model_create(&cc, &m));
        const bg_cost_stage_t whole = {.first_layer = 0,
                                       .last_layer = pc->spec->num_layers,
                                       .stash_slots = pc->stash_slots}; /* on a CPU core */
        const bg_cost_memory_t memory = bg_cost_stage_memory(m, &whole);
        bg_cost_model_destroy(m);
        const size_t peak = bg_cost_memory_peak(&memory);
        if ((double)peak <= budget) {
            pc->other_size[kept++] = pc->other_size[k];
            continue;
        }
        fprintf(stderr,
                "note: the layers are not timed at %lld samples: the stage of the whole model "
                "that times them would hold %.0f MiB, over half of this machine's memory; "
                "sizes past the largest timed are priced in proportion to it\n",
                (long long)pc->other_size[k], (double)peak / (1024.0 * 1024.0));
    }
    pc->other_sizes = kept;
    return BG_OK;
}

int bg_cmd_profile(int argc, char **argv) {
    profile_options_t o = {.batch = 64,
                           .microbatches = 1,
                           .size_count = -1,
                           .repetitions = 7,
                           .optimizer = BG_OPTIMIZER_CONFIG_INIT};
    int show_help = 0;
    bg_status_t st = parse_args(argc, argv, &o, &show_help);
    if (show_help) {
        fputs(help, stdout);
        return 0;
    }
    if (st != BG_OK) return bg_cli_usage_error("profile", "%s", bg_error_message());
    bg_model_spec_t *spec = NULL;
    bg_topology_t *topology = NULL;
    bg_profile_t *profile = NULL;
    profile_progress_t progress = {0}; /* set up before the measurement */
    int code = 0;
    BG_CHECK_GOTO(bg_cli_model_load(o.model, &spec), st, fail);
    /* Before the progress lines start, though the profiler checks it too. */
    if (o.split_count > 0)
        BG_CHECK_GOTO(bg_model_spec_check_split(spec, o.split_count + 1, o.split, NULL), st, fail);
    BG_CHECK_GOTO(bg_topology_create(NULL, &topology), st, fail);
    int peer_core = 1 % bg_topology_core_count(topology), loaded = 0;
    if (o.devices != NULL) {
        bg_device_list_t list;
        BG_CHECK_GOTO(bg_device_list_parse(o.devices, bg_topology_core_count(topology), &list), st,
                      fail);
        if (list.devices[0].kind != BG_DEVICE_CPU) {
            st = bg_error_set(BG_ERR_UNSUPPORTED,
                              "--devices %s: this build profiles on a CPU core only", o.devices);
            goto fail;
        }
        if (list.count > 1 && list.devices[1].kind == BG_DEVICE_CPU) {
            peer_core = list.devices[1].physical;
            loaded = peer_core != list.devices[0].physical;
        }
    }
    bg_cli_note_unbound(topology);
    /* Like a CPU device's thread: on one core, so timings do not wander. A
     * machine that refuses binding still gets a profile. */
    if (bg_topology_bind_thread(topology, 0) != BG_OK) bg_error_clear();
    bg_profile_config_t pc = BG_PROFILE_CONFIG_INIT;
    pc.spec = spec;
    pc.batch = (o.batch + o.microbatches - 1) / o.microbatches;
    pc.other_sizes = o.size_count;
    for (int k = 0; k < o.size_count; k++) pc.other_size[k] = o.sizes[k];
    pc.repetitions = (int)o.repetitions;
    pc.optimizer = o.optimizer;
    /* Rounds of M in flight, at most 64: a range's stage times hardly
     * change past that, and each round holds M micro-batches' stashes. */
    pc.microbatches = (int)(o.microbatches < 64 ? o.microbatches : 64);
    pc.topology = topology;
    pc.peer_core = peer_core;
    pc.loaded = loaded;
    pc.split = o.split_count > 0 ? o.split : NULL;
    pc.split_count = o.split_count;
    bg_progress_init(&progress.line, stderr, 1);
    progress.line.what = BG_PROFILE_PHASE_RANGES;
    progress.ranges = 1;
    progress.layers = spec->num_layers;
    pc.progress = o.split_count > 0 ? count_progress : count_progress_noting_split;
    pc.phase = name_phase;
    pc.progress_ctx = &progress;
    BG_CHECK_GOTO(keep_sizes_that_fit(&pc), st, fail);
    char sizes[96] = "";
    for (int k = 0, at = 0; k < pc.other_sizes && at < (int)sizeof sizes; k++)
        at += snprintf(sizes + at, sizeof sizes - (size_t)at, "%s%lld%s",
                       k == 0                    ? " (the layers also at "
                       : k + 1 == pc.other_sizes ? " and "
                                                 : ", ",
                       (long long)pc.other_size[k], k + 1 == pc.other_sizes ? ")" : "");
    char shown[BG_CLI_SHOWN_MAX];
    const char *model_name = bg_cli_shown(o.model, shown, sizeof shown);
    fprintf(stderr,
            "profiling %s: %d layers, micro-batch of %lld sample%s%s, %d timed run%s each\n",
            model_name, spec->num_layers, (long long)pc.batch, pc.batch == 1 ? "" : "s", sizes,
            pc.repetitions, pc.repetitions == 1 ? "" : "s");
    bg_cli_note_busy_machine();
    bg_cli_note_address_limit();
    if (pc.split == NULL && spec->num_layers > BG_PROFILE_MAX_STAGE_LAYERS)
        fprintf(stderr,
                "note: %s has %d layers; every layer range is timed as a stage only for models "
                "of up to %d, so this profile holds no stage times, and plans will price each "
                "stage from the sum of its layers' times (give --split I,J,.. to time the "
                "stages of one placement)\n",
                model_name, spec->num_layers, BG_PROFILE_MAX_STAGE_LAYERS);
    /* A figure leaves out runs over 3 times the runs' median: of one or
     * two runs, none can be. */
    if (pc.repetitions < 3)
        fprintf(stderr,
                "note: --repetitions %d: no timed run can be left out as an outlier (over 3 "
                "times the median of its figure's runs) with fewer than 3, so one slow run (the "
                "core taken by another process) counts whole; the default is 7\n",
                pc.repetitions);
    bg_cli_cpu_sample_t cpu;
    bg_cli_cpu_start(&cpu);
    BG_CHECK_GOTO(bg_profile_measure(&pc, &profile), st, fail);
    bg_cli_note_others_cpu(bg_cli_others_cpu_share(&cpu), "it measured");
    if (profile->other_sizes < pc.other_sizes)
        fprintf(stderr,
                "note: the layers were timed at %d of the %d other sizes; the rest did not fit "
                "in memory as a stage of the whole model (give --sizes smaller ones)\n",
                profile->other_sizes, pc.other_sizes);
    /* Rounds that disagree: the machine was not the profile's alone, even
     * where its load average (bg_cli_note_busy_machine) did not say so. */
    if (profile->layer_round_spread > SPREAD_NOTED)
        fprintf(stderr,
                "note: the timed rounds of the layers lie up to %.1fx apart (the second slowest "
                "over the fastest; %.1fx or less on an idle machine): something else ran beside "
                "them, or the CPU's clock changed, and the figures may mislead the planner and "
                "the simulator; profile again on an idle machine\n",
                profile->layer_round_spread, SPREAD_NOTED);
    bg_cli_files_guard_t guard;
    bg_cli_files_begin(&guard);
    print_profile(spec, profile);
    st = o.output != NULL ? bg_profile_save(profile, o.output) : BG_OK;
    if (o.output != NULL) st = bg_cli_closed_stdout_status(st, "", o.output);
    if (st == BG_OK && o.output != NULL)
        fprintf(stderr, "profile written to %s\n", bg_cli_shown(o.output, shown, sizeof shown));
    /* Said before a closed pipe's SIGPIPE can end the command. */
    if (st != BG_OK) {
        bg_progress_end_line(&progress.line);
        code = bg_cli_fail("profile", st);
    }
    bg_cli_files_end(&guard);
    goto done;
fail:
    /* An unfinished progress bar keeps its line; the error goes below it. */
    bg_progress_end_line(&progress.line);
    code = bg_cli_fail("profile", st);
done:
    bg_profile_destroy(profile);
    bg_topology_destroy(topology);
    bg_model_spec_destroy(spec);
    return code;
}
