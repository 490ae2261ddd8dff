#include "partition.h"

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

/* The programme works on units, not layers: unit u is layers [cut[u],
 * cut[u + 1]), and stages start and end only between units (a residual
 * block stays whole: bg_cost_model_cuts). Without blocks a unit is a
 * layer. Results name layers (price translates). */
typedef struct context {
    const bg_partition_config_t *cfg;
    int layers, stages;
    int units;
    const int *cut; /* units + 1 layer boundaries */
    /* 1: each device's stages are checked together against its whole
     * capacity (BG_PARTITION_CHECK_DEVICES with V > 1). */
    int per_device;
    /* Bytes every stage may take beyond its capacity in DP_TIME: 0, or,
     * when nothing fits, the least worst overflow, so that the fastest of
     * the splits that overflow least is found. */
    size_t allowance;
} context_t;

static const bg_cost_link_t *link_between(const context_t *c, int from_stage, int to_stage) {
    const bg_partition_config_t *cfg = c->cfg;
    if (cfg->links == NULL) return &cfg->link;
    int k = cfg->devices;
    return &cfg->links[(from_stage % k) * k + to_stage % k];
}

/* The schedule's stash slots and the channel slots of stage s. */
static bg_cost_stage_t stage_slots(const context_t *c, int s) {
    const bg_partition_config_t *cfg = c->cfg;
    const int k = cfg->devices, mb = bg_cost_model_config(cfg->model)->microbatches;
    bg_cost_stage_t stage = {
        .stash_slots = cfg->stash_slots != NULL ? cfg->stash_slots[s] : 1,
        .input_channel_slots = s > 0 ? bg_schedule_ring_slots(k, mb, s - 1, s) : 0,
        .grad_channel_slots = s + 1 < c->stages ? bg_schedule_ring_slots(k, mb, s + 1, s) : 0,
        .device = &cfg->device[s % k],
    };
    if (stage.stash_slots < 1) stage.stash_slots = 1;
    return stage;
}

/* A stage's compute per micro-batch: what only grows as it takes more
 * layers. */
static double compute_of(const bg_cost_time_t *time) {
    return time->forward + time->backward + time->recompute;
}

/* The compute of stage s on units [first, last). */
static bg_cost_time_t stage_time(const context_t *c, int s, int first, int last) {
    const bg_partition_config_t *cfg = c->cfg;
    return bg_cost_stage_time(cfg->model, &cfg->device[s % cfg->devices], c->cut[first],
                              c->cut[last]);
}

/* Stage s's seconds per micro-batch on units [first, last): its compute
 * (into *time) plus its sends (into *send). */
static double stage_seconds(const context_t *c, int s, int first, int last, bg_cost_time_t *time,
                            double *send) {
    const bg_cost_model_t *m = c->cfg->model;
    *time = stage_time(c, s, first, last);
    *send = 0;
    if (last < c->units)
        *send += bg_cost_transfer_seconds(link_between(c, s, s + 1),
                                          bg_cost_boundary_bytes(m, c->cut[last]));
    if (first > 0 && !bg_cost_model_config(m)->forward_only) /* the gradient back */
        *send += bg_cost_transfer_seconds(link_between(c, s, s - 1),
                                          bg_cost_boundary_bytes(m, c->cut[first]));
    return compute_of(time) + *send;
}

/* Prices stage s holding units [first, last). */
static void price(const context_t *c, int s, int first, int last, bg_partition_stage_t *out) {
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

/* The unit starting at layer boundary `layer`, one a result's stage
 * starts at (price set it from a unit). */
static int unit_at(const context_t *c, int layer) {
    return bg_cost_model_cut_index(c->cfg->model, layer);
}

static size_t overflow_of(const bg_partition_stage_t *st) {
    if (st->capacity_bytes == 0 || st->peak_bytes <= st->capacity_bytes) return 0;
    return st->peak_bytes - st->capacity_bytes;
}

/* The stage's peak without the terms that scale with its input activation
 * (bg_cost_stage_input_bytes). The rest, parameters, layer outputs, widest
 * activation, workspace, only grows as the stage takes more layers: a lower
 * bound on every longer stage ending where it ends. */
static size_t growing_bytes(const context_t *c, const bg_cost_stage_t *slots,
                            const bg_partition_stage_t *st) {
    bg_cost_stage_t stage = *slots;
    stage.first_layer = st->first_layer;
    stage.last_layer = st->last_layer;
    return st->peak_bytes - bg_cost_stage_input_bytes(c->cfg->model, &stage);
}

static bg_status_t check_config(const bg_partition_config_t *cfg, context_t *c) {
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
static bg_status_t build_result(const context_t *c, const int *first, bg_partition_t **out) {
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
        price(c, s, first[s], last, &p->stage[s]);
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
 * ending at j is ruled out too (compute and the growing floor only grow
 * as i falls) given `best`. */
static double candidate(const context_t *c, dp_mode_t mode, int s, int i, int j, double before,
                        double best, const bg_cost_stage_t *slots, int *stop) {
    bg_partition_stage_t st;
    price(c, s, i, j, &st);
    const size_t floor = growing_bytes(c, slots, &st);
    const int floor_over = st.capacity_bytes != 0 && floor > st.capacity_bytes;
    double value;
    if (mode == DP_TIME) {
        const size_t limit = st.capacity_bytes + c->allowance;
        const int limited = st.capacity_bytes != 0;
        *stop = compute_of(&st.time) >= best || (limited && floor > limit);
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
static int read_split(const context_t *c, const double *last_row, dp_tables_t *t) {
    const int n = c->units;
    if (last_row[n] == DBL_MAX) return 0;
    for (int s = c->stages - 1, j = n; s >= 0; s--) {
        t->first[s] = t->cut[(size_t)s * (size_t)(n + 1) + (size_t)j];
        j = t->first[s];
    }
    return 1;
}

static int solve(const context_t *c, dp_mode_t mode, dp_tables_t *t) {
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
static int solve_total(const context_t *c, double cap, dp_tables_t *t) {
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
                const bg_cost_time_t time = stage_time(c, s, window, j);
                if (compute_of(&time) <= cap) break;
            }
            if (s == 0) {
                price(c, 0, 0, j, &st);
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
                price(c, s, run.at, j, &st);
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
static int front_point(const context_t *c, double cap, dp_tables_t *t, bg_partition_t **point) {
    if (!solve_total(c, cap, t)) return 0;
    return build_result(c, t->first, point) == BG_OK ? 1 : -1;
}

/* Prices stages lo..hi of split first[] into stage[]: 1 if they all fit. */
static int price_fitting(const context_t *c, const int *first, int lo, int hi,
                         bg_partition_stage_t *stage) {
    int fits = 1;
    for (int s = lo; s <= hi; s++) {
        price(c, s, first[s], s + 1 < c->stages ? first[s + 1] : c->units, &stage[s]);
        fits &= overflow_of(&stage[s]) == 0;
    }
    return fits;
}

/* Shifts boundaries first[b..e] by `step` (+1 or -1) layers: a layer
 * moves from stage b - 1 to stage e or back, each stage between passing
 * one on. 0 (and nothing moved) when a stage would be left empty. */
static int shift_boundaries(const context_t *c, int *first, int b, int e, int step) {
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
static int balance_devices(const context_t *c, int *first) {
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
static int balance_point(const context_t *c, bg_partition_t **point) {
    if (c->cfg->chunks == 1) return 0;
    int *first = bg_malloc(sizeof *first * (size_t)c->stages);
    bg_partition_t *moved = NULL;
    if (first != NULL)
        for (int s = 0; s < c->stages; s++) first[s] = unit_at(c, (*point)->stage[s].first_layer);
    const int ok =
        first != NULL && balance_devices(c, first) == 0 && build_result(c, first, &moved) == BG_OK;
    free(first);
    bg_partition_destroy(*point);
    *point = moved;
    return ok ? 0 : -1;
}

/* Keeps `point` (balanced across devices first, balance_point) as *best
 * when its step is shorter (the earlier wins ties), else frees it. 0, or
 * -1 when out of memory. */
static int keep_shorter(const context_t *c, bg_partition_t *point, bg_partition_t **best,
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
static int solve_step(const context_t *c, dp_tables_t *t) {
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
    if (build_result(c, t->first, &best) != BG_OK) return -1;
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
static bg_status_t fastest_least_overflow(context_t *c, dp_tables_t *t) {
    bg_partition_t *least = NULL;
    BG_CHECK(build_result(c, t->first, &least));
    c->allowance = least->overflow_bytes;
    bg_partition_destroy(least);
    (void)solve(c, DP_TIME, t); /* on 0, t->first keeps the overflow's split */
    c->allowance = 0;
    return BG_OK;
}

bg_status_t bg_partition_create(const bg_partition_config_t *cfg, bg_partition_t **out) {
    context_t c;
    BG_CHECK(check_config(cfg, &c));
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
        if (st == BG_OK) st = build_result(&c, t.first, out);
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

/* ---- splits checked per device (bg_partition_search_devices) ---- */

/* A depth-first search over the stages' ends: stage s starts at unit i and
 * tries each end, the best split found so far bounding the rest. It ranks
 * splits by their slowest stage, or with by_step by their step
 * (bg_partition_step_seconds); the other figure breaks ties. A device's
 * bytes so far (used) bound its later stages' memory, and all devices'
 * room left bounds the layers left: wherever they go, their parameters,
 * gradients and optimizer state must fit somewhere. */
typedef struct device_search {
    const context_t *c;
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

/* bg_partition_step_seconds of a split whose devices' loads (the sums of
 * their stages' seconds) add up to `total`, the heaviest `heaviest`, at M
 * micro-batches and the fill and drain's idle share `share`. */
static double step_of(double heaviest, double total, int microbatches, double share) {
    return microbatches * heaviest + (total - heaviest) * share;
}

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
    return step_of(heaviest, total, bg_cost_model_config(x->c->cfg->model)->microbatches, x->share);
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
static size_t state_after(const context_t *c, int j) {
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
static int even_end(const context_t *c, int s, int i, int jmin, int jmax) {
    const bg_cost_time_t rest = stage_time(c, s, i, c->units);
    const double share = compute_of(&rest) / (double)(c->stages - s);
    int lo = jmin, hi = jmax;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        const bg_cost_time_t t = stage_time(c, s, i, mid);
        if (compute_of(&t) >= share)
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
    const context_t *c = x->c;
    if (x->budget-- <= 0) return 1;
    bg_partition_stage_t st;
    price(c, s, i, j, &st);
    const int d = st.device;
    const size_t cap = st.capacity_bytes;
    const double compute = compute_of(&st.time);
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
    const context_t *c = x->c;
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
    const context_t *c = x->c;
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
            price(c, s, i, j, &st);
            if (compute_of(&st.time) > limit) break; /* and every later end */
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
    const context_t *c = x->c;
    double hi = 0, slowest = 0, step = 0;
    for (int d = 0; d < c->cfg->devices; d++) {
        const bg_cost_time_t whole = stage_time(c, d, 0, c->units);
        if (compute_of(&whole) > hi) hi = compute_of(&whole);
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
    context_t c;
    BG_CHECK(check_config(cfg, &c));
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
        if (x.found) st = build_result(&c, x.best_first, &found);
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

bg_status_t bg_partition_evaluate(const bg_partition_config_t *cfg, const int *first,
                                  bg_partition_t **out) {
    context_t c;
    BG_CHECK(check_config(cfg, &c));
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
    const bg_status_t st = build_result(&c, units, out);
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
    return step_of(heaviest, total, cost->microbatches,
                   bg_schedule_drain_share(cost->split_backward, cfg->devices, cost->microbatches,
                                           cfg->chunks));
}
