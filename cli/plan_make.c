/* bg_cli_plan_make (cli/planning.h): the planner's search as the commands
 * run it, and the chain of devices the other way round where only that
 * fits. */
#include <stdlib.h>

#include "cli.h"
#include "planning.h"
#include "progress.h"

/* For a search of schedules under --chunks V > 1 (interleaved's chain a
 * cycle): the devices chosen as a path, as the planner sees them, for the
 * other schedules (bg_plan_request_t.path_device), into *out (K entries,
 * the caller frees it); NULL where there is no path. */
static bg_status_t path_devices(const bg_placement_t *p, int host_share, int count,
                                bg_cost_device_t **out) {
    *out = NULL;
    if (p->path_links == NULL || p->path_links->count != count) return BG_OK;
    bg_placement_t *path = malloc(sizeof *path);
    bg_cost_device_t *device = malloc(sizeof *device * (size_t)count);
    if (path == NULL || device == NULL) {
        free(path);
        free(device);
        return bg_error_set(BG_ERR_NOMEM, "out of memory");
    }
    *path = *p;
    bg_placement_use_path(path);
    bg_placement_cost_devices(path, count, host_share, device);
    free(path);
    *out = device;
    return BG_OK;
}

/* Plans `request` as bg_cli_plan_make does, searching M and the schedule
 * where the placement asks (with progress on stderr past a second), but
 * says nothing of the choice and leaves the placement as it is. */
static bg_status_t plan_search(const char *cmd, const bg_placement_t *p,
                               const bg_plan_request_t *request, int host_share, bg_plan_t **out) {
    unsigned flags = (p->auto_microbatches ? BG_PLAN_SEARCH_MICROBATCHES : 0) |
                     (p->auto_schedule ? BG_PLAN_SEARCH_SCHEDULE : 0);
    if (flags == 0) return bg_plan_create(request, out);
    /* Past a second, how far the search is, and the time left: hundreds of
     * counts of a large batch can take minutes. */
    char what[96];
    snprintf(what, sizeof what, "brigade %s:%s%s, micro-batches planned:", cmd,
             p->auto_microbatches ? " --microbatches auto" : "",
             p->auto_schedule ? " --schedule auto" : "");
    bg_progress_t progress;
    bg_progress_init(&progress, stderr, 1);
    progress.what = what;
    progress.quiet_s = 1.0;
    /* The schedules of one chunk a device on a path, not interleaved's
     * cycle (a reviewer found gpipe chosen at 3.065 ms where zb-h1 runs
     * 2.906 on the path, both priced on the cycle). */
    bg_plan_request_t r = *request;
    bg_cost_device_t *path_device = NULL;
    if (p->auto_schedule && p->chunks > 1) {
        BG_CHECK(path_devices(p, host_share, r.devices, &path_device));
        if (path_device != NULL) {
            r.path_device = path_device;
            r.path_links = p->path_links->link;
        }
    }
    const bg_status_t searched =
        bg_plan_search_progress(&r, flags, bg_progress_count, &progress, out);
    free(path_device);               /* the plan keeps a copy of its devices */
    bg_progress_end_line(&progress); /* an error's message on a line of its own */
    return searched;
}

/* Runs one of the placement's chains the other way round, in place: with
 * `path`, the devices chosen as a path for the schedules of one chunk a
 * device (placement->path and its links), else its devices, their links
 * and their costs (setup->devices). Nothing is allocated, so the request
 * made of them stays valid (and describes the chain as it now runs), and
 * twice is the order it was. */
static void reverse_chain(bg_placement_t *p, bg_cli_setup_t *setup, int path) {
    bg_device_list_reverse(path ? &p->path : &p->devices);
    bg_device_links_reverse(path ? setup->path_links : setup->links);
    const int k = p->devices.count;
    for (int i = 0, j = k - 1; !path && i < j; i++, j--) {
        const bg_cost_device_t d = setup->devices[i];
        setup->devices[i] = setup->devices[j];
        setup->devices[j] = d;
    }
}

/* Whether the chain `*plan` ran on (the path, with `path`) might fit the
 * other way round where it does not: bg_plan_may_fit_reversed, and under
 * --schedule auto --chunks V whatever the search chose (interleaved may
 * have overflowed least where a schedule of one chunk fits on the path
 * reversed), where the path's capacities differ at mirrored places. */
static bg_status_t may_fit_reversed(const bg_placement_t *p, int path, const bg_plan_t *plan,
                                    int host_share, int *out) {
    *out = 0;
    if (!path) {
        *out = bg_plan_may_fit_reversed(plan);
        return BG_OK;
    }
    if (plan->partition->fits || !p->auto_schedule) return BG_OK;
    bg_cost_device_t *device = NULL;
    BG_CHECK(path_devices(p, host_share, p->path.count, &device));
    *out =
        device != NULL && p->path.count >= 2 && !bg_plan_capacities_mirrored(device, p->path.count);
    free(device);
    return BG_OK;
}

/* Where `*plan` does not fit, yet might the other way round
 * (may_fit_reversed), plans its chain so (under --schedule auto --chunks
 * V: the path the schedules of one chunk run on, searching again) and
 * keeps that, with a note, where it fits; else the placement goes back as
 * it was, and a note says that the other way does not fit either (none
 * where the planner refused it). */
static bg_status_t try_reversed_chain(const char *cmd, bg_placement_t *p, bg_cli_setup_t *setup,
                                      const bg_plan_request_t *request, int host_share,
                                      bg_plan_t **plan) {
    const int path = p->chunks > 1; /* --chunks V under --schedule auto */
    const bg_device_list_t *list = path ? &p->path : &p->devices;
    const bg_device_links_t *links = path ? setup->path_links : setup->links;
    if (links == NULL || links->count != list->count ||
        (!path && list->count != (*plan)->request.devices))
        return BG_OK;
    int may = 0;
    BG_CHECK(may_fit_reversed(p, path, *plan, host_share, &may));
    if (!may) return BG_OK;
    char before[160], after[160];
    bg_device_list_words(list, before, sizeof before);
    reverse_chain(p, setup, path); /* request's devices and links with it */
    bg_device_list_words(list, after, sizeof after);
    bg_plan_t *reversed = NULL;
    const bg_status_t st = plan_search(cmd, p, request, host_share, &reversed);
    if (st != BG_OK || !reversed->partition->fits) {
        bg_plan_destroy(reversed);
        reverse_chain(p, setup, path);
        if (st != BG_OK && st != BG_ERR_INVALID) return st;
        if (st == BG_OK) /* a refusal the other way round is no measure of fitting */
            fprintf(stderr, "note: nor do the devices fit the other way round, %s\n", after);
        return BG_OK;
    }
    const bg_partition_t *part = (*plan)->partition;
    if ((*plan)->request.chunks == 1) { /* its stages are on the chain named */
        const bg_partition_stage_t *worst = &part->stage[part->worst_stage];
        char over[32], at[48] = "";
        bg_cli_group_digits((int64_t)part->overflow_bytes, over, sizeof over);
        if (p->auto_microbatches) /* the search's least overflow, at its own M */
            snprintf(at, sizeof at, " at --microbatches %d", (*plan)->request.microbatches);
        fprintf(stderr,
                "note: the stages run on the devices the other way round, %s: on %s stage %d "
                "(layers %d-%d on %s) is %s bytes over its capacity%s\n",
                after, before, part->worst_stage, worst->first_layer, worst->last_layer - 1,
                (*plan)->device[worst->device].name, over, at);
    } else {
        fprintf(stderr,
                "note: the stages run on the devices the other way round, %s: on %s no "
                "schedule of one chunk a device fit, nor did interleaved on its cycle\n",
                after, before);
    }
    bg_plan_destroy(*plan);
    *plan = reversed;
    p->reversed = 1;
    return BG_OK;
}

/* Where --profile left --microbatches auto fewer counts to try (those
 * whose micro-batch sizes it timed), which they were: a tester's sweep
 * --simulate showed a count faster than auto's choice that auto never
 * tried, unsaid. */
static void note_profiled_counts(const bg_placement_t *p, const bg_plan_request_t *request) {
    if (request->profile == NULL) return;
    const unsigned flags =
        BG_PLAN_SEARCH_MICROBATCHES | (p->auto_schedule ? BG_PLAN_SEARCH_SCHEDULE : 0);
    const int multiple = bg_plan_microbatch_multiple(request, flags);
    const int all = bg_plan_microbatch_candidates(request->batch, multiple, NULL, 0);
    int *ms = malloc(sizeof *ms * (size_t)(all > 0 ? all : 1));
    if (ms == NULL) return;
    bg_plan_microbatch_candidates(request->batch, multiple, ms, all);
    const int kept = bg_plan_keep_profiled_counts(request, ms, all);
    if (kept < all) {
        fprintf(stderr, "note: --microbatches auto tried M =");
        for (int i = 0; i < kept; i++) fprintf(stderr, "%s %d", i ? "," : "", ms[i]);
        fprintf(stderr,
                " only, of its %d counts: those whose micro-batches --profile timed ('brigade "
                "profile --sizes' times more)\n",
                all);
    }
    free(ms);
}

bg_status_t bg_cli_plan_make(const char *cmd, bg_placement_t *p, bg_cli_setup_t *setup,
                             const bg_plan_request_t *request, int host_share, bg_plan_t **out) {
    if (!p->auto_microbatches)
        BG_CHECK(bg_cli_check_microbatches(request->microbatches, request->batch));
    /* Interleaved needs M a multiple of K: where a given M is not one, the
     * search passes it by, which is said (a tester found it silent). */
    if (p->auto_schedule && p->chunks > 1 && !p->auto_microbatches &&
        request->microbatches % request->devices != 0)
        fprintf(stderr,
                "note: --schedule auto leaves interleaved out: --microbatches %d is not a "
                "multiple of the %d devices, as it needs\n",
                request->microbatches, request->devices);
    bg_plan_t *plan = NULL;
    BG_CHECK(plan_search(cmd, p, request, host_share, &plan));
    const bg_status_t st = try_reversed_chain(cmd, p, setup, request, host_share, &plan);
    if (st != BG_OK) {
        bg_plan_destroy(plan);
        return st;
    }
    bg_cli_note_split_profile(plan, p->profile_path);
    bg_cli_note_profile_sizes(plan->request.profile, plan->request.batch,
                              &plan->request.microbatches, 1);
    *out = plan;
    if (!p->auto_microbatches && !p->auto_schedule) return BG_OK;
    p->microbatches = plan->request.microbatches;
    p->schedule = plan->request.schedule;
    /* --chunks is interleaved's: another choice runs one chunk a device. */
    const int dropped_chunks = p->chunks != plan->request.chunks;
    p->chunks = plan->request.chunks;
    if (dropped_chunks) bg_placement_use_path(p); /* as the plan has them */
    char rate[32];
    fprintf(stderr, "brigade %s: chose", cmd);
    if (p->auto_microbatches) fprintf(stderr, " --microbatches %d", p->microbatches);
    if (p->auto_schedule) fprintf(stderr, " --schedule %s", bg_schedule_kind_name(p->schedule));
    if (dropped_chunks) fprintf(stderr, " (one chunk a device: --chunks is interleaved's)");
    /* Without a profile the figure is the cost model's FLOPs at an assumed
     * speed, which can be several times off for small layers: said so. */
    if (plan->partition->fits && plan->simulated_step_s > 0)
        fprintf(stderr, ": %s samples/s simulated (a step of %.3f ms%s), every stage fits\n",
                bg_cli_group_digits(
                    (int64_t)((double)plan->request.batch / plan->simulated_step_s + 0.5), rate,
                    sizeof rate),
                plan->simulated_step_s * 1e3,
                p->profile_path != NULL ? ", from --profile's times"
                : bg_placement_all_of_kind(p, BG_DEVICE_CPU) /* what a profile times */
                    ? ", from FLOPs at an assumed speed; 'brigade profile' measures this model"
                    : ", from FLOPs at an assumed speed");
    else if (!plan->partition->fits)
        fprintf(stderr, ": nothing fits; this overflows least\n");
    else
        fprintf(stderr, ", every stage fits\n");
    if (p->auto_microbatches) note_profiled_counts(p, request);
    return BG_OK;
}
