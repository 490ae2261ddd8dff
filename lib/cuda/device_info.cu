/* What the CUDA runtime tells the placement planner about the GPUs: each
 * one's PCI address and memory, and whether two can reach each other
 * directly (backend_cuda.h). */
#include <cuda_runtime.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "backend_cuda.h"

/* BG_ERR_BACKEND naming the call and GPU, with CUDA's text. */
static bg_status_t info_fail(int device, const char *call, cudaError_t error) {
    (void)cudaGetLastError(); /* clear the non-sticky error */
    return bg_error_set(BG_ERR_BACKEND, "cuda:%d: %s failed: %s", device, call,
                        cudaGetErrorString(error));
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
       and what other processes hold. The caller's current GPU is kept. */
    int current = 0;
    e = cudaGetDevice(&current);
    if (e != cudaSuccess) return info_fail(device, "cudaGetDevice", e);
    e = cudaSetDevice(device);
    if (e != cudaSuccess) return info_fail(device, "cudaSetDevice", e);
    size_t total = 0;
    e = cudaMemGetInfo(&info.free_bytes, &total);
    const cudaError_t restore = cudaSetDevice(current);
    if (e != cudaSuccess) return info_fail(device, "cudaMemGetInfo", e);
    if (restore != cudaSuccess) return info_fail(current, "cudaSetDevice", restore);
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
