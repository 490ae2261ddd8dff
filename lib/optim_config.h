/* Optimizer hyper-parameters, with PyTorch's defaults as initializers. */
#ifndef BG_OPTIM_CONFIG_H
#define BG_OPTIM_CONFIG_H

#ifdef __cplusplus
extern "C" {
#endif

/* torch.optim.SGD: g += weight_decay * p; buf = momentum * buf +
 * (1 - dampening) * g (buf = g on the first step); g = nesterov ?
 * g + momentum * buf : buf; p -= lr * g. */
typedef struct bg_sgd_config {
    double lr;
    double momentum;
    double dampening;
    double weight_decay;
    int nesterov;
} bg_sgd_config_t;

#define BG_SGD_CONFIG_INIT                                                                         \
    { .lr = 0.01, .momentum = 0.0, .dampening = 0.0, .weight_decay = 0.0, .nesterov = 0 }

/* torch.optim.Adam (L2 weight decay added to the gradient, not AdamW):
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
typedef struct bg_adam_config {
    double lr;
    double beta1;
    double beta2;
    double eps;
    double weight_decay;
} bg_adam_config_t;

#define BG_ADAM_CONFIG_INIT                                                                        \
    { .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0 }

#ifdef __cplusplus
}
#endif

#endif /* BG_OPTIM_CONFIG_H */
