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
    double last_draw; /* monotonic seconds of the last redraw */
} bg_progress_t;

/* Sets up progress output to `out`; terminal decides bar or plain lines. */
void bg_progress_init(bg_progress_t *p, FILE *out, int64_t steps_per_epoch);

/* A bg_train_progress_fn; ctx is a bg_progress_t. */
void bg_progress_report(void *ctx, const bg_train_progress_t *progress);

#endif /* BG_CLI_PROGRESS_H */
