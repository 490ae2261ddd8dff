/* The CPU backend's single-precision ops (what training runs). */
#include <cblas.h>

#include "backend_cpu_impl.h"

#define REAL         float
#define UREAL        uint32_t
#define KERNEL(name) name##_f32
#define GEMM         cblas_sgemm
#define SQRT         sqrtf
#define EXP          expf
#define TANH         tanhf
#define ERFC         erfcf
#define OPS_TABLE    bg_cpu_ops_f32

#include "kernels.inc"
#include "ops_table.inc"
