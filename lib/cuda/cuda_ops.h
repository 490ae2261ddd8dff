/* Internal to the CUDA backend: the functions behind its ops table, one per
 * entry of bg_backend_ops_t with the same arguments (lib/backend.h documents
 * shapes and semantics; the CPU reference of each is in lib/cpu/kernels.inc).
 * Plain C without CUDA types, so that the table itself (ops_table.c) is C
 * with designated initializers. Tensors are device float arrays. */
#ifndef BG_CUDA_OPS_H
#define BG_CUDA_OPS_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const bg_backend_ops_t bg_cuda_ops_f32;

/* backend_cuda.cu: lifetime, memory, synchronization */
void bg_cuda_destroy(bg_backend_t *be);
bg_status_t bg_cuda_alloc(bg_backend_t *be, size_t bytes, void **out);
void bg_cuda_free(bg_backend_t *be, void *ptr);
bg_status_t bg_cuda_upload(bg_backend_t *be, void *dst, const void *host_src, size_t bytes);
bg_status_t bg_cuda_host_alloc(bg_backend_t *be, size_t bytes, void **out);
void bg_cuda_host_free(bg_backend_t *be, void *ptr);
bg_status_t bg_cuda_upload_async(bg_backend_t *be, void *dst, const void *host_src, size_t bytes);
bg_status_t bg_cuda_download(bg_backend_t *be, void *host_dst, const void *src, size_t bytes);
bg_status_t bg_cuda_synchronize(bg_backend_t *be);

/* elementwise.cu */
/* x: (n) */
bg_status_t bg_cuda_zero(bg_backend_t *be, void *x, int64_t n);
/* dst, src: (n) */
bg_status_t bg_cuda_copy(bg_backend_t *be, void *dst, const void *src, int64_t n);
/* x: (n) */
bg_status_t bg_cuda_scale(bg_backend_t *be, void *x, int64_t n, double alpha);
/* a, b, y: (count) */
bg_status_t bg_cuda_add(bg_backend_t *be, int64_t count, const void *a, const void *b, void *y);
/* x, y: (count) */
bg_status_t bg_cuda_relu_forward(bg_backend_t *be, int64_t count, const void *x, void *y);
/* y, dy, dx: (count) */
bg_status_t bg_cuda_relu_backward(bg_backend_t *be, int64_t count, const void *y, const void *dy,
                                  void *dx);
/* activation.cu: x, y, dy, dx: (count) */
bg_status_t bg_cuda_activation_forward(bg_backend_t *be, bg_activation_t f, int64_t count,
                                       const void *x, void *y);
bg_status_t bg_cuda_activation_backward(bg_backend_t *be, bg_activation_t f, int64_t count,
                                        const void *x, const void *y, const void *dy, void *dx);
/* dropout.cu: x, y: (n, features) */
bg_status_t bg_cuda_dropout(bg_backend_t *be, const bg_dropout_mask_t *mask, int64_t n,
                            int64_t features, const void *x, void *y);
/* layernorm.cu: x, y, dy, dx: (n, features) gamma, beta, dgamma, dbeta:
 * (features); the weights' backward uses 2n floats of workspace */
bg_status_t bg_cuda_layernorm_forward(bg_backend_t *be, int64_t n, int64_t features, const void *x,
                                      const void *gamma, const void *beta, void *y,
                                      void *workspace);
bg_status_t bg_cuda_layernorm_backward_data(bg_backend_t *be, int64_t n, int64_t features,
                                            const void *x, const void *gamma, const void *dy,
                                            void *dx, void *workspace);
bg_status_t bg_cuda_layernorm_backward_weights(bg_backend_t *be, int64_t n, int64_t features,
                                               const void *x, const void *dy, void *dgamma,
                                               void *dbeta, void *workspace);
/* param, grad, velocity: (count) */
bg_status_t bg_cuda_sgd_update(bg_backend_t *be, int64_t count, void *param, const void *grad,
                               void *velocity, const bg_sgd_config_t *cfg, int64_t step);
/* param, grad, m, v: (count) */
bg_status_t bg_cuda_adam_update(bg_backend_t *be, int64_t count, void *param, const void *grad,
                                void *m, void *v, const bg_adam_config_t *cfg, int64_t step);
/* x: (count) */
/* x: (count); waits for the device */
bg_status_t bg_cuda_square_sum(bg_backend_t *be, int64_t count, const void *x, double *out);
bg_status_t bg_cuda_all_finite(bg_backend_t *be, int64_t count, const void *x, int *out);
bg_status_t bg_cuda_mark_nonfinite(bg_backend_t *be, int64_t count, const void *x, int tag);
bg_status_t bg_cuda_take_nonfinite(bg_backend_t *be, int *tag);

/* conv_cudnn.cu */
bg_status_t bg_cuda_conv2d_workspace_bytes(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                           size_t *bytes);
/* x: (n,c,h,w) w: (f,c,k,k) b: (f) y: (n,f,oh,ow) */
bg_status_t bg_cuda_conv2d_forward(bg_backend_t *be, const bg_conv2d_geometry_t *g, const void *x,
                                   const void *w, const void *b, void *y, void *workspace);
/* The same, then relu over y in the bias's pass. */
bg_status_t bg_cuda_conv2d_relu_forward(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                        const void *x, const void *w, const void *b, void *y,
                                        void *workspace);
/* dy: (n,f,oh,ow) w: (f,c,k,k) dx: (n,c,h,w) */
bg_status_t bg_cuda_conv2d_backward_data(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                         const void *dy, const void *w, void *dx, void *workspace);
/* x: (n,c,h,w) dy: (n,f,oh,ow) dw: (f,c,k,k) db: (f) */
bg_status_t bg_cuda_conv2d_backward_weights(bg_backend_t *be, const bg_conv2d_geometry_t *g,
                                            const void *x, const void *dy, void *dw, void *db,
                                            void *workspace);

/* dense_cublas.cu */
/* x: (n, in) w: (out, in) b: (out) y: (n, out) */
bg_status_t bg_cuda_dense_forward(bg_backend_t *be, int64_t n, int64_t in, int64_t out,
                                  const void *x, const void *w, const void *b, void *y);
/* dy: (n, out) w: (out, in) dx: (n, in) */
bg_status_t bg_cuda_dense_backward_data(bg_backend_t *be, int64_t n, int64_t in, int64_t out,
                                        const void *dy, const void *w, void *dx);
/* x: (n, in) dy: (n, out) dw: (out, in) db: (out) */
bg_status_t bg_cuda_dense_backward_weights(bg_backend_t *be, int64_t n, int64_t in, int64_t out,
                                           const void *x, const void *dy, void *dw, void *db);

/* pool.cu; x, dx: (n,c,h,w) y, dy: (n,c,oh,ow) */
bg_status_t bg_cuda_maxpool_forward(bg_backend_t *be, const bg_pool_geometry_t *g, const void *x,
                                    void *y);
bg_status_t bg_cuda_maxpool_backward(bg_backend_t *be, const bg_pool_geometry_t *g, const void *x,
                                     const void *y, const void *dy, void *dx);
bg_status_t bg_cuda_maxpool_relu_backward(bg_backend_t *be, const bg_pool_geometry_t *g,
                                          const void *x, const void *y, const void *dy, void *dx);
bg_status_t bg_cuda_avgpool_forward(bg_backend_t *be, const bg_pool_geometry_t *g, const void *x,
                                    void *y);
bg_status_t bg_cuda_avgpool_backward(bg_backend_t *be, const bg_pool_geometry_t *g, const void *dy,
                                     void *dx);

/* softmax_xent.cu; logits, probs, dlogits: (n, classes) labels: (n) */
bg_status_t bg_cuda_softmax_xent_forward(bg_backend_t *be, int64_t n, int64_t classes,
                                         const void *logits, const int32_t *labels, void *probs,
                                         double *loss_sum, int64_t *correct);
bg_status_t bg_cuda_softmax_xent_forward_add(bg_backend_t *be, int64_t n, int64_t classes,
                                             const void *logits, const int32_t *labels, void *probs,
                                             int add, int tag);
bg_status_t bg_cuda_take_loss(bg_backend_t *be, double *loss_sum, int64_t *correct);
bg_status_t bg_cuda_softmax_xent_reserve(bg_backend_t *be, int64_t rows);
bg_status_t bg_cuda_softmax_xent_backward(bg_backend_t *be, int64_t n, int64_t classes,
                                          const void *probs, const int32_t *labels, double scale,
                                          void *dlogits);

#ifdef __cplusplus
}
#endif

#endif /* BG_CUDA_OPS_H */
