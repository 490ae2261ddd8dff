/* One device allocation carved into many buffers.
 *
 * The stages of a device, and the channel slots on it, lay out every buffer
 * they will need first (scheduler/pipeline_create.c; a stage made alone has
 * an arena of its own): bg_arena_reserve() records where a pointer goes and
 * how many bytes it takes, and allocates nothing. bg_arena_commit() then
 * asks the backend for the sum once (one cudaMalloc on a GPU, so an
 * out-of-memory happens up front and names the whole amount) and points
 * every reserved pointer into it. Nothing is
 * allocated after that; bg_arena_release() frees the block.
 *
 * Every buffer starts a multiple of BG_ARENA_ALIGNMENT bytes after the
 * block's start (which is itself 256-byte aligned on CUDA, 64 on the CPU)
 * and takes at least one such unit, so buffers are distinct even when empty,
 * as separate allocations would be. */
#ifndef BG_ARENA_H
#define BG_ARENA_H

#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaMalloc's alignment, which cuDNN and cuBLAS are fastest with; a
 * multiple of any CPU vector width. */
#define BG_ARENA_ALIGNMENT ((size_t)256)

/* The bytes a reservation of `bytes` takes in an arena: a whole number of
 * BG_ARENA_ALIGNMENT units, at least one. For sizes below SIZE_MAX - 255
 * (bg_arena_reserve refuses larger ones). */
static inline size_t bg_arena_rounded_bytes(size_t bytes) {
    const size_t units = bytes / BG_ARENA_ALIGNMENT + (bytes % BG_ARENA_ALIGNMENT != 0);
    return (units > 0 ? units : 1) * BG_ARENA_ALIGNMENT;
}

/* What that adds to `bytes`: the padding the planner counts beside each
 * buffer (stages/cost_model.h). */
static inline size_t bg_arena_padding(size_t bytes) {
    return bg_arena_rounded_bytes(bytes) - bytes;
}

typedef struct bg_arena_request {
    void **dst;    /* set to base + offset by bg_arena_commit */
    size_t offset; /* a multiple of BG_ARENA_ALIGNMENT */
} bg_arena_request_t;

typedef struct bg_arena {
    bg_backend_t *be;
    void *base;   /* NULL until committed */
    size_t bytes; /* laid out so far, padding included */
    bg_arena_request_t *requests;
    int count, capacity;
} bg_arena_t;

/* An empty arena on `be`; nothing is allocated. */
bg_arena_t bg_arena_init(bg_backend_t *be);

/* Lays out `bytes` for *dst, which must stay at its address until commit.
 * BG_ERR_INVALID after commit; BG_ERR_NOMEM when the layout list cannot
 * grow. */
bg_status_t bg_arena_reserve(bg_arena_t *arena, size_t bytes, void **dst);

/* Allocates the laid-out bytes (zeroed) in one backend allocation and sets
 * every reserved pointer. The backend's error (an out-of-memory naming the
 * bytes) is returned as it is. */
bg_status_t bg_arena_commit(bg_arena_t *arena);

/* Frees the block (if committed) and the layout; the arena is empty after. */
void bg_arena_release(bg_arena_t *arena);

#ifdef __cplusplus
}
#endif

#endif /* BG_ARENA_H */
