/* What the partition's searches share (partition.c: the programmes and
 * the least-step search; partition_devices.c: the search per device): the
 * context of one search and the pricing of a stage. Internal to stages/. */
#ifndef BG_PARTITION_IMPL_H
#define BG_PARTITION_IMPL_H

#include <stddef.h>

#include "partition.h"

/* The programme works on units, not layers: unit u is layers [cut[u],
 * cut[u + 1]), and stages start and end only between units (a residual
 * block stays whole: bg_cost_model_cuts). Without blocks a unit is a
 * layer. Results name layers (bg_partition_price translates). */
typedef struct partition_context {
    const bg_partition_config_t *cfg;
    int layers, stages;
    int units;
    const int *cut; /* units + 1 layer boundaries */
    /* 1: each device's stages are checked together against its whole
     * capacity (BG_PARTITION_CHECK_DEVICES with V > 1). */
    int per_device;
    /* Bytes every stage may take beyond its capacity in DP_TIME: 0, or,
     * when nothing fits, the least worst overflow, so that the fastest of
     * the splits that overflow least is found. */
    size_t allowance;
} partition_context_t;

/* A stage's compute per micro-batch: what only grows as it takes more
 * layers. */
static inline double bg_partition_compute_of(const bg_cost_time_t *time) {
    return time->forward + time->backward + time->recompute;
}

/* bg_partition_step_seconds of a split whose devices' loads (the sums of
 * their stages' seconds) add up to `total`, the heaviest `heaviest`, at M
 * micro-batches and the fill and drain's idle share `share`. */
static inline double bg_partition_step_of(double heaviest, double total, int microbatches,
                                          double share) {
    return microbatches * heaviest + (total - heaviest) * share;
}

/* Checks cfg and fills *c from it. */
bg_status_t bg_partition_check_config(const bg_partition_config_t *cfg, partition_context_t *c);

/* The compute of stage s on units [first, last). */
bg_cost_time_t bg_partition_stage_time(const partition_context_t *c, int s, int first, int last);

/* Prices stage s holding units [first, last). */
void bg_partition_price(const partition_context_t *c, int s, int first, int last,
                        bg_partition_stage_t *out);

/* Fills a result for the split first[0..S) of units, first[S] = units. */
bg_status_t bg_partition_build_result(const partition_context_t *c, const int *first,
                                      bg_partition_t **out);

#endif
