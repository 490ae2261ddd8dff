#include "alloc.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Allocations left before failures start; negative: never fail. */
static atomic_long allocations_left = -1;

/* 1 when this allocation must fail. */
static int fail_now(void) {
    long left = atomic_load(&allocations_left);
    while (left >= 0) {
        if (left == 0) return 1;
        if (atomic_compare_exchange_weak(&allocations_left, &left, left - 1)) return 0;
    }
    return 0;
}

void *bg_malloc(size_t size) { return fail_now() ? NULL : malloc(size); }

void *bg_calloc(size_t count, size_t size) { return fail_now() ? NULL : calloc(count, size); }

void *bg_realloc(void *ptr, size_t size) { return fail_now() ? NULL : realloc(ptr, size); }

void *bg_aligned_alloc(size_t alignment, size_t size) {
    return fail_now() ? NULL : aligned_alloc(alignment, size);
}

void bg_alloc_fail_after(long n) { atomic_store(&allocations_left, n < 0 ? -1 : n); }
