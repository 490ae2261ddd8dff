#include "channel.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "monotonic.h"
#include "spin_pause.h"
#include "cuda/backend_cuda.h"

/* Slot states besides a micro-batch number. */
enum { SLOT_FREE = -1, SLOT_BUSY = -2 /* being copied in or out, unlocked */ };

typedef struct channel_slot {
    int microbatch; /* or SLOT_FREE / SLOT_BUSY */
    size_t bytes;
    void *data;             /* host slots */
    bg_cuda_slot_t *device; /* slots between CUDA backends */
    void *staging;          /* its host staging buffer (GPUs without peer access), or NULL */
} channel_slot_t;

struct bg_channel {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a slot was filled or freed, or the channel aborted */
    atomic_uint changes;    /* counts those events, for waits that poll (reserve_slot) */
    int capacity;
    /* Where a send starts looking for a free slot: past the last one it
     * took, round the ring, so that between GPUs a fill need not wait for
     * the drain of the message before it, which the receiver may have
     * freed its slot for while that copy still runs. */
    int next_free;
    size_t slot_bytes;
    channel_slot_t *slots;
    int on_device;          /* slots are bg_cuda_slot_t on the receiver */
    int in_arena;           /* and their data lies in the receiver's arena */
    bg_backend_t *sender;   /* the sending backend (CUDA slots) */
    bg_backend_t *receiver; /* the receiving backend (CUDA slots) */
    int copy_lane;          /* its copy streams that fill the slots */
    /* Times the fills on that copy stream (bg_channel_time_links), or
     * NULL; link_zero is the host time of its mark 0. */
    bg_cuda_clock_t *link_clock;
    double link_zero;
    /* Through host memory: times the first legs, on the sender's outgoing
     * copy stream of the lane (NULL otherwise). */
    bg_cuda_clock_t *leg1_clock;
    double leg1_zero;
    bg_topology_t *topology; /* where staging buffers came from, or NULL */
    int aborted;
    double timeout_s;
    double poll_s; /* a wait polls `changes` this long before it sleeps */
    char name[64];
};

/* Tells the waiters that a slot changed state and unlocks the channel.
 * The count changes with the lock held, so a load and a store count it
 * (GCC 12 under ASan misreads an atomic fetch-add here as an overflow).
 * The sleepers are woken after the unlock, so that they need not wait for
 * the lock on waking; none is missed: one that went to sleep before the
 * change is woken, one that checks after it sees it. */
static void announce_and_unlock(bg_channel_t *ch) {
    const unsigned next = atomic_load_explicit(&ch->changes, memory_order_relaxed) + 1;
    atomic_store_explicit(&ch->changes, next, memory_order_release);
    pthread_mutex_unlock(&ch->lock);
    pthread_cond_broadcast(&ch->changed);
}

/* Unlocks the channel and polls until a slot changes state or the clock
 * passes `until`, then locks it again. */
static void poll_unlocked(bg_channel_t *ch, double until) {
    const unsigned seen = atomic_load_explicit(&ch->changes, memory_order_relaxed);
    pthread_mutex_unlock(&ch->lock);
    while (atomic_load_explicit(&ch->changes, memory_order_acquire) == seen &&
           bg_monotonic_seconds() < until)
        bg_spin_pause();
    pthread_mutex_lock(&ch->lock);
}

/* Waits on the channel's condition until `deadline` (CLOCK_MONOTONIC, as
 * the condition measures it: monotonic.h); returns 1 when it passed. */
static int wait_until(bg_channel_t *ch, const struct timespec *deadline) {
    if (deadline == NULL) {
        pthread_cond_wait(&ch->changed, &ch->lock);
        return 0;
    }
    return pthread_cond_timedwait(&ch->changed, &ch->lock, deadline) == ETIMEDOUT;
}

static struct timespec *make_deadline(const bg_channel_t *ch, struct timespec *out) {
    if (ch->timeout_s <= 0) return NULL;
    *out = bg_monotonic_deadline(ch->timeout_s);
    return out;
}

/* A host buffer for staging, on NUMA node `node` where the channel has a
 * topology; whole pages either way, so that no two buffers (each pinned on
 * its own) share one. */
static void *staging_alloc(const bg_channel_t *ch, int node, size_t bytes) {
    int bound;
    if (ch->topology != NULL) return bg_topology_alloc_on_node(ch->topology, node, bytes, &bound);
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    return bg_aligned_alloc((size_t)page, (bytes + (size_t)page - 1) / (size_t)page * (size_t)page);
}

static void staging_free(const bg_channel_t *ch, void *ptr) {
    if (ch->topology != NULL)
        bg_topology_free(ch->topology, ptr, ch->slot_bytes);
    else
        free(ptr);
}

bg_status_t bg_channel_create(const bg_channel_config_t *cfg, bg_channel_t **out) {
    if (cfg->capacity < 1)
        return bg_error_set(BG_ERR_INTERNAL, "channel: capacity %d < 1", cfg->capacity);
    if (!(cfg->timeout_s >= 0 && cfg->timeout_s <= BG_CHANNEL_TIMEOUT_MAX_S))
        return bg_error_set(BG_ERR_INTERNAL, "channel: timeout %g s outside 0..%g", cfg->timeout_s,
                            BG_CHANNEL_TIMEOUT_MAX_S);
    bg_channel_t *ch = bg_calloc(1, sizeof *ch);
    if (ch == NULL) return bg_error_set(BG_ERR_NOMEM, "channel: out of memory");
    ch->capacity = cfg->capacity;
    ch->slot_bytes = cfg->slot_bytes;
    ch->timeout_s = cfg->timeout_s;
    ch->poll_s = cfg->poll_s;
    snprintf(ch->name, sizeof ch->name, "%s", cfg->name ? cfg->name : "channel");
    pthread_mutex_init(&ch->lock, NULL);
    bg_cond_init_monotonic(&ch->changed);
    atomic_init(&ch->changes, 0);
    ch->slots = bg_calloc((size_t)cfg->capacity, sizeof *ch->slots);
    if (ch->slots == NULL) {
        bg_channel_destroy(ch);
        return bg_error_set(BG_ERR_NOMEM, "channel: out of memory");
    }
    ch->on_device = bg_backend_is_cuda(cfg->sender) && bg_backend_is_cuda(cfg->receiver);
    if (ch->on_device) {
        ch->sender = cfg->sender;
        ch->receiver = cfg->receiver;
        ch->copy_lane = cfg->copy_lane;
        int direct = 0;
        bg_status_t st = bg_cuda_enable_peer_access(cfg->sender, cfg->receiver, &direct);
        const int staged = !direct || cfg->force_staging;
        ch->topology = cfg->topology;
        ch->in_arena = cfg->arena != NULL;
        for (int i = 0; st == BG_OK && i < ch->capacity; i++) {
            channel_slot_t *slot = &ch->slots[i];
            slot->microbatch = SLOT_FREE;
            if (staged && cfg->slot_bytes > 0) {
                slot->staging = staging_alloc(ch, cfg->staging_node, cfg->slot_bytes);
                if (slot->staging == NULL)
                    st = bg_error_set(BG_ERR_NOMEM,
                                      "%s: out of host memory for a %zu-byte staging "
                                      "buffer",
                                      ch->name, cfg->slot_bytes);
            }
            if (st == BG_OK)
                st = bg_cuda_slot_create(cfg->receiver, cfg->slot_bytes, slot->staging, cfg->arena,
                                         cfg->copy_lane, &slot->device);
        }
        if (st != BG_OK) {
            bg_channel_destroy(ch);
            return st;
        }
        *out = ch;
        return BG_OK;
    }
    for (int i = 0; i < ch->capacity; i++) {
        ch->slots[i].microbatch = SLOT_FREE;
        ch->slots[i].data = bg_malloc(cfg->slot_bytes > 0 ? cfg->slot_bytes : 1);
        if (ch->slots[i].data == NULL) {
            bg_channel_destroy(ch);
            return bg_error_set(BG_ERR_NOMEM, "%s: out of memory for %d slots of %zu bytes",
                                cfg->name != NULL ? cfg->name : "channel", cfg->capacity,
                                cfg->slot_bytes);
        }
    }
    *out = ch;
    return BG_OK;
}

void bg_channel_destroy(bg_channel_t *ch) {
    if (ch == NULL) return;
    if (ch->slots != NULL)
        for (int i = 0; i < ch->capacity; i++) {
            free(ch->slots[i].data);
            bg_cuda_slot_destroy(ch->slots[i].device); /* unpins the staging buffer */
            if (ch->slots[i].staging != NULL) staging_free(ch, ch->slots[i].staging);
        }
    free(ch->slots);
    bg_cuda_clock_destroy(ch->link_clock);
    bg_cuda_clock_destroy(ch->leg1_clock);
    pthread_mutex_destroy(&ch->lock);
    pthread_cond_destroy(&ch->changed);
    free(ch);
}

/* Waits for a slot whose state is `want` (SLOT_FREE, or a micro-batch)
 * and reserves it (SLOT_BUSY) so that its copy can run unlocked; *blocked
 * says whether that took a wait (polling, then sleeping). NULL when the
 * channel was aborted or the stall timeout passed (*aborted says which). */
static channel_slot_t *reserve_slot(bg_channel_t *ch, int want, int *aborted, int *blocked) {
    struct timespec when, *deadline = make_deadline(ch, &when);
    pthread_mutex_lock(&ch->lock);
    channel_slot_t *slot = NULL;
    int stalled = 0;
    double poll_until = 0;
    *blocked = 0;
    const int start = want == SLOT_FREE ? ch->next_free : 0;
    /* A last look after the deadline: a slot that came as it passed is
     * taken, not reported as a stall. */
    for (;;) {
        for (int k = 0; k < ch->capacity && slot == NULL; k++) {
            const int i = (start + k) % ch->capacity;
            if (ch->slots[i].microbatch == want) slot = &ch->slots[i];
        }
        if (slot != NULL || ch->aborted || stalled) break;
        if (!*blocked && ch->poll_s > 0) poll_until = bg_monotonic_seconds() + ch->poll_s;
        *blocked = 1;
        if (poll_until > 0 && bg_monotonic_seconds() < poll_until)
            poll_unlocked(ch, poll_until);
        else
            stalled = wait_until(ch, deadline);
    }
    *aborted = ch->aborted;
    if (ch->aborted) slot = NULL;
    if (slot != NULL) {
        slot->microbatch = SLOT_BUSY;
        if (want == SLOT_FREE) ch->next_free = (int)(slot - ch->slots + 1) % ch->capacity;
    }
    pthread_mutex_unlock(&ch->lock);
    return slot;
}

bg_status_t bg_channel_send(bg_channel_t *ch, bg_backend_t *be, int microbatch, const void *src,
                            size_t bytes, bg_channel_timing_t *timing, bg_channel_sent_t *sent) {
    if (sent != NULL) sent->slot = NULL;
    if (timing != NULL) {
        timing->call = bg_monotonic_seconds();
        timing->ready_mark = timing->link_start = timing->link_end = -1;
    }
    if (bytes > ch->slot_bytes)
        return bg_error_set(BG_ERR_INTERNAL, "%s: message of %zu bytes, slots hold %zu", ch->name,
                            bytes, ch->slot_bytes);
    int aborted, blocked;
    channel_slot_t *slot = reserve_slot(ch, SLOT_FREE, &aborted, &blocked);
    if (slot == NULL && aborted) return bg_error_set(BG_ERR_INTERNAL, "%s: aborted", ch->name);
    if (slot == NULL)
        return bg_error_set(BG_ERR_STALLED,
                            "%s: no room to send micro-batch %d for %.3g s (stall timeout)",
                            ch->name, microbatch, ch->timeout_s);
    if (timing != NULL) {
        timing->ready = bg_monotonic_seconds();
        timing->blocked = blocked;
        /* The GPU may have run dry while the host waited. */
        if (blocked && ch->on_device && timing->clock != NULL)
            timing->ready_mark = bg_cuda_clock_mark(timing->clock);
    }
    bg_status_t st = BG_OK;
    int link_marks[2] = {-1, -1};
    const int timed = ch->link_clock != NULL && timing != NULL && timing->time_link;
    if (bytes > 0)
        st = ch->on_device
                 ? bg_cuda_slot_fill(slot->device, be, src, bytes, timed ? ch->link_clock : NULL,
                                     timed ? ch->leg1_clock : NULL, link_marks)
                 : be->ops->download(be, slot->data, src, bytes);
    if (timing != NULL) {
        timing->link_start = link_marks[0];
        timing->link_end = link_marks[1];
    }
    pthread_mutex_lock(&ch->lock);
    slot->microbatch = st == BG_OK ? microbatch : SLOT_FREE;
    slot->bytes = bytes;
    if (timing != NULL) timing->copied = bg_monotonic_seconds();
    announce_and_unlock(ch);
    /* After the wake of a receiver asleep on the channel: the sender's
     * work, tens of microseconds on a busy machine. */
    if (timing != NULL) timing->done = bg_monotonic_seconds();
    if (st != BG_OK || !ch->on_device || bytes == 0) return st;
    bg_channel_sent_t now = {slot->device};
    if (sent == NULL) return bg_channel_wait_sent(be, &now);
    *sent = now;
    return BG_OK;
}

bg_status_t bg_channel_time_links(bg_channel_t *ch, int messages) {
    if (ch == NULL || !ch->on_device) return BG_OK;
    if (ch->link_clock == NULL)
        BG_CHECK(
            bg_cuda_clock_create(ch->receiver, ch->copy_lane, 2 * messages + 1, &ch->link_clock));
    /* Through host memory (every slot has a staging buffer, or none). */
    if (ch->slots[0].staging == NULL || ch->leg1_clock != NULL) return BG_OK;
    return bg_cuda_clock_create(ch->sender, BG_CUDA_CLOCK_OUTGOING + ch->copy_lane, messages + 1,
                                &ch->leg1_clock);
}

bg_status_t bg_channel_restart_links(bg_channel_t *ch) {
    if (ch == NULL || ch->link_clock == NULL) return BG_OK;
    BG_CHECK(bg_cuda_clock_restart(ch->link_clock, &ch->link_zero));
    if (ch->leg1_clock == NULL) return BG_OK;
    return bg_cuda_clock_restart(ch->leg1_clock, &ch->leg1_zero);
}

/* The host time of `mark` of `clock`, whose mark 0 was at `zero`. */
static bg_status_t clock_time(bg_cuda_clock_t *clock, double zero, int mark, double *out) {
    double since_zero;
    BG_CHECK(bg_cuda_clock_seconds(clock, mark, &since_zero));
    *out = zero + since_zero;
    return BG_OK;
}

bg_status_t bg_channel_link_span(bg_channel_t *ch, int start_mark, int end_mark, double *start,
                                 double *end) {
    if (ch->link_clock == NULL) return bg_error_set(BG_ERR_INTERNAL, "%s: no link clock", ch->name);
    BG_CHECK(ch->leg1_clock != NULL ? clock_time(ch->leg1_clock, ch->leg1_zero, start_mark, start)
                                    : clock_time(ch->link_clock, ch->link_zero, start_mark, start));
    BG_CHECK(clock_time(ch->link_clock, ch->link_zero, end_mark, end));
    /* Two GPUs' clocks meet on the host's within their restarts' windows
     * (about 10 us each), which a short copy through host memory may not
     * outlast. */
    if (*end < *start) *end = *start;
    return BG_OK;
}

bg_status_t bg_channel_wait_sent(bg_backend_t *be, bg_channel_sent_t *sent) {
    if (sent->slot == NULL) return BG_OK;
    bg_cuda_slot_t *slot = sent->slot;
    sent->slot = NULL;
    return bg_cuda_slot_wait_read(slot, be);
}

/* bg_channel_recv, and with `trade` bg_channel_recv_trading: *dst is the
 * receiver's buffer. */
static bg_status_t receive(bg_channel_t *ch, bg_backend_t *be, int microbatch, void **dst,
                           size_t capacity, int trade, size_t *bytes, bg_channel_timing_t *timing) {
    if (timing != NULL) {
        timing->call = bg_monotonic_seconds();
        timing->ready_mark = -1;
    }
    int aborted, blocked;
    channel_slot_t *slot = reserve_slot(ch, microbatch, &aborted, &blocked);
    if (slot == NULL && aborted) return bg_error_set(BG_ERR_INTERNAL, "%s: aborted", ch->name);
    if (slot == NULL)
        return bg_error_set(BG_ERR_STALLED,
                            "%s: micro-batch %d did not arrive within %.3g s (stall timeout)",
                            ch->name, microbatch, ch->timeout_s);
    if (timing != NULL) {
        timing->ready = bg_monotonic_seconds();
        timing->blocked = blocked;
    }
    bg_status_t st = BG_OK;
    if (slot->bytes > capacity)
        st = bg_error_set(BG_ERR_INTERNAL, "%s: message of %zu bytes for a %zu-byte buffer",
                          ch->name, slot->bytes, capacity);
    else if (slot->bytes > 0 && ch->on_device)
        st = bg_cuda_slot_drain(slot->device, dst, slot->bytes, trade ? capacity : 0,
                                timing != NULL ? timing->clock : NULL,
                                timing != NULL ? &timing->ready_mark : NULL);
    else if (slot->bytes > 0)
        st = be->ops->upload(be, *dst, slot->data, slot->bytes);
    *bytes = slot->bytes;
    pthread_mutex_lock(&ch->lock);
    slot->microbatch = SLOT_FREE;
    /* Once the slot is free, as a send stamps its message published: a
     * sender waiting for room could have it from here. */
    if (timing != NULL) timing->copied = bg_monotonic_seconds();
    announce_and_unlock(ch);
    /* After the wake of a sender asleep for room, as a send's done. */
    if (timing != NULL) timing->done = bg_monotonic_seconds();
    return st;
}

bg_status_t bg_channel_recv(bg_channel_t *ch, bg_backend_t *be, int microbatch, void *dst,
                            size_t capacity, size_t *bytes, bg_channel_timing_t *timing) {
    return receive(ch, be, microbatch, &dst, capacity, 0, bytes, timing);
}

bg_status_t bg_channel_recv_trading(bg_channel_t *ch, bg_backend_t *be, int microbatch, void **dst,
                                    size_t capacity, size_t *bytes, bg_channel_timing_t *timing) {
    return receive(ch, be, microbatch, dst, capacity, 1, bytes, timing);
}

void bg_channel_abort(bg_channel_t *ch) {
    if (ch == NULL) return;
    pthread_mutex_lock(&ch->lock);
    ch->aborted = 1;
    announce_and_unlock(ch);
}

void bg_channel_reset(bg_channel_t *ch) {
    if (ch == NULL) return;
    pthread_mutex_lock(&ch->lock);
    ch->aborted = 0;
    for (int i = 0; i < ch->capacity; i++) ch->slots[i].microbatch = SLOT_FREE;
    pthread_mutex_unlock(&ch->lock);
}

size_t bg_channel_bytes(const bg_channel_t *ch) {
    return ch != NULL ? (size_t)ch->capacity * ch->slot_bytes : 0;
}

size_t bg_channel_padding(const bg_channel_t *ch) {
    return ch != NULL && ch->in_arena ? (size_t)ch->capacity * bg_arena_padding(ch->slot_bytes) : 0;
}
