/* The search per device (bg_partition_search_devices): each device's
 * stages checked together against its memory, a depth-first search over
 * the stages' ends bounded by a greedy split. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "partition.h"
#include "partition_impl.h"
#include "timeline.h"

/* A depth-first search over the stages' ends: stage s starts at unit i and
 * tries each end, the best split found so far bounding the rest. It ranks
 * splits by their slowest stage, or with by_step by their step
 * (bg_partition_step_seconds); the other figure breaks ties. A device's
 * bytes so far (used) bound its later stages' memory, and all devices'
 * room left bounds the layers left: wherever they go, their parameters,
 * gradients and optimizer state must fit somewhere. */
typedef struct device_search {
    const partition_context_t *c;
    int *first, *best_first;
    size_t *used;
    size_t room;     /* the devices' capacities less used; SIZE_MAX: one is unlimited */
    double *load;    /* each device's stage seconds so far */
    double share;    /* the fill and drain's idle share (bg_partition_step_seconds) */
    int by_step;     /* rank by the step (BG_PARTITION_LEAST_STEP), not the slowest stage */
    double best;     /* best_first's ranking figure, or the caller's bound */
    double best_tie; /* best_first's other figure: among splits that tie, the lesser wins */
    int found;       /* best_first holds a split */
    long budget;     /* pricings left; below 0 once the search stopped */
} device_search_t;

/* The step of a split whose devices' loads are x->load, device d's grown
 * by `more` seconds. Of a split still being built, the least step it can
 * end with: loads only grow as stages are added, and the step grows with
 * the heaviest load and with their total (share <= 1 <= M). */
static double step_with(const device_search_t *x, int d, double more) {
    double total = 0, heaviest = 0;
    for (int e = 0; e < x->c->cfg->devices; e++) {
        const double load = x->load[e] + (e == d ? more : 0);
        total += load;
        if (load > heaviest) heaviest = load;
    }
    return bg_partition_step_of(heaviest, total,
                                bg_cost_model_config(x->c->cfg->model)->microbatches, x->share);
}

/* The step of a split whose devices' loads are x->load. */
static double step_of_loads(const device_search_t *x) { return step_with(x, 0, 0); }

/* Keeps the split in x->first, whose slowest stage takes `slowest` seconds
 * and whose step is `step`, where it beats the best so far: less of the
 * figure the search ranks by, or as little and less of the other. */
static void keep_if_better(device_search_t *x, double slowest, double step) {
    const double rank = x->by_step ? step : slowest, tie = x->by_step ? slowest : step;
    if (!(rank < x->best || (rank == x->best && tie < x->best_tie))) return;
    x->best = rank;
    x->best_tie = tie;
    x->found = 1;
    memcpy(x->best_first, x->first, sizeof *x->first * (size_t)x->c->stages);
}

/* The parameters, gradients and optimizer state of units [j, units): what
 * the stages after one ending at j hold at least, however they split. */
static size_t state_after(const partition_context_t *c, int j) {
    const bg_cost_stage_t rest = {.first_layer = c->cut[j],
                                  .last_layer = c->cut[c->units],
                                  .stash_slots = 1,
                                  .device = &c->cfg->device[0]};
    const bg_cost_memory_t m = bg_cost_stage_memory(c->cfg->model, &rest);
    return m.params + m.grads + m.optimizer;
}

/* The end near which stage s, starting at unit i, holds its share of the
 * compute left: the first j whose [i, j) reaches 1/(stages left) of
 * [i, units). Compute only grows as a stage ends later, so a bisection. */
static int even_end(const partition_context_t *c, int s, int i, int jmin, int jmax) {
    const bg_cost_time_t rest = bg_partition_stage_time(c, s, i, c->units);
    const double share = bg_partition_compute_of(&rest) / (double)(c->stages - s);
    int lo = jmin, hi = jmax;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        const bg_cost_time_t t = bg_partition_stage_time(c, s, i, mid);
        if (bg_partition_compute_of(&t) >= share)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void search_from(device_search_t *x, int s, int i, double worst);

/* Tries stage s on units [i, j); returns 1 when every later end is ruled
 * out too: its compute only grows with j. (Its memory need not: a later
 * end may send a smaller activation, whose gradient the stage holds.)
 * Splits that tie with the best are searched too, for the other figure. */
static int search_end(device_search_t *x, int s, int i, int j, double worst) {
    const partition_context_t *c = x->c;
    if (x->budget-- <= 0) return 1;
    bg_partition_stage_t st;
    bg_partition_price(c, s, i, j, &st);
    const int d = st.device;
    const size_t cap = st.capacity_bytes;
    const double compute = bg_partition_compute_of(&st.time);
    if ((x->by_step ? step_with(x, d, compute) : compute) > x->best) return 1;
    const double w = st.seconds > worst ? st.seconds : worst;
    if ((x->by_step ? step_with(x, d, st.seconds) : w) > x->best ||
        (cap != 0 && x->used[d] + st.peak_bytes > cap))
        return 0;
    if (x->room != SIZE_MAX && j < c->units && state_after(c, j) > x->room - st.peak_bytes)
        return 0;
    x->first[s] = i;
    const double load = x->load[d];
    x->load[d] += st.seconds;
    if (s == c->stages - 1) {
        keep_if_better(x, w, step_of_loads(x));
    } else {
        x->used[d] += st.peak_bytes;
        if (x->room != SIZE_MAX) x->room -= st.peak_bytes;
        search_from(x, s + 1, j, w);
        x->used[d] -= st.peak_bytes;
        if (x->room != SIZE_MAX) x->room += st.peak_bytes;
    }
    x->load[d] = load;
    return 0;
}

/* Stage s starting at unit i, the slowest stage before it `worst`: its
 * ends from the even one up (longer, until ruled out), then down. */
static void search_from(device_search_t *x, int s, int i, double worst) {
    const partition_context_t *c = x->c;
    const int last = s == c->stages - 1;
    const int jmin = last ? c->units : i + 1, jmax = c->units - (c->stages - 1 - s);
    const int from = last ? jmin : even_end(c, s, i, jmin, jmax);
    for (int j = from; j <= jmax && x->budget >= 0; j++)
        if (search_end(x, s, i, j, worst)) break;
    for (int j = from - 1; j >= jmin && x->budget >= 0; j--) (void)search_end(x, s, i, j, worst);
}

/* A split whose every stage takes at most `limit` seconds, found greedily:
 * each stage as long as it can be within the limit and within an even share
 * of what its device has left for its stages still to come (the last one
 * takes what is left). 1 with the split in x->first, its slowest stage in
 * *slowest and its step in *step; 0 where the greedy finds none (one may
 * still exist) or the budget runs out. Leaves x->used and x->load at 0. */
static int greedy_split(device_search_t *x, double limit, double *slowest, double *step) {
    const partition_context_t *c = x->c;
    const int k = c->cfg->devices;
    double worst = 0;
    int found = 1;
    for (int s = 0, i = 0; s < c->stages && found; s++) {
        const int d = s % k, last = s == c->stages - 1;
        const size_t cap = c->cfg->device[d].memory_bytes;
        const int still = (c->stages - 1 - s) / k + 1; /* device d's stages from s on */
        const size_t share = cap == 0 ? SIZE_MAX : (cap - x->used[d]) / (size_t)still;
        const int jmin = last ? c->units : i + 1, jmax = c->units - (c->stages - 1 - s);
        int end = -1;
        bg_partition_stage_t kept = {0};
        for (int j = jmin; j <= jmax && x->budget-- > 0; j++) {
            bg_partition_stage_t st;
            bg_partition_price(c, s, i, j, &st);
            if (bg_partition_compute_of(&st.time) > limit) break; /* and every later end */
            if (st.seconds <= limit && st.peak_bytes <= share) {
                end = j;
                kept = st;
            }
        }
        found = end >= 0;
        if (!found) break;
        x->first[s] = i;
        x->used[d] += kept.peak_bytes;
        x->load[d] += kept.seconds;
        if (kept.seconds > worst) worst = kept.seconds;
        i = end;
    }
    *slowest = worst;
    *step = found ? step_of_loads(x) : 0;
    for (int d = 0; d < k; d++) x->used[d] = 0, x->load[d] = 0;
    return found;
}

/* The search's first bound: the greedy split (greedy_split) under the least
 * limit a bisection finds, from the whole model's compute on the slowest
 * device (doubled while the greedy finds nothing there, a few times), in
 * x->best and x->best_first where it is faster than x->best. */
static void greedy_bound(device_search_t *x) {
    const partition_context_t *c = x->c;
    double hi = 0, slowest = 0, step = 0;
    for (int d = 0; d < c->cfg->devices; d++) {
        const bg_cost_time_t whole = bg_partition_stage_time(c, d, 0, c->units);
        if (bg_partition_compute_of(&whole) > hi) hi = bg_partition_compute_of(&whole);
    }
    int found = 0;
    for (int doubling = 0; doubling < 4 && !found; doubling++, hi *= 2)
        found = greedy_split(x, hi, &slowest, &step);
    if (!found) return;
    hi /= 2; /* the limit that worked */
    keep_if_better(x, slowest, step);
    double lo = 0;
    for (int halving = 0; halving < 40 && x->budget > 0; halving++) {
        const double mid = lo + (hi - lo) / 2;
        if (greedy_split(x, mid, &slowest, &step)) {
            hi = mid;
            keep_if_better(x, slowest, step);
        } else {
            lo = mid;
        }
    }
}

bg_status_t bg_partition_search_devices(const bg_partition_config_t *cfg, double bound, long budget,
                                        bg_partition_t **out, int *complete) {
    if ((cfg->objective != BG_PARTITION_SLOWEST_STAGE &&
         cfg->objective != BG_PARTITION_LEAST_STEP) ||
        cfg->memory_check != BG_PARTITION_CHECK_DEVICES)
        return bg_error_set(BG_ERR_INVALID,
                            "partition: the search per device minimises the slowest stage or "
                            "the step, each device's stages checked together");
    partition_context_t c;
    BG_CHECK(bg_partition_check_config(cfg, &c));
    device_search_t x = {
        .c = &c,
        .first = bg_malloc(sizeof(int) * (size_t)c.stages),
        .best_first = bg_malloc(sizeof(int) * (size_t)c.stages),
        .used = bg_calloc((size_t)cfg->devices, sizeof(size_t)),
        .room = 0,
        .load = bg_calloc((size_t)cfg->devices, sizeof(double)),
        .by_step = cfg->objective == BG_PARTITION_LEAST_STEP,
        .best = bound,
        .best_tie = DBL_MAX,
        .found = 0,
        .budget = budget,
    };
    const bg_cost_config_t *cost = bg_cost_model_config(cfg->model);
    x.share = bg_schedule_drain_share(cost->split_backward, cfg->devices, cost->microbatches,
                                      cfg->chunks);
    for (int d = 0; d < cfg->devices; d++) {
        const size_t cap = cfg->device[d].memory_bytes;
        /* SIZE_MAX, no bound, where one is unlimited or the sum would reach it. */
        x.room = cap == 0 || cap >= SIZE_MAX - x.room ? SIZE_MAX : x.room + cap;
    }
    bg_status_t st = BG_OK;
    if (x.first == NULL || x.best_first == NULL || x.used == NULL || x.load == NULL) {
        st = bg_error_set(BG_ERR_NOMEM, "partition: out of memory for %d stages", c.stages);
    } else {
        greedy_bound(&x);
        const int searched = x.budget > 0;
        if (searched) search_from(&x, 0, 0, 0);
        bg_partition_t *found = NULL;
        if (x.found) st = bg_partition_build_result(&c, x.best_first, &found);
        if (st == BG_OK) {
            *out = found;
            *complete = searched && x.budget >= 0;
        }
    }
    free(x.first);
    free(x.best_first);
    free(x.used);
    free(x.load);
    return st;
}
