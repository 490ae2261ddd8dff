/* Host allocations of the library's setup paths, with a test hook.
 *
 * bg_malloc, bg_calloc, bg_realloc and bg_aligned_alloc behave like their C
 * counterparts. bg_alloc_fail_after(n) makes the n-th following allocation
 * (0-based) and every one after it fail, until bg_alloc_fail_after(-1): a
 * test walks n = 0, 1, 2, ... through the setup of a pipeline and checks
 * that each failure ends in a clean error without a leak. The countdown is
 * the library's one mutable global besides the per-thread error message; it
 * is atomic, and off unless a test sets it. */
#ifndef BG_ALLOC_H
#define BG_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *bg_malloc(size_t size);
void *bg_calloc(size_t count, size_t size);
void *bg_realloc(void *ptr, size_t size);
void *bg_aligned_alloc(size_t alignment, size_t size);

/* Test hook: fail from the n-th next allocation on (n >= 0), or never (-1). */
void bg_alloc_fail_after(long n);

#ifdef __cplusplus
}
#endif

#endif /* BG_ALLOC_H */
