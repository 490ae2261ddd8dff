/* Internal to the profiler (profile.c: layers, channels, the whole;
 * profile_stages.c: layer ranges as stages). */
#ifndef BG_PROFILE_IMPL_H
#define BG_PROFILE_IMPL_H

#include "backend.h"
#include "profile.h"

enum { PROFILE_WARMUP = 2 };

/* How far n timings of one thing lie apart (sorted in place): the second
 * largest over the smallest, so that one slow timing, which
 * bg_profile_typical may leave out, does not count; 1 for fewer than three
 * or a smallest of 0. */
double bg_profile_spread(double *values, int n);

/* Measures every layer range [first, last) as a stage at each of the slot
 * counts 1, 2 and M (those <= M) into p->stage; nothing for models of more
 * than BG_PROFILE_MAX_STAGE_LAYERS layers. With cfg->split, only the
 * ranges of its stages, at any model size. */
bg_status_t bg_profile_measure_stages(bg_backend_t *be, const bg_profile_config_t *cfg,
                                      bg_profile_t *p);

#endif /* BG_PROFILE_IMPL_H */
