/* What brigade train prints and writes once a run ends (train_report.c),
 * from the options cmd_train.c parsed and the run's result. */
#ifndef BG_CLI_TRAIN_REPORT_H
#define BG_CLI_TRAIN_REPORT_H

#include <stdint.h>

#include "placement.h"
#include "report.h"
#include "status.h"
#include "train.h"

/* brigade train's command line, parsed. */
typedef struct train_options {
    const char *model, *data, *load, *save, *metrics, *trace, *timeline, *resume;
    bg_train_config_t train;
    bg_placement_t placement;
    double lr;              /* < 0: the optimizer's default */
    int64_t test_samples;   /* --test-samples, 0: the whole test set */
    int64_t test_count;     /* of the test set, all of it (its first test_samples scored) */
    int seed_given;         /* --seed was on the command line */
    int stall_given;        /* so was --stall-timeout */
    int record_steps_given; /* and --record-steps */
    int data_given;         /* and --data */
} train_options_t;

/* Whether the seed makes nothing in this run: an evaluation (--steps 0)
 * of --load's weights on data read from files in order (synthetic data
 * are made from it). --seed is refused there, and --metrics says null. */
int bg_cli_train_seed_unused(const train_options_t *o);

/* Each stage's memory as it ran; a figure wider than its column widens it. */
void bg_cli_train_print_stages(const bg_train_result_t *r);

/* A checkpoint the run could not write (it stopped after that step, and
 * its results are above): why, and what --save's file holds now; `total`
 * is the step the run was to end at. */
void bg_cli_train_report_failed_save(const train_options_t *o, const bg_train_result_t *r,
                                     int64_t total);

/* After a run that failed (non-finite values, a stalled step) or was
 * interrupted: the reports it asked for that were not written, so that a
 * file left there by an earlier run is not taken for this one's. `why`:
 * "failed", "was interrupted". */
void bg_cli_train_report_unwritten(const train_options_t *o, const char *why);

/* --metrics: the run's settings and final figures as JSON at `path`;
 * `summary` (may be NULL) adds the recorded steps' timeline. */
bg_status_t bg_cli_train_write_metrics(const char *path, const train_options_t *o,
                                       const bg_train_result_t *r,
                                       const bg_timeline_summary_t *summary);

/* The test accuracy line, saying when only the first test samples were
 * scored. */
void bg_cli_train_print_test(const train_options_t *o, const bg_train_result_t *r);

/* The closing lines of a training run: the steps run (and skipped), the
 * time they took apart from the checkpoints' writes, samples/s, the last
 * epoch's loss, gradient clipping and the steps skipped for non-finite
 * values. */
void bg_cli_train_print_trained(const train_options_t *o, const bg_train_result_t *r);

/* The micro-batches an epoch's last batch of `count` training samples
 * leaves empty, where the batch does not divide them and the rest is fewer
 * than the micro-batches; else 0. */
int64_t bg_cli_train_empty_microbatches(const train_options_t *o, int64_t count);

/* The summary of the recorded steps (r->timeline, which holds one or
 * more) beside each stage's peak memory, saying which of them were an
 * epoch's short last batch; *summary gets it, for the metrics, and the
 * caller destroys it. */
bg_status_t bg_cli_train_print_recorded(const train_options_t *o, const bg_train_result_t *r,
                                        bg_timeline_summary_t **summary);

#endif
