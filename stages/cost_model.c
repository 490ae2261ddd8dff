#include "cost_model.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "cpu/backend_cpu.h"
#include "layer.h"

/* Range maxima in O(1): level k holds the maxima of windows of 2^k values. */
typedef struct range_max {
    int levels;
    int64_t **level; /* level[k][i] = max of values[i .. i + 2^k) */
} range_max_t;

struct bg_cost_model {
    bg_cost_config_t cfg;
    int layers;
    /* Samples per micro-batch: the largest, which memory is sized for
     * (ceil(B / M)), and the mean, which times go by. Where M does not
     * divide B the executor's micro-batches differ by one sample (the
     * first B mod M have one more), so M of the largest would overstate
     * a step by up to a micro-batch. */
    int64_t micro;
    double mean_micro;
    size_t elem;        /* bytes per element */
    int states;         /* optimizer state buffers per parameter buffer */
    int has_loss_layer; /* the last layer is softmax_cross_entropy */
    /* Prefix sums over layers, layers + 1 entries each. */
    int64_t *forward_flops;  /* forward work per sample (layer_work) */
    int64_t *backward_flops; /* dX and dW work per sample */
    int64_t *weight_flops;   /* dW work per sample */
    /* The part of those three of the layers priced per value (tanh,
     * sigmoid, gelu, layernorm, dropout, relu, the pools and the loss)
     * that a device on which they are memory-bound leaves out (all but
     * relu's, the pools' and the loss's FLOPs), and the values their
     * forward, dX and dW read and write there instead (layer_work). */
    int64_t *priced_forward, *priced_backward, *priced_weight;
    int64_t *streamed_forward, *streamed_backward, *streamed_weight;
    int64_t *backward_ops;   /* 2 ops with weights, else 1 */
    int64_t *param_elems;    /* weights + biases of layers with weights */
    int64_t *output_elems;   /* per-sample outputs of layers with a buffer of their own */
    int64_t *weighted_elems; /* per-sample outputs of layers with weights */
    /* What the arena's rounding of each buffer to BG_ARENA_ALIGNMENT adds
     * (bg_arena_padding), in bytes: to the layers' weights and biases with
     * their gradients and optimizer state; to one micro-batch's stash of
     * their outputs (those of output_elems unless recomputed, and with
     * split_backward those of weighted_elems again); to their outputs of
     * output_elems, a micro-batch each (recompute's work buffers). */
    int64_t *state_padding, *stash_padding, *output_padding;
    /* Not a prefix sum: a micro-batch of layer i's output in bytes where
     * it runs in place (a stage starting there keeps it), else 0. */
    int64_t *own_output;
    /* Not prefix sums: a relu's forward (dX) where the convolution before
     * it (the max-pool after it) does it, for a stage that starts (ends)
     * at the relu, cut from that neighbour, in FLOP-equivalents a sample;
     * else 0 (layer_work's apart_fwd and apart_dx). */
    int64_t *apart_forward, *apart_dx;
    int64_t *boundary;     /* per-sample numel at each boundary (not a prefix sum) */
    int64_t *convolutions; /* conv2d layers */
    /* With a profile: prefix sums of measured seconds per micro-batch. */
    double *forward_s, *backward_s, *weight_s, *update_s, *check_s;
    double first_dx_s;  /* layer 0's dX, which the executor never runs */
    range_max_t widest; /* over boundary[0 .. layers] */
    range_max_t depth;  /* over layers: open_blocks, the skip-gradient buffers a stage needs */
    /* Where a stage may start or end (outside residual blocks): cuts[0 ..
     * cut_count), increasing from 0 to layers; cut_index[l], layers + 1
     * entries, the index of boundary l there, or -1. */
    int *cuts, *cut_index;
    int cut_count;
    range_max_t workspace; /* bytes, over layers */
    /* The same without convolutions (a layernorm's row statistics), which a
     * device choosing its convolutions' workspace still counts. */
    range_max_t other_workspace;
    /* Prefix sums over layers of max(0, w * F / R - flops * n): a forward's
     * (and a dX's) time beyond its FLOPs' on a device of that F / R, times
     * F (weight_excess). One table per F / R prepared. */
    struct {
        double ratio; /* F / R */
        double *excess;
    } weights[BG_COST_WEIGHT_TABLES];
    int weight_tables;
};

static void range_max_free(range_max_t *r) {
    for (int k = 0; r->level != NULL && k < r->levels; k++) free(r->level[k]);
    free(r->level);
}

static bg_status_t range_max_build(range_max_t *r, const int64_t *values, int n) {
    r->levels = 1;
    while ((1 << r->levels) <= n) r->levels++;
    r->level = calloc((size_t)r->levels, sizeof *r->level);
    if (r->level == NULL) return bg_error_set(BG_ERR_NOMEM, "cost model: out of memory");
    for (int k = 0; k < r->levels; k++) {
        int count = n - (1 << k) + 1;
        r->level[k] = malloc(sizeof(int64_t) * (size_t)count);
        if (r->level[k] == NULL) return bg_error_set(BG_ERR_NOMEM, "cost model: out of memory");
        for (int i = 0; i < count; i++) {
            if (k == 0) {
                r->level[k][i] = values[i];
            } else {
                int64_t a = r->level[k - 1][i], b = r->level[k - 1][i + (1 << (k - 1))];
                r->level[k][i] = a > b ? a : b;
            }
        }
    }
    return BG_OK;
}

/* Maximum of values[first .. last], inclusive, first <= last. */
static int64_t range_max_query(const range_max_t *r, int first, int last) {
    int k = 31 - __builtin_clz((unsigned)(last - first + 1));
    int64_t a = r->level[k][first], b = r->level[k][last - (1 << k) + 1];
    return a > b ? a : b;
}

void bg_cost_model_destroy(bg_cost_model_t *m) {
    if (m == NULL) return;
    free(m->forward_s);
    free(m->backward_s);
    free(m->weight_s);
    free(m->update_s);
    free(m->check_s);
    free(m->forward_flops);
    free(m->backward_flops);
    free(m->weight_flops);
    free(m->priced_forward);
    free(m->priced_backward);
    free(m->priced_weight);
    free(m->streamed_forward);
    free(m->streamed_backward);
    free(m->streamed_weight);
    free(m->backward_ops);
    free(m->param_elems);
    free(m->output_elems);
    free(m->weighted_elems);
    free(m->state_padding);
    free(m->stash_padding);
    free(m->output_padding);
    free(m->own_output);
    free(m->apart_forward);
    free(m->apart_dx);
    free(m->boundary);
    free(m->convolutions);
    range_max_free(&m->widest);
    range_max_free(&m->depth);
    free(m->cuts);
    free(m->cut_index);
    range_max_free(&m->workspace);
    range_max_free(&m->other_workspace);
    for (int k = 0; k < m->weight_tables; k++) free(m->weights[k].excess);
    free(m);
}

/* Layer l's forward time beyond its FLOPs', times F, on a device streaming
 * weights at F / ratio bytes per second. */
static double layer_excess(const bg_cost_model_t *m, int l, double ratio) {
    const double bytes = (double)(m->param_elems[l + 1] - m->param_elems[l]) * (double)m->elem;
    const double flops = (double)(m->forward_flops[l + 1] - m->forward_flops[l]) * m->mean_micro;
    return bytes * ratio > flops ? bytes * ratio - flops : 0;
}

bg_status_t bg_cost_model_prepare(bg_cost_model_t *m, const bg_cost_device_t *devices, int count) {
    for (int d = 0; d < count; d++) {
        if (!(devices[d].weight_bytes_per_s > 0)) continue;
        const double ratio = devices[d].flops_per_s / devices[d].weight_bytes_per_s;
        int known = 0;
        for (int k = 0; k < m->weight_tables; k++) known |= m->weights[k].ratio == ratio;
        if (known || m->weight_tables == BG_COST_WEIGHT_TABLES) continue;
        double *excess = malloc(sizeof(double) * (size_t)(m->layers + 1));
        if (excess == NULL) return bg_error_set(BG_ERR_NOMEM, "cost model: out of memory");
        excess[0] = 0;
        for (int l = 0; l < m->layers; l++) excess[l + 1] = excess[l] + layer_excess(m, l, ratio);
        m->weights[m->weight_tables].ratio = ratio;
        m->weights[m->weight_tables].excess = excess;
        m->weight_tables++;
    }
    return BG_OK;
}

/* Seconds that streaming the weights of layers [first, last) adds to their
 * forward (and to their dX) on device d, beyond their FLOPs' time. */
static double weight_excess(const bg_cost_model_t *m, const bg_cost_device_t *d, int first,
                            int last) {
    if (!(d->weight_bytes_per_s > 0)) return 0;
    const double ratio = d->flops_per_s / d->weight_bytes_per_s;
    for (int k = 0; k < m->weight_tables; k++)
        if (m->weights[k].ratio == ratio)
            return (m->weights[k].excess[last] - m->weights[k].excess[first]) / d->flops_per_s;
    double excess = 0;
    for (int l = first; l < last; l++) excess += layer_excess(m, l, ratio);
    return excess / d->flops_per_s;
}

/* The most bytes a plan counts: past it, sums of a stage's categories in
 * size_t could wrap. An exbibyte is more than any machine holds. */
#define COST_MAX_BYTES 1152921504606846976.0 /* 2^60 */

/* Nanoseconds per value of the layers whose time their FLOPs do not tell
 * (summary's FLOPs count a tanh as one): each op's time per value, as
 * `brigade profile` measured it for a 64-sample micro-batch through
 * 1024-value layers on the development machine's quiet core (glibc 2.36's
 * scalar tanhf, expf and erfcf; after commit 0526a22); priced in
 * FLOP-equivalents at BG_COST_CPU_CORE_FLOPS (PER_VALUE). tanh 14.5 ns
 * forward, 0.50 backward; sigmoid 2.58 and 0.48; gelu 8.32 and 11.74;
 * layernorm 1.58, 2.38 for dX and 1.78 for dW; dropout, a 32-bit hash per
 * value eight at a time, 0.30 and 0.28 (measured when it was added, as
 * above). relu, where it runs on its own (not inside a convolution's
 * forward or a max-pool's dX), 0.12 forward and 0.35 dX (2026-12-06, as
 * below: 0.11 to 0.13 forward after a dense layer of 1024 or 4096; dX
 * 0.15 through 1024 values, in the cache, 0.33 through 4096, 0.50 through
 * 32 x 26 x 26); its one FLOP had priced it at a thirtieth of that.
 * The pools per value of their windows (their FLOPs: outputs x size^2)
 * and the loss per logit, measured the same way on 2026-12-06 on a 2-core
 * Intel Xeon (AVX-512) at 64 samples through 32 x 26 x 26 or 32 x 27 x 27
 * inputs, each figure the mean of two or three profiles of 21 rounds:
 * max-pool 0.45 ns forward (0.42 to 0.47 for 2x2 windows at stride 2,
 * 0.23 for 3x3 at stride 1, 0.61 at 2, 0.78 at 3); dX 0.40 for 2x2
 * windows tiling an even input (0.37 to 0.41; a memory-bound pass, the
 * origin CNN's), 0.95 for others (0.82 to 1.17); avg-pool 0.60 forward
 * (0.29 to 0.70) and 0.85 dX (0.67 to 1.03); softmax-cross-entropy 5.2 ns
 * forward and 0.33 dX at 1000 classes (an exp() a logit; 5.9 and 0.47 at
 * 100, 8.2 and 0.42 at 10, the row's fixed part showing). Per value of
 * their input, the pools' figures spread eight times as wide. By their
 * FLOPs alone the origin CNN's max-pool had been priced at a thirtieth of
 * its time, which is a fifth of the step.
 * On a GPU the elementwise passes are memory-bound and far cheaper, so a
 * device marked elementwise_memory_bound prices them by the values they
 * stream instead, and relu, the pools and the loss by their FLOPs
 * (layer_work_t): at these figures and the assumed 10 TFLOP/s a million
 * tanh values would take 72.5 us, where a pass streams them in a few. */
#define PER_VALUE(ns) ((ns) * (BG_COST_CPU_CORE_FLOPS / 1e9))
static const double TANH_FORWARD = PER_VALUE(14.5), TANH_BACKWARD = PER_VALUE(0.50),
                    SIGMOID_FORWARD = PER_VALUE(2.58), SIGMOID_BACKWARD = PER_VALUE(0.48),
                    GELU_FORWARD = PER_VALUE(8.32), GELU_BACKWARD = PER_VALUE(11.74),
                    LAYERNORM_FORWARD = PER_VALUE(1.58), LAYERNORM_DX = PER_VALUE(2.38),
                    LAYERNORM_DW = PER_VALUE(1.78), DROPOUT_FORWARD = PER_VALUE(0.30),
                    DROPOUT_BACKWARD = PER_VALUE(0.28), MAXPOOL_FORWARD = PER_VALUE(0.45),
                    MAXPOOL2_BACKWARD = PER_VALUE(0.40), MAXPOOL_BACKWARD = PER_VALUE(0.95),
                    AVGPOOL_FORWARD = PER_VALUE(0.60), AVGPOOL_BACKWARD = PER_VALUE(0.85),
                    SOFTMAX_XENT_FORWARD = PER_VALUE(5.2), SOFTMAX_XENT_BACKWARD = PER_VALUE(0.33),
                    RELU_FORWARD = PER_VALUE(0.12), RELU_BACKWARD = PER_VALUE(0.35);

/* A layer's work per sample: its forward, dX and dW (0 without weights)
 * in FLOPs or FLOP-equivalents. A convolution's or dense layer's dX and
 * dW each cost its forward's FLOPs; layers without weights have a dX like
 * their forward, but for the ones priced per value above, which also say
 * what each pass takes where they are memory-bound instead: the values it
 * reads and writes (0 for the others), for the elementwise layers; their
 * FLOPs, for relu, the pools and the loss (bound_fwd, bound_dx). Those
 * were priced so when the GPU's host costs were fitted to an H200's steps of
 * the origin CNN (docs/cuda.md), which streaming its max-pool at the
 * assumed 1 TB/s put up to 16% over the measured medians, its mean error
 * 6.5% at best refitted, against 1.3% (2026-12-06): the GPU streams them
 * faster than that. */
typedef struct layer_work {
    double fwd, dx, dw;
    int priced;                               /* priced per value */
    int64_t fwd_values, dx_values, dw_values; /* streamed, when priced */
    int64_t bound_fwd, bound_dx;              /* FLOPs kept, when priced */
    /* A relu's forward and dX that a neighbour does (fwd or dx 0 then),
     * as they cost where a stage boundary separates the two. */
    double apart_fwd, apart_dx;
} layer_work_t;

/* A layer priced per value on a CPU core, `fwd` and `dx` in FLOP-equivalents
 * a sample, whose own FLOPs a memory-bound device keeps (relu, the pools,
 * the loss: layer_work_t says why). */
static void price_keeping_flops(layer_work_t *w, const bg_layer_spec_t *l, double fwd, double dx) {
    w->fwd = fwd;
    w->dx = dx;
    w->fwd_values = w->dx_values = 0;
    w->bound_fwd = w->bound_dx = l->flops;
    w->priced = 1;
}

static layer_work_t layer_work(const bg_model_spec_t *spec, int i, const bg_backend_t *be) {
    const bg_layer_spec_t *l = &spec->layers[i];
    const int64_t values = bg_shape_numel(l->in);
    const double flops = (double)l->flops;
    /* priced: x and y forward; dy, dx and x or y for dX */
    layer_work_t w = {.fwd = flops, .dx = flops, .fwd_values = 2 * values, .dx_values = 3 * values};
    switch (l->kind) {
    case BG_LAYER_CONV2D:
    case BG_LAYER_DENSE: w.dw = flops; break;
    case BG_LAYER_TANH:
        w.fwd = TANH_FORWARD * (double)values;
        w.dx = TANH_BACKWARD * (double)values;
        w.priced = 1;
        break;
    case BG_LAYER_SIGMOID:
        w.fwd = SIGMOID_FORWARD * (double)values;
        w.dx = SIGMOID_BACKWARD * (double)values;
        w.priced = 1;
        break;
    case BG_LAYER_GELU:
        w.fwd = GELU_FORWARD * (double)values;
        w.dx = GELU_BACKWARD * (double)values;
        w.priced = 1;
        break;
    case BG_LAYER_LAYERNORM:
        w.fwd = LAYERNORM_FORWARD * (double)values;
        w.dx = LAYERNORM_DX * (double)values;
        w.dw = LAYERNORM_DW * (double)values;
        w.dw_values = 2 * values; /* x and dy */
        w.priced = 1;
        break;
    case BG_LAYER_RELU: {
        /* Nothing left of a pass that the backend does inside a neighbour's
         * in the same stage: the forward in a convolution's before it, dX
         * in a max-pool's after it (whose price counts it). A stage cut
         * between them pays it (apart_fwd, apart_dx). */
        const bg_layer_spec_t *before = i > 0 ? &spec->layers[i - 1] : NULL;
        const bg_layer_spec_t *after = i + 1 < spec->num_layers ? &spec->layers[i + 1] : NULL;
        const int in_forward =
            before != NULL && before->kind == BG_LAYER_CONV2D && bg_layer_fuses_relu(before, be);
        const int in_dx =
            after != NULL && after->kind == BG_LAYER_MAXPOOL && bg_layer_fuses_relu(after, be);
        const double fwd = RELU_FORWARD * (double)values, dx = RELU_BACKWARD * (double)values;
        price_keeping_flops(&w, l, in_forward ? 0 : fwd, in_dx ? 0 : dx);
        w.apart_fwd = in_forward ? fwd : 0;
        w.apart_dx = in_dx ? dx : 0;
        break;
    }
    case BG_LAYER_RESIDUAL: /* forward nothing; dX adds the add's dy to the block's */
    case BG_LAYER_SHORTCUT: /* forward nothing; dX swaps two gradients */
        w.fwd = 0;
        w.dx = (double)values;
        break;
    case BG_LAYER_MAXPOOL: {
        /* dX's fast path: 2x2 windows tiling an even input */
        const int tiled = l->kernel == 2 && l->stride == 2 && l->in.h % 2 == 0 && l->in.w % 2 == 0;
        price_keeping_flops(&w, l, MAXPOOL_FORWARD * flops,
                            (tiled ? MAXPOOL2_BACKWARD : MAXPOOL_BACKWARD) * flops);
        break;
    }
    case BG_LAYER_AVGPOOL:
        price_keeping_flops(&w, l, AVGPOOL_FORWARD * flops, AVGPOOL_BACKWARD * flops);
        break;
    case BG_LAYER_SOFTMAX_CROSS_ENTROPY:
        price_keeping_flops(&w, l, SOFTMAX_XENT_FORWARD * (double)values,
                            SOFTMAX_XENT_BACKWARD * (double)values);
        break;
    case BG_LAYER_DROPOUT:
        w.fwd = DROPOUT_FORWARD * (double)values;
        w.dx = DROPOUT_BACKWARD * (double)values;
        w.dx_values = 2 * values; /* dy and dx: its mask is a hash */
        w.priced = 1;
        break;
    default: break;
    }
    if (!w.priced) w.fwd_values = w.dx_values = w.dw_values = 0;
    return w;
}

/* The model's file, as its refusals name it ("model" for one parsed from
 * memory). */
static const char *spec_name(const bg_model_spec_t *spec) {
    return spec->source_name != NULL ? spec->source_name : "model";
}

/* Refuses a model whose figures at this micro-batch could pass what the
 * plan's integers hold, before any is summed: a generous bound on any
 * stage's memory (every parameter with its gradient and optimizer state,
 * every activation stashed for more micro-batches than a schedule keeps,
 * and the largest convolution's im2col workspace, as the CPU backend sizes
 * it), in double from the model spec, and the FLOPs of a whole backward. */
static bg_status_t check_size(const bg_cost_model_t *m, const bg_backend_t *be) {
    const bg_model_spec_t *spec = m->cfg.spec;
    const char *name = spec_name(spec);
    double params = 0, outputs = 0, widest = 0, workspace = 0;
    for (int i = 0; i < m->layers; i++) {
        const bg_layer_spec_t *l = &spec->layers[i];
        const double in = (double)l->in.c * (double)l->in.h * (double)l->in.w;
        const double out = (double)l->out.c * (double)l->out.h * (double)l->out.w;
        params += (double)l->params;
        outputs += out;
        if (in > widest) widest = in;
        if (out > widest) widest = out;
        if (l->kind == BG_LAYER_CONV2D) {
            const double columns = (double)l->in.c * (double)l->kernel * (double)l->kernel + 1;
            const double im2col =
                columns * ((double)l->out.h * (double)l->out.w + (double)l->filters);
            if (im2col > workspace) workspace = im2col;
        }
    }
    const double slots = 2.0 + 2.0 * (double)m->cfg.microbatches;
    const double per_sample = 2.0 * outputs + 5.0 * widest + 1.0;
    const double bytes =
        (double)m->elem * (params * (2.0 + m->states) + slots * (double)m->micro * per_sample +
                           (double)m->micro * workspace);
    if (!(bytes <= COST_MAX_BYTES))
        return bg_error_set(BG_ERR_INVALID,
                            "%s: model too large to plan: at micro-batches of %lld sample%s its "
                            "stages could need up to %.3g bytes, past the 2^60 (an exbibyte) "
                            "that a plan counts",
                            name, (long long)m->micro, m->micro == 1 ? "" : "s", bytes);
    /* The prefix sums of tabulate: each layer's work, a backward's dX and
     * dW together. */
    double work = 0;
    for (int i = 0; i < m->layers; i++) {
        const layer_work_t w = layer_work(spec, i, be);
        work += w.fwd > w.dx + w.dw ? w.fwd : w.dx + w.dw;
    }
    /* Half of int64's range: room for the rounding of `work` in double. */
    if (!(work < 0x1p62))
        return bg_error_set(BG_ERR_INVALID,
                            "%s: model too large to plan: its forward or backward could take up "
                            "to %.3g FLOPs per sample, past what 64-bit counts hold",
                            name, work);
    return BG_OK;
}

static bg_status_t tabulate(bg_cost_model_t *m, bg_backend_t *be) {
    const bg_model_spec_t *spec = m->cfg.spec;
    const int n = m->layers;
    BG_CHECK(check_size(m, be)); /* first: the sums below are in int64 */
    int64_t *workspace = malloc(sizeof(int64_t) * 3 * (size_t)n);
    if (workspace == NULL) return bg_error_set(BG_ERR_NOMEM, "cost model: out of memory");
    int64_t *other = workspace + n, *depth = workspace + 2 * n;
    for (int i = 0; i < n; i++) {
        const bg_layer_spec_t *l = &spec->layers[i];
        int64_t weights, biases;
        bg_layer_param_counts(l, &weights, &biases);
        int weighted = weights > 0;
        int64_t out = bg_shape_numel(l->out);
        const layer_work_t w = layer_work(spec, i, be);
        m->forward_flops[i + 1] = m->forward_flops[i] + (int64_t)w.fwd;
        m->backward_flops[i + 1] = m->backward_flops[i] + (int64_t)(w.dx + w.dw);
        m->weight_flops[i + 1] = m->weight_flops[i] + (int64_t)w.dw;
        m->apart_forward[i] = (int64_t)w.apart_fwd;
        m->apart_dx[i] = (int64_t)w.apart_dx;
        /* Less the FLOPs a memory-bound device still counts of them. */
        m->priced_forward[i + 1] =
            m->priced_forward[i] + (w.priced ? (int64_t)w.fwd - w.bound_fwd : 0);
        m->priced_backward[i + 1] =
            m->priced_backward[i] + (w.priced ? (int64_t)(w.dx + w.dw) - w.bound_dx : 0);
        m->priced_weight[i + 1] = m->priced_weight[i] + (w.priced ? (int64_t)w.dw : 0);
        m->streamed_forward[i + 1] = m->streamed_forward[i] + w.fwd_values;
        m->streamed_backward[i + 1] = m->streamed_backward[i] + w.dx_values;
        m->streamed_weight[i + 1] = m->streamed_weight[i] + w.dw_values;
        m->backward_ops[i + 1] = m->backward_ops[i] + (weighted ? 2 : 1);
        m->param_elems[i + 1] = m->param_elems[i] + (weighted ? weights + biases : 0);
        /* As a stage lays them out (stage_layer_aliases); one that runs
         * in place first in its stage is added back per stage. */
        const int aliases = bg_layer_output_is_view(l) || bg_layer_runs_in_place(spec, i);
        m->output_elems[i + 1] = m->output_elems[i] + (aliases ? 0 : out);
        m->weighted_elems[i + 1] = m->weighted_elems[i] + (weighted ? out : 0);
        const size_t e = m->elem, nb = (size_t)m->micro;
        const int64_t copies = 1 + (m->cfg.forward_only ? 0 : 1) + m->states;
        const int64_t param_padding = weighted ? (int64_t)(bg_arena_padding((size_t)weights * e) +
                                                           bg_arena_padding((size_t)biases * e))
                                               : 0;
        m->state_padding[i + 1] = m->state_padding[i] + copies * param_padding;
        const int64_t out_padding = (int64_t)bg_arena_padding(nb * (size_t)out * e);
        m->output_padding[i + 1] = m->output_padding[i] + (aliases ? 0 : out_padding);
        m->stash_padding[i + 1] = m->stash_padding[i] +
                                  (m->cfg.recompute || aliases ? 0 : out_padding) +
                                  (m->cfg.split_backward && weighted ? out_padding : 0);
        m->own_output[i] = bg_layer_runs_in_place(spec, i) ? (int64_t)(nb * (size_t)out * e) : 0;
        m->boundary[i] = bg_shape_numel(l->in);
        m->convolutions[i + 1] = m->convolutions[i] + (l->kind == BG_LAYER_CONV2D);
        size_t bytes;
        const bg_status_t st = bg_layer_workspace_bytes(l, be, m->micro, &bytes);
        if (st != BG_OK) {
            free(workspace);
            return bg_error_prefix(st, "%s:%d:%d: layer %d (%s): its workspace: ", spec_name(spec),
                                   l->line, l->col, i, bg_layer_kind_name(l->kind));
        }
        workspace[i] = (int64_t)bytes;
        other[i] = l->kind == BG_LAYER_CONV2D ? 0 : (int64_t)bytes;
        depth[i] = l->open_blocks;
        m->cut_index[i] = -1;
        if (bg_model_spec_can_start(spec, i)) {
            m->cut_index[i] = m->cut_count;
            m->cuts[m->cut_count++] = i;
        }
    }
    m->cuts[m->cut_count++] = n;
    m->cut_index[n] = m->cut_count - 1;
    m->boundary[n] = bg_shape_numel(spec->layers[n - 1].out);
    const bg_profile_t *prof = m->cfg.profile;
    if (prof != NULL) {
        if (prof->layers != n) {
            free(workspace);
            return bg_error_set(BG_ERR_INVALID, "cost model: profile of %d layers for %d",
                                prof->layers, n);
        }
        const double size = m->mean_micro;
        for (int i = 0; i < n; i++) {
            const bg_layer_profile_t *lp = &prof->layer[i];
            const double forward = bg_profile_layer_seconds(prof, lp, BG_PROFILE_FORWARD, size);
            const double dx = bg_profile_layer_seconds(prof, lp, BG_PROFILE_BACKWARD_DATA, size);
            const double dw = bg_profile_layer_seconds(prof, lp, BG_PROFILE_BACKWARD_WEIGHTS, size);
            m->forward_s[i + 1] = m->forward_s[i] + forward;
            m->backward_s[i + 1] = m->backward_s[i] + dx + dw;
            m->weight_s[i + 1] = m->weight_s[i] + dw;
            m->update_s[i + 1] = m->update_s[i] + lp->update_s;
            m->check_s[i + 1] = m->check_s[i] + lp->weight_check_s;
            if (i == 0) m->first_dx_s = dx;
        }
    }
    bg_status_t st = range_max_build(&m->widest, m->boundary, n + 1);
    if (st == BG_OK) st = range_max_build(&m->workspace, workspace, n);
    if (st == BG_OK) st = range_max_build(&m->other_workspace, other, n);
    if (st == BG_OK) st = range_max_build(&m->depth, depth, n);
    free(workspace);
    return st;
}

bg_status_t bg_cost_model_create(const bg_cost_config_t *cfg, bg_cost_model_t **out) {
    const bg_model_spec_t *spec = cfg->spec;
    if (spec == NULL || spec->num_layers < 1)
        return bg_error_set(BG_ERR_INVALID, "cost model: no model given");
    if (cfg->batch < 1 || cfg->microbatches < 1 || cfg->microbatches > cfg->batch)
        return bg_error_set(BG_ERR_INVALID,
                            "cost model: %d micro-batches of a batch of %lld samples (need 1..B)",
                            cfg->microbatches, (long long)cfg->batch);
    bg_cost_model_t *m = calloc(1, sizeof *m);
    if (m == NULL) return bg_error_set(BG_ERR_NOMEM, "cost model: out of memory");
    m->cfg = *cfg;
    if (cfg->forward_only) { /* as bg_stage_create has it */
        m->cfg.recompute = 0;
        m->cfg.split_backward = 0;
    }
    m->layers = spec->num_layers;
    m->micro = (cfg->batch + cfg->microbatches - 1) / cfg->microbatches;
    m->mean_micro = (double)cfg->batch / (double)cfg->microbatches;
    m->elem = bg_dtype_size(cfg->dtype);
    m->states = cfg->forward_only ? 0 : bg_optimizer_state_buffers(&cfg->optimizer);
    m->has_loss_layer = spec->layers[m->layers - 1].kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY;
    size_t count = (size_t)m->layers + 1;
    m->forward_flops = calloc(count, sizeof(int64_t));
    m->backward_flops = calloc(count, sizeof(int64_t));
    m->weight_flops = calloc(count, sizeof(int64_t));
    m->priced_forward = calloc(count, sizeof(int64_t));
    m->priced_backward = calloc(count, sizeof(int64_t));
    m->priced_weight = calloc(count, sizeof(int64_t));
    m->streamed_forward = calloc(count, sizeof(int64_t));
    m->streamed_backward = calloc(count, sizeof(int64_t));
    m->streamed_weight = calloc(count, sizeof(int64_t));
    m->backward_ops = calloc(count, sizeof(int64_t));
    m->param_elems = calloc(count, sizeof(int64_t));
    m->output_elems = calloc(count, sizeof(int64_t));
    m->weighted_elems = calloc(count, sizeof(int64_t));
    m->state_padding = calloc(count, sizeof(int64_t));
    m->stash_padding = calloc(count, sizeof(int64_t));
    m->output_padding = calloc(count, sizeof(int64_t));
    m->own_output = calloc(count, sizeof(int64_t));
    m->apart_forward = calloc(count, sizeof(int64_t));
    m->apart_dx = calloc(count, sizeof(int64_t));
    m->boundary = calloc(count, sizeof(int64_t));
    m->convolutions = calloc(count, sizeof(int64_t));
    m->forward_s = calloc(count, sizeof(double));
    m->backward_s = calloc(count, sizeof(double));
    m->weight_s = calloc(count, sizeof(double));
    m->update_s = calloc(count, sizeof(double));
    m->check_s = calloc(count, sizeof(double));
    m->cuts = calloc(count, sizeof(int));
    m->cut_index = calloc(count, sizeof(int));
    bg_status_t st = BG_OK;
    bg_backend_t *own = NULL, *be = cfg->workspace_backend;
    if (!m->forward_flops || !m->backward_flops || !m->weight_flops || !m->priced_forward ||
        !m->priced_backward || !m->priced_weight || !m->streamed_forward || !m->streamed_backward ||
        !m->streamed_weight || !m->backward_ops || !m->param_elems || !m->output_elems ||
        !m->weighted_elems || !m->state_padding || !m->stash_padding || !m->output_padding ||
        !m->own_output || !m->apart_forward || !m->apart_dx || !m->boundary || !m->convolutions ||
        !m->forward_s || !m->backward_s || !m->weight_s || !m->update_s || !m->check_s ||
        !m->cuts || !m->cut_index) {
        st = bg_error_set(BG_ERR_NOMEM, "cost model: out of memory");
        goto fail;
    }
    if (be == NULL) {
        bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
        cpu.dtype = cfg->dtype;
        BG_CHECK_GOTO(bg_backend_cpu_create(&cpu, &own), st, fail);
        be = own;
    }
    BG_CHECK_GOTO(tabulate(m, be), st, fail);
    bg_backend_destroy(own);
    *out = m;
    return BG_OK;
fail:
    bg_backend_destroy(own);
    bg_cost_model_destroy(m);
    return st;
}

int bg_cost_model_layers(const bg_cost_model_t *m) { return m->layers; }

const int *bg_cost_model_cuts(const bg_cost_model_t *m, int *count) {
    *count = m->cut_count;
    return m->cuts;
}

int bg_cost_model_cut_index(const bg_cost_model_t *m, int layer) {
    return layer < 0 || layer > m->layers ? -1 : m->cut_index[layer];
}

int64_t bg_cost_model_microbatch(const bg_cost_model_t *m) { return m->micro; }

const bg_cost_config_t *bg_cost_model_config(const bg_cost_model_t *m) { return &m->cfg; }

/* What an evaluation's stage runs of `t`: its forward alone (no backward,
 * update or gradient check). */
static bg_cost_time_t forward_part(bg_cost_time_t t) {
    return (bg_cost_time_t){.forward = t.forward};
}

/* The forward a stage runs again per micro-batch with --recompute: before
 * its backward, and with the backward split (zb-h1) once more before W,
 * since the recomputed activations are not kept between the two. */
static double recompute_seconds(const bg_cost_model_t *m, double forward) {
    if (!m->cfg.recompute) return 0;
    return m->cfg.split_backward ? 2 * forward : forward;
}

/* Seconds on d of a relu's pass of `flops` FLOP-equivalents a sample
 * (apart_forward, apart_dx) that a stage runs on its own where its end cuts
 * the relu from the neighbour that would do it; 0 where elementwise layers
 * are memory-bound, as analytic_time prices them. */
static double apart_seconds(const bg_cost_model_t *m, const bg_cost_device_t *d, int64_t flops) {
    return d->elementwise_memory_bound ? 0 : (double)flops * m->mean_micro / d->flops_per_s;
}

/* Layers [first, last)'s figures per micro-batch on `d` from the model's
 * FLOPs and values, every layer's dX included; with `cut`, as a stage of
 * their own, whose ends may cut a relu from the neighbour that would do a
 * pass of it (apart_forward, apart_dx); without, as in a stage of the whole
 * model. */
static bg_cost_time_t analytic_time(const bg_cost_model_t *m, const bg_cost_device_t *d, int first,
                                    int last, int cut) {
    const double samples = m->mean_micro;
    double fwd_flops = (double)(m->forward_flops[last] - m->forward_flops[first]);
    double bwd_flops = (double)(m->backward_flops[last] - m->backward_flops[first]);
    double w_flops = (double)(m->weight_flops[last] - m->weight_flops[first]);
    const double bwd_ops = (double)(m->backward_ops[last] - m->backward_ops[first]);
    /* The forward and dX each read the weights once. */
    const double streaming = weight_excess(m, d, first, last);
    /* Where the layers priced per value are memory-bound,
     * their passes stream their values instead of taking a core's time. */
    double fwd_bytes_s = 0, bwd_bytes_s = 0, w_bytes_s = 0;
    if (d->elementwise_memory_bound) {
        fwd_flops -= (double)(m->priced_forward[last] - m->priced_forward[first]);
        bwd_flops -= (double)(m->priced_backward[last] - m->priced_backward[first]);
        w_flops -= (double)(m->priced_weight[last] - m->priced_weight[first]);
        const double per_s =
            (d->memory_bytes_per_s > 0 ? d->memory_bytes_per_s : BG_COST_MEMORY_BYTES_PER_S) /
            ((double)m->elem * samples);
        fwd_bytes_s = (double)(m->streamed_forward[last] - m->streamed_forward[first]) / per_s;
        w_bytes_s = (double)(m->streamed_weight[last] - m->streamed_weight[first]) / per_s;
        bwd_bytes_s =
            (double)(m->streamed_backward[last] - m->streamed_backward[first]) / per_s + w_bytes_s;
    }
    bg_cost_time_t t = {0};
    t.forward = fwd_flops * samples / d->flops_per_s + fwd_bytes_s +
                (last - first) * d->op_overhead_s + streaming;
    t.backward =
        bwd_flops * samples / d->flops_per_s + bwd_bytes_s + bwd_ops * d->op_overhead_s + streaming;
    /* A relu cut from the neighbour that would do its pass runs it on its
     * own: stage_compute.c fuses only within a stage. */
    if (cut) {
        t.forward += apart_seconds(m, d, m->apart_forward[first]);
        t.backward += apart_seconds(m, d, m->apart_dx[last - 1]);
    }
    /* dW, and one op for each layer with weights (of backward's two ops per
     * such layer). */
    const double weighted_layers = bwd_ops - (last - first);
    t.weight = w_flops * samples / d->flops_per_s + w_bytes_s + weighted_layers * d->op_overhead_s;
    /* The update streams parameters, gradients and state, and zeroing
     * writes the gradients again: memory-bound; the check reads them. */
    const double params = (double)(m->param_elems[last] - m->param_elems[first]);
    const double streams =
        d->memory_bytes_per_s > 0 ? d->memory_bytes_per_s : BG_COST_MEMORY_BYTES_PER_S;
    t.update = params * (double)m->elem * (4.0 + 2.0 * m->states) / streams + d->update_overhead_s;
    t.check = params * (double)m->elem / streams;
    return t;
}

/* Layers [first, last)'s figures from the profile, as it timed them: in a
 * stage of the whole model (so layer 0's dX left out where first is 0). */
static bg_cost_time_t profiled_time(const bg_cost_model_t *m, int first, int last) {
    bg_cost_time_t t = {0};
    t.forward = m->forward_s[last] - m->forward_s[first];
    t.backward = m->backward_s[last] - m->backward_s[first];
    t.weight = m->weight_s[last] - m->weight_s[first];
    t.update = m->update_s[last] - m->update_s[first];
    t.check = m->check_s[last] - m->check_s[first];
    if (first == 0) t.backward -= m->first_dx_s;
    return t;
}

bg_cost_time_t bg_cost_stage_time(const bg_cost_model_t *m, const bg_cost_device_t *d, int first,
                                  int last) {
    bg_cost_time_t t = {0};
    if (m->cfg.profile != NULL) {
        t = profiled_time(m, first, last);
        /* The profile has a relu's pass that its convolution or max-pool
         * did at 0; a stage cut between them runs it, priced as the
         * analytic model prices it (until 2026-12-06 at 0: a review). The
         * dX no dearer than the max-pool after it as profiled, which did
         * it besides its own passes: a stage then costs no more than the
         * longer one that takes the max-pool in, as the searches over a
         * stage's end assume (a second review's profile of a 10 us
         * max-pool had the shorter stage 0.46 ms dearer). */
        t.forward += apart_seconds(m, d, m->apart_forward[first]);
        const double dx = apart_seconds(m, d, m->apart_dx[last - 1]);
        if (dx > 0) {
            const double pool = m->forward_s[last + 1] - m->forward_s[last] +
                                m->backward_s[last + 1] - m->backward_s[last];
            t.backward += dx < pool ? dx : pool;
        }
    } else {
        t = analytic_time(m, d, first, last, 1);
        /* Layer 0's dX, which the executor never runs: its backward less
         * its dW is that pass alone, streaming and op included (and a
         * relu's cut from the max-pool after it, where the stage ends
         * there). */
        if (first == 0) {
            const bg_cost_time_t layer0 = analytic_time(m, d, 0, 1, last == 1);
            t.backward -= layer0.backward - layer0.weight;
        }
    }
    t.recompute = recompute_seconds(m, t.forward);
    return m->cfg.forward_only ? forward_part(t) : t;
}

double bg_cost_stage_start_excess(const bg_cost_model_t *m, const bg_cost_device_t *d, int first) {
    const double forward = apart_seconds(m, d, m->apart_forward[first]);
    return m->cfg.forward_only ? forward : forward + recompute_seconds(m, forward);
}

bg_cost_time_t bg_cost_layer_time(const bg_cost_model_t *m, const bg_cost_device_t *d, int layer) {
    bg_cost_time_t t;
    if (m->cfg.profile != NULL) {
        t = profiled_time(m, layer, layer + 1);
    } else {
        t = analytic_time(m, d, layer, layer + 1, 0);
        if (layer == 0) t.backward = t.weight; /* its dX never runs */
    }
    t.recompute = recompute_seconds(m, t.forward);
    return m->cfg.forward_only ? forward_part(t) : t;
}

int bg_cost_measured_stage(const bg_cost_model_t *m, int first, int last, int slots,
                           bg_cost_measured_stage_t *out) {
    const bg_profile_t *prof = m->cfg.profile;
    if (prof == NULL) return 0;
    /* The range's entry nearest these slots, and the once-a-step figures
     * of all its entries (the profiler writes 3; a file repeats none, and
     * entries past the first 64 are not counted). */
    const bg_stage_profile_t *best = NULL;
    double update[64], check[64];
    int entries = 0;
    for (int i = 0; i < prof->stage_count; i++) {
        const bg_stage_profile_t *sp = &prof->stage[i];
        if (sp->first != first || sp->last != last) continue;
        if (best == NULL || abs(sp->slots - slots) < abs(best->slots - slots)) best = sp;
        if (entries < (int)(sizeof update / sizeof update[0])) {
            update[entries] = sp->update_s;
            check[entries++] = sp->weight_check_s;
        }
    }
    if (best == NULL) return 0;
    /* The range's own figures, measured at the profile's batch, follow its
     * layers' from that size to this one; its copies go by bytes. */
    double forward_then = 0, backward_then = 0;
    for (int i = first; i < last; i++) {
        const bg_layer_profile_t *lp = &prof->layer[i];
        forward_then += lp->forward_s;
        backward_then += lp->backward_data_s + lp->backward_weights_s;
    }
    if (first == 0) backward_then -= prof->layer[0].backward_data_s; /* never run */
    const double forward_now = m->forward_s[last] - m->forward_s[first],
                 backward_now =
                     m->backward_s[last] - m->backward_s[first] - (first == 0 ? m->first_dx_s : 0);
    const double scale = m->mean_micro / (double)prof->batch;
    bg_cost_measured_stage_t r = {0};
    r.time.forward = best->forward_s * (forward_then > 0 ? forward_now / forward_then : scale);
    r.time.backward = best->backward_s * (backward_then > 0 ? backward_now / backward_then : scale);
    r.time.weight = m->weight_s[last] - m->weight_s[first];
    /* Once a step, whatever the slots: every entry of the range timed it,
     * and their typical figure (bg_profile_typical: the mean of those
     * within 3 times their median) leaves one slow pass out (a profile's
     * 1.72 ms beside 0.39 and 0.40 for the same layers, under load, priced
     * a GPipe step 20% slow). */
    r.time.update = bg_profile_typical(update, entries);
    r.time.check = bg_profile_typical(check, entries);
    r.time.recompute = recompute_seconds(m, r.time.forward);
    r.recv_s = scale * best->recv_s;
    r.send_s = scale * best->send_s;
    r.grad_recv_s = scale * best->grad_recv_s;
    r.grad_send_s = scale * best->grad_send_s;
    r.check_s = scale * best->check_s;
    r.grad_check_s = scale * best->grad_check_s;
    const double alone = best->forward_s + best->backward_s,
                 loaded = best->loaded.forward_s + best->loaded.backward_s;
    r.contention = alone > 0 && loaded > 0 ? loaded / alone : 0;
    r.after_wait = best->after_wait;
    if (m->cfg.forward_only) {
        r.time = forward_part(r.time);
        r.grad_recv_s = r.grad_send_s = r.grad_check_s = 0;
    }
    *out = r;
    return 1;
}

size_t bg_cost_boundary_bytes(const bg_cost_model_t *m, int layer) {
    return (size_t)(m->boundary[layer] * m->micro) * m->elem;
}

double bg_cost_transfer_seconds(const bg_cost_link_t *link, size_t bytes) {
    return (double)bytes / link->bytes_per_s + link->latency_s;
}

/* A mean micro-batch's bytes at boundary `layer`, which times go by (the
 * slots are sized for the largest, bg_cost_boundary_bytes). */
static size_t mean_boundary_bytes(const bg_cost_model_t *m, int layer) {
    return (size_t)((double)(m->boundary[layer] * (int64_t)m->elem) * m->mean_micro);
}

double bg_cost_boundary_send_seconds(const bg_cost_model_t *m, const bg_cost_link_t *link,
                                     int layer) {
    return bg_cost_transfer_seconds(link, mean_boundary_bytes(m, layer));
}

bg_cost_crossing_t bg_cost_boundary_crossing(const bg_cost_model_t *m, const bg_cost_link_t *link,
                                             int layer) {
    const size_t bytes = mean_boundary_bytes(m, layer);
    if (link->copy_bytes_per_s <= 0)
        return (bg_cost_crossing_t){0, bg_cost_transfer_seconds(link, bytes), 0};
    const bg_profile_t *prof = m->cfg.profile;
    if (prof != NULL && prof->version >= 2 && layer > 0 && layer < m->layers) {
        const double scale = m->mean_micro / (double)prof->batch;
        return (bg_cost_crossing_t){scale * prof->layer[layer].send_s, link->latency_s,
                                    scale * prof->layer[layer].recv_s};
    }
    const double copy = (double)bytes / link->copy_bytes_per_s;
    return (bg_cost_crossing_t){copy, link->latency_s, copy};
}

int bg_cost_has_convolution(const bg_cost_model_t *m, int first, int last) {
    return m->convolutions[last] > m->convolutions[first];
}

/* bg_cost_range_floor, here where bg_cost_stage_memory (which the planner
 * calls for every stage it prices) may inline it. */
static bg_cost_memory_t range_floor(const bg_cost_model_t *m, int first, int last,
                                    const bg_cost_device_t *device) {
    const size_t e = m->elem, nb = (size_t)m->micro;
    bg_cost_memory_t r = {0};
    r.params = (size_t)(m->param_elems[last] - m->param_elems[first]) * e;
    r.grads = m->cfg.forward_only ? 0 : r.params;
    r.optimizer = (size_t)m->states * r.params;
    /* The layers' own outputs, kept for the backward pass or (recomputed)
     * rebuilt into buffers there. */
    const size_t outputs = nb * (size_t)(m->output_elems[last] - m->output_elems[first]) * e;
    r.stash_slot = m->cfg.recompute ? 0 : outputs;
    if (m->cfg.split_backward)
        r.stash_slot += nb * (size_t)(m->weighted_elems[last] - m->weighted_elems[first]) * e;
    r.stash = r.stash_slot;
    if (!m->cfg.forward_only) {
        /* The gradient ping-pong, as wide as the widest activation the
         * layers read or write, and a skip gradient for each depth of their
         * residual blocks. */
        const size_t widest = (size_t)range_max_query(&m->widest, first, last);
        const size_t copies = 2 + (size_t)range_max_query(&m->depth, first, last - 1);
        r.buffers = copies * nb * widest * e;
        r.padding += copies * bg_arena_padding(nb * widest * e);
        if (m->cfg.recompute) {
            r.buffers += outputs;
            r.padding += (size_t)(m->output_padding[last] - m->output_padding[first]);
        }
    }
    if (device != NULL && device->own_conv_workspace) {
        const size_t other = (size_t)range_max_query(&m->other_workspace, first, last - 1);
        const size_t conv =
            bg_cost_has_convolution(m, first, last) ? device->conv_workspace_bytes : 0;
        r.workspace = conv > other ? conv : other;
    } else
        r.workspace = (size_t)range_max_query(&m->workspace, first, last - 1);
    /* Each of those buffers rounded up in the arena (the gradients' above):
     * the parameters, their gradients and each optimizer state tensor, one
     * stash slot's outputs, the workspace. */
    r.padding += (size_t)(m->state_padding[last] - m->state_padding[first]) +
                 (size_t)(m->stash_padding[last] - m->stash_padding[first]);
    if (r.workspace > 0) r.padding += bg_arena_padding(r.workspace);
    return r;
}

bg_cost_memory_t bg_cost_range_floor(const bg_cost_model_t *m, int first, int last,
                                     const bg_cost_device_t *device) {
    return range_floor(m, first, last, device);
}

size_t bg_cost_stage_input_bytes(const bg_cost_model_t *m, const bg_cost_stage_t *stage) {
    /* As bg_cost_stage_memory counts them: the stash's slots, each holding
     * the input; the input gradient among its buffers; the channel's slots,
     * padded only where they lie in the device's arena. */
    const size_t bytes = bg_cost_boundary_bytes(m, stage->first_layer);
    const size_t buffer = bg_arena_rounded_bytes(bytes);
    size_t total = (size_t)(stage->stash_slots > 1 ? stage->stash_slots : 1) * buffer;
    if (stage->first_layer > 0) {
        const int in_arena = stage->device != NULL && stage->device->channels_in_arena;
        total += (size_t)stage->input_channel_slots * (in_arena ? buffer : bytes) +
                 (m->cfg.forward_only ? 0 : buffer);
    }
    return total;
}

bg_cost_memory_t bg_cost_stage_memory(const bg_cost_model_t *m, const bg_cost_stage_t *stage) {
    const int first = stage->first_layer, last = stage->last_layer;
    const size_t e = m->elem, nb = (size_t)m->micro;
    const int has_loss = last == m->layers && m->has_loss_layer;
    bg_cost_memory_t r = range_floor(m, first, last, stage->device);
    /* Beyond what its layers hold wherever they are cut: what the stage's
     * two ends add. Its input, kept in the stash and (when it trains and
     * is not the first) as the gradient it sends back; an activation that
     * would run in place keeps its own output when its predecessor is on
     * the previous stage; the labels on the last. */
    const size_t input = nb * (size_t)m->boundary[first] * e;
    const size_t own_output = (size_t)m->own_output[first];
    r.stash_slot += input + (m->cfg.recompute ? 0 : own_output);
    if (has_loss) r.stash_slot += nb * sizeof(int32_t);
    const size_t slots = (size_t)(stage->stash_slots > 1 ? stage->stash_slots : 1);
    r.stash = slots * r.stash_slot;
    /* The arena's padding of every slot's buffers: range_floor counted one
     * slot's outputs; the input, an own output and the labels each slot. */
    size_t slot_ends = bg_arena_padding(input);
    if (own_output > 0 && !m->cfg.recompute) slot_ends += bg_arena_padding(own_output);
    if (has_loss) slot_ends += bg_arena_padding(nb * sizeof(int32_t));
    r.padding += (slots - 1) * (size_t)(m->stash_padding[last] - m->stash_padding[first]) +
                 slots * slot_ends;
    if (first > 0) r.channels += (size_t)stage->input_channel_slots * input;
    if (!m->cfg.forward_only) {
        /* The gradient it receives, held while its backward runs, and the
         * ring it comes in by. */
        const size_t output_grad = nb * (size_t)m->boundary[last] * e;
        if (!has_loss) {
            r.buffers += output_grad;
            r.padding += bg_arena_padding(output_grad);
        }
        if (first > 0) {
            r.buffers += input;
            r.padding += bg_arena_padding(input);
        }
        if (m->cfg.recompute && own_output > 0) {
            r.buffers += own_output;
            r.padding += bg_arena_padding(own_output);
        }
        if (last < m->layers)
            r.channels += (size_t)stage->grad_channel_slots * bg_cost_boundary_bytes(m, last);
    }
    if (stage->device != NULL && stage->device->channels_in_arena) {
        if (first > 0) r.padding += (size_t)stage->input_channel_slots * bg_arena_padding(input);
        if (!m->cfg.forward_only && last < m->layers)
            r.padding += (size_t)stage->grad_channel_slots *
                         bg_arena_padding(bg_cost_boundary_bytes(m, last));
    }
    return r;
}
