/* SVG pictures of pipeline runs.
 *
 * bg_svg_timeline_write draws a timeline in the style of the GPipe paper's
 * schedule figure: one row per stage, time left to right, a box per op.
 * bg_svg_chart_write draws `brigade sweep`'s results: throughput and bubble
 * against the number of micro-batches, one line per schedule.
 *
 * Both write self-contained SVG 1.1 (no scripts, no external fonts) that
 * browsers, Inkscape and rsvg-convert render. */
#ifndef BG_SVG_H
#define BG_SVG_H

#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes a picture of tl to path, replacing the file.
 *
 * step: which recorded step to draw (0 .. tl->steps - 1), or -1 for all.
 * Layout: a title (schedule, K, V, M, measured or predicted, measured and
 * theoretical bubble); one <g class="row"> per stage, labelled "stage 0
 * (cpu:0)", holding one <rect class="op"> per F/B/W/STEP event
 * (data-stage, data-kind "F"/"B"/"W"/"step", data-mb; F blue, B green, W
 * orange, step grey; the micro-batch written inside when the box is wide
 * enough) and, in a thin lane below, sends and receives (<rect
 * class="copy">) and waits (<rect class="wait">, hatched light red), over
 * each wait on a neighbour its hand-off where known (<rect class="handoff">,
 * dark grey, from bg_timeline_wait_ready's time to the wait's end); idle
 * time is left empty; a time axis in ms and a legend, wrapped onto as many
 * lines as its keys need. A stage-less optimizer
 * step is drawn in the row of the stage numbered like its device. The width
 * grows with the number of ops per row, from 1200 to 2400 px.
 *
 * BG_ERR_INVALID for NULL arguments or a step out of range; BG_ERR_IO
 * naming the path when it cannot be written; BG_ERR_NOMEM. */
bg_status_t bg_svg_timeline_write(const char *path, const bg_timeline_t *tl, int step);

/* One `brigade sweep` measurement or prediction. */
typedef struct bg_sweep_point {
    const char *schedule; /* "1f1b", ...: points with equal names form one line */
    int microbatches;     /* M >= 1 */
    double samples_per_s;
    double bubble_measured, bubble_theory; /* fractions 0..1 */
    double step_ms;
    int simulated; /* predicted by the simulator, not measured */
    int skipped;   /* did not fit, or could not run: no figures (they are not read) */
    /* A measured point's plan simulated: its samples/s; 0 (or not finite)
     * where there is none. */
    double simulated_samples_per_s;
} bg_sweep_point_t;

/* Writes a chart of points to path: M on a log2 x axis, samples/s on the
 * left axis (a thick line with round markers per schedule), bubble % on the
 * right axis (measured: thin solid line with square markers; theory:
 * dashed), a legend (whose keys show the markers too) and a title, with
 * `subtitle` under it (what was swept; may be NULL). Points may come in
 * any order; non-finite values are left out. A skipped point is a cross
 * on the M axis in its schedule's colour (<path class="skipped">), and a
 * schedule whose every point was skipped keeps its colour and says so in
 * the legend. <path class="throughput">, <path class="bubble"> and <path
 * class="theory"> per schedule; <circle class="point"> per finite
 * samples/s value. Where measured points carry a simulated samples/s, a
 * dotted line on the left axis per schedule (<path class="simulated">,
 * with a legend key) sets the simulator's figures beside them.
 *
 * BG_ERR_INVALID for NULL arguments, count < 1, no point that was not
 * skipped, a NULL schedule name or M < 1; BG_ERR_IO naming the path when it
 * cannot be written; BG_ERR_NOMEM. */
bg_status_t bg_svg_chart_write(const char *path, const bg_sweep_point_t *points, int count,
                               const char *subtitle);

#ifdef __cplusplus
}
#endif

#endif /* BG_SVG_H */
