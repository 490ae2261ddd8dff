#include "planner.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void bg_plan_destroy(bg_plan_t *p) {
    if (p == NULL) return;
    bg_partition_destroy(p->partition);
    bg_cost_model_destroy(p->model);
    bg_schedule_destroy(p->schedule);
    free(p->device);
    free(p->links);
    free(p->stash_slots);
    free(p->first_layer);
    free(p);
}

/* Makes `part` (owned from here) the plan's partition, minimising
 * `objective` (or given), and derives what follows from it: the split, the
 * predicted step, update and bubble, and the simulated step when it fits.
 * The previous partition, if any, is the caller's. */
static bg_status_t plan_adopt(bg_plan_t *p, bg_partition_t *part,
                              bg_partition_objective_t objective) {
    const bg_plan_request_t *r = &p->request;
    const int k = r->devices;
    p->partition = part;
    p->config.objective = objective;
    for (int s = 0; s < part->stages; s++) p->first_layer[s] = part->stage[s].first_layer;
    p->step_s = bg_partition_step_seconds(part, &p->config);
    /* Busy as a run's report counts it: computing or copying; a crossing's
     * link part (a copy engine's, or the hand-over between threads) is the
     * devices' idle time. */
    double busy = 0;
    for (int s = 0; s < part->stages; s++) busy += part->stage[s].seconds - part->stage[s].send_s;
    for (int b = 0; b + 1 < part->stages; b++) {
        const int layer = part->stage[b + 1].first_layer;
        const bg_cost_crossing_t x = bg_cost_boundary_crossing(p->model, bg_plan_link(p, b, b + 1),
                                                               layer),
                                 y = bg_cost_boundary_crossing(p->model, bg_plan_link(p, b + 1, b),
                                                               layer);
        busy += x.send_s + x.recv_s + (r->forward_only ? 0 : y.send_s + y.recv_s);
    }
    busy *= r->microbatches;
    p->update_s = 0;
    for (int d = 0; d < k; d++) {
        double update = 0;
        for (int s = d; s < part->stages; s += k)
            update += part->stage[s].time.update + part->stage[s].time.check;
        if (update > p->update_s) p->update_s = update;
        busy += update;
    }
    /* Over the whole step, the optimizer step included, as a run's report
     * measures it. The estimate's sends (bytes over the link's bandwidth)
     * and a profile's measured copies can disagree: kept within 0..1. */
    const double whole = p->step_s + p->update_s;
    p->bubble = whole > 0 ? fmin(1, fmax(0, 1 - busy / (k * whole))) : 0;
    p->simulated_step_s = 0;
    return part->fits ? bg_plan_simulated_step(p, &p->simulated_step_s) : BG_OK;
}

bg_status_t bg_plan_cost_model_create(const bg_plan_request_t *r, bg_cost_model_t **out) {
    bg_cost_config_t cc = BG_COST_CONFIG_INIT;
    cc.spec = r->spec;
    cc.batch = r->batch;
    cc.microbatches = r->microbatches;
    cc.optimizer = r->optimizer;
    cc.recompute = r->recompute;
    cc.forward_only = r->forward_only;
    cc.split_backward = bg_schedule_splits_backward(r->schedule, 0); /* a training schedule's */
    cc.profile = r->profile;
    bg_cost_model_t *model = NULL;
    BG_CHECK(bg_cost_model_create(&cc, &model));
    const bg_status_t st = bg_cost_model_prepare(model, r->device, r->devices);
    if (st != BG_OK) {
        bg_cost_model_destroy(model);
        return st;
    }
    *out = model;
    return BG_OK;
}

/* Whether `a` seconds (a step, a slowest stage) beat `b`: within rounding
 * of each other the earlier candidate stays. */
static int faster(double a, double b) { return a < b * (1 - 1e-9); }

/* With V > 1 the programme holds each stage to 1/V of its device, but a
 * device may hold uneven stages as long as its V stages together fit it,
 * the check a given --split gets. Where the programme's split does not fit,
 * the search per device looks for the fastest split that fits so; *part
 * becomes what it finds. Where it stopped at its budget without one, the
 * programme's split (the least overflow) is checked per device as well.
 * (Where the programme's split fits, plan_try_device_search compares.) */
static bg_status_t plan_check_per_device(bg_plan_t *p, bg_partition_t **part) {
    if (p->request.chunks == 1) return BG_OK;
    p->even_split_fits = (*part)->fits;
    if ((*part)->fits) return BG_OK;
    bg_partition_config_t whole = p->config;
    whole.memory_check = BG_PARTITION_CHECK_DEVICES;
    bg_partition_t *per_device = NULL;
    int complete = 0;
    bg_status_t st = bg_partition_search_devices(&whole, DBL_MAX, BG_PLAN_DEVICE_SEARCH_BUDGET,
                                                 &per_device, &complete);
    p->device_search = complete ? BG_PLAN_DEVICES_SEARCHED : BG_PLAN_DEVICES_STOPPED;
    if (st == BG_OK && per_device == NULL && !complete) {
        const int stages = (*part)->stages;
        for (int s = 0; s < stages; s++) p->first_layer[s] = (*part)->stage[s].first_layer;
        st = bg_partition_evaluate(&whole, p->first_layer, &per_device);
    }
    if (st != BG_OK) {
        bg_partition_destroy(*part);
        *part = NULL;
        return st;
    }
    if (per_device == NULL) return BG_OK;
    if (!per_device->fits) {
        bg_partition_destroy(per_device);
        return BG_OK;
    }
    bg_partition_destroy(*part);
    *part = per_device;
    return BG_OK;
}

/* Builds the schedule, the cost model and the partition (the slowest
 * stage's, or the given split) of an allocated plan whose request is set. */
static bg_status_t plan_fill(bg_plan_t *p) {
    const bg_plan_request_t *r = &p->request;
    const int k = r->devices, stages = r->devices * r->chunks;
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.kind = r->schedule;
    sc.devices = k;
    sc.chunks = r->chunks;
    sc.microbatches = r->microbatches;
    sc.forward_only = r->forward_only; /* an evaluation's: F ops alone, as it runs them */
    BG_CHECK(bg_schedule_create(&sc, &p->schedule));
    p->stash_slots = calloc((size_t)stages, sizeof *p->stash_slots);
    p->first_layer = calloc((size_t)stages, sizeof *p->first_layer);
    p->device = calloc((size_t)k, sizeof *p->device);
    if (p->stash_slots == NULL || p->first_layer == NULL || p->device == NULL)
        return bg_error_set(BG_ERR_NOMEM, "planner: out of memory for %d stages", stages);
    for (int s = 0; s < stages; s++) { /* a valid schedule: -1 is out of memory */
        p->stash_slots[s] = bg_schedule_stash_slots(p->schedule, s);
        if (p->stash_slots[s] < 0) return bg_error_prefix(BG_ERR_NOMEM, "planner: ");
        if (r->forward_only) p->stash_slots[s] = 1; /* as bg_pipeline_create has it */
    }
    memcpy(p->device, r->device, sizeof *p->device * (size_t)k);
    if (r->links != NULL) {
        p->links = malloc(sizeof *p->links * (size_t)(k * k));
        if (p->links == NULL) return bg_error_set(BG_ERR_NOMEM, "planner: out of memory");
        memcpy(p->links, r->links, sizeof *p->links * (size_t)(k * k));
    }

    BG_CHECK(bg_plan_cost_model_create(r, &p->model));

    bg_partition_config_t pc = BG_PARTITION_CONFIG_INIT;
    pc.model = p->model;
    pc.devices = k;
    pc.chunks = r->chunks;
    pc.device = p->device;
    pc.link = r->link;
    pc.links = p->links;
    pc.stash_slots = p->stash_slots;
    pc.fits_only = r->fits_only;
    p->config = pc;
    p->bubble_theory = bg_schedule_theoretical_bubble(r->schedule, k, r->microbatches, r->chunks);
    bg_partition_t *part = NULL;
    if (r->split != NULL) {
        /* The user's --split: checked, and named in the message, as the
         * pipeline checks it. Its memory is checked as a device holds it,
         * its V stages together; the search's 1/V of the device a stage
         * would refuse splits that fit. */
        BG_CHECK(bg_model_spec_check_split(r->spec, stages, r->split, NULL));
        p->first_layer[0] = 0;
        for (int s = 1; s < stages; s++) p->first_layer[s] = r->split[s - 1];
        p->config.memory_check = BG_PARTITION_CHECK_DEVICES;
        BG_CHECK(bg_partition_evaluate(&p->config, p->first_layer, &part));
    } else {
        BG_CHECK(bg_partition_create(&p->config, &part));
        BG_CHECK(plan_check_per_device(p, &part));
    }
    /* r is p->request: the split is read above, before it points here. */
    p->request.device = p->device;
    p->request.links = p->links;
    p->request.path_device = NULL; /* the caller's, and a plan has one chain */
    p->request.path_links = NULL;
    p->request.split = r->split != NULL ? p->first_layer + 1 : NULL;
    return plan_adopt(p, part, BG_PARTITION_SLOWEST_STAGE);
}

/* How far plan p's fullest device is over its memory: its stages' peaks
 * together less their capacities together (stage s on device s mod K), so
 * that interleaved's stages, checked each against 1/V of a device, compare
 * with one-chunk plans' (a tester found interleaved chosen as overflowing
 * least at 2.56 MB a stage, its device 4.24 MB over, against 1F1B's
 * 3.81). 0 where it fits. */
static size_t device_overflow(const bg_plan_t *p) {
    const bg_partition_t *part = p->partition;
    const int k = p->request.devices;
    if (part->fits) return 0;
    if (p->request.chunks == 1 || part->memory_check == BG_PARTITION_CHECK_DEVICES)
        return part->overflow_bytes;
    size_t most = 0;
    for (int d = 0; d < k; d++) {
        size_t peak = 0, capacity = 0;
        for (int s = d; s < part->stages; s += k) {
            peak += part->stage[s].peak_bytes;
            capacity += part->stage[s].capacity_bytes;
        }
        if (peak > capacity && peak - capacity > most) most = peak - capacity;
    }
    return most;
}

/* 1 if a is a better choice than b (NULL: none yet); plans that fit carry
 * their simulated step (same batch: the shorter is the faster); of two
 * that do not, the one whose fullest device overflows less. */
static int better(const bg_plan_t *a, const bg_plan_t *b) {
    if (b == NULL) return 1;
    if (a->partition->fits != b->partition->fits) return a->partition->fits;
    if (a->partition->fits) return faster(a->simulated_step_s, b->simulated_step_s);
    return device_overflow(a) < device_overflow(b);
}

static int same_split(const bg_partition_t *a, const bg_partition_t *b) {
    for (int s = 0; s < a->stages; s++)
        if (a->stage[s].first_layer != b->stage[s].first_layer) return 0;
    return 1;
}

/* Makes `candidate` (owned from here) the plan's partition, for
 * `objective`, where its simulated step beats the plan's; else the plan
 * goes back to its partition (on a tie too: the earlier stays). *kept says
 * which, *candidate_step the candidate's simulated step. */
static bg_status_t plan_try_partition(bg_plan_t *p, bg_partition_t *candidate,
                                      bg_partition_objective_t objective, int *kept,
                                      double *candidate_step) {
    bg_partition_t *current = p->partition;
    const bg_partition_objective_t was = p->config.objective;
    const double current_step = p->simulated_step_s;
    const bg_status_t st = plan_adopt(p, candidate, objective);
    *candidate_step = p->simulated_step_s;
    *kept = st == BG_OK && faster(*candidate_step, current_step);
    if (*kept) {
        bg_partition_destroy(current);
        return BG_OK;
    }
    bg_partition_destroy(candidate);
    /* Re-simulating the plan's own partition gives the same step. */
    const bg_status_t back = plan_adopt(p, current, was);
    return st != BG_OK ? st : back;
}

/* The slowest stage sets the step when M is large; with few micro-batches
 * a split with a larger slowest stage but a smaller total can be faster
 * (at M = 1 the least total is). When the plan's partition (the slowest
 * stage's) fits and the least predicted step's (BG_PARTITION_LEAST_STEP)
 * differs, simulates that too and keeps the faster; on a tie the slowest
 * stage's. Either way notes the other's simulated step. Same schedule and
 * cost model: only the partition and what derives from it change. */
static bg_status_t plan_try_least_step(bg_plan_t *p) {
    bg_partition_config_t pc = p->config;
    pc.objective = BG_PARTITION_LEAST_STEP;
    /* Within 0.1%: far below what the simulation decides by, and a few
     * times fewer programmes on deep models (docs/planner.md). */
    pc.step_tolerance = 1e-3;
    /* Found already, unless the search per device replaced it: the search
     * starts from it. */
    pc.slowest = p->partition->memory_check == BG_PARTITION_CHECK_STAGES ? p->partition : NULL;
    bg_partition_t *least = NULL, *slowest = p->partition;
    const bg_status_t searched = bg_partition_create(&pc, &least);
    /* Its tables can outgrow memory where the slowest stage's did not: the
     * plan stands without the comparison, and says so. */
    if (searched == BG_ERR_NOMEM) {
        bg_error_clear();
        p->least_step_skipped = 1;
        return BG_OK;
    }
    BG_CHECK(searched);
    if (!least->fits || same_split(least, slowest)) {
        bg_partition_destroy(least);
        return BG_OK;
    }
    const double slowest_step = p->simulated_step_s;
    int kept = 0;
    double least_step = 0;
    const bg_status_t st =
        plan_try_partition(p, least, BG_PARTITION_LEAST_STEP, &kept, &least_step);
    p->other_split_step_s = kept ? slowest_step : least_step;
    return st;
}

/* With V > 1, a search per device (bg_partition_search_devices) for
 * `objective`: the slowest stage (bounded by the plan's, within rounding:
 * one as slow may predict a shorter step) or the least predicted step.
 * Where the split it finds is predicted faster than the plan's, it is
 * simulated and kept if its simulated step is shorter, as
 * plan_try_least_step does: the programme and its least step hold each
 * stage to 1/V of its device and miss splits that fit as a device holds
 * its stages, and a prediction alone can mislead (docs/planner.md).
 * other_split_step_s, of the other objective's split, becomes the plan's
 * old step where the found split of the other objective is kept, or the
 * found split's where that is not kept and beats the one noted. */
static bg_status_t plan_try_device_search(bg_plan_t *p, bg_partition_objective_t objective) {
    bg_partition_config_t pc = p->config;
    pc.objective = objective;
    pc.memory_check = BG_PARTITION_CHECK_DEVICES;
    const int by_step = objective == BG_PARTITION_LEAST_STEP;
    bg_partition_t *current = p->partition, *found = NULL;
    const double predicted = bg_partition_step_seconds(current, &pc);
    const double bound = by_step ? predicted : current->bottleneck_s * (1 + 1e-9);
    int complete = 0;
    const bg_status_t searched =
        bg_partition_search_devices(&pc, bound, BG_PLAN_DEVICE_SEARCH_BUDGET, &found, &complete);
    /* Out of memory the plan stands without it, as without the least
     * step's programme; it is counted as stopped. */
    if (searched == BG_ERR_NOMEM) {
        bg_error_clear();
        p->device_search = BG_PLAN_DEVICES_STOPPED;
        return BG_OK;
    }
    BG_CHECK(searched);
    if (!complete || p->device_search == BG_PLAN_DEVICES_STOPPED)
        p->device_search = BG_PLAN_DEVICES_STOPPED;
    else
        p->device_search = BG_PLAN_DEVICES_SEARCHED;
    const int better = found != NULL && !same_split(found, current) &&
                       (faster(bg_partition_step_seconds(found, &pc), predicted) ||
                        (!by_step && faster(found->bottleneck_s, current->bottleneck_s)));
    if (!better) {
        bg_partition_destroy(found);
        return BG_OK;
    }
    const int other_objective = objective != p->config.objective;
    const double current_step = p->simulated_step_s;
    int kept = 0;
    double found_step = 0;
    const bg_status_t st = plan_try_partition(p, found, objective, &kept, &found_step);
    if (other_objective && kept) p->other_split_step_s = current_step;
    if (other_objective && !kept &&
        (p->other_split_step_s == 0 || found_step < p->other_split_step_s))
        p->other_split_step_s = found_step;
    return st;
}

/* The number of ways to choose k of n, or most + 1 once past most: C(n -
 * k + i, i) grows with i, so the first past it says. */
static long choices_up_to(int n, int k, long most) {
    if (k < 0 || k > n) return 0;
    long count = 1;
    for (int i = 1; i <= k; i++) {
        count = count * (n - k + i) / i; /* exact: C(n - k + i, i) */
        if (count > most) return most + 1;
    }
    return count;
}

/* Moves pick[0..k) (increasing, below n) to the next choice in order; 0
 * after the last. */
static int next_choice(int *pick, int k, int n) {
    int i = k - 1;
    while (i >= 0 && pick[i] == n - k + i) i--;
    if (i < 0) return 0;
    pick[i]++;
    for (int j = i + 1; j < k; j++) pick[j] = pick[j - 1] + 1;
    return 1;
}

/* A small model's every split (BG_PLAN_EVERY_SPLIT_MAX, or up to
 * BG_PLAN_EVERY_SPLIT_MORE as BG_PLAN_EVERY_SPLIT_WORK allows at its stages
 * and M; none starting a stage inside a residual block), checked as a device holds
 * its stages and simulated where it fits: the fastest becomes the plan's
 * (on a tie, the searches' split stays). The searches above predict the
 * step; this settles it by the simulation. Out of memory, the plan stands
 * as the searches left it (splits_simulated 0), as it does without the
 * least step's search. */
static bg_status_t plan_simulate_every_split(bg_plan_t *p) {
    const bg_plan_t before = *p; /* what plan_adopt changes, for a failure */
    const int stages = p->partition->stages, layers = p->request.spec->num_layers;
    const int k = stages - 1;
    int *start = malloc(sizeof *start * (size_t)layers), *pick = malloc(sizeof *pick * (size_t)k),
        *first = malloc(sizeof *first * (size_t)stages);
    bg_status_t st = BG_OK;
    if (start == NULL || pick == NULL || first == NULL) {
        st = bg_error_set(BG_ERR_NOMEM, "planner: out of memory for %d layers", layers);
        goto done;
    }
    int n = 0;
    for (int l = 1; l < layers; l++)
        if (bg_cost_model_cut_index(p->model, l) >= 0) start[n++] = l;
    const long cheap = BG_PLAN_EVERY_SPLIT_WORK / ((long)stages * p->request.microbatches);
    const long most = cheap <= BG_PLAN_EVERY_SPLIT_MAX    ? BG_PLAN_EVERY_SPLIT_MAX
                      : cheap >= BG_PLAN_EVERY_SPLIT_MORE ? BG_PLAN_EVERY_SPLIT_MORE
                                                          : cheap;
    const long count = choices_up_to(n, k, most);
    if (count > most) goto done;
    bg_partition_config_t pc = p->config;
    pc.memory_check =
        p->request.chunks > 1 ? BG_PARTITION_CHECK_DEVICES : BG_PARTITION_CHECK_STAGES;
    bg_partition_t *chosen = p->partition, *best = p->partition;
    const bg_partition_objective_t objective = p->config.objective;
    const double chosen_step = chosen->fits ? p->simulated_step_s : DBL_MAX;
    double best_step = chosen_step;
    int fitting = 0, more = 1;
    for (int i = 0; i < k; i++) pick[i] = i;
    for (; more && st == BG_OK; more = next_choice(pick, k, n)) {
        first[0] = 0;
        for (int i = 0; i < k; i++) first[i + 1] = start[pick[i]];
        bg_partition_t *part = NULL;
        st = bg_partition_evaluate(&pc, first, &part);
        if (st == BG_OK && part->fits) fitting++;
        if (st == BG_OK && part->fits && !same_split(part, chosen)) {
            st = plan_adopt(p, part, objective); /* simulates it */
            if (st == BG_OK && faster(p->simulated_step_s, best_step)) {
                if (best != chosen) bg_partition_destroy(best);
                best = part;
                best_step = p->simulated_step_s;
                part = NULL;
            }
        }
        bg_partition_destroy(part);
    }
    /* The plan's partition is the best again (or, on an error, the
     * searches' split, its one owner, and what derives from it). */
    if (st == BG_OK) st = plan_adopt(p, best, objective);
    if (st != BG_OK) {
        if (best != chosen) bg_partition_destroy(best);
        *p = before;
        for (int s = 0; s < stages; s++) p->first_layer[s] = chosen->stage[s].first_layer;
        goto done;
    }
    p->splits_simulated = (int)count;
    p->splits_fitting = fitting;
    if (best != chosen) {
        p->simulated_split = 1;
        p->other_split_step_s = chosen->fits ? chosen_step : 0;
        bg_partition_destroy(chosen);
    }
done:
    free(start);
    free(pick);
    free(first);
    if (st == BG_ERR_NOMEM) bg_error_clear();
    return st == BG_ERR_NOMEM ? BG_OK : st;
}

bg_status_t bg_plan_create(const bg_plan_request_t *r, bg_plan_t **out) {
    if (r == NULL || r->spec == NULL || r->device == NULL || out == NULL)
        return bg_error_set(BG_ERR_INVALID, "planner: no model or no devices given");
    if (r->devices < 1 || r->chunks < 1)
        return bg_error_set(BG_ERR_INVALID, "planner: %d devices x %d chunks", r->devices,
                            r->chunks);
    if (r->microbatches > r->batch)
        return bg_error_set(
            BG_ERR_INVALID,
            "%d micro-batches of a batch of %lld samples would leave some micro-batches "
            "empty (at most %lld)",
            r->microbatches, (long long)r->batch, (long long)r->batch);
    bg_plan_t *p = calloc(1, sizeof *p);
    if (p == NULL) return bg_error_set(BG_ERR_NOMEM, "planner: out of memory");
    p->request = *r;
    bg_status_t st = plan_fill(p);
    /* The least step's search holds each stage to 1/V of its device: it
     * has nothing to offer where no split fits so (checked per device). */
    if (st == BG_OK && r->split == NULL && p->partition->fits && p->partition->stages > 1 &&
        (p->partition->memory_check == BG_PARTITION_CHECK_STAGES || p->even_split_fits))
        st = plan_try_least_step(p);
    /* With V > 1 the searches per device, by the slowest stage (done
     * already where the programme's split did not fit) and by the step. */
    if (st == BG_OK && r->split == NULL && p->partition->fits && r->chunks > 1 &&
        p->partition->memory_check == BG_PARTITION_CHECK_STAGES)
        st = plan_try_device_search(p, BG_PARTITION_SLOWEST_STAGE);
    if (st == BG_OK && r->split == NULL && p->partition->fits && r->chunks > 1)
        st = plan_try_device_search(p, BG_PARTITION_LEAST_STEP);
    if (st == BG_OK && r->split == NULL && p->partition->stages > 1)
        st = plan_simulate_every_split(p);
    if (st != BG_OK) {
        bg_plan_destroy(p);
        return st;
    }
    *out = p;
    return BG_OK;
}

const int *bg_plan_split(const bg_plan_t *plan) {
    return plan->partition->stages > 1 ? plan->first_layer + 1 : NULL;
}

int bg_plan_bottleneck_stage(const bg_plan_t *p) {
    const bg_partition_t *part = p->partition;
    int worst = 0;
    for (int s = 1; s < part->stages; s++)
        if (part->stage[s].seconds > part->stage[worst].seconds) worst = s;
    return worst;
}

const bg_cost_link_t *bg_plan_link(const bg_plan_t *p, int from, int to) {
    const int k = p->request.devices;
    if (p->links == NULL) return &p->request.link;
    return &p->links[(from % k) * k + to % k];
}

double bg_plan_samples_per_s(const bg_plan_t *p) {
    double seconds = p->step_s + p->update_s;
    return seconds > 0 ? (double)p->request.batch / seconds : 0;
}

bg_cost_link_t bg_plan_profile_link(const bg_profile_t *profile) {
    bg_cost_link_t link = BG_COST_LINK_HOST_INIT;
    if (profile != NULL && profile->copy_bytes_per_s > 0) {
        link.bytes_per_s = profile->copy_bytes_per_s / 2;
        link.copy_bytes_per_s = profile->copy_bytes_per_s;
    }
    if (profile != NULL && profile->version >= 2) {
        link.latency_s = profile->handoff_s;
        link.wake_s = profile->wake_s;
        link.handoff_s = profile->handoff_s;
    }
    return link;
}

static int is_power_of_two(int64_t m) { return m > 0 && (m & (m - 1)) == 0; }

int bg_plan_microbatch_candidates(int64_t batch, int multiple, int *out, int capacity) {
    int count = 0;
    if (multiple < 1) multiple = 1;
    for (int64_t m = 1; m <= batch && m <= BG_SCHEDULE_MAX_MICROBATCHES; m++) {
        const int scaled = m % multiple == 0 && is_power_of_two(m / multiple);
        if (batch % m != 0 && !is_power_of_two(m) && !scaled) continue;
        if (count < capacity) out[count] = (int)m;
        count++;
    }
    return count;
}

int bg_plan_microbatch_multiple(const bg_plan_request_t *r, unsigned flags) {
    const int interleaved = r->schedule == BG_SCHEDULE_INTERLEAVED ||
                            ((flags & BG_PLAN_SEARCH_SCHEDULE) && r->chunks > 1);
    return interleaved && r->devices > 1 ? r->devices : 1;
}

/* (planner.h) A profile's times outside its sizes are guesses, and the
 * fastest-looking guess wins a search too easily: a one-size profile at
 * M=4 put M=32 of the origin CNN at 5.6 ms, which runs measured at about
 * 19. */
int bg_plan_keep_profiled_counts(const bg_plan_request_t *r, int *ms, int count) {
    const bg_profile_t *prof = r->profile;
    if (prof == NULL || prof->batch < 1) return count;
    int kept = 0;
    for (int i = 0; i < count; i++)
        if (bg_profile_covers(prof, r->batch, ms[i])) ms[kept++] = ms[i]; /* in order */
    return kept > 0 ? kept : count;
}

bg_status_t bg_plan_search(const bg_plan_request_t *r, unsigned flags, bg_plan_t **out) {
    return bg_plan_search_progress(r, flags, NULL, NULL, out);
}

bg_status_t bg_plan_search_progress(const bg_plan_request_t *r, unsigned flags,
                                    bg_plan_progress_fn progress, void *ctx, bg_plan_t **out) {
    if ((flags & ~(unsigned)(BG_PLAN_SEARCH_MICROBATCHES | BG_PLAN_SEARCH_SCHEDULE)) != 0)
        return bg_error_set(BG_ERR_INVALID, "planner: unknown search flags 0x%x", flags);
    if (r->batch < 1)
        return bg_error_set(BG_ERR_INVALID, "planner: a batch of %lld samples",
                            (long long)r->batch);
    bg_schedule_kind_t kinds[4] = {r->schedule};
    int kind_count = 1;
    if (flags & BG_PLAN_SEARCH_SCHEDULE) {
        kinds[0] = BG_SCHEDULE_1F1B;
        kinds[1] = BG_SCHEDULE_GPIPE;
        kinds[2] = BG_SCHEDULE_ZB_H1;
        kinds[3] = BG_SCHEDULE_INTERLEAVED;
        kind_count = r->chunks > 1 ? 4 : 3;
    }
    int *ms = NULL, m_count = 1, own = r->microbatches;
    if (flags & BG_PLAN_SEARCH_MICROBATCHES) {
        const int multiple = bg_plan_microbatch_multiple(r, flags);
        m_count = bg_plan_microbatch_candidates(r->batch, multiple, NULL, 0);
        ms = malloc(sizeof *ms * (size_t)(m_count > 0 ? m_count : 1));
        if (ms == NULL) return bg_error_set(BG_ERR_NOMEM, "planner: out of memory");
        bg_plan_microbatch_candidates(r->batch, multiple, ms, m_count);
        m_count = bg_plan_keep_profiled_counts(r, ms, m_count);
    }
    bg_plan_t *best = NULL;
    bg_status_t st = BG_OK;
    /* Progress in micro-batches planned: a plan's simulation, most of its
     * time, runs each of them. */
    int64_t total = 0, done = 0;
    for (int i = 0; i < m_count; i++) total += (int64_t)(ms != NULL ? ms[i] : own) * kind_count;
    if (progress != NULL) progress(ctx, 0, total);
    for (int i = 0; i < m_count && st == BG_OK; i++) {
        for (int k = 0; k < kind_count; k++) {
            if (progress != NULL && done > 0) progress(ctx, done, total);
            done += ms != NULL ? ms[i] : own;
            bg_plan_request_t v = *r;
            v.microbatches = ms != NULL ? ms[i] : own;
            v.schedule = kinds[k];
            /* --chunks is the interleaved candidate's; the others have one,
             * and cannot take a --split given for V chunks a device. */
            if (flags & BG_PLAN_SEARCH_SCHEDULE) {
                const int interleaved = kinds[k] == BG_SCHEDULE_INTERLEAVED;
                if (!interleaved && r->split != NULL && r->chunks > 1) continue;
                v.chunks = interleaved ? r->chunks : 1;
                if (!interleaved && r->path_device != NULL) { /* a path, not a cycle */
                    v.device = r->path_device;
                    v.links = r->path_links;
                }
            }
            bg_plan_t *p = NULL;
            bg_status_t one = bg_plan_create(&v, &p);
            if (one == BG_ERR_INVALID) continue; /* this combination is impossible */
            if (one != BG_OK) {
                st = one;
                break;
            }
            if (better(p, best)) {
                bg_plan_destroy(best);
                best = p;
            } else {
                bg_plan_destroy(p);
            }
        }
    }
    if (st == BG_OK && progress != NULL) progress(ctx, total, total);
    if (st == BG_OK && best == NULL) {
        /* Every candidate was refused: the last refusal says why. */
        st = BG_ERR_INVALID;
        if (ms != NULL)
            bg_error_prefix(st,
                            "no micro-batch count tried for a batch of %lld (%d counts from %d "
                            "to %d) makes a plan; the last refused: ",
                            (long long)r->batch, m_count, ms[0], ms[m_count - 1]);
    }
    free(ms);
    if (st != BG_OK) {
        bg_plan_destroy(best);
        return st;
    }
    *out = best;
    return BG_OK;
}
