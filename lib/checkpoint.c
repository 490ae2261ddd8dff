#include "checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"
#include "safetensors.h"

enum { NAME_CAPACITY = 32 };

/* One parameter tensor of the model: its name, shape and offset in the flat
 * parameter vector. */
typedef struct tensor_slot {
    char name[NAME_CAPACITY];
    int ndim;
    int64_t shape[4];
    int64_t offset, count;
} tensor_slot_t;

/* Lists the model's parameter tensors in flat order; returns how many. */
static int list_tensors(const bg_model_spec_t *spec, tensor_slot_t *slots) {
    int n = 0;
    int64_t offset = 0;
    for (int i = 0; i < spec->num_layers; i++) {
        const bg_layer_spec_t *l = &spec->layers[i];
        int64_t nw, nb;
        bg_layer_param_counts(l, &nw, &nb);
        if (nw == 0) continue;
        tensor_slot_t *w = &slots[n++], *b = &slots[n++];
        snprintf(w->name, sizeof w->name, "%d.weight", i);
        snprintf(b->name, sizeof b->name, "%d.bias", i);
        if (l->kind == BG_LAYER_CONV2D) {
            w->ndim = 4;
            w->shape[0] = l->filters;
            w->shape[1] = l->in.c;
            w->shape[2] = l->kernel;
            w->shape[3] = l->kernel;
        } else {
            w->ndim = 2;
            w->shape[0] = l->filters;
            w->shape[1] = bg_shape_numel(l->in);
        }
        b->ndim = 1;
        b->shape[0] = l->filters;
        w->offset = offset;
        w->count = nw;
        b->offset = offset + nw;
        b->count = nb;
        offset += nw + nb;
    }
    return n;
}

static bg_status_t slots_create(const bg_model_spec_t *spec, tensor_slot_t **slots, int *count) {
    *slots = calloc((size_t)spec->num_layers * 2 + 1, sizeof **slots);
    if (*slots == NULL) return bg_error_set(BG_ERR_NOMEM, "checkpoint: out of memory");
    *count = list_tensors(spec, *slots);
    return BG_OK;
}

bg_status_t bg_checkpoint_save(const char *path, const bg_model_spec_t *spec, const float *params,
                               int64_t step) {
    tensor_slot_t *slots;
    int count;
    BG_CHECK(slots_create(spec, &slots, &count));
    bg_safetensors_tensor_t *tensors = calloc((size_t)count + 1, sizeof *tensors);
    if (tensors == NULL) {
        free(slots);
        return bg_error_set(BG_ERR_NOMEM, "checkpoint: out of memory");
    }
    for (int i = 0; i < count; i++) {
        tensors[i].name = slots[i].name;
        tensors[i].ndim = slots[i].ndim;
        memcpy(tensors[i].shape, slots[i].shape, sizeof slots[i].shape);
        tensors[i].data = params + slots[i].offset;
    }
    char fingerprint[32], steps[32];
    snprintf(fingerprint, sizeof fingerprint, "%016" PRIx64, spec->fingerprint);
    snprintf(steps, sizeof steps, "%" PRId64, step);
    const char *keys[] = {"format", "brigade.model", "brigade.step"};
    const char *values[] = {"pt", fingerprint, steps};
    bg_status_t st = bg_safetensors_write(path, tensors, count, keys, values, 3);
    free(tensors);
    free(slots);
    return st;
}

static bg_status_t check_entry(const char *path, const bg_safetensors_entry_t *e,
                               const tensor_slot_t *slot) {
    if (strcmp(e->dtype, "F32") != 0)
        return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' is %s; brigade needs F32", path,
                            slot->name, e->dtype);
    int same = e->ndim == slot->ndim;
    for (int d = 0; same && d < slot->ndim; d++) same = e->shape[d] == slot->shape[d];
    if (!same) {
        char want[96] = "", got[96] = "";
        for (int d = 0; d < slot->ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? ", " : "",
                     (long long)slot->shape[d]);
        for (int d = 0; d < e->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
                     (long long)e->shape[d]);
        return bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' has shape [%s]; the model needs [%s]",
                            path, slot->name, got, want);
    }
    return BG_OK;
}

bg_status_t bg_checkpoint_load(const char *path, const bg_model_spec_t *spec, float *params,
                               int64_t *step) {
    bg_safetensors_t *st_file = NULL;
    tensor_slot_t *slots = NULL;
    int count = 0;
    bg_status_t st;
    BG_CHECK_GOTO(bg_safetensors_load(path, &st_file), st, done);
    BG_CHECK_GOTO(slots_create(spec, &slots, &count), st, done);
    const char *fingerprint = bg_safetensors_metadata(st_file, "brigade.model");
    if (fingerprint != NULL) {
        char want[32];
        snprintf(want, sizeof want, "%016" PRIx64, spec->fingerprint);
        if (strcmp(fingerprint, want) != 0) {
            st = bg_error_set(BG_ERR_INVALID,
                              "%s: checkpoint belongs to another model (fingerprint %s, "
                              "this model is %s)",
                              path, fingerprint, want);
            goto done;
        }
    }
    for (int i = 0; i < count; i++) {
        const bg_safetensors_entry_t *e = bg_safetensors_find(st_file, slots[i].name);
        if (e == NULL) {
            st = bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' is missing", path, slots[i].name);
            goto done;
        }
        BG_CHECK_GOTO(check_entry(path, e, &slots[i]), st, done);
        memcpy(params + slots[i].offset, st_file->data + e->begin,
               sizeof(float) * (size_t)slots[i].count);
    }
    if (st_file->count != count) {
        for (int k = 0; k < st_file->count; k++) {
            int known = 0;
            for (int i = 0; i < count && !known; i++)
                known = strcmp(st_file->entries[k].name, slots[i].name) == 0;
            if (!known) {
                st = bg_error_set(BG_ERR_INVALID, "%s: tensor '%s' is not part of this model", path,
                                  st_file->entries[k].name);
                goto done;
            }
        }
    }
    if (step != NULL) {
        const char *text = bg_safetensors_metadata(st_file, "brigade.step");
        *step = 0;
        if (text != NULL) {
            char *end = NULL;
            long long value = strtoll(text, &end, 10);
            if (text[0] == '\0' || *end != '\0' || value < 0) {
                st = bg_error_set(BG_ERR_PARSE, "%s: brigade.step is '%s', not a step count", path,
                                  text);
                goto done;
            }
            *step = value;
        }
    }
    st = BG_OK;
done:
    free(slots);
    bg_safetensors_destroy(st_file);
    return st;
}
