/* Other device counts for the plan advice (advice.h): the devices a
 * count past or short of the request's would be, priced as the setup
 * would choose them, and the search for the nearest counts that fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "cli.h"
#include "schedule.h"

/* Whether every device of the placement is CPU cores. */
static int all_cores(const bg_placement_t *placement) {
    return bg_placement_all_of_kind(placement, BG_DEVICE_CPU);
}

int bg_advice_one_gpu(const bg_placement_t *placement) {
    const bg_device_list_t *list = &placement->devices;
    if (list->count < 2) return 0;
    for (int d = 0; d < list->count; d++)
        if (list->devices[d].kind != BG_DEVICE_CUDA ||
            list->devices[d].physical != list->devices[0].physical)
            return 0;
    return 1;
}

int bg_advice_shares_one_gpu(const bg_placement_t *placement) {
    return bg_advice_one_gpu(placement) && placement->device_mem == 0 &&
           !bg_advice_other_gpus(placement);
}

int bg_advice_gpu_held_twice(const bg_device_list_t *list) {
    for (int d = 0; d < list->count; d++)
        for (int e = 0; e < d; e++)
            if (list->devices[d].kind == BG_DEVICE_CUDA &&
                list->devices[e].physical == list->devices[d].physical)
                return 1;
    return 0;
}

int bg_advice_fewer_have_more(const bg_placement_t *placement, int host_share) {
    if (placement->device_mem != 0) return 0;
    return (all_cores(placement) && host_share) || bg_advice_gpu_held_twice(&placement->devices);
}

int bg_advice_gpu_count(const bg_device_list_t *list) {
    int count = 0;
    for (int d = 0; d < list->count; d++) {
        int seen = 0;
        for (int e = 0; e < d; e++) seen |= list->devices[e].physical == list->devices[d].physical;
        count += !seen;
    }
    return count;
}

int bg_advice_other_gpus(const bg_placement_t *placement) {
    return placement->gpus_links != NULL && placement->gpus.count > placement->listed.count;
}

/* "cuda:0,cuda:1,...": the GPUs of `list`, in the order they first come,
 * each GPU's virtual devices as cuda:GxV (their names, "cuda:2/0", are no
 * option: a review found one told), from `text` at `at`. Returns where
 * it ended. */
static size_t write_gpus(const bg_device_list_t *list, char *text, size_t size, size_t at) {
    for (int d = 0; d < list->count && at < size; d++) {
        const int gpu = list->devices[d].physical;
        int seen = 0;
        for (int e = 0; e < d; e++) seen |= list->devices[e].physical == gpu;
        if (seen) continue;
        const int sharing = bg_placement_gpu_sharing(list, gpu);
        at += (size_t)snprintf(text + at, size - at, "%scuda:%d", d ? "," : "", gpu);
        if (sharing > 1 && at < size) at += (size_t)snprintf(text + at, size - at, "x%d", sharing);
    }
    return at;
}

/* "--devices cuda:0,cuda:1,...": the GPUs of `list` as write_gpus has them. */
static void gpu_names(const bg_device_list_t *list, char *text, size_t size) {
    write_gpus(list, text, size, (size_t)snprintf(text, size, "--devices "));
}

/* The GPUs a count k past `list` (a list of GPUs) is priced with
 * (bg_placement_cost_devices): where its last GPU holds several of its
 * virtual devices, more of those ("--devices cuda:5,cuda:0x3"); else GPUs
 * like its last, which the list does not name ("cuda:4,cuda:5 and 2 more
 * like cuda:5 in --devices"). */
static void more_like_last(const bg_device_list_t *list, int k, char *text, size_t size) {
    const bg_device_t *last = &list->devices[list->count - 1];
    if (bg_placement_gpu_sharing(list, last->physical) > 1) {
        bg_device_list_t more = *list;
        for (; more.count < k && more.count < BG_MAX_DEVICES; more.count++)
            more.devices[more.count] = *last;
        gpu_names(&more, text, size);
        return;
    }
    const size_t at = write_gpus(list, text, size, 0);
    if (at < size)
        snprintf(text + at, size - at, " and %d more like cuda:%d in --devices", k - list->count,
                 last->physical);
}

/* 1 if the devices past `list` are more virtual devices of its last GPU
 * (bg_placement_cost_devices), which holds two or more of the list's
 * already, and `links` (the chosen devices') are the list's. */
static int extends_last_gpu(const bg_device_list_t *list, int links) {
    if (links != list->count) return 0;
    const bg_device_t *last = &list->devices[list->count - 1];
    return last->kind == BG_DEVICE_CUDA && bg_placement_gpu_sharing(list, last->physical) > 1;
}

/* The link from device a to device b where more virtual devices of the
 * last GPU follow `list` (extends_last_gpu), as the setup would find them:
 * two devices of that GPU on its own link (the one between two of the
 * list's), a device past the list elsewhere as the last device is. */
static bg_cost_link_t extended_link(const bg_device_list_t *list, const bg_device_links_t *own,
                                    int a, int b) {
    const int n = list->count, last = n - 1;
    const int gpu = list->devices[last].physical;
    const int a_on = a >= n || list->devices[a].physical == gpu;
    const int b_on = b >= n || list->devices[b].physical == gpu;
    if (a != b && a_on && b_on) {
        int other = 0; /* another of the list's devices on the last GPU */
        while (other == last || list->devices[other].physical != gpu) other++;
        return own->link[last * n + other];
    }
    return own->link[(a < n ? a : last) * n + (b < n ? b : last)];
}

/* A search of other device counts for request r: its placement, whether
 * CPU devices share the host's memory, room for the most devices tried,
 * and the changes r already holds, in words (may be ""), for the lines
 * printed. */
typedef struct count_search {
    const bg_plan_request_t *r;
    const bg_placement_t *placement;
    int host_share;
    bg_cost_device_t *devices;
    const char *with;
    bg_advice_t *advice; /* the changes found, and the plans made */
} count_search_t;

/* Tries the search's request on k devices in place of its own; returns 1
 * if the plan then fits. The planner chooses the split (a given --split is for the
 * request's count). `quiet` prints nothing (a probe of the search
 * for the fewest). Where k of the devices listed give it (--stages K
 * chose among more, or one GPU's virtual devices), the k are chosen as the
 * setup chooses them; past the list, more come like the last one. */
static int try_device_count(const count_search_t *search, int k, int quiet) {
    const bg_plan_request_t *r = search->r;
    const bg_placement_t *placement = search->placement;
    bg_cost_device_t *devices = search->devices;
    const char *with = search->with;
    bg_plan_request_t v = *r;
    v.split = NULL;
    v.links = NULL; /* the links of the chosen devices only */
    v.device = devices;
    v.devices = k;
    /* Interleaved needs M a multiple of K: on k devices, the fewest
     * micro-batches from the request's that are one, or where those would
     * be more than the batch the most below it (63 at --batch 63 is 62 on
     * two devices; until 2026-12-05 no other count was tried), named in
     * the line; none where `with` changed M already (try_microbatches
     * tries the counts that are one: a line naming two counts would be
     * neither). */
    char microbatches[48] = "";
    if (r->schedule == BG_SCHEDULE_INTERLEAVED && v.microbatches % k != 0) {
        if (strstr(with, "--microbatches") != NULL) return 0;
        v.microbatches = (v.microbatches + k - 1) / k * k;
        if (v.microbatches > r->batch) v.microbatches = r->batch / k * k;
        if (v.microbatches < k) return 0;
        snprintf(microbatches, sizeof microbatches, ", --microbatches %d", v.microbatches);
    }
    const int cores = all_cores(placement), gpu_alone = bg_advice_one_gpu(placement);
    bg_placement_t listed = *placement;
    bg_device_links_t *chosen = NULL;
    /* Under --stages K, other counts of the devices listed (--stages k);
     * without it, fewer of them; but for virtual devices where the machine
     * has other GPUs, which fewer or as many may take whole. */
    const int others =
        bg_advice_other_gpus(placement) && bg_advice_gpu_held_twice(&placement->listed);
    const int among_listed = !cores && !others && placement->listed_links != NULL &&
                             k <= placement->listed.count &&
                             (placement->stages > 0 || gpu_alone || k < placement->listed.count);
    /* Else the GPUs listed and the machine's others, on their own links
     * (bg_placement_choose: as many GPUs as there are, each whole where
     * that leaves enough): more devices, and fewer where there are others. */
    const int among_gpus = !among_listed && !cores && placement->gpus_links != NULL &&
                           k <= placement->gpus.count && (k > placement->devices.count || others);
    if (among_listed || among_gpus) {
        listed.devices = among_listed ? placement->listed : placement->gpus;
        listed.stages = k;
        if (bg_placement_choose(&listed,
                                among_listed ? placement->listed_links : placement->gpus_links,
                                &chosen) != BG_OK)
            return 0;
        listed.links = chosen;
        v.links = chosen->link;
    }
    /* Links of our own making: more virtual devices of the one GPU than
     * listed, every pair on the GPU's own link, as `--devices cuda:NxK`
     * has them; another count of cores, the first k of cpu:2N's, as
     * `--devices cpu:k` has them (until 2026-12-05 both on the default
     * link, so the step told was not the one that plans). */
    bg_cost_link_t *made = NULL;
    const bg_device_links_t *own = placement->links; /* the chosen devices', all on the GPU */
    const bg_device_links_t *more_cores = placement->cores_links;
    const int virtual_devices = !among_listed && !among_gpus && !cores && own != NULL &&
                                k > placement->devices.count &&
                                extends_last_gpu(&placement->devices, own->count);
    const int cores_counted =
        cores && placement->stages == 0 && more_cores != NULL && k <= more_cores->count;
    if (virtual_devices || cores_counted) {
        made = malloc(sizeof *made * (size_t)k * (size_t)k);
        if (made == NULL) {
            bg_device_links_destroy(chosen);
            return 0;
        }
        for (int a = 0; a < k; a++)
            for (int b = 0; b < k; b++)
                made[a * k + b] = virtual_devices ? extended_link(&placement->devices, own, a, b)
                                                  : more_cores->link[a * more_cores->count + b];
        v.links = made;
    }
    bg_placement_cost_devices(&listed, k, search->host_share, devices);
    /* The request's GPU convolution workspace, where a saving lowered it. */
    const size_t conv_limit = bg_advice_conv_limit(r);
    for (int d = 0; d < k; d++)
        if (devices[d].own_conv_workspace && devices[d].conv_workspace_bytes > conv_limit)
            devices[d].conv_workspace_bytes = conv_limit;
    int fits = 0;
    if (quiet) {
        fits = bg_advice_variant_fits(&v, search->advice);
    } else {
        /* The options that give k devices: cores are there for the asking;
         * GPUs must be listed, or, on one GPU, made virtual devices of it. */
        char devices_option[BG_MAX_DEVICES * 12], what[sizeof devices_option + 256];
        const bg_device_list_t *list = &placement->devices;
        if (cores)
            snprintf(devices_option, sizeof devices_option, "--devices cpu:%d", k);
        else if (among_listed && placement->stages > 0)
            snprintf(devices_option, sizeof devices_option, "--stages %d", k);
        else if (among_gpus || among_listed) /* one GPU's alone: cuda:G or cuda:GxK */
            gpu_names(&listed.devices, devices_option, sizeof devices_option);
        else if (gpu_alone && k == 1) /* the GPU whole */
            snprintf(devices_option, sizeof devices_option, "--devices cuda:%d",
                     list->devices[0].physical);
        else if (gpu_alone)
            snprintf(devices_option, sizeof devices_option, "--devices cuda:%dx%d",
                     list->devices[0].physical, k);
        else if (k > list->count)
            more_like_last(list, k, devices_option, sizeof devices_option);
        else
            snprintf(devices_option, sizeof devices_option, "%d in --devices", k);
        /* Other devices under a given --stages K: k stages, or the plan
         * would take K of them (until 2026-12-05 said for cores alone, and
         * other GPUs told did not fit as given). */
        const size_t used = strlen(devices_option);
        if (placement->stages > 0 && strncmp(devices_option, "--stages ", 9) != 0 &&
            used < sizeof devices_option)
            snprintf(devices_option + used, sizeof devices_option - used, "%s --stages %d",
                     strncmp(devices_option, "--devices ", 10) == 0 ? "" : ",", k);
        snprintf(what, sizeof what, "%s%s%d device%s (%s%s%s)", with, with[0] ? ", " : "", k,
                 k == 1 ? "" : "s", devices_option, microbatches,
                 r->split != NULL ? ", without --split" : "");
        fits = bg_advice_try_variant(&v, what, search->advice);
    }
    bg_device_links_destroy(chosen);
    free(made);
    return fits;
}

int bg_advice_fewest_tried(const bg_plan_request_t *r, const bg_placement_t *placement,
                           int host_share) {
    if (bg_advice_fewer_have_more(placement, host_share)) return 1;
    if (r->schedule == BG_SCHEDULE_GPIPE || r->forward_only) return r->devices;
    return (r->devices + 1) / 2;
}

int bg_advice_most_possible(const bg_plan_request_t *r) {
    const int places = bg_model_spec_stage_places(r->spec) / r->chunks;
    return places < BG_MAX_DEVICES ? places : BG_MAX_DEVICES;
}

int bg_advice_most_tried(const bg_plan_request_t *r, const bg_placement_t *placement) {
    int most = 2 * r->devices < BG_MAX_DEVICES ? 2 * r->devices : BG_MAX_DEVICES;
    if (bg_advice_shares_one_gpu(placement))
        most = placement->stages > 0 ? placement->listed.count : r->devices;
    /* Never more GPUs than the machine has: where it has some besides those
     * listed and no --device-mem gives each device its own memory, no more
     * devices than GPUs (more would divide them), else no more than its
     * GPUs and the virtual devices listed; past them only more virtual
     * devices of the last GPU, where --device-mem gives each its own. */
    const int more_virtual =
        placement->device_mem != 0 &&
        extends_last_gpu(&placement->devices, placement->links != NULL ? placement->links->count
                                                                       : placement->devices.count);
    if (placement->gpus_links != NULL && !more_virtual) {
        const int gpus = placement->device_mem == 0 && bg_advice_other_gpus(placement)
                             ? bg_advice_gpu_count(&placement->gpus)
                             : placement->gpus.count;
        if (most > gpus) most = gpus;
    }
    const int possible = bg_advice_most_possible(r);
    return possible < most ? possible : most;
}

/* bg_advice_scans_every_count's bound on the counts times the layers. */
enum { SCAN_EVERY_COUNT_CELLS = 16384 };
int bg_advice_scans_every_count(const bg_plan_request_t *r, int limit) {
    return (int64_t)abs(limit - r->devices) * r->spec->num_layers <= SCAN_EVERY_COUNT_CELLS;
}

/* The device count nearest `from` (past it, the request's count or below
 * it) in direction `dir` (+1: more, -1: fewer), as far as `limit`, at
 * which it fits; 0 for none. Every count in turn
 * where bg_advice_scans_every_count; else it gallops out (one count away, then 3,
 * 7, ...) to the first that fits and halves the gap back to the last that
 * did not, taking a count past one that fits to fit too, which it mostly
 * does (more devices hold no less, fewer hold fewer micro-batches in
 * flight) but not always: with 1F1B's stash at a fixed --device-mem, 48
 * dense layers fit on 17 devices and on no other count from 1 to 30. */
static int nearest_fitting_count(const count_search_t *search, int from, int dir, int limit) {
    const bg_plan_request_t *r = search->r;
    if (bg_advice_scans_every_count(r, limit)) {
        for (int k = from + dir; dir * (limit - k) >= 0; k += dir)
            if (try_device_count(search, k, 1)) return k;
        return 0;
    }
    int fail = from, fit = 0;
    for (int step = 1; fit == 0 && dir * (limit - fail) > 0; step *= 2) {
        const int k = dir * (limit - fail) > step ? fail + dir * step : limit;
        if (try_device_count(search, k, 1))
            fit = k;
        else
            fail = k;
    }
    while (fit != 0 && abs(fit - fail) > 1) {
        const int mid = fail + (fit - fail) / 2;
        if (try_device_count(search, mid, 1))
            fit = mid;
        else
            fail = mid;
    }
    return fit;
}

int bg_advice_try_device_counts(const bg_plan_request_t *r, const bg_placement_t *placement,
                                int host_share, const char *with, int quiet, bg_advice_t *advice) {
    const int most = bg_advice_most_tried(r, placement);
    /* Room for the fewer counts too, where `most` is below the request's. */
    const int room = most > r->devices ? most : r->devices;
    bg_cost_device_t *devices = calloc((size_t)(room > 0 ? room : 1), sizeof *devices);
    if (devices == NULL) return 0;
    const count_search_t search = {r, placement, host_share, devices, with, advice};
    /* Past `most` (the GPUs there are, without --device-mem) a count only
     * divides GPUs: the fewer counts start at `most` itself (cuda:0x4 on
     * two GPUs: cuda:0,cuda:5, not cuda:0x2,cuda:5 first). */
    const int from = r->devices > most ? most + 1 : r->devices;
    const int fewer =
        nearest_fitting_count(&search, from, -1, bg_advice_fewest_tried(r, placement, host_share));
    const int more = quiet && fewer > 0 ? 0 : nearest_fitting_count(&search, r->devices, 1, most);
    /* As many devices on GPUs of their own, where the list shares GPUs
     * and the machine has others (cuda:0x4 on four GPUs: cuda:0,...,cuda:3,
     * each with a whole GPU's memory). */
    const int regroup = r->devices <= most && bg_advice_other_gpus(placement) &&
                        bg_advice_gpu_held_twice(&placement->devices);
    const int same = regroup && (!quiet || (fewer == 0 && more == 0)) &&
                     try_device_count(&search, r->devices, 1);
    int fits = quiet && (fewer > 0 || more > 0 || same);
    if (!quiet && same) fits |= try_device_count(&search, r->devices, 0);
    if (!quiet && fewer > 0) fits |= try_device_count(&search, fewer, 0);
    if (!quiet && more > 0) fits |= try_device_count(&search, more, 0);
    free(devices);
    return fits;
}

int bg_advice_fits_on(const bg_plan_request_t *r, const bg_placement_t *placement, int host_share,
                      int k, bg_advice_t *advice) {
    bg_cost_device_t *devices = calloc((size_t)(k > r->devices ? k : r->devices), sizeof *devices);
    if (devices == NULL) return 0;
    const count_search_t search = {r, placement, host_share, devices, "", advice};
    const int fits = try_device_count(&search, k, 1);
    free(devices);
    return fits;
}

int bg_advice_fewest_fitting(const bg_plan_request_t *r, const bg_placement_t *placement,
                             int host_share, int from, int limit, bg_advice_t *advice) {
    bg_cost_device_t *devices =
        calloc((size_t)(limit > r->devices ? limit : r->devices), sizeof *devices);
    if (devices == NULL) return 0;
    const count_search_t search = {r, placement, host_share, devices, "", advice};
    const int k = nearest_fitting_count(&search, from, 1, limit);
    free(devices);
    return k;
}
