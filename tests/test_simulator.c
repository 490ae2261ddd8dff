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
    /* A device does one thing at a time, beside what its copy engine
     * brings in (LINK). */
    bg_timeline_sort(tl);
    const bg_event_t *last = NULL;
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->kind == BG_EVENT_LINK) continue;
        if (last != NULL && last->device == e->device) assert_true(e->start >= last->end - 1e-12);
        last = e;
    }
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

/* Interleaving V chunks cuts the bubble to (K-1)/(V*M+K-1). K = 4, V = 2,
 * M = 8, a chunk's F = 0.5 and B = 1 (the same model as the 1F1B run with
 * F = 1, B = 2, cut in 8 chunks instead of 4 stages): every device does
 * V*M = 16 chunk forwards and backwards, 16 x 1.5 = 24 of work. Device 0
 * runs its 10 warm-up forwards and one more (0-5.5), then waits for
 * micro-batch 0's gradient: forwards through the 8 chunks end at 4 (F(4,0)
 * 2-2.5 after chunk 0's four, F(7,0) 3.5-4), backwards through chunks 7..5
 * end at 7; B(4,0) 7-8. Its gaps add up to (K-1)(F+B) = 3 x 1.5 = 4.5
 * (1.5 at 5.5, then 0.5 at 9.5, 17, 18.5, 20, 21.5 and 23), so it ends at
 * 24 + 4.5 = 28.5, the last device to finish (the others end 1 apart,
 * 27.5, 26.5, 25.5). Step 28.5, each device idle 4.5 of it: bubble
 * 4.5 / 28.5 = 3/19, the theory (K-1)/(V*M+K-1) = 3/19 exactly.
 * 1F1B on the same model: step (M+K-1)(F+B) = 11 x 3 = 33, bubble 3/11. */
static void test_interleaved(void **state) {
    (void)state;
    sim_result_t plain = simulate(BG_SCHEDULE_1F1B, 4, 1, 8, 1.0, 2.0, 0, 0);
    sim_result_t inter = simulate(BG_SCHEDULE_INTERLEAVED, 4, 2, 8, 0.5, 1.0, 0, 0);
    print_message("interleaved bubble %.4f (theory %.4f), 1f1b %.4f\n", inter.bubble, inter.theory,
                  plain.bubble);
    assert_true(fabs(plain.step - 33.0) < 1e-12);
    assert_true(fabs(plain.bubble - 3.0 / 11) < 1e-12);
    assert_true(fabs(inter.step - 28.5) < 1e-12);
    assert_true(fabs(inter.bubble - 3.0 / 19) < 1e-12);
    assert_true(fabs(inter.theory - 3.0 / 19) < 1e-12);
}

/* ZB-H1, K = 4, M = 8, F = B = W = 1 (against 1F1B with F = 1, B = 2 = B+W,
 * the same work): every device does M(F+B+W) = 24. Device 3 (the last
 * stage, W's put off by lag 3) waits (K-1)F = 3 for micro-batch 0, then
 * runs F,B four times, W,F,B four times and its last four W's without a
 * gap: 3-27. Device 0 runs F0..F3 0-4 (warm-up 3 and the first pair's F), then
 * waits for micro-batch 0's gradient: forwards through 4 stages end at 4,
 * backwards through stages 3, 2, 1 at 7, so B(0,0) starts at 7; from there
 * its remaining 8 B, 8 W and 4 F run back to back (the later stages' put-off
 * W's keep their gradients coming in time): 7 + 20 = 27. So every device
 * is idle 3 = (K-1)(F+B-W) of the step 27 = M(F+B+W) + (K-1)(F+B-W):
 * bubble 3/27 = 1/9, a third of 1F1B's (K-1)(F+B+W) = 9 of 33 (3/11). */
static void test_zero_bubble(void **state) {
    (void)state;
    sim_result_t plain = simulate(BG_SCHEDULE_1F1B, 4, 1, 8, 1.0, 2.0, 0, 0);
    sim_result_t zb = simulate(BG_SCHEDULE_ZB_H1, 4, 1, 8, 1.0, 1.0, 1.0, 0);
    print_message("zb-h1 bubble %.4f (theory %.4f), 1f1b %.4f\n", zb.bubble, zb.theory,
                  plain.bubble);
    assert_true(fabs(plain.step - 33.0) < 1e-12);
    assert_true(fabs(plain.bubble - 3.0 / 11) < 1e-12);
    assert_true(fabs(zb.step - 27.0) < 1e-12);
    assert_true(fabs(zb.bubble - 1.0 / 9) < 1e-12);
    assert_true(fabs(zb.theory - 1.0 / 9) < 1e-12); /* (K-1)/(3M+K-1) */
    /* With M < K there are too few W's to fill the drain: device 0 waits
     * 2(K-1) + 1 for its first gradient after its M forwards, then runs B,
     * W pairs to the end, a step of 2K + 2M - 1 = 3M + (K-1) + (K-M). */
    static const int small[][2] = {{2, 1}, {4, 1}, {4, 2}, {4, 3}, {8, 5}};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        const int k = small[i][0], m = small[i][1];
        sim_result_t r = simulate(BG_SCHEDULE_ZB_H1, k, 1, m, 1.0, 1.0, 1.0, 0);
        print_message("zb-h1 K=%d M=%d: step %g, bubble %.4f (theory %.4f)\n", k, m, r.step,
                      r.bubble, r.theory);
        assert_true(fabs(r.step - (2 * k + 2 * m - 1)) < 1e-12);
        assert_true(fabs(r.bubble - r.theory) < 1e-12);
    }
}

/* Simulates two steps of a K = 2 schedule with the given costs; returns the
 * timeline (sorted) of which the caller checks the second step. */
static bg_timeline_t *simulate_two(bg_schedule_kind_t kind, int m, const bg_sim_costs_t *costs) {
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.kind = kind;
    sc.devices = 2;
    sc.microbatches = m;
    bg_schedule_t *schedule;
    assert_int_equal(bg_schedule_create(&sc, &schedule), BG_OK);
    bg_timeline_config_t tc = {
        .schedule = kind, .devices = 2, .stages = 2, .chunks = 1, .microbatches = m};
    bg_timeline_t *tl;
    assert_int_equal(bg_timeline_create(&tc, &tl), BG_OK);
    assert_int_equal(bg_simulate(schedule, costs, 2, tl), BG_OK);
    bg_schedule_destroy(schedule);
    bg_timeline_sort(tl);
    return tl;
}

/* The event of `kind` of step 1 on `device` for micro-batch mb; fails if
 * there is none. Times are returned relative to the step's start. */
static bg_event_t step_event(const bg_timeline_t *tl, bg_event_kind_t kind, int device, int mb) {
    for (int i = 0; i < tl->count; i++) {
        bg_event_t e = tl->events[i];
        if (e.step == 1 && e.kind == kind && e.device == device && e.microbatch == mb) {
            e.start -= tl->step_start[1];
            e.end -= tl->step_start[1];
            return e;
        }
    }
    fail_msg("no %s event on device %d for micro-batch %d", bg_event_kind_name(kind), device, mb);
    return (bg_event_t){0};
}

static int near(double a, double b) { return fabs(a - b) < 1e-12; }

/* A crossing that no device copies (a GPU's copy engine) is a LINK event
 * of the receiver, beside its ops. GPipe, K = 2, M = 2, F = B = 1, link
 * 0.5 (gradients 0.25):
 *   device 0: F0 0-1, F1 1-2, then B1 and B0 as their gradients arrive;
 *   links: F0 1-1.5, F1 2-2.5 into stage 1; B's into stage 0 behind B1's.
 * Neither busy nor idle: every device computes 4 of the step's 6.75. */
static void test_link_events(void **state) {
    (void)state;
    double f[2] = {1, 1}, b[2] = {1, 1}, ahead[1] = {0.5}, back[1] = {0.25};
    bg_sim_costs_t costs = {
        .forward = f, .backward = b, .activation_transfer = ahead, .gradient_transfer = back};
    bg_timeline_t *tl = simulate_two(BG_SCHEDULE_GPIPE, 2, &costs);
    int links = 0;
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->kind != BG_EVENT_LINK || e->step != 1) continue;
        links++;
        const int forward = e->peer_stage == 0;
        /* The receiver's, from its neighbour, as long as the link. */
        assert_int_equal(e->device, e->stage);
        assert_int_equal(e->peer_stage, 1 - e->stage);
        assert_true(near(e->end - e->start, forward ? 0.5 : 0.25));
        /* It starts as the producer's op ends and ends as the consumer's
         * op may start. */
        const bg_event_t made = step_event(tl, forward ? BG_EVENT_FORWARD : BG_EVENT_BACKWARD,
                                           e->peer_stage, e->microbatch);
        const bg_event_t used =
            step_event(tl, forward ? BG_EVENT_FORWARD : BG_EVENT_BACKWARD, e->stage, e->microbatch);
        const double start = e->start - tl->step_start[1], end = e->end - tl->step_start[1];
        assert_true(near(start, made.end));
        assert_true(used.start >= end - 1e-12);
    }
    assert_int_equal(links, 4); /* two activations, two gradients */
    const bg_event_t first = step_event(tl, BG_EVENT_LINK, 1, 0);
    assert_true(near(first.start, 1) && near(first.end, 1.5));
    const bg_event_t second = step_event(tl, BG_EVENT_LINK, 1, 1);
    assert_true(near(second.start, 2) && near(second.end, 2.5));
    /* F1 of micro-batch 1 at 2.5-3.5, the B1's 3.5-5.5, their gradients
     * there 0.25 after each, the B0's 4.75-5.75 and 5.75-6.75. */
    assert_true(near(tl->step_end[1] - tl->step_start[1], 6.75));
    bg_timeline_summary_t *summary;
    assert_int_equal(bg_timeline_summarize(tl, &summary), BG_OK);
    for (int d = 0; d < 2; d++) {
        assert_true(near(summary->device[d].compute_s, 4));
        assert_true(near(summary->device[d].copy_s, 0));
    }
    assert_true(near(summary->bubble_measured, 2.75 / 6.75));
    /* Exposed: stage 1 waits from the step's start to 1.5 for F0, of which
     * the link's 1-1.5; stage 0 from 2 to 4.75 for the first gradient, of
     * which its link's last 0.25. The second F and gradient come hidden. */
    assert_true(near(summary->device[0].link_wait_s, 0.25));
    assert_true(near(summary->device[1].link_wait_s, 0.5));
    assert_true(near(summary->stage[0].link_wait_s, 0.25));
    assert_true(near(summary->stage[1].link_wait_s, 0.5));
    assert_true(near(summary->exposed_transfer_frac, 0.75 / 6.75 / 2));
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
}

/* Copies the devices do themselves occupy them (SEND after the producing
 * op, RECV before the consuming one); the link part lies between. GPipe,
 * K = 2, M = 1, F = B = 1, send 0.25, receive 0.125, link 0.5:
 *   F0 0-1, send 1-1.25, link to 1.75, recv 1.75-1.875, F1 to 2.875,
 *   B1 to 3.875, send to 4.125, link to 4.625, recv to 4.75, B0 to 5.75. */
static void test_device_copies(void **state) {
    (void)state;
    double f[2] = {1, 1}, b[2] = {1, 1}, link[1] = {0.5}, send[1] = {0.25}, recv[1] = {0.125};
    bg_sim_costs_t costs = {.forward = f,
                            .backward = b,
                            .activation_transfer = link,
                            .gradient_transfer = link,
                            .activation_send = send,
                            .activation_recv = recv,
                            .gradient_send = send,
                            .gradient_recv = recv};
    bg_timeline_t *tl = simulate_two(BG_SCHEDULE_GPIPE, 1, &costs);
    assert_true(near(tl->step_end[1] - tl->step_start[1], 5.75));
    bg_event_t e = step_event(tl, BG_EVENT_SEND, 0, 0);
    assert_true(near(e.start, 1) && near(e.end, 1.25) && e.peer_stage == 1);
    e = step_event(tl, BG_EVENT_RECV, 1, 0);
    assert_true(near(e.start, 1.75) && near(e.end, 1.875) && e.peer_stage == 0);
    e = step_event(tl, BG_EVENT_FORWARD, 1, 0);
    assert_true(near(e.start, 1.875) && near(e.end, 2.875));
    e = step_event(tl, BG_EVENT_SEND, 1, 0);
    assert_true(near(e.start, 3.875) && near(e.end, 4.125) && e.peer_stage == 0);
    e = step_event(tl, BG_EVENT_BACKWARD, 0, 0);
    assert_true(near(e.start, 4.75) && near(e.end, 5.75));
    /* The devices copy: the link part between is no event of its own. */
    for (int i = 0; i < tl->count; i++) assert_int_not_equal(tl->events[i].kind, BG_EVENT_LINK);
    /* Copies count as copy time, not compute: idle = 5.75 - 2 - 0.375. */
    bg_timeline_summary_t *summary;
    assert_int_equal(bg_timeline_summarize(tl, &summary), BG_OK);
    for (int d = 0; d < 2; d++) {
        assert_true(near(summary->device[d].compute_s, 2));
        assert_true(near(summary->device[d].copy_s, 0.375));
    }
    assert_true(near(summary->bubble_measured, 3.375 / 5.75));
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
    /* The sender's check before its copy (0.5 forward, 0.25 backward)
     * delays each SEND and is part of the op's event, as the executor's
     * (until 2026-12-06 it was no event's: idle). */
    double check_f[1] = {0.5}, check_b[1] = {0.25};
    costs.activation_check = check_f;
    costs.gradient_check = check_b;
    tl = simulate_two(BG_SCHEDULE_GPIPE, 1, &costs);
    assert_true(near(tl->step_end[1] - tl->step_start[1], 6.5));
    e = step_event(tl, BG_EVENT_FORWARD, 0, 0);
    assert_true(near(e.start, 0) && near(e.end, 1.5) && near(e.tail_s, 0.5)); /* its check */
    e = step_event(tl, BG_EVENT_SEND, 0, 0);
    assert_true(near(e.start, 1.5) && near(e.end, 1.75));
    e = step_event(tl, BG_EVENT_BACKWARD, 1, 0);
    assert_true(near(e.end, 4.625) && near(e.tail_s, 0.25));
    e = step_event(tl, BG_EVENT_SEND, 1, 0);
    assert_true(near(e.start, 4.625) && near(e.end, 4.875));
    /* Neither the last stage's forward nor the first's backward sends. */
    e = step_event(tl, BG_EVENT_FORWARD, 1, 0);
    assert_true(near(e.end - e.start, 1) && e.tail_s == 0);
    e = step_event(tl, BG_EVENT_BACKWARD, 0, 0);
    assert_true(near(e.end - e.start, 1) && e.tail_s == 0);
    assert_int_equal(bg_timeline_summarize(tl, &summary), BG_OK);
    assert_true(near(summary->device[0].copy_s, 0.375));
    assert_true(near(summary->device[0].compute_s, 2.5));
    assert_true(near(summary->device[1].compute_s, 2.25));
    assert_true(near(summary->bubble_measured, (6.5 - 2.375 - 0.375) / 6.5));
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
}

/* Hand-overs: devices start handoff 0.2 into the step; a send to a device
 * already waiting keeps the sender wake 0.1 longer, one to a busy device
 * does not (the wake is a SEND event, as the executor records it, here
 * with no copy); the optimizer step waits for every device (the last to arrive
 * starts wake later, the others handoff later); the step ends handoff after
 * the last op. GPipe, K = 2, M = 2, F = B = 1, link 0.5, steps 0.3 and 0.4:
 *   dev 0: F0 0.2-1.2 (dev 1 waits: free at 1.3), F1 1.3-2.3 (dev 1 busy
 *          with F0 1.7-2.7: no wake), B0 5.3-6.3 (its gradient sent at 4.8
 *          to a waiting dev 0), B1 6.4-7.4 (its gradient sent at 5.9 while
 *          dev 0 was busy), last at the barrier: waits 7.4-7.5, step 7.5-7.8;
 *   dev 1: F0 1.7-2.7, F1 2.8-3.8, B0 3.8-4.8 then the wake to 4.9, B1
 *          4.9-5.9, waits 5.9-7.6, step 7.6-8.0; the step ends at 8.2. */
static void test_handoffs_and_barrier(void **state) {
    (void)state;
    double f[2] = {1, 1}, b[2] = {1, 1}, link[1] = {0.5}, step[2] = {0.3, 0.4};
    bg_sim_costs_t costs = {.forward = f,
                            .backward = b,
                            .activation_transfer = link,
                            .gradient_transfer = link,
                            .step = step,
                            .wake_s = 0.1,
                            .handoff_s = 0.2};
    bg_timeline_t *tl = simulate_two(BG_SCHEDULE_GPIPE, 2, &costs);
    assert_true(near(tl->step_end[1] - tl->step_start[1], 8.2));
    assert_true(near(tl->step_start[1], tl->step_end[0]));
    bg_event_t e = step_event(tl, BG_EVENT_FORWARD, 0, 0);
    assert_true(near(e.start, 0.2) && near(e.end, 1.2));
    e = step_event(tl, BG_EVENT_FORWARD, 0, 1);
    assert_true(near(e.start, 1.3));
    e = step_event(tl, BG_EVENT_FORWARD, 1, 1);
    assert_true(near(e.start, 2.8));
    e = step_event(tl, BG_EVENT_SEND, 1, 0);
    assert_true(near(e.start, 4.8) && near(e.end, 4.9) && near(e.tail_s, 0.1));
    e = step_event(tl, BG_EVENT_SEND, 0, 0); /* F0's, to a device waiting for it */
    assert_true(near(e.start, 1.2) && near(e.end, 1.3) && near(e.tail_s, 0.1));
    e = step_event(tl, BG_EVENT_BACKWARD, 1, 1);
    assert_true(near(e.start, 4.9) && near(e.end, 5.9));
    e = step_event(tl, BG_EVENT_BACKWARD, 0, 0);
    assert_true(near(e.start, 5.3));
    e = step_event(tl, BG_EVENT_BACKWARD, 0, 1);
    assert_true(near(e.start, 6.4) && near(e.end, 7.4));
    e = step_event(tl, BG_EVENT_STEP, 0, -1);
    assert_true(near(e.start, 7.5) && near(e.end, 7.8));
    e = step_event(tl, BG_EVENT_STEP, 1, -1);
    assert_true(near(e.start, 7.6) && near(e.end, 8.0));
    /* Both wait at the barrier, as the executor records it: a WAIT on the
     * device's own lane with no peer. */
    int barrier_waits = 0;
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *w = &tl->events[i];
        if (w->step != 1 || w->kind != BG_EVENT_WAIT || w->peer_stage != -1) continue;
        barrier_waits++;
        assert_int_equal(w->stage, w->device);
        double start = w->start - tl->step_start[1], end = w->end - tl->step_start[1];
        if (w->device == 0) assert_true(near(start, 7.4) && near(end, 7.5));
        if (w->device == 1) assert_true(near(start, 5.9) && near(end, 7.6));
    }
    assert_int_equal(barrier_waits, 2);
    bg_timeline_destroy(tl);
}

/* A device's optimizer step updates each of its stages in turn, one STEP
 * event per stage, so that a stage's row counts its own update (interleaved,
 * K = 2, V = 2: device 0 holds stages 0 and 2, device 1 stages 1 and 3). */
static void test_step_per_stage(void **state) {
    (void)state;
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.kind = BG_SCHEDULE_INTERLEAVED;
    sc.devices = 2;
    sc.chunks = 2;
    sc.microbatches = 2;
    bg_schedule_t *schedule;
    assert_int_equal(bg_schedule_create(&sc, &schedule), BG_OK);
    double f[4] = {1, 1, 1, 1}, b[4] = {1, 1, 1, 1}, step[4] = {0.1, 0.2, 0.3, 0.4},
           link[3] = {0, 0, 0};
    bg_sim_costs_t costs = {.forward = f,
                            .backward = b,
                            .activation_transfer = link,
                            .gradient_transfer = link,
                            .step = step};
    bg_timeline_config_t tc = {
        .schedule = sc.kind, .devices = 2, .stages = 4, .chunks = 2, .microbatches = 2};
    bg_timeline_t *tl;
    assert_int_equal(bg_timeline_create(&tc, &tl), BG_OK);
    assert_int_equal(bg_simulate(schedule, &costs, 2, tl), BG_OK);
    for (int d = 0; d < 2; d++) {
        double last_end = -1;
        int seen = 0;
        for (int i = 0; i < tl->count; i++) {
            const bg_event_t *e = &tl->events[i];
            if (e->step != 1 || e->device != d || e->kind != BG_EVENT_STEP) continue;
            /* Stages d then d + 2, back to back, each its own duration. */
            assert_int_equal(e->stage, d + 2 * seen);
            assert_true(near(e->end - e->start, step[e->stage]));
            if (seen > 0) assert_true(near(e->start, last_end));
            last_end = e->end;
            seen++;
        }
        assert_int_equal(seen, 2);
    }
    bg_timeline_summary_t *summary;
    assert_int_equal(bg_timeline_summarize(tl, &summary), BG_OK);
    /* Each stage computes M (F + B) = 4 per step, plus its own update. */
    for (int s = 0; s < 4; s++) assert_true(near(summary->stage[s].compute_s, 4 + step[s]));
    bg_timeline_summary_destroy(summary);
    bg_timeline_destroy(tl);
    bg_schedule_destroy(schedule);
}

/* The check of a stage's weight gradients lengthens the op that completes
 * them, the stage's last B (its last W with zb-h1), and no other: GPipe and
 * zb-h1, K = 2, M = 3, F = B = W = 1, checks 0.25 and 0.5, free links. */
static void test_weight_check(void **state) {
    (void)state;
    double f[2] = {1, 1}, b[2] = {1, 1}, w[2] = {1, 1}, check[2] = {0.25, 0.5}, link[1] = {0};
    for (int split = 0; split < 2; split++) {
        bg_sim_costs_t costs = {.forward = f,
                                .backward = b,
                                .weight = split ? w : NULL,
                                .activation_transfer = link,
                                .gradient_transfer = link,
                                .weight_check = check};
        bg_timeline_t *tl = simulate_two(split ? BG_SCHEDULE_ZB_H1 : BG_SCHEDULE_GPIPE, 3, &costs);
        const bg_event_kind_t kind = split ? BG_EVENT_WEIGHT : BG_EVENT_BACKWARD;
        for (int d = 0; d < 2; d++)
            for (int mb = 0; mb < 3; mb++) {
                const bg_event_t e = step_event(tl, kind, d, mb);
                assert_true(near(e.end - e.start, 1 + (mb == 2 ? check[d] : 0)));
                if (split) { /* the B of zb-h1 never checks */
                    const bg_event_t bw = step_event(tl, BG_EVENT_BACKWARD, d, mb);
                    assert_true(near(bw.end - bw.start, 1));
                }
            }
        bg_timeline_destroy(tl);
    }
    /* A negative check is rejected by name. */
    check[1] = -1;
    bg_sim_costs_t costs = {.forward = f,
                            .backward = b,
                            .activation_transfer = link,
                            .gradient_transfer = link,
                            .weight_check = check};
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.devices = 2;
    bg_schedule_t *schedule;
    assert_int_equal(bg_schedule_create(&sc, &schedule), BG_OK);
    bg_timeline_config_t tc = {
        .schedule = sc.kind, .devices = 2, .stages = 2, .chunks = 1, .microbatches = 1};
    bg_timeline_t *tl;
    assert_int_equal(bg_timeline_create(&tc, &tl), BG_OK);
    assert_int_equal(bg_simulate(schedule, &costs, 1, tl), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "weight-gradient check of stage 1 is -1"));
    bg_timeline_destroy(tl);
    bg_schedule_destroy(schedule);
}

/* The i-th WAIT event of step 1 on `device`, relative to the step start. */
static bg_event_t step_wait(const bg_timeline_t *tl, int device, int i) {
    for (int k = 0; k < tl->count; k++) {
        bg_event_t e = tl->events[k];
        if (e.step != 1 || e.kind != BG_EVENT_WAIT || e.device != device || i-- > 0) continue;
        e.start -= tl->step_start[1];
        e.end -= tl->step_start[1];
        return e;
    }
    fail_msg("device %d has no WAIT %d", device, i);
    return (bg_event_t){0};
}

/* A full ring holds the sender back, as the executor's two slots between
 * devices do: the sender waits (a WAIT on its lane, peer = the receiver)
 * until a receive frees a slot. GPipe, K = 2, M = 4, F = {1, 4}, B = 1, no
 * copies or transfers:
 *   dev 0: F0 0-1, F1 1-2, F2 2-3 (mb 1 and 2 now fill both slots), F3
 *          3-4, its send waits 4-5 until dev 1 takes mb 1, then dev 0 waits
 *          5-18 for the first gradient; B0 to B3 18-22;
 *   dev 1: F0 1-5, F1 5-9, F2 9-13, F3 13-17, B0 to B3 17-21: step 22.
 * With wake 0.125 and hand-off 0.25 the receive that frees the slot wakes
 * the sender (dev 1's F1 starts wake later: the wake ends its RECV), which
 * resumes a hand-off after the slot freed:
 *   dev 0: F0 0.25-1.25 (waking dev 1), F1 1.375-2.375, F2 to 3.375, F3 to
 *          4.375, waits 4.375-5.5, then waits for the first gradient to
 *          18.375; dev 1: F0 1.25-5.25, F1 5.375-9.375. */
static void test_full_ring_holds_the_sender(void **state) {
    (void)state;
    double f[2] = {1, 4}, b[2] = {1, 1}, link[1] = {0};
    bg_sim_costs_t costs = {
        .forward = f, .backward = b, .activation_transfer = link, .gradient_transfer = link};
    bg_timeline_t *tl = simulate_two(BG_SCHEDULE_GPIPE, 4, &costs);
    assert_true(near(tl->step_end[1] - tl->step_start[1], 22));
    bg_event_t e = step_wait(tl, 0, 0);
    assert_true(near(e.start, 4) && near(e.end, 5));
    assert_int_equal(e.stage, 0);
    assert_int_equal(e.microbatch, 3);
    assert_int_equal(e.peer_stage, 1);
    assert_int_equal(e.to_send, 1);
    e = step_wait(tl, 0, 1);
    assert_true(near(e.start, 5) && near(e.end, 18));
    assert_int_equal(e.microbatch, 0);
    assert_int_equal(e.to_send, 0);
    e = step_event(tl, BG_EVENT_FORWARD, 1, 1);
    assert_true(near(e.start, 5) && near(e.end, 9));
    bg_timeline_destroy(tl);

    costs.wake_s = 0.125;
    costs.handoff_s = 0.25;
    tl = simulate_two(BG_SCHEDULE_GPIPE, 4, &costs);
    e = step_event(tl, BG_EVENT_FORWARD, 0, 3);
    assert_true(near(e.start, 3.375) && near(e.end, 4.375));
    e = step_wait(tl, 0, 0);
    assert_true(near(e.start, 4.375) && near(e.end, 5.5));
    assert_int_equal(e.microbatch, 3);
    e = step_wait(tl, 0, 1);
    assert_true(near(e.start, 5.5) && near(e.end, 18.375));
    e = step_event(tl, BG_EVENT_FORWARD, 1, 1);
    assert_true(near(e.start, 5.375) && near(e.end, 9.375));
    e = step_event(tl, BG_EVENT_RECV, 1, 1);
    assert_true(near(e.start, 5.25) && near(e.end, 5.375) && near(e.tail_s, 0.125));
    bg_timeline_destroy(tl);

    /* With M slots (M = 2 here: two) nobody waits for ring space: dev 0's
     * only WAIT is for the first gradient. */
    tl = simulate_two(
        BG_SCHEDULE_GPIPE, 2,
        &(bg_sim_costs_t){
            .forward = f, .backward = b, .activation_transfer = link, .gradient_transfer = link});
    e = step_wait(tl, 0, 0);
    assert_true(near(e.start, 2) && near(e.end, 10));
    assert_int_equal(e.microbatch, 0);
    bg_timeline_destroy(tl);
}

/* Contention: an op is stretched by its stage's contention times the
 * fraction of it during which the other device is busy. GPipe, K = 2,
 * M = 2, F = 1, B = 2, no copies or transfers; alone:
 *   dev 0: F0 0-1, F1 1-2, B0 5-7, B1 7-9; dev 1: F0 1-2, F1 2-3, B0 3-5,
 *   B1 5-7: step 9. dev 0's F1 and B0 and dev 1's F0 and B1 run entirely
 *   beside the other device's work, the rest alone. With contention 1.2
 * those four take 1.2 times as long and still overlap entirely:
 *   dev 0: F0 0-1, F1 1-2.2, B0 5.2-7.6, B1 7.6-9.6;
 *   dev 1: F0 1-2.2, F1 2.2-3.2, B0 3.2-5.2, B1 5.2-7.6: step 9.6.
 * With M = 1 nothing overlaps: the step stays 6. */
static void test_contention(void **state) {
    (void)state;
    double f[2] = {1, 1}, b[2] = {2, 2}, link[1] = {0}, contention[2] = {1.2, 1.2};
    bg_sim_costs_t costs = {.forward = f,
                            .backward = b,
                            .activation_transfer = link,
                            .gradient_transfer = link,
                            .contention = contention};
    bg_timeline_t *tl = simulate_two(BG_SCHEDULE_GPIPE, 2, &costs);
    assert_true(near(tl->step_end[1] - tl->step_start[1], 9.6));
    assert_true(near(tl->step_end[0] - tl->step_start[0], 9.6));
    bg_event_t e = step_event(tl, BG_EVENT_FORWARD, 0, 0);
    assert_true(near(e.start, 0) && near(e.end, 1));
    e = step_event(tl, BG_EVENT_FORWARD, 0, 1);
    assert_true(near(e.start, 1) && near(e.end, 2.2));
    e = step_event(tl, BG_EVENT_FORWARD, 1, 1);
    assert_true(near(e.start, 2.2) && near(e.end, 3.2));
    e = step_event(tl, BG_EVENT_BACKWARD, 1, 0);
    assert_true(near(e.start, 3.2) && near(e.end, 5.2));
    e = step_event(tl, BG_EVENT_BACKWARD, 1, 1);
    assert_true(near(e.start, 5.2) && near(e.end, 7.6));
    e = step_event(tl, BG_EVENT_BACKWARD, 0, 0);
    assert_true(near(e.start, 5.2) && near(e.end, 7.6));
    e = step_event(tl, BG_EVENT_BACKWARD, 0, 1);
    assert_true(near(e.start, 7.6) && near(e.end, 9.6));
    assert_int_equal(tl->steps, 2); /* the settling passes leave no steps behind */
    bg_timeline_destroy(tl);
    tl = simulate_two(BG_SCHEDULE_GPIPE, 1, &costs);
    assert_true(near(tl->step_end[1] - tl->step_start[1], 6));
    bg_timeline_destroy(tl);
    /* Contention 1 (or 0, or none) is today's model. */
    for (int k = 0; k < 3; k++) {
        contention[0] = contention[1] = k;
        costs.contention = k < 2 ? contention : NULL;
        tl = simulate_two(BG_SCHEDULE_GPIPE, 2, &costs);
        assert_true(near(tl->step_end[1] - tl->step_start[1], 9));
        bg_timeline_destroy(tl);
    }
}

/* An op after an idle gap takes the worst 1 + (r - 1) x f over the other
 * device's ops in the gap (f: the share of such an op inside the gap; r:
 * this op's ratio after that op's kind). GPipe, K = 2, M = 1, F = 1 and
 * B = 2 on both stages, stage 1's update 1, no copies or hand-offs; stage
 * 0's F ratios after the other's F, B, STEP 1.1, 1.2, 1.5 and its B's 1.3,
 * 1.4, 1.6; stage 1's F ratio after an F 1.25, the rest 1:
 *   dev 0: F0 after dev 1's update of the step before: x1.5, 0-1.5;
 *   dev 1: F0 after dev 0's F0: x1.25, 1.5-2.75; B0 at once, 2.75-4.75;
 *   dev 0: B0 after dev 1's F0 and B0: x1.4 (the worse), 4.75-7.55;
 *   update: dev 1 7.55-8.55. Step 8.55 (7 without).
 * The settling passes give the first recorded step a step before. */
static void test_after_wait(void **state) {
    (void)state;
    double f[2] = {1, 1}, b[2] = {2, 2}, link[1] = {0}, update[2] = {0, 1};
    bg_sim_after_wait_t slow[2] = {{{1.1, 1.2, 1.5}, {1.3, 1.4, 1.6}}, {{1.25, 1, 1}, {1, 1, 1}}};
    bg_sim_costs_t costs = {.forward = f,
                            .backward = b,
                            .activation_transfer = link,
                            .gradient_transfer = link,
                            .step = update,
                            .after_wait = slow};
    bg_timeline_t *tl = simulate_two(BG_SCHEDULE_GPIPE, 1, &costs);
    assert_true(near(tl->step_end[0] - tl->step_start[0], 8.55));
    assert_true(near(tl->step_end[1] - tl->step_start[1], 8.55));
    bg_event_t e = step_event(tl, BG_EVENT_FORWARD, 0, 0);
    assert_true(near(e.start, 0) && near(e.end, 1.5));
    e = step_event(tl, BG_EVENT_FORWARD, 1, 0);
    assert_true(near(e.start, 1.5) && near(e.end, 2.75));
    e = step_event(tl, BG_EVENT_BACKWARD, 1, 0);
    assert_true(near(e.start, 2.75) && near(e.end, 4.75));
    e = step_event(tl, BG_EVENT_BACKWARD, 0, 0);
    assert_true(near(e.start, 4.75) && near(e.end, 7.55));
    assert_int_equal(tl->steps, 2);
    bg_timeline_destroy(tl);

    /* Part of an op in the gap counts in part. GPipe, M = 2, stage 0's F
     * 2, stage 1's 0.5 with ratio 2 after an F, B 2 on both, no update:
     * dev 1's F0 after all of dev 0's F0 (0-2): x2, 2-3; its F1 from 4,
     * after the half of dev 0's F1 (2-4) that lies in its gap (3-4): x1.5,
     * 4-4.75. */
    f[0] = 2;
    f[1] = 0.5;
    update[1] = 0;
    slow[0] = (bg_sim_after_wait_t){{1, 1, 1}, {1, 1, 1}};
    slow[1] = (bg_sim_after_wait_t){{2, 1, 1}, {1, 1, 1}};
    tl = simulate_two(BG_SCHEDULE_GPIPE, 2, &costs);
    e = step_event(tl, BG_EVENT_FORWARD, 1, 0);
    assert_true(near(e.start, 2) && near(e.end, 3));
    e = step_event(tl, BG_EVENT_FORWARD, 1, 1);
    assert_true(near(e.start, 4) && near(e.end, 4.75));
    bg_timeline_destroy(tl);

    /* Ratios of 1 or less, or none: no slowdown (the M = 1 step above, 7). */
    f[0] = f[1] = 1;
    update[1] = 1;
    for (int k = 0; k < 2; k++) {
        slow[0] = slow[1] = (bg_sim_after_wait_t){{1, 0.8, 1}, {0.5, 1, 0}};
        costs.after_wait = k == 0 ? slow : NULL;
        tl = simulate_two(BG_SCHEDULE_GPIPE, 1, &costs);
        assert_true(near(tl->step_end[1] - tl->step_start[1], 7));
        bg_timeline_destroy(tl);
    }
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
    double contention[2] = {1.1, NAN};
    costs.contention = contention;
    assert_int_equal(bg_simulate(schedule, &costs, 1, tl), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "contention of stage 1"));
    costs.contention = NULL;
    bg_sim_after_wait_t after_wait[2] = {{{1.2, 1, 1}, {1, 1, 1}}, {{1, 1, 1}, {1, -1, 1}}};
    costs.after_wait = after_wait;
    assert_int_equal(bg_simulate(schedule, &costs, 1, tl), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "after-wait ratios of stage 1"));
    costs.after_wait = NULL;
    costs.activation_transfer = NULL;
    assert_int_equal(bg_simulate(schedule, &costs, 1, tl), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "simulator: transfer costs are required"));
    bg_timeline_destroy(tl);
    bg_schedule_destroy(schedule);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_drain),
        cmocka_unit_test(test_transfers),
        cmocka_unit_test(test_interleaved),
        cmocka_unit_test(test_zero_bubble),
        cmocka_unit_test(test_rejects_bad_costs),
        cmocka_unit_test(test_device_copies),
        cmocka_unit_test(test_link_events),
        cmocka_unit_test(test_handoffs_and_barrier),
        cmocka_unit_test(test_step_per_stage),
        cmocka_unit_test(test_weight_check),
        cmocka_unit_test(test_contention),
        cmocka_unit_test(test_after_wait),
        cmocka_unit_test(test_full_ring_holds_the_sender),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
