/* brigade plan MODEL [options]: cuts a model into stages with the planner
 * (stages/partition.h) or a given --split, and prints each stage's layers,
 * device, predicted time and memory against capacity, the predicted step
 * time and the bubble. Refuses (exit 2) what does not fit, saying which
 * stage overflows by how much and which change would make it fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "partition.h"
#include "placement.h"
#include "timeline.h"
#include "topology.h"

static const char help[] =
    "usage: brigade plan MODEL [options]\n"
    "\n"
    "Plans how MODEL (a model spec file) is cut into stages, without training:\n"
    "the layers each stage holds, its device, its predicted compute and transfer\n"
    "time per step, its memory against the device's capacity, and the predicted\n"
    "step time and bubble. Without --split, the planner picks among all splits\n"
    "into contiguous stages the one whose slowest stage (compute plus its own\n"
    "sends) is fastest while every stage fits; it is exact, not greedy.\n"
    "\n"
    "The figures come from an analytic cost model. Forward time is the layer's\n"
    "FLOPs over the device's speed plus a small cost per op; backward is twice\n"
    "that for layers with weights (dX and dW) and once for the others;\n"
    "--recompute adds a forward. A CPU device is one core at 50 GFLOP/s (what\n"
    "brigade measures on the origin CNN); activations cross between CPU\n"
    "devices at 5 GB/s. Memory is predicted exactly as the stages allocate it:\n"
    "parameters, gradients, optimizer state (adam 2x the parameters, sgd none,\n"
    "sgd with momentum 1x), the stash of every micro-batch a stage holds at\n"
    "once (its schedule decides how many: gpipe all M, 1f1b at most S - s),\n"
    "gradient buffers, channel rings and convolution workspace.\n"
    "\n"
    "plan:\n"
    "  --device-mem SIZE  memory each device may use: bytes, or a number with K,\n"
    "                     M, G or T (powers of 1024): 1000000, 512M, 8G, 1.5G.\n"
    "                     Default: host memory shared by the CPU devices, and\n"
    "                     no limit for CUDA devices (this build cannot ask them).\n"
    "                     With --chunks V each stage may use 1/V of its device\n"
    "  --batch B          samples per optimizer step (default 64)\n"
    "  --optimizer NAME   adam (default) or sgd\n"
    "  --momentum X       sgd momentum (default 0; > 0 keeps a velocity buffer)\n"
    "  --json             print the plan as JSON; each stage has the keys of\n"
    "                     'brigade train --metrics' stages (layers, device,\n"
    "                     peak_bytes, peak_by_category, ...) plus predicted_ms\n"
    "\n%s"
    "  (with plan, leaving out --split lets the planner choose)\n"
    "\n"
    "When nothing fits, plan prints its best attempt, names the stage that\n"
    "overflows and by how many bytes, tries --recompute, 1f1b, sgd, other\n"
    "micro-batch counts and more devices, lists those that fit, and exits 2.\n"
    "\n"
    "examples:\n"
    "  brigade plan examples/fashion_cnn.model --devices cpu:2\n"
    "  brigade plan examples/fashion_cnn.model --stages 4 --schedule gpipe --microbatches 8\n"
    "  brigade plan examples/fashion_cnn.model --devices cpu:2 --device-mem 20M\n"
    "      (does not fit; says which stage overflows and that --microbatches 4 fits)\n"
    "  brigade plan examples/fashion_cnn.model --devices cpu:2 --split 4 --json\n";

typedef struct plan_options {
    const char *model;
    bg_placement_t placement;
    int64_t batch;
    bg_optimizer_config_t optimizer;
    size_t device_mem; /* 0: default */
    int json;
} plan_options_t;

/* What one plan is asked: the options, or a variant of them. */
typedef struct plan_request {
    const bg_model_spec_t *spec;
    const plan_options_t *o;
    int devices; /* K; beyond the listed devices, copies of the last */
    bg_schedule_kind_t schedule;
    int microbatches, recompute;
    bg_optimizer_config_t optimizer;
    const int *split; /* S - 1 boundaries or NULL: the planner */
} plan_request_t;

typedef struct plan {
    bg_cost_model_t *model;
    bg_cost_device_t *device;
    int *stash_slots;
    bg_partition_config_t config;
    bg_partition_t *partition;
    double step_s, bubble_theory;
} plan_t;

static const double mib = 1024.0 * 1024.0;

/* "512M", "1.5G", "1000000": bytes, suffixes in powers of 1024. */
static bg_status_t parse_size(const char *option, const char *text, size_t *out) {
    char *end = NULL;
    double value = (text[0] >= '0' && text[0] <= '9') || text[0] == '.' ? strtod(text, &end) : -1;
    double scale = 1;
    if (end != NULL && *end != '\0') {
        const char *units = "KMGT";
        const char *unit = strchr(units, end[0] >= 'a' ? end[0] - 32 : end[0]);
        if (unit != NULL) {
            for (const char *u = units; u <= unit; u++) scale *= 1024;
            end++;
            if (strcmp(end, "B") == 0 || strcmp(end, "iB") == 0) end += strlen(end);
        }
    }
    if (end == NULL || *end != '\0' || !(value * scale >= 1) || value * scale > 9.0e18)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: expected a size like 1000000, 512M, 8G or 1.5G, got '%s'", option,
                            text);
    *out = (size_t)(value * scale);
    return BG_OK;
}

static bg_status_t parse_args(int argc, char **argv, plan_options_t *o, int *show_help) {
    bg_placement_init(&o->placement);
    o->batch = 64;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *show_help = 1;
            return BG_OK;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (o->model != NULL)
                return bg_error_set(BG_ERR_INVALID, "more than one MODEL given ('%s', '%s')",
                                    o->model, arg);
            o->model = arg;
            continue;
        }
        int placement = bg_placement_is_option(arg);
        if (placement == 2 || strcmp(arg, "--json") == 0) {
            if (placement == 2)
                BG_CHECK(bg_placement_apply(&o->placement, arg, NULL));
            else
                o->json = 1;
            continue;
        }
        int known = placement || strcmp(arg, "--device-mem") == 0 || strcmp(arg, "--batch") == 0 ||
                    strcmp(arg, "--optimizer") == 0 || strcmp(arg, "--momentum") == 0;
        if (!known) return bg_error_set(BG_ERR_INVALID, "unknown option '%s'", arg);
        if (i + 1 >= argc) return bg_error_set(BG_ERR_INVALID, "%s needs a value", arg);
        const char *v = argv[++i];
        if (placement)
            BG_CHECK(bg_placement_apply(&o->placement, arg, v));
        else if (strcmp(arg, "--device-mem") == 0)
            BG_CHECK(parse_size(arg, v, &o->device_mem));
        else if (strcmp(arg, "--batch") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, 1 << 20, &o->batch));
        else if (strcmp(arg, "--optimizer") == 0)
            BG_CHECK(bg_optimizer_kind_parse(v, &o->optimizer.kind));
        else
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1, &o->optimizer.sgd.momentum));
    }
    if (o->model == NULL) return bg_error_set(BG_ERR_INVALID, "no MODEL given");
    return BG_OK;
}

/* Device d of a request: the listed one, or (more devices) a copy of the
 * last listed one named after its index. */
static bg_cost_device_t describe_device(const plan_request_t *r, int d) {
    const bg_device_list_t *list = &r->o->placement.devices;
    const bg_device_t *dev = &list->devices[d < list->count ? d : list->count - 1];
    bg_cost_device_t out = BG_COST_DEVICE_CPU_CORE_INIT;
    if (d < list->count)
        snprintf(out.name, sizeof out.name, "%s", dev->name);
    else
        snprintf(out.name, sizeof out.name, "%s:%d", dev->kind == BG_DEVICE_CPU ? "cpu" : "cuda",
                 d);
    out.memory_bytes = r->o->device_mem;
    if (dev->kind == BG_DEVICE_CUDA) {
        out.flops_per_s = 10e12; /* an assumed mid-range GPU; no CUDA backend to ask */
        out.op_overhead_s = 10e-6;
    } else if (out.memory_bytes == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0)
            out.memory_bytes = (size_t)pages * (size_t)page / (size_t)r->devices;
    }
    return out;
}

static void plan_free(plan_t *p) {
    bg_partition_destroy(p->partition);
    bg_cost_model_destroy(p->model);
    free(p->device);
    free(p->stash_slots);
    memset(p, 0, sizeof *p);
}

static bg_status_t plan_make(const plan_request_t *r, plan_t *p) {
    const plan_options_t *o = r->o;
    const int k = r->devices, v = o->placement.chunks, stages = k * v;
    memset(p, 0, sizeof *p);
    if (r->microbatches > o->batch)
        return bg_error_set(BG_ERR_INVALID,
                            "%d micro-batches of a %lld-sample batch would "
                            "leave some empty",
                            r->microbatches, (long long)o->batch);
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.kind = r->schedule;
    sc.devices = k;
    sc.chunks = v;
    sc.microbatches = r->microbatches;
    bg_schedule_t *schedule = NULL;
    BG_CHECK(bg_schedule_create(&sc, &schedule));
    bg_status_t st = BG_OK;
    p->stash_slots = calloc((size_t)stages, sizeof *p->stash_slots);
    p->device = calloc((size_t)k, sizeof *p->device);
    BG_ALLOC_CHECK_GOTO(p->stash_slots, st, done);
    BG_ALLOC_CHECK_GOTO(p->device, st, done);
    for (int s = 0; s < stages; s++) p->stash_slots[s] = bg_schedule_stash_slots(schedule, s);
    for (int d = 0; d < k; d++) p->device[d] = describe_device(r, d);
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = r->spec;
    cc.batch = o->batch;
    cc.microbatches = r->microbatches;
    cc.optimizer = r->optimizer;
    cc.recompute = r->recompute;
    cc.split_backward = schedule->split_backward;
    BG_CHECK_GOTO(bg_cost_model_create(&cc, &p->model), st, done);
    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = p->model;
    pc.devices = k;
    pc.chunks = v;
    pc.device = p->device;
    pc.stash_slots = p->stash_slots;
    p->config = pc;
    if (r->split != NULL) {
        int first[BG_MAX_STAGES];
        first[0] = 0;
        for (int s = 1; s < stages; s++) first[s] = r->split[s - 1];
        BG_CHECK_GOTO(bg_partition_evaluate(&p->config, first, &p->partition), st, done);
    } else {
        BG_CHECK_GOTO(bg_partition_create(&p->config, &p->partition), st, done);
    }
    p->step_s = bg_partition_step_seconds(p->partition, &p->config);
    p->bubble_theory = bg_schedule_theoretical_bubble(r->schedule, k, r->microbatches, v);
done:
    bg_schedule_destroy(schedule);
    if (st != BG_OK) plan_free(p);
    return st;
}

static double busy_fraction(const plan_t *p, int devices) {
    double busy = 0;
    for (int s = 0; s < p->partition->stages; s++) busy += p->partition->stage[s].seconds;
    int m = bg_cost_model_config(p->model)->microbatches;
    return p->step_s > 0 ? busy * m / (devices * p->step_s) : 1;
}

static int bottleneck_stage(const bg_partition_t *part) {
    int worst = 0;
    for (int s = 1; s < part->stages; s++)
        if (part->stage[s].seconds > part->stage[worst].seconds) worst = s;
    return worst;
}

static void print_table(const plan_t *p, const plan_request_t *r) {
    const bg_partition_t *part = p->partition;
    const int m = r->microbatches;
    printf("%5s  %-9s %-8s %8s %8s %8s %8s %10s %10s %5s %9s %9s %9s %9s\n", "stage", "layers",
           "device", "fwd ms", "bwd ms", "send ms", "busy ms", "peak MiB", "cap MiB", "use",
           "params", "optimizer", "stash", "buffers");
    for (int s = 0; s < part->stages; s++) {
        const bg_partition_stage_t *st = &part->stage[s];
        char layers[32], cap[16], use[16];
        snprintf(layers, sizeof layers, "%d-%d", st->first_layer, st->last_layer - 1);
        snprintf(cap, sizeof cap, "%.2f", (double)st->capacity_bytes / mib);
        snprintf(use, sizeof use, "%.0f%%",
                 100.0 * (double)st->peak_bytes /
                     (double)(st->capacity_bytes ? st->capacity_bytes : 1));
        printf("%5d  %-9s %-8s %8.3f %8.3f %8.3f %8.3f %10.2f %10s %5s %9.2f %9.2f %9.2f %9.2f\n",
               s, layers, p->device[st->device].name, m * st->time.forward * 1e3,
               m * (st->time.backward + st->time.recompute) * 1e3, m * st->send_s * 1e3,
               m * st->seconds * 1e3, (double)st->peak_bytes / mib, st->capacity_bytes ? cap : "-",
               st->capacity_bytes ? use : "-", (double)st->memory.params / mib,
               (double)st->memory.optimizer / mib, (double)st->memory.stash / mib,
               (double)st->memory.buffers / mib);
    }
    printf("\npredicted step: %.3f ms (%.0f samples/s); bottleneck stage %d\n", p->step_s * 1e3,
           p->step_s > 0 ? (double)r->o->batch / p->step_s : 0.0, bottleneck_stage(part));
    printf("bubble: %.1f%% predicted, %.1f%% in theory for equal stages\n",
           100.0 * (1 - busy_fraction(p, r->devices)), 100.0 * p->bubble_theory);
}

static bg_status_t print_json(const plan_t *p, const plan_request_t *r) {
    const bg_partition_t *part = p->partition;
    const int m = r->microbatches;
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory writing JSON");
    cJSON_AddStringToObject(root, "model", r->o->model);
    cJSON_AddStringToObject(root, "optimizer", bg_optimizer_kind_name(r->optimizer.kind));
    cJSON_AddNumberToObject(root, "batch", (double)r->o->batch);
    cJSON_AddStringToObject(root, "schedule", bg_schedule_kind_name(r->schedule));
    cJSON_AddNumberToObject(root, "microbatches", m);
    cJSON_AddNumberToObject(root, "chunks", r->o->placement.chunks);
    cJSON_AddBoolToObject(root, "recompute", r->recompute);
    cJSON_AddBoolToObject(root, "fits", part->fits);
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    for (int s = 0; stages != NULL && s < part->stages; s++) {
        const bg_partition_stage_t *st = &part->stage[s];
        const bg_cost_memory_t *mem = &st->memory;
        cJSON *stage = cJSON_CreateObject();
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
        cJSON_AddNumberToObject(stage, "peak_bytes", (double)st->peak_bytes);
        cJSON_AddNumberToObject(stage, "capacity_bytes", (double)st->capacity_bytes);
        cJSON *peak = cJSON_AddObjectToObject(stage, "peak_by_category");
        cJSON_AddNumberToObject(peak, "params", (double)mem->params);
        cJSON_AddNumberToObject(peak, "grads", (double)mem->grads);
        cJSON_AddNumberToObject(peak, "optimizer", (double)mem->optimizer);
        cJSON_AddNumberToObject(peak, "stash", (double)mem->stash);
        cJSON_AddNumberToObject(peak, "buffers", (double)mem->buffers);
        cJSON_AddNumberToObject(peak, "channels", (double)mem->channels);
        cJSON_AddNumberToObject(peak, "workspace", (double)mem->workspace);
        int slots = p->stash_slots[s] < 1 ? 1 : p->stash_slots[s];
        cJSON_AddNumberToObject(stage, "stash_slots", slots);
        cJSON_AddNumberToObject(stage, "peak_microbatches_in_flight", slots);
        cJSON_AddItemToArray(stages, stage);
    }
    cJSON_AddNumberToObject(root, "step_ms", p->step_s * 1e3);
    cJSON_AddNumberToObject(root, "samples_per_s", p->step_s > 0 ? r->o->batch / p->step_s : 0);
    cJSON_AddNumberToObject(root, "bottleneck_stage", bottleneck_stage(part));
    cJSON_AddNumberToObject(root, "bubble", 1 - busy_fraction(p, r->devices));
    cJSON_AddNumberToObject(root, "bubble_theory", p->bubble_theory);
    if (!part->fits) {
        cJSON *over = cJSON_AddObjectToObject(root, "overflow");
        cJSON_AddNumberToObject(over, "stage", part->worst_stage);
        cJSON_AddNumberToObject(over, "bytes", (double)part->overflow_bytes);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (text == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory writing JSON");
    puts(text);
    free(text);
    return BG_OK;
}

/* Tries one change; prints it if the plan then fits. Returns 1 if it did. */
static int try_variant(const plan_request_t *r, const char *what) {
    plan_t p;
    if (plan_make(r, &p) != BG_OK) return 0;
    int fits = p.partition->fits;
    if (fits) {
        size_t peak = 0;
        for (int s = 0; s < p.partition->stages; s++)
            if (p.partition->stage[s].peak_bytes > peak) peak = p.partition->stage[s].peak_bytes;
        fprintf(stderr, "  %-32s fits: largest stage %.2f MiB, step %.3f ms\n", what,
                (double)peak / mib, p.step_s * 1e3);
    }
    plan_free(&p);
    return fits;
}

static void explain_overflow(const plan_t *p, const plan_request_t *r) {
    const bg_partition_t *part = p->partition;
    const bg_partition_stage_t *st = &part->stage[part->worst_stage];
    char need[32], cap[32], over[32];
    fprintf(stderr,
            "brigade plan: does not fit: stage %d (layers %d-%d on %s) needs %s bytes "
            "(%.2f MiB), %s bytes over its %s-byte capacity\n",
            part->worst_stage, st->first_layer, st->last_layer - 1, p->device[st->device].name,
            bg_cli_group_digits((int64_t)st->peak_bytes, need, sizeof need),
            (double)st->peak_bytes / mib,
            bg_cli_group_digits((int64_t)part->overflow_bytes, over, sizeof over),
            bg_cli_group_digits((int64_t)st->capacity_bytes, cap, sizeof cap));
    fprintf(stderr, "%s; what would help:\n",
            r->split != NULL ? "this is the given --split"
                             : "this is the split that overflows least");
    int helped = 0;
    char what[64];
    plan_request_t v = *r;
    if (r->split != NULL) {
        v.split = NULL;
        helped |= try_variant(&v, "leave out --split");
        v = *r;
    }
    if (!r->recompute) {
        v.recompute = 1;
        helped |= try_variant(&v, "--recompute");
        v = *r;
    }
    if (r->schedule == BG_SCHEDULE_GPIPE) {
        v.schedule = BG_SCHEDULE_1F1B;
        helped |= try_variant(&v, "--schedule 1f1b");
        v = *r;
    }
    if (r->optimizer.kind == BG_OPTIMIZER_ADAM) {
        v.optimizer.kind = BG_OPTIMIZER_SGD;
        helped |= try_variant(&v, "--optimizer sgd");
        v = *r;
    }
    const int ms[] = {r->microbatches * 2, r->microbatches * 4, r->microbatches / 2};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        if (ms[i] < 1 || ms[i] > r->o->batch || ms[i] == r->microbatches) continue;
        v.microbatches = ms[i];
        snprintf(what, sizeof what, "--microbatches %d", ms[i]);
        helped |= try_variant(&v, what);
    }
    v = *r;
    v.split = NULL;
    int most = 2 * r->devices < BG_MAX_DEVICES ? 2 * r->devices : BG_MAX_DEVICES;
    for (int k = r->devices + 1; k <= most && k * r->o->placement.chunks <= r->spec->num_layers;
         k++) {
        v.devices = k;
        snprintf(what, sizeof what, "%d devices (--stages %d)", k, k);
        if (try_variant(&v, what)) {
            helped = 1;
            break;
        }
    }
    if (helped) return;
    /* Every memory saving at once, on the devices given. */
    v = *r;
    v.recompute = 1;
    v.optimizer.kind = BG_OPTIMIZER_SGD;
    v.optimizer.sgd.momentum = 0;
    if (v.schedule == BG_SCHEDULE_GPIPE) v.schedule = BG_SCHEDULE_1F1B;
    snprintf(what, sizeof what, "--recompute --optimizer sgd%s",
             r->schedule == BG_SCHEDULE_GPIPE ? " --schedule 1f1b" : "");
    if (!try_variant(&v, what))
        fprintf(stderr, "  none of these fits, alone or together: use more devices or give each "
                        "more memory (--device-mem)\n");
}

int bg_cmd_plan(int argc, char **argv) {
    plan_options_t o = {.optimizer = BG_OPTIMIZER_CONFIG_INIT};
    int show_help = 0;
    bg_status_t st = parse_args(argc, argv, &o, &show_help);
    if (show_help) {
        printf(help, bg_placement_help);
        return 0;
    }
    if (st != BG_OK) return bg_cli_usage_error("plan", "%s", bg_error_message());
    bg_model_spec_t *spec = NULL;
    bg_topology_t *topology = NULL;
    plan_t p = {0};
    int code = 0;
    BG_CHECK_GOTO(bg_cli_input_status(bg_model_spec_load(o.model, &spec)), st, fail);
    BG_CHECK_GOTO(bg_topology_create(NULL, &topology), st, fail);
    BG_CHECK_GOTO(bg_placement_resolve(&o.placement, spec, bg_topology_core_count(topology)), st,
                  fail);
    plan_request_t r = {
        .spec = spec,
        .o = &o,
        .devices = o.placement.devices.count,
        .schedule = o.placement.schedule,
        .microbatches = o.placement.microbatches,
        .recompute = o.placement.recompute,
        .optimizer = o.optimizer,
        .split = o.placement.split_count > 0 ? o.placement.split : NULL,
    };
    BG_CHECK_GOTO(plan_make(&r, &p), st, fail);
    if (o.json) {
        BG_CHECK_GOTO(print_json(&p, &r), st, fail);
    } else {
        printf("plan for %s: ", o.model);
        bg_placement_describe(&o.placement, stdout);
        printf("\nbatch %lld (micro-batches of %lld), %s; %s\n\n", (long long)o.batch,
               (long long)bg_cost_model_microbatch(p.model),
               bg_optimizer_kind_name(o.optimizer.kind),
               r.split != NULL ? "split given by --split" : "split chosen by the planner");
        print_table(&p, &r);
    }
    if (!p.partition->fits) {
        explain_overflow(&p, &r);
        code = 2;
    }
    goto done;
fail:
    code = bg_cli_fail("plan", st);
done:
    plan_free(&p);
    bg_topology_destroy(topology);
    bg_model_spec_destroy(spec);
    return code;
}
