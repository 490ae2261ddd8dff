/* Stage-to-stage copies between CUDA backends (backend_cuda.h, "Transfers
 * between stages"): a slot of the receiver's memory that the sender fills
 * on the receiver's copy stream of the slot's lane (activations or
 * gradients) and the receiver drains on its compute stream, ordered by
 * events so that the host never waits. */
#include <stdlib.h>

#include "backend_cuda.h"
#include "cuda_check.h"
#include "cuda_internal.h"
#include "cuda_ops.h"

struct bg_cuda_slot {
    bg_backend_t *receiver;
    int lane; /* BG_CUDA_LANE_*: which copy streams its fills run on */
    void *data;
    int owns_data; /* 0: data lies in the receiver's shared arena */
    size_t bytes;
    void *staging;       /* host buffer between GPUs without peer access, or NULL */
    int pinned;          /* staging is registered (page-locked) with CUDA */
    cudaEvent_t written; /* on the sender's compute stream: the source is complete */
    cudaEvent_t staged;  /* on the sender's copy_out stream: the staging buffer holds it */
    cudaEvent_t filled;  /* on the receiver's copy_in stream: the slot holds the message */
    cudaEvent_t drained; /* on the receiver's compute stream: the slot was read out */
};

extern "C" int bg_backend_is_cuda(const bg_backend_t *be) {
    return be != NULL && be->ops == &bg_cuda_ops_f32;
}

extern "C" void bg_cuda_slot_destroy(bg_cuda_slot_t *slot) {
    if (slot == NULL) return;
    bg_cuda_backend_t *cu = bg_cuda_of(slot->receiver);
    if (cudaSetDevice(cu->device) == cudaSuccess) {
        /* Copies into the slot (and through its staging buffer) and the
         * receiver's copy out of it may still run: the memory is freed and
         * unpinned only after them. */
        cudaEvent_t copies[] = {slot->staged, slot->filled, slot->drained};
        for (cudaEvent_t e : copies)
            if (e != NULL && cudaEventSynchronize(e) != cudaSuccess) (void)cudaGetLastError();
        cudaEvent_t events[] = {slot->written, slot->staged, slot->filled, slot->drained};
        for (cudaEvent_t e : events)
            if (e != NULL && cudaEventDestroy(e) != cudaSuccess) (void)cudaGetLastError();
        if (slot->pinned && cudaHostUnregister(slot->staging) != cudaSuccess)
            (void)cudaGetLastError();
    } else {
        (void)cudaGetLastError();
    }
    if (slot->data != NULL && slot->owns_data)
        slot->receiver->ops->free(slot->receiver, slot->data);
    free(slot);
}

extern "C" bg_status_t bg_cuda_slot_create(bg_backend_t *receiver, size_t bytes, void *staging,
                                           bg_arena_t *arena, int lane, bg_cuda_slot_t **out) {
    if (lane < 0 || lane >= BG_CUDA_LANES)
        return bg_error_set(BG_ERR_INTERNAL, "%s: copy lane %d", receiver->name, lane);
    bg_cuda_slot_t *slot = (bg_cuda_slot_t *)calloc(1, sizeof *slot);
    if (slot == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", receiver->name);
    slot->receiver = receiver;
    slot->lane = lane;
    slot->bytes = bytes;
    bg_cuda_backend_t *cu = bg_cuda_of(receiver);
    bg_status_t st = BG_OK;
    BG_CUDA_CHECK_GOTO(receiver, cudaSetDevice(cu->device), st, fail);
    /* The events order work and are never timed. The sender records
     * `written` on its own GPU's stream, so it is created there in fill. */
    BG_CUDA_CHECK_GOTO(receiver, cudaEventCreateWithFlags(&slot->filled, cudaEventDisableTiming),
                       st, fail);
    BG_CUDA_CHECK_GOTO(receiver, cudaEventCreateWithFlags(&slot->drained, cudaEventDisableTiming),
                       st, fail);
    if (staging != NULL && bytes > 0) {
        /* Portable: pinned for every GPU, so both legs copy by DMA. Where
         * the system will not pin memory it did not allocate (NotSupported,
         * or NotPermitted in a sandbox) or has no more to pin (a limit on
         * locked memory) the legs copy through it pageable: the same order,
         * since each leg still waits for the other's event, but slower, and
         * the sender's thread waits for leg 1 to end (a copy into pageable
         * memory returns when done). Any other error (an earlier fault, a
         * buffer registered twice) is one. */
        const cudaError_t pin = cudaHostRegister(staging, bytes, cudaHostRegisterPortable);
        if (pin == cudaErrorNotSupported || pin == cudaErrorNotPermitted ||
            pin == cudaErrorMemoryAllocation)
            (void)cudaGetLastError();
        else
            BG_CUDA_CHECK_GOTO(receiver, pin, st, fail);
        slot->pinned = pin == cudaSuccess;
        slot->staging = staging;
    }
    /* Last: nothing fails after a reservation, which the arena would
     * otherwise point into the freed slot. */
    slot->owns_data = arena == NULL;
    st = arena != NULL ? bg_arena_reserve(arena, bytes > 0 ? bytes : 1, &slot->data)
                       : receiver->ops->alloc(receiver, bytes > 0 ? bytes : 1, &slot->data);
    if (st != BG_OK) goto fail;
    *out = slot;
    return BG_OK;
fail:
    bg_cuda_slot_destroy(slot);
    return st;
}

/* Marks `link` (a clock on `stream`, or NULL) at this point of the
 * stream: *mark is its index, or -1 without a clock or with no room. */
static bg_status_t mark_link(bg_cuda_slot_t *slot, bg_cuda_clock_t *link, cudaStream_t stream,
                             int *mark) {
    *mark = -1;
    if (link == NULL) return BG_OK;
    if (link->stream != stream)
        return bg_error_set(BG_ERR_INTERNAL, "%s: a link clock on another stream than the copy's",
                            slot->receiver->name);
    *mark = bg_cuda_clock_mark(link);
    return BG_OK;
}

/* The two legs of a fill through the host staging buffer; `written` is
 * recorded. With `leg1`, marks[0] is its mark before the first leg. */
static bg_status_t fill_staged(bg_cuda_slot_t *slot, bg_cuda_backend_t *from, bg_cuda_backend_t *to,
                               bg_backend_t *sender, const void *src, size_t bytes,
                               bg_cuda_clock_t *link, bg_cuda_clock_t *leg1_clock, int marks[2]) {
    if (slot->staged == NULL) /* recorded on the sender's stream: made on its GPU */
        BG_CUDA_CHECK(sender, cudaEventCreateWithFlags(&slot->staged, cudaEventDisableTiming));
    /* Leg 1, on the sender's copy stream: it reads the source only after the
     * sender's ops that wrote it... */
    cudaStream_t leg1 = from->copy_out[slot->lane], leg2 = to->copy_in[slot->lane];
    BG_CUDA_CHECK(sender, cudaStreamWaitEvent(leg1, slot->written, 0));
    /* ...and overwrites the staging buffer only after leg 2 of the slot's
     * previous message has read it (never recorded: already complete). */
    BG_CUDA_CHECK(sender, cudaStreamWaitEvent(leg1, slot->filled, 0));
    BG_CHECK(mark_link(slot, leg1_clock, leg1, &marks[0]));
    BG_CUDA_CHECK(sender, cudaMemcpyAsync(slot->staging, src, bytes, cudaMemcpyDeviceToHost, leg1));
    BG_CUDA_CHECK(sender, cudaEventRecord(slot->staged, leg1));
    BG_CUDA_CHECK(slot->receiver, cudaSetDevice(to->device)); /* the receiver's GPU, named */
    /* Leg 2, on the receiver's copy stream: it reads the staging buffer once
     * leg 1 has filled it... */
    BG_CUDA_CHECK(slot->receiver, cudaStreamWaitEvent(leg2, slot->staged, 0));
    /* ...and overwrites the slot only after the receiver's last read of it. */
    BG_CUDA_CHECK(slot->receiver, cudaStreamWaitEvent(leg2, slot->drained, 0));
    if (leg1_clock == NULL) BG_CHECK(mark_link(slot, link, leg2, &marks[0]));
    BG_CUDA_CHECK(slot->receiver,
                  cudaMemcpyAsync(slot->data, slot->staging, bytes, cudaMemcpyHostToDevice, leg2));
    BG_CHECK(mark_link(slot, link, leg2, &marks[1]));
    BG_CUDA_CHECK(slot->receiver, cudaEventRecord(slot->filled, leg2));
    BG_CUDA_CHECK(sender, cudaSetDevice(from->device));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_slot_fill(bg_cuda_slot_t *slot, bg_backend_t *sender,
                                         const void *src, size_t bytes, bg_cuda_clock_t *link,
                                         bg_cuda_clock_t *leg1, int marks[2]) {
    int unused[2];
    if (marks == NULL) marks = unused;
    marks[0] = marks[1] = -1;
    if (link != NULL && link->be != slot->receiver)
        return bg_error_set(BG_ERR_INTERNAL, "%s: a link clock of %s", slot->receiver->name,
                            link->be->name);
    if (leg1 != NULL && (leg1->be != sender || slot->staging == NULL))
        return bg_error_set(BG_ERR_INTERNAL, "%s: a first-leg clock of %s for a %s slot",
                            sender->name, leg1->be->name,
                            slot->staging == NULL ? "direct" : "staged");
    if (bytes > slot->bytes)
        return bg_error_set(BG_ERR_INTERNAL, "%s: %zu bytes for a %zu-byte slot", sender->name,
                            bytes, slot->bytes);
    bg_cuda_backend_t *from = bg_cuda_of(sender), *to = bg_cuda_of(slot->receiver);
    BG_CUDA_CHECK(sender, cudaSetDevice(from->device));
    if (slot->written == NULL)
        BG_CUDA_CHECK(sender, cudaEventCreateWithFlags(&slot->written, cudaEventDisableTiming));
    BG_CUDA_CHECK(sender, cudaEventRecord(slot->written, from->compute));
    if (slot->staging != NULL)
        return fill_staged(slot, from, to, sender, src, bytes, link, leg1, marks);
    /* The receiver's GPU is made current only when it is another one: on
     * one GPU (cuda:0x4) each call of a send is the host's time while the
     * sender's stream may have nothing else to run. */
    const int other_gpu = from->device != to->device;
    if (other_gpu) BG_CUDA_CHECK(sender, cudaSetDevice(to->device));
    cudaStream_t copy = to->copy_in[slot->lane];
    /* The copy reads the source only after the sender's ops that wrote it. */
    BG_CUDA_CHECK(slot->receiver, cudaStreamWaitEvent(copy, slot->written, 0));
    /* It overwrites the slot only after the receiver's last read of it
     * (an event never recorded, on first use, is already complete). */
    BG_CUDA_CHECK(slot->receiver, cudaStreamWaitEvent(copy, slot->drained, 0));
    BG_CHECK(mark_link(slot, link, copy, &marks[0]));
    if (other_gpu)
        BG_CUDA_CHECK(slot->receiver,
                      cudaMemcpyPeerAsync(slot->data, to->device, src, from->device, bytes, copy));
    else
        BG_CUDA_CHECK(slot->receiver,
                      cudaMemcpyAsync(slot->data, src, bytes, cudaMemcpyDeviceToDevice, copy));
    BG_CHECK(mark_link(slot, link, copy, &marks[1]));
    BG_CUDA_CHECK(slot->receiver, cudaEventRecord(slot->filled, copy));
    if (other_gpu) BG_CUDA_CHECK(sender, cudaSetDevice(from->device));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_slot_wait_read(bg_cuda_slot_t *slot, bg_backend_t *sender) {
    BG_CUDA_CHECK(sender, cudaSetDevice(bg_cuda_of(sender)->device));
    /* The sender's ops enqueued from now on, one of which will overwrite
     * the source (a later micro-batch's output in the same stash slot, the
     * next input gradient), start after the copy that reads it: the whole
     * copy, or through host memory its first leg. */
    BG_CUDA_CHECK(sender,
                  cudaStreamWaitEvent(bg_cuda_of(sender)->compute,
                                      slot->staging != NULL ? slot->staged : slot->filled, 0));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_slot_drain(bg_cuda_slot_t *slot, void **dst, size_t bytes,
                                          size_t capacity, bg_cuda_clock_t *clock, int *arrived) {
    bg_backend_t *be = slot->receiver;
    bg_cuda_backend_t *cu = bg_cuda_of(be);
    if (arrived != NULL) *arrived = -1;
    BG_CUDA_CHECK(be, cudaSetDevice(cu->device));
    /* The receiver's compute stream reads the slot only once it is filled. */
    BG_CUDA_CHECK(be, cudaStreamWaitEvent(cu->compute, slot->filled, 0));
    if (clock != NULL && arrived != NULL) *arrived = bg_cuda_clock_mark(clock);
    if (capacity > 0 && capacity == slot->bytes && !slot->owns_data) {
        /* The receiver reads the message where it arrived. The slot's next
         * fill overwrites the buffer it takes only after `drained`, that
         * is after the ops enqueued so far on the compute stream: the last
         * readers of what the buffer held (its owner is replacing that).
         * Recorded before the two trade places, so that a failed record
         * leaves neither the slot nor the stage a buffer still read. */
        BG_CUDA_CHECK(be, cudaEventRecord(slot->drained, cu->compute));
        void *message = slot->data;
        slot->data = *dst;
        *dst = message;
        return BG_OK;
    }
    BG_CUDA_CHECK(be,
                  cudaMemcpyAsync(*dst, slot->data, bytes, cudaMemcpyDeviceToDevice, cu->compute));
    BG_CUDA_CHECK(be, cudaEventRecord(slot->drained, cu->compute));
    return BG_OK;
}

extern "C" bg_status_t bg_cuda_enable_peer_access(bg_backend_t *a, bg_backend_t *b, int *direct) {
    int from = bg_cuda_of(a)->device, to = bg_cuda_of(b)->device, can = 0;
    *direct = from == to;
    if (from == to) return BG_OK;
    /* The copy runs on the receiver's copy stream and reads the sender's
     * memory, so access is enabled both ways. */
    int back = 0;
    BG_CUDA_CHECK(a, cudaDeviceCanAccessPeer(&can, from, to));
    BG_CUDA_CHECK(b, cudaDeviceCanAccessPeer(&back, to, from)); /* failures name the GPU asked */
    if (!can || !back) return BG_OK; /* the caller stages through host memory */
    int enabled = 1, caller = 0;
    BG_CUDA_CHECK(a, cudaGetDevice(&caller));
    const int pair[2][2] = {{from, to}, {to, from}};
    bg_status_t st = BG_OK;
    for (int i = 0; i < 2; i++) {
        BG_CUDA_CHECK_GOTO(i == 0 ? a : b, cudaSetDevice(pair[i][0]), st, done);
        cudaError_t e = cudaDeviceEnablePeerAccess(pair[i][1], 0);
        /* Refused (too many peers, say): copies then go through host memory. */
        if (e != cudaSuccess) (void)cudaGetLastError();
        enabled = enabled && (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled);
    }
    *direct = enabled;
done:
    /* The caller's GPU, as before, on either path (a failure here is
     * reported unless one came first). */
    const cudaError_t restored = cudaSetDevice(caller);
    if (restored != cudaSuccess && st == BG_OK)
        st = bg_cuda_fail(a, restored, "cudaSetDevice(caller)", __FILE__, __LINE__);
    return st;
}
