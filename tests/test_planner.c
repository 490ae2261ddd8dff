/* The planner (stages/planner.h): stage times from a hand-made profile,
 * the --microbatches auto / --schedule auto search against evaluating every
 * candidate, and simulator costs from a plan against the theoretical
 * bubble. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "planner.h"
#include "profile_impl.h"
#include "report.h"
#include "support/models.h"

static const char origin_cnn[] = BG_TEST_ORIGIN_CNN;

/* Layers: 0 flatten, 1 dense, 2 dense, 3 softmax_cross_entropy. */
static const char small_mlp[] = "input channels=1 height=1 width=8\n"
                                "flatten\n"
                                "dense units=16\n"
                                "dense units=10\n"
                                "softmax_cross_entropy\n";

static bg_model_spec_t *parse(const char *text) {
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("test", text, strlen(text), &spec), BG_OK);
    return spec;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 + 1e-9 * fabs(b); }

/* A profile of small_mlp at micro-batch `batch`, in milliseconds: flatten
 * free; dense 1: F 1, dX 0.5, dW 1.5; dense 2: F 1, dX 1, dW 1; the loss
 * free. Split at layer 2 the stages are equal (F 1, B 2 each; stage 0 never
 * runs layer 0's dX, which is 0 anyway). */
static bg_layer_profile_t mlp_layers[4] = {
    {.forward_s = 0},
    {.forward_s = 1e-3, .backward_data_s = 0.5e-3, .backward_weights_s = 1.5e-3},
    {.forward_s = 1e-3, .backward_data_s = 1e-3, .backward_weights_s = 1e-3},
    {.forward_s = 0},
};

static bg_profile_t mlp_profile(int64_t batch, bg_layer_profile_t *layers) {
    bg_profile_t p = {.layers = 4, .batch = batch, .copy_bytes_per_s = 8e9, .layer = layers};
    snprintf(p.device, sizeof p.device, "cpu");
    return p;
}

/* k CPU cores as the cost model sees them, named cpu:0 .. cpu:k-1. */
static void cpu_cores(bg_cost_device_t *devices, int k) {
    for (int d = 0; d < k; d++) {
        devices[d] = (bg_cost_device_t)BG_COST_DEVICE_CPU_CORE_INIT;
        snprintf(devices[d].name, sizeof devices[d].name, "cpu:%d", d);
    }
}

static bg_plan_request_t request_for(const bg_model_spec_t *spec, const bg_cost_device_t *devices,
                                     int k, int m, int64_t batch) {
    bg_plan_request_t r = BG_PLAN_REQUEST_INIT;
    r.spec = spec;
    r.devices = k;
    r.microbatches = m;
    r.batch = batch;
    r.device = devices;
    return r;
}

/* The plan of `spec` on two `devices` at batch 64, M = 1, priced from
 * `profile`, split at layer `cut`. */
static bg_plan_t *profiled_split(const bg_model_spec_t *spec, const bg_cost_device_t *devices,
                                 const bg_profile_t *profile, int cut) {
    const int split[] = {cut};
    bg_plan_request_t r = request_for(spec, devices, 2, 1, 64);
    r.profile = profile;
    r.link = bg_plan_profile_link(profile);
    r.split = split;
    bg_plan_t *plan = NULL;
    assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
    return plan;
}

/* A profile times each layer in a stage of the whole model, where the
 * origin CNN's relu (layer 1) costs nothing: its convolution does its
 * forward, the max-pool after it its dX. A stage cut between them runs
 * that pass itself, priced as the analytic model does (0.12 and 0.35 ns a
 * value on a CPU core, 21,632 values a sample, 64 samples): split at 1,
 * stage 1's forward; split at 2, stage 0's backward. Until 2026-12-06 both
 * were the profile's sums alone, and the two splits' stage 1 the same (a
 * review). */
static void test_profile_prices_a_cut_relu(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    assert_int_equal(spec->num_layers, 8);
    bg_layer_profile_t layers[8];
    memset(layers, 0, sizeof layers);
    for (int l = 0; l < 8; l++) {
        layers[l].forward_s = l == 1 ? 0 : 1e-3;
        layers[l].backward_data_s = l == 1 ? 0 : 1e-3;
    }
    layers[0].backward_weights_s = layers[4].backward_weights_s = 2e-3;
    layers[6].backward_weights_s = 2e-3;
    bg_profile_t profile = {.layers = 8, .batch = 64, .copy_bytes_per_s = 8e9, .layer = layers};
    snprintf(profile.device, sizeof profile.device, "cpu");
    bg_cost_device_t devices[2];
    cpu_cores(devices, 2);
    const double values = 64.0 * 32 * 26 * 26;
    for (int cut = 1; cut <= 3; cut++) {
        bg_plan_t *plan = profiled_split(spec, devices, &profile, cut);
        const bg_partition_stage_t *s0 = &plan->partition->stage[0],
                                   *s1 = &plan->partition->stage[1];
        double forward[2] = {0, 0}, backward[2] = {0, 0};
        for (int l = 0; l < 8; l++) {
            forward[l >= cut] += layers[l].forward_s;
            backward[l >= cut] +=
                (l > 0 ? layers[l].backward_data_s : 0) + layers[l].backward_weights_s;
        }
        /* Within a nanosecond: the model keeps a value's FLOP-equivalents
         * in whole FLOPs a sample (207,667 of 207,667.2 for the forward). */
        assert_true(fabs(s0->time.forward - forward[0]) < 1e-9);
        assert_true(fabs(s1->time.forward - forward[1] - (cut == 1 ? 0.12e-9 * values : 0)) < 1e-9);
        assert_true(fabs(s0->time.backward - backward[0] - (cut == 2 ? 0.35e-9 * values : 0)) <
                    1e-9);
        assert_true(fabs(s1->time.backward - backward[1]) < 1e-9);
        /* And the pass is no small part of these stages. */
        assert_true(0.12e-9 * values > 1e-4 && 0.35e-9 * values > 4e-4);
        bg_plan_destroy(plan);
    }
    /* A max-pool profiled at 10 us a pass: the relu's dX, cut from it, at
     * no more than its 20 us, so stage 0 ending at the relu costs no more
     * than ending after the max-pool. */
    layers[2].forward_s = layers[2].backward_data_s = 10e-6;
    double compute[2];
    for (int cut = 2; cut <= 3; cut++) {
        bg_plan_t *plan = profiled_split(spec, devices, &profile, cut);
        const bg_cost_time_t *t = &plan->partition->stage[0].time;
        compute[cut - 2] = t->forward + t->backward;
        bg_plan_destroy(plan);
    }
    assert_true(fabs(compute[0] - (1e-3 + 2e-3 + 20e-6)) < 1e-9);
    assert_true(compute[0] <= compute[1]);
    bg_model_spec_destroy(spec);
}

/* Stage times are the profile's sums over each stage's layers, scaled from
 * the profile's micro-batch to the plan's (updates are per step, unscaled);
 * the first stage leaves out layer 0's dX. */
static void test_profile_stage_times(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_layer_profile_t layers[4];
    memcpy(layers, mlp_layers, sizeof layers);
    layers[0].backward_data_s = 0.25e-3; /* counted nowhere: stage 0 does not run it */
    layers[1].update_s = 0.125e-3;
    layers[2].update_s = 0.0625e-3;
    bg_profile_t profile = mlp_profile(8, layers);
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    const int ms[] = {1, 2, 4, 8};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        for (int given = 0; given < 2; given++) {
            const int split[] = {2};
            bg_plan_request_t r = request_for(spec, devices, 2, ms[i], 64);
            r.profile = &profile;
            r.link = bg_plan_profile_link(&profile);
            r.split = given ? split : NULL;
            bg_plan_t *plan = NULL;
            assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
            const double scale = (64.0 / ms[i]) / 8.0;
            for (int s = 0; s < 2; s++) {
                const bg_partition_stage_t *st = &plan->partition->stage[s];
                assert_int_equal(plan->first_layer[s], st->first_layer);
                double f = 0, b = 0, w = 0, u = 0;
                for (int l = st->first_layer; l < st->last_layer; l++) {
                    f += layers[l].forward_s;
                    if (l > 0) b += layers[l].backward_data_s;
                    b += layers[l].backward_weights_s;
                    w += layers[l].backward_weights_s;
                    u += layers[l].update_s;
                }
                assert_true(close_to(st->time.forward, scale * f));
                assert_true(close_to(st->time.backward, scale * b));
                assert_true(close_to(st->time.weight, scale * w));
                assert_true(close_to(st->time.update, u));
                assert_true(st->time.recompute == 0);
            }
            /* The optimizer step: the slowest device's updates, per step. */
            double u0 = 0, u1 = 0;
            for (int l = 0; l < 4; l++)
                *(l < plan->first_layer[1] ? &u0 : &u1) += layers[l].update_s;
            assert_true(close_to(plan->update_s, u0 > u1 ? u0 : u1));
            assert_true(
                close_to(bg_plan_samples_per_s(plan), 64 / (plan->step_s + plan->update_s)));
            if (given) {
                assert_non_null(plan->request.split);
                assert_int_equal(plan->request.split[0], 2);
            } else {
                assert_null(plan->request.split);
            }
            /* The link is two copies at the profile's memcpy bandwidth. */
            assert_true(close_to(plan->request.link.bytes_per_s, 4e9));
            bg_plan_destroy(plan);
        }
    }
    bg_model_spec_destroy(spec);
}

/* Plans small_mlp on two CPU cores at M micro-batches of a 64-sample batch,
 * split at layer 2 and priced by `profile`, and its simulator costs. */
static void plan_profiled(const bg_model_spec_t *spec, const bg_cost_device_t *devices, int m,
                          const bg_profile_t *profile, bg_plan_t **plan, bg_plan_costs_t **costs) {
    static const int split[] = {2};
    bg_plan_request_t r = request_for(spec, devices, 2, m, 64);
    r.profile = profile;
    r.split = split;
    r.link = bg_plan_profile_link(profile);
    assert_int_equal(bg_plan_create(&r, plan), BG_OK);
    assert_int_equal(bg_plan_costs_create(*plan, costs), BG_OK);
}

/* A profile timed at 8 samples and at 2 and 32 (other sizes): each layer
 * op is exact at a timed size; between two, on the line through them; past
 * the largest, in proportion to it; below the smallest, on the line through
 * the two smallest, kept between the smallest's time in proportion and its
 * time. A range timed as a stage follows its layers' sums from the
 * profile's size. Hand-computed, at micro-batches of 1, 4, 8, 16 and 64. */
static void test_profile_other_sizes(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_layer_profile_t layers[4];
    memcpy(layers, mlp_layers, sizeof layers);
    /* The flatten's dX, never run by stage 0: in no stage's figures, nor
     * in the ratio a range's measured figure is scaled by. */
    layers[0].backward_data_s = 0.25e-3;
    layers[0].at_size[0].backward_data_s = 0.1e-3;
    layers[0].at_size[1].backward_data_s = 0.5e-3;
    /* Dense 1 at 2 and 32 samples (at 8: F 1 ms, dX 0.5, dW 1.5). */
    layers[1].at_size[0] = (bg_layer_at_size_t){0.4e-3, 0.6e-3, 0.05e-3};
    layers[1].at_size[1] = (bg_layer_at_size_t){2.2e-3, 2e-3, 6e-3};
    /* Dense 2 (at 8: 1 ms each): in proportion to the samples. */
    layers[2].at_size[0] = (bg_layer_at_size_t){0.25e-3, 0.25e-3, 0.25e-3};
    layers[2].at_size[1] = (bg_layer_at_size_t){4e-3, 4e-3, 4e-3};
    bg_profile_t profile = mlp_profile(8, layers);
    profile.other_sizes = 2;
    profile.other_size[0] = 2;
    profile.other_size[1] = 32;
    profile.version = 2;
    /* clang-format off */
    bg_stage_profile_t ranges[] = {
        {.first = 0, .last = 2, .slots = 1, .forward_s = 2e-3, .backward_s = 3e-3},
        {.first = 2, .last = 4, .slots = 1, .forward_s = 1e-3, .backward_s = 4e-3},
    };
    /* Dense 1's ops in ms at micro-batches of n samples:
     *   n = 1: below 2, on the line through 2 and 8: F 0.3; dX 0.617, at
     *          most 0.6 (its time at 2); dW -0.19, at least 0.025 (in
     *          proportion to its time at 2);
     *   n = 4: between 2 and 8; n = 8: as timed; n = 16: between 8 and 32;
     *   n = 64: twice its time at 32. */
    const struct { int m; double f, dx, dw; } dense1[] = {
        {64, 0.3, 0.6, 0.025}, {16, 0.6, 0.6 - 0.1 / 3, 0.05 + 1.45 / 3},
        {8, 1, 0.5, 1.5},      {4, 1.4, 1, 3},
        {1, 4.4, 4, 12},
    };
    /* clang-format on */
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    for (size_t i = 0; i < sizeof dense1 / sizeof dense1[0]; i++) {
        const double n = 64.0 / dense1[i].m; /* samples per micro-batch */
        const double f[2] = {dense1[i].f * 1e-3, n / 8 * 1e-3};
        const double w[2] = {dense1[i].dw * 1e-3, n / 8 * 1e-3};
        const double b[2] = {dense1[i].dx * 1e-3 + w[0], 2 * w[1]};
        for (int measured = 0; measured < 2; measured++) {
            profile.stage = measured ? ranges : NULL;
            profile.stage_count = measured ? 2 : 0;
            bg_plan_t *plan = NULL;
            bg_plan_costs_t *c = NULL;
            plan_profiled(spec, devices, dense1[i].m, &profile, &plan, &c);
            for (int s = 0; s < 2; s++) {
                const bg_partition_stage_t *st = &plan->partition->stage[s];
                assert_true(close_to(st->time.weight, w[s]));
                if (measured) {
                    /* The range's figure times its layers' now over then (F
                     * 1 and 1 ms, B 2 and 2 ms at 8 samples). */
                    assert_true(close_to(c->forward[s], ranges[s].forward_s * f[s] / 1e-3));
                    assert_true(close_to(c->backward[s], ranges[s].backward_s * b[s] / 2e-3));
                } else {
                    assert_true(close_to(st->time.forward, f[s]));
                    assert_true(close_to(st->time.backward, b[s]));
                    assert_true(close_to(c->forward[s], f[s]) && close_to(c->backward[s], b[s]));
                }
            }
            bg_plan_costs_destroy(c);
            bg_plan_destroy(plan);
        }
    }
    bg_model_spec_destroy(spec);
}

static void test_request_errors(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    bg_plan_t *plan = NULL;
    bg_plan_request_t r = request_for(spec, devices, 2, 8, 4);
    assert_int_equal(bg_plan_create(&r, &plan), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "8 micro-batches of a batch of 4 samples would "
                                               "leave some micro-batches empty (at most 4)"));
    r = request_for(spec, devices, 2, 3, 64);
    r.schedule = BG_SCHEDULE_INTERLEAVED;
    r.chunks = 2;
    assert_int_equal(bg_plan_create(&r, &plan), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(),
                           "interleaved needs the micro-batch count (M=3) to be "
                           "a multiple of the device count (K=2)"));
    bg_layer_profile_t layers[3] = {{0}};
    bg_profile_t three = {.layers = 3, .batch = 8, .copy_bytes_per_s = 1e9, .layer = layers};
    r = request_for(spec, devices, 2, 4, 64);
    r.profile = &three;
    assert_int_equal(bg_plan_create(&r, &plan), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "cost model: profile of 3 layers for 4"));
    assert_null(plan);
    r = request_for(spec, devices, 0, 4, 64);
    assert_int_equal(bg_plan_create(&r, &plan), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "planner: 0 devices x 1 chunks"));
    r = request_for(spec, NULL, 2, 4, 64);
    assert_int_equal(bg_plan_create(&r, &plan), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "planner: no model or no devices given"));
    assert_null(plan);
    bg_model_spec_destroy(spec);
}

static void test_microbatch_candidates(void **state) {
    (void)state;
    int got[32];
    const int want48[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48};
    int n = bg_plan_microbatch_candidates(48, 1, got, 32);
    assert_int_equal(n, 11);
    for (int i = 0; i < n; i++) assert_int_equal(got[i], want48[i]);
    const int want20[] = {1, 2, 4, 5, 8, 10, 16, 20};
    n = bg_plan_microbatch_candidates(20, 1, got, 3);
    assert_int_equal(n, 8);
    for (int i = 0; i < 3; i++) assert_int_equal(got[i], want20[i]);
    assert_int_equal(bg_plan_microbatch_candidates(1, 1, got, 32), 1);
    assert_int_equal(got[0], 1);
    /* Interleaved on K = 3 needs multiples of 3: 3, 6, 12, 24 and 48 join
     * the divisors and powers of two of 64. */
    const int want64[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    n = bg_plan_microbatch_candidates(64, 3, got, 32);
    assert_int_equal(n, 12);
    for (int i = 0; i < n; i++) assert_int_equal(got[i], want64[i]);
}

/* The search keeps the fitting candidate of the highest simulated
 * throughput (the first in order among equals), as simulating every
 * candidate finds. */
static void check_search(const bg_plan_request_t *r, unsigned flags) {
    bg_plan_t *chosen = NULL;
    assert_int_equal(bg_plan_search(r, flags, &chosen), BG_OK);
    int ms[64];
    int m_count =
        (flags & BG_PLAN_SEARCH_MICROBATCHES)
            ? bg_plan_microbatch_candidates(r->batch, bg_plan_microbatch_multiple(r, flags), ms, 64)
            : (ms[0] = r->microbatches, 1);
    const bg_schedule_kind_t order[] = {BG_SCHEDULE_1F1B, BG_SCHEDULE_GPIPE, BG_SCHEDULE_ZB_H1,
                                        BG_SCHEDULE_INTERLEAVED};
    int kinds = (flags & BG_PLAN_SEARCH_SCHEDULE) ? (r->chunks > 1 ? 4 : 3) : 1;
    double best = INFINITY; /* the shortest simulated step */
    int best_m = 0, any_fit = 0;
    bg_schedule_kind_t best_kind = r->schedule;
    for (int i = 0; i < m_count; i++) {
        for (int k = 0; k < kinds; k++) {
            bg_plan_request_t v = *r;
            v.microbatches = ms[i];
            if (flags & BG_PLAN_SEARCH_SCHEDULE) {
                v.schedule = order[k];
                v.chunks = order[k] == BG_SCHEDULE_INTERLEAVED ? r->chunks : 1;
            }
            bg_plan_t *p = NULL;
            if (bg_plan_create(&v, &p) != BG_OK) continue;
            const double step = p->simulated_step_s;
            if (p->partition->fits) {
                /* The plan's simulated step is a simulation's. */
                double again = 0;
                assert_int_equal(bg_plan_simulated_step(p, &again), BG_OK);
                assert_true(step > 0 && again == step);
                any_fit = 1;
                assert_true(step >= chosen->simulated_step_s * (1 - 1e-9));
                /* Within rounding of each other the earlier stays. */
                if (step < best * (1 - 1e-9)) {
                    best = step;
                    best_m = ms[i];
                    best_kind = v.schedule;
                }
            }
            bg_plan_destroy(p);
        }
    }
    assert_true(any_fit);
    assert_true(chosen->partition->fits);
    assert_int_equal(chosen->request.microbatches, best_m);
    assert_int_equal(chosen->request.schedule, best_kind);
    assert_true(chosen->simulated_step_s == best);
    bg_plan_destroy(chosen);
}

static void test_search(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_device_t devices[4];
    cpu_cores(devices, 4);
    const size_t caps[] = {0, 20u << 20, 14u << 20};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        for (int d = 0; d < 4; d++) devices[d].memory_bytes = caps[c];
        for (int k = 2; k <= 4; k += 2) {
            bg_plan_request_t r = request_for(spec, devices, k, 1, 64);
            check_search(&r, BG_PLAN_SEARCH_MICROBATCHES);
            check_search(&r, BG_PLAN_SEARCH_MICROBATCHES | BG_PLAN_SEARCH_SCHEDULE);
            r.microbatches = 8;
            check_search(&r, BG_PLAN_SEARCH_SCHEDULE);
            /* --chunks is interleaved's: the others still compete, also
             * where interleaved cannot run (M = 1 < K). */
            r.chunks = 2;
            check_search(&r, BG_PLAN_SEARCH_MICROBATCHES | BG_PLAN_SEARCH_SCHEDULE);
            r.microbatches = 1;
            if (caps[c] == 0) check_search(&r, BG_PLAN_SEARCH_SCHEDULE);
        }
    }
    /* A memory cap that rules out the small M: the choice still fits. */
    for (int d = 0; d < 2; d++) devices[d].memory_bytes = 20u << 20;
    bg_plan_request_t r = request_for(spec, devices, 2, 1, 64);
    bg_plan_t *plan = NULL;
    assert_int_equal(bg_plan_search(&r, BG_PLAN_SEARCH_MICROBATCHES, &plan), BG_OK);
    assert_true(plan->partition->fits);
    assert_true(plan->request.microbatches > 1);
    bg_plan_destroy(plan);
    /* Nothing fits: the least overflow, marked as not fitting. */
    for (int d = 0; d < 2; d++) devices[d].memory_bytes = 1u << 20;
    assert_int_equal(bg_plan_search(&r, BG_PLAN_SEARCH_MICROBATCHES, &plan), BG_OK);
    assert_false(plan->partition->fits);
    bg_plan_destroy(plan);
    plan = NULL;
    assert_int_equal(bg_plan_search(&r, 4, &plan), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "planner: unknown search flags 0x4"));
    r.batch = 0;
    assert_int_equal(bg_plan_search(&r, BG_PLAN_SEARCH_MICROBATCHES, &plan), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "planner: a batch of 0 samples"));
    assert_null(plan);
    bg_model_spec_destroy(spec);
}

/* The least step's search over a model of 500 equal dense layers (each
 * with its gelu), as plan has it for `--devices cpu:8 --microbatches 64`:
 * the least total is the same at every cap, so every gap of its front has
 * the same bound. With --chunks 8 it ends at its probe limit (before it,
 * 1,000 such layers took 1,716 probes and 30 s); with --chunks 4 the
 * bound's 1/K term ends it at once (without the term: 64 probes, the
 * limit); with one chunk it is exact and ends by its bound. The 1/K term
 * ends it only where a split's busiest device comes within the tolerance
 * of 1/K of the total, which depends on the layers' prices: of 32 units
 * with a gelu they do; of 16 with a relu they did until relu was priced by
 * its time (2026-12-06), and now probe to the limit, as plain dense layers
 * did before. */
static void test_least_step_probes(void **state) {
    (void)state;
    size_t size = 64 + 500 * 40, at = 0;
    char *text = malloc(size);
    assert_non_null(text);
    at += (size_t)snprintf(text + at, size - at, "input channels=1 height=8 width=8\nflatten\n");
    for (int l = 0; l < 500; l++)
        at += (size_t)snprintf(text + at, size - at, "dense units=32 activation=gelu\n");
    snprintf(text + at, size - at, "dense units=10\nsoftmax_cross_entropy\n");
    bg_model_spec_t *spec = parse(text);
    free(text);
    bg_cost_device_t devices[8];
    cpu_cores(devices, 8);
    static const int chunk_counts[] = {1, 4, 8};
    for (int i = 0; i < 3; i++) {
        const int chunks = chunk_counts[i];
        bg_plan_request_t r = request_for(spec, devices, 8, 64, 64);
        r.schedule = chunks > 1 ? BG_SCHEDULE_INTERLEAVED : BG_SCHEDULE_1F1B;
        r.chunks = chunks;
        bg_plan_t *p = NULL;
        assert_int_equal(bg_plan_create(&r, &p), BG_OK);
        bg_partition_config_t pc = p->config;
        pc.memory_check = BG_PARTITION_CHECK_STAGES;
        pc.slowest = NULL;
        bg_partition_t *slowest = NULL, *least = NULL;
        pc.objective = BG_PARTITION_SLOWEST_STAGE;
        assert_int_equal(bg_partition_create(&pc, &slowest), BG_OK);
        pc.objective = BG_PARTITION_LEAST_STEP;
        pc.step_tolerance = 1e-3;
        assert_int_equal(bg_partition_create(&pc, &least), BG_OK);
        assert_true(least->fits);
        assert_true(bg_partition_step_seconds(least, &pc) <=
                    bg_partition_step_seconds(slowest, &pc) * (1 + 1e-12));
        print_message("V = %d: %d probes\n", chunks, least->front_probes);
        if (chunks < 8)
            assert_true(least->front_probes < BG_PARTITION_FRONT_PROBES_CHUNKED / 4);
        else
            assert_int_equal(least->front_probes, BG_PARTITION_FRONT_PROBES_CHUNKED);
        assert_int_equal(slowest->front_probes, 0);
        bg_partition_destroy(slowest);
        bg_partition_destroy(least);
        bg_plan_destroy(p);
    }
    bg_model_spec_destroy(spec);
}

/* What bg_plan_search_progress reported: each call's figures. */
typedef struct progress_calls {
    int count;
    int64_t done[64], total[64];
} progress_calls_t;

static void record_progress(void *ctx, int64_t done, int64_t total) {
    progress_calls_t *c = ctx;
    assert_true(c->count < 64);
    c->done[c->count] = done;
    c->total[c->count] = total;
    c->count++;
}

/* The search with progress: the same plan as without; a call before the
 * first combination and one after each, counting the micro-batches planned
 * (each count of 64 with each of 1f1b, gpipe and zb-h1), rising to the
 * total. */
static void test_search_progress(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_device_t devices[2];
    cpu_cores(devices, 2);
    bg_plan_request_t r = request_for(spec, devices, 2, 1, 64);
    const unsigned flags = BG_PLAN_SEARCH_MICROBATCHES | BG_PLAN_SEARCH_SCHEDULE;
    progress_calls_t calls = {0};
    bg_plan_t *with = NULL, *without = NULL;
    assert_int_equal(bg_plan_search_progress(&r, flags, record_progress, &calls, &with), BG_OK);
    assert_int_equal(bg_plan_search(&r, flags, &without), BG_OK);
    assert_int_equal(with->request.microbatches, without->request.microbatches);
    assert_int_equal(with->request.schedule, without->request.schedule);
    assert_true(with->simulated_step_s == without->simulated_step_s);
    /* 1, 2, 4, 8, 16, 32, 64: 127 micro-batches, three schedules. */
    assert_int_equal(calls.count, 7 * 3 + 1);
    assert_int_equal(calls.done[0], 0);
    for (int i = 0; i < calls.count; i++) assert_int_equal(calls.total[i], 3 * 127);
    for (int i = 1; i < calls.count; i++) {
        const int m = 1 << ((i - 1) / 3); /* the combination just planned */
        assert_int_equal(calls.done[i] - calls.done[i - 1], m);
    }
    assert_int_equal(calls.done[calls.count - 1], 3 * 127);
    bg_plan_destroy(with);
    bg_plan_destroy(without);
    bg_model_spec_destroy(spec);
}

/* Every split of the origin CNN onto two CPU cores, given, and the
 * planner's: at M = 1 a step is the stages one after the other, and the
 * planner keeps the split of the shortest predicted step (there the least
 * total stage time), whose simulated step beats the slowest-stage split's
 * and is the fastest of all splits; at M = 8 the slowest stage sets the
 * period and its split stays. */
static void test_least_step_split(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_device_t devices[2];
    cpu_cores(devices, 2);
    for (int m = 1; m <= 8; m += 7) {
        bg_plan_request_t r = request_for(spec, devices, 2, m, 64);
        bg_plan_t *chosen = NULL;
        assert_int_equal(bg_plan_create(&r, &chosen), BG_OK);
        assert_true(chosen->partition->fits);
        double fastest = INFINITY, slowest_stage_split = 0;
        int fastest_at = 0;
        for (int at = 1; at < spec->num_layers; at++) {
            r.split = &at;
            bg_plan_t *p = NULL;
            assert_int_equal(bg_plan_create(&r, &p), BG_OK);
            if (p->simulated_step_s < fastest) {
                fastest = p->simulated_step_s;
                fastest_at = at;
            }
            /* The slowest-stage programme's split, as the partition gives it. */
            bg_partition_config_t pc = chosen->config;
            pc.objective = BG_PARTITION_SLOWEST_STAGE;
            bg_partition_t *part = NULL;
            assert_int_equal(bg_partition_create(&pc, &part), BG_OK);
            if (part->stage[1].first_layer == at) slowest_stage_split = p->simulated_step_s;
            bg_partition_destroy(part);
            bg_plan_destroy(p);
        }
        r.split = NULL;
        assert_true(slowest_stage_split > 0);
        if (m == 1) {
            assert_int_equal(chosen->config.objective, BG_PARTITION_LEAST_STEP);
            assert_true(chosen->simulated_step_s < slowest_stage_split * (1 - 1e-3));
            assert_int_equal(chosen->first_layer[1], fastest_at);
            assert_true(chosen->simulated_step_s == fastest);
            /* The split it did not keep, for the explanation. */
            assert_true(chosen->other_split_step_s == slowest_stage_split);
        } else {
            assert_int_equal(chosen->config.objective, BG_PARTITION_SLOWEST_STAGE);
            assert_true(chosen->simulated_step_s == slowest_stage_split);
            /* There the shortest predicted step is the same split: nothing
             * else was simulated. */
            bg_partition_config_t pc = chosen->config;
            pc.objective = BG_PARTITION_LEAST_STEP;
            bg_partition_t *least = NULL;
            assert_int_equal(bg_partition_create(&pc, &least), BG_OK);
            assert_int_equal(least->stage[1].first_layer, chosen->first_layer[1]);
            assert_true(chosen->other_split_step_s == 0);
            bg_partition_destroy(least);
        }
        bg_plan_destroy(chosen);
    }
    bg_model_spec_destroy(spec);
}

/* Six convolutions narrowing from 16 to 4 filters, then dense layers of
 * uneven widths: on four CPU cores at M = 2 the split of the least
 * predicted step is not the slowest stage's, and it simulates slower. The
 * planner then keeps the slowest stage's split and says what the other
 * simulated to: the simulation, not the prediction, decides. */
static const char uneven_model[] = "input channels=3 height=16 width=16\n"
                                   "conv2d filters=16 kernel=3 padding=same activation=relu\n"
                                   "conv2d filters=12 kernel=3 padding=same activation=relu\n"
                                   "conv2d filters=12 kernel=3 padding=same activation=relu\n"
                                   "conv2d filters=8 kernel=3 padding=same activation=relu\n"
                                   "conv2d filters=8 kernel=3 padding=same activation=relu\n"
                                   "conv2d filters=4 kernel=3 padding=same activation=relu\n"
                                   "flatten\n"
                                   "dense units=128 activation=relu\n"
                                   "dense units=256 activation=relu\n"
                                   "dense units=16 activation=relu\n"
                                   "dense units=128 activation=relu\n"
                                   "dense units=16 activation=relu\n"
                                   "dense units=256 activation=relu\n"
                                   "dense units=10\n"
                                   "softmax_cross_entropy\n";

/* r's plan with the n-th host allocation and all after it failing
 * (bg_alloc_fail_after): NULL after checking that the plan failed for
 * memory and made nothing. */
static bg_plan_t *plan_failing_at(const bg_plan_request_t *r, int n) {
    bg_plan_t *p = NULL;
    bg_alloc_fail_after(n);
    const bg_status_t st = bg_plan_create(r, &p);
    bg_alloc_fail_after(-1);
    if (st == BG_OK) return p;
    assert_int_equal(st, BG_ERR_NOMEM);
    assert_null(p);
    return NULL;
}

/* The search for the least predicted step's split has tables of its own;
 * when they do not fit in memory the plan keeps the slowest stage's split,
 * which fits, and says so, rather than failing. Every host allocation of
 * the plan fails in turn (bg_alloc_fail_after: the n-th and all after it):
 * each ends in BG_ERR_NOMEM or a plan, some of those plans are the slowest
 * stage's with the search skipped, and the walk ends with the plan of no
 * failure, which at M = 1 is the least step's. */
static void test_least_step_out_of_memory(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_device_t devices[2];
    cpu_cores(devices, 2);
    bg_plan_request_t r = request_for(spec, devices, 2, 1, 64);
    int skipped = 0, done = 0;
    for (int n = 0; n < 10000 && !done; n++) {
        bg_plan_t *p = plan_failing_at(&r, n);
        if (p == NULL) continue;
        if (p->least_step_skipped) {
            skipped++;
            assert_int_equal(p->config.objective, BG_PARTITION_SLOWEST_STAGE);
            assert_true(p->partition->fits);
            assert_true(p->other_split_step_s == 0);
        } else {
            assert_int_equal(p->config.objective, BG_PARTITION_LEAST_STEP);
            done = 1;
        }
        bg_plan_destroy(p);
    }
    assert_true(done);
    assert_true(skipped > 0);
    bg_model_spec_destroy(spec);
}

/* Interleaved (two stages a device): the least step's search also moves
 * layers between each front point's stages (balance_devices), with
 * allocations of its own. Each failing in turn ends in BG_ERR_NOMEM or a
 * plan that fits, with nothing leaked (the sanitizer build checks), until
 * the plan of no failure, whose search ran. */
static void test_interleaved_least_step_out_of_memory(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_device_t devices[2];
    cpu_cores(devices, 2);
    bg_plan_request_t r = request_for(spec, devices, 2, 4, 64);
    r.schedule = BG_SCHEDULE_INTERLEAVED;
    r.chunks = 2;
    int failed = 0, done = 0;
    for (int n = 0; n < 10000 && !done; n++) {
        bg_plan_t *p = plan_failing_at(&r, n);
        if (p == NULL) {
            failed++;
            continue;
        }
        assert_true(p->partition->fits);
        assert_int_equal(p->partition->stages, 4);
        done = !p->least_step_skipped;
        bg_plan_destroy(p);
    }
    assert_true(done);
    assert_true(failed > 10);
    bg_model_spec_destroy(spec);
}

/* The uneven model on cpu:5 at M = 64, with too many splits to simulate
 * each (14,950 into 5 stages, past BG_PLAN_EVERY_SPLIT_MORE): the least
 * predicted step's split is simulated too, and slower. */
static void test_least_step_simulated_slower(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(uneven_model);
    bg_cost_device_t devices[5];
    cpu_cores(devices, 5);
    bg_plan_request_t r = request_for(spec, devices, 5, 64, 64);
    bg_plan_t *chosen = NULL;
    assert_int_equal(bg_plan_create(&r, &chosen), BG_OK);
    assert_true(chosen->partition->fits);
    assert_int_equal(chosen->config.objective, BG_PARTITION_SLOWEST_STAGE);
    assert_int_equal(chosen->splits_simulated, 0);
    /* The least step's split: predicted faster, a different split... */
    bg_partition_config_t pc = chosen->config;
    pc.objective = BG_PARTITION_LEAST_STEP;
    pc.step_tolerance = 1e-3; /* as the planner asks */
    bg_partition_t *least = NULL;
    assert_int_equal(bg_partition_create(&pc, &least), BG_OK);
    assert_true(bg_partition_step_seconds(least, &pc) <
                bg_partition_step_seconds(chosen->partition, &pc));
    int differs = 0;
    for (int s = 0; s < 5; s++) differs |= least->stage[s].first_layer != chosen->first_layer[s];
    assert_true(differs);
    /* ...whose simulated step, given as a split, is the one the plan
     * reports as the other's, and longer than the chosen. */
    int split[4] = {least->stage[1].first_layer, least->stage[2].first_layer,
                    least->stage[3].first_layer, least->stage[4].first_layer};
    r.split = split;
    bg_plan_t *given = NULL;
    assert_int_equal(bg_plan_create(&r, &given), BG_OK);
    assert_true(given->simulated_step_s == chosen->other_split_step_s);
    assert_true(chosen->other_split_step_s > chosen->simulated_step_s * (1 + 1e-3));
    bg_plan_destroy(given);
    bg_partition_destroy(least);
    bg_plan_destroy(chosen);
    bg_model_spec_destroy(spec);
}

/* Interleaved, V = 2 on cpu:2: a given split is checked per device, its
 * two stages together against the whole device, and a plan that fits so
 * is simulated like any other; the planner's own split keeps each stage
 * within half a device. The origin CNN at M = 4, split 2,4,6: device 0
 * holds the convolution (stage 0) and the dense layer (stage 2), and with
 * exactly what it needs, stage 2 is over half of it. */
static void test_given_split_per_device(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(origin_cnn);
    bg_cost_device_t devices[2];
    cpu_cores(devices, 2);
    bg_plan_request_t r = request_for(spec, devices, 2, 4, 16);
    r.schedule = BG_SCHEDULE_INTERLEAVED;
    r.chunks = 2;
    const int split[] = {2, 4, 6};
    r.split = split;
    bg_plan_t *p = NULL;
    assert_int_equal(bg_plan_create(&r, &p), BG_OK); /* no capacity: the peaks */
    const size_t device0 = bg_partition_device_peak_bytes(p->partition, 0),
                 stage2 = p->partition->stage[2].peak_bytes;
    assert_int_equal(device0, p->partition->stage[0].peak_bytes + stage2);
    assert_true(bg_partition_device_peak_bytes(p->partition, 1) < device0);
    assert_true(stage2 > device0 / 2);
    bg_plan_destroy(p);
    devices[0].memory_bytes = devices[1].memory_bytes = device0;

    assert_int_equal(bg_plan_create(&r, &p), BG_OK);
    assert_int_equal(p->partition->memory_check, BG_PARTITION_CHECK_DEVICES);
    assert_true(p->partition->fits);
    assert_int_equal(p->partition->stage[2].capacity_bytes, device0);
    assert_true(p->simulated_step_s > 0);
    const double given_step = p->simulated_step_s;
    bg_plan_destroy(p);
    /* --schedule auto with the split: interleaved alone takes it. */
    assert_int_equal(bg_plan_search(&r, BG_PLAN_SEARCH_SCHEDULE, &p), BG_OK);
    assert_int_equal(p->request.schedule, BG_SCHEDULE_INTERLEAVED);
    assert_true(p->partition->fits);
    bg_plan_destroy(p);
    devices[0].memory_bytes = device0 - 1;
    assert_int_equal(bg_plan_create(&r, &p), BG_OK);
    assert_false(p->partition->fits);
    assert_int_equal(p->partition->worst_device, 0);
    assert_int_equal(p->partition->overflow_bytes, 1);
    assert_true(p->simulated_step_s == 0);
    bg_plan_destroy(p);

    /* The planner's own split: no split keeps every stage within half its
     * device (the programme's check), so the search per device tries every
     * split, and with the simulation of each that fits so, the plan is at
     * least as fast as the given one. */
    devices[0].memory_bytes = device0;
    r.split = NULL;
    assert_int_equal(bg_plan_create(&r, &p), BG_OK);
    assert_int_equal(p->device_search, BG_PLAN_DEVICES_SEARCHED);
    assert_int_equal(p->partition->memory_check, BG_PARTITION_CHECK_DEVICES);
    assert_true(p->partition->fits);
    assert_true(p->simulated_step_s <= given_step);
    for (int d = 0; d < 2; d++) {
        assert_true(bg_partition_device_peak_bytes(p->partition, d) <= device0);
        assert_int_equal(p->partition->stage[d].capacity_bytes, device0);
    }
    assert_true(p->simulated_step_s > 0);
    bg_plan_destroy(p);
    bg_model_spec_destroy(spec);
}

/* Interleaved, V = 2 on cpu:2, the planner's own split: where no split
 * keeps every stage within half a device, a split may still fit as the
 * devices hold it, two stages each; the plan is then the fastest such
 * split (the search per device), checked per device. Two 4096 x 4096
 * dense layers: whichever stages hold them hold over half a device each,
 * and a device holds one. */
static void test_own_split_per_device(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse("input channels=1 height=28 width=28\n"
                                  "flatten\n"
                                  "dense units=4096 activation=gelu\n"
                                  "layernorm\n"
                                  "dense units=4096 activation=relu\n"
                                  "dense units=4096 activation=tanh\n"
                                  "dense units=1024 activation=sigmoid\n"
                                  "dense units=10\n"
                                  "softmax_cross_entropy\n");
    bg_cost_device_t devices[2];
    cpu_cores(devices, 2);
    bg_plan_request_t r = request_for(spec, devices, 2, 4, 64);
    r.schedule = BG_SCHEDULE_INTERLEAVED;
    r.chunks = 2;
    /* Each 4096 x 4096 layer is 256 MiB with Adam: over half of 340 MiB. */
    const size_t capacity = (size_t)340 << 20;
    devices[0].memory_bytes = devices[1].memory_bytes = capacity;
    bg_plan_t *p = NULL;
    assert_int_equal(bg_plan_create(&r, &p), BG_OK);
    assert_true(p->partition->fits);
    assert_int_equal(p->partition->memory_check, BG_PARTITION_CHECK_DEVICES);
    assert_int_equal(p->device_search, BG_PLAN_DEVICES_SEARCHED); /* every split tried */
    int over_half = 0;
    for (int s = 0; s < 4; s++) {
        assert_int_equal(p->partition->stage[s].capacity_bytes, capacity);
        over_half += p->partition->stage[s].peak_bytes > capacity / 2;
    }
    assert_int_equal(over_half, 2); /* what the search's rule refuses */
    for (int d = 0; d < 2; d++)
        assert_true(bg_partition_device_peak_bytes(p->partition, d) <= capacity);
    assert_true(p->simulated_step_s > 0);
    bg_plan_destroy(p);
    /* Too small for a device's pair: nothing fits, checked per stage, and
     * the search per device tried every split. */
    devices[0].memory_bytes = devices[1].memory_bytes = (size_t)300 << 20;
    assert_int_equal(bg_plan_create(&r, &p), BG_OK);
    assert_false(p->partition->fits);
    assert_int_equal(p->partition->memory_check, BG_PARTITION_CHECK_STAGES);
    assert_int_equal(p->device_search, BG_PLAN_DEVICES_SEARCHED);
    bg_plan_destroy(p);
    bg_model_spec_destroy(spec);
}

/* A 2-stage split of equal costs, simulated from the plan: the bubble is
 * (K-1)/(M+K-1) and the step (M+K-1)(F+B). */
static void test_simulate_equal_stages(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_profile_t profile = mlp_profile(16, mlp_layers);
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    const int split[] = {2};
    for (int kind = 0; kind < 2; kind++) {
        for (int m = 1; m <= 8; m *= 2) {
            bg_plan_request_t r = request_for(spec, devices, 2, m, 16 * m);
            r.schedule = kind ? BG_SCHEDULE_1F1B : BG_SCHEDULE_GPIPE;
            r.profile = &profile;
            r.split = split;
            r.link = (bg_cost_link_t){.bytes_per_s = 1e30, .latency_s = 0};
            bg_plan_t *plan = NULL;
            assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
            bg_plan_costs_t *costs = NULL;
            assert_int_equal(bg_plan_costs_create(plan, &costs), BG_OK);
            for (int s = 0; s < 2; s++) {
                assert_true(close_to(costs->forward[s], 1e-3));
                assert_true(close_to(costs->backward[s], 2e-3));
                assert_true(costs->weight[s] == 0 && costs->recompute[s] == 0);
                assert_true(costs->step[s] == 0);
            }
            assert_true(costs->activation_transfer[0] < 1e-15);
            bg_plan_costs_destroy(costs);
            bg_timeline_t *tl = NULL;
            assert_int_equal(bg_plan_simulate(plan, 2, &tl), BG_OK);
            assert_int_equal(tl->steps, 2);
            assert_false(tl->measured);
            assert_string_equal(tl->device_names[1], "cpu");
            bg_timeline_summary_t *summary = NULL;
            assert_int_equal(bg_timeline_summarize(tl, &summary), BG_OK);
            assert_true(fabs(summary->bubble_measured - 1.0 / (m + 1)) < 1e-9);
            assert_true(fabs(summary->bubble_theory - 1.0 / (m + 1)) < 1e-12);
            assert_true(fabs(summary->step_s - (m + 1) * 3e-3) < 1e-9);
            /* The plan's own prediction agrees for equal stages. */
            assert_true(fabs(plan->step_s - summary->step_s) < 1e-9);
            assert_true(fabs(plan->bubble - summary->bubble_measured) < 1e-9);
            bg_timeline_summary_destroy(summary);
            bg_timeline_destroy(tl);
            bg_plan_destroy(plan);
        }
    }
    bg_model_spec_destroy(spec);
}

/* Plans r into *plan and simulates two steps of it; returns their summary
 * (the caller destroys both). */
static bg_timeline_summary_t *simulated(const bg_plan_request_t *r, bg_plan_t **plan) {
    assert_int_equal(bg_plan_create(r, plan), BG_OK);
    bg_timeline_t *tl = NULL;
    assert_int_equal(bg_plan_simulate(*plan, 2, &tl), BG_OK);
    bg_timeline_summary_t *summary = NULL;
    assert_int_equal(bg_timeline_summarize(tl, &summary), BG_OK);
    bg_timeline_destroy(tl);
    return summary;
}

/* Busy is computing or copying, in the plan as in a run's report, over the
 * whole step with the optimizer's: with M = 1 under GPipe the plan's step
 * and the simulated one agree (every crossing's copies and hand-over lie
 * on the path), and so must the bubbles, though the hand-overs (latency)
 * are idle. */
static void test_plan_bubble_counts_copies(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_layer_profile_t layers[4];
    memcpy(layers, mlp_layers, sizeof layers);
    layers[1].update_s = 0.5e-3; /* the optimizer step: both devices busy, */
    layers[2].update_s = 0.7e-3; /* the step ends with the longer */
    bg_profile_t profile = mlp_profile(16, layers);
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    const int split[] = {2};
    bg_plan_request_t r = request_for(spec, devices, 2, 1, 16);
    r.schedule = BG_SCHEDULE_GPIPE;
    r.profile = &profile;
    r.split = split;
    r.link = (bg_cost_link_t){.bytes_per_s = 1e8, .latency_s = 1e-4, .copy_bytes_per_s = 2e8};
    bg_plan_t *plan = NULL;
    bg_timeline_summary_t *summary = simulated(&r, &plan);
    assert_true(summary->stage[0].copy_s > 0);
    assert_true(close_to(plan->update_s, 0.7e-3));
    assert_true(fabs(plan->step_s + plan->update_s - summary->step_s) < 1e-12);
    assert_true(fabs(plan->bubble - summary->bubble_measured) < 1e-9);
    bg_timeline_summary_destroy(summary);
    bg_plan_destroy(plan);
    bg_model_spec_destroy(spec);
}

/* The analytic optimizer update streams parameters, gradients and state at
 * the device's memory bandwidth (a GPU's is not a CPU core's). */
static void test_update_uses_device_bandwidth(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    bg_plan_request_t r = request_for(spec, devices, 2, 1, 16);
    bg_plan_t *core = NULL, *fast = NULL;
    assert_int_equal(bg_plan_create(&r, &core), BG_OK);
    for (int d = 0; d < 2; d++) devices[d].memory_bytes_per_s = 1e12;
    assert_int_equal(bg_plan_create(&r, &fast), BG_OK);
    assert_true(core->update_s > 0);
    assert_true(close_to(fast->update_s, core->update_s * BG_COST_MEMORY_BYTES_PER_S / 1e12));
    bg_plan_destroy(core);
    bg_plan_destroy(fast);
    bg_model_spec_destroy(spec);
}

/* zb-h1 on two stages of F = dX = dW = 1 ms: the plan's step, the
 * simulated one and the theory agree, also with M < K (M = 1: step
 * 2K + 2M - 1 = 5 ms, bubble 2/5, where (K-1)/(3M+K-1) would say 1/4). */
static void test_zb_h1_equal_stages(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_layer_profile_t layers[4];
    memcpy(layers, mlp_layers, sizeof layers);
    layers[1].backward_data_s = layers[1].backward_weights_s = 1e-3;
    bg_profile_t profile = mlp_profile(16, layers);
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    const int split[] = {2};
    for (int m = 1; m <= 4; m *= 2) {
        bg_plan_request_t r = request_for(spec, devices, 2, m, 16 * m);
        r.schedule = BG_SCHEDULE_ZB_H1;
        r.profile = &profile;
        r.split = split;
        r.link = (bg_cost_link_t){.bytes_per_s = 1e30, .latency_s = 0};
        bg_plan_t *plan = NULL;
        bg_timeline_summary_t *summary = simulated(&r, &plan);
        const double units = 3 * m + 1 + (m < 2 ? 2 - m : 0);
        assert_true(fabs(summary->step_s - units * 1e-3) < 1e-9);
        assert_true(fabs(plan->step_s - summary->step_s) < 1e-9);
        assert_true(fabs(summary->bubble_theory - (1 - 3 * m / units)) < 1e-12);
        assert_true(fabs(summary->bubble_measured - summary->bubble_theory) < 1e-9);
        bg_timeline_summary_destroy(summary);
        bg_plan_destroy(plan);
    }
    bg_model_spec_destroy(spec);
}

/* An evaluation's plan (forward_only) prices what it runs: forwards alone,
 * F ops only, no update. Here layer 1's heavy backward makes training split
 * at layer 2, while the forwards (0, 1, 1 and 3 ms) balance best at 3. */
static void test_forward_only_costs(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_layer_profile_t layers[4] = {
        {.forward_s = 0},
        {.forward_s = 1e-3, .backward_data_s = 5e-3, .backward_weights_s = 5e-3},
        {.forward_s = 1e-3},
        {.forward_s = 3e-3},
    };
    bg_profile_t profile = mlp_profile(16, layers);
    bg_cost_device_t devices[2];
    cpu_cores(devices, 2);
    bg_plan_request_t r = request_for(spec, devices, 2, 4, 64);
    r.profile = &profile;
    bg_plan_t *training = NULL, *evaluation = NULL;
    assert_int_equal(bg_plan_create(&r, &training), BG_OK);
    assert_int_equal(training->first_layer[1], 2);
    r.forward_only = 1;
    assert_int_equal(bg_plan_create(&r, &evaluation), BG_OK);
    assert_int_equal(evaluation->first_layer[1], 3);
    for (int s = 0; s < 2; s++) {
        const bg_cost_time_t *t = &evaluation->partition->stage[s].time;
        assert_true(t->backward == 0 && t->weight == 0 && t->update == 0 && t->check == 0);
        assert_int_equal(evaluation->schedule->op_counts[s], 4); /* F0..F3 */
    }
    assert_true(close_to(evaluation->partition->stage[0].time.forward, 2e-3));
    assert_true(evaluation->update_s == 0);
    /* Four forwards of 3 ms on the slower stage, after the first's 2 ms. */
    assert_true(evaluation->simulated_step_s >= 14e-3);
    assert_true(evaluation->simulated_step_s < 15e-3);
    bg_plan_destroy(training);
    bg_plan_destroy(evaluation);
    bg_model_spec_destroy(spec);
}

/* zb-h1 splits the backward: B is dX (and recompute), W is dW (and
 * recompute again). */
static void test_split_backward_costs(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_profile_t profile = mlp_profile(16, mlp_layers);
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    const int split[] = {2};
    bg_plan_request_t r = request_for(spec, devices, 2, 4, 64);
    r.schedule = BG_SCHEDULE_ZB_H1;
    r.profile = &profile;
    r.split = split;
    r.recompute = 1;
    bg_plan_t *plan = NULL;
    assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
    bg_plan_costs_t *costs = NULL;
    assert_int_equal(bg_plan_costs_create(plan, &costs), BG_OK);
    assert_true(close_to(costs->backward[0], 0.5e-3));
    assert_true(close_to(costs->weight[0], 1.5e-3));
    assert_true(close_to(costs->backward[1], 1e-3));
    assert_true(close_to(costs->weight[1], 1e-3));
    assert_true(close_to(costs->recompute[0], 1e-3));
    /* The stage recomputes its forward before B and again before W: the
     * planner's stage time counts both runs, the simulator one per op. */
    for (int s = 0; s < 2; s++) {
        const bg_partition_stage_t *st = &plan->partition->stage[s];
        assert_true(close_to(st->time.recompute, 2 * st->time.forward));
        assert_true(close_to(costs->recompute[s], st->time.forward));
    }
    /* Between CPU devices the threads copy a crossing at each end; the
     * link's part is the hand-over. */
    size_t bytes = bg_cost_boundary_bytes(plan->model, 2);
    assert_true(close_to(costs->gradient_transfer[0], r.link.latency_s));
    assert_true(close_to(costs->gradient_send[0], bytes / r.link.copy_bytes_per_s));
    assert_true(close_to(costs->gradient_recv[0], bytes / r.link.copy_bytes_per_s));
    bg_plan_costs_destroy(costs);
    bg_plan_destroy(plan);
    bg_model_spec_destroy(spec);
}

/* A version 2 profile: layer ranges timed as stages give the simulator's
 * stage times and the devices' copies (the entry with the nearest slot
 * count), scaled from the profile's micro-batch; the link's part is the
 * hand-off, and the wake and hand-off reach the simulator; a range timed
 * under load gives its stage a contention, and one timed after waits its
 * after-wait slowdown. */
static void test_measured_stage_costs(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_profile_t profile = mlp_profile(8, mlp_layers);
    profile.version = 2;
    profile.handoff_s = 30e-6;
    profile.wake_s = 10e-6;
    /* clang-format off */
    bg_stage_profile_t ranges[] = {
        {0, 2, 2, 2e-3, 3e-3, 1e-4, 0, 1e-4, 2e-4, 0, 5e-5, 0, {2.5e-3, 3.5e-3, 1e-4, 4e-4},
         {{1.1, 1.2, 1.3}, {1.4, 1.5, 1.6}}, 7e-5},
        {0, 2, 1, 5e-3, 5e-3, 5e-4, 0, 5e-4, 5e-4, 0, 5e-4, 0, {0, 0, 0, 0}, {{2, 2, 2}, {2, 2, 2}},
         9e-5},
        {2, 4, 1, 1e-3, 4e-3, 2e-4, 3e-4, 0, 0, 4e-4, 0, 6e-5, {0, 0, 0, 0}, {{0}, {0}}, 3e-5},
        /* The same range at 2 and 4 slots, its update and check slow in
         * the second (a pass the machine was busy in): GPipe's stage,
         * nearest that entry, takes the range's typical figures. */
        {2, 4, 2, 1e-3, 4e-3, 2e-4, 3e-4, 0, 0, 4e-4, 0, 6e-5, {0, 0, 0, 0}, {{0}, {0}}, 3e-5},
        {2, 4, 4, 1e-3, 4e-3, 9e-3, 3e-4, 0, 0, 4e-4, 0, 6e-5, {0, 0, 0, 0}, {{0}, {0}}, 8e-3},
    };
    /* clang-format on */
    profile.stage = ranges;
    profile.stage_count = 5;
    bg_cost_device_t devices[2] = {BG_COST_DEVICE_CPU_CORE_INIT, BG_COST_DEVICE_CPU_CORE_INIT};
    const int split[] = {2};
    for (int kind = 0; kind < 2; kind++) {
        /* 1F1B: stage 0 holds 2 micro-batches, stage 1 one; GPipe: 4 each,
         * nearest to stage 0's entry of 2 slots. */
        bg_plan_request_t r = request_for(spec, devices, 2, 4, 64);
        r.schedule = kind ? BG_SCHEDULE_1F1B : BG_SCHEDULE_GPIPE;
        r.profile = &profile;
        r.split = split;
        r.link = bg_plan_profile_link(&profile);
        assert_true(r.link.copy_bytes_per_s == 8e9 && r.link.latency_s == 30e-6);
        bg_plan_t *plan = NULL;
        assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
        bg_plan_costs_t *c = NULL;
        assert_int_equal(bg_plan_costs_create(plan, &c), BG_OK);
        /* Micro-batches of 16 samples from a profile at 8: times x 2. */
        assert_true(close_to(c->forward[0], 4e-3) && close_to(c->forward[1], 2e-3));
        assert_true(close_to(c->backward[0], 6e-3) && close_to(c->backward[1], 8e-3));
        /* The update, once a step: typical over the range's entries,
         * whatever the slots (stage 0's two, 1e-4 and 5e-4, averaged;
         * stage 1's 9e-3 beside two of 2e-4 left out). */
        assert_true(close_to(c->step[0], 3e-4) && close_to(c->step[1], 2e-4));
        /* The gradients' checks, once a step: not scaled. */
        assert_true(close_to(c->weight_check[0], 8e-5) && close_to(c->weight_check[1], 3e-5));
        assert_true(c->sim.weight_check == c->weight_check);
        assert_true(close_to(c->activation_send[0], 2e-4));
        assert_true(close_to(c->activation_recv[0], 6e-4));
        assert_true(close_to(c->gradient_send[0], 8e-4));
        assert_true(close_to(c->gradient_recv[0], 4e-4));
        assert_true(close_to(c->activation_check[0], 1e-4));
        assert_true(close_to(c->gradient_check[0], 1.2e-4));
        assert_true(close_to(c->activation_transfer[0], 30e-6));
        assert_true(close_to(c->sim.wake_s, 10e-6) && close_to(c->sim.handoff_s, 30e-6));
        /* Stage 0's range was timed under load too: F + B 6 ms against 5
         * alone; stage 1's was not. */
        assert_true(close_to(c->contention[0], 1.2) && c->contention[1] == 0);
        assert_true(c->sim.contention == c->contention);
        /* The after-wait ratios of the same entries, by the other device's
         * op: F, B, STEP. */
        assert_true(close_to(c->after_wait[0].forward[BG_SIM_AFTER_FORWARD], 1.1) &&
                    close_to(c->after_wait[0].forward[BG_SIM_AFTER_STEP], 1.3) &&
                    close_to(c->after_wait[0].backward[BG_SIM_AFTER_BACKWARD], 1.5));
        assert_true(c->after_wait[1].forward[0] == 0 && c->after_wait[1].backward[2] == 0);
        assert_true(c->sim.after_wait == c->after_wait);
        bg_plan_costs_destroy(c);
        bg_plan_destroy(plan);
    }
    /* Without measured ranges: the layers' sums, and the copies of the
     * boundary's channel measurement (version 2), or of the memcpy
     * bandwidth (version 1, which has no hand-off: the default latency). */
    profile.stage_count = 0;
    bg_layer_profile_t layers[4];
    memcpy(layers, mlp_layers, sizeof layers);
    layers[2].send_s = 1e-5;
    layers[2].recv_s = 2e-5;
    layers[1].weight_check_s = 5e-5;
    layers[2].weight_check_s = 6e-5;
    profile.layer = layers;
    for (int version = 2; version >= 1; version--) {
        profile.version = version;
        bg_plan_t *plan = NULL;
        bg_plan_costs_t *c = NULL;
        plan_profiled(spec, devices, 4, &profile, &plan, &c);
        const double copy = (double)bg_cost_boundary_bytes(plan->model, 2) / 8e9;
        const double send = version == 2 ? 2e-5 : copy, recv = version == 2 ? 4e-5 : copy;
        assert_true(close_to(c->activation_send[0], send) && close_to(c->gradient_send[0], send));
        assert_true(close_to(c->activation_recv[0], recv) && close_to(c->gradient_recv[0], recv));
        assert_true(close_to(c->activation_transfer[0], version == 2 ? 30e-6 : 5e-6));
        assert_true(close_to(c->forward[0], 2e-3)); /* layer 1's forward, x 2 */
        assert_true(close_to(c->weight_check[0], 5e-5) && close_to(c->weight_check[1], 6e-5));
        bg_plan_costs_destroy(c);
        bg_plan_destroy(plan);
    }
    bg_model_spec_destroy(spec);
}

/* A profile keeps the mean of its timings, leaving out those over 3 times
 * their median (a descheduled thread), not their median. */
static void test_profile_typical(void **state) {
    (void)state;
    double skewed[] = {1.3, 1.0, 1.0, 1.1, 1.6};
    assert_true(close_to(bg_profile_typical(skewed, 5), 1.2)); /* the median is 1.1 */
    double preempted[] = {2.0, 2.0, 2.2, 9.0, 1.8};            /* 9.0 > 3 x 2.0 */
    assert_true(close_to(bg_profile_typical(preempted, 5), 2.0));
    double at_limit[] = {1.0, 3.0, 1.0}; /* 3 x 1.0 is kept */
    assert_true(close_to(bg_profile_typical(at_limit, 3), 5.0 / 3));
    double one = 4e-6;
    assert_true(close_to(bg_profile_typical(&one, 1), 4e-6));
    assert_true(bg_profile_typical(NULL, 0) == 0);
}

/* How far a profile's rounds lie apart: the second slowest over the
 * fastest, so that one preempted round is not taken for a busy machine. */
static void test_profile_spread(void **state) {
    (void)state;
    double preempted[] = {2.0, 2.1, 9.0, 2.0, 2.2, 1.9, 2.0};
    assert_true(close_to(bg_profile_spread(preempted, 7), 2.2 / 1.9));
    double busy[] = {2.0, 3.8, 4.1, 2.1, 6.0, 3.9, 2.0};
    assert_true(close_to(bg_profile_spread(busy, 7), 4.1 / 2.0));
    double two[] = {1.0, 5.0};
    assert_true(bg_profile_spread(two, 2) == 1);
    double zero[] = {0.0, 1.0, 2.0};
    assert_true(bg_profile_spread(zero, 3) == 1);
}

/* The other way round is tried only where the plan does not fit and the
 * capacities differ at mirrored places, and kept where it fits. */
static void test_plan_either_way(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_cost_device_t devices[3];
    cpu_cores(devices, 3);
    const int split[2] = {2, 3}; /* flatten and dense; dense; the loss */
    bg_plan_request_t r = request_for(spec, devices, 3, 4, 64);
    r.split = split;
    bg_plan_t *plan = NULL;
    assert_int_equal(bg_plan_create(&r, &plan), BG_OK); /* no limit */
    const size_t first = plan->partition->stage[0].peak_bytes;
    const size_t last = plan->partition->stage[2].peak_bytes;
    assert_true(last < first);
    assert_false(bg_plan_may_fit_reversed(plan)); /* it fits */
    bg_plan_destroy(plan);
    /* Every device too small for the first stage: not tried. */
    for (int d = 0; d < 3; d++) devices[d].memory_bytes = last;
    assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
    assert_false(plan->partition->fits);
    assert_false(bg_plan_may_fit_reversed(plan));
    bg_plan_destroy(plan);
    int reversed = -1;
    assert_int_equal(bg_plan_create_either_way(&r, &plan, &reversed), BG_OK);
    assert_int_equal(reversed, 0);
    assert_false(plan->partition->fits);
    bg_plan_destroy(plan);
    /* The small one first: only the other way round fits. */
    devices[1].memory_bytes = devices[2].memory_bytes = 4 * first;
    assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
    assert_false(plan->partition->fits);
    assert_true(bg_plan_may_fit_reversed(plan));
    bg_plan_destroy(plan);
    assert_int_equal(bg_plan_create_either_way(&r, &plan, &reversed), BG_OK);
    assert_int_equal(reversed, 1);
    assert_true(plan->partition->fits);
    assert_string_equal(plan->device[0].name, "cpu:2");
    assert_string_equal(plan->device[2].name, "cpu:0");
    assert_int_equal(plan->device[2].memory_bytes, last);
    bg_plan_destroy(plan);
    /* Small, large, small: alike the other way round, not tried. */
    devices[2].memory_bytes = last;
    assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
    assert_false(bg_plan_may_fit_reversed(plan));
    bg_plan_destroy(plan);
    /* A workspace counted at one end and not the other differs too. */
    devices[0].memory_bytes = devices[1].memory_bytes = devices[2].memory_bytes = last;
    devices[0].own_conv_workspace = 1;
    assert_int_equal(bg_plan_create(&r, &plan), BG_OK);
    assert_true(bg_plan_may_fit_reversed(plan));
    bg_plan_destroy(plan);
    bg_model_spec_destroy(spec);
}

/* A request the other way round: device a is the one at K-1-a, the link
 * from a to b the one from K-1-a to K-1-b; no path. */
static void test_request_reverse(void **state) {
    (void)state;
    bg_model_spec_t *spec = parse(small_mlp);
    bg_cost_device_t devices[3], reversed_devices[3];
    cpu_cores(devices, 3);
    for (int d = 0; d < 3; d++) devices[d].memory_bytes = (size_t)(d + 1) * 1000;
    bg_cost_link_t links[9], reversed_links[9];
    for (int i = 0; i < 9; i++) {
        links[i] = (bg_cost_link_t)BG_COST_LINK_HOST_INIT;
        links[i].bytes_per_s = 1e9 * (i + 1);
    }
    bg_plan_request_t r = request_for(spec, devices, 3, 4, 64), out;
    r.links = links;
    r.path_device = devices;
    r.path_links = links;
    bg_plan_request_reverse(&r, reversed_devices, reversed_links, &out);
    assert_ptr_equal(out.device, reversed_devices);
    assert_ptr_equal(out.links, reversed_links);
    assert_null(out.path_device);
    assert_null(out.path_links);
    assert_int_equal(out.microbatches, 4);
    assert_string_equal(out.device[0].name, "cpu:2");
    assert_int_equal(out.device[0].memory_bytes, 3000);
    assert_int_equal(out.device[2].memory_bytes, 1000);
    /* 0 -> 1 of the reversed chain is 2 -> 1 of the given one (entry 7). */
    assert_true(out.links[0 * 3 + 1].bytes_per_s == 8e9);
    assert_true(out.links[1 * 3 + 2].bytes_per_s == 4e9); /* 1 -> 0: entry 3 */
    assert_true(out.links[2 * 3 + 0].bytes_per_s == 3e9); /* 0 -> 2: entry 2 */
    r.links = NULL;
    bg_plan_request_reverse(&r, reversed_devices, reversed_links, &out);
    assert_null(out.links);
    bg_model_spec_destroy(spec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_stage_times),
        cmocka_unit_test(test_profile_prices_a_cut_relu),
        cmocka_unit_test(test_profile_other_sizes),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_plan_either_way),
        cmocka_unit_test(test_request_reverse),
        cmocka_unit_test(test_microbatch_candidates),
        cmocka_unit_test(test_search),
        cmocka_unit_test(test_search_progress),
        cmocka_unit_test(test_least_step_probes),
        cmocka_unit_test(test_least_step_split),
        cmocka_unit_test(test_least_step_simulated_slower),
        cmocka_unit_test(test_given_split_per_device),
        cmocka_unit_test(test_own_split_per_device),
        cmocka_unit_test(test_least_step_out_of_memory),
        cmocka_unit_test(test_interleaved_least_step_out_of_memory),
        cmocka_unit_test(test_simulate_equal_stages),
        cmocka_unit_test(test_zb_h1_equal_stages),
        cmocka_unit_test(test_split_backward_costs),
        cmocka_unit_test(test_forward_only_costs),
        cmocka_unit_test(test_measured_stage_costs),
        cmocka_unit_test(test_profile_typical),
        cmocka_unit_test(test_profile_spread),
        cmocka_unit_test(test_plan_bubble_counts_copies),
        cmocka_unit_test(test_update_uses_device_bandwidth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
