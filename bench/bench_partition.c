/* Time the planner takes for deep models: 1,000 layers cut into 64 stages
 * on 64 CPU devices, without a memory limit, with a limit that binds, and
 * with one nothing fits under (which also searches for the smallest
 * overflow), for the slowest stage, the least total, and the least
 * predicted step at M = 8 and 64 (within 0.1%, as the planner asks for it,
 * and once exact; the planner prices the first and the last); 100,000
 * layers (the most a model spec may have) onto 4 and 64 stages; then the
 * device order of BG_DEVICE_ORDER_EXACT_MAX devices (exact search) and of
 * 64 (greedy). Each plan's line ends with its predicted step of M
 * micro-batches (bg_partition_step_seconds). Then the search per device
 * (bg_partition_search_devices, two stages a device on 32 devices), for
 * the slowest stage and for the least step, with the planner's budget: how
 * long each takes, and its stage prices a second.
 * The bar is under a second for each plan of 1,000 layers.
 *
 *   bench_partition
 *
 * Not a test: prints its figures, asserts nothing about them. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device_order.h"
#include "partition.h"
#include "bench_timing.h"

enum { MAX_STAGES = 64, CONV_BLOCKS = 150 };

/* `layers` layers: conv+relu blocks of varying widths on 16x16 maps, a
 * flatten, dense+relu blocks of varying widths, the classifier and loss. */
static char *deep_model_text(int layers_wanted) {
    size_t size = (size_t)layers_wanted * 40 + 1024;
    char *text = malloc(size);
    if (text == NULL) return NULL;
    int at = snprintf(text, size, "input channels=3 height=16 width=16\n");
    int layers = 0;
    for (int i = 0; i < CONV_BLOCKS; i++, layers += 2)
        at +=
            snprintf(text + at, size - (size_t)at,
                     "conv2d filters=%d kernel=3 padding=same activation=relu\n", 4 + (i * 7) % 13);
    at += snprintf(text + at, size - (size_t)at, "flatten\n");
    layers++;
    for (int i = 0; layers + 2 <= layers_wanted - 2; i++, layers += 2)
        at += snprintf(text + at, size - (size_t)at, "dense units=%d activation=relu\n",
                       16 + (i * 37) % 113);
    if (layers < layers_wanted - 2) at += snprintf(text + at, size - (size_t)at, "relu\n");
    snprintf(text + at, size - (size_t)at, "dense units=10\nsoftmax_cross_entropy\n");
    return text;
}

/* The least step as the planner asks for it: within 0.1%. */
#define LEAST_STEP_NEAR (-1)

static int plan(const bg_cost_model_t *model, bg_cost_device_t *dev, int stages, size_t capacity,
                int objective, const char *what) {
    for (int d = 0; d < stages; d++) dev[d].memory_bytes = capacity;
    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = model;
    pc.devices = stages;
    pc.device = dev;
    pc.objective = objective == LEAST_STEP_NEAR ? BG_PARTITION_LEAST_STEP
                                                : (bg_partition_objective_t)objective;
    pc.step_tolerance = objective == LEAST_STEP_NEAR ? 1e-3 : 0;
    bg_partition_t *p = NULL;
    double start = bg_monotonic_seconds();
    bg_status_t st = bg_partition_create(&pc, &p);
    double elapsed = bg_monotonic_seconds() - start;
    if (st != BG_OK) {
        fprintf(stderr, "bench_partition: %s\n", bg_error_message());
        return 1;
    }
    size_t peak = 0;
    for (int s = 0; s < p->stages; s++)
        if (p->stage[s].peak_bytes > peak) peak = p->stage[s].peak_bytes;
    printf("%-34s %8.1f ms  %s, bottleneck %.3f, total %.3f ms/micro-batch, largest stage "
           "%.2f MiB, step %.3f ms at M = %d\n",
           what, elapsed * 1e3, p->fits ? "fits" : "does not fit", p->bottleneck_s * 1e3,
           p->total_s * 1e3, (double)peak / (1024.0 * 1024.0),
           bg_partition_step_seconds(p, &pc) * 1e3, bg_cost_model_config(model)->microbatches);
    bg_partition_destroy(p);
    return 0;
}

/* The search per device on `devices` devices of `capacity` bytes, V = 2,
 * with the planner's budget, for the slowest stage and then the least
 * step: a line each. */
static int search_devices(const bg_cost_model_t *model, bg_cost_device_t *dev, int devices,
                          size_t capacity, const char *what) {
    for (int d = 0; d < devices; d++) dev[d].memory_bytes = capacity;
    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = model;
    pc.devices = devices;
    pc.chunks = 2;
    pc.device = dev;
    pc.memory_check = BG_PARTITION_CHECK_DEVICES;
    const long budget = 500000L; /* BG_PLAN_DEVICE_SEARCH_BUDGET */
    bg_partition_t *p = NULL;
    for (int by_step = 0; by_step < 2; by_step++) {
        pc.objective = by_step ? BG_PARTITION_LEAST_STEP : BG_PARTITION_SLOWEST_STAGE;
        int complete = 0;
        const double start = bg_monotonic_seconds();
        const bg_status_t st = bg_partition_search_devices(&pc, DBL_MAX, budget, &p, &complete);
        const double elapsed = bg_monotonic_seconds() - start;
        if (st != BG_OK) {
            fprintf(stderr, "bench_partition: %s\n", bg_error_message());
            return 1;
        }
        printf("%-34s %8.1f ms  %s: %s, %s", what, elapsed * 1e3,
               by_step ? "least step" : "slowest stage",
               complete ? "tried every split" : "stopped at its budget",
               p != NULL ? "found one that fits" : "none found");
        if (p != NULL)
            printf(", bottleneck %.3f ms/micro-batch, step %.3f ms", p->bottleneck_s * 1e3,
                   bg_partition_step_seconds(p, &pc) * 1e3);
        if (!complete) printf(", %.1f M stage prices/s", (double)budget / elapsed / 1e6);
        printf("\n");
        bg_partition_destroy(p);
        p = NULL;
    }
    pc.objective = BG_PARTITION_SLOWEST_STAGE;
    /* Beside it, the programme's answer: each stage within half a device. */
    pc.memory_check = BG_PARTITION_CHECK_STAGES;
    if (bg_partition_create(&pc, &p) != BG_OK) {
        fprintf(stderr, "bench_partition: %s\n", bg_error_message());
        return 1;
    }
    printf("%-34s the programme (each stage within half): %s\n", "",
           p->fits ? "fits" : "does not fit");
    bg_partition_destroy(p);
    return 0;
}

static void order(int k) {
    double *bw = malloc(sizeof(double) * (size_t)(k * k));
    int *out = malloc(sizeof(int) * (size_t)k);
    if (bw == NULL || out == NULL) return;
    for (int i = 0; i < k * k; i++) bw[i] = 1 + (double)((i * 7919) % 97);
    double slowest = 0, start = bg_monotonic_seconds();
    bg_status_t st = bg_device_order(bw, k, 0, out, &slowest);
    char what[64];
    snprintf(what, sizeof what, "device order of %d devices", k);
    printf("%-34s %8.3f ms  %s, slowest link %.0f\n", what, (bg_monotonic_seconds() - start) * 1e3,
           st == BG_OK ? "ok" : bg_error_message(), slowest);
    free(bw);
    free(out);
}

/* The model of `layers` layers and its cost model at batch 64 in M
 * micro-batches. */
static int deep_model(int layers, int microbatches, bg_model_spec_t **spec,
                      bg_cost_model_t **model) {
    char *text = deep_model_text(layers);
    if (text == NULL || bg_model_spec_parse("deep", text, strlen(text), spec) != BG_OK) {
        fprintf(stderr, "bench_partition: %s\n", text ? bg_error_message() : "out of memory");
        free(text);
        return 1;
    }
    free(text);
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = *spec;
    cc.batch = 64;
    cc.microbatches = microbatches;
    /* Prepared for the benchmark's devices (every one a CPU core), as the
     * planner prepares its own: without that the cost model adds up each
     * stage's weight-streaming time layer by layer. */
    const bg_cost_device_t core = BG_COST_DEVICE_CPU_CORE_INIT;
    if (bg_cost_model_create(&cc, model) != BG_OK ||
        bg_cost_model_prepare(*model, &core, 1) != BG_OK) {
        fprintf(stderr, "bench_partition: %s\n", bg_error_message());
        bg_cost_model_destroy(*model);
        bg_model_spec_destroy(*spec);
        return 1;
    }
    return 0;
}

int main(void) {
    bg_cost_device_t dev[MAX_STAGES];
    for (int d = 0; d < MAX_STAGES; d++) {
        bg_cost_device_t one = BG_COST_DEVICE_CPU_CORE_INIT;
        snprintf(one.name, sizeof one.name, "cpu:%d", d);
        dev[d] = one;
    }
    bg_model_spec_t *spec = NULL;
    bg_cost_model_t *model = NULL;
    if (deep_model(1000, 8, &spec, &model) != 0) return 1;
    bg_cost_stage_t whole = {.first_layer = 0, .last_layer = spec->num_layers, .stash_slots = 1};
    bg_cost_memory_t all = bg_cost_stage_memory(model, &whole);
    size_t even = bg_cost_memory_peak(&all) / MAX_STAGES;
    printf("%d layers onto %d stages (whole model as one stage: %.2f MiB)\n", spec->num_layers,
           MAX_STAGES, (double)bg_cost_memory_peak(&all) / (1024.0 * 1024.0));
    const int slowest = BG_PARTITION_SLOWEST_STAGE, total = BG_PARTITION_LEAST_TOTAL,
              exact = BG_PARTITION_LEAST_STEP, step = LEAST_STEP_NEAR;
    int failed = plan(model, dev, MAX_STAGES, 0, slowest, "no memory limit");
    failed |= plan(model, dev, MAX_STAGES, even * 3, slowest, "limit 3x an even share");
    failed |= plan(model, dev, MAX_STAGES, even / 4, slowest, "limit 1/4 of an even share");
    failed |= plan(model, dev, MAX_STAGES, 0, total, "least total, no memory limit");
    failed |= plan(model, dev, MAX_STAGES, even * 3, total, "least total, 3x an even share");
    failed |= plan(model, dev, MAX_STAGES, even / 4, total, "least total, 1/4 of an even share");
    failed |= plan(model, dev, MAX_STAGES, 0, step, "least step, no memory limit");
    failed |= plan(model, dev, MAX_STAGES, even * 3, step, "least step, 3x an even share");
    failed |= plan(model, dev, MAX_STAGES, even / 4, step, "least step, 1/4 of an even share");
    failed |= plan(model, dev, MAX_STAGES, 0, exact, "exact least step, no memory limit");
    printf("search per device, 32 devices x 2 stages\n");
    failed |= search_devices(model, dev, MAX_STAGES / 2, 0, "no memory limit");
    failed |= search_devices(model, dev, MAX_STAGES / 2, even * 6, "limit 3x an even share");
    failed |= search_devices(model, dev, MAX_STAGES / 2, even * 2, "limit an even share");
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);
    if (deep_model(1000, 64, &spec, &model) != 0) return 1;
    failed |= plan(model, dev, MAX_STAGES, 0, slowest, "no memory limit");
    failed |= plan(model, dev, MAX_STAGES, 0, step, "least step, no memory limit");
    failed |= plan(model, dev, MAX_STAGES, even * 3, step, "least step, 3x an even share");
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);
    if (deep_model(100000, 8, &spec, &model) != 0) return 1;
    printf("%d layers, no memory limit\n", spec->num_layers);
    failed |= plan(model, dev, 4, 0, slowest, "onto 4 stages");
    failed |= plan(model, dev, MAX_STAGES, 0, slowest, "onto 64 stages");
    failed |= plan(model, dev, MAX_STAGES, 0, total, "least total onto 64 stages");
    failed |= plan(model, dev, MAX_STAGES, 0, step, "least step onto 64 stages");
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);
    order(BG_DEVICE_ORDER_EXACT_MAX);
    order(64);
    return failed;
}
