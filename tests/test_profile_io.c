/* Profiles on disk: a save that runs out of memory writes nothing, a load
 * gives back what was saved, and repeated stage entries are named; and
 * what a measurement tells a progress display. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model_spec.h"
#include "profile.h"
#include "status.h"
#include "support/scratch.h"

static const char model_text[] = "input channels=1 height=4 width=4\n"
                                 "flatten\n"
                                 "dense units=3\n"
                                 "softmax_cross_entropy\n";

/* cJSON's `fail_at`-th allocation fails, the others succeed (0: none
 * fails). */
static int allocations, fail_at;

static void *counting_malloc(size_t size) {
    if (fail_at > 0 && ++allocations == fail_at) return NULL;
    return malloc(size);
}

static void set_failing_allocation(int at) {
    allocations = 0;
    fail_at = at;
    cJSON_Hooks hooks = {.malloc_fn = at > 0 ? counting_malloc : NULL, .free_fn = NULL};
    cJSON_InitHooks(&hooks);
}

static bg_model_spec_t *parse_model(void) {
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("test.model", model_text, strlen(model_text), &spec),
                     BG_OK);
    return spec;
}

/* A version 2 profile of `spec` with `count` stage entries of layers
 * first[i]..last[i] (slots 1), every time a distinct number. */
static bg_profile_t *make_profile(const bg_model_spec_t *spec, int count, const int *first,
                                  const int *last) {
    bg_profile_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->version = 2;
    p->layers = spec->num_layers;
    p->batch = 8;
    p->other_sizes = 2;
    p->other_size[0] = 2;
    p->other_size[1] = 32;
    p->copy_bytes_per_s = 1e9;
    p->stash_slots = 2;
    p->handoff_s = 5e-6;
    p->wake_s = 3e-6;
    p->fingerprint = spec->fingerprint;
    strcpy(p->device, "cpu");
    strcpy(p->optimizer, "adam");
    p->optimizer_states = 2;
    p->layer = calloc((size_t)p->layers, sizeof *p->layer);
    assert_non_null(p->layer);
    for (int i = 0; i < p->layers; i++) {
        bg_layer_profile_t *l = &p->layer[i];
        l->forward_s = 1e-6 * (i + 1);
        l->backward_data_s = 2e-6 * (i + 1);
        l->backward_weights_s = 3e-6 * (i + 1);
        l->update_s = 4e-6 * (i + 1);
        l->send_s = 5e-7 * (i + 1);
        l->recv_s = 6e-7 * (i + 1);
        l->weight_check_s = 7e-8 * (i + 1);
        for (int k = 0; k < 2; k++)
            l->at_size[k] =
                (bg_layer_at_size_t){3e-7 * (i + 1) + k, 4e-7 * (i + 1) + k, 5e-7 * (i + 1) + k};
    }
    p->stage_count = count;
    p->stage = calloc((size_t)(count > 0 ? count : 1), sizeof *p->stage);
    assert_non_null(p->stage);
    for (int i = 0; i < count; i++) {
        bg_stage_profile_t *s = &p->stage[i];
        s->first = first[i];
        s->last = last[i];
        s->slots = 1;
        s->forward_s = 1e-5 * (i + 1);
        s->backward_s = 2e-5 * (i + 1);
        s->update_s = 3e-5 * (i + 1);
        s->recv_s = s->send_s = s->grad_recv_s = s->grad_send_s = 1e-6;
        s->check_s = s->grad_check_s = s->weight_check_s = 1e-7;
        s->loaded = (bg_stage_load_t){
            .forward_s = 1.5e-5, .backward_s = 2.5e-5, .update_s = 3.5e-5, .copies_s = 4e-6};
        for (int k = 0; k < BG_NEIGHBOUR_KINDS; k++) {
            s->after_wait.forward[k] = 1.1 + k;
            s->after_wait.backward[k] = 1.2 + k;
        }
    }
    return p;
}

/* Equal to a part in 1e15: cJSON writes 15 significant digits where they
 * read back within a few units in the last place, 17 where they do not. */
static int same_time(double got, double want) { return fabs(got - want) <= 1e-15 * fabs(want); }

/* Each cJSON allocation of a save fails in turn: each such save returns
 * BG_ERR_NOMEM and leaves no file; the first save that gets all it asks
 * for writes the profile, which loads back equal. */
static void test_save_is_whole_or_nothing(void **state) {
    const char *path = ((bg_test_scratch_file_t *)*state)->path;
    const char *dir = ((bg_test_scratch_file_t *)*state)->dir;
    bg_model_spec_t *spec = parse_model();
    const int first[] = {0, 1, 0}, last[] = {1, 3, 3};
    bg_profile_t *p = make_profile(spec, 3, first, last);
    int failures = 0;
    bg_status_t st = BG_ERR_NOMEM;
    for (int at = 1; st != BG_OK; at++) {
        assert_true(at < 10000);
        set_failing_allocation(at);
        st = bg_profile_save(p, path);
        set_failing_allocation(0);
        if (st != BG_OK) {
            assert_int_equal(st, BG_ERR_NOMEM);
            assert_int_equal(bg_test_scratch_entries(dir), 0);
            failures++;
        }
    }
    /* The root, the layer and stage objects and their fields: dozens. */
    assert_true(failures > 50);

    bg_profile_t *back = NULL;
    assert_int_equal(bg_profile_load(path, spec, &back), BG_OK);
    assert_int_equal(back->stage_count, 3);
    assert_int_equal(back->stash_slots, 2);
    assert_string_equal(back->optimizer, "adam");
    for (int i = 0; i < p->layers; i++) {
        assert_true(same_time(back->layer[i].forward_s, p->layer[i].forward_s));
        assert_true(same_time(back->layer[i].weight_check_s, p->layer[i].weight_check_s));
        for (int k = 0; k < 2; k++) {
            const bg_layer_at_size_t *a = &p->layer[i].at_size[k], *b = &back->layer[i].at_size[k];
            assert_true(same_time(b->forward_s, a->forward_s) &&
                        same_time(b->backward_data_s, a->backward_data_s) &&
                        same_time(b->backward_weights_s, a->backward_weights_s));
        }
    }
    assert_int_equal(back->other_sizes, 2);
    assert_true(back->other_size[0] == 2 && back->other_size[1] == 32);
    for (int i = 0; i < 3; i++) {
        const bg_stage_profile_t *a = &p->stage[i], *b = &back->stage[i];
        assert_int_equal(b->first, a->first);
        assert_int_equal(b->last, a->last);
        assert_true(same_time(b->forward_s, a->forward_s));
        assert_true(same_time(b->update_s, a->update_s));
        assert_true(same_time(b->loaded.copies_s, a->loaded.copies_s));
        assert_true(same_time(b->after_wait.backward[BG_NEIGHBOUR_UPDATE],
                              a->after_wait.backward[BG_NEIGHBOUR_UPDATE]));
    }
    bg_profile_destroy(back);
    bg_profile_destroy(p);
    bg_model_spec_destroy(spec);
}

/* Loads a profile with these stage entries; returns the status and leaves
 * the message in bg_error_message(). */
static bg_status_t load_entries(const char *path, int count, const int *first, const int *last) {
    bg_model_spec_t *spec = parse_model();
    bg_profile_t *p = make_profile(spec, count, first, last);
    assert_int_equal(bg_profile_save(p, path), BG_OK);
    bg_profile_destroy(p);
    bg_profile_t *back = NULL;
    const bg_status_t st = bg_profile_load(path, spec, &back);
    bg_profile_destroy(back);
    bg_model_spec_destroy(spec);
    return st;
}

/* The message names the first entry (in the file's order) that repeats an
 * earlier one, and the earliest it repeats. */
static void test_repeated_stage_entries(void **state) {
    const char *path = ((bg_test_scratch_file_t *)*state)->path;
    char want[256];

    const int f1[] = {0, 1, 0, 2, 1, 0}, l1[] = {1, 3, 1, 3, 3, 1};
    assert_int_equal(load_entries(path, 6, f1, l1), BG_ERR_PARSE);
    snprintf(want, sizeof want, "%s: stage entry 2 repeats stage entry 0 (layers 0..0, 1 slot)",
             path);
    assert_string_equal(bg_error_message(), want);

    /* Entry 3 repeats 2 before entry 4 repeats 0. */
    const int f2[] = {0, 1, 2, 2, 0}, l2[] = {3, 3, 3, 3, 3};
    assert_int_equal(load_entries(path, 5, f2, l2), BG_ERR_PARSE);
    snprintf(want, sizeof want, "%s: stage entry 3 repeats stage entry 2 (layers 2..2, 1 slot)",
             path);
    assert_string_equal(bg_error_message(), want);

    /* Distinct entries, the same layers in another order, load. */
    const int f3[] = {2, 0, 1, 0}, l3[] = {3, 3, 3, 1};
    assert_int_equal(load_entries(path, 4, f3, l3), BG_OK);
}

/* A profile whose every layer takes 0 s forward and backward is refused,
 * naming the file (until 2026-12-04 plan then predicted a step of 0 ms and
 * sweep inf samples/s); one layer with a time is enough. */
static void test_no_time_at_all(void **state) {
    const char *path = ((bg_test_scratch_file_t *)*state)->path;
    bg_model_spec_t *spec = parse_model();
    for (int timed = -1; timed < spec->num_layers; timed++) {
        bg_profile_t *p = make_profile(spec, 0, NULL, NULL);
        for (int i = 0; i < p->layers; i++) {
            bg_layer_profile_t *l = &p->layer[i];
            if (i == timed) continue;
            l->forward_s = l->backward_data_s = l->backward_weights_s = 0;
        }
        assert_int_equal(bg_profile_save(p, path), BG_OK);
        bg_profile_destroy(p);
        bg_profile_t *back = NULL;
        const bg_status_t st = bg_profile_load(path, spec, &back);
        assert_int_equal(st, timed < 0 ? BG_ERR_PARSE : BG_OK);
        assert_int_equal(back == NULL, timed < 0);
        if (timed < 0) {
            char want[256];
            snprintf(want, sizeof want,
                     "%s: the layers' forwards and backwards take 0 s in all, less than a "
                     "nanosecond: a profile measures them",
                     path);
            assert_non_null(strstr(bg_error_message(), want));
        }
        bg_profile_destroy(back);
    }
    /* Less in all than a nanosecond is no measurement either (a hand-edited
     * 1e-300 made plan, simulate and sweep each show another throughput);
     * a nanosecond is one. */
    for (int ns = 0; ns < 2; ns++) {
        bg_profile_t *p = make_profile(spec, 0, NULL, NULL);
        for (int i = 0; i < p->layers; i++) {
            bg_layer_profile_t *l = &p->layer[i];
            l->forward_s = l->backward_data_s = l->backward_weights_s = 0;
        }
        p->layer[0].forward_s = ns ? 1e-9 : 1e-300;
        assert_int_equal(bg_profile_save(p, path), BG_OK);
        bg_profile_destroy(p);
        bg_profile_t *back = NULL;
        assert_int_equal(bg_profile_load(path, spec, &back), ns ? BG_OK : BG_ERR_PARSE);
        if (!ns)
            assert_non_null(
                strstr(bg_error_message(), "take 1e-300 s in all, less than a nanosecond"));
        bg_profile_destroy(back);
    }
    /* So is a stage entry's forward and backward (until 2026-12-05 a
     * profile whose stages took 0 s gave a 0.001 ms stage and 112,013
     * samples/s); a nanosecond passes. */
    for (int ns = 0; ns < 2; ns++) {
        const int first[] = {0, 1}, last[] = {1, 3};
        bg_profile_t *p = make_profile(spec, 2, first, last);
        p->stage[1].forward_s = 0;
        p->stage[1].backward_s = ns ? 1e-9 : 0;
        p->stage[1].loaded = (bg_stage_load_t){0}; /* its 4e-5 s would be past 100 x 1e-9 */
        assert_int_equal(bg_profile_save(p, path), BG_OK);
        bg_profile_destroy(p);
        bg_profile_t *back = NULL;
        assert_int_equal(bg_profile_load(path, spec, &back), ns ? BG_OK : BG_ERR_PARSE);
        if (!ns && strstr(bg_error_message(),
                          ": stage entry 1 (layers 1..2): its forward and backward take 0 s in "
                          "all, less than a nanosecond") == NULL)
            fail_msg("%s", bg_error_message());
        bg_profile_destroy(back);
    }
    bg_model_spec_destroy(spec);
}

/* The sizes profile times the layers at by default, for a step of B
 * samples in micro-batches of ceil(B / M): 1 and B, and geometric middles
 * of the farthest neighbours while two are over 4 times apart, at most 6. */
static void test_default_sizes(void **state) {
    (void)state;
    static const struct {
        int64_t batch, micro;
        int count;
        int64_t sizes[BG_PROFILE_MAX_OTHER_SIZES];
    } cases[] = {
        {1, 1, 0, {0}},                                          /* nothing but 1 */
        {5, 5, 2, {1, 2}},                                       /* 1, 5: 5x apart; middle 2 */
        {8, 8, 2, {1, 3}},                                       /* 1, 8: 8x apart; middle 3 */
        {8, 1, 2, {3, 8}},                                       /* the micro-batch is 1 */
        {8, 2, 2, {1, 8}},                                       /* 1, 2, 8: within 4x */
        {64, 16, 3, {1, 4, 64}},                                 /* 1-16 is the widest */
        {64, 22, 5, {1, 2, 5, 10, 64}},                          /* 1-22, 1-5, then 5-22 */
        {100, 15, 4, {1, 4, 39, 100}},                           /* 1-15, then 15-100 */
        {1048576, 349526, 6, {1, 24, 119, 591, 14373, 1048576}}, /* stops at 6 sizes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t got[BG_PROFILE_MAX_OTHER_SIZES] = {0};
        const int count = bg_profile_default_sizes(cases[i].batch, cases[i].micro, got);
        assert_int_equal(count, cases[i].count);
        for (int k = 0; k < count; k++) assert_int_equal(got[k], cases[i].sizes[k]);
    }
}

/* A range's time beside a co-runner is kept up to 100 times its time
 * alone (the bound after a wait has), and past it is not measured: 0s,
 * which the simulator prices as alone. The file holds what it was given;
 * the reader reads one past the bound as none. */
static void test_load_bound(void **state) {
    const char *path = ((bg_test_scratch_file_t *)*state)->path;
    bg_model_spec_t *spec = parse_model();
    const int first[] = {0, 1}, last[] = {1, 3};
    for (int past = 0; past < 2; past++) {
        bg_profile_t *p = make_profile(spec, 2, first, last);
        bg_stage_profile_t *s = &p->stage[1];
        const double bound = BG_PROFILE_MAX_AFTER_WAIT_RATIO * (s->forward_s + s->backward_s);
        /* Either side by a part in 1e12: cJSON writes 15 digits where they
         * read back within its epsilon, so the bound itself may move by one
         * unit in the last place. */
        s->loaded.forward_s = bound * (past ? 1 + 1e-12 : 1 - 1e-12);
        s->loaded.backward_s = 0;
        assert_int_equal(bg_profile_save(p, path), BG_OK);
        bg_profile_destroy(p);
        bg_profile_t *back = NULL;
        assert_int_equal(bg_profile_load(path, spec, &back), BG_OK);
        if (past) {
            assert_true(back->stage[1].loaded.forward_s == 0 &&
                        back->stage[1].loaded.update_s == 0 && back->stage[1].loaded.copies_s == 0);
        } else {
            assert_true(fabs(back->stage[1].loaded.forward_s - bound * (1 - 1e-12)) <
                        1e-14 * bound);
        }
        assert_true(back->stage[0].loaded.forward_s == 1.5e-5); /* the other, kept */
        bg_profile_destroy(back);
    }
    bg_model_spec_destroy(spec);
}

/* What a measurement tells a progress display: each phase named, then
 * its count from 0 to its total, one call a unit. */
typedef struct phases_seen {
    char name[4][80];
    int64_t last_done[4], total[4], calls[4];
    int count;
    int out_of_order; /* a count that did not follow the one before it */
} phases_seen_t;

static void seen_phase(void *ctx, const char *what) {
    phases_seen_t *seen = ctx;
    if (seen->count < 4) snprintf(seen->name[seen->count], sizeof seen->name[0], "%s", what);
    seen->count++;
}

static void seen_progress(void *ctx, int64_t done, int64_t total) {
    phases_seen_t *seen = ctx;
    const int k = seen->count - 1;
    if (k < 0 || k >= 4) return;
    if (seen->calls[k] > 0 ? done != seen->last_done[k] + 1 : done != 0) seen->out_of_order = 1;
    seen->last_done[k] = done;
    seen->total[k] = total;
    seen->calls[k]++;
}

/* A profile of the small model at 4 samples, and at 2: three phases, the
 * layers' rounds at each size (2 untimed and the 1 timed), then the layer
 * ranges, each counted through to its end. */
static void test_measure_phases(void **state) {
    (void)state;
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("spec", model_text, strlen(model_text), &spec), BG_OK);
    phases_seen_t seen = {0};
    bg_profile_config_t cfg = BG_PROFILE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.batch = 4;
    cfg.other_sizes = 1;
    cfg.other_size[0] = 2;
    cfg.repetitions = 1;
    cfg.stash_slots = 1;
    cfg.progress = seen_progress;
    cfg.phase = seen_phase;
    cfg.progress_ctx = &seen;
    bg_profile_t *p = NULL;
    assert_int_equal(bg_profile_measure(&cfg, &p), BG_OK);
    assert_int_equal(seen.count, 3);
    assert_false(seen.out_of_order);
    assert_string_equal(seen.name[0], "timing the layers at 4 samples, in rounds:");
    assert_string_equal(seen.name[1], "timing the layers at 2 samples, in rounds:");
    assert_string_equal(seen.name[2], BG_PROFILE_PHASE_RANGES);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(seen.total[k], 3);
        assert_int_equal(seen.last_done[k], 3);
    }
    assert_true(seen.total[2] > 0);
    assert_int_equal(seen.last_done[2], seen.total[2]);
    bg_profile_destroy(p);
    bg_model_spec_destroy(spec);
}

static int setup(void **state) { return bg_test_scratch_file_setup(state, "profile", "p.json"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_save_is_whole_or_nothing, setup,
                                        bg_test_scratch_file_teardown),
        cmocka_unit_test_setup_teardown(test_no_time_at_all, setup, bg_test_scratch_file_teardown),
        cmocka_unit_test_setup_teardown(test_repeated_stage_entries, setup,
                                        bg_test_scratch_file_teardown),
        cmocka_unit_test_setup_teardown(test_load_bound, setup, bg_test_scratch_file_teardown),
        cmocka_unit_test(test_default_sizes),
        cmocka_unit_test(test_measure_phases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
