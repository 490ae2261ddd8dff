/* Measured costs: `brigade profile` times, on a CPU device at the
 * micro-batch size, each layer's forward, backward-data (dX),
 * backward-weights (dW) and optimizer update where the pipeline runs them:
 * inside a stage of the whole model (its in-place relus, its aliased
 * flatten, its stash slots rotating), several micro-batches in flight, the
 * mean over many (outliers left out); and what crossing each layer
 * boundary costs when a CPU device hands a tensor to another through a
 * channel, measured with two
 * threads on two cores passing it back and forth through real channels: the
 * sender's copy into the ring, the receiver's copy out, the time from the
 * sender's copy to the waiting receiver running (hand-off), and the time
 * the sender spends waking it. The cost model (stages/cost_model.h) uses a
 * profile in place of its analytic estimates when one is given (--profile),
 * so plans and simulations follow this machine.
 *
 * Saved as JSON: {"version": 2, "model": fingerprint (hex), "model_layers":
 * the layers in words (model_words.h), "device": "cpu",
 * "optimizer": "adam" | "sgd", "optimizer_states": 0..2, "batch": b, "stash_slots": s,
 * "copy_bytes_per_s": x, "handoff_s": .., "wake_s": .., "layers": [{"forward_s": ..,
 * "backward_data_s": .., "backward_weights_s": .., "update_s": .., "weight_check_s": ..,
 * "send_s": .., "recv_s": ..}, ...]} where send_s and recv_s are the copies
 * of the layer's input (0 for layer 0), update_s includes zeroing the
 * layer's gradients for the next step (as the executor's optimizer step
 * does) and weight_check_s is the check of its accumulated gradients for
 * NaN and Inf (once a step, after its last backward). A profile may also
 * hold "other_sizes": [n, ...] (ascending, none equal to batch) and in
 * each layer "at_other_sizes": [{"forward_s", "backward_data_s",
 * "backward_weights_s"}, ...], the same layer timed at micro-batches of
 * those sizes; the cost model prices a size between two timed ones on the
 * line through them (bg_profile_layer_seconds). Version 1 (no
 * "version") lacks stash_slots, handoff_s, wake_s, send_s and recv_s and
 * still loads: its copies are then estimated from copy_bytes_per_s.
 * weight_check_s (here and in stage entries) came later within version 2:
 * a profile without it loads with 0, and its updates leave out the
 * zeroing. */
#ifndef BG_PROFILE_H
#define BG_PROFILE_H

#include <stdint.h>

#include "model_spec.h"
#include "optimizer.h"
#include "status.h"
#include "topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most micro-batch sizes a profile times the layers at besides its batch. */
#define BG_PROFILE_MAX_OTHER_SIZES 6

/* A layer's forward, dX and dW at one of the profile's other sizes. */
typedef struct bg_layer_at_size {
    double forward_s, backward_data_s, backward_weights_s;
} bg_layer_at_size_t;

/* The ops whose times a profile holds at every size. */
typedef enum bg_profile_op {
    BG_PROFILE_FORWARD,
    BG_PROFILE_BACKWARD_DATA,
    BG_PROFILE_BACKWARD_WEIGHTS,
} bg_profile_op_t;

typedef struct bg_layer_profile {
    double forward_s;          /* one micro-batch */
    double backward_data_s;    /* dX */
    double backward_weights_s; /* dW (0 for layers without weights) */
    double update_s;           /* optimizer step of its parameters, and zeroing their gradients */
    double send_s, recv_s;     /* its input through a channel: each end's copy (version 2) */
    double weight_check_s;     /* the NaN/Inf check of its accumulated gradients, once a step */
    /* At the profile's other sizes: at_size[k] at other_size[k] samples. */
    bg_layer_at_size_t at_size[BG_PROFILE_MAX_OTHER_SIZES];
} bg_layer_profile_t;

/* A stage's figures (as in bg_stage_profile_t) while a co-runner on the other core runs the layers
 * a neighbour stage would hold (profile_stages.c): what its ops cost while the other device
 * computes too (shared cache and memory bandwidth). All 0 when not measured (a profile of one
 * device, or an older profile). */
typedef struct bg_stage_load {
    double forward_s, backward_s, update_s;
    double copies_s; /* its copies and checks of one micro-batch, both directions, summed */
} bg_stage_load_t;

/* What the other device ran while a stage waited: one forward or one
 * backward of a micro-batch of the neighbour stage's layers, or their
 * optimizer update. */
enum { BG_NEIGHBOUR_FORWARD, BG_NEIGHBOUR_BACKWARD, BG_NEIGHBOUR_UPDATE, BG_NEIGHBOUR_KINDS };

/* How much slower a stage's forward and backward run right after its
 * thread slept while the other device ran one op of the neighbour stage's
 * layers (profile_stages.c), by the kind of that op: the op after the wait
 * over the same op run straight after the stage's own work. In a pipeline
 * a stage waits often (for an activation, a gradient, the optimizer
 * barrier), and what the other device did meanwhile decides how much of
 * the stage's data is gone from the caches when it resumes
 * (docs/sim-accuracy-log.md, "Ops after an idle gap"). All 0 when not measured. */
typedef struct bg_stage_after_wait {
    double forward[BG_NEIGHBOUR_KINDS];
    double backward[BG_NEIGHBOUR_KINDS];
} bg_stage_after_wait_t;

/* The largest after-wait ratio a profile holds: a real slowdown is a few
 * tens of percent; one past this is a tiny op's timing swamped by the
 * machine's noise, which the profiler records as 0 (not measured). */
#define BG_PROFILE_MAX_AFTER_WAIT_RATIO 100

/* An after-wait ratio as a profile keeps it: measured, or 0 (not measured)
 * past the bound or not finite, as the profiler takes it and a reader of
 * a file written before it did (2026-12-04). */
static inline double bg_profile_plausible_ratio(double ratio) {
    return ratio <= BG_PROFILE_MAX_AFTER_WAIT_RATIO ? ratio : 0;
}

/* Whether a range's forward plus backward beside a co-runner, `loaded`
 * seconds, is a slowdown a profile keeps against `alone` seconds without
 * it: at most BG_PROFILE_MAX_AFTER_WAIT_RATIO times, as after a wait. Past
 * that (or NaN) the profiler keeps none, and a file's is read as none
 * (until 2026-12-06 the profiler kept any, and a tester's 1e9 times priced
 * a step at 36 minutes). */
static inline int bg_profile_load_plausible(double alone, double loaded) {
    return loaded <= BG_PROFILE_MAX_AFTER_WAIT_RATIO * alone;
}

/* A layer range [first, last) timed as a stage of its own with `slots`
 * micro-batches in flight (profile_stages.c): per micro-batch its forward,
 * backward (dX and dW) and the copies around them; its update per step.
 * Each figure is the mean over passes of each pass's typical round
 * (bg_profile_typical: the mean, outliers left out). */
typedef struct bg_stage_profile {
    int first, last, slots;
    double forward_s, backward_s, update_s; /* update_s zeroes the gradients too */
    double recv_s, send_s;                  /* activation in (first > 0), out (last < layers) */
    double grad_recv_s, grad_send_s;        /* gradient in (last < layers), out (first > 0) */
    double check_s, grad_check_s;           /* the NaN/Inf check of what it sends, before each */
    bg_stage_load_t loaded;                 /* the same under load; 0 when not measured */
    bg_stage_after_wait_t after_wait;       /* ops after a wait; 0 when not measured */
    double weight_check_s;                  /* the check of its gradients, once a step */
} bg_stage_profile_t;

/* Models of more layers get no stage ranges (there are L(L+1)/2 of them),
 * unless a split names the few to time (bg_profile_config_t.split). */
#define BG_PROFILE_MAX_STAGE_LAYERS 64

/* The profile format this build writes; it reads 1 and 2. */
#define BG_PROFILE_VERSION 2

/* A copy bandwidth a profile may hold: one memcpy on a CPU, from a slow
 * embedded core to well past any memory system. */
#define BG_PROFILE_MIN_COPY_BYTES_PER_S 1e6
#define BG_PROFILE_MAX_COPY_BYTES_PER_S 1e13

typedef struct bg_profile {
    int version; /* 1: layer times and copy bandwidth only; 2: and channel costs */
    int layers;
    int64_t batch; /* micro-batch size the times are for */
    /* The other micro-batch sizes the layers were timed at, ascending, none
     * equal to batch; other_sizes 0: none. */
    int other_sizes;
    int64_t other_size[BG_PROFILE_MAX_OTHER_SIZES];
    double copy_bytes_per_s; /* one memcpy of a few MiB, within the bounds below */
    int stash_slots;         /* micro-batches in flight while timing (version 2) */
    double handoff_s;        /* a sender's copy done -> the waiting receiver running */
    double wake_s;           /* what that wake costs the sender */
    uint64_t fingerprint;    /* of the model spec */
    /* The model's layers in words (model_words.h), saved as "model_layers"
     * so that loading the profile for another model says where the two
     * differ; NULL where not known (owned; bg_profile_destroy frees it). */
    char *model_words;
    char device[24]; /* "cpu": the only kind measured */
    /* The optimizer the update times are for ("adam", "sgd"; "" in older
     * profiles, which did not say) and its state buffers per parameter
     * (-1: not said). */
    char optimizer[8];
    int optimizer_states;
    bg_layer_profile_t *layer;
    /* Of a measurement (not saved): how far apart its timed rounds of the
     * layers lie, bg_profile_spread of the rounds' sums over every layer
     * and op; 0 where not measured (a loaded profile). */
    double layer_round_spread;
    int stage_count;           /* version 2: every layer range (or a split's) at slots 1, 2 and M */
    bg_stage_profile_t *stage; /* stage_count entries, or NULL */
} bg_profile_t;

typedef struct bg_profile_config {
    const bg_model_spec_t *spec;
    int64_t batch; /* micro-batch size to time */
    /* Also time the layers at these micro-batch sizes (ascending, each >= 1
     * and none equal to batch), so that other sizes are priced between
     * timed ones; other_sizes 0: at `batch` only. */
    int other_sizes;
    int64_t other_size[BG_PROFILE_MAX_OTHER_SIZES];
    int repetitions; /* timed rounds after warm-up, their mean counts (layer
                      * ranges: ceil(R / 3) rounds in each of 3 passes) */
    bg_optimizer_config_t optimizer;
    int stash_slots;         /* micro-batches in flight in each round, >= 1 */
    int microbatches;        /* M: layer ranges are timed with 1, 2 and M in flight */
    bg_topology_t *topology; /* binds the channel's other thread; NULL: unbound */
    int peer_core;           /* the core it binds to */
    int loaded; /* also time each layer range beside a co-runner on peer_core (K >= 2) */
    /* Time only the stages of this split (split[s - 1] the first layer of
     * stage s, as --split), at any model size: seconds where every range
     * of a small model takes a minute. NULL: every range of a model of up
     * to BG_PROFILE_MAX_STAGE_LAYERS layers. */
    const int *split;
    int split_count;
    /* Called with done = 0 before each phase of timings (the layers at
     * each size, in rounds; then the layer ranges), then after each timing
     * with how many of the phase's `total` are done, for a progress
     * display; NULL: not called. */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    /* Called before each phase's first progress call with what it times
     * ("timing the layers at 64 samples, in rounds:", then
     * BG_PROFILE_PHASE_RANGES); NULL: not called. */
    void (*phase)(void *ctx, const char *what);
    void *progress_ctx;
} bg_profile_config_t;

/* The phase that times the layer ranges as stages (the longest). */
#define BG_PROFILE_PHASE_RANGES "timing layer ranges as stages:"

#define BG_PROFILE_CONFIG_INIT                                                                     \
    {                                                                                              \
        .spec = NULL, .batch = 64, .other_sizes = 0, .other_size = {0}, .repetitions = 7,          \
        .optimizer = BG_OPTIMIZER_CONFIG_INIT, .stash_slots = 2, .microbatches = 1,                \
        .topology = NULL, .peer_core = 1, .loaded = 0, .split = NULL, .split_count = 0,            \
        .progress = NULL, .phase = NULL, .progress_ctx = NULL                                      \
    }

/* The figure a profile keeps of n timings of one thing (sorted in place; 0
 * for none): their mean, leaving out any above 3 times their median (a
 * thread descheduled mid-op). Not the median: a step is a sum of
 * many ops, and the median of such a sum follows the ops' means, which on
 * a loaded machine lie a few percent above their medians (timings skew
 * right: docs/sim-accuracy-log.md, "Means, not medians"). */
double bg_profile_typical(double *values, int n);

/* Times every layer on one CPU device (this thread, one OpenBLAS thread; a
 * round runs stash_slots forwards, their backwards and an update), and the
 * channel costs with a second thread on peer_core. */
bg_status_t bg_profile_measure(const bg_profile_config_t *cfg, bg_profile_t **out);

/* Writes a profile as JSON (BG_ERR_IO naming the path). */
bg_status_t bg_profile_save(const bg_profile_t *profile, const char *path);

/* Reads a profile (version 1 or 2) and checks it belongs to `spec` (same
 * fingerprint and layer count); BG_ERR_PARSE / BG_ERR_INVALID naming the
 * file otherwise, and for a newer version, saying to profile again. */
bg_status_t bg_profile_load(const char *path, const bg_model_spec_t *spec, bg_profile_t **out);

/* bg_profile_load's checks on a profile's text, NUL-terminated (what
 * follows the first NUL is not read), its messages naming `path`. *out is
 * set only on success. */
bg_status_t bg_profile_parse(const char *path, const char *text, const bg_model_spec_t *spec,
                             bg_profile_t **out);

/* Whether profile `p` (from `path`) can price a run of `optimizer`: its
 * update times are for one optimizer's state (an older profile that does
 * not say passes). BG_ERR_INVALID naming both otherwise. */
bg_status_t bg_profile_check_optimizer(const bg_profile_t *p, const char *path,
                                       const bg_optimizer_config_t *optimizer);

/* The sizes `brigade profile` times the layers at besides `micro` (ceil(B /
 * M)) for a step of `batch` samples, into out[0..return value), ascending:
 * 1 and the batch, then, while two neighbours among those and `micro` are
 * more than 4 times apart and fewer than BG_PROFILE_MAX_OTHER_SIZES sizes
 * are chosen, the geometric middle of the two farthest apart (rounded). At
 * B = 64, M = 4: 1, 4 and 64 beside 16; at B = 1: none. */
int bg_profile_default_sizes(int64_t batch, int64_t micro, int64_t *out);

/* The micro-batch sizes profile `p` timed its layers at, ascending, into
 * sizes[0..return value) (at most BG_PROFILE_MAX_OTHER_SIZES + 1): its
 * batch among its other sizes; where[i] is -1 for the batch, else the
 * index of the other size (into other_size and each layer's at_size). */
int bg_profile_timed_sizes(const bg_profile_t *p, int64_t *sizes, int *where);

/* Layer `l`'s forward, dX and dW at the timed size `where` names (as
 * bg_profile_timed_sizes gives it). */
bg_layer_at_size_t bg_profile_layer_at(const bg_layer_profile_t *l, int where);

/* Whether M micro-batches of a step of `batch` samples (floor(B / M) to
 * ceil(B / M) samples each) lie within the sizes `p` timed: not when even
 * the largest is below every size timed, or the smallest above. */
int bg_profile_covers(const bg_profile_t *p, int64_t batch, int microbatches);

/* Seconds of layer `l`'s op at a micro-batch of `samples` (a mean, so not
 * whole), from its times at the sizes the profile timed (batch and the
 * other sizes): exact at each; between two of them, on the line through
 * both (a fixed part, such as reading a GEMM's weights, plus a part per
 * sample); past the largest, in proportion to the samples from it; below
 * the smallest, on the line through the two smallest, but no more than the
 * smallest's time and no less than its time in proportion. With one size:
 * in proportion to the samples. */
double bg_profile_layer_seconds(const bg_profile_t *p, const bg_layer_profile_t *l,
                                bg_profile_op_t op, double samples);

/* NULL is a no-op. */
void bg_profile_destroy(bg_profile_t *profile);

#ifdef __cplusplus
}
#endif

#endif /* BG_PROFILE_H */
