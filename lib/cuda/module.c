/* The CUDA module's side of lib/cuda/module.h: its one exported function,
 * and the functions of brigade that its code calls by name, each passing
 * the call on to brigade through the host table. */
#include <nvtx3/nvToolsExt.h>

#include <stdarg.h>
#include <stdio.h>

#include "module.h"

static const bg_cuda_host_t *host;

/* The message is formatted here and handed over whole, as a variadic call
 * cannot be passed on. */
bg_status_t bg_error_set(bg_status_t status, const char *format, ...) {
    char message[BG_ERROR_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    return host->error_set(status, "%s", message);
}

void bg_error_clear(void) { host->error_clear(); }

bg_status_t bg_arena_reserve(bg_arena_t *arena, size_t bytes, void **dst) {
    return host->arena_reserve(arena, bytes, dst);
}

static const bg_cuda_module_t functions = {
    .backend_create = bg_backend_cuda_create,
    .device_count = bg_cuda_device_count,
    .no_device_reason = bg_cuda_no_device_reason,
    .device_info = bg_cuda_device_info,
    .peer_rank = bg_cuda_peer_rank,
    .backend_is_cuda = bg_backend_is_cuda,
    .slot_create = bg_cuda_slot_create,
    .slot_destroy = bg_cuda_slot_destroy,
    .slot_fill = bg_cuda_slot_fill,
    .slot_wait_read = bg_cuda_slot_wait_read,
    .slot_drain = bg_cuda_slot_drain,
    .enable_peer_access = bg_cuda_enable_peer_access,
    .clock_create = bg_cuda_clock_create,
    .clock_destroy = bg_cuda_clock_destroy,
    .clock_restart = bg_cuda_clock_restart,
    .clock_mark = bg_cuda_clock_mark,
    .clock_seconds = bg_cuda_clock_seconds,
    .nvtx_push_op = bg_nvtx_push_op,
    .nvtx_pop = bg_nvtx_pop,
};

__attribute__((visibility("default"))) const bg_cuda_module_t *
bg_cuda_module_open(const bg_cuda_host_t *brigade, unsigned long long abi) {
    if (abi != bg_cuda_module_abi() || brigade == NULL) return NULL;
    host = brigade;
    /* NVTX sets itself up on its first call, and the stage threads' first
     * ranges may come at once: set it up here, on the thread that loads
     * the module, before any of them can see the module's table (the
     * loader publishes it with a release store). */
    nvtxInitialize(NULL);
    return &functions;
}
