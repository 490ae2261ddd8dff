/* What the CUDA runtime tells the placement planner about the GPUs: each
 * one's PCI address and memory, and whether two can reach each other
 * directly (backend_cuda.h). */
#include <cuda_runtime.h>

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend_cuda.h"

/* BG_ERR_BACKEND naming the call and GPU, with CUDA's text. */
static bg_status_t info_fail(int device, const char *call, cudaError_t error) {
    (void)cudaGetLastError(); /* clear the non-sticky error */
    return bg_error_set(BG_ERR_BACKEND, "cuda:%d: %s failed: %s", device, call,
                        cudaGetErrorString(error));
}

/* The free memory of one GPU, asked by query_free on its own thread. */
typedef struct free_query {
    int device;
    size_t free_bytes;
    cudaError_t error; /* cudaSuccess, or the failure of `call` */
    const char *call;
} free_query_t;

static void *query_free(void *arg) {
    free_query_t *q = (free_query_t *)arg;
    size_t total = 0;
    q->call = "cudaSetDevice";
    q->error = cudaSetDevice(q->device);
    if (q->error != cudaSuccess) return NULL;
    q->call = "cudaMemGetInfo";
    q->error = cudaMemGetInfo(&q->free_bytes, &total);
    return NULL;
}

extern "C" bg_status_t bg_cuda_device_info(int device, bg_cuda_device_info_t *out) {
    const int count = bg_cuda_device_count();
    if (device < 0 || device >= count)
        return bg_error_set(BG_ERR_INVALID, "cuda:%d: no such GPU (%d visible)", device, count);
    bg_cuda_device_info_t info;
    memset(&info, 0, sizeof info);
    cudaError_t e = cudaDeviceGetPCIBusId(info.busid, (int)sizeof info.busid, device);
    if (e != cudaSuccess) return info_fail(device, "cudaDeviceGetPCIBusId", e);
    /* CUDA writes "0000:65:00.0" in capitals; hwloc and lspci in lower case. */
    for (char *c = info.busid; *c != '\0'; c++) *c = (char)tolower((unsigned char)*c);
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) return info_fail(device, "cudaGetDeviceProperties", e);
    info.memory_bytes = prop.totalGlobalMem;
    /* What is free is asked on the GPU itself, which makes brigade's context
       there (as the run would) and so leaves out the context's own memory
       and what other processes hold: on a thread of its own, since a
       thread's current GPU cannot be put back to none (cudaSetDevice to the
       0 cudaGetDevice reports would make a context on GPU 0, a GPU the run
       may not use or may not be allowed to). */
    free_query_t query = {.device = device, .free_bytes = 0, .error = cudaSuccess, .call = NULL};
    pthread_t thread;
    if (pthread_create(&thread, NULL, query_free, &query) != 0)
        return bg_error_set(BG_ERR_NOMEM, "cuda:%d: no thread to ask for its free memory", device);
    pthread_join(thread, NULL);
    if (query.error != cudaSuccess) return info_fail(device, query.call, query.error);
    info.free_bytes = query.free_bytes;
    info.multiprocessors = prop.multiProcessorCount;
    snprintf(info.name, sizeof info.name, "%.63s", prop.name);
    *out = info;
    return BG_OK;
}

extern "C" int bg_cuda_peer_rank(int a, int b) {
    const int count = bg_cuda_device_count();
    if (a < 0 || b < 0 || a >= count || b >= count || a == b) return -1;
    int access = 0, rank = 0;
    if (cudaDeviceCanAccessPeer(&access, a, b) != cudaSuccess || !access ||
        cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, a, b) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return rank;
}
