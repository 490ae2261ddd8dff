#include "svg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "text_file.h"
#include "utf8.h"

#define FONT "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""

static const char *const kind_colours[BG_EVENT_KINDS] = {
    "#4c78a8", "#54a24b", "#f58518", "#9d9d9d", "#b07aa1", "#b07aa1", "#f4a6a6", "#72b7b2"};
static const char *const kind_labels[BG_EVENT_KINDS] = {
    "forward (F)", "backward (B)", "weight gradient (W)", "optimizer step", "send",
    "receive",     "wait",         "link (copy engine)"};

/* Writes `size` bytes of text with XML's special characters escaped, and
 * U+FFFD for what XML cannot hold: bytes that are not UTF-8 (a file name
 * may have any), and control characters but tab, newline and carriage
 * return. */
static void put_escaped_n(FILE *out, const char *text, size_t size) {
    const char *end = text + size;
    while (text < end) {
        const size_t length = bg_utf8_sequence(text, (size_t)(end - text));
        const unsigned char c = (unsigned char)*text;
        if (length == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
            fputs(BG_UTF8_REPLACEMENT, out);
            text++;
            continue;
        }
        switch (c) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        default: fwrite(text, 1, length, out); break;
        }
        text += length;
    }
}

static void put_escaped(FILE *out, const char *text) { put_escaped_n(out, text, strlen(text)); }

/* An SVG document is drawn into memory, then written whole
 * (bg_text_file_write): an interrupted run never leaves half a picture. */
typedef struct svg_doc {
    FILE *out; /* a memory stream; NULL when it could not be made */
    char *text;
    size_t size;
} svg_doc_t;

static bg_status_t svg_open(svg_doc_t *doc) {
    *doc = (svg_doc_t){0};
    doc->out = open_memstream(&doc->text, &doc->size);
    if (doc->out == NULL) return bg_error_set(BG_ERR_NOMEM, "svg: out of memory");
    return BG_OK;
}

/* Writes the document to `path` (with the newline that ends it) and frees it. */
static bg_status_t svg_close(svg_doc_t *doc, const char *path, const char *what) {
    int failed = ferror(doc->out);
    if (fclose(doc->out) != 0) failed = 1;
    bg_status_t st = failed
                         ? bg_error_set(BG_ERR_NOMEM, "%s: out of memory drawing '%s'", what, path)
                         : bg_text_file_write(path, doc->text, what);
    free(doc->text);
    *doc = (svg_doc_t){0};
    return st;
}

/* A tick spacing of 1, 2 or 5 times a power of ten giving about `target`
 * ticks over range. */
static double nice_step(double range, int target) {
    double raw = range / target;
    double magnitude = pow(10, floor(log10(raw)));
    static const double factors[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (factors[i] * magnitude >= raw) return factors[i] * magnitude;
    return 10 * magnitude;
}

static int decimals_for(double step) {
    int decimals = (int)-floor(log10(step) + 1e-9);
    return decimals > 0 ? decimals : 0;
}

static int is_op(bg_event_kind_t kind) { return kind <= BG_EVENT_STEP; }

/* The row an event is drawn in (a step without a stage, as older or
 * hand-made timelines have, goes to its device's). */
static int event_row(const bg_event_t *e) { return e->stage >= 0 ? e->stage : e->device; }

typedef struct timeline_layout {
    double t0, t1;           /* seconds shown */
    double x0, width;        /* plot area in px */
    double top, pitch;       /* first row's top, row to row */
    int lane;                /* 1: a transfer lane below each row */
    const bg_timeline_t *tl; /* drawn */
    int present[BG_EVENT_KINDS];
    int room_waits; /* 1: a wait for room to send is drawn (its own hatch) */
    int handoffs;   /* 1: a wait's hand-off is drawn */
} timeline_layout_t;

/* A wait's hand-off: its part after the neighbour was ready. */
static const char *const handoff_fill = "#3b3b3b";

/* A wait for a message (or at the optimizer step) is hatched red; one for
 * room to send (the neighbour had not taken the earlier messages: it is
 * the slower) blue, the other way, so that which of two stages held the
 * other up shows. */
static const char *wait_fill(const bg_event_t *e) {
    return e->to_send ? "url(#hatch-room)" : "url(#hatch)";
}

static double x_of(const timeline_layout_t *l, double t) {
    return l->x0 + (t - l->t0) / (l->t1 - l->t0) * l->width;
}

/* Over a wait, its hand-off: from `ready` (bg_timeline_wait_ready), when
 * the neighbour had sent the message or freed the room, to its end, when
 * this stage's thread ran again. */
static void draw_handoff(FILE *out, const timeline_layout_t *l, const bg_event_t *e, double ready,
                         double y) {
    const double from = fmax(e->start, ready);
    if (!(e->end > from)) return;
    fprintf(out,
            "<rect class=\"handoff\" data-stage=\"%d\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
            "height=\"7\" fill=\"%s\"><title>hand-off: stage %d %s at %.3f ms, this thread "
            "ran at %.3f ms (%.0f us)</title></rect>\n",
            e->stage, x_of(l, from), y + 28, x_of(l, e->end) - x_of(l, from), handoff_fill,
            e->peer_stage, e->to_send ? "took a message, freeing room," : "had sent the message",
            1e3 * (from - l->t0), 1e3 * (e->end - l->t0), 1e6 * (e->end - from));
}

/* `ready`: for a wait, when its neighbour was ready (NAN: not known). */
static void draw_event(FILE *out, const timeline_layout_t *l, const bg_event_t *e, double ready,
                       double y) {
    double x = x_of(l, e->start), w = x_of(l, e->end) - x;
    const char *kind = bg_event_kind_name(e->kind);
    if (is_op(e->kind)) {
        fprintf(out,
                "<rect class=\"op\" data-stage=\"%d\" data-kind=\"%s\" data-mb=\"%d\" x=\"%.2f\" "
                "y=\"%.1f\" width=\"%.2f\" height=\"26\" fill=\"%s\" stroke=\"#fff\" "
                "stroke-width=\"0.6\">",
                e->stage, kind, e->microbatch, x, y, w, kind_colours[e->kind]);
    } else if (e->kind == BG_EVENT_LINK) {
        /* Under the transfers: it overlaps the row's ops and waits. */
        fprintf(out,
                "<rect class=\"link\" data-stage=\"%d\" data-kind=\"%s\" x=\"%.2f\" "
                "y=\"%.1f\" width=\"%.2f\" height=\"4\" fill=\"%s\">",
                e->stage, kind, x, y + 36, w, kind_colours[e->kind]);
    } else {
        const char *fill = e->kind == BG_EVENT_WAIT ? wait_fill(e) : kind_colours[e->kind];
        fprintf(out,
                "<rect class=\"%s\" data-stage=\"%d\" data-kind=\"%s\" x=\"%.2f\" y=\"%.1f\" "
                "width=\"%.2f\" height=\"7\" fill=\"%s\">",
                e->kind == BG_EVENT_WAIT ? "wait" : "copy", e->stage, kind, x, y + 28, w, fill);
    }
    /* The trace's name for it, so that the two are read alike. */
    char name[BG_EVENT_NAME_MAX];
    bg_event_describe(e, name, sizeof name);
    fprintf(out, "<title>%s%s", e->kind == BG_EVENT_LINK ? "link: " : "", name);
    /* On the axis's clock: from the start of the time shown. */
    fprintf(out, ", stage %d, step %" PRId64 ": %.3f to %.3f ms</title></rect>\n", e->stage,
            bg_timeline_step_number(l->tl, e->step), 1e3 * (e->start - l->t0),
            1e3 * (e->end - l->t0));
    if (e->kind == BG_EVENT_WAIT && !isnan(ready)) draw_handoff(out, l, e, ready, y);
    if (!is_op(e->kind)) return;
    char label[16];
    if (e->kind == BG_EVENT_STEP)
        snprintf(label, sizeof label, "step");
    else
        snprintf(label, sizeof label, "%d", e->microbatch);
    if (w < 6.5 * (double)strlen(label) + 4) return;
    fprintf(out,
            "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" fill=\"%s\">%s"
            "</text>\n",
            x + w / 2, y + 17, e->kind <= BG_EVENT_BACKWARD ? "#fff" : "#222", label);
}

static void draw_axis(FILE *out, const timeline_layout_t *l, double y) {
    double range_ms = 1e3 * (l->t1 - l->t0);
    double step = nice_step(range_ms, (int)(l->width / 90));
    int decimals = decimals_for(step);
    fprintf(out, "<g class=\"axis\" " FONT " font-size=\"11\" fill=\"#333\">\n");
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", l->x0,
            y, l->x0 + l->width, y);
    for (double t = 0; t <= range_ms * (1 + 1e-9); t += step) {
        double x = l->x0 + t / range_ms * l->width;
        fprintf(out,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n",
                x, y, x, y + 5, x, l->top - 4, x, y, x, y + 18, decimals, t);
    }
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (ms)</text>\n</g>\n",
            l->x0 + l->width / 2, y + 36);
}

typedef struct legend_key {
    const char *fill; /* NULL: the label alone */
    const char *label;
    int op; /* an op's box: taller than a transfer's bar */
} legend_key_t;

/* The legend's keys from y, left to right, wrapped onto a new line 22 px
 * lower where a key would pass the plot's right edge (out NULL: nothing
 * drawn); returns how many lines. */
static int draw_legend(FILE *out, const timeline_layout_t *l, double y) {
    legend_key_t keys[BG_EVENT_KINDS + 3];
    int n = 0;
    for (int k = 0; k < BG_EVENT_KINDS; k++) {
        if (!l->present[k] || k == BG_EVENT_RECV) continue;
        keys[n++] = (legend_key_t){k == BG_EVENT_WAIT ? "url(#hatch)" : kind_colours[k],
                                   k == BG_EVENT_SEND ? "send/receive" : kind_labels[k], is_op(k)};
        if (k == BG_EVENT_WAIT && l->room_waits)
            keys[n++] = (legend_key_t){"url(#hatch-room)", "wait for room to send", 0};
        if (k == BG_EVENT_WAIT && l->handoffs)
            keys[n++] = (legend_key_t){handoff_fill, "hand-off (neighbour ready)", 0};
    }
    keys[n++] = (legend_key_t){NULL, "empty: idle", 0};
    if (out != NULL) fprintf(out, "<g class=\"legend\" " FONT " font-size=\"12\" fill=\"#222\">\n");
    double x = l->x0;
    int lines = 1;
    for (int i = 0; i < n; i++) {
        const double width = (keys[i].fill != NULL ? 28 : 0) + 7.0 * (double)strlen(keys[i].label);
        if (x > l->x0 && x + width > l->x0 + l->width) {
            x = l->x0;
            y += 22;
            lines++;
        }
        if (out != NULL && keys[i].fill != NULL)
            fprintf(out,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"%d\" fill=\"%s\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                    x, y + (keys[i].op ? 0 : 4), keys[i].op ? 14 : 7, keys[i].fill, x + 28, y + 11,
                    keys[i].label);
        else if (out != NULL)
            fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\">%s</text>\n", x, y + 11,
                    keys[i].label);
        x += width + 24;
    }
    if (out != NULL) fprintf(out, "</g>\n");
    return lines;
}

static void draw_title(FILE *out, const bg_timeline_t *tl, const bg_timeline_summary_t *s, int step,
                       double x) {
    fprintf(out, "<text x=\"%.1f\" y=\"26\" " FONT " font-size=\"17\" font-weight=\"bold\">", x);
    fprintf(out, "%s schedule: K=%d", bg_schedule_kind_name(tl->schedule), tl->devices);
    if (tl->chunks > 1) fprintf(out, ", V=%d", tl->chunks);
    fprintf(out, ", M=%d, %s</text>\n", tl->microbatches, tl->measured ? "measured" : "simulated");
    fprintf(out, "<text x=\"%.1f\" y=\"46\" " FONT " font-size=\"13\" fill=\"#444\">", x);
    double step_ms = 1e3 * s->step_s;
    const int decimals = bg_report_ms_decimals(step_ms);
    fprintf(out, "bubble %.1f%% %s vs %.1f%% theory; step %.*f ms", 100 * s->bubble_measured,
            tl->measured ? "measured" : "simulated", 100 * s->bubble_theory, decimals, step_ms);
    if (s->steps > 1) fprintf(out, " (mean of %d steps)", s->steps);
    /* The step shown: by the run's number where the timeline knows it
       (train's), else by its index among the recorded steps, said so, as
       "step 2" alone would read as training's third. */
    const int64_t run_step = step >= 0 ? bg_timeline_run_step(tl, step) : 0;
    if (step >= 0 && s->steps == 1 && run_step > 0) /* a run's one recorded step */
        fprintf(out, "; step %" PRId64 " of the run", run_step);
    if (step >= 0 && s->steps > 1) {
        if (step == s->steps - 1) fprintf(out, "; showing the last");
        if (run_step > 0)
            fprintf(out, "%s step %" PRId64 " of the run", step == s->steps - 1 ? "," : "; showing",
                    run_step);
        else if (step != s->steps - 1)
            fprintf(out, "; showing recorded step %d (from 0, as in the boxes' titles)", step);
    }
    /* The step drawn need not be the mean: its own length and bubble
     * beside it (a tester read the mean's bubble as the drawn step's). */
    if (step >= 0 && s->steps > 1 && step < tl->steps) {
        const double shown_ms = 1e3 * (tl->step_end[step] - tl->step_start[step]);
        fprintf(out, ", %.*f ms", bg_report_ms_decimals(shown_ms), shown_ms);
        const double bubble = bg_timeline_step_bubble(tl, step);
        if (!isnan(bubble)) fprintf(out, ", bubble %.1f%%", 100 * bubble);
    }
    fprintf(out, "</text>\n");
}

/* Time span, rows and width of the picture. */
static void plan_timeline(const bg_timeline_t *tl, int step, timeline_layout_t *l, int *ops) {
    int have = 0;
    if (step >= 0) {
        l->t0 = tl->step_start[step];
        l->t1 = tl->step_end[step];
        have = 1;
    } else {
        for (int i = 0; i < tl->steps; i++) {
            if (!have || tl->step_start[i] < l->t0) l->t0 = tl->step_start[i];
            if (!have || tl->step_end[i] > l->t1) l->t1 = tl->step_end[i];
            have = 1;
        }
    }
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if (step >= 0 && e->step != step) continue;
        if (!have || e->start < l->t0) l->t0 = e->start;
        if (!have || e->end > l->t1) l->t1 = e->end;
        have = 1;
        l->present[e->kind] = 1;
        if (e->kind == BG_EVENT_WAIT && e->to_send) l->room_waits = 1;
        if (!is_op(e->kind)) l->lane = 1;
        int row = event_row(e);
        if (is_op(e->kind) && row >= 0 && row < tl->stages) ops[row]++;
    }
    if (!(l->t1 > l->t0)) l->t1 = l->t0 + 1e-3;
    int widest = 0;
    for (int s = 0; s < tl->stages; s++)
        if (ops[s] > widest) widest = ops[s];
    double total = 300 + 16.0 * widest;
    l->width = (total < 1200 ? 1200 : total > 2400 ? 2400 : total);
    l->top = 64;
    l->pitch = l->lane ? 44 : 34;
}

bg_status_t bg_svg_timeline_write(const char *path, const bg_timeline_t *tl, int step) {
    if (path == NULL || tl == NULL) return bg_error_set(BG_ERR_INVALID, "svg: NULL argument");
    if (step < -1 || step >= tl->steps)
        return bg_error_set(BG_ERR_INVALID, "svg '%s': step %d out of range (%d recorded)", path,
                            step, tl->steps);
    bg_timeline_summary_t *summary = NULL;
    BG_CHECK(bg_timeline_summarize(tl, &summary));
    bg_status_t st = BG_OK;
    timeline_layout_t l = {.tl = tl};
    int *ops = calloc((size_t)tl->stages, sizeof *ops);
    double *ready = NULL; /* each wait's neighbour ready */
    svg_doc_t doc = {0};
    FILE *out = NULL;
    BG_ALLOC_CHECK_GOTO(ops, st, done);
    BG_CHECK_GOTO(bg_timeline_wait_ready(tl, &ready), st, done);
    plan_timeline(tl, step, &l, ops);
    for (int i = 0; i < tl->count; i++) {
        const bg_event_t *e = &tl->events[i];
        if ((step < 0 || e->step == step) && !isnan(ready[i]) && e->end > fmax(e->start, ready[i]))
            l.handoffs = 1;
    }
    size_t name_chars = 0;
    for (int d = 0; d < tl->devices; d++)
        if (strlen(tl->device_names[d]) > name_chars) name_chars = strlen(tl->device_names[d]);
    l.x0 = 20 + 7.5 * (double)(name_chars + 13);
    double total_width = l.width;
    l.width = total_width - l.x0 - 30;
    double axis_y = l.top + tl->stages * l.pitch + 4;
    double height = axis_y + 90 + 22.0 * (draw_legend(NULL, &l, 0) - 1);
    BG_CHECK_GOTO(svg_open(&doc), st, done);
    out = doc.out;
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n<defs><pattern "
            "id=\"hatch\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" "
            "patternTransform=\"rotate(45)\"><rect width=\"5\" height=\"5\" fill=\"#fbdada\"/>"
            "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\" stroke=\"#d62728\" stroke-width=\"2\"/>"
            "</pattern><pattern id=\"hatch-room\" width=\"5\" height=\"5\" "
            "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\"><rect "
            "width=\"5\" height=\"5\" fill=\"#dae4f6\"/><line x1=\"0\" y1=\"0\" x2=\"0\" "
            "y2=\"5\" stroke=\"#2c5fa8\" stroke-width=\"2\"/></pattern></defs>\n<rect "
            "width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            total_width, height, total_width, height);
    draw_title(out, tl, summary, step, 20);
    draw_axis(out, &l, axis_y);
    for (int i = 0; step < 0 && tl->steps > 1 && i < tl->steps; i++)
        fprintf(out,
                "<line class=\"step-start\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" "
                "stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n",
                x_of(&l, tl->step_start[i]), l.top - 8, x_of(&l, tl->step_start[i]), axis_y);
    for (int s = 0; s < tl->stages; s++) {
        double y = l.top + s * l.pitch;
        int device = summary->stage[s].device;
        fprintf(out, "<g class=\"row\" data-stage=\"%d\" " FONT ">\n", s);
        fprintf(out,
                "<rect class=\"band\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"26\" "
                "fill=\"%s\"/>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" "
                "text-anchor=\"end\" fill=\"#222\">stage %d (",
                l.x0, y, l.width, s % 2 ? "#f3f3f3" : "#f8f8f8", l.x0 - 10, y + 18, s);
        put_escaped(out, tl->device_names[device]);
        fprintf(out, ")</text>\n");
        for (int i = 0; i < tl->count; i++) {
            const bg_event_t *e = &tl->events[i];
            if (event_row(e) == s && (step < 0 || e->step == step))
                draw_event(out, &l, e, ready[i], y);
        }
        fprintf(out, "</g>\n");
    }
    draw_legend(out, &l, axis_y + 52);
    fputs("</svg>", out);
    st = svg_close(&doc, path, "svg timeline");
done:
    free(ops);
    free(ready);
    bg_timeline_summary_destroy(summary);
    return st;
}

static const char *const palette[] = {"#4c78a8", "#e45756", "#54a24b", "#f58518",
                                      "#b279a2", "#72b7b2", "#9d755d", "#ff9da6"};

typedef struct chart_layout {
    double x0, y0, width, height; /* plot area in px */
    double log_min, log_max;      /* log2 M at the plot's left and right edges */
    double left_max, right_max;   /* samples/s and bubble % at the top */
} chart_layout_t;

static double chart_x(const chart_layout_t *c, int m) {
    return c->x0 + (log2(m) - c->log_min) / (c->log_max - c->log_min) * c->width;
}

static double chart_y(const chart_layout_t *c, double value, double max) {
    return c->y0 + c->height - value / max * c->height;
}

static int compare_points(const void *a, const void *b) {
    const bg_sweep_point_t *x = a, *y = b;
    return (x->microbatches > y->microbatches) - (x->microbatches < y->microbatches);
}

enum { SERIES_RATE, SERIES_BUBBLE, SERIES_THEORY, SERIES_SIMULATED, SERIES_COUNT };

/* value of a point in a series: samples/s, bubble %, theory %, or the
 * simulated samples/s of a measured point; NaN for a skipped point or a
 * point without a simulated figure. */
static double series_value(const bg_sweep_point_t *p, int series) {
    if (p->skipped) return NAN;
    switch (series) {
    case SERIES_RATE: return p->samples_per_s;
    case SERIES_BUBBLE: return 100 * p->bubble_measured;
    case SERIES_THEORY: return 100 * p->bubble_theory;
    default: return p->simulated_samples_per_s > 0 ? p->simulated_samples_per_s : NAN;
    }
}

/* One schedule's line of one series, then its markers. The k-th schedule
 * drawn is thinner and its markers smaller than those before it, so that
 * schedules with the same figures (simulated gpipe and 1f1b often are)
 * show as rings rather than one hiding the other: each of the four
 * schedules (until 2026-12-06 the third and fourth were drawn alike). */
static void draw_series(FILE *out, const chart_layout_t *c, const bg_sweep_point_t *sorted,
                        int count, const char *schedule, int k, int series, const char *colour) {
    static const char *const classes[] = {"throughput", "bubble", "theory", "simulated"};
    /* Each series' line: width (before narrowing) and dashes. */
    static const double widths[] = {3.5, 2.0, 2.0, 2.0};
    static const char *const dashes[] = {"", "", " stroke-dasharray=\"6 4\"",
                                         " stroke-dasharray=\"1.5 3\" stroke-linecap=\"round\""};
    const double narrower = 0.8 * (k < 3 ? k : 3); /* of the line, and the markers' radius */
    const int left = series == SERIES_RATE || series == SERIES_SIMULATED;
    double max = left ? c->left_max : c->right_max;
    /* The path starts at the first figure drawn: a schedule with none
     * (every point skipped) has no line, not a path that draws nothing
     * (d=""), which some tools warn of. */
    int pen_up = 1, started = 0;
    for (int i = 0; i < count; i++) {
        double v = series_value(&sorted[i], series);
        if (strcmp(sorted[i].schedule, schedule) != 0) continue;
        if (!isfinite(v)) {
            pen_up = 1;
            continue;
        }
        if (!started) {
            fprintf(out, "<path class=\"%s\" data-schedule=\"", classes[series]);
            put_escaped(out, schedule);
            fprintf(out, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s", colour,
                    widths[series] - (series == SERIES_RATE ? narrower : narrower / 2),
                    dashes[series]);
            /* Dotted lines of equal figures would cover each other: each
             * schedule's dots fall between the others' (a period of 4.5). */
            if (series == SERIES_SIMULATED && k % 3 > 0)
                fprintf(out, " stroke-dashoffset=\"%.1f\"", 1.5 * (k % 3));
            fprintf(out, " d=\"");
            started = 1;
        }
        fprintf(out, "%c%.2f %.2f ", pen_up ? 'M' : 'L', chart_x(c, sorted[i].microbatches),
                chart_y(c, v, max));
        pen_up = 0;
    }
    if (started && series == SERIES_SIMULATED) {
        fprintf(out, "\"><title>");
        put_escaped(out, schedule);
        fprintf(out, ": samples/s of each point's plan simulated</title></path>\n");
    } else if (started) {
        fprintf(out, "\"/>\n");
    }
    /* A theory figure with no drawn neighbour (one point, or one between
     * skipped ones) is no line at all: a short dash at it instead. */
    for (int i = 0; series == SERIES_THEORY && i < count; i++) {
        double v = series_value(&sorted[i], series);
        if (strcmp(sorted[i].schedule, schedule) != 0 || !isfinite(v)) continue;
        int before = 0, after = 0; /* the schedule's points next to this one, drawn */
        for (int j = i - 1; j >= 0; j--)
            if (strcmp(sorted[j].schedule, schedule) == 0) {
                before = isfinite(series_value(&sorted[j], series));
                break;
            }
        for (int j = i + 1; j < count; j++)
            if (strcmp(sorted[j].schedule, schedule) == 0) {
                after = isfinite(series_value(&sorted[j], series));
                break;
            }
        if (before || after) continue;
        const double x = chart_x(c, sorted[i].microbatches), y = chart_y(c, v, max);
        /* Thinner for each later schedule, as the lines are: gpipe's and
         * 1f1b's theory is one figure, and the later dash rings the first. */
        fprintf(out, "<path class=\"theory-point\" data-schedule=\"");
        put_escaped(out, schedule);
        fprintf(out, "\" stroke=\"%s\" stroke-width=\"%.1f\" d=\"M%.2f %.2f L%.2f %.2f\"><title>",
                colour, 3.0 - narrower, x - 9, y, x + 9, y);
        put_escaped(out, schedule);
        fprintf(out, ", M=%d: bubble %.1f%% in theory</title></path>\n", sorted[i].microbatches, v);
    }
    /* Each simulated figure a small ring, so that a point with no drawn
     * neighbour (a lone M) shows too, with its figure as its title. */
    for (int i = 0; series == SERIES_SIMULATED && i < count; i++) {
        const double v = series_value(&sorted[i], series);
        if (strcmp(sorted[i].schedule, schedule) != 0 || !isfinite(v)) continue;
        fprintf(out,
                "<circle class=\"simulated-point\" cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" "
                "fill=\"#fff\" stroke=\"%s\" stroke-width=\"1.2\"><title>",
                chart_x(c, sorted[i].microbatches), chart_y(c, v, max), colour);
        put_escaped(out, schedule);
        fprintf(out, ", M=%d: %.1f samples/s simulated</title></circle>\n", sorted[i].microbatches,
                v);
    }
    /* Skipped points: a cross on the M axis, once (with the first series). */
    for (int i = 0; series == SERIES_RATE && i < count; i++) {
        if (strcmp(sorted[i].schedule, schedule) != 0 || !sorted[i].skipped) continue;
        const double x = chart_x(c, sorted[i].microbatches), y = c->y0 + c->height - 8 - 6 * k;
        fprintf(out,
                "<path class=\"skipped\" stroke=\"%s\" stroke-width=\"2\" d=\"M%.2f %.2f "
                "L%.2f %.2f M%.2f %.2f L%.2f %.2f\"><title>",
                colour, x - 4, y - 4, x + 4, y + 4, x - 4, y + 4, x + 4, y - 4);
        put_escaped(out, schedule);
        fprintf(out, ", M=%d: skipped (the sweep's table says why)</title></path>\n",
                sorted[i].microbatches);
    }
    for (int i = 0; (series == SERIES_RATE || series == SERIES_BUBBLE) && i < count; i++) {
        double v = series_value(&sorted[i], series);
        if (strcmp(sorted[i].schedule, schedule) != 0 || !isfinite(v)) continue;
        double x = chart_x(c, sorted[i].microbatches), y = chart_y(c, v, max);
        if (series == SERIES_RATE)
            fprintf(out, "<circle class=\"point\" cx=\"%.2f\" cy=\"%.2f\" r=\"%.1f\" fill=\"%s\">",
                    x, y, 5.0 - narrower, colour);
        else
            fprintf(out,
                    "<rect class=\"bubble-point\" x=\"%.2f\" y=\"%.2f\" width=\"%.1f\" "
                    "height=\"%.1f\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\">",
                    x - (4 - narrower), y - (4 - narrower), 8 - 2 * narrower, 8 - 2 * narrower,
                    colour);
        fprintf(out, "<title>");
        put_escaped(out, schedule);
        fprintf(out, ", M=%d: %.1f samples/s", sorted[i].microbatches, sorted[i].samples_per_s);
        const double simulated = series_value(&sorted[i], SERIES_SIMULATED);
        if (isfinite(simulated)) fprintf(out, " (%.1f simulated)", simulated);
        fprintf(out, ", bubble %.1f%% (theory %.1f%%), step %.3f ms</title>%s\n",
                100 * sorted[i].bubble_measured, 100 * sorted[i].bubble_theory, sorted[i].step_ms,
                series == SERIES_RATE ? "</circle>" : "</rect>");
    }
}

/* An M axis tick at x, labelled m. */
static void draw_m_tick(FILE *out, const chart_layout_t *c, int m) {
    const double x = chart_x(c, m), bottom = c->y0 + c->height;
    fprintf(out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n",
            x, bottom, x, bottom + 5, x, bottom + 20, m);
}

/* About how wide m's label is at the axis's 12 px: 7 px a digit. */
static double label_width(int m) {
    int digits = 1;
    while (m >= 10) m /= 10, digits++;
    return 7.0 * digits;
}

/* The M axis's ticks: the swept counts themselves (sorted[0..count), by
 * M), each labelled only where its label clears the last one drawn by
 * GAP_PX, so that close counts are thinned rather than drawn over each
 * other (3, 5 and 6 had only a 4, the power of two between them; 90 to 95
 * had none). */
static void draw_m_ticks(FILE *out, const chart_layout_t *c, const bg_sweep_point_t *sorted,
                         int count) {
    enum { GAP_PX = 8 };
    /* The largest count is always labelled: the others clear it too. */
    const int end_m = sorted[count - 1].microbatches;
    const double end_x = chart_x(c, end_m), end_half = label_width(end_m) / 2;
    double last_x = 0, last_half = 0;
    for (int i = 0; i < count; i++) {
        const int m = sorted[i].microbatches;
        const double x = chart_x(c, m), half = label_width(m) / 2;
        if (i > 0 && x - last_x < last_half + half + GAP_PX) continue;
        if (m != end_m && end_x - x < end_half + half + GAP_PX) continue;
        draw_m_tick(out, c, m);
        if (m == end_m) break;
        last_x = x;
        last_half = half;
    }
}

/* Grid, both value axes and the log2 M axis (ticks: draw_m_ticks). */
static void draw_chart_axes(FILE *out, const chart_layout_t *c, double left_step, double right_step,
                            const bg_sweep_point_t *sorted, int count) {
    double bottom = c->y0 + c->height, right = c->x0 + c->width;
    fprintf(out, "<g class=\"axis\" " FONT " font-size=\"12\" fill=\"#333\">\n");
    /* From a million samples/s on, in millions ("500M"): nine digits would
     * run into the axis title. */
    const double unit = c->left_max >= 1e6 ? 1e6 : 1;
    for (double v = 0; v <= c->left_max * (1 + 1e-9); v += left_step) {
        double y = chart_y(c, v, c->left_max);
        fprintf(out,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f%s</text>\n",
                c->x0, y, right, y, c->x0 - 6, y + 4, decimals_for(left_step / unit), v / unit,
                unit > 1 && v > 0 ? "M" : "");
    }
    for (double v = 0; v <= c->right_max * (1 + 1e-9); v += right_step)
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">%.*f</text>\n", right + 6,
                chart_y(c, v, c->right_max) + 4, decimals_for(right_step), v);
    draw_m_ticks(out, c, sorted, count);
    fprintf(out,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">micro-batches "
            "M (log scale)</text>\n<text transform=\"translate(%.1f %.1f) rotate(-90)\" "
            "text-anchor=\"middle\">samples/s</text>\n<text transform=\"translate(%.1f %.1f) "
            "rotate(90)\" text-anchor=\"middle\">bubble %%</text>\n</g>\n",
            c->x0, c->y0, c->width, c->height, c->x0 + c->width / 2, bottom + 42, c->x0 - 60,
            c->y0 + c->height / 2, right + 50, c->y0 + c->height / 2);
}

/* `bubble`: the key of the bubble line, measured or simulated;
 * drawn[i]: whether names[i] has a point not skipped; with_simulated: a
 * key for the simulated samples/s too. */
static void draw_chart_legend(FILE *out, const char **names, const int *drawn, int schedules,
                              const char *bubble, int with_simulated, double x, double y) {
    const char *const keys[] = {"samples/s (left)", bubble, "bubble theory (right)",
                                "simulated samples/s (left)"};
    static const char *const styles[] = {
        "stroke-width=\"2.5\"", "stroke-width=\"1.5\"",
        "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"",
        "stroke-width=\"2\" stroke-dasharray=\"1.5 3\" stroke-linecap=\"round\""};
    fprintf(out, "<g class=\"legend\" " FONT " font-size=\"12\" fill=\"#222\">\n");
    double at = x;
    for (int i = 0; i < schedules; i++) {
        fprintf(out,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"10\" fill=\"%s\"/><text "
                "x=\"%.1f\" y=\"%.1f\">",
                at, y - 9, palette[i % 8], at + 24, y);
        put_escaped(out, names[i]);
        if (!drawn[i]) fprintf(out, " (every point skipped)");
        fprintf(out, "</text>\n");
        at += 24 + 7.0 * (double)(strlen(names[i]) + (drawn[i] ? 0 : 22)) + 20;
    }
    at = x;
    for (int k = 0; k < 3 + with_simulated; k++) {
        fprintf(out,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\" %s/>"
                "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                at, y + 18, at + 28, y + 18, styles[k], at + 34, y + 22, keys[k]);
        /* The markers the lines carry: the same colour tells schedules
         * apart, the marker the two lines of one. */
        if (k == 0)
            fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#444\"/>\n", at + 14,
                    y + 18);
        if (k == 1)
            fprintf(out,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"#fff\" "
                    "stroke=\"#444\" stroke-width=\"1.5\"/>\n",
                    at + 10, y + 14);
        if (k == 3)
            fprintf(out,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"#fff\" stroke=\"#444\" "
                    "stroke-width=\"1.2\"/>\n",
                    at + 14, y + 18);
        at += 34 + 7.0 * (double)strlen(keys[k]) + 24;
    }
    fprintf(out, "</g>\n");
}

/* A subtitle line holds this many characters of 13 px text across
 * the chart's 840 px from its left axis (8 px each, the widest of most
 * letters); at most this many lines. */
enum { SUBTITLE_LINE_CHARS = 104, SUBTITLE_LINES = 4 };

/* How many bytes of `text` (`length` left) a line of at most `most` takes
 * (at least one): all where they fit, else up to the last space in the
 * line's second half (which ends it), else as many as fit without cutting
 * a UTF-8 character (where bytes that are not UTF-8 leave no such cut,
 * `most`: put_escaped_n replaces them anyway). */
static size_t line_bytes(const char *text, size_t length, size_t most) {
    if (length <= most) return length;
    for (size_t at = most; at > most / 2; at--)
        if (text[at] == ' ') return at + 1;
    size_t at = most;
    while (at > 0 && ((unsigned char)text[at] & 0xC0) == 0x80) at--;
    return at > 0 ? at : most;
}

/* Writes the subtitle under the title from y = 50 (out NULL: nothing),
 * wrapped (line_bytes) into at most SUBTITLE_LINES lines 16 px apart, the
 * last ending in "..." where more is left; returns how many lines. */
static int put_subtitle(FILE *out, const char *subtitle, double x) {
    size_t left = strlen(subtitle);
    int lines = 0;
    for (; left > 0 && lines < SUBTITLE_LINES; lines++) {
        size_t n = line_bytes(subtitle, left, SUBTITLE_LINE_CHARS);
        const int cut = lines == SUBTITLE_LINES - 1 && n < left;
        if (cut) n = line_bytes(subtitle, left, SUBTITLE_LINE_CHARS - 3);
        if (out != NULL) {
            fprintf(out, "<text x=\"%.1f\" y=\"%d\" " FONT " font-size=\"13\" fill=\"#444\">", x,
                    50 + 16 * lines);
            put_escaped_n(out, subtitle, n < left && subtitle[n - 1] == ' ' ? n - 1 : n);
            fprintf(out, "%s</text>\n", cut ? "..." : "");
        }
        subtitle += n;
        left -= n;
    }
    return lines;
}

/* The smallest multiple of step at or above value (at least one step). */
static double round_up(double value, double step) {
    double top = ceil(value / step - 1e-9) * step;
    return top > 0 ? top : step;
}

bg_status_t bg_svg_chart_write(const char *path, const bg_sweep_point_t *points, int count,
                               const char *subtitle) {
    int shown = 0;
    for (int i = 0; points != NULL && i < count; i++) shown += !points[i].skipped;
    if (path == NULL || points == NULL || count < 1 || shown == 0)
        return bg_error_set(BG_ERR_INVALID, "svg chart: no points");
    for (int i = 0; i < count; i++)
        if (points[i].schedule == NULL || points[i].microbatches < 1)
            return bg_error_set(BG_ERR_INVALID, "svg chart '%s': point %d has %s, M=%d", path, i,
                                points[i].schedule ? "a schedule" : "no schedule",
                                points[i].microbatches);
    bg_status_t st = BG_OK;
    bg_sweep_point_t *sorted = malloc(sizeof *sorted * (size_t)count);
    const char **names = malloc(sizeof *names * (size_t)count);
    int *drawn = calloc((size_t)count, sizeof *drawn);
    svg_doc_t doc = {0};
    FILE *out = NULL;
    BG_ALLOC_CHECK_GOTO(sorted, st, done);
    BG_ALLOC_CHECK_GOTO(names, st, done);
    BG_ALLOC_CHECK_GOTO(drawn, st, done);
    memcpy(sorted, points, sizeof *sorted * (size_t)count);
    qsort(sorted, (size_t)count, sizeof *sorted, compare_points);
    int schedules = 0;
    double max_rate = 0, max_bubble = 0;
    int with_simulated = 0; /* a point has a simulated samples/s */
    for (int i = 0; i < count; i++) {
        int seen = -1;
        for (int j = 0; j < schedules && seen < 0; j++)
            if (strcmp(names[j], points[i].schedule) == 0) seen = j;
        if (seen < 0) names[seen = schedules++] = points[i].schedule;
        drawn[seen] |= !points[i].skipped;
        for (int series = SERIES_RATE; series <= SERIES_SIMULATED; series += 3) {
            const double rate = series_value(&points[i], series);
            if (isfinite(rate) && rate > max_rate) max_rate = rate;
            with_simulated |= series == SERIES_SIMULATED && isfinite(rate);
        }
        for (int series = SERIES_BUBBLE; series <= SERIES_THEORY; series++) {
            double v = series_value(&points[i], series);
            if (isfinite(v) && v > max_bubble) max_bubble = v;
        }
    }
    /* Each subtitle line past the first moves the chart down. */
    const int subtitle_lines = subtitle != NULL ? put_subtitle(NULL, subtitle, 0) : 0;
    const double below_title = 16.0 * (subtitle_lines > 1 ? subtitle_lines - 1 : 0);
    chart_layout_t c = {.x0 = 90, .y0 = 70 + below_title, .width = 760, .height = 380};
    c.log_min = log2(sorted[0].microbatches) - 0.3;
    c.log_max = log2(sorted[count - 1].microbatches) + 0.3;
    if (sorted[0].microbatches == sorted[count - 1].microbatches)
        c.log_min -= 0.7, c.log_max += 0.7;
    /* 3% of headroom, so the fastest point is not drawn on the frame. */
    double left_step = nice_step(max_rate > 0 ? max_rate : 1, 5);
    c.left_max = round_up(1.03 * max_rate, left_step);
    double right_step = nice_step(max_bubble > 5 ? (max_bubble < 100 ? max_bubble : 100) : 5, 5);
    c.right_max = round_up(max_bubble < 100 ? max_bubble : 100, right_step);
    double width = c.x0 + c.width + 90, height = c.y0 + c.height + 110;
    BG_CHECK_GOTO(svg_open(&doc), st, done);
    out = doc.out;
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n<rect width=\"100%%\" "
            "height=\"100%%\" fill=\"#fff\"/>\n<text x=\"%.1f\" y=\"32\" " FONT
            " font-size=\"17\" font-weight=\"bold\">Throughput and pipeline bubble vs "
            "micro-batches</text>\n",
            width, height, width, height, c.x0);
    if (subtitle != NULL) put_subtitle(out, subtitle, c.x0);
    draw_chart_axes(out, &c, left_step, right_step, sorted, count);
    for (int i = 0; i < schedules; i++)
        for (int series = 0; series < SERIES_COUNT; series++)
            draw_series(out, &c, sorted, count, names[i], i, series, palette[i % 8]);
    int simulated = 0;
    for (int i = 0; i < count; i++) simulated += points[i].simulated != 0;
    draw_chart_legend(out, names, drawn, schedules,
                      simulated == count ? "bubble predicted (right)"
                      : simulated > 0    ? "bubble measured or predicted (right)"
                                         : "bubble measured (right)",
                      with_simulated, c.x0, c.y0 + c.height + 72);
    fputs("</svg>", out);
    st = svg_close(&doc, path, "svg chart");
done:
    free(sorted);
    free(names);
    free(drawn);
    return st;
}
