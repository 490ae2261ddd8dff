/* A model's layer stack in words, as a spec file writes it: what checkpoints
 * keep beside the model's fingerprint (brigade.layers), so that loading
 * another model's file can say which layer differs, not only that the
 * hashes do. */
#ifndef BG_MODEL_WORDS_H
#define BG_MODEL_WORDS_H

#include <stdbool.h>
#include <stddef.h>

#include "model_spec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes that hold any fraction's words, NUL included: "0." and at most
 * 340 decimals (the smallest double, 4.9e-324, reads back from 323 zeros
 * and a 5; none needs more than 17 significant digits after its zeros). */
enum { BG_FRACTION_WORDS_MAX = 352 };

/* A fraction in [0, 1) as a spec writes it: the fewest decimals that read
 * back as `value`, in plain notation (0.25, not 0.25000000000000000;
 * 0.123456789, not %g's 0.123457; 0.00001, not 1e-05, which a spec
 * refuses). False when `out` (`size` bytes) cut them: what it then holds
 * is another number. */
bool bg_fraction_words(double value, char *out, size_t size);

/* `layer` as a spec line with every option the fingerprint covers:
 * "conv2d filters=32 kernel=3 stride=1 padding=valid", "maxpool size=2
 * stride=2", "dense units=128", "dropout rate=0.25", "relu". */
void bg_layer_words(const bg_layer_spec_t *layer, char *out, size_t size);

/* The input line and every layer's words, joined by "; " (malloc'd; NULL
 * when out of memory). */
char *bg_model_spec_words(const bg_model_spec_t *spec);

/* Bytes that hold a difference in words: two layers' words of the usual
 * length and the counts; a longer one is cut. */
enum { BG_MODEL_DIFFERENCE_MAX = 400 };

/* Where `saved` (another model's bg_model_spec_words) first differs from
 * `spec`, in words: "its layer 3 is 'dropout rate=0.25' where this model
 * has 'dropout rate=0.5'", then "; it has 7 layers, this model 8" when
 * their counts differ. Writes "" and returns false when the two agree. */
bool bg_model_spec_difference(const bg_model_spec_t *spec, const char *saved, char *out,
                              size_t size);

#ifdef __cplusplus
}
#endif

#endif
