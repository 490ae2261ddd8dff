/* A small seeded random number generator (xoshiro256** seeded through
 * splitmix64). Deterministic across platforms: the same seed gives the same
 * initial weights, shuffles and synthetic data everywhere. */
#ifndef BG_RNG_H
#define BG_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_rng {
    uint64_t state[4];
} bg_rng_t;

/* Seeds from a 64-bit seed and a stream number, so that independent streams
 * (one per layer, one for shuffling) come from one user seed. */
void bg_rng_seed(bg_rng_t *rng, uint64_t seed, uint64_t stream);

uint64_t bg_rng_next(bg_rng_t *rng);

/* Uniform double in [0, 1) with 53 random bits. */
double bg_rng_uniform(bg_rng_t *rng);

/* Uniform integer in [0, bound), bound > 0, without modulo bias. */
uint64_t bg_rng_below(bg_rng_t *rng, uint64_t bound);

/* Standard normal (Box-Muller). */
double bg_rng_normal(bg_rng_t *rng);

#ifdef __cplusplus
}
#endif

#endif /* BG_RNG_H */
