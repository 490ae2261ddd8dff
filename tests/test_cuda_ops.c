/* Every CUDA op against the CPU backend's float op on the same random
 * inputs (DESIGN.md, testing level 3), and one training step of the origin
 * CNN as a stage on each backend. Skipped (exit 77) where CUDA sees no GPU or
 * the build has no CUDA backend.
 *
 * Tolerances. The elementwise ops, pooling and the optimizer updates are
 * written to give the CPU's bits (lib/cuda is built with --fmad=false);
 * they are checked to 1e-5 relative all the same,
 * so that a libm difference in one ulp does not fail the suite. tanh,
 * sigmoid and gelu call CUDA's tanhf, expf and erfcf, a few ulps from
 * glibc's, and are checked to 1e-5 of at least 0.1 (ROUNDED). Layer
 * normalisation sums each row by a block's tree (test_layernorm). GEMMs and
 * convolutions sum in another order (cuBLAS, cuDNN; TF32 off but in
 * test_tf32), and cuDNN
 * may pick an FFT or Winograd algorithm: each of their results may differ
 * from the CPU's by SUM_RTOL times the sum of its terms' magnitudes, which
 * the CPU op computes from the inputs' absolute values (expect_sum_close).
 * A float sum of k terms in any order is typically within about 1e-7 of
 * that sum (k * 6e-8 at worst, never reached in practice); a dropped or
 * misplaced term moves a result by about sum / k, above the bound for every
 * shape here (k up to 5,408; accumulated gradients start afresh for each
 * pair of calls, so that their sums hold at most twice that). A
 * whole stage's gradients chain several such sums and are compared to
 * GEMM_RTOL relative, against max(|want|, 1% of the largest |want|) so
 * that results that cancel to nearly zero do not count. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_cuda.h"
#include "model_spec.h"
#include "rng.h"
#include "stage.h"
#include "support/models.h"

/* How expect_close bounds a difference: relative to each value (EXACTISH),
 * relative to at least 1% of the largest (SUMMED: a stage's chained sums),
 * or relative to at least 0.1 (ROUNDED: tanh, sigmoid and gelu, whose
 * libm functions differ by ulps near 1, where 1 - y^2 or 1 + erf(x) keep
 * only a few bits). */
enum { EXACTISH = 0, SUMMED = 1, ROUNDED = 2 };

static const double ELEMENTWISE_RTOL = 1e-5, SUM_RTOL = 5e-5, GEMM_RTOL = 1e-4;

/* With --tf32 (test_tf32) each product's inputs keep 10 of their 23
 * mantissa bits: up to about 1e-3 of each term, and twice that allowed for
 * what cuDNN's Winograd and FFT transforms add. A dropped term still shows
 * in a sum of up to 200 terms (the forward ops there). */
static const double TF32_SUM_RTOL = 4e-3;
/* The bound expect_sum_close applies: SUM_RTOL, or TF32_SUM_RTOL while
 * test_tf32 runs (reset by every setup). */
static double sum_rtol = 5e-5;

/* Adam's epsilon where parameters after a step are compared. Its first step
 * moves a weight by lr * g / (|g| + eps): with the default 1e-8 a gradient
 * near zero that the GPU sums to +1e-9 and the CPU to -1e-9 (another order
 * of the same terms) moves the weight by +lr on one and -lr on the other.
 * With 1e-3 a difference in g moves the weight by at most lr / eps = 1 times
 * it, so the comparison sees the arithmetic, not that amplification; the
 * Adam kernel itself is compared at the default in test_adam. */
static const double ADAM_COMPARE_EPS = 1e-3;

typedef struct fixture {
    bg_backend_t *cpu, *gpu;
    bg_rng_t rng;
} fixture_t;

/* One tensor on both backends. Device pointers of either backend are plain
 * addresses, so offsets into them work alike. */
typedef struct twin {
    void *cpu, *gpu;
    int64_t count; /* floats (or int32 labels) */
} twin_t;

static void ok(bg_status_t st) {
    if (st != BG_OK) fail_msg("%s: %s", bg_status_name(st), bg_error_message());
}

/* Runs `call` on each backend in turn: `be` is the backend and P(t) twin t's
 * buffer on it. */
#define ON_BOTH(call)                                                                              \
    for (int side = 0; side < 2; side++) {                                                         \
        bg_backend_t *be = side ? f->gpu : f->cpu;                                                 \
        ok(call);                                                                                  \
    }
#define P(t) (side ? (t).gpu : (t).cpu)

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
    ok(bg_backend_cpu_create(&cpu, &f->cpu));
    bg_cuda_config_t gpu = BG_CUDA_CONFIG_INIT;
    ok(bg_backend_cuda_create(&gpu, &f->gpu));
    assert_string_equal(f->gpu->name, "cuda:0");
    bg_rng_seed(&f->rng, 2024, 6);
    sum_rtol = SUM_RTOL;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    bg_backend_destroy(f->gpu);
    bg_backend_destroy(f->cpu);
    free(f);
    return 0;
}

/* ---- twins ---- */

/* `count` elements of 4 bytes with the given host values (NULL: zeros). */
static twin_t twin_new(fixture_t *f, int64_t count, const void *values) {
    twin_t t = {NULL, NULL, count};
    const size_t bytes = 4 * (size_t)count;
    ok(f->cpu->ops->alloc(f->cpu, bytes, &t.cpu));
    ok(f->gpu->ops->alloc(f->gpu, bytes, &t.gpu));
    if (values != NULL) {
        ok(f->cpu->ops->upload(f->cpu, t.cpu, values, bytes));
        ok(f->gpu->ops->upload(f->gpu, t.gpu, values, bytes));
    }
    return t;
}

static float *random_floats(fixture_t *f, int64_t count, double lo, double hi) {
    float *v = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    assert_non_null(v);
    for (int64_t i = 0; i < count; i++) v[i] = (float)(lo + (hi - lo) * bg_rng_uniform(&f->rng));
    return v;
}

static twin_t twin_random(fixture_t *f, int64_t count, double lo, double hi) {
    float *v = random_floats(f, count, lo, hi);
    twin_t t = twin_new(f, count, v);
    free(v);
    return t;
}

/* New random values for t, the same on both backends. */
static void twin_refill(fixture_t *f, twin_t *t, double lo, double hi) {
    float *v = random_floats(f, t->count, lo, hi);
    const size_t bytes = sizeof(float) * (size_t)t->count;
    ok(f->cpu->ops->upload(f->cpu, t->cpu, v, bytes));
    ok(f->gpu->ops->upload(f->gpu, t->gpu, v, bytes));
    free(v);
}

static void twin_free(fixture_t *f, twin_t *t) {
    f->cpu->ops->free(f->cpu, t->cpu);
    f->gpu->ops->free(f->gpu, t->gpu);
    t->cpu = t->gpu = NULL;
}

/* The twin's values on one backend, in a malloc'd host array. */
static float *twin_download(fixture_t *f, const twin_t *t, int gpu) {
    float *v = malloc(sizeof(float) * (size_t)(t->count > 0 ? t->count : 1));
    assert_non_null(v);
    bg_backend_t *be = gpu ? f->gpu : f->cpu;
    ok(be->ops->download(be, v, gpu ? t->gpu : t->cpu, sizeof(float) * (size_t)t->count));
    return v;
}

/* Asserts that got[i] is want[i] within allowed[i] (the GPU's and the
 * CPU's values of `what`; `rule` says how allowed was set), for every i;
 * NaN must match NaN. */
static void expect_within(const char *what, const float *want, const float *got,
                          const double *allowed, int64_t count, const char *rule) {
    double worst = 0; /* in units of the allowed difference: above 1 fails */
    int64_t worst_at = -1;
    for (int64_t i = 0; i < count; i++) {
        if (isnan(want[i]) || isnan(got[i])) {
            if (isnan(want[i]) != isnan(got[i]))
                fail_msg("%s[%lld]: gpu %g, cpu %g", what, (long long)i, got[i], want[i]);
            continue;
        }
        if (want[i] == got[i]) continue; /* also equal infinities */
        const double diff = fabs((double)got[i] - (double)want[i]);
        const double err = allowed[i] > 0 ? diff / allowed[i] : INFINITY;
        if (!(err <= worst)) {
            worst = err;
            worst_at = i;
        }
    }
    if (worst > 1)
        fail_msg("%s[%lld]: gpu %.9g, cpu %.9g differ by %.3g, more than the %.3g allowed (%s)",
                 what, (long long)worst_at, got[worst_at], want[worst_at],
                 fabs((double)got[worst_at] - (double)want[worst_at]), allowed[worst_at], rule);
}

static double *allowed_array(int64_t count) {
    double *allowed = malloc(sizeof(double) * (size_t)(count > 0 ? count : 1));
    assert_non_null(allowed);
    return allowed;
}

/* Asserts that the GPU's values are the CPU's within rtol, relative to
 * max(|want|, floor) where floor is 1% of the largest |want| for summed
 * results (a whole stage's) and 1e-30 for elementwise ones. */
static void expect_close(fixture_t *f, const twin_t *t, double rtol, int kind, const char *what) {
    float *want = twin_download(f, t, 0), *got = twin_download(f, t, 1);
    double *allowed = allowed_array(t->count), largest = 0;
    for (int64_t i = 0; i < t->count; i++)
        if (isfinite(want[i]) && fabs(want[i]) > largest) largest = fabs(want[i]);
    const double floor = kind == SUMMED ? 0.01 * largest : kind == ROUNDED ? 0.1 : 1e-30;
    for (int64_t i = 0; i < t->count; i++)
        allowed[i] = rtol * (fabs(want[i]) > floor ? fabs(want[i]) : floor);
    char rule[64];
    snprintf(rule, sizeof rule,
             kind == SUMMED    ? "%.1g relative, floor 1%% of the largest"
             : kind == ROUNDED ? "%.1g relative, floor 0.1"
                               : "%.1g relative",
             rtol);
    expect_within(what, want, got, allowed, t->count, rule);
    free(want);
    free(got);
    free(allowed);
}

/* A buffer of the CPU backend holding |t| (t's CPU values): the inputs
 * from which the CPU op computes the magnitudes that expect_sum_close
 * bounds a summed result by. */
static void *cpu_abs(fixture_t *f, const twin_t *t) {
    float *v = twin_download(f, t, 0);
    for (int64_t i = 0; i < t->count; i++) v[i] = fabsf(v[i]);
    void *out = NULL;
    ok(f->cpu->ops->alloc(f->cpu, sizeof(float) * (size_t)t->count, &out));
    ok(f->cpu->ops->upload(f->cpu, out, v, sizeof(float) * (size_t)t->count));
    free(v);
    return out;
}

/* Asserts that each GPU result of a summed op is the CPU's within SUM_RTOL
 * times magnitude[i] (a CPU buffer: the same op on the inputs' absolute
 * values, so the sum of that result's terms' magnitudes). */
static void expect_sum_close(fixture_t *f, const twin_t *t, void *magnitude, const char *what) {
    float *want = twin_download(f, t, 0), *got = twin_download(f, t, 1);
    float *bound = twin_download(f, &(twin_t){magnitude, NULL, t->count}, 0);
    double *allowed = allowed_array(t->count);
    for (int64_t i = 0; i < t->count; i++) allowed[i] = sum_rtol * (double)bound[i];
    char rule[64];
    snprintf(rule, sizeof rule, "%.1g of the sum of the terms' magnitudes", sum_rtol);
    expect_within(what, want, got, allowed, t->count, rule);
    free(want);
    free(got);
    free(bound);
    free(allowed);
}

/* ---- memory, zero, copy, scale ---- */

static void test_memory_ops(void **state) {
    fixture_t *f = *state;
    enum { N = 4099 };
    twin_t zeros = twin_new(f, N, NULL);
    float *v = twin_download(f, &zeros, 1);
    for (int i = 0; i < N; i++) assert_true(v[i] == 0.0f); /* alloc returns zeroed memory */
    free(v);

    float *host = random_floats(f, N, -3, 3);
    twin_t x = twin_new(f, N, host);
    v = twin_download(f, &x, 1);
    assert_memory_equal(v, host, sizeof(float) * N); /* upload/download round trip */
    free(v);

    /* From pinned memory without waiting, ordered before the next op. */
    float *pinned = NULL;
    ok(f->gpu->ops->host_alloc(f->gpu, sizeof(float) * N, (void **)&pinned));
    for (int i = 0; i < N; i++) pinned[i] = (float)i - 7.5f;
    ok(f->gpu->ops->upload_async(f->gpu, zeros.gpu, pinned, sizeof(float) * N));
    ok(f->gpu->ops->scale(f->gpu, zeros.gpu, N, 2.0));
    ok(f->gpu->ops->synchronize(f->gpu));
    v = twin_download(f, &zeros, 1);
    for (int i = 0; i < N; i++) assert_true(v[i] == 2.0f * ((float)i - 7.5f));
    free(v);
    f->gpu->ops->host_free(f->gpu, pinned);
    ok(f->gpu->ops->zero(f->gpu, zeros.gpu, N));

    ON_BOTH(be->ops->scale(be, P(x), N, 0.37));
    expect_close(f, &x, ELEMENTWISE_RTOL, EXACTISH, "scale");
    ON_BOTH(be->ops->copy(be, P(zeros), P(x), N - 5));
    expect_close(f, &zeros, ELEMENTWISE_RTOL, EXACTISH, "copy");
    ON_BOTH(be->ops->zero(be, (float *)P(x) + 11, 1000));
    expect_close(f, &x, ELEMENTWISE_RTOL, EXACTISH, "zero");
    v = twin_download(f, &x, 1);
    assert_true(v[10] != 0.0f && v[11] == 0.0f && v[1010] == 0.0f && v[1011] != 0.0f);
    free(v);
    ON_BOTH(be->ops->synchronize(be));
    free(host);
    twin_free(f, &x);
    twin_free(f, &zeros);
}

/* ---- relu ---- */

static void test_relu(void **state) {
    fixture_t *f = *state;
    enum { N = 10007 };
    twin_t x = twin_random(f, N, -1, 1), y = twin_new(f, N, NULL);
    twin_t dy = twin_random(f, N, -1, 1), dx = twin_new(f, N, NULL);
    ON_BOTH(be->ops->relu_forward(be, N, P(x), P(y)));
    expect_close(f, &y, ELEMENTWISE_RTOL, EXACTISH, "relu forward");
    ON_BOTH(be->ops->relu_backward(be, N, P(y), P(dy), P(dx)));
    expect_close(f, &dx, ELEMENTWISE_RTOL, EXACTISH, "relu backward");
    /* In place: x and y alias, dy and dx alias. */
    ON_BOTH(be->ops->relu_forward(be, N, P(x), P(x)));
    expect_close(f, &x, ELEMENTWISE_RTOL, EXACTISH, "relu forward in place");
    ON_BOTH(be->ops->relu_backward(be, N, P(x), P(dy), P(dy)));
    expect_close(f, &dy, ELEMENTWISE_RTOL, EXACTISH, "relu backward in place");
    twin_free(f, &x);
    twin_free(f, &y);
    twin_free(f, &dy);
    twin_free(f, &dx);
}

/* A residual block's add, out of place and in place over either operand:
 * the same bits (one IEEE addition a value). */
static void test_add(void **state) {
    fixture_t *f = *state;
    enum { N = 10007 };
    twin_t a = twin_random(f, N, -1, 1), b = twin_random(f, N, -1, 1), y = twin_new(f, N, NULL);
    ON_BOTH(be->ops->add(be, N, P(a), P(b), P(y)));
    float *want = twin_download(f, &y, 0), *got = twin_download(f, &y, 1);
    assert_memory_equal(got, want, sizeof(float) * N);
    free(want);
    free(got);
    ON_BOTH(be->ops->add(be, N, P(a), P(b), P(a)));
    ON_BOTH(be->ops->add(be, N, P(a), P(b), P(b)));
    want = twin_download(f, &b, 0);
    got = twin_download(f, &b, 1);
    assert_memory_equal(got, want, sizeof(float) * N);
    free(want);
    free(got);
    twin_free(f, &a);
    twin_free(f, &b);
    twin_free(f, &y);
}

/* ---- dropout ---- */

/* The same mask and product on both: the GPU keeps and scales the very
 * values the CPU does, to the bit (lib/dropout.h), rows counted from
 * first_row; in place too, as after a convolution or a dense layer. */
static void test_dropout(void **state) {
    fixture_t *f = *state;
    enum { ROWS = 7, FEATURES = 1430, N = ROWS * FEATURES };
    const bg_dropout_mask_t mask = {.key = 0x123456789abcdefULL,
                                    .first_row = 3,
                                    .threshold = 0x4ccccccc, /* rate 0.3 */
                                    .scale = 1 / 0.7};
    twin_t x = twin_random(f, N, -1, 1), y = twin_new(f, N, NULL);
    ON_BOTH(be->ops->dropout(be, &mask, ROWS, FEATURES, P(x), P(y)));
    float *want = twin_download(f, &y, 0), *got = twin_download(f, &y, 1);
    assert_memory_equal(got, want, sizeof(float) * N);
    int dropped = 0;
    for (int i = 0; i < N; i++) dropped += want[i] == 0;
    assert_true(dropped > N / 5 && dropped < N * 2 / 5);
    free(want);
    free(got);
    ON_BOTH(be->ops->dropout(be, &mask, ROWS, FEATURES, P(x), P(x)));
    want = twin_download(f, &x, 0);
    got = twin_download(f, &x, 1);
    assert_memory_equal(got, want, sizeof(float) * N);
    free(want);
    free(got);
    ON_BOTH(be->ops->dropout(be, &mask, 0, FEATURES, P(x), P(y))); /* an empty micro-batch */
    twin_free(f, &x);
    twin_free(f, &y);
}

/* ---- tanh, sigmoid, gelu ---- */

static void test_activations(void **state) {
    fixture_t *f = *state;
    enum { N = 10007 };
    static const bg_activation_t fs[] = {BG_ACTIVATION_TANH, BG_ACTIVATION_SIGMOID,
                                         BG_ACTIVATION_GELU};
    static const char *names[] = {"tanh", "sigmoid", "gelu"};
    char what[64];
    for (int a = 0; a < 3; a++) {
        const bg_activation_t fn = fs[a];
        /* Past +-3 the curves are flat, and gelu's 1 + erf(x) cancels. */
        twin_t x = twin_random(f, N, -3, 3), y = twin_new(f, N, NULL);
        twin_t dy = twin_random(f, N, -1, 1), dx = twin_new(f, N, NULL);
        ON_BOTH(be->ops->activation_forward(be, fn, N, P(x), P(y)));
        snprintf(what, sizeof what, "%s forward", names[a]);
        expect_close(f, &y, ELEMENTWISE_RTOL, ROUNDED, what);
        ON_BOTH(be->ops->activation_backward(be, fn, N, P(x), P(y), P(dy), P(dx)));
        snprintf(what, sizeof what, "%s backward", names[a]);
        expect_close(f, &dx, ELEMENTWISE_RTOL, ROUNDED, what);
        /* As a stage runs them in place (bg_layer_runs_in_place): the output
         * over the input, the gradient over dy. gelu keeps its input. */
        if (fn != BG_ACTIVATION_GELU) {
            ON_BOTH(be->ops->activation_forward(be, fn, N, P(x), P(x)));
            ON_BOTH(be->ops->activation_backward(be, fn, N, P(x), P(x), P(dy), P(dy)));
        } else {
            ON_BOTH(be->ops->activation_backward(be, fn, N, P(x), P(y), P(dy), P(dy)));
        }
        snprintf(what, sizeof what, "%s backward in place", names[a]);
        expect_close(f, &dy, ELEMENTWISE_RTOL, ROUNDED, what);
        /* The tails, relative to each value (erfc keeps gelu's precision
         * there) down to where the result would leave the normal floats
         * (sigmoid near -87, gelu near -13), and past where sigmoid's
         * exp(-x) overflows (below about -88.7: 0 on both) and everything
         * has saturated. */
        const double tail = fn == BG_ACTIVATION_GELU ? 12 : 80;
        twin_refill(f, &x, -tail, tail);
        ON_BOTH(be->ops->activation_forward(be, fn, N, P(x), P(y)));
        snprintf(what, sizeof what, "%s forward, -%g to %g", names[a], tail, tail);
        expect_close(f, &y, ELEMENTWISE_RTOL, EXACTISH, what);
        twin_refill(f, &x, -200, -90);
        ON_BOTH(be->ops->activation_forward(be, fn, N, P(x), P(y)));
        snprintf(what, sizeof what, "%s forward, -200 to -90", names[a]);
        expect_close(f, &y, ELEMENTWISE_RTOL, EXACTISH, what);
        twin_refill(f, &x, -12, 12);
        ON_BOTH(be->ops->activation_forward(be, fn, N, P(x), P(y)));
        snprintf(what, sizeof what, "%s forward, -12 to 12", names[a]);
        expect_close(f, &y, ELEMENTWISE_RTOL, EXACTISH, what);
        ON_BOTH(be->ops->activation_backward(be, fn, N, P(x), P(y), P(dy), P(dx)));
        snprintf(what, sizeof what, "%s backward, -12 to 12", names[a]);
        expect_close(f, &dx, ELEMENTWISE_RTOL, ROUNDED, what);
        twin_free(f, &x);
        twin_free(f, &y);
        twin_free(f, &dy);
        twin_free(f, &dx);
    }
}

/* ---- layernorm ---- */

/* Rows wider and narrower than a block of threads; each row's sums go by
 * another order on the GPU (a block's tree), so a row's mean and 1/std may
 * differ in their last bit: compared to GEMM_RTOL of at least 1% of the
 * largest value. The weights' gradient accumulates over two calls. */
static void test_layernorm(void **state) {
    fixture_t *f = *state;
    static const int64_t shapes[][2] = {{37, 300}, {5, 7}, {3, 1000}};
    char what[64];
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t n = shapes[k][0], features = shapes[k][1];
        twin_t x = twin_random(f, n * features, -2, 3), y = twin_new(f, n * features, NULL);
        twin_t gamma = twin_random(f, features, 0.5, 1.5), beta = twin_random(f, features, -1, 1);
        twin_t dy = twin_random(f, n * features, -1, 1), dx = twin_new(f, n * features, NULL);
        twin_t dgamma = twin_new(f, features, NULL), dbeta = twin_new(f, features, NULL);
        twin_t stats = twin_new(f, 2 * n, NULL);
        ON_BOTH(
            be->ops->layernorm_forward(be, n, features, P(x), P(gamma), P(beta), P(y), P(stats)));
        snprintf(what, sizeof what, "layernorm forward %lldx%lld", (long long)n,
                 (long long)features);
        expect_close(f, &y, GEMM_RTOL, SUMMED, what);
        ON_BOTH(be->ops->layernorm_backward_data(be, n, features, P(x), P(gamma), P(dy), P(dx),
                                                 P(stats)));
        snprintf(what, sizeof what, "layernorm backward data %lldx%lld", (long long)n,
                 (long long)features);
        expect_close(f, &dx, GEMM_RTOL, SUMMED, what);
        for (int call = 0; call < 2; call++)
            ON_BOTH(be->ops->layernorm_backward_weights(be, n, features, P(x), P(dy), P(dgamma),
                                                        P(dbeta), P(stats)));
        snprintf(what, sizeof what, "layernorm dgamma %lldx%lld", (long long)n,
                 (long long)features);
        expect_close(f, &dgamma, GEMM_RTOL, SUMMED, what);
        snprintf(what, sizeof what, "layernorm dbeta %lldx%lld", (long long)n, (long long)features);
        expect_close(f, &dbeta, GEMM_RTOL, SUMMED, what);
        twin_t *all[] = {&x, &y, &gamma, &beta, &dy, &dx, &dgamma, &dbeta, &stats};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(f, all[i]);
    }
}

/* ---- dense ---- */

static void check_dense(fixture_t *f, int64_t n, int64_t in, int64_t out) {
    twin_t x = twin_random(f, n * in, -1, 1), w = twin_random(f, out * in, -0.1, 0.1);
    twin_t b = twin_random(f, out, -1, 1), y = twin_new(f, n * out, NULL);
    twin_t dy = twin_random(f, n * out, -1, 1), dx = twin_new(f, n * in, NULL);
    /* Start the gradients from values, not zeros, to see that they add. */
    twin_t dw = twin_random(f, out * in, -1, 1), db = twin_random(f, out, -1, 1);
    /* The same ops on absolute values, on the CPU: each result's bound. */
    bg_backend_t *cpu = f->cpu;
    void *ax = cpu_abs(f, &x), *aw = cpu_abs(f, &w), *ab = cpu_abs(f, &b), *ady = cpu_abs(f, &dy);
    void *my = cpu_abs(f, &y), *mdx = cpu_abs(f, &dx), *mdw = cpu_abs(f, &dw);
    void *mdb = cpu_abs(f, &db);
    ON_BOTH(be->ops->dense_forward(be, n, in, out, P(x), P(w), P(b), P(y)));
    ok(cpu->ops->dense_forward(cpu, n, in, out, ax, aw, ab, my));
    expect_sum_close(f, &y, my, "dense forward");
    ON_BOTH(be->ops->dense_backward_data(be, n, in, out, P(dy), P(w), P(dx)));
    ok(cpu->ops->dense_backward_data(cpu, n, in, out, ady, aw, mdx));
    expect_sum_close(f, &dx, mdx, "dense backward data");
    for (int call = 0; call < 2; call++) {
        ON_BOTH(be->ops->dense_backward_weights(be, n, in, out, P(x), P(dy), P(dw), P(db)));
        ok(cpu->ops->dense_backward_weights(cpu, n, in, out, ax, ady, mdw, mdb));
        expect_sum_close(f, &dw, mdw, "dense backward weights (dw)");
        expect_sum_close(f, &db, mdb, "dense backward weights (db)");
    }
    void *bounds[] = {ax, aw, ab, ady, my, mdx, mdw, mdb};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) cpu->ops->free(cpu, bounds[i]);
    twin_free(f, &x);
    twin_free(f, &w);
    twin_free(f, &b);
    twin_free(f, &y);
    twin_free(f, &dy);
    twin_free(f, &dx);
    twin_free(f, &dw);
    twin_free(f, &db);
}

static void test_dense(void **state) {
    fixture_t *f = *state;
    check_dense(f, 7, 300, 45);
    check_dense(f, 1, 3, 1);
    check_dense(f, 64, 5408, 128); /* the origin CNN's first dense layer */
}

/* ---- conv2d ---- */

static bg_conv2d_geometry_t conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t filters,
                                 int64_t kernel, int64_t stride, int64_t pad) {
    bg_conv2d_geometry_t g = {.n = n,
                              .c = c,
                              .h = h,
                              .w = w,
                              .filters = filters,
                              .kernel = kernel,
                              .stride = stride,
                              .pad = pad};
    g.out_h = (h + 2 * pad - kernel) / stride + 1;
    g.out_w = (w + 2 * pad - kernel) / stride + 1;
    return g;
}

/* The three convolution ops (the forward also with its relu) on geometry
 * g, then again on a smaller batch (a short last micro-batch: the CUDA
 * backend meets a new geometry inside an op and must stay within the
 * workspace sized for the full batch). */
static void check_conv(fixture_t *f, bg_conv2d_geometry_t g) {
    const int64_t nx = g.n * g.c * g.h * g.w, ny = g.n * g.filters * g.out_h * g.out_w;
    const int64_t nw = g.filters * g.c * g.kernel * g.kernel;
    twin_t x = twin_random(f, nx, -1, 1), w = twin_random(f, nw, -0.3, 0.3);
    twin_t b = twin_random(f, g.filters, -1, 1), y = twin_new(f, ny, NULL);
    twin_t dy = twin_random(f, ny, -1, 1), dx = twin_new(f, nx, NULL);
    twin_t dw = twin_random(f, nw, -1, 1), db = twin_random(f, g.filters, -1, 1);
    void *workspace[2] = {NULL, NULL};
    for (int side = 0; side < 2; side++) {
        bg_backend_t *be = side ? f->gpu : f->cpu;
        size_t bytes;
        ok(be->ops->conv2d_workspace_bytes(be, &g, &bytes));
        if (bytes > 0) ok(be->ops->alloc(be, bytes, &workspace[side]));
    }
    /* The same ops on absolute values, on the CPU: each result's bound. */
    bg_backend_t *cpu = f->cpu;
    void *ax = cpu_abs(f, &x), *aw = cpu_abs(f, &w), *ab = cpu_abs(f, &b), *ady = cpu_abs(f, &dy);
    void *my = cpu_abs(f, &y), *mdx = cpu_abs(f, &dx), *mdw = NULL, *mdb = NULL;
    for (int round = 0; round < 2; round++) {
        bg_conv2d_geometry_t run = g;
        if (round == 1) run.n = g.n > 1 ? g.n - 1 : 1;
        /* dw and db afresh each round, so that their bounds hold two calls'
         * terms, not four: tight enough to see one term missing. */
        twin_refill(f, &dw, -1, 1);
        twin_refill(f, &db, -1, 1);
        cpu->ops->free(cpu, mdw);
        cpu->ops->free(cpu, mdb);
        mdw = cpu_abs(f, &dw);
        mdb = cpu_abs(f, &db);
        ON_BOTH(be->ops->conv2d_forward(be, &run, P(x), P(w), P(b), P(y), workspace[side]));
        ok(cpu->ops->conv2d_forward(cpu, &run, ax, aw, ab, my, workspace[0]));
        expect_sum_close(f, &y, my, "conv2d forward");
        /* With the relu in the bias's pass; the bound holds, as relu
         * shrinks differences. */
        ON_BOTH(be->ops->conv2d_relu_forward(be, &run, P(x), P(w), P(b), P(y), workspace[side]));
        expect_sum_close(f, &y, my, "conv2d forward with relu");
        ON_BOTH(be->ops->conv2d_backward_data(be, &run, P(dy), P(w), P(dx), workspace[side]));
        ok(cpu->ops->conv2d_backward_data(cpu, &run, ady, aw, mdx, workspace[0]));
        expect_sum_close(f, &dx, mdx, "conv2d backward data");
        /* Twice: dw and db accumulate. */
        for (int call = 0; call < 2; call++) {
            ON_BOTH(be->ops->conv2d_backward_weights(be, &run, P(x), P(dy), P(dw), P(db),
                                                     workspace[side]));
            ok(cpu->ops->conv2d_backward_weights(cpu, &run, ax, ady, mdw, mdb, workspace[0]));
            expect_sum_close(f, &dw, mdw, "conv2d backward weights (dw)");
            expect_sum_close(f, &db, mdb, "conv2d backward weights (db)");
        }
    }
    void *bounds[] = {ax, aw, ab, ady, my, mdx, mdw, mdb};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) cpu->ops->free(cpu, bounds[i]);
    f->cpu->ops->free(f->cpu, workspace[0]);
    f->gpu->ops->free(f->gpu, workspace[1]);
    twin_free(f, &x);
    twin_free(f, &w);
    twin_free(f, &b);
    twin_free(f, &y);
    twin_free(f, &dy);
    twin_free(f, &dx);
    twin_free(f, &dw);
    twin_free(f, &db);
}

/* Whether BRIGADE_CUDA_OPS_SKIP_CUDNN=1 asks to leave out the tests whose
 * cuDNN searches time every algorithm (conv2d, stage): the GPU check's
 * memcheck run does, where every kernel is instrumented and those alone
 * would take minutes. */
static int skipping_cudnn_searches(void) {
    const char *skip = getenv("BRIGADE_CUDA_OPS_SKIP_CUDNN");
    return skip != NULL && strcmp(skip, "1") == 0;
}

static void test_conv2d(void **state) {
    if (skipping_cudnn_searches()) skip();
    fixture_t *f = *state;
    check_conv(f, conv(8, 1, 28, 28, 32, 3, 1, 0)); /* the origin CNN's */
    check_conv(f, conv(4, 3, 9, 7, 5, 3, 2, 1));    /* stride and padding, odd sizes */
    check_conv(f, conv(2, 16, 12, 12, 8, 5, 1, 2)); /* more channels, "same" padding */
    check_conv(f, conv(2, 2, 40, 40, 3, 3, 1, 1));  /* a plane of 1,600: past a block's threads */
}

/* --tf32: cuBLAS and cuDNN may round products' inputs to TF32; the dense
 * and convolution ops stay within TF32's bound of the CPU's (the default,
 * TF32 off, is what the tests above hold to SUM_RTOL). */
static void test_tf32(void **state) {
    fixture_t *f = *state;
    bg_backend_destroy(f->gpu);
    f->gpu = NULL;
    bg_cuda_config_t gpu = BG_CUDA_CONFIG_INIT;
    gpu.allow_tf32 = 1;
    ok(bg_backend_cuda_create(&gpu, &f->gpu));
    sum_rtol = TF32_SUM_RTOL;
    check_dense(f, 64, 128, 64);
    if (!skipping_cudnn_searches()) check_conv(f, conv(8, 1, 28, 28, 32, 3, 1, 0));
}

/* ---- pooling ---- */

static bg_pool_geometry_t pool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t size,
                               int64_t stride) {
    bg_pool_geometry_t g = {.n = n, .c = c, .h = h, .w = w, .size = size, .stride = stride};
    g.out_h = (h - size) / stride + 1;
    g.out_w = (w - size) / stride + 1;
    return g;
}

/* Small integers: most windows hold their maximum more than once. */
static float *tied_floats(fixture_t *f, int64_t count) {
    float *v = malloc(sizeof(float) * (size_t)count);
    assert_non_null(v);
    for (int64_t i = 0; i < count; i++) v[i] = (float)bg_rng_below(&f->rng, 4);
    return v;
}

static void check_maxpool(fixture_t *f, bg_pool_geometry_t g, int with_nans) {
    const int64_t nx = g.n * g.c * g.h * g.w, ny = g.n * g.c * g.out_h * g.out_w;
    float *values = tied_floats(f, nx);
    if (with_nans)
        for (int64_t i = 0; i < nx; i += 7) values[i] = NAN;
    twin_t x = twin_new(f, nx, values), y = twin_new(f, ny, NULL);
    twin_t dy = twin_random(f, ny, -1, 1), dx = twin_random(f, nx, 5, 6); /* dx is overwritten */
    ON_BOTH(be->ops->maxpool_forward(be, &g, P(x), P(y)));
    expect_close(f, &y, ELEMENTWISE_RTOL, EXACTISH, "maxpool forward");
    ON_BOTH(be->ops->maxpool_backward(be, &g, P(x), P(y), P(dy), P(dx)));
    expect_close(f, &dx, ELEMENTWISE_RTOL, EXACTISH, "maxpool backward");
    ON_BOTH(be->ops->maxpool_relu_backward(be, &g, P(x), P(y), P(dy), P(dx)));
    expect_close(f, &dx, ELEMENTWISE_RTOL, EXACTISH, "maxpool backward over a relu");
    free(values);
    twin_free(f, &x);
    twin_free(f, &y);
    twin_free(f, &dy);
    twin_free(f, &dx);
}

/* The rule itself, on single windows: ties go to the first maximum in
 * row-major order; a window whose maximum is NaN sends its gradient to its
 * last position. dx is compared bit for bit (the sign of a zero too). */
static void check_maxpool_rule(fixture_t *f, bg_pool_geometry_t g, const float *x_host,
                               float dy_host, const float *want_dx) {
    const int64_t nx = g.h * g.w;
    twin_t x = twin_new(f, nx, x_host), y = twin_new(f, 1, NULL);
    twin_t dy = twin_new(f, 1, &dy_host), dx = twin_new(f, nx, NULL);
    ON_BOTH(be->ops->maxpool_forward(be, &g, P(x), P(y)));
    ON_BOTH(be->ops->maxpool_backward(be, &g, P(x), P(y), P(dy), P(dx)));
    for (int gpu = 0; gpu < 2; gpu++) {
        float *got = twin_download(f, &dx, gpu);
        for (int64_t i = 0; i < nx; i++)
            if (memcmp(&got[i], &want_dx[i], sizeof got[i]) != 0)
                fail_msg("%s: dx[%lld] = %g, want %g", gpu ? "gpu" : "cpu", (long long)i, got[i],
                         want_dx[i]);
        free(got);
    }
    twin_free(f, &x);
    twin_free(f, &y);
    twin_free(f, &dy);
    twin_free(f, &dx);
}

static void test_maxpool(void **state) {
    fixture_t *f = *state;
    for (int with_nans = 0; with_nans < 2; with_nans++) {
        check_maxpool(f, pool(2, 3, 8, 6, 2, 2), with_nans); /* 2x2 windows tiling the input */
        check_maxpool(f, pool(1, 2, 7, 5, 2, 2), with_nans); /* odd sizes: a row, a column left */
        check_maxpool(f, pool(2, 2, 9, 9, 3, 2), with_nans); /* overlapping windows */
        check_maxpool(f, pool(1, 3, 5, 6, 2, 1), with_nans);
        check_maxpool(f, pool(1, 1, 9, 9, 3, 3), with_nans);
    }
    const float ties[4] = {3, 3, 3, 3}, first[4] = {0.5f, 0, 0, 0};
    check_maxpool_rule(f, pool(1, 1, 2, 2, 2, 2), ties, 0.5f, first);
    const float later[4] = {1, 3, 2, 3}, second[4] = {0, 0.5f, 0, 0};
    check_maxpool_rule(f, pool(1, 1, 2, 2, 2, 2), later, 0.5f, second);
    const float nan_last[4] = {1, 2, 0, NAN}, last[4] = {0, 0, 0, 0.5f};
    check_maxpool_rule(f, pool(1, 1, 2, 2, 2, 2), nan_last, 0.5f, last);
    const float nan_first[9] = {NAN, 1, 2, 3, 4, 5, 6, 7, 8};
    const float last9[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0.5f};
    check_maxpool_rule(f, pool(1, 1, 3, 3, 3, 3), nan_first, 0.5f, last9);
    /* A -0.0 gradient: 2x2 windows tiling the input pass it on as it is;
     * other windows add into zeros, where it becomes +0.0. */
    const float minus_zero[4] = {0, -0.0f, 0, 0};
    check_maxpool_rule(f, pool(1, 1, 2, 2, 2, 2), later, -0.0f, minus_zero);
    const float zeros9[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    check_maxpool_rule(f, pool(1, 1, 3, 3, 3, 3), nan_first, -0.0f, zeros9);
}

static void check_avgpool(fixture_t *f, bg_pool_geometry_t g) {
    const int64_t nx = g.n * g.c * g.h * g.w, ny = g.n * g.c * g.out_h * g.out_w;
    twin_t x = twin_random(f, nx, -1, 1), y = twin_new(f, ny, NULL);
    twin_t dy = twin_random(f, ny, -1, 1), dx = twin_random(f, nx, 5, 6);
    ON_BOTH(be->ops->avgpool_forward(be, &g, P(x), P(y)));
    expect_close(f, &y, ELEMENTWISE_RTOL, EXACTISH, "avgpool forward");
    ON_BOTH(be->ops->avgpool_backward(be, &g, P(dy), P(dx)));
    expect_close(f, &dx, ELEMENTWISE_RTOL, EXACTISH, "avgpool backward");
    twin_free(f, &x);
    twin_free(f, &y);
    twin_free(f, &dy);
    twin_free(f, &dx);
}

static void test_avgpool(void **state) {
    fixture_t *f = *state;
    check_avgpool(f, pool(2, 3, 8, 6, 2, 2));
    check_avgpool(f, pool(1, 2, 7, 5, 2, 2));
    check_avgpool(f, pool(2, 2, 9, 9, 3, 2)); /* overlapping windows */
    check_avgpool(f, pool(1, 3, 5, 6, 2, 1));
}

/* ---- softmax cross-entropy ---- */

static void test_softmax_xent(void **state) {
    fixture_t *f = *state;
    enum { N = 37, CLASSES = 10 };
    float *logits_host = random_floats(f, N * CLASSES, -6, 6);
    /* Rows with tied maxima: the lowest index is the prediction. */
    for (int k = 0; k < CLASSES; k++) logits_host[3 * CLASSES + k] = 0;
    logits_host[4 * CLASSES + 2] = logits_host[4 * CLASSES + 7] = 9;
    int32_t labels_host[N];
    for (int i = 0; i < N; i++) labels_host[i] = (int32_t)bg_rng_below(&f->rng, CLASSES);
    labels_host[3] = 0; /* right by the tie rule */
    labels_host[4] = 7; /* wrong by the tie rule */
    twin_t logits = twin_new(f, N * CLASSES, logits_host), labels = twin_new(f, N, labels_host);
    twin_t probs = twin_new(f, N * CLASSES, NULL), dlogits = twin_new(f, N * CLASSES, NULL);

    double loss[2];
    int64_t correct[2];
    ON_BOTH(be->ops->softmax_xent_forward(be, N, CLASSES, P(logits), P(labels), P(probs),
                                          &loss[side], &correct[side]));
    expect_close(f, &probs, ELEMENTWISE_RTOL, EXACTISH, "softmax probabilities");
    assert_true(fabs(loss[1] - loss[0]) <= 1e-9 * fabs(loss[0]));
    assert_int_equal(correct[1], correct[0]);
    assert_true(correct[0] > 0 && correct[0] < N);

    ON_BOTH(
        be->ops->softmax_xent_backward(be, N, CLASSES, P(probs), P(labels), 1.0 / N, P(dlogits)));
    expect_close(f, &dlogits, ELEMENTWISE_RTOL, EXACTISH, "softmax backward");

    /* A label out of range is the caller's error, named. */
    labels_host[5] = CLASSES;
    ok(f->gpu->ops->upload(f->gpu, labels.gpu, labels_host, sizeof labels_host));
    double l = -1;
    int64_t c = -1;
    assert_int_equal(f->gpu->ops->softmax_xent_forward(f->gpu, N, CLASSES, logits.gpu, labels.gpu,
                                                       probs.gpu, &l, &c),
                     BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "label 10 of sample 5"));

    /* Deferred (the executor's form): three adds, one of probabilities
     * only, then one take; on the GPU the bad label comes from the take. */
    labels_host[5] = 0;
    ON_BOTH(be->ops->upload(be, P(labels), labels_host, sizeof labels_host));
    ON_BOTH(
        be->ops->softmax_xent_forward_add(be, N, CLASSES, P(logits), P(labels), P(probs), 1, 0));
    ON_BOTH(
        be->ops->softmax_xent_forward_add(be, 20, CLASSES, P(logits), P(labels), P(probs), 1, 1));
    ON_BOTH(
        be->ops->softmax_xent_forward_add(be, N, CLASSES, P(logits), P(labels), P(probs), 0, -1));
    ON_BOTH(be->ops->take_loss(be, &loss[side], &correct[side]));
    expect_close(f, &probs, ELEMENTWISE_RTOL, EXACTISH, "deferred softmax probabilities");
    assert_true(fabs(loss[1] - loss[0]) <= 1e-9 * fabs(loss[0]));
    assert_int_equal(correct[1], correct[0]);
    int tag[2] = {7, 7};
    ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
    assert_int_equal(tag[1], -1);
    /* A loss that is not finite lowers the non-finite mark to its add's
     * tag, the lowest of two such adds (the GPU's atomicMax of INT_MAX -
     * tag), and the totals say so. */
    logits_host[3 * CLASSES + 2] = INFINITY;
    ON_BOTH(be->ops->upload(be, P(logits), logits_host, sizeof(float) * N * CLASSES));
    ON_BOTH(
        be->ops->softmax_xent_forward_add(be, N, CLASSES, P(logits), P(labels), P(probs), 1, 5));
    ON_BOTH(
        be->ops->softmax_xent_forward_add(be, N, CLASSES, P(logits), P(labels), P(probs), 1, 3));
    ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
    assert_int_equal(tag[0], 3);
    assert_int_equal(tag[1], 3);
    ON_BOTH(be->ops->take_loss(be, &loss[side], &correct[side]));
    assert_true(!isfinite(loss[0]) && !isfinite(loss[1]));
    /* The take of the loss reads the mark too (the GPU's one wait for
     * both): a take of the mark after it gives the lowest tag of what was
     * marked before and after it, then nothing. */
    for (int later = 2; later <= 6; later += 4) {
        ON_BOTH(be->ops->softmax_xent_forward_add(be, N, CLASSES, P(logits), P(labels), P(probs), 1,
                                                  4));
        ON_BOTH(be->ops->take_loss(be, &loss[side], &correct[side]));
        ON_BOTH(be->ops->mark_nonfinite(be, N * CLASSES, P(logits), later));
        ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
        assert_int_equal(tag[0], later < 4 ? later : 4);
        assert_int_equal(tag[1], later < 4 ? later : 4);
        ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
        assert_int_equal(tag[0], -1);
        assert_int_equal(tag[1], -1);
    }
    /* Nothing marked after the take of the loss: the mark it read. */
    ON_BOTH(
        be->ops->softmax_xent_forward_add(be, N, CLASSES, P(logits), P(labels), P(probs), 1, 8));
    ON_BOTH(be->ops->take_loss(be, &loss[side], &correct[side]));
    ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
    assert_int_equal(tag[0], 8);
    assert_int_equal(tag[1], 8);
    /* ...which it cleared on the GPU: a later scan of finite data, read
     * there, finds nothing. */
    ON_BOTH(be->ops->mark_nonfinite(be, N * CLASSES, P(dlogits), 1));
    ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
    assert_int_equal(tag[0], -1);
    assert_int_equal(tag[1], -1);
    labels_host[6] = -3;
    ok(f->gpu->ops->upload(f->gpu, labels.gpu, labels_host, sizeof labels_host));
    ok(f->gpu->ops->softmax_xent_forward_add(f->gpu, N, CLASSES, logits.gpu, labels.gpu, probs.gpu,
                                             1, -1));
    assert_int_equal(f->gpu->ops->take_loss(f->gpu, &l, &c), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "label -3 of sample 6"));
    ok(f->gpu->ops->take_loss(f->gpu, &l, &c)); /* the take cleared it */
    assert_true(l == 0 && c == 0);
    free(logits_host);
    twin_free(f, &logits);
    twin_free(f, &labels);
    twin_free(f, &probs);
    twin_free(f, &dlogits);
}

/* ---- optimizers ---- */

static void check_sgd(fixture_t *f, bg_sgd_config_t cfg) {
    enum { N = 5000 };
    twin_t param = twin_random(f, N, -1, 1), velocity = twin_new(f, N, NULL);
    for (int64_t step = 1; step <= 3; step++) {
        twin_t grad = twin_random(f, N, -1, 1);
        ON_BOTH(be->ops->sgd_update(be, N, P(param), P(grad), P(velocity), &cfg, step));
        twin_free(f, &grad);
    }
    expect_close(f, &param, ELEMENTWISE_RTOL, EXACTISH, "sgd parameters after 3 steps");
    expect_close(f, &velocity, ELEMENTWISE_RTOL, EXACTISH, "sgd velocity after 3 steps");
    twin_free(f, &param);
    twin_free(f, &velocity);
}

static void test_sgd(void **state) {
    fixture_t *f = *state;
    bg_sgd_config_t plain = BG_SGD_CONFIG_INIT;
    check_sgd(f, plain);
    bg_sgd_config_t momentum = BG_SGD_CONFIG_INIT;
    momentum.lr = 0.05;
    momentum.momentum = 0.9;
    momentum.dampening = 0.1;
    momentum.weight_decay = 1e-2;
    check_sgd(f, momentum);
    momentum.dampening = 0;
    momentum.nesterov = 1;
    check_sgd(f, momentum);
}

static void check_adam(fixture_t *f, bg_adam_config_t cfg) {
    enum { N = 5000 };
    twin_t param = twin_random(f, N, -1, 1);
    twin_t m = twin_new(f, N, NULL), v = twin_new(f, N, NULL);
    for (int64_t step = 1; step <= 3; step++) {
        twin_t grad = twin_random(f, N, -1, 1);
        ON_BOTH(be->ops->adam_update(be, N, P(param), P(grad), P(m), P(v), &cfg, step));
        twin_free(f, &grad);
    }
    expect_close(f, &param, ELEMENTWISE_RTOL, EXACTISH, "adam parameters after 3 steps");
    expect_close(f, &m, ELEMENTWISE_RTOL, EXACTISH, "adam m after 3 steps");
    expect_close(f, &v, ELEMENTWISE_RTOL, EXACTISH, "adam v after 3 steps");
    twin_free(f, &param);
    twin_free(f, &m);
    twin_free(f, &v);
}

static void test_adam(void **state) {
    fixture_t *f = *state;
    bg_adam_config_t cfg = BG_ADAM_CONFIG_INIT;
    check_adam(f, cfg);
    cfg.lr = 3e-3;
    cfg.weight_decay = 1e-2;
    cfg.beta2 = 0.99;
    check_adam(f, cfg);
}

/* ---- all_finite ---- */

static void test_all_finite(void **state) {
    fixture_t *f = *state;
    enum { N = 100003 };
    float *host = random_floats(f, N, -1e30, 1e30);
    twin_t x = twin_new(f, N, host);
    const float bad[2] = {NAN, -INFINITY};
    int finite[2] = {-1, -1};
    ON_BOTH(be->ops->all_finite(be, N, P(x), &finite[side]));
    assert_int_equal(finite[0], 1);
    assert_int_equal(finite[1], 1);
    for (int k = 0; k < 2; k++) {
        ok(f->gpu->ops->upload(f->gpu, (float *)x.gpu + N - 1 - k * 5000, &bad[k], sizeof(float)));
        finite[1] = -1;
        ok(f->gpu->ops->all_finite(f->gpu, N, x.gpu, &finite[1]));
        assert_int_equal(finite[1], 0);
    }
    ok(f->gpu->ops->all_finite(f->gpu, 0, x.gpu, &finite[1]));
    assert_int_equal(finite[1], 1);
    free(host);
    twin_free(f, &x);
}

/* The sum of squares (clipping's norm): in double on both, in other orders
 * (the CPU's in index order, the GPU's by a block's tree), so within
 * rounding of double; over a count that is no multiple of the block, and
 * none. And the same sum again on the GPU: its order is fixed. */
static void test_square_sum(void **state) {
    fixture_t *f = *state;
    enum { N = 100003 };
    twin_t x = twin_random(f, N, -3, 3);
    double sum[2] = {-1, -1}, again = -1;
    ON_BOTH(be->ops->square_sum(be, N, P(x), &sum[side]));
    assert_true(sum[0] > 0);
    if (!(fabs(sum[1] - sum[0]) <= 1e-12 * sum[0]))
        fail_msg("square_sum: GPU %.17g, CPU %.17g", sum[1], sum[0]);
    ok(f->gpu->ops->square_sum(f->gpu, N, x.gpu, &again));
    assert_true(again == sum[1]);
    ON_BOTH(be->ops->square_sum(be, 0, P(x), &sum[side]));
    assert_true(sum[0] == 0 && sum[1] == 0);
    twin_free(f, &x);
}

/* The deferred check: the same tags taken on both backends after the same
 * scans (finite data, a NaN and an Inf at block edges, a count stopping
 * short), and a take clears the mark. */
static void test_nonfinite_marks(void **state) {
    fixture_t *f = *state;
    enum { N = 100003 };
    float *host = random_floats(f, N, -1e30, 1e30);
    twin_t clean = twin_new(f, N, host);
    host[N - 1] = NAN;
    host[4096] = -INFINITY;
    twin_t dirty = twin_new(f, N, host);
    int tag[2] = {7, 7};
    ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
    assert_int_equal(tag[0], -1);
    assert_int_equal(tag[1], -1);
    ON_BOTH(be->ops->mark_nonfinite(be, N, P(dirty), 9));
    ON_BOTH(be->ops->mark_nonfinite(be, N, P(clean), 1));
    ON_BOTH(be->ops->mark_nonfinite(be, N, P(dirty), 3));
    ON_BOTH(be->ops->mark_nonfinite(be, 4096, P(dirty), 0));
    ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
    assert_int_equal(tag[0], 3);
    assert_int_equal(tag[1], 3);
    ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
    assert_int_equal(tag[1], -1);
    ON_BOTH(be->ops->mark_nonfinite(be, N - 4097, (float *)P(dirty) + 4097, 5));
    ON_BOTH(be->ops->take_nonfinite(be, &tag[side]));
    assert_int_equal(tag[0], 5);
    assert_int_equal(tag[1], 5);
    assert_int_equal(f->gpu->ops->mark_nonfinite(f->gpu, N, dirty.gpu, INT_MAX), BG_ERR_INTERNAL);
    free(host);
    twin_free(f, &clean);
    twin_free(f, &dirty);
}

/* ---- a stage of the origin CNN on each backend ---- */

static const char origin_cnn[] = BG_TEST_ORIGIN_CNN;

/* The output of layers [0, end) of spec for n images, by the CPU backend
 * (host memory, caller frees; *count its floats). */
static float *cpu_output(fixture_t *f, const bg_model_spec_t *spec, int end, int64_t n,
                         const float *images, int64_t *count) {
    bg_stage_config_t cfg = BG_STAGE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.first_layer = 0;
    cfg.last_layer = end;
    cfg.backend = f->cpu;
    cfg.max_batch = n;
    cfg.seed = 42; /* test_stage's: the same weights */
    bg_stage_t *stage = NULL;
    ok(bg_stage_create(&cfg, &stage));
    ok(bg_stage_load_batch(stage, n, images, NULL));
    ok(bg_stage_forward(stage, n, NULL));
    *count = n * bg_shape_numel(spec->layers[end - 1].out);
    float *host = malloc(sizeof(float) * (size_t)*count);
    assert_non_null(host);
    ok(f->cpu->ops->download(f->cpu, host, bg_stage_output(stage), sizeof(float) * (size_t)*count));
    bg_stage_destroy(stage);
    return host;
}

/* How far, relative to the largest value of its layer, a value that picks
 * a branch must be from the branch's edge. Another order of a float sum
 * moves it by about sqrt(terms) roundings of the sum of its terms'
 * magnitudes, so the margin grows with the terms a value sums: 9 for the
 * convolution, 128 for the logits, 5,408 for the first dense layer (whose
 * sums in two orders differed by up to 1.7e-6 of its largest output in a
 * simulation of a 32-way split). */
typedef struct branch_margins {
    double conv, dense, logits;
} branch_margins_t;

/* Whether the origin CNN's forward of these images keeps every value that
 * picks a branch clear of the branch's edge by its layer's margin, so that
 * the GPU's rounding, another order of the same sums, cannot take the
 * other branch: in each 2x2 window of the conv output, the largest
 * value's sign (its relu) and its lead over the next one where both are
 * positive (the max-pool's choice: the CPU and the GPU route the gradient
 * to the same place); the first dense layer's outputs' signs (its relu);
 * each sample's lead of its largest logit (the correct count). Where a
 * conv output the max-pool routes the gradient to crosses 0, the GPU's
 * weight gradient gets a whole term that the CPU's does not, far above
 * the comparison's tolerance, while both are right; of 100 draws on the
 * CPU, 44 had a conv output, a max-pool lead or a dense output within
 * 1e-6 of its layer's largest value. */
static int clear_of_branch_edges(fixture_t *f, const bg_model_spec_t *spec, int64_t n,
                                 const float *images, const branch_margins_t *margin) {
    int64_t count = 0;
    float *y = cpu_output(f, spec, 1, n, images, &count); /* conv, before its relu */
    const int64_t h = spec->layers[0].out.h, w = spec->layers[0].out.w, planes = count / (h * w);
    double largest = 0;
    for (int64_t i = 0; i < count; i++) largest = fmax(largest, fabs(y[i]));
    int clear = 1;
    for (int64_t p = 0; clear && p < planes; p++) {
        for (int64_t r = 0; clear && r + 1 < h; r += 2) {
            for (int64_t c = 0; clear && c + 1 < w; c += 2) {
                const float *at = y + (p * h + r) * w + c;
                const float v[4] = {at[0], at[1], at[w], at[w + 1]};
                float first = v[0], second = -INFINITY;
                for (int k = 1; k < 4; k++) {
                    if (v[k] > first) {
                        second = first;
                        first = v[k];
                    } else if (v[k] > second) {
                        second = v[k];
                    }
                }
                const double lead = first - fmax(second, 0.0);
                clear = fabs(first) > margin->conv * largest &&
                        (first <= 0 || lead > margin->conv * largest);
            }
        }
    }
    free(y);
    y = cpu_output(f, spec, 5, n, images, &count); /* the first dense layer, before its relu */
    largest = 0;
    for (int64_t i = 0; i < count; i++) largest = fmax(largest, fabs(y[i]));
    for (int64_t i = 0; clear && i < count; i++) clear = fabs(y[i]) > margin->dense * largest;
    free(y);
    y = cpu_output(f, spec, 7, n, images, &count); /* the logits */
    const int64_t classes = count / n;
    largest = 0;
    for (int64_t i = 0; i < count; i++) largest = fmax(largest, fabs(y[i]));
    for (int64_t s = 0; clear && s < n; s++) {
        float first = -INFINITY, second = -INFINITY;
        for (int64_t k = 0; k < classes; k++) {
            const float v = y[s * classes + k];
            if (v > first) {
                second = first;
                first = v;
            } else if (v > second) {
                second = v;
            }
        }
        clear = first - second > margin->logits * largest;
    }
    free(y);
    return clear;
}

static void test_stage(void **state) {
    if (skipping_cudnn_searches()) skip();
    fixture_t *f = *state;
    enum { BATCH = 16, PIXELS = 28 * 28, DRAWS = 200 };
    bg_model_spec_t *spec = NULL;
    ok(bg_model_spec_parse("origin", origin_cnn, strlen(origin_cnn), &spec));
    /* Images whose forward no rounding can tip over a branch (above). */
    const branch_margins_t margins = {.conv = 2e-6, .dense = 3e-5, .logits = 1e-5};
    float *images = NULL;
    int draws = 0;
    do {
        free(images);
        images = random_floats(f, BATCH * PIXELS, 0, 1);
    } while (!clear_of_branch_edges(f, spec, BATCH, images, &margins) && ++draws < DRAWS);
    if (draws == DRAWS) fail_msg("no images clear of the branches' edges in %d draws", DRAWS);
    print_message("images clear of the branches' edges after %d redraws\n", draws);
    int32_t labels[BATCH];
    for (int i = 0; i < BATCH; i++) labels[i] = (i * 7) % 10;

    bg_stage_t *stage[2] = {NULL, NULL};
    bg_stage_loss_t loss[2];
    for (int side = 0; side < 2; side++) {
        bg_stage_config_t cfg = BG_STAGE_CONFIG_INIT;
        cfg.spec = spec;
        cfg.first_layer = 0;
        cfg.last_layer = spec->num_layers;
        cfg.backend = side ? f->gpu : f->cpu;
        cfg.max_batch = BATCH;
        cfg.seed = 42;
        cfg.optimizer.adam.eps = ADAM_COMPARE_EPS;
        ok(bg_stage_create(&cfg, &stage[side]));
        ok(bg_stage_load_batch(stage[side], BATCH, images, labels));
        ok(bg_stage_forward(stage[side], BATCH, &loss[side]));
        ok(bg_stage_backward(stage[side], BATCH, 1.0 / BATCH));
    }
    assert_true(fabs(loss[1].loss_sum - loss[0].loss_sum) <= 1e-5 * fabs(loss[0].loss_sum));
    assert_int_equal(loss[1].correct, loss[0].correct);

    /* Gradients, then parameters after one Adam step (ADAM_COMPARE_EPS),
     * through twins over host copies so expect_close can compare them. */
    const int64_t count = bg_stage_param_count(stage[0]);
    assert_int_equal(bg_stage_param_count(stage[1]), count);
    float *host[2] = {malloc(sizeof(float) * (size_t)count), malloc(sizeof(float) * (size_t)count)};
    assert_non_null(host[0]);
    assert_non_null(host[1]);
    for (int what = 0; what < 2; what++) {
        for (int side = 0; side < 2; side++) {
            if (what == 1) ok(bg_stage_step(stage[side]));
            ok(what == 0 ? bg_stage_download_grads(stage[side], host[side])
                         : bg_stage_download_params(stage[side], host[side]));
        }
        twin_t t = twin_new(f, count, host[0]);
        ok(f->gpu->ops->upload(f->gpu, t.gpu, host[1], sizeof(float) * (size_t)count));
        expect_close(f, &t, GEMM_RTOL, SUMMED,
                     what == 0 ? "stage gradients" : "stage parameters after a step");
        twin_free(f, &t);
    }
    free(host[0]);
    free(host[1]);
    bg_stage_destroy(stage[1]);
    bg_stage_destroy(stage[0]);
    free(images);
    bg_model_spec_destroy(spec);
}

/* ---- backend creation ---- */

static void test_create_errors(void **state) {
    (void)state;
    bg_backend_t *be = NULL;
    bg_cuda_config_t cfg = BG_CUDA_CONFIG_INIT;
    cfg.dtype = BG_F64;
    assert_int_equal(bg_backend_cuda_create(&cfg, &be), BG_ERR_UNSUPPORTED);
    cfg.dtype = BG_F32;
    cfg.device = bg_cuda_device_count();
    assert_int_equal(bg_backend_cuda_create(&cfg, &be), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "no such GPU"));
    assert_null(be);
}

int main(void) {
    /* Line by line into the GPU check's log: a run it kills keeps what it
       printed. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!bg_cuda_built()) {
        printf("test_cuda_ops: skipped: this build has no CUDA backend (-Dcuda=disabled or no "
               "nvcc)\n");
        return 77;
    }
    if (bg_cuda_absent_reason() != NULL) {
        /* A CUDA build whose module does not load is broken, not skipped. */
        printf("test_cuda_ops: %s\n", bg_cuda_absent_reason());
        return 1;
    }
    if (bg_cuda_device_count() == 0) {
        const char *why = bg_cuda_no_device_reason();
        printf("test_cuda_ops: skipped: CUDA sees no GPU on this machine (%s); the CUDA ops are "
               "checked on the GPU machine by bench/gpu-check.sh\n",
               why != NULL ? why : "it counts none");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test_setup_teardown(test_memory_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_add, setup, teardown),
        cmocka_unit_test_setup_teardown(test_activations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layernorm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dense, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conv2d, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tf32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maxpool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_avgpool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_softmax_xent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sgd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adam, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_finite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_square_sum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_marks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
