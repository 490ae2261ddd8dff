/* What would make a plan that does not fit fit: the explanation train,
 * plan and simulate print (and plan --json lists) when a stage overflows its
 * memory. Each change is tried as a whole plan with the planner, one at a
 * time, then the fewest memory savings together, then all of them, on the
 * devices given and on other counts of them (planning.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "cli.h"
#include "cuda/backend_cuda.h"
#include "optimizer.h"
#include "planning.h"
#include "progress.h"
#include "schedule.h"

static const double mib = 1024.0 * 1024.0;

/* Erases the search's progress line, if drawn, before a line of advice. */
static void clear_search_line(bg_advice_t *advice) { bg_progress_clear_line(&advice->progress); }

/* The bytes of the model's parameters, gradients and the state of
 * r's optimizer (an evaluation's: its parameters alone), in the planner's
 * float32: every stage holds its own share, so devices that cannot hold
 * them together cannot fit any split. */
static double model_state_bytes(const bg_plan_request_t *r) {
    const double params = (double)r->spec->total_params * (double)bg_dtype_size(BG_F32);
    if (r->forward_only) return params;
    return params * (2.0 + bg_optimizer_state_buffers(&r->optimizer));
}

/* Whether k devices could hold `state` bytes (model_state_bytes) at all: a
 * device's capacity bounds its stages' sum, and one without a capacity (0)
 * holds anything. Planning what fails this is wasted: a 2,000-layer model
 * on cpu:64 with --device-mem 512K tried 64 counts in 7.0 s, and then none
 * in 1.0 s; a 100,000-layer one on cpu:64 with --device-mem 10M took 64 s
 * over its savings, and then none. */
static int could_hold(const bg_cost_device_t *devices, int k, double state) {
    double capacity = 0;
    for (int d = 0; d < k; d++) {
        if (devices[d].memory_bytes == 0) return 1;
        capacity += (double)devices[d].memory_bytes;
    }
    return capacity >= state;
}

/* The plan of request r where it fits, else NULL: planned only to ask
 * whether it fits (fits_only), and not at all where the devices could not
 * hold the model's state. Where it does not fit as its chain runs, the
 * chain the other way round counts too, as the run would take it
 * (bg_cli_plan_make; *reversed says so); out of memory planning that is
 * no fit. */
static bg_plan_t *fitting_plan(const bg_plan_request_t *r, bg_advice_t *advice, int *reversed) {
    *reversed = 0;
    if (!could_hold(r->device, r->devices, model_state_bytes(r))) return NULL;
    bg_plan_request_t v = *r;
    /* With --chunks V, what fits may be a split checked per device, which
     * only a whole plan searches for (fits_only stops at the first split of
     * least overflow per stage): asked whole, so that the advice and the
     * plan agree. */
    v.fits_only = r->chunks == 1;
    bg_plan_t *p = NULL;
    const bg_status_t made = bg_plan_create_either_way(&v, &p, reversed);
    bg_progress_tick(&advice->progress, ++advice->plans);
    if (made == BG_OK && p->partition->fits) return p;
    bg_plan_destroy(p);
    return NULL;
}

int bg_advice_variant_fits(const bg_plan_request_t *r, bg_advice_t *advice) {
    int reversed;
    bg_plan_t *p = fitting_plan(r, advice, &reversed);
    const int fits = p != NULL;
    bg_plan_destroy(p);
    return fits;
}

int bg_advice_try_variant(const bg_plan_request_t *r, const char *what, bg_advice_t *advice) {
    int reversed;
    /* A variant that does not fit is not shown. */
    bg_plan_t *p = fitting_plan(r, advice, &reversed);
    if (p == NULL) return 0;
    size_t peak = 0, device_peak = 0;
    for (int s = 0; s < p->partition->stages; s++)
        if (p->partition->stage[s].peak_bytes > peak) peak = p->partition->stage[s].peak_bytes;
    /* Checked per device (with --chunks V): what fit is each device's
     * stages together. */
    const int per_device = p->partition->memory_check == BG_PARTITION_CHECK_DEVICES;
    for (int d = 0; per_device && d < p->request.devices; d++) {
        const size_t bytes = bg_partition_device_peak_bytes(p->partition, d);
        if (bytes > device_peak) device_peak = bytes;
    }
    /* An evaluation's advice names what fits, without times: its
     * forward-only steps are simulated, but a fit, not speed, is what an
     * evaluation asks of a change. */
    char step[64] = "";
    if (!r->forward_only)
        snprintf(step, sizeof step, ", step %.3f ms without the optimizer step", p->step_s * 1e3);
    clear_search_line(advice);
    fprintf(stderr, "  %-32s fits: largest %s %.2f MiB%s%s\n", what,
            per_device ? "device's stages" : "stage",
            (double)(per_device ? device_peak : peak) / mib, step,
            reversed ? ", on the devices the other way round" : "");
    /* Memory it saves, but the run it makes learns otherwise (a new user
     * took it, and reached 0.13 test accuracy in 100 steps where Adam had
     * 0.76 in 150). */
    const int sgd = r->optimizer.kind == BG_OPTIMIZER_SGD;
    if (sgd && advice->optimizer.kind != BG_OPTIMIZER_SGD && !advice->noted_sgd) {
        advice->noted_sgd = 1;
        fprintf(stderr, "    (--optimizer sgd trains another way: plain SGD, at --lr 0.01 unless "
                        "given and without momentum unless --momentum is; it may need another "
                        "--lr or more steps to learn as well)\n");
    }
    if (sgd && r->optimizer.sgd.momentum == 0 && advice->optimizer.kind == BG_OPTIMIZER_SGD &&
        advice->optimizer.sgd.momentum != 0 && !advice->noted_momentum) {
        advice->noted_momentum = 1;
        fprintf(stderr, "    (--momentum 0 trains another way: SGD without momentum, which may "
                        "need another --lr or more steps to learn as well)\n");
    }
    if (!r->forward_only && (advice->fastest_s == 0 || p->step_s < advice->fastest_s))
        advice->fastest_s = p->step_s;
    cJSON *change = advice->found != NULL ? cJSON_CreateObject() : NULL;
    if (change != NULL) {
        cJSON_AddStringToObject(change, "change", what);
        bg_cli_json_add_uint(change, "largest_stage_bytes", peak);
        if (per_device) bg_cli_json_add_uint(change, "largest_device_bytes", device_peak);
        cJSON_AddNumberToObject(change, "step_ms", p->step_s * 1e3);
        if (reversed) cJSON_AddTrueToObject(change, "devices_reversed");
        cJSON_AddItemToArray(advice->found, change);
    }
    bg_plan_destroy(p);
    return 1;
}

/* The devices of request r with every GPU's convolution workspace limit
 * at most `limit` bytes, into `out` (r->devices entries). */
static void with_conv_limit(const bg_plan_request_t *r, size_t limit, bg_cost_device_t *out) {
    for (int d = 0; d < r->devices; d++) {
        out[d] = r->device[d];
        if (out[d].own_conv_workspace && out[d].conv_workspace_bytes > limit)
            out[d].conv_workspace_bytes = limit;
    }
}

size_t bg_advice_conv_limit(const bg_plan_request_t *r) {
    size_t least = SIZE_MAX;
    for (int d = 0; d < r->devices; d++)
        if (r->device[d].own_conv_workspace && r->device[d].conv_workspace_bytes < least)
            least = r->device[d].conv_workspace_bytes;
    return least;
}

/* Where what is over (a stage, or checked per device a device's stages)
 * holds the convolution workspace a GPU counts (--conv-workspace, all of
 * it: cuDNN's choice is known only on the GPU), tries the largest whole
 * MiB limit on every GPU that fits: from the one that takes away the
 * excess, shared among the stages there that hold a convolution (or 0,
 * where that does not fit: another split may), up to the workspace the
 * plan failed with, halving the gap. The excess alone undersays it where
 * a plan is checked otherwise than it failed (with --chunks V, against
 * 1/V of a device, then as a device holds its stages together). Returns 1
 * if one fit. */
static int try_conv_workspace(const bg_plan_t *p, bg_advice_t *advice) {
    const bg_plan_request_t *r = &p->request;
    const bg_partition_t *part = p->partition;
    const int per_device = part->memory_check == BG_PARTITION_CHECK_DEVICES;
    const int over = per_device ? part->worst_device : part->stage[part->worst_stage].device;
    const bg_cost_device_t *dev = &r->device[over];
    size_t holders = 0;
    for (int s = 0; s < part->stages; s++)
        if ((per_device ? part->stage[s].device == over : s == part->worst_stage) &&
            bg_cost_has_convolution(p->model, part->stage[s].first_layer,
                                    part->stage[s].last_layer))
            holders++;
    if (!dev->own_conv_workspace || holders == 0) return 0;
    const size_t mib_bytes = (size_t)1 << 20;
    const size_t each = (part->overflow_bytes + holders - 1) / holders;
    /* lo fits (once checked); hi, the workspace that failed or more, not. */
    size_t lo =
        each < dev->conv_workspace_bytes ? (dev->conv_workspace_bytes - each) / mib_bytes : 0;
    size_t hi = (dev->conv_workspace_bytes + mib_bytes - 1) / mib_bytes;
    bg_cost_device_t *less = malloc(sizeof *less * (size_t)r->devices);
    if (less == NULL) return 0;
    bg_plan_request_t v = *r;
    v.device = less;
    with_conv_limit(r, lo * mib_bytes, less);
    int fits = bg_advice_variant_fits(&v, advice);
    if (!fits && lo > 0) {
        lo = 0;
        with_conv_limit(r, 0, less);
        fits = bg_advice_variant_fits(&v, advice);
    }
    while (fits && hi > lo + 1) {
        const size_t mid = lo + (hi - lo) / 2;
        with_conv_limit(r, mid * mib_bytes, less);
        if (bg_advice_variant_fits(&v, advice))
            lo = mid;
        else
            hi = mid;
    }
    if (fits) {
        char what[64];
        snprintf(what, sizeof what, "--conv-workspace %zu%s", lo, lo > 0 ? "M" : "");
        with_conv_limit(r, lo * mib_bytes, less);
        fits = bg_advice_try_variant(&v, what, advice);
    }
    free(less);
    return fits;
}

/* The most micro-batches `--microbatches auto` would try for r: the
 * smallest micro-batches, whose stash is least. */
static int most_microbatches(const bg_plan_request_t *r) {
    const int multiple = bg_plan_microbatch_multiple(r, 0);
    const int count = bg_plan_microbatch_candidates(r->batch, multiple, NULL, 0);
    int *ms = malloc(sizeof *ms * (size_t)(count > 0 ? count : 1));
    if (ms == NULL) return r->microbatches;
    bg_plan_microbatch_candidates(r->batch, multiple, ms, count);
    int most = r->microbatches;
    for (int k = 0; k < count; k++)
        if (ms[k] > most) most = ms[k];
    free(ms);
    return most;
}

/* With request v's settings: the layer that needs the most memory on any
 * stage that holds it (*layer; a residual block, which a stage holds
 * whole, counts as one, *layer its first and *last its last), and that
 * need (returned; 0 when it cannot be worked out). A bound from below
 * (bg_cost_range_floor): one micro-batch in flight, none of what a stage's
 * ends add, and the device where it needs least (a GPU counts its
 * convolution workspace limit). */
static size_t largest_layer_floor(const bg_plan_request_t *v, int *layer, int *last) {
    bg_cost_model_t *model = NULL;
    if (bg_plan_cost_model_create(v, &model) != BG_OK) return 0;
    int places = 0;
    const int *cut = bg_cost_model_cuts(model, &places);
    size_t most = 0;
    for (int u = 0; u + 1 < places; u++) {
        size_t least = SIZE_MAX;
        for (int d = 0; d < v->devices; d++) {
            const bg_cost_memory_t m =
                bg_cost_range_floor(model, cut[u], cut[u + 1], &v->device[d]);
            if (bg_cost_memory_peak(&m) < least) least = bg_cost_memory_peak(&m);
        }
        if (least > most) {
            most = least;
            *layer = cut[u];
            *last = cut[u + 1] - 1;
        }
    }
    bg_cost_model_destroy(model);
    return most;
}

/* The most a stage of `p` may have on any of its devices (0: one has no
 * limit): the whole device, even with --chunks V, where the planner's
 * split is checked per device when no split keeps each stage within 1/V
 * (so a stage may take more than 1/V where the device's other stages leave
 * room). A layer larger than that fits no device of the plan on any stage;
 * not the worst stage's device alone: GPUs of unequal memory, one
 * of them too small for anything, are helped by the others. */
static size_t largest_searched_capacity(const bg_plan_t *p) {
    size_t most = 0;
    for (int d = 0; d < p->request.devices; d++) {
        const size_t capacity = p->device[d].memory_bytes;
        if (capacity == 0) return 0;
        if (capacity > most) most = capacity;
    }
    return most;
}

/* The most a stage could have for more or other devices to help: the
 * failed plan's largest (largest_searched_capacity), or a whole GPU of the
 * machine's where that is more (a layer too large for a share of GPU 0,
 * or for a small GPU listed, fits a large one; until 2026-12-05 "more
 * devices cannot help" there). 0: no limit. */
static size_t largest_capacity(const bg_plan_t *failed, const bg_placement_t *placement) {
    const size_t searched = largest_searched_capacity(failed);
    const size_t gpu = bg_placement_largest_gpu(placement);
    return searched == 0 ? 0 : searched > gpu ? searched : gpu;
}

/* How the advice's last line begins, after `savings` listed above it: with
 * none (the request makes every one already), only micro-batch and device
 * counts were tried, and "these" would name nothing (until 2026-12-06). */
static const char *none_fits_words(int savings) {
    return savings > 0 ? "none of these fits, alone or together"
                       : "no micro-batch count or device count fits";
}

/* Says that layer `layer` needs at least `need` bytes on any stage that
 * holds it, over the `capacity` a stage may have, so more devices cannot help; `with`
 * names the settings (may be ""), after the `savings` tried (none_fits_words).
 * With `plan_json`, also there as "layer_too_large". */
static void print_layer_too_large(const bg_plan_request_t *r, const bg_placement_t *placement,
                                  int layer, int last, size_t need, size_t capacity,
                                  const char *with, int savings, bg_advice_t *advice,
                                  cJSON *plan_json) {
    cJSON *bound = plan_json != NULL ? cJSON_AddObjectToObject(plan_json, "layer_too_large") : NULL;
    if (bound != NULL) {
        cJSON_AddNumberToObject(bound, "layer", layer);
        if (last > layer) cJSON_AddNumberToObject(bound, "last_layer", last);
        cJSON_AddStringToObject(bound, "kind", bg_layer_kind_name(r->spec->layers[layer].kind));
        bg_cli_json_add_uint(bound, "bytes_at_least", need);
        bg_cli_json_add_uint(bound, "stage_capacity_bytes", capacity);
    }
    char need_text[32], cap_text[32], remedy[448];
    bg_cli_group_digits((int64_t)need, need_text, sizeof need_text);
    /* Virtual devices divide their GPU: a larger share is fewer of them
     * (tried before this is said) or a larger GPU, not a --device-mem it
     * may not have. */
    const int gpus = bg_placement_all_of_kind(placement, BG_DEVICE_CUDA);
    const int virtual_devices = bg_advice_shares_one_gpu(placement);
    /* A GPU holds, before any stage, cuBLAS's workspace and (where its size
     * is a topology file's, not CUDA's free memory) the CUDA context. */
    const size_t context = bg_placement_context_bytes(placement);
    const size_t workspace_mib = (size_t)BG_CUDA_CUBLAS_WORKSPACE_BYTES >> 20;
    char gpu_text[32], gpu_need[224];
    bg_cli_group_digits((int64_t)(need + context + BG_CUDA_CUBLAS_WORKSPACE_BYTES), gpu_text,
                        sizeof gpu_text);
    if (context > 0)
        snprintf(gpu_need, sizeof gpu_need,
                 "more than %s bytes: the layer's %s, %zu MiB for the CUDA context and %zu MiB "
                 "for cuBLAS's workspace",
                 gpu_text, need_text, context >> 20, workspace_mib);
    else
        snprintf(gpu_need, sizeof gpu_need,
                 "more than %s bytes free: the layer's %s and %zu MiB for cuBLAS's workspace",
                 gpu_text, need_text, workspace_mib);
    /* (A layer a whole GPU of the machine holds is not too large here:
     * largest_capacity.) */
    if (gpus && placement->device_mem == 0 && capacity > 0)
        /* A --device-mem past the GPU's memory would only plan what it
         * cannot hold. */
        snprintf(remedy, sizeof remedy,
                 "brigade does not cut a layer across devices, so it takes GPUs of %s", gpu_need);
    else
        snprintf(remedy, sizeof remedy,
                 "give each device more than %s (--device-mem; a bound from below: its "
                 "stage's input and channels, and the micro-batches in flight there, add to "
                 "it%s)",
                 need_text, r->chunks > 1 ? ", and the device's other stages" : "");
    char what[96];
    if (last > layer)
        snprintf(what, sizeof what,
                 "the residual block of layers %d..%d (which a stage holds whole) needs", layer,
                 last);
    else
        snprintf(what, sizeof what, "layer %d (%s) needs", layer,
                 bg_layer_kind_name(r->spec->layers[layer].kind));
    clear_search_line(advice);
    fprintf(stderr,
            "  %s: %s at least %s bytes (%.2f MiB) on any stage that holds it%s, over the %s "
            "byte%s a stage may have here, so more %s cannot help; %s\n",
            none_fits_words(savings), what, need_text, (double)need / mib, with,
            bg_cli_group_digits((int64_t)capacity, cap_text, sizeof cap_text),
            capacity == 1 ? "" : "s", virtual_devices ? "virtual devices" : "devices", remedy);
}

/* A memory saving the explanation may suggest: its options, and what it
 * changes in a request, whose devices are `devices`, a copy of the
 * request's to change. */
typedef struct saving {
    const char *words;
    void (*apply)(bg_plan_request_t *v, bg_cost_device_t *devices);
    int changes_training; /* another optimizer: not the same model trained */
} saving_t;

static void without_split(bg_plan_request_t *v, bg_cost_device_t *d) {
    (void)d;
    v->split = NULL;
}
static void with_recompute(bg_plan_request_t *v, bg_cost_device_t *d) {
    (void)d;
    v->recompute = 1;
}
static void with_sgd(bg_plan_request_t *v, bg_cost_device_t *d) {
    (void)d;
    v->optimizer.kind = BG_OPTIMIZER_SGD;
    v->optimizer.sgd.momentum = 0;
}
static void without_momentum(bg_plan_request_t *v, bg_cost_device_t *d) {
    (void)d;
    v->optimizer.sgd.momentum = 0;
}
static void with_1f1b(bg_plan_request_t *v, bg_cost_device_t *d) {
    (void)d;
    v->schedule = BG_SCHEDULE_1F1B;
}
static void without_conv_workspace(bg_plan_request_t *v, bg_cost_device_t *d) {
    with_conv_limit(v, 0, d);
}

/* Whether a stage of request r (priced by `model`) holding a convolution
 * counts workspace on a GPU: a limit above 0 and a conv2d in the model. */
static int counts_conv_workspace(const bg_plan_request_t *r, const bg_cost_model_t *model) {
    const size_t limit = bg_advice_conv_limit(r);
    return limit != SIZE_MAX && limit > 0 &&
           bg_cost_has_convolution(model, 0, bg_cost_model_layers(model));
}

/* The savings r does not make yet, in the order they are written; returns
 * their number (at most BG_MAX_SAVINGS). */
enum { BG_MAX_SAVINGS = 5 };
static int savings_of(const bg_plan_request_t *r, const bg_cost_model_t *model, saving_t *out) {
    int n = 0;
    if (r->split != NULL) out[n++] = (saving_t){"without --split", without_split, 0};
    /* An evaluation keeps nothing for a backward, and updates nothing. */
    if (!r->recompute && !r->forward_only) out[n++] = (saving_t){"--recompute", with_recompute, 0};
    if (r->optimizer.kind != BG_OPTIMIZER_SGD)
        out[n++] = (saving_t){"--optimizer sgd", with_sgd, 1};
    else if (r->optimizer.sgd.momentum != 0)
        out[n++] = (saving_t){"--momentum 0", without_momentum, 1};
    /* GPipe holds every micro-batch on every stage; ZB-H1 keeps the inputs
     * of the deferred weight gradients beside 1F1B's stash. */
    if ((r->schedule == BG_SCHEDULE_GPIPE || r->schedule == BG_SCHEDULE_ZB_H1) && !r->forward_only)
        out[n++] = (saving_t){"--schedule 1f1b", with_1f1b, 0};
    if (counts_conv_workspace(r, model))
        out[n++] = (saving_t){"--conv-workspace 0", without_conv_workspace, 0};
    return n;
}

/* r with the savings of `mask` made (*v, whose devices are then `devices`,
 * r->devices entries), and their words (what). */
static void apply_savings(const bg_plan_request_t *r, const saving_t *savings, int n, unsigned mask,
                          bg_plan_request_t *v, bg_cost_device_t *devices, char *what,
                          size_t size) {
    *v = *r;
    for (int d = 0; d < r->devices; d++) devices[d] = r->device[d];
    v->device = devices;
    int at = 0;
    what[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (!(mask & 1u << i)) continue;
        savings[i].apply(v, devices);
        at += snprintf(what + at, size - (size_t)at, "%s%s", at > 0 ? " " : "", savings[i].words);
    }
}

/* How many savings a set of them (a mask over savings_of's) makes. */
static int savings_in(unsigned mask) {
    int count = 0;
    for (; mask != 0; mask &= mask - 1) count++;
    return count;
}

/* Whether more (or fewer) devices could help request v, whose stages the
 * failed plan searched: only where every layer may fit some stage on some
 * device (largest_searched_capacity), or where fewer devices each
 * have more memory. */
static int device_counts_may_help(const bg_plan_request_t *v, const bg_plan_t *failed,
                                  const bg_placement_t *placement, int host_share) {
    int layer = 0, last = 0;
    const size_t floor = largest_layer_floor(v, &layer, &last);
    const size_t searched = largest_capacity(failed, placement);
    return bg_advice_fewer_have_more(placement, host_share) || !(searched > 0 && floor > searched);
}

/* Where try_microbatches also searches device counts: the failed plan and
 * the placement whose devices are counted (bg_advice_try_device_counts). */
typedef struct device_search {
    const bg_plan_t *failed;
    const bg_placement_t *placement;
    int host_share;
} device_search_t;

/* Tries the micro-batch counts `--microbatches auto` would (divisors of B,
 * powers of two, and for interleaved K times powers of two), nearest to
 * the request first in each direction, and prints the nearest above and
 * the nearest below that fit, after `with` (the options r already holds,
 * may be ""). With `devices`, a count fits where some device count then
 * does, and the fewest such devices are printed with it. Returns 1 if one
 * did. */
static int try_microbatches(const bg_plan_request_t *r, const char *with,
                            const device_search_t *devices, bg_advice_t *advice) {
    const int multiple = bg_plan_microbatch_multiple(r, 0);
    const int count = bg_plan_microbatch_candidates(r->batch, multiple, NULL, 0);
    int *ms = malloc(sizeof *ms * (size_t)(count > 0 ? count : 1));
    if (ms == NULL) return 0;
    bg_plan_microbatch_candidates(r->batch, multiple, ms, count);
    bg_plan_request_t v = *r;
    char what[192];
    int helped = 0;
    for (int up = 1; up >= 0; up--) {
        for (int k = 0; k < count; k++) {
            const int m = up ? ms[k] : ms[count - 1 - k];
            if (up ? m <= r->microbatches : m >= r->microbatches) continue;
            v.microbatches = m;
            snprintf(what, sizeof what, "%s%s--microbatches %d", with, with[0] ? " " : "", m);
            int fits;
            if (devices == NULL)
                fits = bg_advice_try_variant(&v, what, advice);
            else
                fits = device_counts_may_help(&v, devices->failed, devices->placement,
                                              devices->host_share) &&
                       bg_advice_try_device_counts(&v, devices->placement, devices->host_share,
                                                   what, 0, advice);
            if (fits) {
                helped = 1;
                break;
            }
        }
    }
    free(ms);
    return helped;
}

/* Whether `saving` may be part of a faster way (try_faster_way): not
 * another optimizer, which a user chose for its training, not its speed,
 * nor a GPU's convolution workspace of 0, which the cost model does not
 * price (it would look free, where cuDNN then has fewer algorithms). */
static int may_pair(const saving_t *saving) {
    return !saving->changes_training && saving->apply != without_conv_workspace;
}

/* Where a change alone fits (the lines above), a faster way that fits:
 * another micro-batch count alone, past the nearest ones listed, or two
 * changes together, a saving with another or with a micro-batch count
 * `--microbatches auto` would try, among the savings that train the same
 * model the same way (may_pair). Under gpipe at 24 MiB a device the origin
 * CNN (batch 256, M = 4, cpu:2) fits with --recompute alone in 22.0 ms a
 * step, and with --schedule 1f1b --microbatches 16 in 15.1 (a walk found
 * such a pair 35% faster, unsaid). Prints the fastest, of the fewest
 * changes where steps tie, where it is at least 5% faster than every
 * change listed (advice->fastest_s). Not under --microbatches auto, which
 * chooses the count itself once a change fits, nor for an evaluation,
 * whose advice says no times (above). */
static void try_faster_way(const bg_plan_request_t *r, const saving_t *savings, int n,
                           int auto_microbatches, bg_cost_device_t *scratch, bg_advice_t *advice) {
    if (r->forward_only || auto_microbatches || !(advice->fastest_s > 0)) return;
    double best_s = advice->fastest_s * 0.95;
    int best_mask = -1, best_m = 0;
    char what[192];
    bg_plan_request_t v;
    for (unsigned mask = 0; mask < 1u << n; mask++) {
        const int bits = savings_in(mask);
        int pairs = 1;
        for (int i = 0; i < n; i++)
            if (mask >> i & 1u) pairs &= may_pair(&savings[i]);
        if (bits > 2 || !pairs) continue;
        apply_savings(r, savings, n, mask, &v, scratch, what, sizeof what);
        /* Two savings at the request's count; one, or none, with each
         * other count. */
        const int multiple = bg_plan_microbatch_multiple(&v, 0);
        const int count = bits == 2 ? 1 : bg_plan_microbatch_candidates(v.batch, multiple, NULL, 0);
        int *ms = malloc(sizeof *ms * (size_t)(count > 0 ? count : 1));
        if (ms == NULL) return;
        if (bits == 2)
            ms[0] = r->microbatches;
        else
            bg_plan_microbatch_candidates(v.batch, multiple, ms, count);
        for (int k = 0; k < count; k++) {
            if (bits < 2 && ms[k] == r->microbatches) continue; /* the request, or a change alone */
            v.microbatches = ms[k];
            int reversed;
            bg_plan_t *p = fitting_plan(&v, advice, &reversed);
            /* The first at the bar, then only faster ones, or as fast with
             * fewer changes. */
            if (p != NULL && (p->step_s < best_s || (best_mask < 0 && p->step_s <= best_s) ||
                              (p->step_s == best_s && bits < savings_in((unsigned)best_mask)))) {
                best_s = p->step_s;
                best_mask = (int)mask;
                best_m = ms[k];
            }
            bg_plan_destroy(p);
        }
        free(ms);
    }
    if (best_mask < 0) return;
    apply_savings(r, savings, n, (unsigned)best_mask, &v, scratch, what, sizeof what);
    v.microbatches = best_m;
    if (best_m != r->microbatches) {
        const size_t at = strlen(what);
        snprintf(what + at, sizeof what - at, "%s--microbatches %d", at > 0 ? " " : "", best_m);
    }
    bg_advice_try_variant(&v, what, advice);
}

/* The fewest changes together that fit, two, then three, and so on: that
 * many of the savings, or one fewer with the nearest micro-batch count
 * that then fits, or with the fewest devices that then fit, or two fewer
 * with both (the nearest micro-batch counts at which some device count
 * fits, each with the fewest devices).
 * Prints every set of the fewest that fits and returns 1 if one did. The
 * micro-batch count and the device count are changes too: SGD at M = 2
 * (two changes) fits a model that all the savings at M = 64 fit 16 times
 * as slowly. */
static int try_fewest_changes(const bg_plan_t *failed, const saving_t *savings, int n,
                              bg_cost_device_t *scratch, const bg_placement_t *placement,
                              int host_share, bg_advice_t *advice) {
    const bg_plan_request_t *r = &failed->request;
    const device_search_t search = {failed, placement, host_share};
    char what[160];
    bg_plan_request_t v;
    /* Both counts are searched only where the least memory any change
     * gives (every saving, the most micro-batches, on some device count)
     * fits: a saving and more micro-batches never need more. Searching
     * them for every set of savings took a refused 1,000-layer plan on
     * cpu:128 from 1.8 s to 8.2 s. -1: not asked yet. */
    int both_may_fit = -1;
    for (int size = 2; size <= n + 2; size++) {
        int fits = 0;
        /* Savings alone first, then with a micro-batch or a device count,
         * then with both. */
        for (int counts = 0; counts <= 2; counts++) {
            for (unsigned mask = 0; mask < 1u << n; mask++) {
                if (savings_in(mask) != size - counts) continue;
                apply_savings(r, savings, n, mask, &v, scratch, what, sizeof what);
                if (counts == 0) {
                    fits |= bg_advice_try_variant(&v, what, advice);
                    continue;
                }
                if (counts == 2) {
                    if (both_may_fit < 0) {
                        bg_plan_request_t least;
                        char all[160];
                        apply_savings(r, savings, n, (1u << n) - 1, &least, scratch, all,
                                      sizeof all);
                        least.microbatches = most_microbatches(r);
                        both_may_fit =
                            device_counts_may_help(&least, failed, placement, host_share) &&
                            bg_advice_try_device_counts(&least, placement, host_share, all, 1,
                                                        advice);
                        apply_savings(r, savings, n, mask, &v, scratch, what, sizeof what);
                    }
                    if (both_may_fit) fits |= try_microbatches(&v, what, &search, advice);
                    continue;
                }
                fits |= try_microbatches(&v, what, NULL, advice);
                if (device_counts_may_help(&v, failed, placement, host_share))
                    fits |= bg_advice_try_device_counts(&v, placement, host_share, what, 0, advice);
            }
        }
        if (fits) return 1;
    }
    return 0;
}

/* Where r's devices all have one capacity, and the model's state alone
 * (model_state_bytes) fills more than twice as many devices (the most the
 * advice tries): ", at least N: ... fill N devices of X MiB" in buf;
 * else "". */
static const char *fewest_devices(const bg_plan_request_t *r, char *buf, size_t size,
                                  int64_t *least_out) {
    buf[0] = '\0';
    *least_out = 0;
    const size_t each = r->device[0].memory_bytes;
    for (int d = 1; d < r->devices; d++)
        if (r->device[d].memory_bytes != each) return buf;
    if (each == 0) return buf;
    const double least = ceil(model_state_bytes(r) / (double)each);
    if (least <= 2.0 * r->devices || least > 1e9) return buf;
    *least_out = (int64_t)least;
    snprintf(buf, size, ", at least %.0f: %s alone fill %.0f devices of %.2f MiB", least,
             r->forward_only ? "its parameters"
             : bg_optimizer_state_buffers(&r->optimizer) == 0
                 ? "its parameters and their gradients"
                 : "its parameters, their gradients and the optimizer's state",
             least, (double)each / mib);
    return buf;
}

/* Into `out`, the fewest of the savings (and the most micro-batches, as
 * a change of its own) with which request r fits on `count` devices, as
 * their options ("--optimizer sgd"); "" where none does or memory runs
 * out. Tries each set of savings by size, the smallest first. */
static void fewest_changes_at(const bg_plan_request_t *r, const saving_t *savings, int n, int count,
                              const bg_placement_t *placement, int host_share, bg_advice_t *advice,
                              char *out, size_t size) {
    out[0] = '\0';
    bg_cost_device_t *devices = malloc(sizeof *devices * (size_t)r->devices);
    if (devices == NULL) return;
    const int most = most_microbatches(r);
    for (int size_of_set = 0; size_of_set <= n + 1 && out[0] == '\0'; size_of_set++)
        for (unsigned mask = 0; mask < 1u << n && out[0] == '\0'; mask++)
            for (int more = 0; more <= (most != r->microbatches) && out[0] == '\0'; more++) {
                const int bits = more + savings_in(mask);
                if (bits != size_of_set) continue;
                bg_plan_request_t v;
                char what[160];
                apply_savings(r, savings, n, mask, &v, devices, what, sizeof what);
                if (more) {
                    v.microbatches = most;
                    const size_t at = strlen(what);
                    snprintf(what + at, sizeof what - at, "%s--microbatches %d", at > 0 ? " " : "",
                             most);
                }
                if (bits > 0 && bg_advice_fits_on(&v, placement, host_share, count, advice))
                    snprintf(out, size, "%s", what);
            }
    free(devices);
}

/* The fewest changes together that fit (try_fewest_changes: of
 * `savings`, savings_of the failed request's, with the micro-batch count
 * or the device count), else every saving with the most micro-batches, on
 * the devices given and then on other counts of them. Prints what fits;
 * else, where one layer alone needs more than any stage may have even
 * with all of these, says so and what --device-mem would do, for more
 * devices cannot help; else that none fits. */
static void try_every_saving(const bg_plan_t *failed, const saving_t *savings, int n,
                             bg_cost_device_t *scratch, const bg_placement_t *placement,
                             int host_share, bg_advice_t *advice, cJSON *plan_json) {
    const bg_plan_request_t *r = &failed->request;
    if (try_fewest_changes(failed, savings, n, scratch, placement, host_share, advice)) return;
    /* Then every saving with the smallest micro-batches, on the devices
     * given and on other counts of them. */
    bg_plan_request_t v;
    char what[160];
    apply_savings(r, savings, n, (1u << n) - 1, &v, scratch, what, sizeof what);
    int at = (int)strlen(what);
    v.microbatches = most_microbatches(r);
    if (v.microbatches != r->microbatches) {
        at += snprintf(what + at, sizeof what - (size_t)at, "%s--microbatches %d",
                       at > 0 ? " " : "", v.microbatches);
        if (bg_advice_try_variant(&v, what, advice)) return;
    }
    const size_t capacity = largest_capacity(failed, placement);
    int layer = 0, last = 0;
    const size_t need = largest_layer_floor(&v, &layer, &last);
    const int layer_too_large = capacity > 0 && need > capacity;
    /* Where the savings make every layer small enough, more devices may
     * hold what the request's own settings could not; fewer, where each
     * then has more memory. */
    if ((!layer_too_large || bg_advice_fewer_have_more(placement, host_share)) && at > 0 &&
        bg_advice_try_device_counts(&v, placement, host_share, what, 0, advice))
        return;
    if (layer_too_large) {
        print_layer_too_large(r, placement, layer, last, need, capacity,
                              n > 0 ? " even with all of these"
                              : v.microbatches != r->microbatches
                                  ? " even at the most micro-batches"
                                  : "",
                              n, advice, plan_json);
        return;
    }
    /* --json: the verdict as stderr says it, with the counts tried. */
    cJSON *verdict = plan_json != NULL ? cJSON_AddObjectToObject(plan_json, "none_fits") : NULL;
    clear_search_line(advice);
    if (bg_advice_shares_one_gpu(placement)) {
        fprintf(stderr,
                "  %s: the virtual devices share one GPU's memory, so more of them hold no more; "
                "use more GPUs\n",
                none_fits_words(n));
        if (verdict != NULL) cJSON_AddStringToObject(verdict, "remedy", "use more GPUs");
    } else {
        /* The counts tried, and what is left: a GPU's memory is not an
         * option's, nor are GPUs past the machine's. */
        const int fewest = bg_advice_fewest_tried(&v, placement, host_share),
                  most = bg_advice_most_tried(&v, placement);
        const int gpus =
            bg_placement_all_of_kind(placement, BG_DEVICE_CUDA) && placement->device_mem == 0;
        const int all_gpus =
            gpus && placement->gpus_links != NULL && most >= bg_advice_gpu_count(&placement->gpus);
        char counts[96];
        const int every =
            bg_advice_scans_every_count(&v, fewest) && bg_advice_scans_every_count(&v, most);
        if (fewest >= most)
            snprintf(counts, sizeof counts, "on %d devices", most);
        else
            snprintf(counts, sizeof counts, "on %d to %d devices%s", fewest, most,
                     every ? "" : " (sampled in doubling steps, not each count planned)");
        /* Past a layer a stage, or the most devices brigade takes, no
         * more can be had (until 2026-12-05 "use more devices still"). */
        char no_more[352] = "", limit[160];
        const int possible = bg_advice_most_possible(&v),
                  places = bg_model_spec_stage_places(v.spec);
        const char *per_device = v.chunks > 1 ? ", and --chunks per device" : "";
        if (possible == BG_MAX_DEVICES)
            snprintf(limit, sizeof limit, "the most brigade takes");
        else if (places == v.spec->num_layers)
            snprintf(limit, sizeof limit,
                     "the most a model of %d layers can have (a layer a stage%s)", places,
                     per_device);
        else
            snprintf(limit, sizeof limit,
                     "the most this model can have (a stage at each of its %d places to start "
                     "one, outside residual blocks%s)",
                     places, per_device);
        if (most >= possible)
            snprintf(no_more, sizeof no_more,
                     "give each more memory (--device-mem): %d devices are %s", possible, limit);
        /* Short of the most, whether the most would hold it: where a layer
         * needs a little more than its lower bound, no count may (until
         * 2026-12-06 "use more devices still" was said there too). Not
         * under interleaved, whose counts also need M a multiple of K: a
         * count refused for that is no count that lacks memory. */
        else if (!gpus && v.schedule != BG_SCHEDULE_INTERLEAVED &&
                 !bg_advice_fits_on(&v, placement, host_share, possible, advice))
            snprintf(no_more, sizeof no_more,
                     "give each more memory (--device-mem): not even %d devices, %s, hold it",
                     possible, limit);
        /* Where the most devices the model can have would hold it, the
         * fewest past those tried that do (a user asked how many). */
        /* CPU devices only, counted as --devices cpu:N (GPUs past the
         * machine's are no count to suggest; --stages counts otherwise). */
        else if (bg_placement_all_of_kind(placement, BG_DEVICE_CPU) && placement->stages == 0 &&
                 v.schedule != BG_SCHEDULE_INTERLEAVED) {
            /* As asked, where each layer fits a device so, and with every
             * saving where that takes fewer. */
            int as_asked_layer = 0, as_asked_last = 0;
            const size_t as_asked_need = largest_layer_floor(r, &as_asked_layer, &as_asked_last);
            const int asked =
                capacity > 0 && as_asked_need > capacity
                    ? 0
                    : bg_advice_fewest_fitting(r, placement, host_share, most, possible, advice);
            const int saving =
                at > 0 ? bg_advice_fewest_fitting(&v, placement, host_share, most,
                                                  asked > 0 ? asked - 1 : possible, advice)
                       : 0;
            /* At that count, the fewest of the changes that fit there
             * (every saving may be more than it takes: SGD alone may do);
             * where every count is planned, the search being small. */
            char fewest_changes[160] = "";
            if (saving > 0 && bg_advice_scans_every_count(r, saving))
                fewest_changes_at(r, savings, n, saving, placement, host_share, advice,
                                  fewest_changes, sizeof fewest_changes);
            const char *changes = fewest_changes[0] != '\0' ? fewest_changes : what;
            const char *more_may = fewest_changes[0] != '\0' ? "" : "every saving, fewer may do";
            /* Sampled counts (bg_advice_scans_every_count) find a count
             * that fits past one that does not, not surely the fewest. */
            const char *fewest_said = bg_advice_scans_every_count(r, possible)
                                          ? "the fewest that hold it"
                                          : "the fewest found, counts sampled";
            char counts_that_fit[256] = "";
            if (asked > 0 && saving > 0)
                snprintf(counts_that_fit, sizeof counts_that_fit,
                         "%d devices (%s), or %d with %s%s%s%s", asked, fewest_said, saving,
                         changes, more_may[0] ? " (" : "", more_may, more_may[0] ? ")" : "");
            else if (asked > 0)
                snprintf(counts_that_fit, sizeof counts_that_fit, "%d devices (%s)", asked,
                         fewest_said);
            else if (saving > 0)
                snprintf(counts_that_fit, sizeof counts_that_fit, "%d devices with %s (%s so%s%s)",
                         saving, changes, fewest_said, more_may[0] ? "; " : "", more_may);
            if (counts_that_fit[0] != '\0')
                snprintf(no_more, sizeof no_more, "give each more memory (--device-mem), or use %s",
                         counts_that_fit);
            if (verdict != NULL && asked > 0)
                cJSON_AddNumberToObject(verdict, "fewest_devices_that_fit", asked);
            if (verdict != NULL && saving > 0) {
                cJSON_AddNumberToObject(verdict, "fewest_devices_that_fit_with_savings", saving);
                cJSON_AddStringToObject(verdict, "savings", changes);
            }
        }
        clear_search_line(advice); /* the probe's plan may have drawn it again */
        const char *remedy = all_gpus     ? "it takes GPUs with more memory, or more of them"
                             : gpus       ? "it takes more GPUs, or GPUs with more memory"
                             : no_more[0] ? no_more
                                          : "give each more memory (--device-mem) or use more "
                                            "devices still";
        /* Devices of a GPU's share are no count of GPUs to ask for. */
        int64_t least = 0;
        const char *at_least = bg_advice_gpu_held_twice(&placement->devices)
                                   ? ""
                                   : fewest_devices(&v, what, sizeof what, &least);
        fprintf(stderr, "  %s, %s%s: %s%s\n", none_fits_words(n), counts,
                all_gpus ? " (every GPU there is)" : "", remedy, at_least);
        if (verdict != NULL) {
            cJSON_AddNumberToObject(verdict, "fewest_devices_tried", fewest < most ? fewest : most);
            cJSON_AddNumberToObject(verdict, "most_devices_tried", most);
            cJSON_AddBoolToObject(verdict, "every_count_planned", fewest >= most || every);
            cJSON_AddStringToObject(verdict, "remedy", remedy);
            /* The model's state alone fills this many devices. */
            if (least > 0) cJSON_AddNumberToObject(verdict, "devices_at_least", (double)least);
        }
    }
}

/* "stage 0 (layers 0-3 on cpu:0) needs", or checked per device "cpu:0's
 * stages 0 and 2 (layers 0-3 and 8-17) need", into buf. */
static void describe_overflow(const bg_plan_t *p, char *buf, size_t size) {
    const bg_partition_t *part = p->partition;
    if (part->memory_check != BG_PARTITION_CHECK_DEVICES) {
        const bg_partition_stage_t *st = &part->stage[part->worst_stage];
        snprintf(buf, size, "stage %d (layers %d-%d on %s) needs", part->worst_stage,
                 st->first_layer, st->last_layer - 1, p->device[st->device].name);
        return;
    }
    const int d = part->worst_device, k = p->request.devices;
    char stages[96], layers[160];
    bg_cli_plan_device_stages(p, d, 1, stages, sizeof stages);
    size_t at = 0;
    layers[0] = '\0';
    for (int s = d; s < part->stages && at < sizeof layers; s += k) {
        const char *between = s == d ? "" : s + k >= part->stages ? " and " : ", ";
        const int n = snprintf(layers + at, sizeof layers - at, "%s%d-%d", between,
                               part->stage[s].first_layer, part->stage[s].last_layer - 1);
        if (n < 0) break;
        at += (size_t)n;
    }
    snprintf(buf, size, "%s's stages %s (layers %s) need", p->device[d].name, stages, layers);
}

/* Under the refusal, what the stage over its capacity holds, largest part
 * first, as the plan table's columns name them (those that print as 0.01
 * or more, in MiB, or KiB for a stage under a MiB; "other" with its GPU
 * workspace where that is most of it); whether its weights' share alone is
 * over `weights_room`, what the stage could have (then neither more
 * micro-batches nor --recompute can bring it under); and how many other
 * stages are over theirs. */
static void print_overflow_parts(const bg_partition_t *part, const bg_partition_stage_t *st,
                                 size_t weights_room) {
    const bg_cost_memory_t *m = &st->memory;
    struct {
        const char *name;
        size_t bytes;
    } parts[] = {{"params", m->params},       {"grads", m->grads},
                 {"optimizer", m->optimizer}, {"stash", m->stash},
                 {"buffers", m->buffers},     {"other", m->channels + m->workspace + m->padding}};
    enum { PARTS = sizeof parts / sizeof parts[0] };
    /* MiB, or KiB for a stage of less than one. */
    const int kib = st->peak_bytes < (size_t)1 << 20;
    const double unit = kib ? 1024.0 : mib;
    int shown[PARTS] = {0};
    fprintf(stderr, "  of it:");
    for (int k = 0; k < PARTS; k++) {
        int largest = -1;
        for (int j = 0; j < PARTS; j++)
            if (!shown[j] && (double)parts[j].bytes >= 0.005 * unit && /* prints as 0.01 */
                (largest < 0 || parts[j].bytes > parts[largest].bytes))
                largest = j;
        if (largest < 0) break;
        shown[largest] = 1;
        fprintf(stderr, "%s %s %.2f%s", k == 0 ? "" : ",", parts[largest].name,
                (double)parts[largest].bytes / unit,
                k > 0 ? ""
                : kib ? " KiB"
                      : " MiB");
        /* Where most of it, a GPU's convolution workspace, which
         * --conv-workspace sets. */
        if (largest == PARTS - 1 && 2 * m->workspace >= parts[largest].bytes &&
            (double)m->workspace >= 0.005 * unit)
            fprintf(stderr, " (workspace %.2f)", (double)m->workspace / unit);
    }
    /* Against what the stage could have (a device's whole memory, where
     * its stages are checked together): its weights' share alone over it
     * is what neither more micro-batches nor --recompute can help. */
    const size_t weights = m->params + m->grads + m->optimizer;
    if (weights_room > 1 && weights > weights_room)
        fprintf(stderr,
                " (%s alone, %.2f %s, are over %s: more micro-batches%s cannot help this "
                "stage)",
                m->grads == 0 && m->optimizer == 0 ? "params" : "params, grads and optimizer",
                (double)weights / unit, kib ? "KiB" : "MiB",
                weights_room > st->capacity_bytes ? "its device's capacity" : "its capacity",
                m->grads == 0 ? "" : " or --recompute");
    int others = 0;
    for (int i = 0; i < part->stages; i++)
        others += &part->stage[i] != st && part->stage[i].capacity_bytes > 0 &&
                  part->stage[i].peak_bytes > part->stage[i].capacity_bytes;
    if (others > 0)
        fprintf(stderr, "; %d other stage%s over %s too", others, others == 1 ? " is" : "s are",
                others == 1 ? "its" : "theirs");
    fprintf(stderr, "\n");
}

void bg_cli_plan_explain_overflow(const char *cmd, const bg_plan_t *p,
                                  const bg_placement_t *placement, int host_share, cJSON *found,
                                  cJSON *plan_json) {
    const bg_plan_request_t *r = &p->request;
    const bg_partition_t *part = p->partition;
    const bg_partition_stage_t *st = &part->stage[part->worst_stage];
    const char *device = p->device[st->device].name;
    const int per_device = part->memory_check == BG_PARTITION_CHECK_DEVICES;
    /* What overflows: a stage, or a device's stages together. */
    const size_t peak =
        per_device ? bg_partition_device_peak_bytes(part, part->worst_device) : st->peak_bytes;
    char overflowing[320], need[32], cap[32], over[32], share[256] = "";
    describe_overflow(p, overflowing, sizeof overflowing);
    bg_cli_flush_stdout(); /* the table this explains comes first, also into a pipe */
    if (r->chunks > 1 && !per_device)
        snprintf(share, sizeof share, " (1/%d of %s's: --chunks %d)", r->chunks, device, r->chunks);
    else if (host_share && placement->device_mem == 0 && st->device < placement->devices.count &&
             placement->devices.devices[st->device].kind == BG_DEVICE_CPU) {
        /* --topology's machine is described, not this one. */
        const char *memory = placement->topology_path != NULL ? "the --topology machine's memory"
                                                              : "the host's memory";
        if (r->devices > 1)
            snprintf(share, sizeof share,
                     " (%s divided among %d CPU devices; --device-mem sets it)", memory,
                     r->devices);
        else
            snprintf(share, sizeof share, " (%s; --device-mem sets it)", memory);
    } else if (placement->device_mem == 0 && st->device < placement->devices.count &&
               placement->devices.devices[st->device].kind == BG_DEVICE_CUDA) {
        /* Virtual devices (cuda:0x4) divide their GPU's memory. */
        const int physical = placement->devices.devices[st->device].physical;
        int sharing = 0;
        for (int d = 0; d < placement->devices.count; d++)
            sharing += placement->devices.devices[d].kind == BG_DEVICE_CUDA &&
                       placement->devices.devices[d].physical == physical;
        char fraction[24] = "";
        if (sharing > 1) snprintf(fraction, sizeof fraction, "1/%d of ", sharing);
        char context[48] = "";
        if (bg_placement_context_bytes(placement) > 0)
            snprintf(context, sizeof context, "%zu MiB for its CUDA context and ",
                     bg_placement_context_bytes(placement) >> 20);
        const size_t workspace = BG_CUDA_CUBLAS_WORKSPACE_BYTES >> 20;
        /* 1 byte: the device has nothing past them (placement.c). */
        if (st->capacity_bytes <= 1 && sharing > 1) {
            char less[64] = "";
            if (bg_placement_context_bytes(placement) > 0)
                snprintf(less, sizeof less, " less %zu MiB for its CUDA context",
                         bg_placement_context_bytes(placement) >> 20);
            snprintf(share, sizeof share,
                     " (none: cuda:%d's memory%s, shared by %d virtual devices, leaves each no "
                     "more than the %zu MiB of cuBLAS's workspace it takes first)",
                     physical, less, sharing, workspace);
        } else if (st->capacity_bytes <= 1)
            snprintf(share, sizeof share,
                     " (none: cuda:%d's memory is no more than %s%zu MiB for cuBLAS's workspace, "
                     "which brigade takes first)",
                     physical, context, workspace);
        else
            snprintf(share, sizeof share,
                     " (%scuda:%d's memory, less %s%zu MiB for cuBLAS's workspace)", fraction,
                     physical, context, workspace);
    }
    char owner[64];
    snprintf(owner, sizeof owner, "%s%s", per_device ? device : "its", per_device ? "'s" : "");
    fprintf(stderr,
            "brigade %s: does not fit: %s %s bytes (%.2f MiB)%s, %s byte%s over %s %s-byte "
            "capacity%s\n",
            cmd, overflowing, bg_cli_group_digits((int64_t)peak, need, sizeof need),
            (double)peak / mib, per_device ? " together" : "",
            bg_cli_group_digits((int64_t)part->overflow_bytes, over, sizeof over),
            part->overflow_bytes == 1 ? "" : "s", owner,
            bg_cli_group_digits((int64_t)st->capacity_bytes, cap, sizeof cap), share);
    if (!per_device)
        print_overflow_parts(
            part, st, r->chunks > 1 ? r->device[st->device].memory_bytes : st->capacity_bytes);
    /* Checked per stage at 1/V of a device, what the second search (each
     * device's stages together) went by is over too: the worst device. */
    if (!per_device && r->chunks > 1) {
        int worst = -1;
        double worst_over = 0;
        for (int d = 0; d < r->devices; d++) {
            const double excess =
                (double)bg_partition_device_peak_bytes(part, d) - (double)r->device[d].memory_bytes;
            if (r->device[d].memory_bytes > 0 && excess > 0 && (worst < 0 || excess > worst_over))
                worst = d, worst_over = excess;
        }
        if (worst >= 0)
            fprintf(stderr, "  %s's stages together need %.2f MiB of its %.2f MiB (%.2f over)\n",
                    p->device[worst].name,
                    (double)bg_partition_device_peak_bytes(part, worst) / mib,
                    (double)r->device[worst].memory_bytes / mib, worst_over / mib);
    }
    char none_fits[160] = "";     /* where the planner tried every split */
    if (p->splits_simulated == 1) /* a layer a stage */
        snprintf(none_fits, sizeof none_fits, "this is the planner's only split");
    else if (p->splits_simulated > 0)
        snprintf(none_fits, sizeof none_fits,
                 "this is the split that overflows least, and none of the planner's %d splits "
                 "fits%s",
                 p->splits_simulated,
                 r->chunks > 1 ? " with each device's stages together either" : " either");
    /* Under --microbatches auto (--schedule auto) the changes are priced
     * at the count (the schedule) that overflowed least, which is not the
     * one auto would choose once a change fits: said, so that a step, or a
     * "none of these fits", is not taken for auto's. */
    char priced[256] = "", fell_back[96] = "";
    if (placement->auto_microbatches && placement->auto_schedule)
        snprintf(fell_back, sizeof fell_back, "at --microbatches %d under --schedule %s",
                 r->microbatches, bg_schedule_kind_name(r->schedule));
    else if (placement->auto_microbatches)
        snprintf(fell_back, sizeof fell_back, "at --microbatches %d", r->microbatches);
    else if (placement->auto_schedule)
        snprintf(fell_back, sizeof fell_back, "under --schedule %s",
                 bg_schedule_kind_name(r->schedule));
    if (fell_back[0] != '\0')
        snprintf(priced, sizeof priced,
                 " (each %s, what auto fell back on; once a change fits, auto may choose "
                 "another)",
                 fell_back);
    fprintf(stderr, "%s; what would help%s:\n",
            per_device                ? "this is the given --split, checked per device"
            : r->split != NULL        ? "this is the given --split"
            : p->splits_simulated > 0 ? none_fits
            : p->device_search == BG_PLAN_DEVICES_SEARCHED
                ? "this is the split that overflows least, and no split fits with each "
                  "device's stages together either"
            : p->device_search == BG_PLAN_DEVICES_STOPPED
                ? "this is the split that overflows least; the search for a split that fits "
                  "with each device's stages together stopped at its budget without one"
                : "this is the split that overflows least",
            priced);
    int helped = 0;
    /* Each saving alone; a given split's is to leave it out; the workspace's,
     * the largest limit that does. */
    saving_t savings[BG_MAX_SAVINGS];
    const int n = savings_of(r, p->model, savings);
    bg_cost_device_t *scratch = malloc(sizeof *scratch * (size_t)r->devices);
    if (scratch == NULL) return; /* the advice is a courtesy: the refusal stands */
    bg_advice_t advice_state = {.found = found, .optimizer = r->optimizer};
    bg_advice_t *advice = &advice_state;
    bg_progress_init(&advice->progress, stderr, 1);
    advice->progress.what = "  looking for what fits: plans made:";
    advice->progress.quiet_s = 1.0;
    for (int i = 0; i < n; i++) {
        bg_plan_request_t v;
        char what[64];
        if (savings[i].apply == without_conv_workspace) continue;
        apply_savings(r, savings, n, 1u << i, &v, scratch, what, sizeof what);
        helped |= bg_advice_try_variant(
            &v, savings[i].apply == without_split ? "leave out --split" : what, advice);
    }
    helped |= try_conv_workspace(p, advice);
    helped |= try_microbatches(r, "", NULL, advice);
    if (device_counts_may_help(r, p, placement, host_share) &&
        bg_advice_try_device_counts(r, placement, host_share, "", 0, advice))
        helped = 1;
    if (helped)
        try_faster_way(r, savings, n, placement->auto_microbatches, scratch, advice);
    else
        try_every_saving(p, savings, n, scratch, placement, host_share, advice, plan_json);
    clear_search_line(advice);
    free(scratch);
}
