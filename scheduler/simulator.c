#include "simulator.h"

#include <math.h>
#include <stdlib.h>

#include "schedule.h"

/* An interval in which a device ran an op, of kind BG_SIM_AFTER_*. */
typedef struct sim_busy {
    double start, end;
    int kind;
} sim_busy_t;

/* When each (stage, micro-batch)'s activation and gradient arrive at the
 * consumer, and when each link is next free; -1 = not produced yet. */
typedef struct sim_state {
    const bg_schedule_t *schedule;
    const bg_sim_costs_t *costs;
    int stages, microbatches;
    double *activation_ready;             /* [stage * M + mb]: input of F(stage, mb) */
    double *gradient_ready;               /* [stage * M + mb]: dy of B(stage, mb) */
    double *forward_done, *backward_done; /* same indexing, on the stage itself */
    double *forward_link, *backward_link; /* per boundary */
    double *device_free;
    int *pc;
    /* A device whose op has ended but whose output is not sent yet: the
     * send is an event of its own at the op's end, taken in time order, so
     * that whether the receiver already waits is known when it happens. */
    const bg_op_t **pending; /* per device: the op whose output to send, or NULL */
    int *last_gradient_mb;   /* per stage: bg_schedule_last_gradient_microbatch */
    /* The channels' rings, as the executor sizes them: channel c is the
     * activations across boundary c (c < stages - 1) or the gradients
     * across boundary c - (stages - 1). A slot is taken when a send starts
     * copying and free again when the receive has copied the message out;
     * slot_free[c * M + i] is when slot i of channel c is free, -1 while its
     * message waits for a receive not simulated yet. */
    int *ring;         /* slots per boundary */
    double *slot_free; /* [channel * M + slot] */
    int *held;         /* [channel * M + mb]: the slot holding that message */
    /* Per channel, its slots whose freeing is known, in a binary heap by
     * (when, slot): free_heap[channel * M ..], free_count[channel] of them.
     * A scan of every slot per look made a step of M micro-batches cost
     * M^2 (30 s at M = 16,384). */
    int *free_heap, *free_count;
    int barrier_known;   /* every device has reached the optimizer step */
    double barrier_time; /* when the last one did */
    int barrier_last;    /* which device that was */
    /* Under contention: each F, B and W's stretch, [kind * cells + stage *
     * M + mb] for kinds F, B, W; NULL without contention. */
    double *stretch;
    /* Per device: when its last op or copy ended (NAN: none yet); and its
     * F, B, W and STEP intervals, busy[d * busy_cap ..]: the previous
     * step's first (busy_kept[d] of them, on this step's clock), then this
     * step's, busy_count[d] in all. */
    double *last_busy;
    sim_busy_t *busy;
    int *busy_count, *busy_kept, busy_cap;
    double previous_end; /* when the previous step ended (NAN: none yet) */
    /* costs->after_wait when some ratio in it is above 1, else NULL: then
     * no op is slowed and no busy interval is noted. */
    const bg_sim_after_wait_t *after_wait;
} sim_state_t;

enum { STRETCH_FORWARD, STRETCH_BACKWARD, STRETCH_WEIGHT, STRETCH_KINDS };

static double cost(const double *array, int index) { return array != NULL ? array[index] : 0; }

static int device_of(const sim_state_t *sim, int stage) { return stage % sim->schedule->devices; }

/* Whether device d has nothing left before its optimizer step (or at all). */
static int at_barrier(const sim_state_t *sim, int d) {
    const bg_schedule_t *sc = sim->schedule;
    if (sim->pending[d] != NULL) return 0;
    return sim->pc[d] >= sc->op_counts[d] || sc->ops[d][sim->pc[d]].kind == BG_OP_STEP;
}

/* When device d may start its STEP, or -1 while some device is not there. */
static double step_ready(sim_state_t *sim, int d) {
    const bg_schedule_t *sc = sim->schedule;
    if (!sim->barrier_known) {
        int last = -1, waiting = 0;
        for (int e = 0; e < sc->devices; e++) {
            if (!at_barrier(sim, e)) return -1;
            if (sim->pc[e] >= sc->op_counts[e]) continue;
            waiting++;
            if (last < 0 || sim->device_free[e] > sim->device_free[last]) last = e;
        }
        sim->barrier_known = 1;
        sim->barrier_time = sim->device_free[last];
        /* With one device at the barrier nobody sleeps there. */
        sim->barrier_last = waiting > 1 ? last : -1;
    }
    if (sim->barrier_last < 0) return sim->barrier_time;
    return sim->barrier_time +
           (d == sim->barrier_last ? sim->costs->wake_s : sim->costs->handoff_s);
}

/* Earliest time the op's inputs are all there, or -1 if one is missing. */
static double inputs_ready(sim_state_t *sim, const bg_op_t *op, int device) {
    const int at = op->stage * sim->microbatches + op->microbatch;
    switch (op->kind) {
    case BG_OP_FORWARD: return op->stage == 0 ? 0 : sim->activation_ready[at];
    case BG_OP_BACKWARD: {
        double own = sim->forward_done[at];
        if (own < 0) return -1;
        if (op->stage == sim->stages - 1) return own;
        double grad = sim->gradient_ready[at];
        return grad < 0 ? -1 : fmax(own, grad);
    }
    case BG_OP_WEIGHT: return sim->backward_done[at];
    case BG_OP_STEP: return step_ready(sim, device);
    }
    return -1;
}

/* The stretch of an op under contention (1 without). */
static double stretch(const sim_state_t *sim, int kind, int stage, int mb) {
    if (sim->stretch == NULL) return 1;
    const int cells = sim->stages * sim->microbatches;
    return sim->stretch[kind * cells + stage * sim->microbatches + mb];
}

/* The slowdown of an F, B or W after its device d was idle from `from` to
 * `to` (bg_sim_after_wait_t): the worst over the other devices' ops in
 * that gap; 1 without after-wait costs. */
static double wait_slowdown(const sim_state_t *sim, const bg_op_t *op, int d, double from,
                            double to) {
    if (sim->after_wait == NULL || op->kind == BG_OP_STEP || !(to > from)) return 1;
    const bg_sim_after_wait_t *w = &sim->after_wait[op->stage];
    const double *ratio = op->kind == BG_OP_FORWARD ? w->forward : w->backward;
    double worst = 1;
    for (int e = 0; e < sim->schedule->devices; e++) {
        if (e == d) continue;
        /* A device's ops are noted in the order they run, one at a time,
         * so their ends are sorted too: skip those over before the gap. */
        const sim_busy_t *ops = &sim->busy[e * sim->busy_cap];
        int lo = 0, hi = sim->busy_count[e];
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            if (ops[mid].end <= from)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (int i = lo; i < sim->busy_count[e]; i++) {
            const sim_busy_t *o = &ops[i];
            if (o->start >= to) break;
            const double length = o->end - o->start;
            const double inside = fmin(to, o->end) - fmax(from, o->start);
            if (length > 0 && inside > 0 && ratio[o->kind] > 1)
                worst = fmax(worst, 1 + (ratio[o->kind] - 1) * inside / length);
        }
    }
    return worst;
}

/* Notes that device d ran an op of kind BG_SIM_AFTER_* from start to end
 * (only wait_slowdown reads these: nothing without after-wait costs). */
static void note_busy(sim_state_t *sim, int d, double start, double end, int kind) {
    if (sim->after_wait != NULL && sim->busy_count[d] < sim->busy_cap)
        sim->busy[d * sim->busy_cap + sim->busy_count[d]++] = (sim_busy_t){start, end, kind};
}

/* The check of stage s's weight gradients when op (of kind B or W) is the
 * one that completes them, else 0. */
static double weight_check(const sim_state_t *sim, const bg_op_t *op) {
    if (op->kind != bg_schedule_gradient_kind(sim->schedule) ||
        op->microbatch != sim->last_gradient_mb[op->stage])
        return 0;
    return cost(sim->costs->weight_check, op->stage);
}

/* An op's duration, `slowdown` times longer after an idle gap. */
static double duration(const sim_state_t *sim, const bg_op_t *op, double slowdown) {
    const bg_sim_costs_t *c = sim->costs;
    const int s = op->stage, mb = op->microbatch;
    switch (op->kind) {
    case BG_OP_FORWARD: return c->forward[s] * stretch(sim, STRETCH_FORWARD, s, mb) * slowdown;
    case BG_OP_BACKWARD:
        return (c->backward[s] + cost(c->recompute, s) + weight_check(sim, op)) *
               stretch(sim, STRETCH_BACKWARD, s, mb) * slowdown;
    case BG_OP_WEIGHT:
        return (cost(c->weight, s) + cost(c->recompute, s) + weight_check(sim, op)) *
               stretch(sim, STRETCH_WEIGHT, s, mb) * slowdown;
    case BG_OP_STEP: break; /* one event per stage: commit_op */
    }
    return 0;
}

/* The copy into the device before the op: its input from the previous
 * stage (F) or its output gradient from the next one (B); 0 otherwise. */
static double receive_cost(const sim_state_t *sim, const bg_op_t *op) {
    if (op->kind == BG_OP_FORWARD && op->stage > 0)
        return cost(sim->costs->activation_recv, op->stage - 1);
    if (op->kind == BG_OP_BACKWARD && op->stage + 1 < sim->stages)
        return cost(sim->costs->gradient_recv, op->stage);
    return 0;
}

/* Whether an op sends its output to a neighbour stage. */
static int sends_output(const sim_state_t *sim, const bg_op_t *op) {
    return (op->kind == BG_OP_FORWARD && op->stage + 1 < sim->stages) ||
           (op->kind == BG_OP_BACKWARD && op->stage > 0);
}

/* Whether device r is blocked, at time t, waiting for exactly this op. */
static int waits_for(const sim_state_t *sim, int r, bg_op_kind_t kind, int stage, int mb,
                     double t) {
    const bg_schedule_t *sc = sim->schedule;
    if (sim->pending[r] != NULL || sim->pc[r] >= sc->op_counts[r] || sim->device_free[r] > t)
        return 0;
    const bg_op_t *next = &sc->ops[r][sim->pc[r]];
    return next->kind == kind && next->stage == stage && next->microbatch == mb;
}

static int channel_of(const sim_state_t *sim, int forward, int boundary) {
    return forward ? boundary : sim->stages - 1 + boundary;
}

/* The channel a device's pending send goes into, and its boundary. */
static int pending_channel(const sim_state_t *sim, const bg_op_t *op, int *boundary) {
    const int forward = op->kind == BG_OP_FORWARD;
    *boundary = forward ? op->stage : op->stage - 1;
    return channel_of(sim, forward, *boundary);
}

/* The channel an op receives its input from (F) or its output gradient
 * from (B), or -1. */
static int receiving_channel(const sim_state_t *sim, const bg_op_t *op) {
    if (op->kind == BG_OP_FORWARD && op->stage > 0) return channel_of(sim, 1, op->stage - 1);
    if (op->kind == BG_OP_BACKWARD && op->stage + 1 < sim->stages)
        return channel_of(sim, 0, op->stage);
    return -1;
}

/* Whether slot a of channel c frees before slot b (the lower first, on a
 * tie). */
static int frees_before(const sim_state_t *sim, int c, int a, int b) {
    const double ta = sim->slot_free[c * sim->microbatches + a],
                 tb = sim->slot_free[c * sim->microbatches + b];
    return ta < tb || (ta == tb && a < b);
}

/* Slot `slot` of channel c frees at `when`: into its heap. A slot that
 * holds no message (the schedule received one twice, or one never sent)
 * is a broken schedule, not a second entry. */
static bg_status_t slot_frees(sim_state_t *sim, int c, int slot, double when) {
    if (slot < 0 || sim->slot_free[c * sim->microbatches + slot] >= 0)
        return bg_error_set(BG_ERR_INTERNAL,
                            "simulator: channel %d received a message no slot holds", c);
    sim->slot_free[c * sim->microbatches + slot] = when;
    int *heap = sim->free_heap + c * sim->microbatches;
    int at = sim->free_count[c]++;
    heap[at] = slot;
    while (at > 0 && frees_before(sim, c, heap[at], heap[(at - 1) / 2])) {
        const int up = (at - 1) / 2, t = heap[at];
        heap[at] = heap[up];
        heap[up] = t;
        at = up;
    }
    return BG_OK;
}

/* Channel c's first slot to free (it has one: first_free_slot found it)
 * is taken by a send: out of its heap. */
static void slot_taken(sim_state_t *sim, int c) {
    int *heap = sim->free_heap + c * sim->microbatches;
    sim->slot_free[c * sim->microbatches + heap[0]] = -1;
    const int n = --sim->free_count[c];
    heap[0] = heap[n];
    for (int at = 0;;) {
        const int l = 2 * at + 1, r = l + 1;
        int least = at;
        if (l < n && frees_before(sim, c, heap[l], heap[least])) least = l;
        if (r < n && frees_before(sim, c, heap[r], heap[least])) least = r;
        if (least == at) break;
        const int t = heap[at];
        heap[at] = heap[least];
        heap[least] = t;
        at = least;
    }
}

/* The ring slot of channel c that frees first, and when (-1: every slot
 * holds a message whose receive is not simulated yet). */
static double first_free_slot(const sim_state_t *sim, int c, int *slot) {
    if (sim->free_count[c] == 0) {
        *slot = -1;
        return -1;
    }
    *slot = sim->free_heap[c * sim->microbatches];
    return sim->slot_free[c * sim->microbatches + *slot];
}

/* When device d's pending send is ready to copy (after the sender's check
 * of the tensor), and when it starts copying into *slot: then, or, with the
 * ring full, handoff_s after a receive frees a slot (the sender sleeps
 * meanwhile). Returns -1 while no slot's freeing is known. */
static double send_start(const sim_state_t *sim, int d, double *ready, int *slot) {
    const bg_op_t *op = sim->pending[d];
    int boundary;
    const int c = pending_channel(sim, op, &boundary);
    *ready = sim->device_free[d]; /* its op's event holds the check (commit_op) */
    const double free_at = first_free_slot(sim, c, slot);
    if (free_at < 0) return -1;
    return free_at <= *ready ? *ready : free_at + sim->costs->handoff_s;
}

/* Whether device `sender` is asleep at time t waiting for a free slot of
 * channel c (its send ready, every slot held). */
static int blocked_on(const sim_state_t *sim, int sender, int c, double t) {
    if (sim->pending[sender] == NULL) return 0;
    int boundary;
    if (pending_channel(sim, sim->pending[sender], &boundary) != c) return 0;
    double ready;
    int slot;
    return send_start(sim, sender, &ready, &slot) < 0 && ready <= t;
}

/* Ships device d's pending output (which its op checked): the sender waits
 * for a free ring slot if the ring is full (a WAIT, as the executor records
 * it), copies it out and wakes a receiver already waiting for it (SEND);
 * then the link. Records when it reaches the neighbour stage. */
static bg_status_t send_output(sim_state_t *sim, int d, int step, bg_timeline_t *tl) {
    const bg_op_t *op = sim->pending[d];
    const bg_sim_costs_t *c = sim->costs;
    const int s = op->stage, forward = op->kind == BG_OP_FORWARD;
    const int peer = forward ? s + 1 : s - 1;
    int boundary, slot;
    const int ch = pending_channel(sim, op, &boundary);
    const int r = device_of(sim, peer);
    double ready;
    const double start = send_start(sim, d, &ready, &slot);
    if (start > ready)
        BG_CHECK(bg_timeline_add(tl, &(bg_event_t){BG_EVENT_WAIT, d, s, op->microbatch, peer, step,
                                                   ready, start, 1, 0}));
    slot_taken(sim, ch); /* `slot`, its first to free */
    sim->held[ch * sim->microbatches + op->microbatch] = slot;
    const double copy =
        forward ? cost(c->activation_send, boundary) : cost(c->gradient_send, boundary);
    double sent = start + copy, arrival = sent;
    sim->pending[d] = NULL;
    int woken = r != d && waits_for(sim, r, forward ? BG_OP_FORWARD : BG_OP_BACKWARD, peer,
                                    op->microbatch, sent);
    sim->device_free[d] = sent + (woken ? c->wake_s : 0);
    /* The send's event holds its wake of the receiver, as the executor's. */
    if (sim->device_free[d] > start)
        BG_CHECK(bg_timeline_add(tl, &(bg_event_t){BG_EVENT_SEND, d, s, op->microbatch, peer, step,
                                                   start, sim->device_free[d], 0,
                                                   woken ? c->wake_s : 0}));
    sim->last_busy[d] = sim->device_free[d];
    if (r != d) {
        double *link = forward ? &sim->forward_link[boundary] : &sim->backward_link[boundary];
        double link_start = fmax(sent, *link);
        arrival = link_start + (forward ? c->activation_transfer : c->gradient_transfer)[boundary];
        *link = arrival;
        /* A crossing that neither device copies itself (a GPU's copy
         * engine) shows as a LINK event of the receiver; on CPU devices
         * the link part is the hand-off between the copies, as the
         * executor records it: no event. */
        const double copy_in =
            forward ? cost(c->activation_recv, boundary) : cost(c->gradient_recv, boundary);
        if (copy == 0 && copy_in == 0 && arrival > link_start)
            BG_CHECK(bg_timeline_add(tl, &(bg_event_t){BG_EVENT_LINK, r, peer, op->microbatch, s,
                                                       step, link_start, arrival, 0, 0}));
    }
    if (forward)
        sim->activation_ready[peer * sim->microbatches + op->microbatch] = arrival;
    else
        sim->gradient_ready[peer * sim->microbatches + op->microbatch] = arrival;
    return BG_OK;
}

static bg_event_kind_t event_kind(bg_op_kind_t kind) {
    switch (kind) {
    case BG_OP_FORWARD: return BG_EVENT_FORWARD;
    case BG_OP_BACKWARD: return BG_EVENT_BACKWARD;
    case BG_OP_WEIGHT: return BG_EVENT_WEIGHT;
    case BG_OP_STEP: break;
    }
    return BG_EVENT_STEP;
}

/* The stage whose data an op waits for, for the WAIT event. */
static int waited_peer(const sim_state_t *sim, const bg_op_t *op) {
    if (op->kind == BG_OP_FORWARD && op->stage > 0) return op->stage - 1;
    if (op->kind == BG_OP_BACKWARD && op->stage + 1 < sim->stages) return op->stage + 1;
    return -1;
}

/* Starts device d's next op at `start` (its inputs there at `ready`). */
static bg_status_t commit_op(sim_state_t *sim, int d, double start, double ready, int step,
                             bg_timeline_t *tl) {
    const bg_op_t *op = &sim->schedule->ops[d][sim->pc[d]++];
    int peer = waited_peer(sim, op);
    /* Idle since its last op or copy, up to the copy in (or the op). */
    const double slowdown =
        isnan(sim->last_busy[d]) ? 1 : wait_slowdown(sim, op, d, sim->last_busy[d], start);
    if (ready > sim->device_free[d] && (peer >= 0 || op->kind == BG_OP_STEP))
        /* The executor records the barrier's wait on the device's own lane. */
        BG_CHECK(bg_timeline_add(
            tl, &(bg_event_t){BG_EVENT_WAIT, d, op->kind == BG_OP_STEP ? d : op->stage,
                              op->microbatch, peer, step, sim->device_free[d], ready, 0, 0}));
    const double received = start;
    start += receive_cost(sim, op);
    int woke = 0;
    const int rc = receiving_channel(sim, op);
    if (rc >= 0) {
        /* The receive frees its slot, waking a sender asleep on the full
         * ring (which costs this device wake_s, as a send's wake does, in
         * the receive's event as the executor records it). */
        const int sender = device_of(sim, peer);
        woke = sender != d && blocked_on(sim, sender, rc, start);
        BG_CHECK(slot_frees(sim, rc, sim->held[rc * sim->microbatches + op->microbatch], start));
        if (woke) start += sim->costs->wake_s;
    }
    if (start > received)
        BG_CHECK(bg_timeline_add(tl, &(bg_event_t){BG_EVENT_RECV, d, op->stage, op->microbatch,
                                                   peer, step, received, start, 0,
                                                   woke ? sim->costs->wake_s : 0}));
    if (op->kind == BG_OP_STEP) {
        /* The executor updates the device's stages one after another. */
        for (int s = d; s < sim->stages; s += sim->schedule->devices) {
            const double end = start + cost(sim->costs->step, s);
            BG_CHECK(bg_timeline_add(
                tl, &(bg_event_t){BG_EVENT_STEP, d, s, -1, -1, step, start, end, 0, 0}));
            note_busy(sim, d, start, end, BG_SIM_AFTER_STEP);
            start = end;
        }
        sim->device_free[d] = sim->last_busy[d] = start;
        return BG_OK;
    }
    const double computed = start + duration(sim, op, slowdown);
    note_busy(sim, d, start, computed,
              op->kind == BG_OP_FORWARD ? BG_SIM_AFTER_FORWARD : BG_SIM_AFTER_BACKWARD);
    double check = 0;
    if (sends_output(sim, op)) {
        /* The check of what it sends, in the op's event as the executor's. */
        int boundary;
        pending_channel(sim, op, &boundary);
        check = op->kind == BG_OP_FORWARD ? cost(sim->costs->activation_check, boundary)
                                          : cost(sim->costs->gradient_check, boundary);
    }
    const double end = computed + check;
    BG_CHECK(bg_timeline_add(tl, &(bg_event_t){event_kind(op->kind), d, op->stage, op->microbatch,
                                               -1, step, start, end, 0, check}));
    sim->device_free[d] = sim->last_busy[d] = end;
    const int at = op->stage * sim->microbatches + op->microbatch;
    if (op->kind == BG_OP_FORWARD) sim->forward_done[at] = end;
    if (op->kind == BG_OP_BACKWARD) sim->backward_done[at] = end;
    if (sends_output(sim, op)) sim->pending[d] = op;
    return BG_OK;
}

/* At a step's start: each device's ops of the previous step, and its last
 * busy time, moved onto this step's clock (which may restart at the same
 * origin: the settling passes), its older ops dropped; without a previous
 * step there are none. */
static void carry_previous_step(sim_state_t *sim, double origin) {
    const double shift = origin - sim->previous_end;
    for (int d = 0; d < sim->schedule->devices; d++) {
        sim_busy_t *own = &sim->busy[d * sim->busy_cap];
        const int kept = isnan(shift) ? 0 : sim->busy_count[d] - sim->busy_kept[d];
        for (int i = 0; i < kept; i++) {
            own[i] = own[sim->busy_kept[d] + i];
            own[i].start += shift;
            own[i].end += shift;
        }
        sim->busy_kept[d] = sim->busy_count[d] = kept;
        sim->last_busy[d] += shift; /* NAN when unknown */
    }
}

static bg_status_t run_step(sim_state_t *sim, int step, double origin, bg_timeline_t *tl) {
    const bg_schedule_t *sc = sim->schedule;
    const int cells = sim->stages * sim->microbatches;
    for (int i = 0; i < cells; i++) {
        sim->activation_ready[i] = sim->gradient_ready[i] = -1;
        sim->forward_done[i] = sim->backward_done[i] = -1;
    }
    for (int b = 0; b + 1 < sim->stages; b++) sim->forward_link[b] = sim->backward_link[b] = origin;
    /* The executor empties its rings between steps: every slot free at
     * the origin, so in the order of the slots (a heap already). */
    for (int i = 0; i < 2 * (sim->stages - 1) * sim->microbatches; i++) {
        sim->slot_free[i] = origin;
        sim->held[i] = -1;
    }
    for (int c = 0; c < 2 * (sim->stages - 1); c++) {
        const int boundary = c < sim->stages - 1 ? c : c - (sim->stages - 1);
        sim->free_count[c] = sim->ring[boundary];
        for (int i = 0; i < sim->ring[boundary]; i++) sim->free_heap[c * sim->microbatches + i] = i;
    }
    carry_previous_step(sim, origin);
    /* Each device's thread is woken by the caller at the step's start. */
    for (int d = 0; d < sc->devices; d++) {
        sim->device_free[d] = origin + sim->costs->handoff_s;
        sim->pc[d] = 0;
        sim->pending[d] = NULL;
    }
    sim->barrier_known = 0;
    for (;;) {
        /* Take the earliest thing that can happen next, a pending send
         * (first, on a tie) or an op start: events then happen in time
         * order, so links are granted in the order transfers are ready and
         * a send knows whether its receiver is already waiting. */
        int best = -1, best_is_send = 0;
        double best_start = INFINITY, best_ready = 0;
        for (int d = 0; d < sc->devices; d++) {
            if (sim->pending[d] != NULL) {
                /* A send waiting for ring space happens when a slot frees;
                 * otherwise at the end of the op that produced it. */
                double ready;
                int slot;
                const double start = send_start(sim, d, &ready, &slot);
                if (start < 0) continue;
                const double at = start > ready ? start : sim->device_free[d];
                if (at < best_start || (at == best_start && !best_is_send)) {
                    best_start = at;
                    best = d;
                    best_is_send = 1;
                }
                continue;
            }
            if (sim->pc[d] >= sc->op_counts[d]) continue;
            double ready = inputs_ready(sim, &sc->ops[d][sim->pc[d]], d);
            if (ready < 0) continue;
            ready = fmax(ready, origin);
            double start = fmax(sim->device_free[d], ready);
            if (start < best_start) {
                best_start = start;
                best_ready = ready;
                best = d;
                best_is_send = 0;
            }
        }
        if (best < 0) break;
        if (best_is_send)
            BG_CHECK(send_output(sim, best, step, tl));
        else
            BG_CHECK(commit_op(sim, best, best_start, best_ready, step, tl));
    }
    double end = origin;
    for (int d = 0; d < sc->devices; d++) {
        if (sim->pc[d] < sc->op_counts[d])
            return bg_error_set(BG_ERR_INTERNAL, "simulator: device %d stuck at op %d", d,
                                sim->pc[d]);
        end = fmax(end, sim->device_free[d]);
    }
    /* The caller learns the step is over when its thread is woken. */
    end += sim->costs->handoff_s;
    sim->previous_end = end;
    BG_CHECK(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, origin, end);
    return BG_OK;
}

static int valid_duration(double x) { return isfinite(x) && x >= 0; }

/* Whether an event keeps its device busy (an op or a copy; not a wait, nor
 * a tensor crossing on the copy engine). */
static int busy(const bg_event_t *e) {
    return e->kind != BG_EVENT_WAIT && e->kind != BG_EVENT_LINK;
}

/* The time a set of intervals covers before any moment, each interval
 * counted on its own where they overlap: their starts and ends sorted,
 * with running sums, so that a query is two binary searches. */
typedef struct coverage {
    double *start, *end;         /* n each, ascending */
    double *start_sum, *end_sum; /* n + 1 each: [i] the sum of the first i */
    int n;
} coverage_t;

static int compare_doubles(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* How many of the ascending values[0..n) are below t. */
static int count_below(const double *values, int n, double t) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (values[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Sum over the intervals of how much of each lies before t: those started
 * run to t, less what those ended already lacked. */
static double covered_before(const coverage_t *c, double t) {
    const int started = count_below(c->start, c->n, t), ended = count_below(c->end, c->n, t);
    return ((double)started * t - c->start_sum[started]) - ((double)ended * t - c->end_sum[ended]);
}

static double covered_between(const coverage_t *c, double from, double to) {
    return covered_before(c, to) - covered_before(c, from);
}

/* Sorts the n starts and ends at c (in a block of 4n + 2 doubles) and
 * sums them. */
static void coverage_finish(coverage_t *c) {
    qsort(c->start, (size_t)c->n, sizeof(double), compare_doubles);
    qsort(c->end, (size_t)c->n, sizeof(double), compare_doubles);
    c->start_sum[0] = c->end_sum[0] = 0;
    for (int i = 0; i < c->n; i++) {
        c->start_sum[i + 1] = c->start_sum[i] + c->start[i];
        c->end_sum[i + 1] = c->end_sum[i] + c->end[i];
    }
}

/* From the events [from, to) of one simulated step: each F, B and W's
 * stretch, 1 + (contention - 1) x the fraction of it during which other
 * devices were busy (the time each busy event of another device overlaps
 * it, summed: the busy time of all devices there less its own device's). */
static bg_status_t settle_stretch(sim_state_t *sim, const bg_timeline_t *tl, int from, int to) {
    const int cells = sim->stages * sim->microbatches, devices = sim->schedule->devices;
    /* coverage[devices] is every device's; the others one device's each. */
    coverage_t *coverage = calloc((size_t)devices + 1, sizeof *coverage);
    int *filled = calloc((size_t)devices + 1, sizeof *filled);
    const size_t events = (size_t)(to - from);
    /* Each set: n starts, n ends and two n + 1 sums, its n the number of
     * its busy events; the devices' sets hold `events` at most together,
     * and so does the whole's. */
    double *block = malloc(sizeof(double) * (8 * events + 2 * ((size_t)devices + 1)));
    if (coverage == NULL || filled == NULL || block == NULL) {
        free(coverage);
        free(filled);
        free(block);
        return bg_error_set(BG_ERR_NOMEM, "simulator: out of memory");
    }
    for (int i = from; i < to; i++) {
        const bg_event_t *e = &tl->events[i];
        if (!busy(e)) continue;
        coverage[e->device].n++;
        coverage[devices].n++;
    }
    double *at = block; /* each set's four arrays in turn */
    for (int d = 0; d <= devices; d++) {
        coverage_t *c = &coverage[d];
        c->start = at;
        c->end = c->start + c->n;
        c->start_sum = c->end + c->n;
        c->end_sum = c->start_sum + c->n + 1;
        at = c->end_sum + c->n + 1;
    }
    for (int i = from; i < to; i++) {
        const bg_event_t *e = &tl->events[i];
        if (!busy(e)) continue;
        const int sets[2] = {e->device, devices};
        for (int k = 0; k < 2; k++) {
            coverage_t *c = &coverage[sets[k]];
            c->start[filled[sets[k]]] = e->start;
            c->end[filled[sets[k]]++] = e->end - e->tail_s; /* its work, not a check or wake */
        }
    }
    for (int d = 0; d <= devices; d++) coverage_finish(&coverage[d]);
    for (int i = from; i < to; i++) {
        const bg_event_t *e = &tl->events[i];
        int kind = e->kind == BG_EVENT_FORWARD    ? STRETCH_FORWARD
                   : e->kind == BG_EVENT_BACKWARD ? STRETCH_BACKWARD
                   : e->kind == BG_EVENT_WEIGHT   ? STRETCH_WEIGHT
                                                  : -1;
        /* The op's compute alone, as the stretch applies to it. */
        const double end = e->end - e->tail_s, length = end - e->start;
        if (kind < 0 || length <= 0) continue;
        const double overlap = covered_between(&coverage[devices], e->start, end) -
                               covered_between(&coverage[e->device], e->start, end);
        const double c = sim->costs->contention[e->stage];
        const double fraction = fmin(1, fmax(0, overlap) / length);
        sim->stretch[kind * cells + e->stage * sim->microbatches + e->microbatch] =
            c > 1 ? 1 + (c - 1) * fraction : 1;
    }
    free(coverage);
    free(filled);
    free(block);
    return BG_OK;
}

/* Whether the costs slow some stage's ops after a wait. */
static int waits_slow(const bg_schedule_t *sc, const bg_sim_costs_t *c) {
    if (c->after_wait == NULL) return 0;
    for (int s = 0; s < sc->stages; s++)
        for (int k = 0; k < BG_SIM_AFTER_KINDS; k++)
            if (c->after_wait[s].forward[k] > 1 || c->after_wait[s].backward[k] > 1) return 1;
    return 0;
}

/* Whether the costs ask for contention on more than one device. */
static int contended(const bg_schedule_t *sc, const bg_sim_costs_t *c) {
    if (c->contention == NULL || sc->devices < 2) return 0;
    for (int s = 0; s < sc->stages; s++)
        if (c->contention[s] > 1) return 1;
    return 0;
}

static bg_status_t check_costs(const bg_schedule_t *sc, const bg_sim_costs_t *c) {
    const double *arrays[] = {c->forward, c->backward, c->weight, c->recompute};
    const char *names[] = {"forward", "backward", "weight", "recompute"};
    const double *links[] = {c->activation_transfer, c->gradient_transfer, c->activation_send,
                             c->activation_recv,     c->gradient_send,     c->gradient_recv,
                             c->activation_check,    c->gradient_check};
    const char *link_names[] = {"activation transfer", "gradient transfer", "activation send",
                                "activation receive",  "gradient send",     "gradient receive",
                                "activation check",    "gradient check"};
    if (c->forward == NULL || c->backward == NULL)
        return bg_error_set(BG_ERR_INVALID, "simulator: forward and backward costs are required");
    if (sc->stages > 1 && (c->activation_transfer == NULL || c->gradient_transfer == NULL))
        return bg_error_set(BG_ERR_INVALID, "simulator: transfer costs are required");
    for (int a = 0; a < 4; a++)
        for (int s = 0; arrays[a] != NULL && s < sc->stages; s++)
            if (!valid_duration(arrays[a][s]))
                return bg_error_set(BG_ERR_INVALID, "simulator: %s cost of stage %d is %g",
                                    names[a], s, arrays[a][s]);
    for (int a = 0; a < 8; a++)
        for (int b = 0; links[a] != NULL && b + 1 < sc->stages; b++)
            if (!valid_duration(links[a][b]))
                return bg_error_set(BG_ERR_INVALID, "simulator: %s cost %d is %g", link_names[a], b,
                                    links[a][b]);
    for (int s = 0; c->contention != NULL && s < sc->stages; s++)
        if (!valid_duration(c->contention[s]))
            return bg_error_set(BG_ERR_INVALID, "simulator: contention of stage %d is %g", s,
                                c->contention[s]);
    for (int s = 0; c->after_wait != NULL && s < sc->stages; s++)
        for (int k = 0; k < BG_SIM_AFTER_KINDS; k++) {
            const double f = c->after_wait[s].forward[k], b = c->after_wait[s].backward[k];
            if (!valid_duration(f) || !valid_duration(b))
                return bg_error_set(BG_ERR_INVALID,
                                    "simulator: after-wait ratios of stage %d are x%g and x%g", s,
                                    f, b);
        }
    for (int s = 0; c->step != NULL && s < sc->stages; s++)
        if (!valid_duration(c->step[s]))
            return bg_error_set(BG_ERR_INVALID, "simulator: step cost of stage %d is %g", s,
                                c->step[s]);
    for (int s = 0; c->weight_check != NULL && s < sc->stages; s++)
        if (!valid_duration(c->weight_check[s]))
            return bg_error_set(BG_ERR_INVALID,
                                "simulator: weight-gradient check of stage %d is %g", s,
                                c->weight_check[s]);
    if (!valid_duration(c->wake_s) || !valid_duration(c->handoff_s))
        return bg_error_set(BG_ERR_INVALID, "simulator: wake %g s and hand-off %g s", c->wake_s,
                            c->handoff_s);
    return BG_OK;
}

/* The most events `op` records a step: the op itself; where it takes a
 * neighbour's output, a wait for it and the copy in; where it sends its
 * own, a wait for a free slot, the copy out (or, with no copy, the wake of
 * the receiver alone) and the link; an optimizer step, a wait at the
 * barrier and one event a stage of its device. */
static int op_events_most(const bg_schedule_t *schedule, const bg_op_t *op) {
    const int last = schedule->stages - 1;
    switch (op->kind) {
    case BG_OP_FORWARD: return 1 + (op->stage > 0 ? 2 : 0) + (op->stage < last ? 3 : 0);
    case BG_OP_BACKWARD: return 1 + (op->stage < last ? 2 : 0) + (op->stage > 0 ? 3 : 0);
    case BG_OP_WEIGHT: return 1;
    case BG_OP_STEP: break;
    }
    return 1 + (schedule->stages + schedule->devices - 1) / schedule->devices;
}

bg_status_t bg_simulate(const bg_schedule_t *schedule, const bg_sim_costs_t *costs, int steps,
                        bg_timeline_t *tl) {
    if (tl->devices != schedule->devices || tl->stages != schedule->stages)
        return bg_error_set(BG_ERR_INVALID,
                            "simulator: timeline of %d devices/%d stages for a "
                            "schedule of %d/%d",
                            tl->devices, tl->stages, schedule->devices, schedule->stages);
    BG_CHECK(check_costs(schedule, costs));
    /* A run that could not be recorded is refused before it starts, not
     * after minutes (op_events_most: until 2026-12-04 one an op, and a
     * sweep of 100,000 steps grew to 12.6 GB before its refusal). */
    int64_t events = 0;
    for (int d = 0; d < schedule->devices; d++)
        for (int i = 0; i < schedule->op_counts[d]; i++)
            events += op_events_most(schedule, &schedule->ops[d][i]);
    BG_CHECK(bg_timeline_check_room((int64_t)tl->count + (int64_t)steps * events, BG_ERR_INVALID));
    sim_state_t sim = {.schedule = schedule,
                       .costs = costs,
                       .stages = schedule->stages,
                       .microbatches = schedule->microbatches};
    const size_t cells = (size_t)sim.stages * (size_t)sim.microbatches;
    sim.activation_ready = malloc(sizeof(double) * cells);
    sim.gradient_ready = malloc(sizeof(double) * cells);
    sim.forward_done = malloc(sizeof(double) * cells);
    sim.backward_done = malloc(sizeof(double) * cells);
    sim.forward_link = calloc((size_t)sim.stages, sizeof(double));
    sim.backward_link = calloc((size_t)sim.stages, sizeof(double));
    sim.device_free = calloc((size_t)schedule->devices, sizeof(double));
    sim.pc = calloc((size_t)schedule->devices, sizeof(int));
    sim.pending = calloc((size_t)schedule->devices, sizeof *sim.pending);
    sim.last_gradient_mb = calloc((size_t)sim.stages, sizeof(int));
    for (int s = 0; sim.last_gradient_mb != NULL && s < sim.stages; s++)
        sim.last_gradient_mb[s] = bg_schedule_last_gradient_microbatch(schedule, s);
    const size_t slots = 2 * (size_t)sim.stages * (size_t)sim.microbatches; /* >= the channels' */
    sim.ring = calloc((size_t)sim.stages, sizeof(int));
    sim.slot_free = malloc(sizeof(double) * slots);
    sim.held = malloc(sizeof(int) * slots);
    sim.free_heap = malloc(sizeof(int) * slots);
    sim.free_count = calloc(2 * (size_t)sim.stages, sizeof(int));
    const size_t devices = (size_t)schedule->devices;
    sim.last_busy = malloc(sizeof(double) * devices);
    for (int d = 0; sim.last_busy != NULL && d < schedule->devices; d++) sim.last_busy[d] = NAN;
    sim.previous_end = NAN;
    sim.after_wait = waits_slow(schedule, costs) ? costs->after_wait : NULL;
    /* Two steps of a device's ops: each of its ops, and a STEP per stage. */
    for (int d = 0; sim.after_wait != NULL && d < schedule->devices; d++)
        if (2 * (schedule->op_counts[d] + sim.stages) > sim.busy_cap)
            sim.busy_cap = 2 * (schedule->op_counts[d] + sim.stages);
    sim.busy = malloc(sizeof(sim_busy_t) * devices * (size_t)(sim.busy_cap > 0 ? sim.busy_cap : 1));
    sim.busy_count = calloc(devices, sizeof(int));
    sim.busy_kept = calloc(devices, sizeof(int));
    for (int b = 0; sim.ring != NULL && b + 1 < sim.stages; b++) {
        /* No more than M: a channel carries M messages a step, so the
         * executor's slots past M (2 at M = 1) are never taken, and the
         * channels' arrays hold M slots each. */
        const int slots_there = bg_schedule_ring_slots(schedule->devices, b, b + 1);
        sim.ring[b] = slots_there < sim.microbatches ? slots_there : sim.microbatches;
    }
    bg_status_t status = BG_OK;
    if (!sim.activation_ready || !sim.gradient_ready || !sim.forward_done || !sim.backward_done ||
        !sim.forward_link || !sim.backward_link || !sim.device_free || !sim.pc || !sim.pending ||
        !sim.last_gradient_mb || !sim.ring || !sim.slot_free || !sim.held || !sim.free_heap ||
        !sim.free_count || !sim.last_busy || !sim.busy || !sim.busy_count || !sim.busy_kept)
        status = bg_error_set(BG_ERR_NOMEM, "simulator: out of memory");
    double origin = tl->steps > 0 ? tl->step_end[tl->steps - 1] : 0;
    const int contention = contended(schedule, costs);
    if (status == BG_OK && (contention || sim.after_wait != NULL)) {
        if (contention) {
            sim.stretch = malloc(sizeof(double) * STRETCH_KINDS * cells);
            if (sim.stretch == NULL)
                status = bg_error_set(BG_ERR_NOMEM, "simulator: out of memory");
            for (size_t i = 0; sim.stretch != NULL && i < STRETCH_KINDS * cells; i++)
                sim.stretch[i] = 1;
        }
        /* Each pass simulates a step into tl and takes it back out; it
         * leaves its ops and the devices' last busy times to the next. */
        const int count = tl->count, recorded = tl->steps;
        for (int pass = 0; status == BG_OK && pass < BG_SIM_SETTLING_PASSES; pass++) {
            status = run_step(&sim, tl->steps, origin, tl);
            if (status == BG_OK && contention) status = settle_stretch(&sim, tl, count, tl->count);
            tl->count = count;
            tl->steps = recorded;
        }
    }
    for (int k = 0; status == BG_OK && k < steps; k++) {
        status = run_step(&sim, tl->steps, origin, tl);
        if (status == BG_OK) origin = tl->step_end[tl->steps - 1];
    }
    free(sim.activation_ready);
    free(sim.gradient_ready);
    free(sim.forward_done);
    free(sim.backward_done);
    free(sim.forward_link);
    free(sim.backward_link);
    free(sim.device_free);
    free(sim.pc);
    free(sim.pending);
    free(sim.last_gradient_mb);
    free(sim.ring);
    free(sim.slot_free);
    free(sim.held);
    free(sim.free_heap);
    free(sim.free_count);
    free(sim.stretch);
    free(sim.last_busy);
    free(sim.busy);
    free(sim.busy_count);
    free(sim.busy_kept);
    return status;
}
