/* The seam between brigade and its CUDA backend, which is a module of its
 * own (libbrigade-cuda.so) that brigade loads with dlopen the first time
 * something asks for a GPU (lib/cuda/loader.c). Loading cuBLAS costs some
 * 210 MiB of peak resident memory and a fifth of a second before main()
 * runs (docs/cuda.md); a command on CPU devices now pays neither, and the
 * programs of a CUDA build no longer need the CUDA libraries to start.
 *
 * The module exports one function, bg_cuda_module_open(): given the few
 * functions of brigade that it calls (the host table), it returns the table
 * of its own, one entry per function of backend_cuda.h, which the loader's
 * functions of the same names call through, once both agree on
 * bg_cuda_module_abi(). Every other symbol of the
 * module is local to it (lib/cuda/module.map). */
#ifndef BG_CUDA_MODULE_H
#define BG_CUDA_MODULE_H

#include "arena.h"
#include "backend.h"
#include "backend_cuda.h"
#include "optim_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever either table changes. */
#define BG_CUDA_MODULE_VERSION 2

/* The module's file name, found beside the lib folder of the build or
 * install (loader.c says where it looks). */
#define BG_CUDA_MODULE_FILE "libbrigade-cuda.so"

/* What the module calls in brigade: the thread's error message lives in
 * brigade (lib/status.c), and the arenas are brigade's. */
typedef struct bg_cuda_host {
    bg_status_t (*error_set)(bg_status_t status, const char *format, ...);
    void (*error_clear)(void);
    bg_status_t (*arena_reserve)(bg_arena_t *arena, size_t bytes, void **dst);
} bg_cuda_host_t;

/* The module's functions, as backend_cuda.h declares them. */
typedef struct bg_cuda_module {
    bg_status_t (*backend_create)(const bg_cuda_config_t *cfg, bg_backend_t **out);
    int (*device_count)(void);
    const char *(*no_device_reason)(void);
    bg_status_t (*device_info)(int device, bg_cuda_device_info_t *out);
    int (*peer_rank)(int a, int b);
    int (*backend_is_cuda)(const bg_backend_t *be);
    bg_status_t (*slot_create)(bg_backend_t *receiver, size_t bytes, void *staging,
                               bg_arena_t *arena, int lane, bg_cuda_slot_t **out);
    void (*slot_destroy)(bg_cuda_slot_t *slot);
    bg_status_t (*slot_fill)(bg_cuda_slot_t *slot, bg_backend_t *sender, const void *src,
                             size_t bytes, bg_cuda_clock_t *link, bg_cuda_clock_t *leg1,
                             int marks[2]);
    bg_status_t (*slot_wait_read)(bg_cuda_slot_t *slot, bg_backend_t *sender);
    bg_status_t (*slot_drain)(bg_cuda_slot_t *slot, void **dst, size_t bytes, size_t capacity,
                              bg_cuda_clock_t *clock, int *arrived);
    bg_status_t (*enable_peer_access)(bg_backend_t *a, bg_backend_t *b, int *direct);
    bg_status_t (*clock_create)(bg_backend_t *be, int lane, int capacity, bg_cuda_clock_t **out);
    void (*clock_destroy)(bg_cuda_clock_t *clock);
    bg_status_t (*clock_restart)(bg_cuda_clock_t *clock, double *host_zero);
    int (*clock_mark)(bg_cuda_clock_t *clock);
    bg_status_t (*clock_seconds)(bg_cuda_clock_t *clock, int index, double *out);
    void (*nvtx_push_op)(const char *kind, int microbatch, int stage);
    void (*nvtx_pop)(void);
} bg_cuda_module_t;

/* What both sides must agree on: the tables' version and the sizes of the
 * structures they pass or share (the tables, the backend and its
 * geometries, the optimizers' settings, the arena). Any difference means a
 * module from another build of brigade, which is refused instead of called
 * wrongly (a change that keeps every size is caught only by raising the
 * version). */
static inline unsigned long long bg_cuda_module_abi(void) {
    const unsigned long long sizes[] = {
        sizeof(bg_backend_ops_t),      sizeof(bg_backend_t),       sizeof(bg_cuda_config_t),
        sizeof(bg_cuda_device_info_t), sizeof(bg_cuda_module_t),   sizeof(bg_cuda_host_t),
        sizeof(bg_conv2d_geometry_t),  sizeof(bg_pool_geometry_t), sizeof(bg_adam_config_t),
        sizeof(bg_sgd_config_t),       sizeof(bg_arena_t),
    };
    unsigned long long abi = BG_CUDA_MODULE_VERSION;
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        abi = abi * 1000003ULL ^ sizes[i]; /* a prime: sizes in order, not a sum */
    return abi;
}

/* The module's one exported function. NULL when `abi` is not the module's
 * bg_cuda_module_abi(). */
typedef const bg_cuda_module_t *(*bg_cuda_module_open_fn)(const bg_cuda_host_t *host,
                                                          unsigned long long abi);
#define BG_CUDA_MODULE_OPEN "bg_cuda_module_open"

#ifdef __cplusplus
}
#endif

#endif /* BG_CUDA_MODULE_H */
