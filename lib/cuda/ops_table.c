/* The CUDA backend's ops table, in C for its designated initializers; the
 * functions live in the .cu files named in cuda_ops.h. */
#include "cuda_ops.h"

const bg_backend_ops_t bg_cuda_ops_f32 = {
    .destroy = bg_cuda_destroy,
    .alloc = bg_cuda_alloc,
    .free = bg_cuda_free,
    .upload = bg_cuda_upload,
    .download = bg_cuda_download,
    .synchronize = bg_cuda_synchronize,
    .zero = bg_cuda_zero,
    .copy = bg_cuda_copy,
    .scale = bg_cuda_scale,
    .conv2d_workspace_bytes = bg_cuda_conv2d_workspace_bytes,
    .conv2d_forward = bg_cuda_conv2d_forward,
    .conv2d_backward_data = bg_cuda_conv2d_backward_data,
    .conv2d_backward_weights = bg_cuda_conv2d_backward_weights,
    .dense_forward = bg_cuda_dense_forward,
    .dense_backward_data = bg_cuda_dense_backward_data,
    .dense_backward_weights = bg_cuda_dense_backward_weights,
    .relu_forward = bg_cuda_relu_forward,
    .relu_backward = bg_cuda_relu_backward,
    .maxpool_forward = bg_cuda_maxpool_forward,
    .maxpool_backward = bg_cuda_maxpool_backward,
    .avgpool_forward = bg_cuda_avgpool_forward,
    .avgpool_backward = bg_cuda_avgpool_backward,
    .softmax_xent_forward = bg_cuda_softmax_xent_forward,
    .softmax_xent_backward = bg_cuda_softmax_xent_backward,
    .sgd_update = bg_cuda_sgd_update,
    .adam_update = bg_cuda_adam_update,
    .all_finite = bg_cuda_all_finite,
};
