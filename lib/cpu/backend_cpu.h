/* The CPU backend: the numerical reference for every other backend, and a
 * real device for pipelines (each CPU device is driven by its own thread).
 * GEMMs go through OpenBLAS; everything else is plain loops. */
#ifndef BG_BACKEND_CPU_H
#define BG_BACKEND_CPU_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_cpu_config {
    bg_dtype_t dtype; /* BG_F32 for training, BG_F64 for gradient checks */
    int index;        /* device number, used in the name "cpu:<index>" */
} bg_cpu_config_t;

#define BG_CPU_CONFIG_INIT                                                                         \
    { .dtype = BG_F32, .index = 0 }

/* Creates a CPU backend. Not thread-safe: one thread drives one backend.
 * Sets OpenBLAS to one thread (a CPU device is one core), and the calling
 * thread to flush subnormal floats to 0, which the threads it starts later
 * inherit: so a backend's ops flush on the thread that created it and on
 * threads started after (the pipeline starts its device threads after it
 * creates their backends). */
bg_status_t bg_backend_cpu_create(const bg_cpu_config_t *cfg, bg_backend_t **out);

#ifdef __cplusplus
}
#endif

#endif /* BG_BACKEND_CPU_H */
