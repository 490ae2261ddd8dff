#include "devices.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/backend_cuda.h"
#include "parse.h"

/* A whole decimal number in [min, max] from text[0..len). */
static int parse_count(const char *text, size_t len, int min, int max, int *out) {
    uint64_t value;
    if (!bg_parse_digits(text, len, (uint64_t)max, &value) || value < (uint64_t)min) return 0;
    *out = (int)value;
    return 1;
}

static bg_status_t add_device(bg_device_list_t *list, bg_device_kind_t kind, int physical,
                              int virtual_index, int virtual_count) {
    if (list->count >= BG_MAX_DEVICES)
        return bg_error_set(BG_ERR_INVALID, "--devices: more than %d devices", BG_MAX_DEVICES);
    bg_device_t *d = &list->devices[list->count];
    d->kind = kind;
    d->physical = physical;
    if (kind == BG_DEVICE_CPU)
        snprintf(d->name, sizeof d->name, "cpu:%d", list->count);
    else if (virtual_count > 1)
        snprintf(d->name, sizeof d->name, "cuda:%d/%d", physical, virtual_index);
    else
        snprintf(d->name, sizeof d->name, "cuda:%d", physical);
    list->count++;
    return BG_OK;
}

/* One comma-separated item of a cuda list: "cuda:G" or "cuda:GxV". */
static bg_status_t parse_cuda_item(const char *item, size_t len, bg_device_list_t *list) {
    const char *x = memchr(item, 'x', len);
    int gpu, copies = 1;
    size_t gpu_len = x ? (size_t)(x - item) - 5 : len - 5;
    if (len < 6 || strncmp(item, "cuda:", 5) != 0 ||
        !parse_count(item + 5, gpu_len, 0, BG_DEVICES_MAX_CUDA, &gpu) ||
        (x && !parse_count(x + 1, len - (size_t)(x + 1 - item), 1, BG_MAX_DEVICES, &copies)))
        return bg_error_set(BG_ERR_INVALID,
                            "--devices: '%.*s' is not a GPU (expected cuda:G or cuda:GxV, G a "
                            "GPU's number from 0 to %d, V the stages it holds from 1 to %d)",
                            (int)len, item, BG_DEVICES_MAX_CUDA, BG_MAX_DEVICES);
    for (int v = 0; v < copies; v++) BG_CHECK(add_device(list, BG_DEVICE_CUDA, gpu, v, copies));
    return BG_OK;
}

int bg_device_text_gpus(const char *text) {
    if (strcmp(text, "auto") != 0 && strstr(text, "cuda") == NULL) return 0;
    return bg_cuda_device_count();
}

bg_status_t bg_device_list_parse(const char *text, int cores, bg_device_list_t *out) {
    return bg_device_list_parse_on(text, cores, bg_device_text_gpus(text), out);
}

/* Refuses one GPU in two entries of `text` (the entries of `list` from
 * list index item_start[d] on are one entry's): two devices under one
 * name, each planned with the whole GPU's memory. The virtual devices of
 * every entry for it together are what one entry should ask for. */
static bg_status_t refuse_gpu_twice(const bg_device_list_t *list, const int *item_start,
                                    const char *text) {
    for (int e = 0; e < list->count; e++)
        for (int d = 0; d < e; d++) {
            const int physical = list->devices[e].physical;
            if (list->devices[d].physical != physical || item_start[d] == item_start[e]) continue;
            int together = 0;
            for (int k = 0; k < list->count; k++) together += list->devices[k].physical == physical;
            return bg_error_set(BG_ERR_INVALID,
                                "--devices: GPU %d is listed twice in '%s' (for several stages "
                                "on one GPU, write cuda:%dx%d)",
                                physical, text, physical, together);
        }
    return BG_OK;
}

bg_status_t bg_device_list_parse_on(const char *text, int cores, int gpus, bg_device_list_t *out) {
    bg_device_list_t list = {0};
    if (cores < 1) cores = 1;
    if (strstr(text, "cpu") != NULL && strstr(text, "cuda") != NULL)
        return bg_error_set(BG_ERR_INVALID,
                            "--devices: '%s' mixes CPU and CUDA devices; a placement is of one "
                            "kind (cpu:N, or cuda:G,... and cuda:GxV)",
                            text);
    if (strcmp(text, "auto") == 0) {
        for (int i = 0; i < gpus && i < BG_MAX_DEVICES; i++)
            BG_CHECK(add_device(&list, BG_DEVICE_CUDA, i, 0, 1));
        /* Every core, up to the most devices a list holds. */
        for (int i = 0; gpus == 0 && i < cores && i < BG_MAX_DEVICES; i++)
            BG_CHECK(add_device(&list, BG_DEVICE_CPU, i, 0, 1));
    } else if (strcmp(text, "cpu") == 0) {
        BG_CHECK(add_device(&list, BG_DEVICE_CPU, 0, 0, 1));
    } else if (strncmp(text, "cpu:", 4) == 0) {
        const char *count = text + 4;
        const size_t count_len = strlen(count);
        int n;
        if (!parse_count(count, count_len, 1, BG_MAX_DEVICES, &n))
            return bg_error_set(
                BG_ERR_INVALID, "--devices: '%s': expected cpu:N with N from 1 to %d%s", text,
                BG_MAX_DEVICES,
                memchr(count, ',', count_len) != NULL
                    ? " (CPU devices are counted, not listed: cpu:2 is two, "
                      "on cores 0 and 1)"
                : strcmp(count, "0") == 0 ? " (CPU devices are counted: cpu:1 is one, the device "
                                            "named cpu:0, on core 0)"
                                          : "");
        for (int i = 0; i < n; i++) BG_CHECK(add_device(&list, BG_DEVICE_CPU, i % cores, 0, 1));
    } else if (strncmp(text, "cuda", 4) == 0) {
        const char *item = text;
        int item_start[BG_MAX_DEVICES];
        while (*item != '\0') {
            const char *comma = strchr(item, ',');
            size_t len = comma ? (size_t)(comma - item) : strlen(item);
            if (len == 0)
                return bg_error_set(BG_ERR_INVALID,
                                    "--devices: '%s' has an empty entry (two commas together)",
                                    text);
            const int before = list.count;
            BG_CHECK(parse_cuda_item(item, len, &list));
            for (int d = before; d < list.count; d++) item_start[d] = before;
            item += len + (comma ? 1 : 0);
            if (comma && *item == '\0')
                return bg_error_set(BG_ERR_INVALID, "--devices: '%s' ends with a comma", text);
        }
        BG_CHECK(refuse_gpu_twice(&list, item_start, text));
    } else {
        return bg_error_set(BG_ERR_INVALID,
                            "--devices: '%s' is not a device list (expected cpu, cpu:N, "
                            "cuda:0,cuda:1, cuda:0x4 or auto)",
                            text);
    }
    *out = list;
    return BG_OK;
}

bg_status_t bg_device_check_present(const bg_device_t *d, const char *hint) {
    if (d->kind != BG_DEVICE_CUDA) return BG_OK;
    const int seen = bg_cuda_device_count();
    if (bg_cuda_built() && d->physical < seen) return BG_OK;
    char what[BG_ERROR_MAX];
    const char *absent = bg_cuda_absent_reason(), *none = bg_cuda_no_device_reason();
    if (absent != NULL)
        snprintf(what, sizeof what, "%s", absent);
    else if (seen == 0 && none != NULL) /* CUDA's own word */
        snprintf(what, sizeof what, "CUDA sees no GPU on this machine: %s", none);
    else
        snprintf(what, sizeof what, "CUDA sees %d GPU%s on this machine", seen,
                 seen == 1 ? "" : "s");
    /* A virtual device's name (cuda:0/1) is not what the user wrote
     * (cuda:0x4): the GPU's number is. */
    char share[32] = "";
    if (strchr(d->name, '/') != NULL)
        snprintf(share, sizeof share, ", a share of GPU %d", d->physical);
    return bg_error_set(BG_ERR_UNSUPPORTED, "%s%s: %s%s%s%s", d->name, share, what,
                        hint != NULL ? " (" : "", hint != NULL ? hint : "",
                        hint != NULL ? ")" : "");
}

void bg_device_list_print(const bg_device_list_t *list, FILE *out) {
    for (int d = 0; d < list->count; d++)
        fprintf(out, "%s%s", d ? ", " : "", list->devices[d].name);
}

void bg_device_list_reverse(bg_device_list_t *list) {
    for (int i = 0, j = list->count - 1; i < j; i++, j--) {
        const bg_device_t d = list->devices[i];
        list->devices[i] = list->devices[j];
        list->devices[j] = d;
    }
}

const char *bg_device_list_words(const bg_device_list_t *list, char *buf, size_t size) {
    const int count = list->count, shown = count > 4 ? 2 : count;
    size_t at = 0;
    if (size > 0) buf[0] = '\0';
    for (int d = 0; d < shown && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", d ? ", " : "", list->devices[d].name);
    if (count > shown && at < size)
        snprintf(buf + at, size - at, ", ..., %s (%d devices)", list->devices[count - 1].name,
                 count);
    return buf;
}
