#include "simulator.h"

#include <math.h>
#include <stdlib.h>

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
} sim_state_t;

static double cost(const double *array, int index) { return array != NULL ? array[index] : 0; }

static int device_of(const sim_state_t *st, int stage) { return stage % st->schedule->devices; }

/* Earliest time the op's inputs are all there, or -1 if one is missing. */
static double inputs_ready(const sim_state_t *st, const bg_op_t *op) {
    const int at = op->stage * st->microbatches + op->microbatch;
    switch (op->kind) {
    case BG_OP_FORWARD: return op->stage == 0 ? 0 : st->activation_ready[at];
    case BG_OP_BACKWARD: {
        double own = st->forward_done[at];
        if (own < 0) return -1;
        if (op->stage == st->stages - 1) return own;
        double grad = st->gradient_ready[at];
        return grad < 0 ? -1 : fmax(own, grad);
    }
    case BG_OP_WEIGHT: return st->backward_done[at];
    case BG_OP_STEP: return 0;
    }
    return -1;
}

static double duration(const sim_state_t *st, const bg_op_t *op, int device) {
    const bg_sim_costs_t *c = st->costs;
    switch (op->kind) {
    case BG_OP_FORWARD: return c->forward[op->stage];
    case BG_OP_BACKWARD: return c->backward[op->stage] + cost(c->recompute, op->stage);
    case BG_OP_WEIGHT: return cost(c->weight, op->stage) + cost(c->recompute, op->stage);
    case BG_OP_STEP: return cost(c->step, device);
    }
    return 0;
}

/* Ships an op's output: records when it reaches the neighbour stage. */
static void send_output(sim_state_t *st, const bg_op_t *op, double end) {
    const int s = op->stage, at = s * st->microbatches + op->microbatch;
    if (op->kind == BG_OP_FORWARD && s + 1 < st->stages) {
        double arrival = end;
        if (device_of(st, s) != device_of(st, s + 1)) {
            double start = fmax(end, st->forward_link[s]);
            arrival = start + st->costs->activation_transfer[s];
            st->forward_link[s] = arrival;
        }
        st->activation_ready[at + st->microbatches] = arrival;
    } else if (op->kind == BG_OP_BACKWARD && s > 0) {
        double arrival = end;
        if (device_of(st, s) != device_of(st, s - 1)) {
            double start = fmax(end, st->backward_link[s - 1]);
            arrival = start + st->costs->gradient_transfer[s - 1];
            st->backward_link[s - 1] = arrival;
        }
        st->gradient_ready[at - st->microbatches] = arrival;
    }
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
static int waited_peer(const sim_state_t *st, const bg_op_t *op) {
    if (op->kind == BG_OP_FORWARD && op->stage > 0) return op->stage - 1;
    if (op->kind == BG_OP_BACKWARD && op->stage + 1 < st->stages) return op->stage + 1;
    return -1;
}

static bg_status_t run_step(sim_state_t *st, int step, double origin, bg_timeline_t *tl) {
    const bg_schedule_t *sc = st->schedule;
    const int cells = st->stages * st->microbatches;
    for (int i = 0; i < cells; i++) {
        st->activation_ready[i] = st->gradient_ready[i] = -1;
        st->forward_done[i] = st->backward_done[i] = -1;
    }
    for (int b = 0; b + 1 < st->stages; b++) st->forward_link[b] = st->backward_link[b] = origin;
    for (int d = 0; d < sc->devices; d++) {
        st->device_free[d] = origin;
        st->pc[d] = 0;
    }
    for (;;) {
        /* Commit the op that can start earliest: events then happen in time
         * order, so links are granted in the order transfers are ready. */
        int best = -1;
        double best_start = INFINITY, best_ready = 0;
        for (int d = 0; d < sc->devices; d++) {
            if (st->pc[d] >= sc->op_counts[d]) continue;
            double ready = inputs_ready(st, &sc->ops[d][st->pc[d]]);
            if (ready < 0) continue;
            ready = fmax(ready, origin);
            double start = fmax(st->device_free[d], ready);
            if (start < best_start) {
                best_start = start;
                best_ready = ready;
                best = d;
            }
        }
        if (best < 0) break;
        const bg_op_t *op = &sc->ops[best][st->pc[best]++];
        int peer = waited_peer(st, op);
        if (best_ready > st->device_free[best] && peer >= 0)
            BG_CHECK(
                bg_timeline_add(tl, &(bg_event_t){BG_EVENT_WAIT, best, op->stage, op->microbatch,
                                                  peer, step, st->device_free[best], best_ready}));
        double end = best_start + duration(st, op, best);
        BG_CHECK(bg_timeline_add(tl, &(bg_event_t){event_kind(op->kind), best,
                                                   op->kind == BG_OP_STEP ? best : op->stage,
                                                   op->microbatch, -1, step, best_start, end}));
        st->device_free[best] = end;
        if (op->kind != BG_OP_STEP) {
            const int at = op->stage * st->microbatches + op->microbatch;
            if (op->kind == BG_OP_FORWARD) st->forward_done[at] = end;
            if (op->kind == BG_OP_BACKWARD) st->backward_done[at] = end;
            send_output(st, op, end);
        }
    }
    double end = origin;
    for (int d = 0; d < sc->devices; d++) {
        if (st->pc[d] < sc->op_counts[d])
            return bg_error_set(BG_ERR_INTERNAL, "simulator: device %d stuck at op %d", d,
                                st->pc[d]);
        end = fmax(end, st->device_free[d]);
    }
    BG_CHECK(bg_timeline_reserve(tl, 0));
    bg_timeline_add_step(tl, origin, end);
    return BG_OK;
}

static bg_status_t check_costs(const bg_schedule_t *sc, const bg_sim_costs_t *c) {
    const double *arrays[] = {c->forward, c->backward, c->weight, c->recompute};
    const char *names[] = {"forward", "backward", "weight", "recompute"};
    if (c->forward == NULL || c->backward == NULL)
        return bg_error_set(BG_ERR_INVALID, "simulator: forward and backward costs are required");
    if (sc->stages > 1 && (c->activation_transfer == NULL || c->gradient_transfer == NULL))
        return bg_error_set(BG_ERR_INVALID, "simulator: transfer costs are required");
    for (int a = 0; a < 4; a++)
        for (int s = 0; arrays[a] != NULL && s < sc->stages; s++)
            if (!isfinite(arrays[a][s]) || arrays[a][s] < 0)
                return bg_error_set(BG_ERR_INVALID, "simulator: %s cost of stage %d is %g",
                                    names[a], s, arrays[a][s]);
    for (int b = 0; b + 1 < sc->stages; b++)
        if (!isfinite(c->activation_transfer[b]) || c->activation_transfer[b] < 0 ||
            !isfinite(c->gradient_transfer[b]) || c->gradient_transfer[b] < 0)
            return bg_error_set(BG_ERR_INVALID, "simulator: transfer cost %d is negative", b);
    for (int d = 0; c->step != NULL && d < sc->devices; d++)
        if (!isfinite(c->step[d]) || c->step[d] < 0)
            return bg_error_set(BG_ERR_INVALID, "simulator: step cost of device %d is %g", d,
                                c->step[d]);
    return BG_OK;
}

bg_status_t bg_simulate(const bg_schedule_t *schedule, const bg_sim_costs_t *costs, int steps,
                        bg_timeline_t *tl) {
    if (tl->devices != schedule->devices || tl->stages != schedule->stages)
        return bg_error_set(BG_ERR_INVALID,
                            "simulator: timeline of %d devices/%d stages for a "
                            "schedule of %d/%d",
                            tl->devices, tl->stages, schedule->devices, schedule->stages);
    BG_CHECK(check_costs(schedule, costs));
    sim_state_t st = {.schedule = schedule,
                      .costs = costs,
                      .stages = schedule->stages,
                      .microbatches = schedule->microbatches};
    const size_t cells = (size_t)st.stages * (size_t)st.microbatches;
    st.activation_ready = malloc(sizeof(double) * cells);
    st.gradient_ready = malloc(sizeof(double) * cells);
    st.forward_done = malloc(sizeof(double) * cells);
    st.backward_done = malloc(sizeof(double) * cells);
    st.forward_link = calloc((size_t)st.stages, sizeof(double));
    st.backward_link = calloc((size_t)st.stages, sizeof(double));
    st.device_free = calloc((size_t)schedule->devices, sizeof(double));
    st.pc = calloc((size_t)schedule->devices, sizeof(int));
    bg_status_t status = BG_OK;
    if (!st.activation_ready || !st.gradient_ready || !st.forward_done || !st.backward_done ||
        !st.forward_link || !st.backward_link || !st.device_free || !st.pc)
        status = bg_error_set(BG_ERR_NOMEM, "simulator: out of memory");
    double origin = tl->steps > 0 ? tl->step_end[tl->steps - 1] : 0;
    for (int k = 0; status == BG_OK && k < steps; k++) {
        status = run_step(&st, tl->steps, origin, tl);
        if (status == BG_OK) origin = tl->step_end[tl->steps - 1];
    }
    free(st.activation_ready);
    free(st.gradient_ready);
    free(st.forward_done);
    free(st.backward_done);
    free(st.forward_link);
    free(st.backward_link);
    free(st.device_free);
    free(st.pc);
    return status;
}
