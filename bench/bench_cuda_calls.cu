/* Where the time of a stage-to-stage message on one GPU goes (cuda:0x4,
 * lib/cuda/transfer.cu): the host's time in each CUDA runtime call that a
 * send makes, with one thread calling and with THREADS threads calling at
 * once on the same GPU (default 4: the stage threads of cuda:0x4; the main
 * thread makes no CUDA call during a step), and the GPU's own time for the
 * copy and for one stream's wait on another's event, measured on a stream
 * held back by a spinning kernel so that the host's enqueueing is not in
 * it, beside two marks with nothing between them.
 *
 *   bench_cuda_calls [THREADS] [REPS]
 *
 * Prints the median and the 90th percentile of each, in microseconds. Not
 * a test: compare figures on a quiet machine, never assert on them. */
#include <cuda.h> /* the driver API's types: its functions come from the runtime */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_timing.h"

/* The sizes of the origin CNN's messages at micro-batch 64 (bytes): the
 * pooled activations, a dense layer's 128 outputs, the 10 logits. */
static const size_t message_bytes[] = {64 * 32 * 13 * 13 * 4, 64 * 128 * 4, 64 * 10 * 4};
enum { SIZES = sizeof message_bytes / sizeof message_bytes[0] };

/* The calls timed on the host, in the order of a send (transfer.cu's
 * bg_cuda_slot_fill), then a kernel launch for scale. */
enum {
    CALL_GET_DEVICE,
    CALL_SET_DEVICE,
    CALL_RECORD,
    CALL_RECORD_TIMED,
    CALL_WAIT_EVENT,
    CALL_COPY_LARGE,
    CALL_COPY_SMALL,
    CALL_COPY_DEFAULT,
    CALL_COPY_DRIVER,
    CALL_COPY_KERNEL,
    CALL_COPY_GRAPH,
    CALL_RECORD_DRIVER,
    CALL_LAUNCH,
    CALL_SEND,
    CALLS
};
static const char *const call_names[CALLS] = {
    "cudaGetDevice",
    "cudaSetDevice (the current GPU)",
    "cudaEventRecord (untimed event)",
    "cudaEventRecord (timed event, a clock mark)",
    "cudaStreamWaitEvent",
    "cudaMemcpyAsync device to device, 1.38 MB",
    "cudaMemcpyAsync device to device, 32 KB",
    "cudaMemcpyAsync, 1.38 MB, cudaMemcpyDefault",
    "cuMemcpyDtoDAsync (driver API), 1.38 MB",
    "a copy kernel's launch, 1.38 MB",
    "cudaGraphLaunch of a 1.38 MB copy",
    "cuEventRecord (driver API, timed event)",
    "kernel launch (empty kernel)",
    "a whole send while recording (transfer.cu)",
};

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_cuda_calls: %s failed: %s (%s:%d)\n", #call,                    \
                    cudaGetErrorString(e_), __FILE__, __LINE__);                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

__global__ void empty_kernel(void) {}

__global__ void copy_kernel(float4 *dst, const float4 *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

typedef CUresult (*copy_fn_t)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult (*record_fn_t)(CUevent, CUstream);
static copy_fn_t driver_copy;
static record_fn_t driver_record;

/* The driver's own entry points, through the runtime (no link to libcuda). */
static void find_driver_calls(void) {
    cudaDriverEntryPointQueryResult found;
    void *fn = NULL;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemcpyDtoDAsync", &fn, 12000, cudaEnableDefault,
                                           &found));
    driver_copy = (copy_fn_t)fn;
    CHECK(cudaGetDriverEntryPointByVersion("cuEventRecord", &fn, 12000, cudaEnableDefault, &found));
    driver_record = (record_fn_t)fn;
    if (driver_copy == NULL || driver_record == NULL) {
        fprintf(stderr, "bench_cuda_calls: the driver has no cuMemcpyDtoDAsync or cuEventRecord\n");
        exit(1);
    }
}

#define CHECK_DRIVER(call)                                                                         \
    do {                                                                                           \
        if ((call) != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "bench_cuda_calls: %s failed (%s:%d)\n", #call, __FILE__, __LINE__);   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Spins for about `ns` nanoseconds of the GPU's global timer. */
__global__ void spin_kernel(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

typedef struct caller {
    int reps;
    pthread_barrier_t *start;
    double *samples; /* CALLS x reps, microseconds */
} caller_t;

/* One stage thread: its own compute and copy streams and buffers, the
 * calls of `reps` sends, each call timed. */
static void *call_loop(void *arg) {
    caller_t *c = (caller_t *)arg;
    cudaStream_t compute, copy;
    cudaEvent_t written, filled, drained, mark;
    void *src, *dst;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&drained, cudaEventDisableTiming));
    CHECK(cudaEventCreate(&mark));
    CHECK(cudaMalloc(&src, message_bytes[0]));
    CHECK(cudaMalloc(&dst, message_bytes[0]));
    /* The large copy as a graph of one node, made by capturing it. */
    cudaGraph_t graph;
    cudaGraphExec_t graph_exec;
    CHECK(cudaStreamBeginCapture(copy, cudaStreamCaptureModeThreadLocal));
    CHECK(cudaMemcpyAsync(dst, src, message_bytes[0], cudaMemcpyDeviceToDevice, copy));
    CHECK(cudaStreamEndCapture(copy, &graph));
    CHECK(cudaGraphInstantiate(&graph_exec, graph, 0));
    const size_t vectors = message_bytes[0] / sizeof(float4);
    pthread_barrier_wait(c->start);
    for (int r = 0; r < c->reps; r++) {
        /* t[CALL_X + 1] - t[CALL_X]: call X's time. */
        double t[CALLS + 1];
        int device = -1;
        t[0] = bg_monotonic_seconds();
        CHECK(cudaGetDevice(&device));
        t[CALL_GET_DEVICE + 1] = bg_monotonic_seconds();
        CHECK(cudaSetDevice(device));
        t[CALL_SET_DEVICE + 1] = bg_monotonic_seconds();
        CHECK(cudaEventRecord(written, compute));
        t[CALL_RECORD + 1] = bg_monotonic_seconds();
        CHECK(cudaEventRecord(mark, compute));
        t[CALL_RECORD_TIMED + 1] = bg_monotonic_seconds();
        CHECK(cudaStreamWaitEvent(copy, written, 0));
        t[CALL_WAIT_EVENT + 1] = bg_monotonic_seconds();
        CHECK(cudaMemcpyAsync(dst, src, message_bytes[0], cudaMemcpyDeviceToDevice, copy));
        t[CALL_COPY_LARGE + 1] = bg_monotonic_seconds();
        CHECK(cudaMemcpyAsync(dst, src, message_bytes[1], cudaMemcpyDeviceToDevice, copy));
        t[CALL_COPY_SMALL + 1] = bg_monotonic_seconds();
        CHECK(cudaMemcpyAsync(dst, src, message_bytes[0], cudaMemcpyDefault, copy));
        t[CALL_COPY_DEFAULT + 1] = bg_monotonic_seconds();
        CHECK_DRIVER(
            driver_copy((CUdeviceptr)dst, (CUdeviceptr)src, message_bytes[0], (CUstream)copy));
        t[CALL_COPY_DRIVER + 1] = bg_monotonic_seconds();
        copy_kernel<<<264, 256, 0, copy>>>((float4 *)dst, (const float4 *)src, vectors);
        CHECK(cudaGetLastError());
        t[CALL_COPY_KERNEL + 1] = bg_monotonic_seconds();
        CHECK(cudaGraphLaunch(graph_exec, copy));
        t[CALL_COPY_GRAPH + 1] = bg_monotonic_seconds();
        CHECK_DRIVER(driver_record((CUevent)mark, (CUstream)compute));
        t[CALL_RECORD_DRIVER + 1] = bg_monotonic_seconds();
        empty_kernel<<<1, 32, 0, compute>>>();
        CHECK(cudaGetLastError());
        t[CALL_LAUNCH + 1] = bg_monotonic_seconds();
        /* A send between two stages of one GPU while recording: the calls
         * bg_cuda_slot_fill and its clock marks make, copied here (keep
         * them in step): the source's event, the copy's two waits, the
         * copy between its two clock marks (each making its GPU current),
         * and the copy's event. */
        CHECK(cudaSetDevice(0));
        CHECK(cudaEventRecord(written, compute));
        CHECK(cudaStreamWaitEvent(copy, written, 0));
        CHECK(cudaStreamWaitEvent(copy, drained, 0));
        CHECK(cudaSetDevice(0));
        CHECK(cudaEventRecord(mark, copy));
        CHECK(cudaMemcpyAsync(dst, src, message_bytes[0], cudaMemcpyDeviceToDevice, copy));
        CHECK(cudaSetDevice(0));
        CHECK(cudaEventRecord(mark, copy));
        CHECK(cudaEventRecord(filled, copy));
        t[CALL_SEND + 1] = bg_monotonic_seconds();
        for (int k = 0; k < CALLS; k++) c->samples[k * c->reps + r] = 1e6 * (t[k + 1] - t[k]);
        /* Never let the GPU fall behind (a full queue makes a call wait):
         * a round queues about 25 us of copies. */
        if (r % 4 == 3) {
            CHECK(cudaStreamSynchronize(compute));
            CHECK(cudaStreamSynchronize(copy));
        }
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaGraphExecDestroy(graph_exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    cudaEvent_t events[] = {written, filled, drained, mark};
    for (cudaEvent_t e : events) CHECK(cudaEventDestroy(e));
    CHECK(cudaStreamDestroy(compute));
    CHECK(cudaStreamDestroy(copy));
    return NULL;
}

/* Times the calls with `threads` threads at once; prints a line per call. */
static void time_calls(int threads, int reps) {
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    caller_t *callers = (caller_t *)calloc((size_t)threads, sizeof *callers);
    pthread_t *ids = (pthread_t *)calloc((size_t)threads, sizeof *ids);
    double *all = (double *)malloc(sizeof(double) * CALLS * (size_t)reps * (size_t)threads);
    if (callers == NULL || ids == NULL || all == NULL) {
        fprintf(stderr, "bench_cuda_calls: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < threads; i++) {
        callers[i] = (caller_t){reps, &start, all + (size_t)i * CALLS * (size_t)reps};
        if (pthread_create(&ids[i], NULL, call_loop, &callers[i]) != 0) {
            fprintf(stderr, "bench_cuda_calls: could not start thread %d\n", i);
            exit(1);
        }
    }
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    printf("host time a call, %d thread%s at once (us): median, 90th percentile\n", threads,
           threads == 1 ? "" : "s");
    double *one = (double *)malloc(sizeof(double) * (size_t)reps * (size_t)threads);
    if (one == NULL) {
        fprintf(stderr, "bench_cuda_calls: out of memory\n");
        exit(1);
    }
    for (int k = 0; k < CALLS; k++) {
        int n = 0;
        for (int i = 0; i < threads; i++)
            for (int r = reps / 10; r < reps; r++) /* past the first tenth: warm */
                one[n++] = all[((size_t)i * CALLS + (size_t)k) * (size_t)reps + (size_t)r];
        qsort(one, (size_t)n, sizeof *one, compare_doubles);
        const double med = one[n / 2], p90 = one[n * 9 / 10];
        printf("  %-44s %8.2f %8.2f\n", call_names[k], med, p90);
    }
    free(one);
    free(all);
    free(ids);
    free(callers);
    pthread_barrier_destroy(&start);
}

/* The GPU's time for each message size's copy, and for a copy stream's
 * wait on an event of the compute stream: both streams are held back by a
 * spinning kernel while the host enqueues, so only the GPU's time is in
 * the marks. */
static void time_on_gpu(int reps) {
    cudaStream_t compute, copy;
    cudaEvent_t before, after, signal;
    void *src, *dst;
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&before));
    CHECK(cudaEventCreate(&after));
    CHECK(cudaEventCreate(&signal));
    CHECK(cudaMalloc(&src, message_bytes[0]));
    CHECK(cudaMalloc(&dst, message_bytes[0]));
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    if (v == NULL) {
        fprintf(stderr, "bench_cuda_calls: out of memory\n");
        exit(1);
    }
    printf("GPU time (us): median, 90th percentile\n");
    /* -1: two marks with nothing between (what the marks themselves add);
     * 0..SIZES-1: a copy between them; SIZES: a cross-stream wait. */
    for (int s = -1; s <= SIZES; s++) {
        for (int r = 0; r < reps; r++) {
            float ms = 0;
            if (s < 0) {
                spin_kernel<<<1, 1, 0, copy>>>(50000);
                CHECK(cudaEventRecord(before, copy));
                CHECK(cudaEventRecord(after, copy));
            } else if (s < SIZES) {
                spin_kernel<<<1, 1, 0, copy>>>(50000);
                CHECK(cudaEventRecord(before, copy));
                CHECK(cudaMemcpyAsync(dst, src, message_bytes[s], cudaMemcpyDeviceToDevice, copy));
                CHECK(cudaEventRecord(after, copy));
            } else {
                /* The compute stream's mark, then its event that the copy
                 * stream waits for, then the copy stream's mark. */
                spin_kernel<<<1, 1, 0, compute>>>(50000);
                CHECK(cudaEventRecord(before, compute));
                CHECK(cudaEventRecord(signal, compute));
                CHECK(cudaStreamWaitEvent(copy, signal, 0));
                CHECK(cudaEventRecord(after, copy));
            }
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaEventElapsedTime(&ms, before, after));
            v[r] = 1e3 * (double)ms;
        }
        char what[64];
        if (s < 0)
            snprintf(what, sizeof what, "two marks, nothing between");
        else if (s < SIZES)
            snprintf(what, sizeof what, "copy device to device, %zu bytes", message_bytes[s]);
        else
            snprintf(what, sizeof what, "one stream waking on another's event");
        qsort(v, (size_t)reps, sizeof *v, compare_doubles);
        const double med = v[reps / 2], p90 = v[reps * 9 / 10];
        printf("  %-44s %8.2f %8.2f\n", what, med, p90);
    }
    free(v);
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    cudaEvent_t events[] = {before, after, signal};
    for (cudaEvent_t e : events) CHECK(cudaEventDestroy(e));
    CHECK(cudaStreamDestroy(compute));
    CHECK(cudaStreamDestroy(copy));
}

int main(int argc, char **argv) {
    int threads = 4, reps = 2000;
    if (argc > 1) threads = atoi(argv[1]);
    if (argc > 2) reps = atoi(argv[2]);
    if (argc > 3 || threads < 1 || threads > 64 || reps < 10) {
        fprintf(stderr, "usage: bench_cuda_calls [THREADS 1-64] [REPS >= 10]\n");
        return 2;
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        fprintf(stderr, "bench_cuda_calls: no CUDA GPU\n");
        return 1;
    }
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(NULL)); /* the context, before anything is timed */
    find_driver_calls();
    time_calls(1, reps);
    if (threads > 1) time_calls(threads, reps);
    time_on_gpu(reps < 200 ? reps : 200);
    return 0;
}
