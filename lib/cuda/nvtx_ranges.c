/* NVTX ranges (NVIDIA Tools Extension, header-only NVTX 3 from the CUDA
 * toolkit): named spans that Nsight Systems shows on each thread's row.
 * Without a profiler attached, a push or pop is a call through a null
 * function pointer check: nothing else. */
#include <nvtx3/nvToolsExt.h>

#include "backend_cuda.h"

void bg_nvtx_push(const char *name) { nvtxRangePushA(name); }

void bg_nvtx_pop(void) { nvtxRangePop(); }
