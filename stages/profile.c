#include "profile.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "cpu/backend_cpu.h"
#include "profile_impl.h"
#include "rng.h"
#include "stage.h"
#include "model_words.h"
#include "monotonic.h"

enum { WARMUP = PROFILE_WARMUP, MAX_REPETITIONS = 101, MAX_STASH_SLOTS = 64 };

/* How long an end of the channel measurement works before it sends: long
 * enough that the other thread is asleep (a virtual machine's vCPU then
 * halts, and waking it costs more than after a short sleep), about as long
 * as pipeline stages wait for each other. */
#define PAUSE_S 1e-3

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double profile_median(double *values, int n) {
    if (n < 1) return 0;
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return values[n / 2];
}

double bg_profile_typical(double *values, int n) {
    const double limit = 3.0 * profile_median(values, n);
    double sum = 0;
    int kept = 0;
    for (; kept < n && values[kept] <= limit; kept++) sum += values[kept];
    return kept > 0 ? sum / kept : 0;
}

/* ---- layer times, inside a stage of the whole model ---- */

/* Samples per layer: sample[op][layer * capacity + k]. */
enum { OP_FORWARD, OP_BACKWARD_DATA, OP_BACKWARD_WEIGHTS, OP_UPDATE, OP_WEIGHT_CHECK, OPS };

typedef struct layer_samples {
    int layers, capacity, count[OPS];
    double *sample[OPS];
    double *now[OPS]; /* what the stage adds to during one call, per layer */
} layer_samples_t;

/* Moves what the stage timed in the last call into the samples. */
static void collect(layer_samples_t *ls, int op) {
    for (int i = 0; i < ls->layers; i++) {
        ls->sample[op][(size_t)i * (size_t)ls->capacity + (size_t)ls->count[op]] = ls->now[op][i];
        ls->now[op][i] = 0;
    }
    ls->count[op]++;
}

static void fill_floats(float *dst, int64_t count, uint64_t stream) {
    bg_rng_t rng;
    bg_rng_seed(&rng, 42, stream);
    for (int64_t i = 0; i < count; i++) dst[i] = (float)(2 * bg_rng_uniform(&rng) - 1);
}

/* One round as the executor's step: `slots` forwards of `batch` samples,
 * their backwards in the same order, the check of the gradients, the update
 * and the zeroing of the gradients for the next round (timed with the
 * update); `record` keeps the times. */
static bg_status_t run_round(bg_stage_t *stage, int64_t batch, int slots, layer_samples_t *ls,
                             int record) {
    for (int k = 0; k < slots; k++) {
        BG_CHECK(bg_stage_forward_slot(stage, k, batch, 1, NULL));
        if (record) collect(ls, OP_FORWARD);
    }
    for (int k = 0; k < slots; k++) {
        BG_CHECK(bg_stage_backward_slot(stage, k, batch, 1.0 / (double)(batch * slots)));
        if (record) {
            collect(ls, OP_BACKWARD_DATA);
            collect(ls, OP_BACKWARD_WEIGHTS);
        }
    }
    BG_CHECK(bg_stage_mark_nonfinite_grads(stage, 0)); /* finite: marks nothing */
    if (record) collect(ls, OP_WEIGHT_CHECK);
    BG_CHECK(bg_stage_step(stage));
    BG_CHECK(bg_stage_zero_grads(stage));
    if (record) collect(ls, OP_UPDATE);
    for (int op = 0; !record && op < OPS; op++)
        for (int i = 0; i < ls->layers; i++) ls->now[op][i] = 0;
    return BG_OK;
}

double bg_profile_spread(double *values, int n) {
    if (n < 3) return 1;
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return values[0] > 0 ? values[n - 2] / values[0] : 1;
}

/* bg_profile_spread of the timed rounds' sums over every layer and op; 1
 * where memory runs out. */
static double round_spread(const layer_samples_t *ls, int rounds, int slots) {
    double *sum = calloc((size_t)(rounds > 0 ? rounds : 1), sizeof *sum);
    if (sum == NULL) return 1;
    for (int i = 0; i < ls->layers; i++) {
        const size_t at = (size_t)i * (size_t)ls->capacity;
        for (int r = 0; r < rounds; r++) {
            /* Forwards and backwards: `slots` a round; the rest one. */
            for (int k = r * slots; k < (r + 1) * slots; k++)
                sum[r] += ls->sample[OP_FORWARD][at + (size_t)k] +
                          ls->sample[OP_BACKWARD_DATA][at + (size_t)k] +
                          ls->sample[OP_BACKWARD_WEIGHTS][at + (size_t)k];
            sum[r] +=
                ls->sample[OP_UPDATE][at + (size_t)r] + ls->sample[OP_WEIGHT_CHECK][at + (size_t)r];
        }
    }
    const double spread = bg_profile_spread(sum, rounds);
    free(sum);
    return spread;
}

/* Times every layer's ops at micro-batches of `batch` samples into
 * layer[0..layers); `spread` (may be NULL): round_spread of the rounds. */
static bg_status_t measure_layers(bg_backend_t *be, const bg_profile_config_t *cfg, int64_t batch,
                                  bg_layer_profile_t *layer, double *spread) {
    const bg_model_spec_t *spec = cfg->spec;
    const int n = spec->num_layers, slots = cfg->stash_slots, reps = cfg->repetitions;
    layer_samples_t ls = {.layers = n, .capacity = reps * slots};
    bg_stage_t *stage = NULL;
    float *host = NULL;
    int32_t *labels = NULL;
    bg_status_t st = BG_OK;
    for (int op = 0; op < OPS; op++) {
        ls.sample[op] = calloc((size_t)n * (size_t)ls.capacity, sizeof(double));
        ls.now[op] = calloc((size_t)n, sizeof(double));
        BG_ALLOC_CHECK_GOTO(ls.sample[op], st, done);
        BG_ALLOC_CHECK_GOTO(ls.now[op], st, done);
    }
    bg_stage_config_t sc = BG_STAGE_CONFIG_INIT;
    sc.spec = spec;
    sc.first_layer = 0;
    sc.last_layer = n;
    sc.backend = be;
    sc.max_batch = batch;
    sc.seed = 1;
    sc.optimizer = cfg->optimizer;
    sc.stash_slots = slots;
    BG_CHECK_GOTO(bg_stage_create(&sc, &stage), st, done);
    const int64_t in = batch * bg_shape_numel(spec->layers[0].in);
    host = malloc(sizeof(float) * (size_t)in);
    /* Labels stay 0: valid for any number of classes. */
    labels = calloc((size_t)batch, sizeof(int32_t));
    BG_ALLOC_CHECK_GOTO(host, st, done);
    BG_ALLOC_CHECK_GOTO(labels, st, done);
    for (int k = 0; k < slots; k++) {
        fill_floats(host, in, 3 + (uint64_t)k);
        BG_CHECK_GOTO(bg_stage_load_slot(stage, k, batch, host, labels), st, done);
    }
    if (!bg_stage_has_loss(stage)) {
        const int64_t out = batch * bg_shape_numel(spec->layers[n - 1].out);
        double *dy = malloc(sizeof(double) * (size_t)out);
        BG_ALLOC_CHECK_GOTO(dy, st, done);
        for (int64_t i = 0; i < out; i++) dy[i] = 1e-3 * (double)(i % 7);
        st = bg_backend_upload_doubles(be, bg_stage_output_grad(stage), dy, out);
        free(dy);
        BG_CHECK_GOTO(st, st, done);
    }
    bg_stage_layer_times_t times = {ls.now[OP_FORWARD], ls.now[OP_BACKWARD_DATA],
                                    ls.now[OP_BACKWARD_WEIGHTS], ls.now[OP_UPDATE],
                                    ls.now[OP_WEIGHT_CHECK]};
    BG_CHECK_GOTO(bg_stage_zero_grads(stage), st, done); /* before timing: rounds zero after */
    bg_stage_set_layer_times(stage, &times);
    if (cfg->phase != NULL) {
        char what[80];
        snprintf(what, sizeof what,
                 "timing the layers at %lld sample%s, in rounds:", (long long)batch,
                 batch == 1 ? "" : "s");
        cfg->phase(cfg->progress_ctx, what);
    }
    if (cfg->progress != NULL) cfg->progress(cfg->progress_ctx, 0, WARMUP + reps);
    for (int r = 0; r < WARMUP + reps; r++) {
        BG_CHECK_GOTO(run_round(stage, batch, slots, &ls, r >= WARMUP), st, done);
        if (cfg->progress != NULL) cfg->progress(cfg->progress_ctx, r + 1, WARMUP + reps);
    }
    if (spread != NULL) *spread = round_spread(&ls, reps, slots);
    for (int i = 0; i < n; i++) {
        bg_layer_profile_t *l = &layer[i];
        const size_t at = (size_t)i * (size_t)ls.capacity;
        l->forward_s = bg_profile_typical(ls.sample[OP_FORWARD] + at, ls.count[OP_FORWARD]);
        l->backward_data_s =
            bg_profile_typical(ls.sample[OP_BACKWARD_DATA] + at, ls.count[OP_BACKWARD_DATA]);
        l->backward_weights_s =
            bg_profile_typical(ls.sample[OP_BACKWARD_WEIGHTS] + at, ls.count[OP_BACKWARD_WEIGHTS]);
        l->update_s = bg_profile_typical(ls.sample[OP_UPDATE] + at, ls.count[OP_UPDATE]);
        l->weight_check_s =
            bg_profile_typical(ls.sample[OP_WEIGHT_CHECK] + at, ls.count[OP_WEIGHT_CHECK]);
    }
done:
    bg_stage_destroy(stage);
    free(host);
    free(labels);
    for (int op = 0; op < OPS; op++) {
        free(ls.sample[op]);
        free(ls.now[op]);
    }
    if (st != BG_OK)
        bg_error_prefix(st, "profiling the layers at %lld samples: ", (long long)batch);
    return st;
}

/* The layers' forward, dX and dW again at each of cfg's other sizes, into
 * p->layer[i].at_size and p->other_size. A size whose stage does not fit
 * in memory (a whole model at a large batch) is left out. */
static bg_status_t measure_other_sizes(bg_backend_t *be, const bg_profile_config_t *cfg,
                                       bg_profile_t *p) {
    bg_layer_profile_t *times = calloc((size_t)p->layers, sizeof *times);
    if (times == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    bg_status_t st = BG_OK;
    p->other_sizes = 0;
    for (int k = 0; st == BG_OK && k < cfg->other_sizes; k++) {
        st = measure_layers(be, cfg, cfg->other_size[k], times, NULL);
        if (st == BG_ERR_NOMEM) {
            bg_error_clear();
            st = BG_OK;
            continue;
        }
        const int at = p->other_sizes;
        for (int i = 0; st == BG_OK && i < p->layers; i++)
            p->layer[i].at_size[at] = (bg_layer_at_size_t){
                times[i].forward_s, times[i].backward_data_s, times[i].backward_weights_s};
        if (st == BG_OK) p->other_size[p->other_sizes++] = cfg->other_size[k];
    }
    free(times);
    return st;
}

/* ---- channel costs, between two threads ---- */

/* A pause long enough that the other thread is asleep on its channel, spent
 * writing the buffer about to be sent, as a stage computes its output. */
static void produce(void *buffer, size_t bytes) {
    const double until = bg_monotonic_seconds() + PAUSE_S;
    unsigned char value = 1;
    do memset(buffer, value++, bytes > 0 ? bytes : 0);
    while (bg_monotonic_seconds() < until);
}

/* The two ends: each sends `rounds` messages of `bytes` and receives as
 * many, in turn (the main end first), and notes its copies and waits. */
typedef struct channel_end {
    bg_channel_t *out, *in;
    bg_backend_t *be;
    void *src, *dst;
    size_t bytes, capacity;
    int rounds, first; /* first: sends before it receives */
    bg_topology_t *topology;
    int core;
    double *send, *recv;       /* rounds entries: own copies */
    double *sent_at, *woke_at; /* rounds: own send done; own return from send */
    double *ready_at;          /* rounds: own receive ready */
    bg_status_t status;
    char message[BG_ERROR_MAX]; /* the second thread's, when it failed: messages are per thread */
} channel_end_t;

static bg_status_t run_end(channel_end_t *e) {
    for (int k = 0; k < e->rounds; k++) {
        bg_channel_timing_t t;
        size_t got;
        if (!e->first) {
            BG_CHECK(bg_channel_recv(e->in, e->be, k, e->dst, e->capacity, &got, &t));
            e->recv[k] = t.copied - t.ready;
            e->ready_at[k] = t.ready;
        }
        produce(e->src, e->bytes);
        /* The copies alone (`copied`): the wake is timed apart, from the
         * message's publication to the send's return. */
        BG_CHECK(bg_channel_send(e->out, e->be, k, e->src, e->bytes, &t, NULL));
        e->woke_at[k] = bg_monotonic_seconds();
        e->send[k] = t.copied - t.ready;
        e->sent_at[k] = t.copied;
        if (e->first) {
            BG_CHECK(bg_channel_recv(e->in, e->be, k, e->dst, e->capacity, &got, &t));
            e->recv[k] = t.copied - t.ready;
            e->ready_at[k] = t.ready;
        }
    }
    return BG_OK;
}

static void *peer_main(void *arg) {
    channel_end_t *e = arg;
    if (e->topology != NULL && bg_topology_bind_thread(e->topology, e->core) != BG_OK)
        bg_error_clear();
    e->status = run_end(e);
    if (e->status != BG_OK) snprintf(e->message, sizeof e->message, "%s", bg_error_message());
    return NULL;
}

/* Typical figures (bg_profile_typical) of one message size's exchanges, both
 * directions together. */
typedef struct crossing {
    double send, recv, handoff, wake;
} crossing_t;

static bg_status_t measure_crossing(bg_backend_t *be, const bg_profile_config_t *cfg, size_t bytes,
                                    crossing_t *out) {
    enum { ROUNDS_MAX = MAX_REPETITIONS + WARMUP };
    const int rounds = WARMUP + cfg->repetitions;
    bg_channel_t *ab = NULL, *ba = NULL;
    void *buffers[4] = {NULL, NULL, NULL, NULL};
    double times[2][5][ROUNDS_MAX];
    bg_status_t st = BG_OK;
    bg_channel_config_t cc = {
        .slot_bytes = bytes, .capacity = 2, .name = "profile channel", .timeout_s = 60};
    BG_CHECK_GOTO(bg_channel_create(&cc, &ab), st, done);
    BG_CHECK_GOTO(bg_channel_create(&cc, &ba), st, done);
    for (int i = 0; i < 4; i++) {
        buffers[i] = malloc(bytes > 0 ? bytes : 1);
        BG_ALLOC_CHECK_GOTO(buffers[i], st, done);
        memset(buffers[i], 0, bytes);
    }
    channel_end_t ends[2];
    for (int s = 0; s < 2; s++)
        ends[s] = (channel_end_t){.out = s ? ba : ab,
                                  .in = s ? ab : ba,
                                  .be = be,
                                  .src = buffers[2 * s],
                                  .dst = buffers[2 * s + 1],
                                  .bytes = bytes,
                                  .capacity = bytes,
                                  .rounds = rounds,
                                  .first = s == 0,
                                  .topology = cfg->topology,
                                  .core = cfg->peer_core,
                                  .send = times[s][0],
                                  .recv = times[s][1],
                                  .sent_at = times[s][2],
                                  .woke_at = times[s][3],
                                  .ready_at = times[s][4]};
    pthread_t peer;
    if (pthread_create(&peer, NULL, peer_main, &ends[1]) != 0) {
        st = bg_error_set(BG_ERR_INTERNAL, "profile: cannot start the channel's second thread");
        goto done;
    }
    ends[0].status = run_end(&ends[0]);
    if (ends[0].status != BG_OK) {
        bg_channel_abort(ab);
        bg_channel_abort(ba);
    }
    pthread_join(peer, NULL);
    BG_CHECK_GOTO(ends[0].status, st, done);
    if (ends[1].status != BG_OK) {
        st = bg_error_set(ends[1].status, "%s", ends[1].message);
        goto done;
    }
    /* After warm-up, both directions: a send of one end, the receive of the
     * other (asleep since the pause began). */
    double send[2 * ROUNDS_MAX], recv[2 * ROUNDS_MAX], handoff[2 * ROUNDS_MAX],
        wake[2 * ROUNDS_MAX];
    int n = 0;
    for (int k = WARMUP; k < rounds; k++)
        for (int s = 0; s < 2; s++, n++) {
            send[n] = times[s][0][k];
            recv[n] = times[1 - s][1][k];
            handoff[n] = times[1 - s][4][k] - times[s][2][k];
            wake[n] = times[s][3][k] - times[s][2][k];
        }
    *out = (crossing_t){bg_profile_typical(send, n), bg_profile_typical(recv, n),
                        bg_profile_typical(handoff, n), bg_profile_typical(wake, n)};
done:
    bg_channel_destroy(ab);
    bg_channel_destroy(ba);
    for (int i = 0; i < 4; i++) free(buffers[i]);
    return st;
}

static int compare_size(const void *a, const void *b) {
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Every layer boundary's crossing at the micro-batch size, measured once
 * per message size (a crossing's cost is its bytes': thousands of equal
 * layers are one measurement, not thousands of a few milliseconds each).
 * The hand-off and wake, which do not depend on the size, are typical
 * figures over all crossings measured: at least HANDOFF_SAMPLES of them
 * where the boundaries have that many, the sizes taken again in turn. */
static bg_status_t measure_channels(bg_backend_t *be, const bg_profile_config_t *cfg,
                                    bg_profile_t *p) {
    enum { HANDOFF_SAMPLES = 8 };
    const int n = cfg->spec->num_layers, boundaries = n - 1;
    const int most = boundaries > HANDOFF_SAMPLES ? boundaries : HANDOFF_SAMPLES;
    double *handoff = calloc((size_t)most, sizeof(double)),
           *wake = calloc((size_t)most, sizeof(double));
    size_t *bytes = calloc((size_t)n, sizeof(size_t)), *sizes = calloc((size_t)n, sizeof(size_t));
    crossing_t *measured = calloc((size_t)n, sizeof(crossing_t));
    bg_status_t st = BG_OK;
    BG_ALLOC_CHECK_GOTO(handoff, st, done);
    BG_ALLOC_CHECK_GOTO(wake, st, done);
    BG_ALLOC_CHECK_GOTO(bytes, st, done);
    BG_ALLOC_CHECK_GOTO(sizes, st, done);
    BG_ALLOC_CHECK_GOTO(measured, st, done);
    for (int i = 1; i < n; i++) {
        bytes[i] = bg_backend_bytes(be, cfg->batch * bg_shape_numel(cfg->spec->layers[i].in));
        sizes[i - 1] = bytes[i];
    }
    qsort(sizes, (size_t)boundaries, sizeof *sizes, compare_size);
    int distinct = 0;
    for (int k = 0; k < boundaries; k++)
        if (distinct == 0 || sizes[distinct - 1] != sizes[k]) sizes[distinct++] = sizes[k];
    /* Every size once, and at least HANDOFF_SAMPLES crossings where there
     * are that many boundaries (distinct is at most boundaries). */
    int samples = boundaries < HANDOFF_SAMPLES ? boundaries : HANDOFF_SAMPLES;
    if (distinct > samples) samples = distinct;
    for (int k = 0; k < samples; k++) {
        crossing_t c;
        BG_CHECK_GOTO(measure_crossing(be, cfg, sizes[k % distinct], &c), st, done);
        if (k < distinct) measured[k] = c;
        handoff[k] = c.handoff;
        wake[k] = c.wake;
    }
    for (int i = 1; i < n; i++) {
        const size_t *at = bsearch(&bytes[i], sizes, (size_t)distinct, sizeof *sizes, compare_size);
        p->layer[i].send_s = measured[at - sizes].send; /* every size is there */
        p->layer[i].recv_s = measured[at - sizes].recv;
    }
    p->handoff_s = bg_profile_typical(handoff, samples);
    p->wake_s = bg_profile_typical(wake, samples);
done:
    free(handoff);
    free(wake);
    free(bytes);
    free(sizes);
    free(measured);
    if (st != BG_OK) bg_error_prefix(st, "profiling the channels: ");
    return st;
}

/* Bytes per second of one memcpy of a few MiB. */
static double measure_copy(void) {
    enum { BYTES = 4 << 20 };
    char *a = malloc(BYTES), *b = malloc(BYTES);
    double best = 0;
    volatile char sink = 0; /* reads each copy, so that none is left out */
    if (a == NULL || b == NULL) goto done;
    memset(a, 1, BYTES);
    memset(b, 2, BYTES);
    for (int k = 0; k < 7; k++) {
        char *to = k % 2 ? a : b;
        double start = bg_monotonic_seconds();
        memcpy(to, k % 2 ? b : a, BYTES);
        const double seconds = bg_monotonic_seconds() - start;
        sink = (char)(sink + to[BYTES - 1]);
        if (seconds > 0 && BYTES / seconds > best) best = BYTES / seconds;
    }
done:
    free(a);
    free(b);
    /* Within what a profile may hold (a coarse clock could say more). */
    if (!(best > 0)) return 5e9;
    if (best < BG_PROFILE_MIN_COPY_BYTES_PER_S) return BG_PROFILE_MIN_COPY_BYTES_PER_S;
    return best < BG_PROFILE_MAX_COPY_BYTES_PER_S ? best : BG_PROFILE_MAX_COPY_BYTES_PER_S;
}

/* Up to BG_PROFILE_MAX_OTHER_SIZES sizes, ascending from 1, none the batch. */
static int other_sizes_valid(const bg_profile_config_t *cfg) {
    if (cfg->other_sizes < 0 || cfg->other_sizes > BG_PROFILE_MAX_OTHER_SIZES) return 0;
    for (int k = 0; k < cfg->other_sizes; k++)
        if (cfg->other_size[k] < 1 || cfg->other_size[k] == cfg->batch ||
            (k > 0 && cfg->other_size[k] <= cfg->other_size[k - 1]))
            return 0;
    return 1;
}

bg_status_t bg_profile_measure(const bg_profile_config_t *cfg, bg_profile_t **out) {
    if (cfg->spec == NULL || cfg->batch < 1 || cfg->repetitions < 1 ||
        cfg->repetitions > MAX_REPETITIONS || cfg->stash_slots < 1 ||
        cfg->stash_slots > MAX_STASH_SLOTS || cfg->microbatches < 1 ||
        cfg->microbatches > MAX_STASH_SLOTS || !other_sizes_valid(cfg))
        return bg_error_set(BG_ERR_INVALID,
                            "profile: need a model, batch >= 1, up to %d other sizes ascending "
                            "from 1 and none the batch, 1..%d repetitions and 1..%d stash slots "
                            "and micro-batches",
                            BG_PROFILE_MAX_OTHER_SIZES, MAX_REPETITIONS, MAX_STASH_SLOTS);
    if (cfg->split != NULL) {
        /* Checked now, not after the layers' minute of timing. */
        if (cfg->split_count < 1)
            return bg_error_set(BG_ERR_INVALID, "--split: no boundaries given");
        BG_CHECK(bg_model_spec_check_split(cfg->spec, cfg->split_count + 1, cfg->split, NULL));
    }
    bg_profile_t *p = calloc(1, sizeof *p);
    if (p == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    p->version = BG_PROFILE_VERSION;
    p->layers = cfg->spec->num_layers;
    p->batch = cfg->batch;
    p->stash_slots = cfg->stash_slots;
    p->fingerprint = cfg->spec->fingerprint;
    snprintf(p->device, sizeof p->device, "cpu");
    snprintf(p->optimizer, sizeof p->optimizer, "%s", bg_optimizer_kind_name(cfg->optimizer.kind));
    p->optimizer_states = bg_optimizer_state_buffers(&cfg->optimizer);
    p->layer = calloc((size_t)p->layers, sizeof *p->layer);
    p->model_words = bg_model_spec_words(cfg->spec);
    bg_backend_t *be = NULL;
    bg_status_t st = BG_OK;
    BG_ALLOC_CHECK_GOTO(p->layer, st, fail);
    BG_ALLOC_CHECK_GOTO(p->model_words, st, fail);
    bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
    BG_CHECK_GOTO(bg_backend_cpu_create(&cpu, &be), st, fail);
    BG_CHECK_GOTO(measure_layers(be, cfg, cfg->batch, p->layer, &p->layer_round_spread), st, fail);
    BG_CHECK_GOTO(measure_other_sizes(be, cfg, p), st, fail);
    BG_CHECK_GOTO(measure_channels(be, cfg, p), st, fail);
    BG_CHECK_GOTO(bg_profile_measure_stages(be, cfg, p), st, fail);
    p->copy_bytes_per_s = measure_copy();
    bg_backend_destroy(be);
    *out = p;
    return BG_OK;
fail:
    bg_backend_destroy(be);
    bg_profile_destroy(p);
    return st;
}
