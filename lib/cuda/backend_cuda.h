/* The CUDA backend: every op of lib/backend.h on one NVIDIA GPU, in single
 * precision. Convolutions go through cuDNN 9 (legacy convolution API), GEMMs
 * through cuBLAS, everything else through small kernels of brigade's own
 * (the .cu files beside this header) that follow the CPU reference,
 * lib/cpu/kernels.inc, op for op: the elementwise ops, pooling and the
 * optimizer updates give the CPU's bits; GEMMs, convolutions and reductions
 * agree to rounding.
 *
 * This header is plain C with no CUDA types, so that any file may include it.
 * Its functions are always there: brigade's side of them (lib/cuda/loader.c)
 * loads the backend, a module of its own (libbrigade-cuda.so, module.h),
 * the first time a GPU is looked for. In a build without CUDA
 * (-Dcuda=disabled, or no nvcc), or where the module cannot be loaded,
 * bg_backend_cuda_create() returns BG_ERR_UNSUPPORTED saying why and
 * bg_cuda_device_count() returns 0.
 *
 * Streams. A backend owns a compute stream and, per lane of copies between
 * stages (BG_CUDA_LANE_*: activations, gradients), a copy stream into it
 * and one out of it, all created non-blocking (no implicit ordering with
 * the legacy default stream). Every op
 * is enqueued on the compute stream and returns without waiting, except:
 *   - upload and download, which copy on the compute stream and then wait for
 *     it, so the host buffer may be reused (upload) or read (download) when
 *     they return;
 *   - softmax_xent_forward, all_finite, take_nonfinite and take_loss, which
 *     return host values and so wait for the compute stream (their deferred
 *     forms softmax_xent_forward_add and mark_nonfinite do not: the executor
 *     uses those, and takes the loss and the marks once per step);
 *   - free, alloc and conv2d_workspace_bytes of a geometry not seen before
 *     (algorithm search), which may wait for the whole device (cudaFree,
 *     cudnnFind*).
 * The copy streams carry the pipeline's stage-to-stage copies into this
 * backend (the slots below), and out of it into host staging buffers, so
 * that they overlap compute, one direction never queued behind the other;
 * no op uses them.
 *
 * Threads. One thread drives one backend at a time, as with the CPU backend.
 * Every op first makes the backend's GPU current on the calling thread
 * (cudaSetDevice), so the driving thread may change between steps. */
#ifndef BG_BACKEND_CUDA_H
#define BG_BACKEND_CUDA_H

#include <stddef.h>

#include "../arena.h"
#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_cuda_config {
    int device;       /* GPU index as CUDA numbers them; the backend is named "cuda:<device>" */
    bg_dtype_t dtype; /* BG_F32; BG_F64 is BG_ERR_UNSUPPORTED (gradient checks run on the CPU) */
    int allow_tf32;   /* 1: cuBLAS and cuDNN may use TF32 tensor cores (products rounded to a
                       * 10-bit mantissa, ~1e-3 relative); 0: IEEE FP32 FMA arithmetic only */
    size_t conv_workspace_limit; /* most scratch bytes a convolution algorithm may use; the
                                  * workspace a layer allocates is at most this (0: algorithms
                                  * that need none) */
} bg_cuda_config_t;

/* cuBLAS's workspace, made with each backend and given to its handle
 * (cublasSetWorkspace), so that no GEMM allocates: NVIDIA's recommended
 * size for Hopper GPUs (4 MiB suffices for earlier ones). The planner
 * leaves it out of each CUDA device's capacity. */
#define BG_CUDA_CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

/* What brigade's CUDA context takes of a GPU's memory, once per GPU, for
 * plans on GPUs an hwloc XML file describes (a live GPU's free memory
 * leaves it out already): 527 MiB on an H200 with driver 580
 * (bench/results, `brigade topo` there). Other GPUs and drivers differ. */
#define BG_CUDA_CONTEXT_BYTES ((size_t)528 << 20)

/* The default conv_workspace_limit. Which algorithm a convolution gets,
 * and so its scratch, is known only once it is timed on the GPU, so the
 * planner counts the limit for every stage of a GPU holding a convolution
 * (--conv-workspace sets it). */
#define BG_CUDA_CONV_WORKSPACE_LIMIT ((size_t)256 << 20)

#define BG_CUDA_CONFIG_INIT                                                                        \
    {                                                                                              \
        .device = 0, .dtype = BG_F32, .allow_tf32 = 0,                                             \
        .conv_workspace_limit = BG_CUDA_CONV_WORKSPACE_LIMIT                                       \
    }

/* Creates a backend on GPU cfg->device: its compute and copy streams, a
 * cuBLAS handle and a cuDNN handle bound to the compute stream, and an empty
 * cache of convolution algorithms.
 *
 * The cache. cuDNN offers several algorithms per convolution whose speed
 * depends on the geometry. The first time a geometry (bg_conv2d_geometry_t,
 * batch size included) is seen -- by conv2d_workspace_bytes, or by a conv2d
 * op -- the backend times every algorithm of the forward, backward-data and
 * backward-filter convolutions with cudnnFind*AlgorithmEx on scratch buffers
 * and keeps, for each, the fastest one that is deterministic (same bits on
 * every run), needs at most the workspace limit, and with allow_tf32 = 0 does
 * not use tensor-op math; when no deterministic algorithm qualifies, the
 * fastest qualifying one. conv2d_workspace_bytes returns the largest
 * workspace of the three choices, so the workspace a stage allocates covers
 * them. A conv2d op meeting a geometry not sized before (a smaller last
 * micro-batch) does not search: it takes the algorithms cuDNN's heuristics
 * (cudnnGet*Algorithm_v7) rank first, by the same rules, within the smallest
 * workspace among the same geometry's sized larger batches, so the caller's
 * workspace must be at least conv2d_workspace_bytes of this geometry or of
 * the same geometry with a larger batch. The cache lives as long as the
 * backend. A search allocates and frees scratch memory and waits for the
 * device, so it happens in conv2d_workspace_bytes (stage creation); a
 * heuristic pick in an op allocates nothing and does not wait.
 *
 * Returns BG_OK and stores the backend in *out (release it with
 * bg_backend_destroy()); BG_ERR_UNSUPPORTED for dtype BG_F64 or a build
 * without CUDA; BG_ERR_INVALID for a device index outside
 * 0..bg_cuda_device_count()-1; BG_ERR_BACKEND when a CUDA, cuBLAS or cuDNN
 * call fails (the message names the call, file and line); BG_ERR_NOMEM when
 * host or device memory runs out. *out is untouched on failure. */
bg_status_t bg_backend_cuda_create(const bg_cuda_config_t *cfg, bg_backend_t **out);

/* Number of GPUs CUDA can use: 0 without a GPU, without a driver, or in a
 * build without CUDA. Never fails; safe to call from any thread. */
int bg_cuda_device_count(void);

/* Why CUDA gave no GPUs, as its error name and text ("cudaErrorNoDevice:
 * no CUDA-capable device is detected"), or NULL when it answered (with any
 * count) or the module is not loaded (bg_cuda_absent_reason). */
const char *bg_cuda_no_device_reason(void);

/* ---- transfers between stages ---------------------------------------
 *
 * A slot is a buffer on a receiving CUDA backend that a sending CUDA
 * backend (the same GPU, or another) fills and the receiver drains, with
 * no host waits; the pipeline's channels keep a ring of them between two
 * CUDA stages. Order, by events recorded on the streams:
 *   fill:  the receiver's copy stream waits until the sender's compute
 *          stream has produced the source and the receiver has read the
 *          slot's previous message, and copies (device to device on one
 *          GPU, cudaMemcpyPeerAsync between GPUs) while the sender computes
 *          on; before the sender overwrites the source, wait_read makes its
 *          compute stream wait for that copy. A slot with a host staging
 *          buffer (GPUs without peer access) copies in two legs instead:
 *          the sender's copy stream copies the source into the staging
 *          buffer, then the receiver's copy stream copies that into the
 *          slot, each leg ordered by events as above;
 *   drain: the receiver's compute stream waits for the fill, then copies
 *          the slot into the stage's buffer.
 * One thread fills a slot and one drains it; the host decides which slot
 * is free (the channel's ring). */
typedef struct bg_cuda_slot bg_cuda_slot_t;
typedef struct bg_cuda_clock bg_cuda_clock_t; /* "Clocks" below */

/* 1 when `be` is a CUDA backend (0 for NULL, and always in a build
 * without CUDA). */
int bg_backend_is_cuda(const bg_backend_t *be);

/* The lanes of copies between stages: each has its own copy streams on
 * every GPU, so that the copies of one direction never queue behind the
 * other's (a copy enqueued early may wait long for its sender's op). */
enum { BG_CUDA_LANE_ACTIVATIONS, BG_CUDA_LANE_GRADIENTS, BG_CUDA_LANES };

/* A slot of `bytes` on `receiver` (a CUDA backend), with its events, whose
 * fills run on the receiver's copy stream of `lane` (BG_CUDA_LANE_*).
 * With `staging` (host memory of at least `bytes`, page-aligned, which the
 * caller keeps until the slot is destroyed) the slot copies through it:
 * it is pinned here (cudaHostRegister, for every GPU) and unpinned on
 * destroy. Its memory is an allocation of its own, or with `arena` (the
 * receiver's, not yet committed) a buffer laid out there, which exists once
 * the arena's owner commits it (before the first fill) and is the owner's
 * to free. BG_ERR_NOMEM naming the backend when its memory runs out;
 * BG_ERR_BACKEND for a CUDA failure; BG_ERR_UNSUPPORTED without CUDA. */
bg_status_t bg_cuda_slot_create(bg_backend_t *receiver, size_t bytes, void *staging,
                                bg_arena_t *arena, int lane, bg_cuda_slot_t **out);

/* NULL is a no-op. */
void bg_cuda_slot_destroy(bg_cuda_slot_t *slot);

/* Enqueues the copy of `bytes` of `src` (memory of `sender`) into the
 * slot, ordered as above; returns without waiting. The copy may still be
 * reading `src` when the sender's next ops run: call wait_read before one
 * that may write it. With a `link` clock (the receiver's, on the slot's
 * lane: bg_cuda_clock_create), records a mark just before the copy into
 * the slot and one after it, in marks[0] and marks[1] (-1 where the clock
 * had no room): once its waits are met the copy starts, so the two time
 * the copy itself. Through host memory, marks[0] is instead taken on
 * `leg1` (the sender's outgoing clock of the lane), just before the first
 * leg, when given, so that the two span both legs; without it, they time
 * the second. Without clocks, marks may be NULL. */
bg_status_t bg_cuda_slot_fill(bg_cuda_slot_t *slot, bg_backend_t *sender, const void *src,
                              size_t bytes, bg_cuda_clock_t *link, bg_cuda_clock_t *leg1,
                              int marks[2]);

/* Makes the sender's later ops wait until the slot's latest fill has read
 * its source (fills of a slot run in order on one stream, so this covers
 * every earlier fill too); returns without waiting. */
bg_status_t bg_cuda_slot_wait_read(bg_cuda_slot_t *slot, bg_backend_t *sender);

/* Hands the slot's message (its first `bytes`) to the receiver's buffer
 * *dst, on the receiver's compute stream; returns without waiting. Where
 * *dst holds `capacity` bytes, as many as the slot, and the slot lies in
 * an arena (bg_cuda_slot_create), the two trade places: *dst becomes the
 * slot's memory, which holds the message, and the slot takes the old
 * buffer for a later message, with no copy (capacity 0: never). Otherwise
 * the message is copied into *dst. With a `clock` of the receiver, records
 * a mark after the wait for the fill (the message's arrival on the GPU)
 * into *arrived (-1 without). */
bg_status_t bg_cuda_slot_drain(bg_cuda_slot_t *slot, void **dst, size_t bytes, size_t capacity,
                               bg_cuda_clock_t *clock, int *arrived);

/* Lets GPUs a and b reach each other's memory directly where CUDA allows it
 * (cudaDeviceEnablePeerAccess, both ways: a copy from a to b runs on b's
 * copy stream and reads a's memory). *direct is 1 when a copy from a to b
 * needs no host memory (one GPU, or peer access enabled both ways), else 0
 * (no peer access, or CUDA refused to enable it): then slots between them
 * should have a staging buffer. */
bg_status_t bg_cuda_enable_peer_access(bg_backend_t *a, bg_backend_t *b, int *direct);

/* ---- clocks ----------------------------------------------------------
 *
 * Ops on a GPU run later than the host enqueues them, so the executor
 * times a CUDA device's ops with events on its compute stream: marks
 * recorded between ops and read back, after the step, as seconds since
 * mark 0 (CUDA's event resolution is about half a microsecond). The
 * copies between stages are timed the same way, by a clock on the copy
 * stream they run on. bg_cuda_clock_t is declared with the slots above. */

/* The stream a clock marks: the compute stream, a lane's copy stream into
 * the backend (BG_CUDA_LANE_*), or a lane's copy stream out of it (the
 * first legs of copies through host memory: BG_CUDA_CLOCK_OUTGOING plus
 * the lane). */
enum { BG_CUDA_CLOCK_COMPUTE = -1, BG_CUDA_CLOCK_OUTGOING = BG_CUDA_LANES };

/* A clock of `capacity` marks on `be`'s stream `lane` (above).
 * BG_ERR_UNSUPPORTED without CUDA. Marks are made by one thread at a time. */
bg_status_t bg_cuda_clock_create(bg_backend_t *be, int lane, int capacity, bg_cuda_clock_t **out);

/* NULL is a no-op. */
void bg_cuda_clock_destroy(bg_cuda_clock_t *clock);

/* Waits for the clock's stream to be idle, forgets every mark, records
 * mark 0 and waits for it, and gives in *host_zero the CLOCK_MONOTONIC
 * seconds at which it happened: the middle of the host's window around the
 * record and the wait, tried again while that window is wider than
 * 20 us (a preempted thread), so that clocks of different streams, each
 * placed on the host's clock by its own restart, agree within about
 * 10 us. Leaves the calling thread's current GPU as it was. */
bg_status_t bg_cuda_clock_restart(bg_cuda_clock_t *clock, double *host_zero);

/* Records the next mark after the ops enqueued so far; returns its index,
 * or -1 when the clock is full or CUDA refuses (never an error: the op
 * then keeps its host time). */
int bg_cuda_clock_mark(bg_cuda_clock_t *clock);

/* Waits for mark `index` and gives the seconds from mark 0 to it. */
bg_status_t bg_cuda_clock_seconds(bg_cuda_clock_t *clock, int index, double *out);

/* What the CUDA runtime reports of one GPU, for placement. */
typedef struct bg_cuda_device_info {
    char busid[32];      /* PCI address in lower case, "0000:65:00.0", as hwloc writes it */
    char name[64];       /* "NVIDIA H200" */
    size_t memory_bytes; /* total global memory */
    size_t free_bytes;   /* free once brigade's context on it exists (cudaMemGetInfo) */
    int multiprocessors;
} bg_cuda_device_info_t;

/* Fills *out for GPU `device`. BG_ERR_INVALID for an index outside
 * 0..bg_cuda_device_count()-1 (always, in a build without CUDA);
 * BG_ERR_BACKEND naming the call when CUDA fails. */
bg_status_t bg_cuda_device_info(int device, bg_cuda_device_info_t *out);

/* Whether GPU a can read and write GPU b's memory directly: -1 when it
 * cannot (cudaDeviceCanAccessPeer), for an index out of range, a == b, or a
 * build without CUDA; else CUDA's performance rank of the pair's link
 * (cudaDevP2PAttrPerformanceRank, 0 or more; CUDA leaves its scale open, so
 * the planner uses it only to tell direct links from staged ones). */
int bg_cuda_peer_rank(int a, int b);

/* Opens and closes an NVTX range on the calling thread named like the
 * trace's ops: "F3@1" for kind "F", micro-batch 3, stage 1; "step" when the
 * micro-batch is negative. Nsight Systems shows brigade's ops under these
 * names. No-ops, that format nothing, until the CUDA backend is loaded. */
void bg_nvtx_push_op(const char *kind, int microbatch, int stage);
void bg_nvtx_pop(void);

/* 1 when this build has the CUDA backend (configured with nvcc found and
 * -Dcuda not disabled), 0 otherwise. */
int bg_cuda_built(void);

/* NULL when the CUDA backend is loaded (loading it if need be); otherwise
 * why it is not: not built, or the module's path and the loader's error
 * (a missing libcudart.so, say). */
const char *bg_cuda_absent_reason(void);

/* The path the CUDA backend was loaded from (loading it if need be); NULL
 * when it is not loaded (bg_cuda_absent_reason says why). */
const char *bg_cuda_module_path(void);

#ifdef __cplusplus
}
#endif

#endif /* BG_BACKEND_CUDA_H */
