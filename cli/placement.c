#include "placement.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "cuda/backend_cuda.h"
#include "device_order.h"
#include "host_memory.h"
#include "parse.h"

const char bg_placement_help[] =
    "placement:\n"
    "  --devices SPEC     cpu (default), cpu:N (N devices, one thread each, bound to\n"
    "                     cores), cuda:0,cuda:1 or cuda:0x4 (needs the CUDA build),\n"
    "                     auto\n"
    "  --stages K         use K of the devices (default: all of them; below);\n"
    "                     without --devices, K CPU devices (cpu:K)\n"
    "  --split I,J,...    first layer of stages 1..S-1 (default: the planner's\n"
    "                     split, see 'brigade plan'); layer numbers as in\n"
    "                     'brigade summary'; a stage starts outside every\n"
    "                     residual block: at a 'residual' or after its 'add'\n";

const char bg_placement_help_schedule[] =
    "  --schedule NAME    gpipe, 1f1b (default), interleaved or zb-h1; auto: the\n"
    "                     one whose simulated step is fastest of those that fit\n"
    "                     (gpipe, 1f1b, zb-h1, and interleaved with --chunks > 1;\n"
    "                     with --split too, those its boundaries fit: K - 1\n"
    "                     for a stage a device, K x V - 1 for interleaved)\n"
    "  --microbatches M   micro-batches per mini-batch (default 1); auto: of the\n"
    "                     divisors of B and the powers of two (interleaved: also\n"
    "                     K times a power of two), the M whose simulated step is\n"
    "                     fastest while every stage fits; a search past a second\n"
    "                     shows its progress on stderr\n";

const char bg_placement_help_rest[] =
    "  --chunks V         stages per device: interleaved needs 2 or more; the\n"
    "                     other schedules run one (the default)\n"
    "  --recompute        keep only each micro-batch's stage input; re-run the\n"
    "                     forward before the backward (less memory, more compute)\n"
    "  --device-mem SIZE  memory each device may use: bytes, or a number with K,\n"
    "                     M, G or T (powers of 1024; 512M, 512m, 512MB and 512MiB\n"
    "                     are the same): 1000000, 512M, 8G, 1.5G (a fraction of a\n"
    "                     byte is dropped).\n"
    "                     Without it plan and simulate divide the host's memory\n"
    "                     (or the --topology file's) evenly among the CPU\n"
    "                     devices, and give CUDA devices their GPU's (free\n"
    "                     memory from CUDA, or the --topology file's less 528\n"
    "                     MiB for the CUDA context), divided evenly among the\n"
    "                     virtual devices the run uses, less 32 MiB each for\n"
    "                     cuBLAS's workspace (docs/cuda.md);\n"
    "                     train checks only a given size.\n"
    "                     With --chunks V a given --split fits when each\n"
    "                     device's V stages together fit it; the planner's own\n"
    "                     split keeps each stage within 1/V of it unless a\n"
    "                     faster one fits per device (or where none fits so)\n"
    "  --conv-workspace SIZE\n"
    "                     the most scratch memory a convolution on a CUDA device\n"
    "                     may use (default 256M; 0: only algorithms that need\n"
    "                     none). cuDNN's algorithm, the fastest within it, is\n"
    "                     found by timing them on the GPU, so the plan counts all\n"
    "                     of it for each GPU stage holding a convolution; a\n"
    "                     smaller one fits tighter memory, maybe at some speed\n"
    "  --profile FILE     measured layer times ('brigade profile') for the\n"
    "                     planner in place of FLOPs over an assumed speed (train\n"
    "                     takes it only where the planner chooses: the split of\n"
    "                     several stages, or M or the schedule with auto; a\n"
    "                     measured sweep also to print each point's prediction)\n"
    "  --topology FILE    plan for the machine an hwloc XML file describes\n"
    "                     (lstopo --of xml; see 'brigade topo') instead of this\n"
    "                     one: its cores, NUMA nodes, GPUs and their PCI links\n"
    "                     (plan, simulate and sweep --simulate only)\n"
    "  The stages go to the devices whose chain has the fastest links (the\n"
    "  slowest link first, then the fewest slow ones, then the order given);\n"
    "  with --stages K, the best K of them: as many GPUs as there are first,\n"
    "  no GPU more of the stages than it must (its virtual devices share its\n"
    "  arithmetic), and of those linked alike, up to 12 devices, the chain\n"
    "  whose smallest device has the most memory. Where that chain does not\n"
    "  fit and its devices' memory differs, it runs the other way round if\n"
    "  that fits (a sweep decides so point by point). 'brigade plan' prints\n"
    "  the links.\n";

void bg_placement_init(bg_placement_t *p) {
    memset(p, 0, sizeof *p);
    p->devices_text = "cpu";
    p->schedule = BG_SCHEDULE_1F1B;
    p->chunks = 1;
    p->microbatches = 1;
    p->conv_workspace = BG_CUDA_CONV_WORKSPACE_LIMIT;
}

/* The options that take a value, then the one flag. */
static const char *const placement_options[] = {
    "--devices",    "--stages",  "--split",    "--schedule",       "--chunks",   "--microbatches",
    "--device-mem", "--profile", "--topology", "--conv-workspace", "--recompute"};
enum { PLACEMENT_OPTIONS = sizeof placement_options / sizeof placement_options[0] };

int bg_placement_is_option(const char *arg) {
    for (size_t i = 0; i < PLACEMENT_OPTIONS; i++)
        if (strcmp(arg, placement_options[i]) == 0) return strcmp(arg, "--recompute") == 0 ? 2 : 1;
    return 0;
}

const char *const *bg_placement_option_names(size_t *count) {
    *count = PLACEMENT_OPTIONS;
    return placement_options;
}

bg_status_t bg_placement_parse_split(const char *text, int *split, int *count) {
    *count = 0;
    const char *at = text;
    while (*at != '\0') {
        char *end = (char *)at;
        /* Digits only: strtol would also take "+4" and " 4". */
        long value = *at >= '0' && *at <= '9' ? strtol(at, &end, 10) : -1;
        if (value == 0 && end > at && (*end == ',' || *end == '\0'))
            return bg_error_set(BG_ERR_INVALID,
                                "--split: 0 is no boundary (stage 0 always starts at layer 0); "
                                "give the first layer of stages 1, 2, ..., like 3,5");
        if (value < 1 || value > 1000000 || (*end != ',' && *end != '\0'))
            return bg_error_set(BG_ERR_INVALID,
                                "--split: expected layer numbers like 3,5, got '%s'", text);
        if (*count + 1 >= BG_MAX_STAGES)
            return bg_error_set(BG_ERR_INVALID, "--split: more than %d stages", BG_MAX_STAGES);
        split[(*count)++] = (int)value;
        at = *end == ',' ? end + 1 : end;
        if (*end == ',' && *at == '\0')
            return bg_error_set(BG_ERR_INVALID, "--split: '%s' ends with a comma", text);
    }
    if (*count == 0) return bg_error_set(BG_ERR_INVALID, "--split: no layer numbers");
    return BG_OK;
}

/* "512M", "1.5G", "1000000": bytes, suffixes in powers of 1024 (K, M, G,
 * T, each also with B or iB after it, in either case; B alone after a
 * count of bytes). A count of bytes is whole. At least 1 byte, or with
 * `allow_zero` 0 too (written any way: 0, 0M, 0.0); at most 2^53 bytes,
 * the most a JSON number holds exactly. */
static bg_status_t parse_size(const char *option, const char *text, int allow_zero, size_t *out) {
    /* Digits and a decimal point only: strtod would also read "0x100" and
     * "1e3". */
    const size_t digits = strspn(text, "0123456789.");
    char *end = NULL;
    double value = digits > 0 ? strtod(text, &end) : -1;
    if (end != NULL && end != text + digits) end = NULL;
    double scale = 1;
    if (end != NULL && *end != '\0') {
        const char *units = "KMGT";
        const char *unit = strchr(units, end[0] >= 'a' ? end[0] - 32 : end[0]);
        if (unit != NULL) {
            for (const char *u = units; u <= unit; u++) scale *= 1024;
            end++;
        }
        if ((end - text == (long)digits && strcasecmp(end, "B") == 0) ||
            (unit != NULL && (strcasecmp(end, "B") == 0 || strcasecmp(end, "iB") == 0)))
            end += strlen(end);
    }
    const double least = allow_zero ? 0 : 1;
    if (end != NULL && *end == '\0' && value * scale < least)
        return bg_error_set(BG_ERR_INVALID, "%s: a size must be at least 1 byte, got '%s'", option,
                            text);
    if (end != NULL && *end == '\0' && value > 0 && value * scale < 1)
        return bg_error_set(BG_ERR_INVALID, "%s: '%s' is less than a byte (0, or at least 1)",
                            option, text);
    /* A count of bytes is judged by its digits, exactly: a double would
       round 2^53 + 1, or 2^53 + 0.5, to 2^53. */
    const char *point = memchr(text, '.', digits);
    const size_t integer = point != NULL ? (size_t)(point - text) : digits;
    const bool fraction = point != NULL && strspn(point + 1, "0") < digits - integer - 1;
    uint64_t bytes = 0;
    const bool past =
        scale == 1 ? integer > 0 && !bg_parse_digits(text, integer, (uint64_t)1 << 53, &bytes)
                   : value * scale > 0x1p53;
    if (end != NULL && *end == '\0' && scale == 1 && fraction)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: '%s' is not a whole number of bytes (fractions need a unit, as "
                            "in 1.5G)",
                            option, text);
    if (end != NULL && *end == '\0' && past)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: '%s' is more than 8192T (2^53 bytes), the most it takes", option,
                            text);
    if (end == NULL || *end != '\0' || !(value * scale >= least))
        return bg_error_set(BG_ERR_INVALID,
                            "%s: expected a size like 1000000, 512M, 8G or 1.5G, got '%s'", option,
                            text);
    *out = (size_t)(value * scale);
    return BG_OK;
}

bg_status_t bg_placement_apply(bg_placement_t *p, const char *arg, const char *value) {
    int64_t n;
    if (strcmp(arg, "--devices") == 0) {
        p->devices_text = value;
    } else if (strcmp(arg, "--stages") == 0) {
        BG_CHECK(bg_cli_parse_int(arg, value, 1, BG_MAX_STAGES, &n));
        p->stages = (int)n;
    } else if (strcmp(arg, "--split") == 0) {
        BG_CHECK(bg_placement_parse_split(value, p->split, &p->split_count));
    } else if (strcmp(arg, "--schedule") == 0) {
        p->auto_schedule = strcmp(value, "auto") == 0;
        if (!p->auto_schedule && bg_schedule_kind_parse(value, &p->schedule) != BG_OK)
            return bg_error_set(BG_ERR_INVALID,
                                "--schedule: unknown schedule '%s' (expected gpipe, 1f1b, "
                                "interleaved, zb-h1 or auto)",
                                value);
    } else if (strcmp(arg, "--chunks") == 0) {
        BG_CHECK(bg_cli_parse_int(arg, value, 1, 64, &n));
        p->chunks = (int)n;
    } else if (strcmp(arg, "--microbatches") == 0) {
        p->auto_microbatches = strcmp(value, "auto") == 0;
        if (!p->auto_microbatches) {
            BG_CHECK(bg_cli_parse_int(arg, value, 1, 65536, &n));
            p->microbatches = (int)n;
        }
    } else if (strcmp(arg, "--device-mem") == 0) {
        BG_CHECK(parse_size(arg, value, 0, &p->device_mem));
    } else if (strcmp(arg, "--conv-workspace") == 0) {
        BG_CHECK(parse_size(arg, value, 1, &p->conv_workspace));
        p->conv_workspace_given = 1;
    } else if (strcmp(arg, "--profile") == 0) {
        p->profile_path = value;
    } else if (strcmp(arg, "--topology") == 0) {
        p->topology_path = value;
    } else if (strcmp(arg, "--recompute") == 0) {
        p->recompute = 1;
    } else {
        return bg_cli_unknown_option(arg, NULL, 0, 1, NULL);
    }
    return BG_OK;
}

int bg_placement_stage_count(const bg_placement_t *p) {
    return (p->stages > 0 ? p->stages : p->devices.count) * p->chunks;
}

bg_status_t bg_placement_check_chunks(bg_schedule_kind_t kind, int chunks, const char *advice) {
    if (kind == BG_SCHEDULE_INTERLEAVED && chunks < 2)
        return bg_error_set(
            BG_ERR_INVALID,
            "interleaved runs --chunks V stages per device, V of 2 or more (with "
            "one chunk a device it would be 1F1B's order with a longer warm-up): %s",
            advice);
    return BG_OK;
}

const char *bg_placement_device_words(const bg_placement_t *p, char *buf, size_t size) {
    return bg_device_list_words(&p->devices, buf, size);
}

/* --conv-workspace bounds cuDNN's algorithms: CPU devices alone would
 * ignore it, so it is refused there like --tf32; with --devices auto it
 * applies wherever that finds GPUs, and a machine where it found none is
 * told so. */
static bg_status_t check_conv_workspace(const bg_placement_t *p) {
    if (!p->conv_workspace_given) return BG_OK;
    for (int d = 0; d < p->devices.count; d++)
        if (p->devices.devices[d].kind == BG_DEVICE_CUDA) return BG_OK;
    if (strcmp(p->devices_text, "auto") == 0) {
        fprintf(stderr, "note: --conv-workspace changes nothing here: --devices auto found no GPU "
                        "and took CPU cores, whose convolutions' scratch the model fixes\n");
        return BG_OK;
    }
    char words[128];
    return bg_error_set(BG_ERR_INVALID,
                        "--conv-workspace applies to CUDA devices only; this run's devices are "
                        "CPU cores (%s), whose convolutions' scratch (im2col) the model fixes",
                        bg_placement_device_words(p, words, sizeof words));
}

/* --devices auto on a topology file: the GPUs CUDA would number there
 * (bg_topology_cuda_numbers: gaps included, where the topology hides one
 * from CUDA), as a list ("cuda:0,cuda:2") in `buf`. */
static const char *auto_gpus(const bg_topology_t *topo, char *buf, size_t size) {
    int cuda[BG_MAX_DEVICES];
    const int count = bg_topology_cuda_numbers(topo, cuda, BG_MAX_DEVICES);
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%scuda:%d", i > 0 ? "," : "", cuda[i]);
    return count > 0 ? buf : "auto";
}

/* --schedule auto with --chunks V > 1 and a --split: the split's stages
 * say which schedules may run it, and a note says which are left out.
 * V stages a device (K x V - 1 boundaries): interleaved alone, as the
 * search then tries. One a device (K - 1): the others, --chunks dropped.
 * Any other count is refused by the check that follows. */
static void note_auto_split(bg_placement_t *p) {
    const int stages = bg_placement_stage_count(p), devices = stages / p->chunks;
    if (p->split_count == stages - 1)
        fprintf(stderr,
                "note: --split gives %d boundar%s, for --chunks %d's %d stages: --schedule auto "
                "tries interleaved alone (gpipe, 1f1b and zb-h1 run a stage a device, which "
                "takes %d boundar%s)\n",
                p->split_count, p->split_count == 1 ? "y" : "ies", p->chunks, stages, devices - 1,
                devices == 2 ? "y" : "ies");
    else if (p->split_count == devices - 1) {
        fprintf(stderr,
                "note: --split gives %d boundar%s, a stage a device: --schedule auto leaves out "
                "interleaved (--chunks %d's %d stages take %d boundaries)\n",
                p->split_count, p->split_count == 1 ? "y" : "ies", p->chunks, stages, stages - 1);
        p->chunks = 1;
    }
}

/* Where the model has no room for interleaved's K x V stages and other
 * schedules may run instead (--schedule auto, a sweep's list): interleaved
 * is left out, said why on stderr and in p->interleaved_out, and the rest
 * runs one chunk a device (until 2026-12-05 the command was refused). */
static void leave_interleaved_out(bg_placement_t *p, const bg_model_spec_t *spec) {
    if (p->chunks < 2 || !(p->auto_schedule || p->other_schedules) || p->split_count > 0) return;
    const int stages = bg_placement_stage_count(p);
    char why[64];
    snprintf(why, sizeof why, " (%d devices x --chunks %d)", stages / p->chunks, p->chunks);
    const bg_status_t counted =
        stages > spec->num_layers
            ? bg_error_set(BG_ERR_INVALID, "%d stages%s but the model has only %d layer%s", stages,
                           why, spec->num_layers, spec->num_layers == 1 ? "" : "s")
            : bg_model_spec_check_stage_count(spec, stages, why);
    if (counted == BG_OK) return;
    snprintf(p->interleaved_out, sizeof p->interleaved_out, "%s", bg_error_message());
    bg_error_clear();
    fprintf(stderr, "note: %s leaves interleaved out: %s\n",
            p->auto_schedule ? "--schedule auto" : "the sweep", p->interleaved_out);
    p->chunks = 1;
}

bg_status_t bg_placement_resolve(bg_placement_t *p, const bg_model_spec_t *spec,
                                 const bg_topology_t *topo) {
    const char *text = p->devices_text;
    char implied[32];
    if (!p->auto_schedule)
        BG_CHECK(bg_placement_check_chunks(
            p->schedule, p->chunks, "give --chunks 2 or more, or --schedule 1f1b for that order"));
    /* --stages K without --devices means K CPU devices. */
    if (p->stages > 0 && strcmp(text, "cpu") == 0) {
        snprintf(implied, sizeof implied, "cpu:%d", p->stages);
        text = implied;
    }
    int gpus = p->topology_path != NULL ? bg_topology_cuda_count(topo) : bg_device_text_gpus(text);
    /* Where auto finds no GPU it takes the CPU's cores, but not in
     * silence: why (a backend that cannot be loaded, CUDA's own answer, a
     * build without CUDA). */
    if (p->topology_path == NULL && strcmp(text, "auto") == 0 && gpus == 0) {
        if (!bg_cuda_built())
            fprintf(stderr, "note: --devices auto takes CPU cores: this brigade was built "
                            "without its CUDA backend\n");
        else if (bg_cuda_absent_reason() != NULL)
            fprintf(stderr, "note: --devices auto takes CPU cores: %s\n", bg_cuda_absent_reason());
        else
            fprintf(stderr, "note: --devices auto takes CPU cores: CUDA sees no GPU%s%s\n",
                    bg_cuda_no_device_reason() != NULL ? ": " : "",
                    bg_cuda_no_device_reason() != NULL ? bg_cuda_no_device_reason() : "");
    }
    char named[BG_MAX_DEVICES * 12];
    if (p->topology_path != NULL && strcmp(text, "auto") == 0 && gpus > 0)
        text = auto_gpus(topo, named, sizeof named);
    const bg_status_t st =
        bg_device_list_parse_on(text, bg_topology_core_count(topo), gpus, &p->devices);
    if (st != BG_OK && text == implied) {
        /* The user wrote --stages, not the --devices it implies. */
        char why[256];
        snprintf(why, sizeof why, "%s", bg_error_message());
        return bg_error_set(st, "--stages %d: without --devices that means %s; %s", p->stages,
                            implied, why);
    }
    BG_CHECK(st);
    if (p->stages > p->devices.count)
        return bg_error_set(BG_ERR_INVALID,
                            "--stages %d but --devices %s gives %d device%s (use --chunks for "
                            "several stages per device)",
                            p->stages, p->devices_text, p->devices.count,
                            p->devices.count == 1 ? "" : "s");
    /* A split wrong in itself is said so first: fixing the device count
     * would not make it right. */
    if (p->split_count > 0)
        BG_CHECK(bg_model_spec_check_split(spec, p->split_count + 1, p->split, NULL));
    if (p->auto_schedule && p->chunks > 1 && p->split_count > 0) note_auto_split(p);
    leave_interleaved_out(p, spec);
    const int stages = bg_placement_stage_count(p);
    if (p->split_count > 0 && p->split_count != stages - 1) {
        /* What would give the split's stages, with one chunk a device, where
         * the model has layers for them (else the split itself is wrong). */
        const int want = p->split_count + 1;
        char hint[96] = "";
        if (p->chunks == 1 && want <= spec->num_layers && want <= p->devices.count)
            snprintf(hint, sizeof hint, " (for %d stages, --stages %d)", want, want);
        else if (p->chunks == 1 && want <= spec->num_layers && p->devices.count > 0 &&
                 p->devices.devices[0].kind == BG_DEVICE_CPU)
            snprintf(hint, sizeof hint, " (for %d stages, --devices cpu:%d%s)", want, want,
                     p->stages > 0 ? " without --stages" : "");
        if (p->auto_schedule && p->chunks > 1)
            return bg_error_set(BG_ERR_INVALID,
                                "--split gives %d boundar%s; --schedule auto with --chunks %d on "
                                "%d devices takes %d (a stage a device: gpipe, 1f1b, zb-h1) or %d "
                                "(--chunks %d a device: interleaved)",
                                p->split_count, p->split_count == 1 ? "y" : "ies", p->chunks,
                                stages / p->chunks, stages / p->chunks - 1, stages - 1, p->chunks);
        return bg_error_set(BG_ERR_INVALID, "--split gives %d boundar%s; %d stage%s need%s %d%s",
                            p->split_count, p->split_count == 1 ? "y" : "ies", stages,
                            stages == 1 ? "" : "s", stages == 1 ? "s" : "", stages - 1, hint);
    }
    if (stages > spec->num_layers && p->chunks > 1)
        return bg_error_set(BG_ERR_INVALID,
                            "%d stages (%d devices x --chunks %d) but the model has only %d "
                            "layer%s",
                            stages, stages / p->chunks, p->chunks, spec->num_layers,
                            spec->num_layers == 1 ? "" : "s");
    /* All the devices given make a stage each, unless --stages says: the
     * hint names the most stages the model can be cut into. */
    const int places = bg_model_spec_stage_places(spec);
    char hint[80] = "";
    if (p->stages == 0 && p->chunks == 1 && stages > places)
        snprintf(hint, sizeof hint, " (--stages %d uses %d of the %d devices)", places, places,
                 p->devices.count);
    if (stages > spec->num_layers) {
        char outside[80] = "";
        if (places < spec->num_layers)
            snprintf(outside, sizeof outside,
                     " and %d places to start a stage (outside residual blocks)", places);
        return bg_error_set(BG_ERR_INVALID, "%d stages but the model has only %d layer%s%s%s",
                            stages, spec->num_layers, spec->num_layers == 1 ? "" : "s", outside,
                            hint);
    }
    /* Residual blocks leave fewer places to cut: refused here, once, not
     * at each micro-batch count or schedule a search or sweep tries. */
    if (p->split_count == 0) { /* a split was checked above */
        char why[64] = "";
        if (p->chunks > 1)
            snprintf(why, sizeof why, " (%d devices x --chunks %d)", stages / p->chunks, p->chunks);
        const bg_status_t counted = bg_model_spec_check_stage_count(spec, stages, why);
        if (counted != BG_OK) return bg_error_suffix(counted, "%s", hint);
    }
    return check_conv_workspace(p);
}

/* Marks in keep[] the devices of `list` that K stages may take: as many
 * GPUs as there are (K at most), then no GPU more of the stages than it
 * must. Virtual devices of one GPU share its arithmetic
 * (bg_placement_cost_devices), and the split gives each device work for its
 * speed, so the GPUs used are the step's arithmetic however many stages
 * each carries: a GPU left out is arithmetic lost (fashion_cnn on
 * two-socket-8-gpu.xml, a step of 0.544 ms simulated on cuda:0x2,cuda:4x2,
 * a socket apart, against 0.651 on cuda:0x4; mlp_balanced 0.830 ms on
 * cuda:0,cuda:1,cuda:2x2 against 0.989 on cuda:0x2,cuda:2x2). With K at
 * most the GPUs, each GPU's first device, of which the links choose K.
 * Else of each GPU's virtual devices the first c - 1 in the order given, c
 * the least that leaves K, and the c-th of as many GPUs as make K: those
 * of most `memory` first (so that the smallest share is the largest), then
 * in the order given. CPU devices likewise share cores (cpu:N runs on core
 * N mod cores; a list is of one kind): with K at most the cores, each
 * core's first device (until 2026-12-06 every CPU device was kept, and the
 * links' choice could put two stages on a core and leave others idle, which
 * the planner, counting a core per device, took for faster). Returns how
 * many are kept. */
static int share_least(const bg_device_list_t *list, const double *memory, int k, int *keep) {
    const int n = list->count;
    int rank[BG_MAX_DEVICES]; /* a device's place among its GPU's or core's, from 0 */
    for (int d = 0; d < n; d++) {
        rank[d] = 0;
        for (int e = 0; e < d; e++)
            rank[d] += list->devices[e].kind == list->devices[d].kind &&
                       list->devices[e].physical == list->devices[d].physical;
    }
    int c = 1, kept = 0;
    for (;; c++) { /* ends: with c past every rank, every device is kept */
        kept = 0;
        for (int d = 0; d < n; d++) kept += rank[d] < c;
        if (kept >= k) break;
    }
    kept = 0;
    for (int d = 0; d < n; d++) {
        keep[d] = rank[d] < (c > 1 ? c - 1 : 1);
        kept += keep[d];
    }
    while (c > 1 && kept < k) { /* the c-th device of one more GPU */
        int best = -1;
        for (int d = 0; d < n; d++)
            if (rank[d] == c - 1 && !keep[d] && (best < 0 || memory[d] > memory[best])) best = d;
        keep[best] = 1;
        kept++;
    }
    return kept;
}

bg_status_t bg_placement_choose(bg_placement_t *p, const bg_device_links_t *all,
                                bg_device_links_t **chosen) {
    const int listed = p->devices.count, k = p->stages > 0 ? p->stages : listed;
    int keep[BG_MAX_DEVICES], index[BG_MAX_DEVICES]; /* index: the kept devices' places */
    double gpu_memory[BG_MAX_DEVICES];
    for (int d = 0; d < listed; d++) /* CPU devices all 0: the order given */
        gpu_memory[d] = (double)all->memory_bytes[d];
    const int n = share_least(&p->devices, gpu_memory, k, keep);
    for (int d = 0, i = 0; d < listed; d++)
        if (keep[d]) index[i++] = d;
    double *speed = malloc(sizeof(double) * (size_t)(n * n));
    double *memory = malloc(sizeof(double) * (size_t)n);
    int *order = malloc(sizeof(int) * (size_t)n);
    bg_status_t st = BG_OK;
    if (speed == NULL || memory == NULL || order == NULL) {
        st = bg_error_set(BG_ERR_NOMEM, "out of memory choosing %d devices", n);
        goto done;
    }
    for (int a = 0; a < n; a++) {
        memory[a] = gpu_memory[index[a]];
        for (int b = 0; b < n; b++)
            speed[a * n + b] = all->link[index[a] * listed + index[b]].bytes_per_s;
    }
    /* Of the chains linked alike, picking K of them, the one whose smallest
     * device has the most memory (device_order.h). */
    BG_CHECK_GOTO(bg_device_choose_sized(speed, memory, n, k, p->chunks > 1, order, NULL), st,
                  done);
    for (int i = 0; i < k; i++) order[i] = index[order[i]];
    BG_CHECK_GOTO(bg_device_links_select(all, order, k, chosen), st, done);
    bg_device_list_t picked = {.count = k};
    for (int i = 0; i < k; i++) picked.devices[i] = p->devices.devices[order[i]];
    p->listed = p->devices;
    p->devices = picked;
done:
    free(speed);
    free(memory);
    free(order);
    return st;
}

void bg_placement_use_path(bg_placement_t *p) {
    p->chunks = 1;
    if (p->path_links == NULL) return;
    p->devices = p->path;
    p->links = p->path_links;
}

int bg_placement_gpu_sharing(const bg_device_list_t *list, int physical) {
    int sharing = 0;
    for (int e = 0; e < list->count; e++)
        sharing += list->devices[e].kind == BG_DEVICE_CUDA && list->devices[e].physical == physical;
    return sharing > 0 ? sharing : 1;
}

size_t bg_placement_context_bytes(const bg_placement_t *p) {
    return p->topology_path != NULL ? BG_CUDA_CONTEXT_BYTES : 0;
}

/* What a GPU of `gpu_bytes` (as the links give it) leaves to brigade's
 * buffers beside the context, 0 at least. */
static size_t usable_gpu_bytes(const bg_placement_t *p, size_t gpu_bytes) {
    const size_t context = bg_placement_context_bytes(p);
    return gpu_bytes > context ? gpu_bytes - context : 0;
}

size_t bg_placement_largest_gpu(const bg_placement_t *p) {
    if (p->device_mem != 0 || p->gpus_links == NULL) return 0;
    size_t most = 0;
    for (int d = 0; d < p->gpus.count && d < p->gpus_links->count; d++) {
        const size_t usable = usable_gpu_bytes(p, p->gpus_links->memory_bytes[d]);
        const size_t stage =
            usable > BG_CUDA_CUBLAS_WORKSPACE_BYTES ? usable - BG_CUDA_CUBLAS_WORKSPACE_BYTES : 0;
        if (stage > most) most = stage;
    }
    return most;
}

/* The host's memory, which the CPU devices share; 0 when not known. An
 * XML file's machine: its NUMA nodes' (none known where the file does not
 * say). This machine: what the system gives processes, which in a
 * container or a virtual machine can differ from what its NUMA nodes
 * report. */
static uint64_t host_memory_bytes(const bg_placement_t *p) {
    if (p->topology_path != NULL) return p->links != NULL ? p->links->host_memory_bytes : 0;
    return bg_host_memory_bytes();
}

void bg_placement_cost_devices(const bg_placement_t *p, int count, int host_share,
                               bg_cost_device_t *out) {
    const bg_device_list_t *list = &p->devices;
    const uint64_t host = host_memory_bytes(p);
    /* Devices past the list (the advice's "more devices") are like the
     * last one: more cores, more GPUs of its kind, or, where its GPU
     * already holds several virtual devices, more of those, which then
     * share that GPU with the listed ones. */
    const bg_device_t *last = &list->devices[list->count - 1];
    const int extra = count > list->count ? count - list->count : 0;
    const int extra_virtual =
        last->kind == BG_DEVICE_CUDA && bg_placement_gpu_sharing(list, last->physical) > 1 ? extra
                                                                                           : 0;
    for (int d = 0; d < count; d++) {
        const bg_device_t *dev = &list->devices[d < list->count ? d : list->count - 1];
        bg_cost_device_t c = BG_COST_DEVICE_CPU_CORE_INIT;
        if (d < list->count)
            snprintf(c.name, sizeof c.name, "%s", dev->name);
        else if (extra_virtual) /* numbered on its GPU after the listed ones */
            snprintf(c.name, sizeof c.name, "cuda:%d/%d", dev->physical,
                     bg_placement_gpu_sharing(list, dev->physical) + d - list->count);
        else
            snprintf(c.name, sizeof c.name, "%s:%d", dev->kind == BG_DEVICE_CPU ? "cpu" : "cuda",
                     d);
        c.memory_bytes = p->device_mem;
        if (dev->kind == BG_DEVICE_CUDA) {
            /* Virtual devices of one GPU share its arithmetic and its memory
             * bandwidth: each gets its share of both. */
            const int listed = bg_placement_gpu_sharing(list, dev->physical);
            const int sharing = listed + (dev->physical == last->physical ? extra_virtual : 0);
            /* Assumed: CUDA reports no throughput; profiles are CPU-only. */
            c.flops_per_s = 10e12 / sharing;
            /* The host's work, which bounds small steps on a GPU: fitted
             * to the medians of eleven gpu-check runs on an H200
             * (docs/cuda.md, "What the simulator assumes of a GPU"). */
            c.op_overhead_s = 14e-6;
            c.update_overhead_s = 110e-6;
            /* Assumed too: a data-centre GPU streams 2 to 5 TB/s from its own
             * memory; 1 TB/s leaves room for older ones. Virtual devices'
             * updates run at once, after the barrier. */
            c.memory_bytes_per_s = 1e12 / sharing;
            /* cuDNN's choice, within the limit, is known only on the GPU. */
            c.own_conv_workspace = 1;
            c.conv_workspace_bytes = p->conv_workspace;
            /* The slots of the channels into it, from another CUDA device
             * (a list mixing CPU and CUDA devices is refused), lie in its
             * arena. */
            c.channels_in_arena = 1;
            c.elementwise_memory_bound = 1;
            c.weight_bytes_per_s = c.memory_bytes_per_s; /* weights from its own memory */
            /* The links hold each device's GPU's memory: the device has
             * its share, less the cuBLAS workspace its backend makes beside
             * its stages. A given --device-mem is the stages' own. */
            const int known = d < list->count ? d : list->count - 1;
            if (c.memory_bytes == 0 && p->links != NULL && known < p->links->count &&
                p->links->memory_bytes[known] > 0) {
                /* A GPU known to hold no more than its context holds nothing
                 * for the stages: a byte, not 0 (which is no limit). */
                const size_t share =
                    usable_gpu_bytes(p, p->links->memory_bytes[known]) / (size_t)sharing;
                c.memory_bytes = share > BG_CUDA_CUBLAS_WORKSPACE_BYTES
                                     ? share - BG_CUDA_CUBLAS_WORKSPACE_BYTES
                                     : 1;
            }
        } else if (c.memory_bytes == 0 && host_share && host > 0) {
            /* A share of less than a byte is a byte, not 0 (no limit). */
            const uint64_t share = host / (uint64_t)count;
            c.memory_bytes = share > 0 ? (size_t)share : 1;
        }
        out[d] = c;
    }
}

void bg_placement_plan_request(const bg_placement_t *p, const bg_model_spec_t *spec, int64_t batch,
                               const bg_optimizer_config_t *optimizer, const bg_profile_t *profile,
                               int host_share, bg_cost_device_t *device, bg_plan_request_t *out) {
    bg_plan_request_t r = BG_PLAN_REQUEST_INIT;
    r.spec = spec;
    r.schedule = p->schedule;
    r.devices = p->devices.count;
    r.chunks = p->chunks;
    r.microbatches = p->microbatches;
    r.batch = batch;
    r.optimizer = *optimizer;
    r.recompute = p->recompute;
    r.split = p->split_count > 0 ? p->split : NULL;
    bg_placement_cost_devices(p, r.devices, host_share, device);
    r.device = device;
    if (profile != NULL) r.link = bg_plan_profile_link(profile);
    if (p->links != NULL && p->links->count == r.devices) r.links = p->links->link;
    r.profile = profile;
    *out = r;
}

void bg_placement_note_shared_cores(const bg_placement_t *p, int cores) {
    /* The cores that run two devices or more: each counted at its second. */
    int shared = 0;
    for (int a = 0; a < p->devices.count; a++) {
        int before = 0;
        for (int b = 0; b < a; b++)
            before += p->devices.devices[a].kind == BG_DEVICE_CPU &&
                      p->devices.devices[b].kind == BG_DEVICE_CPU &&
                      p->devices.devices[a].physical == p->devices.devices[b].physical;
        shared += before == 1;
    }
    if (shared > 0)
        fprintf(stderr,
                "note: %d CPU devices on %d core%s (cpu:N runs on core N mod %d): %d core%s "
                "run%s two or more; the planner and the simulator count a core per device, so "
                "their figures for this placement are optimistic\n",
                p->devices.count, cores, cores == 1 ? "" : "s", cores, shared,
                shared == 1 ? "" : "s", shared == 1 ? "s" : "");
}

/* Notes a GPU whose memory nothing gives (a --topology file without
 * hwloc's CUDA devices, which hold it) when no --device-mem does either:
 * its stages' memory is then not checked at all. */
static void note_unknown_gpu_memory(const bg_placement_t *p) {
    if (p->device_mem != 0 || p->links == NULL) return;
    char names[256] = "";
    size_t at = 0;
    int unknown = 0, shown = 0;
    for (int d = 0; d < p->devices.count && d < p->links->count; d++) {
        const bg_device_t *dev = &p->devices.devices[d];
        if (dev->kind != BG_DEVICE_CUDA || p->links->memory_bytes[d] != 0) continue;
        unknown++;
        const int n = snprintf(names + at, sizeof names - at, "%s%s", shown ? ", " : "", dev->name);
        if (n > 0 && at + (size_t)n + 32 < sizeof names) { /* room for " and N more" */
            at += (size_t)n;
            shown++;
        } else {
            names[at] = '\0';
        }
    }
    if (unknown == 0) return;
    if (unknown > shown) snprintf(names + at, sizeof names - at, " and %d more", unknown - shown);
    fprintf(stderr,
            "note: nothing gives the memory of %s (the topology has no hwloc CUDA device for %s, "
            "which would), so the plan does not check %s: give --device-mem\n",
            names, unknown == 1 ? "it" : "them", unknown == 1 ? "it" : "theirs");
}

void bg_placement_note_device_mem(const bg_placement_t *p) {
    note_unknown_gpu_memory(p);
    if (p->device_mem == 0) return;
    const double gib = 1024.0 * 1024 * 1024;
    /* CPU devices share the host's memory. */
    int cpus = 0;
    for (int d = 0; d < p->devices.count; d++) cpus += p->devices.devices[d].kind == BG_DEVICE_CPU;
    const uint64_t host = host_memory_bytes(p);
    const char *whose = p->topology_path != NULL ? "the --topology machine's" : "the host's";
    if (cpus == 1 && host > 0 && (double)p->device_mem > (double)host)
        fprintf(stderr,
                "note: --device-mem %.2f GiB is more than %s %.2f GiB: the plan may fit "
                "where the machine cannot\n",
                (double)p->device_mem / gib, whose, (double)host / gib);
    else if (cpus > 1 && host > 0 && (double)p->device_mem * cpus > (double)host)
        fprintf(stderr,
                "note: --device-mem gives each of the %d CPU devices %.2f GiB, %.2f GiB in all, "
                "more than %s %.2f GiB that they share: the plan may fit where the "
                "machine cannot\n",
                cpus, (double)p->device_mem / gib, (double)p->device_mem * cpus / gib, whose,
                (double)host / gib);
    if (p->links == NULL) return;
    /* A given size is the stages' own; each device's cuBLAS workspace
     * comes beside it, and on an XML topology's GPU the CUDA context
     * (docs/cuda.md). */
    const double beside = (double)BG_CUDA_CUBLAS_WORKSPACE_BYTES;
    for (int d = 0; d < p->devices.count && d < p->links->count; d++) {
        const bg_device_t *dev = &p->devices.devices[d];
        const size_t gpu = p->links->memory_bytes[d];
        if (dev->kind != BG_DEVICE_CUDA || gpu == 0) continue;
        const int sharing = bg_placement_gpu_sharing(&p->devices, dev->physical);
        if (((double)p->device_mem + beside) * sharing <= (double)usable_gpu_bytes(p, gpu))
            continue;
        char context[64] = "";
        if (bg_placement_context_bytes(p) > 0)
            snprintf(context, sizeof context, " less its %zu MiB CUDA context",
                     bg_placement_context_bytes(p) >> 20);
        if (sharing > 1)
            fprintf(stderr,
                    "note: --device-mem gives each of the %d devices on GPU %d %.2f GiB, %.2f GiB "
                    "in all with their cuBLAS workspaces (%zu MiB each), more than its %.2f "
                    "GiB%s: the plan may fit where the GPU cannot\n",
                    sharing, dev->physical, (double)p->device_mem / gib,
                    ((double)p->device_mem + beside) * sharing / gib,
                    BG_CUDA_CUBLAS_WORKSPACE_BYTES >> 20, (double)gpu / gib, context);
        else
            fprintf(stderr,
                    "note: --device-mem %.2f GiB and the %zu MiB cuBLAS workspace beside it are "
                    "more than %s's %.2f GiB%s: the plan may fit where the GPU cannot\n",
                    (double)p->device_mem / gib, BG_CUDA_CUBLAS_WORKSPACE_BYTES >> 20, dev->name,
                    (double)gpu / gib, context);
        return; /* once, for the first such GPU: the note is the same for any other */
    }
}

void bg_placement_describe_devices(const bg_placement_t *p, FILE *out) {
    bg_device_list_print(&p->devices, out);
}

void bg_placement_describe(const bg_placement_t *p, int forward_only, FILE *out) {
    int stages = p->devices.count * p->chunks;
    fprintf(out, "%d stage%s on ", stages, stages == 1 ? "" : "s");
    bg_placement_describe_devices(p, out);
    fprintf(out, "; %s, %d micro-batch%s%s",
            forward_only ? "forwards only" : bg_schedule_kind_name(p->schedule), p->microbatches,
            p->microbatches == 1 ? "" : "es", p->recompute ? ", recompute" : "");
    if (p->chunks > 1) fprintf(out, ", %d chunks per device", p->chunks);
}

int bg_placement_link_hops(const bg_placement_t *p) {
    const int k = p->links != NULL ? p->links->count : 0;
    if (k < 2) return 0;
    return p->chunks > 1 && k > 2 ? k : k - 1;
}

void bg_placement_describe_links(const bg_placement_t *p, FILE *out) {
    const bg_device_links_t *l = p->links;
    const int hops = bg_placement_link_hops(p);
    if (hops == 0) return;
    const int k = l->count;
    int slowest = -1;
    fprintf(out, "links: %s", p->devices.devices[0].name);
    for (int d = 1; d <= hops; d++) {
        int at = (d - 1) * k + d % k;
        fprintf(out, " -%s- %s%s", l->word[at], d == k ? "back to " : "",
                p->devices.devices[d % k].name);
        if (slowest < 0 || l->link[at].bytes_per_s < l->link[slowest].bytes_per_s) slowest = at;
    }
    fprintf(out, "; slowest %s at %.1f GB/s\n", l->word[slowest],
            l->link[slowest].bytes_per_s / 1e9);
}

int bg_placement_all_of_kind(const bg_placement_t *p, bg_device_kind_t kind) {
    for (int d = 0; d < p->devices.count; d++)
        if (p->devices.devices[d].kind != kind) return 0;
    return p->devices.count > 0;
}
