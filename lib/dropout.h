/* Dropout's random mask, one definition for the CPU and CUDA backends.
 *
 * Whether a value is kept is a hash of the layer's key for the step and the
 * value's index in the mini-batch, not the next output of a generator. So
 * a value is kept or dropped alike on a CPU and on a GPU, in whatever stage
 * the layer lands, at any micro-batch count, by a recomputed forward and by
 * the backward, and after a resume (the key follows the optimizer's step
 * count, which checkpoints keep).
 *
 * The hash is in two levels, so that the per-value part is 32-bit
 * arithmetic a CPU does eight values at a time (AVX2): the values come in
 * chunks of BG_DROPOUT_CHUNK by index; a chunk's 64-bit key is splitmix64's
 * output for it, and a value's 32 bits are Chris Wellons's lowbias32 hash
 * (from his "hash prospector", a bijection of 32-bit values with a
 * low avalanche bias) of its offset in the chunk, added to and mixed with
 * the chunk key's halves. A 64-bit hash a value took 2 ns on a CPU core. */
#ifndef BG_DROPOUT_H
#define BG_DROPOUT_H

#include <stdint.h>

#ifdef __CUDACC__
#define BG_DROPOUT_FN static inline __host__ __device__
#else
#define BG_DROPOUT_FN static inline
#endif

enum { BG_DROPOUT_CHUNK = 1024 }; /* values a chunk key covers */

/* splitmix64's output function: a bijection of 64-bit values in which each
 * output bit depends on every input bit. */
BG_DROPOUT_FN uint64_t bg_dropout_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The key of layer `layer` (its index in the stack) at optimizer step
 * `step` (the steps taken before this one) of a run seeded with `seed`. */
BG_DROPOUT_FN uint64_t bg_dropout_key(uint64_t seed, int64_t step, int layer) {
    uint64_t key = bg_dropout_mix(seed ^ 0x64726f706f7574ULL); /* "dropout" */
    key = bg_dropout_mix(key + (uint64_t)step);
    return bg_dropout_mix(key + (uint64_t)layer);
}

/* The highest rate a model may give: past it the threshold below, off by up
 * to 2^-32, would be a sizeable part of the share of values kept. */
#define BG_DROPOUT_MAX_RATE 0.999999

/* A value is dropped when its 32 random bits fall below this: the rate's
 * share of 2^32 (rate in [0, BG_DROPOUT_MAX_RATE]; 0 keeps every value). */
BG_DROPOUT_FN uint32_t bg_dropout_threshold(double rate) {
    return rate > 0 ? (uint32_t)(rate * 4294967296.0) : 0;
}

/* The key of chunk `chunk` (values chunk * BG_DROPOUT_CHUNK on): splitmix64's
 * output number chunk + 1 from state `key`. */
BG_DROPOUT_FN uint64_t bg_dropout_chunk_key(uint64_t key, uint64_t chunk) {
    return bg_dropout_mix(key + (chunk + 1) * 0x9e3779b97f4a7c15ULL);
}

/* The 32 random bits of the value at `offset` in the chunk of `chunk_key`. */
BG_DROPOUT_FN uint32_t bg_dropout_bits(uint64_t chunk_key, uint32_t offset) {
    uint32_t x = ((uint32_t)chunk_key + offset) ^ (uint32_t)(chunk_key >> 32);
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* 1 when value `index` of the mini-batch's tensor is kept. */
BG_DROPOUT_FN int bg_dropout_keeps(uint64_t key, uint64_t index, uint32_t threshold) {
    const uint64_t chunk_key = bg_dropout_chunk_key(key, index / BG_DROPOUT_CHUNK);
    return bg_dropout_bits(chunk_key, (uint32_t)(index % BG_DROPOUT_CHUNK)) >= threshold;
}

#endif /* BG_DROPOUT_H */
