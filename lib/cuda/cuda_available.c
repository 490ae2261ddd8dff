/* Whether this build has the CUDA backend. Compiled in every build: with
 * BG_HAVE_CUDA=1 (lib/meson.build defines it for lib/cuda when nvcc is found
 * and -Dcuda is not disabled) it answers 1, otherwise 0. */
#include "backend_cuda.h"

#ifndef BG_HAVE_CUDA
#define BG_HAVE_CUDA 0
#endif

int bg_cuda_built(void) { return BG_HAVE_CUDA; }
