/* NVTX ranges (NVIDIA Tools Extension, header-only NVTX 3 from the CUDA
 * toolkit): named spans that Nsight Systems shows on each thread's row.
 * Without a profiler attached, a push or pop is a call through a null
 * function pointer check: nothing else. */
#include <nvtx3/nvToolsExt.h>

#include <stdio.h>

#include "backend_cuda.h"

void bg_nvtx_push_op(const char *kind, int microbatch, int stage) {
    char name[32];
    if (microbatch < 0)
        snprintf(name, sizeof name, "step");
    else
        snprintf(name, sizeof name, "%s%d@%d", kind, microbatch, stage);
    nvtxRangePushA(name);
}

void bg_nvtx_pop(void) { nvtxRangePop(); }
