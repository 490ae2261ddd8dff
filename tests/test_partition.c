/* The placement planner: the dynamic programme against a brute force over
 * every contiguous split on random instances (random models, devices,
 * capacities, links and stash slots), infeasible instances reported with
 * the smallest worst overflow, models with residual blocks (no stage may
 * start inside one), the memory model against the bytes real stages and
 * pipelines allocate, and the device order against a brute force over
 * permutations. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "partition.h"
#include "pipeline.h"
#include "rng.h"
#include "stage.h"
#include "support/models.h"

enum { MAX_STAGES = 5, MAX_DEVICES = 7 };

static const char origin_cnn[] = BG_TEST_ORIGIN_CNN;

static bg_model_spec_t *parse(const char *text) {
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("test", text, strlen(text), &spec), BG_OK);
    return spec;
}

/* A random model of 3..12 layers (up to 3 + 9 * scale): convolutions, pools
 * and elementwise layers, a flatten, dense layers and elementwise layers
 * (which cost next to nothing, so that stage times tie), the classifier and
 * the loss. The elementwise layers are relu, tanh, sigmoid, gelu, layernorm
 * and dropout in turn (gelu keeps its input, relu, tanh, sigmoid and
 * dropout may run in place, layernorm has weights and a workspace; on a
 * 1x1 image, which may be one value, relu stands in for it). */
static const char *next_elementwise(int *turn, int64_t hw, int dense) {
    static const char *layers[] = {"relu\n", "tanh\n",      "sigmoid\n",
                                   "gelu\n", "layernorm\n", "dropout rate=0.25\n"};
    const int at = (*turn)++ % 6;
    return layers[at == 4 && hw == 1 && !dense ? 0 : at];
}

static bg_model_spec_t *random_model(bg_rng_t *rng, int scale) {
    int turn = 0, dense = 0;
    char text[8192];
    int64_t hw = 4 + (int64_t)bg_rng_below(rng, 7);
    int at = snprintf(text, sizeof text, "input channels=%d height=%lld width=%lld\n",
                      1 + (int)bg_rng_below(rng, 3), (long long)hw, (long long)hw);
    int convs = (int)bg_rng_below(rng, (uint64_t)(4 * scale + 1)),
        denses = (int)bg_rng_below(rng, (uint64_t)(5 * scale + 1));
    for (int i = 0; i < convs; i++) {
        uint64_t pick = bg_rng_below(rng, 4);
        if (pick == 0)
            at += snprintf(text + at, sizeof text - (size_t)at,
                           "conv2d filters=%d kernel=%d padding=same\n",
                           1 + (int)bg_rng_below(rng, 6), bg_rng_below(rng, 2) ? 3 : 1);
        else if (pick == 1)
            at +=
                snprintf(text + at, sizeof text - (size_t)at, "%s", next_elementwise(&turn, hw, 0));
        else if (hw >= 2) {
            at += snprintf(text + at, sizeof text - (size_t)at, "%s size=2\n",
                           pick == 2 ? "maxpool" : "avgpool");
            hw /= 2;
        } else
            at +=
                snprintf(text + at, sizeof text - (size_t)at, "%s", next_elementwise(&turn, hw, 0));
    }
    at += snprintf(text + at, sizeof text - (size_t)at, "flatten\n");
    for (int i = 0; i < denses; i++) {
        if (bg_rng_below(rng, 2)) {
            at += snprintf(text + at, sizeof text - (size_t)at, "%s",
                           next_elementwise(&turn, hw, dense));
        } else {
            at += snprintf(text + at, sizeof text - (size_t)at, "dense units=12\n");
            dense = 1;
        }
    }
    snprintf(text + at, sizeof text - (size_t)at, "dense units=%d\nsoftmax_cross_entropy\n",
             2 + (int)bg_rng_below(rng, 4));
    return parse(text);
}

/* The residual blocks open where layer `layer` takes its input, counted
 * from the layer kinds alone (residuals before it less adds before it), as
 * the tests' own account of where a stage may start: only where it is 0. */
static int blocks_open_before(const bg_model_spec_t *spec, int layer) {
    int open = 0;
    for (int i = 0; i < layer; i++)
        open += spec->layers[i].kind == BG_LAYER_RESIDUAL ? 1
                : spec->layers[i].kind == BG_LAYER_ADD    ? -1
                                                          : 0;
    return open;
}

/* The deepest nesting of blocks among layers [first, last): a stage on
 * them keeps a skip gradient for each depth. */
static int deepest_blocks(const bg_model_spec_t *spec, int first, int last) {
    int deepest = 0;
    for (int i = first; i < last; i++)
        if (blocks_open_before(spec, i) > deepest) deepest = blocks_open_before(spec, i);
    return deepest;
}

/* A random model with residual blocks (6 to about 30 layers at scale 1):
 * an image, sometimes a block right at the input (its residual layer 0),
 * sometimes a block of two convolutions (its channels those of the input,
 * padded to keep the shape), sometimes a pool, a flatten and a dense layer
 * of 12, then a random run of residuals (nested up to 3 deep), adds
 * closing the innermost block (never an empty one), dense layers of 12
 * (which keep the shape inside a block) and elementwise layers (after an
 * add too: relu may then run in place); the blocks still open are closed,
 * sometimes a last block ends right before the classifier, and the loss.
 * Every model parses (parse asserts it). */
/* Two blocks with shortcut branches (support/models.h). */
static const char shortcut_model[] = BG_TEST_SHORTCUT_MODEL;

static bg_model_spec_t *random_residual_model(bg_rng_t *rng, int scale) {
    int turn = (int)bg_rng_below(rng, 6);
    char text[8192];
    const int channels = 1 + (int)bg_rng_below(rng, 3);
    int64_t hw = 4 + (int64_t)bg_rng_below(rng, 5);
    int at = snprintf(text, sizeof text, "input channels=%d height=%lld width=%lld\n", channels,
                      (long long)hw, (long long)hw);
    if (bg_rng_below(rng, 4) == 0)
        at += snprintf(text + at, sizeof text - (size_t)at,
                       "residual\nconv2d filters=%d kernel=3 padding=same\n%sadd\n", channels,
                       next_elementwise(&turn, hw, 0));
    if (bg_rng_below(rng, 2))
        at += snprintf(text + at, sizeof text - (size_t)at,
                       "residual\nconv2d filters=%d kernel=3 padding=same activation=relu\n"
                       "conv2d filters=%d kernel=3 padding=same\nadd\n%s",
                       channels, channels, bg_rng_below(rng, 2) ? "relu\n" : "");
    if (bg_rng_below(rng, 2)) {
        at += snprintf(text + at, sizeof text - (size_t)at, "%s size=2\n",
                       bg_rng_below(rng, 2) ? "maxpool" : "avgpool");
        hw /= 2;
    }
    at += snprintf(text + at, sizeof text - (size_t)at, "flatten\ndense units=12\n");
    /* open: blocks open; opened: the last line opened one (add must wait);
     * added: the last line closed one. */
    int open = 0, opened = 0, added = 0;
    const int steps = 2 + (int)bg_rng_below(rng, (uint64_t)(8 * scale));
    for (int i = 0; i < steps; i++) {
        const uint64_t pick = bg_rng_below(rng, 4);
        if (pick == 0 && open < 3) {
            at += snprintf(text + at, sizeof text - (size_t)at, "residual\n");
            open++;
            opened = 1;
            added = 0;
            continue;
        }
        if (pick == 1 && open > 0 && !opened) {
            at += snprintf(text + at, sizeof text - (size_t)at, "add\n");
            open--;
            added = 1;
            continue;
        }
        if (pick == 2)
            at += snprintf(text + at, sizeof text - (size_t)at, "dense units=12%s\n",
                           bg_rng_below(rng, 3) == 0 ? " activation=relu" : "");
        else
            at +=
                snprintf(text + at, sizeof text - (size_t)at, "%s", next_elementwise(&turn, hw, 1));
        opened = added = 0;
    }
    for (; open > 0; open--) {
        if (opened)
            at +=
                snprintf(text + at, sizeof text - (size_t)at, "%s", next_elementwise(&turn, hw, 1));
        at += snprintf(text + at, sizeof text - (size_t)at, "add\n");
        opened = 0;
        added = 1;
    }
    if (!added && bg_rng_below(rng, 2))
        at += snprintf(text + at, sizeof text - (size_t)at, "residual\n%sadd\n",
                       bg_rng_below(rng, 2) ? "dense units=12\n" : next_elementwise(&turn, hw, 1));
    snprintf(text + at, sizeof text - (size_t)at, "dense units=%d\nsoftmax_cross_entropy\n",
             2 + (int)bg_rng_below(rng, 4));
    return parse(text);
}

static void random_cost_config(bg_rng_t *rng, bg_cost_config_t *cfg) {
    cfg->batch = 1 + (int64_t)bg_rng_below(rng, 16);
    cfg->microbatches = 1 + (int)bg_rng_below(rng, (uint64_t)(cfg->batch < 4 ? cfg->batch : 4));
    cfg->recompute = (int)bg_rng_below(rng, 2);
    cfg->split_backward = (int)bg_rng_below(rng, 2);
    uint64_t opt = bg_rng_below(rng, 3);
    cfg->optimizer.kind = opt == 2 ? BG_OPTIMIZER_ADAM : BG_OPTIMIZER_SGD;
    cfg->optimizer.sgd.momentum = opt == 1 ? 0.9 : 0;
}

/* ---- the partitioner against a brute force ---- */

typedef struct brute {
    int any_fits;
    double best_time;     /* over fitting splits */
    double best_total;    /* over fitting splits */
    double best_step;     /* bg_partition_step_seconds, over fitting splits */
    size_t best_overflow; /* smallest worst overflow over all splits */
    double overflow_time; /* the least slowest stage among splits of that overflow */
    /* Each device's stages checked together (BG_PARTITION_CHECK_DEVICES):
     * whether any split fits so, and the least slowest stage and the least
     * step of those; the least step of the splits whose slowest stage is
     * that least, and the least slowest stage of those whose step is (the
     * search's tie-breaks). */
    int any_fits_devices;
    double best_time_devices;
    double best_step_devices;
    double tie_step_devices, tie_time_devices;
} brute_t;

/* The same split checked per device (BG_PARTITION_CHECK_DEVICES): the
 * same stages, each with its whole device's capacity, and it fits exactly
 * when every device's stages together do (summed here from `p`, the split
 * checked per stage). A split that fits per stage fits per device: the
 * programme's 1/V of a device a stage is the more cautious check. Returns
 * whether it fits per device. */
static int check_per_device(const bg_partition_config_t *cfg, const int *first,
                            const bg_partition_t *p) {
    bg_partition_config_t devices = *cfg;
    devices.memory_check = BG_PARTITION_CHECK_DEVICES;
    bg_partition_t *q = NULL;
    assert_int_equal(bg_partition_evaluate(&devices, first, &q), BG_OK);
    assert_int_equal(q->memory_check,
                     cfg->chunks > 1 ? BG_PARTITION_CHECK_DEVICES : BG_PARTITION_CHECK_STAGES);
    int fits = 1, worst = -1;
    size_t most = 0;
    for (int d = 0; d < cfg->devices; d++) {
        const size_t capacity = cfg->device[d].memory_bytes;
        size_t need = 0;
        for (int s = d; s < p->stages; s += cfg->devices) {
            assert_int_equal(q->stage[s].peak_bytes, p->stage[s].peak_bytes);
            assert_int_equal(q->stage[s].capacity_bytes,
                             cfg->chunks > 1 ? capacity : p->stage[s].capacity_bytes);
            need += p->stage[s].peak_bytes;
        }
        assert_int_equal(bg_partition_device_peak_bytes(q, d), need);
        if (capacity != 0 && need > capacity && (fits || need - capacity > most)) {
            fits = 0;
            worst = d;
            most = need - capacity;
        }
    }
    if (cfg->chunks > 1) {
        assert_int_equal(q->fits, fits);
        assert_int_equal(q->worst_device, worst);
        if (!fits) assert_int_equal(q->overflow_bytes, most);
        if (!fits) assert_int_equal(q->stage[q->worst_stage].device, worst);
    } else {
        assert_int_equal(q->fits, p->fits);
        assert_int_equal(q->worst_stage, p->worst_stage);
    }
    if (p->fits) assert_true(q->fits);
    const int fits_devices = q->fits;
    bg_partition_destroy(q);
    return fits_devices;
}

/* Visits every split of layers [from, n) into stages s..S-1 that starts no
 * stage inside a residual block (without blocks: every split). */
static void brute_force(const bg_partition_config_t *cfg, int *first, int s, int stages, int n,
                        brute_t *b) {
    if (s == stages) {
        bg_partition_t *p = NULL;
        assert_int_equal(bg_partition_evaluate(cfg, first, &p), BG_OK);
        const double step = bg_partition_step_seconds(p, cfg);
        if (check_per_device(cfg, first, p)) {
            const int first_fit = !b->any_fits_devices;
            if (first_fit || p->bottleneck_s < b->best_time_devices) {
                b->best_time_devices = p->bottleneck_s;
                b->tie_step_devices = step;
            } else if (p->bottleneck_s == b->best_time_devices && step < b->tie_step_devices) {
                b->tie_step_devices = step;
            }
            if (first_fit || step < b->best_step_devices) {
                b->best_step_devices = step;
                b->tie_time_devices = p->bottleneck_s;
            } else if (step == b->best_step_devices && p->bottleneck_s < b->tie_time_devices) {
                b->tie_time_devices = p->bottleneck_s;
            }
            b->any_fits_devices = 1;
        }
        if (p->fits && (!b->any_fits || p->bottleneck_s < b->best_time))
            b->best_time = p->bottleneck_s;
        if (p->fits && (!b->any_fits || p->total_s < b->best_total)) b->best_total = p->total_s;
        if (p->fits && (!b->any_fits || step < b->best_step)) b->best_step = step;
        b->any_fits |= p->fits;
        size_t over = p->fits ? 0 : p->overflow_bytes;
        if (over < b->best_overflow ||
            (over == b->best_overflow && p->bottleneck_s < b->overflow_time))
            b->overflow_time = p->bottleneck_s;
        if (over < b->best_overflow) b->best_overflow = over;
        bg_partition_destroy(p);
        return;
    }
    for (int i = first[s - 1] + 1; i <= n - (stages - s); i++) {
        if (bg_cost_model_cut_index(cfg->model, i) < 0) continue;
        first[s] = i;
        brute_force(cfg, first, s + 1, stages, n, b);
    }
}

/* Stage s on layers [i, j) as the partitioner prices it, through the public
 * API: a whole split holding it (the stages before it one layer each from
 * layer 0, those after it one layer each from j), evaluated. */
static bg_partition_stage_t priced_stage(const bg_partition_config_t *cfg, int stages, int s, int i,
                                         int j) {
    int first[MAX_STAGES];
    for (int k = 0; k < s; k++) first[k] = k;
    first[s] = i;
    for (int k = s + 1; k < stages; k++) first[k] = j + (k - s - 1);
    bg_partition_t *p = NULL;
    assert_int_equal(bg_partition_evaluate(cfg, first, &p), BG_OK);
    bg_partition_stage_t st = p->stage[s];
    bg_partition_destroy(p);
    return st;
}

/* The split the partitioner documents, by the plain programme: every start
 * of every stage tried, from the latest down, a start kept only when
 * strictly better (so among equal values the latest wins); the fastest
 * split that fits, else the fastest of those whose worst overflow is
 * smallest (the time programme again, every capacity raised by it). */
static void reference_split(const bg_partition_config_t *cfg, int stages, int n, int *first) {
    double best[MAX_STAGES][64];
    int cut[MAX_STAGES][64];
    assert_true(n < 64);
    size_t allowance = 0;
    /* 0: time, among fitting; 1: overflow; 2: time within the least overflow */
    for (int mode = 0; mode < 3; mode++) {
        if (mode == 2) allowance = (size_t)best[stages - 1][n];
        for (int s = 0; s < stages; s++)
            for (int j = 0; j <= n; j++) {
                best[s][j] = INFINITY;
                if (j < s + 1 || j > n - (stages - 1 - s) || (s == stages - 1 && j != n)) continue;
                for (int i = s == 0 ? 0 : j - 1; i >= (s == 0 ? 0 : s); i--) {
                    const double before = s == 0 ? 0 : best[s - 1][i];
                    if (!(before < INFINITY)) continue;
                    const bg_partition_stage_t st = priced_stage(cfg, stages, s, i, j);
                    const int over = st.capacity_bytes != 0 && st.peak_bytes > st.capacity_bytes;
                    double value;
                    if (mode != 1) {
                        if (st.capacity_bytes != 0 && st.peak_bytes > st.capacity_bytes + allowance)
                            continue;
                        value = st.seconds;
                    } else {
                        value = over ? (double)(st.peak_bytes - st.capacity_bytes) : 0;
                    }
                    if (value < before) value = before;
                    if (value < best[s][j]) {
                        best[s][j] = value;
                        cut[s][j] = i;
                    }
                }
            }
        if (mode != 1 && best[stages - 1][n] < INFINITY) break;
    }
    for (int s = stages - 1, j = n; s >= 0; s--) {
        first[s] = cut[s][j];
        j = first[s];
    }
}

/* Every stage of a planned split starts outside the residual blocks: at a
 * layer bg_model_spec_block_cut allows, where no block is open by the
 * layers' own count, and at one of the cost model's boundaries (a stage
 * starting inside a block would cut its add from the input it adds). */
static void check_legal_starts(const bg_partition_config_t *cfg, const bg_partition_t *p) {
    const bg_model_spec_t *spec = bg_cost_model_config(cfg->model)->spec;
    for (int s = 0; s < p->stages; s++) {
        const int first = p->stage[s].first_layer;
        assert_true(bg_model_spec_block_cut(spec, first) < 0);
        assert_int_equal(blocks_open_before(spec, first), 0);
        assert_true(bg_cost_model_cut_index(cfg->model, first) >= 0);
    }
}

/* The least-total objective on the same instance: its total is the brute
 * force's (up to rounding: the programme ranks starts by sums taken in
 * another order), no larger than the slowest-stage split's, and when
 * nothing fits its worst overflow is the smallest too. */
static void check_least_total(const bg_partition_config_t *cfg, const bg_partition_t *slowest,
                              const brute_t *b) {
    bg_partition_config_t pc = *cfg;
    pc.objective = BG_PARTITION_LEAST_TOTAL;
    bg_partition_t *p = NULL;
    assert_int_equal(bg_partition_create(&pc, &p), BG_OK);
    check_legal_starts(cfg, p);
    assert_int_equal(p->fits, b->any_fits);
    if (b->any_fits) {
        assert_true(fabs(p->total_s - b->best_total) <= 1e-12 * b->best_total);
        assert_true(p->total_s <= slowest->total_s * (1 + 1e-12));
    } else {
        assert_int_equal(p->overflow_bytes, b->best_overflow);
    }
    double sum = 0;
    for (int s = 0; s < p->stages; s++) {
        if (s > 0) assert_int_equal(p->stage[s].first_layer, p->stage[s - 1].last_layer);
        sum += p->stage[s].seconds;
    }
    assert_true(fabs(sum - p->total_s) <= 1e-12 * sum);
    bg_partition_destroy(p);
}

/* Instances with V > 1 that fit, and those whose least step is the brute
 * force's (check_least_step): the programme cannot see a device's stages
 * together, and the search after it (balance_devices) finds a local
 * optimum only. With chunked_only, check_against_brute_force makes every
 * instance one of V = 2. */
static int chunked_fits, chunked_optimal, chunked_only;
/* With forward_only_all, every instance's stages evaluate (no gradients). */
static int forward_only_all;

/* Teardown of the tests that set a mode above: the next test runs without
 * it even when this one failed half-way. */
static int reset_modes(void **state) {
    (void)state;
    chunked_only = forward_only_all = 0;
    return 0;
}

/* The least-step objective on the same instance: with one stage per device
 * its predicted step is the brute force's (up to rounding), and never
 * longer than the slowest-stage split's, and with a tolerance of 0.1%
 * within 0.1% of that; started from the slowest-stage split it finds the
 * same split; when nothing fits it is the smallest overflow. Returns 1
 * when it beats both the slowest stage's and the least total's step: an
 * instance only a search inside the front gets right. */
static int check_least_step(const bg_partition_config_t *cfg, const bg_partition_t *slowest,
                            const brute_t *b) {
    bg_partition_config_t pc = *cfg;
    pc.objective = BG_PARTITION_LEAST_STEP;
    bg_partition_t *p = NULL, *total = NULL;
    assert_int_equal(bg_partition_create(&pc, &p), BG_OK);
    check_legal_starts(cfg, p);
    assert_int_equal(p->fits, b->any_fits);
    int beats_both = 0;
    if (b->any_fits) {
        const double step = bg_partition_step_seconds(p, cfg);
        if (cfg->chunks == 1) assert_true(fabs(step - b->best_step) <= 1e-12 * b->best_step);
        if (cfg->chunks > 1) {
            chunked_fits++;
            chunked_optimal += step <= b->best_step * (1 + 1e-12);
        }
        assert_true(step <= bg_partition_step_seconds(slowest, cfg) * (1 + 1e-12));
        /* Within a tolerance, within it of the least. */
        bg_partition_t *near = NULL;
        pc.step_tolerance = 1e-3;
        assert_int_equal(bg_partition_create(&pc, &near), BG_OK);
        check_legal_starts(cfg, near);
        assert_true(bg_partition_step_seconds(near, cfg) <=
                    (cfg->chunks == 1 ? b->best_step : step) * (1 + 1e-3 + 1e-12));
        bg_partition_destroy(near);
        /* Started from the slowest-stage split given: the same split. */
        pc.step_tolerance = 0;
        pc.slowest = slowest;
        assert_int_equal(bg_partition_create(&pc, &near), BG_OK);
        for (int s = 0; s < p->stages; s++)
            assert_int_equal(near->stage[s].first_layer, p->stage[s].first_layer);
        bg_partition_destroy(near);
        pc.slowest = NULL;
        pc.objective = BG_PARTITION_LEAST_TOTAL;
        assert_int_equal(bg_partition_create(&pc, &total), BG_OK);
        check_legal_starts(cfg, total);
        const double least =
            fmin(bg_partition_step_seconds(slowest, cfg), bg_partition_step_seconds(total, cfg));
        beats_both = step < least * (1 - 1e-9);
        bg_partition_destroy(total);
    } else {
        assert_int_equal(p->overflow_bytes, b->best_overflow);
    }
    bg_partition_destroy(p);
    return beats_both;
}

/* Sets each device's capacity to what its stages of a random split need,
 * give or take 3%: capacities that admit that split or nearly, and few
 * others. The split starts stages only where the cost model allows
 * (bg_cost_model_cuts: without residual blocks, at every layer). */
static void tight_capacities(bg_rng_t *rng, const bg_partition_config_t *pc,
                             bg_cost_device_t *dev) {
    const int stages = pc->devices * pc->chunks;
    int count = 0;
    const int *cut = bg_cost_model_cuts(pc->model, &count);
    const int units = count - 1;
    int unit[MAX_STAGES] = {0}, first[MAX_STAGES] = {0};
    for (int s = 1; s < stages; s++) { /* a random increasing split of the units */
        const int room = units - (stages - s) - unit[s - 1];
        unit[s] = unit[s - 1] + 1 + (int)bg_rng_below(rng, (uint64_t)room);
        first[s] = cut[unit[s]];
    }
    for (int d = 0; d < pc->devices; d++) dev[d].memory_bytes = 0;
    bg_partition_t *p = NULL;
    assert_int_equal(bg_partition_evaluate(pc, first, &p), BG_OK);
    for (int s = 0; s < stages; s++) {
        const double need =
            (double)p->stage[s].peak_bytes * pc->chunks * (0.97 + 0.06 * bg_rng_uniform(rng));
        if ((size_t)need > dev[s % pc->devices].memory_bytes)
            dev[s % pc->devices].memory_bytes = (size_t)need;
    }
    bg_partition_destroy(p);
}

/* The cost model's boundaries (bg_cost_model_cuts, in order, indexed by
 * bg_cost_model_cut_index) are 0, the layer count and exactly the layers
 * where the layers' own count has no block open, and those are the layers
 * bg_model_spec_block_cut allows; a layer it refuses names the residual
 * opening the outermost block around it (one opened with none open,
 * before the layer, its add at or after it). Returns the units. */
static int check_cuts(const bg_cost_model_t *model, const bg_model_spec_t *spec) {
    const int n = spec->num_layers;
    int count = 0, legal = 0;
    const int *cut = bg_cost_model_cuts(model, &count);
    for (int l = 0; l <= n; l++) {
        const int allowed = l == 0 || l == n || blocks_open_before(spec, l) == 0;
        const int index = bg_cost_model_cut_index(model, l);
        assert_int_equal(index >= 0, allowed);
        if (allowed) {
            assert_int_equal(index, legal);
            assert_int_equal(cut[legal], l);
            legal++;
        }
        const int r = bg_model_spec_block_cut(spec, l);
        assert_int_equal(r >= 0, !allowed);
        if (r >= 0) {
            assert_int_equal(spec->layers[r].kind, BG_LAYER_RESIDUAL);
            assert_int_equal(blocks_open_before(spec, r), 0);
            assert_true(r < l && spec->layers[r].partner >= l);
        }
    }
    assert_int_equal(count, legal);
    return count - 1;
}

/* One boundary of p's split moved to the first layer inside a block
 * between its neighbours: bg_partition_evaluate refuses the split, naming
 * the stage and the layer. Returns 1 when some boundary could be moved. */
static int check_refused_inside(const bg_partition_config_t *cfg, const bg_partition_t *p) {
    const bg_model_spec_t *spec = bg_cost_model_config(cfg->model)->spec;
    int first[MAX_STAGES];
    for (int s = 0; s < p->stages; s++) first[s] = p->stage[s].first_layer;
    for (int s = 1; s < p->stages; s++) {
        const int end = s + 1 < p->stages ? first[s + 1] : spec->num_layers;
        for (int l = first[s - 1] + 1; l < end; l++) {
            if (bg_model_spec_block_cut(spec, l) < 0) continue;
            first[s] = l;
            bg_partition_t *q = NULL;
            assert_int_equal(bg_partition_evaluate(cfg, first, &q), BG_ERR_INVALID);
            assert_null(q);
            char want[96];
            snprintf(want, sizeof want,
                     "split: stage %d would start at layer %d, inside a residual block", s, l);
            assert_non_null(strstr(bg_error_message(), want));
            return 1;
        }
    }
    return 0;
}

/* As many stages as the model has units (a CPU core each): each stage one
 * unit, from each boundary; one stage more is refused, and where the
 * layers alone would have room for it, the message names the blocks. */
static void check_most_stages(const bg_cost_model_t *model, int units, int n) {
    bg_cost_device_t many[128];
    assert_true(units + 1 <= 128);
    for (int d = 0; d <= units; d++) many[d] = (bg_cost_device_t)BG_COST_DEVICE_CPU_CORE_INIT;
    int count = 0;
    const int *cut = bg_cost_model_cuts(model, &count);
    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = model;
    pc.device = many;
    pc.devices = units;
    bg_partition_t *p = NULL;
    assert_int_equal(bg_partition_create(&pc, &p), BG_OK);
    assert_int_equal(p->stages, units);
    for (int s = 0; s < units; s++) {
        assert_int_equal(p->stage[s].first_layer, cut[s]);
        assert_int_equal(p->stage[s].last_layer, cut[s + 1]);
    }
    bg_partition_destroy(p);
    p = NULL;
    pc.devices = units + 1;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_null(p);
    if (units < n) {
        char want[96];
        snprintf(want, sizeof want, "%d stages but the model has only %d places to start one",
                 units + 1, units);
        assert_non_null(strstr(bg_error_message(), want));
    }
}

/* bg_partition_search_devices for `objective` and `bound` with a budget
 * it cannot exhaust here: it says it tried every split. */
static bg_partition_t *search_every_split(const bg_partition_config_t *cfg,
                                          bg_partition_objective_t objective, double bound) {
    bg_partition_config_t devices = *cfg;
    devices.memory_check = BG_PARTITION_CHECK_DEVICES;
    devices.objective = objective;
    bg_partition_t *q = NULL;
    int complete = 0;
    assert_int_equal(bg_partition_search_devices(&devices, bound, 10000000L, &q, &complete), BG_OK);
    assert_int_equal(complete, 1);
    return q;
}

/* The search per device for the least step (BG_PARTITION_LEAST_STEP)
 * against the brute force, as check_search_devices below for the slowest
 * stage: every split tried, one found exactly when one fits per device,
 * its step the least of theirs, and bounded by that step it finds one as
 * short, by less none. Returns 1 where its split differs from the slowest
 * stage's search's `slowest` (NULL: none). */
static int check_search_devices_step(const bg_partition_config_t *cfg, const brute_t *b,
                                     const bg_partition_t *slowest) {
    bg_partition_t *q = search_every_split(cfg, BG_PARTITION_LEAST_STEP, DBL_MAX);
    assert_int_equal(q != NULL, b->any_fits_devices);
    if (q == NULL) return 0;
    assert_true(q->fits);
    check_legal_starts(cfg, q);
    const double step = bg_partition_step_seconds(q, cfg);
    assert_true(step == b->best_step_devices);
    /* Of the splits as short, the one with the fastest slowest stage. */
    assert_true(q->bottleneck_s == b->tie_time_devices);
    int differs = 0;
    for (int s = 0; s < q->stages; s++)
        differs |= q->stage[s].first_layer != slowest->stage[s].first_layer;
    bg_partition_destroy(q);
    q = search_every_split(cfg, BG_PARTITION_LEAST_STEP, step);
    assert_non_null(q);
    assert_true(bg_partition_step_seconds(q, cfg) == step);
    bg_partition_destroy(q);
    assert_null(search_every_split(cfg, BG_PARTITION_LEAST_STEP, nextafter(step, 0)));
    return differs;
}

/* The search per device (bg_partition_search_devices) against the brute
 * force: with a budget it cannot exhaust here it says it tried every split,
 * finds a split exactly when some split fits with each device's stages
 * together, and its slowest stage is the least of theirs; the split it
 * returns fits so when evaluated (starting no stage inside a residual
 * block, check_legal_starts). With one stage a device it is the
 * programme's check, so it finds the programme's bottleneck. Then the
 * same for the least step (check_search_devices_step). */
static int searched_chunked, step_searches_differ;

static void check_search_devices(const bg_partition_config_t *cfg, const brute_t *b) {
    bg_partition_config_t devices = *cfg;
    devices.memory_check = BG_PARTITION_CHECK_DEVICES;
    bg_partition_t *q = search_every_split(cfg, BG_PARTITION_SLOWEST_STAGE, DBL_MAX);
    assert_int_equal(q != NULL, b->any_fits_devices);
    if (cfg->chunks == 1) assert_int_equal(b->any_fits_devices, b->any_fits);
    if (q == NULL) return;
    searched_chunked += cfg->chunks > 1 && !b->any_fits;
    assert_true(q->fits);
    assert_true(q->bottleneck_s == b->best_time_devices);
    /* Of the splits as fast, the one of the shortest predicted step. */
    assert_true(bg_partition_step_seconds(q, cfg) == b->tie_step_devices);
    if (cfg->chunks == 1) assert_true(q->bottleneck_s == b->best_time);
    check_legal_starts(cfg, q);
    int first[MAX_STAGES];
    for (int s = 0; s < q->stages; s++) first[s] = q->stage[s].first_layer;
    bg_partition_t *again = NULL;
    assert_int_equal(bg_partition_evaluate(&devices, first, &again), BG_OK);
    assert_true(again->fits);
    assert_true(again->bottleneck_s == q->bottleneck_s);
    bg_partition_destroy(again);
    step_searches_differ += check_search_devices_step(cfg, b, q);
    /* Bounded by the fastest slowest stage, it finds one as fast; by less,
     * none, having tried every split. */
    const double fastest = q->bottleneck_s;
    bg_partition_destroy(q);
    q = search_every_split(cfg, BG_PARTITION_SLOWEST_STAGE, fastest);
    assert_non_null(q);
    assert_true(q->bottleneck_s == fastest);
    bg_partition_destroy(q);
    assert_null(search_every_split(cfg, BG_PARTITION_SLOWEST_STAGE, nextafter(fastest, 0)));
}

/* With residual models (check_against_brute_force's `residual`): the
 * models that had a block, and the planned splits a boundary of which
 * could be moved inside one (check_refused_inside). */
static int blocked_models, refused_splits;

/* `count` random instances of models at `scale` (random_model, or with
 * `residual` random_residual_model) into up to `most_stages` stages (and
 * no more than the model's units), with capacities around the whole
 * model's peak or, with caps_of_stages, tight_capacities: the programme's
 * bottleneck (or smallest overflow) is the brute force's, and so are the
 * least total (check_least_total) and the least step (check_least_step);
 * every stage of the three starts outside the residual blocks
 * (check_legal_starts). Without blocks the split is also the plain
 * programme's (reference_split, whose one-layer stages would cut blocks);
 * with them the boundaries are checked (check_cuts), a split into a block
 * is refused (check_refused_inside), and so is a stage more than the units
 * (check_most_stages). At least least_feasible instances must fit and
 * least_infeasible not, so that both kinds are exercised, and in
 * least_inside_wins the least step must beat both ends of the front. */
static void check_against_brute_force(uint64_t seed, int count, int scale, int most_stages,
                                      int caps_of_stages, int least_feasible, int least_infeasible,
                                      int least_inside_wins, int residual) {
    int feasible = 0, infeasible = 0, inside_wins = 0;
    bg_rng_t rng, gpu_rng;
    bg_rng_seed(&rng, seed, 7);
    bg_rng_seed(&gpu_rng, seed, 8);
    for (int instance = 0; instance < count; instance++) {
        bg_model_spec_t *spec =
            residual ? random_residual_model(&rng, scale) : random_model(&rng, scale);
        bg_cost_config_t cc = BG_COST_CONFIG_INIT;
        cc.spec = spec;
        random_cost_config(&rng, &cc);
        cc.forward_only = forward_only_all;
        bg_cost_model_t *model = NULL;
        assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);

        /* Without blocks the units are the layers. */
        const int n = spec->num_layers, units = check_cuts(model, spec);
        assert_true(residual || units == n);
        if (residual) {
            blocked_models += units < n;
            check_most_stages(model, units, n);
        }
        int max_stages = units < most_stages ? units : most_stages;
        int stages = 1 + (int)bg_rng_below(&rng, (uint64_t)max_stages);
        int chunks = stages % 2 == 0 && bg_rng_below(&rng, 3) == 0 ? 2 : 1;
        if (chunked_only && max_stages >= 2) {
            stages = 2 * (1 + (int)bg_rng_below(&rng, (uint64_t)(max_stages / 2)));
            chunks = 2;
        }
        int devices = stages / chunks;
        /* Capacities around what one stage of the whole model would need,
         * so that some instances fit and some do not. */
        bg_cost_stage_t whole = {.first_layer = 0, .last_layer = n, .stash_slots = 1};
        bg_cost_memory_t all = bg_cost_stage_memory(model, &whole);
        bg_cost_device_t dev[MAX_STAGES];
        bg_cost_link_t links[MAX_STAGES * MAX_STAGES];
        int slots[MAX_STAGES];
        for (int d = 0; d < devices; d++) {
            bg_cost_device_t one = BG_COST_DEVICE_CPU_CORE_INIT;
            one.flops_per_s = 1e9 * (1 + 9 * bg_rng_uniform(&rng));
            one.op_overhead_s = 1e-6 * bg_rng_uniform(&rng);
            double share = 0.15 + 0.9 * bg_rng_uniform(&rng);
            one.memory_bytes = bg_rng_below(&rng, 8) == 0
                                   ? 0
                                   : (size_t)(share * (double)bg_cost_memory_peak(&all));
            /* Some are GPUs, whose stages holding a convolution count a
             * workspace limit of their own: the search must stay exact.
             * (Drawn apart, so the instances stay those tuned below.) */
            if (bg_rng_below(&gpu_rng, 3) == 0) {
                one.own_conv_workspace = 1;
                one.conv_workspace_bytes =
                    (size_t)(0.3 * bg_rng_uniform(&gpu_rng) * (double)bg_cost_memory_peak(&all));
            }
            dev[d] = one;
        }
        for (int i = 0; i < devices * devices; i++)
            links[i] = (bg_cost_link_t){.bytes_per_s = 1e8 * (1 + 99 * bg_rng_uniform(&rng)),
                                        .latency_s = 1e-5 * bg_rng_uniform(&rng)};
        for (int s = 0; s < stages; s++) slots[s] = 1 + (int)bg_rng_below(&rng, 4);

        bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
        pc.model = model;
        pc.devices = devices;
        pc.chunks = chunks;
        pc.device = dev;
        pc.links = bg_rng_below(&rng, 4) == 0 ? NULL : links;
        pc.stash_slots = slots;
        if (caps_of_stages) tight_capacities(&rng, &pc, dev);
        bg_partition_t *p = NULL;
        assert_int_equal(bg_partition_create(&pc, &p), BG_OK);
        assert_int_equal(p->stages, stages);
        assert_int_equal(p->stage[0].first_layer, 0);
        assert_int_equal(p->stage[stages - 1].last_layer, n);
        for (int s = 1; s < stages; s++)
            assert_int_equal(p->stage[s].first_layer, p->stage[s - 1].last_layer);
        check_legal_starts(&pc, p);

        if (residual) {
            refused_splits += check_refused_inside(&pc, p);
        } else {
            /* The same split as the plain programme, ties included. */
            int want[MAX_STAGES];
            reference_split(&pc, stages, n, want);
            for (int s = 0; s < stages; s++) assert_int_equal(p->stage[s].first_layer, want[s]);
        }

        int first[MAX_STAGES] = {0};
        brute_t b = {.any_fits = 0,
                     .best_time = 0,
                     .best_total = 0,
                     .best_step = 0,
                     .best_overflow = SIZE_MAX};
        brute_force(&pc, first, 1, stages, n, &b);
        assert_int_equal(p->fits, b.any_fits);
        check_search_devices(&pc, &b);
        check_least_total(&pc, p, &b);
        inside_wins += check_least_step(&pc, p, &b);
        if (b.any_fits) {
            feasible++;
            assert_true(p->bottleneck_s == b.best_time);
            assert_int_equal(p->worst_stage, -1);
        } else {
            infeasible++;
            assert_int_equal(p->overflow_bytes, b.best_overflow);
            /* ... and the fastest of the splits that overflow that little. */
            assert_true(p->bottleneck_s == b.overflow_time);
            const bg_partition_stage_t *w = &p->stage[p->worst_stage];
            assert_int_equal(w->peak_bytes - w->capacity_bytes, p->overflow_bytes);
        }
        for (int s = 0; s < stages; s++) {
            assert_int_equal(p->stage[s].device, s % devices);
            size_t over =
                p->stage[s].capacity_bytes && p->stage[s].peak_bytes > p->stage[s].capacity_bytes
                    ? p->stage[s].peak_bytes - p->stage[s].capacity_bytes
                    : 0;
            assert_true(over <= p->overflow_bytes);
            assert_true(p->stage[s].seconds <= p->bottleneck_s);
        }
        bg_partition_destroy(p);
        bg_cost_model_destroy(model);
        bg_model_spec_destroy(spec);
    }
    /* Both kinds of instance were exercised. */
    assert_true(feasible >= least_feasible);
    assert_true(infeasible >= least_infeasible);
    /* Some instances' least step lies inside the front, not at its ends. */
    print_message("feasible %d infeasible %d inside wins %d\n", feasible, infeasible, inside_wins);
    assert_true(inside_wins >= least_inside_wins);
}

static void test_dp_equals_brute_force(void **state) {
    (void)state;
    /* 9 of these 500 instances have their least step inside the front. */
    check_against_brute_force(2024, 500, 1, MAX_STAGES, 0, 50, 30, 8, 0);
}

/* A stage that starts at a relu cut from its convolution runs the relu's
 * own pass, and can compute more than the longer stage from the
 * convolution: here a 1x1 convolution over one channel (6 FLOP a value
 * with its gradients) before a relu (9.6 as a pass of its own), over a
 * link fast enough that sends do not tip it. The programme's search down
 * from the relu must go on past it (a review: it stopped there, and chose
 * the split at layer 8, 0.111010 ms, over the brute force's at 6, 0.110487,
 * with or without a recompute). */
static void test_dp_goes_past_a_dearer_cut_relu(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse("input channels=1 height=40 width=40\n"
                                  "conv2d filters=1 kernel=3 padding=same\n"
                                  "conv2d filters=1 kernel=3 padding=same\n"
                                  "conv2d filters=1 kernel=3 padding=same\n"
                                  "conv2d filters=1 kernel=3 padding=same\n"
                                  "conv2d filters=1 kernel=3 padding=same\n"
                                  "conv2d filters=1 kernel=3 padding=same\n"
                                  "conv2d filters=1 kernel=1\n"
                                  "relu\n"
                                  "conv2d filters=1 kernel=7 padding=same\n"
                                  "flatten\n"
                                  "dense units=2\n"
                                  "softmax_cross_entropy\n");
    for (int recompute = 0; recompute <= 1; recompute++) {
        bg_cost_config_t cc = BG_COST_CONFIG_INIT;
        cc.spec = spec;
        cc.batch = 64;
        cc.microbatches = 4;
        cc.recompute = recompute;
        bg_cost_model_t *model = NULL;
        assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
        bg_cost_device_t dev[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
        assert_int_equal(bg_cost_model_prepare(model, dev, 2), BG_OK);
        bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
        pc.model = model;
        pc.devices = 2;
        pc.device = dev;
        pc.link = (bg_cost_link_t){.bytes_per_s = 1e13, .latency_s = 0};
        bg_partition_t *p = NULL;
        assert_int_equal(bg_partition_create(&pc, &p), BG_OK);
        int first[MAX_STAGES] = {0};
        brute_t b = {.best_overflow = SIZE_MAX};
        brute_force(&pc, first, 1, 2, spec->num_layers, &b);
        assert_true(b.any_fits);
        assert_true(p->bottleneck_s == b.best_time);
        assert_int_equal(p->stage[1].first_layer, 6);
        /* The relu's start is dearer than the convolution's, as above. */
        const int at_relu[2] = {0, 7}, at_convolution[2] = {0, 6};
        bg_partition_t *relu = NULL, *convolution = NULL;
        assert_int_equal(bg_partition_evaluate(&pc, at_relu, &relu), BG_OK);
        assert_int_equal(bg_partition_evaluate(&pc, at_convolution, &convolution), BG_OK);
        assert_true(relu->stage[1].seconds - relu->stage[1].send_s >
                    convolution->stage[1].seconds - convolution->stage[1].send_s);
        bg_partition_destroy(relu);
        bg_partition_destroy(convolution);
        bg_partition_destroy(p);
        bg_cost_model_destroy(model);
    }
    bg_model_spec_destroy(spec);
}

/* Deeper models (up to 39 layers, many of them relus whose stage times
 * tie) into up to 4 stages: long runs of equal values in the programme's
 * rows, over which its search jumps. */
static void test_dp_equals_brute_force_deeper(void **state) {
    (void)state;
    check_against_brute_force(77, 150, 4, 4, 0, 20, 10, 5, 0);
}

/* Capacities at what the stages of a random split need (tight_capacities):
 * many starts of a stage fit no longer, and the least-total programme
 * prices starts that do not fit before the one that does, on either side
 * (a search that never looked below a start that did not fit passes the
 * tests above but fails this one). */
static void test_dp_equals_brute_force_tight_memory(void **state) {
    (void)state;
    check_against_brute_force(31, 1000, 2, MAX_STAGES, 1, 200, 300, 10, 0);
}

/* Evaluations' stages (forward only) under tight capacities: a stage's
 * input-sized memory has no input gradient, and a short stage's lower
 * bound on longer ones must not count one (it once wrapped below zero and
 * ruled out stages that fit). */
static void test_dp_equals_brute_force_forward_only(void **state) {
    (void)state;
    forward_only_all = 1;
    check_against_brute_force(32, 600, 2, MAX_STAGES, 1, 150, 150, 0, 0);
}

/* Two stages a device: the least step's split balances each device's two
 * stages. Of the 218 instances of 1,500 that fit, 203 get the brute
 * force's step (200 in an earlier count of this comment; 213 and 193
 * before the cost model counted the arena's padding of each buffer; 215
 * and 200 before the analytic costs left out the first layer's dX,
 * 1c025a6; the programme's splits alone, before balance_devices, got 162
 * of those 200); at least 90% must. */
static void test_least_step_two_chunks(void **state) {
    (void)state;
    chunked_only = 1;
    chunked_fits = chunked_optimal = 0;
    searched_chunked = step_searches_differ = 0;
    check_against_brute_force(5, 1500, 2, MAX_STAGES, 0, 0, 0, 0, 0);
    assert_true(chunked_fits >= 200);
    assert_true(chunked_optimal >= 0.9 * chunked_fits);
    /* The search per device found splits in 59 instances where none keeps
     * each stage within 1/V of its device (the programme's check; 58 before
     * sends were priced at a mean micro-batch, 84 before the padding: these
     * random models' tensors are small, so it moves their capacities, drawn
     * from the whole model's peak); in 204 its least step's split is not its
     * slowest stage's (202 before the sends, 208 in an earlier count). */
    print_message("fit: %d, the brute force's step: %d; per device only: %d, least step "
                  "differs: %d\n",
                  chunked_fits, chunked_optimal, searched_chunked, step_searches_differ);
    assert_true(searched_chunked >= 50);
    assert_true(step_searches_differ >= 200);
}

/* Models with residual blocks (random_residual_model): the programme runs
 * over units, so its splits (every objective) start no stage inside a
 * block, and its bottleneck, fit, overflow, least total and least step are
 * the brute force's over the splits that start none there; a split into a
 * block is refused, and so are more stages than units. Into up to 5
 * stages, capacities around the whole model's peak and then those of a
 * random split (tight_capacities). */
static void test_dp_keeps_residual_blocks_whole(void **state) {
    (void)state;
    blocked_models = refused_splits = 0;
    /* 69 fit, 181 do not, 5 least steps inside the front. */
    check_against_brute_force(404, 250, 1, MAX_STAGES, 0, 50, 130, 3, 1);
    /* Longer runs of blocks (scale 2), tight capacities: 83, 167 and 3. */
    check_against_brute_force(405, 250, 2, MAX_STAGES, 1, 60, 120, 2, 1);
    /* 483 of the 500 models have a block, and for 378 a boundary of the
     * split could be moved into one. */
    assert_true(blocked_models >= 450);
    assert_true(refused_splits >= 300);
}

/* ---- the memory model against real stages ---- */

static void expect_same_memory(const bg_cost_memory_t *want, const bg_stage_memory_t *got) {
    assert_int_equal(want->params, got->params);
    assert_int_equal(want->grads, got->grads);
    assert_int_equal(want->optimizer, got->optimizer);
    assert_int_equal(want->stash_slot, got->stash_slot);
    assert_int_equal(want->stash, got->stash);
    assert_int_equal(want->buffers, got->buffers);
    assert_int_equal(want->workspace, got->workspace);
    assert_int_equal(want->padding, got->padding);
    assert_int_equal(want->params + want->grads + want->optimizer + want->stash + want->buffers +
                         want->workspace + want->padding,
                     got->arena);
}

/* A random stage of `spec`, from and to boundaries where a stage may start
 * or end (bg_model_spec_block_cut; without blocks, any), priced by the cost
 * model and allocated by bg_stage_create: the same bytes, part by part
 * (with blocks: a skip gradient for each depth of nesting in the stage,
 * in buffers; forward-only: no gradients, optimizer state or buffers).
 * Returns that depth. */
static int check_stages_of(bg_model_spec_t *spec, bg_rng_t *rng, bg_dtype_t dtype,
                           int forward_only) {
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = spec;
    cc.dtype = dtype;
    random_cost_config(rng, &cc);
    cc.forward_only = forward_only;
    bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
    cpu.dtype = dtype;
    bg_backend_t *be = NULL;
    assert_int_equal(bg_backend_cpu_create(&cpu, &be), BG_OK);
    bg_cost_model_t *model = NULL;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    int n = spec->num_layers, bound[64], bounds = 0;
    assert_true(n < 64);
    for (int l = 0; l <= n; l++)
        if (bg_model_spec_block_cut(spec, l) < 0) bound[bounds++] = l;
    assert_int_equal(bound[bounds - 1], n);
    const int from = (int)bg_rng_below(rng, (uint64_t)(bounds - 1));
    const int to = from + 1 + (int)bg_rng_below(rng, (uint64_t)(bounds - 1 - from));
    const int first = bound[from], last = bound[to];
    bg_cost_stage_t cs = {
        .first_layer = first, .last_layer = last, .stash_slots = 1 + (int)bg_rng_below(rng, 4)};
    bg_stage_config_t sc = BG_STAGE_CONFIG_INIT;
    sc.spec = spec;
    sc.first_layer = first;
    sc.last_layer = last;
    sc.backend = be;
    sc.max_batch = bg_cost_model_microbatch(model);
    sc.optimizer = cc.optimizer;
    sc.stash_slots = cs.stash_slots;
    sc.split_backward = cc.split_backward;
    sc.recompute = cc.recompute;
    sc.forward_only = forward_only;
    bg_stage_t *stage = NULL;
    assert_int_equal(bg_stage_create(&sc, &stage), BG_OK);
    bg_cost_memory_t want = bg_cost_stage_memory(model, &cs);
    bg_stage_memory_t got = bg_stage_memory(stage);
    expect_same_memory(&want, &got);
    if (forward_only) assert_int_equal(got.grads + got.optimizer + got.buffers, 0);
    bg_stage_destroy(stage);
    bg_cost_model_destroy(model);
    bg_backend_destroy(be);
    return deepest_blocks(spec, first, last);
}

static void test_memory_matches_stages(void **state) {
    (void)state;
    bg_rng_t rng;
    bg_rng_seed(&rng, 99, 1);
    bg_model_spec_t *origin = parse(origin_cnn);
    for (int i = 0; i < 40; i++)
        check_stages_of(origin, &rng, i % 4 == 0 ? BG_F64 : BG_F32, i % 3 == 1);
    bg_model_spec_destroy(origin);
    for (int i = 0; i < 150; i++) {
        bg_model_spec_t *spec = random_model(&rng, 1);
        check_stages_of(spec, &rng, i % 5 == 0 ? BG_F64 : BG_F32, i % 3 == 1);
        bg_model_spec_destroy(spec);
    }
    /* Residual models: stages that keep blocks whole, some of them blocks
     * nested two or three deep (as many skip gradients). */
    int blocks = 0, nested = 0;
    for (int i = 0; i < 100; i++) {
        bg_model_spec_t *spec = random_residual_model(&rng, 1);
        const int depth = check_stages_of(spec, &rng, i % 5 == 0 ? BG_F64 : BG_F32, i % 3 == 1);
        blocks += depth >= 1;
        nested += depth >= 2;
        bg_model_spec_destroy(spec);
    }
    /* 49 of these stages hold a block, 20 blocks nested. */
    assert_true(blocks >= 35);
    assert_true(nested >= 12);
    /* Shortcut branches, whose shortcut hands the block's input on (its
     * output is the input's shape, wider than the main branch's here) and
     * whose blocks nest in a shortcut branch. */
    bg_model_spec_t *shortcuts = parse(shortcut_model);
    for (int i = 0; i < 40; i++)
        check_stages_of(shortcuts, &rng, i % 4 == 0 ? BG_F64 : BG_F32, i % 3 == 1);
    bg_model_spec_destroy(shortcuts);
}

/* Whole pipelines: stash slots from the schedule (forward-only: one),
 * and the channels (forward-only: no gradients'). */
static void check_pipeline_as(const bg_model_spec_t *spec, const char *devices_text,
                              bg_schedule_kind_t kind, int chunks, int microbatches, int recompute,
                              const int *split, int forward_only) {
    bg_device_list_t devices;
    assert_int_equal(bg_device_list_parse(devices_text, 2, &devices), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.devices = &devices;
    cfg.schedule = kind;
    cfg.chunks = chunks;
    cfg.microbatches = microbatches;
    cfg.batch = 10;
    cfg.split = split;
    cfg.recompute = recompute;
    cfg.forward_only = forward_only;
    bg_pipeline_t *pipe = NULL;
    assert_int_equal(bg_pipeline_create(&cfg, &pipe), BG_OK);
    const bg_schedule_t *sched = bg_pipeline_schedule(pipe);
    int stages = bg_pipeline_stage_count(pipe);

    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = spec;
    cc.batch = cfg.batch;
    cc.microbatches = microbatches;
    cc.optimizer = cfg.optimizer;
    cc.recompute = recompute;
    cc.split_backward = sched->split_backward;
    cc.forward_only = forward_only;
    bg_cost_model_t *model = NULL;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    int slots[16], first[16];
    bg_cost_device_t dev[16];
    for (int s = 0; s < stages; s++) {
        slots[s] = forward_only ? 1 : bg_schedule_stash_slots(sched, s);
        first[s] = bg_pipeline_stage_info(pipe, s).first_layer;
        assert_true(bg_model_spec_block_cut(spec, first[s]) < 0); /* given or balanced */
    }
    for (int d = 0; d < devices.count; d++) dev[d] = (bg_cost_device_t)BG_COST_DEVICE_CPU_CORE_INIT;
    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = model;
    pc.devices = devices.count;
    pc.chunks = chunks;
    pc.device = dev;
    pc.stash_slots = slots;
    bg_partition_t *p = NULL;
    assert_int_equal(bg_partition_evaluate(&pc, first, &p), BG_OK);
    for (int s = 0; s < stages; s++) {
        bg_pipeline_stage_info_t info = bg_pipeline_stage_info(pipe, s);
        assert_int_equal(p->stage[s].last_layer, info.last_layer);
        assert_int_equal(info.stash_slots, slots[s] < 1 ? 1 : slots[s]);
        expect_same_memory(&p->stage[s].memory, &info.memory);
        assert_int_equal(p->stage[s].memory.channels, info.channel_bytes);
    }
    bg_partition_destroy(p);
    bg_cost_model_destroy(model);
    bg_pipeline_destroy(pipe);
}

/* The same pipeline training, and evaluating only. */
static void check_pipeline(const bg_model_spec_t *spec, const char *devices_text,
                           bg_schedule_kind_t kind, int chunks, int microbatches, int recompute,
                           const int *split) {
    for (int forward_only = 0; forward_only < 2; forward_only++)
        check_pipeline_as(spec, devices_text, kind, chunks, microbatches, recompute, split,
                          forward_only);
}

static void test_memory_matches_pipelines(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    const int split4[] = {4}, split3[] = {2, 4, 6};
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_1F1B, 1, 4, 0, split4);
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_GPIPE, 1, 3, 1, NULL);
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_ZB_H1, 1, 4, 1, split4);
    check_pipeline(spec, "cpu:3", BG_SCHEDULE_ZB_H1, 1, 5, 0, NULL);
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_INTERLEAVED, 2, 4, 0, split3);
    check_pipeline(spec, "cpu", BG_SCHEDULE_INTERLEAVED, 2, 3, 1, NULL);
    bg_model_spec_destroy(spec);

    /* With residual blocks: a block of convolutions, three nested over
     * vectors (a stage holding them keeps three skip gradients). Stages
     * may start at layers 0, 5..9 and 19..21 only; the given splits do,
     * and so must the balanced ones (NULL). */
    spec = parse("input channels=2 height=6 width=6\n"
                 "residual\n"                                               /* 0 */
                 "conv2d filters=2 kernel=3 padding=same activation=relu\n" /* 1, 2 */
                 "conv2d filters=2 kernel=3 padding=same\n"                 /* 3 */
                 "add\n"                                                    /* 4 */
                 "relu\n"                                                   /* 5 */
                 "maxpool size=2\n"                                         /* 6 */
                 "flatten\n"                                                /* 7 */
                 "dense units=12\n"                                         /* 8 */
                 "residual\n"                                               /* 9 */
                 "dense units=12 activation=tanh\n"                         /* 10, 11 */
                 "residual\n"                                               /* 12 */
                 "layernorm\n"                                              /* 13 */
                 "residual\n"                                               /* 14 */
                 "relu\n"                                                   /* 15 */
                 "add\n"                                                    /* 16 */
                 "add\n"                                                    /* 17 */
                 "add\n"                                                    /* 18 */
                 "dropout rate=0.25\n"                                      /* 19 */
                 "dense units=3\n"                                          /* 20 */
                 "softmax_cross_entropy\n");
    assert_int_equal(spec->num_layers, 22);
    for (int l = 0; l < 22; l++)
        assert_int_equal(bg_model_spec_block_cut(spec, l) < 0,
                         l == 0 || (l >= 5 && l <= 9) || l >= 19);
    assert_int_equal(deepest_blocks(spec, 9, 22), 3);
    const int nested[] = {9}, conv[] = {5}, three[] = {6, 19}, four[] = {5, 9, 19};
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_1F1B, 1, 4, 0, nested);
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_ZB_H1, 1, 4, 1, conv);
    check_pipeline(spec, "cpu:3", BG_SCHEDULE_GPIPE, 1, 5, 0, three);
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_INTERLEAVED, 2, 4, 0, four);
    check_pipeline(spec, "cpu:3", BG_SCHEDULE_ZB_H1, 1, 5, 0, NULL);
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_GPIPE, 1, 2, 1, NULL);
    check_pipeline(spec, "cpu", BG_SCHEDULE_INTERLEAVED, 2, 3, 1, NULL);
    bg_model_spec_destroy(spec);

    /* Shortcut branches, cut before and between the two blocks. */
    spec = parse(shortcut_model);
    const int before[] = {2}, between[] = {9}, around[] = {2, 11};
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_1F1B, 1, 4, 0, before);
    check_pipeline(spec, "cpu:2", BG_SCHEDULE_ZB_H1, 1, 4, 1, between);
    check_pipeline(spec, "cpu:3", BG_SCHEDULE_GPIPE, 1, 5, 0, around);
    check_pipeline(spec, "cpu:3", BG_SCHEDULE_ZB_H1, 1, 5, 1, NULL);
    bg_model_spec_destroy(spec);

    /* Random residual models, balanced into 2 or 3 stages (and 2 x 2
     * interleaved): legal starts, and the bytes of each stage. */
    static const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_1F1B, BG_SCHEDULE_GPIPE,
                                               BG_SCHEDULE_ZB_H1};
    bg_rng_t rng;
    bg_rng_seed(&rng, 5, 5);
    for (int i = 0; i < 30; i++) {
        spec = random_residual_model(&rng, 1 + i % 2);
        check_pipeline(spec, i % 2 ? "cpu:3" : "cpu:2", kinds[i % 3], 1, 1 + i % 5, (i / 3) % 2,
                       NULL);
        if (i % 4 == 0)
            check_pipeline(spec, "cpu:2", BG_SCHEDULE_INTERLEAVED, 2, 2 + 2 * (i / 4 % 2),
                           (i / 4) % 2, NULL);
        bg_model_spec_destroy(spec);
    }
}

/* A given split with V = 2 chunks a device, checked per device: the origin
 * CNN at M = 4 (Adam) on cpu:2, split 2,4,6. Device 0 holds stages 0
 * (the convolution) and 2 (the 5408 x 128 dense layer), device 1 stages 1
 * and 3. With each device's capacity exactly what its two stages need
 * together, the split fits per device and not per stage (stage 2 alone
 * needs more than half of device 0); a byte less on device 0 and it is 1
 * byte over, named as device 0. */
static void test_given_split_per_device(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = spec;
    cc.batch = 16;
    cc.microbatches = 4;
    bg_cost_model_t *model = NULL;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.kind = BG_SCHEDULE_INTERLEAVED;
    sc.devices = 2;
    sc.chunks = 2;
    sc.microbatches = 4;
    bg_schedule_t *sched = NULL;
    assert_int_equal(bg_schedule_create(&sc, &sched), BG_OK);
    int slots[4];
    for (int s = 0; s < 4; s++) slots[s] = bg_schedule_stash_slots(sched, s);
    bg_cost_device_t dev[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = model;
    pc.devices = 2;
    pc.chunks = 2;
    pc.device = dev;
    pc.stash_slots = slots;
    const int first[4] = {0, 2, 4, 6};
    bg_partition_t *p = NULL;
    assert_int_equal(bg_partition_evaluate(&pc, first, &p), BG_OK); /* no capacity: the peaks */
    size_t peak[4];
    for (int s = 0; s < 4; s++) peak[s] = p->stage[s].peak_bytes;
    bg_partition_destroy(p);
    const size_t device0 = peak[0] + peak[2], device1 = peak[1] + peak[3];
    assert_true(peak[2] > device0 / 2); /* over a stage's half of device 0 */
    dev[0].memory_bytes = device0;
    dev[1].memory_bytes = device1;

    /* Per stage (the programme's check): stage 2 over half of device 0. */
    assert_int_equal(bg_partition_evaluate(&pc, first, &p), BG_OK);
    assert_int_equal(p->memory_check, BG_PARTITION_CHECK_STAGES);
    assert_int_equal(p->fits, 0);
    assert_int_equal(p->worst_stage, 2);
    assert_int_equal(p->worst_device, 0);
    assert_int_equal(p->stage[2].capacity_bytes, device0 / 2);
    assert_int_equal(p->overflow_bytes, peak[2] - device0 / 2);
    bg_partition_destroy(p);

    /* Per device: fits, every stage with its whole device's capacity. */
    pc.memory_check = BG_PARTITION_CHECK_DEVICES;
    assert_int_equal(bg_partition_evaluate(&pc, first, &p), BG_OK);
    assert_int_equal(p->memory_check, BG_PARTITION_CHECK_DEVICES);
    assert_int_equal(p->fits, 1);
    assert_int_equal(p->worst_stage, -1);
    assert_int_equal(p->worst_device, -1);
    for (int s = 0; s < 4; s++) {
        assert_int_equal(p->stage[s].peak_bytes, peak[s]);
        assert_int_equal(p->stage[s].capacity_bytes, s % 2 == 0 ? device0 : device1);
    }
    assert_int_equal(bg_partition_device_peak_bytes(p, 0), device0);
    assert_int_equal(bg_partition_device_peak_bytes(p, 1), device1);
    const double given_slowest = p->bottleneck_s;
    const double given_step = bg_partition_step_seconds(p, &pc);
    bg_partition_destroy(p);

    /* The search per device tries all 35 splits within its budget and finds
     * one at least as fast as this one, which fits; with a budget of one
     * pricing it stops first, and says so. It minimises the slowest stage
     * with each device's stages together, and nothing else. */
    int complete = 0;
    assert_int_equal(bg_partition_search_devices(&pc, DBL_MAX, 1000, &p, &complete), BG_OK);
    assert_int_equal(complete, 1);
    assert_non_null(p);
    assert_int_equal(p->fits, 1);
    assert_int_equal(p->memory_check, BG_PARTITION_CHECK_DEVICES);
    assert_true(p->bottleneck_s <= given_slowest);
    bg_partition_destroy(p);
    assert_int_equal(bg_partition_search_devices(&pc, DBL_MAX, 1, &p, &complete), BG_OK);
    assert_int_equal(complete, 0);
    assert_null(p);
    pc.memory_check = BG_PARTITION_CHECK_STAGES;
    assert_int_equal(bg_partition_search_devices(&pc, DBL_MAX, 1000, &p, &complete),
                     BG_ERR_INVALID);
    assert_null(p);
    pc.memory_check = BG_PARTITION_CHECK_DEVICES;
    pc.objective = BG_PARTITION_LEAST_TOTAL;
    assert_int_equal(bg_partition_search_devices(&pc, DBL_MAX, 1000, &p, &complete),
                     BG_ERR_INVALID);
    assert_null(p);
    /* The least step's search finds a split no slower in its step than
     * the given one (it fits as given). */
    pc.objective = BG_PARTITION_LEAST_STEP;
    assert_int_equal(bg_partition_search_devices(&pc, DBL_MAX, 1000, &p, &complete), BG_OK);
    assert_int_equal(complete, 1);
    assert_non_null(p);
    assert_int_equal(p->fits, 1);
    assert_true(bg_partition_step_seconds(p, &pc) <= given_step);
    bg_partition_destroy(p);
    pc.objective = BG_PARTITION_SLOWEST_STAGE;

    /* A byte short on device 0: device 0 is over by that byte, its larger
     * stage (2) named; 5 bytes short on device 1 too: device 1 is worse. */
    dev[0].memory_bytes = device0 - 1;
    assert_int_equal(bg_partition_evaluate(&pc, first, &p), BG_OK);
    assert_int_equal(p->fits, 0);
    assert_int_equal(p->worst_device, 0);
    assert_int_equal(p->worst_stage, 2);
    assert_int_equal(p->overflow_bytes, 1);
    bg_partition_destroy(p);
    dev[1].memory_bytes = device1 - 5;
    assert_int_equal(bg_partition_evaluate(&pc, first, &p), BG_OK);
    assert_int_equal(p->fits, 0);
    assert_int_equal(p->worst_device, 1);
    assert_int_equal(p->overflow_bytes, 5);
    assert_int_equal(p->worst_stage, peak[3] > peak[1] ? 3 : 1);
    bg_partition_destroy(p);

    /* The programme checks per stage only; an unknown check is refused. */
    p = NULL;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "bg_partition_search_devices checks devices whole"));
    pc.memory_check = (bg_partition_memory_check_t)5;
    assert_int_equal(bg_partition_evaluate(&pc, first, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "partition: unknown memory check 5"));
    assert_null(p);

    /* V = 1: a device holds one stage, and the two checks are one. */
    bg_partition_config_t one = pc;
    one.memory_check = BG_PARTITION_CHECK_DEVICES;
    one.devices = 4;
    one.chunks = 1;
    bg_cost_device_t four[4];
    for (int d = 0; d < 4; d++) four[d] = dev[0];
    one.device = four;
    assert_int_equal(bg_partition_create(&one, &p), BG_OK);
    assert_int_equal(p->memory_check, BG_PARTITION_CHECK_STAGES);
    bg_partition_destroy(p);
    assert_int_equal(bg_partition_evaluate(&one, first, &p), BG_OK);
    assert_int_equal(p->memory_check, BG_PARTITION_CHECK_STAGES);
    assert_int_equal(p->stage[2].capacity_bytes, device0 - 1);
    bg_partition_destroy(p);

    bg_schedule_destroy(sched);
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);
}

/* ---- step time, recompute, errors ---- */

/* bg_cost_range_floor is a bound from below on every stage that holds the
 * range (the plan's advice says a layer cannot fit any stage on that
 * bound), category by category but for the padding, which a wider buffer
 * may have less of (the floor's peak, padding included, stays below): on
 * random models and settings, each unit between two cuts against every
 * stage around it, at random slots, on a CPU core and on a GPU. Where the
 * stage is the unit itself, only its ends may add: its parameters and
 * workspace are the floor's. */
static void test_range_floor_below_every_stage(void **state) {
    (void)state;
    bg_rng_t rng;
    bg_rng_seed(&rng, 41, 3);
    int below = 0;
    for (int instance = 0; instance < 120; instance++) {
        bg_model_spec_t *spec =
            instance % 2 ? random_residual_model(&rng, 2) : random_model(&rng, 2);
        bg_cost_config_t cc = BG_COST_CONFIG_INIT;
        cc.spec = spec;
        random_cost_config(&rng, &cc);
        cc.forward_only = instance % 5 == 0;
        bg_cost_model_t *model = NULL;
        assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
        bg_cost_device_t device = BG_COST_DEVICE_CPU_CORE_INIT;
        if (instance % 3 == 0) {
            device.own_conv_workspace = 1;
            device.conv_workspace_bytes = 1000 * bg_rng_below(&rng, 100);
        }
        int places = 0;
        const int *cut = bg_cost_model_cuts(model, &places);
        for (int u = 0; u + 1 < places; u++) {
            const bg_cost_memory_t floor = bg_cost_range_floor(model, cut[u], cut[u + 1], &device);
            for (int a = 0; a <= u; a++)
                for (int b = u + 1; b < places; b++) {
                    const bg_cost_stage_t stage = {.first_layer = cut[a],
                                                   .last_layer = cut[b],
                                                   .stash_slots = 1 + (int)bg_rng_below(&rng, 4),
                                                   .input_channel_slots =
                                                       (int)bg_rng_below(&rng, 3),
                                                   .grad_channel_slots = (int)bg_rng_below(&rng, 3),
                                                   .device = &device};
                    const bg_cost_memory_t m = bg_cost_stage_memory(model, &stage);
                    assert_true(floor.params <= m.params && floor.grads <= m.grads);
                    assert_true(floor.optimizer <= m.optimizer && floor.stash <= m.stash);
                    assert_true(floor.buffers <= m.buffers && floor.channels <= m.channels);
                    assert_true(floor.workspace <= m.workspace);
                    assert_true(floor.stash_slot <= m.stash_slot);
                    if (a == u && b == u + 1) {
                        assert_int_equal(floor.params, m.params);
                        assert_int_equal(floor.workspace, m.workspace);
                    }
                    assert_true(bg_cost_memory_peak(&floor) <= bg_cost_memory_peak(&m));
                    below += bg_cost_memory_peak(&floor) < bg_cost_memory_peak(&m);
                }
        }
        bg_cost_model_destroy(model);
        bg_model_spec_destroy(spec);
    }
    /* Every stage has an end that adds: an input or the labels at least. */
    assert_true(below > 1000);
}

/* A GPU counts its convolution workspace limit for a stage holding a
 * convolution and none for one without; a CPU core (or no device) the
 * model's im2col figure; the planner's stages the device they are on. */
static void test_gpu_conv_workspace(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn); /* conv2d is layer 0 */
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = spec;
    bg_cost_model_t *model = NULL;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    bg_cost_device_t cpu = BG_COST_DEVICE_CPU_CORE_INIT, gpu = cpu;
    gpu.own_conv_workspace = 1;
    gpu.conv_workspace_bytes = 5000000;
    bg_cost_stage_t conv = {.first_layer = 0, .last_layer = 4, .stash_slots = 1};
    const size_t im2col = bg_cost_stage_memory(model, &conv).workspace;
    assert_true(im2col > 0 && im2col != gpu.conv_workspace_bytes);
    conv.device = &cpu;
    assert_int_equal(bg_cost_stage_memory(model, &conv).workspace, im2col);
    conv.device = &gpu;
    assert_int_equal(bg_cost_stage_memory(model, &conv).workspace, 5000000);
    bg_cost_stage_t dense = {.first_layer = 4, .last_layer = 8, .stash_slots = 1, .device = &gpu};
    assert_int_equal(bg_cost_stage_memory(model, &dense).workspace, 0);
    bg_cost_stage_t middle = {.first_layer = 1, .last_layer = 8, .stash_slots = 1, .device = &gpu};
    assert_int_equal(bg_cost_stage_memory(model, &middle).workspace, 0);

    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);

    /* The partition prices each stage on its own device: the convolution
     * on the second stage, on a GPU and then on a CPU core, the first
     * stage (a relu) on the other. */
    spec = parse("input channels=1 height=6 width=6\nrelu\nconv2d filters=2 kernel=3\nflatten\n"
                 "dense units=3\nsoftmax_cross_entropy\n");
    cc.spec = spec;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    bg_cost_device_t pair[2] = {cpu, gpu};
    const int split[2] = {0, 1};
    for (int order = 0; order < 2; order++) {
        bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
        pc.model = model;
        pc.devices = 2;
        pc.device = pair;
        bg_partition_t *p = NULL;
        assert_int_equal(bg_partition_evaluate(&pc, split, &p), BG_OK);
        assert_int_equal(p->stage[0].memory.workspace, 0);
        if (order == 0)
            assert_int_equal(p->stage[1].memory.workspace, 5000000);
        else
            assert_true(p->stage[1].memory.workspace > 0 &&
                        p->stage[1].memory.workspace != 5000000);
        bg_partition_destroy(p);
        pair[0] = gpu;
        pair[1] = cpu;
    }
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);

    /* A layernorm's row statistics (2 floats a sample, batch 64 here) count
     * on a GPU too: alone, and beside a convolution's limit when larger. */
    spec = parse("input channels=1 height=6 width=6\nconv2d filters=2 kernel=3\nlayernorm\n"
                 "flatten\ndense units=3\nlayernorm\nsoftmax_cross_entropy\n");
    cc.spec = spec;
    cc.batch = 64;
    cc.microbatches = 1;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    bg_cost_stage_t norm = {.first_layer = 3, .last_layer = 6, .stash_slots = 1, .device = &gpu};
    assert_int_equal(bg_cost_stage_memory(model, &norm).workspace, 2 * 64 * sizeof(float));
    bg_cost_stage_t both = {.first_layer = 0, .last_layer = 6, .stash_slots = 1, .device = &gpu};
    assert_int_equal(bg_cost_stage_memory(model, &both).workspace, 5000000);
    gpu.conv_workspace_bytes = 100;
    assert_int_equal(bg_cost_stage_memory(model, &both).workspace, 2 * 64 * sizeof(float));
    norm.device = &cpu;
    assert_int_equal(bg_cost_stage_memory(model, &norm).workspace, 2 * 64 * sizeof(float));
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);
}

/* The analytic times of the whole origin CNN at M = 4 (16 samples a
 * micro-batch) on a device of 1 GFLOP/s and 1 ms per op: each layer's
 * forward is its FLOPs plus an op; backward twice the FLOPs and two ops for
 * the 3 layers with weights, once and one op for the other 5; W, the dW
 * part of backward that zb-h1 runs apart, the weighted layers' FLOPs and
 * their 3 dW ops. But the max-pool and the loss go by what they take a
 * value on a CPU core (cost_model.c), in FLOPs of BG_COST_CPU_CORE_FLOPS:
 * 0.45 ns forward and 0.40 dX for each of the pool's 32 x 13 x 13 x 4 window
 * values (its 32 x 26 x 26 inputs, which its 2x2 windows tile),
 * 5.2 and 0.33 for each of the loss's 10 logits, and the relus 0.12 and
 * 0.35 a value where they run on their own. */
static void test_analytic_times(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = spec;
    cc.microbatches = 4;
    bg_cost_model_t *model = NULL;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    bg_cost_device_t dev = BG_COST_DEVICE_CPU_CORE_INIT;
    dev.flops_per_s = 1e9;
    dev.op_overhead_s = 1e-3;
    const double per_ns = BG_COST_CPU_CORE_FLOPS / 1e9; /* FLOPs a nanosecond */
    /* Each layer's forward and dX priced per value, in whole FLOP-equivalents
     * a sample as the model sums them, or -1: by its FLOPs. The relu after
     * the convolution is done inside it forward and inside the max-pool's
     * dX; the one after the dense layer, 128 values, on its own. */
    const double priced_forward[8] = {-1,
                                      0,
                                      floor(0.45 * per_ns * 21632),
                                      -1,
                                      -1,
                                      floor(0.12 * per_ns * 128),
                                      -1,
                                      floor(5.2 * per_ns * 10)},
                 priced_dx[8] = {-1,
                                 0,
                                 floor(0.40 * per_ns * 21632),
                                 -1,
                                 -1,
                                 floor(0.35 * per_ns * 128),
                                 -1,
                                 floor(0.33 * per_ns * 10)};
    double forward = 0, dx = 0, weighted = 0;
    for (int l = 0; l < spec->num_layers; l++) {
        const double flops = (double)spec->layers[l].flops;
        forward += priced_forward[l] >= 0 ? priced_forward[l] : flops;
        /* Every layer's dX but the first's, which the executor never runs
         * (the convolution's: its FLOPs and its op). */
        if (l > 0) dx += priced_dx[l] >= 0 ? priced_dx[l] : flops;
        if (spec->layers[l].params > 0) weighted += flops;
    }
    const bg_cost_time_t t = bg_cost_stage_time(model, &dev, 0, spec->num_layers);
    assert_int_equal(spec->num_layers, 8);
    assert_int_equal(spec->layers[2].kind, BG_LAYER_MAXPOOL);
    assert_int_equal(bg_shape_numel(spec->layers[2].in), 21632);
    assert_true(fabs(t.forward - (16 * forward / 1e9 + 8e-3)) < 1e-12);
    /* The pool alone: 16 x 21632 x 0.45 ns of a core (0.156 ms; its 4 FLOPs
     * a window had priced it at 0.017), here at 1 GFLOP/s. */
    const bg_cost_time_t pool = bg_cost_stage_time(model, &dev, 2, 3);
    assert_true(fabs(pool.forward - (16 * floor(0.45 * per_ns * 21632) / 1e9 + 1e-3)) < 1e-12);
    assert_true(fabs(t.backward - (16 * (dx + weighted) / 1e9 + 10e-3)) < 1e-12);
    const double first = (double)spec->layers[0].flops;
    assert_true(fabs(t.weight - (16 * weighted / 1e9 + 3e-3)) < 1e-12);
    /* The first layer alone: its dW; two stages add up to the whole. */
    const bg_cost_time_t conv = bg_cost_stage_time(model, &dev, 0, 1);
    assert_true(fabs(conv.backward - conv.weight) < 1e-15);
    assert_true(fabs(conv.backward - (16 * first / 1e9 + 1e-3)) < 1e-12);
    const double halves = bg_cost_stage_time(model, &dev, 0, 4).backward +
                          bg_cost_stage_time(model, &dev, 4, spec->num_layers).backward;
    assert_true(fabs(halves - t.backward) < 1e-12);
    /* A stage cut between the relu and the convolution (the max-pool) that
     * would do its forward (dX) runs that pass on its own: stage_compute.c
     * fuses only within a stage. 0.12 and 0.35 ns a value, 21632 values. */
    const double relu_fwd = floor(0.12 * per_ns * 21632), relu_dx = floor(0.35 * per_ns * 21632);
    const bg_cost_time_t relu = bg_cost_stage_time(model, &dev, 1, 2);
    assert_true(fabs(relu.forward - (16 * relu_fwd / 1e9 + 1e-3)) < 1e-12);
    assert_true(fabs(relu.backward - (16 * relu_dx / 1e9 + 1e-3)) < 1e-12);
    const bg_cost_time_t with_conv = bg_cost_stage_time(model, &dev, 0, 2);
    assert_true(fabs(with_conv.forward - (conv.forward + 1e-3)) < 1e-12); /* the relu's op */
    assert_true(fabs(with_conv.backward - (conv.backward + 16 * relu_dx / 1e9 + 1e-3)) < 1e-12);
    const bg_cost_time_t with_pool = bg_cost_stage_time(model, &dev, 1, 3);
    assert_true(fabs(with_pool.forward - (relu.forward + pool.forward)) < 1e-12);
    assert_true(fabs(with_pool.backward - (pool.backward + 1e-3)) < 1e-12); /* in the pool's */
    /* Each layer as a stage of the whole model runs it (what a profile
     * times): the fused relu its two ops alone, layer 0 no dX. */
    const bg_cost_time_t relu_in_model = bg_cost_layer_time(model, &dev, 1);
    assert_true(fabs(relu_in_model.forward - 1e-3) < 1e-15);
    assert_true(fabs(relu_in_model.backward - 1e-3) < 1e-15);
    const bg_cost_time_t conv_in_model = bg_cost_layer_time(model, &dev, 0);
    assert_true(fabs(conv_in_model.backward - conv.backward) < 1e-15);
    assert_true(fabs(conv_in_model.forward - conv.forward) < 1e-15);

    /* Streaming weights at 100 MB/s, the dense layer's 2.8 MB take longer
     * than its FLOPs: its forward and its dX take the weights' time
     * instead (and the classifier's, by 10 us); the convolution's do not. Alike
     * before the model is prepared for the device (summed layer by layer)
     * and after (a table). */
    bg_cost_device_t slow = dev;
    slow.weight_bytes_per_s = 1e8;
    double excess = 0;
    for (int l = 0; l < spec->num_layers; l++) {
        const double stream = 4.0 * (double)spec->layers[l].params / 1e8;
        const double compute = 16.0 * (double)spec->layers[l].flops / 1e9;
        if (stream > compute) excess += stream - compute;
    }
    assert_true(excess > 5e-3); /* the dense layer's: 27.7 against 22.2 ms */
    for (int prepared = 0; prepared < 2; prepared++) {
        if (prepared) assert_int_equal(bg_cost_model_prepare(model, &slow, 1), BG_OK);
        const bg_cost_time_t u = bg_cost_stage_time(model, &slow, 0, spec->num_layers);
        assert_true(fabs(u.forward - (t.forward + excess)) < 1e-12);
        assert_true(fabs(u.backward - (t.backward + excess)) < 1e-12);
        assert_true(fabs(u.weight - t.weight) < 1e-12);
        /* A range without the dense layer has none of it. */
        const bg_cost_time_t front = bg_cost_stage_time(model, &slow, 0, 4);
        assert_true(fabs(front.forward - bg_cost_stage_time(model, &dev, 0, 4).forward) < 1e-12);
    }
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);

    /* tanh, sigmoid, gelu, layernorm and dropout are priced by what they
     * take on a CPU core, not by the one FLOP (seven for layernorm) a value
     * that summary counts: per value 14.5 / 0.50 ns (forward / dX), 2.58 /
     * 0.48, 8.32 / 11.74, layernorm 1.58 / 2.38 with 1.78 for dW, and
     * dropout 0.30 / 0.28 (cost_model.c), each that many nanoseconds of a
     * core's FLOPs. 10 values a sample, micro-batches of 16. */
    spec = parse("input channels=10 height=1 width=1\ntanh\nsigmoid\ngelu\nlayernorm\n"
                 "dropout\nsoftmax_cross_entropy\n");
    cc.spec = spec;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    static const double fwd_ns[5] = {14.5, 2.58, 8.32, 1.58, 0.30},
                        dx_ns[5] = {0.50, 0.48, 11.74, 2.38, 0.28};
    for (int l = 0; l < 5; l++) {
        const double fwd = fwd_ns[l] * per_ns, back = dx_ns[l] * per_ns;
        const bg_cost_time_t u = bg_cost_stage_time(model, &dev, l, l + 1);
        assert_true(fabs(u.forward - (16 * 10 * fwd / 1e9 + 1e-3)) < 1e-12);
        const double dw = l == 3 ? 1.78 * per_ns : 0;
        /* Layer 0 (tanh) has no dX run, and no weights: no backward. */
        const double backward = l == 0 ? 0 : 16 * 10 * (back + dw) / 1e9 + (l == 3 ? 2e-3 : 1e-3);
        assert_true(fabs(u.backward - backward) < 1e-12);
        assert_true(fabs(u.weight - (16 * 10 * dw / 1e9 + (l == 3 ? 1e-3 : 0))) < 1e-12);
    }
    assert_int_equal(spec->layers[0].flops, 10);
    assert_int_equal(spec->layers[3].flops, 70);
    /* Where they are memory-bound (a GPU), each pass streams its values at
     * the device's memory bandwidth instead: 2 per value forward (x, y), 3
     * for dX (2 for dropout's: no x or y), 2 for layernorm's dW; float
     * values, 1 GB/s here. */
    bg_cost_device_t streaming = dev;
    streaming.elementwise_memory_bound = 1;
    streaming.memory_bytes_per_s = 1e9;
    const double pass = 16 * 10 * 4 / 1e9; /* one float a value of the micro-batch */
    for (int l = 0; l < 5; l++) {
        const bg_cost_time_t u = bg_cost_stage_time(model, &streaming, l, l + 1);
        const double dw = l == 3 ? 2 * pass : 0, dx_pass = l == 4 ? 2 * pass : 3 * pass;
        assert_true(fabs(u.forward - (2 * pass + 1e-3)) < 1e-12);
        const double backward = l == 0 ? 0 : dx_pass + dw + (l == 3 ? 2e-3 : 1e-3);
        assert_true(fabs(u.backward - backward) < 1e-12);
        assert_true(fabs(u.weight - (dw + (l == 3 ? 1e-3 : 0))) < 1e-12);
    }
    /* The loss keeps its FLOPs there, 3 a class. */
    const bg_cost_time_t loss = bg_cost_stage_time(model, &streaming, 5, 6);
    assert_true(fabs(loss.forward - (16 * 30 / 1e9 + 1e-3)) < 1e-12);
    assert_true(fabs(loss.backward - (16 * 30 / 1e9 + 1e-3)) < 1e-12);
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);

    /* The pools per value of their windows (their FLOPs, outputs x size^2),
     * the loss per logit: max-pool 0.45 ns forward, dX 0.40 where 2x2
     * windows tile an even input and 0.95 elsewhere, avg-pool 0.60 / 0.85,
     * the loss 5.2 / 0.33. After a relu, whose dX is never run: a max-pool
     * tiling 2 x 12 x 12, an avg-pool of 2x2 windows at stride 1 (72
     * inputs, 200 window values), a max-pool tiling all but the last row
     * and column of 2 x 5 x 5, and the loss over 8 logits. */
    spec = parse("input channels=2 height=12 width=12\nrelu\nmaxpool size=2\n"
                 "avgpool size=2 stride=1\nmaxpool size=2\nflatten\nsoftmax_cross_entropy\n");
    cc.spec = spec;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    static const int layer[4] = {1, 2, 3, 5};
    static const int64_t inputs[4] = {288, 72, 50, 8}, priced[4] = {288, 200, 32, 8};
    static const double pool_fwd_ns[4] = {0.45, 0.60, 0.45, 5.2},
                        pool_dx_ns[4] = {0.40, 0.85, 0.95, 0.33};
    /* On a GPU, their FLOPs: the pools' window values, the loss's 3 a class. */
    static const int64_t bound[4] = {288, 200, 32, 24};
    for (int k = 0; k < 4; k++) {
        const int l = layer[k];
        assert_int_equal(bg_shape_numel(spec->layers[l].in), inputs[k]);
        assert_int_equal(spec->layers[l].flops, bound[k]);
        const bg_cost_time_t u = bg_cost_stage_time(model, &dev, l, l + 1);
        /* whole FLOP-equivalents a sample, as the model sums them */
        const double fwd = floor(pool_fwd_ns[k] * per_ns * (double)priced[k]),
                     back = floor(pool_dx_ns[k] * per_ns * (double)priced[k]);
        assert_true(fabs(u.forward - (16 * fwd / 1e9 + 1e-3)) < 1e-12);
        assert_true(fabs(u.backward - (16 * back / 1e9 + 1e-3)) < 1e-12);
        assert_true(fabs(u.weight) < 1e-15);
        const bg_cost_time_t g = bg_cost_stage_time(model, &streaming, l, l + 1);
        assert_true(fabs(g.forward - (16 * (double)bound[k] / 1e9 + 1e-3)) < 1e-12);
        assert_true(fabs(g.backward - (16 * (double)bound[k] / 1e9 + 1e-3)) < 1e-12);
    }
    /* Layer 0, the relu, has no dX run, and the max-pool after it in the
     * same stage does none for it either: a stage from layer 0 has the
     * backward of the same stage from layer 1 (a first version took the
     * relu's dX cut from the pool off it too). */
    const bg_cost_time_t from0 = bg_cost_stage_time(model, &dev, 0, 3),
                         from1 = bg_cost_stage_time(model, &dev, 1, 3);
    assert_true(fabs(from0.backward - from1.backward) < 1e-15);
    assert_true(fabs(bg_cost_stage_time(model, &dev, 0, 1).backward) < 1e-15);
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);
}

static void test_step_and_recompute(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = spec;
    cc.microbatches = 4;
    bg_cost_device_t dev[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    const int slots[2] = {2, 1}, split[2] = {0, 4};
    bg_partition_t *plain = NULL, *recompute = NULL;
    for (int r = 0; r < 2; r++) {
        cc.recompute = r;
        bg_cost_model_t *model = NULL;
        assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
        bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
        pc.model = model;
        pc.devices = 2;
        pc.device = dev;
        pc.stash_slots = slots;
        assert_int_equal(bg_partition_evaluate(&pc, split, r ? &recompute : &plain), BG_OK);
        bg_partition_t *p = r ? recompute : plain;
        /* gpipe/1f1b with two stages: sum of stages plus (M-1) bottlenecks. */
        double t0 = p->stage[0].seconds, t1 = p->stage[1].seconds;
        double want = t0 + t1 + 3 * (t0 > t1 ? t0 : t1);
        assert_true(fabs(bg_partition_step_seconds(p, &pc) - want) <= 1e-12 * want);
        bg_cost_model_destroy(model);
    }
    /* Recompute keeps only the input: less stash, more compute. */
    assert_true(recompute->stage[0].memory.stash < plain->stage[0].memory.stash);
    assert_true(recompute->stage[0].time.recompute > 0);
    assert_true(plain->stage[0].time.recompute == 0);
    assert_true(recompute->stage[0].seconds > plain->stage[0].seconds);
    bg_partition_destroy(plain);
    bg_partition_destroy(recompute);

    bg_cost_model_t *model = NULL;
    cc.microbatches = 65;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_ERR_INVALID);
    assert_non_null(
        strstr(bg_error_message(), "65 micro-batches of a batch of 64 samples (need 1..B)"));
    assert_null(model);
    cc.microbatches = 1;
    cc.spec = NULL;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "cost model: no model given"));
    cc.spec = spec;
    cc.microbatches = 1;
    assert_int_equal(bg_cost_model_create(&cc, &model), BG_OK);
    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = model;
    pc.device = dev;
    pc.devices = 9;
    bg_partition_t *p = NULL;
    bg_cost_device_t many[9];
    for (int d = 0; d < 9; d++) many[d] = dev[0];
    pc.device = many;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "9 stages but the model has only 8 layers"));
    pc.devices = 0;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "partition: 0 devices x 1 chunks"));
    /* 4 x 2^30 chunks would wrap to 0 stages, and 3 x 1431655766 to 2. */
    pc.devices = 4;
    pc.chunks = 1 << 30;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "partition: 4 devices x 1073741824 chunks"));
    pc.devices = 3;
    pc.chunks = 1431655766;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    /* One byte a device shared by 2 chunks: half a byte a stage is still
     * a capacity (at least a byte), not none. */
    pc.devices = 2;
    pc.chunks = 2;
    many[0].memory_bytes = many[1].memory_bytes = 1;
    assert_int_equal(bg_partition_create(&pc, &p), BG_OK);
    assert_int_equal(p->fits, 0);
    assert_int_equal(p->stage[0].capacity_bytes, 1);
    assert_int_equal(p->overflow_bytes + 1, p->stage[p->worst_stage].peak_bytes);
    bg_partition_destroy(p);
    p = NULL;
    many[0].memory_bytes = many[1].memory_bytes = dev[0].memory_bytes;
    pc.chunks = 1;
    snprintf(many[1].name, sizeof many[1].name, "slow");
    many[1].flops_per_s = 0;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "partition: device 1 (slow) has no speed"));
    many[1] = dev[0];
    pc.device = NULL;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "partition: no cost model or no devices"));
    pc.device = many;
    pc.objective = (bg_partition_objective_t)7;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "partition: unknown objective 7"));
    pc.objective = BG_PARTITION_LEAST_STEP;
    pc.step_tolerance = 1;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "partition: step tolerance 1 is not in [0, 1)"));
    pc.step_tolerance = NAN;
    assert_int_equal(bg_partition_create(&pc, &p), BG_ERR_INVALID);
    pc.step_tolerance = 0;
    pc.objective = BG_PARTITION_SLOWEST_STAGE;
    assert_null(p);
    /* Splits: stage 0 starts at 0, boundaries increase within 1..7. */
    const int bad[2] = {0, 8};
    assert_int_equal(bg_partition_evaluate(&pc, bad, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "split: stage 1 would start at layer 8; boundaries "
                                               "must increase and lie within 1..7"));
    assert_null(p);
    const int late[2] = {1, 4}, same[2] = {0, 0};
    assert_int_equal(bg_partition_evaluate(&pc, late, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "split: stage 0 must start at layer 0, not 1"));
    assert_int_equal(bg_partition_evaluate(&pc, same, &p), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "split: stage 1 would start at layer 0"));
    assert_null(p);
    bg_partition_destroy(NULL);
    bg_cost_model_destroy(NULL);
    bg_cost_model_destroy(model);
    bg_model_spec_destroy(spec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dp_equals_brute_force),
        cmocka_unit_test(test_dp_goes_past_a_dearer_cut_relu),
        cmocka_unit_test(test_dp_equals_brute_force_deeper),
        cmocka_unit_test(test_dp_equals_brute_force_tight_memory),
        cmocka_unit_test_teardown(test_dp_equals_brute_force_forward_only, reset_modes),
        cmocka_unit_test_teardown(test_least_step_two_chunks, reset_modes),
        cmocka_unit_test(test_dp_keeps_residual_blocks_whole),
        cmocka_unit_test(test_memory_matches_stages),
        cmocka_unit_test(test_memory_matches_pipelines),
        cmocka_unit_test(test_given_split_per_device),
        cmocka_unit_test(test_gpu_conv_workspace),
        cmocka_unit_test(test_range_floor_below_every_stage),
        cmocka_unit_test(test_analytic_times),
        cmocka_unit_test(test_step_and_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
