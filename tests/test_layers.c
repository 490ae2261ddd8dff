/* Layers and the loss on the CPU backend: every backward checked against
 * central finite differences in double precision, gradient accumulation, the
 * float kernels against the double ones, and parameter initialisation.
 *
 * The scalar checked is L = sum(r * layer(x)) for a random upstream r, so
 * dL/dx = backward_data(dy = r) and dL/dW = backward_weights(dy = r). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/backend_cpu.h"
#include "dropout.h"
#include "layer.h"
#include "rng.h"

/* Finite-difference step and the tolerance of a gradient entry:
 * |analytic - numeric| <= FD_ABS_TOL + FD_REL_TOL * |numeric|. */
#define FD_EPS     1e-6
#define FD_REL_TOL 1e-6
#define FD_ABS_TOL 1e-8

/* |got - want| <= tol, failing (NaN included) with both values and the
 * caller's line; cmocka 1.1's assert_float_equal works in float. */
#define expect_near(got, want, tol) expect_near_at((got), (want), (tol), #got, __FILE__, __LINE__)

static void expect_near_at(double got, double want, double tol, const char *expr, const char *file,
                           int line) {
    if (fabs(got - want) <= tol) return;
    print_error("%s = %.17g, want %.17g (tolerance %.3g)\n", expr, got, want, tol);
    _fail(file, line);
}

typedef enum input_kind {
    INPUT_NORMAL,   /* standard normal */
    INPUT_DISTINCT, /* a shuffled ladder 0.013 apart: no ties for max pooling */
    INPUT_NO_KINK,  /* |x| in [0.1, 1.1], so relu's kink is never crossed */
} input_kind_t;

/* Device buffers and host copies of one layer run on one backend. */
typedef struct layer_run {
    bg_backend_t *be;
    const bg_layer_spec_t *spec;
    int64_t n, nx, ny, nw, nb;
    bg_layer_params_t p;
    void *x, *y, *dy, *dx, *workspace;
} layer_run_t;

/* Largest errors seen by one gradient check, for the log. */
typedef struct error_stats {
    double max_abs;     /* over every entry */
    double max_rel;     /* over entries with |numeric| >= 1e-2 */
    double max_numeric; /* largest |numeric|, to prove the check is not vacuous */
    double max_ratio;   /* largest error / tolerance: the margin left */
} error_stats_t;

static bg_backend_t *backend_create(bg_dtype_t dtype) {
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    cfg.dtype = dtype;
    bg_backend_t *be = NULL;
    if (bg_backend_cpu_create(&cfg, &be) != BG_OK) fail_msg("%s", bg_error_message());
    assert_non_null(be);
    return be;
}

static int setup_f64(void **state) {
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    cfg.dtype = BG_F64;
    bg_backend_t *be = NULL;
    if (bg_backend_cpu_create(&cfg, &be) != BG_OK) return -1;
    *state = be;
    return 0;
}

static int teardown_backend(void **state) {
    bg_backend_destroy(*state);
    return 0;
}

static void check_ok(bg_status_t st) {
    if (st != BG_OK) fail_msg("status %s: %s", bg_status_name(st), bg_error_message());
}

static void *alloc_elems(bg_backend_t *be, int64_t count) {
    void *ptr = NULL;
    check_ok(bg_backend_alloc_elems(be, count, &ptr));
    assert_non_null(ptr);
    return ptr;
}

static double *host_alloc(int64_t count) {
    double *ptr = calloc((size_t)(count > 0 ? count : 1), sizeof *ptr);
    assert_non_null(ptr);
    return ptr;
}

static void fill_random(bg_rng_t *rng, double *out, int64_t count, input_kind_t kind) {
    switch (kind) {
    case INPUT_NORMAL:
        for (int64_t i = 0; i < count; i++) out[i] = bg_rng_normal(rng);
        break;
    case INPUT_DISTINCT:
        for (int64_t i = 0; i < count; i++) out[i] = 0.013 * (double)(i - count / 2);
        for (int64_t i = count - 1; i > 0; i--) {
            int64_t j = (int64_t)bg_rng_below(rng, (uint64_t)i + 1);
            double t = out[i];
            out[i] = out[j];
            out[j] = t;
        }
        break;
    case INPUT_NO_KINK:
        for (int64_t i = 0; i < count; i++) {
            double magnitude = 0.1 + bg_rng_uniform(rng);
            out[i] = bg_rng_uniform(rng) < 0.5 ? -magnitude : magnitude;
        }
        break;
    }
}

static void run_create(bg_backend_t *be, const bg_layer_spec_t *spec, int64_t n, layer_run_t *run) {
    memset(run, 0, sizeof *run);
    run->be = be;
    run->spec = spec;
    run->n = n;
    run->nx = n * bg_shape_numel(spec->in);
    run->ny = n * bg_shape_numel(spec->out);
    bg_layer_param_counts(spec, &run->nw, &run->nb);
    run->x = alloc_elems(be, run->nx);
    run->y = alloc_elems(be, run->ny);
    run->dy = alloc_elems(be, run->ny);
    run->dx = alloc_elems(be, run->nx);
    size_t ws_bytes;
    check_ok(bg_layer_workspace_bytes(spec, be, n, &ws_bytes));
    check_ok(be->ops->alloc(be, ws_bytes, &run->workspace));
    run->p.weight_count = run->nw;
    run->p.bias_count = run->nb;
    if (run->nw > 0) {
        run->p.weight = alloc_elems(be, run->nw);
        run->p.bias = alloc_elems(be, run->nb);
        run->p.weight_grad = alloc_elems(be, run->nw);
        run->p.bias_grad = alloc_elems(be, run->nb);
    }
}

static void run_destroy(layer_run_t *run) {
    bg_backend_t *be = run->be;
    void *buffers[] = {run->x,          run->y,        run->dy,     run->dx,
                       run->workspace,  run->p.weight, run->p.bias, run->p.weight_grad,
                       run->p.bias_grad};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) be->ops->free(be, buffers[i]);
}

static void upload(bg_backend_t *be, void *dst, const double *src, int64_t count) {
    check_ok(bg_backend_upload_doubles(be, dst, src, count));
}

static void download(bg_backend_t *be, double *dst, const void *src, int64_t count) {
    check_ok(bg_backend_download_doubles(be, dst, src, count));
}

/* Uploads x, w, b and runs the forward pass; y_out (ny) receives y. */
static void run_forward(layer_run_t *run, const double *x, const double *w, const double *b,
                        double *y_out) {
    upload(run->be, run->x, x, run->nx);
    if (run->nw > 0) {
        upload(run->be, run->p.weight, w, run->nw);
        upload(run->be, run->p.bias, b, run->nb);
    }
    check_ok(bg_layer_forward(run->spec, run->be, &run->p, run->n, run->x, run->y, run->workspace));
    if (y_out != NULL) download(run->be, y_out, run->y, run->ny);
}

/* dL/dv[i] for L = sum(r * layer(x; w, b)) where v is one of x, w, b (the
 * caller passes which), by central differences. Subtracting the two outputs
 * before the dot product keeps the roundoff of unaffected outputs at zero. */
static double numeric_derivative(layer_run_t *run, double *x, double *w, double *b, double *v,
                                 int64_t i, const double *r, double *y_plus, double *y_minus) {
    const double saved = v[i];
    v[i] = saved + FD_EPS;
    run_forward(run, x, w, b, y_plus);
    v[i] = saved - FD_EPS;
    run_forward(run, x, w, b, y_minus);
    /* The step actually taken, after rounding saved +- FD_EPS. */
    const double step = (saved + FD_EPS) - (saved - FD_EPS);
    v[i] = saved;
    double sum = 0;
    for (int64_t j = 0; j < run->ny; j++) sum += r[j] * (y_plus[j] - y_minus[j]);
    return sum / step;
}

/* The forward pass written the obvious way, one output at a time, so that a
 * forward and a backward that are wrong in the same way cannot pass the
 * finite-difference check together. x: (n, in) y: (n, out) */
static double reference_output(const bg_layer_spec_t *s, const double *x, const double *w,
                               const double *b, int64_t i, int64_t c, int64_t oy, int64_t ox) {
    const double *xi = x + i * bg_shape_numel(s->in);
    switch (s->kind) {
    case BG_LAYER_CONV2D: {
        double sum = b[c];
        for (int64_t ch = 0; ch < s->in.c; ch++)
            for (int64_t ky = 0; ky < s->kernel; ky++)
                for (int64_t kx = 0; kx < s->kernel; kx++) {
                    int64_t iy = oy * s->stride + ky - s->pad, ix = ox * s->stride + kx - s->pad;
                    if (iy < 0 || iy >= s->in.h || ix < 0 || ix >= s->in.w) continue;
                    sum += w[((c * s->in.c + ch) * s->kernel + ky) * s->kernel + kx] *
                           xi[(ch * s->in.h + iy) * s->in.w + ix];
                }
        return sum;
    }
    case BG_LAYER_DENSE: {
        double sum = b[c];
        for (int64_t k = 0; k < bg_shape_numel(s->in); k++)
            sum += w[c * bg_shape_numel(s->in) + k] * xi[k];
        return sum;
    }
    case BG_LAYER_MAXPOOL:
    case BG_LAYER_AVGPOOL: {
        double best = -INFINITY, sum = 0;
        for (int64_t ky = 0; ky < s->kernel; ky++)
            for (int64_t kx = 0; kx < s->kernel; kx++) {
                double v = xi[(c * s->in.h + oy * s->stride + ky) * s->in.w + ox * s->stride + kx];
                best = fmax(best, v);
                sum += v;
            }
        return s->kind == BG_LAYER_MAXPOOL ? best : sum / (double)(s->kernel * s->kernel);
    }
    case BG_LAYER_RELU: return fmax(xi[(c * s->in.h + oy) * s->in.w + ox], 0);
    /* Other forms than the kernels' (lib/cpu/kernels.inc), equal in exact
     * arithmetic. */
    case BG_LAYER_TANH: {
        const double v = xi[(c * s->in.h + oy) * s->in.w + ox];
        return (exp(2 * v) - 1) / (exp(2 * v) + 1);
    }
    case BG_LAYER_SIGMOID: return 0.5 * (1 + tanh(0.5 * xi[(c * s->in.h + oy) * s->in.w + ox]));
    case BG_LAYER_GELU: {
        const double v = xi[(c * s->in.h + oy) * s->in.w + ox];
        return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    }
    case BG_LAYER_LAYERNORM: {
        const int64_t features = bg_shape_numel(s->in), f = (c * s->in.h + oy) * s->in.w + ox;
        double sum = 0, squares = 0;
        for (int64_t k = 0; k < features; k++) sum += xi[k];
        for (int64_t k = 0; k < features; k++) squares += xi[k] * xi[k];
        const double mean = sum / (double)features;
        const double variance = squares / (double)features - mean * mean; /* E[x^2] - E[x]^2 */
        return (xi[f] - mean) / sqrt(variance + BG_LAYERNORM_EPS) * w[f] + b[f];
    }
    case BG_LAYER_FLATTEN: return xi[(c * s->out.h + oy) * s->out.w + ox];
    case BG_LAYER_DROPOUT:  /* a draw, not a function: test_dropout_* */
    case BG_LAYER_RESIDUAL: /* a stage's, over a block: test_residual */
    case BG_LAYER_SHORTCUT:
    case BG_LAYER_ADD:
    case BG_LAYER_SOFTMAX_CROSS_ENTROPY: break;
    }
    fail_msg("no reference for layer kind %d", (int)s->kind);
    return 0;
}

static void expect_reference_forward(const bg_layer_spec_t *s, int64_t n, const double *x,
                                     const double *w, const double *b, const double *y) {
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < s->out.c; c++)
            for (int64_t oy = 0; oy < s->out.h; oy++)
                for (int64_t ox = 0; ox < s->out.w; ox++, j++) {
                    const double want = reference_output(s, x, w, b, i, c, oy, ox);
                    if (!(fabs(y[j] - want) <= 1e-12 * (1 + fabs(want))))
                        fail_msg("y[%lld] = %.17g, reference %.17g", (long long)j, y[j], want);
                }
}

static void expect_gradient(const char *what, int64_t i, double analytic, double numeric,
                            error_stats_t *stats) {
    const double err = fabs(analytic - numeric);
    if (err > stats->max_abs) stats->max_abs = err;
    if (fabs(numeric) >= 1e-2 && err / fabs(numeric) > stats->max_rel)
        stats->max_rel = err / fabs(numeric);
    if (fabs(numeric) > stats->max_numeric) stats->max_numeric = fabs(numeric);
    const double tol = FD_ABS_TOL + FD_REL_TOL * fabs(numeric);
    if (err / tol > stats->max_ratio) stats->max_ratio = err / tol;
    if (!(err <= tol))
        fail_msg("%s[%lld]: analytic %.12g, finite difference %.12g (error %.3g)", what,
                 (long long)i, analytic, numeric, err);
}

/* The full check of one layer on the f64 backend: dx, dW and db against
 * finite differences, dx overwritten, and dW/db accumulated by a second call. */
static void check_layer(bg_backend_t *be, const bg_layer_spec_t *spec, int64_t n, uint64_t seed,
                        input_kind_t kind) {
    assert_int_equal(be->dtype, BG_F64);
    layer_run_t run;
    run_create(be, spec, n, &run);
    bg_rng_t rng;
    bg_rng_seed(&rng, seed, 0);

    double *x = host_alloc(run.nx), *r = host_alloc(run.ny);
    double *w = host_alloc(run.nw), *b = host_alloc(run.nb);
    double *dx = host_alloc(run.nx), *dw = host_alloc(run.nw), *db = host_alloc(run.nb);
    double *dw2 = host_alloc(run.nw), *db2 = host_alloc(run.nb);
    double *y_plus = host_alloc(run.ny), *y_minus = host_alloc(run.ny);
    fill_random(&rng, x, run.nx, kind);
    fill_random(&rng, r, run.ny, INPUT_NORMAL);
    fill_random(&rng, w, run.nw, INPUT_NORMAL);
    fill_random(&rng, b, run.nb, INPUT_NORMAL);

    /* The forward against the reference, then analytic gradients. dx starts
     * as garbage: backward_data must overwrite it. */
    run_forward(&run, x, w, b, y_plus);
    expect_reference_forward(spec, n, x, w, b, y_plus);
    upload(be, run.dy, r, run.ny);
    for (int64_t i = 0; i < run.nx; i++) dx[i] = 777.0;
    upload(be, run.dx, dx, run.nx);
    check_ok(
        bg_layer_backward_data(spec, be, &run.p, n, run.x, run.y, run.dy, run.dx, run.workspace));
    download(be, dx, run.dx, run.nx);
    check_ok(bg_layer_backward_weights(spec, be, &run.p, n, run.x, run.dy, run.workspace));
    if (run.nw > 0) {
        download(be, dw, run.p.weight_grad, run.nw);
        download(be, db, run.p.bias_grad, run.nb);
    }

    error_stats_t stats = {0};
    for (int64_t i = 0; i < run.nx; i++)
        expect_gradient("dx", i, dx[i], numeric_derivative(&run, x, w, b, x, i, r, y_plus, y_minus),
                        &stats);
    for (int64_t i = 0; i < run.nw; i++)
        expect_gradient("dw", i, dw[i], numeric_derivative(&run, x, w, b, w, i, r, y_plus, y_minus),
                        &stats);
    for (int64_t i = 0; i < run.nb; i++)
        expect_gradient("db", i, db[i], numeric_derivative(&run, x, w, b, b, i, r, y_plus, y_minus),
                        &stats);
    /* Every layer passes some gradient of order one through. */
    assert_true(stats.max_numeric > 0.1);

    /* A second backward_weights adds the same gradient again. */
    if (run.nw > 0) {
        check_ok(bg_layer_backward_weights(spec, be, &run.p, n, run.x, run.dy, run.workspace));
        download(be, dw2, run.p.weight_grad, run.nw);
        download(be, db2, run.p.bias_grad, run.nb);
        for (int64_t i = 0; i < run.nw; i++)
            expect_near(dw2[i], 2 * dw[i], 1e-12 * (1 + fabs(dw[i])));
        for (int64_t i = 0; i < run.nb; i++)
            expect_near(db2[i], 2 * db[i], 1e-12 * (1 + fabs(db[i])));
    }
    print_message("%s n=%lld: %lld+%lld+%lld entries, max abs error %.2e, max rel error %.2e"
                  ", worst error/tolerance %.2f\n",
                  bg_layer_kind_name(spec->kind), (long long)n, (long long)run.nx,
                  (long long)run.nw, (long long)run.nb, stats.max_abs, stats.max_rel,
                  stats.max_ratio);

    double *host[] = {x, r, w, b, dx, dw, db, dw2, db2, y_plus, y_minus};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    run_destroy(&run);
}

/* ---- conv2d ---- */

static void test_conv2d_k3_valid(void **state) {
    /* Non-square input so that h and w cannot be swapped unnoticed. */
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_CONV2D,
        .in = {1, 6, 7},
        .out = {4, 4, 5},
        .filters = 4,
        .kernel = 3,
        .stride = 1,
        .pad = 0,
    };
    check_layer(*state, &spec, 2, 11, INPUT_NORMAL);
}

static void test_conv2d_k3_pad1_stride2(void **state) {
    /* (8 + 2 - 3) / 2 + 1 = 4 rows, (7 + 2 - 3) / 2 + 1 = 4 columns. */
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_CONV2D,
        .in = {2, 8, 7},
        .out = {3, 4, 4},
        .filters = 3,
        .kernel = 3,
        .stride = 2,
        .pad = 1,
    };
    check_layer(*state, &spec, 2, 12, INPUT_NORMAL);
}

static void test_conv2d_k1(void **state) {
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_CONV2D,
        .in = {3, 4, 5},
        .out = {5, 4, 5},
        .filters = 5,
        .kernel = 1,
        .stride = 1,
        .pad = 0,
    };
    check_layer(*state, &spec, 2, 13, INPUT_NORMAL);
}

static void test_conv2d_multichannel_same(void **state) {
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_CONV2D,
        .in = {3, 5, 5},
        .out = {2, 5, 5},
        .filters = 2,
        .kernel = 3,
        .stride = 1,
        .pad = 1,
    };
    check_layer(*state, &spec, 3, 14, INPUT_NORMAL);
}

/* A convolution at stride 1, its output's size derived. */
static bg_layer_spec_t stride1_conv(int64_t c, int64_t h, int64_t w, int64_t filters,
                                    int64_t kernel, int64_t pad) {
    return (bg_layer_spec_t){.kind = BG_LAYER_CONV2D,
                             .in = {c, h, w},
                             .out = {filters, h + 2 * pad - kernel + 1, w + 2 * pad - kernel + 1},
                             .filters = filters,
                             .kernel = kernel,
                             .stride = 1,
                             .pad = pad};
}

/* Stride 1 over 8 or more input channels: the shifted products of
 * lib/cpu/conv_shifted.inc, not im2col. Non-square images, padding 0, 1
 * and 2, kernels 1, 3 and 5. */
static void test_conv2d_shifted(void **state) {
    const bg_layer_spec_t specs[] = {
        stride1_conv(9, 5, 6, 4, 3, 1), /* out (4, 5, 6) */
        stride1_conv(8, 6, 5, 3, 3, 0), /* out (3, 4, 3) */
        stride1_conv(8, 7, 6, 2, 5, 2), /* out (2, 7, 6) */
        stride1_conv(8, 4, 5, 5, 1, 0), /* out (5, 4, 5) */
    };
    assert_int_equal(specs[1].out.h, 4);
    assert_int_equal(specs[1].out.w, 3);
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        check_layer(*state, &specs[i], 3, 15 + (uint64_t)i, INPUT_NORMAL);
}

/* ---- dense, pooling, relu, flatten ---- */

static void test_dense(void **state) {
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_DENSE,
        .in = {12, 1, 1},
        .out = {5, 1, 1},
        .filters = 5,
    };
    check_layer(*state, &spec, 3, 21, INPUT_NORMAL);
}

static void test_dense_single_sample(void **state) {
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_DENSE,
        .in = {7, 1, 1},
        .out = {1, 1, 1},
        .filters = 1,
    };
    check_layer(*state, &spec, 1, 22, INPUT_NORMAL);
}

static void test_maxpool_2_2(void **state) {
    /* The last row of the 7-row input is outside every window. */
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {2, 7, 6},
        .out = {2, 3, 3},
        .kernel = 2,
        .stride = 2,
    };
    check_layer(*state, &spec, 2, 31, INPUT_DISTINCT);
}

static void test_maxpool_3_2_overlapping(void **state) {
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {2, 7, 7},
        .out = {2, 3, 3},
        .kernel = 3,
        .stride = 2,
    };
    check_layer(*state, &spec, 3, 32, INPUT_DISTINCT);
}

static void test_maxpool_2_2_even(void **state) {
    /* Windows tile the input exactly (the kernels may take a faster path). */
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {2, 6, 8},
        .out = {2, 3, 4},
        .kernel = 2,
        .stride = 2,
    };
    check_layer(*state, &spec, 2, 33, INPUT_DISTINCT);
}

/* Runs max pooling forward and backward on one plane; dx starts as garbage. */
static void maxpool_plane(bg_backend_t *be, const bg_layer_spec_t *spec, const double *x,
                          const double *dy, double *y, double *dx) {
    layer_run_t run;
    run_create(be, spec, 1, &run);
    run_forward(&run, x, NULL, NULL, y);
    upload(be, run.dy, dy, run.ny);
    double *garbage = host_alloc(run.nx);
    for (int64_t i = 0; i < run.nx; i++) garbage[i] = 777.0;
    upload(be, run.dx, garbage, run.nx);
    check_ok(
        bg_layer_backward_data(spec, be, &run.p, 1, run.x, run.y, run.dy, run.dx, run.workspace));
    download(be, dx, run.dx, run.nx);
    free(garbage);
    run_destroy(&run);
}

/* Ties send the gradient to the first maximum in row-major order, both when
 * the windows tile the input and when they do not. */
static void test_maxpool_ties(void **state) {
    bg_backend_t *be = *state;
    const bg_layer_spec_t tiled = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {1, 2, 4},
        .out = {1, 1, 2},
        .kernel = 2,
        .stride = 2,
    };
    const double x1[8] = {1, 1, 0, 3, 1, 1, 3, 3}, dy1[2] = {5, 7};
    const double want1[8] = {5, 0, 0, 7, 0, 0, 0, 0};
    double y[2], dx[9];
    maxpool_plane(be, &tiled, x1, dy1, y, dx);
    expect_near(y[0], 1, 0);
    expect_near(y[1], 3, 0);
    for (int i = 0; i < 8; i++) expect_near(dx[i], want1[i], 0);

    /* 3x3 input, one 2x2 window: the last row and column get no gradient. */
    const bg_layer_spec_t ragged = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {1, 3, 3},
        .out = {1, 1, 1},
        .kernel = 2,
        .stride = 2,
    };
    const double x2[9] = {1, 2, 9, 2, 2, 9, 9, 9, 9}, dy2[1] = {4};
    const double want2[9] = {0, 4, 0, 0, 0, 0, 0, 0, 0};
    maxpool_plane(be, &ragged, x2, dy2, y, dx);
    expect_near(y[0], 2, 0);
    for (int i = 0; i < 9; i++) expect_near(dx[i], want2[i], 0);

    /* Overlapping 2x2 windows with stride 1 on a constant row pair: each
     * window's gradient goes to its own top-left cell and they add up. */
    const bg_layer_spec_t overlap = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {1, 2, 3},
        .out = {1, 1, 2},
        .kernel = 2,
        .stride = 1,
    };
    const double x3[6] = {2, 2, 2, 2, 2, 2}, dy3[2] = {1, 10};
    const double want3[6] = {1, 10, 0, 0, 0, 0};
    maxpool_plane(be, &overlap, x3, dy3, y, dx);
    for (int i = 0; i < 6; i++) expect_near(dx[i], want3[i], 0);
}

/* Writes v at index i of an array of floats (f32) or doubles. */
static void put_real(void *array, int f32, int64_t i, double v) {
    if (f32)
        ((float *)array)[i] = (float)v;
    else
        ((double *)array)[i] = v;
}

static double get_real(const void *array, int f32, int64_t i) {
    return f32 ? ((const float *)array)[i] : ((const double *)array)[i];
}

/* A window holding a NaN pools to NaN wherever the NaN sits, on the 2x2
 * stride-2 path and the general one (stride 1 here), floats and doubles,
 * and sends its gradient to its last position (lib/backend.h). */
static void test_maxpool_nan(void **state) {
    (void)state;
    const bg_pool_geometry_t shapes[] = {
        {.n = 1, .c = 1, .h = 2, .w = 2, .size = 2, .stride = 2, .out_h = 1, .out_w = 1},
        {.n = 1, .c = 1, .h = 2, .w = 2, .size = 2, .stride = 1, .out_h = 1, .out_w = 1},
    };
    for (int f32 = 0; f32 < 2; f32++) {
        bg_backend_t *be = backend_create(f32 ? BG_F32 : BG_F64);
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            for (int at = 0; at < 4; at++) {
                char x[4 * sizeof(double)], y[sizeof(double)], dy[sizeof(double)];
                char dx[4 * sizeof(double)];
                for (int i = 0; i < 4; i++) put_real(x, f32, i, i == at ? NAN : 1.0 + i);
                put_real(dy, f32, 0, 5.0);
                check_ok(be->ops->maxpool_forward(be, &shapes[k], x, y));
                if (!isnan(get_real(y, f32, 0)))
                    fail_msg("%s, stride %lld, NaN at %d: pooled to %g", f32 ? "float" : "double",
                             (long long)shapes[k].stride, at, get_real(y, f32, 0));
                check_ok(be->ops->maxpool_backward(be, &shapes[k], x, y, dy, dx));
                for (int i = 0; i < 4; i++) expect_near(get_real(dx, f32, i), i == 3 ? 5.0 : 0, 0);
            }
        }
        bg_backend_destroy(be);
    }
}

/* conv2d_relu_forward is conv2d_forward then relu_forward in place, to the
 * bit: several samples, with and without padding and stride, floats and
 * doubles. */
static void test_conv2d_relu_forward(void **state) {
    (void)state;
    const bg_conv2d_geometry_t shapes[] = {
        {.n = 3,
         .c = 2,
         .h = 6,
         .w = 5,
         .filters = 4,
         .kernel = 3,
         .stride = 1,
         .pad = 0,
         .out_h = 4,
         .out_w = 3},
        {.n = 2,
         .c = 3,
         .h = 7,
         .w = 7,
         .filters = 5,
         .kernel = 3,
         .stride = 2,
         .pad = 1,
         .out_h = 4,
         .out_w = 4},
        /* the shifted products (conv_shifted.inc) */
        {.n = 2,
         .c = 8,
         .h = 5,
         .w = 6,
         .filters = 3,
         .kernel = 3,
         .stride = 1,
         .pad = 1,
         .out_h = 5,
         .out_w = 6},
    };
    bg_rng_t rng;
    bg_rng_seed(&rng, 43, 0);
    for (int f32 = 0; f32 < 2; f32++) {
        bg_backend_t *be = backend_create(f32 ? BG_F32 : BG_F64);
        const size_t elem = f32 ? sizeof(float) : sizeof(double);
        int negative = 0, positive = 0; /* outputs the relu zeroed or kept */
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            const bg_conv2d_geometry_t *g = &shapes[k];
            const int64_t nx = g->n * g->c * g->h * g->w, nw = g->filters * g->c * 9,
                          ny = g->n * g->filters * g->out_h * g->out_w;
            size_t bytes = 0;
            check_ok(be->ops->conv2d_workspace_bytes(be, g, &bytes));
            void *x = malloc(elem * (size_t)nx), *w = malloc(elem * (size_t)nw);
            void *b = malloc(elem * (size_t)g->filters), *work = malloc(bytes + 1);
            void *want = malloc(elem * (size_t)ny), *got = malloc(elem * (size_t)ny);
            assert_true(x && w && b && work && want && got);
            for (int64_t i = 0; i < nx; i++) put_real(x, f32, i, bg_rng_normal(&rng));
            for (int64_t i = 0; i < nw; i++) put_real(w, f32, i, bg_rng_normal(&rng));
            for (int64_t i = 0; i < g->filters; i++) put_real(b, f32, i, bg_rng_normal(&rng));
            check_ok(be->ops->conv2d_forward(be, g, x, w, b, want, work));
            for (int64_t i = 0; i < ny; i++) {
                const double v = f32 ? ((float *)want)[i] : ((double *)want)[i];
                negative += v < 0;
                positive += v > 0;
            }
            check_ok(be->ops->relu_forward(be, ny, want, want));
            check_ok(be->ops->conv2d_relu_forward(be, g, x, w, b, got, work));
            if (memcmp(want, got, elem * (size_t)ny) != 0)
                fail_msg("%s, shape %zu: the fused forward differs from the two ops",
                         f32 ? "float" : "double", k);
            free(x);
            free(w);
            free(b);
            free(work);
            free(want);
            free(got);
        }
        assert_true(negative > 0 && positive > 0); /* not vacuous */
        bg_backend_destroy(be);
    }
}

/* maxpool_relu_backward is maxpool_backward then relu_backward (y = x) to
 * the bit: on relu outputs and on anything else (negatives, -0, NaN, ties),
 * where the windows tile the input, where they leave a ragged edge, and
 * where they overlap; floats and doubles. */
static void test_maxpool_relu_backward(void **state) {
    (void)state;
    /* Mostly not above 0, so that some windows hold no positive value. */
    static const double values[] = {-1.5, -2.0, -0.0, 0.0, 0.0, 0.5, 2.0, 2.0, NAN};
    const bg_pool_geometry_t shapes[] = {
        {.n = 2, .c = 3, .h = 6, .w = 8, .size = 2, .stride = 2, .out_h = 3, .out_w = 4},
        {.n = 2, .c = 3, .h = 5, .w = 7, .size = 2, .stride = 2, .out_h = 2, .out_w = 3},
        {.n = 1, .c = 2, .h = 7, .w = 7, .size = 3, .stride = 2, .out_h = 3, .out_w = 3},
    };
    bg_rng_t rng;
    bg_rng_seed(&rng, 41, 0);
    for (int f32 = 0; f32 < 2; f32++) {
        bg_backend_t *be = backend_create(f32 ? BG_F32 : BG_F64);
        const size_t elem = f32 ? sizeof(float) : sizeof(double);
        int passed = 0, blocked = 0; /* routed gradients the relu kept or zeroed */
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            const bg_pool_geometry_t *g = &shapes[k];
            const int64_t nx = g->n * g->c * g->h * g->w, ny = g->n * g->c * g->out_h * g->out_w;
            void *x = malloc(elem * (size_t)nx), *y = malloc(elem * (size_t)ny);
            void *dy = malloc(elem * (size_t)ny), *routed = malloc(elem * (size_t)nx);
            void *want = malloc(elem * (size_t)nx), *got = malloc(elem * (size_t)nx);
            assert_true(x && y && dy && routed && want && got);
            for (int64_t i = 0; i < nx; i++)
                put_real(x, f32, i, values[bg_rng_below(&rng, sizeof values / sizeof values[0])]);
            for (int64_t i = 0; i < ny; i++)
                put_real(dy, f32, i, i % 5 == 0 ? -0.0 : bg_rng_normal(&rng));
            for (int64_t i = 0; i < nx; i++) put_real(got, f32, i, 777.0); /* overwritten */
            check_ok(be->ops->maxpool_forward(be, g, x, y));
            check_ok(be->ops->maxpool_backward(be, g, x, y, dy, routed));
            check_ok(be->ops->relu_backward(be, nx, x, routed, want));
            check_ok(be->ops->maxpool_relu_backward(be, g, x, y, dy, got));
            if (memcmp(want, got, elem * (size_t)nx) != 0)
                fail_msg("%s, shape %zu: the fused backward differs from the two ops",
                         f32 ? "float" : "double", k);
            for (int64_t i = 0; i < nx; i++) {
                const double r = f32 ? ((float *)routed)[i] : ((double *)routed)[i];
                const double v = f32 ? ((float *)want)[i] : ((double *)want)[i];
                passed += r != 0 && v == r;
                blocked += r != 0 && v == 0;
            }
            free(x);
            free(y);
            free(dy);
            free(routed);
            free(want);
            free(got);
        }
        assert_true(passed > 0 && blocked > 0); /* not vacuous */
        bg_backend_destroy(be);
    }
}

/* relu's x and y may alias, and so may dy and dx. */
static void test_relu_in_place(void **state) {
    bg_backend_t *be = *state;
    const double x[4] = {-1, 2, -3, 4}, dy[4] = {10, 20, 30, 40};
    double out[4];
    void *buffer = alloc_elems(be, 4), *grad = alloc_elems(be, 4);
    upload(be, buffer, x, 4);
    check_ok(be->ops->relu_forward(be, 4, buffer, buffer));
    download(be, out, buffer, 4);
    const double want_y[4] = {0, 2, 0, 4}, want_dx[4] = {0, 20, 0, 40};
    for (int i = 0; i < 4; i++) expect_near(out[i], want_y[i], 0);
    upload(be, grad, dy, 4);
    check_ok(be->ops->relu_backward(be, 4, buffer, grad, grad));
    download(be, out, grad, 4);
    for (int i = 0; i < 4; i++) expect_near(out[i], want_dx[i], 0);
    be->ops->free(be, buffer);
    be->ops->free(be, grad);
}

/* A NaN passes relu, as in PyTorch (a relu that made it 0 would hide it
 * from the checks for non-finite values after the layer); -0 becomes 0. */
static void test_relu_passes_nan(void **state) {
    bg_backend_t *be = *state;
    const double x[3] = {NAN, -0.0, -INFINITY};
    double out[3];
    void *buffer = alloc_elems(be, 3), *y = alloc_elems(be, 3);
    upload(be, buffer, x, 3);
    check_ok(be->ops->relu_forward(be, 3, buffer, y));
    download(be, out, y, 3);
    assert_true(isnan(out[0]));
    assert_true(out[1] == 0 && !signbit(out[1]));
    assert_true(out[2] == 0);
    /* Its gradient passes where the output is NaN (PyTorch's
     * threshold_backward), not where it is 0. */
    const double dy[3] = {5, 6, 7};
    upload(be, buffer, dy, 3);
    check_ok(be->ops->relu_backward(be, 3, y, buffer, buffer));
    download(be, out, buffer, 3);
    assert_true(out[0] == 5 && out[1] == 0 && out[2] == 0);
    be->ops->free(be, buffer);
    be->ops->free(be, y);
}

static void test_avgpool_2_2(void **state) {
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_AVGPOOL,
        .in = {2, 6, 6},
        .out = {2, 3, 3},
        .kernel = 2,
        .stride = 2,
    };
    check_layer(*state, &spec, 2, 41, INPUT_NORMAL);
}

static void test_avgpool_3_1(void **state) {
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_AVGPOOL,
        .in = {2, 5, 6},
        .out = {2, 3, 4},
        .kernel = 3,
        .stride = 1,
    };
    check_layer(*state, &spec, 3, 42, INPUT_NORMAL);
}

static void test_relu(void **state) {
    const bg_layer_spec_t spec = {.kind = BG_LAYER_RELU, .in = {3, 4, 4}, .out = {3, 4, 4}};
    check_layer(*state, &spec, 2, 51, INPUT_NO_KINK);
}

static void test_tanh(void **state) {
    const bg_layer_spec_t spec = {.kind = BG_LAYER_TANH, .in = {3, 4, 4}, .out = {3, 4, 4}};
    check_layer(*state, &spec, 2, 52, INPUT_NORMAL);
}

static void test_sigmoid(void **state) {
    const bg_layer_spec_t spec = {.kind = BG_LAYER_SIGMOID, .in = {5, 1, 1}, .out = {5, 1, 1}};
    check_layer(*state, &spec, 3, 53, INPUT_NORMAL);
}

static void test_gelu(void **state) {
    const bg_layer_spec_t spec = {.kind = BG_LAYER_GELU, .in = {2, 3, 5}, .out = {2, 3, 5}};
    check_layer(*state, &spec, 2, 54, INPUT_NORMAL);
}

/* Hand values, and the contract that lets tanh and sigmoid run in place
 * (bg_layer_runs_in_place): their backward reads only y, gelu's only x, so
 * the other argument may hold anything. Far out, each saturates to a
 * finite value and gradient (exp(-x) overflowing to Inf gives sigmoid 0). */
static void test_activation_values(void **state) {
    bg_backend_t *be = *state;
    const double x[5] = {0, 1, -2, 800, -800};
    const double want[3][5] = {
        {0, 0.7615941559557649, -0.9640275800758169, 1, -1},
        {0.5, 0.7310585786300049, 0.11920292202211757, 1, 0},
        {0, 0.8413447460685429, -0.04550026389635844, 800, 0},
    };
    /* f'(x): 1 - tanh^2, s (1 - s), Phi(x) + x phi(x) */
    const double slope[3][5] = {
        {1, 0.41997434161402614, 0.07065082485316443, 0, 0},
        {0.25, 0.19661193324148185, 0.10499358540350653, 0, 0},
        {0.5, 1.0833154705876864, -0.0852318010781969, 1, 0},
    };
    const bg_activation_t fs[3] = {BG_ACTIVATION_TANH, BG_ACTIVATION_SIGMOID, BG_ACTIVATION_GELU};
    void *dx_buf, *y_buf, *dy_buf, *junk_buf;
    check_ok(bg_backend_alloc_elems(be, 5, &dx_buf));
    check_ok(bg_backend_alloc_elems(be, 5, &y_buf));
    check_ok(bg_backend_alloc_elems(be, 5, &dy_buf));
    check_ok(bg_backend_alloc_elems(be, 5, &junk_buf));
    const double ones[5] = {1, 1, 1, 1, 1}, junk[5] = {NAN, NAN, NAN, NAN, NAN};
    for (int f = 0; f < 3; f++) {
        double y[5], dx[5];
        upload(be, dx_buf, x, 5);
        check_ok(be->ops->activation_forward(be, fs[f], 5, dx_buf, y_buf));
        download(be, y, y_buf, 5);
        for (int i = 0; i < 5; i++) expect_near(y[i], want[f][i], 1e-15);
        upload(be, dy_buf, ones, 5);
        upload(be, junk_buf, junk, 5);
        if (fs[f] == BG_ACTIVATION_GELU)
            check_ok(be->ops->activation_backward(be, fs[f], 5, dx_buf, junk_buf, dy_buf, dy_buf));
        else
            check_ok(be->ops->activation_backward(be, fs[f], 5, junk_buf, y_buf, dy_buf, dy_buf));
        download(be, dx, dy_buf, 5);
        for (int i = 0; i < 5; i++) expect_near(dx[i], slope[f][i], 1e-15);
    }
    be->ops->free(be, dx_buf);
    be->ops->free(be, y_buf);
    be->ops->free(be, dy_buf);
    be->ops->free(be, junk_buf);
}

static void test_layernorm_vector(void **state) {
    const bg_layer_spec_t spec = {.kind = BG_LAYER_LAYERNORM, .in = {7, 1, 1}, .out = {7, 1, 1}};
    check_layer(*state, &spec, 3, 55, INPUT_NORMAL);
}

static void test_layernorm_image(void **state) {
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_LAYERNORM, .in = {2, 3, 4}, .out = {2, 3, 4}, .in_image = 1};
    check_layer(*state, &spec, 2, 56, INPUT_NORMAL);
}

/* By hand: a row 1, 2, 3, 4 (mean 2.5, variance 1.25) with gamma 1, 2, 1, 1
 * and beta 0, 0, 1, 0; and a constant row, whose centred values are all 0,
 * giving beta (eps keeps 1/std finite), and whose dx is then rstd times dy
 * gamma less its mean. Starting at gamma 1 and beta 0, a layer is the
 * normalisation alone. */
static void test_layernorm_hand_values(void **state) {
    bg_backend_t *be = *state;
    const bg_layer_spec_t spec = {.kind = BG_LAYER_LAYERNORM, .in = {4, 1, 1}, .out = {4, 1, 1}};
    const double x[8] = {1, 2, 3, 4, 5, 5, 5, 5}, w[4] = {1, 2, 1, 1}, b[4] = {0, 0, 1, 0};
    double y[8], dx[8];
    layer_run_t run;
    run_create(be, &spec, 2, &run);
    run_forward(&run, x, w, b, y);
    const double r = 1 / sqrt(1.25 + 1e-5);
    const double want[8] = {-1.5 * r, -0.5 * 2 * r, 0.5 * r + 1, 1.5 * r, 0, 0, 1, 0};
    for (int i = 0; i < 8; i++) expect_near(y[i], want[i], 1e-14);
    const double dy[8] = {0, 0, 0, 0, 1, 0, 0, 0};
    upload(be, run.dy, dy, 8);
    check_ok(
        bg_layer_backward_data(&spec, be, &run.p, 2, run.x, run.y, run.dy, run.dx, run.workspace));
    download(be, dx, run.dx, 8);
    const double rc = 1 / sqrt(1e-5); /* the constant row's 1/std */
    const double want_dx[4] = {0.75 * rc, -0.25 * rc, -0.25 * rc, -0.25 * rc};
    for (int i = 0; i < 4; i++) expect_near(dx[i], 0, 0);
    for (int i = 0; i < 4; i++) expect_near(dx[4 + i], want_dx[i], 1e-12 * rc);
    run_destroy(&run);
    float gamma[4], beta[4];
    bg_layer_init_params(&spec, 3, 7, gamma, beta);
    for (int i = 0; i < 4; i++) {
        expect_near(gamma[i], 1, 0);
        expect_near(beta[i], 0, 0);
    }
}

/* gelu in float far below 0, where 1 + erf(x / sqrt 2) would keep only a
 * few bits (4% off at x = -5): through erfc, its value and slope stay
 * within 1e-5 relative of double's. */
static void test_gelu_tail_float(void **state) {
    (void)state;
    bg_backend_t *be = backend_create(BG_F32);
    enum { N = 4 };
    const double x[N] = {-3.5, -5, -6.5, -8};
    double y[N], dx[N], want_y[N], want_dx[N];
    const double ones[N] = {1, 1, 1, 1};
    for (int i = 0; i < N; i++) {
        const double v = (float)x[i], cdf = 0.5 * erfc(-v / sqrt(2.0));
        want_y[i] = v * cdf;
        want_dx[i] = cdf + v * exp(-0.5 * v * v) / sqrt(2 * M_PI);
    }
    void *xb, *yb, *gb;
    check_ok(bg_backend_alloc_elems(be, N, &xb));
    check_ok(bg_backend_alloc_elems(be, N, &yb));
    check_ok(bg_backend_alloc_elems(be, N, &gb));
    upload(be, xb, x, N);
    check_ok(be->ops->activation_forward(be, BG_ACTIVATION_GELU, N, xb, yb));
    download(be, y, yb, N);
    upload(be, gb, ones, N);
    check_ok(be->ops->activation_backward(be, BG_ACTIVATION_GELU, N, xb, yb, gb, gb));
    download(be, dx, gb, N);
    for (int i = 0; i < N; i++) {
        expect_near(y[i], want_y[i], 1e-5 * fabs(want_y[i]));
        expect_near(dx[i], want_dx[i], 1e-5 * fabs(want_dx[i]));
    }
    be->ops->free(be, xb);
    be->ops->free(be, yb);
    be->ops->free(be, gb);
    bg_backend_destroy(be);
}

/* A layer with a GEMM side past INT_MAX is refused by the CPU ops, in both
 * element types, before they touch a buffer (NULL here), where an (int)
 * cast made OpenBLAS refuse the call and the op return its bias; one side
 * short of it is accepted by the workspace query. */
static void test_blas_sizes_refused(void **state) {
    (void)state;
    const int64_t past = (int64_t)INT_MAX + 1;
    for (int t = 0; t < 2; t++) {
        bg_backend_t *be = backend_create(t == 0 ? BG_F32 : BG_F64);
        assert_int_equal(be->ops->dense_forward(be, 1, past, 2, NULL, NULL, NULL, NULL),
                         BG_ERR_UNSUPPORTED);
        assert_non_null(strstr(bg_error_message(), "dense layer of 2 units over 2147483648"));
        assert_int_equal(be->ops->dense_backward_data(be, past, 3, 2, NULL, NULL, NULL),
                         BG_ERR_UNSUPPORTED);
        assert_int_equal(be->ops->dense_backward_weights(be, 1, 3, past, NULL, NULL, NULL, NULL),
                         BG_ERR_UNSUPPORTED);
        /* im2col (1 channel): an output plane of 46341^2 = 2147488281 */
        bg_conv2d_geometry_t g = {.n = 1,
                                  .c = 1,
                                  .h = 46341,
                                  .w = 46341,
                                  .filters = 1,
                                  .kernel = 1,
                                  .stride = 1,
                                  .out_h = 46341,
                                  .out_w = 46341};
        size_t bytes = 0;
        assert_int_equal(be->ops->conv2d_workspace_bytes(be, &g, &bytes), BG_ERR_UNSUPPORTED);
        assert_non_null(strstr(bg_error_message(), "side of 2147488281"));
        assert_int_equal(be->ops->conv2d_forward(be, &g, NULL, NULL, NULL, NULL, NULL),
                         BG_ERR_UNSUPPORTED);
        assert_int_equal(be->ops->conv2d_relu_forward(be, &g, NULL, NULL, NULL, NULL, NULL),
                         BG_ERR_UNSUPPORTED);
        assert_int_equal(be->ops->conv2d_backward_data(be, &g, NULL, NULL, NULL, NULL),
                         BG_ERR_UNSUPPORTED);
        assert_int_equal(be->ops->conv2d_backward_weights(be, &g, NULL, NULL, NULL, NULL, NULL),
                         BG_ERR_UNSUPPORTED);
        /* the shifted path (8 channels, stride 1): its padded plane,
         * (h + 2 pad + 1) (w + 2 pad) = 2 * 1073741825 */
        g = (bg_conv2d_geometry_t){.n = 1,
                                   .c = 8,
                                   .h = 1,
                                   .w = 1073741825,
                                   .filters = 1,
                                   .kernel = 1,
                                   .stride = 1,
                                   .out_h = 1,
                                   .out_w = 1073741825};
        assert_int_equal(be->ops->conv2d_workspace_bytes(be, &g, &bytes), BG_ERR_UNSUPPORTED);
        assert_non_null(strstr(bg_error_message(), "side of 2147483650"));
        /* one short: the same convolution one column narrower */
        g.w = g.out_w = 1073741823;
        assert_int_equal(be->ops->conv2d_workspace_bytes(be, &g, &bytes), BG_OK);
        bg_backend_destroy(be);
    }
}

/* Which layers run in place over their predecessor's output: relu, tanh
 * and sigmoid (whose backward reads only their output) after a conv2d,
 * dense or avgpool (whose backward never reads their own output); not
 * gelu or layernorm (they read their input), not after a max-pool (its
 * backward compares its input with its output) or an activation. */
static void test_runs_in_place(void **state) {
    (void)state;
    /* The first seven never read their own output; the others do, or (a
     * flatten, a residual, a shortcut) hand on a buffer they do not own.
     * The first five kinds read neither their input nor (relu, tanh,
     * sigmoid) more than their output in their backward. */
    const bg_layer_kind_t befores[] = {
        BG_LAYER_CONV2D,  BG_LAYER_DENSE,   BG_LAYER_AVGPOOL,  BG_LAYER_GELU,    BG_LAYER_LAYERNORM,
        BG_LAYER_DROPOUT, BG_LAYER_ADD,     BG_LAYER_MAXPOOL,  BG_LAYER_FLATTEN, BG_LAYER_RELU,
        BG_LAYER_TANH,    BG_LAYER_SIGMOID, BG_LAYER_RESIDUAL, BG_LAYER_SHORTCUT};
    const bg_layer_kind_t kinds[] = {BG_LAYER_RELU,      BG_LAYER_TANH,  BG_LAYER_SIGMOID,
                                     BG_LAYER_DROPOUT,   BG_LAYER_ADD,   BG_LAYER_GELU,
                                     BG_LAYER_LAYERNORM, BG_LAYER_DENSE, BG_LAYER_RESIDUAL};
    bg_layer_spec_t layers[2] = {{0}};
    bg_model_spec_t spec = {.num_layers = 2, .layers = layers};
    int in_place = 0;
    for (size_t b = 0; b < sizeof befores / sizeof befores[0]; b++) {
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            layers[0].kind = befores[b];
            layers[1].kind = kinds[k];
            const int want = b < 7 && k < 5;
            if (bg_layer_runs_in_place(&spec, 1) != want)
                fail_msg("%s after %s: runs in place %d, want %d", bg_layer_kind_name(kinds[k]),
                         bg_layer_kind_name(befores[b]), !want, want);
            in_place += want;
        }
    }
    assert_int_equal(in_place, 35);
    assert_int_equal(bg_layer_runs_in_place(&spec, 0), 0); /* nothing before it in the stack */
}

/* The mask's bits (lib/dropout.h), worked out apart in Python from the
 * two published algorithms, so that a CPU and a GPU, and every version,
 * draw the same: chunk c's key is splitmix64's output c + 1 from state
 * `key` (from state 0 its first two are 0xe220a8397b1dcdaf and
 * 0x6e789e6aa1b965f4), and a value's bits lowbias32 of its offset added to
 * the key's low half, xor its high half. A value is kept at a threshold up
 * to its bits, dropped above. */
static void test_dropout_hash(void **state) {
    (void)state;
    assert_true(bg_dropout_chunk_key(0, 0) == 0xe220a8397b1dcdafULL);
    assert_true(bg_dropout_chunk_key(0, 1) == 0x6e789e6aa1b965f4ULL);
    assert_int_equal(bg_dropout_bits(0xe220a8397b1dcdafULL, 0), 0x0200b09cu);
    assert_int_equal(bg_dropout_bits(0xe220a8397b1dcdafULL, 1), 0x95234768u);
    assert_int_equal(bg_dropout_bits(0x6e789e6aa1b965f4ULL, 1023), 0x07e32eadu);
    /* Value 1024 starts the second chunk. */
    assert_true(bg_dropout_keeps(0, 1024, 0xf86badb9u));
    assert_false(bg_dropout_keeps(0, 1024, 0xf86badbau));
    assert_true(bg_dropout_keeps(0, 1, 0x95234768u));
    assert_false(bg_dropout_keeps(0, 1, 0x95234769u));
    assert_int_equal(bg_dropout_threshold(0), 0);
    assert_int_equal(bg_dropout_threshold(0.25), 0x40000000u);
    assert_int_equal(bg_dropout_threshold(0.5), 0x80000000u);
    assert_int_equal(bg_dropout_threshold(0.9999999999), 0xffffffffu); /* not 2^32, 0 */
    /* Each of seed, step and layer changes the key. */
    const uint64_t key = bg_dropout_key(1, 0, 3);
    assert_true(key != bg_dropout_key(2, 0, 3));
    assert_true(key != bg_dropout_key(1, 1, 3));
    assert_true(key != bg_dropout_key(1, 0, 4));
    assert_true(bg_dropout_key(1, 1, 3) != bg_dropout_key(1, 0, 4));
}

enum { DROP_ROWS = 64, DROP_FEATURES = 1000, DROP_COUNT = DROP_ROWS * DROP_FEATURES };

/* Runs `spec`'s dropout with `mask` over `rows` rows of host x into host y,
 * on a float backend; in place when `in_place`. */
static void run_dropout_f32(bg_backend_t *be, const bg_layer_spec_t *spec,
                            const bg_dropout_mask_t *mask, int64_t rows, const float *x, float *y,
                            int in_place) {
    const size_t bytes = sizeof(float) * (size_t)(rows * DROP_FEATURES);
    void *dx = alloc_elems(be, rows * DROP_FEATURES),
         *dy = in_place ? dx : alloc_elems(be, rows * DROP_FEATURES);
    check_ok(be->ops->upload(be, dx, x, bytes));
    check_ok(bg_layer_dropout(spec, be, mask, rows, dx, dy));
    check_ok(be->ops->download(be, y, dy, bytes));
    be->ops->free(be, dx);
    if (!in_place) be->ops->free(be, dy);
}

/* Dropout at rate 0.3 over 64 rows of 1000: about 30% dropped, the rest
 * multiplied by 1 / 0.7 and nothing else, each as bg_dropout_keeps says;
 * the same values when the rows come in two parts (micro-batches), in
 * place, and for the backward's gradient; other steps drop others;
 * evaluation and rate 0 pass the input; a NaN is not dropped unseen. */
static void test_dropout_values(void **state) {
    (void)state;
    bg_backend_t *be = backend_create(BG_F32);
    const bg_layer_spec_t spec = {.kind = BG_LAYER_DROPOUT,
                                  .in = {DROP_FEATURES, 1, 1},
                                  .out = {DROP_FEATURES, 1, 1},
                                  .rate = 0.3};
    float *x = malloc(sizeof(float) * DROP_COUNT), *y = malloc(sizeof(float) * DROP_COUNT),
          *z = malloc(sizeof(float) * DROP_COUNT);
    assert_true(x != NULL && y != NULL && z != NULL);
    bg_rng_t rng;
    bg_rng_seed(&rng, 3, 0);
    for (int i = 0; i < DROP_COUNT; i++) x[i] = (float)bg_rng_normal(&rng) + 0.01f; /* none 0 */
    const bg_dropout_mask_t mask = bg_layer_dropout_mask(&spec, 7, 11, 2, 0);
    assert_true(mask.key == bg_dropout_key(11, 2, 7));
    run_dropout_f32(be, &spec, &mask, DROP_ROWS, x, y, 0);
    const float scale = (float)(1 / 0.7);
    int dropped = 0;
    for (int i = 0; i < DROP_COUNT; i++) {
        const int keep = bg_dropout_keeps(mask.key, (uint64_t)i, mask.threshold);
        if (y[i] != (keep ? x[i] * scale : 0.0f))
            fail_msg("value %d: %g, want %g (kept %d)", i, y[i], keep ? x[i] * scale : 0.0f, keep);
        dropped += !keep;
    }
    /* 5 standard deviations of a binomial(64000, 0.3) share: 0.009 */
    const double share = (double)dropped / DROP_COUNT;
    if (!(fabs(share - 0.3) <= 0.009)) fail_msg("dropped %.4f of the values, want 0.3", share);
    /* Neighbours, and values a chunk apart (the same offset in the next
     * chunk), are kept together as often as independent ones: 0.49, within
     * 5 standard deviations (0.01). */
    static const int apart[] = {1, 2, BG_DROPOUT_CHUNK, DROP_FEATURES};
    for (size_t a = 0; a < sizeof apart / sizeof apart[0]; a++) {
        int both = 0, pairs = 0;
        for (int i = 0; i + apart[a] < DROP_COUNT; i++, pairs++)
            both += y[i] != 0 && y[i + apart[a]] != 0;
        if (!(fabs((double)both / pairs - 0.49) <= 0.01))
            fail_msg("values %d apart: both kept %.4f of the time, want 0.49", apart[a],
                     (double)both / pairs);
    }
    /* Rows 0-19 and 20-63 apart, as two micro-batches: the same bits. */
    bg_dropout_mask_t part = bg_layer_dropout_mask(&spec, 7, 11, 2, 0);
    run_dropout_f32(be, &spec, &part, 20, x, z, 0);
    part.first_row = 20;
    run_dropout_f32(be, &spec, &part, DROP_ROWS - 20, x + 20 * DROP_FEATURES,
                    z + 20 * DROP_FEATURES, 0);
    assert_memory_equal(z, y, sizeof(float) * DROP_COUNT);
    run_dropout_f32(be, &spec, &mask, DROP_ROWS, x, z, 1);
    assert_memory_equal(z, y, sizeof(float) * DROP_COUNT);
    /* The backward: a gradient of ones comes back as the scale where the
     * value was kept and 0 where it was dropped. */
    float *ones = malloc(sizeof(float) * DROP_COUNT);
    assert_non_null(ones);
    for (int i = 0; i < DROP_COUNT; i++) ones[i] = 1;
    run_dropout_f32(be, &spec, &mask, DROP_ROWS, ones, z, 0);
    for (int i = 0; i < DROP_COUNT; i++)
        if (z[i] != (y[i] != 0 ? scale : 0.0f)) fail_msg("gradient %d: %g", i, z[i]);
    /* The next step's mask: independent, so about 2 x 0.3 x 0.7 = 42% of
     * the values change between kept and dropped. */
    const bg_dropout_mask_t next = bg_layer_dropout_mask(&spec, 7, 11, 3, 0);
    run_dropout_f32(be, &spec, &next, DROP_ROWS, x, z, 0);
    int changed = 0;
    for (int i = 0; i < DROP_COUNT; i++) changed += (z[i] == 0) != (y[i] == 0);
    if (!(fabs((double)changed / DROP_COUNT - 0.42) <= 0.01))
        fail_msg("the next step changed %d of %d values", changed, DROP_COUNT);
    /* Evaluation (no mask) and rate 0 pass x on, copied or in place. */
    run_dropout_f32(be, &spec, NULL, DROP_ROWS, x, z, 0);
    assert_memory_equal(z, x, sizeof(float) * DROP_COUNT);
    run_dropout_f32(be, &spec, NULL, DROP_ROWS, x, z, 1);
    assert_memory_equal(z, x, sizeof(float) * DROP_COUNT);
    bg_layer_spec_t none = spec;
    none.rate = 0;
    const bg_dropout_mask_t all = bg_layer_dropout_mask(&none, 7, 11, 2, 0);
    run_dropout_f32(be, &none, &all, DROP_ROWS, x, z, 0);
    assert_memory_equal(z, x, sizeof(float) * DROP_COUNT);
    /* A NaN where the mask drops stays a NaN (0 x NaN), as in PyTorch. */
    int at = 0;
    while (y[at] != 0) at++;
    x[at] = NAN;
    run_dropout_f32(be, &spec, &mask, DROP_ROWS, x, z, 0);
    assert_true(isnan(z[at]));
    free(ones);
    free(x);
    free(y);
    free(z);
    bg_backend_destroy(be);
}

/* A double backend keeps and drops the very values a float one does. */
static void test_dropout_double_same_mask(void **state) {
    bg_backend_t *be = *state; /* F64 */
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_DROPOUT, .in = {5, 4, 3}, .out = {5, 4, 3}, .rate = 0.6};
    enum { N = 6, VALUES = N * 60 };
    double x[VALUES], y[VALUES];
    for (int i = 0; i < VALUES; i++) x[i] = 1 + i;
    const bg_dropout_mask_t mask = bg_layer_dropout_mask(&spec, 2, 9, 0, 4);
    void *d = alloc_elems(be, VALUES);
    check_ok(be->ops->upload(be, d, x, sizeof x));
    check_ok(bg_layer_dropout(&spec, be, &mask, N, d, d));
    check_ok(be->ops->download(be, y, d, sizeof y));
    be->ops->free(be, d);
    int kept = 0;
    for (int i = 0; i < VALUES; i++) {
        const int keep = bg_dropout_keeps(mask.key, (uint64_t)(4 * 60 + i), mask.threshold);
        assert_true(y[i] == (keep ? x[i] * (1 / 0.4) : 0));
        kept += keep;
    }
    assert_true(kept > 0 && kept < VALUES);
}

static void test_flatten(void **state) {
    const bg_layer_spec_t spec = {.kind = BG_LAYER_FLATTEN, .in = {2, 3, 3}, .out = {18, 1, 1}};
    check_layer(*state, &spec, 3, 61, INPUT_NORMAL);
}

/* Forward values of small cases worked by hand, so that a forward and a
 * backward that are wrong in the same way cannot pass together. */
static void test_forward_hand_values(void **state) {
    bg_backend_t *be = *state;
    /* maxpool 2/2 on one 2x4 plane, and avgpool of the same. */
    const bg_layer_spec_t maxpool = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {1, 2, 4},
        .out = {1, 1, 2},
        .kernel = 2,
        .stride = 2,
    };
    const bg_layer_spec_t avgpool = {
        .kind = BG_LAYER_AVGPOOL,
        .in = {1, 2, 4},
        .out = {1, 1, 2},
        .kernel = 2,
        .stride = 2,
    };
    const double x[8] = {1, -2, 3, 4, 5, 0, -1, 2};
    double y[2];
    layer_run_t run;
    run_create(be, &maxpool, 1, &run);
    run_forward(&run, x, NULL, NULL, y);
    expect_near(y[0], 5, 0);
    expect_near(y[1], 4, 0);
    run_destroy(&run);
    run_create(be, &avgpool, 1, &run);
    run_forward(&run, x, NULL, NULL, y);
    expect_near(y[0], 1, 1e-15);
    expect_near(y[1], 2, 1e-15);
    run_destroy(&run);

    /* conv2d 2x2 kernel, pad 1, on a 1x1 input of value 2: each output sees
     * one kernel tap, (0,0) sees w[1][1], (1,1) sees w[0][0]. */
    const bg_layer_spec_t conv = {
        .kind = BG_LAYER_CONV2D,
        .in = {1, 1, 1},
        .out = {1, 2, 2},
        .filters = 1,
        .kernel = 2,
        .stride = 1,
        .pad = 1,
    };
    const double cx[1] = {2}, cw[4] = {1, 10, 100, 1000}, cb[1] = {0.5};
    double cy[4];
    run_create(be, &conv, 1, &run);
    run_forward(&run, cx, cw, cb, cy);
    const double want_conv[4] = {2000.5, 200.5, 20.5, 2.5};
    for (int i = 0; i < 4; i++) expect_near(cy[i], want_conv[i], 1e-12);
    run_destroy(&run);

    /* dense: y = x w^T + b with w (2, 3). */
    const bg_layer_spec_t dense = {
        .kind = BG_LAYER_DENSE,
        .in = {3, 1, 1},
        .out = {2, 1, 1},
        .filters = 2,
    };
    const double dx_in[3] = {1, 2, 3}, dw[6] = {1, 0, -1, 0.5, 0.5, 0.5}, db[2] = {10, -10};
    double dy[2];
    run_create(be, &dense, 1, &run);
    run_forward(&run, dx_in, dw, db, dy);
    expect_near(dy[0], 8, 1e-12);
    expect_near(dy[1], -7, 1e-12);
    run_destroy(&run);
}

static void test_param_counts(void **state) {
    (void)state;
    const bg_layer_spec_t conv = {
        .kind = BG_LAYER_CONV2D,
        .in = {3, 8, 8},
        .out = {16, 6, 6},
        .filters = 16,
        .kernel = 3,
        .stride = 1,
    };
    const bg_layer_spec_t dense = {
        .kind = BG_LAYER_DENSE,
        .in = {20, 1, 1},
        .out = {7, 1, 1},
        .filters = 7,
    };
    const bg_layer_spec_t relu = {.kind = BG_LAYER_RELU, .in = {3, 2, 2}, .out = {3, 2, 2}};
    int64_t nw = -1, nb = -1;
    bg_layer_param_counts(&conv, &nw, &nb);
    assert_int_equal(nw, 16 * 3 * 3 * 3);
    assert_int_equal(nb, 16);
    bg_layer_param_counts(&dense, &nw, &nb);
    assert_int_equal(nw, 140);
    assert_int_equal(nb, 7);
    bg_layer_param_counts(&relu, &nw, &nb);
    assert_int_equal(nw, 0);
    assert_int_equal(nb, 0);
}

/* Layers without parameters accept backward_weights as a no-op; the loss
 * layer is not a bg_layer_forward layer. */
static void test_parameterless_and_loss_layer(void **state) {
    bg_backend_t *be = *state;
    const bg_layer_spec_t relu = {.kind = BG_LAYER_RELU, .in = {4, 1, 1}, .out = {4, 1, 1}};
    const bg_layer_params_t none = {0};
    double buffer[4] = {0};
    assert_int_equal(bg_layer_backward_weights(&relu, be, &none, 1, buffer, buffer, NULL), BG_OK);
    const bg_layer_spec_t loss = {
        .kind = BG_LAYER_SOFTMAX_CROSS_ENTROPY,
        .in = {4, 1, 1},
        .out = {1, 1, 1},
    };
    bg_error_clear();
    assert_int_equal(bg_layer_forward(&loss, be, &none, 1, buffer, buffer, NULL), BG_ERR_INTERNAL);
    assert_non_null(strstr(bg_error_message(), "softmax_cross_entropy"));
}

/* ---- softmax cross-entropy ---- */

typedef struct loss_buffers {
    void *logits, *probs, *dlogits;
    int32_t *labels;
} loss_buffers_t;

static void loss_create(bg_backend_t *be, int64_t n, int64_t classes, const double *logits,
                        const int32_t *labels, loss_buffers_t *lb) {
    lb->logits = alloc_elems(be, n * classes);
    lb->probs = alloc_elems(be, n * classes);
    lb->dlogits = alloc_elems(be, n * classes);
    void *labels_device = NULL;
    check_ok(be->ops->alloc(be, sizeof(int32_t) * (size_t)n, &labels_device));
    check_ok(be->ops->upload(be, labels_device, labels, sizeof(int32_t) * (size_t)n));
    lb->labels = labels_device;
    upload(be, lb->logits, logits, n * classes);
}

static void loss_destroy(bg_backend_t *be, loss_buffers_t *lb) {
    be->ops->free(be, lb->logits);
    be->ops->free(be, lb->probs);
    be->ops->free(be, lb->dlogits);
    be->ops->free(be, lb->labels);
}

static void test_softmax_xent_hand_values(void **state) {
    bg_backend_t *be = *state;
    loss_buffers_t lb;
    double loss = -1, probs[3 * 3];
    int64_t correct = -1;

    /* logits (0, ln 3): probabilities (1/4, 3/4), loss -ln(3/4) = ln(4/3). */
    const double two[2] = {0, log(3.0)};
    const int32_t label_one[1] = {1};
    loss_create(be, 1, 2, two, label_one, &lb);
    check_ok(
        be->ops->softmax_xent_forward(be, 1, 2, lb.logits, lb.labels, lb.probs, &loss, &correct));
    expect_near(loss, log(4.0 / 3.0), 1e-15);
    assert_int_equal(correct, 1);
    download(be, probs, lb.probs, 2);
    expect_near(probs[0], 0.25, 1e-15);
    expect_near(probs[1], 0.75, 1e-15);
    /* dlogits = scale * (p - onehot) = 0.5 * (1/4, -1/4). */
    double d[2];
    check_ok(be->ops->softmax_xent_backward(be, 1, 2, lb.probs, lb.labels, 0.5, lb.dlogits));
    download(be, d, lb.dlogits, 2);
    expect_near(d[0], 0.125, 1e-15);
    expect_near(d[1], -0.125, 1e-15);
    loss_destroy(be, &lb);

    /* Three rows: a wrong prediction, a tie won by the lowest index (right),
     * the same tie with the other label (wrong). Large logits check that the
     * maximum is subtracted before exp(). */
    const double rows[9] = {2, 1, 0, 1, 3, 3, 1001, 1003, 1003};
    const int32_t labels[3] = {2, 1, 2};
    loss_create(be, 3, 3, rows, labels, &lb);
    check_ok(
        be->ops->softmax_xent_forward(be, 3, 3, lb.logits, lb.labels, lb.probs, &loss, &correct));
    const double row0 = log(exp(2.0) + exp(1.0) + 1.0); /* -log p[2], z[2] = 0 */
    const double row1 = log(exp(-2.0) + 2.0);           /* shifted by 3 */
    const double want = row0 + 2 * row1;
    expect_near(loss, want, 1e-12);
    assert_int_equal(correct, 1);
    download(be, probs, lb.probs, 9);
    for (int i = 0; i < 3; i++) {
        double sum = probs[3 * i] + probs[3 * i + 1] + probs[3 * i + 2];
        expect_near(sum, 1.0, 1e-15);
    }
    expect_near(probs[3], exp(-2.0) / (exp(-2.0) + 2.0), 1e-15);
    expect_near(probs[6], probs[3], 1e-15);
    loss_destroy(be, &lb);
}

static double loss_of(bg_backend_t *be, loss_buffers_t *lb, int64_t n, int64_t classes,
                      const double *logits) {
    double loss = 0;
    int64_t correct = 0;
    upload(be, lb->logits, logits, n * classes);
    check_ok(be->ops->softmax_xent_forward(be, n, classes, lb->logits, lb->labels, lb->probs, &loss,
                                           &correct));
    return loss;
}

static void test_softmax_xent_gradient(void **state) {
    bg_backend_t *be = *state;
    enum { N = 3, CLASSES = 5 };
    const double scale = 1.0 / N;
    double logits[N * CLASSES], d[N * CLASSES];
    const int32_t labels[N] = {4, 0, 2};
    bg_rng_t rng;
    bg_rng_seed(&rng, 71, 0);
    fill_random(&rng, logits, N * CLASSES, INPUT_NORMAL);
    loss_buffers_t lb;
    loss_create(be, N, CLASSES, logits, labels, &lb);
    (void)loss_of(be, &lb, N, CLASSES, logits);
    check_ok(
        be->ops->softmax_xent_backward(be, N, CLASSES, lb.probs, lb.labels, scale, lb.dlogits));
    download(be, d, lb.dlogits, N * CLASSES);

    error_stats_t stats = {0};
    for (int i = 0; i < N * CLASSES; i++) {
        const double saved = logits[i];
        logits[i] = saved + FD_EPS;
        double plus = loss_of(be, &lb, N, CLASSES, logits);
        logits[i] = saved - FD_EPS;
        double minus = loss_of(be, &lb, N, CLASSES, logits);
        logits[i] = saved;
        expect_gradient("dlogits", i, d[i], scale * (plus - minus) / (2 * FD_EPS), &stats);
    }
    /* Each row of the gradient sums to zero. */
    for (int i = 0; i < N; i++) {
        double sum = 0;
        for (int k = 0; k < CLASSES; k++) sum += d[i * CLASSES + k];
        expect_near(sum, 0, 1e-15);
    }
    assert_true(stats.max_numeric > 0.1);
    print_message("softmax_xent: max abs error %.2e, max rel error %.2e, worst error/tolerance"
                  " %.2f\n",
                  stats.max_abs, stats.max_rel, stats.max_ratio);
    loss_destroy(be, &lb);
}

static void test_softmax_xent_bad_label(void **state) {
    bg_backend_t *be = *state;
    const double logits[6] = {0, 1, 2, 3, 4, 5};
    const int32_t too_big[2] = {0, 3}, negative[2] = {-1, 0};
    double loss = 0;
    int64_t correct = 0;
    loss_buffers_t lb;
    loss_create(be, 2, 3, logits, too_big, &lb);
    bg_error_clear();
    assert_int_equal(
        be->ops->softmax_xent_forward(be, 2, 3, lb.logits, lb.labels, lb.probs, &loss, &correct),
        BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "label 3"));
    loss_destroy(be, &lb);
    loss_create(be, 2, 3, logits, negative, &lb);
    assert_int_equal(
        be->ops->softmax_xent_forward(be, 2, 3, lb.logits, lb.labels, lb.probs, &loss, &correct),
        BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "label -1"));
    loss_destroy(be, &lb);
}

/* The deferred forward: the totals taken after three adds are the sums of
 * what the waiting forward returns for each; add = 0 writes the same
 * probabilities and counts nothing; a loss that is not finite is marked
 * with its tag (the lowest); a take clears the totals; a bad label and a
 * bad tag are refused. */
static void test_softmax_xent_forward_add(void **state) {
    bg_backend_t *be = *state;
    enum { N = 4, CLASSES = 5 };
    double logits[N * CLASSES], want_probs[N * CLASSES], probs[N * CLASSES];
    const int32_t labels[N] = {4, 0, 2, 2};
    bg_rng_t rng;
    bg_rng_seed(&rng, 72, 0);
    fill_random(&rng, logits, N * CLASSES, INPUT_NORMAL);
    loss_buffers_t lb;
    loss_create(be, N, CLASSES, logits, labels, &lb);
    double want_loss = 0, loss = -1;
    int64_t want_correct = 0, correct = -1;
    for (int64_t n = 2; n <= N; n++) { /* three micro-batches of 2, 3, 4 rows */
        double l;
        int64_t c;
        check_ok(
            be->ops->softmax_xent_forward(be, n, CLASSES, lb.logits, lb.labels, lb.probs, &l, &c));
        want_loss += l;
        want_correct += c;
    }
    download(be, want_probs, lb.probs, N * CLASSES);
    for (int64_t n = 2; n <= N; n++)
        check_ok(be->ops->softmax_xent_forward_add(be, n, CLASSES, lb.logits, lb.labels, lb.probs,
                                                   1, (int)n));
    check_ok(
        be->ops->softmax_xent_forward_add(be, N, CLASSES, lb.logits, lb.labels, lb.probs, 0, -1));
    check_ok(be->ops->take_loss(be, &loss, &correct));
    assert_true(loss == want_loss);
    assert_int_equal(correct, want_correct);
    download(be, probs, lb.probs, N * CLASSES);
    assert_memory_equal(probs, want_probs, sizeof probs);
    check_ok(be->ops->take_loss(be, &loss, &correct));
    assert_true(loss == 0 && correct == 0);
    int tag = 7;
    check_ok(be->ops->take_nonfinite(be, &tag));
    assert_int_equal(tag, -1); /* finite losses marked nothing */
    /* A NaN logit in row 1: micro-batches of rows 0..1 marked, row 0 not. */
    logits[CLASSES + 3] = NAN;
    upload(be, lb.logits, logits, N * CLASSES);
    check_ok(
        be->ops->softmax_xent_forward_add(be, 1, CLASSES, lb.logits, lb.labels, lb.probs, 1, 0));
    check_ok(
        be->ops->softmax_xent_forward_add(be, 2, CLASSES, lb.logits, lb.labels, lb.probs, 1, 5));
    check_ok(
        be->ops->softmax_xent_forward_add(be, 2, CLASSES, lb.logits, lb.labels, lb.probs, 1, 3));
    check_ok(
        be->ops->softmax_xent_forward_add(be, 2, CLASSES, lb.logits, lb.labels, lb.probs, 1, -1));
    check_ok(be->ops->take_nonfinite(be, &tag));
    assert_int_equal(tag, 3);
    check_ok(be->ops->take_loss(be, &loss, &correct));
    assert_true(isnan(loss));
    assert_int_equal(
        be->ops->softmax_xent_forward_add(be, 1, CLASSES, lb.logits, lb.labels, lb.probs, 1, -2),
        BG_ERR_INTERNAL);
    loss_destroy(be, &lb);
    const int32_t bad[2] = {0, 5};
    loss_create(be, 2, CLASSES, logits, bad, &lb);
    assert_int_equal(
        be->ops->softmax_xent_forward_add(be, 2, CLASSES, lb.logits, lb.labels, lb.probs, 1, -1),
        BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "label 5"));
    loss_destroy(be, &lb);
}

/* ---- float kernels against double kernels ---- */

typedef struct pass_result {
    double *y, *dx, *dw, *db;
} pass_result_t;

/* Forward, backward_data and backward_weights of one layer on `be` with the
 * given inputs; results are host doubles owned by the caller. */
static pass_result_t full_pass(bg_backend_t *be, const bg_layer_spec_t *spec, int64_t n,
                               const double *x, const double *w, const double *b, const double *r) {
    layer_run_t run;
    run_create(be, spec, n, &run);
    pass_result_t out = {host_alloc(run.ny), host_alloc(run.nx), host_alloc(run.nw),
                         host_alloc(run.nb)};
    run_forward(&run, x, w, b, out.y);
    upload(be, run.dy, r, run.ny);
    check_ok(
        bg_layer_backward_data(spec, be, &run.p, n, run.x, run.y, run.dy, run.dx, run.workspace));
    check_ok(bg_layer_backward_weights(spec, be, &run.p, n, run.x, run.dy, run.workspace));
    download(be, out.dx, run.dx, run.nx);
    download(be, out.dw, run.p.weight_grad, run.nw);
    download(be, out.db, run.p.bias_grad, run.nb);
    run_destroy(&run);
    return out;
}

/* max |got - want| <= tol * max |want|, and want is not all zeros. */
static double expect_close_norm(const char *what, const double *got, const double *want,
                                int64_t count, double tol) {
    double max_err = 0, max_want = 0;
    for (int64_t i = 0; i < count; i++) {
        max_err = fmax(max_err, fabs(got[i] - want[i]));
        max_want = fmax(max_want, fabs(want[i]));
    }
    if (count == 0) return 0;
    assert_true(max_want > 0);
    if (max_err > tol * max_want)
        fail_msg("%s: float differs from double by %.3g (scale %.3g)", what, max_err, max_want);
    return max_err / max_want;
}

static void compare_float_double(const bg_layer_spec_t *spec, int64_t n, uint64_t seed,
                                 input_kind_t kind) {
    bg_backend_t *f32 = backend_create(BG_F32), *f64 = backend_create(BG_F64);
    int64_t nx = n * bg_shape_numel(spec->in), ny = n * bg_shape_numel(spec->out), nw, nb;
    bg_layer_param_counts(spec, &nw, &nb);
    double *x = host_alloc(nx), *r = host_alloc(ny), *w = host_alloc(nw), *b = host_alloc(nb);
    bg_rng_t rng;
    bg_rng_seed(&rng, seed, 0);
    /* Values that float holds exactly would hide the rounding; these do not. */
    fill_random(&rng, x, nx, kind);
    fill_random(&rng, r, ny, INPUT_NORMAL);
    fill_random(&rng, w, nw, INPUT_NORMAL);
    fill_random(&rng, b, nb, INPUT_NORMAL);
    pass_result_t single = full_pass(f32, spec, n, x, w, b, r);
    pass_result_t dbl = full_pass(f64, spec, n, x, w, b, r);
    double worst = 0;
    worst = fmax(worst, expect_close_norm("y", single.y, dbl.y, ny, 1e-4));
    worst = fmax(worst, expect_close_norm("dx", single.dx, dbl.dx, nx, 1e-4));
    worst = fmax(worst, expect_close_norm("dw", single.dw, dbl.dw, nw, 1e-4));
    worst = fmax(worst, expect_close_norm("db", single.db, dbl.db, nb, 1e-4));
    /* Float really was used: some rounding shows. */
    assert_true(worst > 0);
    print_message("%s float vs double: max relative difference %.2e\n",
                  bg_layer_kind_name(spec->kind), worst);
    double *host[] = {x,         r,         w,     b,      single.y, single.dx,
                      single.dw, single.db, dbl.y, dbl.dx, dbl.dw,   dbl.db};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    bg_backend_destroy(f32);
    bg_backend_destroy(f64);
}

static void test_float_matches_double_conv2d(void **state) {
    (void)state;
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_CONV2D,
        .in = {3, 9, 8},
        .out = {4, 5, 4},
        .filters = 4,
        .kernel = 3,
        .stride = 2,
        .pad = 1,
    };
    compare_float_double(&spec, 3, 81, INPUT_NORMAL);
}

static void test_float_matches_double_dense(void **state) {
    (void)state;
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_DENSE,
        .in = {50, 1, 1},
        .out = {10, 1, 1},
        .filters = 10,
    };
    compare_float_double(&spec, 4, 82, INPUT_NORMAL);
}

/* The pooling and relu kernels have float-specific fast paths to cover too. */
static void test_float_matches_double_pool_relu(void **state) {
    (void)state;
    const bg_layer_spec_t tiled = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {3, 6, 8},
        .out = {3, 3, 4},
        .kernel = 2,
        .stride = 2,
    };
    const bg_layer_spec_t ragged = {
        .kind = BG_LAYER_MAXPOOL,
        .in = {3, 7, 7},
        .out = {3, 3, 3},
        .kernel = 3,
        .stride = 2,
    };
    const bg_layer_spec_t avg = {
        .kind = BG_LAYER_AVGPOOL,
        .in = {3, 6, 6},
        .out = {3, 4, 4},
        .kernel = 3,
        .stride = 1,
    };
    const bg_layer_spec_t relu = {.kind = BG_LAYER_RELU, .in = {3, 5, 5}, .out = {3, 5, 5}};
    compare_float_double(&tiled, 2, 83, INPUT_DISTINCT);
    compare_float_double(&ragged, 2, 84, INPUT_DISTINCT);
    compare_float_double(&avg, 2, 85, INPUT_NORMAL);
    compare_float_double(&relu, 2, 86, INPUT_NO_KINK);
}

static void test_float_matches_double_activations(void **state) {
    (void)state;
    const bg_layer_kind_t kinds[3] = {BG_LAYER_TANH, BG_LAYER_SIGMOID, BG_LAYER_GELU};
    for (int k = 0; k < 3; k++) {
        const bg_layer_spec_t spec = {.kind = kinds[k], .in = {4, 3, 3}, .out = {4, 3, 3}};
        compare_float_double(&spec, 3, 87 + (uint64_t)k, INPUT_NORMAL);
    }
    const bg_layer_spec_t norm = {.kind = BG_LAYER_LAYERNORM, .in = {40, 1, 1}, .out = {40, 1, 1}};
    compare_float_double(&norm, 5, 90, INPUT_NORMAL);
}

/* ---- parameter initialisation ---- */

static void test_init_params_distribution(void **state) {
    (void)state;
    enum { INPUTS = 1000, UNITS = 200 };
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_DENSE,
        .in = {INPUTS, 1, 1},
        .out = {UNITS, 1, 1},
        .filters = UNITS,
    };
    const int64_t nw = (int64_t)INPUTS * UNITS;
    float *w = malloc(sizeof(float) * (size_t)nw), *b = malloc(sizeof(float) * UNITS);
    assert_non_null(w);
    assert_non_null(b);
    bg_layer_init_params(&spec, 3, 1234, w, b);
    const double bound = 1.0 / sqrt((double)INPUTS);
    double sum = 0, sum_sq = 0, lo = 1, hi = -1;
    for (int64_t i = 0; i < nw; i++) {
        assert_true(fabs(w[i]) <= bound);
        sum += w[i];
        sum_sq += (double)w[i] * w[i];
        lo = fmin(lo, w[i]);
        hi = fmax(hi, w[i]);
    }
    const double mean = sum / (double)nw, variance = sum_sq / (double)nw - mean * mean;
    /* Five standard errors of the mean of nw uniform values. */
    assert_true(fabs(mean) < 5 * bound / sqrt(3.0 * (double)nw));
    /* The sample variance of 200000 uniforms is within 1.5% with margin. */
    expect_near(variance, bound * bound / 3, 0.015 * bound * bound / 3);
    /* The whole interval is used, not a narrower one. */
    assert_true(hi > 0.999 * bound && lo < -0.999 * bound);
    double bias_sum_sq = 0;
    for (int i = 0; i < UNITS; i++) {
        assert_true(fabs(b[i]) <= bound);
        bias_sum_sq += (double)b[i] * b[i];
    }
    /* Biases are drawn, not left at zero: rms well above bound / 10. */
    assert_true(sqrt(bias_sum_sq / UNITS) > 0.3 * bound);
    print_message("init dense: mean %.2e, variance / (bound^2/3) = %.4f\n", mean,
                  variance / (bound * bound / 3));
    free(w);
    free(b);
}

static void test_init_params_conv_fan_in(void **state) {
    (void)state;
    /* fan_in = channels * k * k = 3 * 5 * 5 = 75, not filters * k * k. */
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_CONV2D,
        .in = {3, 12, 12},
        .out = {16, 8, 8},
        .filters = 16,
        .kernel = 5,
        .stride = 1,
    };
    enum { NW = 16 * 3 * 5 * 5, NB = 16 };
    float w[NW], b[NB];
    bg_layer_init_params(&spec, 0, 99, w, b);
    const double bound = 1.0 / sqrt(75.0);
    double hi = 0;
    for (int i = 0; i < NW; i++) {
        assert_true(fabs(w[i]) <= bound);
        hi = fmax(hi, fabs(w[i]));
    }
    for (int i = 0; i < NB; i++) assert_true(fabs(b[i]) <= bound);
    assert_true(hi > 0.98 * bound);
}

static void test_init_params_deterministic(void **state) {
    (void)state;
    const bg_layer_spec_t spec = {
        .kind = BG_LAYER_DENSE,
        .in = {30, 1, 1},
        .out = {8, 1, 1},
        .filters = 8,
    };
    enum { NW = 240, NB = 8 };
    float w1[NW], b1[NB], w2[NW], b2[NB], w3[NW], b3[NB], w4[NW], b4[NB];
    bg_layer_init_params(&spec, 5, 42, w1, b1);
    bg_layer_init_params(&spec, 5, 42, w2, b2);
    bg_layer_init_params(&spec, 6, 42, w3, b3);
    bg_layer_init_params(&spec, 5, 43, w4, b4);
    assert_memory_equal(w1, w2, sizeof w1);
    assert_memory_equal(b1, b2, sizeof b1);
    int same_index = 0, same_seed = 0;
    for (int i = 0; i < NW; i++) {
        same_index += w1[i] == w3[i];
        same_seed += w1[i] == w4[i];
    }
    assert_int_equal(same_index, 0);
    assert_int_equal(same_seed, 0);
}

/* all_finite on both element types: every kind of non-finite value found
 * wherever it lies (first, last, either side of the kernel's 4096-value
 * blocks, past the first block), and the extremes of the finite values
 * (the largest, the smallest subnormal, -0) accepted. */
static void test_all_finite(void **state) {
    (void)state;
    enum { N = 3 * 4096 + 5 };
    const double bad[] = {NAN, -NAN, INFINITY, -INFINITY};
    const int64_t where[] = {0, 1, 4095, 4096, 4097, 8191, 8192, N - 1};
    for (int t = 0; t < 2; t++) {
        bg_backend_t *be = backend_create(t == 0 ? BG_F32 : BG_F64);
        const double largest = t == 0 ? FLT_MAX : DBL_MAX;
        const double tiny = t == 0 ? 1.4e-45 : 4.9e-324;
        double *host = host_alloc(N);
        for (int64_t i = 0; i < N; i++) host[i] = i % 3 == 0 ? largest : i % 3 == 1 ? -tiny : -0.0;
        void *x = alloc_elems(be, N);
        int finite = -1;
        check_ok(bg_backend_upload_doubles(be, x, host, N));
        check_ok(be->ops->all_finite(be, N, x, &finite));
        assert_int_equal(finite, 1);
        check_ok(be->ops->all_finite(be, 0, x, &finite));
        assert_int_equal(finite, 1);
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
            for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
                const double keep = host[where[w]];
                host[where[w]] = bad[b];
                check_ok(bg_backend_upload_doubles(be, x, host, N));
                check_ok(be->ops->all_finite(be, N, x, &finite));
                assert_int_equal(finite, 0);
                /* A count that stops before it does not see it. */
                check_ok(be->ops->all_finite(be, where[w], x, &finite));
                assert_int_equal(finite, 1);
                host[where[w]] = keep;
            }
        if (t == 0) {
            /* NaNs with other payloads, signalling and quiet, and Inf as bits. */
            const uint32_t patterns[] = {0x7F800001u, 0xFFFFFFFFu, 0x7FC00001u, 0xFF800000u};
            float *bits = calloc(N, sizeof *bits);
            assert_non_null(bits);
            for (size_t b = 0; b < sizeof patterns / sizeof patterns[0]; b++) {
                memcpy(&bits[N - 2], &patterns[b], sizeof patterns[b]);
                check_ok(be->ops->upload(be, x, bits, N * sizeof *bits));
                check_ok(be->ops->all_finite(be, N, x, &finite));
                assert_int_equal(finite, 0);
            }
            free(bits);
        }
        be->ops->free(be, x);
        free(host);
        bg_backend_destroy(be);
    }
}

/* The deferred check (mark_nonfinite, take_nonfinite) on both element
 * types: the mark keeps the lowest tag whose scan found a NaN or Inf, over
 * scans of finite data and counts that stop short of the NaN, until taken;
 * a take clears it; tags outside 0..INT_MAX-1 are refused. */
static void test_nonfinite_marks(void **state) {
    (void)state;
    enum { N = 5000, AT = 4097 };
    for (int t = 0; t < 2; t++) {
        bg_backend_t *be = backend_create(t == 0 ? BG_F32 : BG_F64);
        double *host = host_alloc(N);
        for (int64_t i = 0; i < N; i++) host[i] = (double)i - 100;
        void *finite = alloc_elems(be, N), *nan = alloc_elems(be, N);
        check_ok(bg_backend_upload_doubles(be, finite, host, N));
        host[AT] = NAN;
        check_ok(bg_backend_upload_doubles(be, nan, host, N));
        int tag = 7;
        check_ok(be->ops->take_nonfinite(be, &tag));
        assert_int_equal(tag, -1);
        check_ok(be->ops->mark_nonfinite(be, N, finite, 2));
        check_ok(be->ops->take_nonfinite(be, &tag));
        assert_int_equal(tag, -1);
        check_ok(be->ops->mark_nonfinite(be, N, nan, 9));
        check_ok(be->ops->mark_nonfinite(be, N, finite, 1));
        check_ok(be->ops->mark_nonfinite(be, N, nan, 4));
        check_ok(be->ops->mark_nonfinite(be, N, nan, 6));
        check_ok(be->ops->mark_nonfinite(be, AT, nan, 0)); /* stops before the NaN */
        check_ok(be->ops->mark_nonfinite(be, 0, nan, 0));
        check_ok(be->ops->take_nonfinite(be, &tag));
        assert_int_equal(tag, 4);
        check_ok(be->ops->take_nonfinite(be, &tag));
        assert_int_equal(tag, -1);
        check_ok(be->ops->mark_nonfinite(be, N - AT, (char *)nan + AT * (t == 0 ? 4 : 8), 0));
        check_ok(be->ops->take_nonfinite(be, &tag));
        assert_int_equal(tag, 0);
        assert_int_equal(be->ops->mark_nonfinite(be, N, nan, INT_MAX), BG_ERR_INTERNAL);
        assert_int_equal(be->ops->mark_nonfinite(be, N, nan, -1), BG_ERR_INTERNAL);
        assert_non_null(strstr(bg_error_message(), "tag -1"));
        check_ok(be->ops->take_nonfinite(be, &tag));
        assert_int_equal(tag, -1);
        be->ops->free(be, finite);
        be->ops->free(be, nan);
        free(host);
        bg_backend_destroy(be);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_k3_valid),
        cmocka_unit_test(test_blas_sizes_refused),
        cmocka_unit_test(test_conv2d_k3_pad1_stride2),
        cmocka_unit_test(test_conv2d_k1),
        cmocka_unit_test(test_conv2d_multichannel_same),
        cmocka_unit_test(test_conv2d_shifted),
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_dense_single_sample),
        cmocka_unit_test(test_maxpool_2_2),
        cmocka_unit_test(test_maxpool_3_2_overlapping),
        cmocka_unit_test(test_maxpool_relu_backward),
        cmocka_unit_test(test_conv2d_relu_forward),
        cmocka_unit_test(test_maxpool_2_2_even),
        cmocka_unit_test(test_maxpool_ties),
        cmocka_unit_test(test_maxpool_nan),
        cmocka_unit_test(test_relu_in_place),
        cmocka_unit_test(test_relu_passes_nan),
        cmocka_unit_test(test_avgpool_2_2),
        cmocka_unit_test(test_avgpool_3_1),
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_tanh),
        cmocka_unit_test(test_sigmoid),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_activation_values),
        cmocka_unit_test(test_layernorm_vector),
        cmocka_unit_test(test_layernorm_image),
        cmocka_unit_test(test_layernorm_hand_values),
        cmocka_unit_test(test_runs_in_place),
        cmocka_unit_test(test_dropout_hash),
        cmocka_unit_test(test_dropout_values),
        cmocka_unit_test(test_dropout_double_same_mask),
        cmocka_unit_test(test_gelu_tail_float),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_forward_hand_values),
        cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_parameterless_and_loss_layer),
        cmocka_unit_test(test_softmax_xent_hand_values),
        cmocka_unit_test(test_softmax_xent_gradient),
        cmocka_unit_test(test_softmax_xent_bad_label),
        cmocka_unit_test(test_softmax_xent_forward_add),
        cmocka_unit_test(test_float_matches_double_conv2d),
        cmocka_unit_test(test_float_matches_double_dense),
        cmocka_unit_test(test_float_matches_double_pool_relu),
        cmocka_unit_test(test_float_matches_double_activations),
        cmocka_unit_test(test_init_params_distribution),
        cmocka_unit_test(test_init_params_conv_fan_in),
        cmocka_unit_test(test_init_params_deterministic),
        cmocka_unit_test(test_nonfinite_marks),
        cmocka_unit_test(test_all_finite),
    };
    return cmocka_run_group_tests(tests, setup_f64, teardown_backend);
}
