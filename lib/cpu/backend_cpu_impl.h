/* Internal to the CPU backend: the memory ops shared by both element types
 * and the two ops tables. */
#ifndef BG_BACKEND_CPU_IMPL_H
#define BG_BACKEND_CPU_IMPL_H

#include "../backend.h"

void bg_cpu_destroy(bg_backend_t *be);
bg_status_t bg_cpu_alloc(bg_backend_t *be, size_t bytes, void **out);
void bg_cpu_free(bg_backend_t *be, void *ptr);
bg_status_t bg_cpu_transfer(bg_backend_t *be, void *dst, const void *src, size_t bytes);
bg_status_t bg_cpu_synchronize(bg_backend_t *be);
/* The non-finite mark (backend.h, mark_nonfinite): lowered to `tag` by a
 * scan that found a NaN or Inf; read and cleared by take. */
void bg_cpu_lower_nonfinite_mark(bg_backend_t *be, int tag);
bg_status_t bg_cpu_take_nonfinite(bg_backend_t *be, int *tag);
/* The loss totals (backend.h, softmax_xent_forward_add, take_loss). */
void bg_cpu_add_loss(bg_backend_t *be, double loss_sum, int64_t correct);
bg_status_t bg_cpu_take_loss(bg_backend_t *be, double *loss_sum, int64_t *correct);

extern const bg_backend_ops_t bg_cpu_ops_f32;
extern const bg_backend_ops_t bg_cpu_ops_f64;

#endif /* BG_BACKEND_CPU_IMPL_H */
