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

bg_status_t bg_optimizer_update(const bg_optimizer_config_t *cfg, bg_backend_t *be, int64_t step,
                                int64_t count, void *param, const void *grad, void *const *state) {
    double lr = cfg->kind == BG_OPTIMIZER_ADAM ? cfg->adam.lr : cfg->sgd.lr;
    if (!isfinite(lr) || lr < 0)
        return bg_error_set(BG_ERR_INVALID, "learning rate must be finite and >= 0, got %g", lr);
    if (step < 1) return bg_error_set(BG_ERR_INTERNAL, "optimizer step %lld < 1", (long long)step);
    if (cfg->kind == BG_OPTIMIZER_ADAM)
        return be->ops->adam_update(be, count, param, grad, state[0], state[1], &cfg->adam, step);
    return be->ops->sgd_update(be, count, param, grad,
                               bg_optimizer_state_buffers(cfg) > 0 ? state[0] : NULL, &cfg->sgd,
                               step);
}
