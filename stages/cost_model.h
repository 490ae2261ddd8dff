/* The analytic cost model the planner works from: how long a slice of the
 * layer stack takes on a device, how many bytes cross each stage boundary,
 * how long a link takes to carry them, and how much memory a stage holds.
 *
 * Time, per micro-batch of n samples on a device of F FLOP/s with a per-op
 * overhead o (launch, dispatch):
 *   forward(layer)  = flops * n / F + o, at least w / R + o
 *   backward(layer) = 2 * flops * n / F + 2 o   layers with weights (dX + dW;
 *                                               dX at least w / R)
 *                   =     flops * n / F +   o   the others (dX only)
 *                     but the model's first layer's dX, which the executor
 *                     never runs (nothing comes before it): a stage holding
 *                     layer 0 is charged its dW alone
 *   weight(layer)   =     flops * n / F +   o   the dW part of backward, which
 *                                                  zb-h1 runs apart (W)
 *   recompute       = the stage's forward again before its backward (and,
 *                     split as zb-h1 has it, again before W)
 *   transfer(bytes) = bytes / bandwidth + latency
 * where flops are bg_layer_spec_t.flops (forward FLOPs per sample) but for
 * tanh, sigmoid, gelu, layernorm, dropout, relu, the pools and softmax-cross-entropy,
 * whose forward, dX and dW are priced apart from a CPU core's measured time
 * per value (layer_work in cost_model.c; summary's one FLOP a tanh value
 * takes 14.5 ns there), or on a device where they are memory-bound, tanh,
 * sigmoid, gelu, layernorm and dropout by the bytes they stream and relu,
 * the pools and the loss by their FLOPs, w the
 * layer's weight and bias bytes and R the rate the device streams them: a
 * product over few samples reads every weight for little arithmetic, so
 * its forward and dX take at least w / R. dW, an outer product summed into
 * the gradients, is left at its FLOPs: so it measured on the origin CNN's
 * 5408 x 128 dense layer (0.07 to 0.08 ms at one sample), but square layers'
 * dW streams too (0.44 ms for 1024 x 1024, 1.67 ms for 2048 x 2048), so
 * wide dense models are still predicted fast at many micro-batches.
 *
 * Memory mirrors what bg_stage_create allocates and what the pipeline adds
 * for a stage's channels, category by category (tests/test_partition.c
 * checks the two agree byte for byte). With b = ceil(B / M) samples per
 * micro-batch and e bytes per element:
 *   params, grads   weights + biases of the stage's layers, e each
 *   optimizer       0, 1 or 2 x params (sgd, sgd with momentum, adam)
 *   stash           stash_slots x one micro-batch's stash: its input, every
 *                   layer's output but flatten's, residuals' and in-place relus' (see
 *                   bg_layer_runs_in_place),
 *                   with split backward (zb-h1) dL/d(output) of each layer
 *                   with weights, and int32 labels on the loss stage; with
 *                   recompute only the input (plus the zb-h1 gradients)
 *   buffers         2 x the widest activation (gradient ping-pong), one
 *                   more for each depth to which residual blocks nest in
 *                   the stage (its skip gradient, stage_impl.h), the
 *                   output gradient (not on the loss stage), the input
 *                   gradient (not at layer 0), and with recompute one
 *                   shared set of layer outputs
 *   channels        the rings of the channels the stage receives from:
 *                   activations from its predecessor, gradients from its
 *                   successor, each slots x the boundary activation
 *   workspace       the largest any layer asks for (conv2d im2col, a
 *                   layernorm's row statistics), as the CPU backend reports
 *                   it (bg_layer_workspace_bytes); on a device that chooses
 *                   its convolutions' algorithms itself (a GPU: cuDNN's, by
 *                   timing them there), the most it lets one use for a
 *                   stage holding a convolution, or a layernorm's if more
 * A forward-only model (an evaluation) counts params, stash (a pipeline
 * gives such stages one slot), the activation channel and the workspace:
 * no gradients, optimizer state, buffers or gradient channel. */
#ifndef BG_COST_MODEL_H
#define BG_COST_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "model_spec.h"
#include "optimizer.h"
#include "profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sustained FLOP/s of one CPU core running brigade's CPU backend. Measured:
 * the origin CNN (1.82 MFLOP forward per sample, ~3x that per training
 * sample) trains at 14,975 samples/s on one core of the development
 * machine (OpenBLAS, batch 64, `brigade train examples/fashion_cnn.model
 * --data synthetic --steps 300`, 2026-12-03): 14,975 x 3 x 1.82e6 = 82
 * GFLOP/s; the ResNet example 2,249 x 3 x 13.1e6 = 88. (It was 50e9 when
 * the origin CNN trained at 9,000 samples/s, before the convolutions' GEMM
 * per kernel tap.) Convolutions of stride 1 over 8 or more channels run
 * faster than this (about 95 GFLOP/s), strided ones and the first layer's
 * over one channel slower (30 to 60), dense layers' products at about 120:
 * one rate for all is what the analytic model assumes; a profile measures
 * each. */
#define BG_COST_CPU_CORE_FLOPS 80e9
/* Fixed cost of one layer op on a CPU core: the executor's call and
 * bookkeeping, beyond the op's FLOPs and bytes. Measured on the
 * development machine (2026-12-04, `brigade train M --data synthetic
 * --batch 4 --steps 30 --record-steps 20`, median step): 20,000 tanh layers
 * over 4 values, 40,000 ops, 2.64 ms a step, 66 ns an op with its tanh;
 * 10,000 dense layers of 4 units, 30,000 ops, 3.84 ms, 128 ns an op with
 * its product. It was 2 us, which priced those steps at 84.8 and 60.3 ms
 * and, on a 600-layer model of 64 features, a step at 16 micro-batches at
 * 58 ms against 11.5 measured. */
#define BG_COST_CPU_OP_OVERHEAD_S 1e-7

/* Bandwidth of a CPU core over parameters and optimizer state, for the
 * optimizer update (memory-bound). Measured: Adam over the origin CNN's
 * 694k parameters takes about 0.2 ms (7 streams of 2.8 MB, mostly in cache:
 * ~100 GB/s); 50 GB/s leaves room for larger models that spill to DRAM. */
#define BG_COST_MEMORY_BYTES_PER_S 50e9

/* The rate a CPU core streams a layer's weights through a matrix product
 * over few samples. Measured: at micro-batches of 1 sample (brigade profile
 * examples/fashion_cnn.model --microbatches 64 --devices cpu:2 --split 4)
 * OpenBLAS took 0.24 ms for the 2.8 MB dense layer's forward and 0.21 ms
 * for its dX on one core of the development machine: 11 to 13 GB/s, where
 * 50 GFLOP/s would have taken 0.03 ms. */
#define BG_COST_CPU_WEIGHT_BYTES_PER_S 12e9

/* A device as the planner sees it. */
typedef struct bg_cost_device {
    char name[24];        /* "cpu:0", "cuda:1" */
    double flops_per_s;   /* sustained FLOP/s, > 0 */
    double op_overhead_s; /* added to every layer op */
    /* Added to every stage's update: the host's fixed work of a step on
     * the device beyond its ops (on a GPU, waiting for the loss and the
     * finite check, launching the update's kernels); 0 on a CPU core,
     * whose measured profiles hold it. */
    double update_overhead_s;
    size_t memory_bytes;       /* capacity for stages; 0: unlimited */
    double memory_bytes_per_s; /* the optimizer's streams; 0: BG_COST_MEMORY_BYTES_PER_S */
    double weight_bytes_per_s; /* R above: a product's weights; 0: no such bound */
    /* 1 where the device chooses its convolutions' algorithms, and so their
     * scratch, itself (a GPU: cuDNN's fastest, found by timing them there),
     * up to conv_workspace_bytes: a stage holding a convolution counts that
     * much workspace. 0: the model's own figure (bg_layer_workspace_bytes
     * on the CPU backend). */
    int own_conv_workspace;
    size_t conv_workspace_bytes;
    /* 1 where the slots of the channels into the device lie in its one
     * allocation, each rounded up like a buffer (a GPU's, from another GPU
     * or another virtual device of its own: counted in padding); 0 where
     * they are allocated apart. */
    int channels_in_arena;
    /* 1 where tanh, sigmoid, gelu, layernorm and dropout are bound by
     * memory (a GPU): each pass takes the time to stream its values (2 a
     * value forward, 3 for dX but 2 for dropout's, 2 for layernorm's dW) at
     * memory_bytes_per_s, and relu, the pools and the loss their FLOPs
     * (cost_model.c says why). 0: a CPU core's
     * measured time per value (cost_model.c). */
    int elementwise_memory_bound;
} bg_cost_device_t;

#define BG_COST_DEVICE_CPU_CORE_INIT                                                               \
    {                                                                                              \
        .name = "cpu", .flops_per_s = BG_COST_CPU_CORE_FLOPS,                                      \
        .op_overhead_s = BG_COST_CPU_OP_OVERHEAD_S, .memory_bytes = 0,                             \
        .memory_bytes_per_s = BG_COST_MEMORY_BYTES_PER_S,                                          \
        .weight_bytes_per_s = BG_COST_CPU_WEIGHT_BYTES_PER_S                                       \
    }

/* A link between two devices, one direction.
 *
 * Who moves the bytes: on GPUs a copy engine carries them over the link
 * while both devices compute (copy_bytes_per_s = 0: the link's bandwidth and
 * latency are the whole transfer). Between CPU devices the threads copy
 * them themselves, the sender into the channel's ring, the receiver out of
 * it (copy_bytes_per_s > 0: each end spends bytes / copy_bytes_per_s of its
 * own time, and only the latency, the hand-over from one thread to the
 * other, lies between). wake_s and handoff_s are what a hand-over between
 * host threads costs (bg_sim_costs_t); 0 where not measured. For the
 * planner's estimate a transfer is bytes / bytes_per_s + latency_s either
 * way. */
typedef struct bg_cost_link {
    double bytes_per_s; /* > 0 */
    double latency_s;
    double copy_bytes_per_s; /* > 0: the devices copy at each end (above) */
    double wake_s;           /* a thread waking another blocked on it */
    double handoff_s;        /* from that wake to the woken thread running */
} bg_cost_link_t;

/* Two CPU devices of one machine: a channel copies a tensor into a host ring
 * and out again (two memcpys) and wakes the receiver (a condition variable,
 * some microseconds). 10 GB/s per memcpy (5 GB/s end to end) is a
 * conservative assumption, not a measurement: a profile measures memcpy on
 * the machine (40 to 48 GB/s on a 4 MiB buffer on the development machine)
 * and then replaces it. */
#define BG_COST_LINK_HOST_INIT                                                                     \
    { .bytes_per_s = 5e9, .latency_s = 5e-6, .copy_bytes_per_s = 10e9, .wake_s = 0, .handoff_s = 0 }

typedef struct bg_cost_config {
    const bg_model_spec_t *spec; /* must outlive the model */
    int64_t batch;               /* B, samples per optimizer step */
    int microbatches;            /* M; a micro-batch holds ceil(B / M) samples */
    bg_optimizer_config_t optimizer;
    int recompute;      /* --recompute */
    int split_backward; /* the schedule splits B and W (zb-h1) */
    /* An evaluation's stages (bg_stage_config_t.forward_only): memory
     * without gradients, optimizer state, gradient buffers and channels;
     * recompute and split_backward are ignored. */
    int forward_only;
    bg_dtype_t dtype; /* element type of every tensor */
    /* Asked for conv2d workspace sizes; borrowed. NULL: a CPU backend of
     * `dtype`, made and freed inside bg_cost_model_create. */
    bg_backend_t *workspace_backend;
    /* Measured layer times (brigade profile) to use instead of FLOPs over
     * the device's speed; borrowed, may be NULL. Priced at this model's
     * micro-batch size between the sizes the profile timed
     * (bg_profile_layer_seconds). */
    const bg_profile_t *profile;
} bg_cost_config_t;

#define BG_COST_CONFIG_INIT                                                                        \
    {                                                                                              \
        .spec = NULL, .batch = 64, .microbatches = 1, .optimizer = BG_OPTIMIZER_CONFIG_INIT,       \
        .recompute = 0, .split_backward = 0, .forward_only = 0, .dtype = BG_F32,                   \
        .workspace_backend = NULL, .profile = NULL                                                 \
    }

typedef struct bg_cost_model bg_cost_model_t;

/* Tabulates per-layer costs so that every query below on a layer range takes
 * O(1) time. BG_ERR_INVALID for a missing spec, B < 1, M < 1 or M > B;
 * BG_ERR_NOMEM. *out is set only on success; free with bg_cost_model_destroy. */
bg_status_t bg_cost_model_create(const bg_cost_config_t *cfg, bg_cost_model_t **out);

/* NULL is a no-op. */
void bg_cost_model_destroy(bg_cost_model_t *model);

/* Tabulates the weight-streaming bound (w / R above) for the devices a
 * plan runs on, so that bg_cost_stage_time prices it in O(1) for them too;
 * for any other device it sums it layer by layer. Devices alike in F / R
 * share a table; at most BG_COST_WEIGHT_TABLES of them. BG_ERR_NOMEM. */
enum { BG_COST_WEIGHT_TABLES = 4 };
bg_status_t bg_cost_model_prepare(bg_cost_model_t *model, const bg_cost_device_t *devices,
                                  int count);

/* Whether layers [first, last) hold a conv2d, whose workspace a GPU
 * chooses (own_conv_workspace). O(1). */
int bg_cost_has_convolution(const bg_cost_model_t *model, int first, int last);

/* Layers in the model, and samples per micro-batch, ceil(B / M). */
int bg_cost_model_layers(const bg_cost_model_t *model);
int64_t bg_cost_model_microbatch(const bg_cost_model_t *model);
const bg_cost_config_t *bg_cost_model_config(const bg_cost_model_t *model);

/* The layer boundaries at which a stage may start or end, in order: 0,
 * each layer a stage may start at (none inside a residual block:
 * bg_model_spec_block_cut), and the layer count; *count of them. Without
 * residual blocks that is every boundary, 0 .. layers. */
const int *bg_cost_model_cuts(const bg_cost_model_t *model, int *count);

/* The index of layer boundary `layer` (0 .. layers) in that list, or -1
 * when no stage may start or end there. */
int bg_cost_model_cut_index(const bg_cost_model_t *model, int layer);

/* Seconds one micro-batch spends in layers [first, last) on `device`; an
 * evaluation's (bg_cost_config_t.forward_only) has the forward alone. A
 * stage whose ends cut a relu from the convolution or max-pool that would
 * do its pass pays that pass. Its compute never falls as `last` grows (a
 * relu's dX cut from its max-pool, priced from a profile, is capped at the
 * max-pool's profiled time for this), which the searches over a stage's
 * end rely on; as `first` falls it may, by at most
 * bg_cost_stage_start_excess, which the partition's search allows for. */
typedef struct bg_cost_time {
    double forward, backward; /* backward: B and W together */
    double weight;            /* the W part of backward (dW) */
    double recompute;         /* the extra forwards with recompute (two when the backward
                                 is split), else 0 */
    double update;            /* the optimizer step of the layers' parameters, and zeroing
                                 their gradients after it (per step) */
    double check;             /* the NaN/Inf check of their accumulated gradients, after the
                                 stage's last backward (per step) */
} bg_cost_time_t;

bg_cost_time_t bg_cost_stage_time(const bg_cost_model_t *model, const bg_cost_device_t *device,
                                  int first, int last);

/* One layer's figures as it runs in a stage of the whole model, beside its
 * neighbours (a relu's pass that the convolution before it or the max-pool
 * after it does costs nothing of its own, where bg_cost_stage_time of the
 * layer alone charges it): what `brigade profile` times of each layer. */
bg_cost_time_t bg_cost_layer_time(const bg_cost_model_t *model, const bg_cost_device_t *device,
                                  int layer);

/* What starting at layer `first` adds to a stage's compute (forward,
 * backward and recompute) on `device`, beyond what the same layers cost
 * within a stage that starts earlier: the own forward pass of a relu cut
 * from the convolution before it, and its recomputes (0 on a device whose
 * elementwise layers are memory-bound, as the pass is priced). A stage
 * that starts earlier computes at least a later one's compute less this,
 * which the partition's search stops by. */
double bg_cost_stage_start_excess(const bg_cost_model_t *model, const bg_cost_device_t *device,
                                  int first);

/* Bytes of one micro-batch's activation at boundary `layer`: the input of
 * that layer (0 <= layer < layers), or the model's output (layer == layers).
 * The same bytes flow back as the gradient. */
size_t bg_cost_boundary_bytes(const bg_cost_model_t *model, int layer);

/* Seconds `link` takes to carry `bytes`. */
double bg_cost_transfer_seconds(const bg_cost_link_t *link, size_t bytes);

/* The planner's estimate of a send of boundary `layer`'s activation (or
 * gradient) over `link`: a mean micro-batch's bytes, as times go by (until
 * 2026-12-06 the largest's, which where M does not divide B put a send at
 * up to twice the mean's: a review). */
double bg_cost_boundary_send_seconds(const bg_cost_model_t *model, const bg_cost_link_t *link,
                                     int layer);

/* The parts of one crossing of boundary `layer` (as bytes of
 * bg_cost_boundary_bytes) over `link`: the sending device's own copy, the
 * link's part, the receiving device's own copy. With copy_bytes_per_s > 0
 * the copies come from the profile's measured send_s and recv_s of that
 * boundary when it has them (version 2, scaled to the micro-batch), else
 * from copy_bytes_per_s, and the link's part is its latency; otherwise the
 * copies are 0 and the link's part is bg_cost_transfer_seconds. */
typedef struct bg_cost_crossing {
    double send_s, link_s, recv_s;
} bg_cost_crossing_t;

bg_cost_crossing_t bg_cost_boundary_crossing(const bg_cost_model_t *model,
                                             const bg_cost_link_t *link, int layer);

/* A layer range as the profile timed it as a stage of its own (version 2
 * profiles): its times (per micro-batch, scaled to this model's; the update
 * per step; weight from the layers' dW; recompute the forward again with
 * --recompute) and the channel copies it made around its ops, the
 * activation in and out, the gradient in and out. */
typedef struct bg_cost_measured_stage {
    bg_cost_time_t time;
    double recv_s, send_s, grad_recv_s, grad_send_s;
    double check_s, grad_check_s; /* the NaN/Inf checks before its sends */
    /* Its forward plus backward under load over the same alone (profiled
     * beside a co-runner on another core); 0 when not measured. */
    double contention;
    bg_stage_after_wait_t after_wait; /* its ops after a wait (as profiled); 0 when not */
} bg_cost_measured_stage_t;

/* Fills *out for layers [first, last) with `slots` micro-batches in flight
 * (the entry with the nearest slot count; the update and the gradients'
 * check, once a step, typical over the range's entries) and returns 1, or
 * returns 0 when the profile has no such range (or there is no profile). */
int bg_cost_measured_stage(const bg_cost_model_t *model, int first, int last, int slots,
                           bg_cost_measured_stage_t *out);

/* A stage to price: layers [first, last) with its schedule's stash slots. */
typedef struct bg_cost_stage {
    int first_layer, last_layer;
    int stash_slots;         /* bg_schedule_stash_slots, at least 1 */
    int input_channel_slots; /* ring slots from the previous stage; unused at layer 0 */
    int grad_channel_slots;  /* ring slots from the next stage; unused on the last */
    /* Where it runs, for its convolutions' workspace (own_conv_workspace);
     * NULL: the model's own figure. */
    const bg_cost_device_t *device;
} bg_cost_stage_t;

/* Predicted bytes by category; the peak is their sum. `padding` is what the
 * stage's arena adds to the others by starting each buffer on a
 * BG_ARENA_ALIGNMENT boundary (up to 255 bytes a buffer: a parameter
 * tensor, a layer's output in each stash slot, a gradient buffer, a
 * channel's slot on a device with channels_in_arena; much of a stack of
 * tiny layers). */
typedef struct bg_cost_memory {
    size_t params, grads, optimizer, stash, buffers, channels, workspace, padding;
    size_t stash_slot; /* one micro-batch's stash */
} bg_cost_memory_t;

bg_cost_memory_t bg_cost_stage_memory(const bg_cost_model_t *model, const bg_cost_stage_t *stage);

/* What every stage holding layers first..last-1 holds on `device` (NULL:
 * the model's own workspace figure), whatever else it holds and wherever
 * it is cut: their parameters, gradients and optimizer state, one
 * micro-batch's stash of their own outputs, gradient buffers as wide as
 * the widest activation they touch, and their workspace, each with its
 * padding. A bound from below on bg_cost_stage_memory of any stage that
 * contains them, category by category but for the padding (a wider buffer
 * may have less), and as a peak: what a stage's ends add (its input, the
 * channels, an in-place first layer's output, the labels) is left out,
 * since another cut may avoid it. */
bg_cost_memory_t bg_cost_range_floor(const bg_cost_model_t *model, int first, int last,
                                     const bg_cost_device_t *device);

/* The part of bg_cost_stage_memory's peak that scales with the stage's
 * input activation: the input kept in each stash slot, the ring of the
 * channel into the stage, and (a stage that trains) its input gradient,
 * each with its padding. The rest only grows as the stage takes more
 * layers before its last (the padding of a layer's own buffers is added,
 * never taken back). */
size_t bg_cost_stage_input_bytes(const bg_cost_model_t *model, const bg_cost_stage_t *stage);

static inline size_t bg_cost_memory_peak(const bg_cost_memory_t *m) {
    return m->params + m->grads + m->optimizer + m->stash + m->buffers + m->channels +
           m->workspace + m->padding;
}

#ifdef __cplusplus
}
#endif

#endif /* BG_COST_MODEL_H */
