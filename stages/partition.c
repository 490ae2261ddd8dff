#include "partition.h"
#include "partition_impl.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "schedule.h"
#include "timeline.h"

/* Stages and layers beyond which the (stage, layer) tables would not be
 * worth their memory: 64M cells of cut points (256 MiB). */
#define MAX_CELLS ((size_t)1 << 26)

/* The unit starting at layer boundary `layer`, one a result's stage
 * starts at (bg_partition_price set it from a unit). */
static int unit_at(const partition_context_t *c, int layer) {
    return bg_cost_model_cut_index(c->cfg->model, layer);
}

static const bg_cost_link_t *link_between(const partition_context_t *c, int from_stage,
                                          int to_stage) {
    const bg_partition_config_t *cfg = c->cfg;
    if (cfg->links == NULL) return &cfg->link;
    int k = cfg->devices;
    return &cfg->links[(from_stage % k) * k + to_stage % k];
}

/* The schedule's stash slots and the channel slots of stage s. */
static bg_cost_stage_t stage_slots(const partition_context_t *c, int s) {
    const bg_partition_config_t *cfg = c->cfg;
    const int k = cfg->devices;
    bg_cost_stage_t stage = {
        .stash_slots = cfg->stash_slots != NULL ? cfg->stash_slots[s] : 1,
        .input_channel_slots = s > 0 ? bg_schedule_ring_slots(k, s - 1, s) : 0,
        .grad_channel_slots = s + 1 < c->stages ? bg_schedule_ring_slots(k, s + 1, s) : 0,
        .device = &cfg->device[s % k],
    };
    if (stage.stash_slots < 1) stage.stash_slots = 1;
    return stage;
}

/* The compute of stage s on units [first, last). */
bg_cost_time_t bg_partition_stage_time(const partition_context_t *c, int s, int first, int last) {
    const bg_partition_config_t *cfg = c->cfg;
    return bg_cost_stage_time(cfg->model, &cfg->device[s % cfg->devices], c->cut[first],
                              c->cut[last]);
}

/* Stage s's seconds per micro-batch on units [first, last): its compute
 * (into *time) plus its sends (into *send). */
static double stage_seconds(const partition_context_t *c, int s, int first, int last,
                            bg_cost_time_t *time, double *send) {
    const bg_cost_model_t *m = c->cfg->model;
    *time = bg_partition_stage_time(c, s, first, last);
    *send = 0;
    if (last < c->units)
        *send += bg_cost_boundary_send_seconds(m, link_between(c, s, s + 1), c->cut[last]);
    if (first > 0 && !bg_cost_model_config(m)->forward_only) /* the gradient back */
        *send += bg_cost_boundary_send_seconds(m, link_between(c, s, s - 1), c->cut[first]);
    return bg_partition_compute_of(time) + *send;
}

/* Prices stage s holding units [first, last). */
void bg_partition_price(const partition_context_t *c, int s, int first, int last,
                        bg_partition_stage_t *out) {
    const bg_partition_config_t *cfg = c->cfg;
    const bg_cost_model_t *m = cfg->model;
    const bg_cost_device_t *dev = &cfg->device[s % cfg->devices];
    out->first_layer = c->cut[first];
    out->last_layer = c->cut[last];
    out->device = s % cfg->devices;
    out->seconds = stage_seconds(c, s, first, last, &out->time, &out->send_s);
    bg_cost_stage_t stage = stage_slots(c, s);
    stage.first_layer = out->first_layer;
    stage.last_layer = out->last_layer;
    out->memory = bg_cost_stage_memory(m, &stage);
    out->peak_bytes = bg_cost_memory_peak(&out->memory);
    /* A capacity of 0 means none given: a tiny one stays at least a byte. */
    out->capacity_bytes = dev->memory_bytes / (size_t)(c->per_device ? 1 : cfg->chunks);
    if (dev->memory_bytes > 0 && out->capacity_bytes == 0) out->capacity_bytes = 1;
}

static size_t overflow_of(const bg_partition_stage_t *st) {
    if (st->capacity_bytes == 0 || st->peak_bytes <= st->capacity_bytes) return 0;
    return st->peak_bytes - st->capacity_bytes;
}

/* The stage's peak without the terms that scale with its input activation
 * (bg_cost_stage_input_bytes). The rest, parameters, layer outputs, widest
 * activation, workspace, only grows as the stage takes more layers: a lower
 * bound on every longer stage ending where it ends. */
static size_t growing_bytes(const partition_context_t *c, const bg_cost_stage_t *slots,
                            const bg_partition_stage_t *st) {
    bg_cost_stage_t stage = *slots;
    stage.first_layer = st->first_layer;
    stage.last_layer = st->last_layer;
    return st->peak_bytes - bg_cost_stage_input_bytes(c->cfg->model, &stage);
}

bg_status_t bg_partition_check_config(const bg_partition_config_t *cfg, partition_context_t *c) {
    if (cfg->model == NULL || cfg->device == NULL)
        return bg_error_set(BG_ERR_INVALID, "partition: no cost model or no devices");
    if (cfg->devices < 1 || cfg->chunks < 1 || cfg->chunks > INT_MAX / cfg->devices)
        return bg_error_set(BG_ERR_INVALID, "partition: %d devices x %d chunks", cfg->devices,
                            cfg->chunks);
    if (cfg->objective != BG_PARTITION_SLOWEST_STAGE &&
        cfg->objective != BG_PARTITION_LEAST_TOTAL && cfg->objective != BG_PARTITION_LEAST_STEP)
        return bg_error_set(BG_ERR_INVALID, "partition: unknown objective %d", (int)cfg->objective);
    if (!(cfg->step_tolerance >= 0 && cfg->step_tolerance < 1))
        return bg_error_set(BG_ERR_INVALID, "partition: step tolerance %g is not in [0, 1)",
                            cfg->step_tolerance);
    if (cfg->memory_check != BG_PARTITION_CHECK_STAGES &&
        cfg->memory_check != BG_PARTITION_CHECK_DEVICES)
        return bg_error_set(BG_ERR_INVALID, "partition: unknown memory check %d",
                            (int)cfg->memory_check);
    c->cfg = cfg;
    c->per_device = cfg->memory_check == BG_PARTITION_CHECK_DEVICES && cfg->chunks > 1;
    c->allowance = 0;
    c->layers = bg_cost_model_layers(cfg->model);
    int cuts = 0;
    c->cut = bg_cost_model_cuts(cfg->model, &cuts);
    c->units = cuts - 1;
    c->stages = cfg->devices * cfg->chunks;
    if (c->stages > c->layers)
        return bg_error_set(BG_ERR_INVALID, "%d stages but the model has only %d layer%s",
                            c->stages, c->layers, c->layers == 1 ? "" : "s");
    if (c->stages > c->units)
        return bg_model_spec_check_stage_count(bg_cost_model_config(cfg->model)->spec, c->stages,
                                               "");
    if ((size_t)c->stages * (size_t)(c->units + 1) > MAX_CELLS)
        return bg_error_set(BG_ERR_INVALID, "partition: %d stages x %d layers is too large",
                            c->stages, c->layers);
    for (int d = 0; d < cfg->devices; d++)
        if (!(cfg->device[d].flops_per_s > 0))
            return bg_error_set(BG_ERR_INVALID, "partition: device %d (%s) has no speed", d,
                                cfg->device[d].name);
    return BG_OK;
}

/* Fills a result for the split first[0..S) of units, first[S] = units. */
bg_status_t bg_partition_build_result(const partition_context_t *c, const int *first,
                                      bg_partition_t **out) {
    bg_partition_t *p = bg_calloc(1, sizeof *p);
    if (p != NULL) p->stage = bg_calloc((size_t)c->stages, sizeof *p->stage);
    if (p == NULL || p->stage == NULL) {
        bg_partition_destroy(p);
        return bg_error_set(BG_ERR_NOMEM, "partition: out of memory");
    }
    p->stages = c->stages;
    p->memory_check = c->per_device ? BG_PARTITION_CHECK_DEVICES : BG_PARTITION_CHECK_STAGES;
    p->fits = 1;
    p->worst_stage = -1;
    p->worst_device = -1;
    for (int s = 0; s < c->stages; s++) {
        int last = s + 1 < c->stages ? first[s + 1] : c->units;
        bg_partition_price(c, s, first[s], last, &p->stage[s]);
        if (p->stage[s].seconds > p->bottleneck_s) p->bottleneck_s = p->stage[s].seconds;
        p->total_s += p->stage[s].seconds;
        size_t over = c->per_device ? 0 : overflow_of(&p->stage[s]);
        if (over > 0 && (p->fits || over > p->overflow_bytes)) {
            p->fits = 0;
            p->worst_stage = s;
            p->worst_device = p->stage[s].device;
            p->overflow_bytes = over;
        }
    }
    /* Per device: stage d is device d's first (S = K x V), and every stage
     * of a device has its whole capacity. */
    for (int d = 0; c->per_device && d < c->cfg->devices; d++) {
        const size_t need = bg_partition_device_peak_bytes(p, d),
                     capacity = p->stage[d].capacity_bytes;
        if (capacity == 0 || need <= capacity) continue;
        if (p->fits || need - capacity > p->overflow_bytes) {
            p->fits = 0;
            p->worst_device = d;
            p->overflow_bytes = need - capacity;
            p->worst_stage = d;
            for (int s = d; s < c->stages; s += c->cfg->devices)
                if (p->stage[s].peak_bytes > p->stage[p->worst_stage].peak_bytes)
                    p->worst_stage = s;
        }
    }
    *out = p;
    return BG_OK;
}

/* Range minima of a row of the programme (a sparse table): min over
 * v[i..j] in O(1) after O(N log N) to build. level[k][i] is the minimum of
 * v[i .. i + 2^k - 1]. */
typedef struct range_min {
    double *table; /* levels x size */
    int size, levels;
} range_min_t;

static int floor_log2(int x) {
    int k = 0;
    while ((2 << k) <= x) k++;
    return k;
}

static void range_min_build(range_min_t *rm, const double *v) {
    memcpy(rm->table, v, sizeof(double) * (size_t)rm->size);
    for (int k = 1; k < rm->levels; k++) {
        const double *below = rm->table + (size_t)(k - 1) * (size_t)rm->size;
        double *level = rm->table + (size_t)k * (size_t)rm->size;
        const int half = 1 << (k - 1);
        for (int i = 0; i + (1 << k) <= rm->size; i++)
            level[i] = below[i] < below[i + half] ? below[i] : below[i + half];
    }
}

/* The minimum of v[i..j], i <= j. */
static double range_min_of(const range_min_t *rm, int i, int j) {
    const int k = floor_log2(j - i + 1);
    const double *level = rm->table + (size_t)k * (size_t)rm->size;
    const double a = level[i], b = level[j - (1 << k) + 1];
    return a < b ? a : b;
}

/* The largest k in [lo, hi] with v[k] < bound, or lo - 1 when none. */
static int last_below(const range_min_t *rm, int lo, int hi, double bound) {
    if (lo > hi || range_min_of(rm, lo, hi) >= bound) return lo - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (range_min_of(rm, mid, hi) < bound)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The smallest k in [lo, hi] with v[k] <= bound, or hi + 1 when none. */
static int first_at_most(const range_min_t *rm, int lo, int hi, double bound) {
    if (lo > hi || range_min_of(rm, lo, hi) > bound) return hi + 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (range_min_of(rm, lo, mid) <= bound)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The dynamic programme. best[j] of row s: the best value over splits of
 * layers [0, j) into stages 0..s; cut[s][j]: where stage s starts in it.
 * Mode time: the value is the largest stage time, and stages over their
 * capacity are excluded. Mode overflow: the value is the largest overflow.
 * Returns 1 and the split in first[] if any split has a finite value.
 *
 * For each j, the start i of stage s is searched both ways from the best
 * start for j - 1 (where it usually lies): downwards (longer stages) until
 * the stage's compute alone reaches the best value, upwards (shorter ones)
 * until no earlier row's value left reaches below it; starts whose earlier
 * rows are no better are jumped over, found by range minima. Both
 * bounds only skip starts whose value cannot be better, so the result is
 * that of trying every start; among equal values the latest start is kept,
 * as a scan from the top keeps it. Balanced stages thus cost a few prices
 * per (s, j), not j. */
typedef enum dp_mode { DP_TIME, DP_OVERFLOW } dp_mode_t;

/* A run of a row's starts [lo, hi] in the least-total search, keyed by its
 * best start `at` and that start's rank. */
typedef struct segment {
    int lo, hi, at;
    double key;
} segment_t;

/* Range argmin over a row of ranks (a sparse table of indices, as
 * range_min_t): the start of the smallest rank in [i, j], the latest among
 * equal ones. */
typedef struct range_argmin {
    int *table; /* levels x size */
    const double *rank;
    int size, levels;
} range_argmin_t;

typedef struct dp_tables {
    double *prev, *cur;
    int *cut, *first;
    range_min_t rm;
    /* The least total only: each start's rank, their argmin table and the
     * heap of runs of starts. */
    double *rank;
    range_argmin_t ra;
    segment_t *heap;
    int probes; /* the least step's: the front points it probed (solve_step) */
} dp_tables_t;

/* Prices stage s on [i, j) as a candidate: its value (DBL_MAX when over
 * capacity in DP_TIME), and through *stop whether every longer stage
 * ending at j is ruled out too given `best`: the growing floor only grows
 * as i falls, and compute, less what starting at i adds (a relu cut from
 * its convolution runs its own pass), too. Until 2026-12-06 the stop took
 * the whole compute, and a stage starting at such a relu, dearer than the
 * longer one from the convolution (a 1x1 convolution over one channel),
 * ended the search before it (a review). */
static double candidate(const partition_context_t *c, dp_mode_t mode, int s, int i, int j,
                        double before, double best, const bg_cost_stage_t *slots, int *stop) {
    bg_partition_stage_t st;
    bg_partition_price(c, s, i, j, &st);
    const size_t floor = growing_bytes(c, slots, &st);
    const int floor_over = st.capacity_bytes != 0 && floor > st.capacity_bytes;
    double value;
    if (mode == DP_TIME) {
        const size_t limit = st.capacity_bytes + c->allowance;
        const int limited = st.capacity_bytes != 0;
        const double longer =
            bg_partition_compute_of(&st.time) -
            bg_cost_stage_start_excess(c->cfg->model, slots->device, st.first_layer);
        *stop = longer >= best || (limited && floor > limit);
        if (*stop || (limited && st.peak_bytes > limit)) return DBL_MAX;
        value = st.seconds;
    } else {
        *stop = floor_over && (double)(floor - st.capacity_bytes) >= best;
        if (*stop) return DBL_MAX;
        value = (double)overflow_of(&st);
    }
    return value < before ? before : value;
}

/* After a programme's last row: 0 when no split reaches the last layer,
 * else 1 with the best split read back from the cut table into t->first. */
static int read_split(const partition_context_t *c, const double *last_row, dp_tables_t *t) {
    const int n = c->units;
    if (last_row[n] == DBL_MAX) return 0;
    for (int s = c->stages - 1, j = n; s >= 0; s--) {
        t->first[s] = t->cut[(size_t)s * (size_t)(n + 1) + (size_t)j];
        j = t->first[s];
    }
    return 1;
}

static int solve(const partition_context_t *c, dp_mode_t mode, dp_tables_t *t) {
    const int n = c->units, stages = c->stages;
    double *prev = t->prev, *cur = t->cur;
#define CUT(s, j) t->cut[(size_t)(s) * (size_t)(n + 1) + (size_t)(j)]
    for (int s = 0; s < stages; s++) {
        const bg_cost_stage_t slots = stage_slots(c, s);
        if (s > 0) range_min_build(&t->rm, prev);
        /* The last stage ends at the last layer: only best[n] is read. */
        int jmin = s == stages - 1 ? n : s + 1, jmax = n - (stages - 1 - s);
        for (int j = 0; j <= n; j++) cur[j] = DBL_MAX;
        for (int j = jmin; j <= jmax; j++) {
            double best = DBL_MAX;
            int imin = s == 0 ? 0 : s;
            int imax = s == 0 ? 0 : j - 1;
            int from = j > jmin && cur[j - 1] < DBL_MAX ? CUT(s, j - 1) : imax;
            if (from < imin) from = imin;
            if (from > imax) from = imax;
            int stop = 0;
            /* Downwards: a value equal to the best is no better (a later
             * start holds it). */
            for (int i = from; i >= imin && !stop; i--) {
                const double before = s == 0 ? 0 : prev[i];
                if (before >= best) {
                    /* Cannot be strictly better (or unreachable): on to the
                     * next start below whose earlier rows do better. */
                    if (s > 0) i = last_below(&t->rm, imin, i, best) + 1;
                    continue;
                }
                const double value = candidate(c, mode, s, i, j, before, best, &slots, &stop);
                if (value < best) {
                    best = value;
                    CUT(s, j) = i;
                }
            }
            /* Upwards: a later start wins a tie; while nothing is found,
             * unreachable starts (DBL_MAX) are passed over. */
            const double below_max = nextafter(DBL_MAX, 0);
            for (int i = first_at_most(&t->rm, from + 1, imax, fmin(best, below_max)); i <= imax;
                 i = first_at_most(&t->rm, i + 1, imax, fmin(best, below_max))) {
                const double value = candidate(c, mode, s, i, j, prev[i], DBL_MAX, &slots, &stop);
                if (value <= best && value < DBL_MAX) {
                    best = value;
                    CUT(s, j) = i;
                }
            }
            cur[j] = best;
        }
        double *swap = prev;
        prev = cur;
        cur = swap;
    }
#undef CUT
    return read_split(c, prev, t);
}

/* ---- the least total (BG_PARTITION_LEAST_TOTAL) ---- */

static int lower_rank(const double *rank, int a, int b) {
    if (rank[a] != rank[b]) return rank[a] < rank[b] ? a : b;
    return a > b ? a : b;
}

static void range_argmin_build(range_argmin_t *ra) {
    for (int i = 0; i < ra->size; i++) ra->table[i] = i;
    for (int k = 1; k < ra->levels; k++) {
        const int *below = ra->table + (size_t)(k - 1) * (size_t)ra->size;
        int *level = ra->table + (size_t)k * (size_t)ra->size;
        const int half = 1 << (k - 1);
        for (int i = 0; i + (1 << k) <= ra->size; i++)
            level[i] = lower_rank(ra->rank, below[i], below[i + half]);
    }
}

/* The start of the smallest rank in [i, j], i <= j. */
static int range_argmin_of(const range_argmin_t *ra, int i, int j) {
    const int k = floor_log2(j - i + 1);
    const int *level = ra->table + (size_t)k * (size_t)ra->size;
    return lower_rank(ra->rank, level[i], level[j - (1 << k) + 1]);
}

/* The heap orders runs by their best rank, the later start first among
 * equal ones (as the slowest-stage programme keeps the latest start). */
static int heap_before(const segment_t *a, const segment_t *b) {
    return a->key < b->key || (a->key == b->key && a->at > b->at);
}

static void heap_push(segment_t *heap, int *count, const range_argmin_t *ra, int lo, int hi) {
    if (lo > hi) return;
    const int at = range_argmin_of(ra, lo, hi);
    int i = (*count)++;
    heap[i] = (segment_t){.lo = lo, .hi = hi, .at = at, .key = ra->rank[at]};
    while (i > 0 && heap_before(&heap[i], &heap[(i - 1) / 2])) {
        const segment_t swap = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = swap;
        i = (i - 1) / 2;
    }
}

static segment_t heap_pop(segment_t *heap, int *count) {
    const segment_t top = heap[0];
    heap[0] = heap[--*count];
    for (int i = 0;;) {
        int least = i;
        const int l = 2 * i + 1, r = l + 1;
        if (l < *count && heap_before(&heap[l], &heap[least])) least = l;
        if (r < *count && heap_before(&heap[r], &heap[least])) least = r;
        if (least == i) break;
        const segment_t swap = heap[i];
        heap[i] = heap[least];
        heap[least] = swap;
        i = least;
    }
    return top;
}

/* The programme for the least total: best[j] of row s is the smallest sum
 * of stage seconds over splits of [0, j) into stages 0..s that fit. Stage
 * s's seconds on [i, j) are A(j) - A(i) + in(i) + out(j), with A the
 * compute of layers [0, x) on its device (compute adds up over layers) and
 * in, out its sends at each end; so one rank per start, prev[i] - A(i) +
 * in(i) (computed as prev[i] plus the stage's seconds on [i, N), which
 * differs from it by a constant), orders the starts of every end alike.
 * For each end the starts are taken best rank first, from a heap of runs
 * of starts split at each one priced, until one fits: the first that fits
 * is the best (up to rounding). A start whose growing floor is over
 * capacity rules out every start below it too (growing_bytes). With a
 * `cap` (DBL_MAX: none), a stage must also take at most cap seconds: the
 * starts whose compute alone is over it, every start below some `window`
 * that only rises with the end, are never taken from the heap. Returns 1
 * and the split in first[] if any split fits. */
static int solve_total(const partition_context_t *c, double cap, dp_tables_t *t) {
    const int n = c->units, stages = c->stages;
    double *prev = t->prev, *cur = t->cur;
#define CUT(s, j) t->cut[(size_t)(s) * (size_t)(n + 1) + (size_t)(j)]
    for (int s = 0; s < stages; s++) {
        const bg_cost_stage_t slots = stage_slots(c, s);
        const int jmin = s == stages - 1 ? n : s + 1, jmax = n - (stages - 1 - s);
        for (int j = 0; j <= n; j++) cur[j] = DBL_MAX;
        if (s > 0) {
            t->rank[n] = DBL_MAX; /* no stage starts past the last layer */
            for (int i = 0; i < n; i++) {
                bg_cost_time_t time;
                double send;
                t->rank[i] = i < s || prev[i] == DBL_MAX
                                 ? DBL_MAX
                                 : prev[i] + stage_seconds(c, s, i, n, &time, &send);
            }
            range_argmin_build(&t->ra);
        }
        int window = s;
        for (int j = jmin; j <= jmax; j++) {
            bg_partition_stage_t st;
            for (; cap < DBL_MAX && window < j; window++) {
                const bg_cost_time_t time = bg_partition_stage_time(c, s, window, j);
                if (bg_partition_compute_of(&time) <= cap) break;
            }
            if (s == 0) {
                bg_partition_price(c, 0, 0, j, &st);
                if (overflow_of(&st) == 0 && st.seconds <= cap) {
                    cur[j] = st.seconds;
                    CUT(0, j) = 0;
                }
                continue;
            }
            int count = 0, lowest = window; /* no start below lowest fits */
            heap_push(t->heap, &count, &t->ra, s, j - 1);
            while (count > 0) {
                segment_t run = heap_pop(t->heap, &count);
                if (run.hi < lowest) continue;
                if (run.lo < lowest) {
                    heap_push(t->heap, &count, &t->ra, lowest, run.hi);
                    continue;
                }
                if (run.key == DBL_MAX) break; /* the rest are unreachable */
                bg_partition_price(c, s, run.at, j, &st);
                if (overflow_of(&st) == 0 && st.seconds <= cap) {
                    cur[j] = prev[run.at] + st.seconds;
                    CUT(s, j) = run.at;
                    break;
                }
                if (st.capacity_bytes != 0 && growing_bytes(c, &slots, &st) > st.capacity_bytes)
                    lowest = run.at + 1;
                else
                    heap_push(t->heap, &count, &t->ra, run.lo, run.at - 1);
                heap_push(t->heap, &count, &t->ra, run.at + 1, run.hi);
            }
        }
        double *swap = prev;
        prev = cur;
        cur = swap;
    }
#undef CUT
    return read_split(c, prev, t);
}

/* ---- the least predicted step (BG_PARTITION_LEAST_STEP) ---- */

/* The predicted step (bg_partition_step_seconds) is slope * H + share *
 * total, slope = M - share >= 0, with H the busiest device's seconds: with
 * one stage per device H is the slowest stage L, and the step grows with
 * both L and the total. The best split is then one where neither can shrink
 * without the other growing: a point of the front of g(cap), the least
 * total with every stage within cap seconds (solve_total), which falls in
 * steps as cap grows from L* (the slowest-stage programme's) to the least
 * total's L.
 *
 * The search keeps gaps of that front still unexplored: caps (lo, hi) where
 * g is known at both ends, g(hi) = `total` the smaller. A split in a gap
 * has L > lo and a total at least g(hi); its busiest device has at least
 * L and at least 1/K of the total, so slope * max(lo, g(hi) / K) + share *
 * g(hi) bounds its step from below (with the second term alone, a search of
 * V = 4 chunks on 1,000 layers probed 2,448 caps). The gap of the least bound is probed at a
 * cap c inside it; the split found there, of slowest stage L' <= c,
 * settles every cap in [L', c] (g is g(c) there), leaving (lo, L') when
 * L' > lo and (c, hi). A gap is probed at its middle, except the (c, hi)
 * such a probe leaves, which is probed just below hi: g may fall only at
 * hi itself, where bisecting would close in on hi for some sixty probes
 * (until no double lies strictly inside) to settle nothing. The search
 * ends when no gap's bound is below the best step found (less the
 * tolerance): exact with one stage per device. With V > 1 a device's load
 * is V stages, which the bound cannot follow: each probe's split is
 * balanced across devices (balance_point), the search is a heuristic, and
 * it ends after BG_PARTITION_FRONT_PROBES_CHUNKED probes too (where the least total is
 * the same at every cap, as for equal layers, every gap's bound is the
 * same, and the search would otherwise probe the front until no double lies
 * inside a gap: 1,716 probes, 30 s, for 1,000 layers into 8 x 8 stages). */
typedef struct gap {
    double lo, hi, total, bound;
    int top; /* probe it just below hi, not at its middle */
} gap_t;

typedef struct gaps {
    gap_t *gap;
    int count, capacity;
    double slope, share;
    int devices; /* K: the busiest device holds at least 1/K of the total */
} gaps_t;

static int gap_push(gaps_t *g, double lo, double hi, double total, int top) {
    if (!(lo < hi)) return 1;
    if (g->count == g->capacity) {
        const int capacity = g->capacity > 0 ? 2 * g->capacity : 64;
        gap_t *grown = bg_realloc(g->gap, sizeof *grown * (size_t)capacity);
        if (grown == NULL) return 0;
        g->gap = grown;
        g->capacity = capacity;
    }
    const double busiest = fmax(lo, total / g->devices);
    g->gap[g->count++] = (gap_t){.lo = lo,
                                 .hi = hi,
                                 .total = total,
                                 .bound = g->slope * busiest + g->share * total,
                                 .top = top};
    return 1;
}

/* Removes and returns the gap of the least bound (the gaps stay few: a
 * scan is enough). */
static gap_t gap_pop_least(gaps_t *g) {
    int least = 0;
    for (int i = 1; i < g->count; i++)
        if (g->gap[i].bound < g->gap[least].bound) least = i;
    const gap_t out = g->gap[least];
    g->gap[least] = g->gap[--g->count];
    return out;
}

/* The least total with every stage within cap seconds, priced into
 * *point: 1, or 0 when no split keeps within cap, or -1 when out of
 * memory. */
static int front_point(const partition_context_t *c, double cap, dp_tables_t *t,
                       bg_partition_t **point) {
    if (!solve_total(c, cap, t)) return 0;
    return bg_partition_build_result(c, t->first, point) == BG_OK ? 1 : -1;
}

/* Prices stages lo..hi of split first[] into stage[]: 1 if they all fit. */
static int price_fitting(const partition_context_t *c, const int *first, int lo, int hi,
                         bg_partition_stage_t *stage) {
    int fits = 1;
    for (int s = lo; s <= hi; s++) {
        bg_partition_price(c, s, first[s], s + 1 < c->stages ? first[s + 1] : c->units, &stage[s]);
        fits &= overflow_of(&stage[s]) == 0;
    }
    return fits;
}

/* Shifts boundaries first[b..e] by `step` (+1 or -1) layers: a layer
 * moves from stage b - 1 to stage e or back, each stage between passing
 * one on. 0 (and nothing moved) when a stage would be left empty. */
static int shift_boundaries(const partition_context_t *c, int *first, int b, int e, int step) {
    if (step < 0 && first[b] - 1 <= first[b - 1]) return 0;
    if (step > 0 && first[e] + 1 >= (e + 1 < c->stages ? first[e + 1] : c->units)) return 0;
    for (int s = b; s <= e; s++) first[s] += step;
    return 1;
}

/* With V > 1 stages a device, the step counts each device's stages
 * together, which the programme's stage-by-stage search cannot: its split
 * can give one device two heavy stages and another none. From the fitting
 * split in first[], moves a layer from one stage to another up to K stages
 * on (shifting the boundaries between them) while that shortens the
 * predicted step and every stage still fits, until no move does (a local
 * optimum, not proven the best) or a bound on the stages priced is
 * reached. A move reprices only the stages it changes. -1 when out of
 * memory, else 0. */
static int balance_devices(const partition_context_t *c, int *first) {
    enum { MAX_PRICED_STAGES = 1 << 20 };
    const int k = c->cfg->devices;
    bg_partition_stage_t *stage = bg_malloc(sizeof *stage * 2 * (size_t)c->stages);
    if (stage == NULL) return -1;
    bg_partition_stage_t *kept = stage + c->stages; /* the stages a move changes, before it */
    const bg_partition_t split = {.stages = c->stages, .fits = 1, .stage = stage};
    double best = price_fitting(c, first, 0, c->stages - 1, stage)
                      ? bg_partition_step_seconds(&split, c->cfg)
                      : DBL_MAX;
    long priced = c->stages;
    for (int improved = best < DBL_MAX; improved && priced < MAX_PRICED_STAGES;) {
        improved = 0;
        for (int b = 1; b < c->stages && priced < MAX_PRICED_STAGES; b++)
            for (int e = b; e < c->stages && e < b + k; e++)
                for (int step = -1; step <= 1; step += 2) {
                    if (!shift_boundaries(c, first, b, e, step)) continue;
                    memcpy(&kept[b - 1], &stage[b - 1], sizeof *stage * (size_t)(e - b + 2));
                    const int fits = price_fitting(c, first, b - 1, e, stage);
                    priced += e - b + 2;
                    const double moved = fits ? bg_partition_step_seconds(&split, c->cfg) : DBL_MAX;
                    if (moved < best * (1 - 1e-12)) {
                        best = moved;
                        improved = 1;
                    } else {
                        (void)shift_boundaries(c, first, b, e, -step);
                        memcpy(&stage[b - 1], &kept[b - 1], sizeof *stage * (size_t)(e - b + 2));
                    }
                }
    }
    free(stage);
    return 0;
}

/* With V > 1, replaces *point by its split moved to a local optimum
 * (balance_devices). 0, or -1 when out of memory (*point freed). */
static int balance_point(const partition_context_t *c, bg_partition_t **point) {
    if (c->cfg->chunks == 1) return 0;
    int *first = bg_malloc(sizeof *first * (size_t)c->stages);
    bg_partition_t *moved = NULL;
    if (first != NULL)
        for (int s = 0; s < c->stages; s++) first[s] = unit_at(c, (*point)->stage[s].first_layer);
    const int ok = first != NULL && balance_devices(c, first) == 0 &&
                   bg_partition_build_result(c, first, &moved) == BG_OK;
    free(first);
    bg_partition_destroy(*point);
    *point = moved;
    return ok ? 0 : -1;
}

/* Keeps `point` (balanced across devices first, balance_point) as *best
 * when its step is shorter (the earlier wins ties), else frees it. 0, or
 * -1 when out of memory. */
static int keep_shorter(const partition_context_t *c, bg_partition_t *point, bg_partition_t **best,
                        double *best_step) {
    if (balance_point(c, &point) < 0) return -1;
    const double step = bg_partition_step_seconds(point, c->cfg);
    if (step < *best_step * (1 - 1e-12)) {
        bg_partition_destroy(*best);
        *best = point;
        *best_step = step;
    } else {
        bg_partition_destroy(point);
    }
    return 0;
}

/* The search above. Its first candidates are the slowest stage's split,
 * the least total at L* and the least total; the first gap lies between
 * the last two. Returns 1 and the best split in first[] if any split fits,
 * 0 if none does, -1 when out of memory. */
static int solve_step(const partition_context_t *c, dp_tables_t *t) {
    const bg_partition_config_t *cfg = c->cfg;
    const bg_cost_config_t *cost = bg_cost_model_config(cfg->model);
    gaps_t g = {.share = bg_schedule_drain_share(cost->split_backward, cfg->devices,
                                                 cost->microbatches, cfg->chunks),
                .devices = cfg->devices};
    g.slope = cost->microbatches - g.share; /* >= 0: share <= 1 <= M */
    bg_partition_t *best = NULL, *point = NULL;
    if (cfg->slowest != NULL && cfg->slowest->fits && cfg->slowest->stages == c->stages)
        for (int s = 0; s < c->stages; s++)
            t->first[s] = unit_at(c, cfg->slowest->stage[s].first_layer);
    else if (!solve(c, DP_TIME, t))
        return 0;
    if (bg_partition_build_result(c, t->first, &best) != BG_OK) return -1;
    const double least_slowest = best->bottleneck_s;
    if (balance_point(c, &best) < 0) return -1;
    double best_step = bg_partition_step_seconds(best, cfg);
    int found = front_point(c, least_slowest, t, &point); /* 1: the slowest stage's fits */
    if (found > 0) found = keep_shorter(c, point, &best, &best_step) < 0 ? -1 : 1;
    if (found > 0) found = front_point(c, DBL_MAX, t, &point);
    if (found > 0) {
        const double slowest = point->bottleneck_s, total = point->total_s;
        if (keep_shorter(c, point, &best, &best_step) < 0 ||
            !gap_push(&g, least_slowest, slowest, total, 0))
            found = -1;
    }
    int probes = 0;
    while (found >= 0 && g.count > 0 &&
           (cfg->chunks == 1 || probes < BG_PARTITION_FRONT_PROBES_CHUNKED)) {
        const gap_t gap = gap_pop_least(&g);
        /* keep_shorter takes no gain under 1e-12 of the step: nor does this. */
        if (gap.bound >= best_step * (1 - fmax(cfg->step_tolerance, 1e-12))) break;
        const double cap = gap.top ? nextafter(gap.hi, 0) : gap.lo + (gap.hi - gap.lo) / 2;
        if (!(gap.lo < cap && cap < gap.hi)) continue; /* no cap strictly inside */
        found = front_point(c, cap, t, &point);        /* 1: cap > lo >= L* */
        t->probes = ++probes;
        if (found <= 0) continue;
        const double slowest = point->bottleneck_s, total = point->total_s;
        if (keep_shorter(c, point, &best, &best_step) < 0 ||
            !(gap.top || gap_push(&g, cap, gap.hi, gap.total, 1)) ||
            !(slowest <= gap.lo || gap_push(&g, gap.lo, slowest, total, 0)))
            found = -1;
    }
    free(g.gap);
    for (int s = 0; s < c->stages; s++) t->first[s] = unit_at(c, best->stage[s].first_layer);
    bg_partition_destroy(best);
    return found < 0 ? -1 : 1;
}

/* Nothing fits and t->first holds a split of the least worst overflow
 * V: many splits may share V (every stage within it ties), so the split
 * is chosen again as the fastest slowest stage among those whose stages
 * all stay within capacity + V. That split exists (t->first is one), and
 * its worst overflow is V again, as none is smaller. */
static bg_status_t fastest_least_overflow(partition_context_t *c, dp_tables_t *t) {
    bg_partition_t *least = NULL;
    BG_CHECK(bg_partition_build_result(c, t->first, &least));
    c->allowance = least->overflow_bytes;
    bg_partition_destroy(least);
    (void)solve(c, DP_TIME, t); /* on 0, t->first keeps the overflow's split */
    c->allowance = 0;
    return BG_OK;
}

bg_status_t bg_partition_create(const bg_partition_config_t *cfg, bg_partition_t **out) {
    partition_context_t c;
    BG_CHECK(bg_partition_check_config(cfg, &c));
    if (c.per_device)
        return bg_error_set(BG_ERR_INVALID,
                            "partition: the programme holds each stage within 1/%d of its "
                            "device; bg_partition_search_devices checks devices whole",
                            cfg->chunks);
    const size_t row = (size_t)c.units + 1;
    dp_tables_t t = {
        .prev = bg_calloc(row, sizeof(double)),
        .cur = bg_calloc(row, sizeof(double)),
        .cut = bg_malloc(sizeof(int) * row * (size_t)c.stages),
        .first = bg_malloc(sizeof(int) * (size_t)c.stages),
        .rm = {.size = (int)row, .levels = floor_log2((int)row) + 1},
    };
    /* Rows after the first search by range minima (one stage needs none). */
    if (c.stages > 1) t.rm.table = bg_malloc(sizeof(double) * row * (size_t)t.rm.levels);
    const int total = cfg->objective != BG_PARTITION_SLOWEST_STAGE && c.stages > 1;
    if (total) {
        t.rank = bg_malloc(sizeof(double) * row);
        t.ra = (range_argmin_t){.table = bg_malloc(sizeof(int) * row * (size_t)t.rm.levels),
                                .rank = t.rank,
                                .size = (int)row,
                                .levels = t.rm.levels};
        t.heap = bg_malloc(sizeof(segment_t) * row);
    }
    bg_status_t st = BG_OK;
    if (t.prev == NULL || t.cur == NULL || t.cut == NULL || t.first == NULL ||
        (c.stages > 1 && t.rm.table == NULL) ||
        (total && (t.rank == NULL || t.ra.table == NULL || t.heap == NULL))) {
        st = bg_error_set(BG_ERR_NOMEM, "partition: out of memory for %d stages x %d layers",
                          c.stages, c.layers);
    } else {
        const int fits = !total                                       ? solve(&c, DP_TIME, &t)
                         : cfg->objective == BG_PARTITION_LEAST_TOTAL ? solve_total(&c, DBL_MAX, &t)
                                                                      : solve_step(&c, &t);
        /* Overflow is an exact integer as long as it stays below 2^53 bytes. */
        if (fits < 0)
            st = bg_error_set(BG_ERR_NOMEM, "partition: out of memory");
        else if (!fits && !solve(&c, DP_OVERFLOW, &t))
            st = bg_error_set(BG_ERR_INTERNAL, "partition: no split of %d layers into %d stages",
                              c.layers, c.stages);
        else if (!fits && !cfg->fits_only)
            st = fastest_least_overflow(&c, &t);
        if (st == BG_OK) st = bg_partition_build_result(&c, t.first, out);
        if (st == BG_OK) (*out)->front_probes = t.probes;
    }
    free(t.prev);
    free(t.cur);
    free(t.cut);
    free(t.first);
    free(t.rm.table);
    free(t.rank);
    free(t.ra.table);
    free(t.heap);
    return st;
}

bg_status_t bg_partition_evaluate(const bg_partition_config_t *cfg, const int *first,
                                  bg_partition_t **out) {
    partition_context_t c;
    BG_CHECK(bg_partition_check_config(cfg, &c));
    if (first[0] != 0)
        return bg_error_set(BG_ERR_INVALID, "split: stage 0 must start at layer 0, not %d",
                            first[0]);
    for (int s = 1; s < c.stages; s++)
        if (first[s] <= first[s - 1] || first[s] >= c.layers)
            return bg_error_set(BG_ERR_INVALID,
                                "split: stage %d would start at layer %d; boundaries must "
                                "increase and lie within 1..%d",
                                s, first[s], c.layers - 1);
    int *units = bg_malloc(sizeof *units * (size_t)c.stages);
    if (units == NULL) return bg_error_set(BG_ERR_NOMEM, "partition: out of memory");
    for (int s = 0; s < c.stages; s++) {
        units[s] = unit_at(&c, first[s]);
        if (units[s] < 0) {
            free(units);
            return bg_error_set(BG_ERR_INVALID,
                                "split: stage %d would start at layer %d, inside a residual "
                                "block",
                                s, first[s]);
        }
    }
    const bg_status_t st = bg_partition_build_result(&c, units, out);
    free(units);
    return st;
}

size_t bg_partition_device_peak_bytes(const bg_partition_t *p, int device) {
    size_t bytes = 0;
    for (int s = 0; s < p->stages; s++)
        if (p->stage[s].device == device) bytes += p->stage[s].peak_bytes;
    return bytes;
}

void bg_partition_destroy(bg_partition_t *p) {
    if (p == NULL) return;
    free(p->stage);
    free(p);
}

double bg_partition_step_seconds(const bg_partition_t *p, const bg_partition_config_t *cfg) {
    const bg_cost_config_t *cost = bg_cost_model_config(cfg->model);
    double total = 0, heaviest = 0;
    for (int d = 0; d < cfg->devices; d++) {
        double load = 0;
        for (int s = d; s < p->stages; s += cfg->devices) load += p->stage[s].seconds;
        if (load > heaviest) heaviest = load;
        total += load;
    }
    /* The theory's idle share of the fill and drain (exact for equal
     * stages), of the other devices' work. */
    return bg_partition_step_of(heaviest, total, cost->microbatches,
                                bg_schedule_drain_share(cost->split_backward, cfg->devices,
                                                        cost->microbatches, cfg->chunks));
}
