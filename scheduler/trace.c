#include "trace.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "report.h"
#include "text_file.h"

static int is_transfer(bg_event_kind_t kind) {
    return kind == BG_EVENT_SEND || kind == BG_EVENT_RECV || kind == BG_EVENT_WAIT;
}

/* The stage an event's lane belongs to (a step without a stage, as older
 * or hand-made timelines have, goes on its device's lane). */
static int lane_stage(const bg_event_t *e) { return e->stage >= 0 ? e->stage : e->device; }

int bg_trace_lane(const bg_event_t *e) {
    int lane = BG_TRACE_LANE_OPS;
    if (e->kind == BG_EVENT_LINK)
        lane = e->peer_stage < e->stage ? BG_TRACE_LANE_LINK_PREV : BG_TRACE_LANE_LINK_NEXT;
    else if (is_transfer(e->kind))
        lane = BG_TRACE_LANE_TRANSFERS;
    return BG_TRACE_LANES * lane_stage(e) + lane;
}

/* The trace's text as it is built: one event at a time, each printed and
 * freed before the next, so that memory holds the text (about 150 bytes an
 * event), not a JSON tree of every event (ten times that: a simulated
 * trace of 65,536 micro-batches grew past 15 GiB). */
typedef struct trace_text {
    char *text;
    size_t length, capacity;
    int events; /* printed so far: all but the first follow a comma */
} trace_text_t;

static int append(trace_text_t *out, const char *text, size_t length) {
    if (out->length + length + 1 > out->capacity) {
        size_t capacity = out->capacity > 0 ? out->capacity : 1 << 16;
        while (capacity < out->length + length + 1) capacity *= 2;
        char *grown = realloc(out->text, capacity);
        if (grown == NULL) return 0;
        out->text = grown;
        out->capacity = capacity;
    }
    memcpy(out->text + out->length, text, length);
    out->length += length;
    out->text[out->length] = '\0';
    return 1;
}

/* Prints `item` (NULL: it could not be made) into the traceEvents list and
 * frees it; 0 when out of memory. */
static int emit(trace_text_t *out, cJSON *item) {
    char *text = item != NULL ? cJSON_PrintUnformatted(item) : NULL;
    cJSON_Delete(item);
    const int ok = text != NULL && (out->events == 0 || append(out, ",", 1)) &&
                   append(out, text, strlen(text));
    free(text);
    out->events += ok;
    return ok;
}

/* Prints {"name": meta, "ph": "M", "pid", "tid", "args": {key: value}}. */
static int add_metadata(trace_text_t *out, const char *meta, int pid, int tid, const char *text,
                        int sort_index) {
    cJSON *item = cJSON_CreateObject(), *args;
    if (item == NULL || cJSON_AddStringToObject(item, "name", meta) == NULL ||
        cJSON_AddStringToObject(item, "ph", "M") == NULL ||
        cJSON_AddNumberToObject(item, "pid", pid) == NULL ||
        cJSON_AddNumberToObject(item, "tid", tid) == NULL ||
        (args = cJSON_AddObjectToObject(item, "args")) == NULL ||
        (text != NULL ? cJSON_AddStringToObject(args, "name", text)
                      : cJSON_AddNumberToObject(args, "sort_index", sort_index)) == NULL) {
        cJSON_Delete(item);
        return 0;
    }
    return emit(out, item);
}

/* Seconds as microseconds to the whole nanosecond, as the events' times. */
static double whole_ns_us(double seconds) { return (double)llround(1e9 * seconds) / 1e3; }

/* A complete event ("ph": "X") from `start` to `end` seconds, with its
 * "args" object in *args for the caller's fields; NULL when out of
 * memory. Whole nanoseconds: short numbers, and ts + dur of one event
 * never passes the next event's ts on the same lane. */
static cJSON *complete_event(const char *name, const char *category, int pid, int tid, double start,
                             double end, cJSON **args) {
    const long long start_ns = llround(start * 1e9), end_ns = llround(end * 1e9);
    cJSON *item = cJSON_CreateObject();
    if (item == NULL || cJSON_AddStringToObject(item, "name", name) == NULL ||
        cJSON_AddStringToObject(item, "cat", category) == NULL ||
        cJSON_AddStringToObject(item, "ph", "X") == NULL ||
        cJSON_AddNumberToObject(item, "pid", pid) == NULL ||
        cJSON_AddNumberToObject(item, "tid", tid) == NULL ||
        cJSON_AddNumberToObject(item, "ts", (double)start_ns / 1e3) == NULL ||
        cJSON_AddNumberToObject(item, "dur", (double)(end_ns - start_ns) / 1e3) == NULL ||
        (*args = cJSON_AddObjectToObject(item, "args")) == NULL) {
        cJSON_Delete(item);
        return NULL;
    }
    return item;
}

/* args: stage, microbatch (not for an event of the whole step, as the
 * optimizer step and the barrier before it are), step (which recorded
 * step, from 0), run_step (the run's, from 1) where the timeline knows it,
 * peer_stage for transfers and links (not the barrier's wait), and where
 * an event has a tail (bg_event_t.tail_s) check_us (F, B) or wake_us
 * (send, recv), and for a wait on a neighbour whose readiness is known
 * (`ready`, bg_timeline_wait_ready) handoff_us, its part after it. */
static int add_event(trace_text_t *out, const bg_timeline_t *tl, const bg_event_t *e,
                     double ready) {
    const double handoff = isnan(ready) ? -1 : e->end - fmax(e->start, ready);
    const int64_t run_step = bg_timeline_run_step(tl, e->step);
    char name[BG_EVENT_NAME_MAX];
    bg_event_describe(e, name, sizeof name);
    cJSON *args = NULL;
    cJSON *item = complete_event(name, bg_event_kind_name(e->kind), e->device, bg_trace_lane(e),
                                 e->start, e->end, &args);
    if (item != NULL &&
        (cJSON_AddNumberToObject(args, "stage", e->stage) == NULL ||
         (e->microbatch >= 0 &&
          cJSON_AddNumberToObject(args, "microbatch", e->microbatch) == NULL) ||
         cJSON_AddNumberToObject(args, "step", e->step) == NULL ||
         (run_step > 0 && cJSON_AddNumberToObject(args, "run_step", (double)run_step) == NULL) ||
         ((is_transfer(e->kind) || e->kind == BG_EVENT_LINK) && e->peer_stage >= 0 &&
          cJSON_AddNumberToObject(args, "peer_stage", e->peer_stage) == NULL) ||
         (e->tail_s > 0 &&
          cJSON_AddNumberToObject(args, is_transfer(e->kind) ? "wake_us" : "check_us",
                                  whole_ns_us(e->tail_s)) == NULL) ||
         (handoff >= 0 &&
          cJSON_AddNumberToObject(args, "handoff_us", whole_ns_us(handoff)) == NULL))) {
        cJSON_Delete(item);
        item = NULL;
    }
    return emit(out, item);
}

/* Names every device and every lane the events use (used: one flag per
 * tid of each device), in bg_trace_lane's order. */
static int add_lane_names(trace_text_t *out, const bg_timeline_t *tl, unsigned char *used) {
    const int lanes = tl->stages > tl->devices ? tl->stages : tl->devices;
    const size_t tids = (size_t)lanes * BG_TRACE_LANES;
    for (int s = 0; s < tl->stages; s++)
        used[(size_t)(s % tl->devices) * tids + (size_t)s * BG_TRACE_LANES] = 1;
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        int lane = lane_stage(e);
        if (lane >= 0 && lane < lanes)
            used[(size_t)e->device * tids + (size_t)bg_trace_lane(e)] = 1;
    }
    char text[64];
    for (int d = 0; d < tl->devices; d++) {
        if (!add_metadata(out, "process_name", d, 0, tl->device_names[d], 0) ||
            !add_metadata(out, "process_sort_index", d, 0, NULL, d))
            return 0;
        for (int tid = 0; tid < (int)tids; tid++) {
            if (!used[(size_t)d * tids + (size_t)tid]) continue;
            const int stage = tid / BG_TRACE_LANES;
            switch (tid % BG_TRACE_LANES) {
            case BG_TRACE_LANE_OPS: snprintf(text, sizeof text, "stage %d", stage); break;
            case BG_TRACE_LANE_TRANSFERS:
                snprintf(text, sizeof text, "stage %d transfers", stage);
                break;
            case BG_TRACE_LANE_LINK_PREV:
                snprintf(text, sizeof text, "stage %d link from stage %d", stage, stage - 1);
                break;
            default: snprintf(text, sizeof text, "stage %d link from stage %d", stage, stage + 1);
            }
            if (!add_metadata(out, "thread_name", d, tid, text, 0) ||
                !add_metadata(out, "thread_sort_index", d, tid, NULL, tid))
                return 0;
        }
    }
    return 1;
}

/* The recorded steps' spans, on a process of their own after the devices'
 * ("steps"): where each step starts and ends, which the report's step
 * time is the mean of, and what the ops' idle time is counted within. */
static int add_step_spans(trace_text_t *out, const bg_timeline_t *tl) {
    const int pid = tl->devices;
    if (tl->steps < 1) return 1;
    if (!add_metadata(out, "process_name", pid, 0, "steps", 0) ||
        !add_metadata(out, "process_sort_index", pid, 0, NULL, pid) ||
        !add_metadata(out, "thread_name", pid, 0, "recorded steps", 0))
        return 0;
    for (int i = 0; i < tl->steps; i++) {
        /* Named as train's progress counts the run's steps, where known. */
        char name[32];
        snprintf(name, sizeof name, "step %" PRId64, bg_timeline_step_number(tl, i));
        const int64_t run_step = bg_timeline_run_step(tl, i);
        cJSON *args = NULL;
        cJSON *item =
            complete_event(name, "span", pid, 0, tl->step_start[i], tl->step_end[i], &args);
        if (item != NULL && (cJSON_AddNumberToObject(args, "step", i) == NULL ||
                             (run_step > 0 && cJSON_AddNumberToObject(args, "run_step",
                                                                      (double)run_step) == NULL))) {
            cJSON_Delete(item);
            item = NULL;
        }
        if (!emit(out, item)) return 0;
    }
    return 1;
}

bg_status_t bg_trace_write(const char *path, const bg_timeline_t *tl) {
    if (path == NULL || tl == NULL) return bg_error_set(BG_ERR_INVALID, "trace: NULL argument");
    double *ready = NULL; /* each wait's neighbour ready */
    bg_status_t st = bg_timeline_wait_ready(tl, &ready);
    if (st != BG_OK) return st;
    int lanes = tl->stages > tl->devices ? tl->stages : tl->devices;
    unsigned char *used = calloc((size_t)tl->devices * (size_t)lanes * BG_TRACE_LANES, 1);
    trace_text_t out = {0};
    static const char head[] = "{\"traceEvents\":[", tail[] = "],\"displayTimeUnit\":\"ms\"}";
    if (used == NULL || !append(&out, head, strlen(head)) || !add_lane_names(&out, tl, used))
        goto nomem;
    for (int i = 0; i < tl->count; i++)
        if (!add_event(&out, tl, &tl->events[i], ready[i])) goto nomem;
    if (!add_step_spans(&out, tl) || !append(&out, tail, strlen(tail))) goto nomem;
    st = bg_text_file_write(path, out.text, "trace");
    goto done;
nomem:
    st = bg_error_set(BG_ERR_NOMEM, "trace: out of memory building '%s'", path);
done:
    free(out.text);
    free(used);
    free(ready);
    return st;
}
