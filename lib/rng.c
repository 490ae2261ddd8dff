#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void bg_rng_seed(bg_rng_t *rng, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
    for (int i = 0; i < 4; i++) rng->state[i] = splitmix64(&x);
}

uint64_t bg_rng_next(bg_rng_t *rng) {
    uint64_t *s = rng->state;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double bg_rng_uniform(bg_rng_t *rng) { return (double)(bg_rng_next(rng) >> 11) * 0x1.0p-53; }

uint64_t bg_rng_below(bg_rng_t *rng, uint64_t bound) {
    /* Rejection sampling: drop the top partial range so every value is
     * equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do {
        x = bg_rng_next(rng);
    } while (x >= limit);
    return x % bound;
}

double bg_rng_normal(bg_rng_t *rng) {
    double u1 = bg_rng_uniform(rng);
    double u2 = bg_rng_uniform(rng);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
