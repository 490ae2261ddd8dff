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

/* How the learning rate moves over a run, by optimizer step t = 1, 2, ...
 * (the steps taken, a skipped one not counted). With warmup W, steps 1..W
 * take lr * t / W. After it, with e = t - W - 1 steps of decay behind and
 * D = total_steps - W of them in all: constant keeps lr; cosine takes
 * min_lr + (lr - min_lr) (1 + cos(pi e / D)) / 2, PyTorch's
 * CosineAnnealingLR(T_max = D, eta_min = min_lr) stepped after each
 * optimizer step; linear takes lr - (lr - min_lr) e / D. Past
 * total_steps, or with D < 1, min_lr (constant: lr). */
typedef enum bg_lr_schedule_kind {
    BG_LR_CONSTANT,
    BG_LR_COSINE,
    BG_LR_LINEAR,
} bg_lr_schedule_kind_t;

typedef struct bg_lr_schedule {
    bg_lr_schedule_kind_t kind;
    int64_t warmup_steps;
    int64_t total_steps; /* the run's last step, where the decay ends */
    double min_lr;
} bg_lr_schedule_t;

#define BG_LR_SCHEDULE_INIT                                                                        \
    { .kind = BG_LR_CONSTANT, .warmup_steps = 0, .total_steps = 0, .min_lr = 0.0 }

#ifdef __cplusplus
}
#endif

#endif /* BG_OPTIM_CONFIG_H */
