/* Reading and writing profiles as JSON (cJSON). */
#include <errno.h>
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_depth.h"
#include "model_words.h"
#include "profile.h"
#include "text_file.h"

/* The neighbour's op kinds (BG_NEIGHBOUR_*) as the keys of "after_wait"
 * name them. */
static const char *const NEIGHBOUR_OP[BG_NEIGHBOUR_KINDS] = {"forward", "backward", "update"};

enum { MAX_PROFILE_BYTES = 64 << 20 };

/* cJSON_Add*ToObject that clear *ok when the item could not be made (or
 * `object` is NULL, itself not made), so that a profile is written whole
 * or not at all. */
static void add_number(int *ok, cJSON *object, const char *key, double value) {
    if (cJSON_AddNumberToObject(object, key, value) == NULL) *ok = 0;
}

static void add_string(int *ok, cJSON *object, const char *key, const char *value) {
    if (cJSON_AddStringToObject(object, key, value) == NULL) *ok = 0;
}

bg_status_t bg_profile_save(const bg_profile_t *p, const char *path) {
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    int ok = 1; /* cleared by any part that could not be made */
    char fingerprint[32];
    snprintf(fingerprint, sizeof fingerprint, "%016" PRIx64, p->fingerprint);
    add_number(&ok, root, "version", p->version);
    add_string(&ok, root, "model", fingerprint);
    if (p->model_words != NULL) add_string(&ok, root, "model_layers", p->model_words);
    add_string(&ok, root, "device", p->device);
    if (p->optimizer[0] != '\0') {
        add_string(&ok, root, "optimizer", p->optimizer);
        add_number(&ok, root, "optimizer_states", p->optimizer_states);
    }
    add_number(&ok, root, "batch", (double)p->batch);
    cJSON *sizes = p->other_sizes > 0 ? cJSON_AddArrayToObject(root, "other_sizes") : NULL;
    if (p->other_sizes > 0 && sizes == NULL) ok = 0;
    for (int k = 0; sizes != NULL && k < p->other_sizes; k++)
        ok &= cJSON_AddItemToArray(sizes, cJSON_CreateNumber((double)p->other_size[k])) ? 1 : 0;
    add_number(&ok, root, "copy_bytes_per_s", p->copy_bytes_per_s);
    if (p->version >= 2) {
        add_number(&ok, root, "stash_slots", p->stash_slots);
        add_number(&ok, root, "handoff_s", p->handoff_s);
        add_number(&ok, root, "wake_s", p->wake_s);
    }
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    if (layers == NULL) ok = 0;
    for (int i = 0; layers != NULL && i < p->layers; i++) {
        cJSON *l = cJSON_CreateObject();
        add_number(&ok, l, "forward_s", p->layer[i].forward_s);
        add_number(&ok, l, "backward_data_s", p->layer[i].backward_data_s);
        add_number(&ok, l, "backward_weights_s", p->layer[i].backward_weights_s);
        add_number(&ok, l, "update_s", p->layer[i].update_s);
        if (p->version >= 2) {
            add_number(&ok, l, "send_s", p->layer[i].send_s);
            add_number(&ok, l, "recv_s", p->layer[i].recv_s);
            add_number(&ok, l, "weight_check_s", p->layer[i].weight_check_s);
        }
        cJSON *at = p->other_sizes > 0 ? cJSON_AddArrayToObject(l, "at_other_sizes") : NULL;
        if (p->other_sizes > 0 && at == NULL) ok = 0;
        for (int k = 0; at != NULL && k < p->other_sizes; k++) {
            const bg_layer_at_size_t *t = &p->layer[i].at_size[k];
            cJSON *o = cJSON_CreateObject();
            ok &= cJSON_AddItemToArray(at, o) ? 1 : 0;
            add_number(&ok, o, "forward_s", t->forward_s);
            add_number(&ok, o, "backward_data_s", t->backward_data_s);
            add_number(&ok, o, "backward_weights_s", t->backward_weights_s);
        }
        ok &= cJSON_AddItemToArray(layers, l) ? 1 : 0;
    }
    cJSON *stages = p->stage_count > 0 ? cJSON_AddArrayToObject(root, "stages") : NULL;
    if (p->stage_count > 0 && stages == NULL) ok = 0;
    for (int i = 0; stages != NULL && i < p->stage_count; i++) {
        const bg_stage_profile_t *sp = &p->stage[i];
        cJSON *o = cJSON_CreateObject();
        add_number(&ok, o, "first", sp->first);
        add_number(&ok, o, "last", sp->last);
        add_number(&ok, o, "slots", sp->slots);
        add_number(&ok, o, "forward_s", sp->forward_s);
        add_number(&ok, o, "backward_s", sp->backward_s);
        add_number(&ok, o, "update_s", sp->update_s);
        add_number(&ok, o, "recv_s", sp->recv_s);
        add_number(&ok, o, "send_s", sp->send_s);
        add_number(&ok, o, "grad_recv_s", sp->grad_recv_s);
        add_number(&ok, o, "grad_send_s", sp->grad_send_s);
        add_number(&ok, o, "check_s", sp->check_s);
        add_number(&ok, o, "grad_check_s", sp->grad_check_s);
        add_number(&ok, o, "weight_check_s", sp->weight_check_s);
        const bg_stage_load_t *l = &sp->loaded;
        if (l->forward_s > 0 || l->backward_s > 0) {
            cJSON *lo = cJSON_AddObjectToObject(o, "loaded");
            add_number(&ok, lo, "forward_s", l->forward_s);
            add_number(&ok, lo, "backward_s", l->backward_s);
            add_number(&ok, lo, "update_s", l->update_s);
            add_number(&ok, lo, "copies_s", l->copies_s);
        }
        const bg_stage_after_wait_t *w = &sp->after_wait;
        if (w->forward[BG_NEIGHBOUR_FORWARD] > 0) {
            cJSON *aw = cJSON_AddObjectToObject(o, "after_wait");
            for (int k = 0; k < BG_NEIGHBOUR_KINDS; k++) {
                char key[32];
                snprintf(key, sizeof key, "forward_after_%s", NEIGHBOUR_OP[k]);
                add_number(&ok, aw, key, w->forward[k]);
                snprintf(key, sizeof key, "backward_after_%s", NEIGHBOUR_OP[k]);
                add_number(&ok, aw, key, w->backward[k]);
            }
        }
        ok &= cJSON_AddItemToArray(stages, o) ? 1 : 0;
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    bg_status_t st = bg_text_file_write(path, text, "profile");
    free(text);
    return st;
}

/* A finite number field of `object` (`least` is the least it may be, in
 * words, for the message), or a parse error. */
static bg_status_t finite_field(const char *path, const cJSON *object, const char *key,
                                const char *where, const char *least, double *out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    if (cJSON_IsNumber(item) && !isfinite(item->valuedouble))
        return bg_error_set(BG_ERR_PARSE,
                            "%s: %s: '%s' is beyond a double's range (as 1e999 is); it must be "
                            "a finite number %s",
                            path, where, key, least);
    if (!cJSON_IsNumber(item))
        return bg_error_set(BG_ERR_PARSE, "%s: %s: '%s' must be a number %s", path, where, key,
                            least);
    *out = item->valuedouble;
    return BG_OK;
}

/* A non-negative finite number field of `object`, or a parse error. */
static bg_status_t number_field(const char *path, const cJSON *object, const char *key,
                                const char *where, double *out) {
    BG_CHECK(finite_field(path, object, key, where, ">= 0", out));
    if (*out < 0)
        return bg_error_set(BG_ERR_PARSE, "%s: %s: '%s' must be a number >= 0", path, where, key);
    return BG_OK;
}

/* A time in seconds: a number field from 0 to a day (one op of one
 * micro-batch; more is a damaged or hand-edited file, whose figures would
 * swamp every plan), or a parse error. */
static bg_status_t time_field(const char *path, const cJSON *object, const char *key,
                              const char *where, double *out) {
    enum { DAY_S = 86400 };
    BG_CHECK(number_field(path, object, key, where, out));
    if (*out > DAY_S)
        return bg_error_set(BG_ERR_PARSE, "%s: %s: '%s' is %g s; a time must be from 0 to %d s",
                            path, where, key, *out, DAY_S);
    return BG_OK;
}

/* A time_field that older profiles of the same version may lack: 0 then. */
static bg_status_t optional_time_field(const char *path, const cJSON *object, const char *key,
                                       const char *where, double *out) {
    *out = 0;
    if (cJSON_GetObjectItemCaseSensitive(object, key) == NULL) return BG_OK;
    return time_field(path, object, key, where, out);
}

/* A whole-number field of `object` from min to max, or a parse error. */
static bg_status_t whole_field(const char *path, const cJSON *object, const char *key,
                               const char *where, double min, double max, double *out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) ||
        item->valuedouble != floor(item->valuedouble) || item->valuedouble < min ||
        item->valuedouble > max)
        return bg_error_set(BG_ERR_PARSE, "%s: %s: '%s' must be a whole number from %g to %g", path,
                            where, key, min, max);
    *out = item->valuedouble;
    return BG_OK;
}

/* A layer's "at_other_sizes": one object of three times for each of the
 * profile's other sizes, absent where it has none. */
static bg_status_t load_other_sizes(const char *path, const cJSON *layer, const char *where,
                                    const bg_profile_t *p, bg_layer_profile_t *out) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(layer, "at_other_sizes");
    if (list == NULL && p->other_sizes == 0) return BG_OK;
    if (p->other_sizes == 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: %s has 'at_other_sizes' but the profile times no other sizes "
                            "('other_sizes' absent or empty)",
                            path, where);
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != p->other_sizes)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: %s needs 'at_other_sizes', a list of %d objects: its times at "
                            "each of 'other_sizes'",
                            path, where, p->other_sizes);
    const cJSON *o = list->child;
    for (int k = 0; k < p->other_sizes; k++, o = o->next) {
        char at[64];
        snprintf(at, sizeof at, "%s at %lld sample%s", where, (long long)p->other_size[k],
                 p->other_size[k] == 1 ? "" : "s");
        if (!cJSON_IsObject(o))
            return bg_error_set(BG_ERR_PARSE, "%s: %s: not an object of times", path, at);
        bg_layer_at_size_t *t = &out->at_size[k];
        BG_CHECK(time_field(path, o, "forward_s", at, &t->forward_s));
        BG_CHECK(time_field(path, o, "backward_data_s", at, &t->backward_data_s));
        BG_CHECK(time_field(path, o, "backward_weights_s", at, &t->backward_weights_s));
    }
    return BG_OK;
}

/* The optional "other_sizes": up to BG_PROFILE_MAX_OTHER_SIZES whole sizes,
 * ascending, none equal to the profile's batch. */
static bg_status_t load_sizes(const char *path, const cJSON *root, bg_profile_t *p) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "other_sizes");
    if (list == NULL) return BG_OK;
    const int count = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
    if (count < 0 || count > BG_PROFILE_MAX_OTHER_SIZES)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: profile: 'other_sizes' must be a list of up to %d micro-batch "
                            "sizes",
                            path, BG_PROFILE_MAX_OTHER_SIZES);
    const cJSON *item = list->child;
    for (int k = 0; k < count; k++, item = item->next) {
        const double v = cJSON_IsNumber(item) ? item->valuedouble : -1;
        if (!(v >= 1 && v <= 1e9 && v == floor(v)) || v == (double)p->batch ||
            (k > 0 && v <= (double)p->other_size[k - 1]))
            return bg_error_set(BG_ERR_PARSE,
                                "%s: profile: 'other_sizes' must be whole micro-batch sizes from "
                                "1, ascending, none the profile's 'batch' (%lld); entry %d (from "
                                "0) is not",
                                path, (long long)p->batch, k);
        p->other_size[k] = (int64_t)v;
    }
    p->other_sizes = count;
    return BG_OK;
}

/* The optional "optimizer" and "optimizer_states" (absent from older
 * profiles: p->optimizer "" and states -1). */
static bg_status_t load_optimizer(const char *path, const cJSON *root, bg_profile_t *p) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    p->optimizer[0] = '\0';
    p->optimizer_states = -1;
    if (name == NULL && cJSON_GetObjectItemCaseSensitive(root, "optimizer_states") != NULL)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: 'optimizer_states' without 'optimizer' (brigade profile writes "
                            "both, older profiles neither)",
                            path);
    if (name == NULL) return BG_OK;
    bg_optimizer_kind_t kind;
    double states = 0;
    if (!cJSON_IsString(name) || bg_optimizer_kind_parse(name->valuestring, &kind) != BG_OK)
        return bg_error_set(BG_ERR_PARSE, "%s: 'optimizer' must be \"adam\" or \"sgd\"", path);
    BG_CHECK(whole_field(path, root, "optimizer_states", "profile", 0, 2, &states));
    /* Adam keeps 2 buffers; SGD 1 with momentum, else 0. */
    if ((kind == BG_OPTIMIZER_ADAM) != (states == 2))
        return bg_error_set(BG_ERR_PARSE, "%s: 'optimizer_states' %g does not fit %s", path, states,
                            bg_optimizer_kind_name(kind));
    snprintf(p->optimizer, sizeof p->optimizer, "%s", bg_optimizer_kind_name(kind));
    p->optimizer_states = (int)states;
    return BG_OK;
}

bg_status_t bg_profile_check_optimizer(const bg_profile_t *p, const char *path,
                                       const bg_optimizer_config_t *optimizer) {
    const int states = bg_optimizer_state_buffers(optimizer);
    if (p->optimizer[0] == '\0' ||
        (strcmp(p->optimizer, bg_optimizer_kind_name(optimizer->kind)) == 0 &&
         p->optimizer_states == states))
        return BG_OK;
    return bg_error_set(BG_ERR_INVALID,
                        "%s: its update times are for %s with %d state buffer%s; this run uses %s "
                        "with %d (run brigade profile with this run's optimizer)",
                        path, p->optimizer, p->optimizer_states,
                        p->optimizer_states == 1 ? "" : "s",
                        bg_optimizer_kind_name(optimizer->kind), states);
}

/* One ratio of an "after_wait" object: a number >= 0; one past
 * BG_PROFILE_MAX_AFTER_WAIT_RATIO is read as 0, not measured, as the
 * profiler has kept such since 2026-12-04 (a file from before, refused
 * whole until 2026-12-06, or an edited one). */
static bg_status_t ratio_field(const char *path, const cJSON *aw, const char *key,
                               const char *where, double *out) {
    BG_CHECK(number_field(path, aw, key, where, out));
    *out = bg_profile_plausible_ratio(*out);
    return BG_OK;
}

/* A stage entry's "after_wait" object: a forward's and a backward's ratio
 * after each kind of the neighbour's op. */
static bg_status_t read_after_wait(const char *path, const cJSON *aw, int entry,
                                   bg_stage_after_wait_t *out) {
    char where[48];
    snprintf(where, sizeof where, "stage entry %d 'after_wait'", entry);
    if (!cJSON_IsObject(aw))
        return bg_error_set(BG_ERR_PARSE, "%s: %s must be an object", path, where);
    /* The first shape of these figures (wait_s, forward, backward: one
     * ratio per op kind, written by development builds before the six):
     * read as not measured, as a profile without them is. */
    if (cJSON_GetObjectItemCaseSensitive(aw, "wait_s") != NULL) {
        *out = (bg_stage_after_wait_t){0};
        return BG_OK;
    }
    for (int k = 0; k < BG_NEIGHBOUR_KINDS; k++) {
        char key[32];
        snprintf(key, sizeof key, "forward_after_%s", NEIGHBOUR_OP[k]);
        BG_CHECK(ratio_field(path, aw, key, where, &out->forward[k]));
        snprintf(key, sizeof key, "backward_after_%s", NEIGHBOUR_OP[k]);
        BG_CHECK(ratio_field(path, aw, key, where, &out->backward[k]));
    }
    return BG_OK;
}

/* Whether two stage entries time the same layers with the same slots. */
static int same_stage(const bg_stage_profile_t *a, const bg_stage_profile_t *b) {
    return a->first == b->first && a->last == b->last && a->slots == b->slots;
}

/* Orders stage entries by their layers and slots, then by their place in
 * the file. */
static int compare_stage_entries(const void *a, const void *b) {
    const bg_stage_profile_t *x = *(const bg_stage_profile_t *const *)a;
    const bg_stage_profile_t *y = *(const bg_stage_profile_t *const *)b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->last != y->last) return x->last < y->last ? -1 : 1;
    if (x->slots != y->slots) return x->slots < y->slots ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* BG_ERR_PARSE when two of p's stage entries time the same layers with the
 * same slots, naming the first entry that repeats an earlier one. Sorts
 * (a hostile profile may hold hundreds of thousands of entries). */
static bg_status_t check_repeated_stages(const char *path, const bg_profile_t *p) {
    const bg_stage_profile_t **sorted =
        malloc((size_t)(p->stage_count > 0 ? p->stage_count : 1) * sizeof *sorted);
    if (sorted == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    for (int i = 0; i < p->stage_count; i++) sorted[i] = &p->stage[i];
    qsort(sorted, (size_t)p->stage_count, sizeof *sorted, compare_stage_entries);
    /* Equal entries sort together, in file order: the entry that repeats
       first is the second of some run, and what it repeats is that run's
       first. */
    const bg_stage_profile_t *later = NULL, *earlier = NULL;
    for (int i = 1; i < p->stage_count; i++) {
        const bg_stage_profile_t *a = sorted[i - 1], *b = sorted[i];
        const int starts_run = i == 1 || !same_stage(sorted[i - 2], a);
        if (same_stage(a, b) && starts_run && (later == NULL || b < later)) {
            later = b;
            earlier = a;
        }
    }
    free(sorted);
    if (later == NULL) return BG_OK;
    return bg_error_set(BG_ERR_PARSE,
                        "%s: stage entry %d repeats stage entry %d (layers %d..%d, %d slot%s)",
                        path, (int)(later - p->stage), (int)(earlier - p->stage), later->first,
                        later->last - 1, later->slots, later->slots == 1 ? "" : "s");
}

/* A model fingerprint as profiles hold it: 16 lowercase hexadecimal digits. */
static int is_fingerprint(const char *text) {
    size_t n = 0;
    for (; text[n] != '\0'; n++)
        if (!isdigit((unsigned char)text[n]) && !(text[n] >= 'a' && text[n] <= 'f')) return 0;
    return n == 16;
}

/* The optional "stages" list of a version 2 profile. */
static bg_status_t load_stages(const char *path, const cJSON *root, bg_profile_t *p) {
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(root, "stages");
    if (stages == NULL) return BG_OK;
    if (!cJSON_IsArray(stages))
        return bg_error_set(BG_ERR_PARSE, "%s: 'stages' must be a list", path);
    const int count = cJSON_GetArraySize(stages);
    p->stage = calloc((size_t)(count > 0 ? count : 1), sizeof *p->stage);
    if (p->stage == NULL) return bg_error_set(BG_ERR_NOMEM, "profile: out of memory");
    /* Walked by its links: cJSON_GetArrayItem(i) counts from the start. */
    const cJSON *o = stages->child;
    for (int i = 0; i < count; i++, o = o->next) {
        char where[32];
        snprintf(where, sizeof where, "stage entry %d", i);
        bg_stage_profile_t *sp = &p->stage[i];
        double first = 0, last = 0, slots = 0;
        BG_CHECK(number_field(path, o, "first", where, &first));
        BG_CHECK(finite_field(path, o, "last", where, "above first", &last));
        BG_CHECK(finite_field(path, o, "slots", where, ">= 1", &slots));
        if (first != floor(first) || last != floor(last) || slots != floor(slots) ||
            last <= first || last > p->layers || slots < 1 || slots > 1e6)
            return bg_error_set(BG_ERR_PARSE,
                                "%s: %s: needs whole 0 <= first < last <= %d and slots >= 1", path,
                                where, p->layers);
        sp->first = (int)first;
        sp->last = (int)last;
        sp->slots = (int)slots;
        BG_CHECK(time_field(path, o, "forward_s", where, &sp->forward_s));
        BG_CHECK(time_field(path, o, "backward_s", where, &sp->backward_s));
        BG_CHECK(time_field(path, o, "update_s", where, &sp->update_s));
        BG_CHECK(time_field(path, o, "recv_s", where, &sp->recv_s));
        BG_CHECK(time_field(path, o, "send_s", where, &sp->send_s));
        BG_CHECK(time_field(path, o, "grad_recv_s", where, &sp->grad_recv_s));
        BG_CHECK(time_field(path, o, "grad_send_s", where, &sp->grad_send_s));
        BG_CHECK(time_field(path, o, "check_s", where, &sp->check_s));
        BG_CHECK(time_field(path, o, "grad_check_s", where, &sp->grad_check_s));
        BG_CHECK(optional_time_field(path, o, "weight_check_s", where, &sp->weight_check_s));
        /* As for the layers (bg_profile_load): a stage timed whole takes
         * microseconds at least, whatever its layers; less than a clock
         * tells is no measurement, and the simulator would take it. */
        if (!(sp->forward_s + sp->backward_s >= 1e-9))
            return bg_error_set(BG_ERR_PARSE,
                                "%s: %s (layers %d..%d): its forward and backward take %g s in "
                                "all, less than a nanosecond: a profile measures them ('brigade "
                                "profile MODEL -o FILE' writes one)",
                                path, where, sp->first, sp->last - 1,
                                sp->forward_s + sp->backward_s);
        /* Optional: measured beside a co-runner (profiles of two CPU devices). */
        const cJSON *lo = cJSON_GetObjectItemCaseSensitive(o, "loaded");
        if (lo != NULL) {
            char loaded_where[48];
            snprintf(loaded_where, sizeof loaded_where, "stage entry %d 'loaded'", i);
            bg_stage_load_t *l = &sp->loaded;
            if (!cJSON_IsObject(lo))
                return bg_error_set(BG_ERR_PARSE, "%s: %s must be an object", path, loaded_where);
            BG_CHECK(time_field(path, lo, "forward_s", loaded_where, &l->forward_s));
            BG_CHECK(time_field(path, lo, "backward_s", loaded_where, &l->backward_s));
            BG_CHECK(time_field(path, lo, "update_s", loaded_where, &l->update_s));
            BG_CHECK(time_field(path, lo, "copies_s", loaded_where, &l->copies_s));
            /* Past the bound, not measured, as the profiler now keeps it (one
             * written before kept any figure). */
            if (!bg_profile_load_plausible(sp->forward_s + sp->backward_s,
                                           l->forward_s + l->backward_s))
                *l = (bg_stage_load_t){0};
        }
        /* Optional too: ops after a wait (profiles of two CPU devices). */
        const cJSON *aw = cJSON_GetObjectItemCaseSensitive(o, "after_wait");
        if (aw != NULL) BG_CHECK(read_after_wait(path, aw, i, &sp->after_wait));
        p->stage_count++;
    }
    return check_repeated_stages(path, p);
}

static int compare_keys(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A key that appears twice in one object, at any depth, or NULL: cJSON
 * keeps both and reads the first, so an edited profile could say two
 * things at once. Sorts each object's keys (a profile may hold thousands
 * of stage entries, and a hostile one millions of keys). Sets *nomem when
 * it could not look. */
static const char *repeated_key(const cJSON *item, int *nomem) {
    if (item == NULL || *nomem) return NULL;
    if (cJSON_IsObject(item)) {
        size_t count = 0;
        for (const cJSON *a = item->child; a != NULL; a = a->next) count++;
        const char **keys = malloc((count > 0 ? count : 1) * sizeof *keys);
        if (keys == NULL) {
            *nomem = 1;
            return NULL;
        }
        size_t n = 0;
        for (const cJSON *a = item->child; a != NULL; a = a->next)
            if (a->string != NULL) keys[n++] = a->string;
        qsort(keys, n, sizeof *keys, compare_keys);
        const char *twice = NULL;
        for (size_t i = 1; i < n && twice == NULL; i++)
            if (strcmp(keys[i - 1], keys[i]) == 0) twice = keys[i];
        free(keys);
        if (twice != NULL) return twice;
    }
    for (const cJSON *a = item->child; a != NULL; a = a->next) {
        const char *inner = repeated_key(a, nomem);
        if (inner != NULL) return inner;
    }
    return NULL;
}

bg_status_t bg_profile_load(const char *path, const bg_model_spec_t *spec, bg_profile_t **out) {
    char *text = NULL;
    size_t size = 0;
    BG_CHECK(bg_text_file_read(path, MAX_PROFILE_BYTES, "not a profile", &text, &size));
    const bg_status_t st = bg_profile_parse(path, text, spec, out);
    free(text);
    return st;
}

bg_status_t bg_profile_parse(const char *path, const char *text, const bg_model_spec_t *spec,
                             bg_profile_t **out) {
    /* One JSON value and nothing after it but white space: a second value
     * or garbage (two profiles concatenated) is no profile. */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    const long long at = end != NULL ? (long long)(end - text) : -1;
    bg_profile_t *p = NULL;
    bg_status_t st = BG_OK;
    if (root == NULL && at >= 0 && bg_json_too_deep_at(text, (size_t)at)) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: not a JSON profile (byte %lld: arrays and objects nested more than "
                          "%d levels deep; run brigade profile)",
                          path, at, CJSON_NESTING_LIMIT);
        goto done;
    }
    if (root == NULL && at >= 0) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: not a JSON profile (byte %lld: invalid JSON, or more after the "
                          "profile's object; run brigade profile)",
                          path, at);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        st = bg_error_set(BG_ERR_PARSE, "%s: not a JSON profile (run brigade profile)", path);
        goto done;
    }
    int nomem = 0;
    const char *twice = repeated_key(root, &nomem);
    if (nomem) {
        st = bg_error_set(BG_ERR_NOMEM, "%s: out of memory checking its keys", path);
        goto done;
    }
    if (twice != NULL) {
        st = bg_error_set(BG_ERR_PARSE, "%s: key '%s' appears twice in one object", path, twice);
        goto done;
    }
    /* Version 1 had no "version" field. */
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    int format = 1;
    if (version != NULL) {
        if (!cJSON_IsNumber(version) || version->valuedouble != floor(version->valuedouble) ||
            version->valuedouble < 1) {
            st = bg_error_set(BG_ERR_PARSE, "%s: 'version' must be a whole number >= 1", path);
            goto done;
        }
        if (version->valuedouble > BG_PROFILE_VERSION) {
            st = bg_error_set(BG_ERR_PARSE,
                              "%s: profile format version %g; this brigade reads versions 1 to "
                              "%d (run brigade profile again)",
                              path, version->valuedouble, BG_PROFILE_VERSION);
            goto done;
        }
        format = (int)version->valuedouble;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    char want[32];
    snprintf(want, sizeof want, "%016" PRIx64, spec->fingerprint);
    /* A JSON file of another kind (a run's --metrics, say) is named so, not
     * taken for another model's profile; one with a field of the two amiss
     * is told which. */
    const int fingerprint = cJSON_IsString(model) && is_fingerprint(model->valuestring);
    if (!fingerprint && !cJSON_IsArray(layers)) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: not a brigade profile (a profile names its model by a "
                          "fingerprint and has a 'layers' list; 'brigade profile MODEL -o FILE' "
                          "writes one)",
                          path);
        goto done;
    }
    if (!fingerprint) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: 'model' must be the profiled model's fingerprint, 16 lowercase "
                          "hex digits as 'brigade profile' writes it",
                          path);
        goto done;
    }
    /* Optional (older profiles lack it): words, for the message below. */
    const cJSON *words = cJSON_GetObjectItemCaseSensitive(root, "model_layers");
    if (words != NULL && !cJSON_IsString(words)) {
        st =
            bg_error_set(BG_ERR_PARSE,
                         "%s: 'model_layers' must be the model's layers in words (a string)", path);
        goto done;
    }
    if (strcmp(model->valuestring, want) != 0) {
        char difference[BG_MODEL_DIFFERENCE_MAX] = "";
        if (cJSON_IsString(words))
            bg_model_spec_difference(spec, words->valuestring, difference, sizeof difference);
        st = bg_error_set(BG_ERR_INVALID,
                          "%s: profile of another model (its fingerprint %s, "
                          "this model %s%s%s)",
                          path, model->valuestring, want, difference[0] ? "; " : "", difference);
        goto done;
    }
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) != spec->num_layers) {
        st = bg_error_set(BG_ERR_PARSE, "%s: needs a 'layers' list of %d entries", path,
                          spec->num_layers);
        goto done;
    }
    p = calloc(1, sizeof *p);
    BG_ALLOC_CHECK_GOTO(p, st, done);
    p->version = format;
    p->layers = spec->num_layers;
    p->fingerprint = spec->fingerprint;
    p->layer = calloc((size_t)p->layers, sizeof *p->layer);
    BG_ALLOC_CHECK_GOTO(p->layer, st, done);
    p->model_words = bg_model_spec_words(spec); /* the file's, its model being this one */
    BG_ALLOC_CHECK_GOTO(p->model_words, st, done);
    double batch = 0;
    BG_CHECK_GOTO(whole_field(path, root, "batch", "profile", 1, 1e9, &batch), st, done);
    p->batch = (int64_t)batch;
    BG_CHECK_GOTO(load_sizes(path, root, p), st, done);
    /* Any number first: its range below, in one message. */
    BG_CHECK_GOTO(
        finite_field(path, root, "copy_bytes_per_s", "profile", "of bytes/s", &p->copy_bytes_per_s),
        st, done);
    /* Outside these bounds a figure would wreck the plan. */
    if (!(p->copy_bytes_per_s >= BG_PROFILE_MIN_COPY_BYTES_PER_S &&
          p->copy_bytes_per_s <= BG_PROFILE_MAX_COPY_BYTES_PER_S)) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: profile: 'copy_bytes_per_s' is %g; a copy bandwidth must be from "
                          "%g to %g bytes/s",
                          path, p->copy_bytes_per_s, BG_PROFILE_MIN_COPY_BYTES_PER_S,
                          BG_PROFILE_MAX_COPY_BYTES_PER_S);
        goto done;
    }
    BG_CHECK_GOTO(load_optimizer(path, root, p), st, done);
    /* A version 2 file that lost its 'version' would be read as version 1,
     * its stage timings ignored: refused instead. */
    if (format < 2 && (cJSON_GetObjectItemCaseSensitive(root, "stages") != NULL ||
                       cJSON_GetObjectItemCaseSensitive(root, "stash_slots") != NULL)) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: has version 2's 'stages' or 'stash_slots' but %s (version 1 has "
                          "neither); give \"version\": 2, or run brigade profile again",
                          path,
                          version == NULL ? "no 'version' (a file without one is version 1)"
                                          : "\"version\": 1");
        goto done;
    }
    if (format >= 2) {
        double slots = 0;
        BG_CHECK_GOTO(whole_field(path, root, "stash_slots", "profile", 1, 1e6, &slots), st, done);
        BG_CHECK_GOTO(time_field(path, root, "handoff_s", "profile", &p->handoff_s), st, done);
        BG_CHECK_GOTO(time_field(path, root, "wake_s", "profile", &p->wake_s), st, done);
        p->stash_slots = (int)slots;
        BG_CHECK_GOTO(load_stages(path, root, p), st, done);
    }
    /* Older profiles may lack it; all were measured on CPU cores. */
    const cJSON *device = cJSON_GetObjectItemCaseSensitive(root, "device");
    if (device != NULL && (!cJSON_IsString(device) || strcmp(device->valuestring, "cpu") != 0)) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: 'device' must be \"cpu\" (brigade profiles CPU cores only)", path);
        goto done;
    }
    snprintf(p->device, sizeof p->device, "cpu");
    const cJSON *l = layers->child;
    for (int i = 0; i < p->layers; i++, l = l->next) {
        char where[32];
        snprintf(where, sizeof where, "layer %d", i);
        bg_layer_profile_t *lp = &p->layer[i];
        BG_CHECK_GOTO(time_field(path, l, "forward_s", where, &lp->forward_s), st, done);
        BG_CHECK_GOTO(time_field(path, l, "backward_data_s", where, &lp->backward_data_s), st,
                      done);
        BG_CHECK_GOTO(time_field(path, l, "backward_weights_s", where, &lp->backward_weights_s), st,
                      done);
        BG_CHECK_GOTO(time_field(path, l, "update_s", where, &lp->update_s), st, done);
        if (format >= 2) {
            BG_CHECK_GOTO(time_field(path, l, "send_s", where, &lp->send_s), st, done);
            BG_CHECK_GOTO(time_field(path, l, "recv_s", where, &lp->recv_s), st, done);
            BG_CHECK_GOTO(
                optional_time_field(path, l, "weight_check_s", where, &lp->weight_check_s), st,
                done);
        }
        BG_CHECK_GOTO(load_other_sizes(path, l, where, p, lp), st, done);
    }
    /* A model whose ops take no time, or less in all than a clock tells
     * (a nanosecond), is no measurement: the plan's step would be 0 or
     * round to it, and its throughput infinite or shown as 0. */
    double work = 0;
    for (int i = 0; i < p->layers; i++)
        work +=
            p->layer[i].forward_s + p->layer[i].backward_data_s + p->layer[i].backward_weights_s;
    if (!(work >= 1e-9)) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: the layers' forwards and backwards take %g s in all, less than a "
                          "nanosecond: a profile measures them ('brigade profile MODEL -o FILE' "
                          "writes one)",
                          path, work);
        goto done;
    }
    *out = p;
    p = NULL;
done:
    bg_profile_destroy(p);
    cJSON_Delete(root);
    return st;
}
