/* Pipeline schedules: exact op lists of small gpipe, 1f1b, zb-h1 and
 * interleaved schedules; the validator accepting every generated schedule
 * over K 1..16, M 1..64, V 1..4 (and its speed); mutations of generated
 * schedules (every dropped or duplicated op rejected, adjacent swaps
 * classified); hand-built deadlocks; stash windows against hand
 * derivations; rejected requests and their messages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schedule.h"

enum { TEXT_SIZE = 4096, MAX_BUILT_OPS = 64 };

static void check_ok(bg_status_t st) {
    if (st != BG_OK) fail_msg("status %s: %s", bg_status_name(st), bg_error_message());
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bg_schedule_t *make(bg_schedule_kind_t kind, int devices, int chunks, int microbatches,
                           int forward_only) {
    bg_schedule_config_t cfg = BG_SCHEDULE_CONFIG_INIT;
    cfg.kind = kind;
    cfg.devices = devices;
    cfg.chunks = chunks;
    cfg.microbatches = microbatches;
    cfg.forward_only = forward_only;
    bg_schedule_t *s = NULL;
    check_ok(bg_schedule_create(&cfg, &s));
    assert_non_null(s);
    return s;
}

#define expect_device(s, device, want) expect_device_at((s), (device), (want), __FILE__, __LINE__)

static void expect_device_at(const bg_schedule_t *s, int device, const char *want, const char *file,
                             int line) {
    char text[TEXT_SIZE];
    bg_schedule_format_device(s, device, text, sizeof text);
    if (strcmp(text, want) == 0) return;
    print_error("device %d: \"%s\"\n             want \"%s\"\n", device, text, want);
    _fail(file, line);
}

#define expect_invalid(st, fragment) expect_invalid_at((st), (fragment), __FILE__, __LINE__)

/* st is BG_ERR_INVALID and the message contains fragment. */
static void expect_invalid_at(bg_status_t st, const char *fragment, const char *file, int line) {
    if (st == BG_ERR_INVALID && strstr(bg_error_message(), fragment) != NULL) return;
    print_error("status %s, message \"%s\"; want invalid with \"%s\"\n", bg_status_name(st),
                bg_error_message(), fragment);
    _fail(file, line);
}

/* ---- schedules owned by the tests ---------------------------------------- */

/* A deep copy with room for `extra` more ops per device; free with
 * free_copy. The tests mutate these, never the library's schedules. */
static bg_schedule_t *copy_schedule(const bg_schedule_t *s, int extra) {
    bg_schedule_t *c = malloc(sizeof *c);
    assert_non_null(c);
    *c = *s;
    c->op_counts = malloc((size_t)s->devices * sizeof *c->op_counts);
    c->ops = malloc((size_t)s->devices * sizeof *c->ops);
    assert_non_null(c->op_counts);
    assert_non_null(c->ops);
    for (int d = 0; d < s->devices; d++) {
        c->op_counts[d] = s->op_counts[d];
        c->ops[d] = malloc((size_t)(s->op_counts[d] + extra) * sizeof *c->ops[d]);
        assert_non_null(c->ops[d]);
        memcpy(c->ops[d], s->ops[d], (size_t)s->op_counts[d] * sizeof *c->ops[d]);
    }
    return c;
}

static void free_copy(bg_schedule_t *c) {
    for (int d = 0; d < c->devices; d++) free(c->ops[d]);
    free(c->ops);
    free(c->op_counts);
    free(c);
}

/* Parses "F0 F1 B0@2 W3 STEP" (an op without @ is on the device's own
 * stage) into device d's list. */
static void parse_device(bg_schedule_t *s, int d, const char *text) {
    s->ops[d] = malloc(MAX_BUILT_OPS * sizeof *s->ops[d]);
    assert_non_null(s->ops[d]);
    int n = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        assert_true(n < MAX_BUILT_OPS);
        bg_op_t *op = &s->ops[d][n++];
        if (strncmp(p, "STEP", 4) == 0) {
            *op = (bg_op_t){BG_OP_STEP, -1, -1};
            p += 4;
            continue;
        }
        op->kind = *p == 'F' ? BG_OP_FORWARD : *p == 'B' ? BG_OP_BACKWARD : BG_OP_WEIGHT;
        assert_true(*p == 'F' || *p == 'B' || *p == 'W');
        char *end;
        op->microbatch = (int)strtol(p + 1, &end, 10);
        op->stage = d;
        if (*end == '@') op->stage = (int)strtol(end + 1, &end, 10);
        p = end;
    }
    s->op_counts[d] = n;
}

/* A hand-built schedule, one text list per device. */
static bg_schedule_t *build(int devices, int chunks, int microbatches, int split_backward,
                            const char *const *lists) {
    bg_schedule_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->kind = chunks > 1 ? BG_SCHEDULE_INTERLEAVED : BG_SCHEDULE_1F1B;
    s->devices = devices;
    s->chunks = chunks;
    s->stages = devices * chunks;
    s->microbatches = microbatches;
    s->split_backward = split_backward;
    s->op_counts = calloc((size_t)devices, sizeof *s->op_counts);
    s->ops = calloc((size_t)devices, sizeof *s->ops);
    assert_non_null(s->op_counts);
    assert_non_null(s->ops);
    for (int d = 0; d < devices; d++) parse_device(s, d, lists[d]);
    return s;
}

static void drop_op(bg_schedule_t *s, int d, int i) {
    memmove(&s->ops[d][i], &s->ops[d][i + 1], (size_t)(s->op_counts[d] - i - 1) * sizeof(bg_op_t));
    s->op_counts[d]--;
}

/* Inserts op at position i of device d (the copy needs the room). */
static void insert_op(bg_schedule_t *s, int d, int i, bg_op_t op) {
    memmove(&s->ops[d][i + 1], &s->ops[d][i], (size_t)(s->op_counts[d] - i) * sizeof(bg_op_t));
    s->ops[d][i] = op;
    s->op_counts[d]++;
}

static void swap_ops(bg_schedule_t *s, int d, int i) {
    const bg_op_t t = s->ops[d][i];
    s->ops[d][i] = s->ops[d][i + 1];
    s->ops[d][i + 1] = t;
}

/* ---- names and exact op lists -------------------------------------------- */

static void test_kind_parse(void **state) {
    (void)state;
    const char *names[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};
    const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_GPIPE, BG_SCHEDULE_1F1B,
                                        BG_SCHEDULE_INTERLEAVED, BG_SCHEDULE_ZB_H1};
    for (int k = 0; k < 4; k++) {
        bg_schedule_kind_t kind = BG_SCHEDULE_GPIPE;
        check_ok(bg_schedule_kind_parse(names[k], &kind));
        assert_int_equal(kind, kinds[k]);
        assert_string_equal(bg_schedule_kind_name(kind), names[k]);
    }
    bg_schedule_kind_t kind = BG_SCHEDULE_ZB_H1;
    expect_invalid(bg_schedule_kind_parse("pipedream", &kind), "'pipedream'");
    for (int k = 0; k < 4; k++) assert_non_null(strstr(bg_error_message(), names[k]));
    assert_int_equal(kind, BG_SCHEDULE_ZB_H1);
    expect_invalid(bg_schedule_kind_parse("1F1B", &kind), "expected gpipe");
    assert_string_equal(bg_schedule_kind_name((bg_schedule_kind_t)42), "unknown");
}

static void test_gpipe_ops(void **state) {
    (void)state;
    bg_schedule_t *s = make(BG_SCHEDULE_GPIPE, 2, 1, 3, 0);
    assert_int_equal(s->stages, 2);
    assert_int_equal(s->split_backward, 0);
    expect_device(s, 0, "F0 F1 F2 B0 B1 B2 STEP");
    expect_device(s, 1, "F0 F1 F2 B0 B1 B2 STEP");
    assert_int_equal(s->op_counts[0], 7);
    assert_int_equal(s->ops[1][3].kind, BG_OP_BACKWARD);
    assert_int_equal(s->ops[1][3].stage, 1);
    assert_int_equal(s->ops[1][3].microbatch, 0);
    assert_int_equal(s->ops[1][6].stage, -1);
    assert_int_equal(s->ops[1][6].microbatch, -1);
    bg_schedule_destroy(s);
}

static void test_1f1b_ops(void **state) {
    (void)state;
    bg_schedule_t *s = make(BG_SCHEDULE_1F1B, 3, 1, 4, 0);
    /* Warm-ups min(S-1-s, M) = 2, 1, 0. */
    expect_device(s, 0, "F0 F1 F2 B0 F3 B1 B2 B3 STEP");
    expect_device(s, 1, "F0 F1 B0 F2 B1 F3 B2 B3 STEP");
    expect_device(s, 2, "F0 B0 F1 B1 F2 B2 F3 B3 STEP");
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_1F1B, 4, 1, 2, 0); /* M < K: warm-up capped at M */
    expect_device(s, 0, "F0 F1 B0 B1 STEP");
    expect_device(s, 1, "F0 F1 B0 B1 STEP");
    expect_device(s, 2, "F0 F1 B0 B1 STEP");
    expect_device(s, 3, "F0 B0 F1 B1 STEP");
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_1F1B, 1, 1, 3, 0);
    expect_device(s, 0, "F0 B0 F1 B1 F2 B2 STEP");
    bg_schedule_destroy(s);
}

static void test_zb_h1_ops(void **state) {
    (void)state;
    bg_schedule_t *s = make(BG_SCHEDULE_ZB_H1, 2, 1, 3, 0);
    assert_int_equal(s->split_backward, 1);
    /* Device 0 (first stage): one warm-up F, each W right after its B.
     * Device 1 (last stage): W(k) lags one B behind, W2 runs last. */
    expect_device(s, 0, "F0 F1 B0 W0 F2 B1 W1 B2 W2 STEP");
    expect_device(s, 1, "F0 B0 F1 B1 W0 F2 B2 W1 W2 STEP");
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_ZB_H1, 4, 1, 8, 0);
    expect_device(s, 0,
                  "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7 "
                  "STEP");
    expect_device(s, 3,
                  "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7 "
                  "STEP");
    expect_device(s, 2,
                  "F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 B7 W5 W6 "
                  "W7 STEP");
    bg_schedule_destroy(s);
}

static void test_interleaved_ops(void **state) {
    (void)state;
    /* "F0@2" is micro-batch 0 of stage 2 (device 0's chunk 1). Device 0
     * warms up with min(2 (K-d-1) + (V-1) K, M V) = 4 forwards, device 1
     * with 2. */
    bg_schedule_t *s = make(BG_SCHEDULE_INTERLEAVED, 2, 2, 4, 0);
    assert_int_equal(s->stages, 4);
    expect_device(s, 0,
                  "F0@0 F1@0 F0@2 F1@2 F2@0 B0@2 F3@0 B1@2 F2@2 B0@0 F3@2 B1@0 B2@2 B3@2 B2@0 "
                  "B3@0 STEP");
    expect_device(s, 1,
                  "F0@1 F1@1 F0@3 B0@3 F1@3 B1@3 F2@1 B0@1 F3@1 B1@1 F2@3 B2@3 F3@3 B3@3 B2@1 "
                  "B3@1 STEP");
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_INTERLEAVED, 2, 2, 2, 0); /* M = K: every forward first */
    expect_device(s, 0, "F0@0 F1@0 F0@2 F1@2 B0@2 B1@2 B0@0 B1@0 STEP");
    expect_device(s, 1, "F0@1 F1@1 F0@3 F1@3 B0@3 B1@3 B0@1 B1@1 STEP");
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_INTERLEAVED, 2, 1, 4, 0); /* V = 1: 1F1B with 2 (K-d-1) warm-ups */
    expect_device(s, 0, "F0 F1 F2 B0 F3 B1 B2 B3 STEP");
    expect_device(s, 1, "F0 B0 F1 B1 F2 B2 F3 B3 STEP");
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_INTERLEAVED, 1, 3, 2, 0); /* K = 1: all transfers local */
    expect_device(s, 0, "F0@0 F0@1 F0@2 B0@2 F1@0 B0@1 F1@1 B0@0 F1@2 B1@2 B1@1 B1@0 STEP");
    bg_schedule_destroy(s);
}

static void test_forward_only_ops(void **state) {
    (void)state;
    bg_schedule_t *s = make(BG_SCHEDULE_GPIPE, 3, 1, 2, 1);
    assert_int_equal(s->forward_only, 1);
    expect_device(s, 1, "F0 F1");
    assert_int_equal(bg_schedule_stash_slots(s, 1), 0);
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_ZB_H1, 2, 1, 3, 1);
    assert_int_equal(s->split_backward, 0);
    expect_device(s, 0, "F0 F1 F2");
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_INTERLEAVED, 2, 2, 4, 1);
    expect_device(s, 1, "F0@1 F1@1 F0@3 F1@3 F2@1 F3@1 F2@3 F3@3");
    bg_schedule_destroy(s);
}

static void test_format_device(void **state) {
    (void)state;
    bg_schedule_t *s = make(BG_SCHEDULE_GPIPE, 2, 1, 3, 0);
    char text[8];
    memset(text, 'x', sizeof text);
    assert_string_equal(bg_schedule_format_device(s, 0, text, 6), "F0 F1");
    assert_string_equal(bg_schedule_format_device(s, 0, text, 1), "");
    assert_string_equal(bg_schedule_format_device(s, 2, text, sizeof text), "");
    assert_string_equal(bg_schedule_format_device(s, -1, text, sizeof text), "");
    assert_ptr_equal(bg_schedule_format_device(s, 0, text, 0), text);
    bg_schedule_destroy(s);
}

/* ---- the sweep ----------------------------------------------------------- */

static int min_int(int a, int b) { return a < b ? a : b; }

/* Checks one generated schedule: valid, op counts, stash windows. */
static void check_generated(const bg_schedule_t *s) {
    const int K = s->devices, V = s->chunks, M = s->microbatches;
    check_ok(bg_schedule_validate(s));
    const int per_device = s->forward_only ? V * M : V * M * (s->split_backward ? 3 : 2) + 1;
    for (int d = 0; d < K; d++) assert_int_equal(s->op_counts[d], per_device);
    for (int stage = 0; stage < s->stages; stage++) {
        const int slots = bg_schedule_stash_slots(s, stage);
        if (s->forward_only) {
            assert_int_equal(slots, 0);
            continue;
        }
        switch (s->kind) {
        case BG_SCHEDULE_GPIPE: assert_int_equal(slots, M); break;
        case BG_SCHEDULE_1F1B: assert_int_equal(slots, min_int(K - stage, M)); break;
        case BG_SCHEDULE_ZB_H1:
            /* K-1-s warm-ups and W's lagging s places: K live at most. */
            assert_int_equal(slots, min_int(K, M));
            break;
        case BG_SCHEDULE_INTERLEAVED:
            assert_true(slots >= 1);
            assert_true(slots <= M);
            break;
        }
    }
}

static void test_sweep_all_valid(void **state) {
    (void)state;
    const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_GPIPE, BG_SCHEDULE_1F1B, BG_SCHEDULE_ZB_H1,
                                        BG_SCHEDULE_INTERLEAVED};
    int checked = 0;
    const double start = now_ms();
    for (int k = 0; k < 4; k++)
        for (int K = 1; K <= 16; K++)
            for (int M = 1; M <= 64; M++)
                for (int V = 1; V <= 4; V++)
                    for (int forward_only = 0; forward_only <= 1; forward_only++) {
                        if (kinds[k] != BG_SCHEDULE_INTERLEAVED && V > 1) continue;
                        if (kinds[k] == BG_SCHEDULE_INTERLEAVED && M % K != 0) continue;
                        bg_schedule_t *s = make(kinds[k], K, V, M, forward_only);
                        check_generated(s);
                        bg_schedule_destroy(s);
                        checked++;
                    }
    /* 3 kinds * 16 * 64 + interleaved 4 V * sum over K of floor(64 / K) = 211,
     * each training and forward-only. */
    assert_int_equal(checked, 2 * (3 * 16 * 64 + 4 * 211));
    print_message("sweep: %d schedules generated, validated and measured in %.0f ms\n", checked,
                  now_ms() - start);
}

static void test_validate_fast(void **state) {
    (void)state;
    bg_schedule_t *s = make(BG_SCHEDULE_INTERLEAVED, 16, 4, 64, 0);
    const double start = now_ms();
    for (int rep = 0; rep < 10; rep++) check_ok(bg_schedule_validate(s));
    const double ms = (now_ms() - start) / 10;
    print_message("validate K=16 V=4 M=64 (%d ops per device): %.3f ms\n", s->op_counts[0], ms);
    assert_true(ms < 100.0);
    bg_schedule_destroy(s);
}

/* ---- mutations ----------------------------------------------------------- */

static int is_step(const bg_op_t *op) { return op->kind == BG_OP_STEP; }

/* b needs a on the same device: F before its B, B before its W. */
static int needs_locally(const bg_op_t *b, const bg_op_t *a) {
    if (a->stage != b->stage || a->microbatch != b->microbatch) return 0;
    return (b->kind == BG_OP_BACKWARD && a->kind == BG_OP_FORWARD) ||
           (b->kind == BG_OP_WEIGHT && a->kind == BG_OP_BACKWARD);
}

typedef struct mutation_counts {
    int ops, drops_rejected, duplicates_rejected, swaps, swaps_valid;
} mutation_counts_t;

/* Drops, duplicates and swaps every op of s. Every drop and duplicate must
 * be rejected. A swap must be rejected when it moves STEP, reverses two F's
 * or two B's of one stage (the channel order no longer matches the other
 * device's, K > 1) or puts an op before the op it needs; a swap that moves
 * a W otherwise keeps each device's sends and receives in order and must
 * stay valid. Other swaps may go either way. */
static mutation_counts_t mutate_all(const bg_schedule_t *s) {
    mutation_counts_t n = {0, 0, 0, 0, 0};
    assert_true(s->devices > 1);
    for (int d = 0; d < s->devices; d++) {
        for (int i = 0; i < s->op_counts[d]; i++) {
            n.ops++;
            bg_schedule_t *c = copy_schedule(s, 1);
            drop_op(c, d, i);
            bg_status_t st = bg_schedule_validate(c);
            n.drops_rejected += st == BG_ERR_INVALID;
            free_copy(c);

            c = copy_schedule(s, 1);
            insert_op(c, d, i + 1, s->ops[d][i]);
            st = bg_schedule_validate(c);
            n.duplicates_rejected += st == BG_ERR_INVALID;
            free_copy(c);

            if (i + 1 == s->op_counts[d]) continue;
            const bg_op_t *a = &s->ops[d][i], *b = &s->ops[d][i + 1];
            c = copy_schedule(s, 0);
            swap_ops(c, d, i);
            st = bg_schedule_validate(c);
            n.swaps++;
            assert_true(st == BG_OK || st == BG_ERR_INVALID);
            const int must_reject =
                is_step(a) || is_step(b) || needs_locally(b, a) ||
                (a->kind == b->kind && a->kind != BG_OP_WEIGHT && a->stage == b->stage);
            const int must_pass =
                !must_reject && (a->kind == BG_OP_WEIGHT || b->kind == BG_OP_WEIGHT);
            if (must_reject && st == BG_OK)
                fail_msg("device %d: swapping ops %d and %d was accepted", d, i, i + 1);
            if (must_pass && st != BG_OK)
                fail_msg("device %d: swapping ops %d and %d: %s", d, i, i + 1, bg_error_message());
            if (st == BG_OK) {
                n.swaps_valid++;
                assert_true(bg_schedule_stash_slots(c, a->stage >= 0 ? a->stage : b->stage) >= 1);
            }
            free_copy(c);
        }
    }
    return n;
}

static void test_mutations(void **state) {
    (void)state;
    const struct {
        bg_schedule_kind_t kind;
        int devices, chunks, microbatches;
        int ops;         /* K * (V M (2 or 3) + 1) */
        int swaps_valid; /* the dry run's count, kept to catch changes in it */
    } cases[] = {
        {BG_SCHEDULE_1F1B, 4, 1, 8, 4 * 17, 40},
        /* gpipe: only the last stage's F4 B0 -> B0 F4 (device 1 leaves F4
         * in the channel and goes on to take B0). */
        {BG_SCHEDULE_GPIPE, 3, 1, 5, 3 * 11, 1},
        {BG_SCHEDULE_ZB_H1, 4, 1, 8, 4 * 25, 70},
        {BG_SCHEDULE_INTERLEAVED, 2, 2, 4, 2 * 17, 17},
    };
    int total = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bg_schedule_t *s =
            make(cases[k].kind, cases[k].devices, cases[k].chunks, cases[k].microbatches, 0);
        const mutation_counts_t n = mutate_all(s);
        assert_int_equal(n.ops, cases[k].ops);
        assert_int_equal(n.drops_rejected, n.ops);
        assert_int_equal(n.duplicates_rejected, n.ops);
        assert_int_equal(n.swaps, n.ops - cases[k].devices);
        print_message("%s K=%d V=%d M=%d: %d ops, all drops and duplicates rejected, %d of %d "
                      "adjacent swaps still valid\n",
                      bg_schedule_kind_name(cases[k].kind), cases[k].devices, cases[k].chunks,
                      cases[k].microbatches, n.ops, n.swaps_valid, n.swaps);
        assert_int_equal(n.swaps_valid, cases[k].swaps_valid);
        total += n.ops;
        bg_schedule_destroy(s);
    }
    assert_int_equal(total, 235);
}

/* Reorderings and edits that must be rejected, with the message naming the
 * first offending op. */
static void test_specific_rejections(void **state) {
    (void)state;
    bg_schedule_t *f1b = make(BG_SCHEDULE_1F1B, 4, 1, 8, 0);
    bg_schedule_t *zb = make(BG_SCHEDULE_ZB_H1, 4, 1, 8, 0);

    bg_schedule_t *c = copy_schedule(f1b, 1); /* device 3: F0 B0 -> B0 F0 */
    swap_ops(c, 3, 0);
    expect_invalid(bg_schedule_validate(c),
                   "device 3, op 0 (B0 of stage 3): needs F0 of stage 3, which this device runs "
                   "later (op 1)");
    free_copy(c);

    c = copy_schedule(zb, 1); /* device 0: ... B0 W0 -> ... W0 B0 */
    swap_ops(c, 0, 4);
    expect_invalid(bg_schedule_validate(c),
                   "device 0, op 4 (W0 of stage 0): needs B0 of stage 0, which this device runs "
                   "later (op 5)");
    free_copy(c);

    c = copy_schedule(f1b, 1); /* STEP first on device 0 */
    insert_op(c, 0, 0, (bg_op_t){BG_OP_STEP, -1, -1});
    drop_op(c, 0, c->op_counts[0] - 1);
    expect_invalid(bg_schedule_validate(c), "device 0, op 0 (STEP): STEP is not the last op");
    free_copy(c);

    c = copy_schedule(f1b, 1); /* device 0's B7 moved onto device 1, before its STEP */
    const bg_op_t moved = c->ops[0][15];
    assert_int_equal(moved.kind, BG_OP_BACKWARD);
    assert_int_equal(moved.microbatch, 7);
    drop_op(c, 0, 15);
    insert_op(c, 1, 16, moved);
    expect_invalid(bg_schedule_validate(c),
                   "device 1, op 16 (B7 of stage 0): stage 0 belongs to device 0");
    free_copy(c);

    c = copy_schedule(f1b, 1);
    drop_op(c, 2, 5); /* device 2: F0 F1 B0 F2 B1 F3 ... */
    expect_invalid(bg_schedule_validate(c), "missing F3 of stage 2 (device 2 never runs it)");
    free_copy(c);

    c = copy_schedule(f1b, 1);
    drop_op(c, 2, c->op_counts[2] - 1);
    expect_invalid(bg_schedule_validate(c), "device 2: no STEP at the end");
    free_copy(c);

    c = copy_schedule(f1b, 1);
    insert_op(c, 1, 5, c->ops[1][2]);
    expect_invalid(bg_schedule_validate(c),
                   "device 1, op 5 (F2 of stage 1): duplicate (first at op 2)");
    free_copy(c);

    c = copy_schedule(f1b, 1);
    c->ops[1][3].stage = 9;
    expect_invalid(bg_schedule_validate(c), "device 1, op 3 (B0 of stage 9): stage out of range");
    c->ops[1][3].stage = 1;
    c->ops[1][3].microbatch = 8;
    expect_invalid(bg_schedule_validate(c), "device 1, op 3 (B8 of stage 1): micro-batch out of");
    c->ops[1][3].microbatch = -1;
    expect_invalid(bg_schedule_validate(c), "(B-1 of stage 1): micro-batch out of range");
    c->ops[1][3].microbatch = 0;
    c->ops[1][3].kind = BG_OP_WEIGHT;
    expect_invalid(bg_schedule_validate(c),
                   "device 1, op 3 (W0 of stage 1): W op in a schedule that does not split");
    c->ops[1][3].kind = BG_OP_BACKWARD;
    check_ok(bg_schedule_validate(c));
    c->stages = 5;
    expect_invalid(bg_schedule_validate(c), "5 stages, not K*V = 4");
    free_copy(c);

    c = copy_schedule(zb, 0);
    c->split_backward = 0;
    expect_invalid(bg_schedule_validate(c), "W op in a schedule that does not split");
    c->split_backward = 1;
    c->forward_only = 1;
    expect_invalid(bg_schedule_validate(c), "forward-only schedule cannot split");
    free_copy(c);

    bg_schedule_t *eval = make(BG_SCHEDULE_GPIPE, 2, 1, 2, 1);
    c = copy_schedule(eval, 1);
    insert_op(c, 0, 2, (bg_op_t){BG_OP_STEP, -1, -1});
    expect_invalid(bg_schedule_validate(c), "device 0, op 2 (STEP): STEP in a forward-only");
    free_copy(c);
    c = copy_schedule(eval, 1);
    insert_op(c, 1, 2, (bg_op_t){BG_OP_BACKWARD, 1, 0});
    expect_invalid(bg_schedule_validate(c), "device 1, op 2 (B0 of stage 1): backward op in a "
                                            "forward-only schedule");
    free_copy(c);
    bg_schedule_destroy(eval);

    expect_invalid(bg_schedule_validate(NULL), "no schedule");
    bg_schedule_destroy(zb);
    bg_schedule_destroy(f1b);
}

/* ---- deadlocks ----------------------------------------------------------- */

static void test_deadlock_out_of_order(void **state) {
    (void)state;
    /* Device 0 sends F0 then F1; device 1 waits for F1 first. */
    const char *lists[] = {"F0 F1 B0 B1 STEP", "F1 F0 B0 B1 STEP"};
    bg_schedule_t *s = build(2, 1, 2, 0, lists);
    expect_invalid(bg_schedule_validate(s),
                   "deadlock: device 0 waits at op 1 (F1 of stage 0): send to device 1, but the "
                   "channel still holds the message for F0 of stage 1 (device 1's op 1); device 1 "
                   "waits at op 0 (F1 of stage 1): receive from device 0, but the channel holds "
                   "the message for F0 of stage 1 (device 1's op 1)");
    free_copy(s);
}

static void test_deadlock_in_order(void **state) {
    (void)state;
    /* Every channel in order, yet each device sends twice in a row before
     * taking the other's message, and a channel holds one: device 0 is
     * stuck sending F3 (F2 not taken), device 1 sending B1 (B0 not taken).
     * Channels of two messages would let it finish. */
    const char *lists[] = {"F0 F1 F2 F3 B0 B1 B2 B3 STEP", "F0 F1 B0 B1 F2 F3 B2 B3 STEP"};
    bg_schedule_t *s = build(2, 1, 4, 0, lists);
    expect_invalid(bg_schedule_validate(s),
                   "deadlock: device 0 waits at op 3 (F3 of stage 0): send to device 1, but the "
                   "channel still holds the message for F2 of stage 1 (device 1's op 4); device 1 "
                   "waits at op 3 (B1 of stage 1): send to device 0, but the channel still holds "
                   "the message for B0 of stage 0 (device 0's op 4)");
    free_copy(s);

    /* Device 1 in plain 1F1B order deadlocks the same way (device 0 runs
     * three forwards ahead, 1F1B's warm-up is one); taking F2 between B0
     * and B1 completes. */
    const char *plain[] = {"F0 F1 F2 F3 B0 B1 B2 B3 STEP", "F0 B0 F1 B1 F2 B2 F3 B3 STEP"};
    s = build(2, 1, 4, 0, plain);
    expect_invalid(bg_schedule_validate(s), "device 1 waits at op 3 (B1 of stage 1): send to");
    free_copy(s);
    const char *fixed[] = {"F0 F1 F2 F3 B0 B1 B2 B3 STEP", "F0 F1 B0 F2 B1 F3 B2 B3 STEP"};
    s = build(2, 1, 4, 0, fixed);
    check_ok(bg_schedule_validate(s));
    free_copy(s);
}

static void test_deadlock_interleaved_wrap(void **state) {
    (void)state;
    /* K=2, V=2: device 1's chunk 0 (stage 1) feeds device 0's chunk 1
     * (stage 2) over the wrap-around channel. Device 0 running F0@2 before
     * F0@0 waits for stage 1, which waits for F0@0. */
    const char *lists[] = {"F0@2 F0@0 B0@2 B0@0 STEP", "F0@1 F0@3 B0@3 B0@1 STEP"};
    bg_schedule_t *s = build(2, 2, 1, 0, lists);
    expect_invalid(bg_schedule_validate(s),
                   "deadlock: device 0 waits at op 0 (F0 of stage 2): receive from device 1, "
                   "which is at op 0 (F0 of stage 1); device 1 waits at op 0 (F0 of stage 1): "
                   "receive from device 0, which is at op 0 (F0 of stage 2)");
    free_copy(s);
    const char *good[] = {"F0@0 F0@2 B0@2 B0@0 STEP", "F0@1 F0@3 B0@3 B0@1 STEP"};
    s = build(2, 2, 1, 0, good);
    check_ok(bg_schedule_validate(s));
    free_copy(s);
}

/* ---- stash windows ------------------------------------------------------- */

static void expect_stash(const bg_schedule_t *s, const int *want) {
    for (int stage = 0; stage < s->stages; stage++) {
        const int got = bg_schedule_stash_slots(s, stage);
        if (got != want[stage])
            fail_msg("stage %d: %d stash slots, want %d", stage, got, want[stage]);
    }
}

/* The op that completes a stage's weight gradients: the last B (W when
 * split) of the stage in its device's order, whatever its micro-batch. */
static void test_last_gradient_microbatch(void **state) {
    (void)state;
    const bg_schedule_kind_t kinds[] = {BG_SCHEDULE_GPIPE, BG_SCHEDULE_1F1B, BG_SCHEDULE_ZB_H1};
    for (int k = 0; k < 3; k++) {
        bg_schedule_t *s = make(kinds[k], 4, 1, 8, 0);
        for (int stage = 0; stage < 4; stage++)
            assert_int_equal(bg_schedule_last_gradient_microbatch(s, stage), 7);
        bg_schedule_destroy(s);
    }
    /* zb-h1 at M = 3: device 1's list ends "B2 W1 W2", its last W is 2;
     * the B that comes last is not it. */
    bg_schedule_t *s = make(BG_SCHEDULE_ZB_H1, 2, 1, 3, 0);
    assert_int_equal(bg_schedule_last_gradient_microbatch(s, 1), 2);
    bg_schedule_destroy(s);
    /* Hand-built, backwards in reverse order: the last is micro-batch 0. */
    const char *const reversed[] = {"F0 F1 F2 B2 B1 B0 STEP"};
    s = build(1, 1, 3, 0, reversed);
    check_ok(bg_schedule_validate(s));
    assert_int_equal(bg_schedule_last_gradient_microbatch(s, 0), 0);
    free_copy(s);
    const char *const split[] = {"F0 F1 B0 B1 W1 W0 STEP"};
    s = build(1, 1, 2, 1, split);
    check_ok(bg_schedule_validate(s));
    assert_int_equal(bg_schedule_last_gradient_microbatch(s, 0), 0);
    free_copy(s);
    /* Forward only: none; bad requests name the problem. */
    s = make(BG_SCHEDULE_1F1B, 2, 1, 4, 1);
    assert_int_equal(bg_schedule_last_gradient_microbatch(s, 1), -1);
    assert_int_equal(bg_schedule_last_gradient_microbatch(s, 2), -1);
    assert_non_null(strstr(bg_error_message(), "stage 2 out of range"));
    assert_int_equal(bg_schedule_last_gradient_microbatch(NULL, 0), -1);
    assert_non_null(strstr(bg_error_message(), "no schedule"));
    bg_schedule_destroy(s);
}

static void test_stash_slots(void **state) {
    (void)state;
    bg_schedule_t *s = make(BG_SCHEDULE_GPIPE, 4, 1, 8, 0);
    expect_stash(s, (const int[]){8, 8, 8, 8});
    assert_int_equal(bg_schedule_stash_slots(s, 4), -1);
    assert_non_null(strstr(bg_error_message(), "stage 4 out of range"));
    assert_int_equal(bg_schedule_stash_slots(s, -1), -1);
    assert_int_equal(bg_schedule_stash_slots(NULL, 0), -1);
    bg_schedule_destroy(s);

    s = make(BG_SCHEDULE_1F1B, 4, 1, 8, 0);
    expect_stash(s, (const int[]){4, 3, 2, 1}); /* min(K - s, M) */
    bg_schedule_destroy(s);
    s = make(BG_SCHEDULE_1F1B, 4, 1, 2, 0);
    expect_stash(s, (const int[]){2, 2, 2, 1});
    bg_schedule_destroy(s);

    /* zb-h1, K=4, M=8 (lists in test_zb_h1_ops). Stage s has w = 3 - s
     * warm-up forwards and runs W(i - s) after B(i); a micro-batch is held
     * until its W. F(w+i) runs after B(0..i-1) and W(0..i-1-s), so it sees
     * micro-batches max(0, i-s) .. w+i live: w+i+1 for i < s, then
     * w + s + 1 = 4 = K. 1F1B holds 4, 3, 2, 1: the later stages hold their
     * micro-batches longer, waiting for their deferred W's. */
    s = make(BG_SCHEDULE_ZB_H1, 4, 1, 8, 0);
    expect_stash(s, (const int[]){4, 4, 4, 4});
    bg_schedule_destroy(s);

    /* Interleaved K=2, V=2, M=4 (lists in test_interleaved_ops). Stage 0:
     * F0..F3 all run before B0@0, 4. Stage 2: F0@2 F1@2 then B0@2 B1@2
     * before F2@2, 2. Stage 1: F0@1 F1@1 F2@1 before B0@1, then F3@1 with
     * 1..3 live, 3. Stage 3 (the last): F and B alternate, 1. */
    s = make(BG_SCHEDULE_INTERLEAVED, 2, 2, 4, 0);
    expect_stash(s, (const int[]){4, 3, 2, 1});
    bg_schedule_destroy(s);
}

/* ---- requests ------------------------------------------------------------ */

static bg_status_t create(bg_schedule_kind_t kind, int devices, int chunks, int microbatches) {
    bg_schedule_config_t cfg = BG_SCHEDULE_CONFIG_INIT;
    cfg.kind = kind;
    cfg.devices = devices;
    cfg.chunks = chunks;
    cfg.microbatches = microbatches;
    static bg_schedule_t sentinel_schedule;
    bg_schedule_t *sentinel = &sentinel_schedule, *s = sentinel;
    const bg_status_t st = bg_schedule_create(&cfg, &s);
    if (st == BG_OK) {
        bg_schedule_destroy(s);
    } else {
        assert_ptr_equal(s, sentinel); /* untouched on failure */
    }
    return st;
}

static void test_invalid_requests(void **state) {
    (void)state;
    expect_invalid(create(BG_SCHEDULE_INTERLEAVED, 4, 2, 6),
                   "interleaved needs the micro-batch count (M=6) to be a multiple of the device "
                   "count (K=4): --microbatches 4, 8, 12 and so on, up to the batch");
    expect_invalid(create(BG_SCHEDULE_INTERLEAVED, 4, 1, 6), "(M=6)");
    expect_invalid(create(BG_SCHEDULE_1F1B, 2, 2, 4),
                   "--chunks applies only to the interleaved schedule (V=2 with 1f1b): add "
                   "--schedule interleaved, or leave --chunks out");
    expect_invalid(create(BG_SCHEDULE_ZB_H1, 2, 3, 4), "(V=3 with zb-h1)");
    expect_invalid(create(BG_SCHEDULE_GPIPE, 2, 2, 4), "(V=2 with gpipe)");
    expect_invalid(create(BG_SCHEDULE_1F1B, 2, 1, 0), "at least 1 micro-batch (M=0)");
    expect_invalid(create(BG_SCHEDULE_1F1B, 0, 1, 4), "at least 1 device (K=0)");
    expect_invalid(create(BG_SCHEDULE_1F1B, -3, 1, 4), "(K=-3)");
    expect_invalid(create(BG_SCHEDULE_INTERLEAVED, 2, 0, 4), "at least 1 chunk per device (V=0)");
    expect_invalid(create(BG_SCHEDULE_1F1B, 1025, 1, 4), "too many devices (K=1025, at most 1024)");
    expect_invalid(create(BG_SCHEDULE_INTERLEAVED, 1, 65, 4), "too many chunks per device (V=65");
    expect_invalid(create(BG_SCHEDULE_1F1B, 1, 1, 65537), "too many micro-batches (M=65537");
    expect_invalid(create(BG_SCHEDULE_INTERLEAVED, 1024, 64, 1024), "schedule too large");
    expect_invalid(create((bg_schedule_kind_t)7, 2, 1, 4), "unknown schedule kind 7");
    check_ok(create(BG_SCHEDULE_1F1B, 1024, 1, 2));
    check_ok(create(BG_SCHEDULE_GPIPE, 1, 1, 65536));

    bg_schedule_t *s = NULL;
    expect_invalid(bg_schedule_create(NULL, &s), "NULL");
    assert_null(s);
}

static void test_destroy_half_built(void **state) {
    (void)state;
    bg_schedule_destroy(NULL);
    bg_schedule_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->devices = 3;
    bg_schedule_destroy(s); /* no lists yet */
    s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->devices = 3;
    s->ops = calloc(3, sizeof *s->ops);
    assert_non_null(s->ops);
    s->ops[0] = malloc(4 * sizeof *s->ops[0]);
    bg_schedule_destroy(s); /* some lists */
}

/* Two slots between devices; one where both stages share a device. */
static void test_ring_slots(void **state) {
    (void)state;
    assert_int_equal(bg_schedule_ring_slots(2, 0, 1), 2);
    assert_int_equal(bg_schedule_ring_slots(2, 1, 2), 2);
    assert_int_equal(bg_schedule_ring_slots(1, 0, 1), 1);
    assert_int_equal(bg_schedule_ring_slots(2, 1, 3), 1);
}

/* What one slot on one device rests on: the dry run refuses an order that
 * would send into a channel still holding a message, which on one device
 * no other thread would ever empty; the generated interleaved orders on
 * one device, training and evaluating, pass it. */
static void test_one_device_sends_into_an_empty_channel(void **state) {
    (void)state;
    const char *lists[] = {"F0@0 F1@0 F0@1 F1@1 B1@1 B0@1 B1@0 B0@0 STEP"};
    bg_schedule_t *s = build(1, 2, 2, 0, lists);
    expect_invalid(bg_schedule_validate(s),
                   "deadlock: device 0 waits at op 1 (F1 of stage 0): send to device 0, but the "
                   "channel still holds the message for F0 of stage 1 (device 0's op 2)");
    free_copy(s);
    for (int m = 1; m <= 16; m *= 2)
        for (int v = 2; v <= 4; v++)
            for (int forward_only = 0; forward_only <= 1; forward_only++) {
                bg_schedule_t *made = make(BG_SCHEDULE_INTERLEAVED, 1, v, m, forward_only);
                check_ok(bg_schedule_validate(made));
                bg_schedule_destroy(made);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_slots),
        cmocka_unit_test(test_one_device_sends_into_an_empty_channel),
        cmocka_unit_test(test_kind_parse),
        cmocka_unit_test(test_gpipe_ops),
        cmocka_unit_test(test_1f1b_ops),
        cmocka_unit_test(test_zb_h1_ops),
        cmocka_unit_test(test_interleaved_ops),
        cmocka_unit_test(test_forward_only_ops),
        cmocka_unit_test(test_format_device),
        cmocka_unit_test(test_sweep_all_valid),
        cmocka_unit_test(test_validate_fast),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_specific_rejections),
        cmocka_unit_test(test_deadlock_out_of_order),
        cmocka_unit_test(test_deadlock_in_order),
        cmocka_unit_test(test_deadlock_interleaved_wrap),
        cmocka_unit_test(test_stash_slots),
        cmocka_unit_test(test_last_gradient_microbatch),
        cmocka_unit_test(test_invalid_requests),
        cmocka_unit_test(test_destroy_half_built),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
