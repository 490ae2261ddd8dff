/* Guessing what a misspelt word meant (spelling.h). */
#include "spelling.h"

#include <string.h>

/* The edit distance between a and b (insertions, deletions, substitutions
 * and swaps of neighbours), or more than `most` as soon as it must be. */
static size_t edit_distance(const char *a, const char *b, size_t most) {
    enum { LONGEST = 40 };
    const size_t n = strlen(a), m = strlen(b);
    if (n > LONGEST || m > LONGEST || (n > m ? n - m : m - n) > most) return most + 1;
    size_t d[LONGEST + 1][LONGEST + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *bg_spelling_nearest(const char *word, const char *const *words, size_t count,
                                size_t letters) {
    const size_t most = letters <= 6 ? 1 : 2;
    size_t best = most + 1;
    int ties = 0, prefixed = 0;
    const char *nearest = NULL, *begun = NULL;
    for (size_t k = 0; k < count; k++) {
        if (strncmp(words[k], word, strlen(word)) == 0) {
            begun = words[k];
            prefixed++;
        }
        const size_t d = edit_distance(word, words[k], most);
        if (d < best) {
            best = d;
            nearest = words[k];
            ties = 1;
        } else if (d == best) {
            ties++;
        }
    }
    if (best <= most) return ties == 1 ? nearest : NULL;
    return prefixed == 1 ? begun : NULL;
}
