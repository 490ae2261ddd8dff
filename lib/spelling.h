/* Guessing what a misspelt word meant: an unknown command, option, layer
 * or layer option is answered with the one it most likely is. */
#ifndef BG_SPELLING_H
#define BG_SPELLING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The word among `words` that `word` most likely misspells: the nearest
 * within two edits (insertions, deletions, substitutions, swaps of
 * neighbours; one where `word` has six letters or fewer, `letters`), else
 * the only one it begins; NULL where none is, or two are as near. Words of
 * more than 40 bytes are never near. */
const char *bg_spelling_nearest(const char *word, const char *const *words, size_t count,
                                size_t letters);

#ifdef __cplusplus
}
#endif

#endif /* BG_SPELLING_H */
