#include "optimizer.h"

#include <math.h>
#include <string.h>

bg_status_t bg_optimizer_kind_parse(const char *text, bg_optimizer_kind_t *out) {
    if (strcmp(text, "sgd") == 0) {
        *out = BG_OPTIMIZER_SGD;
        return BG_OK;
    }
    if (strcmp(text, "adam") == 0) {
        *out = BG_OPTIMIZER_ADAM;
        return BG_OK;
    }
    return bg_error_set(BG_ERR_INVALID, "unknown optimizer '%s' (expected sgd or adam)", text);
}

const char *bg_optimizer_kind_name(bg_optimizer_kind_t kind) {
    return kind == BG_OPTIMIZER_SGD ? "sgd" : "adam";
}

int bg_optimizer_state_buffers(const bg_optimizer_config_t *cfg) {
    if (cfg->kind == BG_OPTIMIZER_ADAM) return 2;
    return cfg->sgd.momentum != 0 ? 1 : 0;
}

void bg_optimizer_set_lr(bg_optimizer_config_t *cfg, double lr) {
    if (cfg->kind == BG_OPTIMIZER_ADAM)
        cfg->adam.lr = lr;
    else
        cfg->sgd.lr = lr;
}

bg_status_t bg_lr_schedule_kind_parse(const char *text, bg_lr_schedule_kind_t *out) {
    static const bg_lr_schedule_kind_t kinds[] = {BG_LR_CONSTANT, BG_LR_COSINE, BG_LR_LINEAR};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(text, bg_lr_schedule_kind_name(kinds[i])) == 0) {
            *out = kinds[i];
            return BG_OK;
        }
    }
    return bg_error_set(BG_ERR_INVALID,
                        "unknown learning-rate schedule '%s' (expected constant, cosine or linear)",
                        text);
}

const char *bg_lr_schedule_kind_name(bg_lr_schedule_kind_t kind) {
    switch (kind) {
    case BG_LR_CONSTANT: return "constant";
    case BG_LR_COSINE: return "cosine";
    case BG_LR_LINEAR: return "linear";
    }
    return "unknown";
}

double bg_optimizer_lr(const bg_optimizer_config_t *cfg) {
    return cfg->kind == BG_OPTIMIZER_ADAM ? cfg->adam.lr : cfg->sgd.lr;
}

double bg_optimizer_lr_at(const bg_optimizer_config_t *cfg, int64_t step) {
    const double lr = bg_optimizer_lr(cfg);
    const bg_lr_schedule_t *s = &cfg->schedule;
    if (s->warmup_steps > 0 && step <= s->warmup_steps)
        return lr * (double)step / (double)s->warmup_steps;
    if (s->kind == BG_LR_CONSTANT) return lr;
    const int64_t decay = s->total_steps - s->warmup_steps, done = step - s->warmup_steps - 1;
    if (decay < 1 || done >= decay) return s->min_lr;
    const double left = s->kind == BG_LR_COSINE ? (1 + cos(M_PI * (double)done / (double)decay)) / 2
                                                : 1 - (double)done / (double)decay;
    return s->min_lr + (lr - s->min_lr) * left;
}

bg_status_t bg_optimizer_update(const bg_optimizer_config_t *cfg, bg_backend_t *be, int64_t step,
                                int64_t count, void *param, const void *grad, void *const *state) {
    if (step < 1) return bg_error_set(BG_ERR_INTERNAL, "optimizer step %lld < 1", (long long)step);
    const double lr = bg_optimizer_lr_at(cfg, step);
    if (!isfinite(lr) || lr < 0)
        return bg_error_set(BG_ERR_INVALID, "learning rate must be finite and >= 0, got %g", lr);
    if (cfg->kind == BG_OPTIMIZER_ADAM) {
        bg_adam_config_t adam = cfg->adam;
        adam.lr = lr;
        return be->ops->adam_update(be, count, param, grad, state[0], state[1], &adam, step);
    }
    bg_sgd_config_t sgd = cfg->sgd;
    sgd.lr = lr;
    return be->ops->sgd_update(be, count, param, grad,
                               bg_optimizer_state_buffers(cfg) > 0 ? state[0] : NULL, &sgd, step);
}
