/* Tests for the arena (lib/arena.h) on the CPU backend: the layout (offsets,
 * padding, empty buffers), one zeroed block whose buffers do not overlap,
 * the errors (reserve after commit, overflow, out of memory), and a stage
 * holding all its buffers in one arena whose size its memory report
 * states, with an out-of-memory message that names the stage and the
 * bytes; stages sharing their device's arena, in a pipeline too. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "arena.h"
#include "backend_cpu.h"
#include "devices.h"
#include "model_spec.h"
#include "pipeline.h"
#include "pipeline_impl.h"
#include "stage.h"
#include "stage_impl.h"
#include "support/models.h"

static int setup_backend(void **state) {
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    bg_backend_t *be = NULL;
    if (bg_backend_cpu_create(&cfg, &be) != BG_OK) return -1;
    *state = be;
    return 0;
}

static int teardown_backend(void **state) {
    bg_backend_destroy(*state);
    return 0;
}

static void test_layout_pads_to_256_and_keeps_empty_buffers_distinct(void **state) {
    bg_arena_t arena = bg_arena_init(*state);
    void *a = (void *)1, *b = (void *)1, *c = (void *)1, *d = (void *)1;
    assert_int_equal(bg_arena_reserve(&arena, 0, &a), BG_OK);
    assert_int_equal(bg_arena_reserve(&arena, 1, &b), BG_OK);
    assert_int_equal(bg_arena_reserve(&arena, 256, &c), BG_OK);
    assert_int_equal(bg_arena_reserve(&arena, 257, &d), BG_OK);
    /* Nothing is allocated, and the pointers wait for the commit. */
    assert_null(arena.base);
    assert_null(a);
    assert_null(d);
    assert_int_equal(arena.count, 4);
    assert_int_equal(arena.bytes, 256 + 256 + 256 + 512);
    assert_int_equal(arena.requests[0].offset, 0);
    assert_int_equal(arena.requests[1].offset, 256);
    assert_int_equal(arena.requests[2].offset, 512);
    assert_int_equal(arena.requests[3].offset, 768);
    assert_int_equal(bg_arena_commit(&arena), BG_OK);
    char *base = arena.base;
    assert_ptr_equal(a, base);
    assert_ptr_equal(b, base + 256);
    assert_ptr_equal(c, base + 512);
    assert_ptr_equal(d, base + 768);
    bg_arena_release(&arena);
    assert_null(arena.base);
    assert_int_equal(arena.bytes, 0);
    assert_int_equal(arena.count, 0);
}

static void test_block_is_zeroed_and_buffers_do_not_overlap(void **state) {
    enum { BUFFERS = 200 }; /* more than the layout list's first capacity */
    bg_arena_t arena = bg_arena_init(*state);
    unsigned char *buffer[BUFFERS];
    size_t size[BUFFERS];
    for (int i = 0; i < BUFFERS; i++) {
        size[i] = (size_t)(i * 37 % 1000);
        assert_int_equal(bg_arena_reserve(&arena, size[i], (void **)&buffer[i]), BG_OK);
    }
    assert_int_equal(bg_arena_commit(&arena), BG_OK);
    for (int i = 0; i < BUFFERS; i++) {
        for (size_t k = 0; k < size[i]; k++) assert_int_equal(buffer[i][k], 0);
        memset(buffer[i], i + 1, size[i]);
    }
    /* Each buffer still holds its own fill: no write reached another. */
    for (int i = 0; i < BUFFERS; i++) {
        assert_int_equal((uintptr_t)(buffer[i] - (unsigned char *)arena.base) % 256, 0);
        for (size_t k = 0; k < size[i]; k++) assert_int_equal(buffer[i][k], (unsigned char)(i + 1));
    }
    bg_arena_release(&arena);
}

static void test_errors(void **state) {
    bg_arena_t arena = bg_arena_init(*state);
    void *a = NULL, *b = NULL;
    /* A size the address space cannot hold. */
    assert_int_equal(bg_arena_reserve(&arena, SIZE_MAX - 100, &a), BG_ERR_NOMEM);
    assert_non_null(strstr(bg_error_message(), "overflow"));
    assert_int_equal(arena.count, 0);
    /* Two that fit alone but not together. */
    assert_int_equal(bg_arena_reserve(&arena, (size_t)PTRDIFF_MAX / 2, &a), BG_OK);
    assert_int_equal(bg_arena_reserve(&arena, (size_t)PTRDIFF_MAX / 2 + 4096, &b), BG_ERR_NOMEM);
    assert_int_equal(arena.count, 1);
    bg_arena_release(&arena);
    /* The CPU backend refuses a size its alignment would round past the
     * address space, rather than wrapping it to a small block. */
    void *block = NULL;
    bg_backend_t *be = *state;
    assert_int_equal(be->ops->alloc(be, SIZE_MAX - 10, &block), BG_ERR_NOMEM);
    assert_non_null(strstr(bg_error_message(), "more than memory can hold"));
    assert_null(block);
    /* The backend's allocation fails: its error, and no pointer set. */
    assert_int_equal(bg_arena_reserve(&arena, 4096, &a), BG_OK);
    bg_alloc_fail_after(0);
    bg_status_t st = bg_arena_commit(&arena);
    bg_alloc_fail_after(-1);
    assert_int_equal(st, BG_ERR_NOMEM);
    assert_non_null(strstr(bg_error_message(), "4096 bytes"));
    assert_null(a);
    assert_null(arena.base);
    /* Committed once: no second commit, no more reservations. */
    assert_int_equal(bg_arena_commit(&arena), BG_OK);
    assert_int_equal(bg_arena_commit(&arena), BG_ERR_INVALID);
    assert_int_equal(bg_arena_reserve(&arena, 8, &b), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "before commit"));
    assert_null(b);
    bg_arena_release(&arena);
    /* Releasing an empty arena is fine. */
    bg_arena_release(&arena);
}

static const char origin_cnn[] = BG_TEST_ORIGIN_CNN;

static bg_stage_config_t cnn_stage(bg_model_spec_t *spec, bg_backend_t *be) {
    bg_stage_config_t cfg = BG_STAGE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.first_layer = 2;
    cfg.last_layer = spec->num_layers;
    cfg.backend = be;
    cfg.max_batch = 16;
    cfg.stash_slots = 3;
    return cfg;
}

static void test_stage_holds_its_buffers_in_one_arena(void **state) {
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("cnn", origin_cnn, sizeof origin_cnn - 1, &spec), BG_OK);
    bg_stage_config_t cfg = cnn_stage(spec, *state);
    bg_stage_t *stage = NULL;
    assert_int_equal(bg_stage_create(&cfg, &stage), BG_OK);
    bg_stage_memory_t m = bg_stage_memory(stage);
    size_t sum = m.params + m.grads + m.optimizer + m.stash + m.buffers + m.workspace;
    /* Layers 2..7 of the CNN: the dense layers' 692,352 + 1,290 parameters
     * as floats, with gradients and Adam's two states. */
    assert_int_equal(m.params, 4 * (5408 * 128 + 128 + 128 * 10 + 10));
    assert_int_equal(m.grads, m.params);
    assert_int_equal(m.optimizer, 2 * m.params);
    /* The arena is the sum plus at most 255 bytes of padding per buffer
     * (a few dozen buffers here). */
    assert_int_equal(m.arena, stage->arena->bytes); /* its own: the whole block */
    assert_int_equal(m.arena, sum + m.padding);
    assert_true(m.padding > 0 && m.padding < 64 * 256);
    assert_int_equal(m.arena % 256, 0);
    /* The stage's buffers lie inside the one block, apart from each other. */
    const char *base = stage->arena->base;
    assert_non_null(base);
    const char *inside[] = {bg_stage_slot_input(stage, 0),
                            bg_stage_slot_input(stage, 1),
                            bg_stage_slot_input(stage, 2),
                            stage->grad_a,
                            stage->grad_b,
                            stage->params[2].weight,
                            stage->params[4].bias,
                            (const char *)stage->slots[2].labels};
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        assert_true(inside[i] >= base && inside[i] < base + m.arena);
        assert_int_equal((size_t)(inside[i] - base) % 256, 0);
        for (size_t j = 0; j < i; j++) assert_true(inside[i] != inside[j]);
    }
    bg_stage_destroy(stage);
    bg_model_spec_destroy(spec);
}

/* 1 when float `at` of a block lies in none of its tensors (the padding). */
static int in_padding(const bg_stage_t *s, const float *block, int64_t at, int grads) {
    for (int i = 0; i < s->count; i++) {
        const bg_layer_params_t *p = &s->params[i];
        if (p->weight_count == 0) continue;
        const float *w = grads ? p->weight_grad : p->weight, *b = grads ? p->bias_grad : p->bias;
        if ((block + at >= w && block + at < w + p->weight_count) ||
            (block + at >= b && block + at < b + p->bias_count))
            return 0;
    }
    return 1;
}

/* The parameters, gradients and optimizer states each lie in one block
 * (so zeroing, checking and updating them is one call each), and three
 * steps over the blocks give the same bits as tensor by tensor (the path
 * the profiler takes, with layer times on), for Adam with weight decay and
 * SGD with and without momentum; the padding between tensors stays zero. */
static void test_stage_updates_its_parameters_as_one_block(void **state) {
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("cnn", origin_cnn, sizeof origin_cnn - 1, &spec), BG_OK);
    enum { N = 8 };
    float images[N * 28 * 28];
    int32_t labels[N];
    for (int i = 0; i < N * 28 * 28; i++) images[i] = (float)((i * 37) % 101) / 101.0f;
    for (int i = 0; i < N; i++) labels[i] = (i * 3) % 10;
    bg_optimizer_config_t optimizers[3] = {BG_OPTIMIZER_CONFIG_INIT, BG_OPTIMIZER_CONFIG_INIT,
                                           BG_OPTIMIZER_CONFIG_INIT};
    optimizers[0].adam.weight_decay = 0.01;
    optimizers[1].kind = optimizers[2].kind = BG_OPTIMIZER_SGD;
    optimizers[1].sgd.momentum = 0.9;
    float *params[2];
    for (int o = 0; o < 3; o++) {
        bg_stage_t *stages[2];
        double times[4][16] = {{0}}; /* per layer: 8 */
        bg_stage_layer_times_t layer_times = {times[0], times[1], times[2], times[3], NULL};
        for (int k = 0; k < 2; k++) {
            bg_stage_config_t cfg = cnn_stage(spec, *state);
            cfg.first_layer = 0;
            cfg.max_batch = N;
            cfg.stash_slots = 1;
            cfg.optimizer = optimizers[o];
            assert_int_equal(bg_stage_create(&cfg, &stages[k]), BG_OK);
            bg_stage_t *s = stages[k];
            /* conv 288 + 32, dense 692,224 + 128, dense 1,280 + 10 floats,
             * each but the last padded to a multiple of 64 (256 bytes). */
            assert_int_equal(s->block_elems, 320 + 64 + 692224 + 128 + 1280 + 10);
            if (k == 1) bg_stage_set_layer_times(s, &layer_times);
            for (int step = 0; step < 3; step++) {
                assert_int_equal(bg_stage_zero_grads(s), BG_OK);
                assert_int_equal(bg_stage_load_batch(s, N, images, labels), BG_OK);
                assert_int_equal(bg_stage_forward(s, N, NULL), BG_OK);
                assert_int_equal(bg_stage_backward(s, N, 1.0 / N), BG_OK);
                assert_int_equal(bg_stage_step(s), BG_OK);
            }
            params[k] = malloc(sizeof(float) * (size_t)spec->total_params);
            assert_non_null(params[k]);
            assert_int_equal(bg_stage_download_params(s, params[k]), BG_OK);
            int64_t padding = 0;
            for (int64_t i = 0; i < s->block_elems; i++) {
                const float *blocks[] = {s->param_block, s->grad_block, s->state_block[0],
                                         s->state_block[1]};
                for (int b = 0; b < 2 + bg_optimizer_state_buffers(&optimizers[o]); b++)
                    if (in_padding(s, b == 1 ? s->grad_block : s->param_block, i, b == 1)) {
                        padding += b == 0;
                        assert_true(blocks[b][i] == 0.0f);
                    }
            }
            assert_int_equal(padding, 32 + 32 + 0 + 0 + 0);
        }
        assert_memory_equal(params[0], params[1], sizeof(float) * (size_t)spec->total_params);
        /* Zeroing is over the whole block. */
        assert_int_equal(bg_stage_zero_grads(stages[0]), BG_OK);
        for (int64_t i = 0; i < stages[0]->block_elems; i++)
            assert_true(((const float *)stages[0]->grad_block)[i] == 0.0f);
        for (int k = 0; k < 2; k++) {
            bg_stage_destroy(stages[k]);
            free(params[k]);
        }
    }
    bg_model_spec_destroy(spec);
}

static void test_stage_out_of_memory_names_stage_and_bytes(void **state) {
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("cnn", origin_cnn, sizeof origin_cnn - 1, &spec), BG_OK);
    bg_stage_config_t cfg = cnn_stage(spec, *state);
    /* Fail each host allocation of the creation in turn; one of them is the
     * arena's block, whose message gives the whole amount and its parts. */
    int named = 0;
    char block_message[BG_ERROR_MAX] = "";
    size_t padding = 0;
    for (long n = 0; n < 1000; n++) {
        bg_stage_t *stage = NULL;
        bg_alloc_fail_after(n);
        bg_status_t st = bg_stage_create(&cfg, &stage);
        bg_alloc_fail_after(-1);
        if (st == BG_OK) {
            padding = bg_stage_memory(stage).padding;
            bg_stage_destroy(stage);
            break;
        }
        assert_int_equal(st, BG_ERR_NOMEM);
        assert_null(stage);
        const char *message = bg_error_message();
        assert_non_null(strstr(message, "stage"));
        if (strstr(message, "one allocation of ") != NULL) {
            assert_non_null(strstr(message, "stage for layers 2..7 on cpu:0: one allocation of "));
            assert_non_null(strstr(message, "for parameters 2774568, gradients 2774568"));
            snprintf(block_message, sizeof block_message, "%s", message);
            named++;
        }
    }
    assert_int_equal(named, 1);
    /* The padding the stage created in the end has; the device named once
     * (until 2026-12-05 the backend's message named it again after the
     * sizes). */
    assert_true(padding > 0 && padding < 64 * 256);
    char want[160];
    snprintf(want, sizeof want,
             ", workspace 0 and padding %zu (each buffer rounded up to 256 bytes): out of memory "
             "allocating ",
             padding);
    assert_non_null(strstr(block_message, want));
    bg_model_spec_destroy(spec);
}

/* Two stages laid out in one arena: each states its share, neither may be
 * used before the arena exists, and once bound each holds its buffers in
 * its own part of the block and the parameters a stage of its own gets. */
static void test_stages_share_a_device_arena(void **state) {
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("cnn", origin_cnn, sizeof origin_cnn - 1, &spec), BG_OK);
    bg_arena_t arena = bg_arena_init(*state);
    bg_stage_t *shared[2] = {NULL, NULL}, *alone[2] = {NULL, NULL};
    const int first[2] = {0, 4}, last[2] = {4, 8};
    for (int k = 0; k < 2; k++) {
        bg_stage_config_t cfg = cnn_stage(spec, *state);
        cfg.first_layer = first[k];
        cfg.last_layer = last[k];
        cfg.seed = 7;
        assert_int_equal(bg_stage_create(&cfg, &alone[k]), BG_OK);
        cfg.arena = &arena;
        assert_int_equal(bg_stage_create(&cfg, &shared[k]), BG_OK);
        assert_ptr_equal(shared[k]->arena, &arena);
    }
    assert_int_equal(bg_stage_bind(shared[0]), BG_ERR_INTERNAL);
    assert_string_equal(bg_error_message(), "stage for layers 0..3 on cpu:0: arena not allocated");
    const size_t share[2] = {bg_stage_memory(shared[0]).arena, bg_stage_memory(shared[1]).arena};
    for (int k = 0; k < 2; k++) assert_int_equal(share[k], bg_stage_memory(alone[k]).arena);
    assert_int_equal(arena.bytes, share[0] + share[1]);
    assert_int_equal(bg_arena_commit(&arena), BG_OK);
    const char *base = arena.base;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(bg_stage_bind(shared[k]), BG_OK);
        assert_int_equal(bg_stage_bind(shared[k]), BG_OK); /* once is enough */
        /* Stage 0's part first, then stage 1's. */
        const char *from = base + (k ? share[0] : 0), *to = from + share[k];
        const char *inside[] = {bg_stage_slot_input(shared[k], 0),
                                bg_stage_slot_input(shared[k], 2), shared[k]->grad_a,
                                shared[k]->param_block, shared[k]->grad_block};
        for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++)
            assert_true(inside[i] >= from && inside[i] < to);
        int64_t n = 0;
        for (int i = first[k]; i < last[k]; i++) {
            int64_t weights, biases;
            bg_layer_param_counts(&spec->layers[i], &weights, &biases);
            n += weights + biases;
        }
        assert_true(n > 0);
        float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(bg_stage_download_params(shared[k], a), BG_OK);
        assert_int_equal(bg_stage_download_params(alone[k], b), BG_OK);
        assert_memory_equal(a, b, sizeof(float) * (size_t)n);
        free(a);
        free(b);
    }
    for (int k = 0; k < 2; k++) {
        bg_stage_destroy(shared[k]);
        bg_stage_destroy(alone[k]);
    }
    bg_arena_release(&arena);
    bg_model_spec_destroy(spec);
}

/* A pipeline makes one allocation per device: interleaved on two CPU
 * devices, each device's two stages lie in its arena, which holds exactly
 * their shares (host channels keep their own memory), and a step runs. */
static void test_pipeline_allocates_once_per_device(void **state) {
    (void)state;
    bg_model_spec_t *spec = NULL;
    assert_int_equal(bg_model_spec_parse("cnn", origin_cnn, sizeof origin_cnn - 1, &spec), BG_OK);
    bg_device_list_t devices;
    assert_int_equal(bg_device_list_parse("cpu:2", 2, &devices), BG_OK);
    bg_pipeline_config_t cfg = BG_PIPELINE_CONFIG_INIT;
    cfg.spec = spec;
    cfg.devices = &devices;
    cfg.schedule = BG_SCHEDULE_INTERLEAVED;
    cfg.chunks = 2;
    cfg.microbatches = 2;
    cfg.batch = 8;
    bg_pipeline_t *p = NULL;
    assert_int_equal(bg_pipeline_create(&cfg, &p), BG_OK);
    assert_int_equal(p->stages, 4);
    for (int d = 0; d < 2; d++) {
        const bg_arena_t *arena = &p->arenas[d];
        assert_non_null(arena->base);
        size_t shares = 0;
        for (int s = d; s < 4; s += 2) {
            assert_ptr_equal(p->stage[s]->arena, arena);
            shares += bg_stage_memory(p->stage[s]).arena;
        }
        assert_int_equal(arena->bytes, shares);
    }
    float images[8 * 28 * 28];
    int32_t labels[8];
    for (int i = 0; i < 8 * 28 * 28; i++) images[i] = (float)(i % 13) / 13.0f;
    for (int i = 0; i < 8; i++) labels[i] = i;
    bg_pipeline_result_t r;
    assert_int_equal(bg_pipeline_train_step(p, images, labels, 8, &r), BG_OK);
    assert_true(r.loss_sum > 0);
    assert_int_equal(r.skipped, 0);
    bg_pipeline_destroy(p);
    bg_model_spec_destroy(spec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_pads_to_256_and_keeps_empty_buffers_distinct),
        cmocka_unit_test(test_block_is_zeroed_and_buffers_do_not_overlap),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_stage_holds_its_buffers_in_one_arena),
        cmocka_unit_test(test_stage_updates_its_parameters_as_one_block),
        cmocka_unit_test(test_stage_out_of_memory_names_stage_and_bytes),
        cmocka_unit_test(test_stages_share_a_device_arena),
        cmocka_unit_test(test_pipeline_allocates_once_per_device),
    };
    return cmocka_run_group_tests(tests, setup_backend, teardown_backend);
}
