/* What a profile says, apart from how it is measured (profile.c): the
 * sizes it timed, a layer's time at any micro-batch size, the sizes a new
 * one times by default, and freeing one. The loader (profile_io.c), and so
 * its fuzz target, needs only this of the profile's code. */
#include <math.h>
#include <stdlib.h>

#include "profile.h"

int bg_profile_timed_sizes(const bg_profile_t *p, int64_t *sizes, int *where) {
    const int others =
        p->other_sizes < BG_PROFILE_MAX_OTHER_SIZES ? p->other_sizes : BG_PROFILE_MAX_OTHER_SIZES;
    int n = 0, placed = 0;
    for (int k = 0; k <= others; k++) {
        if (!placed && (k == others || p->batch < p->other_size[k])) {
            sizes[n] = p->batch;
            where[n++] = -1;
            placed = 1;
        }
        if (k < others) {
            sizes[n] = p->other_size[k];
            where[n++] = k;
        }
    }
    return n;
}

bg_layer_at_size_t bg_profile_layer_at(const bg_layer_profile_t *l, int where) {
    if (where >= 0) return l->at_size[where];
    return (bg_layer_at_size_t){l->forward_s, l->backward_data_s, l->backward_weights_s};
}

int bg_profile_covers(const bg_profile_t *p, int64_t batch, int microbatches) {
    int64_t sizes[BG_PROFILE_MAX_OTHER_SIZES + 1];
    int where[BG_PROFILE_MAX_OTHER_SIZES + 1];
    const int n = bg_profile_timed_sizes(p, sizes, where);
    const int64_t lo = batch / microbatches, hi = (batch + microbatches - 1) / microbatches;
    return !(hi < sizes[0] || lo > sizes[n - 1]);
}

double bg_profile_layer_seconds(const bg_profile_t *p, const bg_layer_profile_t *l,
                                bg_profile_op_t op, double samples) {
    int64_t timed[BG_PROFILE_MAX_OTHER_SIZES + 1];
    int where[BG_PROFILE_MAX_OTHER_SIZES + 1];
    const int n = bg_profile_timed_sizes(p, timed, where);
    double size[BG_PROFILE_MAX_OTHER_SIZES + 1] = {0}, time[BG_PROFILE_MAX_OTHER_SIZES + 1] = {0};
    for (int k = 0; k < n; k++) {
        const bg_layer_at_size_t t = bg_profile_layer_at(l, where[k]);
        size[k] = (double)timed[k];
        time[k] = op == BG_PROFILE_FORWARD         ? t.forward_s
                  : op == BG_PROFILE_BACKWARD_DATA ? t.backward_data_s
                                                   : t.backward_weights_s;
    }
    if (n == 1 || samples >= size[n - 1]) return time[n - 1] * samples / size[n - 1];
    int k = 1; /* the segment [size[k - 1], size[k]] that holds samples, or the first */
    while (k < n - 1 && samples > size[k]) k++;
    const double t =
        time[k - 1] + (time[k] - time[k - 1]) * (samples - size[k - 1]) / (size[k] - size[k - 1]);
    if (samples >= size[0]) return t;
    /* Below the smallest: between its time in proportion and its time. */
    const double proportional = time[0] * samples / size[0];
    return t < proportional ? proportional : t > time[0] ? time[0] : t;
}

int bg_profile_default_sizes(int64_t batch, int64_t micro, int64_t *out) {
    int64_t all[BG_PROFILE_MAX_OTHER_SIZES + 1] = {1};
    int n = 1;
    if (micro > 1) all[n++] = micro;
    if (batch > micro) all[n++] = batch;
    while (n >= 2 && n - 1 < BG_PROFILE_MAX_OTHER_SIZES) {
        int widest = 0;
        for (int k = 1; k + 1 < n; k++)
            if ((double)all[k + 1] / (double)all[k] > (double)all[widest + 1] / (double)all[widest])
                widest = k;
        if (all[widest + 1] <= 4 * all[widest]) break;
        const int64_t middle = (int64_t)(sqrt((double)all[widest] * (double)all[widest + 1]) + 0.5);
        for (int k = n; k > widest + 1; k--) all[k] = all[k - 1];
        all[widest + 1] = middle;
        n++;
    }
    int count = 0;
    for (int k = 0; k < n; k++)
        if (all[k] != micro) out[count++] = all[k];
    return count;
}

void bg_profile_destroy(bg_profile_t *p) {
    if (p == NULL) return;
    free(p->layer);
    free(p->stage);
    free(p->model_words);
    free(p);
}
