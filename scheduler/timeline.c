#include "timeline.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "host_memory.h"

bg_status_t bg_timeline_create(const bg_timeline_config_t *cfg, bg_timeline_t **out) {
    if (cfg->devices < 1 || cfg->stages < 1)
        return bg_error_set(BG_ERR_INVALID, "timeline: %d devices, %d stages", cfg->devices,
                            cfg->stages);
    bg_timeline_t *tl = bg_calloc(1, sizeof *tl);
    if (tl == NULL) return bg_error_set(BG_ERR_NOMEM, "timeline: out of memory");
    tl->schedule = cfg->schedule;
    tl->devices = cfg->devices;
    tl->stages = cfg->stages;
    tl->chunks = cfg->chunks;
    tl->microbatches = cfg->microbatches;
    tl->measured = cfg->measured;
    tl->device_names = bg_calloc((size_t)cfg->devices, sizeof *tl->device_names);
    if (tl->device_names == NULL) {
        free(tl);
        return bg_error_set(BG_ERR_NOMEM, "timeline: out of memory");
    }
    for (int d = 0; d < cfg->devices; d++) {
        if (cfg->device_names != NULL && cfg->device_names[d] != NULL)
            snprintf(tl->device_names[d], sizeof tl->device_names[d], "%s", cfg->device_names[d]);
        else
            snprintf(tl->device_names[d], sizeof tl->device_names[d], "device %d", d);
    }
    *out = tl;
    return BG_OK;
}

void bg_timeline_destroy(bg_timeline_t *tl) {
    if (tl == NULL) return;
    free(tl->device_names);
    free(tl->step_start);
    free(tl->step_end);
    free(tl->events);
    free(tl);
}

bg_status_t bg_timeline_check_room(int64_t events, bg_status_t status) {
    const double memory = (double)bg_host_memory_bytes();
    const double bytes = (double)events * (double)sizeof(bg_event_t);
    /* int capacities (first: so on any machine), and half the memory: past
     * it the kernel would end the process mid-run rather than let it say
     * why. */
    if (events > INT_MAX / 2)
        return bg_error_set(status,
                            "timeline: recording up to %" PRId64
                            " events (%.1f GiB) is past the %d "
                            "a timeline holds; record fewer steps or micro-batches",
                            events, bytes / (1 << 30), INT_MAX / 2);
    if (memory > 0 && bytes > memory / 2)
        return bg_error_set(status,
                            "timeline: recording up to %" PRId64
                            " events (%.1f GiB) would take more "
                            "than half of this machine's %.1f GiB; record fewer steps or "
                            "micro-batches",
                            events, bytes / (1 << 30), memory / (1 << 30));
    return BG_OK;
}

bg_status_t bg_timeline_reserve(bg_timeline_t *tl, int events) {
    if (tl->count + events > tl->capacity) {
        BG_CHECK(bg_timeline_check_room((int64_t)tl->count + events, BG_ERR_NOMEM));
        int capacity = tl->capacity > 0 ? tl->capacity : 256;
        while (capacity < tl->count + events) capacity *= 2;
        bg_event_t *grown = bg_realloc(tl->events, sizeof *grown * (size_t)capacity);
        if (grown == NULL) return bg_error_set(BG_ERR_NOMEM, "timeline: out of memory");
        tl->events = grown;
        tl->capacity = capacity;
    }
    if (tl->steps + 1 > tl->step_capacity) {
        int capacity = tl->step_capacity > 0 ? tl->step_capacity * 2 : 16;
        double *start = bg_realloc(tl->step_start, sizeof *start * (size_t)capacity);
        if (start == NULL) return bg_error_set(BG_ERR_NOMEM, "timeline: out of memory");
        tl->step_start = start;
        double *end = bg_realloc(tl->step_end, sizeof *end * (size_t)capacity);
        if (end == NULL) return bg_error_set(BG_ERR_NOMEM, "timeline: out of memory");
        tl->step_end = end;
        tl->step_capacity = capacity;
    }
    return BG_OK;
}

bg_status_t bg_timeline_add(bg_timeline_t *tl, const bg_event_t *event) {
    if (event->device < 0 || event->device >= tl->devices || event->end < event->start)
        return bg_error_set(BG_ERR_INTERNAL, "timeline: bad event (device %d, %g..%g)",
                            event->device, event->start, event->end);
    BG_CHECK(bg_timeline_reserve(tl, 1));
    tl->events[tl->count++] = *event;
    return BG_OK;
}

int bg_timeline_add_step(bg_timeline_t *tl, double start, double end) {
    /* bg_timeline_reserve made room for one more step. */
    tl->step_start[tl->steps] = start;
    tl->step_end[tl->steps] = end;
    return tl->steps++;
}

static int compare_events(const void *a, const void *b) {
    const bg_event_t *x = a, *y = b;
    if (x->device != y->device) return x->device - y->device;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

void bg_timeline_sort(bg_timeline_t *tl) {
    qsort(tl->events, (size_t)tl->count, sizeof *tl->events, compare_events);
}

void bg_timeline_clear(bg_timeline_t *tl) {
    tl->count = 0;
    tl->steps = 0;
    tl->first_step = 0;
    tl->has_clock = 0; /* the next step recorded is time 0 again */
}

const char *bg_event_kind_name(bg_event_kind_t kind) {
    static const char *const names[BG_EVENT_KINDS] = {"F",    "B",    "W",    "step",
                                                      "send", "recv", "wait", "link"};
    return (unsigned)kind < BG_EVENT_KINDS ? names[kind] : "?";
}

double bg_schedule_drain_share(int split_backward, int devices, int microbatches, int chunks) {
    double share = 1.0 / chunks;
    if (split_backward) {
        share /= 3;
        if (microbatches < devices && devices > 1)
            share *= 1 + (double)(devices - microbatches) / (devices - 1);
    }
    return share;
}

double bg_schedule_theoretical_bubble(bg_schedule_kind_t kind, int devices, int microbatches,
                                      int chunks) {
    /* Per micro-batch one stage time of work; the fill and drain leave
     * (K-1) x share idle. */
    const double idle =
        (devices - 1) * bg_schedule_drain_share(kind == BG_SCHEDULE_ZB_H1, devices, microbatches,
                                                kind == BG_SCHEDULE_INTERLEAVED ? chunks : 1);
    return idle / (microbatches + idle);
}

/* "F3 from stage 1" after `prefix`: the tensor of micro-batch 3 that the
 * event's stage takes from peer_stage. */
static void arrival_name(const bg_event_t *e, const char *prefix, char *name, size_t size) {
    if (e->microbatch >= 0)
        snprintf(name, size, "%s%c%d from stage %d", prefix, e->peer_stage < e->stage ? 'F' : 'B',
                 e->microbatch, e->peer_stage);
    else
        snprintf(name, size, "%sfrom stage %d", prefix, e->peer_stage);
}

void bg_event_describe(const bg_event_t *e, char *name, size_t size) {
    const char what = e->peer_stage > e->stage ? 'F' : 'B'; /* of a tensor sent */
    switch (e->kind) {
    case BG_EVENT_FORWARD: snprintf(name, size, "F%d", e->microbatch); break;
    case BG_EVENT_BACKWARD: snprintf(name, size, "B%d", e->microbatch); break;
    case BG_EVENT_WEIGHT: snprintf(name, size, "W%d", e->microbatch); break;
    case BG_EVENT_STEP: snprintf(name, size, "step"); break;
    case BG_EVENT_SEND:
        if (e->microbatch >= 0)
            snprintf(name, size, "send %c%d to stage %d", what, e->microbatch, e->peer_stage);
        else
            snprintf(name, size, "send to stage %d", e->peer_stage);
        break;
    case BG_EVENT_RECV: arrival_name(e, "recv ", name, size); break;
    case BG_EVENT_WAIT:
        if (e->peer_stage >= 0 && e->to_send && e->microbatch >= 0)
            snprintf(name, size, "wait for room to send %c%d to stage %d", what, e->microbatch,
                     e->peer_stage);
        else if (e->peer_stage >= 0 && e->to_send)
            snprintf(name, size, "wait for room to send to stage %d", e->peer_stage);
        else if (e->peer_stage >= 0)
            arrival_name(e, "wait for ", name, size);
        else
            snprintf(name, size, "wait for every device (optimizer step)");
        break;
    case BG_EVENT_LINK: arrival_name(e, "", name, size); break;
    default: snprintf(name, size, "?"); break;
    }
}
