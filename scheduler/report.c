#include "report.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "text_table.h"

static int is_compute(bg_event_kind_t kind) {
    return kind == BG_EVENT_FORWARD || kind == BG_EVENT_BACKWARD || kind == BG_EVENT_WEIGHT ||
           kind == BG_EVENT_STEP;
}

static int is_copy(bg_event_kind_t kind) { return kind == BG_EVENT_SEND || kind == BG_EVENT_RECV; }

void bg_timeline_summary_destroy(bg_timeline_summary_t *s) {
    if (s == NULL) return;
    free(s->device);
    free(s->stage);
    free(s->device_names);
    free(s);
}

/* Adds one event's duration to its device's and stage's sums. */
static void account_event(bg_timeline_summary_t *s, const bg_event_t *e) {
    double length = e->end - e->start;
    bg_device_summary_t *d = &s->device[e->device];
    if (is_compute(e->kind)) d->compute_s += length;
    if (e->kind == BG_EVENT_STEP) d->update_s += length;
    if (is_copy(e->kind)) d->copy_s += length;
    if (e->kind == BG_EVENT_WAIT) d->wait_s += length;
    /* A wait with no peer (-1) is the optimizer step's barrier. */
    if (e->kind == BG_EVENT_WAIT && e->peer_stage < 0) d->barrier_s += length;
    if (e->stage < 0) return;
    bg_stage_summary_t *st = &s->stage[e->stage];
    if (is_compute(e->kind)) st->compute_s += length;
    if (is_copy(e->kind)) st->copy_s += length;
    switch (e->kind) {
    case BG_EVENT_FORWARD: st->forward_s += length; break;
    case BG_EVENT_BACKWARD: st->backward_s += length; break;
    case BG_EVENT_WEIGHT: st->weight_s += length; break;
    case BG_EVENT_WAIT:
        /* A wait with no peer (-1: the optimizer-step barrier) is on no
         * neighbour, though on stage 0 -1 is "stage - 1". */
        if (e->peer_stage < 0) break;
        if (e->peer_stage == e->stage - 1) st->wait_prev_s += length;
        if (e->peer_stage == e->stage + 1) st->wait_next_s += length;
        if (e->to_send && e->peer_stage == e->stage - 1) st->room_prev_s += length;
        if (e->to_send && e->peer_stage == e->stage + 1) st->room_next_s += length;
        break;
    default: break;
    }
}

/* Orders two keys of n ints, the first that differs deciding. */
static int compare_keys(const int *x, const int *y, int n) {
    for (int i = 0; i < n; i++)
        if (x[i] != y[i]) return (x[i] > y[i]) - (x[i] < y[i]);
    return 0;
}

/* Orders LINK events by step, receiving stage, sending stage and
 * micro-batch. */
static int compare_links(const void *a, const void *b) {
    const bg_event_t *x = *(const bg_event_t *const *)a, *y = *(const bg_event_t *const *)b;
    const int kx[] = {x->step, x->stage, x->peer_stage, x->microbatch},
              ky[] = {y->step, y->stage, y->peer_stage, y->microbatch};
    return compare_keys(kx, ky, 4);
}

/* The time a SEND or RECV made its message or its freed slot ready for
 * the peer: before the wake of a peer asleep on the channel (its tail). */
static double ready_time(const bg_event_t *e) { return e->end - e->tail_s; }

/* Orders copies by kind, step, stage and peer: 0 for two of one kind on
 * one channel in one step. */
static int compare_channel(const bg_event_t *x, const bg_event_t *y) {
    const int kx[] = {x->kind, x->step, x->stage, x->peer_stage},
              ky[] = {y->kind, y->step, y->stage, y->peer_stage};
    return compare_keys(kx, ky, 4);
}

/* Orders the copies that end waits (is_waker) by compare_channel, then by
 * micro-batch for sends (which a wait for that message looks up) and by
 * ready time for receives (a wait for room looks up the first once it
 * began: the receive that freed its slot). */
static int compare_wakers(const void *a, const void *b) {
    const bg_event_t *x = *(const bg_event_t *const *)a, *y = *(const bg_event_t *const *)b;
    const int by_channel = compare_channel(x, y);
    if (by_channel != 0) return by_channel;
    if (x->kind == BG_EVENT_SEND)
        return (x->microbatch > y->microbatch) - (x->microbatch < y->microbatch);
    const double tx = ready_time(x), ty = ready_time(y);
    return (tx > ty) - (tx < ty);
}

/* The copy that ended wait `w`: for a message, the peer's send of it; for
 * room, the peer's first receive from w's stage ready once w began (the
 * first slot freed wakes the sender; a slot freed before would have been
 * taken without waiting), if ready by w's end. NULL when there is none
 * among the `n` wakers. */
static const bg_event_t *waker_of(const bg_event_t *w, const bg_event_t **wakers, int n) {
    const bg_event_t key = {.kind = w->to_send ? BG_EVENT_RECV : BG_EVENT_SEND,
                            .step = w->step,
                            .stage = w->peer_stage,
                            .peer_stage = w->stage,
                            .microbatch = w->microbatch,
                            .end = w->start}, /* a receive's ready time: the wait's start */
        *k = &key;
    int lo = 0, hi = n; /* first waker not before `key` */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (compare_wakers(&wakers[mid], &k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n) return NULL;
    const bg_event_t *found = wakers[lo];
    if (!w->to_send) return compare_wakers(&found, &k) == 0 ? found : NULL;
    return compare_channel(found, &key) == 0 && ready_time(found) <= w->end ? found : NULL;
}

/* Whether a copy counts as ending a neighbour's wait (waker_of): one that
 * recorded its wake of a sleeper (a GPU's copies, only enqueued, record
 * none); in a simulation, every one (the analytic model may charge no
 * wake). */
static int is_waker(const bg_timeline_t *tl, const bg_event_t *e) {
    return is_copy(e->kind) && (e->tail_s > 0 || !tl->measured);
}

static int is_link(const bg_timeline_t *tl, const bg_event_t *e) {
    (void)tl;
    return e->kind == BG_EVENT_LINK;
}

/* Sets *out to the timeline's events for which keep() holds, sorted by
 * `compare`, and *n to their number (*out NULL when there are none). */
static bg_status_t sorted_events(const bg_timeline_t *tl,
                                 int (*keep)(const bg_timeline_t *, const bg_event_t *),
                                 int (*compare)(const void *, const void *),
                                 const bg_event_t ***out, int *n) {
    *out = NULL;
    *n = 0;
    for (int i = 0; i < tl->count; i++) *n += keep(tl, &tl->events[i]);
    if (*n == 0) return BG_OK;
    const bg_event_t **events = malloc(sizeof *events * (size_t)*n);
    if (events == NULL) return bg_error_set(BG_ERR_NOMEM, "timeline summary: out of memory");
    int k = 0;
    for (int i = 0; i < tl->count; i++)
        if (keep(tl, &tl->events[i])) events[k++] = &tl->events[i];
    qsort(events, (size_t)k, sizeof *events, compare);
    *out = events;
    return BG_OK;
}

/* For each event i of tl that is a wait on a neighbour: link[i], the LINK
 * event of its message's crossing (a wait for a message) or NULL, and
 * ready[i], when the neighbour made its message or room ready, past that
 * crossing (NAN where no copy ended it: is_waker). Other events get NULL
 * and NAN. Either array may be NULL. */
static bg_status_t match_neighbour_waits(const bg_timeline_t *tl, const bg_event_t **link,
                                         double *ready) {
    const bg_event_t **links, **wakers;
    int links_n, wakers_n;
    BG_CHECK(sorted_events(tl, is_link, compare_links, &links, &links_n));
    bg_status_t st = sorted_events(tl, is_waker, compare_wakers, &wakers, &wakers_n);
    if (st != BG_OK) {
        free(links);
        return st;
    }
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i], *key = e, **crossing = NULL, *waker = NULL;
        const int waits = e->kind == BG_EVENT_WAIT && e->peer_stage >= 0 && e->stage >= 0;
        if (waits && !e->to_send && links_n > 0)
            crossing = bsearch(&key, links, (size_t)links_n, sizeof *links, compare_links);
        if (waits) waker = waker_of(e, wakers, wakers_n);
        if (link != NULL) link[i] = crossing != NULL ? *crossing : NULL;
        if (ready != NULL)
            ready[i] = waker == NULL ? NAN
                                     : fmax(ready_time(waker),
                                            crossing != NULL ? (*crossing)->end : -INFINITY);
    }
    free(links);
    free(wakers);
    return BG_OK;
}

bg_status_t bg_timeline_wait_ready(const bg_timeline_t *tl, double **out) {
    if (tl == NULL || out == NULL) return bg_error_set(BG_ERR_INVALID, "timeline: NULL argument");
    *out = NULL;
    double *ready = malloc(sizeof *ready * (size_t)(tl->count > 0 ? tl->count : 1));
    if (ready == NULL) return bg_error_set(BG_ERR_NOMEM, "timeline summary: out of memory");
    bg_status_t st = match_neighbour_waits(tl, NULL, ready);
    if (st != BG_OK) {
        free(ready);
        return st;
    }
    *out = ready;
    return BG_OK;
}

/* For each wait on a neighbour: adds to its device's and stage's
 * link_wait_s the part during which its message crossed the link (a wait
 * for a message), and to its stage's wake_s the part after the message
 * (or the room) was ready, past the link's crossing, counting it. */
static bg_status_t account_neighbour_waits(bg_timeline_summary_t *s, const bg_timeline_t *tl) {
    if (tl->count == 0) return BG_OK;
    const bg_event_t **link = malloc(sizeof *link * (size_t)tl->count);
    double *ready = malloc(sizeof *ready * (size_t)tl->count);
    bg_status_t st = BG_OK;
    if (link == NULL || ready == NULL)
        st = bg_error_set(BG_ERR_NOMEM, "timeline summary: out of memory");
    if (st == BG_OK) st = match_neighbour_waits(tl, link, ready);
    for (int i = 0; st == BG_OK && i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (link[i] != NULL) {
            const double overlap = fmin(e->end, link[i]->end) - fmax(e->start, link[i]->start);
            if (overlap > 0) {
                s->device[e->device].link_wait_s += overlap;
                s->stage[e->stage].link_wait_s += overlap;
            }
        }
        const double after = e->end - fmax(e->start, ready[i]);
        if (isnan(ready[i]) || !(after > 0)) continue;
        bg_stage_summary_t *stage = &s->stage[e->stage];
        stage->wake_s += after;
        stage->wakes += 1;
        if (e->to_send && e->peer_stage == e->stage - 1) stage->room_prev_wake_s += after;
        if (e->to_send && e->peer_stage == e->stage + 1) stage->room_next_wake_s += after;
    }
    free(link);
    free(ready);
    return st;
}

/* Each device's start_wait_s and end_wait_s (summed, before
 * finish_summary's means): its first event of a step less the step's
 * start (its thread woken by the caller; recorded steps only), and the end
 * of the step's last event on any device less the end of this device's
 * last; and host_end_s, the step's end less that last event (the caller's
 * joining, recorded steps only). A timeline without recorded steps is one
 * step. */
static bg_status_t account_edge_waits(bg_timeline_summary_t *s, const bg_timeline_t *tl) {
    const int n = tl->steps > 0 ? tl->steps : 1, k = tl->devices;
    if (tl->count == 0) return BG_OK;
    const size_t cells = (size_t)n * (size_t)k;
    double *first = malloc(sizeof(double) * 2 * cells);
    if (first == NULL) return bg_error_set(BG_ERR_NOMEM, "timeline summary: out of memory");
    double *last = first + cells;
    for (size_t i = 0; i < cells; i++) {
        first[i] = INFINITY;
        last[i] = -INFINITY;
    }
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        const int step = tl->steps > 0 ? e->step : 0;
        if (step < 0 || step >= n || e->kind == BG_EVENT_LINK) continue; /* links: copy engines */
        const size_t at = (size_t)step * (size_t)k + (size_t)e->device;
        if (e->start < first[at]) first[at] = e->start;
        if (e->end > last[at]) last[at] = e->end;
    }
    for (int j = 0; j < n; j++) {
        double latest = -INFINITY;
        for (int d = 0; d < k; d++)
            if (last[(size_t)j * (size_t)k + (size_t)d] > latest)
                latest = last[(size_t)j * (size_t)k + (size_t)d];
        if (tl->steps > 0 && latest > -INFINITY && tl->step_end[j] > latest)
            s->host_end_s += tl->step_end[j] - latest;
        for (int d = 0; d < k; d++) {
            const size_t at = (size_t)j * (size_t)k + (size_t)d;
            if (last[at] > -INFINITY && latest > last[at])
                s->device[d].end_wait_s += latest - last[at];
            if (tl->steps > 0 && first[at] < INFINITY && first[at] > tl->step_start[j])
                s->device[d].start_wait_s += first[at] - tl->step_start[j];
        }
    }
    free(first);
    return BG_OK;
}

/* Per-step means of the sums, the fractions and the headline figures. */
static void finish_summary(bg_timeline_summary_t *s, const bg_timeline_t *tl) {
    double steps = s->steps > 0 ? s->steps : 1;
    double step_sum = 0;
    for (int i = 0; i < tl->steps; i++) step_sum += tl->step_end[i] - tl->step_start[i];
    if (tl->steps > 0) {
        s->step_s = step_sum / tl->steps;
    } else if (tl->count > 0) {
        double first = tl->events[0].start, last = tl->events[0].end;
        for (int i = 1; i < tl->count; i++) {
            if (tl->events[i].start < first) first = tl->events[i].start;
            if (tl->events[i].end > last) last = tl->events[i].end;
        }
        s->step_s = last - first;
    }
    double min_compute = 0, max_compute = 0;
    s->host_end_s /= steps;
    for (int d = 0; d < s->devices; d++) {
        bg_device_summary_t *dev = &s->device[d];
        dev->compute_s /= steps;
        dev->update_s /= steps;
        dev->copy_s /= steps;
        dev->wait_s /= steps;
        dev->link_wait_s /= steps;
        dev->barrier_s /= steps;
        dev->start_wait_s /= steps;
        dev->end_wait_s /= steps;
        dev->idle_s = s->step_s - dev->compute_s - dev->copy_s;
        /* A device busy all step: the difference of sums may round below 0
         * (a bubble of -0.0%). */
        if (dev->idle_s < 0 && dev->idle_s > -1e-9 * s->step_s) dev->idle_s = 0;
        dev->other_idle_s = fmax(0, dev->idle_s - dev->wait_s - dev->start_wait_s -
                                        dev->end_wait_s - s->host_end_s);
        if (s->step_s > 0) {
            dev->compute_frac = dev->compute_s / s->step_s;
            dev->copy_frac = dev->copy_s / s->step_s;
            dev->idle_frac = dev->idle_s / s->step_s;
        }
        s->bubble_measured += dev->idle_frac / s->devices;
        if (s->step_s > 0)
            s->exposed_transfer_frac += (dev->copy_s + dev->link_wait_s) / s->step_s / s->devices;
        if (d == 0 || dev->compute_s < min_compute) min_compute = dev->compute_s;
        if (d == 0 || dev->compute_s > max_compute) max_compute = dev->compute_s;
    }
    if (s->step_s > 0) s->imbalance = (max_compute - min_compute) / s->step_s;
    for (int i = 0; i < s->stages; i++) {
        bg_stage_summary_t *st = &s->stage[i];
        st->compute_s /= steps;
        st->forward_s /= steps;
        st->backward_s /= steps;
        st->weight_s /= steps;
        st->wait_prev_s /= steps;
        st->wait_next_s /= steps;
        st->room_prev_s /= steps;
        st->room_next_s /= steps;
        st->copy_s /= steps;
        st->link_wait_s /= steps;
        st->wake_s /= steps;
        st->wakes /= steps;
        st->room_prev_wake_s /= steps;
        st->room_next_wake_s /= steps;
    }
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n > 0 values (sorted in place): the mean of the middle two
 * for even n. */
static double median(double *values, int n) {
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* Adds each event's compute and copy time to busy[step * devices + device],
 * or with `only` >= 0 that step's to busy[device]. */
static void add_busy(const bg_timeline_t *tl, int only, double *busy) {
    const int n = tl->steps, k = tl->devices;
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->step < 0 || e->step >= n || (only >= 0 && e->step != only)) continue;
        if (is_compute(e->kind) || is_copy(e->kind))
            busy[(only >= 0 ? 0 : (size_t)e->step * (size_t)k) + (size_t)e->device] +=
                e->end - e->start;
    }
}

/* The mean over devices of the idle fraction of a step of `length`. */
static double bubble_of(const double *busy, int devices, double length) {
    double bubble = 0;
    for (int d = 0; d < devices && length > 0; d++) bubble += (1 - busy[d] / length) / devices;
    return bubble;
}

double bg_timeline_step_bubble(const bg_timeline_t *tl, int step) {
    if (step < 0 || step >= tl->steps) return NAN;
    double *busy = calloc((size_t)tl->devices, sizeof(double));
    if (busy == NULL) return NAN;
    add_busy(tl, step, busy);
    const double bubble = bubble_of(busy, tl->devices, tl->step_end[step] - tl->step_start[step]);
    free(busy);
    return bubble;
}

/* The spread between the devices' compute of a step of `length`. */
static double imbalance_of(const double *compute, int devices, double length) {
    double least = compute[0], most = compute[0];
    for (int d = 1; d < devices; d++) {
        if (compute[d] < least) least = compute[d];
        if (compute[d] > most) most = compute[d];
    }
    return length > 0 ? (most - least) / length : 0;
}

/* step_median_s, step_min_s, step_max_s, bubble_median and
 * imbalance_median from each recorded step's own figures. */
static bg_status_t step_spread(bg_timeline_summary_t *s, const bg_timeline_t *tl) {
    s->step_median_s = s->step_min_s = s->step_max_s = s->step_s;
    s->bubble_median = s->bubble_measured;
    s->imbalance_median = s->imbalance;
    if (tl->steps < 1) return BG_OK;
    const int n = tl->steps, k = tl->devices;
    double *busy = calloc((size_t)n * (size_t)k, sizeof(double)),
           *compute = calloc((size_t)n * (size_t)k, sizeof(double));
    double *length = malloc(sizeof(double) * (size_t)n),
           *bubble = malloc(sizeof(double) * (size_t)n),
           *imbalance = malloc(sizeof(double) * (size_t)n);
    bg_status_t st = BG_OK;
    if (busy == NULL || compute == NULL || length == NULL || bubble == NULL || imbalance == NULL) {
        st = bg_error_set(BG_ERR_NOMEM, "timeline summary: out of memory");
        goto done;
    }
    add_busy(tl, -1, busy);
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->step >= 0 && e->step < n && is_compute(e->kind))
            compute[(size_t)e->step * (size_t)k + (size_t)e->device] += e->end - e->start;
    }
    for (int j = 0; j < n; j++) {
        length[j] = tl->step_end[j] - tl->step_start[j];
        bubble[j] = bubble_of(busy + (size_t)j * (size_t)k, k, length[j]);
        imbalance[j] = imbalance_of(compute + (size_t)j * (size_t)k, k, length[j]);
    }
    s->step_median_s = median(length, n); /* which sorts them */
    s->step_min_s = length[0];
    s->step_max_s = length[n - 1];
    s->bubble_median = median(bubble, n);
    s->imbalance_median = median(imbalance, n);
done:
    free(busy);
    free(compute);
    free(length);
    free(bubble);
    free(imbalance);
    return st;
}

bg_status_t bg_timeline_summarize(const bg_timeline_t *tl, bg_timeline_summary_t **out) {
    if (tl == NULL || out == NULL)
        return bg_error_set(BG_ERR_INVALID, "timeline summary: NULL argument");
    bg_status_t st = BG_OK;
    bg_timeline_summary_t *s = calloc(1, sizeof *s);
    BG_ALLOC_CHECK_GOTO(s, st, fail);
    s->schedule = tl->schedule;
    s->devices = tl->devices;
    s->stages = tl->stages;
    s->chunks = tl->chunks;
    s->microbatches = tl->microbatches;
    s->measured = tl->measured;
    s->steps = tl->steps > 0 ? tl->steps : (tl->count > 0 ? 1 : 0);
    s->bubble_theory =
        bg_schedule_theoretical_bubble(tl->schedule, tl->devices, tl->microbatches, tl->chunks);
    s->device = calloc((size_t)tl->devices, sizeof *s->device);
    BG_ALLOC_CHECK_GOTO(s->device, st, fail);
    s->stage = calloc((size_t)tl->stages, sizeof *s->stage);
    BG_ALLOC_CHECK_GOTO(s->stage, st, fail);
    s->device_names = calloc((size_t)tl->devices, sizeof *s->device_names);
    BG_ALLOC_CHECK_GOTO(s->device_names, st, fail);
    memcpy(s->device_names, tl->device_names, sizeof *s->device_names * (size_t)tl->devices);
    for (int i = 0; i < tl->stages; i++) s->stage[i].device = -1;
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (e->device < 0 || e->device >= tl->devices || e->stage < -1 || e->stage >= tl->stages) {
            st = bg_error_set(BG_ERR_INVALID,
                              "timeline summary: event %d (%s) has device %d, stage %d; the "
                              "timeline has %d devices, %d stages",
                              i, bg_event_kind_name(e->kind), e->device, e->stage, tl->devices,
                              tl->stages);
            goto fail;
        }
        if (e->stage >= 0 && s->stage[e->stage].device < 0) s->stage[e->stage].device = e->device;
        account_event(s, e);
    }
    BG_CHECK_GOTO(account_neighbour_waits(s, tl), st, fail);
    BG_CHECK_GOTO(account_edge_waits(s, tl), st, fail);
    for (int i = 0; i < tl->stages; i++)
        if (s->stage[i].device < 0) s->stage[i].device = i % tl->devices;
    finish_summary(s, tl);
    BG_CHECK_GOTO(step_spread(s, tl), st, fail);
    *out = s;
    return BG_OK;
fail:
    bg_timeline_summary_destroy(s);
    return st;
}

int bg_report_ms_decimals(double ms) { return ms >= 100 ? 0 : ms >= 10 ? 1 : ms >= 1 ? 2 : 3; }

/* A stage's waits for room to send toward its next stage (`next` 1) or
 * its previous one (0), until the neighbour had taken a message: less
 * their hand-offs. */
static double room_before_handoff(const bg_stage_summary_t *st, int next) {
    return next ? st->room_next_s - st->room_next_wake_s : st->room_prev_s - st->room_prev_wake_s;
}

/* Whether stage `i` waited for room to send toward its next stage (`next`
 * 1) or its previous one (0) for at least 2% of the step: what the summary
 * names in a line of its own. */
static bool waits_for_room(const bg_timeline_summary_t *s, int i, int next) {
    if (i < 0 || i >= s->stages) return false;
    const double room = room_before_handoff(&s->stage[i], next);
    return room > 0 && room >= 0.02 * s->step_s;
}

/* The share of the step the devices spend in their optimizer steps (their
 * stages' STEP events), on average over the devices, and (*without) the
 * bubble over the rest of the step (bg_summary_below_theory_by_update). */
static double optimizer_step_frac(const bg_timeline_summary_t *s, double *without) {
    *without = s->bubble_measured;
    if (!(s->step_s > 0) || s->devices == 0) return 0;
    double share = 0, bubble = 0;
    int counted = 0;
    for (int d = 0; d < s->devices; d++) {
        const bg_device_summary_t *dev = &s->device[d];
        share += dev->update_s / s->step_s / s->devices;
        const double rest = s->step_s - dev->update_s - dev->end_wait_s;
        if (rest > 0) {
            bubble += fmax(0, dev->idle_s - dev->end_wait_s) / rest;
            counted++;
        }
    }
    if (counted > 0) *without = bubble / counted;
    return share;
}

int bg_summary_below_theory_by_update(const bg_timeline_summary_t *s, double *update_frac,
                                      double *without) {
    *update_frac = optimizer_step_frac(s, without);
    return s->devices > 1 && s->bubble_measured < s->bubble_theory && *update_frac >= 0.05;
}

bg_status_t bg_summary_print(FILE *out, const bg_timeline_summary_t *s, const size_t *peak_bytes) {
    if (out == NULL || s == NULL)
        return bg_error_set(BG_ERR_INVALID, "timeline summary: NULL argument");
    static const bg_text_column_t columns[] = {
        {"stage", 'r', 5, 0},         {"device", 'l', 16, 2}, {"compute ms", 'r', 10, 1},
        {"busy%", 'r', 6, 1},         {"idle%", 'r', 6, 1},   {"wait prev ms", 'r', 12, 1},
        {"wait next ms", 'r', 12, 1}, {"copy ms", 'r', 9, 1}, {"peak MiB", 'r', 9, 1},
    };
    bg_text_table_t *t = NULL;
    BG_CHECK(bg_text_table_create(columns, (int)(sizeof columns / sizeof columns[0]), &t));
    int shared = 0; /* a device runs several stages (interleaved) */
    for (int i = 0; i < s->stages; i++) {
        const bg_stage_summary_t *st = &s->stage[i];
        double busy = s->step_s > 0 ? 100.0 * st->compute_s / s->step_s : 0;
        /* Idle is the device's: on the row of its first stage only. */
        int repeat = 0;
        for (int j = 0; j < i; j++) repeat |= s->stage[j].device == st->device;
        shared |= repeat;
        char idle[16] = "";
        if (!repeat) snprintf(idle, sizeof idle, "%.1f", 100.0 * s->device[st->device].idle_frac);
        bg_text_table_add(t, "%d", i);
        bg_text_table_add(t, "%s", s->device_names[st->device]);
        bg_text_table_add(t, "%.3f", 1e3 * st->compute_s);
        bg_text_table_add(t, "%.1f", busy);
        bg_text_table_add(t, "%s", idle);
        bg_text_table_add(t, "%.3f", 1e3 * st->wait_prev_s);
        bg_text_table_add(t, "%.3f", 1e3 * st->wait_next_s);
        bg_text_table_add(t, "%.3f", 1e3 * st->copy_s);
        if (peak_bytes != NULL)
            bg_text_table_add(t, "%.1f", (double)peak_bytes[i] / (1024.0 * 1024.0));
        else
            bg_text_table_add(t, "-");
    }
    bg_text_table_print(t, out);
    bg_text_table_destroy(t);
    if (shared) {
        fprintf(out, "(idle%% is a device's, on the row of its first stage: its stages share its "
                     "time");
        /* ... and its memory: what --device-mem must hold is their sum. */
        for (int d = 0; peak_bytes != NULL && d < s->devices; d++) {
            size_t together = 0;
            for (int i = 0; i < s->stages; i++)
                if (s->stage[i].device == d) together += peak_bytes[i];
            fprintf(out, "%s %s %.1f", d == 0 ? "; peak MiB of a device's stages together:" : ",",
                    s->device_names[d], (double)together / (1024.0 * 1024.0));
        }
        fprintf(out, ")\n");
    }
    fprintf(out, "bubble: %s %.1f%% vs theory %.1f%% (%s, K=%d",
            s->measured ? "measured" : "simulated", 100 * s->bubble_measured,
            100 * s->bubble_theory, bg_schedule_kind_name(s->schedule), s->devices);
    if (s->chunks > 1) fprintf(out, ", V=%d", s->chunks);
    const double step_ms = 1e3 * s->step_s;
    const int decimals = bg_report_ms_decimals(step_ms);
    /* Compute is compared per device: with V > 1, each device's stages
     * together. */
    fprintf(out, ", M=%d); %s imbalance %.1f%%; exposed transfer %.1f%%; step %.*f ms (%s)\n",
            s->microbatches, s->chunks > 1 ? "device" : "stage", 100 * s->imbalance,
            100 * s->exposed_transfer_frac, decimals, step_ms,
            s->measured ? "measured" : "simulated");
    /* A busy machine disturbs a step or two: the medians stand firm. */
    if (s->measured && s->steps >= 3) {
        const double median_ms = 1e3 * s->step_median_s;
        fprintf(out, "median of the %d steps: step %.*f ms, bubble %.1f%%, %s imbalance %.1f%%\n",
                s->steps, bg_report_ms_decimals(median_ms), median_ms, 100 * s->bubble_median,
                s->chunks > 1 ? "device" : "stage", 100 * s->imbalance_median);
    }
    if (s->devices == 1 && s->bubble_measured > 0)
        fprintf(out, "(one device: its idle time is the host's work between ops and steps, "
                     "not a pipeline bubble)\n");
    /* Below theory: the optimizer steps, busy time on every device at
     * once, dilute the idle time that theory counts over F and B alone
     * (two GPU stages at M = 1 read 26.0% against 50.0%: a walk). */
    double update_frac = 0, bubble_without = 0;
    if (bg_summary_below_theory_by_update(s, &update_frac, &bubble_without))
        fprintf(out,
                "(below theory: the optimizer step, %.1f%% of a device's step on average, is "
                "busy time, which the theory, of F and B alone, leaves out; without it the "
                "bubble is %.1f%%)\n",
                100 * update_frac, 100 * bubble_without);
    for (int i = 0; i < s->stages; i++)
        for (int k = 0; k < 2; k++) {
            if (!waits_for_room(s, i, k)) continue;
            const int next = k ? i + 1 : i - 1;
            /* Where the neighbour itself waited for room the same way, it
             * did not take the messages because it could not pass its own
             * on: the slower stage is where that chain of full rings ends. */
            int end = next;
            while (waits_for_room(s, end, k)) end += k ? 1 : -1;
            char chain[96] = "", more[96] = "";
            if (end != next)
                snprintf(chain, sizeof chain,
                         ", waiting for room itself: the full rings end at stage %d", end);
            /* The rest of those waits is the hand-off once the neighbour
             * had taken one: counted in its own line, not the neighbour's. */
            const double handoff = k ? s->stage[i].room_next_wake_s : s->stage[i].room_prev_wake_s;
            if (handoff >= 0.5e-6)
                snprintf(more, sizeof more, ", and %.3f ms more after it had (hand-off, below)",
                         1e3 * handoff);
            fprintf(out,
                    "stage %d waited %.3f ms per step for room to send %s to stage %d, which had "
                    "not taken the earlier ones%s%s\n",
                    i, 1e3 * room_before_handoff(&s->stage[i], k), k ? "activations" : "gradients",
                    next, chain, more);
        }
    /* The hand-offs: the part of a stage's waits after its neighbour was
     * ready, which a busy machine stretches. */
    for (int i = 0; i < s->stages; i++) {
        const bg_stage_summary_t *st = &s->stage[i];
        if (st->wake_s <= 0 || st->wake_s < 0.02 * s->step_s) continue;
        /* A mean over steps: a whole count where it is one. */
        const int whole = fabs(st->wakes - round(st->wakes)) < 0.05;
        /* In us, as a hand-off takes; in ms where a stalled thread made it
         * a wait of its own (a walk: "612381 us"). */
        const double each_us = 1e6 * st->wake_s / st->wakes;
        fprintf(out,
                "stage %d: %.3f ms per step of its waits came after the neighbour was ready "
                "(%.*f wait%s a step, %.*f %s on average): the hand-off to its thread, not the "
                "neighbour's slowness\n",
                i, 1e3 * st->wake_s, whole ? 0 : 1, st->wakes,
                whole && round(st->wakes) == 1 ? "" : "s",
                each_us < 1e3 ? 0 : bg_report_ms_decimals(each_us / 1e3),
                each_us < 1e3 ? each_us : each_us / 1e3, each_us < 1e3 ? "us" : "ms");
    }
    /* The rest of a device's waits: at the step's start, until its thread
     * was woken; at the optimizer step, until every device has finished
     * its step's ops; and after its own optimizer step, idle until the
     * others' end. */
    for (int d = 0; s->devices > 1 && d < s->devices; d++) {
        const struct {
            double seconds;
            const char *verb, *where;
        } lines[] = {
            {s->device[d].start_wait_s, "was idle",
             "at the step's start, until its thread was woken"},
            {s->device[d].barrier_s, "waited",
             "at the optimizer step, for the other devices to reach it"},
            {s->device[d].end_wait_s, "was idle",
             "at the step's end, while the other devices finished their optimizer steps"},
        };
        for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++)
            if (lines[k].seconds > 0 && lines[k].seconds >= 0.02 * s->step_s)
                fprintf(out, "%s %s %.3f ms per step %s\n", s->device_names[d], lines[k].verb,
                        1e3 * lines[k].seconds, lines[k].where);
    }
    /* And the idle time no wait or edge of the step explains, which a busy
     * machine grows. */
    if (s->devices > 1 && s->host_end_s > 0 && s->host_end_s >= 0.02 * s->step_s)
        fprintf(out,
                "every device was idle %.3f ms per step after the step's last event, while the "
                "caller joined their threads\n",
                1e3 * s->host_end_s);
    for (int d = 0; s->devices > 1 && d < s->devices; d++)
        if (s->device[d].other_idle_s > 0 && s->device[d].other_idle_s >= 0.02 * s->step_s)
            fprintf(out,
                    "%s was idle %.3f ms per step between its events, in no wait: its thread's "
                    "own work between ops, or its thread not running\n",
                    s->device_names[d], 1e3 * s->device[d].other_idle_s);
    if (ferror(out)) return bg_error_set(BG_ERR_IO, "timeline summary: writing the table failed");
    return BG_OK;
}

/* Adds name: number pairs; returns 0 when cJSON could not allocate. */
static int add_numbers(cJSON *object, const char *const *names, const double *values, int count) {
    for (int i = 0; i < count; i++)
        if (cJSON_AddNumberToObject(object, names[i], values[i]) == NULL) return 0;
    return 1;
}

static int add_device(cJSON *array, const bg_timeline_summary_t *s, int d) {
    static const char *const names[] = {"compute_s",   "update_s",     "copy_s",       "wait_s",
                                        "link_wait_s", "barrier_s",    "start_wait_s", "end_wait_s",
                                        "idle_s",      "other_idle_s", "compute_frac", "copy_frac",
                                        "idle_frac"};
    const bg_device_summary_t *dev = &s->device[d];
    const double values[] = {
        dev->compute_s,    dev->update_s,     dev->copy_s,     dev->wait_s, dev->link_wait_s,
        dev->barrier_s,    dev->start_wait_s, dev->end_wait_s, dev->idle_s, dev->other_idle_s,
        dev->compute_frac, dev->copy_frac,    dev->idle_frac};
    cJSON *item = cJSON_CreateObject();
    if (item == NULL) return 0;
    if (!cJSON_AddItemToArray(array, item)) {
        cJSON_Delete(item);
        return 0;
    }
    return cJSON_AddStringToObject(item, "name", s->device_names[d]) != NULL &&
           add_numbers(item, names, values, (int)(sizeof values / sizeof values[0]));
}

static int add_stage(cJSON *array, const bg_timeline_summary_t *s, int i) {
    static const char *const names[] = {
        "stage",       "device",      "compute_s",        "forward_s",
        "backward_s",  "weight_s",    "wait_prev_s",      "wait_next_s",
        "room_prev_s", "room_next_s", "copy_s",           "link_wait_s",
        "wake_s",      "wakes",       "room_prev_wake_s", "room_next_wake_s"};
    const bg_stage_summary_t *st = &s->stage[i];
    const double values[] = {i,
                             st->device,
                             st->compute_s,
                             st->forward_s,
                             st->backward_s,
                             st->weight_s,
                             st->wait_prev_s,
                             st->wait_next_s,
                             st->room_prev_s,
                             st->room_next_s,
                             st->copy_s,
                             st->link_wait_s,
                             st->wake_s,
                             st->wakes,
                             st->room_prev_wake_s,
                             st->room_next_wake_s};
    cJSON *item = cJSON_CreateObject();
    if (item == NULL) return 0;
    if (!cJSON_AddItemToArray(array, item)) {
        cJSON_Delete(item);
        return 0;
    }
    return add_numbers(item, names, values, (int)(sizeof values / sizeof values[0]));
}

bg_status_t bg_summary_to_json(const bg_timeline_summary_t *s, cJSON *object) {
    if (s == NULL || object == NULL)
        return bg_error_set(BG_ERR_INVALID, "timeline summary: NULL argument");
    static const char *const names[] = {"chunks",
                                        "microbatches",
                                        "steps",
                                        "step_s",
                                        "bubble_measured",
                                        "step_median_s",
                                        "step_min_s",
                                        "step_max_s",
                                        "bubble_median",
                                        "bubble_theory",
                                        "imbalance",
                                        "imbalance_median",
                                        "exposed_transfer_frac",
                                        "host_end_s"};
    const double values[] = {s->chunks,
                             s->microbatches,
                             s->steps,
                             s->step_s,
                             s->bubble_measured,
                             s->step_median_s,
                             s->step_min_s,
                             s->step_max_s,
                             s->bubble_median,
                             s->bubble_theory,
                             s->imbalance,
                             s->imbalance_median,
                             s->exposed_transfer_frac,
                             s->host_end_s};
    if (cJSON_AddStringToObject(object, "schedule", bg_schedule_kind_name(s->schedule)) == NULL ||
        cJSON_AddBoolToObject(object, "measured", s->measured != 0) == NULL ||
        !add_numbers(object, names, values, (int)(sizeof values / sizeof values[0])))
        goto nomem;
    cJSON *devices = cJSON_AddArrayToObject(object, "devices");
    if (devices == NULL) goto nomem;
    for (int d = 0; d < s->devices; d++)
        if (!add_device(devices, s, d)) goto nomem;
    cJSON *stages = cJSON_AddArrayToObject(object, "stages");
    if (stages == NULL) goto nomem;
    for (int i = 0; i < s->stages; i++)
        if (!add_stage(stages, s, i)) goto nomem;
    return BG_OK;
nomem:
    return bg_error_set(BG_ERR_NOMEM, "timeline summary: out of memory building JSON");
}
