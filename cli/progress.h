/* Progress display for long runs: a one-line bar redrawn in place on a
 * terminal, plain lines (each epoch, and every tenth of an epoch) otherwise. */
#ifndef BG_CLI_PROGRESS_H
#define BG_CLI_PROGRESS_H

#include <stdio.h>

#include "train.h"

typedef struct bg_progress {
    FILE *out;
    int terminal; /* redraw in place */
    int64_t steps_per_epoch;
    double started;     /* monotonic seconds at init */
    double last_draw;   /* monotonic seconds of the last redraw */
    int64_t last_tenth; /* bg_progress_count without a terminal: tenths printed */
    const char *what;   /* bg_progress_count and _tick: what is counted */
    double quiet_s;     /* they show nothing until the count has run this long */
    int line_open;      /* a terminal line drawn, not yet ended (bg_progress_end_line) */
} bg_progress_t;

/* Sets up progress output to `out`; terminal decides bar or plain lines. */
void bg_progress_init(bg_progress_t *p, FILE *out, int64_t steps_per_epoch);

/* A bg_train_progress_fn; ctx is a bg_progress_t. */
void bg_progress_report(void *ctx, const bg_train_progress_t *progress);

/* Progress of work counted in units ("layer range timings"), ctx a
 * bg_progress_t whose `what` names them: a bar with the time left on a
 * terminal, a line at each tenth otherwise; the last call (done == total)
 * ends the line. done == 0 (re)starts the clock and the tenths, and
 * prints nothing; so does work that ends within quiet_s of that (0 from
 * bg_progress_init). */
void bg_progress_count(void *ctx, int64_t done, int64_t total);

/* The time a count has left at `now` (monotonic seconds), going on at the
 * rate since it started (bg_progress_count's done == 0): elapsed x (total
 * - done) / done; 0 before any unit is done. */
double bg_progress_left_s(const bg_progress_t *p, int64_t done, int64_t total, double now);

/* Ends a terminal line the bar left open (work stopped before its end), so
 * that a message after it starts on a line of its own. */
void bg_progress_end_line(bg_progress_t *p);

/* Work of no known size: `done` units of `what` so far, and the time since
 * bg_progress_init. Only on a terminal, once quiet_s have passed, a line
 * redrawn in place, which bg_progress_clear_line erases; nothing
 * otherwise, as a log needs no count of what it will not be told the end
 * of. */
void bg_progress_tick(bg_progress_t *p, int64_t done);

/* Erases a terminal line bg_progress_tick left, so that what is printed
 * next takes its place. */
void bg_progress_clear_line(bg_progress_t *p);

#endif /* BG_CLI_PROGRESS_H */
