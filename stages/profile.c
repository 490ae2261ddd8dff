#include "profile.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cpu/backend_cpu.h"
#include "layer.h"

enum { WARMUP = 2, MAX_REPETITIONS = 101 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Buffers for timing one layer. */
typedef struct layer_bench {
    bg_backend_t *be;
    const bg_layer_spec_t *spec;
    bg_layer_params_t p;
    void *x, *y, *dy, *dx, *workspace, *state[2];
    int32_t *labels;
    int64_t n;
} layer_bench_t;

typedef enum bench_op { OP_FORWARD, OP_BACKWARD_DATA, OP_BACKWARD_WEIGHTS, OP_UPDATE } bench_op_t;

static bg_status_t run_op(layer_bench_t *b, bench_op_t op, const bg_optimizer_config_t *opt) {
    const bg_layer_spec_t *l = b->spec;
    bg_backend_t *be = b->be;
    if (l->kind == BG_LAYER_SOFTMAX_CROSS_ENTROPY) {
        double loss;
        int64_t correct;
        if (op == OP_FORWARD)
            return be->ops->softmax_xent_forward(be, b->n, l->in.c, b->x, b->labels, b->y, &loss,
                                                 &correct);
        if (op == OP_BACKWARD_DATA)
            return be->ops->softmax_xent_backward(be, b->n, l->in.c, b->y, b->labels, 1.0, b->dx);
        return BG_OK;
    }
    switch (op) {
    case OP_FORWARD: return bg_layer_forward(l, be, &b->p, b->n, b->x, b->y, b->workspace);
    case OP_BACKWARD_DATA:
        return bg_layer_backward_data(l, be, &b->p, b->n, b->x, b->y, b->dy, b->dx, b->workspace);
    case OP_BACKWARD_WEIGHTS:
        return bg_layer_backward_weights(l, be, &b->p, b->n, b->x, b->dy, b->workspace);
    case OP_UPDATE:
        if (b->p.weight_count == 0) return BG_OK;
        BG_CHECK(bg_optimizer_update(opt, be, 1, b->p.weight_count, b->p.weight, b->p.weight_grad,
                                     b->state));
        return BG_OK;
    }
    return BG_OK;
}

/* Median seconds of `reps` runs after warm-up. */
static bg_status_t time_op(layer_bench_t *b, bench_op_t op, const bg_optimizer_config_t *opt,
                           int reps, double *seconds) {
    double times[MAX_REPETITIONS];
    for (int k = 0; k < WARMUP + reps; k++) {
        double start = now();
        BG_CHECK(run_op(b, op, opt));
        if (k >= WARMUP) times[k - WARMUP] = now() - start;
    }
    qsort(times, (size_t)reps, sizeof *times, compare_doubles);
    *seconds = times[reps / 2];
    return BG_OK;
}

static void free_bench(layer_bench_t *b) {
    bg_backend_t *be = b->be;
    void *buffers[] = {
        b->x,        b->y,        b->dy,     b->dx,     b->workspace,     b->state[0],
        b->state[1], b->p.weight, b->p.bias, b->labels, b->p.weight_grad, b->p.bias_grad};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) be->ops->free(be, buffers[i]);
}

static bg_status_t fill_uniform(bg_backend_t *be, void *dst, int64_t count, uint64_t stream) {
    double *host = malloc(sizeof(double) * (size_t)(count > 0 ? count : 1));
    if (host == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    bg_rng_t rng;
    bg_rng_seed(&rng, 42, stream);
    for (int64_t i = 0; i < count; i++) host[i] = 2 * bg_rng_uniform(&rng) - 1;
    bg_status_t st = bg_backend_upload_doubles(be, dst, host, count);
    free(host);
    return st;
}

static bg_status_t profile_layer(bg_backend_t *be, const bg_profile_config_t *cfg, int index,
                                 bg_layer_profile_t *out) {
    const bg_layer_spec_t *l = &cfg->spec->layers[index];
    layer_bench_t b = {.be = be, .spec = l, .n = cfg->batch};
    const int64_t in = cfg->batch * bg_shape_numel(l->in),
                  outn = cfg->batch * bg_shape_numel(l->out);
    bg_status_t st;
    bg_layer_param_counts(l, &b.p.weight_count, &b.p.bias_count);
    BG_CHECK_GOTO(bg_backend_alloc_elems(be, in, &b.x), st, done);
    BG_CHECK_GOTO(bg_backend_alloc_elems(be, outn, &b.y), st, done);
    BG_CHECK_GOTO(bg_backend_alloc_elems(be, outn, &b.dy), st, done);
    BG_CHECK_GOTO(bg_backend_alloc_elems(be, in, &b.dx), st, done);
    BG_CHECK_GOTO(
        be->ops->alloc(be, bg_layer_workspace_bytes(l, be, cfg->batch) + 64, &b.workspace), st,
        done);
    BG_CHECK_GOTO(be->ops->alloc(be, sizeof(int32_t) * (size_t)cfg->batch, (void **)&b.labels), st,
                  done);
    if (b.p.weight_count > 0) {
        BG_CHECK_GOTO(bg_backend_alloc_elems(be, b.p.weight_count, &b.p.weight), st, done);
        BG_CHECK_GOTO(bg_backend_alloc_elems(be, b.p.bias_count, &b.p.bias), st, done);
        BG_CHECK_GOTO(bg_backend_alloc_elems(be, b.p.weight_count, &b.p.weight_grad), st, done);
        BG_CHECK_GOTO(bg_backend_alloc_elems(be, b.p.bias_count, &b.p.bias_grad), st, done);
        for (int k = 0; k < 2; k++)
            BG_CHECK_GOTO(bg_backend_alloc_elems(be, b.p.weight_count, &b.state[k]), st, done);
        BG_CHECK_GOTO(fill_uniform(be, b.p.weight, b.p.weight_count, 1), st, done);
        BG_CHECK_GOTO(fill_uniform(be, b.p.bias, b.p.bias_count, 2), st, done);
    }
    BG_CHECK_GOTO(fill_uniform(be, b.x, in, 3), st, done);
    BG_CHECK_GOTO(fill_uniform(be, b.dy, outn, 4), st, done);
    /* Labels stay 0: valid for any number of classes. */
    const int reps = cfg->repetitions;
    *out = (bg_layer_profile_t){0};
    BG_CHECK_GOTO(time_op(&b, OP_FORWARD, &cfg->optimizer, reps, &out->forward_s), st, done);
    BG_CHECK_GOTO(time_op(&b, OP_BACKWARD_DATA, &cfg->optimizer, reps, &out->backward_data_s), st,
                  done);
    if (b.p.weight_count > 0) {
        BG_CHECK_GOTO(
            time_op(&b, OP_BACKWARD_WEIGHTS, &cfg->optimizer, reps, &out->backward_weights_s), st,
            done);
        BG_CHECK_GOTO(time_op(&b, OP_UPDATE, &cfg->optimizer, reps, &out->update_s), st, done);
    }
done:
    free_bench(&b);
    if (st != BG_OK) bg_error_prefix(st, "profiling layer %d: ", index);
    return st;
}

/* Bytes per second of one memcpy of a few MiB, as a channel does. */
static double measure_copy(void) {
    enum { BYTES = 4 << 20 };
    char *a = malloc(BYTES), *b = malloc(BYTES);
    double best = 0;
    if (a == NULL || b == NULL) goto done;
    memset(a, 1, BYTES);
    memset(b, 2, BYTES);
    for (int k = 0; k < 7; k++) {
        double start = now();
        memcpy(k % 2 ? a : b, k % 2 ? b : a, BYTES);
        double rate = BYTES / (now() - start);
        if (rate > best) best = rate;
    }
done:
    free(a);
    free(b);
    return best > 0 ? best : 5e9;
}

bg_status_t bg_profile_measure(const bg_profile_config_t *cfg, bg_profile_t **out) {
    if (cfg->spec == NULL || cfg->batch < 1 || cfg->repetitions < 1 ||
        cfg->repetitions > MAX_REPETITIONS)
        return bg_error_set(BG_ERR_INVALID,
                            "profile: need a model, batch >= 1 and 1..%d "
                            "repetitions",
                            MAX_REPETITIONS);
    bg_profile_t *p = calloc(1, sizeof *p);
    if (p == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    p->layers = cfg->spec->num_layers;
    p->batch = cfg->batch;
    p->fingerprint = cfg->spec->fingerprint;
    snprintf(p->device, sizeof p->device, "cpu");
    p->layer = calloc((size_t)p->layers, sizeof *p->layer);
    bg_backend_t *be = NULL;
    bg_status_t st = BG_OK;
    BG_ALLOC_CHECK_GOTO(p->layer, st, fail);
    bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
    BG_CHECK_GOTO(bg_backend_cpu_create(&cpu, &be), st, fail);
    for (int i = 0; i < p->layers; i++)
        BG_CHECK_GOTO(profile_layer(be, cfg, i, &p->layer[i]), st, fail);
    p->copy_bytes_per_s = measure_copy();
    bg_backend_destroy(be);
    *out = p;
    return BG_OK;
fail:
    bg_backend_destroy(be);
    bg_profile_destroy(p);
    return st;
}

void bg_profile_destroy(bg_profile_t *p) {
    if (p == NULL) return;
    free(p->layer);
    free(p);
}
