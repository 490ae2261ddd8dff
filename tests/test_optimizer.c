/* Optimizers: SGD (plain, weight decay, momentum with dampening, Nesterov)
 * and Adam against steps computed by hand from PyTorch's formulas, on the
 * double backend (tight) and the float backend, plus parsing, state-buffer
 * counts and learning-rate validation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/backend_cpu.h"
#include "optimizer.h"

enum { MAX_COUNT = 8, MAX_STEPS = 10 };

/* |got - want| <= tol, failing (NaN included) with both values and the
 * caller's line; cmocka 1.1's assert_float_equal works in float. */
#define expect_near(got, want, tol) expect_near_at((got), (want), (tol), #got, __FILE__, __LINE__)

static void expect_near_at(double got, double want, double tol, const char *expr, const char *file,
                           int line) {
    if (fabs(got - want) <= tol) return;
    print_error("%s = %.17g, want %.17g (tolerance %.3g)\n", expr, got, want, tol);
    _fail(file, line);
}

static void check_ok(bg_status_t st) {
    if (st != BG_OK) fail_msg("status %s: %s", bg_status_name(st), bg_error_message());
}

static bg_backend_t *backend_create(bg_dtype_t dtype) {
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    cfg.dtype = dtype;
    bg_backend_t *be = NULL;
    if (bg_backend_cpu_create(&cfg, &be) != BG_OK) fail_msg("%s", bg_error_message());
    assert_non_null(be);
    return be;
}

/* The parameters and the optimizer state after some steps, on the host. */
typedef struct trajectory {
    double param[MAX_COUNT];
    double state[2][MAX_COUNT];
} trajectory_t;

/* Runs `steps` updates of `count` parameters starting at p0, step t using
 * grads[t - 1], on a fresh backend of `dtype`. */
static trajectory_t run_steps(bg_dtype_t dtype, const bg_optimizer_config_t *cfg, int steps,
                              int count, const double *p0, const double (*grads)[MAX_COUNT]) {
    assert_true(count <= MAX_COUNT && steps <= MAX_STEPS);
    bg_backend_t *be = backend_create(dtype);
    void *param = NULL, *grad = NULL, *state[2] = {NULL, NULL};
    const int buffers = bg_optimizer_state_buffers(cfg);
    check_ok(bg_backend_alloc_elems(be, count, &param));
    check_ok(bg_backend_alloc_elems(be, count, &grad));
    for (int i = 0; i < buffers; i++) check_ok(bg_backend_alloc_elems(be, count, &state[i]));
    check_ok(bg_backend_upload_doubles(be, param, p0, count));
    for (int t = 1; t <= steps; t++) {
        check_ok(bg_backend_upload_doubles(be, grad, grads[t - 1], count));
        check_ok(bg_optimizer_update(cfg, be, t, count, param, grad, state));
    }
    trajectory_t out;
    memset(&out, 0, sizeof out);
    check_ok(bg_backend_download_doubles(be, out.param, param, count));
    for (int i = 0; i < buffers; i++)
        check_ok(bg_backend_download_doubles(be, out.state[i], state[i], count));
    be->ops->free(be, param);
    be->ops->free(be, grad);
    for (int i = 0; i < buffers; i++) be->ops->free(be, state[i]);
    bg_backend_destroy(be);
    return out;
}

static bg_optimizer_config_t sgd_config(double lr) {
    bg_optimizer_config_t cfg = BG_OPTIMIZER_CONFIG_INIT;
    cfg.kind = BG_OPTIMIZER_SGD;
    cfg.sgd.lr = lr;
    return cfg;
}

static bg_optimizer_config_t adam_config(double lr) {
    bg_optimizer_config_t cfg = BG_OPTIMIZER_CONFIG_INIT;
    cfg.kind = BG_OPTIMIZER_ADAM;
    cfg.adam.lr = lr;
    return cfg;
}

/* ---- SGD ---- */

static void test_sgd_plain(void **state) {
    (void)state;
    const bg_optimizer_config_t cfg = sgd_config(0.1);
    const double p0[3] = {1, -2, 0.5};
    const double g[1][MAX_COUNT] = {{0.1, -0.3, 2}};
    trajectory_t out = run_steps(BG_F64, &cfg, 1, 3, p0, g);
    /* p - 0.1 g */
    expect_near(out.param[0], 0.99, 1e-15);
    expect_near(out.param[1], -1.97, 1e-15);
    expect_near(out.param[2], 0.3, 1e-15);
}

static void test_sgd_weight_decay(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = sgd_config(0.1);
    cfg.sgd.weight_decay = 0.01;
    const double p0[3] = {1, -2, 0.5};
    const double g[1][MAX_COUNT] = {{0.1, -0.3, 2}};
    trajectory_t out = run_steps(BG_F64, &cfg, 1, 3, p0, g);
    /* g + 0.01 p = (0.11, -0.32, 2.005); p - 0.1 of that. */
    expect_near(out.param[0], 0.989, 1e-15);
    expect_near(out.param[1], -1.968, 1e-15);
    expect_near(out.param[2], 0.2995, 1e-15);
}

static void test_sgd_momentum_dampening(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = sgd_config(0.1);
    cfg.sgd.momentum = 0.9;
    cfg.sgd.dampening = 0.1;
    const double p0[1] = {1};
    const double g[3][MAX_COUNT] = {{1}, {2}, {-1}};
    /* step 1: buf = g = 1 (undampened);      p = 1 - 0.1 = 0.9
     * step 2: buf = 0.9 * 1 + 0.9 * 2 = 2.7;  p = 0.9 - 0.27 = 0.63
     * step 3: buf = 0.9 * 2.7 - 0.9 = 1.53;  p = 0.63 - 0.153 = 0.477 */
    const double want_p[3] = {0.9, 0.63, 0.477}, want_buf[3] = {1, 2.7, 1.53};
    for (int steps = 1; steps <= 3; steps++) {
        trajectory_t out = run_steps(BG_F64, &cfg, steps, 1, p0, g);
        expect_near(out.param[0], want_p[steps - 1], 1e-15);
        expect_near(out.state[0][0], want_buf[steps - 1], 1e-15);
    }
}

static void test_sgd_nesterov(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = sgd_config(0.1);
    cfg.sgd.momentum = 0.9;
    cfg.sgd.nesterov = 1;
    const double p0[1] = {1};
    const double g[3][MAX_COUNT] = {{1}, {2}, {-1}};
    /* step 1: buf = 1;              g' = 1 + 0.9 * 1 = 1.9;     p = 0.81
     * step 2: buf = 0.9 + 2 = 2.9;  g' = 2 + 0.9 * 2.9 = 4.61;  p = 0.349
     * step 3: buf = 2.61 - 1 = 1.61; g' = -1 + 1.449 = 0.449;   p = 0.3041 */
    const double want_p[3] = {0.81, 0.349, 0.3041}, want_buf[3] = {1, 2.9, 1.61};
    for (int steps = 1; steps <= 3; steps++) {
        trajectory_t out = run_steps(BG_F64, &cfg, steps, 1, p0, g);
        expect_near(out.param[0], want_p[steps - 1], 1e-15);
        expect_near(out.state[0][0], want_buf[steps - 1], 1e-15);
    }
}

/* torch.optim.SGD's step written out in double, for vectors. */
static void sgd_reference(const bg_sgd_config_t *c, int steps, int count, const double *p0,
                          const double (*grads)[MAX_COUNT], double *p) {
    double buf[MAX_COUNT] = {0};
    memcpy(p, p0, sizeof(double) * (size_t)count);
    for (int t = 1; t <= steps; t++) {
        for (int i = 0; i < count; i++) {
            double g = grads[t - 1][i] + c->weight_decay * p[i];
            if (c->momentum != 0) {
                buf[i] = t == 1 ? g : c->momentum * buf[i] + (1 - c->dampening) * g;
                g = c->nesterov ? g + c->momentum * buf[i] : buf[i];
            }
            p[i] -= c->lr * g;
        }
    }
}

static const double vector_p0[5] = {0.5, -1.25, 2, 0, -0.03};
static const double vector_grads[4][MAX_COUNT] = {
    {0.2, -0.7, 1.5, 0.01, -3},
    {-0.4, -0.1, 1.1, 0.02, 2.5},
    {0.3, 0.6, -0.9, -0.05, -1},
    {0.25, -0.2, 0.4, 0.03, 0.7},
};

static void test_sgd_momentum_weight_decay_vector(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = sgd_config(0.05);
    cfg.sgd.momentum = 0.8;
    cfg.sgd.dampening = 0.25;
    cfg.sgd.weight_decay = 0.1;
    double want[5];
    sgd_reference(&cfg.sgd, 4, 5, vector_p0, vector_grads, want);
    trajectory_t out = run_steps(BG_F64, &cfg, 4, 5, vector_p0, vector_grads);
    for (int i = 0; i < 5; i++) {
        expect_near(out.param[i], want[i], 1e-14);
        /* The update is not a no-op. */
        assert_true(fabs(out.param[i] - vector_p0[i]) > 1e-3);
    }
    /* Same on the float backend that training uses. */
    trajectory_t single = run_steps(BG_F32, &cfg, 4, 5, vector_p0, vector_grads);
    for (int i = 0; i < 5; i++) expect_near(single.param[i], want[i], 1e-6 * (1 + fabs(want[i])));
}

/* ---- Adam ---- */

/* torch.optim.Adam's step (L2 weight decay, no amsgrad) written out in double;
 * m and v receive the moments after the last step. */
static void adam_reference(const bg_adam_config_t *c, int steps, int count, const double *p0,
                           const double (*grads)[MAX_COUNT], double *p, double *m, double *v) {
    memcpy(p, p0, sizeof(double) * (size_t)count);
    for (int i = 0; i < count; i++) m[i] = v[i] = 0;
    for (int t = 1; t <= steps; t++) {
        const double bias1 = 1 - pow(c->beta1, t), bias2 = 1 - pow(c->beta2, t);
        for (int i = 0; i < count; i++) {
            const double g = grads[t - 1][i] + c->weight_decay * p[i];
            m[i] = c->beta1 * m[i] + (1 - c->beta1) * g;
            v[i] = c->beta2 * v[i] + (1 - c->beta2) * g * g;
            p[i] -= c->lr / bias1 * m[i] / (sqrt(v[i]) / sqrt(bias2) + c->eps);
        }
    }
}

static void test_adam_three_steps(void **state) {
    (void)state;
    const bg_optimizer_config_t cfg = adam_config(0.01);
    double want_p[5], want_m[5], want_v[5];
    for (int steps = 1; steps <= 3; steps++) {
        adam_reference(&cfg.adam, steps, 5, vector_p0, vector_grads, want_p, want_m, want_v);
        trajectory_t out = run_steps(BG_F64, &cfg, steps, 5, vector_p0, vector_grads);
        for (int i = 0; i < 5; i++) {
            expect_near(out.param[i], want_p[i], 1e-14);
            expect_near(out.state[0][i], want_m[i], 1e-15);
            expect_near(out.state[1][i], want_v[i], 1e-15);
        }
    }
    /* One value worked by hand: p = 0.5, g = 0.2, -0.4 over two steps.
     * m1 = 0.02, v1 = 4e-5, p1 = 0.5 - 0.01 * 0.2 / (0.2 + 1e-8)
     * m2 = 0.018 - 0.04 = -0.022, v2 = 0.999 * 4e-5 + 0.001 * 0.16 = 1.9996e-4
     * p2 = p1 + 0.01 / 0.19 * 0.022 / (sqrt(1.9996e-4 / 0.001999) + 1e-8) */
    const double p1 = 0.5 - 0.01 * 0.2 / (0.2 + 1e-8);
    const double p2 = p1 + 0.01 / 0.19 * 0.022 / (sqrt(1.9996e-4 / 0.001999) + 1e-8);
    trajectory_t two = run_steps(BG_F64, &cfg, 2, 5, vector_p0, vector_grads);
    expect_near(two.state[0][0], -0.022, 1e-15);
    expect_near(two.state[1][0], 1.9996e-4, 1e-17);
    expect_near(two.param[0], p2, 1e-14);
    /* Worked out: p1 = 0.4900000005, p2 = 0.4936610357. */
    expect_near(p2, 0.4936610357, 1e-10);
}

static void test_adam_weight_decay(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = adam_config(0.02);
    cfg.adam.weight_decay = 0.05;
    cfg.adam.beta1 = 0.8;
    cfg.adam.beta2 = 0.99;
    cfg.adam.eps = 1e-6;
    double want_p[5], want_m[5], want_v[5];
    adam_reference(&cfg.adam, 4, 5, vector_p0, vector_grads, want_p, want_m, want_v);
    trajectory_t out = run_steps(BG_F64, &cfg, 4, 5, vector_p0, vector_grads);
    for (int i = 0; i < 5; i++) {
        expect_near(out.param[i], want_p[i], 1e-14);
        expect_near(out.state[0][i], want_m[i], 1e-15);
        expect_near(out.state[1][i], want_v[i], 1e-15);
    }
    /* Without weight decay the result differs measurably. */
    bg_adam_config_t plain = cfg.adam;
    plain.weight_decay = 0;
    double other_p[5];
    adam_reference(&plain, 4, 5, vector_p0, vector_grads, other_p, want_m, want_v);
    assert_true(fabs(other_p[2] - out.param[2]) > 1e-4);
}

static void test_adam_float(void **state) {
    (void)state;
    const bg_optimizer_config_t cfg = adam_config(0.01);
    double want_p[5], want_m[5], want_v[5];
    adam_reference(&cfg.adam, 3, 5, vector_p0, vector_grads, want_p, want_m, want_v);
    trajectory_t out = run_steps(BG_F32, &cfg, 3, 5, vector_p0, vector_grads);
    for (int i = 0; i < 5; i++) {
        /* m may cancel, so its rounding scales with the gradients; v is a sum
         * of positive terms and keeps float's relative precision. */
        double grad_scale = 0;
        for (int t = 0; t < 3; t++) grad_scale = fmax(grad_scale, fabs(vector_grads[t][i]));
        expect_near(out.param[i], want_p[i], 1e-6 * (1 + fabs(want_p[i])));
        expect_near(out.state[0][i], want_m[i], 1e-6 * grad_scale);
        expect_near(out.state[1][i], want_v[i], 1e-6 * want_v[i]);
    }
}

/* Adam's first step is lr * g / (|g| + eps): a move of lr against the sign
 * of the gradient whatever its size, when |g| >> eps. In float this holds
 * only if 1 - beta2 is formed in double as PyTorch does: 1 - (float)0.999 is
 * 1.3e-5 too small, which makes the step 6.5e-6 too long. */
static void test_adam_first_step_is_lr(void **state) {
    (void)state;
    const double lr = 1e-3;
    const bg_optimizer_config_t cfg = adam_config(lr);
    /* Parameters at 0 so that float holds the step without rounding it. */
    const double p0[6] = {0, 0, 0, 0, 0, 0};
    const double g[1][MAX_COUNT] = {{0.05, -0.05, 7, -250, 1, -0.5}};
    const bg_dtype_t dtypes[2] = {BG_F64, BG_F32};
    for (int d = 0; d < 2; d++) {
        trajectory_t out = run_steps(dtypes[d], &cfg, 1, 6, p0, g);
        for (int i = 0; i < 6; i++) {
            const double delta = out.param[i] - p0[i];
            expect_near(fabs(delta), lr, 1e-6 * lr);
            assert_true(delta * g[0][i] < 0);
        }
    }
}

/* One Adam step with a zero gradient from m = `m0` (v = 1), on `be`: the m
 * it leaves. */
static double adam_decay_once(bg_backend_t *be, double m0) {
    const bg_optimizer_config_t cfg = adam_config(1e-3);
    const double param0 = 1, grad0 = 0, v0 = 1;
    void *param = NULL, *grad = NULL, *state[2] = {NULL, NULL};
    /* No cmocka asserts here: this also runs off the test's thread. */
    bg_status_t st = bg_backend_alloc_elems(be, 1, &param);
    if (st == BG_OK) st = bg_backend_alloc_elems(be, 1, &grad);
    for (int i = 0; i < 2 && st == BG_OK; i++) st = bg_backend_alloc_elems(be, 1, &state[i]);
    if (st == BG_OK) st = bg_backend_upload_doubles(be, param, &param0, 1);
    if (st == BG_OK) st = bg_backend_upload_doubles(be, grad, &grad0, 1);
    if (st == BG_OK) st = bg_backend_upload_doubles(be, state[0], &m0, 1);
    if (st == BG_OK) st = bg_backend_upload_doubles(be, state[1], &v0, 1);
    if (st == BG_OK) st = bg_optimizer_update(&cfg, be, 2, 1, param, grad, state);
    double m = NAN;
    if (st == BG_OK && bg_backend_download_doubles(be, &m, state[0], 1) != BG_OK) m = NAN;
    be->ops->free(be, param);
    be->ops->free(be, grad);
    be->ops->free(be, state[0]);
    be->ops->free(be, state[1]);
    return m;
}

typedef struct decay_job {
    bg_backend_t *be;
    double m0, m;
} decay_job_t;

static void *decay_on_thread(void *arg) {
    decay_job_t *job = arg;
    job->m = adam_decay_once(job->be, job->m0);
    return NULL;
}

/* A CPU backend flushes subnormals to 0 (an op on them costs a hundred
 * cycles; decaying optimizer state reaches them): Adam's m decays from the
 * smallest normal value to exactly 0, not to a subnormal, on the thread that
 * created the backend and on a thread started after, as a pipeline's device
 * threads are. A normal m decays as before. */
static void test_adam_flushes_subnormals(void **state) {
    (void)state;
#if !defined(__SSE__) && !defined(__aarch64__)
    skip(); /* the backend flushes only on x86 and 64-bit Arm */
#endif
    const bg_dtype_t dtypes[2] = {BG_F32, BG_F64};
    const double smallest[2] = {FLT_MIN, DBL_MIN};
    for (int d = 0; d < 2; d++) {
        bg_backend_t *be = backend_create(dtypes[d]);
        assert_true(adam_decay_once(be, smallest[d]) == 0.0);
        expect_near(adam_decay_once(be, 1e-3), 0.9e-3, 1e-9);
        decay_job_t job = {.be = be, .m0 = smallest[d], .m = NAN};
        pthread_t thread;
        assert_int_equal(pthread_create(&thread, NULL, decay_on_thread, &job), 0);
        assert_int_equal(pthread_join(thread, NULL), 0);
        assert_true(job.m == 0.0);
        bg_backend_destroy(be);
    }
}

/* ---- configuration ---- */

static void test_kind_parse(void **state) {
    (void)state;
    bg_optimizer_kind_t kind = BG_OPTIMIZER_ADAM;
    assert_int_equal(bg_optimizer_kind_parse("sgd", &kind), BG_OK);
    assert_int_equal(kind, BG_OPTIMIZER_SGD);
    assert_int_equal(bg_optimizer_kind_parse("adam", &kind), BG_OK);
    assert_int_equal(kind, BG_OPTIMIZER_ADAM);
    assert_string_equal(bg_optimizer_kind_name(BG_OPTIMIZER_SGD), "sgd");
    assert_string_equal(bg_optimizer_kind_name(BG_OPTIMIZER_ADAM), "adam");

    const char *bad[] = {"Adam", "SGD", "adamw", "", "sgd "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bg_error_clear();
        kind = BG_OPTIMIZER_SGD;
        assert_int_equal(bg_optimizer_kind_parse(bad[i], &kind), BG_ERR_INVALID);
        assert_int_equal(kind, BG_OPTIMIZER_SGD);
        char quoted[32];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        if (strstr(bg_error_message(), quoted) == NULL)
            fail_msg("message \"%s\" does not name %s", bg_error_message(), quoted);
    }
}

static void test_state_buffers(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = adam_config(1e-3);
    assert_int_equal(bg_optimizer_state_buffers(&cfg), 2);
    cfg = sgd_config(0.1);
    assert_int_equal(bg_optimizer_state_buffers(&cfg), 0);
    cfg.sgd.weight_decay = 0.1;
    assert_int_equal(bg_optimizer_state_buffers(&cfg), 0);
    cfg.sgd.momentum = 0.9;
    assert_int_equal(bg_optimizer_state_buffers(&cfg), 1);
}

static void test_set_lr(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = adam_config(1e-3);
    bg_optimizer_set_lr(&cfg, 0.5);
    expect_near(cfg.adam.lr, 0.5, 0);
    expect_near(bg_optimizer_lr(&cfg), 0.5, 0);
    expect_near(cfg.sgd.lr, 0.01, 0);
    cfg.kind = BG_OPTIMIZER_SGD;
    bg_optimizer_set_lr(&cfg, 0.25);
    expect_near(cfg.sgd.lr, 0.25, 0);
    expect_near(cfg.adam.lr, 0.5, 0);
}

/* ---- learning-rate schedules ---- */

/* Hand values: lr 0.1, 4 warmup steps, 10 steps in all (6 of decay), down
 * to 0.01; cosine at e of 6 steps of decay is 0.01 + 0.09 (1 + cos(pi e /
 * 6)) / 2. */
static void test_lr_schedules(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = sgd_config(0.1);
    for (int t = 1; t <= 12; t++) expect_near(bg_optimizer_lr_at(&cfg, t), 0.1, 0);
    cfg.schedule = (bg_lr_schedule_t){BG_LR_CONSTANT, 4, 10, 0.01};
    static const double warmup[4] = {0.025, 0.05, 0.075, 0.1};
    for (int t = 1; t <= 4; t++) expect_near(bg_optimizer_lr_at(&cfg, t), warmup[t - 1], 1e-16);
    expect_near(bg_optimizer_lr_at(&cfg, 5), 0.1, 0);
    expect_near(bg_optimizer_lr_at(&cfg, 11), 0.1, 0); /* constant: past the end too */
    cfg.schedule.kind = BG_LR_COSINE;
    for (int t = 1; t <= 4; t++) expect_near(bg_optimizer_lr_at(&cfg, t), warmup[t - 1], 1e-16);
    static const double cosine[6] = {0.1,    0.0939711431702997, 0.0775, 0.055,
                                     0.0325, 0.0160288568297003};
    for (int e = 0; e < 6; e++) expect_near(bg_optimizer_lr_at(&cfg, 5 + e), cosine[e], 1e-15);
    expect_near(bg_optimizer_lr_at(&cfg, 11), 0.01, 0);
    expect_near(bg_optimizer_lr_at(&cfg, 1000), 0.01, 0);
    cfg.schedule.kind = BG_LR_LINEAR;
    static const double linear[6] = {0.1, 0.085, 0.07, 0.055, 0.04, 0.025};
    for (int e = 0; e < 6; e++) expect_near(bg_optimizer_lr_at(&cfg, 5 + e), linear[e], 1e-16);
    expect_near(bg_optimizer_lr_at(&cfg, 11), 0.01, 0);
    /* Without warmup the decay starts at step 1; with no step left for it,
     * the warmup ends at min_lr. */
    cfg.schedule = (bg_lr_schedule_t){BG_LR_COSINE, 0, 10, 0};
    expect_near(bg_optimizer_lr_at(&cfg, 1), 0.1, 0);
    expect_near(bg_optimizer_lr_at(&cfg, 6), 0.05, 1e-16);
    cfg.schedule = (bg_lr_schedule_t){BG_LR_LINEAR, 4, 4, 0.01};
    expect_near(bg_optimizer_lr_at(&cfg, 4), 0.1, 0);
    expect_near(bg_optimizer_lr_at(&cfg, 5), 0.01, 0);
    /* Adam's rate the same way. */
    cfg = adam_config(0.2);
    cfg.schedule = (bg_lr_schedule_t){BG_LR_CONSTANT, 4, 10, 0};
    expect_near(bg_optimizer_lr_at(&cfg, 2), 0.1, 0);
}

/* An update takes its step's rate: plain SGD with gradients of 1 over the
 * ten steps above moves a parameter by their sum, 0.25 of warmup and 0.375
 * of cosine (symmetric about 0.055), from 1 to 0.375. */
static void test_update_follows_schedule(void **state) {
    (void)state;
    bg_optimizer_config_t cfg = sgd_config(0.1);
    cfg.schedule = (bg_lr_schedule_t){BG_LR_COSINE, 4, 10, 0.01};
    const double p0[1] = {1};
    double g[MAX_STEPS][MAX_COUNT];
    for (int t = 0; t < MAX_STEPS; t++) g[t][0] = 1;
    const trajectory_t out = run_steps(BG_F64, &cfg, 10, 1, p0, (const double(*)[MAX_COUNT])g);
    expect_near(out.param[0], 0.375, 1e-15);
}

static void test_lr_schedule_names(void **state) {
    (void)state;
    bg_lr_schedule_kind_t kind = BG_LR_CONSTANT;
    check_ok(bg_lr_schedule_kind_parse("cosine", &kind));
    assert_int_equal(kind, BG_LR_COSINE);
    check_ok(bg_lr_schedule_kind_parse("linear", &kind));
    assert_int_equal(kind, BG_LR_LINEAR);
    check_ok(bg_lr_schedule_kind_parse("constant", &kind));
    assert_int_equal(kind, BG_LR_CONSTANT);
    assert_int_equal(bg_lr_schedule_kind_parse("Cosine", &kind), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "expected constant, cosine or linear"));
    assert_string_equal(bg_lr_schedule_kind_name(BG_LR_COSINE), "cosine");
}

/* ---- gradient norms (clipping) ---- */

/* square_sum adds the squares in double, in index order: exact for
 * values whose squares double holds, and past float's range; on both
 * element types. */
static void test_square_sum(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        bg_backend_t *be = backend_create(t == 0 ? BG_F32 : BG_F64);
        enum { N = 5 };
        const double values[N] = {1, -2, 3, 0.5, 1e20}; /* 1e40 is past float */
        void *x = NULL;
        check_ok(bg_backend_alloc_elems(be, N, &x));
        check_ok(bg_backend_upload_doubles(be, x, values, N));
        double sum = -1;
        check_ok(be->ops->square_sum(be, N - 1, x, &sum));
        expect_near(sum, 14.25, 0);
        check_ok(be->ops->square_sum(be, N, x, &sum));
        const double big = t == 0 ? (double)1e20f : 1e20; /* as stored */
        expect_near(sum, 14.25 + big * big, 1e24);
        check_ok(be->ops->square_sum(be, 0, x, &sum));
        expect_near(sum, 0, 0);
        be->ops->free(be, x);
        /* 1, 2, ..., 21: two rounds of the eight running sums and a tail
         * of five; 21 x 22 x 43 / 6 = 3311. */
        double ladder[21];
        for (int i = 0; i < 21; i++) ladder[i] = i + 1;
        check_ok(bg_backend_alloc_elems(be, 21, &x));
        check_ok(bg_backend_upload_doubles(be, x, ladder, 21));
        check_ok(be->ops->square_sum(be, 21, x, &sum));
        expect_near(sum, 3311, 0);
        be->ops->free(be, x);
        bg_backend_destroy(be);
    }
}

/* Bad learning rates are refused before anything is touched; lr = 0 is a
 * valid no-op step. */
static void test_update_rejects_bad_lr(void **state) {
    (void)state;
    bg_backend_t *be = backend_create(BG_F64);
    const double p0[2] = {1, 2}, g[2] = {0.5, -0.5};
    void *param = NULL, *grad = NULL, *buffers[2] = {NULL, NULL};
    check_ok(bg_backend_alloc_elems(be, 2, &param));
    check_ok(bg_backend_alloc_elems(be, 2, &grad));
    check_ok(bg_backend_alloc_elems(be, 2, &buffers[0]));
    check_ok(bg_backend_alloc_elems(be, 2, &buffers[1]));
    check_ok(bg_backend_upload_doubles(be, param, p0, 2));
    check_ok(bg_backend_upload_doubles(be, grad, g, 2));

    const double bad[] = {NAN, -0.1, INFINITY, -INFINITY};
    for (int kind = 0; kind < 2; kind++) {
        bg_optimizer_config_t cfg = kind == 0 ? sgd_config(0.1) : adam_config(0.1);
        cfg.sgd.momentum = 0.9;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            bg_optimizer_set_lr(&cfg, bad[i]);
            bg_error_clear();
            assert_int_equal(bg_optimizer_update(&cfg, be, 1, 2, param, grad, buffers),
                             BG_ERR_INVALID);
            assert_non_null(strstr(bg_error_message(), "learning rate"));
        }
        bg_optimizer_set_lr(&cfg, 0);
        check_ok(bg_optimizer_update(&cfg, be, 1, 2, param, grad, buffers));
        double p[2];
        check_ok(bg_backend_download_doubles(be, p, param, 2));
        expect_near(p[0], 1, 0);
        expect_near(p[1], 2, 0);
        /* Step numbers count from 1. */
        assert_int_equal(bg_optimizer_update(&cfg, be, 0, 2, param, grad, buffers),
                         BG_ERR_INTERNAL);
        check_ok(be->ops->zero(be, buffers[0], 2));
        check_ok(be->ops->zero(be, buffers[1], 2));
    }
    be->ops->free(be, param);
    be->ops->free(be, grad);
    be->ops->free(be, buffers[0]);
    be->ops->free(be, buffers[1]);
    bg_backend_destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_plain),
        cmocka_unit_test(test_sgd_weight_decay),
        cmocka_unit_test(test_sgd_momentum_dampening),
        cmocka_unit_test(test_sgd_nesterov),
        cmocka_unit_test(test_sgd_momentum_weight_decay_vector),
        cmocka_unit_test(test_adam_three_steps),
        cmocka_unit_test(test_adam_weight_decay),
        cmocka_unit_test(test_adam_float),
        cmocka_unit_test(test_adam_first_step_is_lr),
        cmocka_unit_test(test_adam_flushes_subnormals),
        cmocka_unit_test(test_kind_parse),
        cmocka_unit_test(test_state_buffers),
        cmocka_unit_test(test_set_lr),
        cmocka_unit_test(test_update_rejects_bad_lr),
        cmocka_unit_test(test_lr_schedules),
        cmocka_unit_test(test_update_follows_schedule),
        cmocka_unit_test(test_lr_schedule_names),
        cmocka_unit_test(test_square_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
