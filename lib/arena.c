#include "arena.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "alloc.h"

bg_arena_t bg_arena_init(bg_backend_t *be) { return (bg_arena_t){.be = be}; }

bg_status_t bg_arena_reserve(bg_arena_t *a, size_t bytes, void **dst) {
    if (a->base != NULL)
        return bg_error_set(BG_ERR_INVALID, "%s: arena already allocated; reserve before commit",
                            a->be->name);
    /* Offsets past PTRDIFF_MAX could not be added to the base (and sizes
     * near SIZE_MAX would wrap in bg_arena_rounded_bytes). */
    if (bytes > (size_t)PTRDIFF_MAX - a->bytes ||
        bg_arena_rounded_bytes(bytes) > (size_t)PTRDIFF_MAX - a->bytes)
        return bg_error_set(BG_ERR_NOMEM,
                            "%s: %zu bytes on top of %zu overflow what one allocation can address",
                            a->be->name, bytes, a->bytes);
    if (a->count == a->capacity) {
        if (a->capacity > INT_MAX / 2)
            return bg_error_set(BG_ERR_NOMEM, "%s: too many buffers", a->be->name);
        int capacity = a->capacity > 0 ? 2 * a->capacity : 64;
        bg_arena_request_t *grown = bg_realloc(a->requests, (size_t)capacity * sizeof *grown);
        if (grown == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", a->be->name);
        a->requests = grown;
        a->capacity = capacity;
    }
    a->requests[a->count++] = (bg_arena_request_t){.dst = dst, .offset = a->bytes};
    a->bytes += bg_arena_rounded_bytes(bytes);
    *dst = NULL;
    return BG_OK;
}

bg_status_t bg_arena_commit(bg_arena_t *a) {
    if (a->base != NULL)
        return bg_error_set(BG_ERR_INVALID, "%s: arena already allocated", a->be->name);
    BG_CHECK(a->be->ops->alloc(a->be, a->bytes, &a->base));
    for (int i = 0; i < a->count; i++)
        *a->requests[i].dst = (char *)a->base + a->requests[i].offset;
    return BG_OK;
}

void bg_arena_release(bg_arena_t *a) {
    if (a->base != NULL) a->be->ops->free(a->be, a->base);
    free(a->requests);
    *a = bg_arena_init(a->be);
}
