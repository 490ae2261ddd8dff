/* Reports of a timeline: every summary figure of a hand-built timeline with
 * known waits, copies and gaps; the theoretical bubble of every schedule;
 * the summary as a table and as JSON; the Chrome trace parsed back; the SVG
 * timeline and sweep chart checked for well-formed XML and their counts of
 * rows, op boxes and lines; unwritable paths. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "report.h"
#include "svg.h"
#include "trace.h"

static const double EPS = 1e-12;

#define expect_near(got, want, eps) expect_near_at((got), (want), (eps), #got, __FILE__, __LINE__)

/* cmocka's float assertion works in single precision. */
static void expect_near_at(double got, double want, double eps, const char *what, const char *file,
                           int line) {
    if (fabs(got - want) <= eps) return;
    print_error("%s = %.17g, want %.17g (within %g)\n", what, got, want, eps);
    _fail(file, line);
}

static void check_ok(bg_status_t st) {
    if (st != BG_OK) fail_msg("status %s: %s", bg_status_name(st), bg_error_message());
}

/* The summary as bg_summary_print writes it (peak_bytes as it takes
 * them), in a string to free. */
static char *summary_text(const bg_timeline_summary_t *s, const size_t *peak_bytes) {
    /* Static, where the stream keeps their addresses (GCC sees a local's
     * address escape and warns of a dangling pointer once inlined). */
    static char *text;
    static size_t size;
    text = NULL;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    check_ok(bg_summary_print(out, s, peak_bytes));
    fclose(out);
    return text;
}

static bg_timeline_t *make_timeline(bg_schedule_kind_t kind, int devices, int stages, int chunks,
                                    int microbatches, const char *const *names) {
    bg_timeline_config_t cfg = {.schedule = kind,
                                .devices = devices,
                                .stages = stages,
                                .chunks = chunks,
                                .microbatches = microbatches,
                                .device_names = names,
                                .measured = 1};
    bg_timeline_t *tl = NULL;
    check_ok(bg_timeline_create(&cfg, &tl));
    return tl;
}

/* Adds an event with times in ms. */
static void add(bg_timeline_t *tl, bg_event_kind_t kind, int device, int stage, int mb, int peer,
                int step, double start_ms, double end_ms) {
    bg_event_t e = {.kind = kind,
                    .device = device,
                    .stage = stage,
                    .microbatch = mb,
                    .peer_stage = peer,
                    .step = step,
                    .start = start_ms * 1e-3,
                    .end = end_ms * 1e-3};
    check_ok(bg_timeline_add(tl, &e));
}

/* Two devices, two stages, two steps of 10 and 12 ms (mean 11 ms). The
 * expected figures below are the sums of these durations, per step. */
static bg_timeline_t *hand_timeline(void) {
    static const char *const names[] = {"cpu:0", "cpu:1"};
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_1F1B, 2, 2, 1, 2, names);
    check_ok(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, 0, 10e-3);
    check_ok(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, 10e-3, 22e-3);
    /* Device 0, stage 0, step 0: compute 1+1+2+2+0.5, copy 0.5*3, wait 2. */
    add(tl, BG_EVENT_FORWARD, 0, 0, 0, -1, 0, 0, 1);
    add(tl, BG_EVENT_SEND, 0, 0, 0, 1, 0, 1, 1.5);
    add(tl, BG_EVENT_FORWARD, 0, 0, 1, -1, 0, 1.5, 2.5);
    add(tl, BG_EVENT_SEND, 0, 0, 1, 1, 0, 2.5, 3);
    add(tl, BG_EVENT_WAIT, 0, 0, 0, 1, 0, 3, 5);
    add(tl, BG_EVENT_RECV, 0, 0, 0, 1, 0, 5, 5.5);
    add(tl, BG_EVENT_BACKWARD, 0, 0, 0, -1, 0, 5.5, 7.5);
    add(tl, BG_EVENT_BACKWARD, 0, 0, 1, -1, 0, 7.5, 9.5);
    add(tl, BG_EVENT_STEP, 0, 0, -1, -1, 0, 9.5, 10);
    /* Device 1, stage 1, step 0: compute 1+2+1+2+1 (a stage-less step),
     * copy 0.5, wait 1.5 on stage 0. */
    add(tl, BG_EVENT_WAIT, 1, 1, 0, 0, 0, 0, 1.5);
    add(tl, BG_EVENT_FORWARD, 1, 1, 0, -1, 0, 1.5, 2.5);
    add(tl, BG_EVENT_BACKWARD, 1, 1, 0, -1, 0, 2.5, 4.5);
    add(tl, BG_EVENT_SEND, 1, 1, 0, 0, 0, 4.5, 5);
    add(tl, BG_EVENT_FORWARD, 1, 1, 1, -1, 0, 5, 6);
    add(tl, BG_EVENT_BACKWARD, 1, 1, 1, -1, 0, 6, 8);
    add(tl, BG_EVENT_STEP, 1, -1, -1, -1, 0, 8, 9);
    /* Step 1: device 0 computes 1 and waits 3 on stage 1 (for room to send
     * to it); device 1 waits 2 on stage 0 and computes 1 + 0.5. */
    add(tl, BG_EVENT_FORWARD, 0, 0, 0, -1, 1, 10, 11);
    add(tl, BG_EVENT_WAIT, 0, 0, 0, 1, 1, 11, 14);
    tl->events[tl->count - 1].to_send = 1; /* for room to send F0's output */
    /* ... then 1 at the optimizer-step barrier: a wait on no stage (peer
     * -1), not on a "previous" one of stage 0. */
    add(tl, BG_EVENT_WAIT, 0, 0, -1, -1, 1, 14, 15);
    add(tl, BG_EVENT_WAIT, 1, 1, 0, 0, 1, 10, 12);
    add(tl, BG_EVENT_FORWARD, 1, 1, 0, -1, 1, 12, 13);
    add(tl, BG_EVENT_WEIGHT, 1, 1, 0, -1, 1, 13, 13.5);
    return tl;
}

static void test_summary_figures(void **state) {
    (void)state;
    bg_timeline_t *tl = hand_timeline();
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    assert_int_equal(s->devices, 2);
    assert_int_equal(s->stages, 2);
    assert_int_equal(s->steps, 2);
    double step = 11e-3;
    expect_near(s->step_s, step, EPS);

    /* Each step's own bubble: step 0 (10 ms) device 0 busy 6.5 + 1.5,
     * device 1 7 + 0.5; step 1 (12 ms) 1 and 1.5, no copies. */
    expect_near(bg_timeline_step_bubble(tl, 0), (2.0 / 10 + 2.5 / 10) / 2, EPS);
    expect_near(bg_timeline_step_bubble(tl, 1), (11.0 / 12 + 10.5 / 12) / 2, EPS);
    assert_true(isnan(bg_timeline_step_bubble(tl, 2)));
    const bg_device_summary_t *d0 = &s->device[0], *d1 = &s->device[1];
    expect_near(d0->compute_s, (6.5e-3 + 1e-3) / 2, EPS);
    expect_near(d0->copy_s, 1.5e-3 / 2, EPS);
    expect_near(d0->wait_s, (2e-3 + 3e-3 + 1e-3) / 2, EPS);
    expect_near(d0->barrier_s, 1e-3 / 2, EPS); /* of those waits, at the optimizer step */
    /* After its last event, to the last of any device's in the step (not
     * to the step's end, whose rest is the host's): device 0's ends last in
     * both steps; device 1's 1 ms before (9 of 10) and 1.5 (13.5 of 15). */
    expect_near(d0->end_wait_s, 0, EPS);
    expect_near(d0->idle_s, step - 3.75e-3 - 0.75e-3, EPS);
    expect_near(d0->compute_frac, 3.75 / 11, EPS);
    expect_near(d0->copy_frac, 0.75 / 11, EPS);
    expect_near(d0->idle_frac, 6.5 / 11, EPS);
    expect_near(d1->compute_s, (7e-3 + 1.5e-3) / 2, EPS);
    expect_near(d1->copy_s, 0.5e-3 / 2, EPS);
    expect_near(d1->wait_s, (1.5e-3 + 2e-3) / 2, EPS);
    expect_near(d1->barrier_s, 0, EPS);
    expect_near(d1->end_wait_s, 2.5e-3 / 2, EPS);
    expect_near(d1->idle_s, step - 4.25e-3 - 0.25e-3, EPS);
    expect_near(d1->compute_frac, 4.25 / 11, EPS);
    expect_near(d1->copy_frac, 0.25 / 11, EPS);
    expect_near(d1->idle_frac, 6.5 / 11, EPS);

    const bg_stage_summary_t *s0 = &s->stage[0], *s1 = &s->stage[1];
    assert_int_equal(s0->device, 0);
    expect_near(s0->forward_s, 3e-3 / 2, EPS);
    expect_near(s0->backward_s, 4e-3 / 2, EPS);
    expect_near(s0->weight_s, 0, EPS);
    expect_near(s0->compute_s, 7.5e-3 / 2, EPS); /* with its STEP */
    expect_near(s0->wait_prev_s, 0, EPS);
    expect_near(s0->wait_next_s, 5e-3 / 2, EPS);
    expect_near(s0->room_next_s, 3e-3 / 2, EPS);
    expect_near(s0->room_prev_s, 0, EPS);
    expect_near(s0->copy_s, 1.5e-3 / 2, EPS);
    assert_int_equal(s1->device, 1);
    expect_near(s1->forward_s, 3e-3 / 2, EPS);
    expect_near(s1->backward_s, 4e-3 / 2, EPS);
    expect_near(s1->weight_s, 0.5e-3 / 2, EPS);
    expect_near(s1->compute_s, 7.5e-3 / 2, EPS); /* its STEP had no stage */
    expect_near(s1->wait_prev_s, 3.5e-3 / 2, EPS);
    expect_near(s1->wait_next_s, 0, EPS);
    expect_near(s1->room_prev_s + s1->room_next_s, 0, EPS);
    expect_near(s1->copy_s, 0.5e-3 / 2, EPS);

    expect_near(s->bubble_measured, (6.5 / 11 + 6.5 / 11) / 2, EPS);
    expect_near(s->bubble_theory, 1.0 / 3, EPS);
    expect_near(s->imbalance, (4.25e-3 - 3.75e-3) / step, EPS);
    expect_near(s->exposed_transfer_frac, (0.75 / 11 + 0.25 / 11) / 2, EPS);
    /* Each step's own bubble: step 0 (10 ms) idles 2 and 2.5 ms, step 1
     * (12 ms) 11 and 10.5 ms; the median of two is their mean. */
    expect_near(s->step_median_s, 11e-3, EPS);
    expect_near(s->bubble_median, ((2 + 2.5) / 20 + (11 + 10.5) / 24) / 2, EPS);
    /* And imbalance: compute of 6.5 and 7 ms in step 0, 1 and 1.5 in step
     * 1. */
    expect_near(s->imbalance_median, (0.5 / 10 + 0.5 / 12) / 2, EPS);
    /* The shortest and longest of them. */
    expect_near(s->step_min_s, 10e-3, EPS);
    expect_near(s->step_max_s, 12e-3, EPS);
    assert_string_equal(s->device_names[1], "cpu:1");
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
}

/* Without recorded steps the events' span is the one step; an empty
 * timeline has all figures 0; events out of range are refused. */
static void test_summary_edge_cases(void **state) {
    (void)state;
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_GPIPE, 1, 1, 1, 1, NULL);
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    assert_int_equal(s->steps, 0);
    expect_near(s->step_s, 0, EPS);
    expect_near(s->bubble_measured, 0, EPS);
    expect_near(s->bubble_theory, 0, EPS);
    assert_string_equal(s->device_names[0], "device 0");
    bg_timeline_summary_destroy(s);
    add(tl, BG_EVENT_FORWARD, 0, 0, 0, -1, 0, 2, 3);
    add(tl, BG_EVENT_BACKWARD, 0, 0, 0, -1, 0, 4, 6);
    check_ok(bg_timeline_summarize(tl, &s));
    assert_int_equal(s->steps, 1);
    expect_near(s->step_s, 4e-3, EPS);
    expect_near(s->device[0].idle_frac, 0.25, EPS);
    /* No recorded step: the medians are the span's figures. */
    expect_near(s->step_median_s, 4e-3, EPS);
    expect_near(s->bubble_median, 0.25, EPS);
    expect_near(s->imbalance_median, 0, EPS);
    expect_near(s->step_min_s, 4e-3, EPS);
    expect_near(s->step_max_s, 4e-3, EPS);
    bg_timeline_summary_destroy(s);
    add(tl, BG_EVENT_FORWARD, 0, 1, 0, -1, 0, 6, 7);
    s = NULL;
    assert_int_equal(bg_timeline_summarize(tl, &s), BG_ERR_INVALID);
    assert_null(s);
    assert_non_null(strstr(bg_error_message(), "event 2 (F) has device 0, stage 1"));
    bg_timeline_summary_destroy(NULL);
    bg_timeline_destroy(tl);
}

static void test_theoretical_bubble(void **state) {
    (void)state;
    expect_near(bg_schedule_theoretical_bubble(BG_SCHEDULE_GPIPE, 4, 8, 1), 3.0 / 11, EPS);
    expect_near(bg_schedule_theoretical_bubble(BG_SCHEDULE_1F1B, 4, 8, 1), 3.0 / 11, EPS);
    expect_near(bg_schedule_theoretical_bubble(BG_SCHEDULE_INTERLEAVED, 4, 8, 2), 3.0 / 19, EPS);
    expect_near(bg_schedule_theoretical_bubble(BG_SCHEDULE_ZB_H1, 4, 8, 1), 3.0 / 27, EPS);
    expect_near(bg_schedule_theoretical_bubble(BG_SCHEDULE_1F1B, 1, 8, 1), 0, EPS);
    expect_near(bg_schedule_theoretical_bubble(BG_SCHEDULE_GPIPE, 8, 1, 1), 7.0 / 8, EPS);
}

static void test_summary_print(void **state) {
    (void)state;
    bg_timeline_t *tl = hand_timeline();
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    const size_t peak[] = {3u << 20, 5u << 19};
    check_ok(bg_summary_print(out, s, peak));
    check_ok(bg_summary_print(out, s, NULL));
    fclose(out);
    assert_non_null(strstr(text, "bubble: measured 59.1% vs theory 33.3% (1f1b, K=2, M=2); "
                                 "stage imbalance 4.5%; exposed transfer 4.5%; step 11.0 ms "
                                 "(measured)\n"));
    /* Stage 1: compute 3.75 ms, busy 34.1%, its device idle 59.1%, waits
     * 1.75 and 0 ms, copy 0.25 ms, 2.5 MiB. */
    assert_non_null(strstr(text, "    1  cpu:1                 3.750   34.1   59.1        1.750"
                                 "        0.000     0.250       2.5\n"));
    assert_non_null(strstr(text, "0.250         -\n"));
    /* Stage 0's 1.5 ms per step for room (14% of the step), once per
     * table; stage 1 had none. */
    const char *room = "stage 0 waited 1.500 ms per step for room to send activations to stage 1, "
                       "which had not taken the earlier ones\n";
    const char *first = strstr(text, room);
    assert_non_null(first);
    assert_non_null(strstr(first + 1, room));
    assert_null(strstr(text, "stage 1 waited"));
    /* Device 0's 0.5 ms per step at the barrier (4.5% of the step); device
     * 1 had none. */
    assert_non_null(strstr(text, "cpu:0 waited 0.500 ms per step at the optimizer step, for the "
                                 "other devices to reach it\n"));
    assert_null(strstr(text, "cpu:1 waited"));
    /* Each device's idle time after its last event, to the step's end. */
    assert_non_null(strstr(text, "cpu:1 was idle 1.250 ms per step at the step's end, while the "
                                 "other devices finished their optimizer steps\n"));
    assert_null(strstr(text, "cpu:0 was idle"));
    free(text);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
}

/* Full rings in a chain: stage 3 waits for room toward stage 2, which
 * waits toward stage 1, which does not (1% of the step is under the 2% a
 * line takes): stage 3's line names stage 1 as where the rings end; stage
 * 2's, whose neighbour had no full ring, names none. */
static void test_summary_room_chain(void **state) {
    (void)state;
    bg_device_summary_t device[4] = {{0}};
    bg_stage_summary_t stage[4] = {{0}};
    char names[4][24] = {"cpu:0", "cpu:1", "cpu:2", "cpu:3"};
    bg_timeline_summary_t s = {.schedule = BG_SCHEDULE_GPIPE,
                               .devices = 4,
                               .stages = 4,
                               .chunks = 1,
                               .microbatches = 8,
                               .step_s = 0.1,
                               .step_median_s = 0.1,
                               .step_min_s = 0.1,
                               .step_max_s = 0.1,
                               .device = device,
                               .stage = stage,
                               .device_names = names};
    for (int i = 0; i < 4; i++) stage[i].device = i;
    stage[3].room_prev_s = 0.010;
    stage[2].room_prev_s = 0.020;
    stage[1].room_prev_s = 0.001;
    stage[0].room_next_s = 0.005;
    char *text = summary_text(&s, NULL);
    const char *room = strstr(text, "stage 0 waited");
    assert_non_null(room);
    assert_string_equal(room,
                        "stage 0 waited 5.000 ms per step for room to send activations to stage 1, "
                        "which had not taken the earlier ones\n"
                        "stage 2 waited 20.000 ms per step for room to send gradients to stage 1, "
                        "which had not taken the earlier ones\n"
                        "stage 3 waited 10.000 ms per step for room to send gradients to stage 2, "
                        "which had not taken the earlier ones, waiting for room itself: the full "
                        "rings end at stage 1\n");
    free(text);
}

static double number(const cJSON *object, const char *name) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    if (!cJSON_IsNumber(item)) fail_msg("no number \"%s\"", name);
    return item->valuedouble;
}

/* A wait for a message counts as exposed transfer for the part during
 * which that message (same step, stages and micro-batch) crossed the
 * link; a link beside no wait, or carrying another message, does not. */
static void test_link_waits(void **state) {
    (void)state;
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_GPIPE, 2, 2, 1, 2, NULL);
    check_ok(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, 0, 10e-3);
    add(tl, BG_EVENT_FORWARD, 0, 0, 0, -1, 0, 0, 2);
    add(tl, BG_EVENT_FORWARD, 0, 0, 1, -1, 0, 2, 4);
    add(tl, BG_EVENT_WAIT, 0, 0, 0, 1, 0, 4, 7);
    add(tl, BG_EVENT_LINK, 0, 0, 0, 1, 0, 5, 6); /* within the wait: 1 ms */
    add(tl, BG_EVENT_BACKWARD, 0, 0, 0, -1, 0, 7, 9);
    add(tl, BG_EVENT_WAIT, 1, 1, 0, 0, 0, 0, 3);
    add(tl, BG_EVENT_LINK, 1, 1, 1, 0, 0, 0, 1); /* micro-batch 1's: not waited for */
    add(tl, BG_EVENT_LINK, 1, 1, 0, 0, 0, 2, 3); /* the wait's last 1 ms */
    add(tl, BG_EVENT_FORWARD, 1, 1, 0, -1, 0, 3, 5);
    add(tl, BG_EVENT_LINK, 1, 1, 1, 0, 0, 4, 5); /* beside an op: hidden */
    /* A wait for room to send (to stage 0, micro-batch 0) is no wait for
     * the message on the link, though it shares the link's keys. */
    check_ok(bg_timeline_add(tl, &(bg_event_t){.kind = BG_EVENT_WAIT,
                                               .device = 1,
                                               .stage = 1,
                                               .microbatch = 0,
                                               .peer_stage = 0,
                                               .start = 2.5e-3,
                                               .end = 3e-3,
                                               .to_send = 1}));
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    for (int d = 0; d < 2; d++) {
        expect_near(s->device[d].link_wait_s, 1e-3, EPS);
        expect_near(s->stage[d].link_wait_s, 1e-3, EPS);
        expect_near(s->device[d].copy_s, 0, EPS);
    }
    expect_near(s->device[0].compute_s, 6e-3, EPS); /* links are not compute */
    expect_near(s->device[0].idle_frac, 0.4, EPS);
    expect_near(s->exposed_transfer_frac, 0.1, EPS);
    cJSON *object = cJSON_CreateObject();
    check_ok(bg_summary_to_json(s, object));
    const cJSON *stage = cJSON_GetArrayItem(cJSON_GetObjectItem(object, "stages"), 1);
    const cJSON *device = cJSON_GetArrayItem(cJSON_GetObjectItem(object, "devices"), 0);
    expect_near(number(stage, "link_wait_s"), 1e-3, EPS);
    expect_near(number(device, "link_wait_s"), 1e-3, EPS);
    cJSON_Delete(object);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
}

/* A device's idle time that no wait nor edge of the step explains, and
 * the caller's time after the step's last event: one step of 10 ms; each
 * device has a 1 ms gap between events, and the last event ends at 6. */
static void test_other_idle(void **state) {
    (void)state;
    static const char *const names[] = {"cpu:0", "cpu:1"};
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_GPIPE, 2, 2, 1, 1, names);
    check_ok(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, 0, 10e-3);
    add(tl, BG_EVENT_FORWARD, 0, 0, 0, -1, 0, 0, 2);
    add(tl, BG_EVENT_WAIT, 0, 0, 0, 1, 0, 3, 4); /* after a gap of 1 */
    add(tl, BG_EVENT_BACKWARD, 0, 0, 0, -1, 0, 4, 6);
    add(tl, BG_EVENT_WAIT, 1, 1, 0, 0, 0, 0, 1);
    add(tl, BG_EVENT_FORWARD, 1, 1, 0, -1, 0, 1, 3);
    add(tl, BG_EVENT_BACKWARD, 1, 1, 0, -1, 0, 3, 4);
    add(tl, BG_EVENT_STEP, 1, 1, -1, -1, 0, 5, 6); /* after a gap of 1 */
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    expect_near(s->host_end_s, 4e-3, EPS);
    for (int d = 0; d < 2; d++) {
        expect_near(s->device[d].idle_s, 6e-3, EPS);
        expect_near(s->device[d].other_idle_s, 1e-3, EPS);
    }
    char *text = summary_text(s, NULL);
    assert_non_null(strstr(text, "every device was idle 4.000 ms per step after the step's last "
                                 "event, while the caller joined their threads\n"));
    assert_non_null(strstr(text, "cpu:1 was idle 1.000 ms per step between its events, in no "
                                 "wait: its thread's own work between ops, or its thread not "
                                 "running\n"));
    free(text);
    cJSON *object = cJSON_CreateObject();
    check_ok(bg_summary_to_json(s, object));
    expect_near(number(object, "host_end_s"), 4e-3, EPS);
    expect_near(
        number(cJSON_GetArrayItem(cJSON_GetObjectItem(object, "devices"), 0), "other_idle_s"), 1e-3,
        EPS);
    /* Device 1's optimizer step, of its 4 ms of compute. */
    const cJSON *device1 = cJSON_GetArrayItem(cJSON_GetObjectItem(object, "devices"), 1);
    expect_near(number(device1, "compute_s"), 4e-3, EPS);
    expect_near(number(device1, "update_s"), 1e-3, EPS);
    cJSON_Delete(object);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
}

/* A device whose thread starts late in a step is idle from the step's
 * start to its first event: two steps of 4 ms, device 1's first event
 * 0.5 ms in (a wait for stage 0) in step 0 and 0.3 ms in step 1; device
 * 0's at the start. A timeline without steps has no start to count from. */
static void test_start_waits(void **state) {
    (void)state;
    static const char *const names[] = {"cpu:0", "cpu:1"};
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_GPIPE, 2, 2, 1, 1, names);
    for (int step = 0; step < 2; step++) {
        const double at = 4 * step;
        check_ok(bg_timeline_reserve(tl, 0));
        bg_timeline_add_step(tl, at * 1e-3, (at + 4) * 1e-3);
        add(tl, BG_EVENT_FORWARD, 0, 0, 0, -1, step, at, at + 1);
        add(tl, BG_EVENT_WAIT, 1, 1, 0, 0, step, at + (step == 0 ? 0.5 : 0.3), at + 1);
        add(tl, BG_EVENT_FORWARD, 1, 1, 0, -1, step, at + 1, at + 3);
    }
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    expect_near(s->device[0].start_wait_s, 0, EPS);
    expect_near(s->device[1].start_wait_s, 0.4e-3, EPS);
    char *text = summary_text(s, NULL);
    assert_non_null(strstr(text, "cpu:1 was idle 0.400 ms per step at the step's start, until its "
                                 "thread was woken\n"));
    /* Device 0 started at once: its only idle line is at the step's end. */
    assert_non_null(strstr(text, "cpu:0 was idle 2.000 ms per step at the step's end"));
    assert_null(strstr(strstr(text, "at the step's start") + 1, "at the step's start"));
    free(text);
    cJSON *object = cJSON_CreateObject();
    check_ok(bg_summary_to_json(s, object));
    const cJSON *devices = cJSON_GetObjectItem(object, "devices");
    expect_near(number(cJSON_GetArrayItem(devices, 0), "start_wait_s"), 0, EPS);
    expect_near(number(cJSON_GetArrayItem(devices, 1), "start_wait_s"), 0.4e-3, EPS);
    cJSON_Delete(object);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
}

static void test_summary_json(void **state) {
    (void)state;
    bg_timeline_t *tl = hand_timeline();
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    cJSON *object = cJSON_CreateObject();
    check_ok(bg_summary_to_json(s, object));
    char *text = cJSON_PrintUnformatted(object);
    cJSON_Delete(object);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "schedule")->valuestring, "1f1b");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(root, "measured")));
    expect_near(number(root, "microbatches"), 2, EPS);
    expect_near(number(root, "steps"), 2, EPS);
    expect_near(number(root, "step_s"), s->step_s, EPS);
    expect_near(number(root, "step_median_s"), s->step_median_s, EPS);
    expect_near(number(root, "step_min_s"), s->step_min_s, EPS);
    expect_near(number(root, "step_max_s"), s->step_max_s, EPS);
    expect_near(number(root, "bubble_median"), s->bubble_median, EPS);
    expect_near(number(root, "imbalance_median"), s->imbalance_median, EPS);
    expect_near(number(root, "bubble_measured"), s->bubble_measured, EPS);
    expect_near(number(root, "bubble_theory"), 1.0 / 3, EPS);
    expect_near(number(root, "imbalance"), s->imbalance, EPS);
    expect_near(number(root, "exposed_transfer_frac"), s->exposed_transfer_frac, EPS);
    const cJSON *devices = cJSON_GetObjectItem(root, "devices");
    assert_int_equal(cJSON_GetArraySize(devices), 2);
    const cJSON *d1 = cJSON_GetArrayItem(devices, 1);
    assert_string_equal(cJSON_GetObjectItem(d1, "name")->valuestring, "cpu:1");
    expect_near(number(d1, "compute_s"), 4.25e-3, EPS);
    expect_near(number(d1, "wait_s"), 1.75e-3, EPS);
    expect_near(number(d1, "idle_frac"), 6.5 / 11, EPS);
    expect_near(number(d1, "barrier_s"), 0, EPS);
    expect_near(number(cJSON_GetArrayItem(devices, 0), "barrier_s"), 0.5e-3, EPS);
    expect_near(number(cJSON_GetArrayItem(devices, 1), "end_wait_s"), 1.25e-3, EPS);
    const cJSON *stages = cJSON_GetObjectItem(root, "stages");
    assert_int_equal(cJSON_GetArraySize(stages), 2);
    const cJSON *s0 = cJSON_GetArrayItem(stages, 0);
    expect_near(number(s0, "stage"), 0, EPS);
    expect_near(number(s0, "device"), 0, EPS);
    expect_near(number(s0, "wait_next_s"), 2.5e-3, EPS);
    expect_near(number(s0, "room_next_s"), 1.5e-3, EPS);
    expect_near(number(s0, "room_prev_s"), 0, EPS);
    expect_near(number(s0, "backward_s"), 2e-3, EPS);
    expect_near(number(cJSON_GetArrayItem(stages, 1), "weight_s"), 0.25e-3, EPS);
    cJSON_Delete(root);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
}

static char *read_all(const char *path) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) fail_msg("cannot open %s", path);
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    assert_int_equal(fread(text, 1, (size_t)size, file), (size_t)size);
    text[size] = '\0';
    fclose(file);
    return text;
}

static char temp_dir[64];

static const char *temp_path(const char *name) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", temp_dir, name);
    return path;
}

static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The d="..." value of the chart's path of class `series` for `schedule`:
 * checks that its commands are exactly `commands` (one letter per point,
 * "MLL" for a move and two lines), stores each point's x in xs and returns
 * the number of points. */
static int path_points(const char *text, const char *series, const char *schedule,
                       const char *commands, double *xs) {
    char head[128];
    snprintf(head, sizeof head, "<path class=\"%s\" data-schedule=\"%s\"", series, schedule);
    const char *line = strstr(text, head);
    if (line == NULL) fail_msg("no %s", head);
    const char *d = strstr(line, " d=\"");
    const char *end = d != NULL ? strchr(d + 4, '"') : NULL;
    if (d == NULL || end == NULL || strchr(line, '>') < d) fail_msg("%s has no d=\"...\"", head);
    char got[64] = {0};
    int n = 0;
    for (const char *p = d + 4; p < end; n++) {
        double x, y;
        int used = 0;
        if (n >= 63 || sscanf(p, "%c%lf %lf %n", &got[n], &x, &y, &used) != 3 || used == 0)
            fail_msg("%s: cannot parse d at '%.*s'", head, (int)(end - p), p);
        xs[n < 8 ? n : 7] = x;
        p += used;
    }
    if (strcmp(got, commands) != 0) fail_msg("%s: commands %s, want %s", head, got, commands);
    return n;
}

/* A timeline from a schedule's op lists by list scheduling: F 1 ms, B 2 ms,
 * W and STEP 0.5 ms, each transfer between devices a 0.1 ms send on the
 * producer and a 0.1 ms receive on the consumer, which waits for the data
 * when it is not there yet. Steps follow one another. */
typedef struct sim_state {
    bg_timeline_t *tl;
    double *clock, *ready; /* per device; per (kind F/B, stage, mb): data sent */
    int stages, microbatches, step;
} sim_state_t;

static double *sim_ready(sim_state_t *sim, int backward, int stage, int mb) {
    return &sim->ready[((size_t)backward * sim->stages + stage) * sim->microbatches + mb];
}

static void sim_event(sim_state_t *sim, bg_event_kind_t kind, int device, int stage, int mb,
                      int peer, double length) {
    bg_event_t e = {
        kind, device, stage, mb, peer, sim->step, sim->clock[device], sim->clock[device] + length,
        0,    0};
    check_ok(bg_timeline_add(sim->tl, &e));
    sim->clock[device] = e.end;
}

/* Runs op if its input is there: 1 when it ran. */
static int sim_op(sim_state_t *sim, const bg_schedule_t *sc, int device, const bg_op_t *op) {
    static const double cost_ms[] = {1, 2, 0.5, 0.5};
    int devices = sc->devices, s = op->stage, mb = op->microbatch;
    int peer = op->kind == BG_OP_FORWARD && s > 0                 ? s - 1
               : op->kind == BG_OP_BACKWARD && s < sc->stages - 1 ? s + 1
                                                                  : -1;
    if (peer >= 0) {
        double at = *sim_ready(sim, op->kind == BG_OP_BACKWARD, peer, mb);
        if (at < 0) return 0;
        if (peer % devices != device) {
            if (at > sim->clock[device])
                sim_event(sim, BG_EVENT_WAIT, device, s, mb, peer, at - sim->clock[device]);
            sim_event(sim, BG_EVENT_RECV, device, s, mb, peer, 0.1e-3);
        }
    }
    sim_event(sim, (bg_event_kind_t)op->kind, device, op->kind == BG_OP_STEP ? -1 : s,
              op->kind == BG_OP_STEP ? -1 : mb, -1, cost_ms[op->kind] * 1e-3);
    int next = op->kind == BG_OP_FORWARD ? s + 1 : s - 1;
    if (op->kind <= BG_OP_BACKWARD && next >= 0 && next < sc->stages) {
        if (next % devices != device) sim_event(sim, BG_EVENT_SEND, device, s, mb, next, 0.1e-3);
        *sim_ready(sim, op->kind == BG_OP_BACKWARD, s, mb) = sim->clock[device];
    }
    return 1;
}

static bg_timeline_t *simulate_timeline(bg_schedule_kind_t kind, int devices, int chunks,
                                        int microbatches, int steps) {
    bg_schedule_config_t cfg = {kind, devices, chunks, microbatches, 0};
    bg_schedule_t *sc = NULL;
    check_ok(bg_schedule_create(&cfg, &sc));
    const char *names[64];
    char text[64][16];
    for (int d = 0; d < devices; d++) {
        snprintf(text[d], sizeof text[d], "cpu:%d", d);
        names[d] = text[d];
    }
    sim_state_t sim = {.stages = sc->stages, .microbatches = microbatches};
    sim.tl = make_timeline(kind, devices, sc->stages, chunks, microbatches, names);
    sim.clock = calloc((size_t)devices, sizeof *sim.clock);
    sim.ready = malloc(sizeof *sim.ready * 2 * (size_t)(sc->stages * microbatches));
    int *next = calloc((size_t)devices, sizeof *next);
    double start = 0;
    for (sim.step = 0; sim.step < steps; sim.step++) {
        for (int i = 0; i < 2 * sc->stages * microbatches; i++) sim.ready[i] = -1;
        for (int d = 0; d < devices; d++) sim.clock[d] = start, next[d] = 0;
        for (int progress = 1; progress;) {
            progress = 0;
            for (int d = 0; d < devices; d++)
                while (next[d] < sc->op_counts[d] && sim_op(&sim, sc, d, &sc->ops[d][next[d]]))
                    next[d]++, progress = 1;
        }
        double end = start;
        for (int d = 0; d < devices; d++) {
            assert_int_equal(next[d], sc->op_counts[d]);
            if (sim.clock[d] > end) end = sim.clock[d];
        }
        check_ok(bg_timeline_reserve(sim.tl, 0));
        bg_timeline_add_step(sim.tl, start, end);
        start = end;
    }
    free(next);
    free(sim.clock);
    free(sim.ready);
    bg_schedule_destroy(sc);
    return sim.tl;
}

/* A small XML well-formedness check, enough for the SVG written here:
 * elements nest and close in order, one root, attribute values quoted,
 * no raw '<' in values or text and every '&' an entity. */
static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == ':' || c == '.';
}

static int entity_ok(const char *p) {
    static const char *const entities[] = {"&lt;", "&gt;", "&amp;", "&quot;", "&apos;"};
    for (int i = 0; i < 5; i++)
        if (strncmp(p, entities[i], strlen(entities[i])) == 0) return 1;
    return 0;
}

static int xml_check(const char *p, char *why, size_t size) {
    enum { DEPTH = 64, NAME = 32 };
    char stack[DEPTH][NAME];
    int depth = 0, roots = 0;
    const char *start = p;
#define XML_FAIL(...)                                                                              \
    do {                                                                                           \
        int n_ = snprintf(why, size, "at %ld: ", (long)(p - start));                               \
        snprintf(why + n_, size - (size_t)n_, __VA_ARGS__);                                        \
        return 0;                                                                                  \
    } while (0)
    while (*p != '\0') {
        if (*p == '&' && !entity_ok(p)) XML_FAIL("bare '&' in text");
        if (*p != '<') {
            if (depth == 0 && *p != ' ' && *p != '\n') XML_FAIL("text outside the root");
            p++;
            continue;
        }
        const char *close = p[1] == '?' ? "?>" : strncmp(p, "<!--", 4) == 0 ? "-->" : NULL;
        if (close != NULL) {
            const char *end = strstr(p, close);
            if (end == NULL) XML_FAIL("unterminated %s", close);
            p = end + strlen(close);
            continue;
        }
        int closing = p[1] == '/';
        p += closing ? 2 : 1;
        char name[NAME];
        int n = 0;
        while (is_name_char(*p) && n < NAME - 1) name[n++] = *p++;
        name[n] = '\0';
        if (n == 0) XML_FAIL("empty tag name");
        if (closing) {
            if (*p != '>') XML_FAIL("junk in </%s>", name);
            if (depth == 0 || strcmp(stack[depth - 1], name) != 0)
                XML_FAIL("</%s> closes <%s>", name, depth ? stack[depth - 1] : "nothing");
            depth--;
            p++;
            continue;
        }
        for (;;) {
            while (*p == ' ' || *p == '\n') p++;
            if (*p == '>' || (p[0] == '/' && p[1] == '>')) break;
            if (!is_name_char(*p)) XML_FAIL("bad attribute in <%s>", name);
            while (is_name_char(*p)) p++;
            if (p[0] != '=' || (p[1] != '"' && p[1] != '\''))
                XML_FAIL("unquoted value in <%s>", name);
            char quote = p[1];
            for (p += 2; *p != quote; p++) {
                if (*p == '\0' || *p == '<') XML_FAIL("bad value in <%s>", name);
                if (*p == '&' && !entity_ok(p)) XML_FAIL("bare '&' in a value in <%s>", name);
            }
            p++;
        }
        if (depth == 0) roots++;
        if (*p == '/') {
            p += 2;
            continue;
        }
        if (depth == DEPTH) XML_FAIL("too deep");
        snprintf(stack[depth++], NAME, "%s", name);
        p++;
    }
    if (depth != 0) XML_FAIL("<%s> not closed", stack[depth - 1]);
    if (roots != 1) XML_FAIL("%d root elements", roots);
    return 1;
#undef XML_FAIL
}

static void test_trace(void **state) {
    (void)state;
    bg_timeline_t *tl = simulate_timeline(BG_SCHEDULE_1F1B, 3, 1, 4, 2);
    /* One wait for a peer made a send's wait for ring space, to check its
     * name. */
    int room = -1;
    for (int i = 0; i < tl->count && room < 0; i++)
        if (tl->events[i].kind == BG_EVENT_WAIT && tl->events[i].peer_stage >= 0) room = i;
    assert_true(room >= 0);
    tl->events[room].to_send = 1;
    /* The first F's check and the first send's wake: in args, in us. */
    int tails = 0;
    for (int i = 0; i < tl->count && tails < 2; i++)
        if ((tails == 0 && tl->events[i].kind == BG_EVENT_FORWARD) ||
            (tails == 1 && tl->events[i].kind == BG_EVENT_SEND))
            tl->events[i].tail_s = tails++ == 0 ? 25e-6 : 7e-6;
    assert_int_equal(tails, 2);
    /* Two tensors crossing the link into stage 1 on its device's copy
     * engine, one from each side. */
    bg_event_t link = {.kind = BG_EVENT_LINK,
                       .device = 1,
                       .stage = 1,
                       .microbatch = 3,
                       .peer_stage = 0,
                       .start = 1e-4,
                       .end = 2e-4};
    check_ok(bg_timeline_add(tl, &link));
    link.microbatch = 2;
    link.peer_stage = 2;
    check_ok(bg_timeline_add(tl, &link));
    const char *path = temp_path("trace.json");
    check_ok(bg_trace_write(path, tl));
    char *text = read_all(path);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "displayTimeUnit")->valuestring, "ms");
    const cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
    int complete = 0, process_names = 0, thread_names = 0, found_f3 = 0, found_room = 0, links = 0,
        spans = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        int pid = (int)number(e, "pid"), tid = (int)number(e, "tid");
        if (strcmp(ph, "M") == 0) {
            const char *label =
                cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "name")
                    ? cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "name")->valuestring
                    : "";
            char want[48];
            if (strcmp(name, "process_name") == 0) {
                snprintf(want, sizeof want, pid < tl->devices ? "cpu:%d" : "steps", pid);
                assert_string_equal(label, want);
                process_names++;
            } else if (strcmp(name, "thread_name") == 0 && pid == tl->devices) {
                assert_string_equal(label, "recorded steps");
                thread_names++;
            } else if (strcmp(name, "thread_name") == 0) {
                const int stage = tid / BG_TRACE_LANES, lane = tid % BG_TRACE_LANES;
                if (lane == BG_TRACE_LANE_OPS)
                    snprintf(want, sizeof want, "stage %d", stage);
                else if (lane == BG_TRACE_LANE_TRANSFERS)
                    snprintf(want, sizeof want, "stage %d transfers", stage);
                else
                    snprintf(want, sizeof want, "stage %d link from stage %d", stage,
                             lane == BG_TRACE_LANE_LINK_PREV ? stage - 1 : stage + 1);
                assert_string_equal(label, want);
                thread_names++;
            }
            continue;
        }
        assert_string_equal(ph, "X");
        if (pid == tl->devices) {
            /* A recorded step's span, after every device's events. */
            assert_int_equal(complete, tl->count);
            const int step = (int)number(cJSON_GetObjectItem(e, "args"), "step");
            assert_int_equal(step, spans++);
            assert_string_equal(cJSON_GetObjectItem(e, "cat")->valuestring, "span");
            expect_near(number(e, "ts"), tl->step_start[step] * 1e6, 1e-3);
            expect_near(number(e, "dur"), (tl->step_end[step] - tl->step_start[step]) * 1e6, 1e-3);
            continue;
        }
        const bg_event_t *want = &tl->events[complete++];
        assert_int_equal(pid, want->device);
        const cJSON *args = cJSON_GetObjectItem(e, "args");
        assert_int_equal((int)number(args, "stage"), want->stage);
        /* An event of the whole step has no micro-batch, and says none. */
        if (want->microbatch < 0)
            assert_null(cJSON_GetObjectItem(args, "microbatch"));
        else
            assert_int_equal((int)number(args, "microbatch"), want->microbatch);
        assert_int_equal((int)number(args, "step"), want->step);
        const char *tail = want->kind == BG_EVENT_SEND ? "wake_us" : "check_us";
        if (want->tail_s > 0)
            expect_near(number(args, tail), want->tail_s * 1e6, 1e-9), tails--;
        else
            assert_null(cJSON_GetObjectItem(args, tail));
        expect_near(number(e, "dur"), (want->end - want->start) * 1e6, 1e-3);
        if (want->kind == BG_EVENT_FORWARD && want->microbatch == 3) {
            assert_string_equal(name, "F3");
            assert_int_equal(tid, BG_TRACE_LANES * want->stage + BG_TRACE_LANE_OPS);
            found_f3++;
        }
        if (want->kind == BG_EVENT_SEND && want->stage == 1 && want->peer_stage == 2 &&
            want->microbatch == 3)
            assert_string_equal(name, "send F3 to stage 2");
        if (want->kind == BG_EVENT_WAIT) {
            char wait[64];
            if (want->to_send)
                snprintf(wait, sizeof wait, "wait for room to send %c%d to stage %d",
                         want->peer_stage > want->stage ? 'F' : 'B', want->microbatch,
                         want->peer_stage);
            else
                snprintf(wait, sizeof wait, "wait for %c%d from stage %d",
                         want->peer_stage < want->stage ? 'F' : 'B', want->microbatch,
                         want->peer_stage);
            assert_string_equal(name, wait);
            found_room += want->to_send;
            assert_int_equal(tid, BG_TRACE_LANES * want->stage + BG_TRACE_LANE_TRANSFERS);
        }
        if (want->kind == BG_EVENT_LINK) {
            const int from_prev = want->peer_stage == want->stage - 1;
            assert_string_equal(name, from_prev ? "F3 from stage 0" : "B2 from stage 2");
            assert_string_equal(cJSON_GetObjectItem(e, "cat")->valuestring, "link");
            assert_int_equal((int)number(args, "peer_stage"), want->peer_stage);
            assert_int_equal(tid,
                             BG_TRACE_LANES * want->stage +
                                 (from_prev ? BG_TRACE_LANE_LINK_PREV : BG_TRACE_LANE_LINK_NEXT));
            links++;
        }
    }
    assert_int_equal(complete, tl->count);
    assert_int_equal(tails, 0);        /* both found in the args */
    assert_int_equal(found_f3, 3 * 2); /* 3 stages, 2 steps */
    assert_int_equal(found_room, 1);
    assert_int_equal(process_names, 3 + 1);
    assert_int_equal(links, 2);
    assert_int_equal(spans, tl->steps);
    assert_int_equal(spans, 2);
    /* Compute and transfer lanes per stage, stage 1's two links, the steps. */
    assert_int_equal(thread_names, 3 + 3 + 2 + 1);
    cJSON_Delete(root);
    bg_timeline_destroy(tl);
}

static void expect_well_formed(const char *text) {
    char why[256];
    if (!xml_check(text, why, sizeof why)) fail_msg("not well-formed XML: %s", why);
}

static void test_svg_timeline(void **state) {
    (void)state;
    bg_timeline_t *tl = simulate_timeline(BG_SCHEDULE_ZB_H1, 4, 1, 8, 2);
    snprintf(tl->device_names[2], sizeof tl->device_names[2], "gpu<2> & \"x\"");
    int ops = 0, ops_step1 = 0, weights = 0, room = -1;
    for (int i = 0; i < tl->count; i++) {
        if (room < 0 && tl->events[i].kind == BG_EVENT_WAIT && tl->events[i].peer_stage >= 0)
            room = i;
        if (tl->events[i].kind > BG_EVENT_STEP) continue;
        ops++;
        ops_step1 += tl->events[i].step == 1;
        weights += tl->events[i].kind == BG_EVENT_WEIGHT;
    }
    /* One wait for a peer made a send's wait for ring space. */
    assert_true(room >= 0);
    bg_event_t *wait = &tl->events[room];
    wait->to_send = 1;
    char title[64];
    snprintf(title, sizeof title, "<title>wait for room to send %c%d to stage %d, stage %d,",
             wait->peer_stage > wait->stage ? 'F' : 'B', wait->microbatch, wait->peer_stage,
             wait->stage);
    const char *path = temp_path("timeline.svg");
    check_ok(bg_svg_timeline_write(path, tl, -1));
    char *text = read_all(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "<title>wait for room"), 1);
    assert_int_equal(count_of(text, title), 1);
    /* ... drawn with its own hatch, in the legend beside the other waits. */
    assert_int_equal(count_of(text, "fill=\"url(#hatch-room)\"><title>wait for room"), 1);
    assert_int_equal(count_of(text, ">wait for room to send</text>"), 1);
    assert_int_equal(count_of(text, ">wait</text>"), 1);
    assert_int_equal(count_of(text, "<g class=\"row\""), 4);
    assert_int_equal(count_of(text, "<rect class=\"op\""), ops);
    assert_int_equal(count_of(text, "data-kind=\"W\""), weights);
    assert_int_equal(weights, 4 * 8 * 2);
    assert_non_null(strstr(text, "stage 2 (gpu&lt;2&gt; &amp; &quot;x&quot;)"));
    assert_non_null(strstr(text, "zb-h1 schedule: K=4, M=8, measured"));
    /* The legend's eight keys (F, B, W, step, send/receive, both kinds of
     * wait and idle) take two lines: each ends within the picture, at 7 px
     * a character (until 2026-12-06 one line ran past its edge). */
    {
        const char *legend = strstr(text, "<g class=\"legend\"");
        double width = 0, x, y, first_y = -1, last_y = -1;
        assert_non_null(legend);
        assert_int_equal(sscanf(strstr(text, "<svg "),
                                "<svg xmlns=\"http://www.w3.org/2000/svg\" "
                                "width=\"%lf\"",
                                &width),
                         1);
        int keys = 0;
        for (const char *at = strstr(legend, "<text x="); at != NULL;
             at = strstr(at + 1, "<text x=")) {
            assert_int_equal(sscanf(at, "<text x=\"%lf\" y=\"%lf\"", &x, &y), 2);
            const char *label = strchr(at, '>') + 1;
            const double end = x + 7.0 * (double)(strchr(label, '<') - label);
            if (end > width)
                fail_msg("legend key at x=%.1f ends at %.1f, past %.0f", x, end, width);
            if (first_y < 0) first_y = y;
            last_y = y;
            keys++;
        }
        assert_int_equal(keys, 8);
        expect_near(last_y - first_y, 22, 1e-9);
    }
    free(text);
    check_ok(bg_svg_timeline_write(path, tl, 0));
    text = read_all(path);
    assert_int_equal(
        count_of(text, "; showing recorded step 0 (from 0, as in the boxes' titles), "), 1);
    free(text);
    check_ok(bg_svg_timeline_write(path, tl, 1));
    text = read_all(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "<rect class=\"op\""), ops_step1);
    /* The subtitle counts recorded steps, not the run's. */
    assert_int_equal(count_of(text, "(mean of 2 steps); showing the last, "), 1);
    {
        /* ... with the length of the step shown, which the mean need not be. */
        char shown[64];
        const double ms = 1e3 * (tl->step_end[1] - tl->step_start[1]);
        snprintf(shown, sizeof shown, "; showing the last, %.*f ms, bubble %.1f%%</text>",
                 ms >= 100  ? 0
                 : ms >= 10 ? 1
                 : ms >= 1  ? 2
                            : 3,
                 ms, 100 * bg_timeline_step_bubble(tl, 1));
        assert_int_equal(count_of(text, shown), 1);
    }
    /* A box's title gives its times on the axis's clock: from the start of
     * the step shown, not of the first recorded one. */
    int titled = 0;
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->kind != BG_EVENT_FORWARD || e->step != 1 || e->stage != 0 || e->microbatch != 0)
            continue;
        char times[96];
        snprintf(times, sizeof times, "<title>F0, stage 0, step 1: %.3f to %.3f ms</title>",
                 1e3 * (e->start - tl->step_start[1]), 1e3 * (e->end - tl->step_start[1]));
        assert_int_equal(count_of(text, times), 1);
        assert_true(e->start - tl->step_start[1] < e->start); /* the clocks differ here */
        titled++;
    }
    assert_int_equal(titled, 1);
    assert_int_equal(count_of(text, "<rect class=\"link\""), 0);
    free(text);
    /* A tensor crossing the link into stage 2: a bar under its row, apart
     * from the ops and transfers, and in the legend. */
    check_ok(bg_timeline_add(tl, &(bg_event_t){.kind = BG_EVENT_LINK,
                                               .device = 2,
                                               .stage = 2,
                                               .microbatch = 5,
                                               .peer_stage = 1,
                                               .step = 1,
                                               .start = tl->step_start[1],
                                               .end = tl->step_start[1] + 1e-5}));
    check_ok(bg_svg_timeline_write(path, tl, 1));
    text = read_all(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "<rect class=\"link\" data-stage=\"2\""), 1);
    assert_int_equal(
        count_of(text, "<title>link: F5 from stage 1, stage 2, step 1: 0.000 to 0.010 ms"), 1);
    assert_int_equal(count_of(text, "link (copy engine)"), 1);
    assert_int_equal(count_of(text, "<rect class=\"op\""), ops_step1);
    free(text);
    assert_int_equal(bg_svg_timeline_write(path, tl, 2), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "step 2 out of range"));
    bg_timeline_destroy(tl);

    /* gpipe with 64 micro-batches: narrow F boxes go unlabelled. */
    tl = simulate_timeline(BG_SCHEDULE_GPIPE, 4, 1, 64, 1);
    check_ok(bg_svg_timeline_write(path, tl, 0));
    text = read_all(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "<rect class=\"op\""), 4 * (64 * 2 + 1));
    assert_non_null(strstr(text, "width=\"2364\""));
    free(text);
    bg_timeline_destroy(tl);
}

static void test_svg_chart(void **state) {
    (void)state;
    bg_sweep_point_t points[] = {
        {"1f1b", 8, 1000, 0.27, 3.0 / 11, 8.9, 0, 0, 0},
        {"1f1b", 1, 300, 0.75, 0.75, 3.3, 0, 0, 0},
        {"gpipe", 2, 480, 0.61, 0.6, 4.2, 0, 0, 0},
        {"1f1b", 4, 700, 0.43, 3.0 / 7, 5.7, 0, 0, 0},
        {"1f1b", 2, 500, 0.6, 0.6, 4.0, 0, 0, 0},
        {"gpipe", 8, NAN, 0.28, 3.0 / 11, 9.0, 0, 0, 0},
        {"gpipe", 1, 290, 0.76, 0.75, 3.4, 0, 0, 0},
        {"a<b", 4, 650, 0.2, 0.2, 6, 0, 0, 0},
        /* Skipped: its figures are not read, whatever they hold. */
        {"zb-h1", 4, 9999, 9, 9, 9, 0, 1, 0},
    };
    const char *path = temp_path("chart.svg");
    check_ok(bg_svg_chart_write(path, points, 9, "model.model, batch 64, on cpu:0, cpu:1"));
    char *text = read_all(path);
    expect_well_formed(text);
    assert_non_null(strstr(text, ">model.model, batch 64, on cpu:0, cpu:1</text>"));
    /* zb-h1 keeps a colour of its own, said to be all skipped, and a cross
     * at M = 4 on the M axis; none of its figures is drawn. */
    assert_non_null(strstr(text, ">zb-h1 (every point skipped)</text>"));
    assert_int_equal(count_of(text, "<path class=\"skipped\""), 1);
    assert_non_null(strstr(text, "zb-h1, M=4: skipped"));
    assert_null(strstr(text, "9999"));
    /* The legend's keys carry the markers of the two lines. */
    assert_non_null(strstr(text, "<circle cx="));
    /* Lines for the three schedules with figures: none, not an empty path
     * (d=""), for zb-h1. */
    assert_int_equal(count_of(text, "<path class=\"throughput\""), 3);
    assert_int_equal(count_of(text, "<path class=\"bubble\""), 3);
    assert_int_equal(count_of(text, "<path class=\"theory\""), 3);
    assert_null(strstr(text, "d=\"\""));
    assert_int_equal(count_of(text, "<circle class=\"point\""), 7);
    assert_non_null(strstr(text, "data-schedule=\"a&lt;b\""));
    /* 1f1b's line visits M = 1, 2, 4, 8 in order: one move, three lines.
     * The M axis spans log2 M from -0.3 to 3.3 over x = 90..850, so M = 2^k
     * sits at x = 90 + (k + 0.3) / 3.6 * 760. */
    double xs[8];
    assert_int_equal(path_points(text, "throughput", "1f1b", "MLLL", xs), 4);
    expect_near(xs[0], 153.33, 1e-9);
    expect_near(xs[1], 364.44, 1e-9);
    expect_near(xs[2], 575.56, 1e-9);
    expect_near(xs[3], 786.67, 1e-9);
    /* gpipe's M = 8 rate is NaN: its line stops at M = 2. */
    assert_int_equal(path_points(text, "throughput", "gpipe", "ML", xs), 2);
    expect_near(xs[1], 364.44, 1e-9);
    assert_int_equal(path_points(text, "bubble", "gpipe", "MLL", xs), 3);
    assert_int_equal(path_points(text, "theory", "a&lt;b", "M", xs), 1);
    expect_near(xs[0], 575.56, 1e-9);
    /* ... which draws no line: a dash of 18 across it says its theory (the
     * right axis spans 0 to 80% over y = 450..70: 20% sits at y = 450 - 95),
     * and no other schedule has a point without a drawn neighbour. */
    assert_int_equal(count_of(text, "<path class=\"theory-point\""), 1);
    assert_non_null(strstr(text, "d=\"M566.56 355.00 L584.56 355.00\"><title>a&lt;b, M=4: "
                                 "bubble 20.0% in theory</title>"));
    /* Measured points: the bubble line's key says so; the rate axis rises
       past the fastest point (1000, in steps of 200), not to it. */
    assert_non_null(strstr(text, ">bubble measured (right)<"));
    assert_non_null(strstr(text, ">1200<"));
    /* No point has a simulated figure: no dotted line, no key for one. */
    assert_null(strstr(text, "class=\"simulated\""));
    assert_null(strstr(text, "simulated samples/s"));
    free(text);
    /* Measured points with their plans' simulated samples/s: a dotted line
     * per schedule beside the measured one, on the same axis (1400 lifts
     * it to 1500), in the points' titles and the legend. gpipe's M = 8
     * rate is NaN, but its simulated figure is drawn. */
    const double simulated[] = {1400, 320, 450, 690, 520, 700, 280, 600};
    for (int i = 0; i < 8; i++) points[i].simulated_samples_per_s = simulated[i];
    check_ok(bg_svg_chart_write(path, points, 9, NULL));
    text = read_all(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "<path class=\"simulated\""), 3);
    assert_int_equal(path_points(text, "simulated", "1f1b", "MLLL", xs), 4);
    expect_near(xs[3], 786.67, 1e-9);
    assert_int_equal(path_points(text, "simulated", "gpipe", "MLL", xs), 3);
    /* The second schedule's dots fall between the first's. */
    assert_non_null(strstr(text, "data-schedule=\"gpipe\" fill=\"none\" stroke=\"#e45756\" "
                                 "stroke-width=\"1.6\" stroke-dasharray=\"1.5 3\" "
                                 "stroke-linecap=\"round\" stroke-dashoffset=\"1.5\""));
    assert_non_null(strstr(text, ">simulated samples/s (left)<"));
    assert_non_null(strstr(text, "1f1b, M=8: 1000.0 samples/s (1400.0 simulated), bubble"));
    /* ... and a ring at each simulated figure, a lone one (a&lt;b's M = 4,
     * whose line is one move, drawing nothing) included. */
    assert_int_equal(count_of(text, "<circle class=\"simulated-point\""), 8);
    assert_int_equal(path_points(text, "simulated", "a&lt;b", "M", xs), 1);
    assert_non_null(strstr(text, "<title>a&lt;b, M=4: 600.0 samples/s simulated</title>"));
    assert_non_null(strstr(text, ">1500<"));
    free(text);
    for (int i = 0; i < 8; i++) points[i].simulated_samples_per_s = 0;
    /* Simulated points: a predicted bubble. */
    for (int i = 0; i < 8; i++) points[i].simulated = 1;
    check_ok(bg_svg_chart_write(path, points, 8, NULL));
    text = read_all(path);
    assert_non_null(strstr(text, ">bubble predicted (right)<"));
    assert_null(strstr(text, "bubble measured"));
    free(text);
    /* A lone M = 1: the axis spans log2 M from -1 to 1, ticked at 1, the
     * count swept (until 2026-12-04 also at 2^-1, drawn as "-2147483648" at
     * x = -nan; until 2026-12-05 at the powers of two, 1 and 2). */
    bg_sweep_point_t lone = points[0];
    lone.microbatches = 1;
    check_ok(bg_svg_chart_write(path, &lone, 1, NULL));
    text = read_all(path);
    expect_well_formed(text);
    assert_null(strstr(text, "nan"));
    assert_null(strstr(text, "-2147483648"));
    assert_non_null(strstr(text, "text-anchor=\"middle\">1</text>"));
    assert_null(strstr(text, "text-anchor=\"middle\">2</text>"));
    assert_int_equal(count_of(text, "<path class=\"theory-point\""), 1);
    free(text);
    /* Two schedules of one theory figure at a lone M: the later dash is
     * thinner, and rings the first rather than hiding it (a review). */
    bg_sweep_point_t pair[2] = {points[4], points[6]}; /* 1f1b and gpipe, M = 2 and 1 */
    pair[1].microbatches = 2, pair[1].bubble_theory = pair[0].bubble_theory;
    check_ok(bg_svg_chart_write(path, pair, 2, NULL));
    text = read_all(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "<path class=\"theory-point\""), 2);
    assert_non_null(strstr(text, "data-schedule=\"1f1b\" stroke=\"#4c78a8\" stroke-width=\"3.0\""));
    assert_non_null(
        strstr(text, "data-schedule=\"gpipe\" stroke=\"#e45756\" stroke-width=\"2.2\""));
    free(text);
    /* Four schedules of one figure: four widths, four marker sizes. */
    bg_sweep_point_t four[4] = {pair[0], pair[0], pair[0], pair[0]};
    const char *names[4] = {"gpipe", "1f1b", "zb-h1", "interleaved"};
    for (int i = 0; i < 4; i++) four[i].schedule = names[i];
    check_ok(bg_svg_chart_write(path, four, 4, NULL));
    text = read_all(path);
    expect_well_formed(text);
    const char *widths[4] = {"3.0", "2.2", "1.4", "0.6"}, *radii[4] = {"5.0", "4.2", "3.4", "2.6"};
    for (int i = 0; i < 4; i++) {
        char want[128];
        snprintf(want, sizeof want,
                 "<path class=\"theory-point\" data-schedule=\"%s\" stroke=", names[i]);
        const char *dash = strstr(text, want);
        assert_non_null(dash);
        snprintf(want, sizeof want, "stroke-width=\"%s\" d=", widths[i]);
        assert_ptr_equal(strstr(dash, "stroke-width="), strstr(dash, want));
        snprintf(want, sizeof want, " r=\"%s\"", radii[i]);
        assert_int_equal(count_of(text, want), 1);
    }
    free(text);
    /* The counts swept are the ticks (3, 5 and 6 had only a 4); close
     * ones are thinned, not drawn over each other (90 to 95 had none). */
    bg_sweep_point_t few[3] = {points[0], points[0], points[0]};
    few[0].microbatches = 3, few[1].microbatches = 5, few[2].microbatches = 6;
    check_ok(bg_svg_chart_write(path, few, 3, NULL));
    text = read_all(path);
    for (int m = 1; m <= 8; m++) {
        char tick[48];
        snprintf(tick, sizeof tick, "text-anchor=\"middle\">%d</text>", m);
        if (m == 3 || m == 5 || m == 6)
            assert_non_null(strstr(text, tick));
        else
            assert_null(strstr(text, tick));
    }
    free(text);
    bg_sweep_point_t close[6];
    for (int i = 0; i < 6; i++) close[i] = points[0], close[i].microbatches = 90 + i;
    check_ok(bg_svg_chart_write(path, close, 6, NULL));
    text = read_all(path);
    int labelled = 0;
    for (int m = 90; m <= 95; m++) {
        char tick[48];
        snprintf(tick, sizeof tick, "text-anchor=\"middle\">%d</text>", m);
        labelled += strstr(text, tick) != NULL;
    }
    assert_non_null(strstr(text, "text-anchor=\"middle\">90</text>"));
    assert_non_null(strstr(text, "text-anchor=\"middle\">95</text>"));
    assert_true(labelled >= 2 && labelled < 6);
    free(text);
    /* A long subtitle is wrapped at spaces into lines of at most 104 bytes
     * (until 2026-12-05 one line ran off the picture), the chart moved
     * down a line for each past the first; a word longer than a line is
     * cut between characters, and a fifth line's worth is left out, the
     * fourth saying so. The rate axis counts millions past a million. */
    char subtitle[700];
    snprintf(subtitle, sizeof subtitle, "%s%0150d, batch 64, on cpu:0, cpu:1; %s", "\xc3\xa9", 0,
             "simulated from the analytic cost model");
    for (int i = 0; i < 3; i++) close[i] = points[0], close[i].samples_per_s = 3e6 * (i + 1);
    check_ok(bg_svg_chart_write(path, close, 3, subtitle));
    text = read_all(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "fill=\"#444\">"), 3);
    assert_non_null(strstr(text, "y=\"50\" " /* the first line: e-acute and 102 zeros */));
    char first[160];
    snprintf(first, sizeof first, ">\xc3\xa9%0102d</text>", 0);
    assert_non_null(strstr(text, first));
    assert_non_null(strstr(text, "y=\"82\""));
    assert_non_null(strstr(text, "<rect x=\"90.0\" y=\"102.0\" width=\"760.0\""));
    assert_non_null(strstr(text, "text-anchor=\"end\">8M</text>"));
    assert_null(strstr(text, ">8000000</text>"));
    free(text);
    /* A cut inside a two-byte character moves before it: "a" and 51
     * e-acutes (103 bytes), not half of the 52nd. Bytes that are not UTF-8
     * at all (continuation bytes alone) are cut where the line ends, and
     * drawn as U+FFFD (until 2026-12-05 such a line was 0 bytes long, and
     * the wrapper read before the text). */
    memset(subtitle, 0, sizeof subtitle);
    strcat(subtitle, "a");
    for (int i = 0; i < 60; i++) strcat(subtitle, "\xc3\xa9");
    check_ok(bg_svg_chart_write(path, close, 3, subtitle));
    text = read_all(path);
    expect_well_formed(text);
    char cut[160] = ">a";
    for (int i = 0; i < 51; i++) strcat(cut, "\xc3\xa9");
    strcat(cut, "</text>");
    assert_non_null(strstr(text, cut));
    free(text);
    memset(subtitle, 0x80, 200);
    subtitle[200] = '\0';
    check_ok(bg_svg_chart_write(path, close, 3, subtitle));
    text = read_all(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "fill=\"#444\">"), 2);
    assert_int_equal(count_of(text, "\xef\xbf\xbd"), 200);
    free(text);
    memset(subtitle, 0, sizeof subtitle);
    for (int i = 0; i < 60; i++) strcat(subtitle, "cpu:10, ");
    check_ok(bg_svg_chart_write(path, close, 3, subtitle));
    text = read_all(path);
    assert_int_equal(count_of(text, "fill=\"#444\">"), 4);
    assert_int_equal(count_of(text, ",...</text>"), 1);
    free(text);
    assert_int_equal(bg_svg_chart_write(path, points, 0, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "svg chart: no points"));
    assert_int_equal(bg_svg_chart_write(path, points + 8, 1, NULL), BG_ERR_INVALID); /* skipped */
    assert_non_null(strstr(bg_error_message(), "svg chart: no points"));
    assert_int_equal(bg_svg_chart_write(NULL, points, 8, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "svg chart: no points"));
    points[2].microbatches = 0;
    assert_int_equal(bg_svg_chart_write(path, points, 8, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "point 2 has a schedule, M=0"));
    points[2].microbatches = 2;
    points[5].schedule = NULL;
    assert_int_equal(bg_svg_chart_write(path, points, 8, NULL), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "point 5 has no schedule, M=8"));
}

static void expect_io_error(bg_status_t st, const char *path) {
    assert_int_equal(st, BG_ERR_IO);
    if (strstr(bg_error_message(), path) == NULL)
        fail_msg("message \"%s\" does not name %s", bg_error_message(), path);
}

/* Adds a copy (SEND or RECV) whose last tail_ms was its wake of the peer. */
static void add_copy(bg_timeline_t *tl, bg_event_kind_t kind, int stage, int mb, int peer,
                     double start_ms, double end_ms, double tail_ms) {
    check_ok(bg_timeline_add(tl, &(bg_event_t){.kind = kind,
                                               .device = stage,
                                               .stage = stage,
                                               .microbatch = mb,
                                               .peer_stage = peer,
                                               .start = start_ms * 1e-3,
                                               .end = end_ms * 1e-3,
                                               .tail_s = tail_ms * 1e-3}));
}

static void add_room_wait(bg_timeline_t *tl, int stage, int mb, int peer, double start_ms,
                          double end_ms) {
    check_ok(bg_timeline_add(tl, &(bg_event_t){.kind = BG_EVENT_WAIT,
                                               .device = stage,
                                               .stage = stage,
                                               .microbatch = mb,
                                               .peer_stage = peer,
                                               .start = start_ms * 1e-3,
                                               .end = end_ms * 1e-3,
                                               .to_send = 1}));
}

/* The part of a wait after the neighbour was ready (its copy done, before
 * its wake of the sleeper) is the hand-off, counted as wake_s: one
 * measured step of 10 ms on two devices. */
static void test_wake_waits(void **state) {
    (void)state;
    static const char *const names[] = {"cpu:0", "cpu:1"};
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_1F1B, 2, 2, 1, 2, names);
    check_ok(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, 0, 10e-3);
    /* F0's output ready at 1.4 ms (its wake 0.1): stage 1 ran at 1.45. */
    add_copy(tl, BG_EVENT_SEND, 0, 0, 1, 1, 1.5, 0.1);
    add(tl, BG_EVENT_WAIT, 1, 1, 0, 0, 0, 0, 1.45);
    add_copy(tl, BG_EVENT_RECV, 1, 0, 0, 1.45, 1.6, 0.05);
    /* B0's gradient ready at 4.1: stage 0, waiting since 2, ran at 4.6. */
    add_copy(tl, BG_EVENT_SEND, 1, 0, 0, 4, 4.3, 0.2);
    add(tl, BG_EVENT_WAIT, 0, 0, 0, 1, 0, 2, 4.6);
    add_copy(tl, BG_EVENT_RECV, 0, 0, 1, 4.6, 4.8, 0.05);
    /* Stage 0 waits for room from 5 to 6.3: stage 1's receive ready at 6.1
     * freed the slot, the first once the wait began (not the one ready
     * before the wait, nor a later one within it, at 6.25: stage 0 was
     * still asleep when stage 1 took another, nor one after it). */
    add_room_wait(tl, 0, 1, 1, 5, 6.3);
    add_copy(tl, BG_EVENT_RECV, 1, 1, 0, 6, 6.2, 0.1);
    add_copy(tl, BG_EVENT_RECV, 1, 3, 0, 6.2, 6.27, 0.02);
    add_copy(tl, BG_EVENT_RECV, 1, 2, 0, 7, 7.5, 0.1);
    /* Stage 1 waits for room from 8 to 9, but stage 0's last receive was
     * ready before: no receive ends the wait. */
    add_room_wait(tl, 1, 1, 0, 8, 9);
    /* A send that recorded no wake (a GPU's, enqueued) ends no wait. */
    add_copy(tl, BG_EVENT_SEND, 0, 1, 1, 2.5, 2.6, 0);
    add(tl, BG_EVENT_WAIT, 1, 1, 1, 0, 0, 2, 3);
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    expect_near(s->stage[0].wake_s, 0.5e-3 + 0.2e-3, 1e-15);
    expect_near(s->stage[0].wakes, 2, 0);
    expect_near(s->stage[1].wake_s, 0.05e-3, 1e-15);
    expect_near(s->stage[1].wakes, 1, 0);
    char *text = summary_text(s, NULL);
    /* Stage 0's 7% of the step is named; stage 1's 0.5% is not. Its wait
     * for room is named less its hand-off, which is said apart. */
    assert_non_null(strstr(text, "stage 0: 0.700 ms per step of its waits came after the "
                                 "neighbour was ready (2 waits a step, 350 us on average): the "
                                 "hand-off to its thread, not the neighbour's slowness\n"));
    assert_null(strstr(text, "stage 1: "));
    expect_near(s->stage[0].room_next_wake_s, 0.2e-3, 1e-15);
    expect_near(s->stage[0].room_prev_wake_s, 0, 0);
    assert_non_null(strstr(text, "stage 0 waited 1.100 ms per step for room to send activations "
                                 "to stage 1, which had not taken the earlier ones, and 0.200 ms "
                                 "more after it had (hand-off, below)\n"));
    free(text);
    cJSON *object = cJSON_CreateObject();
    check_ok(bg_summary_to_json(s, object));
    const cJSON *stage = cJSON_GetArrayItem(cJSON_GetObjectItem(object, "stages"), 0);
    expect_near(number(stage, "wake_s"), 0.7e-3, 1e-15);
    expect_near(number(stage, "wakes"), 2, 0);
    expect_near(number(stage, "room_next_wake_s"), 0.2e-3, 1e-15);
    cJSON_Delete(object);
    /* A mean count over steps keeps a decimal where it is no whole one;
     * one wait is "1 wait". */
    bg_stage_summary_t counted = s->stage[0];
    bg_timeline_summary_t mean = *s;
    mean.stage = &counted;
    mean.stages = 1;
    const struct {
        double wakes;
        const char *said;
    } counts[] = {{2.6, "(2.6 waits a step, 269 us on average)"},
                  {1, "(1 wait a step, 700 us on average)"},
                  {0.5, "(0.5 waits a step, 1.40 ms on average)"}};
    for (int k = 0; k < 3; k++) {
        counted.wakes = counts[k].wakes;
        text = summary_text(&mean, NULL);
        assert_non_null(strstr(text, counts[k].said));
        free(text);
    }
    /* The picture draws each hand-off over its wait, in the legend too:
     * stage 0's second from 6.1 to 6.3 ms. */
    const char *path = temp_path("wakes.svg");
    check_ok(bg_svg_timeline_write(path, tl, 0));
    text = read_all(path);
    unlink(path);
    expect_well_formed(text);
    assert_int_equal(count_of(text, "<rect class=\"handoff\""), 3);
    assert_non_null(strstr(text, ">hand-off: stage 1 took a message, freeing room, at 6.100 ms, "
                                 "this thread ran at 6.300 ms (200 us)</title>"));
    assert_non_null(strstr(text, ">hand-off: stage 0 had sent the message at 1.400 ms, this "
                                 "thread ran at 1.450 ms (50 us)</title>"));
    assert_non_null(strstr(text, ">hand-off (neighbour ready)</text>"));
    free(text);
    /* The trace gives each wait's hand-off in its args: stage 0's wait
     * for B0's gradient, 0.5 ms after it was ready; none for a send. */
    path = temp_path("wakes.json");
    check_ok(bg_trace_write(path, tl));
    text = read_all(path);
    unlink(path);
    cJSON *trace = cJSON_Parse(text);
    free(text);
    assert_non_null(trace);
    int handoffs = 0;
    const cJSON *event;
    cJSON_ArrayForEach(event, cJSON_GetObjectItem(trace, "traceEvents")) {
        const cJSON *args = cJSON_GetObjectItem(event, "args"),
                    *handoff = cJSON_GetObjectItem(args, "handoff_us");
        if (handoff == NULL) continue;
        handoffs++;
        assert_string_equal(cJSON_GetObjectItem(event, "cat")->valuestring, "wait");
        if (number(args, "stage") == 0 && number(args, "microbatch") == 0)
            expect_near(handoff->valuedouble, 500, 1e-9);
    }
    assert_int_equal(handoffs, 3);
    cJSON_Delete(trace);
    double *ready = NULL;
    check_ok(bg_timeline_wait_ready(tl, &ready));
    expect_near(ready[1], 1.4e-3, 1e-15); /* the first wait's, F0's send */
    assert_true(isnan(ready[0]));         /* a send */
    free(ready);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);

    /* Simulated: every copy counts, and a wait for a message that crossed
     * a link counts from the link's end (2.8 of a wait ending at 3). */
    bg_timeline_config_t cfg = {.schedule = BG_SCHEDULE_GPIPE,
                                .devices = 2,
                                .stages = 2,
                                .chunks = 1,
                                .microbatches = 1,
                                .device_names = names};
    check_ok(bg_timeline_create(&cfg, &tl));
    add_copy(tl, BG_EVENT_SEND, 0, 0, 1, 1, 1.2, 0);
    add(tl, BG_EVENT_LINK, 1, 1, 0, 0, 0, 1.2, 2.8);
    add(tl, BG_EVENT_WAIT, 1, 1, 0, 0, 0, 0, 3);
    check_ok(bg_timeline_summarize(tl, &s));
    expect_near(s->stage[1].link_wait_s, 1.6e-3, 1e-15);
    expect_near(s->stage[1].wake_s, 0.2e-3, 1e-15);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
    /* A measured timeline whose copies recorded no wake: no hand-off
     * drawn, none in the legend. */
    tl = hand_timeline();
    check_ok(bg_svg_timeline_write(path, tl, -1));
    text = read_all(path);
    assert_null(strstr(text, "hand-off"));
    free(text);
    unlink(path);
    bg_timeline_destroy(tl);
}

static void test_unwritable_paths(void **state) {
    (void)state;
    bg_timeline_t *tl = hand_timeline();
    const char *path = "/nonexistent-brigade-dir/out.file";
    expect_io_error(bg_trace_write(path, tl), path);
    expect_io_error(bg_svg_timeline_write(path, tl, -1), path);
    bg_sweep_point_t point = {"1f1b", 4, 100, 0.4, 0.4, 1, 0, 0, 0};
    expect_io_error(bg_svg_chart_write(path, &point, 1, NULL), path);
    if (access("/dev/full", W_OK) == 0) {
        expect_io_error(bg_trace_write("/dev/full", tl), "/dev/full");
        expect_io_error(bg_svg_timeline_write("/dev/full", tl, 0), "/dev/full");
    }
    bg_timeline_destroy(tl);
}

static int make_temp_dir(void **state) {
    (void)state;
    snprintf(temp_dir, sizeof temp_dir, "/tmp/brigade_report_XXXXXX");
    return mkdtemp(temp_dir) == NULL ? -1 : 0;
}

static int remove_temp_dir(void **state) {
    (void)state;
    const char *names[] = {"trace.json", "timeline.svg", "chart.svg"};
    for (int i = 0; i < 3; i++) remove(temp_path(names[i]));
    return rmdir(temp_dir);
}

/* Interleaved: a device's idle share is printed once, on its first stage's
 * row, since its stages share its time, and its stages' peaks are added. */
static void test_summary_print_interleaved(void **state) {
    (void)state;
    bg_timeline_t *tl = simulate_timeline(BG_SCHEDULE_INTERLEAVED, 2, 2, 4, 1);
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    char *text = summary_text(s, NULL);
    char idle[2][16];
    for (int d = 0; d < 2; d++)
        snprintf(idle[d], sizeof idle[d], " %6.1f ", 100.0 * s->device[d].idle_frac);
    int rows = 0;
    for (const char *line = text; line != NULL && *line != '\0'; rows++) {
        const char *end = strchr(line, '\n');
        assert_non_null(end);
        if (rows >= 1 && rows <= 4) {
            /* Columns: stage, device, compute ms, busy%, idle% (6 wide). */
            char row[256];
            snprintf(row, sizeof row, "%.*s", (int)(end - line), line);
            const int stage = rows - 1;
            const char *cell = row + 5 + 2 + 16 + 1 + 10 + 1 + 6;
            if (stage < 2)
                assert_memory_equal(cell, idle[stage], strlen(idle[stage]));
            else
                assert_memory_equal(cell, "        ", 8);
        }
        line = end + 1;
    }
    assert_non_null(strstr(text, "(idle% is a device's, on the row of its first stage: its stages "
                                 "share its time)\n"));
    free(text);
    /* With the stages' peaks, each device's together: stages 0 and 2 are
     * the first device's, 1 and 3 the second's. */
    const size_t mib = 1024 * 1024, peaks[4] = {1 * mib, 2 * mib, mib / 2, mib / 4};
    text = summary_text(s, peaks);
    char want[160];
    snprintf(want, sizeof want,
             "share its time; peak MiB of a device's stages together: %s 1.5, %s 2.2)\n",
             s->device_names[0], s->device_names[1]);
    assert_non_null(strstr(text, want));
    free(text);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
}

/* One device has no pipeline bubble: its idle time is named as the host's
 * work between ops; with two devices the line is not there. */
static void test_summary_print_one_device(void **state) {
    (void)state;
    static const char *const names[] = {"cpu:0"};
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_1F1B, 1, 1, 1, 1, names);
    check_ok(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, 0, 10e-3);
    add(tl, BG_EVENT_FORWARD, 0, 0, 0, -1, 0, 0, 4);
    add(tl, BG_EVENT_BACKWARD, 0, 0, 0, -1, 0, 4, 8);
    add(tl, BG_EVENT_STEP, 0, 0, -1, -1, 0, 8.5, 9.5);
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    expect_near(s->bubble_measured, 0.1, EPS);
    char *text = summary_text(s, NULL);
    static const char line[] = "(one device: its idle time is the host's work between ops and "
                               "steps, not a pipeline bubble)\n";
    assert_non_null(strstr(text, line));
    free(text);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);

    tl = hand_timeline();
    check_ok(bg_timeline_summarize(tl, &s));
    text = summary_text(s, NULL);
    assert_null(strstr(text, "one device"));
    free(text);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
}

/* Whether the summary of `tl` (destroyed) says why its bubble is below
 * theory; the line into `line` (empty where none). */
static int says_below_theory(bg_timeline_t *tl, char *line, size_t size) {
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    char *text = summary_text(s, NULL);
    const char *at = strstr(text, "(below theory:");
    const size_t length = at != NULL ? strcspn(at, "\n") : 0;
    snprintf(line, size, "%.*s", (int)length, at != NULL ? at : "");
    free(text);
    bg_timeline_summary_destroy(s);
    bg_timeline_destroy(tl);
    return at != NULL;
}

/* Two stages at M = 1 (theory 50%) over a 10 ms step, each device with
 * its optimizer step from `update_ms` on, to the step's end or for
 * `update_length` ms. Device 0 runs F 0-1, waits for the gradient, B 3-4;
 * device 1 waits for the activation 0-1, F 1-2, B 2-3, waits at the
 * barrier 3-4; with `late`, each F and B starts 4 ms later. */
static bg_timeline_t *two_stages(double update_ms, double update_length, double late) {
    static const char *const names[] = {"cuda:0", "cuda:1"};
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_1F1B, 2, 2, 1, 1, names);
    check_ok(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, 0, 10e-3);
    add(tl, BG_EVENT_FORWARD, 0, 0, 0, -1, 0, late, late + 1);
    add(tl, BG_EVENT_WAIT, 0, 0, 0, 1, 0, late + 1, late + 3);
    add(tl, BG_EVENT_BACKWARD, 0, 0, 0, -1, 0, late + 3, late + 4);
    add(tl, BG_EVENT_STEP, 0, 0, -1, -1, 0, update_ms, update_ms + update_length);
    add(tl, BG_EVENT_WAIT, 1, 1, 0, 0, 0, 0, late + 1);
    add(tl, BG_EVENT_FORWARD, 1, 1, 0, -1, 0, late + 1, late + 2);
    add(tl, BG_EVENT_BACKWARD, 1, 1, 0, -1, 0, late + 2, late + 3);
    add(tl, BG_EVENT_WAIT, 1, -1, -1, -1, 0, late + 3, late + 4);
    add(tl, BG_EVENT_STEP, 1, 1, -1, -1, 0, update_ms, update_ms + update_length);
    return tl;
}

/* Two stages at M = 1 over a 10 ms step, each device computing F 0-4 and
 * B 4-8, then its optimizer step for `update_length` ms. */
static bg_timeline_t *busy_stages(double update_length) {
    static const char *const names[] = {"cuda:0", "cuda:1"};
    bg_timeline_t *tl = make_timeline(BG_SCHEDULE_1F1B, 2, 2, 1, 1, names);
    check_ok(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, 0, 10e-3);
    for (int d = 0; d < 2; d++) {
        add(tl, BG_EVENT_FORWARD, d, d, 0, -1, 0, 0, 4);
        add(tl, BG_EVENT_BACKWARD, d, d, 0, -1, 0, 4, 8);
        add(tl, BG_EVENT_STEP, d, d, -1, -1, 0, 8, 8 + update_length);
    }
    return tl;
}

/* Where the optimizer steps take much of the step the bubble reads below
 * theory, and a line says why and what it is without them; not where the
 * bubble is at or above theory, nor where the optimizer step is under 5%
 * of the step. */
static void test_summary_print_below_theory(void **state) {
    (void)state;
    char line[256];
    /* 6 ms of optimizer step: each device idle 2 of 10 ms (20%), 2 of the
     * other 4 (50%). */
    bg_timeline_t *tl = two_stages(4, 6, 0);
    bg_timeline_summary_t *s = NULL;
    check_ok(bg_timeline_summarize(tl, &s));
    expect_near(s->bubble_measured, 0.2, EPS);
    expect_near(s->bubble_theory, 0.5, EPS);
    expect_near(s->device[0].update_s, 6e-3, EPS);
    expect_near(s->device[1].update_s, 6e-3, EPS);
    bg_timeline_summary_destroy(s);
    assert_true(says_below_theory(tl, line, sizeof line));
    assert_string_equal(line, "(below theory: the optimizer step, 60.0% of a device's step on "
                              "average, is busy time, which the theory, of F and B alone, "
                              "leaves out; without it the bubble is 50.0%)");
    /* 1 ms of it after F and B 4 ms late: idle 7 of 10 ms, above theory. */
    assert_false(says_below_theory(two_stages(8, 1, 4), line, sizeof line));
    /* Both devices computing 8 of 10 ms: below theory, and said so with a
     * 1 ms optimizer step; not with one of 0.3 ms (3%). */
    assert_true(says_below_theory(busy_stages(1), line, sizeof line));
    assert_false(says_below_theory(busy_stages(0.3), line, sizeof line));
    assert_false(says_below_theory(hand_timeline(), line, sizeof line));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_figures),
        cmocka_unit_test(test_summary_edge_cases),
        cmocka_unit_test(test_theoretical_bubble),
        cmocka_unit_test(test_summary_print),
        cmocka_unit_test(test_summary_room_chain),
        cmocka_unit_test(test_start_waits),
        cmocka_unit_test(test_other_idle),
        cmocka_unit_test(test_summary_print_interleaved),
        cmocka_unit_test(test_summary_print_one_device),
        cmocka_unit_test(test_summary_print_below_theory),
        cmocka_unit_test(test_summary_json),
        cmocka_unit_test(test_link_waits),
        cmocka_unit_test(test_wake_waits),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_svg_timeline),
        cmocka_unit_test(test_svg_chart),
        cmocka_unit_test(test_unwritable_paths),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
