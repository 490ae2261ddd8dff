/* The simulator against step times and bubbles worked out by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "report.h"
#include "simulator.h"

enum { MAX_STAGES = 16 };

typedef struct sim_result {
    double step, bubble, theory;
} sim_result_t;

/* Simulates one step with the same F, B, W on every stage and transfer t. */
static sim_result_t simulate(bg_schedule_kind_t kind, int k, int v, int m, double f, double b,
                             double w, double t) {
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.kind = kind;
    sc.devices = k;
    sc.chunks = v;
    sc.microbatches = m;
    bg_schedule_t *schedule;
    assert_int_equal(bg_schedule_create(&sc, &schedule), BG_OK);
    double fw[MAX_STAGES], bw[MAX_STAGES], ww[MAX_STAGES], tr[MAX_STAGES];
    for (int s = 0; s < MAX_STAGES; s++) {
        fw[s] = f;
        bw[s] = b;
        ww[s] = w;
        tr[s] = t;
    }
    bg_sim_costs_t costs = {.forward = fw,
                            .backward = bw,
                            .weight = ww,
                            .activation_transfer = tr,
                            .gradient_transfer = tr};
    bg_timeline_config_t tc = {
        .schedule = kind, .devices = k, .stages = k * v, .chunks = v, .microbatches = m};
    bg_timeline_t *tl;
    assert_int_equal(bg_timeline_create(&tc, &tl), BG_OK);
    assert_int_equal(bg_simulate(schedule, &costs, 2, tl), BG_OK);
    assert_int_equal(tl->steps, 2);
    /* Steps follow each other and repeat exactly. */
    assert_true(tl->step_start[1] == tl->step_end[0]);
    assert_true(
        fabs((tl->step_end[1] - tl->step_start[1]) - (tl->step_end[0] - tl->step_start[0])) < 1e-9);
    /* A device does one thing at a time. */
    bg_timeline_sort(tl);
    for (int i = 1; i < tl->count; i++)
        if (tl->events[i].device == tl->events[i - 1].device)
            assert_true(tl->events[i].start >= tl->events[i - 1].end - 1e-12);
    bg_timeline_summary_t *summary;
    assert_int_equal(bg_timeline_summarize(tl, &summary), BG_OK);
    sim_result_t r = {summary->step_s, summary->bubble_measured, summary->bubble_theory};
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
    bg_schedule_destroy(schedule);
    return r;
}

/* GPipe and 1F1B with equal stages: step (M+K-1)(F+B), bubble exactly
 * (K-1)/(M+K-1). */
static void test_fill_drain(void **state) {
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        for (int k = 1; k <= 4; k++) {
            for (int m = 1; m <= 16; m *= 2) {
                sim_result_t r = simulate(kind == 0 ? BG_SCHEDULE_GPIPE : BG_SCHEDULE_1F1B, k, 1, m,
                                          1.0, 2.0, 0, 0);
                assert_true(fabs(r.step - (m + k - 1) * 3.0) < 1e-9);
                assert_true(fabs(r.bubble - (k - 1.0) / (m + k - 1.0)) < 1e-9);
                assert_true(fabs(r.bubble - r.theory) < 1e-9);
            }
        }
    }
}

/* Transfers between devices add to the critical path: F0 + T + F1 + B1 + T + B0. */
static void test_transfers(void **state) {
    (void)state;
    sim_result_t r = simulate(BG_SCHEDULE_GPIPE, 2, 1, 1, 1.0, 1.0, 0, 0.5);
    assert_true(fabs(r.step - 5.0) < 1e-12);
    /* GPipe with 8 micro-batches: transfers overlap compute, and only one
     * crossing each way stays on the critical path: 9 x 2 + 2 x 0.25. */
    r = simulate(BG_SCHEDULE_GPIPE, 2, 1, 8, 1.0, 1.0, 0, 0.25);
    assert_true(fabs(r.step - 18.5) < 1e-12);
}

/* Interleaving V chunks cuts the bubble towards (K-1)/(V*M+K-1). */
static void test_interleaved(void **state) {
    (void)state;
    sim_result_t plain = simulate(BG_SCHEDULE_1F1B, 4, 1, 8, 1.0, 2.0, 0, 0);
    sim_result_t inter = simulate(BG_SCHEDULE_INTERLEAVED, 4, 2, 8, 0.5, 1.0, 0, 0);
    print_message("interleaved bubble %.4f (theory %.4f), 1f1b %.4f\n", inter.bubble, inter.theory,
                  plain.bubble);
    assert_true(inter.bubble < plain.bubble);
    assert_true(fabs(inter.bubble - inter.theory) < 0.02);
}

/* ZB-H1 with F = B = W: the bubble shrinks below 1F1B's. */
static void test_zero_bubble(void **state) {
    (void)state;
    sim_result_t plain = simulate(BG_SCHEDULE_1F1B, 4, 1, 8, 1.0, 2.0, 0, 0);
    sim_result_t zb = simulate(BG_SCHEDULE_ZB_H1, 4, 1, 8, 1.0, 1.0, 1.0, 0);
    print_message("zb-h1 bubble %.4f (theory %.4f), 1f1b %.4f\n", zb.bubble, zb.theory,
                  plain.bubble);
    assert_true(zb.bubble < plain.bubble);
    assert_true(zb.step < plain.step);
}

static void test_rejects_bad_costs(void **state) {
    (void)state;
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.devices = 2;
    sc.microbatches = 2;
    bg_schedule_t *schedule;
    assert_int_equal(bg_schedule_create(&sc, &schedule), BG_OK);
    double f[2] = {1, -1}, b[2] = {1, 1}, t[1] = {0};
    bg_sim_costs_t costs = {
        .forward = f, .backward = b, .activation_transfer = t, .gradient_transfer = t};
    bg_timeline_config_t tc = {
        .schedule = BG_SCHEDULE_1F1B, .devices = 2, .stages = 2, .chunks = 1, .microbatches = 2};
    bg_timeline_t *tl;
    assert_int_equal(bg_timeline_create(&tc, &tl), BG_OK);
    assert_int_equal(bg_simulate(schedule, &costs, 1, tl), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "forward cost of stage 1"));
    f[1] = 1;
    costs.activation_transfer = NULL;
    assert_int_equal(bg_simulate(schedule, &costs, 1, tl), BG_ERR_INVALID);
    bg_timeline_destroy(tl);
    bg_schedule_destroy(schedule);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_drain),        cmocka_unit_test(test_transfers),
        cmocka_unit_test(test_interleaved),       cmocka_unit_test(test_zero_bubble),
        cmocka_unit_test(test_rejects_bad_costs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
