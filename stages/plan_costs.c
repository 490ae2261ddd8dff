/* From a plan to the simulator: per-stage durations and a predicted run. */
#include <stdlib.h>

#include "planner.h"

_Static_assert((int)BG_NEIGHBOUR_FORWARD == (int)BG_SIM_AFTER_FORWARD &&
                   (int)BG_NEIGHBOUR_BACKWARD == (int)BG_SIM_AFTER_BACKWARD &&
                   (int)BG_NEIGHBOUR_UPDATE == (int)BG_SIM_AFTER_STEP &&
                   (int)BG_NEIGHBOUR_KINDS == (int)BG_SIM_AFTER_KINDS,
               "the profile's after-wait kinds are the simulator's");

void bg_plan_costs_destroy(bg_plan_costs_t *c) {
    if (c == NULL) return;
    free(c->forward); /* the one block every array but after_wait is in */
    free(c->after_wait);
    free(c);
}

bg_status_t bg_plan_costs_create(const bg_plan_t *plan, bg_plan_costs_t **out) {
    const bg_partition_t *part = plan->partition;
    const int stages = part->stages;
    const size_t n = (size_t)stages, links = n > 1 ? n - 1 : 1;
    const int split = plan->schedule->split_backward;
    bg_plan_costs_t *c = calloc(1, sizeof *c);
    if (c == NULL) return bg_error_set(BG_ERR_NOMEM, "planner: out of memory");
    /* The arrays of doubles, in one block: 7 of a stage each, 8 of a
     * boundary each. */
    double *block = calloc(7 * n + 8 * links, sizeof(double));
    c->after_wait = calloc(n, sizeof *c->after_wait);
    if (block == NULL || c->after_wait == NULL) {
        free(block);
        bg_plan_costs_destroy(c);
        return bg_error_set(BG_ERR_NOMEM, "planner: out of memory for %d stages' costs", stages);
    }
    double **per_stage[] = {&c->forward, &c->backward,     &c->weight,    &c->recompute,
                            &c->step,    &c->weight_check, &c->contention};
    double **per_boundary[] = {&c->activation_transfer, &c->gradient_transfer, &c->activation_send,
                               &c->activation_recv,     &c->gradient_send,     &c->gradient_recv,
                               &c->activation_check,    &c->gradient_check};
    for (size_t k = 0; k < sizeof per_stage / sizeof per_stage[0]; k++, block += n)
        *per_stage[k] = block;
    for (size_t k = 0; k < sizeof per_boundary / sizeof per_boundary[0]; k++, block += links)
        *per_boundary[k] = block;
    /* Stages the profile timed as stages of their own, with the plan's
     * stash slots, take those times; others the sums over their layers. */
    bg_cost_measured_stage_t *measured = calloc(n, sizeof *measured);
    int *found = calloc(n, sizeof *found);
    if (measured == NULL || found == NULL) {
        free(measured);
        free(found);
        bg_plan_costs_destroy(c);
        return bg_error_set(BG_ERR_NOMEM, "planner: out of memory");
    }
    for (int s = 0; s < stages; s++) {
        const bg_partition_stage_t *ps = &part->stage[s];
        found[s] = bg_cost_measured_stage(plan->model, ps->first_layer, ps->last_layer,
                                          plan->stash_slots[s], &measured[s]);
        const bg_cost_time_t *t = found[s] ? &measured[s].time : &ps->time;
        c->forward[s] = t->forward;
        c->backward[s] = split ? t->backward - t->weight : t->backward;
        /* The difference of two sums of the same terms may round below 0. */
        if (c->backward[s] < 0) c->backward[s] = 0;
        c->weight[s] = split ? t->weight : 0;
        /* Per op that recomputes: B, and W when split (the cost model's
         * split is the schedule's). */
        c->recompute[s] = split ? t->recompute / 2 : t->recompute;
        c->contention[s] = found[s] ? measured[s].contention : 0;
        /* The neighbour's forward, backward and update are the other
         * device's F, B (or W) and STEP. */
        for (int k = 0; found[s] && k < BG_NEIGHBOUR_KINDS; k++) {
            c->after_wait[s].forward[k] = measured[s].after_wait.forward[k];
            c->after_wait[s].backward[k] = measured[s].after_wait.backward[k];
        }
        c->step[s] = t->update;
        c->weight_check[s] = t->check;
    }
    for (int b = 0; b + 1 < stages; b++) {
        /* Each direction over the link between the two stages' devices. */
        const bg_cost_link_t *ahead = bg_plan_link(plan, b, b + 1),
                             *back = bg_plan_link(plan, b + 1, b);
        const int layer = part->stage[b + 1].first_layer;
        bg_cost_crossing_t x = bg_cost_boundary_crossing(plan->model, ahead, layer);
        bg_cost_crossing_t y = bg_cost_boundary_crossing(plan->model, back, layer);
        c->activation_transfer[b] = x.link_s;
        c->activation_send[b] = x.send_s;
        c->activation_recv[b] = x.recv_s;
        if (!plan->request.forward_only) { /* an evaluation sends no gradients */
            c->gradient_transfer[b] = y.link_s;
            c->gradient_send[b] = y.send_s;
            c->gradient_recv[b] = y.recv_s;
        }
        /* Copies the devices make: as the two stages made them when timed. */
        if (ahead->copy_bytes_per_s > 0 && found[b] && found[b + 1]) {
            c->activation_send[b] = measured[b].send_s;
            c->activation_recv[b] = measured[b + 1].recv_s;
            c->gradient_send[b] = measured[b + 1].grad_send_s;
            c->gradient_recv[b] = measured[b].grad_recv_s;
            c->activation_check[b] = measured[b].check_s;
            c->gradient_check[b] = measured[b + 1].grad_check_s;
        }
    }
    free(measured);
    free(found);
    c->sim = (bg_sim_costs_t){
        .forward = c->forward,
        .backward = c->backward,
        .weight = c->weight,
        .recompute = c->recompute,
        .activation_transfer = c->activation_transfer,
        .gradient_transfer = c->gradient_transfer,
        .activation_send = c->activation_send,
        .activation_recv = c->activation_recv,
        .gradient_send = c->gradient_send,
        .gradient_recv = c->gradient_recv,
        .activation_check = c->activation_check,
        .gradient_check = c->gradient_check,
        .step = c->step,
        .weight_check = c->weight_check,
        .contention = c->contention,
        .after_wait = c->after_wait,
        .wake_s = plan->request.link.wake_s,
        .handoff_s = plan->request.link.handoff_s,
    };
    *out = c;
    return BG_OK;
}

bg_status_t bg_plan_simulated_step(const bg_plan_t *plan, double *seconds) {
    bg_timeline_t *tl = NULL;
    BG_CHECK(bg_plan_simulate(plan, 1, &tl));
    *seconds = tl->step_end[0] - tl->step_start[0];
    bg_timeline_destroy(tl);
    return BG_OK;
}

bg_status_t bg_plan_simulate(const bg_plan_t *plan, int steps, bg_timeline_t **out) {
    if (steps < 1) return bg_error_set(BG_ERR_INVALID, "simulate: %d steps (need >= 1)", steps);
    const bg_plan_request_t *r = &plan->request;
    const char **names = calloc((size_t)r->devices, sizeof *names);
    if (names == NULL) return bg_error_set(BG_ERR_NOMEM, "planner: out of memory");
    for (int d = 0; d < r->devices; d++) names[d] = plan->device[d].name;
    bg_timeline_config_t tc = {
        .schedule = r->schedule,
        .devices = r->devices,
        .stages = plan->partition->stages,
        .chunks = r->chunks,
        .microbatches = r->microbatches,
        .device_names = names,
        .measured = 0,
    };
    bg_plan_costs_t *costs = NULL;
    bg_timeline_t *tl = NULL;
    bg_status_t st;
    BG_CHECK_GOTO(bg_plan_costs_create(plan, &costs), st, done);
    BG_CHECK_GOTO(bg_timeline_create(&tc, &tl), st, done);
    BG_CHECK_GOTO(bg_simulate(plan->schedule, &costs->sim, steps, tl), st, done);
    *out = tl;
    tl = NULL;
done:
    bg_timeline_destroy(tl);
    bg_plan_costs_destroy(costs);
    free(names);
    return st;
}
