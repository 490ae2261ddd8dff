#include "train_state.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "byte_order.h"
#include "checkpoint.h"
#include "model_words.h"
#include "train.h"
#include "parse.h"

enum { STATE_NAME = 64 };

/* The whole-number metadata of a training state that is an int64_t field
 * of bg_train_state_t, written and read through this one list. `later`:
 * added after the first format, so older checkpoints may lack it (read as
 * 0). `least`: the smallest value a checkpoint may give. brigade.epoch (an
 * int, range-checked) is read apart. */
typedef struct count_field {
    const char *key;
    size_t offset; /* of the field in bg_train_state_t */
    int later;
    int least;
} count_field_t;

static const count_field_t count_fields[] = {
    {"brigade.step", offsetof(bg_train_state_t, step), 0, 0},
    {"brigade.optimizer_steps", offsetof(bg_train_state_t, optimizer_steps), 0, 0},
    {"brigade.position", offsetof(bg_train_state_t, position), 0, 0},
    {"brigade.batch", offsetof(bg_train_state_t, batch), 1, 1},
    {"brigade.train_samples", offsetof(bg_train_state_t, train_samples), 1, 1},
    {"brigade.epoch_steps", offsetof(bg_train_state_t, epoch_steps), 1, 0},
    {"brigade.skipped_steps", offsetof(bg_train_state_t, skipped_steps), 1, 0},
};
enum { COUNT_FIELDS = sizeof count_fields / sizeof count_fields[0] };

static int64_t *count_of(bg_train_state_t *st, const count_field_t *f) {
    return (int64_t *)(void *)((char *)st + f->offset);
}

static int64_t count_value(const bg_train_state_t *st, const count_field_t *f) {
    return *(const int64_t *)(const void *)((const char *)st + f->offset);
}

static const char *state_name(bg_optimizer_kind_t kind, int k) {
    if (kind == BG_OPTIMIZER_ADAM) return k == 0 ? "m" : "v";
    return "momentum";
}

bg_status_t bg_train_state_init(bg_train_state_t *st, const bg_model_spec_t *spec,
                                const bg_optimizer_config_t *optimizer) {
    memset(st, 0, sizeof *st);
    st->optimizer = optimizer->kind;
    st->states = bg_optimizer_state_buffers(optimizer);
    st->params_count = spec->total_params;
    size_t bytes = sizeof(float) * (size_t)(spec->total_params > 0 ? spec->total_params : 1);
    st->params = malloc(bytes);
    for (int k = 0; k < st->states; k++) st->state[k] = malloc(bytes);
    if (st->params == NULL || (st->states > 0 && st->state[0] == NULL) ||
        (st->states > 1 && st->state[1] == NULL)) {
        bg_train_state_free(st);
        return bg_error_set(BG_ERR_NOMEM, "training state: out of memory");
    }
    return BG_OK;
}

void bg_train_state_free(bg_train_state_t *st) {
    free(st->params);
    free(st->state[0]);
    free(st->state[1]);
    st->params = st->state[0] = st->state[1] = NULL;
}

bg_status_t bg_train_state_save(const char *path, const bg_model_spec_t *spec,
                                const bg_train_state_t *st) {
    bg_checkpoint_tensor_t *model = NULL;
    int count = 0;
    BG_CHECK(bg_checkpoint_model_tensors(spec, &model, &count));
    const int total = count * (1 + st->states);
    bg_safetensors_tensor_t *tensors = calloc((size_t)total + 1, sizeof *tensors);
    char(*names)[STATE_NAME] = calloc((size_t)total + 1, sizeof *names);
    char *layers = bg_model_spec_words(spec);
    bg_status_t status = BG_OK;
    if (tensors == NULL || names == NULL || layers == NULL) {
        status = bg_error_set(BG_ERR_NOMEM, "training state: out of memory");
        goto done;
    }
    for (int k = -1, at = 0; k < st->states; k++) {
        for (int i = 0; i < count; i++, at++) {
            const float *base = k < 0 ? st->params : st->state[k];
            if (k < 0)
                snprintf(names[at], STATE_NAME, "%s", model[i].name);
            else
                snprintf(names[at], STATE_NAME, "optimizer.%s.%s", state_name(st->optimizer, k),
                         model[i].name);
            tensors[at].name = names[at];
            tensors[at].ndim = model[i].ndim;
            memcpy(tensors[at].shape, model[i].shape, sizeof model[i].shape);
            tensors[at].data = base + model[i].offset;
        }
    }
    /* A state no run could resume from (bg_train_state_load refuses it) is
     * not written over one it could. Weights made so by an update, or the
     * optimizer's state by gradients too large for it (Adam's second
     * moment squares them). */
    for (int t = 0; t < total; t++) {
        char what[BG_ERROR_MAX];
        if (!bg_checkpoint_describe_nonfinite(names[t], tensors[t].data, model[t % count].count,
                                              what, sizeof what))
            continue;
        status = bg_error_set(
            BG_ERR_NUMERIC, "%s: not written: %s, which no run could resume from (%s)", path, what,
            t < count ? "an update left them so: a smaller learning rate or "
                        "weight decay may keep them finite"
                      : "the optimizer's state overflowed: --clip-grad-norm may "
                        "keep it finite");
        goto done;
    }
    char fingerprint[32], epoch[32], rng[80], loss_sum[40], seed[24], counts[COUNT_FIELDS][24];
    snprintf(fingerprint, sizeof fingerprint, "%016" PRIx64, spec->fingerprint);
    snprintf(epoch, sizeof epoch, "%d", st->epoch);
    snprintf(rng, sizeof rng, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64,
             st->shuffle_rng.state[0], st->shuffle_rng.state[1], st->shuffle_rng.state[2],
             st->shuffle_rng.state[3]);
    snprintf(loss_sum, sizeof loss_sum, "%.17g", st->epoch_loss_sum); /* round-trips exactly */
    snprintf(seed, sizeof seed, "%" PRIu64, st->seed);
    enum { NAMED = 9 }; /* the values before the settings and the counts */
    const char *keys[NAMED + 2 + COUNT_FIELDS] = {"format",
                                                  "brigade.model",
                                                  "brigade.layers",
                                                  "brigade.kind",
                                                  "brigade.optimizer",
                                                  "brigade.epoch",
                                                  "brigade.shuffle_rng",
                                                  "brigade.epoch_loss_sum",
                                                  "brigade.seed"};
    const char *values[NAMED + 2 + COUNT_FIELDS] = {
        "pt", fingerprint, layers, "training-state", bg_optimizer_kind_name(st->optimizer), epoch,
        rng,  loss_sum,    seed};
    int pairs = NAMED;
    char data_crc32[16];
    if (st->data_crc32_saved) {
        snprintf(data_crc32, sizeof data_crc32, "%08" PRIx32, st->data_crc32);
        keys[pairs] = "brigade.train_crc32";
        values[pairs++] = data_crc32;
    }
    if (st->settings[0] != '\0') {
        keys[pairs] = "brigade.settings";
        values[pairs++] = st->settings;
    }
    for (int f = 0; f < COUNT_FIELDS; f++) {
        /* A batch or training set of 0 is not known: left out, as older
           checkpoints leave it. */
        if (count_value(st, &count_fields[f]) < count_fields[f].least) continue;
        snprintf(counts[f], sizeof counts[f], "%" PRId64, count_value(st, &count_fields[f]));
        keys[pairs] = count_fields[f].key;
        values[pairs++] = counts[f];
    }
    status = bg_checkpoint_save_tensors(path, tensors, total, keys, values, pairs);
done:
    free(layers);
    free(tensors);
    free(names);
    free(model);
    return status;
}

/* A decimal metadata value, or a parse error naming the key; `optional`:
 * a missing key is 0. */
static bg_status_t metadata_count(const char *path, const bg_safetensors_t *file, const char *key,
                                  int optional, int least, int64_t *out) {
    const char *text = bg_safetensors_metadata(file, key);
    uint64_t value = 0;
    const int parsed = text != NULL && bg_parse_digits(text, strlen(text), INT64_MAX, &value);
    if (!(text == NULL && optional) && !parsed)
        return bg_error_set(BG_ERR_PARSE, "%s: metadata '%s' is missing or not a count", path, key);
    if (text != NULL && value < (uint64_t)least)
        return bg_error_set(BG_ERR_PARSE, "%s: metadata '%s' is %s; it is at least %d", path, key,
                            text, least);
    *out = (int64_t)value;
    return BG_OK;
}

/* brigade.seed: a decimal uint64_t; absent from older checkpoints
 * (seed_saved 0). */
static bg_status_t metadata_seed(const char *path, const bg_safetensors_t *file,
                                 bg_train_state_t *st) {
    const char *text = bg_safetensors_metadata(file, "brigade.seed");
    st->seed_saved = text != NULL;
    st->seed = 0;
    if (text != NULL && !bg_parse_digits(text, strlen(text), UINT64_MAX, &st->seed))
        return bg_error_set(BG_ERR_PARSE, "%s: metadata 'brigade.seed' is not a whole number",
                            path);
    return BG_OK;
}

/* brigade.train_crc32: 8 hex digits; absent from older checkpoints
 * (data_crc32_saved 0). */
static bg_status_t metadata_data_crc32(const char *path, const bg_safetensors_t *file,
                                       bg_train_state_t *st) {
    const char *text = bg_safetensors_metadata(file, "brigade.train_crc32");
    st->data_crc32_saved = text != NULL;
    st->data_crc32 = 0;
    if (text == NULL) return BG_OK;
    uint32_t value = 0;
    int digits = 0;
    for (; text[digits] != '\0' && digits < 9; digits++) {
        const char c = text[digits];
        const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) break;
        value = value << 4 | (uint32_t)v;
    }
    if (digits != 8 || text[digits] != '\0')
        return bg_error_set(
            BG_ERR_PARSE, "%s: metadata 'brigade.train_crc32' is not 8 lowercase hex digits", path);
    st->data_crc32 = value;
    return BG_OK;
}

/* brigade.epoch_loss_sum: a finite number (0 when absent, as in older
 * checkpoints). */
static bg_status_t metadata_loss_sum(const char *path, const bg_safetensors_t *file, double *out) {
    const char *text = bg_safetensors_metadata(file, "brigade.epoch_loss_sum");
    *out = 0;
    if (text == NULL) return BG_OK;
    char *end = NULL;
    errno = 0;
    const double value = strtod(text, &end);
    /* Cross-entropy losses are >= 0, and so is their sum. */
    if (text[0] == '\0' || *end != '\0' || errno == ERANGE || !isfinite(value) || value < 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: metadata 'brigade.epoch_loss_sum' is not a number >= 0", path);
    *out = value;
    return BG_OK;
}

/* The counts must tell one story: skipped steps and updates are steps
 * (together, every step), and a step trains on at most a batch, so the
 * samples of the epoch trained on are at most the steps times the batch
 * (none before the first step).
 * Where the batch and the training set are recorded, one run on them (a
 * resume keeps both) is at whole batches into its epoch, and at the step
 * that the whole epochs before and those batches make. The epoch's mean
 * loss divides its sum by the steps it counts: those of the epoch but the
 * skipped, where the file records them (`file`: which it does). */
static bg_status_t check_counts(const char *path, const bg_safetensors_t *file,
                                const bg_train_state_t *st) {
    /* Older checkpoints lack these: their counts read 0, and say nothing. */
    const int counted = bg_safetensors_metadata(file, "brigade.epoch_steps") != NULL;
    const int skipped = bg_safetensors_metadata(file, "brigade.skipped_steps") != NULL;
    /* The epoch's loss sum and its step count came into the format together
     * (a mean needs both): one without the other is an edit. */
    const int summed = bg_safetensors_metadata(file, "brigade.epoch_loss_sum") != NULL;
    if (summed != counted)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: metadata '%s' without '%s' (a training state records the "
                            "epoch's loss sum and its steps together)",
                            path, summed ? "brigade.epoch_loss_sum" : "brigade.epoch_steps",
                            summed ? "brigade.epoch_steps" : "brigade.epoch_loss_sum");
    if (st->skipped_steps > st->step)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.skipped_steps %lld is more than brigade.step %lld", path,
                            (long long)st->skipped_steps, (long long)st->step);
    if (st->optimizer_steps > st->step)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.optimizer_steps %lld is more than brigade.step %lld", path,
                            (long long)st->optimizer_steps, (long long)st->step);
    /* Every step updates the weights or is skipped (where the file records
     * the skipped ones). */
    if (skipped && st->optimizer_steps != st->step - st->skipped_steps)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.optimizer_steps %lld and brigade.skipped_steps %lld do "
                            "not add up to brigade.step %lld (each step updates the weights or "
                            "is skipped)",
                            path, (long long)st->optimizer_steps, (long long)st->skipped_steps,
                            (long long)st->step);
    /* The steps whose losses the epoch's mean divides by. */
    if (st->epoch_steps > st->step)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.epoch_steps %lld is more than brigade.step %lld", path,
                            (long long)st->epoch_steps, (long long)st->step);
    if (counted && st->epoch_steps == 0 && st->epoch_loss_sum > 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.epoch_loss_sum %g is the sum of no steps "
                            "(brigade.epoch_steps 0)",
                            path, st->epoch_loss_sum);
    if (st->position > 0 && st->step == 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.position %lld is samples into an epoch, but brigade.step "
                            "is 0: no step trained on them",
                            path, (long long)st->position);
    if (st->position > 0 && st->batch > 0 && (st->position - 1) / st->batch >= st->step)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.position %lld is more samples than brigade.step %lld "
                            "steps of brigade.batch %lld train on",
                            path, (long long)st->position, (long long)st->step,
                            (long long)st->batch);
    if (st->batch < 1 || st->train_samples < 1) return BG_OK; /* older checkpoints */
    if (st->position % st->batch != 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.position %lld is not a whole number of brigade.batch "
                            "%lld",
                            path, (long long)st->position, (long long)st->batch);
    /* Every step of the epoch counts in its mean but those skipped (of the
     * run's, where the file records them). */
    const int64_t into_epoch = st->position / st->batch;
    if (st->epoch_steps > into_epoch)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.epoch_steps %lld is more steps than brigade.position "
                            "%lld is into its epoch at brigade.batch %lld (%lld)",
                            path, (long long)st->epoch_steps, (long long)st->position,
                            (long long)st->batch, (long long)into_epoch);
    if (counted && skipped && st->epoch_steps < into_epoch - st->skipped_steps)
        return bg_error_set(
            BG_ERR_PARSE,
            "%s: brigade.epoch_steps %lld is fewer than the %lld steps "
            "brigade.position %lld is into its epoch less the brigade.skipped_steps "
            "%lld of the run",
            path, (long long)st->epoch_steps, (long long)into_epoch, (long long)st->position,
            (long long)st->skipped_steps);
    const int64_t per_epoch = bg_train_steps_per_epoch(st->train_samples, st->batch);
    const double want = bg_train_step_at(st->epoch, st->position, st->train_samples, st->batch);
    if ((double)st->step != want)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.step %lld does not match brigade.epoch %d and "
                            "brigade.position %lld: epochs of %lld steps (brigade.train_samples "
                            "%lld at brigade.batch %lld) put that position at step %.0f",
                            path, (long long)st->step, st->epoch, (long long)st->position,
                            (long long)per_epoch, (long long)st->train_samples,
                            (long long)st->batch, want);
    return BG_OK;
}

/* Adam's second moments are averages of squares: a negative one would make
 * its update's square root NaN at the first step. */
static bg_status_t check_second_moments(const char *path, const char *name, const float *v,
                                        int64_t count) {
    for (int64_t i = 0; i < count; i++)
        if (v[i] < 0)
            return bg_error_set(BG_ERR_PARSE,
                                "%s: tensor '%s'[%lld] is %g; Adam's v is never below 0", path,
                                name, (long long)i, (double)v[i]);
    return BG_OK;
}

/* SGD keeps momentum buffers only with momentum. A resume that differs
 * from the saved run would drop them, or start them from zero mid-run. */
static bg_status_t check_momentum(const char *path, const bg_safetensors_t *file,
                                  const bg_train_state_t *st) {
    if (st->optimizer != BG_OPTIMIZER_SGD) return BG_OK;
    static const char prefix[] = "optimizer.momentum.";
    bool saved = false;
    for (int i = 0; !saved && i < file->count; i++)
        saved = strncmp(file->entries[i].name, prefix, sizeof prefix - 1) == 0;
    if (saved && st->states == 0)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: saved by a run with SGD momentum (its buffers are in the file); "
                            "this run has --momentum 0 and would drop them: resume with the "
                            "saved run's --momentum",
                            path);
    if (!saved && st->states > 0)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: saved by a run without momentum (--momentum 0), so it holds no "
                            "momentum buffers; resume with --momentum 0, or start a new run from "
                            "its weights with --load",
                            path);
    return BG_OK;
}

static bg_status_t read_tensor(const char *path, const bg_safetensors_t *file, const char *name,
                               const bg_checkpoint_tensor_t *want, float *out) {
    const bg_safetensors_entry_t *e = bg_safetensors_find(file, name);
    if (e == NULL) return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' is missing", path, name);
    BG_CHECK(bg_checkpoint_check_entry(path, e, name, want->ndim, want->shape));
    bg_f32_le_copy(out + want->offset, file->data + e->begin, sizeof(float) * (size_t)want->count);
    return bg_checkpoint_check_finite(path, name, out + want->offset, want->count);
}

static int name_compare(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

/* Whether `name` is "optimizer.S.REST" with S no state of st's optimizer
 * keeps (Adam keeps m and v, SGD with momentum momentum). */
static bool other_rule_state(const char *name, const bg_train_state_t *st) {
    static const char prefix[] = "optimizer.";
    if (strncmp(name, prefix, sizeof prefix - 1) != 0) return false;
    const char *state = name + sizeof prefix - 1, *dot = strchr(state, '.');
    if (dot == NULL) return false;
    for (int k = 0; k < st->states; k++) {
        const char *own = state_name(st->optimizer, k);
        if (strlen(own) == (size_t)(dot - state) && strncmp(state, own, strlen(own)) == 0)
            return false;
    }
    return true;
}

/* Refuses a file holding a tensor that is neither one of the model's
 * `count` tensors nor their optimizer state, as --load does (a file holds
 * every one of those, checked before: its tensors are then more). Both
 * name lists sorted, one walk. */
static bg_status_t refuse_foreign_tensor(const char *path, const bg_safetensors_t *file,
                                         const bg_checkpoint_tensor_t *model, int count,
                                         const bg_train_state_t *st) {
    const int total = count * (1 + st->states);
    char(*names)[STATE_NAME] = calloc((size_t)total + 1, sizeof *names);
    if (names == NULL) return bg_error_set(BG_ERR_NOMEM, "training state: out of memory");
    for (int k = -1, at = 0; k < st->states; k++)
        for (int i = 0; i < count; i++, at++) {
            if (k < 0)
                snprintf(names[at], STATE_NAME, "%s", model[i].name);
            else
                snprintf(names[at], STATE_NAME, "optimizer.%s.%s", state_name(st->optimizer, k),
                         model[i].name);
        }
    qsort(names, (size_t)total, sizeof *names, name_compare);
    bg_status_t status = BG_OK;
    for (int f = 0, n = 0; f < file->count; f++) {
        const char *name = file->by_name[f]->name;
        while (n < total && strcmp(names[n], name) < 0) n++;
        if ((n == total || strcmp(names[n], name) != 0) && other_rule_state(name, st)) {
            /* Another rule's state (SGD's momentum beside Adam's m and v). */
            status = bg_error_set(BG_ERR_INVALID,
                                  "%s: tensor '%s' is optimizer state that this run's optimizer "
                                  "(%s) does not keep",
                                  path, name, bg_optimizer_kind_name(st->optimizer));
            break;
        }
        if (n == total || strcmp(names[n], name) != 0) {
            status = bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' is not part of this model", path,
                                  name);
            break;
        }
    }
    free(names);
    return status;
}

static bg_status_t read_state(const char *path, const bg_safetensors_t *file,
                              const bg_model_spec_t *spec, bg_train_state_t *st) {
    char want[32];
    snprintf(want, sizeof want, "%016" PRIx64, spec->fingerprint);
    const char *model = bg_safetensors_metadata(file, "brigade.model");
    const char *kind = bg_safetensors_metadata(file, "brigade.kind");
    /* A file of another tool, or brigade's weights: said as such, before
     * the fingerprint it may not have. (A kind other than training-state
     * was refused as the file was read, bg_checkpoint_verify.) */
    if (kind == NULL && file->count == 0)
        return bg_error_set(BG_ERR_INVALID, "%s: holds no tensors, not a training state to resume",
                            path);
    if (kind == NULL)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: holds weights only, not a training state to resume (use --load)",
                            path);
    bg_checkpoint_info_t other = {0};
    if (model == NULL || bg_checkpoint_other_model(file, spec, &other))
        return bg_error_set(BG_ERR_INVALID,
                            "%s: checkpoint belongs to another model (fingerprint %s, this model "
                            "is %s%s%s)",
                            path, model == NULL ? "none" : other.other_model, want,
                            other.difference[0] ? "; " : "", other.difference);
    const char *optimizer = bg_safetensors_metadata(file, "brigade.optimizer");
    if (optimizer == NULL)
        return bg_error_set(BG_ERR_PARSE, "%s: metadata 'brigade.optimizer' is missing", path);
    if (strcmp(optimizer, bg_optimizer_kind_name(st->optimizer)) != 0)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: saved with optimizer %s; this run uses %s (and its state)", path,
                            optimizer, bg_optimizer_kind_name(st->optimizer));
    BG_CHECK(check_momentum(path, file, st));
    int64_t epoch = 0;
    for (int f = 0; f < COUNT_FIELDS; f++)
        BG_CHECK(metadata_count(path, file, count_fields[f].key, count_fields[f].later,
                                count_fields[f].least, count_of(st, &count_fields[f])));
    BG_CHECK(metadata_seed(path, file, st));
    BG_CHECK(metadata_data_crc32(path, file, st));
    const char *settings = bg_safetensors_metadata(file, "brigade.settings");
    snprintf(st->settings, sizeof st->settings, "%s", settings != NULL ? settings : "");
    BG_CHECK(metadata_count(path, file, "brigade.epoch", 0, 0, &epoch));
    BG_CHECK(metadata_loss_sum(path, file, &st->epoch_loss_sum));
    /* A run that ends its last epoch saves the next one's number. */
    if (epoch < 1 || epoch > BG_TRAIN_MAX_EPOCHS + 1)
        return bg_error_set(BG_ERR_PARSE, "%s: brigade.epoch %lld is out of range", path,
                            (long long)epoch);
    st->epoch = (int)epoch;
    BG_CHECK(check_counts(path, file, st));
    /* Files from before brigade.skipped_steps (--nan skip is older than the
     * key) took a step for each update and skipped the rest: counted so,
     * the run's --nan-limit covers them, and a save of the resumed run
     * writes counts that add up. */
    if (bg_safetensors_metadata(file, "brigade.skipped_steps") == NULL)
        st->skipped_steps = st->step - st->optimizer_steps;
    const char *rng = bg_safetensors_metadata(file, "brigade.shuffle_rng");
    if (rng == NULL || strlen(rng) != 64)
        return bg_error_set(BG_ERR_PARSE, "%s: brigade.shuffle_rng is missing or malformed", path);
    for (int i = 0; i < 4; i++) {
        char part[17];
        memcpy(part, rng + 16 * i, 16);
        part[16] = '\0';
        char *end;
        /* Hex digits only: strtoull would also take a sign or spaces. */
        st->shuffle_rng.state[i] = strtoull(part, &end, 16);
        if (*end != '\0' || strspn(part, "0123456789abcdefABCDEF") != 16)
            return bg_error_set(BG_ERR_PARSE, "%s: brigade.shuffle_rng is malformed", path);
    }
    /* xoshiro256's one state it never reaches: from it every draw is 0. */
    if ((st->shuffle_rng.state[0] | st->shuffle_rng.state[1] | st->shuffle_rng.state[2] |
         st->shuffle_rng.state[3]) == 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: brigade.shuffle_rng is all zeros, a state no generator reaches",
                            path);
    bg_checkpoint_tensor_t *model_tensors = NULL;
    int count = 0;
    BG_CHECK(bg_checkpoint_model_tensors(spec, &model_tensors, &count));
    bg_status_t status = BG_OK;
    for (int i = 0; status == BG_OK && i < count; i++) {
        status = read_tensor(path, file, model_tensors[i].name, &model_tensors[i], st->params);
        for (int k = 0; status == BG_OK && k < st->states; k++) {
            char name[STATE_NAME];
            snprintf(name, sizeof name, "optimizer.%s.%s", state_name(st->optimizer, k),
                     model_tensors[i].name);
            status = read_tensor(path, file, name, &model_tensors[i], st->state[k]);
            if (status == BG_OK && st->optimizer == BG_OPTIMIZER_ADAM && k == 1)
                status = check_second_moments(path, name, st->state[k] + model_tensors[i].offset,
                                              model_tensors[i].count);
        }
    }
    if (status == BG_OK && file->count != count * (1 + st->states))
        status = refuse_foreign_tensor(path, file, model_tensors, count, st);
    free(model_tensors);
    return status;
}

bg_status_t bg_train_state_load(const char *path, const bg_model_spec_t *spec,
                                const bg_optimizer_config_t *optimizer, bg_train_state_t *st) {
    bg_safetensors_t *file = NULL;
    BG_CHECK(bg_checkpoint_read(path, &file));
    bg_status_t status = bg_train_state_init(st, spec, optimizer);
    if (status == BG_OK) status = read_state(path, file, spec, st);
    if (status != BG_OK) bg_train_state_free(st);
    bg_safetensors_destroy(file);
    return status;
}
