/* Pipeline schedules as data: for each device, the ordered list of ops it
 * runs in one training step (one mini-batch of M micro-batches).
 *
 * Stages and devices. A schedule has K devices and V chunks per device, so
 * S = K * V pipeline stages. Stage s runs on device s % K, as chunk s / K
 * (Megatron's interleaving: device d holds stages d, d + K, d + 2K, ...).
 * With V = 1, stage s is device s.
 *
 * Ops. F(s, mb) forward; B(s, mb) backward; W(s, mb) the weight-gradient half
 * of the backward when the schedule splits it (zb-h1); STEP the optimizer
 * step, the last op of every device. Without the split, B computes both dX
 * and dW. Data flow: F(s, mb) needs F(s-1, mb)'s activation (s > 0); B(s, mb)
 * needs F(s, mb) on the same stage and B(s+1, mb)'s gradient (s < S-1); W(s,
 * mb) needs B(s, mb).
 *
 * Generators:
 *   gpipe        fill-drain: every stage runs F(0..M-1), then B(0..M-1)
 *   1f1b         PipeDream-Flush: stage s runs min(S-1-s, M) warm-up
 *                forwards, then alternates F and B, then drains the B's
 *   interleaved  Megatron's interleaved 1F1B with V chunks; M must be a
 *                multiple of K
 *   zb-h1        the Zero Bubble paper's ZB-H1: 1F1B's F/B order with the
 *                backward split into B and W; stage s runs W(i - s) after
 *                its i-th B, so later stages put off their W's and pass
 *                gradients back sooner, and the W's fill the drain. With
 *                F = B = W the bubble is (K-1)/(3M+K-1) (with M < K,
 *                (2K-M-1)/(2M+2K-1): too few W's); every stage holds
 *                up to min(K, M) micro-batches
 * Forward-only schedules (evaluation) have F ops and no B/W/STEP.
 *
 * Interleaved order (per device d, k = 0 .. M*V-1): the k-th forward is
 * micro-batch (k / (K*V)) * K + k % K of chunk (k / K) % V; the k-th
 * backward is the same micro-batch of chunk V-1 - (k / K) % V. Warm-up:
 * all M*V forwards when M = K, else min(2 (K-d-1) + (V-1) K, M*V); then
 * F(warm-up + i), B(i) pairs; then the remaining backwards. 1f1b is this
 * shape with V = 1 and min(S-1-s, M) warm-up forwards; zb-h1 adds W(i - s)
 * after the i-th B of stage s and the last s W's at the end. */
#ifndef BG_SCHEDULE_H
#define BG_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bg_schedule_kind {
    BG_SCHEDULE_GPIPE,
    BG_SCHEDULE_1F1B,
    BG_SCHEDULE_INTERLEAVED,
    BG_SCHEDULE_ZB_H1,
} bg_schedule_kind_t;

typedef enum bg_op_kind {
    BG_OP_FORWARD,  /* F */
    BG_OP_BACKWARD, /* B: dX, and dW too unless the schedule splits it */
    BG_OP_WEIGHT,   /* W: dW only */
    BG_OP_STEP,     /* optimizer step (microbatch and stage are -1) */
} bg_op_kind_t;

typedef struct bg_op {
    bg_op_kind_t kind;
    int stage;      /* pipeline stage 0..S-1 */
    int microbatch; /* 0..M-1 */
} bg_op_t;

typedef struct bg_schedule_config {
    bg_schedule_kind_t kind;
    int devices;      /* K >= 1 */
    int chunks;       /* V >= 1; only interleaved accepts V > 1 */
    int microbatches; /* M >= 1 */
    int forward_only; /* 1: F ops only (evaluation) */
} bg_schedule_config_t;

/* Limits on a request: K, V, M each, and K*V*M (the stage micro-batches,
 * which bound the op count and the validator's memory). */
#define BG_SCHEDULE_MAX_DEVICES      1024
#define BG_SCHEDULE_MAX_CHUNKS       64
#define BG_SCHEDULE_MAX_MICROBATCHES 65536
#define BG_SCHEDULE_MAX_CELLS        (1 << 22)

#define BG_SCHEDULE_CONFIG_INIT                                                                    \
    { .kind = BG_SCHEDULE_1F1B, .devices = 1, .chunks = 1, .microbatches = 1, .forward_only = 0 }

typedef struct bg_schedule {
    bg_schedule_kind_t kind;
    int devices, chunks, stages, microbatches;
    int split_backward; /* 1 when W ops exist (zb-h1) */
    int forward_only;
    int *op_counts; /* per device */
    bg_op_t **ops;  /* per device, op_counts[d] ops in execution order */
} bg_schedule_t;

/* Parses "gpipe", "1f1b", "interleaved", "zb-h1"; BG_ERR_INVALID otherwise
 * (the message lists the valid names). */
bg_status_t bg_schedule_kind_parse(const char *text, bg_schedule_kind_t *out);
const char *bg_schedule_kind_name(bg_schedule_kind_t kind);

/* An op's letter as schedules print it: "F", "B", "W" or "STEP". */
const char *bg_op_letter(bg_op_kind_t kind);

/* Whether a schedule of `kind` runs the backward as two ops, dX then W
 * (zb-h1 does, unless it runs forwards only): its split_backward. */
int bg_schedule_splits_backward(bg_schedule_kind_t kind, int forward_only);

/* Generates a schedule. Invalid requests are BG_ERR_INVALID with a message
 * that says why: K, V or M < 1 or over the limits above; V > 1 for a
 * schedule other than interleaved; interleaved with M not a multiple of K.
 * The result is validated (bg_schedule_validate) before it is returned; a
 * generated schedule that fails is BG_ERR_INTERNAL (a bug). BG_ERR_NOMEM if
 * an allocation fails. *out is set only on success; the caller owns it and
 * frees it with bg_schedule_destroy. split_backward is 1 for zb-h1 unless
 * forward_only. */
bg_status_t bg_schedule_create(const bg_schedule_config_t *cfg, bg_schedule_t **out);

/* NULL and half-built schedules are fine. */
void bg_schedule_destroy(bg_schedule_t *schedule);

/* Proves a schedule complete and deadlock-free by a dry run in which every
 * device executes its list in order and every transfer between stages on
 * different devices goes through a channel that holds one message (below;
 * transfers between stages on the same device are local). Checks: each
 * (F, stage, mb) exactly once, each B exactly once unless forward_only, W
 * exactly once iff split_backward, each op on the device that owns its
 * stage, data dependencies respected, exactly one STEP, last, on each
 * device (none when forward_only), and no deadlock. BG_ERR_INVALID names
 * the first offending op ("device 1, op 7 (B3 of stage 1): duplicate
 * (first at op 5)") or what each blocked device waits for ("deadlock:
 * device 0 waits at op 1 (F1 of stage 0): send to device 1, but the
 * channel still holds the message for F0 of stage 1 (device 1's op 1);
 * device 1 waits at op 0 (F1 of stage 1): receive from device 0, but the
 * channel holds the message for F0 of stage 1 (device 1's op 1)").
 *
 * The dry run, precisely. Each pair of adjacent stages on different devices
 * (all pairs when K > 1, none when K = 1) has two channels: activations
 * F(s) -> F(s+1) and gradients B(s+1) -> B(s). A channel holds one message
 * and delivers in order. A device runs its list in order; op i runs once
 * op i-1 has run, op i-1's send (if any) has completed, and, if op i takes
 * an input from another device, the channel it reads holds op i's message
 * (taking it empties the channel). A send completes when its channel is
 * empty, i.e. the previous message on it has been taken; until then the
 * device waits. Inputs from the same device (B needs F of its stage, W its
 * B; with K = 1 also the neighbouring stages) must come earlier in the
 * list. A schedule that completes here completes on any executor whose
 * channels hold at least one message. (A pure rendezvous, where a send
 * waits until the receiver reaches the consuming op, deadlocks every 1F1B
 * schedule: device 0 sends F1 while device 1 sends B0. Posting the next
 * receive together with each send, as MPI Issend + Irecv, passes 1f1b and
 * zb-h1 but not Megatron's interleaved order, which batches the sends of
 * an F/B pair with the receives of the next pair.)
 * Structure is checked first, in device then op order, then local order,
 * then the dry run. Costs O(ops + K*V*M) time and memory. NULL or
 * malformed schedules are BG_ERR_INVALID; BG_ERR_NOMEM if an allocation
 * fails. Thread-safe for concurrent calls on the same schedule. */
bg_status_t bg_schedule_validate(const bg_schedule_t *schedule);

/* Most micro-batches stage `stage` holds at once: the widest window of
 * micro-batches from the oldest one whose last backward op (B, or W when
 * split) has not run to the newest one whose F has run, measured after each
 * F of the stage. (A stage runs on one device, so the window depends only on
 * that device's order, not on how the dry run interleaves devices.) The
 * executor stashes activations in that many slots, indexed mb % size. 0 for
 * forward-only schedules (nothing is kept for a backward). The schedule
 * must be valid (bg_schedule_create's are; validate hand-built ones first):
 * this reads one device's list, O(its ops + M), without validating it.
 * -1 for a NULL schedule, a stage out of range, or no memory for the
 * window's flags (message set). */
int bg_schedule_stash_slots(const bg_schedule_t *schedule, int stage);

/* Ring slots of the channel between adjacent stages `from` and `to` with K
 * devices, stage s on device s % K: 2 between devices (double buffering),
 * 1 where both stages share a device (K = 1). The thread hands over to
 * itself there and must never wait on itself, which one slot ensures: the
 * dry run of bg_schedule_validate runs every schedule with channels of one
 * message and refuses one that would send into a full one. (Until
 * 2026-12-06 such a ring had M slots, a mini-batch's activations per
 * boundary, of which the schedules never fill more than one.) The executor
 * sizes its channels by this, and the cost model and the simulator count
 * their bytes and slots by it. */
int bg_schedule_ring_slots(int devices, int from, int to);

/* The kind of op that adds to the weight gradients: W when the schedule
 * splits the backward (zb-h1), else B. */
bg_op_kind_t bg_schedule_gradient_kind(const bg_schedule_t *schedule);

/* The micro-batch whose weight-gradient op (B, or W when split) stage
 * `stage` runs last in a step, in its device's order: the op that
 * completes the step's accumulated weight gradients. -1 for forward-only
 * schedules, a NULL schedule or a stage out of range (message set for the
 * last two). The schedule must be valid, as for bg_schedule_stash_slots. */
int bg_schedule_last_gradient_microbatch(const bg_schedule_t *schedule, int stage);

/* Writes a short text form of a device's ops ("F0 F1 B0 F2 B1 ... STEP")
 * into buf (for messages and tests); returns buf. An op is its letter and
 * micro-batch, followed by "@stage" when V > 1 (or the stage is not the
 * device's): interleaved K=2 device 0 reads "F0@0 F1@0 F0@2 F1@2 ...".
 * Truncated to size - 1 characters; "" for a device out of range. */
const char *bg_schedule_format_device(const bg_schedule_t *schedule, int device, char *buf,
                                      size_t size);

#ifdef __cplusplus
}
#endif

#endif /* BG_SCHEDULE_H */
