/* Optimizers: which update rule, its hyper-parameters, and the per-parameter
 * state it needs. The update itself is a backend op (sgd_update, adam_update)
 * so it runs where the parameters live. */
#ifndef BG_OPTIMIZER_H
#define BG_OPTIMIZER_H

#include "backend.h"
#include "optim_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bg_optimizer_kind { BG_OPTIMIZER_SGD, BG_OPTIMIZER_ADAM } bg_optimizer_kind_t;

typedef struct bg_optimizer_config {
    bg_optimizer_kind_t kind;
    bg_sgd_config_t sgd;
    bg_adam_config_t adam;
    bg_lr_schedule_t schedule; /* moves the rule's lr by step */
} bg_optimizer_config_t;

#define BG_OPTIMIZER_CONFIG_INIT                                                                   \
    {                                                                                              \
        .kind = BG_OPTIMIZER_ADAM, .sgd = BG_SGD_CONFIG_INIT, .adam = BG_ADAM_CONFIG_INIT,         \
        .schedule = BG_LR_SCHEDULE_INIT                                                            \
    }

/* Parses "sgd" or "adam"; BG_ERR_INVALID otherwise. */
bg_status_t bg_optimizer_kind_parse(const char *text, bg_optimizer_kind_t *out);

const char *bg_optimizer_kind_name(bg_optimizer_kind_t kind);

/* State buffers per parameter buffer: SGD with momentum 1 (velocity), SGD
 * without momentum 0, Adam 2 (m, v). */
int bg_optimizer_state_buffers(const bg_optimizer_config_t *cfg);

/* Sets, and gives, the learning rate of whichever rule cfg->kind selects
 * (before any schedule moves it). */
void bg_optimizer_set_lr(bg_optimizer_config_t *cfg, double lr);
double bg_optimizer_lr(const bg_optimizer_config_t *cfg);

/* The learning rate of optimizer step `step` (1, 2, ...): the rule's lr as
 * cfg->schedule moves it. */
double bg_optimizer_lr_at(const bg_optimizer_config_t *cfg, int64_t step);

/* Parses "constant", "cosine" or "linear"; BG_ERR_INVALID otherwise. */
bg_status_t bg_lr_schedule_kind_parse(const char *text, bg_lr_schedule_kind_t *out);

const char *bg_lr_schedule_kind_name(bg_lr_schedule_kind_t kind);

/* Applies one update to `count` parameters, at step `step`'s learning rate
 * (bg_optimizer_lr_at). `state` holds bg_optimizer_state_buffers(cfg)
 * buffers of `count` elements, zero before step 1. Rejects a non-finite or
 * negative learning rate (BG_ERR_INVALID). */
bg_status_t bg_optimizer_update(const bg_optimizer_config_t *cfg, bg_backend_t *be, int64_t step,
                                int64_t count, void *param, const void *grad, void *const *state);

#ifdef __cplusplus
}
#endif

#endif /* BG_OPTIMIZER_H */
