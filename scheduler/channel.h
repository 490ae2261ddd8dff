/* A channel carries tensors from one stage to the next (activations) or back
 * (gradients): a small ring of preallocated slots, each holding one
 * micro-batch's tensor tagged with its micro-batch number. The sender copies
 * into a free slot (waiting while the ring is full); the receiver waits for
 * the slot with the micro-batch it wants and copies it out. Nothing is
 * allocated after creation.
 *
 * Between CPU devices (or a CPU and a GPU) slots are host buffers and the
 * copies go through the backends' download/upload. Between two CUDA
 * backends slots live in the receiver's memory (bg_cuda_slot_t): a send
 * enqueues the copy on the receiver's copy stream and a receive enqueues
 * the copy out on its compute stream, ordered by events, so neither waits
 * for the GPU; the host only tracks which slot holds which micro-batch.
 * Thread-safe: one sender thread and one receiver thread. */
#ifndef BG_CHANNEL_H
#define BG_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "backend.h"
#include "cuda/backend_cuda.h"
#include "status.h"
#include "topology.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_channel bg_channel_t;

/* When a send or receive waited and copied (monotonic seconds): it waited
 * from `call` to `ready` (for ring space, or for the message; `blocked` is
 * 1 when it had to wait for it, polling or asleep, 0 when it only took the
 * lock), then copied and published what the peer waits for (a send its
 * message, a receive the slot it freed) at `copied`, with the lock held,
 * and woke the peer asleep on the channel, if any, until `done`. On CUDA
 * backends these are the host's times of enqueuing.
 * Given the caller's GPU `clock`, a transfer between GPUs also records in
 * `ready_mark` the clock mark at which it stopped waiting on the GPU: a
 * receive's, once the message is there; a send's that waited for ring
 * space, once the host had a slot (-1 otherwise). A send with `time_link`
 * on a channel whose links are timed (bg_channel_time_links) records the
 * marks of the link clocks between which the copy ran (-1 otherwise). */
typedef struct bg_channel_timing {
    double call, ready, copied, done;
    int blocked;
    bg_cuda_clock_t *clock;   /* in: the caller's GPU clock, or NULL */
    int ready_mark;           /* out: a mark of `clock`, or -1 */
    int time_link;            /* in: 1 to time a send's copy */
    int link_start, link_end; /* out: marks of the channel's link clocks, or -1 */
} bg_channel_timing_t;

/* The pipeline's poll_s (below) for stages on GPUs where every device
 * thread can have a core of its own. */
#define BG_CHANNEL_POLL_S 50e-6

/* The longest timeout (about 31 years): a deadline past it would not fit
 * the clock's seconds everywhere. */
#define BG_CHANNEL_TIMEOUT_MAX_S 1e9

typedef struct bg_channel_config {
    size_t slot_bytes; /* largest message */
    int capacity;      /* slots in the ring, >= 1 */
    const char *name;  /* for messages: "activations stage 0 -> 1" */
    double timeout_s;  /* a send or receive waiting longer fails with
                        * BG_ERR_STALLED; 0 waits forever; at most
                        * BG_CHANNEL_TIMEOUT_MAX_S */
    /* A send or receive that must wait polls the ring this long before it
     * sleeps (0: sleeps at once), so that a message coming within it is
     * taken in about a microsecond instead of the several to tens of
     * microseconds a thread takes to wake (bench/bench_handoff.c). Worth it
     * where each waiting thread has a core of its own, idle meanwhile:
     * BG_CHANNEL_POLL_S. */
    double poll_s;
    /* The sending and receiving backends, or NULL: host slots. When both
     * are CUDA backends the slots are on the receiver's GPU, and every send
     * and receive must use these two backends. */
    bg_backend_t *sender, *receiver;
    /* Between two GPUs without peer access each slot copies through a
     * pinned host buffer, allocated on NUMA node `staging_node` of
     * `topology` (the node near the receiving GPU, which reads it; the
     * sender's writes cross the socket link as posted writes). Without a
     * topology, or with node -1, the buffer is not bound to a node. */
    bg_topology_t *topology;
    int staging_node;
    int force_staging; /* test hook: stage through host memory even where a
                        * direct copy works (one GPU), to run that path */
    /* Between two CUDA backends: the receiver's arena (not yet committed) to
     * lay the slots out in, or NULL for an allocation per slot. Its owner
     * commits it before the first send and frees it after the channel is
     * destroyed. Host slots ignore it. */
    bg_arena_t *arena;
    /* Between two CUDA backends: the receiver's copy streams to fill on
     * (BG_CUDA_LANE_ACTIVATIONS or BG_CUDA_LANE_GRADIENTS, backend_cuda.h),
     * so that the two directions into a GPU do not queue behind each
     * other. */
    int copy_lane;
} bg_channel_config_t;

bg_status_t bg_channel_create(const bg_channel_config_t *cfg, bg_channel_t **out);

/* NULL is a no-op; so it is for bg_channel_time_links,
 * bg_channel_restart_links, bg_channel_abort and bg_channel_reset, and
 * bg_channel_bytes is 0: a channel a pipeline does not have (a
 * forward-only one sends no gradients back). */
void bg_channel_destroy(bg_channel_t *ch);

/* A sent message whose copy may still be reading its source: between CUDA
 * backends the copy runs on the receiver's copy stream while the sender
 * computes on. Empty (slot NULL) when the copy was done on return. */
typedef struct bg_channel_sent {
    bg_cuda_slot_t *slot;
} bg_channel_sent_t;

/* Copies `bytes` of device memory `src` (on backend `be`) into the ring as
 * micro-batch `microbatch`. Blocks while the ring is full. Returns
 * BG_ERR_INTERNAL ("aborted") if the channel is aborted meanwhile. With
 * `sent` NULL the sender's later ops wait for the copy; otherwise *sent
 * says what to wait for (bg_channel_wait_sent) before overwriting `src`. */
bg_status_t bg_channel_send(bg_channel_t *ch, bg_backend_t *be, int microbatch, const void *src,
                            size_t bytes, bg_channel_timing_t *timing, bg_channel_sent_t *sent);

/* Between two CUDA backends, gives the channel a clock on the receiver's
 * copy stream with room to time `messages` copies per restart, and through
 * host memory one on the sender's outgoing copy stream for the first legs;
 * the sender's thread restarts them (bg_channel_restart_links) before the
 * first send it times. Host channels have no link and ignore this. */
bg_status_t bg_channel_time_links(bg_channel_t *ch, int messages);

/* Forgets the link clocks' marks and starts them again "now"; no-op
 * without. Waits for the copies still running on their streams. */
bg_status_t bg_channel_restart_links(bg_channel_t *ch);

/* The bg_monotonic_seconds() times at which a send's copy started and ended
 * on the GPUs (its timing's link_start and link_end, marks since the last
 * restart): through host memory from the start of the first leg, on the
 * sender's GPU, to the end of the second, on the receiver's. Waits for
 * them. */
bg_status_t bg_channel_link_span(bg_channel_t *ch, int start_mark, int end_mark, double *start,
                                 double *end);

/* Makes the sender's (`be`'s) later ops wait until the copy of *sent has
 * read its source, and empties *sent; does nothing when it is empty. Never
 * blocks the host. */
bg_status_t bg_channel_wait_sent(bg_backend_t *be, bg_channel_sent_t *sent);

/* Waits for micro-batch `microbatch`, copies it into device memory `dst` (on
 * backend `be`, room for `capacity` bytes), frees its slot, and reports its
 * size in *bytes. `timing` may be NULL in both calls. */
bg_status_t bg_channel_recv(bg_channel_t *ch, bg_backend_t *be, int microbatch, void *dst,
                            size_t capacity, size_t *bytes, bg_channel_timing_t *timing);

/* bg_channel_recv into the buffer *dst, which holds exactly `capacity`
 * bytes, without a copy where it can: between CUDA backends, when the
 * ring's slots are as large and lie in the receiver's arena, *dst and the
 * message's slot trade places (*dst then points at the message; the slot
 * keeps the old buffer for a later one), the copy out that would sit on
 * the receiver's compute stream saved. Elsewhere it copies. The caller
 * must read *dst afresh after every receive and hold no other pointer to
 * the buffer. */
bg_status_t bg_channel_recv_trading(bg_channel_t *ch, bg_backend_t *be, int microbatch, void **dst,
                                    size_t capacity, size_t *bytes, bg_channel_timing_t *timing);

/* Wakes every waiter; their calls, and all later ones until reset, fail. */
void bg_channel_abort(bg_channel_t *ch);

/* Drops pending messages and clears an abort (between steps). */
void bg_channel_reset(bg_channel_t *ch);

/* Bytes the ring holds (capacity * slot_bytes), for the memory report: host
 * memory, or the receiver's GPU memory for a channel between CUDA
 * backends. */
size_t bg_channel_bytes(const bg_channel_t *ch);

/* What the receiver's arena adds to those bytes by rounding each slot up to
 * 256 bytes (bg_arena_padding): a channel between CUDA backends lays its
 * slots out there when given one; 0 for host rings (allocated apart), for
 * slots allocated apart (no arena in its config) and for NULL. */
size_t bg_channel_padding(const bg_channel_t *ch);

#ifdef __cplusplus
}
#endif

#endif /* BG_CHANNEL_H */
