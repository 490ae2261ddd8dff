/* The CUDA API in a build without CUDA (-Dcuda=disabled, or no nvcc): the
 * rest of brigade calls it unconditionally and is told there is nothing. */
#include "backend_cuda.h"

bg_status_t bg_backend_cuda_create(const bg_cuda_config_t *cfg, bg_backend_t **out) {
    (void)out;
    return bg_error_set(BG_ERR_UNSUPPORTED,
                        "cuda:%d: this build has no CUDA backend (configure with -Dcuda=enabled "
                        "on a machine with nvcc)",
                        cfg->device);
}

int bg_cuda_device_count(void) { return 0; }

bg_status_t bg_cuda_device_info(int device, bg_cuda_device_info_t *out) {
    (void)out;
    return bg_error_set(BG_ERR_INVALID, "cuda:%d: no such GPU (this build has no CUDA backend)",
                        device);
}

int bg_cuda_peer_rank(int a, int b) {
    (void)a;
    (void)b;
    return -1;
}

void bg_nvtx_push_op(const char *kind, int microbatch, int stage) {
    (void)kind;
    (void)microbatch;
    (void)stage;
}

void bg_nvtx_pop(void) {}

int bg_backend_is_cuda(const bg_backend_t *be) {
    (void)be;
    return 0;
}

bg_status_t bg_cuda_slot_create(bg_backend_t *receiver, size_t bytes, void *staging,
                                bg_arena_t *arena, int lane, bg_cuda_slot_t **out) {
    (void)bytes;
    (void)staging;
    (void)arena;
    (void)lane;
    (void)out;
    return bg_error_set(BG_ERR_UNSUPPORTED, "%s: this build has no CUDA backend", receiver->name);
}

void bg_cuda_slot_destroy(bg_cuda_slot_t *slot) { (void)slot; }

bg_status_t bg_cuda_slot_fill(bg_cuda_slot_t *slot, bg_backend_t *sender, const void *src,
                              size_t bytes, bg_cuda_clock_t *link, bg_cuda_clock_t *leg1,
                              int marks[2]) {
    (void)slot;
    (void)src;
    (void)bytes;
    (void)link;
    (void)leg1;
    if (marks != NULL) marks[0] = marks[1] = -1;
    return bg_error_set(BG_ERR_UNSUPPORTED, "%s: this build has no CUDA backend", sender->name);
}

bg_status_t bg_cuda_slot_wait_read(bg_cuda_slot_t *slot, bg_backend_t *sender) {
    (void)slot;
    return bg_error_set(BG_ERR_UNSUPPORTED, "%s: this build has no CUDA backend", sender->name);
}

bg_status_t bg_cuda_slot_drain(bg_cuda_slot_t *slot, void *dst, size_t bytes,
                               bg_cuda_clock_t *clock, int *arrived) {
    (void)slot;
    (void)dst;
    (void)bytes;
    (void)clock;
    if (arrived != NULL) *arrived = -1;
    return bg_error_set(BG_ERR_UNSUPPORTED, "this build has no CUDA backend");
}

bg_status_t bg_cuda_enable_peer_access(bg_backend_t *a, bg_backend_t *b, int *direct) {
    (void)b;
    *direct = 0;
    return bg_error_set(BG_ERR_UNSUPPORTED, "%s: this build has no CUDA backend", a->name);
}

bg_status_t bg_cuda_clock_create(bg_backend_t *be, int lane, int capacity, bg_cuda_clock_t **out) {
    (void)lane;
    (void)capacity;
    (void)out;
    return bg_error_set(BG_ERR_UNSUPPORTED, "%s: this build has no CUDA backend", be->name);
}

void bg_cuda_clock_destroy(bg_cuda_clock_t *clock) { (void)clock; }

bg_status_t bg_cuda_clock_restart(bg_cuda_clock_t *clock, double *host_zero) {
    (void)clock;
    (void)host_zero;
    return bg_error_set(BG_ERR_UNSUPPORTED, "this build has no CUDA backend");
}

int bg_cuda_clock_mark(bg_cuda_clock_t *clock) {
    (void)clock;
    return -1;
}

bg_status_t bg_cuda_clock_seconds(bg_cuda_clock_t *clock, int index, double *out) {
    (void)clock;
    (void)index;
    (void)out;
    return bg_error_set(BG_ERR_UNSUPPORTED, "this build has no CUDA backend");
}
