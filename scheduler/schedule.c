/* Schedule generators, the validator's dry run and the stash measure.
 *
 * Every generator is one shape: a device has an order of forwards and an
 * order of backwards (forward_op/backward_op: the k-th of each), and runs
 * `warmup` forwards, then pairs F(warmup + i), B(i), then the remaining
 * backwards. The kinds differ only in the warm-up (gpipe's fill-drain puts
 * every forward in it), in the chunks (interleaved) and in zb-h1's W's. */
#include "alloc.h"
#include "schedule.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OP_KINDS_WITH_CELL = 3, /* F, B, W: the ops that carry a stage and micro-batch */
    DEADLOCK_LISTED = 5,    /* blocked devices a deadlock message names */
};

static const char *const kind_names[] = {
    [BG_SCHEDULE_GPIPE] = "gpipe",
    [BG_SCHEDULE_1F1B] = "1f1b",
    [BG_SCHEDULE_INTERLEAVED] = "interleaved",
    [BG_SCHEDULE_ZB_H1] = "zb-h1",
};
enum { KIND_COUNT = sizeof kind_names / sizeof kind_names[0] };

bg_status_t bg_schedule_kind_parse(const char *text, bg_schedule_kind_t *out) {
    if (text == NULL || out == NULL) return bg_error_set(BG_ERR_INVALID, "no schedule name given");
    for (int k = 0; k < KIND_COUNT; k++) {
        if (strcmp(text, kind_names[k]) == 0) {
            *out = (bg_schedule_kind_t)k;
            return BG_OK;
        }
    }
    return bg_error_set(BG_ERR_INVALID,
                        "unknown schedule '%s' (expected gpipe, 1f1b, interleaved or zb-h1)", text);
}

const char *bg_schedule_kind_name(bg_schedule_kind_t kind) {
    if ((int)kind < 0 || (int)kind >= KIND_COUNT) return "unknown";
    return kind_names[kind];
}

/* ---- op helpers ---------------------------------------------------------- */

const char *bg_op_letter(bg_op_kind_t kind) {
    switch (kind) {
    case BG_OP_FORWARD: return "F";
    case BG_OP_BACKWARD: return "B";
    case BG_OP_WEIGHT: return "W";
    case BG_OP_STEP: return "STEP";
    }
    return "?";
}

static int op_has_cell(const bg_op_t *op) {
    return op->kind == BG_OP_FORWARD || op->kind == BG_OP_BACKWARD || op->kind == BG_OP_WEIGHT;
}

/* "F3 of stage 1", "STEP": the form messages use. */
static const char *op_describe(const bg_op_t *op, char *buf, size_t size) {
    if (op->kind == BG_OP_STEP)
        snprintf(buf, size, "STEP");
    else if (op_has_cell(op))
        snprintf(buf, size, "%s%d of stage %d", bg_op_letter(op->kind), op->microbatch, op->stage);
    else
        snprintf(buf, size, "op of unknown kind %d", (int)op->kind);
    return buf;
}

/* Index of (kind, stage, mb) in per-cell arrays of OP_KINDS_WITH_CELL * S * M
 * entries; the limits keep it well inside an int. */
static int cell_index(const bg_schedule_t *s, bg_op_kind_t kind, int stage, int mb) {
    return ((int)kind * s->stages + stage) * s->microbatches + mb;
}

/* Channels: one per direction between adjacent stages, on one device too
 * (K = 1, interleaved), whose thread hands its messages to itself through
 * them: the executor gives that channel one slot and so must never send
 * into it while it holds one. Channel c < S-1 carries F(c)'s activation to
 * F(c+1); channel S-1 + c carries B(c+1)'s gradient to B(c). A channel
 * holds one message: a send completes once the previous message on it has
 * been taken, and the receiver takes messages in the order they were sent. */
static int channel_count(const bg_schedule_t *s) { return 2 * (s->stages - 1); }

/* The channel `op` takes its input from, or -1. */
static int input_channel(const bg_schedule_t *s, const bg_op_t *op) {
    if (op->kind == BG_OP_FORWARD && op->stage > 0) return op->stage - 1;
    if (op->kind == BG_OP_BACKWARD && op->stage < s->stages - 1) return s->stages - 1 + op->stage;
    return -1;
}

/* The channel `op` sends its output on, or -1. */
static int output_channel(const bg_schedule_t *s, const bg_op_t *op) {
    if (op->kind == BG_OP_FORWARD && op->stage < s->stages - 1) return op->stage;
    if (op->kind == BG_OP_BACKWARD && op->stage > 0) return s->stages - 1 + op->stage - 1;
    return -1;
}

/* The ops that send and take micro-batch mb's message on channel c. */
static bg_op_t channel_producer(const bg_schedule_t *s, int c, int mb) {
    if (c < s->stages - 1) return (bg_op_t){BG_OP_FORWARD, c, mb};
    return (bg_op_t){BG_OP_BACKWARD, c - (s->stages - 1) + 1, mb};
}

static bg_op_t channel_consumer(const bg_schedule_t *s, int c, int mb) {
    if (c < s->stages - 1) return (bg_op_t){BG_OP_FORWARD, c + 1, mb};
    return (bg_op_t){BG_OP_BACKWARD, c - (s->stages - 1), mb};
}

/* ---- generators ---------------------------------------------------------- */

/* The k-th forward of `device` (k = 0 .. M*V - 1): chunks in groups of K
 * micro-batches, chunk 0's group first (Megatron's interleaved order; with
 * V = 1 it is simply micro-batch k). */
static bg_op_t forward_op(const bg_schedule_t *s, int device, int k) {
    const int K = s->devices, V = s->chunks;
    const int chunk = (k / K) % V;
    return (bg_op_t){BG_OP_FORWARD, chunk * K + device, (k / (K * V)) * K + k % K};
}

/* The k-th backward (or W) of `device`: the same groups, last chunk first. */
static bg_op_t backward_op(const bg_schedule_t *s, int device, int k, bg_op_kind_t kind) {
    const int K = s->devices, V = s->chunks;
    const int chunk = V - 1 - (k / K) % V;
    return (bg_op_t){kind, chunk * K + device, (k / (K * V)) * K + k % K};
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* Forwards before the first backward on `device`. */
static int warmup_forwards(const bg_schedule_t *s, int device) {
    const int K = s->devices, V = s->chunks, M = s->microbatches;
    const int total = M * V;
    switch (s->kind) {
    case BG_SCHEDULE_GPIPE: return total;
    case BG_SCHEDULE_1F1B:
    case BG_SCHEDULE_ZB_H1: return min_int(s->stages - 1 - device, M);
    case BG_SCHEDULE_INTERLEAVED:
        /* Megatron: with M = K every forward goes first. */
        if (M == K) return total;
        return min_int((K - device - 1) * 2 + (V - 1) * K, total);
    }
    return total;
}

/* Fills device `device`'s list; the list was sized by ops_per_device. */
static void generate_device(bg_schedule_t *s, int device) {
    bg_op_t *out = s->ops[device];
    int n = 0;
    const int total = s->microbatches * s->chunks;
    if (s->forward_only) {
        for (int k = 0; k < total; k++) out[n++] = forward_op(s, device, k);
        s->op_counts[device] = n;
        return;
    }
    const int warmup = warmup_forwards(s, device);
    /* zb-h1 runs W(k - lag) after the k-th B, lag = the device's distance
     * from the first stage: later stages put off their W's so that their
     * next F and B, and with them the gradients flowing back, come sooner;
     * the W's fill the drain. With F = B = W this removes two thirds of
     * 1F1B's bubble, at the cost of holding up to K micro-batches on every
     * stage (1F1B's peak on the first one). */
    const int lag = min_int(device, total);
    int weights = 0;
    for (int k = 0; k < warmup; k++) out[n++] = forward_op(s, device, k);
    for (int k = 0; k < total; k++) {
        if (warmup + k < total) out[n++] = forward_op(s, device, warmup + k);
        out[n++] = backward_op(s, device, k, BG_OP_BACKWARD);
        if (s->split_backward && k - lag >= 0)
            out[n++] = backward_op(s, device, weights++, BG_OP_WEIGHT);
    }
    while (s->split_backward && weights < total)
        out[n++] = backward_op(s, device, weights++, BG_OP_WEIGHT);
    out[n++] = (bg_op_t){BG_OP_STEP, -1, -1};
    s->op_counts[device] = n;
}

static int ops_per_device(const bg_schedule_t *s) {
    const int cells = s->chunks * s->microbatches;
    if (s->forward_only) return cells;
    return cells * (s->split_backward ? 3 : 2) + 1;
}

static bg_status_t check_config(const bg_schedule_config_t *cfg) {
    const int K = cfg->devices, V = cfg->chunks, M = cfg->microbatches;
    if ((int)cfg->kind < 0 || (int)cfg->kind >= KIND_COUNT)
        return bg_error_set(BG_ERR_INVALID, "unknown schedule kind %d", (int)cfg->kind);
    if (K < 1) return bg_error_set(BG_ERR_INVALID, "a schedule needs at least 1 device (K=%d)", K);
    if (V < 1)
        return bg_error_set(BG_ERR_INVALID, "a schedule needs at least 1 chunk per device (V=%d)",
                            V);
    if (M < 1)
        return bg_error_set(BG_ERR_INVALID, "a schedule needs at least 1 micro-batch (M=%d)", M);
    if (K > BG_SCHEDULE_MAX_DEVICES)
        return bg_error_set(BG_ERR_INVALID, "too many devices (K=%d, at most %d)", K,
                            BG_SCHEDULE_MAX_DEVICES);
    if (V > BG_SCHEDULE_MAX_CHUNKS)
        return bg_error_set(BG_ERR_INVALID, "too many chunks per device (V=%d, at most %d)", V,
                            BG_SCHEDULE_MAX_CHUNKS);
    if (M > BG_SCHEDULE_MAX_MICROBATCHES)
        return bg_error_set(BG_ERR_INVALID, "too many micro-batches (M=%d, at most %d)", M,
                            BG_SCHEDULE_MAX_MICROBATCHES);
    if ((long long)K * V * M > BG_SCHEDULE_MAX_CELLS)
        return bg_error_set(BG_ERR_INVALID,
                            "schedule too large: K*V*M = %lld stage micro-batches (at most %d)",
                            (long long)K * V * M, BG_SCHEDULE_MAX_CELLS);
    if (V > 1 && cfg->kind != BG_SCHEDULE_INTERLEAVED)
        return bg_error_set(BG_ERR_INVALID,
                            "--chunks applies only to the interleaved schedule (V=%d with %s): "
                            "add --schedule interleaved, or leave --chunks out",
                            V, bg_schedule_kind_name(cfg->kind));
    if (cfg->kind == BG_SCHEDULE_INTERLEAVED && M % K != 0)
        return bg_error_set(BG_ERR_INVALID,
                            "interleaved needs the micro-batch count (M=%d) to be a multiple of "
                            "the device count (K=%d): --microbatches %d, %d, %d and so on, up to "
                            "the batch",
                            M, K, K, 2 * K, 3 * K);
    return BG_OK;
}

int bg_schedule_splits_backward(bg_schedule_kind_t kind, int forward_only) {
    return kind == BG_SCHEDULE_ZB_H1 && !forward_only;
}

bg_status_t bg_schedule_create(const bg_schedule_config_t *cfg, bg_schedule_t **out) {
    if (cfg == NULL || out == NULL)
        return bg_error_set(BG_ERR_INVALID, "bg_schedule_create: NULL argument");
    BG_CHECK(check_config(cfg));
    bg_status_t st = BG_OK;
    bg_schedule_t *s = bg_calloc(1, sizeof *s);
    BG_ALLOC_CHECK_GOTO(s, st, fail);
    s->kind = cfg->kind;
    s->devices = cfg->devices;
    s->chunks = cfg->chunks;
    s->stages = cfg->devices * cfg->chunks;
    s->microbatches = cfg->microbatches;
    s->forward_only = cfg->forward_only ? 1 : 0;
    s->split_backward = bg_schedule_splits_backward(cfg->kind, s->forward_only);
    s->op_counts = bg_calloc((size_t)s->devices, sizeof *s->op_counts);
    BG_ALLOC_CHECK_GOTO(s->op_counts, st, fail);
    s->ops = bg_calloc((size_t)s->devices, sizeof *s->ops);
    BG_ALLOC_CHECK_GOTO(s->ops, st, fail);
    const size_t capacity = (size_t)ops_per_device(s);
    for (int d = 0; d < s->devices; d++) {
        s->ops[d] = bg_malloc(capacity * sizeof *s->ops[d]);
        BG_ALLOC_CHECK_GOTO(s->ops[d], st, fail);
        generate_device(s, d);
    }
    st = bg_schedule_validate(s);
    if (st == BG_ERR_INVALID) {
        /* A generated schedule that does not validate is a bug here. */
        st = bg_error_prefix(BG_ERR_INTERNAL, "generated %s schedule (K=%d, V=%d, M=%d%s): ",
                             bg_schedule_kind_name(s->kind), s->devices, s->chunks, s->microbatches,
                             s->forward_only ? ", forward-only" : "");
        goto fail;
    }
    if (st != BG_OK) goto fail;
    *out = s;
    return BG_OK;
fail:
    bg_schedule_destroy(s);
    return st;
}

void bg_schedule_destroy(bg_schedule_t *schedule) {
    if (schedule == NULL) return;
    if (schedule->ops != NULL)
        for (int d = 0; d < schedule->devices; d++) free(schedule->ops[d]);
    free(schedule->ops);
    free(schedule->op_counts);
    free(schedule);
}

/* ---- validation: structure ----------------------------------------------- */

static bg_status_t op_error(const bg_schedule_t *s, int device, int index, const char *what) {
    char name[64];
    return bg_error_set(BG_ERR_INVALID, "device %d, op %d (%s): %s", device, index,
                        op_describe(&s->ops[device][index], name, sizeof name), what);
}

static bg_status_t check_shape(const bg_schedule_t *s) {
    if (s == NULL) return bg_error_set(BG_ERR_INVALID, "no schedule");
    if (s->devices < 1 || s->devices > BG_SCHEDULE_MAX_DEVICES || s->chunks < 1 ||
        s->chunks > BG_SCHEDULE_MAX_CHUNKS || s->microbatches < 1 ||
        s->microbatches > BG_SCHEDULE_MAX_MICROBATCHES)
        return bg_error_set(BG_ERR_INVALID, "schedule shape out of range (K=%d, V=%d, M=%d)",
                            s->devices, s->chunks, s->microbatches);
    if (s->stages != s->devices * s->chunks)
        return bg_error_set(BG_ERR_INVALID, "schedule has %d stages, not K*V = %d", s->stages,
                            s->devices * s->chunks);
    if ((long long)s->stages * s->microbatches > BG_SCHEDULE_MAX_CELLS)
        return bg_error_set(BG_ERR_INVALID, "schedule too large (S=%d, M=%d)", s->stages,
                            s->microbatches);
    if (s->forward_only && s->split_backward)
        return bg_error_set(BG_ERR_INVALID, "a forward-only schedule cannot split the backward");
    if (s->op_counts == NULL || s->ops == NULL)
        return bg_error_set(BG_ERR_INVALID, "schedule has no op lists");
    for (int d = 0; d < s->devices; d++)
        if (s->op_counts[d] < 0 || (s->op_counts[d] > 0 && s->ops[d] == NULL))
            return bg_error_set(BG_ERR_INVALID, "device %d: bad op list (%d ops)", d,
                                s->op_counts[d]);
    return BG_OK;
}

/* Per-op checks in device, then list order; fills position[] (index of each
 * op in its device's list). */
static bg_status_t check_ops(const bg_schedule_t *s, int *position) {
    char text[160];
    for (int d = 0; d < s->devices; d++) {
        for (int i = 0; i < s->op_counts[d]; i++) {
            const bg_op_t *op = &s->ops[d][i];
            if (op->kind == BG_OP_STEP) {
                if (s->forward_only) return op_error(s, d, i, "STEP in a forward-only schedule");
                if (i != s->op_counts[d] - 1) return op_error(s, d, i, "STEP is not the last op");
                if (op->stage != -1 || op->microbatch != -1)
                    return op_error(s, d, i, "STEP must have stage and micro-batch -1");
                continue;
            }
            if (!op_has_cell(op)) return op_error(s, d, i, "unknown op kind");
            if (op->stage < 0 || op->stage >= s->stages) {
                snprintf(text, sizeof text, "stage out of range (%d stages)", s->stages);
                return op_error(s, d, i, text);
            }
            if (op->microbatch < 0 || op->microbatch >= s->microbatches) {
                snprintf(text, sizeof text, "micro-batch out of range (%d micro-batches)",
                         s->microbatches);
                return op_error(s, d, i, text);
            }
            if (op->kind != BG_OP_FORWARD && s->forward_only)
                return op_error(s, d, i, "backward op in a forward-only schedule");
            if (op->kind == BG_OP_WEIGHT && !s->split_backward)
                return op_error(s, d, i, "W op in a schedule that does not split the backward");
            if (op->stage % s->devices != d) {
                snprintf(text, sizeof text, "stage %d belongs to device %d", op->stage,
                         op->stage % s->devices);
                return op_error(s, d, i, text);
            }
            const int cell = cell_index(s, op->kind, op->stage, op->microbatch);
            if (position[cell] >= 0) {
                snprintf(text, sizeof text, "duplicate (first at op %d)", position[cell]);
                return op_error(s, d, i, text);
            }
            position[cell] = i;
        }
        if (!s->forward_only &&
            (s->op_counts[d] == 0 || s->ops[d][s->op_counts[d] - 1].kind != BG_OP_STEP))
            return bg_error_set(BG_ERR_INVALID, "device %d: no STEP at the end", d);
    }
    return BG_OK;
}

static bg_status_t check_coverage(const bg_schedule_t *s, const int *position) {
    const bg_op_kind_t kinds[] = {BG_OP_FORWARD, BG_OP_BACKWARD, BG_OP_WEIGHT};
    const int required = s->forward_only ? 1 : s->split_backward ? 3 : 2;
    char name[64];
    for (int k = 0; k < required; k++)
        for (int stage = 0; stage < s->stages; stage++)
            for (int mb = 0; mb < s->microbatches; mb++) {
                if (position[cell_index(s, kinds[k], stage, mb)] >= 0) continue;
                const bg_op_t op = {kinds[k], stage, mb};
                return bg_error_set(BG_ERR_INVALID, "missing %s (device %d never runs it)",
                                    op_describe(&op, name, sizeof name), stage % s->devices);
            }
    return BG_OK;
}

/* Dependencies on ops of the same device must come earlier in its list: a
 * device runs its list in order, so a later producer would never run. */
static bg_status_t check_local_order(const bg_schedule_t *s, const int *position) {
    char text[160], name[64];
    for (int d = 0; d < s->devices; d++) {
        for (int i = 0; i < s->op_counts[d]; i++) {
            const bg_op_t *op = &s->ops[d][i];
            bg_op_t needs[2];
            int count = 0;
            if (op->kind == BG_OP_FORWARD && op->stage > 0 && s->devices == 1)
                needs[count++] = (bg_op_t){BG_OP_FORWARD, op->stage - 1, op->microbatch};
            if (op->kind == BG_OP_BACKWARD) {
                needs[count++] = (bg_op_t){BG_OP_FORWARD, op->stage, op->microbatch};
                if (op->stage < s->stages - 1 && s->devices == 1)
                    needs[count++] = (bg_op_t){BG_OP_BACKWARD, op->stage + 1, op->microbatch};
            }
            if (op->kind == BG_OP_WEIGHT)
                needs[count++] = (bg_op_t){BG_OP_BACKWARD, op->stage, op->microbatch};
            for (int n = 0; n < count; n++) {
                const int at =
                    position[cell_index(s, needs[n].kind, needs[n].stage, needs[n].microbatch)];
                if (at < i) continue;
                snprintf(text, sizeof text, "needs %s, which this device runs later (op %d)",
                         op_describe(&needs[n], name, sizeof name), at);
                return op_error(s, d, i, text);
            }
        }
    }
    return BG_OK;
}

/* ---- validation: the dry run --------------------------------------------- */

typedef struct device_state {
    int pc;      /* next op to run; ops before it have run */
    int pending; /* channel op pc-1 still has to send on, or -1 */
    int queued;  /* on the work stack */
} device_state_t;

/* Runs device d as far as it can; returns 1 if anything changed. held[c]
 * is the micro-batch whose message channel c holds, or -1 when empty. */
static int advance(const bg_schedule_t *s, device_state_t *state, int *held, int d) {
    device_state_t *me = &state[d];
    int progress = 0;
    for (;;) {
        if (me->pending >= 0) {
            if (held[me->pending] >= 0) break; /* the previous message is still there */
            held[me->pending] = s->ops[d][me->pc - 1].microbatch;
            me->pending = -1;
            progress = 1;
        }
        if (me->pc == s->op_counts[d]) break;
        const bg_op_t *op = &s->ops[d][me->pc];
        const int in = input_channel(s, op);
        if (in >= 0) {
            if (held[in] != op->microbatch) break; /* empty, or another op's message */
            held[in] = -1;
        }
        me->pc++;
        me->pending = output_channel(s, op);
        progress = 1;
    }
    return progress;
}

static void append(char *buf, size_t size, size_t *used, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t size, size_t *used, const char *format, ...) {
    if (*used >= size - 1) return;
    va_list args;
    va_start(args, format);
    const int n = vsnprintf(buf + *used, size - *used, format, args);
    va_end(args);
    if (n > 0) *used = *used + (size_t)n < size - 1 ? *used + (size_t)n : size - 1;
}

/* ", which is at op 4 (B1 of stage 1)": where device r stands. */
static void append_whereabouts(const bg_schedule_t *s, const device_state_t *state, int r,
                               char *buf, size_t size, size_t *used) {
    char name[64];
    if (state[r].pc == s->op_counts[r])
        append(buf, size, used, ", which has run all its ops");
    else
        append(buf, size, used, ", which is at op %d (%s)", state[r].pc,
               op_describe(&s->ops[r][state[r].pc], name, sizeof name));
}

/* " the message for F2 of stage 1 (device 1's op 5)": what channel c holds. */
static void append_held(const bg_schedule_t *s, const int *position, const int *held, int c,
                        char *buf, size_t size, size_t *used) {
    char name[64];
    const bg_op_t consumer = channel_consumer(s, c, held[c]);
    append(buf, size, used, " the message for %s (device %d's op %d)",
           op_describe(&consumer, name, sizeof name), consumer.stage % s->devices,
           position[cell_index(s, consumer.kind, consumer.stage, consumer.microbatch)]);
}

static bg_status_t deadlock_error(const bg_schedule_t *s, const int *position,
                                  const device_state_t *state, const int *held) {
    char msg[900], name[64];
    size_t used = 0;
    int listed = 0, blocked = 0;
    append(msg, sizeof msg, &used, "deadlock:");
    for (int d = 0; d < s->devices; d++) {
        const device_state_t *me = &state[d];
        if (me->pc == s->op_counts[d] && me->pending < 0) continue;
        blocked++;
        if (listed == DEADLOCK_LISTED) continue;
        append(msg, sizeof msg, &used, "%s device %d waits at ", listed ? ";" : "", d);
        listed++;
        if (me->pending >= 0) {
            const int c = me->pending;
            append(msg, sizeof msg, &used,
                   "op %d (%s): send to device %d, but the channel still holds", me->pc - 1,
                   op_describe(&s->ops[d][me->pc - 1], name, sizeof name),
                   channel_consumer(s, c, 0).stage % s->devices);
            append_held(s, position, held, c, msg, sizeof msg, &used);
            continue;
        }
        const bg_op_t *op = &s->ops[d][me->pc];
        const int c = input_channel(s, op);
        const int from = channel_producer(s, c, 0).stage % s->devices;
        append(msg, sizeof msg, &used, "op %d (%s): receive from device %d", me->pc,
               op_describe(op, name, sizeof name), from);
        if (held[c] >= 0) {
            append(msg, sizeof msg, &used, ", but the channel holds");
            append_held(s, position, held, c, msg, sizeof msg, &used);
        } else {
            append_whereabouts(s, state, from, msg, sizeof msg, &used);
        }
    }
    if (blocked > listed) append(msg, sizeof msg, &used, "; and %d more", blocked - listed);
    return bg_error_set(BG_ERR_INVALID, "%s", msg);
}

/* Event-driven: a device is retried only after one of its neighbours (the
 * only devices it shares channels with: stage s talks to s-1 and s+1, on
 * devices d-1 and d+1 mod K) changed, so the run costs O(ops + K*V). */
static bg_status_t dry_run(const bg_schedule_t *s, const int *position) {
    const int K = s->devices;
    const int channels = channel_count(s);
    device_state_t *state = bg_calloc((size_t)K, sizeof *state);
    int *stack = bg_malloc((size_t)K * sizeof *stack);
    int *held = bg_malloc((size_t)(channels > 0 ? channels : 1) * sizeof *held);
    bg_status_t st = BG_OK;
    BG_ALLOC_CHECK_GOTO(state, st, done);
    BG_ALLOC_CHECK_GOTO(stack, st, done);
    BG_ALLOC_CHECK_GOTO(held, st, done);
    for (int c = 0; c < channels; c++) held[c] = -1;
    int top = 0;
    for (int d = K - 1; d >= 0; d--) {
        state[d].pending = -1;
        state[d].queued = 1;
        stack[top++] = d;
    }
    while (top > 0) {
        const int d = stack[--top];
        state[d].queued = 0;
        if (!advance(s, state, held, d)) continue;
        const int neighbours[2] = {(d + K - 1) % K, (d + 1) % K};
        for (int n = 0; n < 2; n++) {
            if (state[neighbours[n]].queued) continue;
            state[neighbours[n]].queued = 1;
            stack[top++] = neighbours[n];
        }
    }
    for (int d = 0; d < K; d++)
        if (state[d].pc != s->op_counts[d] || state[d].pending >= 0) {
            st = deadlock_error(s, position, state, held);
            break;
        }
done:
    free(held);
    free(stack);
    free(state);
    return st;
}

bg_status_t bg_schedule_validate(const bg_schedule_t *schedule) {
    BG_CHECK(check_shape(schedule));
    const bg_schedule_t *s = schedule;
    const size_t cells = (size_t)OP_KINDS_WITH_CELL * (size_t)s->stages * (size_t)s->microbatches;
    bg_status_t st = BG_OK;
    int *position = bg_malloc(cells * sizeof *position);
    BG_ALLOC_CHECK_GOTO(position, st, done);
    memset(position, 0xff, cells * sizeof *position); /* all -1: not seen */
    BG_CHECK_GOTO(check_ops(s, position), st, done);
    BG_CHECK_GOTO(check_coverage(s, position), st, done);
    BG_CHECK_GOTO(check_local_order(s, position), st, done);
    BG_CHECK_GOTO(dry_run(s, position), st, done);
done:
    free(position);
    return st;
}

/* ---- stash and text ------------------------------------------------------ */

/* 1 when `s` has op lists and `stage` is one of its stages; else 0 with the
 * message set, naming `function`. */
static int stage_readable(const bg_schedule_t *s, int stage, const char *function) {
    if (s == NULL || s->ops == NULL || s->op_counts == NULL || s->devices < 1) {
        bg_error_set(BG_ERR_INVALID, "%s: no schedule", function);
        return 0;
    }
    if (stage < 0 || stage >= s->stages) {
        bg_error_set(BG_ERR_INVALID, "stage %d out of range (%d stages)", stage, s->stages);
        return 0;
    }
    return 1;
}

bg_op_kind_t bg_schedule_gradient_kind(const bg_schedule_t *s) {
    return s->split_backward ? BG_OP_WEIGHT : BG_OP_BACKWARD;
}

int bg_schedule_last_gradient_microbatch(const bg_schedule_t *s, int stage) {
    if (!stage_readable(s, stage, "bg_schedule_last_gradient_microbatch")) return -1;
    const bg_op_kind_t kind = bg_schedule_gradient_kind(s);
    const int d = stage % s->devices;
    int last = -1;
    for (int i = 0; i < s->op_counts[d]; i++)
        if (s->ops[d][i].stage == stage && s->ops[d][i].kind == kind)
            last = s->ops[d][i].microbatch;
    return last;
}

int bg_schedule_ring_slots(int devices, int from, int to) {
    return from % devices == to % devices ? 1 : 2;
}

int bg_schedule_stash_slots(const bg_schedule_t *schedule, int stage) {
    const bg_schedule_t *s = schedule;
    if (!stage_readable(s, stage, "bg_schedule_stash_slots")) return -1;
    if (s->forward_only) return 0;
    unsigned char *finished = bg_calloc((size_t)s->microbatches, 1);
    if (finished == NULL) {
        bg_error_set(BG_ERR_NOMEM, "%s:%d: out of memory (stash flags)", __FILE__, __LINE__);
        return -1;
    }
    /* Stage `stage` lives on one device, so its window depends only on that
     * device's order: the dry run's interleaving across devices does not
     * change it. */
    const bg_op_kind_t last = s->split_backward ? BG_OP_WEIGHT : BG_OP_BACKWARD;
    const int d = stage % s->devices;
    int newest = -1, oldest = 0, widest = 0;
    for (int i = 0; i < s->op_counts[d]; i++) {
        const bg_op_t *op = &s->ops[d][i];
        /* Range check only: the schedule is valid by contract. */
        if (op->stage != stage || op->microbatch < 0 || op->microbatch >= s->microbatches) continue;
        if (op->kind == last) finished[op->microbatch] = 1;
        if (op->kind != BG_OP_FORWARD) continue;
        if (op->microbatch > newest) newest = op->microbatch;
        while (oldest < s->microbatches && finished[oldest]) oldest++;
        if (newest - oldest + 1 > widest) widest = newest - oldest + 1;
    }
    free(finished);
    return widest;
}

const char *bg_schedule_format_device(const bg_schedule_t *schedule, int device, char *buf,
                                      size_t size) {
    if (buf == NULL || size == 0) return buf;
    buf[0] = '\0';
    const bg_schedule_t *s = schedule;
    if (s == NULL || s->ops == NULL || s->op_counts == NULL || device < 0 || device >= s->devices)
        return buf;
    size_t used = 0;
    for (int i = 0; i < s->op_counts[device]; i++) {
        const bg_op_t *op = &s->ops[device][i];
        const char *sep = i ? " " : "";
        if (!op_has_cell(op))
            append(buf, size, &used, "%s%s", sep, bg_op_letter(op->kind));
        else if (s->chunks > 1 || op->stage != device)
            append(buf, size, &used, "%s%s%d@%d", sep, bg_op_letter(op->kind), op->microbatch,
                   op->stage);
        else
            append(buf, size, &used, "%s%s%d", sep, bg_op_letter(op->kind), op->microbatch);
    }
    return buf;
}
