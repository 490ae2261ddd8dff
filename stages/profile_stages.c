/* Profiling every contiguous layer range as a stage of its own, as the
 * pipeline runs one: alone on its core (its own caches), with the
 * schedule's stash slots rotating, and with the channel copies around each
 * op (the input copied in before F, the output copied out after it, the
 * output gradient copied in before B, the input gradient out after it).
 * Stage costs do not add up from layer costs: a stage's working set, and so
 * its cache misses, depends on which layers share the core and on how many
 * micro-batches it holds. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/backend_cpu.h"
#include "profile_impl.h"
#include "rng.h"
#include "stage.h"
#include "monotonic.h"

/* Buffers standing for the channels' ring slots at the stage's two ends. */
typedef struct range_bench {
    bg_backend_t *be;
    bg_stage_t *stage;
    void *in, *out, *grad_in, *grad_out;
    size_t in_bytes, out_bytes;
    int64_t in_numel, out_numel;
    int first, last, layers, slots;
    int microbatches; /* per round, as per step in the pipeline: M */
} range_bench_t;

enum {
    PART_FORWARD,
    PART_BACKWARD,
    PART_UPDATE,
    PART_RECV,
    PART_SEND,
    PART_GRAD_RECV,
    PART_GRAD_SEND,
    PART_CHECK,
    PART_GRAD_CHECK,
    PART_WEIGHT_CHECK, /* the check of the accumulated weight gradients */
    /* run_after_waits: a forward and a backward of slot 0 right after the
     * stage's own ops, then after a wait, by the neighbour's op kind
     * meanwhile (BG_NEIGHBOUR_*). */
    PART_WARM_FORWARD,
    PART_WARM_BACKWARD,
    PART_FORWARD_AFTER,
    PART_BACKWARD_AFTER = PART_FORWARD_AFTER + BG_NEIGHBOUR_KINDS,
    PARTS = PART_BACKWARD_AFTER + BG_NEIGHBOUR_KINDS
};

typedef struct range_samples {
    int count[PARTS], capacity;
    double *sample[PARTS];
} range_samples_t;

static void note(range_samples_t *rs, int part, double seconds) {
    if (rs != NULL && rs->count[part] < rs->capacity) rs->sample[part][rs->count[part]++] = seconds;
}

/* Forwards of slots 0..count-1, each with the copy in before it and the
 * check and copy out after it; the first also noted as part `first_part`
 * unless that is -1. */
static bg_status_t forward_group(range_bench_t *b, int64_t n, int count, int first_part,
                                 range_samples_t *rs) {
    bg_backend_t *be = b->be;
    for (int k = 0; k < count; k++) {
        double t0 = bg_monotonic_seconds();
        if (b->first > 0)
            BG_CHECK(be->ops->upload(be, bg_stage_slot_input(b->stage, k), b->in, b->in_bytes));
        double t1 = bg_monotonic_seconds();
        /* The first stage loads its samples before each forward, as the
         * executor does: part of its forward here. */
        if (b->first == 0) BG_CHECK(bg_stage_load_slot(b->stage, k, n, b->in, NULL));
        /* The loss, if the range ends with it, is left on the device as
         * the executor leaves it (read once per round, below). */
        BG_CHECK(bg_stage_forward_slot_deferred(b->stage, k, n, 1, -1));
        double t2 = bg_monotonic_seconds();
        /* The executor checks what it sends for NaN and Inf, then copies. */
        const void *y = bg_stage_slot_output(b->stage, k);
        if (b->last < b->layers) BG_CHECK(be->ops->mark_nonfinite(be, b->out_numel, y, 0));
        double t3 = bg_monotonic_seconds();
        if (b->last < b->layers) BG_CHECK(be->ops->download(be, b->out, y, b->out_bytes));
        double t4 = bg_monotonic_seconds();
        note(rs, PART_RECV, t1 - t0);
        note(rs, PART_FORWARD, t2 - t1);
        if (first_part >= 0 && k == 0) note(rs, first_part, t2 - t1);
        note(rs, PART_CHECK, t3 - t2);
        note(rs, PART_SEND, t4 - t3);
    }
    return BG_OK;
}

/* Backwards of slots 0..count-1 of a step of m micro-batches, each with the
 * gradient copied in before it and checked and copied out after it; the
 * first also noted as part `first_part` unless that is -1. */
static bg_status_t backward_group(range_bench_t *b, int64_t n, int count, int m, int first_part,
                                  range_samples_t *rs) {
    bg_backend_t *be = b->be;
    for (int k = 0; k < count; k++) {
        double t0 = bg_monotonic_seconds();
        if (b->last < b->layers)
            BG_CHECK(be->ops->upload(be, bg_stage_output_grad(b->stage), b->grad_in, b->out_bytes));
        double t1 = bg_monotonic_seconds();
        BG_CHECK(bg_stage_backward_slot(b->stage, k, n, 1.0 / (double)(n * m)));
        double t2 = bg_monotonic_seconds();
        const void *dx = bg_stage_input_grad(b->stage);
        if (b->first > 0) BG_CHECK(be->ops->mark_nonfinite(be, b->in_numel, dx, 0));
        double t3 = bg_monotonic_seconds();
        if (b->first > 0) BG_CHECK(be->ops->download(be, b->grad_out, dx, b->in_bytes));
        double t4 = bg_monotonic_seconds();
        note(rs, PART_GRAD_RECV, t1 - t0);
        note(rs, PART_BACKWARD, t2 - t1);
        if (first_part >= 0 && k == 0) note(rs, first_part, t2 - t1);
        note(rs, PART_GRAD_CHECK, t3 - t2);
        note(rs, PART_GRAD_SEND, t4 - t3);
    }
    return BG_OK;
}

/* Micro-batches in one round: M, or the slots when there are more. */
static int round_microbatches(const range_bench_t *b) {
    return b->microbatches > b->slots ? b->microbatches : b->slots;
}

/* The update that ends a round, and the zeroing of the gradients for the
 * next one (timed together into rs as PART_UPDATE, when rs is given, as the
 * executor's optimizer step does both). The checks' marks and the loss are
 * read first, once per step, as the executor does at its optimizer step
 * (waiting time there, not the stage's work). */
static bg_status_t update(range_bench_t *b, range_samples_t *rs) {
    int marked;
    double loss;
    int64_t correct;
    BG_CHECK(b->be->ops->take_loss(b->be, &loss, &correct));
    BG_CHECK(b->be->ops->take_nonfinite(b->be, &marked));
    double t0 = bg_monotonic_seconds();
    BG_CHECK(bg_stage_step(b->stage));
    BG_CHECK(bg_stage_zero_grads(b->stage));
    note(rs, PART_UPDATE, bg_monotonic_seconds() - t0);
    return BG_OK;
}

/* One round as a pipeline step runs the stage: M micro-batches in groups of
 * `slots` (a group's forwards, then its backwards: GPipe's order with M
 * slots, 1F1B's steady state with one), then one update. So the cache
 * misses an update leaves behind are spread over M micro-batches, as in a
 * step; one update per group made a one-slot range look up to 30% slower
 * per micro-batch than the pipeline runs it. */
static bg_status_t run_round(range_bench_t *b, int64_t n, range_samples_t *rs) {
    const int m = round_microbatches(b);
    for (int done = 0; done < m; done += b->slots) {
        const int group = m - done < b->slots ? m - done : b->slots;
        BG_CHECK(forward_group(b, n, group, -1, rs));
        BG_CHECK(backward_group(b, n, group, m, -1, rs));
    }
    /* The check after the last backward, as the executor's. */
    double t0 = bg_monotonic_seconds();
    BG_CHECK(bg_stage_mark_nonfinite_grads(b->stage, 0));
    note(rs, PART_WEIGHT_CHECK, bg_monotonic_seconds() - t0);
    return update(b, rs);
}

/* A host buffer of `bytes` random values in (-1, 1) as floats. */
static void *random_buffer(size_t bytes, uint64_t stream) {
    float *x = malloc(bytes > 0 ? bytes : 1);
    if (x == NULL) return NULL;
    bg_rng_t rng;
    bg_rng_seed(&rng, 7, stream);
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        x[i] = (float)(2 * bg_rng_uniform(&rng) - 1) * 1e-2f;
    return x;
}

/* ---- under load: the pipeline's other stage running beside it ---- */

/* The co-runner: on peer_core, with a backend of its own, the layers the
 * other stage of a two-stage split would hold (after the range, or before
 * it when the range ends the model, or the whole model for the whole
 * model), in rounds of F, B and update while asked to run: the memory
 * traffic the pipeline puts next to a stage while both compute; or single
 * ops (a forward, a backward, the update), each posted when done, while
 * the other thread sleeps as a pipeline stage waiting for its neighbour
 * does. Between requests it sleeps. */
typedef struct co_runner {
    const bg_profile_config_t *cfg;
    int first, last;
    atomic_int stop, run;       /* asked of it */
    atomic_int asked;           /* a single op asked of it: 1 + its BG_NEIGHBOUR_* kind, or 0 */
    sem_t op_done;              /* posted after each of those, and when it returns */
    atomic_int ready;           /* its stage is built (or it failed) */
    atomic_int active;          /* inside its rounds */
    atomic_int finished;        /* co_run has returned (failed, unless asked to stop) */
    bg_status_t status;         /* read after joining it */
    char message[BG_ERROR_MAX]; /* its message when it failed: messages are per thread */
} co_runner_t;

static void pause_briefly(void) { nanosleep(&(struct timespec){0, 20000}, NULL); }

/* One op of the co-runner's stage, of kind BG_NEIGHBOUR_*: a forward or a
 * backward of slot 0 (its gradients zeroed first, so that the update after
 * it applies this backward's alone), or the update (after reading the
 * marks and loss, as a round does). */
static bg_status_t run_single_op(range_bench_t *b, int64_t n, int kind) {
    if (kind == BG_NEIGHBOUR_FORWARD) return forward_group(b, n, 1, -1, NULL);
    if (kind == BG_NEIGHBOUR_BACKWARD) {
        BG_CHECK(bg_stage_zero_grads(b->stage));
        return backward_group(b, n, 1, round_microbatches(b), -1, NULL);
    }
    return update(b, NULL);
}

static bg_status_t co_run(co_runner_t *co) {
    const bg_profile_config_t *cfg = co->cfg;
    const bg_model_spec_t *spec = cfg->spec;
    bg_backend_t *be = NULL;
    bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
    cpu.index = 1;
    range_bench_t b = {.first = co->first,
                       .last = co->last,
                       .layers = spec->num_layers,
                       .slots = 1,
                       .microbatches = cfg->microbatches};
    int32_t *labels = calloc((size_t)cfg->batch, sizeof(int32_t));
    bg_status_t st = BG_OK;
    BG_ALLOC_CHECK_GOTO(labels, st, done);
    BG_CHECK_GOTO(bg_backend_cpu_create(&cpu, &be), st, done);
    b.be = be;
    b.in_numel = cfg->batch * bg_shape_numel(spec->layers[b.first].in);
    b.out_numel = b.last < b.layers ? cfg->batch * bg_shape_numel(spec->layers[b.last].in) : 0;
    b.in_bytes = bg_backend_bytes(be, b.in_numel);
    b.out_bytes = bg_backend_bytes(be, b.out_numel);
    b.in = random_buffer(b.in_bytes, 3);
    b.grad_out = calloc(b.in_bytes > 0 ? b.in_bytes : 1, 1);
    b.out = calloc(b.out_bytes > 0 ? b.out_bytes : 1, 1);
    b.grad_in = random_buffer(b.out_bytes, 4);
    BG_ALLOC_CHECK_GOTO(b.in, st, done);
    BG_ALLOC_CHECK_GOTO(b.grad_out, st, done);
    BG_ALLOC_CHECK_GOTO(b.out, st, done);
    BG_ALLOC_CHECK_GOTO(b.grad_in, st, done);
    bg_stage_config_t sc = BG_STAGE_CONFIG_INIT;
    sc.spec = spec;
    sc.first_layer = b.first;
    sc.last_layer = b.last;
    sc.backend = be;
    sc.max_batch = cfg->batch;
    sc.seed = 2;
    sc.optimizer = cfg->optimizer;
    sc.stash_slots = 1;
    BG_CHECK_GOTO(bg_stage_create(&sc, &b.stage), st, done);
    BG_CHECK_GOTO(bg_stage_zero_grads(b.stage), st, done); /* rounds zero after their update */
    BG_CHECK_GOTO(bg_stage_load_slot(b.stage, 0, cfg->batch, b.first == 0 ? b.in : NULL, labels),
                  st, done);
    BG_CHECK_GOTO(run_round(&b, cfg->batch, NULL), st, done);
    atomic_store(&co->ready, 1);
    while (!atomic_load(&co->stop)) {
        const int asked = atomic_load(&co->asked);
        if (asked > 0) {
            BG_CHECK_GOTO(run_single_op(&b, cfg->batch, asked - 1), st, done);
            atomic_store(&co->asked, 0);
            sem_post(&co->op_done);
            continue;
        }
        if (!atomic_load(&co->run)) {
            atomic_store(&co->active, 0);
            pause_briefly();
            continue;
        }
        atomic_store(&co->active, 1);
        BG_CHECK_GOTO(run_round(&b, cfg->batch, NULL), st, done);
    }
done:
    bg_stage_destroy(b.stage);
    bg_backend_destroy(be);
    free(b.in);
    free(b.out);
    free(b.grad_in);
    free(b.grad_out);
    free(labels);
    return st;
}

static void *co_runner_main(void *arg) {
    co_runner_t *co = arg;
    if (co->cfg->topology != NULL &&
        bg_topology_bind_thread(co->cfg->topology, co->cfg->peer_core) != BG_OK)
        bg_error_clear();
    co->status = co_run(co);
    if (co->status != BG_OK) snprintf(co->message, sizeof co->message, "%s", bg_error_message());
    atomic_store(&co->finished, 1);
    atomic_store(&co->ready, 1);
    sem_post(&co->op_done); /* a waiter, if any, sees it finished */
    return NULL;
}

/* Asks the co-runner to run or to rest, and waits until it does: a
 * loaded round starts once it is inside its rounds, an alone one once it
 * has finished the round it was in. */
static bg_status_t co_runner_set(co_runner_t *co, int run) {
    atomic_store(&co->run, run);
    while (atomic_load(&co->active) != run) {
        if (atomic_load(&co->finished))
            return bg_error_set(BG_ERR_INTERNAL, "profile: the co-runner stopped");
        pause_briefly();
    }
    return BG_OK;
}

/* An untimed forward and backward of slot 0, so that the ops after them
 * follow the stage's own work rather than a wait. */
static bg_status_t warm_up(range_bench_t *b, int64_t n) {
    BG_CHECK(forward_group(b, n, 1, -1, NULL));
    return backward_group(b, n, 1, round_microbatches(b), -1, NULL);
}

/* Sleeps on a semaphore, as a pipeline stage sleeps on its channel, while
 * the co-runner (resting) runs one op of kind BG_NEIGHBOUR_*. */
static bg_status_t wait_for_co_runner(co_runner_t *co, int kind) {
    atomic_store(&co->asked, 1 + kind);
    while (sem_wait(&co->op_done) != 0)
        if (errno != EINTR)
            return bg_error_set(BG_ERR_INTERNAL, "profile: waiting for the co-runner: %s",
                                strerror(errno));
    if (atomic_load(&co->finished))
        return bg_error_set(BG_ERR_INTERNAL, "profile: the co-runner stopped");
    return BG_OK;
}

/* A forward and a backward of slot 0 straight after the stage's own ops
 * (PART_WARM_*), then after a wait for each kind of the co-runner's op
 * (PART_FORWARD_AFTER and PART_BACKWARD_AFTER by kind), into rs: both
 * sides the same ops of the same slot, differing only by the wait. After
 * an untimed forward and backward, the warm pair, then six waits in an
 * order that keeps both stages' ops in order (each backward after a
 * forward, the co-runner's update after its backward):
 *   co-runner  F  B  U  F  B  U
 *   stage      F  B  F  B  F  B
 * Their gradients are left to the next round, which zeroes them. */
static bg_status_t run_after_waits(range_bench_t *b, int64_t n, co_runner_t *co,
                                   range_samples_t *rs) {
    enum { WAITS = 2 * BG_NEIGHBOUR_KINDS };
    const int theirs[WAITS] = {BG_NEIGHBOUR_FORWARD, BG_NEIGHBOUR_BACKWARD, BG_NEIGHBOUR_UPDATE,
                               BG_NEIGHBOUR_FORWARD, BG_NEIGHBOUR_BACKWARD, BG_NEIGHBOUR_UPDATE};
    const int m = round_microbatches(b);
    BG_CHECK(warm_up(b, n));
    BG_CHECK(forward_group(b, n, 1, PART_WARM_FORWARD, rs));
    BG_CHECK(backward_group(b, n, 1, m, PART_WARM_BACKWARD, rs));
    for (int i = 0; i < WAITS; i++) {
        BG_CHECK(wait_for_co_runner(co, theirs[i]));
        if (i % 2 == 0)
            BG_CHECK(forward_group(b, n, 1, PART_FORWARD_AFTER + theirs[i], rs));
        else
            BG_CHECK(backward_group(b, n, 1, m, PART_BACKWARD_AFTER + theirs[i], rs));
    }
    return BG_OK;
}

/* Times one allocation of the stage: warm-up rounds, then `rounds` rounds
 * into `rs`; with a co-runner, each round alone (into rs, after an untimed
 * forward and backward, so that its first ops follow work of the stage's
 * own, not the wait for the co-runner to rest), then beside the
 * co-runner (into loaded), then single ops before and after waits for it
 * (run_after_waits, into waited); all on the same allocation. */
static bg_status_t time_allocation(bg_backend_t *be, const bg_profile_config_t *cfg,
                                   range_bench_t *b, const int32_t *labels, int rounds,
                                   range_samples_t *rs, co_runner_t *co, range_samples_t *loaded,
                                   range_samples_t *waited) {
    bg_stage_config_t sc = BG_STAGE_CONFIG_INIT;
    sc.spec = cfg->spec;
    sc.first_layer = b->first;
    sc.last_layer = b->last;
    sc.backend = be;
    sc.max_batch = cfg->batch;
    sc.seed = 1;
    sc.optimizer = cfg->optimizer;
    sc.stash_slots = b->slots;
    bg_status_t st = BG_OK;
    BG_CHECK(bg_stage_create(&sc, &b->stage));
    BG_CHECK_GOTO(bg_stage_zero_grads(b->stage), st, done); /* rounds zero after their update */
    for (int k = 0; k < b->slots; k++)
        BG_CHECK_GOTO(
            bg_stage_load_slot(b->stage, k, cfg->batch, b->first == 0 ? b->in : NULL, labels), st,
            done);
    for (int r = 0; r < PROFILE_WARMUP + rounds; r++) {
        const int timed = r >= PROFILE_WARMUP;
        if (co != NULL) {
            BG_CHECK_GOTO(co_runner_set(co, 0), st, done);
            BG_CHECK_GOTO(warm_up(b, cfg->batch), st, done);
        }
        BG_CHECK_GOTO(run_round(b, cfg->batch, timed ? rs : NULL), st, done);
        if (co == NULL) continue;
        BG_CHECK_GOTO(co_runner_set(co, 1), st, done);
        BG_CHECK_GOTO(run_round(b, cfg->batch, timed ? loaded : NULL), st, done);
        BG_CHECK_GOTO(co_runner_set(co, 0), st, done);
        BG_CHECK_GOTO(run_after_waits(b, cfg->batch, co, timed ? waited : NULL), st, done);
    }
done:
    if (co != NULL && st == BG_OK) st = co_runner_set(co, 0);
    bg_stage_destroy(b->stage);
    b->stage = NULL;
    return st;
}

/* The typical figures (bg_profile_typical) of one pass's rounds of a range,
 * part by part, summed over the passes made so far. */
typedef struct range_figures {
    double alone[PARTS], loaded[PARTS], waited[PARTS];
    int passes;
} range_figures_t;

/* Passes over all ranges. On a virtual machine a core may run at one speed
 * for a few seconds and up to 60% slower for the next few (seen on the
 * development machine; docs/sim-accuracy-log.md, "Profile passes"), and the same
 * stage may run at two speeds from one allocation to the next. Each pass
 * times every range once, on a fresh allocation, so a range's passes lie
 * seconds apart; the profile keeps the mean of their figures, as a long run
 * averages over those periods. */
enum { PASSES = 3 };

/* One pass of the range [first, last) with `slots` stash slots: a fresh
 * allocation, timed alone and (cfg->loaded) beside the co-runner and
 * after waits for it, its per-part figures added to fig. */
static bg_status_t time_range_pass(bg_backend_t *be, const bg_profile_config_t *cfg, int first,
                                   int last, int slots, range_figures_t *fig) {
    const bg_model_spec_t *spec = cfg->spec;
    const int64_t n = cfg->batch;
    range_bench_t b = {.be = be,
                       .first = first,
                       .last = last,
                       .layers = spec->num_layers,
                       .slots = slots,
                       .microbatches = cfg->microbatches};
    const int rounds = (cfg->repetitions + PASSES - 1) / PASSES;
    range_samples_t rs = {.capacity = rounds * round_microbatches(&b)},
                    load = {.capacity = rs.capacity},
                    waited = {.capacity = 4 * rounds}; /* 4 forwards a round */
    co_runner_t co = {0};
    pthread_t thread;
    int running = 0, semaphore = 0;
    bg_status_t st = BG_OK;
    int32_t *labels = NULL;
    b.in_numel = n * bg_shape_numel(spec->layers[first].in);
    b.out_numel = last < b.layers ? n * bg_shape_numel(spec->layers[last].in) : 0;
    b.in_bytes = bg_backend_bytes(be, b.in_numel);
    b.out_bytes = bg_backend_bytes(be, b.out_numel);
    for (int p = 0; p < PARTS; p++) {
        rs.sample[p] = calloc((size_t)rs.capacity, sizeof(double));
        BG_ALLOC_CHECK_GOTO(rs.sample[p], st, done);
    }
    b.in = random_buffer(b.in_bytes, 1);
    b.grad_out = malloc(b.in_bytes > 0 ? b.in_bytes : 1);
    b.out = malloc(b.out_bytes > 0 ? b.out_bytes : 1);
    b.grad_in = random_buffer(b.out_bytes, 2);
    labels = calloc((size_t)n, sizeof(int32_t)); /* 0: valid for any number of classes */
    BG_ALLOC_CHECK_GOTO(b.in, st, done);
    BG_ALLOC_CHECK_GOTO(b.grad_out, st, done);
    BG_ALLOC_CHECK_GOTO(b.out, st, done);
    BG_ALLOC_CHECK_GOTO(b.grad_in, st, done);
    BG_ALLOC_CHECK_GOTO(labels, st, done);
    memset(b.grad_out, 0, b.in_bytes);
    memset(b.out, 0, b.out_bytes);
    if (cfg->loaded) {
        /* The co-runner holds what a neighbour stage would. */
        co.cfg = cfg;
        co.first = last < b.layers ? last : 0;
        co.last = last < b.layers ? b.layers : first > 0 ? first : b.layers;
        for (int p = 0; p < PARTS; p++) {
            load.sample[p] = calloc((size_t)load.capacity, sizeof(double));
            waited.sample[p] = calloc((size_t)waited.capacity, sizeof(double));
            BG_ALLOC_CHECK_GOTO(load.sample[p], st, done);
            BG_ALLOC_CHECK_GOTO(waited.sample[p], st, done);
        }
        if (sem_init(&co.op_done, 0, 0) != 0) {
            st = bg_error_set(BG_ERR_INTERNAL, "profile: cannot make the co-runner's semaphore");
            goto done;
        }
        semaphore = 1;
        if (pthread_create(&thread, NULL, co_runner_main, &co) != 0) {
            st = bg_error_set(BG_ERR_INTERNAL, "profile: cannot start the co-runner thread");
            goto done;
        }
        running = 1;
        while (!atomic_load(&co.ready)) pause_briefly();
        if (atomic_load(&co.finished)) {
            st = bg_error_set(BG_ERR_INTERNAL, "profile: the co-runner stopped");
            goto done;
        }
    }
    BG_CHECK_GOTO(
        time_allocation(be, cfg, &b, labels, rounds, &rs, running ? &co : NULL, &load, &waited), st,
        done);
    for (int p = 0; p < PARTS; p++) {
        fig->alone[p] += bg_profile_typical(rs.sample[p], rs.count[p]);
        if (!running) continue;
        fig->loaded[p] += bg_profile_typical(load.sample[p], load.count[p]);
        fig->waited[p] += bg_profile_typical(waited.sample[p], waited.count[p]);
    }
    fig->passes++;
done:
    if (running) {
        atomic_store(&co.stop, 1);
        pthread_join(thread, NULL);
        /* Its own error, with its message, unless this thread failed first. */
        if (co.status != BG_OK && (st == BG_OK || st == BG_ERR_INTERNAL))
            st = bg_error_set(co.status, "profile: the co-runner on core %d failed: %s",
                              cfg->peer_core, co.message);
    }
    if (semaphore) sem_destroy(&co.op_done);
    for (int p = 0; p < PARTS; p++) {
        free(load.sample[p]);
        free(waited.sample[p]);
    }
    free(b.in);
    free(b.out);
    free(b.grad_in);
    free(b.grad_out);
    free(labels);
    for (int p = 0; p < PARTS; p++) free(rs.sample[p]);
    if (st != BG_OK) bg_error_prefix(st, "profiling layers %d..%d as a stage: ", first, last - 1);
    return st;
}

/* The profile of the range [first, last) of a model of `layers` layers
 * from its passes: each part's mean over them, and 0 for the copies and
 * checks at an end the range does not have (their rounds timed nothing). */
static bg_stage_profile_t range_profile(int first, int last, int layers, int slots, int loaded,
                                        const range_figures_t *fig) {
    bg_stage_after_wait_t after_wait = {0};
    const double *waited = fig->waited;
    if (loaded && fig->passes > 0 && waited[PART_WARM_FORWARD] > 0 &&
        waited[PART_WARM_BACKWARD] > 0) {
        /* Sums over the passes: their ratios are ratios of the means. */
        for (int k = 0; k < BG_NEIGHBOUR_KINDS; k++) {
            after_wait.forward[k] = bg_profile_plausible_ratio(waited[PART_FORWARD_AFTER + k] /
                                                               waited[PART_WARM_FORWARD]);
            after_wait.backward[k] = bg_profile_plausible_ratio(waited[PART_BACKWARD_AFTER + k] /
                                                                waited[PART_WARM_BACKWARD]);
        }
    }
    double alone[PARTS], load[PARTS];
    for (int p = 0; p < PARTS; p++) {
        const int at_start = p == PART_RECV || p == PART_GRAD_SEND || p == PART_GRAD_CHECK;
        const int at_end = p == PART_SEND || p == PART_GRAD_RECV || p == PART_CHECK;
        const int absent = (at_start && first == 0) || (at_end && last == layers);
        alone[p] = fig->passes > 0 && !absent ? fig->alone[p] / fig->passes : 0;
        load[p] = fig->passes > 0 && !absent ? fig->loaded[p] / fig->passes : 0;
    }
    bg_stage_load_t under_load = {0};
    /* As after a wait: a timing under load past the bound is the machine's
     * noise swamping the range's ops, kept as not measured (0s, priced as
     * alone by the simulator). */
    if (loaded && !bg_profile_load_plausible(alone[PART_FORWARD] + alone[PART_BACKWARD],
                                             load[PART_FORWARD] + load[PART_BACKWARD]))
        loaded = 0;
    if (loaded) {
        under_load.forward_s = load[PART_FORWARD];
        under_load.backward_s = load[PART_BACKWARD];
        under_load.update_s = load[PART_UPDATE];
        /* Every copy and check, at whichever ends the range has. */
        under_load.copies_s = load[PART_RECV] + load[PART_GRAD_SEND] + load[PART_GRAD_CHECK] +
                              load[PART_SEND] + load[PART_GRAD_RECV] + load[PART_CHECK];
    }
    return (bg_stage_profile_t){
        .first = first,
        .last = last,
        .slots = slots,
        .forward_s = alone[PART_FORWARD],
        .backward_s = alone[PART_BACKWARD],
        .update_s = alone[PART_UPDATE],
        .recv_s = alone[PART_RECV],
        .send_s = alone[PART_SEND],
        .grad_recv_s = alone[PART_GRAD_RECV],
        .grad_send_s = alone[PART_GRAD_SEND],
        .check_s = alone[PART_CHECK],
        .grad_check_s = alone[PART_GRAD_CHECK],
        .loaded = under_load,
        .after_wait = after_wait,
        .weight_check_s = alone[PART_WEIGHT_CHECK],
    };
}

/* The layer ranges to time, as (first, last) pairs in `range`: the
 * stages of cfg->split, or every range a stage may hold (none that cuts a
 * residual block) of a model of up to BG_PROFILE_MAX_STAGE_LAYERS layers
 * (none of a larger one). */
static bg_status_t stage_ranges(const bg_profile_config_t *cfg, int (**range)[2], int *count) {
    const int n = cfg->spec->num_layers;
    *range = NULL;
    *count = 0;
    if (cfg->split == NULL && n > BG_PROFILE_MAX_STAGE_LAYERS) return BG_OK;
    const int total = cfg->split != NULL ? cfg->split_count + 1 : n * (n + 1) / 2;
    *range = malloc((size_t)total * sizeof **range);
    if (*range == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    if (cfg->split != NULL) {
        for (int s = 0; s < total; s++) {
            (*range)[s][0] = s == 0 ? 0 : cfg->split[s - 1];
            (*range)[s][1] = s + 1 < total ? cfg->split[s] : n;
        }
        *count = total;
    } else {
        const bg_model_spec_t *spec = cfg->spec;
        for (int first = 0; first < n; first++)
            for (int last = first + 1; last <= n; last++) {
                if (!bg_model_spec_can_start(spec, first) || !bg_model_spec_can_start(spec, last))
                    continue;
                (*range)[*count][0] = first;
                (*range)[*count][1] = last;
                ++*count;
            }
    }
    return BG_OK;
}

bg_status_t bg_profile_measure_stages(bg_backend_t *be, const bg_profile_config_t *cfg,
                                      bg_profile_t *p) {
    const int n = cfg->spec->num_layers;
    int(*range)[2], ranges;
    BG_CHECK(stage_ranges(cfg, &range, &ranges));
    if (ranges == 0) return BG_OK;
    /* The slot counts a stage can have: 1 (the last stage of 1F1B), 2 (the
     * stage before it, double buffering) and M (every GPipe stage). */
    int slot_counts[3], kinds = 0;
    const int candidates[3] = {1, 2, cfg->microbatches};
    for (int c = 0; c < 3; c++) {
        int s = candidates[c], seen = s < 1 || s > cfg->microbatches;
        for (int k = 0; k < kinds; k++) seen |= slot_counts[k] == s;
        if (!seen) slot_counts[kinds++] = s;
    }
    const int total = ranges * kinds;
    range_figures_t *figures = calloc((size_t)total, sizeof *figures);
    p->stage = calloc((size_t)total, sizeof *p->stage);
    if (figures == NULL || p->stage == NULL) {
        free(figures);
        free(range);
        return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    }
    bg_status_t st = BG_OK;
    if (cfg->phase != NULL) cfg->phase(cfg->progress_ctx, BG_PROFILE_PHASE_RANGES);
    if (cfg->progress != NULL) cfg->progress(cfg->progress_ctx, 0, (int64_t)PASSES * total);
    for (int pass = 0; pass < PASSES && st == BG_OK; pass++)
        for (int entry = 0; entry < total && st == BG_OK; entry++) {
            const int *r = range[entry / kinds];
            st = time_range_pass(be, cfg, r[0], r[1], slot_counts[entry % kinds], &figures[entry]);
            if (st == BG_OK && cfg->progress != NULL)
                cfg->progress(cfg->progress_ctx, (int64_t)pass * total + entry + 1,
                              (int64_t)PASSES * total);
        }
    if (st == BG_OK) {
        for (int entry = 0; entry < total; entry++) {
            const int *r = range[entry / kinds];
            p->stage[entry] = range_profile(r[0], r[1], n, slot_counts[entry % kinds], cfg->loaded,
                                            &figures[entry]);
        }
        p->stage_count = total;
    }
    free(figures);
    free(range);
    return st;
}
