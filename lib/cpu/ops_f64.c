/* The CPU backend's double-precision ops, the reference that gradient checks
 * compare against finite differences. */
#include <cblas.h>

#include "backend_cpu_impl.h"

#define REAL         double
#define UREAL        uint64_t
#define KERNEL(name) name##_f64
#define GEMM         cblas_dgemm
#define SQRT         sqrt
#define EXP          exp
#define TANH         tanh
#define ERFC         erfc
#define OPS_TABLE    bg_cpu_ops_f64

#include "kernels.inc"
#include "ops_table.inc"
